//! `gpu.peermem`: the GPUDirect kernel path, nvidia_peermem or dma-buf. Plan: load
//! nvidia_peermem now (this module's setter hook: modprobe) and name it in modules-load.d.

use crate::hostio::journal::{Entry, Journal};
use crate::hostio::setters::Done;
use crate::hostio::setters::{Target, Writer};
use crate::model::context::gpus::{
    allows, gpudirect_path, gpus_or_skip, integrated, DMABUF_MIN_KERNEL, HOST_PINNED, NV_MEM,
};
use crate::model::context::Context;
use crate::model::plan::{
    Action, ActionKind, Change, NoteLevel, Plan, PlanCx, PlanError, SetCx, SetError,
};
use crate::model::tunable::{Planner, Tunable};
use crate::model::verdict::{Area, Verdict};
use daqtune_units::etc;

pub const PEERMEM: Tunable = Tunable {
    id: "gpu.peermem",
    area: Area::Gpu,
    title: "GPUDirect kernel path: nvidia_peermem or dma-buf",
    aliases: &["peermem", "nvidia-peermem"],
    doc: include_str!("../../../docs/checks/gpu.peermem.md"),
    needs_root: false,
    profile_keys: &["gpu.gpudirect_paths"],
    check: run_peermem,
    planner: Some(Planner {
        order: 7,
        with: &[],
        plan: plan_peermem,
        artifacts: &[crate::model::tunable::Artifact {
            kind: "modules-load",
            help: "modules-load.d file loading nvidia-peermem",
            render: |g| Ok(modules_load(g.profile_ref)?),
        }],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: |_| vec![etc::MODULES_LOAD_PATH.to_string()],
    }),
};

// ---------------------------------------------------------------------------------------------
// gpu.peermem

fn run_peermem(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "gpu.peermem";
    let snap = match gpus_or_skip(ctx, ID) {
        Ok(s) => s,
        Err(v) => return v,
    };
    let modules = ctx.modules();
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
        let path = gpudirect_path(ctx, g);
        let module = path.module;
        let mut paths = Vec::new();
        let mut good = Vec::new();
        if path.peermem_allowed {
            let state = match (path.module, path.nv_mem) {
                (Some(m), true) if path.peermem_ready() => {
                    good.push(format!("{m} loaded and registered as a peer-memory client ({NV_MEM})"));
                    format!("{m} loaded, nv_mem present")
                }
                (Some(m), true) => format!("{m} loaded and nv_mem present, but the GPU reports GPU_DIRECT_RDMA_SUPPORTED=0"),
                (Some(m), false) => format!("{m} loaded but {NV_MEM} is absent: ib_core has no peer-memory client registered (the RDMA stack lacks MLNX_OFED/DOCA-OFED's peer-memory API, or the module was built against another ib_core)"),
                (None, _) => "nvidia_peermem is not loaded".to_string(),
            };
            paths.push(format!("peermem: {state}"));
        }
        if path.dmabuf_allowed {
            let state = match (&path.open_module, path.dmabuf_attr) {
                (Ok(true), Some(true)) if path.kernel_too_old_for_dmabuf() => format!(
                    "open kernel module and DMA_BUF_SUPPORTED=1, but dma-buf export needs kernel {}.{} or newer (NVIDIA/daqiri 3c87196, 7c21e33)",
                    DMABUF_MIN_KERNEL.0, DMABUF_MIN_KERNEL.1
                ),
                (Ok(true), Some(true)) => {
                    good.push(format!(
                        "dma-buf (open kernel module, DMA_BUF_SUPPORTED=1, kernel {kernel})"
                    ));
                    "open kernel module and DMA_BUF_SUPPORTED=1".to_string()
                }
                (Ok(false), _) => {
                    "the proprietary kernel module cannot export dma-buf (needs the open module)"
                        .to_string()
                }
                (Err(e), _) => format!("kernel module flavour unknown ({e})"),
                (Ok(true), Some(false)) => "open kernel module but DMA_BUF_SUPPORTED=0".to_string(),
                (Ok(true), None) => {
                    "open kernel module, DMA_BUF_SUPPORTED unknown (CUDA not available)".to_string()
                }
            };
            // tune_system.py (89eacf7) takes /dev/dma_heap/system for the dma-buf path; it
            // shows the kernel's dma-buf heaps, not that this GPU exports dma-buf, so it is
            // told, never judged (CUDA's DMA_BUF_SUPPORTED answers for the GPU).
            let heap = if ctx.exists("/dev/dma_heap/system") {
                ", /dev/dma_heap/system present"
            } else {
                ""
            };
            paths.push(format!("dma-buf: {state} (kernel {kernel}{heap})"));
        }
        let observed = paths.join("; ");
        let expected = ctx.profile.profile.gpu.gpudirect_paths.join(" or ");
        // The one judgement, `GpuDirectPath::ready`, which the plan also calls: `good` only
        // words the ready paths.
        let v = if let (true, Some(first)) = (path.ready(), good.first()) {
            // dma-buf alone: DAQIRI's DPDK is patched for it (dpdk_patches/dmabuf.patch), a
            // build against stock DPDK is not (tune_system.py's words, NVIDIA/daqiri 89eacf7).
            let stock = if !path.peermem_ready() && path.peermem_allowed {
                "; nvidia_peermem is not loaded: enough for DAQIRI's DPDK with dpdk_patches/dmabuf.patch and its ibverbs engine, but a DAQIRI built against stock DPDK needs nvidia_peermem (NVIDIA/daqiri 89eacf7)"
            } else {
                ""
            };
            Verdict::pass(
                ID,
                g.subject(),
                format!("GPUDirect path ready: {first}{stock}"),
            )
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

fn plan_peermem(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    const ID: &str = "gpu.peermem";
    if !cx
        .lp
        .profile
        .gpu
        .gpudirect_paths
        .iter()
        .any(|p| p == "peermem")
    {
        return Ok(());
    }
    let has_gpu = cx
        .facts
        .pci()
        .map(|f| f.tree.gpus().next().is_some())
        .unwrap_or(false);
    if !has_gpu {
        plan.note(ID, NoteLevel::Skip, "no discrete NVIDIA GPU on the PCI bus");
        return Ok(());
    }
    // An integrated GPU (GB10) sits on the PCI bus too, but nvidia_peermem cannot load for it
    // (EINVAL: no separate BAR1; seed 000, DGX Spark tab).
    if let Ok(snap) = cx.facts.gpus() {
        if !snap.gpus.is_empty() && snap.gpus.iter().all(|g| g.integrated() == Some(true)) {
            plan.note(ID, NoteLevel::Skip, "the GPU is integrated (e.g. GB10): nvidia_peermem cannot load for it; DAQIRI uses host_pinned buffers there");
            return Ok(());
        }
    }
    // The check's judgement (`GpuDirectPath::ready`, which fails it per GPU): only where some
    // discrete GPU has no GPUDirect path is there anything for nvidia_peermem to do (a dma-buf
    // path that is ready needs no module).
    let ctx = cx.context();
    if let Ok(snap) = cx.facts.gpus() {
        let discrete: Vec<_> = snap.gpus.iter().filter(|g| !integrated(g)).collect();
        if !discrete.is_empty() && discrete.iter().all(|g| gpudirect_path(&ctx, g).ready()) {
            return Ok(());
        }
    }
    let module = "nvidia_peermem";
    if cx.opts.runtime && !cx.facts.module_present(module) {
        match cx.target {
            Target::Live => plan.changes.push(Change {
                check: ID.into(),
                subject: module.into(),
                action: Action::owned(LoadModule {
                    name: module.into(),
                }),
                reboot: false,
                note: None,
            }),
            Target::Root => {
                // The root stands in for the kernel: a loaded module is a /proc/modules line.
                let from = cx.read("/proc/modules");
                let mut to = from.clone().unwrap_or_default();
                if !to.is_empty() && !to.ends_with(b"\n") {
                    to.push(b'\n');
                }
                to.extend_from_slice(
                    format!("{module} 16384 0 - Live 0x0000000000000000\n").as_bytes(),
                );
                plan.changes.push(Change {
                    check: ID.into(),
                    subject: module.into(),
                    action: Action::File {
                        path: "/proc/modules".into(),
                        from,
                        to,
                        mode: 0o444,
                    },
                    reboot: false,
                    note: None,
                });
                // ... on a kernel whose RDMA stack has the peer-memory API (MLNX_OFED /
                // DOCA-OFED), where loading it registers the client. (On the live host, a
                // module that loads without registering is what the check then reports.)
                if !cx.facts.exists(NV_MEM) {
                    plan.changes.push(Change {
                        check: ID.into(),
                        subject: module.into(),
                        action: Action::File {
                            path: NV_MEM.into(),
                            from: None,
                            to: Vec::new(),
                            mode: 0o444,
                        },
                        reboot: false,
                        note: None,
                    });
                }
            }
        }
    }
    if cx.opts.persist {
        let text = modules_load(&cx.profile_ref())?;
        cx.file_change(
            plan,
            ID,
            "modules-load.d",
            etc::MODULES_LOAD_PATH,
            text,
            0o644,
            false,
        );
    }
    Ok(())
}

/// A kernel module loaded with modprobe (live hosts; under a root it is a `/proc/modules` line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadModule {
    pub name: String,
}

impl ActionKind for LoadModule {
    fn execute(&self, cx: SetCx<'_>) -> Result<Done, SetError> {
        load_module(cx.host, cx.journal, cx.writer, cx.lockdown, &self.name).map(Done::from)
    }
    fn plan_json(&self) -> serde_json::Value {
        serde_json::json!({ "kind": "module", "module": self.name })
    }
    fn describe(&self) -> String {
        format!("modprobe {}", self.name)
    }
}

/// The setter hook of [`LoadModule`]: journal, modprobe, and take the entry back if the
/// module did not load (revert must not unload a module someone else loads).
pub(crate) fn load_module(
    host: &daqtune_probe::Host,
    j: &mut Journal,
    w: &mut dyn Writer,
    lockdown: Option<&str>,
    name: &str,
) -> Result<String, crate::model::tunable::SetError> {
    let jerr = crate::model::tunable::SetError::Journal;
    let idx = j
        .record(
            w,
            Entry::Module {
                name: name.to_string(),
            },
        )
        .map_err(jerr)?;
    w.modprobe(name, false).map_err(|e| {
            j.take_back(w, idx);
            let mut m = e.to_string();
            if lockdown.is_some_and(|l| l != "none") {
                m.push_str(" (kernel lockdown: unsigned modules are refused under Secure Boot; sign the module or enroll its key with mokutil)");
            }
            m
        })?;
    j.mark_done(w, idx).map_err(jerr)?;
    // modprobe's success is not the kernel's word: the module must be listed now. (The entry
    // stays: revert unloads the module only where the kernel lists it.)
    if !crate::hostio::setters::module_loaded(host, name) {
        return Err(format!(
            "{name}: modprobe succeeded, but the kernel does not list the module (/proc/modules, /sys/module)"
        ).into());
    }
    Ok(format!("loaded {name}"))
}

/// The modules-load.d file that loads nvidia-peermem at boot.
fn modules_load(profile_ref: &str) -> Result<String, daqtune_units::InvalidValue> {
    etc::modules_load(&["nvidia-peermem"], profile_ref)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
