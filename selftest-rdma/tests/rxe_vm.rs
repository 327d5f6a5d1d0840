//! End to end on soft-RoCE: boots Debian's stock kernel under qemu (tests/vm/rxe-vm.sh), makes
//! two rxe devices on a veth pair and runs daqtune-rdma WRITE, SEND and ping-pong, then
//! perftest's ib_write_bw on the same devices as the reference.
//!
//! Skipped (with the reason printed) only when the VM cannot be prepared: no qemu, no static
//! busybox, or the kernel package cannot be downloaded.
#![cfg(feature = "rdma")]

use daqtune_rdma::perftest::parse_bw;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

#[test]
fn soft_roce_write_and_send_in_a_vm() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let harness = repo.join("tests/vm/rxe-vm.sh");
    let guest = repo.join("tests/vm/rdma-guest.sh");
    let out = tempfile::tempdir().expect("tempdir");
    // The VM sees the host's root read-only but has its own tmpfs on /tmp and /run, so a build
    // under /tmp (a CI clone, say) would be invisible there: hand the binary over through the
    // output directory, which the harness mounts at /tmp/out inside the VM.
    std::fs::copy(
        env!("CARGO_BIN_EXE_daqtune-rdma"),
        out.path().join("daqtune-rdma"),
    )
    .expect("copy daqtune-rdma into the VM's output directory");
    let bin = "/tmp/out/daqtune-rdma";
    let secs = std::env::var("DAQTUNE_VM_SECONDS").unwrap_or_else(|_| "2".into());
    let started = std::time::Instant::now();
    let run = Command::new("bash")
        .arg(&harness)
        .arg("--out")
        .arg(out.path())
        .args(["--timeout", "300"])
        .arg(&guest)
        .arg(bin)
        .arg(&secs)
        .output()
        .expect("run tests/vm/rxe-vm.sh");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    if run.status.code() == Some(125) {
        let why = stdout
            .lines()
            .find_map(|l| l.strip_prefix("rxe-vm: SKIP: "))
            .unwrap_or("the harness could not prepare the VM");
        eprintln!("SKIPPED soft_roce_write_and_send_in_a_vm: {why}");
        return;
    }
    let tail: String = {
        let lines: Vec<&str> = stdout.lines().collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    };
    assert!(
        run.status.success(),
        "VM run failed ({:?}):\n{tail}\n{stderr}",
        run.status
    );

    let json = std::fs::read_to_string(out.path().join("daqtune-rdma.json"))
        .expect("daqtune-rdma.json from the guest");
    let v: Value = serde_json::from_str(&json).expect("report JSON");
    assert_eq!(v["schema"], "daqtune.selftest/v1");
    let results = v["results"].as_array().expect("results");
    let details = v["rdma"].as_array().expect("rdma details");
    assert_eq!(results.len(), 3, "{json}");
    assert_eq!(details.len(), 3, "{json}");
    let mut write_gbps = 0.0;
    for (r, d) in results.iter().zip(details) {
        let what = d["transfer"].as_str().unwrap_or("?");
        assert_eq!(r["status"], "pass", "{what}: {r}");
        assert_eq!(r["integrity_errors"], 0, "{what}");
        assert_eq!(r["lost"], 0, "{what}");
        assert_eq!(r["reordered"], 0, "{what}");
        assert!(
            r["packets"].as_u64().unwrap_or(0) > 0,
            "{what}: nothing arrived"
        );
        for side in ["sender_cq", "receiver_cq"] {
            let errs = d[side]["errors"].as_object().expect("errors map");
            assert!(errs.is_empty(), "{what} {side}: {errs:?}");
            assert!(d[side]["completions"].as_u64().unwrap_or(0) > 0);
        }
        assert!(d["receiver"]["ended"].as_bool().unwrap_or(false), "{what}");
        if what == "write" {
            write_gbps = r["gbps"].as_f64().unwrap_or(0.0);
        }
        if what == "pingpong" {
            assert!(r["latency"]["p50_us"].as_f64().unwrap_or(0.0) > 0.0);
        }
    }
    let transfers: Vec<&str> = details
        .iter()
        .filter_map(|d| d["transfer"].as_str())
        .collect();
    assert_eq!(transfers, ["write", "send", "pingpong"]);

    // --peer: the TCP side channel exchange (QPN, GID, rkey) and the receiver's figures.
    let peer = std::fs::read_to_string(out.path().join("daqtune-rdma-peer.json"))
        .expect("daqtune-rdma-peer.json from the guest");
    let pv: Value = serde_json::from_str(&peer).expect("peer report JSON");
    let pres = pv["results"].as_array().expect("peer results");
    assert_eq!(pres.len(), 2, "{peer}");
    for r in pres {
        assert_eq!(r["topology"], "peer");
        assert_eq!(r["status"], "pass", "{r}");
        assert_eq!(r["integrity_errors"], 0);
    }

    // Injected corruption must be caught by the receiver and fail the run.
    let bad = std::fs::read_to_string(out.path().join("daqtune-rdma-corrupt.json"))
        .expect("daqtune-rdma-corrupt.json from the guest");
    let bv: Value = serde_json::from_str(&bad).expect("corrupt report JSON");
    let br = &bv["results"][0];
    assert_eq!(br["status"], "fail", "{br}");
    let sent = br["sent"].as_u64().unwrap_or(0);
    let bad_n = br["integrity_errors"].as_u64().unwrap_or(0);
    assert!(
        sent >= 5 && bad_n == sent / 5,
        "sent {sent}, integrity errors {bad_n}"
    );

    if let Ok(text) = std::fs::read_to_string(out.path().join("daqtune-rdma.txt")) {
        for l in text.lines().filter(|l| {
            ["pass ", "fail ", "error", "skip "]
                .iter()
                .any(|p| l.starts_with(p))
                || l.contains("latency p50")
        }) {
            eprintln!("  {l}");
        }
    }
    let perf = std::fs::read_to_string(out.path().join("ib_write_bw.txt")).unwrap_or_default();
    match parse_bw(&perf) {
        Some(p) if p.avg_gbps > 0.0 => eprintln!(
            "soft-RoCE in TCG VM: daqtune-rdma WRITE {write_gbps:.4} Gb/s, ib_write_bw \
             {:.4} Gb/s, ratio {:.2} (VM run {:.0} s)",
            p.avg_gbps,
            if p.avg_gbps > 0.0 {
                write_gbps / p.avg_gbps
            } else {
                0.0
            },
            started.elapsed().as_secs_f64()
        ),
        _ => eprintln!("ib_write_bw gave no usable result (perftest installed?):\n{perf}"),
    }
}
