//! Gate logic shared by `check` and `qualify`: waivers, required checks and exit codes.

use crate::model::profile::{parse_date, Profile};
use crate::model::verdict::{Status, Verdict};

/// Downgrade waived failures to warn, recording why. Expired waivers are named but not applied.
/// Only `fail` is waived: an `error` (a check that crashed or could not judge) is not a known,
/// accepted deviation, and waiving it would let a broken required check through the gate.
pub fn apply_waivers(profile: &Profile, verdicts: &mut [Verdict], today: i64) {
    for v in verdicts.iter_mut() {
        if v.status != Status::Fail {
            continue;
        }
        for w in &profile.waivers {
            if w.check != v.id
                || w.subject
                    .as_ref()
                    .is_some_and(|s| !v.subject.contains(s.as_str()))
            {
                continue;
            }
            match parse_date(&w.until) {
                Some(until) if until >= today => {
                    v.waived = Some(format!(
                        "{} (waived until {}, was {})",
                        w.reason, w.until, v.status
                    ));
                    v.status = Status::Warn;
                }
                _ => {
                    v.message
                        .push_str(&format!(" [waiver expired on {}]", w.until));
                }
            }
            break;
        }
    }
}

/// Which severity fails the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOn {
    Warn,
    Fail,
}

/// Required checks that ended in skip or error (or produced nothing) fail the gate.
pub fn required_failures(profile: &Profile, verdicts: &[Verdict]) -> Vec<String> {
    let mut out = Vec::new();
    for id in &profile.required {
        let vs: Vec<&Verdict> = verdicts.iter().filter(|v| &v.id == id).collect();
        if vs.is_empty() {
            continue; // not selected in this run
        }
        if let Some(v) = vs
            .iter()
            .find(|v| matches!(v.status, Status::Skip | Status::Error))
        {
            out.push(format!(
                "required check {id} ended in {} ({})",
                v.status, v.message
            ));
        }
    }
    out
}

/// Exit code for a set of verdicts: 0 nothing at or above `fail_on`, 1 otherwise.
pub fn exit_code(verdicts: &[Verdict], fail_on: FailOn, gate: bool, profile: &Profile) -> u8 {
    let threshold = match fail_on {
        FailOn::Warn => 1,
        FailOn::Fail => 2,
    };
    let failed = verdicts.iter().any(|v| v.status.severity() >= threshold);
    let required = gate && !required_failures(profile, verdicts).is_empty();
    u8::from(failed || required)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::profile::Waiver;

    #[test]
    fn waiver_applies_until_date() {
        let mut p = Profile::default();
        p.waivers.push(Waiver {
            check: "pcie.acs".into(),
            subject: None,
            until: "2030-01-01".into(),
            reason: "lab switch".into(),
        });
        let mut v = vec![Verdict::fail("pcie.acs", "x", "set")];
        apply_waivers(&p, &mut v, parse_date("2029-12-31").expect("date"));
        assert_eq!(v[0].status, Status::Warn);
        let mut v = vec![Verdict::fail("pcie.acs", "x", "set")];
        apply_waivers(&p, &mut v, parse_date("2030-01-02").expect("date"));
        assert_eq!(v[0].status, Status::Fail);
        assert!(v[0].message.contains("expired"));
        // A check that errored is not what the waiver accepted.
        let mut v = vec![Verdict::error("pcie.acs", "x", "internal error")];
        apply_waivers(&p, &mut v, parse_date("2029-12-31").expect("date"));
        assert_eq!(v[0].status, Status::Error);
    }

    #[test]
    fn required_skip_fails_gate() {
        let mut p = Profile::default();
        p.required.push("hugepages".into());
        let v = vec![Verdict::skip("hugepages", "host", "cannot read")];
        assert_eq!(exit_code(&v, FailOn::Fail, true, &p), 1);
        assert_eq!(exit_code(&v, FailOn::Fail, false, &p), 0);
        let v = vec![Verdict::pass("hugepages", "host", "ok")];
        assert_eq!(exit_code(&v, FailOn::Fail, true, &p), 0);
    }
}
