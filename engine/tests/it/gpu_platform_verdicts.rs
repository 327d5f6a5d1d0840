//! Issue 41 item 3, the GPU / PCIe / platform verdicts, each judged against evidence from
//! outside daqtune: DAQIRI's tune_system.py (NVIDIA/daqiri 89eacf7) for BAR1, NVML's
//! documentation of nvmlClocksEventReasons for the clock events, the fixture roots' own GPU
//! facts (CUDA INTEGRATED) for the platform, the PCIe capability registers for link speed.
//! Each test edits a copy of a fixture root in its own tempdir.

use crate::common;
use common::*;
use daqtune_testkit::checks_with_id as of;
use daqtune_testkit::str_field as s;
use serde_json::Value;
use std::path::Path;

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let ty = e.file_type().expect("type");
        let dst = to.join(e.file_name());
        if ty.is_symlink() {
            let target = std::fs::read_link(e.path()).expect("readlink");
            std::os::unix::fs::symlink(target, &dst).expect("symlink");
        } else if ty.is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).expect("copy");
        }
    }
}

/// A copy of fixture `name` whose first recorded GPU `edit` changes.
fn root_with_gpu(name: &str, edit: impl FnOnce(&mut Value)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(&fixture(name), dir.path());
    let path = dir.path().join("daqtune/gpu.json");
    let mut facts: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("gpu.json")).expect("json");
    edit(&mut facts["gpus"][0]);
    // The copy is a plain file now (the fixture may be read-only).
    let _ = std::fs::remove_file(&path);
    std::fs::write(&path, serde_json::to_string_pretty(&facts).expect("ser")).expect("write");
    dir
}

/// An RTX PRO 6000 Blackwell Server Edition: 96 GB GDDR7 (NVML reports 97887 MiB), compute
/// capability 12.0, here with Resizable BAR not fully open (16 GiB BAR1).
fn rtx_pro_6000_bse(g: &mut Value, bar1_mib: u64) {
    g["name"] = "NVIDIA RTX PRO 6000 Blackwell Server Edition".into();
    g["cuda"]["name"] = g["name"].clone();
    g["cuda"]["compute_capability"] = "12.0".into();
    g["memory_total_mib"] = 97887.into();
    g["bar1"]["total_bytes"] = (bar1_mib * 1024 * 1024).into();
}

#[test]
fn bar1_blackwell_by_architecture_not_by_name() {
    // tune_system.py (89eacf7) holds Blackwell Server Edition GPUs to 32 GiB: a 16 GiB BAR1
    // warns although no `*B200*` name matches.
    let root = root_with_gpu("gpu-h200", |g| rtx_pro_6000_bse(g, 16384));
    let r = check_json_root(root.path(), "generic-dgpu");
    let v = of(&r, "gpu.bar1");
    assert_eq!(v.len(), 1);
    assert_eq!(v[0]["status"], "warn", "{}", v[0]);
    assert_eq!(s(v[0], "expected"), ">= 32768 MiB");
    assert!(s(v[0], "message").contains("blackwell"), "{}", v[0]);
    assert!(s(v[0], "message").contains("12.0"), "{}", v[0]);

    // The same card with Resizable BAR open (128 GiB, as 89eacf7 measured) passes.
    let root = root_with_gpu("gpu-h200", |g| rtx_pro_6000_bse(g, 131072));
    let r = check_json_root(root.path(), "generic-dgpu");
    assert_eq!(of(&r, "gpu.bar1")[0]["status"], "pass");

    // NVML's architecture alone (no CUDA record) is enough.
    let root = root_with_gpu("gpu-h200", |g| {
        rtx_pro_6000_bse(g, 16384);
        g["cuda"] = Value::Null;
        g["architecture"] = "blackwell".into();
    });
    let r = check_json_root(root.path(), "generic-dgpu");
    assert_eq!(of(&r, "gpu.bar1")[0]["status"], "warn");

    // A Hopper GPU (compute capability 9.0) with 16 GiB is held to the generic 1 GiB.
    let root = root_with_gpu("gpu-h200", |g| {
        g["bar1"]["total_bytes"] = (16384u64 * 1024 * 1024).into();
    });
    let r = check_json_root(root.path(), "generic-dgpu");
    assert_eq!(of(&r, "gpu.bar1")[0]["status"], "pass");

    // A 16 GB Blackwell card cannot expose 32 GiB: its full BAR1 is its framebuffer rounded
    // up to a power of two (16 GiB), and that passes.
    let root = root_with_gpu("gpu-h200", |g| {
        rtx_pro_6000_bse(g, 16384);
        g["name"] = "NVIDIA RTX PRO 2000 Blackwell".into();
        g["memory_total_mib"] = 16303.into();
    });
    let r = check_json_root(root.path(), "generic-dgpu");
    let v = of(&r, "gpu.bar1");
    assert_eq!(v[0]["status"], "pass", "{}", v[0]);
    assert_eq!(s(v[0], "expected"), ">= 16384 MiB");
}

#[test]
fn clock_event_reasons_are_a_gpu_clocks_verdict() {
    let events = |r: &Value| -> Vec<Value> {
        of(r, "gpu.clocks")
            .into_iter()
            .filter(|v| s(v, "subject").ends_with(" clock events"))
            .cloned()
            .collect()
    };
    // nvml.h: 0x40 HW thermal slowdown, 0x80 HW power brake ("reducing the core clocks by a
    // factor of 2 or more"): fail, with the reasons named.
    for (mask, name) in [
        (0x48u64, "hw_thermal_slowdown"),
        (0x88, "hw_power_brake_slowdown"),
    ] {
        let root = root_with_gpu("gpu-h200", |g| g["clock_event_reasons"] = mask.into());
        let r = check_json_root(root.path(), "generic-dgpu");
        let e = events(&r);
        assert_eq!(e.len(), 1, "{mask:#x}: {e:?}");
        assert_eq!(e[0]["status"], "fail", "{}", e[0]);
        assert!(s(&e[0], "observed").contains(name), "{}", e[0]);
        assert!(s(&e[0], "observed").contains("hw_slowdown"), "{}", e[0]);
    }
    // SW power cap (0x4), SW thermal (0x20), HW slowdown alone (0x8): warn.
    for (mask, name) in [
        (0x4u64, "sw_power_cap"),
        (0x20, "sw_thermal_slowdown"),
        (0x8, "hw_slowdown"),
    ] {
        let root = root_with_gpu("gpu-h200", |g| g["clock_event_reasons"] = mask.into());
        let r = check_json_root(root.path(), "generic-dgpu");
        let e = events(&r);
        assert_eq!(e.len(), 1, "{mask:#x}: {e:?}");
        assert_eq!(e[0]["status"], "warn", "{}", e[0]);
        assert_eq!(s(&e[0], "observed"), name);
    }
    // GPU idle (0x1), the recorded H200's own state, is no slowdown.
    let r = check_json("gpu-h200", "generic-dgpu");
    assert!(events(&r).is_empty());
}

#[test]
fn a_profile_of_another_platform_warns_and_facts_decide_integration() {
    // The IGX root (RTX A6000, INTEGRATED=0) under dgx-spark: `platform` warns, and
    // pcie.topology judges the discrete GPU's path instead of the profile's "integrated".
    let (r, _) = evaluate(&fixture("igx-untuned"), "dgx-spark", &[]);
    let p: Vec<&Value> = of(&r, "platform")
        .into_iter()
        .filter(|v| v["status"] == "warn")
        .collect();
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(s(p[0], "message").contains("dgx-spark"), "{}", p[0]);
    assert!(s(p[0], "message").contains("IGX Orin"), "{}", p[0]);
    let t = of(&r, "pcie.topology");
    assert_eq!(t.len(), 1);
    assert_eq!(t[0]["status"], "pass", "{}", t[0]);
    assert!(s(t[0], "message").starts_with("PXB"), "{}", t[0]);

    // The Spark root under igx-orin: `platform` warns; GB10 is integrated by its facts, so
    // pcie.topology and gpu.peermem agree (n/a both).
    let (r, _) = evaluate(&fixture("spark"), "igx-orin", &[]);
    assert!(of(&r, "platform")
        .iter()
        .any(|v| v["status"] == "warn" && s(v, "message").contains("DGX Spark")));
    let t = of(&r, "pcie.topology");
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(t[0]["status"], "n/a", "{}", t[0]);
    assert!(s(t[0], "message").contains("INTEGRATED=1"), "{}", t[0]);
    assert_eq!(of(&r, "gpu.peermem")[0]["status"], "n/a");

    // The x86 H100 host under dgx-spark warns too; its own detection (none) under
    // generic-dgpu, and each root under its detected profile, do not.
    let (r, _) = evaluate(&fixture("x86-2s"), "dgx-spark", &["platform"]);
    assert!(of(&r, "platform")
        .iter()
        .any(|v| v["status"] == "warn" && s(v, "subject") == "profile"));
    for (root, prof) in [
        ("x86-2s", "generic-dgpu"),
        ("spark", "dgx-spark"),
        ("igx-untuned", "igx-orin"),
    ] {
        let (r, _) = evaluate(&fixture(root), prof, &["platform"]);
        assert!(
            of(&r, "platform")
                .iter()
                .all(|v| s(v, "subject") != "profile"),
            "{root} under {prof}: {r}"
        );
    }
    // generic-dgpu on the Spark contradicts its detection (dgx-spark extends generic-dgpu,
    // not the other way round).
    let (r, _) = evaluate(&fixture("spark"), "generic-dgpu", &["platform"]);
    assert!(of(&r, "platform").iter().any(
        |v| s(v, "subject") == "profile" && s(v, "message").contains("detected as `dgx-spark`")
    ));
}

#[test]
fn gpu_link_speed_is_judged_by_capability_and_load() {
    let gpu_link = |r: &Value| -> Value {
        of(r, "pcie.link")
            .into_iter()
            .find(|v| s(v, "subject").starts_with("0000:17:00.0"))
            .cloned()
            .unwrap_or_else(|| panic!("no verdict for the GPU: {r}"))
    };
    // x86-2s's H100 at 0000:17:00.0 idles at 2.5 GT/s (LnkSta) with LnkCap 16 GT/s; NVML says
    // 0 % busy with the GPU-idle reason: idle, downshifted, a pass.
    let (r, _) = evaluate(&fixture("x86-2s"), "generic-dgpu", &["pcie.link"]);
    let v = gpu_link(&r);
    assert_eq!(v["status"], "pass", "{v}");
    assert!(s(&v, "message").contains("idle, downshifted"), "{v}");
    assert!(!s(&v, "message").contains("degraded"), "{v}");

    // The same GPU busy (85 %, no idle reason) at 2.5 GT/s is a slow link.
    let root = root_with_gpu("x86-2s", |g| {
        assert_eq!(g["pci_bus_id"], "0000:17:00.0");
        g["utilization_pct"] = 85.into();
        g["clock_event_reasons"] = 0.into();
    });
    let (r, _) = evaluate(root.path(), "generic-dgpu", &["pcie.link"]);
    let v = gpu_link(&r);
    assert_eq!(v["status"], "warn", "{v}");
    assert!(s(&v, "message").contains("under load"), "{v}");

    // Without NVML (a capture with no GPU facts) the current speed is not conclusive: no
    // failure, and the message says why.
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(&fixture("x86-2s"), dir.path());
    std::fs::remove_file(dir.path().join("daqtune/gpu.json")).expect("rm gpu.json");
    let (r, _) = evaluate(dir.path(), "generic-dgpu", &["pcie.link"]);
    let v = gpu_link(&r);
    assert_eq!(v["status"], "pass", "{v}");
    assert!(s(&v, "message").contains("not conclusive for a GPU"), "{v}");
}

#[test]
fn dmabuf_is_a_gpudirect_path_on_igx() {
    // DAQIRI's IGX tab since NVIDIA/daqiri 3c87196: "DAQIRI supports GPUDirect setups based
    // on either nvidia-peermem or dma-buf". The IGX root's RTX A6000 runs the open kernel
    // module and reports DMA_BUF_SUPPORTED=1 on kernel 5.15: ready without nvidia_peermem.
    let (r, _) = evaluate(&fixture("igx-untuned"), "igx-orin", &["gpu.peermem"]);
    let v = of(&r, "gpu.peermem");
    assert_eq!(v.len(), 1);
    assert_eq!(v[0]["status"], "pass", "{}", v[0]);
    assert!(s(v[0], "message").contains("dma-buf"), "{}", v[0]);
    // tune_system.py's caveat (89eacf7): stock DPDK still needs nvidia_peermem.
    assert!(s(v[0], "message").contains("stock DPDK"), "{}", v[0]);
    assert_eq!(s(v[0], "expected"), "peermem or dmabuf");

    // dma-buf export needs kernel 5.12+ (3c87196's concepts page, 7c21e33's error text): on
    // a 5.10 kernel the same GPU has no path.
    let dir = tempfile::tempdir().expect("tempdir");
    copy_tree(&fixture("igx-untuned"), dir.path());
    let rel = dir.path().join("proc/sys/kernel/osrelease");
    let _ = std::fs::remove_file(&rel);
    std::fs::write(&rel, "5.10.120-tegra\n").expect("osrelease");
    let (r, _) = evaluate(dir.path(), "igx-orin", &["gpu.peermem"]);
    let v = of(&r, "gpu.peermem");
    assert_eq!(v[0]["status"], "fail", "{}", v[0]);
    assert!(s(v[0], "observed").contains("5.12"), "{}", v[0]);
}

#[test]
fn mps_platform_limit_reaches_json_textfile_nfd_and_text() {
    use daqtune_engine::{commands, fleet, hostroot, report};
    // The Spark root's CX-7 functions run MPS 128 B where the path supports 512 B: a pass
    // (seed 000 Step 2: MPS is "not configurable"), but the cap is a fact every output keeps.
    let host = hostroot::open_root(Some(&fixture("spark"))).expect("root");
    let lp = commands::load_profile("dgx-spark").expect("profile");
    let rep = commands::evaluate_with_app(&host, &lp, vec!["pcie.mps".into()], false, None);
    let limited: Vec<_> = rep.checks.iter().filter(|v| v.limit.is_some()).collect();
    assert!(!limited.is_empty(), "{:#?}", rep.checks);
    for v in &limited {
        assert_eq!(v.status, daqtune_engine::verdict::Status::Pass, "{v:?}");
        let l = v.limit.as_ref().expect("limit");
        assert_eq!(l.value, "128");
        assert!(l.note.contains("512 B"), "{l:?}");
    }
    let json: Value = serde_json::from_str(&report::json(&rep)).expect("json");
    assert!(of(&json, "pcie.mps").iter().any(
        |v| v["limit"]["value"] == "128" && s(&v["limit"], "note").contains("not configurable")
    ));
    let prom = fleet::prometheus::render(&rep);
    assert!(
        prom.lines()
            .any(|l| l.starts_with("daqtune_platform_limit{id=\"pcie.mps\"")
                && l.contains("limit=\"128\"")
                && l.ends_with(" 1")),
        "{prom}"
    );
    let nfd = fleet::nfd::render(&rep, std::time::Duration::from_secs(3600));
    assert!(
        nfd.lines()
            .any(|l| l == "daqtune.feature.node.kubernetes.io/limit.pcie.mps=128"),
        "{nfd}"
    );
    let text = daqtune_render::report::text(&rep, false, true);
    assert!(text.contains("platform limit: MPS 128 B"), "{text}");
}
