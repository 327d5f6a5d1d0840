//! Resolving a profile's core rule (`nic-local`, `highest`) into concrete CPUs on a host.

use crate::profile::{CoreRule, CoreRuleKind};
use daqtune_probe::cpu::CpuFacts;
use daqtune_probe::mem::NumaNode;
use daqtune_probe::CpuSet;

/// Pick `count` data cores: the highest-numbered online CPUs of the NIC's node (or of the
/// host), never CPU 0 (it takes the timer and most unbound work), and whole SMT sibling groups
/// so that an isolated core never shares its pipeline with a housekeeping one.
pub fn resolve_rule(
    rule: &CoreRule,
    cpus: &CpuFacts,
    nodes: &[NumaNode],
    nic_node: Option<u32>,
) -> Result<CpuSet, String> {
    let pool: CpuSet = match (rule.rule, nic_node) {
        (CoreRuleKind::NicLocal, Some(n)) => match nodes.iter().find(|x| x.id == n) {
            Some(node) => node.cpus.intersection(&cpus.online),
            None => cpus.online.clone(),
        },
        _ => cpus.online.clone(),
    };
    let pool = pool.difference(&CpuSet::from_iter([0]));
    let mut chosen = CpuSet::new();
    for cpu in pool.iter().collect::<Vec<_>>().into_iter().rev() {
        if chosen.len() >= rule.count as usize {
            break;
        }
        if chosen.contains(cpu) {
            continue;
        }
        let group = cpus
            .cpus
            .iter()
            .find(|c| c.id == cpu)
            .and_then(|c| c.siblings.clone())
            .unwrap_or_else(|| CpuSet::from_iter([cpu]));
        if group.is_subset(&pool) {
            chosen = chosen.union(&group);
        }
    }
    if chosen.len() < rule.count as usize {
        return Err(format!(
            "the host has only {} usable CPUs for {} data cores",
            pool.len(),
            rule.count
        ));
    }
    Ok(chosen)
}
