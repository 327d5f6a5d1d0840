#!/usr/bin/env bash
# daqtune on aarch64 (issue 25): IGX Orin and DGX Spark are arm64, this machine is not.
#
#   scripts/test-aarch64.sh [--no-deb]
#
# 1. The tests of the pure crates (probe, units, render, the engines' argument and parsing code),
#    built for aarch64-unknown-linux-gnu and run under qemu-user (.cargo/config.toml names the
#    cross linker and the runner), and the binary's CLI tests run against the aarch64 daqtune:
#    the native test harness (the README command's test build) spawns it, and the kernel hands
#    it to qemu-user (binfmt_misc). qemu-user runs the code with the target's ABI (c_char
#    unsigned, its struct layouts and alignment), not the host's.
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
# cargo's JSON messages on stdin: a line per test binary (KIND DIRECTORY EXECUTABLE, KIND
# `unit` or the integration test's name) and per program built (bin NAME EXECUTABLE).
test_binaries() {
  python3 -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    if m["profile"]["test"]:
        name = m["target"]["name"] if m["target"]["kind"] == ["test"] else "unit"
        print(name, os.path.dirname(m["manifest_path"]), m["executable"])
    else:
        print("bin", m["target"]["name"], m["executable"])
'
}

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
  # The binary's CLI tests on the fixture roots, from the native test harness (below): only the
  # binaries are built here, daqtune and daqtune-selftest (its `it`, which would spawn them
  # from under qemu-user too, is built with the package's tests but not run).
  pkgs+=(-p daqtune)
  modules[daqtune]=""
else
  pkgs+=(-p daqtune-engine)
fi
log "cargo test --target $target: probe, units, render, selftest, daqtune-dpdk's pure code$( ((cli)) && echo ", the CLI tests on the fixture roots" || echo ", engine")"
# PROPTEST_CASES=32 for the property tests under qemu-user. The engine's (built here only where
# the CLI tests cannot run): its 64 generated hosts took 114 s under qemu-user; the property is the same
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
# The dev profile's opt-level (0), which the README command's native builds use too. From
# 2026-11-29 to 2026-11-30 this build was at opt-level 1, chosen when the engine's 244
# integration tests ran under qemu-user (307 CPU-s at 1 against 971 at 0); they no longer run
# here, nor does the test harness of the CLI tests (the native one spawns the aarch64 binary,
# below). Measured 2026-11-30, quiet, this script from the same target directory after the
# native test build, the CLI tests still in an aarch64 harness: opt-level 1 474 s and 862
# CPU-seconds (the build 381 s), opt-level 0 385 s and 615 (the build 202 s), while the CLI
# tests took 182 s against 89. With the native harness and two test threads the CLI tests took
# 91 s and 174 CPU-seconds at opt-level 0 (66 s, 95 at 1): still 150 CPU-seconds less in all
# than building every crate at 1. The crates the profile optimises keep their level.
a64_opt=(--config 'profile.dev.debug=0')
# One line per test binary: KIND (unit or the integration test's name) DIRECTORY EXECUTABLE;
# and one per program the tests spawn: bin NAME EXECUTABLE.
cargo test --locked --target "$target" "${a64_opt[@]}" "${pkgs[@]}" --lib --bins --tests --no-run \
  --message-format=json-render-diagnostics | test_binaries >"$built"
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
if ((cli)); then
  # The binary's CLI tests on the fixture roots: the native test harness (tune's `it`, from the
  # native test build; DAQTUNE_NATIVE_FEATURES, which scripts/test-all.sh sets, are its cargo
  # features, so that build is reused) spawns the aarch64 daqtune and daqtune-selftest
  # (DAQTUNE_TEST_BIN_DIR, tune/tests/it/common), which the kernel hands to qemu-user. What
  # these tests prove on aarch64 is the binary's behaviour; their own code (copying fixture
  # roots, reading JSON) is the harness, and run under qemu-user it was half of their time:
  # 89 s in one process against 66 s here with two test threads, the binary at opt-level 1
  # (2026-11-30). A harness outside the emulator may run its tests side by side (the fork
  # hazard above is qemu-user's own fork).
  # The golden module's all-fixtures run is left out: it runs daqtune on every fixture with
  # every profile, 279 s under qemu-user (2026-11-27), for output the native run compares byte
  # for byte already. The snapshot tests (archives, replays, the tar safety checks: 68 s under
  # qemu-user) are left to the native run for the same reason of time, but for three that read
  # archives through the binary (under a second natively): a real GPU host's .tar.zst replayed
  # to its verdicts, and entries that escape the root or are device nodes refused.
  cli_filters=(selftest_find_max_cli:: foundation:: appconfig:: apply_cli:: pci_checks:: gpu::
    selftest_gpu_sink_cli:: golden:: snapshot::gpu_machine_snapshot_replays_to_its_live_verdicts
    snapshot::hostile::escapes_are_refused_and_nothing_lands_outside
    snapshot::hostile::fifo_device_nodes_and_hard_links_are_refused
    --skip outputs_on_every_fixture_and_profile_match_the_recorded_ones)
  a64_daqtune=$(awk '$1 == "bin" && $2 == "daqtune" {print $3}' "$built")
  a64_bin_dir=$(dirname "${a64_daqtune:-/nonexistent/daqtune}")
  for b in daqtune daqtune-selftest; do
    [[ -x $a64_bin_dir/$b ]] || { echo "test-aarch64: FAILED: the aarch64 $b was not built ($a64_bin_dir)"; exit 1; }
    # ELF e_machine 183 (EM_AARCH64): a host binary here would pass every test without
    # testing aarch64 at all.
    [[ $(od -An -tu2 -j18 -N2 "$a64_bin_dir/$b" | tr -d ' ') == 183 ]] ||
      { echo "test-aarch64: FAILED: $a64_bin_dir/$b is not an aarch64 ELF"; exit 1; }
  done
  # Every spawn of the binary in those tests goes through common::bin() or selftest_bin(), which
  # read DAQTUNE_TEST_BIN_DIR: a test naming cargo's own path would run the native binary here.
  if others=$(grep -rl 'CARGO_BIN_EXE_' tune/tests/it | grep -vx -e tune/tests/it/common/mod.rs -e tune/tests/it/main.rs); then
    echo "test-aarch64: FAILED: these name CARGO_BIN_EXE_ instead of common::bin(), so they would not run the aarch64 binary: $others"
    exit 1
  fi
  native_features=()
  [[ -z ${DAQTUNE_NATIVE_FEATURES:-} ]] || native_features=(--features "$DAQTUNE_NATIVE_FEATURES")
  native_it=$(cargo test --locked --workspace --exclude daqtune-bench "${native_features[@]}" --no-run \
    --message-format=json-render-diagnostics | test_binaries | awk -v d="$PWD/tune" '$1 == "it" && $2 == d {print $3}')
  [[ -x $native_it ]] || { echo "test-aarch64: FAILED: no native test binary of tune (cargo test --no-run)"; exit 1; }
  n=$((n + 1))
  echo "test-aarch64: daqtune (it, native harness, the aarch64 binaries) ${cli_filters[*]}: started"
  (cd tune && DAQTUNE_TEST_BIN_DIR=$a64_bin_dir "$native_it" --test-threads=2 "${cli_filters[@]}" </dev/null) \
    >"$logs/$n.log" 2>&1 &
  job_what[$!]="daqtune (it, native harness) ${cli_filters[*]}"
  job_log[$!]="$logs/$n.log"
  running=$((running + 1))
fi
while read -r kind pkgdir exe; do
  [[ $kind != bin ]] || continue # the programs the native harness spawns (above)
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
