//! The commands `plan`, `apply`, `revert` and `generate` through the engine's API, as the
//! binary calls them (no terminal: `apply` and `revert` run with `yes`), for the tests of
//! engine behaviour on copies of the fixture roots. What the binary adds (exit code 2 for a
//! `UsageError`, the prompt, standard output as the coreutils treat it) is tested in
//! tune/tests.
#![allow(dead_code)]

use daqtune_engine::apply::{
    run_apply_with, run_generate, run_plan, run_revert_with, ApplyOptions, GenerateOptions, Kind,
    RevertOptions, Selection,
};
use daqtune_engine::hostio::setters::{FsWriter, Writer};
use daqtune_engine::{GlobalOptions, UsageError};
use daqtune_render::apply::Text;
use std::path::Path;

pub fn globals(root: &Path, profile: &str) -> GlobalOptions {
    GlobalOptions {
        root: Some(root.to_path_buf()),
        profile: Some(profile.into()),
        ..Default::default()
    }
}

/// A selection of these ids (`--only A --only B`).
pub fn only(ids: &[&str]) -> Selection {
    Selection {
        only: ids.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn text(out: &[u8], err: &[u8]) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(out),
        String::from_utf8_lossy(err)
    )
}

/// `daqtune plan --root ROOT --profile PROFILE`: what it prints, or the usage error the
/// binary turns into exit 2.
pub fn try_plan(root: &Path, profile: &str, sel: &Selection) -> Result<String, UsageError> {
    let mut out = Vec::new();
    run_plan(
        &globals(root, profile),
        sel,
        &mut Text::new(&mut out, &mut std::io::sink()),
    )?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

pub fn plan(root: &Path, profile: &str, sel: &Selection) -> String {
    try_plan(root, profile, sel).unwrap_or_else(|e| panic!("plan: {e}"))
}

/// `daqtune apply` with these options through the writer `w`: its exit code and what it
/// printed (standard output, then standard error), or the usage error (exit 2).
pub fn try_apply_with(
    g: &GlobalOptions,
    a: &ApplyOptions,
    w: &mut dyn Writer,
) -> Result<(u8, String), UsageError> {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run_apply_with(g, a, w, &mut Text::new(&mut out, &mut err))?;
    Ok((code, text(&out, &err)))
}

/// `daqtune apply --yes` with the selection `sel`.
pub fn try_apply(root: &Path, profile: &str, sel: &Selection) -> Result<(u8, String), UsageError> {
    let a = ApplyOptions {
        sel: sel.clone(),
        yes: true,
        ..Default::default()
    };
    try_apply_with(&globals(root, profile), &a, &mut FsWriter::new())
}

pub fn apply(root: &Path, profile: &str, sel: &Selection) -> (u8, String) {
    try_apply(root, profile, sel).unwrap_or_else(|e| panic!("apply: {e}"))
}

/// `daqtune revert --yes` through the writer `w`.
pub fn revert_with(root: &Path, w: &mut dyn Writer) -> (u8, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let g = GlobalOptions {
        root: Some(root.to_path_buf()),
        ..Default::default()
    };
    let a = RevertOptions {
        yes: true,
        state_dir: None,
    };
    let code = run_revert_with(&g, &a, w, &mut Text::new(&mut out, &mut err))
        .unwrap_or_else(|e| panic!("revert: {e}"));
    (code, text(&out, &err))
}

pub fn revert(root: &Path) -> (u8, String) {
    revert_with(root, &mut FsWriter::new())
}

/// The options of `daqtune generate KIND` with no override.
pub fn kind(name: &str) -> GenerateOptions {
    GenerateOptions {
        kind: Kind::from_name(name).unwrap_or_else(|| panic!("no artifact kind {name}")),
        exe: None,
        interfaces: Vec::new(),
        devices: Vec::new(),
    }
}

/// `daqtune generate KIND --root ROOT --profile PROFILE` with the options `a`: what it
/// prints, or the usage error (exit 2).
pub fn try_generate_with(
    root: &Path,
    profile: &str,
    a: &GenerateOptions,
) -> Result<String, UsageError> {
    let mut out = Vec::new();
    run_generate(
        &globals(root, profile),
        a,
        &mut Text::new(&mut out, &mut std::io::sink()),
    )?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

pub fn try_generate(root: &Path, profile: &str, name: &str) -> Result<String, UsageError> {
    try_generate_with(root, profile, &kind(name))
}

pub fn generate(root: &Path, profile: &str, name: &str) -> String {
    try_generate(root, profile, name).unwrap_or_else(|e| panic!("generate {name}: {e}"))
}

/// A copy of a fixture root with its ConnectX PFs (and GPU) in sysfs, unless the fixture
/// already has a PCI tree, and an installed daqtune for the units and rules to run.
pub fn prepared(name: &str, add_pci: fn(&Path)) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    super::copy_tree(&super::fixture(name), d.path());
    if !d.path().join("sys/bus/pci/devices").exists() {
        add_pci(d.path());
    }
    super::testroot::install_daqtune(d.path());
    d
}

/// A file of the root as text.
pub fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The root's files byte for byte without daqtune's state (`var/`: the journal stays after
/// revert), to compare a root before apply with the same root after revert.
pub fn host_files(root: &Path) -> std::collections::BTreeMap<String, String> {
    super::testroot::snapshot(root, &[])
        .into_iter()
        .filter(|(k, _)| !(k == "var" || k.starts_with("var/")))
        .collect()
}

/// `revert` exits 0 and leaves every file of the root as it was in `before` (a snapshot taken
/// before apply; daqtune's state under `var/` aside: the journal stays).
pub fn assert_reverted(root: &Path, before: &std::collections::BTreeMap<String, String>) {
    let (code, out) = revert(root);
    assert_eq!(code, 0, "revert: {out}");
    let d = super::testroot::diff_snapshots(before, &host_files(root));
    assert!(d.is_empty(), "revert left differences: {d:#?}");
}

/// A file of the root written as text, its directories made.
pub fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

/// `plan --only IDS...` through the engine's `plan_on` on the root as a host: its text, after
/// asserting it exited 0.
pub fn plan_only(root: &Path, profile: &str, only: &[&str]) -> String {
    let host = daqtune_probe::Host::at(root).expect("root");
    let sel = Selection {
        only: only.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    let mut out = Vec::new();
    let code = daqtune_engine::apply::plan_on(
        &host,
        &globals(root, profile),
        &sel,
        &mut Text::new(&mut out, &mut std::io::sink()),
    );
    let text = String::from_utf8_lossy(&out).to_string();
    assert!(matches!(code, Ok(0)), "plan: {code:?}\n{text}");
    text
}

/// The verdicts of check `id` on the root with `profile`.
pub fn verdicts(root: &Path, profile: &str, id: &str) -> Vec<daqtune_engine::verdict::Verdict> {
    let lp = daqtune_engine::commands::load_profile(profile).expect("profile");
    let host = daqtune_probe::Host::at(root).expect("root");
    let facts = daqtune_engine::facts::Facts::new(&host);
    daqtune_engine::tunables::run_checks(
        &daqtune_engine::context::Context::with_facts(&facts, &lp),
        &daqtune_engine::tunables::RunOptions {
            only: vec![id.into()],
        },
    )
}
