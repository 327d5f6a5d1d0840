#!/usr/bin/env bash
# daqtune's single-stream TCP self-test against iperf3 on the same veth setup and CPUs.
#
#   sudo bench/selftest_vs_iperf3.sh [RUNS] [SECONDS]     (defaults: 5 runs of 5 s each)
#
# Both tools run over the same kind of path: a veth pair between two private namespaces, MTU
# 9000, 198.18.0.1 -> 198.18.0.2 (/32 addresses, /32 routes, permanent neighbours), built by
# daqtune itself through netlink (`--hold` keeps it up for iperf3, entered with nsenter; no
# iproute2 needed). The sender is pinned to TX_CPU and the receiver to RX_CPU for both tools.
# daqtune checks every byte (CRC-32C) and every sequence number; iperf3 checks nothing. Runs
# alternate (iperf3, daqtune, iperf3, ...) so a change of load on the host hits both; the
# medians are compared. Env: TX_CPU, RX_CPU (default: the two highest CPUs), MSG (daqtune
# message size, default 8192), BIN (daqtune-selftest binary), IPERF3 (iperf3 binary).
set -euo pipefail

RUNS=${1:-5}
SECS=${2:-5}
MSG=${MSG:-8192}
IPERF3=${IPERF3:-iperf3}
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then echo "needs root (network namespaces)" >&2; exit 2; fi
command -v "$IPERF3" >/dev/null || { apt-get install -y iperf3 >/dev/null; IPERF3=iperf3; }
command -v jq >/dev/null || apt-get install -y jq >/dev/null

NCPU=$(nproc)
TX_CPU=${TX_CPU:-$(( NCPU >= 2 ? NCPU - 2 : 0 ))}
RX_CPU=${RX_CPU:-$(( NCPU - 1 ))}
if [ -z "${BIN:-}" ]; then
  cargo build -q -p daqtune-selftest --bin daqtune-selftest
  BIN=target/debug/daqtune-selftest   # the self-test crate is built with opt-level 3 in dev too
fi

HOLD_OUT=$(mktemp)
"$BIN" socket --veth --hold >"$HOLD_OUT" &
HOLD=$!
cleanup() { kill -INT "$HOLD" 2>/dev/null || true; wait "$HOLD" 2>/dev/null || true; rm -f "$HOLD_OUT"; }
trap cleanup EXIT
for _ in $(seq 1 100); do [ -s "$HOLD_OUT" ] && break; sleep 0.1; done
TX_NS=$(jq -r .tx_netns "$HOLD_OUT")
RX_NS=$(jq -r .rx_netns "$HOLD_OUT")

iperf_run() {
  nsenter --net="$RX_NS" taskset -c "$RX_CPU" "$IPERF3" -s -1 -B 198.18.0.2 -p 5201 >/dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  nsenter --net="$TX_NS" taskset -c "$TX_CPU" "$IPERF3" -c 198.18.0.2 -p 5201 -t "$SECS" -J \
    | jq -r '"\(.end.sum_received.bits_per_second / 1e9) \((.end.cpu_utilization_percent.host_total + .end.cpu_utilization_percent.remote_total) / 100)"'
  wait "$srv" || true
}

daqtune_run() {
  "$BIN" socket --veth --mode tcp --duration "$SECS" --message-size "$MSG" \
    --tx-cpu "$TX_CPU" --rx-cpu "$RX_CPU" --no-progress --format json 2>/dev/null \
    | jq -r '.results[0] | "\(.gbps) \(.integrity_errors) \(.status) \(.cpu_cores)"'
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

echo "host: $(nproc) cpus, $(uname -r); tx cpu $TX_CPU, rx cpu $RX_CPU; $RUNS runs x ${SECS}s; load: $(cut -d' ' -f1-3 /proc/loadavg)"
IPERF=(); DAQ=()
for i in $(seq 1 "$RUNS"); do
  read -r a icores < <(iperf_run)
  read -r b bad st cores < <(daqtune_run)
  printf 'run %d: iperf3 %.2f Gb/s (%.2f cores)   daqtune %.2f Gb/s (%.2f cores; integrity errors %s, %s)\n' \
    "$i" "$a" "$icores" "$b" "$cores" "$bad" "$st"
  IPERF+=("$a"); DAQ+=("$b")
done
MI=$(printf '%s\n' "${IPERF[@]}" | median)
MD=$(printf '%s\n' "${DAQ[@]}" | median)
PCT=$(awk -v d="$MD" -v i="$MI" 'BEGIN { printf "%.1f", (i > 0 ? 100 * d / i : 0) }')
echo "median: iperf3 $MI Gb/s, daqtune $MD Gb/s = $PCT % of iperf3"
awk -v p="$PCT" 'BEGIN { exit !(p >= 90) }' && echo "PASS (>= 90 %)" || { echo "BELOW 90 %"; exit 1; }
