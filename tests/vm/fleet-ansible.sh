#!/usr/bin/env bash
# Fleets for real (issue 27) and a host's whole life (issue 15) on the same two booted Debian 12
# guests: Ansible drives them over SSH through the role in deploy/ansible (install, apply, its
# own reboots, the rolling gate, facts, changed=0, revert), node_exporter serves daqtune's
# metrics, and between the role's runs the lifecycle's own steps (tests/vm/lifecycle-guest.sh
# fleet-*) assert every state the role leaves, as tests/vm/host-lifecycle.sh does with the CLI.
#
#   tests/vm/fleet-ansible.sh [--deb FILE] [--out DIR] [--keep] [--rebuild-image]
#
#   --deb FILE     the package the role installs (default: scripts/build-deb.sh builds it)
#   --out DIR      where the run goes (default: a new directory under target/fleet/)
#   --keep         keep the guests' disks (deleted otherwise; logs always stay)
#   --rebuild-image  rebuild the cached guest image (tests/vm/lifecycle-image.sh --rebuild)
#
# The guests are the lifecycle's two BIOS guests (tests/vm/lifecycle-image.sh, cached by
# content), in its shape (q35, `max` without ERMS under TCG with one thread, 4 vCPUs in two
# NUMA nodes of 2 and 4 GiB, the e1000e data port ens1 behind a root port on node 1, -netdev
# user,restrict=on): fleet-a boots the GRUB disk, fleet-b the extlinux disk (an IGX-style boot
# loader). Each has a second, management NIC on its own -netdev user,restrict=on whose only way
# in is hostfwd=tcp:127.0.0.1:PORT-:22 (and :9100 for node_exporter on fleet-a), ports found
# free at run time. Nothing leaves the VMs. A reboot (the role's, or the test's for netplan)
# ends its qemu (-no-reboot) and start_guest's loop starts a fresh one on the same disk. At the
# end of every boot the image's agent runs tests/vm/fleet-guest-boot.sh from the 9p share: own
# hostname, machine-id and an ed25519 host key made by the test (first boot), the test's key
# (ssh-keygen into the run directory) in root's authorized_keys, a static address on the
# management port from a .network file in /run, sshd and node_exporter started (the image keeps
# both disabled, so the CLI variants never run them), and tests/vm/fleet-guest-bytecode.py in the
# guest's Python: Ansible's module code compiled once per guest instead of on every task.
#
# The steps (F: the fleet's, asserted here; L: the lifecycle's, asserted in the guest by
# tests/vm/lifecycle-guest.sh PHASE over SSH; all results in OUT/results):
#   F1 boot both guests side by side; each answers on SSH with its own hostname
#   L1 (fleet-*-1a) before the package: a daqtune run from the unpacked .deb refuses the udev
#      rule; THP and ring baselines (fleet-a)
#   F2 site.yml --tags install,timer,facts: the role installs the local .deb on both (and enables
#      daqtune-report.timer on fleet-a)
#   L2 (fleet-*-1b) the package's files, no maintainer script, no unit enabled but the role's;
#      check (kept), /proc/cmdline and the checksums of /etc and the boot configuration (the
#      baseline of every later comparison)
#   F2b site.yml --limit fleet-a --tags tune with daqtune_reboot=false: the role applies and
#      only says a reboot is needed; L3 (fleet-grub-1c) the apply's effects right away
#   F3 the rolling gate: site.yml, serial 1, fleet-a given a profile it cannot meet (the lifecycle
#      profile that also requires gpu.driver: no NVIDIA driver, a skip, so the gate fails).
#      The role reboots fleet-a for what apply left pending, `qualify --level 1` fails, the
#      playbook fails and stops: fleet-b is not in the recap, its boot, checksums and cmdline
#      are unchanged and it has no daqtune journal
#   F4 site.yml on both: fleet-b applies and is rebooted by the role, both qualify;
#      tests/vm/fleet-facts.yml (a later playbook) reads ansible_local.daqtune back
#   L4 (fleet-*-2) the kernel line is the boot loader's own, check, a second (CLI) apply changes
#      nothing, units ran; THP, rings, a foreign grub.d override named (fleet-a); extlinux.conf
#      (fleet-b)
#   F5 site.yml again (both hosts at once): changed=0 on both, no reboot
#   F6 node_exporter on fleet-a: /metrics (forwarded port) carries daqtune's series with the
#      guest's own verdicts; the data port's MTU undone by hand shows as nic.mtu fail (gate 0)
#      after `systemctl start daqtune-report.service`; put back, pass again
#   LP partial reverts after the full apply (issue 42; P1, P2): fleet-a reverts
#      hugepages (its grub drop-in words and mount units), nic.rings (its .link keys) and
#      net.sysctl (its sysctl.d drop-in); fleet-b kernel.cmdline (its extlinux words), nic.mtu
#      and vm.stat-interval; both reboot once, and the kernel line, the live settings and the
#      files are exactly what stayed (the reverted ones gone, the others kept)
#   F7 site.yml --tags revert -e daqtune_revert_reboot=true (both at once): both reverted and
#      rebooted by the role; /etc and the boot configuration byte-identical to L2's baseline,
#      /proc/cmdline as then, MTU 1500
#   L5 (fleet-*-3) nothing of daqtune's left, the reports of L2 and now equal (daqtune diff);
#      THP, rings, and MRRS on the emulated NIC (fleet-a)
#   L6 netplan on fleet-b (fleet-extlinux-3n, then a reboot, fleet-extlinux-4): the site's
#      netplan file owns the port, `apply --only nic.mtu` writes daqtune's netplan drop-in,
#      netplan renders MTU 9000 at boot, a later site file is named, revert byte-identical
#   LT a failing kernel-argument trial on fleet-a beside L6 (issue 42; fleet-grub-T1..T3): a
#      unit that fails when isolcpus is on the line, `apply --only kernel.cmdline` arms the
#      trial, reboot: the trial boot misses multi-user.target, daqtune-trial.service fails the
#      trial (status and check daqtune.artifacts say which run and why), reboot: the previous
#      default entry, revert byte-identical
#   F8 both guests powered off from inside
#
# Python and Ansible: ansible-core pinned as in tune/tests/fleet_support (that list is the one
# source), from PyPI into a virtualenv cached in $DAQTUNE_VM_CACHE (or the cargo tests' one).
#
# Exit: 0 every assertion passed; 1 an assertion failed or a guest did not boot; 2 usage;
# 125 it cannot be prepared (no qemu, no ssh, no mirror, no PyPI), the reason on a line
# "fleet-ansible: SKIP: ...".
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export DAQTUNE_VM_CACHE=${DAQTUNE_VM_CACHE:-$repo/target/vm-cache}
cache=$DAQTUNE_VM_CACHE
boot_timeout=${DAQTUNE_VM_BOOT_TIMEOUT:-900}

deb=""
out=""
keep=0
rebuild=()
while (($#)); do
  case "$1" in
    --deb) deb=$(realpath "$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --rebuild-image) rebuild=(--rebuild); shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/!p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fleet-ansible: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

VM_NAME=fleet-ansible VM_TAG=fleet
# shellcheck source=tests/vm/lib.sh
. "$here/lib.sh"

vm_require qemu-system-x86_64:qemu-system-x86 qemu-img:qemu-utils ssh:openssh-client \
  ssh-keygen:openssh-client python3:python3 timeout:coreutils

# --- the virtualenv with ansible-core ---------------------------------------------------------
pin=$(grep -o '"ansible-core==[^"]*"' "$repo/tune/tests/it/fleet_support/mod.rs" | tr -d '"')
[[ -n $pin ]] || { echo "fleet-ansible: FAILED: no ansible-core pin in tune/tests/it/fleet_support/mod.rs"; exit 1; }
venv=""
# Whether a virtualenv's scripts can start: one made under another path (a checkout moved with
# its target/ directory) names that path's interpreter on their #! lines, and ansible-playbook
# then fails with "required file not found" (exit 127; seen 2026-11-29 with a moved cache).
venv_runs() { # DIR
  local interp
  interp=$(head -n 1 "$1/bin/ansible-playbook" 2>/dev/null) || return 1
  [[ $interp == '#!'* && -x ${interp#'#!'} ]]
}
# The cargo tests' virtualenv (same pin) when they made one; else one of our own, built once.
for d in "$repo"/target/tmp/fleet-venv-*; do
  if [[ -f $d/.complete ]] && venv_runs "$d" \
    && "$d/bin/pip" show ansible-core 2>/dev/null | grep -qx "Version: ${pin#ansible-core==}"; then
    venv=$d
  fi
done
if [[ -z $venv ]]; then
  venv=$cache/fleet-venv-${pin#ansible-core==}
  mkdir -p "$cache"
  exec 8>"$cache/fleet-venv.lock"
  flock 8
  if ! [[ -f $venv/.complete ]] || ! venv_runs "$venv"; then
    t=$SECONDS
    rm -rf "$venv"
    python3 -m venv "$venv" >"$cache/fleet-venv.log" 2>&1 \
      || skip "python3 -m venv failed (apt-get install python3-venv): $(tail -n 1 "$cache/fleet-venv.log")"
    "$venv/bin/pip" install --disable-pip-version-check --quiet --no-input "$pin" >>"$cache/fleet-venv.log" 2>&1 \
      || { rm -rf "$venv"; skip "pip install $pin failed (no PyPI?): $(tail -n 1 "$cache/fleet-venv.log")"; }
    touch "$venv/.complete"
    say "virtualenv with $pin made in $((SECONDS - t)) s"
  fi
  exec 8>&-
fi

# --- the image and the package ----------------------------------------------------------------
t=$SECONDS
set +e
img=$("$here/lifecycle-image.sh" "${rebuild[@]}")
rc=$?
set -e
case $rc in
  0) say "image $img ready in $((SECONDS - t)) s" ;;
  125) skip "the guest image: $(printf '%s' "$img" | sed -n 's/^lifecycle-image: SKIP: //p')" ;;
  *) echo "fleet-ansible: FAILED: the guest image could not be built (exit $rc)"; exit 1 ;;
esac
if [[ -z $deb ]]; then
  t=$SECONDS
  mapfile -t built < <("$repo/scripts/build-deb.sh" --out "$repo/target/debian")
  deb=${built[0]:-}
  [[ -f $deb ]] || { echo "fleet-ansible: FAILED: scripts/build-deb.sh made no package"; exit 1; }
  say "package $(basename "$deb") in $((SECONDS - t)) s"
fi
[[ -f $deb ]] || { echo "fleet-ansible: --deb $deb: no such file" >&2; exit 2; }

# --- the run directory ------------------------------------------------------------------------
if [[ -z $out ]]; then
  mkdir -p "$repo/target/fleet"
  out=$(mktemp -d "$repo/target/fleet/run.XXXXXX")
fi
mkdir -p "$out"
out=$(realpath "$out")
say "run directory $out"
: >"$out/results"
: >"$out/timings"
VM_RESULTS=$out/results # pass and fail (tests/vm/lib.sh) write here; nfail counts
check() { # DESCRIPTION COMMAND...: pass when the command succeeds
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
timing() { echo "$1 $2" >>"$out/timings"; say "$1: $2 s"; }

ssh-keygen -q -t ed25519 -N '' -C daqtune-fleet-test -f "$out/id_ed25519"
: >"$out/known_hosts"
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

guests=(fleet-a fleet-b)
declare -A port=() mport=() qpid=() mac=() variant=() base=() fmt=()
variant[fleet-a]=grub
variant[fleet-b]=extlinux
base[fleet-a]=$img/grub.raw
fmt[fleet-a]=raw
base[fleet-b]=$img/extlinux.qcow2
fmt[fleet-b]=qcow2
port[fleet-a]=$(free_port)
port[fleet-b]=$(free_port)
mport[fleet-a]=$(free_port)
mac[fleet-a]=52:54:00:fe:00:0a
mac[fleet-b]=52:54:00:fe:00:0b
# The profile fleet-a cannot meet: the lifecycle profile that also requires an NVIDIA driver.
sed -e 's/^name: lifecycle-vm$/name: lifecycle-vm-gpu/' \
  -e 's/^required: \[\(.*\)\]$/required: [\1, gpu.driver]/' \
  "$here/lifecycle-profile.yaml" >"$out/profile-gate.yaml"
if ! { grep -q '^name: lifecycle-vm-gpu$' "$out/profile-gate.yaml" && grep -q 'gpu.driver\]$' "$out/profile-gate.yaml"; }; then
  echo "fleet-ansible: FAILED: could not derive the gate profile from lifecycle-profile.yaml"
  exit 1
fi
for g in "${guests[@]}"; do
  dir=$out/$g
  mkdir -p "$dir/io/state"
  qemu-img create -q -f qcow2 -b "${base[$g]}" -F "${fmt[$g]}" "$dir/disk.qcow2"
  cp "$here/fleet-guest-boot.sh" "$dir/io/phase.sh"
  cp "$here/lifecycle-guest.sh" "$dir/io/guest.sh"
  cp "$here/fleet-guest-bytecode.py" "$dir/io/ansible-bytecode.py"
  cp "$deb" "$dir/io/daqtune.deb"
  cp "$here/lifecycle-profile.yaml" "$dir/io/profile.yaml"
  # The same profile with pcie.mrrs applicable (L1's refusal, L5's MRRS step).
  sed '/^not_applicable:/,$d' "$here/lifecycle-profile.yaml" >"$dir/io/profile-mrrs.yaml"
  echo fleet >"$dir/io/phase"
  echo stay >"$dir/io/next"
  echo "$g" >"$dir/io/hostname"
  tr -d '-' </proc/sys/kernel/random/uuid >"$dir/io/machine-id"
  echo "${mac[$g]}" >"$dir/io/mgmt-mac"
  cp "$out/id_ed25519.pub" "$dir/io/authorized_keys"
  ssh-keygen -q -t ed25519 -N '' -C "root@$g" -f "$dir/io/ssh_host_ed25519_key"
  # The guest's host key, known before it boots: nothing is accepted on first use.
  echo "[127.0.0.1]:${port[$g]} $(cut -d' ' -f1,2 "$dir/io/ssh_host_ed25519_key.pub")" >>"$out/known_hosts"
  : >"$dir/io/results"
done
cp "$out/profile-gate.yaml" "$out/fleet-a/io/profile-gate.yaml"
echo daqtune-report.timer >"$out/fleet-a/io/role-units"
touch "$out/fleet-a/io/node-exporter"

# Every qemu this run started goes when it ends, whatever happened.
# The test's own SSH commands share one connection per guest (a ControlMaster): a new
# connection's key exchange and login cost the guest about 1 CPU-second under TCG, a command
# on the open connection 0.08 (2026-11-30, docs/performance.md); the fleet runs ~100 of them.
# The socket's directory is short and the test's own: a Unix socket's path has at most 107 bytes.
cm_dir=$(mktemp -d /tmp/fleet-ssh.XXXXXX)
stop_guests() {
  local g
  for g in "${!qpid[@]}"; do
    kill "${qpid[$g]}" 2>/dev/null || true
  done
  for g in "${!port[@]}"; do
    gssh_master_exit "$g"
  done
  rm -rf "$cm_dir"
}
trap stop_guests EXIT

start_guest() { # NAME: qemu in the background, the lifecycle guest's shape plus a management NIC
  local g=$1 dir=$out/$1 fwd
  fwd="hostfwd=tcp:127.0.0.1:${port[$g]}-:22"
  [[ -n ${mport[$g]:-} ]] && fwd+=",hostfwd=tcp:127.0.0.1:${mport[$g]}-:9100"
  # The lifecycle guest's shape (tests/vm/lib.sh), its data NIC's MAC ending in the guest's
  # number, plus the management NIC.
  local vm_qemu
  vm_qemu_lifecycle_x86 q35 "$dir/disk.qcow2" "$dir/io" "52:54:00:da:00:0${g: -1}"
  vm_qemu+=(-netdev "user,id=mgmt,restrict=on,$fwd"
    -device "virtio-net-pci,netdev=mgmt,mac=${mac[$g]},bus=pcie.0"
    -chardev "file,id=console,path=$dir/console.log,append=on" -serial chardev:console -no-reboot)
  # A guest's reboot is a fresh qemu on the same disk: qemu exits at the reset (-no-reboot)
  # and is started again, unless the kernel's last word was a power-off. A reboot inside the
  # same qemu reached the agent about 20 s later than a fresh qemu (72.8 s of uptime against
  # 52.1 s, 2026-11-29, docs/performance.md). The console log is appended to across the boots;
  # qpid is this loop, which takes its qemu with it when stopped.
  (
    q=""
    trap 'kill "$q" 2>/dev/null; exit 143' TERM
    while :; do
      "${vm_qemu[@]}" </dev/null >>"$dir/qemu.log" 2>&1 &
      q=$!
      wait "$q" || exit
      tail -n 3 "$dir/console.log" | grep -q 'reboot: Power down' && exit 0
      echo "qemu started again: the guest reset at $(date -u +%T)" >>"$dir/qemu.log"
    done
  ) &
  qpid[$g]=$!
}

gssh() { # NAME COMMAND...: run a command in the guest as root over the forwarded port
  gssh_stdin "$@" </dev/null
}
gssh_stdin() { # NAME COMMAND...: the same, the command reading this shell's stdin
  local g=$1
  shift
  ssh -F /dev/null -i "$out/id_ed25519" -p "${port[$g]}" -o BatchMode=yes -o IdentitiesOnly=yes \
    -o UserKnownHostsFile="$out/known_hosts" -o StrictHostKeyChecking=yes \
    -o ControlMaster="${gssh_master:-auto}" -o ControlPath="$cm_dir/%C" -o ControlPersist=120 \
    -o ConnectTimeout="${gssh_connect_timeout:-20}" -o ServerAliveInterval="${gssh_alive_interval:-15}" \
    -o ServerAliveCountMax=4 -o LogLevel=ERROR \
    root@127.0.0.1 "$@"
}

wait_ssh() { # NAME [RESTARTS]: until the guest answers on SSH (its boot step ran); 1 on timeout
  local g=$1 restarts=${2:-0} t=$SECONDS
  while ((SECONDS - t < boot_timeout)); do
    kill -0 "${qpid[$g]}" 2>/dev/null || { say "$g: qemu exited (see $out/$g/qemu.log)"; return 1; }
    # The first boot has no no_timer_check yet (fleet-guest-boot.sh adds it): a kernel that
    # panicked in its timer check under TCG load is started again, at most RESTARTS times.
    if ((restarts > 0)) && grep -q 'end Kernel panic' "$out/$g/console.log" 2>/dev/null; then
      say "$g: kernel panic at boot ($(grep -m1 -o 'Kernel panic - not syncing: .*' "$out/$g/console.log" | cut -c1-80)): qemu started again"
      echo "$g panic-restart 1" >>"$out/timings"
      kill "${qpid[$g]}" 2>/dev/null || true
      wait "${qpid[$g]}" 2>/dev/null || true
      mv "$out/$g/console.log" "$out/$g/console-panic-$restarts.log"
      restarts=$((restarts - 1))
      start_guest "$g"
      continue
    fi
    if gssh "$g" true 2>/dev/null; then return 0; fi
    sleep 5
  done
  say "$g: no SSH after ${boot_timeout}s (console: $out/$g/console.log)"
  return 1
}

boot_id() { gssh "$1" cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo none; }
gssh_master_exit() { # NAME: close the shared connection (before a reboot: the next boot gets a new one)
  ssh -F /dev/null -p "${port[$1]}" -o ControlPath="$cm_dir/%C" -o LogLevel=QUIET -O exit root@127.0.0.1 \
    >/dev/null 2>&1 || true
}

# Checksums as tests/vm/lifecycle-guest.sh takes them (type, mode, owner, link target of every
# entry; every file's content) of /etc and the boot loader's configuration. The one exception:
# the content of the role's local facts file, a report the role rewrites on every run (its
# entry line stays). Taken here too, so the fleet's claims do not rest on the guest script.
sums() { # NAME OUTFILE
  local boot=/boot/grub
  [[ ${variant[$1]} == extlinux ]] && boot=/boot/extlinux
  # (Until 2026-11-27 this script went through gssh, whose stdin is /dev/null: the guest's
  # bash read no script, every checksum file said "no checksums", and the comparisons compared
  # that line with itself. same_sums now refuses a file without entries.)
  gssh_stdin "$1" bash -s "$boot" >"$2" <<'EOF'
set -o pipefail
{
    find /etc "$1" -xdev -printf '%y %m %U:%G %p -> %l\n' 2>/dev/null | LC_ALL=C sort
    find /etc "$1" -xdev -type f -print0 2>/dev/null | LC_ALL=C sort -z | xargs -0 -r sha256sum
} | grep -v '  /etc/ansible/facts.d/daqtune.fact$'
EOF
  [[ -s $2 ]] || echo "(no checksums: SSH to $1 failed)" >"$2"
}

same_sums() { # NAME BASELINE NOW: the trees are byte-identical, else the difference is shown
  local f
  for f in "$2" "$3"; do
    # A few thousand entries in /etc and the boot configuration; a handful is a failed read.
    if (($(grep -c ' /etc/' "$f") < 500)); then
      echo "    [$1] $f: $(grep -c . "$f") lines, not the checksums of /etc: $(head -c 200 "$f")"
      return 1
    fi
  done
  if diff -u "$2" "$3" >"$3.diff"; then return 0; fi
  head -n 40 "$3.diff" | sed "s/^/    [$1] /"
  return 1
}

# --- Ansible --------------------------------------------------------------------------------
# timeout: ssh's ConnectTimeout, which also bounds the banner exchange. While a guest reboots,
# qemu's user-mode forwarding accepts the connection on the host side and then has no guest to
# hand it to: each poll of the reboot module waits this long. 60 s made the two-host revert run
# 203 s against 99 s (2026-11-27); a loaded guest's handshake takes a few seconds.
cat >"$out/ansible.cfg" <<EOF
[defaults]
host_key_checking = True
timeout = 20
EOF
# The profiles are the lifecycle's, written under /etc/daqtune by its first phase (L1).
inventory() { # FILE PROFILE-OF-fleet-a
  cat >"$1" <<EOF
[daq]
fleet-a ansible_port=${port[fleet-a]} daqtune_profile=$2 daqtune_report_timer=true
fleet-b ansible_port=${port[fleet-b]} daqtune_profile=/etc/daqtune/lifecycle-vm.yaml

[daq:vars]
# ServerAlive: a guest that reboots under qemu's user-mode forwarding may never close the
# host side of the connection; without it the reboot module's ssh waited for ever (8 minutes
# in the first full run, until killed by hand).
ansible_host=127.0.0.1
ansible_user=root
ansible_ssh_private_key_file=$out/id_ed25519
ansible_ssh_common_args=-F /dev/null -o IdentitiesOnly=yes -o UserKnownHostsFile=$out/known_hosts -o StrictHostKeyChecking=yes -o ServerAliveInterval=15 -o ServerAliveCountMax=4
ansible_python_interpreter=/usr/bin/python3
daqtune_become=false
daqtune_deb=$deb
daqtune_junit_dest=$out/junit
daqtune_reboot_timeout=$boot_timeout
EOF
}
inventory "$out/inventory" /etc/daqtune/lifecycle-vm.yaml
inventory "$out/inventory-gate" /etc/daqtune/lifecycle-vm-gpu.yaml

playbook() { # LOG INVENTORY ARGS...: ansible-playbook, its output in OUT/LOG; sets $prc
  local name=$1 log=$out/$1 inv=$2
  shift 2
  local t=$SECONDS
  set +e
  ANSIBLE_CONFIG=$out/ansible.cfg ANSIBLE_HOME=$out/ansible-home \
    ANSIBLE_LOCAL_TEMP=$out/ansible-home/tmp ANSIBLE_ROLES_PATH=$repo/deploy/ansible/roles \
    ANSIBLE_COLLECTIONS_PATH=$out/ansible-home/collections ANSIBLE_SSH_CONTROL_PATH_DIR=$out/ansible-home/cp \
    ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 ANSIBLE_RETRY_FILES_ENABLED=0 ANSIBLE_PIPELINING=1 \
    ANSIBLE_DEPRECATION_WARNINGS=0 NO_COLOR=1 \
    "$venv/bin/ansible-playbook" -i "$inv" "$@" </dev/null >"$log" 2>&1
  prc=$?
  set -e
  timing "ansible-playbook ($name)" $((SECONDS - t))
}
# Why a playbook failed, in one line for the failed assertion (the verdict at the end is what a
# CI shows of this run: "exits 0" alone left CI's first failure of F2b unexplained, 2026-11-29):
# each failed or unreachable host's task, msg, rc and the start of its stderr.
playbook_cause() { # LOG
  python3 - "$out/$1" <<'PYEOF'
import json, re, sys
lines = open(sys.argv[1], errors="replace").read().splitlines()
task, error, causes, i = "?", "", [], 0
while i < len(lines):
    line = lines[i]
    m = re.match(r"TASK \[(.*)\]", line)
    if m:
        task, error = m.group(1), ""
    if line.startswith("[ERROR]: "):
        error = line[len("[ERROR]: "):]
    # ansible-core 2.19 prints the result as indented JSON after the host's line.
    m = re.match(r"(?:fatal|failed): \[([^\]]+)\]: (FAILED|UNREACHABLE)! => (.*)$", line)
    if m:
        text, j = m.group(3), i + 1
        if text.strip() == "{":
            while j < len(lines) and lines[j] != "}":
                text += "\n" + lines[j]
                j += 1
            text += "\n}"
        try:
            r = json.loads(text)
        except ValueError:
            r = {}
        err = " ".join(str(r.get("stderr") or "").split())[:240]
        causes.append("%s %s in '%s': %s%s%s" % (m.group(1), m.group(2).lower(), task,
            (str(r.get("msg") or error or "?"))[:200], " rc=%s" % r["rc"] if "rc" in r else "",
            " stderr: " + err if err else ""))
        i = j
    i += 1
print("; ".join(causes[:3]) or "no failed task in the log")
PYEOF
}
# An assertion that the last playbook exited 0, with the cause when it did not.
check_playbook() { # DESCRIPTION LOG
  if [[ $prc == 0 ]]; then pass "$1"; else fail "$1: exit $prc: $(playbook_cause "$2")"; fi
}
recap() { # LOG HOST: the host's PLAY RECAP line, empty when the host is not in it
  grep -E "^$2 +: ok=" "$out/$1" | tail -n 1 || true
}
counter() { # LOG HOST NAME: one counter of the recap (e.g. changed), -1 when absent
  local r
  r=$(recap "$1" "$2")
  [[ -n $r ]] || { echo -1; return; }
  sed -n "s/.* $3=\([0-9]*\).*/\1/p" <<<"$r"
}
# Whether the role's reboot task ran (not skipped) for a host in a playbook log.
rebooted_by_role() { # LOG HOST
  awk -v h="$2" '/^TASK \[daqtune : Reboot for the changes/ {t=1; next} /^TASK / {t=0}
    t && $0 ~ "^changed: \\[" h "\\]" {found=1} END {exit !found}' "$out/$1"
}

# The lifecycle's steps in the guests (tests/vm/lifecycle-guest.sh PHASE over SSH, results on
# the 9p share), one phase per guest at a time, the guests' phases side by side.
lpids=()
lguest() { case $1 in fleet-grub-*) echo fleet-a ;; *) echo fleet-b ;; esac; }
lphase() { # PHASE: in the background, in its guest; its exit code in OUT/GUEST/phase-PHASE.rc
  local ph=$1 g
  g=$(lguest "$1")
  ( set +e
    gssh "$g" bash /run/lifecycle-io/guest.sh "$ph" >"$out/$g/phase-$ph.log" 2>&1
    echo $? >"$out/$g/phase-$ph.rc" ) &
  lpids+=($!)
}
lwait() { # PHASE...: wait for the phases started, then show each one's new results
  local t=$SECONDS g ph seen
  ((${#lpids[@]} == 0)) || wait "${lpids[@]}" || true
  lpids=()
  for ph in "$@"; do
    g=$(lguest "$ph")
    seen=$(cat "$out/$g/.seen" 2>/dev/null || echo 0)
    tail -n +"$((seen + 1))" "$out/$g/io/results" | grep -v '^INFO' | sed "s/^/    [$g $ph] /" || true
    wc -l <"$out/$g/io/results" >"$out/$g/.seen"
    if [[ $(cat "$out/$g/phase-$ph.rc" 2>/dev/null) != 0 ]]; then
      fail "L $g: lifecycle-guest.sh $ph exits 0 (exit $(cat "$out/$g/phase-$ph.rc" 2>/dev/null); $out/$g/phase-$ph.log)"
    fi
  done
  timing "L $*" $((SECONDS - t))
}

# --- F1: the two guests, side by side -------------------------------------------------------
say "F1: booting fleet-a (GRUB; ssh 127.0.0.1:${port[fleet-a]}, node_exporter 127.0.0.1:${mport[fleet-a]}) and fleet-b (extlinux; ssh 127.0.0.1:${port[fleet-b]})"
t=$SECONDS
for g in "${guests[@]}"; do start_guest "$g"; done
for g in "${guests[@]}"; do
  if ! wait_ssh "$g" 2; then
    fail "F1 $g boots and answers on SSH"
    tail -n 20 "$out/$g/console.log" 2>/dev/null | sed 's/^/    console: /'
    echo "fleet-ansible: a guest did not boot; logs in $out"
    exit 1
  fi
  timing "F1 boot $g (qemu start to SSH, both booting)" $((SECONDS - t))
done
for g in "${guests[@]}"; do
  check "F1 $g answers on SSH as $g" test "$(gssh "$g" cat /proc/sys/kernel/hostname)" = "$g"
done

# --- L1, F2, L2: before the package, the role installs it, the baseline ----------------------
lphase fleet-grub-1a
lphase fleet-extlinux-1a
lwait fleet-grub-1a fleet-extlinux-1a
# Both hosts at once (daqtune_serial): nothing here is about the rollout's order.
playbook install.log "$out/inventory" "$repo/deploy/ansible/playbooks/site.yml" --tags install,timer,facts \
  -e daqtune_serial=2
check_playbook "F2 site.yml --tags install,timer,facts exits 0 (log: install.log)" install.log
for g in "${guests[@]}"; do
  # shellcheck disable=SC2016 # ssh joins its words for the guest's shell, which must see ${Status}
  check "F2 $g: the role installed the .deb (dpkg: daqtune install ok installed)" \
    test "$(gssh "$g" dpkg-query -W -f '\${Status}' daqtune 2>/dev/null)" = "install ok installed"
done
check "F2 fleet-a: daqtune-report.timer enabled by the role" \
  test "$(gssh fleet-a systemctl is-enabled daqtune-report.timer)" = enabled
lphase fleet-grub-1b
lphase fleet-extlinux-1b
lwait fleet-grub-1b fleet-extlinux-1b
for g in "${guests[@]}"; do
  sums "$g" "$out/$g/sums-before"
  gssh "$g" cat /proc/cmdline >"$out/$g/cmdline-before"
  boot_id "$g" >"$out/$g/boot-before"
done
check "F2 fleet-b: no daqtune journal before the rollout" \
  test -z "$(gssh fleet-b 'ls -A /var/lib/daqtune/journal 2>/dev/null')"

# --- F2b, L3: the role applies on fleet-a without rebooting ---------------------------------
# The lifecycle's "right after apply" assertions need the host between apply and its reboot.
# Only the role's tune tasks: the package is there (F2), and the gate run qualifies.
playbook apply-a.log "$out/inventory-gate" "$repo/deploy/ansible/playbooks/site.yml" --limit fleet-a \
  --tags tune -e daqtune_reboot=false
check_playbook "F2b site.yml --limit fleet-a --tags tune, daqtune_reboot=false exits 0 (log: apply-a.log)" apply-a.log
check "F2b fleet-a: the role applied" grep -q '^changed: \[fleet-a\]' \
  <(awk '/^TASK \[daqtune : Apply\]/ {t=1; next} /^TASK / {t=0} t' "$out/apply-a.log")
check "F2b fleet-a: the role says a reboot is needed and did not reboot" \
  grep -q 'daqtune: reboot needed for .*daqtune_reboot is false' "$out/apply-a.log"
check "F2b fleet-a: not rebooted" test "$(boot_id fleet-a)" = "$(cat "$out/fleet-a/boot-before")"
lphase fleet-grub-1c
lwait fleet-grub-1c

# --- F3: the rolling gate -------------------------------------------------------------------
playbook gate.log "$out/inventory-gate" "$repo/deploy/ansible/playbooks/site.yml"
check "F3 the rollout fails (ansible-playbook exit $prc)" test "$prc" != 0
check "F3 fleet-a failed its gate (recap failed=1)" test "$(counter gate.log fleet-a failed)" = 1
check "F3 the gate names qualify --level 1 and gpu.driver" \
  grep -q "daqtune qualify --level 1 failed on fleet-a: .*gpu.driver" "$out/gate.log"
check "F3 fleet-a was rebooted by the role before its gate" rebooted_by_role gate.log fleet-a
check "F3 fleet-a's boot changed" test "$(boot_id fleet-a)" != "$(cat "$out/fleet-a/boot-before")"
check "F3 the rollout stopped: fleet-b is not in the recap" test -z "$(recap gate.log fleet-b)"
check "F3 fleet-b: not rebooted" test "$(boot_id fleet-b)" = "$(cat "$out/fleet-b/boot-before")"
sums fleet-b "$out/fleet-b/sums-after-gate"
check "F3 fleet-b: /etc and /boot/extlinux unchanged" \
  same_sums fleet-b "$out/fleet-b/sums-before" "$out/fleet-b/sums-after-gate"
check "F3 fleet-b: /proc/cmdline unchanged" \
  test "$(gssh fleet-b cat /proc/cmdline)" = "$(cat "$out/fleet-b/cmdline-before")"
check "F3 fleet-b: no daqtune journal" \
  test -z "$(gssh fleet-b 'ls -A /var/lib/daqtune/journal 2>/dev/null')"
check "F3 fleet-a's JUnit report was fetched before the gate failed it" test -s "$out/junit/fleet-a.xml"

# --- F4, L4: the whole rollout --------------------------------------------------------------
for g in "${guests[@]}"; do boot_id "$g" >"$out/$g/boot-f4"; done
playbook site-1.log "$out/inventory" "$repo/deploy/ansible/playbooks/site.yml"
check_playbook "F4 site.yml exits 0 on both (log: site-1.log)" site-1.log
for g in "${guests[@]}"; do
  check "F4 $g: recap failed=0 unreachable=0" \
    test "$(counter site-1.log "$g" failed)/$(counter site-1.log "$g" unreachable)" = 0/0
  check "F4 $g: qualify --level 1 passed" grep -q "daqtune qualify --level 1 passed on $g" "$out/site-1.log"
done
check "F4 fleet-b was rebooted by the role (kernel arguments pending)" rebooted_by_role site-1.log fleet-b
check "F4 fleet-b's boot changed" test "$(boot_id fleet-b)" != "$(cat "$out/fleet-b/boot-f4")"
for g in "${guests[@]}"; do
  check "F4 $g: the tuned kernel line is live (isolcpus=3)" \
    grep -qE 'isolcpus=([^ ]*,)?3( |$)' <<<"$(gssh "$g" cat /proc/cmdline)"
  check "F4 $g: MTU 9000 on ens1" test "$(gssh "$g" cat /sys/class/net/ens1/mtu)" = 9000
done
playbook facts.log "$out/inventory" "$here/fleet-facts.yml"
check_playbook "F4 a later play reads ansible_local.daqtune back on both (log: facts.log)" facts.log
for g in "${guests[@]}"; do
  check "F4 $g: the facts play passed" test "$(counter facts.log "$g" failed)" = 0
done
lphase fleet-grub-2
lphase fleet-extlinux-2
lwait fleet-grub-2 fleet-extlinux-2

# --- F5: idempotence ------------------------------------------------------------------------
for g in "${guests[@]}"; do boot_id "$g" >"$out/$g/boot-f5"; done
playbook site-2.log "$out/inventory" "$repo/deploy/ansible/playbooks/site.yml" -e daqtune_serial=2
check_playbook "F5 the second site.yml exits 0 (log: site-2.log)" site-2.log
for g in "${guests[@]}"; do
  check "F5 $g: changed=0 failed=0" \
    test "$(counter site-2.log "$g" changed)/$(counter site-2.log "$g" failed)" = 0/0
  check "F5 $g: not rebooted" test "$(boot_id "$g")" = "$(cat "$out/$g/boot-f5")"
done

# --- F6: node_exporter ------------------------------------------------------------------------
scrape() { # OUTFILE: GET /metrics from fleet-a's node_exporter through the forwarded port
  python3 - "http://127.0.0.1:${mport[fleet-a]}/metrics" "$1" <<'EOF'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=60) as r:
    open(sys.argv[2], "wb").write(r.read())
EOF
}
# Every (id, subject, status) of the guest's own `check --format json` is a daqtune_check_status
# series of the scrape, and the scrape has no other; prints the differences.
same_verdicts() { # REPORT-JSON SCRAPE
  python3 - "$1" "$2" <<'EOF'
import json, re, sys
rep = json.load(open(sys.argv[1]))
want = set()
seen = {}
for c in rep["checks"]:
    key = (c["id"], c["subject"])
    seen[key] = seen.get(key, 0) + 1
    subj = c["subject"] if seen[key] == 1 else "%s #%d" % (c["subject"], seen[key])
    want.add((c["id"], subj, c["status"]))
# The exposition format does not fix the order of labels (node_exporter sorts them by name).
got = set()
series = re.compile(r'^daqtune_check_status\{(.*)\} 1$')
label = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)",?')
unesc = lambda v: re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), v)
for line in open(sys.argv[2]):
    m = series.match(line.strip())
    if m:
        labels = {k: unesc(v) for k, v in label.findall(m.group(1))}
        got.add((labels.get("id"), labels.get("subject"), labels.get("status")))
for x in sorted(want - got): print("    missing from /metrics:", x)
for x in sorted(got - want): print("    only in /metrics:", x)
print("    %d verdicts, %d series" % (len(want), len(got)))
sys.exit(0 if want == got and want else 1)
EOF
}
status_of() { # SCRAPE ID: the statuses of a check's series (labels in any order)
  grep "^daqtune_check_status{.*id=\"$2\"" "$1" | sed -n 's/.*status="\([^"]*\)".*/\1/p' | sort -u | tr '\n' ' '
}
t=$SECONDS
check "F6 node_exporter is active on fleet-a" \
  test "$(gssh fleet-a systemctl is-active prometheus-node-exporter.service)" = active
check "F6 daqtune-report.service (the timer's unit) runs and exits 0" \
  gssh fleet-a systemctl start daqtune-report.service
gssh fleet-a daqtune --profile /etc/daqtune/lifecycle-vm.yaml check --format json \
  >"$out/fleet-a/check-f6.json" || true
if scrape "$out/fleet-a/metrics-1.txt"; then
  pass "F6 GET /metrics from node_exporter (127.0.0.1:${mport[fleet-a]})"
  check "F6 the textfile collector read daqtune.prom without error" \
    grep -q '^node_textfile_scrape_error 0$' "$out/fleet-a/metrics-1.txt"
  check "F6 node_exporter serves daqtune_gate_passed 1" \
    grep -q '^daqtune_gate_passed 1$' "$out/fleet-a/metrics-1.txt"
  check "F6 /metrics carries the guest's own verdicts (daqtune_check_status)" \
    same_verdicts "$out/fleet-a/check-f6.json" "$out/fleet-a/metrics-1.txt"
  check "F6 nic.mtu passes in /metrics" test "$(status_of "$out/fleet-a/metrics-1.txt" nic.mtu)" = "pass "
else
  fail "F6 GET /metrics from node_exporter (127.0.0.1:${mport[fleet-a]})"
fi
# A setting undone by hand, then the next run of the timer's unit.
gssh fleet-a ip link set ens1 mtu 1500 || fail "F6 ip link set ens1 mtu 1500 in fleet-a"
gssh fleet-a systemctl start daqtune-report.service || true
if scrape "$out/fleet-a/metrics-2.txt"; then
  check "F6 after the MTU was undone by hand: nic.mtu fails in /metrics" \
    test "$(status_of "$out/fleet-a/metrics-2.txt" nic.mtu)" = "fail "
  check "F6 ... and daqtune_gate_passed is 0" grep -q '^daqtune_gate_passed 0$' "$out/fleet-a/metrics-2.txt"
else
  fail "F6 GET /metrics after the change"
fi
gssh fleet-a ip link set ens1 mtu 9000 || fail "F6 ip link set ens1 mtu 9000 in fleet-a"
gssh fleet-a systemctl start daqtune-report.service || true
if scrape "$out/fleet-a/metrics-3.txt"; then
  check "F6 MTU put back: nic.mtu passes again, gate 1" \
    test "$(status_of "$out/fleet-a/metrics-3.txt" nic.mtu)/$(grep -c '^daqtune_gate_passed 1$' "$out/fleet-a/metrics-3.txt")" = "pass /1"
else
  fail "F6 GET /metrics after the MTU was put back"
fi
timing "F6 node_exporter" $((SECONDS - t))

# --- LP: partial reverts, one boot with what stays (issue 42 deliverable 4) ----------------
# Each guest reverts some settings of each kind that shares a file or the boot with others
# (fleet-a: hugepages, nic.rings, net.sysctl; fleet-b: kernel.cmdline, nic.mtu,
# vm.stat-interval: P1), both reboot at once, and P2 checks that the kernel line, the live
# settings and the files are exactly what stayed. F7's revert then undoes the rest.
declare -A rb_before=() rb_t=()
reboot_start() { # GUEST: reboot it over SSH
  rb_before[$1]=$(boot_id "$1")
  rb_t[$1]=$SECONDS
  gssh "$1" systemctl --no-block reboot || true
  gssh_master_exit "$1"
}
reboot_wait() { # GUEST STEP WHY: wait for the new boot's SSH
  local g=$1 now
  # The old boot's sshd may still answer for a moment: wait for the new boot id. While the
  # guest is down, qemu's forwarding accepts the connection and no sshd answers it: each poll
  # waits for ConnectTimeout, so a short one here (the 20 s of gssh made a boot seen up to 25 s
  # late; a poll that times out on a slow handshake is simply made again). A poll that reached
  # the old boot's sshd as it stopped waits for the keep-alives: 4 x 2 s here, not 4 x 15 s.
  while ((SECONDS - rb_t[$g] < boot_timeout)); do
    sleep 3
    # Not kept as the shared connection: its keep-alives are too short for a busy guest.
    now=$(gssh_master=no gssh_connect_timeout=6 gssh_alive_interval=2 boot_id "$g")
    [[ $now == none || $now == "${rb_before[$g]}" ]] || break
  done
  timing "$2 $g reboot (systemctl reboot to SSH)" $((SECONDS - rb_t[$g]))
  check "$2 $g rebooted $3" test "$(boot_id "$g")" != "${rb_before[$g]}"
}
# Their first run (2026-11-28) found irq.affinity lost to the port reset of a rings/MTU revert
# and the 2M pool spread by the boot reservation; fixed in the engine (exec::port_reset,
# the node pool's revert and status), so they run again.
lphase fleet-grub-P1
lphase fleet-extlinux-P1
lwait fleet-grub-P1 fleet-extlinux-P1
reboot_start fleet-a
reboot_start fleet-b
reboot_wait fleet-a LP "with the settings the partial reverts left"
reboot_wait fleet-b LP "with the settings the partial reverts left"
lphase fleet-grub-P2
lphase fleet-extlinux-P2
lwait fleet-grub-P2 fleet-extlinux-P2

# --- F7, L5: revert through the role, reboot, byte-identical -------------------------------
# Both hosts at once, and their reboots too: the rollout's order was F3's and F4's claim.
for g in "${guests[@]}"; do boot_id "$g" >"$out/$g/boot-f7"; done
playbook revert.log "$out/inventory" "$repo/deploy/ansible/playbooks/site.yml" --tags revert \
  -e daqtune_revert_reboot=true -e daqtune_serial=2 -e daqtune_reboot_throttle=2
check_playbook "F7 site.yml --tags revert exits 0 (log: revert.log)" revert.log
for g in "${guests[@]}"; do
  check "F7 $g: reverted (changed) and rebooted by the role" \
    test "$(counter revert.log "$g" changed)" -ge 2
  check "F7 $g: its boot changed" test "$(boot_id "$g")" != "$(cat "$out/$g/boot-f7")"
  sums "$g" "$out/$g/sums-after"
  check "F7 $g: /etc and the boot configuration byte-identical with the state before the rollout" \
    same_sums "$g" "$out/$g/sums-before" "$out/$g/sums-after"
  check "F7 $g: /proc/cmdline as before the rollout" \
    test "$(gssh "$g" cat /proc/cmdline)" = "$(cat "$out/$g/cmdline-before")"
  check "F7 $g: MTU 1500 on ens1" test "$(gssh "$g" cat /sys/class/net/ens1/mtu)" = 1500
done
lphase fleet-grub-3
lphase fleet-extlinux-3
lwait fleet-grub-3 fleet-extlinux-3

# --- L6, LT: netplan on fleet-b; a failing kernel-argument trial on fleet-a (issue 42) ------
# fleet-a: a unit that fails when isolcpus is on the line, `apply --only kernel.cmdline` arms
# the trial (T1); its trial boot misses multi-user.target and the trial fails (T2); the next
# boot is the previous default's, and revert is byte-identical (T3).
lphase fleet-grub-T1
lphase fleet-extlinux-3n
lwait fleet-grub-T1 fleet-extlinux-3n
reboot_start fleet-a
reboot_start fleet-b
reboot_wait fleet-a LT "into the trial entry"
reboot_wait fleet-b L6 "for netplan's rendering"
lphase fleet-grub-T2
lphase fleet-extlinux-4
lwait fleet-grub-T2 fleet-extlinux-4
reboot_start fleet-a
reboot_wait fleet-a LT "back to the previous default"
lphase fleet-grub-T3
lwait fleet-grub-T3
gssh fleet-a systemctl --no-block poweroff || true

# --- F8: power off ------------------------------------------------------------------------
gssh fleet-b systemctl --no-block poweroff || true
for g in "${guests[@]}"; do
  t=$SECONDS
  while kill -0 "${qpid[$g]}" 2>/dev/null && ((SECONDS - t < 300)); do sleep 2; done
  if kill -0 "${qpid[$g]}" 2>/dev/null; then
    fail "F8 $g powers off within 300 s"
  else
    wait "${qpid[$g]}" 2>/dev/null || true
    unset "qpid[$g]"
  fi
done

# --- verdict --------------------------------------------------------------------------------
# The fleet's assertions (OUT/results) and the lifecycle's in each guest (OUT/NAME/io/results).
npass=$(grep -c '^PASS' "$out/results" || true)
for g in "${guests[@]}"; do
  npass=$((npass + $(grep -c '^PASS' "$out/$g/io/results" || true)))
  nfail=$((nfail + $(grep -c '^FAIL' "$out/$g/io/results" || true)))
done
say "total $((SECONDS - T0)) s; $npass assertions passed, $nfail failed"
if ((nfail)); then
  echo "failed assertions:"
  grep '^FAIL' "$out/results" | sed 's/^/  /'
  for g in "${guests[@]}"; do grep '^FAIL' "$out/$g/io/results" | sed "s/^/  [$g] /"; done
fi
((keep)) || rm -f "$out"/*/disk.qcow2
echo "fleet-ansible: logs, playbook outputs, checksums, scrapes and the guests' state in $out"
((nfail == 0)) || exit 1
