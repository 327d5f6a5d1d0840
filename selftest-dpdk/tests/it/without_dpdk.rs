//! Without the `dpdk` feature the binary builds anywhere and says why it cannot run; the
//! launcher turns that into a skip.
#![cfg(not(feature = "dpdk"))]

use daqtune_selftest::dpdk_launcher::{run_dpdk, DpdkRequest};
use daqtune_selftest::Status;
use std::path::PathBuf;
use std::process::Command;

#[test]
fn binary_reports_skip_and_launcher_passes_it_on() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_daqtune-dpdk"));
    let out = Command::new(&exe)
        .args(["--veth", "--duration", "1"])
        .output()
        .expect("run daqtune-dpdk");
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json on stdout");
    assert_eq!(v["schema"], "daqtune.selftest.dpdk/v1");
    assert_eq!(v["result"]["status"], "skip");
    assert!(v["result"]["notes"][0]
        .as_str()
        .unwrap_or_default()
        .contains("not compiled in"));

    let probe = Command::new(&exe).arg("--probe").output().expect("probe");
    let p: serde_json::Value = serde_json::from_slice(&probe.stdout).expect("json");
    assert_eq!(p["dpdk_compiled"], false);

    let run = run_dpdk(&DpdkRequest::default(), Some(exe));
    assert_eq!(run.result.status, Status::Skip);
    assert_eq!(run.result.engine, "dpdk");
}

#[test]
fn usage_errors_exit_2() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_daqtune-dpdk"));
    for args in [
        &["--bogus"][..],
        &["--duration", "x"],
        &["--tx-port", "eth0"],
    ] {
        let out = Command::new(&exe).args(args).output().expect("run");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}
