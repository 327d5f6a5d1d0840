//! `pcie.capacity`: can each data port's PCIe link carry the port's line rate? A 200 Gb/s
//! ConnectX-7 port behind a PCIe Gen5 x4 link (DGX Spark) moves at most ~114 Gb/s of 256-byte
//! writes through that link; a "200G" user expecting 200 from one function is told why not,
//! and which other PCIe endpoints of the same physical port carry the rest.

use crate::model::context::nics::{data_path_nics_or_skip, pci_or_skip};
use crate::model::context::Context;
use crate::model::tunable::Tunable;
use crate::model::verdict::{Area, Verdict};
use daqtune_probe::pci::nic::NicFunction;
use daqtune_probe::pci::ports::{port_pair, PortIdentity, PortPair};
use daqtune_probe::pci::{payload_gbps, PciTree};

pub const CAPACITY: Tunable = Tunable {
    id: "pcie.capacity",
    area: Area::Pcie,
    title: "Each data port's line rate against what its PCIe link carries",
    aliases: &["pcie-capacity"],
    doc: include_str!("../../../docs/checks/pcie.capacity.md"),
    needs_root: false,
    profile_keys: &["nic.interfaces"],
    check: run,
    planner: None,
};

const ID: &str = "pcie.capacity";

/// One data port: its netdev, line rate, PCIe function and what that function's link carries
/// (`topo` shows the same figures).
#[derive(Debug, Clone)]
pub struct PortLink {
    pub netdev: String,
    pub bdf: String,
    pub line_gbps: f64,
    pub link: String,
    pub carries_gbps: f64,
    /// Which physical port it drives: two PCIe functions of one port (socket-direct, DGX
    /// Spark) carry it together. Judged by `ports::port_pair`, the one rule of the workspace
    /// (phys_port_name on one adapter: phys_switch_id, else the RDMA sys_image_guid).
    pub id: PortIdentity,
}

/// The data ports of `nics` with a known line rate and PCIe link; the others as (subject,
/// why) pairs a check reports as skipped.
pub fn port_links(tree: &PciTree, nics: &[&NicFunction]) -> (Vec<PortLink>, Vec<(String, String)>) {
    let mut ports = Vec::new();
    let mut unknown = Vec::new();
    for n in nics {
        let Some(dev) = tree.get(n.addr) else {
            continue;
        };
        for nd in &n.netdevs {
            let subject = format!("{} ({})", n.addr, nd.name);
            let Some(mbps) = nd.speed_mbps.filter(|s| *s > 0) else {
                unknown.push((
                    subject,
                    format!("{} reports no link speed (link down or no cable)", nd.name),
                ));
                continue;
            };
            let (Some(gts), Some(width)) = (dev.link.cur_speed_gts, dev.link.cur_width) else {
                unknown.push((
                    subject,
                    format!("{}: no current PCIe link speed or width in sysfs", n.addr),
                ));
                continue;
            };
            if width == 0 {
                unknown.push((subject, format!("{}: link width x0", n.addr)));
                continue;
            }
            ports.push(PortLink {
                netdev: nd.name.clone(),
                bdf: n.addr.to_string(),
                line_gbps: mbps as f64 / 1000.0,
                link: daqtune_probe::pci::link_label(Some(gts), Some(width)),
                carries_gbps: payload_gbps(f64::from(gts), width),
                id: PortIdentity {
                    name: nd.name.clone(),
                    pci: Some(n.addr),
                    port: nd.phys_port_name.clone(),
                    switch_id: nd.phys_switch_id.clone(),
                    image_guid: n.rdma.iter().find_map(|r| r.sys_image_guid.clone()),
                },
            });
        }
    }
    (ports, unknown)
}

/// The other PCIe endpoints of `p`'s physical port among `all`.
pub fn same_port<'a>(p: &PortLink, all: &'a [PortLink]) -> Vec<&'a PortLink> {
    all.iter()
        .filter(|o| o.bdf != p.bdf && matches!(port_pair(&p.id, &o.id), PortPair::SamePort { .. }))
        .collect()
}

fn run(ctx: &Context) -> Vec<Verdict> {
    let nics = match data_path_nics_or_skip(ctx, ID) {
        Ok(n) => n,
        Err(v) => return v,
    };
    let pci = match pci_or_skip(ctx, ID) {
        Ok(p) => p,
        Err(v) => return v,
    };
    let (ports, unknown) = port_links(&pci.tree, &nics);
    let mut out: Vec<Verdict> = unknown
        .into_iter()
        .map(|(subject, why)| Verdict::skip(ID, subject, why))
        .collect();
    for p in &ports {
        out.push(judge(p, &ports));
    }
    out
}

fn judge(p: &PortLink, all: &[PortLink]) -> Verdict {
    let subject = format!("{} ({})", p.bdf, p.netdev);
    let observed = format!(
        "{:.0} Gb/s port, PCIe {} carries {:.1} Gb/s",
        p.line_gbps, p.link, p.carries_gbps
    );
    if p.line_gbps <= p.carries_gbps {
        return Verdict::pass(
            ID,
            subject,
            format!(
                "the {:.0} Gb/s port fits its PCIe link: {} carries up to {:.1} Gb/s of 256-byte writes",
                p.line_gbps, p.link, p.carries_gbps
            ),
        )
        .observed(observed);
    }
    let siblings = same_port(p, all);
    let together = p.carries_gbps + siblings.iter().map(|o| o.carries_gbps).sum::<f64>();
    let head = format!(
        "the {:.0} Gb/s port is faster than this function's PCIe link: {} carries at most {:.1} Gb/s of 256-byte writes, so traffic through {} alone stays below the line rate",
        p.line_gbps, p.link, p.carries_gbps, p.netdev
    );
    if !siblings.is_empty() && together >= p.line_gbps {
        let names: Vec<String> = siblings
            .iter()
            .map(|o| format!("{} ({})", o.bdf, o.netdev))
            .collect();
        // A platform fact, not a setting: the port is reached through several endpoints and
        // together they carry it.
        return Verdict::pass(
            ID,
            subject,
            format!(
                "{head}; with {} (the same physical port {}, another PCIe endpoint of it) they carry {together:.1} Gb/s: drive both to reach the line rate (DGX Spark: NCCL_IB_HCA with both RDMA devices, NVIDIA/dgx-spark-playbooks #102 / PR #103)",
                names.join(", "),
                p.id.port.as_deref().unwrap_or("")
            ),
        )
        .observed(observed)
        .expected(format!(">= {:.0} Gb/s through the port's PCIe endpoints", p.line_gbps));
    }
    let why_alone = if p.id.port.is_none() {
        " (this port names no physical port, phys_port_name, to find other PCIe endpoints of it by)"
    } else if siblings.is_empty() {
        " (no other data-path function reaches the same physical port)"
    } else {
        ""
    };
    Verdict::warn(
        ID,
        subject,
        if siblings.is_empty() {
            format!("{head}{why_alone}")
        } else {
            format!(
                "{head}; even with the other endpoints of the same physical port they carry {together:.1} Gb/s"
            )
        },
    )
    .observed(observed)
    .expected(format!(">= {:.0} Gb/s", p.line_gbps))
    .fix("put the NIC in a slot whose link is wide and fast enough for its port (`daqtune check pcie.link` shows what the link trained to), or expect at most the PCIe figure")
}
