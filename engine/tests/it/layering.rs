//! The engine's modules import each other without a circle, in the layers docs/architecture.md
//! draws: the writers and the journal (`hostio`) at the bottom, facts below the context, the
//! context below the tunables, the tunables below the executor (`exec`), the commands
//! (`apply`, `qualify`, `fleet::report_cmd`) on top; and the top-level modules, each taken
//! whole, without a circle either. Read from the sources: every `crate::a::b` and `super::`
//! path outside test modules is an edge to the module it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::common::source;
use source::code;

/// Module path (`tunables::mrrs`) of a source file under engine/src.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
        parts.pop();
    }
    parts.join("::")
}

/// The longest known module a path names (`crate::tunables::acs::acs_ports` -> `tunables::acs`).
fn resolve(path: &[&str], modules: &BTreeSet<String>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| modules.contains(m))
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = source::rust_files(&src, false);
    let modules: BTreeSet<String> = files
        .iter()
        .map(|f| module_of(&src, f))
        .filter(|m| !m.is_empty())
        .collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let me = module_of(&src, f);
        if me.is_empty() {
            continue;
        }
        let is_mod_rs = f.file_name().is_some_and(|n| n == "mod.rs");
        // `super` of a mod.rs is its parent's parent.
        let mut parent: Vec<&str> = me.split("::").collect();
        parent.pop();
        let text = code(&std::fs::read_to_string(f).expect("source"));
        let edges = g.entry(me.clone()).or_default();
        let words: Vec<String> = text
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .filter(|w| w.starts_with("crate::") || w.starts_with("super::"))
            .map(String::from)
            .collect();
        for w in words {
            let segs: Vec<&str> = w.split("::").filter(|s| !s.is_empty()).collect();
            let full: Vec<&str> = if segs[0] == "crate" {
                segs[1..].to_vec()
            } else {
                let mut base: Vec<&str> = if is_mod_rs {
                    me.split("::").collect()
                } else {
                    parent.clone()
                };
                if is_mod_rs {
                    base.pop();
                }
                base.extend(segs[1..].iter().copied());
                base
            };
            if let Some(target) = resolve(&full, &modules) {
                if target != me {
                    edges.insert(target);
                }
            }
        }
    }
    g
}

/// A circle of imports in `g`, if there is one (depth-first search for a back edge).
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == m).unwrap_or(0);
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(m, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            let mut stack = Vec::new();
            if let Some(c) = visit(n, g, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn engine_modules_import_no_circle() {
    let g = graph();
    assert!(g.len() > 30, "modules found: {:?}", g.keys());
    if let Some(c) = find_cycle(&g) {
        panic!("import circle: {}", c.join(" -> "));
    }
}

/// The graph of the engine's top-level modules (`tunables::mrrs -> plan` counts as
/// `tunables -> plan`; edges inside one top-level module are dropped).
fn top_level_graph() -> BTreeMap<String, BTreeSet<String>> {
    let top = |m: &str| m.split("::").next().unwrap_or(m).to_string();
    let mut t: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, deps) in graph() {
        let tm = top(&m);
        let edges = t.entry(tm.clone()).or_default();
        for d in deps {
            let td = top(&d);
            if td != tm {
                edges.insert(td);
            }
        }
    }
    t
}

/// A circle among submodules can hide inside a directory: `apply` held the writers every
/// planner uses and the commands that use every planner, so 12 top-level modules formed one
/// circle while each file's imports ran downwards. Reading the engine top to bottom needs the
/// top-level modules to be layered too.
#[test]
fn engine_top_level_modules_import_no_circle() {
    let t = top_level_graph();
    assert!(t.len() > 15, "top-level modules found: {:?}", t.keys());
    if let Some(c) = find_cycle(&t) {
        panic!("import circle among top-level modules: {}", c.join(" -> "));
    }
}

/// The circle finder finds a circle (the tests above would pass vacuously otherwise).
#[test]
fn find_cycle_sees_a_circle() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(
        find_cycle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    g.get_mut("c").expect("c").clear();
    assert_eq!(find_cycle(&g), None);
}

/// The layers of docs/architecture.md, lowest first: a module may use its own layer and those
/// below, never one above.
const LAYERS: &[&[&str]] = &[
    &[
        "verdict",
        "causes",
        "profile",
        "profile::merge",
        "profile::validate",
        "profile::keys",
        "cores",
        "appconfig",
        "appconfig::locate",
        "appconfig::netaddr",
        "appconfig::estimate",
        "appconfig::parse",
        "hostio",
        "hostio::setters",
        "hostio::journal",
        "hostio::gpu",
        "hostio::lock",
        "hostio::parts",
        "apply::testroot",
        "fleet::output",
        "suggest",
    ],
    &["facts", "capture", "known_states"],
    &[
        "context",
        "context::nics",
        "context::gpus",
        "context::boot",
        "context::artifacts",
        "context::irqbalance",
        "context::trial",
        "plan",
        "tunable",
    ],
    &["tunables::*", "app_profile"],
    &[
        "tunables",
        "gate",
        "run_info",
        "report",
        "diff",
        "fleet::plan_json",
    ],
    &[
        "exec",
        "exec::apply",
        "exec::revert",
        "exec::port_reset",
        "exec::trial",
        "commands",
        "fleet",
        "fleet::prometheus",
        "fleet::nfd",
    ],
    &[
        "snapshot",
        "import",
        "snapshot::archive",
        "snapshot::redact",
        "snapshot::tempdir",
        "topo",
    ],
    &["hostroot"],
    &[
        "apply",
        "qualify",
        "fleet::report_cmd",
        "status",
        "gpu_view",
        "nic_view",
    ],
];

fn layer_of(m: &str) -> Option<usize> {
    LAYERS.iter().position(|l| {
        l.iter().any(|p| match p.strip_suffix("::*") {
            Some(prefix) => m.starts_with(&format!("{prefix}::")),
            None => *p == m,
        })
    })
}

#[test]
fn engine_modules_keep_their_layers() {
    let g = graph();
    let mut wrong = Vec::new();
    for (m, deps) in &g {
        let Some(lm) = layer_of(m) else {
            wrong.push(format!(
                "{m} is in no layer (add it to LAYERS and the drawing)"
            ));
            continue;
        };
        for d in deps {
            if let Some(ld) = layer_of(d) {
                if ld > lm {
                    wrong.push(format!("{m} (layer {lm}) uses {d} (layer {ld})"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The dependency names a Cargo.toml lists, in any of its dependency tables (`clap.workspace =
/// true`, `clap = "4"`, `[dependencies.clap]`).
fn dependency_names(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let t = line.trim();
        if let Some(table) = t.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            let table = table.trim_matches(|c| c == '[' || c == ']');
            in_deps = table.ends_with("dependencies");
            if let Some((head, name)) = table.rsplit_once('.') {
                if head.ends_with("dependencies") {
                    names.push(name.to_string());
                    in_deps = false;
                }
            }
            continue;
        }
        if in_deps && !t.starts_with('#') {
            if let Some(key) = t.split(['=', '.', ' ']).next().filter(|k| !k.is_empty()) {
                names.push(key.trim_matches('"').to_string());
            }
        }
    }
    names
}

/// Issue 44: the libraries have no argument parser. The command line (flags, help, defaults)
/// is the `daqtune` crate's (tune/src/cli.rs for the engine's commands, tune/src/selftest_cli.rs
/// for the self-test), which converts it into the libraries' plain option structs.
#[test]
fn libraries_have_no_argument_parser() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut wrong = Vec::new();
    for krate in ["engine", "selftest"] {
        let manifest = root.join(krate).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).expect("read Cargo.toml");
        for name in dependency_names(&text) {
            if name.starts_with("clap") {
                wrong.push(format!("{} depends on {name}", manifest.display()));
            }
        }
        for file in source::rust_files(&root.join(krate).join("src"), true) {
            let text = std::fs::read_to_string(&file).expect("read source");
            for (n, line) in text.lines().enumerate() {
                let t = line.trim_start();
                if !t.starts_with("//") && t.contains("clap::") {
                    wrong.push(format!("{}:{}: {t}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn dependency_names_reads_every_spelling() {
    let m = "[package]\nname = \"x\"\n\n[dependencies]\nclap.workspace = true\nserde = \"1\"\n# clap = \"4\"\n\n[dev-dependencies]\n\"tempfile\" = \"3\"\n\n[target.'cfg(unix)'.dependencies.clap_derive]\nversion = \"4\"\n\n[lints]\nworkspace = true\n";
    assert_eq!(
        dependency_names(m),
        ["clap", "serde", "tempfile", "clap_derive"]
    );
}
