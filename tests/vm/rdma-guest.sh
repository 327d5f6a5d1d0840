#!/bin/sh
# Guest side of the soft-RoCE self-test (run by tests/vm/rxe-vm.sh inside the VM, chrooted into
# the host's root, results in $OUT):
#
#   rdma-guest.sh DAQTUNE_BIN [SECONDS] [SIZE] [SLOTS] [QP_TIMEOUT] [PERFTEST_ITERS]
#
# DAQTUNE_BIN is the main `daqtune` binary, a path or a name in $OUT (where the harness mounts
# the host's output directory); `daqtune-rdma` (built with --features rdma) must sit next to it. Every run goes through `daqtune selftest rdma`.
#
# 1. a veth pair dqa (198.18.0.1) <-> dqb (198.18.0.2) and an rxe device on each end;
# 2. policy routing so that traffic between the two local addresses leaves through the veth
#    instead of the kernel's local shortcut (rxe only accepts packets that arrive on its own
#    netdev, and the point is to cross the "wire");
# 3. WRITE, SEND and SEND ping-pong rxe0 -> rxe1                    -> $OUT/daqtune-rdma.json
# 4. the same with --peer over a TCP side channel, and a run with injected corruption that must
#    fail (proof that the receiver verifies what crossed the wire)
# 5. two-port mode (--tx-if/--rx-if): the ports move into private namespaces with their RDMA
#    devices, first on a bare veth pair with --soft-roce (daqtune makes the rxe devices over
#    RDMA netlink), then on dqa/dqb themselves; the host state before and after each goes to
#    $OUT/state-*.txt (the test compares them)
# 6. perftest's ib_write_bw on rxe0/rxe1 (restored by step 5) as the reference -> $OUT/ib_write_bw.txt
set -u
daq=$1
secs=${2:-2}
size=${3:-65536}
slots=${4:-64}
# ACK timeout exponent for both tools: 19 = 2.1 s. Under emulation the default 14 (67 ms)
# expires while packets still sit in the slow software path, and the spurious go-back-N
# retransmissions are all the run then measures (and expose rxe retransmission bugs).
qpt=${5:-19}
# Two-port runs: on 6.1, whose rxe cannot follow its netdev into a namespace, the run fails
# whatever the timeout and a short one (12 = 16.8 ms) only makes it fail sooner; on a kernel
# where the run must pass, a short ACK timeout under emulation on a busy host fails it by
# timing, so it gets the same as the other runs.
case $(uname -r) in
6.1.*) pqpt=12 ;;
*) pqpt=$qpt ;;
esac
# ib_write_bw iterations (its -D duration mode reported 0 Gb/s on a loaded host here).
iters=${6:-300}
out=${OUT:-/tmp/out}
case $daq in
/*) ;;
*) daq=$out/$daq ;;
esac

say() { echo "rdma-guest [$(cut -d' ' -f1 /proc/uptime)s]: $*"; }
die() { say "FAIL: $*"; exit 1; }

w() { echo "$2" >"$1" || die "write $2 to $1"; }

# /tmp and /run are the VM's own tmpfs: a binary there on the host is not visible here.
[ -x "$daq" ] || die "$daq is not visible in the VM (build it outside /tmp and /run)"
[ -x "$(dirname "$daq")/daqtune-rdma" ] || die "daqtune-rdma is not next to $daq"
rdma_test() { "$daq" selftest rdma "$@"; }

uname -r >"$out/kernel.txt"
say "network setup"
ip link add dqa type veth peer name dqb || die "veth pair"
for c in all default dqa dqb; do
    w /proc/sys/net/ipv4/conf/$c/rp_filter 0
    w /proc/sys/net/ipv4/conf/$c/accept_local 1
done
# One `ip -batch` (every exec costs under emulation). Jumbo MTU so rxe runs a 4096-byte path
# MTU. Local deliveries only for packets that came in over the veth; everything else addressed
# to the other end goes out of the veth (table 100). Static neighbours: the RC address vector
# needs no ARP round.
ip -batch - <<EOF || die "ip -batch"
link set lo up
link set dqa mtu 9000
link set dqb mtu 9000
addr add 198.18.0.1/24 dev dqa
addr add 198.18.0.2/24 dev dqb
link set dqa up
link set dqb up
rule add pref 10 iif dqa lookup local
rule add pref 11 iif dqb lookup local
route add 198.18.0.2 dev dqa src 198.18.0.1 table 100
route add 198.18.0.1 dev dqb src 198.18.0.2 table 100
rule add pref 20 lookup 100
rule add pref 30 lookup local
rule del pref 0 lookup local
neigh replace 198.18.0.2 lladdr $(cat /sys/class/net/dqb/address) dev dqa nud permanent
neigh replace 198.18.0.1 lladdr $(cat /sys/class/net/dqa/address) dev dqb nud permanent
EOF

if command -v rdma >/dev/null 2>&1; then
    rdma link add rxe0 type rxe netdev dqa || die "rdma link add rxe0"
    rdma link add rxe1 type rxe netdev dqb || die "rdma link add rxe1"
else
    # Older rdma_rxe: the module parameter creates the device (named rxe0, rxe1 in order).
    w /sys/module/rdma_rxe/parameters/add dqa
    w /sys/module/rdma_rxe/parameters/add dqb
fi

# RoCE v2 GID index of each device's IPv4 address (for perftest; daqtune-rdma finds it itself).
gid_index() {
    d=/sys/class/infiniband/$1/ports/1
    for f in "$d"/gids/*; do
        i=${f##*/}
        case "$(cat "$f" 2>/dev/null)" in
            0000:0000:0000:0000:0000:ffff:*)
                [ "$(cat "$d/gid_attrs/types/$i" 2>/dev/null)" = "RoCE v2" ] && { echo "$i"; return; } ;;
        esac
    done
    echo 1
}
g0=$(gid_index rxe0)
g1=$(gid_index rxe1)
say "rxe0 gid[$g0] rxe1 gid[$g1]"

say "daqtune selftest rdma: write, send, pingpong for ${secs}s each, ${size}-byte messages"
# Warm-up, not measured: the first run pages the binaries in over 9p, which under emulation
# costs more than the transfer itself (perftest's binary is small, ours are not).
rdma_test --dev rxe0 --peer-dev rxe1 --test write,send,pingpong --duration 0.3 --size "$size" \
    --slots "$slots" --qp-timeout "$qpt" >/dev/null 2>&1
rdma_test --dev rxe0 --peer-dev rxe1 --test write,send,pingpong --duration "$secs" --size "$size" \
    --slots "$slots" --qp-timeout "$qpt" --json-out "$out/daqtune-rdma.json" >"$out/daqtune-rdma.txt" 2>&1
echo $? >"$out/daqtune-rdma.rc"
cat "$out/daqtune-rdma.txt"

say "daqtune selftest rdma --peer: the same over a TCP side channel (rxe1 serves), write,send for 1s"
# Not through rdma_test: `$!` of a backgrounded function is its subshell, and killing that
# left the server (and its daqtune-rdma) running for the rest of the VM, where the SIGKILL step
# below took it for a helper of the killed run.
"$daq" selftest rdma --listen 198.18.0.2:18516 --dev rxe1 >"$out/daqtune-rdma-server.txt" 2>&1 &
server=$!
# Wait for the server's own "listening" line (or its end), however slow the emulation is.
until grep -q listening "$out/daqtune-rdma-server.txt" 2>/dev/null || ! kill -0 "$server" 2>/dev/null; do
    sleep 0.1
done
rdma_test --dev rxe0 --peer 198.18.0.2:18516 --test write,send --duration 1 --size "$size" \
    --slots "$slots" --qp-timeout "$qpt" --json-out "$out/daqtune-rdma-peer.json" >"$out/daqtune-rdma-peer.txt" 2>&1
echo $? >"$out/daqtune-rdma-peer.rc"
kill "$server" 2>/dev/null
wait "$server" 2>/dev/null
cat "$out/daqtune-rdma-peer.txt"

say "fault injection: every 5th WRITE carries a broken checksum; the run must fail"
rdma_test --dev rxe0 --peer-dev rxe1 --test write --duration 1 --size "$size" --slots "$slots" \
    --qp-timeout "$qpt" --inject-corruption 5 --json-out "$out/daqtune-rdma-corrupt.json" \
    >"$out/daqtune-rdma-corrupt.txt" 2>&1
echo $? >"$out/daqtune-rdma-corrupt.rc"
grep -E "^(pass|fail|error|skip) " "$out/daqtune-rdma-corrupt.txt"

say "SIGINT in the middle of a run: the helper ends it, reports, and the exit is 130"
"$daq" selftest rdma --dev rxe0 --peer-dev rxe1 --test write --duration 30 --size "$size" \
    --slots "$slots" --qp-timeout "$qpt" --format json >"$out/sigint.json" 2>"$out/sigint.err" &
victim=$!
# Mid-run = WRITEs are arriving at rxe1 (its packet counter moved by a few messages' worth),
# not a guessed number of seconds: under emulation on a busy host start-up can take longer.
rcvd() { cat /sys/class/infiniband/rxe1/ports/1/hw_counters/rcvd_pkts 2>/dev/null || echo 0; }
base=$(rcvd)
until [ "$(rcvd)" -ge $((base + 256)) ] || ! kill -0 "$victim" 2>/dev/null; do
    sleep 0.1
done
kill -INT "$victim"
wait "$victim"
echo $? >"$out/sigint.rc"

say "GPU memory kinds without a GPU: every run is a skip that names the reason"
rdma_test --dev rxe0 --peer-dev rxe1 --memory host_pinned --test write --duration 0.2 \
    --format json >"$out/daqtune-rdma-pinned.json" 2>&1
echo $? >"$out/daqtune-rdma-pinned.rc"

# Host state the two-port runs must leave as they found it: RDMA netns mode, RDMA links and their
# netdevs, addresses, permanent neighbours, named namespaces, leftover journals.
state() {
    {
        rdma system show 2>&1 | sed 's/ copy-on-fork.*//'
        # Sorted: a device made again by --recover gets a new index, and the list is in
        # index order, so the same set of links may print in another order.
        rdma link show 2>&1 | sed 's/ state.*netdev / netdev /' | sort
        for i in dqa dqb dqc dqd; do
            echo "$i $(ip -o -4 addr show dev "$i" 2>&1 | awk '{print $4}' | sort | tr '\n' ' ')"
        done
        ip neigh show nud permanent 2>&1 | sort
        echo "netns: $(find /run/netns -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort | tr '\n' ' ')"
        echo "journals: $(find /run/daqtune/selftest -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort | tr '\n' ' ')"
    } >"$1"
}

say "two-port mode on a bare veth pair dqc/dqd with --soft-roce"
ip link add dqc type veth peer name dqd || die "veth pair dqc/dqd"
{ ip link set dqc up && ip link set dqd up; } || die "dqc/dqd up"
state "$out/state-before.txt"
# Exclusive mode is tried first and refused for soft-RoCE (EOPNOTSUPP), then shared mode. Whether
# the transfer itself works depends on the kernel's rdma_rxe having network-namespace support
# (Debian 12's 6.1 does not); the test asserts the placement and the restore, not the rate.
rdma_test --tx-if dqc --rx-if dqd --soft-roce --test write --duration 1 --size "$size" \
    --slots "$slots" --qp-timeout "$pqpt" --format json >"$out/ports-softroce.json" 2>"$out/ports-softroce.err"
echo $? >"$out/ports-softroce.rc"
cat "$out/ports-softroce.err"
state "$out/state-after-softroce.txt"

say "SIGKILL in the middle of a two-port run, then --recover"
# Killed as soon as its namespaces exist (the exclusive attempt's or the shared one's, whichever
# the poll sees): whatever the run had changed, --recover must put back. The helpers it started
# die with it (PR_SET_PDEATHSIG), so nothing holds the namespaces.
# (Not through rdma_test: `$!` of a backgrounded function is its subshell, not daqtune.)
"$daq" selftest rdma --tx-if dqa --rx-if dqb --test write --duration 5 --qp-timeout "$pqpt" \
    >/dev/null 2>"$out/killed.err" &
victim=$!
n=0
until [ "$(find /run/netns -mindepth 1 -maxdepth 1 -name 'daqtune-*' 2>/dev/null | wc -l)" -ge 2 ] || ! kill -0 "$victim" 2>/dev/null; do
    sleep 0.05
    n=$((n + 1))
done
kill -9 "$victim"
wait "$victim" 2>/dev/null
echo "killed after $n polls" >"$out/killed.txt"
state "$out/state-killed.txt"
# The helpers die with it (PR_SET_PDEATHSIG sends SIGTERM), asynchronously: --recover runs
# once they are gone (zombies do not count: they hold no namespace, and nobody in the VM may
# reap them), or after 10 s of guest time, recording any that outlived their parent.
# Shell builtins only (read, case): a fork per process under emulation would take seconds.
helpers_alive() {
    alive=""
    for st in /proc/[0-9]*/stat; do
        line=""
        read -r line 2>/dev/null <"$st" || continue
        case "$line" in
        *"(daqtune-rdma) Z"*) ;;
        *"(daqtune-rdma) "*) alive="$alive ${line%% *}" ;;
        esac
    done
    [ -n "$alive" ]
}
n=0
while helpers_alive && [ $n -lt 200 ]; do
    sleep 0.05
    n=$((n + 1))
done
echo "$alive" >"$out/helpers-after-kill.txt"
rdma_test --recover >"$out/recover.txt" 2>&1
echo $? >"$out/recover.rc"
cat "$out/recover.txt"
state "$out/state-after-recover.txt"

say "--veth: a veth pair between two namespaces with soft-RoCE made inside each"
rdma_test --veth --test write --duration 1 --size "$size" --slots "$slots" --qp-timeout "$pqpt" \
    --format json >"$out/veth.json" 2>"$out/veth.err"
echo $? >"$out/veth.rc"
cat "$out/veth.err"

say "two-port mode on dqa/dqb (their rxe0/rxe1 are unregistered by the move and made again)"
rdma_test --tx-if dqa --rx-if dqb --test write --duration 1 --size "$size" --slots "$slots" \
    --qp-timeout "$pqpt" --format json >"$out/ports-rxe.json" 2>"$out/ports-rxe.err"
echo $? >"$out/ports-rxe.rc"
cat "$out/ports-rxe.err"
state "$out/state-after-rxe.txt"
diff "$out/state-before.txt" "$out/state-after-rxe.txt" && say "host state restored"

if command -v ib_write_bw >/dev/null 2>&1; then
    say "ib_write_bw reference: rxe0 -> rxe1, ${size} bytes, $iters iterations"
    # The server starts slowly under emulation: retry the client until it connects. The
    # timeouts only guard against a hang (a busy host makes the emulation several times slower).
    timeout 600 ib_write_bw -d rxe1 -i 1 -x "$g1" -s "$size" -n "$iters" -u "$qpt" -F --report_gbits \
        >"$out/ib_write_bw.server.txt" 2>&1 &
    srv=$!
    # Until the server answers, or has given up (its own timeout bounds the wait).
    while :; do
        sleep 1
        timeout 540 ib_write_bw -d rxe0 -i 1 -x "$g0" -s "$size" -n "$iters" -u "$qpt" -F --report_gbits \
            198.18.0.2 >"$out/ib_write_bw.txt" 2>&1
        rc=$?
        { grep -q "Couldn't connect" "$out/ib_write_bw.txt" && kill -0 "$srv" 2>/dev/null; } || break
    done
    echo "$rc" >"$out/ib_write_bw.rc"
    wait "$srv"
    cat "$out/ib_write_bw.txt"
else
    say "ib_write_bw not installed on the host (apt-get install perftest): no reference"
fi
for d in rxe0 rxe1; do
    for f in /sys/class/infiniband/"$d"/ports/1/hw_counters/*; do
        echo "$d ${f##*/} $(cat "$f" 2>/dev/null)"
    done
done >"$out/hw_counters.txt"
exit "$(cat "$out/daqtune-rdma.rc")"
