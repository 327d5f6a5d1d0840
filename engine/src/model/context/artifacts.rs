//! daqtune's own artifacts on a host: the units, rules and drop-ins its apply runs wrote (from
//! the journal of the runs still in effect) and those found under the fixed names daqtune
//! uses (an artifact whose journal is gone, or one installed from `daqtune generate`, carries
//! daqtune's mark). What `daqtune.artifacts` judges and what `snapshot` records systemd's
//! state of.

use crate::hostio::journal::{Entry, RunState};
use crate::model::facts::Facts;
use daqtune_units::OWNER_MARK;

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

/// daqtune's artifacts on this host, sorted by path. `fixed`: the names daqtune writes under
/// this profile (`tunables::owned_files`: each planning tunable names its own).
pub fn daqtune_artifacts(facts: &Facts, fixed: &[String]) -> Vec<Artifact> {
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
    for path in fixed {
        if out.iter().any(|a| a.path == *path) {
            continue;
        }
        if facts
            .read_string(path)
            .is_ok_and(|t| t.contains(OWNER_MARK))
        {
            add(&mut out, path, None, false);
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// Where `apply` keeps its copy of a user's profile file: the units and the udev rule it writes
/// run `daqtune apply --profile <copy>`, so they keep working when the user's file is moved
/// or deleted (a profile in /tmp, a checkout that changes branch).
pub const PROFILE_COPIES: &str = "/etc/daqtune/profiles";

/// 64-bit FNV-1a: the digest in a profile copy's name. It detects a copy that was edited or
/// replaced, not an attacker (who could rewrite the units as well).
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The host path of apply's copy of a profile named `name` with these bytes:
/// `/etc/daqtune/profiles/<name>-<digest>.yaml`, the name reduced to what units may carry.
pub fn profile_copy_path(name: &str, bytes: &[u8]) -> String {
    let mut safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect();
    safe = safe.trim_start_matches(['.', '-']).to_string();
    if safe.is_empty() {
        safe.push_str("profile");
    }
    format!("{PROFILE_COPIES}/{safe}-{:016x}.yaml", fnv1a64(bytes))
}

/// Whether a file at `path` under [`PROFILE_COPIES`] still holds what apply copied there (its
/// name carries the digest); `None` for any other path.
pub fn profile_copy_intact(path: &str, bytes: &[u8]) -> Option<bool> {
    let name = path.strip_prefix(PROFILE_COPIES)?.strip_prefix('/')?;
    let stem = name.strip_suffix(".yaml")?;
    let (_, digest) = stem.rsplit_once('-')?;
    if digest.len() != 16 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(digest == format!("{:016x}", fnv1a64(bytes)))
}

/// The profile files a unit or rule runs daqtune with (`--profile FILE`, absolute paths only;
/// a built-in name needs no file). Comment lines are skipped.
pub fn profile_files(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let l = line.trim_start();
        if l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        let words: Vec<&str> = l
            .split(|c: char| c.is_whitespace() || c == '"' || c == '\'')
            .filter(|w| !w.is_empty())
            .collect();
        for (i, w) in words.iter().enumerate() {
            let v = match w.strip_prefix("--profile=") {
                Some(v) => Some(v),
                None if *w == "--profile" => words.get(i + 1).copied(),
                None => None,
            };
            if let Some(v) = v.filter(|v| v.starts_with('/')) {
                if !out.iter().any(|o| o == v) {
                    out.push(v.to_string());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_copies_are_named_by_their_content() {
        let p = profile_copy_path("my lab/../x", b"name: lab\n");
        assert!(p.starts_with("/etc/daqtune/profiles/my_lab_.._x-"), "{p}");
        assert!(daqtune_units::validate::abs_path(&p).is_ok(), "{p}");
        assert_eq!(profile_copy_intact(&p, b"name: lab\n"), Some(true));
        assert_eq!(profile_copy_intact(&p, b"name: lab2\n"), Some(false));
        assert_eq!(profile_copy_intact("/home/lab/lab.yaml", b""), None);
        assert_eq!(profile_copy_path("", b"").len(), PROFILE_COPIES.len() + 30);
    }

    #[test]
    fn profile_files_of_units_and_rules() {
        let unit = "# Written by daqtune (profile /old.yaml)\n[Service]\nExecStart=/usr/bin/daqtune apply --profile /etc/daqtune/profiles/a-0.yaml --only x\n";
        assert_eq!(profile_files(unit), ["/etc/daqtune/profiles/a-0.yaml"]);
        let rule = "ACTION==\"add\", RUN+=\"/usr/bin/daqtune apply --profile /home/lab/lab.yaml --only pcie.mrrs --yes\"\n";
        assert_eq!(profile_files(rule), ["/home/lab/lab.yaml"]);
        assert!(profile_files("ExecStart=/usr/bin/daqtune apply --profile igx-orin\n").is_empty());
        assert_eq!(
            profile_files("ExecStart=/x --profile=/p.yaml\n"),
            ["/p.yaml"]
        );
    }
}
