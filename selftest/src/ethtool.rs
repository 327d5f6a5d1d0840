//! NIC statistics through the SIOCETHTOOL ioctl (what `ethtool -S` prints), for the physical
//! port counters some drivers expose (mlx5: `tx_bytes_phy`, `rx_bytes_phy`). Interface counters
//! of a netdev count what the driver handed over; the phy counters count what crossed the wire,
//! which is what the two-port self-test must prove.
//!
//! The ioctl acts in the network namespace of the socket it is issued on, so callers run
//! [`stats`] on a thread inside the port's namespace. The ioctl itself is probe's
//! (`daqtune_probe::net::ethtool_ioctl`).

/// Every `ethtool -S` counter of a port (probe's `SIOCETHTOOL` reader, the one FFI for it).
pub use daqtune_probe::net::ethtool_ioctl::stats;

/// The wire-level byte counters (`tx_bytes_phy`, `rx_bytes_phy`) where the driver has them.
pub fn phy_bytes(all: &[(String, u64)]) -> (Option<u64>, Option<u64>) {
    let get = |k: &str| all.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
    (get("tx_bytes_phy"), get("rx_bytes_phy"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phy_lookup() {
        let v = vec![
            ("rx_bytes_phy".to_string(), 9),
            ("tx_packets".to_string(), 1),
        ];
        assert_eq!(phy_bytes(&v), (None, Some(9)));
        assert_eq!(phy_bytes(&[]), (None, None));
    }
}
