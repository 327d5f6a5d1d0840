#!/bin/sh
# daqtune's DPDK engine against dpdk-testpmd (txonly -> rxonly) on the same af_packet vdevs,
# the same veth pair, the same cores and the same frame size, in one run.
#
# Usage (root): bench/dpdk_vs_testpmd.sh [DAQTUNE_DPDK] 
# Environment: DURATION (s, default 5), MSG (self-test message bytes, default 64; frame =
# MSG + 42), MAIN_CPU / TX_CPU / RX_CPU (default: lowest, second-highest, highest allowed CPU),
# TESTPMD (default dpdk-testpmd), PACED_PPS (paced daqtune run, default 400000), ROUNDS
# (alternating testpmd/daqtune rounds, default 3; medians and spread compared, load average per
# run), KEEP_LOGS=1 keeps logs, BEFORE=/path/to/another/daqtune-dpdk adds its unpaced run to
# every round (before/after comparisons in one interleaved run).
# Needs: daqtune-dpdk built with --features dpdk, dpdk-testpmd (Debian/Ubuntu package
# dpdk-dev or dpdk), 2 MiB hugepages or root to reserve them. No iproute2: the veth pair comes
# from `daqtune-dpdk --veth-exec`, in a private namespace that ends with the command.
set -eu

BIN=${1:-$(dirname "$0")/../target/release/daqtune-dpdk}
TESTPMD=${TESTPMD:-dpdk-testpmd}
DURATION=${DURATION:-5}
MSG=${MSG:-64}
PACED_PPS=${PACED_PPS:-400000}
FRAME=$((MSG + 42))
# testpmd's mbufs must hold a whole frame (its default data room is 2176 bytes).
MBUF=2176
[ $((FRAME + 256)) -le $MBUF ] || MBUF=$((FRAME + 256))
# DPDK 22.11's af_packet refuses frames above 1518 bytes through ethdev (testpmd then fails to
# start its port); the veth pair already carries the MTU, so leave testpmd's at its default.
MAXLEN="--max-pkt-len=$FRAME"
[ "$FRAME" -le 1518 ] || MAXLEN=""

[ -x "$BIN" ] || { echo "daqtune-dpdk not found at $BIN (cargo build --release -p daqtune-dpdk --features dpdk)" >&2; exit 2; }
command -v "$TESTPMD" >/dev/null || { echo "$TESTPMD not found (apt-get install dpdk-dev)" >&2; exit 2; }

CPUS=$("$BIN" --dry-run --veth --message-size "$MSG" ${MAIN_CPU:+--main-cpu $MAIN_CPU} ${TX_CPU:+--tx-cpu $TX_CPU} ${RX_CPU:+--rx-cpu $RX_CPU})
LCORES=$(printf '%s' "$CPUS" | sed 's/.*--lcores=0@\([0-9]*\),1@\([0-9]*\),2@\([0-9]*\).*/\1 \2 \3/')
read -r M T R <<EOF
$LCORES
EOF
VDEV0=$(printf '%s' "$CPUS" | sed 's/.*"\(--vdev=net_af_packet0[^"]*\)".*/\1/')
VDEV1=$(printf '%s' "$CPUS" | sed 's/.*"\(--vdev=net_af_packet1[^"]*\)".*/\1/')
MTU=$(printf '%s' "$CPUS" | sed 's/.*"mtu":\([0-9]*\).*/\1/')

# testpmd's EAL memory comes from hugepages like ours: reserve for it when the pool is short.
HP=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
HP_BEFORE=$(cat $HP)
NEED=512
if [ "$(cat /sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages)" -lt $NEED ]; then
  echo $((HP_BEFORE + NEED)) > $HP
fi
RUNDIR_EXISTED=$(if [ -d /var/run/dpdk ]; then echo yes; fi)
TMP=$(mktemp -d)
cleanup() {
  echo "$HP_BEFORE" > $HP
  if [ -n "${KEEP_LOGS:-}" ]; then echo "logs kept in $TMP"; else rm -rf "$TMP"; fi
  # testpmd leaves its runtime directories behind; remove ours (and the parent if we made it).
  rm -rf /var/run/dpdk/tp-rx-* /var/run/dpdk/tp-tx-*
  [ -n "$RUNDIR_EXISTED" ] || rmdir /var/run/dpdk 2>/dev/null || true
}
trap cleanup EXIT INT TERM

EAL="--iova-mode=va --in-memory --no-pci --no-telemetry --log-level=notice"
ROUNDS=${ROUNDS:-3}
# Receive steering (RPS) to the RX CPU, as daqtune-dpdk sets it by default; RPS= turns it off
# for both.
RPS=${RPS-1}
DQ_RPS=""
[ -n "$RPS" ] || DQ_RPS=--no-rps

# Median of the per-second "$2" figures (Rx-pps / Tx-pps) in testpmd log $1 while traffic flowed.
median_of() {
  grep -o "$2: *[0-9]*" "$1" | awk '{print $2}' | awk '$1 > 0' | sort -n | awk '{a[NR]=$1} END {if (NR==0) print 0; else print a[int((NR+1)/2)]}'
}

# Two testpmd processes in the namespace: txonly on dqt0, rxonly on dqt1, each on the core
# daqtune uses for TX and RX; stats every second; SIGINT ends both after DURATION.
run_testpmd() {
  "$BIN" --veth-exec --mtu "$MTU" ${RPS:+--rps-cpu $R} -- sh -c "
    $TESTPMD --lcores=0@$M,1@$R --file-prefix=tp-rx-\$\$ $EAL $VDEV1 -- --forward-mode=rxonly --nb-cores=1 --total-num-mbufs=16384 --mbuf-size=$MBUF --rxd=1024 --txd=1024 --stats-period=1 $MAXLEN > $TMP/rx.log 2>&1 &
    RXPID=\$!
    sleep 2
    $TESTPMD --lcores=0@$M,1@$T --file-prefix=tp-tx-\$\$ $EAL $VDEV0 -- --forward-mode=txonly --txpkts=$FRAME --nb-cores=1 --total-num-mbufs=16384 --mbuf-size=$MBUF --rxd=1024 --txd=1024 --stats-period=1 $MAXLEN > $TMP/tx.log 2>&1 &
    TXPID=\$!
    sleep $((DURATION + 1))
    kill -INT \$TXPID; wait \$TXPID
    sleep 1
    kill -INT \$RXPID; wait \$RXPID
  " || true
  echo "$(median_of "$TMP/rx.log" Rx-pps) $(median_of "$TMP/tx.log" Tx-pps)"
}

run_daqtune() {
  run_engine "$BIN" "$@"
}

# run_engine EXE ARGS...: one daqtune-dpdk run; prints "pps sent received lost integrity status"
run_engine() {
  exe=$1; shift
  "$exe" --veth --duration "$DURATION" --message-size "$MSG" ${MAIN_CPU:+--main-cpu $MAIN_CPU} ${TX_CPU:+--tx-cpu $TX_CPU} ${RX_CPU:+--rx-cpu $RX_CPU} ${DQ_RPS:+"$DQ_RPS"} "$@" 2>"$TMP/dq.err" \
    | python3 -c 'import json,sys; r=json.load(sys.stdin)["result"]; print(int(r["packets_per_s"]), r["sent"], r["packets"], r["lost"], r["integrity_errors"], r["status"])'
}

# Alternate the two so that both see the same background load (the order flips every round);
# record the 1-minute load average before each run; compare medians and show the spread.
: > "$TMP/tp"; : > "$TMP/dq"
LOSSY=0
load() { cut -d' ' -f1 /proc/loadavg; }
echo "frame $FRAME bytes (message $MSG), $DURATION s, cores main $M tx $T rx $R, $(nproc) CPUs, kernel $(uname -r), $(date -u +%FT%TZ)"
i=1
: > "$TMP/before"
while [ $i -le "$ROUNDS" ]; do
  if [ $((i % 2)) = 1 ]; then
    LT=$(load); TP=$(run_testpmd)
    LD=$(load); DQ=$(run_daqtune --unpaced || echo "0 0 0 0 0 error")
  else
    LD=$(load); DQ=$(run_daqtune --unpaced || echo "0 0 0 0 0 error")
    LT=$(load); TP=$(run_testpmd)
  fi
  [ -z "${KEEP_LOGS:-}" ] || { cp "$TMP/rx.log" "$TMP/rx.$i.log"; cp "$TMP/tx.log" "$TMP/tx.$i.log"; }
  echo "round $i: testpmd rx/tx pps = $TP (load $LT); daqtune unpaced pps sent received lost integrity status = $DQ (load $LD)"
  if [ -n "${BEFORE:-}" ]; then
    LB=$(load); DB=$(run_engine "$BEFORE" --unpaced || echo "0 0 0 0 0 error")
    echo "         BEFORE ($BEFORE) unpaced pps sent received lost integrity status = $DB (load $LB)"
    echo "${DB%% *}" >> "$TMP/before"
  fi
  echo "${TP%% *}" >> "$TMP/tp"; echo "${DQ%% *}" >> "$TMP/dq"
  # shellcheck disable=SC2086 # the fields of run_engine's line, as $1..$6
  set -- $DQ
  [ "${4:-1}" = 0 ] && [ "${5:-1}" = 0 ] || LOSSY=$((LOSSY + 1))
  i=$((i + 1))
done
spread() { sort -n "$1" | awk '{a[NR]=$1} END {printf "%d (%d-%d)", a[int((NR+1)/2)], a[1], a[NR]}'; }
med() { sort -n "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
TP_RX_PPS=$(med "$TMP/tp")
DQ_PPS=$(med "$TMP/dq")
DQ_PACED=$(run_daqtune --pps "$PACED_PPS" || echo "0 0 0 0 0 error")

echo "median (min-max) of $ROUNDS rounds: testpmd txonly->rxonly rx $(spread "$TMP/tp") pps, daqtune unpaced $(spread "$TMP/dq") pps, every frame checked"
echo "daqtune unpaced rounds with a lost frame or an integrity error: $LOSSY of $ROUNDS"
echo "daqtune paced $PACED_PPS: pps sent received lost integrity status = $DQ_PACED"
if [ "$TP_RX_PPS" -gt 0 ]; then
  echo "daqtune / testpmd = $(awk "BEGIN {printf \"%.3f\", $DQ_PPS / $TP_RX_PPS}")"
  if [ -n "${BEFORE:-}" ]; then
    echo "BEFORE: unpaced $(spread "$TMP/before") pps; before / testpmd = $(awk "BEGIN {printf \"%.3f\", $(med "$TMP/before") / $TP_RX_PPS}")"
  fi
fi
