//! The `daqtune-rdma` executable on whatever host runs the tests: without RDMA (no feature, or
//! a kernel without RDMA support, as on the CI machine) every run is a skip with its reason and
//! exit status 0; with RDMA devices, a device that does not exist is an error (exit 1).

use serde_json::Value;
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_daqtune-rdma"))
}

#[test]
fn skips_with_a_reason_or_rejects_a_missing_device() {
    let list = bin().arg("--list").output().expect("run --list");
    assert!(list.status.success());
    let listed = String::from_utf8_lossy(&list.stdout).to_string();
    let skip_reason = listed.strip_prefix("skip: ").map(|s| s.trim().to_string());

    let out = bin()
        .args([
            "--dev",
            "daqtune-no-such-dev",
            "--peer-dev",
            "daqtune-no-such-dev2",
            "--test",
            "write,send",
            "--duration",
            "0.1",
            "--format",
            "json",
        ])
        .output()
        .expect("run");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    assert_eq!(v["schema"], "daqtune.selftest/v1");
    let results = v["results"].as_array().expect("results");
    assert_eq!(results.len(), 2);
    match skip_reason {
        Some(why) => {
            assert!(!why.is_empty());
            assert_eq!(out.status.code(), Some(0), "a skip is not a failure");
            for r in results {
                assert_eq!(r["status"], "skip", "{r}");
                assert_eq!(r["notes"][0].as_str(), Some(why.as_str()));
            }
            if daqtune_rdma::BUILT_WITH_RDMA {
                assert!(!why.contains("built without"), "{why}");
            } else {
                assert!(why.contains("built without RDMA support"), "{why}");
            }
        }
        None => {
            assert_eq!(out.status.code(), Some(1));
            for r in results {
                assert_eq!(r["status"], "error", "{r}");
                assert!(r["notes"][0]
                    .as_str()
                    .unwrap_or("")
                    .contains("no RDMA device \"daqtune-no-such-dev\""));
            }
        }
    }
}

#[test]
fn bad_usage_exits_2() {
    let out = bin().args(["--dev", "x"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2), "no receiver named");
    let out = bin()
        .args(["--dev", "x", "--peer-dev", "y", "--test", "read"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "unknown test");
    let out = bin()
        .args(["--dev", "x", "--peer-dev", "y", "--duration", "-1"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "negative duration");
}
