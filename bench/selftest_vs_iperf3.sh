#!/usr/bin/env bash
# daqtune's TCP self-test against iperf3 on the same veth setup and CPUs, one or several streams.
#
#   sudo bench/selftest_vs_iperf3.sh [RUNS] [SECONDS]       (defaults: 7 rounds of 5 s each)
#   sudo STREAMS=4 bench/selftest_vs_iperf3.sh 7 5           (daqtune --streams 4 vs 4 iperf3s)
#
# Both tools run over the same kind of path: a veth pair between two private namespaces, MTU
# 9000, 198.18.0.1 -> 198.18.0.2 (/32 addresses, /32 routes, permanent neighbours), built by
# daqtune itself through netlink (`--hold` keeps it up for iperf3, entered with nsenter; no
# iproute2 needed). daqtune checks every byte (CRC-32C) and every sequence number; iperf3
# checks nothing. Each round runs iperf3 with its default 128 KiB writes, iperf3 with daqtune's
# write size (`-l 512K`, so the write size is not the difference), and daqtune, in an order that
# rotates from round to round, and records the 1-minute load average before each run; medians
# and the spread (min-max) are compared.
#
# Several streams (STREAMS=N): daqtune runs N TX/RX thread pairs, each pinned to its own CPU
# pair (the plan daqtune prints; on a host with fewer than 2N CPUs the pairs wrap). iperf3 3.12
# runs every stream of one process in one thread, so `iperf3 -P N` is not a comparison (it
# uses one core per side whatever N is): the iperf3 side is N separate client/server processes,
# process i pinned to exactly the CPUs of daqtune's pair i (the documented way to use several
# cores with iperf3 3.12), their rates and CPU summed.
#
# CPU per run: each tool's own figure (daqtune: its threads' CPU time / wall time; iperf3:
# its processes' host_total + remote_total), and the busy share of the CPUs in use from
# /proc/stat (softirq included: on a quiet host the fair figure for both; on a shared host it
# counts other work too). Per core = Gb/s / cores, per round, then the median.
# Exit 1 when a daqtune run failed verification.
#
# Env: TX_CPU, RX_CPU (default: the two highest CPUs; pair 0 with several streams), STREAMS (1),
# MSG (daqtune message size, 8192), BIN (daqtune-selftest binary; default: a release build),
# IPERF3, EXTRA (more daqtune flags, e.g. --zerocopy), KEEP=FILE (raw rows),
# BEFORE=/path/to/another/daqtune-selftest (a fourth contender in every round: before/after
# comparisons in one interleaved run).
set -euo pipefail

RUNS=${1:-7}
SECS=${2:-5}
MSG=${MSG:-8192}
STREAMS=${STREAMS:-1}
IPERF3=${IPERF3:-iperf3}
EXTRA=${EXTRA:-}
# The extra flags as words (EXTRA="--zerocopy --no-gso" is two flags).
read -ra extra_args <<<"$EXTRA"
cd "$(dirname "$0")/.."
. bench/lib-cpu.sh

if [ "$(id -u)" != 0 ]; then echo "needs root (network namespaces)" >&2; exit 2; fi
command -v "$IPERF3" >/dev/null || { apt-get install -y iperf3 >/dev/null; IPERF3=iperf3; }
command -v jq >/dev/null || apt-get install -y jq >/dev/null

NCPU=$(nproc)
TX_CPU=${TX_CPU:-$(( NCPU >= 2 ? NCPU - 2 : 0 ))}
RX_CPU=${RX_CPU:-$(( NCPU - 1 ))}
if [ -z "${BIN:-}" ]; then
  cargo build -q --release -p daqtune --bin daqtune-selftest
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

# daqtune's CPU pairs for STREAMS streams: "tx rx" per line (a short run prints its plan).
if [ "$STREAMS" -gt 1 ]; then
  PAIRS=$("$BIN" socket --veth --mode tcp --duration 0.2 --streams "$STREAMS" --tx-cpu "$TX_CPU" --rx-cpu "$RX_CPU" \
    --no-progress --format json 2>/dev/null | jq -r '.results[0].streams[] | "\(.tx_cpu) \(.rx_cpu)"')
else
  PAIRS="$TX_CPU $RX_CPU"
fi
CPUS=$(printf '%s\n' "$PAIRS" | tr ' ' '\n' | sort -un | paste -sd,)
[ "$(printf '%s\n' "$PAIRS" | wc -l)" = "$STREAMS" ] || { echo "could not read daqtune's CPU pairs" >&2; exit 2; }

# iperf_run [EXTRA...]: one pinned iperf3 client/server per pair; prints "Gb/s cores"
iperf_run() {
  local i=0 srv=() out=() tx rx
  while read -r tx rx; do
    nsenter --net="$RX_NS" taskset -c "$rx" "$IPERF3" -s -1 -B 198.18.0.2 -p $((5201 + i)) >/dev/null 2>&1 &
    srv+=($!)
    i=$((i + 1))
  done <<< "$PAIRS"
  sleep 0.3
  i=0
  local dir; dir=$(mktemp -d)
  while read -r tx rx; do
    nsenter --net="$TX_NS" taskset -c "$tx" "$IPERF3" -c 198.18.0.2 -p $((5201 + i)) -t "$SECS" -J "$@" >"$dir/$i.json" 2>/dev/null &
    out+=($!)
    i=$((i + 1))
  done <<< "$PAIRS"
  for p in "${out[@]}"; do wait "$p" || true; done
  for p in "${srv[@]}"; do wait "$p" || true; done
  cat "$dir"/*.json | jq -rs 'if length == 0 then "0 0" else
    "\(map(.end.sum_received.bits_per_second // 0) | add / 1e9) \(map((.end.cpu_utilization_percent.host_total // 0) + (.end.cpu_utilization_percent.remote_total // 0)) | add / 100)" end' \
    || echo "0 0"
  rm -rf "$dir"
}

# daqtune_run [EXE]: prints "Gb/s cores integrity_errors status"
daqtune_run() {
  "${1:-$BIN}" socket --veth --mode tcp --duration "$SECS" --message-size "$MSG" --streams "$STREAMS" \
    --tx-cpu "$TX_CPU" --rx-cpu "$RX_CPU" "${extra_args[@]}" --no-progress --format json 2>/dev/null \
    | jq -r '.results[0] | "\(.gbps) \(.cpu_cores) \(.integrity_errors) \(.status)"' \
    || echo "0 0 -1 error"
}

echo "host: $NCPU cpus, $(uname -r); $STREAMS stream(s) on cpu pairs $(printf '%s\n' "$PAIRS" | tr ' ' '>' | paste -sd' '); daqtune flags: ${EXTRA:-(defaults)}; $RUNS rounds x ${SECS}s; $(date -u +%FT%TZ)"
BAD=0
N=3
[ -z "${BEFORE:-}" ] || N=4
for i in $(seq 1 "$RUNS"); do
  line="round $i:"
  # Rotate the order so no tool always runs right after another.
  for k in $(seq 0 $((N - 1))); do
    L=$(load1)
    j0=$(busy_jiffies "$CPUS"); t0=$(date +%s%N)
    case $(( (i + k) % N )) in
      0) read -r g c < <(iperf_run); tag=iperf; what=iperf3; extra= ;;
      1) read -r g c < <(iperf_run -l 512K); tag=iperf512; what=iperf3-l512K; extra= ;;
      2) read -r g c bad st < <(daqtune_run); tag=daq; what=daqtune
         [ "$bad" = 0 ] && [ "$st" = pass ] || BAD=$((BAD + 1))
         extra=", $bad integrity errors, $st" ;;
      3) read -r g c bad st < <(daqtune_run "$BEFORE"); tag=before; what=BEFORE
         extra=", $bad integrity errors, $st" ;;
    esac
    b=$(busy_cores "$j0" "$CPUS" "$t0")
    echo "$tag $g $c $b $L" >> "$ROWS"
    line+=$(printf ' %s %.2f (%.2f cores, cpus busy %.2f%s, load %s)' "$what" "$g" "$c" "$b" "$extra" "$L")
  done
  echo "$line"
done < /dev/null
if [ -n "${KEEP:-}" ]; then cp "$ROWS" "$KEEP"; fi
echo "columns: tool gbps tool_cores busy_cores(/proc/stat) load1"
declare -A M P # by tag: median Gb/s, median Gb/s per core
summary() { # TAG NAME -> one line; sets M[TAG] and P[TAG]
  local m l h mc mp lp hp mb
  read -r m l h < <(awk -v t="$1" '$1==t{print $2}' "$ROWS" | stats)
  read -r mc _ _ < <(awk -v t="$1" '$1==t{print $3}' "$ROWS" | stats)
  read -r mp lp hp < <(awk -v t="$1" '$1==t && $3 > 0 {print $2 / $3}' "$ROWS" | stats)
  read -r mb _ _ < <(awk -v t="$1" '$1==t && $4 > 0 {print $2 / $4}' "$ROWS" | stats)
  printf '%-13s %7.2f Gb/s (%.2f-%.2f) on %.2f cores: %.2f Gb/s per core (%.2f-%.2f), %.2f per busy core\n' "$2" "$m" "$l" "$h" "$mc" "$mp" "$lp" "$hp" "$mb"
  M[$1]=$m P[$1]=$mp
}
summary iperf iperf3
summary iperf512 "iperf3 -l 512K"
summary daq daqtune
awk -v d="${M[daq]}" -v i="${M[iperf]}" -v l="${M[iperf512]}" -v pd="${P[daq]}" -v pi="${P[iperf]}" -v pl="${P[iperf512]}" 'BEGIN {
  printf "daqtune / iperf3 = %.3f, daqtune / iperf3 -l 512K = %.3f; per core: %.3f and %.3f\n",
    (i > 0 ? d / i : 0), (l > 0 ? d / l : 0), (pi > 0 ? pd / pi : 0), (pl > 0 ? pd / pl : 0) }'
if [ -n "${BEFORE:-}" ]; then
  summary before BEFORE
  awk -v b="${M[before]}" -v i="${M[iperf]}" -v l="${M[iperf512]}" 'BEGIN { printf "before / iperf3 = %.3f, before / iperf3 -l 512K = %.3f\n", (i > 0 ? b / i : 0), (l > 0 ? b / l : 0) }'
fi
if [ "$BAD" -gt 0 ]; then echo "FAIL: $BAD daqtune run(s) did not pass verification"; exit 1; fi
echo "every daqtune run verified every byte (0 integrity errors, pass)"
