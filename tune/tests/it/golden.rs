//! Golden outputs: `check` (text and JSON), `plan` (text and JSON) and every `generate` kind, on
//! every fixture root with each built-in profile, compared byte for byte with the files under
//! tests/golden/. They were recorded from the tree before the architecture refactor (issue 24)
//! so that a change of structure that changes what a user sees fails here.
//!
//! A deliberate change of output is re-recorded with `DAQTUNE_BLESS_GOLDEN=1 cargo test -p
//! daqtune --test golden`; the diff of tests/golden/ then shows the change for review.
//!
//! What varies between runs is masked: the temporary root's path, the run's end time and its
//! duration.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

const PROFILES: &[&str] = &["igx-orin", "dgx-spark", "generic-dgpu"];
const KINDS: &[&str] = &[
    "kernel-args",
    "grub-dropin",
    "extlinux",
    "udev-mrrs",
    "mount-unit",
    "governor-unit",
    "gpu-clocks-unit",
    "acs-unit",
    "modules-load",
    "sysctl",
    "netplan",
    "nm",
    "networkd-link",
    "thp-tmpfiles",
    "numa-balancing-sysctl",
    "watchdog-sysctl",
    "timer-migration-sysctl",
    "stat-interval-sysctl",
    "ksm-tmpfiles",
];

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/golden")
}

/// The fixture roots: directories of tests/fixtures with a sys/ or proc/ tree.
fn fixture_roots() -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("read tests/fixtures")
        .flatten()
        .filter(|e| e.path().join("sys").is_dir() || e.path().join("proc").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Mask what differs from run to run: the root's path, durations and end times.
fn normalize(text: &str, root: &Path) -> String {
    let root = root.to_string_lossy();
    let mut out = String::with_capacity(text.len());
    for line in text.replace(root.as_ref(), "<ROOT>").lines() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let masked = if let Some(key) =
            ["\"elapsed_ms\":", "\"finished_unix\":", "\"finished_at\":"]
                .iter()
                .find(|k| trimmed.starts_with(**k))
        {
            let comma = if trimmed.ends_with(',') { "," } else { "" };
            format!("{indent}{key} <MASKED>{comma}")
        } else if trimmed.starts_with("summary:") && trimmed.ends_with(" ms)") {
            match trimmed.rfind(" (") {
                Some(i) => format!("{indent}{} (<MS> ms)", &trimmed[..i]),
                None => line.to_string(),
            }
        } else {
            line.to_string()
        };
        out.push_str(&masked);
        out.push('\n');
    }
    out
}

fn run_section(root: &Path, title: &str, args: &[&str]) -> String {
    let root_str = root.to_str().expect("utf8 root");
    let out = Command::new(common::bin())
        .arg("--root")
        .arg(root_str)
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("DAQTUNE_ROOT")
        .env_remove("DAQTUNE_PROFILE")
        .output()
        .expect("run daqtune");
    format!(
        "=== {title} (exit {}) ===\n--- stdout\n{}--- stderr\n{}",
        out.status
            .code()
            .map_or("signal".to_string(), |c| c.to_string()),
        normalize(&String::from_utf8_lossy(&out.stdout), root),
        normalize(&String::from_utf8_lossy(&out.stderr), root),
    )
}

/// Every output of one fixture with one profile, in a fixed order.
fn outputs(fixture: &str, profile: &str) -> String {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("root");
    std::fs::create_dir(&root).expect("mkdir root");
    common::copy_tree(&common::fixture(fixture), &root);
    common::install_daqtune(&root);
    let mut text = String::new();
    for (title, args) in [
        ("check", vec!["check", "-p", profile]),
        ("check json", vec!["check", "-p", profile, "-f", "json"]),
        ("plan", vec!["plan", "-p", profile]),
        ("plan json", vec!["plan", "-p", profile, "-f", "json"]),
    ] {
        text.push_str(&run_section(&root, title, &args));
    }
    for kind in KINDS {
        text.push_str(&run_section(
            &root,
            &format!("generate {kind}"),
            &["generate", "-p", profile, kind],
        ));
    }
    text
}

#[test]
fn outputs_on_every_fixture_and_profile_match_the_recorded_ones() {
    let bless = std::env::var_os("DAQTUNE_BLESS_GOLDEN").is_some_and(|v| !v.is_empty());
    let fixtures = fixture_roots();
    assert!(fixtures.len() >= 10, "fixture roots found: {fixtures:?}");
    let cases: Vec<(String, &str)> = fixtures
        .iter()
        .flat_map(|f| PROFILES.iter().map(move |p| (f.clone(), *p)))
        .collect();
    // Two workers: the runs are independent processes, and CI has two cores.
    let results: Vec<(String, &str, String)> = std::thread::scope(|s| {
        let halves: Vec<_> = cases
            .chunks(cases.len().div_ceil(2))
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|(f, p)| (f.clone(), *p, outputs(f, p)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        halves
            .into_iter()
            .flat_map(|h| h.join().expect("worker"))
            .collect()
    });
    let mut differing = Vec::new();
    for (fixture, profile, text) in results {
        let path = golden_dir().join(&fixture).join(format!("{profile}.txt"));
        if bless {
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir golden");
            std::fs::write(&path, &text).expect("write golden");
            continue;
        }
        let recorded = std::fs::read_to_string(&path).unwrap_or_default();
        if recorded != text {
            let first = recorded
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(recorded.lines().count().min(text.lines().count()));
            differing.push(format!(
                "{} line {}: recorded {:?}, now {:?}",
                path.display(),
                first + 1,
                recorded.lines().nth(first).unwrap_or("<end>"),
                text.lines().nth(first).unwrap_or("<end>"),
            ));
        }
    }
    assert!(
        differing.is_empty(),
        "{} golden file(s) differ (re-record deliberate changes with DAQTUNE_BLESS_GOLDEN=1):\n{}",
        differing.len(),
        differing.join("\n")
    );
}
