//! `daqtune topo` as text: the matrix laid out like `nvidia-smi topo -m`, its legend, the
//! devices, NVLink pairs, the NIC ports' PCIe capacity and the GPU-NIC pairs below a switch.
//! The SVG drawing is a machine format beside its data in the engine.

use daqtune_engine::topo::{NvLinkPair, Topology};
use std::fmt::Write as _;

/// The matrix as text, laid out like `nvidia-smi topo -m`.
pub fn text(t: &Topology) -> String {
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
    if !t.capacity.is_empty() {
        s.push_str(
            "\nPCIe capacity of the NIC ports (line rate against what the link carries of 256-byte writes):\n\n",
        );
        for b in &t.capacity {
            let _ = writeln!(s, "  {} {}: {}", b.nic, b.netdev, b.describe());
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

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_engine::topo::{build, gather, NV_LEGEND};
    use daqtune_probe::pci::topo::PathClass;
    use daqtune_probe::pci::PciTree;

    fn igx() -> Topology {
        let host = daqtune_probe::Host::at(format!(
            "{}/../tests/fixtures/igx-tuned",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("fixture");
        let (tree, nics) = gather(&host, false).expect("gather");
        build(&tree, &nics)
    }

    #[test]
    fn an_empty_bus_says_so() {
        assert_eq!(
            text(&build(&PciTree::default(), &[])),
            "no GPU, NIC or NVMe device on the PCI bus\n"
        );
    }

    /// The layout of `nvidia-smi topo -m`: a header row of labels, one row per endpoint with
    /// CPU affinity, NUMA and link, then the legend word for word.
    #[test]
    fn the_matrix_is_laid_out_like_nvidia_smi() {
        let t = igx();
        let s = text(&t);
        let header = s.lines().next().expect("a header");
        assert!(header.starts_with("        "), "{s}");
        assert!(header.ends_with("CPU Affinity    NUMA   Link"), "{s}");
        for e in &t.endpoints {
            assert!(s.contains(&format!("\n{:<8}", e.label)), "{s}");
        }
        // The classes nvidia-smi's legend lists, in its order.
        let mut at = 0;
        for c in ["SYS", "NODE", "PHB", "PXB", "PIX"] {
            let l = t.legend.get(c).expect("a legend line");
            let line = format!("  {c:<4} = {l}\n");
            let here = s
                .find(&line)
                .unwrap_or_else(|| panic!("{line:?} missing:\n{s}"));
            assert!(here > at, "{c} out of order:\n{s}");
            at = here;
        }
        assert!(s.contains("\nLegend:\n\n  X    = Self\n"), "{s}");
    }

    #[test]
    fn nvlink_pairs_and_why_nvlink_was_not_read() {
        let mut t = igx();
        t.legend.insert("NV#".into(), NV_LEGEND.into());
        t.nvlink.push(NvLinkPair {
            a: "GPU0".into(),
            b: "GPU1".into(),
            links: 4,
            direct: 4,
            via_switch: 0,
            pcie: PathClass::Sys,
        });
        let s = text(&t);
        assert!(s.contains(&format!("  NV#  = {NV_LEGEND}\n")), "{s}");
        assert!(
            s.contains("  GPU0 - GPU1: NV4 (4 direct links; PCIe path SYS)\n"),
            "{s}"
        );
        assert!(!s.contains("NVLink not read"), "{s}");
        t.nvlink.clear();
        t.nvlink_unavailable = Some("NVML: not found".into());
        let s = text(&t);
        assert_eq!(s.matches("NVLink not read").count(), 1, "{s}");
    }
}
