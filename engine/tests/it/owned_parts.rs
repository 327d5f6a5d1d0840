//! Issue 42 deliverable 1: ownership per setting, not per file. Files that carry several
//! settings (the grub drop-in, extlinux's entry, a port's `.link` or NetworkManager keyfile)
//! are built from per-setting parts: `apply --only X` writes X's parts only, and `revert
//! --only X` / `revert --run N` undo exactly that, leaving every file byte for byte as it was.

use crate::common;
use common::drive::{globals, host_files, only, plan, prepared, read};
use common::testroot;
use daqtune_render::apply::Text;

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
/// (fixture, profile, what adds its PCI tree)
type Root = (&'static str, &'static str, fn(&Path));

const ROOTS: &[Root] = &[
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
        &mut Text::new(&mut o, &mut e),
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
        &mut Text::new(&mut o, &mut e),
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
        // Each fixture is prepared once and every apply runs on a copy of it: the copies'
        // state before apply is the template's, so it is read once, and a tunable that plans
        // nothing on the template needs no copy. (Copying and reading the x86-2s root, 2,572
        // files, twice per tunable and way made this test 191 s of a disk-backed run.)
        let template = prepared(fixture, *add);
        let t = template.path();
        let before = host_files(t);
        for id in daqtune_engine::tunables::apply_ids() {
            let p = plan(t, profile, &only(&[id]));
            if p.contains("nothing to change") {
                continue;
            }
            let d = copy_of(t);
            let r = d.path();
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
            let d = copy_of(t);
            let r = d.path();
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
        // The template itself: planning wrote nothing, or the copies' `before` was wrong.
        let diff = diff_snapshots(&before, &host_files(t));
        assert!(
            diff.is_empty(),
            "{fixture}: plan changed the root: {diff:#?}"
        );
    }
    assert!(swept >= 20, "only {swept} tunables planned something");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A fresh copy of a prepared root.
fn copy_of(template: &Path) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    copy_tree(template, d.path());
    d
}

const DROPIN: &str = "etc/default/grub.d/99-daqtune.cfg";

/// The words of the drop-in's `GRUB_CMDLINE_LINUX` line.
fn dropin_words(root: &Path) -> Vec<String> {
    read(root, DROPIN)
        .lines()
        .find_map(|l| l.strip_prefix("GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX "))
        .and_then(|l| l.strip_suffix('"'))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

fn has_key(words: &[String], key: &str) -> bool {
    words
        .iter()
        .any(|w| w == key || w.starts_with(&format!("{key}=")))
}

/// Row 4: `--only hugepages` plans the reservation's kernel arguments alone (the isolation
/// and the governor are other settings); `--only nic.mtu` writes `MTUBytes` alone into the
/// `.link`; `--only nic.rings` leaves the live MTU as it is and writes no `MTUBytes`.
#[test]
fn apply_only_writes_the_asked_settings_parts_only() {
    let d = prepared("x86-2s", |_| {});
    let r = d.path();
    let p = plan(r, "generic-dgpu", &only(&["hugepages"]));
    let line = p
        .lines()
        .find(|l| l.contains("GRUB_CMDLINE_LINUX=\""))
        .unwrap_or_else(|| panic!("no drop-in planned:\n{p}"));
    assert!(line.contains("hugepagesz=1G hugepages="), "{line}");
    for other in [
        "isolcpus",
        "nohz_full",
        "irqaffinity",
        "rcu_nocbs",
        "rcu_nocb_poll",
        "cpufreq.",
    ] {
        assert!(!line.contains(other), "{other} in `{line}`");
    }
    let (code, out) = apply_only(r, "generic-dgpu", &["hugepages"]);
    assert_eq!(code, 0, "{out}");
    let words = dropin_words(r);
    assert!(
        has_key(&words, "hugepages") && !has_key(&words, "isolcpus"),
        "{words:?}"
    );

    let d = prepared("igx-untuned", add_igx_pci);
    let r = d.path();
    let link = "etc/systemd/network/10-daqtune-cx7_0.link";
    let (code, out) = apply_only(r, "igx-orin", &["nic.mtu"]);
    assert_eq!(code, 0, "{out}");
    let text = read(r, link);
    assert!(text.contains("\nMTUBytes=9000\n"), "{text}");
    for other in [
        "RxBufferSize",
        "TxBufferSize",
        "RxFlowControl",
        "LargeReceiveOffload",
        "CombinedChannels",
        "RxCoalesceSec",
    ] {
        assert!(!text.contains(other), "{other} in\n{text}");
    }

    let d = prepared("igx-untuned", add_igx_pci);
    let r = d.path();
    let mtu = "sys/class/net/cx7_0/mtu";
    let before = read(r, mtu);
    let (code, out) = apply_only(r, "igx-orin", &["nic.rings"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(read(r, mtu), before, "nic.rings raised the MTU:\n{out}");
    let text = read(r, link);
    assert!(text.contains("\nRxBufferSize=max\n"), "{text}");
    assert!(!text.contains("MTUBytes"), "{text}");
}

/// Row 3: after a full apply, `revert --only hugepages,cpu.governor` takes their kernel
/// arguments out of the drop-in and keeps the isolation; `apply --only nic.rings` then
/// `revert --only nic.rings` leaves the MTU and the `.link` files as they were.
#[test]
fn revert_only_takes_the_settings_boot_parts_out() {
    let d = prepared("igx-untuned", add_igx_pci);
    let r = d.path();
    let (code, out) = apply_only(r, "igx-orin", &[]);
    assert!(code <= 1, "{out}");
    let words = dropin_words(r);
    for key in ["hugepages", "isolcpus", "cpufreq.default_governor"] {
        assert!(has_key(&words, key), "{key} not applied: {words:?}");
    }
    let (res, out) = revert_only(r, "igx-orin", &["hugepages", "cpu.governor"]);
    assert_eq!(res, Ok(0), "{out}");
    let words = dropin_words(r);
    for key in [
        "hugepages",
        "hugepagesz",
        "default_hugepagesz",
        "cpufreq.default_governor",
    ] {
        assert!(
            !has_key(&words, key),
            "{key} left after revert: {words:?}\n{out}"
        );
    }
    assert!(
        has_key(&words, "isolcpus"),
        "the isolation went too: {words:?}"
    );
    // The rest reverts to the original, byte for byte.
    let d2 = prepared("igx-untuned", add_igx_pci);
    let (res, out) = revert_part(
        r,
        "igx-orin",
        RevertPart {
            run: None,
            only: vec![],
        },
    );
    assert_eq!(res, Ok(0), "{out}");
    let diff = diff_snapshots(&host_files(d2.path()), &host_files(r));
    assert!(diff.is_empty(), "{diff:#?}");

    let d = prepared("igx-untuned", add_igx_pci);
    let r = d.path();
    let before = host_files(r);
    let (code, out) = apply_only(r, "igx-orin", &["nic.rings"]);
    assert_eq!(code, 0, "{out}");
    let (res, out) = revert_only(r, "igx-orin", &["nic.rings"]);
    assert_eq!(res, Ok(0), "{out}");
    let diff = diff_snapshots(&before, &host_files(r));
    assert!(diff.is_empty(), "{diff:#?}");
}

fn copies_name(p: &Path) -> String {
    p.file_name().expect("name").to_string_lossy().into_owned()
}

/// Row 2: the profile copy under /etc/daqtune/profiles stays while a unit or rule that runs
/// it stays: `revert --only kernel.cmdline` (whose drop-in names it too) keeps it for the GPU
/// clock unit and the MRRS rule; it goes with the last of them.
#[test]
fn the_profile_copy_stays_while_a_unit_runs_it() {
    let d = prepared("igx-untuned", add_igx_pci);
    let r = d.path();
    let before = host_files(r);
    let elsewhere = tempfile::tempdir().expect("tmp");
    let lab = elsewhere.path().join("lab.yaml");
    std::fs::write(&lab, "name: lab\nextends: igx-orin\n").expect("profile");
    let labs = lab.display().to_string();
    let (code, out) = apply_only(r, &labs, &[]);
    assert!(code <= 1, "{out}");
    let copies = || -> Vec<String> {
        std::fs::read_dir(r.join("etc/daqtune/profiles"))
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(copies().len(), 1, "{out}");
    let unit = "etc/systemd/system/daqtune-gpu-clocks.service";
    let rule = "etc/udev/rules.d/90-daqtune-mrrs.rules";
    assert!(r.join(unit).is_file() && r.join(rule).is_file(), "{out}");
    for ids in [
        ["kernel.cmdline", "hugepages"],
        ["cpu.governor", "pcie.mrrs"],
    ] {
        let (res, out) = revert_only(r, &labs, &ids);
        assert_eq!(res, Ok(0), "{out}");
        assert_eq!(
            copies().len(),
            1,
            "revert --only {ids:?} removed the copy:\n{out}"
        );
    }
    assert!(r.join(unit).is_file());
    // Missing while a unit runs it: `status` says so (drift), and the copy names it.
    let copy = r.join("etc/daqtune/profiles").join(&copies()[0]);
    let bytes = std::fs::read(&copy).expect("copy");
    std::fs::remove_file(&copy).expect("rm copy");
    let st = daqtune_engine::status::gather(
        &globals(r, &labs),
        &daqtune_engine::status::StatusOptions { state_dir: None },
    )
    .expect("status");
    assert!(st.summary.drift >= 1, "no drift with the copy missing");
    let text = daqtune_render::status::text(&st);
    assert!(text.contains(&copies_name(&copy)), "{text}");
    std::fs::write(&copy, bytes).expect("put back");
    // The last user goes: so does the copy (and its directories).
    let (res, out) = revert_only(r, &labs, &["gpu.clocks"]);
    assert_eq!(res, Ok(0), "{out}");
    assert!(copies().is_empty(), "{out}");
    let (res, out) = revert_part(
        r,
        &labs,
        RevertPart {
            run: None,
            only: vec![],
        },
    );
    assert_eq!(res, Ok(0), "{out}");
    let diff = diff_snapshots(&before, &host_files(r));
    assert!(diff.is_empty(), "{diff:#?}");
}

/// Row 14: a file the user changed after apply (the drift `status` shows) is kept aside,
/// named in the revert's output, where nothing reads it as configuration; never deleted.
#[test]
fn an_edited_file_is_kept_aside_and_named_not_deleted() {
    let d = prepared("igx-untuned", add_igx_pci);
    let r = d.path();
    let conf = "etc/sysctl.d/90-daqtune-watchdog.conf";
    let (code, out) = apply_only(r, "igx-orin", &["kernel.watchdog"]);
    assert_eq!(code, 0, "{out}");
    let edited = format!(
        "{}# the operator's own line\nkernel.nmi_watchdog = 0\n",
        read(r, conf)
    );
    std::fs::write(r.join(conf), &edited).expect("edit");
    let (res, out) = revert_only(r, "igx-orin", &["kernel.watchdog"]);
    assert_eq!(res, Ok(0), "{out}");
    assert!(!r.join(conf).exists(), "{out}");
    let kept = out
        .split_whitespace()
        .find(|w| w.contains(".daqtune-edited-"))
        .map(|w| w.trim_end_matches([')', ',', ';']).to_string())
        .unwrap_or_else(|| panic!("the kept copy is not named:\n{out}"));
    assert!(
        kept.contains("/90-daqtune-watchdog.conf.daqtune-edited-"),
        "{kept}"
    );
    assert_eq!(read(r, kept.trim_start_matches('/')), edited);
    // Not where systemd-sysctl reads (*.conf in /etc/sysctl.d).
    assert!(!kept.starts_with("/etc/sysctl.d/"), "{kept}");
}

/// Row 11: whatever order the settings are reverted in, and however a run ended, revert
/// removes every directory apply created (`/etc/systemd/system`, `/etc/udev`, `/etc/daqtune`,
/// ...), not only the one the first file in it recorded.
#[test]
fn partial_reverts_in_any_order_leave_no_directory_apply_made() {
    let ids = daqtune_engine::tunables::apply_ids();
    let orders: [Vec<&str>; 2] = [ids.clone(), ids.iter().rev().copied().collect()];
    for order in orders {
        let d = prepared("igx-untuned", add_igx_pci);
        let r = d.path();
        let before = host_files(r);
        let (code, out) = apply_only(r, "igx-orin", &[]);
        assert!(code <= 1, "{out}");
        for id in &order {
            let (res, out) = revert_only(r, "igx-orin", &[id]);
            // A setting with nothing in effect is a usage error; anything else must succeed.
            if let Err(e) = &res {
                assert!(e.contains("nothing of"), "{id}: {e}\n{out}");
            } else {
                assert_eq!(res, Ok(0), "{id}: {out}");
            }
        }
        let diff = diff_snapshots(&before, &host_files(r));
        assert!(diff.is_empty(), "order {order:?}: {diff:#?}");
    }
}

/// Row 12: `kill -9` between the temp file of a saved copy and its rename leaves
/// `files/.NNNN.new.daqtune-tmp.PID.N` for a record that was never added (the copy is saved
/// first); revert removes it with the rest of what the run left.
#[test]
fn revert_sweeps_the_temp_file_of_a_copy_saved_before_its_record() {
    let d = prepared("igx-untuned", add_igx_pci);
    let r = d.path();
    let (code, out) = apply_only(r, "igx-orin", &["kernel.watchdog", "nic.mtu"]);
    assert_eq!(code, 0, "{out}");
    let dir = list_runs(&r.join(JOURNAL)).pop().expect("run");
    let n = Journal::open(&dir).expect("journal").doc.records.len();
    let left = [
        dir.join(format!("files/.{n:04}.new.daqtune-tmp.999999999.4")),
        dir.join(format!("files/.{n:04}.daqtune-tmp.999999999.5")),
    ];
    for p in &left {
        std::fs::write(p, b"half").expect("leftover");
    }
    let keep = dir.join("files/.notes.daqtune-tmp.1.1");
    std::fs::write(&keep, b"x").expect("look-alike");
    let (res, out) = revert_part(
        r,
        "igx-orin",
        RevertPart {
            run: None,
            only: vec![],
        },
    );
    assert_eq!(res, Ok(0), "{out}");
    for p in &left {
        assert!(!p.exists(), "{} left:\n{out}", p.display());
    }
    assert!(keep.exists());
}

/// Row 13: a saved copy in the journal that is a symlink (a hostile root pointing it at a
/// file of the machine) is never followed: revert refuses that step, naming it, and copies
/// nothing into the root.
#[test]
fn a_journal_copy_that_is_a_symlink_is_refused_not_followed() {
    let d = prepared("igx-untuned", add_igx_pci);
    let r = d.path();
    // A file the root did not have before, outside it.
    let outside = tempfile::tempdir().expect("tmp");
    let secret = outside.path().join("secret");
    std::fs::write(&secret, b"not the root's\n").expect("secret");
    let grub = "etc/default/grub";
    std::fs::create_dir_all(r.join("etc/default/grub.d")).expect("dir");
    std::fs::write(
        r.join(DROPIN),
        "# Written by daqtune (profile igx-orin)\nGRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX isolcpus=1\"\n",
    )
    .expect("dropin");
    assert!(r.join(grub).is_file());
    let (code, out) = apply_only(r, "igx-orin", &["hugepages"]);
    assert_eq!(code, 0, "{out}");
    let dir = list_runs(&r.join(JOURNAL)).pop().expect("run");
    let j = Journal::open(&dir).expect("journal");
    let blob = j
        .doc
        .records
        .iter()
        .find_map(|rec| match &rec.entry {
            daqtune_engine::hostio::journal::Entry::File {
                path,
                original: Some(s),
                ..
            } if path.ends_with("99-daqtune.cfg") => Some(s.blob.clone()),
            _ => None,
        })
        .expect("the drop-in's saved original");
    std::fs::remove_file(dir.join(&blob)).expect("rm");
    std::os::unix::fs::symlink(&secret, dir.join(&blob)).expect("link");
    let (res, out) = revert_only(r, "igx-orin", &["hugepages"]);
    assert_eq!(res, Ok(1), "{out}");
    assert!(out.contains("is a symlink"), "{out}");
    assert!(!read(r, DROPIN).contains("not the root's"));
    let found = snapshot(r, &[])
        .values()
        .any(|v| v.contains("not the root's"));
    assert!(!found, "the outside file was copied into the root");
}
