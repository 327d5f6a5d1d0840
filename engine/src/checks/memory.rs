//! `hugepages` and `numa`.

use super::{CheckDef, Context};
use crate::verdict::{Area, Status, Verdict};
use daqtune_probe::mem::{format_size_kb, parse_size_kb};

pub const HUGEPAGES: CheckDef = CheckDef {
    id: "hugepages",
    area: Area::Memory,
    title: "Hugepage pools, per node, and their hugetlbfs mount",
    aliases: &["hugepages", "hugepage"],
    doc: include_str!("../../../docs/checks/hugepages.md"),
    needs_root: false,
    run: run_hugepages,
};

pub const NUMA: CheckDef = CheckDef {
    id: "numa",
    area: Area::Memory,
    title: "NUMA nodes and where the data cores sit",
    aliases: &["numa"],
    doc: include_str!("../../../docs/checks/numa.md"),
    needs_root: false,
    run: run_numa,
};

/// The kernel arguments that reserve the profile's pages at boot (1G pages can only be had
/// reliably at boot, before memory fragments).
pub fn hugepage_args(ctx: &Context) -> Vec<String> {
    let h = &ctx.profile.profile.hugepages;
    let mut args = Vec::new();
    if h.count == 0 {
        return args;
    }
    if h.default_size {
        args.push(format!("default_hugepagesz={}", h.size));
    }
    args.push(format!("hugepagesz={}", h.size));
    args.push(format!("hugepages={}", h.count));
    args
}

fn run_hugepages(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "hugepages";
    let want = &ctx.profile.profile.hugepages;
    let mem = ctx.mem();
    if let Some(e) = &mem.pools_error {
        return vec![Verdict::skip(
            ID,
            "host",
            format!("cannot read hugepage pools: {e}"),
        )];
    }
    let Some(size_kb) = parse_size_kb(&want.size) else {
        return vec![Verdict::error(
            ID,
            "host",
            format!("profile page size `{}` is unreadable", want.size),
        )];
    };
    let size = format_size_kb(size_kb);
    let pools = mem
        .pools
        .iter()
        .map(|p| {
            let nodes: Vec<String> = mem
                .node_pools
                .iter()
                .filter(|n| n.size_kb == p.size_kb && n.total > 0)
                .map(|n| format!("node{} {}", n.node, n.total))
                .collect();
            let per_node = if nodes.is_empty() {
                String::new()
            } else {
                format!(" [{}]", nodes.join(", "))
            };
            format!(
                "{}: {} total, {} free{}",
                format_size_kb(p.size_kb),
                p.total,
                p.free,
                per_node
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let observed = if pools.is_empty() {
        "no hugepage pools".to_string()
    } else {
        pools
    };
    let expected = match &want.mount {
        Some(m) => format!("{} x {size} mounted at {m}", want.count),
        None => format!("{} x {size}", want.count),
    };
    if want.count == 0 {
        return vec![Verdict::pass(ID, "host", "the profile needs no hugepages").observed(observed)];
    }
    let subject = format!("{size} pages");
    let mut problems: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    match mem.pool(size_kb) {
        None => problems.push(format!(
            "the kernel has no {size} pool (/sys/kernel/mm/hugepages/hugepages-{size_kb}kB missing: the CPU or kernel lacks that page size)"
        )),
        Some(p) if p.total < want.count => problems.push(format!(
            "{} x {size} pages reserved, the profile needs {} ({} GiB more)",
            p.total,
            want.count,
            ((want.count - p.total) * size_kb) as f64 / 1048576.0
        )),
        Some(p) if p.free < want.count => warnings.push(format!(
            "{} of {} {size} pages are free: {} are in use (a running application, or files left in hugetlbfs)",
            p.free,
            p.total,
            p.in_use()
        )),
        Some(_) => {}
    }
    if let Some(e) = &mem.mounts_error {
        warnings.push(format!("cannot read mounts: {e}"));
    } else {
        let mounts: Vec<_> = mem
            .hugetlbfs_mounts()
            .filter(|m| mem.mount_page_kb(m) == Some(size_kb))
            .collect();
        match &want.mount {
            Some(target) => {
                let at_target = mem.hugetlbfs_mounts().find(|m| &m.target == target);
                match at_target {
                    None => problems.push(format!(
                        "no hugetlbfs is mounted at {target} for {size} pages"
                    )),
                    Some(m) if mem.mount_page_kb(m) != Some(size_kb) => problems.push(format!(
                        "{target} is mounted with pagesize={} instead of {size}",
                        m.option("pagesize").unwrap_or("default")
                    )),
                    Some(_) => {}
                }
            }
            None if mounts.is_empty() => {
                problems.push(format!("no hugetlbfs mount serves {size} pages"))
            }
            None => {}
        }
        for m in &mounts {
            let left: Vec<String> = ctx
                .read_dir(&m.target)
                .map(|d| d.iter().filter(|n| n.contains("map_")).cloned().collect())
                .unwrap_or_default();
            if !left.is_empty() {
                let shown: Vec<&str> = left.iter().take(4).map(String::as_str).collect();
                warnings.push(format!(
                    "{} leftover map files in {} ({}{}) hold pages of a process that died",
                    left.len(),
                    m.target,
                    shown.join(", "),
                    if left.len() > 4 { ", ..." } else { "" }
                ));
            }
        }
    }
    let fix = format!(
        "sudo daqtune apply --only hugepages   (reserves {} x {size} now, mounts hugetlbfs{} with an owned .mount unit, and adds `{}` to the kernel command line)",
        want.count,
        want.mount.as_deref().map(|m| format!(" at {m}")).unwrap_or_default(),
        hugepage_args(ctx).join(" ")
    );
    if !problems.is_empty() {
        problems.extend(warnings);
        let mut v = Verdict::fail(ID, subject, problems.join("; "))
            .observed(observed)
            .expected(expected)
            .fix(fix);
        if super::cmdline::pending_in_dropin(ctx, &hugepage_args(ctx))
            && !ctx
                .cmdline()
                .is_ok_and(|c| c.values("hugepages").any(|v| v == want.count.to_string()))
        {
            v.status = Status::PendingReboot;
            v.message = format!(
                "the boot reservation is written and waits for a reboot; now: {}",
                v.message
            );
        }
        return vec![v];
    }
    if !warnings.is_empty() {
        return vec![Verdict::warn(ID, subject, warnings.join("; "))
            .observed(observed)
            .expected(expected)
            .fix("stop the application holding the pages, or remove the leftover files (rm /mnt/huge/*map_*) when none runs")];
    }
    vec![
        Verdict::pass(ID, subject, format!("{expected}: {observed}"))
            .observed(observed)
            .expected(expected),
    ]
}

fn run_numa(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "numa";
    let nodes = &ctx.mem().nodes;
    if nodes.is_empty() {
        return vec![Verdict::na(
            ID,
            "host",
            "no NUMA topology exposed (/sys/devices/system/node absent): one memory node",
        )];
    }
    let observed = nodes
        .iter()
        .map(|n| format!("node{}: cpus {}", n.id, n.cpus))
        .collect::<Vec<_>>()
        .join("; ");
    let data = match ctx.data_cores() {
        Ok(Some(d)) => d,
        Ok(None) => {
            return vec![
                Verdict::pass(ID, "host", format!("{} node(s): {observed}", nodes.len()))
                    .observed(observed),
            ]
        }
        Err(e) => {
            return vec![Verdict::skip(
                ID,
                "host",
                format!(
                    "{} node(s): {observed}; data cores unknown: {e}",
                    nodes.len()
                ),
            )
            .observed(observed)]
        }
    };
    let spanned: Vec<u32> = nodes
        .iter()
        .filter(|n| !n.cpus.intersection(&data).is_empty())
        .map(|n| n.id)
        .collect();
    let subject = format!("cpu{data}");
    // Data cores that no node lists: CPUs this host lacks, or node cpulists that were
    // unreadable. Their node is unknown, so they cannot be judged.
    let mut uncovered = data.clone();
    for n in nodes.iter() {
        uncovered = uncovered.difference(&n.cpus);
    }
    if spanned.is_empty() {
        return vec![Verdict::skip(
            ID,
            subject,
            format!("no NUMA node lists the data cores {data}: unreadable node cpulists, or CPUs this host does not have; {observed}"),
        )
        .observed(observed)];
    }
    if !uncovered.is_empty() {
        return vec![Verdict::warn(
            ID,
            subject,
            format!("data cores {uncovered} are on no NUMA node (CPUs this host does not have?)"),
        )
        .observed(observed)];
    }
    if let Some(nic) = ctx.nic_numa_node() {
        if spanned.iter().any(|n| *n != nic) {
            return vec![Verdict::warn(
                ID,
                subject,
                format!("data cores {data} sit on node(s) {spanned:?} but the NIC is on node {nic}: every packet crosses the socket interconnect"),
            )
            .observed(observed)
            .expected(format!("data cores on node {nic}"))
            .fix("choose isolated cores from the NIC's node (profile cpu.isolated, or rule: nic-local)")];
        }
    }
    if spanned.len() > 1 {
        return vec![Verdict::warn(
            ID,
            subject,
            format!("data cores {data} span nodes {spanned:?}: keep the data path on one node"),
        )
        .observed(observed)];
    }
    vec![Verdict::pass(
        ID,
        subject,
        format!("data cores {data} on node {}; {observed}", spanned[0]),
    )
    .observed(observed)]
}
