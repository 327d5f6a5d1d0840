//! `daqtune diff A B`: what changed between two reports or snapshots, per check and subject.

use crate::check::report::Report;
use crate::model::verdict::{Status, Verdict};
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

/// What `snapshot --redact` puts in place of a GPU UUID (`Redactor::gpu_uuid`).
const REDACTED_GPU_UUID: &str = "GPU-00000000-0000-0000-0000-";

/// `GPU-` and 36 characters of UUID.
fn is_gpu_uuid(w: &str) -> bool {
    w.len() == 40
        && w.starts_with("GPU-")
        && w[4..].bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

fn is_bus_id(w: &str) -> bool {
    w.len() >= 7 && w.contains(':') && w.contains('.')
}

/// Whether `snapshot --redact` replaced this report's GPU UUIDs.
pub fn gpu_uuids_redacted(r: &Report) -> bool {
    r.checks
        .iter()
        .any(|v| v.subject.contains(REDACTED_GPU_UUID))
}

/// GPU UUIDs of one side mapped to the PCI bus id that follows them in a subject.
fn gpu_bus_ids(r: &Report) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for v in &r.checks {
        let w: Vec<&str> = v.subject.split_whitespace().collect();
        for pair in w.windows(2) {
            if is_gpu_uuid(pair[0]) && is_bus_id(pair[1]) {
                m.insert(pair[0].to_string(), pair[1].to_string());
            }
        }
    }
    m
}

/// A subject (or observed value) with each GPU UUID that has a known bus id replaced by
/// `GPU` (the bus id stays beside it in subjects, or is written after it elsewhere).
fn unredacted(text: &str, bus: &BTreeMap<String, String>) -> String {
    let mut out = text.to_string();
    for (uuid, b) in bus {
        let with_bus = format!("{uuid} {b}");
        out = out.replace(&with_bus, &format!("GPU {b}"));
        out = out.replace(uuid.as_str(), &format!("GPU {b}"));
    }
    out
}

type Key = (String, String);

/// Verdicts by (check, subject); where `match_gpus_by_bus`, GPU subjects are keyed by PCI bus
/// id instead of UUID, and GPU UUIDs in observed values are replaced likewise.
fn index(r: &Report, match_gpus_by_bus: bool) -> BTreeMap<Key, (&Verdict, Option<String>)> {
    let bus = if match_gpus_by_bus {
        gpu_bus_ids(r)
    } else {
        BTreeMap::new()
    };
    r.checks
        .iter()
        .map(|v| {
            let subject = unredacted(&v.subject, &bus);
            let observed = v.observed.as_deref().map(|o| unredacted(o, &bus));
            ((v.id.clone(), subject), (v, observed))
        })
        .collect()
}

/// Notes on how two reports were compared (printed with the changes): a redacted side, and
/// each PCI bus id whose GPU has another UUID on the other side (a swapped GPU, or simply two
/// hosts of one build: their GPUs are compared slot by slot, the identity change said here).
pub fn notes(a: &Report, b: &Report) -> Vec<String> {
    let mut out = Vec::new();
    let redacted = gpu_uuids_redacted(a) != gpu_uuids_redacted(b);
    if redacted {
        out.push("GPU UUIDs are redacted on one side (snapshot --redact): GPUs are matched by PCI bus id".into());
    }
    let (ba, bb) = (gpu_bus_ids(a), gpu_bus_ids(b));
    let by_bus = |m: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        m.iter().map(|(u, b)| (b.clone(), u.clone())).collect()
    };
    let (ua, ub) = (by_bus(&ba), by_bus(&bb));
    if !redacted {
        for (bus, before) in &ua {
            if let Some(after) = ub.get(bus).filter(|u| *u != before) {
                out.push(format!(
                    "the GPU at {bus} is {before} on the first side and {after} on the second: GPUs are compared by PCI bus id"
                ));
            }
        }
    }
    out
}

/// The changes between two reports. GPUs are matched by PCI bus id (shown as `GPU <bus id>`),
/// so two hosts of one build, or one host before and after a GPU swap, compare slot by slot;
/// a GPU without a bus id (integrated) is matched by UUID. A UUID that differs for the same
/// bus id is said in [`notes`], not counted as a difference of every check.
pub fn diff(a: &Report, b: &Report) -> Vec<Change> {
    let (ia, ib) = (index(a, true), index(b, true));
    let mut keys: Vec<&(String, String)> = ia.keys().chain(ib.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for k in keys {
        let va = ia.get(k);
        let vb = ib.get(k);
        let volatile = VOLATILE_OBSERVED.contains(&k.0.as_str());
        let same = match (va, vb) {
            (Some((x, xo)), Some((y, yo))) => x.status == y.status && (volatile || xo == yo),
            _ => false,
        };
        if !same {
            out.push(Change {
                id: k.0.clone(),
                subject: k.1.clone(),
                before: va.map(|(v, o)| (v.status, o.clone())),
                after: vb.map(|(v, o)| (v.status, o.clone())),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::report::{summarize, HostInfo, SCHEMA};

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

    #[test]
    fn redacted_gpus_match_by_bus_id() {
        let uuid = "GPU-591f9d37-d2fb-2a25-8958-ca2196a1f978";
        let red = "GPU-00000000-0000-0000-0000-000000000001";
        let side = |u: &str, clock: &str| {
            rep(vec![
                Verdict::pass("gpu.clocks", format!("{u} 0000:00:06.0 SM"), "x").observed(clock),
                Verdict::pass("gpu.bar1", format!("{u} 0000:00:06.0"), "x")
                    .observed(format!("{u}: 128 GiB")),
                Verdict::pass("numa", "host", "x"),
            ])
        };
        let (a, b) = (side(uuid, "1980 MHz"), side(red, "1980 MHz"));
        assert!(diff(&a, &b).is_empty(), "{:?}", diff(&a, &b));
        assert_eq!(notes(&a, &b).len(), 1, "{:?}", notes(&a, &b));
        assert!(notes(&a, &a).is_empty());
        // A real change on a redacted side still shows, under the bus id.
        let mut c = side(red, "1980 MHz");
        c.checks[1].status = Status::Fail;
        let d = diff(&a, &c);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].subject, "GPU 0000:00:06.0");
        // Two unredacted reports (issue 46 item 4: two identical IGX hosts differed in every
        // GPU verdict): the same slot compares equal, and the identity change is a note.
        let other = side("GPU-11111111-2222-3333-4444-555555555555", "1980 MHz");
        assert!(diff(&a, &other).is_empty(), "{:?}", diff(&a, &other));
        let n = notes(&a, &other);
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].contains("the GPU at 0000:00:06.0 is GPU-591f9d37"),
            "{n:?}"
        );
        // A real difference in that slot still shows.
        let mut worse = side("GPU-11111111-2222-3333-4444-555555555555", "1980 MHz");
        worse.checks[1].status = Status::Warn;
        assert_eq!(diff(&a, &worse).len(), 1);
    }
}
