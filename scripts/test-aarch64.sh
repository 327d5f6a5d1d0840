#!/usr/bin/env bash
# daqtune on aarch64 (issue 25): IGX Orin and DGX Spark are arm64, this machine is not.
#
#   scripts/test-aarch64.sh [--no-deb]
#
# 1. The tests of the pure crates (probe, units, render, the engines' argument and parsing code)
#    and the binary's CLI tests, built for aarch64-unknown-linux-gnu and run under qemu-user
#    (.cargo/config.toml names the cross linker and the runner). qemu-user runs the code with
#    the target's ABI (c_char unsigned, its struct layouts and alignment), not the host's.
# 2. The arm64 packages: tests/packaging/test-deb.sh --arch arm64 (scripts/build-deb.sh --arch
#    arm64 cross-builds daqtune and, where the :arm64 headers are installed, the DPDK and RDMA
#    engines with bindgen run against the arm64 headers), each binary an aarch64 ELF.
#    --no-deb leaves this part out.
#
# Left out under qemu-user, each for a reason of the emulator, not of the code:
#   tune/tests/it/qualify.rs,       network namespaces, veth and traffic between them: qemu-user
#   tune/tests/it/selftest_         does not translate every netlink request (RTM_NEWNEIGH fails
#   socket_e2e.rs                   with EOPNOTSUPP, measured: 8 of socket_e2e's 10 tests)
#   tune/tests/it/selftest_rdma.rs  soft-RoCE devices (rdma_rxe) and verbs traffic
#   tune/tests/it/selftest_cli.rs   the socket self-test between veth namespaces (as above)
#   selftest-rdma (--lib),       the RDMA launcher's test spawns a missing file and wants the
#   selftest's launch::rdma::    spawn error: under qemu-user the spawn succeeds and the child
#   tests::helper_exit_status_   exits 127 (read as "the loader could not start it", a skip:
#   is_passed_through            exit 0 instead of 2)
#   tune/tests/fleet*.rs         a Python virtualenv with Ansible from PyPI, run natively: the
#                                code under test is the textfile the native run checks already
#
# Left out for time, not for the emulator: tune/tests/it/golden.rs's all-fixtures run (279 s under
# qemu-user; the native run compares the same output byte for byte) and tune/tests/it/snapshot.rs
# (68 s; its live-host test could not run here anyway: under qemu-user uname says aarch64 while
# /proc and /sys are the x86 build machine's), and the property test runs 32 of its 64 cases
# (below). The engine's own tests are not built for aarch64 where the binary's CLI tests run:
# the engine is code with no architecture-dependent part (no c_char, no target_arch; libc only
# for errno values and open flags, whose meaning comes from the kernel the binary's apply and
# snapshot tests call here), and those CLI tests run the same commands through the aarch64
# binary, the engine inside it; archives (tar and zstd, whose C code is cross-compiled) are
# read by the binary's snapshot tests named below. Building them was a fifth of the cross
# build (the engine's unit-test build 149 s, its integration tests 46 s of 961 compiler-seconds,
# cargo --timings, 2026-11-30), and its 245 integration tests took 632 s under qemu-user beside
# the fleet's guests (2026-11-29).
#
# Exit: 0 passed; 1 a test failed; 125 the cross toolchain is missing (the reason on a line
# "test-aarch64: SKIP: ..."), which scripts/test-all.sh reports as a skip.
set -euo pipefail
cd "$(dirname "$0")/.."

deb=1
[[ ${1:-} == --no-deb ]] && deb=0
target=aarch64-unknown-linux-gnu
VM_NAME=test-aarch64
# shellcheck source=tests/vm/lib.sh
. tests/vm/lib.sh # skip, vm_require
# This script's log is a section header of the cargo run's output, not lib.sh's prefixed line.
log() { printf '\n== aarch64: %s\n' "$*"; }

command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || skip "aarch64-linux-gnu-gcc not found (apt-get install gcc-aarch64-linux-gnu)"
[[ -e /usr/aarch64-linux-gnu/include/stdio.h ]] || skip "the cross compiler has no C library headers (apt-get install libc6-dev-arm64-cross)"
command -v qemu-aarch64 >/dev/null 2>&1 || skip "qemu-aarch64 not found (apt-get install qemu-user)"
[[ -e /lib/ld-linux-aarch64.so.1 ]] || skip "no arm64 C library (dpkg --add-architecture arm64; apt-get install libc6:arm64)"
if command -v rustup >/dev/null 2>&1; then
  rustup target list --installed | grep -qx "$target" || skip "the Rust target $target is not installed (rustup target add $target)"
elif [[ ! -d $(rustc --print sysroot)/lib/rustlib/$target ]]; then
  skip "the Rust standard library for $target is not installed"
fi

# The CLI tests spawn target/<triple>/debug/daqtune: the kernel must hand aarch64 ELFs to
# qemu (binfmt_misc, which qemu-user-static registers at install on a normal host). In a
# container the handler may be missing although the package is installed: register Debian's
# own entry (the F flag opens the interpreter now, so it works in any mount namespace).
binfmt=/proc/sys/fs/binfmt_misc
cli=1
if [[ ! -e $binfmt/qemu-aarch64 ]]; then
  conf=/usr/lib/binfmt.d/qemu-aarch64.conf
  if [[ $(id -u) == 0 && -f $conf ]]; then
    [[ -e $binfmt/register ]] || mount -t binfmt_misc binfmt_misc "$binfmt" 2>/dev/null || true
    if [[ -e $binfmt/register ]] && cat "$conf" >"$binfmt/register" 2>/dev/null; then
      echo "test-aarch64: registered the qemu-aarch64 binfmt handler ($conf)"
    fi
  fi
  if [[ ! -e $binfmt/qemu-aarch64 ]]; then
    cli=0
    echo "test-aarch64: no binfmt handler for aarch64 ELFs (install qemu-user-static as root): the CLI tests of the binary are left out"
  fi
fi

t0=$SECONDS
# One cargo build for everything: with the same package set, cargo resolves features once and
# builds each crate once (four invocations with different sets built probe, selftest and engine
# up to three times: 330 s of the 724 s this took on 2026-11-27). Each crate has one
# integration-test binary (`it`, issue 44) and the modules of selftest's and the binary's that
# run here are chosen by name, which a cargo filter cannot do per package (it applies to every
# binary): so the binaries are built with --no-run and run here under the runner
# (.cargo/config.toml's qemu-aarch64), each in its package's directory as cargo would. All of
# probe's, units' and render's tests (the engine's where the CLI tests cannot run: the header
# says why not beside them); selftest's gpu_sink_fixture (its tests that spawn the
# daqtune-selftest binary, find_max_cli and gpu_sink_cli, live with the binary in the daqtune
# crate since issue 44 and run with the CLI tests below; the header says why the rest do not); daqtune-dpdk's lib and bin unit tests
# (its integration test spawns the engine binary: the CLI tests' condition). No doc tests (none
# of these crates has one).
pkgs=(-p daqtune-probe -p daqtune-units -p daqtune-render -p daqtune-selftest -p daqtune-dpdk)
declare -A modules=(
  [daqtune-selftest]="gpu_sink_fixture::"
  [daqtune-dpdk]=""
)
# Unit tests left out by name (the emulator's reason above).
declare -A unit_args=(
  [daqtune-selftest]="--skip launch::rdma::tests::helper_exit_status_is_passed_through"
)
if ((cli)); then
  # The binary's CLI tests on the fixture roots. Its golden module's all-fixtures run is left
  # out: it runs daqtune on every fixture with every profile, 279 s under qemu-user
  # (2026-11-27), for output the native run compares byte for byte already. Its snapshot
  # tests (archives, replays, the tar safety checks: 68 s under qemu-user) are left to the
  # native run for the same reason of time, but for three that read archives through the
  # binary (under a second natively): a real GPU host's .tar.zst replayed to its verdicts, and
  # entries that escape the root or are device nodes refused.
  pkgs+=(-p daqtune)
  # Two processes (`|`): the loopback search's trials last what they last, and as the last
  # process of the run the CLI tests kept one core alone for 99 s (2026-11-30).
  modules[daqtune]="selftest_find_max_cli:: | foundation:: appconfig:: apply_cli:: pci_checks:: gpu:: selftest_gpu_sink_cli:: golden:: snapshot::gpu_machine_snapshot_replays_to_its_live_verdicts snapshot::hostile::escapes_are_refused_and_nothing_lands_outside snapshot::hostile::fifo_device_nodes_and_hard_links_are_refused --skip outputs_on_every_fixture_and_profile_match_the_recorded_ones"
else
  pkgs+=(-p daqtune-engine)
fi
log "cargo test --target $target: probe, units, render, selftest, daqtune-dpdk's pure code$( ((cli)) && echo ", the CLI tests on the fixture roots" || echo ", engine")"
# The property test's 64 generated hosts take 114 s under qemu-user; the property is the same
# code on both architectures. Half of them (the same seed, so the first 32 of the native run's)
# still reach every planning tunable both ways, which the test itself asserts (16 did not reach
# kernel.numa-balancing; 24 is the least that does). The native run keeps 64.
# One test at a time in each test process: qemu-user (Debian 12's 7.2) emulates the spawn of a
# child as a fork of the whole emulator, and a fork while another guest thread holds one of
# qemu's own locks leaves the child stuck before its exec. It happened once in a README run
# (2026-11-27 09:40 UTC, selftest's dpdk_launcher test: a `#!/bin/sh` engine that prints and
# exits was still there after 63 s, did not answer SIGTERM, as a real sh would have, and was
# killed 10 s later). With one test thread the only guest thread at a spawn is the spawner (the
# tests that run threads of their own, tunables_agree and tunables_prop, spawn nothing).
built=target/aarch64-test-binaries.txt
mkdir -p target
# Built at opt-level 1, not the dev profile's 0: under qemu-user every instruction is
# translated, and unoptimised code (each value through the stack) made the run 1,100 s of the
# README command's critical path. Measured 2026-11-29 on the engine's integration tests (244
# tests, one thread, beside a fleet run): 307 CPU-s at opt-level 1 in one process, against 971 at
# 0 summed over a process per test (about 120 of them the processes' start); the cross
# build of the workspace crates costs more at 1, once the dependencies (rebuilt once for this
# setting, then cached like any other) are there. Debug assertions and overflow checks stay
# on: they are the profile's own settings, not the optimiser's; the crates that the profile
# already optimises keep their level.
# Without the dev profile's line tables: nothing here prints a backtrace (a failed assertion's
# file and line come from the panic location, not from debug information), and the cross build
# of the same set took 982 CPU-seconds (501 s) without them against 1,111 (564 s) with them,
# and 364 MB of target/ against 1.1 GB (2026-11-29, quiet, from an empty target directory).
a64_opt=(--config 'profile.dev.opt-level=1' --config 'profile.dev.debug=0')
# One line per test binary: KIND (unit or the integration test's name) DIRECTORY EXECUTABLE.
cargo test --locked --target "$target" "${a64_opt[@]}" "${pkgs[@]}" --lib --bins --tests --no-run \
  --message-format=json-render-diagnostics |
  python3 -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"] if m["target"]["kind"] == ["test"] else "unit"
        print(name, os.path.dirname(m["manifest_path"]), m["executable"])
' >"$built"
# Two test processes at a time (DAQTUNE_AARCH64_JOBS, default the CPU count): one test thread
# in each (above), but the processes share nothing, and the engine's integration tests alone
# kept one core busy for minutes at the end of the README command while the other idled
# (2026-11-29, the sampler in docs/performance.md). The integration tests, the longest, start
# first; each process's output is printed whole when it ends.
parallel=${DAQTUNE_AARCH64_JOBS:-$(nproc)}
[[ $parallel =~ ^[1-9][0-9]*$ ]] || parallel=1
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A job_what=() job_log=()
failed=()
running=0
reap() { # wait for one test process, print its output, count a failure
  local pid="" rc=0
  wait -n -p pid || rc=$?
  running=$((running - 1))
  cat "${job_log[$pid]}"
  # A process started with name filters that ran no test passes by itself: a renamed module
  # or test would leave it checking nothing.
  if ((rc == 0)) && [[ ${job_what[$pid]} == *"::"* ]] && grep -qx 'running 0 tests' "${job_log[$pid]}"; then
    echo "test-aarch64: ${job_what[$pid]}: no test matched its filters"
    rc=1
  fi
  if ((rc)); then
    echo "test-aarch64: ${job_what[$pid]}: FAILED (exit $rc)"
    failed+=("${job_what[$pid]}")
  fi
}
n=0
while read -r kind pkgdir exe; do
  pkg=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$pkgdir/Cargo.toml" | head -n1)
  parts=("")
  if [[ $kind == it && -v "modules[$pkg]" ]]; then
    [[ -n ${modules[$pkg]} ]] || continue
    IFS='|' read -ra parts <<<"${modules[$pkg]}"
  elif [[ $kind == unit && -v "unit_args[$pkg]" ]]; then
    parts=("${unit_args[$pkg]}")
  elif [[ $kind != unit && $kind != it ]]; then
    continue
  fi
  for part in "${parts[@]}"; do # one test process for each `|`-separated part
    read -ra args <<<"$part"
    ((running < parallel)) || reap
    n=$((n + 1))
    echo "test-aarch64: $pkg ($kind) ${args[*]}: started"
    (cd "$pkgdir" && PROPTEST_CASES=${PROPTEST_CASES:-32} qemu-aarch64 "$exe" --test-threads=1 "${args[@]}" </dev/null) \
      >"$logs/$n.log" 2>&1 &
    job_what[$!]="$pkg ($kind)${args[*]:+ ${args[*]}}"
    job_log[$!]="$logs/$n.log"
    running=$((running + 1))
  done
done < <(sort -s -k1,1 "$built")
while ((running > 0)); do reap; done
if ((${#failed[@]})); then
  echo "test-aarch64: FAILED: ${failed[*]}"
  exit 1
fi
echo "test-aarch64: tests under qemu-user in $((SECONDS - t0)) s"

if ((deb)); then
  log "arm64 packages (tests/packaging/test-deb.sh --arch arm64)"
  t=$SECONDS
  tests/packaging/test-deb.sh --arch arm64
  echo "test-aarch64: arm64 packages in $((SECONDS - t)) s"
fi
