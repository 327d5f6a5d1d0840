//! The PCIe/NIC checks through the real binary where the command itself is the point: the
//! `topo` command (and tune_system.py's spelling of it) and a run on the live host. The
//! acceptance table on the fixture roots is engine/tests/pci_checks.rs.

use crate::common;
use common::*;
use daqtune_testkit::checks_with_id as of;
use serde_json::Value;

/// On a machine without NVIDIA GPUs or ConnectX NICs (CI's virtio VM), every PCIe/NIC check
/// ends in skip (or n/a), never pass and never a crash.
#[test]
fn live_host_without_gpu_or_nic_skips() {
    let vendors: Vec<String> = std::fs::read_dir("/sys/bus/pci/devices")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read_to_string(e.path().join("vendor")).ok())
                .map(|v| v.trim().to_string())
                .collect()
        })
        .unwrap_or_default();
    if vendors.iter().any(|v| v == "0x10de" || v == "0x15b3") {
        daqtune_testkit::skip_without_hardware("this machine has NVIDIA or Mellanox devices");
        return;
    }
    let ids = [
        "pcie.topology",
        "pcie.link",
        "pcie.mps",
        "pcie.mrrs",
        "pcie.acs",
        "pcie.aer",
        "iommu",
        "irq.affinity",
        "nic.driver",
        "nic.link-layer",
        "nic.link",
        "nic.mtu",
    ];
    let mut args = vec!["check", "--profile", "generic-dgpu", "--format", "json"];
    args.extend(ids);
    let out = run(&args);
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).expect("json");
    for id in ids {
        let st = statuses(&r, id);
        assert!(!st.is_empty(), "{id}");
        assert!(
            st.iter().all(|x| x == "skip" || x == "n/a"),
            "{id}: {:?}",
            of(&r, id)
        );
    }
}

/// `daqtune topo` and tune_system.py's `--check schematic` spelling, through the binary.
#[test]
fn topo_command() {
    let root = fixture("igx-tuned");
    let out = run(&["topo", "--root", root.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("GPU0") && text.contains("PXB") && text.contains("cx7_0, mlx5_0"),
        "{text}"
    );
    let out = run(&[
        "topo",
        "--root",
        root.to_str().expect("utf8"),
        "--format",
        "json",
    ]);
    let j: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(j["schema"], "daqtune.topo/v1");
    assert_eq!(j["endpoints"][0]["label"], "GPU0");
    let tmp = tempfile::tempdir().expect("tmp");
    let svg = tmp.path().join("t.svg");
    let out = run(&[
        "--check",
        "schematic",
        "--schematic-output",
        svg.to_str().expect("utf8"),
        "--root",
        root.to_str().expect("utf8"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = std::fs::read_to_string(&svg).expect("svg written");
    assert!(body.contains("<svg") && body.contains("switch of GPU0-NIC"));
    // On this machine too (whatever it has), no crash.
    let out = run(&["topo", "--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
