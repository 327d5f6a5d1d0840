//! Issue 24: each units renderer is called from one engine place, the tunable that owns the
//! file it renders (`generate`, `daqtune.artifacts` and revert take the text from the plan,
//! never render it again). A second caller is the duplication that issue removed.

use std::path::{Path, PathBuf};

/// Every function of `daqtune-units` that renders a file daqtune writes.
const RENDERERS: &[&str] = &[
    "etc::modules_load",
    "etc::sysctl_conf",
    "network::netplan",
    "network::nm_keyfile",
    "network::networkd_link",
    "systemd::hugetlbfs_mount",
    "systemd::governor_unit",
    "systemd::gpu_clocks_unit",
    "systemd::acs_unit",
    "udev::mrrs_rule",
    "grub::render_dropin",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            // `mod tests` directories and files are the renderers' tests, not callers.
            if p.file_name().is_some_and(|n| n != "tests") {
                sources(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs")
            && p.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(p);
        }
    }
}

/// The engine's source files that call `module::name(`, outside any `#[cfg(test)]` module.
fn callers(files: &[(PathBuf, String)], renderer: &str) -> Vec<String> {
    let call = format!("{renderer}(");
    files
        .iter()
        .filter(|(_, text)| {
            let code = text.split("#[cfg(test)]").next().unwrap_or(text);
            code.contains(&call)
        })
        .map(|(p, _)| p.display().to_string())
        .collect()
}

#[test]
fn each_renderer_is_called_from_one_engine_place() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    sources(&src, &mut paths);
    let files: Vec<(PathBuf, String)> = paths
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
fn the_scan_sees_a_second_caller() {
    let files = vec![
        (
            PathBuf::from("a.rs"),
            "let t = etc::sysctl_conf(&v, p);".to_string(),
        ),
        (
            PathBuf::from("b.rs"),
            "x(etc::sysctl_conf(&w, p))".to_string(),
        ),
        (
            PathBuf::from("c.rs"),
            "fn f() {}\n#[cfg(test)]\nmod tests { etc::sysctl_conf(&w, p); }".to_string(),
        ),
    ];
    assert_eq!(callers(&files, "etc::sysctl_conf"), vec!["a.rs", "b.rs"]);
}
