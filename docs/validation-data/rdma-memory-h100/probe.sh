#!/bin/sh
# Read-only look at the GPU machine's RDMA/GPUDirect prerequisites, then the buffer providers.
echo "== kernel/modules"; uname -r
ls /sys/class/infiniband 2>&1 | head
ls /sys/module 2>/dev/null | grep -E "^(nvidia|nvidia_peermem|ib_core|ib_uverbs|rdma_rxe|mlx5_ib)$"
head -2 /proc/driver/nvidia/version
echo "== libs"; ls /usr/lib/x86_64-linux-gnu/ 2>/dev/null | grep -E "^lib(ibverbs|rdmacm|cuda)\.so" 
echo "== buffer providers"
.dev-bin/rdma-lib-tests --nocapture --test-threads=1 buffer 2>&1
echo "== daqtune-rdma --list"; .dev-bin/daqtune-rdma --list; echo "rc=$?"
echo "== daqtune selftest rdma --memory device"
.dev-bin/daqtune selftest rdma --dev none0 --peer-dev none1 --memory device --format json > $OUT/selftest-rdma-device.json; echo "rc=$?"
grep -m3 '"notes"' -A2 $OUT/selftest-rdma-device.json
echo "== daqtune selftest rdma --memory host_pinned"
.dev-bin/daqtune selftest rdma --dev none0 --peer-dev none1 --memory host_pinned --test write --duration 0.2 --format json > $OUT/selftest-rdma-pinned.json; echo "rc=$?"
grep -m3 '"notes"' -A2 $OUT/selftest-rdma-pinned.json
