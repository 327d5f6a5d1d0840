//! Node Feature Discovery local feature file (`check --format nfd`, `report --nfd`).
//!
//! nfd-worker's `local` source reads every file in
//! `/etc/kubernetes/node-feature-discovery/features.d/` except dotfiles (NFD >= v0.15), one
//! `name=value` per line, `#` comments, and `# +expiry-time=RFC3339` directives that apply to
//! the lines after them. A line whose key or value is not a valid Kubernetes label is dropped
//! by nfd-master, so every label here is validated before it is written.
//!
//! The labels live in `daqtune.feature.node.kubernetes.io/`: nfd-master's validation accepts
//! `feature.node.kubernetes.io` and its sub-namespaces (other `*.kubernetes.io` are refused)
//! and its deny list is empty by default, so no nfd-master setting is needed (a deny-list
//! wildcard covering it needs `-extra-label-ns`; docs/fleet.md). The set is small and stable
//! (a scheduler selects on it): profile, gate, pending-reboot and one label per
//! [`CAPABILITIES`](crate::check::run_info::CAPABILITIES) entry.

use crate::check::report::Report;
use crate::check::run_info::{rfc3339, RunInfo, CAPABILITIES};
use std::fmt::Write as _;
use std::time::Duration;

/// The label prefix (a sub-namespace of NFD's own, accepted by nfd-master's validation).
pub const PREFIX: &str = "daqtune.feature.node.kubernetes.io";

/// How long labels stay valid after the run unless `--nfd-expiry` says otherwise: four
/// periods of the 15-minute timer.
pub const DEFAULT_EXPIRY: Duration = Duration::from_secs(3600);

/// Why a label name part or value body is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartError {
    #[error("is empty")]
    Empty,
    #[error("is {0} characters long (at most 63)")]
    TooLong(usize),
    #[error("must begin and end with a letter or digit")]
    Ends,
    #[error("contains `{0}` (only letters, digits, -, _ and .)")]
    Char(char),
}

/// Why a label prefix is not a DNS subdomain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    #[error("prefix must be 1 to 253 characters, not {0}")]
    Length(usize),
    #[error(
        "prefix `{0}` is not a DNS subdomain (lowercase letters, digits and -, dot-separated)"
    )]
    NotDns(String),
}

/// A label nfd-master would drop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    #[error("label key `{0}` has no prefix/ (NFD needs one)")]
    NoPrefix(String),
    #[error("label key `{key}`: {why}")]
    Prefix { key: String, why: PrefixError },
    #[error("label key `{key}`: name {why}")]
    Name { key: String, why: PartError },
    #[error("label value `{value}` {why}")]
    Value { value: String, why: PartError },
}

/// Whether `s` is a valid label name part or value body: at most 63 characters,
/// alphanumerics at both ends, `-`, `_`, `.` and alphanumerics between.
fn name_part(s: &str) -> Result<(), PartError> {
    if s.is_empty() {
        return Err(PartError::Empty);
    }
    if s.len() > 63 {
        return Err(PartError::TooLong(s.len()));
    }
    let b = s.as_bytes();
    if !b[0].is_ascii_alphanumeric() || !b[b.len() - 1].is_ascii_alphanumeric() {
        return Err(PartError::Ends);
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(PartError::Char(c));
    }
    Ok(())
}

/// A DNS-1123 subdomain: at most 253 characters, dot-separated lowercase labels of
/// alphanumerics and `-` with alphanumeric ends.
fn dns_subdomain(s: &str) -> Result<(), PrefixError> {
    if s.is_empty() || s.len() > 253 {
        return Err(PrefixError::Length(s.len()));
    }
    for part in s.split('.') {
        let b = part.as_bytes();
        let ok = !b.is_empty()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-';
        if !ok {
            return Err(PrefixError::NotDns(s.to_string()));
        }
    }
    Ok(())
}

/// A Kubernetes label key (`prefix/name`, apimachinery's IsQualifiedName), with the
/// prefix NFD requires for labels from feature files.
pub fn validate_key(key: &str) -> Result<(), LabelError> {
    let Some((prefix, name)) = key.split_once('/') else {
        return Err(LabelError::NoPrefix(key.to_string()));
    };
    dns_subdomain(prefix).map_err(|why| LabelError::Prefix {
        key: key.to_string(),
        why,
    })?;
    name_part(name).map_err(|why| LabelError::Name {
        key: key.to_string(),
        why,
    })
}

/// A Kubernetes label value (empty, or a valid name part).
pub fn validate_value(value: &str) -> Result<(), LabelError> {
    if value.is_empty() {
        return Ok(());
    }
    name_part(value).map_err(|why| LabelError::Value {
        value: value.to_string(),
        why,
    })
}

/// `s` made a valid label value: other characters become `-`, the ends are trimmed to
/// alphanumerics, at most 63 characters; `unnamed` when nothing is left.
pub fn sanitize_value(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut v: &str = mapped.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if v.len() > 63 {
        v = v[..63].trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    }
    if v.is_empty() {
        "unnamed".into()
    } else {
        v.to_string()
    }
}

/// The labels of one run, keys with the prefix, in a fixed order.
pub fn labels(report: &Report, run: &RunInfo) -> Vec<(String, String)> {
    let mut out = vec![
        (format!("{PREFIX}/profile"), sanitize_value(&report.profile)),
        (
            format!("{PREFIX}/gate"),
            if run.gate.passed { "pass" } else { "fail" }.to_string(),
        ),
        (
            format!("{PREFIX}/pending-reboot"),
            (!run.pending_reboot.is_empty()).to_string(),
        ),
    ];
    for c in CAPABILITIES {
        let state = run
            .capabilities
            .get(c.name)
            .cloned()
            .unwrap_or_else(|| "unknown".into());
        out.push((format!("{PREFIX}/{}", c.name), state));
    }
    // Platform limits (pcie.mps at 128 B): one label per check, its distinct values joined
    // with `_` (`limit.pcie.mps=128`, `=128_256`), so a scheduler sees the cap a pass hides.
    let mut limits: std::collections::BTreeMap<&str, std::collections::BTreeSet<&str>> =
        Default::default();
    for v in &report.checks {
        if let Some(l) = &v.limit {
            limits.entry(&v.id).or_default().insert(&l.value);
        }
    }
    for (id, values) in limits {
        let key = format!("{PREFIX}/limit.{id}");
        let value = sanitize_value(&values.into_iter().collect::<Vec<_>>().join("_"));
        if validate_key(&key).is_ok() && validate_value(&value).is_ok() {
            out.push((key, value));
        }
    }
    out
}

/// The feature file; its labels expire `expiry` after the run ended.
pub fn render(report: &Report, expiry: Duration) -> String {
    render_with(report, &report.run_info(), expiry)
}

pub fn render_with(report: &Report, run: &RunInfo, expiry: Duration) -> String {
    let mut s = String::new();
    // A plain comment: NFD only parses `# +` lines as directives.
    let _ = writeln!(
        s,
        "# daqtune {} node labels, run ended {} (profile {}); docs/fleet.md",
        report.daqtune_version,
        run.finished_at,
        sanitize_value(&report.profile)
    );
    // The directive applies to the lines after it, so it comes first: a node whose timer
    // stopped loses every label.
    let _ = writeln!(
        s,
        "# +expiry-time={}",
        rfc3339(run.finished_unix.saturating_add(expiry.as_secs()))
    );
    for (k, v) in labels(report, run) {
        // Never write a line nfd-master would reject: an invalid one is a bug here.
        debug_assert!(
            validate_key(&k).is_ok() && validate_value(&v).is_ok(),
            "{k}={v}"
        );
        if validate_key(&k).is_ok() && validate_value(&v).is_ok() {
            let _ = writeln!(s, "{k}={v}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::tests::report;
    use crate::model::gate::FailOn;
    use crate::model::verdict::{Status, Verdict};

    #[test]
    fn key_and_value_rules() {
        for ok in [
            "daqtune.feature.node.kubernetes.io/profile",
            "example.com/a",
            "a/Z9",
            "x/a.b_c-d",
        ] {
            assert_eq!(validate_key(ok), Ok(()), "{ok}");
        }
        let long = format!("x/{}", "a".repeat(64));
        for bad in [
            "profile",
            "/profile",
            "Example.com/a",
            "ex_ample.com/a",
            "-x.com/a",
            "x..com/a",
            "x.com/",
            "x.com/-a",
            "x.com/a-",
            "x.com/a b",
            "x.com/a/b",
            long.as_str(),
        ] {
            assert!(validate_key(bad).is_err(), "{bad}");
        }
        assert!(validate_key(&format!("{}/a", "a".repeat(254))).is_err());
        assert_eq!(validate_value(""), Ok(()));
        assert_eq!(validate_value("igx-orin"), Ok(()));
        assert_eq!(validate_value(&"a".repeat(63)), Ok(()));
        for bad in ["-a", "a-", "a b", "a/b", "é", &"a".repeat(64)] {
            assert!(validate_value(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sanitize_makes_valid_values() {
        assert_eq!(sanitize_value("igx-orin"), "igx-orin");
        assert_eq!(sanitize_value("my lab/profile v2!"), "my-lab-profile-v2");
        assert_eq!(sanitize_value("--"), "unnamed");
        assert_eq!(sanitize_value("Ünïcode"), "n-code");
        let long = format!("{}-{}", "a".repeat(62), "b".repeat(10));
        let v = sanitize_value(&long);
        assert_eq!(v, "a".repeat(62));
        for s in ["", "…", "a.", "._x_.", &"x_".repeat(40), "名前"] {
            assert_eq!(validate_value(&sanitize_value(s)), Ok(()), "{s:?}");
        }
    }

    #[test]
    fn file_has_expiry_first_and_valid_labels() {
        let r = report(vec![
            Verdict::pass("hugepages", "1G pages", "ok"),
            Verdict::new(
                "kernel.cmdline",
                "/proc/cmdline",
                Status::PendingReboot,
                "boot",
            ),
        ]);
        let run = RunInfo::new(
            &r.checks,
            &r.gate_failures,
            true,
            FailOn::Fail,
            true,
            1_700_000_000,
        );
        let f = render_with(&r, &run, Duration::from_secs(900));
        let lines: Vec<&str> = f.lines().collect();
        assert!(lines[0].starts_with("# daqtune "));
        assert!(!lines[0].starts_with("# +"));
        assert_eq!(lines[1], "# +expiry-time=2023-11-14T22:28:20Z");
        assert_eq!(
            &lines[2..],
            [
                "daqtune.feature.node.kubernetes.io/profile=igx-orin",
                "daqtune.feature.node.kubernetes.io/gate=pass",
                "daqtune.feature.node.kubernetes.io/pending-reboot=true",
                "daqtune.feature.node.kubernetes.io/gpudirect=unknown",
                "daqtune.feature.node.kubernetes.io/hugepages=true",
                "daqtune.feature.node.kubernetes.io/cores-isolated=false",
            ]
        );
    }
}
