//! A port's drop and error counters, from every kernel interface that has them, without the
//! `ethtool` binary:
//! - the interface statistics (`/sys/class/net/IF/statistics/*`, the kernel's
//!   `struct rtnl_link_stats64`; inside another network namespace the same structure comes as
//!   `IFLA_STATS64`, [`parse_stats64`]);
//! - the driver's own counters through the `SIOCETHTOOL` ioctl ([`super::ethtool_ioctl`]: what
//!   `ethtool -S` prints; mlx5's `rx_out_of_buffer`, `rx_discards_phy`, `rx_crc_errors_phy`,
//!   pause and per-queue counters);
//! - the IEEE 802.3 and RMON groups through ethtool netlink `ETHTOOL_MSG_STATS_GET` (groups
//!   `eth-phy`, `eth-mac`, `eth-ctrl`, `rmon`) and the pause-frame counts of
//!   `ETHTOOL_MSG_PAUSE_GET` with `ETHTOOL_FLAG_STATS`, over the generic-netlink codec of
//!   [`super::netlink::genl`].
//!
//! What a rising counter means ([`Kind`]) follows the kernel's documentation of
//! `rtnl_link_stats64` (include/uapi/linux/if_link.h), the IEEE 802.3 clause 30 attributes the
//! netlink groups carry, and the mlx5 counters page
//! (Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst); the check's
//! page (docs/checks/nic.counters.md) quotes them.
//!
//! Parsing is separate from reading: the parsers take the kernel's bytes or text, the readers
//! only fetch them. A host root has the interface statistics as files (fixtures, snapshots);
//! the ioctl and netlink read the running kernel, so under a root they say why not.

use super::ethtool::FAMILY;
use super::netlink::genl::{self, request};
use super::netlink::{attrs, get_u32, NLM_F_ACK};
use crate::host::Host;
use serde::{Deserialize, Serialize};
use std::io;

/// Where a counter came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The interface statistics (`/sys/class/net/IF/statistics`, or `IFLA_STATS64`).
    Statistics,
    /// The driver's own counters (`SIOCETHTOOL` `ETHTOOL_GSTATS`, `ethtool -S`).
    Driver,
    /// ethtool netlink `ETHTOOL_MSG_STATS_GET`, group `eth-phy`.
    EthPhy,
    /// ... group `eth-mac`.
    EthMac,
    /// ... group `eth-ctrl`.
    EthCtrl,
    /// ... group `rmon`.
    Rmon,
    /// ethtool netlink `ETHTOOL_MSG_PAUSE_GET` with statistics.
    Pause,
}

impl Source {
    /// How the view and the messages name it.
    pub fn label(self) -> &'static str {
        match self {
            Source::Statistics => "interface statistics",
            Source::Driver => "driver (ethtool -S)",
            Source::EthPhy => "ethtool netlink eth-phy",
            Source::EthMac => "ethtool netlink eth-mac",
            Source::EthCtrl => "ethtool netlink eth-ctrl",
            Source::Rmon => "ethtool netlink rmon",
            Source::Pause => "ethtool netlink pause",
        }
    }

    /// The netlink stats groups, in the kernel's order (`ETHTOOL_STATS_ETH_PHY` = 0 ...).
    const GROUPS: [(Source, &'static str); 4] = [
        (Source::EthPhy, "eth-phy"),
        (Source::EthMac, "eth-mac"),
        (Source::EthCtrl, "eth-ctrl"),
        (Source::Rmon, "rmon"),
    ];
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counter {
    pub source: Source,
    pub name: String,
    pub value: u64,
}

/// A source that gave nothing, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unavailable {
    pub source: String,
    pub reason: String,
}

/// Every counter of one port at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortCounters {
    pub ifname: String,
    pub counters: Vec<Counter>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<Unavailable>,
}

impl PortCounters {
    pub fn get(&self, source: Source, name: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|c| c.source == source && c.name == name)
            .map(|c| c.value)
    }

    fn missing(&mut self, source: &str, reason: impl Into<String>) {
        self.unavailable.push(Unavailable {
            source: source.into(),
            reason: reason.into(),
        });
    }
}

/// What a rise of a counter says about where frames were lost. The order is the order of
/// likelihood the causes use: the NIC's own buffer and its receive rings first (the host did
/// not keep up), then the kernel after the NIC, then the wire, then transmit, then what only
/// says "an error".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Dropped inside the NIC for lack of room in its own buffer (mlx5 `rx_discards_phy`).
    NicBuffer,
    /// Dropped for lack of receive buffers posted by the host (mlx5 `rx_out_of_buffer`,
    /// `rx_missed_errors`).
    RxBuffer,
    /// Dropped by one receive queue (per-queue drop counters).
    QueueDrop,
    /// Dropped by the kernel after the NIC handed the frame over (`rx_dropped`).
    KernelDrop,
    /// Damaged on the wire (FCS/CRC, symbol, length errors).
    Link,
    /// Not sent (transmit drops and errors).
    TxDrop,
    /// An aggregate or driver error counter that says no more than "error".
    Errors,
    /// Pause frames: flow control engaged. Not a loss.
    Pause,
}

impl Kind {
    /// Whether a rise means frames were lost or damaged (pause frames only slow the sender).
    pub fn is_loss(self) -> bool {
        self != Kind::Pause
    }

    /// What it means and where to look, in one clause.
    pub fn meaning(self) -> &'static str {
        match self {
            Kind::NicBuffer => "dropped in the NIC's own buffer: the host did not take frames off the port fast enough (PCIe bandwidth, receive rings too small, or cores too slow to refill them)",
            Kind::RxBuffer => "dropped for lack of receive buffers: rings / CPU / PCIe (the receive ring ran empty: too small a ring, or the cores that refill it too slow or interrupted)",
            Kind::QueueDrop => "dropped by one receive queue: that queue's ring or the core serving it fell behind",
            Kind::KernelDrop => "dropped by the kernel after the NIC handed them over (a full backlog, a frame larger than the receiving interface takes, a protocol nothing handles)",
            Kind::Link => "damaged on the wire: cable, transceiver or the link partner (check the link, not the host)",
            Kind::TxDrop => "not transmitted: the link was down, the network paused the port, or the transmit queue was full",
            Kind::Errors => "counted as errors by the driver",
            Kind::Pause => "flow control: one side could not keep up and asked the other to wait",
        }
    }
}

/// The interface statistics in `struct rtnl_link_stats64` order (include/uapi/linux/if_link.h;
/// the sysfs files carry the same names).
pub const STATS64_NAMES: [&str; 24] = [
    "rx_packets",
    "tx_packets",
    "rx_bytes",
    "tx_bytes",
    "rx_errors",
    "tx_errors",
    "rx_dropped",
    "tx_dropped",
    "multicast",
    "collisions",
    "rx_length_errors",
    "rx_over_errors",
    "rx_crc_errors",
    "rx_frame_errors",
    "rx_fifo_errors",
    "rx_missed_errors",
    "tx_aborted_errors",
    "tx_carrier_errors",
    "tx_fifo_errors",
    "tx_heartbeat_errors",
    "tx_window_errors",
    "rx_compressed",
    "tx_compressed",
    "rx_nohandler",
];

/// What a rise of `name` from `source` means; `None` for counters of good traffic.
pub fn kind_of(source: Source, name: &str) -> Option<Kind> {
    match source {
        Source::Statistics => match name {
            "rx_missed_errors" | "rx_over_errors" | "rx_fifo_errors" => Some(Kind::RxBuffer),
            "rx_dropped" | "rx_nohandler" => Some(Kind::KernelDrop),
            "rx_crc_errors" | "rx_frame_errors" | "rx_length_errors" | "tx_carrier_errors" => {
                Some(Kind::Link)
            }
            "tx_dropped" | "tx_fifo_errors" | "tx_aborted_errors" => Some(Kind::TxDrop),
            "rx_errors" | "tx_errors" => Some(Kind::Errors),
            _ => None,
        },
        Source::EthPhy => (name == "SymbolErrorDuringCarrier").then_some(Kind::Link),
        Source::EthMac => match name {
            "FrameCheckSequenceErrors"
            | "AlignmentErrors"
            | "InRangeLengthErrors"
            | "FrameTooLongErrors" => Some(Kind::Link),
            "FramesLostDueToIntMACRcvError" => Some(Kind::NicBuffer),
            "FramesLostDueToIntMACXmitError" => Some(Kind::TxDrop),
            _ => None,
        },
        Source::EthCtrl => None,
        Source::Rmon => match name {
            "etherStatsUndersizePkts"
            | "etherStatsOversizePkts"
            | "etherStatsFragments"
            | "etherStatsJabbers" => Some(Kind::Link),
            _ => None,
        },
        Source::Pause => Some(Kind::Pause),
        Source::Driver => driver_kind(name),
    }
}

/// A driver counter by its `ethtool -S` name: mlx5's documented ones by name, the rest by
/// the words drivers use (`drop`, `discard`, `err`, `pause`).
fn driver_kind(name: &str) -> Option<Kind> {
    match name {
        "rx_out_of_buffer" => return Some(Kind::RxBuffer),
        "rx_discards_phy" => return Some(Kind::NicBuffer),
        "rx_crc_errors_phy"
        | "rx_symbol_err_phy"
        | "rx_pcs_symbol_err_phy"
        | "rx_in_range_len_errors_phy"
        | "rx_out_of_range_len_phy"
        | "rx_oversize_pkts_phy"
        | "rx_undersize_pkts_phy"
        | "rx_fragments_phy"
        | "rx_jabbers_phy"
        | "link_down_events_phy" => return Some(Kind::Link),
        "tx_discards_phy" | "tx_errors_phy" => return Some(Kind::TxDrop),
        _ => {}
    }
    let n = name.to_ascii_lowercase();
    // XDP verdicts are a program's choice; corrected bits and per-lane counts precede FEC.
    if n.contains("xdp") || n.contains("corrected") || n.contains("lane") {
        return None;
    }
    if n.contains("pause") {
        return (!n.contains("duration") && !n.contains("transition")).then_some(Kind::Pause);
    }
    let rx = n.starts_with("rx") || n.contains("_rx");
    let tx = n.starts_with("tx") || n.contains("_tx");
    if n.contains("buff_alloc_err") || n.contains("out_of_buffer") {
        return Some(Kind::RxBuffer);
    }
    if n.contains("discard") {
        return Some(if tx { Kind::TxDrop } else { Kind::NicBuffer });
    }
    if n.contains("drop") {
        return Some(if tx && !rx {
            Kind::TxDrop
        } else if n.chars().any(|c| c.is_ascii_digit()) {
            Kind::QueueDrop
        } else {
            Kind::KernelDrop
        });
    }
    if n.contains("err") {
        return Some(if tx && !rx {
            Kind::TxDrop
        } else {
            Kind::Errors
        });
    }
    None
}

// ---- the interface statistics -----------------------------------------------------------

/// `/sys/class/net/IF/statistics/*` through the host (a root's files too).
pub fn read_statistics(host: &Host, ifname: &str) -> Result<Vec<Counter>, String> {
    let dir = format!("/sys/class/net/{ifname}/statistics");
    let names = host.read_dir(&dir).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for n in names {
        if let Some(v) = host
            .read_attr(&format!("{dir}/{n}"))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
        {
            out.push(Counter {
                source: Source::Statistics,
                name: n,
                value: v,
            });
        }
    }
    if out.is_empty() {
        return Err(format!("{dir} holds no counters"));
    }
    Ok(out)
}

/// An `IFLA_STATS64` attribute's payload (`struct rtnl_link_stats64`, native-endian u64s) as
/// counters named like the sysfs files; a shorter structure (an older kernel) gives what it
/// holds.
pub fn parse_stats64(b: &[u8]) -> Vec<Counter> {
    b.chunks_exact(8)
        .zip(STATS64_NAMES)
        .filter_map(|(c, n)| {
            Some(Counter {
                source: Source::Statistics,
                name: n.into(),
                value: u64::from_ne_bytes(c.try_into().ok()?),
            })
        })
        .collect()
}

// ---- ethtool netlink ----------------------------------------------------------------------

const MSG_PAUSE_GET: u8 = 21;
const MSG_STATS_GET: u8 = 32;
const A_PAUSE_HEADER: u16 = 1;
const A_PAUSE_STATS: u16 = 5;
const A_PAUSE_STAT_TX_FRAMES: u16 = 2;
const A_PAUSE_STAT_RX_FRAMES: u16 = 3;
const A_HEADER_DEV_NAME: u16 = 2;
const A_HEADER_FLAGS: u16 = 3;
const FLAG_STATS: u32 = 1 << 2;
const A_STATS_HEADER: u16 = 2;
const A_STATS_GROUPS: u16 = 3;
const A_STATS_GRP: u16 = 4;
const A_STATS_GRP_ID: u16 = 2;
const A_STATS_GRP_STAT: u16 = 4;
const A_BITSET_NOMASK: u16 = 1;
const A_BITSET_BITS: u16 = 3;
const A_BITSET_BITS_BIT: u16 = 1;
const A_BITSET_BIT_NAME: u16 = 2;
const A_BITSET_BIT_VALUE: u16 = 3;

/// The counters of each group by index (`ETHTOOL_A_STATS_ETH_*`, include/uapi/linux/
/// ethtool_netlink.h): the IEEE 802.3 clause 30 attribute names without their `a`, as the
/// kernel's string sets give them.
const ETH_PHY_NAMES: &[&str] = &["SymbolErrorDuringCarrier"];
const ETH_MAC_NAMES: &[&str] = &[
    "FramesTransmittedOK",
    "SingleCollisionFrames",
    "MultipleCollisionFrames",
    "FramesReceivedOK",
    "FrameCheckSequenceErrors",
    "AlignmentErrors",
    "OctetsTransmittedOK",
    "FramesWithDeferredXmissions",
    "LateCollisions",
    "FramesAbortedDueToXSColls",
    "FramesLostDueToIntMACXmitError",
    "CarrierSenseErrors",
    "OctetsReceivedOK",
    "FramesLostDueToIntMACRcvError",
    "MulticastFramesXmittedOK",
    "BroadcastFramesXmittedOK",
    "FramesWithExcessiveDeferral",
    "MulticastFramesReceivedOK",
    "BroadcastFramesReceivedOK",
    "InRangeLengthErrors",
    "OutOfRangeLengthField",
    "FrameTooLongErrors",
];
const ETH_CTRL_NAMES: &[&str] = &[
    "MACControlFramesTransmitted",
    "MACControlFramesReceived",
    "UnsupportedOpcodesReceived",
];
const RMON_NAMES: &[&str] = &[
    "etherStatsUndersizePkts",
    "etherStatsOversizePkts",
    "etherStatsFragments",
    "etherStatsJabbers",
];

fn group_names(id: u32) -> Option<(Source, &'static [&'static str])> {
    Some(match id {
        0 => (Source::EthPhy, ETH_PHY_NAMES),
        1 => (Source::EthMac, ETH_MAC_NAMES),
        2 => (Source::EthCtrl, ETH_CTRL_NAMES),
        3 => (Source::Rmon, RMON_NAMES),
        _ => return None,
    })
}

/// `ETHTOOL_MSG_STATS_GET` for every standard group of `ifname` (the groups as a verbose
/// bitset of their names, without a mask: the listed groups are the ones asked for).
pub fn stats_request(family: u16, ifname: &str, seq: u32) -> Vec<u8> {
    let mut r = request(
        family,
        MSG_STATS_GET,
        super::ethtool::VERSION,
        NLM_F_ACK,
        seq,
    );
    r.begin_nest(A_STATS_HEADER)
        .string(A_HEADER_DEV_NAME, ifname)
        .end_nest();
    r.begin_nest(A_STATS_GROUPS).flag(A_BITSET_NOMASK);
    r.begin_nest(A_BITSET_BITS);
    for (_, name) in Source::GROUPS {
        r.begin_nest(A_BITSET_BITS_BIT)
            .string(A_BITSET_BIT_NAME, name)
            .flag(A_BITSET_BIT_VALUE)
            .end_nest();
    }
    r.end_nest().end_nest();
    r.finish()
}

/// `ETHTOOL_MSG_PAUSE_GET` asking for the pause-frame counts (`ETHTOOL_FLAG_STATS`).
pub fn pause_stats_request(family: u16, ifname: &str, seq: u32) -> Vec<u8> {
    let mut r = request(
        family,
        MSG_PAUSE_GET,
        super::ethtool::VERSION,
        NLM_F_ACK,
        seq,
    );
    r.begin_nest(A_PAUSE_HEADER)
        .string(A_HEADER_DEV_NAME, ifname)
        .u32(A_HEADER_FLAGS, FLAG_STATS)
        .end_nest();
    r.finish()
}

fn get_u64(d: &[u8]) -> Option<u64> {
    Some(u64::from_ne_bytes(d.get(0..8)?.try_into().ok()?))
}

/// A `STATS_GET` reply's genl payload as counters: each `ETHTOOL_A_STATS_GRP` names its group
/// (`_GRP_ID`) and holds one `_GRP_STAT` nest per counter, whose single attribute's type is
/// the counter's index and whose data is its u64 value. The kernel leaves out what the driver
/// does not count; histograms (`_HIST_*`) are not read.
pub fn parse_stats_reply(payload: &[u8]) -> Vec<Counter> {
    let mut out = Vec::new();
    for (k, grp) in genl::genl_attrs(payload) {
        if k != A_STATS_GRP {
            continue;
        }
        let a = attrs(grp);
        let Some((source, names)) = a
            .iter()
            .find(|(k, _)| *k == A_STATS_GRP_ID)
            .and_then(|(_, d)| get_u32(d))
            .and_then(group_names)
        else {
            continue;
        };
        for (k, stat) in &a {
            if *k != A_STATS_GRP_STAT {
                continue;
            }
            for (idx, d) in attrs(stat) {
                let (Some(name), Some(value)) = (names.get(idx as usize), get_u64(d)) else {
                    continue;
                };
                out.push(Counter {
                    source,
                    name: (*name).into(),
                    value,
                });
            }
        }
    }
    out
}

/// A `PAUSE_GET` reply's pause-frame counts (`tx_pause_frames`, `rx_pause_frames`); nothing
/// when the driver does not count them.
pub fn parse_pause_reply(payload: &[u8]) -> Vec<Counter> {
    let mut out = Vec::new();
    for (k, st) in genl::genl_attrs(payload) {
        if k != A_PAUSE_STATS {
            continue;
        }
        for (k, d) in attrs(st) {
            let name = match k {
                A_PAUSE_STAT_TX_FRAMES => "tx_pause_frames",
                A_PAUSE_STAT_RX_FRAMES => "rx_pause_frames",
                _ => continue,
            };
            if let Some(value) = get_u64(d) {
                out.push(Counter {
                    source: Source::Pause,
                    name: name.into(),
                    value,
                });
            }
        }
    }
    out
}

/// The netlink and ioctl counters of `ifname` in the calling thread's network namespace
/// (what a thread inside a self-test namespace runs); the interface statistics are the
/// caller's (sysfs through a [`Host`], or `IFLA_STATS64`).
pub fn read_kernel(ifname: &str, into: &mut PortCounters) {
    match super::ethtool_ioctl::stats(ifname) {
        Ok(v) if v.is_empty() => into.missing(
            Source::Driver.label(),
            "the driver has no counters of its own (ETH_SS_STATS is empty)",
        ),
        Ok(v) => into
            .counters
            .extend(v.into_iter().map(|(name, value)| Counter {
                source: Source::Driver,
                name,
                value,
            })),
        Err(e) => into.missing(Source::Driver.label(), describe(&e)),
    }
    let mut sock = match genl::open().and_then(|mut s| genl::family(&mut s, FAMILY).map(|f| (s, f)))
    {
        Ok(s) => s,
        Err(e) => {
            into.missing("ethtool netlink", super::ethtool::describe_error(&e));
            return;
        }
    };
    let (ref mut s, family) = sock;
    match genl::transact(s, |seq| stats_request(family, ifname, seq)) {
        Ok(replies) => {
            let c: Vec<Counter> = replies.iter().flat_map(|p| parse_stats_reply(p)).collect();
            if c.is_empty() {
                into.missing(
                    "ethtool netlink stats",
                    "the driver fills none of the eth-phy, eth-mac, eth-ctrl, rmon groups",
                );
            }
            into.counters.extend(c);
        }
        Err(e) => into.missing("ethtool netlink stats", super::ethtool::describe_error(&e)),
    }
    match genl::transact(s, |seq| pause_stats_request(family, ifname, seq)) {
        Ok(replies) => {
            let c: Vec<Counter> = replies.iter().flat_map(|p| parse_pause_reply(p)).collect();
            if c.is_empty() {
                into.missing(
                    Source::Pause.label(),
                    "the driver does not count pause frames",
                );
            }
            into.counters.extend(c);
        }
        Err(e) => into.missing(Source::Pause.label(), super::ethtool::describe_error(&e)),
    }
}

fn describe(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) => "the driver has no counters of its own (EOPNOTSUPP)".into(),
        _ => super::ethtool::describe_error(e),
    }
}

/// Every counter of `ifname`: the statistics through `host` (a root's files too); on the live
/// host also the driver's and the netlink groups. Under a root those say why they are absent.
pub fn read_port(host: &Host, ifname: &str) -> PortCounters {
    let mut p = PortCounters {
        ifname: ifname.into(),
        ..PortCounters::default()
    };
    match read_statistics(host, ifname) {
        Ok(c) => p.counters.extend(c),
        Err(e) => p.missing(Source::Statistics.label(), e),
    }
    if host.is_live() {
        read_kernel(ifname, &mut p);
    } else {
        p.missing(
            "ethtool (ioctl and netlink)",
            "read from the running kernel only; a host root holds the interface statistics alone",
        );
    }
    p
}

// ---- change between two reads ---------------------------------------------------------------

/// How much one counter rose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delta {
    pub source: Source,
    pub name: String,
    pub delta: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
}

/// The counters that rose from `before` to `after` (present in both; one that fell was reset,
/// a driver reloaded, and says nothing), most telling first: loss kinds in [`Kind`] order,
/// then the rest, each by size.
pub fn deltas(before: &PortCounters, after: &PortCounters) -> Vec<Delta> {
    let mut out: Vec<Delta> = after
        .counters
        .iter()
        .filter_map(|a| {
            let b = before.get(a.source, &a.name)?;
            let d = a.value.checked_sub(b).filter(|d| *d > 0)?;
            Some(Delta {
                source: a.source,
                name: a.name.clone(),
                delta: d,
                kind: kind_of(a.source, &a.name),
            })
        })
        .collect();
    out.sort_by(|x, y| {
        let k = |d: &Delta| d.kind.map_or(u8::MAX, |k| k as u8);
        k(x).cmp(&k(y)).then(y.delta.cmp(&x.delta))
    });
    out
}

/// The deltas that say frames were lost or damaged.
pub fn losses(d: &[Delta]) -> impl Iterator<Item = &Delta> {
    d.iter().filter(|d| d.kind.is_some_and(Kind::is_loss))
}

/// `12,345`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One rise as a sentence: `rx_out_of_buffer (driver (ethtool -S)) rose by 12,345: dropped
/// for lack of receive buffers: rings / CPU / PCIe (...)`.
pub fn describe_delta(d: &Delta) -> String {
    let mut s = format!(
        "{} ({}) rose by {}",
        d.name,
        d.source.label(),
        thousands(d.delta)
    );
    if let Some(k) = d.kind {
        s.push_str(": ");
        s.push_str(k.meaning());
    }
    s
}

/// The counters of one port a run used, before and after it: what the self-test records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortDelta {
    pub port: String,
    /// `tx` (the sending port) or `rx` (the receiving port).
    pub role: String,
    /// Seconds between the two reads.
    pub interval_s: f64,
    /// The counters that rose, most telling first.
    pub deltas: Vec<Delta>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<Unavailable>,
}

impl PortDelta {
    pub fn new(role: &str, before: &PortCounters, after: &PortCounters, interval_s: f64) -> Self {
        let mut unavailable = after.unavailable.clone();
        for u in &before.unavailable {
            if !unavailable.contains(u) {
                unavailable.push(u.clone());
            }
        }
        PortDelta {
            port: after.ifname.clone(),
            role: role.into(),
            interval_s,
            deltas: deltas(before, after),
            unavailable,
        }
    }

    /// `the receiving port veth-rx`.
    pub fn label(&self) -> String {
        match self.role.as_str() {
            "tx" => format!("the sending port {}", self.port),
            "rx" => format!("the receiving port {}", self.port),
            _ => format!("port {}", self.port),
        }
    }
}

/// The losses the ports of a run counted, most telling first across the ports: one sentence
/// each (`the receiving port X: rx_dropped (...) rose by N: meaning`).
pub fn loss_causes(ports: &[PortDelta]) -> Vec<(String, Kind, String)> {
    let mut all: Vec<(&PortDelta, &Delta)> = ports
        .iter()
        .flat_map(|p| losses(&p.deltas).map(move |d| (p, d)))
        .collect();
    all.sort_by(|(_, a), (_, b)| a.kind.cmp(&b.kind).then(b.delta.cmp(&a.delta)));
    all.into_iter()
        .filter_map(|(p, d)| {
            Some((
                p.port.clone(),
                d.kind?,
                format!("{}: {}", p.label(), describe_delta(d)),
            ))
        })
        .collect()
}

// ---- the per-boot record of the last check ------------------------------------------------

/// Where `check` keeps the counters it read, for the next run of the same boot to compare
/// with (`/run` is a tmpfs emptied at every boot, beside the CUDA attribute cache).
pub const CACHE_PATH: &str = "/run/daqtune/nic-counters.json";
pub const CACHE_SCHEMA: &str = "daqtune.nic-counters/v1";
/// A record for a few hundred ports is well under this.
pub const MAX_CACHE_BYTES: usize = 4 << 20;

/// One port as the record keeps it: its interface index tells a port made again under the
/// same name (a driver reload, a VF re-created) from the one read before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedPort {
    pub ifindex: Option<u32>,
    pub counters: PortCounters,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheFile {
    pub schema: String,
    /// `/proc/sys/kernel/random/boot_id` of the boot the counters were read in.
    pub boot_id: String,
    /// Seconds since the Unix epoch of the read.
    pub taken_unix: u64,
    pub ports: std::collections::BTreeMap<String, CachedPort>,
}

/// The record at `path` (a real path on this machine) if it can be trusted: a regular file of
/// root's (or this user's), not writable by others, of this boot.
pub fn load_cache(path: &std::path::Path, boot_id: &str) -> Result<CacheFile, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.uid() != 0 && meta.uid() != crate::sys::euid() {
        return Err(format!("owned by uid {}, not root", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "writable by group or others (mode {:o})",
            meta.mode() & 0o7777
        ));
    }
    let bytes = crate::fsutil::read_regular(path, MAX_CACHE_BYTES).map_err(|e| e.to_string())?;
    let f: CacheFile = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    if f.schema != CACHE_SCHEMA {
        return Err(format!(
            "schema is {:?}, expected {CACHE_SCHEMA:?}",
            f.schema
        ));
    }
    if f.boot_id != boot_id {
        return Err("taken in another boot".into());
    }
    Ok(f)
}

/// Writes the record (atomically: a reader never sees half of it).
pub fn store_cache(path: &std::path::Path, f: &CacheFile) -> io::Result<()> {
    let text = serde_json::to_string(f).map_err(io::Error::other)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::fsutil::write_atomic(path, format!("{text}\n").as_bytes(), 0o644)
}

#[cfg(test)]
mod tests;
