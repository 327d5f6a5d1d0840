//! Issue 26 item 7: `qualify --only IDS` and `--selftest ENGINES` run a named subset, and the
//! JUnit and JSON reports say which.

use crate::common;
use common::*;

/// The testsuite's `daqtune.subset*` properties and every testcase's classname.
fn junit_subset(text: &str) -> (Vec<(String, String)>, Vec<String>) {
    let doc = roxmltree::Document::parse(text).expect("well-formed XML");
    let suite = doc
        .root_element()
        .children()
        .find(|n| n.has_tag_name("testsuite"))
        .expect("testsuite");
    let props = suite
        .children()
        .filter(|n| n.has_tag_name("properties"))
        .flat_map(|p| p.children().filter(|n| n.has_tag_name("property")))
        .map(|p| {
            (
                p.attribute("name").unwrap_or("").to_string(),
                p.attribute("value").unwrap_or("").to_string(),
            )
        })
        .collect();
    let classes = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|c| c.attribute("classname").unwrap_or("").to_string())
        .collect();
    (props, classes)
}

#[test]
fn only_runs_the_named_checks_and_the_junit_names_the_subset() {
    let tmp = tempfile::tempdir().expect("tmp");
    let junit = tmp.path().join("q.xml");
    let json = tmp.path().join("q.json");
    let root = fixture("igx-untuned");
    let out = run(&[
        "qualify",
        "--root",
        root.to_str().expect("utf8"),
        "--profile",
        "igx-orin",
        // A tune_system.py name stands for its id.
        "--only",
        "hugepages,mrrs",
        "--junit",
        junit.to_str().expect("utf8"),
        "--json",
        json.to_str().expect("utf8"),
    ]);
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("subset: checks hugepages, pcie.mrrs"),
        "{text}"
    );
    let (props, classes) = junit_subset(&std::fs::read_to_string(&junit).expect("junit"));
    assert!(
        props.contains(&(
            "daqtune.subset.checks".to_string(),
            "hugepages,pcie.mrrs".to_string()
        )),
        "{props:?}"
    );
    assert!(!classes.is_empty());
    for c in &classes {
        assert!(
            c == "daqtune.hugepages" || c == "daqtune.pcie.mrrs" || c == "daqtune.gate",
            "a case outside the subset: {c}"
        );
    }
    assert!(classes.iter().any(|c| c == "daqtune.pcie.mrrs"));
    let q: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("json");
    assert_eq!(
        q["subset"]["checks"],
        serde_json::json!(["hugepages", "pcie.mrrs"])
    );
    for v in q["checks"]["checks"].as_array().expect("checks") {
        assert!(
            matches!(v["id"].as_str(), Some("hugepages") | Some("pcie.mrrs")),
            "{v}"
        );
    }
}

/// The whole qualification carries no subset: its JUnit is the one it always was.
#[test]
fn the_whole_qualification_names_no_subset() {
    let tmp = tempfile::tempdir().expect("tmp");
    let junit = tmp.path().join("q.xml");
    let root = fixture("igx-untuned");
    let out = run(&[
        "qualify",
        "--root",
        root.to_str().expect("utf8"),
        "--profile",
        "igx-orin",
        "--junit",
        junit.to_str().expect("utf8"),
    ]);
    assert!(matches!(out.status.code(), Some(0) | Some(1)));
    let (props, classes) = junit_subset(&std::fs::read_to_string(&junit).expect("junit"));
    assert!(props.is_empty(), "{props:?}");
    assert!(classes.iter().any(|c| c == "daqtune.cpu.governor"));
}

#[test]
fn unknown_ids_and_engines_are_usage_errors_naming_the_known_ones() {
    let root = fixture("igx-untuned");
    let root = root.to_str().expect("utf8");
    let out = run(&["qualify", "--root", root, "--only", "pcie.mrrs,nope"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown check `nope`"), "{err}");
    assert!(
        err.contains("known: ") && err.contains("pcie.mrrs"),
        "{err}"
    );
    // Named before anything runs, even where the self-test could not run (--root).
    let out = run(&["qualify", "--selftest", "socket,tcpdump"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown engine `tcpdump`; known: socket, dpdk, rdma"),
        "{err}"
    );
    let out = run(&["qualify", "--root", root, "--selftest", "socket"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot run against --root"), "{err}");
}

/// `--selftest socket` runs that engine alone (at level 1 too) and the JUnit holds its
/// results and no other engine's.
#[test]
fn selftest_runs_only_the_named_engine() {
    let tmp = tempfile::tempdir().expect("tmp");
    let junit = tmp.path().join("q.xml");
    let json = tmp.path().join("q.json");
    // UDP loss is a figure here, not a verdict (a loaded machine drops datagrams).
    let profile = tmp.path().join("lossy.yaml");
    std::fs::write(
        &profile,
        "name: lossy\nextends: generic-dgpu\nselftest:\n  max_udp_loss_pct: 100\n",
    )
    .expect("profile");
    let out = run(&[
        "--profile",
        profile.to_str().expect("utf8"),
        "qualify",
        "--only",
        "cpu.governor",
        "--selftest",
        "socket",
        "--selftest-duration",
        "1",
        "--junit",
        junit.to_str().expect("utf8"),
        "--json",
        json.to_str().expect("utf8"),
    ]);
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let q: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("json");
    assert_eq!(q["subset"]["selftest"], serde_json::json!(["socket"]));
    let stages: Vec<&str> = q["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(stages, ["checks", "selftest socket"]);
    let results = q["selftest"].as_array().expect("results");
    assert!(!results.is_empty());
    assert!(
        results.iter().all(|r| r["engine"] == "socket"),
        "{results:?}"
    );
    let (props, classes) = junit_subset(&std::fs::read_to_string(&junit).expect("junit"));
    assert!(props.contains(&("daqtune.subset.selftest".to_string(), "socket".to_string())));
    let st = classes.iter().filter(|c| *c == "daqtune.selftest").count();
    assert_eq!(st, results.len());
    assert!(classes
        .iter()
        .all(|c| c == "daqtune.selftest" || c == "daqtune.cpu.governor" || c == "daqtune.gate"));
}
