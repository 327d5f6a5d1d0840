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
# As tests/vm/lifecycle-image.sh: everything from Debian's packages (mmdebstrap), nothing mounted
# on the host (mkfs.ext4 -d into the root partition's offset of a raw file; the ESP is formatted
# and filled inside the guest), cached in $DAQTUNE_VM_CACHE under the hash of this script, the
# package list, the suite and the mirror; the downloaded .debs are shared with that script's.
#
# Exit codes: 0 (path printed), 125 = cannot be prepared (tool, firmware or package missing,
# mirror unreachable; the reason on a line "lifecycle-image-uefi: SKIP: ..."), 1 = a step failed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${DAQTUNE_VM_CACHE:-$repo/target/vm-cache}
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
DISK_SIZE=3G
ESP_START=2048      # sectors
ESP_SECTORS=131072  # 64 MiB
ROOT_START=$((ESP_START + ESP_SECTORS))

log() { printf 'lifecycle-image-uefi: %s\n' "$*" >&2; }
skip() { printf 'lifecycle-image-uefi: SKIP: %s\n' "$*"; exit 125; }
die() { printf 'lifecycle-image-uefi: FAILED: %s\n' "$*" >&2; exit 1; }

for tool in mmdebstrap:mmdebstrap sfdisk:fdisk mkfs.ext4:e2fsprogs qemu-system-x86_64:qemu-system-x86 \
  qemu-img:qemu-utils sha256sum:coreutils flock:util-linux; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || skip "${tool%%:*} not found (apt-get install ${tool#*:})"
done
[[ $(id -u) == 0 ]] || skip "building the guest image needs root (mmdebstrap chroot mode, device nodes in the image)"

# The same customisation as the BIOS image (hostname, networkd owning the data port, quiet
# timers, the harness's agent, GRUB on the serial console): taken from lifecycle-image.sh, and
# part of this image's cache key.
customize=$(sed -n "/^cat >\"\$work\/customize.sh\" <<'CUSTOMIZE'\$/,/^CUSTOMIZE\$/p" "$here/lifecycle-image.sh" | sed '1d;$d')
[[ $customize == *lifecycle-agent* ]] || die "could not take the guest customisation from lifecycle-image.sh"

key=$( { cat "$0"; printf '%s\n' "$customize"; printf '%s\n' "$suite" "$mirror" "${PACKAGES[@]}"; } | sha256sum | cut -c1-16)
img=$cache/lifecycle-uefi-$key
mkdir -p "$cache"
if ((rebuild == 0)) && [[ -f $img/ready ]]; then
  echo "$img"
  exit 0
fi
exec 9>"$cache/lifecycle-image-uefi.lock"
flock 9
if ((rebuild == 0)) && [[ -f $img/ready ]]; then
  echo "$img"
  exit 0
fi

t0=$SECONDS
work=$(mktemp -d "$cache/.lifecycle-uefi-build.XXXXXX")
cleanup() {
  if grep -qF " $work/" /proc/self/mountinfo 2>/dev/null; then
    echo "lifecycle-image-uefi: $work still has mounts below it (interrupted mmdebstrap?): not removed" >&2
    return
  fi
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
debs=$cache/lifecycle-debs
mkdir -p "$debs"
rootfs=$work/rootfs
uuid=$(cat /proc/sys/kernel/random/uuid)

printf '%s\n' "$customize" >"$work/customize.sh"
chmod +x "$work/customize.sh"

log "mmdebstrap $suite (${PACKAGES[*]})"
t=$SECONDS
if ! mmdebstrap --mode=root --variant=minbase --aptopt='APT::Install-Recommends "false"' \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --skip=download/empty --skip=essential/unlink \
  --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
  --setup-hook="sync-in $debs /var/cache/apt/archives/" \
  --customize-hook="sync-out /var/cache/apt/archives $debs" \
  --customize-hook="$work/customize.sh \"\$1\" $uuid" \
  --customize-hook='mkdir -p "$1"/boot/efi' \
  "$suite" "$rootfs" "$mirror" >"$work/mmdebstrap.log" 2>&1; then
  cp "$work/mmdebstrap.log" "$cache/lifecycle-uefi-mmdebstrap.log"
  if grep -qE "Temporary failure resolving|Could not resolve|Failed to fetch|Unable to locate package|E: Unable to fetch" "$work/mmdebstrap.log"; then
    skip "mmdebstrap could not get the packages from $mirror: $(grep -m1 -E '^E:|W: Failed' "$work/mmdebstrap.log") (log: $cache/lifecycle-uefi-mmdebstrap.log)"
  fi
  die "mmdebstrap failed: $(tail -n 3 "$work/mmdebstrap.log" | tr '\n' ' ') (log: $cache/lifecycle-uefi-mmdebstrap.log)"
fi
rm -f "$debs/lock"; rm -rf "$debs/partial"
log "root file system: $(du -sm "$rootfs" | cut -f1) MiB in $((SECONDS - t)) s"
[[ -f $rootfs/usr/lib/shim/shimx64.efi.signed ]] || die "shim-signed installed no /usr/lib/shim/shimx64.efi.signed"

kernel=$(cd "$rootfs/boot" && ls vmlinuz-* | sort -V | tail -n1)
kver=${kernel#vmlinuz-}
[[ -f $rootfs/boot/initrd.img-$kver ]] || die "no initrd for $kver in the guest (initramfs-tools did not run?)"
cp "$rootfs/boot/vmlinuz-$kver" "$rootfs/boot/initrd.img-$kver" "$work/"

t=$SECONDS
truncate -s "$DISK_SIZE" "$work/uefi.raw"
printf 'label: gpt\nstart=%s, size=%s, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI system"\nstart=%s, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=root\n' \
  "$ESP_START" "$ESP_SECTORS" "$ROOT_START" \
  | sfdisk --quiet --no-reread --no-tell-kernel "$work/uefi.raw" >/dev/null
# The root partition's size as sfdisk laid it out (GPT's backup at the end, sfdisk's alignment):
# a file system larger than its partition does not mount.
root_sectors=$(sfdisk --dump "$work/uefi.raw" | awk -v s="$ROOT_START" '$0 ~ "start= *"s"," {sub(/.*size= */, ""); sub(/,.*/, ""); print; exit}')
[[ $root_sectors =~ ^[0-9]+$ ]] || die "no root partition at sector $ROOT_START in $(sfdisk --dump "$work/uefi.raw" | tr '\n' ' ')"
blocks=$((root_sectors * 512 / 4096))
mkfs.ext4 -q -F -b 4096 -L daqtune-root -U "$uuid" -O '^64bit,^metadata_csum_seed,^orphan_file' \
  -E offset=$((ROOT_START * 512)) -d "$rootfs" "$work/uefi.raw" "$blocks" \
  || die "mkfs.ext4 -d failed"
rm -rf --one-file-system "$rootfs"
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
echo MODULES=dep >/etc/initramfs-tools/conf.d/lifecycle-vm.conf
update-initramfs -u
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
io=$work/io
mkdir -p "$io"
cp "$work/provision-uefi.sh" "$io/phase.sh"
echo provision >"$io/phase"
echo poweroff >"$io/next"
timeout --foreground "${DAQTUNE_VM_BOOT_TIMEOUT:-900}" qemu-system-x86_64 \
  -machine q35,accel=tcg -cpu max -smp 2 -m 1536 -nographic -no-reboot -monitor none \
  -serial "file:$work/boot-uefi.log" -kernel "$work/vmlinuz-$kver" -initrd "$work/initrd.img-$kver" \
  -append "root=UUID=$uuid ro console=ttyS0,115200 quiet" \
  -drive "file=$work/uefi.raw,if=none,id=d0,format=raw" -device nvme,drive=d0,serial=daqtune0 \
  -virtfs "local,path=$io,mount_tag=io,security_model=none" </dev/null >/dev/null 2>&1 \
  || die "provisioning boot failed or timed out: see $work/boot-uefi.log"
[[ -f $io/phase.rc ]] || die "provisioning boot did not run its phase: see $work/boot-uefi.log"
cp "$io/phase.log" "$work/boot-uefi.log.phase"
[[ $(cat "$io/phase.rc") == 0 ]] || die "provisioning failed: $(tail -n 5 "$io/phase.log" | tr '\n' ' ') (log: $work/boot-uefi.log.phase)"
grep -q 'EFI/BOOT/BOOTX64.EFI' "$io/phase.log" || die "grub-install left no EFI/BOOT/BOOTX64.EFI (log: $work/boot-uefi.log.phase)"
log "signed chain installed by the guest in $((SECONDS - t)) s"

cat >"$work/info" <<EOF
kernel=$kver
root_uuid=$uuid
suite=$suite
packages=${PACKAGES[*]}
built=$(date -u +%Y-%m-%dT%H:%M:%SZ)
build_seconds=$((SECONDS - t0))
EOF
touch "$work/ready"
rm -rf "$work/io" "$work/vmlinuz-$kver" "$work/initrd.img-$kver"
rm -rf "$img"
mv -T "$work" "$img"
trap - EXIT
log "image ready in $((SECONDS - t0)) s: $img"
echo "$img"
