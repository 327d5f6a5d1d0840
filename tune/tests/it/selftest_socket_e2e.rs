//! End-to-end tests of the socket self-test through real interfaces (root needed: they make
//! network namespaces and veth pairs). They spawn the binary, as a user would, and check that
//! nothing is left behind on every exit path.
//!
//! The tests run one at a time (LOCK): a run's start-up sweep removes what dead runs left, and
//! the SIGKILL test must see its leftovers before a neighbour sweeps them.

use crate::selftest_bin as bin;
use daqtune_selftest::netlink::{Addr, Netlink, Route};
use daqtune_selftest::netns::{self, NetNs};
use std::net::IpAddr;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::Duration;

static LOCK: Mutex<()> = Mutex::new(());

/// A number no other call in this process gets, and that a dead process of the same pid
/// is unlikely to have used (the clock's nanoseconds).
fn unique() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{n}x{t:x}")
}

fn root() -> bool {
    daqtune_testkit::require_root_or_skip("network namespaces and veth pairs")
}

fn leftovers(pid: u32) -> Vec<String> {
    let mut v: Vec<String> = netns::list_named()
        .into_iter()
        .filter(|n| n.starts_with(&format!("daqtune-{pid}-")))
        .collect();
    if let Ok(rd) = std::fs::read_dir("/run/daqtune/selftest") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&format!("{pid}-")) {
                v.push(name);
            }
        }
    }
    v
}

/// Polls `event` until it holds (true) or the child has ended without it (false). No time
/// limit: the child's own --duration ends it, and a loaded machine may be slow to get there.
fn wait_for(child: &mut Child, mut event: impl FnMut() -> bool) -> bool {
    loop {
        if event() {
            return true;
        }
        if child.try_wait().expect("wait").is_some() {
            return event();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Both namespaces of the run exist.
fn wait_for_namespaces(child: &mut Child) -> bool {
    let pid = child.id();
    wait_for(child, || {
        netns::list_named()
            .iter()
            .filter(|n| n.starts_with(&format!("daqtune-{pid}-")))
            .count()
            == 2
    })
}

/// Bytes the receiving veth end of run `pid` has taken in (its counters, read in the run's
/// receive namespace).
fn veth_rx_bytes(pid: u32) -> Option<u64> {
    let name = netns::list_named()
        .into_iter()
        .find(|n| n.starts_with(&format!("daqtune-{pid}-")) && n.ends_with("-rx"))?;
    let ns = NetNs::open_named(&name).ok()?;
    let mut nl = daqtune_selftest::netlink::open_in(&ns).ok()?;
    let links = nl.links().ok()?;
    links
        .iter()
        .find(|l| l.name == daqtune_selftest::topology::VETH_RX)?
        .stats
        .map(|s| s.rx_bytes)
}

/// Traffic is crossing the run's veth pair: a megabyte of payload has reached the receiving
/// end (the TCP receiver reads to the end of the stream, so all of it is counted).
fn wait_for_traffic(child: &mut Child) -> bool {
    let pid = child.id();
    wait_for(child, || veth_rx_bytes(pid).is_some_and(|b| b >= 1 << 20))
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "json: {e}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn no_veth_here() {
    let mut nl = Netlink::open().expect("netlink");
    for l in nl.links().expect("links") {
        assert!(
            l.name != "dqt-tx" && l.name != "dqt-rx",
            "veth end {} left in this namespace",
            l.name
        );
    }
}

/// A UDP result that failed for loss alone (no integrity error, no other reason).
fn failed_by_loss_only(r: &serde_json::Value) -> bool {
    r["mode"] == "udp"
        && r["status"] == "fail"
        && r["integrity_errors"] == 0
        && r["notes"]
            .as_array()
            .expect("notes")
            .iter()
            .filter_map(|n| n.as_str())
            .map(|n| n.split_once("stream ").map_or(n, |(_, rest)| rest))
            .filter(|n| !n.contains("udp receive buffer forced"))
            .all(|n| n.starts_with("loss ") && n.contains("above the allowed"))
}

#[test]
fn veth_tcp_and_udp_pass_and_leave_nothing() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let child = bin()
        // UDP loss is a figure, not a verdict, here: a receiver starved of CPU by other
        // builds drops datagrams; what arrived is verified either way.
        .args([
            "socket",
            "--veth",
            "--duration",
            "3",
            "--format",
            "json",
            "--max-udp-loss",
            "100",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    let v = json(&out);
    assert_eq!(v["schema"], "daqtune.selftest/v1");
    let results = v["results"].as_array().expect("results");
    assert_eq!(results.len(), 2, "{v}");
    // UDP loss at the paced rate is the host's (a build on the receiving CPU for a few tens of
    // ms loses datagrams at load 10 on two cores): a UDP failure is accepted when loss is its
    // only reason, and then the exit code must say so. Integrity, counters and the restore
    // are checked either way.
    let udp_lost_only = failed_by_loss_only(&results[1]);
    for r in results {
        // warn = a paced sender starved of CPU fell short of its rate (loaded CI hosts); loss
        // and integrity decide pass/fail.
        let lost_only = r["mode"] == "udp" && udp_lost_only;
        assert!(
            r["status"] == "pass" || r["status"] == "warn" || lost_only,
            "{r}"
        );
        assert_eq!(r["integrity_errors"], 0);
        let p = &r["port_bytes"];
        assert!(
            p["rx_port_rx"].as_u64().expect("port counters") >= r["bytes"].as_u64().expect("bytes")
        );
        assert!(r["packets"].as_u64().expect("packets") > 0);
        assert!(r["gbps"].as_f64().expect("gbps") > 0.0);
        // Per-port counter deltas: the receiving veth end counted at least the frames that
        // carried the messages (its interface statistics, read in its namespace).
        let ports = r["port_counters"].as_array().expect("port_counters");
        assert_eq!(ports.len(), 2, "{r}");
        assert_eq!(ports[0]["role"], "tx");
        assert_eq!(ports[1]["role"], "rx");
        assert_eq!(ports[1]["port"], daqtune_selftest::topology::VETH_RX);
        let rx_packets = ports[1]["deltas"]
            .as_array()
            .expect("deltas")
            .iter()
            .find(|d| d["source"] == "statistics" && d["name"] == "rx_packets")
            .and_then(|d| d["delta"].as_u64())
            .expect("rx_packets delta");
        assert!(
            rx_packets >= r["packets"].as_u64().expect("packets") / 64,
            "{r}"
        );
    }
    assert_eq!(results[0]["mode"], "tcp");
    assert_eq!(results[0]["status"], "pass");
    assert_eq!(results[0]["lost"], 0);
    assert_eq!(results[1]["mode"], "udp");
    assert_eq!(
        out.status.code(),
        Some(if udp_lost_only { 1 } else { 0 }),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
    no_veth_here();
}

/// Issue 43: a veth pair has no link speed, so a default UDP run takes its rate from the path
/// (a short unpaced probe) and says so, or judges no rate; it never passes at a rate it did
/// not choose (1 Gb/s, which any machine carries, passed before).
#[test]
fn veth_default_udp_is_paced_from_its_probe_not_a_fixed_rate() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let out = bin()
        // Loss is the host's here (other builds share the CPUs); the rate's origin is the test.
        .args([
            "socket",
            "--veth",
            "--mode",
            "udp",
            "--duration",
            "2",
            "--format",
            "json",
            "--max-udp-loss",
            "100",
        ])
        .output()
        .expect("run");
    let v = json(&out);
    let r = &v["results"][0];
    assert_eq!(r["mode"], "udp", "{v}");
    let notes: Vec<&str> = r["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    if r["status"] == "skip" {
        assert!(notes.iter().any(|n| n.starts_with("no rate judged")), "{r}");
        return;
    }
    let rate = r["rate_gbps"].as_f64().expect("a paced run");
    // "paced at R Gb/s: 75 % of the D Gb/s an unpaced 0.5-s probe delivered over this path"
    let probe = notes
        .iter()
        .find_map(|n| {
            let rest = n.strip_prefix("paced at ")?;
            let (_, d) = rest.split_once("% of the ")?;
            let (d, tail) = d.split_once(" Gb/s an unpaced ")?;
            tail.contains("probe delivered")
                .then(|| d.parse::<f64>().ok())?
        })
        .unwrap_or_else(|| panic!("no probe named for the rate {rate}: {r}"));
    assert!(probe > 0.0, "{r}");
    assert!(
        (rate - probe * 0.75).abs() <= probe * 0.001 + 0.001,
        "paced at {rate}, probe {probe}: {r}"
    );
    assert_eq!(r["integrity_errors"], 0, "{r}");
    no_veth_here();
}

/// A planted drop: mid-run the receiving veth end's MTU falls to 1500 under 8000-byte
/// datagrams sent whole (MTU 9000, no GSO), so the kernel refuses every frame at that end
/// (`__dev_forward_skb`: not forwardable, counted in its `rx_dropped`; the sending end counts
/// it in `tx_dropped`). The self-test's causes must name the receiving port's counter.
#[test]
fn veth_planted_drop_is_named_in_the_causes() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let mut child = bin()
        .args([
            "socket",
            "--veth",
            "--mode",
            "udp",
            "--mtu",
            "9000",
            "--message-size",
            "8000",
            "--no-gso",
            // A fixed pace: the rate the run would take from its own probe (a veth pair has no
            // link speed) could be probed while the drop is being planted.
            "--rate",
            "1",
            "--duration",
            "3",
            "--format",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    assert!(wait_for_traffic(&mut child), "no traffic crossed the pair");
    let planted = netns::list_named()
        .into_iter()
        .find(|n| n.starts_with(&format!("daqtune-{pid}-")) && n.ends_with("-rx"))
        .and_then(|name| {
            let ns = NetNs::open_named(&name).ok()?;
            let mut nl = daqtune_selftest::netlink::open_in(&ns).ok()?;
            let l = nl
                .links()
                .ok()?
                .into_iter()
                .find(|l| l.name == daqtune_selftest::topology::VETH_RX)?;
            nl.set_mtu(l.index, 1500).ok()
        });
    let out = child.wait_with_output().expect("wait");
    assert!(
        planted.is_some(),
        "the run ended before the drop was planted"
    );
    let v = json(&out);
    let r = &v["results"][0];
    assert_eq!(r["mode"], "udp");
    assert!(r["lost"].as_u64().expect("lost") > 0, "{r}");
    let causes = r["causes"].as_array().expect("causes");
    let first = &causes[0];
    assert_eq!(first["rank"], 1);
    assert_eq!(first["port"], daqtune_selftest::topology::VETH_RX, "{r}");
    assert_eq!(first["kind"], "kernel-drop");
    let msg = first["message"].as_str().expect("message");
    assert!(
        msg.starts_with(&format!(
            "the receiving port {}: rx_dropped (interface statistics) rose by ",
            daqtune_selftest::topology::VETH_RX
        )),
        "{msg}"
    );
    // The sender's end counted the same frames as not delivered.
    assert!(
        causes
            .iter()
            .any(|c| c["port"] == daqtune_selftest::topology::VETH_TX
                && c["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("tx_dropped"))),
        "{r}"
    );
    assert!(
        r["notes"].as_array().expect("notes").iter().any(|n| n
            .as_str()
            .is_some_and(|n| n.starts_with("the ports counted frames lost: the receiving port"))),
        "{r}"
    );
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
}

#[test]
fn veth_four_streams() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let out = bin()
        .args([
            "socket",
            "--veth",
            "--duration",
            "1",
            "--streams",
            "4",
            "--format",
            "json",
            "--max-udp-loss",
            "100",
        ])
        .output()
        .expect("run");
    let v = json(&out);
    let mut lossy = false;
    for r in v["results"].as_array().expect("results") {
        // As above: UDP loss on a loaded host is the host's, integrity is ours.
        let lost_only = failed_by_loss_only(r);
        lossy |= lost_only;
        assert!(
            r["status"] == "pass" || r["status"] == "warn" || lost_only,
            "{r}"
        );
        assert_eq!(r["integrity_errors"], 0);
        assert_eq!(r["threads"].as_array().expect("threads").len(), 8);
        streams_add_up(r, 4);
    }
    assert_eq!(v["results"][0]["status"], "pass");
    assert_eq!(out.status.code(), Some(if lossy { 1 } else { 0 }));
}

/// Each stream's figures add up to the result's totals.
fn streams_add_up(r: &serde_json::Value, n: usize) {
    let st = r["streams"].as_array().expect("per-stream figures");
    assert_eq!(st.len(), n, "{r}");
    for k in [
        "bytes",
        "packets",
        "sent",
        "lost",
        "reordered",
        "integrity_errors",
    ] {
        let sum: u64 = st.iter().map(|s| s[k].as_u64().expect(k)).sum();
        assert_eq!(sum, r[k].as_u64().expect(k), "{k}: {r}");
    }
    let sum: f64 = st.iter().map(|s| s["gbps"].as_f64().expect("gbps")).sum();
    let total = r["gbps"].as_f64().expect("gbps");
    assert!(
        (sum - total).abs() <= 1e-9 * total.max(1.0),
        "{sum} vs {total}"
    );
    for (i, s) in st.iter().enumerate() {
        assert_eq!(s["stream"], i);
        assert!(s["tx_cpu"].is_u64() && s["rx_cpu"].is_u64(), "{s}");
    }
}

#[test]
fn veth_find_max_udp_searches_confirms_and_reports_every_trial() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let child = bin()
        .args([
            "socket",
            "--veth",
            "--find-max",
            "--streams",
            "2",
            "--trial-duration",
            "0.3",
            "--precision",
            "5",
            "--format",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    let v = json(&out);
    let results = v["results"].as_array().expect("results");
    // --find-max alone searches UDP only.
    assert_eq!(results.len(), 1, "{v}");
    let r = &results[0];
    assert_eq!(r["mode"], "udp");
    let trials = r["trials"].as_array().expect("trials");
    assert!(trials.len() >= 2, "{r}");
    for t in trials {
        for k in ["offered_gbps", "achieved_gbps", "loss_pct", "duration_s"] {
            assert!(t[k].is_f64(), "{k} in {t}");
        }
        for k in ["sent", "received", "lost", "integrity_errors"] {
            assert!(t[k].is_u64(), "{k} in {t}");
        }
        assert_eq!(t["integrity_errors"], 0, "{t}");
        assert!(t["passed"].is_boolean());
        assert!(!t["length_rule"].as_str().unwrap_or_default().is_empty());
        let cores = t["cpu_per_core"].as_object().expect("cpu per core");
        assert!(!cores.is_empty(), "{t}");
        // Two streams: four threads, each on its own CPU or sharing one.
        assert_eq!(t["threads"].as_array().expect("threads").len(), 4);
    }
    assert_eq!(trials[0]["phase"], "probe");
    assert!(trials[0]["asked_gbps"].is_null());
    for t in &trials[1..] {
        assert!(t["asked_gbps"].as_f64().expect("paced") > 0.0, "{t}");
    }
    // Converged: the search only confirms once its bounds met.
    let confirms: Vec<&serde_json::Value> =
        trials.iter().filter(|t| t["phase"] == "confirm").collect();
    assert!(!confirms.is_empty(), "no confirmation trial: {r}");
    let search = &r["search"];
    assert_eq!(search["loss_allowed_pct"], 0.0);
    assert!(search["resolution_gbps"].as_f64().expect("resolution") > 0.0);
    assert!(search["start_upper_gbps"].as_f64().expect("upper") > 0.0);
    let limit = &search["limit"];
    assert!(
        limit["source"]
            .as_str()
            .unwrap_or_default()
            .contains("no link speed known"),
        "{limit}"
    );
    match r["max_loss_free_gbps"].as_f64() {
        Some(found) => {
            let last = trials.last().expect("a trial");
            assert_eq!(last["phase"], "confirm");
            assert_eq!(last["passed"], true);
            assert_eq!(last["achieved_gbps"].as_f64(), Some(found));
            assert_eq!(last["lost"], 0);
            let frac = search["fraction_of_limit"].as_f64().expect("fraction");
            assert!(frac > 0.0, "{search}");
            // The record is the confirmation's, with its streams.
            assert_eq!(r["sent"], last["sent"]);
            streams_add_up(r, 2);
            assert_eq!(r["status"], "pass", "{r}");
            assert!(out.status.success());
        }
        // A host this loaded can lose even at rates that passed before: then every
        // confirmation round ended on a lossy run and the run says so (and fails).
        None => {
            assert!(confirms.iter().any(|t| t["passed"] == false), "{r}");
            assert_eq!(r["status"], "fail");
        }
    }
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
    no_veth_here();
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill on a child we spawned and have not reaped yet.
    let rc = unsafe { libc::kill(pid as i32, sig) };
    assert_eq!(rc, 0);
}

#[test]
fn sigint_mid_run_restores() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let child = bin()
            .args(["socket", "--veth", "--duration", "30", "--format", "json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut child = child;
        let pid = child.id();
        assert!(
            wait_for_traffic(&mut child),
            "no traffic before the run ended"
        );
        signal(pid, sig);
        let out = child.wait_with_output().expect("wait");
        // 128 + sig, not 0: the 30 s run stopped on the signal.
        assert_eq!(
            out.status.code(),
            Some(128 + sig),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v = json(&out);
        // The interrupted mode is reported with what it measured, integrity intact.
        let r = &v["results"][0];
        assert_eq!(r["integrity_errors"], 0, "{r}");
        assert!(r["packets"].as_u64().expect("packets") > 0, "{r}");
        assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
        no_veth_here();
    }
}

#[test]
fn sigkill_leftovers_removed_by_next_run() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let mut child = bin()
        .args(["socket", "--veth", "--duration", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    // The journal is written before the namespaces: once they exist, a SIGKILL leaves both.
    assert!(wait_for_namespaces(&mut child));
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let left = leftovers(pid);
    assert!(
        left.len() >= 2,
        "a killed run leaves its namespaces: {left:?}"
    );
    // A foreign namespace (like DAQIRI's dq_wire_*) must survive the sweep.
    let foreign = format!("dq_wire_{}_{}", std::process::id(), unique());
    let _keep = NetNs::create(&foreign).expect("foreign namespace");
    let out = bin()
        .args(["socket", "--veth", "--duration", "1", "--mode", "tcp"])
        .output()
        .expect("second run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("run {pid}")), "{stderr}");
    assert!(leftovers(pid).is_empty(), "{:?}", leftovers(pid));
    assert!(netns::list_named().contains(&foreign));
    netns::delete_named(&foreign).expect("cleanup foreign");
}

// ---------------------------------------------------------------------------------------------
// Two-port mode, with a veth pair standing in for the cabled ports. The "host" is a private
// namespace made by the test, so the real host's interfaces and routes are never touched.

/// Name, MTU, up, IPv4 addresses, IPv4 routes of one port.
type PortState = (String, u32, bool, Vec<String>, Vec<String>);

struct TestHost {
    name: String,
    ns: NetNs,
}

/// The `dqtest-PID-*` namespaces of test processes that are gone (killed mid-run, so their
/// `Drop` never ran): removed once per test process, before it makes its own. A live pid's are
/// left alone, and so is a pid reused since (its namespaces are then kept, never another's
/// removed).
fn sweep_dead_test_namespaces() {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| {
        for name in netns::list_named() {
            let Some(pid) = name
                .strip_prefix("dqtest-")
                .and_then(|r| r.split('-').next())
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                // Best effort: a namespace still held open elsewhere stays; the run goes on.
                let _ = netns::delete_named(&name);
            }
        }
    });
}

impl TestHost {
    fn new(tag: &str) -> TestHost {
        sweep_dead_test_namespaces();
        // Unique per call: never a namespace another test or test run could hold.
        let name = format!("dqtest-{}-{}-{tag}", std::process::id(), unique());
        let ns = NetNs::create(&name).expect("test namespace");
        TestHost { name, ns }
    }

    fn nl(&self) -> Netlink {
        daqtune_selftest::netlink::open_in(&self.ns).expect("netlink in test namespace")
    }

    /// p0/p1 veth pair with addresses and routes like a configured host's ports.
    fn ports(&self, a: &str, b: &str, default_via_a: bool) {
        let mut nl = self.nl();
        nl.create_veth(a, b, None).expect("veth");
        let la = nl.link_by_name(a).expect("dump").expect("a");
        let lb = nl.link_by_name(b).expect("dump").expect("b");
        nl.set_mtu(la.index, 1400).expect("mtu");
        nl.add_simple_addr(la.index, "198.18.5.1".parse().expect("ip"), 24)
            .expect("addr a");
        nl.add_simple_addr(lb.index, "198.18.6.1".parse().expect("ip"), 24)
            .expect("addr b");
        nl.add_simple_addr(lb.index, "198.18.6.7".parse().expect("ip"), 32)
            .expect("addr b2");
        nl.set_up(la.index, true).expect("up a");
        nl.set_up(lb.index, true).expect("up b");
        let mut r = Route::host_route("198.18.100.0".parse().expect("ip"), la.index);
        r.dst_len = 24;
        r.scope = 0;
        r.gateway = Some("198.18.5.254".parse().expect("ip"));
        nl.add_route(&r).expect("static route via gateway");
        let mut r = Route::host_route("198.18.101.0".parse().expect("ip"), lb.index);
        r.dst_len = 24;
        nl.add_route(&r).expect("link route");
        // A static ARP entry, as wire-loopback setups make: restored too.
        nl.add_permanent_neighbour(
            la.index,
            "198.18.5.9".parse().expect("ip"),
            &[2, 0, 0, 0, 0, 9],
        )
        .expect("permanent neighbour");
        if default_via_a {
            let mut d = Route::host_route("0.0.0.0".parse().expect("ip"), la.index);
            d.dst = None;
            d.dst_len = 0;
            d.scope = 0;
            d.gateway = Some("198.18.5.254".parse().expect("ip"));
            nl.add_route(&d).expect("default route");
        }
    }

    /// What must be restored exactly, by interface name (indexes may change on the way back).
    fn state(&self, names: &[&str]) -> Vec<PortState> {
        let mut nl = self.nl();
        let links = nl.links().expect("links");
        let addrs = nl.addrs().expect("addrs");
        let routes = nl.routes().expect("routes");
        let neighbours = nl.neighbours().expect("neighbours");
        let mut out = Vec::new();
        for n in names {
            let Some(l) = links.iter().find(|l| l.name == *n) else {
                out.push((n.to_string(), 0, false, vec![], vec![]));
                continue;
            };
            let mut a: Vec<String> = addrs
                .iter()
                .filter(|a| a.index == l.index && matches!(a.local, IpAddr::V4(_)))
                .map(|a: &Addr| format!("{}/{} scope {}", a.local, a.prefix_len, a.scope))
                .collect();
            a.sort();
            let mut r: Vec<String> = routes
                .iter()
                .filter(|r| r.uses_link(l.index) && r.family == libc::AF_INET as u8)
                .map(|r| {
                    format!(
                        "{:?}/{} gw {:?} table {} proto {} scope {} type {}",
                        r.dst, r.dst_len, r.gateway, r.table, r.protocol, r.scope, r.kind
                    )
                })
                .collect();
            r.extend(
                neighbours
                    .iter()
                    .filter(|x| x.index == l.index && x.is_permanent())
                    .map(|x| format!("neighbour {} at {:02x?}", x.ip, x.mac)),
            );
            r.sort();
            out.push((n.to_string(), l.mtu, l.is_up(), a, r));
        }
        out
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> (Command, Output) {
        let mut c = bin();
        c.args(args).env_remove("SSH_CONNECTION");
        for (k, v) in env {
            c.env(k, v);
        }
        self.ns.command_in(&mut c).expect("enter test namespace");
        let out = c.output().expect("run");
        (c, out)
    }
}

impl Drop for TestHost {
    fn drop(&mut self) {
        let _ = netns::delete_named(&self.name);
    }
}

#[test]
fn two_ports_moved_used_and_restored_exactly() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let host = TestHost::new("ports");
    host.ports("dqtp0", "dqtp1", false);
    let before = host.state(&["dqtp0", "dqtp1"]);
    assert_eq!(before[0].1, 1400);
    assert!(
        before[0].4.iter().any(|r| r.contains("198.18.5.254")),
        "{before:?}"
    );
    assert!(
        before[0]
            .4
            .iter()
            .any(|r| r.contains("neighbour 198.18.5.9")),
        "{before:?}"
    );
    let (_, out) = host.run(
        &[
            "socket",
            "--tx-if",
            "dqtp0",
            "--rx-if",
            "dqtp1",
            "--duration",
            "1",
            "--mtu",
            "9000",
            "--format",
            "json",
            "--max-udp-loss",
            "100",
        ],
        &[],
    );
    let v = json(&out);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(v["topology"]
        .as_str()
        .expect("topology")
        .contains("ports dqtp0"));
    for r in v["results"].as_array().expect("results") {
        assert_eq!(r["topology"], "ports");
        assert!(r["status"] == "pass" || r["status"] == "warn", "{r}");
        assert_eq!(r["integrity_errors"], 0);
        // The traffic crossed the two ports (their own counters say so).
        let p = &r["port_bytes"];
        let bytes = r["bytes"].as_u64().expect("bytes");
        assert!(p["tx_port_tx"].as_u64().expect("tx") >= bytes, "{r}");
        assert!(p["rx_port_rx"].as_u64().expect("rx") >= bytes, "{r}");
    }
    assert_eq!(v["results"][0]["status"], "pass");
    assert_eq!(host.state(&["dqtp0", "dqtp1"]), before);
}

#[test]
fn two_ports_restored_after_sigkill() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let host = TestHost::new("kill");
    host.ports("dqtk0", "dqtk1", false);
    let before = host.state(&["dqtk0", "dqtk1"]);
    let mut c = bin();
    c.args([
        "socket",
        "--tx-if",
        "dqtk0",
        "--rx-if",
        "dqtk1",
        "--duration",
        "30",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    host.ns.command_in(&mut c).expect("enter");
    let mut child = c.spawn().expect("spawn");
    let pid = child.id();
    // Killed once both ports have left the host for the run's namespaces.
    assert!(
        wait_for(&mut child, || {
            host.state(&["dqtk0", "dqtk1"]).iter().all(|p| p.1 == 0)
        }),
        "the ports never moved"
    );
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    // The ports sit in the dead run's namespaces now: gone from the host.
    let during = host.state(&["dqtk0", "dqtk1"]);
    assert_eq!(during[0].1, 0, "port should still be away: {during:?}");
    let (_, out) = host.run(
        &["socket", "--veth", "--duration", "0.5", "--mode", "tcp"],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(host.state(&["dqtk0", "dqtk1"]), before);
    assert!(leftovers(pid).is_empty());
}

#[test]
fn port_with_default_route_or_ssh_is_refused() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let host = TestHost::new("refuse");
    host.ports("dqtr0", "dqtr1", true);
    let before = host.state(&["dqtr0", "dqtr1"]);
    let (_, out) = host.run(
        &[
            "socket",
            "--tx-if",
            "dqtr0",
            "--rx-if",
            "dqtr1",
            "--duration",
            "1",
        ],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("default route"), "{stderr}");
    assert_eq!(host.state(&["dqtr0", "dqtr1"]), before);
    // A gate reading JSON still gets a report: both modes `error`, with the reason.
    let (_, out) = host.run(
        &[
            "socket",
            "--tx-if",
            "dqtr0",
            "--rx-if",
            "dqtr1",
            "--duration",
            "1",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let v = json(&out);
    for r in v["results"].as_array().expect("results") {
        assert_eq!(r["status"], "error");
        assert!(r["notes"][0]
            .as_str()
            .expect("note")
            .contains("default route"));
    }
    // dqtr1 has no default route, but holds the SSH session's address.
    let (_, out) = host.run(
        &[
            "socket",
            "--tx-if",
            "dqtr1",
            "--rx-if",
            "dqtr0",
            "--duration",
            "1",
        ],
        &[("SSH_CONNECTION", "198.18.6.9 50000 198.18.6.7 22")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("SSH"), "{stderr}");
    assert_eq!(host.state(&["dqtr0", "dqtr1"]), before);
}

#[test]
fn peer_and_serve_across_a_veth_pair() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    // Two "hosts": namespaces joined by a veth pair, 198.18.9.1 <-> 198.18.9.2.
    let a = TestHost::new("peer-a");
    let b = TestHost::new("peer-b");
    let mut nla = a.nl();
    nla.create_veth("dqpa", "dqpb", Some(b.ns.fd()))
        .expect("veth");
    let la = nla.link_by_name("dqpa").expect("dump").expect("a");
    let mut nlb = b.nl();
    let lb = nlb.link_by_name("dqpb").expect("dump").expect("b");
    nla.add_simple_addr(la.index, "198.18.9.1".parse().expect("ip"), 24)
        .expect("addr");
    nlb.add_simple_addr(lb.index, "198.18.9.2".parse().expect("ip"), 24)
        .expect("addr");
    nla.set_up(la.index, true).expect("up");
    nlb.set_up(lb.index, true).expect("up");
    for mode in ["tcp", "udp"] {
        let mut server = bin();
        server
            .args(["socket", "--serve", "--listen", "198.18.9.2:5299", "--once"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        b.ns.command_in(&mut server).expect("enter b");
        let mut server = server.spawn().expect("server");
        // The server says when it listens: wait for that line, not for a guessed time.
        let (tx, rx) = std::sync::mpsc::channel();
        let err = server.stderr.take().expect("server stderr");
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            let mut all = String::new();
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                if line.contains("serving self-test sessions") {
                    let _ = tx.send(());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        if rx.recv().is_err() {
            let st = server.wait().expect("server exit");
            panic!(
                "the server ended without listening ({st:?}): {}",
                reader.join().unwrap_or_default()
            );
        }
        let (_, out) = a.run(
            &[
                "socket",
                "--peer",
                "198.18.9.2",
                "--mode",
                mode,
                "--duration",
                "1",
                "--format",
                "json",
                "--max-udp-loss",
                "100",
            ],
            &[],
        );
        let v = json(&out);
        let r = &v["results"][0];
        assert_eq!(r["topology"], "peer");
        // On a loaded CI host a paced sender may fall short of its rate: that warns, it does
        // not fail; integrity (and, for TCP, loss) decide.
        assert!(r["status"] == "pass" || r["status"] == "warn", "{r}");
        assert_eq!(r["integrity_errors"], 0);
        assert!(out.status.success());
        let st = server.wait().expect("server exit");
        let so = reader.join().expect("server stderr");
        assert!(st.success(), "{so}");
        assert!(so.contains("0 integrity errors"), "{so}");
    }
}

#[test]
fn without_root_namespaces_are_refused_clearly_and_loopback_works() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    use std::os::unix::process::CommandExt;
    // nobody: no CAP_SYS_ADMIN, so no namespaces; the binary must say so and exit 2.
    let out = match bin()
        .args(["socket", "--veth", "--duration", "1"])
        .uid(65534)
        .gid(65534)
        .output()
    {
        Ok(o) => o,
        // The build directory is not reachable for nobody (a 0700 checkout): nothing to test.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            daqtune_testkit::skip("nobody cannot execute the test binary here (a 0700 checkout)");
            return;
        }
        Err(e) => panic!("run as nobody: {e}"),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("need root"), "{stderr}");
    let out = bin()
        .args([
            "socket",
            "--loopback",
            "--duration",
            "0.5",
            "--mode",
            "tcp",
            "--format",
            "json",
        ])
        .uid(65534)
        .gid(65534)
        .output()
        .expect("loopback as nobody");
    let v = json(&out);
    assert_eq!(v["results"][0]["status"], "pass", "{v}");
    assert_eq!(v["results"][0]["topology"], "loopback");
}

#[test]
fn tbf_qdisc_is_set_read_back_and_removed_through_netlink() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let host = TestHost::new("tbf");
    let mut nl = host.nl();
    nl.create_veth("dqtb0", "dqtb1", None).expect("veth");
    let l = nl.link_by_name("dqtb0").expect("dump").expect("link");
    let t = daqtune_selftest::netlink::Tbf::at(100_000_000, 9000);
    nl.set_root_tbf(l.index, &t).expect("tbf");
    let root_of = |nl: &mut Netlink| {
        nl.qdiscs()
            .expect("dump qdiscs")
            .into_iter()
            .find(|q| q.index == l.index && q.parent == daqtune_selftest::netlink::TC_H_ROOT)
    };
    let q = root_of(&mut nl).expect("a root qdisc");
    assert_eq!(q.kind, "tbf");
    assert_eq!(q.handle, 0x1_0000);
    // Setting it again replaces it (a rerun never stacks shapers).
    nl.set_root_tbf(
        l.index,
        &daqtune_selftest::netlink::Tbf::at(1_000_000_000, 9000),
    )
    .expect("replace");
    assert_eq!(root_of(&mut nl).map(|q| q.kind), Some("tbf".into()));
    nl.delete_root_qdisc(l.index).expect("delete");
    assert_ne!(root_of(&mut nl).map(|q| q.kind), Some("tbf".into()));
}
