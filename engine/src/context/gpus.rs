//! The GPUs as the GPU checks see them (NVML/CUDA facts), and what the profile allows for
//! GPUDirect: shared by `gpu.*`, `app.memory` and the peermem plan.

use super::Context;
use crate::verdict::Verdict;
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
