//! Helpers shared by the engine tests that judge fixture roots: the report `daqtune check
//! --format json` prints, made by the same engine calls (no binary).
#![allow(dead_code)]

use daqtune_engine::appconfig::AppConfig;
use daqtune_engine::gate::{self, FailOn};
use daqtune_engine::{commands, hostroot, report};
use std::path::Path;

pub mod agree;
pub mod drive;
pub mod source;
#[path = "../../../src/cmd/apply/testroot.rs"]
pub mod testroot;

#[path = "../../../../tests/support/report_json.rs"]
mod report_json;
#[allow(unused_imports)]
pub use report_json::*;

pub use daqtune_testkit::fixture;

/// The JSON report of `daqtune check --root ROOT --profile PROFILE --format json IDS...`
/// (every check when `ids` is empty), and the exit code its gate gives.
pub fn evaluate(root: &Path, profile: &str, ids: &[&str]) -> (serde_json::Value, u8) {
    evaluate_app(root, profile, None, ids)
}

/// `evaluate` with `--config CFG` (a DAQIRI configuration) when `cfg` is given.
pub fn evaluate_app(
    root: &Path,
    profile: &str,
    cfg: Option<&Path>,
    ids: &[&str],
) -> (serde_json::Value, u8) {
    let host = hostroot::open_root(Some(root)).expect("root");
    let lp = commands::load_profile(profile).expect("profile");
    let app = cfg.map(|c| AppConfig::load(c).expect("config"));
    let only = ids.iter().map(|s| s.to_string()).collect();
    let rep = commands::evaluate_with_app(&host, &lp, only, false, app.as_ref());
    let code = gate::exit_code(&rep.checks, FailOn::Fail, false, &lp.profile);
    (
        serde_json::from_str(&report::json(&rep)).expect("json report"),
        code,
    )
}

pub fn check_json(fixture_name: &str, profile: &str) -> serde_json::Value {
    check_json_root(&fixture(fixture_name), profile)
}

pub fn check_json_root(root: &Path, profile: &str) -> serde_json::Value {
    let (rep, code) = evaluate(root, profile, &[]);
    assert!(matches!(code, 0 | 1), "exit {code}");
    rep
}

/// Copy a fixture tree, symlinks kept as links (sysfs relies on them).
pub use testroot::copy_tree;
