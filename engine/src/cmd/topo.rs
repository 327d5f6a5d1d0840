//! `daqtune topo`: the GPU / NIC / NVMe matrix of `nvidia-smi topo -m`, with every NIC by
//! netdev and RDMA name, NUMA and CPU affinity and link labels; `--format json`; `--svg FILE`
//! draws the PCIe tree with link labels and highlights the switch behind each PIX/PXB pair
//! (what tune_system.py's `--check schematic` drew).

use crate::tunables::pcie_capacity;
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
    /// Each data port's line rate against what its PCIe link carries (`pcie.capacity`'s
    /// figures), with the other PCIe endpoints of the same physical port.
    pub capacity: Vec<PortBound>,
}

/// A data port's PCIe capacity bound.
#[derive(Debug, Clone, Serialize)]
pub struct PortBound {
    /// The NIC endpoint (`NIC0`).
    pub nic: String,
    pub netdev: String,
    pub addr: String,
    pub line_gbps: f64,
    /// The function's current link (`Gen5 x4 (15.8 GB/s)`).
    pub link: String,
    /// What that link carries of 256-byte writes (`probe::pci::payload_gbps`).
    pub carries_gbps: f64,
    /// The physical port (`p0`), where the driver names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// The other PCIe endpoints of the same physical port, as `NIC2 (enP2p1s0f0np0)`.
    pub with: Vec<String>,
    /// What this endpoint and those carry together.
    pub together_gbps: f64,
}

impl PortBound {
    /// `200 Gb/s port; PCIe Gen5 x4 (15.8 GB/s) carries 114.4 Gb/s` and, with other
    /// endpoints, what they carry together.
    pub fn describe(&self) -> String {
        let mut d = format!(
            "{:.0} Gb/s port; PCIe {} carries {:.1} Gb/s",
            self.line_gbps, self.link, self.carries_gbps
        );
        if !self.with.is_empty() {
            let _ = write!(
                d,
                "; with {}, the same physical port{}: {:.1} Gb/s together",
                self.with.join(", "),
                self.port
                    .as_deref()
                    .map(|p| format!(" {p}"))
                    .unwrap_or_default(),
                self.together_gbps
            );
        }
        if self.together_gbps.max(self.carries_gbps) < self.line_gbps {
            d.push_str(": below the line rate");
        }
        d
    }
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

/// What a device's link could do: the lesser of its and its upstream port's capability.
fn capable_link(tree: &PciTree, d: &PciDevice) -> (Option<f32>, Option<u32>) {
    let (ms, mw) = d.max_link();
    let (ps, pw) = d
        .parent
        .and_then(|p| tree.get(p))
        .map(|p| p.max_link())
        .unwrap_or((None, None));
    (fmt_opt(ms, ps), fmt_opt(mw, pw))
}

fn link_of(tree: &PciTree, d: &PciDevice) -> (String, String, bool) {
    let (cs, cw) = d.cur_link();
    let (es, ew) = capable_link(tree, d);
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
    let capacity = port_bounds(tree, nics, &endpoints);
    Topology {
        schema: TOPO_SCHEMA,
        endpoints,
        matrix,
        switches,
        nvlink,
        nvlink_unavailable,
        legend,
        capacity,
    }
}

/// The PCIe capacity of every NIC port with a line rate, as `pcie.capacity` computes it.
fn port_bounds(tree: &PciTree, nics: &[NicFunction], endpoints: &[Endpoint]) -> Vec<PortBound> {
    let funcs: Vec<&NicFunction> = nics.iter().filter(|n| !n.is_vf).collect();
    let (ports, _) = pcie_capacity::port_links(tree, &funcs);
    let label = |bdf: &str| {
        endpoints
            .iter()
            .find(|e| e.kind == "nic" && e.addr.to_string() == bdf)
            .map(|e| e.label.clone())
    };
    ports
        .iter()
        .filter_map(|p| {
            let others = pcie_capacity::same_port(p, &ports);
            Some(PortBound {
                nic: label(&p.bdf)?,
                netdev: p.netdev.clone(),
                addr: p.bdf.clone(),
                line_gbps: p.line_gbps,
                link: p.link.clone(),
                carries_gbps: p.carries_gbps,
                port: p.id.port.clone(),
                with: others
                    .iter()
                    .map(|o| match label(&o.bdf) {
                        Some(l) => format!("{l} ({})", o.netdev),
                        None => format!("{} ({})", o.bdf, o.netdev),
                    })
                    .collect(),
                together_gbps: p.carries_gbps + others.iter().map(|o| o.carries_gbps).sum::<f64>(),
            })
        })
        .collect()
}

/// How `pcie.topology` judges a GPU-NIC path class under the run's profile: the SVG colours
/// each path with it.
#[derive(Debug, Clone)]
pub struct PathPolicy {
    pub profile: String,
    pub pass: Vec<String>,
    pub fail: Vec<String>,
    /// GPUs `pcie.topology` does not judge (an integrated GPU), by PCI address, with why.
    pub not_judged: BTreeMap<String, String>,
}

impl Default for PathPolicy {
    /// generic-dgpu's classes, for a caller without a profile: PIX and PXB pass, SYS fails.
    fn default() -> Self {
        PathPolicy {
            profile: "generic-dgpu".into(),
            pass: vec!["PIX".into(), "PXB".into()],
            fail: vec!["SYS".into()],
            not_judged: BTreeMap::new(),
        }
    }
}

impl PathPolicy {
    /// `pass`, `warn`, `fail` or `n/a` for a path of `class` from the GPU at `gpu`, as
    /// `pcie.topology` judges the class.
    pub fn status(&self, gpu: &str, class: &str) -> &'static str {
        if self.not_judged.contains_key(gpu) {
            "n/a"
        } else if self.pass.iter().any(|c| c == class) {
            "pass"
        } else if self.fail.iter().any(|c| c == class) {
            "fail"
        } else {
            "warn"
        }
    }
}

/// The policy of `lp`, with the GPUs `pcie.topology` says `n/a` for on these facts.
pub fn path_policy(
    facts: &crate::model::facts::Facts,
    lp: &crate::model::profile::LoadedProfile,
) -> PathPolicy {
    let rep = crate::check::commands::evaluate_facts(
        facts,
        lp,
        vec!["pcie.topology".into()],
        false,
        None,
    );
    let not_judged = rep
        .checks
        .iter()
        .filter(|v| {
            v.id == "pcie.topology" && v.status == crate::model::verdict::Status::NotApplicable
        })
        .filter_map(|v| {
            let addr = v.subject.split_whitespace().next()?;
            addr.parse::<PciAddr>()
                .ok()
                .map(|a| (a.to_string(), v.message.clone()))
        })
        .collect();
    PathPolicy {
        profile: lp.profile.name.clone(),
        pass: lp.profile.pcie.topology_pass.clone(),
        fail: lp.profile.pcie.topology_fail.clone(),
        not_judged,
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Advance widths of DejaVu Sans Book for ASCII 32..=126 in 1/1000 em, read from the hmtx
/// table of DejaVuSans.ttf. DejaVu Sans is what `sans-serif` resolves to on most Linux hosts
/// and is wider than Arial, Helvetica and Liberation Sans, so a label measured with it fits in
/// those too.
#[rustfmt::skip]
const DEJAVU: [u16; 95] = [
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636, 636, 636,
    636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632,
    575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695, 635, 611, 732, 684, 989, 685,
    611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 352, 635, 634, 278, 278, 579,
    278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838,
];
/// The same of DejaVuSans-Bold.ttf.
#[rustfmt::skip]
const DEJAVU_BOLD: [u16; 95] = [
    348, 456, 521, 838, 696, 1002, 872, 306, 457, 457, 523, 838, 380, 415, 380, 365, 696, 696, 696,
    696, 696, 696, 696, 696, 696, 696, 400, 400, 838, 838, 838, 580, 1000, 774, 762, 734, 830, 683,
    683, 821, 837, 372, 372, 775, 637, 995, 837, 850, 733, 850, 770, 720, 682, 812, 774, 1103, 771,
    724, 725, 457, 365, 457, 838, 500, 500, 675, 716, 593, 716, 678, 435, 716, 712, 343, 343, 665,
    343, 1042, 712, 687, 716, 716, 493, 595, 478, 712, 652, 924, 645, 652, 582, 712, 365, 712, 838,
];

/// The width of `s` in pixels at `size` px: DejaVu Sans's advances for ASCII, a full em for
/// any other character (an upper estimate).
pub fn text_px(s: &str, size: f64, bold: bool) -> f64 {
    let t = if bold { &DEJAVU_BOLD } else { &DEJAVU };
    let units: f64 = s
        .chars()
        .map(|c| match u32::from(c) {
            i @ 32..=126 => f64::from(t[(i - 32) as usize]),
            _ => 1000.0,
        })
        .sum();
    units * size / 1000.0
}

/// `s`, or as much of it as fits in `px` followed by `…` (the whole text is in the box's
/// tooltip).
fn fit_px(s: &str, px: f64, size: f64, bold: bool) -> String {
    if text_px(s, size, bold) <= px {
        return s.to_string();
    }
    let room = px - text_px("…", size, bold);
    let mut out = String::new();
    let mut used = 0.0;
    for c in s.chars() {
        let w = text_px(c.encode_utf8(&mut [0; 4]), size, bold);
        if used + w > room {
            break;
        }
        used += w;
        out.push(c);
    }
    format!("{}…", out.trim_end())
}

const BOX_W: f64 = 220.0;
const GAP_X: f64 = 24.0;
const GAP_Y: f64 = 64.0;
/// Host bridges' boxes.
const HB_H: f64 = 30.0;
/// Room above the host bridges for the NUMA node's title.
const TOP: f64 = 34.0;
/// Between two NUMA nodes' frames.
const NODE_GAP: f64 = 40.0;
const LINE_H: f64 = 14.0;
const PAD: f64 = 6.0;
/// Box text and edge label sizes (px).
const FONT: f64 = 11.0;
const LABEL_FONT: f64 = 10.0;
/// Between the lanes of the GPU paths below the tree.
const LANE_H: f64 = 18.0;

/// One line of text in a device's box.
struct BoxLine {
    text: String,
    bold: bool,
    class: &'static str,
}

/// What a device's box says: label and address, name, netdevs or port type, the PCIe
/// capacity of a NIC port, the GPU-NIC pairs a switch serves.
fn box_lines(
    d: &PciDevice,
    t: &Topology,
    labels: &BTreeMap<PciAddr, String>,
    names: &BTreeMap<PciAddr, String>,
    switches: &BTreeMap<PciAddr, Vec<String>>,
) -> Vec<BoxLine> {
    let line = |text: String, bold, class| BoxLine { text, bold, class };
    let mut v = vec![
        line(
            match labels.get(&d.addr) {
                Some(l) => format!("{l}  {}", d.addr),
                None => d.addr.to_string(),
            },
            true,
            "",
        ),
        line(d.short_name(), false, ""),
    ];
    let sub = names.get(&d.addr).cloned().unwrap_or_else(|| {
        d.port_type()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default()
    });
    if !sub.is_empty() {
        v.push(line(sub, false, "sub"));
    }
    let addr = d.addr.to_string();
    for b in t.capacity.iter().filter(|b| b.addr == addr) {
        let short = b.together_gbps.max(b.carries_gbps) < b.line_gbps;
        v.push(line(
            format!(
                "{:.0}G port, PCIe carries {:.1} Gb/s",
                b.line_gbps, b.carries_gbps
            ),
            false,
            if short && b.with.is_empty() {
                "capw"
            } else {
                "cap"
            },
        ));
        if !b.with.is_empty() {
            let with: Vec<&str> = b
                .with
                .iter()
                .map(|w| w.split(' ').next().unwrap_or(w))
                .collect();
            v.push(line(
                format!(
                    "with {} ({}): {:.1} Gb/s",
                    with.join(", "),
                    b.port.as_deref().unwrap_or("same port"),
                    b.together_gbps
                ),
                false,
                if short { "capw" } else { "cap" },
            ));
        }
    }
    if let Some(pairs) = switches.get(&d.addr) {
        v.push(line(format!("switch of {}", pairs.join(", ")), true, "swt"));
    }
    v
}

/// Draw the PCIe tree: one frame per NUMA node holding its host bridges and their devices,
/// link labels (capability, and the current speed where lower), GPUs/NICs/NVMe colour-coded,
/// each NIC port's PCIe capacity, the switch of each PIX/PXB pair highlighted, and below the
/// tree every GPU-NIC path with its class in the colour of `pcie.topology`'s verdict (and the
/// NVLink bonds).
pub fn render_svg(
    tree: &PciTree,
    nics: &[NicFunction],
    t: &Topology,
    all: bool,
    policy: &PathPolicy,
) -> String {
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
    let mut by_class: BTreeMap<PciAddr, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for p in &t.switches {
        by_class
            .entry(p.bridge)
            .or_default()
            .entry(p.class.to_string())
            .or_default()
            .push(format!("{}-{}", p.gpu, p.nic));
    }
    // `GPU0-NIC3, GPU0-NIC4 (PXB)`: the pairs of one class together.
    let switches: BTreeMap<PciAddr, Vec<String>> = by_class
        .into_iter()
        .map(|(b, m)| {
            let v = m
                .into_iter()
                .map(|(c, pairs)| format!("{} ({c})", pairs.join(", ")))
                .collect();
            (b, v)
        })
        .collect();
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
    let lines: BTreeMap<PciAddr, Vec<BoxLine>> = tree
        .devices
        .iter()
        .filter(|d| shown.contains(&d.addr))
        .map(|d| (d.addr, box_lines(d, t, &labels, &names, &switches)))
        .collect();
    let most = lines.values().map(Vec::len).max().unwrap_or(3).max(3);
    let box_h = PAD + LINE_H * most as f64 + PAD / 2.0;
    let lay = layout(tree, &shown, box_h);
    let tree_bottom = lay.row_y(lay.max_depth) + box_h;
    let lanes = lanes(t, policy, &lay.pos, box_h);
    let lanes_bottom = tree_bottom + 28.0 + LANE_H * lanes.len() as f64;
    let legend = legend_lines(t, policy);
    let legend_w = legend
        .iter()
        .map(|(s, _)| text_px(s, LABEL_FONT, false) + 24.0)
        .fold(0.0, f64::max);
    let width = lay.next_x.max(BOX_W).max(legend_w) + 40.0;
    let height = lanes_bottom + 16.0 + 16.0 * legend.len() as f64 + 20.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" viewBox="-20 -10 {w:.0} {h:.0}" font-family="DejaVu Sans, Verdana, sans-serif" font-size="{FONT}">"#,
        w = width,
        h = height
    );
    s.push_str("<title>daqtune topo: PCIe tree by NUMA node, GPU-NIC paths</title>\n");
    s.push_str(r##"<style>.edge{stroke:#777;stroke-width:1.5;fill:none}.deg{stroke:#d00;stroke-width:2.5}.lbl{fill:#333;font-size:10px;paint-order:stroke;stroke:#fff;stroke-width:3px}.lbl.now{fill:#666}.lbl.bad{fill:#c00;font-weight:bold}.box{stroke:#333;stroke-width:1}.gpu{fill:#c8f0c8}.nic{fill:#c8dcff}.nvme{fill:#f0e6c8}.bridge{fill:#eee}.other{fill:#fff}.hb{fill:#444}.hbt{fill:#fff;font-weight:bold}.sw{stroke:#e07000;stroke-width:3}.sub{fill:#555}.cap{fill:#1d4f91}.capw{fill:#b00000;font-weight:bold}.swt{fill:#e07000}.numa-bg{fill:#f7f7fb;stroke:#99a;stroke-width:1;stroke-dasharray:6 3}.numat{font-weight:bold;fill:#446}.gn{fill:none;stroke-width:2}.pass{stroke:#2e8b2e}.warn{stroke:#d98200}.fail{stroke:#d62020}.na{stroke:#8a8a8a;stroke-dasharray:5 3}.nv{stroke:#3a9a3a;stroke-width:3;fill:none}.pl{font-size:10px;font-weight:bold;paint-order:stroke;stroke:#fff;stroke-width:3px}.tpass{fill:#2e8b2e}.twarn{fill:#b86e00}.tfail{fill:#d62020}.tna{fill:#777}.tnv{fill:#2a7a2a}.leg{font-size:10px;fill:#333}</style>"##);
    s.push('\n');
    // NUMA frames first: the edges and boxes lie on them.
    for n in &lay.nodes {
        let _ = writeln!(
            s,
            r#"<rect class="numa-bg" x="{:.0}" y="0" width="{:.0}" height="{:.0}" rx="8"/>"#,
            n.x0 - 12.0,
            n.x1 - n.x0 + 24.0,
            tree_bottom + 10.0
        );
    }
    svg_edges(&mut s, tree, &shown, &lay, box_h);
    for n in &lay.nodes {
        // As the matrix's NUMA column says it.
        let key = n.node.map_or_else(|| "N/A".to_string(), |v| v.to_string());
        let _ = write!(s, r#"<g class="numa" data-numa="{key}">"#);
        let title = match (n.node, &n.cpus) {
            (Some(v), Some(c)) => format!("NUMA node {v} · CPUs {c}"),
            (Some(v), None) => format!("NUMA node {v}"),
            (None, _) => "NUMA node unknown (numa_node -1)".to_string(),
        };
        let _ = writeln!(
            s,
            r#"<text class="numat" x="{:.0}" y="20">{}</text>"#,
            n.x0 - 4.0,
            esc(&fit_px(&title, n.x1 - n.x0 + 16.0, FONT, true))
        );
        for (hb, x, _) in lay.hbs.iter().filter(|h| h.2 == n.node) {
            let label = fit_px(&format!("host bridge {hb}"), BOX_W - 12.0, FONT, true);
            let _ = writeln!(
                s,
                r#"<g class="dev hb-box" data-hb="{}"><rect class="box hb" x="{x:.0}" y="{TOP:.0}" width="{BOX_W}" height="{HB_H}" rx="6"/><text class="hbt" x="{:.0}" y="{:.0}">{}</text></g>"#,
                esc(hb),
                x + 6.0,
                TOP + 19.0,
                esc(&label)
            );
        }
        for d in tree.devices.iter().filter(|d| shown.contains(&d.addr)) {
            if lay.node_of.get(d.host_bridge.as_str()) != Some(&n.node) {
                continue;
            }
            if let (Some(&(x, y)), Some(ls)) = (lay.pos.get(&d.addr), lines.get(&d.addr)) {
                svg_box(&mut s, d, (x, y), box_h, ls, switches.get(&d.addr));
            }
        }
        s.push_str("</g>\n");
    }
    for (k, l) in lanes.iter().enumerate() {
        let y = tree_bottom + 28.0 + LANE_H * k as f64;
        let cls = if l.nvlink {
            "nv".to_string()
        } else {
            format!("gn {}", l.status.replace('/', ""))
        };
        let text_cls = if l.nvlink {
            "tnv".to_string()
        } else {
            format!("t{}", l.status.replace('/', ""))
        };
        let label = format!("{}–{} {}", l.a, l.b, l.class);
        let _ = writeln!(
            s,
            r#"<g class="path"><title>{}</title><path class="{cls}" data-a="{}" data-b="{}" data-class="{}" data-status="{}" d="M{:.0},{:.0} V{y:.0} H{:.0} V{:.0}"/><text class="pl {text_cls}" x="{:.0}" y="{:.0}" text-anchor="middle">{}</text></g>"#,
            esc(&l.title),
            esc(&l.a),
            esc(&l.b),
            esc(&l.class),
            l.status,
            l.from.0,
            l.from.1,
            l.to.0,
            l.to.1,
            (l.from.0 + l.to.0) / 2.0,
            y - 4.0,
            esc(&label)
        );
    }
    for (i, (text, cls)) in legend.iter().enumerate() {
        let y = lanes_bottom + 16.0 + 16.0 * i as f64;
        let mark = if cls.is_empty() {
            String::new()
        } else {
            format!(r#"<path class="gn {cls}" d="M0,{:.0} H16"/>"#, y - 4.0)
        };
        let _ = writeln!(
            s,
            r#"{mark}<text class="leg" x="22" y="{y:.0}">{}</text>"#,
            esc(text)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The legend under the paths: what the colours and labels mean.
fn legend_lines(t: &Topology, policy: &PathPolicy) -> Vec<(String, &'static str)> {
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    let mut v = vec![
        (
            format!(
                "GPU-NIC path, coloured by pcie.topology under profile {}: pass {}",
                policy.profile,
                list(&policy.pass)
            ),
            "pass",
        ),
        (
            "warn: a class the profile neither passes nor fails".to_string(),
            "warn",
        ),
        (format!("fail {}", list(&policy.fail)), "fail"),
    ];
    if !policy.not_judged.is_empty() {
        v.push((
            "n/a: a GPU pcie.topology does not judge (integrated: no separable PCIe path)"
                .to_string(),
            "na",
        ));
    }
    v.push((
        "Link labels: what the link can do; \"now\" its current speed where lower (GPUs idle down at rest; red: DEGRADED)".to_string(),
        "",
    ));
    if !t.capacity.is_empty() {
        v.push((
            "NIC ports: the line rate against what the PCIe link carries of 256-byte writes (pcie.capacity)".to_string(),
            "",
        ));
    }
    v
}

/// One GPU path below the tree.
struct Lane {
    a: String,
    b: String,
    class: String,
    status: &'static str,
    nvlink: bool,
    from: (f64, f64),
    to: (f64, f64),
    title: String,
}

/// Every GPU-NIC pair (class from the matrix, status from the policy), then the NVLink bonds.
/// Each endpoint's lanes leave its box at their own x, so no two share a vertical.
fn lanes(
    t: &Topology,
    policy: &PathPolicy,
    pos: &BTreeMap<PciAddr, (f64, f64)>,
    box_h: f64,
) -> Vec<Lane> {
    let mut pairs: Vec<(usize, usize, String, &'static str, bool)> = Vec::new();
    for (i, g) in t.endpoints.iter().enumerate() {
        if g.kind != "gpu" {
            continue;
        }
        for (j, n) in t.endpoints.iter().enumerate() {
            if n.kind == "nic" {
                let class = t.matrix[i][j].clone();
                let st = policy.status(&g.addr.to_string(), &class);
                pairs.push((i, j, class, st, false));
            }
        }
    }
    for p in &t.nvlink {
        let at = |l: &str| t.endpoints.iter().position(|e| e.label == l);
        if let (Some(i), Some(j)) = (at(&p.a), at(&p.b)) {
            pairs.push((i, j, format!("NV{}", p.links), "pass", true));
        }
    }
    let mut used: BTreeMap<usize, usize> = BTreeMap::new();
    let mut attach = |e: usize, right: bool| -> Option<(f64, f64)> {
        let (x, y) = *pos.get(&t.endpoints[e].addr)?;
        let k = used.entry(e).or_insert(0);
        let off = 16.0 + 12.0 * (*k % 16) as f64;
        *k += 1;
        Some((if right { x + BOX_W - off } else { x + off }, y + box_h))
    };
    let mut out = Vec::new();
    for (i, j, class, status, nvlink) in pairs {
        let (Some(from), Some(to)) = (attach(i, false), attach(j, true)) else {
            continue;
        };
        let (a, b) = (&t.endpoints[i], &t.endpoints[j]);
        let why = policy
            .not_judged
            .get(&a.addr.to_string())
            .map(|w| format!(": {w}"))
            .unwrap_or_default();
        out.push(Lane {
            title: if nvlink {
                format!("{} - {}: {class}", a.label, b.label)
            } else {
                format!(
                    "{} ({}) - {} ({}): {class}, {status} under profile {}{why}",
                    a.label, a.addr, b.label, b.addr, policy.profile
                )
            },
            a: a.label.clone(),
            b: b.label.clone(),
            class,
            status,
            nvlink,
            from,
            to,
        });
    }
    out
}

/// A NUMA node's horizontal extent and its CPUs.
struct NodeBox {
    node: Option<i32>,
    x0: f64,
    x1: f64,
    cpus: Option<String>,
}

/// Where each drawn device, host bridge and NUMA node goes.
struct Layout {
    pos: BTreeMap<PciAddr, (f64, f64)>,
    /// Host bridge, its x, its NUMA node.
    hbs: Vec<(String, f64, Option<i32>)>,
    /// Each host bridge's node (devices are drawn in their host bridge's node).
    node_of: BTreeMap<String, Option<i32>>,
    nodes: Vec<NodeBox>,
    /// Host bridge, its x, its root devices.
    hb_roots: Vec<(f64, Vec<PciAddr>)>,
    /// The x after the last slot (the drawing's width).
    next_x: f64,
    max_depth: usize,
    box_h: f64,
}

impl Layout {
    /// The top of the boxes at `depth` (1: the devices right below a host bridge).
    fn row_y(&self, depth: usize) -> f64 {
        TOP + HB_H + GAP_Y + depth.saturating_sub(1) as f64 * (self.box_h + GAP_Y)
    }
}

/// The NUMA node of a host bridge's devices: their `numa_node`, or node 0 on a host with one
/// node (firmware that gives none says -1), unknown otherwise.
fn node_of_roots(tree: &PciTree, roots: &[PciAddr]) -> Option<i32> {
    let known = roots
        .iter()
        .filter_map(|r| tree.get(*r))
        .flat_map(|d| std::iter::once(d).chain(tree.children(d.addr)))
        .find_map(|d| d.numa_node.filter(|n| *n >= 0));
    known.or((tree.numa_nodes <= 1).then_some(0))
}

/// A host bridge and its drawn root devices.
type HostBridgeRoots<'a> = (&'a str, Vec<PciAddr>);

/// Nodes left to right (unknown last), their host bridges, then leaves in successive x slots
/// with parents centred over their children.
fn layout(tree: &PciTree, shown: &BTreeSet<PciAddr>, box_h: f64) -> Layout {
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
    // Known nodes in order, the unknown one last.
    let mut by_node: BTreeMap<(bool, Option<i32>), Vec<HostBridgeRoots>> = BTreeMap::new();
    for (hb, roots) in bridges {
        let node = node_of_roots(tree, &roots);
        by_node
            .entry((node.is_none(), node))
            .or_default()
            .push((hb, roots));
    }
    let children = |a: PciAddr| -> Vec<PciAddr> {
        tree.children(a)
            .filter(|c| shown.contains(&c.addr))
            .map(|c| c.addr)
            .collect()
    };
    let mut lay = Layout {
        pos: BTreeMap::new(),
        hbs: Vec::new(),
        node_of: BTreeMap::new(),
        nodes: Vec::new(),
        hb_roots: Vec::new(),
        next_x: 0.0,
        max_depth: 1,
        box_h,
    };
    let mut depth_pos: BTreeMap<PciAddr, (f64, usize)> = BTreeMap::new();
    for ((_, node), hbs) in by_node {
        let x0 = lay.next_x;
        let mut cpus = None;
        for (hb, roots) in hbs {
            let xs: Vec<f64> = roots
                .iter()
                .map(|r| {
                    place(
                        *r,
                        1,
                        &mut lay.next_x,
                        &mut depth_pos,
                        &mut lay.max_depth,
                        &children,
                    )
                })
                .collect();
            let x = (xs[0] + xs[xs.len() - 1]) / 2.0;
            if cpus.is_none() {
                cpus = roots
                    .iter()
                    .filter_map(|r| tree.get(*r))
                    .find_map(|d| d.local_cpus.as_ref().map(|c| c.to_string()));
            }
            lay.hbs.push((hb.to_string(), x, node));
            lay.node_of.insert(hb.to_string(), node);
            lay.hb_roots.push((x, roots));
            lay.next_x += GAP_X;
        }
        let x1 = lay.next_x - GAP_X * 2.0 + BOX_W;
        lay.nodes.push(NodeBox {
            node,
            x0,
            x1: x1.max(x0 + BOX_W),
            cpus,
        });
        lay.next_x = x1.max(x0 + BOX_W) + NODE_GAP;
    }
    let rows: Vec<(PciAddr, (f64, usize))> = depth_pos.into_iter().collect();
    for (a, (x, depth)) in rows {
        let y = lay.row_y(depth);
        lay.pos.insert(a, (x, y));
    }
    lay.next_x = (lay.next_x - NODE_GAP).max(BOX_W);
    lay
}

fn place(
    a: PciAddr,
    depth: usize,
    next_x: &mut f64,
    pos: &mut BTreeMap<PciAddr, (f64, usize)>,
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
    pos.insert(a, (x, depth));
    x
}

/// The label of a device's upstream link: what it can do, and where it runs slower now, the
/// current speed: `idle` for a GPU (GPUs train down at rest, `check pcie.link` judges them
/// under load), `DEGRADED` for a narrower link or any other slower device.
fn edge_label(tree: &PciTree, d: &PciDevice) -> Option<(String, Option<(String, bool)>)> {
    let (cur, capable, degraded) = link_of(tree, d);
    let (cs, cw) = d.cur_link();
    let (es, ew) = capable_link(tree, d);
    // Slower or narrower than it could be; a switch's downstream port reports its own
    // downstream link, which may be faster than the internal one above it: no "now" then.
    let lower = matches!((cs, es), (Some(c), Some(e)) if c < e)
        || matches!((cw, ew), (Some(c), Some(e)) if c < e);
    match (cur == "unknown", capable == "unknown") {
        (true, true) => None,
        (false, true) => Some((cur, None)),
        (true, false) => Some((format!("capable {capable}"), None)),
        _ if !lower => Some((cur, None)),
        _ => {
            let now = link_label(cs, cw);
            let now = now.split(" (").next().unwrap_or(&now).to_string();
            Some((
                format!("capable {capable}"),
                Some(if degraded {
                    (format!("now {now}: DEGRADED"), true)
                } else if d.is_nvidia_gpu() {
                    (format!("now {now}: idle"), false)
                } else {
                    (format!("now {now}"), false)
                }),
            ))
        }
    }
}

/// The links between drawn devices and from each host bridge to its roots, with their labels
/// (drawn before the boxes, which cover the line ends).
fn svg_edges(s: &mut String, tree: &PciTree, shown: &BTreeSet<PciAddr>, lay: &Layout, box_h: f64) {
    let room = BOX_W + GAP_X - 6.0;
    let label = |s: &mut String, x: f64, y: f64, text: &str, cls: &str| {
        let _ = writeln!(
            s,
            r#"<text class="lbl{cls}" x="{x:.0}" y="{y:.0}" text-anchor="middle">{}</text>"#,
            esc(&fit_px(text, room, LABEL_FONT, !cls.is_empty()))
        );
    };
    for (x, roots) in &lay.hb_roots {
        for r in roots {
            if let Some((rx, ry)) = lay.pos.get(r) {
                let _ = writeln!(
                    s,
                    r#"<path class="edge" d="M{:.0},{:.0} L{:.0},{:.0}"/>"#,
                    x + BOX_W / 2.0,
                    TOP + HB_H,
                    rx + BOX_W / 2.0,
                    ry
                );
            }
        }
    }
    for d in tree.devices.iter().filter(|d| shown.contains(&d.addr)) {
        let Some((x, y)) = lay.pos.get(&d.addr) else {
            continue;
        };
        let parent = d.parent.and_then(|p| lay.pos.get(&p));
        let (x1, y1) = match parent {
            Some((px, py)) => (px + BOX_W / 2.0, py + box_h),
            None => continue,
        };
        let (_, _, degraded) = link_of(tree, d);
        let cls = if degraded { "edge deg" } else { "edge" };
        let (x2, y2) = (x + BOX_W / 2.0, *y);
        let _ = writeln!(
            s,
            r#"<path class="{cls}" d="M{x1:.0},{y1:.0} L{x2:.0},{y2:.0}"/>"#
        );
        if let Some((top, now)) = edge_label(tree, d) {
            match now {
                Some((n, bad)) => {
                    label(s, x2, y2 - 19.0, &top, "");
                    label(s, x2, y2 - 7.0, &n, if bad { " bad" } else { " now" });
                }
                None => label(s, x2, y2 - 7.0, &top, ""),
            }
        }
    }
}

/// One device's box with its lines, each fitted to the box (the whole text in the tooltip).
fn svg_box(
    s: &mut String,
    d: &PciDevice,
    (x, y): (f64, f64),
    box_h: f64,
    lines: &[BoxLine],
    switch: Option<&Vec<String>>,
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
    let extra = if switch.is_some() { " sw" } else { "" };
    let mut tip = format!("{} {}", d.addr, d.display_name());
    for l in lines.iter().skip(2) {
        tip.push('\n');
        tip.push_str(&l.text);
    }
    let _ = write!(
        s,
        r#"<g class="dev" data-addr="{}"><title>{}</title><rect class="box {class}{extra}" x="{x:.0}" y="{y:.0}" width="{BOX_W}" height="{box_h:.0}" rx="6"/>"#,
        d.addr,
        esc(&tip)
    );
    for (i, l) in lines.iter().enumerate() {
        // `capw` is bold through the style sheet.
        let bold = l.bold || l.class == "capw";
        let text = fit_px(&l.text, BOX_W - 2.0 * PAD, FONT, bold);
        let weight = if l.bold { r#" font-weight="bold""# } else { "" };
        let cls = if l.class.is_empty() {
            String::new()
        } else {
            format!(r#" class="{}""#, l.class)
        };
        let _ = write!(
            s,
            r#"<text x="{:.0}" y="{:.0}"{weight}{cls}>{}</text>"#,
            x + PAD,
            y + PAD + LINE_H * (i as f64 + 1.0) - 3.0,
            esc(&text)
        );
    }
    s.push_str("</g>\n");
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
        // As data: render::topo words it (the golden test holds its text).
        assert!(
            t.endpoints
                .iter()
                .any(|e| e.netdevs.iter().any(|n| n == "cx7_0")
                    && e.rdma.iter().any(|r| r == "mlx5_0")),
            "{t:?}"
        );
        assert!(
            t.legend
                .get("PXB")
                .is_some_and(|l| l.starts_with("Connection traversing multiple PCIe bridges")),
            "{:?}",
            t.legend
        );
        let svg = render_svg(&tree, &nics, &t, false, &PathPolicy::default());
        assert!(svg.starts_with("<svg"));
        assert!(
            svg.contains("switch of GPU0-NIC3, GPU0-NIC4"),
            "switch highlighted"
        );
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
        assert!(t.endpoints.iter().any(|e| e.degraded));
        let moved = t
            .endpoints
            .iter()
            .find(|e| e.addr.to_string() == "0000:99:00.1")
            .expect("pf1");
        assert_eq!(moved.netdevs, vec!["ens1f1np1 (other netns)"]);
        let svg = render_svg(&tree, &nics, &t, true, &PathPolicy::default());
        assert!(svg.contains("now Gen4 x8: DEGRADED"));
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
        let nv = &t.nvlink[0];
        assert_eq!(
            (
                nv.a.as_str(),
                nv.b.as_str(),
                nv.links,
                nv.direct,
                nv.via_switch
            ),
            ("GPU0", "GPU1", 4, 4, 0),
            "{nv:?}"
        );
        assert_eq!(nv.pcie.to_string(), "SYS");
        assert!(t.nvlink_unavailable.is_none());
        let j = serde_json::to_value(&t).expect("json");
        assert_eq!(j["nvlink"][0]["links"], 4);
        assert_eq!(j["legend"]["NV#"], NV_LEGEND);
        let svg = render_svg(&tree, &nics, &t, false, &PathPolicy::default());
        assert!(
            svg.contains(r#"class="nv""#) && svg.contains("GPU0–GPU1 NV4</text>"),
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
        assert!(t.nvlink_unavailable.is_some(), "{t:?}");
        assert!(
            !render_svg(&tree, &nics, &t, false, &PathPolicy::default()).contains(r#"class="nv""#)
        );
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
        assert!(t.endpoints.is_empty());
        let svg = render_svg(&PciTree::default(), &[], &t, false, &PathPolicy::default());
        assert!(svg.contains("</svg>"));
    }

    /// The width estimate is DejaVu Sans's own advances (DejaVuSans.ttf / DejaVuSans-Bold.ttf
    /// hmtx, 2048 units per em: `W` 2025, `i` 569, bold `W` 2259), the widest common
    /// `sans-serif`.
    #[test]
    fn text_width_is_dejavu_sans() {
        assert!((text_px("W", 1000.0, false) - 2025.0 / 2.048).abs() < 1.0);
        assert!((text_px("i", 1000.0, false) - 569.0 / 2.048).abs() < 1.0);
        assert!((text_px("W", 1000.0, true) - 2259.0 / 2.048).abs() < 1.0);
        assert_eq!(text_px("\u{2026}", 10.0, false), 10.0);
        let f = fit_px("switch of GPU0-NIC3, GPU0-NIC4 (PXB)", 100.0, 11.0, true);
        assert!(f.ends_with('…') && text_px(&f, 11.0, true) <= 100.0, "{f}");
    }

    fn num(n: roxmltree::Node, a: &str) -> f64 {
        n.attribute(a)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{a} of {n:?}"))
    }

    /// Issue 46 item 5 and 45 item 3: the SVG of the Spark, IGX and two-socket fixtures,
    /// read back as XML: one group per NUMA node holding the boxes of that node's devices
    /// (x86-2s: the GPU, NIC and host bridges of node 1 apart from node 0's); a path per
    /// GPU-NIC pair carrying the matrix's class and the verdict's status, labelled with the
    /// class; every text of a box inside the box by the width estimate; the idle GPU's link
    /// labelled with its capability and `idle`; Spark's ports with their PCIe bound and the
    /// other endpoint of the same physical port.
    #[test]
    fn svg_groups_by_numa_draws_every_gpu_nic_path_and_fits_its_labels() {
        for name in ["spark", "igx-tuned", "x86-2s"] {
            let (tree, nics) = gather(&fixture(name), false).expect("gather");
            let t = build(&tree, &nics);
            let policy = PathPolicy::default();
            let svg = render_svg(&tree, &nics, &t, false, &policy);
            let doc = roxmltree::Document::parse(&svg).expect("the SVG is XML");
            let groups: BTreeMap<String, roxmltree::Node> = doc
                .descendants()
                .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some("numa"))
                .map(|n| (n.attribute("data-numa").expect("data-numa").to_string(), n))
                .collect();
            let nodes: BTreeSet<String> = t
                .endpoints
                .iter()
                .map(|e| e.numa_affinity.clone())
                .collect();
            assert_eq!(
                groups.keys().cloned().collect::<BTreeSet<_>>(),
                nodes,
                "{name}: one group per NUMA node"
            );
            for e in &t.endpoints {
                let group = &groups[&e.numa_affinity];
                assert!(
                    group.descendants().any(|n| n.has_tag_name("g")
                        && n.attribute("data-addr") == Some(e.addr.to_string().as_str())),
                    "{name}: {} ({}) not in NUMA node {}'s group",
                    e.label,
                    e.addr,
                    e.numa_affinity
                );
            }
            let paths: Vec<roxmltree::Node> = doc
                .descendants()
                .filter(|n| n.has_tag_name("path") && n.attribute("data-class").is_some())
                .collect();
            for (i, g) in t
                .endpoints
                .iter()
                .enumerate()
                .filter(|(_, e)| e.kind == "gpu")
            {
                for (j, n) in t
                    .endpoints
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.kind == "nic")
                {
                    let class = &t.matrix[i][j];
                    let found: Vec<&roxmltree::Node> = paths
                        .iter()
                        .filter(|p| {
                            p.attribute("data-a") == Some(g.label.as_str())
                                && p.attribute("data-b") == Some(n.label.as_str())
                        })
                        .collect();
                    assert_eq!(found.len(), 1, "{name}: {}-{}", g.label, n.label);
                    let p = found[0];
                    assert_eq!(p.attribute("data-class"), Some(class.as_str()));
                    assert_eq!(
                        p.attribute("data-status"),
                        Some(policy.status(&g.addr.to_string(), class))
                    );
                    let label = p
                        .next_sibling_element()
                        .and_then(|l| l.text())
                        .expect("the path's label");
                    assert!(label.ends_with(class.as_str()), "{name}: {label}");
                }
            }
            let mut boxes = 0;
            for b in doc.descendants().filter(|n| {
                n.has_tag_name("g") && n.attribute("class").is_some_and(|c| c.starts_with("dev"))
            }) {
                let rect = b
                    .children()
                    .find(|n| n.has_tag_name("rect"))
                    .expect("a box");
                let right = num(rect, "x") + num(rect, "width");
                for text in b.children().filter(|n| n.has_tag_name("text")) {
                    let bold = text.attribute("font-weight") == Some("bold")
                        || matches!(text.attribute("class"), Some("hbt" | "capw"));
                    let s = text.text().unwrap_or("");
                    let end = num(text, "x") + text_px(s, FONT, bold);
                    assert!(
                        end <= right,
                        "{name}: {s:?} ends at {end:.0}, its box at {right:.0}"
                    );
                }
                boxes += 1;
            }
            assert!(boxes > t.endpoints.len(), "{name}: {boxes} boxes");
        }
        // x86-2s: two nodes, and a GPU-NIC path across them is SYS and fails.
        let (tree, nics) = gather(&fixture("x86-2s"), false).expect("gather");
        let t = build(&tree, &nics);
        let svg = render_svg(&tree, &nics, &t, false, &PathPolicy::default());
        assert!(svg.contains(r#"data-numa="0""#) && svg.contains(r#"data-numa="1""#));
        assert!(
            svg.contains(r#"data-a="GPU0" data-b="NIC0" data-class="SYS" data-status="fail""#),
            "{svg}"
        );
        // The idle H100 at Gen1: its capability, and "idle".
        assert!(
            svg.contains(">capable Gen4 x16 (31.5 GB/s)</text>"),
            "{svg}"
        );
        assert!(svg.contains(">now Gen1 x16: idle</text>"), "{svg}");
        // Spark: each CX-7 endpoint's Gen5 x4 bound, and the other endpoint of its port.
        let (tree, nics) = gather(&fixture("spark"), false).expect("gather");
        let t = build(&tree, &nics);
        let b = t
            .capacity
            .iter()
            .find(|b| b.netdev == "enp1s0f0np0")
            .expect("port");
        assert_eq!(b.line_gbps, 200.0);
        assert!((b.carries_gbps - 114.4).abs() < 0.05, "{b:?}");
        assert_eq!(b.with, ["NIC2 (enP2p1s0f0np0)"]);
        assert!((b.together_gbps - 228.8).abs() < 0.1, "{b:?}");
        assert_eq!(
            (t.capacity[0].nic.as_str(), t.capacity[0].netdev.as_str(), t.capacity[0].describe()),
            (
                "NIC0",
                "enp1s0f0np0",
                "200 Gb/s port; PCIe Gen5 x4 (15.8 GB/s) carries 114.4 Gb/s; with NIC2 (enP2p1s0f0np0), the same physical port p0: 228.8 Gb/s together".to_string()
            )
        );
        let svg = render_svg(&tree, &nics, &t, false, &PathPolicy::default());
        assert!(
            svg.contains(">200G port, PCIe carries 114.4 Gb/s</text>"),
            "{svg}"
        );
        assert!(svg.contains(">with NIC2 (p0): 228.8 Gb/s</text>"), "{svg}");
    }
}
