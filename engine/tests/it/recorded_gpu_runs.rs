//! Reports taken on a real H100 (docs/validation-data/cache-h100, bench/check-gpu.sh's run):
//! the first check of a boot initialised CUDA and stored its attributes, the second took them
//! from the cache without cuInit, and `--no-cache` read CUDA again. They stay readable as
//! `daqtune.report/v1`, and the cache file they left parses and matches its driver.

use daqtune_engine::report::Report;
use daqtune_probe::gpu::cache::CacheFile;
use daqtune_probe::gpu::CacheOutcome;
use std::path::PathBuf;

fn data(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/validation-data/cache-h100")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn report(name: &str) -> Report {
    serde_json::from_str(&data(name)).expect("a daqtune.report/v1")
}

#[test]
fn the_h100_runs_show_store_hit_and_bypass() {
    let first = report("check-first.json");
    let second = report("check-second.json");
    let fresh = report("check-nocache.json");
    let outcome = |r: &Report| {
        r.gpu_facts
            .as_ref()
            .and_then(|g| g.cuda_cache.as_ref())
            .map(|c| c.outcome)
    };
    assert_eq!(outcome(&first), Some(CacheOutcome::Stored));
    assert_eq!(outcome(&second), Some(CacheOutcome::Hit));
    assert_eq!(outcome(&fresh), Some(CacheOutcome::Bypassed));
    let init = |r: &Report| r.gpu_facts.as_ref().and_then(|g| g.timing.cuda_init_ms);
    assert!(init(&first).is_some_and(|ms| ms > 100.0), "cuInit was paid");
    assert_eq!(init(&second), None, "a hit never initialises CUDA");
    // The cached attributes judge GPUDirect exactly as the live ones did.
    let gd = |r: &Report| {
        r.checks
            .iter()
            .filter(|v| v.id == "gpu.gpudirect")
            .map(|v| (v.subject.clone(), v.status, v.message.clone()))
            .collect::<Vec<_>>()
    };
    assert!(!gd(&first).is_empty());
    assert_eq!(gd(&first), gd(&second));
}

/// The file is a v1 cache (before the module's load identity and NVML's static answers were
/// part of it): its contents still describe the H100, and this build does not trust it, so the
/// first run after an upgrade reads CUDA and NVML afresh.
#[test]
fn the_cache_file_it_left_matches_its_gpu() {
    let text = data("cuda-attrs.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(v["schema"], "daqtune.cuda-cache/v1");
    let driver = v["key"]["driver"].as_str().unwrap_or_default();
    assert!(driver.contains("580.159.04"), "{driver}");
    let gpus = v["key"]["gpus"].as_array().cloned().unwrap_or_default();
    assert_eq!(gpus.len(), 1);
    let key_gpu = gpus[0].as_str().unwrap_or_default();
    assert!(key_gpu.starts_with("0000:00:06.0 GPU-"), "{key_gpu}");
    let dev = &v["devices"][0];
    assert!(key_gpu.ends_with(dev["uuid"].as_str().unwrap_or("-")));
    assert_eq!(dev["attrs"]["gpu_direct_rdma_supported"], true);
    assert_eq!(dev["attrs"]["compute_capability"], "9.0");
    let refused = CacheFile::parse(&text).expect_err("a v1 file is not trusted");
    assert!(refused.contains("daqtune.cuda-cache/v2"), "{refused}");
}

/// After probe and selftest came to share one CUDA driver binding (issue 24), `check
/// --no-cache` on an H100 (2026-11-26, driver 580, the integration build) read the CUDA
/// attributes afresh through it and judged GPUDirect from them.
#[test]
fn the_shared_cuda_binding_read_the_h100() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/validation-data/cuda-binding-h100/check-nocache.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let r: Report = serde_json::from_str(&text).expect("a daqtune.report/v1");
    let facts = r.gpu_facts.as_ref().expect("gpu facts");
    assert_eq!(
        facts.cuda_cache.as_ref().map(|c| c.outcome),
        Some(CacheOutcome::Bypassed)
    );
    assert!(
        facts.timing.cuda_init_ms.is_some_and(|ms| ms > 0.0),
        "cuInit ran"
    );
    let gd: Vec<_> = r
        .checks
        .iter()
        .filter(|v| v.id == "gpu.gpudirect")
        .collect();
    assert_eq!(gd.len(), 1);
    assert_eq!(gd[0].status.to_string(), "pass");
    assert!(gd[0]
        .observed
        .as_deref()
        .is_some_and(|o| o.contains("GPU_DIRECT_RDMA_SUPPORTED=1") && o.contains("cc 9.0")));
}

/// The v2 cache a release build left on the lent H200 (2026-11-28, docs/validation-data/
/// check-h200-nvml-cache-2026-11-28, bench/check-gpu.sh's run) is trusted, and the static
/// NVML answers it keeps are what `nvidia-smi -q` printed for that GPU on the same lent machine
/// (tests/real-hosts/nvsmi-q-h200-lent-vm-daqtune): the cache may only hold what the driver says.
#[test]
fn the_h200_v2_cache_holds_what_nvidia_smi_printed() {
    let top = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(
        top.join("docs/validation-data/check-h200-nvml-cache-2026-11-28/cache.json"),
    )
    .expect("cache file");
    let c = CacheFile::parse(&text).expect("a v2 cache is read");
    let smi = std::fs::read_to_string(
        top.join("tests/real-hosts/nvsmi-q-h200-lent-vm-daqtune/nvidia-smi-q.txt"),
    )
    .expect("nvidia-smi -q");
    // "        SM    : 1980 MHz" under the given section header of nvidia-smi -q.
    let under = |section: &str, field: &str| -> String {
        let mut lines = smi.lines().skip_while(|l| l.trim() != section).skip(1);
        lines
            .find(|l| l.trim_start().starts_with(field) && l.contains(':'))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| panic!("{section}/{field} not in nvidia-smi -q"))
    };
    let mhz = |v: String| -> u32 { v.trim_end_matches(" MHz").parse().expect("MHz") };
    assert_eq!(c.nvml.len(), 1, "one GPU");
    let n = &c.nvml[0];
    assert_eq!(n.sm_max_mhz, Some(mhz(under("Max Clocks", "SM"))));
    assert_eq!(n.memory_max_mhz, Some(mhz(under("Max Clocks", "Memory"))));
    assert_eq!(
        n.sm_default_applications_mhz,
        Some(mhz(under("Default Applications Clocks", "Graphics")))
    );
    assert_eq!(
        n.memory_default_applications_mhz,
        Some(mhz(under("Default Applications Clocks", "Memory")))
    );
    assert_eq!(
        n.memory_total_mib.map(|m| format!("{m} MiB")),
        Some(under("FB Memory Usage", "Total"))
    );
    let arch = smi
        .lines()
        .find_map(|l| l.trim().strip_prefix("Product Architecture"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_ascii_lowercase());
    assert_eq!(n.architecture, arch);
    assert_eq!(
        n.pcie_gpu_max_link_gen.map(|g| g.to_string()),
        Some(under("GPU Link Info", "Device Max"))
    );
}
