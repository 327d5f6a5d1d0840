#!/usr/bin/env bash
# daqtune's TCP self-test against iperf3 on the same veth setup and CPUs, one or several streams.
#
#   sudo bench/selftest_vs_iperf3.sh [RUNS] [SECONDS]       (defaults: 7 rounds of 5 s each)
#   sudo STREAMS=4 bench/selftest_vs_iperf3.sh 7 5           (daqtune --streams 4 vs iperf3 -P 4)
#
# Both tools run over the same kind of path: a veth pair between two private namespaces, MTU
# 9000, 198.18.0.1 -> 198.18.0.2 (/32 addresses, /32 routes, permanent neighbours), built by
# daqtune itself through netlink (`--hold` keeps it up for iperf3, entered with nsenter; no
# iproute2 needed). Senders are pinned to TX_CPU and receivers to RX_CPU for both tools (with
# several streams daqtune's pairs wrap onto the same two CPUs; iperf3 3.12 runs all its streams
# in one thread per side). daqtune checks every byte (CRC-32C) and every sequence number;
# iperf3 checks nothing. Each round runs iperf3 with its default 128 KiB writes, iperf3 with
# daqtune's write size (`-l 512K`, so the write size is not the difference), and daqtune, in an
# order that rotates from round to round, and records the 1-minute load average before each run; medians and
# the spread (min-max) are compared. Exit 1 when a daqtune run failed verification.
#
# Env: TX_CPU, RX_CPU (default: the two highest CPUs), STREAMS (1), MSG (daqtune message size,
# 8192), BIN (daqtune-selftest binary; default: a release build), IPERF3, KEEP=FILE (raw rows),
# BEFORE=/path/to/another/daqtune-selftest (a fourth contender in every round: before/after
# comparisons in one interleaved run).
set -euo pipefail

RUNS=${1:-7}
SECS=${2:-5}
MSG=${MSG:-8192}
STREAMS=${STREAMS:-1}
IPERF3=${IPERF3:-iperf3}
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then echo "needs root (network namespaces)" >&2; exit 2; fi
command -v "$IPERF3" >/dev/null || { apt-get install -y iperf3 >/dev/null; IPERF3=iperf3; }
command -v jq >/dev/null || apt-get install -y jq >/dev/null

NCPU=$(nproc)
TX_CPU=${TX_CPU:-$(( NCPU >= 2 ? NCPU - 2 : 0 ))}
RX_CPU=${RX_CPU:-$(( NCPU - 1 ))}
if [ -z "${BIN:-}" ]; then
  cargo build -q --release -p daqtune-selftest --bin daqtune-selftest
  BIN=target/release/daqtune-selftest
fi

HOLD_OUT=$(mktemp)
ROWS=$(mktemp)
"$BIN" socket --veth --hold >"$HOLD_OUT" &
HOLD=$!
cleanup() { kill -INT "$HOLD" 2>/dev/null || true; wait "$HOLD" 2>/dev/null || true; rm -f "$HOLD_OUT" "$ROWS"; }
trap cleanup EXIT
for _ in $(seq 1 100); do [ -s "$HOLD_OUT" ] && break; sleep 0.1; done
TX_NS=$(jq -r .tx_netns "$HOLD_OUT")
RX_NS=$(jq -r .rx_netns "$HOLD_OUT")

# iperf_run [EXTRA...]: prints "Gb/s cores"
iperf_run() {
  nsenter --net="$RX_NS" taskset -c "$RX_CPU" "$IPERF3" -s -1 -B 198.18.0.2 -p 5201 >/dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  nsenter --net="$TX_NS" taskset -c "$TX_CPU" "$IPERF3" -c 198.18.0.2 -p 5201 -t "$SECS" -P "$STREAMS" -J "$@" \
    | jq -r '"\(.end.sum_received.bits_per_second / 1e9) \((.end.cpu_utilization_percent.host_total + .end.cpu_utilization_percent.remote_total) / 100)"' \
    || echo "0 0"
  wait "$srv" || true
}

# daqtune_run [EXE]: prints "Gb/s cores integrity_errors status"
daqtune_run() {
  "${1:-$BIN}" socket --veth --mode tcp --duration "$SECS" --message-size "$MSG" --streams "$STREAMS" \
    --tx-cpu "$TX_CPU" --rx-cpu "$RX_CPU" --no-progress --format json 2>/dev/null \
    | jq -r '.results[0] | "\(.gbps) \(.cpu_cores) \(.integrity_errors) \(.status)"' \
    || echo "0 0 -1 error"
}

stats() { # column of numbers -> "median min max"
  sort -g | awk '{a[NR]=$1} END {m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2; printf "%.2f %.2f %.2f\n", m, a[1], a[NR]}'
}

echo "host: $NCPU cpus, $(uname -r); tx cpu $TX_CPU, rx cpu $RX_CPU; $STREAMS stream(s); $RUNS rounds x ${SECS}s; $(date -u +%FT%TZ)"
BAD=0
N=3
[ -z "${BEFORE:-}" ] || N=4
for i in $(seq 1 "$RUNS"); do
  line="round $i:"
  # Rotate the order so no tool always runs right after another.
  for k in $(seq 0 $((N - 1))); do
    L=$(cut -d' ' -f1 /proc/loadavg)
    case $(( (i + k) % N )) in
      0) read -r g c < <(iperf_run); echo "iperf $g $c" >> "$ROWS"; line+=$(printf ' iperf3 %.2f (%.2f cores, load %s)' "$g" "$c" "$L") ;;
      1) read -r g c < <(iperf_run -l 512K); echo "iperf512 $g $c" >> "$ROWS"; line+=$(printf ' iperf3-l512K %.2f (%.2f cores, load %s)' "$g" "$c" "$L") ;;
      2) read -r g c bad st < <(daqtune_run); echo "daq $g $c $bad $st" >> "$ROWS"
         [ "$bad" = 0 ] && [ "$st" = pass ] || BAD=$((BAD + 1))
         line+=$(printf ' daqtune %.2f (%.2f cores, %s integrity errors, %s, load %s)' "$g" "$c" "$bad" "$st" "$L") ;;
      3) read -r g c bad st < <(daqtune_run "$BEFORE"); echo "before $g $c $bad $st" >> "$ROWS"
         line+=$(printf ' BEFORE %.2f (%.2f cores, %s integrity errors, %s, load %s)' "$g" "$c" "$bad" "$st" "$L") ;;
    esac
  done
  echo "$line"
done < /dev/null
if [ -n "${KEEP:-}" ]; then cp "$ROWS" "$KEEP"; fi
read -r MI LI HI < <(awk '$1=="iperf"{print $2}' "$ROWS" | stats)
read -r ML LL HL < <(awk '$1=="iperf512"{print $2}' "$ROWS" | stats)
read -r MD LD HD < <(awk '$1=="daq"{print $2}' "$ROWS" | stats)
echo "median (min-max) Gb/s: iperf3 $MI ($LI-$HI), iperf3 -l 512K $ML ($LL-$HL), daqtune $MD ($LD-$HD)"
awk -v d="$MD" -v i="$MI" -v l="$ML" 'BEGIN { printf "daqtune / iperf3 = %.3f, daqtune / iperf3 -l 512K = %.3f\n", (i > 0 ? d / i : 0), (l > 0 ? d / l : 0) }'
if [ -n "${BEFORE:-}" ]; then
  read -r MB LB HB < <(awk '$1=="before"{print $2}' "$ROWS" | stats)
  awk -v b="$MB" -v lo="$LB" -v hi="$HB" -v i="$MI" -v l="$ML" 'BEGIN { printf "BEFORE: %.2f (%.2f-%.2f) Gb/s; before / iperf3 = %.3f, before / iperf3 -l 512K = %.3f\n", b, lo, hi, (i > 0 ? b / i : 0), (l > 0 ? b / l : 0) }'
fi
if [ "$BAD" -gt 0 ]; then echo "FAIL: $BAD daqtune run(s) did not pass verification"; exit 1; fi
echo "every daqtune run verified every byte (0 integrity errors, pass)"
