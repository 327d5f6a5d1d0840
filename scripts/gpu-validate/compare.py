#!/usr/bin/env python3
"""Compare daqtune's GPU facts (daqtune.gpu/v1) and check report (daqtune.report/v1) with
nvidia-smi on the same machine. Read-only: it runs only nvidia-smi queries.

usage: compare.py FACTS.json [REPORT.json]
Prints one line per compared field and exits 1 if a stable field differs.
"""
import csv
import io
import json
import re
import subprocess
import sys

# nvidia-smi field -> (facts getter, stable?) ; unstable fields (instantaneous clocks,
# utilisation) are shown, never judged.
FIELDS = [
    "uuid", "name", "pci.bus_id", "driver_version", "persistence_mode", "pstate",
    "clocks.sm", "clocks.max.sm", "clocks.mem", "clocks.max.mem",
    "clocks.applications.graphics", "clocks.applications.memory",
    "clocks_event_reasons.active", "pcie.link.gen.max", "pcie.link.width.max",
    "pcie.link.gen.gpumax", "utilization.gpu", "compute_cap",
]


def smi(args):
    return subprocess.run(["nvidia-smi"] + args, capture_output=True, text=True)


def supported_fields():
    help_text = smi(["--help-query-gpu"]).stdout
    out = []
    for f in FIELDS:
        if f'"{f}"' in help_text:
            out.append(f)
        elif f == "clocks_event_reasons.active" and '"clocks_throttle_reasons.active"' in help_text:
            out.append("clocks_throttle_reasons.active")
    return out


def norm_bus(s):
    m = re.match(r"^([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$", s.strip())
    if not m:
        return s.strip().lower()
    dom = int(m.group(1), 16)
    d = f"{dom:04x}" if dom <= 0xFFFF else f"{dom:08x}"
    return f"{d}:{m.group(2).lower()}:{m.group(3).lower()}.{m.group(4)}"


def num(s):
    s = (s or "").strip()
    m = re.match(r"^(\d+)", s)
    return int(m.group(1)) if m else None


def bar1_totals():
    """UUID -> BAR1 total MiB from `nvidia-smi -q -d MEMORY` (no --query-gpu field exists)."""
    text = smi(["-q"]).stdout
    out, uuid, in_bar1 = {}, None, False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("GPU UUID"):
            uuid = s.split(":", 1)[1].strip()
        if s.startswith("BAR1 Memory Usage"):
            in_bar1 = True
            continue
        if in_bar1 and s.startswith("Total"):
            out[uuid] = num(s.split(":", 1)[1])
            in_bar1 = False
    return out


def main():
    facts = json.load(open(sys.argv[1]))
    report = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else None
    fields = supported_fields()
    r = smi(["--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
    print("# nvidia-smi --query-gpu=" + ",".join(fields) + " --format=csv,noheader,nounits")
    print(r.stdout.rstrip())
    if r.returncode != 0:
        print("nvidia-smi failed:", r.stderr.strip())
        return 1
    rows = [dict(zip(fields, [c.strip() for c in row])) for row in csv.reader(io.StringIO(r.stdout)) if row]
    bars = bar1_totals()
    gpus = {g["uuid"].lower(): g for g in facts.get("gpus", [])}
    bad = 0

    def cmp(uuid, field, smi_val, ours, stable=True):
        nonlocal bad
        same = str(smi_val) == str(ours)
        tag = "MATCH" if same else ("DIFF" if stable else "info")
        if stable and not same:
            bad += 1
        print(f"{tag:5} {uuid[:12]} {field:32} nvidia-smi={smi_val!s:24} daqtune={ours}")

    print(f"\n# {len(rows)} GPU(s) in nvidia-smi, {len(gpus)} in daqtune facts")
    if len(rows) != len(gpus):
        print("DIFF  GPU count")
        bad += 1
    for row in rows:
        uuid = row["uuid"]
        g = gpus.get(uuid.lower())
        if g is None:
            print(f"DIFF  {uuid} missing from daqtune facts")
            bad += 1
            continue
        sm, mem, pcie, cuda = g.get("sm_clock", {}), g.get("memory_clock", {}), g.get("pcie", {}), g.get("cuda") or {}
        cmp(uuid, "name", row.get("name"), g.get("name"))
        cmp(uuid, "pci.bus_id", norm_bus(row.get("pci.bus_id", "")), g.get("pci_bus_id"))
        if "driver_version" in row:
            cmp(uuid, "driver_version", row["driver_version"], facts.get("driver_version"))
        pm = {"Enabled": True, "Disabled": False}.get(row.get("persistence_mode"))
        cmp(uuid, "persistence_mode", pm, g.get("persistence_mode"))
        ps = row.get("pstate", "")
        cmp(uuid, "pstate", num(ps[1:]) if ps.startswith("P") else None, g.get("pstate"), stable=False)
        cmp(uuid, "clocks.max.sm", num(row.get("clocks.max.sm")), sm.get("max_mhz"))
        cmp(uuid, "clocks.max.mem", num(row.get("clocks.max.mem")), mem.get("max_mhz"))
        cmp(uuid, "clocks.sm (instantaneous)", num(row.get("clocks.sm")), sm.get("current_mhz"), stable=False)
        cmp(uuid, "clocks.mem (instantaneous)", num(row.get("clocks.mem")), mem.get("current_mhz"), stable=False)
        if "clocks.applications.graphics" in row:
            cmp(uuid, "clocks.applications.graphics/sm", num(row["clocks.applications.graphics"]), sm.get("applications_mhz"), stable=False)
        if "clocks.applications.memory" in row:
            cmp(uuid, "clocks.applications.memory", num(row["clocks.applications.memory"]), mem.get("applications_mhz"))
        for k in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
            if k in row:
                v = row[k]
                cmp(uuid, k, int(v, 16) if v.startswith("0x") else v, g.get("clock_event_reasons"), stable=False)
        cmp(uuid, "pcie.link.gen.max", num(row.get("pcie.link.gen.max")), pcie.get("max_link_gen"))
        cmp(uuid, "pcie.link.width.max", num(row.get("pcie.link.width.max")), pcie.get("max_link_width"))
        if "pcie.link.gen.gpumax" in row:
            cmp(uuid, "pcie.link.gen.gpumax", num(row["pcie.link.gen.gpumax"]), pcie.get("gpu_max_link_gen"))
        cmp(uuid, "utilization.gpu (instantaneous)", num(row.get("utilization.gpu")), g.get("utilization_pct"), stable=False)
        if "compute_cap" in row:
            cmp(uuid, "compute_cap", row["compute_cap"], cuda.get("compute_capability"))
        bar1 = (g.get("bar1") or {}).get("total_bytes")
        cmp(uuid, "BAR1 total MiB (-q)", bars.get(uuid), bar1 // (1024 * 1024) if bar1 is not None else None)

    if report is not None:
        print("\n# daqtune check --format json: GPU verdicts")
        for c in report.get("checks", []):
            if c["id"].startswith("gpu."):
                print(f"{c['status']:6} {c['id']:14} {c['subject']}: observed={c.get('observed')} expected={c.get('expected')} | {c['message']}")
                if c["status"] in ("skip", "error"):
                    bad += 1
    print(f"\n# {bad} difference(s) in stable fields")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
