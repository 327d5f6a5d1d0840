//! Issue 26 item 4: `daqtune status` - the runs in effect (when, by which version, with which
//! options), what waits for a reboot, and drift: a value or file daqtune wrote that changed
//! since.

use crate::common;
use common::drive::{globals, prepared};
use daqtune_render::apply::Text;

use daqtune_engine::apply::{run_apply_with, ApplyOptions, Selection};
use daqtune_engine::hostio::journal::list_runs;
use daqtune_engine::hostio::setters::FsWriter;
use daqtune_engine::status::{gather, SettingState, StatusOptions};
use daqtune_engine::GlobalOptions;
use daqtune_render::status::text;
use std::path::Path;

const JOURNAL: &str = "var/lib/daqtune/journal";
const CPU0: &str = "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor";

fn g(root: &Path) -> GlobalOptions {
    globals(root, "igx-orin")
}

/// The IGX fixture with an installed binary, in a temp dir of the test's own.
fn igx() -> tempfile::TempDir {
    prepared("igx-untuned", |_| {})
}

fn apply_only(root: &Path, only: &[&str]) {
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
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&o));
}

#[test]
fn nothing_applied_is_said_and_is_no_drift() {
    let d = igx();
    let st = gather(&g(d.path()), &StatusOptions::default()).expect("status");
    assert!(st.runs.is_empty());
    assert_eq!(st.exit_code(), 0);
    assert!(text(&st).starts_with("nothing applied"), "{}", text(&st));
    assert!(st.profile.is_none());
}

#[test]
fn a_run_in_effect_with_its_version_and_options_and_no_drift() {
    let d = igx();
    let r = d.path();
    apply_only(r, &["cpu.governor", "nic.mtu"]);
    let st = gather(&g(r), &StatusOptions::default()).expect("status");
    assert_eq!(st.schema, "daqtune.status/v1");
    assert_eq!(st.runs.len(), 1);
    let run = &st.runs[0];
    assert_eq!(
        run.daqtune_version.as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        run.options.as_deref(),
        Some(&["--only cpu.governor,nic.mtu".to_string()][..])
    );
    assert_eq!(run.profile_origin.as_deref(), Some("--profile igx-orin"));
    assert_eq!(run.checks, ["cpu.governor", "nic.mtu"]);
    assert!(run.finished_at.is_some());
    assert_eq!(st.profile.as_deref(), Some("igx-orin"));
    assert_eq!(st.summary.drift, 0, "{}", text(&st));
    // 12 governors, 2 MTUs, 2 .link files.
    assert!(st.summary.held >= 16, "{:?}", st.summary);
    assert_eq!(st.exit_code(), 0);
    let t = text(&st);
    assert!(t.contains("no drift"), "{t}");
    assert!(t.contains("options: --only cpu.governor,nic.mtu"), "{t}");
}

#[test]
fn a_value_and_a_file_changed_behind_daqtunes_back_are_drift() {
    let d = igx();
    let r = d.path();
    apply_only(r, &["cpu.governor", "nic.mtu"]);
    std::fs::write(r.join(CPU0), "powersave\n").expect("governor");
    let link = r.join("etc/systemd/network/10-daqtune-cx7_0.link");
    let mut body = std::fs::read(&link).expect("link");
    body.extend_from_slice(b"# edited\n");
    std::fs::write(&link, body).expect("edit");
    std::fs::remove_file(r.join("etc/systemd/network/10-daqtune-cx7_1.link")).expect("rm");
    let st = gather(&g(r), &StatusOptions::default()).expect("status");
    assert_eq!(st.summary.drift, 3, "{}", text(&st));
    assert_eq!(st.exit_code(), 1);
    let gov = st
        .settings
        .iter()
        .find(|s| s.what.ends_with("cpu0/cpufreq/scaling_governor"))
        .expect("cpu0");
    assert_eq!(gov.state, SettingState::Drift);
    assert_eq!(gov.check, "cpu.governor");
    assert_eq!(gov.applied.as_deref(), Some("performance"));
    assert_eq!(gov.now.as_deref(), Some("powersave"));
    let t = text(&st);
    assert!(t.contains("DRIFT: 3 of"), "{t}");
    assert!(
        t.contains("file /etc/systemd/network/10-daqtune-cx7_1.link: applied"),
        "{t}"
    );
    assert!(t.contains("the file was removed"), "{t}");
    // A later run that writes the value again: only its write counts, and it holds.
    std::fs::write(r.join(CPU0), "powersave\n").expect("governor");
    apply_only(r, &["cpu.governor"]);
    let st = gather(&g(r), &StatusOptions::default()).expect("status");
    assert_eq!(st.summary.drift, 2, "{}", text(&st));
    assert_eq!(st.runs.len(), 2);
}

#[test]
fn a_kernel_argument_waits_for_a_reboot() {
    let d = igx();
    let r = d.path();
    apply_only(r, &["kernel.cmdline"]);
    let st = gather(&g(r), &StatusOptions::default()).expect("status");
    assert_eq!(st.pending_reboot, ["kernel.cmdline"], "{}", text(&st));
    assert_eq!(st.runs[0].pending_reboot_at_apply, ["kernel.cmdline"]);
    assert!(text(&st).contains("waiting for a reboot: kernel.cmdline"));
}

/// A journal from before the header fields: said as not recorded, its files judged `unknown`
/// (it kept no copy of what it wrote), its attributes still compared.
#[test]
fn an_old_journal_is_read_through_the_migration() {
    let d = igx();
    let r = d.path();
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
        }
    }
    std::fs::write(&p, serde_json::to_vec_pretty(&doc).expect("ser")).expect("write");
    let st = gather(&g(r), &StatusOptions::default()).expect("status");
    let run = &st.runs[0];
    assert_eq!(run.daqtune_version, None);
    assert_eq!(run.options, None);
    assert!(run.checks.contains(&"cpu.governor".to_string()));
    let t = text(&st);
    assert!(
        t.contains("by a daqtune that did not record its version"),
        "{t}"
    );
    assert!(t.contains("options: not recorded"), "{t}");
    assert_eq!(st.summary.drift, 0);
    // The governor unit and the two .link files.
    assert_eq!(st.summary.unknown, 3, "{t}");
}

/// A kernel choice file reads back with every mode and the one in effect bracketed
/// (`always madvise [never]`, the THP files): what apply wrote (`never`) holds, another
/// selection is drift. (The lifecycle guest's status showed THP as drifted right after apply.)
#[test]
fn a_bracketed_choice_file_holds_when_its_selection_is_the_applied_word() {
    const THP: &str = "sys/kernel/mm/transparent_hugepage/enabled";
    let d = igx();
    let r = d.path();
    apply_only(r, &["kernel.thp"]);
    std::fs::write(r.join(THP), "always madvise [never]\n").expect("thp");
    let st = gather(&g(r), &StatusOptions::default()).expect("status");
    assert_eq!(st.summary.drift, 0, "{}", text(&st));
    std::fs::write(r.join(THP), "always [madvise] never\n").expect("thp");
    let st = gather(&g(r), &StatusOptions::default()).expect("status");
    assert_eq!(st.summary.drift, 1, "{}", text(&st));
}
