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
    // engine/src holds the layer folders only (docs/architecture.md): a new module goes into
    // the folder of its layer, not beside them.
    let folders: Vec<&str> = t.keys().map(String::as_str).collect();
    assert_eq!(
        folders,
        ["check", "cmd", "exec", "fleet", "hostio", "hostroot", "model", "tunables"],
        "top-level modules of engine/src"
    );
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
        "model",
        "model::verdict",
        "model::causes",
        "model::profile",
        "model::profile::merge",
        "model::profile::validate",
        "model::profile::keys",
        "model::cores",
        "model::appconfig",
        "model::appconfig::locate",
        "model::appconfig::netaddr",
        "model::appconfig::estimate",
        "model::appconfig::parse",
        "model::suggest",
        "hostio",
        "hostio::setters",
        "hostio::journal",
        "hostio::gpu",
        "hostio::lock",
        "hostio::parts",
        "cmd::apply::testroot",
        "fleet::output",
    ],
    &["model::facts", "model::capture", "model::known_states"],
    &[
        "model::context",
        "model::context::nics",
        "model::context::gpus",
        "model::context::boot",
        "model::context::artifacts",
        "model::context::irqbalance",
        "model::context::trial",
        "model::plan",
        "model::tunable",
        "model::gate",
    ],
    &["tunables::*"],
    &[
        "tunables",
        "check",
        "check::run_info",
        "check::report",
        "cmd::diff",
        "fleet::plan_json",
    ],
    &[
        "exec",
        "exec::apply",
        "exec::revert",
        "exec::port_reset",
        "exec::trial",
        "cmd::apply::events",
        "check::commands",
        "fleet",
        "fleet::prometheus",
        "fleet::nfd",
    ],
    &[
        "hostroot::snapshot",
        "hostroot::import",
        "hostroot::snapshot::archive",
        "hostroot::snapshot::redact",
        "hostroot::snapshot::tempdir",
        "cmd::topo",
    ],
    &["hostroot"],
    &[
        "cmd",
        "cmd::apply",
        "cmd::qualify",
        "fleet::report_cmd",
        "cmd::status",
        "cmd::gpu_view",
        "cmd::nic_view",
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

/// Where a non-test source of a crate other than probe reads a `/sys/` or `/proc/` path
/// itself (`std::fs` reads, `File::open`, `read_dir`, `Path::new(..)`), as `file:line: call`.
/// The path counts when the call's first argument begins with that literal, directly or
/// through `format!`. Namespace handles (`/proc/*/ns/net`) are opened, not read: they are
/// allowed (docs/architecture.md says why).
fn direct_host_reads(code: &str) -> Vec<(usize, String)> {
    // `fs::read` covers read, read_to_string, read_dir and read_link; a method of probe's
    // `Host` (`host.read_dir(..)`) is no `fs::` call.
    const CALLS: [&str; 6] = [
        "fs::read",
        "fs::metadata(",
        "fs::symlink_metadata(",
        "fs::canonicalize(",
        "File::open(",
        "Path::new(",
    ];
    // Constants naming a kernel path (`const POOL: &str = "/sys/kernel/mm/..."`): a read of
    // `POOL`, `&POOL` or `format!("{POOL}/nr_hugepages")` is as direct as the literal.
    let host_consts: Vec<&str> = code
        .match_indices("const ")
        .filter_map(|(at, _)| {
            let decl = code[at + 6..].split(';').next()?;
            let (name, value) = decl.split_once(':')?;
            let value = value.split_once('=')?.1.trim();
            (value.starts_with("\"/sys/") || value.starts_with("\"/proc/")).then(|| name.trim())
        })
        .collect();
    let names_const = |arg: &str| {
        host_consts.iter().any(|c| {
            let bare = arg
                .strip_prefix(c)
                .is_some_and(|r| !r.starts_with(|ch: char| ch.is_alphanumeric() || ch == '_'));
            bare || arg.starts_with(&format!("\"{{{c}}}"))
        })
    };
    let mut out = Vec::new();
    for call in CALLS {
        for (at, _) in code.match_indices(call) {
            // Only the call's own opening: up to its first `)`, over rustfmt's line breaks.
            let rest = &code[at + call.len()..];
            let arg: String = rest
                .chars()
                .take_while(|c| *c != ')' && *c != ';')
                .filter(|c| !c.is_whitespace())
                .collect();
            // After the call's `(` (`fs::read` stops inside the name: `_to_string(`).
            let Some(open) = arg
                .find('(')
                .filter(|_| !call.ends_with('('))
                .map(|i| i + 1)
                .or(call.ends_with('(').then_some(0))
            else {
                continue;
            };
            let arg = arg[open..]
                .trim_start_matches('&')
                .trim_start_matches("format!(");
            let names_host =
                arg.starts_with("\"/sys/") || arg.starts_with("\"/proc/") || names_const(arg);
            if names_host && !arg.contains("/ns/net\"") {
                let line = code[..at].matches('\n').count() + 1;
                out.push((line, format!("{call}{arg}")));
            }
        }
    }
    out
}

#[test]
fn direct_host_reads_sees_the_shapes_rustfmt_leaves() {
    let src = "let a = std::fs::read_to_string(\"/proc/net/dev\");\n\
               let b = fs::read_dir(format!(\"/sys/class/net/{n}\"));\n\
               let c = std::fs::read_to_string(\n    format!(\"/proc/{pid}/stat\"),\n);\n\
               let d = Path::new(&format!(\"/proc/{p}\")).exists();\n\
               let e = NetNs::open(Path::new(\"/proc/1/ns/net\"));\n\
               let f = host.read_string(\"/proc/meminfo\");\n\
               let g = fs::read_to_string(&path);\n\
               const POOL: &str = \"/sys/kernel/mm/hugepages/hugepages-2048kB\";\n\
               let h = read_pool(Path::new(POOL));\n\
               let i = fs::read_to_string(format!(\"{POOL}/nr_hugepages\"));\n\
               let j = fs::read_to_string(&POOLS);\n";
    let mut lines: Vec<usize> = direct_host_reads(src).into_iter().map(|(l, _)| l).collect();
    lines.sort();
    // `&POOLS` (line 13) is another name, not the constant.
    assert_eq!(
        lines,
        vec![1, 2, 3, 6, 11, 12],
        "{:?}",
        direct_host_reads(src)
    );
}

/// Issue 44 item 2: probe is the one host-I/O layer. Every other crate reads kernel
/// interfaces through `probe::Host` (the live machine or a host root), so a host root can
/// stand in for the machine and the parsers are probe's, tested with captured text.
#[test]
fn only_probe_reads_sys_and_proc() {
    let ws = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(&ws)
        .expect("workspace")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").is_file() && p.join("src").is_dir())
        // probe is the layer; testkit is test support, never linked into a binary.
        .filter(|p| !p.ends_with("probe") && !p.ends_with("testkit"))
        .collect();
    crates.sort();
    assert!(
        crates.iter().any(|c| c.ends_with("selftest-dpdk")),
        "the workspace walk found {crates:?}"
    );
    let mut found = Vec::new();
    for c in &crates {
        for f in source::rust_files(&c.join("src"), false) {
            let text = code(&std::fs::read_to_string(&f).expect("source"));
            for (line, call) in direct_host_reads(&text) {
                let rel = f.strip_prefix(&ws).unwrap_or(&f).display().to_string();
                found.push(format!("{rel} (code line {line}): {call}"));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Issue 44 item 4: terminal text lives in daqtune-render. In the engine's non-test code,
/// `write!`, `print!` and standard output or error appear only where a machine format with a
/// schema is written, an error or data value is described, or the process ends
/// (docs/architecture.md, "Terminal text"); a command that writes words for a terminal again
/// fails here.
#[test]
fn the_engine_writes_no_terminal_text() {
    // The file, and why its writes are not terminal text.
    const ALLOWED: &[(&str, &str)] = &[
        (
            "check/report.rs",
            "JUnit, and profile-keys markdown for the docs",
        ),
        ("cmd/qualify.rs", "JUnit"),
        (
            "cmd/topo.rs",
            "the SVG drawing; a port bound's description (in its JSON too)",
        ),
        ("cmd/gpu_view.rs", "a clock fact's value (in its JSON too)"),
        ("fleet/prometheus.rs", "the node_exporter textfile"),
        ("fleet/nfd.rs", "the NFD feature file"),
        ("model/appconfig/mod.rs", "an error's Display"),
        (
            "hostroot/snapshot/tempdir.rs",
            "the last line before _exit on a signal",
        ),
    ];
    // The one file that may reach a stream itself; the other allowed files only fill a String
    // (a format file that printed would still fail here).
    const STREAMS: &str = "hostroot/snapshot/tempdir.rs";
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for f in source::rust_files(&src, false) {
        let rel = f.strip_prefix(&src).unwrap_or(&f).display().to_string();
        if rel == STREAMS {
            continue;
        }
        let into_strings = ALLOWED.iter().any(|(a, _)| *a == rel);
        let text = code(&std::fs::read_to_string(&f).expect("source"));
        for (n, line) in text.lines().enumerate() {
            let to_stream = ["print!(", "println!(", "stdout()", "stderr()"]
                .iter()
                .any(|w| line.contains(w));
            let to_string = ["write!(", "writeln!("].iter().any(|w| line.contains(w));
            let writes = to_stream || (to_string && !into_strings);
            // An error's Display writes its message: that is a value, not a layout.
            if writes && !line.contains("write!(f,") {
                found.push(format!(
                    "engine/src/{rel} (code line {}): {}",
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "terminal text in the engine (daqtune-render words it):\n{}",
        found.join("\n")
    );
}
