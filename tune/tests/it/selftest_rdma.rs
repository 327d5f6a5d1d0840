//! `daqtune selftest rdma` on whatever host runs the tests (the CI machine has no RDMA): every
//! way of asking for a run either skips with its reason or is refused with one; none crashes or
//! passes. The runs themselves are tested in the soft-RoCE VM (selftest-rdma/tests/rxe_vm.rs).

use crate::common;
use common::*;
use serde_json::Value;
use std::process::Command;

fn rdma(args: &[&str], helper: Option<&str>) -> std::process::Output {
    let mut c = Command::new(bin());
    c.args(["--profile", "generic-dgpu", "selftest", "rdma"])
        .args(args)
        .env_remove("SSH_CONNECTION");
    if let Some(h) = helper {
        c.env("DAQTUNE_RDMA_BIN", h);
    }
    c.output().expect("run daqtune selftest rdma")
}

/// The effective uid is 0 (from /proc, as the test has no libc of its own).
fn effective_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

fn skips(out: &std::process::Output) -> Vec<String> {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(v["schema"], "daqtune.selftest/v1");
    let results = v["results"].as_array().expect("results");
    assert!(!results.is_empty());
    results
        .iter()
        .map(|r| {
            assert_eq!(r["status"], "skip", "{r}");
            r["notes"][0].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

#[test]
fn nothing_named_is_a_skip_that_says_what_to_name() {
    let out = rdma(&["--format", "json"], None);
    assert_eq!(out.status.code(), Some(0));
    for why in skips(&out) {
        assert!(why.contains("--tx-if A --rx-if B"), "{why}");
    }
}

#[test]
fn missing_helper_is_a_skip_with_the_build_command() {
    let out = rdma(
        &["--dev", "rxe0", "--peer-dev", "rxe1", "--format", "json"],
        Some("/nonexistent/daqtune-rdma"),
    );
    assert_eq!(out.status.code(), Some(0));
    for why in skips(&out) {
        assert!(why.contains("--features rdma"), "{why}");
    }
}

#[test]
fn two_port_mode_skips_without_rdma_or_refuses_unknown_ports() {
    // The helper is never started for these ports (they do not exist); any file will do.
    let out = rdma(
        &[
            "--tx-if",
            "dqt-none0",
            "--rx-if",
            "dqt-none1",
            "--duration",
            "0.1",
            "--format",
            "json",
        ],
        Some("/bin/true"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let is_root = effective_root();
    if !is_root {
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("needs root"), "{stderr}");
        return;
    }
    match out.status.code() {
        // This CI machine: no RDMA in the kernel, so nothing is moved and the run is a skip.
        Some(0) => {
            for why in skips(&out) {
                assert!(why.contains("RDMA netlink"), "{why}");
            }
        }
        // A host with RDMA gets as far as looking the ports up.
        Some(2) => assert!(stderr.contains("no interface named dqt-none0"), "{stderr}"),
        other => panic!("exit {other:?}: {stderr}"),
    }
}

#[test]
fn veth_mode_skips_without_rdma() {
    let out = rdma(
        &["--veth", "--duration", "0.1", "--format", "json"],
        Some("/bin/true"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let is_root = effective_root();
    if !is_root {
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        return;
    }
    // Only a kernel without RDMA netlink is known to skip here; elsewhere the veth pair would
    // really be made (that run is the VM test's).
    if std::path::Path::new("/sys/class/infiniband").exists() {
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for why in skips(&out) {
        assert!(why.contains("RDMA netlink"), "{why}");
    }
}

/// What the helpers would refuse is refused before any namespace is made.
#[test]
fn namespaced_runs_check_their_options_first() {
    let out = rdma(&["--veth", "--test", "read"], Some("/bin/true"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--test read"));
    let out = rdma(
        &["--tx-if", "a", "--rx-if", "b", "--duration", "-1"],
        Some("/bin/true"),
    );
    assert_eq!(out.status.code(), Some(2));
    // Without a CUDA driver (CI) GPU memory is a skip that says so, before the ports move.
    if !std::path::Path::new("/proc/driver/nvidia/version").exists() {
        let out = rdma(
            &["--veth", "--memory", "device", "--format", "json"],
            Some("/bin/true"),
        );
        assert_eq!(out.status.code(), Some(0));
        for why in skips(&out) {
            assert!(why.contains("--memory device"), "{why}");
        }
    }
}

/// A test run's report is assessed before it is relayed (issue 29): a stand-in helper prints a
/// recorded daqtune-rdma report; the named devices do not exist here, so their link has no
/// speed and every bandwidth result says "no reference" instead of passing on one.
#[test]
fn a_relayed_report_is_assessed() {
    let d = tempfile::tempdir().expect("tmp");
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../selftest-rdma/tests/fixtures/helper-report.json");
    let args_file = d.path().join("args");
    let helper = d.path().join("daqtune-rdma");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\necho \"$@\" > '{}'\ncat '{}'\n",
            args_file.display(),
            fixture.display()
        ),
    )
    .expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let json_out = d.path().join("out.json");
    let out = rdma(
        &[
            "--dev",
            "dqt-none0",
            "--peer-dev",
            "dqt-none1",
            "--json-out",
            &json_out.to_string_lossy(),
        ],
        Some(&helper.to_string_lossy()),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // The helper answers in JSON; the files are the launcher's.
    let args = std::fs::read_to_string(&args_file).expect("helper args");
    assert!(args.ends_with("--format json\n"), "{args}");
    assert!(!args.contains("--json-out"), "{args}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("no reference"), "{text}");
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_out).expect("json out")).expect("json");
    let results = v["results"].as_array().expect("results");
    for r in &results[..2] {
        assert_eq!(r["reference"]["verdict"], "none", "{r}");
        assert!(
            r["reference"]["link_source"]
                .as_str()
                .is_some_and(|s| s.contains("dqt-none0")),
            "{r}"
        );
    }
    // The ping-pong is a latency run.
    assert!(results[2].get("reference").is_none(), "{}", results[2]);
    assert!(v["rdma"].is_array());
}
