//! `nic.coalesce`: interrupt coalescing of the data ports: adaptive moderation as the profile
//! says (off: the interrupt rate then does not move with the load) and its fixed rx-usecs.

use super::nic_ethtool::{check, plan, Spec, WantCx, Wants};
use crate::model::tunable::{no_files, Planner, Tunable};
use crate::model::verdict::Area;
use daqtune_probe::net::ethtool::{Group, GroupState};

pub const COALESCE: Tunable = Tunable {
    id: "nic.coalesce",
    area: Area::Nic,
    title: "Interrupt coalescing of the data ports",
    aliases: &["coalesce"],
    doc: include_str!("../../../docs/checks/nic.coalesce.md"),
    needs_root: false,
    profile_keys: &["nic.coalesce"],
    check: |ctx| check(ctx, &SPEC),
    planner: Some(Planner {
        order: 41,
        with: &[],
        plan: |cx, p| plan(cx, p, &SPEC),
        artifacts: &[],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: no_files,
    }),
};

pub const SPEC: Spec = Spec {
    id: "nic.coalesce",
    group: Group::Coalesce,
    wants,
    shown,
};

fn wants(cx: &WantCx) -> Wants {
    let p = &cx.lp.profile.nic.coalesce;
    let mut w = Wants::default();
    if let Some(a) = p.adaptive_rx {
        w.set.insert("adaptive_rx".into(), u32::from(a));
    }
    if let Some(a) = p.adaptive_tx {
        w.set.insert("adaptive_tx".into(), u32::from(a));
    }
    if let Some(u) = p.rx_usecs {
        w.set.insert("rx_usecs".into(), u);
    }
    w
}

fn shown(s: &GroupState) -> String {
    let GroupState::Coalesce(c) = s else {
        return String::new();
    };
    let flag = |v: Option<bool>| match v {
        Some(true) => "on",
        Some(false) => "off",
        None => "?",
    };
    format!(
        "rx-usecs {}, adaptive RX {} TX {}",
        c.rx_usecs
            .map(|v| v.to_string())
            .unwrap_or_else(|| "?".into()),
        flag(c.adaptive_rx),
        flag(c.adaptive_tx)
    )
}
