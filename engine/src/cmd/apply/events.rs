//! What `plan`, `apply`, `revert`, `generate` and `trial-verify` have to tell the person running
//! them, as data, in the order it happens. The commands decide and report through [`Events`];
//! the words, and which stream each goes to, are the CLI's (`daqtune-render`), so the engine
//! holds no terminal text (issue 44) and a wording change touches one crate.
//!
//! The order matters: apply shows the plan *before* it asks, and refusals come between, so a
//! value returned at the end could not carry it.

use crate::exec::{apply::ApplyReport, revert, trial};
use crate::model::plan::Plan;
use std::path::Path;

/// One thing a command has to say.
#[derive(Debug)]
pub enum Event<'a> {
    /// `plan` without `--profile`: the profile it chose and why.
    ProfileChosen { name: &'a str, origin: &'a str },
    /// `apply` without `--profile`: the profile detected, before the question confirming it.
    ProfileDetected { name: &'a str, why: &'a str },
    /// The `--config` of the newest apply still in effect is kept (no `--fresh`).
    KeptConfig { run: &'a str, config: &'a str },
    /// That `--config` is gone; a runtime-only run (boot units, udev) goes on without it.
    ConfigGone { run: &'a str, config: &'a str },
    /// The `--allow-acs` of the newest apply still in effect is kept.
    KeptAllowAcs { run: &'a str },
    /// A parameter a DAQIRI configuration (`--config`) derived.
    Derived { file: &'a str, note: &'a str },
    /// The plan, as planned before any question.
    Plan(&'a Plan),
    /// `--dry-run`: the plan was shown and nothing changed.
    DryRun,
    /// The host already matches the profile.
    NothingToChange { profile: &'a str },
    /// Kernel lockdown refuses the config-space write of `check`: nothing was changed.
    LockdownRefused { check: &'a str, lockdown: &'a str },
    /// The user answered no.
    NotApplied,
    /// What apply did, step by step (`plan` is the one executed, planned again under the lock).
    Applied {
        plan: &'a Plan,
        report: &'a ApplyReport,
    },
    /// The kernel-argument trial was armed for the next boot.
    TrialRecorded(&'a str),
    /// The trial could not be recorded (counts as a failed step).
    TrialNotRecorded(&'a str),
    /// Revert found no run in effect and removed what killed runs left, step by step.
    Swept(&'a [(String, std::io::Result<()>)]),
    /// Revert found no run in effect.
    NothingToRevert { journal: &'a Path },
    /// Revert refused before changing anything.
    RevertRefused(&'a revert::Refusal),
    /// What revert did, step by step.
    Reverted(&'a revert::RevertReport),
    /// Revert ended with this many failed steps.
    RevertFailed(usize),
    /// The decision of `trial-verify`; `live`: commands that failed were run on this host
    /// (under a root they are only listed).
    TrialVerified {
        report: &'a trial::VerifyReport,
        live: bool,
    },
    /// One artifact printed by `generate`.
    Generated(&'a str),
}

/// Where a command's events go: the binary words them on its streams; a test records them.
pub trait Events {
    fn event(&mut self, e: Event<'_>);
}

/// A question the user must answer before a change.
#[derive(Debug, Clone, Copy)]
pub enum Question<'a> {
    /// Apply with the detected profile?
    UseProfile { name: &'a str },
    /// Apply this many changes?
    Apply { changes: usize },
    /// Revert this scope (`runs`: how many runs are in effect)?
    Revert {
        scope: &'a revert::Scope,
        runs: usize,
    },
}
