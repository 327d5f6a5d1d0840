//! For `daqtune selftest rdma`: the verbs engine lives in the `daqtune-rdma` executable (it links
//! libibverbs; the main binary must start on hosts without it), so the main binary finds and runs
//! that helper, and reports a skip with the reason when it is not installed.

use daqtune_selftest::engine::Mode;
use daqtune_selftest::report::{EngineResult, Report};
use daqtune_selftest::signals;
use daqtune_selftest::sys::hostname;
use daqtune_selftest::topology::{self, RdmaPortsRequest, Topology};
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const HELPER: &str = "daqtune-rdma";

/// `$DAQTUNE_RDMA_BIN`, else `daqtune-rdma` next to the running executable, else on `PATH`.
pub fn find_helper() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DAQTUNE_RDMA_BIN") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(HELPER)));
    if let Some(p) = beside.filter(|p| p.is_file()) {
        return Some(p);
    }
    let path = std::env::var_os("PATH")?;
    search_path(&path, HELPER)
}

/// The first directory of a PATH-style list that holds `name` as a file.
pub fn search_path(path: &std::ffi::OsStr, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
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
        daqtune_selftest::report::emit(&if json {
            r.to_json() + "\n"
        } else {
            r.to_text()
        });
        return 0;
    };
    run_at_or_skip(&bin, args, json)
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
    pub json: bool,
}

/// How long each helper waits for its port to come up with a GID after the move.
const READY_SECS: &str = "20";

/// Moves the two ports (and their RDMA devices) into private namespaces, runs the helper as
/// receiver in one and as sender in the other (their side channel crosses the cable too),
/// restores the host, and returns the sender's exit status: 0 pass, 1 fail, 2 could not run,
/// 128+N interrupted by signal N (after restoring).
pub fn run_ports(run: &PortsRun) -> i32 {
    let Some(bin) = find_helper() else {
        return run_helper(&run.client_args, run.json);
    };
    if !daqtune_selftest::sys::is_root() {
        eprintln!("daqtune selftest rdma: making network namespaces needs root");
        return 2;
    }
    if let Err(e) = signals::install() {
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
        Err(daqtune_selftest::Error::Unsupported(why)) => {
            let r = skip_report(&hostname(), &why, &[Mode::Write, Mode::Send]);
            daqtune_selftest::report::emit(&if run.json {
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
        .stdin(Stdio::null());
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
        Ok(()) => match client.spawn() {
            Ok(mut c) => wait_interruptible(&mut c),
            Err(e) => {
                eprintln!("daqtune selftest rdma: start the sender: {e}");
                2
            }
        },
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
            let _ = daqtune_selftest::sys::signal_child(child, sig);
            forwarded = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stop(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        let _ = daqtune_selftest::sys::signal_child(child, libc::SIGTERM);
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
    if let Err(e) = signals::install() {
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
    let why = format!(
        "{} could not start (exit 127: a shared library it needs is missing, usually \
         libibverbs.so.1: apt-get install libibverbs1 ibverbs-providers)",
        bin.display()
    );
    let r = skip_report(&hostname(), &why, &[Mode::Write, Mode::Send]);
    daqtune_selftest::report::emit(&if json {
        r.to_json() + "\n"
    } else {
        r.to_text()
    });
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_selftest::report::Status;

    #[test]
    fn path_search() {
        let d = tempfile::tempdir().expect("tmp");
        let f = d.path().join(HELPER);
        std::fs::write(&f, "#!/bin/sh\nexit 0\n").expect("write");
        let path = std::env::join_paths([Path::new("/nonexistent"), d.path()]).expect("join");
        assert_eq!(search_path(&path, HELPER), Some(f));
        assert_eq!(search_path(&path, "nope"), None);
        assert_eq!(search_path(std::ffi::OsStr::new(""), HELPER), None);
    }

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
}
