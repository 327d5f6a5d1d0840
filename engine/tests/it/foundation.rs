//! Issue 2's acceptance table on the fixture roots, through the engine's API (the report
//! `check --format json` prints, made by common::evaluate): verdicts of the untuned and tuned
//! roots, profile detection, what kernel.cmdline and numa say when they cannot verify.
//! Moved from tune/tests/foundation.rs (issue 24), which keeps the command's part.

use crate::common;
use common::*;
use daqtune_engine::apply::ApplyOptions;
use daqtune_engine::commands::choose_profile_with;
use daqtune_engine::hostio::setters::FsWriter;
use daqtune_engine::profile::LoadedProfile;
use daqtune_engine::GlobalOptions;
use std::path::Path;

/// The profile `check --root ROOT` without `--profile` chooses.
fn detected(root: &Path) -> LoadedProfile {
    let host = daqtune_probe::Host::at(root).expect("root");
    let g = GlobalOptions {
        root: Some(root.to_path_buf()),
        ..Default::default()
    };
    choose_profile_with(&g.facts(&host), &g).expect("a detected profile")
}

#[test]
fn igx_untuned_fails_governor_cmdline_hugepages() {
    let r = check_json("igx-untuned", "igx-orin");
    assert_schema(&r);
    assert_eq!(statuses(&r, "cpu.governor"), ["fail"]);
    assert_eq!(statuses(&r, "kernel.cmdline"), ["fail"]);
    assert_eq!(statuses(&r, "hugepages"), ["fail"]);
    assert!(verdict(&r, "cpu.governor")["message"]
        .as_str()
        .unwrap_or("")
        .contains("12/12"));
}

#[test]
fn igx_tuned_passes() {
    let r = check_json("igx-tuned", "igx-orin");
    assert_schema(&r);
    assert_eq!(statuses(&r, "cpu.governor"), ["pass"]);
    assert_eq!(statuses(&r, "kernel.cmdline"), ["pass"]);
    assert_eq!(statuses(&r, "hugepages"), ["pass"]);
}

#[test]
fn spark_passes() {
    let r = check_json("spark", "dgx-spark");
    assert_schema(&r);
    assert_eq!(statuses(&r, "cpu.governor"), ["pass"]);
    assert_eq!(statuses(&r, "kernel.cmdline"), ["pass"]);
    assert_eq!(statuses(&r, "hugepages"), ["pass"]);
}

#[test]
fn x86_names_the_split_and_the_overlap() {
    let r = check_json("x86-2s", "generic-dgpu");
    assert_schema(&r);
    let gov = statuses(&r, "cpu.governor");
    assert_eq!(gov[0], "fail");
    assert!(verdict(&r, "cpu.governor")["message"]
        .as_str()
        .unwrap_or("")
        .contains("64/128"));
    let cmd = verdict(&r, "kernel.cmdline");
    assert_eq!(cmd["status"], "fail");
    assert!(
        cmd["message"]
            .as_str()
            .unwrap_or("")
            .contains("overlaps the isolated CPUs on 2-5"),
        "{cmd}"
    );
    // The hand-picked isolation is on the other socket than the NICs: the message says why
    // the profile's rule wants other cores, not just that they are missing.
    assert!(
        cmd["message"].as_str().unwrap_or("").contains(
            "isolcpus=2-5 is not on NUMA node 1, where the NICs sit, so the profile's rule \
             (nic-local, 4 cores) picks its own cores instead"
        ),
        "{cmd}"
    );
    // The fixture has 4 x 1G pages mounted at /mnt/huge, which is what generic-dgpu asks for.
    assert_eq!(statuses(&r, "hugepages"), ["pass"]);
}

#[test]
fn detection_picks_the_platform_profile() {
    for (fx, want) in [
        ("igx-tuned", "igx-orin"),
        ("spark", "dgx-spark"),
        ("x86-2s", "generic-dgpu"),
    ] {
        let lp = detected(&fixture(fx));
        assert_eq!(lp.profile.name, want, "{fx}");
    }
}

/// Without the CPU topology, kernel.cmdline still judges the command line but says what it
/// could not verify, instead of passing as if it had.
#[test]
fn cmdline_says_what_it_could_not_verify() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("host");
    std::fs::create_dir_all(&root).expect("mkdir");
    copy_tree(&fixture("igx-tuned"), &root);
    std::fs::remove_file(root.join("sys/devices/system/cpu/online")).expect("rm online");
    let r = check_json_root(&root, "igx-orin");
    let v = verdict(&r, "kernel.cmdline");
    assert_eq!(v["status"], "warn", "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap_or("")
            .contains("not verified: CPU topology unreadable"),
        "{v}"
    );
}

#[test]
fn detection_falls_back_to_gpu_names() {
    // gpu-spark has no DMI or device tree, only recorded GPU facts naming a GB10.
    let lp = detected(&fixture("gpu-spark"));
    assert_eq!(lp.profile.name, "dgx-spark");
    assert!(lp.origin.contains("GB10"), "{}", lp.origin);
}

/// Every check's page starts with its id, so `daqtune explain ID` prints the right page.
#[test]
fn every_check_has_its_page() {
    for c in daqtune_engine::tunables::REGISTRY {
        assert!(c.doc.starts_with(&format!("# {}", c.id)), "{}", c.id);
        assert!(c.doc.len() > 200, "{} has a stub page", c.id);
    }
}

/// Data cores that no NUMA node lists are not "on node 0": the numa check says it cannot
/// place them (the profile names CPUs the 12-CPU IGX does not have).
#[test]
fn numa_does_not_place_cores_the_host_lacks() {
    let dir = tempfile::tempdir().expect("tmp");
    let prof = dir.path().join("p.yaml");
    std::fs::write(
        &prof,
        "name: far\nextends: igx-orin\ncpu:\n  isolated: \"200-201\"\n",
    )
    .expect("profile");
    let r = check_json_root(&fixture("igx-tuned"), prof.to_str().expect("utf8"));
    let v = verdict(&r, "numa");
    assert_eq!(v["status"], "skip", "{v}");
    assert!(
        v["message"].as_str().unwrap_or("").contains("200-201"),
        "{v}"
    );
}

/// `apply` detects the profile as `check` does, GPU names included (it used to say "no
/// built-in profile matches" on a host known only by its GB10).
#[test]
fn apply_detects_by_gpu_name_too() {
    let tmp = tempfile::tempdir().expect("tmp");
    copy_tree(&fixture("gpu-spark"), tmp.path());
    testroot::install_daqtune(tmp.path());
    let g = GlobalOptions {
        root: Some(tmp.path().to_path_buf()),
        ..Default::default()
    };
    let dry = ApplyOptions {
        dry_run: true,
        yes: true,
        ..Default::default()
    };
    let (code, out) = drive::try_apply_with(&g, &dry, &mut FsWriter::new()).expect("apply");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("detected profile dgx-spark"), "{out}");
}
