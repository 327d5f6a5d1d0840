//! The GPU checks on host roots through the engine's API: a recorded facts file that is
//! garbage is a skip, and gpu.clocks reads daqtune's own apply journal. Moved from
//! tune/tests/gpu.rs (issue 24), which keeps the command's part (the live host, `topo`, the
//! CUDA probe child).

use crate::common;
use common::*;
use daqtune_engine::commands::{choose_profile_with, evaluate_facts};
use daqtune_engine::GlobalOptions;
use daqtune_testkit::str_field as text;

/// `daqtune check --root ROOT --format json`: the profile detected as the command does.
fn check_detected(root: &std::path::Path) -> serde_json::Value {
    let host = daqtune_probe::Host::at(root).expect("root");
    let g = GlobalOptions {
        root: Some(root.to_path_buf()),
        ..Default::default()
    };
    let facts = g.facts(&host);
    let lp = choose_profile_with(&facts, &g).expect("profile");
    let rep = evaluate_facts(&facts, &lp, Vec::new(), false, None);
    serde_json::from_str(&daqtune_engine::report::json(&rep)).expect("json report")
}

#[test]
fn garbage_facts_file_is_a_skip_not_a_crash() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("sys")).expect("mkdir");
    std::fs::create_dir_all(dir.path().join("daqtune")).expect("mkdir");
    std::fs::write(dir.path().join("daqtune/gpu.json"), "(null)").expect("write");
    let r = check_detected(dir.path());
    assert_eq!(statuses(&r, "gpu.bar1"), ["skip"]);
    assert!(text(verdict(&r, "gpu.bar1"), "message").contains("daqtune.gpu/v1"));
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
    copy_tree(&src, &root);
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
        let (r, _) = evaluate(&root, "generic-dgpu", &["gpu.clocks"]);
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
