//! Port pairs judged by physical port. DGX Spark's CX-7 is one ASIC with two physical ports,
//! each reachable over both PCIe segments (socket-direct): `0000:01:00.0` and `0002:01:00.0`
//! are two views of p0. NVIDIA/daqiri PR #108 (873b379) found that a loopback on that pair
//! never reaches the wire (`tx/rx_packets_phy` stay flat) and moved the example's RX to
//! `0002:01:00.1` (p1). The Spark fixture's `phys_port_name` follows the tutorial's loop output
//! since that PR (`enp1s0f0np0 p0`, `enp1s0f1np1 p1`, `enP2p1s0f0np0 p0`, `enP2p1s0f1np1 p1`).

use crate::common;
use daqtune_testkit::config;

use common::{evaluate_app, fixture};
use serde_json::Value;

fn pair_verdicts(cfg: &std::path::Path) -> Vec<Value> {
    let (rep, _) = evaluate_app(
        &fixture("spark"),
        "dgx-spark",
        Some(cfg),
        &["app.interfaces"],
    );
    rep["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["subject"].as_str().is_some_and(|s| s.contains(" -> ")))
        .cloned()
        .collect()
}

#[test]
fn the_seeds_spark_pair_is_one_physical_port_and_fails_naming_p1() {
    // The example as the seed (c65755a) and DAQIRI before PR #108 had it: RX on 0002:01:00.0.
    let text = std::fs::read_to_string(config("raw_spark_pinned.yaml")).expect("config");
    assert!(text.contains("address: 0002:01:00.1"), "{text}");
    let d = tempfile::tempdir().expect("tmp");
    let cfg = d.path().join("raw_spark_seed_pair.yaml");
    std::fs::write(
        &cfg,
        text.replace("address: 0002:01:00.1", "address: 0002:01:00.0"),
    )
    .expect("w");
    let vs = pair_verdicts(&cfg);
    assert_eq!(vs.len(), 1, "{vs:#?}");
    let v = &vs[0];
    assert_eq!(v["status"], "fail", "{v:#}");
    let msg = v["message"].as_str().expect("message");
    assert!(msg.contains("same physical port p0"), "{msg}");
    assert!(msg.contains("never reaches the cable"), "{msg}");
    assert!(msg.contains("PR #108"), "{msg}");
    // The pair that crosses the wire: p1 in the RX side's domain, as PR #108 chose.
    assert!(msg.contains("enP2p1s0f1np1 (0002:01:00.1, p1)"), "{msg}");
    let fix = v["fix"].as_str().expect("fix");
    assert!(fix.contains("address: 0002:01:00.1"), "{fix}");
}

#[test]
fn the_corrected_spark_pair_crosses_the_wire() {
    let vs = pair_verdicts(&config("raw_spark_pinned.yaml"));
    assert_eq!(vs.len(), 1, "{vs:#?}");
    assert_eq!(vs[0]["status"], "pass", "{:#}", vs[0]);
    assert!(
        vs[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("different physical ports of one adapter")),
        "{:#}",
        vs[0]
    );
}
