//! `pcie.acs` through apply (issue 5): without `--allow-acs` it only warns; with it the
//! redirect bits of the ports between GPU and NIC are cleared (and `pci=disable_acs_redir=`
//! written), kept for later runs and reverted byte for byte; a translating IOMMU refuses.
//! Through the engine's API; moved from tune/tests/apply_acceptance.rs (issue 24).

use crate::common;

use common::drive::*;
use common::testroot::*;
use daqtune_engine::apply::Selection;

const PORTS: [&str; 3] = ["0005:02:00.0", "0005:02:02.0", "0005:08:00.0"];
const REDIRECT: u16 = 0x002c; // ReqRedir | CmpltRedir | EgressCtrl

/// The IGX root with ACS redirect set on the downstream ports of the GPU <-> NIC path
/// (the fixture's own values when it has its PCI tree).
fn root_with_acs() -> tempfile::TempDir {
    let root = prepared("igx-untuned", add_igx_pci);
    add_igx_bridges(root.path(), 0x001d);
    for p in PORTS {
        assert_ne!(
            acs_ctrl(root.path(), p) & REDIRECT,
            0,
            "{p}: the fixture must have a redirect set"
        );
    }
    root
}

fn allow_acs(ids: &[&str]) -> Selection {
    Selection {
        allow_acs: true,
        ..only(ids)
    }
}

#[test]
fn without_allow_acs_only_warns() {
    let root = root_with_acs();
    let r = root.path();
    let before = snapshot(r, &[]);
    let (code, out) = apply(r, "igx-orin", &only(&["pcie.acs"]));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("ACS redirect is set on 0005:02:00.0, 0005:02:02.0, 0005:08:00.0"),
        "{out}"
    );
    assert!(diff_snapshots(&before, &snapshot(r, &[])).is_empty());
}

#[test]
fn allow_acs_clears_redirect_bits_and_reverts() {
    let root = root_with_acs();
    let r = root.path();
    // Passthrough for every group: the condition under which redirect may be cleared.
    set_all_iommu(r, "identity");
    let before = snapshot(r, &[]);
    let ctrl_before: Vec<u16> = PORTS.iter().map(|p| acs_ctrl(r, p)).collect();
    let (code, out) = apply(r, "igx-orin", &allow_acs(&["pcie.acs", "kernel.cmdline"]));
    assert_eq!(code, 0, "{out}");
    for (p, b) in PORTS.iter().zip(&ctrl_before) {
        // ReqRedir, CmpltRedir and EgressCtrl off; every other control kept.
        assert_eq!(acs_ctrl(r, p), b & !REDIRECT, "{p}");
    }
    let d = read(r, "etc/default/grub.d/99-daqtune.cfg");
    assert!(
        d.contains("pci=disable_acs_redir=0005:02:00.0\\;0005:02:02.0\\;0005:08:00.0"),
        "{d}"
    );
    // Idempotent, also when the flag is not repeated (it is kept from the journal, or the
    // drop-in would be rewritten without the ACS argument), then byte-for-byte revert.
    let mid = snapshot(r, &[]);
    let (_, out) = apply(r, "igx-orin", &only(&["pcie.acs", "kernel.cmdline"]));
    assert!(out.contains("keeping --allow-acs of apply run"), "{out}");
    assert!(out.contains("nothing to change"), "{out}");
    assert!(diff_snapshots(&mid, &snapshot(r, &[])).is_empty());
    assert_reverted(r, &before);
}

#[test]
fn translating_iommu_refuses() {
    let root = root_with_acs();
    let r = root.path();
    set_all_iommu(r, "identity");
    if !r
        .join("sys/bus/pci/devices/0005:09:00.0/iommu_group")
        .exists()
    {
        set_iommu(r, "0005:09:00.0", 7, "DMA-FQ");
    }
    std::fs::write(
        r.join("sys/bus/pci/devices/0005:09:00.0/iommu_group/type"),
        "DMA-FQ\n",
    )
    .expect("w");
    let ctrl_before: Vec<u16> = PORTS.iter().map(|p| acs_ctrl(r, p)).collect();
    let (code, out) = apply(r, "igx-orin", &allow_acs(&["pcie.acs"]));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("0005:09:00.0 is behind a translating IOMMU (group type DMA-FQ)"),
        "{out}"
    );
    assert!(out.contains("iommu.passthrough=1"), "{out}");
    for (p, b) in PORTS.iter().zip(&ctrl_before) {
        assert_eq!(acs_ctrl(r, p), *b, "{p} untouched");
    }
    // Passthrough (identity) is fine.
    std::fs::write(
        r.join("sys/bus/pci/devices/0005:09:00.0/iommu_group/type"),
        "identity\n",
    )
    .expect("w");
    let (code, out) = apply(r, "igx-orin", &allow_acs(&["pcie.acs"]));
    assert_eq!(code, 0, "{out}");
    assert_eq!(acs_ctrl(r, "0005:02:00.0") & REDIRECT, 0);
}
