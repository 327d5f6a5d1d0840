//! Issue 42 deliverable 1: ownership per setting, not per file. Files that carry several
//! settings (the grub drop-in, extlinux's entry, a port's `.link` or NetworkManager keyfile)
//! are built from per-setting parts: `apply --only X` writes X's parts only, and `revert
//! --only X` / `revert --run N` undo exactly that, leaving every file byte for byte as it was.

mod common;
use common::drive::{globals, host_files, only, plan, prepared, read};
use common::testroot;

use daqtune_engine::apply::{
    run_apply_with, run_revert_part_with, ApplyOptions, RevertOptions, RevertPart,
};
use daqtune_engine::hostio::journal::{list_runs, Journal};
use daqtune_engine::hostio::setters::FsWriter;
use std::path::Path;
use testroot::*;

const JOURNAL: &str = "var/lib/daqtune/journal";

/// The fixture roots the sweep runs on, with the profile each is tuned for and how its PCI
/// tree is made.
const ROOTS: &[(&str, &str, fn(&Path))] = &[
    ("igx-untuned", "igx-orin", add_igx_pci),
    ("spark", "dgx-spark", add_spark_pci),
    ("x86-2s", "generic-dgpu", |_| {}),
];

fn apply_only(root: &Path, profile: &str, ids: &[&str]) -> (u8, String) {
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let a = ApplyOptions {
        sel: only(ids),
        yes: true,
        ..Default::default()
    };
    let code = run_apply_with(
        &globals(root, profile),
        &a,
        &mut FsWriter::new(),
        &mut o,
        &mut e,
    )
    .unwrap_or_else(|e| panic!("apply --only {ids:?}: {e}"));
    (
        code,
        format!(
            "{}{}",
            String::from_utf8_lossy(&o),
            String::from_utf8_lossy(&e)
        ),
    )
}

fn revert_part(root: &Path, profile: &str, part: RevertPart) -> (Result<u8, String>, String) {
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let r = run_revert_part_with(
        &globals(root, profile),
        &RevertOptions {
            yes: true,
            state_dir: None,
        },
        &part,
        &mut FsWriter::new(),
        &mut o,
        &mut e,
    )
    .map_err(|e| e.to_string());
    (
        r,
        format!(
            "{}{}",
            String::from_utf8_lossy(&o),
            String::from_utf8_lossy(&e)
        ),
    )
}

fn revert_only(root: &Path, profile: &str, ids: &[&str]) -> (Result<u8, String>, String) {
    revert_part(
        root,
        profile,
        RevertPart {
            run: None,
            only: ids.iter().map(|s| s.to_string()).collect(),
        },
    )
}

fn last_run(root: &Path) -> String {
    let runs = list_runs(&root.join(JOURNAL));
    let dir = runs.last().expect("a run");
    Journal::open(dir).expect("journal").doc.id
}

/// The "Done when" sweep: for every tunable that plans something on a fixture root, `apply
/// --only X` then `revert --only X` (and, on a fresh copy, `revert --run N`) leaves every file
/// byte for byte, mode, link target and directory as it was.
#[test]
fn apply_only_then_revert_only_is_byte_identical_for_every_planning_tunable() {
    let mut swept = 0;
    let mut failures = Vec::new();
    for (fixture, profile, add) in ROOTS {
        for id in daqtune_engine::tunables::apply_ids() {
            let d = prepared(fixture, *add);
            let r = d.path();
            let p = plan(r, profile, &only(&[id]));
            if p.contains("nothing to change") {
                continue;
            }
            let before = host_files(r);
            let (code, out) = apply_only(r, profile, &[id]);
            if code != 0 {
                failures.push(format!("{fixture} apply --only {id}: exit {code}\n{out}"));
                continue;
            }
            swept += 1;
            let (res, out) = revert_only(r, profile, &[id]);
            if res != Ok(0) {
                failures.push(format!("{fixture} revert --only {id}: {res:?}\n{out}"));
                continue;
            }
            let diff = diff_snapshots(&before, &host_files(r));
            if !diff.is_empty() {
                failures.push(format!("{fixture} --only {id}: {diff:#?}"));
            }
            // The same through the run.
            let d = prepared(fixture, *add);
            let r = d.path();
            let before = host_files(r);
            apply_only(r, profile, &[id]);
            let run = last_run(r);
            let (res, out) = revert_part(
                r,
                profile,
                RevertPart {
                    run: Some(run),
                    only: vec![],
                },
            );
            if res != Ok(0) {
                failures.push(format!("{fixture} revert --run ({id}): {res:?}\n{out}"));
                continue;
            }
            let diff = diff_snapshots(&before, &host_files(r));
            if !diff.is_empty() {
                failures.push(format!("{fixture} --run ({id}): {diff:#?}"));
            }
        }
    }
    assert!(swept >= 20, "only {swept} tunables planned something");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
