//! `daqtune check --config APP.yaml` as a command: the `app.*` ids named on the command line,
//! and a configuration that does not parse (exit 2, its file:line). The checks' judgements are
//! tested through the engine's API in engine/tests/appconfig.rs.

mod common;

use common::{fixture, msg, run, status, verdicts};
use serde_json::Value;

#[test]
fn without_config_the_app_checks_stay_out_of_the_report_unless_named() {
    let root = fixture("igx-tuned");
    let root = root.to_str().expect("utf8");
    let out = run(&[
        "check",
        "--root",
        root,
        "--profile",
        "igx-orin",
        "--format",
        "json",
    ]);
    let rep: Value = serde_json::from_slice(&out.stdout).expect("json");
    let ids = [
        "app.config",
        "app.cores",
        "app.memory",
        "app.interfaces",
        "app.sizes",
    ];
    for id in ids {
        assert!(
            verdicts(&rep, id).is_empty(),
            "{id} reported without --config"
        );
    }
    // Named explicitly, they say why they have nothing to judge.
    let mut args = vec![
        "check",
        "--root",
        root,
        "--profile",
        "igx-orin",
        "--format",
        "json",
    ];
    args.extend(ids);
    let out = run(&args);
    let rep: Value = serde_json::from_slice(&out.stdout).expect("json");
    for id in ids {
        let vs = verdicts(&rep, id);
        assert_eq!(vs.len(), 1, "{id}");
        assert_eq!(status(vs[0]), "n/a", "{id}");
        assert!(msg(vs[0]).contains("no --config given"), "{id}");
    }
}

#[test]
fn unreadable_config_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tmp");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "daqiri:\n  cfg:\n    interfaces: [unclosed\n").expect("write");
    let out = run(&[
        "check",
        "--root",
        fixture("igx-tuned").to_str().expect("utf8"),
        "--config",
        bad.to_str().expect("utf8"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:", bad.display())), "{err}");
    assert!(err.contains("not valid YAML"), "{err}");
    let out = run(&["check", "--config", "/nonexistent/app.yaml"]);
    assert_eq!(out.status.code(), Some(2));
}
