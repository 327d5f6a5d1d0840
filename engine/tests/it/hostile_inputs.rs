//! Issue 23, rows 3 and 11, on host roots through the engine's API: a CPU-list bomb in sysfs
//! is refused as garbage, not expanded; 2000 queues on one CPU each name a few sharers and
//! count the rest (the text was quadratic). Moved from tune/tests/hardening_h23.rs (issue 24),
//! which keeps the command's part.

use crate::common;
use crate::redteam;
use common::*;
use redteam::queues_config;
use std::path::Path;

/// Row 11, the cost behind "40,000 queues take 59.5 s and 158 MB": every queue's verdict
/// listed every other queue on its CPU (quadratic text). Up to the list bound (4096), each
/// verdict names a few sharers and counts the rest.
#[test]
fn many_queues_on_one_cpu_name_a_few_sharers() {
    let d = tempfile::tempdir().expect("tmp");
    let cfg = d.path().join("app.yaml");
    std::fs::write(&cfg, queues_config(2000)).expect("write");
    let (r, _) = evaluate_app(
        &fixture("x86-2s"),
        "generic-dgpu",
        Some(&cfg),
        &["app.cores"],
    );
    let queues: Vec<&serde_json::Value> = r["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["subject"].as_str().is_some_and(|s| s.contains("queues[")))
        .collect();
    assert_eq!(queues.len(), 2000);
    for q in queues {
        let m = q["message"].as_str().expect("message");
        assert!(m.len() < 1000, "{} bytes: {}", m.len(), &m[..200]);
        assert!(m.contains("shares CPU 5 with 1996 more thread(s)"), "{m}");
    }
}

/// Row 3: the CPU-list bomb archive (`local_cpulist` files of `0-65535,` x 7000) replays:
/// the lists are refused as garbage instead of expanded.
#[test]
fn cpulist_bomb_archive_replays() {
    let d = tempfile::tempdir().expect("tmp");
    let root = d.path().join("host");
    std::fs::create_dir_all(&root).expect("mkdir");
    copy_tree(&fixture("x86-2s"), &root);
    let bomb = "0-65535,".repeat(7000);
    let mut n = 0;
    for e in walk(&root) {
        if e.file_name().is_some_and(|f| f == "local_cpulist") {
            std::fs::write(&e, &bomb).expect("bomb");
            n += 1;
        }
    }
    std::fs::write(root.join("sys/devices/system/cpu/isolated"), &bomb).expect("iso");
    assert!(n > 0, "the fixture has local_cpulist files");
    let (r, code) = evaluate(&root, "generic-dgpu", &[]);
    assert!(matches!(code, 0 | 1), "exit {code}");
    // Garbage, not a set of 65536 CPUs: the sysfs isolated list is unreadable, so the IRQ
    // check falls back to the command line's isolcpus.
    let text = r.to_string();
    assert!(!text.contains("65535"), "a bomb list was taken as CPUs");
    assert!(text.contains("may run on the isolcpus 2-5"), "{text}");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => out.extend(walk(&p)),
            Ok(t) if t.is_file() => out.push(p),
            _ => {}
        }
    }
    out
}
