//! Issue 8: the qualification gate, its JUnit mapping, required checks and waivers.

use crate::common;
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

/// Issue 29: a CI profile for a veth pair (the checks a container cannot pass are n/a), with an
/// honest TCP reference: an unshaped veth pair on any machine this runs on carries several
/// times 0.5 Gb/s, and one shaped to 100 Mbit/s cannot reach 0.45 Gb/s (the 90 % floor).
fn veth_gate_profile(dir: &Path, name: &str, mtu: u32) -> std::path::PathBuf {
    let p = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &p,
        format!(
            "name: {name}\nextends: generic-dgpu\nnic:\n  mtu: {mtu}\nrequired: []\n\
             not_applicable:\n  kernel.cmdline: CI container, the data cores are not isolated\n  \
             hugepages: CI container, DPDK runs over af_packet\n\
             selftest:\n  max_udp_loss_pct: 100\n  floor: 0.9\n  reference:\n    - path: socket.tcp\n      \
             gbps: 0.5\n      source: \"CI: an unshaped veth pair carries several times this\"\n"
        ),
    )
    .expect("profile");
    p
}

/// `qualify --level 2` over the self-test's veth pair, given a link speed of 1000 Mb/s and,
/// when `shape_mbit` is set, a token-bucket filter at that rate (the test aids of
/// docs/selftest.md). Returns the exit code, the text, the JSON and the JUnit text.
fn qualify_veth(
    dir: &Path,
    profile: &Path,
    shape_mbit: Option<u32>,
) -> (Option<i32>, String, serde_json::Value, String) {
    let json = dir.join("q.json");
    let junit = dir.join("q.xml");
    let mut cmd = std::process::Command::new(bin());
    cmd.env("NO_COLOR", "1")
        .env("DAQTUNE_TEST_VETH_SPEED_MBPS", "1000")
        .env_remove("DAQTUNE_TEST_VETH_SHAPE_MBIT")
        .args(["--profile", profile.to_str().expect("utf8")])
        .args(["qualify", "--level", "2", "--selftest-duration", "2"])
        .args(["--json", json.to_str().expect("utf8")])
        .args(["--junit", junit.to_str().expect("utf8")]);
    if let Some(m) = shape_mbit {
        cmd.env("DAQTUNE_TEST_VETH_SHAPE_MBIT", m.to_string());
    }
    let out = cmd.output().expect("run daqtune");
    let q: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).expect("json"))
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        q,
        std::fs::read_to_string(&junit).expect("junit"),
    )
}

fn socket_result<'a>(q: &'a serde_json::Value, mode: &str) -> &'a serde_json::Value {
    q["selftest"]
        .as_array()
        .expect("selftest")
        .iter()
        .find(|r| r["engine"] == "socket" && r["mode"] == mode)
        .unwrap_or_else(|| panic!("no socket/{mode} result in {q}"))
}

#[test]
fn a_shaped_veth_fails_the_gate_with_its_shortfall_and_the_planted_cause_first() {
    if !daqtune_testkit::require_root_or_skip(
        "the veth pair, its namespaces and its qdisc (CAP_NET_ADMIN)",
    ) {
        return;
    }
    let _lock =
        daqtune_probe::fsutil::lock_exclusive(Path::new("/run/lock/daqtune-tests-hugepages.lock"))
            .expect("hugepage test lock");
    let tmp = tempfile::tempdir().expect("tmp");
    // The planted cause: the profile's MTU 1500 below the frame of an 8192-byte message.
    let profile = veth_gate_profile(tmp.path(), "ci-shaped", 1500);
    let (code, text, q, junit) = qualify_veth(tmp.path(), &profile, Some(100));
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(q["passed"], false);
    let tcp = socket_result(&q, "tcp");
    assert_eq!(tcp["status"], "fail", "{tcp}");
    let a = &tcp["reference"];
    assert_eq!(a["verdict"], "below", "{tcp}");
    assert_eq!(a["link_mbps"], 1000);
    assert_eq!(a["reference_gbps"], 0.5);
    // tbf at 100 Mbit/s: at most ~0.1 Gb/s of payload, so at least 0.35 Gb/s short of 0.45.
    let short = a["shortfall_gbps"].as_f64().expect("shortfall");
    assert!(short > 0.3, "{tcp}");
    assert!(a["of_line_pct"].as_f64().expect("line") < 15.0, "{tcp}");
    let causes = tcp["causes"].as_array().expect("causes");
    assert_eq!(causes[0]["id"], "nic.mtu", "{tcp}");
    assert_eq!(causes[0]["subject"], "self-test path", "{tcp}");
    assert_eq!(causes[0]["rank"], 1);
    // A veth pair never crosses the NIC's PCIe path: nothing of it is blamed.
    assert!(
        causes
            .iter()
            .all(|c| !c["id"].as_str().unwrap_or("").starts_with("pcie.")),
        "{tcp}"
    );
    assert!(
        text.contains("below the floor of 90 % = 0.45 Gb/s by"),
        "{text}"
    );
    assert!(text.contains("likely causes, most likely first:"), "{text}");
    assert!(text.contains("1. nic.mtu (self-test path)"), "{text}");
    // JUnit: the failure message carries the shortfall and the ranked causes.
    let doc = roxmltree::Document::parse(&junit).expect("xml");
    let failure = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .find(|n| n.attribute("name") == Some("socket tcp"))
        .and_then(|n| n.children().find(|c| c.has_tag_name("failure")))
        .expect("socket tcp failure");
    let msg = failure.attribute("message").expect("message");
    assert!(msg.contains("below the floor"), "{msg}");
    assert!(
        msg.contains("likely causes, most likely first: 1. nic.mtu (self-test path)"),
        "{msg}"
    );
}

#[test]
fn an_unshaped_veth_with_an_honest_reference_passes_the_self_test() {
    if !daqtune_testkit::require_root_or_skip("the veth pair and its namespaces (CAP_NET_ADMIN)") {
        return;
    }
    let _lock =
        daqtune_probe::fsutil::lock_exclusive(Path::new("/run/lock/daqtune-tests-hugepages.lock"))
            .expect("hugepage test lock");
    let tmp = tempfile::tempdir().expect("tmp");
    let profile = veth_gate_profile(tmp.path(), "ci-honest", 9000);
    let (code, text, q, _) = qualify_veth(tmp.path(), &profile, None);
    let tcp = socket_result(&q, "tcp");
    assert_eq!(tcp["status"], "pass", "{tcp}");
    assert_eq!(tcp["reference"]["verdict"], "met", "{tcp}");
    assert!(tcp.get("causes").is_none(), "{tcp}");
    // UDP has no reference in this profile: said, never a silent pass.
    let udp = socket_result(&q, "udp");
    assert_eq!(udp["reference"]["verdict"], "none", "{udp}");
    assert!(
        udp["reference"]["why"]
            .as_str()
            .unwrap_or("")
            .contains("no reference: the profile has none for socket.udp"),
        "{udp}"
    );
    // Paced at the declared link's payload rate at MTU 9000, not at 1 Gb/s by default.
    let rate = udp["rate_gbps"].as_f64().unwrap_or(0.0);
    assert!((rate - 1.0 * 8192.0 / 8258.0).abs() < 1e-6, "{udp}");
    let stages = q["stages"].as_array().expect("stages");
    let socket = stages
        .iter()
        .find(|s| s["name"] == "selftest socket")
        .expect("socket stage");
    assert_eq!(socket["status"], "pass", "{text}");
    assert!(
        socket["detail"]
            .as_str()
            .unwrap_or("")
            .contains("% of reference"),
        "{socket}"
    );
    // The gate's verdict is the stages': this host's checks decide the rest.
    let any_failed = stages
        .iter()
        .any(|s| matches!(s["status"].as_str(), Some("fail") | Some("error")));
    assert_eq!(code, Some(i32::from(any_failed)), "{text}");
}

#[test]
fn report_files_named_without_a_directory_are_written() {
    // `--junit q.xml` has the empty parent; the atomic write syncs "." instead of failing
    // after the rename (it exited 2 with the file in place).
    let tmp = tempfile::tempdir().expect("tmp");
    let root = fixture("igx-untuned");
    let out = std::process::Command::new(bin())
        .current_dir(tmp.path())
        .env("NO_COLOR", "1")
        .args(["qualify", "--root", root.to_str().expect("utf8")])
        .args([
            "--profile",
            "igx-orin",
            "--junit",
            "q.xml",
            "--json",
            "q.json",
        ])
        .output()
        .expect("run daqtune");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tmp.path().join("q.xml").is_file());
    assert!(tmp.path().join("q.json").is_file());
}
