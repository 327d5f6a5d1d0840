//! Issue 4's acceptance table on recorded GPU facts (`daqtune/gpu.json`), through the engine's
//! API (the report `check --format json` prints). What needs the binary (no `--profile`, the
//! live host, the apply journal, `topo`, the CUDA probe child) is in tune/tests/gpu.rs.

use crate::common;
use common::*;
use daqtune_testkit::str_field as text;

fn gpu_verdicts<'a>(r: &'a serde_json::Value, id: &str) -> Vec<&'a serde_json::Value> {
    r["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["id"] == id)
        .collect()
}

#[test]
fn igx_a6000_bar1_256_peermem_loaded() {
    let r = check_json("gpu-igx-bar256", "igx-orin");
    assert_schema(&r);
    assert_eq!(statuses(&r, "gpu.bar1"), ["warn"]);
    assert_eq!(statuses(&r, "gpu.peermem"), ["pass"]);
    assert_eq!(statuses(&r, "gpu.gpudirect"), ["pass"]);
    let bar1 = verdict(&r, "gpu.bar1");
    assert_eq!(text(bar1, "observed"), "256 MiB");
    assert_eq!(text(bar1, "expected"), ">= 1024 MiB");
    assert!(text(bar1, "fix").contains("displaymodeselector"), "{bar1}");
    assert!(text(bar1, "fix").contains("unusable"), "{bar1}");
    // Subjects name the GPU by UUID and PCI bus id.
    assert_eq!(
        text(bar1, "subject"),
        "GPU-8c3e2b1a-77d4-5a0e-93f1-2c6d4b8e0f15 0005:09:00.0"
    );
}

#[test]
fn igx_a6000_bar1_8g_peermem_not_loaded() {
    // igx-orin takes dma-buf too (NVIDIA/daqiri 3c87196), and this A6000 runs the open module
    // with DMA_BUF_SUPPORTED=1: ready without nvidia_peermem.
    let r = check_json("gpu-igx-bar8g", "igx-orin");
    assert_eq!(statuses(&r, "gpu.peermem"), ["pass"]);
    assert!(text(verdict(&r, "gpu.peermem"), "message").contains("dma-buf"));
    // A profile that allows peermem only gets the diagnosis of the missing module.
    let dir = tempfile::tempdir().expect("tempdir");
    let prof = dir.path().join("igx-peermem.yaml");
    std::fs::write(
        &prof,
        "name: igx-peermem\nextends: igx-orin\ngpu:\n  gpudirect_paths: [peermem]\n",
    )
    .expect("profile");
    let r = check_json("gpu-igx-bar8g", prof.to_str().expect("utf8"));
    assert_schema(&r);
    assert_eq!(statuses(&r, "gpu.bar1"), ["pass"]);
    assert_eq!(statuses(&r, "gpu.peermem"), ["fail"]);
    let pm = verdict(&r, "gpu.peermem");
    assert!(
        text(pm, "message").contains("nvidia_peermem is not loaded"),
        "{pm}"
    );
    assert!(text(pm, "fix").contains("modprobe nvidia_peermem"), "{pm}");
    // The recorded kernel log explains why the last load failed.
    assert!(text(pm, "message").contains("different ib_core"), "{pm}");
    // Unlocked and idle: SM and memory clocks fail, persistence off fails.
    assert_eq!(statuses(&r, "gpu.clocks"), ["fail", "fail", "fail"]);
    let sm = verdict(&r, "gpu.clocks");
    assert!(text(sm, "fix").contains("-lgc 2100,2100"), "{sm}");
}

#[test]
fn spark_gb10_integrated() {
    let r = check_json("gpu-spark", "dgx-spark");
    assert_schema(&r);
    assert_eq!(statuses(&r, "gpu.bar1"), ["n/a"]);
    assert_eq!(statuses(&r, "gpu.peermem"), ["n/a"]);
    assert_eq!(statuses(&r, "gpu.gpudirect"), ["n/a"]);
    assert!(text(verdict(&r, "gpu.gpudirect"), "message").contains("host_pinned"));
    // SM only: no memory-clock verdict, the SM one says why.
    let clocks = gpu_verdicts(&r, "gpu.clocks");
    assert!(clocks
        .iter()
        .all(|v| !text(v, "subject").ends_with(" memory")));
    let sm: Vec<_> = clocks
        .iter()
        .filter(|v| text(v, "subject").ends_with(" SM"))
        .collect();
    assert_eq!(sm.len(), 1);
    assert_eq!(sm[0]["status"], "pass");
    assert!(text(sm[0], "message").contains("SM only"), "{}", sm[0]);
}

#[test]
fn hybrid_judges_each_gpu_on_its_own() {
    let r = check_json("gpu-hybrid", "generic-dgpu");
    assert_schema(&r);
    let dgpu = "GPU-3f9d1c55-0b8e-4a6d-9e27-51c0a8d4e6b2 0000:01:00.0";
    let igpu = "GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9";
    for id in ["gpu.bar1", "gpu.gpudirect", "gpu.peermem"] {
        let vs = gpu_verdicts(&r, id);
        assert_eq!(vs.len(), 2, "{id}: {vs:?}");
        let d = vs.iter().find(|v| v["subject"] == dgpu).expect("discrete");
        let i = vs
            .iter()
            .find(|v| v["subject"] == igpu)
            .expect("integrated");
        assert_eq!(d["status"], "pass", "{id}: {d}");
        assert_eq!(i["status"], "n/a", "{id}: {i}");
    }
}

#[test]
fn recorded_h200_replays_real_values() {
    // Recorded read-only on a real H200 (docs/validation.md): idle and unlocked.
    let r = check_json("gpu-h200", "generic-dgpu");
    assert_schema(&r);
    let subj = "GPU-591f9d37-d2fb-2a25-8958-ca2196a1f978 0000:00:06.0";
    let bar1 = verdict(&r, "gpu.bar1");
    assert_eq!(bar1["subject"], subj);
    assert_eq!(bar1["status"], "pass");
    assert_eq!(text(bar1, "observed"), "262144 MiB");
    let clocks = gpu_verdicts(&r, "gpu.clocks");
    let sm = clocks
        .iter()
        .find(|v| v["subject"] == format!("{subj} SM"))
        .expect("SM verdict");
    assert_eq!(sm["status"], "fail", "{sm}");
    assert!(text(sm, "observed").starts_with("345 MHz P0"), "{sm}");
    assert_eq!(statuses(&r, "gpu.gpudirect"), ["pass"]);
    assert_eq!(
        text(verdict(&r, "gpu.gpudirect"), "observed"),
        "GPU_DIRECT_RDMA_SUPPORTED=1 DMA_BUF_SUPPORTED=1 INTEGRATED=0 cc 9.0"
    );
    assert_eq!(statuses(&r, "gpu.driver"), ["pass"]);
    assert_eq!(
        text(verdict(&r, "gpu.driver"), "observed"),
        "580.159.04, open kernel module"
    );
}

#[test]
fn dmabuf_path_when_the_profile_allows_it() {
    // The H200 host has no nvidia_peermem but the open module and DMA_BUF_SUPPORTED=1.
    let dir = tempfile::tempdir().expect("tempdir");
    let prof = dir.path().join("dmabuf.yaml");
    std::fs::write(
        &prof,
        "name: dmabuf-test\nextends: generic-dgpu\ngpu:\n  gpudirect_paths: [peermem, dmabuf]\n",
    )
    .expect("profile");
    let r = check_json("gpu-h200", prof.to_str().expect("utf8"));
    assert_eq!(statuses(&r, "gpu.peermem"), ["pass"]);
    assert!(text(verdict(&r, "gpu.peermem"), "message").contains("dma-buf"));
    // The proprietary module on x86-2s cannot take the dma-buf path.
    let r = check_json("x86-2s", prof.to_str().expect("utf8"));
    let pm = verdict(&r, "gpu.peermem");
    assert_eq!(pm["status"], "fail");
    assert!(
        text(pm, "observed").contains("proprietary kernel module"),
        "{pm}"
    );
}

#[test]
fn no_recorded_facts_skip_with_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A host root (it has sys/) without recorded GPU facts; an empty root is refused.
    std::fs::create_dir(dir.path().join("sys")).expect("mkdir");
    let (r, code) = evaluate(dir.path(), "generic-dgpu", &[]);
    assert!(matches!(code, 0 | 1));
    for id in [
        "gpu.clocks",
        "gpu.bar1",
        "gpu.gpudirect",
        "gpu.peermem",
        "gpu.driver",
    ] {
        assert_eq!(statuses(&r, id), ["skip"], "{id}");
    }
    assert!(text(verdict(&r, "gpu.bar1"), "message").contains("daqtune/gpu.json"));
}

#[test]
fn replay_of_recorded_h200_equals_the_live_report() {
    // tests/fixtures/gpu-h200-live was captured on a real H200 in the same run as
    // gpu-h200-live.report.json (`daqtune check gpu.* --format json` on the live host,
    // docs/validation.md). Replaying the root must give the same verdicts.
    let live: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("gpu-h200-live.report.json")).expect("live report"),
    )
    .expect("json");
    // The live run judged under generic-dgpu as it was then, with `gpudirect_paths:
    // [peermem]`; dma-buf became a path of the built-in profiles later (NVIDIA/daqiri
    // 3c87196, docs/checks/gpu.peermem.md), so the replay runs under that same setting.
    let dir = tempfile::tempdir().expect("tempdir");
    let prof = dir.path().join("peermem-only.yaml");
    std::fs::write(
        &prof,
        "name: peermem-only\nextends: generic-dgpu\ngpu:\n  gpudirect_paths: [peermem]\n",
    )
    .expect("profile");
    let replay = check_json("gpu-h200-live", prof.to_str().expect("utf8"));
    let pick = |r: &serde_json::Value| -> Vec<(String, String, String, String)> {
        r["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .filter(|c| c["id"].as_str().unwrap_or("").starts_with("gpu."))
            .map(|c| {
                // The live report was taken when gpu.bar1's observed value still carried the
                // BAR1 use ("262144 MiB (1 MiB used)"), which moves with every CUDA context.
                let observed = text(c, "observed");
                let observed = if text(c, "id") == "gpu.bar1" {
                    observed.split(" (").next().unwrap_or("").to_string()
                } else {
                    observed
                };
                (
                    text(c, "id"),
                    text(c, "subject"),
                    text(c, "status"),
                    observed,
                )
            })
            .collect()
    };
    let (l, r) = (pick(&live), pick(&replay));
    assert_eq!(l.len(), 7, "{l:?}");
    // Checks added after the live run (gpu.health) are judged by the next test's capture.
    let r: Vec<_> = r
        .into_iter()
        .filter(|v| l.iter().any(|x| x.0 == v.0))
        .collect();
    assert_eq!(l, r);
}

// ---------------------------------------------------------------------------------------------
// gpu.health (issue 45). tests/fixtures/gpu-h200-health is `daqtune snapshot`'s daqtune/gpu.json
// and kmsg.txt from the lent H200 machine (2026-11-28 11:18 UTC); in the same run,
// gpu-h200-health.nvidia-smi-q.txt is `nvidia-smi -q` and gpu-h200-health.report.json
// `daqtune check gpu.health gpu.clocks gpu.bar1 --format json` on the live host.

/// `Key : value` of the first line under `section` (an indented `nvidia-smi -q` block) whose
/// key is `key`.
fn smi_value(smi: &str, section: &str, key: &str) -> String {
    let mut inside = false;
    let mut depth = 0;
    for line in smi.lines() {
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if t == section {
            inside = true;
            depth = indent;
            continue;
        }
        if inside {
            if indent <= depth && !t.is_empty() {
                inside = false;
                continue;
            }
            if let Some((k, v)) = t.split_once(':') {
                if k.trim() == key {
                    return v.trim().to_string();
                }
            }
        }
    }
    panic!("{section}/{key} not in nvidia-smi -q");
}

fn celsius(v: &str) -> i64 {
    v.trim_end_matches(" C").trim().parse().expect("degrees")
}

#[test]
fn h200_health_readings_equal_nvidia_smi_of_the_same_run() {
    let smi = std::fs::read_to_string(fixture("gpu-h200-health.nvidia-smi-q.txt")).expect("smi");
    let facts: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("gpu-h200-health/daqtune/gpu.json")).expect("facts"),
    )
    .expect("json");
    let h = &facts["gpus"][0]["health"];
    // nvidia-smi 580 prints thresholds relative to the GPU's max operating temperature
    // (T.Limit): the current headroom to it, and each threshold's offset from it. The
    // absolute thresholds NVML gives are therefore temp + headroom - offset.
    let temp = celsius(&smi_value(&smi, "Temperature", "GPU Current Temp"));
    let headroom = celsius(&smi_value(&smi, "Temperature", "GPU T.Limit Temp"));
    let slow = celsius(&smi_value(&smi, "Temperature", "GPU Slowdown T.Limit Temp"));
    let shut = celsius(&smi_value(&smi, "Temperature", "GPU Shutdown T.Limit Temp"));
    assert_eq!(h["slowdown_temp_c"].as_i64(), Some(temp + headroom - slow));
    assert_eq!(h["shutdown_temp_c"].as_i64(), Some(temp + headroom - shut));
    // The snapshot read the temperature moments after nvidia-smi did.
    let t = h["temperature_c"].as_i64().expect("temperature");
    assert!((t - temp).abs() <= 3, "{t} vs {temp}");
    let limit: f64 = smi_value(&smi, "GPU Power Readings", "Current Power Limit")
        .trim_end_matches(" W")
        .parse()
        .expect("watts");
    assert_eq!(h["power_limit_mw"].as_f64(), Some(limit * 1000.0));
    assert_eq!(
        h["ecc_enabled"].as_bool(),
        Some(smi_value(&smi, "ECC Mode", "Current") == "Enabled")
    );
    let dram = |block: &str, key: &str| -> u64 {
        // `Volatile` and `Aggregate` are nested under `ECC Errors`; their first block wins.
        let at = smi.find(&format!("        {block}\n")).expect(block);
        smi_value(&smi[at..], block, key).parse().expect("count")
    };
    assert_eq!(
        h["ecc_volatile_uncorrected"].as_u64(),
        Some(
            dram("Volatile", "DRAM Uncorrectable") + dram("Volatile", "SRAM Uncorrectable SEC-DED")
        )
    );
    assert_eq!(
        h["ecc_aggregate_uncorrected"].as_u64(),
        Some(
            dram("Aggregate", "DRAM Uncorrectable")
                + dram("Aggregate", "SRAM Uncorrectable SEC-DED")
        )
    );
    let rows = &h["remapped_rows"];
    assert_eq!(
        rows["pending"].as_bool(),
        Some(smi_value(&smi, "Remapped Rows", "Pending") == "Yes")
    );
    assert_eq!(
        rows["failure"].as_bool(),
        Some(smi_value(&smi, "Remapped Rows", "Remapping Failure Occurred") == "Yes")
    );
    assert_eq!(
        rows["uncorrectable"].as_u64(),
        smi_value(&smi, "Remapped Rows", "Uncorrectable Error")
            .parse()
            .ok()
    );
    // Hopper retires no pages (it remaps rows): nvidia-smi says N/A, NVML NOT_SUPPORTED.
    assert_eq!(
        smi_value(&smi, "Retired Pages", "Pending Page Blacklist"),
        "N/A"
    );
    assert!(h["retired_pages_pending"].is_null());

    // Replaying the root judges as the live run did.
    let live: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("gpu-h200-health.report.json")).expect("live"),
    )
    .expect("json");
    let replay = check_json("gpu-h200-health", "generic-dgpu");
    let lv = verdict(&live, "gpu.health");
    let rv = verdict(&replay, "gpu.health");
    assert_eq!(text(lv, "status"), "pass", "{lv}");
    // The live run judged the Xid events inside gpu.health (` xids=none` at the end of its
    // observed value); they are gpu.xid's since.
    let live_observed = text(lv, "observed");
    assert_eq!(
        (text(rv, "status"), text(rv, "observed")),
        (
            text(lv, "status"),
            live_observed.trim_end_matches(" xids=none").to_string()
        )
    );
    let xid = verdict(&replay, "gpu.xid");
    assert_eq!(text(xid, "status"), "pass", "{xid}");
    assert!(text(xid, "message").contains("no Xid since boot"), "{xid}");
}

/// The H200 capture with its facts and kernel log edited: the verdict of `gpu.health`, or of
/// `gpu.xid` when a kernel log line is added.
fn health_case(edit: impl FnOnce(&mut serde_json::Value), kmsg: &str) -> serde_json::Value {
    let d = tempfile::tempdir().expect("tempdir");
    copy_tree(&fixture("gpu-h200-health"), d.path());
    let path = d.path().join("daqtune/gpu.json");
    let mut facts: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("facts")).expect("json");
    edit(&mut facts["gpus"][0]);
    std::fs::write(&path, serde_json::to_string(&facts).expect("json")).expect("write");
    let log = d.path().join("daqtune/kmsg.txt");
    let mut text = std::fs::read_to_string(&log).expect("kmsg");
    text.push_str(kmsg);
    std::fs::write(&log, text).expect("write");
    let id = if kmsg.is_empty() {
        "gpu.health"
    } else {
        "gpu.xid"
    };
    let (r, _) = evaluate(d.path(), "generic-dgpu", &[id]);
    verdict(&r, id).clone()
}

#[test]
fn health_fails_on_a_pending_remap_thermal_slowdown_ecc_and_fatal_xid() {
    type Edit = Box<dyn FnOnce(&mut serde_json::Value)>;
    let cases: Vec<(&str, Edit, &str, &str)> = vec![
        (
            "fail",
            Box::new(|g| g["health"]["remapped_rows"]["pending"] = true.into()),
            "",
            "row remap waits for a GPU reset",
        ),
        (
            "fail",
            Box::new(|g| g["health"]["remapped_rows"]["failure"] = true.into()),
            "",
            "row remap failed",
        ),
        (
            // nvmlClocksEventReasonHwThermalSlowdown (0x40) with the idle bit.
            "fail",
            Box::new(|g| g["clock_event_reasons"] = 0x41.into()),
            "",
            "HW thermal slowdown",
        ),
        (
            "fail",
            Box::new(|g| g["health"]["temperature_c"] = 89.into()),
            "",
            "at or above its 89 C slowdown threshold",
        ),
        (
            "warn",
            Box::new(|g| g["health"]["temperature_c"] = 85.into()),
            "",
            "within 5 C of its 89 C slowdown threshold",
        ),
        (
            "fail",
            Box::new(|g| g["health"]["ecc_volatile_uncorrected"] = 2.into()),
            "",
            "2 uncorrectable ECC error(s) since the driver loaded",
        ),
        (
            "warn",
            Box::new(|g| g["health"]["ecc_aggregate_uncorrected"] = 3.into()),
            "",
            "over the GPU's life",
        ),
        (
            "warn",
            Box::new(|g| g["clock_event_reasons"] = 0x4.into()),
            "",
            "software power cap",
        ),
        (
            // The line as NVIDIA/open-gpu-kernel-modules issue 1151 shows it, on this GPU's bus.
            "fail",
            Box::new(|_| {}),
            "NVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off the bus.\n",
            "Xid 79 x1 since boot: GPU has fallen off the bus",
        ),
        (
            "warn",
            Box::new(|_| {}),
            "NVRM: Xid (PCI:0000:00:06): 13, Graphics Exception\nNVRM: Xid (PCI:0000:00:06): 13, Graphics Exception\n",
            "Xid 13 x2 since boot",
        ),
        (
            // Another GPU's Xid is not this GPU's.
            "pass",
            Box::new(|_| {}),
            "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n",
            "no Xid since boot",
        ),
    ];
    for (want, edit, kmsg, says) in cases {
        let v = health_case(edit, kmsg);
        assert_eq!(text(&v, "status"), want, "{says}: {v}");
        assert!(text(&v, "message").contains(says), "{says}: {v}");
        if want == "fail" {
            assert!(!text(&v, "fix").is_empty(), "{v}");
        }
    }
}

#[test]
fn health_without_readings_is_a_skip_not_a_pass() {
    // Facts recorded before daqtune read GPU health: only the clock reasons are there.
    let r = check_json("gpu-h200-live", "generic-dgpu");
    let v = verdict(&r, "gpu.health");
    assert_eq!(text(v, "status"), "skip", "{v}");
    assert!(text(v, "message").contains("recorded before"), "{v}");
}

// ---------------------------------------------------------------------------------------------
// Issue 43: NVML's static answers from the per-boot cache. A warm run asks NVML only what can
// move and takes the rest from the cache file; every recorded GPU host must then be judged
// exactly as when NVML answered everything.

/// A record as a warm run builds it: the live answers NVML gave, the static ones cleared (a
/// warm run does not ask for them), then the cached ones put back from the cache file's JSON.
fn through_the_cache(g: &serde_json::Value) -> serde_json::Value {
    use daqtune_probe::gpu::cache::{NvmlStatic, NVML_STATIC_KEYS};
    use daqtune_probe::gpu::GpuFacts;
    let facts: GpuFacts = serde_json::from_value(g.clone()).expect("gpu facts");
    let Some(stat) = NvmlStatic::from_facts(&facts) else {
        // Not NVML's whole record (a CUDA-only GPU, a failed static call): a warm run asks
        // NVML for all of it, as the cold one did.
        return g.clone();
    };
    let stored: NvmlStatic =
        serde_json::from_str(&serde_json::to_string(&stat).expect("json")).expect("parse");
    let mut warm = facts.clone();
    warm.name = None;
    warm.pci_bus_id = None;
    warm.brand = None;
    warm.architecture = None;
    warm.memory_total_mib = None;
    warm.sm_clock.max_mhz = None;
    warm.sm_clock.default_applications_mhz = None;
    warm.memory_clock.max_mhz = None;
    warm.memory_clock.default_applications_mhz = None;
    warm.memory_clock_domain = None;
    warm.pcie.max_link_gen = None;
    warm.pcie.max_link_width = None;
    warm.pcie.gpu_max_link_gen = None;
    warm.health.slowdown_temp_c = None;
    warm.health.shutdown_temp_c = None;
    warm.unavailable
        .retain(|k, _| !NVML_STATIC_KEYS.contains(&k.as_str()));
    stored.apply(&mut warm);
    assert_eq!(warm, facts, "the cache gives back what NVML said");
    serde_json::to_value(&warm).expect("json")
}

fn gpu_triples(r: &serde_json::Value) -> Vec<(String, String, String, String, String)> {
    r["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["id"].as_str().unwrap_or("").starts_with("gpu."))
        .map(|c| {
            (
                text(c, "id"),
                text(c, "subject"),
                text(c, "status"),
                text(c, "observed"),
                text(c, "message"),
            )
        })
        .collect()
}

#[test]
fn warm_nvml_cache_gives_the_same_verdicts_on_every_recorded_gpu_host() {
    let hosts = [
        ("gpu-h200", "generic-dgpu"),
        ("gpu-h200-live", "generic-dgpu"),
        ("gpu-h200-health", "generic-dgpu"),
        ("gpu-hybrid", "generic-dgpu"),
        ("gpu-igx-bar256", "igx-orin"),
        ("gpu-igx-bar8g", "igx-orin"),
        ("gpu-spark", "dgx-spark"),
    ];
    let mut cached_gpus = 0;
    for (name, profile) in hosts {
        let (cold, _) = evaluate(&fixture(name), profile, &[]);
        let d = tempfile::tempdir().expect("tempdir");
        copy_tree(&fixture(name), d.path());
        let path = d.path().join("daqtune/gpu.json");
        let mut facts: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("facts")).expect("json");
        for g in facts["gpus"].as_array_mut().expect("gpus") {
            let warm = through_the_cache(g);
            if g["nvml_index"].is_u64() {
                cached_gpus += 1;
            }
            *g = warm;
        }
        std::fs::write(&path, serde_json::to_string(&facts).expect("json")).expect("write");
        let (warm, _) = evaluate(d.path(), profile, &[]);
        let (c, w) = (gpu_triples(&cold), gpu_triples(&warm));
        assert!(!c.is_empty(), "{name}: no GPU verdicts");
        assert_eq!(c, w, "{name}");
    }
    assert!(
        cached_gpus >= 5,
        "{cached_gpus} GPUs went through the cache"
    );
}

/// A static call that failed in a way that may not last (a timeout, a GPU in reset) is not
/// cached: the next run asks NVML again instead of carrying the failure for the whole boot.
#[test]
fn a_passing_nvml_failure_is_never_cached() {
    use daqtune_probe::gpu::cache::NvmlStatic;
    use daqtune_probe::gpu::GpuFacts;
    let text = std::fs::read_to_string(fixture("gpu-h200-health/daqtune/gpu.json")).expect("f");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    let mut g: GpuFacts = serde_json::from_value(v["gpus"][0].clone()).expect("facts");
    assert!(NvmlStatic::from_facts(&g).is_some());
    g.health.slowdown_temp_c = None;
    g.unavailable.insert(
        "health.slowdown_temp".into(),
        "Timeout (NVML_ERROR_TIMEOUT)".into(),
    );
    assert_eq!(NvmlStatic::from_facts(&g), None);
    g.unavailable.insert(
        "health.slowdown_temp".into(),
        "Not Supported (NVML_ERROR_NOT_SUPPORTED)".into(),
    );
    let s = NvmlStatic::from_facts(&g).expect("NOT_SUPPORTED holds for the load");
    assert!(s.unavailable.contains_key("health.slowdown_temp"));
}
