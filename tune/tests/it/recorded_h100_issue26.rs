//! What this session's additions saw on a real H100 machine (docs/validation-data/issue26-h100,
//! taken 2026-11-26 with a release build, read-only): `check --format json` live, `gpu --format
//! json` live, `status` with nothing applied, and a `snapshot` of the same host. Replaying the
//! snapshot must judge every check as the live run did (the kernel latency settings and the
//! ethtool groups of its virtio port included), and `gpu --root` must show the values the live
//! view showed.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/validation-data/issue26-h100")
        .join(name)
}

fn json_file(name: &str) -> Value {
    let p = data(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn daqtune(args: &[&str]) -> Value {
    let out = Command::new(crate::common::bin())
        .args(args)
        .env_remove("DAQTUNE_ROOT")
        .env_remove("DAQTUNE_PROFILE")
        .output()
        .expect("run daqtune");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not JSON ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn verdicts(report: &Value) -> Vec<(String, String, String)> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
            (s("id"), s("subject"), s("status"))
        })
        .collect()
}

#[test]
fn the_h100_snapshot_replays_to_the_live_verdicts() {
    let live = json_file("check.json");
    let snap = data("snap.tar.zst");
    let replay = daqtune(&[
        "check",
        "--root",
        snap.to_str().expect("utf8"),
        "--format",
        "json",
    ]);
    // No built-in profile matched the machine: both runs fell back to generic-dgpu the same way.
    assert_eq!(live["profile"], "generic-dgpu");
    assert_eq!(replay["profile"], live["profile"]);
    assert_eq!(replay["profile_origin"], live["profile_origin"]);
    // Verdicts added after the recording (numa's libnuma one, NVIDIA/daqiri b27ff22;
    // gpu.health; pcie.capacity) are judged by captures of their own: every (check, subject)
    // the live run had must replay to its verdict.
    let live_keys: std::collections::BTreeSet<(String, String)> =
        verdicts(&live).into_iter().map(|v| (v.0, v.1)).collect();
    let replayed: Vec<_> = verdicts(&replay)
        .into_iter()
        .filter(|v| live_keys.contains(&(v.0.clone(), v.1.clone())))
        .collect();
    // One intended change since the recording: generic-dgpu allowed nvidia_peermem only; it
    // takes dma-buf too since NVIDIA/daqiri 3c87196 (docs/checks/gpu.peermem.md), and this
    // H100 runs the open kernel module with DMA_BUF_SUPPORTED=1, so gpu.peermem's live fail
    // ("nvidia_peermem is not loaded") is a pass through dma-buf now.
    let mut expected = verdicts(&live);
    for v in expected.iter_mut().filter(|v| v.0 == "gpu.peermem") {
        assert_eq!(v.2, "fail", "{v:?}");
        v.2 = "pass".into();
    }
    for v in replay["checks"].as_array().expect("checks") {
        if v["id"] == "gpu.peermem" {
            assert!(
                v["message"].as_str().unwrap_or("").contains("dma-buf"),
                "{v}"
            );
        }
    }
    assert_eq!(replayed, expected);
    // The new ids were judged there, not skipped for want of data: the H100 host's kernel
    // (6.18) has every latency file.
    let status_of = |id: &str| -> Vec<String> {
        verdicts(&live)
            .into_iter()
            .filter(|v| v.0 == id)
            .map(|v| v.2)
            .collect()
    };
    for id in [
        "kernel.thp",
        "kernel.numa-balancing",
        "kernel.watchdog",
        "kernel.timer-migration",
        "vm.stat-interval",
        "kernel.ksm",
    ] {
        let s = status_of(id);
        assert!(
            !s.is_empty() && s.iter().all(|s| s == "pass" || s == "warn"),
            "{id}: {s:?}"
        );
    }
}

#[test]
fn the_h100_gpu_view_replays_with_the_live_values() {
    let live = json_file("gpu-view.json");
    assert_eq!(live["schema"], "daqtune.gpu-view/v1");
    let snap = data("snap.tar.zst");
    let replay = daqtune(&[
        "gpu",
        "--root",
        snap.to_str().expect("utf8"),
        "--format",
        "json",
    ]);
    let facts = |v: &Value| -> Vec<(String, String)> {
        v["gpus"][0]["facts"]
            .as_array()
            .expect("facts")
            .iter()
            .map(|f| {
                (
                    f["field"].as_str().unwrap_or("").to_string(),
                    f["value"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    let (l, r) = (facts(&live), facts(&replay));
    assert_eq!(live["gpus"][0]["name"], "NVIDIA H100 80GB HBM3");
    assert!(
        l.contains(&("BAR1".into(), "131072 MiB (1 MiB used)".into())),
        "{l:?}"
    );
    // Every value the live view read is the replay's too. NVLink is the one field the live view
    // left unread (see docs/validation-data/issue26-h100/README.md).
    for (field, value) in &l {
        if field == "NVLink" {
            continue;
        }
        assert!(
            r.contains(&(field.clone(), value.clone())),
            "{field}: live `{value}`, replay {r:?}"
        );
    }
}

#[test]
fn the_h100_status_with_nothing_applied() {
    let s = json_file("status.json");
    assert_eq!(s["schema"], "daqtune.status/v1");
    assert_eq!(s["summary"]["runs"], 0);
    assert_eq!(s["summary"]["drift"], 0);
}
