//! A remote peer: the sending side of a `--peer` run (the receiver is the peer's `--serve`);
//! nothing on the host changes.

use super::*;

impl Topology {
    /// The sending side of a `--peer` run (the receiver is the peer's `--serve`).
    pub fn peer(peer: std::net::SocketAddr) -> Topology {
        let addr = peer.ip();
        let local_any = match addr {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        };
        Topology {
            kind: Kind::Peer,
            tx_ns: None,
            rx_ns: None,
            tx_addr: local_any,
            rx_addr: addr,
            peer_port: peer.port(),
            tx_port: None,
            rx_port: None,
            description: format!("peer {peer} (daqtune selftest --serve)"),
            local: false,
            rdma: None,
            home: None,
            journal: None,
            warnings: Vec::new(),
        }
    }
}
