//! The persistent side of the NIC-settings tunables: the keys a port's network file carries
//! for what the profile wants (systemd.link `[Link]` keys, NetworkManager `[ethtool]` keys).
//! `nic.mtu` writes that file (only the first matching `.link` applies, and a NetworkManager
//! connection is one keyfile), so it renders these into it; the nic.* planners are planned
//! with `nic.mtu`.

use crate::model::facts::Facts;
use crate::model::profile::{ChannelCount, LoadedProfile, RingSize};
use daqtune_probe::net::ethtool::{Group, GroupState};

/// The keys a port's network file carries for the NIC settings the profile wants:
/// systemd.link `[Link]` keys and NetworkManager keyfile `[ethtool]` keys.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PersistKeys {
    pub link: Vec<(String, String)>,
    pub nm: Vec<(String, String)>,
}

/// What the profile wants persisted for `ifname`. NetworkManager takes numbers only, so a
/// ring at `max` is the maximum the port reports now (left out when it reports none).
pub fn persist_keys(facts: &Facts, lp: &LoadedProfile, ifname: &str) -> PersistKeys {
    let n = &lp.profile.nic;
    let mut k = PersistKeys::default();
    let b = |v: bool| if v { "true" } else { "false" }.to_string();
    let yes = |v: bool| if v { "yes" } else { "no" }.to_string();
    let rings = facts.ethtool(ifname, Group::Rings).ok();
    for (want, link_key, nm_key, max_key) in [
        (n.rings.rx, "RxBufferSize", "ring-rx", "rx_max"),
        (n.rings.tx, "TxBufferSize", "ring-tx", "tx_max"),
    ] {
        match want {
            // Above the port's reported maximum: not planned (nic.rings says so), not kept.
            Some(RingSize::Count(c))
                if rings
                    .as_deref()
                    .and_then(|r| ring_max(r, max_key))
                    .is_some_and(|m| c > m) => {}
            Some(RingSize::Count(c)) => {
                k.link.push((link_key.into(), c.to_string()));
                k.nm.push((nm_key.into(), c.to_string()));
            }
            Some(RingSize::Word(_)) => {
                k.link.push((link_key.into(), "max".into()));
                if let Some(m) = rings.as_deref().and_then(|r| ring_max(r, max_key)) {
                    k.nm.push((nm_key.into(), m.to_string()));
                }
            }
            None => {}
        }
    }
    let c = &n.coalesce;
    if let Some(a) = c.adaptive_rx {
        k.link.push(("UseAdaptiveRxCoalesce".into(), yes(a)));
        k.nm.push(("coalesce-adaptive-rx".into(), u32::from(a).to_string()));
    }
    if let Some(a) = c.adaptive_tx {
        k.link.push(("UseAdaptiveTxCoalesce".into(), yes(a)));
        k.nm.push(("coalesce-adaptive-tx".into(), u32::from(a).to_string()));
    }
    if let Some(u) = c.rx_usecs {
        k.link.push(("RxCoalesceSec".into(), format!("{u}us")));
        k.nm.push(("coalesce-rx-usecs".into(), u.to_string()));
    }
    let p = &n.pause;
    for (v, link_key, nm_key) in [
        (p.rx, "RxFlowControl", "pause-rx"),
        (p.tx, "TxFlowControl", "pause-tx"),
        (p.autoneg, "AutoNegotiationFlowControl", "pause-autoneg"),
    ] {
        if let Some(v) = v {
            k.link.push((link_key.into(), yes(v)));
            k.nm.push((nm_key.into(), b(v)));
        }
    }
    let o = &n.offloads;
    if let Some(v) = o.gro {
        k.link.push(("GenericReceiveOffload".into(), yes(v)));
        k.nm.push(("feature-gro".into(), b(v)));
    }
    if let Some(v) = o.lro {
        k.link.push(("LargeReceiveOffload".into(), yes(v)));
        k.nm.push(("feature-lro".into(), b(v)));
    }
    if let Some(want) = n.channels.combined {
        let cores = match want {
            ChannelCount::Count(c) => Some(c),
            ChannelCount::Word(_) => crate::model::context::boot::data_core_list(facts, lp)
                .ok()
                .flatten()
                .and_then(|l| daqtune_probe::cpulist::parse_cpulist(&l, None).ok())
                .map(|s| s.len() as u32),
        };
        let ch = facts.ethtool(ifname, Group::Channels).ok();
        if let (Some(c), Some(state @ GroupState::Channels(ch))) = (cores, ch.as_deref()) {
            let exact = matches!(want, ChannelCount::Count(_));
            // `data-cores` is a floor: a port with more queues keeps them at boot too.
            let target = channels_target(ch, c).map(|(key, v)| {
                let cur = state.get(key).unwrap_or(0);
                (key, if exact { v } else { v.max(cur) })
            });
            match target {
                Some(("rx", v)) => {
                    k.link.push(("RxChannels".into(), v.to_string()));
                    k.nm.push(("channels-rx".into(), v.to_string()));
                }
                Some((_, v)) => {
                    k.link.push(("CombinedChannels".into(), v.to_string()));
                    k.nm.push(("channels-combined".into(), v.to_string()));
                }
                None => {}
            }
        }
    }
    k
}

fn ring_max(r: &GroupState, key: &str) -> Option<u32> {
    match r {
        GroupState::Rings(r) => match key {
            "rx_max" => r.rx_max,
            _ => r.tx_max,
        },
        _ => None,
    }
}

/// The queue key and count `nic.channels` sets for `cores` data cores: combined queues where
/// the driver has them (mlx5), else RX queues; at least one per data core, capped at the
/// device's maximum. `None` when the device reports no maximum.
pub fn channels_target(
    c: &daqtune_probe::net::ethtool::Channels,
    cores: u32,
) -> Option<(&'static str, u32)> {
    let (key, max) = match (c.combined_max, c.rx_max) {
        (Some(m), _) if m > 0 => ("combined", m),
        (_, Some(m)) if m > 0 => ("rx", m),
        _ => return None,
    };
    Some((key, cores.min(max)))
}

/// The `[ethtool]` section for a NetworkManager keyfile (empty when nothing is wanted).
pub fn nm_section(k: &PersistKeys) -> String {
    if k.nm.is_empty() {
        return String::new();
    }
    let mut s = String::from("\n[ethtool]\n");
    for (key, v) in &k.nm {
        s.push_str(&format!("{key}={v}\n"));
    }
    s
}

/// The `.link` lines (appended to its `[Link]` section; empty when nothing is wanted).
pub fn link_lines(k: &PersistKeys) -> String {
    let mut s = String::new();
    if !k.link.is_empty() {
        s.push_str(
            "# NIC settings (nic.rings, nic.coalesce, nic.pause, nic.offloads, nic.channels).\n",
        );
    }
    for (key, v) in &k.link {
        s.push_str(&format!("{key}={v}\n"));
    }
    s
}
