//! The registry: every tunable, in report order. The one list from which `check` and
//! `explain --list` take their ids, the docs index (docs/checks/README.md) is generated,
//! `apply --only` takes its ids, and the profile validator knows the ids of `required:`,
//! `not_applicable:` and `waivers:`. Adding a tunable is its module, one line here, and its
//! page in docs/checks/ (docs/architecture.md walks through one).
//!
//! Checks and plans run here, on one [`Facts`] per run: `run_checks` judges, `build_plan` asks
//! each tunable that plans for its changes, in plan order.

use crate::hostio::gpu::GpuSetters;
use crate::hostio::setters::Target;
use crate::model::context::Context;
use crate::model::facts::Facts;
use crate::model::plan::{NoteLevel, Plan, PlanCx, PlanError, PlanOptions};
use crate::model::profile::LoadedProfile;
use crate::model::tunable::{Artifact, Tunable};
use crate::model::verdict::Verdict;
use daqtune_probe::Host;

pub mod acs;
pub mod app;
pub mod app_profile;
pub mod artifacts;
pub mod cmdline;
pub mod governor;
pub mod gpu;
pub mod gpu_clocks;
pub mod gpu_health;
pub mod hugepages;
pub mod idle;
pub mod iommu;
pub mod irq;
pub mod kernel;
pub mod mrrs;
pub mod mtu;
pub mod nic;
pub mod nic_channels;
pub mod nic_coalesce;
pub mod nic_counters;
pub mod nic_ethtool;
pub mod nic_offloads;
pub mod nic_pause;
pub mod nic_persist;
pub mod nic_rings;
pub mod numa;
pub mod pcie;
pub mod pcie_capacity;
pub mod peermem;
pub mod platform;
pub mod sysctl;

/// Every tunable, in report order.
pub static REGISTRY: &[&Tunable] = &[
    &platform::PLATFORM,
    &governor::GOVERNOR,
    &idle::IDLE,
    &cmdline::CMDLINE,
    &hugepages::HUGEPAGES,
    &kernel::thp::THP,
    &kernel::sysctls::NUMA_BALANCING,
    &kernel::watchdog::WATCHDOG,
    &kernel::sysctls::TIMER_MIGRATION,
    &kernel::sysctls::STAT_INTERVAL,
    &kernel::ksm::KSM,
    &numa::NUMA,
    &pcie::TOPOLOGY,
    &pcie::LINK,
    &pcie_capacity::CAPACITY,
    &pcie::MPS,
    &mrrs::MRRS,
    &acs::ACS,
    &pcie::AER,
    &iommu::IOMMU,
    &irq::AFFINITY,
    &nic::DRIVER,
    &nic::LINK_LAYER,
    &nic::LINK,
    &mtu::MTU,
    &nic_rings::RINGS,
    &nic_coalesce::COALESCE,
    &nic_pause::PAUSE,
    &nic_offloads::OFFLOADS,
    &nic_channels::CHANNELS,
    &nic_counters::COUNTERS,
    &sysctl::NET_SYSCTL,
    &gpu_clocks::CLOCKS,
    &gpu::BAR1,
    &gpu::GPUDIRECT,
    &peermem::PEERMEM,
    &gpu::DRIVER,
    &gpu_health::HEALTH,
    &gpu_health::XID,
    &artifacts::ARTIFACTS,
    &app::CONFIG,
    &app::CORES,
    &app::MEMORY,
    &app::INTERFACES,
    &app::SIZES,
];

/// The tunable with this id, or tune_system.py alias.
pub fn find(id_or_alias: &str) -> Option<&'static Tunable> {
    find_in(REGISTRY, id_or_alias)
}

/// [`find`] in a given registry.
pub fn find_in<'r>(registry: &[&'r Tunable], id_or_alias: &str) -> Option<&'r Tunable> {
    registry
        .iter()
        .find(|c| c.id == id_or_alias)
        .or_else(|| registry.iter().find(|c| c.aliases.contains(&id_or_alias)))
        .copied()
}

/// Every artifact `daqtune generate` prints, in plan order, with the tunable that owns it.
pub fn artifacts() -> Vec<(&'static Tunable, &'static Artifact)> {
    artifacts_in(REGISTRY)
}

/// [`artifacts`] of a given registry.
pub fn artifacts_in<'r>(registry: &[&'r Tunable]) -> Vec<(&'r Tunable, &'r Artifact)> {
    planners_in(registry)
        .into_iter()
        .flat_map(|t| {
            t.planner
                .iter()
                .flat_map(move |p| p.artifacts.iter().map(move |a| (t, a)))
        })
        .collect()
}

/// The fixed host paths of the persistent files the tunables write under this profile.
pub fn owned_files(lp: &LoadedProfile) -> Vec<String> {
    owned_files_in(REGISTRY, lp)
}

/// [`owned_files`] of a given registry.
pub fn owned_files_in(registry: &[&Tunable], lp: &LoadedProfile) -> Vec<String> {
    planners_in(registry)
        .iter()
        .filter_map(|t| t.planner.as_ref())
        .flat_map(|p| (p.owned_files)(lp))
        .collect()
}

/// Every id, in report order.
pub fn ids() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|t| t.id)
}

/// Every id and tune_system.py alias: the words `check` and `--only` take.
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY
        .iter()
        .flat_map(|t| std::iter::once(t.id).chain(t.aliases.iter().copied()))
}

/// The tunables that plan, in plan order.
pub fn planners() -> Vec<&'static Tunable> {
    planners_in(REGISTRY)
}

/// [`planners`] of a given registry.
pub fn planners_in<'r>(registry: &[&'r Tunable]) -> Vec<&'r Tunable> {
    let mut v: Vec<&'r Tunable> = registry.iter().copied().filter(|t| t.plans()).collect();
    v.sort_by_key(|t| t.planner.as_ref().map_or(u8::MAX, |p| p.order));
    v
}

/// The ids `apply --only` understands, in plan order.
pub fn apply_ids() -> Vec<&'static str> {
    planners().iter().map(|t| t.id).collect()
}

/// The help of `--only` (plan, apply): the ids it takes.
pub fn only_help() -> String {
    format!(
        "Only these ids (comma-separated): {}; or `drifted`: what `daqtune status` shows as drift",
        apply_ids().join(", ")
    )
}

/// Check a loaded profile's ids (`required:`, `not_applicable:`, `waivers:`) against the
/// registry; the error names file:line:column.
pub fn validate_profile(lp: &LoadedProfile) -> Result<(), crate::model::profile::ProfileError> {
    let known: Vec<&str> = ids().collect();
    lp.check_ids(&known)
}

/// Options for one evaluation.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Only these ids (empty = all).
    pub only: Vec<String>,
}

/// Evaluate the selected checks. A check that panics is reported as `error` and the run goes on.
pub fn run_checks(ctx: &Context, opts: &RunOptions) -> Vec<Verdict> {
    run_checks_in(REGISTRY, ctx, opts)
}

/// [`run_checks`] over a given registry (a test's, with a tunable of its own added).
pub fn run_checks_in(registry: &[&Tunable], ctx: &Context, opts: &RunOptions) -> Vec<Verdict> {
    // The checks see the files this registry's tunables own.
    let mut own = Context::with_facts(ctx.facts(), ctx.profile).with_app(ctx.app);
    own.owned_files = owned_files_in(registry, ctx.profile);
    let ctx = &own;
    if registry.iter().any(|d| d.id == nic_counters::ID)
        && (opts.only.is_empty() || opts.only.iter().any(|o| o == nic_counters::ID))
    {
        // Its first read, so that the check has an interval within the run to compare over.
        nic_counters::start(ctx);
    }
    let mut out = Vec::new();
    // The checks whose window is the run itself ([`DEFERRED`]): judged after the others, their
    // verdicts put back where the registry has them.
    let mut deferred: Vec<(usize, &Tunable)> = Vec::new();
    for def in registry {
        if !opts.only.is_empty() && !opts.only.iter().any(|o| o == def.id) {
            continue;
        }
        // `app.*` checks judge the host against an experiment's configuration: without
        // `--config` they have nothing to say unless asked for by name.
        if def.id.starts_with("app.") && ctx.app.is_none() && opts.only.is_empty() {
            continue;
        }
        if let Some(v) = ctx.not_applicable(def.id) {
            out.push(v);
            continue;
        }
        // An imported capture without the check's facts: skip, never judge absence.
        if let Some(v) = crate::model::capture::not_in_capture(ctx.facts(), def.id) {
            out.push(v);
            continue;
        }
        if DEFERRED.contains(&def.id) {
            deferred.push((out.len(), def));
            continue;
        }
        out.extend(check_one(def, ctx));
    }
    // Last first, so the earlier slots' indices still hold.
    let mut late: Vec<(usize, Vec<Verdict>)> = deferred
        .into_iter()
        .map(|(at, def)| (at, check_one(def, ctx)))
        .collect();
    while let Some((at, vs)) = late.pop() {
        out.splice(at..at, vs);
    }
    crate::model::gate::apply_waivers(
        &ctx.profile.profile,
        &mut out,
        crate::model::profile::today(),
    );
    out
}

/// The checks [`run_checks_in`] runs after all the others: `nic.counters`, whose window within
/// the run (from the run's first read of the ports, taken before any check) is then the whole
/// run rather than the time before its turn came.
pub const DEFERRED: &[&str] = &[nic_counters::ID];

/// One check's verdicts; a check that panics or says nothing is an error verdict, never a
/// crash of the run.
fn check_one(def: &Tunable, ctx: &Context) -> Vec<Verdict> {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (def.check)(ctx)));
    match result {
        Ok(mut vs) => {
            if vs.is_empty() {
                vs.push(Verdict::error(
                    def.id,
                    "host",
                    "the check produced no verdict",
                ));
            }
            vs
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            vec![Verdict::error(
                def.id,
                "host",
                format!("internal error: {msg}"),
            )]
        }
    }
}

/// Build the plan for `lp` on `host` (facts gathered for this plan alone).
pub fn build_plan(host: &Host, lp: &LoadedProfile, opts: &PlanOptions) -> Result<Plan, PlanError> {
    build_plan_with(&Facts::new(host), lp, opts, None)
}

/// [`build_plan`] on the run's facts, with access to the GPUs (clock locks and persistence).
pub fn build_plan_with(
    facts: &Facts,
    lp: &LoadedProfile,
    opts: &PlanOptions,
    gpu: Option<&dyn GpuSetters>,
) -> Result<Plan, PlanError> {
    build_plan_in(REGISTRY, facts, lp, opts, gpu)
}

/// [`build_plan_with`] over a given registry.
pub fn build_plan_in(
    registry: &[&Tunable],
    facts: &Facts,
    lp: &LoadedProfile,
    opts: &PlanOptions,
    gpu: Option<&dyn GpuSetters>,
) -> Result<Plan, PlanError> {
    let planners = planners_in(registry);
    for id in &opts.only {
        if !planners.iter().any(|t| t.id == id) {
            return Err(PlanError::UnknownId {
                id: id.clone(),
                known: planners.iter().map(|t| t.id).collect::<Vec<_>>().join(", "),
            });
        }
    }
    let target = if facts.host.is_live() {
        Target::Live
    } else {
        Target::Root
    };
    let cx = PlanCx {
        facts,
        lp,
        opts,
        target,
        gpu,
    };
    let mut plan = Plan {
        profile: lp.profile.name.clone(),
        target,
        changes: Vec::new(),
        notes: Vec::new(),
        kernel_args: None,
        needs_binary: Vec::new(),
        parted: Default::default(),
        boot_reserved: Default::default(),
    };
    for t in planners {
        let Some(p) = &t.planner else { continue };
        let wanted = opts.wants(t.id) || p.with.iter().any(|w| opts.wants(w));
        if !wanted {
            continue;
        }
        if let Some(reason) = lp.profile.not_applicable.get(t.id) {
            plan.note(
                t.id,
                NoteLevel::Skip,
                format!("n/a on this platform: {reason}"),
            );
            continue;
        }
        (p.plan)(&cx, &mut plan)?;
    }
    if let Some(lockdown) = facts
        .platform()
        .lockdown
        .as_deref()
        .filter(|l| *l != "none")
    {
        if plan
            .changes
            .iter()
            .any(|c| matches!(c.action, crate::model::plan::Action::ConfigWord { .. }))
        {
            plan.note(
                "platform",
                NoteLevel::Warn,
                format!("kernel lockdown is `{lockdown}`: PCI config-space writes (MRRS) will be refused; disable Secure Boot in the firmware setup (or `mokutil --disable-validation`), apply, then re-enable it"),
            );
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_only_id_is_an_error() {
        let d = tempfile::tempdir().expect("tmp");
        let host = Host::at(d.path()).expect("host");
        let lp = crate::model::profile::load("igx-orin").expect("profile");
        let opts = PlanOptions {
            only: vec!["nope".into()],
            ..Default::default()
        };
        assert!(matches!(
            build_plan(&host, &lp, &opts),
            Err(PlanError::UnknownId { .. })
        ));
    }

    /// `nic.counters` is judged after every other check (its window is the run), and its
    /// verdicts still come out where the registry puts it.
    #[test]
    fn deferred_checks_run_last_in_their_place() {
        use std::sync::Mutex;
        static RAN: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
        fn first(_: &Context) -> Vec<Verdict> {
            RAN.lock().unwrap_or_else(|e| e.into_inner()).push("first");
            vec![Verdict::pass("test.first", "host", "ran")]
        }
        fn counters(_: &Context) -> Vec<Verdict> {
            RAN.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(nic_counters::ID);
            vec![Verdict::pass(nic_counters::ID, "host", "ran")]
        }
        fn last(_: &Context) -> Vec<Verdict> {
            RAN.lock().unwrap_or_else(|e| e.into_inner()).push("last");
            vec![Verdict::pass("test.last", "host", "ran")]
        }
        let t = |id: &'static str, check: fn(&Context) -> Vec<Verdict>| Tunable {
            id,
            area: crate::model::verdict::Area::Nic,
            title: "test",
            aliases: &[],
            doc: "# test\n",
            needs_root: false,
            profile_keys: &[],
            check,
            planner: None,
        };
        let (a, b, c) = (
            t("test.first", first),
            t(nic_counters::ID, counters),
            t("test.last", last),
        );
        let d = tempfile::tempdir().expect("tmp");
        let host = Host::at(d.path()).expect("host");
        let lp = crate::model::profile::load("igx-orin").expect("profile");
        let ctx = Context::new(&host, &lp);
        let out = run_checks_in(&[&a, &b, &c], &ctx, &RunOptions::default());
        let ids: Vec<&str> = out.iter().map(|v| v.id.as_str()).collect();
        assert_eq!(ids, ["test.first", nic_counters::ID, "test.last"]);
        let ran = RAN.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(ran, ["first", "last", nic_counters::ID]);
    }

    #[test]
    fn empty_root_plans_without_panicking() {
        let d = tempfile::tempdir().expect("tmp");
        let host = Host::at(d.path()).expect("host");
        for name in crate::model::profile::builtin_names() {
            let lp = crate::model::profile::load(name).expect("profile");
            let plan = build_plan(&host, &lp, &PlanOptions::default()).expect("plan");
            // Nothing readable: only persistent files that need no host facts.
            assert!(
                plan.changes.iter().all(|c| c.action.is_persistent()),
                "{plan:?}"
            );
            assert!(
                plan.notes
                    .iter()
                    .any(|n| matches!(n.level, crate::model::plan::NoteLevel::Skip)),
                "{plan:?}"
            );
        }
    }
}
