#!/usr/bin/env bash
# First-run cost of `daqtune check` on a live host with several GPUs, in interleaved rounds.
#
#   bench/check-multigpu.sh ROUNDS DAQTUNE
#
# Variants (each a whole process, wall time in ms):
#   cold        DAQTUNE check --no-cache   CUDA read afresh, as on the first run of a boot: one
#                                          GPU per model, in a child (docs/gpu-facts.md)
#   cold-every  the same with DAQTUNE_CUDA_EVERY_GPU=1: cuInit on every GPU in-process, as
#                                          before (the baseline, same binary)
#   warm        DAQTUNE check              CUDA attributes from this boot's cache
# With VARIANTS="cold cold-wait cold-nvml-first cold-cuda-first" (issue 30's measurements):
#   cold-wait        cold, waiting for the child's exit before using its report (as before)
#   cold-nvml-first  cold, NVML then CUDA, one after the other (DAQTUNE_GPU_ORDER)
#   cold-cuda-first  cold, CUDA then NVML
# Per run it also prints the facts' own timing (NVML init/query, cuInit, CUDA query, in ms).
# Read-only: `check` changes nothing but daqtune's own cache under /run/daqtune.
set -uo pipefail
rounds=${1:?usage: $0 ROUNDS DAQTUNE}
daqtune=${2:?usage: $0 ROUNDS DAQTUNE}
read -r -a variants <<<"${VARIANTS:-cold cold-every warm}"
out=$(mktemp)
results=$(mktemp)
trap 'rm -f "$out" "$results"' EXIT
run_variant() {
    case "$1" in
        cold) "$daqtune" --no-cache check --format json ;;
        cold-every) DAQTUNE_CUDA_EVERY_GPU=1 "$daqtune" --no-cache check --format json ;;
        warm) "$daqtune" check --format json ;;
        cold-wait) DAQTUNE_CUDA_CHILD_WAIT=1 "$daqtune" --no-cache check --format json ;;
        cold-nvml-first) DAQTUNE_GPU_ORDER=nvml-first "$daqtune" --no-cache check --format json ;;
        cold-cuda-first) DAQTUNE_GPU_ORDER=cuda-first "$daqtune" --no-cache check --format json ;;
    esac
}
for v in "${variants[@]}"; do run_variant "$v" >/dev/null 2>&1; done
n=${#variants[@]}
for ((r = 0; r < rounds; r++)); do
    for ((i = 0; i < n; i++)); do
        v=${variants[$(((i + r) % n))]}
        t0=$(date +%s%N)
        run_variant "$v" >"$out" 2>/dev/null
        rc=$?
        t1=$(date +%s%N)
        t=$(python3 -c 'import json,sys
try: t=json.load(open(sys.argv[1]))["gpu_facts"]["timing"]
except Exception as e: t={}
print(" ".join("%s=%s"%(k,round(v,1)) for k,v in sorted(t.items()) if v is not None))' "$out")
        echo "$v $(((t1 - t0) / 1000000)) $rc $t" | tee -a "$results"
    done
done
python3 - "$results" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    f = line.split()
    by.setdefault(f[0], []).append(int(f[1]))
print("variant      median   min   max  (ms, %d rounds)" % max(len(v) for v in by.values()))
for k, v in by.items():
    print("%-12s %6d %5d %5d" % (k, statistics.median(v), min(v), max(v)))
PY
