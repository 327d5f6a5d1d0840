//! `daqtune check --config APP.yaml` as a command: the `app.*` ids named on the command line,
//! and a configuration that does not parse (exit 2, its file:line). The checks' judgements are
//! tested through the engine's API in engine/tests/appconfig.rs.

use crate::common;

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

/// Issue 46: a misspelt key in a DAQIRI configuration (`log_levl:`, `adress:`) was ignored
/// silently, as DAQIRI itself ignores it (the engine then runs at its default log level, and
/// an interface without `address` fails at start). Each is a warning with file:line and the
/// key DAQIRI reads there (include/daqiri/common.h's decoder).
#[test]
fn misspelt_config_keys_warn_with_line_and_nearest_key() {
    let dir = tempfile::tempdir().expect("tmp");
    let src = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/configs/raw_hds_igx.yaml"),
    )
    .expect("config");
    let text = src
        .replace("    log_level: \"info\"", "    log_levl: \"info\"")
        .replacen(
            "      address: 0005:03:00.0",
            "      adress: 0005:03:00.0",
            1,
        );
    assert_ne!(text, src);
    let cfg = dir.path().join("app.yaml");
    std::fs::write(&cfg, &text).expect("write");
    let line_of = |needle: &str| {
        text.lines()
            .position(|l| l.trim_start().starts_with(needle))
            .expect("line")
            + 1
    };
    let root = fixture("igx-tuned");
    let out = run(&[
        "check",
        "app.config",
        "--root",
        root.to_str().expect("utf8"),
        "--profile",
        "igx-orin",
        "--config",
        cfg.to_str().expect("utf8"),
        "--format",
        "json",
    ]);
    let rep: Value = serde_json::from_slice(&out.stdout).expect("json");
    let vs = verdicts(&rep, "app.config");
    let warned = |key: &str, near: &str, line: usize| {
        vs.iter().any(|v| {
            status(v) == "warn"
                && msg(v).contains(&format!("unknown key `{key}`"))
                && msg(v).contains(&format!("did you mean `{near}`?"))
                && v["subject"]
                    .as_str()
                    .is_some_and(|s| s.contains(&format!("app.yaml:{line}")))
        })
    };
    assert!(
        warned("log_levl", "log_level", line_of("log_levl:")),
        "{vs:#?}"
    );
    assert!(warned("adress", "address", line_of("adress:")), "{vs:#?}");
    // The keys DAQIRI reads draw no warning.
    let clean = dir.path().join("clean.yaml");
    std::fs::write(&clean, &src).expect("write");
    let out = run(&[
        "check",
        "app.config",
        "--root",
        root.to_str().expect("utf8"),
        "--profile",
        "igx-orin",
        "--config",
        clean.to_str().expect("utf8"),
        "--format",
        "json",
    ]);
    let rep: Value = serde_json::from_slice(&out.stdout).expect("json");
    let vs = verdicts(&rep, "app.config");
    assert!(
        vs.iter().all(|v| !msg(v).contains("unknown key")),
        "{vs:#?}"
    );
}
