//! Which IP addresses this network namespace owns, and on which netdev, from procfs:
//! `/proc/net/fib_trie` (IPv4 addresses the kernel treats as local), `/proc/net/route` (the
//! connected route that ties an IPv4 address to its interface) and `/proc/net/if_inet6`
//! (IPv6 addresses with their interface). Plain files, so the answer is the same on a live
//! host and on a captured root; netlink would need a live kernel.

use daqtune_probe::Host;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub iface: String,
    pub dest: Ipv4Addr,
    pub mask: Ipv4Addr,
    pub gateway: Ipv4Addr,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalAddrs {
    /// IPv4 local entries: the address and its prefix length (`/32` for an address,
    /// `/8` for 127.0.0.0/8).
    pub v4: Vec<(Ipv4Addr, u8)>,
    pub routes: Vec<Route>,
    pub v6: Vec<(Ipv6Addr, String)>,
}

fn in_prefix(ip: Ipv4Addr, net: Ipv4Addr, len: u8) -> bool {
    if len == 0 {
        return true;
    }
    let len = u32::from(len.min(32));
    let mask = u32::MAX << (32 - len);
    u32::from(ip) & mask == u32::from(net) & mask
}

/// The IPv4 addresses marked `host LOCAL` in /proc/net/fib_trie.
pub fn parse_fib_trie(text: &str) -> Vec<(Ipv4Addr, u8)> {
    let mut out = Vec::new();
    let mut leaf: Option<Ipv4Addr> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("|-- ") {
            leaf = rest.trim().parse().ok();
            continue;
        }
        if t.starts_with("+--") || t.ends_with(':') {
            leaf = None;
            continue;
        }
        if let Some(rest) = t.strip_prefix('/') {
            let mut it = rest.split_whitespace();
            let len = it.next().and_then(|l| l.parse::<u8>().ok());
            let _scope = it.next();
            let kind = it.next();
            if let (Some(ip), Some(len), Some("LOCAL")) = (leaf, len, kind) {
                if len <= 32 && !out.contains(&(ip, len)) {
                    out.push((ip, len));
                }
            }
        }
    }
    out
}

fn hex_v4(s: &str) -> Option<Ipv4Addr> {
    // The kernel prints the network-order word as a host-order integer.
    let v = u32::from_str_radix(s, 16).ok()?;
    Some(Ipv4Addr::from(v.to_le_bytes()))
}

/// /proc/net/route (the main table).
pub fn parse_route(text: &str) -> Vec<Route> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            Some(Route {
                iface: f[0].to_string(),
                dest: hex_v4(f[1])?,
                gateway: hex_v4(f[2])?,
                mask: hex_v4(f[7])?,
            })
        })
        .collect()
}

/// One IPv4 neighbour of /proc/net/arp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    pub ip: Ipv4Addr,
    pub mac: String,
    pub device: String,
    /// `ATF_COM` (0x2): the hardware address is known.
    pub complete: bool,
    /// `ATF_PERM` (0x4): a static entry (`ip neigh ... nud permanent`).
    pub permanent: bool,
}

/// /proc/net/arp: `IP address  HW type  Flags  HW address  Mask  Device`.
pub fn parse_arp(text: &str) -> Vec<Neighbour> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 6 {
                return None;
            }
            let flags = u32::from_str_radix(f[2].trim_start_matches("0x"), 16).ok()?;
            Some(Neighbour {
                ip: f[0].parse().ok()?,
                mac: f[3].to_ascii_lowercase(),
                device: f[5].to_string(),
                complete: flags & 0x2 != 0 && f[3] != "00:00:00:00:00:00",
                permanent: flags & 0x4 != 0,
            })
        })
        .collect()
}

/// The route the kernel's main table takes to `ip`: the most specific prefix that covers it
/// (a default route covers everything).
pub fn route_to(routes: &[Route], ip: Ipv4Addr) -> Option<&Route> {
    routes
        .iter()
        .filter(|r| in_prefix(ip, r.dest, u32::from(r.mask).leading_ones() as u8))
        .max_by_key(|r| u32::from(r.mask).leading_ones())
}

/// /proc/net/if_inet6: `address ifindex prefixlen scope flags name`.
pub fn parse_if_inet6(text: &str) -> Vec<(Ipv6Addr, String)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 6 || f[0].len() != 32 {
                return None;
            }
            let v = u128::from_str_radix(f[0], 16).ok()?;
            Some((Ipv6Addr::from(v), f[5].to_string()))
        })
        .collect()
}

/// Neither address table could be read (the first table's reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read the namespace's addresses: {0}")]
pub struct AddrsError(pub String);

impl LocalAddrs {
    /// Read this namespace's addresses; `Err` when neither address table is readable.
    pub fn read(host: &Host) -> Result<LocalAddrs, AddrsError> {
        let text = |p: &str| host.read_string(p);
        Self::from_tables(
            text("/proc/net/fib_trie"),
            text("/proc/net/if_inet6"),
            text("/proc/net/route").ok(),
        )
    }

    /// The addresses from the text of /proc/net/fib_trie, /proc/net/if_inet6 and
    /// /proc/net/route (each as read, or why it could not be).
    pub fn from_tables<E: std::fmt::Display>(
        fib: Result<String, E>,
        v6: Result<String, E>,
        route: Option<String>,
    ) -> Result<LocalAddrs, AddrsError> {
        if let (Err(e), Err(_)) = (&fib, &v6) {
            return Err(AddrsError(e.to_string()));
        }
        Ok(LocalAddrs {
            v4: fib.as_deref().map(parse_fib_trie).unwrap_or_default(),
            routes: route.as_deref().map(parse_route).unwrap_or_default(),
            v6: v6.as_deref().map(parse_if_inet6).unwrap_or_default(),
        })
    }

    /// The IPv4 addresses on `iface` as `a.b.c.d/len`, the length that of the connected route
    /// the kernel made for the address (what `ip addr` prints), most specific route first.
    /// An address without such a route (a /32 point-to-point one) is given as /32.
    pub fn v4_cidrs_on(&self, iface: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (ip, len) in &self.v4 {
            // The host entries are /32; 127.0.0.0/8 and broadcast entries are not addresses.
            if *len != 32 || ip.is_loopback() {
                continue;
            }
            let covering = self
                .routes
                .iter()
                .filter(|r| {
                    r.gateway.is_unspecified()
                        && u32::from(r.mask).leading_ones() == u32::from(r.mask).count_ones()
                })
                .filter(|r| in_prefix(*ip, r.dest, u32::from(r.mask).count_ones() as u8))
                .max_by_key(|r| u32::from(r.mask).count_ones());
            match covering {
                Some(r) if r.iface == iface => {
                    out.push(format!("{ip}/{}", u32::from(r.mask).count_ones()));
                }
                None if self.netdev_of(IpAddr::V4(*ip)).as_deref() == Some(iface) => {
                    out.push(format!("{ip}/32"));
                }
                _ => {}
            }
        }
        out
    }

    pub fn is_local(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.v4.iter().any(|(n, l)| in_prefix(a, *n, *l)),
            IpAddr::V6(a) => self.v6.iter().any(|(n, _)| *n == a),
        }
    }

    /// The netdev that carries a local address: the interface of IPv6 entries; for IPv4 `lo`
    /// for 127.0.0.0/8, else the most specific connected (gateway-less) route covering it.
    pub fn netdev_of(&self, ip: IpAddr) -> Option<String> {
        match ip {
            IpAddr::V6(a) => self
                .v6
                .iter()
                .find(|(n, _)| *n == a)
                .map(|(_, d)| d.clone()),
            IpAddr::V4(a) if a.is_loopback() => Some("lo".into()),
            IpAddr::V4(a) => self
                .routes
                .iter()
                .filter(|r| r.gateway.is_unspecified())
                .filter(|r| {
                    let len = u32::from(r.mask).leading_ones() as u8;
                    in_prefix(a, r.dest, len)
                })
                .max_by_key(|r| u32::from(r.mask).leading_ones())
                .map(|r| r.iface.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIB: &str = "Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.100.1.0/24 2 0 2
        |-- 10.100.1.0
           /24 link UNICAST
        |-- 10.100.1.1
           /32 host LOCAL
Local:
  +-- 0.0.0.0/0 3 0 4
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
              /32 link BROADCAST
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
";
    const ROUTE: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0
cx7_0\t0001640A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
";
    const V6: &str = "00000000000000000000000000000001 01 80 10 80       lo
fe800000000000004ab02dfffef407fb 04 40 20 80    cx7_0
garbage
";

    #[test]
    fn local_addresses_and_their_netdevs() {
        let a = LocalAddrs {
            v4: parse_fib_trie(FIB),
            routes: parse_route(ROUTE),
            v6: parse_if_inet6(V6),
        };
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        assert!(a.is_local(ip("10.100.1.1")));
        assert!(!a.is_local(ip("10.100.1.2")));
        assert!(!a.is_local(ip("10.100.1.0")));
        assert!(a.is_local(ip("127.0.0.1")));
        assert!(a.is_local(ip("127.3.0.1")));
        assert!(a.is_local(ip("::1")));
        assert_eq!(a.netdev_of(ip("10.100.1.1")).as_deref(), Some("cx7_0"));
        assert_eq!(a.netdev_of(ip("127.0.0.1")).as_deref(), Some("lo"));
        assert_eq!(
            a.netdev_of(ip("fe80::4ab0:2dff:fef4:7fb")).as_deref(),
            Some("cx7_0")
        );
        // The default route has a gateway: it never claims an address.
        assert_eq!(a.netdev_of(ip("8.8.8.8")), None);
        // As `ip addr` gives it: the address with its connected route's length.
        assert_eq!(a.v4_cidrs_on("cx7_0"), ["10.100.1.1/24"]);
        assert!(a.v4_cidrs_on("eth0").is_empty());
        assert!(a.v4_cidrs_on("lo").is_empty());
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in "[0-9A-Fa-f|+\\-/. :\tLOCALhostlink\n]{0,300}") {
            let a = LocalAddrs {
                v4: parse_fib_trie(&s),
                routes: parse_route(&s),
                v6: parse_if_inet6(&s),
            };
            let _ = a.netdev_of("10.0.0.1".parse().expect("ip"));
            let _ = a.is_local("::1".parse().expect("ip"));
        }
    }

    #[test]
    fn garbage_is_ignored() {
        for t in ["", "(null)", "|-- x\n/abc host LOCAL", "Iface\nx y z"] {
            let _ = parse_fib_trie(t);
            assert!(parse_route(t).is_empty());
            assert!(parse_if_inet6(t).is_empty());
        }
    }

    #[test]
    fn arp_flags_and_the_most_specific_route() {
        // The kernel's arp_seq_show: ATF_COM 0x2, ATF_PERM 0x4; an incomplete entry has 0x0
        // and a zero address.
        let arp = "IP address       HW type     Flags       HW address            Mask     Device
2.2.2.2          0x1         0x6         4C:BB:47:98:7A:10     *        enp1s0f0np0
10.0.0.9         0x1         0x0         00:00:00:00:00:00     *        eth0
192.168.1.1      0x1         0x2         00:11:22:33:44:55     *        eth0
";
        let n = parse_arp(arp);
        assert_eq!(n.len(), 3);
        assert!(n[0].complete && n[0].permanent);
        assert_eq!(n[0].mac, "4c:bb:47:98:7a:10");
        assert!(!n[1].complete);
        assert!(n[2].complete && !n[2].permanent);
        let routes = parse_route(ROUTE);
        assert_eq!(
            route_to(&routes, "10.100.1.7".parse().expect("ip")).map(|r| r.iface.as_str()),
            Some("cx7_0")
        );
        assert_eq!(
            route_to(&routes, "2.2.2.2".parse().expect("ip")).map(|r| r.iface.as_str()),
            Some("eth0")
        );
        assert!(route_to(&[], "2.2.2.2".parse().expect("ip")).is_none());
    }
}
