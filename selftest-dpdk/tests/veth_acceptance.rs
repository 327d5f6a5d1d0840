//! Acceptance (needs root, libdpdk and the `dpdk` feature): `daqtune selftest dpdk --veth`
//! through the launcher moves packets with no integrity error, and leaves hugepages, interfaces,
//! DPDK's runtime directory and hugetlbfs files as they were. These are correctness checks:
//! how many packets a loaded machine moves, and how many a starved receiver drops, are
//! measured by bench/dpdk_vs_testpmd.sh, not asserted here.
#![cfg(feature = "dpdk")]

use daqtune_selftest::dpdk_launcher::{run_dpdk, DpdkRequest};
use daqtune_selftest::Status;
use std::path::PathBuf;
use std::time::Duration;

/// The runs compare the host's hugepage pool before and after: one at a time in this process
/// (LOCK) and across processes (HUGEPAGE_LOCK, taken by every test that changes the pool, e.g.
/// tune/tests/apply_live.rs; two test runs on one machine otherwise see each other's pages).
static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
const HUGEPAGE_LOCK: &str = "/run/lock/daqtune-tests-hugepages.lock";

/// What a run may leave behind: daqtune's DPDK file prefixes are `daqtune-<pid>-<ns>`.
const OURS: &str = "daqtune-";

#[derive(Debug, PartialEq)]
struct HostState {
    nr_hugepages: String,
    free_hugepages: String,
    veth_ends: Vec<String>,
    dpdk_run_dir: Option<Vec<String>>,
    hugetlbfs_files: Vec<String>,
}

fn list(dir: &str) -> Option<Vec<String>> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(OURS))
        .collect();
    v.sort();
    Some(v)
}

fn state() -> HostState {
    let hp = "/sys/kernel/mm/hugepages/hugepages-2048kB";
    let rd = |f: &str| std::fs::read_to_string(format!("{hp}/{f}")).unwrap_or_default();
    // /proc/net/dev lists the interfaces of this process's namespace (sysfs may be mounted
    // for another one); only the engine's veth names matter (others come and go with other
    // processes on a shared machine).
    let veth = [daqtune_dpdk::spec::VETH_TX, daqtune_dpdk::spec::VETH_RX];
    let mut veth_ends: Vec<String> = std::fs::read_to_string("/proc/net/dev")
        .unwrap_or_default()
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next().map(|n| n.trim().to_string()))
        .filter(|n| veth.contains(&n.as_str()))
        .collect();
    veth_ends.sort();
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut hugetlbfs_files = Vec::new();
    for m in daqtune_dpdk::hugepages::hugetlbfs_mounts(&mounts) {
        if let Some(v) = list(&m.to_string_lossy()) {
            hugetlbfs_files.extend(v);
        }
    }
    HostState {
        nr_hugepages: rd("nr_hugepages"),
        free_hugepages: rd("free_hugepages"),
        veth_ends,
        dpdk_run_dir: list("/var/run/dpdk"),
        hugetlbfs_files,
    }
}

/// Received packets on `iface` in the network namespace of any thread of `pid`.
fn rx_packets(pid: u32, iface: &str) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    tasks.flatten().find_map(|t| {
        let text = std::fs::read_to_string(t.path().join("net/dev")).ok()?;
        text.lines().find_map(|l| {
            let (name, rest) = l.split_once(':')?;
            (name.trim() == iface).then(|| rest.split_whitespace().nth(1)?.parse().ok())?
        })
    })
}

#[test]
fn veth_run_moves_packets_intact_and_leaves_the_host_as_it_was() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !daqtune_selftest::sys::is_root() {
        eprintln!("skipped: needs root (hugepages, network namespace)");
        return;
    }
    let _host = daqtune_probe::fsutil::lock_exclusive(std::path::Path::new(HUGEPAGE_LOCK))
        .expect("hugepage test lock");
    let before = state();
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_daqtune-dpdk"));
    // Loss is a figure here, not a verdict: a receiver starved of CPU by other builds drops
    // frames at the veth; what crossed is verified either way.
    let req = DpdkRequest {
        max_loss_pct: Some(100.0),
        ..DpdkRequest::default()
    };
    let run = run_dpdk(&req, Some(exe));
    // The process is gone: its namespace, veth pair and hugepage mappings with it. Checked
    // first, so a failed run still proves the clean-up.
    let after = state();
    let r = &run.result;
    eprintln!(
        "sent {} received {} lost {} integrity {} pps {:.0} status {:?} notes {:?}",
        r.sent, r.packets, r.lost, r.integrity_errors, r.packets_per_s, r.status, r.notes
    );
    assert_eq!(after, before, "the run changed the host");
    assert_ne!(r.status, Status::Skip, "skipped: {:?}", r.notes);
    assert_ne!(r.status, Status::Error, "error: {:?}", r.notes);
    assert!(r.rate_gbps.is_some(), "the acceptance run is paced");
    assert!(r.packets > 0, "nothing arrived: {:?}", r.notes);
    assert!(
        r.packets <= r.sent,
        "received {} of {} sent",
        r.packets,
        r.sent
    );
    assert_eq!(r.integrity_errors, 0);
    assert!(
        matches!(r.status, Status::Pass | Status::Warn),
        "{:?}",
        r.notes
    );
    let details = run.details.expect("DPDK details");
    assert_eq!(details["ports"].as_array().map(Vec::len), Some(2));
    for p in details["ports"].as_array().into_iter().flatten() {
        for k in ["imissed", "ierrors", "rx_nombuf"] {
            assert!(p[k].is_u64(), "port counter {k} reported");
        }
    }
}

/// SIGINT in the middle of a run: the engine stops its ports, gives the hugepages back, still
/// prints its result (noting the interruption) and exits 128 + SIGINT, as the other engines do.
#[test]
fn sigint_mid_run_stops_cleanly_with_130() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !daqtune_selftest::sys::is_root() {
        eprintln!("skipped: needs root (hugepages, network namespace)");
        return;
    }
    let _host = daqtune_probe::fsutil::lock_exclusive(std::path::Path::new(HUGEPAGE_LOCK))
        .expect("hugepage test lock");
    let before = state();
    let req = DpdkRequest {
        duration: Duration::from_secs(30),
        ..DpdkRequest::default()
    };
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_daqtune-dpdk"))
        .args(req.args())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start daqtune-dpdk");
    // Mid-run = traffic is crossing the engine's veth pair (its receiving end counts frames),
    // however long EAL start-up and the hugepage reservation take on a loaded machine.
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            panic!("daqtune-dpdk ended before its traffic started: {st:?}");
        }
        if rx_packets(child.id(), daqtune_dpdk::spec::VETH_RX).is_some_and(|n| n >= 1000) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    daqtune_selftest::sys::signal_child(&child, libc::SIGINT).expect("SIGINT");
    let out = child.wait_with_output().expect("wait");
    // 130, not 0: the run stopped on the signal, not at the end of its 30 s.
    assert_eq!(out.status.code(), Some(128 + libc::SIGINT));
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.trim()).expect("result JSON");
    assert!(
        v["result"]["notes"].to_string().contains("interrupted"),
        "{text}"
    );
    assert_eq!(state(), before, "the interrupted run changed the host");
}
