//! rtnetlink: links (veth creation, MTU, up/down, namespace moves), addresses, routes,
//! neighbours and traffic control. No iproute2 and no async runtime: the self-test needs a dozen
//! synchronous requests, and some GPU hosts and containers lack `ip`.
//!
//! A netlink socket acts in the network namespace of the thread that created it: to act in
//! another one, open the socket on a thread that entered it (the self-test's `netlink::open_in`).
//! Message building and parsing are plain byte code, tested on built and captured bytes.

use super::{
    align4, attrs, get_string, ne_i32, ne_u16, ne_u32, Builder, Error, Protocol, Result, Socket,
    NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::RawFd;

// Message types (linux/rtnetlink.h).
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTM_GETLINK: u16 = 18;
const RTM_NEWADDR: u16 = 20;
const RTM_GETADDR: u16 = 22;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const RTM_NEWQDISC: u16 = 36;
const RTM_DELQDISC: u16 = 37;
const RTM_GETQDISC: u16 = 38;

// Traffic control (linux/rtnetlink.h, linux/pkt_sched.h).
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
const TCA_TBF_BURST: u16 = 6;
/// The root of a device's egress (`tc qdisc add dev X root ...`).
pub const TC_H_ROOT: u32 = 0xFFFF_FFFF;
/// Rates count whole Ethernet frames: the kernel needs no rate table from user space.
const TC_LINKLAYER_ETHERNET: u8 = 1;

const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_STATS64: u16 = 23;
const IFLA_LINKINFO: u16 = 18;
const IFLA_NET_NS_FD: u16 = 28;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;
const VETH_INFO_PEER: u16 = 1;

const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;
const IFA_LABEL: u16 = 3;
const IFA_BROADCAST: u16 = 4;

const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_PREFSRC: u16 = 7;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;

const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
const NUD_PERMANENT: u16 = 0x80;

pub const IFF_UP: u32 = 0x1;
pub const RT_TABLE_MAIN: u8 = 254;
pub const RTPROT_KERNEL: u8 = 2;
pub const RTPROT_BOOT: u8 = 3;
pub const RTPROT_STATIC: u8 = 4;
pub const RT_SCOPE_UNIVERSE: u8 = 0;
pub const RT_SCOPE_LINK: u8 = 253;
pub const RT_SCOPE_HOST: u8 = 254;
pub const RTN_UNICAST: u8 = 1;

const AF_INET: u8 = libc::AF_INET as u8;
const AF_INET6: u8 = libc::AF_INET6 as u8;

/// A network interface as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub index: i32,
    pub name: String,
    pub mtu: u32,
    pub flags: u32,
    pub mac: Vec<u8>,
    /// Interface counters (IFLA_STATS64), when the kernel sent them.
    pub stats: Option<LinkStats>,
    /// Every field of IFLA_STATS64, named like the sysfs statistics files (the drop and
    /// error counters the self-test records per port).
    pub counters: Vec<crate::net::counters::Counter>,
}

/// The first fields of `struct rtnl_link_stats64`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
}

fn parse_stats64(d: &[u8]) -> Option<LinkStats> {
    let f = |i: usize| -> Option<u64> {
        Some(u64::from_ne_bytes(
            d.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    Some(LinkStats {
        rx_packets: f(0)?,
        tx_packets: f(1)?,
        rx_bytes: f(2)?,
        tx_bytes: f(3)?,
        rx_errors: f(4)?,
        tx_errors: f(5)?,
        rx_dropped: f(6)?,
        tx_dropped: f(7)?,
    })
}

impl Link {
    pub fn is_up(&self) -> bool {
        self.flags & IFF_UP != 0
    }
}

/// An interface address.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Addr {
    pub index: i32,
    pub prefix_len: u8,
    pub flags: u8,
    pub scope: u8,
    /// IFA_LOCAL for IPv4 (the interface's own address), IFA_ADDRESS otherwise.
    pub local: IpAddr,
    /// IFA_ADDRESS when it differs from local (point-to-point peer).
    pub peer: Option<IpAddr>,
    pub broadcast: Option<IpAddr>,
    pub label: Option<String>,
}

/// A route (main table unless `table` says otherwise).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Route {
    pub family: u8,
    pub dst: Option<IpAddr>,
    pub dst_len: u8,
    pub table: u32,
    pub protocol: u8,
    pub scope: u8,
    pub kind: u8,
    pub oif: Option<i32>,
    pub gateway: Option<IpAddr>,
    pub prefsrc: Option<IpAddr>,
    pub priority: Option<u32>,
    /// Output interfaces of a multipath route's next hops.
    pub multipath_oifs: Vec<i32>,
}

impl Route {
    /// A default route (0.0.0.0/0 or ::/0) of a unicast kind.
    pub fn is_default(&self) -> bool {
        self.dst_len == 0 && self.kind == RTN_UNICAST
    }

    pub fn uses_link(&self, index: i32) -> bool {
        self.oif == Some(index) || self.multipath_oifs.contains(&index)
    }

    /// A /32 (or /128) link-scope route to `dst` through `oif`.
    pub fn host_route(dst: IpAddr, oif: i32) -> Route {
        let (family, len) = match dst {
            IpAddr::V4(_) => (AF_INET, 32),
            IpAddr::V6(_) => (AF_INET6, 128),
        };
        Route {
            family,
            dst: Some(dst),
            dst_len: len,
            table: RT_TABLE_MAIN as u32,
            protocol: RTPROT_STATIC,
            scope: RT_SCOPE_LINK,
            kind: RTN_UNICAST,
            oif: Some(oif),
            gateway: None,
            prefsrc: None,
            priority: None,
            multipath_oifs: Vec::new(),
        }
    }
}

/// A token-bucket filter (`tc qdisc add dev X root tbf rate R burst B limit L`): egress of a
/// link shaped to `rate_bits` per second. The self-test's tests use it to make a veth pair slow
/// on purpose; no `tc` binary is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tbf {
    /// Bits per second.
    pub rate_bits: u64,
    /// Bytes the bucket holds: the largest burst sent at line rate. It must hold one whole
    /// frame (a GSO super-frame is cut to fit), or the kernel drops what does not fit.
    pub burst_bytes: u32,
    /// Bytes queued behind the bucket before packets drop.
    pub limit_bytes: u32,
}

impl Tbf {
    /// A shaper at `rate_bits`/s on a link of `mtu`: a bucket of 5 ms of traffic (at least
    /// 64 KiB, a whole GSO frame) and a queue of 100 ms (at least two buckets), so that TCP
    /// settles at the rate instead of losing whole windows.
    pub fn at(rate_bits: u64, mtu: u32) -> Tbf {
        let bytes_per_s = rate_bits / 8;
        let burst = (bytes_per_s / 200).max(64 * 1024).max(u64::from(mtu) + 64);
        let limit = (bytes_per_s / 10).max(2 * burst);
        Tbf {
            rate_bits,
            burst_bytes: burst.min(u64::from(u32::MAX)) as u32,
            limit_bytes: limit.min(u64::from(u32::MAX)) as u32,
        }
    }
}

/// A queueing discipline as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qdisc {
    pub index: i32,
    pub kind: String,
    pub handle: u32,
    pub parent: u32,
}

/// struct tcmsg: family, pad, ifindex, handle, parent, info.
fn tcmsg(index: i32, handle: u32, parent: u32) -> [u8; 20] {
    let mut m = [0u8; 20];
    m[4..8].copy_from_slice(&index.to_ne_bytes());
    m[8..12].copy_from_slice(&handle.to_ne_bytes());
    m[12..16].copy_from_slice(&parent.to_ne_bytes());
    m
}

/// struct tc_ratespec { u8 cell_log; u8 linklayer; u16 overhead; s16 cell_align; u16 mpu;
/// u32 rate (bytes/s) }.
fn ratespec(bytes_per_s: u64) -> [u8; 12] {
    let mut r = [0u8; 12];
    r[1] = TC_LINKLAYER_ETHERNET;
    // Above 4 GB/s the u32 saturates and TCA_TBF_RATE64 carries the rate.
    let low = bytes_per_s.min(u64::from(u32::MAX)) as u32;
    r[8..12].copy_from_slice(&low.to_ne_bytes());
    r
}

/// RTM_NEWQDISC for a root tbf on link `index` (replacing whatever root qdisc it has).
pub fn tbf_request(seq: u32, index: i32, t: &Tbf) -> Vec<u8> {
    let bytes_per_s = (t.rate_bits / 8).max(1);
    // struct tc_tbf_qopt { tc_ratespec rate, peakrate; u32 limit, buffer, mtu }. `buffer` is
    // the bucket in scheduler ticks (64 ns); TCA_TBF_BURST below states it in bytes, which the
    // kernel prefers, but the field is filled consistently for older kernels.
    let buffer_ns = u64::from(t.burst_bytes) * 1_000_000_000 / bytes_per_s;
    let mut q = Vec::with_capacity(36);
    q.extend_from_slice(&ratespec(bytes_per_s));
    q.extend_from_slice(&[0u8; 12]); // no peak rate
    q.extend_from_slice(&t.limit_bytes.to_ne_bytes());
    q.extend_from_slice(&((buffer_ns >> 6).min(u64::from(u32::MAX)) as u32).to_ne_bytes());
    q.extend_from_slice(&0u32.to_ne_bytes());
    let mut b = Builder::new(
        RTM_NEWQDISC,
        NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE,
        seq,
    );
    b.raw(&tcmsg(index, 0x1_0000, TC_H_ROOT));
    b.string(TCA_KIND, "tbf");
    b.begin_nest(TCA_OPTIONS);
    b.attr(TCA_TBF_PARMS, &q);
    if bytes_per_s > u64::from(u32::MAX) {
        b.attr(TCA_TBF_RATE64, &bytes_per_s.to_ne_bytes());
    }
    b.u32(TCA_TBF_BURST, t.burst_bytes);
    b.end_nest();
    b.finish()
}

/// Decodes an RTM_NEWQDISC payload (tcmsg + attributes).
pub fn parse_qdisc(p: &[u8]) -> Option<Qdisc> {
    if p.len() < 20 {
        return None;
    }
    let index = ne_i32(p, 4)?;
    let handle = u32::from_ne_bytes(p[8..12].try_into().ok()?);
    let parent = u32::from_ne_bytes(p[12..16].try_into().ok()?);
    let kind = attrs(&p[20..])
        .into_iter()
        .find(|(k, _)| *k == TCA_KIND)
        .map(|(_, d)| get_string(d))?;
    Some(Qdisc {
        index,
        kind,
        handle,
        parent,
    })
}

// ---------------------------------------------------------------------------------------------
// Message building.

fn ifinfomsg(family: u8, index: i32, flags: u32, change: u32) -> [u8; 16] {
    let mut m = [0u8; 16];
    m[0] = family;
    m[4..8].copy_from_slice(&index.to_ne_bytes());
    m[8..12].copy_from_slice(&flags.to_ne_bytes());
    m[12..16].copy_from_slice(&change.to_ne_bytes());
    m
}

fn ifaddrmsg(family: u8, prefix: u8, flags: u8, scope: u8, index: i32) -> [u8; 8] {
    let mut m = [0u8; 8];
    m[0] = family;
    m[1] = prefix;
    m[2] = flags;
    m[3] = scope;
    m[4..8].copy_from_slice(&index.to_ne_bytes());
    m
}

fn rtmsg(r: &Route) -> [u8; 12] {
    [
        r.family,
        r.dst_len,
        0,
        0,
        if r.table < 256 { r.table as u8 } else { 0 },
        r.protocol,
        r.scope,
        r.kind,
        0,
        0,
        0,
        0,
    ]
}

fn ndmsg(family: u8, index: i32, state: u16) -> [u8; 12] {
    let mut m = [0u8; 12];
    m[0] = family;
    m[4..8].copy_from_slice(&index.to_ne_bytes());
    m[8..10].copy_from_slice(&state.to_ne_bytes());
    m
}

fn ip_bytes(ip: &IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

fn family_of(ip: &IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => AF_INET,
        IpAddr::V6(_) => AF_INET6,
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing.

fn parse_ip(family: u8, d: &[u8]) -> Option<IpAddr> {
    match (family, d.len()) {
        (AF_INET, 4) => Some(IpAddr::V4(Ipv4Addr::new(d[0], d[1], d[2], d[3]))),
        (AF_INET6, 16) => {
            let a: [u8; 16] = d.try_into().ok()?;
            Some(IpAddr::V6(Ipv6Addr::from(a)))
        }
        _ => None,
    }
}

pub fn parse_link(p: &[u8]) -> Option<Link> {
    let index = ne_i32(p, 4)?;
    let flags = ne_u32(p, 8)?;
    let mut l = Link {
        index,
        name: String::new(),
        mtu: 0,
        flags,
        mac: Vec::new(),
        stats: None,
        counters: Vec::new(),
    };
    for (k, d) in attrs(p.get(16..)?) {
        match k {
            IFLA_IFNAME => l.name = get_string(d),
            IFLA_MTU => l.mtu = ne_u32(d, 0).unwrap_or(0),
            IFLA_ADDRESS => l.mac = d.to_vec(),
            IFLA_STATS64 => {
                l.stats = parse_stats64(d);
                l.counters = crate::net::counters::parse_stats64(d);
            }
            _ => {}
        }
    }
    Some(l)
}

pub fn parse_addr(p: &[u8]) -> Option<Addr> {
    let family = *p.first()?;
    let prefix_len = *p.get(1)?;
    let flags = *p.get(2)?;
    let scope = *p.get(3)?;
    let index = ne_i32(p, 4)?;
    let mut address = None;
    let mut local = None;
    let mut broadcast = None;
    let mut label = None;
    for (k, d) in attrs(p.get(8..)?) {
        match k {
            IFA_ADDRESS => address = parse_ip(family, d),
            IFA_LOCAL => local = parse_ip(family, d),
            IFA_BROADCAST => broadcast = parse_ip(family, d),
            IFA_LABEL => label = Some(get_string(d)),
            _ => {}
        }
    }
    let own = local.or(address)?;
    let peer = match (local, address) {
        (Some(l), Some(a)) if l != a => Some(a),
        _ => None,
    };
    Some(Addr {
        index,
        prefix_len,
        flags,
        scope,
        local: own,
        peer,
        broadcast,
        label,
    })
}

/// A neighbour (ARP/NDP) table entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Neighbour {
    pub index: i32,
    pub ip: IpAddr,
    pub mac: Vec<u8>,
    /// NUD_* state bits.
    pub state: u16,
}

impl Neighbour {
    /// Entries an administrator made (`nud permanent`); the kernel never re-learns these.
    pub fn is_permanent(&self) -> bool {
        self.state & NUD_PERMANENT != 0
    }
}

pub fn parse_neighbour(p: &[u8]) -> Option<Neighbour> {
    let family = *p.first()?;
    let index = ne_i32(p, 4)?;
    let state = ne_u16(p, 8)?;
    let (mut ip, mut mac) = (None, Vec::new());
    for (k, d) in attrs(p.get(12..)?) {
        match k {
            NDA_DST => ip = parse_ip(family, d),
            NDA_LLADDR => mac = d.to_vec(),
            _ => {}
        }
    }
    Some(Neighbour {
        index,
        ip: ip?,
        mac,
        state,
    })
}

pub fn parse_route(p: &[u8]) -> Option<Route> {
    let family = *p.first()?;
    let mut r = Route {
        family,
        dst: None,
        dst_len: *p.get(1)?,
        table: *p.get(4)? as u32,
        protocol: *p.get(5)?,
        scope: *p.get(6)?,
        kind: *p.get(7)?,
        oif: None,
        gateway: None,
        prefsrc: None,
        priority: None,
        multipath_oifs: Vec::new(),
    };
    for (k, d) in attrs(p.get(12..)?) {
        match k {
            RTA_DST => r.dst = parse_ip(family, d),
            RTA_OIF => r.oif = ne_i32(d, 0),
            RTA_GATEWAY => r.gateway = parse_ip(family, d),
            RTA_PREFSRC => r.prefsrc = parse_ip(family, d),
            RTA_PRIORITY => r.priority = ne_u32(d, 0),
            RTA_TABLE => r.table = ne_u32(d, 0).unwrap_or(r.table),
            RTA_MULTIPATH => {
                // struct rtnexthop { u16 len; u8 flags; u8 hops; i32 ifindex; } + attrs
                let mut rest = d;
                while rest.len() >= 8 {
                    let len = ne_u16(rest, 0).unwrap_or(0) as usize;
                    if len < 8 || len > rest.len() {
                        break;
                    }
                    if let Some(i) = ne_i32(rest, 4) {
                        r.multipath_oifs.push(i);
                    }
                    rest = &rest[align4(len).min(rest.len())..];
                }
            }
            _ => {}
        }
    }
    Some(r)
}

// ---------------------------------------------------------------------------------------------
// The socket.

/// An rtnetlink socket bound to the namespace it was opened in.
pub struct Netlink {
    sock: Socket,
}

impl Netlink {
    /// Opens a socket in the calling thread's network namespace. No receive limit: a link
    /// change waits for the kernel's rtnl lock, which a busy host can hold for seconds.
    pub fn open() -> Result<Self> {
        let sock = Socket::open(Protocol::Route, None).map_err(|e| Error::io("socket", e))?;
        Ok(Netlink { sock })
    }

    /// Sends a request with NLM_F_ACK and waits for the kernel's answer.
    fn request(&mut self, build: impl FnOnce(u32) -> Vec<u8>, op: &str) -> Result<()> {
        self.sock
            .transact(build)
            .map(drop)
            .map_err(|e| Error::io(op, e))
    }

    /// Sends a dump request and returns the payloads of every answer of type `kind`.
    fn dump(
        &mut self,
        build: impl FnOnce(u32) -> Vec<u8>,
        kind: u16,
        op: &str,
    ) -> Result<Vec<Vec<u8>>> {
        self.sock
            .payloads_of(kind, build)
            .map_err(|e| Error::io(op, e))
    }

    // --- links -------------------------------------------------------------------------------

    pub fn links(&mut self) -> Result<Vec<Link>> {
        let payloads = self.dump(
            |seq| {
                let mut b = Builder::new(RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, seq);
                b.raw(&ifinfomsg(0, 0, 0, 0));
                b.finish()
            },
            RTM_NEWLINK,
            "dump links",
        )?;
        Ok(payloads.iter().filter_map(|p| parse_link(p)).collect())
    }

    pub fn link_by_name(&mut self, name: &str) -> Result<Option<Link>> {
        Ok(self.links()?.into_iter().find(|l| l.name == name))
    }

    /// Creates a veth pair `name` <-> `peer`; the peer end is created directly in the namespace
    /// `peer_ns` when given, so it never appears in this one.
    pub fn create_veth(&mut self, name: &str, peer: &str, peer_ns: Option<RawFd>) -> Result<()> {
        self.request(
            |seq| {
                let mut b = Builder::new(
                    RTM_NEWLINK,
                    NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
                    seq,
                );
                b.raw(&ifinfomsg(0, 0, 0, 0));
                b.string(IFLA_IFNAME, name);
                b.begin_nest(IFLA_LINKINFO);
                b.string(IFLA_INFO_KIND, "veth");
                b.begin_nest(IFLA_INFO_DATA);
                b.begin_nest(VETH_INFO_PEER);
                b.raw(&ifinfomsg(0, 0, 0, 0));
                b.string(IFLA_IFNAME, peer);
                if let Some(fd) = peer_ns {
                    b.u32(IFLA_NET_NS_FD, fd as u32);
                }
                b.end_nest();
                b.end_nest();
                b.end_nest();
                b.finish()
            },
            &format!("create veth {name}/{peer}"),
        )
    }

    fn set_link(
        &mut self,
        index: i32,
        flags: u32,
        change: u32,
        attrs: &[(u16, Vec<u8>)],
        op: &str,
    ) -> Result<()> {
        self.request(
            |seq| {
                let mut b = Builder::new(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK, seq);
                b.raw(&ifinfomsg(0, index, flags, change));
                for (k, d) in attrs {
                    b.attr(*k, d);
                }
                b.finish()
            },
            op,
        )
    }

    pub fn set_up(&mut self, index: i32, up: bool) -> Result<()> {
        self.set_link(
            index,
            if up { IFF_UP } else { 0 },
            IFF_UP,
            &[],
            &format!("set link {index} {}", if up { "up" } else { "down" }),
        )
    }

    pub fn set_mtu(&mut self, index: i32, mtu: u32) -> Result<()> {
        self.set_link(
            index,
            0,
            0,
            &[(IFLA_MTU, mtu.to_ne_bytes().to_vec())],
            &format!("set link {index} mtu {mtu}"),
        )
    }

    /// Moves a link into the namespace open as `ns_fd`.
    pub fn move_to_ns(&mut self, index: i32, ns_fd: RawFd) -> Result<()> {
        self.set_link(
            index,
            0,
            0,
            &[(IFLA_NET_NS_FD, (ns_fd as u32).to_ne_bytes().to_vec())],
            &format!("move link {index} to namespace"),
        )
    }

    pub fn delete_link(&mut self, index: i32) -> Result<()> {
        self.request(
            |seq| {
                let mut b = Builder::new(RTM_DELLINK, NLM_F_REQUEST | NLM_F_ACK, seq);
                b.raw(&ifinfomsg(0, index, 0, 0));
                b.finish()
            },
            &format!("delete link {index}"),
        )
    }

    // --- addresses ---------------------------------------------------------------------------

    pub fn addrs(&mut self) -> Result<Vec<Addr>> {
        let payloads = self.dump(
            |seq| {
                let mut b = Builder::new(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, seq);
                b.raw(&ifaddrmsg(0, 0, 0, 0, 0));
                b.finish()
            },
            RTM_NEWADDR,
            "dump addresses",
        )?;
        Ok(payloads.iter().filter_map(|p| parse_addr(p)).collect())
    }

    /// Adds an address exactly as recorded (prefix, scope, flags, peer, broadcast, label).
    pub fn add_addr(&mut self, a: &Addr) -> Result<()> {
        let a = a.clone();
        self.request(
            |seq| {
                let fam = family_of(&a.local);
                let mut b = Builder::new(
                    RTM_NEWADDR,
                    NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE,
                    seq,
                );
                b.raw(&ifaddrmsg(fam, a.prefix_len, a.flags, a.scope, a.index));
                b.attr(IFA_LOCAL, &ip_bytes(&a.local));
                b.attr(IFA_ADDRESS, &ip_bytes(a.peer.as_ref().unwrap_or(&a.local)));
                if let Some(bc) = &a.broadcast {
                    b.attr(IFA_BROADCAST, &ip_bytes(bc));
                }
                if let Some(l) = &a.label {
                    if fam == AF_INET && !l.is_empty() {
                        b.string(IFA_LABEL, l);
                    }
                }
                b.finish()
            },
            &format!("add address {}/{}", a.local, a.prefix_len),
        )
    }

    /// A plain address on `index`, universe scope.
    pub fn add_simple_addr(&mut self, index: i32, ip: IpAddr, prefix: u8) -> Result<()> {
        self.add_addr(&Addr {
            index,
            prefix_len: prefix,
            flags: 0,
            scope: RT_SCOPE_UNIVERSE,
            local: ip,
            peer: None,
            broadcast: None,
            label: None,
        })
    }

    // --- routes ------------------------------------------------------------------------------

    /// Every route of both families, all tables.
    pub fn routes(&mut self) -> Result<Vec<Route>> {
        let mut all = Vec::new();
        for fam in [AF_INET, AF_INET6] {
            let payloads = self.dump(
                |seq| {
                    let mut b = Builder::new(RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, seq);
                    b.raw(&[fam, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
                    b.finish()
                },
                RTM_NEWROUTE,
                "dump routes",
            )?;
            all.extend(payloads.iter().filter_map(|p| parse_route(p)));
        }
        Ok(all)
    }

    pub fn add_route(&mut self, r: &Route) -> Result<()> {
        self.route_op(r, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, "add")
    }

    fn route_op(&mut self, r: &Route, kind: u16, extra: u16, verb: &str) -> Result<()> {
        let r = r.clone();
        let op = format!(
            "{verb} route {}/{}",
            r.dst
                .map(|d| d.to_string())
                .unwrap_or_else(|| "default".into()),
            r.dst_len
        );
        self.request(
            |seq| {
                let mut b = Builder::new(kind, NLM_F_REQUEST | NLM_F_ACK | extra, seq);
                b.raw(&rtmsg(&r));
                if let Some(d) = &r.dst {
                    b.attr(RTA_DST, &ip_bytes(d));
                }
                if let Some(o) = r.oif {
                    b.attr(RTA_OIF, &o.to_ne_bytes());
                }
                if let Some(g) = &r.gateway {
                    b.attr(RTA_GATEWAY, &ip_bytes(g));
                }
                if let Some(p) = &r.prefsrc {
                    b.attr(RTA_PREFSRC, &ip_bytes(p));
                }
                if let Some(p) = r.priority {
                    b.u32(RTA_PRIORITY, p);
                }
                b.u32(RTA_TABLE, r.table);
                b.finish()
            },
            &op,
        )
    }

    // --- neighbours --------------------------------------------------------------------------

    pub fn neighbours(&mut self) -> Result<Vec<Neighbour>> {
        let payloads = self.dump(
            |seq| {
                let mut b = Builder::new(RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP, seq);
                b.raw(&ndmsg(0, 0, 0));
                b.finish()
            },
            RTM_NEWNEIGH,
            "dump neighbours",
        )?;
        Ok(payloads.iter().filter_map(|p| parse_neighbour(p)).collect())
    }

    /// A permanent neighbour entry: `ip` is at `mac` on link `index` (no ARP needed).
    pub fn add_permanent_neighbour(&mut self, index: i32, ip: IpAddr, mac: &[u8]) -> Result<()> {
        let mac = mac.to_vec();
        self.request(
            |seq| {
                let mut b = Builder::new(
                    RTM_NEWNEIGH,
                    NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE,
                    seq,
                );
                b.raw(&ndmsg(family_of(&ip), index, NUD_PERMANENT));
                b.attr(NDA_DST, &ip_bytes(&ip));
                b.attr(NDA_LLADDR, &mac);
                b.finish()
            },
            &format!("add neighbour {ip}"),
        )
    }

    // --- traffic control ---------------------------------------------------------------------

    /// Shapes the egress of link `index` with a root tbf (replacing its root qdisc).
    pub fn set_root_tbf(&mut self, index: i32, t: &Tbf) -> Result<()> {
        let t = *t;
        self.request(
            |seq| tbf_request(seq, index, &t),
            &format!("add tbf qdisc at {} bit/s on link {index}", t.rate_bits),
        )
    }

    /// Removes the root qdisc of link `index` (the device's default comes back).
    pub fn delete_root_qdisc(&mut self, index: i32) -> Result<()> {
        self.request(
            |seq| {
                let mut b = Builder::new(RTM_DELQDISC, NLM_F_REQUEST | NLM_F_ACK, seq);
                b.raw(&tcmsg(index, 0, TC_H_ROOT));
                b.finish()
            },
            &format!("delete root qdisc of link {index}"),
        )
    }

    /// Every qdisc of this namespace.
    pub fn qdiscs(&mut self) -> Result<Vec<Qdisc>> {
        let payloads = self.dump(
            |seq| {
                let mut b = Builder::new(RTM_GETQDISC, NLM_F_REQUEST | NLM_F_DUMP, seq);
                b.raw(&tcmsg(0, 0, 0));
                b.finish()
            },
            RTM_NEWQDISC,
            "dump qdiscs",
        )?;
        Ok(payloads.iter().filter_map(|p| parse_qdisc(p)).collect())
    }
}

#[cfg(test)]
mod tests;
