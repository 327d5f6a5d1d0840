//! daqtune's own artifacts on a host: the units, rules and drop-ins its apply runs wrote (from
//! the journal of the runs still in effect) and those found under the fixed names daqtune
//! uses (an artifact whose journal is gone, or one installed from `daqtune generate`, carries
//! daqtune's mark). What `daqtune.artifacts` judges and what `snapshot` records systemd's
//! state of.

use crate::apply::journal::{Entry, RunState};
use crate::facts::Facts;
use crate::profile::LoadedProfile;
use daqtune_units::{etc, network, systemd, udev, OWNER_MARK};

/// What kind of file an artifact is, for what is judged about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A systemd unit under /etc/systemd/system (its `.wants` link, its programs, its state).
    Unit,
    /// A udev rules file (its `RUN` programs).
    UdevRule,
    /// Any other file: a drop-in, a network configuration, a boot configuration daqtune
    /// changed.
    File,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Host path.
    pub path: String,
    pub kind: Kind,
    /// The apply runs still in effect that wrote it (ids); empty when it was found by name.
    pub runs: Vec<String>,
    /// The file existed before daqtune changed it (extlinux.conf, a netplan file someone
    /// else owns): present or not, it is not daqtune's to miss.
    pub changed_existing: bool,
}

impl Artifact {
    /// The unit name of a unit (`daqtune-governor.service`).
    pub fn unit_name(&self) -> Option<&str> {
        (self.kind == Kind::Unit).then(|| self.path.rsplit('/').next().unwrap_or(&self.path))
    }
}

fn kind_of(path: &str) -> Kind {
    let name = path.rsplit('/').next().unwrap_or(path);
    if path.starts_with("/etc/systemd/system/")
        && !path["/etc/systemd/system/".len()..].contains('/')
        && [".service", ".mount", ".timer", ".socket", ".path"]
            .iter()
            .any(|s| name.ends_with(s))
    {
        Kind::Unit
    } else if path.contains("/udev/rules.d/") && name.ends_with(".rules") {
        Kind::UdevRule
    } else {
        Kind::File
    }
}

/// Files daqtune writes that are not host configuration (kernel state under a root, the
/// recorded GPU facts, its own journal).
fn is_config(path: &str) -> bool {
    !(path.starts_with("/sys/")
        || path.starts_with("/proc/")
        || path.starts_with("/daqtune/")
        || path.starts_with("/var/lib/daqtune/"))
}

/// The fixed names daqtune writes under this profile.
fn fixed_names(lp: &LoadedProfile) -> Vec<String> {
    let mut v: Vec<String> = systemd::ONESHOT_UNITS
        .iter()
        .map(|u| format!("/etc/systemd/system/{u}"))
        .collect();
    for pool in lp.profile.hugepages.pools() {
        if let Some(name) = pool.mount.and_then(|mp| systemd::mount_unit_name(&mp).ok()) {
            v.push(format!("/etc/systemd/system/{name}"));
        }
    }
    v.push(udev::RULE_PATH.to_string());
    v.push(etc::SYSCTL_PATH.to_string());
    v.push(etc::MODULES_LOAD_PATH.to_string());
    v.push(network::NETPLAN_PATH.to_string());
    v.push(lp.profile.persist.grub_dropin.clone());
    v
}

fn add(out: &mut Vec<Artifact>, path: &str, run: Option<&str>, changed_existing: bool) {
    match out.iter_mut().find(|a| a.path == path) {
        Some(a) => {
            if let Some(r) = run {
                if !a.runs.iter().any(|x| x == r) {
                    a.runs.push(r.to_string());
                }
            }
            a.changed_existing |= changed_existing;
        }
        None => out.push(Artifact {
            path: path.to_string(),
            kind: kind_of(path),
            runs: run.map(|r| vec![r.to_string()]).unwrap_or_default(),
            changed_existing,
        }),
    }
}

/// daqtune's artifacts on this host, sorted by path.
pub fn daqtune_artifacts(facts: &Facts, lp: &LoadedProfile) -> Vec<Artifact> {
    let mut out: Vec<Artifact> = Vec::new();
    for doc in facts
        .journal_runs()
        .iter()
        .filter(|d| d.state != RunState::Reverted)
    {
        for rec in doc.records.iter().filter(|r| r.done) {
            // A `.wants` link belongs to its unit, which is judged with it.
            if let Entry::File {
                path,
                original,
                link,
                ..
            } = &rec.entry
            {
                if is_config(path) {
                    add(
                        &mut out,
                        path,
                        Some(&doc.id),
                        original.is_some() || link.is_some(),
                    );
                }
            }
        }
    }
    for path in fixed_names(lp) {
        if out.iter().any(|a| a.path == path) {
            continue;
        }
        if facts
            .read_string(&path)
            .is_ok_and(|t| t.contains(OWNER_MARK))
        {
            add(&mut out, &path, None, false);
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}
