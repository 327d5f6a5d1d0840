# shellcheck shell=bash
# What the guest-image builders of tests/vm/host-lifecycle.sh share (review item D2):
# lifecycle-image.sh (Debian 12 x86, BIOS: GRUB and extlinux), lifecycle-image-uefi.sh
# (Debian 12 x86, UEFI with Secure Boot) and lifecycle-image-arm64.sh (Debian 13 arm64, UEFI,
# NetworkManager: the Spark shape). Sourced, never run. Each builder sets IL_NAME (the prefix
# of its messages and cache entries) before sourcing, then calls, in order:
#
#   il_require TOOL:PACKAGE...        skip (exit 125) when a tool is missing or not root
#   il_cache_or_lock SUITE ARCH MIRROR PACKAGES...
#                                     prints the cached image and exits 0 when its key is
#                                     ready; else takes the cache's lock and sets $img, $work,
#                                     $debs, $rootfs, $uuid (the cache key hashes the builder,
#                                     this file, lib.sh's values that shape an image
#                                     (il_key_values), the suite, the mirror and the packages)
#   il_customize CONSOLE NETWORK [KERNEL-WORDS]
#                                     writes $work/customize.sh (the guest's configuration)
#   il_mmdebstrap SUITE ARCH MIRROR PACKAGES... [-- EXTRA-MMDEBSTRAP-ARGS]
#   il_kernel                         sets $kver; copies the kernel and initrd to $work
#   il_mkfs_root DISK START-SECTOR SECTORS   ext4 root written into the partition's offset
#   il_gpt_esp_root DISK SIZE ESP-START ESP-SECTORS   GPT: ESP + root; sets $root_start,
#                                     $root_sectors
#   il_provision LOG PHASE-SCRIPT QEMU-COMMAND...   one boot that runs PHASE-SCRIPT as root
#                                     in the guest (the 9p share `io` is added here)
#   il_finish SUITE PACKAGES...       info file, ready mark, the image moved into the cache
#
# Nothing is mounted on the host (no loop device, no nbd): mkfs.ext4 -d writes the root file
# system into its partition's offset of a raw file, and everything that needs the guest's
# devices (boot loaders, the ESP's FAT) runs inside the guest; the initramfs, with only the root's
# modules, is made in the chroot (il_initramfs_list).

# log, skip and die come from lib.sh (VM_NAME is their prefix).
VM_NAME=$IL_NAME
# shellcheck source=tests/vm/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The provisioning boots (il_provision adds the 9p share): TCG, two vCPUs, the serial console
# on stdio. Here rather than in lib.sh: they shape the images, and this file is in the key.
# The x86 CPU is lib.sh's VM_X86_CPU (why there), one of lib.sh's values the key hashes.
# shellcheck disable=SC2034 # used by the builders that source this file
VM_QEMU_PROVISION_X86=(qemu-system-x86_64 -machine q35,accel=tcg -cpu "$VM_X86_CPU" -smp 2 -m 1536 -nographic)
# shellcheck disable=SC2034 # used by the builders that source this file
VM_QEMU_PROVISION_ARM64=(qemu-system-aarch64 -machine virt,accel=tcg -cpu cortex-a72 -smp 2 -m 1536 -nographic)

il_lib=${BASH_SOURCE[0]}
cache=${DAQTUNE_VM_CACHE:-$repo/target/vm-cache}

il_require() { # TOOL:PACKAGE...
  vm_require "$@" sha256sum:coreutils flock:util-linux sfdisk:fdisk mkfs.ext4:e2fsprogs qemu-img:qemu-utils mmdebstrap:mmdebstrap
  [[ $(id -u) == 0 ]] || skip "building the guest image needs root (mmdebstrap chroot mode, device nodes in the image)"
}

# The values of lib.sh that shape an image: the x86 CPU of the provisioning boots and the words
# every x86 BIOS image puts on its kernel line. Hashed by value, not lib.sh itself: its other
# changes (the guests' qemu lines, the harness's ledger) rebuild nothing.
il_key_values=("VM_X86_CPU=$VM_X86_CPU" "VM_TCG_KERNEL_WORDS=$VM_TCG_KERNEL_WORDS")

# shellcheck disable=SC2154 # rebuild (0 or 1) is the builder's --rebuild, set after it sources this
il_cache_or_lock() { # SUITE ARCH MIRROR PACKAGES...
  local key
  key=$( { cat "$0" "$il_lib"; printf '%s\n' "${il_key_values[@]}" "$@"; } | sha256sum | cut -c1-16)
  img=$cache/$IL_NAME-$key
  mkdir -p "$cache"
  if ((rebuild == 0)) && [[ -f $img/ready ]]; then
    echo "$img"
    exit 0
  fi
  # One build at a time per cache (two harness runs may start together); the second waits
  # and then finds the image ready.
  exec 9>"$cache/$IL_NAME.lock"
  flock 9
  if ((rebuild == 0)) && [[ -f $img/ready ]]; then
    echo "$img"
    exit 0
  fi
  t0=$SECONDS
  work=$(mktemp -d "$cache/.$IL_NAME-build.XXXXXX")
  trap il_cleanup EXIT
  # Downloaded .debs are kept for the next rebuild, one pool per suite and architecture.
  debs=$cache/lifecycle-debs-$1-$2
  mkdir -p "$debs"
  rootfs=$work/rootfs
  uuid=$(cat /proc/sys/kernel/random/uuid)
}

# mmdebstrap bind-mounts /dev/shm, /sys, /proc and a devpts into the root it builds: never
# delete through a mount that is still there (an interrupted run), never leave this file system.
il_cleanup() {
  if grep -qF " $work/" /proc/self/mountinfo 2>/dev/null; then
    echo "$IL_NAME: $work still has mounts below it (interrupted mmdebstrap?): not removed" >&2
    return
  fi
  rm -rf --one-file-system "$work"
}

# The guest's configuration, run by mmdebstrap on the host with $1 = the guest's root:
# hostname, fstab, GRUB on the serial console CONSOLE with KERNEL-WORDS after it on the kernel
# line, the data port's manager (NETWORK: networkd, or networkmanager: Debian's NetworkManager
# with its defaults), quiet timers and the harness's agent.
il_customize() { # CONSOLE NETWORK [KERNEL-WORDS]
  local console=$1 network=$2 words=${3:+ $3}
  cat >"$work/customize.sh" <<CUSTOMIZE
#!/bin/sh
set -eu
r=\$1
uuid=\$2
console=$console
words="$words"
network=$network
CUSTOMIZE
  cat >>"$work/customize.sh" <<'CUSTOMIZE'
echo daqtune-vm >"$r/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tdaqtune-vm\n' >"$r/etc/hosts"
printf 'UUID=%s\t/\text4\terrors=remount-ro\t0\t1\n' "$uuid" >"$r/etc/fstab"
# GRUB as a serial-console server sets it up: no menu delay, the console on the serial port.
sed -i -e 's/^GRUB_TIMEOUT=.*/GRUB_TIMEOUT=0/' \
  -e "s/^GRUB_CMDLINE_LINUX=.*/GRUB_CMDLINE_LINUX=\"console=$console,115200$words\"/" "$r/etc/default/grub"
if [ "$console" = ttyS0 ]; then
cat >>"$r/etc/default/grub" <<'EOF'
GRUB_TERMINAL=serial
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
EOF
else
# UEFI on the virt machine has the serial port as its console: GRUB's own console is it.
echo 'GRUB_TERMINAL=console' >>"$r/etc/default/grub"
fi
if [ "$network" = networkd ]; then
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
else
# NetworkManager as Debian installs it manages every Ethernet port; nothing waits for it.
chroot "$r" systemctl enable NetworkManager.service >/dev/null 2>&1
chroot "$r" systemctl disable NetworkManager-wait-online.service >/dev/null 2>&1 || true
fi
# Timers that would start work at a random point of a test boot: off. (Masked before the
# harness's first checksum of /etc, so they are part of the baseline.)
for t in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer man-db.timer; do
  chroot "$r" systemctl mask "$t" >/dev/null 2>&1 || true
done
# e2scrub_reap looks for LVM snapshots of e2scrub at every boot; the image has no LVM, and it
# was the longest unit of a boot after udev's coldplug (12.6 s under TCG, 2026-11-29).
chroot "$r" systemctl mask e2scrub_reap.service >/dev/null 2>&1 || true
# Drivers for what QEMU's q35 board has and no test uses (the ICH9 watchdog, SMBus and SATA
# controller, the PC speaker, KVM and the CPU's crypto helpers, wireless: systemd-networkd's
# nl80211 query loads cfg80211, which parses its X.509 certificates): under TCG each load costs
# a few hundred milliseconds of a boot. `blacklist` stops only the loads by alias (udev,
# request_module); nothing here loads them by name. The modprobe@ units systemd starts at
# every boot for drm, efi_pstore, loop and dm_mod cost about a second of CPU each; no test
# uses those either.
cat >"$r/etc/modprobe.d/lifecycle-vm-blacklist.conf" <<'EOF'
# tests/vm/image-lib.sh: drivers no test of this guest uses (each load is slow under TCG)
blacklist kvm
blacklist kvm_intel
blacklist kvm_amd
blacklist cfg80211
blacklist iTCO_wdt
blacklist iTCO_vendor_support
blacklist intel_pmc_bxt
blacklist lpc_ich
blacklist i2c_i801
blacklist ahci
blacklist pcspkr
blacklist serio_raw
blacklist psmouse
blacklist evdev
blacklist button
blacklist aesni_intel
blacklist ghash_clmulni_intel
blacklist crc32_pclmul
blacklist sha1_ssse3
blacklist sha256_ssse3
blacklist sha512_ssse3
EOF
for u in drm efi_pstore loop dm_mod; do
  chroot "$r" systemctl mask "modprobe@$u.service" >/dev/null 2>&1 || true
done
# sshd and node_exporter (in the x86 image for the fleet variant) serve only the fleet boots,
# whose agent phase starts them (tests/vm/fleet-ansible.sh); no other boot runs them.
chroot "$r" systemctl disable ssh.service ssh.socket prometheus-node-exporter.service >/dev/null 2>&1 || true

# The harness's agent: at the end of each boot, mount the 9p share `io` (when the harness gave
# one) and run its phase script; the script's last word says poweroff or reboot. It is part of
# the image, so it is in every checksum of /etc before and after daqtune.
cat >"$r/usr/local/sbin/lifecycle-agent" <<'EOF'
#!/bin/sh
# tests/vm/image-lib.sh: runs the harness's phase script from the 9p share `io`.
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
}

# The guest's initramfs holds only the modules its root needs on the harness's machine
# (IL_INITRD_MODULES, set by each builder: the disk's bus, ext4 and its checksum), written
# before the kernel package is installed so the one mkinitramfs of the build (and
# initramfs-tools' trigger) makes the small image at once: MODULES=most copies every storage
# and file-system driver and compresses them, which under qemu-user (the arm64 image) took
# about 20 minutes per run, and the guest used to make its MODULES=dep image again at its
# first boot under TCG (5 minutes of the x86 image's cold build on the loaded machine).
# mkinitramfs drops a name its kernel lacks without a word, and the guest would then wait for
# its root until the provisioning boot's timeout: il_kernel checks each name against the
# kernel's modules.dep and modules.builtin first.
il_initramfs_list() {
  [[ -n ${IL_INITRD_MODULES:-} ]] || die "IL_INITRD_MODULES is not set (the builder's root device modules)"
  cat >"$work/initramfs-list.sh" <<EOF
#!/bin/sh
set -eu
mkdir -p "\$1/etc/initramfs-tools/conf.d" "\$1/usr/share/initramfs-tools/modules.d"
echo MODULES=list >"\$1/etc/initramfs-tools/conf.d/lifecycle-vm.conf"
printf '%s\n' $IL_INITRD_MODULES >"\$1/usr/share/initramfs-tools/modules.d/lifecycle-vm"
EOF
  chmod +x "$work/initramfs-list.sh"
}

il_mmdebstrap() { # SUITE ARCH MIRROR PACKAGES... [-- EXTRA-ARGS...]
  local suite=$1 arch=$2 mirror=$3 t
  shift 3
  local pkgs=() extra=()
  while (($#)) && [[ $1 != -- ]]; do pkgs+=("$1"); shift; done
  (($#)) && shift && extra=("$@")
  log "mmdebstrap $suite $arch (${pkgs[*]})"
  il_initramfs_list
  t=$SECONDS
  # shellcheck disable=SC2016 # mmdebstrap's hooks run in its own shell, $1 the chroot
  if ! mmdebstrap --mode=root --variant=minbase --architectures="$arch" \
    --aptopt='APT::Install-Recommends "false"' \
    --include="$(IFS=,; echo "${pkgs[*]}")" \
    --skip=download/empty --skip=essential/unlink \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
    --setup-hook="sync-in $debs /var/cache/apt/archives/" \
    --essential-hook="$work/initramfs-list.sh \"\$1\"" \
    --customize-hook="sync-out /var/cache/apt/archives $debs" \
    --customize-hook="$work/customize.sh \"\$1\" $uuid" \
    "${extra[@]}" \
    "$suite" "$rootfs" "$mirror" >"$work/mmdebstrap.log" 2>&1; then
    cp "$work/mmdebstrap.log" "$cache/$IL_NAME-mmdebstrap.log"
    if grep -qE "Temporary failure resolving|Could not resolve|Failed to fetch|Unable to locate package|E: Unable to fetch" "$work/mmdebstrap.log"; then
      skip "mmdebstrap could not get the packages from $mirror: $(grep -m1 -E '^E:|W: Failed' "$work/mmdebstrap.log") (log: $cache/$IL_NAME-mmdebstrap.log)"
    fi
    die "mmdebstrap failed: $(tail -n 3 "$work/mmdebstrap.log" | tr '\n' ' ') (log: $cache/$IL_NAME-mmdebstrap.log)"
  fi
  rm -f "$debs/lock"; rm -rf "$debs/partial"
  log "root file system: $(du -sm "$rootfs" | cut -f1) MiB in $((SECONDS - t)) s"
}

il_kernel() {
  local kernel
  kernel=$(cd "$rootfs/boot" && vm_newest vmlinuz-*)
  kver=${kernel#vmlinuz-}
  [[ -f $rootfs/boot/initrd.img-$kver ]] || die "no initrd for $kver in the guest (initramfs-tools did not run?)"
  local m mods=$rootfs/usr/lib/modules/$kver
  [[ -d $mods ]] || mods=$rootfs/lib/modules/$kver
  for m in $IL_INITRD_MODULES; do
    # File names spell some modules with '-' (crc32c-intel.ko); modules may be compressed.
    grep -qE "(^|/)${m//_/[-_]}\.ko(\.[a-z]+)?(:|$)" "$mods/modules.dep" "$mods/modules.builtin" 2>/dev/null \
      || die "kernel $kver has no module $m (IL_INITRD_MODULES): its initramfs could not find the root"
  done
  cp "$rootfs/boot/vmlinuz-$kver" "$rootfs/boot/initrd.img-$kver" "$work/"
}

il_mkfs_root() { # DISK START-SECTOR SECTORS
  local blocks=$(($3 * 512 / 4096))
  # No 64bit/metadata_csum_seed/orphan_file: extlinux 6.04 and GRUB 2.06 read that ext4
  # (Debian's own mke2fs.conf avoids the last two for GRUB too).
  mkfs.ext4 -q -F -b 4096 -L daqtune-root -U "$uuid" -O '^64bit,^metadata_csum_seed,^orphan_file' \
    -E offset=$(($2 * 512)) -d "$rootfs" "$1" "$blocks" \
    || die "mkfs.ext4 -d failed"
  rm -rf --one-file-system "$rootfs"
}

il_gpt_esp_root() { # DISK SIZE ESP-START ESP-SECTORS
  truncate -s "$2" "$1"
  root_start=$(($3 + $4))
  printf 'label: gpt\nstart=%s, size=%s, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI system"\nstart=%s, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=root\n' \
    "$3" "$4" "$root_start" \
    | sfdisk --quiet --no-reread --no-tell-kernel "$1" >/dev/null
  # The root partition's size as sfdisk laid it out (GPT's backup at the end, sfdisk's
  # alignment): a file system larger than its partition does not mount.
  root_sectors=$(sfdisk --dump "$1" | awk -v s="$root_start" '$0 ~ "start= *"s"," {sub(/.*size= */, ""); sub(/,.*/, ""); print; exit}')
  [[ $root_sectors =~ ^[0-9]+$ ]] || die "no root partition at sector $root_start in $(sfdisk --dump "$1" | tr '\n' ' ')"
}

# One provisioning boot: QEMU-COMMAND (everything but the share) runs until the guest powers
# off; PHASE-SCRIPT ran as root in the guest and exited 0, or the build fails.
il_provision() { # LOG PHASE-SCRIPT QEMU-COMMAND...
  local logf=$1 script=$2
  shift 2
  local io=$work/io
  rm -rf "$io"; mkdir -p "$io"
  cp "$script" "$io/phase.sh"
  echo provision >"$io/phase"
  echo poweroff >"$io/next"
  timeout --foreground "${DAQTUNE_VM_BOOT_TIMEOUT:-900}" "$@" -no-reboot -monitor none \
    -serial "file:$logf" \
    -virtfs "local,path=$io,mount_tag=io,security_model=none" </dev/null >"$logf.qemu" 2>&1 \
    || die "provisioning boot failed or timed out: see $logf ($(tail -n 2 "$logf.qemu" | tr '\n' ' '))"
  [[ -f $io/phase.rc ]] || die "the provisioning boot did not run its phase: see $logf"
  cp "$io/phase.log" "$logf.phase"
  [[ $(cat "$io/phase.rc") == 0 ]] || die "provisioning failed: $(tail -n 5 "$io/phase.log" | tr '\n' ' ') (log: $logf.phase)"
}

il_finish() { # SUITE PACKAGES...
  local suite=$1
  shift
  cat >"$work/info" <<EOF
kernel=$kver
root_uuid=$uuid
suite=$suite
packages=$*
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
}
