//! Which physical port a NIC function drives. A ConnectX port can be reached through more than
//! one PCI function: DGX Spark's CX-7 is one ASIC with two physical ports (p0, p1), each
//! dual-homed across two PCIe segments (socket-direct), so `0000:01:00.0` and `0002:01:00.0`
//! are two views of p0. Traffic sent from one view to the other loops inside the NIC's eswitch
//! and never reaches the cable (NVIDIA/daqiri PR #108, commit 873b379). A loopback that is meant
//! to measure the wire must put TX and RX on different physical ports; this module is the one
//! judgement of that, shared by `check --config` (the engine) and the self-tests.

use super::nic::NicFunction;
use super::PciAddr;
use crate::host::Host;

/// PR #108's finding, in the words every caller prints.
pub const SAME_PORT_WHY: &str = "two PCI functions of one physical port (socket-direct: each \
     CX-7 port is reachable over both PCIe segments) loop TX to RX inside the NIC's eswitch: \
     the traffic never reaches the cable, the physical counters (tx/rx_packets_phy) stay flat \
     while the vport counters run at line rate, and a rate measured there is an on-chip loop, \
     not the wire (NVIDIA/daqiri PR #108, 873b379)";

/// What says which physical port a netdev drives, and on which adapter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortIdentity {
    /// The netdev (or, without one, the PCI address) the caller names it by.
    pub name: String,
    pub pci: Option<PciAddr>,
    /// `phys_port_name` (`p0`, `p1`).
    pub port: Option<String>,
    /// `phys_switch_id` (switchdev mode).
    pub switch_id: Option<String>,
    /// The RDMA device's `sys_image_guid`: one per adapter, shared by all its functions.
    pub image_guid: Option<String>,
}

impl PortIdentity {
    /// The port of a discovered NIC function (its first netdev; the RDMA device's adapter
    /// GUID).
    pub fn of_function(n: &NicFunction) -> PortIdentity {
        let nd = n.netdevs.first();
        PortIdentity {
            name: nd.map_or_else(|| n.addr.to_string(), |d| d.name.clone()),
            pci: Some(n.addr),
            port: nd.and_then(|d| d.phys_port_name.clone()),
            switch_id: nd.and_then(|d| d.phys_switch_id.clone()),
            image_guid: n.rdma.iter().find_map(|r| r.sys_image_guid.clone()),
        }
    }

    /// The port of a netdev, read from `/sys/class/net/NAME` (for the self-tests, which name
    /// netdevs).
    pub fn read(host: &Host, netdev: &str) -> PortIdentity {
        let base = format!("/sys/class/net/{netdev}");
        let attr = |a: &str| {
            host.read_attr(&format!("{base}/{a}"))
                .ok()
                .filter(|s| !s.is_empty())
        };
        let pci = host
            .canonical(&format!("{base}/device"))
            .ok()
            .and_then(|p| p.rsplit('/').next().and_then(|b| b.parse::<PciAddr>().ok()));
        let image_guid = host
            .read_dir(&format!("{base}/device/infiniband"))
            .unwrap_or_default()
            .iter()
            .find_map(|r| {
                host.read_attr(&format!("{base}/device/infiniband/{r}/sys_image_guid"))
                    .ok()
                    .filter(|s| !s.is_empty())
            });
        PortIdentity {
            name: netdev.to_string(),
            pci,
            port: attr("phys_port_name"),
            switch_id: attr("phys_switch_id"),
            image_guid,
        }
    }

    /// Every netdev of the host with a device behind it, read as [`PortIdentity::read`] does.
    pub fn all(host: &Host) -> Vec<PortIdentity> {
        host.read_dir("/sys/class/net")
            .unwrap_or_default()
            .iter()
            .filter(|n| host.exists(&format!("/sys/class/net/{n}/device")))
            .map(|n| PortIdentity::read(host, n))
            .collect()
    }

    fn label(&self) -> String {
        match (&self.pci, &self.port) {
            (Some(p), Some(port)) if self.name != p.to_string() => {
                format!("{} ({p}, {port})", self.name)
            }
            (Some(p), None) if self.name != p.to_string() => format!("{} ({p})", self.name),
            (_, Some(port)) => format!("{} ({port})", self.name),
            _ => self.name.clone(),
        }
    }
}

/// Whether two ports are on one adapter: the switch id, else the adapter GUID, else two
/// functions of one PCI device. `None`: nothing tells.
fn same_adapter(a: &PortIdentity, b: &PortIdentity) -> Option<bool> {
    if let (Some(x), Some(y)) = (&a.switch_id, &b.switch_id) {
        return Some(x == y);
    }
    if let (Some(x), Some(y)) = (&a.image_guid, &b.image_guid) {
        return Some(x == y);
    }
    match (a.pci, b.pci) {
        (Some(x), Some(y)) if (x.domain, x.bus, x.dev) == (y.domain, y.bus, y.dev) => Some(true),
        _ => None,
    }
}

/// How a TX and an RX port relate on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortPair {
    /// One physical port (`port`) through two functions: an on-chip loop.
    SamePort { port: String },
    /// Different physical ports of one adapter, or different adapters: frames cross a cable.
    Apart(String),
    /// Nothing tells (a driver without `phys_port_name`, or no adapter identity).
    Unknown(String),
}

pub fn port_pair(tx: &PortIdentity, rx: &PortIdentity) -> PortPair {
    if tx.pci.is_some() && tx.pci == rx.pci {
        return PortPair::SamePort {
            port: tx.port.clone().unwrap_or_else(|| "one function".into()),
        };
    }
    let adapter = same_adapter(tx, rx);
    if adapter == Some(false) {
        return PortPair::Apart(format!(
            "{} and {} are on different adapters",
            tx.label(),
            rx.label()
        ));
    }
    let (Some(a), Some(b)) = (&tx.port, &rx.port) else {
        return PortPair::Unknown(format!(
            "the driver names no physical port (phys_port_name) of {}",
            [tx, rx]
                .iter()
                .filter(|p| p.port.is_none())
                .map(|p| p.label())
                .collect::<Vec<_>>()
                .join(" and ")
        ));
    };
    match adapter {
        Some(true) if a == b => PortPair::SamePort { port: a.clone() },
        Some(true) => PortPair::Apart(format!(
            "{} and {} are different physical ports of one adapter",
            tx.label(),
            rx.label()
        )),
        _ if a == b => PortPair::Unknown(format!(
            "{} and {} both name port {a}, and nothing tells whether they are one adapter (no phys_switch_id, no RDMA sys_image_guid)",
            tx.label(),
            rx.label()
        )),
        _ => PortPair::Apart(format!(
            "{} and {} are different physical ports",
            tx.label(),
            rx.label()
        )),
    }
}

/// The port to receive on instead of `rx` so frames from `tx` cross the cable: a function of
/// `rx`'s adapter on another physical port than `tx`'s, in `rx`'s PCI domain when there is one
/// (PR #108 kept the RX side in domain 0002 and moved it from p0 to p1: `0002:01:00.1`).
pub fn wire_partner<'a>(
    candidates: &'a [PortIdentity],
    tx: &PortIdentity,
    rx: &PortIdentity,
) -> Option<&'a PortIdentity> {
    let tx_port = tx.port.as_deref()?;
    let mut fits: Vec<&PortIdentity> = candidates
        .iter()
        .filter(|c| c.pci != tx.pci && c.pci != rx.pci)
        .filter(|c| same_adapter(c, rx) == Some(true))
        .filter(|c| c.port.as_deref().is_some_and(|p| p != tx_port))
        .collect();
    let domain = rx.pci.map(|p| p.domain);
    fits.sort_by_key(|c| (c.pci.map(|p| p.domain) != domain, c.pci));
    fits.first().copied()
}

/// The sentence a caller prints for a pair on one physical port.
pub fn same_port_message(
    tx: &PortIdentity,
    rx: &PortIdentity,
    port: &str,
    partner: Option<&PortIdentity>,
) -> String {
    let instead = match partner {
        Some(p) => format!("; receive on {} instead, which crosses the wire", p.label()),
        None => "; receive on a function of another physical port".to_string(),
    };
    format!(
        "TX {} and RX {} are the same physical port {port}: {SAME_PORT_WHY}{instead}",
        tx.label(),
        rx.label()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spark(addr: &str, nd: &str, port: &str) -> PortIdentity {
        PortIdentity {
            name: nd.into(),
            pci: addr.parse().ok(),
            port: Some(port.into()),
            switch_id: None,
            image_guid: Some("48b0:2d03:00aa:bb00".into()),
        }
    }

    /// The four PFs as the tutorial's `phys_port_name` loop prints them since PR #108.
    fn four() -> Vec<PortIdentity> {
        vec![
            spark("0000:01:00.0", "enp1s0f0np0", "p0"),
            spark("0000:01:00.1", "enp1s0f1np1", "p1"),
            spark("0002:01:00.0", "enP2p1s0f0np0", "p0"),
            spark("0002:01:00.1", "enP2p1s0f1np1", "p1"),
        ]
    }

    #[test]
    fn spark_views_of_p0_are_one_port_and_the_partner_is_p1_in_the_rx_domain() {
        let p = four();
        assert_eq!(
            port_pair(&p[0], &p[2]),
            PortPair::SamePort { port: "p0".into() }
        );
        let partner = wire_partner(&p, &p[0], &p[2]).expect("partner");
        assert_eq!(partner.name, "enP2p1s0f1np1");
        assert!(matches!(port_pair(&p[0], &p[3]), PortPair::Apart(_)));
        assert!(matches!(port_pair(&p[0], &p[1]), PortPair::Apart(_)));
    }

    #[test]
    fn without_an_adapter_identity_a_shared_port_name_is_not_proof() {
        let mut a = spark("0000:01:00.0", "a", "p0");
        let mut b = spark("0000:81:00.0", "b", "p0");
        a.image_guid = None;
        b.image_guid = None;
        assert!(matches!(port_pair(&a, &b), PortPair::Unknown(_)));
        // Two cards, each with its own p0.
        a.image_guid = Some("1".into());
        b.image_guid = Some("2".into());
        assert!(matches!(port_pair(&a, &b), PortPair::Apart(_)));
        // No phys_port_name: nothing to judge by.
        let mut c = spark("0000:01:00.0", "c", "p0");
        let mut d = spark("0002:01:00.0", "d", "p0");
        c.port = None;
        d.port = None;
        assert!(matches!(port_pair(&c, &d), PortPair::Unknown(_)));
    }
}
