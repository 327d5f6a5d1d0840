#!/usr/bin/env python3
"""Does one nvmlDeviceGetFieldValues call cost less than the health calls it could replace?

    bench/nvml_fields.py [ROUNDS] [FIRST]      (one JSON object on stdout)

`check`'s warm run spends ~1 ms per live NVML call on an H200 (docs/performance.md, "Issue
43, second device run"); 11 of its ~26 live calls read health counters that NVML also serves
as field values (nvml.h NVML_FI_DEV_*). This times, in one process after nvmlInit_v2 and the
handle of GPU 0, ROUNDS interleaved rounds of (a) the 11 calls as daqtune makes them and (b)
one nvmlDeviceGetFieldValues for the same facts (+ GPU temperature by its own call, which has
no field id in this NVML), and says whether both gave the same values. Read-only calls only.

NVML answers a repeated query from its own cache (after the first round the 11 calls take
~0.3 ms), and `check` asks each fact once per process, so what counts is the FIRST call of a
process: FIRST=fields or FIRST=individual (default) says which set goes first in round 0;
`first_ms` is that call's time. Run both in fresh processes, interleaved:
    for i in 1 2 3 4 5; do bench/nvml_fields.py 3 fields; bench/nvml_fields.py 3 individual; done
"""
import ctypes
import json
import statistics
import sys
import time

# nvml.h field ids (NVML_FI_DEV_*), with the name of the call daqtune makes for the same fact.
FIELDS = [
    (1, "ecc_current"),          # nvmlDeviceGetEccMode (current)
    (3, "ecc_sbe_vol_total"),    # nvmlDeviceGetTotalEccErrors(CORRECTED, VOLATILE)
    (4, "ecc_dbe_vol_total"),    # (UNCORRECTED, VOLATILE)
    (5, "ecc_sbe_agg_total"),    # (CORRECTED, AGGREGATE)
    (6, "ecc_dbe_agg_total"),    # (UNCORRECTED, AGGREGATE)
    (29, "retired_sbe"),         # nvmlDeviceGetRetiredPages(MULTIPLE_SBE) count
    (30, "retired_dbe"),         # nvmlDeviceGetRetiredPages(DBE) count
    (31, "retired_pending"),     # nvmlDeviceGetRetiredPagesPendingStatus
    (142, "remapped_cor"),       # nvmlDeviceGetRemappedRows
    (143, "remapped_unc"),
    (144, "remapped_pending"),
    (145, "remapped_failure"),
    (186, "power_instant"),      # nvmlDeviceGetPowerUsage (mW)
]


class Value(ctypes.Union):
    _fields_ = [("d", ctypes.c_double), ("ui", ctypes.c_uint), ("ul", ctypes.c_ulong),
                ("ull", ctypes.c_ulonglong), ("sll", ctypes.c_longlong)]


class FieldValue(ctypes.Structure):  # nvmlFieldValue_t
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint),
                ("timestamp", ctypes.c_longlong), ("latencyUsec", ctypes.c_longlong),
                ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int), ("value", Value)]


def value_of(f):
    t = f.valueType
    return {0: f.value.d, 1: f.value.ui, 2: f.value.ul, 3: f.value.ull, 4: f.value.sll}.get(t)


def main(rounds, first):
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as e:
        print(json.dumps({"error": f"no NVML here: {e}"}))
        return 1
    t0 = time.perf_counter()
    rc = lib.nvmlInit_v2()
    t1 = time.perf_counter()
    dev = ctypes.c_void_p()
    rc_h = lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev))
    t2 = time.perf_counter()
    out = {"init_rc": rc, "handle_rc": rc_h, "init_ms": round((t1 - t0) * 1e3, 3),
           "handle_ms": round((t2 - t1) * 1e3, 3), "rounds": rounds}
    if rc or rc_h:
        print(json.dumps(out))
        return 1
    u = ctypes.c_uint
    ull = ctypes.c_ulonglong

    def individual():
        v = {}
        cur, pend = u(), u()
        v["ecc_current"] = (lib.nvmlDeviceGetEccMode(dev, ctypes.byref(cur), ctypes.byref(pend)), cur.value)
        for name, err, counter in [("ecc_sbe_vol_total", 0, 0), ("ecc_dbe_vol_total", 1, 0),
                                   ("ecc_sbe_agg_total", 0, 1), ("ecc_dbe_agg_total", 1, 1)]:
            x = ull()
            v[name] = (lib.nvmlDeviceGetTotalEccErrors(dev, err, counter, ctypes.byref(x)), x.value)
        for name, cause in [("retired_sbe", 0), ("retired_dbe", 1)]:
            n = u(0)
            r = lib.nvmlDeviceGetRetiredPages(dev, cause, ctypes.byref(n), None)
            v[name] = (r, n.value)
        p = u()
        v["retired_pending"] = (lib.nvmlDeviceGetRetiredPagesPendingStatus(dev, ctypes.byref(p)), p.value)
        c, un, pe, fa = u(), u(), u(), u()
        r = lib.nvmlDeviceGetRemappedRows(dev, ctypes.byref(c), ctypes.byref(un), ctypes.byref(pe), ctypes.byref(fa))
        v["remapped_cor"], v["remapped_unc"] = (r, c.value), (r, un.value)
        v["remapped_pending"], v["remapped_failure"] = (r, pe.value), (r, fa.value)
        mw = u()
        v["power_instant"] = (lib.nvmlDeviceGetPowerUsage(dev, ctypes.byref(mw)), mw.value)
        return v

    def batched():
        arr = (FieldValue * len(FIELDS))()
        for i, (fid, _) in enumerate(FIELDS):
            arr[i].fieldId = fid
        r = lib.nvmlDeviceGetFieldValues(dev, len(FIELDS), arr)
        return r, {name: (arr[i].nvmlReturn, value_of(arr[i])) for i, (_, name) in enumerate(FIELDS)}

    temp = u()
    ind_ms, fv_ms, temp_ms = [], [], []
    last_ind = last_fv = None
    fv_rc = None
    first_ms = None
    for i in range(rounds):
        order = [0, 1] if (i % 2 == 0) == (first == "individual") else [1, 0]
        for which in order:
            a = time.perf_counter()
            if which == 0:
                last_ind = individual()
                ind_ms.append((time.perf_counter() - a) * 1e3)
                first_ms = ind_ms[0] if first_ms is None else first_ms
            else:
                fv_rc, last_fv = batched()
                fv_ms.append((time.perf_counter() - a) * 1e3)
                first_ms = fv_ms[0] if first_ms is None else first_ms
        a = time.perf_counter()
        lib.nvmlDeviceGetTemperature(dev, 0, ctypes.byref(temp))
        temp_ms.append((time.perf_counter() - a) * 1e3)

    def summary(xs):
        return {"median_ms": round(statistics.median(xs), 3), "min_ms": round(min(xs), 3),
                "max_ms": round(max(xs), 3)}

    # Same facts both ways? Power moves between the calls, so it is compared loosely. A fact
    # neither way could read (NOT_SUPPORTED: retired pages on a row-remapping GPU) is said as
    # such, not counted as agreeing.
    same, unread = {}, []
    for _, name in FIELDS:
        a, b = last_ind.get(name), last_fv.get(name)
        if a[0] != 0 and b[0] != 0:
            unread.append(f"{name} (rc {a[0]} / {b[0]})")
        elif name == "power_instant":
            same[name] = a[0] == 0 and b[0] == 0
        else:
            same[name] = a == b
    out["unread_both_ways"] = unread
    out.update(first=first, first_ms=round(first_ms, 3),
               individual_first_ms=round(ind_ms[0], 3), field_values_first_ms=round(fv_ms[0], 3),
               individual_11_calls=summary(ind_ms), field_values_1_call=summary(fv_ms),
               temperature_1_call=summary(temp_ms), field_values_rc=fv_rc,
               individual=last_ind, field_values=last_fv, same_values=same)
    print(json.dumps(out))
    lib.nvmlShutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20,
                  sys.argv[2] if len(sys.argv) > 2 else "individual"))
