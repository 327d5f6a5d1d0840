//! `nic.channels`: the data ports' queue count against the data cores: at least one queue
//! (and so one interrupt) per data core, or the profile's count.

use super::nic_ethtool::{check, plan, Spec, WantCx, Wants};
use super::nic_persist::channels_target;
use crate::model::profile::ChannelCount;
use crate::model::tunable::{no_files, Planner, Tunable};
use crate::model::verdict::Area;
use daqtune_probe::net::ethtool::{Group, GroupState};

pub const CHANNELS: Tunable = Tunable {
    id: "nic.channels",
    area: Area::Nic,
    title: "Queue (channel) count of the data ports against the data cores",
    aliases: &["channels", "queues"],
    doc: include_str!("../../../docs/checks/nic.channels.md"),
    needs_root: false,
    profile_keys: &["nic.channels", "cpu.isolated"],
    check: |ctx| check(ctx, &SPEC),
    planner: Some(Planner {
        order: 44,
        with: &[],
        plan: |cx, p| plan(cx, p, &SPEC),
        artifacts: &[],
        port_reset: crate::model::tunable::PortReset::Resets,
        owned_files: no_files,
    }),
};

pub const SPEC: Spec = Spec {
    id: "nic.channels",
    group: Group::Channels,
    wants,
    shown,
};

fn wants(cx: &WantCx) -> Wants {
    let mut w = Wants::default();
    let GroupState::Channels(c) = cx.state else {
        return w;
    };
    let Some(want) = cx.lp.profile.nic.channels.combined else {
        return w;
    };
    let (exact, n) = match want {
        ChannelCount::Count(n) => (true, n),
        ChannelCount::Word(_) => match cx.data_cores {
            Some(n) => (false, n),
            None => {
                w.cannot
                    .push("the profile's data cores do not resolve on this host".into());
                return w;
            }
        },
    };
    let Some((key, target)) = channels_target(c, n) else {
        w.cannot.push("the driver reports no queue maximum".into());
        return w;
    };
    if target < n {
        w.cannot.push(format!(
            "{n} queues wanted, the device has at most {target}"
        ));
    }
    let cur = cx.state.get(key).unwrap_or(0);
    // `data-cores` asks for at least one queue per core: more is left alone.
    let v = if !exact && cur >= target { cur } else { target };
    w.set.insert(key.into(), v);
    w
}

fn shown(s: &GroupState) -> String {
    let GroupState::Channels(c) = s else {
        return String::new();
    };
    let mut parts = Vec::new();
    for (name, v, m) in [
        ("combined", c.combined, c.combined_max),
        ("rx", c.rx, c.rx_max),
        ("tx", c.tx, c.tx_max),
        ("other", c.other, c.other_max),
    ] {
        if v.unwrap_or(0) > 0 || m.unwrap_or(0) > 0 {
            parts.push(format!(
                "{name} {} (max {})",
                v.unwrap_or(0),
                m.map(|m| m.to_string()).unwrap_or_else(|| "?".into())
            ));
        }
    }
    if parts.is_empty() {
        "no queues reported".into()
    } else {
        parts.join(", ")
    }
}
