//! `kernel.ksm`: the KSM daemon (`/sys/kernel/mm/ksm/run`). Plan: stop it now, and a
//! tmpfiles.d file that stops it at every boot.

use super::{Item, Spec, Want};
use crate::model::context::Context;
use crate::model::plan::{Plan, PlanCx, PlanError};
use crate::model::tunable::{Artifact, Planner, Tunable};
use crate::model::verdict::{Area, Verdict};

const ID: &str = "kernel.ksm";
pub const RUN: &str = "/sys/kernel/mm/ksm/run";
pub const TMPFILES: &str = "/etc/tmpfiles.d/daqtune-ksm.conf";
const ABSENT: &str =
    "this kernel has no KSM (CONFIG_KSM off), so no ksmd scans memory and there is nothing to stop";

const SPEC: Spec = Spec {
    id: ID,
    sysctl_file: None,
    tmpfiles_file: Some(TMPFILES),
};

pub const KSM: Tunable = Tunable {
    id: ID,
    area: Area::Kernel,
    title: "Kernel same-page merging (ksmd)",
    aliases: &["ksm"],
    doc: include_str!("../../../../docs/checks/kernel.ksm.md"),
    needs_root: false,
    profile_keys: &["kernel.ksm"],
    check: run,
    planner: Some(Planner {
        order: 15,
        with: &[],
        plan: plan_ksm,
        artifacts: &[Artifact {
            kind: "ksm-tmpfiles",
            help: "tmpfiles.d file setting the KSM daemon's run mode at boot",
            render: |g| {
                let ctx = super::context(g.facts, g.lp);
                super::generate(g, &items(&ctx), super::Persist::Tmpfiles)
            },
        }],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: |_| SPEC.owned(),
    }),
};

/// `run`: 0 stops ksmd and keeps merged pages, 1 runs it, 2 stops it and unmerges every
/// page. Stopped is 0 or 2; daqtune writes 0, since unmerging needs memory for every page
/// shared and can fail half-way on a full host, while the latency cost is the scanning.
fn items(ctx: &Context) -> Vec<Item> {
    match ctx.profile.profile.kernel.ksm {
        None => Vec::new(),
        Some(true) => vec![Item::sysfs(RUN, "ksm.run", Want::Int(1), ABSENT)],
        Some(false) => vec![Item::sysfs(RUN, "ksm.run", Want::OneOf(&[0, 2]), ABSENT)],
    }
}

fn run(ctx: &Context) -> Vec<Verdict> {
    let items = items(ctx);
    if items.is_empty() {
        return super::not_judged(ID, "kernel.ksm");
    }
    super::check(ctx, &SPEC, &items)
}

fn plan_ksm(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    super::plan(cx, plan, &SPEC, &items(&cx.context()))
}
