//! Issue 8: the qualification gate, its JUnit mapping, required checks and waivers.

mod common;
use common::*;
use std::path::Path;

/// Parse the JUnit file and check its structure: testsuites > testsuite > testcase, each with
/// at most one <failure> or <skipped>, and the counts in the headers matching the cases.
fn junit_cases(path: &Path) -> Vec<(String, String, Option<String>)> {
    let text = std::fs::read_to_string(path).expect("junit file");
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let mut cases = Vec::new();
    for suite in root.children().filter(|n| n.has_tag_name("testsuite")) {
        let mut failures = 0;
        let mut skipped = 0;
        let mut n = 0;
        for case in suite.children().filter(|n| n.has_tag_name("testcase")) {
            n += 1;
            let kinds: Vec<&str> = case
                .children()
                .filter(|c| c.has_tag_name("failure") || c.has_tag_name("skipped"))
                .map(|c| c.tag_name().name())
                .collect();
            assert!(kinds.len() <= 1, "one outcome per testcase");
            match kinds.first() {
                Some(&"failure") => failures += 1,
                Some(&"skipped") => skipped += 1,
                _ => {}
            }
            cases.push((
                case.attribute("classname").unwrap_or("").to_string(),
                case.attribute("name").unwrap_or("").to_string(),
                kinds.first().map(|k| k.to_string()),
            ));
        }
        assert_eq!(suite.attribute("tests"), Some(n.to_string().as_str()));
        assert_eq!(
            suite.attribute("failures"),
            Some(failures.to_string().as_str())
        );
        assert_eq!(
            suite.attribute("skipped"),
            Some(skipped.to_string().as_str())
        );
    }
    cases
}

#[test]
fn level1_junit_has_one_case_per_verdict_and_maps_statuses() {
    let tmp = tempfile::tempdir().expect("tmp");
    let junit = tmp.path().join("q.xml");
    let json = tmp.path().join("q.json");
    let root = fixture("igx-untuned");
    let out = run(&[
        "qualify",
        "--level",
        "1",
        "--root",
        root.to_str().expect("utf8"),
        "--profile",
        "igx-orin",
        "--junit",
        junit.to_str().expect("utf8"),
        "--json",
        json.to_str().expect("utf8"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let q: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json")).expect("json");
    assert_eq!(q["schema"], "daqtune.qualify/v1");
    assert_eq!(q["passed"], false);
    let verdicts = q["checks"]["checks"].as_array().expect("checks");
    let cases = junit_cases(&junit);
    let gate = q["gate_failures"].as_array().map(|a| a.len()).unwrap_or(0);
    assert_eq!(cases.len(), verdicts.len() + gate);
    for (v, (class, name, outcome)) in verdicts.iter().zip(&cases) {
        assert_eq!(class, &format!("daqtune.{}", v["id"].as_str().expect("id")));
        assert_eq!(name, v["subject"].as_str().expect("subject"));
        let want = match v["status"].as_str().expect("status") {
            "fail" | "error" => Some("failure"),
            "skip" | "n/a" => Some("skipped"),
            _ => None,
        };
        assert_eq!(outcome.as_deref(), want, "{v}");
    }
    assert!(q["stages"][0]["seconds"].is_f64());
}

#[test]
fn a_required_check_that_skips_fails_the_gate() {
    // igx-tuned passes everything required; without its hugepage pools the hugepages check
    // can only skip, and a required check that skips must fail the gate.
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("host");
    std::fs::create_dir_all(&root).expect("mkdir");
    copy_tree(&fixture("igx-tuned"), &root);
    let rs = root.to_str().expect("utf8");
    let ok = run(&["qualify", "--root", rs, "--profile", "igx-orin"]);
    let ok_text = String::from_utf8_lossy(&ok.stdout).to_string();
    std::fs::remove_dir_all(root.join("sys/kernel/mm/hugepages")).expect("rm pools");
    let out = run(&[
        "check",
        "--root",
        rs,
        "--profile",
        "igx-orin",
        "--format",
        "json",
        "hugepages",
    ]);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(statuses(&r, "hugepages"), ["skip"]);
    // A plain check does not gate on required checks...
    assert_eq!(out.status.code(), Some(0));
    // ...qualify does.
    let junit = tmp.path().join("q.xml");
    let out = run(&[
        "qualify",
        "--root",
        rs,
        "--profile",
        "igx-orin",
        "--junit",
        junit.to_str().expect("utf8"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("required check hugepages ended in skip"));
    let cases = junit_cases(&junit);
    assert!(cases
        .iter()
        .any(|(c, _, o)| c == "daqtune.gate" && o.as_deref() == Some("failure")));
    // The same host with the pools passed the gate's required checks.
    assert!(!ok_text.contains("required check"), "{ok_text}");
}

#[test]
fn waivers_downgrade_until_they_expire() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = fixture("igx-untuned");
    let rs = root.to_str().expect("utf8");
    for (until, want) in [("2099-12-31", "warn"), ("2001-01-01", "fail")] {
        let p = tmp.path().join(format!("w{until}.yaml"));
        std::fs::write(
            &p,
            format!("name: waived\nextends: igx-orin\nwaivers:\n  - check: cpu.governor\n    until: \"{until}\"\n    reason: lab host, governor fixed by the next BIOS\n"),
        )
        .expect("write");
        let out = run(&[
            "check",
            "--root",
            rs,
            "--profile",
            p.to_str().expect("utf8"),
            "--format",
            "json",
            "cpu.governor",
        ]);
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(statuses(&r, "cpu.governor"), [want], "until {until}");
    }
}

#[test]
fn level2_adds_a_result_per_data_path() {
    // SAFETY-free: namespaces need root; the level-2 run uses loopback otherwise.
    let tmp = tempfile::tempdir().expect("tmp");
    let junit = tmp.path().join("q.xml");
    let json = tmp.path().join("q.json");
    // Level 2 runs the DPDK engine, which may reserve 2 MB pages: one at a time with the
    // other tests of this tree that do (daqtune-dpdk's veth acceptance, apply_live).
    let _lock = daqtune_probe::fsutil::lock_exclusive(std::path::Path::new(
        "/run/lock/daqtune-tests-hugepages.lock",
    ))
    .expect("hugepage test lock");
    // UDP loss is a figure, not a verdict, here: on a loaded machine a starved receiver drops
    // datagrams; integrity decides.
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
        "--level",
        "2",
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
    let results = q["selftest"].as_array().expect("selftest");
    let engines: Vec<&str> = results
        .iter()
        .filter_map(|r| r["engine"].as_str())
        .collect();
    assert!(engines.contains(&"socket"), "{engines:?}");
    assert!(engines.contains(&"dpdk"), "{engines:?}");
    for r in results.iter().filter(|r| r["engine"] == "socket") {
        assert_eq!(r["integrity_errors"], 0, "{r}");
        assert!(
            matches!(r["status"].as_str(), Some("pass") | Some("warn")),
            "{r}"
        );
    }
    let cases = junit_cases(&junit);
    let st: Vec<_> = cases
        .iter()
        .filter(|(c, _, _)| c == "daqtune.selftest")
        .collect();
    assert_eq!(st.len(), results.len());
    let stage_names: Vec<&str> = q["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(
        stage_names,
        [
            "checks",
            "selftest socket",
            "selftest dpdk",
            "selftest rdma"
        ]
    );
    assert!(engines.contains(&"rdma"), "{engines:?}");
    // Without named RDMA devices the RDMA run is a skip with its reason, never an error.
    for r in results.iter().filter(|r| r["engine"] != "socket") {
        assert_ne!(r["status"], "error", "{r}");
    }
}
