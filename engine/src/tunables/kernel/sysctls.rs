//! Three kernel latency sysctls, one tunable each: `kernel.numa-balancing`
//! (kernel.numa_balancing), `kernel.timer-migration` (kernel.timer_migration) and
//! `vm.stat-interval` (vm.stat_interval). Plan: the value now, and a sysctl.d drop-in of the
//! tunable's own.

use super::{Item, Spec, Want};
use crate::model::context::Context;
use crate::model::plan::{Plan, PlanCx, PlanError};
use crate::model::tunable::{Artifact, Planner, Tunable};
use crate::model::verdict::{Area, Verdict};

/// An on/off sysctl as the profile's boolean wants it.
fn on_off(b: bool) -> Want {
    Want::Int(i64::from(b))
}

// ---- kernel.numa-balancing ----

const NUMA_ID: &str = "kernel.numa-balancing";
pub const NUMA_FILE: &str = "/etc/sysctl.d/90-daqtune-numa-balancing.conf";
const NUMA_SPEC: Spec = Spec {
    id: NUMA_ID,
    sysctl_file: Some(NUMA_FILE),
    tmpfiles_file: None,
};

pub const NUMA_BALANCING: Tunable = Tunable {
    id: NUMA_ID,
    area: Area::Kernel,
    title: "Automatic NUMA balancing",
    aliases: &["numa_balancing"],
    doc: include_str!("../../../../docs/checks/kernel.numa-balancing.md"),
    needs_root: false,
    profile_keys: &["kernel.numa_balancing"],
    check: |ctx| run(ctx, &NUMA_SPEC, numa_items(ctx), "kernel.numa_balancing"),
    planner: Some(Planner {
        order: 11,
        with: &[],
        plan: |cx, plan| plan_with(cx, plan, &NUMA_SPEC, numa_items(&cx.context())),
        artifacts: &[Artifact {
            kind: "numa-balancing-sysctl",
            help: "sysctl.d drop-in setting automatic NUMA balancing",
            render: |g| {
                super::generate(
                    g,
                    &numa_items(&super::context(g.facts, g.lp)),
                    super::Persist::Sysctl,
                )
            },
        }],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: |_| NUMA_SPEC.owned(),
    }),
};

fn numa_items(ctx: &Context) -> Vec<Item> {
    ctx.profile
        .profile
        .kernel
        .numa_balancing
        .map(|b| {
            vec![Item::sysctl(
                "kernel.numa_balancing",
                on_off(b),
                "this kernel has no automatic NUMA balancing (CONFIG_NUMA_BALANCING off), so no page is moved between nodes behind the data path's back",
            )]
        })
        .unwrap_or_default()
}

// ---- kernel.timer-migration ----

const TIMER_ID: &str = "kernel.timer-migration";
pub const TIMER_FILE: &str = "/etc/sysctl.d/90-daqtune-timer-migration.conf";
const TIMER_SPEC: Spec = Spec {
    id: TIMER_ID,
    sysctl_file: Some(TIMER_FILE),
    tmpfiles_file: None,
};

pub const TIMER_MIGRATION: Tunable = Tunable {
    id: TIMER_ID,
    area: Area::Kernel,
    title: "Timer migration between CPUs",
    aliases: &["timer_migration"],
    doc: include_str!("../../../../docs/checks/kernel.timer-migration.md"),
    needs_root: false,
    profile_keys: &["kernel.timer_migration"],
    check: |ctx| run(ctx, &TIMER_SPEC, timer_items(ctx), "kernel.timer_migration"),
    planner: Some(Planner {
        order: 13,
        with: &[],
        plan: |cx, plan| plan_with(cx, plan, &TIMER_SPEC, timer_items(&cx.context())),
        artifacts: &[Artifact {
            kind: "timer-migration-sysctl",
            help: "sysctl.d drop-in setting timer migration",
            render: |g| {
                super::generate(
                    g,
                    &timer_items(&super::context(g.facts, g.lp)),
                    super::Persist::Sysctl,
                )
            },
        }],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: |_| TIMER_SPEC.owned(),
    }),
};

fn timer_items(ctx: &Context) -> Vec<Item> {
    ctx.profile
        .profile
        .kernel
        .timer_migration
        .map(|b| {
            vec![Item::sysctl(
                "kernel.timer_migration",
                on_off(b),
                "this kernel does not migrate timers (built without CONFIG_NO_HZ_COMMON, or without SMP), so a timer stays on the CPU that armed it",
            )]
        })
        .unwrap_or_default()
}

// ---- vm.stat-interval ----

const STAT_ID: &str = "vm.stat-interval";
pub const STAT_FILE: &str = "/etc/sysctl.d/90-daqtune-stat-interval.conf";
const STAT_SPEC: Spec = Spec {
    id: STAT_ID,
    sysctl_file: Some(STAT_FILE),
    tmpfiles_file: None,
};

pub const STAT_INTERVAL: Tunable = Tunable {
    id: STAT_ID,
    area: Area::Kernel,
    title: "vmstat refresh interval (vm.stat_interval)",
    aliases: &["stat_interval"],
    doc: include_str!("../../../../docs/checks/vm.stat-interval.md"),
    needs_root: false,
    profile_keys: &["kernel.stat_interval"],
    check: |ctx| run(ctx, &STAT_SPEC, stat_items(ctx), "kernel.stat_interval"),
    planner: Some(Planner {
        order: 14,
        with: &[],
        plan: |cx, plan| plan_with(cx, plan, &STAT_SPEC, stat_items(&cx.context())),
        artifacts: &[Artifact {
            kind: "stat-interval-sysctl",
            help: "sysctl.d drop-in setting the vmstat refresh interval",
            render: |g| {
                super::generate(
                    g,
                    &stat_items(&super::context(g.facts, g.lp)),
                    super::Persist::Sysctl,
                )
            },
        }],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: |_| STAT_SPEC.owned(),
    }),
};

fn stat_items(ctx: &Context) -> Vec<Item> {
    ctx.profile
        .profile
        .kernel
        .stat_interval
        .map(|s| {
            vec![Item::sysctl(
                "vm.stat_interval",
                Want::AtLeast(i64::from(s)),
                "this kernel has no vmstat worker interval (a kernel built without SMP keeps no per-CPU statistics to fold)",
            )]
        })
        .unwrap_or_default()
}

// ---- shared ----

fn run(ctx: &Context, spec: &Spec, items: Vec<Item>, key: &str) -> Vec<Verdict> {
    if items.is_empty() {
        return super::not_judged(spec.id, key);
    }
    super::check(ctx, spec, &items)
}

fn plan_with(cx: &PlanCx, plan: &mut Plan, spec: &Spec, items: Vec<Item>) -> Result<(), PlanError> {
    super::plan(cx, plan, spec, &items)
}
