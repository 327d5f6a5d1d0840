//! The ethtool generic-netlink family (Linux 5.6 and later): a port's rings, channels,
//! interrupt coalescing, pause frames and features, read and set without the `ethtool` binary.
//!
//! Replies are parsed from bytes ([`parse_reply`]); the live [`Client`] only moves them. Every
//! field is an `Option`: an older kernel lacks newer attributes (`tcp-data-split` came in 5.19),
//! and a driver fills in only what it has. A driver without an operation answers EOPNOTSUPP,
//! which [`Recorded::Error`] keeps as the reason a check gives for its `skip`.
//!
//! Features come as the kernel's verbose bitsets, whose bits carry their names from the
//! kernel's own `netdev_features_strings` (the ETH_SS_FEATURES string set), so features are
//! looked up by name, never by a bit number that differs between kernel versions. Those names
//! are the kernel's: GRO is `rx-gro` and LRO is `rx-lro`; `ethtool -k` prints the legacy
//! names `generic-receive-offload` and `large-receive-offload` for them ([`kernel_feature`]).

use super::netlink::genl::{self, request};
use super::netlink::{attrs, get_string, get_u32, get_u8, Socket, NLM_F_ACK};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;

pub const FAMILY: &str = "ethtool";
pub const VERSION: u8 = 1;

const MSG_FEATURES_GET: u8 = 11;
const MSG_FEATURES_SET: u8 = 12;
const MSG_RINGS_GET: u8 = 15;
const MSG_RINGS_SET: u8 = 16;
const MSG_CHANNELS_GET: u8 = 17;
const MSG_CHANNELS_SET: u8 = 18;
const MSG_COALESCE_GET: u8 = 19;
const MSG_COALESCE_SET: u8 = 20;
const MSG_PAUSE_GET: u8 = 21;
const MSG_PAUSE_SET: u8 = 22;

/// The request header every message starts with (attribute 1 of each group).
const A_HEADER: u16 = 1;
const A_HEADER_DEV_NAME: u16 = 2;

mod rings {
    pub const RX_MAX: u16 = 2;
    pub const TX_MAX: u16 = 5;
    pub const RX: u16 = 6;
    pub const TX: u16 = 9;
    pub const TCP_DATA_SPLIT: u16 = 11;
}
mod channels {
    pub const RX_MAX: u16 = 2;
    pub const TX_MAX: u16 = 3;
    pub const OTHER_MAX: u16 = 4;
    pub const COMBINED_MAX: u16 = 5;
    pub const RX: u16 = 6;
    pub const TX: u16 = 7;
    pub const OTHER: u16 = 8;
    pub const COMBINED: u16 = 9;
}
mod coalesce {
    pub const RX_USECS: u16 = 2;
    pub const TX_USECS: u16 = 6;
    pub const ADAPTIVE_RX: u16 = 11;
    pub const ADAPTIVE_TX: u16 = 12;
}
mod pause {
    pub const AUTONEG: u16 = 2;
    pub const RX: u16 = 3;
    pub const TX: u16 = 4;
}
mod features {
    pub const HW: u16 = 2;
    pub const WANTED: u16 = 3;
    pub const ACTIVE: u16 = 4;
}
mod bitset {
    pub const BITS: u16 = 3;
    pub const BITS_BIT: u16 = 1;
    pub const BIT_NAME: u16 = 2;
    pub const BIT_VALUE: u16 = 3;
}

/// The settings groups daqtune reads, each one ethtool message pair and one recorded file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Group {
    Rings,
    Channels,
    Coalesce,
    Pause,
    Features,
}

impl Group {
    pub const ALL: [Group; 5] = [
        Group::Rings,
        Group::Channels,
        Group::Coalesce,
        Group::Pause,
        Group::Features,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Group::Rings => "rings",
            Group::Channels => "channels",
            Group::Coalesce => "coalesce",
            Group::Pause => "pause",
            Group::Features => "features",
        }
    }

    fn get_cmd(self) -> u8 {
        match self {
            Group::Rings => MSG_RINGS_GET,
            Group::Channels => MSG_CHANNELS_GET,
            Group::Coalesce => MSG_COALESCE_GET,
            Group::Pause => MSG_PAUSE_GET,
            Group::Features => MSG_FEATURES_GET,
        }
    }

    fn set_cmd(self) -> u8 {
        match self {
            Group::Rings => MSG_RINGS_SET,
            Group::Channels => MSG_CHANNELS_SET,
            Group::Coalesce => MSG_COALESCE_SET,
            Group::Pause => MSG_PAUSE_SET,
            Group::Features => MSG_FEATURES_SET,
        }
    }
}

/// Where a host root records a port's group (`snapshot` writes it; `--root` reads it; `apply
/// --root` writes it as the kernel's stand-in).
pub fn recorded_path(ifname: &str, group: Group) -> String {
    format!("/daqtune/ethtool/{ifname}/{}.json", group.name())
}

/// Header split for TCP (`ethtool -g`'s `TCP data split`), ETHTOOL_A_RINGS_TCP_DATA_SPLIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataSplit {
    /// The driver does not say (or splits on its own terms).
    Unknown,
    Disabled,
    Enabled,
}

impl DataSplit {
    fn from_u8(v: u8) -> Option<DataSplit> {
        match v {
            0 => Some(DataSplit::Unknown),
            1 => Some(DataSplit::Disabled),
            2 => Some(DataSplit::Enabled),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rings {
    pub rx: Option<u32>,
    pub rx_max: Option<u32>,
    pub tx: Option<u32>,
    pub tx_max: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_data_split: Option<DataSplit>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Channels {
    pub rx: Option<u32>,
    pub rx_max: Option<u32>,
    pub tx: Option<u32>,
    pub tx_max: Option<u32>,
    pub other: Option<u32>,
    pub other_max: Option<u32>,
    pub combined: Option<u32>,
    pub combined_max: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Coalesce {
    pub rx_usecs: Option<u32>,
    pub tx_usecs: Option<u32>,
    pub adaptive_rx: Option<bool>,
    pub adaptive_tx: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pause {
    pub autoneg: Option<bool>,
    pub rx: Option<bool>,
    pub tx: Option<bool>,
}

/// One feature (`ethtool -k` line): on or off, and whether the driver lets it change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Feature {
    pub active: bool,
    pub fixed: bool,
}

/// The features by their kernel names (`rx-gro`, `large-receive-offload`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Features {
    pub features: BTreeMap<String, Feature>,
}

/// A group as read or recorded: its values, or why there are none (`EOPNOTSUPP`: the driver
/// lacks the operation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Recorded<T> {
    Error { error: String },
    Value(T),
}

impl<T> Recorded<T> {
    pub fn value(&self) -> Result<&T, &str> {
        match self {
            Recorded::Value(v) => Ok(v),
            Recorded::Error { error } => Err(error),
        }
    }
}

/// One group's values, whatever the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupState {
    Rings(Rings),
    Channels(Channels),
    Coalesce(Coalesce),
    Pause(Pause),
    Features(Features),
}

impl GroupState {
    /// The recorded file's text (pretty JSON, newline-terminated).
    pub fn to_json(&self) -> String {
        let v = match self {
            GroupState::Rings(x) => serde_json::to_string_pretty(x),
            GroupState::Channels(x) => serde_json::to_string_pretty(x),
            GroupState::Coalesce(x) => serde_json::to_string_pretty(x),
            GroupState::Pause(x) => serde_json::to_string_pretty(x),
            GroupState::Features(x) => serde_json::to_string_pretty(x),
        };
        v.map(|s| s + "\n").unwrap_or_default()
    }

    /// A recorded file's text as `group`'s values, or the error it records.
    pub fn from_json(group: Group, text: &str) -> Result<Recorded<GroupState>, serde_json::Error> {
        fn one<T: serde::de::DeserializeOwned>(
            text: &str,
            f: fn(T) -> GroupState,
        ) -> Result<Recorded<GroupState>, serde_json::Error> {
            Ok(match serde_json::from_str::<Recorded<T>>(text)? {
                Recorded::Value(v) => Recorded::Value(f(v)),
                Recorded::Error { error } => Recorded::Error { error },
            })
        }
        match group {
            Group::Rings => one(text, GroupState::Rings),
            Group::Channels => one(text, GroupState::Channels),
            Group::Coalesce => one(text, GroupState::Coalesce),
            Group::Pause => one(text, GroupState::Pause),
            Group::Features => one(text, GroupState::Features),
        }
    }

    /// The value of a settable key (see [`Settings`]) as a number; booleans are 0/1.
    pub fn get(&self, key: &str) -> Option<u32> {
        let b = |v: Option<bool>| v.map(u32::from);
        match self {
            GroupState::Rings(r) => match key {
                "rx" => r.rx,
                "tx" => r.tx,
                "tcp_data_split" => r.tcp_data_split.map(|d| d as u32),
                _ => None,
            },
            GroupState::Channels(c) => match key {
                "rx" => c.rx,
                "tx" => c.tx,
                "other" => c.other,
                "combined" => c.combined,
                _ => None,
            },
            GroupState::Coalesce(c) => match key {
                "rx_usecs" => c.rx_usecs,
                "tx_usecs" => c.tx_usecs,
                "adaptive_rx" => b(c.adaptive_rx),
                "adaptive_tx" => b(c.adaptive_tx),
                _ => None,
            },
            GroupState::Pause(p) => match key {
                "autoneg" => b(p.autoneg),
                "rx" => b(p.rx),
                "tx" => b(p.tx),
                _ => None,
            },
            GroupState::Features(f) => f.features.get(key).map(|x| u32::from(x.active)),
        }
    }

    /// These values with `s` applied, as the kernel would show them after a set that took:
    /// the stand-in of a host root, and what a plan's read-back expects.
    pub fn with(&self, s: &Settings) -> Result<GroupState, String> {
        let mut out = self.clone();
        for (k, v) in s {
            let bad = || format!("{}: no settable key `{k}`", group_of(self).name());
            let flag = |v: u32| Some(v != 0);
            match &mut out {
                GroupState::Rings(r) => match k.as_str() {
                    "rx" => r.rx = Some(*v),
                    "tx" => r.tx = Some(*v),
                    "tcp_data_split" => {
                        r.tcp_data_split = Some(
                            u8::try_from(*v)
                                .ok()
                                .and_then(DataSplit::from_u8)
                                .ok_or_else(bad)?,
                        )
                    }
                    _ => return Err(bad()),
                },
                GroupState::Channels(c) => match k.as_str() {
                    "rx" => c.rx = Some(*v),
                    "tx" => c.tx = Some(*v),
                    "other" => c.other = Some(*v),
                    "combined" => c.combined = Some(*v),
                    _ => return Err(bad()),
                },
                GroupState::Coalesce(c) => match k.as_str() {
                    "rx_usecs" => c.rx_usecs = Some(*v),
                    "tx_usecs" => c.tx_usecs = Some(*v),
                    "adaptive_rx" => c.adaptive_rx = flag(*v),
                    "adaptive_tx" => c.adaptive_tx = flag(*v),
                    _ => return Err(bad()),
                },
                GroupState::Pause(p) => match k.as_str() {
                    "autoneg" => p.autoneg = flag(*v),
                    "rx" => p.rx = flag(*v),
                    "tx" => p.tx = flag(*v),
                    _ => return Err(bad()),
                },
                GroupState::Features(f) => match f.features.get_mut(k) {
                    Some(x) => x.active = *v != 0,
                    None => return Err(bad()),
                },
            }
        }
        Ok(out)
    }
}

fn group_of(s: &GroupState) -> Group {
    match s {
        GroupState::Rings(_) => Group::Rings,
        GroupState::Channels(_) => Group::Channels,
        GroupState::Coalesce(_) => Group::Coalesce,
        GroupState::Pause(_) => Group::Pause,
        GroupState::Features(_) => Group::Features,
    }
}

/// The kernel's name of a feature given by its legacy `ethtool -k` name (captured on 6.18:
/// the kernel's strings set has `rx-gro` and `rx-lro`, never `large-receive-offload`).
pub fn kernel_feature(name: &str) -> &str {
    match name {
        "generic-receive-offload" => "rx-gro",
        "large-receive-offload" => "rx-lro",
        "generic-segmentation-offload" => "tx-generic-segmentation",
        _ => name,
    }
}

/// What a set changes, by key: rings `rx`/`tx`/`tcp_data_split` (1 off, 2 on), channels
/// `rx`/`tx`/`other`/`combined`, coalesce `rx_usecs`/`tx_usecs`/`adaptive_rx`/`adaptive_tx`,
/// pause `autoneg`/`rx`/`tx`, features by name; flags are 0/1.
pub type Settings = BTreeMap<String, u32>;

/// `key value` pairs of `group`, flags as on/off.
pub fn shown_settings(group: Group, s: &Settings) -> String {
    s.iter()
        .map(|(k, v)| format!("{k} {}", shown_value(group, k, *v)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn is_flag(group: Group, k: &str) -> bool {
    match group {
        Group::Pause | Group::Features => true,
        Group::Coalesce => k.starts_with("adaptive_"),
        Group::Rings | Group::Channels => false,
    }
}

pub fn shown_value(group: Group, k: &str, v: u32) -> String {
    if k == "tcp_data_split" {
        return match v {
            1 => "off".into(),
            2 => "on".into(),
            _ => "auto".into(),
        };
    }
    if is_flag(group, k) {
        return if v != 0 { "on".into() } else { "off".into() };
    }
    v.to_string()
}

/// A change as the plan prints it: `rx 1024 -> 8192, tx 1024 -> 8192`.
pub fn shown_change(group: Group, from: &Settings, to: &Settings) -> String {
    to.iter()
        .map(|(k, v)| {
            let f = from
                .get(k)
                .map(|x| shown_value(group, k, *x))
                .unwrap_or_else(|| "?".into());
            format!("{k} {f} -> {}", shown_value(group, k, *v))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn header(r: &mut super::netlink::Builder, ifname: &str) {
    r.begin_nest(A_HEADER)
        .string(A_HEADER_DEV_NAME, ifname)
        .end_nest();
}

/// The GET request for `group` of `ifname`.
pub fn get_request(family: u16, group: Group, ifname: &str, seq: u32) -> Vec<u8> {
    let mut r = request(family, group.get_cmd(), VERSION, NLM_F_ACK, seq);
    header(&mut r, ifname);
    r.finish()
}

/// The SET request applying `s` to `group` of `ifname`; `Err` names a key the group has not.
pub fn set_request(
    family: u16,
    group: Group,
    ifname: &str,
    s: &Settings,
    seq: u32,
) -> Result<Vec<u8>, String> {
    let mut r = request(family, group.set_cmd(), VERSION, NLM_F_ACK, seq);
    header(&mut r, ifname);
    let bad = |k: &str| format!("{}: no settable key `{k}`", group.name());
    if group == Group::Features {
        // A verbose bitset with a mask: the bits listed change, each to its VALUE flag.
        r.begin_nest(features::WANTED).begin_nest(bitset::BITS);
        for (name, v) in s {
            r.begin_nest(bitset::BITS_BIT)
                .string(bitset::BIT_NAME, name);
            if *v != 0 {
                r.flag(bitset::BIT_VALUE);
            }
            r.end_nest();
        }
        r.end_nest().end_nest();
        return Ok(r.finish());
    }
    for (k, v) in s {
        let v = *v;
        let byte = |v: u32| u8::try_from(v).map_err(|_| format!("{k}: {v} is not a flag"));
        match (group, k.as_str()) {
            (Group::Rings, "rx") => r.u32(rings::RX, v),
            (Group::Rings, "tx") => r.u32(rings::TX, v),
            (Group::Rings, "tcp_data_split") => r.u8(rings::TCP_DATA_SPLIT, byte(v)?),
            (Group::Channels, "rx") => r.u32(channels::RX, v),
            (Group::Channels, "tx") => r.u32(channels::TX, v),
            (Group::Channels, "other") => r.u32(channels::OTHER, v),
            (Group::Channels, "combined") => r.u32(channels::COMBINED, v),
            (Group::Coalesce, "rx_usecs") => r.u32(coalesce::RX_USECS, v),
            (Group::Coalesce, "tx_usecs") => r.u32(coalesce::TX_USECS, v),
            (Group::Coalesce, "adaptive_rx") => r.u8(coalesce::ADAPTIVE_RX, byte(v)?),
            (Group::Coalesce, "adaptive_tx") => r.u8(coalesce::ADAPTIVE_TX, byte(v)?),
            (Group::Pause, "autoneg") => r.u8(pause::AUTONEG, byte(v)?),
            (Group::Pause, "rx") => r.u8(pause::RX, byte(v)?),
            (Group::Pause, "tx") => r.u8(pause::TX, byte(v)?),
            _ => return Err(bad(k)),
        };
    }
    Ok(r.finish())
}

/// The bits of a verbose bitset as (name, value flag present).
fn bitset_bits(d: &[u8]) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for (k, bits) in attrs(d) {
        if k != bitset::BITS {
            continue;
        }
        for (k, bit) in attrs(bits) {
            if k != bitset::BITS_BIT {
                continue;
            }
            let a = attrs(bit);
            let name = a
                .iter()
                .find(|(k, _)| *k == bitset::BIT_NAME)
                .map(|(_, d)| get_string(d));
            let value = a.iter().any(|(k, _)| *k == bitset::BIT_VALUE);
            if let Some(n) = name.filter(|n| !n.is_empty()) {
                out.push((n, value));
            }
        }
    }
    out
}

/// A GET reply's genl payload (genl header and attributes) as `group`'s values.
pub fn parse_reply(group: Group, payload: &[u8]) -> GroupState {
    let a = genl::genl_attrs(payload);
    let u32_of = |id: u16| {
        a.iter()
            .find(|(k, _)| *k == id)
            .and_then(|(_, d)| get_u32(d))
    };
    let u8_of = |id: u16| {
        a.iter()
            .find(|(k, _)| *k == id)
            .and_then(|(_, d)| get_u8(d))
    };
    let flag_of = |id: u16| u8_of(id).map(|v| v != 0);
    match group {
        Group::Rings => GroupState::Rings(Rings {
            rx: u32_of(rings::RX),
            rx_max: u32_of(rings::RX_MAX),
            tx: u32_of(rings::TX),
            tx_max: u32_of(rings::TX_MAX),
            tcp_data_split: u8_of(rings::TCP_DATA_SPLIT).and_then(DataSplit::from_u8),
        }),
        Group::Channels => GroupState::Channels(Channels {
            rx: u32_of(channels::RX),
            rx_max: u32_of(channels::RX_MAX),
            tx: u32_of(channels::TX),
            tx_max: u32_of(channels::TX_MAX),
            other: u32_of(channels::OTHER),
            other_max: u32_of(channels::OTHER_MAX),
            combined: u32_of(channels::COMBINED),
            combined_max: u32_of(channels::COMBINED_MAX),
        }),
        Group::Coalesce => GroupState::Coalesce(Coalesce {
            rx_usecs: u32_of(coalesce::RX_USECS),
            tx_usecs: u32_of(coalesce::TX_USECS),
            adaptive_rx: flag_of(coalesce::ADAPTIVE_RX),
            adaptive_tx: flag_of(coalesce::ADAPTIVE_TX),
        }),
        Group::Pause => GroupState::Pause(Pause {
            autoneg: flag_of(pause::AUTONEG),
            rx: flag_of(pause::RX),
            tx: flag_of(pause::TX),
        }),
        Group::Features => {
            let mut f = BTreeMap::new();
            // HW is sent with the mask of every feature: VALUE marks the changeable ones.
            for (k, d) in &a {
                if *k == features::HW {
                    for (n, changeable) in bitset_bits(d) {
                        f.insert(
                            n,
                            Feature {
                                active: false,
                                fixed: !changeable,
                            },
                        );
                    }
                }
            }
            // ACTIVE is sent without a mask: the bits listed are the ones on.
            for (k, d) in &a {
                if *k == features::ACTIVE {
                    for (n, _) in bitset_bits(d) {
                        f.entry(n)
                            .or_insert(Feature {
                                active: false,
                                fixed: true,
                            })
                            .active = true;
                    }
                }
            }
            GroupState::Features(Features { features: f })
        }
    }
}

/// Why a group could not be read or set, as a check says it.
pub fn describe_error(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) => "the driver does not support it (EOPNOTSUPP)".into(),
        Some(libc::ENODEV) => "no such interface (ENODEV)".into(),
        Some(libc::EPERM) | Some(libc::EACCES) => {
            "not permitted: setting it needs CAP_NET_ADMIN (run as root)".into()
        }
        Some(libc::ENOENT) => {
            "the kernel has no ethtool netlink family (Linux before 5.6, or CONFIG_ETHTOOL_NETLINK off)".into()
        }
        _ => e.to_string(),
    }
}

/// A live ethtool-netlink client in the calling thread's network namespace.
pub struct Client {
    sock: Socket,
    family: u16,
}

impl Client {
    /// Open a socket and resolve the ethtool family id.
    pub fn open() -> io::Result<Client> {
        let mut sock = genl::open()?;
        let family = genl::family(&mut sock, FAMILY)?;
        Ok(Client { sock, family })
    }

    /// The raw genl payloads answering a GET of `group` (what the tests capture).
    pub fn get_raw(&mut self, group: Group, ifname: &str) -> io::Result<Vec<Vec<u8>>> {
        let family = self.family;
        genl::transact(&mut self.sock, |seq| {
            get_request(family, group, ifname, seq)
        })
    }

    pub fn get(&mut self, group: Group, ifname: &str) -> io::Result<GroupState> {
        let replies = self.get_raw(group, ifname)?;
        let first = replies
            .first()
            .ok_or_else(|| io::Error::other(format!("no {} reply", group.name())))?;
        Ok(parse_reply(group, first))
    }

    /// Apply `s` to `group` of `ifname` (needs CAP_NET_ADMIN).
    pub fn set(&mut self, group: Group, ifname: &str, s: &Settings) -> io::Result<()> {
        let family = self.family;
        let msg = set_request(family, group, ifname, s, 0)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        genl::transact(&mut self.sock, |seq| {
            let mut m = msg;
            m[8..12].copy_from_slice(&seq.to_ne_bytes());
            m
        })?;
        Ok(())
    }

    /// Every group of `ifname`, each its values or why not.
    pub fn read_port(&mut self, ifname: &str) -> BTreeMap<Group, Recorded<GroupState>> {
        Group::ALL
            .iter()
            .map(|g| {
                let r = match self.get(*g, ifname) {
                    Ok(v) => Recorded::Value(v),
                    Err(e) => Recorded::Error {
                        error: describe_error(&e),
                    },
                };
                (*g, r)
            })
            .collect()
    }
}

/// The recorded file text of a read (values or the error).
pub fn recorded_json(r: &Recorded<GroupState>) -> String {
    match r {
        Recorded::Value(v) => v.to_json(),
        Recorded::Error { error } => {
            serde_json::to_string_pretty(&serde_json::json!({ "error": error }))
                .map(|s| s + "\n")
                .unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests;
