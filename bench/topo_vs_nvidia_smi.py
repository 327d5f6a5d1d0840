#!/usr/bin/env python3
"""Compare `daqtune topo --format json` with `nvidia-smi topo -m`, cell for cell.

    bench/topo_vs_nvidia_smi.py NVSMI_TOPO_M.txt NVSMI_GPUS.csv DAQTUNE_TOPO.json

NVSMI_GPUS.csv is `nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader`: it maps
nvidia-smi's GPU numbers (NVML order) to PCI bus ids, since daqtune numbers GPUs by PCI
address. Compared: every GPU<->GPU cell (PCIe class or NV#), each GPU's CPU affinity and NUMA
affinity. Prints one line per comparison and a summary; exit 0 when all match, 1 otherwise,
2 on unreadable input. Read-only; runs anywhere (python3, no packages).
"""
import json
import re
import sys


def norm_bus(s):
    """NVML's 00000000:00:06.0 -> sysfs 0000:00:06.0 (lower case, 4-digit domain min)."""
    m = re.fullmatch(r"\s*([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\s*", s)
    if not m:
        return None
    return "%04x:%s:%s.%s" % (int(m.group(1), 16), m.group(2).lower(), m.group(3).lower(), m.group(4))


def parse_nvsmi(text):
    """-> (labels, {row: {col: cell}}, {row: (cpu_affinity, numa_affinity)})"""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    lines = text.splitlines()
    head = next(i for i, l in enumerate(lines) if l.strip().startswith("GPU0"))
    cols = [c.strip() for c in lines[head].split("\t") if c.strip()]
    devs = [c for c in cols if re.fullmatch(r"(GPU|NIC)\d+", c)]
    cells, aff = {}, {}
    for l in lines[head + 1:]:
        if not l.strip():
            break
        f = l.split("\t")
        row = f[0].strip()
        cells[row] = {c: f[1 + i].strip() for i, c in enumerate(devs)}
        rest = [x.strip() for x in f[1 + len(devs):] if x.strip()]
        if row.startswith("GPU"):
            aff[row] = (rest[0] if rest else None, rest[1] if len(rest) > 1 else None)
    return devs, cells, aff


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        nv_text = open(argv[1], encoding="utf-8", errors="replace").read()
        gpus_csv = open(argv[2], encoding="utf-8").read()
        topo = json.load(open(argv[3], encoding="utf-8"))
        _, cells, aff = parse_nvsmi(nv_text)
    except (OSError, ValueError, StopIteration, IndexError) as e:
        print(f"cannot read the inputs: {e}", file=sys.stderr)
        return 2
    smi_bus = {}
    for line in gpus_csv.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[0].isdigit():
            smi_bus["GPU" + parts[0]] = norm_bus(parts[1])
    eps = topo["endpoints"]
    idx = {e["addr"]: i for i, e in enumerate(eps) if e["kind"] == "gpu"}
    bad = checked = 0
    gpus = sorted((g for g in cells if g.startswith("GPU")), key=lambda g: int(g[3:]))
    for a in gpus:
        for b in gpus:
            if a == b:
                continue
            ia, ib = idx.get(smi_bus.get(a)), idx.get(smi_bus.get(b))
            want = cells[a].get(b)
            got = topo["matrix"][ia][ib] if ia is not None and ib is not None else None
            ok = want == got
            checked += 1
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {a}-{b}: nvidia-smi {want}, daqtune "
                  f"{got} ({eps[ia]['label'] if ia is not None else '?'}-"
                  f"{eps[ib]['label'] if ib is not None else '?'})")
    for g in gpus:
        i = idx.get(smi_bus.get(g))
        cpu, numa = aff.get(g, (None, None))
        e = eps[i] if i is not None else {}
        got_cpu = e.get("cpu_affinity") or "N/A"
        got_numa = e.get("numa_affinity") or "N/A"
        for what, want, got in (("CPU affinity", cpu, got_cpu), ("NUMA affinity", numa, got_numa)):
            ok = want == got
            checked += 1
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {g} {what}: nvidia-smi {want}, daqtune {got}")
    print(f"{checked - bad}/{checked} match" + ("" if bad == 0 else f", {bad} differ"))
    return 0 if bad == 0 and checked > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
