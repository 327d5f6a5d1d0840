//! `irq.affinity`: NIC interrupts away from the isolated data cores. Plan: the data ports'
//! queue IRQs pinned to the housekeeping CPUs now (`/proc/irq/N/smp_affinity_list`, read
//! back; revert writes the old list), and irqbalance told to keep off the isolated CPUs where
//! its own configuration unbans them (`IRQBALANCE_BANNED_CPULIST` in its environment file,
//! the file's original kept in the journal). The kernel argument `irqaffinity=` that keeps
//! new IRQs off them at boot is kernel.cmdline's.

use crate::hostio::setters::Target;
use crate::model::context::nics::{data_path_nics, no_nic_reason};
use crate::model::context::Context;
use crate::model::plan::{Action, Change, NoteLevel, Plan, PlanCx, PlanError};
use crate::model::tunable::{no_files, Planner, Tunable};
use crate::model::verdict::{Area, Verdict};
use daqtune_probe::cpulist::parse_cpulist;
use daqtune_probe::CpuSet;

pub const AFFINITY: Tunable = Tunable {
    id: "irq.affinity",
    area: Area::Cpu,
    title: "NIC interrupts kept off the isolated CPUs",
    aliases: &["irq", "irqaffinity"],
    doc: include_str!("../../../docs/checks/irq.affinity.md"),
    needs_root: false,
    profile_keys: &["cpu.isolated", "cpu.irqaffinity"],
    check: run_affinity,
    planner: Some(Planner {
        order: 45,
        with: &[],
        plan: plan_affinity,
        artifacts: &[],
        port_reset: crate::model::tunable::PortReset::Follows(port_irq_attrs),
        owned_files: no_files,
    }),
};

/// The IRQ attributes irq.affinity sets on the ports `ifnames` (their PCI function's MSI/MSI-X
/// vectors, as listed now): what a port reset loses and apply and revert write again.
fn port_irq_attrs(
    host: &daqtune_probe::Host,
    ifnames: &[String],
) -> std::collections::BTreeSet<String> {
    ifnames
        .iter()
        .filter_map(|n| {
            host.read_dir(&format!("/sys/class/net/{n}/device/msi_irqs"))
                .ok()
        })
        .flatten()
        .filter(|irq| irq.parse::<u32>().is_ok())
        .flat_map(|irq| {
            ["smp_affinity_list", "effective_affinity_list"].map(|f| format!("/proc/irq/{irq}/{f}"))
        })
        .collect()
}

/// One IRQ of a data port as read: its affinity (and effective affinity, where the kernel
/// shows it), raw and parsed.
#[derive(Debug, Clone)]
pub struct IrqState {
    pub irq: u32,
    pub raw: String,
    pub aff: CpuSet,
    pub eff_raw: Option<String>,
    pub eff: Option<CpuSet>,
}

impl IrqState {
    /// The one judgement: the IRQ may run on an isolated CPU (its affinity, or the CPU the
    /// kernel actually chose, meets the isolated set).
    pub fn on_isolated(&self, iso: &CpuSet) -> bool {
        !self.aff.intersection(iso).is_empty()
            || self
                .eff
                .as_ref()
                .is_some_and(|e| !e.intersection(iso).is_empty())
    }
}

/// The IRQs (MSI/MSI-X vectors) of the PCI function at `sysfs`, and how many were
/// unreadable; `Err` says why there are none, from what the facts know of the function's
/// driver (`driver`: the bound driver's name, as `nic.driver` reports it).
pub fn port_irqs(
    ctx: &Context,
    sysfs: &str,
    driver: Option<&str>,
) -> Result<(Vec<IrqState>, usize), String> {
    let listed = ctx.read_dir(&format!("{sysfs}/msi_irqs"));
    let irqs: Vec<u32> = listed
        .as_deref()
        .map(|v| v.as_slice())
        .unwrap_or_default()
        .iter()
        .filter_map(|s| s.parse().ok())
        .collect();
    if irqs.is_empty() {
        // The kernel lists a function's MSI/MSI-X vectors in msi_irqs/ while a driver holds
        // them (Documentation/ABI/testing/sysfs-bus-pci): a bound driver with none listed is a
        // root that did not record them, or a driver on legacy INTx; never "not bound".
        return Err(match (driver, &listed) {
            (None, _) => "no driver bound: the function has no interrupts to place".to_string(),
            (Some(d), Err(e)) if e.not_found => format!(
                "{d} is bound, but {sysfs}/msi_irqs is absent: the vectors were not recorded in this root (a live host lists them while the driver holds them)"
            ),
            (Some(d), Err(e)) => format!("{d} is bound, but {sysfs}/msi_irqs cannot be read: {e}"),
            (Some(d), Ok(_)) => format!(
                "{d} is bound but holds no MSI/MSI-X vector ({sysfs}/msi_irqs is empty: legacy INTx, or the interface was never brought up)"
            ),
        });
    }
    let mut out = Vec::new();
    let mut unreadable = 0;
    for irq in irqs {
        let read = |file: &str| {
            ctx.facts()
                .read_string(&format!("/proc/irq/{irq}/{file}"))
                .ok()
                .and_then(|raw| parse_cpulist(raw.trim(), None).ok().map(|s| (raw, s)))
        };
        let Some((raw, aff)) = read("smp_affinity_list") else {
            unreadable += 1;
            continue;
        };
        let (eff_raw, eff) = match read("effective_affinity_list") {
            Some((r, e)) => (Some(r), Some(e)),
            None => (None, None),
        };
        out.push(IrqState {
            irq,
            raw,
            aff,
            eff_raw,
            eff,
        });
    }
    Ok((out, unreadable))
}

/// The CPUs the data ports' IRQs are pinned to: the profile's `irqaffinity`, else every
/// online CPU that is not isolated.
fn housekeeping(ctx: &Context, iso: &CpuSet) -> Option<CpuSet> {
    if let Some(l) = &ctx.profile.profile.cpu.irqaffinity {
        if let Ok(s) = parse_cpulist(l, None) {
            return Some(s.difference(iso)).filter(|s| !s.is_empty());
        }
    }
    let online = ctx.cpus().ok()?.online.clone();
    Some(online.difference(iso)).filter(|s| !s.is_empty())
}

fn plan_affinity(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    let ctx = cx.context();
    let Some((iso, _)) = isolated(&ctx) else {
        return Ok(());
    };
    let Ok(f) = ctx.pci() else {
        return Ok(());
    };
    let Some(hk) = housekeeping(&ctx, &iso) else {
        plan.note(
            ID,
            NoteLevel::Skip,
            "no housekeeping CPU left outside the isolated set to pin the NIC interrupts to",
        );
        return Ok(());
    };
    let to = hk.to_string();
    if cx.opts.runtime {
        for n in data_path_nics(&ctx, f) {
            let Some(d) = f.tree.get(n.addr) else {
                continue;
            };
            let Ok((irqs, _)) = port_irqs(&ctx, &d.sysfs, d.driver.as_deref()) else {
                continue;
            };
            for s in irqs.iter().filter(|s| s.on_isolated(&iso)) {
                plan.changes.push(Change {
                    check: ID.into(),
                    subject: format!("{} IRQ {}", n.label(), s.irq),
                    action: Action::Attr {
                        path: format!("/proc/irq/{}/smp_affinity_list", s.irq),
                        from: s.raw.clone(),
                        to: to.clone(),
                        shared_count: false,
                    },
                    reboot: false,
                    note: None,
                });
                // A host root stands in for the kernel, which moves the effective affinity
                // itself on a live host.
                if let (Target::Root, Some(raw)) = (cx.target, &s.eff_raw) {
                    if s.eff.as_ref().is_some_and(|e| !e.is_subset(&hk)) {
                        plan.changes.push(Change {
                            check: ID.into(),
                            subject: format!("{} IRQ {}", n.label(), s.irq),
                            action: Action::Attr {
                                path: format!("/proc/irq/{}/effective_affinity_list", s.irq),
                                from: raw.clone(),
                                to: hk.first().map(|c| c.to_string()).unwrap_or_default(),
                                shared_count: false,
                            },
                            reboot: false,
                            note: None,
                        });
                    }
                }
            }
        }
    }
    if cx.opts.persist {
        if let Some((path, from, text)) =
            crate::model::context::irqbalance::ban_edit(cx.facts, &iso)
        {
            plan.changes.push(Change {
                check: ID.into(),
                subject: "irqbalance".into(),
                action: Action::File {
                    path,
                    from: Some(from.into_bytes()),
                    to: text.into_bytes(),
                    mode: 0o644,
                },
                reboot: false,
                note: Some(format!(
                    "IRQBALANCE_BANNED_CPULIST={iso}; takes effect when irqbalance restarts (`sudo systemctl restart irqbalance`)"
                )),
            });
        }
    }
    Ok(())
}

/// The CPUs interrupts must stay off: what the kernel isolated, else what `isolcpus=` names,
/// else the profile's data cores.
fn isolated(ctx: &Context) -> Option<(CpuSet, &'static str)> {
    if let Some(i) = ctx
        .cpus()
        .ok()
        .and_then(|c| c.isolated.clone())
        .filter(|s| !s.is_empty())
    {
        return Some((i, "isolated CPUs"));
    }
    if let Some(i) = ctx.cmdline_isolated() {
        return Some((i, "isolcpus"));
    }
    ctx.data_cores()
        .ok()
        .flatten()
        .filter(|s| !s.is_empty())
        .map(|s| (s, "profile data cores"))
}

/// irqbalance's own configuration deciding against the isolation: one verdict each.
fn irqbalance_verdicts(ctx: &Context, iso: &CpuSet) -> Vec<Verdict> {
    crate::model::context::irqbalance::host_findings(ctx.facts(), iso)
        .into_iter()
        .map(|m| {
            Verdict::warn(ID, "irqbalance", m)
                .expected(format!("irqbalance keeps interrupts off {iso}"))
                .fix(format!(
                    "set IRQBALANCE_BANNED_CPULIST={iso} in that file (or remove the line: irqbalance then bans isolcpus/nohz_full CPUs itself), then `sudo systemctl restart irqbalance`"
                ))
        })
        .collect()
}

const ID: &str = "irq.affinity";

fn run_affinity(ctx: &Context) -> Vec<Verdict> {
    let iso = isolated(ctx);
    let balance = iso
        .as_ref()
        .map(|(i, _)| irqbalance_verdicts(ctx, i))
        .unwrap_or_default();
    let f = match ctx.pci() {
        Ok(f) => f,
        Err(e) => {
            let mut out = vec![Verdict::skip(ID, "host", e.to_string())];
            out.extend(balance);
            return out;
        }
    };
    let nics = data_path_nics(ctx, f);
    if nics.is_empty() {
        let mut out = vec![Verdict::skip(ID, "host", no_nic_reason(ctx))];
        out.extend(balance);
        return out;
    }
    let Some((iso, source)) = iso else {
        return vec![Verdict::na(
            ID,
            "host",
            "no CPUs are isolated: there is nothing to keep interrupts away from",
        )];
    };
    let mut out = balance;
    let irqbalance = ctx.processes().iter().any(|p| p == "irqbalance");
    for n in nics {
        let Some(d) = f.tree.get(n.addr) else {
            continue;
        };
        let (irqs, unreadable) = match port_irqs(ctx, &d.sysfs, d.driver.as_deref()) {
            Ok(x) => x,
            Err(why) => {
                out.push(Verdict::skip(ID, n.label(), why));
                continue;
            }
        };
        if irqs.is_empty() {
            out.push(Verdict::skip(
                ID,
                n.label(),
                "/proc/irq/*/smp_affinity_list unreadable",
            ));
            continue;
        }
        let total = irqs.len() + unreadable;
        let bad: Vec<String> = irqs
            .iter()
            .filter(|s| s.on_isolated(&iso))
            .map(|s| format!("{}->{}", s.irq, s.aff))
            .collect();
        if bad.is_empty() {
            out.push(
                Verdict::pass(
                    ID,
                    n.label(),
                    format!("{} interrupt(s) off the {source} {iso}", irqs.len()),
                )
                .expected(format!("not on {iso}")),
            );
        } else {
            let mut fix = "sudo daqtune apply --only irq.affinity (pins them to the housekeeping CPUs through /proc/irq/N/smp_affinity_list, read back, undone by revert); persistent: kernel argument irqaffinity= (kernel.cmdline). A write that fails with EIO is a kernel-managed IRQ: use isolcpus=managed_irq,...".to_string();
            if irqbalance {
                fix.push_str(&format!("; irqbalance is running and moves IRQs back: set IRQBALANCE_BANNED_CPULIST={iso} in /etc/default/irqbalance"));
            }
            out.push(
                Verdict::warn(
                    ID,
                    n.label(),
                    format!(
                        "{} of {} interrupt(s) may run on the {source} {iso}",
                        bad.len(),
                        total
                    ),
                )
                .observed(bad.join(" "))
                .expected(format!("not on {iso}"))
                .fix(fix),
            );
        }
    }
    out
}
