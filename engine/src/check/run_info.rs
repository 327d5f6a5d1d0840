//! What a fleet consumer needs of one run besides its verdicts ([`RunInfo`]: when it ended,
//! the gate and what failed it, what waits for a reboot, the capability labels), and the time
//! and duration helpers of the fleet outputs. Part of the JSON report (`run`), so it sits at
//! the report's layer and knows nothing of the report type: [`crate::check::report::Report::run_info`]
//! gives a report's own, or one derived from its verdicts.

use crate::model::gate::FailOn;
use crate::model::verdict::{Status, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// What a fleet consumer needs besides the verdicts: when the run ended, whether its gate
/// passed, what waits for a reboot and the capability summary. Part of the JSON report
/// (`run`), so Ansible's `ansible_local.daqtune.run` holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunInfo {
    /// When the verdicts were final, in seconds since the epoch.
    pub finished_unix: u64,
    /// The same instant as RFC 3339 UTC (`2026-03-01T12:00:00Z`).
    pub finished_at: String,
    pub gate: GateInfo,
    /// Check ids with a verdict in `pending-reboot` (sorted, each once).
    pub pending_reboot: Vec<String>,
    /// [`CAPABILITIES`] by name: `true`, `false`, `unknown` or `na` (see [`Readiness`]).
    pub capabilities: BTreeMap<String, String>,
}

/// The gate as the run applied it: the same rule as the exit code of `check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateInfo {
    pub passed: bool,
    /// The `--fail-on` level: `fail` or `warn`.
    pub fail_on: String,
    /// Whether the profile's required checks were a gate (`--gate`; always for `report`).
    pub required_checks: bool,
    /// What failed it: `ID (SUBJECT): STATUS: MESSAGE` per verdict at or above `fail_on`,
    /// then the required-check failures.
    #[serde(default)]
    pub failures: Vec<String>,
}

impl RunInfo {
    /// For a run's verdicts and the profile's required-check failures (`Report::checks`,
    /// `Report::gate_failures`); `passed` is the run's gate result (exit code 0 of `check` with
    /// the same flags).
    pub fn new(
        checks: &[Verdict],
        gate_failures: &[String],
        passed: bool,
        fail_on: FailOn,
        required_checks: bool,
        finished_unix: u64,
    ) -> RunInfo {
        let threshold = match fail_on {
            FailOn::Warn => 1,
            FailOn::Fail => 2,
        };
        let mut failures: Vec<String> = checks
            .iter()
            .filter(|v| v.status.severity() >= threshold)
            .map(|v| format!("{} ({}): {}: {}", v.id, v.subject, v.status, v.message))
            .collect();
        failures.extend(gate_failures.iter().cloned());
        RunInfo {
            finished_unix,
            finished_at: rfc3339(finished_unix),
            gate: GateInfo {
                passed,
                fail_on: match fail_on {
                    FailOn::Warn => "warn",
                    FailOn::Fail => "fail",
                }
                .into(),
                required_checks,
                failures,
            },
            pending_reboot: pending_reboot(checks),
            capabilities: CAPABILITIES
                .iter()
                .map(|c| (c.name.to_string(), c.judge(checks).as_str().into()))
                .collect(),
        }
    }

    /// For a report that carries no run information (a JSON report from an older daqtune):
    /// the default gate (`--fail-on fail`, required checks as recorded), finished now.
    pub fn derive(checks: &[Verdict], gate_failures: &[String]) -> RunInfo {
        let passed = !checks.iter().any(|v| v.status.severity() >= 2) && gate_failures.is_empty();
        RunInfo::new(
            checks,
            gate_failures,
            passed,
            FailOn::Fail,
            !gate_failures.is_empty(),
            now_unix(),
        )
    }
}

/// Check ids with a verdict in `pending-reboot`, sorted, each once.
pub fn pending_reboot(verdicts: &[Verdict]) -> Vec<String> {
    let mut ids: Vec<String> = verdicts
        .iter()
        .filter(|v| v.status == Status::PendingReboot)
        .map(|v| v.id.clone())
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// Whether a host can do one thing a scheduler selects on, judged from a few checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// Every verdict of the checks involved passed (or does not apply), at least one of the
    /// deciding checks passed.
    Ready,
    /// A verdict involved is fail, error, warn or pending-reboot: the capability is missing
    /// or degraded now (pending-reboot: not before the next boot).
    NotReady,
    /// A verdict involved is skip (daqtune could not see), or the deciding checks did not run.
    Unknown,
    /// Every verdict of the deciding checks is `n/a` (no discrete GPU for GPUDirect, say).
    NotApplicable,
}

impl Readiness {
    pub fn as_str(self) -> &'static str {
        match self {
            Readiness::Ready => "true",
            Readiness::NotReady => "false",
            Readiness::Unknown => "unknown",
            Readiness::NotApplicable => "na",
        }
    }
}

/// A capability label: the checks that decide it and the checks that can only spoil it.
#[derive(Debug)]
pub struct Capability {
    /// The label / metric name (`gpudirect`).
    pub name: &'static str,
    /// Checks whose verdicts decide it; all `n/a` makes the capability `na`.
    pub deciding: &'static [&'static str],
    /// Checks that can make it `false` or `unknown` but not `na`.
    pub supporting: &'static [&'static str],
    pub meaning: &'static str,
}

/// The capability labels, in the order they are written. Changing a name breaks the node
/// selectors of users: add, never rename.
pub const CAPABILITIES: &[Capability] = &[
    Capability {
        name: "gpudirect",
        deciding: &["gpu.gpudirect", "gpu.peermem"],
        supporting: &["iommu", "pcie.acs"],
        meaning: "GPUDirect RDMA path ready: the GPUs support it, the kernel path \
                  (nvidia_peermem or dma-buf) is there, the GPU and NIC IOMMU groups do not \
                  translate and no ACS redirect sends peer traffic to the root complex",
    },
    Capability {
        name: "hugepages",
        deciding: &["hugepages"],
        supporting: &[],
        meaning: "the profile's hugepage pool is reserved and its hugetlbfs mounted",
    },
    Capability {
        name: "cores-isolated",
        deciding: &["kernel.cmdline"],
        supporting: &["irq.affinity"],
        meaning: "the profile's data cores are isolated on the running kernel's command line \
                  and no NIC interrupt may land on them",
    },
];

impl Capability {
    pub fn judge(&self, verdicts: &[Verdict]) -> Readiness {
        let deciding: Vec<&Verdict> = verdicts
            .iter()
            .filter(|v| self.deciding.contains(&v.id.as_str()))
            .collect();
        let supporting = verdicts
            .iter()
            .filter(|v| self.supporting.contains(&v.id.as_str()));
        let all: Vec<&Verdict> = deciding.iter().copied().chain(supporting).collect();
        let bad = |s: Status| {
            matches!(
                s,
                Status::Fail | Status::Error | Status::Warn | Status::PendingReboot
            )
        };
        if deciding.is_empty() {
            return Readiness::Unknown;
        }
        if deciding.iter().all(|v| v.status == Status::NotApplicable) {
            return Readiness::NotApplicable;
        }
        if all.iter().any(|v| bad(v.status)) {
            return Readiness::NotReady;
        }
        if all.iter().any(|v| v.status == Status::Skip) {
            return Readiness::Unknown;
        }
        if deciding.iter().any(|v| v.status == Status::Pass) {
            Readiness::Ready
        } else {
            Readiness::Unknown
        }
    }
}

/// Seconds since the epoch now (0 if the clock is before it).
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// RFC 3339 UTC with second precision, as NFD's `expiry-time` directive parses it (the
/// inverse of `profile::parse_date`).
pub use daqtune_probe::text::rfc3339_utc as rfc3339;

/// A `--interval`/`--nfd-expiry` value that is not a duration [`parse_duration`] takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("`{0}`: expected a whole number with s, m, h or d (90s, 15m, 2h, 1d)")]
    Number(String),
    #[error("`{given}`: unknown unit `{unit}` (use s, m, h or d: 90s, 15m, 2h, 1d)")]
    Unit { given: String, unit: String },
    #[error("`{0}`: must be more than 0 and at most 366 days")]
    Range(String),
}

/// A duration for the command line: `3600` (seconds), `90s`, `15m`, `2h`, `1d`; more than
/// zero and at most 366 days.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| DurationError::Number(s.to_string()))?;
    let mult = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(DurationError::Unit {
                given: s.to_string(),
                unit: unit.to_string(),
            })
        }
    };
    let secs = n
        .checked_mul(mult)
        .filter(|&x| x > 0 && x <= 366 * 86_400)
        .ok_or_else(|| DurationError::Range(s.to_string()))?;
    Ok(Duration::from_secs(secs))
}

/// Where a profile came from, as one word: `given` (--profile), `detected` or `fallback`.
pub fn profile_source(origin: &str) -> &'static str {
    if origin.starts_with("detected") {
        "detected"
    } else if origin.starts_with("fallback") {
        "fallback"
    } else {
        "given"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
        // Inverse of profile::parse_date on day boundaries.
        for day in ["1970-01-01", "2024-02-29", "2038-01-19", "2100-03-01"] {
            let d = crate::model::profile::parse_date(day).expect("date") as u64;
            assert_eq!(rfc3339(d * 86_400), format!("{day}T00:00:00Z"));
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("3600"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_duration(" 2h "), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        for bad in [
            "",
            "0",
            "0s",
            "1w",
            "h",
            "-5m",
            "1.5h",
            "367d",
            "99999999999999999999",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn capability_rules() {
        let gd = &CAPABILITIES[0];
        let v = |id: &str, st: Status| Verdict::new(id, "s", st, "m");
        let ready = [
            v("gpu.gpudirect", Status::Pass),
            v("gpu.peermem", Status::Pass),
            v("iommu", Status::Pass),
            v("pcie.acs", Status::NotApplicable),
        ];
        assert_eq!(gd.judge(&ready), Readiness::Ready);
        let mut warn = ready.to_vec();
        warn[2].status = Status::Warn;
        assert_eq!(gd.judge(&warn), Readiness::NotReady);
        let mut skip = ready.to_vec();
        skip[1].status = Status::Skip;
        assert_eq!(gd.judge(&skip), Readiness::Unknown);
        // A fail outweighs a skip.
        skip[0].status = Status::Fail;
        assert_eq!(gd.judge(&skip), Readiness::NotReady);
        // An integrated GPU: GPUDirect does not apply, whatever the IOMMU says.
        let spark = [
            v("gpu.gpudirect", Status::NotApplicable),
            v("gpu.peermem", Status::NotApplicable),
            v("iommu", Status::Pass),
        ];
        assert_eq!(gd.judge(&spark), Readiness::NotApplicable);
        // Not run is not "not applicable".
        assert_eq!(gd.judge(&[v("iommu", Status::Pass)]), Readiness::Unknown);
        let hp = &CAPABILITIES[1];
        assert_eq!(
            hp.judge(&[v("hugepages", Status::PendingReboot)]),
            Readiness::NotReady
        );
    }

    #[test]
    fn run_info_gate_and_pending() {
        let r = [
            Verdict::new(
                "kernel.cmdline",
                "/proc/cmdline",
                Status::PendingReboot,
                "next boot",
            ),
            Verdict::new("hugepages", "1G pages", Status::PendingReboot, "next boot"),
            Verdict::new("kernel.cmdline", "x", Status::PendingReboot, "again"),
            Verdict::warn("cpu.idle", "cpu9-11", "c7"),
        ];
        let info = RunInfo::new(&r, &[], true, FailOn::Fail, true, 1_700_000_000);
        assert_eq!(info.pending_reboot, ["hugepages", "kernel.cmdline"]);
        assert_eq!(info.finished_at, "2023-11-14T22:13:20Z");
        assert!(info.gate.failures.is_empty());
        let info = RunInfo::new(&r, &[], false, FailOn::Warn, false, 0);
        assert_eq!(info.gate.failures.len(), 4);
        assert!(info.gate.failures[3].starts_with("cpu.idle (cpu9-11): warn: c7"));
        assert_eq!(info.capabilities["hugepages"], "false");
        assert_eq!(info.capabilities["gpudirect"], "unknown");
    }
}
