//! `daqtune qualify` as text: the check report, the stages with their times, each self-test
//! result's reference and its likely causes, and the result with its wall time. JUnit and
//! JSON are machine formats beside the qualification in the engine.

use daqtune_engine::qualify::{cause_line, Qualification, SelftestEntry};
use std::fmt::Write as _;

/// The text report.
pub fn text(q: &Qualification) -> String {
    let mut s = crate::report::text(&q.checks, false, false);
    let _ = writeln!(s, "\nqualify level {}:", q.level);
    if let Some(sub) = &q.subset {
        let _ = writeln!(s, "  subset: {}", sub.describe());
    }
    for st in &q.stages {
        let _ = writeln!(
            s,
            "  {:<6} {:<22} {:>7.1} s  {}",
            st.status, st.name, st.seconds, st.detail
        );
    }
    let assessed: Vec<&SelftestEntry> = q
        .selftest
        .iter()
        .filter(|r| r.reference.is_some() || !r.causes.is_empty())
        .collect();
    if !assessed.is_empty() {
        let _ = writeln!(s, "line rate and reference:");
    }
    for r in assessed {
        let why = r.reference.as_ref().map(|a| a.why.as_str()).unwrap_or("");
        let _ = writeln!(s, "  {}/{}: {why}", r.engine, r.mode);
        if !r.causes.is_empty() {
            let _ = writeln!(s, "    likely causes, most likely first:");
            for c in &r.causes {
                let _ = writeln!(s, "      {}", cause_line(c));
                if let Some(rec) = &c.recovery {
                    let _ = writeln!(s, "         recovery: {rec}");
                }
                if let Some(src) = &c.source {
                    let _ = writeln!(s, "         source: {src}");
                }
            }
        } else if !r.symptoms().is_empty() {
            let _ = writeln!(
                s,
                "    likely causes: none of the host's verdicts explains it (docs/ci-gate.md)"
            );
        }
    }
    let _ = writeln!(
        s,
        "result: {} ({:.1} s wall time)",
        if q.passed { "PASS" } else { "FAIL" },
        q.wall_s
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failed level-2 qualification as `--json` writes it: one TCP result below its
    /// reference with two causes (the first a known state with its recovery and source).
    fn failed() -> Qualification {
        let checks = serde_json::json!({
            "schema": "daqtune.report/v1", "daqtune_version": "0",
            "host": {"hostname": "h", "kernel": null, "arch": null, "product": null, "root": "/"},
            "profile": "dgx-spark", "profile_origin": "given", "summary": {},
            "checks": [], "gate_failures": [], "elapsed_ms": 1
        });
        serde_json::from_value(serde_json::json!({
            "schema": "daqtune.qualify/v1", "level": 2, "passed": false,
            "stages": [{"name": "selftest socket", "seconds": 6.0, "status": "fail",
                        "detail": "1 result below its reference"}],
            "checks": checks, "gate_failures": [], "wall_s": 12.25,
            "selftest": [{
                "engine": "socket", "mode": "tcp", "status": "fail", "gbps": 12.86,
                "reference": {
                    "link_mbps": 200000, "link_source": "sysfs", "mtu": 9000,
                    "line_gbps": 200.0, "of_line_pct": 6.4, "reference_gbps": 92.57,
                    "reference_stated_gbps": 92.57, "reference_source": "guide",
                    "of_reference_pct": 13.9, "floor": 0.9, "floor_gbps": 83.3,
                    "shortfall_gbps": 70.4, "verdict": "below", "why": "12.86 Gb/s is below"
                },
                "causes": [
                    {"rank": 1, "id": "known-state:spark-cx7-degraded-init",
                     "subject": "0000:01:00.1 (enp1s0f1np1)", "status": "warn",
                     "message": "matches", "reason": "a rail near 13 Gb/s",
                     "recovery": "keep the final QSFP cabling", "source": "PR #108"},
                    {"rank": 2, "id": "cpu.governor", "subject": "cpu0-19", "status": "warn",
                     "message": "powersave", "reason": "clocks"}
                ]
            }]
        }))
        .expect("a qualification")
    }

    #[test]
    fn causes_are_listed_ranked_with_recovery_and_source_and_the_result_last() {
        let t = text(&failed());
        assert!(t.contains("\nqualify level 2:\n"), "{t}");
        assert!(
            t.contains("line rate and reference:\n  socket/tcp: 12.86 Gb/s is below\n"),
            "{t}"
        );
        assert!(
            t.contains(
                "    likely causes, most likely first:\n      1. known-state:spark-cx7-degraded-init (0000:01:00.1 (enp1s0f1np1)) warn: matches - a rail near 13 Gb/s\n         recovery: keep the final QSFP cabling\n         source: PR #108\n      2. cpu.governor (cpu0-19) warn: powersave - clocks\n"
            ),
            "{t}"
        );
        assert!(t.ends_with("result: FAIL (12.2 s wall time)\n"), "{t}");
    }
}
