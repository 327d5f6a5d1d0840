//! Readers of a `daqtune.report/v1` JSON report shared by the engine's tests (which build the
//! report through the engine's API) and the CLI tests (which read what the binary printed).
//! Included by path from engine/tests/it/common and tune/tests/it/common.
#![allow(dead_code)]

use serde_json::Value;

/// Every verdict of one check id, in report order.
pub fn verdicts<'a>(report: &'a Value, id: &str) -> Vec<&'a Value> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["id"] == id)
        .collect()
}

/// The statuses of one check id, in report order.
pub fn statuses(report: &Value, id: &str) -> Vec<String> {
    verdicts(report, id)
        .into_iter()
        .map(|c| status(c).to_string())
        .collect()
}

/// The first verdict of one check id.
pub fn verdict<'a>(report: &'a Value, id: &str) -> &'a Value {
    verdicts(report, id)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no verdict for {id}"))
}

pub fn status(v: &Value) -> &str {
    v["status"].as_str().expect("status")
}

pub fn msg(v: &Value) -> &str {
    v["message"].as_str().expect("message")
}

/// Validate a report against the documented `daqtune.report/v1` shape.
pub fn assert_schema(r: &Value) {
    assert_eq!(r["schema"], "daqtune.report/v1");
    assert!(r["host"].is_object());
    assert!(r["profile"].is_string());
    let statuses = [
        "pass",
        "warn",
        "fail",
        "skip",
        "n/a",
        "error",
        "pending-reboot",
    ];
    for c in r["checks"].as_array().expect("checks") {
        for k in ["id", "subject", "status", "message"] {
            assert!(c[k].is_string(), "{k} missing in {c}");
        }
        assert!(
            statuses.contains(&c["status"].as_str().unwrap_or("")),
            "{c}"
        );
        for k in ["observed", "expected", "fix"] {
            assert!(c.get(k).is_none() || c[k].is_string(), "{k} in {c}");
        }
    }
    let summary = r["summary"].as_object().expect("summary");
    for s in statuses {
        assert!(summary[s].is_u64(), "summary.{s}");
    }
    let total: u64 = summary.values().map(|v| v.as_u64().unwrap_or(0)).sum();
    assert_eq!(
        total as usize,
        r["checks"].as_array().map(|a| a.len()).unwrap_or(0)
    );
}
