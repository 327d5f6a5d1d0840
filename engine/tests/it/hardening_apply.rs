//! Issue 23, "apply, revert and verdicts": what a red team found wrong after apply and revert,
//! each case as it was reproduced (rows 9, 12, 13, 14, 18 and the newcomer's plan).

use crate::common::drive::globals as g;
use crate::common::drive::host_files;
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
use std::path::{Path, PathBuf};
use testroot::*;

const JOURNAL: &str = "var/lib/daqtune/journal";

fn verdicts(root: &Path, profile: &str, id: &str) -> Vec<Verdict> {
    let lp = load_profile(profile).expect("profile");
    let host = Host::at(root).expect("root");
    let facts = Facts::new(&host);
    run_checks(
        &Context::with_facts(&facts, &lp),
        &RunOptions {
            only: if id.is_empty() {
                vec![]
            } else {
                vec![id.into()]
            },
        },
    )
}

fn apply_sel(root: &Path, profile: &str, sel: Selection) -> (u8, String) {
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let a = ApplyOptions {
        sel,
        yes: true,
        ..Default::default()
    };
    let code = run_apply_with(
        &g(root, profile),
        &a,
        &mut FsWriter::new(),
        &mut Text::new(&mut o, &mut e),
    )
    .unwrap_or_else(|e| panic!("apply: {e}"));
    (
        code,
        format!(
            "{}{}",
            String::from_utf8_lossy(&o),
            String::from_utf8_lossy(&e)
        ),
    )
}

fn apply(root: &Path, profile: &str) -> (u8, String) {
    apply_sel(root, profile, Selection::default())
}

fn revert(root: &Path) -> (u8, String, String) {
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let code = run_revert_with(
        &g(root, "igx-orin"),
        &RevertOptions {
            yes: true,
            state_dir: None,
        },
        &mut FsWriter::new(),
        &mut Text::new(&mut o, &mut e),
    )
    .expect("revert runs");
    (
        code,
        String::from_utf8_lossy(&o).to_string(),
        String::from_utf8_lossy(&e).to_string(),
    )
}

/// The IGX root with its PCI functions and an installed binary.
/// igx-orin allowing nvidia_peermem only (a DAQIRI built against stock DPDK, tune_system.py
/// NVIDIA/daqiri 89eacf7): igx-orin itself takes the root A6000's ready dma-buf path (3c87196)
/// and writes no modules-load file, which these rows are about. The file lives in `dir`.
fn igx_peermem_profile(dir: &Path) -> String {
    let p = dir.join("igx-peermem.yaml");
    std::fs::write(
        &p,
        "name: igx-peermem\nextends: igx-orin\ngpu:\n  gpudirect_paths: [peermem]\n",
    )
    .expect("profile");
    p.to_str().expect("utf8").to_string()
}

fn igx() -> tempfile::TempDir {
    let d = igx_root_without_pci();
    add_igx_pci(d.path());
    install_daqtune(d.path());
    d
}

fn the_run(root: &Path) -> PathBuf {
    let runs: Vec<PathBuf> = std::fs::read_dir(root.join(JOURNAL))
        .expect("journal dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("journal.json").is_file())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

// ---- row 14: the visible mount is the last one at a mount point ----

/// The IGX root with two 1G pages reserved and a profile that wants them at /mnt/huge, and
/// `/proc/mounts` holding `extra` after the fixture's lines.
fn hugepage_root(extra: &str) -> (tempfile::TempDir, String) {
    let d = igx_root_without_pci();
    let r = d.path();
    let hp = r.join("sys/kernel/mm/hugepages/hugepages-1048576kB");
    std::fs::write(hp.join("nr_hugepages"), "2\n").expect("w");
    std::fs::write(hp.join("free_hugepages"), "2\n").expect("w");
    let mut m = std::fs::read_to_string(r.join("proc/mounts")).expect("mounts");
    m.push_str(extra);
    std::fs::write(r.join("proc/mounts"), m).expect("w");
    let prof = r.join("hp.yaml");
    std::fs::write(
        &prof,
        "name: hp\nextends: generic-dgpu\nhugepages:\n  size: 1G\n  count: 2\n  mount: /mnt/huge\n",
    )
    .expect("profile");
    let p = prof.display().to_string();
    (d, p)
}

const HUGE: &str = "hugetlbfs /mnt/huge hugetlbfs rw,relatime,pagesize=1024M 0 0\n";

#[test]
fn a_hugetlbfs_mount_hidden_by_a_later_mount_does_not_pass() {
    // The control: the mount alone passes.
    let (d, prof) = hugepage_root(HUGE);
    let v = verdicts(d.path(), &prof, "hugepages");
    assert_eq!(v[0].status, Status::Pass, "{v:#?}");

    // tmpfs mounted over it: what a process sees at /mnt/huge is tmpfs.
    let (d, prof) = hugepage_root(&format!("{HUGE}tmpfs /mnt/huge tmpfs rw,relatime 0 0\n"));
    let v = verdicts(d.path(), &prof, "hugepages");
    assert_eq!(v[0].status, Status::Fail, "{v:#?}");
    assert!(
        v[0].message.contains("/mnt/huge shows a tmpfs mount") && v[0].message.contains("hidden"),
        "{v:#?}"
    );
    // The plan does not stack another mount on someone's tmpfs: it says what to do.
    let mut o = Vec::new();
    run_plan(
        &g(d.path(), &prof),
        &Selection {
            only: vec!["hugepages".into()],
            runtime_only: true,
            ..Default::default()
        },
        &mut Text::new(&mut o, &mut std::io::sink()),
    )
    .expect("plan");
    let p = String::from_utf8_lossy(&o);
    assert!(p.contains("umount /mnt/huge"), "{p}");

    // A mount over a parent directory hides it too.
    let (d, prof) = hugepage_root(&format!("{HUGE}tmpfs /mnt tmpfs rw,relatime 0 0\n"));
    let v = verdicts(d.path(), &prof, "hugepages");
    assert_eq!(v[0].status, Status::Fail, "{v:#?}");
    assert!(v[0].message.contains("hidden by a later mount"), "{v:#?}");

    // Mounted again on top of the tmpfs: visible, and a pass.
    let (d, prof) = hugepage_root(&format!(
        "{HUGE}tmpfs /mnt/huge tmpfs rw,relatime 0 0\n{HUGE}"
    ));
    let v = verdicts(d.path(), &prof, "hugepages");
    assert_eq!(v[0].status, Status::Pass, "{v:#?}");
}

// ---- row 12: what a SIGKILL during apply leaves, revert removes ----

#[test]
fn revert_removes_the_temp_files_an_interrupted_apply_left_and_nothing_else() {
    let d = igx();
    let r = d.path();
    let before = host_files(r);
    let (code, out) = apply(r, "igx-orin");
    assert_eq!(code, 0, "{out}");
    let run = the_run(r);
    // What `kill -9` between a temp file's creation and its rename leaves (the names of
    // daqtune_probe::fsutil::tmp_name, a dead pid), beside what the run wrote.
    let gov = r.join("sys/devices/system/cpu/cpu0/cpufreq");
    let rules = r.join("etc/udev/rules.d");
    let left = [
        gov.join(".scaling_governor.daqtune-tmp.999999999.0"),
        rules.join(".90-daqtune-mrrs.rules.daqtune-tmp.999999999.3"),
        run.join(".journal.json.daqtune-tmp.999999999.7"),
        run.join("files/.0001.daqtune-tmp.999999999.2"),
    ];
    for p in &left {
        std::fs::write(p, b"half").expect("leftover");
    }
    // Look-alikes that are not the writer's names for what this run wrote: they stay.
    let keep = [
        gov.join(".scaling_governor.daqtune-tmp.x.0"),
        gov.join(".scaling_max_freq.daqtune-tmp.1.0"),
        gov.join("notes.daqtune-tmp.1.2"),
        r.join("etc/.hostname.daqtune-tmp.1.2"),
    ];
    for p in &keep {
        std::fs::write(p, b"user").expect("look-alike");
    }
    // A run killed before its first journal landed: only the journal's temp file.
    let unstarted = r.join(JOURNAL).join("20260101T000000Z-99");
    std::fs::create_dir_all(&unstarted).expect("mkdir");
    std::fs::write(unstarted.join(".journal.json.daqtune-tmp.99.0"), b"{").expect("w");
    let (code, out, err) = revert(r);
    assert_eq!(code, 0, "{out}{err}");
    for p in &left {
        assert!(!p.exists(), "{} left: {out}", p.display());
    }
    assert!(!unstarted.exists(), "{out}");
    // And when nothing is left to revert, such a run is still removed.
    std::fs::create_dir_all(&unstarted).expect("mkdir");
    std::fs::write(unstarted.join(".journal.json.daqtune-tmp.99.0"), b"{").expect("w");
    let (code, out2, err) = revert(r);
    assert_eq!(code, 0, "{out2}{err}");
    assert!(out2.contains("nothing to revert"), "{out2}");
    assert!(!unstarted.exists(), "{out2}");
    assert!(
        out.contains("left by a write that was interrupted"),
        "{out}"
    );
    for p in &keep {
        assert!(p.exists(), "{} removed", p.display());
        std::fs::remove_file(p).expect("rm");
    }
    let d = diff_snapshots(&before, &host_files(r));
    assert!(d.is_empty(), "{d:#?}");
    let names: Vec<String> = snapshot(r, &[])
        .into_keys()
        .filter(|k| k.contains(".daqtune-tmp."))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

// ---- row 18: a journal with hostile paths ----

#[test]
fn a_journal_with_hostile_paths_fails_every_step_says_so_and_prints_each_path_once() {
    let d = tempfile::tempdir().expect("tmp");
    let r = d.path().join("root");
    std::fs::create_dir_all(r.join("etc")).expect("mkdir");
    // proc/ makes it a host root (row 15 refuses a directory that holds no host).
    std::fs::create_dir_all(r.join("proc")).expect("mkdir");
    // A file beside the root that `..` would reach.
    std::fs::write(d.path().join("victim"), b"keep\n").expect("victim");
    let run = r.join(JOURNAL).join("20260101T000000Z-1");
    std::fs::create_dir_all(&run).expect("mkdir");
    let paths = [
        "/../victim",
        "/etc/../../victim",
        "etc/relative",
        "/etc/\u{1b}[31mred",
    ];
    let records: Vec<serde_json::Value> = paths
        .iter()
        .map(|p| {
            serde_json::json!({"entry": {"kind": "file", "path": p, "original": null}, "done": true})
        })
        .collect();
    let doc = serde_json::json!({
        "schema": "daqtune.journal/v1",
        "id": "20260101T000000Z-1",
        "profile": "igx-orin",
        "started_unix": 0,
        "state": "applied",
        "records": records,
    });
    std::fs::write(
        run.join("journal.json"),
        serde_json::to_vec(&doc).expect("json"),
    )
    .expect("journal");
    let (code, out, err) = revert(&r);
    assert_ne!(code, 0, "{out}{err}");
    assert!(!out.contains("reverted 1 run"), "{out}");
    assert!(
        out.contains("run 20260101T000000Z-1 NOT reverted: 4 of 4 step(s) failed"),
        "{out}"
    );
    assert!(err.contains("4 step(s) failed"), "{err}");
    assert!(!out.contains("symlink"), "no symlink is involved: {out}");
    assert!(!out.contains('\u{1b}'), "raw escape sequence: {out:?}");
    for p in &paths[..3] {
        let line = out
            .lines()
            .find(|l| l.contains(p))
            .unwrap_or_else(|| panic!("{p} in {out}"));
        assert_eq!(line.matches(p).count(), 1, "{p} more than once: {line}");
        assert!(line.contains("FAIL"), "{line}");
    }
    assert!(out.contains(r#"\x1b[31mred"#), "{out}");
    assert_eq!(
        std::fs::read(d.path().join("victim")).expect("victim"),
        b"keep\n"
    );
}

// ---- row 13: byte for byte, files daqtune does not own, and a unit that was not written ----

#[test]
fn a_symlink_at_daqtunes_path_comes_back_as_the_link() {
    let d = igx();
    let r = d.path();
    // An image build installed `daqtune generate modules-load` output under /usr/share and
    // linked it into place.
    let shared = r.join("usr/share/daqtune/modules-load.conf");
    std::fs::create_dir_all(shared.parent().expect("dir")).expect("mkdir");
    std::fs::write(
        &shared,
        "# Written by daqtune (profile generic-dgpu); `daqtune revert` removes it.\nnvidia-peermem\nib_umad\n",
    )
    .expect("shared");
    let link = r.join("etc/modules-load.d/daqtune.conf");
    std::fs::create_dir_all(link.parent().expect("dir")).expect("mkdir");
    std::os::unix::fs::symlink("/usr/share/daqtune/modules-load.conf", &link).expect("link");
    let before = host_files(r);
    let pdir = tempfile::tempdir().expect("tempdir");
    let prof = igx_peermem_profile(pdir.path());
    let (code, out) = apply(r, &prof);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("wrote /etc/modules-load.d/daqtune.conf"),
        "{out}"
    );
    let m = std::fs::symlink_metadata(&link).expect("written");
    assert!(
        m.is_file(),
        "apply writes its own file in place of the link"
    );
    // What the link pointed to is not written through.
    assert_eq!(
        before.get("usr/share/daqtune/modules-load.conf"),
        host_files(r).get("usr/share/daqtune/modules-load.conf")
    );
    let (code, out, err) = revert(r);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_link(&link).expect("a link again"),
        Path::new("/usr/share/daqtune/modules-load.conf")
    );
    let d = diff_snapshots(&before, &host_files(r));
    assert!(d.is_empty(), "{d:#?}");
}

#[test]
fn an_unmarked_file_at_daqtunes_path_is_not_overwritten() {
    let d = igx();
    let r = d.path();
    // Hand-written, as the tutorial's commands leave it: no daqtune mark.
    let user = r.join("etc/modules-load.d/daqtune.conf");
    std::fs::create_dir_all(user.parent().expect("dir")).expect("mkdir");
    std::fs::write(&user, "# my modules\nnvidia-peermem\nib_umad\n").expect("user file");
    // A dangling link is not daqtune's either.
    let dangling = r.join("etc/udev/rules.d/90-daqtune-mrrs.rules");
    std::fs::create_dir_all(dangling.parent().expect("dir")).expect("mkdir");
    std::os::unix::fs::symlink("/etc/net-tuning/gone.conf", &dangling).expect("link");
    let before = host_files(r);
    let pdir = tempfile::tempdir().expect("tempdir");
    let prof = igx_peermem_profile(pdir.path());
    let mut o = Vec::new();
    run_plan(
        &g(r, &prof),
        &Selection::default(),
        &mut Text::new(&mut o, &mut std::io::sink()),
    )
    .expect("plan");
    let p = String::from_utf8_lossy(&o);
    assert!(
        p.contains(
            "apply will refuse: /etc/modules-load.d/daqtune.conf is a file without daqtune's mark"
        ),
        "{p}"
    );
    let (code, out) = apply(r, &prof);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("/etc/modules-load.d/daqtune.conf is a file without daqtune's mark")
            && out.contains("refusing to overwrite"),
        "{out}"
    );
    assert!(
        out.contains("/etc/udev/rules.d/90-daqtune-mrrs.rules is a symlink to /etc/net-tuning/gone.conf, which does not exist"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(&user).expect("user file"),
        "# my modules\nnvidia-peermem\nib_umad\n"
    );
    assert!(std::fs::symlink_metadata(&dangling)
        .expect("link")
        .file_type()
        .is_symlink());
    // The rest of the plan went through, and reverts.
    assert_eq!(
        std::fs::read_to_string(r.join("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"))
            .expect("gov"),
        "performance\n"
    );
    let (code, out, err) = revert(r);
    assert_eq!(code, 0, "{out}{err}");
    let d = diff_snapshots(&before, &host_files(r));
    assert!(d.is_empty(), "{d:#?}");
}

#[test]
fn a_mount_unit_that_was_not_written_is_not_enabled() {
    use daqtune_engine::hostio::setters::Fault;
    let d = igx();
    let r = d.path();
    let before = host_files(r);
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let a = ApplyOptions {
        yes: true,
        ..Default::default()
    };
    // The unit's write fails; its `.wants` link (which also ends in `mnt-huge.mount`) would not.
    let mut w = FsWriter::with_fault(Fault::ReadOnly("system/mnt-huge.mount".into()));
    let code = run_apply_with(
        &g(r, "igx-orin"),
        &a,
        &mut w,
        &mut Text::new(&mut o, &mut e),
    )
    .expect("apply");
    let out = String::from_utf8_lossy(&o).to_string();
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("not enabled: writing /etc/systemd/system/mnt-huge.mount failed"),
        "{out}"
    );
    assert!(!r.join("etc/systemd/system/mnt-huge.mount").exists());
    assert!(std::fs::symlink_metadata(
        r.join("etc/systemd/system/local-fs.target.wants/mnt-huge.mount")
    )
    .is_err());
    let (code, out, err) = revert(r);
    assert_eq!(code, 0, "{out}{err}");
    let d = diff_snapshots(&before, &host_files(r));
    assert!(d.is_empty(), "{d:#?}");
}

// ---- row 9: units that name a profile file have it ----

#[test]
fn units_run_a_copy_of_the_profile_that_apply_owns_and_the_check_sees_it_missing() {
    let d = igx();
    let r = d.path();
    let before = host_files(r);
    // The user's profile lives outside the host (as /tmp/lab.yaml did).
    let elsewhere = tempfile::tempdir().expect("tmp");
    let lab = elsewhere.path().join("lab.yaml");
    let yaml = "name: lab\nextends: igx-orin\n";
    std::fs::write(&lab, yaml).expect("profile");
    let labs = lab.display().to_string();
    let (code, out) = apply(r, &labs);
    assert_eq!(code, 0, "{out}");
    let copies: Vec<PathBuf> = std::fs::read_dir(r.join("etc/daqtune/profiles"))
        .expect("copies")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert_eq!(std::fs::read_to_string(&copies[0]).expect("copy"), yaml);
    let copy = format!(
        "/etc/daqtune/profiles/{}",
        copies[0].file_name().expect("name").to_string_lossy()
    );
    for unit in [
        "etc/udev/rules.d/90-daqtune-mrrs.rules",
        "etc/systemd/system/daqtune-gpu-clocks.service",
    ] {
        let t = std::fs::read_to_string(r.join(unit)).expect("unit");
        assert!(t.contains(&format!("--profile {copy} ")), "{unit}: {t}");
        assert!(!t.contains(&labs), "{unit} names the user's file: {t}");
    }
    // The user's file goes: the units still have their profile.
    std::fs::remove_file(&lab).expect("rm");
    let bad = |v: &[Verdict]| -> Vec<String> {
        v.iter()
            .filter(|v| v.status == Status::Fail)
            .map(|v| format!("{}: {}", v.subject, v.message))
            .collect()
    };
    let v = verdicts(r, "igx-orin", "daqtune.artifacts");
    assert!(bad(&v).is_empty(), "{v:#?}");
    // A second apply from the copy (what the units run) changes nothing.
    let after = snapshot(r, &[]);
    let (code, out) = apply_sel(
        r,
        &r.join(copy.trim_start_matches('/')).display().to_string(),
        Selection::default(),
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("nothing to change"), "{out}");
    assert!(diff_snapshots(&after, &snapshot(r, &[])).is_empty());

    // The copy edited: every unit and the rule that run it fail.
    let real_copy = r.join(copy.trim_start_matches('/'));
    std::fs::write(&real_copy, "name: lab\nextends: generic-dgpu\n").expect("edit");
    let v = verdicts(r, "igx-orin", "daqtune.artifacts");
    let f = bad(&v);
    assert!(
        f.iter()
            .any(|m| m.contains("90-daqtune-mrrs.rules")
                && m.contains("is not what apply copied there")),
        "{f:#?}"
    );
    // The copy gone: the same, and it says so.
    std::fs::remove_file(&real_copy).expect("rm copy");
    let v = verdicts(r, "igx-orin", "daqtune.artifacts");
    let f = bad(&v);
    for unit in ["90-daqtune-mrrs.rules", "daqtune-gpu-clocks.service"] {
        assert!(
            f.iter()
                .any(|m| m.contains(unit) && m.contains(&format!("its profile {copy} is missing"))),
            "{unit}: {f:#?}"
        );
    }
    // A unit written for the user's file (as apply did before it kept a copy) fails too.
    let unit = r.join("etc/systemd/system/daqtune-gpu-clocks.service");
    let t = std::fs::read_to_string(&unit).expect("unit");
    std::fs::write(&unit, t.replace(&copy, &labs)).expect("old-style unit");
    let v = verdicts(r, "igx-orin", "daqtune.artifacts");
    assert!(
        bad(&v)
            .iter()
            .any(|m| m.contains("daqtune-gpu-clocks.service")
                && m.contains(&format!("its profile {labs} is missing"))),
        "{v:#?}"
    );
    std::fs::write(&unit, t).expect("back");
    std::fs::write(&real_copy, yaml).expect("copy back");

    // Revert removes the copy (and the directories apply made for it).
    let (code, out, err) = revert(r);
    assert_eq!(code, 0, "{out}{err}");
    let d = diff_snapshots(&before, &host_files(r));
    assert!(d.is_empty(), "{d:#?}");
}

// ---- the newcomer's path: a plan previews what apply would refuse ----

#[test]
fn plan_on_the_untuned_fixture_with_a_config_shows_what_apply_would_write() {
    // As docs/app-config.md shows it: the fixture has no installed daqtune.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests");
    let root = fixtures.join("fixtures/igx-untuned");
    assert!(!root.join("usr/bin/daqtune").exists());
    let mut o = Vec::new();
    let code = run_plan(
        &g(&root, "igx-orin"),
        &Selection {
            config: Some(fixtures.join("configs/raw_hds_igx.yaml")),
            ..Default::default()
        },
        &mut Text::new(&mut o, &mut std::io::sink()),
    )
    .unwrap_or_else(|e| panic!("plan refused: {e}"));
    let p = String::from_utf8_lossy(&o);
    assert_eq!(code, 0, "{p}");
    for want in [
        "isolcpus=8-11",
        "hugepages=1",
        "/etc/default/grub.d/99-daqtune.cfg (new",
        "/etc/udev/rules.d/90-daqtune-mrrs.rules (new",
        "RUN+=\"/usr/bin/daqtune apply --profile igx-orin",
        "apply will refuse: no installed daqtune binary",
        "/etc/udev/rules.d/90-daqtune-mrrs.rules (pcie.mrrs)",
    ] {
        assert!(p.contains(want), "`{want}` in {p}");
    }
    // apply itself still refuses (exit 2), before anything changes.
    let d = tempfile::tempdir().expect("tmp");
    copy_tree(&root, d.path());
    let before = snapshot(d.path(), &[]);
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let r = run_apply_with(
        &g(d.path(), "igx-orin"),
        &ApplyOptions {
            yes: true,
            ..Default::default()
        },
        &mut FsWriter::new(),
        &mut Text::new(&mut o, &mut e),
    );
    let msg = r.expect_err("apply refuses").to_string();
    assert!(msg.contains("no installed daqtune binary"), "{msg}");
    assert!(diff_snapshots(&before, &snapshot(d.path(), &[])).is_empty());
}

// ---- generate's header tells the truth: revert never removes what generate printed ----

#[test]
fn generated_artifacts_do_not_claim_revert_removes_them() {
    use daqtune_engine::apply::{run_generate, GenerateOptions, Kind};
    let d = igx();
    for (kind, _, _) in Kind::all() {
        let mut o = Vec::new();
        let a = GenerateOptions {
            kind,
            exe: None,
            interfaces: vec![],
            devices: vec![],
        };
        if run_generate(
            &g(d.path(), "igx-orin"),
            &a,
            &mut Text::new(&mut o, &mut std::io::sink()),
        )
        .is_err()
        {
            continue;
        }
        let t = String::from_utf8_lossy(&o);
        assert!(!t.contains("`daqtune revert` removes it"), "{kind:?}: {t}");
        if t.contains("Written by daqtune") {
            assert!(t.contains("`daqtune revert` leaves it"), "{kind:?}: {t}");
        }
    }
}

// ---- the README's sample is a real run ----

#[test]
fn the_readme_sample_summary_is_what_check_says_on_its_fixture() {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(top.join("README.md")).expect("README");
    assert!(
        readme.contains("$ daqtune check --root tests/fixtures/x86-2s --profile generic-dgpu"),
        "the sample's command changed: update this test"
    );
    let line = readme
        .lines()
        .find(|l| l.starts_with("summary: "))
        .expect("a summary line in the README");
    let shown = line
        .trim_start_matches("summary: ")
        .split(" (")
        .next()
        .unwrap_or("");
    let v = verdicts(&top.join("tests/fixtures/x86-2s"), "generic-dgpu", "");
    let sum = daqtune_engine::report::summarize(&v);
    let parts: Vec<String> = Status::ALL
        .iter()
        .filter_map(|st| {
            let n = sum.get(st.as_str()).copied().unwrap_or(0);
            (n > 0).then(|| format!("{n} {}", st.as_str()))
        })
        .collect();
    assert_eq!(
        shown,
        parts.join(", "),
        "README.md's sample is stale: regenerate it with that command"
    );
}
