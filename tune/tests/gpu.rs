//! The GPU checks through the real binary: profile detection on a root without one, the live
//! host, daqtune's own apply journal, `topo` on a snapshot and the CUDA probe child. The
//! acceptance table on recorded GPU facts is engine/tests/gpu.rs.

mod common;
use common::*;

fn text(v: &serde_json::Value, k: &str) -> String {
    v[k].as_str().unwrap_or("").to_string()
}

#[test]
fn garbage_facts_file_is_a_skip_not_a_crash() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("sys")).expect("mkdir");
    std::fs::create_dir_all(dir.path().join("daqtune")).expect("mkdir");
    std::fs::write(dir.path().join("daqtune/gpu.json"), "(null)").expect("write");
    let out = run(&[
        "check",
        "--root",
        dir.path().to_str().expect("utf8"),
        "--format",
        "json",
    ]);
    assert!(matches!(out.status.code(), Some(0) | Some(1)));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(statuses(&r, "gpu.bar1"), ["skip"]);
    assert!(text(verdict(&r, "gpu.bar1"), "message").contains("daqtune.gpu/v1"));
}

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

/// gpu.clocks reads daqtune's own apply journal: a lock daqtune made that NVML no longer shows
/// is reported as lost; a reverted run's lock is not claimed.
#[test]
fn clocks_consult_the_apply_journal() {
    use daqtune_engine::hostio::gpu::GpuDomain;
    use daqtune_engine::hostio::journal::{Entry, JournalDoc, Record, RunState, SCHEMA};
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("host");
    let src = fixture("gpu-h200");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(&src)
        .arg(&root)
        .status()
        .expect("cp");
    assert!(status.success());
    let facts = std::fs::read_to_string(root.join("daqtune/gpu.json")).expect("facts");
    let uuid = facts
        .split('"')
        .find(|s| s.starts_with("GPU-"))
        .expect("uuid")
        .to_string();
    let write_run = |state: RunState| {
        let doc = JournalDoc {
            schema: SCHEMA.into(),
            id: "20261122T020000Z-1".into(),
            profile: "generic-dgpu".into(),
            started_unix: 0,
            state,
            records: vec![Record {
                entry: Entry::GpuLock {
                    uuid: uuid.clone(),
                    domain: GpuDomain::Sm,
                    previously_locked: false,
                    shown: None,
                    floor_before_mhz: None,
                },
                done: true,
                check: Some("gpu.clocks".into()),
            }],
            pending_reboot: vec![],
            selection: Default::default(),
            daqtune_version: None,
            finished_unix: None,
            options: None,
            undone: vec![],
        };
        let dir = root.join("var/lib/daqtune/journal/20261122T020000Z-1");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(
            dir.join("journal.json"),
            serde_json::to_vec(&doc).expect("ser"),
        )
        .expect("write");
    };
    let sm_message = || {
        let out = run(&[
            "check",
            "--root",
            root.to_str().expect("utf8"),
            "--profile",
            "generic-dgpu",
            "--format",
            "json",
            "gpu.clocks",
        ]);
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let v = r["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .find(|c| c["subject"].as_str().unwrap_or("").ends_with(" SM"))
            .cloned()
            .expect("SM verdict");
        (
            v["status"].as_str().unwrap_or("").to_string(),
            v["message"].as_str().unwrap_or("").to_string(),
        )
    };
    let (status, msg) = sm_message();
    assert_eq!(status, "fail");
    assert!(!msg.contains("daqtune locked"), "{msg}");
    write_run(RunState::Applied);
    let (status, msg) = sm_message();
    assert_eq!(status, "fail");
    assert!(msg.contains("lock was lost"), "{msg}");
    // A run from before the current boot (btime after its start) locked nothing that holds now.
    std::fs::write(root.join("proc/stat"), "cpu  1 2 3 4\nbtime 1000\n").expect("stat");
    let (_, msg) = sm_message();
    assert!(!msg.contains("daqtune locked"), "{msg}");
    std::fs::remove_file(root.join("proc/stat")).expect("rm stat");
    write_run(RunState::Reverted);
    let (_, msg) = sm_message();
    assert!(!msg.contains("daqtune locked"), "{msg}");
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
    assert_eq!(body.matches(">NV18</text>").count(), 6, "six bonds drawn");
}

/// The CUDA probe child is wired into `main`: started with its variable set, the binary prints
/// one JSON report on one line and exits 0, whether or not this machine has the CUDA driver.
#[test]
fn cuda_probe_child_answers() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_daqtune"))
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
