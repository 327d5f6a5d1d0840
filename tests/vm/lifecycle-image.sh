#!/usr/bin/env bash
# Build (or find in the cache) the Debian 12 guest disks of tests/vm/host-lifecycle.sh:
#
#   tests/vm/lifecycle-image.sh [--rebuild]     prints the image directory on stdout
#
# The directory holds
#   grub.raw        MBR disk, one ext4 root partition, GRUB (grub-pc) installed on the disk by
#                   the guest's own grub-install and configured by the guest's own update-grub;
#   extlinux.qcow2  overlay of grub.raw in which the guest purged GRUB, ran `extlinux --install`
#                   and wrote syslinux's MBR: the disk boots through /boot/extlinux/extlinux.conf
#                   (IGX and Jetson boot that way);
#   info            key=value facts (kernel, root UUID, interface names) for the harness.
#
# Everything comes from Debian's packages (mmdebstrap from the Debian mirror); nothing is mounted
# on the host (no loop device, no nbd: mkfs.ext4 -d writes the file system straight into the
# partition's offset of a raw file), and the two bootloader installs run inside the guest under
# qemu. The result is cached in $DAQTUNE_VM_CACHE (default target/vm-cache) under a name made of
# the hash of this script, the package list, the suite and the mirror: any change rebuilds it.
# Downloaded .debs are kept in $DAQTUNE_VM_CACHE/lifecycle-debs for the next rebuild.
#
# Exit codes: 0 (path printed), 125 = cannot be prepared (tool or package missing, mirror
# unreachable; the reason on a line "lifecycle-image: SKIP: ..."), 1 = a build step failed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${DAQTUNE_VM_CACHE:-$repo/target/vm-cache}
suite=bookworm
mirror=${DAQTUNE_VM_MIRROR:-http://deb.debian.org/debian}
rebuild=0
[[ ${1:-} == --rebuild ]] && rebuild=1

# The guest: what a minimal Debian 12 server installs, plus the two boot loaders under test,
# jq for the harness's assertions, dbus (systemd talks to it on a real host) and netplan.io
# (the netplan variant writes its configuration; with no /etc/netplan/*.yaml, as in the grub
# and extlinux variants, netplan's generator renders nothing and networkd's own files rule).
# openssh-server, python3-apt and prometheus-node-exporter are the fleet variant's
# (tests/vm/fleet-ansible.sh: Ansible over SSH, node_exporter's textfile collector); they are
# disabled in the image (below) and started only by the fleet boots' agent phase.
PACKAGES=(
  linux-image-amd64 initramfs-tools systemd systemd-sysv udev dbus kmod iproute2
  grub-pc extlinux syslinux-common
  apt ca-certificates jq netplan.io
  openssh-server python3-apt prometheus-node-exporter
)
DISK_SIZE=3G
PART_START=2048 # sectors: 1 MiB, room for GRUB's core.img after the MBR

log() { printf 'lifecycle-image: %s\n' "$*" >&2; }
skip() { printf 'lifecycle-image: SKIP: %s\n' "$*"; exit 125; }
die() { printf 'lifecycle-image: FAILED: %s\n' "$*" >&2; exit 1; }

for tool in mmdebstrap:mmdebstrap sfdisk:fdisk mkfs.ext4:e2fsprogs qemu-system-x86_64:qemu-system-x86 \
  qemu-img:qemu-utils sha256sum:coreutils flock:util-linux; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || skip "${tool%%:*} not found (apt-get install ${tool#*:})"
done
[[ $(id -u) == 0 ]] || skip "building the guest image needs root (mmdebstrap chroot mode, device nodes in the image)"

key=$( { cat "$0"; printf '%s\n' "$suite" "$mirror" "${PACKAGES[@]}"; } | sha256sum | cut -c1-16)
img=$cache/lifecycle-$key
mkdir -p "$cache"
if ((rebuild == 0)) && [[ -f $img/ready ]]; then
  echo "$img"
  exit 0
fi

# One build at a time per cache (two harness runs may start together); the second waits and
# then finds the image ready.
exec 9>"$cache/lifecycle-image.lock"
flock 9
if ((rebuild == 0)) && [[ -f $img/ready ]]; then
  echo "$img"
  exit 0
fi

t0=$SECONDS
work=$(mktemp -d "$cache/.lifecycle-build.XXXXXX")
# mmdebstrap bind-mounts /dev/shm, /sys, /proc and a devpts into the root it builds: never
# delete through a mount that is still there (an interrupted run), never leave this file system.
cleanup() {
  if grep -qF " $work/" /proc/self/mountinfo 2>/dev/null; then
    echo "lifecycle-image: $work still has mounts below it (interrupted mmdebstrap?): not removed" >&2
    return
  fi
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
debs=$cache/lifecycle-debs
mkdir -p "$debs"
rootfs=$work/rootfs
uuid=$(cat /proc/sys/kernel/random/uuid)

# --- the guest's customisation (runs on the host, $1 = the guest's root) ---------------------
cat >"$work/customize.sh" <<'CUSTOMIZE'
#!/bin/sh
set -eu
r=$1
uuid=$2
echo daqtune-vm >"$r/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tdaqtune-vm\n' >"$r/etc/hosts"
printf 'UUID=%s\t/\text4\terrors=remount-ro\t0\t1\n' "$uuid" >"$r/etc/fstab"
# GRUB as a serial-console server sets it up: no menu delay, console on ttyS0.
sed -i -e 's/^GRUB_TIMEOUT=.*/GRUB_TIMEOUT=0/' \
  -e 's/^GRUB_CMDLINE_LINUX=.*/GRUB_CMDLINE_LINUX="console=ttyS0,115200"/' "$r/etc/default/grub"
cat >>"$r/etc/default/grub" <<'EOF'
GRUB_TERMINAL=serial
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
EOF
# systemd-networkd manages the data port (no address: a DPDK/RDMA port); nothing waits for it.
mkdir -p "$r/etc/systemd/network"
cat >"$r/etc/systemd/network/20-data.network" <<'EOF'
[Match]
Name=en*

[Network]
LinkLocalAddressing=no
IPv6AcceptRA=no

[Link]
RequiredForOnline=no
EOF
chroot "$r" systemctl enable systemd-networkd.service >/dev/null 2>&1
# Timers that would start work at a random point of a test boot: off. (Masked before the
# harness's first checksum of /etc, so they are part of the baseline.)
for t in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer man-db.timer; do
  chroot "$r" systemctl mask "$t" >/dev/null 2>&1 || true
done
# sshd and node_exporter serve only the fleet variant, whose agent phase starts them at run
# time (tests/vm/fleet-ansible.sh); the other variants' boots do not run them.
chroot "$r" systemctl disable ssh.service ssh.socket prometheus-node-exporter.service >/dev/null 2>&1 || true

# The harness's agent: at the end of each boot, mount the 9p share `io` (when the harness gave
# one) and run its phase script; the script's last word says poweroff or reboot. It is part of
# the image, so it is in every checksum of /etc before and after daqtune.
cat >"$r/usr/local/sbin/lifecycle-agent" <<'EOF'
#!/bin/sh
# tests/vm/lifecycle-image.sh: runs the harness's phase script from the 9p share `io`.
io=/run/lifecycle-io
mkdir -p "$io"
modprobe -q 9pnet_virtio 2>/dev/null
modprobe -q 9p 2>/dev/null
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 io "$io" 2>/dev/null; then
    echo "lifecycle-agent: no 9p share named io: nothing to run"
    exit 0
fi
next=poweroff
if [ -f "$io/phase.sh" ]; then
    echo "lifecycle-agent: running phase $(cat "$io/phase" 2>/dev/null) at $(cut -d' ' -f1 /proc/uptime)s"
    sh "$io/phase.sh" "$(cat "$io/phase" 2>/dev/null)" >"$io/phase.log" 2>&1
    echo $? >"$io/phase.rc"
    next=$(cat "$io/next" 2>/dev/null || echo poweroff)
    echo "lifecycle-agent: phase done rc=$(cat "$io/phase.rc"), then $next"
fi
sync
umount "$io" 2>/dev/null
case "$next" in
    reboot) systemctl --no-block reboot ;;
    stay) ;;
    *) systemctl --no-block poweroff ;;
esac
EOF
chmod 0755 "$r/usr/local/sbin/lifecycle-agent"
cat >"$r/etc/systemd/system/lifecycle-agent.service" <<'EOF'
[Unit]
Description=daqtune lifecycle test agent (tests/vm/host-lifecycle.sh)
After=multi-user.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/lifecycle-agent
StandardOutput=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
EOF
chroot "$r" systemctl enable lifecycle-agent.service >/dev/null 2>&1
CUSTOMIZE
chmod +x "$work/customize.sh"

# --- 1. the root file system from Debian's packages ------------------------------------------
log "mmdebstrap $suite (${PACKAGES[*]})"
t=$SECONDS
if ! mmdebstrap --mode=root --variant=minbase --aptopt='APT::Install-Recommends "false"' \
  --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --skip=download/empty --skip=essential/unlink \
  --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
  --setup-hook="sync-in $debs /var/cache/apt/archives/" \
  --customize-hook="sync-out /var/cache/apt/archives $debs" \
  --customize-hook="$work/customize.sh \"\$1\" $uuid" \
  "$suite" "$rootfs" "$mirror" >"$work/mmdebstrap.log" 2>&1; then
  cp "$work/mmdebstrap.log" "$cache/lifecycle-mmdebstrap.log"
  if grep -qE "Temporary failure resolving|Could not resolve|Failed to fetch|Unable to locate package|E: Unable to fetch" "$work/mmdebstrap.log"; then
    skip "mmdebstrap could not get the packages from $mirror: $(grep -m1 -E '^E:|W: Failed' "$work/mmdebstrap.log") (log: $cache/lifecycle-mmdebstrap.log)"
  fi
  die "mmdebstrap failed: $(tail -n 3 "$work/mmdebstrap.log" | tr '\n' ' ') (log: $cache/lifecycle-mmdebstrap.log)"
fi
rm -f "$debs/lock"; rm -rf "$debs/partial"
log "root file system: $(du -sm "$rootfs" | cut -f1) MiB in $((SECONDS - t)) s"

kernel=$(cd "$rootfs/boot" && ls vmlinuz-* | sort -V | tail -n1)
kver=${kernel#vmlinuz-}
[[ -f $rootfs/boot/initrd.img-$kver ]] || die "no initrd for $kver in the guest (initramfs-tools did not run?)"
cp "$rootfs/boot/vmlinuz-$kver" "$rootfs/boot/initrd.img-$kver" "$work/"

# --- 2. the disk: MBR, one bootable ext4 partition, written without mounting -----------------
t=$SECONDS
truncate -s "$DISK_SIZE" "$work/grub.raw"
printf 'label: dos\nstart=%s, type=83, bootable\n' "$PART_START" \
  | sfdisk --quiet --no-reread --no-tell-kernel "$work/grub.raw" >/dev/null
bytes=$(stat -c %s "$work/grub.raw")
blocks=$(((bytes - PART_START * 512) / 4096))
# No 64bit/metadata_csum_seed/orphan_file: extlinux 6.04 and GRUB 2.06 read that ext4 (Debian's
# own mke2fs.conf avoids the last two for GRUB too).
mkfs.ext4 -q -F -b 4096 -L daqtune-root -U "$uuid" -O '^64bit,^metadata_csum_seed,^orphan_file' \
  -E offset=$((PART_START * 512)) -d "$rootfs" "$work/grub.raw" "$blocks" \
  || die "mkfs.ext4 -d failed"
rm -rf --one-file-system "$rootfs"
log "disk image written in $((SECONDS - t)) s"

# --- 3. first boot: the guest installs GRUB on its disk and runs its own update-grub ---------
boot_direct() { # DISK FORMAT PHASE-SCRIPT LOG: boot the kernel directly (the disk has no loader yet)
  local io=$work/io
  rm -rf "$io"; mkdir -p "$io"
  cp "$3" "$io/phase.sh"
  echo provision >"$io/phase"
  echo poweroff >"$io/next"
  timeout --foreground "${DAQTUNE_VM_BOOT_TIMEOUT:-900}" qemu-system-x86_64 \
    -machine q35,accel=tcg -cpu max -smp 2 -m 1536 -nographic -no-reboot -monitor none \
    -serial "file:$4" -kernel "$work/vmlinuz-$kver" -initrd "$work/initrd.img-$kver" \
    -append "root=UUID=$uuid ro console=ttyS0,115200 quiet" \
    -drive "file=$1,if=none,id=d0,format=$2" -device nvme,drive=d0,serial=daqtune0 \
    -virtfs "local,path=$io,mount_tag=io,security_model=none" </dev/null >/dev/null 2>&1 \
    || die "provisioning boot failed or timed out: see $4"
  [[ -f $io/phase.rc ]] || die "provisioning boot did not run its phase: see $4"
  cp "$io/phase.log" "$4.phase"
  [[ $(cat "$io/phase.rc") == 0 ]] || die "provisioning failed: $(tail -n 5 "$io/phase.log" | tr '\n' ' ') (log: $4.phase)"
}

boot_disk() { # DISK FORMAT PHASE-SCRIPT LOG: boot through the disk's own boot loader
  local io=$work/io
  rm -rf "$io"; mkdir -p "$io"
  cp "$3" "$io/phase.sh"
  echo provision >"$io/phase"
  echo poweroff >"$io/next"
  timeout --foreground "${DAQTUNE_VM_BOOT_TIMEOUT:-900}" qemu-system-x86_64 \
    -machine q35,accel=tcg -cpu max -smp 2 -m 1536 -nographic -no-reboot -monitor none \
    -serial "file:$4" \
    -drive "file=$1,if=none,id=d0,format=$2" -device nvme,drive=d0,serial=daqtune0,bootindex=1 \
    -virtfs "local,path=$io,mount_tag=io,security_model=none" </dev/null >/dev/null 2>&1 \
    || die "provisioning boot from the disk failed or timed out: see $4"
  [[ -f $io/phase.rc ]] || die "the disk did not boot to its phase: see $4"
  cp "$io/phase.log" "$4.phase"
  [[ $(cat "$io/phase.rc") == 0 ]] || die "provisioning failed: $(tail -n 5 "$io/phase.log" | tr '\n' ' ') (log: $4.phase)"
}

cat >"$work/provision-grub.sh" <<'EOF'
set -eux
disk=$(lsblk -ndo PKNAME "$(findmnt -no SOURCE /)" 2>/dev/null || true)
[ -n "$disk" ] || disk=nvme0n1
# An initramfs for this machine only (MODULES=dep, as on a tuned server): a third of the
# default's size, which GRUB reads and the kernel unpacks on every boot under TCG.
echo MODULES=dep >/etc/initramfs-tools/conf.d/lifecycle-vm.conf
update-initramfs -u
ls -l /boot
grub-install --target=i386-pc "/dev/$disk"
update-grub
grep -c '^menuentry' /boot/grub/grub.cfg
cat /etc/machine-id
EOF
t=$SECONDS
log "first boot (kernel $kver, direct): grub-install + update-grub inside the guest"
boot_direct "$work/grub.raw" raw "$work/provision-grub.sh" "$work/boot-grub.log"
log "GRUB installed by the guest in $((SECONDS - t)) s"

# --- 4. the extlinux variant: boots through GRUB once, replaces it with extlinux -------------
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
      APPEND root=UUID=$uuid ro console=ttyS0,115200 quiet
CONF
dd if=/usr/lib/EXTLINUX/mbr.bin of=/dev/\$disk bs=440 count=1 conv=notrunc
sync
EOF
t=$SECONDS
qemu-img create -q -f qcow2 -b grub.raw -F raw "$work/extlinux.qcow2" >/dev/null
log "second boot (through GRUB): purge GRUB, extlinux --install, syslinux MBR"
boot_disk "$work/extlinux.qcow2" qcow2 "$work/provision-extlinux.sh" "$work/boot-extlinux.log"
log "extlinux installed by the guest in $((SECONDS - t)) s"

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
