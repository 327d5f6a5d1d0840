//! A port's IPv4 addresses with their lifetimes, from rtnetlink (`RTM_GETADDR`): what procfs
//! cannot say. `/proc/net/fib_trie` lists the addresses but not where they came from; netlink's
//! `IFA_CACHEINFO` carries each address's valid and preferred lifetimes and `IFA_FLAGS` its
//! `IFA_F_PERMANENT` flag. An address a DHCP client (NetworkManager, systemd-networkd, dhclient)
//! installed has a finite valid lifetime, the lease's, and no `IFA_F_PERMANENT`; one set by hand
//! or from a static configuration is permanent with the lifetime "forever" (`ip address` prints
//! `dynamic` for the first, include/uapi/linux/if_addr.h for both fields).
//!
//! The dump and its parsing are rtnetlink's ([`route::Netlink::addrs`], [`route::parse_addr`]);
//! this module reads what they say as lease or static. A host root has no such dump.

use super::netlink::route::{self, Addr};
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// `ifa_flags`: the address does not expire (the 8-bit field carries it; IFA_FLAGS' wider
/// copy adds only flags above 0x80).
pub const IFA_F_PERMANENT: u8 = 0x80;

/// One IPv4 address of an interface as the kernel keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrInfo {
    pub ifindex: u32,
    /// `IFA_LABEL`: the interface's name (or `name:alias`).
    pub label: String,
    pub address: Ipv4Addr,
    pub prefix_len: u8,
    /// `IFA_F_PERMANENT`.
    pub permanent: bool,
    /// Seconds the address stays valid; `None` = forever (or no `IFA_CACHEINFO`).
    pub valid_lft: Option<u32>,
}

impl AddrInfo {
    /// The IPv4 address among rtnetlink's; `None` for another family.
    pub fn from_addr(a: &Addr) -> Option<AddrInfo> {
        let IpAddr::V4(address) = a.local else {
            return None;
        };
        Some(AddrInfo {
            ifindex: u32::try_from(a.index).ok()?,
            label: a.label.clone().unwrap_or_default(),
            address,
            prefix_len: a.prefix_len,
            permanent: a.flags & IFA_F_PERMANENT != 0,
            valid_lft: a.valid_lft,
        })
    }

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

/// Every IPv4 address of the calling thread's network namespace, with its lifetime.
pub fn ipv4_addresses() -> io::Result<Vec<AddrInfo>> {
    // The kernel answers at once; a reply that never comes must not hang a check.
    let all = route::Netlink::open_bounded(Some(Duration::from_secs(5)))
        .and_then(|mut nl| nl.addrs())
        .map_err(|e| io::Error::other(e.to_string()))?;
    Ok(all.iter().filter_map(AddrInfo::from_addr).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    // include/uapi/linux/if_addr.h
    const IFA_ADDRESS: u16 = 1;
    const IFA_LOCAL: u16 = 2;
    const IFA_LABEL: u16 = 3;
    const IFA_CACHEINFO: u16 = 6;
    const IFA_FLAGS: u16 = 8;

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

    fn info(p: &[u8]) -> Option<AddrInfo> {
        route::parse_addr(p).and_then(|a| AddrInfo::from_addr(&a))
    }

    #[test]
    fn a_lease_and_a_static_address() {
        // QEMU's user network leases 10.0.2.15/24 for a day; NetworkManager installs it with
        // that lifetime and without IFA_F_PERMANENT.
        let lease = info(&payload(0, Some(0), 86_400)).expect("addr");
        assert_eq!(lease.cidr(), "10.0.2.15/24");
        assert_eq!(lease.ifname(), "ens1");
        assert_eq!(lease.ifindex, 2);
        assert_eq!(lease.valid_lft, Some(86_400));
        assert!(lease.leased());
        // `ip address add` without lifetimes: permanent, forever (0xffffffff).
        let fixed = info(&payload(0x80, Some(0x80), u32::MAX)).expect("addr");
        assert!(fixed.permanent);
        assert_eq!(fixed.valid_lft, None);
        assert!(!fixed.leased());
        // An older kernel without IFA_FLAGS: the 8-bit field says it.
        assert!(!info(&payload(0x80, None, u32::MAX)).expect("addr").leased());
        // Not IPv4, or cut short: nothing.
        let mut v6 = payload(0, None, 1);
        v6[0] = libc::AF_INET6 as u8;
        assert_eq!(info(&v6), None);
        assert_eq!(info(&[2, 24]), None);
    }

    /// The running kernel's loopback address is permanent (the kernel adds 127.0.0.1/8 itself,
    /// inet_fill_ifaddr reports it with IFA_F_PERMANENT).
    #[test]
    fn the_loopback_address_is_not_a_lease() {
        let all = match ipv4_addresses() {
            Ok(all) => all,
            Err(e) => return daqtune_testkit::skip(&format!("no rtnetlink here: {e}")),
        };
        let Some(lo) = all.iter().find(|a| a.address == Ipv4Addr::LOCALHOST) else {
            return daqtune_testkit::skip("no 127.0.0.1 in this network namespace");
        };
        assert!(!lo.leased(), "{lo:?}");
        assert_eq!(lo.ifname(), "lo");
    }
}
