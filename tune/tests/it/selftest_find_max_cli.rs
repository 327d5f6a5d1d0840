//! `--find-max` through the binary over loopback (no root needed): the search runs within its
//! `--max-trials`, every trial is in the JSON and in the text table, and requests it cannot
//! serve are refused with exit code 2 before any traffic.
//!
//! The searches are capped (12 and 10 trials): on a loaded machine loopback's loss curve is
//! noisy, confirmation rounds fail and lower the claim, and an uncapped search ran to its 40
//! trials (26 - 58 s a test, a core busy in the kernel; the same under qemu-user in the aarch64
//! pass). What is checked here is the search's report, whichever way it ended.

use crate::selftest_bin as bin;

#[test]
fn loopback_search_reports_every_trial_in_json_and_text() {
    let out = bin()
        .args([
            "socket",
            "--loopback",
            "--find-max",
            "--trial-duration",
            "0.2",
            "--precision",
            "10",
            "--loss",
            "0.5",
            "--message-size",
            "4096",
            "--max-trials",
            "12",
            "--format",
            "json",
            "--no-progress",
        ])
        .output()
        .expect("spawn");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {} {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let r = &v["results"][0];
    assert_eq!(r["mode"], "udp");
    let trials = r["trials"].as_array().expect("trials");
    assert_eq!(trials[0]["phase"], "probe");
    for t in trials {
        assert_eq!(t["integrity_errors"], 0);
        assert!(t["achieved_gbps"].as_f64().expect("achieved") >= 0.0);
    }
    assert_eq!(r["search"]["loss_allowed_pct"], 0.5);
    assert_eq!(r["search"]["precision_pct"], 10.0);
    assert_eq!(r["search"]["max_trials"], 12);
    assert!(trials.len() <= 12, "{} trials: {r}", trials.len());
    // Which outcome depends on how fast this machine moves loopback datagrams (under qemu-user
    // on a loaded 2-core machine every rate tried has lost some: seen 2026-11-27), so the test
    // checks each outcome's own report, not which one came.
    if let Some(found) = r["max_loss_free_gbps"].as_f64() {
        assert!(found > 0.0);
        assert!(trials.iter().any(|t| t["phase"] == "confirm"), "{r}");
        assert!(r["search"]["fraction_of_limit"].as_f64().expect("fraction") > 0.0);
        assert!(out.status.success(), "{r}");
    } else {
        assert_eq!(
            out.status.code(),
            Some(1),
            "no rate confirmed is a failure: {r}"
        );
        // The report says why, in the search's own words.
        let ended = r["search"]["ended"].as_str().expect("ended");
        assert!(!ended.is_empty(), "{r}");
        let why = format!("no loss-free rate confirmed: {ended}");
        assert!(
            r["notes"]
                .as_array()
                .expect("notes")
                .iter()
                .any(|n| n.as_str() == Some(why.as_str())),
            "{r}"
        );
    }

    // The same kind of run as text: a table with one row per trial.
    let out = bin()
        .args([
            "socket",
            "--loopback",
            "--find-max",
            "--trial-duration",
            "0.2",
            "--precision",
            "20",
            "--max-trials",
            "10",
            "--no-progress",
        ])
        .output()
        .expect("spawn");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("max loss-free:"), "{text}");
    assert!(text.contains("phase"), "{text}");
    assert!(text.contains("probe"), "{text}");
    assert!(text.contains("confirm"), "{text}");
    assert!(text.contains("search: loss <= 0 %"), "{text}");
    assert!(text.contains(", at most 10 trials;"), "{text}");
}

#[test]
fn requests_a_search_cannot_serve_are_refused() {
    for args in [
        vec!["socket", "--loopback", "--find-max", "--mode", "tcp"],
        vec!["socket", "--peer", "198.18.0.2", "--find-max"],
        vec!["socket", "--loopback", "--find-max", "--precision", "0"],
        vec!["socket", "--loopback", "--find-max", "--loss", "100"],
        // Room for the probe, a bisection step and the five confirmations; at most 200.
        vec!["socket", "--loopback", "--find-max", "--max-trials", "6"],
        vec!["socket", "--loopback", "--find-max", "--max-trials", "201"],
        vec!["socket", "--loopback", "--max-trials", "12"],
        vec![
            "socket",
            "--loopback",
            "--find-max",
            "--trial-duration",
            "0",
        ],
        // clap: --loss belongs to --find-max; --rate is what the search sets.
        vec!["socket", "--loopback", "--loss", "1"],
        vec!["socket", "--loopback", "--find-max", "--rate", "1"],
        // Planted corruption would fail every trial.
        vec![
            "socket",
            "--loopback",
            "--find-max",
            "--inject-corruption",
            "3",
        ],
    ] {
        let out = bin().args(&args).output().expect("spawn");
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty() || !String::from_utf8_lossy(&out.stdout).contains("trials"));
    }
}
