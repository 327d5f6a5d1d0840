//! `pcie.acs`: ACS P2P redirect on the ports between GPU and NIC. Plan (only with
//! `--allow-acs`, and only where no IOMMU translates): clear the redirect bits now; persistent
//! through `pci=disable_acs_redir=` (kernel 5.1+) or a unit.

use crate::model::context::nics::{
    data_path_nics, nic_devices, no_nic_reason, pci_gpus, pci_or_skip, NEEDS_ROOT,
};
use crate::model::context::Context;
use crate::model::plan::{Action, Change, NoteLevel, Plan, PlanCx, PlanError};
use crate::model::tunable::{Planner, Tunable};
use crate::model::verdict::{Area, Verdict};
use daqtune_probe::pci::config::Visibility;
use daqtune_probe::pci::topo::{classify, PathClass};
use daqtune_probe::pci::{PciAddr, PortType};
use daqtune_units::systemd;
use std::collections::BTreeSet;

pub const ACS: Tunable = Tunable {
    id: "pcie.acs",
    area: Area::Pcie,
    title: "ACS redirect on the ports between GPU and NIC",
    aliases: &["acs"],
    doc: include_str!("../../../docs/checks/pcie.acs.md"),
    needs_root: true,
    profile_keys: &[],
    check: run_acs,
    planner: Some(Planner {
        order: 5,
        with: &[],
        plan: plan_acs,
        artifacts: &[crate::model::tunable::Artifact {
            kind: "acs-unit",
            help: "systemd unit clearing ACS redirection on the data path at boot",
            render: |g| Ok(unit(g.exe()?, g.profile_ref).render()?),
        }],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: |_| vec![format!("/etc/systemd/system/{}", systemd::ACS_UNIT)],
    }),
};

fn run_acs(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "pcie.acs";
    let f = match pci_or_skip(ctx, ID) {
        Ok(f) => f,
        Err(v) => return v,
    };
    let gs = pci_gpus(&f.tree);
    let nics = nic_devices(ctx, f);
    if gs.is_empty() || nics.is_empty() {
        return vec![Verdict::skip(
            ID,
            "host",
            if gs.is_empty() {
                "no NVIDIA GPU on the PCI bus".to_string()
            } else {
                no_nic_reason(ctx)
            },
        )];
    }
    let mut ports: BTreeSet<PciAddr> = BTreeSet::new();
    let mut pairs = 0;
    let mut translating = Vec::new();
    for g in &gs {
        for (d, _) in &nics {
            let p = classify(&f.tree, g.addr, d.addr);
            if !matches!(p.class, PathClass::Pix | PathClass::Pxb | PathClass::Phb) {
                continue;
            }
            pairs += 1;
            ports.extend(p.ports());
            for x in [*g, *d] {
                if matches!(x.iommu_type.as_deref(), Some("DMA") | Some("DMA-FQ"))
                    && !translating.contains(&x.addr)
                {
                    translating.push(x.addr);
                }
            }
        }
    }
    if pairs == 0 {
        return vec![Verdict::na(
            ID,
            "host",
            "no GPU and NIC share a PCIe hierarchy: peer traffic crosses the CPU whatever ACS says",
        )];
    }
    let mut out = Vec::new();
    let mut clean = 0;
    let mut hidden = Vec::new();
    let mut offenders = Vec::new();
    for a in &ports {
        let Some(d) = f.tree.get(*a) else { continue };
        match d.config.as_ref() {
            Some(c) if c.acs_visibility() == Visibility::Hidden => hidden.push(d.addr),
            Some(c) => {
                match c.acs {
                    Some(acs) if redirected(acs.ctrl) => {
                        offenders.push(d.addr);
                        out.push(
                        Verdict::warn(
                            ID,
                            format!("{} ({})", d.addr, d.port_type().map(PortType::as_str).unwrap_or("port")),
                            format!("{} set: GPU-NIC peer traffic is redirected up to the root complex", acs.redirects_enabled().join(", ")),
                        )
                        .observed(format!("ACSCtl 0x{:04x}", acs.ctrl)),
                    );
                    }
                    _ => clean += 1,
                }
            }
            None => hidden.push(d.addr),
        }
    }
    if !offenders.is_empty() {
        let list = offenders
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(";");
        let fix = if translating.is_empty() {
            format!("sudo daqtune apply --only pcie.acs --allow-acs   (persistent kernel argument: pci=disable_acs_redir={list}, with the `;` escaped as `\\;` in GRUB)")
        } else {
            format!(
                "leave ACS on: the IOMMU translates DMA for {} (redirect off under a translating IOMMU can misdeliver DMA); first switch to passthrough (iommu check), then pci=disable_acs_redir={list}",
                translating.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ")
            )
        };
        for v in out.iter_mut() {
            v.fix = Some(fix.clone());
        }
    }
    if !hidden.is_empty() {
        out.push(Verdict::skip(
            ID,
            hidden
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            if crate::model::capture::manifest(ctx.facts()).is_some() {
                let why: Vec<String> = hidden
                    .iter()
                    .filter_map(|a| {
                        let len = f
                            .tree
                            .get(*a)
                            .and_then(|d| d.config.as_ref())
                            .map_or(0, |c| c.len);
                        crate::model::capture::unseen_registers(ctx.facts(), &a.to_string(), len)
                    })
                    .collect();
                format!("ACS state unknown: {}", why.join("; "))
            } else {
                format!("ACS state unknown: extended config space not readable ({NEEDS_ROOT})")
            },
        ));
    }
    if out.is_empty() || clean > 0 && offenders.is_empty() && hidden.is_empty() {
        out.push(
            Verdict::pass(
                ID,
                "GPU-NIC paths",
                format!("{clean} port(s) between GPU and NIC: ACS redirect off"),
            )
            .observed(format!("{clean} ports")),
        );
    }
    out
}

/// A port between a GPU and a ConnectX PF with an ACS capability.
#[derive(Debug, Clone)]
pub struct AcsPort {
    pub bdf: String,
    pub offset: usize,
    pub cap: u16,
    pub ctrl: u16,
    /// The GPU and NIC whose path crosses it.
    pub ends: (String, String),
    /// Why the redirect may not be cleared for them (a translating IOMMU), if so.
    pub iommu_blocks: Option<String>,
}

/// Ports on every GPU <-> ConnectX path whose ACS capability offers a P2P redirect control
/// (whether it is set now or not: the persistent kernel argument must not depend on whether
/// the runtime change was already made).
pub fn acs_ports(ctx: &Context) -> Result<Vec<AcsPort>, crate::model::tunable::Unjudged> {
    use daqtune_probe::pci::config::ACS_P2P_REDIRECT_MASK;
    let pci = ctx.pci()?;
    let tree = &pci.tree;
    // The pairs the check judges: the data-path NICs, and only paths that stay below one
    // host bridge (PIX/PXB/PHB; elsewhere peer traffic crosses the CPU whatever ACS says).
    let nics = data_path_nics(ctx, pci);
    // Identity (passthrough) or no IOMMU group (IOMMU off) leaves DMA untranslated.
    let translating = |a: daqtune_probe::pci::PciAddr| -> Option<String> {
        let d = tree.get(a)?;
        match d.iommu_type.as_deref() {
            None | Some("identity") => None,
            Some(t) => Some(format!(
                "{a} is behind a translating IOMMU (group type {t})"
            )),
        }
    };
    let mut out: Vec<AcsPort> = Vec::new();
    for gpu in tree.gpus() {
        for nic in &nics {
            let path = daqtune_probe::pci::topo::classify(tree, gpu.addr, nic.addr);
            if !matches!(path.class, PathClass::Pix | PathClass::Pxb | PathClass::Phb) {
                continue;
            }
            let blocks = translating(gpu.addr).or_else(|| translating(nic.addr));
            for p in path.ports() {
                let Some(acs) = tree
                    .get(p)
                    .and_then(|d| d.config.as_ref())
                    .and_then(|c| c.acs)
                else {
                    continue;
                };
                if acs.cap & ACS_P2P_REDIRECT_MASK == 0
                    || out.iter().any(|o| o.bdf == p.to_string())
                {
                    continue;
                }
                out.push(AcsPort {
                    bdf: p.to_string(),
                    offset: acs.offset,
                    cap: acs.cap,
                    ctrl: acs.ctrl,
                    ends: (gpu.addr.to_string(), nic.addr.to_string()),
                    iommu_blocks: blocks.clone(),
                });
            }
        }
    }
    out.sort_by(|a, b| a.bdf.cmp(&b.bdf));
    Ok(out)
}

fn plan_acs(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    use daqtune_probe::pci::config::ACS_P2P_REDIRECT_MASK;
    const ID: &str = "pcie.acs";
    let ports = match acs_ports(&cx.context()) {
        Ok(p) => p,
        Err(e) => {
            plan.note(ID, NoteLevel::Skip, e.to_string());
            return Ok(());
        }
    };
    let set: Vec<&AcsPort> = ports.iter().filter(|p| redirected(p.ctrl)).collect();
    if !cx.opts.allow_acs {
        if !set.is_empty() {
            let list: Vec<&str> = set.iter().map(|p| p.bdf.as_str()).collect();
            plan.note(ID, NoteLevel::Warn, format!(
                "ACS redirect is set on {} (GPU <-> NIC peer traffic goes up to the root complex); `--allow-acs` clears it, only where the IOMMU is off or in passthrough for those devices",
                list.join(", ")
            ));
        }
        return Ok(());
    }
    if let Some(b) = ports.iter().find_map(|p| p.iommu_blocks.clone()) {
        plan.note(ID, NoteLevel::Skip, format!("{b}: clearing ACS redirect would let peer DMA bypass the IOMMU's translation; set `iommu=pt` (x86) or `iommu.passthrough=1` (arm64) first"));
        return Ok(());
    }
    if cx.opts.runtime {
        for p in &set {
            let path = format!("/sys/bus/pci/devices/{}/config", p.bdf);
            let off = p.offset + 6;
            // ACSCtl as this run's PCI facts decoded it (only a visible ACS capability makes
            // a port); apply reads the register again under its lock and refuses if it moved.
            let cur = p.ctrl;
            if cur == 0xffff {
                plan.note(
                    ID,
                    NoteLevel::Skip,
                    format!(
                        "{}: ACSCtl reads 0xffff (device gone); refusing to write",
                        p.bdf
                    ),
                );
                continue;
            }
            let to = cur & !ACS_P2P_REDIRECT_MASK;
            if to != cur {
                plan.changes.push(Change {
                    check: ID.into(),
                    subject: p.bdf.clone(),
                    action: Action::ConfigWord {
                        bdf: p.bdf.clone(),
                        register: "ACSCtl".into(),
                        path,
                        offset: off as u64,
                        from: cur,
                        to,
                        mask: ACS_P2P_REDIRECT_MASK,
                        field: None,
                    },
                    reboot: false,
                    note: Some(format!(
                        "ReqRedir/CmpltRedir/EgressCtrl off on the path {} <-> {}",
                        p.ends.0, p.ends.1
                    )),
                });
            }
        }
    }
    // Persistent: the kernel argument (kernel.cmdline carries it) where the kernel has it
    // (5.1+) and daqtune writes the boot configuration; else a unit that runs this at boot.
    let by_cmdline = cx.cmdline_carries((5, 1));
    if cx.opts.persist && !ports.is_empty() && !by_cmdline {
        let path = format!("/etc/systemd/system/{}", systemd::ACS_UNIT);
        if let Some(exe) = cx.unit_exe(plan, ID, &path) {
            let u = unit(&exe, &cx.profile_ref());
            let text = u.render()?;
            cx.file_change(plan, ID, &u.name, &path, text, 0o644, false);
            cx.enable(plan, ID, &u.name, "multi-user.target");
        }
    }
    Ok(())
}

/// The one judgement, which the check turns into a warning and the plan into an ACSCtl
/// change: a port's ACS control has a P2P redirect bit (ReqRedir, CmpltRedir, EgressCtrl) set.
fn redirected(ctrl: u16) -> bool {
    ctrl & daqtune_probe::pci::config::ACS_P2P_REDIRECT_MASK != 0
}

/// The boot-time unit of this setting: what the plan writes and `generate acs-unit` prints.
fn unit(exe: &str, profile_ref: &str) -> systemd::Oneshot {
    systemd::acs_unit(exe, profile_ref)
}

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_probe::pci::config::Acs;

    /// The judgement agrees with the names the check's message lists, on every ACSCtl value:
    /// a warning always names at least one bit, and the plan clears exactly those.
    #[test]
    fn redirected_is_exactly_a_named_redirect_bit() {
        for ctrl in 0..=u16::MAX {
            let acs = Acs {
                offset: 0x100,
                cap: 0xffff,
                ctrl,
            };
            assert_eq!(
                redirected(ctrl),
                !acs.redirects_enabled().is_empty(),
                "ACSCtl 0x{ctrl:04x}"
            );
        }
        assert!(!redirected(0x0011));
        assert!(redirected(0x0004));
    }
}
