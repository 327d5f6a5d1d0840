#!/usr/bin/env bash
# Run every daqtune test, the end-to-end ones included.
#
# On a fresh Debian/Ubuntu machine run as root: it installs what the tests need through apt
# (DPDK, rdma-core, iperf3, pciutils, systemd's analyzer, qemu for the soft-RoCE VM, dpkg-dev and
# lintian for the .deb, mmdebstrap and qemu-utils for the lifecycle VM), builds the optional
# engines once with their cargo features, and runs the whole suite, then builds and inspects the
# Debian packages, runs the aarch64 tests under qemu-user (scripts/test-aarch64.sh;
# DAQTUNE_AARCH64=0 leaves them out), and boots two Debian guests through a host's whole life,
# driven by the Ansible role as a fleet (tests/vm/fleet-ansible.sh; DAQTUNE_LIFECYCLE=0 leaves
# that out).
# As a normal user it installs nothing and the tests that need root or a package say why they
# skip; as root every such skip is a failure (DAQTUNE_REQUIRE_ROOT=1).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential pkg-config libclang-dev clang
  shellcheck        # every shell script of the repository (.shellcheckrc), before the build
  pciutils          # pcie tests compare our config-space decoder with lspci -F
  iperf3            # socket self-test reference
  systemd           # systemd-analyze verify on generated units
  dbus-daemon       # the D-Bus client (unit states without systemctl) is tested against it
  # DPDK engine (feature daqtune-dpdk/dpdk): headers, and dpdk-testpmd for the bench script
  libdpdk-dev dpdk-dev
  # RDMA engine (feature daqtune-rdma/rdma) and its soft-RoCE VM test (tests/vm/rxe-vm.sh)
  libibverbs-dev librdmacm-dev rdma-core ibverbs-providers perftest iproute2
  qemu-system-x86 busybox-static
  # Fleet tests (tune/tests/fleet*.rs): promtool validates the node_exporter textfile; the
  # Ansible role, ansible-lint and the Kubernetes manifest validation run from PyPI in a
  # virtualenv the test makes (Debian ships ensurepip in python3-venv)
  prometheus python3-venv
  # Debian packages (scripts/build-deb.sh, tests/packaging/test-deb.sh)
  dpkg-dev lintian
  # the lifecycle VM (tests/vm/host-lifecycle.sh, DAQTUNE_LIFECYCLE=1): guest image from Debian
  mmdebstrap fdisk e2fsprogs qemu-utils
  # the lifecycle and fleet guests (tests/vm/fleet-ansible.sh): ssh and ssh-keygen to reach them
  openssh-client
  # arm64 (IGX Orin, DGX Spark; issue 25): the cross linker, the arm64 C library (Debian
  # multiarch) and qemu-user to run the aarch64 tests (qemu-user-static registers the binfmt
  # handler that lets the CLI tests spawn the aarch64 daqtune). The Rust target comes from
  # rustup (below). The arm64 packages (DAQTUNE_AARCH64_DEB=1) also want the engines' :arm64
  # headers: libibverbs-dev:arm64 is added below when asked for; libdpdk-dev:arm64 is never
  # installed here, because it cannot sit beside the amd64 libdpdk-dev the native DPDK tests
  # need (its libfdt-dev and its mlx5 drivers' rdma-core are not Multi-Arch: same, so apt
  # removes the amd64 ones or refuses the whole list): on such a machine build-deb.sh builds
  # the arm64 daqtune-dpdk only where libdpdk-dev:arm64 is installed (docs/apply.md).
  # Left out with DAQTUNE_AARCH64=0 (below).
)
# The lifecycle VM's longer command (DAQTUNE_VM_ALL=1): the Secure Boot variant boots Debian's
# OVMF with Microsoft's keys; the spark variant boots a Debian 13 arm64 guest under
# qemu-system-aarch64 with Debian's AAVMF, built by mmdebstrap through qemu-user-static's
# binfmt handler (arch-test checks it), and installs the arm64 .deb, cross-built (docs/apply.md
# says why neither is in every run).
vm_all=${DAQTUNE_VM_ALL:-0}
aarch64_tests=${DAQTUNE_AARCH64:-1}
# The cross toolchain serves the aarch64 tests and the spark variant's arm64 .deb.
cross=0
[[ $aarch64_tests == 1 || $vm_all == 1 ]] && cross=1
if [[ $vm_all == 1 ]]; then
  PACKAGES+=(ovmf qemu-system-arm qemu-efi-aarch64 arch-test)
fi
if ((cross)); then
  # libc6-dev-arm64-cross is the cross compiler's own C headers and start files: only a
  # Recommends of gcc-12-aarch64-linux-gnu, which --no-install-recommends (below) leaves out.
  # Without it the link of every test binary fails, and before that the C code some crates
  # build (zstd-sys) stops at `bits/libc-header-start.h: No such file or directory` (seen on a
  # fresh Debian 12 machine, 2026-11-27).
  PACKAGES+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user qemu-user-static libc6:arm64)
  if [[ ${DAQTUNE_AARCH64_DEB:-0} == 1 ]]; then
    PACKAGES+=(libibverbs-dev:arm64)
  fi
fi
AARCH64=aarch64-unknown-linux-gnu

log() { printf '\n== [%5d s] %s\n' "$SECONDS" "$*"; } # seconds since the start: where the time goes

# Every build of this command starts from nothing on CI (and on a fresh clone): incremental
# compilation only adds its bookkeeping there (the dep graph and query caches written for a
# next build that never comes). CARGO_INCREMENTAL=1 keeps it for repeated local runs.
# Measured on a cold `cargo test --workspace --no-run` with both engines: 215 s wall and
# 413 CPU-seconds without it, 239 s and 459 with it (2026-11-27). The linker is already
# rustc's own lld on x86_64 (Rust 1.90 and later): nothing to gain there.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}

if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if [[ " ${missing[*]} " == *":arm64 "* ]] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
      log "dpkg --add-architecture arm64 (the :arm64 -dev packages of the cross build)"
      dpkg --add-architecture arm64
    fi
    apt-get update -qq
    extra=()
    # A qemu-utils installed from elsewhere (this project's build machines carry a backport,
    # 10.x) Breaks the distribution's qemu-system-common (7.2 on Debian 12), and apt then
    # refuses the whole list. qemu-img is all we use of it: take the distribution's version,
    # which matches the qemu-system-x86 installed beside it.
    if [[ " ${missing[*]} " == *" qemu-system-x86 "* ]] &&
      dpkg-query -W -f='${Status}' qemu-utils 2>/dev/null | grep -q "install ok installed"; then
      have=$(dpkg-query -W -f='${Version}' qemu-utils)
      distro=$(apt-cache madison qemu-system-x86 | awk -F'|' 'NR==1 {gsub(/ /, "", $2); print $2}')
      if [[ -n $distro && $have != "$distro" ]]; then
        echo "qemu-utils $have replaced by the distribution's $distro (matches qemu-system-x86)"
        extra=(--allow-downgrades "qemu-utils=$distro")
      fi
    fi
    apt-get install -y -qq --no-install-recommends "${extra[@]}" "${missing[@]}" >/dev/null
  fi
fi

# As root with every package above installed, nothing may pass by skipping: a test that finds
# itself without root, a tool or a kernel feature fails under DAQTUNE_REQUIRE_ROOT=1
# (daqtune_testkit::skip). Hardware CI never has (a GPU, an RDMA device) still skips with its
# reason (docs/validation.md, "Skips").
if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
  export DAQTUNE_REQUIRE_ROOT=${DAQTUNE_REQUIRE_ROOT:-1}
fi

if ((cross)) && command -v rustup >/dev/null 2>&1 &&
  ! rustup target list --installed | grep -qx "$AARCH64"; then
  log "rustup target add $AARCH64"
  rustup target add "$AARCH64" || true
fi

FEATURES=()
# The DPDK engine links the system libdpdk (Debian 12: 22.11, Ubuntu 24.04: 23.11).
if pkg-config --exists libdpdk 2>/dev/null; then
  FEATURES+=(daqtune-dpdk/dpdk)
fi
# The RDMA engine links libibverbs: build and test it where the headers are installed.
if pkg-config --exists libibverbs 2>/dev/null || [[ -e /usr/include/infiniband/verbs.h ]]; then
  FEATURES+=(daqtune-rdma/rdma)
fi
features_csv=$(IFS=,; echo "${FEATURES[*]}")
features_arg=()
[[ -z $features_csv ]] || features_arg=(--features "$features_csv")

# The shell scripts first: a finding ends the run before the long build. .shellcheckrc holds
# the project-wide settings; -x follows the libraries the scripts source.
shell_scripts=(.ci/run)
while IFS= read -r f; do shell_scripts+=("$f"); done < <(find scripts tests bench packaging deploy -type f -name '*.sh' | LC_ALL=C sort)
if command -v shellcheck >/dev/null 2>&1; then
  log "shellcheck (${#shell_scripts[@]} scripts)"
  shellcheck -x "${shell_scripts[@]}"
elif [[ $(id -u) == 0 || ${DAQTUNE_REQUIRE_ROOT:-0} == 1 ]]; then
  echo "shellcheck not found after the install above (apt-get install shellcheck)" >&2
  exit 1
else
  log "shellcheck: skipped, not installed (apt-get install shellcheck)"
fi

log "cargo fmt --check"
cargo fmt --all -- --check
# The lifecycle guest's BIOS image (tests/vm/lifecycle-image.sh, cached by content) is built
# in the background from here on, beside clippy and the builds: on a fresh machine (CI's case)
# it is on the VM phase's path. Started after `cargo test --no-run` instead (447 s into the
# command), it was ready 296 s after the fleet's package and the fleet waited for it (2026-11-29,
# docs/performance.md "The README test command's wall time"). The VM test (below) waits on the
# builder's lock until it is ready. Its output goes to target/lifecycle-image-prebuild.log; a
# failed build is built (and reported) again by the VM test itself.
wait_job() { # PID: a background job's exit code in $rc, the seconds waited for it in $waited
  local t=$SECONDS
  rc=0
  wait "$1" || rc=$?
  waited=$((SECONDS - t))
}
vm_verdict() { # NAME RC: 125 is a skip, any other failure ends the run
  if (($2 == 125)); then
    echo "$1: skipped (the VM could not be prepared; reason above)"
  elif (($2 != 0)); then
    exit "$2"
  fi
}
image_job=""
fleet_job=""
# The tests' temporary directories (tempfile, std::env::temp_dir) on a tmpfs where the machine
# has one with room: the tests copy fixture roots, apply and revert on them and read them back,
# hundreds of thousands of small files, and on an ext4 mounted with `discard` (this project's
# build machines) every file they create and delete costs system time. Measured 2026-11-29,
# quiet, the same test binaries: the engine's integration tests 56 s on /dev/shm against about
# 300 s on the disk (342 s of system time), the binary's 149 s against 179 s; the whole
# workspace's tests 460 s, at most 88 MB in the directory at once; the 1,104 tests pass on both.
# Not the VM phase's files: they stay under target/.
test_tmp=""
if [[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]] &&
  (($(df -Pk /dev/shm | awk 'NR == 2 {print $4}') >= 2 * 1024 * 1024)); then
  test_tmp=$(mktemp -d /dev/shm/daqtune-tests.XXXXXX)
  # As /tmp is: the tests that run daqtune as another user (nobody) read roots made in here.
  chmod 1777 "$test_tmp"
fi
with_test_tmp() { # COMMAND...: run with TMPDIR in $test_tmp when there is one
  if [[ -n $test_tmp ]]; then TMPDIR=$test_tmp "$@"; else "$@"; fi
}
# Never left running behind a failed step: the image build writes only to its cache and is
# waited for (a CI runner waits for every process of the job); the VM test is stopped, its
# children first (a playbook or a guest: the script's own exit trap runs only once the
# foreground child is gone, and it stops the guests).
stop_jobs() {
  if [[ -n $fleet_job ]]; then
    pkill -TERM -P "$fleet_job" 2>/dev/null || true
    kill "$fleet_job" 2>/dev/null || true
    wait "$fleet_job" 2>/dev/null || true
  fi
  [[ -z $image_job ]] || wait "$image_job" 2>/dev/null || true
  [[ -z $test_tmp ]] || rm -rf "$test_tmp"
}
trap stop_jobs EXIT
if [[ ${DAQTUNE_LIFECYCLE:-1} == 1 && $(id -u) == 0 ]]; then
  mkdir -p target
  log "lifecycle guest image: building in the background (target/lifecycle-image-prebuild.log)"
  tests/vm/lifecycle-image.sh </dev/null >target/lifecycle-image-prebuild.log 2>&1 &
  image_job=$!
fi

log "cargo clippy -D warnings"
cargo clippy --workspace --all-targets "${features_arg[@]}" -- -D warnings
# The .deb: built and inspected (files, no maintainer scripts, Depends, install/purge round
# trip, lintian; test-deb.sh below), and installed by the guests of the VM test. From cargo's
# dev profile here: the release build (thin LTO) cost 420-480 CPU-seconds, a quarter of the
# command's limit under load, for a binary whose code the tests run; the dev build of the
# guests' package compiles the dependencies the test build then reuses, and test-deb's build
# of the three packages compiles nothing new after the test build (0.14 s, 2026-11-30).
# The longer command (DAQTUNE_VM_ALL=1) and DAQTUNE_DEB_PROFILE=release package the release
# build as shipped (docs/apply.md, "Which build the tests package").
if [[ $vm_all == 1 ]]; then
  export DAQTUNE_DEB_PROFILE=${DAQTUNE_DEB_PROFILE:-release}
else
  export DAQTUNE_DEB_PROFILE=${DAQTUNE_DEB_PROFILE:-dev}
fi

# A host's whole life, and a fleet's, on two booted Debian guests (tests/vm/fleet-ansible.sh,
# issues 15, 25 and 27): Ansible over SSH drives the GRUB guest and the extlinux guest through
# the role in deploy/ansible (install the .deb, apply, its own reboots, the rolling gate that
# stops at a failing host, facts read back, changed=0, revert byte-identical), node_exporter
# serves daqtune's metrics, and between the role's runs the lifecycle's own steps assert each
# state in the guest (tests/vm/lifecycle-guest.sh fleet-*), netplan owning the data port last
# in the extlinux guest. It is the longest chain of the command: it starts as soon as its
# package is built, right after clippy and before the test build (which then finds most of its
# crates compiled by the package's build: the same features), in the background, beside the
# test build, the workspace tests, the .deb's checks and the aarch64 tests (it waits on the
# image builder's lock until the image is ready), at nice -5 so that its guests' steps, which
# the rest waits for at the end, are not the ones that yield the CPU. Measured from fresh
# worktrees (docs/performance.md, "One feature resolution, the engine's tests native only, the
# fleet first"): after the test build and at the foreground's priority (e6d1175) the command
# ended at 3,018 s, the fleet's 2,457 s the last 794 s of it alone; started at 383 s at nice -5
# (677e445) it ended at 2,724 s, the fleet at 2,543 s and the aarch64 build last. Earlier tries
# of both (2026-11-29, the fleet from right after `cargo fmt`, or at nice -5 after the builds)
# ended no sooner: the aarch64 part, then twice as long, was the longest chain instead. Its
# output goes to target/fleet-ansible.log and is shown when it ends. DAQTUNE_VM_ALL=1 adds
# tests/vm/host-lifecycle.sh --variant all at the end: the same life through the CLI for GRUB
# and extlinux, the x86 UEFI Secure Boot variant and the arm64 Spark shape (docs/apply.md,
# "Which variants run where"). The guest images are cached in $DAQTUNE_VM_CACHE (default
# target/vm-cache) under the hash of their inputs; docs/apply.md and docs/fleet.md have the
# durations. Exit 125 means the VM could not be prepared (no qemu, no Debian mirror, no PyPI for
# ansible-core): reported as a skip, any other failure fails the run. DAQTUNE_LIFECYCLE=0 leaves
# them out (a quick local run); CI runs them.
if [[ ${DAQTUNE_LIFECYCLE:-1} == 1 ]]; then
  log "the package for the guests (scripts/build-deb.sh, profile $DAQTUNE_DEB_PROFILE)"
  mapfile -t fleet_deb < <(scripts/build-deb.sh --with none --out target/debian)
  [[ -f ${fleet_deb[0]:-} ]] || { echo "FAILED: scripts/build-deb.sh made no package for the guests"; exit 1; }
  log "host lifecycle and fleet on two booted Debian guests (tests/vm/fleet-ansible.sh), in the background (target/fleet-ansible.log)"
  fleet_nice=()
  [[ $(id -u) != 0 ]] || fleet_nice=(nice -n -5)
  "${fleet_nice[@]}" tests/vm/fleet-ansible.sh --deb "${fleet_deb[0]}" </dev/null >target/fleet-ansible.log 2>&1 &
  fleet_job=$!
else
  log "host lifecycle and fleet VM tests left out (DAQTUNE_LIFECYCLE=0)"
fi

# The benchmarks' crate (bench/, criterion and its dependencies) is linted above and left out
# of the test build: it has no tests, and criterion's crates were a test build's dependencies
# that no test used. After the package above, whose build compiled most of what this one needs
# (the same features: Cargo.toml's cc, probe/Cargo.toml's getrandom and rustix say why).
log "cargo test --no-run (workspace${FEATURES:+, features ${FEATURES[*]}})"
cargo test --workspace --exclude daqtune-bench "${features_arg[@]}" --no-run

log "cargo test (workspace${FEATURES:+, features ${FEATURES[*]}})${test_tmp:+, temporary directories in $test_tmp}"
with_test_tmp cargo test --workspace --exclude daqtune-bench "${features_arg[@]}" -- --test-threads=2

log "VM harness: every skip carries its reason (tests/vm/harness-skips.sh)"
tests/vm/harness-skips.sh

log "debian packages (tests/packaging/test-deb.sh, profile $DAQTUNE_DEB_PROFILE)"
tests/packaging/test-deb.sh

# aarch64 (issue 25): the pure crates' tests plus the binary's CLI tests, built for
# aarch64-unknown-linux-gnu and run under qemu-user (scripts/test-aarch64.sh says what is left
# out and why), and with DAQTUNE_AARCH64_DEB=1 also the arm64 packages (a release cross build
# of three binaries: docs/apply.md "Install"). Exit 125 = the cross toolchain is not there
# (reported as a skip). Beside the native tests and the .deb (2026-11-27, from a fresh clone)
# the whole command took 40 min 30 s against 38 min 52 s in sequence: each of them keeps the
# two cores busy. Beside the CLI lifecycle VM (two guests at once, 2026-11-26) it saved nothing
# either; the fleet run above is another shape (one guest working at a time for most of it).
# DAQTUNE_AARCH64=0 leaves it out (a quick local run).
if [[ $aarch64_tests == 1 ]]; then
  log "aarch64: tests under qemu-user (scripts/test-aarch64.sh)"
  rc=0
  args=()
  [[ ${DAQTUNE_AARCH64_DEB:-0} == 1 ]] || args=(--no-deb)
  # The binary's CLI tests there run from this command's native test build (its features).
  DAQTUNE_NATIVE_FEATURES=$features_csv with_test_tmp scripts/test-aarch64.sh "${args[@]}" || rc=$?
  if ((rc == 125)); then
    echo "aarch64: skipped (the cross toolchain is not installed; reason above)"
  elif ((rc != 0)); then
    exit "$rc"
  fi
else
  log "aarch64 build and tests left out (DAQTUNE_AARCH64=0)"
fi

if [[ -n $image_job ]]; then
  wait_job "$image_job"
  image_job=""
  echo "lifecycle guest image (background build): exit $rc; $(grep -E 'ready|FAILED|SKIP' target/lifecycle-image-prebuild.log | tail -n 1)"
fi
if [[ -n $fleet_job ]]; then
  wait_job "$fleet_job"
  fleet_job=""
  log "host lifecycle and fleet (tests/vm/fleet-ansible.sh): exit $rc, waited $waited s for it; its output:"
  cat target/fleet-ansible.log
  vm_verdict "fleet and host lifecycle" "$rc"
  # Prepared without the fleet's own needs (ssh, PyPI for ansible-core), the host's life is
  # still proven through the CLI (the longer command runs that anyway, below).
  if ((rc == 125)) && [[ $vm_all != 1 ]]; then
    log "host lifecycle through the CLI instead (tests/vm/host-lifecycle.sh --variant ci)"
    rc=0
    tests/vm/host-lifecycle.sh --variant ci || rc=$?
    vm_verdict "host lifecycle" "$rc"
  fi
fi
if [[ ${DAQTUNE_LIFECYCLE:-1} == 1 && $vm_all == 1 ]]; then
  log "host lifecycle through the CLI: GRUB, extlinux, Secure Boot, Spark (tests/vm/host-lifecycle.sh --variant all)"
  rc=0
  tests/vm/host-lifecycle.sh --variant all || rc=$?
  vm_verdict "host lifecycle" "$rc"
fi

log "all tests passed"
