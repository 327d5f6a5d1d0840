//! `kernel.watchdog`: nothing of the lockup detectors ticking on the data cores. The soft
//! lockup detector runs an hrtimer and a stopper thread on every CPU of
//! `kernel.watchdog_cpumask`, the hard lockup detector (`kernel.nmi_watchdog`) a perf event
//! that raises an NMI. Plan: the profile's choice now (the data cores out of the mask, or
//! the detectors off), and a sysctl.d drop-in of its own.

use super::{Item, Spec, Want};
use crate::model::context::Context;
use crate::model::plan::{NoteLevel, Plan, PlanCx, PlanError};
use crate::model::profile::WatchdogMode;
use crate::model::tunable::{Artifact, Planner, Tunable};
use crate::model::verdict::{Area, Verdict};

const ID: &str = "kernel.watchdog";
pub const SYSCTL_FILE: &str = "/etc/sysctl.d/90-daqtune-watchdog.conf";
const NO_DETECTOR: &str =
    "this kernel has no lockup detector (CONFIG_LOCKUP_DETECTOR off), so none ticks on any core";

const SPEC: Spec = Spec {
    id: ID,
    sysctl_file: Some(SYSCTL_FILE),
    tmpfiles_file: None,
};

pub const WATCHDOG: Tunable = Tunable {
    id: ID,
    area: Area::Kernel,
    title: "Lockup watchdogs kept off the data cores",
    aliases: &["watchdog", "nmi_watchdog"],
    doc: include_str!("../../../../docs/checks/kernel.watchdog.md"),
    needs_root: false,
    profile_keys: &["kernel.watchdog", "kernel.nmi_watchdog", "cpu.isolated"],
    check: run,
    planner: Some(Planner {
        order: 12,
        with: &[],
        plan: plan_watchdog,
        artifacts: &[Artifact {
            kind: "watchdog-sysctl",
            help: "sysctl.d drop-in keeping the lockup watchdogs off the data cores",
            render: |g| {
                let ctx = super::context(g.facts, g.lp);
                super::generate(g, &items(&ctx).0, super::Persist::Sysctl)
            },
        }],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: |_| SPEC.owned(),
    }),
};

/// The files the profile judges, and what keeps one from being judged (`skip` for a reason
/// of the host, `n/a` for one of the profile), as (subject, reason, is-skip).
fn items(ctx: &Context) -> (Vec<Item>, Vec<(String, String, bool)>) {
    let k = &ctx.profile.profile.kernel;
    let mut v = Vec::new();
    let mut left = Vec::new();
    match k.watchdog {
        None => {}
        Some(WatchdogMode::Off) => v.push(Item::sysctl("kernel.watchdog", Want::Int(0), NO_DETECTOR)),
        Some(WatchdogMode::Cpumask) => match ctx.data_cores() {
            Ok(Some(data)) if !data.is_empty() => v.push(Item::sysctl(
                "kernel.watchdog_cpumask",
                Want::CpusWithout(data),
                NO_DETECTOR,
            )),
            Ok(_) => left.push((
                "kernel.watchdog_cpumask".to_string(),
                "the profile names no data cores (cpu.isolated), so no core is to be kept free of the watchdog".to_string(),
                false,
            )),
            Err(e) => left.push((
                "kernel.watchdog_cpumask".to_string(),
                format!("the data cores are unknown: {e}"),
                true,
            )),
        },
    }
    if let Some(b) = k.nmi_watchdog {
        v.push(Item::sysctl(
            "kernel.nmi_watchdog",
            Want::Int(i64::from(b)),
            "this kernel has no hard lockup detector (CONFIG_HARDLOCKUP_DETECTOR off), so no NMI watchdog ticks",
        ));
    }
    (v, left)
}

fn run(ctx: &Context) -> Vec<Verdict> {
    let (items, left) = items(ctx);
    if items.is_empty() && left.is_empty() {
        return super::not_judged(ID, "kernel.watchdog");
    }
    let mut out: Vec<Verdict> = left
        .into_iter()
        .map(|(s, why, skip)| {
            if skip {
                Verdict::skip(ID, s, why)
            } else {
                Verdict::na(ID, s, why)
            }
        })
        .collect();
    out.extend(super::check(ctx, &SPEC, &items));
    out
}

fn plan_watchdog(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    let (items, left) = items(&cx.context());
    for (s, why, _) in left {
        plan.note(ID, NoteLevel::Skip, format!("{s}: {why}"));
    }
    super::plan(cx, plan, &SPEC, &items)
}
