//! Facts are gathered once per run: a `plan` (detection, derivation and planning) and a
//! `check` read no host file twice, counted with the host's access recording on every fixture
//! root. (The roots are only read here.)

use daqtune_engine::apply::{plan_on, Selection};
use daqtune_engine::commands::{choose_profile_with, evaluate_facts};
use daqtune_engine::facts::Facts;
use daqtune_engine::profile;
use daqtune_engine::GlobalOptions;
use daqtune_probe::Host;
use daqtune_render::apply::Text;
use std::path::{Path, PathBuf};

fn fixtures() -> Vec<PathBuf> {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&base)
        .expect("fixtures")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

fn twice(rec: &daqtune_probe::host::Recording) -> Vec<(String, u32)> {
    rec.reads
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(p, n)| (p.clone(), *n))
        .collect()
}

fn plan_reads(root: &Path, prof: &str) -> daqtune_probe::host::Recording {
    let host = Host::at(root).expect("root");
    let (rh, rec) = host.recording();
    let g = GlobalOptions {
        root: Some(root.to_path_buf()),
        profile: Some(prof.into()),
        ..Default::default()
    };
    // No daqtune is installed in the fixture roots: a plan with units is refused after it
    // was made (every read done), so the count covers the whole plan.
    let sel = Selection::default();
    let mut out = Vec::new();
    let _ = plan_on(
        &rh,
        &g,
        &sel,
        &mut Text::new(&mut out, &mut std::io::sink()),
    );
    let r = rec.lock().expect("lock").clone();
    r
}

fn check_reads(root: &Path, prof: &str) -> daqtune_probe::host::Recording {
    let host = Host::at(root).expect("root");
    let (rh, rec) = host.recording();
    let g = GlobalOptions {
        root: Some(root.to_path_buf()),
        profile: Some(prof.into()),
        ..Default::default()
    };
    let facts = Facts::new(&rh);
    let lp = choose_profile_with(&facts, &g).expect("profile");
    let _ = evaluate_facts(&facts, &lp, Vec::new(), false, None);
    let r = rec.lock().expect("lock").clone();
    r
}

/// Directory listings two probe readers make each (`mem::read_numa_nodes` and the PCI tree's
/// node count): a listing, not a file, and outside this crate.
const LISTED_TWICE_BY_PROBE: &[&str] = &["/sys/devices/system/node"];

fn assert_once(what: &str, rec: &daqtune_probe::host::Recording) {
    let twice: Vec<(String, u32)> = twice(rec)
        .into_iter()
        .filter(|(p, _)| !LISTED_TWICE_BY_PROBE.contains(&p.as_str()))
        .collect();
    assert!(
        twice.is_empty(),
        "{what} reads {} path(s) more than once: {twice:?}",
        twice.len()
    );
    assert!(
        !rec.reads.is_empty(),
        "{what} read nothing: the recording is not wired"
    );
}

#[test]
fn plan_reads_no_host_file_twice() {
    for root in fixtures() {
        for prof in profile::builtin_names() {
            let what = format!("plan on {} under {prof}", root.display());
            assert_once(&what, &plan_reads(&root, prof));
        }
    }
}

#[test]
fn check_reads_no_host_file_twice() {
    for root in fixtures() {
        for prof in profile::builtin_names() {
            let what = format!("check on {} under {prof}", root.display());
            assert_once(&what, &check_reads(&root, prof));
        }
    }
}
