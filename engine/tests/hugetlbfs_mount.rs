//! The hugetlbfs mount is brought at run time, not only at the next boot. With the pool
//! reserved and the `.mount` unit already written (a unit that failed, or one whose boot has
//! not come yet), nothing was mounted and `plan` said "nothing to change" while `check
//! hugepages` failed. Under a root, the root stands in for the kernel: the mount is a line of
//! its `/proc/mounts`, so plan -> apply -> check is green, and revert restores the file.

#[path = "../src/apply/testroot.rs"]
mod testroot;

use daqtune_engine::apply::{
    run_apply_with, run_plan, run_revert_with, ApplyOptions, RevertOptions, Selection,
};
use daqtune_engine::commands::load_profile;
use daqtune_engine::context::Context;
use daqtune_engine::facts::Facts;
use daqtune_engine::hostio::setters::FsWriter;
use daqtune_engine::tunables::{run_checks, RunOptions};
use daqtune_engine::verdict::{Status, Verdict};
use daqtune_engine::GlobalOptions;
use daqtune_probe::Host;
use std::path::Path;
use testroot::*;

/// The IGX root with two 1G pages reserved (so only the mount is missing) and a profile that
/// asks for them at /mnt/huge.
fn root_with_pool() -> (tempfile::TempDir, String) {
    let d = igx_root_without_pci();
    let r = d.path();
    let hp = r.join("sys/kernel/mm/hugepages/hugepages-1048576kB");
    std::fs::write(hp.join("nr_hugepages"), "2\n").expect("w");
    std::fs::write(hp.join("free_hugepages"), "2\n").expect("w");
    install_daqtune(r);
    let prof = r.join("hp.yaml");
    std::fs::write(
        &prof,
        "name: hp\nextends: generic-dgpu\nhugepages:\n  size: 1G\n  count: 2\n  mount: /mnt/huge\n",
    )
    .expect("profile");
    let p = prof.display().to_string();
    (d, p)
}

fn verdicts(root: &Path, profile: &str) -> Vec<Verdict> {
    let lp = load_profile(profile).expect("profile");
    let host = Host::at(root).expect("root");
    let facts = Facts::new(&host);
    run_checks(
        &Context::with_facts(&facts, &lp),
        &RunOptions {
            only: vec!["hugepages".into()],
        },
    )
}

fn g(root: &Path, profile: &str) -> GlobalOptions {
    GlobalOptions {
        root: Some(root.to_path_buf()),
        profile: Some(profile.into()),
        ..Default::default()
    }
}

fn only_hugepages() -> Selection {
    Selection {
        only: vec!["hugepages".into()],
        ..Default::default()
    }
}

fn plan_text(root: &Path, profile: &str) -> String {
    let mut o = Vec::new();
    run_plan(&g(root, profile), &only_hugepages(), &mut o).expect("plan");
    String::from_utf8_lossy(&o).to_string()
}

fn apply(root: &Path, profile: &str) -> (u8, String) {
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let a = ApplyOptions {
        sel: only_hugepages(),
        yes: true,
        ..Default::default()
    };
    let code =
        run_apply_with(&g(root, profile), &a, &mut FsWriter::new(), &mut o, &mut e).expect("apply");
    (
        code,
        format!(
            "{}{}",
            String::from_utf8_lossy(&o),
            String::from_utf8_lossy(&e)
        ),
    )
}

#[test]
fn a_written_unit_with_nothing_mounted_is_mounted_now_and_reverted() {
    let (d, prof) = root_with_pool();
    let r = d.path();
    let mounts_before = std::fs::read(r.join("proc/mounts")).expect("mounts");
    let before = snapshot(r, &[]);
    let v = verdicts(r, &prof);
    assert_eq!(v[0].status, Status::Fail, "{v:#?}");
    assert!(
        v[0].message
            .contains("no hugetlbfs is mounted at /mnt/huge"),
        "{v:#?}"
    );

    // The first apply writes the unit and mounts.
    let p = plan_text(r, &prof);
    assert!(p.contains("hugetlbfs at /mnt/huge"), "{p}");
    let (code, out) = apply(r, &prof);
    assert_eq!(code, 0, "{out}");
    assert!(r.join("etc/systemd/system/mnt-huge.mount").is_file());
    let v = verdicts(r, &prof);
    assert_eq!(v[0].status, Status::Pass, "{v:#?}");
    let p = plan_text(r, &prof);
    assert!(p.contains("nothing to change"), "{p}");

    // The unit stays, the mount goes (a unit that failed at boot): plan does not say
    // "nothing to change" while the check fails; apply mounts again.
    std::fs::write(r.join("proc/mounts"), &mounts_before).expect("w");
    // (pending-reboot, not fail: the first apply wrote the boot reservation and the unit.)
    let v = verdicts(r, &prof);
    assert_ne!(v[0].status, Status::Pass, "{v:#?}");
    assert!(
        v[0].message
            .contains("no hugetlbfs is mounted at /mnt/huge"),
        "{v:#?}"
    );
    let p = plan_text(r, &prof);
    assert!(!p.contains("nothing to change"), "{p}");
    assert!(p.contains("hugetlbfs at /mnt/huge"), "{p}");
    let (code, out) = apply(r, &prof);
    assert_eq!(code, 0, "{out}");
    let mounts = std::fs::read_to_string(r.join("proc/mounts")).expect("mounts");
    assert_eq!(
        mounts.lines().filter(|l| l.contains(" /mnt/huge ")).count(),
        1,
        "{mounts}"
    );
    assert_eq!(verdicts(r, &prof)[0].status, Status::Pass);

    // Revert undoes both runs: the mount table, the unit and its link are as before.
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let code = run_revert_with(
        &g(r, &prof),
        &RevertOptions {
            yes: true,
            state_dir: None,
        },
        &mut FsWriter::new(),
        &mut o,
        &mut e,
    )
    .expect("revert");
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&o));
    let after: std::collections::BTreeMap<String, String> = snapshot(r, &[])
        .into_iter()
        .filter(|(k, _)| !(k == "var" || k.starts_with("var/")))
        .collect();
    let before: std::collections::BTreeMap<String, String> = before
        .into_iter()
        .filter(|(k, _)| !(k == "var" || k.starts_with("var/")))
        .collect();
    assert!(
        diff_snapshots(&before, &after).is_empty(),
        "{:#?}",
        diff_snapshots(&before, &after)
    );
}
