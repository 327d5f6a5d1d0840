//! Faults injected half-way through apply (issue 5), through the engine's API with a writer
//! that fails: the failing file is absent or keeps its old bytes, no temporary file is left,
//! the other changes are journaled and revert undoes them. Moved from
//! tune/tests/apply_acceptance.rs (issue 24).

use crate::common;

use common::drive::*;
use common::testroot::*;
use daqtune_engine::apply::ApplyOptions;
use daqtune_engine::hostio::setters::{Fault, FsWriter};
use std::path::Path;

/// No temp file (`.NAME.daqtune-tmp.PID`) anywhere in the root.
fn no_temp_files(root: &Path) {
    let snap = snapshot(root, &[]);
    let tmp: Vec<&String> = snap
        .keys()
        .filter(|k| k.contains(".daqtune-tmp."))
        .collect();
    assert!(tmp.is_empty(), "left-over temp files: {tmp:?}");
}

fn fault_case(fault: Fault, failing_rel: &str) {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    let before = snapshot(r, &[]);
    let a = ApplyOptions {
        yes: true,
        ..Default::default()
    };
    let mut w = FsWriter::with_fault(fault);
    let (code, out) = try_apply_with(&globals(r, "igx-orin"), &a, &mut w).expect("apply runs");
    assert_eq!(code, 1, "a failed write makes apply exit 1: {out}");
    assert!(out.contains("FAIL"), "{out}");
    // The failing file is either absent (new) or has its old bytes; never half-written.
    match before.get(failing_rel) {
        None => assert!(
            !r.join(failing_rel).exists(),
            "{failing_rel} exists after a failed write"
        ),
        Some(v) => assert_eq!(snapshot(r, &[]).get(failing_rel), Some(v)),
    }
    no_temp_files(r);
    // Other changes went through and are journaled...
    assert_eq!(
        read(r, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "performance\n"
    );
    // ...and revert undoes them.
    assert_reverted(r, &before);
}

#[test]
fn disk_full_midway_leaves_no_half_written_file_and_reverts() {
    fault_case(
        Fault::DiskFull {
            suffix: "grub.d/99-daqtune.cfg".into(),
            bytes: 40,
        },
        "etc/default/grub.d/99-daqtune.cfg",
    );
}

#[test]
fn disk_full_on_an_existing_kernel_file_keeps_its_bytes() {
    fault_case(
        Fault::DiskFull {
            suffix: "hugepages-1048576kB/nr_hugepages".into(),
            bytes: 0,
        },
        "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages",
    );
}

#[test]
fn read_only_file_fails_cleanly_and_reverts() {
    fault_case(
        Fault::ReadOnly("mnt-huge.mount".into()),
        "etc/systemd/system/mnt-huge.mount",
    );
}
