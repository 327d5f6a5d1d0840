//! Acceptance (needs root, libdpdk and the `dpdk` feature): `daqtune selftest dpdk --veth`
//! through the launcher moves packets with no integrity error, gives back the hugepages it
//! reserved, and leaves none of its runtime files, hugepage map files or interfaces behind.
//! These are correctness checks: how many packets a loaded machine moves, and how many a
//! starved receiver drops, are measured by bench/dpdk_vs_testpmd.sh, not asserted here.
//!
//! What is compared is what this run could leave (found by its DPDK file prefix), never the
//! machine's totals: other DPDK runs (other test runs on a shared machine, qualify's level 2)
//! reserve pages and create runtime directories at the same time.
#![cfg(feature = "dpdk")]

use daqtune_selftest::dpdk_launcher::{run_dpdk, DpdkRequest};
use daqtune_selftest::Status;
use std::path::PathBuf;
use std::time::Duration;

/// One run at a time in this process (LOCK) and across the processes of this tree's tests that
/// change the 2 MiB pool (HUGEPAGE_LOCK: tune's apply_live and qualify level 2 take it too):
/// the engine gives back a reservation by writing the count it found, so two reservations
/// interleaved could leave one's pages behind.
static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
const HUGEPAGE_LOCK: &str = "/run/lock/daqtune-tests-hugepages.lock";

/// The run's DPDK file prefix (`daqtune-<pid>-<nonce>`) from the EAL arguments it reports.
fn file_prefix(dpdk: &serde_json::Value) -> String {
    dpdk["eal_args"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|a| a.as_str()?.strip_prefix("--file-prefix="))
        .expect("the run reports its --file-prefix")
        .to_string()
}

/// Everything named after `prefix` in DPDK's runtime directory and the hugetlbfs mounts, and
/// the engine's veth ends in this process's namespace: all of it must be gone after a run.
fn leftovers(prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut scan = |dir: &std::path::Path| {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(prefix) {
                out.push(dir.join(n).display().to_string());
            }
        }
    };
    scan(std::path::Path::new(daqtune_dpdk::hugepages::DPDK_RUN_DIR));
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    for m in daqtune_dpdk::hugepages::hugetlbfs_mounts(&mounts) {
        scan(&m);
    }
    // /proc/net/dev lists the interfaces of this process's namespace (sysfs may be mounted
    // for another one).
    let veth = [daqtune_dpdk::spec::VETH_TX, daqtune_dpdk::spec::VETH_RX];
    for l in std::fs::read_to_string("/proc/net/dev")
        .unwrap_or_default()
        .lines()
        .skip(2)
    {
        if let Some(n) = l.split(':').next().map(str::trim) {
            if veth.contains(&n) {
                out.push(format!("interface {n}"));
            }
        }
    }
    out
}

/// Hugepages are not owned until mapped: another DPDK program on the machine (another test
/// run's qualify level 2, say, which this process cannot lock out when it runs older code) can
/// take the free pages between the engine's plan and its allocation. Such a run is repeated
/// (each attempt a whole, fully checked run); any other error is the test's failure.
const ATTEMPTS: usize = 5;

fn pages_taken_by_another_program(notes: &[String]) -> bool {
    notes.iter().any(|n| n.contains("Cannot allocate memory"))
}

/// A reservation the run made was given back (the engine reads the pool back after writing
/// the count it found).
fn assert_hugepages_released(dpdk: &serde_json::Value) {
    let h = dpdk["hugepages"].as_str().unwrap_or_default();
    if h.starts_with("reserved") {
        assert!(
            h.contains("released: pool"),
            "reservation not given back: {h}"
        );
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
    if !daqtune_testkit::require_root_or_skip("hugepages, network namespace") {
        return;
    }
    let _host = daqtune_probe::fsutil::lock_exclusive(std::path::Path::new(HUGEPAGE_LOCK))
        .expect("hugepage test lock");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_daqtune-dpdk"));
    // Loss is a figure here, not a verdict: a receiver starved of CPU by other builds drops
    // frames at the veth; what crossed is verified either way.
    let req = DpdkRequest {
        max_loss_pct: Some(100.0),
        ..DpdkRequest::default()
    };
    let mut run = run_dpdk(&req, Some(exe.clone()));
    for _ in 1..ATTEMPTS {
        if !(run.result.status == Status::Error
            && pages_taken_by_another_program(&run.result.notes))
        {
            break;
        }
        eprintln!("hugepages taken meanwhile, again: {:?}", run.result.notes);
        run = run_dpdk(&req, Some(exe.clone()));
    }
    let r = &run.result;
    eprintln!(
        "sent {} received {} lost {} integrity {} pps {:.0} status {:?} notes {:?}",
        r.sent, r.packets, r.lost, r.integrity_errors, r.packets_per_s, r.status, r.notes
    );
    let details = run.details.clone().unwrap_or_default();
    if !details.is_null() {
        // The process is gone: its namespace, veth pair and hugepage mappings with it.
        // Checked first, so a failed run still proves the clean-up.
        let left = leftovers(&file_prefix(&details));
        assert!(left.is_empty(), "the run left {left:?}");
        assert_hugepages_released(&details);
    }
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
    assert!(!details.is_null(), "DPDK details");
    // The kernel's counters of the veth ends the af_packet vdevs sit on, read before and after
    // the run in the engine's namespace (issue 45): the sending end put frames on the wire,
    // the receiving end took them in.
    let ports: Vec<(&str, &str)> = r
        .port_counters
        .iter()
        .map(|p| (p.port.as_str(), p.role.as_str()))
        .collect();
    assert_eq!(
        ports,
        [
            (daqtune_dpdk::spec::VETH_TX, "tx"),
            (daqtune_dpdk::spec::VETH_RX, "rx")
        ],
        "{:?}",
        r.port_counters
    );
    let rose = |i: usize, name: &str| {
        r.port_counters[i]
            .deltas
            .iter()
            .find(|d| {
                d.name == name && d.source == daqtune_probe::net::counters::Source::Statistics
            })
            .map_or(0, |d| d.delta)
    };
    assert!(
        rose(0, "tx_packets") >= r.packets,
        "{} tx_packets rose by {}, {} frames arrived: {:?}",
        daqtune_dpdk::spec::VETH_TX,
        rose(0, "tx_packets"),
        r.packets,
        r.port_counters[0]
    );
    assert!(
        rose(1, "rx_packets") >= r.packets,
        "{:?}",
        r.port_counters[1]
    );
    assert!(r.port_counters.iter().all(|p| p.interval_s > 0.0));
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
    if !daqtune_testkit::require_root_or_skip("hugepages, network namespace") {
        return;
    }
    let _host = daqtune_probe::fsutil::lock_exclusive(std::path::Path::new(HUGEPAGE_LOCK))
        .expect("hugepage test lock");
    let req = DpdkRequest {
        duration: Duration::from_secs(30),
        ..DpdkRequest::default()
    };
    let mut attempt = 0;
    let child = 'started: loop {
        attempt += 1;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_daqtune-dpdk"))
            .args(req.args())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start daqtune-dpdk");
        // Mid-run = traffic is crossing the engine's veth pair (its receiving end counts
        // frames), however long EAL start-up and the hugepages take on a loaded machine.
        loop {
            if let Some(st) = child.try_wait().expect("wait") {
                let out = child.wait_with_output().expect("output");
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                let notes: Vec<String> = serde_json::from_str::<serde_json::Value>(text.trim())
                    .ok()
                    .and_then(|v| serde_json::from_value(v["result"]["notes"].clone()).ok())
                    .unwrap_or_default();
                if attempt < ATTEMPTS && pages_taken_by_another_program(&notes) {
                    eprintln!("hugepages taken meanwhile, again: {notes:?}");
                    continue 'started;
                }
                panic!("daqtune-dpdk ended before its traffic started: {st:?} {text}");
            }
            if rx_packets(child.id(), daqtune_dpdk::spec::VETH_RX).is_some_and(|n| n >= 1000) {
                break 'started child;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
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
    let left = leftovers(&file_prefix(&v["dpdk"]));
    assert!(left.is_empty(), "the interrupted run left {left:?}");
    assert_hugepages_released(&v["dpdk"]);
}

/// `--find-max` over the af_packet vdevs through the launcher: an unpaced probe, a search, a
/// confirmation; every trial in the result with its figures; the host left as it was.
#[test]
fn find_max_converges_over_af_packet() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !daqtune_testkit::require_root_or_skip("hugepages, network namespace") {
        return;
    }
    let _host = daqtune_probe::fsutil::lock_exclusive(std::path::Path::new(HUGEPAGE_LOCK))
        .expect("hugepage test lock");
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_daqtune-dpdk"));
    let req = DpdkRequest {
        find_max: Some(daqtune_selftest::dpdk_launcher::FindMaxRequest {
            loss_pct: 0.0,
            precision_pct: 5.0,
            trial_floor: Duration::from_millis(500),
            max_trials: daqtune_selftest::findmax::MAX_TRIALS,
        }),
        ..DpdkRequest::default()
    };
    let mut run = run_dpdk(&req, Some(exe.clone()));
    for _ in 1..ATTEMPTS {
        if !(run.result.status == Status::Error
            && pages_taken_by_another_program(&run.result.notes))
        {
            break;
        }
        eprintln!("hugepages taken meanwhile, again: {:?}", run.result.notes);
        run = run_dpdk(&req, Some(exe.clone()));
    }
    let details = run.details.clone().unwrap_or_default();
    assert!(!details.is_null(), "DPDK details: {:?}", run.result.notes);
    let left = leftovers(&file_prefix(&details));
    assert!(left.is_empty(), "the search left {left:?}");
    assert_hugepages_released(&details);
    let r = &run.result;
    assert_ne!(r.status, Status::Skip, "skipped: {:?}", r.notes);
    assert_ne!(r.status, Status::Error, "error: {:?}", r.notes);
    assert_eq!(r.trials[0].phase, daqtune_selftest::findmax::Phase::Probe);
    assert_eq!(r.trials[0].asked_gbps, None);
    assert!(r.trials.len() >= 2, "{:?}", r.trials);
    for t in &r.trials {
        assert_eq!(t.integrity_errors, 0);
        assert!(t.sent > 0);
        assert_eq!(t.threads.len(), 2);
        assert!(!t.cpu_per_core.is_empty());
    }
    let s = r.search.as_ref().expect("search summary");
    assert!(s.buffer_bytes.is_some(), "the ring size sizes the trials");
    let limit = s.limit.as_ref().expect("a limit");
    assert!(limit.source.contains("no link speed known"), "{limit:?}");
    let confirms: Vec<_> = r
        .trials
        .iter()
        .filter(|t| t.phase == daqtune_selftest::findmax::Phase::Confirm)
        .collect();
    assert!(
        !confirms.is_empty(),
        "converged bounds lead to a confirmation"
    );
    match r.max_loss_free_gbps {
        Some(found) => {
            let last = r.trials.last().expect("trial");
            assert!(last.passed);
            assert_eq!(last.achieved_gbps, found);
            assert_eq!((r.lost, r.integrity_errors), (0, 0));
            assert_eq!(r.status, Status::Pass, "{:?}", r.notes);
        }
        None => {
            // Each confirmation round ends on a lossy run (earlier runs of a round may pass).
            assert!(confirms.iter().any(|t| !t.passed));
            assert_eq!(r.status, Status::Fail);
        }
    }
}
