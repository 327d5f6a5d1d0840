//! `irq.affinity`: NIC interrupts away from the isolated data cores.

use crate::context::nics::{data_path_nics, no_nic_reason};
use crate::context::Context;
use crate::tunable::Tunable;
use crate::verdict::{Area, Verdict};
use daqtune_probe::cpulist::parse_cpulist;
use daqtune_probe::CpuSet;

pub const AFFINITY: Tunable = Tunable {
    id: "irq.affinity",
    area: Area::Cpu,
    title: "NIC interrupts kept off the isolated CPUs",
    aliases: &["irq", "irqaffinity"],
    doc: include_str!("../../../docs/checks/irq.affinity.md"),
    needs_root: false,
    profile_keys: &["cpu.isolated"],
    check: run_affinity,
    planner: None,
};

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
    crate::context::irqbalance::host_findings(ctx.facts(), iso)
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
        let irqs: Vec<u32> = ctx
            .read_dir(&format!("{}/msi_irqs", d.sysfs))
            .unwrap_or_default()
            .iter()
            .filter_map(|s| s.parse().ok())
            .collect();
        if irqs.is_empty() {
            out.push(Verdict::skip(
                ID,
                n.label(),
                "no MSI/MSI-X vectors listed (driver not bound, or msi_irqs not exposed)",
            ));
            continue;
        }
        let mut bad = Vec::new();
        let mut unreadable = 0;
        for irq in &irqs {
            let read = |file: &str| {
                ctx.read_attr(&format!("/proc/irq/{irq}/{file}"))
                    .ok()
                    .and_then(|s| parse_cpulist(&s, None).ok())
            };
            let Some(aff) = read("smp_affinity_list") else {
                unreadable += 1;
                continue;
            };
            let eff = read("effective_affinity_list");
            let hit = aff.intersection(&iso);
            let eff_hit = eff
                .as_ref()
                .map(|e| e.intersection(&iso))
                .filter(|e| !e.is_empty());
            if !hit.is_empty() || eff_hit.is_some() {
                bad.push(format!("{irq}->{aff}"));
            }
        }
        if unreadable == irqs.len() {
            out.push(Verdict::skip(
                ID,
                n.label(),
                "/proc/irq/*/smp_affinity_list unreadable",
            ));
            continue;
        }
        if bad.is_empty() {
            out.push(
                Verdict::pass(
                    ID,
                    n.label(),
                    format!(
                        "{} interrupt(s) off the {source} {iso}",
                        irqs.len() - unreadable
                    ),
                )
                .expected(format!("not on {iso}")),
            );
        } else {
            let mut fix = "write the housekeeping CPUs to /proc/irq/N/smp_affinity_list for the IRQs in `observed`; persistent: kernel argument irqaffinity= (kernel.cmdline). A write that fails with EIO is a kernel-managed IRQ: use isolcpus=managed_irq,...".to_string();
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
                        irqs.len()
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
