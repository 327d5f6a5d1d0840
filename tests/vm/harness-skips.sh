#!/usr/bin/env bash
# Every skip of the VM harness carries its reason (issue 46 item 6). Each guest image script is
# run with its tools hidden from PATH (mmdebstrap, arch-test, qemu-system-*: nothing is built)
# and must print its "NAME: SKIP: reason" line naming the missing tool; that line is then read
# the way host-lifecycle.sh reads it (the same sed expression, taken from the script itself),
# and the reason must come through whole. Before the fix host-lifecycle.sh matched only script
# names without digits, and `--variant spark` printed "spark: SKIP: " with nothing after it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
for d in /usr/bin /bin /usr/sbin /sbin; do
  for f in "$d"/*; do
    n=${f##*/}
    case $n in qemu-system-*|arch-test|mmdebstrap) continue ;; esac
    [[ -e $bin/$n ]] || ln -s "$f" "$bin/$n"
  done
done
# host-lifecycle.sh's own expression for the reason (between its single quotes).
expr=$(grep -o "sed -n 's/^\[A-Za-z0-9_.-\]\*: SKIP: //p'" "$here/host-lifecycle.sh" | head -n 1 | sed "s/^sed -n '//; s/'\$//")
if [[ -z $expr ]]; then
  echo "harness-skips: FAIL: host-lifecycle.sh has no skip-reason expression to test"
  exit 1
fi
fails=0
for script in lifecycle-image.sh lifecycle-image-uefi.sh lifecycle-image-arm64.sh; do
  set +e
  out=$(PATH=$bin DAQTUNE_VM_CACHE=$bin/cache "$here/$script" 2>/dev/null)
  rc=$?
  set -e
  reason=$(printf '%s\n' "$out" | sed -n "$expr" | head -n 1)
  if [[ $rc != 125 || ! $reason =~ (qemu-system-[a-z0-9_]+|arch-test|mmdebstrap)\ not\ found ]]; then
    echo "harness-skips: FAIL: $script (exit $rc): no reason naming the missing tool came through: ${out:-<nothing>}"
    fails=$((fails + 1))
  else
    echo "harness-skips: ok: $script: $reason"
  fi
done
exit $((fails > 0))
