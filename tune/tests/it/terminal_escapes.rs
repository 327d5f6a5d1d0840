//! Issue 42: host and journal data that `status`, `revert` and `diff` print (paths, profile
//! names) reach the terminal with control characters and directional overrides escaped: a
//! raw ESC could drive the terminal, U+202E reorders what it shows.

use crate::common;
use crate::common::path_str as s;
use common::*;

const RLO: &str = "\u{202e}";

/// Neither a raw ESC (or another C0/C1 control but newline and tab) nor a directional
/// override is in `bytes`.
fn assert_safe(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let bad: Vec<char> = text
        .chars()
        .filter(|c| {
            (c.is_control() && !matches!(c, '\n' | '\t'))
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(bad.is_empty(), "{what} printed raw {bad:?}:\n{text}");
}

/// A root with one apply run whose journal names a hostile path and profile (a journal a
/// hostile root brings along, or one an attacker edited).
fn hostile_run() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    copy_tree(&fixture("igx-untuned"), d.path());
    let r = s(d.path());
    let o = run(&[
        "apply",
        "--root",
        r,
        "--profile",
        "igx-orin",
        "--only",
        "kernel.watchdog",
        "--yes",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let base = d.path().join("var/lib/daqtune/journal");
    let run = std::fs::read_dir(&base)
        .expect("journal")
        .flatten()
        .next()
        .expect("a run")
        .path();
    let jp = run.join("journal.json");
    let mut j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&jp).expect("read")).expect("json");
    j["profile"] = format!("igx{RLO}nigro\u{1b}]0;pwned\u{7}").into();
    let rec = &mut j["records"][0]["entry"];
    let path = rec["path"].as_str().expect("path").to_string();
    rec["path"] = format!("{path}{RLO}gfc.txt\u{1b}[2J").into();
    std::fs::write(&jp, serde_json::to_vec_pretty(&j).expect("ser")).expect("write");
    d
}

#[test]
fn status_and_revert_escape_what_the_journal_names() {
    let d = hostile_run();
    let r = s(d.path());
    let o = run(&["status", "--root", r]);
    assert_safe("status", &o.stdout);
    assert_safe("status (stderr)", &o.stderr);
    assert!(String::from_utf8_lossy(&o.stdout).contains("\\u{202e}"));
    let o = run(&["revert", "--root", r, "--yes"]);
    assert_safe("revert", &o.stdout);
    assert_safe("revert (stderr)", &o.stderr);
    let o = run(&["revert", "--root", r, "--yes", "--only", "kernel.watchdog"]);
    assert_safe("revert --only", &o.stdout);
    assert_safe("revert --only (stderr)", &o.stderr);
}

#[test]
fn diff_escapes_host_strings() {
    let a = tempfile::tempdir().expect("tmp");
    let b = tempfile::tempdir().expect("tmp");
    copy_tree(&fixture("igx-untuned"), a.path());
    copy_tree(&fixture("igx-untuned"), b.path());
    // The kernel command line is host data every side reads.
    let cmdline = b.path().join("proc/cmdline");
    let old = std::fs::read_to_string(&cmdline).expect("cmdline");
    std::fs::write(
        &cmdline,
        format!("{} isolcpus=1{RLO}2\u{1b}[2J\n", old.trim_end()),
    )
    .expect("write");
    let o = run(&["diff", s(a.path()), s(b.path()), "--profile", "igx-orin"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.code() == Some(1),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_safe("diff", &o.stdout);
    // The hostile value is shown, escaped.
    assert!(text.contains("isolcpus=1\\u{202e}2\\x1b[2J"), "{text}");
    assert_safe("diff (stderr)", &o.stderr);
}
