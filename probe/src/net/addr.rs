//! A port's IPv4 addresses with their lifetimes, from rtnetlink (`RTM_GETADDR`): what procfs
//! cannot say. `/proc/net/fib_trie` lists the addresses but not where they came from; netlink's
//! `IFA_CACHEINFO` carries each address's valid and preferred lifetimes and `IFA_FLAGS` its
//! `IFA_F_PERMANENT` flag. An address a DHCP client (NetworkManager, systemd-networkd, dhclient)
//! installed has a finite valid lifetime, the lease's, and no `IFA_F_PERMANENT`; one set by hand
//! or from a static configuration is permanent with the lifetime "forever" (`ip address` prints
//! `dynamic` for the first, include/uapi/linux/if_addr.h for both fields).
//!
//! Parsing is separate from reading: [`parse_newaddr`] takes one `RTM_NEWADDR` payload; the
//! reader only fetches the dump from the running kernel (a host root has no such thing).

use super::netlink::{attrs, get_string, get_u32, Protocol, Socket, NLM_F_DUMP, NLM_F_REQUEST};
use std::io;
use std::net::Ipv4Addr;
use std::time::Duration;

const RTM_NEWADDR: u16 = 20;
const RTM_GETADDR: u16 = 22;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_LABEL: u16 = 3;
const IFA_CACHEINFO: u16 = 6;
const IFA_FLAGS: u16 = 8;
/// `ifa_flags`: the address does not expire.
pub const IFA_F_PERMANENT: u32 = 0x80;
/// `INFINITY_LIFE_TIME`: the lifetime value that means "forever".
pub const INFINITY_LIFE_TIME: u32 = u32::MAX;

/// One IPv4 address of an interface as the kernel keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrInfo {
    pub ifindex: u32,
    /// `IFA_LABEL`: the interface's name (or `name:alias`).
    pub label: String,
    pub address: Ipv4Addr,
    pub prefix_len: u8,
    /// `IFA_F_PERMANENT` (from `IFA_FLAGS`, else the 8-bit `ifa_flags`).
    pub permanent: bool,
    /// Seconds the address stays valid; `None` = forever (or no `IFA_CACHEINFO`).
    pub valid_lft: Option<u32>,
}

impl AddrInfo {
    /// The interface name without an alias suffix.
    pub fn ifname(&self) -> &str {
        self.label.split(':').next().unwrap_or(&self.label)
    }

    /// `a.b.c.d/len`.
    pub fn cidr(&self) -> String {
        format!("{}/{}", self.address, self.prefix_len)
    }

    /// Whether the address expires: a lease (DHCP), not a static address.
    pub fn leased(&self) -> bool {
        !self.permanent || self.valid_lft.is_some()
    }
}

/// `RTM_GETADDR` for every IPv4 address (a dump).
pub fn dump_request(seq: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(24);
    b.extend_from_slice(&24u32.to_ne_bytes());
    b.extend_from_slice(&RTM_GETADDR.to_ne_bytes());
    b.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    // struct ifaddrmsg: family, prefixlen, flags, scope, index.
    b.extend_from_slice(&[libc::AF_INET as u8, 0, 0, 0]);
    b.extend_from_slice(&0u32.to_ne_bytes());
    b
}

/// One `RTM_NEWADDR` payload (after the netlink header): `struct ifaddrmsg` and its attributes.
/// `None` for another family or a payload too short to be one.
pub fn parse_newaddr(payload: &[u8]) -> Option<AddrInfo> {
    let hdr = payload.get(0..8)?;
    if hdr[0] != libc::AF_INET as u8 {
        return None;
    }
    let prefix_len = hdr[1];
    let mut flags = u32::from(hdr[2]);
    let ifindex = u32::from_ne_bytes(hdr[4..8].try_into().ok()?);
    let (mut local, mut address, mut label, mut valid) = (None, None, String::new(), None);
    for (k, d) in attrs(payload.get(8..)?) {
        match k {
            IFA_LOCAL => local = ipv4(d),
            IFA_ADDRESS => address = ipv4(d),
            IFA_LABEL => label = get_string(d),
            // The 32-bit flags supersede the 8-bit field when present.
            IFA_FLAGS => flags = get_u32(d).unwrap_or(flags),
            // struct ifa_cacheinfo: ifa_prefered, ifa_valid, cstamp, tstamp.
            IFA_CACHEINFO => valid = get_u32(d.get(4..)?),
            _ => {}
        }
    }
    Some(AddrInfo {
        ifindex,
        label,
        // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer's on a
        // point-to-point link and the same as IFA_LOCAL elsewhere.
        address: local.or(address)?,
        prefix_len,
        permanent: flags & IFA_F_PERMANENT != 0,
        valid_lft: valid.filter(|v| *v != INFINITY_LIFE_TIME),
    })
}

fn ipv4(d: &[u8]) -> Option<Ipv4Addr> {
    let b: [u8; 4] = d.get(0..4)?.try_into().ok()?;
    Some(Ipv4Addr::from(b))
}

/// Every IPv4 address of the calling thread's network namespace, with its lifetime.
pub fn ipv4_addresses() -> io::Result<Vec<AddrInfo>> {
    // The kernel answers at once; a reply that never comes must not hang a check.
    let mut s = Socket::open(Protocol::Route, Some(Duration::from_secs(5)))?;
    let replies = s.payloads_of(RTM_NEWADDR, dump_request)?;
    Ok(replies.iter().filter_map(|p| parse_newaddr(p)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `RTM_NEWADDR` payload as the kernel builds it (inet_fill_ifaddr: ifaddrmsg, then
    /// IFA_ADDRESS, IFA_LOCAL, IFA_LABEL, IFA_FLAGS, IFA_CACHEINFO).
    fn payload(ifa_flags: u8, flags: Option<u32>, valid: u32) -> Vec<u8> {
        let mut b = vec![libc::AF_INET as u8, 24, ifa_flags, 0];
        b.extend_from_slice(&2u32.to_ne_bytes());
        let mut attr = |k: u16, d: &[u8]| {
            b.extend_from_slice(&((4 + d.len()) as u16).to_ne_bytes());
            b.extend_from_slice(&k.to_ne_bytes());
            b.extend_from_slice(d);
            while b.len() % 4 != 0 {
                b.push(0);
            }
        };
        attr(IFA_ADDRESS, &[10, 0, 2, 15]);
        attr(IFA_LOCAL, &[10, 0, 2, 15]);
        attr(IFA_LABEL, b"ens1\0");
        if let Some(f) = flags {
            attr(IFA_FLAGS, &f.to_ne_bytes());
        }
        let mut ci = Vec::new();
        for v in [valid, valid, 100, 200] {
            ci.extend_from_slice(&v.to_ne_bytes());
        }
        attr(IFA_CACHEINFO, &ci);
        b
    }

    #[test]
    fn a_lease_and_a_static_address() {
        // QEMU's user network leases 10.0.2.15/24 for a day; NetworkManager installs it with
        // that lifetime and without IFA_F_PERMANENT.
        let lease = parse_newaddr(&payload(0, Some(0), 86_400)).expect("addr");
        assert_eq!(lease.cidr(), "10.0.2.15/24");
        assert_eq!(lease.ifname(), "ens1");
        assert_eq!(lease.ifindex, 2);
        assert_eq!(lease.valid_lft, Some(86_400));
        assert!(lease.leased());
        // `ip address add` without lifetimes: permanent, forever.
        let fixed = parse_newaddr(&payload(0x80, Some(0x80), INFINITY_LIFE_TIME)).expect("addr");
        assert!(fixed.permanent);
        assert_eq!(fixed.valid_lft, None);
        assert!(!fixed.leased());
        // An older kernel without IFA_FLAGS: the 8-bit field says it.
        assert!(!parse_newaddr(&payload(0x80, None, INFINITY_LIFE_TIME))
            .expect("addr")
            .leased());
        // Not IPv4, or cut short: nothing.
        let mut v6 = payload(0, None, 1);
        v6[0] = libc::AF_INET6 as u8;
        assert_eq!(parse_newaddr(&v6), None);
        assert_eq!(parse_newaddr(&[2, 24]), None);
    }

    #[test]
    fn the_dump_request_is_an_ifaddrmsg_for_ipv4() {
        let r = dump_request(7);
        assert_eq!(r.len(), 24);
        assert_eq!(u32::from_ne_bytes(r[0..4].try_into().expect("len")), 24);
        assert_eq!(u16::from_ne_bytes(r[4..6].try_into().expect("type")), 22);
        assert_eq!(
            u16::from_ne_bytes(r[6..8].try_into().expect("flags")),
            0x301
        );
        assert_eq!(r[16], libc::AF_INET as u8);
    }

    /// The running kernel's loopback address is permanent (the kernel adds 127.0.0.1/8 itself,
    /// inet_fill_ifaddr reports it with IFA_F_PERMANENT).
    #[test]
    fn the_loopback_address_is_not_a_lease() {
        let Ok(all) = ipv4_addresses() else {
            return; // no netlink here (a sandbox without sockets): nothing to read
        };
        if let Some(lo) = all.iter().find(|a| a.address == Ipv4Addr::LOCALHOST) {
            assert!(!lo.leased(), "{lo:?}");
            assert_eq!(lo.ifname(), "lo");
        }
    }
}
