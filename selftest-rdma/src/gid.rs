//! GID table entries and the choice of the source GID: RoCE v2, IPv4-mapped, the port's IPv4
//! address (RoCE v2 is routable UDP/IP; v1 and link-local IPv6 GIDs are not what the peer's
//! address handle can reach over an IPv4 network).

use std::net::Ipv4Addr;

/// ibv_gid_type values (ABI of rdma-core).
pub const GID_TYPE_IB: u32 = 0;
pub const GID_TYPE_ROCE_V1: u32 = 1;
pub const GID_TYPE_ROCE_V2: u32 = 2;

/// One populated GID table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GidInfo {
    pub index: u32,
    pub gid: [u8; 16],
    /// [`GID_TYPE_IB`], [`GID_TYPE_ROCE_V1`] or [`GID_TYPE_ROCE_V2`].
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

impl GidInfo {
    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        ipv4_of_gid(&self.gid)
    }
}

pub fn ipv4_of_gid(gid: &[u8; 16]) -> Option<Ipv4Addr> {
    if gid[..10].iter().all(|b| *b == 0) && gid[10] == 0xff && gid[11] == 0xff {
        Some(Ipv4Addr::new(gid[12], gid[13], gid[14], gid[15]))
    } else {
        None
    }
}

/// Textual GID as the kernel prints it in sysfs (`0000:0000:0000:0000:0000:ffff:c612:0001`).
pub fn gid_to_string(gid: &[u8; 16]) -> String {
    gid.chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

/// Parses [`gid_to_string`]'s format (also accepts `::`-compressed IPv6 text).
pub fn parse_gid(s: &str) -> Option<[u8; 16]> {
    let ip: std::net::Ipv6Addr = s.trim().parse().ok()?;
    Some(ip.octets())
}

/// Picks the source GID: a RoCE v2 IPv4-mapped entry, the one for `want` when given, else the
/// lowest index. For InfiniBand ports (no RoCE entries) the first IB GID. `None` when the table
/// has no usable entry (no IPv4 address on the port's netdev yet).
pub fn select_gid(table: &[GidInfo], want: Option<Ipv4Addr>) -> Option<GidInfo> {
    let mut v2: Vec<&GidInfo> = table
        .iter()
        .filter(|g| g.gid_type == GID_TYPE_ROCE_V2 && g.ipv4().is_some())
        .collect();
    v2.sort_by_key(|g| g.index);
    if let Some(ip) = want {
        return v2.into_iter().find(|g| g.ipv4() == Some(ip)).copied();
    }
    if let Some(g) = v2.first() {
        return Some(**g);
    }
    table
        .iter()
        .filter(|g| g.gid_type == GID_TYPE_IB)
        .min_by_key(|g| g.index)
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u32, text: &str, gid_type: u32) -> GidInfo {
        GidInfo {
            index,
            gid: parse_gid(text).expect("gid"),
            gid_type,
            ndev_ifindex: 3,
        }
    }

    #[test]
    fn ipv4_mapped_gids() {
        let g = parse_gid("0000:0000:0000:0000:0000:ffff:c612:0001").expect("gid");
        assert_eq!(ipv4_of_gid(&g), Some(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(gid_to_string(&g), "0000:0000:0000:0000:0000:ffff:c612:0001");
        let ll = parse_gid("fe80:0000:0000:0000:5054:00ff:fe12:3456").expect("gid");
        assert_eq!(ipv4_of_gid(&ll), None);
        assert_eq!(ipv4_of_gid(&[0u8; 16]), None);
        assert_eq!(parse_gid(""), None);
        assert_eq!(parse_gid("(null)"), None);
        assert_eq!(parse_gid("0000:zzzz"), None);
    }

    #[test]
    fn selection_prefers_roce_v2_ipv4() {
        // The table rxe shows for a netdev with 198.18.0.1 and a link-local IPv6 address.
        let t = [
            entry(0, "fe80::5054:ff:fe12:3456", GID_TYPE_ROCE_V1),
            entry(1, "fe80::5054:ff:fe12:3456", GID_TYPE_ROCE_V2),
            entry(2, "::ffff:198.18.0.1", GID_TYPE_ROCE_V1),
            entry(3, "::ffff:198.18.0.1", GID_TYPE_ROCE_V2),
            entry(5, "::ffff:10.0.0.1", GID_TYPE_ROCE_V2),
        ];
        assert_eq!(select_gid(&t, None).map(|g| g.index), Some(3));
        assert_eq!(
            select_gid(&t, Some(Ipv4Addr::new(10, 0, 0, 1))).map(|g| g.index),
            Some(5)
        );
        assert_eq!(select_gid(&t, Some(Ipv4Addr::new(10, 0, 0, 9))), None);
        // No IPv4 address yet: nothing usable (link-local v2 is not routable).
        assert_eq!(select_gid(&t[..2], None), None);
        assert_eq!(select_gid(&[], None), None);
        // InfiniBand port.
        let ib = [entry(0, "fe80::2:c903:1:2", GID_TYPE_IB)];
        assert_eq!(select_gid(&ib, None).map(|g| g.index), Some(0));
    }
}
