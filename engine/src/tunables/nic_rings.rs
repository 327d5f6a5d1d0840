//! `nic.rings`: the RX/TX ring sizes of the data ports, at the device maximum or the profile's
//! size. A small RX ring is the classic cause of loss under bursts.

use super::nic_ethtool::{check, plan, Spec, WantCx, Wants};
use crate::model::profile::RingSize;
use crate::model::tunable::{no_files, Planner, Tunable};
use crate::model::verdict::Area;
use daqtune_probe::net::ethtool::{Group, GroupState};

pub const RINGS: Tunable = Tunable {
    id: "nic.rings",
    area: Area::Nic,
    title: "RX/TX ring sizes of the data ports",
    aliases: &["rings"],
    doc: include_str!("../../../docs/checks/nic.rings.md"),
    needs_root: false,
    profile_keys: &["nic.rings"],
    check: |ctx| check(ctx, &SPEC),
    planner: Some(Planner {
        order: 40,
        with: &[],
        plan: |cx, p| plan(cx, p, &SPEC),
        artifacts: &[],
        port_reset: crate::model::tunable::PortReset::Resets,
        owned_files: no_files,
    }),
};

pub const SPEC: Spec = Spec {
    id: "nic.rings",
    group: Group::Rings,
    wants,
    shown,
};

fn wants(cx: &WantCx) -> Wants {
    let mut w = Wants::default();
    let GroupState::Rings(r) = cx.state else {
        return w;
    };
    let p = &cx.lp.profile.nic.rings;
    for (want, key, max) in [(p.rx, "rx", r.rx_max), (p.tx, "tx", r.tx_max)] {
        match (want, max) {
            (None, _) => {}
            // A bound crossed: said, and nothing set or kept for that ring (the profile may
            // say `max`).
            (Some(RingSize::Count(n)), Some(m)) if n > m => {
                w.cannot.push(format!(
                    "{key} {n} is above the device's maximum {m} (ethtool -g): not set; ask for `max` or at most {m}"
                ));
            }
            (Some(RingSize::Count(n)), _) => {
                w.set.insert(key.into(), n);
            }
            (Some(RingSize::Word(_)), Some(m)) if m > 0 => {
                w.set.insert(key.into(), m);
            }
            (Some(RingSize::Word(_)), _) => {
                w.cannot
                    .push(format!("{key}: the driver reports no maximum"));
            }
        }
    }
    w
}

fn shown(s: &GroupState) -> String {
    let GroupState::Rings(r) = s else {
        return String::new();
    };
    let one = |v: Option<u32>, m: Option<u32>| match (v, m) {
        (Some(v), Some(m)) => format!("{v} (max {m})"),
        (Some(v), None) => v.to_string(),
        (None, _) => "?".into(),
    };
    format!(
        "RX ring {}, TX ring {}",
        one(r.rx, r.rx_max),
        one(r.tx, r.tx_max)
    )
}
