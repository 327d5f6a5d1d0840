//! GPU clocks and persistence through a mocked NVML (the `GpuSetters` trait): apply locks
//! what the profile asks for, a second apply changes nothing, revert unlocks only what apply
//! locked; a refused lock is reported and the rest reverts. Moved from
//! tune/tests/apply_acceptance.rs (issue 24).

use crate::common;
use daqtune_render::apply::Text;

use common::drive::*;
use common::testroot::*;
use daqtune_engine::apply::{run_apply_gpu, run_revert_gpu};
use daqtune_engine::apply::{ApplyOptions, RevertOptions, Selection};
use daqtune_engine::hostio::gpu::{GpuState, MockGpus};
use daqtune_engine::hostio::setters::FsWriter;
use std::path::Path;

/// `apply --yes --only gpu.clocks [--runtime-only]` with the mocked NVML: the exit code and
/// what it printed.
fn apply_gpu(r: &Path, profile: &str, runtime_only: bool, mock: &MockGpus) -> (u8, String) {
    let a = ApplyOptions {
        sel: Selection {
            runtime_only,
            ..only(&["gpu.clocks"])
        },
        yes: true,
        ..Default::default()
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let g = globals(r, profile);
    let code = run_apply_gpu(
        &g,
        &a,
        &mut FsWriter::new(),
        Some(mock),
        &mut Text::new(&mut out, &mut err),
    )
    .expect("apply");
    (code, String::from_utf8_lossy(&out).into_owned())
}

/// `revert --yes` with the mocked NVML.
fn revert_gpu(r: &Path, mock: &MockGpus) -> (u8, String) {
    let a = RevertOptions {
        yes: true,
        state_dir: None,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let g = globals(r, "igx-orin");
    let code = run_revert_gpu(
        &g,
        &a,
        &mut FsWriter::new(),
        Some(mock),
        &mut Text::new(&mut out, &mut err),
    )
    .expect("revert");
    (code, String::from_utf8_lossy(&out).into_owned())
}

fn gpu(uuid: &str, name: &str, mem: bool) -> GpuState {
    GpuState {
        uuid: uuid.into(),
        name: name.into(),
        sm_held: Some(false),
        memory_held: if mem { Some(false) } else { None },
        has_memory_domain: mem,
        persistence: Some(false),
    }
}

#[test]
fn gpu_clocks_and_persistence_through_a_mocked_nvml() {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    let mut other = gpu("GPU-2", "NVIDIA RTX A6000", true);
    other.sm_held = None; // cannot be told: NVML shows no lock, someone else holds one
    other.memory_held = Some(true);
    other.persistence = Some(true);
    let mock = MockGpus::new(vec![gpu("GPU-1", "NVIDIA RTX 6000 Ada", true), other]);
    mock.locked_by_others.borrow_mut().push("GPU-2".into());
    let (code, out) = apply_gpu(r, "igx-orin", false, &mock);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        *mock.calls.borrow(),
        [
            "persistence GPU-1 true",
            "lock GPU-1 SM",
            "lock GPU-1 memory",
            "lock GPU-2 SM"
        ],
        "{out}"
    );
    assert!(
        out.contains("a lock was already in place and is now overridden"),
        "{out}"
    );
    let unit = read(r, "etc/systemd/system/daqtune-gpu-clocks.service");
    assert!(
        unit.contains("After=nvidia-persistenced.service") && unit.contains("--only gpu.clocks"),
        "{unit}"
    );
    assert!(r
        .join("etc/systemd/system/multi-user.target.wants/daqtune-gpu-clocks.service")
        .is_symlink());
    // A second apply sees the locks held and changes nothing.
    mock.calls.borrow_mut().clear();
    // GPU-2's SM state stays unknown, so it would be locked again: mark it held as NVML would after a lock.
    mock.state
        .borrow_mut()
        .get_mut("GPU-2")
        .expect("gpu2")
        .sm_held = Some(true);
    apply_gpu(r, "igx-orin", false, &mock);
    assert!(mock.calls.borrow().is_empty(), "{:?}", mock.calls.borrow());
    // Revert unlocks what apply locked and restores persistence; someone else's lock stays.
    let (code, rout) = revert_gpu(r, &mock);
    assert_eq!(code, 0, "{rout}");
    assert_eq!(
        *mock.calls.borrow(),
        [
            "unlock GPU-1 memory",
            "unlock GPU-1 SM",
            "persistence GPU-1 false"
        ],
        "{rout}"
    );
    assert!(
        rout.contains("left locked (the lock was someone else's before apply)"),
        "{rout}"
    );
    assert!(!r
        .join("etc/systemd/system/daqtune-gpu-clocks.service")
        .exists());
}

#[test]
fn gb10_locks_only_the_sm_clock() {
    let root = prepared("spark", add_spark_pci);
    let r = root.path();
    let mock = MockGpus::new(vec![gpu("GPU-gb10", "NVIDIA GB10", false)]);
    let (code, out) = apply_gpu(r, "dgx-spark", true, &mock);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        *mock.calls.borrow(),
        ["persistence GPU-gb10 true", "lock GPU-gb10 SM"]
    );
}

#[test]
fn refused_lock_is_reported_and_the_rest_reverts() {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    let mock = MockGpus::new(vec![gpu("GPU-1", "NVIDIA RTX 6000 Ada", true)]);
    mock.refuse.borrow_mut().push("lock_max".into());
    let (code, out) = apply_gpu(r, "igx-orin", true, &mock);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("NVML_ERROR_NO_PERMISSION"), "{out}");
    mock.refuse.borrow_mut().clear();
    mock.calls.borrow_mut().clear();
    revert_gpu(r, &mock);
    // The persistence change went through and is undone; the refused locks left no
    // journal entry, so revert unlocks nothing (the clock may be someone else's lock).
    assert!(
        mock.calls
            .borrow()
            .contains(&"persistence GPU-1 false".to_string()),
        "{:?}",
        mock.calls.borrow()
    );
    assert!(
        !mock.calls.borrow().iter().any(|c| c.starts_with("unlock")),
        "{:?}",
        mock.calls.borrow()
    );
    assert_eq!(mock.state.borrow()["GPU-1"].persistence, Some(false));
}
