//! The GPU checks through the real binary: the live host, `topo` on a snapshot and the CUDA
//! probe child. The acceptance table on recorded GPU facts is engine/tests/gpu.rs; a garbage
//! facts file and daqtune's own apply journal are engine/tests/gpu_journal.rs.

use crate::common;
use common::*;

#[test]
fn live_host_without_gpu_skips_without_panic() {
    // CI and this build machine have no NVIDIA libraries; on a GPU host the checks report real
    // values instead. Either way: no panic, exit 0 or 1, no `error` verdict.
    let out = run(&["check", "--format", "json"]);
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    for id in [
        "gpu.clocks",
        "gpu.bar1",
        "gpu.gpudirect",
        "gpu.peermem",
        "gpu.driver",
    ] {
        let st = statuses(&r, id);
        assert!(!st.is_empty(), "{id}");
        assert!(!st.iter().any(|s| s == "error"), "{id}: {st:?}");
    }
}

/// Issue 30: the 4-GPU H200 snapshot replays `NV18` between every GPU pair through the binary,
/// with the legend, the named pairs and the bonds in the SVG.
#[test]
fn topo_replays_nvlink_from_a_snapshot() {
    let snap = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/validation-data/nvlink-h200x4/snapshot.tar.zst");
    let root = snap.to_str().expect("utf8");
    let out = run(&["--root", root, "topo"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("GPU0     X      NV18    NV18    NV18    PHB"),
        "{text}"
    );
    assert!(text.contains("NV#  = Connection traversing a bonded set of # NVLinks"));
    assert!(text.contains("GPU2 - GPU3: NV18 (18 links through NVSwitch; PCIe path PHB)"));
    // `--svg -` puts the SVG alone on stdout (docs/cli.md).
    let out = run(&["--root", root, "topo", "--svg", "-"]);
    assert_eq!(out.status.code(), Some(0));
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(
        body.starts_with("<?xml") || body.starts_with("<svg"),
        "{body}"
    );
    assert_eq!(body.matches(" NV18</text>").count(), 6, "six bonds drawn");
    assert_eq!(
        body.matches(r#"data-class="NV18""#).count(),
        6,
        "six bond paths"
    );
}

/// The CUDA probe child is wired into `main`: started with its variable set, the binary prints
/// one JSON report on one line and exits 0, whether or not this machine has the CUDA driver.
#[test]
fn cuda_probe_child_answers() {
    let out = std::process::Command::new(crate::common::bin())
        .env("DAQTUNE_INTERNAL_CUDA_PROBE", "1")
        .env(
            "CUDA_VISIBLE_DEVICES",
            "GPU-00000000-0000-0000-0000-000000000000",
        )
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0));
    // daqtune takes the report at its newline and does not wait for the exit: one whole line.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.ends_with('\n') && text.matches('\n').count() == 1,
        "{text:?}"
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    assert!(j["status"]["status"].is_string(), "{j}");
    assert!(j["devices"].is_array(), "{j}");
}
