//! `cpu.idle`: deep C-states on the data cores. Plan: disable each state deeper than the
//! profile's exit latency on the data cores (runtime only).

use crate::context::Context;
use crate::plan::{Action, Change, NoteLevel, Plan, PlanCx, PlanError};
use crate::tunable::Planner;
use crate::tunable::Tunable;
use crate::verdict::{Area, Verdict};
use daqtune_probe::CpuSet;
use std::collections::BTreeMap;

pub const IDLE: Tunable = Tunable {
    id: "cpu.idle",
    area: Area::Cpu,
    title: "Deep C-states on the data cores",
    aliases: &["cstates", "idle"],
    doc: include_str!("../../../docs/checks/cpu.idle.md"),
    needs_root: false,
    profile_keys: &["cpu.max_idle_latency_us", "cpu.isolated"],
    check: run_idle,
    planner: Some(Planner {
        order: 2,
        with: &[],
        plan: plan_idle,
    }),
};

fn run_idle(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "cpu.idle";
    let cpus = match ctx.cpus() {
        Ok(c) => c,
        Err(e) => return vec![Verdict::skip(ID, "host", e.to_string())],
    };
    let data = match ctx.data_cores() {
        Ok(Some(d)) => d,
        Ok(None) => match &cpus.isolated {
            Some(iso) if !iso.is_empty() => iso.clone(),
            _ => {
                return vec![Verdict::skip(
                    ID,
                    "host",
                    "no data cores: the profile names none and no CPU is isolated",
                )]
            }
        },
        Err(e) => return vec![Verdict::skip(ID, "host", e)],
    };
    if cpus.idle_driver.as_deref() == Some("none") {
        return vec![Verdict::pass(
            ID,
            format!("cpu{data}"),
            "no cpuidle driver: CPUs only use the architecture's shallow idle instruction",
        )
        .observed("cpuidle driver none")];
    }
    let max_lat = ctx.profile.profile.cpu.max_idle_latency_us;
    let mut deep: BTreeMap<String, CpuSet> = BTreeMap::new();
    let mut seen_any = false;
    for c in cpus.cpus.iter().filter(|c| data.contains(c.id)) {
        if !c.idle_states.is_empty() {
            seen_any = true;
        }
        for s in &c.idle_states {
            if s.latency_us.is_some_and(|l| l > max_lat) && s.disabled == Some(false) {
                deep.entry(format!("{} ({} µs)", s.name, s.latency_us.unwrap_or(0)))
                    .or_default()
                    .insert(c.id);
            }
        }
    }
    let subject = format!("cpu{data}");
    if !seen_any {
        return vec![Verdict::skip(
            ID,
            subject,
            "the data cores expose no cpuidle states (/sys/devices/system/cpu/cpuN/cpuidle absent)",
        )];
    }
    if deep.is_empty() {
        return vec![Verdict::pass(
            ID,
            subject,
            format!("no idle state deeper than {max_lat} µs is enabled on the data cores"),
        )
        .expected(format!("exit latency <= {max_lat} µs"))];
    }
    let observed = deep
        .iter()
        .map(|(s, set)| format!("{s} on {set}"))
        .collect::<Vec<_>>()
        .join("; ");
    vec![Verdict::warn(
        ID,
        subject,
        format!("deep idle states are enabled on data cores: {observed}; waking from them adds latency when polling the NIC"),
    )
    .observed(observed)
    .expected(format!("exit latency <= {max_lat} µs"))
    .fix("sudo daqtune apply --only cpu.idle   (writes 1 to cpuidle/stateN/disable on the data cores)")]
}

fn plan_idle(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    const ID: &str = "cpu.idle";
    if !cx.opts.runtime {
        return Ok(());
    }
    let Ok(Some(list)) = cx.data_cores() else {
        if !cx.opts.only.is_empty() {
            plan.note(ID, NoteLevel::Skip, "no data-core list in the profile");
        }
        return Ok(());
    };
    let Ok(set) = daqtune_probe::cpulist::parse_cpulist(&list, None) else {
        return Ok(());
    };
    let Ok(cpus) = cx.facts.cpus() else {
        return Ok(());
    };
    let max = cx.lp.profile.cpu.max_idle_latency_us;
    for c in cpus.cpus.iter().filter(|c| set.contains(c.id)) {
        for s in &c.idle_states {
            if s.latency_us.is_some_and(|l| l > max) && s.disabled == Some(false) {
                let path = format!(
                    "/sys/devices/system/cpu/cpu{}/cpuidle/state{}/disable",
                    c.id, s.index
                );
                let from = "0\n".to_string();
                plan.changes.push(Change {
                    check: ID.into(),
                    subject: format!("cpu{} {}", c.id, s.name),
                    action: Action::Attr {
                        path,
                        from,
                        to: "1".into(),
                    },
                    reboot: false,
                    note: Some(format!(
                        "exit latency {} µs > {max} µs",
                        s.latency_us.unwrap_or(0)
                    )),
                });
            }
        }
    }
    Ok(())
}
