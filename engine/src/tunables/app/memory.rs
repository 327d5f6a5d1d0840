//! `app.memory`: the configuration's memory regions against hugepages, BAR1 and GPUDirect.

use super::*;
use crate::model::appconfig::Region;

const ID: &str = "app.memory";

pub const MEMORY: Tunable = Tunable {
    id: ID,
    area: Area::Memory,
    title: "The configuration's memory regions fit the host: hugepages, GPU BAR1, GPUDirect",
    aliases: &[],
    doc: include_str!("../../../../docs/checks/app.memory.md"),
    needs_root: false,
    profile_keys: &[],
    check: run_memory,
    planner: None,
};

// ---------------------------------------------------------------------------------------------
// app.memory

/// Free hugepage bytes on a node (all page sizes); the host's pools on a one-node host that
/// has no per-node directories.
fn node_free(ctx: &Context, node: u32) -> Option<u64> {
    let mem = ctx.mem();
    let per: Vec<_> = mem.node_pools.iter().filter(|p| p.node == node).collect();
    if !per.is_empty() {
        return Some(
            per.iter()
                .map(|p| p.free.saturating_mul(p.size_kb).saturating_mul(1024))
                .sum(),
        );
    }
    if mem.nodes.len() <= 1 && node == 0 && mem.pools_error.is_none() {
        return Some(
            mem.pools
                .iter()
                .map(|p| p.free.saturating_mul(p.size_kb).saturating_mul(1024))
                .sum(),
        );
    }
    None
}

fn free_total(ctx: &Context) -> Option<u64> {
    let mem = ctx.mem();
    if mem.pools_error.is_some() {
        return None;
    }
    Some(
        mem.pools
            .iter()
            .map(|p| p.free.saturating_mul(p.size_kb).saturating_mul(1024))
            .sum(),
    )
}

fn largest_page_kb(ctx: &Context) -> u64 {
    ctx.mem()
        .pools
        .iter()
        .map(|p| p.size_kb)
        .max()
        .unwrap_or(2048)
}

fn hugepage_fix(ctx: &Context, node: Option<u32>, missing: u64) -> String {
    let page_kb = largest_page_kb(ctx);
    let pages = missing.div_ceil(page_kb.saturating_mul(1024).max(1));
    let label = daqtune_probe::mem::format_size_kb(page_kb);
    let current = match node {
        Some(n) => ctx
            .mem()
            .node_pools
            .iter()
            .find(|p| p.node == n && p.size_kb == page_kb)
            .map(|p| p.total),
        None => ctx.mem().pool(page_kb).map(|p| p.total),
    }
    .unwrap_or(0);
    let path = match node {
        Some(n) => {
            format!("/sys/devices/system/node/node{n}/hugepages/hugepages-{page_kb}kB/nr_hugepages")
        }
        None => format!("/sys/kernel/mm/hugepages/hugepages-{page_kb}kB/nr_hugepages"),
    };
    format!(
        "reserve {pages} more {label} page(s): echo {} | sudo tee {path} (at boot: hugepagesz={label} hugepages=N on the kernel command line; the hugepages check and `daqtune apply --only hugepages` keep it)",
        current.saturating_add(pages)
    )
}

struct GpuPath {
    ok: bool,
    how: String,
}

/// The GPUDirect path of `g`, decided by the same judgement as `gpu.peermem`
/// (`context::gpus::gpudirect_path`), worded for a memory region.
fn gpudirect_path(ctx: &Context, g: &daqtune_probe::gpu::GpuFacts) -> GpuPath {
    let p = crate::model::context::gpus::gpudirect_path(ctx, g);
    if let (Some(m), true) = (p.module, p.peermem_ready()) {
        return GpuPath {
            ok: true,
            how: format!("{m} loaded (peer memory)"),
        };
    }
    if p.dmabuf_ready() {
        return GpuPath {
            ok: true,
            how: "dma-buf (DMA_BUF_SUPPORTED=1)".into(),
        };
    }
    let mut why = Vec::new();
    match p.module {
        _ if !p.peermem_allowed => {
            why.push("the profile's gpudirect_paths do not allow peermem".into())
        }
        Some(m) if !p.nv_mem => why.push(format!(
            "{m} is loaded but /sys/kernel/mm/memory_peers/nv_mem is absent"
        )),
        Some(_) => why.push("the GPU reports GPU_DIRECT_RDMA_SUPPORTED=0".into()),
        None => why.push("nvidia_peermem is not loaded".into()),
    }
    why.push(match (p.dmabuf_attr, &p.open_module) {
        (Some(true), _) if !p.dmabuf_allowed => {
            "dma-buf is supported but the profile's gpudirect_paths do not allow it".into()
        }
        (Some(true), Ok(false)) => {
            "DMA_BUF_SUPPORTED=1 but the proprietary kernel module cannot export dma-buf".into()
        }
        (Some(true), Ok(true)) if p.kernel_too_old_for_dmabuf() => {
            "DMA_BUF_SUPPORTED=1 but the kernel is older than 5.12 (dma-buf export)".into()
        }
        (Some(true), _) => "DMA_BUF_SUPPORTED=1, kernel module flavour unknown".into(),
        (Some(false), _) => "DMA_BUF_SUPPORTED=0".into(),
        (None, _) => "dma-buf support unknown (CUDA not available)".into(),
    });
    GpuPath {
        ok: false,
        how: why.join(", "),
    }
}

const HOST_PINNED_ADVICE: &str = "use `kind: host_pinned` (cudaHostAlloc'd host memory the NIC DMAs into; DAQIRI's configuration reference and seed 000's DGX Spark tab recommend it on integrated GPUs such as GB10)";

fn run_memory(ctx: &Context) -> Vec<Verdict> {
    let app = match app(ctx, ID) {
        Ok(a) => a,
        Err(v) => return v,
    };
    if app.regions.is_empty() {
        return vec![Verdict::skip(
            ID,
            app.subject(app.regions_line, "memory_regions"),
            "the configuration defines no memory regions",
        )];
    }
    let est = estimate::hugepages(app);
    let dev = estimate::device_bytes(app);
    let mut out: Vec<Verdict> = app
        .regions
        .iter()
        .map(|r| region_verdict(ctx, app, r, &est, &dev))
        .collect();
    if app.engine == Engine::Dpdk {
        out.push(dpdk_preflight(ctx, app, &est));
    }
    out
}

/// One region's verdict: its kind and size read from the configuration (a skip when either
/// is unusable), then the judgement of that kind.
fn region_verdict(
    ctx: &Context,
    app: &AppConfig,
    r: &Region,
    est: &estimate::HugeEstimate,
    dev: &BTreeMap<i64, u64>,
) -> Verdict {
    let subject = app.subject(r.line, &r.path);
    let kind = match &r.kind {
        Some(Field { value: Ok(k), .. }) => *k,
        Some(Field {
            value: Err(b),
            path,
            line,
        }) => return bad_field(ID, app, path, *line, b),
        None => {
            return Verdict::skip(ID, subject, "no kind: cannot judge it (see app.config)");
        }
    };
    let Some(bytes) = estimate::region_bytes(app, r) else {
        return Verdict::skip(
            ID,
            subject,
            format!(
                "`{}`: num_bufs or buf_size unusable (see app.config)",
                r.name
            ),
        );
    };
    let sizing = sizing(app, r, kind, bytes);
    match kind {
        MemKind::Huge => huge_region(ctx, app, r, &subject, bytes, &sizing, est),
        MemKind::Device => device_region(ctx, app, r, &subject, bytes, &sizing, dev),
        MemKind::HostPinned => host_pinned_region(ctx, app, r, &subject, &sizing),
        MemKind::Host => host_region(app, r, &subject, &sizing),
    }
}

/// How the region's size comes about: `N x SIZE B = M MiB`, with the engine's padding and
/// DAQIRI's raise of num_bufs to 1.5 rings named where they apply.
fn sizing(app: &AppConfig, r: &Region, kind: MemKind, bytes: u64) -> String {
    let n = estimate::effective_num_bufs(app, r).unwrap_or(0);
    let adj = estimate::adj_size(app.engine, kind, r.buf_size().unwrap_or(0));
    let bumped = if Some(n) != r.num_bufs() {
        format!(
            " (num_bufs {} is below 1.5 x the {}-descriptor ring: DAQIRI raises it to {n})",
            r.num_bufs().unwrap_or(0),
            estimate::NIC_RING
        )
    } else {
        String::new()
    };
    format!(
        "{n} x {adj} B{} = {} MiB{bumped}",
        if adj != r.buf_size().unwrap_or(0) {
            format!(
                " ({} engine padding of buf_size {})",
                app.engine.name(),
                r.buf_size().unwrap_or(0)
            )
        } else {
            String::new()
        },
        mib(bytes)
    )
}

/// A `kind: huge` region: its NUMA node exists and has the hugepages every huge region on that
/// node needs free (DPDK fails without them; the other engines fall back to regular pages).
fn huge_region(
    ctx: &Context,
    app: &AppConfig,
    r: &Region,
    subject: &str,
    bytes: u64,
    sizing: &str,
    est: &estimate::HugeEstimate,
) -> Verdict {
    let node = match huge_node(ctx, app, r, subject) {
        Ok(n) => n,
        Err(v) => return *v,
    };
    let dpdk = app.engine == Engine::Dpdk;
    let need = est.per_node.get(&node).copied().unwrap_or(bytes);
    let over = if dpdk {
        " with 32 MiB per-pool overhead each"
    } else {
        ""
    };
    match node_free(ctx, node) {
        None => Verdict::skip(
            ID,
            subject,
            format!(
                "`{}` needs {sizing}; cannot read the free hugepages of node {node}",
                r.name
            ),
        ),
        Some(free) if need > free => {
            let missing = need - free;
            let msg = format!(
                "`{}` needs {sizing}; the kind: huge regions on node {node} need {} MiB{over}, node {node} has {} MiB of hugepages free: {} MiB missing",
                r.name,
                mib(need),
                free / MIB,
                mib(missing)
            );
            if dpdk {
                Verdict::fail(ID, subject, msg)
            } else {
                Verdict::warn(
                    ID,
                    subject,
                    format!(
                        "{msg}; the {} engine then falls back to regular pages (slower, not IOVA-contiguous)",
                        app.engine.name()
                    ),
                )
            }
            .fix(hugepage_fix(ctx, Some(node), missing))
            .observed(format!("{} MiB free on node {node}", free / MIB))
            .expected(format!(">= {} MiB", mib(need)))
        }
        Some(free) => Verdict::pass(
            ID,
            subject,
            format!(
                "`{}` needs {sizing}; node {node} has {} MiB of hugepages free for the {} MiB its kind: huge regions need{over}",
                r.name,
                free / MIB,
                mib(need)
            ),
        ),
    }
}

/// The NUMA node a huge region asks for (its `affinity`), or the verdict when it names none
/// this host has (boxed: a verdict is large beside a node number).
fn huge_node(
    ctx: &Context,
    app: &AppConfig,
    r: &Region,
    subject: &str,
) -> Result<u32, Box<Verdict>> {
    let Some(aff) = r.affinity() else {
        return Err(Box::new(Verdict::skip(
            ID,
            subject,
            "affinity (the NUMA node) unusable: see app.config",
        )));
    };
    let Ok(node) = u32::try_from(aff) else {
        return Err(Box::new(Verdict::fail(
            ID,
            subject,
            format!("`{}`: affinity {aff} is not a NUMA node", r.name),
        )));
    };
    let mem = ctx.mem();
    if !mem.nodes.is_empty() && !mem.nodes.iter().any(|x| x.id == node) {
        let have: Vec<String> = mem.nodes.iter().map(|x| x.id.to_string()).collect();
        return Err(Box::new(Verdict::fail(
            ID,
            subject,
            format!(
                "`{}` asks for NUMA node {node} (affinity), which this host does not have (nodes {})",
                r.name,
                have.join(", ")
            ),
        )
        .fix(format!("edit {}:{}: set affinity to the NIC's node", app.file, r.line))));
    }
    Ok(node)
}

/// A `kind: host_pinned` region: DAQIRI allocates it with cudaHostAlloc, so the CUDA driver
/// must be usable; the right kind on an integrated GPU, a working one on a discrete GPU.
fn host_pinned_region(
    ctx: &Context,
    app: &AppConfig,
    r: &Region,
    subject: &str,
    sizing: &str,
) -> Verdict {
    match ctx.gpus() {
        Err(e) => Verdict::skip(
            ID,
            subject,
            format!("host_pinned needs CUDA (cudaHostAlloc); cannot see the GPUs: {e}"),
        ),
        Ok(snap) if snap.gpus.is_empty() => Verdict::fail(
            ID,
            subject,
            format!(
                "`{}` is host_pinned, which DAQIRI allocates with cudaHostAlloc, but no NVIDIA GPU is visible{}",
                r.name,
                snap.unavailable_reason()
                    .map(|x| format!(" ({x})"))
                    .unwrap_or_default()
            ),
        )
        .fix(format!("edit {}:{}: use `kind: huge` on a host without a GPU", app.file, r.line)),
        // NVML can list GPUs while the CUDA driver cannot be used: cudaHostAlloc
        // would then fail, so CUDA itself must have been seen.
        Ok(snap) if snap.cuda.reason().is_some() => Verdict::skip(
            ID,
            subject,
            format!(
                "`{}` is host_pinned, which needs the CUDA driver (cudaHostAlloc): {}",
                r.name,
                snap.cuda.reason().unwrap_or_default()
            ),
        ),
        Ok(snap) => match gpu_for(snap, r.affinity()) {
            Some(g) if g.integrated() == Some(true) => Verdict::pass(
                ID,
                subject,
                format!(
                    "`{}` is host_pinned ({sizing}): the right kind on the integrated {}",
                    r.name,
                    g.display_name()
                ),
            ),
            Some(g) => Verdict::pass(
                ID,
                subject,
                format!(
                    "`{}` is host_pinned ({sizing}) on the discrete {}: it works; `device` memory avoids the extra PCIe hop on high-rate paths",
                    r.name,
                    g.display_name()
                ),
            ),
            None => Verdict::pass(
                ID,
                subject,
                format!("`{}` is host_pinned ({sizing}); CUDA is present", r.name),
            ),
        },
    }
}

/// A `kind: host` region: regular pages, right for the kernel socket path only.
fn host_region(app: &AppConfig, r: &Region, subject: &str, sizing: &str) -> Verdict {
    if app.engine == Engine::Socket {
        Verdict::pass(
            ID,
            subject,
            format!(
                "`{}` is host memory ({sizing}): the kernel socket path copies into it",
                r.name
            ),
        )
    } else {
        Verdict::warn(
            ID,
            subject,
            format!(
                "`{}` is `kind: host` ({sizing}): regular pages, which DAQIRI's reference marks not recommended for a {} data path",
                r.name,
                app.engine.name()
            ),
        )
        .fix(format!("edit {}:{}: use `kind: huge` (CPU) or `device`/`host_pinned` (GPU)", app.file, r.line))
    }
}

/// DAQIRI's DPDK hugepage preflight: every pool with its overhead against the free hugepages
/// of the host (DAQIRI refuses to start short of them).
fn dpdk_preflight(ctx: &Context, app: &AppConfig, est: &estimate::HugeEstimate) -> Verdict {
    let subject = app.subject(app.regions_line, "memory_regions");
    match free_total(ctx) {
        None => Verdict::skip(
            ID,
            subject,
            format!(
                "DAQIRI's DPDK preflight needs {}; cannot read the hugepage pools",
                est.breakdown()
            ),
        ),
        Some(free) if est.total > free => {
            let missing = est.total - free;
            Verdict::fail(
                ID,
                subject,
                format!(
                    "DAQIRI's DPDK hugepage preflight needs {}; the host has {} MiB of hugepages free: {} MiB missing (DAQIRI refuses to start)",
                    est.breakdown(),
                    free / MIB,
                    mib(missing)
                ),
            )
            .observed(format!("{} MiB free", free / MIB))
            .expected(format!(">= {} MiB", mib(est.total)))
            .fix(hugepage_fix(ctx, None, missing))
        }
        Some(free) => Verdict::pass(
            ID,
            subject,
            format!(
                "DAQIRI's DPDK hugepage preflight needs {}; {} MiB free",
                est.breakdown(),
                free / MIB
            ),
        )
        .observed(format!("{} MiB free", free / MIB))
        .expected(format!(">= {} MiB", mib(est.total))),
    }
}

fn gpu_for(
    snap: &daqtune_probe::gpu::GpuSnapshot,
    id: Option<i64>,
) -> Option<&daqtune_probe::gpu::GpuFacts> {
    let id = id.unwrap_or(0);
    snap.gpus
        .iter()
        .find(|g| g.cuda.as_ref().and_then(|c| c.ordinal).map(i64::from) == Some(id))
        .or_else(|| usize::try_from(id).ok().and_then(|i| snap.gpus.get(i)))
}

fn device_region(
    ctx: &Context,
    app: &AppConfig,
    r: &Region,
    subject: &str,
    _bytes: u64,
    sizing: &str,
    dev: &BTreeMap<i64, u64>,
) -> Verdict {
    let snap = match ctx.gpus() {
        Ok(s) => s,
        Err(e) => {
            return Verdict::skip(ID, subject, format!("cannot see the GPUs: {e}"));
        }
    };
    let Some(gid) = r.affinity() else {
        return Verdict::skip(
            ID,
            subject,
            "affinity (the GPU id) unusable: see app.config",
        );
    };
    let Some(g) = gpu_for(snap, Some(gid)) else {
        let why = snap
            .unavailable_reason()
            .map(|x| format!(" ({x})"))
            .unwrap_or_default();
        return Verdict::fail(
            ID,
            subject,
            format!(
                "`{}` is device memory on GPU {gid}, but this host shows {} GPU(s){why}",
                r.name,
                snap.gpus.len()
            ),
        );
    };
    if g.integrated() == Some(true) {
        return Verdict::fail(
            ID,
            subject,
            format!(
                "`{}` is `kind: device` on the integrated {}: the NIC cannot peer-DMA into its memory (no BAR1, nvidia_peermem does not load, DMA_BUF_SUPPORTED=0), so registering the region fails; {HOST_PINNED_ADVICE}",
                r.name,
                g.display_name()
            ),
        )
        .observed("kind: device")
        .expected("kind: host_pinned")
        .fix(format!(
            "edit {}:{}: set `kind: host_pinned` for memory region `{}`",
            app.file,
            app.line_of(&format!("daqiri.cfg.{}.kind", r.path)),
            r.name
        ));
    }
    let path = gpudirect_path(ctx, g);
    let total = dev.get(&gid).copied().unwrap_or(0);
    let need = estimate::bar1_needed(total);
    let mut fails = Vec::new();
    let mut notes = vec![format!(
        "`{}` needs {sizing} on {}",
        r.name,
        g.display_name()
    )];
    if path.ok {
        notes.push(format!("GPUDirect via {}", path.how));
    } else {
        fails.push(format!(
            "no GPUDirect path to {} ({}): the NIC cannot DMA into `device` memory",
            g.display_name(),
            path.how
        ));
    }
    match g.bar1 {
        Some(b) if b.total_bytes < need => fails.push(format!(
            "the device regions on GPU {gid} total {} MiB, which needs BAR1 >= {} MiB (registrations stay under 80 %), and BAR1 is {} MiB",
            mib(total),
            mib(need),
            b.total_mib()
        )),
        Some(b) => notes.push(format!(
            "BAR1 {} MiB >= {} MiB for the {} MiB of device regions on GPU {gid}",
            b.total_mib(),
            mib(need),
            mib(total)
        )),
        None => notes.push("BAR1 size unknown".into()),
    }
    if fails.is_empty() {
        Verdict::pass(ID, subject, notes.join("; "))
    } else {
        let bar1_fix = "BAR1 is firmware's: enable Resizable BAR (see `daqtune explain gpu.bar1`) or lower num_bufs/buf_size of the device regions";
        let fix = if path.ok {
            bar1_fix.to_string()
        } else {
            format!("sudo modprobe nvidia_peermem (see `daqtune explain gpu.peermem`), or {HOST_PINNED_ADVICE}")
        };
        Verdict::fail(
            ID,
            subject,
            format!("{}; {}", notes.join("; "), fails.join("; ")),
        )
        .fix(fix)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{failures, judge_file};
    use super::*;

    /// GB10's memory is not reachable by peer DMA: `kind: device` fails there, with the advice
    /// to use host_pinned, which passes.
    #[test]
    fn device_memory_on_an_integrated_gpu_fails() {
        let device = failures(&judge_file("raw_spark_device.yaml", run_memory, &|t| {
            t.to_string()
        }));
        assert_eq!(device.len(), 2, "{device:?}");
        assert!(
            device.iter().all(|f| f.contains("host_pinned")),
            "{device:?}"
        );
        let pinned = failures(&judge_file("raw_spark_device.yaml", run_memory, &|t| {
            t.replace("kind: device", "kind: host_pinned")
        }));
        assert!(pinned.is_empty(), "{pinned:?}");
    }
}
