#!/bin/sh
# `daqtune status` on a copy of the IGX fixture root after a full apply (every setting of the
# igx-orin profile: 12 governors, idle states, hugepages, MRRS, MTU, units, the grub drop-in):
# RUNS runs of `status --format json`, wall time each, then min / median / max.
# Usage: bench/status.sh [RUNS]   (BIN=path/to/daqtune; default: the release build)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-20}
bin=${BIN:-"$here/target/release/daqtune"}
[ -x "$bin" ] || { echo "build first: cargo build --release -p daqtune (or set BIN)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -a "$here/tests/fixtures/igx-untuned" "$tmp/root"
mkdir -p "$tmp/root/usr/bin"
printf '#!/bin/sh\nexit 0\n' > "$tmp/root/usr/bin/daqtune"
chmod 755 "$tmp/root/usr/bin/daqtune"
"$bin" apply --root "$tmp/root" --profile igx-orin --yes >/dev/null || true
"$bin" status --root "$tmp/root" --format json > "$tmp/status.json" || true
python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]; print("settings held %d, drift %d, unknown %d" % (s["held"], s["drift"], s["unknown"]))' "$tmp/status.json"
i=0
: > "$tmp/ms"
while [ "$i" -lt "$runs" ]; do
    s=$(date +%s%N)
    "$bin" status --root "$tmp/root" --format json >/dev/null || true
    e=$(date +%s%N)
    echo $(( (e - s) / 1000000 )) >> "$tmp/ms"
    i=$((i + 1))
done
sort -n "$tmp/ms" | awk '{a[NR]=$1} END {printf "runs %d  min %d ms  median %d ms  max %d ms\n", NR, a[1], a[int((NR+1)/2)], a[NR]}'
