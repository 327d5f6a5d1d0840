//! `gpu.health` and `gpu.xid`: is each GPU healthy enough to run an experiment on?
//! `gpu.health` judges what NVML reports (`GpuFacts::health`): temperature against its
//! slowdown threshold, active thermal and power slowdowns, uncorrectable ECC errors, memory
//! repairs waiting for a reset (row remapping, page retirement). `gpu.xid` judges the Xid
//! events the driver logged since boot (the kernel log). Two checks because they read two
//! sources: an `nvidia-smi -q` capture holds the first and not the second, and a check runs
//! only where its sources are (engine/src/model/capture.rs). Nothing here is set by daqtune, so
//! neither check plans anything.

use crate::model::context::gpus::{gpus_or_skip, why_missing};
use crate::model::context::Context;
use crate::model::tunable::Tunable;
use crate::model::verdict::{Area, Verdict};
use daqtune_probe::gpu::xid::{parse_xid_events, XidEvent};
use daqtune_probe::gpu::GpuFacts;
use daqtune_probe::text::shell_quote;

pub const HEALTH: Tunable = Tunable {
    id: "gpu.health",
    area: Area::Gpu,
    title: "GPU health: temperature, slowdowns, ECC, memory repairs (NVML)",
    aliases: &["gpu-health"],
    doc: include_str!("../../../docs/checks/gpu.health.md"),
    needs_root: false,
    profile_keys: &[],
    check: run,
    planner: None,
};

pub const XID: Tunable = Tunable {
    id: "gpu.xid",
    area: Area::Gpu,
    title: "NVIDIA Xid events of each GPU since boot (kernel log)",
    aliases: &["xid"],
    doc: include_str!("../../../docs/checks/gpu.xid.md"),
    // /dev/kmsg is root's on most hosts.
    needs_root: true,
    profile_keys: &[],
    check: run_xid,
    planner: None,
};

const XID_ID: &str = "gpu.xid";

const ID: &str = "gpu.health";

/// Within this many degrees of the slowdown threshold a GPU under load reaches it: warn.
pub const NEAR_SLOWDOWN_C: u32 = 5;

/// NVML clock event reasons that mean the GPU slows itself for heat or power.
const SLOWDOWNS: &[(u64, &str)] = &[
    (0x8, "HW slowdown"),
    (0x20, "SW thermal slowdown"),
    (0x40, "HW thermal slowdown"),
    (0x80, "HW power brake"),
];
const SW_POWER_CAP: u64 = 0x4;

/// How an Xid is judged. The meanings and the split follow NVIDIA's Xid catalog
/// (docs/checks/gpu.health.md lists the sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XidGrade {
    /// The GPU needs a reset, a reboot or service before it can be trusted.
    Fail,
    /// An application fault or a recoverable event: worth knowing before an experiment.
    Warn,
}

/// Xid codes daqtune names, with NVIDIA's meaning.
pub const XIDS: &[(u32, XidGrade, &str)] = &[
    (
        13,
        XidGrade::Warn,
        "graphics engine exception (usually the application)",
    ),
    (
        31,
        XidGrade::Warn,
        "GPU memory page fault (usually the application)",
    ),
    (
        43,
        XidGrade::Warn,
        "GPU stopped processing (an application fault)",
    ),
    (
        45,
        XidGrade::Warn,
        "preemptive cleanup after an earlier error",
    ),
    (48, XidGrade::Fail, "double-bit (uncorrectable) ECC error"),
    (61, XidGrade::Fail, "internal micro-controller breakpoint"),
    (62, XidGrade::Fail, "internal micro-controller halt"),
    (
        63,
        XidGrade::Fail,
        "ECC page retirement or row remap recorded: reset the GPU to activate it",
    ),
    (
        64,
        XidGrade::Fail,
        "ECC page retirement or row remap failed",
    ),
    (74, XidGrade::Fail, "NVLink error"),
    (79, XidGrade::Fail, "GPU has fallen off the bus"),
    (92, XidGrade::Warn, "high single-bit ECC error rate"),
    (
        94,
        XidGrade::Warn,
        "contained ECC error (the application that met it was stopped)",
    ),
    (
        95,
        XidGrade::Fail,
        "uncontained ECC error: every application on the GPU is affected",
    ),
    (119, XidGrade::Fail, "GSP RPC timeout"),
    (120, XidGrade::Fail, "GSP error"),
    (140, XidGrade::Fail, "unrecovered ECC error"),
    (
        154,
        XidGrade::Fail,
        "the driver asks for a recovery action (reset or reboot)",
    ),
];

/// The grade and meaning of `code`; unknown codes warn with a pointer to the catalog.
pub fn xid_grade(code: u32) -> (XidGrade, &'static str) {
    XIDS.iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, g, m)| (*g, *m))
        .unwrap_or((
            XidGrade::Warn,
            "not in daqtune's table: see NVIDIA's Xid catalog",
        ))
}

fn run(ctx: &Context) -> Vec<Verdict> {
    let snap = match gpus_or_skip(ctx, ID) {
        Ok(s) => s,
        Err(v) => return v,
    };
    snap.gpus.iter().map(judge).collect()
}

fn run_xid(ctx: &Context) -> Vec<Verdict> {
    let snap = match gpus_or_skip(ctx, XID_ID) {
        Ok(s) => s,
        Err(v) => return v,
    };
    let Some(log) = ctx.kernel_log() else {
        let why = if ctx.facts().host.is_live() {
            "the kernel log could not be read (run as root)"
        } else {
            "this host root holds no kernel log (daqtune/kmsg.txt)"
        };
        return vec![Verdict::skip(XID_ID, "host", why)];
    };
    let events = parse_xid_events(log);
    snap.gpus.iter().map(|g| judge_xids(g, &events)).collect()
}

/// The Xid codes logged for the GPU at `bus` (`0000:2b:00.0`), each once with how often, in
/// code order: what `gpu.xid` judges and `daqtune gpu` shows.
pub fn xid_counts(events: &[XidEvent], bus: &str) -> Vec<(u32, usize)> {
    let mut counts: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
    for e in events.iter().filter(|e| e.is_for(bus)) {
        *counts.entry(e.code).or_insert(0) += 1;
    }
    counts.into_iter().collect()
}

/// One GPU's Xid verdict: each code once, with its count and NVIDIA's meaning.
pub fn judge_xids(g: &GpuFacts, events: &[XidEvent]) -> Verdict {
    let Some(bus) = &g.pci_bus_id else {
        return Verdict::na(
            XID_ID,
            g.subject(),
            format!(
                "{} has no PCI address, which Xid lines name GPUs by",
                g.display_name()
            ),
        );
    };
    let counts = xid_counts(events, bus);
    let codes: Vec<u32> = counts.iter().map(|(c, _)| *c).collect();
    let (mut fails, mut warns) = (Vec::new(), Vec::new());
    for (c, n) in &counts {
        let (grade, meaning) = xid_grade(*c);
        let line = format!("Xid {c} x{n} since boot: {meaning}");
        match grade {
            XidGrade::Fail => fails.push(line),
            XidGrade::Warn => warns.push(line),
        }
    }
    let observed = if codes.is_empty() {
        "none".to_string()
    } else {
        codes
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    let fix = "read the Xid lines (`journalctl -k -g Xid`) and NVIDIA's Xid catalog for the action each needs; a GPU that fell off the bus or needs a reset: stop its clients and reset it, or reboot";
    let v = if !fails.is_empty() {
        fails.extend(warns);
        Verdict::fail(
            XID_ID,
            g.subject(),
            format!("{}: {}", g.display_name(), fails.join("; ")),
        )
        .fix(fix)
    } else if !warns.is_empty() {
        Verdict::warn(
            XID_ID,
            g.subject(),
            format!("{}: {}", g.display_name(), warns.join("; ")),
        )
        .fix(fix)
    } else {
        Verdict::pass(
            XID_ID,
            g.subject(),
            format!("{}: no Xid since boot", g.display_name()),
        )
    };
    v.observed(observed)
        .expected("no Xid that needs a reset or service")
}

/// One GPU's health verdict from NVML's readings.
pub fn judge(g: &GpuFacts) -> Verdict {
    let h = &g.health;
    let mut fails: Vec<String> = Vec::new();
    let mut warns: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut fixes: Vec<String> = Vec::new();
    let target = shell_quote(g.pci_bus_id.as_deref().unwrap_or(&g.uuid));

    match (h.temperature_c, h.slowdown_temp_c) {
        (Some(t), Some(s)) if t >= s => {
            fails.push(format!("{t} C, at or above its {s} C slowdown threshold"));
            fixes.push(
                "improve the GPU's cooling (airflow, fan curve, chassis) before the run".into(),
            );
        }
        (Some(t), Some(s)) if s - t <= NEAR_SLOWDOWN_C => {
            warns.push(format!(
                "{t} C, within {NEAR_SLOWDOWN_C} C of its {s} C slowdown threshold"
            ));
        }
        (Some(t), Some(s)) => notes.push(format!("{t} C (slowdown {s} C)")),
        (Some(t), None) => notes.push(format!("{t} C")),
        _ => {}
    }

    let reasons = g.clock_event_reasons.unwrap_or(0);
    let active: Vec<&str> = SLOWDOWNS
        .iter()
        .filter(|(bit, _)| reasons & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    if !active.is_empty() {
        fails.push(format!("slowing its clocks now: {}", active.join(", ")));
        fixes.push("find the heat or power limit that trips it (`daqtune gpu` shows temperature and power; check the PSU cables and cooling)".into());
    }
    if reasons & SW_POWER_CAP != 0 {
        warns.push("held at its software power cap".into());
    }
    match (h.power_draw_mw, h.power_limit_mw) {
        (Some(p), Some(l)) => notes.push(format!("{} W of {} W", p / 1000, l / 1000)),
        (Some(p), None) => notes.push(format!("{} W", p / 1000)),
        _ => {}
    }

    if let Some(n) = h.ecc_volatile_uncorrected.filter(|n| *n > 0) {
        fails.push(format!(
            "{n} uncorrectable ECC error(s) since the driver loaded"
        ));
        fixes.push(format!(
            "stop the GPU's clients and reset it (`sudo nvidia-smi -r -i {target}`) or reboot; if errors return, the GPU needs service"
        ));
    } else if let Some(n) = h.ecc_aggregate_uncorrected.filter(|n| *n > 0) {
        warns.push(format!(
            "{n} uncorrectable ECC error(s) over the GPU's life (none since the driver loaded)"
        ));
    }
    if let Some(false) = h.ecc_enabled {
        notes.push("ECC off".into());
    }
    if let Some(r) = h.remapped_rows {
        if r.failure {
            fails.push(
                "a row remap failed: the GPU's memory cannot be repaired in the field".into(),
            );
            fixes.push(
                "the GPU needs service (NVIDIA: a remapping failure is an RMA condition)".into(),
            );
        }
        if r.pending {
            fails.push(
                "a row remap waits for a GPU reset; until then the bad row stays in use".into(),
            );
            fixes.push(format!(
                "stop the GPU's clients and reset it (`sudo nvidia-smi -r -i {target}`) or reboot"
            ));
        }
        if r.correctable + r.uncorrectable > 0 {
            notes.push(format!(
                "{} row(s) remapped ({} for uncorrectable errors)",
                r.correctable + r.uncorrectable,
                r.uncorrectable
            ));
        }
    }
    if h.retired_pages_pending == Some(true) {
        fails.push("a page retirement waits for the driver to reload".into());
        fixes.push("reboot (or reload the nvidia modules) to retire the page".into());
    }
    if let (Some(s), Some(d)) = (h.retired_pages_sbe, h.retired_pages_dbe) {
        if s + d > 0 {
            notes.push(format!(
                "{} page(s) retired ({d} for double-bit errors)",
                s + d
            ));
        }
    }

    let observed = observed(g);
    // A pass needs the health readings themselves: clock reasons alone (all that facts
    // recorded before daqtune read GPU health hold) say nothing of ECC or memory repairs.
    let readings = [
        h.temperature_c.is_some(),
        h.ecc_volatile_uncorrected.is_some(),
        h.remapped_rows.is_some(),
        h.retired_pages_pending.is_some(),
    ];
    if fails.is_empty() && warns.is_empty() && !readings.iter().any(|r| *r) {
        let why = if g.unavailable.keys().any(|k| k.starts_with("health.")) {
            format!(
                "NVML reports none of them{}",
                why_missing(g, "health.temperature")
            )
        } else {
            "these GPU facts were recorded before daqtune read GPU health".to_string()
        };
        return Verdict::skip(
            ID,
            g.subject(),
            format!(
                "no temperature, ECC or memory-repair reading for {}: {why}",
                g.display_name()
            ),
        );
    }
    let tail = if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join("; "))
    };
    let v = if !fails.is_empty() {
        let mut all = fails;
        all.extend(warns);
        Verdict::fail(
            ID,
            g.subject(),
            format!("{}: {}{tail}", g.display_name(), all.join("; ")),
        )
    } else if !warns.is_empty() {
        Verdict::warn(
            ID,
            g.subject(),
            format!("{}: {}{tail}", g.display_name(), warns.join("; ")),
        )
    } else {
        let mut ok = vec!["no slowdown"];
        if h.ecc_volatile_uncorrected.is_some() {
            ok.push("no uncorrectable ECC error since the driver loaded");
        }
        if h.remapped_rows.is_some() || h.retired_pages_pending.is_some() {
            ok.push("no memory repair pending");
        }
        Verdict::pass(
            ID,
            g.subject(),
            format!("{}: {}{tail}", g.display_name(), ok.join(", ")),
        )
    };
    let v = v
        .observed(observed)
        .expected("no slowdown, no uncorrectable ECC, no pending repair");
    if fixes.is_empty() {
        v
    } else {
        v.fix(fixes.join("; then "))
    }
}

/// The stable part of the readings (temperature and power move with every read and stay out
/// of `observed`, which `diff` compares).
fn observed(g: &GpuFacts) -> String {
    let h = &g.health;
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |n| n.to_string());
    let yn = |v: Option<bool>| match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    };
    format!(
        "ecc_uncorrected_volatile={} ecc_uncorrected_aggregate={} remap_pending={} remap_failure={} retire_pending={}",
        opt(h.ecc_volatile_uncorrected),
        opt(h.ecc_aggregate_uncorrected),
        yn(h.remapped_rows.map(|r| r.pending)),
        yn(h.remapped_rows.map(|r| r.failure)),
        yn(h.retired_pages_pending),
    )
}
