#!/bin/bash
# Boot Debian's stock kernel under qemu (software emulation) with soft-RoCE (rdma_rxe) and run a
# guest script chrooted into the host's root, shared read-only over 9p.
#
#   tests/vm/rxe-vm.sh [--out DIR] [--timeout SECS] GUEST_SCRIPT [ARG...]
#
# The guest script runs as root inside the VM with the host's root as `/` (read-only), a tmpfs on
# /tmp and /run (so host files under /tmp and /run are not visible to it), and the output directory mounted read-write at /tmp/out (also in $OUT). Its exit
# status is the harness's exit status. Everything it prints goes to the serial console, which the
# harness copies to stdout and to $OUT/console.log.
#
# Needs on the host: apt-get (to fetch linux-image-*-amd64; the package is unpacked, never
# installed), dpkg-deb, busybox (static; apt busybox-static), qemu-system-x86_64 (apt
# qemu-system-x86). The kernel package and initramfs are cached in $DAQTUNE_VM_CACHE
# (default: target/vm-cache in the repository).
#
# Exit codes: the guest's status; 125 = the VM could not be prepared (missing tool or kernel
# package; the reason is printed on a line starting with "rxe-vm: SKIP:"), 124 = timeout.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${DAQTUNE_VM_CACHE:-$repo/target/vm-cache}
out=""
timeout_s=${DAQTUNE_VM_TIMEOUT:-300}
mem=${DAQTUNE_VM_MEM:-1024}
smp=${DAQTUNE_VM_SMP:-2}

while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --timeout) timeout_s=$2; shift 2 ;;
        --) shift; break ;;
        -*) echo "rxe-vm: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || { echo "usage: $0 [--out DIR] [--timeout SECS] GUEST_SCRIPT [ARG...]" >&2; exit 2; }
guest=$1; shift

VM_NAME=rxe-vm
# shellcheck source=tests/vm/lib.sh
. "$here/lib.sh"

vm_require qemu-system-x86_64:qemu-system-x86 busybox:busybox-static dpkg-deb:dpkg apt-get:apt apt-cache:apt
busybox_bin=$(command -v busybox)
# The initramfs has no libc: a dynamically linked busybox cannot run there.
if file -L "$busybox_bin" 2>/dev/null | grep -q dynamically; then
    skip "$busybox_bin is dynamically linked (apt-get install busybox-static)"
fi

mkdir -p "$cache"

# --- kernel: the versioned package that linux-image-amd64 depends on ---------------------------
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -n1)
if [ -z "$kpkg" ]; then
    # Fall back to a kernel package already in the cache (offline runs).
    kdeb=$(vm_newest "$cache"/linux-image-*-amd64_*.deb)
    [ -n "$kdeb" ] || skip "cannot resolve linux-image-amd64 (apt-cache depends failed; run apt-get update) and no cached kernel package in $cache"
else
    kdeb=$(vm_newest "$cache"/"$kpkg"_*.deb)
    if [ -z "$kdeb" ]; then
        log "downloading $kpkg"
        (cd "$cache" && apt-get download "$kpkg" >/dev/null 2>"$cache/apt-download.log") \
            || skip "apt-get download $kpkg failed: $(tail -n1 "$cache/apt-download.log")"
        kdeb=$(vm_newest "$cache"/"$kpkg"_*.deb)
    fi
fi
kname=$(basename "$kdeb" .deb)
kroot="$cache/$kname"
if [ ! -d "$kroot/boot" ]; then
    # Unique temporaries: two harness runs may share the cache.
    ktmp="$kroot.tmp.$$"
    rm -rf "$ktmp"
    dpkg-deb -x "$kdeb" "$ktmp" || skip "dpkg-deb -x $kdeb failed"
    mv -T "$ktmp" "$kroot" 2>/dev/null || rm -rf "$ktmp"
fi
vmlinuzes=("$kroot"/boot/vmlinuz-*)
vmlinuz=${vmlinuzes[0]}
kver=${vmlinuz##*/vmlinuz-}
moddir="$kroot/lib/modules/$kver"
[ -d "$moddir" ] || skip "no modules in $kdeb"

# --- initramfs: busybox + the modules, in dependency order --------------------------------------
# crc32_pclmul: rxe computes an ICRC per packet; the table-driven crc32_generic is slow under TCG.
wanted="virtio_pci 9pnet_virtio 9p veth ib_core ib_uverbs udp_tunnel ip6_udp_tunnel crc32_generic crc32_pclmul rdma_rxe"
initrd="$cache/initrd-$kver.cpio"
if [ ! -s "$initrd" ] || [ "$0" -nt "$initrd" ]; then
    log "building initramfs for $kver"
    declare -A modpath=()
    while IFS= read -r f; do
        n=$(basename "$f"); n=${n%%.ko*}; n=${n//-/_}
        modpath[$n]=$f
    done < <(find "$moddir/kernel" -name '*.ko*')
    order=()
    declare -A seen=()
    add_mod() {
        local m=${1//-/_}
        [ -n "${seen[$m]:-}" ] && return 0
        seen[$m]=1
        local f=${modpath[$m]:-}
        [ -n "$f" ] || { log "module $m not in $kname (built in?)"; return 0; }
        local deps
        # The modinfo section is NUL-separated key=value strings; no kmod needed.
        deps=$(case "$f" in
            *.ko.xz) xz -dc "$f" ;; *.ko.zst) zstd -dc "$f" ;; *.ko.gz) gzip -dc "$f" ;; *) cat "$f" ;;
        esac | tr '\0' '\n' | sed -n 's/^depends=//p' | head -n1)
        local d
        for d in ${deps//,/ }; do add_mod "$d"; done
        order+=("$m")
    }
    for m in $wanted; do add_mod "$m"; done

    stage=$(mktemp -d)
    trap 'rm -rf "$stage"' EXIT
    mkdir -p "$stage"/{bin,dev,proc,sys,host,out,mod}
    cp "$busybox_bin" "$stage/bin/busybox"
    ln -s busybox "$stage/bin/sh"
    i=0
    for m in "${order[@]}"; do
        f=${modpath[$m]:-}
        [ -n "$f" ] || continue
        dst=$(printf '%s/mod/%02d-%s.ko' "$stage" "$i" "$m")
        case "$f" in
            *.ko.xz) xz -dc "$f" >"$dst" ;; *.ko.zst) zstd -dc "$f" >"$dst" ;;
            *.ko.gz) gzip -dc "$f" >"$dst" ;; *) cp "$f" "$dst" ;;
        esac
        i=$((i + 1))
    done
    cat >"$stage/init" <<'EOF'
#!/bin/sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in /mod/*.ko; do
    insmod "$m" || echo "rxe-vm-init: insmod $m failed"
done
fail() { echo "rxe-vm-init: $*"; echo o >/proc/sysrq-trigger; sleep 5; poweroff -f; }
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,ro,cache=loose hostroot /host || fail "mount hostroot failed"
mount -t proc proc /host/proc
mount -t sysfs sysfs /host/sys
mount -t devtmpfs devtmpfs /host/dev
mount -t tmpfs tmpfs /host/tmp
mount -t tmpfs tmpfs /host/run
mkdir -p /host/tmp/out /host/dev/shm /host/dev/pts
mount -t tmpfs tmpfs /host/dev/shm
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /host/tmp/out || fail "mount out failed"
echo "rxe-vm-init: up $(cut -d' ' -f1 /proc/uptime)s, kernel $(uname -r)"
chroot /host /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/tmp OUT=/tmp/out /bin/sh -c 'sh /tmp/out/guest.sh $(cat /tmp/out/args); echo $? > /tmp/out/rc'
sync
echo "rxe-vm-init: guest finished rc=$(cat /host/tmp/out/rc 2>/dev/null)"
umount /host/tmp/out
echo o >/proc/sysrq-trigger
sleep 5
poweroff -f
EOF
    chmod +x "$stage/init"
    (cd "$stage" && find . | "$busybox_bin" cpio -o -H newc >"$initrd.tmp.$$" 2>/dev/null)
    mv "$initrd.tmp.$$" "$initrd"
    rm -rf "$stage"
    trap - EXIT
fi

# --- run ---------------------------------------------------------------------------------------
if [ -z "$out" ]; then
    out=$(mktemp -d /tmp/rxe-vm.XXXXXX)
fi
mkdir -p "$out"
rm -f "$out/rc"
cp "$guest" "$out/guest.sh"
printf '%s ' "$@" >"$out/args"
log "booting $kver (mem ${mem}M, ${smp} vCPU, one TCG thread), output in $out"

vm_qemu_rxe "$smp" "$mem" "$vmlinuz" "$initrd" "$out"
set +e
timeout --foreground "$timeout_s" "${vm_qemu[@]}" </dev/null 2>&1 | tee "$out/console.log"
# `tee` succeeds; the status that matters is qemu's (or timeout's).
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" = 124 ]; then
    log "timeout after ${timeout_s}s"
    exit 124
fi
if [ ! -s "$out/rc" ]; then
    log "guest did not report a status (qemu rc=$rc); see $out/console.log"
    exit 1
fi
exit "$(cat "$out/rc")"
