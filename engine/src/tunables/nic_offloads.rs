//! `nic.offloads`: GRO and LRO of the data ports as the profile says, and TCP header/data
//! split where the profile needs it (TCP zero-copy receive, seed 003) and the kernel and
//! driver have it (ETHTOOL_A_RINGS_TCP_DATA_SPLIT, Linux 5.19).

use super::nic_ethtool::{check, plan, Spec, WantCx, Wants};
use crate::model::tunable::{no_files, Planner, Tunable};
use crate::model::verdict::Area;
use daqtune_probe::net::ethtool::{DataSplit, Group, GroupState};

pub const OFFLOADS: Tunable = Tunable {
    id: "nic.offloads",
    area: Area::Nic,
    title: "Receive offloads (GRO, LRO) and header split of the data ports",
    aliases: &["offloads", "gro"],
    doc: include_str!("../../../docs/checks/nic.offloads.md"),
    needs_root: false,
    profile_keys: &["nic.offloads"],
    check: |ctx| {
        let mut v = check(ctx, &FEATURES);
        if ctx.profile.profile.nic.offloads.header_split.is_some() {
            v.extend(check(ctx, &SPLIT).into_iter().map(|mut x| {
                x.subject = format!("{} header split", x.subject);
                x
            }));
        }
        v
    },
    planner: Some(Planner {
        order: 43,
        with: &[],
        plan: |cx, p| {
            plan(cx, p, &FEATURES)?;
            if cx.lp.profile.nic.offloads.header_split.is_some() {
                plan(cx, p, &SPLIT)?;
            }
            Ok(())
        },
        artifacts: &[],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: no_files,
    }),
};

pub const FEATURES: Spec = Spec {
    id: "nic.offloads",
    group: Group::Features,
    wants: features,
    shown: shown_features,
};

pub const SPLIT: Spec = Spec {
    id: "nic.offloads",
    group: Group::Rings,
    wants: split,
    shown: shown_split,
};

/// The kernel's feature names (`ethtool -k` calls them generic-/large-receive-offload).
const GRO: &str = "rx-gro";
const LRO: &str = "rx-lro";

fn features(cx: &WantCx) -> Wants {
    let mut w = Wants::default();
    let GroupState::Features(f) = cx.state else {
        return w;
    };
    let o = &cx.lp.profile.nic.offloads;
    for (want, name) in [(o.gro, GRO), (o.lro, LRO)] {
        let Some(want) = want else { continue };
        match f.features.get(name) {
            // A fixed feature cannot change: off and unchangeable is what "no LRO" means.
            Some(x) if x.fixed && x.active != want => w.cannot.push(format!(
                "{name} is fixed {} by the driver",
                if x.active { "on" } else { "off" }
            )),
            Some(x) if x.fixed => {}
            Some(_) => {
                w.set.insert(name.into(), u32::from(want));
            }
            None => w
                .cannot
                .push(format!("{name}: not a feature of this kernel")),
        }
    }
    w
}

fn split(cx: &WantCx) -> Wants {
    let mut w = Wants::default();
    let GroupState::Rings(r) = cx.state else {
        return w;
    };
    let Some(want) = cx.lp.profile.nic.offloads.header_split else {
        return w;
    };
    match r.tcp_data_split {
        None => w.cannot.push(
            "header split is not available (the kernel is older than 5.19 or the driver does not report it)".into(),
        ),
        Some(_) => {
            let v = if want { DataSplit::Enabled } else { DataSplit::Disabled };
            w.set.insert("tcp_data_split".into(), v as u32);
        }
    }
    w
}

fn shown_features(s: &GroupState) -> String {
    let GroupState::Features(f) = s else {
        return String::new();
    };
    let one = |n: &str| match f.features.get(n) {
        Some(x) => format!(
            "{}{}",
            if x.active { "on" } else { "off" },
            if x.fixed { " [fixed]" } else { "" }
        ),
        None => "?".into(),
    };
    format!("GRO {}, LRO {}", one(GRO), one(LRO))
}

fn shown_split(s: &GroupState) -> String {
    let GroupState::Rings(r) = s else {
        return String::new();
    };
    match r.tcp_data_split {
        Some(DataSplit::Enabled) => "header split on".into(),
        Some(DataSplit::Disabled) => "header split off".into(),
        Some(DataSplit::Unknown) => "header split auto (the driver decides)".into(),
        None => "header split not reported".into(),
    }
}
