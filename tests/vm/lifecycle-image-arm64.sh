#!/usr/bin/env bash
# Build (or find in the cache) the Debian 13 arm64 guest disk of tests/vm/host-lifecycle.sh
# (--variant spark, issue 25 item 3: the DGX Spark shape):
#
#   tests/vm/lifecycle-image-arm64.sh [--rebuild]     prints the image directory on stdout
#
# The directory holds
#   arm64.raw  GPT disk: an EFI system partition (FAT32, made by the guest's own mkfs.vfat) and
#              an ext4 root with Debian 13 (trixie) arm64: linux-image-arm64, grub-efi-arm64
#              installed by the guest's own grub-install (EFI/debian/grubaa64.efi and the
#              removable path EFI/BOOT/BOOTAA64.EFI) and configured by its own update-grub;
#              NetworkManager (Debian's defaults) manages the Ethernet ports;
#   info       key=value facts (kernel, root UUID) for the harness.
# The harness boots it with `qemu-system-aarch64 -M virt` under TCG and Debian's
# qemu-efi-aarch64 firmware (AAVMF_CODE.fd + a copy of AAVMF_VARS.fd).
#
# The root file system is made on this x86 machine by mmdebstrap --architectures=arm64, whose
# maintainer scripts run through the kernel's binfmt_misc handler for aarch64 (qemu-user-static);
# where that handler is not registered this script registers it from qemu-user-static's own
# /usr/lib/binfmt.d/qemu-aarch64.conf, and skips with the reason when it cannot. The rest as
# tests/vm/image-lib.sh says (nothing mounted on the host, the boot loader and the ESP made
# inside the guest at a first boot of the kernel given directly to qemu).
#
# Exit codes: 0 (path printed), 125 = cannot be prepared (tool, firmware or package missing,
# no aarch64 binfmt handler, mirror unreachable; the reason on a line
# "lifecycle-image-arm64: SKIP: ..."), 1 = a step failed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
IL_NAME=lifecycle-image-arm64
# shellcheck source=tests/vm/image-lib.sh
. "$here/image-lib.sh"
suite=trixie
mirror=${DAQTUNE_VM_MIRROR:-http://deb.debian.org/debian}
rebuild=0
[[ ${1:-} == --rebuild ]] && rebuild=1

# A minimal Debian 13 arm64 UEFI server: the kernel, GRUB for arm64 EFI, dosfstools for the
# guest's own mkfs.vfat of the ESP, NetworkManager (as on DGX Spark), jq for the harness. No
# ca-certificates (the x86 images have it): nothing in the guest fetches over TLS, and its
# update-ca-certificates ran twice under qemu-user, about 3 minutes each.
PACKAGES=(
  linux-image-arm64 initramfs-tools systemd systemd-sysv udev dbus kmod iproute2
  grub-efi-arm64 dosfstools network-manager
  apt jq
)
# The root's modules for the guest's initramfs (image-lib.sh, il_initramfs_list): the disk is
# on virtio-blk-pci in the provisioning boot and in the harness's boots.
IL_INITRD_MODULES="virtio_pci virtio_blk ext4 crc32c_generic"
DISK_SIZE=3G
ESP_START=2048      # sectors
ESP_SECTORS=131072  # 64 MiB

il_require qemu-system-aarch64:qemu-system-arm arch-test:arch-test

# The aarch64 handler mmdebstrap needs to run the guest's maintainer scripts on this machine.
binfmt=/proc/sys/fs/binfmt_misc
if [[ ! -e $binfmt/qemu-aarch64 ]]; then
  [[ -e $binfmt/register ]] || mount -t binfmt_misc binfmt_misc "$binfmt" 2>/dev/null || true
  conf=/usr/lib/binfmt.d/qemu-aarch64.conf
  [[ -e $binfmt/register ]] || skip "no binfmt_misc on this machine (mount -t binfmt_misc failed): mmdebstrap cannot run arm64 maintainer scripts"
  [[ -f $conf ]] || skip "no aarch64 binfmt handler registered and no $conf (apt-get install qemu-user-static)"
  grep -v '^#' "$conf" | head -n 1 >"$binfmt/register" 2>/dev/null \
    || skip "could not register $conf with binfmt_misc (a container without the privilege?)"
  log "registered the aarch64 binfmt handler from $conf"
fi
[[ $(head -n 1 "$binfmt/qemu-aarch64" 2>/dev/null) == enabled ]] \
  || skip "the aarch64 binfmt handler is disabled ($binfmt/qemu-aarch64)"

il_cache_or_lock "$suite" arm64 "$mirror" "${PACKAGES[@]}"
il_customize ttyAMA0 networkmanager
# shellcheck disable=SC2016 # mmdebstrap's hook runs in its own shell, $1 the chroot
il_mmdebstrap "$suite" arm64 "$mirror" "${PACKAGES[@]}" -- --customize-hook='mkdir -p "$1"/boot/efi'
il_kernel

t=$SECONDS
il_gpt_esp_root "$work/arm64.raw" "$DISK_SIZE" "$ESP_START" "$ESP_SECTORS"
il_mkfs_root "$work/arm64.raw" "$root_start" "$root_sectors"
log "disk image written in $((SECONDS - t)) s"

# The guest formats its ESP, mounts it at /boot/efi (fstab) and installs GRUB for arm64 EFI
# with its own grub-install and update-grub (its initramfs was made small in the chroot).
cat >"$work/provision-arm64.sh" <<'EOF'
set -eux
disk=$(lsblk -ndo PKNAME "$(findmnt -no SOURCE /)" 2>/dev/null || true)
[ -n "$disk" ] || disk=vda
esp=/dev/${disk}1
mkfs.vfat -F 32 -n ESP "$esp"
modprobe vfat || true
# Once, even when a provisioning boot is run again on the same disk (an interrupted build).
sed -i '\|[[:space:]]/boot/efi[[:space:]]|d' /etc/fstab
# The ESP as Debian's installer mounts it, with a longer wait for its device than systemd's
# 90 s: under TCG on a loaded 2-core machine udev's coldplug can take longer than that, and
# the boot would stop in emergency mode for a disk that is there.
printf 'UUID=%s\t/boot/efi\tvfat\tumask=0077,x-systemd.device-timeout=600\t0\t1\n' "$(blkid -s UUID -o value "$esp")" >>/etc/fstab
mount /boot/efi
# No NVRAM here (the provisioning boot is not UEFI): the removable path EFI/BOOT/BOOTAA64.EFI
# is what the firmware finds; EFI/debian holds the same GRUB and grub.cfg's stub.
grub-install --target=arm64-efi --efi-directory=/boot/efi --no-nvram --force-extra-removable
update-grub
find /boot/efi -type f | sort
grep -c '^menuentry' /boot/grub/grub.cfg
umount /boot/efi
EOF
t=$SECONDS
log "first boot (kernel $kver, direct): mkfs.vfat, grub-install (arm64-efi), update-grub inside the guest"
il_provision "$work/boot-arm64.log" "$work/provision-arm64.sh" \
  "${VM_QEMU_PROVISION_ARM64[@]}" \
  -kernel "$work/vmlinuz-$kver" -initrd "$work/initrd.img-$kver" \
  -append "root=UUID=$uuid ro console=ttyAMA0,115200 quiet" \
  -drive "file=$work/arm64.raw,if=none,id=d0,format=raw" -device virtio-blk-pci,drive=d0
grep -q 'EFI/BOOT/BOOTAA64.EFI' "$work/boot-arm64.log.phase" || die "grub-install left no EFI/BOOT/BOOTAA64.EFI (log: $work/boot-arm64.log.phase)"
log "GRUB installed by the guest in $((SECONDS - t)) s"

il_finish "$suite" "${PACKAGES[@]}"
