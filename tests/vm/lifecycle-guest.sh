#!/bin/bash
# Guest side of tests/vm/host-lifecycle.sh. Runs as root inside the Debian guest, from the 9p
# share the harness mounts at /run/lifecycle-io, once per boot:
#
#   lifecycle-guest.sh PHASE      PHASE: grub-1..5 extlinux-1..3 (netplan in 2 and 3)
#                                        secureboot-1..3 spark-1..3 nm-1..3
#                                        fleet-grub-1a..3, T1..T3 fleet-extlinux-1a..4 (below)
#
# Each phase runs some of the issue's steps and writes, on the share:
#   results         one line per assertion: "PASS|FAIL <step> <what>: <detail>"
#   timings         "<step> <seconds>" per step
#   state/          what later boots compare against (step 1's report and /proc/cmdline, the
#                   checksums of /etc and the boot configuration), and every command's output
#   next            poweroff or reboot: what the agent does when the phase ends
# An assertion that fails is recorded and the phase goes on (the later steps still say what
# they can); the harness fails the test when any FAIL line exists.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LC_ALL=C.UTF-8
io=/run/lifecycle-io
phase=${1:?phase}
st=$io/state
mkdir -p "$st"
P=/etc/daqtune/lifecycle-vm.yaml
# pcie.mrrs applicable: step 7 and step 1's refusal (the main profile declares it n/a: QEMU
# ignores the write, so every full apply would fail on it).
P7=/etc/daqtune/lifecycle-vm-mrrs.yaml
# The fleet run only: the profile the role gives fleet-a for the rolling gate (the lifecycle
# profile that also requires an NVIDIA driver), and the units the role enables on this guest.
PG=/etc/daqtune/lifecycle-vm-gpu.yaml
ROLE_UNITS=$(cat "$io/role-units" 2>/dev/null)
DATA_PORT=ens1
E1000E_ID=8086:10d3
# The profile's two pools: one 1G page (mounted at /mnt/huge) and 64 2M pages (/mnt/huge-2M).
HP_KB=1048576
HP_COUNT=1
HP2_KB=2048
HP2_COUNT=64
MOUNT2_UNIT='mnt-huge\x2d2M.mount'
# The kernel arguments the profile asks for (one word each; isolcpus may carry flags).
TWO_POOLS=1
# nohz_full only where the profile asks for it (the Spark variant's; tests/vm/lifecycle-profile.yaml
# says why the x86 guests' does not).
KARGS="isolcpus=3 rcu_nocbs=3 irqaffinity=0-2 hugepagesz=1G hugepages=$HP_COUNT default_hugepagesz=1G hugepagesz=2M hugepages=$HP2_COUNT"

# --- recording -------------------------------------------------------------------------------
cur=setup
t_cur=$(cut -d' ' -f1 /proc/uptime)
step() { # ID TITLE: ends the current step's timing, starts the next
    end_step
    cur=$1
    t_cur=$(cut -d' ' -f1 /proc/uptime)
    echo "== step $cur: $2 (uptime ${t_cur}s)"
}
end_step() {
    local now
    now=$(cut -d' ' -f1 /proc/uptime)
    [ "$cur" = setup ] || echo "$cur $(awk -v a="$t_cur" -v b="$now" 'BEGIN {printf "%.1f", b - a}')" >>"$io/timings"
}
pass() { echo "PASS $cur $1${2:+: $2}" | tee -a "$io/results"; }
fail() { echo "FAIL $cur $1${2:+: $2}" | tee -a "$io/results"; }
info() { echo "INFO $cur $*" | tee -a "$io/results"; }
expect() { # WHAT COMMAND...: PASS when the command succeeds
    local what=$1
    shift
    if "$@" >/dev/null 2>&1; then pass "$what"; else fail "$what" "\`$*\` failed"; fi
}
expect_eq() { # WHAT GOT WANT
    if [ "$2" = "$3" ]; then pass "$1" "$2"; else fail "$1" "got '$2', want '$3'"; fi
}
# Run a command, keep its output in state/NAME.txt and its exit code in $rc.
run() { # NAME COMMAND...
    local name=$1
    shift
    local t0 t1
    t0=$(cut -d' ' -f1 /proc/uptime)
    echo "\$ $*" >"$st/$name.txt"
    "$@" >>"$st/$name.txt" 2>&1
    rc=$?
    t1=$(cut -d' ' -f1 /proc/uptime)
    echo "[exit $rc]" >>"$st/$name.txt"
    echo "   $* -> exit $rc in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s (output: state/$name.txt)"
}
# shellcheck disable=SC2317 # called through run and the phases, which shellcheck cannot follow
dq() { daqtune --profile "$P" "$@"; }
# "<run id> <state>" of every journal run.
journal_runs() {
    find /var/lib/daqtune/journal -name journal.json -exec jq -r '"\(.id) \(.state)"' {} + 2>/dev/null
}

# Status(es) of a check in a JSON report: "pass", or "pass,warn" when subjects differ.
statuses() { # REPORT ID
    jq -r --arg id "$2" '[.checks[] | select(.id == $id) | .status] | unique | join(",")' "$1"
}
expect_status() { # REPORT ID WANT
    local got
    got=$(statuses "$1" "$2")
    if [ "$got" = "$3" ]; then
        pass "$2 is $3"
    else
        fail "$2 is $3" "got '${got:-absent}': $(jq -r --arg id "$2" '[.checks[] | select(.id == $id) | "\(.subject): \(.status): \(.message)"] | join(" | ")' "$1")"
    fi
}

# Wait until the boot transaction is over (every unit started by the boot has finished), so
# that "no daqtune unit failed" speaks about a finished boot. The agent's own job stays.
wait_settled() {
    local _
    for _ in $(seq 1 300); do
        if ! systemctl list-jobs --no-legend 2>/dev/null | grep -v lifecycle-agent | grep -q .; then
            return 0
        fi
        sleep 1
    done
    info "boot jobs still running after 300 s: $(systemctl list-jobs --no-legend | tr '\n' ';')"
}

# --- the host's state ------------------------------------------------------------------------
# Checksums of the trees daqtune may write: every file's content, every entry's type, mode,
# owner and symlink target. The exclusions are what the OS itself rewrites between boots.
SUM_EXCLUDES=(
    # Nothing under /etc or /boot changes on a plain boot of this image (systemd's random
    # seed lives in /var; docs/apply.md, "What the VM proves"). The one exclusion is of the
    # fleet run: the content of the Ansible role's local facts, a report the role rewrites on
    # every run (its entry line, with mode and owner, stays in).
    '^[0-9a-f]{64}  /etc/ansible/facts.d/daqtune.fact$'
)
sums() { # OUT DIR...
    local out=$1
    shift
    {
        find "$@" -xdev -printf '%y %m %U:%G %p -> %l\n' 2>/dev/null | LC_ALL=C sort
        find "$@" -xdev -type f -print0 2>/dev/null | LC_ALL=C sort -z | xargs -0 -r sha256sum
    } >"$out.all"
    if ((${#SUM_EXCLUDES[@]})); then
        grep -v -E "$(IFS='|'; echo "${SUM_EXCLUDES[*]}")" "$out.all" >"$out"
    else
        cp "$out.all" "$out"
    fi
    rm -f "$out.all"
    # Every comparison of two checksum files is `cmp`: two empty files would be equal. A tree
    # whose own entry is missing was not read, and that is a failure, not a match.
    local d
    for d in "$@"; do
        grep -q "^d [0-7]* [0-9]*:[0-9]* $d -> \$" "$out" || fail "checksums of $d read (${out##*/})" "find listed nothing for it"
    done
}
# The trees the revert must restore: /etc and the boot loader's configuration.
boot_dirs=(/etc /boot/extlinux)
[ -d /boot/grub ] && boot_dirs=(/etc /boot/grub)
# The Secure Boot disk: the EFI system partition too (shim, GRUB and its grub.cfg stub).
mountpoint -q /boot/efi 2>/dev/null && boot_dirs+=(/boot/efi)

# Words of the running kernel's command line, without what the boot loader adds by itself
# (BOOT_IMAGE=, and initrd= from syslinux).
cmdline_words() { tr ' ' '\n' </proc/cmdline | grep -v -e '^BOOT_IMAGE=' -e '^initrd=' -e '^$'; }

# The arguments of the default entry of the guest's own /boot/grub/grub.cfg (written by its
# update-grub): GRUB_DEFAULT=0 in this image, so the first menuentry's `linux` line.
grub_default_args() {
    awk '/^menuentry /{n++} n==1 && $1=="linux" {for (i=3; i<=NF; i++) print $i; exit}' /boot/grub/grub.cfg
}
# The APPEND words of the DEFAULT label of extlinux.conf.
extlinux_default_args() {
    awk 'toupper($1)=="DEFAULT" && !d {d=$2}
         toupper($1)=="LABEL" {l=$2}
         toupper($1)=="APPEND" && l==d {for (i=2; i<=NF; i++) print $i; exit}' /boot/extlinux/extlinux.conf
}

# The data port: the e1000e's network interface (and the PCI function under it).
e1000e_bdf() {
    local d
    for d in /sys/bus/pci/devices/*; do
        [ "$(cat "$d/vendor"):$(cat "$d/device")" = "0x${E1000E_ID%:*}:0x${E1000E_ID#*:}" ] && { basename "$d"; return; }
    done
}
# PCIe Device Control, read from config space through sysfs (no setpci in the guest).
cfg_u8() { od -An -tu1 -j "$2" -N1 "/sys/bus/pci/devices/$1/config" | tr -d ' \n'; }
pcie_cap() {
    local p id n=0
    p=$(cfg_u8 "$1" 52)
    while [ "${p:-0}" -ne 0 ] && [ $n -lt 48 ]; do
        id=$(cfg_u8 "$1" "$p")
        [ "$id" -eq 16 ] && { echo "$p"; return; }
        p=$(cfg_u8 "$1" $((p + 1)))
        n=$((n + 1))
    done
}
devctl() { local c; c=$(pcie_cap "$1"); echo $(($(cfg_u8 "$1" $((c + 8))) + 256 * $(cfg_u8 "$1" $((c + 9))))); }

# Files daqtune owns now: every file under /etc with its owner mark.
owned_files() { grep -rl --exclude-dir=daqtune 'Written by daqtune' /etc 2>/dev/null | LC_ALL=C sort; }
owned_units() { owned_files | grep -E '^/etc/systemd/system/[^/]+\.(service|mount|timer)$' | sed 's|.*/||'; }

# Each unit daqtune wrote is enabled, ran and did not fail; each binary it runs exists.
expect_units_ok() {
    local u exe any=0
    for u in $(owned_units); do
        any=1
        local en act res
        en=$(systemctl is-enabled "$u" 2>/dev/null)
        act=$(systemctl show -p ActiveState --value "$u")
        res=$(systemctl show -p Result --value "$u")
        if [ "$en" = enabled ] && [ "$res" = success ] && [ "$act" != failed ]; then
            pass "unit $u ran" "enabled, $act, result $res"
        else
            fail "unit $u ran" "is-enabled=$en ActiveState=$act Result=$res; $(journalctl -b -u "$u" --no-pager -q 2>/dev/null | tail -n 3 | tr '\n' ' ')"
        fi
    done
    [ $any = 1 ] || info "no systemd unit written by daqtune"
    for exe in $(owned_files | xargs -r grep -h -o -E '(ExecStart=|RUN\+=")[^ "]+' | sed -E 's/^(ExecStart=|RUN\+=")//; s/^[-@:+!]+//' | sort -u); do
        if [ -x "$exe" ]; then pass "binary of a unit/rule exists" "$exe"; else fail "binary of a unit/rule exists" "$exe is not an executable file"; fi
    done
    local failed
    failed=$(systemctl list-units --failed --no-legend --plain 2>/dev/null | awk '{print $1}' | tr '\n' ' ')
    if [ -z "$failed" ]; then pass "no failed unit after boot"; else fail "no failed unit after boot" "$failed"; fi
}

# --- steps -----------------------------------------------------------------------------------
install_and_baseline() { # VARIANT
    step 1 "install the .deb, check (kept)"
    wait_settled
    write_profiles
    not_installed_refused
    run apt-install apt-get install -y --no-install-recommends "$io/daqtune.deb"
    expect_eq "apt-get install ./daqtune_*.deb" "$rc" 0
    package_installed "$1"
    baseline
}

# The lifecycle profile (and its MRRS twin) under /etc/daqtune, the data port named as this
# guest names it; in the fleet run also the gate's profile the role gives fleet-a.
write_profiles() {
    mkdir -p /etc/daqtune
    sed "s/^  interfaces: \[ens1\]$/  interfaces: [$DATA_PORT]/" "$io/profile.yaml" >"$P"
    sed "s/^  interfaces: \[ens1\]$/  interfaces: [$DATA_PORT]/" "$io/profile-mrrs.yaml" >"$P7"
    [ ! -f "$io/profile-gate.yaml" ] || cp "$io/profile-gate.yaml" "$PG"
}

# What the package put on the host (by apt here, by the role's ansible.builtin.apt in the
# fleet run), and the data port the profile names.
package_installed() { # VARIANT
    expect "/usr/bin/daqtune is executable" test -x /usr/bin/daqtune
    run version daqtune --version
    info "$(head -n 2 "$st/version.txt" | tail -n 1)"
    for f in /usr/share/man/man8/daqtune.8.gz /usr/share/bash-completion/completions/daqtune \
        /usr/share/zsh/vendor-completions/_daqtune /usr/share/fish/vendor_completions.d/daqtune.fish \
        /usr/share/doc/daqtune/copyright; do
        expect "package installed $f" test -s "$f"
    done
    # Installing ran nothing and enabled nothing; in the fleet run the role enabled the units
    # in role-units (daqtune-report.timer on the guest its inventory asks it for).
    local enabled
    enabled=$(systemctl list-unit-files --no-legend 'daqtune*' 2>/dev/null | awk '$2 == "enabled" {print $1}' | tr '\n' ' ')
    if [ -n "$ROLE_UNITS" ]; then
        expect_eq "the package enables no unit; the role enabled $ROLE_UNITS" "$enabled" "$ROLE_UNITS "
    else
        expect_eq "the package enables no unit" "$enabled" ""
    fi
    expect_eq "the package has no maintainer script" "$(ls /var/lib/dpkg/info/daqtune.{preinst,postinst,prerm,postrm} 2>/dev/null)" ""
    local bdf
    bdf=$(e1000e_bdf)
    info "e1000e at ${bdf:-?}, netdev $(ls "/sys/bus/pci/devices/$bdf/net" 2>/dev/null), NUMA node $(cat "/sys/bus/pci/devices/$bdf/numa_node" 2>/dev/null)"
    expect_eq "the e1000e is the profile's data port $DATA_PORT" "$(ls "/sys/bus/pci/devices/$bdf/net" 2>/dev/null)" "$DATA_PORT"
    if [ "$1" = spark ]; then
        # The Spark shape: one node (as GB10's 20 cores), the data cores named in the profile.
        expect_eq "the guest is aarch64" "$(uname -m)" aarch64
        expect_eq "the guest has one NUMA node" "$(find /sys/devices/system/node -maxdepth 1 -name 'node[0-9]*' | wc -l)" 1
    else
        expect_eq "the e1000e sits on NUMA node 1" "$(cat "/sys/bus/pci/devices/$bdf/numa_node" 2>/dev/null)" 1
        expect_eq "the guest has two NUMA nodes" "$(find /sys/devices/system/node -maxdepth 1 -name 'node[0-9]*' | wc -l)" 2
    fi
}

# Step 1's report, kernel line and checksums: what the revert must bring back.
baseline() {
    run check-1-text dq check
    run check-1 dq check --format json --json "$st/report-1.json"
    expect "step 1 report is JSON" jq -e .checks "$st/report-1.json"
    cp /proc/cmdline "$st/cmdline-1"
    info "cmdline before apply: $(cat /proc/cmdline)"
    # The baseline of step 6: before the first apply.
    sums "$st/sums-before" "${boot_dirs[@]}"
    cp /etc/machine-id "$st/machine-id"
}

# Before the package is installed: a daqtune run from a build directory must not write a unit
# or rule that calls a binary that is not there (issue 15, section 1). The MRRS udev rule runs
# daqtune; the e1000e is the profile's data port.
not_installed_refused() {
    local x
    x=$(mktemp -d)
    dpkg-deb -x "$io/daqtune.deb" "$x"
    sums "$st/sums-0a" /etc
    run apply-uninstalled "$x/usr/bin/daqtune" --profile "$P7" apply --yes --only pcie.mrrs
    if [ "$rc" -eq 2 ] && grep -qE -- '--exe|install' "$st/apply-uninstalled.txt"; then
        pass "apply with no daqtune installed refuses the udev rule (exit 2, says how to install or --exe)"
    else
        fail "apply with no daqtune installed refuses the udev rule (exit 2, says how to install or --exe)" "exit $rc: $(grep -v '^\$' "$st/apply-uninstalled.txt" | head -n 6 | tr '\n' ' ')"
    fi
    run apply-bad-exe "$x/usr/bin/daqtune" --profile "$P7" apply --yes --only pcie.mrrs --exe /nonexistent/daqtune
    expect_eq "apply --exe pointing at a missing file is refused (exit 2)" "$rc" 2
    sums "$st/sums-0b" /etc
    if cmp -s "$st/sums-0a" "$st/sums-0b"; then pass "the refused applies changed nothing under /etc"; else fail "the refused applies changed nothing under /etc" "$(diff "$st/sums-0a" "$st/sums-0b" | grep '^[<>]' | head -n 6 | tr '\n' ' ')"; fi
    # What they may have journaled (nothing, when refused) is reverted so step 2 starts clean.
    "$x/usr/bin/daqtune" --profile "$P7" revert --yes >/dev/null 2>&1
    rm -rf "$x"
}

do_apply() { # [VARIANT]
    step 2 "apply --yes"
    run plan-2 dq plan
    run apply-2 dq apply --yes
    expect_eq "apply exits 0" "$rc" 0
    applied_now "${1:-}"
}

# A pool right after apply: all its pages now, or, where the kernel found no free contiguous
# memory for all of them at run time (1G pages on a fragmented node: not up to the test),
# fewer, and `check` says the pool waits for the boot reservation apply wrote (docs/apply.md,
# "A pool the kernel fills only in part").
pool_now() { # SIZE KB COUNT
    local now st
    now=$(cat "/sys/kernel/mm/hugepages/hugepages-$2kB/nr_hugepages" 2>/dev/null)
    if [ "$now" = "$3" ]; then
        pass "$1 pages reserved now: $now"
        return
    fi
    st=$(dq check hugepages --format json 2>/dev/null |
        jq -r --arg s "$1 pages" '[.checks[] | select(.id == "hugepages" and .subject == $s) | .status] | join(",")')
    expect_eq "$1 pages reserved now, or short ($now of $3: no contiguous memory at run time) and pending-reboot" "$st" pending-reboot
}

# What an apply leaves right away (the CLI's, or the role's with daqtune_reboot=false).
applied_now() { # [VARIANT]
    run journal-2 find /var/lib/daqtune/journal -name journal.json
    local runs
    runs=$(journal_runs | awk '$2 != "reverted"' | wc -l)
    expect_eq "apply journaled one run" "$runs" 1
    # Runtime effects, right away.
    expect_eq "MTU 9000 on $DATA_PORT now" "$(cat "/sys/class/net/$DATA_PORT/mtu" 2>/dev/null)" 9000
    pool_now 1G "$HP_KB" "$HP_COUNT"
    [ "$TWO_POOLS" = 0 ] || pool_now 2M "$HP2_KB" "$HP2_COUNT"
    expect_eq "net.core.rmem_max now" "$(cat /proc/sys/net/core/rmem_max)" 268435456
    expect_eq "net.core.netdev_max_backlog now" "$(cat /proc/sys/net/core/netdev_max_backlog)" 250000
    # The mounts are brought now (mount(2)), not only by their units at the next boot.
    expect_eq "hugetlbfs mounted at /mnt/huge now" "$(findmnt -n -o FSTYPE /mnt/huge)" hugetlbfs
    [ "$TWO_POOLS" = 0 ] || expect "hugetlbfs of 2M pages mounted at /mnt/huge-2M now" sh -c "findmnt -n -o FSTYPE,OPTIONS /mnt/huge-2M | grep -q '^hugetlbfs .*pagesize=2M'"
    # Persistent files.
    run owned-2 owned_files
    info "files written by daqtune: $(owned_files | tr '\n' ' ')"
    expect "hugetlbfs mount unit written" test -f /etc/systemd/system/mnt-huge.mount
    expect "mount unit enabled (local-fs.target.wants)" test -L /etc/systemd/system/local-fs.target.wants/mnt-huge.mount
    if [ "$TWO_POOLS" = 1 ]; then
        expect "2M pool's mount unit written" test -f "/etc/systemd/system/$MOUNT2_UNIT"
        expect "2M pool's mount unit enabled" test -L "/etc/systemd/system/local-fs.target.wants/$MOUNT2_UNIT"
    fi
    expect "sysctl drop-in written" test -f /etc/sysctl.d/90-daqtune.conf
    if [ "${1:-}" = spark ] || [ "${1:-}" = nm ]; then
        spark_applied "$1"
    else
        expect "MTU .link file for $DATA_PORT written" sh -c "grep -l 'MTUBytes=9000' /etc/systemd/network/*daqtune*.link"
    fi
}

expect_kernel_args_in() { # WHAT FILE-WITH-ONE-WORD-PER-LINE
    local w missing=""
    for w in $KARGS; do
        grep -qxF -- "$w" "$2" || missing="$missing $w"
    done
    # isolcpus may carry flags (managed_irq,domain,3): accept any isolcpus= ending in 3.
    if [ -n "$missing" ] && echo "$missing" | grep -q isolcpus && grep -qE '^isolcpus=([a-z_]+,)*3$' "$2"; then
        missing=${missing/ isolcpus=3/}
    fi
    if [ -z "$missing" ]; then pass "$1 carries the isolation and hugepage arguments"; else fail "$1 carries the isolation and hugepage arguments" "missing:$missing ($(tr '\n' ' ' <"$2"))"; fi
}

verify_after_reboot() { # VARIANT
    step 3 "reboot: the kernel line comes from the boot loader's own configuration"
    wait_settled
    cmdline_words >"$st/cmdline-3.words"
    info "cmdline after reboot: $(cat /proc/cmdline)"
    if [ "$1" != extlinux ]; then
        expect "booted through GRUB (BOOT_IMAGE= on the line)" grep -q '^BOOT_IMAGE=' /proc/cmdline
        [ ! -f "$TRIAL" ] || trial_committed
        grub_default_args >"$st/grub-default.words"
        if cmp -s "$st/grub-default.words" "$st/cmdline-3.words"; then
            pass "/proc/cmdline = default entry of /boot/grub/grub.cfg (guest's update-grub)"
        else
            fail "/proc/cmdline = default entry of /boot/grub/grub.cfg (guest's update-grub)" "grub.cfg: $(tr '\n' ' ' <"$st/grub-default.words"); running: $(tr '\n' ' ' <"$st/cmdline-3.words")"
        fi
    else
        extlinux_default_args >"$st/extlinux-default.words"
        if cmp -s "$st/extlinux-default.words" "$st/cmdline-3.words"; then
            pass "/proc/cmdline = APPEND of extlinux.conf's DEFAULT label"
        else
            fail "/proc/cmdline = APPEND of extlinux.conf's DEFAULT label" "extlinux.conf: $(tr '\n' ' ' <"$st/extlinux-default.words"); running: $(tr '\n' ' ' <"$st/cmdline-3.words")"
        fi
    fi
    expect_kernel_args_in "/proc/cmdline" "$st/cmdline-3.words"

    step 4 "check after the reboot; a second apply changes nothing"
    run check-4-text dq check
    run check-4 dq check --format json --json "$st/report-4.json"
    local r=$st/report-4.json
    expect_status "$r" kernel.cmdline pass
    expect_status "$r" hugepages pass
    expect_status "$r" nic.mtu pass
    expect_status "$r" net.sysctl pass
    # The artifacts check of issue 15 (each unit/rule present, enabled, its binary there, its
    # last result): whatever its id, it exists and passes.
    local art
    art=$(jq -r '[.checks[] | select(.id | test("artifact")) | .id] | unique | join(",")' "$r")
    if [ -z "$art" ]; then
        fail "artifacts check passes" "the report has no check about daqtune's own artifacts (ids: $(jq -r '[.checks[].id] | unique | join(" ")' "$r"))"
    else
        expect_status "$r" "$art" pass
    fi
    local pend
    pend=$(jq -r '[.checks[] | select(.status == "pending-reboot") | "\(.id) \(.subject): \(.message)"] | join(" | ")' "$r")
    expect_eq "nothing is pending-reboot" "$pend" ""
    expect_units_ok
    expect_eq "/sys/devices/system/cpu/isolated" "$(cat /sys/devices/system/cpu/isolated)" 3
    # The kernel's own list: 3 where the line asks for nohz_full, "(null)" where it does not.
    local nohz
    nohz=$(echo " $KARGS " | sed -n 's/.* nohz_full=\([^ ]*\) .*/\1/p')
    expect_eq "/sys/devices/system/cpu/nohz_full" "$(cat /sys/devices/system/cpu/nohz_full)" "${nohz:-(null)}"
    expect_eq "1G pages reserved at boot" "$(cat /sys/kernel/mm/hugepages/hugepages-${HP_KB}kB/nr_hugepages 2>/dev/null)" "$HP_COUNT"
    expect_eq "mnt-huge.mount is active" "$(systemctl is-active mnt-huge.mount)" active
    expect_eq "hugetlbfs mounted at /mnt/huge" "$(findmnt -n -o FSTYPE,OPTIONS /mnt/huge | awk '{print $1}')" hugetlbfs
    if [ "$TWO_POOLS" = 1 ]; then
        expect_eq "2M pages reserved at boot" "$(cat /sys/kernel/mm/hugepages/hugepages-${HP2_KB}kB/nr_hugepages 2>/dev/null)" "$HP2_COUNT"
        expect_eq "$MOUNT2_UNIT is active" "$(systemctl is-active "$MOUNT2_UNIT")" active
        expect "hugetlbfs of 2M pages mounted at /mnt/huge-2M" sh -c "findmnt -n -o FSTYPE,OPTIONS /mnt/huge-2M | grep -q '^hugetlbfs .*pagesize=2M'"
    fi
    expect_eq "MTU 9000 on $DATA_PORT after the reboot" "$(cat "/sys/class/net/$DATA_PORT/mtu" 2>/dev/null)" 9000
    expect_eq "net.core.rmem_max after the reboot" "$(cat /proc/sys/net/core/rmem_max)" 268435456
    case "$1" in spark | nm) spark_nm_after_reboot ;; esac
    # A second apply: nothing to change, no byte written, no journal.
    local jbefore
    jbefore=$(find /var/lib/daqtune/journal -name journal.json | wc -l)
    sums "$st/sums-4a" /etc /boot
    run apply-4 dq apply --yes
    expect_eq "second apply exits 0" "$rc" 0
    sums "$st/sums-4b" /etc /boot
    if cmp -s "$st/sums-4a" "$st/sums-4b"; then pass "second apply changes no file under /etc and /boot"; else fail "second apply changes no file under /etc and /boot" "$(diff "$st/sums-4a" "$st/sums-4b" | grep '^[<>]' | head -n 6 | tr '\n' ' ')"; fi
    expect_eq "second apply writes no journal" "$(find /var/lib/daqtune/journal -name journal.json | wc -l)" "$jbefore"
    if grep -q 'nothing to change' "$st/apply-4.txt"; then pass "second apply says nothing to change"; else fail "second apply says nothing to change" "$(tail -n 5 "$st/apply-4.txt" | tr '\n' ' ')"; fi
}

# --- the trial boot (issue 42 item 3) ----------------------------------------------------------
# On GRUB, apply arms a one-time entry (grub.cfg's `daqtune-trial`, grubenv next_entry) and
# daqtune-trial.service decides it late in that boot: commit (the drop-in, update-grub) or fail
# (the previous default stays). docs/apply.md, "Trial boot".
TRIAL=/var/lib/daqtune/trial.json
trial_state() { jq -r .state "$TRIAL" 2>/dev/null; }
# The words after the kernel image on the `linux` line of grub.cfg's entry daqtune-trial.
trial_entry_args() {
    awk -v q="'" '/^menuentry / {t = index($0, q "daqtune-trial" q) > 0} t && $1 == "linux" {for (i=3; i<=NF; i++) print $i; exit}' /boot/grub/grub.cfg
}
# daqtune's grub drop-ins (files of /etc/default/grub.d with its mark).
our_dropins() { grep -l 'Written by daqtune' /etc/default/grub.d/* 2>/dev/null; }
has_trial_entry() { grep -q "'daqtune-trial'" /boot/grub/grub.cfg; }
grubenv_trials() { grub-editenv /boot/grub/grubenv list 2>/dev/null | grep -c '^next_entry=daqtune-trial$'; }

# Right after an apply on GRUB: the one-time entry is armed and the default is untouched.
trial_armed() { # STEP
    step "$1" "apply armed a trial boot: a one-time entry, the default untouched"
    expect_eq "trial record: pending" "$(trial_state)" pending
    if has_trial_entry; then pass "apply ran update-grub: grub.cfg has the entry daqtune-trial"; else fail "apply ran update-grub: grub.cfg has the entry daqtune-trial" "$(grep -c '^menuentry' /boot/grub/grub.cfg) menuentries, none daqtune-trial"; fi
    trial_entry_args >"$st/trial-entry-$1.words"
    expect_kernel_args_in "the trial entry" "$st/trial-entry-$1.words"
    expect "the trial entry has panic=10 (a panic reboots into the old default)" grep -qx 'panic=10' "$st/trial-entry-$1.words"
    grub_default_args >"$st/grub-default-$1.words"
    if grep -q '^isolcpus=' "$st/grub-default-$1.words"; then fail "the default entry is unchanged until the trial verifies" "$(tr '\n' ' ' <"$st/grub-default-$1.words")"; else pass "the default entry is unchanged until the trial verifies"; fi
    expect_eq "grubenv: next_entry=daqtune-trial (grub-editenv list)" "$(grubenv_trials)" 1
    expect_eq "no daqtune grub drop-in yet" "$(our_dropins)" ""
    expect_eq "daqtune-trial.service is enabled" "$(systemctl is-enabled daqtune-trial.service 2>/dev/null)" enabled
    run "status-$1" dq status
    if grep -q 'trial boot: .* is armed' "$st/status-$1.txt"; then pass "status says the trial is armed"; else fail "status says the trial is armed" "$(grep -i trial "$st/status-$1.txt" | head -n 3 | tr '\n' ' ')"; fi
}

# The boot after a good trial: the trial entry booted, its unit verified and committed.
trial_committed() {
    expect "the trial entry booted (panic=10 on /proc/cmdline)" grep -qx 'panic=10' "$st/cmdline-3.words"
    expect_eq "trial record: committed" "$(trial_state)" committed
    journalctl -b -u daqtune-trial.service --no-pager -q >"$st/trial-unit-3.txt" 2>&1
    if grep -q 'trial: committed' "$st/trial-unit-3.txt"; then pass "daqtune-trial.service said: committed"; else fail "daqtune-trial.service said: committed" "$(tail -n 4 "$st/trial-unit-3.txt" | tr '\n' ' ')"; fi
    expect_eq "daqtune-trial.service succeeded" "$(systemctl show -p Result --value daqtune-trial.service)" success
    if [ -n "$(our_dropins)" ]; then pass "the commit wrote the drop-in" "$(our_dropins)"; else fail "the commit wrote the drop-in" "none in /etc/default/grub.d"; fi
    if has_trial_entry; then fail "the commit removed the trial entry (update-grub)" "still in grub.cfg"; else pass "the commit removed the trial entry (update-grub)"; fi
    expect "the trial's entry script and unit are gone" sh -c '! test -e /etc/grub.d/42_daqtune_trial && ! test -e /etc/systemd/system/daqtune-trial.service && ! test -L /etc/systemd/system/multi-user.target.wants/daqtune-trial.service'
    expect_eq "grubenv holds no next_entry=daqtune-trial" "$(grubenv_trials)" 0
    run status-3t dq status
    if grep -q 'trial boot: .* verified at .* committed to' "$st/status-3t.txt"; then pass "status says the trial committed"; else fail "status says the trial committed" "$(grep -i trial "$st/status-3t.txt" | head -n 3 | tr '\n' ' ')"; fi
    # The rest of step 3 compares the kernel line with the new default entry: the trial
    # entry's own panic=10 aside.
    grep -vx 'panic=10' "$st/cmdline-3.words" >"$st/cmdline-3.cmp"
    mv "$st/cmdline-3.cmp" "$st/cmdline-3.words"
}

# A unit the trial's arguments make fail: required by multi-user.target and ordered before it,
# it runs only when isolcpus is on the kernel line (ConditionKernelCommandLine), so the trial
# boot misses its target while the previous default (no isolcpus) reaches it. Harmless under
# TCG: the boot goes on (no emergency shell, no console needed), only the target is not
# reached; the agent and daqtune-trial.service, wanted by the target and ordered after it,
# still run.
BREAKER=/etc/systemd/system/lifecycle-trial-breaker.service
BREAKER_LINK=/etc/systemd/system/multi-user.target.requires/lifecycle-trial-breaker.service
trial_breaker_arm() {
    step T1 "a failing trial: a unit that fails when isolcpus is on the line; apply --only kernel.cmdline"
    printf '%s\n' '[Unit]' \
        'Description=lifecycle test: fails when isolcpus is on the kernel line (the failing trial of issue 42)' \
        'ConditionKernelCommandLine=isolcpus' 'Before=multi-user.target' '' \
        '[Service]' 'Type=oneshot' 'RemainAfterExit=yes' 'ExecStart=/bin/false' >"$BREAKER"
    mkdir -p "${BREAKER_LINK%/*}"
    ln -sf "$BREAKER" "$BREAKER_LINK"
    systemctl daemon-reload
    # The baseline of this trial's revert: the breaker is part of it.
    sums "$st/sums-T0" "${boot_dirs[@]}"
    cp /proc/cmdline "$st/cmdline-T0"
    run apply-T1 dq apply --yes --only kernel.cmdline
    expect_eq "apply --only kernel.cmdline exits 0" "$rc" 0
    # `--only kernel.cmdline` writes the isolation words alone (issue 42: each setting its own
    # parts of the drop-in; the hugepage reservation is `--only hugepages`).
    KARGS="isolcpus=3 rcu_nocbs=3 irqaffinity=0-2"
    trial_armed T1b
}

# The trial boot: the breaker failed, multi-user.target was not reached, the unit failed the
# trial and put the previous default back in grub.cfg.
trial_failed_boot() {
    step T2 "the failing trial boot: verification fails, the previous default stays"
    wait_settled
    cmdline_words >"$st/cmdline-T2.words"
    info "cmdline of the trial boot: $(cat /proc/cmdline)"
    expect "the trial entry booted (panic=10 on /proc/cmdline)" grep -qx 'panic=10' "$st/cmdline-T2.words"
    expect_eq "the breaker failed" "$(systemctl show -p Result --value lifecycle-trial-breaker.service)" exit-code
    expect_eq "multi-user.target not reached" "$(systemctl is-active multi-user.target)" inactive
    expect_eq "trial record: failed" "$(trial_state)" failed
    local reason
    reason=$(jq -r .reason "$TRIAL" 2>/dev/null)
    info "recorded reason: $reason"
    case $reason in *"multi-user.target was not reached"*) pass "the reason names the target" ;; *) fail "the reason names the target" "$reason" ;; esac
    expect_eq "no daqtune grub drop-in" "$(our_dropins)" ""
    if has_trial_entry; then fail "the trial entry is gone from grub.cfg (update-grub)" "still there"; else pass "the trial entry is gone from grub.cfg (update-grub)"; fi
    grub_default_args >"$st/grub-default-T2.words"
    if grep -q '^isolcpus=' "$st/grub-default-T2.words"; then fail "the default entry has no isolcpus" "$(tr '\n' ' ' <"$st/grub-default-T2.words")"; else pass "the default entry has no isolcpus"; fi
    expect_eq "grubenv holds no next_entry=daqtune-trial" "$(grubenv_trials)" 0
    trial_reports_failure T2
}

# status and check daqtune.artifacts name the run whose trial failed, and why.
trial_reports_failure() { # STEP
    local runid msg
    runid=$(jq -r .run "$TRIAL" 2>/dev/null)
    run "status-$1" dq status
    if grep -q "trial of apply run $runid FAILED at .*multi-user.target was not reached" "$st/status-$1.txt"; then pass "status names run $runid's failed trial and why"; else fail "status names run $runid's failed trial and why" "$(grep -i trial "$st/status-$1.txt" | head -n 3 | tr '\n' ' ')"; fi
    run "check-$1" dq check daqtune.artifacts --format json --json "$st/report-$1.json"
    msg=$(jq -r '[.checks[] | select(.id == "daqtune.artifacts" and .subject == "kernel-argument trial") | "\(.status): \(.message)"] | join(" | ")' "$st/report-$1.json" 2>/dev/null)
    case $msg in "fail: "*"$runid"*"multi-user.target was not reached"*) pass "check daqtune.artifacts fails naming run $runid and why" ;; *) fail "check daqtune.artifacts fails naming run $runid and why" "${msg:-no verdict about the trial}" ;; esac
}

# The boot after the failed trial: the previous default, the failure still reported; revert
# is byte-identical to before the trial's apply.
trial_back_on_default() {
    step T3 "back on the previous default entry; revert byte-identical"
    wait_settled
    info "cmdline: $(cat /proc/cmdline)"
    expect_eq "/proc/cmdline is the one before the trial" "$(cat /proc/cmdline)" "$(cat "$st/cmdline-T0")"
    expect_eq "multi-user.target reached (the breaker's condition is false)" "$(systemctl is-active multi-user.target)" active
    expect_eq "trial record: still failed" "$(trial_state)" failed
    trial_reports_failure T3
    run revert-T3 dq revert --yes
    expect_eq "revert exits 0" "$rc" 0
    expect "the trial's record goes with the run" test ! -e "$TRIAL"
    sums "$st/sums-T3" "${boot_dirs[@]}"
    if cmp -s "$st/sums-T0" "$st/sums-T3"; then
        pass "/etc and /boot/grub byte-identical to before the trial's apply" "$(grep -c . "$st/sums-T0") entries"
    else
        diff "$st/sums-T0" "$st/sums-T3" >"$st/sums-T.diff"
        fail "/etc and /boot/grub byte-identical to before the trial's apply" "$(grep '^[<>]' "$st/sums-T.diff" | head -n 8 | tr '\n' ' ')"
    fi
    rm -f "$BREAKER_LINK" "$BREAKER"
    rmdir "${BREAKER_LINK%/*}" 2>/dev/null
    systemctl daemon-reload
    sums "$st/sums-T4" "${boot_dirs[@]}"
    if cmp -s "$st/sums-before" "$st/sums-T4"; then pass "without the breaker: byte-identical to before step 2"; else fail "without the breaker: byte-identical to before step 2" "$(diff "$st/sums-before" "$st/sums-T4" | grep '^[<>]' | head -n 6 | tr '\n' ' ')"; fi
}

# --- partial reverts (issue 42 deliverable 4), in the fleet guests ------------------------------
# After the full apply (the role's, its reboot included), `revert --only X` for each kind of
# setting that shares a file, a boot or a directory with others, then one reboot (the kinds are
# independent, so one boot proves them all): the host boots with exactly the remaining settings.
#   fleet-a (GRUB)      hugepages         its words of the grub drop-in (the isolation words
#                                         stay) and its hugetlbfs mount units (systemd units)
#                       nic.rings         its keys of the port's .link (the MTU and the rest stay)
#                       net.sysctl        its sysctl.d drop-in (the kernel.* drop-ins stay)
#   fleet-b (extlinux)  kernel.cmdline    its words of extlinux's daqtune entry (the hugepage
#                                         reservation and its mount units stay)
#                       nic.mtu           its key of the .link (the rings stay at the maximum)
#                       vm.stat-interval  its sysctl.d drop-in
# What goes and what stays is worked out from the host as the full apply left it and from the
# interfaces' own documentation (the kernel's hugepage parameters, systemd.link(5)'s keys,
# sysctl.d's key = value lines), not from what daqtune prints. The final full revert (the role's,
# F7 and L5) is then byte-identical with the baseline taken before the first apply.
PR_HUGE='^(hugepagesz|hugepages|default_hugepagesz)='
# The other settings' kernel arguments (docs/apply.md): the governor's and the ACS one.
PR_OTHER_WORDS='^(hugepagesz|hugepages|default_hugepagesz|cpufreq\.default_governor)=|^pci=.*disable_acs_redir'
PR_SYSCTL_DIRS=(/proc/sys/net /proc/sys/vm /proc/sys/kernel)

# Before the package (fleet-*-1a): what the partial reverts must bring back.
partial_baseline() {
    grep -r -s . "${PR_SYSCTL_DIRS[@]}" 2>/dev/null >"$st/sysctl-1a"
    cat "/sys/kernel/mm/hugepages/hugepages-${HP_KB}kB/nr_hugepages" >"$st/hp1g-1a" 2>/dev/null
    cat "/sys/kernel/mm/hugepages/hugepages-${HP2_KB}kB/nr_hugepages" >"$st/hp2m-1a" 2>/dev/null
    cat "/sys/class/net/$DATA_PORT/mtu" >"$st/mtu-1a" 2>/dev/null
    info "partial-revert baseline: 1G pool $(cat "$st/hp1g-1a"), 2M pool $(cat "$st/hp2m-1a"), MTU $(cat "$st/mtu-1a"), $(wc -l <"$st/sysctl-1a") sysctl values"
}
# A sysctl.d file's settings, "key value" (the value's white space squeezed), in file order.
sysctl_file_values() {
    sed -n 's/^[[:space:]]*\([A-Za-z0-9_.-][A-Za-z0-9_./-]*\)[[:space:]]*=[[:space:]]*\(.*\)$/\1 \2/p' "$1" \
        | tr -s ' \t' '  ' | sed -e 's/ *$//' -e 's/^-//'
}
sysctl_now() { tr -s ' \t\n' '   ' <"/proc/sys/$(echo "$1" | tr . /)" 2>/dev/null | sed 's/ *$//'; }
sysctl_at_1a() {
    grep -m1 -F "/proc/sys/$(echo "$1" | tr . /):" "$st/sysctl-1a" | cut -d: -f2- | tr -s ' \t' '  ' | sed 's/ *$//'
}
# Each key of a sysctl.d file: live as WANT (file: the file's value; 1a: before the package).
expect_sysctls() { # WHAT FILE file|1a
    local k v now want bad="" n=0
    while read -r k v; do
        [ -n "$k" ] || continue
        n=$((n + 1))
        now=$(sysctl_now "$k")
        if [ "$3" = file ]; then want=$v; else want=$(sysctl_at_1a "$k"); fi
        [ "$now" = "$want" ] || bad="$bad $k=$now (want $want)"
    done <"$st/${2##*/}.values"
    if [ "$n" -eq 0 ]; then fail "$1" "no setting read from ${2##*/}"; elif [ -z "$bad" ]; then pass "$1" "$n keys"; else fail "$1" "$bad"; fi
}
# The port's .link daqtune wrote, and its settings: every line but comments and blank lines.
pr_link() {
    local f
    for f in /etc/systemd/network/*daqtune*.link; do
        if [ -e "$f" ]; then echo "$f"; break; fi
    done
}
link_settings() { grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$1" | LC_ALL=C sort; }
sorted_words() { LC_ALL=C sort "$1"; }
expect_same_words() { # WHAT GOT-FILE WANT-FILE (one word a line, any order)
    if [ "$(sorted_words "$2")" = "$(sorted_words "$3")" ]; then
        pass "$1" "$(tr '\n' ' ' <"$3")"
    else
        fail "$1" "got: $(sorted_words "$2" | tr '\n' ' '); want: $(sorted_words "$3" | tr '\n' ' ')"
    fi
}
# The words of the kernel line before the first apply (step 1b), as cmdline_words gives them.
baseline_words() { tr ' ' '\n' <"$st/cmdline-1" | grep -v -e '^BOOT_IMAGE=' -e '^initrd=' -e '^$'; }

# The state the full apply left, before any partial revert: owned files, the .link, the sysctl
# drop-ins, the checksums.
partial_snapshot() {
    owned_files >"$st/P-owned-before"
    info "files of daqtune's before the partial reverts: $(tr '\n' ' ' <"$st/P-owned-before")"
    info "runs in effect: $(journal_runs | awk '$2 != "reverted"' | tr '\n' ' ')"
    PR_LINK=$(pr_link)
    if [ -n "$PR_LINK" ]; then
        link_settings "$PR_LINK" >"$st/P-link-before"
        pass "the port's .link of the full apply" "$PR_LINK: $(tr '\n' ' ' <"$st/P-link-before")"
    else
        fail "the port's .link of the full apply" "no /etc/systemd/network/*daqtune*.link"
    fi
    local f files
    mapfile -t files < <(grep '^/etc/sysctl.d/' "$st/P-owned-before")
    for f in "${files[@]}"; do
        sysctl_file_values "$f" >"$st/${f##*/}.values"
    done
}
# What the reverts left: the files of daqtune's are those before less the ones that went.
partial_files_left() { # GONE-PATH...
    local g
    cp "$st/P-owned-before" "$st/P-owned-want"
    for g in "$@"; do
        grep -qxF "$g" "$st/P-owned-want" || fail "$g was daqtune's before the partial reverts" "not in the list"
        grep -vxF "$g" "$st/P-owned-want" >"$st/P-owned-want.t"
        mv "$st/P-owned-want.t" "$st/P-owned-want"
    done
    owned_files >"$st/P-owned-after"
    expect_eq "the files of daqtune's: those of the full apply less $*" "$(tr '\n' ' ' <"$st/P-owned-after")" "$(tr '\n' ' ' <"$st/P-owned-want")"
    run status-P1 dq status
    expect_eq "status exits 0 (no drift: what stays reads as journaled)" "$rc" 0
    sums "$st/sums-P1" "${boot_dirs[@]}"
}
partial_sysctl_reverted() { # ID FILE
    run "revert-P1-$1" dq revert --yes --only "$1"
    expect_eq "revert --only $1 exits 0" "$rc" 0
    expect "$1: $2 removed" test ! -e "$2"
    expect_sysctls "$1: its keys back to their values before the package, now" "$2" 1a
}
# Every sysctl.d drop-in of daqtune's left: unchanged, and its settings live.
partial_sysctls_kept() { # WHEN
    local f any=0 files
    mapfile -t files < <(grep '^/etc/sysctl.d/' "$st/P-owned-want")
    for f in "${files[@]}"; do
        any=1
        expect_sysctls "$f stays: its keys live $1" "$f" file
    done
    [ $any = 1 ] || info "no other sysctl.d drop-in of daqtune's"
}

partial_revert_grub() {
    step P1 "partial reverts: hugepages (drop-in words, mount units), nic.rings (.link keys), net.sysctl (its drop-in)"
    wait_settled
    partial_snapshot
    grub_default_args >"$st/P-full.words"
    expect "the full apply's default entry reserves hugepages" grep -qE "$PR_HUGE" "$st/P-full.words"
    expect "the full apply's default entry isolates CPU 3" grep -qE '^isolcpus=([a-z_]+,)*3$' "$st/P-full.words"
    grep -vE "$PR_HUGE" "$st/P-full.words" >"$st/P-want.words"
    local units u
    units=$(grep -E '^/etc/systemd/system/[^/]+\.mount$' "$st/P-owned-before" | tr '\n' ' ')
    expect_eq "the full apply's mount units" "$units" "/etc/systemd/system/mnt-huge.mount /etc/systemd/system/$MOUNT2_UNIT "

    run revert-P1-hugepages dq revert --yes --only hugepages
    expect_eq "revert --only hugepages exits 0" "$rc" 0
    grub_default_args >"$st/P-grub.words"
    expect_same_words "hugepages: grub.cfg's default entry is the full apply's without the reservation words" "$st/P-grub.words" "$st/P-want.words"
    if grep -qE '^isolcpus=' "$st/P-grub.words"; then pass "hugepages: the isolation words stay in the default entry"; else fail "hugepages: the isolation words stay in the default entry" "$(tr '\n' ' ' <"$st/P-grub.words")"; fi
    for u in $units; do
        expect "hugepages: $u removed" test ! -e "$u"
        expect "hugepages: ${u##*/} no longer wanted by local-fs.target" test ! -e "/etc/systemd/system/local-fs.target.wants/${u##*/}"
    done
    expect_eq "hugepages: nothing mounted at /mnt/huge and /mnt/huge-2M now" "$(findmnt -n /mnt/huge; findmnt -n /mnt/huge-2M)" ""
    expect_eq "hugepages: 1G pool as before the package, now" "$(cat /sys/kernel/mm/hugepages/hugepages-${HP_KB}kB/nr_hugepages)" "$(cat "$st/hp1g-1a")"
    expect_eq "hugepages: 2M pool as before the package, now" "$(cat /sys/kernel/mm/hugepages/hugepages-${HP2_KB}kB/nr_hugepages)" "$(cat "$st/hp2m-1a")"

    run revert-P1-rings dq revert --yes --only nic.rings
    expect_eq "revert --only nic.rings exits 0" "$rc" 0
    expect_eq "nic.rings: rings as before apply, now" "$(rings_now)" "$(cat "$st/rings-1")"
    expect_eq "nic.rings: MTU 9000 stays, now" "$(cat "/sys/class/net/$DATA_PORT/mtu")" 9000
    # systemd.link(5): RxBufferSize= and TxBufferSize= are the ring sizes.
    grep -vE '^(RxBufferSize|TxBufferSize)=' "$st/P-link-before" >"$st/P-link-want"
    if [ -n "$PR_LINK" ]; then
        link_settings "$PR_LINK" >"$st/P-link-after"
        expect_eq "nic.rings: the .link's settings are the full apply's without RxBufferSize/TxBufferSize" "$(tr '\n' ' ' <"$st/P-link-after")" "$(tr '\n' ' ' <"$st/P-link-want")"
    fi
    expect "nic.rings: the .link keeps MTUBytes=9000" grep -qx 'MTUBytes=9000' "$st/P-link-want"

    partial_sysctl_reverted net.sysctl /etc/sysctl.d/90-daqtune.conf
    partial_files_left /etc/sysctl.d/90-daqtune.conf /etc/systemd/system/mnt-huge.mount "/etc/systemd/system/$MOUNT2_UNIT"
    partial_sysctls_kept now
}

partial_revert_extlinux() {
    step P1 "partial reverts: kernel.cmdline (extlinux words), nic.mtu (.link key), vm.stat-interval (its drop-in)"
    wait_settled
    partial_snapshot
    extlinux_default_args >"$st/P-full.words"
    expect "the full apply's DEFAULT entry reserves hugepages" grep -qE "$PR_HUGE" "$st/P-full.words"
    expect "the full apply's DEFAULT entry isolates CPU 3" grep -qE '^isolcpus=([a-z_]+,)*3$' "$st/P-full.words"
    # What stays: the line before the first apply, and the words of the other settings.
    baseline_words >"$st/P-base.words"
    { cat "$st/P-base.words"; grep -vxF -f "$st/P-base.words" "$st/P-full.words" | grep -E "$PR_OTHER_WORDS"; } >"$st/P-want.words"

    run revert-P1-cmdline dq revert --yes --only kernel.cmdline
    expect_eq "revert --only kernel.cmdline exits 0" "$rc" 0
    extlinux_default_args >"$st/P-ext.words"
    expect_same_words "kernel.cmdline: extlinux.conf's DEFAULT APPEND is the line before apply with the reservation words" "$st/P-ext.words" "$st/P-want.words"
    expect "kernel.cmdline: the daqtune label stays DEFAULT (the reservation is still in it)" grep -qE '^[[:space:]]*DEFAULT[[:space:]]+daqtune' /boot/extlinux/extlinux.conf

    run revert-P1-mtu dq revert --yes --only nic.mtu
    expect_eq "revert --only nic.mtu exits 0" "$rc" 0
    expect_eq "nic.mtu: MTU as before the package, now" "$(cat "/sys/class/net/$DATA_PORT/mtu")" "$(cat "$st/mtu-1a")"
    rings_at_max "nic.mtu: the rings stay at the maximum, now"
    # systemd.link(5): MTUBytes= is the MTU.
    grep -vE '^MTUBytes=' "$st/P-link-before" >"$st/P-link-want"
    if [ -n "$PR_LINK" ]; then
        link_settings "$PR_LINK" >"$st/P-link-after"
        expect_eq "nic.mtu: the .link's settings are the full apply's without MTUBytes" "$(tr '\n' ' ' <"$st/P-link-after")" "$(tr '\n' ' ' <"$st/P-link-want")"
    fi
    expect "nic.mtu: the .link keeps RxBufferSize=max" grep -qx 'RxBufferSize=max' "$st/P-link-want"

    partial_sysctl_reverted vm.stat-interval /etc/sysctl.d/90-daqtune-stat-interval.conf
    partial_files_left /etc/sysctl.d/90-daqtune-stat-interval.conf
    partial_sysctls_kept now
}

# A reverted setting's check is judged and does not pass (an absent verdict proves nothing).
expect_not_pass() { # REPORT ID
    local got
    got=$(statuses "$1" "$2")
    case $got in
        "" ) fail "$2 (reverted) no longer passes" "no verdict of $2 in the report" ;;
        pass ) fail "$2 (reverted) no longer passes" "it passes" ;;
        * ) pass "$2 (reverted) no longer passes" "$got" ;;
    esac
}

# The boot after the partial reverts: the kernel line, the live settings and the files are
# exactly what stayed.
partial_booted() { # grub|extlinux
    step P2 "the boot after the partial reverts: exactly the remaining settings"
    wait_settled
    cmdline_words >"$st/cmdline-P2.words"
    info "cmdline: $(cat /proc/cmdline)"
    expect_same_words "/proc/cmdline is the words the partial revert left" "$st/cmdline-P2.words" "$st/P-want.words"
    sums "$st/sums-P2" "${boot_dirs[@]}"
    if cmp -s "$st/sums-P1" "$st/sums-P2"; then pass "the boot changed no file under /etc and the boot configuration"; else fail "the boot changed no file under /etc and the boot configuration" "$(diff "$st/sums-P1" "$st/sums-P2" | grep '^[<>]' | head -n 6 | tr '\n' ' ')"; fi
    run check-P2 dq check --format json --json "$st/report-P2.json"
    local r=$st/report-P2.json pend id
    pend=$(jq -r '[.checks[] | select(.status == "pending-reboot") | "\(.id) \(.subject): \(.message)"] | join(" | ")' "$r")
    expect_eq "nothing is pending-reboot" "$pend" ""
    expect_units_ok
    partial_sysctls_kept "after the reboot"
    if [ "$1" = grub ]; then
        expect_eq "kernel.cmdline stays: /sys/devices/system/cpu/isolated" "$(cat /sys/devices/system/cpu/isolated)" 3
        expect_eq "hugepages went: 1G pool as before the package" "$(cat /sys/kernel/mm/hugepages/hugepages-${HP_KB}kB/nr_hugepages)" "$(cat "$st/hp1g-1a")"
        expect_eq "hugepages went: 2M pool as before the package" "$(cat /sys/kernel/mm/hugepages/hugepages-${HP2_KB}kB/nr_hugepages)" "$(cat "$st/hp2m-1a")"
        expect_eq "hugepages went: no mnt-huge.mount" "$(systemctl is-active mnt-huge.mount)" inactive
        expect_eq "hugepages went: nothing mounted at /mnt/huge" "$(findmnt -n /mnt/huge | wc -l)" 0
        expect_eq "nic.rings went: rings as before apply" "$(rings_now)" "$(cat "$st/rings-1")"
        expect_eq "nic.mtu stays: MTU 9000" "$(cat "/sys/class/net/$DATA_PORT/mtu")" 9000
        expect_sysctls "net.sysctl went: its keys as before the package" /etc/sysctl.d/90-daqtune.conf 1a
        expect_eq "kernel.thp stays: THP never" "$(thp_mode)" never
        for id in kernel.cmdline nic.mtu kernel.thp; do expect_status "$r" "$id" pass; done
        for id in hugepages nic.rings net.sysctl; do
            expect_not_pass "$r" "$id"
        done
    else
        expect_eq "kernel.cmdline went: /sys/devices/system/cpu/isolated empty" "$(cat /sys/devices/system/cpu/isolated)" ""
        expect_eq "hugepages stays: 1G pages reserved at boot" "$(cat /sys/kernel/mm/hugepages/hugepages-${HP_KB}kB/nr_hugepages)" "$HP_COUNT"
        expect_eq "hugepages stays: 2M pages reserved at boot" "$(cat /sys/kernel/mm/hugepages/hugepages-${HP2_KB}kB/nr_hugepages)" "$HP2_COUNT"
        expect_eq "hugepages stays: mnt-huge.mount active" "$(systemctl is-active mnt-huge.mount)" active
        expect_eq "nic.mtu went: MTU as before the package" "$(cat "/sys/class/net/$DATA_PORT/mtu")" "$(cat "$st/mtu-1a")"
        rings_at_max "nic.rings stays: RX/TX rings at the maximum (.link through udev)"
        expect_sysctls "vm.stat-interval went: its key as before the package" /etc/sysctl.d/90-daqtune-stat-interval.conf 1a
        for id in hugepages nic.rings; do expect_status "$r" "$id" pass; done
        for id in kernel.cmdline nic.mtu vm.stat-interval; do
            expect_not_pass "$r" "$id"
        done
    fi
    run status-P2 dq status
    expect_eq "status exits 0 (no drift)" "$rc" 0
}

foreign_override() {
    step 5 "a foreign grub.d file that resets GRUB_CMDLINE_LINUX is named"
    local f=/etc/default/grub.d/zz-override.cfg
    printf '# a later drop-in of another tool\nGRUB_CMDLINE_LINUX="console=ttyS0,115200"\n' >"$f"
    run check-5 dq check --format json --json "$st/report-5.json"
    run check-5-text dq check kernel.cmdline
    run plan-5 dq plan
    local kst
    kst=$(statuses "$st/report-5.json" kernel.cmdline)
    if jq -e '[.checks[] | select(.id == "kernel.cmdline") | .message] | any(test("zz-override.cfg"))' "$st/report-5.json" >/dev/null; then
        pass "check names zz-override.cfg"
    else
        fail "check names zz-override.cfg" "kernel.cmdline says: $(jq -r '[.checks[] | select(.id == "kernel.cmdline") | "\(.status): \(.message)"] | join(" | ")' "$st/report-5.json")"
    fi
    if [ "$kst" != pass ]; then pass "kernel.cmdline no longer passes" "$kst"; else fail "kernel.cmdline no longer passes" "pass, although the next boot drops the arguments"; fi
    if grep -q 'zz-override.cfg' "$st/plan-5.txt"; then pass "plan names zz-override.cfg"; else fail "plan names zz-override.cfg" "$(grep -i -m3 -E 'grub|cmdline' "$st/plan-5.txt" | tr '\n' ' ')"; fi
    rm -f "$f"
    expect "zz-override.cfg removed again" test ! -e "$f"
}

do_revert() { # VARIANT
    step 6a "revert --yes (then reboot)"
    run revert-6 dq revert --yes
    expect_eq "revert exits 0" "$rc" 0
    reverted_files "$1"
}

reverted_files() { # VARIANT
    run owned-6 owned_files
    expect_eq "no file of daqtune's left under /etc" "$(owned_files | tr '\n' ' ')" ""
    expect_eq "revert unmounted /mnt/huge and /mnt/huge-2M" "$(findmnt -n /mnt/huge; findmnt -n /mnt/huge-2M)" ""
    if [ "$1" = grub ]; then
        if grep -q 'isolcpus' /boot/grub/grub.cfg; then fail "grub.cfg regenerated without the arguments" "$(grep -m1 isolcpus /boot/grub/grub.cfg)"; else pass "grub.cfg regenerated without the arguments"; fi
    fi
}

verify_reverted() {
    step 6b "after revert and reboot: as before step 2"
    wait_settled
    info "cmdline after revert: $(cat /proc/cmdline)"
    expect_eq "/proc/cmdline equals step 1's" "$(cat /proc/cmdline)" "$(cat "$st/cmdline-1")"
    sums "$st/sums-after" "${boot_dirs[@]}"
    if cmp -s "$st/sums-before" "$st/sums-after"; then
        pass "/etc and the boot configuration byte-identical to before step 2" "$(grep -c . "$st/sums-before") entries"
    else
        diff "$st/sums-before" "$st/sums-after" >"$st/sums.diff"
        fail "/etc and the boot configuration byte-identical to before step 2" "$(grep '^[<>]' "$st/sums.diff" | head -n 8 | tr '\n' ' ')"
    fi
    expect_eq "hugetlbfs no longer mounted" "$(findmnt -n /mnt/huge | wc -l)" 0
    expect_eq "no hugetlbfs at /mnt/huge-2M" "$(findmnt -n /mnt/huge-2M | wc -l)" 0
    expect_eq "/sys/devices/system/cpu/isolated empty" "$(cat /sys/devices/system/cpu/isolated)" ""
    run check-6 dq check --format json --json "$st/report-6.json"
    daqtune diff --json "$st/report-1.json" "$st/report-6.json" >"$st/diff-6.json" 2>"$st/diff-6.err"
    local changed
    changed=$(jq -r '[.[] | select(.before == null or .after == null or .before[0] != .after[0]) | "\(.id) \(.subject): \(.before[0] // "absent") -> \(.after[0] // "absent")"] | join(" | ")' "$st/diff-6.json" 2>&1)
    expect_eq "daqtune diff of step 1's report and now: no verdict changed" "$changed" ""
    run diff-6-text daqtune diff "$st/report-1.json" "$st/report-6.json"
}

# The extlinux variant's revert, checked without another boot: every file as before step 2.
files_restored() {
    sums "$st/sums-after" "${boot_dirs[@]}"
    if cmp -s "$st/sums-before" "$st/sums-after"; then
        pass "/etc and /boot/extlinux byte-identical to before step 2" "$(grep -c . "$st/sums-before") entries"
    else
        diff "$st/sums-before" "$st/sums-after" >"$st/sums.diff"
        fail "/etc and /boot/extlinux byte-identical to before step 2" "$(grep '^[<>]' "$st/sums.diff" | head -n 8 | tr '\n' ' ')"
    fi
    expect_eq "extlinux.conf's DEFAULT is the original label again" \
        "$(awk 'toupper($1)=="DEFAULT" {print $2; exit}' /boot/extlinux/extlinux.conf)" primary
}

mrrs_on_emulated_nic() {
    step 7 "MRRS on the emulated NIC: QEMU ignores the write"
    local bdf before after
    bdf=$(e1000e_bdf)
    before=$(devctl "$bdf")
    info "DevCtl of $bdf before: $(printf '0x%04x' "$before") (MRRS $((128 << ((before >> 12) & 7))) bytes)"
    sums "$st/sums-7a" /etc
    run apply-7 daqtune --profile "$P7" apply --yes --only pcie.mrrs
    after=$(devctl "$bdf")
    info "DevCtl of $bdf after: $(printf '0x%04x' "$after")"
    if [ "$rc" -ne 0 ]; then pass "apply --only pcie.mrrs exits non-zero" "exit $rc"; else fail "apply --only pcie.mrrs exits non-zero" "exit 0: $(tail -n 4 "$st/apply-7.txt" | tr '\n' ' ')"; fi
    expect_eq "DevCtl unchanged (the emulated NIC ignores MRRS)" "$(printf '0x%04x' "$after")" "$(printf '0x%04x' "$before")"
    # The failure names what it read back: MRRS 128 bytes (DevCtl bits 14:12 = 0).
    if grep -qiE 'read ?back|reads? ' "$st/apply-7.txt" && grep -qE '(128|0x0000|0x0\b)' "$st/apply-7.txt"; then
        pass "the failed write is reported with the value read back"
    else
        fail "the failed write is reported with the value read back" "$(grep -v '^\$' "$st/apply-7.txt" | head -n 8 | tr '\n' ' ')"
    fi
    local bad
    bad=$(journal_runs | awk '$2 == "applying"')
    expect_eq "no journal run left half-written (state applying)" "$bad" ""
    run revert-7 daqtune --profile "$P7" revert --yes
    expect_eq "revert after the failed MRRS write exits 0" "$rc" 0
    local left
    left=$(journal_runs | awk '$2 != "reverted"')
    expect_eq "every journal run is reverted" "$left" ""
    sums "$st/sums-7b" /etc
    if cmp -s "$st/sums-7a" "$st/sums-7b"; then pass "/etc as before step 7"; else fail "/etc as before step 7" "$(diff "$st/sums-7a" "$st/sums-7b" | grep '^[<>]' | head -n 6 | tr '\n' ' ')"; fi
}

extlinux_applied() {
    local conf=/boot/extlinux/extlinux.conf
    expect "extlinux.conf has a daqtune label" grep -qE '^[[:space:]]*LABEL[[:space:]]+daqtune' "$conf"
    expect "the daqtune label is DEFAULT" grep -qE '^[[:space:]]*DEFAULT[[:space:]]+daqtune' "$conf"
    expect "the original label is kept" grep -qE '^[[:space:]]*LABEL[[:space:]]+primary' "$conf"
    extlinux_default_args >"$st/extlinux-2.words"
    expect_kernel_args_in "extlinux.conf DEFAULT APPEND" "$st/extlinux-2.words"
}

# --- nic.rings (issue 26 item 1): a NIC setting kept through a reboot, undone by revert ---
# generic-dgpu wants the RX/TX rings at the device maximum (the e1000e: 256 -> 4096). apply sets
# them now over ethtool netlink and adds RxBufferSize=max/TxBufferSize=max to the port's .link,
# which udev applies when the port appears at the next boot. Read here through the older
# SIOCETHTOOL ioctl (ETHTOOL_GRINGPARAM), not through daqtune's netlink client, so the test
# does not trust the code it tests; "RX TX RX_MAX TX_MAX".
rings_now() {
    python3 - "$DATA_PORT" <<'PY' 2>/dev/null
import array, fcntl, socket, struct, sys
buf = array.array("I", [0x10] + [0] * 8)  # struct ethtool_ringparam, cmd ETHTOOL_GRINGPARAM
addr, _ = buf.buffer_info()
ifr = struct.pack("16sP", sys.argv[1].encode(), addr)
fcntl.ioctl(socket.socket(socket.AF_INET, socket.SOCK_DGRAM), 0x8946, ifr)  # SIOCETHTOOL
_, rx_max, _, _, tx_max, rx, _, _, tx = buf
print(rx, tx, rx_max, tx_max)
PY
}
rings_baseline() { # before step 2
    rings_now >"$st/rings-1"
    info "nic.rings: $DATA_PORT rings before apply (rx tx rx_max tx_max): $(cat "$st/rings-1")"
    local rx tx rxm txm
    read -r rx tx rxm txm <"$st/rings-1" || true
    if [ -z "$rx" ]; then
        fail "nic.rings: rings of $DATA_PORT readable before apply" "SIOCETHTOOL ETHTOOL_GRINGPARAM gave nothing"
    elif [ "$rx" = "$rxm" ] && [ "$tx" = "$txm" ]; then
        fail "nic.rings: rings not already at the maximum before apply" "$rx/$tx of $rxm/$txm: the block proves nothing"
    else
        pass "nic.rings: rings below the maximum before apply" "$rx/$tx of $rxm/$txm"
    fi
}
rings_at_max() { # WHAT
    local rx tx rxm txm
    read -r rx tx rxm txm <<EOF_R || true
$(rings_now)
EOF_R
    if [ -n "$rx" ] && [ "$rx" = "$rxm" ] && [ "$tx" = "$txm" ]; then pass "$1" "$rx/$tx"; else fail "$1" "got rx/tx '$rx/$tx', maximum '$rxm/$txm'"; fi
}
rings_applied() { # after step 2
    rings_at_max "nic.rings: RX/TX rings at the maximum right after apply"
    expect "nic.rings: the port's .link carries RxBufferSize=max and TxBufferSize=max" sh -c "grep -l '^RxBufferSize=max' /etc/systemd/network/*daqtune*.link | xargs -r grep -l '^TxBufferSize=max' | grep -q ."
}
rings_after_reboot() { # after step 4's check
    rings_at_max "nic.rings: RX/TX rings at the maximum after the reboot (.link through udev)"
    expect_status "$st/report-4.json" nic.rings pass
}
rings_reverted() { # after step 6b's reboot
    expect_eq "nic.rings: rings as before apply after revert and reboot" "$(rings_now)" "$(cat "$st/rings-1")"
}

# --- kernel.thp (issue 26 item 3): a latency setting kept through a reboot, undone by revert ---
# The profile (generic-dgpu's kernel: block) wants THP `never`; apply writes it now and
# /etc/tmpfiles.d/daqtune-thp.conf, which systemd-tmpfiles applies at the next boot.
thp_mode() { sed -n 's/.*\[\([a-z]*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null; }
thp_baseline() { # before step 2
    thp_mode >"$st/thp-1"
    info "kernel.thp: THP mode before apply: $(cat "$st/thp-1")"
    if [ "$(cat "$st/thp-1")" = never ]; then fail "kernel.thp: THP not already never before apply" "the guest kernel starts at never: the block proves nothing"; fi
}
thp_applied() { # after step 2
    expect_eq "kernel.thp: THP mode never right after apply" "$(thp_mode)" never
    expect "kernel.thp: /etc/tmpfiles.d/daqtune-thp.conf written" grep -qx 'w /sys/kernel/mm/transparent_hugepage/enabled - - - - never' /etc/tmpfiles.d/daqtune-thp.conf
}
thp_after_reboot() { # after step 4's check
    expect_eq "kernel.thp: THP mode never after the reboot (tmpfiles.d)" "$(thp_mode)" never
    expect_status "$st/report-4.json" kernel.thp pass
}
thp_reverted() { # after step 6b's reboot
    expect "kernel.thp: tmpfiles.d file gone" test ! -e /etc/tmpfiles.d/daqtune-thp.conf
    expect_eq "kernel.thp: THP mode as before apply after revert and reboot" "$(thp_mode)" "$(cat "$st/thp-1")"
}

# --- netplan (issue 25 item 5), in the extlinux guest -------------------------------------------
# netplan (Debian's netplan.io, rendering to systemd-networkd) owns the data port: the site's
# own file is written and applied before the baseline, so every later checksum includes it.
# It runs in the extlinux guest once that variant's own revert is checked (steps N0-N2 in its
# boot 2, N3-N6 in its boot 3): a guest of its own cost two more boots and a second install,
# about three minutes under TCG, to prove the same MTU path on the same BIOS image. The
# extlinux revert has restored every file before N0, so the netplan baseline is the host as
# the image made it, daqtune installed, plus the site's netplan file.
NETPLAN_USER=/etc/netplan/50-data.yaml
NETPLAN_OURS=/etc/netplan/90-daqtune.yaml
NETPLAN_LATER=/etc/netplan/99-site.yaml
# The single value `netplan get KEY` printed into state/NAME.txt.
netplan_value() { grep -v -e '^\$' -e '^\[exit' "$st/$1.txt" | tail -n 1; }
netplan_owns_port() {
    step N0 "netplan owns the data port (the site's $NETPLAN_USER, then netplan apply)"
    wait_settled
    rm -f /etc/systemd/network/20-data.network
    (
        umask 077
        printf '%s\n' "# The site's data port: no address (a DPDK/RDMA port), nothing waits for it." \
            "network:" "  version: 2" "  renderer: networkd" "  ethernets:" "    $DATA_PORT:" \
            "      dhcp4: false" "      dhcp6: false" "      accept-ra: false" "      link-local: []" \
            "      optional: true" >"$NETPLAN_USER"
    )
    run netplan-apply-N0 netplan apply
    expect_eq "netplan apply exits 0" "$rc" 0
    run networkctl-N0 networkctl status "$DATA_PORT"
    if grep -qE "Network File: /run/systemd/network/10-netplan-$DATA_PORT\.network" "$st/networkctl-N0.txt"; then
        pass "networkd manages $DATA_PORT through netplan's rendering"
    else
        fail "networkd manages $DATA_PORT through netplan's rendering" "$(grep -E 'Network File|State' "$st/networkctl-N0.txt" | tr '\n' ' ')"
    fi
    expect_eq "MTU of $DATA_PORT before daqtune" "$(cat "/sys/class/net/$DATA_PORT/mtu")" 1500
}

netplan_baseline() { # daqtune installed, the extlinux variant's own run reverted
    step N1 "check (kept), checksums: the netplan baseline"
    run check-N1 dq check nic.mtu --format json --json "$st/report-N1.json"
    expect "step N1 report is JSON" jq -e .checks "$st/report-N1.json"
    expect_eq "no file of daqtune's under /etc before N2" "$(owned_files | tr '\n' ' ')" ""
    sums "$st/sums-before-netplan" "${boot_dirs[@]}"
}

netplan_apply_mtu() {
    step N2 "apply --yes --only nic.mtu (netplan style)"
    run plan-N2 dq plan --only nic.mtu
    run apply-N2 dq apply --yes --only nic.mtu
    expect_eq "apply exits 0" "$rc" 0
    expect_eq "MTU 9000 on $DATA_PORT now" "$(cat "/sys/class/net/$DATA_PORT/mtu" 2>/dev/null)" 9000
    expect_eq "daqtune wrote $NETPLAN_OURS (mode 600, as netplan wants)" "$(stat -c %a "$NETPLAN_OURS" 2>/dev/null)" 600
    expect "$NETPLAN_OURS sets mtu: 9000 for $DATA_PORT" grep -qE '^ +mtu: 9000$' "$NETPLAN_OURS"
    expect_eq "the files daqtune owns: only its netplan drop-in" "$(owned_files | tr '\n' ' ')" "$NETPLAN_OURS "
    # netplan itself reads the merged configuration as daqtune meant it.
    run netplan-get-N2 netplan get "ethernets.$DATA_PORT.mtu"
    expect_eq "netplan get ethernets.$DATA_PORT.mtu" "$(netplan_value netplan-get-N2)" 9000
}

netplan_verify_after_reboot() {
    step N3 "reboot: netplan renders MTU 9000 for the data port"
    wait_settled
    expect_eq "MTU 9000 on $DATA_PORT after the reboot" "$(cat "/sys/class/net/$DATA_PORT/mtu" 2>/dev/null)" 9000
    run networkctl-N3 networkctl status "$DATA_PORT"
    if grep -qE "Network File: /run/systemd/network/10-netplan-$DATA_PORT\.network" "$st/networkctl-N3.txt" && grep -qE '^ *MTU: 9000' "$st/networkctl-N3.txt"; then
        pass "networkctl status: netplan's .network, MTU 9000"
    else
        fail "networkctl status: netplan's .network, MTU 9000" "$(grep -E 'Network File|MTU' "$st/networkctl-N3.txt" | tr '\n' ' ')"
    fi
    expect "netplan's rendering carries MTUBytes=9000" grep -rqx 'MTUBytes=9000' /run/systemd/network/
    run check-N3 dq check nic.mtu --format json --json "$st/report-N3.json"
    expect_status "$st/report-N3.json" nic.mtu pass
    local pend
    pend=$(jq -r '[.checks[] | select(.status == "pending-reboot") | "\(.id) \(.subject)"] | join(" | ")' "$st/report-N3.json")
    expect_eq "nothing is pending-reboot" "$pend" ""
    run check-N3-text dq check nic.mtu
}

netplan_precedence() {
    step N5 "a later netplan file of the site's that sets MTU 1500 is named"
    (
        umask 077
        printf '%s\n' "# the site tool's own file, later in name order than daqtune's" "network:" \
            "  version: 2" "  ethernets:" "    $DATA_PORT:" "      mtu: 1500" >"$NETPLAN_LATER"
    )
    # netplan's own merge is the reference: the later file wins.
    run netplan-get-N5 netplan get "ethernets.$DATA_PORT.mtu"
    expect_eq "netplan get says the later file wins" "$(netplan_value netplan-get-N5)" 1500
    run check-N5 dq check nic.mtu --format json --json "$st/report-N5.json"
    run check-N5-text dq check nic.mtu
    run plan-N5 dq plan --only nic.mtu
    if jq -e '[.checks[] | select(.id == "nic.mtu") | .message] | any(test("99-site.yaml"))' "$st/report-N5.json" >/dev/null; then
        pass "check names 99-site.yaml"
    else
        fail "check names 99-site.yaml" "nic.mtu says: $(jq -r '[.checks[] | select(.id == "nic.mtu") | "\(.subject): \(.status): \(.message)"] | join(" | ")' "$st/report-N5.json")"
    fi
    local s
    s=$(statuses "$st/report-N5.json" nic.mtu)
    if [ "$s" != pass ]; then pass "nic.mtu no longer passes" "$s"; else fail "nic.mtu no longer passes" "pass, although the next boot renders MTU 1500"; fi
    if grep -q '99-site.yaml' "$st/plan-N5.txt"; then pass "plan names 99-site.yaml"; else fail "plan names 99-site.yaml" "$(grep -i -m3 -E 'netplan|mtu' "$st/plan-N5.txt" | tr '\n' ' ')"; fi
    rm -f "$NETPLAN_LATER"
    expect "99-site.yaml removed again" test ! -e "$NETPLAN_LATER"
}

netplan_revert() {
    step N6 "revert --yes: the netplan configuration as before"
    run revert-N6 dq revert --yes
    expect_eq "revert exits 0" "$rc" 0
    expect_eq "no file of daqtune's left under /etc" "$(owned_files | tr '\n' ' ')" ""
    expect_eq "MTU of $DATA_PORT back to 1500" "$(cat "/sys/class/net/$DATA_PORT/mtu" 2>/dev/null)" 1500
    sums "$st/sums-after-netplan" "${boot_dirs[@]}"
    if cmp -s "$st/sums-before-netplan" "$st/sums-after-netplan"; then
        pass "/etc (with /etc/netplan) and /boot/extlinux byte-identical to before step N2" "$(grep -c . "$st/sums-before-netplan") entries"
    else
        diff "$st/sums-before-netplan" "$st/sums-after-netplan" >"$st/sums-netplan.diff"
        fail "/etc (with /etc/netplan) and /boot/extlinux byte-identical to before step N2" "$(grep '^[<>]' "$st/sums-netplan.diff" | head -n 8 | tr '\n' ' ')"
    fi
    run netplan-get-N6 netplan get "ethernets.$DATA_PORT.mtu"
    # netplan get prints `null` for a key no file sets (0.106; older ones print nothing).
    local v
    v=$(netplan_value netplan-get-N6)
    if [ "$v" = null ] || [ -z "$v" ]; then pass "netplan get: no MTU configured any more" "${v:-empty}"; else fail "netplan get: no MTU configured any more" "$v"; fi
}

# --- the Secure Boot variant (issue 25 item 4) ---------------------------------------------------
# OVMF with Microsoft's keys, Secure Boot enforced; Debian's signed shim, GRUB and kernel.
SB_VAR=/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c
secure_boot_on() { # the last byte of the SecureBoot variable (4 attribute bytes, then 1 or 0)
    [ -r "$SB_VAR" ] && [ "$(od -An -tu1 -j4 -N1 "$SB_VAR" | tr -d ' ')" = 1 ]
}
live_lockdown() { sed -n 's/.*\[\([a-z]*\)\].*/\1/p' /sys/kernel/security/lockdown 2>/dev/null; }
secure_boot_live() { # STEP-ID
    step "$1" "Secure Boot enforced, lockdown from the live kernel"
    expect "booted through UEFI (/sys/firmware/efi)" test -d /sys/firmware/efi
    if secure_boot_on; then pass "SecureBoot variable is 1"; else fail "SecureBoot variable is 1" "$(od -An -tx1 "$SB_VAR" 2>&1 | tr -s ' ')"; fi
    info "lockdown: $(cat /sys/kernel/security/lockdown 2>&1)"
    local l
    l=$(live_lockdown)
    if [ "$l" = integrity ] || [ "$l" = confidentiality ]; then pass "the kernel is locked down" "$l"; else fail "the kernel is locked down" "'${l:-unreadable}'"; fi
}
secure_boot_platform_check() {
    run check-platform dq check platform --format json --json "$st/report-platform.json"
    run check-platform-text dq check platform
    local l
    l=$(live_lockdown)
    if jq -e --arg l "$l" '[.checks[] | select(.id == "platform" and .subject == "lockdown") | select(.status == "warn") | .message] | any(contains("`" + $l + "`") and contains("Secure Boot on"))' "$st/report-platform.json" >/dev/null; then
        pass "check platform reports lockdown $l (warn)"
    else
        fail "check platform reports lockdown $l (warn)" "$(jq -r '[.checks[] | select(.id == "platform") | "\(.subject): \(.status): \(.message)"] | join(" | ")' "$st/report-platform.json")"
    fi
}
mrrs_refused_by_lockdown() {
    step S2 "apply --only pcie.mrrs under lockdown: refused, nothing written"
    local bdf before after jb
    bdf=$(e1000e_bdf)
    before=$(devctl "$bdf")
    sums "$st/sums-s2a" /etc /boot
    jb=$(journal_runs | awk '$2 != "reverted"' | wc -l)
    run apply-s2 daqtune --profile "$P7" apply --yes --only pcie.mrrs
    after=$(devctl "$bdf")
    if [ "$rc" -ne 0 ]; then pass "apply --only pcie.mrrs exits non-zero" "exit $rc"; else fail "apply --only pcie.mrrs exits non-zero" "exit 0"; fi
    if grep -q 'refused by kernel lockdown' "$st/apply-s2.txt" && grep -q 'Secure Boot' "$st/apply-s2.txt"; then
        pass "the refusal names kernel lockdown and Secure Boot"
    else
        fail "the refusal names kernel lockdown and Secure Boot" "$(grep -v '^\$' "$st/apply-s2.txt" | head -n 8 | tr '\n' ' ')"
    fi
    expect_eq "DevCtl unchanged" "$(printf '0x%04x' "$after")" "$(printf '0x%04x' "$before")"
    sums "$st/sums-s2b" /etc /boot
    if cmp -s "$st/sums-s2a" "$st/sums-s2b"; then pass "nothing written under /etc and /boot"; else fail "nothing written under /etc and /boot" "$(diff "$st/sums-s2a" "$st/sums-s2b" | grep '^[<>]' | head -n 6 | tr '\n' ' ')"; fi
    expect_eq "no journal run left open" "$(journal_runs | awk '$2 != "reverted"' | wc -l)" "$jb"
    # Whatever the refused run journaled is reverted, so step 2 starts from the baseline.
    daqtune --profile "$P7" revert --yes >/dev/null 2>&1
}

# --- the Spark variant (issue 25 item 3) ---------------------------------------------------------
# Debian 13 arm64 under qemu-system-aarch64 -M virt, AAVMF (UEFI), grub-efi-arm64, and
# NetworkManager managing the data port; the profile extends platforms/dgx-spark.yaml.
NM_DIR=/etc/NetworkManager/system-connections
NM_OURS=daqiri-$DATA_PORT
NM_THEIRS=daqiri-tx
# tests/vm/lifecycle-profile-spark.yaml's nic.addresses for the data port.
SPARK_ADDR=192.0.2.10/24
GRUB_DROPIN=/etc/default/grub.d/daqiri-tuning.cfg
nm_port_connection() { nmcli -g GENERAL.CONNECTION device show "$DATA_PORT" 2>/dev/null; }
# NetworkManager activates connections after the boot's jobs are done: wait (60 s at most)
# until the port carries WANT, or any connection when WANT is empty.
nm_wait_connection() { # [WANT]
    local _ c
    for _ in $(seq 1 60); do
        c=$(nm_port_connection)
        if [ -n "$1" ] && [ "$c" = "$1" ]; then return 0; fi
        if [ -z "$1" ] && [ -n "$c" ]; then return 0; fi
        sleep 1
    done
    return 1
}
# The files of NetworkManager's connection directory that bind a connection to the data port.
nm_port_files() { grep -l -x "interface-name=$DATA_PORT" "$NM_DIR"/* 2>/dev/null | LC_ALL=C sort | tr '\n' ' '; }

spark_boot_chain() {
    step 0 "booted through AAVMF and grub-efi-arm64; update-grub under UEFI (before the baseline)"
    wait_settled
    expect "booted through UEFI (/sys/firmware/efi)" test -d /sys/firmware/efi
    expect "booted through GRUB (BOOT_IMAGE= on the line)" grep -q '^BOOT_IMAGE=' /proc/cmdline
    expect "the ESP is mounted at /boot/efi" mountpoint -q /boot/efi
    expect "GRUB for arm64 EFI on the ESP (EFI/debian/grubaa64.efi)" test -s /boot/efi/EFI/debian/grubaa64.efi
    expect "the removable path EFI/BOOT/BOOTAA64.EFI" test -s /boot/efi/EFI/BOOT/BOOTAA64.EFI
    info "kernel $(uname -r) $(uname -m), page size $(getconf PAGESIZE), hugepage sizes: $(cd /sys/kernel/mm/hugepages && printf '%s ' *)"
    # As in the Secure Boot variant: the image's grub.cfg was made without UEFI; the host's
    # own update-grub under UEFI first, as on a host installed through UEFI.
    run update-grub-0 update-grub
    expect_eq "update-grub under UEFI exits 0" "$rc" 0
    nm_manages_port
}

# The NetworkManager side of step 0 (spark and nm): NM manages the port with its own automatic
# connection, no file binds it, the MTU is the default.
nm_manages_port() {
    run nm-device-0 nmcli device show "$DATA_PORT"
    local s
    s=$(nmcli -g GENERAL.STATE device show "$DATA_PORT" 2>/dev/null)
    case "$s" in
        "" | 10\ * | 20\ *) fail "NetworkManager manages $DATA_PORT" "state '${s:-none}'" ;;
        *) pass "NetworkManager manages $DATA_PORT" "$s" ;;
    esac
    nm_wait_connection "" || true
    info "connection on $DATA_PORT before daqtune: '$(nm_port_connection)'"
    expect_eq "no connection file binds $DATA_PORT before daqtune" "$(nm_port_files)" ""
    expect_eq "MTU of $DATA_PORT before daqtune" "$(cat "/sys/class/net/$DATA_PORT/mtu")" 1500
}

spark_applied() { # VARIANT
    # The Spark profile's drop-in name (the nm variant's profile keeps the default name, and on
    # its BIOS GRUB the drop-in is written when the trial boot commits: step 3 checks that).
    [ "${1:-spark}" != spark ] || expect "the grub drop-in named as on Spark ($GRUB_DROPIN)" test -f "$GRUB_DROPIN"
    local k=$NM_DIR/$NM_OURS.nmconnection
    expect_eq "daqtune's NetworkManager keyfile $k (mode 600)" "$(stat -c %a "$k" 2>/dev/null)" 600
    expect "$k sets mtu=9000" grep -qx 'mtu=9000' "$k"
    # Issue 45 item 6: the profile's static address, not ipv4.method=disabled.
    expect "$k sets method=manual (the profile's nic.addresses)" grep -qx 'method=manual' "$k"
    expect "$k gives $DATA_PORT address1=$SPARK_ADDR" grep -qx "address1=$SPARK_ADDR" "$k"
    expect "$k does not disable IPv4" sh -c "! grep -qx 'method=disabled' '$k'"
    expect_eq "no .link file (NetworkManager owns the port)" "$(ls /etc/systemd/network/*daqtune*.link 2>/dev/null)" ""
}

spark_nm_after_reboot() {
    if nm_wait_connection "$NM_OURS"; then
        pass "NetworkManager activated $NM_OURS on $DATA_PORT at boot"
    else
        fail "NetworkManager activated $NM_OURS on $DATA_PORT at boot" "the port carries '$(nm_port_connection)'"
    fi
    run nmcli-mtu-4 nmcli -g 802-3-ethernet.mtu connection show "$NM_OURS"
    expect_eq "nmcli -g 802-3-ethernet.mtu connection show $NM_OURS" "$(grep -v -e '^\$' -e '^\[exit' "$st/nmcli-mtu-4.txt" | tail -n 1)" 9000
    expect_eq "live MTU (nmcli -g GENERAL.MTU device show $DATA_PORT)" "$(nmcli -g GENERAL.MTU device show "$DATA_PORT" 2>/dev/null)" 9000
    expect_eq "the only connection file for $DATA_PORT is daqtune's" "$(nm_port_files)" "$NM_DIR/$NM_OURS.nmconnection "
    # The static address came back with the boot, from daqtune's keyfile.
    run ip-addr-4 ip -4 -o addr show dev "$DATA_PORT"
    expect "static address $SPARK_ADDR on $DATA_PORT after the reboot" grep -q "inet $SPARK_ADDR " "$st/ip-addr-4.txt"
}

spark_nm_reverted() {
    nm_wait_connection "" || true
    local c
    c=$(nm_port_connection)
    if [ "$c" != "$NM_OURS" ]; then pass "after revert and reboot $DATA_PORT is not on $NM_OURS" "'$c'"; else fail "after revert and reboot $DATA_PORT is not on $NM_OURS" "still $c"; fi
    expect "NetworkManager knows no $NM_OURS any more" sh -c "! nmcli -g NAME connection show | grep -qx '$NM_OURS'"
    expect_eq "MTU of $DATA_PORT back to 1500" "$(cat "/sys/class/net/$DATA_PORT/mtu")" 1500
    # revert took daqtune's keyfile, and with it the address only the profile gave.
    expect "after revert and reboot $DATA_PORT has no $SPARK_ADDR" sh -c "! ip -4 -o addr show dev '$DATA_PORT' | grep -q 'inet $SPARK_ADDR '"
}

# The nm variant's step 0: booted through GRUB (BIOS), NetworkManager manages the port
# and its automatic connection leased QEMU's user-network address over DHCP.
nm_boot_chain() {
    step 0 "booted through GRUB; NetworkManager manages the port and leased it an address"
    wait_settled
    expect "booted through GRUB (BOOT_IMAGE= on the line)" grep -q '^BOOT_IMAGE=' /proc/cmdline
    info "kernel $(uname -r) $(uname -m), NetworkManager $(NetworkManager --version 2>/dev/null)"
    nm_manages_port
    if nm_wait_lease; then
        pass "NetworkManager's DHCP lease on $DATA_PORT" "$(ip -4 -o addr show dev "$DATA_PORT" | awk '{print $4}' | tr '\n' ' ')"
    else
        fail "NetworkManager's DHCP lease on $DATA_PORT" "$(ip -4 -o addr show dev "$DATA_PORT" | tr '\n' ' ')"
    fi
}

# Until the port holds a leased IPv4 address (`ip` prints `dynamic` for one whose valid
# lifetime is not forever), 60 s at most.
nm_wait_lease() {
    local _
    for _ in $(seq 1 60); do
        ip -4 -o addr show dev "$DATA_PORT" | grep -q ' dynamic' && return 0
        sleep 1
    done
    return 1
}

# Step 9 (nm): a port whose only address is a DHCP lease, with a profile that names no address
# for it. daqtune's keyfile must keep DHCP (ipv4.method=auto), not pin the leased address as
# static (issue 45 item 6: netlink's address lifetimes tell a lease), and the plan says so.
nm_leased_address() {
    step 9 "a leased address is not written as static"
    local p9=/etc/daqtune/lifecycle-vm-nm-noaddr.yaml k=$NM_DIR/$NM_OURS.nmconnection lease
    # Back on NetworkManager's own automatic connection (step 8 deleted daqiri-tx).
    run nm-connect-9 nmcli device connect "$DATA_PORT"
    if nm_wait_lease; then pass "$DATA_PORT leased an address again"; else fail "$DATA_PORT leased an address again" "$(ip -4 -o addr show dev "$DATA_PORT" | tr '\n' ' ')"; return; fi
    lease=$(ip -4 -o addr show dev "$DATA_PORT" | awk '/ dynamic/ {print $4; exit}')
    info "leased $lease"
    # The profile without its nic.addresses block.
    awk '/^  addresses:/ {skip = 1; next} skip && /^    / {next} {skip = 0; print}' "$P" >"$p9"
    expect "the step-9 profile names no address" sh -c "! grep -q '192.0.2.10' '$p9'"
    run plan-9 daqtune --profile "$p9" plan --only nic.mtu
    if grep -q 'leased' "$st/plan-9.txt" && grep -qF "$lease" "$st/plan-9.txt"; then
        pass "the plan says $lease is a lease and is not written as static"
    else
        fail "the plan says $lease is a lease and is not written as static" "$(grep -i -e dhcp -e lease -e address "$st/plan-9.txt" | head -n 4 | tr '\n' ' ')"
    fi
    run apply-9 daqtune --profile "$p9" apply --yes --only nic.mtu
    expect_eq "apply --only nic.mtu exits 0" "$rc" 0
    expect "$k keeps DHCP (method=auto)" grep -qx 'method=auto' "$k"
    expect "$k does not pin the leased $lease" sh -c "! grep -q '^address[0-9]*=${lease%/*}/' '$k'"
    # NetworkManager takes the keyfile as it would at boot: the port leases again through it.
    run nm-load-9 nmcli connection load "$k"
    # The MTU change re-initialised the port: its carrier comes back a moment later, and
    # NetworkManager refuses to activate on a port without one (the first run: "device ens1 not
    # available because device has no carrier", exit 4). Wait for it, bounded.
    for _ in $(seq 1 60); do
        [ "$(cat "/sys/class/net/$DATA_PORT/carrier" 2>/dev/null)" = 1 ] && break
        sleep 0.5
    done
    run nm-up-9 nmcli connection up "$NM_OURS"
    expect_eq "nmcli connection up $NM_OURS exits 0" "$rc" 0
    if nm_wait_lease; then pass "through daqtune's keyfile $DATA_PORT still leases its address" "$(ip -4 -o addr show dev "$DATA_PORT" | awk '{print $4, $5, $6, $7, $8, $9}' | tr '\n' ' ')"; else fail "through daqtune's keyfile $DATA_PORT still leases its address" "$(ip -4 -o addr show dev "$DATA_PORT" | tr '\n' ' ')"; fi
    run revert-9 daqtune --profile "$p9" revert --yes
    expect_eq "revert exits 0" "$rc" 0
    expect "revert took $k" test ! -e "$k"
    rm -f "$p9"
    nmcli connection reload >/dev/null 2>&1 || true
}

# docs/apply.md, "NetworkManager": a port already managed by someone else's profile (the seed's
# daqiri-tx) gets no second daqtune profile; the plan prints the `nmcli connection modify`
# command instead, since daqtune does not rewrite files it does not own.
spark_foreign_profile() {
    step 8 "a port already in someone else's NetworkManager profile ($NM_THEIRS, as in seed 000)"
    local theirs=$NM_DIR/$NM_THEIRS.nmconnection advice="nmcli connection modify $NM_THEIRS ethernet.mtu 9000" h0
    run nm-add-8 nmcli connection add type ethernet ifname "$DATA_PORT" con-name "$NM_THEIRS" \
        ipv4.method disabled ipv6.method ignore 802-3-ethernet.mtu 1500
    expect_eq "nmcli connection add $NM_THEIRS exits 0" "$rc" 0
    run nm-up-8 nmcli connection up "$NM_THEIRS"
    expect_eq "nmcli connection up $NM_THEIRS exits 0" "$rc" 0
    expect "NetworkManager wrote $theirs" test -s "$theirs"
    expect_eq "$DATA_PORT carries $NM_THEIRS" "$(nm_port_connection)" "$NM_THEIRS"
    h0=$(sha256sum <"$theirs" 2>/dev/null)
    sums "$st/sums-8a" /etc/NetworkManager
    run plan-8 dq plan --only nic.mtu
    if grep -qF "$advice" "$st/plan-8.txt"; then pass "plan prints \`$advice\`"; else fail "plan prints \`$advice\`" "$(grep -v '^\$' "$st/plan-8.txt" | head -n 8 | tr '\n' ' ')"; fi
    if grep -qF "$NM_OURS.nmconnection" "$st/plan-8.txt"; then fail "plan proposes no second profile" "$(grep -F "$NM_OURS" "$st/plan-8.txt" | head -n 2 | tr '\n' ' ')"; else pass "plan proposes no second profile"; fi
    run apply-8 dq apply --yes --only nic.mtu
    expect_eq "apply --only nic.mtu exits 0" "$rc" 0
    if grep -qF "$advice" "$st/apply-8.txt"; then info "apply repeats the advice"; else info "apply does not repeat the advice (the plan carries it)"; fi
    expect "no second profile: no $NM_OURS.nmconnection" test ! -e "$NM_DIR/$NM_OURS.nmconnection"
    expect_eq "the only connection file for $DATA_PORT is $NM_THEIRS's" "$(nm_port_files)" "$theirs "
    expect_eq "$NM_THEIRS's keyfile untouched by daqtune" "$(sha256sum <"$theirs" 2>/dev/null)" "$h0"
    sums "$st/sums-8b" /etc/NetworkManager
    if cmp -s "$st/sums-8a" "$st/sums-8b"; then pass "apply wrote nothing under /etc/NetworkManager"; else fail "apply wrote nothing under /etc/NetworkManager" "$(diff "$st/sums-8a" "$st/sums-8b" | grep '^[<>]' | head -n 6 | tr '\n' ' ')"; fi
    expect_eq "MTU 9000 on $DATA_PORT now (SIOCSIFMTU)" "$(cat "/sys/class/net/$DATA_PORT/mtu")" 9000
    # The advice, followed: the profile now keeps the MTU, and the plan has nothing to say.
    run nm-modify-8 nmcli connection modify "$NM_THEIRS" ethernet.mtu 9000
    expect_eq "\`$advice\` exits 0" "$rc" 0
    run nmcli-mtu-8 nmcli -g 802-3-ethernet.mtu connection show "$NM_THEIRS"
    expect_eq "nmcli -g 802-3-ethernet.mtu connection show $NM_THEIRS" "$(grep -v -e '^\$' -e '^\[exit' "$st/nmcli-mtu-8.txt" | tail -n 1)" 9000
    run plan-8b dq plan --only nic.mtu
    # The MTU advice is gone; a profile with NIC settings NetworkManager keeps in [ethtool] (the
    # nm variant's rings, coalescing, pause) still gets theirs, rightly.
    if grep -q 'nmcli connection modify.*ethernet\.mtu' "$st/plan-8b.txt"; then fail "with $NM_THEIRS at MTU 9000 the plan gives no MTU advice" "$(grep 'nmcli' "$st/plan-8b.txt" | tr '\n' ' ')"; else pass "with $NM_THEIRS at MTU 9000 the plan gives no MTU advice"; fi
    run revert-8 dq revert --yes
    expect_eq "revert exits 0" "$rc" 0
    run nm-delete-8 nmcli connection delete "$NM_THEIRS"
    expect_eq "nmcli connection delete $NM_THEIRS exits 0" "$rc" 0
    sums "$st/sums-8c" "${boot_dirs[@]}"
    if cmp -s "$st/sums-after" "$st/sums-8c"; then pass "with $NM_THEIRS deleted, /etc and the boot configuration as after the revert"; else fail "with $NM_THEIRS deleted, /etc and the boot configuration as after the revert" "$(diff "$st/sums-after" "$st/sums-8c" | grep '^[<>]' | head -n 6 | tr '\n' ' ')"; fi
}

# Kernel start to this phase (firmware and boot loader time is in the harness's boot total);
# the fleet run's phases are SSH sessions of a booted guest, not boots.
case "$phase" in fleet-*) ;; *) echo "boot $(cut -d' ' -f1 /proc/uptime)" >>"$io/timings" ;; esac
case "$phase" in
    spark-*)
        # tests/vm/lifecycle-profile-spark.yaml: one pool of one 1G page, Spark's rcu_nocb_poll.
        TWO_POOLS=0
        # The virt machine's firmware decides the e1000e's name (slot or path): the port is
        # the e1000e's netdev, and the profile copied in step 1 names it.
        p=$(find "/sys/bus/pci/devices/$(e1000e_bdf)/net" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort | head -n 1)
        [ -z "$p" ] || DATA_PORT=$p
        NM_OURS=daqiri-$DATA_PORT
        KARGS="isolcpus=3 nohz_full=3 rcu_nocbs=3 rcu_nocb_poll irqaffinity=0-2 hugepagesz=1G hugepages=$HP_COUNT default_hugepagesz=1G"
        ;;
esac
case "$phase" in
    grub-1)
        install_and_baseline grub
        thp_baseline
        rings_baseline
        do_apply
        thp_applied
        rings_applied
        trial_armed 2t
        echo reboot >"$io/next"
        ;;
    grub-2)
        verify_after_reboot grub
        thp_after_reboot
        rings_after_reboot
        foreign_override
        do_revert grub
        echo reboot >"$io/next"
        ;;
    grub-3)
        verify_reverted
        thp_reverted
        rings_reverted
        mrrs_on_emulated_nic
        trial_breaker_arm
        echo reboot >"$io/next"
        ;;
    grub-4)
        trial_failed_boot
        echo reboot >"$io/next"
        ;;
    grub-5)
        trial_back_on_default
        echo poweroff >"$io/next"
        ;;
    extlinux-1)
        install_and_baseline extlinux
        expect "no GRUB on this disk" test ! -e /etc/default/grub
        do_apply
        extlinux_applied
        echo reboot >"$io/next"
        ;;
    extlinux-2)
        verify_after_reboot extlinux
        do_revert extlinux
        files_restored
        netplan_owns_port
        netplan_baseline
        netplan_apply_mtu
        echo reboot >"$io/next"
        ;;
    extlinux-3)
        netplan_verify_after_reboot
        netplan_precedence
        netplan_revert
        echo poweroff >"$io/next"
        ;;
    secureboot-1)
        # The image's grub.cfg was made at its provisioning boot, which had no UEFI: under
        # UEFI update-grub adds the firmware-setup entry (30_uefi-firmware), so daqtune's
        # update-grub would differ from the baseline by that alone. The host's own update-grub
        # under UEFI first, as on a host installed through UEFI.
        step 0 "update-grub under UEFI (before the baseline)"
        run update-grub-0 update-grub
        expect_eq "update-grub under UEFI exits 0" "$rc" 0
        install_and_baseline secureboot
        secure_boot_live S1
        secure_boot_platform_check
        mrrs_refused_by_lockdown
        do_apply
        if grep -q isolcpus /boot/grub/grub.cfg; then pass "apply ran update-grub: grub.cfg carries the arguments"; else fail "apply ran update-grub: grub.cfg carries the arguments" "no isolcpus in /boot/grub/grub.cfg"; fi
        echo reboot >"$io/next"
        ;;
    secureboot-2)
        verify_after_reboot grub
        secure_boot_live S3
        do_revert grub
        echo reboot >"$io/next"
        ;;
    secureboot-3)
        verify_reverted
        secure_boot_live S6
        echo poweroff >"$io/next"
        ;;
    spark-1)
        spark_boot_chain
        install_and_baseline spark
        do_apply spark
        if grep -q isolcpus /boot/grub/grub.cfg; then pass "apply ran update-grub: grub.cfg carries the arguments"; else fail "apply ran update-grub: grub.cfg carries the arguments" "no isolcpus in /boot/grub/grub.cfg"; fi
        echo reboot >"$io/next"
        ;;
    spark-2)
        verify_after_reboot spark
        do_revert grub
        echo reboot >"$io/next"
        ;;
    spark-3)
        verify_reverted
        spark_nm_reverted
        spark_foreign_profile
        echo poweroff >"$io/next"
        ;;
    nm-1)
        nm_boot_chain
        install_and_baseline nm
        do_apply nm
        trial_armed 2t
        echo reboot >"$io/next"
        ;;
    nm-2)
        verify_after_reboot nm
        do_revert grub
        echo reboot >"$io/next"
        ;;
    nm-3)
        verify_reverted
        spark_nm_reverted
        spark_foreign_profile
        nm_leased_address
        echo poweroff >"$io/next"
        ;;
    # The fleet run (tests/vm/fleet-ansible.sh): the same steps, run over SSH between the
    # Ansible role's runs; the role installs, applies, reboots and reverts, these phases assert
    # what the CLI phases above assert about the same states. fleet-a is the GRUB guest,
    # fleet-b the extlinux guest.
    fleet-grub-1a|fleet-extlinux-1a)
        step 1 "before the role installs the .deb"
        wait_settled
        write_profiles
        not_installed_refused
        partial_baseline
        if [ "$phase" = fleet-grub-1a ]; then
            thp_baseline
            rings_baseline
        else
            expect "no GRUB on this disk" test ! -e /etc/default/grub
        fi
        ;;
    fleet-grub-1b|fleet-extlinux-1b)
        step 1b "the role installed the .deb; check (kept), checksums"
        v=${phase#fleet-}
        package_installed "${v%-1b}"
        baseline
        ;;
    fleet-grub-1c)
        step 2 "the role applied (daqtune_reboot=false): the effects right away"
        applied_now
        thp_applied
        rings_applied
        trial_armed 2t
        ;;
    fleet-grub-2)
        verify_after_reboot grub
        thp_after_reboot
        rings_after_reboot
        foreign_override
        ;;
    fleet-extlinux-2)
        verify_after_reboot extlinux
        extlinux_applied
        ;;
    fleet-grub-3|fleet-extlinux-3)
        step 6a "the role reverted (and rebooted)"
        v=${phase#fleet-}
        reverted_files "${v%-3}"
        verify_reverted
        if [ "$phase" = fleet-grub-3 ]; then
            thp_reverted
            rings_reverted
            mrrs_on_emulated_nic
        else
            expect_eq "extlinux.conf's DEFAULT is the original label again" \
                "$(awk 'toupper($1)=="DEFAULT" {print $2; exit}' /boot/extlinux/extlinux.conf)" primary
        fi
        ;;
    # Partial reverts (issue 42 deliverable 4) after the full apply, before the role's revert:
    # P1 reverts some settings of each kind, the harness reboots, P2 checks the boot.
    fleet-grub-P1)
        partial_revert_grub
        ;;
    fleet-extlinux-P1)
        partial_revert_extlinux
        ;;
    fleet-grub-P2)
        partial_booted grub
        ;;
    fleet-extlinux-P2)
        partial_booted extlinux
        ;;
    # The failing trial (issue 42) on fleet-a, beside fleet-b's netplan steps: armed through
    # the CLI, its trial boot, the boot back on the previous default.
    fleet-grub-T1)
        trial_breaker_arm
        ;;
    fleet-grub-T2)
        trial_failed_boot
        ;;
    fleet-grub-T3)
        trial_back_on_default
        ;;
    fleet-extlinux-3n)
        netplan_owns_port
        netplan_baseline
        netplan_apply_mtu
        ;;
    fleet-extlinux-4)
        netplan_verify_after_reboot
        netplan_precedence
        netplan_revert
        ;;
    *)
        echo "lifecycle-guest: unknown phase $phase" >&2
        exit 2
        ;;
esac
end_step
sync
exit 0
