//! `cpu.governor` and `cpu.idle`.

use super::{CheckDef, Context};
use crate::verdict::{Area, Verdict};
use daqtune_probe::CpuSet;
use std::collections::BTreeMap;

pub const GOVERNOR: CheckDef = CheckDef {
    id: "cpu.governor",
    area: Area::Cpu,
    title: "CPU frequency governor on every online CPU",
    aliases: &["cpu-freq", "governor", "cpufreq"],
    doc: include_str!("../../../docs/checks/cpu.governor.md"),
    needs_root: false,
    run: run_governor,
};

pub const IDLE: CheckDef = CheckDef {
    id: "cpu.idle",
    area: Area::Cpu,
    title: "Deep C-states on the data cores",
    aliases: &["cstates", "idle"],
    doc: include_str!("../../../docs/checks/cpu.idle.md"),
    needs_root: false,
    run: run_idle,
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
    let wrong: CpuSet = by_gov
        .iter()
        .filter(|(g, _)| g.is_some_and(|g| g != want))
        .fold(CpuSet::new(), |acc, (_, s)| acc.union(s));
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
        let not_offered: Vec<u32> = cpus
            .cpus
            .iter()
            .filter(|c| {
                wrong.contains(c.id)
                    && !c.available_governors.is_empty()
                    && !c.available_governors.iter().any(|g| g == want)
            })
            .map(|c| c.id)
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
        let names: Vec<String> = fighters
            .iter()
            .map(|s| {
                format!(
                    "{} ({})",
                    s.name,
                    match (s.enabled, s.running) {
                        (true, true) => "enabled, running",
                        (true, false) => "enabled",
                        _ => "running",
                    }
                )
            })
            .collect();
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
            .fix(format!("sudo systemctl disable --now {}", units.join(" "))),
        );
    }
    out
}

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
