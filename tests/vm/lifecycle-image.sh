#!/usr/bin/env bash
# Build (or find in the cache) the Debian 12 guest disks of tests/vm/host-lifecycle.sh:
#
#   tests/vm/lifecycle-image.sh [--rebuild] [--nm]     prints the image directory on stdout
#
# The directory holds
#   grub.raw        MBR disk, one ext4 root partition, GRUB (grub-pc) installed on the disk by
#                   the guest's own grub-install and configured by the guest's own update-grub;
#   extlinux.qcow2  overlay of grub.raw in which the guest purged GRUB, ran `extlinux --install`
#                   and wrote syslinux's MBR: the disk boots through /boot/extlinux/extlinux.conf
#                   (IGX and Jetson boot that way);
#   info            key=value facts (kernel, root UUID, interface names) for the harness.
#
# --nm builds the NetworkManager flavour for host-lifecycle.sh's nm variant instead (its own
# cache entry, lifecycle-image-nm-*): grub.raw alone, with Debian's network-manager managing the
# Ethernet ports as Debian installs it (and as DGX Spark's Ubuntu does), no netplan, no
# extlinux and none of the fleet's packages.
#
# Everything comes from Debian's packages (mmdebstrap from the Debian mirror); nothing is mounted
# on the host (no loop device, no nbd: mkfs.ext4 -d writes the file system straight into the
# partition's offset of a raw file), and the two bootloader installs run inside the guest under
# qemu. The result is cached in $DAQTUNE_VM_CACHE (default target/vm-cache) under a name made of
# the hash of this script, tests/vm/image-lib.sh (the steps the three image builders share),
# the package list, the suite and the mirror: any change rebuilds it. Downloaded .debs are
# kept in $DAQTUNE_VM_CACHE/lifecycle-debs-bookworm-amd64 for the next rebuild.
#
# Exit codes: 0 (path printed), 125 = cannot be prepared (tool or package missing, mirror
# unreachable; the reason on a line "lifecycle-image: SKIP: ..."), 1 = a build step failed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
rebuild=0
nm=0
for a in "$@"; do
  case $a in
    --rebuild) rebuild=1 ;;
    --nm) nm=1 ;;
    *) echo "lifecycle-image: unknown argument $a (--rebuild, --nm)" >&2; exit 2 ;;
  esac
done
IL_NAME=lifecycle-image
((nm == 0)) || IL_NAME=lifecycle-image-nm
# shellcheck source=tests/vm/image-lib.sh
. "$here/image-lib.sh"
suite=bookworm
mirror=${DAQTUNE_VM_MIRROR:-http://deb.debian.org/debian}

# The guest: what a minimal Debian 12 server installs, plus the two boot loaders under test,
# jq for the harness's assertions, dbus (systemd talks to it on a real host) and netplan.io
# (the netplan variant writes its configuration; with no /etc/netplan/*.yaml, as in the grub
# and extlinux variants, netplan's generator renders nothing and networkd's own files rule).
# openssh-server, python3-apt and prometheus-node-exporter are the fleet variant's
# (tests/vm/fleet-ansible.sh: Ansible over SSH, node_exporter's textfile collector); they are
# disabled in the image (image-lib.sh's customisation) and started only by the fleet boots.
PACKAGES=(
  linux-image-amd64 initramfs-tools systemd systemd-sysv udev dbus kmod iproute2
  grub-pc extlinux syslinux-common
  apt ca-certificates jq netplan.io
  openssh-server python3-apt prometheus-node-exporter
)
network=networkd
if ((nm)); then
  # NetworkManager owns the data port: Debian's package with its defaults (an automatic DHCP
  # connection on every Ethernet port), as the spark variant's arm64 image has it.
  PACKAGES=(
    linux-image-amd64 initramfs-tools systemd systemd-sysv udev dbus kmod iproute2
    grub-pc apt ca-certificates jq network-manager
  )
  network=networkmanager
fi
# The root's modules for the guest's initramfs (image-lib.sh, il_initramfs_list): NVMe, as
# every x86 boot of the harness gives the disk.
IL_INITRD_MODULES="nvme ext4 crc32c_generic crc32c_intel"
DISK_SIZE=3G
PART_START=2048 # sectors: 1 MiB, room for GRUB's core.img after the MBR

il_require qemu-system-x86_64:qemu-system-x86
il_cache_or_lock "$suite" amd64 "$mirror" "${PACKAGES[@]}"
# The guests' kernel line after the console: tests/vm/lib.sh's VM_TCG_KERNEL_WORDS (why there;
# the image's cache key hashes its value, image-lib.sh). On every boot of the image: the
# provisioning boots below, GRUB_CMDLINE_LINUX and the extlinux APPEND.
kernel_words=$VM_TCG_KERNEL_WORDS
il_customize ttyS0 "$network" "$kernel_words"
il_mmdebstrap "$suite" amd64 "$mirror" "${PACKAGES[@]}"
il_kernel

# --- the disk: MBR, one bootable ext4 partition, written without mounting -----------------
t=$SECONDS
truncate -s "$DISK_SIZE" "$work/grub.raw"
printf 'label: dos\nstart=%s, type=83, bootable\n' "$PART_START" \
  | sfdisk --quiet --no-reread --no-tell-kernel "$work/grub.raw" >/dev/null
il_mkfs_root "$work/grub.raw" "$PART_START" $(($(stat -c %s "$work/grub.raw") / 512 - PART_START))
log "disk image written in $((SECONDS - t)) s"

# The provisioning boots: q35 under TCG (tests/vm/lib.sh), the disk on NVMe.

# --- first boot: the guest installs GRUB on its disk and runs its own update-grub ---------
cat >"$work/provision-grub.sh" <<'EOF'
set -eux
disk=$(lsblk -ndo PKNAME "$(findmnt -no SOURCE /)" 2>/dev/null || true)
[ -n "$disk" ] || disk=nvme0n1
ls -l /boot
grub-install --target=i386-pc "/dev/$disk"
update-grub
grep -c '^menuentry' /boot/grub/grub.cfg
cat /etc/machine-id
EOF
t=$SECONDS
log "first boot (kernel $kver, direct): grub-install + update-grub inside the guest"
il_provision "$work/boot-grub.log" "$work/provision-grub.sh" "${VM_QEMU_PROVISION_X86[@]}" \
  -kernel "$work/vmlinuz-$kver" -initrd "$work/initrd.img-$kver" \
  -append "root=UUID=$uuid ro console=ttyS0,115200 $kernel_words quiet" \
  -drive "file=$work/grub.raw,if=none,id=d0,format=raw" -device nvme,drive=d0,serial=daqtune0
log "GRUB installed by the guest in $((SECONDS - t)) s"

if ((nm)); then
  il_finish "$suite" "${PACKAGES[@]}"
  exit 0
fi

# --- the extlinux variant: boots through GRUB once, replaces it with extlinux -------------
cat >"$work/provision-extlinux.sh" <<EOF
set -eux
disk=\$(lsblk -ndo PKNAME "\$(findmnt -no SOURCE /)" 2>/dev/null || true)
[ -n "\$disk" ] || disk=nvme0n1
# A host that boots through extlinux (IGX, Jetson) has no GRUB at all.
DEBIAN_FRONTEND=noninteractive dpkg --purge grub-pc grub-pc-bin grub2-common grub-common
rm -rf /boot/grub
mkdir -p /boot/extlinux
extlinux --install /boot/extlinux
cat >/boot/extlinux/extlinux.conf <<'CONF'
TIMEOUT 1
PROMPT 0
SERIAL 0 115200
DEFAULT primary

LABEL primary
      MENU LABEL primary kernel
      LINUX /boot/vmlinuz-$kver
      INITRD /boot/initrd.img-$kver
      APPEND root=UUID=$uuid ro console=ttyS0,115200 $kernel_words quiet
CONF
dd if=/usr/lib/EXTLINUX/mbr.bin of=/dev/\$disk bs=440 count=1 conv=notrunc
sync
EOF
t=$SECONDS
qemu-img create -q -f qcow2 -b grub.raw -F raw "$work/extlinux.qcow2" >/dev/null
log "second boot (through GRUB): purge GRUB, extlinux --install, syslinux MBR"
il_provision "$work/boot-extlinux.log" "$work/provision-extlinux.sh" "${VM_QEMU_PROVISION_X86[@]}" \
  -drive "file=$work/extlinux.qcow2,if=none,id=d0,format=qcow2" -device nvme,drive=d0,serial=daqtune0,bootindex=1
log "extlinux installed by the guest in $((SECONDS - t)) s"

il_finish "$suite" "${PACKAGES[@]}"
