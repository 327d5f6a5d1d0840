//! `kernel.thp`: transparent hugepages, `enabled` and `defrag`. Plan: each file now, and a
//! tmpfiles.d file that writes them at every boot.

use super::{Item, Spec, Want};
use crate::model::context::Context;
use crate::model::plan::{Plan, PlanCx, PlanError};
use crate::model::tunable::{Artifact, Planner, Tunable};
use crate::model::verdict::{Area, Verdict};

const ID: &str = "kernel.thp";
pub const ENABLED: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
pub const DEFRAG: &str = "/sys/kernel/mm/transparent_hugepage/defrag";
pub const TMPFILES: &str = "/etc/tmpfiles.d/daqtune-thp.conf";
const ABSENT: &str = "this kernel has no transparent hugepages (CONFIG_TRANSPARENT_HUGEPAGE off), so none can be made on any core";

const SPEC: Spec = Spec {
    id: ID,
    sysctl_file: None,
    tmpfiles_file: Some(TMPFILES),
};

pub const THP: Tunable = Tunable {
    id: ID,
    area: Area::Kernel,
    title: "Transparent hugepages (enabled, defrag)",
    aliases: &["thp"],
    doc: include_str!("../../../../docs/checks/kernel.thp.md"),
    needs_root: false,
    profile_keys: &["kernel.thp", "kernel.thp_defrag"],
    check: run,
    planner: Some(Planner {
        order: 10,
        with: &[],
        plan: plan_thp,
        artifacts: &[Artifact {
            kind: "thp-tmpfiles",
            help: "tmpfiles.d file writing the transparent hugepage modes at boot",
            render: |g| {
                let ctx = super::context(g.facts, g.lp);
                super::generate(g, &items(&ctx), super::Persist::Tmpfiles)
            },
        }],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: |_| SPEC.owned(),
    }),
};

/// The files the profile judges.
fn items(ctx: &Context) -> Vec<Item> {
    let k = &ctx.profile.profile.kernel;
    let mut v = Vec::new();
    if let Some(e) = k.thp {
        v.push(Item::sysfs(
            ENABLED,
            "thp.enabled",
            Want::Choice(e.as_str()),
            ABSENT,
        ));
    }
    if let Some(d) = k.thp_defrag {
        v.push(Item::sysfs(
            DEFRAG,
            "thp.defrag",
            Want::Choice(d.as_str()),
            ABSENT,
        ));
    }
    v
}

fn run(ctx: &Context) -> Vec<Verdict> {
    let items = items(ctx);
    if items.is_empty() {
        return super::not_judged(ID, "kernel.thp");
    }
    super::check(ctx, &SPEC, &items)
}

fn plan_thp(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    super::plan(cx, plan, &SPEC, &items(&cx.context()))
}
