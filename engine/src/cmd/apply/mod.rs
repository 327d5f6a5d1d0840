//! The commands that change a host: plan / apply / revert / generate, on top of the engine.
//! They choose the profile, plan through the tunables, take the lock, and hand the plan to
//! the executor ([`crate::exec`]), which writes through [`crate::hostio`].
//!
//! Safety rules (DESIGN.md "Apply safety"): a profile given or a detection the user confirmed;
//! no TTY and no `--yes` means exit 2; one run at a time (a lock); atomic writes; a journal
//! holding the original of every file and every runtime value; runtime writes read back;
//! `pending-reboot` for what waits for a boot; update-grub only on the live host.

pub mod events;
#[cfg(test)]
pub(crate) mod testroot;

pub use events::{Event, Events, Question};

use crate::check::commands::{GlobalOptions, UsageError};
use crate::exec::{apply, revert};
use crate::hostio::lock::{lock, lock_wait};
use crate::hostio::setters::{self, FsWriter, Writer};
use crate::hostio::{gpu, journal};
use crate::hostroot::open_host;
use crate::model::facts::Facts;
use crate::model::plan::{self, Plan, PlanOptions};
use crate::model::profile::{self, LoadedProfile};
use daqtune_probe::Host;
use daqtune_units::INSTALL_ADVICE;
use std::path::PathBuf;

/// Host path of daqtune's state (journal, lock).
pub const STATE_DIR: &str = crate::model::context::trial::STATE_DIR;

/// What to plan and apply (the flags `plan` and `apply` share; the binary's `cli` documents
/// each one).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only these ids (empty: every tunable that plans).
    pub only: Vec<String>,
    /// Only the runtime changes (sysfs, MTU, config space, modules); no files.
    pub runtime_only: bool,
    /// Only the persistent files (grub drop-in, units, rules); no runtime change.
    pub persist_only: bool,
    /// Restrict device changes (MRRS) to one PCI function, as the udev rule does.
    pub device: Option<String>,
    /// Allow ACS redirect changes (only where the IOMMU is off or in passthrough).
    pub allow_acs: bool,
    /// The daqtune binary that generated units and rules run (`--exe`); `None`: the one
    /// installed in the host root (`daqtune_units::INSTALLED_EXE`), if any.
    pub exe: Option<String>,
    /// Derive isolated cores, hugepages, MTU and data-path interfaces from this DAQIRI
    /// configuration instead of the profile's defaults; kept for later runs until `fresh`.
    pub config: Option<PathBuf>,
    /// Plan the profile alone: do not keep the `config` and `allow_acs` of the last apply
    /// that is still in effect.
    pub fresh: bool,
    /// Kernel arguments become the default at once, without the trial boot
    /// ([`crate::exec::trial`]).
    pub no_trial: bool,
}

/// The selection a plan uses: what the user gave, plus the `--config` and `--allow-acs` of the
/// newest apply still in effect where the user gave neither (and not `--fresh`). Without this a
/// second `apply` (a governor fix, say) would rewrite the grub drop-in from the bare profile
/// and drop the isolation the DAQIRI configuration asked for. Each kept option is printed.
fn with_remembered(
    host: &Host,
    sel: &Selection,
    state_dir: &Option<String>,
    ev: &mut dyn Events,
) -> Result<Selection, UsageError> {
    let mut sel = sel.clone();
    if sel.fresh {
        return Ok(sel);
    }
    let dir = state_dir.clone().unwrap_or_else(|| STATE_DIR.to_string());
    let Ok(state) = apply::real_path(host, &dir, true) else {
        return Ok(sel);
    };
    let Some((id, rec)) = journal::last_selection(&state.join("journal")) else {
        return Ok(sel);
    };
    if sel.config.is_none() {
        if let Some(c) = &rec.config {
            if std::path::Path::new(c).is_file() {
                ev.event(Event::KeptConfig {
                    run: &id,
                    config: c,
                });
                sel.config = Some(c.into());
            } else if sel.runtime_only {
                // The boot units and the udev rule run this way: they must not fail on it.
                ev.event(Event::ConfigGone {
                    run: &id,
                    config: c,
                });
            } else {
                return Err(UsageError::Other(format!(
                    "apply run {id} used --config {c}, which is gone: pass --config FILE again, \
                     or --fresh to plan the profile alone"
                )));
            }
        }
    }
    if !sel.allow_acs && rec.allow_acs {
        ev.event(Event::KeptAllowAcs { run: &id });
        sel.allow_acs = true;
    }
    Ok(sel)
}

/// What a run records of its selection: the configuration by absolute path.
fn recorded(sel: &Selection) -> journal::RecordedSelection {
    journal::RecordedSelection {
        config: sel.config.as_ref().map(|c| {
            std::fs::canonicalize(c)
                .unwrap_or_else(|_| c.clone())
                .display()
                .to_string()
        }),
        allow_acs: sel.allow_acs,
    }
}

/// The profile with the parameters a DAQIRI configuration needs (`--config`), and one line
/// per derived parameter for the plan's header.
fn with_app_config(
    facts: &Facts,
    lp: LoadedProfile,
    sel: &Selection,
    ev: &mut dyn Events,
) -> Result<LoadedProfile, UsageError> {
    let Some(p) = &sel.config else {
        return Ok(lp);
    };
    let app = crate::model::appconfig::AppConfig::load(p)
        .map_err(|e| UsageError::Other(e.to_string()))?;
    let ctx = crate::model::context::Context::with_facts(facts, &lp);
    let (derived, notes) = crate::tunables::app_profile::derive_loaded(&app, &lp, &ctx);
    for n in notes {
        ev.event(Event::Derived {
            file: &app.file,
            note: &n,
        });
    }
    Ok(derived)
}

#[derive(Debug, Clone, Default)]
pub struct ApplyOptions {
    pub sel: Selection,
    /// Print the plan and change nothing.
    pub dry_run: bool,
    /// Do not ask.
    pub yes: bool,
    /// Journal and lock directory (host path; default /var/lib/daqtune).
    pub state_dir: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct RevertOptions {
    /// Do not ask.
    pub yes: bool,
    pub state_dir: Option<String>,
}

/// What part of the journals `revert` undoes: all (the default), one run, or some checks'
/// changes.
#[derive(Debug, Clone, Default)]
pub struct RevertPart {
    /// Undo this apply run only (`--run ID`).
    pub run: Option<String>,
    /// Undo these checks' changes only (`--only IDS`), in every run in effect.
    pub only: Vec<String>,
}

impl RevertPart {
    /// What the revert undoes; an unknown check id is a usage error.
    pub fn scope(&self) -> Result<revert::Scope, UsageError> {
        if let Some(id) = &self.run {
            return Ok(revert::Scope::Run(id.clone()));
        }
        let only = selected_ids(&self.only)?;
        if only.is_empty() {
            return Ok(revert::Scope::All);
        }
        let mut ids = Vec::new();
        for id in only {
            let c = crate::tunables::find(id)
                .ok_or_else(|| UsageError::UnknownCheck(id.to_string()))?;
            if !ids.iter().any(|x| x == c.id) {
                ids.push(c.id.to_string());
            }
        }
        Ok(revert::Scope::Checks(ids))
    }
}

/// An artifact `generate` prints: the name of one of the registry's artifacts
/// (`Planner::artifacts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind(&'static str);

impl Kind {
    /// Every kind with its command-line name and help line, from the registry: the one list
    /// `daqtune generate`'s argument parser and its help are made from.
    pub fn all() -> Vec<(Kind, &'static str, &'static str)> {
        crate::tunables::artifacts()
            .into_iter()
            .map(|(_, a)| (Kind(a.kind), a.kind, a.help))
            .collect()
    }

    /// The kind a command-line name stands for.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::all()
            .into_iter()
            .find(|(_, n, _)| *n == name)
            .map(|(k, _, _)| k)
    }

    pub fn name(&self) -> &'static str {
        self.0
    }
}

#[derive(Debug, Clone)]
pub struct GenerateOptions {
    pub kind: Kind,
    /// The daqtune binary that generated units and rules run (`--exe`); `None`: the installed
    /// one.
    pub exe: Option<String>,
    /// Interfaces for network artifacts (default: the host's ConnectX ports).
    pub interfaces: Vec<String>,
    /// PCI functions for the udev rule (default: the data-path PFs: the profile's interfaces,
    /// else the host's ConnectX PFs).
    pub devices: Vec<String>,
}

/// The daqtune binary units and rules run on this host: `--exe PATH` (which must be a regular
/// executable file in the host root, else exit 2), or the first installed one of
/// [`daqtune_units::INSTALLED_EXE`]; `None` when nothing is installed.
pub fn resolve_exe(facts: &Facts, given: Option<&str>) -> Result<Option<String>, UsageError> {
    let where_ = if facts.host.is_live() {
        String::new()
    } else {
        format!(" in the host root {}", facts.host.root().display())
    };
    if let Some(p) = given {
        daqtune_units::validate::abs_path(p)
            .map_err(|e| UsageError::Other(format!("--exe: {e}")))?;
        return match facts.stat(p) {
            Ok(st) if st.is_executable_file() => Ok(Some(p.to_string())),
            Ok(st) if !st.is_file => Err(UsageError::Other(format!(
                "--exe {p}: not a regular file{where_}; units and udev rules would fail to run it"
            ))),
            Ok(st) => Err(UsageError::Other(format!(
                "--exe {p}: not executable (mode {:o}){where_}; units and udev rules would fail to run it",
                st.mode
            ))),
            Err(e) => Err(UsageError::Other(format!(
                "--exe {p}: {}{where_}; units and udev rules would fail to run it",
                if e.not_found { "no such file".to_string() } else { e.message }
            ))),
        };
    }
    Ok(daqtune_units::INSTALLED_EXE
        .iter()
        .find(|p| facts.stat(p).is_ok_and(|s| s.is_executable_file()))
        .map(|p| p.to_string()))
}

/// The installed daqtune binary of the host `g` names (as [`resolve_exe`] finds it without
/// `--exe`), or `None`: tune_system.py's `--set mrrs` then changes the running host alone.
pub fn installed_exe(g: &GlobalOptions) -> Result<Option<String>, UsageError> {
    let host = open_for_change(g)?;
    resolve_exe(&g.facts(&host), None)
}

/// Whether a built-in profile matches the host `g` names (as `check` detects it).
/// tune_system.py's `--set` ran on any host: where none matches it uses `generic-dgpu`,
/// the profile `check` falls back to.
pub fn detects_profile(g: &GlobalOptions) -> Result<bool, UsageError> {
    let host = open_for_change(g)?;
    Ok(crate::check::commands::detect_profile_with(&g.facts(&host)).is_some())
}

/// The note of a change made at runtime alone because no daqtune binary is installed to
/// make it again at boot: what is lost at a reboot and how to keep it.
pub fn runtime_only_note(ids: &str) -> String {
    format!(
        "note: no installed daqtune binary (looked for {}): {ids} is changed on the running host only, as tune_system.py did; it will not survive a reboot or a device reset. To make it persistent: {INSTALL_ADVICE}; then run `sudo daqtune apply --only {ids}` (it also writes the udev rule that sets it again at boot and after a reset)",
        daqtune_units::INSTALLED_EXE.join(", ")
    )
}

/// apply's copy of the user's profile file (`--profile FILE`): its host path under
/// [`PROFILE_COPIES`](crate::model::context::artifacts::PROFILE_COPIES) and its bytes; `None` for a
/// built-in profile (or a file that cannot be read again: the units then name the file given).
fn profile_copy(g: &GlobalOptions, lp: &LoadedProfile) -> Option<(String, Vec<u8>)> {
    let p = g.profile.as_deref()?;
    if profile::builtin_names().any(|n| n == p) {
        return None;
    }
    let bytes = std::fs::read(p).ok()?;
    Some((
        crate::model::context::artifacts::profile_copy_path(&lp.profile.name, &bytes),
        bytes,
    ))
}

/// The plan `plan` shows and `apply` executes: the tunables' plan, the profile copy the units
/// run, and the kernel-argument trial armed where the boot loader allows one. One function for
/// the plan printed and the plan made again under the lock, so the two cannot drift apart.
fn complete_plan(
    facts: &Facts,
    lp: &LoadedProfile,
    opts: &crate::model::plan::PlanOptions,
    gpu: Option<&dyn gpu::GpuSetters>,
    copy: &Option<(String, Vec<u8>)>,
    no_trial: bool,
) -> Result<(Plan, Option<crate::exec::trial::Armed>), UsageError> {
    let mut plan = crate::tunables::build_plan_with(facts, lp, opts, gpu)
        .map_err(|e| UsageError::Other(e.to_string()))?;
    add_profile_copy(facts, lp, &mut plan, copy, opts.persist);
    let armed = crate::exec::trial::arm(
        facts,
        lp,
        &mut plan,
        opts.exe.as_deref(),
        &opts.profile_ref,
        no_trial,
    );
    Ok((plan, armed))
}

/// Puts the profile copy into `plan`, first (a unit never names a copy not yet written), when
/// a file the plan writes names it, or a file daqtune wrote earlier does, and it is not
/// already there with these bytes. Revert removes it with the rest of the run.
fn add_profile_copy(
    facts: &Facts,
    lp: &LoadedProfile,
    plan: &mut Plan,
    copy: &Option<(String, Vec<u8>)>,
    persist: bool,
) {
    let Some((path, bytes)) = copy else { return };
    if !persist {
        return;
    }
    let names = |b: &[u8]| b.windows(path.len()).any(|w| w == path.as_bytes());
    let needed_by = plan
        .changes
        .iter()
        .find(|c| {
            c.action.is_persistent()
                && matches!(&c.action, plan::Action::File { to, .. } if names(to))
        })
        .map(|c| c.check.clone())
        .or_else(|| {
            crate::model::context::artifacts::daqtune_artifacts(
                facts,
                &crate::tunables::owned_files(lp),
            )
            .iter()
            .any(|a| facts.read_bytes(&a.path).is_ok_and(|b| names(&b)))
            .then(|| "daqtune.artifacts".to_string())
        });
    let Some(check) = needed_by else { return };
    let from = facts.read_bytes(path).ok().map(|b| b.to_vec());
    if from.as_deref() == Some(bytes.as_slice()) {
        return;
    }
    plan.changes.insert(
        0,
        plan::Change {
            check,
            subject: "profile".into(),
            action: plan::Action::File {
                path: path.clone(),
                from,
                to: bytes.clone(),
                mode: 0o644,
            },
            reboot: false,
            note: Some(
                "daqtune's copy of --profile: the units and rules run with it, so they keep working when the file given is moved or deleted".into(),
            ),
        },
    );
}

/// Notes for the files of `plan` that apply will refuse to overwrite (another writer's file at
/// one of daqtune's paths; see `apply::refuse_foreign`), so the preview says it too.
fn note_foreign(plan: &mut Plan) {
    let refused: Vec<(String, String)> = plan
        .changes
        .iter()
        .filter_map(|c| match &c.action {
            plan::Action::File {
                path,
                from: Some(from),
                to,
                ..
            } => apply::refuse_foreign(path, to, None, Some(from))
                .err()
                .map(|e| (c.check.clone(), e.to_string())),
            _ => None,
        })
        .collect();
    for (check, e) in refused {
        plan.note(
            &check,
            plan::NoteLevel::Warn,
            format!("apply will refuse: {e}"),
        );
    }
}

/// A plan that would need a daqtune binary for its units and rules when none is installed is
/// refused before anything changes (exit 2), naming those artifacts and what can go ahead.
pub fn refuse_without_binary(plan: &Plan, sel: &Selection) -> Result<(), UsageError> {
    if plan.needs_binary.is_empty() {
        return Ok(());
    }
    let mut lines: Vec<String> = plan
        .needs_binary
        .iter()
        .map(|(check, path)| format!("  {path} ({check})"))
        .collect();
    lines.dedup();
    let needing: Vec<&str> = plan.needs_binary.iter().map(|(c, _)| c.as_str()).collect();
    let mut free: Vec<&str> = plan
        .changes
        .iter()
        .map(|c| c.check.as_str())
        .filter(|c| !needing.contains(c))
        .collect();
    free.sort_unstable();
    free.dedup();
    let mut restrict = String::from("--runtime-only (runtime changes alone)");
    if !free.is_empty() {
        restrict.push_str(&format!(
            ", or --only {} (the settings of this plan that need no binary)",
            free.join(",")
        ));
    }
    let looked = if sel.exe.is_some() {
        String::new()
    } else {
        format!(" (looked for {})", daqtune_units::INSTALLED_EXE.join(", "))
    };
    Err(UsageError::Other(format!(
        "no installed daqtune binary{looked}, and these would run it at every boot or device event:\n{}\nrefusing to write units and rules that call a missing binary: {INSTALL_ADVICE}; or leave them out with {restrict}",
        lines.join("\n")
    )))
}

/// The ids of a selection (`Selection::only`, `RevertPart::only`), trimmed. A blank item is a
/// usage error, never dropped: dropping it turned `[""]` from a library caller into "every
/// setting" (the command line refuses it the same way, `tune/src/cli.rs`).
fn selected_ids(only: &[String]) -> Result<Vec<&str>, UsageError> {
    only.iter()
        .map(|s| {
            let id = s.trim();
            if id.is_empty() {
                Err(UsageError::Other(
                    "an empty check id in the selection: name at least one id (e.g. hugepages), or select nothing for every setting".into(),
                ))
            } else {
                Ok(id)
            }
        })
        .collect()
}

fn options(
    facts: &Facts,
    lp: &LoadedProfile,
    sel: &Selection,
    profile_arg: Option<&str>,
) -> Result<PlanOptions, UsageError> {
    if let Some(d) = &sel.device {
        d.parse::<daqtune_units::PciAddr>()
            .map_err(|e| UsageError::Other(format!("--device: {e}")))?;
    }
    let exe = resolve_exe(facts, sel.exe.as_deref())?;
    // Units name the profile as the user did: a built-in name, or the file's absolute path.
    let profile_ref = match profile_arg {
        Some(p) if profile::builtin_names().any(|n| n == p) => p.to_string(),
        Some(p) => std::fs::canonicalize(p)
            .map(|c| c.display().to_string())
            .unwrap_or_else(|_| p.to_string()),
        None => lp.profile.name.clone(),
    };
    let only = selected_ids(&sel.only)?
        .into_iter()
        .map(str::to_string)
        .collect();
    Ok(PlanOptions {
        only,
        runtime: !sel.persist_only,
        persist: !sel.runtime_only,
        device: sel.device.clone(),
        allow_acs: sel.allow_acs,
        exe,
        profile_ref,
        gpu_unavailable: None,
    })
}

/// The profile for a command that changes the host: `--profile`, or a detection the user
/// confirms (on a TTY, or with --yes). The generic fallback is never applied silently.
fn profile_for_change(
    facts: &Facts,
    g: &GlobalOptions,
    yes: bool,
    prompt: &mut dyn Prompt,
    ev: &mut dyn Events,
) -> Result<LoadedProfile, UsageError> {
    if let Some(p) = &g.profile {
        let mut lp = crate::check::commands::load_profile(p)?;
        lp.origin = format!("--profile {p}");
        return Ok(lp);
    }
    // The same detection as `check` and `plan`, GPU names included (a DGX Spark is known by
    // its GB10).
    let Some((name, why)) = crate::check::commands::detect_profile_with(facts) else {
        return Err(UsageError::Other(
            "no built-in profile matches this host: pass --profile NAME|FILE (built-ins: igx-orin, dgx-spark, generic-dgpu)".into(),
        ));
    };
    ev.event(Event::ProfileDetected {
        name: &name,
        why: &why,
    });
    if !yes && !prompt.confirm(Question::UseProfile { name: &name })? {
        return Err(UsageError::Other(
            "profile not confirmed: pass --profile NAME".into(),
        ));
    }
    let mut lp = profile::load(&name)?;
    lp.origin = format!("detected and confirmed: {why}");
    Ok(lp)
}

/// Asks the user a yes/no question before a change. The binary asks on its terminal; where
/// there is none the answer cannot be had and [`NoTerminal`] makes that a usage error (exit 2),
/// so a pipe never applies silently.
pub trait Prompt {
    fn confirm(&mut self, question: Question<'_>) -> Result<bool, UsageError>;
}

/// The prompt of a run without a terminal: every question is refused.
pub struct NoTerminal;

impl Prompt for NoTerminal {
    fn confirm(&mut self, _question: Question<'_>) -> Result<bool, UsageError> {
        Err(UsageError::NoTerminal)
    }
}

fn state_real(host: &Host, state_dir: &Option<String>) -> Result<PathBuf, UsageError> {
    let dir = state_dir.clone().unwrap_or_else(|| STATE_DIR.to_string());
    if !dir.starts_with('/') {
        return Err(UsageError::Other(format!(
            "--state-dir {dir}: must be absolute"
        )));
    }
    apply::real_path(host, &dir, true).map_err(|e| UsageError::Other(e.to_string()))
}

/// The host for a command that writes: a `--root` must be a directory (an archive is unpacked
/// into a temporary directory, so whatever apply wrote there would be lost).
fn open_for_change(g: &GlobalOptions) -> Result<crate::hostroot::OpenedHost, UsageError> {
    if let Some(r) = &g.root {
        if r.is_file() {
            return Err(UsageError::Other(format!(
                "--root {}: apply and revert need a directory, not an archive (unpack it first: the changes would be lost with the temporary copy)",
                r.display()
            )));
        }
    }
    open_host(g)
}

/// `daqtune plan`.
pub fn run_plan(g: &GlobalOptions, a: &Selection, ev: &mut dyn Events) -> Result<u8, UsageError> {
    let host = open_host(g)?;
    plan_on(&host, g, a, ev)
}

/// `daqtune plan` on an opened host (a test passes a recording one to count its reads).
pub fn plan_on(
    host: &Host,
    g: &GlobalOptions,
    a: &Selection,
    ev: &mut dyn Events,
) -> Result<u8, UsageError> {
    let plan = plan_for(host, g, a, ev)?;
    ev.event(Event::Plan(&plan));
    Ok(0)
}

/// The plan `daqtune plan` shows; what it says before the plan (the profile it detected,
/// options kept from the last apply, what a `--config` derived) goes to `head`, one event each
/// (`plan --format json` makes them its `messages`).
pub fn plan_for(
    host: &Host,
    g: &GlobalOptions,
    a: &Selection,
    head: &mut dyn Events,
) -> Result<Plan, UsageError> {
    // One set of facts for detection, the configuration's derivation and the plan.
    let facts = g.facts(host);
    let lp = match &g.profile {
        Some(_) => crate::check::commands::choose_profile_with(&facts, g)?,
        None => {
            let lp = crate::check::commands::choose_profile_with(&facts, g)?;
            head.event(Event::ProfileChosen {
                name: &lp.profile.name,
                origin: &lp.origin,
            });
            lp
        }
    };
    let sel = with_remembered(host, a, &None, head)?;
    let lp = with_app_config(&facts, lp, &sel, head)?;
    let mut opts = options(&facts, &lp, &sel, g.profile.as_deref())?;
    let copy = profile_copy(g, &lp);
    if let Some((p, _)) = &copy {
        opts.profile_ref = p.clone();
    }
    // A plan is a preview: with no installed binary it still shows the units and rules, as
    // they would run the packaged one, and says that apply refuses them until it is there.
    let placeholder = opts.exe.is_none().then(|| daqtune_units::INSTALLED_EXE[0]);
    if let Some(exe) = placeholder {
        opts.exe = Some(exe.to_string());
    }
    let (mut plan, _) = complete_plan(&facts, &lp, &opts, None, &copy, sel.no_trial)?;
    note_foreign(&mut plan);
    if let Some(exe) = placeholder {
        let runs = format!("{exe} ");
        let needs: Vec<(String, String)> = plan
            .changes
            .iter()
            .filter_map(|c| match &c.action {
                plan::Action::File { path, to, .. }
                    if c.action.is_persistent()
                        && to.windows(runs.len()).any(|w| w == runs.as_bytes()) =>
                {
                    Some((c.check.clone(), path.clone()))
                }
                _ => None,
            })
            .collect();
        plan.needs_binary = needs;
        if let Err(e) = refuse_without_binary(&plan, &sel) {
            plan.note(
                "apply",
                plan::NoteLevel::Warn,
                format!("apply will refuse: {e}"),
            );
        }
    } else {
        refuse_without_binary(&plan, &sel)?;
    }
    Ok(plan)
}

/// `daqtune apply`, with a writer that tests can fault (no terminal: `yes` is needed).
pub fn run_apply_with(
    g: &GlobalOptions,
    a: &ApplyOptions,
    w: &mut dyn Writer,
    ev: &mut dyn Events,
) -> Result<u8, UsageError> {
    run_apply_gpu(g, a, w, None, ev)
}

/// `daqtune apply` with GPU control (the NVML setters, or a mock in tests).
pub fn run_apply_gpu(
    g: &GlobalOptions,
    a: &ApplyOptions,
    w: &mut dyn Writer,
    gpu: Option<&dyn gpu::GpuSetters>,
    ev: &mut dyn Events,
) -> Result<u8, UsageError> {
    run_apply_inner(g, a, w, GpuSource::Given(gpu), &mut NoTerminal, ev)
}

fn run_apply_inner(
    g: &GlobalOptions,
    a: &ApplyOptions,
    w: &mut dyn Writer,
    gpu: GpuSource,
    prompt: &mut dyn Prompt,
    ev: &mut dyn Events,
) -> Result<u8, UsageError> {
    let host = open_for_change(g)?;
    let facts = g.facts(&host);
    let lp = profile_for_change(&facts, g, a.yes || a.dry_run, prompt, ev)?;
    let sel = with_remembered(&host, &a.sel, &a.state_dir, ev)?;
    let lp = with_app_config(&facts, lp, &sel, ev)?;
    let live;
    let (gpu, gpu_unavailable) = match gpu {
        GpuSource::Given(gpu) => (gpu, None),
        GpuSource::Live => {
            live = live_gpu(g, &a.sel, gpu_tolerance(&lp));
            (
                live.0.as_ref().map(|l| l as &dyn gpu::GpuSetters),
                live.1.clone(),
            )
        }
    };
    let mut opts = options(&facts, &lp, &sel, g.profile.as_deref())?;
    opts.gpu_unavailable = gpu_unavailable;
    let copy = profile_copy(g, &lp);
    if let Some((p, _)) = &copy {
        opts.profile_ref = p.clone();
    }
    let (mut plan, _) = complete_plan(&facts, &lp, &opts, gpu, &copy, sel.no_trial)?;
    note_foreign(&mut plan);
    refuse_without_binary(&plan, &sel)?;
    ev.event(Event::Plan(&plan));
    if a.dry_run {
        ev.event(Event::DryRun);
        return Ok(0);
    }
    if plan.is_empty() {
        ev.event(Event::NothingToChange {
            profile: &lp.profile.name,
        });
        return Ok(0);
    }
    // Under lockdown the kernel refuses every config-space write: refuse before the journal,
    // the udev rule and the profile copy are written for a setting that cannot be made
    // (issue 25: the Secure Boot VM found them left behind).
    if let Some(l) = setters::locked_down(facts.platform().lockdown.as_deref()) {
        let cw: Vec<&str> = plan
            .changes
            .iter()
            .filter(|c| matches!(c.action, plan::Action::ConfigWord { .. }))
            .map(|c| c.check.as_str())
            .collect();
        if plan.target == setters::Target::Live && !cw.is_empty() {
            ev.event(Event::LockdownRefused {
                check: cw[0],
                lockdown: l,
            });
            return Ok(1);
        }
    }
    if !a.yes
        && !prompt.confirm(Question::Apply {
            changes: plan.changes.len(),
        })?
    {
        ev.event(Event::NotApplied);
        return Ok(0);
    }
    let state = state_real(&host, &a.state_dir)?;
    // The udev rule's run for one re-added PF waits for a running apply instead of losing
    // the MRRS setting (udev allows a RUN program well over this).
    let _lock = if sel.device.is_some() {
        lock_wait(&state, std::time::Duration::from_secs(20))
    } else {
        lock(&state)
    }
    .map_err(UsageError::from)?;
    // The host may have changed while the user read the plan (or another apply ran): plan
    // again under the lock, on facts read afresh.
    let facts = g.facts(&host);
    let (plan, armed) = complete_plan(&facts, &lp, &opts, gpu, &copy, sel.no_trial)?;
    refuse_without_binary(&plan, &sel)?;
    let mut journal = journal::Journal::create(&state.join("journal"), &lp.profile.name, w)
        .map_err(|e| {
            UsageError::Other(format!(
                "cannot start the journal in {}: {e}{}",
                state.display(),
                crate::hostio::root_hint(&e)
            ))
        })?;
    journal.doc.selection = recorded(&sel);
    journal.doc.options = Some(journal::RunOptions {
        profile_origin: lp.origin.clone(),
        only: opts.only.clone(),
        runtime_only: sel.runtime_only,
        persist_only: sel.persist_only,
        device: sel.device.clone(),
        fresh: sel.fresh,
    });
    journal
        .flush(w)
        .map_err(|e| UsageError::Other(format!("journal: {e}")))?;
    let lockdown = facts.platform().lockdown.clone();
    let rep = apply::execute(&host, &plan, &mut journal, w, lockdown.as_deref(), gpu);
    ev.event(Event::Applied {
        plan: &plan,
        report: &rep,
    });
    let mut failed = rep.failed();
    if let Some(armed) = &armed {
        match crate::exec::trial::record(&host, &state, &mut journal, w, armed, &rep) {
            Ok(line) => ev.event(Event::TrialRecorded(&line)),
            Err(e) => {
                failed += 1;
                ev.event(Event::TrialNotRecorded(&e.to_string()));
            }
        }
    }
    Ok(if failed == 0 { 0 } else { 1 })
}

/// Where a run's GPU control comes from.
enum GpuSource<'a> {
    /// The caller's (a mock in tests), or none.
    Given(Option<&'a dyn gpu::GpuSetters>),
    /// NVML on the live host, opened once the profile is chosen: its `clock_tolerance_mhz`
    /// is what the setters judge a lock by.
    Live,
}

/// The live host's GPU control: NVML's setters over the GPUs NVML reports, or why there is
/// none. Only loaded when gpu.clocks is in scope (loading NVML costs time).
fn live_gpu(
    g: &GlobalOptions,
    sel: &Selection,
    tolerance_mhz: u32,
) -> (
    Option<gpu::NvmlSetters<daqtune_probe::gpu::LiveNvml>>,
    Option<String>,
) {
    if g.root.is_some()
        || !(sel.only.is_empty() || sel.only.iter().any(|o| o == "gpu.clocks"))
        || sel.persist_only
    {
        return (None, None);
    }
    let host = Host::live();
    let snap = match crate::model::facts::read_gpus_once(&host, g.gpu_cache_mode()) {
        Ok(s) => s,
        Err(e) => return (None, Some(format!("no GPU control: {e}"))),
    };
    if let Some(r) = snap.unavailable_reason() {
        return (None, Some(format!("no GPU control: {r}")));
    }
    gpu_control(
        daqtune_probe::gpu::LiveNvml::open().map_err(|e| e.to_string()),
        tolerance_mhz,
        &snap.gpus,
    )
}

/// NVML's setters over `gpus`, judging locks within `tolerance_mhz`, or why there are none.
fn gpu_control<C: daqtune_probe::gpu::control::NvmlControl>(
    nvml: Result<C, String>,
    tolerance_mhz: u32,
    gpus: &[daqtune_probe::gpu::GpuFacts],
) -> (Option<gpu::NvmlSetters<C>>, Option<String>) {
    match nvml {
        Ok(n) => (Some(gpu::NvmlSetters::new(n, tolerance_mhz, gpus)), None),
        Err(e) => (None, Some(format!("no GPU control: {e}"))),
    }
}

/// The clock tolerance apply's GPU control judges by: the profile the run chose (given,
/// detected, or derived from `--config`), not a second reading of `--profile`.
fn gpu_tolerance(lp: &LoadedProfile) -> u32 {
    lp.profile.gpu.clock_tolerance_mhz
}

/// The clock tolerance revert's GPU control judges by. Revert chooses no profile: the one
/// given with `--profile`, else the schema's default.
fn revert_gpu_tolerance(g: &GlobalOptions) -> u32 {
    g.profile
        .as_deref()
        .and_then(|p| profile::load(p).ok())
        .map_or_else(
            || crate::model::profile::GpuProfile::default().clock_tolerance_mhz,
            |lp| lp.profile.gpu.clock_tolerance_mhz,
        )
}

/// `daqtune apply` on the host with the real writer and GPU control, asking through `prompt`
/// and telling `ev`.
pub fn run_apply(
    g: &GlobalOptions,
    a: &ApplyOptions,
    prompt: &mut dyn Prompt,
    ev: &mut dyn Events,
) -> Result<u8, UsageError> {
    let mut w = FsWriter::new();
    run_apply_inner(g, a, &mut w, GpuSource::Live, prompt, ev)
}

/// Revert's refusal without a terminal and without `--yes`: what it would undo (the runs in
/// effect, each with its id, profile and checks) and the command that confirms it.
fn revert_unconfirmed(scope: &revert::Scope, pending: &[PathBuf]) -> String {
    let runs: Vec<String> = pending
        .iter()
        .map(|d| match journal::Journal::open(d) {
            Ok(j) => {
                let mut checks: Vec<&str> = j
                    .doc
                    .records
                    .iter()
                    .filter_map(|r| r.check.as_deref())
                    .collect();
                checks.sort_unstable();
                checks.dedup();
                let what = if checks.is_empty() {
                    String::new()
                } else {
                    format!(": {}", checks.join(", "))
                };
                format!("  run {} (profile {}){what}", j.doc.id, j.doc.profile)
            }
            Err(_) => format!("  {} (journal unreadable)", d.display()),
        })
        .collect();
    let (what, confirm) = match scope {
        revert::Scope::All => (
            format!("every apply run in effect, newest first ({})", runs.len()),
            "daqtune revert --yes".to_string(),
        ),
        revert::Scope::Run(id) => (
            format!("apply run {id}"),
            format!("daqtune revert --run {id} --yes"),
        ),
        revert::Scope::Checks(ids) => (
            format!(
                "the changes of {} in every apply run in effect",
                ids.join(", ")
            ),
            format!("daqtune revert --only {} --yes", ids.join(",")),
        ),
    };
    format!(
        "stdin is not a terminal and --yes was not given: nothing was reverted. revert would undo {what}; the runs in effect:\n{}\nconfirm with `{confirm}` (`daqtune status` shows each run and whether it still holds)",
        runs.join("\n")
    )
}

/// `daqtune revert`, with a writer that tests can fault.
pub fn run_revert_with(
    g: &GlobalOptions,
    a: &RevertOptions,
    w: &mut dyn Writer,
    ev: &mut dyn Events,
) -> Result<u8, UsageError> {
    run_revert_gpu(g, a, w, None, ev)
}

/// `daqtune revert` with GPU control, to undo clock locks.
pub fn run_revert_gpu(
    g: &GlobalOptions,
    a: &RevertOptions,
    w: &mut dyn Writer,
    gpu: Option<&dyn gpu::GpuSetters>,
    ev: &mut dyn Events,
) -> Result<u8, UsageError> {
    run_revert_inner(g, (a, &RevertPart::default()), w, gpu, &mut NoTerminal, ev)
}

/// `daqtune revert --run ID` / `--only IDS`, with a writer that tests can fault.
pub fn run_revert_part_with(
    g: &GlobalOptions,
    a: &RevertOptions,
    part: &RevertPart,
    w: &mut dyn Writer,
    ev: &mut dyn Events,
) -> Result<u8, UsageError> {
    run_revert_inner(g, (a, part), w, None, &mut NoTerminal, ev)
}

fn run_revert_inner(
    g: &GlobalOptions,
    (a, part): (&RevertOptions, &RevertPart),
    w: &mut dyn Writer,
    gpu: Option<&dyn gpu::GpuSetters>,
    prompt: &mut dyn Prompt,
    ev: &mut dyn Events,
) -> Result<u8, UsageError> {
    let scope = part.scope()?;
    let host = open_for_change(g)?;
    let state = state_real(&host, &a.state_dir)?;
    let base = state.join("journal");
    let pending: Vec<PathBuf> = journal::list_runs(&base)
        .into_iter()
        .filter(|d| {
            journal::Journal::open(d)
                .map(|j| j.doc.state != journal::RunState::Reverted)
                .unwrap_or(true)
        })
        .collect();
    match (&scope, pending.is_empty()) {
        (revert::Scope::Run(id), true) => {
            return Err(UsageError::Other(format!(
                "revert: {}",
                revert::Refusal::NoSuchRun(id.clone())
            )))
        }
        (revert::Scope::Checks(ids), true) => {
            return Err(UsageError::Other(format!(
                "revert: {}",
                revert::Refusal::NothingFor(ids.join(","))
            )))
        }
        _ => {}
    }
    if pending.is_empty() {
        // What a run killed before its journal landed left is still removed.
        let swept = match base.is_dir().then(|| lock(&state)) {
            Some(Ok(_l)) => revert::sweep_unstarted_runs(&base, w),
            _ => Vec::new(),
        };
        ev.event(Event::Swept(&swept));
        ev.event(Event::NothingToRevert { journal: &base });
        return Ok(if swept.iter().all(|s| s.1.is_ok()) {
            0
        } else {
            1
        });
    }
    let question = Question::Revert {
        scope: &scope,
        runs: pending.len(),
    };
    if !a.yes {
        match prompt.confirm(question) {
            Ok(true) => {}
            Ok(false) => return Ok(0),
            // `plan` shows what apply would do, not what revert undoes: say that here.
            Err(UsageError::NoTerminal) => {
                return Err(UsageError::Other(revert_unconfirmed(&scope, &pending)))
            }
            Err(e) => return Err(e),
        }
    }
    let _lock = lock(&state)?;
    let rep = match revert::revert_scope(&host, &base, w, gpu, &scope) {
        Ok(rep) => rep,
        Err(e @ (revert::Refusal::NoSuchRun(_) | revert::Refusal::NothingFor(_))) => {
            return Err(UsageError::Other(format!("revert: {e}")));
        }
        Err(e) => {
            ev.event(Event::RevertRefused(&e));
            return Ok(1);
        }
    };
    ev.event(Event::Reverted(&rep));
    // A trial armed by a run now reverted (or its kernel.cmdline part) is over.
    crate::exec::trial::forget_reverted(&host, a.state_dir.as_deref().unwrap_or(STATE_DIR), w);
    let failed = rep.failed();
    if failed > 0 {
        ev.event(Event::RevertFailed(failed));
    }
    Ok(if failed == 0 { 0 } else { 1 })
}

/// `daqtune revert` on the host with the real writer and GPU control, asking through `prompt`
/// and telling `ev`.
pub fn run_revert(
    g: &GlobalOptions,
    a: &RevertOptions,
    part: &RevertPart,
    prompt: &mut dyn Prompt,
    ev: &mut dyn Events,
) -> Result<u8, UsageError> {
    let mut w = FsWriter::new();
    // GPU control only matters when a journal holds GPU entries; without NVML those entries
    // fail with the reason and the rest is reverted.
    let (live, _) = live_gpu(g, &Selection::default(), revert_gpu_tolerance(g));
    let gpu = live.as_ref().map(|l| l as &dyn gpu::GpuSetters);
    run_revert_inner(g, (a, part), &mut w, gpu, prompt, ev)
}

/// `daqtune generate KIND`: print one artifact for image builders and configuration managers.
pub fn run_generate(
    g: &GlobalOptions,
    a: &GenerateOptions,
    ev: &mut dyn Events,
) -> Result<u8, UsageError> {
    let host = open_host(g)?;
    let facts = g.facts(&host);
    let lp = crate::check::commands::choose_profile_with(&facts, g)?;
    let po = options(
        &facts,
        &lp,
        &Selection {
            exe: a.exe.clone(),
            ..Default::default()
        },
        g.profile.as_deref(),
    )?;
    let Some((_, art)) = crate::tunables::artifacts()
        .into_iter()
        .find(|(_, art)| art.kind == a.kind.name())
    else {
        return Err(UsageError::Other(format!(
            "unknown artifact kind {}",
            a.kind.name()
        )));
    };
    let cx = crate::model::tunable::GenerateCx {
        facts: &facts,
        lp: &lp,
        exe: po.exe.as_deref(),
        profile_ref: &po.profile_ref,
        interfaces: &a.interfaces,
        devices: &a.devices,
    };
    let text = (art.render)(&cx).map_err(|e| UsageError::Other(e.to_string()))?;
    // What `generate` prints is installed by someone else (an image build, a configuration
    // manager) and journaled by no apply run: revert never removes it, and its header says so.
    let text = text.replace(
        "; `daqtune revert` removes it.",
        "; printed by `daqtune generate`, so `daqtune revert` leaves it: remove it with whatever installed it.",
    );
    ev.event(Event::Generated(&text));
    Ok(0)
}

/// `daqtune trial-verify` (daqtune-trial.service, late in the boot): decide the pending
/// kernel-argument trial of this boot on the live host. Exit 0 when it was decided either way
/// (a failed trial is recorded for `status` and `check`, and the previous default stays), 1
/// when the decision could not be carried out.
pub fn run_trial_verify(
    g: &GlobalOptions,
    state_dir: Option<&str>,
    ev: &mut dyn Events,
) -> Result<u8, UsageError> {
    if g.root.is_some() {
        return Err(UsageError::Other(
            "trial-verify decides the boot of the live host; it does not run under --root".into(),
        ));
    }
    let host = Host::live();
    let dir = state_dir.unwrap_or(STATE_DIR);
    let state = state_real(&host, &Some(dir.to_string()))?;
    let _lock = lock_wait(&state, std::time::Duration::from_secs(60)).map_err(UsageError::from)?;
    trial_verify_on(
        &host,
        dir,
        &mut FsWriter::new(),
        &crate::exec::trial::Systemd,
        ev,
    )
}

/// [`run_trial_verify`] on any host, with the writer and systemd view given (tests).
pub fn trial_verify_on(
    host: &Host,
    state_dir: &str,
    w: &mut dyn Writer,
    sys: &dyn crate::exec::trial::SystemView,
    ev: &mut dyn Events,
) -> Result<u8, UsageError> {
    use crate::exec::trial::verify;
    let rep = verify(host, state_dir, w, sys).map_err(|e| UsageError::Other(e.to_string()))?;
    let live = host.is_live();
    ev.event(Event::TrialVerified { report: &rep, live });
    // Under a root the commands are listed, not run: only a live host's failure counts.
    let failed = rep
        .commands
        .iter()
        .filter(|(_, r)| live && r.is_err())
        .count();
    Ok(u8::from(failed > 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_probe::gpu::control::MockNvml;

    /// The GPU control of `apply` judges locks by the profile the run chose. It used to read
    /// `--profile` again, so a detected (or derived) profile's `clock_tolerance_mhz` was
    /// replaced by 250 whenever `--profile` was not given.
    #[test]
    fn apply_gpu_control_takes_the_chosen_profiles_tolerance() {
        let g = GlobalOptions::default();
        assert!(g.profile.is_none(), "as after detection: no --profile");
        let mut lp = crate::check::commands::load_profile("generic-dgpu").expect("built-in");
        lp.profile.gpu.clock_tolerance_mhz = 40;
        let (setters, why) = gpu_control(
            Ok::<_, String>(MockNvml::new(Vec::new())),
            gpu_tolerance(&lp),
            &[],
        );
        assert!(why.is_none());
        assert_eq!(setters.expect("setters").ctl.tolerance_mhz, 40);
        // Revert has no chosen profile: `--profile`'s, else the schema's default.
        assert_eq!(revert_gpu_tolerance(&g), 250);
    }

    /// Issue 42: a blank id from a library caller was dropped, and a selection of only blank
    /// ids became "every setting" (a whole revert, a whole apply).
    #[test]
    fn a_blank_id_in_a_selection_is_a_usage_error_not_everything() {
        for only in [
            vec![String::new()],
            vec![" ".into()],
            vec!["hugepages".into(), "".into()],
        ] {
            let part = RevertPart {
                run: None,
                only: only.clone(),
            };
            let e = part.scope().expect_err("a blank id is refused");
            assert!(e.to_string().contains("an empty check id"), "{e}");
            assert!(selected_ids(&only).is_err(), "{only:?}");
        }
        let part = RevertPart {
            run: None,
            only: vec![" hugepages ".into()],
        };
        assert!(matches!(part.scope(), Ok(revert::Scope::Checks(ids)) if ids == ["hugepages"]));
        assert!(matches!(
            RevertPart::default().scope(),
            Ok(revert::Scope::All)
        ));
    }

    #[test]
    fn no_nvml_is_said_with_its_reason() {
        let (setters, why) =
            gpu_control::<MockNvml>(Err("libnvidia-ml.so.1: not found".into()), 250, &[]);
        assert!(setters.is_none());
        assert_eq!(
            why.as_deref(),
            Some("no GPU control: libnvidia-ml.so.1: not found")
        );
    }
}
