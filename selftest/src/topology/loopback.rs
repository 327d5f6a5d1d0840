//! Loopback: both ends in this namespace over `lo`; nothing on the host changes.

use super::*;

impl Topology {
    pub fn loopback() -> Topology {
        Topology {
            kind: Kind::Loopback,
            tx_ns: None,
            rx_ns: None,
            tx_addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            rx_addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            peer_port: 0,
            tx_port: None,
            rx_port: None,
            description: "loopback 127.0.0.1".into(),
            local: true,
            rdma: None,
            home: None,
            journal: None,
            warnings: Vec::new(),
        }
    }
}
