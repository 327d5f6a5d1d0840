//! `daqtune topo`: the GPU / NIC / NVMe matrix of `nvidia-smi topo -m`, with every NIC by
//! netdev and RDMA name, NUMA and CPU affinity and link labels; `--format json`; `--svg FILE`
//! draws the PCIe tree with link labels and highlights the switch behind each PIX/PXB pair
//! (what tune_system.py's `--check schematic` drew).

use daqtune_probe::gpu::NvLinkView;
use daqtune_probe::pci::nic::{discover_nics, NicFunction};
use daqtune_probe::pci::topo::{classify, PathClass};
use daqtune_probe::pci::{link_label, read_pci, PciAddr, PciDevice, PciTree, ReadOptions};
use daqtune_probe::Host;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

pub const TOPO_SCHEMA: &str = "daqtune.topo/v1";

/// One row/column of the matrix.
#[derive(Debug, Clone, Serialize)]
pub struct Endpoint {
    /// `GPU0`, `NIC1`, `NVME0`.
    pub label: String,
    pub kind: &'static str,
    pub addr: PciAddr,
    pub name: String,
    pub netdevs: Vec<String>,
    pub rdma: Vec<String>,
    pub numa_node: Option<i32>,
    /// The NUMA column: `numa_node`, or on a host with a single NUMA node, where the firmware
    /// gives none (`-1`, as in the lent VMs), that node (`0`), which is what `nvidia-smi topo
    /// -m` prints there; `N/A` otherwise.
    pub numa_affinity: String,
    pub cpu_affinity: Option<String>,
    /// Current link, e.g. `Gen5 x16 (63.0 GB/s)`.
    pub link: String,
    /// What the link could do (min of the device's and its upstream port's capability).
    pub link_capable: String,
    /// Width below capability (any device), or speed below it (not GPUs: they idle down).
    pub degraded: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Topology {
    pub schema: &'static str,
    pub endpoints: Vec<Endpoint>,
    /// `matrix[i][j]`: path class between endpoints i and j (`X` on the diagonal).
    pub matrix: Vec<Vec<String>>,
    /// The common bridge (switch upstream port) of each PIX/PXB GPU-NIC pair.
    pub switches: Vec<SwitchPair>,
    /// GPU pairs joined by NVLink (their matrix cell is `NV#`; the PCIe path is kept here).
    pub nvlink: Vec<NvLinkPair>,
    /// Why NVLink was not read (said once; the GPU pairs then show their PCIe class only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvlink_unavailable: Option<String>,
    pub legend: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NvLinkPair {
    pub a: String,
    pub b: String,
    /// Active links between the two, as `NV#` counts them.
    pub links: u32,
    /// Of which GPU-to-GPU links (a bridge or a board link)...
    pub direct: u32,
    /// ...and bonds through the NVSwitch fabric both GPUs are on.
    pub via_switch: u32,
    /// The PCIe path class the pair would have without NVLink.
    pub pcie: PathClass,
}

/// The legend line of `nvidia-smi topo -m`, word for word.
pub const NV_LEGEND: &str = "Connection traversing a bonded set of # NVLinks";

#[derive(Debug, Clone, Serialize)]
pub struct SwitchPair {
    pub gpu: String,
    pub nic: String,
    pub class: PathClass,
    pub bridge: PciAddr,
}

fn fmt_opt<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y < x { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

fn link_of(tree: &PciTree, d: &PciDevice) -> (String, String, bool) {
    let (cs, cw) = d.cur_link();
    let (ms, mw) = d.max_link();
    let (ps, pw) = d
        .parent
        .and_then(|p| tree.get(p))
        .map(|p| p.max_link())
        .unwrap_or((None, None));
    let (es, ew) = (fmt_opt(ms, ps), fmt_opt(mw, pw));
    let width_low = matches!((cw, ew), (Some(c), Some(e)) if c < e);
    let speed_low = !d.is_nvidia_gpu() && matches!((cs, es), (Some(c), Some(e)) if c < e);
    (
        link_label(cs, cw),
        link_label(es, ew),
        width_low || speed_low,
    )
}

/// Build the matrix from a PCI tree and its NICs, without NVLink.
pub fn build(tree: &PciTree, nics: &[NicFunction]) -> Topology {
    build_with(tree, nics, &NvLinkView::default())
}

/// Build the matrix from a PCI tree, its NICs and the GPUs' NVLinks: a GPU pair joined by
/// NVLink reads `NV#` (the count of links between them), like `nvidia-smi topo -m`. GPU-NIC
/// and other cells stay PCIe classes: NVLink carries no NIC traffic.
pub fn build_with(tree: &PciTree, nics: &[NicFunction], nv: &NvLinkView) -> Topology {
    let mut endpoints = Vec::new();
    let mut ep = |d: &PciDevice, label: String, kind: &'static str, nic: Option<&NicFunction>| {
        let (link, link_capable, degraded) = link_of(tree, d);
        endpoints.push(Endpoint {
            label,
            kind,
            addr: d.addr,
            name: d.short_name(),
            netdevs: nic
                .map(|n| {
                    let mut v: Vec<String> = n.netdevs.iter().map(|x| x.name.clone()).collect();
                    v.extend(
                        n.foreign_netdevs
                            .iter()
                            .map(|f| format!("{f} (other netns)")),
                    );
                    v
                })
                .unwrap_or_default(),
            rdma: nic
                .map(|n| n.rdma.iter().map(|r| r.name.clone()).collect())
                .unwrap_or_default(),
            numa_node: d.numa_node,
            numa_affinity: match d.numa_node {
                Some(n) if n >= 0 => n.to_string(),
                _ if tree.numa_nodes == 1 => "0".into(),
                _ => "N/A".into(),
            },
            cpu_affinity: d.local_cpus.as_ref().map(|c| c.to_string()),
            link,
            link_capable,
            degraded,
        });
    };
    for (i, g) in tree.gpus().filter(|g| !g.is_vf).enumerate() {
        ep(g, format!("GPU{i}"), "gpu", None);
    }
    for (i, n) in nics.iter().filter(|n| !n.is_vf).enumerate() {
        if let Some(d) = tree.get(n.addr) {
            ep(d, format!("NIC{i}"), "nic", Some(n));
        }
    }
    for (i, d) in tree.devices.iter().filter(|d| d.is_nvme()).enumerate() {
        ep(d, format!("NVME{i}"), "nvme", None);
    }
    let mut matrix = Vec::new();
    let mut switches = Vec::new();
    for a in &endpoints {
        let mut row = Vec::new();
        for b in &endpoints {
            if a.addr == b.addr {
                row.push("X".to_string());
                continue;
            }
            let p = classify(tree, a.addr, b.addr);
            if a.kind == "gpu"
                && b.kind == "nic"
                && matches!(p.class, PathClass::Pix | PathClass::Pxb)
            {
                if let Some(c) = p.common {
                    switches.push(SwitchPair {
                        gpu: a.label.clone(),
                        nic: b.label.clone(),
                        class: p.class,
                        bridge: c,
                    });
                }
            }
            row.push(p.class.as_str().to_string());
        }
        matrix.push(row);
    }
    let mut nvlink = Vec::new();
    let label_at = |bus: &str| -> Option<usize> {
        endpoints
            .iter()
            .position(|e| e.kind == "gpu" && e.addr.to_string() == bus)
    };
    for (a, b, p) in nv.pairs() {
        let (Some(i), Some(j)) = (label_at(&a), label_at(&b)) else {
            continue;
        };
        let pcie = classify(tree, endpoints[i].addr, endpoints[j].addr).class;
        let cell = format!("NV{}", p.links);
        matrix[i][j] = cell.clone();
        matrix[j][i] = cell;
        let (i, j) = if i < j { (i, j) } else { (j, i) };
        nvlink.push(NvLinkPair {
            a: endpoints[i].label.clone(),
            b: endpoints[j].label.clone(),
            links: p.links,
            direct: p.direct,
            via_switch: p.via_switch,
            pcie,
        });
    }
    nvlink.sort_by(|x, y| (&x.a, &x.b).cmp(&(&y.a, &y.b)));
    let gpus = endpoints.iter().filter(|e| e.kind == "gpu").count();
    let nvlink_unavailable = nv.unavailable.clone().filter(|_| gpus > 1);
    let mut legend: BTreeMap<String, String> = [
        PathClass::Sys,
        PathClass::Node,
        PathClass::Phb,
        PathClass::Pxb,
        PathClass::Pix,
        PathClass::Unknown,
    ]
    .into_iter()
    .map(|c| (c.as_str().to_string(), c.legend().to_string()))
    .collect();
    legend.insert("NV#".into(), NV_LEGEND.into());
    Topology {
        schema: TOPO_SCHEMA,
        endpoints,
        matrix,
        switches,
        nvlink,
        nvlink_unavailable,
        legend,
    }
}

/// The matrix as text, laid out like `nvidia-smi topo -m`.
pub fn render_text(t: &Topology) -> String {
    let mut s = String::new();
    if t.endpoints.is_empty() {
        s.push_str("no GPU, NIC or NVMe device on the PCI bus\n");
        return s;
    }
    let _ = write!(s, "{:8}", "");
    for e in &t.endpoints {
        let _ = write!(s, "{:<8}", e.label);
    }
    s.push_str("CPU Affinity    NUMA   Link\n");
    for (i, e) in t.endpoints.iter().enumerate() {
        let _ = write!(s, "{:<8}", e.label);
        for c in &t.matrix[i] {
            let cell = if c == "X" { " X" } else { c.as_str() };
            let _ = write!(s, "{cell:<8}");
        }
        let numa = &e.numa_affinity;
        let deg = if e.degraded {
            format!(" DEGRADED (capable of {})", e.link_capable)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "{:<16}{:<7}{}{}",
            e.cpu_affinity.as_deref().unwrap_or("N/A"),
            numa,
            e.link,
            deg
        );
    }
    s.push_str("\nLegend:\n\n  X    = Self\n");
    for c in ["SYS", "NODE", "PHB", "PXB", "PIX", "NV#"] {
        if let Some(l) = t.legend.get(c) {
            let _ = writeln!(s, "  {c:<4} = {l}");
        }
    }
    if let Some(why) = &t.nvlink_unavailable {
        let _ = writeln!(
            s,
            "\nNVLink not read, GPU pairs show their PCIe path: {why}"
        );
    }
    s.push_str("\nDevices:\n\n");
    for e in &t.endpoints {
        let mut names = e.netdevs.clone();
        names.extend(e.rdma.iter().cloned());
        let names = if names.is_empty() {
            String::new()
        } else {
            format!(" [{}]", names.join(", "))
        };
        let _ = writeln!(
            s,
            "  {:<6} {} {}{}",
            format!("{}:", e.label),
            e.addr,
            e.name,
            names
        );
    }
    if !t.nvlink.is_empty() {
        s.push_str("\nGPU pairs joined by NVLink:\n\n");
        for p in &t.nvlink {
            let _ = writeln!(
                s,
                "  {} - {}: NV{} ({}; PCIe path {})",
                p.a,
                p.b,
                p.links,
                nv_how(p),
                p.pcie
            );
        }
    }
    if !t.switches.is_empty() {
        s.push_str("\nGPU-NIC pairs below one switch:\n\n");
        for p in &t.switches {
            let _ = writeln!(s, "  {} - {}: {} via {}", p.gpu, p.nic, p.class, p.bridge);
        }
    }
    s
}

fn nv_how(p: &NvLinkPair) -> String {
    match (p.direct, p.via_switch) {
        (d, 0) => format!("{d} direct link{}", if d == 1 { "" } else { "s" }),
        (0, s) => format!("{s} links through NVSwitch"),
        (d, s) => format!("{d} direct, {s} through NVSwitch"),
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const BOX_W: f64 = 210.0;
const BOX_H: f64 = 52.0;
const GAP_X: f64 = 20.0;
const GAP_Y: f64 = 70.0;

/// Draw the PCIe tree: host bridges on top, devices below their parents, link labels on the
/// edges, GPUs/NICs/NVMe colour-coded, the switch of each PIX/PXB pair highlighted.
pub fn render_svg(tree: &PciTree, nics: &[NicFunction], t: &Topology, all: bool) -> String {
    // Which devices to draw: every one, or the judged endpoints and their ancestors.
    let mut shown: BTreeSet<PciAddr> = BTreeSet::new();
    for d in &tree.devices {
        if all || d.is_nvidia_gpu() || d.is_network() || d.is_nvme() {
            shown.insert(d.addr);
            for a in tree.ancestors(d.addr) {
                shown.insert(a.addr);
            }
        }
    }
    let highlight: BTreeMap<PciAddr, Vec<String>> =
        t.switches.iter().fold(BTreeMap::new(), |mut m, p| {
            m.entry(p.bridge)
                .or_default()
                .push(format!("{}-{} {}", p.gpu, p.nic, p.class));
            m
        });
    let names: BTreeMap<PciAddr, String> = nics
        .iter()
        .map(|n| {
            let mut v: Vec<String> = n.netdevs.iter().map(|x| x.name.clone()).collect();
            v.extend(
                n.foreign_netdevs
                    .iter()
                    .map(|f| format!("{f} (other netns)")),
            );
            v.extend(n.rdma.iter().map(|r| r.name.clone()));
            (n.addr, v.join(" "))
        })
        .collect();
    let labels: BTreeMap<PciAddr, String> = t
        .endpoints
        .iter()
        .map(|e| (e.addr, e.label.clone()))
        .collect();
    let Layout {
        pos,
        hb_pos,
        next_x,
        max_depth,
    } = layout(tree, &shown);
    let width = next_x.max(BOX_W) + 20.0;
    // Room below the lowest boxes for the NVLink bonds.
    let nv_room = if t.nvlink.is_empty() {
        0.0
    } else {
        30.0 + 6.0 * t.nvlink.len() as f64
    };
    let height = (max_depth + 1) as f64 * (BOX_H + GAP_Y) + 60.0 + nv_room;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" viewBox="-10 -10 {w:.0} {h:.0}" font-family="sans-serif" font-size="11">"#,
        w = width,
        h = height
    );
    s.push_str("<title>daqtune topo: PCIe tree</title>\n");
    s.push_str(r##"<style>.edge{stroke:#777;stroke-width:1.5;fill:none}.deg{stroke:#d00;stroke-width:2.5}.lbl{fill:#333;font-size:10px;paint-order:stroke;stroke:#fff;stroke-width:3px}.box{stroke:#333;stroke-width:1;rx:6}.gpu{fill:#c8f0c8}.nic{fill:#c8dcff}.nvme{fill:#f0e6c8}.bridge{fill:#eee}.other{fill:#fff}.hb{fill:#444}.hbt{fill:#fff;font-weight:bold}.sw{stroke:#e07000;stroke-width:3}.nv{stroke:#3a9a3a;stroke-width:3;fill:none}.nvl{fill:#2a7a2a;font-weight:bold;font-size:10px;paint-order:stroke;stroke:#fff;stroke-width:3px}</style>"##);
    s.push('\n');
    svg_edges(&mut s, tree, &shown, &pos, &hb_pos);
    for d in tree.devices.iter().filter(|d| shown.contains(&d.addr)) {
        if let Some(&(x, y)) = pos.get(&d.addr) {
            svg_box(&mut s, d, (x, y), &highlight, &labels, &names);
        }
    }
    svg_nvlinks(&mut s, t, &pos);
    s.push_str("</svg>\n");
    s
}

/// Where each drawn device and host bridge goes.
struct Layout {
    pos: BTreeMap<PciAddr, (f64, f64)>,
    /// Host bridge, its x, its root devices.
    hb_pos: Vec<(String, f64, Vec<PciAddr>)>,
    /// The x after the last slot (the drawing's width).
    next_x: f64,
    max_depth: usize,
}

/// Leaves get successive x slots; parents sit centred over their children.
fn layout(tree: &PciTree, shown: &BTreeSet<PciAddr>) -> Layout {
    // Group roots by host bridge.
    let mut bridges: BTreeMap<&str, Vec<PciAddr>> = BTreeMap::new();
    for d in tree
        .devices
        .iter()
        .filter(|d| shown.contains(&d.addr) && d.parent.is_none())
    {
        bridges
            .entry(d.host_bridge.as_str())
            .or_default()
            .push(d.addr);
    }
    let children = |a: PciAddr| -> Vec<PciAddr> {
        tree.children(a)
            .filter(|c| shown.contains(&c.addr))
            .map(|c| c.addr)
            .collect()
    };
    // Leaves get successive x slots; parents sit centred over their children.
    let mut pos: BTreeMap<PciAddr, (f64, f64)> = BTreeMap::new();
    let mut hb_pos: Vec<(String, f64, Vec<PciAddr>)> = Vec::new();
    let mut next_x = 0.0f64;
    let mut max_depth = 0usize;
    for (hb, roots) in &bridges {
        let xs: Vec<f64> = roots
            .iter()
            .map(|r| place(*r, 1, &mut next_x, &mut pos, &mut max_depth, &children))
            .collect();
        let x = (xs[0] + xs[xs.len() - 1]) / 2.0;
        hb_pos.push((hb.to_string(), x, roots.clone()));
        next_x += GAP_X;
    }
    Layout {
        pos,
        hb_pos,
        next_x,
        max_depth,
    }
}

fn place(
    a: PciAddr,
    depth: usize,
    next_x: &mut f64,
    pos: &mut BTreeMap<PciAddr, (f64, f64)>,
    max_depth: &mut usize,
    children: &dyn Fn(PciAddr) -> Vec<PciAddr>,
) -> f64 {
    *max_depth = (*max_depth).max(depth);
    let kids = if depth > 64 { Vec::new() } else { children(a) };
    let x = if kids.is_empty() {
        let x = *next_x;
        *next_x += BOX_W + GAP_X;
        x
    } else {
        let xs: Vec<f64> = kids
            .iter()
            .map(|k| place(*k, depth + 1, next_x, pos, max_depth, children))
            .collect();
        (xs[0] + xs[xs.len() - 1]) / 2.0
    };
    pos.insert(a, (x, depth as f64 * (BOX_H + GAP_Y)));
    x
}

/// The host bridges and the links between drawn devices (drawn first: boxes cover them).
fn svg_edges(
    s: &mut String,
    tree: &PciTree,
    shown: &BTreeSet<PciAddr>,
    pos: &BTreeMap<PciAddr, (f64, f64)>,
    hb_pos: &[(String, f64, Vec<PciAddr>)],
) {
    // Edges first so boxes cover them.
    for (hb, x, roots) in hb_pos {
        for r in roots {
            if let Some((rx, ry)) = pos.get(r) {
                let _ = writeln!(
                    s,
                    r#"<path class="edge" d="M{:.0},{:.0} L{:.0},{:.0}"/>"#,
                    x + BOX_W / 2.0,
                    BOX_H,
                    rx + BOX_W / 2.0,
                    ry
                );
            }
        }
        let _ = writeln!(
            s,
            r#"<rect class="box hb" x="{x:.0}" y="0" width="{BOX_W}" height="{BOX_H}"/><text class="hbt" x="{:.0}" y="30" text-anchor="middle">host bridge {}</text>"#,
            x + BOX_W / 2.0,
            esc(hb)
        );
    }
    for d in tree.devices.iter().filter(|d| shown.contains(&d.addr)) {
        let Some((x, y)) = pos.get(&d.addr) else {
            continue;
        };
        if let Some((px, py)) = d.parent.and_then(|p| pos.get(&p)) {
            let (_, _, degraded) = link_of(tree, d);
            let (cs, cw) = d.cur_link();
            let cls = if degraded { "edge deg" } else { "edge" };
            let (x1, y1, x2, y2) = (px + BOX_W / 2.0, py + BOX_H, x + BOX_W / 2.0, *y);
            let _ = writeln!(
                s,
                r#"<path class="{cls}" d="M{x1:.0},{y1:.0} L{x2:.0},{y2:.0}"/>"#
            );
            let label = link_label(cs, cw);
            if label != "unknown" {
                let _ = writeln!(
                    s,
                    r#"<text class="lbl" x="{:.0}" y="{:.0}" text-anchor="middle">{}{}</text>"#,
                    x2,
                    y2 - 8.0,
                    esc(&label),
                    if degraded { " (degraded)" } else { "" }
                );
            }
        }
    }
}

/// One device's box: its label and address, name, netdevs or port type, the switch pairs.
fn svg_box(
    s: &mut String,
    d: &PciDevice,
    (x, y): (f64, f64),
    highlight: &BTreeMap<PciAddr, Vec<String>>,
    labels: &BTreeMap<PciAddr, String>,
    names: &BTreeMap<PciAddr, String>,
) {
    let class = if d.is_nvidia_gpu() {
        "gpu"
    } else if d.is_network() {
        "nic"
    } else if d.is_nvme() {
        "nvme"
    } else if d.is_bridge() {
        "bridge"
    } else {
        "other"
    };
    let sw = highlight.get(&d.addr);
    let extra = if sw.is_some() { " sw" } else { "" };
    let _ = write!(
        s,
        r#"<g><title>{}"#,
        esc(&format!("{} {}", d.addr, d.display_name()))
    );
    if let Some(pairs) = sw {
        let _ = write!(s, "{}", esc(&format!("\nswitch for {}", pairs.join(", "))));
    }
    s.push_str("</title>");
    let _ = write!(
        s,
        r#"<rect class="box {class}{extra}" x="{x:.0}" y="{y:.0}" width="{BOX_W}" height="{BOX_H}"/>"#
    );
    let head = match labels.get(&d.addr) {
        Some(l) => format!("{l}  {}", d.addr),
        None => d.addr.to_string(),
    };
    let mut name = d.short_name();
    if name.len() > 34 {
        name.truncate(33);
        name.push('…');
    }
    let sub = names.get(&d.addr).cloned().unwrap_or_else(|| {
        d.port_type()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default()
    });
    let _ = write!(
        s,
        r##"<text x="{:.0}" y="{:.0}" font-weight="bold">{}</text><text x="{:.0}" y="{:.0}">{}</text><text x="{:.0}" y="{:.0}" fill="#555">{}</text>"##,
        x + 6.0,
        y + 15.0,
        esc(&head),
        x + 6.0,
        y + 30.0,
        esc(&name),
        x + 6.0,
        y + 45.0,
        esc(&sub)
    );
    if let Some(pairs) = sw {
        let _ = write!(
            s,
            r##"<text x="{:.0}" y="{:.0}" fill="#e07000" font-weight="bold">{}</text>"##,
            x + 6.0,
            y + BOX_H + 13.0,
            esc(&format!("switch: {}", pairs.join(", ")))
        );
    }
    s.push_str("</g>\n");
}

/// NVLink bonds: a curve under each joined GPU pair, labelled like the matrix (`NV18`).
fn svg_nvlinks(s: &mut String, t: &Topology, pos: &BTreeMap<PciAddr, (f64, f64)>) {
    let gpu_pos: BTreeMap<&str, (f64, f64)> = t
        .endpoints
        .iter()
        .filter_map(|e| Some((e.label.as_str(), *pos.get(&e.addr)?)))
        .collect();
    for (k, p) in t.nvlink.iter().enumerate() {
        let (Some((ax, ay)), Some((bx, by))) =
            (gpu_pos.get(p.a.as_str()), gpu_pos.get(p.b.as_str()))
        else {
            continue;
        };
        let (x1, y1) = (ax + BOX_W / 2.0, ay + BOX_H);
        let (x2, y2) = (bx + BOX_W / 2.0, by + BOX_H);
        let dip = y1.max(y2) + 24.0 + 6.0 * k as f64;
        let _ = writeln!(
            s,
            r#"<g><title>{}</title><path class="nv" d="M{x1:.0},{y1:.0} C{x1:.0},{dip:.0} {x2:.0},{dip:.0} {x2:.0},{y2:.0}"/><text class="nvl" x="{:.0}" y="{:.0}" text-anchor="middle">NV{}</text></g>"#,
            esc(&format!("{} - {}: NV{} ({})", p.a, p.b, p.links, nv_how(p))),
            (x1 + x2) / 2.0,
            dip - 2.0,
            p.links
        );
    }
}

/// The GPUs' NVLinks for [`build_with`]: NVML alone on the live host, the recorded facts file
/// under a root. With fewer than two GPUs on the PCI bus there is no pair, and nothing is read.
pub fn read_nvlink(host: &Host, tree: &PciTree) -> NvLinkView {
    if tree.gpus().filter(|g| !g.is_vf).count() < 2 {
        return NvLinkView::default();
    }
    daqtune_probe::gpu::read_nvlinks(host)
}

/// Why `topo` has nothing to draw.
#[derive(Debug, thiserror::Error)]
pub enum TopoError {
    #[error("cannot list PCI devices: {0}")]
    Pci(#[from] daqtune_probe::ReadError),
}

/// Gather the facts for `topo` (every device in detail when the SVG draws them all).
pub fn gather(host: &Host, all: bool) -> Result<(PciTree, Vec<NicFunction>), TopoError> {
    let tree = read_pci(host, ReadOptions { detail_all: all })?;
    let nics = discover_nics(host, &tree);
    Ok((tree, nics))
}

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_probe::gpu::{NvLink, RemoteKind};

    fn fixture(name: &str) -> Host {
        Host::at(format!(
            "{}/../tests/fixtures/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("fixture")
    }

    #[test]
    fn igx_matrix_like_seed() {
        let (tree, nics) = gather(&fixture("igx-tuned"), false).expect("gather");
        let t = build(&tree, &nics);
        let labels: Vec<&str> = t.endpoints.iter().map(|e| e.label.as_str()).collect();
        // GPU0, the two CX-7 ports, the two Realtek ports and Wi-Fi, one NVMe.
        assert_eq!(labels[0], "GPU0");
        let nic0 = t
            .endpoints
            .iter()
            .position(|e| e.addr.to_string() == "0005:03:00.0")
            .expect("nic0");
        let nic1 = t
            .endpoints
            .iter()
            .position(|e| e.addr.to_string() == "0005:03:00.1")
            .expect("nic1");
        assert_eq!(t.matrix[0][nic0], "PXB");
        assert_eq!(t.matrix[nic0][nic1], "PIX");
        assert_eq!(t.matrix[nic0][0], "PXB");
        assert_eq!(t.switches.len(), 2);
        assert_eq!(t.switches[0].bridge.to_string(), "0005:01:00.0");
        let text = render_text(&t);
        assert!(text.contains("cx7_0, mlx5_0"), "{text}");
        assert!(
            text.contains("PXB  = Connection traversing multiple PCIe bridges"),
            "{text}"
        );
        let svg = render_svg(&tree, &nics, &t, false);
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("switch: GPU0-NIC"), "switch highlighted");
        assert!(svg.contains("Gen5 x16 (63.0 GB/s)"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn degraded_link_flagged() {
        let (tree, nics) = gather(&fixture("x86-2s"), true).expect("gather");
        let t = build(&tree, &nics);
        let nic = t
            .endpoints
            .iter()
            .find(|e| e.addr.to_string() == "0000:99:00.0")
            .expect("nic");
        assert!(nic.degraded);
        assert!(nic.link.contains("x8") && nic.link_capable.contains("x16"));
        let gpu = t.endpoints.iter().find(|e| e.kind == "gpu").expect("gpu");
        assert!(!gpu.degraded, "an idle GPU is not degraded");
        assert!(render_text(&t).contains("DEGRADED"));
        let moved = t
            .endpoints
            .iter()
            .find(|e| e.addr.to_string() == "0000:99:00.1")
            .expect("pf1");
        assert_eq!(moved.netdevs, vec!["ens1f1np1 (other netns)"]);
        let svg = render_svg(&tree, &nics, &t, true);
        assert!(svg.contains("(degraded)"));
        let j = serde_json::to_value(&t).expect("json");
        assert_eq!(j["schema"], TOPO_SCHEMA);
    }

    fn view(links: [Option<Vec<NvLink>>; 2], why: Option<&str>) -> NvLinkView {
        NvLinkView {
            gpus: vec![
                (Some("0000:17:00.0".into()), links[0].clone()),
                (Some("0000:ca:00.0".into()), links[1].clone()),
            ],
            unavailable: why.map(str::to_string),
        }
    }

    fn bridge(to: &str, n: u32) -> Vec<NvLink> {
        (0..n)
            .map(|i| NvLink {
                link: i,
                remote_bus_id: Some(to.into()),
                remote_kind: RemoteKind::Gpu,
            })
            .collect()
    }

    /// The recorded two-GPU host with an NVLink bridge of 4 links between its GPUs: the GPU
    /// pair reads NV4 both ways, the legend explains NV#, the pair is named with its PCIe path,
    /// JSON carries it, the SVG draws the bond; GPU-NIC cells keep their PCIe class.
    #[test]
    fn nvlink_pair_in_matrix_text_json_svg() {
        let (tree, nics) = gather(&fixture("x86-2s"), false).expect("gather");
        let plain = build(&tree, &nics);
        let v = view(
            [
                Some(bridge("0000:ca:00.0", 4)),
                Some(bridge("0000:17:00.0", 4)),
            ],
            None,
        );
        let t = build_with(&tree, &nics, &v);
        let g: Vec<usize> = t
            .endpoints
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind == "gpu")
            .map(|(i, _)| i)
            .collect();
        assert_eq!(g.len(), 2);
        assert_eq!(t.matrix[g[0]][g[1]], "NV4");
        assert_eq!(t.matrix[g[1]][g[0]], "NV4");
        assert_eq!(t.nvlink.len(), 1);
        assert_eq!(t.nvlink[0].pcie.as_str(), plain.matrix[g[0]][g[1]]);
        for (i, row) in t.matrix.iter().enumerate() {
            for (j, c) in row.iter().enumerate() {
                if !(g.contains(&i) && g.contains(&j) && i != j) {
                    assert_eq!(c, &plain.matrix[i][j], "only GPU pairs change");
                }
            }
        }
        let text = render_text(&t);
        assert!(text.contains(&format!("  NV#  = {NV_LEGEND}")), "{text}");
        assert!(
            text.contains("GPU0 - GPU1: NV4 (4 direct links; PCIe path SYS)"),
            "{text}"
        );
        assert!(!text.contains("NVLink not read"));
        let j = serde_json::to_value(&t).expect("json");
        assert_eq!(j["nvlink"][0]["links"], 4);
        assert_eq!(j["legend"]["NV#"], NV_LEGEND);
        let svg = render_svg(&tree, &nics, &t, false);
        assert!(
            svg.contains(r#"class="nv""#) && svg.contains(">NV4</text>"),
            "bond drawn"
        );
    }

    /// A driver without NVLink: the pair keeps its PCIe class and the reason is said once.
    #[test]
    fn no_nvlink_said_once() {
        let (tree, nics) = gather(&fixture("x86-2s"), false).expect("gather");
        let v = view(
            [None, None],
            Some("no NVLink on this GPU (NVML_ERROR_NOT_SUPPORTED)"),
        );
        let t = build_with(&tree, &nics, &v);
        assert!(t.nvlink.is_empty());
        assert!(!t.matrix.iter().flatten().any(|c| c.starts_with("NV")));
        let text = render_text(&t);
        assert_eq!(text.matches("NVLink not read").count(), 1, "{text}");
        assert!(!render_svg(&tree, &nics, &t, false).contains(r#"class="nv""#));
        // A one-GPU host reads no NVLink at all.
        let (tree1, _) = gather(&fixture("igx-tuned"), false).expect("gather");
        assert_eq!(
            read_nvlink(&fixture("igx-tuned"), &tree1),
            NvLinkView::default()
        );
    }

    #[test]
    fn empty_tree() {
        let t = build(&PciTree::default(), &[]);
        assert!(render_text(&t).contains("no GPU"));
        let svg = render_svg(&PciTree::default(), &[], &t, false);
        assert!(svg.contains("</svg>"));
    }
}
