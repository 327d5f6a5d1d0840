//! `daqtune status`: what daqtune has applied and whether it still holds (tuned-adm's
//! `active` and `verify`): the apply runs in effect from the journals (when, by which version,
//! with which options), the profile in effect, what waits for a reboot (the checks of the
//! applied settings, judged as `check` does: [`crate::check::run_info::pending_reboot`]), and drift:
//! each value and file a run wrote, read again now and compared with what was written.
//!
//! Only the newest write of a thing counts: a file two runs wrote is compared with the later
//! run's bytes. Records `revert --only` undid are no longer in a run's `records`.

use crate::check::commands::{GlobalOptions, UsageError};
use crate::check::run_info::rfc3339;
use crate::cmd::apply::STATE_DIR;
use crate::exec::apply::{read_word, real_path};
use crate::hostio::journal::{list_runs, Entry, Journal, JournalDoc, Record, RunState};
use crate::hostio::setters;
use crate::hostroot::open_host;
use crate::model::facts::Facts;
use daqtune_probe::Host;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

pub const SCHEMA: &str = "daqtune.status/v1";

#[derive(Debug, Clone, Default)]
pub struct StatusOptions {
    /// Journal directory's parent (host path; default /var/lib/daqtune).
    pub state_dir: Option<String>,
}

/// The status report (`daqtune.status/v1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub schema: String,
    pub daqtune_version: String,
    /// The host root read (`/` on the live host).
    pub root: String,
    /// The profile of the newest run in effect; `None`: nothing applied.
    pub profile: Option<String>,
    /// The apply runs in effect, oldest first.
    pub runs: Vec<RunStatus>,
    /// Check ids whose applied change waits for a reboot (the checks' `pending-reboot`
    /// verdicts, judged with `judged_with`).
    pub pending_reboot: Vec<String>,
    /// The profile the pending-reboot verdicts were judged with, and where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged_with: Option<String>,
    /// Every setting the runs in effect wrote, read again now.
    pub settings: Vec<Setting>,
    /// Journals that could not be read (path and why): the runs they hold are not shown.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<String>,
    /// The kernel-argument trial of a run in effect (`/var/lib/daqtune/trial.json`): pending,
    /// committed, or failed and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial: Option<crate::exec::trial::TrialRecord>,
    pub summary: Summary,
    /// The command that puts the drifted settings back (`apply --only` with their ids);
    /// `None` when nothing drifted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStatus {
    pub id: String,
    pub profile: String,
    /// `applied`, `partial` (some changes failed) or `applying` (interrupted).
    pub state: String,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// `None`: the journal is from a daqtune that did not record its version.
    pub daqtune_version: Option<String>,
    /// Where the profile came from, as the run said (`None`: not recorded).
    pub profile_origin: Option<String>,
    /// The options of the run as command-line words (`--only pcie.mrrs`); `None`: not
    /// recorded by the daqtune that made it.
    pub options: Option<Vec<String>>,
    /// The checks whose changes the run holds.
    pub checks: Vec<String>,
    /// How many changes it holds (completed journal records).
    pub changes: usize,
    /// What the run said waited for a reboot when it finished.
    pub pending_reboot_at_apply: Vec<String>,
    /// Checks of this run undone by `revert --only`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undone: Vec<String>,
}

/// One thing a run wrote, read again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    pub run: String,
    /// The check whose change it is (`?`: an old journal did not say).
    pub check: String,
    /// What was changed: `file /etc/...`, `attribute /sys/...`, `MTU of eth0`, ...
    pub what: String,
    /// `held` (reads as written), `drift` (changed since), `unknown` (cannot be read here,
    /// with `detail` saying why).
    pub state: SettingState,
    /// What was written (short form), if it can be said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<String>,
    /// What is there now (short form), if it can be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now: Option<String>,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SettingState {
    Held,
    Drift,
    Unknown,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub runs: usize,
    pub held: usize,
    pub drift: usize,
    pub unknown: usize,
}

impl Status {
    /// 0: no drift; 1: some setting changed behind daqtune's back.
    pub fn exit_code(&self) -> u8 {
        u8::from(self.summary.drift > 0)
    }
}

/// Reads the journals under the host's state directory and re-reads what they wrote.
pub fn gather(g: &GlobalOptions, a: &StatusOptions) -> Result<Status, UsageError> {
    let host = open_host(g)?;
    let dir = a.state_dir.clone().unwrap_or_else(|| STATE_DIR.to_string());
    if !dir.starts_with('/') {
        return Err(UsageError::Other(format!(
            "--state-dir {dir}: must be absolute"
        )));
    }
    let mut st = Status {
        schema: SCHEMA.into(),
        daqtune_version: env!("CARGO_PKG_VERSION").into(),
        root: host.shown_root(),
        profile: None,
        runs: Vec::new(),
        pending_reboot: Vec::new(),
        judged_with: None,
        settings: Vec::new(),
        unreadable: Vec::new(),
        trial: None,
        summary: Summary::default(),
        restore: None,
    };
    let base = match real_path(&host, &format!("{dir}/journal"), true) {
        Ok(b) => b,
        // No state directory (or one that leads outside the root): nothing applied.
        Err(_) => return Ok(st),
    };
    if let Err(e) = std::fs::read_dir(&base) {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(UsageError::Other(format!(
                "cannot read the journal directory {dir}/journal: {e}"
            )));
        }
    }
    let mut runs: Vec<Journal> = Vec::new();
    for d in list_runs(&base) {
        match Journal::open(&d) {
            Ok(j) if j.doc.state == RunState::Reverted => {}
            Ok(j) => runs.push(j),
            Err(e) => st.unreadable.push(format!("{}: {e}", d.display())),
        }
    }
    st.runs = runs.iter().map(|j| run_status(&j.doc)).collect();
    st.profile = runs.last().map(|j| j.doc.profile.clone());
    st.settings = settings(&host, &runs);
    st.trial = crate::exec::trial::current(&g.facts(&host), &dir);
    if !runs.is_empty() {
        judge_pending(&host, g, &runs, &mut st);
    }
    st.summary = Summary {
        runs: st.runs.len(),
        held: count(&st.settings, SettingState::Held),
        drift: count(&st.settings, SettingState::Drift),
        unknown: count(&st.settings, SettingState::Unknown),
    };
    st.restore = restore_command(&st, a);
    Ok(st)
}

/// The ids (`apply --only`) of the settings that drifted, in registry order. Settings an old
/// journal recorded without their check (`?`) have no id to give.
pub fn drifted_ids(st: &Status) -> Vec<String> {
    let drifted: BTreeSet<&str> = st
        .settings
        .iter()
        .filter(|x| x.state == SettingState::Drift && x.check != "?")
        .map(|x| x.check.as_str())
        .collect();
    crate::tunables::apply_ids()
        .into_iter()
        .filter(|id| drifted.contains(id))
        .map(str::to_string)
        .collect()
}

/// `sudo daqtune apply --profile P --only IDS` for what drifted, with `--root` and
/// `--state-dir` where they are not the defaults; every host value shell-quoted.
fn restore_command(st: &Status, a: &StatusOptions) -> Option<String> {
    if st.summary.drift == 0 {
        return None;
    }
    let ids = drifted_ids(st);
    let q = daqtune_probe::text::shell_quote;
    let mut cmd = "sudo daqtune apply".to_string();
    if st.root != "/" {
        cmd.push_str(&format!(" --root {}", q(&st.root)));
    }
    // The profile as the newest run was given it (`--profile NAME|FILE`); a run that detected
    // its profile is given the name it used.
    let profile = st
        .runs
        .last()
        .and_then(|r| r.profile_origin.as_deref())
        .and_then(|o| o.strip_prefix("--profile "))
        .map(str::to_string)
        .or_else(|| st.profile.clone())?;
    cmd.push_str(&format!(" --profile {}", q(&profile)));
    if let Some(d) = &a.state_dir {
        cmd.push_str(&format!(" --state-dir {}", q(d)));
    }
    if ids.is_empty() {
        // Only settings of an old journal that did not name their check drifted.
        return Some(cmd);
    }
    cmd.push_str(&format!(" --only {}", ids.join(",")));
    Some(cmd)
}

/// `apply --only drifted` (and `plan --only drifted`): the selection with `drifted` replaced
/// by the ids of the settings that drifted. `Ok(None)`: `drifted` was asked for and nothing
/// drifted (the caller says so and changes nothing); a selection without it is returned as is.
pub fn expand_drifted(
    g: &GlobalOptions,
    sel: &crate::cmd::apply::Selection,
    state_dir: &Option<String>,
) -> Result<Option<crate::cmd::apply::Selection>, UsageError> {
    if !sel.only.iter().any(|o| o == DRIFTED) {
        return Ok(Some(sel.clone()));
    }
    let st = gather(
        g,
        &StatusOptions {
            state_dir: state_dir.clone(),
        },
    )?;
    let ids = drifted_ids(&st);
    if ids.is_empty() {
        if st.summary.drift > 0 {
            return Err(UsageError::Other(format!(
                "{} setting(s) drifted, but the journal that wrote them names no check: run `daqtune apply` without --only to write every setting again",
                st.summary.drift
            )));
        }
        return Ok(None);
    }
    let mut out = sel.clone();
    out.only = out
        .only
        .iter()
        .filter(|o| *o != DRIFTED)
        .cloned()
        .chain(ids)
        .collect::<BTreeSet<String>>()
        .into_iter()
        .collect();
    Ok(Some(out))
}

/// The word `--only` takes for "what `status` shows as drift".
pub const DRIFTED: &str = "drifted";

fn count(s: &[Setting], state: SettingState) -> usize {
    s.iter().filter(|x| x.state == state).count()
}

fn run_status(doc: &JournalDoc) -> RunStatus {
    let ids = |recs: &[Record]| -> Vec<String> {
        let set: BTreeSet<String> = recs
            .iter()
            .flat_map(|r| match r.checks() {
                c if c.is_empty() => vec!["?".to_string()],
                c => c.into_iter().map(str::to_string).collect(),
            })
            .collect();
        set.into_iter().collect()
    };
    RunStatus {
        id: doc.id.clone(),
        profile: doc.profile.clone(),
        state: match doc.state {
            RunState::Applying => "applying",
            RunState::Applied => "applied",
            RunState::Partial => "partial",
            RunState::Reverted => "reverted",
        }
        .into(),
        started_at: rfc3339(doc.started_unix),
        finished_at: doc.finished_unix.map(rfc3339),
        daqtune_version: doc.daqtune_version.clone(),
        profile_origin: doc.options.as_ref().map(|o| o.profile_origin.clone()),
        options: doc.options.as_ref().map(|o| o.words(&doc.selection)),
        checks: ids(&doc.records),
        changes: doc.records.iter().filter(|r| r.done).count(),
        pending_reboot_at_apply: doc.pending_reboot.clone(),
        undone: ids(&doc.undone),
    }
}

/// Every completed record of the runs in effect, newest write of each thing only, re-read.
fn settings(host: &Host, runs: &[Journal]) -> Vec<Setting> {
    // One reader for every record, so the ethtool netlink socket is opened once per run.
    let facts = Facts::new(host);
    let booted = daqtune_probe::system::boot_time(host);
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for j in runs.iter().rev() {
        for rec in j.doc.records.iter().rev().filter(|r| r.done) {
            let k = crate::exec::revert::entry_key(&rec.entry);
            if !seen.insert(k.clone()) {
                continue;
            }
            let earlier_boot = booted.is_some_and(|b| j.doc.started_unix < b);
            let (state, applied, now, detail) = match &rec.entry {
                Entry::Attr { path, .. } if earlier_boot && path.starts_with("/proc/irq/") => {
                    unknown("pinned in an earlier boot: IRQ numbers are given out again at every boot, so this one may be another device's now; `daqtune check irq.affinity` judges the port's IRQs as they are")
                }
                e => reread(host, &facts, j, e),
            };
            out.push(Setting {
                run: j.doc.id.clone(),
                check: rec.check.clone().unwrap_or_else(|| "?".into()),
                what: k,
                state,
                applied,
                now,
                detail,
            });
        }
    }
    out.reverse();
    out
}

type Reread = (SettingState, Option<String>, Option<String>, String);

fn unknown(why: impl Into<String>) -> Reread {
    (SettingState::Unknown, None, None, why.into())
}

/// A value for a one-line report: trimmed, at most 60 characters.
fn short(v: &str) -> String {
    let t = v.trim();
    if t.chars().count() > 60 {
        format!("{}...", t.chars().take(57).collect::<String>())
    } else {
        t.to_string()
    }
}

/// The selected word of a kernel choice file (`always madvise [never]` -> `never`: THP's
/// `enabled` and `defrag` show every mode and bracket the one in effect, while a write is the
/// bare word).
fn selected(text: &str) -> Option<&str> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
}

fn held_or_drift(same: bool, applied: String, now: String, drift: &str) -> Reread {
    if same {
        (
            SettingState::Held,
            Some(applied),
            Some(now),
            "as applied".into(),
        )
    } else {
        (SettingState::Drift, Some(applied), Some(now), drift.into())
    }
}

/// An IRQ's affinity that reads a part of the CPUs applied: held. When a driver requests its
/// IRQs again (at boot, or when a port is re-initialised) the kernel starts them from the
/// default affinity (`irqaffinity=`) narrowed to the CPUs of the device's NUMA node where the
/// two meet (`irq_setup_affinity`, kernel/irq/manage.c): `0-2` applied reads `2` on a port of
/// node1 = CPUs 2-3. The IRQ still runs only where the pinning allowed it to.
fn irq_narrowed(path: &str, now: &str, applied: &str) -> bool {
    if !(path.starts_with("/proc/irq/") && path.ends_with("/smp_affinity_list")) {
        return false;
    }
    let parse = |t: &str| daqtune_probe::cpulist::parse_cpulist(t.trim(), None).ok();
    match (parse(now), parse(applied)) {
        (Some(n), Some(a)) => !n.is_empty() && n.is_subset(&a),
        _ => false,
    }
}

/// For a node's hugepage pool, the pages of that size on the whole host. The kernel divides
/// a boot reservation (`hugepages=N`, which this setting also writes) evenly between the
/// nodes, so after a boot the node a run reserved on at run time holds part of them and the
/// others the rest: the pages are there, the node's count alone is no drift.
fn spread_pool(host: &Host, path: &str) -> Option<u64> {
    let g = crate::tunables::hugepages::pool_of_node_pool(path)?;
    host.read_string(&g).ok()?.trim().parse().ok()
}

/// One record's thing read again now, against what the run wrote.
fn reread(host: &Host, facts: &Facts, j: &Journal, e: &Entry) -> Reread {
    match e {
        Entry::File { path, written, .. } => {
            let Some(blob) = written else {
                return unknown(
                    "the journal is from a daqtune that did not keep what it wrote; `daqtune check` judges the file",
                );
            };
            let want = match j.blob(blob) {
                Ok(b) => b,
                Err(e) => return unknown(format!("the journal's copy is unreadable: {e}")),
            };
            let Ok(real) = real_path(host, path, false) else {
                return unknown("the path no longer resolves inside the root");
            };
            let applied = format!("{} bytes", want.len());
            match std::fs::read(&real) {
                Ok(b) => {
                    let now = format!("{} bytes", b.len());
                    held_or_drift(
                        b == want,
                        applied,
                        now,
                        "the file changed since it was written",
                    )
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => (
                    SettingState::Drift,
                    Some(applied),
                    Some("missing".into()),
                    "the file was removed".into(),
                ),
                Err(e) => unknown(format!("cannot read it: {e}")),
            }
        }
        Entry::Symlink { path, to, .. } => {
            let Some(t) = to else {
                return unknown(
                    "the journal is from a daqtune that did not record the link's target",
                );
            };
            let Ok(real) = real_path(host, path, false) else {
                return unknown("the path no longer resolves inside the root");
            };
            match std::fs::read_link(&real) {
                Ok(now) => {
                    let now = now.display().to_string();
                    held_or_drift(
                        &now == t,
                        short(t),
                        short(&now),
                        "the link points elsewhere",
                    )
                }
                Err(_) => (
                    SettingState::Drift,
                    Some(short(t)),
                    Some("missing".into()),
                    "the link was removed".into(),
                ),
            }
        }
        Entry::Attr {
            path,
            new,
            shared_count,
            ..
        } => {
            let Ok(real) = real_path(host, path, true) else {
                return unknown("the attribute is gone (device removed?)");
            };
            match std::fs::read_to_string(&real) {
                Ok(now) => {
                    let want = new.trim().parse::<u64>();
                    if let (true, Ok(n), Ok(w)) = (*shared_count, now.trim().parse::<u64>(), &want)
                    {
                        if let Some(total) = (n < *w)
                            .then(|| spread_pool(host, path))
                            .flatten()
                            .filter(|t| t >= w)
                        {
                            return (
                                SettingState::Held,
                                Some(short(new)),
                                Some(short(&now)),
                                format!("as applied: the pool of that size holds {total} pages, spread over the nodes (a boot reservation `hugepages=N` is divided evenly between them)"),
                            );
                        }
                    }
                    let same = if *shared_count {
                        // A shared pool: others may have added to it; less than applied is drift.
                        match (now.trim().parse::<u64>(), want) {
                            (Ok(n), Ok(w)) => n >= w,
                            _ => now.split_whitespace().eq(new.split_whitespace()),
                        }
                    } else {
                        now.split_whitespace().eq(new.split_whitespace())
                            || selected(&now).is_some_and(|s| s == new.trim())
                            || irq_narrowed(path, &now, new)
                    };
                    held_or_drift(same, short(new), short(&now), "the value changed")
                }
                Err(e) => unknown(format!("cannot read it: {e}")),
            }
        }
        Entry::Mtu { ifname, new, .. } => {
            match host.read_string(&format!("/sys/class/net/{ifname}/mtu")) {
                Ok(now) => held_or_drift(
                    now.trim() == new.to_string(),
                    new.to_string(),
                    short(&now),
                    "the MTU changed",
                ),
                Err(e) => unknown(format!("cannot read the MTU: {e}")),
            }
        }
        Entry::Ethtool {
            ifname, group, new, ..
        } => match facts.ethtool(ifname, *group) {
            Ok(now) => {
                let changed: Vec<String> = new
                    .iter()
                    .filter(|(k, v)| now.get(k) != Some(**v))
                    .map(|(k, v)| match now.get(k) {
                        Some(n) => format!("{k} {v} -> {n}"),
                        None => format!("{k} {v} -> unknown"),
                    })
                    .collect();
                let applied = new
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ");
                let shown = if changed.is_empty() {
                    applied.clone()
                } else {
                    changed.join(", ")
                };
                held_or_drift(
                    changed.is_empty(),
                    applied,
                    shown,
                    "the NIC's setting changed",
                )
            }
            Err(why) => unknown(why.message),
        },
        Entry::ConfigWord {
            path,
            offset,
            new,
            mask,
            ..
        } => {
            let Ok(real) = real_path(host, path, true) else {
                return unknown("the device is gone");
            };
            match read_word(&real, *offset) {
                Ok(0xffff) => unknown("the register reads 0xffff (device gone or in reset)"),
                Ok(now) => held_or_drift(
                    now & mask == new & mask,
                    format!("0x{:04x}", new & mask),
                    format!("0x{:04x}", now & mask),
                    "the register bits changed (a reset or a hot-plug clears them)",
                ),
                // Without CAP_SYS_ADMIN the kernel shows only the first 64 bytes.
                Err(e) => unknown(format!("cannot read the register (needs root): {e}")),
            }
        }
        Entry::Module { name } => {
            if host.read_string("/proc/modules").is_err() {
                return unknown("/proc/modules is unreadable");
            }
            let loaded = setters::module_loaded(host, name);
            held_or_drift(
                loaded,
                "loaded".into(),
                if loaded { "loaded" } else { "not loaded" }.into(),
                "the module was unloaded",
            )
        }
        Entry::Mount { fstype, target, .. } => {
            if host.read_string("/proc/self/mounts").is_err() {
                return unknown("/proc/self/mounts is unreadable");
            }
            let m = setters::mounted(host, target, fstype);
            held_or_drift(
                m,
                format!("{fstype} mounted"),
                if m { "mounted" } else { "not mounted" }.into(),
                "the file system was unmounted",
            )
        }
        Entry::GpuLock { .. } | Entry::GpuPersistence { .. } => {
            unknown("GPU state is not re-read here: `daqtune check gpu.clocks` judges it")
        }
    }
}

/// The checks of the settings in effect, judged with the profile of the newest run (or
/// `--profile`): those in `pending-reboot` wait for a reboot.
fn judge_pending(host: &Host, g: &GlobalOptions, runs: &[Journal], st: &mut Status) {
    let mut only: BTreeSet<String> = BTreeSet::new();
    for j in runs {
        for r in &j.doc.records {
            match &r.check {
                Some(c) if crate::tunables::find(c).is_some() => {
                    only.insert(c.clone());
                }
                _ => {}
            }
        }
        only.extend(
            j.doc
                .pending_reboot
                .iter()
                .filter(|c| crate::tunables::find(c).is_some())
                .cloned(),
        );
    }
    if only.is_empty() {
        return;
    }
    let newest = &runs[runs.len() - 1].doc.profile;
    let lp = match &g.profile {
        Some(p) => crate::check::commands::load_profile(p)
            .ok()
            .map(|lp| (lp, format!("{p} (--profile)"))),
        None => crate::model::profile::builtin_names()
            .any(|n| n == newest)
            .then(|| crate::check::commands::load_profile(newest).ok())
            .flatten()
            .map(|lp| (lp, format!("{newest} (the newest run's)"))),
    };
    let facts = g.facts(host);
    let (lp, said) = match lp {
        Some(x) => x,
        None => match crate::check::commands::choose_profile_with(&facts, g) {
            Ok(lp) => {
                let s = format!("{} ({})", lp.profile.name, lp.origin);
                (lp, s)
            }
            Err(_) => return,
        },
    };
    let rep = crate::check::commands::evaluate_facts(
        &facts,
        &lp,
        only.into_iter().collect(),
        false,
        None,
    );
    st.pending_reboot = crate::check::run_info::pending_reboot(&rep.checks);
    st.judged_with = Some(said);
}

/// The JSON report.
pub fn json(st: &Status) -> String {
    serde_json::to_string_pretty(st).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostio::setters::FsWriter;

    /// A run put 64 2M pages on node1; the boot after it divided its `hugepages=64` evenly
    /// between the two nodes (kernel-parameters.txt), node1 holds 32 and the host's pool 64:
    /// the pages are all there (fleet-b's `status` called it drift, "applied 64, now 32").
    /// With the host's pool short of them too, it is drift.
    #[test]
    fn a_node_pool_the_boot_spread_over_the_nodes_is_held() {
        let d = tempfile::tempdir().expect("tmp");
        let node1 = "sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages";
        let global = "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
        for p in [node1, global] {
            std::fs::create_dir_all(d.path().join(p).parent().expect("dir")).expect("mkdir");
        }
        std::fs::write(d.path().join(node1), "32\n").expect("node1");
        std::fs::write(d.path().join(global), "64\n").expect("pool");
        let host = Host::at(d.path()).expect("host");
        let facts = Facts::new(&host);
        let j = Journal::create(&d.path().join("journal"), "test", &mut FsWriter::new())
            .expect("journal");
        let e = Entry::Attr {
            check: "hugepages".into(),
            path: format!("/{node1}"),
            original: "0\n".into(),
            new: "64".into(),
            shared_count: true,
        };
        let (state, applied, now, why) = reread(&host, &facts, &j, &e);
        assert_eq!(state, SettingState::Held, "{why}");
        assert_eq!(
            (applied.as_deref(), now.as_deref()),
            (Some("64"), Some("32"))
        );
        assert!(why.contains("64 pages, spread over the nodes"), "{why}");

        std::fs::write(d.path().join(global), "40\n").expect("pool");
        let (state, ..) = reread(&host, &facts, &j, &e);
        assert_eq!(state, SettingState::Drift);
    }

    /// fleet-a's e1000e on node1 (CPUs 2-3), IRQs pinned to 0-2; after the boot with
    /// `irqaffinity=0-2` the kernel started them on 0-2 narrowed to the node: `2` ("applied
    /// 0-2, now 2" was drift). Back on an isolated CPU (3) or all CPUs, it is drift.
    #[test]
    fn an_irq_the_kernel_narrowed_to_its_node_is_held() {
        let d = tempfile::tempdir().expect("tmp");
        let irq = "proc/irq/36/smp_affinity_list";
        std::fs::create_dir_all(d.path().join("proc/irq/36")).expect("mkdir");
        let host = Host::at(d.path()).expect("host");
        let facts = Facts::new(&host);
        let j = Journal::create(&d.path().join("journal"), "test", &mut FsWriter::new())
            .expect("journal");
        let e = Entry::Attr {
            check: "irq.affinity".into(),
            path: format!("/{irq}"),
            original: "0-3\n".into(),
            new: "0-2".into(),
            shared_count: false,
        };
        for (now, want) in [
            ("0-2\n", SettingState::Held),
            ("2\n", SettingState::Held),
            ("2-3\n", SettingState::Drift),
            ("0-3\n", SettingState::Drift),
        ] {
            std::fs::write(d.path().join(irq), now).expect("write");
            let (state, ..) = reread(&host, &facts, &j, &e);
            assert_eq!(state, want, "{now}");
        }
    }

    /// A run pinned IRQ 37; after a reboot IRQ numbers are given out again and 37 may be
    /// another device's (fleet-a's status after its reboot: "applied 0-2, now 0-3" on IRQs the
    /// port no longer had, while `check irq.affinity` passed the port's own). A record from
    /// before this boot is not compared; one from this boot still is.
    #[test]
    fn an_irq_pinned_in_an_earlier_boot_is_not_drift() {
        use crate::exec::apply::tests::{change, run};
        let d = tempfile::tempdir().expect("tmp");
        let irq = d.path().join("proc/irq/37/smp_affinity_list");
        std::fs::create_dir_all(irq.parent().expect("dir")).expect("mkdir");
        std::fs::write(&irq, "0-3\n").expect("seed");
        let host = Host::at(d.path()).expect("host");
        let pin = change(
            "irq.affinity",
            crate::model::plan::Action::Attr {
                path: "/proc/irq/37/smp_affinity_list".into(),
                from: "0-3\n".into(),
                to: "0-2".into(),
                shared_count: false,
            },
        );
        let (rep, j) = run(
            &host,
            crate::hostio::setters::Target::Root,
            vec![pin],
            &mut FsWriter::new(),
            None,
        );
        assert_eq!(rep.failed(), 0, "{:?}", rep.outcomes);
        std::fs::write(&irq, "0-3\n").expect("another device's IRQ now");
        let stat = |btime: u64| {
            std::fs::write(
                d.path().join("proc/stat"),
                format!("cpu 1 2 3\nbtime {btime}\n"),
            )
            .expect("stat")
        };
        stat(j.doc.started_unix.saturating_sub(10));
        let runs = [Journal::open(&j.dir).expect("open")];
        assert_eq!(settings(&host, &runs)[0].state, SettingState::Drift);
        stat(j.doc.started_unix + 10);
        let s = &settings(&host, &runs)[0];
        assert_eq!(s.state, SettingState::Unknown, "{}", s.detail);
    }
}
