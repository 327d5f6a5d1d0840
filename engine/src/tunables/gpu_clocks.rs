//! `gpu.clocks`: the SM and memory clocks held at their maximum, and persistence mode. Plan:
//! NVML locks and persistence now (this module's setter hooks, through `GpuSetters`), and a
//! unit that locks them again at boot. Under a host root the recorded facts stand in for NVML.

use crate::hostio::gpu::{judge_domain, Held};
use crate::hostio::gpu::{GpuDomain, GpuSetters};
use crate::hostio::journal::{Entry, Journal};
use crate::hostio::setters::{Done, Target, Writer};
use crate::model::context::gpus::{gpus_or_skip, integrated, why_missing};
use crate::model::context::Context;
use crate::model::plan::{
    Action, ActionKind, Change, NoteLevel, Plan, PlanCx, PlanError, SetCx, SetError,
};
use crate::model::tunable::{Planner, Tunable};
use crate::model::verdict::{Area, Verdict};
use daqtune_probe::gpu::{decode_event_reasons, DomainClocks, GpuFacts};
use daqtune_units::systemd;

const ID: &str = "gpu.clocks";

pub const CLOCKS: Tunable = Tunable {
    id: ID,
    area: Area::Gpu,
    title: "GPU SM and memory clocks held at their maximum; persistence mode",
    aliases: &["gpu-clock", "gpu-clocks", "clocks"],
    doc: include_str!("../../../docs/checks/gpu.clocks.md"),
    needs_root: false,
    profile_keys: &[
        "gpu.lock_sm_clock",
        "gpu.lock_memory_clock",
        "gpu.persistence",
        "gpu.clock_tolerance_mhz",
    ],
    check: run_clocks,
    planner: Some(Planner {
        order: 8,
        with: &[],
        plan: plan_gpu_clocks,
        artifacts: &[crate::model::tunable::Artifact {
            kind: "gpu-clocks-unit",
            help: "systemd unit locking the GPU clocks at boot",
            render: |g| Ok(unit(g.exe()?, g.profile_ref).render()?),
        }],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: |_| vec![format!("/etc/systemd/system/{}", systemd::GPU_CLOCKS_UNIT)],
    }),
};

fn clock_verdict(ctx: &Context, g: &GpuFacts, d: GpuDomain, note: &str) -> Verdict {
    let tol = ctx.profile.profile.gpu.clock_tolerance_mhz;
    let domain = d.as_str();
    let c: &DomainClocks = crate::hostio::gpu::clocks(g, d);
    // The subject ends in the domain; messages start with "clock ..." so that the line reads
    // "GPU-... SM clock held", not "SM SM clock held".
    let subject = format!("{} {domain}", g.subject());
    let key = match d {
        GpuDomain::Sm => "sm_clock",
        GpuDomain::Memory => "memory_clock",
    };
    let Some(target) = c.max_mhz.filter(|m| *m > 0) else {
        return Verdict::skip(
            ID,
            subject,
            format!(
                "NVML reports no maximum {domain} clock{}",
                why_missing(g, &format!("{key}.max"))
            ),
        );
    };
    let range = match (c.pstate_min_mhz, c.pstate_max_mhz) {
        (Some(a), Some(b)) => format!(", P-state range {a}-{b} MHz"),
        _ => String::new(),
    };
    let pstate = g.pstate.map(|p| format!(" P{p}")).unwrap_or_default();
    let reasons = g
        .clock_event_reasons
        .map(|r| {
            let names = decode_event_reasons(r);
            if names.is_empty() {
                String::new()
            } else {
                format!(", clock events: {}", names.join(","))
            }
        })
        .unwrap_or_default();
    let util = g
        .utilization_pct
        .map(|u| format!(", {u}% busy"))
        .unwrap_or_default();
    let observed = format!(
        "{}{pstate}{range}{util}{reasons}",
        c.current_mhz
            .map(|v| format!("{v} MHz"))
            .unwrap_or_else(|| "current clock unknown".into())
    );
    let expected = format!("held at {target} MHz (tolerance {tol} MHz)");
    let flag = match d {
        GpuDomain::Sm => "lgc",
        GpuDomain::Memory => "lmc",
    };
    let fix = format!(
        "sudo daqtune apply --only gpu.clocks   (or: sudo nvidia-smi -i {} -{flag} {target},{target}; it lasts until reboot or driver reload)",
        daqtune_probe::text::shell_quote(&g.uuid)
    );
    // A lock daqtune's own apply made (journal) settles what NVML's readings leave open, and
    // turns a dropped clock into "the lock was lost".
    let journal = journal_lock(ctx, &g.uuid, domain);
    let by_us = journal
        .as_ref()
        .map(|run| format!(" (locked by daqtune apply run {run})"))
        .unwrap_or_default();
    let v = match judge_domain(g, d, target, tol) {
        Held::Floor { floor } => Verdict::pass(
            ID,
            subject,
            format!("clock held: the P-state floor is {floor} MHz for a {target} MHz maximum{by_us}{note}"),
        ),
        Held::IdleAtMax { current } => Verdict::pass(
            ID,
            subject,
            format!("clock held: the GPU is idle yet runs at {current} MHz of {target}{by_us}{note}"),
        ),
        Held::Dropped { current } => {
            let lost = journal
                .as_ref()
                .map(|run| format!("; daqtune locked it in apply run {run}, so the lock was lost since (driver reload or reboot: enable the gpu-clocks unit)"))
                .unwrap_or_default();
            Verdict::fail(
                ID,
                subject,
                format!("clock not held: the idle GPU dropped to {current} MHz of {target} MHz, so the first packets after a pause meet a slow GPU{lost}{note}"),
            )
            .fix(fix)
        }
        // Where NVML cannot tell, a lock of daqtune's vouches for the domain: `lock_needed`,
        // the plan's judgement (over the same `judge_domain`, as apply's GPU state carries it).
        Held::Unknown { why } => match journal.as_ref().filter(|_| {
            !lock_needed(crate::hostio::gpu::held(g, d, tol), journal.is_some())
        }) {
            Some(run) => Verdict::pass(
                ID,
                subject,
                format!("clock locked at its maximum by daqtune apply run {run} (journal); NVML's readings cannot confirm it now: {why}{note}"),
            ),
            None => Verdict::skip(
                ID,
                subject,
                format!("cannot tell whether the {domain} clock is held: {why}; run the check again while the GPU is idle{note}"),
            ),
        },
    };
    v.observed(observed).expected(expected)
}

/// The clock event reasons that mean the GPU runs below the clocks asked of it, NVML's
/// words (nvml.h, nvmlClocksEventReasons), and whether each is a failure. The three hardware
/// reasons cut the core clocks "by a factor of 2 or more" (over temperature, an external
/// power-brake assertion, power draw over Fast Trigger protection): no clock lock holds
/// against them and the cause is cooling or power, so they fail. The two software reasons trim
/// the clocks to stay under the power limit or the maximum operating temperatures, by steps:
/// the data path is slower but runs, so they warn. HW slowdown alone warns too: NVML says it
/// "may be also reported during PState or clock change", so one reading cannot tell a fault
/// from a transition. GPU idle, applications-clocks, sync-boost and display-clock settings
/// are not slowdowns.
const SLOWDOWNS: &[(u64, &str, &str, bool)] = &[
    (0x40, "hw_thermal_slowdown", "HW thermal slowdown: the GPU is too hot, core clocks cut by 2x or more", true),
    (0x80, "hw_power_brake_slowdown", "HW power brake: an external power-brake assertion (e.g. the power supply) cuts core clocks by 2x or more", true),
    (0x8, "hw_slowdown", "HW slowdown: core clocks cut by 2x or more (temperature, power brake or power draw over the Fast Trigger limit; NVML also reports it during a P-state or clock change)", false),
    (0x20, "sw_thermal_slowdown", "SW thermal slowdown: clocks lowered to keep the GPU or its memory below their maximum operating temperature", false),
    (0x4, "sw_power_cap", "SW power cap: the power-scaling algorithm holds the clocks below those requested to stay under the power limit", false),
];

/// A `gpu.clocks` verdict naming the active slowdown reasons, or `None` when NVML reports
/// none (or was not read: the clock verdicts already say what is unknown).
fn slowdown_verdict(g: &GpuFacts) -> Option<Verdict> {
    let mask = g.clock_event_reasons?;
    let active: Vec<&(u64, &str, &str, bool)> = SLOWDOWNS
        .iter()
        .filter(|(bit, ..)| mask & bit != 0)
        .collect();
    if active.is_empty() {
        return None;
    }
    // HW slowdown is the umbrella bit of the thermal and power-brake reasons: it fails when
    // either of them is set with it, and only warns on its own.
    let hard = active.iter().any(|(.., fail)| *fail);
    let names: Vec<&str> = active.iter().map(|(_, n, ..)| *n).collect();
    let words: Vec<&str> = active.iter().map(|(_, _, w, _)| *w).collect();
    let subject = format!("{} clock events", g.subject());
    let msg = format!(
        "{} runs below its clocks: {} (NVML clock event reasons {mask:#x})",
        g.display_name(),
        words.join("; ")
    );
    let fix = if hard {
        "hardware: check the GPU's cooling (airflow, fan, chassis temperature: `nvidia-smi -q -d TEMPERATURE,PERFORMANCE`) and its power feed (PSU, power cables, the platform's power-brake signal); a clock lock cannot hold against a hardware slowdown"
    } else {
        "check `nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE` under the workload: raise the power limit (`nvidia-smi -pl`) within the board's range or improve cooling; read again if it was a P-state change"
    };
    let v = if hard {
        Verdict::fail(ID, subject, msg)
    } else {
        Verdict::warn(ID, subject, msg)
    };
    Some(
        v.observed(names.join(","))
            .expected("no thermal, power or hardware slowdown")
            .fix(fix),
    )
}

fn run_clocks(ctx: &Context) -> Vec<Verdict> {
    let snap = match gpus_or_skip(ctx, ID) {
        Ok(s) => s,
        Err(v) => return v,
    };
    let p = &ctx.profile.profile.gpu;
    let mut out = Vec::new();
    for g in &snap.gpus {
        if g.nvml_index.is_none() {
            out.push(Verdict::skip(
                ID,
                g.subject(),
                format!(
                    "NVML does not manage this GPU ({}), so its clocks cannot be read{}",
                    g.display_name(),
                    snap.nvml
                        .reason()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
            ));
            continue;
        }
        let no_mem_domain = g.memory_clock_domain == Some(false);
        let note = if no_mem_domain {
            " (no separate memory clock domain: SM only)"
        } else {
            ""
        };
        if p.lock_sm_clock {
            out.push(clock_verdict(ctx, g, GpuDomain::Sm, note));
        }
        if let Some(v) = slowdown_verdict(g) {
            out.push(v);
        }
        if p.lock_memory_clock && !no_mem_domain {
            out.push(clock_verdict(ctx, g, GpuDomain::Memory, ""));
        }
        if p.persistence {
            out.push(persistence_verdict(ctx, g));
        }
    }
    if out.is_empty() {
        out.push(Verdict::pass(
            ID,
            "host",
            "the profile asks for no clock lock and no persistence mode",
        ));
    }
    out
}

fn persistence_verdict(ctx: &Context, g: &GpuFacts) -> Verdict {
    let subject = format!("{} persistence", g.subject());
    let daemon = persistence_daemon(ctx);
    match (g.persistence_mode, persistence_missing(g.persistence_mode, daemon)) {
        (Some(true), _) => Verdict::pass(ID, subject, "persistence mode is on: the driver keeps the GPU initialised (and its clock locks) with no client").observed("enabled").expected("enabled"),
        (Some(false), false) => Verdict::pass(ID, subject, "nvidia-persistenced is running and keeps the GPU initialised").observed("disabled, nvidia-persistenced running").expected("enabled"),
        (Some(false), true) => Verdict::fail(
            ID,
            subject,
            "persistence mode is off and nvidia-persistenced is not running: the driver tears the GPU down when the last client exits, dropping clock locks and adding hundreds of ms to the next start",
        )
        .observed("disabled")
        .expected("enabled")
        .fix(format!(
            "sudo daqtune apply --only gpu.clocks   (or: sudo systemctl enable --now nvidia-persistenced, or sudo nvidia-smi -i {} -pm 1)",
            daqtune_probe::text::shell_quote(&g.uuid)
        )),
        (None, _) if integrated(g) => Verdict::na(
            ID,
            subject,
            format!(
                "persistence mode is not reported on this integrated GPU{}; clock locks still hold for the driver session (seed 000, Spark)",
                why_missing(g, "persistence_mode")
            ),
        ),
        (None, _) => Verdict::skip(
            ID,
            subject,
            format!("NVML does not report persistence mode{}", why_missing(g, "persistence_mode")),
        ),
    }
}

/// The one persistence judgement, which the check turns into a failure (where NVML reports
/// the mode off; a mode it does not report is n/a or skipped there) and the plan into
/// `GpuPersistence`: nothing keeps the GPU initialised, neither the driver's persistence
/// mode nor nvidia-persistenced.
fn persistence_missing(mode: Option<bool>, daemon: bool) -> bool {
    mode != Some(true) && !daemon
}

/// Whether a domain must be locked: it is not held, or whether it is cannot be told and no
/// lock of daqtune's (the journal, this boot) vouches for it. The check passes exactly when
/// this is false: held (`Held::Floor`, `Held::IdleAtMax`), or unknown with the journal.
fn lock_needed(held: Option<bool>, by_journal: bool) -> bool {
    match held {
        Some(h) => !h,
        None => !by_journal,
    }
}

/// The run of daqtune's journal that locked this domain, if one did (and the boot since has
/// not dropped it).
fn journal_lock(facts: &crate::model::facts::Facts, uuid: &str, domain: &str) -> Option<String> {
    facts
        .applied_gpu_locks()
        .iter()
        .rev()
        .find(|(u, d, _)| u == uuid && d.as_str() == domain)
        .map(|(_, _, run)| run.clone())
}

fn by_journal(facts: &crate::model::facts::Facts, uuid: &str, d: GpuDomain) -> bool {
    journal_lock(facts, uuid, d.as_str()).is_some()
}

/// nvidia-persistenced keeps the GPUs initialised, which is what persistence mode is for.
fn persistence_daemon(facts: &crate::model::facts::Facts) -> bool {
    facts
        .processes()
        .iter()
        .any(|p| p == "nvidia-persistenced" || p == "nvidia-persiste")
}

/// Where a host root keeps its recorded GPU facts (the root's stand-in for NVML state).
pub const GPU_JSON: &str = daqtune_probe::gpu::FACTS_PATH;

fn plan_gpu_clocks(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    let g = &cx.lp.profile.gpu;
    if !(g.lock_sm_clock || g.lock_memory_clock || g.persistence) {
        return Ok(());
    }
    // Without a GPU to control nothing is planned, the boot unit included (the note says why).
    let Ok(control) = gpu_control(cx, plan) else {
        return Ok(());
    };
    if cx.opts.runtime {
        let ops = gpu_ops(cx, &control.gpus, control.recorded.as_ref());
        match (&control.recorded, &control.mock) {
            (Some(snap), Some(m)) => record_on_root(cx, plan, snap, m, &ops),
            _ => {
                for (subject, action, note) in ops {
                    plan.changes.push(Change {
                        check: ID.into(),
                        subject,
                        action: Action::owned(action),
                        reboot: false,
                        note,
                    });
                }
            }
        }
    }
    if cx.opts.persist {
        plan_unit(cx, plan)?;
    }
    Ok(())
}

/// The plan of gpu.clocks stops here; its note says why.
struct Stop;

/// One GPU operation of the plan: its subject, the action, and what the plan says of it.
type GpuOp = (String, GpuAction, Option<String>);

type MockSetters = crate::hostio::gpu::NvmlSetters<daqtune_probe::gpu::control::MockNvml>;

/// The run's GPU control and the GPUs it shows.
struct Control {
    /// A host root's recorded facts, when they stand in for NVML.
    recorded: Option<daqtune_probe::gpu::GpuSnapshot>,
    /// The mock of those facts the plan makes its changes on.
    mock: Option<MockSetters>,
    gpus: Vec<crate::hostio::gpu::GpuState>,
}

/// The GPU control of this run: the live NVML or a test's mock, else (a host root) a mock of
/// the root's recorded facts, whose file the plan then rewrites; and the GPUs it shows.
fn gpu_control(cx: &PlanCx, plan: &mut Plan) -> Result<Control, Stop> {
    let tol = cx.lp.profile.gpu.clock_tolerance_mhz;
    let recorded = recorded_facts(cx, plan)?;
    let mock = recorded.as_ref().map(|snap| {
        crate::hostio::gpu::NvmlSetters::new(
            daqtune_probe::gpu::control::MockNvml::new(snap.gpus.clone()),
            tol,
            &snap.gpus,
        )
    });
    let setters: &dyn GpuSetters = match (&mock, cx.gpu) {
        (Some(m), _) => m,
        (None, Some(s)) => s,
        (None, None) => {
            if !cx.opts.only.is_empty() || cx.opts.gpu_unavailable.is_some() {
                let why = cx
                    .opts
                    .gpu_unavailable
                    .clone()
                    .unwrap_or_else(|| "no GPU control in this run".into());
                plan.note(ID, NoteLevel::Skip, why);
            }
            return Err(Stop);
        }
    };
    let gpus = match setters.gpus() {
        Ok(g) => g,
        Err(e) => {
            plan.note(ID, NoteLevel::Skip, e.to_string());
            return Err(Stop);
        }
    };
    if gpus.is_empty() {
        if !cx.opts.only.is_empty() {
            plan.note(ID, NoteLevel::Skip, "no NVIDIA GPU");
        }
        return Err(Stop);
    }
    Ok(Control {
        recorded,
        mock,
        gpus,
    })
}

/// A host root stands in for NVML with its recorded facts (daqtune/gpu.json): the locks are
/// made on a mock of those facts and the file is rewritten, so the next check reads them;
/// revert restores the file. Explicit GPU control (the live NVML, or a test's mock) wins over
/// recorded facts: `None` then.
fn recorded_facts(
    cx: &PlanCx,
    plan: &mut Plan,
) -> Result<Option<daqtune_probe::gpu::GpuSnapshot>, Stop> {
    if cx.target != Target::Root || cx.gpu.is_some() {
        return Ok(None);
    }
    let Ok(text) = cx.facts.read_string(GPU_JSON) else {
        if !cx.opts.only.is_empty() {
            plan.note(
                ID,
                NoteLevel::Skip,
                format!("this root has no recorded GPU facts ({GPU_JSON})"),
            );
        }
        return Err(Stop);
    };
    match daqtune_probe::gpu::GpuSnapshot::from_json(&text) {
        Ok(snap) => Ok(Some(snap)),
        Err(e) => {
            plan.note(ID, NoteLevel::Skip, format!("{GPU_JSON}: {e}"));
            Err(Stop)
        }
    }
}

/// What each GPU needs, by the judgement of the check: a GPU NVML does not manage is skipped
/// there, and left alone here; with nvidia-persistenced running, persistence passes there,
/// and is nothing to set here. (A mode NVML does not report, n/a on an integrated GPU, is set:
/// where NVML takes it, the check then passes.)
fn gpu_ops(
    cx: &PlanCx,
    gpus: &[crate::hostio::gpu::GpuState],
    recorded: Option<&daqtune_probe::gpu::GpuSnapshot>,
) -> Vec<GpuOp> {
    let g = &cx.lp.profile.gpu;
    let facts = cx.facts.gpus().ok();
    let unmanaged = |uuid: &str| {
        facts.is_some_and(|f| {
            f.gpus
                .iter()
                .any(|x| x.uuid == uuid && x.nvml_index.is_none())
        })
    };
    let daemon = persistence_daemon(cx.facts);
    let mut ops: Vec<GpuOp> = Vec::new();
    for s in gpus.iter().filter(|s| !unmanaged(&s.uuid)) {
        let subject = format!("{} {}", s.name, s.uuid);
        if g.persistence && persistence_missing(s.persistence, daemon) {
            ops.push((
                subject.clone(),
                GpuAction::PersistenceOn {
                    uuid: s.uuid.clone(),
                },
                None,
            ));
        }
        let lock = |d: GpuDomain, held: Option<bool>| -> GpuOp {
            (
                subject.clone(),
                GpuAction::LockMax {
                    uuid: s.uuid.clone(),
                    domain: d,
                },
                lock_note(recorded, &s.uuid, d, held, g.clock_tolerance_mhz),
            )
        };
        if g.lock_sm_clock && lock_needed(s.sm_held, by_journal(cx.facts, &s.uuid, GpuDomain::Sm)) {
            ops.push(lock(GpuDomain::Sm, s.sm_held));
        }
        if g.lock_memory_clock
            && s.has_memory_domain
            && lock_needed(
                s.memory_held,
                by_journal(cx.facts, &s.uuid, GpuDomain::Memory),
            )
        {
            ops.push(lock(GpuDomain::Memory, s.memory_held));
        }
    }
    ops
}

/// What the plan says of a lock: someone else's lock it overrides (seen in the recorded
/// facts), or that whether the clock is held cannot be told.
fn lock_note(
    recorded: Option<&daqtune_probe::gpu::GpuSnapshot>,
    uuid: &str,
    d: GpuDomain,
    held: Option<bool>,
    tol: u32,
) -> Option<String> {
    let foreign = recorded.and_then(|snap| {
        snap.gpus
            .iter()
            .find(|f| f.uuid == uuid)
            .and_then(|f| crate::hostio::gpu::foreign(f, d, tol))
    });
    if let Some((lo, hi)) = foreign {
        return Some(format!("someone else's lock ({lo}-{hi} MHz) is in place and will be overridden; revert cannot restore it"));
    }
    held.is_none().then(|| {
        format!(
            "whether the {} clock is already held cannot be told; locking it",
            d.as_str()
        )
    })
}

/// On a host root: the operations made on the mock of the recorded facts, and one change that
/// rewrites the facts file with what the mock shows after them.
fn record_on_root(
    cx: &PlanCx,
    plan: &mut Plan,
    snap: &daqtune_probe::gpu::GpuSnapshot,
    m: &MockSetters,
    ops: &[GpuOp],
) {
    if ops.is_empty() {
        return;
    }
    for (subject, op, _) in ops {
        let r = match op {
            // The recorded facts are rewritten with what the mock shows after the lock; a lock
            // they do not show is said, not assumed.
            GpuAction::LockMax { uuid, domain } => m
                .lock_max(uuid, *domain)
                .map_err(|e| e.to_string())
                .and_then(|l| match l.shown {
                    Some(true) => Ok(()),
                    _ => Err(l.message),
                }),
            GpuAction::PersistenceOn { uuid } => m
                .set_persistence(uuid, true)
                .map(|_| ())
                .map_err(|e| e.to_string()),
        };
        if let Err(e) = r {
            plan.note(ID, NoteLevel::Warn, format!("{subject}: {e}"));
        }
    }
    let mut after = snap.clone();
    for f in after.gpus.iter_mut() {
        if let Ok(n) = daqtune_probe::gpu::control::NvmlControl::facts(&m.ctl.nvml, &f.uuid) {
            *f = n;
        }
    }
    let mut text = after.to_json();
    text.push('\n');
    let subjects: Vec<String> = ops
        .iter()
        .map(|(_, a, _)| match a {
            GpuAction::LockMax { uuid, domain } => format!("{} lock on {uuid}", domain.as_str()),
            GpuAction::PersistenceOn { uuid } => format!("persistence on {uuid}"),
        })
        .collect();
    let from = cx.read(GPU_JSON);
    plan.changes.push(Change {
        check: ID.into(),
        subject: "recorded NVML".into(),
        action: Action::File {
            path: GPU_JSON.into(),
            from,
            to: text.into_bytes(),
            mode: 0o644,
        },
        reboot: false,
        note: Some(subjects.join(", ")),
    });
}

/// The unit that locks the clocks again at boot.
fn plan_unit(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    let path = format!("/etc/systemd/system/{}", systemd::GPU_CLOCKS_UNIT);
    if let Some(exe) = cx.unit_exe(plan, ID, &path) {
        let u = unit(&exe, &cx.profile_ref());
        let text = u.render()?;
        cx.file_change(plan, ID, &u.name, &path, text, 0o644, false);
        cx.enable(plan, ID, &u.name, "multi-user.target");
    }
    Ok(())
}

/// A GPU change through NVML (live hosts; under a root the recorded facts are rewritten
/// with what a mock of them shows after it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuAction {
    /// Lock a clock domain at its maximum.
    LockMax { uuid: String, domain: GpuDomain },
    /// Turn persistence mode on.
    PersistenceOn { uuid: String },
}

impl ActionKind for GpuAction {
    fn execute(&self, cx: SetCx<'_>) -> Result<Done, SetError> {
        match self {
            GpuAction::LockMax { uuid, domain } => {
                lock_clock(cx.journal, cx.writer, cx.gpu, uuid, *domain)
            }
            GpuAction::PersistenceOn { uuid } => {
                persistence_on(cx.journal, cx.writer, cx.gpu, uuid).map(Done::from)
            }
        }
    }
    fn plan_json(&self) -> serde_json::Value {
        match self {
            GpuAction::LockMax { uuid, domain } => serde_json::json!({
                "kind": "gpu-clock-lock", "gpu": uuid, "domain": domain.as_str(),
            }),
            GpuAction::PersistenceOn { uuid } => {
                serde_json::json!({ "kind": "gpu-persistence", "gpu": uuid })
            }
        }
    }
    fn describe(&self) -> String {
        match self {
            GpuAction::LockMax { uuid, domain } => format!(
                "lock the {} clock of {uuid} at its maximum (NVML)",
                domain.as_str()
            ),
            GpuAction::PersistenceOn { uuid } => format!("persistence mode on for {uuid} (NVML)"),
        }
    }
}

/// The setter hook of [`GpuAction::LockMax`]: journal first, lock through NVML, and take the entry
/// back if NVML refused (revert must not unlock what this run never locked). The read-back
/// decides the outcome: a lock that shows is done; one NVML cannot confirm (a busy GPU) is done
/// but unconfirmed (a warning); one that does not take (an idle GPU below the target) is a
/// failure, and its entry stays, marked so, for revert to reset.
pub(crate) fn lock_clock(
    j: &mut Journal,
    w: &mut dyn Writer,
    gpu: Option<&dyn GpuSetters>,
    uuid: &str,
    domain: GpuDomain,
) -> Result<Done, crate::model::tunable::SetError> {
    let jerr = crate::model::tunable::SetError::Journal;
    let g = gpu.ok_or(crate::model::tunable::SetError::NoGpu)?;
    let idx = j
        .record(
            w,
            Entry::GpuLock {
                uuid: uuid.to_string(),
                domain,
                previously_locked: false,
                shown: None,
                floor_before_mhz: None,
            },
        )
        .map_err(jerr)?;
    let r = match g.lock_max(uuid, domain) {
        Ok(r) => r,
        Err(e) => {
            j.take_back(w, idx);
            return Err(e.into());
        }
    };
    if let Some(rec) = j.doc.records.get_mut(idx) {
        rec.entry = Entry::GpuLock {
            uuid: uuid.to_string(),
            domain,
            previously_locked: r.previously_locked,
            shown: r.shown,
            floor_before_mhz: r.floor_before_mhz,
        };
    }
    j.mark_done(w, idx).map_err(jerr)?;
    let message = if r.previously_locked {
        format!(
            "{} (a lock was already in place and is now overridden; revert will not restore it)",
            r.message
        )
    } else {
        r.message
    };
    match r.shown {
        Some(true) => Ok(message.into()),
        None => Ok(Done {
            message: format!("{message}; the journal records the lock, so `daqtune check gpu.clocks` counts it until reboot"),
            unconfirmed: true,
            pending_boot: false,
        }),
        Some(false) => Err(format!(
            "{message}: the lock did not take (`daqtune revert` resets it)"
        )
        .into()),
    }
}

/// The setter hook of [`GpuAction::PersistenceOn`]: journal the previous mode, turn it on.
pub(crate) fn persistence_on(
    j: &mut Journal,
    w: &mut dyn Writer,
    gpu: Option<&dyn GpuSetters>,
    uuid: &str,
) -> Result<String, crate::model::tunable::SetError> {
    let jerr = crate::model::tunable::SetError::Journal;
    let g = gpu.ok_or(crate::model::tunable::SetError::NoGpu)?;
    let before = g
        .gpus()
        .ok()
        .and_then(|v| v.into_iter().find(|s| s.uuid == uuid))
        .and_then(|s| s.persistence);
    let idx = j
        .record(
            w,
            Entry::GpuPersistence {
                uuid: uuid.to_string(),
                original: before,
            },
        )
        .map_err(jerr)?;
    if let Err(e) = g.set_persistence(uuid, true) {
        j.take_back(w, idx);
        return Err(e.into());
    }
    j.mark_done(w, idx).map_err(jerr)?;
    Ok(format!("persistence mode on for {uuid}"))
}

/// The boot-time unit of this setting: what the plan writes and `generate gpu-clocks-unit` prints.
fn unit(exe: &str, profile_ref: &str) -> systemd::Oneshot {
    systemd::gpu_clocks_unit(exe, profile_ref)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_is_needed_unless_held_or_vouched_for() {
        assert!(!lock_needed(Some(true), false));
        assert!(lock_needed(Some(false), true));
        assert!(lock_needed(None, false));
        assert!(!lock_needed(None, true));
    }

    #[test]
    fn persistence_is_missing_unless_on_or_kept_by_the_daemon() {
        assert!(!persistence_missing(Some(true), false));
        assert!(!persistence_missing(Some(true), true));
        assert!(persistence_missing(Some(false), false));
        assert!(!persistence_missing(Some(false), true));
        // Not reported: the plan sets it (the check says n/a or skip), unless the daemon runs.
        assert!(persistence_missing(None, false));
        assert!(!persistence_missing(None, true));
    }
}
