//! `iommu`: the IOMMU mode of the GPU's and NIC's groups (seed 001).

use crate::model::context::Context;
use crate::model::tunable::Tunable;
use crate::model::verdict::{Area, Status, Verdict};

pub const IOMMU: Tunable = Tunable {
    id: "iommu",
    area: Area::Pcie,
    title: "IOMMU mode of the GPU and NIC groups (passthrough for GPUDirect)",
    aliases: &["iommu"],
    doc: include_str!("../../../docs/checks/iommu.md"),
    needs_root: false,
    profile_keys: &[],
    check: run_iommu,
    planner: None,
};

/// The kernel argument that puts DMA domains in passthrough on this architecture.
fn passthrough_arg(ctx: &Context) -> &'static str {
    match ctx.platform().arch.as_deref() {
        Some("aarch64") | Some("arm64") => "iommu.passthrough=1",
        _ => "iommu=pt",
    }
}

fn run_iommu(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "iommu";
    let (_, devs) = match crate::model::context::nics::endpoints_or_skip(ctx, ID) {
        Ok(v) => v,
        Err(v) => return v,
    };
    let arg = passthrough_arg(ctx);
    let (key, val) = arg.split_once('=').unwrap_or((arg, ""));
    let on_cmdline = ctx
        .cmdline()
        .ok()
        .is_some_and(|c| c.value(key) == Some(val));
    devs.into_iter()
        .map(|(d, label)| match (d.iommu_group, d.iommu_type.as_deref()) {
            (None, _) => Verdict::pass(ID, label, "no IOMMU group: DMA is not translated for this device").observed("no group"),
            (Some(g), Some("identity")) => {
                Verdict::pass(ID, label, "passthrough (identity)").observed(format!("group {g} identity"))
            }
            (Some(g), Some(t @ ("DMA" | "DMA-FQ"))) => {
                let status = if on_cmdline { Status::PendingReboot } else { Status::Warn };
                let msg = if on_cmdline {
                    format!("translates DMA ({t}); {arg} is on the command line but this boot still translates: reboot")
                } else {
                    format!("translates DMA ({t}): GPUDirect peer traffic needs passthrough")
                };
                Verdict::new(ID, label, status, msg)
                    .observed(format!("group {g} {t}"))
                    .expected("identity")
                    .fix(format!(
                        "kernel argument {arg} (grub drop-in), then reboot; never intel_iommu=off (it also drops interrupt remapping)"
                    ))
            }
            (Some(g), Some(t)) => Verdict::pass(ID, label, format!("group {g} type {t} (owned by a user-space driver such as VFIO)")).observed(t),
            (Some(g), None) => Verdict::skip(ID, label, format!("group {g}: type unreadable (kernel before 5.11?)")),
        })
        .collect()
}
