//! For `daqtune selftest rdma`: the verbs engine lives in the `daqtune-rdma` executable (it links
//! libibverbs; the main binary must start on hosts without it), so the main binary finds and runs
//! that helper, and reports a skip with the reason when it is not installed.
//!
//! A test run's report is not relayed as the helper wrote it: the helper answers in JSON on a
//! pipe, and each bandwidth result is assessed here against the port's line rate and the
//! profile's reference (`crate::reference::assess`, as the socket and DPDK engines
//! are) before the report is printed in the format asked for and written to its files.

use crate::engine::Mode;
use crate::reference::{self, Link, Reference};
use crate::report::{EngineResult, Render, Report};
use crate::sys::hostname;
use crate::topology::{self, RdmaPortsRequest, Topology};
use daqtune_probe::signals;
use daqtune_report::rdma::RdmaReport;
use serde::Deserialize;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const HELPER: &str = "daqtune-rdma";

/// `$DAQTUNE_RDMA_BIN`, else `daqtune-rdma` next to the running executable, else on `PATH`
/// (probe's one helper lookup).
pub fn find_helper() -> Option<PathBuf> {
    daqtune_probe::helpers::find(HELPER, Some("DAQTUNE_RDMA_BIN"))
}

/// The report printed when the helper is missing: every requested mode skipped, with why.
pub fn skip_report(hostname: &str, why: &str, modes: &[Mode]) -> Report {
    let mut r = Report::new(hostname, "rdma", "-");
    for m in modes {
        r.push(EngineResult::skipped("rdma", *m, "ports", why));
    }
    r
}

/// Runs the helper with `args` (stdio inherited) and returns its exit status; when there is no
/// helper, prints a skip report (JSON when `json`) and returns 0, as any other skip.
pub fn run_helper(args: &[OsString], json: bool) -> i32 {
    let Some(bin) = find_helper() else {
        let why = format!(
            "{HELPER} not found (next to this binary, on PATH, or $DAQTUNE_RDMA_BIN): build it \
             with `cargo build -p daqtune-rdma --features rdma` (needs libibverbs-dev)"
        );
        let r = skip_report(&hostname(), &why, &[Mode::Write, Mode::Send]);
        crate::report::emit(&if json {
            r.to_json() + "\n"
        } else {
            r.to_text()
        });
        return 0;
    };
    run_at_or_skip(&bin, args, json)
}

/// How a test run's report is judged and where it goes: the helper always answers in JSON on a
/// pipe (it is given no `--junit`/`--json-out` of its own), and this assesses and writes it.
#[derive(Debug, Clone)]
pub struct Relay {
    /// Print JSON (`daqtune.selftest/v1` with the helper's `rdma` section), else text.
    pub json: bool,
    pub json_out: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    /// The helper's `--test` list in its order: it makes one result per entry, and a ping-pong
    /// is a latency run, never held to a bandwidth reference.
    pub tests: Vec<String>,
    /// The link the traffic crosses (its speed and MTU give the line rate).
    pub link: Link,
    /// The profile's references (`selftest.reference`) and floor.
    pub references: Vec<Reference>,
    pub floor: f64,
}

/// Runs the helper for a test run (`args` without a format: `--format json` is added), assesses
/// its report and relays it; returns the exit status: 0 pass, 1 a result failed (below its
/// floor included), 2 could not run, 128+N interrupted by signal N. Without a helper, a skip
/// report as [`run_helper`] gives.
pub fn run_assessed(args: &[OsString], relay: &Relay) -> i32 {
    let Some(bin) = find_helper() else {
        return run_helper(args, relay.json);
    };
    if let Err(e) = signals::watch_termination() {
        eprintln!("daqtune selftest rdma: signal handlers: {e}");
    }
    let mut cmd = Command::new(&bin);
    cmd.args(args).args(["--format", "json"]);
    let (code, stdout) = run_captured(&mut cmd);
    if code == LOADER_FAILED {
        return loader_skip(&bin, relay.json);
    }
    relay_report(code, &stdout, relay)
}

/// Spawns `cmd` with its standard output on a pipe, waits for it as [`wait_interruptible`]
/// does, and returns its status with what it printed (2 and nothing when it cannot start).
fn run_captured(cmd: &mut Command) -> (i32, Vec<u8>) {
    let mut child = match cmd.stdin(Stdio::null()).stdout(Stdio::piped()).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("daqtune selftest rdma: cannot run the helper: {e}");
            return (2, Vec::new());
        }
    };
    // Read on a thread: a report larger than the pipe would otherwise block the helper.
    let reader = child.stdout.take().map(|mut s| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = s.read_to_end(&mut v);
            v
        })
    });
    let code = wait_interruptible(&mut child);
    let out = reader.and_then(|r| r.join().ok()).unwrap_or_default();
    (code, out)
}

/// Why a helper's output could not be relayed as an assessed report.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error("the helper's report is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("the helper's report is not daqtune.selftest/v1: {0}")]
    NotAReport(serde_json::Error),
    #[error("the assessed report cannot be written as JSON: {0}")]
    Encode(serde_json::Error),
}

/// The helper's JSON report with every bandwidth result assessed: the typed report (summary
/// recounted) and its JSON with the helper's `rdma` section kept, in the helper's order.
pub fn assess_report(stdout: &[u8], relay: &Relay) -> Result<(Report, String), RelayError> {
    let full: serde_json::Value = serde_json::from_slice(stdout).map_err(RelayError::NotJson)?;
    let given =
        RdmaReport::<serde_json::Value>::deserialize(full).map_err(RelayError::NotAReport)?;
    let mut report = Report::new(
        &given.report.hostname,
        &given.report.topology,
        &given.report.cpu_plan,
    );
    let counted = given.report.results.len() == relay.tests.len();
    for (i, mut r) in given.report.results.into_iter().enumerate() {
        let latency_run = if counted {
            is_pingpong(&relay.tests[i])
        } else {
            r.notes.iter().any(|n| n.starts_with("SEND ping-pong"))
        };
        if !latency_run {
            reference::assess(&mut r, &relay.link, &relay.references, relay.floor);
        }
        report.push(r);
    }
    // The helper's layout again: the assessed record plus its `rdma` section as it came.
    let relayed = RdmaReport {
        report,
        rdma: given.rdma,
    };
    let json = serde_json::to_string_pretty(&relayed).map_err(RelayError::Encode)?;
    Ok((relayed.report, json + "\n"))
}

fn is_pingpong(test: &str) -> bool {
    matches!(
        test.trim().to_ascii_lowercase().as_str(),
        "pingpong" | "ping-pong" | "lat" | "latency"
    )
}

/// Assesses and prints the helper's report, writes the files asked for, and gives the exit
/// status: the helper's when it could not run or was interrupted, else the assessed report's.
pub fn relay_report(code: i32, stdout: &[u8], relay: &Relay) -> i32 {
    if stdout.iter().all(u8::is_ascii_whitespace) {
        // Bad usage or a crash: the helper said why on stderr.
        return if code == 0 { 2 } else { code };
    }
    let (report, json) = match assess_report(stdout, relay) {
        Ok(v) => v,
        Err(e) => {
            // Never lose what the helper said: relay it as it came, and fail the run.
            crate::report::emit(&String::from_utf8_lossy(stdout));
            eprintln!("daqtune selftest rdma: {e}");
            return if code == 0 { 2 } else { code };
        }
    };
    crate::report::emit(&if relay.json {
        json.clone()
    } else {
        report.to_text()
    });
    let mut files_ok = true;
    for (path, text) in [(&relay.json_out, json), (&relay.junit, report.to_junit())] {
        let Some(p) = path else { continue };
        // The workspace's one output writer: atomic, a symlink written through (docs/cli.md).
        if let Err(e) =
            daqtune_probe::fsutil::write_output(p, 0o644, &mut |f| f.write_all(text.as_bytes()))
        {
            eprintln!("daqtune selftest rdma: write {}: {e}", p.display());
            files_ok = false;
        }
    }
    match code {
        0 | 1 if !files_ok => 2,
        0 | 1 => i32::from(!report.passed()),
        other => other,
    }
}

/// Where a namespaced run's RDMA devices come from.
pub enum NamespacedTopology {
    /// Two cabled ports moved into namespaces with their devices (`--tx-if A --rx-if B`).
    Ports(RdmaPortsRequest),
    /// A veth pair between two namespaces with soft-RoCE on each end (`--veth`), MTU.
    Veth(u32),
}

/// A namespaced run as `daqtune selftest rdma --tx-if A --rx-if B` or `--veth` asks for it.
pub struct PortsRun {
    pub topology: NamespacedTopology,
    /// Arguments for the sending helper besides devices and addresses (tests, sizes, report
    /// options), as [`run_helper`] takes them.
    pub client_args: Vec<OsString>,
    /// Arguments for the receiving helper besides device and address (its memory kind).
    pub receiver_args: Vec<OsString>,
    /// TCP port of the side channel between the two namespaces.
    pub control_port: u16,
    /// How the sender's report is assessed and relayed.
    pub relay: Relay,
}

/// How long each helper waits for its port to come up with a GID after the move.
const READY_SECS: &str = "20";

/// Moves the two ports (and their RDMA devices) into private namespaces, runs the helper as
/// receiver in one and as sender in the other (their side channel crosses the cable too),
/// restores the host, and returns the sender's exit status: 0 pass, 1 fail, 2 could not run,
/// 128+N interrupted by signal N (after restoring).
pub fn run_ports(run: &PortsRun) -> i32 {
    let Some(bin) = find_helper() else {
        return run_helper(&run.client_args, run.relay.json);
    };
    if !crate::sys::is_root() {
        eprintln!("daqtune selftest rdma: making network namespaces needs root");
        return 2;
    }
    if let Err(e) = signals::watch_termination() {
        eprintln!("daqtune selftest rdma: signal handlers: {e}");
    }
    for n in topology::recover_leftovers() {
        eprintln!("daqtune selftest rdma: {n}");
    }
    let made = match &run.topology {
        NamespacedTopology::Ports(req) => Topology::rdma_ports(req),
        NamespacedTopology::Veth(mtu) => Topology::rdma_veth(*mtu),
    };
    let mut topo = match made {
        Ok(t) => t,
        Err(crate::Error::Unsupported(why)) => {
            let r = skip_report(&hostname(), &why, &[Mode::Write, Mode::Send]);
            crate::report::emit(&if run.relay.json {
                r.to_json() + "\n"
            } else {
                r.to_text()
            });
            return 0;
        }
        Err(e) => {
            eprintln!("daqtune selftest rdma: {e}");
            return 2;
        }
    };
    let code = run_in_namespaces(&bin, run, &topo);
    for w in topo.teardown() {
        eprintln!("daqtune selftest rdma: restore: {w}");
    }
    match signals::pending() {
        Some(sig) => signals::exit_code(sig),
        None => code,
    }
}

fn run_in_namespaces(bin: &Path, run: &PortsRun, topo: &Topology) -> i32 {
    let (Some(txn), Some(rxn), Some(placement)) = (&topo.tx_ns, &topo.rx_ns, &topo.rdma) else {
        eprintln!("daqtune selftest rdma: the topology has no namespaces");
        return 2;
    };
    for n in &placement.notes {
        eprintln!("daqtune selftest rdma: {n}");
    }
    let listen = format!("{}:{}", topology::RX_ADDR, run.control_port);
    let mut server = Command::new(bin);
    server
        .args(["--listen", &listen, "--dev", &placement.rx_dev])
        .args(["--ipv4", &topology::RX_ADDR.to_string()])
        .args(["--wait-ready", READY_SECS])
        .args(&run.receiver_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut client = Command::new(bin);
    client
        .args(["--dev", &placement.tx_dev, "--peer", &listen])
        .args(["--ipv4", &topology::TX_ADDR.to_string()])
        .args(["--wait-ready", READY_SECS, "--describe", &topo.description])
        .args(&run.client_args)
        .args(["--format", "json"]);
    if let Err(e) = rxn
        .command_in_with_sysfs(&mut server)
        .and_then(|_| txn.command_in_with_sysfs(&mut client))
    {
        eprintln!("daqtune selftest rdma: {e}");
        return 2;
    }
    let mut server = match server.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("daqtune selftest rdma: start the receiver: {e}");
            return 2;
        }
    };
    let server_log = collect_output(&mut server);
    let code = match wait_listening(&mut server, &server_log) {
        Ok(()) => {
            let (code, stdout) = run_captured(&mut client);
            relay_report(code, &stdout, &run.relay)
        }
        Err(why) => {
            eprintln!("daqtune selftest rdma: the receiver did not start: {why}");
            2
        }
    };
    stop(&mut server);
    if code != 0 && placement.soft_roce_in_namespaces {
        eprintln!(
            "daqtune selftest rdma: note: these are soft-RoCE devices with their netdevs in \
             private namespaces. rdma_rxe without network-namespace support (Linux 6.1, for \
             one) sends and receives only in the initial namespace, and its QPs fail this way. \
             On such kernels run soft-RoCE with --dev/--peer-dev on a veth pair in one \
             namespace with policy routing (tests/vm/rdma-guest.sh shows how)."
        );
    }
    if code != 0 {
        let log = server_log.lock().map(|l| l.clone()).unwrap_or_default();
        if !log.trim().is_empty() {
            eprintln!("daqtune selftest rdma: receiver output:\n{log}");
        }
    }
    code
}

/// Gathers a child's stdout and stderr lines into one shared log.
fn collect_output(child: &mut Child) -> Arc<Mutex<String>> {
    let log = Arc::new(Mutex::new(String::new()));
    let readers: Vec<Box<dyn std::io::Read + Send>> = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    .collect();
    for r in readers {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines().map_while(|l| l.ok()) {
                if let Ok(mut l) = log.lock() {
                    l.push_str(&line);
                    l.push('\n');
                }
            }
        });
    }
    log
}

/// Waits until the receiver says it listens (it first waits for its port to be ready).
fn wait_listening(server: &mut Child, log: &Arc<Mutex<String>>) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if log.lock().is_ok_and(|l| l.contains("listening on")) {
            return Ok(());
        }
        if let Ok(Some(st)) = server.try_wait() {
            return Err(format!(
                "it exited ({st}):\n{}",
                log.lock().map(|l| l.clone()).unwrap_or_default()
            ));
        }
        if signals::pending().is_some() {
            return Err("interrupted".into());
        }
        if Instant::now() > deadline {
            return Err("no \"listening\" line within 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for the sender; on SIGINT/SIGTERM passes the signal on and keeps waiting, so the
/// namespaces are only torn down once nothing uses the devices.
fn wait_interruptible(child: &mut Child) -> i32 {
    let mut forwarded = false;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return st.code().unwrap_or(2),
            Ok(None) => {}
            Err(e) => {
                eprintln!("daqtune selftest rdma: wait for the sender: {e}");
                return 2;
            }
        }
        if let (Some(sig), false) = (signals::pending(), forwarded) {
            let _ = crate::sys::signal_child(child, sig);
            forwarded = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stop(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        let _ = crate::sys::signal_child(child, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
    }
    let _ = child.wait();
}

/// Exit status of a process the dynamic loader could not start (a shared library missing).
const LOADER_FAILED: i32 = 127;

/// Runs the helper; when the loader cannot start it (libibverbs.so.1 not installed: the helper
/// links it, the main binary does not), prints a skip report that says so instead of failing.
fn run_at_or_skip(bin: &Path, args: &[OsString], json: bool) -> i32 {
    // A signal for us is one for the helper (it ends its run and reports); we wait for it.
    if let Err(e) = signals::watch_termination() {
        eprintln!("daqtune selftest rdma: signal handlers: {e}");
    }
    let code = match Command::new(bin).args(args).spawn() {
        Ok(mut child) => wait_interruptible(&mut child),
        Err(e) => {
            eprintln!("daqtune selftest rdma: cannot run {}: {e}", bin.display());
            return 2;
        }
    };
    if code != LOADER_FAILED {
        return code;
    }
    loader_skip(bin, json)
}

/// The skip report for a helper the dynamic loader could not start.
fn loader_skip(bin: &Path, json: bool) -> i32 {
    let why = format!(
        "{} could not start (exit 127: a shared library it needs is missing, usually \
         libibverbs.so.1: apt-get install libibverbs1 ibverbs-providers)",
        bin.display()
    );
    let r = skip_report(&hostname(), &why, &[Mode::Write, Mode::Send]);
    crate::report::emit(&if json {
        r.to_json() + "\n"
    } else {
        r.to_text()
    });
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Status;

    #[test]
    fn missing_helper_is_a_skip_with_reason() {
        let r = skip_report("h", "daqtune-rdma not found", &[Mode::Write, Mode::Send]);
        assert_eq!(r.summary.skip, 2);
        assert!(r.passed());
        assert!(r.results.iter().all(|x| x.status == Status::Skip));
        assert!(r.to_text().contains("daqtune-rdma not found"));
    }

    #[test]
    fn helper_exit_status_is_passed_through() {
        let d = tempfile::tempdir().expect("tmp");
        let f = d.path().join("fake");
        std::fs::write(&f, "#!/bin/sh\nexit 3\n").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(run_at_or_skip(&f, &[], false), 3);
        assert_eq!(run_at_or_skip(&d.path().join("missing"), &[], false), 2);
        // A helper the loader cannot start is a skip (exit 0), not a failure.
        let g = d.path().join("noload");
        std::fs::write(&g, "#!/bin/sh\nexit 127\n").expect("write");
        std::fs::set_permissions(&g, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(run_at_or_skip(&g, &[], true), 0);
    }

    const RECORDED: &str = include_str!("../../../selftest-rdma/tests/fixtures/helper-report.json");

    fn reference(mode: &str, gbps: f64) -> Reference {
        Reference {
            engine: "rdma".into(),
            mode: mode.into(),
            message_size: Some(8_388_608),
            streams: None,
            gbps: Some(gbps),
            loss_pct: None,
            floor: None,
            source: format!("test reference rdma.{mode}"),
        }
    }

    /// A 200G port at MTU 9000 (RoCE payload 196 Gb/s) held to 100 Gb/s WRITE and SEND.
    fn relay(link: Link) -> Relay {
        Relay {
            json: true,
            json_out: None,
            junit: None,
            tests: vec!["write".into(), "send".into(), "pingpong".into()],
            link,
            references: vec![reference("write", 100.0), reference("send", 100.0)],
            floor: 0.9,
        }
    }

    fn port_200g() -> Link {
        Link {
            speed_mbps: Some(200_000),
            source: "sysfs speed of enp1s0f0np0".into(),
            mtu: Some(9000),
            pcie: None,
        }
    }

    #[test]
    fn a_result_below_its_floor_fails_with_the_shortfall() {
        let (report, json) = assess_report(RECORDED.as_bytes(), &relay(port_200g())).expect("ok");
        let full: serde_json::Value = serde_json::from_str(&json).expect("json");
        let write = &report.results[0];
        assert_eq!(write.status, Status::Fail);
        let a = write.reference.as_ref().expect("assessed");
        assert_eq!(a.verdict, "below");
        // Floor 0.9 x 100 = 90 Gb/s; the recorded WRITE made 41.3.
        let short = a.shortfall_gbps.expect("shortfall");
        assert!((short - 48.7).abs() < 1e-9, "{short}");
        assert!(
            a.why
                .contains("below the floor of 90 % = 90.00 Gb/s by 48.70 Gb/s"),
            "{}",
            a.why
        );
        assert!(a.of_line_pct.is_some_and(|p| p > 20.0 && p < 22.0), "{a:?}");
        assert!(!report.passed());
        assert_eq!(report.summary.fail, 1);
        // The relayed JSON says the same and keeps the helper's own section.
        assert_eq!(full["summary"]["fail"], 1);
        assert_eq!(full["results"][0]["reference"]["verdict"], "below");
        assert_eq!(full["rdma"][0]["transfer"], "write");
        assert!(
            json.starts_with("{\n  \"schema\": \"daqtune.selftest/v1\""),
            "{json}"
        );
    }

    #[test]
    fn a_result_above_its_floor_passes() {
        let (report, _) = assess_report(RECORDED.as_bytes(), &relay(port_200g())).expect("ok");
        let send = &report.results[1];
        assert_eq!(send.status, Status::Pass);
        let a = send.reference.as_ref().expect("assessed");
        assert_eq!(a.verdict, "met");
        assert_eq!(a.reference_gbps, Some(100.0));
        assert!(a.of_reference_pct.is_some_and(|p| (p - 99.6).abs() < 1e-9));
    }

    #[test]
    fn no_link_speed_is_no_reference_and_no_silent_pass() {
        let link = Link::none("mlx9 has no PCI network device: no link speed");
        let (report, _) = assess_report(RECORDED.as_bytes(), &relay(link)).expect("ok");
        for r in &report.results[..2] {
            let a = r.reference.as_ref().expect("assessed");
            assert_eq!(a.verdict, "none");
            assert!(a.why.starts_with("no reference"), "{}", a.why);
            assert!(
                r.notes.iter().any(|n| n.contains("no link speed")),
                "{:?}",
                r.notes
            );
            // Its own checks passed; the missing reference is said, never a verdict.
            assert_eq!(r.status, Status::Pass);
        }
        assert!(report.passed());
    }

    #[test]
    fn a_ping_pong_is_not_held_to_a_bandwidth_reference() {
        for tests in [
            vec!["write".to_string(), "send".into(), "pingpong".into()],
            // A list that does not match the results: the helper's note tells.
            vec!["write".to_string()],
        ] {
            let r = Relay {
                tests,
                ..relay(port_200g())
            };
            let (report, _) = assess_report(RECORDED.as_bytes(), &r).expect("ok");
            assert_eq!(report.results[2].reference, None);
            assert_eq!(report.results[2].status, Status::Pass);
            assert!(report.results[1].reference.is_some());
        }
    }

    #[test]
    fn the_captured_report_is_relayed_assessed_in_its_files() {
        let d = tempfile::tempdir().expect("tmp");
        let fixture = d.path().join("report.json");
        std::fs::write(&fixture, RECORDED).expect("write");
        // A stand-in helper that prints the recorded report, as daqtune-rdma --format json does.
        let helper = d.path().join("helper");
        std::fs::write(
            &helper,
            format!("#!/bin/sh\ncat '{}'\nexit 0\n", fixture.display()),
        )
        .expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let (code, out) = run_captured(&mut Command::new(&helper));
        assert_eq!(code, 0);
        let r = Relay {
            json_out: Some(d.path().join("out.json")),
            junit: Some(d.path().join("junit.xml")),
            ..relay(port_200g())
        };
        // The helper passed its own checks; the assessment fails the slow WRITE.
        assert_eq!(relay_report(code, &out, &r), 1);
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(d.path().join("out.json")).expect("json out"),
        )
        .expect("json");
        assert_eq!(json["results"][0]["reference"]["verdict"], "below");
        let junit = std::fs::read_to_string(d.path().join("junit.xml")).expect("junit");
        assert!(junit.contains("below the floor"), "{junit}");
        // Could-not-run and interrupted statuses are the helper's, whatever the report says.
        assert_eq!(relay_report(130, &out, &r), 130);
        assert_eq!(relay_report(2, b"", &r), 2);
        // Output that is not a report is relayed as it came and fails the run.
        assert_eq!(relay_report(0, b"garbage", &r), 2);
        assert!(matches!(
            assess_report(b"garbage", &r),
            Err(RelayError::NotJson(_))
        ));
        assert!(matches!(
            assess_report(b"{\"results\": 3}", &r),
            Err(RelayError::NotAReport(_))
        ));
    }
}
