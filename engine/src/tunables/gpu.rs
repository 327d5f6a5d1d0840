//! `gpu.bar1`, `gpu.gpudirect`, `gpu.driver`: observations of each GPU, named by UUID plus PCI
//! bus id (integrated GPUs have none), so a hybrid host gets `n/a` for the integrated GPU and
//! real verdicts for the discrete one. Facts come from NVML/CUDA on the live host and from
//! `daqtune/gpu.json` under `--root` (see docs/gpu-facts.md). `gpu.clocks` and `gpu.peermem`
//! have modules of their own.

use crate::model::context::gpus::{
    allows, architecture, flag, gpus_or_skip, integrated, why_missing, HOST_PINNED,
};
use crate::model::context::Context;
use crate::model::profile::glob_match;
use crate::model::tunable::Tunable;
use crate::model::verdict::{Area, Verdict};
use daqtune_probe::gpu::{GpuFacts, KernelModule};

pub const BAR1: Tunable = Tunable {
    id: "gpu.bar1",
    area: Area::Gpu,
    title: "GPU BAR1 aperture size",
    aliases: &["bar1-size", "bar1"],
    doc: include_str!("../../../docs/checks/gpu.bar1.md"),
    needs_root: false,
    profile_keys: &[
        "gpu.bar1_min_mib",
        "gpu.bar1_recommended_mib",
        "gpu.bar1_min_by_name",
        "gpu.bar1_min_by_arch",
    ],
    check: run_bar1,
    planner: None,
};

pub const GPUDIRECT: Tunable = Tunable {
    id: "gpu.gpudirect",
    area: Area::Gpu,
    title: "GPUDirect RDMA / dma-buf support per GPU (CUDA attributes)",
    aliases: &["gpudirect"],
    doc: include_str!("../../../docs/checks/gpu.gpudirect.md"),
    needs_root: false,
    profile_keys: &["gpu.gpudirect_paths"],
    check: run_gpudirect,
    planner: None,
};

pub const DRIVER: Tunable = Tunable {
    id: "gpu.driver",
    area: Area::Gpu,
    title: "NVIDIA driver: version, open or proprietary kernel module, GeForce",
    aliases: &["gpu-driver", "driver"],
    doc: include_str!("../../../docs/checks/gpu.driver.md"),
    needs_root: false,
    profile_keys: &["gpu.gpudirect_paths"],
    check: run_driver,
    planner: None,
};

// ---------------------------------------------------------------------------------------------
// gpu.bar1

/// The BAR1 size the profile requires for this GPU, and why. The largest of `bar1_min_mib`,
/// a matching `bar1_min_by_name` glob and the GPU's architecture's `bar1_min_by_arch`; an
/// architecture minimum above the GPU's framebuffer is held to the framebuffer rounded up to a
/// power of two, the most a fully open Resizable BAR exposes (PCIe Resizable BAR sizes are
/// powers of two).
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
    if let Some((arch, from)) = architecture(g) {
        if let Some(mib) = p.bar1_min_by_arch.get(&arch) {
            let (mib, cap) = match g.memory_total_mib {
                Some(fb) if fb.next_power_of_two() < *mib => (
                    fb.next_power_of_two(),
                    format!(", held to its {fb} MiB framebuffer rounded up to a power of two"),
                ),
                _ => (*mib, String::new()),
            };
            if mib > req.0 {
                req = (
                    mib,
                    format!("the profile's minimum for {arch} GPUs ({arch} by {from}){cap}; DAQIRI's tune_system.py asks 32 GiB of Blackwell GPUs, NVIDIA/daqiri 89eacf7"),
                );
            }
        }
    }
    req
}

fn run_bar1(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "gpu.bar1";
    let snap = match gpus_or_skip(ctx, ID) {
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
        // Without an architecture the per-architecture minimum cannot be applied: say so
        // rather than let the generic minimum read as the whole judgement.
        let unknown_arch = if architecture(g).is_none()
            && !ctx.profile.profile.gpu.bar1_min_by_arch.is_empty()
        {
            "; the GPU's architecture is unknown (neither NVML nor CUDA said), so the per-architecture minimums (bar1_min_by_arch) were not applied"
        } else {
            ""
        };
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
                daqtune_probe::text::shell_quote(g.pci_bus_id.as_deref().unwrap_or(&g.uuid))
            ))
        } else if let Some(r) = rec.filter(|r| total < *r) {
            Verdict::pass(
                ID,
                g.subject(),
                format!(
                    "{total} MiB BAR1 meets the {req} MiB minimum (the profile recommends {r} MiB){unknown_arch}"
                ),
            )
        } else {
            Verdict::pass(
                ID,
                g.subject(),
                format!(
                    "{total} MiB BAR1 meets the {req} MiB minimum{}{unknown_arch}",
                    if req > ctx.profile.profile.gpu.bar1_min_mib {
                        format!(" ({why})")
                    } else {
                        String::new()
                    }
                ),
            )
        };
        out.push(v.observed(observed).expected(format!(">= {req} MiB")));
    }
    out
}

fn run_gpudirect(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "gpu.gpudirect";
    let snap = match gpus_or_skip(ctx, ID) {
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
