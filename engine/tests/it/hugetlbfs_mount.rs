//! The hugetlbfs mount is brought at run time, not only at the next boot. With the pool
//! reserved and the `.mount` unit already written (a unit that failed, or one whose boot has
//! not come yet), nothing was mounted and `plan` said "nothing to change" while `check
//! hugepages` failed. Under a root, the root stands in for the kernel: the mount is a line of
//! its `/proc/mounts`, so plan -> apply -> check is green, and revert restores the file.

use crate::common::drive::globals as g;
use crate::common::testroot;
use daqtune_render::apply::Text;

use daqtune_engine::apply::{
    run_apply_with, run_plan, run_revert_with, ApplyOptions, RevertOptions, Selection,
};
use daqtune_engine::commands::load_profile;
use daqtune_engine::context::Context;
use daqtune_engine::facts::Facts;
use daqtune_engine::hostio::setters::FsWriter;
use daqtune_engine::tunables::{run_checks, RunOptions};
use daqtune_engine::verdict::{Status, Verdict};
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

fn only_hugepages() -> Selection {
    Selection {
        only: vec!["hugepages".into()],
        ..Default::default()
    }
}

fn plan_text(root: &Path, profile: &str) -> String {
    let mut o = Vec::new();
    run_plan(
        &g(root, profile),
        &only_hugepages(),
        &mut Text::new(&mut o, &mut std::io::sink()),
    )
    .expect("plan");
    String::from_utf8_lossy(&o).to_string()
}

fn apply(root: &Path, profile: &str) -> (u8, String) {
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let a = ApplyOptions {
        sel: only_hugepages(),
        yes: true,
        ..Default::default()
    };
    let code = run_apply_with(
        &g(root, profile),
        &a,
        &mut FsWriter::new(),
        &mut Text::new(&mut o, &mut e),
    )
    .expect("apply");
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
        &mut Text::new(&mut o, &mut e),
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

/// The IGX root with four 1G pages reserved and 1G hugetlbfs mounted only at `/dev/hugepages`
/// (what `default_hugepagesz=1G` gives: the tutorial, Step 4, "making them available from the
/// default mount point, /dev/hugepages"). `extra` is added to the built-in igx-orin profile.
fn root_served_at_dev_hugepages(extra: &str) -> (tempfile::TempDir, String) {
    let d = igx_root_without_pci();
    let r = d.path();
    let hp = r.join("sys/kernel/mm/hugepages/hugepages-1048576kB");
    std::fs::write(hp.join("nr_hugepages"), "4\n").expect("w");
    std::fs::write(hp.join("free_hugepages"), "4\n").expect("w");
    std::fs::write(
        r.join("proc/mounts"),
        "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n\
         proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n\
         /dev/nvme0n1p1 / ext4 rw,relatime 0 0\n\
         hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=1024M 0 0\n",
    )
    .expect("mounts");
    std::fs::create_dir_all(r.join("dev/hugepages")).expect("mkdir");
    install_daqtune(r);
    let prof = r.join("hp.yaml");
    std::fs::write(&prof, format!("name: hp\nextends: igx-orin\n{extra}")).expect("profile");
    let p = prof.display().to_string();
    (d, p)
}

#[test]
fn any_hugetlbfs_mount_of_the_page_size_serves_the_built_in_profiles() {
    // DPDK's EAL takes every hugetlbfs mount of the page size it wants (the tutorial names
    // /mnt/huge only as its example: "We will name it /mnt/huge here").
    let (d, prof) = root_served_at_dev_hugepages("");
    let r = d.path();
    let v = verdicts(r, &prof);
    assert_eq!(v[0].status, Status::Pass, "{v:#?}");
    assert!(v[0].message.contains("/dev/hugepages"), "{v:#?}");
    assert!(
        v[0].message
            .contains("the tutorial mounts them at /mnt/huge"),
        "{v:#?}"
    );
    // The check passes, so the plan adds no second mount (and no unit) at /mnt/huge.
    let p = plan_text(r, &prof);
    assert!(!p.contains("hugetlbfs at /mnt/huge"), "{p}");
    assert!(!p.contains("mnt-huge.mount"), "{p}");
}

#[test]
fn a_profile_may_insist_on_its_mount_point() {
    let (d, prof) = root_served_at_dev_hugepages("hugepages:\n  require_mount: true\n");
    let r = d.path();
    let v = verdicts(r, &prof);
    assert_eq!(v[0].status, Status::Fail, "{v:#?}");
    assert!(
        v[0].message
            .contains("no hugetlbfs is mounted at /mnt/huge for 1G pages"),
        "{v:#?}"
    );
    assert!(v[0].message.contains("require_mount"), "{v:#?}");
    let p = plan_text(r, &prof);
    assert!(p.contains("hugetlbfs at /mnt/huge"), "{p}");
}

#[test]
fn no_mount_of_the_size_anywhere_fails_and_names_the_tutorials_path() {
    let (d, prof) = root_served_at_dev_hugepages("");
    let r = d.path();
    // /dev/hugepages at the kernel's default 2M only: nothing serves 1G pages.
    let m = std::fs::read_to_string(r.join("proc/mounts")).expect("m");
    std::fs::write(
        r.join("proc/mounts"),
        m.replace("pagesize=1024M", "pagesize=2M"),
    )
    .expect("w");
    let v = verdicts(r, &prof);
    assert_eq!(v[0].status, Status::Fail, "{v:#?}");
    assert!(
        v[0].message
            .contains("no hugetlbfs is mounted at /mnt/huge for 1G pages, and no other hugetlbfs mount serves 1G pages"),
        "{v:#?}"
    );
}

#[test]
fn files_left_in_a_hugetlbfs_mount_are_named_with_the_pages_they_hold() {
    // DAQIRI issue #56 (fixed by PR #58, upstream 3eb6151): a failed start leaves
    // `<file-prefix>map_*` files under the mount that pin every page; HugePages_Free stays 0
    // and every later run fails until `sudo rm -f /dev/hugepages/*map_*`.
    let (d, prof) = root_served_at_dev_hugepages("");
    let r = d.path();
    let hp = r.join("sys/kernel/mm/hugepages/hugepages-1048576kB");
    std::fs::write(hp.join("free_hugepages"), "0\n").expect("w");
    // DPDK's hugepage files: one page each (sparse here: the size is what the check reads).
    for n in [
        "xkq3ua9cj2map_0",
        "xkq3ua9cj2map_1",
        "xkq3ua9cj2map_2",
        "xkq3ua9cj2map_3",
    ] {
        let f = std::fs::File::create(r.join("dev/hugepages").join(n)).expect("create");
        f.set_len(1 << 30).expect("len");
    }
    let v = verdicts(r, &prof);
    assert_eq!(v[0].status, Status::Warn, "{v:#?}");
    let msg = &v[0].message;
    assert!(msg.contains("4 file(s) in /dev/hugepages"), "{msg}");
    assert!(msg.contains("xkq3ua9cj2map_0 1G"), "{msg}");
    assert!(msg.contains("hold 4 of the 4 1G pages (0 free)"), "{msg}");
    assert!(msg.contains("issue #56"), "{msg}");
    let fix = v[0].fix.as_deref().unwrap_or_default();
    assert!(fix.contains("sudo rm -f /dev/hugepages/*map_*"), "{fix}");
}
