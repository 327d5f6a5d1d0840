//! `nic.pause`: pause frames (802.3x flow control) of the data ports, as the profile chooses,
//! and reported always: a receiver that pauses its sender turns loss into back-pressure, so
//! the loss figures of a run mean something else.

use super::nic_ethtool::{check, plan, Spec, WantCx, Wants};
use crate::model::tunable::{no_files, Planner, Tunable};
use crate::model::verdict::Area;
use daqtune_probe::net::ethtool::{Group, GroupState};

pub const PAUSE: Tunable = Tunable {
    id: "nic.pause",
    area: Area::Nic,
    title: "Pause frames (flow control) of the data ports",
    aliases: &["pause", "flow-control"],
    doc: include_str!("../../../docs/checks/nic.pause.md"),
    needs_root: false,
    profile_keys: &["nic.pause"],
    check: |ctx| check(ctx, &SPEC),
    planner: Some(Planner {
        order: 42,
        with: &[],
        plan: |cx, p| plan(cx, p, &SPEC),
        artifacts: &[],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: no_files,
    }),
};

pub const SPEC: Spec = Spec {
    id: "nic.pause",
    group: Group::Pause,
    wants,
    shown,
};

fn wants(cx: &WantCx) -> Wants {
    let p = &cx.lp.profile.nic.pause;
    let mut w = Wants::default();
    for (v, k) in [(p.autoneg, "autoneg"), (p.rx, "rx"), (p.tx, "tx")] {
        if let Some(v) = v {
            w.set.insert(k.into(), u32::from(v));
        }
    }
    w
}

fn shown(s: &GroupState) -> String {
    let GroupState::Pause(p) = s else {
        return String::new();
    };
    let flag = |v: Option<bool>| match v {
        Some(true) => "on",
        Some(false) => "off",
        None => "?",
    };
    format!(
        "pause autoneg {}, RX {}, TX {}",
        flag(p.autoneg),
        flag(p.rx),
        flag(p.tx)
    )
}
