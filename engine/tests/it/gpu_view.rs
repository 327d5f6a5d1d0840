//! Issue 26 item 6: `daqtune gpu` - the GPU facts with the source of each value, on the gpu-*
//! fixture roots and on facts recorded on a real H200 (docs/validation-data).

use daqtune_engine::gpu_view::{gather, json, Fact, GpuView, CUDA, NVML, SYSFS};
use daqtune_engine::GlobalOptions;
use daqtune_render::gpu::text;
use daqtune_testkit::fixture;
use std::path::Path;

fn view(root: &Path) -> GpuView {
    gather(&GlobalOptions {
        root: Some(root.to_path_buf()),
        ..Default::default()
    })
    .expect("gpu view")
}

fn get<'a>(v: &'a GpuView, gpu: usize, field: &str) -> &'a Fact {
    v.gpus[gpu]
        .facts
        .iter()
        .find(|f| f.field == field)
        .unwrap_or_else(|| panic!("{field} in {:?}", v.gpus[gpu].facts))
}

#[test]
fn the_h200_fixture_shows_each_value_with_its_source() {
    let v = view(&fixture("gpu-h200"));
    assert_eq!(v.schema, "daqtune.gpu-view/v1");
    assert_eq!(v.source.kind, "recorded");
    assert_eq!(v.source.file.as_deref(), Some("daqtune/gpu.json"));
    assert!(!v.gpus.is_empty());
    let bar1 = get(&v, 0, "BAR1");
    assert_eq!(bar1.source, NVML);
    assert!(
        bar1.value.as_deref().is_some_and(|b| b.contains("MiB")),
        "{bar1:?}"
    );
    let gd = get(&v, 0, "GPUDirect RDMA supported (attr 116)");
    assert!(gd.source.starts_with(CUDA), "{gd:?}");
    assert!(gd.value.is_some());
    assert_eq!(get(&v, 0, "NUMA node").source, SYSFS);
    let t = text(&v);
    let line = |field: &str| {
        t.lines()
            .find(|l| l.trim_start().starts_with(field))
            .unwrap_or_else(|| panic!("{field}: {t}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(line("BAR1").starts_with("BAR1 NVML "), "{t}");
    assert!(
        line("dma-buf").starts_with("dma-buf supported (attr 124) CUDA "),
        "{t}"
    );
    assert!(t.contains("recorded in"), "{t}");
    let j: serde_json::Value = serde_json::from_str(&json(&v)).expect("json");
    assert_eq!(j["schema"], "daqtune.gpu-view/v1");
    assert!(j["gpus"][0]["facts"]
        .as_array()
        .is_some_and(|f| f.len() > 10));
}

#[test]
fn every_gpu_fixture_root_gives_a_view() {
    for name in [
        "gpu-h200",
        "gpu-h200-live",
        "gpu-hybrid",
        "gpu-igx-bar256",
        "gpu-igx-bar8g",
        "gpu-spark",
    ] {
        let v = view(&fixture(name));
        assert!(!v.gpus.is_empty() || v.unavailable.is_some(), "{name}");
        for g in &v.gpus {
            for f in &g.facts {
                assert!(!f.source.is_empty(), "{name}: {f:?}");
            }
        }
        let _ = text(&v);
    }
    // The IGX BAR1 fixtures differ exactly there.
    let small = view(&fixture("gpu-igx-bar256"));
    let big = view(&fixture("gpu-igx-bar8g"));
    assert_ne!(get(&small, 0, "BAR1").value, get(&big, 0, "BAR1").value);
}

/// The integrated GB10 has no memory clock domain and no PCI address of its own to read a
/// NUMA node from: both said, not shown as missing data.
#[test]
fn spark_says_what_an_integrated_gpu_lacks() {
    let v = view(&fixture("gpu-spark"));
    let g = v
        .gpus
        .iter()
        .position(|g| {
            g.facts
                .iter()
                .any(|f| f.field == "integrated (attr 18)" && f.value.as_deref() == Some("yes"))
        })
        .expect("an integrated GPU");
    let mem = get(&v, g, "memory clock");
    assert!(
        mem.value
            .as_deref()
            .is_some_and(|m| m.contains("no memory clock domain"))
            || mem.value.is_none(),
        "{mem:?}"
    );
}

/// Facts recorded on a real H200 (docs/validation-data/gpu-h200-run3) in a root of their own.
#[test]
fn recorded_h200_facts_from_the_validation_data() {
    let d = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(d.path().join("daqtune")).expect("mkdir");
    std::fs::create_dir_all(d.path().join("proc")).expect("mkdir");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs/validation-data/gpu-h200-run3/facts-1.json"),
        d.path().join("daqtune/gpu.json"),
    )
    .expect("copy");
    let v = view(d.path());
    assert_eq!(v.gpus[0].name, "NVIDIA H200");
    assert_eq!(
        get(&v, 0, "BAR1").value.as_deref(),
        Some("262144 MiB (1 MiB used)")
    );
    assert_eq!(get(&v, 0, "persistence mode").value.as_deref(), Some("yes"));
    assert_eq!(
        get(&v, 0, "clock event reasons").value.as_deref(),
        Some("0x1 (gpu_idle)")
    );
    assert_eq!(
        get(&v, 0, "PCIe max link (GPU and slot)").value.as_deref(),
        Some("Gen5 x16")
    );
    assert_eq!(
        get(&v, 0, "dma-buf supported (attr 124)").value.as_deref(),
        Some("yes")
    );
    assert_eq!(v.driver[0].value.as_deref(), Some("580.159.04"));
    assert_eq!(v.driver[2].value.as_deref(), Some("13.0"));
    // No sysfs in this root: the NUMA node is not invented.
    let numa = get(&v, 0, "NUMA node");
    assert!(numa.value.is_none() && numa.note.is_some(), "{numa:?}");
}

#[test]
fn a_root_without_recorded_facts_says_why() {
    let d = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(d.path().join("proc")).expect("mkdir");
    let v = view(d.path());
    assert!(v.gpus.is_empty());
    let why = v.unavailable.clone().expect("a reason");
    assert!(why.contains("gpu.json"), "{why}");
    assert!(text(&v).contains("no GPU facts"), "{}", text(&v));
}
