//! The record of a kernel-argument trial boot (`/var/lib/daqtune/trial.json`, written by
//! the trial module of the executor (`exec::trial`)) and what the checks and `status` read of it: which run armed it,
//! pending / committed / failed and why, and whether this boot carries its arguments.

use crate::hostio::journal::{Entry, RunState};
use crate::model::facts::Facts;
use serde::{Deserialize, Serialize};

/// daqtune's state directory (journal, lock, the trial's record).
pub const STATE_DIR: &str = "/var/lib/daqtune";
/// The trial entry's generator in /etc/grub.d: after 10_linux and 40/41_custom, so the
/// distribution's entries keep their indexes and the default.
pub const ENTRY_SCRIPT: &str = "/etc/grub.d/42_daqtune_trial";
/// The menuentry id `next_entry` names.
pub const ENTRY_ID: &str = "daqtune-trial";
pub const UNIT: &str = "daqtune-trial.service";
pub const UNIT_PATH: &str = "/etc/systemd/system/daqtune-trial.service";
pub const UNIT_LINK: &str = "/etc/systemd/system/multi-user.target.wants/daqtune-trial.service";
/// The trial's record, under the state directory.
pub const RECORD: &str = "trial.json";
pub const SCHEMA: &str = "daqtune.trial/v1";
/// `panic=` on the trial entry: a kernel panic reboots after this many seconds, into the old
/// default (next_entry is already cleared).
pub const PANIC_SECS: u32 = 10;
/// The target the verification waits for (the unit is ordered after it).
pub const TARGET: &str = "multi-user.target";
/// The settings whose checks the verification runs: those whose values are kernel arguments.
pub const CHECKS: &[&str] = &["kernel.cmdline", "hugepages"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrialState {
    /// Armed: the next boot tries the arguments.
    Pending,
    /// The trial boot verified; the arguments are the default.
    Committed,
    /// The trial boot did not verify (or did not happen); the previous default stays.
    Failed,
}

impl TrialState {
    pub fn as_str(&self) -> &'static str {
        match self {
            TrialState::Pending => "pending",
            TrialState::Committed => "committed",
            TrialState::Failed => "failed",
        }
    }
}

/// What `/var/lib/daqtune/trial.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrialRecord {
    pub schema: String,
    /// The apply run that armed it.
    pub run: String,
    pub state: TrialState,
    /// Why it failed (or what went wrong committing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// daqtune's arguments: each must be on /proc/cmdline of the trial boot.
    pub args: Vec<String>,
    /// The whole `linux` line of the trial entry after the kernel image.
    pub entry_args: Vec<String>,
    /// The grub drop-in written at commit.
    pub dropin: String,
    /// The environment block holding `next_entry`.
    pub grubenv: String,
    /// How the verification loads the profile (a built-in name or daqtune's copy of it).
    pub profile: String,
    pub armed_unix: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_unix: Option<u64>,
}

impl TrialRecord {
    /// One line for `status` and the checks.
    pub fn describe(&self) -> String {
        let when = |t: Option<u64>| {
            t.map(daqtune_probe::text::rfc3339_utc)
                .unwrap_or_else(|| "?".into())
        };
        match self.state {
            TrialState::Pending => format!(
                "the kernel-argument trial of apply run {} is armed: the next boot tries `{}` once (grub next_entry={ENTRY_ID}); {} is written only when that boot verifies",
                self.run,
                self.args.join(" "),
                self.dropin
            ),
            TrialState::Committed => format!(
                "the kernel-argument trial of apply run {} verified at {} and was committed to {}",
                self.run,
                when(self.decided_unix),
                self.dropin
            ),
            TrialState::Failed => format!(
                "the kernel-argument trial of apply run {} FAILED at {}: {}; the previous default entry boots and {} was not written",
                self.run,
                when(self.decided_unix),
                self.reason.as_deref().unwrap_or("no reason recorded"),
                self.dropin
            ),
        }
    }
}

pub(crate) fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The record of the trial, with the state of its run: `None` when there is none, it cannot
/// be read, or its run was reverted (or its kernel.cmdline part was).
pub fn current(facts: &Facts, state_dir: &str) -> Option<TrialRecord> {
    let text = facts.read_string(&format!("{state_dir}/{RECORD}")).ok()?;
    let rec: TrialRecord = serde_json::from_str(&text).ok()?;
    if rec.schema != SCHEMA || !run_holds_trial(facts, state_dir, &rec) {
        return None;
    }
    Some(rec)
}

/// Whether the run that armed `rec` is in effect and still holds the drop-in's record.
fn run_holds_trial(facts: &Facts, state_dir: &str, rec: &TrialRecord) -> bool {
    if rec.run.contains('/') || rec.run.contains("..") {
        return false;
    }
    let Ok(text) = facts.read_string(&format!("{state_dir}/journal/{}/journal.json", rec.run))
    else {
        return false;
    };
    let Ok(doc) = serde_json::from_str::<crate::hostio::journal::JournalDoc>(&text) else {
        return false;
    };
    doc.state != RunState::Reverted
        && doc
            .records
            .iter()
            .any(|r| matches!(&r.entry, Entry::File { path, .. } if *path == rec.dropin))
}

/// The words of `rec.args` missing from the running kernel's command line (all of them when
/// it cannot be read).
pub(crate) fn missing_args<'r>(facts: &Facts, rec: &'r TrialRecord) -> Vec<&'r String> {
    let Ok(cmd) = facts.cmdline() else {
        return rec.args.iter().collect();
    };
    let has = |w: &str| {
        let (k, v) = w.split_once('=').map_or((w, None), |(k, v)| (k, Some(v)));
        let k = k.replace('-', "_");
        cmd.params
            .iter()
            .any(|p| p.key == k && p.value.as_deref() == v)
    };
    rec.args.iter().filter(|w| !has(w)).collect()
}

/// Whether the running kernel got the trial's arguments (this is the trial boot).
pub fn booted_with(facts: &Facts, rec: &TrialRecord) -> bool {
    missing_args(facts, rec).is_empty()
}
