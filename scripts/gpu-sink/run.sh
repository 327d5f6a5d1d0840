#!/bin/bash
# GPU-sink validation run (issue 9): the socket self-test with --gpu in host_pinned and copy
# modes, planted corruption counted by the GPU kernel, the GPU-less n/a path, and GPU id
# resolution by UUID and PCI bus id. Read-only GPU use: allocations and kernels only.
# Usage: run.sh DAQTUNE OUTDIR
set -u
B=$1
O=$2
mkdir -p "$O"
log() { echo "== $*" | tee -a "$O/run.log"; }
{
    date -u +%Y-%m-%dT%H:%M:%SZ
    uname -a
    grep PRETTY /etc/os-release 2>/dev/null
    cat /proc/driver/nvidia/version 2>/dev/null
    nvidia-smi -L 2>&1
    nvidia-smi --query-gpu=name,pci.bus_id,pcie.link.gen.current,pcie.link.width.current,pcie.link.gen.max,pcie.link.width.max --format=csv 2>&1
    nproc
} >"$O/host.txt" 2>&1
run() {
    local name=$1
    shift
    log "$name: $*"
    local t0 t1 rc
    t0=$(date +%s.%N)
    "$B" selftest socket "$@" --no-progress --format json >"$O/$name.json" 2>"$O/$name.stderr"
    rc=$?
    t1=$(date +%s.%N)
    echo "$name rc=$rc wall=$(awk "BEGIN{print $t1 - $t0}")s" | tee -a "$O/run.log"
}
run loopback-host_pinned --loopback --gpu 0 --gpu-memory host_pinned --duration 5
run loopback-copy --loopback --gpu 0 --gpu-memory copy --duration 5
run inject-host_pinned --loopback --gpu 0 --gpu-memory host_pinned --mode tcp,udp --duration 3 --inject-corruption 5
run inject-copy --loopback --gpu 0 --gpu-memory copy --mode tcp,udp --duration 3 --inject-corruption 5
run loopback-cpu --loopback --mode tcp --duration 3
run device-na --loopback --gpu 0 --gpu-memory device --duration 1
# No python on the device image is assumed: pick the fields out of the pretty-printed JSON.
UUID=$(grep -o '"uuid": "[^"]*"' "$O/loopback-copy.json" | head -1 | cut -d'"' -f4)
BUS=$(grep -o '"pci_bus_id": "[^"]*"' "$O/loopback-copy.json" | head -1 | cut -d'"' -f4)
[ -n "$UUID" ] && run by-uuid --loopback --gpu "$UUID" --gpu-memory copy --mode tcp --duration 2
[ -n "$BUS" ] && run by-bus --loopback --gpu "$BUS" --gpu-memory host_pinned --mode tcp --duration 2
run veth-copy --veth --gpu 0 --gpu-memory copy --duration 3
run veth-host_pinned --veth --gpu 0 --gpu-memory host_pinned --duration 3
run copy-16m --loopback --gpu 0 --gpu-memory copy --gpu-batch 16777216 --mode tcp --duration 3
log "done"
