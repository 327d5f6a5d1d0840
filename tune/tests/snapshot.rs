//! Issue 8: snapshots replay to the same verdicts; redaction leaves no identifier behind.

mod common;
use common::*;
use std::path::Path;

fn checks_of(r: &serde_json::Value) -> Vec<serde_json::Value> {
    r["checks"].as_array().expect("checks").clone()
}

fn check_root(root: &Path, profile: Option<&str>) -> serde_json::Value {
    let mut args = vec![
        "check",
        "--root",
        root.to_str().expect("utf8"),
        "--format",
        "json",
    ];
    if let Some(p) = profile {
        args.extend(["--profile", p]);
    }
    let out = run(&args);
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

#[test]
fn fixtures_round_trip() {
    for (fx, prof) in [
        ("igx-untuned", "igx-orin"),
        ("igx-tuned", "igx-orin"),
        ("spark", "dgx-spark"),
        ("x86-2s", "generic-dgpu"),
    ] {
        let tmp = tempfile::tempdir().expect("tmp");
        let snap = tmp.path().join("snap");
        let src = fixture(fx);
        let out = run(&[
            "snapshot",
            "--root",
            src.to_str().expect("utf8"),
            "--profile",
            prof,
            "-o",
            snap.to_str().expect("utf8"),
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let a = check_root(&src, Some(prof));
        let b = check_root(&snap, Some(prof));
        assert_eq!(checks_of(&a), checks_of(&b), "{fx}");
        // Detection sees the same identity in the snapshot.
        assert_eq!(
            check_root(&src, None)["profile"],
            check_root(&snap, None)["profile"],
            "{fx}"
        );
    }
}

#[test]
fn live_host_replays_to_the_same_verdicts() {
    let tmp = tempfile::tempdir().expect("tmp");
    let archive = tmp.path().join("host.tar.zst");
    let out = run(&["snapshot", "-o", archive.to_str().expect("utf8")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let size = std::fs::metadata(&archive).expect("archive").len();
    assert!(size < 8 * 1024 * 1024, "snapshot is {size} bytes");
    let live = run(&["check", "--format", "json"]);
    let live: serde_json::Value = serde_json::from_slice(&live.stdout).expect("json");
    let replay = check_root(&archive, None);
    assert_eq!(checks_of(&live), checks_of(&replay));
    // diff agrees, and exits 0 when equal.
    let live_file = tmp.path().join("live.json");
    std::fs::write(&live_file, serde_json::to_vec(&live).expect("ser")).expect("write");
    let d = run(&[
        "diff",
        live_file.to_str().expect("utf8"),
        archive.to_str().expect("utf8"),
    ]);
    assert_eq!(
        d.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&d.stdout)
    );
}

#[test]
fn diff_reports_changes_with_exit_1() {
    let a = check_root(&fixture("igx-untuned"), Some("igx-orin"));
    let b = check_root(&fixture("igx-tuned"), Some("igx-orin"));
    let tmp = tempfile::tempdir().expect("tmp");
    let (pa, pb) = (tmp.path().join("a.json"), tmp.path().join("b.json"));
    std::fs::write(&pa, serde_json::to_vec(&a).expect("ser")).expect("w");
    std::fs::write(&pb, serde_json::to_vec(&b).expect("ser")).expect("w");
    let d = run(&[
        "diff",
        pa.to_str().expect("utf8"),
        pb.to_str().expect("utf8"),
    ]);
    assert_eq!(d.status.code(), Some(1));
    let text = String::from_utf8_lossy(&d.stdout);
    assert!(text.contains("cpu.governor"), "{text}");
    assert!(text.contains("- fail"), "{text}");
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, "{not json").expect("w");
    assert_eq!(
        run(&[
            "diff",
            bad.to_str().expect("utf8"),
            pa.to_str().expect("utf8")
        ])
        .status
        .code(),
        Some(2)
    );
}

fn grep_tree(dir: &Path, needle: &[u8], hits: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let entry = entry.expect("entry");
        let ft = entry.file_type().expect("ft");
        let p = entry.path();
        if ft.is_symlink() {
            let t = std::fs::read_link(&p).expect("link");
            if t.to_string_lossy()
                .as_bytes()
                .windows(needle.len())
                .any(|w| w == needle)
            {
                hits.push(p.display().to_string());
            }
        } else if ft.is_dir() {
            grep_tree(&p, needle, hits);
        } else {
            let data = std::fs::read(&p).expect("read");
            if data.windows(needle.len()).any(|w| w == needle) {
                hits.push(p.display().to_string());
            }
        }
    }
}

#[test]
fn redact_leaves_no_identifier() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("host");
    std::fs::create_dir_all(&root).expect("mkdir");
    copy_tree(&fixture("x86-2s"), &root);
    let gpu_json = std::fs::read_to_string(root.join("daqtune/gpu.json")).expect("gpu facts");
    let uuid = gpu_json
        .split('"')
        .find(|s| s.starts_with("GPU-"))
        .expect("a GPU UUID in the fixture")
        .to_string();
    let w = |p: &str, t: &str| {
        let f = root.join(p);
        std::fs::create_dir_all(f.parent().expect("parent")).expect("mkdir");
        std::fs::write(f, t).expect("write");
    };
    w("proc/sys/kernel/hostname", "qa-rack17-node04\n");
    w("sys/class/dmi/id/product_serial", "CZJ2470ABC\n");
    w("sys/class/dmi/id/board_serial", "PWKLY0ZZY1\n");
    w("daqtune/kmsg.txt", "mlx5_core 0000:01:00.0 qa-rack17-node04: port 1 mac 3c:ec:ef:ab:cd:ef guid 0c42:a103:0065:f5ea\n");
    let snap = tmp.path().join("snap");
    let out = run(&[
        "snapshot",
        "--root",
        root.to_str().expect("utf8"),
        "--redact",
        "-o",
        snap.to_str().expect("utf8"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "qa-rack17-node04",
        "CZJ2470ABC",
        "PWKLY0ZZY1",
        "3c:ec:ef:ab:cd:ef",
        "0c42:a103:0065:f5ea",
        uuid.as_str(),
    ] {
        let mut hits = Vec::new();
        grep_tree(&snap, needle.as_bytes(), &mut hits);
        assert!(hits.is_empty(), "{needle} found in {hits:?}");
    }
    // Still a valid root with the same verdicts (subjects naming a GPU carry the stand-in UUID).
    let a = check_root(&root, Some("generic-dgpu"));
    let b = check_root(&snap, Some("generic-dgpu"));
    let verdicts = |r: &serde_json::Value| -> Vec<(String, String)> {
        checks_of(r)
            .iter()
            .map(|c| {
                (
                    c["id"].as_str().unwrap_or("").to_string(),
                    c["status"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    assert_eq!(verdicts(&a), verdicts(&b));
}

/// A snapshot taken with `daqtune snapshot` on a real H200 machine (docs/validation.md, final
/// run) replays here, without the GPU, to the verdicts `daqtune check` gave live there.
#[test]
fn gpu_machine_snapshot_replays_to_its_live_verdicts() {
    let archive = fixture("gpu-h200-snapshot.tar.zst");
    let live_file = fixture("gpu-h200-snapshot.live.json");
    let live: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&live_file).expect("live")).expect("json");
    let mut replay = check_root(&archive, None);
    assert_eq!(live["profile"], replay["profile"]);
    // Checks added after the recording (daqtune.artifacts) are not in the live report: the
    // replay is compared on the checks the recording had.
    let known: Vec<serde_json::Value> = checks_of(&live).iter().map(|c| c["id"].clone()).collect();
    let kept: Vec<serde_json::Value> = checks_of(&replay)
        .into_iter()
        .filter(|c| known.contains(&c["id"]))
        .collect();
    replay["checks"] = serde_json::Value::Array(kept);
    let key = |r: &serde_json::Value| -> Vec<(String, String, String)> {
        checks_of(r)
            .iter()
            .map(|c| {
                (
                    c["id"].as_str().unwrap_or("").to_string(),
                    c["subject"].as_str().unwrap_or("").to_string(),
                    c["status"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    assert_eq!(key(&live), key(&replay));
    let gpu: Vec<_> = key(&replay)
        .into_iter()
        .filter(|k| k.0.starts_with("gpu."))
        .collect();
    assert!(gpu.len() >= 6, "real GPU verdicts replayed: {gpu:?}");
    assert!(gpu.iter().any(|k| k.0 == "gpu.bar1" && k.2 == "pass"));
    let tmp = tempfile::tempdir().expect("tmp");
    let replay_file = tmp.path().join("replay.json");
    std::fs::write(&replay_file, serde_json::to_vec(&replay).expect("ser")).expect("write");
    let d = run(&[
        "diff",
        live_file.to_str().expect("utf8"),
        replay_file.to_str().expect("utf8"),
    ]);
    assert_eq!(
        d.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&d.stdout)
    );
}
