//! The trial boot of kernel arguments (issue 42, "a boot that fails rolls itself back").
//!
//! On a GRUB host, `apply` does not make new kernel arguments the default at once. It writes
//! a one-time entry instead:
//!
//! - `/etc/grub.d/42_daqtune_trial`: the menuentry `daqtune-trial`, a copy of the entry that
//!   boots now (its `insmod`, `search`, `initrd` lines: BIOS, UEFI and arm64 alike) whose
//!   `linux` line carries the new arguments and `panic=`[`PANIC_SECS`] (a panic reboots);
//!   update-grub puts it into grub.cfg after the distribution's entries, so it is never the
//!   default;
//! - `grubenv`'s `next_entry=daqtune-trial` (what `grub-reboot` writes; the 1024-byte block is
//!   written whole, atomically): grub.cfg's header boots that entry once and clears the
//!   variable *before* the kernel starts, so any boot after it starts the old default;
//! - `daqtune-trial.service`, a oneshot after multi-user.target running `daqtune trial-verify`
//!   (fixed argv);
//! - the grub drop-in itself is journaled but not written ([`record`]): `status` and `revert`
//!   know it, the next update-grub does not see it.
//!
//! `trial-verify` ([`verify`]) reads the record this module keeps in
//! `/var/lib/daqtune/trial.json` and checks the boot: the arguments are on `/proc/cmdline`,
//! multi-user.target is active, the data ports and the port of the default route are up, and
//! the checks of the settings the arguments carry do not fail. Then it commits (writes the
//! drop-in, removes the entry, the unit and `next_entry`, runs update-grub) or fails the trial
//! (removes the same, leaves the drop-in unwritten) and records why. Either way the files the
//! trial alone needed are back as they were before apply, and their journal records are
//! marked not in effect, so `revert` stays byte-identical and `status` shows no drift for them.

use crate::exec::apply::StepError;
use crate::hostio::journal::{Entry, Journal, Saved};
use crate::hostio::setters::Writer;
use crate::model::context::boot::{boot_config, grub_files, BootConfig, GRUB_CFGS};
use crate::model::facts::{Facts, UnitStateError, Unreadable};
use crate::model::plan::{Action, Change, NoteLevel, Plan};
use crate::model::profile::LoadedProfile;
use crate::model::verdict::Status;
use daqtune_probe::Host;
use daqtune_units::grubcfg::GrubenvError;
use daqtune_units::{grub, grubcfg};
use std::io;
use std::path::{Path, PathBuf};

pub use crate::model::context::trial::*;

const ID: &str = "kernel.cmdline";

/// Why a trial cannot be armed ([`prepare`]: the plan's `no trial boot: ...` note), recorded
/// ([`record`]: apply's `trial not recorded` line) or carried out ([`verify`]). Each variant's
/// text is the message a user reads; it is made only where the note or line is.
#[derive(Debug, thiserror::Error)]
pub enum TrialError {
    #[error("no installed daqtune binary for the verification unit")]
    NoBinary,
    #[error("no {} to take the default entry from", GRUB_CFGS[0])]
    NoGrubCfg,
    #[error("{cfg} does not clear a one-time next_entry (no `save_env next_entry` in its header: an environment block grub cannot write), so a trial entry would boot every time")]
    NoOneTimeBoot { cfg: String },
    #[error("{path} is a symlink; daqtune writes only a block it can replace")]
    GrubenvSymlink { path: String },
    /// A host file the trial is planned from that cannot be read (through the facts).
    #[error("cannot read {path}: {source}")]
    Unreadable { path: String, source: Unreadable },
    /// The grubenv is not an environment block, or the variables do not fit one.
    #[error("{path}: {source}")]
    Grubenv { path: String, source: GrubenvError },
    /// grub.cfg names no default entry that can be found (`reason`: the grub.cfg reader's).
    #[error("{cfg}: {reason}")]
    NoDefaultEntry { cfg: String, reason: String },
    #[error("{cfg}'s next boot is already daqtune's trial entry (a trial is pending): reboot first, or revert")]
    AlreadyPending { cfg: String },
    #[error("{cfg}: the entry `{title}` cannot be copied")]
    EntryNotCopied { cfg: String, title: String },
    #[error("the default entry has no linux line")]
    NoLinuxLine,
    #[error("{ENTRY_SCRIPT} exists and is not daqtune's")]
    ScriptNotOurs,
    /// The verification unit cannot be rendered from the values given.
    #[error(transparent)]
    Unit(#[from] daqtune_units::validate::InvalidValue),
    #[error("internal: the drop-in is not a file change")]
    DropinNotAFile,
    /// A path that cannot be resolved in the root, or a write that does not read back.
    #[error(transparent)]
    Step(#[from] StepError),
    /// The run's journal could not keep a copy or a record of the drop-in.
    #[error("{0}")]
    Journal(io::Error),
    /// The run's journal could not be opened or written back when deciding.
    #[error("journal of run {run}: {source}")]
    RunJournal { run: String, source: io::Error },
    #[error("{path}: the journal kept no copy of the drop-in")]
    NoDropinCopy { path: String },
    #[error("{path}: the journal's copy of the drop-in is unreadable")]
    DropinCopyUnreadable { path: String, source: io::Error },
    #[error("{path}: journal copy: {source}")]
    JournalCopy { path: String, source: io::Error },
    /// Reading, writing or removing a host file (or the trial record) failed.
    #[error("{path}: {source}")]
    Host { path: String, source: io::Error },
    #[error("{0}")]
    Encode(serde_json::Error),
}

/// A host read, write or removal of `path` that failed.
fn host_err(path: impl std::fmt::Display) -> impl FnOnce(io::Error) -> TrialError {
    move |source| TrialError::Host {
        path: path.to_string(),
        source,
    }
}

/// The grubenv at `path` is not a block, or cannot hold the variables.
fn grubenv_err(path: &str) -> impl FnOnce(GrubenvError) -> TrialError + '_ {
    move |source| TrialError::Grubenv {
        path: path.to_string(),
        source,
    }
}

/// The trial an apply arms: the drop-in change taken out of the plan (journaled by [`record`]
/// without being written) and what the record will say.
#[derive(Debug, Clone)]
pub struct Armed {
    pub dropin: Change,
    pub args: Vec<String>,
    pub entry_args: Vec<String>,
    pub grubenv: String,
    pub profile: String,
}

/// Whether a plan's kernel arguments boot once before they become the default: on a GRUB host
/// whose grub.cfg boots a `next_entry` once and clears it. Where the trial is not possible the
/// plan says why and keeps writing the drop-in directly (as `--no-trial`).
pub fn arm(
    facts: &Facts,
    lp: &LoadedProfile,
    plan: &mut Plan,
    exe: Option<&str>,
    profile_ref: &str,
    no_trial: bool,
) -> Option<Armed> {
    let BootConfig::Grub { dropin } = boot_config(facts, lp) else {
        return None;
    };
    let at = plan.changes.iter().position(|c| {
        c.check == ID && matches!(&c.action, Action::File { path, .. } if *path == dropin)
    })?;
    // The same arguments already wait for their trial boot (or it is running and its unit has
    // not decided yet): planning them again would arm a second trial over the first.
    if let Some(t) = current(facts, crate::model::context::trial::STATE_DIR) {
        let same = plan
            .kernel_args
            .as_ref()
            .is_some_and(|a| a.words() == t.args.as_slice());
        if t.state == TrialState::Pending && same {
            plan.changes.remove(at);
            plan.note(
                ID,
                NoteLevel::PendingReboot,
                format!("{} (nothing to write until it is decided)", t.describe()),
            );
            return None;
        }
    }
    if no_trial {
        plan.note(
            ID,
            NoteLevel::Info,
            format!("--no-trial: {dropin} becomes the default at once (no trial boot)"),
        );
        return None;
    }
    // A root with no grub.cfg is an image being built (or a fixture): its first boot takes the
    // drop-in as update-grub renders it there; there is no boot of this tree to try.
    if plan.target == crate::hostio::setters::Target::Root
        && GRUB_CFGS.iter().all(|p| !facts.exists(p))
    {
        return None;
    }
    let args = plan.kernel_args.clone()?;
    let new_text = match &plan.changes[at].action {
        Action::File { to, .. } => String::from_utf8_lossy(to).into_owned(),
        _ => return None,
    };
    match prepare(facts, &dropin, &new_text, &args, exe, profile_ref) {
        Ok((changes, entry_args, grubenv)) => {
            let dropin_change = plan.changes.remove(at);
            for (k, c) in changes.into_iter().enumerate() {
                plan.changes.insert(at + k, c);
            }
            plan.note(
                ID,
                NoteLevel::Info,
                format!(
                    "trial boot: the next boot starts `{}` once through the grub entry {ENTRY_ID} (panic={PANIC_SECS}); {UNIT} then checks /proc/cmdline, {TARGET}, the data and management ports and the checks of {}, and only then writes {dropin} and runs update-grub. A trial that panics, hangs (with a watchdog) or fails the checks leaves the previous default entry; --no-trial writes {dropin} now",
                    args.words().join(" "),
                    CHECKS.join(", ")
                ),
            );
            Some(Armed {
                dropin: dropin_change,
                args: args.words().to_vec(),
                entry_args,
                grubenv,
                profile: profile_ref.to_string(),
            })
        }
        Err(why) => {
            plan.note(
                ID,
                NoteLevel::Warn,
                format!("no trial boot: {why}; {dropin} becomes the default at once, as with --no-trial"),
            );
            None
        }
    }
}

/// Kernel words as the kernel sees them (`\;` is `;`).
fn kernel_words(s: &str) -> Vec<String> {
    s.split_whitespace()
        .map(|w| w.replace("\\;", ";"))
        .collect()
}

/// A word as grub.cfg writes it (`;` escaped).
fn grub_word(w: &str) -> String {
    w.replace(';', "\\;")
}

fn key(w: &str) -> &str {
    w.split_once('=').map_or(w, |(k, _)| k)
}

/// The trial's changes (entry script, grubenv, unit, its link), the entry's arguments and the
/// grubenv path; `Err` says why there can be no trial.
fn prepare(
    facts: &Facts,
    dropin: &str,
    new_text: &str,
    args: &grub::KernelArgs,
    exe: Option<&str>,
    profile_ref: &str,
) -> Result<(Vec<Change>, Vec<String>, String), TrialError> {
    let exe = exe.ok_or(TrialError::NoBinary)?;
    let (cfg_path, cfg) = GRUB_CFGS
        .iter()
        .find_map(|p| facts.read_string(p).ok().map(|t| (p.to_string(), t)))
        .ok_or(TrialError::NoGrubCfg)?;
    if !grubcfg::clears_next_entry(&cfg) {
        return Err(TrialError::NoOneTimeBoot { cfg: cfg_path });
    }
    let dir = cfg_path.rsplit_once('/').map_or("/boot/grub", |(d, _)| d);
    let env_path = format!("{dir}/grubenv");
    if facts.read_link(&env_path).is_ok() {
        return Err(TrialError::GrubenvSymlink { path: env_path });
    }
    let env_now = match facts.read_bytes(&env_path) {
        Ok(b) => Some(b.to_vec()),
        Err(e) if e.not_found => None,
        Err(source) => {
            return Err(TrialError::Unreadable {
                path: env_path,
                source,
            })
        }
    };
    let mut vars = match &env_now {
        Some(b) => grubcfg::grubenv_vars(b).map_err(grubenv_err(&env_path))?,
        None => Vec::new(),
    };
    let env_text = env_now
        .as_ref()
        .map(|b| String::from_utf8_lossy(b).into_owned());
    let entry = grubcfg::default_entry(&cfg, env_text.as_deref()).map_err(|reason| {
        TrialError::NoDefaultEntry {
            cfg: cfg_path.clone(),
            reason,
        }
    })?;
    if entry.id.as_deref() == Some(ENTRY_ID) {
        return Err(TrialError::AlreadyPending { cfg: cfg_path });
    }
    let block =
        grubcfg::entry_block(&cfg, entry.line).ok_or_else(|| TrialError::EntryNotCopied {
            cfg: cfg_path.clone(),
            title: entry.title(),
        })?;
    // The new line: the words the defaults files gave the entry, replaced by those they give
    // with the new drop-in (daqtune's words go where update-grub will put them).
    let old_line =
        kernel_words(&grub::evaluate(&grub_files(facts, dropin, None)).default_entry_line());
    let new_line = kernel_words(
        &grub::evaluate(&grub_files(facts, dropin, Some(new_text))).default_entry_line(),
    );
    let mut entry_args: Vec<String> = if !old_line.is_empty()
        && entry.args.len() >= old_line.len()
        && entry.args[entry.args.len() - old_line.len()..] == old_line[..]
    {
        let mut v = entry.args[..entry.args.len() - old_line.len()].to_vec();
        v.extend(new_line);
        v
    } else {
        // grub.cfg is not what the defaults files make (edited, or stale): keep its words,
        // less those the new arguments set, plus the new ones.
        let keys: Vec<&str> = args.words().iter().map(|w| key(w)).collect();
        let mut v: Vec<String> = entry
            .args
            .iter()
            .filter(|w| !keys.contains(&key(w)))
            .cloned()
            .collect();
        v.extend(args.words().iter().cloned());
        v
    };
    if !entry_args.iter().any(|w| key(w) == "panic") {
        entry_args.push(format!("panic={PANIC_SECS}"));
    }
    let script =
        entry_script(&block, &entry_args, &entry.title()).ok_or(TrialError::NoLinuxLine)?;
    if let Ok(cur) = facts.read_bytes(ENTRY_SCRIPT) {
        if !String::from_utf8_lossy(&cur).contains(daqtune_units::OWNER_MARK) {
            return Err(TrialError::ScriptNotOurs);
        }
    }
    vars.retain(|(k, _)| k != "next_entry");
    vars.push(("next_entry".into(), ENTRY_ID.into()));
    let env_new = grubcfg::grubenv_block(&vars).map_err(grubenv_err(&env_path))?;
    let unit = daqtune_units::systemd::Oneshot {
        name: UNIT.into(),
        description: "Verify daqtune's kernel-argument trial boot and commit it (daqtune)".into(),
        after: vec![TARGET.into()],
        wants: vec![],
        exe: exe.into(),
        args: vec!["trial-verify".into()],
        profile: profile_ref.into(),
    }
    .render()?;
    let file = |subject: &str, path: &str, to: Vec<u8>, mode: u32| Change {
        check: ID.into(),
        subject: subject.into(),
        action: Action::File {
            path: path.into(),
            from: facts.read_bytes(path).ok().map(|b| b.to_vec()),
            to,
            mode,
        },
        reboot: true,
        note: None,
    };
    let mut changes = vec![
        file("grub trial entry", ENTRY_SCRIPT, script.into_bytes(), 0o755),
        file("grub next_entry", &env_path, env_new, 0o644),
        file("trial verification", UNIT_PATH, unit.into_bytes(), 0o644),
    ];
    if facts
        .read_link(UNIT_LINK)
        .ok()
        .as_deref()
        .map(String::as_str)
        != Some(UNIT_PATH)
    {
        changes.push(Change {
            check: ID.into(),
            subject: UNIT.into(),
            action: Action::Symlink {
                path: UNIT_LINK.into(),
                target: UNIT_PATH.into(),
            },
            reboot: true,
            note: None,
        });
    }
    changes.retain(|c| !matches!(&c.action, Action::File { from: Some(f), to, .. } if f == to));
    Ok((changes, entry_args, env_path))
}

/// The /etc/grub.d script printing the trial entry: the default entry's block with its own
/// title and id, and `args` on its `linux` line.
fn entry_script(block: &[String], args: &[String], title: &str) -> Option<String> {
    let mut body = Vec::new();
    let mut linux_done = false;
    for l in &block[1..] {
        let t = l.trim_start();
        let first = t.split_whitespace().next().unwrap_or("");
        if !linux_done && matches!(first, "linux" | "linux16" | "linuxefi") {
            let indent = &l[..l.len() - t.len()];
            let mut it = t.split_whitespace();
            let (cmd, image) = (it.next().unwrap_or(""), it.next().unwrap_or(""));
            let words: Vec<String> = args.iter().map(|w| grub_word(w)).collect();
            body.push(format!("{indent}{cmd}\t{image} {}", words.join(" ")));
            linux_done = true;
        } else {
            body.push(l.clone());
        }
    }
    if !linux_done {
        return None;
    }
    let title = format!("daqtune trial of {}", title.replace(['\'', '\n'], ""));
    Some(format!(
        "#!/bin/sh\n# {} for a one-time trial boot (grub next_entry={ENTRY_ID}); daqtune removes it when the trial is decided, `daqtune revert` too.\nexec tail -n +4 \"$0\"\nmenuentry '{title}' $menuentry_id_option '{ENTRY_ID}' {{\n{}\n",
        daqtune_units::OWNER_MARK,
        body.join("\n")
    ))
}

/// After apply executed a plan with a trial: journal the drop-in without writing it (revert
/// then knows the original; the record is not in effect until the commit marks it) and write
/// the trial's record. `Err`: what could not be recorded (the trial is then not armed).
pub fn record(
    host: &Host,
    state: &Path,
    journal: &mut Journal,
    w: &mut dyn Writer,
    armed: &Armed,
    rep: &crate::exec::apply::ApplyReport,
) -> Result<String, TrialError> {
    let Action::File { path, to, .. } = &armed.dropin.action else {
        return Err(TrialError::DropinNotAFile);
    };
    let trial_failed: Vec<String> = rep
        .outcomes
        .iter()
        .filter(|o| o.check == ID)
        .filter_map(|o| o.result.as_ref().err().cloned())
        .collect();
    let real = crate::exec::apply::real_path(host, path, false)?;
    let original = match std::fs::read(&real) {
        Ok(b) => Some(Saved {
            blob: journal.save_blob(w, &b).map_err(TrialError::Journal)?,
            mode: 0o644,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(host_err(path)(e)),
    };
    let written = journal.save_written(w, to).map_err(TrialError::Journal)?;
    let created_dir = first_missing_dir(&real, host.root()).map(|d| host_rel(host, &d));
    // The drop-in is built from per-setting words (hostio::parts): journal which settings this
    // write changes, as exec::apply does for a drop-in it writes at once, so a partial revert
    // after the commit takes out exactly those words.
    let before = std::fs::read(&real).ok();
    let mut owners = crate::hostio::parts::changed_owners(
        crate::hostio::parts::Format::GrubDropin,
        before.as_deref().map(String::from_utf8_lossy).as_deref(),
        Some(&String::from_utf8_lossy(to)),
    );
    if owners.is_empty() {
        owners.push(ID.to_string());
    }
    let parts = Some(crate::hostio::parts::FileParts {
        format: crate::hostio::parts::Format::GrubDropin,
        owners,
    });
    journal.current_check = Some(ID.into());
    journal
        .record(
            w,
            Entry::File {
                path: path.clone(),
                original,
                created_dir,
                link: None,
                written: Some(written),
                parts,
            },
        )
        .map_err(TrialError::Journal)?;
    journal.current_check = None;
    let mut rec = TrialRecord {
        schema: SCHEMA.into(),
        run: journal.doc.id.clone(),
        state: TrialState::Pending,
        reason: None,
        args: armed.args.clone(),
        entry_args: armed.entry_args.clone(),
        dropin: path.clone(),
        grubenv: armed.grubenv.clone(),
        profile: armed.profile.clone(),
        armed_unix: now_unix(),
        decided_unix: None,
    };
    if !trial_failed.is_empty() {
        rec.state = TrialState::Failed;
        rec.reason = Some(format!(
            "apply could not arm it: {}",
            trial_failed.join("; ")
        ));
        rec.decided_unix = Some(rec.armed_unix);
    }
    write_record(state, w, &rec)?;
    Ok(rec.describe())
}

fn write_record(state: &Path, w: &mut dyn Writer, rec: &TrialRecord) -> Result<(), TrialError> {
    let text = serde_json::to_vec_pretty(rec).map_err(TrialError::Encode)?;
    let path = state.join(RECORD);
    w.write_file(&path, &text, 0o644)
        .map_err(host_err(path.display()))
}

/// The first ancestor of `p` (up to `stop`) that does not exist: what creating `p` adds.
fn first_missing_dir(p: &Path, stop: &Path) -> Option<PathBuf> {
    let mut missing = None;
    let mut cur = p.parent();
    while let Some(d) = cur {
        if d == stop || d.exists() {
            break;
        }
        missing = Some(d.to_path_buf());
        cur = d.parent();
    }
    missing
}

fn host_rel(host: &Host, real: &Path) -> String {
    if host.is_live() {
        return real.display().to_string();
    }
    match real.strip_prefix(host.root()) {
        Ok(r) => format!("/{}", r.display()),
        Err(_) => real.display().to_string(),
    }
}

/// A revert took the run (or its kernel.cmdline part) back: the record goes with it.
pub fn forget_reverted(host: &Host, state_dir: &str, w: &mut dyn Writer) {
    let facts = Facts::new(host);
    let path = format!("{state_dir}/{RECORD}");
    if facts.exists(&path) && current(&facts, state_dir).is_none() {
        if let Ok(real) = crate::exec::apply::real_path(host, &path, false) {
            let _ = w.remove(&real);
        }
    }
}

/// What systemd says about the boot (the live host: systemd over D-Bus, as
/// `daqtune.artifacts` asks it; tests answer themselves).
pub trait SystemView {
    /// The target's `ActiveState` (`active`, `inactive`, `failed`, ...).
    fn target_state(&self, facts: &Facts, target: &str) -> Result<String, UnitStateError>;
    /// The units in the failed state, where they can be listed (for the message only).
    fn failed_units(&self, facts: &Facts) -> Vec<String>;
}

/// The live host's systemd, through [`Facts::unit_state`] (D-Bus; never `systemctl`).
pub struct Systemd;

impl SystemView for Systemd {
    fn target_state(&self, facts: &Facts, target: &str) -> Result<String, UnitStateError> {
        facts.unit_state(target).map(|u| u.active_state)
    }
    fn failed_units(&self, _facts: &Facts) -> Vec<String> {
        // Listing every unit is not asked of systemd here: the target's state decides, and
        // `systemctl --failed` names the culprits.
        Vec::new()
    }
}

/// What `trial-verify` decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to decide (no pending trial), and why.
    Nothing(String),
    Committed,
    Failed(String),
}

#[derive(Debug, Clone)]
pub struct VerifyReport {
    pub decision: Decision,
    /// What was done to the files, one line each.
    pub done: Vec<String>,
    /// The commands the decision needs on the live host (update-grub), with their results
    /// where they ran; under a root they are listed, not run.
    pub commands: Vec<(String, Result<(), String>)>,
}

/// `daqtune trial-verify`: decide the pending trial of this boot.
pub fn verify(
    host: &Host,
    state_dir: &str,
    w: &mut dyn Writer,
    sys: &dyn SystemView,
) -> Result<VerifyReport, TrialError> {
    let facts = Facts::new(host);
    let Some(rec) = current(&facts, state_dir) else {
        return Ok(VerifyReport {
            decision: Decision::Nothing("no kernel-argument trial recorded".into()),
            done: Vec::new(),
            commands: Vec::new(),
        });
    };
    if rec.state != TrialState::Pending {
        return Ok(VerifyReport {
            decision: Decision::Nothing(rec.describe()),
            done: Vec::new(),
            commands: Vec::new(),
        });
    }
    let problems = judge(host, &facts, state_dir, &rec, sys);
    let state = crate::exec::apply::real_path(host, state_dir, true)?;
    let commit = problems.is_empty();
    let mut done = settle(host, &state, &rec, w, commit)?;
    let mut rec = rec;
    rec.decided_unix = Some(now_unix());
    let decision = if commit {
        rec.state = TrialState::Committed;
        Decision::Committed
    } else {
        rec.state = TrialState::Failed;
        rec.reason = Some(problems.join("; "));
        Decision::Failed(problems.join("; "))
    };
    write_record(&state, w, &rec)?;
    done.push(rec.describe());
    let commands = if host.is_live() {
        crate::exec::apply::commands_for(true, false, false)
            .into_iter()
            .map(|(l, r)| (l, r.map_err(|e| e.to_string())))
            .collect()
    } else {
        vec![(
            "update-grub".to_string(),
            Err("not run under --root: run it on that host".to_string()),
        )]
    };
    Ok(VerifyReport {
        decision,
        done,
        commands,
    })
}

/// Why the trial boot does not verify (empty: it does).
fn judge(
    host: &Host,
    facts: &Facts,
    state_dir: &str,
    rec: &TrialRecord,
    sys: &dyn SystemView,
) -> Vec<String> {
    let mut problems = Vec::new();
    if let Err(e) = facts.cmdline() {
        return vec![format!("cannot read /proc/cmdline: {e}")];
    }
    let missing = missing_args(facts, rec);
    if !missing.is_empty() {
        // Not the trial boot: grub cleared next_entry when it chose the trial entry, so this is
        // the boot after a trial that panicked, hung or lost power, or grub never found the
        // entry. Nothing else of this boot says anything about the arguments.
        return vec![format!(
            "this boot does not carry `{}` on /proc/cmdline: the trial entry did not boot, or its boot ended before {UNIT} ran (a panic, a hang, a power loss), and grub started the previous default",
            missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")
        )];
    }
    match sys.target_state(facts, TARGET) {
        Ok(s) if s == "active" => {}
        Ok(s) => {
            let failed = sys.failed_units(facts);
            problems.push(format!(
                "{TARGET} was not reached ({s}){}",
                if failed.is_empty() {
                    String::new()
                } else {
                    format!("; failed units: {}", failed.join(" "))
                }
            ));
        }
        Err(e) => problems.push(format!("cannot tell whether {TARGET} was reached: {e}")),
    }
    let profile = load_profile(host, &rec.profile);
    let lp = match profile {
        Ok(lp) => lp,
        Err(e) => {
            problems.push(format!("cannot load the profile {}: {e}", rec.profile));
            return problems;
        }
    };
    match ports(facts, &lp) {
        Ok(ports) => {
            for (role, ifname) in ports {
                let Some(first) = port_down(facts, &ifname) else {
                    continue;
                };
                // NetworkManager (and networkd) bring a port up after the boot's jobs are done,
                // and this unit runs after multi-user.target, with no wait-online service on
                // many hosts: a port still coming up is read again, each time afresh (Facts
                // keeps what it read), for up to PORT_UP_WAIT before the trial fails on it.
                // Found by tests/vm/host-lifecycle.sh --variant nm (issue 45).
                let live = host.is_live();
                let e = if live {
                    wait_up(
                        first,
                        || port_down(&Facts::new(host), &ifname),
                        PORT_UP_WAIT.as_secs(),
                        std::time::Duration::from_secs(1),
                    )
                } else {
                    Some(first)
                };
                if let Some(e) = e {
                    let waited = if live {
                        format!(" (waited {} s for it)", PORT_UP_WAIT.as_secs())
                    } else {
                        String::new()
                    };
                    problems.push(format!("{role} {ifname} is not up: {e}{waited}"));
                }
            }
        }
        Err(e) => problems.push(format!("the data ports cannot be told: {e}")),
    }
    // The checks of the settings this run changed among those carried by kernel arguments
    // (`--only kernel.cmdline` leaves the hugepage mount to another run: not judged here).
    let in_run: Vec<String> = facts
        .read_string(&format!("{}/journal/{}/journal.json", state_dir, rec.run))
        .ok()
        .and_then(|t| serde_json::from_str::<crate::hostio::journal::JournalDoc>(&t).ok())
        .map(|d| d.records.into_iter().filter_map(|r| r.check).collect())
        .unwrap_or_default();
    let ctx = crate::model::context::Context::with_facts(facts, &lp);
    for id in CHECKS
        .iter()
        .filter(|c| **c == ID || in_run.iter().any(|r| r == *c))
    {
        let Some(t) = crate::tunables::find(id) else {
            continue;
        };
        for v in (t.check)(&ctx) {
            if v.status == Status::Fail {
                problems.push(format!(
                    "check {} fails on {}: {}",
                    v.id, v.subject, v.message
                ));
            }
        }
    }
    problems
}

/// The profile by built-in name, or a file inside the host root.
fn load_profile(host: &Host, p: &str) -> Result<LoadedProfile, crate::check::commands::UsageError> {
    if p.starts_with('/') && !host.is_live() {
        let real = crate::exec::apply::real_path(host, p, true)
            .map_err(|e| crate::check::commands::UsageError::Other(e.to_string()))?;
        return crate::check::commands::load_profile(&real.display().to_string());
    }
    crate::check::commands::load_profile(p)
}

/// The ports that must be up: the data ports (the profile's, else every ConnectX port), and
/// the port of the IPv4 default route (the management port), when there is one.
fn ports(
    facts: &Facts,
    lp: &LoadedProfile,
) -> Result<Vec<(&'static str, String)>, crate::model::context::nics::PortsError> {
    let mut v: Vec<(&'static str, String)> =
        crate::model::context::nics::data_interfaces(facts, lp)?
            .into_iter()
            .map(|(i, _, _)| ("data port", i))
            .collect();
    if let Ok(route) = facts.read_string("/proc/net/route") {
        for l in route.lines().skip(1) {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() > 2 && f[1] == "00000000" && !v.iter().any(|(_, i)| i == f[0]) {
                v.push(("management port", f[0].to_string()));
                break;
            }
        }
    }
    Ok(v)
}

/// How long the verification waits for a data port that a network manager is still bringing up.
pub const PORT_UP_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Reads `down` again every `pause`, at most `tries` times, until it says the port is up
/// (`None`); what it said last otherwise (`first` when it is never read).
fn wait_up(
    first: String,
    mut down: impl FnMut() -> Option<String>,
    tries: u64,
    pause: std::time::Duration,
) -> Option<String> {
    let mut last = first;
    for _ in 0..tries {
        std::thread::sleep(pause);
        match down() {
            None => return None,
            Some(e) => last = e,
        }
    }
    Some(last)
}

/// Why a port is not up (`None`: it is): operstate `up`, or `unknown` (drivers that do not
/// report it) with IFF_UP, is up.
fn port_down(facts: &Facts, ifname: &str) -> Option<String> {
    if ifname.contains('/') || ifname.starts_with('.') {
        return Some("not an interface name".into());
    }
    let state = match facts.read_attr(&format!("/sys/class/net/{ifname}/operstate")) {
        Ok(s) => s,
        Err(e) => return Some(e.message),
    };
    match state.as_str() {
        "up" => None,
        "unknown" => {
            let flags = facts
                .read_attr(&format!("/sys/class/net/{ifname}/flags"))
                .ok()
                .and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok());
            if flags.is_some_and(|f| f & 1 == 1) {
                None
            } else {
                Some("operstate unknown and not administratively up".into())
            }
        }
        s => Some(format!("operstate {s}")),
    }
}

/// The decision on the files: the entry, its unit and `next_entry` go back to what they were
/// before apply (their records marked not in effect); at commit the drop-in is written (its
/// record marked in effect).
fn settle(
    host: &Host,
    state: &Path,
    rec: &TrialRecord,
    w: &mut dyn Writer,
    commit: bool,
) -> Result<Vec<String>, TrialError> {
    let run_journal = |source| TrialError::RunJournal {
        run: rec.run.clone(),
        source,
    };
    let mut j = Journal::open(&state.join("journal").join(&rec.run)).map_err(run_journal)?;
    let mut done = Vec::new();
    let real = |p: &str| crate::exec::apply::real_path(host, p, false);
    for (k, r) in j.doc.records.clone().into_iter().enumerate() {
        match &r.entry {
            Entry::File {
                path,
                original: None,
                ..
            } if path == ENTRY_SCRIPT || path == UNIT_PATH => {
                w.remove(&real(path)?).map_err(host_err(path))?;
                done.push(format!("removed {path}"));
            }
            Entry::Symlink {
                path,
                original: None,
                ..
            } if path == UNIT_LINK => {
                w.remove(&real(path)?).map_err(host_err(path))?;
                done.push(format!("removed {path}"));
            }
            Entry::File {
                path,
                original,
                written,
                ..
            } if *path == rec.grubenv => {
                done.push(restore_grubenv(
                    &j,
                    w,
                    &real(path)?,
                    path,
                    original,
                    written,
                )?);
            }
            Entry::File { path, written, .. } if *path == rec.dropin => {
                if commit {
                    let copy = written
                        .as_ref()
                        .ok_or_else(|| TrialError::NoDropinCopy { path: path.clone() })?;
                    let bytes =
                        j.blob(copy)
                            .map_err(|source| TrialError::DropinCopyUnreadable {
                                path: path.clone(),
                                source,
                            })?;
                    let p = real(path)?;
                    w.write_file(&p, &bytes, 0o644).map_err(host_err(path))?;
                    crate::exec::apply::file_reads_back(&p, path, &bytes)?;
                    done.push(format!("wrote {path}"));
                    j.doc.records[k].done = true;
                }
                continue;
            }
            _ => continue,
        }
        // Back as before apply: not in effect (status reads no drift for it; revert, which
        // replays every record, finds nothing left to do).
        j.doc.records[k].done = false;
    }
    j.flush(w).map_err(run_journal)?;
    Ok(done)
}

/// `next_entry` out of the environment block: the bytes from before apply where nothing but
/// grub's clearing of `next_entry` changed it since, else the block as it is without daqtune's
/// `next_entry` (someone set another variable since: that is kept).
fn restore_grubenv(
    j: &Journal,
    w: &mut dyn Writer,
    real: &Path,
    path: &str,
    original: &Option<Saved>,
    written: &Option<String>,
) -> Result<String, TrialError> {
    let now = match std::fs::read(real) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(host_err(path)(e)),
    };
    let others = |b: &[u8]| {
        grubcfg::grubenv_vars(b).ok().map(|v| {
            v.into_iter()
                .filter(|(k, _)| k != "next_entry")
                .collect::<Vec<_>>()
        })
    };
    let ours = written.as_ref().and_then(|b| j.blob(b).ok());
    let untouched = match (&now, &ours) {
        (Some(n), Some(o)) => n == o || others(n).is_some_and(|x| Some(x) == others(o)),
        _ => false,
    };
    if untouched {
        match original {
            Some(s) => {
                let b = j.blob(&s.blob).map_err(|source| TrialError::JournalCopy {
                    path: path.to_string(),
                    source,
                })?;
                w.write_file(real, &b, s.mode).map_err(host_err(path))?;
                Ok(format!("restored {path} as it was before apply"))
            }
            None => {
                w.remove(real).map_err(host_err(path))?;
                Ok(format!("removed {path} (apply created it)"))
            }
        }
    } else if let Some(n) = now {
        let Ok(mut vars) = grubcfg::grubenv_vars(&n) else {
            return Ok(format!(
                "{path} is no longer an environment block; left as it is"
            ));
        };
        let before = vars.len();
        vars.retain(|(k, v)| !(k == "next_entry" && v == ENTRY_ID));
        if vars.len() == before {
            return Ok(format!("{path} changed since apply; left as it is"));
        }
        let b = grubcfg::grubenv_block(&vars).map_err(grubenv_err(path))?;
        w.write_file(real, &b, 0o644).map_err(host_err(path))?;
        Ok(format!("removed next_entry={ENTRY_ID} from {path} (its other variables changed since apply and are kept)"))
    } else {
        Ok(format!("{path} is gone; nothing to restore"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port a network manager brings up after the unit started (found in the nm lifecycle
    /// guest: NetworkManager activated daqtune's keyfile after multi-user.target, and the trial
    /// failed on "operstate down") is waited for; one that stays down fails with what it said
    /// last.
    #[test]
    fn a_port_coming_up_is_waited_for() {
        let mut reads = vec![None, Some("operstate lowerlayerdown".to_string())];
        let up = wait_up(
            "operstate down".into(),
            || reads.pop().flatten(),
            5,
            std::time::Duration::ZERO,
        );
        assert_eq!(up, None);
        let mut n = 0;
        let down = wait_up(
            "operstate down".into(),
            || {
                n += 1;
                Some(format!("operstate down ({n})"))
            },
            3,
            std::time::Duration::ZERO,
        );
        assert_eq!(down.as_deref(), Some("operstate down (3)"));
        assert_eq!(n, 3);
    }
}
