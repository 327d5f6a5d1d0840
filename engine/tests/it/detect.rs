//! Profile detection by GPU name needs no driver library: the NVIDIA kernel driver's procfs
//! names the GPUs, and a GPU-free check run never gathers GPU facts (issue 19: `cuInit` is
//! most of a check's time, and detection used to pay it on unrecognised hosts).

use daqtune_engine::commands::{choose_profile_with, detect_profile_with, evaluate_facts};
use daqtune_engine::facts::Facts;
use daqtune_engine::GlobalOptions;
use daqtune_probe::Host;
use std::fs;

const GB10_INFO: &str = "Model: \t\t NVIDIA GB10\nIRQ:   \t\t 0\nGPU UUID: \t GPU-3e6f1a2b-0000-1111-2222-333344445555\nBus Type: \t PCIe\nBus Location: \t 000f:01:00.0\nDevice Minor: \t 0\n";

/// A host root with neither DMI nor a device tree that matches, and the GB10 known only from
/// /proc/driver/nvidia/gpus.
fn gb10_root() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    let gpu = d.path().join("proc/driver/nvidia/gpus/000f:01:00.0");
    fs::create_dir_all(&gpu).expect("mkdir");
    fs::write(gpu.join("information"), GB10_INFO).expect("w");
    fs::create_dir_all(d.path().join("sys/class/dmi/id")).expect("mkdir");
    fs::write(
        d.path().join("sys/class/dmi/id/product_name"),
        "Some Board\n",
    )
    .expect("w");
    d
}

#[test]
fn a_gb10_is_recognised_from_procfs_alone() {
    let d = gb10_root();
    let host = Host::at(d.path()).expect("root");
    let facts = Facts::new(&host);
    let (name, why) = detect_profile_with(&facts).expect("detected");
    assert_eq!(name, "dgx-spark");
    assert!(why.contains("GB10"), "{why}");
    // No recorded GPU facts were needed (none exist here, and none were read).
    assert!(facts.gpus_gathered().is_none());
}

#[test]
fn detection_reads_no_gpu_facts_when_procfs_answers() {
    let d = gb10_root();
    // A recorded facts file that would name another GPU: detection must not look at it.
    fs::create_dir_all(d.path().join("daqtune")).expect("mkdir");
    fs::write(d.path().join("daqtune/gpu.json"), "not even JSON").expect("w");
    let (host, rec) = Host::at(d.path()).expect("root").recording();
    let facts = Facts::new(&host);
    assert_eq!(
        detect_profile_with(&facts).map(|(n, _)| n).as_deref(),
        Some("dgx-spark")
    );
    let read = rec.lock().expect("recording");
    assert!(
        !read.accesses.keys().any(|p| p.contains("daqtune/gpu.json")),
        "detection read the GPU facts file: {:?}",
        read.accesses.keys().collect::<Vec<_>>()
    );
}

#[test]
fn a_gpu_free_check_run_gathers_no_gpu_facts() {
    let d = gb10_root();
    let host = Host::at(d.path()).expect("root");
    let g = GlobalOptions::default();
    let facts = g.facts(&host);
    let lp = choose_profile_with(&facts, &g).expect("profile");
    let rep = evaluate_facts(
        &facts,
        &lp,
        vec!["platform".into(), "cpu.governor".into()],
        false,
        None,
    );
    assert_eq!(rep.profile, "dgx-spark");
    assert!(
        rep.gpu_facts.is_none(),
        "GPU facts gathered for non-GPU checks"
    );
    // A GPU check does gather them (here: the root has no record, so it says so).
    let facts = g.facts(&host);
    let rep = evaluate_facts(&facts, &lp, vec!["gpu.bar1".into()], false, None);
    assert!(rep.checks.iter().all(|v| v.id == "gpu.bar1"));
}
