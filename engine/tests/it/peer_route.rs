//! The two-host DGX Spark setup (NVIDIA/daqiri 4e4bdb2, PR #180): with `1.1.1.1/24` on the
//! client's p0 and `2.2.2.2/24` on the server's, *"The /24 assignment alone does not give the
//! kernel a route to the peer. On each host, add a host route and static neighbor for the peer
//! on the cabled port"* (`ip route replace PEER/32 dev enp1s0f0np0 src LOCAL`, `ip neigh replace
//! PEER lladdr MAC dev enp1s0f0np0 nud permanent`). `check --config` judges this host's side:
//! the peer's address is routed via the data port and has a neighbour there.

use crate::common;

use common::{copy_tree, evaluate_app, fixture};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn config() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/configs/rdma_spark_xhost.yaml")
}

/// The client (TX) Spark of a two-host pair: 1.1.1.1/24 on enp1s0f0np0, the management port
/// with the default route, and whatever extra `route` lines and `arp` table the case adds.
fn tx_host(extra_routes: &str, arp: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    copy_tree(&fixture("spark"), d.path());
    let r = d.path();
    let w = |p: &str, t: &str| std::fs::write(r.join(p), t).expect("write");
    w(
        "proc/net/fib_trie",
        "Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 1.1.1.0/24 2 0 2
        |-- 1.1.1.0
           /24 link UNICAST
     |-- 192.168.1.0
        /24 link UNICAST
Local:
  +-- 0.0.0.0/0 3 0 4
     +-- 1.1.1.0/24 2 0 2
        |-- 1.1.1.1
           /32 host LOCAL
        |-- 1.1.1.255
           /32 link BROADCAST
     |-- 192.168.1.30
        /32 host LOCAL
     |-- 127.0.0.1
        /32 host LOCAL
",
    );
    w(
        "proc/net/route",
        &format!(
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
enP7s7\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0
enP7s7\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0
enp1s0f0np0\t00010101\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
{extra_routes}"
        ),
    );
    w(
        "proc/net/arp",
        &format!(
            "IP address       HW type     Flags       HW address            Mask     Device
192.168.1.1      0x1         0x2         00:11:22:33:44:55     *        enP7s7
{arp}"
        ),
    );
    d
}

/// `ip route replace 2.2.2.2/32 dev enp1s0f0np0 src 1.1.1.1` as /proc/net/route shows it.
const HOST_ROUTE: &str = "enp1s0f0np0\t02020202\t00000000\t0005\t0\t0\t0\tFFFFFFFF\t0\t0\t0\n";
/// `ip neigh replace 2.2.2.2 lladdr ... nud permanent`: ATF_COM | ATF_PERM.
const STATIC_NEIGH: &str =
    "2.2.2.2          0x1         0x6         4c:bb:47:98:7a:10     *        enp1s0f0np0\n";

fn peer_verdicts(root: &Path) -> Vec<Value> {
    let (rep, _) = evaluate_app(root, "dgx-spark", Some(&config()), &["app.interfaces"]);
    rep["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["subject"].as_str().is_some_and(|s| s.ends_with("(peer)")))
        .cloned()
        .collect()
}

#[test]
fn the_slash_24_alone_leaves_the_peer_on_the_default_route() {
    let d = tx_host("", "");
    let vs = peer_verdicts(d.path());
    assert_eq!(vs.len(), 1, "{vs:#?}");
    let v = &vs[0];
    assert_eq!(v["status"], "fail", "{v:#}");
    let m = v["message"].as_str().expect("message");
    assert!(m.contains("peer 2.2.2.2"), "{m}");
    assert!(m.contains("the default route via enP7s7"), "{m}");
    assert!(m.contains("enp1s0f0np0"), "{m}");
    assert!(m.contains("4e4bdb2"), "{m}");
    let fix = v["fix"].as_str().expect("fix");
    assert!(
        fix.contains("ip route replace 2.2.2.2/32 dev enp1s0f0np0 src 1.1.1.1"),
        "{fix}"
    );
    assert!(fix.contains("nud permanent"), "{fix}");
}

#[test]
fn a_host_route_without_a_neighbour_still_fails_for_roce() {
    let d = tx_host(HOST_ROUTE, "");
    let vs = peer_verdicts(d.path());
    assert_eq!(vs.len(), 1, "{vs:#?}");
    assert_eq!(vs[0]["status"], "fail", "{:#}", vs[0]);
    assert!(
        vs[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no neighbour entry")),
        "{:#}",
        vs[0]
    );
}

#[test]
fn route_and_static_neighbour_pass() {
    let d = tx_host(HOST_ROUTE, STATIC_NEIGH);
    let vs = peer_verdicts(d.path());
    assert_eq!(vs.len(), 1, "{vs:#?}");
    assert_eq!(vs[0]["status"], "pass", "{:#}", vs[0]);
    assert!(
        vs[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("static neighbour (4c:bb:47:98:7a:10)")),
        "{:#}",
        vs[0]
    );
}

#[test]
fn a_single_host_loopback_names_no_peer() {
    // The Spark fixture holds both 1.1.1.1 and 2.2.2.2 (one host, p0 -> p1): nothing to judge.
    assert!(peer_verdicts(&fixture("spark")).is_empty());
}
