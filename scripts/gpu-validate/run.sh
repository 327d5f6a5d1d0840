#!/bin/bash
# Read-only GPU validation on a machine with an NVIDIA GPU. Changes no GPU setting: it runs
# daqtune's read-only probe/check, nvidia-smi queries, and copies a few /proc and /sys files.
# usage: scripts/gpu-validate/run.sh OUTDIR   (binaries from $BIN, default .dev-bin)
set -u
OUT=${1:?usage: run.sh OUTDIR}
BIN=${BIN:-.dev-bin}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
date -u +%Y-%m-%dT%H:%M:%SZ > "$OUT/when.txt"
{ uname -a; grep PRETTY_NAME /etc/os-release; nproc; } > "$OUT/machine.txt" 2>&1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1
cat /proc/driver/nvidia/version > "$OUT/proc-driver-nvidia-version.txt" 2>&1
grep -E '^(nvidia|nv_peer|ib_|mlx)' /proc/modules > "$OUT/proc-modules-nvidia.txt" 2>&1
ls -la /sys/kernel/mm/memory_peers > "$OUT/memory_peers.txt" 2>&1
pgrep -c persistenced > "$OUT/persistenced.txt" 2>&1

# Start-up cost: each run is a fresh process (dlopen + nvmlInit_v2 / cuInit measured inside).
for i in 1 2 3 4 5; do
  "$BIN/gpu_facts" > "$OUT/facts-$i.json" 2> "$OUT/facts-$i.err"
done
# A host root with the recorded facts and the files the GPU checks read, for --root replay.
ROOT="$OUT/root"
"$BIN/gpu_facts" --write "$ROOT" 2>> "$OUT/facts-write.err"
mkdir -p "$ROOT/proc/driver/nvidia" "$ROOT/sys/kernel/mm"
cp /proc/driver/nvidia/version "$ROOT/proc/driver/nvidia/version" 2>/dev/null
cp /proc/modules "$ROOT/proc/modules" 2>/dev/null
[ -d /sys/kernel/mm/memory_peers ] && cp -r /sys/kernel/mm/memory_peers "$ROOT/sys/kernel/mm/" 2>/dev/null

if [ -x "$BIN/daqtune" ]; then
  GPU_IDS=(gpu.clocks gpu.bar1 gpu.gpudirect gpu.peermem gpu.driver)
  # Whole-report wall time, three fresh processes; then only the non-GPU checks, so the
  # difference is the GPU checks' cost (NVML + CUDA start-up included).
  for i in 1 2 3; do
    s=$(date +%s%N); "$BIN/daqtune" check --format json > "$OUT/check-$i.json" 2> "$OUT/check-$i.err"
    echo "check all: rc=$? wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))" >> "$OUT/timing.txt"
  done
  for i in 1 2 3; do
    s=$(date +%s%N); "$BIN/daqtune" check platform cpu.governor cpu.idle kernel.cmdline hugepages numa net.sysctl --format json > /dev/null 2>&1
    echo "check non-GPU: rc=$? wall_ms=$(( ($(date +%s%N) - s) / 1000000 ))" >> "$OUT/timing.txt"
  done
  "$BIN/daqtune" check > "$OUT/check.txt" 2>&1
  "$BIN/daqtune" check "${GPU_IDS[@]}" --format json > "$OUT/check-gpu.json" 2> "$OUT/check-gpu.err"
  # Non-root: NVML and CUDA reads need no privilege (/dev/nvidia* are world-usable).
  chmod -R a+rX "$BIN" 2>/dev/null
  setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN/daqtune" check "${GPU_IDS[@]}" --format json > "$OUT/check-gpu-nonroot.json" 2> "$OUT/check-gpu-nonroot.err"
  echo "nonroot rc=$?" >> "$OUT/check-gpu-nonroot.err"
  "$BIN/daqtune" check --root "$ROOT" --format json > "$OUT/check-replay.json" 2> "$OUT/check-replay.err"
  python3 "$HERE/compare.py" "$OUT/facts-1.json" "$OUT/check-1.json" > "$OUT/compare.txt" 2>&1
else
  python3 "$HERE/compare.py" "$OUT/facts-1.json" > "$OUT/compare.txt" 2>&1
fi
echo "compare rc=$?" >> "$OUT/compare.txt"
cat "$OUT/compare.txt"
grep -h "gather_live" "$OUT"/facts-*.err
