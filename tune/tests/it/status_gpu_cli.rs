//! Issue 26 items 4-6 at the command line: `daqtune status` (text, JSON, exit 0 no drift, 1
//! drift, 2 usage), `revert --run/--only`, and `daqtune gpu`.

use crate::common;
use crate::common::path_str as s;
use common::*;
use std::path::Path;

fn root_copy() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    copy_tree(&fixture("igx-untuned"), d.path());
    d
}

fn out(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn status_follows_apply_drift_and_revert() {
    let d = root_copy();
    let r = s(d.path());
    let o = run(&["status", "--root", r]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("nothing applied"));
    let o = run(&[
        "apply",
        "--root",
        r,
        "--profile",
        "igx-orin",
        "--only",
        "cpu.governor",
        "--runtime-only",
        "--yes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let o = run(&["status", "--root", r, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(j["schema"], "daqtune.status/v1");
    assert_eq!(j["summary"]["drift"], 0);
    assert_eq!(
        j["runs"][0]["options"],
        serde_json::json!(["--only cpu.governor", "--runtime-only"])
    );
    let id = j["runs"][0]["id"].as_str().expect("id").to_string();
    // Behind daqtune's back.
    std::fs::write(
        d.path()
            .join("sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"),
        "powersave\n",
    )
    .expect("write");
    let o = run(&["status", "--root", r]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("DRIFT: 1 of 12"), "{t}");
    assert!(
        t.contains("cpu3/cpufreq/scaling_governor: applied `performance`, now `powersave`"),
        "{t}"
    );
    // Partial revert of the one setting, then nothing is applied.
    let o = run(&["revert", "--root", r, "--only", "cpu.governor", "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let o = run(&["status", "--root", r]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("nothing applied"));
    // The run is gone from what is in effect.
    let o = run(&["revert", "--root", r, "--run", &id, "--yes"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        out(&o).contains(&format!("no apply run {id} in effect")),
        "{}",
        out(&o)
    );
}

#[test]
fn usage_errors_exit_2() {
    let d = root_copy();
    let r = s(d.path());
    let o = run(&["status", "--root", r, "--format", "yaml"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["revert", "--root", r, "--only", "nope", "--yes"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(out(&o).contains("unknown check `nope`"), "{}", out(&o));
    let o = run(&[
        "revert",
        "--root",
        r,
        "--only",
        "cpu.governor",
        "--run",
        "x",
        "--yes",
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "--run and --only exclude each other"
    );
}

/// `gpu --root CAPTURE` reads the capture through a private temporary import that is gone
/// when the command ends: the view names the capture the user gave, never that directory.
#[test]
fn gpu_on_a_capture_names_the_capture_not_the_temporary_import() {
    let cap = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/real-hosts/nvsmi-xml-tesla-t4-aws-telegraf/nvidia-smi-q.xml");
    let o = run(&["gpu", "--root", s(&cap)]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    let first = t.lines().next().unwrap_or("");
    assert!(
        first.starts_with("GPU facts: imported from ") && first.contains(s(&cap)),
        "{t}"
    );
    assert!(!t.contains("daqtune-import"), "{t}");
    let o = run(&["gpu", "--root", s(&cap), "-f", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(j["root"], s(&cap), "{j}");
    // An lspci capture holds no GPU facts: said as the capture's lack, not as a missing file
    // of the temporary import.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/real-hosts/lspci-asus-esc8000a-e12-stelline");
    let o = run(&["gpu", "--root", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("no GPU facts: not in this capture"), "{t}");
    assert!(!t.contains("daqtune/gpu.json"), "{t}");
}

#[test]
fn gpu_shows_the_facts_with_their_sources() {
    let root = fixture("gpu-h200");
    let o = run(&["gpu", "--root", s(&root)]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("GPU 0: "), "{t}");
    assert!(
        t.lines()
            .any(|l| l.split_whitespace().take(2).eq(["BAR1", "NVML"])),
        "{t}"
    );
    let tmp = tempfile::tempdir().expect("tmp");
    let f = tmp.path().join("gpu.json");
    let o = run(&["gpu", "--root", s(&root), "-f", "json", "-o", s(&f)]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&f).expect("file")).expect("json");
    assert_eq!(j["schema"], "daqtune.gpu-view/v1");
    assert_eq!(j["source"]["kind"], "recorded");
    let help = run(&["gpu", "--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("--no-cache"));
    let help = run(&["status", "--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("drift"));
}

/// Outputs like coreutils: a full disk on stdout exits 2 saying so, whatever the command's
/// own result.
#[test]
fn a_full_disk_on_stdout_is_an_error() {
    use std::process::{Command, Stdio};
    let full = Path::new("/dev/full");
    if !full.exists() {
        daqtune_testkit::skip("no /dev/full on this machine");
        return;
    }
    let d = root_copy();
    let r = s(d.path()).to_string();
    let gpu = fixture("gpu-h200");
    for args in [
        vec!["status".to_string(), "--root".into(), r.clone()],
        vec![
            "status".into(),
            "--root".into(),
            r.clone(),
            "-f".into(),
            "json".into(),
        ],
        vec!["gpu".into(), "--root".into(), s(&gpu).to_string()],
    ] {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(full)
            .expect("/dev/full");
        let o = Command::new(bin())
            .args(&args)
            .env("NO_COLOR", "1")
            .stdout(Stdio::from(f))
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", out(&o));
        assert!(
            out(&o).contains("cannot write to standard output"),
            "{args:?}: {}",
            out(&o)
        );
    }
}
