//! `pcie.mrrs`: Max Read Request Size of the data-path NIC physical functions (DevCtl bits
//! 14:12). Plan: a read-modify-write of DevCtl now (shared config-space setter), and a udev
//! rule that sets it again when a PF is re-added.

use crate::model::context::nics::{
    cap_visibility_skip, data_path_nics, nic_devices, no_nic_reason, pci_or_skip,
};
use crate::model::context::Context;
use crate::model::facts::Facts;
use crate::model::plan::{Action, Change, NoteLevel, Plan, PlanCx, PlanError};
use crate::model::profile::LoadedProfile;
use crate::model::tunable::{Artifact, ArtifactError, GenerateCx, Planner, Tunable};
use crate::model::verdict::{Area, Verdict};
use daqtune_probe::pci::config::mrrs_code;
use daqtune_units::udev;

pub const MRRS: Tunable = Tunable {
    id: "pcie.mrrs",
    area: Area::Pcie,
    title: "Max Read Request Size of the NIC physical functions",
    aliases: &["mrrs"],
    doc: include_str!("../../../docs/checks/pcie.mrrs.md"),
    needs_root: true,
    profile_keys: &["pcie.mrrs"],
    check: run_mrrs,
    planner: Some(Planner {
        order: 4,
        with: &[],
        plan: plan_mrrs,
        artifacts: &[Artifact {
            kind: "udev-mrrs",
            help: "udev rule restoring MRRS on the data-path PFs",
            render: generate_rule,
        }],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: |_| vec![udev::RULE_PATH.to_string()],
    }),
};

fn run_mrrs(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "pcie.mrrs";
    let f = match pci_or_skip(ctx, ID) {
        Ok(f) => f,
        Err(v) => return v,
    };
    let nics = nic_devices(ctx, f);
    if nics.is_empty() {
        return vec![Verdict::skip(ID, "host", no_nic_reason(ctx))];
    }
    let want = ctx.profile.profile.pcie.mrrs;
    let code = mrrs_code(want).unwrap_or(5);
    let mut out = Vec::new();
    let mut vfs = 0;
    for (d, n) in nics {
        if d.is_vf {
            vfs += 1;
            continue;
        }
        let Some(cap) = d.pcie() else {
            out.push(cap_visibility_skip(ctx, ID, n.label(), d));
            continue;
        };
        let observed = cap.mrrs;
        if !wrong(cap, want) {
            out.push(
                Verdict::pass(
                    ID,
                    n.label(),
                    format!(
                        "MRRS {observed} (DevCtl at CAP_EXP+8 = 0x{:02x})",
                        cap.offset + 8
                    ),
                )
                .observed(observed)
                .expected(want),
            );
        } else {
            out.push(
                Verdict::fail(
                    ID,
                    n.label(),
                    format!(
                        "MRRS {observed}{}, the profile wants {want}",
                        if daqtune_probe::pci::config::is_reserved_payload(observed) {
                            " (a reserved encoding of DevCtl bits 14:12)"
                        } else {
                            ""
                        }
                    ),
                )
                    .observed(observed)
                    .expected(want)
                    .fix(format!(
                        "sudo daqtune apply --only pcie.mrrs   (by hand: sudo setpci -s {} CAP_EXP+8.w={:x}000:7000; resets and re-adds clear it)",
                        d.addr, code
                    )),
            );
        }
    }
    if vfs > 0 {
        out.push(Verdict::na(
            ID,
            format!("{vfs} virtual function(s)"),
            "MRRS is reserved in VFs; the physical function's value applies",
        ));
    }
    out
}

/// The one judgement, which the check turns into a failure and the plan into a DevCtl write:
/// the function's MRRS is not the profile's.
fn wrong(cap: &daqtune_probe::pci::config::PcieCap, want: u32) -> bool {
    cap.mrrs != want
}

/// MRRS in DevCtl bits 14:12, as the executor reports it.
const FIELD: crate::model::plan::RegField = crate::model::plan::RegField {
    name: "MRRS",
    shift: 12,
    base: 128,
    ignored: "the device ignores MRRS writes (some emulated and older NICs do)",
};

fn plan_mrrs(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    const ID: &str = "pcie.mrrs";
    let want = cx.lp.profile.pcie.mrrs;
    // The functions the check judges: the data-path NICs' physical functions (the profile's
    // interfaces, else every ConnectX PF).
    let pfs: Vec<String> = match data_path_pfs(cx.facts, cx.lp) {
        Ok(p) => p,
        Err(e) => {
            plan.note(ID, NoteLevel::Skip, e.to_string());
            return Ok(());
        }
    };
    if let Some(dev) = &cx.opts.device {
        let a: daqtune_units::PciAddr = dev.parse()?;
        if !pfs.iter().any(|p| *p == a.to_string()) {
            return Err(PlanError::Device(
                dev.clone(),
                "not a data-path physical function on this host (the profile's interfaces, else the ConnectX PFs; VFs have no MRRS)".into(),
            ));
        }
    }
    if pfs.is_empty() {
        plan.note(ID, NoteLevel::Skip, no_nic_reason(&cx.context()));
        return Ok(());
    }
    if cx.opts.runtime {
        for pf in &pfs {
            if cx.opts.device.as_deref().is_some_and(|d| {
                d.parse::<daqtune_units::PciAddr>()
                    .map(|a| a.to_string())
                    .ok()
                    .as_deref()
                    != Some(pf.as_str())
            }) {
                continue;
            }
            let path = format!("/sys/bus/pci/devices/{}/config", pf);
            // DevCtl as the PCI facts decoded it from the config space they read; apply reads
            // the register again under its lock and refuses if it moved.
            let dev = cx
                .facts
                .pci()
                .ok()
                .and_then(|f| f.tree.devices.iter().find(|d| d.addr.to_string() == *pf));
            let Some(dev) = dev else { continue };
            if let (None, Some(e)) = (&dev.config, &dev.config_error) {
                plan.note(
                    ID,
                    NoteLevel::Skip,
                    format!("{}: cannot read config space: {e}", pf),
                );
                continue;
            }
            let Some(cap) = dev.pcie() else {
                let why = if dev.config_len <= 64 {
                    "only 64 bytes of config space are visible (not root)"
                } else {
                    "no PCI Express capability"
                };
                plan.note(
                    ID,
                    NoteLevel::Skip,
                    format!("{}: {why}; refusing to write", pf),
                );
                continue;
            };
            if !wrong(cap, want) {
                continue;
            }
            let off = cap.offset + 8;
            let devctl = cap.devctl;
            let new = match daqtune_probe::pci::config::mrrs_rmw(devctl, want) {
                Ok(n) => n,
                Err(e) => {
                    plan.note(ID, NoteLevel::Skip, format!("{}: {e}", pf));
                    continue;
                }
            };
            if new != devctl {
                let cur = 128u32 << ((devctl >> 12) & 7);
                plan.changes.push(Change {
                    check: ID.into(),
                    subject: pf.clone(),
                    action: Action::ConfigWord {
                        bdf: pf.clone(),
                        register: "DevCtl".into(),
                        path,
                        offset: off as u64,
                        from: devctl,
                        to: new,
                        mask: 0x7000,
                        field: Some(FIELD),
                    },
                    reboot: false,
                    note: Some(format!("MRRS {cur} -> {want} (DevCtl at 0x{off:x}: 0x{devctl:04x} -> 0x{new:04x}, bits 14:12 only)")),
                });
            }
        }
    }
    if cx.opts.persist && cx.opts.device.is_none() {
        let addrs: Vec<daqtune_units::PciAddr> =
            pfs.iter().filter_map(|p| p.parse().ok()).collect();
        if let Some(exe) = cx.unit_exe(plan, ID, udev::RULE_PATH) {
            let text = rule(&exe, &cx.profile_ref(), &addrs)?;
            cx.file_change(plan, ID, "udev rule", udev::RULE_PATH, text, 0o644, false);
        }
    }
    Ok(())
}

/// The data-path physical functions (the profile's interfaces, whatever their make, else the
/// ConnectX PFs): what MRRS is judged and planned for and the udev rule matches.
fn data_path_pfs(
    facts: &Facts,
    lp: &LoadedProfile,
) -> Result<Vec<String>, crate::model::tunable::Unjudged> {
    let f = facts.pci()?;
    Ok(data_path_nics(&Context::with_facts(facts, lp), f)
        .iter()
        .filter(|n| !n.is_vf)
        .map(|n| n.addr.to_string())
        .collect())
}

/// The udev rule that sets MRRS again when one of `addrs` is (re-)added.
fn rule(
    exe: &str,
    profile_ref: &str,
    addrs: &[daqtune_units::PciAddr],
) -> Result<String, daqtune_units::InvalidValue> {
    udev::mrrs_rule(exe, profile_ref, addrs)
}

/// `generate udev-mrrs`: the rule for `--device`, else the data-path PFs.
fn generate_rule(g: &GenerateCx) -> Result<String, ArtifactError> {
    let list = if g.devices.is_empty() {
        data_path_pfs(g.facts, g.lp).unwrap_or_default()
    } else {
        g.devices.to_vec()
    };
    let addrs = list
        .iter()
        .map(|d| d.parse::<daqtune_units::PciAddr>())
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rule(g.exe()?, g.profile_ref, &addrs)?)
}

#[cfg(test)]
mod tests {
    use crate::cmd::apply::testroot::*;
    use crate::model::plan::{Action, Plan, PlanOptions};
    use crate::tunables::build_plan;
    use daqtune_probe::Host;

    fn mrrs_plan(root: &std::path::Path) -> Plan {
        let host = Host::at(root).expect("host");
        let lp = crate::model::profile::load("igx-orin").expect("profile");
        let opts = PlanOptions {
            only: vec!["pcie.mrrs".into()],
            persist: false,
            ..Default::default()
        };
        build_plan(&host, &lp, &opts).expect("plan")
    }

    #[test]
    fn mrrs_refusals() {
        let d = igx_root_without_pci();
        let chain = ["0005:00:00.0"];
        // A PF whose DevCtl reads 0xffff (gone or in reset).
        let mut gone = connectx(&chain, "0005:01:00.0", None);
        gone.config = config_space(0x15b3, 0x1021, 0x020000, Some(0x70), 0xffff, 4096);
        add_function(d.path(), &gone);
        // A PF without a PCI Express capability.
        let mut nocap = connectx(&chain, "0005:02:00.0", None);
        nocap.config = config_space(0x15b3, 0x1021, 0x020000, None, 0, 4096);
        add_function(d.path(), &nocap);
        // Only 64 bytes visible (not root).
        let mut short = connectx(&chain, "0005:03:00.0", None);
        short.config = config_space(0x15b3, 0x1021, 0x020000, Some(0x70), DEVCTL_UNTUNED, 64);
        add_function(d.path(), &short);
        // A good PF with a VF: only the PF is changed.
        add_function(d.path(), &connectx(&chain, "0005:04:00.0", None));
        let mut vf = connectx(&chain, "0005:04:00.2", None);
        vf.device = 0x101e;
        vf.physfn = Some("0005:04:00.0");
        add_function(d.path(), &vf);
        let plan = mrrs_plan(d.path());
        let subjects: Vec<&str> = plan.changes.iter().map(|c| c.subject.as_str()).collect();
        assert_eq!(subjects, ["0005:04:00.0"], "{plan:?}");
        match &plan.changes[0].action {
            Action::ConfigWord {
                offset, from, to, ..
            } => {
                assert_eq!(*offset, 0x78);
                assert_eq!(*from, DEVCTL_UNTUNED);
                assert_eq!(*to, (DEVCTL_UNTUNED & !0x7000) | 0x5000);
            }
            a => panic!("{a:?}"),
        }
        // The notes as data: the plan's words are the CLI's (daqtune-render).
        let notes: String = plan
            .notes
            .iter()
            .map(|n| format!("{}\n", n.message))
            .collect();
        assert!(
            notes.contains("0005:01:00.0: DevCtl reads 0xffff"),
            "{notes}"
        );
        assert!(
            notes.contains("0005:02:00.0: no PCI Express capability; refusing to write"),
            "{notes}"
        );
        assert!(
            notes.contains("0005:03:00.0: only 64 bytes of config space"),
            "{notes}"
        );
    }

    #[test]
    fn mrrs_lockdown_is_named() {
        let d = igx_root_without_pci();
        std::fs::write(
            d.path().join("sys/kernel/security/lockdown"),
            "none [integrity] confidentiality\n",
        )
        .expect("w");
        add_igx_pci(d.path());
        let plan = mrrs_plan(d.path());
        assert_eq!(plan.changes.len(), 2);
        let t: String = plan
            .notes
            .iter()
            .map(|n| format!("{}\n", n.message))
            .collect();
        assert!(
            t.contains("kernel lockdown is `integrity`") && t.contains("Secure Boot"),
            "{t}"
        );
    }
}
