//! `daqtune diff A B`: what changed between two reports or snapshots, per check and subject.

use crate::report::Report;
use crate::verdict::{Status, Verdict};
use std::collections::BTreeMap;

/// Checks whose observed value carries counters that move on every read (interrupt counts,
/// error counters sampled while traffic runs); only their status is compared.
/// `gpu.clocks` observes the current clock, which moves with load.
pub const VOLATILE_OBSERVED: &[&str] = &["irq.affinity", "pcie.aer", "platform", "gpu.clocks"];

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    pub id: String,
    pub subject: String,
    pub before: Option<(Status, Option<String>)>,
    pub after: Option<(Status, Option<String>)>,
}

fn key(v: &Verdict) -> (String, String) {
    (v.id.clone(), v.subject.clone())
}

fn index(r: &Report) -> BTreeMap<(String, String), &Verdict> {
    r.checks.iter().map(|v| (key(v), v)).collect()
}

pub fn diff(a: &Report, b: &Report) -> Vec<Change> {
    let (ia, ib) = (index(a), index(b));
    let mut keys: Vec<&(String, String)> = ia.keys().chain(ib.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for k in keys {
        let va = ia.get(k);
        let vb = ib.get(k);
        let volatile = VOLATILE_OBSERVED.contains(&k.0.as_str());
        let same = match (va, vb) {
            (Some(x), Some(y)) => x.status == y.status && (volatile || x.observed == y.observed),
            _ => false,
        };
        if !same {
            out.push(Change {
                id: k.0.clone(),
                subject: k.1.clone(),
                before: va.map(|v| (v.status, v.observed.clone())),
                after: vb.map(|v| (v.status, v.observed.clone())),
            });
        }
    }
    out
}

pub fn render(changes: &[Change]) -> String {
    if changes.is_empty() {
        return "no differences\n".into();
    }
    let side = |s: &Option<(Status, Option<String>)>| match s {
        None => "(absent)".to_string(),
        Some((st, Some(o))) => format!("{st} [{o}]"),
        Some((st, None)) => st.to_string(),
    };
    let mut s = String::new();
    for c in changes {
        s.push_str(&format!(
            "{} {}\n  - {}\n  + {}\n",
            c.id,
            c.subject,
            side(&c.before),
            side(&c.after)
        ));
    }
    s.push_str(&format!("{} difference(s)\n", changes.len()));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{summarize, HostInfo, SCHEMA};

    fn rep(vs: Vec<Verdict>) -> Report {
        Report {
            schema: SCHEMA.into(),
            daqtune_version: "0".into(),
            host: HostInfo {
                hostname: None,
                kernel: None,
                arch: None,
                product: None,
                root: "/".into(),
            },
            profile: "p".into(),
            profile_origin: "o".into(),
            summary: summarize(&vs),
            checks: vs,
            gate_failures: vec![],
            elapsed_ms: 1,
            run: None,
            gpu_facts: None,
        }
    }

    #[test]
    fn status_and_observed_changes() {
        let a = rep(vec![
            Verdict::fail("cpu.governor", "cpu0-3", "x").observed("powersave"),
            Verdict::pass("irq.affinity", "mlx5", "x").observed("1234 irqs"),
        ]);
        let b = rep(vec![
            Verdict::pass("cpu.governor", "cpu0-3", "y").observed("performance"),
            Verdict::pass("irq.affinity", "mlx5", "x").observed("9999 irqs"),
            Verdict::pass("numa", "host", "x"),
        ]);
        let d = diff(&a, &b);
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(d[0].id, "cpu.governor");
        assert_eq!(d[1].id, "numa");
        assert!(diff(&a, &a).is_empty());
    }
}
