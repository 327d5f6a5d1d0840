//! The GPUs as the GPU checks see them (NVML/CUDA facts), and what the profile allows for
//! GPUDirect: shared by `gpu.*`, `app.memory` and the peermem plan.

use super::Context;
use crate::model::verdict::Verdict;
use daqtune_probe::gpu::{GpuFacts, GpuSnapshot};

pub const HOST_PINNED: &str =
    "use `kind: host_pinned` data buffers (cudaHostAlloc; seed 000, DGX Spark tab)";

/// The GPU facts, or the verdict that says why there are none. Also skips when no GPU is
/// visible: a host without a GPU cannot pass a GPU check.
pub fn gpus_or_skip<'c>(ctx: &'c Context, id: &str) -> Result<&'c GpuSnapshot, Vec<Verdict>> {
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

pub fn why_missing(g: &GpuFacts, key: &str) -> String {
    g.unavailable
        .get(key)
        .map(|r| format!(" ({r})"))
        .unwrap_or_default()
}

pub fn integrated(g: &GpuFacts) -> bool {
    g.integrated() == Some(true)
}

/// Whether the GPU on the PCI bus at `addr` is integrated, by the GPU facts (CUDA attribute
/// 18, INTEGRATED), with the evidence; `None` when the facts cannot say (no facts, or the
/// GPU's record lacks the attribute). An integrated GPU's NVML record has no PCI bus id
/// (GB10 sits on the bus as `000f:01:00.0` all the same), so a bus GPU no record names is
/// taken for the integrated one only when every record without a bus id is integrated.
pub fn pci_gpu_integrated(ctx: &Context, addr: &str) -> Option<(bool, String)> {
    let snap = ctx.gpus().ok()?;
    // Both in sysfs form (`0000:09:00.0`): the probe normalises NVML's bus id.
    let same = |b: &str| b.trim().eq_ignore_ascii_case(addr);
    if let Some(g) = snap
        .gpus
        .iter()
        .find(|g| g.pci_bus_id.as_deref().is_some_and(same))
    {
        return g.integrated().map(|i| {
            (
                i,
                format!("{} reports INTEGRATED={}", g.display_name(), flag(Some(i))),
            )
        });
    }
    let unplaced: Vec<&GpuFacts> = snap
        .gpus
        .iter()
        .filter(|g| g.pci_bus_id.is_none())
        .collect();
    if !unplaced.is_empty() && unplaced.iter().all(|g| integrated(g)) {
        let names: Vec<&str> = unplaced.iter().map(|g| g.display_name()).collect();
        return Some((
            true,
            format!(
                "{} reports INTEGRATED=1 and no PCI bus id",
                names.join(", ")
            ),
        ));
    }
    None
}

/// Whether a GPU is at rest, from NVML's readings, with the evidence: the GPU-idle clock
/// event reason or 0 % utilisation. `Err`: NVML says it is busy (the evidence), or cannot
/// say (`None` inside).
pub fn at_rest(g: &GpuFacts) -> Result<String, Option<String>> {
    let pstate = g.pstate.map(|p| format!(", P{p}")).unwrap_or_default();
    let idle_bit = g
        .clock_event_reasons
        .is_some_and(|r| r & daqtune_probe::gpu::REASON_GPU_IDLE != 0);
    match g.utilization_pct {
        Some(0) => Ok(format!(
            "NVML: 0% busy{pstate}{}",
            if idle_bit {
                ", clock event gpu_idle"
            } else {
                ""
            }
        )),
        Some(u) if !idle_bit => Err(Some(format!("NVML: {u}% busy{pstate}"))),
        _ if idle_bit => Ok(format!("NVML clock event gpu_idle{pstate}")),
        _ => Err(None),
    }
}

/// Why there are no GPU facts for a PCI address ([`facts_at`]); the text is what a verdict says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuFactsError {
    /// The GPU facts could not be read at all (the reader's reason).
    #[error("{0}")]
    Unread(String),
    /// Neither NVML nor CUDA answered (`reason`: what each said).
    #[error("no NVIDIA driver library answered ({reason})")]
    NoDriver { reason: String },
    #[error("NVML lists no GPU at this address")]
    NotListed,
}

/// The GPU facts of the GPU at PCI address `addr`, or why there are none.
pub fn facts_at<'c>(ctx: &'c Context, addr: &str) -> Result<&'c GpuFacts, GpuFactsError> {
    let snap = ctx
        .gpus()
        .map_err(|e| GpuFactsError::Unread(e.to_string()))?;
    if let Some(reason) = snap.unavailable_reason() {
        return Err(GpuFactsError::NoDriver { reason });
    }
    snap.gpus
        .iter()
        .find(|g| {
            g.pci_bus_id
                .as_deref()
                .is_some_and(|b| b.eq_ignore_ascii_case(addr))
        })
        .ok_or(GpuFactsError::NotListed)
}

/// A GPU's architecture and where it was read: NVML's nvmlDeviceGetArchitecture where it
/// answered, else the CUDA compute capability's major version (NVIDIA's CUDA GPU table:
/// 9.0 Hopper; 10.x B200/B300, 11.0 Thor and 12.x RTX PRO Blackwell / GeForce 50 / GB10 are
/// Blackwell). `None`: neither library said.
pub fn architecture(g: &GpuFacts) -> Option<(String, String)> {
    if let Some(a) = g.architecture.as_deref() {
        return Some((a.to_string(), "NVML".into()));
    }
    let cc = g.cuda.as_ref()?.compute_capability.as_deref()?;
    architecture_of_cc(cc).map(|a| (a.to_string(), format!("compute capability {cc}")))
}

/// The architecture of a CUDA compute capability (`8.6`, `12.0`).
pub fn architecture_of_cc(cc: &str) -> Option<&'static str> {
    let (major, minor) = cc.trim().split_once('.')?;
    let major: u32 = major.parse().ok()?;
    let minor: u32 = minor.parse().ok()?;
    Some(match (major, minor) {
        (3, _) => "kepler",
        (5, _) => "maxwell",
        (6, _) => "pascal",
        (7, 0) | (7, 2) => "volta",
        (7, 5) => "turing",
        (8, 9) => "ada",
        (8, _) => "ampere",
        (9, _) => "hopper",
        (10..=12, _) => "blackwell",
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------------
// gpu.gpudirect

pub fn flag(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "1",
        Some(false) => "0",
        None => "?",
    }
}

pub fn allows(ctx: &Context, path: &str) -> bool {
    ctx.profile
        .profile
        .gpu
        .gpudirect_paths
        .iter()
        .any(|p| p == path)
}

/// Where nvidia_peermem registers with ib_core's peer-memory API.
pub const NV_MEM: &str = "/sys/kernel/mm/memory_peers/nv_mem";

/// One GPU's GPUDirect kernel path as the host shows it: `gpu.peermem`, `app.memory` and the
/// peermem plan all decide from this, so they cannot disagree on whether the NIC can DMA into
/// the GPU's memory.
#[derive(Debug, Clone)]
pub struct GpuDirectPath {
    /// The peer-memory module loaded (or built in): `nvidia_peermem` or `nv_peer_mem`.
    pub module: Option<&'static str>,
    /// ib_core has a peer-memory client registered ([`NV_MEM`]).
    pub nv_mem: bool,
    /// The NVIDIA kernel module is the open one (`None`: its flavour is unknown, with why).
    pub open_module: Result<bool, String>,
    /// CUDA's GPU_DIRECT_RDMA_SUPPORTED and DMA_BUF_SUPPORTED (`None`: not known).
    pub rdma_attr: Option<bool>,
    pub dmabuf_attr: Option<bool>,
    pub peermem_allowed: bool,
    pub dmabuf_allowed: bool,
    /// The running kernel (major, minor, patch), when its release parses.
    pub kernel: Option<(u32, u32, u32)>,
}

/// The oldest kernel that exports CUDA memory as dma-buf: DAQIRI's concepts page ("DMA Buf,
/// supported on Linux kernels 5.12+ with NVIDIA open-source drivers 515+ and CUDA toolkit
/// 11.7+", NVIDIA/daqiri 3c87196) and its ibverbs engine's error text ("CUDA DMA-BUF export
/// requires Linux kernel 5.12 or newer and the NVIDIA open kernel driver", 7c21e33).
pub const DMABUF_MIN_KERNEL: (u32, u32, u32) = (5, 12, 0);

impl GpuDirectPath {
    /// nvidia_peermem carries GPUDirect RDMA: allowed by the profile, loaded, registered with
    /// ib_core, and not refused by the GPU (GPU_DIRECT_RDMA_SUPPORTED=0).
    pub fn peermem_ready(&self) -> bool {
        self.peermem_allowed
            && self.module.is_some()
            && self.nv_mem
            && self.rdma_attr != Some(false)
    }

    /// dma-buf carries it: allowed, the open kernel module, DMA_BUF_SUPPORTED=1, and a
    /// kernel of at least [`DMABUF_MIN_KERNEL`] (an unparsable release is not held against
    /// it: CUDA's attribute already answers for the driver and kernel it runs on).
    pub fn dmabuf_ready(&self) -> bool {
        self.dmabuf_allowed
            && self.open_module == Ok(true)
            && self.dmabuf_attr == Some(true)
            && !self.kernel_too_old_for_dmabuf()
    }

    pub fn kernel_too_old_for_dmabuf(&self) -> bool {
        self.kernel.is_some_and(|k| k < DMABUF_MIN_KERNEL)
    }

    pub fn ready(&self) -> bool {
        self.peermem_ready() || self.dmabuf_ready()
    }
}

/// The GPUDirect path of `g` on this host, under this profile.
pub fn gpudirect_path(ctx: &Context, g: &GpuFacts) -> GpuDirectPath {
    let c = g.cuda.as_ref();
    GpuDirectPath {
        module: ["nvidia_peermem", "nv_peer_mem"]
            .into_iter()
            .find(|m| ctx.module_present(m)),
        nv_mem: ctx.exists(NV_MEM),
        open_module: ctx
            .driver()
            .map(|d| d.module == daqtune_probe::gpu::KernelModule::Open)
            .map_err(str::to_string),
        rdma_attr: c.and_then(|c| c.gpu_direct_rdma_supported),
        dmabuf_attr: c.and_then(|c| c.dma_buf_supported),
        peermem_allowed: allows(ctx, "peermem"),
        dmabuf_allowed: allows(ctx, "dmabuf"),
        kernel: ctx.facts().kernel_version(),
    }
}
