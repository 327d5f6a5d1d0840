#!/bin/sh
# Regenerates selftest/src/gpu_sink/verify.ptx from verify.cu with clang's NVPTX back end (no
# CUDA toolkit needed), after checking the kernel's arithmetic in a CPU emulation.
# Needs clang with the nvptx64 target (Debian: clang-14 or later). The PTX is committed; building
# daqtune never runs this.
set -eu
cd "$(dirname "$0")/.."
src=selftest/src/gpu_sink/verify.cu
emu=$(mktemp)
trap 'rm -f "$emu"' EXIT
clang -O2 -DHOST_EMU -x c -o "$emu" scripts/gpu-verify-emu.c
"$emu"
# sm_52 / PTX ISA 4.1: the lowest target with 64-bit atomic min/max that every driver since
# CUDA 7 JIT-compiles for newer GPUs.
clang -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=sm_52 -O3 -S \
    -o selftest/src/gpu_sink/verify.ptx "$src"
echo "wrote selftest/src/gpu_sink/verify.ptx"
