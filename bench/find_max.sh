#!/usr/bin/env bash
# `--find-max` on a veth pair, then the rate it reports held to account: VERIFY more paced runs
# at exactly that rate must each lose nothing (and verify every payload).
#
#   sudo bench/find_max.sh [socket|dpdk|both] [VERIFY] [SECONDS]    (defaults: both, 5, 5)
#
# socket: `daqtune-selftest socket --veth --find-max` (UDP, 8192-byte messages, MTU 9000), then
#         `--mode udp --rate R --max-udp-loss 0` VERIFY times.
# dpdk:   `daqtune-dpdk --veth --find-max` (af_packet vdevs, 64-byte messages = 106-byte
#         frames), then `--rate R --max-loss 0` VERIFY times.
# Each verification run lasts SECONDS (at least the search's own trial length). The load average
# is printed before each run. Exit 1 when a verification run lost a message or failed.
# Env: BIN (daqtune-selftest), DPDK_BIN (daqtune-dpdk built with --features dpdk), TX_CPU,
# RX_CPU, STREAMS (socket only, default 1), TRIAL (the search's shortest trial, default 2 s),
# PRECISION (percent, default 2), LOSS (percent allowed in the search, default 0),
# BUSY (default 0: N spin loops, each pinned with taskset to a cpu other than TX_CPU/RX_CPU,
# run beside the search and the verification runs, killed on exit; issue 43's busy host:
# `BUSY=2 sudo bench/find_max.sh socket 5 5` on the 16-core machine).
set -euo pipefail

WHICH=${1:-both}
VERIFY=${2:-5}
SECS=${3:-5}
TRIAL=${TRIAL:-2}
PRECISION=${PRECISION:-2}
LOSS=${LOSS:-0}
STREAMS=${STREAMS:-1}
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then echo "needs root (namespaces, hugepages)" >&2; exit 2; fi
command -v jq >/dev/null || apt-get install -y jq >/dev/null
BIN=${BIN:-target/release/daqtune-selftest}
DPDK_BIN=${DPDK_BIN:-target/release/daqtune-dpdk}
NCPU=$(nproc)
TX_CPU=${TX_CPU:-$(( NCPU >= 2 ? NCPU - 2 : 0 ))}
RX_CPU=${RX_CPU:-$(( NCPU - 1 ))}
load() { cut -d' ' -f1 /proc/loadavg; }
FAILED=0
ERR=$(mktemp)
BUSY=${BUSY:-0}
SPIN_PIDS=()
cleanup() {
  rm -f "$ERR"
  for p in "${SPIN_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# The busy cores: the highest cpus that are neither the sender's nor the receiver's, so the
# scheduler still has to share the remaining ones with the test's other threads.
if [ "$BUSY" -gt 0 ]; then
  command -v taskset >/dev/null || { echo "BUSY needs taskset (util-linux)" >&2; exit 2; }
  n=0
  for c in $(seq $((NCPU - 1)) -1 0); do
    [ "$n" -ge "$BUSY" ] && break
    { [ "$c" = "$TX_CPU" ] || [ "$c" = "$RX_CPU" ]; } && continue
    taskset -c "$c" sh -c 'while :; do :; done' &
    SPIN_PIDS+=("$!")
    n=$((n + 1))
  done
  [ "$n" = "$BUSY" ] || { echo "BUSY=$BUSY: only $n cpus besides tx $TX_CPU and rx $RX_CPU" >&2; exit 2; }
fi

trial_table() { # JSON result on stdin -> one line per trial
  jq -r '.trials[] | "  \(.phase)\t asked \(if .asked_gbps == null then "unpaced" else (.asked_gbps*1000|round/1000|tostring) end)\t achieved \(.achieved_gbps*1000|round/1000) Gb/s\t loss \(.loss_pct) %\t \(.duration_s*10|round/10) s (\(.length_rule))\t \(if .passed then "pass" else "fail: \(.why)" end)"'
}

verify_runs() { # NAME RATE CMD...: VERIFY runs of CMD (which prints a result JSON object)
  local name=$1 rate=$2; shift 2
  local lost_any=0
  for i in $(seq 1 "$VERIFY"); do
    local l; l=$(load)
    local r; r=$("$@" 2>/dev/null || true)
    local line; line=$(printf '%s' "$r" | jq -r '"\(.gbps*1000|round/1000) Gb/s, sent \(.sent), received \(.packets), lost \(.lost), integrity errors \(.integrity_errors), \(.status)"' 2>/dev/null || echo "no result")
    echo "  verify $i at $rate Gb/s (load $l): $line"
    if ! printf '%s' "$r" | jq -e '.lost == 0 and .integrity_errors == 0 and (.status == "pass" or .status == "warn")' >/dev/null 2>&1; then
      lost_any=$((lost_any + 1))
    fi
  done
  echo "$name: $lost_any of $VERIFY verification runs at the found rate lost messages or failed"
  FAILED=$((FAILED + lost_any))
}

echo "host: $NCPU cpus, $(uname -r); tx cpu $TX_CPU, rx cpu $RX_CPU; $(date -u +%FT%TZ); search: loss <= $LOSS %, precision $PRECISION %, trials >= $TRIAL s; busy spin loops: $BUSY${SPIN_PIDS[*]:+ (pids ${SPIN_PIDS[*]})}"

if [ "$WHICH" = socket ] || [ "$WHICH" = both ]; then
  [ -x "$BIN" ] || cargo build -q --release -p daqtune --bin daqtune-selftest
  echo "socket/udp over veth ($STREAMS stream(s)), load $(load):"
  R=$("$BIN" socket --veth --find-max --loss "$LOSS" --precision "$PRECISION" --trial-duration "$TRIAL" \
      --streams "$STREAMS" --tx-cpu "$TX_CPU" --rx-cpu "$RX_CPU" --no-progress --format json 2>/dev/null | jq '.results[0]' || true)
  printf '%s' "$R" | trial_table
  FOUND=$(printf '%s' "$R" | jq -r '.max_loss_free_gbps // empty')
  printf '%s' "$R" | jq -r '"  found \(.max_loss_free_gbps) Gb/s = \((.search.fraction_of_limit // 0)*1000|round/10) % of \(.search.limit.gbps*1000|round/1000) Gb/s (\(.search.limit.source)); \(.search.ended)"'
  if [ -n "$FOUND" ]; then
    # Asked at the rate found, loss judged at zero.
    verify_runs socket "$FOUND" sh -c "'$BIN' socket --veth --mode udp --rate $FOUND --max-udp-loss 0 --duration $SECS --streams $STREAMS --tx-cpu $TX_CPU --rx-cpu $RX_CPU --no-progress --format json | jq '.results[0]'"
  else
    echo "  no rate confirmed"; FAILED=$((FAILED + 1))
  fi
fi

if [ "$WHICH" = dpdk ] || [ "$WHICH" = both ]; then
  [ -x "$DPDK_BIN" ] || cargo build -q --release -p daqtune-dpdk --features dpdk
  echo "dpdk/raw over af_packet on veth, 106-byte frames, load $(load):"
  R=$("$DPDK_BIN" --veth --find-max --loss "$LOSS" --precision "$PRECISION" --trial-duration "$TRIAL" \
      --tx-cpu "$TX_CPU" --rx-cpu "$RX_CPU" 2>"$ERR" | jq '.result' || true)
  [ -n "$R" ] || { echo "  no result: $(tail -n 3 "$ERR")"; }
  printf '%s' "$R" | trial_table
  FOUND=$(printf '%s' "$R" | jq -r '.max_loss_free_gbps // empty')
  printf '%s' "$R" | jq -r '"  found \(.max_loss_free_gbps) Gb/s (\(.packets_per_s|round) pps) = \((.search.fraction_of_limit // 0)*1000|round/10) % of \(.search.limit.gbps*1000|round/1000) Gb/s (\(.search.limit.source)); \(.search.ended)"'
  if [ -n "$FOUND" ]; then
    verify_runs dpdk "$FOUND" sh -c "'$DPDK_BIN' --veth --rate $FOUND --max-loss 0 --duration $SECS --tx-cpu $TX_CPU --rx-cpu $RX_CPU | jq '.result'"
  else
    echo "  no rate confirmed"; FAILED=$((FAILED + 1))
  fi
fi
[ "$FAILED" = 0 ] || { echo "FAIL"; exit 1; }
echo "PASS: no loss at the rates --find-max reported"
