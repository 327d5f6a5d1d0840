//! `gpu.clocks`, `gpu.bar1`, `gpu.gpudirect`, `gpu.peermem`, `gpu.driver`.
//!
//! Every GPU is judged on its own, named by UUID plus PCI bus id (integrated GPUs have none),
//! so a hybrid host (integrated + discrete) gets `n/a` for the integrated GPU and real verdicts
//! for the discrete one. Facts come from NVML/CUDA on the live host and from
//! `daqtune/gpu.json` under `--root` (see docs/gpu-facts.md).

use super::{CheckDef, Context};
use crate::profile::glob_match;
use crate::verdict::{Area, Verdict};
use daqtune_probe::gpu::{
    decode_event_reasons, DomainClocks, GpuFacts, GpuSnapshot, KernelModule, REASON_GPU_IDLE,
};

pub const CLOCKS: CheckDef = CheckDef {
    id: "gpu.clocks",
    area: Area::Gpu,
    title: "GPU SM and memory clocks held at their maximum; persistence mode",
    aliases: &["gpu-clock", "gpu-clocks", "clocks"],
    doc: include_str!("../../../docs/checks/gpu.clocks.md"),
    needs_root: false,
    run: run_clocks,
};

pub const BAR1: CheckDef = CheckDef {
    id: "gpu.bar1",
    area: Area::Gpu,
    title: "GPU BAR1 aperture size",
    aliases: &["bar1-size", "bar1"],
    doc: include_str!("../../../docs/checks/gpu.bar1.md"),
    needs_root: false,
    run: run_bar1,
};

pub const GPUDIRECT: CheckDef = CheckDef {
    id: "gpu.gpudirect",
    area: Area::Gpu,
    title: "GPUDirect RDMA / dma-buf support per GPU (CUDA attributes)",
    aliases: &["gpudirect"],
    doc: include_str!("../../../docs/checks/gpu.gpudirect.md"),
    needs_root: false,
    run: run_gpudirect,
};

pub const PEERMEM: CheckDef = CheckDef {
    id: "gpu.peermem",
    area: Area::Gpu,
    title: "GPUDirect kernel path: nvidia_peermem or dma-buf",
    aliases: &["peermem", "nvidia-peermem"],
    doc: include_str!("../../../docs/checks/gpu.peermem.md"),
    needs_root: false,
    run: run_peermem,
};

pub const DRIVER: CheckDef = CheckDef {
    id: "gpu.driver",
    area: Area::Gpu,
    title: "NVIDIA driver: version, open or proprietary kernel module, GeForce",
    aliases: &["gpu-driver", "driver"],
    doc: include_str!("../../../docs/checks/gpu.driver.md"),
    needs_root: false,
    run: run_driver,
};

const HOST_PINNED: &str =
    "use `kind: host_pinned` data buffers (cudaHostAlloc; seed 000, DGX Spark tab)";

/// The GPU facts, or the verdict that says why there are none. Also skips when no GPU is
/// visible: a host without a GPU cannot pass a GPU check.
fn gpus<'c>(ctx: &'c Context, id: &str) -> Result<&'c GpuSnapshot, Vec<Verdict>> {
    let snap = ctx
        .gpus()
        .map_err(|e| vec![Verdict::skip(id, "host", e.to_string())])?;
    if let Some(reason) = snap.unavailable_reason() {
        return Err(vec![Verdict::skip(
            id,
            "host",
            format!("no NVIDIA driver library answered ({reason})"),
        )]);
    }
    if snap.gpus.is_empty() {
        return Err(vec![Verdict::skip(
            id,
            "host",
            "the NVIDIA driver libraries load but see no GPU",
        )]);
    }
    Ok(snap)
}

fn why_missing(g: &GpuFacts, key: &str) -> String {
    g.unavailable
        .get(key)
        .map(|r| format!(" ({r})"))
        .unwrap_or_default()
}

fn integrated(g: &GpuFacts) -> bool {
    g.integrated() == Some(true)
}

// ---------------------------------------------------------------------------------------------
// gpu.clocks

/// What NVML shows about one clock domain being held at its maximum.
#[derive(Debug, PartialEq, Eq)]
enum Held {
    /// The P-state floor is at the maximum: a lock, or a fixed clock (HBM).
    Floor { floor: u32 },
    /// The GPU is idle yet runs at the maximum.
    IdleAtMax { current: u32 },
    /// The GPU is idle and the clock dropped: not held.
    Dropped { current: u32 },
    /// The GPU is busy (or idleness unknown) and nothing shows a lock: cannot tell.
    Unknown { why: String },
}

fn judge_domain(c: &DomainClocks, target: u32, tol: u32, idle: Option<bool>) -> Held {
    let near = |v: u32| v.saturating_add(tol) >= target;
    if let Some(floor) = c.pstate_min_mhz.filter(|f| *f > 0 && near(*f)) {
        return Held::Floor { floor };
    }
    match (idle, c.current_mhz) {
        (Some(true), Some(cur)) if near(cur) => Held::IdleAtMax { current: cur },
        (Some(true), Some(cur)) => Held::Dropped { current: cur },
        (Some(false), _) => Held::Unknown {
            why: "the GPU is busy, so its current clock says nothing about a lock, and the P-state floor is below the maximum".into(),
        },
        _ => Held::Unknown {
            why: "NVML reports neither a P-state floor at the maximum nor whether the GPU is idle".into(),
        },
    }
}

/// Idle: NVML's `gpu_idle` clock event reason, else 0 % utilisation.
fn is_idle(g: &GpuFacts) -> Option<bool> {
    match (g.clock_event_reasons, g.utilization_pct) {
        (Some(r), _) if r & REASON_GPU_IDLE != 0 => Some(true),
        (_, Some(u)) => Some(u == 0),
        (Some(_), None) => Some(false),
        (None, None) => None,
    }
}

fn clock_verdict(
    ctx: &Context,
    g: &GpuFacts,
    domain: &str,
    c: &DomainClocks,
    note: &str,
) -> Verdict {
    const ID: &str = "gpu.clocks";
    let tol = ctx.profile.profile.gpu.clock_tolerance_mhz;
    let subject = format!("{} {domain}", g.subject());
    let key = if domain == "SM" {
        "sm_clock"
    } else {
        "memory_clock"
    };
    let Some(target) = c.max_mhz.filter(|m| *m > 0) else {
        return Verdict::skip(
            ID,
            subject,
            format!(
                "NVML reports no maximum {domain} clock{}",
                why_missing(g, &format!("{key}.max"))
            ),
        );
    };
    let idle = is_idle(g);
    let range = match (c.pstate_min_mhz, c.pstate_max_mhz) {
        (Some(a), Some(b)) => format!(", P-state range {a}-{b} MHz"),
        _ => String::new(),
    };
    let pstate = g.pstate.map(|p| format!(" P{p}")).unwrap_or_default();
    let reasons = g
        .clock_event_reasons
        .map(|r| {
            let names = decode_event_reasons(r);
            if names.is_empty() {
                String::new()
            } else {
                format!(", clock events: {}", names.join(","))
            }
        })
        .unwrap_or_default();
    let util = g
        .utilization_pct
        .map(|u| format!(", {u}% busy"))
        .unwrap_or_default();
    let observed = format!(
        "{}{pstate}{range}{util}{reasons}",
        c.current_mhz
            .map(|v| format!("{v} MHz"))
            .unwrap_or_else(|| "current clock unknown".into())
    );
    let expected = format!("held at {target} MHz (tolerance {tol} MHz)");
    let flag = if domain == "SM" { "lgc" } else { "lmc" };
    let fix = format!(
        "sudo daqtune apply --only gpu.clocks   (or: sudo nvidia-smi -i {} -{flag} {target},{target}; it lasts until reboot or driver reload)",
        g.uuid
    );
    // A lock daqtune's own apply made (journal) settles what NVML's readings leave open, and
    // turns a dropped clock into "the lock was lost".
    let journal = ctx
        .applied_gpu_locks()
        .iter()
        .rev()
        .find(|(uuid, d, _)| uuid == &g.uuid && d.as_str() == domain)
        .map(|(_, _, run)| run.clone());
    let by_us = journal
        .as_ref()
        .map(|run| format!(" (locked by daqtune apply run {run})"))
        .unwrap_or_default();
    let v = match judge_domain(c, target, tol, idle) {
        Held::Floor { floor } => Verdict::pass(
            ID,
            subject,
            format!("{domain} clock held: the P-state floor is {floor} MHz for a {target} MHz maximum{by_us}{note}"),
        ),
        Held::IdleAtMax { current } => Verdict::pass(
            ID,
            subject,
            format!("{domain} clock held: the GPU is idle yet runs at {current} MHz of {target}{by_us}{note}"),
        ),
        Held::Dropped { current } => {
            let lost = journal
                .as_ref()
                .map(|run| format!("; daqtune locked it in apply run {run}, so the lock was lost since (driver reload or reboot: enable the gpu-clocks unit)"))
                .unwrap_or_default();
            Verdict::fail(
                ID,
                subject,
                format!("{domain} clock not held: the idle GPU dropped to {current} MHz of {target} MHz, so the first packets after a pause meet a slow GPU{lost}{note}"),
            )
            .fix(fix)
        }
        Held::Unknown { why } => match &journal {
            Some(run) => Verdict::pass(
                ID,
                subject,
                format!("{domain} clock locked at its maximum by daqtune apply run {run} (journal); NVML's readings cannot confirm it now: {why}{note}"),
            ),
            None => Verdict::skip(
                ID,
                subject,
                format!("cannot tell whether the {domain} clock is held: {why}; run the check again while the GPU is idle{note}"),
            ),
        },
    };
    v.observed(observed).expected(expected)
}

fn run_clocks(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "gpu.clocks";
    let snap = match gpus(ctx, ID) {
        Ok(s) => s,
        Err(v) => return v,
    };
    let p = &ctx.profile.profile.gpu;
    let mut out = Vec::new();
    for g in &snap.gpus {
        if g.nvml_index.is_none() {
            out.push(Verdict::skip(
                ID,
                g.subject(),
                format!(
                    "NVML does not manage this GPU ({}), so its clocks cannot be read{}",
                    g.display_name(),
                    snap.nvml
                        .reason()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
            ));
            continue;
        }
        let no_mem_domain = g.memory_clock_domain == Some(false);
        let note = if no_mem_domain {
            " (no separate memory clock domain: SM only)"
        } else {
            ""
        };
        if p.lock_sm_clock {
            out.push(clock_verdict(ctx, g, "SM", &g.sm_clock, note));
        }
        if p.lock_memory_clock && !no_mem_domain {
            out.push(clock_verdict(ctx, g, "memory", &g.memory_clock, ""));
        }
        if p.persistence {
            out.push(persistence_verdict(ctx, g));
        }
    }
    if out.is_empty() {
        out.push(Verdict::pass(
            ID,
            "host",
            "the profile asks for no clock lock and no persistence mode",
        ));
    }
    out
}

fn persistence_verdict(ctx: &Context, g: &GpuFacts) -> Verdict {
    const ID: &str = "gpu.clocks";
    let subject = format!("{} persistence", g.subject());
    let daemon = ctx
        .processes()
        .iter()
        .any(|p| p == "nvidia-persistenced" || p == "nvidia-persiste");
    match g.persistence_mode {
        Some(true) => Verdict::pass(ID, subject, "persistence mode is on: the driver keeps the GPU initialised (and its clock locks) with no client").observed("enabled").expected("enabled"),
        Some(false) if daemon => Verdict::pass(ID, subject, "nvidia-persistenced is running and keeps the GPU initialised").observed("disabled, nvidia-persistenced running").expected("enabled"),
        Some(false) => Verdict::fail(
            ID,
            subject,
            "persistence mode is off and nvidia-persistenced is not running: the driver tears the GPU down when the last client exits, dropping clock locks and adding hundreds of ms to the next start",
        )
        .observed("disabled")
        .expected("enabled")
        .fix(format!(
            "sudo daqtune apply --only gpu.clocks   (or: sudo systemctl enable --now nvidia-persistenced, or sudo nvidia-smi -i {} -pm 1)",
            g.uuid
        )),
        None if integrated(g) => Verdict::na(
            ID,
            subject,
            format!(
                "persistence mode is not reported on this integrated GPU{}; clock locks still hold for the driver session (seed 000, Spark)",
                why_missing(g, "persistence_mode")
            ),
        ),
        None => Verdict::skip(
            ID,
            subject,
            format!("NVML does not report persistence mode{}", why_missing(g, "persistence_mode")),
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// gpu.bar1

/// The BAR1 size the profile requires for this GPU, and why.
fn bar1_required(ctx: &Context, g: &GpuFacts) -> (u64, String) {
    let p = &ctx.profile.profile.gpu;
    let mut req = (p.bar1_min_mib, "the profile's bar1_min_mib".to_string());
    if let Some(name) = &g.name {
        for (pat, mib) in &p.bar1_min_by_name {
            if glob_match(pat, name) && *mib > req.0 {
                req = (*mib, format!("the profile's minimum for `{pat}`"));
            }
        }
    }
    req
}

fn run_bar1(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "gpu.bar1";
    let snap = match gpus(ctx, ID) {
        Ok(s) => s,
        Err(v) => return v,
    };
    let rec = ctx.profile.profile.gpu.bar1_recommended_mib;
    let mut out = Vec::new();
    for g in &snap.gpus {
        if integrated(g) {
            out.push(Verdict::na(
                ID,
                g.subject(),
                format!(
                    "{} is an integrated GPU with unified memory: there is no separate BAR1 aperture to size (seed 000 Step 8)",
                    g.display_name()
                ),
            ));
            continue;
        }
        let Some(bar1) = g.bar1 else {
            out.push(Verdict::skip(
                ID,
                g.subject(),
                format!("NVML does not report BAR1{}", why_missing(g, "bar1")),
            ));
            continue;
        };
        let (req, why) = bar1_required(ctx, g);
        let total = bar1.total_mib();
        // BAR1 use moves with every CUDA context (this run's own included), so it is told in
        // the message but kept out of `observed`, which `diff` compares.
        let observed = format!("{total} MiB");
        let v = if total < req {
            Verdict::warn(
                ID,
                g.subject(),
                format!(
                    "{} has a {total} MiB BAR1, below {req} MiB ({why}): GPUDirect maps GPU buffers through BAR1, so registrations fail once it is full",
                    g.display_name()
                ),
            )
            .fix(format!(
                "BAR1 is set by firmware, never by daqtune: enable Resizable BAR in the BIOS (Advanced > PCIe), then, if the GPU supports physical resizable BAR and is listed for NVIDIA's Display Mode Selector, run `sudo ./displaymodeselector --gpumode physical_display_enabled_8GB_bar1` with no display server running and the nvidia modules unloaded, then reboot. Risks (seed 000 Step 8): without BIOS and GPU resizable-BAR support the flash can make the GPU unusable; Secure Boot blocks it (/dev/mem: Operation not permitted) — disable it for the update. `daqtune explain gpu.bar1` has the full procedure for {}",
                g.pci_bus_id.as_deref().unwrap_or(&g.uuid)
            ))
        } else if let Some(r) = rec.filter(|r| total < *r) {
            Verdict::pass(
                ID,
                g.subject(),
                format!(
                    "{total} MiB BAR1 meets the {req} MiB minimum (the profile recommends {r} MiB)"
                ),
            )
        } else {
            Verdict::pass(
                ID,
                g.subject(),
                format!("{total} MiB BAR1 meets the {req} MiB minimum"),
            )
        };
        out.push(v.observed(observed).expected(format!(">= {req} MiB")));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// gpu.gpudirect

fn flag(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "1",
        Some(false) => "0",
        None => "?",
    }
}

fn allows(ctx: &Context, path: &str) -> bool {
    ctx.profile
        .profile
        .gpu
        .gpudirect_paths
        .iter()
        .any(|p| p == path)
}

fn run_gpudirect(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "gpu.gpudirect";
    let snap = match gpus(ctx, ID) {
        Ok(s) => s,
        Err(v) => return v,
    };
    let mut out = Vec::new();
    for g in &snap.gpus {
        let Some(c) = &g.cuda else {
            let why = snap
                .cuda
                .reason()
                .map(|r| format!("the CUDA driver is not available: {r}"))
                .unwrap_or_else(|| "the CUDA driver does not list this GPU".into());
            out.push(Verdict::skip(ID, g.subject(), why));
            continue;
        };
        let observed = format!(
            "GPU_DIRECT_RDMA_SUPPORTED={} DMA_BUF_SUPPORTED={} INTEGRATED={}{}",
            flag(c.gpu_direct_rdma_supported),
            flag(c.dma_buf_supported),
            flag(c.integrated),
            c.compute_capability
                .as_deref()
                .map(|cc| format!(" cc {cc}"))
                .unwrap_or_default()
        );
        if c.integrated == Some(true) {
            out.push(
                Verdict::na(
                    ID,
                    g.subject(),
                    format!(
                        "{} is integrated: the NIC cannot peer-DMA into its memory (GPUDirect RDMA and dma-buf report {}/{}); {HOST_PINNED}",
                        g.display_name(),
                        flag(c.gpu_direct_rdma_supported),
                        flag(c.dma_buf_supported)
                    ),
                )
                .observed(observed),
            );
            continue;
        }
        let peermem_ok = allows(ctx, "peermem") && c.gpu_direct_rdma_supported == Some(true);
        let dmabuf_ok = allows(ctx, "dmabuf") && c.dma_buf_supported == Some(true);
        let expected = ctx
            .profile
            .profile
            .gpu
            .gpudirect_paths
            .iter()
            .map(|p| match p.as_str() {
                "dmabuf" => "DMA_BUF_SUPPORTED=1",
                _ => "GPU_DIRECT_RDMA_SUPPORTED=1",
            })
            .collect::<Vec<_>>()
            .join(" or ");
        let v = if peermem_ok || dmabuf_ok {
            let via: Vec<&str> = [(peermem_ok, "GPUDirect RDMA"), (dmabuf_ok, "dma-buf")]
                .iter()
                .filter(|(ok, _)| *ok)
                .map(|(_, n)| *n)
                .collect();
            Verdict::pass(
                ID,
                g.subject(),
                format!("{} supports {}", g.display_name(), via.join(" and ")),
            )
        } else {
            let geforce = g
                .brand
                .as_deref()
                .is_some_and(|b| b.starts_with("geforce") || b.starts_with("titan"));
            let mut msg = format!(
                "{} reports no GPUDirect support on the paths the profile allows ({})",
                g.display_name(),
                ctx.profile.profile.gpu.gpudirect_paths.join(", ")
            );
            if geforce {
                msg.push_str("; GeForce GPUs do not support GPUDirect (seed 004)");
            }
            msg.push_str(&format!(
                "; data must be staged through host memory: {HOST_PINNED}"
            ));
            Verdict::warn(ID, g.subject(), msg)
        };
        out.push(v.observed(observed).expected(expected));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// gpu.peermem

const NV_MEM: &str = "/sys/kernel/mm/memory_peers/nv_mem";

fn run_peermem(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "gpu.peermem";
    let snap = match gpus(ctx, ID) {
        Ok(s) => s,
        Err(v) => return v,
    };
    let modules = ctx.modules();
    let module = ["nvidia_peermem", "nv_peer_mem"]
        .into_iter()
        .find(|m| ctx.module_present(m));
    let nv_mem = ctx.exists(NV_MEM);
    let driver = ctx.driver();
    let kernel = ctx
        .platform()
        .kernel_release
        .clone()
        .unwrap_or_else(|| "unknown".into());
    let mut out = Vec::new();
    for g in &snap.gpus {
        if integrated(g) {
            out.push(Verdict::na(
                ID,
                g.subject(),
                format!(
                    "{} is integrated: there is no separate BAR1 for nvidia_peermem to map (modprobe fails with EINVAL on GB10) and no dma-buf export; {HOST_PINNED}",
                    g.display_name()
                ),
            ));
            continue;
        }
        if !modules.readable && allows(ctx, "peermem") && !allows(ctx, "dmabuf") {
            out.push(Verdict::skip(
                ID,
                g.subject(),
                "/proc/modules is not readable",
            ));
            continue;
        }
        let mut paths = Vec::new();
        let mut good = Vec::new();
        if allows(ctx, "peermem") {
            let state = match (module, nv_mem) {
                (Some(m), true) => {
                    good.push(format!("{m} loaded and registered as a peer-memory client ({NV_MEM})"));
                    format!("{m} loaded, nv_mem present")
                }
                (Some(m), false) => format!("{m} loaded but {NV_MEM} is absent: ib_core has no peer-memory client registered (the RDMA stack lacks MLNX_OFED/DOCA-OFED's peer-memory API, or the module was built against another ib_core)"),
                (None, _) => "nvidia_peermem is not loaded".to_string(),
            };
            paths.push(format!("peermem: {state}"));
        }
        if allows(ctx, "dmabuf") {
            let open = driver.as_ref().ok().map(|d| d.module == KernelModule::Open);
            let attr = g.cuda.as_ref().and_then(|c| c.dma_buf_supported);
            let state = match (open, attr) {
                (Some(true), Some(true)) => {
                    good.push(format!(
                        "dma-buf (open kernel module, DMA_BUF_SUPPORTED=1, kernel {kernel})"
                    ));
                    "open kernel module and DMA_BUF_SUPPORTED=1".to_string()
                }
                (Some(false), _) => {
                    "the proprietary kernel module cannot export dma-buf (needs the open module)"
                        .to_string()
                }
                (None, _) => format!(
                    "kernel module flavour unknown ({})",
                    driver.as_ref().err().cloned().unwrap_or_default()
                ),
                (Some(true), Some(false)) => {
                    "open kernel module but DMA_BUF_SUPPORTED=0".to_string()
                }
                (Some(true), None) => {
                    "open kernel module, DMA_BUF_SUPPORTED unknown (CUDA not available)".to_string()
                }
            };
            paths.push(format!("dma-buf: {state} (kernel {kernel})"));
        }
        let observed = paths.join("; ");
        let expected = ctx.profile.profile.gpu.gpudirect_paths.join(" or ");
        let v = if let Some(first) = good.first() {
            Verdict::pass(ID, g.subject(), format!("GPUDirect path ready: {first}"))
        } else {
            let mut msg = format!(
                "no GPUDirect kernel path for {}: {observed}",
                g.display_name()
            );
            if ctx.platform().secure_boot == Some(true) {
                msg.push_str("; Secure Boot is on: an unsigned (DKMS-built) nvidia_peermem is refused at load");
            }
            if module.is_none() && allows(ctx, "peermem") {
                if let Some(hint) = ctx.kernel_log().and_then(peermem_log_hint) {
                    msg.push_str("; ");
                    msg.push_str(&hint);
                }
            }
            let fix = if allows(ctx, "peermem") {
                "sudo daqtune apply --only gpu.peermem   (or: sudo modprobe nvidia_peermem && echo nvidia-peermem | sudo tee /etc/modules-load.d/nvidia-peermem.conf). If modprobe fails: install doca-ofed, reboot, rebuild the NVIDIA DKMS package (dpkg-reconfigure of the package owning nvidia-peermem.ko, seed 000), and sign the module or disable Secure Boot".to_string()
            } else {
                "install the open NVIDIA kernel module (nvidia-open / -m=kernel-open) and a CUDA driver that reports DMA_BUF_SUPPORTED=1".to_string()
            };
            Verdict::fail(ID, g.subject(), msg).fix(fix)
        };
        out.push(v.observed(observed).expected(expected));
    }
    out
}

/// Why nvidia_peermem failed to load, from the last kernel message that names it.
fn peermem_log_hint(log: &str) -> Option<String> {
    let line = log
        .lines()
        .rev()
        .find(|l| {
            l.contains("nvidia_peermem")
                || l.contains("nvidia-peermem")
                || l.contains("nv_peer_mem")
        })?
        .trim();
    let why = if line.contains("disagrees about version of symbol")
        || line.contains("Unknown symbol")
    {
        "it was built against a different ib_core than the one loaded (inbox RDMA vs MLNX_OFED/DOCA-OFED): install doca-ofed, then rebuild the NVIDIA DKMS package"
    } else if line.contains("signature")
        || line.contains("Key was rejected")
        || line.contains("verification failed")
    {
        "its signature was refused (Secure Boot): sign the DKMS module with an enrolled key or disable Secure Boot"
    } else if line.contains("Invalid argument") || line.contains("-22") {
        "it refused to load with EINVAL (by design on integrated GPUs such as GB10, which have no separate BAR1)"
    } else {
        "see the kernel message"
    };
    Some(format!("the kernel log says `{line}`: {why}"))
}

// ---------------------------------------------------------------------------------------------
// gpu.driver

fn run_driver(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "gpu.driver";
    let proc_ = ctx.driver();
    let snap = ctx.gpus().ok();
    let nvml_ver = snap.and_then(|s| s.driver_version.clone());
    let mut out = Vec::new();
    match (&proc_, &nvml_ver) {
        (Err(e), None) => {
            let why = snap
                .and_then(|s| s.unavailable_reason())
                .map(|r| format!("; {r}"))
                .unwrap_or_default();
            out.push(Verdict::skip(
                ID,
                "host",
                format!("no NVIDIA kernel driver loaded ({e}){why}"),
            ));
        }
        (Ok(d), nv) => {
            let kver = d.version.clone().unwrap_or_else(|| "unknown".into());
            let observed = format!("{kver}, {} kernel module", d.module.as_str());
            let mut v = match nv {
                Some(n) if d.version.as_deref().is_some_and(|k| k != n) => Verdict::warn(
                    ID,
                    "host",
                    format!("the kernel module is {kver} but the user-space driver (NVML) is {n}: a driver update is half applied; reboot or reload the nvidia modules"),
                )
                .fix("sudo reboot   (or stop GPU clients and reload the nvidia kernel modules)"),
                _ => Verdict::pass(
                    ID,
                    "host",
                    format!("NVIDIA driver {kver}, {} kernel module", d.module.as_str()),
                ),
            };
            if d.module == KernelModule::Proprietary && allows(ctx, "dmabuf") {
                v.message.push_str(
                    "; dma-buf GPUDirect needs the open kernel module, so only peermem is usable",
                );
            }
            out.push(v.observed(observed));
        }
        (Err(e), Some(n)) => out.push(
            Verdict::pass(
                ID,
                "host",
                format!("NVIDIA driver {n} (NVML); the kernel module flavour is unknown: {e}"),
            )
            .observed(format!("{n}, kernel module flavour unknown")),
        ),
    }
    if let Some(s) = snap {
        for g in &s.gpus {
            let Some(b) = g.brand.as_deref() else {
                continue;
            };
            if b.starts_with("geforce") || b.starts_with("titan") {
                out.push(
                    Verdict::warn(
                        ID,
                        g.subject(),
                        format!(
                            "{} is a {b} GPU: GPUDirect is only supported on workstation/RTX and data-center GPUs, not GeForce (seed 004)",
                            g.display_name()
                        ),
                    )
                    .observed(b),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dc(cur: u32, max: u32, floor: Option<u32>) -> DomainClocks {
        DomainClocks {
            current_mhz: Some(cur),
            max_mhz: Some(max),
            pstate_min_mhz: floor,
            pstate_max_mhz: Some(max),
            ..Default::default()
        }
    }

    #[test]
    fn judge_never_passes_a_busy_unlocked_gpu() {
        // Busy at max, no lock visible: an instantaneous reading proves nothing.
        assert!(matches!(
            judge_domain(&dc(1980, 1980, Some(345)), 1980, 250, Some(false)),
            Held::Unknown { .. }
        ));
        // Idle and dropped (the H200 reading from docs/validation.md): not held.
        assert_eq!(
            judge_domain(&dc(345, 1980, Some(345)), 1980, 250, Some(true)),
            Held::Dropped { current: 345 }
        );
        // Locked: the P-state floor sits at the maximum, busy or not.
        assert_eq!(
            judge_domain(&dc(1980, 1980, Some(1980)), 1980, 250, Some(false)),
            Held::Floor { floor: 1980 }
        );
        // HBM: fixed memory clock, floor == max.
        assert_eq!(
            judge_domain(&dc(3201, 3201, Some(3201)), 3201, 250, Some(true)),
            Held::Floor { floor: 3201 }
        );
        // IGX: 1920 held for 2100 is within tolerance (seed 000 Step 7 note).
        assert_eq!(
            judge_domain(&dc(1920, 2100, None), 2100, 250, Some(true)),
            Held::IdleAtMax { current: 1920 }
        );
        assert!(matches!(
            judge_domain(&dc(1920, 2100, None), 2100, 250, None),
            Held::Unknown { .. }
        ));
    }

    #[test]
    fn peermem_kernel_log_hints() {
        assert_eq!(peermem_log_hint(""), None);
        assert_eq!(peermem_log_hint("(null)"), None);
        assert_eq!(peermem_log_hint("mlx5_core 0000:01:00.0: link up\n"), None);
        let abi = "nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client\nnvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -22)\n";
        assert!(peermem_log_hint(abi)
            .expect("hint")
            .contains("different ib_core"));
        let sig = "nvidia_peermem: module verification failed: signature and/or required key missing - tainting kernel\n";
        assert!(peermem_log_hint(sig).expect("hint").contains("Secure Boot"));
        let einval = "NVRM: nvidia-peermem: init failed: Invalid argument\n";
        assert!(peermem_log_hint(einval).expect("hint").contains("EINVAL"));
        let other = "nvidia-peermem: something new\n";
        assert!(peermem_log_hint(other)
            .expect("hint")
            .contains("something new"));
    }

    #[test]
    fn idleness_from_reasons_or_utilisation() {
        let mut g = GpuFacts::default();
        assert_eq!(is_idle(&g), None);
        g.clock_event_reasons = Some(REASON_GPU_IDLE);
        assert_eq!(is_idle(&g), Some(true));
        g.clock_event_reasons = Some(0x4);
        g.utilization_pct = Some(87);
        assert_eq!(is_idle(&g), Some(false));
        g.utilization_pct = Some(0);
        assert_eq!(is_idle(&g), Some(true));
    }
}
