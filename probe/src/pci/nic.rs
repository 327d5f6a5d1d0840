//! NIC discovery from sysfs alone (no ibdev2netdev): network-class PCI functions, their
//! netdevs (`<dev>/net/`, or `<dev>/virtio*/net/` for virtio), and their RDMA devices
//! (`<dev>/infiniband/`) with port link layers and firmware versions.
//!
//! Network namespaces: sysfs shows only the netdevs of the namespace it was mounted in, so a
//! port moved into another namespace simply disappears from `<dev>/net/`. Two traces remain
//! and are reported: the RDMA device's GID table names the netdev it belongs to
//! (`ports/N/gid_attrs/ndevs/I`) even when that netdev is not in our namespace, and a ConnectX
//! function bound to mlx5_core with an RDMA device but no visible netdev.

use super::devdir::DevDir;
use super::{PciAddr, PciDevice, PciTree};
use crate::host::Host;
use serde::Serialize;
use std::collections::BTreeSet;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Netdev {
    pub name: String,
    pub ifindex: Option<u32>,
    pub mtu: Option<u32>,
    /// `None` when carrier cannot be read (interface administratively down: EINVAL).
    pub carrier: Option<bool>,
    pub operstate: Option<String>,
    /// Mb/s; `None` when unknown (down links report -1).
    pub speed_mbps: Option<u64>,
    pub address: Option<String>,
    /// The physical port this netdev drives, as the driver names it (`p0`, `p1`); `None` when
    /// the driver does not say (EOPNOTSUPP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phys_port_name: Option<String>,
    /// The switch (eswitch) the port belongs to; drivers expose it in switchdev mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phys_switch_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RdmaPort {
    pub port: u32,
    /// `Ethernet` or `InfiniBand`.
    pub link_layer: Option<String>,
    /// `4: ACTIVE`, `1: DOWN`, ...
    pub state: Option<String>,
    pub rate: Option<String>,
    /// Netdevs the port's GID table names (RoCE).
    pub gid_netdevs: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RdmaDevice {
    pub name: String,
    pub fw_ver: Option<String>,
    pub node_guid: Option<String>,
    pub board_id: Option<String>,
    /// The GUID of the whole adapter (every function of one ConnectX ASIC shares it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sys_image_guid: Option<String>,
    pub ports: Vec<RdmaPort>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NicFunction {
    pub addr: PciAddr,
    pub vendor: u16,
    pub device: u16,
    /// `ConnectX-7`, `RTL8111/8168/8411 ...`.
    pub model: String,
    pub connectx: bool,
    pub is_vf: bool,
    pub physfn: Option<PciAddr>,
    pub driver: Option<String>,
    pub numa_node: Option<i32>,
    pub netdevs: Vec<Netdev>,
    pub rdma: Vec<RdmaDevice>,
    /// Netdevs named by this function's RDMA ports that are not visible here: moved to another
    /// network namespace.
    pub foreign_netdevs: Vec<String>,
    pub notes: Vec<String>,
}

impl NicFunction {
    pub fn netdev_names(&self) -> Vec<&str> {
        self.netdevs.iter().map(|n| n.name.as_str()).collect()
    }
    pub fn rdma_names(&self) -> Vec<&str> {
        self.rdma.iter().map(|r| r.name.as_str()).collect()
    }
    /// `0000:01:00.0 (enp1s0f0np0, mlx5_0)`.
    pub fn label(&self) -> String {
        let mut names: Vec<&str> = self.netdev_names();
        names.extend(self.rdma_names());
        if names.is_empty() {
            self.addr.to_string()
        } else {
            format!("{} ({})", self.addr, names.join(", "))
        }
    }
}

/// Parse a netdev `speed` attribute: Mb/s, or `None` for -1 / unknown.
pub fn parse_speed(s: &str) -> Option<u64> {
    s.trim()
        .parse::<i64>()
        .ok()
        .filter(|v| *v > 0)
        .map(|v| v as u64)
}

/// Read a netdev from its sysfs directory.
pub fn read_netdev(host: &Host, dir: &str, name: &str) -> Netdev {
    read_netdev_in(&DevDir::new(host, dir), name)
}

fn read_netdev_in(d: &DevDir, name: &str) -> Netdev {
    Netdev {
        name: name.to_string(),
        ifindex: d.attr("ifindex").and_then(|s| s.parse().ok()),
        mtu: d.attr("mtu").and_then(|s| parse_mtu(&s)),
        carrier: d.attr("carrier").and_then(|s| match s.as_str() {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        }),
        operstate: d.attr("operstate"),
        speed_mbps: d.attr("speed").and_then(|s| parse_speed(&s)),
        address: d.attr("address"),
        phys_port_name: d.attr("phys_port_name").filter(|s| !s.is_empty()),
        phys_switch_id: d.attr("phys_switch_id").filter(|s| !s.is_empty()),
    }
}

fn read_rdma(host: &Host, dir: &str, name: &str) -> RdmaDevice {
    let d = DevDir::new(host, dir);
    let attr = |a: &str| d.attr(a).filter(|s| !s.is_empty());
    let mut ports = Vec::new();
    for p in d.list("ports") {
        let Ok(num) = p.parse::<u32>() else { continue };
        let pd = DevDir::new(host, &format!("{dir}/ports/{p}"));
        let pattr = |a: &str| pd.attr(a).filter(|s| !s.is_empty());
        // Entries 0 and 1 are the default RoCE v1/v2 GIDs; they name the port's netdev.
        let nd = DevDir::new(host, &format!("{dir}/ports/{p}/gid_attrs/ndevs"));
        let mut gid_netdevs = Vec::new();
        for i in ["0", "1"] {
            if let Some(n) = nd.attr(i).filter(|s| !s.is_empty()) {
                if !gid_netdevs.contains(&n) {
                    gid_netdevs.push(n);
                }
            }
        }
        ports.push(RdmaPort {
            port: num,
            link_layer: pattr("link_layer"),
            state: pattr("state"),
            rate: pattr("rate"),
            gid_netdevs,
        });
    }
    ports.sort_by_key(|p| p.port);
    RdmaDevice {
        name: name.to_string(),
        fw_ver: attr("fw_ver"),
        node_guid: attr("node_guid"),
        board_id: attr("board_id"),
        sys_image_guid: attr("sys_image_guid"),
        ports,
    }
}

/// The RDMA devices of `/sys/class/infiniband`, by name: what a root without PCI functions
/// (an imported `ibstat`) still says of each device and its ports.
pub fn read_class_rdma(host: &Host) -> Vec<RdmaDevice> {
    let mut names = host.read_dir("/sys/class/infiniband").unwrap_or_default();
    names.sort();
    names
        .into_iter()
        .map(|n| read_rdma(host, &format!("/sys/class/infiniband/{n}"), &n))
        .collect()
}

/// Netdev directories of a PCI function: `<dev>/net/*` and virtio's `<dev>/virtio*/net/*`.
fn netdev_dirs(host: &Host, d: &PciDevice) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let dir = DevDir::new(host, &d.sysfs);
    let mut bases = vec![d.sysfs.clone()];
    if d.driver.as_deref() == Some("virtio-pci") {
        for e in host.read_dir(&d.sysfs).unwrap_or_default() {
            if e.starts_with("virtio") {
                bases.push(format!("{}/{e}", d.sysfs));
            }
        }
    }
    for (i, b) in bases.iter().enumerate() {
        let names = if i == 0 {
            dir.list("net")
        } else {
            DevDir::new(host, b).list("net")
        };
        for n in names {
            out.push((format!("{b}/net/{n}"), n));
        }
    }
    out
}

/// Every network-class function (ConnectX PFs and VFs, and other Ethernet NICs for the
/// socket path), in PCI address order.
pub fn discover_nics(host: &Host, tree: &PciTree) -> Vec<NicFunction> {
    let visible: BTreeSet<String> = host
        .read_dir("/sys/class/net")
        .unwrap_or_default()
        .into_iter()
        .collect();
    let mut out = Vec::new();
    for d in tree.devices.iter().filter(|d| d.is_network()) {
        let netdevs: Vec<Netdev> = netdev_dirs(host, d)
            .into_iter()
            .map(|(dir, n)| read_netdev_in(&DevDir::new(host, &dir), &n))
            .collect();
        let rdma: Vec<RdmaDevice> = DevDir::new(host, &d.sysfs)
            .list("infiniband")
            .into_iter()
            .map(|n| read_rdma(host, &format!("{}/infiniband/{n}", d.sysfs), &n))
            .collect();
        let mine: BTreeSet<&str> = netdevs.iter().map(|n| n.name.as_str()).collect();
        let mut foreign = Vec::new();
        for r in &rdma {
            for p in &r.ports {
                for n in &p.gid_netdevs {
                    if !mine.contains(n.as_str()) && !visible.contains(n) && !foreign.contains(n) {
                        foreign.push(n.clone());
                    }
                }
            }
        }
        let mut notes = Vec::new();
        if !foreign.is_empty() {
            notes.push(format!(
                "netdev {} is not in this network namespace (moved to another namespace)",
                foreign.join(", ")
            ));
        } else if netdevs.is_empty() && !rdma.is_empty() {
            let ib = rdma
                .iter()
                .flat_map(|r| &r.ports)
                .any(|p| p.link_layer.as_deref() == Some("InfiniBand"));
            notes.push(if ib {
                "no netdev: the port runs InfiniBand (IPoIB not loaded)".to_string()
            } else {
                "no netdev visible in this network namespace although RDMA device exists (moved to another namespace?)".to_string()
            });
        } else if netdevs.is_empty() && d.driver.is_none() {
            notes.push("no driver bound".into());
        }
        out.push(NicFunction {
            addr: d.addr,
            vendor: d.vendor,
            device: d.device,
            model: d.short_name(),
            connectx: d.is_connectx(),
            is_vf: d.is_vf,
            physfn: d.physfn,
            driver: d.driver.clone(),
            numa_node: d.numa_node,
            netdevs,
            rdma,
            foreign_netdevs: foreign,
            notes,
        });
    }
    out
}

/// sysfs `mtu` of a port daqtune judges: bytes, within the kernel's bounds for an IP-carrying
/// netdev (68, ETH_MIN_MTU and RFC 791's minimum, to 65536, the loopback device's). Anything
/// else is a garbled read or a function that carries no IP (a PCI CAN card's 16).
pub fn parse_mtu(text: &str) -> Option<u32> {
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|m| (68..=65_536).contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_within_the_kernels_bounds() {
        assert_eq!(parse_mtu("9000\n"), Some(9000));
        assert_eq!(parse_mtu("1500"), Some(1500));
        assert_eq!(parse_mtu("65536"), Some(65536)); // lo
        assert_eq!(parse_mtu("0"), None);
        assert_eq!(parse_mtu("16"), None); // CAN
        assert_eq!(parse_mtu("4294967295"), None);
        assert_eq!(parse_mtu("x"), None);
    }

    #[test]
    fn speeds() {
        assert_eq!(parse_speed("100000"), Some(100000));
        assert_eq!(parse_speed("-1"), None);
        assert_eq!(parse_speed(""), None);
        assert_eq!(parse_speed("(null)"), None);
        assert_eq!(parse_speed("25000\n"), Some(25000));
    }
}
