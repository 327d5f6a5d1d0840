//! Check and plan agree, on every fixture root and every built-in profile (a copy of each root,
//! so nothing under tests/fixtures changes):
//!
//! (a) a tunable whose verdicts all pass has no runtime change planned (`n/a` is no judgement,
//!     so an `n/a` subject may still be set: GB10's persistence mode) (its persistent
//!     artifacts, the units and files that keep the setting across a boot, are written for a
//!     passing setting too: no check judges them yet, see docs/architecture.md);
//! (b) after `apply --root COPY --yes` of the plan, the checks give no `fail` or `warn` for the
//!     ids that were planned (`pending-reboot` where the change waits for a boot), and a second
//!     plan is empty;
//! (c) a tunable that plans and fails gets a change or a note saying why not (a failing check
//!     the plan silently ignores is a disagreement too).

use crate::common;

use common::agree;
use common::testroot;
use daqtune_engine::plan::NoteLevel;
use daqtune_engine::profile;
use daqtune_engine::tunables;
use daqtune_engine::verdict::{Status, Verdict};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn fixture_roots() -> Vec<PathBuf> {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&base)
        .expect("tests/fixtures")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    assert!(v.len() >= 10, "fixture roots: {v:?}");
    v
}

fn by_id<'v>(vs: &'v [Verdict], id: &str) -> Vec<&'v Verdict> {
    vs.iter().filter(|v| v.id == id).collect()
}

fn show(vs: &[&Verdict]) -> String {
    vs.iter()
        .map(|v| format!("{} {}: {}", v.status, v.subject, v.message))
        .collect::<Vec<_>>()
        .join("\n    ")
}

/// Every disagreement found on one root under one profile.
fn disagreements(fixture: &Path, name: &str) -> Vec<String> {
    let lp = profile::load(name).expect("built-in profile");
    let copy = tempfile::tempdir().expect("tmp");
    testroot::copy_tree(fixture, copy.path());
    // daqtune installed (the Debian package's /usr/bin/daqtune): what its units will run.
    testroot::install_daqtune(copy.path());
    let root = copy.path();
    let label = format!(
        "{} under {name}",
        fixture.file_name().unwrap_or_default().to_string_lossy()
    );
    let mut out = Vec::new();

    let before = agree::checks(root, &lp);
    let first = agree::plan(root, &lp, name, false);
    let planned: BTreeSet<&str> = first.changes.iter().map(|c| c.check.as_str()).collect();
    let runtime: BTreeSet<&str> = first
        .changes
        .iter()
        .filter(|c| !c.action.is_persistent())
        .map(|c| c.check.as_str())
        .collect();
    for t in tunables::REGISTRY.iter().filter(|t| t.plans()) {
        let vs = by_id(&before, t.id);
        let all_pass = !vs.is_empty() && vs.iter().all(|v| v.status == Status::Pass);
        // (a)
        if all_pass && runtime.contains(t.id) {
            out.push(format!(
                "{label}: {} passes but the plan changes it:\n  {}\n    {}",
                t.id,
                first
                    .changes
                    .iter()
                    .filter(|c| c.check == t.id && !c.action.is_persistent())
                    .map(|c| format!("{} {:?}", c.subject, c.action)
                        .chars()
                        .take(160)
                        .collect::<String>())
                    .collect::<Vec<_>>()
                    .join("\n  "),
                show(&vs)
            ));
        }
        // (c)
        let fails: Vec<&Verdict> = vs
            .iter()
            .copied()
            .filter(|v| v.status == Status::Fail)
            .collect();
        let explained = first
            .notes
            .iter()
            .any(|n| n.check == t.id && matches!(n.level, NoteLevel::Skip | NoteLevel::Warn));
        if !fails.is_empty() && !planned.contains(t.id) && !explained {
            out.push(format!(
                "{label}: {} fails, yet the plan neither changes it nor says why:\n    {}",
                t.id,
                show(&fails)
            ));
        }
    }

    // (b) apply what was planned, judge again, plan again.
    if let Err(e) = agree::apply(root, name, false) {
        out.push(format!("{label}: {e}"));
        return out;
    }
    let after = agree::checks(root, &lp);
    for id in &planned {
        // A verdict apply could not change is no disagreement when the plan said so (a warn
        // or skip note for the id) and it is exactly what the check said before.
        let said = first
            .notes
            .iter()
            .any(|n| n.check == *id && matches!(n.level, NoteLevel::Skip | NoteLevel::Warn));
        let bad: Vec<&Verdict> = by_id(&after, id)
            .into_iter()
            .filter(|v| matches!(v.status, Status::Fail | Status::Warn | Status::Error))
            .filter(|v| !(said && before.contains(v)))
            .collect();
        if !bad.is_empty() {
            out.push(format!(
                "{label}: {id} was planned and applied, but judges:\n    {}",
                show(&bad)
            ));
        }
    }
    let second = agree::plan(root, &lp, name, false);
    if !second.changes.is_empty() {
        out.push(format!(
            "{label}: the plan after apply is not empty:\n{}",
            daqtune_render::plan::text(&second)
        ));
    }
    out
}

#[test]
fn check_and_plan_agree_on_every_fixture_root() {
    let pairs: Vec<(PathBuf, &str)> = fixture_roots()
        .into_iter()
        .flat_map(|root| profile::builtin_names().map(move |n| (root.clone(), n)))
        .collect();
    // The pairs are independent (each works on its own copy): one worker per core, so this
    // single test does not leave the other core idle (17 s natively, 51 s under qemu-user,
    // on one core).
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(pairs.len()));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut found: Vec<(usize, Vec<String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((root, name)) = pairs.get(i) else {
                            break;
                        };
                        mine.push((i, disagreements(root, name)));
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a worker panicked"))
            .collect()
    });
    // In the order of the pairs, as a sequential run would list them.
    found.sort_by_key(|(i, _)| *i);
    let all: Vec<String> = found.into_iter().flat_map(|(_, d)| d).collect();
    assert!(
        all.is_empty(),
        "{} disagreement(s):\n{}",
        all.len(),
        all.join("\n")
    );
}
