//! Issue 24: each units renderer is called from one engine place, the tunable that owns the
//! file it renders (`generate`, `daqtune.artifacts` and revert take the text from the plan,
//! never render it again). A second caller is the duplication that issue removed.
//!
//! The list is by hand: the units crate also has parsers (`grub::analyze`, `etc::sysctl_overrides`)
//! that several checks call on purpose; a new renderer must be added here.

use std::path::{Path, PathBuf};

use crate::common::source;

/// Every function of `daqtune-units` that renders a file daqtune writes.
const RENDERERS: &[&str] = &[
    "etc::modules_load",
    "etc::sysctl_conf",
    "network::netplan_with_addresses",
    "network::nm_keyfile_ipv4",
    "network::networkd_link",
    "systemd::hugetlbfs_mount",
    "systemd::governor_unit",
    "systemd::gpu_clocks_unit",
    "systemd::acs_unit",
    "udev::mrrs_rule",
    "grub::render_dropin",
];

/// The files whose code (test modules and comments left out: `source::code`) calls `renderer`.
fn callers(files: &[(PathBuf, String)], renderer: &str) -> Vec<String> {
    let call = format!("{renderer}(");
    files
        .iter()
        .filter(|(_, text)| source::code(text).contains(&call))
        .map(|(p, _)| p.display().to_string())
        .collect()
}

#[test]
fn each_renderer_is_called_from_one_engine_place() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files: Vec<(PathBuf, String)> = source::rust_files(&src, false)
        .into_iter()
        .map(|p| {
            let t = std::fs::read_to_string(&p).expect("read source");
            (p, t)
        })
        .collect();
    let units = Path::new(env!("CARGO_MANIFEST_DIR")).join("../units/src");
    let mut bad = Vec::new();
    for r in RENDERERS {
        // The list stays true to the units crate: a renamed renderer fails here, not silently.
        let (module, name) = r.split_once("::").expect("module::name");
        let unit_src =
            std::fs::read_to_string(units.join(format!("{module}.rs"))).expect("units source");
        assert!(
            unit_src.contains(&format!("pub fn {name}("))
                || unit_src.contains(&format!("pub fn {name}<")),
            "{r} is not a function of daqtune-units any more: update RENDERERS"
        );
        let c = callers(&files, r);
        if c.len() != 1 {
            bad.push(format!("{r}: called from {} files: {c:?}", c.len()));
        }
    }
    assert!(
        bad.is_empty(),
        "renderers not called from exactly one engine place:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_scan_sees_a_second_caller_and_not_tests_or_comments() {
    let files = vec![
        (PathBuf::from("a.rs"), "let t = etc::sysctl_conf(&v, p);".to_string()),
        (
            PathBuf::from("b.rs"),
            "#[cfg(test)]\nfn helper() {}\nfn f() {\n    x(etc::sysctl_conf(&w, p))\n}".to_string(),
        ),
        (
            PathBuf::from("c.rs"),
            "// etc::sysctl_conf(&w, p)\nfn f() {}\n#[cfg(test)]\nmod tests {\n    fn t() { etc::sysctl_conf(&w, p); }\n}\n"
                .to_string(),
        ),
    ];
    assert_eq!(callers(&files, "etc::sysctl_conf"), vec!["a.rs", "b.rs"]);
}
