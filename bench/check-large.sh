#!/bin/sh
# `daqtune check` on issue 3's synthetic host root (256 CPUs, 8 GPUs, 16 NIC ports, 448 PCI
# functions): generate it, run the release binary N times, print each run's own timing
# (the report's elapsed_ms) and the median.
# Usage: bench/check-large.sh [RUNS]   (needs python3 and a release build: cargo build --release -p daqtune)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-20}
bin="$here/target/release/daqtune"
[ -x "$bin" ] || { echo "build first: cargo build --release -p daqtune" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$here/tests/fixtures/gen_pci.py" --out "$tmp" bench-large >/dev/null
"$bin" check --root "$tmp/bench-large" --profile generic-dgpu --format json >/dev/null || true  # warm the page cache
i=0
: > "$tmp/ms"
while [ "$i" -lt "$runs" ]; do
    "$bin" check --root "$tmp/bench-large" --profile generic-dgpu --format json \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["elapsed_ms"])' >> "$tmp/ms"
    i=$((i + 1))
done
sort -n "$tmp/ms" | awk '{a[NR]=$1} END {printf "runs %d  min %d ms  median %d ms  max %d ms\n", NR, a[1], a[int((NR+1)/2)], a[NR]}'
