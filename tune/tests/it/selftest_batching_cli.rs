//! The kernel's batching through the binary: the flags reach the engine and the JSON record
//! says which paths ran (loopback: no root needed).

use crate::selftest_bin as bin;

fn run(extra: &[&str]) -> serde_json::Value {
    let out = bin()
        .args([
            "socket",
            "--loopback",
            "--duration",
            "0.3",
            "--rate",
            "1",
            "--no-progress",
            "--format",
            "json",
        ])
        .args(extra)
        .output()
        .expect("spawn");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn paths(r: &serde_json::Value) -> Vec<(String, bool, bool)> {
    r["batching"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|b| {
                    (
                        b["name"].as_str().unwrap_or("").to_string(),
                        b["asked"].as_bool().unwrap_or(false),
                        b["used"].as_bool().unwrap_or(false),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn udp_uses_the_batching_by_default_and_each_flag_turns_one_off() {
    let v = run(&["--mode", "udp"]);
    let r = &v["results"][0];
    let names: Vec<_> = paths(r).into_iter().map(|p| p.0).collect();
    assert_eq!(names, ["gso", "sendmmsg", "gro", "recvmmsg"], "{r}");
    assert!(paths(r).iter().all(|p| p.1), "{r}");
    assert!(r["gbps_per_core"].as_f64().is_some(), "{r}");

    let v = run(&["--mode", "udp", "--no-gso", "--no-recvmmsg"]);
    let r = &v["results"][0];
    let p = paths(r);
    assert_eq!(p[0], ("gso".into(), false, false), "{r}");
    assert_eq!(p[3], ("recvmmsg".into(), false, false), "{r}");
    assert!(p[1].1 && p[2].1, "{r}");
    assert_eq!(r["integrity_errors"], 0, "{r}");
}

#[test]
fn tcp_lists_zerocopy_and_its_figures() {
    let v = run(&["--mode", "tcp", "--zerocopy"]);
    let r = &v["results"][0];
    let p = paths(r);
    assert_eq!(p.len(), 1, "{r}");
    assert_eq!((p[0].0.as_str(), p[0].1), ("zerocopy", true), "{r}");
    if p[0].2 {
        let z = &r["zerocopy"];
        assert!(z["sends"].as_u64().unwrap_or(0) > 0, "{r}");
        assert_eq!(z["sends"], z["completed"], "{r}");
    }
    let v = run(&["--mode", "tcp"]);
    assert_eq!(paths(&v["results"][0]), [("zerocopy".into(), false, false)]);
}
