//! End to end on soft-RoCE: boots Debian's stock kernel under qemu (tests/vm/rxe-vm.sh), makes
//! two rxe devices on a veth pair and runs `daqtune selftest rdma` WRITE, SEND and ping-pong
//! (local pair, --peer, planted corruption), the two-port mode that moves ports and RDMA
//! devices into namespaces and back, then perftest's ib_write_bw on the same devices as the
//! reference.
//!
//! Skipped (with the reason printed) only when the VM cannot be prepared: no qemu, no static
//! busybox, or the kernel package cannot be downloaded.
#![cfg(feature = "rdma")]

use daqtune_rdma::perftest::parse_bw;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The main `daqtune` binary of this build: next to daqtune-rdma after a workspace build,
/// else built now (a `cargo test -p daqtune-rdma` alone does not build other packages).
fn daqtune_binary(helper: &Path) -> std::path::PathBuf {
    let beside = helper.with_file_name("daqtune");
    if !beside.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let st = Command::new(cargo)
            .args(["build", "-p", "daqtune"])
            .status()
            .expect("run cargo build -p daqtune");
        assert!(st.success(), "cargo build -p daqtune failed");
    }
    assert!(beside.is_file(), "{} missing", beside.display());
    beside
}

#[test]
fn soft_roce_write_and_send_in_a_vm() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let harness = repo.join("tests/vm/rxe-vm.sh");
    let guest = repo.join("tests/vm/rdma-guest.sh");
    let out = tempfile::tempdir().expect("tempdir");
    // The VM sees the host's root read-only but has its own tmpfs on /tmp and /run, so a build
    // under /tmp (a CI clone, say) would be invisible there: hand the binaries over through the
    // output directory, which the harness mounts inside the VM (the guest finds a bare name
    // there). The guest drives the main binary (`daqtune selftest rdma`), which runs
    // daqtune-rdma from its directory.
    let helper = Path::new(env!("CARGO_BIN_EXE_daqtune-rdma"));
    let main_bin = daqtune_binary(helper);
    for (from, name) in [(helper, "daqtune-rdma"), (main_bin.as_path(), "daqtune")] {
        std::fs::copy(from, out.path().join(name))
            .unwrap_or_else(|e| panic!("copy {} into the VM's directory: {e}", from.display()));
    }
    let secs = std::env::var("DAQTUNE_VM_SECONDS").unwrap_or_else(|_| "2".into());
    let started = std::time::Instant::now();
    let run = Command::new("bash")
        .arg(&harness)
        .arg("--out")
        .arg(out.path())
        // A hang guard only: under TCG on a machine busy with other builds the guest's runs
        // take several times longer than on a quiet one.
        .args(["--timeout", "1800"])
        .arg(&guest)
        .arg("daqtune")
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
        daqtune_testkit::skip(why);
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
        // The netdevs under the two rxe devices (issue 45): soft-RoCE sends its RoCE v2
        // datagrams through them, so the sender's veth end counts them going out.
        let ports = r["port_counters"].as_array().expect("port_counters");
        let names: Vec<(&str, &str)> = ports
            .iter()
            .map(|p| {
                (
                    p["port"].as_str().unwrap_or("?"),
                    p["role"].as_str().unwrap_or("?"),
                )
            })
            .collect();
        assert_eq!(names, [("dqa", "tx"), ("dqb", "rx")], "{what}: {r}");
        let tx_packets = ports[0]["deltas"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|d| d["name"] == "tx_packets" && d["source"] == "statistics")
            .and_then(|d| d["delta"].as_u64())
            .unwrap_or(0);
        assert!(
            tx_packets >= r["packets"].as_u64().unwrap_or(u64::MAX),
            "{what}: dqa tx_packets rose by {tx_packets}: {r}"
        );
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
        // The receiving port's netdev comes back from the peer over the side channel.
        let roles: Vec<&str> = r["port_counters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["role"].as_str())
            .collect();
        assert_eq!(roles, ["tx", "rx"], "{r}");
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

    // SIGINT mid-run: the run ends early but cleanly (verified, reported), exit 130.
    let sig = std::fs::read_to_string(out.path().join("sigint.json")).unwrap_or_default();
    let sv: Value =
        serde_json::from_str(&sig).unwrap_or_else(|e| panic!("sigint.json: {e}: {sig}"));
    let sr = &sv["results"][0];
    assert_eq!(sr["integrity_errors"], 0, "{sr}");
    assert!(sr["packets"].as_u64().unwrap_or(0) > 0, "{sr}");
    // It asked for 30 s: shorter, with exit 130 below, is the signal's doing (how much
    // shorter depends on the emulation's speed, so no tighter bound).
    assert!(
        sr["duration_s"].as_f64().unwrap_or(99.0) < 30.0,
        "the run went on after SIGINT: {sr}"
    );
    assert_eq!(
        std::fs::read_to_string(out.path().join("sigint.rc"))
            .unwrap_or_default()
            .trim(),
        "130"
    );

    // GPU memory kinds in a VM without a GPU: a skip with the reason, exit 0.
    let pinned = std::fs::read_to_string(out.path().join("daqtune-rdma-pinned.json"))
        .expect("daqtune-rdma-pinned.json from the guest");
    let pv: Value = serde_json::from_str(&pinned).unwrap_or_else(|e| panic!("{e}: {pinned}"));
    for r in pv["results"].as_array().expect("results") {
        assert_eq!(r["status"], "skip", "{r}");
        let why = r["notes"][0].as_str().unwrap_or_default();
        assert!(why.contains("--memory host_pinned"), "{why}");
    }
    assert_eq!(
        std::fs::read_to_string(out.path().join("daqtune-rdma-pinned.rc"))
            .unwrap_or_default()
            .trim(),
        "0"
    );

    // Two-port mode: both runs leave the host exactly as they found it.
    let read = |name: &str| {
        std::fs::read_to_string(out.path().join(name))
            .unwrap_or_else(|e| panic!("{name} from the guest: {e}"))
    };
    let before = read("state-before.txt");
    for want in [
        "netns shared",
        "link rxe0/1 netdev dqa",
        "link rxe1/1 netdev dqb",
        "dqa 198.18.0.1/24",
        "198.18.0.2 dev dqa lladdr",
    ] {
        assert!(
            before.contains(want),
            "{want:?} not in the state:\n{before}"
        );
    }
    for (after, err) in [
        ("state-after-softroce.txt", "ports-softroce.err"),
        ("state-after-rxe.txt", "ports-rxe.err"),
    ] {
        let said = std::fs::read_to_string(out.path().join(err)).unwrap_or_default();
        assert_eq!(
            read(after),
            before,
            "{after} differs from the state before; the run said:\n{said}"
        );
    }
    let soft_err = read("ports-softroce.err");
    for want in [
        "created soft-RoCE device dqt-rxe-dqc on dqc",
        // Exclusive mode was switched on, the move refused, and the run fell back.
        "dqt-rxe-dqc cannot change namespace (EOPNOTSUPP",
        "made again inside the namespace",
    ] {
        assert!(soft_err.contains(want), "{want:?} not in:\n{soft_err}");
    }
    assert!(
        !soft_err.contains("restore:"),
        "restore problems:\n{soft_err}"
    );
    let rxe_err = read("ports-rxe.err");
    assert!(
        rxe_err.contains("rxe0 (soft-RoCE) was unregistered when dqa moved"),
        "{rxe_err}"
    );
    assert!(
        !rxe_err.contains("restore:"),
        "restore problems:\n{rxe_err}"
    );
    // SIGKILL mid-run, then --recover: the host is as before again.
    assert_ne!(
        read("state-killed.txt"),
        before,
        "the kill landed after the run had restored everything ({}): nothing was recovered",
        read("killed.txt").trim()
    );
    let survivors =
        std::fs::read_to_string(out.path().join("helpers-after-kill.txt")).unwrap_or_default();
    if !survivors.trim().is_empty() {
        // PR_SET_PDEATHSIG sent them SIGTERM; one still running 10 s later holds its
        // namespace. Reported, not judged here (--recover must cope either way).
        eprintln!("WARNING: daqtune-rdma helpers outlived the SIGKILLed run:\n{survivors}");
    }
    assert_eq!(read("recover.rc").trim(), "0", "{}", read("recover.txt"));
    assert!(
        read("recover.txt").contains("restored what run"),
        "{}",
        read("recover.txt")
    );
    assert_eq!(
        read("state-after-recover.txt"),
        before,
        "after --recover, which said:\n{}\nthe killed run ({}) said:\n{}",
        read("recover.txt"),
        read("killed.txt").trim(),
        read("killed.err")
    );

    let kernel = read("kernel.txt").trim().to_string();
    let veth_err = read("veth.err");
    assert!(
        !veth_err.contains("restore:"),
        "restore problems:\n{veth_err}"
    );
    for (name, err) in [
        ("ports-softroce.json", &soft_err),
        ("ports-rxe.json", &rxe_err),
        ("veth.json", &veth_err),
    ] {
        let v: Value = serde_json::from_str(&read(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let topo = v["topology"].as_str().unwrap_or_default();
        assert!(
            topo.contains("netns mode shared") || topo.contains("soft-RoCE dqt"),
            "{name}: {topo}"
        );
        assert!(topo.contains("198.18.0.1 ->"), "{name}: {topo}");
        let r = &v["results"][0];
        let status = r["status"].as_str().unwrap_or("?");
        // Whatever else happened, nothing bad was accepted.
        assert_eq!(r["integrity_errors"], 0, "{name}: {r}");
        assert_eq!(r["reordered"], 0, "{name}: {r}");
        if kernel.starts_with("6.1.") {
            // Debian 12's rdma_rxe has no network-namespace support: the traffic of a netdev
            // moved out of the initial namespace goes nowhere. Exactly that, and nothing else,
            // may fail the run: the sender's QP errors at once, or nothing arrives before the
            // drain timeout; and the user is told why.
            let notes = r["notes"].to_string();
            assert_ne!(
                status, "pass",
                "{name}: 6.1's rxe cannot do this; what passed? {r}"
            );
            assert!(
                notes.contains("local QP operation error") || notes.contains("no message arrived"),
                "{name}: failed for another reason: {r}"
            );
            assert!(
                err.contains("without network-namespace support"),
                "{name}: {err}"
            );
        } else {
            // A kernel whose rxe follows its netdev into a namespace must carry the run.
            assert_eq!(status, "pass", "{name} on kernel {kernel}: {r}\n{err}");
        }
        eprintln!("two-port soft-RoCE run {name}: {status}");
    }

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
        _ => {
            // perftest is installed by the test command; when it ran, it ran on the rxe
            // devices the two-port runs restored, so it must have worked.
            assert!(
                !out.path().join("ib_write_bw.rc").exists(),
                "ib_write_bw on the restored rxe0/rxe1 gave no result:\n{perf}"
            );
            eprintln!("ib_write_bw not installed: no reference")
        }
    }
}
