#!/usr/bin/env bash
# `daqtune check` on a live GPU host against DAQIRI's tune_system.py, in interleaved rounds.
#
#   bench/check-gpu.sh ROUNDS DAQTUNE [TUNE_SYSTEM_PY] [DAQTUNE_BASELINE]
#
# Each round runs every variant once, in an order that rotates from round to round, so a change
# of load on the host hits all of them alike. Variants:
#   anchor    python3 TUNE_SYSTEM_PY --check all            (the tool daqtune replaces)
#   cold      DAQTUNE check --no-cache                      (CUDA read afresh: the first run of a boot)
#   warm      DAQTUNE check                                 (CUDA attributes and NVML's static
#                                                           answers from /run/daqtune)
#   noattach  DAQTUNE_NVML_INIT=no-attach DAQTUNE check     (warm, NVML initialised with
#                                                           nvmlInitWithFlags(NO_ATTACH))
#   non-gpu   DAQTUNE check <every id but gpu.* and app.*>  (no driver library needed)
#   baseline  DAQTUNE_BASELINE check                        (an older build, to compare with)
# Wall time of the whole process, in ms. Prints one line per run (`variant ms exit`), then the
# median, min and max per variant and the ratios the performance targets are stated in.
# Read-only: `check` changes nothing (the cache file under /run/daqtune is daqtune's own).
set -uo pipefail

rounds=${1:?usage: $0 ROUNDS DAQTUNE [TUNE_SYSTEM_PY] [DAQTUNE_BASELINE]}
daqtune=${2:?usage: $0 ROUNDS DAQTUNE [TUNE_SYSTEM_PY] [DAQTUNE_BASELINE]}
anchor=${3:-}
baseline=${4:-}

nongpu=$("$daqtune" explain --list 2>/dev/null | awk '{print $1}' | grep -v -E '^(gpu\.|app\.)' | grep -E '^[a-z]+(\.[a-z-]+)?$' | paste -sd' ')
[ -n "$nongpu" ] || { echo "cannot list check ids with $daqtune explain --list" >&2; exit 2; }

variants=(cold warm noattach non-gpu)
[ -n "$anchor" ] && variants=(anchor "${variants[@]}")
[ -n "$baseline" ] && variants+=(baseline)

run_variant() {
    case "$1" in
        anchor) python3 "$anchor" --check all ;;
        cold) "$daqtune" check --no-cache --format json ;;
        warm) "$daqtune" check --format json ;;
        noattach) DAQTUNE_NVML_INIT=no-attach "$daqtune" check --format json ;;
        non-gpu) # shellcheck disable=SC2086
            "$daqtune" check $nongpu --format json ;;
        baseline) "$baseline" check --format json ;;
    esac
}

# One untimed run of each: page cache, and the CUDA cache filled for `warm`.
for v in "${variants[@]}"; do run_variant "$v" >/dev/null 2>&1; done

results=$(mktemp)
trap 'rm -f "$results"' EXIT
n=${#variants[@]}
for ((r = 0; r < rounds; r++)); do
    for ((i = 0; i < n; i++)); do
        v=${variants[$(((i + r) % n))]}
        t0=$(date +%s%N)
        run_variant "$v" >/dev/null 2>&1
        rc=$?
        t1=$(date +%s%N)
        ms=$(((t1 - t0) / 1000000))
        echo "$v $ms $rc" | tee -a "$results"
    done
done

python3 - "$results" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    v, ms, rc = line.split()
    runs.setdefault(v, []).append(int(ms))
med = {v: statistics.median(x) for v, x in runs.items()}
print()
print(f"{'variant':10} {'median':>8} {'min':>6} {'max':>6}  runs")
for v, x in runs.items():
    print(f"{v:10} {med[v]:8.0f} {min(x):6} {max(x):6}  {len(x)}")
if "anchor" in med:
    for v in ("warm", "noattach", "cold", "non-gpu", "baseline"):
        if v in med and med[v] > 0:
            print(f"anchor / {v}: {med['anchor'] / med[v]:.1f}x")
if "baseline" in med and "cold" in med:
    print(f"cold / baseline: {med['cold'] / med['baseline']:.2f} (first run of a boot vs the older build)")
EOF

# Where the time of one run goes (the facts' own timing and, with DAQTUNE_GPU_TRACE, every NVML
# call), warm and cold, and which facts NVML leaves out under NO_ATTACH. Not part of the rounds.
trace=$(mktemp -d)
trap 'rm -f "$results"; rm -rf "$trace"' EXIT
DAQTUNE_GPU_TRACE=1 "$daqtune" check --format json >"$trace/warm.json" 2>"$trace/warm.trace"
DAQTUNE_GPU_TRACE=1 "$daqtune" check --no-cache --format json >"$trace/cold.json" 2>"$trace/cold.trace"
DAQTUNE_NVML_INIT=no-attach DAQTUNE_GPU_TRACE=1 "$daqtune" check --format json \
    >"$trace/noattach.json" 2>"$trace/noattach.trace"
python3 - "$trace" <<'EOF'
import json, re, sys, collections
d = sys.argv[1]
facts, reports = {}, {}
for run in ("cold", "warm", "noattach"):
    try:
        reports[run] = json.load(open(f"{d}/{run}.json"))
    except (OSError, ValueError) as e:
        print(f"{run}: no report ({e})")
        continue
    f = facts[run] = reports[run].get("gpu_facts") or {}
    t = f.get("timing") or {}
    cache = (f.get("cuda_cache") or {}).get("outcome")
    print(f"\n{run}: cache {cache}; nvml_init_ms {t.get('nvml_init_ms')}; nvml_query_ms "
          f"{t.get('nvml_query_ms')}; nvml_calls {t.get('nvml_calls')}; cuda_init_ms "
          f"{t.get('cuda_init_ms')}; cuda_cache_ms {t.get('cuda_cache_ms')}")
    calls = collections.defaultdict(float)
    for line in open(f"{d}/{run}.trace"):
        m = re.match(r"daqtune gpu trace: gpu (\d+): (\S+): ([\d.]+) ms", line)
        if m:
            calls[m.group(2)] += float(m.group(3))
    top = sorted(calls.items(), key=lambda kv: -kv[1])
    print(f"  {len(calls)} distinct calls, {sum(calls.values()):.2f} ms summed over GPUs; slowest: "
          + ", ".join(f"{k} {v:.2f}" for k, v in top[:8]))
def unavailable(run):
    return {(g.get("uuid"), k, v) for g in facts.get(run, {}).get("gpus", [])
            for k, v in (g.get("unavailable") or {}).items()}
if "warm" in facts and "noattach" in facts:
    extra = sorted(unavailable("noattach") - unavailable("warm"))
    print("\nNO_ATTACH: facts missing that nvmlInit_v2 gave:", extra if extra else "none")
def verdicts(run):
    # Status per subject: messages carry live readings (temperature, clocks) that move.
    return [(c.get("id"), c.get("subject"), c.get("status"))
            for c in reports.get(run, {}).get("checks", []) if str(c.get("id", "")).startswith("gpu.")]
for run in ("warm", "noattach"):
    if run in reports and "cold" in reports:
        print(f"{run} GPU verdicts equal cold's: {verdicts(run) == verdicts('cold')}")
EOF
