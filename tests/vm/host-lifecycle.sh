#!/usr/bin/env bash
# A host's whole life on a real booted Debian 12 (issue 15, section 3): install the .deb, check,
# apply, reboot, verify, name a foreign override, revert, reboot, verify byte for byte, and the
# MRRS write an emulated NIC ignores. Once through GRUB, once through extlinux; and (issue 25
# item 5) the MTU once more with netplan owning the data port; (item 4) x86 UEFI with Secure
# Boot; (item 3) the DGX Spark shape: arm64, UEFI, grub-efi-arm64, NetworkManager; (issue 45
# item 6) the same NetworkManager steps on x86 (nm), since the arm64 spark guest cannot finish
# under TCG on a small machine.
#
#   tests/vm/host-lifecycle.sh [--variant grub|extlinux|secureboot|spark|nm|ci|all]
#                              [--deb FILE] [--deb-arm64 FILE] [--out DIR] [--keep]
#                              [--boots LIST] [--resume DIR] [--rebuild-image]
#
#   --variant      which variant, or a comma-separated list; ci (the default): grub and
#                  extlinux (with netplan); all: those, secureboot, spark and nm (docs/apply.md
#                  says why); netplan is taken for extlinux, whose guest runs it
#   --deb FILE     the amd64 package to install (default: scripts/build-deb.sh builds it)
#   --deb-arm64 FILE  the arm64 package of the spark variant (default: scripts/build-deb.sh
#                  --arch arm64 builds it)
#   --out DIR      where the run goes (default: a new directory under target/lifecycle/)
#   --keep         keep the run's disks (deleted otherwise; logs and outputs are always kept)
#   --boots LIST   run only these boots of each variant, e.g. `1` (steps 1-2) or `2,3` (grub
#                  has 5: 4 and 5 are its failing trial); with
#                  --resume the later boots continue a kept run (its disk and state)
#   --resume DIR   continue the kept run in DIR (implies --keep)
#   --rebuild-image  rebuild the cached guest image even when its inputs did not change
#
# The boots of a variant (each a fresh qemu start from the disk, after a real guest shutdown):
#   1: steps 1-2  install the .deb, `check --format json` (kept), checksums, `apply --yes`
#   2: steps 3-6a the kernel line is the boot loader's own; check; second apply; foreign
#                 grub.d override (GRUB only); `revert --yes` (extlinux: then the checksums)
#   3: steps 6b-7 (GRUB) /proc/cmdline and checksums as before step 2, `diff` of the
#                 reports; MRRS on the e1000e; T1: a failing trial armed (issue 42)
# The kernel arguments of step 2 boot once through grub's one-time entry daqtune-trial (step 2t
# checks it armed, the default entry untouched); boot 2 is that trial, committed by
# daqtune-trial.service (step 3 checks it). The grub variant then proves a failing trial:
#   4: step T2    the trial boot of `apply --only kernel.cmdline` with a unit that fails when
#                 isolcpus is on the line (required by multi-user.target): the target is not
#                 reached, the trial fails, the drop-in is not written, status and
#                 `check daqtune.artifacts` name the run and why
#   5: step T3    back on the previous default entry; revert byte-identical
# netplan (issue 25 item 5), in the extlinux guest once its own revert is checked (a guest of
# its own cost two more boots and a second install on the same BIOS image); netplan.io renders
# to systemd-networkd:
#   2: steps N0-N2  the site's /etc/netplan/50-data.yaml owns the port (netplan apply), check,
#                   checksums, `apply --only nic.mtu` (daqtune's /etc/netplan/90-daqtune.yaml)
#   3: steps N3-N6  MTU 9000 rendered by netplan at boot (networkctl, live MTU, check nic.mtu);
#                   a later 99-site.yaml setting 1500 is named; revert: /etc byte-identical
# The secureboot variant (tests/vm/lifecycle-image-uefi.sh's disk; OVMF, Secure Boot enforced,
# Microsoft keys; Debian's signed shim, GRUB and kernel): the grub variant's boots, plus
#   1: lockdown from the live kernel, `check platform`, `apply --only pcie.mrrs` refused by
#      lockdown with nothing written; then the full apply (drop-in, update-grub on grub-efi)
#   2, 3: Secure Boot still enforced after each reboot; the revert byte-identical, the ESP too
# The spark variant (tests/vm/lifecycle-image-arm64.sh's Debian 13 arm64 disk; qemu-system-aarch64
# -M virt under TCG, Debian's qemu-efi-aarch64 firmware, grub-efi-arm64; NetworkManager manages
# the e1000e; tests/vm/lifecycle-profile-spark.yaml extends platforms/dgx-spark.yaml):
#   1: steps 0-2  booted through UEFI and GRUB, update-grub under UEFI, NM manages the port;
#                 install the arm64 .deb, check, apply (daqiri-tuning.cfg, daqiri-<port> keyfile)
#   2: steps 3-6a the kernel line is grub.cfg's, check passes with nothing pending, nmcli says
#                 MTU 9000 on daqtune's connection and the port; second apply; revert
#   3: steps 6b, 8 byte-identical /etc, /boot/grub and ESP; a port in someone else's NM
#                 profile (daqiri-tx): no second profile, the plan's `nmcli connection modify`
# The nm variant (tests/vm/lifecycle-image.sh --nm: Debian 12 x86, BIOS, GRUB, network-manager
# with Debian's defaults: an automatic DHCP connection on the e1000e, which QEMU's user network
# leases 10.0.2.15; tests/vm/lifecycle-profile-nm.yaml: the x86 profile with NetworkManager
# persistence and a static address): the spark variant's NetworkManager steps on the x86 guest
# (TCG, as the other x86 variants), plus the leased address (step 9):
#   1: steps 0-2  NM manages the port (its DHCP lease); install, check, apply (keyfile with
#                 method=manual and the profile's address)
#   2: steps 3-6a after the reboot: daqtune's connection active, MTU 9000, the static address;
#                 second apply; revert
#   3: steps 6b, 8, 9  byte-identical /etc and /boot; someone else's NM profile; a port whose
#                 only address is NM's DHCP lease: the keyfile keeps DHCP (method=auto), never
#                 the leased address as static, and the plan says so
# A variant that cannot be prepared (no firmware, no qemu, no mirror) is skipped with its reason
# and the others run; the exit is 125 only when none could.
#
# The guest: q35, -cpu max under TCG, 4 vCPUs in 2 NUMA nodes of 2 and 4 GiB (a 1G page can
# then be reserved at run time on node 1; a 2 GiB node cannot give one after boot), an e1000e behind a
# pcie-root-port of an expander bridge on node 1 (-netdev user,restrict=on: nothing leaves the
# VM), the root disk on NVMe; commands and results go through a 9p share, the console to a file.
# The disk image comes from tests/vm/lifecycle-image.sh (cached in $DAQTUNE_VM_CACHE, default
# target/vm-cache). Per boot limit: $DAQTUNE_VM_BOOT_TIMEOUT seconds (default 900). The
# variants' guests run side by side, $DAQTUNE_VM_JOBS at a time (default 2; each x86 guest is
# one TCG thread and 6 GiB, the spark guest a thread per vCPU and 4 GiB). The spark
# guest: -M virt, $DAQTUNE_VM_ARM_CPU (default cortex-a72; docs/apply.md has the measurement),
# 4 vCPUs, 4 GiB, the e1000e behind a pcie-root-port, the disk on virtio-blk, the same 9p share.
#
# Exit: 0 every assertion passed; 1 an assertion failed or a boot did not complete (the
# failures are listed); 2 usage; 125 the VM cannot be prepared (no qemu, no package mirror...),
# with the reason on a line "host-lifecycle: SKIP: ...".
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export DAQTUNE_VM_CACHE=${DAQTUNE_VM_CACHE:-$repo/target/vm-cache}
boot_timeout=${DAQTUNE_VM_BOOT_TIMEOUT:-900}
max_guests=${DAQTUNE_VM_JOBS:-2}
[[ $max_guests =~ ^[1-9][0-9]*$ ]] || { echo "host-lifecycle: DAQTUNE_VM_JOBS=$max_guests: a number of guests at a time (1 or more) was expected" >&2; exit 2; }

variants=(grub extlinux)
deb=""
deb_arm64=""
arm_cpu=${DAQTUNE_VM_ARM_CPU:-cortex-a72}
out=""
keep=0
boots="1,2,3,4,5"
resume=""
rebuild=()
while (($#)); do
  case "$1" in
    --variant)
      case "$2" in
        ci) variants=(grub extlinux) ;;
        all) variants=(grub extlinux secureboot spark nm) ;;
        *)
          IFS=, read -r -a asked <<<"$2"
          variants=()
          for v in "${asked[@]}"; do
            case $v in grub|extlinux|secureboot|spark|nm) ;; netplan) v=extlinux ;; *) echo "host-lifecycle: --variant takes grub, extlinux, netplan (= extlinux), secureboot, spark, nm (comma-separated), ci or all" >&2; exit 2 ;; esac
            [[ " ${variants[*]} " == *" $v "* ]] || variants+=("$v")
          done ;;
      esac
      shift 2 ;;
    --deb) deb=$(realpath "$2"); shift 2 ;;
    --deb-arm64) deb_arm64=$(realpath "$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --boots) boots=$2; shift 2 ;;
    --resume) resume=$(realpath "$2"); keep=1; shift 2 ;;
    --rebuild-image) rebuild=(--rebuild); shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/!p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "host-lifecycle: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $boots =~ ^[1-5](,[1-5])*$ ]] || { echo "host-lifecycle: --boots takes a list of 1, 2, 3 (and 4, 5 for grub)" >&2; exit 2; }

VM_NAME=host-lifecycle VM_TAG=lifecycle
# shellcheck source=tests/vm/lib.sh
. "$here/lib.sh"

vm_require qemu-img:qemu-utils timeout:coreutils
declare -A images=() skipped=()
# The firmware of the secureboot variant: Debian's ovmf, Secure Boot code and Microsoft's keys.
OVMF_CODE=/usr/share/OVMF/OVMF_CODE_4M.secboot.fd
OVMF_VARS=/usr/share/OVMF/OVMF_VARS_4M.ms.fd
# The firmware of the spark variant: Debian's qemu-efi-aarch64 (AAVMF), no Secure Boot keys.
AAVMF_CODE=/usr/share/AAVMF/AAVMF_CODE.fd
AAVMF_VARS=/usr/share/AAVMF/AAVMF_VARS.fd
# What each variant needs on this machine before anything is built: a skip names what is missing.
x86=0
arm=0
for v in "${variants[@]}"; do
  case $v in
    spark)
      if ! command -v qemu-system-aarch64 >/dev/null 2>&1; then
        skipped[$v]="qemu-system-aarch64 not found (apt-get install qemu-system-arm)"
      elif ! [[ -f $AAVMF_CODE && -f $AAVMF_VARS ]]; then
        skipped[$v]="no $AAVMF_CODE or $AAVMF_VARS (apt-get install qemu-efi-aarch64)"
      elif [[ -z $deb_arm64 ]] && ! why=$("$repo/scripts/build-deb.sh" --arch arm64 --with none --check 2>&1); then
        # build-deb.sh's own preflight (cross linker, its C library, qemu-user, the Rust
        # target): what it could not find is the skip's reason.
        skipped[$v]="cannot build the arm64 .deb: ${why#build-deb: }"
      else
        arm=1
      fi ;;
    *)
      if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
        skipped[$v]="qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
      elif [[ $v == secureboot ]] && ! [[ -f $OVMF_CODE && -f $OVMF_VARS ]]; then
        skipped[$v]="no $OVMF_CODE or $OVMF_VARS (apt-get install ovmf)"
      else
        x86=1
      fi ;;
  esac
done

# --- the packages -----------------------------------------------------------------------------
build_deb() { # ARCH: prints the package scripts/build-deb.sh made
  local t=$SECONDS built
  say "building the $1 .deb (scripts/build-deb.sh --arch $1, profile ${DAQTUNE_DEB_PROFILE:-release})" >&2
  mapfile -t built < <("$repo/scripts/build-deb.sh" --arch "$1" --with none --out "$repo/target/debian")
  [[ -f ${built[0]:-} ]] || { echo "host-lifecycle: FAILED: scripts/build-deb.sh --arch $1 made no package" >&2; exit 1; }
  say "package $(basename "${built[0]}") ($(du -k "${built[0]}" | cut -f1) KiB) in $((SECONDS - t)) s" >&2
  echo "${built[0]}"
}
# (build_deb's exit ends only its command substitution: an empty result is the failure.)
if ((x86)) && [[ -z $deb ]]; then deb=$(build_deb amd64) && [[ -n $deb ]] || exit 1; fi
if ((arm)) && [[ -z $deb_arm64 ]]; then deb_arm64=$(build_deb arm64) && [[ -n $deb_arm64 ]] || exit 1; fi
[[ -z $deb || -f $deb ]] || { echo "host-lifecycle: --deb $deb: no such file" >&2; exit 2; }
[[ -z $deb_arm64 || -f $deb_arm64 ]] || { echo "host-lifecycle: --deb-arm64 $deb_arm64: no such file" >&2; exit 2; }

# --- the images -------------------------------------------------------------------------------
# The BIOS disk (grub, extlinux with netplan), the UEFI disk (secureboot) and the arm64 disk
# (spark), each built once when a variant needs it. A variant whose image cannot be prepared
# is skipped with its reason.
image_for() { # VARIANT: sets $img (the image directory), or returns 1 after recording a skip
  local v=$1 script=lifecycle-image.sh t rc args=()
  [[ $v == secureboot ]] && script=lifecycle-image-uefi.sh
  [[ $v == spark ]] && script=lifecycle-image-arm64.sh
  if [[ $v == nm ]]; then args=(--nm); fi
  local key="$script${args[*]:+ ${args[*]}}"
  if [[ -z ${images[$key]:-} ]]; then
    t=$SECONDS
    say "guest image (tests/vm/$key, cache $DAQTUNE_VM_CACHE)"
    set +e
    images[$key]=$("$here/$script" "${rebuild[@]}" "${args[@]}")
    rc=$?
    set -e
    case $rc in
      0) say "image ${images[$key]} ready in $((SECONDS - t)) s ($(sed -n 's/^kernel=//p' "${images[$key]}/info"))" ;;
      125)
        # The image script's own "NAME: SKIP: reason" line (any script name: the arm64 one has
        # digits in it); never an empty reason.
        local why
        why=$(printf '%s\n' "${images[$key]}" | sed -n 's/^[A-Za-z0-9_.-]*: SKIP: //p' | head -n 1)
        images[$key]="SKIP: ${why:-tests/vm/$script exited 125 (skip) and printed no reason}" ;;
      *) echo "host-lifecycle: FAILED: the guest image ($script) could not be built (exit $rc)"; exit 1 ;;
    esac
  fi
  img=${images[$key]}
  if [[ $img == SKIP:* ]]; then
    skipped[$v]=${img#SKIP: }
    return 1
  fi
}
# --- the run directory ------------------------------------------------------------------------
if [[ -n $resume ]]; then
  out=$resume
elif [[ -z $out ]]; then
  mkdir -p "$repo/target/lifecycle"
  out=$(mktemp -d "$repo/target/lifecycle/run.XXXXXX")
fi
mkdir -p "$out"
say "run directory $out"

boot() { # VARIANT N: one boot of the guest from its disk; 0 when the guest ran its phase
  local v=$1 n=$2 dir=$out/$1
  local io=$dir/io
  rm -f "$io/phase.rc" "$io/phase.log"
  echo "$v-$n" >"$io/phase"
  echo poweroff >"$io/next"
  local tb=$SECONDS
  local machine=q35 fw=() qrc vm_qemu
  if [[ $v == spark ]]; then
    set +e
    vm_qemu_spark "$arm_cpu" "$AAVMF_CODE" "$dir/AAVMF_VARS.fd" "$dir/disk.qcow2" "$io"
    timeout --foreground "$boot_timeout" "${vm_qemu[@]}" \
      -serial "file:$dir/console-$n.log" </dev/null >"$dir/qemu-$n.log" 2>&1
    qrc=$?
    set -e
  else
  if [[ $v == secureboot ]]; then
    # SMM on, the code flash secure: OVMF then enforces Secure Boot with the enrolled keys.
    machine=q35,smm=on
    fw=(-global driver=cfi.pflash01,property=secure,value=on
      -drive "if=pflash,format=raw,unit=0,readonly=on,file=$OVMF_CODE"
      -drive "if=pflash,format=raw,unit=1,file=$dir/OVMF_VARS.fd")
  fi
  set +e
  vm_qemu_lifecycle_x86 "$machine" "$dir/disk.qcow2" "$io" 52:54:00:da:00:01 "${fw[@]}"
  timeout --foreground "$boot_timeout" "${vm_qemu[@]}" -no-reboot \
    -serial "file:$dir/console-$n.log" </dev/null >"$dir/qemu-$n.log" 2>&1
  qrc=$?
  set -e
  fi
  local secs=$((SECONDS - tb))
  echo "$v boot$n $secs" >>"$out/timings"
  if [[ $qrc == 124 ]]; then
    say "$v boot $n: TIMEOUT after ${boot_timeout}s (console: $dir/console-$n.log)"
    return 1
  fi
  if [[ ! -f $io/phase.rc ]]; then
    say "$v boot $n: the guest did not run its phase (qemu exit $qrc; console: $dir/console-$n.log)"
    tail -n 5 "$dir/qemu-$n.log" | sed 's/^/    qemu: /'
    tail -n 15 "$dir/console-$n.log" 2>/dev/null | sed 's/^/    console: /'
    return 1
  fi
  cp "$io/phase.log" "$dir/phase-$n.log"
  say "$v boot $n: ${secs}s (qemu start to power-off), phase exit $(cat "$io/phase.rc")"
  return 0
}

report_new() { # VARIANT: the result and timing lines the last boot added
  local dir=$out/$1
  local r=$dir/io/results tm=$dir/io/timings
  local seen_r seen_t
  seen_r=$(cat "$dir/.seen-results" 2>/dev/null || echo 0)
  seen_t=$(cat "$dir/.seen-timings" 2>/dev/null || echo 0)
  if [[ -f $tm ]]; then
    tail -n +"$((seen_t + 1))" "$tm" | while read -r s secs; do say "$1 step $s: ${secs}s"; done
    wc -l <"$tm" >"$dir/.seen-timings"
  fi
  if [[ -f $r ]]; then
    tail -n +"$((seen_r + 1))" "$r" | sed "s/^/    [$1] /"
    wc -l <"$r" >"$dir/.seen-results"
  fi
}

# Each variant's boots, in order; its own guest and disk. 1 when a boot did not complete.
run_variant() { # VARIANT
  local v=$1 n
  local dir=$out/$v
  local last=3
  [[ $v != grub ]] || last=5
  for n in $(seq 1 "$last"); do
    [[ ,$boots, == *,$n,* ]] || continue
    say "$v boot $n: starting (steps $(case $v-$n in spark-1) echo 0-2 ;; spark-2) echo 3-4, 6a ;; spark-3) echo 6b, 8 ;; secureboot-1) echo 1, S1-S2, 2 ;; nm-1) echo 0-2 ;; *-1) echo 1-2 ;; secureboot-2) echo 3-4, S3, 6a ;; secureboot-3) echo 6b, S6 ;; nm-2) echo 3-4, 6a ;; nm-3) echo 6b, 8, 9 ;; grub-2) echo 3-6a ;; grub-3) echo 6b-7, T1 ;; grub-4) echo T2 ;; grub-5) echo T3 ;; extlinux-2) echo 3-4, 6a, N0-N2 ;; extlinux-3) echo N3-N6 ;; *-3) echo 6b-7 ;; esac))"
    if ! boot "$v" "$n"; then
      report_new "$v"
      return 1
    fi
    report_new "$v"
    if [[ $(cat "$dir/io/phase.rc") != 0 ]]; then
      say "$v boot $n: the guest script itself failed: $(tail -n 3 "$dir/phase-$n.log" | tr '\n' ' ')"
      return 1
    fi
  done
}

# The images first (each once, in order), then the variants' guests side by side,
# $max_guests at a time: each guest is one TCG thread (thread=single, above), so two of them fill two cores where
# one left most of the second idle (docs/apply.md has the measurement).
failed_boot=0
ran=()
for v in "${variants[@]}"; do
  dir=$out/$v
  if [[ -n ${skipped[$v]:-} ]] || ! image_for "$v"; then
    say "$v: SKIP: ${skipped[$v]}"
    continue
  fi
  ran+=("$v")
  base=$img/grub.raw
  fmt=raw
  if [[ $v == extlinux ]]; then base=$img/extlinux.qcow2; fmt=qcow2; fi
  if [[ $v == secureboot ]]; then base=$img/uefi.raw; fi
  if [[ $v == spark ]]; then base=$img/arm64.raw; fi
  if [[ ! -f $dir/disk.qcow2 ]]; then
    [[ -z $resume ]] || { echo "host-lifecycle: --resume $out has no $v disk" >&2; exit 2; }
    mkdir -p "$dir/io"
    qemu-img create -q -f qcow2 -b "$base" -F "$fmt" "$dir/disk.qcow2"
    # The variables (Secure Boot keys, boot entries) are the machine's own, kept across boots.
    [[ $v != secureboot ]] || cp "$OVMF_VARS" "$dir/OVMF_VARS.fd"
    [[ $v != spark ]] || cp "$AAVMF_VARS" "$dir/AAVMF_VARS.fd"
  fi
  # The guest side, the package and the profile travel on the share (not in the image).
  cp "$here/lifecycle-guest.sh" "$dir/io/guest.sh"
  printf '#!/bin/sh\nexec bash /run/lifecycle-io/guest.sh "$@"\n' >"$dir/io/phase.sh"
  profile=$here/lifecycle-profile.yaml
  if [[ $v == spark ]]; then
    cp "$deb_arm64" "$dir/io/daqtune.deb"
    profile=$here/lifecycle-profile-spark.yaml
  elif [[ $v == nm ]]; then
    cp "$deb" "$dir/io/daqtune.deb"
    profile=$here/lifecycle-profile-nm.yaml
  else
    cp "$deb" "$dir/io/daqtune.deb"
  fi
  cp "$profile" "$dir/io/profile.yaml"
  # The same profile with pcie.mrrs applicable (step 7; step 1's refusal needs the udev rule).
  sed '/^not_applicable:/,$d' "$profile" >"$dir/io/profile-mrrs.yaml"
done
for v in "${ran[@]}"; do
  while (($(jobs -rp | wc -l) >= max_guests)); do wait -n || true; done
  rm -f "$out/$v/.boot-failed"
  (run_variant "$v" || touch "$out/$v/.boot-failed") &
done
wait
for v in "${ran[@]}"; do
  [[ ! -e $out/$v/.boot-failed ]] || failed_boot=1
done

# --- verdict ----------------------------------------------------------------------------------
npass=0
nfail=0
for v in "${variants[@]}"; do
  r=$out/$v/io/results
  [[ -f $r ]] || continue
  npass=$((npass + $(grep -c '^PASS' "$r" || true)))
  nfail=$((nfail + $(grep -c '^FAIL' "$r" || true)))
done
say "total $((SECONDS - T0)) s; $npass assertions passed, $nfail failed$( ((failed_boot)) && echo ', a boot did not complete')"
for v in "${!skipped[@]}"; do
  echo "host-lifecycle: SKIP: $v: ${skipped[$v]}"
done
if ((nfail)); then
  echo "failed assertions:"
  for v in "${variants[@]}"; do
    [[ -f $out/$v/io/results ]] && grep '^FAIL' "$out/$v/io/results" | sed "s/^/  [$v] /"
  done
fi
# The disks (a few hundred MiB each) go unless --keep; logs, reports and outputs stay.
if ((keep == 0)); then
  rm -f "$out"/*/disk.qcow2 "$out"/*/OVMF_VARS.fd "$out"/*/AAVMF_VARS.fd
fi
echo "host-lifecycle: logs, reports and the guest's outputs in $out"
((nfail == 0 && failed_boot == 0)) || exit 1
# Nothing could be prepared: a skip, not a pass.
((${#ran[@]})) || exit 125
