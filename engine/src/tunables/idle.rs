//! `cpu.idle`: deep C-states on the data cores. Plan: disable each state deeper than the
//! profile's exit latency on the data cores (runtime only).

use crate::model::context::Context;
use crate::model::plan::{Action, Change, NoteLevel, Plan, PlanCx, PlanError};
use crate::model::tunable::{Planner, Tunable};
use crate::model::verdict::{Area, Verdict};
use daqtune_probe::cpu::IdleState;
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
        artifacts: &[],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: crate::model::tunable::no_files,
    }),
};

/// The data cores and the enabled idle states on them deeper than the profile allows: the one
/// judgement the check reports and the plan disables.
struct Deep<'f> {
    data: CpuSet,
    /// (CPU, state) pairs to disable.
    states: Vec<(u32, &'f IdleState)>,
    /// Some data core exposes cpuidle states at all.
    seen_any: bool,
    /// `cpuidle` driver `none`: only the architecture's shallow idle instruction.
    no_driver: bool,
}

/// The data cores are the profile's (resolved on this host), else what the kernel isolated;
/// `Err` says why there are none.
fn deep_states<'f>(ctx: &'f Context) -> Result<Deep<'f>, crate::model::tunable::Unjudged> {
    let cpus = ctx.cpus()?;
    let data = match ctx.data_cores()? {
        Some(d) => d,
        None => match &cpus.isolated {
            Some(iso) if !iso.is_empty() => iso.clone(),
            _ => {
                return Err(crate::model::tunable::Unjudged::Nothing(
                    "no data cores: the profile names none and no CPU is isolated",
                ))
            }
        },
    };
    let max_lat = ctx.profile.profile.cpu.max_idle_latency_us;
    let mut states = Vec::new();
    let mut seen_any = false;
    for c in cpus.cpus.iter().filter(|c| data.contains(c.id)) {
        seen_any |= !c.idle_states.is_empty();
        for s in &c.idle_states {
            if s.latency_us.is_some_and(|l| l > max_lat) && s.disabled == Some(false) {
                states.push((c.id, s));
            }
        }
    }
    Ok(Deep {
        data,
        states,
        seen_any,
        no_driver: cpus.idle_driver.as_deref() == Some("none"),
    })
}

fn run_idle(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "cpu.idle";
    let d = match deep_states(ctx) {
        Ok(d) => d,
        Err(e) => return vec![Verdict::skip(ID, "host", e.to_string())],
    };
    let data = &d.data;
    if d.no_driver {
        return vec![Verdict::pass(
            ID,
            format!("cpu{data}"),
            "no cpuidle driver: CPUs only use the architecture's shallow idle instruction",
        )
        .observed("cpuidle driver none")];
    }
    let max_lat = ctx.profile.profile.cpu.max_idle_latency_us;
    let mut deep: BTreeMap<String, CpuSet> = BTreeMap::new();
    for (cpu, s) in &d.states {
        deep.entry(format!("{} ({} µs)", s.name, s.latency_us.unwrap_or(0)))
            .or_default()
            .insert(*cpu);
    }
    let subject = format!("cpu{data}");
    if !d.seen_any {
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
    let ctx = cx.context();
    let d = match deep_states(&ctx) {
        Ok(d) => d,
        Err(e) => {
            if !cx.opts.only.is_empty() {
                plan.note(ID, NoteLevel::Skip, e.to_string());
            }
            return Ok(());
        }
    };
    if d.no_driver {
        return Ok(());
    }
    let max = cx.lp.profile.cpu.max_idle_latency_us;
    for (cpu, s) in &d.states {
        let path = format!(
            "/sys/devices/system/cpu/cpu{cpu}/cpuidle/state{}/disable",
            s.index
        );
        plan.changes.push(Change {
            check: ID.into(),
            subject: format!("cpu{cpu} {}", s.name),
            action: Action::Attr {
                path,
                from: "0\n".to_string(),
                to: "1".into(),
                shared_count: false,
            },
            reboot: false,
            note: Some(format!(
                "exit latency {} µs > {max} µs",
                s.latency_us.unwrap_or(0)
            )),
        });
    }
    Ok(())
}
