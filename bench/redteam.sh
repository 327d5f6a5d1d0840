#!/bin/bash
# Issue 23's red-team inputs, built at full size and replayed by a daqtune binary: each case's
# wall time, peak resident memory and exit status. The acceptance is "any archive of at most
# the snapshot limit replays within 10 s on the 2-core machine with bounded memory"; this is
# the benchmark for it (no test asserts a time).
#
# Usage: bench/redteam.sh [BINARY] [LIMIT_S]
#   BINARY   default target/release/daqtune (cargo build --release -p daqtune)
#   LIMIT_S  a case still running after this many seconds is killed and shown as ">LIMIT" (default 60)
# Needs: bash, python3, tar, zstd, timeout, /usr/bin/time (GNU time, for peak memory).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-"$here/target/release/daqtune"}
limit=${2:-60}
[ -x "$bin" ] || { echo "no binary at $bin: cargo build --release -p daqtune" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fx="$here/tests/fixtures"

# A CPU list naming every u16 CPU, repeated: the shape of the bombs in issue 23, row 3.
bomb() { python3 -c "import sys; sys.stdout.write('0-65535,' * int(sys.argv[1]))" "$1"; }

# 1. CPU-list bomb archive: every local_cpulist of the x86-2s fixture (11 files) holding
#    `0-65535,` x 7000, packed as a snapshot archive (22 KB compressed).
mkdir -p "$tmp/cpulist" && cp -a "$fx/x86-2s/." "$tmp/cpulist/"
find "$tmp/cpulist" -name local_cpulist | while read -r f; do bomb 7000 > "$f"; done
tar -C "$tmp/cpulist" -cf - . | zstd -q -1 -o "$tmp/cpulist.tar.zst"

# 2. A 38 KB /proc/cmdline: isolcpus= with `0-65535,` x 4750.
mkdir -p "$tmp/cmdline" && cp -a "$fx/x86-2s/." "$tmp/cmdline/"
printf 'BOOT_IMAGE=/vmlinuz ro isolcpus=managed_irq,domain,%s nohz_full=2-5\n' "$(bomb 4750)" \
    > "$tmp/cmdline/proc/cmdline"

# 3. A 56 KB cpu/online: `0-65535,` x 7000.
mkdir -p "$tmp/online" && cp -a "$fx/x86-2s/." "$tmp/online/"
bomb 7000 > "$tmp/online/sys/devices/system/cpu/online"

# 4. An 80 KB profile `isolated:`.
printf 'name: iso-bomb\nextends: generic-dgpu\ncpu:\n  isolated: "%s"\n' "$(bomb 10000)" > "$tmp/iso.yaml"

# 5. A profile nested 100,000 deep.
python3 -c "print('name: nest\ncpu:\n  isolated: ' + '[' * 100000)" > "$tmp/nest.yaml"

# 6. A DAQIRI configuration with 40,000 queues (all on CPU 5).
queues() { python3 - "$@" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    f.write("daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    master_core: 3\n"
            "    interfaces:\n    - name: p\n      address: 0000:01:00.0\n      rx:\n        queues:\n")
    for q in range(int(sys.argv[2])):
        f.write(f"        - name: q{q}\n          id: {q}\n          cpu_core: 5\n          batch_size: 1\n")
EOF
}
queues "$tmp/queues.yaml" 40000
# 6b. 4000 queues on one core: within the list bound, so checked (each verdict used to list
#     every other queue: quadratic text).
queues "$tmp/queues4k.yaml" 4000

# 7. Hostile host strings: a GPU UUID that is a shell command, escape sequences in the DMI
#    product name and the hostname.
mkdir -p "$tmp/hostile" && cp -a "$fx/gpu-h200/." "$tmp/hostile/"
python3 - "$tmp/hostile" <<'EOF'
import os, re, sys
root = sys.argv[1]
p = os.path.join(root, "daqtune/gpu.json")
s = open(p).read()
uuid = re.search(r'"(GPU-[^"]+)"', s).group(1)
open(p, "w").write(s.replace(uuid, "GPU-1; rm -rf / #"))
os.makedirs(os.path.join(root, "sys/class/dmi/id"), exist_ok=True)
open(os.path.join(root, "sys/class/dmi/id/product_name"), "w").write("IGX\x1b[2J\x1b[H\n")
os.makedirs(os.path.join(root, "proc/sys/kernel"), exist_ok=True)
open(os.path.join(root, "proc/sys/kernel/hostname"), "w").write("evil\x1b]0;owned\x07\n")
EOF

run() {
    local name=$1
    shift
    local t0 t1 rc mem usr sys cpu
    t0=$(date +%s.%N)
    if [ -x /usr/bin/time ]; then
        timeout -s KILL "$limit" /usr/bin/time -f '%U %S %M' -o "$tmp/mem" "$bin" "$@" >/dev/null 2>"$tmp/err"
        rc=$?
        read -r usr sys mem < <(tail -1 "$tmp/mem" 2>/dev/null)
        cpu=$(echo "${usr:-0} + ${sys:-0}" | bc 2>/dev/null)
    else
        timeout -s KILL "$limit" "$bin" "$@" >/dev/null 2>"$tmp/err"
        rc=$?
        mem="?"
        cpu="?"
    fi
    t1=$(date +%s.%N)
    if [ "$rc" = 137 ]; then
        printf '%-22s %9s %7s %9s  %s\n' "$name" ">${limit}s" "-" "-" "killed"
    else
        case "$mem" in ''|*[!0-9]*) mem="?" ;; *) mem="$((mem / 1024)) MB" ;; esac
        printf '%-22s %8.2fs %6ss %9s  exit %s  %s\n' "$name" "$(echo "$t1 - $t0" | bc)" "$cpu" "$mem" "$rc" \
            "$(head -c 110 "$tmp/err" | tr '\n\033\007' '   ')"
    fi
}

# wall: elapsed (on a shared 2-core machine mostly waiting for a CPU); cpu: user + system.
printf '%-22s %9s %7s %9s  %s\n' case wall cpu peak-RSS result
run cpulist-archive check --root "$tmp/cpulist.tar.zst" --profile generic-dgpu
run cpulist-archive-diff diff "$tmp/cpulist.tar.zst" "$tmp/cpulist.tar.zst" --profile generic-dgpu
run cmdline-38k check --root "$tmp/cmdline" --profile generic-dgpu
run cpu-online-56k check --root "$tmp/online" --profile generic-dgpu
run profile-isolated-80k check --root "$fx/x86-2s" --profile "$tmp/iso.yaml"
run profile-nesting-100k check --root "$fx/x86-2s" --profile "$tmp/nest.yaml"
run config-40k-queues check --root "$fx/x86-2s" --profile generic-dgpu --config "$tmp/queues.yaml"
run config-4000-queues check --root "$fx/x86-2s" --profile generic-dgpu --config "$tmp/queues4k.yaml"
run hostile-strings check --root "$tmp/hostile" --profile generic-dgpu
