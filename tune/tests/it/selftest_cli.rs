//! `daqtune selftest socket --veth --duration 3` end to end through the real binary (root:
//! it makes network namespaces). selftest_socket_e2e.rs covers signals, SIGKILL
//! recovery and the two-port mode.

use std::process::Command;

#[test]
fn selftest_socket_veth_passes_and_cleans_up() {
    if !daqtune_testkit::require_root_or_skip("network namespaces and a veth pair") {
        return;
    }
    let child = Command::new(crate::common::bin())
        .args([
            "selftest",
            "socket",
            "--veth",
            "--duration",
            "3",
            "--format",
            "json",
            // UDP loss is a figure, not a verdict, here: a receiver starved of CPU by other
            // builds drops datagrams; what arrived is verified either way.
            "--max-udp-loss",
            "100",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn daqtune");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json report");
    assert_eq!(v["schema"], "daqtune.selftest/v1");
    let modes: Vec<&str> = v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            // warn = a paced UDP sender starved of CPU on a loaded host fell short of its rate.
            assert!(r["status"] == "pass" || r["status"] == "warn", "{r}");
            assert_eq!(r["integrity_errors"], 0, "{r}");
            // Per-port counter deltas of the veth ends it used (issue 45 item 2): the sending
            // end's tx_packets and the receiving end's rx_packets rose, from the interface
            // statistics read in their namespaces.
            let ports = r["port_counters"].as_array().expect("port_counters");
            let rose = |i: usize, name: &str| {
                ports[i]["deltas"].as_array().is_some_and(|d| {
                    d.iter().any(|d| {
                        d["source"] == "statistics"
                            && d["name"] == name
                            && d["delta"].as_u64().is_some_and(|x| x > 0)
                    })
                })
            };
            assert_eq!(ports.len(), 2, "{r}");
            assert_eq!(
                (&ports[0]["role"], &ports[1]["role"]),
                (&"tx".into(), &"rx".into())
            );
            assert!(rose(0, "tx_packets") && rose(1, "rx_packets"), "{r}");
            r["mode"].as_str().expect("mode")
        })
        .collect();
    assert_eq!(modes, ["tcp", "udp"]);
    assert_eq!(v["results"][0]["status"], "pass");
    let left: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&format!("daqtune-{pid}-")))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}
