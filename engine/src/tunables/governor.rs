//! `cpu.governor`: the cpufreq governor on every CPU, and the services that would change it.
//! Plan: the governor of each CPU now; persistent through `cpufreq.default_governor=` where
//! the kernel has it (5.9+) and daqtune writes the boot configuration, else a unit.

use crate::model::context::Context;
use crate::model::facts::Facts;
use crate::model::plan::{Action, Change, NoteLevel, Plan, PlanCx, PlanError};
use crate::model::tunable::{Planner, Tunable};
use crate::model::verdict::{Area, Verdict};
use daqtune_probe::system::ServiceState;
use daqtune_probe::CpuSet;
use daqtune_units::systemd;
use std::collections::BTreeMap;

pub const GOVERNOR: Tunable = Tunable {
    id: "cpu.governor",
    area: Area::Cpu,
    title: "CPU frequency governor on every online CPU",
    aliases: &["cpu-freq", "governor", "cpufreq"],
    doc: include_str!("../../../docs/checks/cpu.governor.md"),
    needs_root: false,
    profile_keys: &["cpu.governor"],
    check: run_governor,
    planner: Some(Planner {
        order: 1,
        with: &[],
        plan: plan_governor,
        artifacts: &[crate::model::tunable::Artifact {
            kind: "governor-unit",
            help: "systemd unit setting the CPU frequency governor at boot",
            render: |g| Ok(unit(g.exe()?, g.profile_ref).render()?),
        }],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: |_| vec![format!("/etc/systemd/system/{}", systemd::GOVERNOR_UNIT)],
    }),
};

fn run_governor(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "cpu.governor";
    let cpus = match ctx.cpus() {
        Ok(c) => c,
        Err(e) => return vec![Verdict::skip(ID, "host", e.to_string())],
    };
    let want = &ctx.profile.profile.cpu.governor;
    let mut by_gov: BTreeMap<Option<&str>, CpuSet> = BTreeMap::new();
    for c in &cpus.cpus {
        by_gov
            .entry(c.governor.as_deref())
            .or_default()
            .insert(c.id);
    }
    let total = cpus.cpus.len();
    let mut out = Vec::new();
    if by_gov.keys().all(|g| g.is_none()) {
        return vec![Verdict::skip(
            ID,
            format!("cpu{}", cpus.online),
            "no cpufreq driver: /sys/devices/system/cpu/cpu*/cpufreq is absent (a VM, or the frequency driver is not loaded), so the governor cannot be read or set",
        )];
    }
    let observed = by_gov
        .iter()
        .map(|(g, set)| format!("{} on {}", g.unwrap_or("no cpufreq"), set))
        .collect::<Vec<_>>()
        .join("; ");
    let off = judge(&cpus.cpus, want);
    let wrong: CpuSet = off.iter().map(|o| o.cpu.id).collect();
    let missing = by_gov.get(&None).cloned().unwrap_or_default();
    if wrong.is_empty() {
        let mut v = Verdict::pass(
            ID,
            format!("cpu{}", cpus.online),
            format!(
                "all {} CPUs with cpufreq run `{want}`",
                total - missing.len()
            ),
        );
        if !missing.is_empty() {
            v.message
                .push_str(&format!(" (CPUs {missing} expose no cpufreq)"));
        }
        out.push(v.observed(observed).expected(want));
    } else {
        let not_offered: Vec<u32> = off
            .iter()
            .filter(|o| !o.offered)
            .map(|o| o.cpu.id)
            .collect();
        let mut msg = format!(
            "{}/{} CPUs are not on `{want}`: {observed}",
            wrong.len(),
            total
        );
        if !not_offered.is_empty() {
            msg.push_str(&format!(
                "; the driver does not offer `{want}` on {}",
                CpuSet::from_iter(not_offered)
            ));
        }
        out.push(
            Verdict::fail(ID, format!("cpu{wrong}"), msg)
                .observed(observed)
                .expected(want)
                .fix(format!(
                    "sudo daqtune apply --only cpu.governor   (or: echo {want} | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor; persist with cpufreq.default_governor={want})"
                )),
        );
    }
    let fighters = ctx.governor_fighters();
    if !fighters.is_empty() {
        let names: Vec<String> = fighters.iter().map(|s| fighter(ctx.facts(), s)).collect();
        let units: Vec<&str> = fighters.iter().map(|s| s.name.as_str()).collect();
        out.push(
            Verdict::warn(
                ID,
                "services",
                format!(
                    "{} can change the governor behind daqtune's back",
                    names.join(", ")
                ),
            )
            .observed(names.join(", "))
            .fix(format!(
                "sudo systemctl disable --now {}",
                units
                    .iter()
                    .map(|u| daqtune_probe::text::shell_quote(u))
                    .collect::<Vec<_>>()
                    .join(" ")
            )),
        );
    }
    out
}

/// A CPU whose governor is not the profile's (CPUs without cpufreq have none to judge).
struct Off<'c> {
    cpu: &'c daqtune_probe::cpu::Cpu,
    /// The driver offers the wanted governor on it (or does not list what it offers).
    offered: bool,
}

/// The one judgement, which the check turns into a failure and the plan into writes: the
/// CPUs not on `want`, in CPU order.
fn judge<'c>(cpus: &'c [daqtune_probe::cpu::Cpu], want: &str) -> Vec<Off<'c>> {
    cpus.iter()
        .filter(|c| c.governor.as_deref().is_some_and(|g| g != want))
        .map(|c| Off {
            cpu: c,
            offered: c.available_governors.is_empty()
                || c.available_governors.iter().any(|g| g == want),
        })
        .collect()
}

/// A service that sets the governor too, as the check and the plan name it: its state, and
/// TuneD's active profile (`/etc/tuned/active_profile`), which is what applies its governor.
fn fighter(facts: &Facts, s: &ServiceState) -> String {
    let state = match (s.enabled, s.running) {
        (true, true) => "enabled, running",
        (true, false) => "enabled",
        _ => "running",
    };
    let profile = if s.name == "tuned.service" {
        facts
            .read_attr("/etc/tuned/active_profile")
            .ok()
            .filter(|p| !p.is_empty())
            .map(|p| format!(", profile `{p}` in /etc/tuned/active_profile"))
            .unwrap_or_default()
    } else {
        String::new()
    };
    format!("{} ({state}{profile})", s.name)
}

fn plan_governor(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    const ID: &str = "cpu.governor";
    let want = cx.lp.profile.cpu.governor.clone();
    // What the check warns about and apply leaves alone: say so in the plan.
    let fighters = cx.facts.governor_fighters();
    if !fighters.is_empty() {
        let names: Vec<String> = fighters.iter().map(|s| fighter(cx.facts, s)).collect();
        let units: Vec<&str> = fighters.iter().map(|f| f.name.as_str()).collect();
        plan.note(
            ID,
            NoteLevel::Warn,
            format!(
                "{} can change the governor behind daqtune's back (after daqtune's setting, and again at every boot); apply leaves them (sudo systemctl disable --now {})",
                names.join(", "),
                units.join(" ")
            ),
        );
    }
    if cx.opts.runtime {
        match cx.facts.cpus() {
            Err(e) => plan.note(ID, NoteLevel::Skip, e.to_string()),
            Ok(cpus) => {
                let with_freq: Vec<_> = cpus.cpus.iter().filter(|c| c.governor.is_some()).collect();
                if with_freq.is_empty() {
                    plan.note(ID, NoteLevel::Skip, "no cpufreq driver: /sys/devices/system/cpu/cpu*/cpufreq is absent (a VM, a container, or firmware-controlled frequency), so there is no governor to set");
                }
                for o in judge(&cpus.cpus, &want) {
                    let c = o.cpu;
                    let cur = c.governor.clone().unwrap_or_default();
                    if !o.offered {
                        plan.note(
                            ID,
                            NoteLevel::Skip,
                            format!(
                                "cpu{}: governor `{want}` is not offered (available: {})",
                                c.id,
                                c.available_governors.join(" ")
                            ),
                        );
                        continue;
                    }
                    let path = format!(
                        "/sys/devices/system/cpu/cpu{}/cpufreq/scaling_governor",
                        c.id
                    );
                    // The value the facts read (apply journals what is there when it writes).
                    let from = format!("{cur}\n");
                    plan.changes.push(Change {
                        check: ID.into(),
                        subject: format!("cpu{}", c.id),
                        action: Action::Attr {
                            path,
                            from,
                            to: want.clone(),
                            shared_count: false,
                        },
                        reboot: false,
                        note: None,
                    });
                }
            }
        }
    }
    if cx.opts.persist {
        let by_cmdline = want == "performance" && cx.cmdline_carries((5, 9));
        let path = format!("/etc/systemd/system/{}", systemd::GOVERNOR_UNIT);
        if !by_cmdline {
            if let Some(exe) = cx.unit_exe(plan, ID, &path) {
                let u = unit(&exe, &cx.profile_ref());
                let text = u.render()?;
                cx.file_change(plan, ID, &u.name, &path, text, 0o644, false);
                cx.enable(plan, ID, &u.name, "multi-user.target");
            }
        }
    }
    Ok(())
}

/// The boot-time unit of this setting: what the plan writes and `generate governor-unit` prints.
fn unit(exe: &str, profile_ref: &str) -> systemd::Oneshot {
    systemd::governor_unit(exe, profile_ref)
}
