#!/usr/bin/env bash
# Build (or find in the cache) the x86 UEFI Secure Boot guest disk of tests/vm/host-lifecycle.sh
# (--variant secureboot, issue 25 item 4):
#
#   tests/vm/lifecycle-image-uefi.sh [--rebuild]     prints the image directory on stdout
#
# The directory holds
#   uefi.raw   GPT disk: an EFI system partition (FAT32, made by the guest's own mkfs.vfat) and
#              an ext4 root; Debian's signed chain installed by the guest's own grub-install:
#              shim-signed (Microsoft-signed shimx64.efi as EFI/debian and EFI/BOOT/BOOTX64.EFI),
#              grub-efi-amd64-signed (Debian-signed grubx64.efi) and the Debian-signed kernel of
#              linux-image-amd64; /boot/grub/grub.cfg written by the guest's own update-grub;
#   info       key=value facts (kernel, root UUID) for the harness.
# The harness boots it with Debian's `ovmf` firmware with Secure Boot enforced and Microsoft's
# keys enrolled (OVMF_CODE_4M.secboot.fd + a copy of OVMF_VARS_4M.ms.fd).
#
# As tests/vm/lifecycle-image.sh, through the steps of tests/vm/image-lib.sh: everything from
# Debian's packages (mmdebstrap), nothing mounted on the host (mkfs.ext4 -d into the root
# partition's offset of a raw file; the ESP is formatted and filled inside the guest), cached in
# $DAQTUNE_VM_CACHE under the hash of this script, image-lib.sh, the package list, the suite
# and the mirror; the downloaded .debs are shared with that script's.
#
# Exit codes: 0 (path printed), 125 = cannot be prepared (tool, firmware or package missing,
# mirror unreachable; the reason on a line "lifecycle-image-uefi: SKIP: ..."), 1 = a step failed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
IL_NAME=lifecycle-image-uefi
# shellcheck source=tests/vm/image-lib.sh
. "$here/image-lib.sh"
suite=bookworm
mirror=${DAQTUNE_VM_MIRROR:-http://deb.debian.org/debian}
rebuild=0
[[ ${1:-} == --rebuild ]] && rebuild=1

# A minimal Debian 12 UEFI server with the signed boot chain; dosfstools for the guest's own
# mkfs.vfat of the ESP; jq for the harness's assertions.
PACKAGES=(
  linux-image-amd64 initramfs-tools systemd systemd-sysv udev dbus kmod iproute2
  grub-efi-amd64 grub-efi-amd64-signed shim-signed dosfstools
  apt ca-certificates jq
)
# The root's modules for the guest's initramfs (image-lib.sh, il_initramfs_list): NVMe, as
# every x86 boot of the harness gives the disk.
IL_INITRD_MODULES="nvme ext4 crc32c_generic crc32c_intel"
DISK_SIZE=3G
ESP_START=2048      # sectors
ESP_SECTORS=131072  # 64 MiB

il_require qemu-system-x86_64:qemu-system-x86
il_cache_or_lock "$suite" amd64 "$mirror" "${PACKAGES[@]}"
# The BIOS image's configuration (hostname, networkd owning the data port, quiet timers, the
# harness's agent, GRUB on the serial console).
il_customize ttyS0 networkd
# shellcheck disable=SC2016 # mmdebstrap's hook runs in its own shell, $1 the chroot
il_mmdebstrap "$suite" amd64 "$mirror" "${PACKAGES[@]}" -- --customize-hook='mkdir -p "$1"/boot/efi'
[[ -f $rootfs/usr/lib/shim/shimx64.efi.signed ]] || die "shim-signed installed no /usr/lib/shim/shimx64.efi.signed"
il_kernel

t=$SECONDS
il_gpt_esp_root "$work/uefi.raw" "$DISK_SIZE" "$ESP_START" "$ESP_SECTORS"
il_mkfs_root "$work/uefi.raw" "$root_start" "$root_sectors"
log "disk image written in $((SECONDS - t)) s"

# The guest formats its ESP, mounts it at /boot/efi (fstab), and installs the signed chain.
cat >"$work/provision-uefi.sh" <<'EOF'
set -eux
disk=$(lsblk -ndo PKNAME "$(findmnt -no SOURCE /)" 2>/dev/null || true)
[ -n "$disk" ] || disk=nvme0n1
esp=/dev/${disk}p1
mkfs.vfat -F 32 -n ESP "$esp"
modprobe vfat || true
printf 'UUID=%s\t/boot/efi\tvfat\tumask=0077\t0\t1\n' "$(blkid -s UUID -o value "$esp")" >>/etc/fstab
mount /boot/efi
# No NVRAM here (the provisioning boot is not UEFI): the removable path EFI/BOOT/BOOTX64.EFI
# (shim) is what the firmware finds; EFI/debian holds the same chain and grub.cfg's stub.
grub-install --target=x86_64-efi --efi-directory=/boot/efi --uefi-secure-boot --no-nvram --force-extra-removable
update-grub
find /boot/efi -type f | sort
grep -c '^menuentry' /boot/grub/grub.cfg
umount /boot/efi
EOF
t=$SECONDS
log "first boot (kernel $kver, direct): mkfs.vfat, grub-install (signed shim and GRUB), update-grub inside the guest"
il_provision "$work/boot-uefi.log" "$work/provision-uefi.sh" \
  "${VM_QEMU_PROVISION_X86[@]}" \
  -kernel "$work/vmlinuz-$kver" -initrd "$work/initrd.img-$kver" \
  -append "root=UUID=$uuid ro console=ttyS0,115200 quiet" \
  -drive "file=$work/uefi.raw,if=none,id=d0,format=raw" -device nvme,drive=d0,serial=daqtune0
grep -q 'EFI/BOOT/BOOTX64.EFI' "$work/boot-uefi.log.phase" || die "grub-install left no EFI/BOOT/BOOTX64.EFI (log: $work/boot-uefi.log.phase)"
log "signed chain installed by the guest in $((SECONDS - t)) s"

il_finish "$suite" "${PACKAGES[@]}"
