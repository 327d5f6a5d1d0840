//! Issue 26 item 3: the kernel's latency settings on fixture roots. Each id passes, warns and
//! skips (with the reason) where the root says so; apply sets them with read-back and writes
//! the tunable's own sysctl.d / tmpfiles.d file; revert gives back every byte. Each test works
//! on its own copy of a fixture.

use crate::common;
use crate::common::drive::plan_only as plan;
use crate::common::drive::verdicts;
use crate::common::drive::write;
use common::{drive, testroot};
use daqtune_testkit::fixture;

use daqtune_engine::commands::load_profile;
use daqtune_engine::hostio::setters::selected_choice;
use daqtune_engine::verdict::{Status, Verdict};
use std::collections::BTreeMap;
use std::path::Path;

const IDS: &[&str] = &[
    "kernel.thp",
    "kernel.numa-balancing",
    "kernel.watchdog",
    "kernel.timer-migration",
    "vm.stat-interval",
    "kernel.ksm",
];

fn root(name: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    testroot::copy_tree(&fixture(name), d.path());
    d
}

/// The one verdict of `id` about `subject`.
fn verdict(root: &Path, profile: &str, id: &str, subject: &str) -> Verdict {
    let vs = verdicts(root, profile, id);
    let mut found: Vec<Verdict> = vs
        .iter()
        .filter(|v| v.subject == subject)
        .cloned()
        .collect();
    assert_eq!(found.len(), 1, "{id} {subject}: {vs:#?}");
    found.remove(0)
}

fn apply(root: &Path, profile: &str, only: &[&str]) -> String {
    let (code, out) = drive::apply(root, profile, &drive::only(only));
    assert_eq!(code, 0, "apply: {out}");
    out
}

/// `revert --yes` (the profile does not matter to revert; kept for the call sites' symmetry).
fn revert(root: &Path, _profile: &str) -> String {
    let (code, out) = drive::revert(root);
    assert_eq!(code, 0, "revert: {out}");
    out
}

/// Every file of the root but daqtune's journal (which stays after revert).
fn host_files(root: &Path) -> BTreeMap<String, String> {
    testroot::snapshot(root, &[])
        .into_iter()
        .filter(|(k, _)| !(k == "var" || k.starts_with("var/")))
        .collect()
}

const THP: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
const DEFRAG: &str = "/sys/kernel/mm/transparent_hugepage/defrag";
const KSM: &str = "/sys/kernel/mm/ksm/run";
// How the reports name them.
const THP_S: &str = "thp.enabled";
const DEFRAG_S: &str = "thp.defrag";
const KSM_S: &str = "ksm.run";

// ---- pass, warn, skip for each id ----

#[test]
fn thp_passes_warns_and_skips_with_the_reason() {
    let d = root("igx-tuned");
    assert_eq!(
        verdict(d.path(), "igx-orin", "kernel.thp", THP_S).status,
        Status::Pass
    );
    let d = root("igx-untuned");
    let v = verdict(d.path(), "igx-orin", "kernel.thp", THP_S);
    assert_eq!(v.status, Status::Warn, "{v:#?}");
    assert!(v.message.contains("always [madvise] never"), "{v:#?}");
    assert!(
        v.fix
            .as_deref()
            .is_some_and(|f| f.contains("apply --only kernel.thp")),
        "{v:#?}"
    );
    // Spark wants madvise for both files: its fixture has them.
    let d = root("spark");
    for f in [THP_S, DEFRAG_S] {
        assert_eq!(
            verdict(d.path(), "dgx-spark", "kernel.thp", f).status,
            Status::Pass
        );
    }
    let d = root("grace-64k");
    let v = verdict(d.path(), "generic-dgpu", "kernel.thp", THP_S);
    assert_eq!(v.status, Status::Skip);
    assert!(v.message.contains("CONFIG_TRANSPARENT_HUGEPAGE"), "{v:#?}");
    // A file that shows no selected mode cannot be judged, nor set.
    let d = root("igx-untuned");
    write(
        d.path(),
        "sys/kernel/mm/transparent_hugepage/enabled",
        "always madvise never\n",
    );
    let v = verdict(d.path(), "igx-orin", "kernel.thp", THP_S);
    assert_eq!(v.status, Status::Skip, "{v:#?}");
    assert!(v.message.contains("no selected choice"), "{v:#?}");
    let p = plan(d.path(), "igx-orin", &["kernel.thp"]);
    assert!(!p.contains("-> never"), "{p}");
    assert!(p.contains("no selected choice"), "{p}");
}

#[test]
fn numa_balancing_passes_warns_and_skips_with_the_reason() {
    let key = "kernel.numa_balancing";
    let d = root("spark");
    assert_eq!(
        verdict(d.path(), "dgx-spark", "kernel.numa-balancing", key).status,
        Status::Pass
    );
    let d = root("x86-2s");
    let v = verdict(d.path(), "generic-dgpu", "kernel.numa-balancing", key);
    assert_eq!(v.status, Status::Warn);
    assert_eq!(v.observed.as_deref(), Some("1"));
    let d = root("igx-tuned");
    let v = verdict(d.path(), "igx-orin", "kernel.numa-balancing", key);
    assert_eq!(v.status, Status::Skip);
    assert!(v.message.contains("CONFIG_NUMA_BALANCING"), "{v:#?}");
}

#[test]
fn watchdog_passes_warns_and_skips_with_the_reason() {
    let mask = "kernel.watchdog_cpumask";
    let nmi = "kernel.nmi_watchdog";
    let d = root("igx-tuned");
    for s in [mask, nmi] {
        assert_eq!(
            verdict(d.path(), "igx-orin", "kernel.watchdog", s).status,
            Status::Pass
        );
    }
    // The untuned IGX watches every core, data cores 8-11 included.
    let d = root("igx-untuned");
    let v = verdict(d.path(), "igx-orin", "kernel.watchdog", mask);
    assert_eq!(v.status, Status::Warn);
    assert!(v.message.contains("8-11"), "{v:#?}");
    assert!(
        v.fix
            .as_deref()
            .is_some_and(|f| f.contains("watchdog_cpumask=0-7")),
        "{v:#?}"
    );
    let d = root("x86-2s");
    assert_eq!(
        verdict(d.path(), "generic-dgpu", "kernel.watchdog", nmi).status,
        Status::Warn
    );
    let d = root("grace-64k");
    let v = verdict(d.path(), "generic-dgpu", "kernel.watchdog", mask);
    assert_eq!(v.status, Status::Skip);
    assert!(v.message.contains("CONFIG_LOCKUP_DETECTOR"), "{v:#?}");
}

#[test]
fn watchdog_off_judges_kernel_watchdog_and_a_profile_without_data_cores_is_na() {
    let d = root("igx-tuned");
    let p = d.path().join("off.yaml");
    std::fs::write(
        &p,
        "name: off\nextends: igx-orin\nkernel:\n  watchdog: off\n",
    )
    .expect("profile");
    let prof = p.display().to_string();
    // The fixture's kernel.watchdog is 1: off wants 0.
    let v = verdict(d.path(), &prof, "kernel.watchdog", "kernel.watchdog");
    assert_eq!(v.status, Status::Warn, "{v:#?}");
    apply(d.path(), &prof, &["kernel.watchdog"]);
    assert_eq!(
        std::fs::read_to_string(d.path().join("proc/sys/kernel/watchdog")).expect("read"),
        "0\n"
    );
    let p2 = d.path().join("nocores.yaml");
    std::fs::write(&p2, "name: nocores\nkernel:\n  watchdog: cpumask\n").expect("profile");
    let v = verdict(
        d.path(),
        &p2.display().to_string(),
        "kernel.watchdog",
        "kernel.watchdog_cpumask",
    );
    assert_eq!(v.status, Status::NotApplicable, "{v:#?}");
}

#[test]
fn timer_migration_passes_warns_and_skips_with_the_reason() {
    let key = "kernel.timer_migration";
    let d = root("igx-tuned");
    assert_eq!(
        verdict(d.path(), "igx-orin", "kernel.timer-migration", key).status,
        Status::Pass
    );
    let d = root("spark");
    assert_eq!(
        verdict(d.path(), "dgx-spark", "kernel.timer-migration", key).status,
        Status::Warn
    );
    let d = root("grace-64k");
    let v = verdict(d.path(), "generic-dgpu", "kernel.timer-migration", key);
    assert_eq!(v.status, Status::Skip);
    assert!(v.message.contains("CONFIG_NO_HZ_COMMON"), "{v:#?}");
}

#[test]
fn stat_interval_passes_warns_and_skips_with_the_reason() {
    let key = "vm.stat_interval";
    let d = root("igx-tuned");
    assert_eq!(
        verdict(d.path(), "igx-orin", "vm.stat-interval", key).status,
        Status::Pass
    );
    // Above the profile's is fine too.
    write(d.path(), "proc/sys/vm/stat_interval", "30\n");
    assert_eq!(
        verdict(d.path(), "igx-orin", "vm.stat-interval", key).status,
        Status::Pass
    );
    let d = root("igx-untuned");
    let v = verdict(d.path(), "igx-orin", "vm.stat-interval", key);
    assert_eq!(v.status, Status::Warn);
    assert_eq!(v.expected.as_deref(), Some(">= 10"));
    let d = root("grace-64k");
    let v = verdict(d.path(), "generic-dgpu", "vm.stat-interval", key);
    assert_eq!(v.status, Status::Skip);
    assert!(v.message.contains("absent"), "{v:#?}");
}

#[test]
fn ksm_passes_warns_and_skips_with_the_reason() {
    let d = root("igx-tuned");
    assert_eq!(
        verdict(d.path(), "igx-orin", "kernel.ksm", KSM_S).status,
        Status::Pass
    );
    // 2 (stopped, pages unmerged) is stopped too.
    write(d.path(), "sys/kernel/mm/ksm/run", "2\n");
    assert_eq!(
        verdict(d.path(), "igx-orin", "kernel.ksm", KSM_S).status,
        Status::Pass
    );
    write(d.path(), "sys/kernel/mm/ksm/run", "1\n");
    assert_eq!(
        verdict(d.path(), "igx-orin", "kernel.ksm", KSM_S).status,
        Status::Warn
    );
    let d = root("x86-2s");
    let v = verdict(d.path(), "generic-dgpu", "kernel.ksm", KSM_S);
    assert_eq!(v.status, Status::Skip);
    assert!(v.message.contains("CONFIG_KSM"), "{v:#?}");
}

#[test]
fn a_profile_without_the_keys_does_not_judge_them() {
    let d = root("igx-untuned");
    let p = d.path().join("bare.yaml");
    std::fs::write(&p, "name: bare\n").expect("profile");
    let prof = p.display().to_string();
    for id in IDS {
        let vs = verdicts(d.path(), &prof, id);
        assert_eq!(vs.len(), 1, "{vs:#?}");
        assert_eq!(vs[0].status, Status::NotApplicable, "{vs:#?}");
    }
    assert!(!plan(d.path(), &prof, IDS).contains("/proc/sys/"));
}

#[test]
fn a_bad_stat_interval_in_a_profile_names_its_line() {
    let d = tempfile::tempdir().expect("tmp");
    let p = d.path().join("bad.yaml");
    std::fs::write(
        &p,
        "name: bad\nextends: generic-dgpu\nkernel:\n  stat_interval: 0\n",
    )
    .expect("profile");
    let e = match load_profile(&p.display().to_string()) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains(":4:") && e.contains("1..3600"), "{e}");
    std::fs::write(&p, "name: bad\nkernel:\n  thp: sometimes\n").expect("profile");
    let e = match load_profile(&p.display().to_string()) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains(":3:") && e.contains("never"), "{e}");
}

// ---- apply, second plan, revert ----

/// Apply the six on `fixture` under `profile`: every one that could be judged passes after,
/// a second plan changes nothing, and revert gives back every byte of the root.
fn round_trip(fixture_name: &str, profile: &str) -> (String, BTreeMap<String, String>) {
    let d = root(fixture_name);
    let r = d.path();
    let before = host_files(r);
    let out = apply(r, profile, IDS);
    for id in IDS {
        for v in verdicts(r, profile, id) {
            assert!(
                matches!(
                    v.status,
                    Status::Pass | Status::Skip | Status::NotApplicable
                ),
                "{fixture_name}: after apply {v:#?}"
            );
        }
    }
    let again = plan(r, profile, IDS);
    assert!(!again.contains("runtime:"), "{again}");
    assert!(!again.contains("files:"), "{again}");
    let after = host_files(r);
    revert(r, profile);
    assert_eq!(
        testroot::diff_snapshots(&before, &host_files(r)),
        Vec::<String>::new(),
        "{fixture_name}: revert left differences"
    );
    (out, after)
}

#[test]
fn apply_sets_and_persists_and_revert_restores_every_byte_on_the_igx() {
    let (out, after) = round_trip("igx-untuned", "igx-orin");
    assert!(out.contains(&format!("{THP} = never")), "{out}");
    assert!(
        out.contains("/proc/sys/kernel/watchdog_cpumask = 0-7"),
        "{out}"
    );
    let f = |k: &str| after.get(k).cloned().unwrap_or_default();
    assert!(
        f("etc/tmpfiles.d/daqtune-thp.conf").ends_with(&format!("w {THP} - - - - never\n")),
        "{after:#?}"
    );
    assert!(
        f("etc/sysctl.d/90-daqtune-watchdog.conf")
            .ends_with("kernel.watchdog_cpumask = 0-7\nkernel.nmi_watchdog = 0\n"),
        "{after:#?}"
    );
    assert!(f("etc/sysctl.d/90-daqtune-stat-interval.conf").ends_with("vm.stat_interval = 10\n"));
    assert!(
        f("etc/sysctl.d/90-daqtune-timer-migration.conf").ends_with("kernel.timer_migration = 0\n")
    );
    // KSM was stopped already: only its file, so the next boot keeps it stopped.
    assert!(f("etc/tmpfiles.d/daqtune-ksm.conf").ends_with(&format!("w {KSM} - - - - 0\n")));
    assert!(!out.contains(&format!("{KSM} =")), "{out}");
    // No numa_balancing on this kernel: no file for it.
    assert!(!after.contains_key("etc/sysctl.d/90-daqtune-numa-balancing.conf"));
    assert_eq!(
        f("sys/kernel/mm/transparent_hugepage/enabled")
            .split_once(' ')
            .map(|x| x.1),
        Some("never\n")
    );
}

#[test]
fn apply_and_revert_on_the_two_socket_server_and_the_spark() {
    let (out, after) = round_trip("x86-2s", "generic-dgpu");
    assert!(out.contains("/proc/sys/kernel/numa_balancing = 0"), "{out}");
    assert!(out.contains("/proc/sys/kernel/nmi_watchdog = 0"), "{out}");
    assert!(after.contains_key("etc/sysctl.d/90-daqtune-numa-balancing.conf"));
    // No KSM on this kernel: nothing written for it.
    assert!(!after.contains_key("etc/tmpfiles.d/daqtune-ksm.conf"));
    let (out, after) = round_trip("spark", "dgx-spark");
    // Both THP files already madvise: nothing set, both kept for the next boot.
    assert!(!out.contains(&format!("{THP} =")), "{out}");
    let t = after
        .get("etc/tmpfiles.d/daqtune-thp.conf")
        .cloned()
        .unwrap_or_default();
    assert!(
        t.ends_with(&format!(
            "w {THP} - - - - madvise\nw {DEFRAG} - - - - madvise\n"
        )),
        "{t}"
    );
}

#[test]
fn a_later_sysctl_file_that_undoes_a_setting_at_boot_is_named() {
    let d = root("igx-tuned");
    let r = d.path();
    let at_boot = |r: &Path| -> Vec<Verdict> {
        verdicts(r, "igx-orin", "kernel.timer-migration")
            .into_iter()
            .filter(|v| v.subject.ends_with("at boot"))
            .collect()
    };
    assert!(at_boot(r).is_empty());
    // Before ours (name order): no matter. After ours with the same value: no matter.
    write(
        r,
        "etc/sysctl.d/10-early.conf",
        "kernel.timer_migration = 1\n",
    );
    write(
        r,
        "usr/lib/sysctl.d/99-same.conf",
        "kernel.timer_migration = 0\n",
    );
    assert!(at_boot(r).is_empty(), "{:#?}", at_boot(r));
    // One sorting last that turns it on again: that is the value at boot.
    write(
        r,
        "etc/sysctl.d/99-zz-local.conf",
        "# x\nkernel.timer_migration=1\n",
    );
    let vs = at_boot(r);
    assert_eq!(vs.len(), 1, "{vs:#?}");
    assert_eq!(vs[0].status, Status::Warn);
    assert!(
        vs[0].message.starts_with(
            "/etc/sysctl.d/99-zz-local.conf:2 sets kernel.timer_migration = 1 after daqtune's /etc/sysctl.d/90-daqtune-timer-migration.conf"
        ),
        "{vs:#?}"
    );
    let p = plan(r, "igx-orin", &["kernel.timer-migration"]);
    assert!(
        p.contains("99-zz-local.conf:2 sets kernel.timer_migration"),
        "{p}"
    );
}

#[test]
fn the_owned_files_are_daqtunes_artifacts() {
    let d = root("igx-untuned");
    let r = d.path();
    apply(r, "igx-orin", IDS);
    let vs = verdicts(r, "igx-orin", "daqtune.artifacts");
    for f in [
        "/etc/tmpfiles.d/daqtune-thp.conf",
        "/etc/tmpfiles.d/daqtune-ksm.conf",
        "/etc/sysctl.d/90-daqtune-watchdog.conf",
        "/etc/sysctl.d/90-daqtune-timer-migration.conf",
        "/etc/sysctl.d/90-daqtune-stat-interval.conf",
    ] {
        let v = vs.iter().find(|v| v.subject == f);
        assert!(v.is_some_and(|v| v.status == Status::Pass), "{f}: {vs:#?}");
    }
}

#[test]
fn choice_attributes_read_as_their_bracketed_word() {
    assert_eq!(selected_choice("always [madvise] never\n"), Some("madvise"));
    assert_eq!(
        selected_choice("always defer [defer+madvise] madvise never"),
        Some("defer+madvise")
    );
    assert_eq!(selected_choice("never\n"), Some("never"));
    assert_eq!(selected_choice("always madvise never"), None);
    assert_eq!(selected_choice("[]"), None);
    assert_eq!(selected_choice("[unclosed"), None);
    assert_eq!(selected_choice(""), None);
}
