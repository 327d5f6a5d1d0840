#!/usr/bin/env bash
# UDP: daqtune's loss-free maximum against `iperf3 -u` at the same datagram size and CPUs.
#
#   sudo bench/udp_vs_iperf3.sh [RUNS] [SECONDS]          (defaults: 5 rounds of 5 s)
#   sudo EXTRA="--no-gso --no-gro" bench/udp_vs_iperf3.sh  (daqtune without the kernel's batching)
#
# 1. `daqtune-selftest socket --veth --find-max` (UDP, MSG-byte messages, GSO + sendmmsg and
#    GRO + recvmmsg where the kernel has them) finds R, the loss-free maximum.
# 2. RUNS rounds, the order rotating from round to round, on one held veth pair (MTU 9000,
#    198.18.0.1 -> .2, made by daqtune through netlink; iperf3 entered with nsenter):
#      daq-paced   daqtune at exactly R, loss judged at 0 (holds the search to account)
#      daq-flood   daqtune unpaced
#      iperf-flood iperf3 -u -l MSG -b 0 (unpaced)
#      iperf-paced iperf3 -u -l MSG -b R (paced to daqtune's found rate)
#      daq-paced-32M  daqtune at R with --rcvbuf 32M (the fixed buffer before the sizing rule;
#                  daq-paced uses the size computed from R: the pair measures the buffer rule)
#    Senders pinned to TX_CPU, receivers to RX_CPU, for both tools. iperf3's datagram payload
#    is MSG bytes, as daqtune's message (header included) is.
# Per run: received Gb/s, loss %, the sender's and the receiver's cores as each tool measures
# its own threads/process (CPU time / wall time), and the busy share of TX_CPU + RX_CPU from
# /proc/stat (softirq included; on a quiet host the fair figure, on a shared one it counts
# other work too). Per sender core = received Gb/s / sender cores. Medians and spread.
# Exit 1 when a daqtune run failed verification or a paced run at R (daq-paced) lost a message;
# daq-paced-32M's loss is reported, not judged (it is the comparison).
#
# Env: TX_CPU, RX_CPU (default: the two highest CPUs), MSG (8192), BIN (daqtune-selftest;
# default: a release build), IPERF3, EXTRA (more daqtune flags), KEEP=FILE (raw rows),
# FOUND=R (skip the search).
set -euo pipefail

RUNS=${1:-5}
SECS=${2:-5}
MSG=${MSG:-8192}
IPERF3=${IPERF3:-iperf3}
EXTRA=${EXTRA:-}
# The extra flags as words (EXTRA="--no-gso --no-gro" is two flags).
read -ra extra_args <<<"$EXTRA"
cd "$(dirname "$0")/.."
. bench/lib-cpu.sh

if [ "$(id -u)" != 0 ]; then echo "needs root (network namespaces)" >&2; exit 2; fi
command -v "$IPERF3" >/dev/null || { apt-get install -y iperf3 >/dev/null; IPERF3=iperf3; }
command -v jq >/dev/null || apt-get install -y jq >/dev/null

NCPU=$(nproc)
TX_CPU=${TX_CPU:-$(( NCPU >= 2 ? NCPU - 2 : 0 ))}
RX_CPU=${RX_CPU:-$(( NCPU - 1 ))}
CPUS="$TX_CPU,$RX_CPU"
if [ -z "${BIN:-}" ]; then
  cargo build -q --release -p daqtune --bin daqtune-selftest
  BIN=target/release/daqtune-selftest
fi

echo "host: $NCPU cpus, $(uname -r); tx cpu $TX_CPU, rx cpu $RX_CPU; $MSG-byte datagrams; $RUNS rounds x ${SECS}s; daqtune flags: ${EXTRA:-(defaults)}; $(date -u +%FT%TZ)"
if [ -z "${FOUND:-}" ]; then
  L=$(load1)
  R=$("$BIN" socket --veth --find-max --message-size "$MSG" --tx-cpu "$TX_CPU" --rx-cpu "$RX_CPU" "${extra_args[@]}" \
      --no-progress --format json 2>/dev/null | jq '.results[0]' || true)
  FOUND=$(printf '%s' "$R" | jq -r '.max_loss_free_gbps // empty' 2>/dev/null || true)
  printf '%s' "$R" | jq -r --arg l "$L" '"find-max (load \($l)): \(.max_loss_free_gbps // "none") Gb/s, \(.trials | length) trials; \(.search.ended // "")\n  receive buffer: \(.rx_buffer_sizing // "?")\n  batching: \([.batching[]? | "\(.name) \(if .used then "used" else "not used" end)"] | join(", "))"' 2>/dev/null || true
  [ -n "$FOUND" ] || { echo "FAIL: --find-max confirmed no rate"; exit 1; }
fi
echo "R = $FOUND Gb/s"

HOLD_OUT=$(mktemp)
ROWS=$(mktemp)
"$BIN" socket --veth --hold >"$HOLD_OUT" &
HOLD=$!
cleanup() { kill -INT "$HOLD" 2>/dev/null || true; wait "$HOLD" 2>/dev/null || true; rm -f "$HOLD_OUT" "$ROWS"; }
trap cleanup EXIT
for _ in $(seq 1 100); do [ -s "$HOLD_OUT" ] && break; sleep 0.1; done
TX_NS=$(jq -r .tx_netns "$HOLD_OUT")
RX_NS=$(jq -r .rx_netns "$HOLD_OUT")

# iperf_udp RATE: "gbps loss_pct tx_cores rx_cores sent_gbps"
iperf_udp() {
  nsenter --net="$RX_NS" taskset -c "$RX_CPU" "$IPERF3" -s -1 -B 198.18.0.2 -p 5201 >/dev/null 2>&1 &
  local srv=$!
  sleep 0.3
  nsenter --net="$TX_NS" taskset -c "$TX_CPU" "$IPERF3" -c 198.18.0.2 -p 5201 -u -l "$MSG" -b "$1" -t "$SECS" -J \
    | jq -r '.end | "\(.sum_received.bits_per_second / 1e9) \(.sum_received.lost_percent) \(.cpu_utilization_percent.host_total / 100) \(.cpu_utilization_percent.remote_total / 100) \(.sum_sent.bits_per_second / 1e9)"' \
    || echo "0 100 0 0 0"
  wait "$srv" || true
}

# daq_udp RATE [FLAGS] (0 = unpaced): "gbps loss_pct tx_cores rx_cores sent_gbps integrity_errors status lost"
daq_udp() {
  local max=()
  [ "$1" = 0 ] || max=(--max-udp-loss 0)
  "$BIN" socket --veth --mode udp --rate "$1" "${max[@]}" "${@:2}" --duration "$SECS" --message-size "$MSG" \
    --tx-cpu "$TX_CPU" --rx-cpu "$RX_CPU" "${extra_args[@]}" --no-progress --format json 2>/dev/null \
    | jq -r '.results[0] | "\(.gbps) \(if (.packets + .lost) > 0 then .lost * 100 / (.packets + .lost) else 0 end) \([.threads[] | select(.role | startswith("tx")) | .utilization] | add) \([.threads[] | select(.role | startswith("rx")) | .utilization] | add) \(.sent * .message_size * 8 / .duration_s / 1e9) \(.integrity_errors) \(.status) \(.lost)"' \
    || echo "0 100 0 0 0 -1 error 0"
}

BAD=0
for i in $(seq 1 "$RUNS"); do
  for k in 0 1 2 3 4; do
    L=$(load1)
    j0=$(busy_jiffies "$CPUS"); t0=$(date +%s%N)
    case $(( (i + k) % 5 )) in
      0) name=daq-paced;   read -r g loss tc rc sg bad st lost < <(daq_udp "$FOUND")
         { [ "$bad" = 0 ] && [ "$lost" = 0 ] && { [ "$st" = pass ] || [ "$st" = warn ]; }; } || BAD=$((BAD + 1)) ;;
      1) name=daq-flood;   read -r g loss tc rc sg bad st lost < <(daq_udp 0)
         [ "$bad" = 0 ] || BAD=$((BAD + 1)) ;;
      2) name=iperf-flood; read -r g loss tc rc sg < <(iperf_udp 0); bad=-; st=-; lost=- ;;
      3) name=iperf-paced; read -r g loss tc rc sg < <(iperf_udp "${FOUND}G"); bad=-; st=-; lost=- ;;
      4) name=daq-paced-32M; read -r g loss tc rc sg bad st lost < <(daq_udp "$FOUND" --rcvbuf 32M)
         [ "$bad" = 0 ] || BAD=$((BAD + 1)) ;;
    esac
    busy=$(busy_cores "$j0" "$CPUS" "$t0")
    echo "$name $g $loss $tc $rc $busy $sg $L $bad $st" >> "$ROWS"
    printf 'round %s %-13s %7.3f Gb/s recv (%7.3f sent), loss %8.4f %%, tx %.2f + rx %.2f cores, cpus busy %.2f, load %s%s\n' \
      "$i" "$name" "$g" "$sg" "$loss" "$tc" "$rc" "$busy" "$L" "$([ "$bad" = - ] || echo ", $bad bad, $st")"
  done
done < /dev/null
if [ -n "${KEEP:-}" ]; then cp "$ROWS" "$KEEP"; fi
echo "columns: name gbps loss% tx_cores rx_cores busy_cores(/proc/stat) sent_gbps load1 integrity_errors status"
declare -A PSC G # by name: median Gb/s per sender core, median Gb/s
for n in daq-paced daq-paced-32M daq-flood iperf-flood iperf-paced; do
  read -r mg lg hg < <(awk -v n="$n" '$1==n{print $2}' "$ROWS" | stats)
  read -r ml _ hl < <(awk -v n="$n" '$1==n{print $3}' "$ROWS" | stats)
  read -r mt _ _ < <(awk -v n="$n" '$1==n{print $4}' "$ROWS" | stats)
  read -r mr _ _ < <(awk -v n="$n" '$1==n{print $5}' "$ROWS" | stats)
  read -r mp lp hp < <(awk -v n="$n" '$1==n && $4 > 0 {print $2 / $4}' "$ROWS" | stats)
  read -r mq _ _ < <(awk -v n="$n" '$1==n && $6 > 0 {print $2 / $6}' "$ROWS" | stats)
  printf '%-11s median %7.3f Gb/s (%.3f-%.3f), loss %.4f %% (max %.4f), tx %.3f rx %.3f cores, per sender core %.2f Gb/s (%.2f-%.2f), per busy core %.2f\n' \
    "$n" "$mg" "$lg" "$hg" "$ml" "$hl" "$mt" "$mr" "$mp" "$lp" "$hp" "$mq"
  PSC[$n]=$mp G[$n]=$mg
done
awk -v f="$FOUND" -v i="${G[iperf-flood]}" -v a="${PSC[daq-paced]}" -v b="${PSC[iperf-flood]}" 'BEGIN {
  printf "loss-free max %.3f Gb/s / iperf3 unpaced %.3f = %.2fx; per sender core: daqtune at R %.2f / iperf3 unpaced %.2f = %.2fx (goal 2x)\n",
    f, i, (i > 0 ? f / i : 0), a, b, (b > 0 ? a / b : 0) }'
if [ "$BAD" -gt 0 ]; then echo "FAIL: $BAD daqtune run(s) lost messages at R or failed verification"; exit 1; fi
echo "every daqtune run verified every datagram; none of the paced runs at R lost one"
