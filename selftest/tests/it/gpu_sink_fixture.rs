//! The H200 validation records (docs/validation-data/gpu-sink-h200/, docs/validation.md) parse as
//! `daqtune.selftest/v1` reports and say what the validation claims: every payload verified on
//! the GPU with zero errors, planted corruption counted by the kernel, the copy rate against the
//! pinned-copy peak as recorded, and the socket `device` kind reported as n/a.

use daqtune_selftest::gpu_sink::MemoryKind;
use daqtune_selftest::{Report, Status};
use std::path::PathBuf;

fn load(rel: &str) -> Report {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/validation-data/gpu-sink-h200")
        .join(rel);
    let text = std::fs::read_to_string(&p).expect("fixture present");
    serde_json::from_str(&text).expect("a daqtune.selftest/v1 report")
}

#[test]
fn clean_runs_verify_everything_on_the_gpu() {
    for (f, kind) in [
        ("run1/by-bus.json", MemoryKind::HostPinned),
        ("run1/by-uuid.json", MemoryKind::Copy),
        ("run1/copy-16m.json", MemoryKind::Copy),
        ("run2/copy-tcp-4m.json", MemoryKind::Copy),
        ("run2/copy-tcp-8m.json", MemoryKind::Copy),
        ("run2/copy-tcp-16m.json", MemoryKind::Copy),
        ("run2/copy-tcp-32m.json", MemoryKind::Copy),
        ("run2/copy-tcp-4m-paced10.json", MemoryKind::Copy),
    ] {
        let rep = load(f);
        assert_eq!(rep.schema, "daqtune.selftest/v1");
        for r in &rep.results {
            let g = r.gpu.as_ref().expect("gpu record");
            assert_eq!(g.memory, kind, "{f}");
            assert!(g.name.contains("H200"), "{f}");
            assert!(g.verified > 100_000, "{f}");
            assert_eq!(g.verified, r.packets, "{f}");
            assert_eq!(r.packets, r.sent, "{f}: every sent message verified");
            assert_eq!(g.integrity_errors, 0, "{f}");
            assert_eq!(r.integrity_errors, 0, "{f}");
            assert_eq!((r.lost, r.reordered, g.seq_breaks), (0, 0, 0), "{f}");
            assert!(g.totals_agree, "{f}");
            assert_eq!(g.min_seq, Some(0), "{f}");
            assert_eq!(g.max_seq, Some(r.sent - 1), "{f}");
            assert!(!r.status.is_failure(), "{f}");
            let cal = g.pinned_peak.expect("calibrated");
            assert_eq!(
                cal.bytes, g.batch_bytes,
                "{f}: peak measured at the batch size"
            );
        }
    }
}

#[test]
fn copy_rate_against_peak_as_recorded() {
    // >= 8 MiB batches reach 90 % of the pinned-copy peak; 4 MiB ones did not on this H200.
    for (f, at_least) in [
        ("run2/copy-tcp-8m.json", 0.9),
        ("run2/copy-tcp-16m.json", 0.9),
        ("run2/copy-tcp-32m.json", 0.9),
        ("run1/copy-16m.json", 0.9),
    ] {
        let r = &load(f).results[0];
        let g = r.gpu.as_ref().expect("gpu");
        let ratio = g.h2d_of_peak.expect("copy ratio");
        assert!(ratio >= at_least, "{f}: {ratio}");
        assert_eq!(r.status, Status::Pass, "{f}");
        assert!(g.batch_bytes >= 8 << 20);
    }
    let r = &load("run2/copy-tcp-4m.json").results[0];
    let g = r.gpu.as_ref().expect("gpu");
    assert!(g.h2d_of_peak.expect("ratio") < 0.9);
    assert_eq!(
        r.status,
        Status::Warn,
        "recorded by the version that warned on any shortfall"
    );
}

/// The recorded runs judged again by today's rule: a warning only when the GPU path limited
/// the rate. These records predate the receiver-wait figures, so the rule reads how busy the
/// copies kept the copy engine: at 4 MiB (79 % of the peak) a 40 Gb/s stream kept it busy a
/// small share of the run, so the sink kept up with the wire and the run passes, with the
/// shortfall in a note.
#[test]
fn recorded_runs_warn_only_when_the_copy_path_limited_the_rate() {
    let rejudge = |r: &daqtune_selftest::EngineResult| {
        let mut r = r.clone();
        r.status = Status::Pending;
        r.notes.clear();
        daqtune_selftest::judge(&mut r, &daqtune_selftest::Thresholds::default());
        r
    };
    for f in [
        "run2/copy-tcp-4m.json",
        "run2/copy-tcp-4m-paced10.json",
        "run2/copy-tcp-8m.json",
        "run2/copy-tcp-16m.json",
    ] {
        let rec = &load(f).results[0];
        let g = rec.gpu.as_ref().expect("gpu");
        assert!(g.receiver_wait_ms.is_none(), "{f}: an older record");
        let r = rejudge(rec);
        assert_eq!(r.status, Status::Pass, "{f}: {:?}", r.notes);
        if g.h2d_of_peak.expect("ratio") < 0.9 {
            assert!(
                r.notes.iter().any(|n| n.contains("kept up with the wire")),
                "{f}: {:?}",
                r.notes
            );
        }
    }
    // The same 4 MiB record, had its copies kept the copy engine busy all run long (a stream
    // as fast as the copies): that is the copy path limiting the rate.
    let mut rec = load("run2/copy-tcp-4m.json").results[0].clone();
    let g = rec.gpu.as_mut().expect("gpu");
    let copy_s =
        g.h2d_copies as f64 * g.batch_bytes as f64 * 8.0 / (g.h2d_gbps.expect("h2d") * 1e9);
    rec.duration_s = copy_s;
    let r = rejudge(&rec);
    assert_eq!(r.status, Status::Warn, "{:?}", r.notes);
    assert!(r.notes.iter().any(|n| n.contains("limited the rate")));
}

#[test]
fn planted_corruption_counted_by_the_gpu() {
    let rep = load("run2/inject-copy-16m.json");
    assert_eq!(rep.results.len(), 2);
    for r in &rep.results {
        let g = r.gpu.as_ref().expect("gpu");
        assert_eq!(r.injected_corruptions, 5);
        assert_eq!(g.integrity_errors, 5);
        assert_eq!(g.bad_crc, 5);
        assert_eq!(g.seq_breaks, 0);
        assert!(g.totals_agree);
        assert!(!r.status.is_failure());
    }
}

#[test]
fn device_kind_is_not_applicable_to_sockets() {
    let rep = load("run1/device-na.json");
    assert_eq!(rep.summary.skip, 2);
    for r in &rep.results {
        assert_eq!(r.status, Status::Skip);
        assert!(r.notes[0].contains("n/a"));
        assert!(r.gpu.is_none());
    }
}
