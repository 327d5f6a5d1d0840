//! `pcie.topology`, `pcie.link`, `pcie.mps`, `pcie.aer`: the PCIe path between the GPUs and
//! the data-path NICs (seed 000 Steps 1-3, seed 001). Observations: daqtune never writes MPS,
//! link settings or ASPM (firmware's); `pcie.mrrs` and `pcie.acs` have modules of their own.

use crate::model::context::gpus::{at_rest, facts_at, pci_gpu_integrated};
use crate::model::context::nics::{
    cap_visibility_skip, data_path_nics, endpoints_or_skip, gpu_label, nic_devices, no_nic_reason,
    pci_gpus, pci_or_skip, NEEDS_ROOT,
};
use crate::model::context::Context;
use crate::model::tunable::Tunable;
use crate::model::verdict::Status;
use crate::model::verdict::{Area, Verdict};
use daqtune_probe::pci::config::Visibility;
use daqtune_probe::pci::topo::{classify, PathClass};
use daqtune_probe::pci::{link_label, PciAddr, PciDevice, PciTree, PortType};
use std::collections::BTreeSet;

pub const TOPOLOGY: Tunable = Tunable {
    id: "pcie.topology",
    area: Area::Pcie,
    title: "GPU <-> NIC PCIe path class (PIX/PXB/PHB/NODE/SYS)",
    aliases: &["topo", "topology"],
    doc: include_str!("../../../docs/checks/pcie.topology.md"),
    needs_root: false,
    profile_keys: &["pcie.topology_pass", "pcie.topology_fail"],
    check: run_topology,
    planner: None,
};

pub const LINK: Tunable = Tunable {
    id: "pcie.link",
    area: Area::Pcie,
    title: "PCIe link width and speed against what the link can do",
    aliases: &["speed", "pcie-speed"],
    doc: include_str!("../../../docs/checks/pcie.link.md"),
    needs_root: false,
    profile_keys: &[],
    check: run_link,
    planner: None,
};

pub const MPS: Tunable = Tunable {
    id: "pcie.mps",
    area: Area::Pcie,
    title: "Max Payload Size along the GPU and NIC paths",
    aliases: &["mps"],
    doc: include_str!("../../../docs/checks/pcie.mps.md"),
    needs_root: true,
    profile_keys: &[],
    check: run_mps,
    planner: None,
};

pub const AER: Tunable = Tunable {
    id: "pcie.aer",
    area: Area::Pcie,
    title: "PCIe error counters and ASPM on the GPU and NIC paths",
    aliases: &["aer", "aspm"],
    doc: include_str!("../../../docs/checks/pcie.aer.md"),
    needs_root: false,
    profile_keys: &["pcie.aer_correctable_warn"],
    check: run_aer,
    planner: None,
};

fn class_status(ctx: &Context, c: PathClass) -> Status {
    let p = &ctx.profile.profile.pcie;
    if p.topology_pass.iter().any(|x| x == c.as_str()) {
        Status::Pass
    } else if p.topology_fail.iter().any(|x| x == c.as_str()) {
        Status::Fail
    } else {
        Status::Warn
    }
}

/// The path classes nvidia-smi printed (`topo -m`), for a capture without the PCI tree they
/// come from: each GPU's best class to a NIC of the matrix, judged as the tree's would be.
/// nvidia-smi computes the classes from the same tree by the same rules (docs/checks/
/// pcie.topology.md), so they are taken as printed; GPU <-> GPU cells (NV#) are not a path to
/// a NIC.
fn topology_from_matrix(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "pcie.topology";
    let text = match ctx
        .facts()
        .read_string(crate::model::capture::GPU_TOPO_PATH)
    {
        Ok(t) => t,
        Err(e) => {
            return vec![Verdict::skip(
                ID,
                "host",
                format!("not in this capture ({e})"),
            )]
        }
    };
    let m: daqtune_probe::gpu::topo_text::TopoMatrix = match serde_json::from_str(&text) {
        Ok(m) => m,
        Err(e) => {
            return vec![Verdict::skip(
                ID,
                "host",
                format!("{}: unreadable ({e})", crate::model::capture::GPU_TOPO_PATH),
            )]
        }
    };
    let nics = m.nics();
    if nics.is_empty() {
        return vec![Verdict::skip(
            ID,
            "host",
            "the topo -m matrix names no NIC (nvidia-smi lists only NICs with an RDMA device)",
        )];
    }
    let pass = ctx.profile.profile.pcie.topology_pass.join("/");
    let mut out = Vec::new();
    for g in m.rows.iter().filter(|r| r.is_gpu()) {
        let mut paths: Vec<(PathClass, String)> = nics
            .iter()
            .filter_map(|(i, label, name)| {
                let c = PathClass::parse(g.cells.get(*i)?)?;
                Some((
                    c,
                    name.map_or(label.to_string(), |n| format!("{label} {n}")),
                ))
            })
            .collect();
        if paths.is_empty() {
            out.push(Verdict::skip(
                ID,
                g.label.as_str(),
                "no PCIe path class to a NIC in its row",
            ));
            continue;
        }
        paths.sort_by_key(|p| p.0);
        let observed = paths
            .iter()
            .map(|(c, l)| format!("{c} {l}"))
            .collect::<Vec<_>>()
            .join("; ");
        let (best, nic) = paths[0].clone();
        let status = class_status(ctx, best);
        let affinity = match (&g.cpu_affinity, &g.numa_affinity) {
            (Some(c), Some(n)) => format!("; CPU affinity {c}, NUMA node {n}"),
            (Some(c), None) => format!("; CPU affinity {c}"),
            _ => String::new(),
        };
        let msg = match status {
            Status::Pass => format!("{best} to {nic} (nvidia-smi topo -m{affinity})"),
            _ => format!(
                "best path is {best} to {nic} (nvidia-smi topo -m{affinity}): {}; GPUDirect traffic crosses the {}",
                best.legend(),
                match best {
                    PathClass::Phb => "host bridge (CPU)",
                    PathClass::Node => "interconnect between host bridges",
                    _ => "inter-socket link",
                }
            ),
        };
        let mut v = Verdict::new(ID, g.label.as_str(), status, msg)
            .observed(observed)
            .expected(pass.clone());
        if status != Status::Pass {
            v = v.fix("hardware: move the NIC or the GPU into slots below one PCIe switch (or at least one socket); the GPU's row in `nvidia-smi topo -m` shows the class to each NIC");
        }
        out.push(v);
    }
    out
}

fn run_topology(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "pcie.topology";
    if !crate::model::capture::holds_needs(ctx.facts(), ID) {
        return topology_from_matrix(ctx);
    }
    let f = match pci_or_skip(ctx, ID) {
        Ok(f) => f,
        Err(v) => return v,
    };
    let gs = pci_gpus(&f.tree);
    if gs.is_empty() {
        return vec![Verdict::skip(
            ID,
            "host",
            "no NVIDIA GPU (vendor 0x10de, display class) on the PCI bus",
        )];
    }
    let nics = nic_devices(ctx, f);
    if nics.is_empty() {
        return vec![Verdict::skip(ID, "host", no_nic_reason(ctx))];
    }
    let mut out = Vec::new();
    for g in gs {
        // The GPU facts decide, not the profile: a profile of the wrong platform must not
        // turn a discrete GPU's path into "integrated" (or the other way round), and
        // gpu.peermem / gpu.bar1 read the same attribute.
        if let Some((true, why)) = pci_gpu_integrated(ctx, &g.addr.to_string()) {
            out.push(Verdict::na(
                ID,
                gpu_label(g),
                format!("integrated GPU ({why}): there is no separable PCIe path between GPU and NIC to judge (seed 000 Step 1, DGX Spark: N/A)"),
            ));
            continue;
        }
        let mut paths: Vec<(PathClass, String, String)> = nics
            .iter()
            .map(|(d, n)| {
                let p = classify(&f.tree, g.addr, d.addr);
                (p.class, n.label(), p.why)
            })
            .collect();
        paths.sort_by_key(|p| p.0);
        let observed = paths
            .iter()
            .map(|(c, l, _)| format!("{c} {l}"))
            .collect::<Vec<_>>()
            .join("; ");
        let (best, best_nic, why) = paths[0].clone();
        let status = class_status(ctx, best);
        let pass = ctx.profile.profile.pcie.topology_pass.join("/");
        let msg = match status {
            Status::Pass => format!("{best} to {best_nic} ({why})"),
            _ if best == PathClass::Unknown => format!("path class unknown: {why}"),
            _ => format!(
                "best path is {best} to {best_nic} ({why}); GPUDirect traffic crosses the {}",
                match best {
                    PathClass::Phb => "host bridge (CPU)",
                    PathClass::Node => "interconnect between host bridges",
                    _ => "inter-socket link",
                }
            ),
        };
        let mut v = Verdict::new(ID, gpu_label(g), status, msg)
            .observed(observed)
            .expected(pass);
        if status != Status::Pass {
            v = v.fix("hardware: move the NIC or the GPU into slots below one PCIe switch (or at least one socket); `daqtune topo --svg topo.svg` draws the tree");
        }
        out.push(v);
    }
    out
}

/// Ports that face downstream (root and switch downstream ports): their link is their child's.
fn faces_downstream(tree: &PciTree, d: &PciDevice) -> bool {
    if let Some(t) = d.port_type() {
        return t.is_downstream_facing();
    }
    // Without config space: root at depth 0, then upstream/downstream alternate in a switch.
    let depth = tree.ancestors(d.addr).len();
    d.is_bridge() && depth % 2 == 0
}

fn min_opt<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y < x { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// GT/s of a PCIe generation (NVML's max link generation).
fn gen_speed(gen: u32) -> Option<f32> {
    Some(match gen {
        1 => 2.5,
        2 => 5.0,
        3 => 8.0,
        4 => 16.0,
        5 => 32.0,
        6 => 64.0,
        _ => return None,
    })
}

/// A GPU's link below its capable speed. NVIDIA GPUs train their link down at rest and back
/// up under load, so the speed read at rest says nothing about the link: it is judged only
/// when NVML says the GPU is busy. `Ok`: the note for a pass (idle, downshifted; or not
/// conclusive without NVML); `Err`: the problem (slow under load). The capability is LnkCap
/// (with the upstream port's) and, where NVML gives it, the max link generation of GPU and
/// system together.
fn gpu_speed(ctx: &Context, d: &PciDevice, cur: f32, cap: f32) -> Result<String, String> {
    match facts_at(ctx, &d.addr.to_string()) {
        Ok(g) => {
            let nvml_cap = g.pcie.max_link_gen.and_then(gen_speed);
            let cap = nvml_cap.map_or(cap, |n| n.min(cap));
            let nv = g
                .pcie
                .max_link_gen
                .map(|n| format!(", NVML max link Gen{n}"))
                .unwrap_or_default();
            if cur >= cap {
                return Ok(format!("; {cur} GT/s is the most GPU and slot can do together{nv}"));
            }
            match at_rest(g) {
                Ok(why) => Ok(format!(
                    "; idle, downshifted: {cur} GT/s at rest ({why}), capable of {cap} GT/s{nv}; NVIDIA GPUs train the link up under load"
                )),
                Err(Some(why)) => Err(format!(
                    "running at {cur} GT/s under load ({why}), the link can do {cap} GT/s{nv}"
                )),
                Err(None) => Ok(format!(
                    "; {cur} GT/s now is not conclusive for a GPU (it trains down at rest and NVML reports neither utilisation nor the idle reason); capable of {cap} GT/s{nv}"
                )),
            }
        }
        Err(why) => Ok(format!(
            "; {cur} GT/s now is not conclusive for a GPU: GPUs train the link down at rest, and without NVML ({why}) the load is unknown; capable of {cap} GT/s"
        )),
    }
}

fn run_link(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "pcie.link";
    let (f, eps) = match endpoints_or_skip(ctx, ID) {
        Ok(v) => v,
        Err(v) => return v,
    };
    let mut out = Vec::new();
    let mut bridges: BTreeSet<PciAddr> = BTreeSet::new();
    let capture = crate::model::capture::manifest(ctx.facts()).is_some();
    let judge = |d: &PciDevice, label: String, is_gpu: bool, out: &mut Vec<Verdict>| -> bool {
        let (ms, mw) = d.max_link();
        let (mut cs, mut cw) = d.cur_link();
        let parent = d.parent.and_then(|p| f.tree.get(p));
        // Both ends of a link report its trained speed and width (PCIe Base Specification,
        // Link Status register: "the negotiated Link width of the given PCI Express Link"), so
        // where a capture lacks the device's own LnkSta (cut before it, as in NVIDIA/l2fwd-nv#6,
        // whose kernel message names the port's x8 link instead) the port facing it tells the
        // link. Only on a capture: on a host the kernel always shows the device's link, and
        // "unknown" there means no link is up (the port's register may still hold a stale one).
        let mut read_at = String::new();
        if capture && cs.is_none() && cw.is_none() {
            if let Some(p) = parent.filter(|p| faces_downstream(&f.tree, p)) {
                if let (s, Some(w)) = p.cur_link() {
                    if w > 0 {
                        (cs, cw) = (s, Some(w));
                        read_at = format!(
                            " (read at its upstream port {}: the device's own link status is not readable)",
                            p.addr
                        );
                    }
                }
            }
        }
        let (ps, pw) = parent.map(|p| p.max_link()).unwrap_or((None, None));
        let (es, ew) = (min_opt(ms, ps), min_opt(mw, pw));
        if es.is_none() && ew.is_none() {
            out.push(Verdict::skip(
                ID,
                label,
                "no link attributes (not a PCIe device, or the kernel does not expose them)",
            ));
            return false;
        }
        if cs.is_none() && cw.is_none() {
            // A capture that printed no LnkSta says nothing about the link being down.
            let why = if capture {
                "not in this capture (no link status for the device or the port above it)"
            } else {
                "the current link speed and width are unreadable (link down, or the device \
                 suspended?)"
            };
            out.push(Verdict::skip(ID, label, why));
            return false;
        }
        let observed = link_label(cs, cw);
        let mut problems = Vec::new();
        // A port narrower than the card is the cause the field threads name (a x4 ConnectX in
        // a Pi's x1 slot, geerlingguy/raspberry-pi-pcie-devices#143; the ASUS GX10's CX-7 behind
        // a port wired x2, NVIDIA forum 367853): min(card, port) would call it "expected".
        let slot_limit = match (mw, pw, cw) {
            (Some(m), Some(p), Some(c)) if p < m && c <= p => Some((m, p)),
            _ => None,
        };
        let expected = link_label(es, slot_limit.map(|(m, _)| m).or(ew));
        if let (Some(c), Some(e)) = (cw, ew) {
            if c < e {
                problems.push(format!("trained at x{c}, the link can do x{e}"));
            } else if let Some((m, p)) = slot_limit {
                problems.push(format!(
                    "trained at x{c}: the slot limits it (its port can do x{p}, the card x{m}): move the card to a x{m} slot"
                ));
            }
        }
        let mut note = String::new();
        if let (Some(c), Some(e)) = (cs, es) {
            if c < e {
                if is_gpu {
                    match gpu_speed(ctx, d, c, e) {
                        Ok(n) => note = n,
                        Err(p) => problems.push(p),
                    }
                } else {
                    problems.push(format!("running at {c} GT/s, the link can do {e} GT/s"));
                }
            }
        }
        if problems.is_empty() {
            out.push(
                Verdict::pass(ID, label, format!("{observed}{read_at}{note}"))
                    .observed(observed)
                    .expected(expected),
            );
            false
        } else {
            let up = if read_at.is_empty() {
                parent
                    .map(|p| format!(" (upstream port {})", p.addr))
                    .unwrap_or_default()
            } else {
                read_at.clone()
            };
            out.push(
                Verdict::warn(ID, label, format!("{}{up}{note}", problems.join("; ")))
                    .observed(observed)
                    .expected(expected)
                    .fix("hardware: reseat the card, use a slot wired for the full width, check risers and bifurcation settings in the firmware"),
            );
            true
        }
    };
    for (d, label) in &eps {
        judge(d, label.clone(), d.is_nvidia_gpu(), &mut out);
        for a in f.tree.ancestors(d.addr) {
            if a.parent.is_some() && !faces_downstream(&f.tree, a) {
                bridges.insert(a.addr);
            }
        }
    }
    let mut ok = 0;
    for b in &bridges {
        let Some(d) = f.tree.get(*b) else { continue };
        let mut tmp = Vec::new();
        let degraded = judge(
            d,
            format!(
                "{} ({})",
                d.addr,
                d.port_type().map(PortType::as_str).unwrap_or("bridge")
            ),
            false,
            &mut tmp,
        );
        if degraded {
            out.extend(tmp);
        } else if tmp.iter().all(|v| v.status == Status::Pass) {
            ok += 1;
        }
    }
    if ok > 0 {
        out.push(Verdict::pass(
            ID,
            "switch links",
            format!(
                "{ok} upstream link(s) of bridges on the GPU/NIC paths at full width and speed"
            ),
        ));
    }
    out
}

fn run_mps(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "pcie.mps";
    let (f, eps) = match endpoints_or_skip(ctx, ID) {
        Ok(v) => v,
        Err(v) => return v,
    };
    let mut out = Vec::new();
    let nics: BTreeSet<PciAddr> = data_path_nics(ctx, f).iter().map(|n| n.addr).collect();
    for (d, label) in &eps {
        let Some(cap) = d.pcie() else {
            out.push(cap_visibility_skip(ctx, ID, label.clone(), d));
            continue;
        };
        let ancestors = f.tree.ancestors(d.addr);
        let mut path: Vec<&PciDevice> = vec![d];
        path.extend(ancestors.iter().copied());
        if let Some(hidden) = path.iter().find(|x| {
            x.pcie().is_none()
                && x.config
                    .as_ref()
                    .is_some_and(|c| c.pcie_visibility == Visibility::Hidden)
        }) {
            let len = hidden.config.as_ref().map_or(0, |c| c.len);
            let why =
                crate::model::capture::unseen_registers(ctx.facts(), &hidden.addr.to_string(), len)
                    .unwrap_or_else(|| NEEDS_ROOT.to_string());
            out.push(Verdict::skip(
                ID,
                label.clone(),
                format!("upstream port {}: {why}", hidden.addr),
            ));
            continue;
        }
        let mut problems = Vec::new();
        for w in path.windows(2) {
            let (child, parent) = (w[0], w[1]);
            if let (Some(c), Some(p)) = (child.pcie(), parent.pcie()) {
                if c.mps > p.mps {
                    problems.push(format!(
                        "{} MPS {} exceeds its upstream port {} ({}): malformed TLPs",
                        child.addr, c.mps, parent.addr, p.mps
                    ));
                }
            }
        }
        // GPU and NIC that exchange peer-to-peer traffic below one host bridge must agree.
        if d.is_nvidia_gpu() {
            for n in &nics {
                let Some(nd) = f.tree.get(*n) else { continue };
                if nd.host_bridge == d.host_bridge {
                    if let Some(np) = nd.pcie() {
                        if np.mps != cap.mps {
                            problems.push(format!(
                                "GPU MPS {} differs from NIC {} MPS {}",
                                cap.mps, nd.addr, np.mps
                            ));
                        }
                    }
                }
            }
        }
        let path_cap = path
            .iter()
            .filter_map(|x| x.pcie())
            .map(|p| p.mps_supported)
            .min()
            .unwrap_or(cap.mps_supported);
        let observed = format!(
            "{} B (device supports {} B, path {} B)",
            cap.mps, cap.mps_supported, path_cap
        );
        if !problems.is_empty() {
            out.push(
                Verdict::fail(ID, label.clone(), problems.join("; "))
                    .observed(observed)
                    .fix("firmware: set one Max Payload Size for the whole hierarchy (BIOS 'PCIe Max Payload Size'), or boot with pci=pcie_bus_safe; daqtune never writes MPS"),
            );
        } else if cap.mps < path_cap {
            out.push(
                Verdict::pass(ID, label.clone(), format!(
                    "MPS {} B; the path could carry {} B (note: a platform/firmware choice, e.g. BIOS 'PCIe Max Payload Size' or pci=pcie_bus_perf; 128 B can be deliberate for peer-to-peer)",
                    cap.mps, path_cap
                ))
                .observed(observed)
                // A pass, but the cap is a fact the fleet outputs must carry (seed 000 Step 2:
                // MPS is "not configurable"; IGX Orin: "Max 512, Current 128").
                .limit(
                    cap.mps.to_string(),
                    format!(
                        "MPS {} B where the path supports {} B: set by the platform's firmware, not configurable (seed 000 Step 2); every TLP carries at most {} B of payload",
                        cap.mps, path_cap, cap.mps
                    ),
                ),
            );
        } else {
            out.push(
                Verdict::pass(
                    ID,
                    label.clone(),
                    format!("MPS {} B, the most the path allows", cap.mps),
                )
                .observed(observed),
            );
        }
    }
    out
}

fn run_aer(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "pcie.aer";
    let (f, eps) = match endpoints_or_skip(ctx, ID) {
        Ok(v) => v,
        Err(v) => return v,
    };
    let threshold = ctx.profile.profile.pcie.aer_correctable_warn;
    let policy = ctx
        .read_string("/sys/module/pcie_aspm/parameters/policy")
        .ok()
        .and_then(|t| daqtune_probe::system::parse_lockdown(&t));
    let mut seen: BTreeSet<PciAddr> = BTreeSet::new();
    let mut devs: Vec<(&PciDevice, String)> = Vec::new();
    for (d, label) in &eps {
        if seen.insert(d.addr) {
            devs.push((d, label.clone()));
        }
        for a in f.tree.ancestors(d.addr) {
            if seen.insert(a.addr) {
                devs.push((
                    a,
                    format!(
                        "{} ({})",
                        a.addr,
                        a.port_type().map(PortType::as_str).unwrap_or("bridge")
                    ),
                ));
            }
        }
    }
    let mut out = Vec::new();
    let mut counted = 0;
    let mut ok = 0;
    let mut aspm_unknown = Vec::new();
    for (d, label) in devs {
        let mut problems = Vec::new();
        if d.aer.is_known() {
            counted += 1;
            let (c, n, fa) = (
                d.aer.correctable.unwrap_or(0),
                d.aer.nonfatal.unwrap_or(0),
                d.aer.fatal.unwrap_or(0),
            );
            if fa > 0 || n > 0 {
                problems.push(format!(
                    "{n} non-fatal and {fa} fatal uncorrectable error(s) since boot"
                ));
            }
            if c > threshold {
                problems.push(format!("{c} correctable errors since boot (more than {threshold}): a marginal link retrains and replays"));
            }
        }
        match d.pcie() {
            Some(p) if p.aspm_enabled.any() => problems.push(format!(
                "ASPM {} enabled on the data path: link exits add latency",
                p.aspm_enabled.label()
            )),
            Some(_) => {}
            None => aspm_unknown.push(d.addr.to_string()),
        }
        if problems.is_empty() {
            // "Without ASPM" only for devices whose link control was read.
            if d.pcie().is_some() {
                ok += 1;
            }
        } else {
            let observed = format!(
                "correctable {}, non-fatal {}, fatal {}",
                d.aer
                    .correctable
                    .map(|v| v.to_string())
                    .unwrap_or("?".into()),
                d.aer.nonfatal.map(|v| v.to_string()).unwrap_or("?".into()),
                d.aer.fatal.map(|v| v.to_string()).unwrap_or("?".into())
            );
            let aspm = problems.iter().any(|p| p.starts_with("ASPM"));
            out.push(
                Verdict::warn(ID, label, problems.join("; "))
                    .observed(observed)
                    .fix(if aspm {
                        "kernel argument pcie_aspm=off (or the firmware's ASPM setting); for errors: reseat, check risers, compare counts later with `daqtune diff`".to_string()
                    } else {
                        "compare with a later `daqtune check` (counts since boot): rising counts point to a marginal link; reseat the card, check risers and cables".to_string()
                    }),
            );
        }
    }
    if counted == 0 && out.is_empty() {
        return vec![Verdict::skip(
            ID,
            "host",
            "the kernel exposes no AER counters (aer_dev_*): AER disabled or handled by firmware",
        )];
    }
    let pol = policy
        .map(|p| format!("; ASPM policy {p}"))
        .unwrap_or_default();
    if ok > 0 {
        out.push(Verdict::pass(
            ID,
            "GPU/NIC paths",
            format!("{ok} device(s) without uncorrectable errors or ASPM{pol}"),
        ));
    }
    if !aspm_unknown.is_empty() {
        out.push(Verdict::skip(
            ID,
            format!("{} device(s)", aspm_unknown.len()),
            format!(
                "ASPM state unknown for {}: their PCIe capability is beyond the config space \
                 visible without root ({NEEDS_ROOT})",
                aspm_unknown.join(", ")
            ),
        ));
    }
    out
}
