# shellcheck shell=bash
# What the VM harness's host-side scripts share (issue 44): the lines they print (say, log,
# skip, die, and pass/fail for a run with its own ledger) and the qemu command lines their
# guests boot with, written here once (the image builders' provisioning boots are in
# image-lib.sh). Sourced, never run, by tests/vm/host-lifecycle.sh, fleet-ansible.sh,
# rxe-vm.sh, image-lib.sh (the guest-image builders) and scripts/test-aarch64.sh. The sourcing
# script sets VM_NAME first (the prefix of its SKIP, log and FAILED lines; VM_TAG, when set,
# names say's "[TAG SECS]" lines instead).
#
# The guest scripts (lifecycle-guest.sh, rdma-guest.sh) run inside the guests and keep their
# own: their ledger is the results file on the 9p share, which the host reads.

T0=$SECONDS # say's clock, and the scripts' "total" line
say() { printf '[%s %4ds] %s\n' "${VM_TAG:-$VM_NAME}" "$((SECONDS - T0))" "$*"; }
log() { printf '%s: %s\n' "$VM_NAME" "$*" >&2; }
# Exit 125 is the harness's skip: scripts/test-all.sh and host-lifecycle.sh read the line
# (tests/vm/harness-skips.sh checks that the reason comes through).
skip() { printf '%s: SKIP: %s\n' "$VM_NAME" "$*"; exit 125; }
die() { printf '%s: FAILED: %s\n' "$VM_NAME" "$*" >&2; exit 1; }

vm_require() { # TOOL:PACKAGE...: skip, naming the first missing tool and its package
  local tool
  for tool in "$@"; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || skip "${tool%%:*} not found (apt-get install ${tool#*:})"
  done
}

vm_newest() { # PATH...: the last existing one in version order (an unmatched glob is left out)
  local p
  for p in "$@"; do
    if [[ -e $p ]]; then printf '%s\n' "$p"; fi
  done | sort -V | tail -n1
}

# The ledger of a script that checks things itself: each line goes to VM_RESULTS (set by the
# script) and to the terminal; nfail counts the failures.
nfail=0
pass() { echo "PASS $*" >>"$VM_RESULTS"; say "PASS $*"; }
fail() { echo "FAIL $*" >>"$VM_RESULTS"; say "FAIL $*"; nfail=$((nfail + 1)); }

# --- qemu -------------------------------------------------------------------------------------
# The guests the tests boot. The guest-image builders' provisioning boots are in image-lib.sh
# (VM_QEMU_PROVISION_*): they shape the cached images, so they sit in the file the cache key
# hashes. Of this file the key hashes only the values an image takes (VM_X86_CPU and
# VM_TCG_KERNEL_WORDS: image-lib.sh's il_key_values); another change here rebuilds nothing.

# vm_qemu_lifecycle_x86 MACHINE DISK IO-DIR MAC [FIRMWARE-ARG...]: sets vm_qemu to the lifecycle guest
# (host-lifecycle.sh's x86 variants, fleet-ansible.sh's guests): two NUMA nodes, the data NIC
# (e1000e, MAC) behind a root port of node 1's expander bridge, the qcow2 DISK on NVMe, IO-DIR
# as the 9p share `io`, FIRMWARE-ARGs (the pflash drives) first. The caller adds the console,
# -no-reboot, more NICs.
# One TCG thread for the four vCPUs (thread=single): as fast as a thread per vCPU for this guest
# (a boot of host-lifecycle's steps 1-2: 134 s against 138-157 s), and one core per guest, so
# two guests run side by side without their vCPUs fighting over the same two cores.
# VM_X86_CPU, the x86 guests' CPU: QEMU's `max` without ERMS and FSRM. With them the guest
# kernel clears and copies pages with `rep stosb`/`rep movsb`, which TCG runs one byte per
# step; without them it uses `rep stosq` and 8-byte moves. Measured 2026-11-29 on the lifecycle
# guest (this file's shape, the machine otherwise idle): after a reboot inside the same qemu,
# the kernel spent 200 s of CPU in `clear_page_erms` zeroing the 2M pool of the kernel line
# (`hugepages=64`, soft-lockup traces of hugetlb_init), and a second boot with no pool at all
# reached its agent at 206 s against 122 s without ERMS (udev workers in soft lockup); a busybox
# guest copied 512 MiB from /dev/zero in 2.24 s against 0.3 s. No test looks at these two flags.
VM_X86_CPU=max,-erms,-fsrm
# VM_TCG_KERNEL_WORDS, on the kernel line of every guest the README command boots under TCG (the
# rxe guest here; the lifecycle image's GRUB and extlinux lines and its provisioning boots,
# tests/vm/lifecycle-image.sh):
# `norandmaps`, no address-space randomisation. QEMU 7.2's TCG finds a translated block by its
# virtual address: with ASLR every process maps ld.so, libc and its PIE binary at new addresses,
# and everything it runs is translated again. Measured 2026-11-29 in a fleet guest (this file's
# shape, the machine otherwise idle), randomize_va_space 2 against 0: 200 runs of /bin/true
# 11.3 s against 3.5 s, update-grub 26-28 s against 7.4 s, a shell loop of 100 pipelines 23.4 s
# against 7.7 s, `python3 -c pass` 0.45-0.55 s against 0.18 s; a reboot of the extlinux guest
# to SSH 72 s and 64 CPU-seconds against 50-55 s and 42-50. No test looks at the layout of a
# process; the tests compare a guest's kernel line with its own earlier line, never with a
# fixed text.
# shellcheck disable=SC2034 # used by the scripts that source this file
VM_TCG_KERNEL_WORDS=norandmaps
# shellcheck disable=SC2034 # vm_qemu is the caller's
vm_qemu_lifecycle_x86() {
  vm_qemu=(qemu-system-x86_64 "${@:5}"
    -machine "$1" -accel tcg,thread=single -cpu "$VM_X86_CPU" -nodefaults -display none -monitor none
    -smp 4,sockets=2,cores=2,threads=1 -m 6G
    -object memory-backend-ram,id=mem0,size=2G -object memory-backend-ram,id=mem1,size=4G
    -numa node,nodeid=0,cpus=0-1,memdev=mem0 -numa node,nodeid=1,cpus=2-3,memdev=mem1
    -device pxb-pcie,id=pxb1,bus_nr=128,numa_node=1,bus=pcie.0
    -device pcie-root-port,id=rp1,bus=pxb1,chassis=1,slot=1
    -netdev user,id=net1,restrict=on
    -device "e1000e,netdev=net1,bus=rp1,mac=$4"
    -device pcie-root-port,id=rp0,bus=pcie.0,chassis=2,slot=2
    -drive "file=$2,if=none,id=disk0,format=qcow2"
    -device nvme,drive=disk0,serial=daqtune0,bus=rp0,bootindex=1
    -fsdev "local,id=fs0,path=$3,security_model=none"
    -device virtio-9p-pci,fsdev=fs0,mount_tag=io,bus=pcie.0)
}

# vm_qemu_spark CPU CODE VARS DISK IO-DIR: sets vm_qemu to host-lifecycle.sh's spark guest
# (arm64 virt under TCG with AAVMF, the data NIC behind a root port, virtio disk, 9p `io`).
# shellcheck disable=SC2034 # vm_qemu is the caller's
vm_qemu_spark() {
  vm_qemu=(qemu-system-aarch64
    -machine virt,accel=tcg -cpu "$1" -nodefaults -display none -no-reboot -monitor none
    -smp 4 -m 4G
    -drive "if=pflash,format=raw,unit=0,readonly=on,file=$2"
    -drive "if=pflash,format=raw,unit=1,file=$3"
    -device pcie-root-port,id=rp1,bus=pcie.0,chassis=1,slot=1,addr=0x2
    -netdev user,id=net1,restrict=on
    -device e1000e,netdev=net1,bus=rp1,mac=52:54:00:da:00:02
    -drive "file=$4,if=none,id=disk0,format=qcow2"
    -device virtio-blk-pci,drive=disk0,bootindex=1,bus=pcie.0,addr=0x3
    -fsdev "local,id=fs0,path=$5,security_model=none"
    -device virtio-9p-pci,fsdev=fs0,mount_tag=io,bus=pcie.0,addr=0x4)
}

# vm_qemu_rxe SMP MEM KERNEL INITRD OUT-DIR: sets vm_qemu to rxe-vm.sh's guest: the host's
# kernel and an initramfs, the host's root read-only over 9p (`hostroot`), OUT-DIR writable
# (`out`), the console on stdio. One TCG thread for the vCPUs: the whole test took 139
# CPU-seconds (144 s) that way against 165 (133 s) with a thread per vCPU (2026-11-27,
# quiet); what counts on a CI runner whose cores are busy is the CPU it takes.
# shellcheck disable=SC2034 # vm_qemu is the caller's
vm_qemu_rxe() {
  vm_qemu=(qemu-system-x86_64
    -machine q35 -accel tcg,thread=single -cpu "$VM_X86_CPU" -smp "$1" -m "$2"
    -nographic -no-reboot -monitor none -serial stdio
    -kernel "$3" -initrd "$4"
    -append "console=ttyS0 quiet loglevel=3 panic=-1 oops=panic $VM_TCG_KERNEL_WORDS"
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
    -virtfs "local,path=$5,mount_tag=out,security_model=none")
}
