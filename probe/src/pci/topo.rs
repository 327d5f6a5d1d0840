//! GPU <-> NIC path classes with `nvidia-smi topo -m` semantics.
//!
//! - PIX: both below one switch: at most one bridge on each side below the deepest common
//!   ancestor (two downstream ports of one switch, or one port for functions of a device);
//! - PXB: below a common bridge, with more than one bridge on some side;
//! - PHB: same host bridge, no common bridge (different root ports of one root complex);
//! - NODE: different host bridges on the same NUMA node;
//! - SYS: different NUMA nodes (crosses the SMP interconnect);
//! - unknown: different host bridges and NUMA affinity unknown on a multi-node host.
//!
//! A host with one NUMA node reports `numa_node = -1` on many platforms; there the node is
//! known (it is the only one) and two host bridges are NODE.

use super::{PciAddr, PciTree};
use serde::Serialize;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum PathClass {
    #[serde(rename = "PIX")]
    Pix,
    #[serde(rename = "PXB")]
    Pxb,
    #[serde(rename = "PHB")]
    Phb,
    #[serde(rename = "NODE")]
    Node,
    #[serde(rename = "SYS")]
    Sys,
    #[serde(rename = "unknown")]
    Unknown,
}

impl PathClass {
    pub fn as_str(self) -> &'static str {
        match self {
            PathClass::Pix => "PIX",
            PathClass::Pxb => "PXB",
            PathClass::Phb => "PHB",
            PathClass::Node => "NODE",
            PathClass::Sys => "SYS",
            PathClass::Unknown => "unknown",
        }
    }
    pub fn parse(s: &str) -> Option<PathClass> {
        [
            PathClass::Pix,
            PathClass::Pxb,
            PathClass::Phb,
            PathClass::Node,
            PathClass::Sys,
            PathClass::Unknown,
        ]
        .into_iter()
        .find(|c| c.as_str().eq_ignore_ascii_case(s))
    }
    /// The legend line nvidia-smi prints for the class.
    pub fn legend(self) -> &'static str {
        match self {
            PathClass::Pix => "Connection traversing at most a single PCIe bridge",
            PathClass::Pxb => "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
            PathClass::Phb => "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
            PathClass::Node => "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
            PathClass::Sys => "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
            PathClass::Unknown => "NUMA affinity unknown (numa_node is -1 on a multi-node host)",
        }
    }
}

impl fmt::Display for PathClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The path between two functions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathInfo {
    pub class: PathClass,
    /// Deepest bridge above both (the switch's upstream port for PIX/PXB).
    pub common: Option<PciAddr>,
    /// Bridges between the common ancestor and each end (root ports included for PHB and
    /// beyond): the ports peer-to-peer traffic crosses.
    pub ports_a: Vec<PciAddr>,
    pub ports_b: Vec<PciAddr>,
    pub why: String,
}

impl PathInfo {
    /// Every port on the path between the two ends, A side first.
    pub fn ports(&self) -> Vec<PciAddr> {
        let mut v = self.ports_a.clone();
        for p in &self.ports_b {
            if !v.contains(p) {
                v.push(*p);
            }
        }
        v
    }
}

/// Bridges above `a`, from the root port down to its parent.
pub fn chain(tree: &PciTree, a: PciAddr) -> Vec<PciAddr> {
    let mut v: Vec<PciAddr> = tree.ancestors(a).iter().map(|d| d.addr).collect();
    v.reverse();
    v
}

pub fn classify(tree: &PciTree, a: PciAddr, b: PciAddr) -> PathInfo {
    let (Some(da), Some(db)) = (tree.get(a), tree.get(b)) else {
        return PathInfo {
            class: PathClass::Unknown,
            common: None,
            ports_a: vec![],
            ports_b: vec![],
            why: "device not in the PCI tree".into(),
        };
    };
    let ca = chain(tree, a);
    let cb = chain(tree, b);
    if da.host_bridge != db.host_bridge {
        let (na, nb) = if tree.single_node() {
            (Some(da.numa().unwrap_or(0)), Some(db.numa().unwrap_or(0)))
        } else {
            (da.numa(), db.numa())
        };
        let (class, why) = match (na, nb) {
            (Some(x), Some(y)) if x == y => (
                PathClass::Node,
                format!("different host bridges ({} and {}) on NUMA node {x}", da.host_bridge, db.host_bridge),
            ),
            (Some(x), Some(y)) => (
                PathClass::Sys,
                format!("NUMA node {x} and node {y}: the path crosses the inter-socket link"),
            ),
            _ => (
                PathClass::Unknown,
                format!(
                    "different host bridges ({} and {}) and numa_node is -1 on a host with {} nodes",
                    da.host_bridge, db.host_bridge, tree.numa_nodes
                ),
            ),
        };
        return PathInfo {
            class,
            common: None,
            ports_a: ca,
            ports_b: cb,
            why,
        };
    }
    let k = ca.iter().zip(&cb).take_while(|(x, y)| x == y).count();
    if k == 0 {
        return PathInfo {
            class: PathClass::Phb,
            common: None,
            ports_a: ca,
            ports_b: cb,
            why: format!("different root ports of host bridge {}", da.host_bridge),
        };
    }
    let common = ca[k - 1];
    let below_a = ca[k..].to_vec();
    let below_b = cb[k..].to_vec();
    let n = below_a.len().max(below_b.len());
    let class = if n <= 1 {
        PathClass::Pix
    } else {
        PathClass::Pxb
    };
    PathInfo {
        class,
        common: Some(common),
        why: format!(
            "common bridge {common}; {} bridge(s) below it on one side, {} on the other",
            below_a.len(),
            below_b.len()
        ),
        ports_a: below_a,
        ports_b: below_b,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::dev;
    use super::*;

    fn igx() -> PciTree {
        // Seed 000's `lspci -tv` of an IGX Orin, domain 0005.
        PciTree::from_devices(
            vec![
                dev("0005:00:00.0", "pci0005:00", None, 0x060400, -1),
                dev(
                    "0005:01:00.0",
                    "pci0005:00",
                    Some("0005:00:00.0"),
                    0x060400,
                    -1,
                ),
                dev(
                    "0005:02:00.0",
                    "pci0005:00",
                    Some("0005:01:00.0"),
                    0x060400,
                    -1,
                ),
                dev(
                    "0005:02:02.0",
                    "pci0005:00",
                    Some("0005:01:00.0"),
                    0x060400,
                    -1,
                ),
                dev(
                    "0005:03:00.0",
                    "pci0005:00",
                    Some("0005:02:00.0"),
                    0x020000,
                    -1,
                ),
                dev(
                    "0005:03:00.1",
                    "pci0005:00",
                    Some("0005:02:00.0"),
                    0x020000,
                    -1,
                ),
                dev(
                    "0005:07:00.0",
                    "pci0005:00",
                    Some("0005:02:02.0"),
                    0x060400,
                    -1,
                ),
                dev(
                    "0005:08:00.0",
                    "pci0005:00",
                    Some("0005:07:00.0"),
                    0x060400,
                    -1,
                ),
                dev(
                    "0005:09:00.0",
                    "pci0005:00",
                    Some("0005:08:00.0"),
                    0x030000,
                    -1,
                ),
                dev(
                    "0004:01:00.0",
                    "pci0004:00",
                    Some("0004:00:00.0"),
                    0x010802,
                    -1,
                ),
                dev("0004:00:00.0", "pci0004:00", None, 0x060400, -1),
            ],
            1,
        )
    }

    fn a(s: &str) -> PciAddr {
        s.parse().expect("addr")
    }

    #[test]
    fn igx_gpu_nic_is_pxb() {
        let t = igx();
        let p = classify(&t, a("0005:09:00.0"), a("0005:03:00.0"));
        assert_eq!(p.class, PathClass::Pxb, "{}", p.why);
        assert_eq!(p.common, Some(a("0005:01:00.0")));
        assert_eq!(p.ports_a.len(), 3);
        assert_eq!(p.ports_b, vec![a("0005:02:00.0")]);
        // The two ports of the CX-7 share their downstream port: PIX.
        assert_eq!(
            classify(&t, a("0005:03:00.0"), a("0005:03:00.1")).class,
            PathClass::Pix
        );
        // Other domain on a one-node host: NODE.
        assert_eq!(
            classify(&t, a("0005:09:00.0"), a("0004:01:00.0")).class,
            PathClass::Node
        );
    }

    #[test]
    fn two_downstream_ports_is_pix_and_root_ports_phb() {
        let t = PciTree::from_devices(
            vec![
                dev("0000:00:01.0", "pci0000:00", None, 0x060400, 0),
                dev("0000:00:02.0", "pci0000:00", None, 0x060400, 0),
                dev(
                    "0000:01:00.0",
                    "pci0000:00",
                    Some("0000:00:01.0"),
                    0x060400,
                    0,
                ),
                dev(
                    "0000:02:00.0",
                    "pci0000:00",
                    Some("0000:01:00.0"),
                    0x060400,
                    0,
                ),
                dev(
                    "0000:02:01.0",
                    "pci0000:00",
                    Some("0000:01:00.0"),
                    0x060400,
                    0,
                ),
                dev(
                    "0000:03:00.0",
                    "pci0000:00",
                    Some("0000:02:00.0"),
                    0x030200,
                    0,
                ),
                dev(
                    "0000:04:00.0",
                    "pci0000:00",
                    Some("0000:02:01.0"),
                    0x020000,
                    0,
                ),
                dev(
                    "0000:05:00.0",
                    "pci0000:00",
                    Some("0000:00:02.0"),
                    0x020000,
                    0,
                ),
                dev(
                    "0000:81:00.0",
                    "pci0000:80",
                    Some("0000:80:01.0"),
                    0x020000,
                    1,
                ),
                dev("0000:80:01.0", "pci0000:80", None, 0x060400, 1),
                dev(
                    "0000:c1:00.0",
                    "pci0000:c0",
                    Some("0000:c0:01.0"),
                    0x020000,
                    -1,
                ),
                dev("0000:c0:01.0", "pci0000:c0", None, 0x060400, -1),
            ],
            2,
        );
        assert_eq!(
            classify(&t, a("0000:03:00.0"), a("0000:04:00.0")).class,
            PathClass::Pix
        );
        let phb = classify(&t, a("0000:03:00.0"), a("0000:05:00.0"));
        assert_eq!(phb.class, PathClass::Phb);
        assert!(phb.ports().contains(&a("0000:00:02.0")));
        assert_eq!(
            classify(&t, a("0000:03:00.0"), a("0000:81:00.0")).class,
            PathClass::Sys
        );
        // numa_node -1 on a two-node host stays unknown.
        assert_eq!(
            classify(&t, a("0000:03:00.0"), a("0000:c1:00.0")).class,
            PathClass::Unknown
        );
        assert_eq!(
            classify(&t, a("0000:03:00.0"), a("0000:ff:00.0")).class,
            PathClass::Unknown
        );
    }

    #[test]
    fn class_names() {
        assert_eq!(PathClass::parse("pxb"), Some(PathClass::Pxb));
        assert_eq!(PathClass::parse("nope"), None);
    }
}
