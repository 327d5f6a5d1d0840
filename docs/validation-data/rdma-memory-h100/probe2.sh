#!/bin/sh
# Read-only: the live GPUDirect probe and the GPU buffer providers on the lent GPU machine.
echo "== daqtune selftest rdma --probe-gpudirect"
.dev-bin/daqtune selftest rdma --probe-gpudirect --format json > $OUT/probe-gpudirect.json; echo "rc=$?"
cat $OUT/probe-gpudirect.json
.dev-bin/daqtune selftest rdma --probe-gpudirect; echo "rc=$?"
.dev-bin/daqtune selftest rdma --probe-gpudirect --gpu 7; echo "rc=$?"
echo "== library tests: buffer providers and the probe"
.dev-bin/rdma-lib-tests --nocapture --test-threads=1 buffer gpudirect 2>&1 | grep -v "^$"
