//! `numa`: the NUMA nodes and where the data cores sit relative to the NICs (observation), and
//! whether the loader finds libnuma, which DAQIRI uses to place its pools on a node.

use crate::model::context::Context;
use crate::model::tunable::Tunable;
use crate::model::verdict::{Area, Verdict};

pub const NUMA: Tunable = Tunable {
    id: "numa",
    area: Area::Memory,
    title: "NUMA nodes and where the data cores sit",
    aliases: &["numa"],
    doc: include_str!("../../../docs/checks/numa.md"),
    needs_root: false,
    profile_keys: &["cpu.isolated"],
    check: run_numa,
    planner: None,
};

fn run_numa(ctx: &Context) -> Vec<Verdict> {
    let mut out = placement(ctx);
    out.push(libnuma(ctx));
    out
}

/// tune_system.py's `--check numa` (NVIDIA/daqiri b27ff22): DAQIRI's own rings, object pools
/// and `kind: huge` regions are bound to a NUMA node through libnuma when DAQIRI was built
/// with it; without it they follow the kernel's first-touch placement, which on a host of
/// several nodes can put them off the node of the NIC and the polling cores.
fn libnuma(ctx: &Context) -> Verdict {
    const ID: &str = "numa";
    const SONAME: &str = "libnuma.so.1";
    let nodes = ctx.mem().nodes.len();
    let node_words = match nodes {
        0 => "no NUMA topology exposed (one memory node)".to_string(),
        1 => "1 NUMA node".to_string(),
        n => format!("{n} NUMA nodes"),
    };
    match daqtune_probe::ldcache::find_library(ctx.facts().host, SONAME) {
        daqtune_probe::ldcache::Found::At { path, from_cache } => Verdict::pass(
            ID,
            "libnuma",
            format!(
                "{SONAME} at {path} ({}); {node_words}: DAQIRI built with it pins its rings, pools and kind: huge regions to a node",
                if from_cache { "ld.so.cache" } else { "loader directory" }
            ),
        )
        .observed(path),
        daqtune_probe::ldcache::Found::Absent if nodes <= 1 => Verdict::pass(
            ID,
            "libnuma",
            format!("{SONAME} not found, but {node_words}: first-touch placement puts DAQIRI's pools on the only node"),
        )
        .observed("absent"),
        daqtune_probe::ldcache::Found::Absent => Verdict::warn(
            ID,
            "libnuma",
            format!(
                "{SONAME} not found (not in /etc/ld.so.cache nor the loader's directories) and this host has {node_words}: DAQIRI's rings, object pools and kind: huge regions follow the kernel's first-touch placement instead of the node chosen for them, which can cost memory bandwidth when the NIC/GPU and the polling cores sit on different nodes"
            ),
        )
        .observed("absent")
        .expected(format!("{SONAME} in the loader's paths"))
        .fix("sudo apt-get install libnuma-dev (or your distribution's numactl-devel), then rebuild DAQIRI: its CMake links libnuma only when it finds it at build time"),
        daqtune_probe::ldcache::Found::Unknown(why) => Verdict::skip(
            ID,
            "libnuma",
            format!("cannot tell whether the loader finds {SONAME}: {why}"),
        ),
    }
}

fn placement(ctx: &Context) -> Vec<Verdict> {
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
