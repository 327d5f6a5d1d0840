//! node_exporter textfile-collector format (`check --format prometheus`, `report --prometheus`).
//!
//! The collector reads `*.prom` files in the Prometheus text exposition format and refuses a
//! whole file with client-side timestamps, so: no timestamps, one `# HELP` and `# TYPE` per
//! family, every family a gauge, label values escaped, every name `daqtune_*`. The time of the
//! run is a gauge of its own (`daqtune_last_run_timestamp_seconds`), so a stale file (a timer
//! that stopped) can be alerted on. docs/fleet.md lists the metrics with example queries.

use crate::check::report::Report;
use crate::check::run_info::{profile_source, RunInfo, CAPABILITIES};
use crate::model::verdict::Status;
use std::collections::HashMap;
use std::fmt::Write as _;

/// A label value in the exposition format: backslash, double quote and line feed escaped.
pub fn escape_label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn family(s: &mut String, name: &str, help: &str) {
    // HELP text escapes backslash and line feed; ours has neither, but stay correct.
    let help = help.replace('\\', "\\\\").replace('\n', "\\n");
    let _ = writeln!(s, "# HELP {name} {help}");
    let _ = writeln!(s, "# TYPE {name} gauge");
}

fn sample(s: &mut String, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
    s.push_str(name);
    if !labels.is_empty() {
        s.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(s, "{k}=\"{}\"", escape_label(v));
        }
        s.push('}');
    }
    let _ = writeln!(s, " {value}");
}

/// The textfile for a report; the run information is the report's own, else derived.
pub fn render(report: &Report) -> String {
    render_with(report, &report.run_info())
}

pub fn render_with(report: &Report, run: &RunInfo) -> String {
    let mut s = String::new();
    family(
        &mut s,
        "daqtune_check_status",
        "One series per verdict: the check id, its subject and the status it ended in \
         (pass, warn, fail, skip, n/a, error, pending-reboot); the value is always 1.",
    );
    for (v, subject) in numbered(report.checks.iter()) {
        sample(
            &mut s,
            "daqtune_check_status",
            &[
                ("id", &v.id),
                ("subject", &subject),
                ("status", v.status.as_str()),
            ],
            1,
        );
    }
    family(
        &mut s,
        "daqtune_platform_limit",
        "One series per verdict that holds under a platform limit (pcie.mps at 128 B on IGX \
         Orin, say): the check id, its subject, the limit's value and what it means; the \
         value is always 1.",
    );
    for (v, subject) in numbered(report.checks.iter().filter(|v| v.limit.is_some())) {
        let Some(l) = &v.limit else { continue };
        sample(
            &mut s,
            "daqtune_platform_limit",
            &[
                ("id", &v.id),
                ("subject", &subject),
                ("limit", &l.value),
                ("note", &l.note),
            ],
            1,
        );
    }
    family(
        &mut s,
        "daqtune_verdicts",
        "Verdicts of the run by status (every status listed, 0 included).",
    );
    for st in Status::ALL {
        let n = report.checks.iter().filter(|v| v.status == st).count();
        sample(&mut s, "daqtune_verdicts", &[("status", st.as_str())], n);
    }
    family(
        &mut s,
        "daqtune_gate_passed",
        "1 when the run's gate passed (no verdict at or above --fail-on and, with the \
         profile's required checks as a gate, none of them skipped or in error), else 0.",
    );
    sample(
        &mut s,
        "daqtune_gate_passed",
        &[],
        u8::from(run.gate.passed),
    );
    family(
        &mut s,
        "daqtune_gate_failures",
        "Verdicts at or above --fail-on plus required checks that skipped or errored.",
    );
    sample(
        &mut s,
        "daqtune_gate_failures",
        &[],
        run.gate.failures.len(),
    );
    family(
        &mut s,
        "daqtune_pending_reboot",
        "1 when a change is in place that takes effect at the next boot (a verdict in \
         pending-reboot), else 0.",
    );
    sample(
        &mut s,
        "daqtune_pending_reboot",
        &[],
        u8::from(!run.pending_reboot.is_empty()),
    );
    family(
        &mut s,
        "daqtune_capability",
        "One series per capability label (gpudirect, hugepages, cores-isolated) with its \
         state: true, false, unknown or na; the value is always 1.",
    );
    for c in CAPABILITIES {
        let state = run
            .capabilities
            .get(c.name)
            .map(String::as_str)
            .unwrap_or("unknown");
        sample(
            &mut s,
            "daqtune_capability",
            &[("capability", c.name), ("state", state)],
            1,
        );
    }
    family(
        &mut s,
        "daqtune_profile_info",
        "The profile the host was judged against and how it was chosen (given, detected, \
         fallback); the value is always 1.",
    );
    sample(
        &mut s,
        "daqtune_profile_info",
        &[
            ("profile", &report.profile),
            ("source", profile_source(&report.profile_origin)),
        ],
        1,
    );
    family(
        &mut s,
        "daqtune_build_info",
        "The daqtune version that wrote this file; the value is always 1.",
    );
    sample(
        &mut s,
        "daqtune_build_info",
        &[("version", &report.daqtune_version)],
        1,
    );
    family(
        &mut s,
        "daqtune_run_duration_seconds",
        "How long the checks took.",
    );
    sample(
        &mut s,
        "daqtune_run_duration_seconds",
        &[],
        format!("{:.3}", report.elapsed_ms as f64 / 1000.0),
    );
    family(
        &mut s,
        "daqtune_last_run_timestamp_seconds",
        "When the run ended, in seconds since the epoch (alert when time() minus this \
         grows past the refresh period).",
    );
    sample(
        &mut s,
        "daqtune_last_run_timestamp_seconds",
        &[],
        run.finished_unix,
    );
    s
}

/// Each verdict with the subject its series carries. Two verdicts of one check on one subject
/// would be one series twice, which the collector rejects with the whole file: the later ones
/// get " #2", " #3".
fn numbered<'a>(
    verdicts: impl Iterator<Item = &'a crate::model::verdict::Verdict>,
) -> Vec<(&'a crate::model::verdict::Verdict, String)> {
    let mut seen: HashMap<(&str, &str), usize> = HashMap::new();
    verdicts
        .map(|v| {
            let n = seen.entry((&v.id, &v.subject)).or_insert(0);
            *n += 1;
            let subject = if *n == 1 {
                v.subject.clone()
            } else {
                format!("{} #{n}", v.subject)
            };
            (v, subject)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::tests::report;
    use crate::model::gate::FailOn;
    use crate::model::verdict::Verdict;

    #[test]
    fn one_series_per_verdict_escaped() {
        let r = report(vec![
            Verdict::fail("cpu.governor", "cpu64-127", "x"),
            Verdict::pass("nic.mtu", "0000:01:00.0 (\"cx7\\0\"\nx)", "ok"),
            Verdict::pass("nic.mtu", "0000:01:00.0 (\"cx7\\0\"\nx)", "twice"),
        ]);
        let run = RunInfo::new(
            &r.checks,
            &r.gate_failures,
            false,
            FailOn::Fail,
            false,
            1_700_000_000,
        );
        let p = render_with(&r, &run);
        assert!(p.contains(
            "daqtune_check_status{id=\"cpu.governor\",subject=\"cpu64-127\",status=\"fail\"} 1\n"
        ));
        assert!(p.contains(
            "daqtune_check_status{id=\"nic.mtu\",subject=\"0000:01:00.0 (\\\"cx7\\\\0\\\"\\nx)\",status=\"pass\"} 1\n"
        ));
        assert!(p.contains("subject=\"0000:01:00.0 (\\\"cx7\\\\0\\\"\\nx) #2\""));
        assert_eq!(p.matches("daqtune_check_status{").count(), 3);
        assert!(p.contains("daqtune_verdicts{status=\"fail\"} 1\n"));
        assert!(p.contains("daqtune_verdicts{status=\"pending-reboot\"} 0\n"));
        assert!(p.contains("daqtune_gate_passed 0\n"));
        assert!(p.contains("daqtune_gate_failures 1\n"));
        assert!(p.contains("daqtune_pending_reboot 0\n"));
        assert!(p.contains("daqtune_profile_info{profile=\"igx-orin\",source=\"given\"} 1\n"));
        assert!(p.contains("daqtune_run_duration_seconds 1.234\n"));
        assert!(p.contains("daqtune_last_run_timestamp_seconds 1700000000\n"));
        assert!(p.contains("daqtune_capability{capability=\"gpudirect\",state=\"unknown\"} 1\n"));
        // Every family once, every sample without a timestamp.
        let mut helps: Vec<&str> = p
            .lines()
            .filter_map(|l| l.strip_prefix("# HELP "))
            .map(|l| l.split(' ').next().unwrap_or(""))
            .collect();
        let n = helps.len();
        helps.sort();
        helps.dedup();
        assert_eq!(helps.len(), n);
        assert_eq!(p.matches("# TYPE ").count(), n);
        for l in p.lines().filter(|l| !l.starts_with('#')) {
            let value_part = l.rsplit_once(['}', ' ']).map(|x| x.1).unwrap_or("");
            assert!(value_part.parse::<f64>().is_ok(), "{l}");
            assert!(l.starts_with("daqtune_"), "{l}");
        }
    }

    #[test]
    fn pending_reboot_and_gate() {
        let r = report(vec![Verdict::new(
            "kernel.cmdline",
            "/proc/cmdline",
            Status::PendingReboot,
            "next boot",
        )]);
        let run = RunInfo::new(&r.checks, &r.gate_failures, true, FailOn::Fail, true, 5);
        let p = render_with(&r, &run);
        assert!(p.contains("daqtune_pending_reboot 1\n"));
        assert!(p.contains("daqtune_gate_passed 1\n"));
        assert!(p.contains("daqtune_capability{capability=\"cores-isolated\",state=\"false\"} 1\n"));
    }
}
