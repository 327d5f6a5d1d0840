#!/usr/bin/env python3
"""Where a multi-GPU host's first run goes: cuInit and NVML, each in a fresh process.

    bench/cuinit_probe.py MODE      (one measurement, one JSON line on stdout)

MODE: cuda (dlopen libcuda + cuInit), cuda_attrs (+ the 5 attributes daqtune reads, per
device), nvml (nvmlInit_v2), nvml_noattach (nvmlInitWithFlags(NVML_INIT_FLAG_NO_ATTACH)),
nvml_nvlink (+ nvmlDeviceGetNvLinkState / RemotePciInfo_v2 for links 0..17 of every GPU).
Read-only driver calls only. Run it with CUDA_VISIBLE_DEVICES=i for one GPU, and several at
once (`for i in 0 1 2 3; do CUDA_VISIBLE_DEVICES=$i bench/cuinit_probe.py cuda & done; wait`)
to see whether the driver overlaps per-GPU set-up across processes (it did not on the lent
H200 machine: docs/performance.md, docs/validation-data/nvlink-h200x4/cuinit-probe.jsonl).
"""
import ctypes
import json
import os
import sys
import time


def ms(a, b):
    return round((b - a) * 1e3, 2)


def main(mode):
    out = {"mode": mode, "cvd": os.environ.get("CUDA_VISIBLE_DEVICES")}
    t0 = time.perf_counter()
    if mode in ("cuda", "cuda_attrs"):
        lib = ctypes.CDLL("libcuda.so.1")
        t1 = time.perf_counter()
        r = lib.cuInit(0)
        t2 = time.perf_counter()
        n = ctypes.c_int(0)
        lib.cuDeviceGetCount(ctypes.byref(n))
        out.update(dlopen_ms=ms(t0, t1), init_ms=ms(t1, t2), rc=r, count=n.value)
        if mode == "cuda_attrs":
            t3 = time.perf_counter()
            for i in range(n.value):
                d = ctypes.c_int()
                lib.cuDeviceGet(ctypes.byref(d), i)
                for a in (18, 75, 76, 116, 124):
                    v = ctypes.c_int()
                    lib.cuDeviceGetAttribute(ctypes.byref(v), a, d)
            out["attrs_ms"] = ms(t3, time.perf_counter())
    elif mode in ("nvml", "nvml_noattach", "nvml_nvlink"):
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        t1 = time.perf_counter()
        r = lib.nvmlInitWithFlags(2) if mode == "nvml_noattach" else lib.nvmlInit_v2()
        t2 = time.perf_counter()
        n = ctypes.c_uint(0)
        lib.nvmlDeviceGetCount_v2(ctypes.byref(n))
        out.update(dlopen_ms=ms(t0, t1), init_ms=ms(t1, t2), rc=r, count=n.value)
        if mode == "nvml_nvlink":
            class Pci(ctypes.Structure):
                _fields_ = [("legacy", ctypes.c_char * 16), ("domain", ctypes.c_uint),
                            ("bus", ctypes.c_uint), ("device", ctypes.c_uint),
                            ("did", ctypes.c_uint), ("sdid", ctypes.c_uint),
                            ("busid", ctypes.c_char * 32)]
            t3 = time.perf_counter()
            links = {}
            for i in range(n.value):
                h = ctypes.c_void_p()
                lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
                per = []
                for link in range(18):
                    st = ctypes.c_uint(9)
                    rs = lib.nvmlDeviceGetNvLinkState(h, link, ctypes.byref(st))
                    p = Pci()
                    rp = lib.nvmlDeviceGetNvLinkRemotePciInfo_v2(h, link, ctypes.byref(p))
                    per.append([link, rs, st.value, rp, p.busid.decode(errors="replace")])
                links[i] = per
            out["nvlink_ms"] = ms(t3, time.perf_counter())
            out["links"] = links
        lib.nvmlShutdown()
    else:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out["total_ms"] = ms(t0, time.perf_counter())
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
    except (OSError, AttributeError) as e:
        print(f"cuinit_probe: {e}", file=sys.stderr)
        sys.exit(1)
