//! Issue 26 item 5: `revert --run ID` undoes one apply run and `revert --only IDS` one
//! setting's changes, byte for byte, refusing (with the run that depends on it) where a later
//! run changed the same thing; the full revert is unchanged.

use crate::common;
use crate::common::drive::host_files;
use common::drive::{globals, prepared};
use common::testroot;
use daqtune_render::apply::Text;

use daqtune_engine::apply::{
    run_apply_with, run_revert_part_with, ApplyOptions, RevertOptions, RevertPart, Selection,
};
use daqtune_engine::hostio::journal::{list_runs, Journal, RunState};
use daqtune_engine::hostio::setters::FsWriter;
use daqtune_engine::GlobalOptions;
use std::path::Path;
use testroot::*;

const JOURNAL: &str = "var/lib/daqtune/journal";
const CPU0: &str = "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor";

fn g(root: &Path) -> GlobalOptions {
    globals(root, "igx-orin")
}

/// The IGX fixture with an installed binary, in a temp dir of the test's own.
fn igx() -> tempfile::TempDir {
    prepared("igx-untuned", |_| {})
}

fn apply_only(root: &Path, only: &[&str]) -> String {
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let a = ApplyOptions {
        sel: Selection {
            only: only.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        },
        yes: true,
        ..Default::default()
    };
    let code = run_apply_with(
        &g(root),
        &a,
        &mut FsWriter::new(),
        &mut Text::new(&mut o, &mut e),
    )
    .unwrap_or_else(|e| panic!("apply: {e}"));
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o),
        String::from_utf8_lossy(&e)
    );
    assert_eq!(code, 0, "{out}");
    out
}

fn revert(root: &Path, part: RevertPart) -> (Result<u8, String>, String, String) {
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let r = run_revert_part_with(
        &g(root),
        &RevertOptions {
            yes: true,
            state_dir: None,
        },
        &part,
        &mut FsWriter::new(),
        &mut Text::new(&mut o, &mut e),
    )
    .map_err(|e| e.to_string());
    (
        r,
        String::from_utf8_lossy(&o).into_owned(),
        String::from_utf8_lossy(&e).into_owned(),
    )
}

fn only(ids: &[&str]) -> RevertPart {
    RevertPart {
        run: None,
        only: ids.iter().map(|s| s.to_string()).collect(),
    }
}

fn runs(root: &Path) -> Vec<Journal> {
    list_runs(&root.join(JOURNAL))
        .iter()
        .map(|d| Journal::open(d).expect("journal"))
        .collect()
}

/// Two runs: A sets the governor and the MTU (attributes and `.link` files); someone sets
/// cpu0 back to powersave; B sets cpu0's governor again, on top of A.
fn two_runs(root: &Path) -> (String, String) {
    apply_only(root, &["cpu.governor", "nic.mtu"]);
    std::fs::write(root.join(CPU0), "powersave\n").expect("drift");
    apply_only(root, &["cpu.governor"]);
    let r = runs(root);
    assert_eq!(r.len(), 2);
    (r[0].doc.id.clone(), r[1].doc.id.clone())
}

#[test]
fn a_run_a_later_run_depends_on_is_refused_naming_it_and_nothing_changes() {
    let d = igx();
    let r = d.path();
    let (a, b) = two_runs(r);
    let before = snapshot(r, &[]);
    let (res, out, err) = revert(
        r,
        RevertPart {
            run: Some(a.clone()),
            only: vec![],
        },
    );
    assert_eq!(res, Ok(1), "{out}{err}");
    assert!(
        err.contains(&format!("later run {b} (cpu.governor)")),
        "{err}"
    );
    assert!(err.contains(&format!("daqtune revert --run {b}")), "{err}");
    assert!(err.contains("Nothing was changed"), "{err}");
    assert!(diff_snapshots(&before, &snapshot(r, &[])).is_empty());
    // The later run goes first; then the earlier one is free.
    let (res, out, _) = revert(
        r,
        RevertPart {
            run: Some(b.clone()),
            only: vec![],
        },
    );
    assert_eq!(res, Ok(0), "{out}");
    assert!(out.contains(&format!("reverted 1 run(s): {b}")), "{out}");
    assert_eq!(
        std::fs::read_to_string(r.join(CPU0)).expect("cpu0"),
        "powersave\n"
    );
    let states: Vec<RunState> = runs(r).iter().map(|j| j.doc.state).collect();
    assert_eq!(states, [RunState::Applied, RunState::Reverted]);
    let (res, out, _) = revert(
        r,
        RevertPart {
            run: Some(a),
            only: vec![],
        },
    );
    assert_eq!(res, Ok(0), "{out}");
}

#[test]
fn only_undoes_one_settings_changes_byte_for_byte_and_keeps_the_rest() {
    let d = igx();
    let r = d.path();
    let before = host_files(r);
    let (a, _b) = two_runs(r);
    let link = "etc/systemd/network/10-daqtune-cx7_0.link";
    assert!(r.join(link).is_file());
    let (res, out, err) = revert(r, only(&["nic.mtu"]));
    assert_eq!(res, Ok(0), "{out}{err}");
    assert!(
        out.contains(&format!("run {a}: undid the changes of nic.mtu")),
        "{out}"
    );
    // The MTU's files and attributes are as before; the governor stays applied.
    let now = host_files(r);
    for (k, v) in &before {
        if k.contains("/net/") || k.starts_with("etc/systemd/network") {
            assert_eq!(now.get(k), Some(v), "{k}");
        }
    }
    assert!(!r.join(link).exists());
    assert_eq!(
        std::fs::read_to_string(r.join(CPU0)).expect("cpu0"),
        "performance\n"
    );
    let j = &runs(r)[0];
    assert_eq!(j.doc.state, RunState::Applied, "A keeps its governor");
    assert!(j
        .doc
        .records
        .iter()
        .all(|x| x.check.as_deref() == Some("cpu.governor")));
    assert!(j
        .doc
        .undone
        .iter()
        .all(|x| x.check.as_deref() == Some("nic.mtu")));
    assert!(!j.doc.undone.is_empty());
    // Nothing of nic.mtu is left in effect.
    let (res, _, _) = revert(r, only(&["nic.mtu"]));
    assert!(
        res.as_ref()
            .is_err_and(|e| e.contains("nothing of nic.mtu")),
        "{res:?}"
    );
    // The governor in both runs at once (newest first): the host is as before both, and
    // both runs are reverted.
    let (res, out, _) = revert(r, only(&["cpu.governor"]));
    assert_eq!(res, Ok(0), "{out}");
    assert!(
        diff_snapshots(&before, &host_files(r)).is_empty(),
        "{:?}",
        diff_snapshots(&before, &host_files(r))
    );
    let states: Vec<RunState> = runs(r).iter().map(|j| j.doc.state).collect();
    assert_eq!(states, [RunState::Reverted, RunState::Reverted]);
}

/// What no later run touched is undone alone; a run under a later rewrite is refused, naming
/// the thing both changed.
#[test]
fn only_what_no_later_run_touched_is_undone_alone() {
    let d = igx();
    let r = d.path();
    apply_only(r, &["cpu.governor"]);
    std::fs::write(r.join(CPU0), "powersave\n").expect("drift");
    apply_only(r, &["cpu.governor", "cpu.idle"]);
    let (res, out, err) = revert(r, only(&["cpu.idle"]));
    assert_eq!(res, Ok(0), "{out}{err}");
    let first = runs(r)[0].doc.id.clone();
    let (res, _, err) = revert(
        r,
        RevertPart {
            run: Some(first),
            only: vec![],
        },
    );
    assert_eq!(res, Ok(1), "{err}");
    assert!(
        err.contains("attribute /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "{err}"
    );
}

#[test]
fn unknown_runs_and_checks_are_usage_errors() {
    let d = igx();
    let r = d.path();
    apply_only(r, &["cpu.governor"]);
    let (res, _, _) = revert(
        r,
        RevertPart {
            run: Some("20200101T000000Z-1".into()),
            only: vec![],
        },
    );
    assert!(
        res.as_ref()
            .is_err_and(|e| e.contains("no apply run 20200101T000000Z-1 in effect")),
        "{res:?}"
    );
    let (res, _, _) = revert(r, only(&["no.such"]));
    assert!(
        res.as_ref()
            .is_err_and(|e| e.contains("unknown check `no.such`")),
        "{res:?}"
    );
}

/// A journal from before the record-level check: its attribute records are attributed by the
/// migration, its file records are not, and `--only` refuses the run, saying to revert it whole.
#[test]
fn a_journal_from_before_checks_were_recorded_is_reverted_whole() {
    let d = igx();
    let r = d.path();
    let before = host_files(r);
    apply_only(r, &["cpu.governor", "nic.mtu"]);
    let run = list_runs(&r.join(JOURNAL)).pop().expect("run");
    let p = run.join("journal.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).expect("read")).expect("json");
    for k in ["daqtune_version", "options", "finished_unix"] {
        doc.as_object_mut().expect("obj").remove(k);
    }
    for rec in doc["records"].as_array_mut().expect("records") {
        let rec = rec.as_object_mut().expect("rec");
        rec.remove("check");
        if let Some(e) = rec.get_mut("entry").and_then(|e| e.as_object_mut()) {
            e.remove("written");
            e.remove("to");
        }
    }
    std::fs::write(&p, serde_json::to_vec_pretty(&doc).expect("ser")).expect("write");
    let j = Journal::open(&run).expect("old journal opens");
    assert_eq!(j.doc.daqtune_version, None);
    assert!(j
        .doc
        .records
        .iter()
        .any(|x| x.check.as_deref() == Some("cpu.governor")));
    assert!(j.doc.records.iter().any(|x| x.check.is_none()));
    let (res, _, err) = revert(r, only(&["cpu.governor"]));
    assert_eq!(res, Ok(1));
    assert!(err.contains("revert it whole"), "{err}");
    let (res, out, _) = revert(
        r,
        RevertPart {
            run: Some(j.doc.id.clone()),
            only: vec![],
        },
    );
    assert_eq!(res, Ok(0), "{out}");
    assert!(diff_snapshots(&before, &host_files(r)).is_empty());
}
