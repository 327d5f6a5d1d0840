//! Resolving a profile's core rule (`nic-local`, `highest`) into concrete CPUs on a host.

use crate::model::profile::{CoreRule, CoreRuleKind};
use daqtune_probe::cpu::CpuFacts;
use daqtune_probe::mem::NumaNode;
use daqtune_probe::CpuSet;

/// Why a profile's data cores could not be resolved on this host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoresError {
    /// The CPU facts could not be read (the reader's message).
    #[error("{0}")]
    Cpus(String),
    #[error(
        "the host has only {usable} usable CPU{} for {count} data core{}",
        plural(*usable),
        plural(*count as usize)
    )]
    TooFew { usable: usize, count: u32 },
    /// Isolating these cores leaves a NUMA node (or the host) no housekeeping CPU: the kernel's
    /// own threads, RCU callbacks and interrupts of that node would have nowhere to run.
    #[error("isolating {isolated} takes every online CPU of {node} ({cpus}): leave at least one housekeeping CPU on every node")]
    NoHousekeeping {
        isolated: String,
        node: String,
        cpus: String,
    },
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// For the callers whose own errors are still text (a check's skip reason, a planner's note).
impl From<CoresError> for String {
    fn from(e: CoresError) -> String {
        e.to_string()
    }
}

/// Pick `count` data cores: the highest-numbered online CPUs of the NIC's node (or of the
/// host), never CPU 0 (it takes the timer and most unbound work), and whole SMT sibling groups
/// so that an isolated core never shares its pipeline with a housekeeping one.
pub fn resolve_rule(
    rule: &CoreRule,
    cpus: &CpuFacts,
    nodes: &[NumaNode],
    nic_node: Option<u32>,
) -> Result<CpuSet, CoresError> {
    let pool: CpuSet = match (rule.rule, nic_node) {
        (CoreRuleKind::NicLocal, Some(n)) => match nodes.iter().find(|x| x.id == n) {
            Some(node) => node.cpus.intersection(&cpus.online),
            None => cpus.online.clone(),
        },
        _ => cpus.online.clone(),
    };
    let pool = pool.difference(&CpuSet::from_iter([0]));
    // Siblings by CPU id: one pass, not a search per CPU (a host root may list 8192 CPUs).
    let siblings: std::collections::HashMap<u32, &CpuSet> = cpus
        .cpus
        .iter()
        .filter_map(|c| c.siblings.as_ref().map(|s| (c.id, s)))
        .collect();
    let mut chosen = CpuSet::new();
    let mut have = 0usize;
    for cpu in pool.iter().rev() {
        if have >= rule.count as usize {
            break;
        }
        if chosen.contains(cpu) {
            continue;
        }
        let group = siblings
            .get(&cpu)
            .map(|s| (*s).clone())
            .unwrap_or_else(|| CpuSet::from_iter([cpu]));
        if group.is_subset(&pool) {
            chosen = chosen.union(&group);
            have = chosen.len();
        }
    }
    if have < rule.count as usize {
        return Err(CoresError::TooFew {
            usable: pool.len(),
            count: rule.count,
        });
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_probe::cpu::Cpu;

    fn facts(online: &str, pairs: bool) -> CpuFacts {
        let online = daqtune_probe::cpulist::parse_cpulist(online, None).expect("list");
        let cpus = online
            .iter()
            .map(|id| Cpu {
                id,
                governor: None,
                available_governors: Vec::new(),
                freq_driver: None,
                max_freq_khz: None,
                idle_states: Vec::new(),
                siblings: pairs.then(|| CpuSet::from_iter([id & !1, id | 1])),
                package: None,
            })
            .collect();
        CpuFacts {
            online,
            possible: None,
            present: None,
            isolated: None,
            nohz_full: None,
            cpus,
            idle_driver: None,
        }
    }

    #[test]
    fn whole_sibling_groups_from_the_top() {
        let rule = CoreRule {
            rule: CoreRuleKind::Highest,
            count: 3,
        };
        let got = resolve_rule(&rule, &facts("0-7", true), &[], None).expect("cores");
        assert_eq!(got.to_string(), "4-7");
        // 8192 CPUs: one map lookup per CPU.
        let got = resolve_rule(&rule, &facts("0-8191", false), &[], None).expect("cores");
        assert_eq!(got.to_string(), "8189-8191");
    }

    #[test]
    fn too_few_cpus_reads_right() {
        let rule = CoreRule {
            rule: CoreRuleKind::Highest,
            count: 2,
        };
        let e = resolve_rule(&rule, &facts("0-1", false), &[], None).expect_err("too few");
        assert_eq!(
            e.to_string(),
            "the host has only 1 usable CPU for 2 data cores"
        );
        let rule = CoreRule {
            rule: CoreRuleKind::Highest,
            count: 1,
        };
        let e = resolve_rule(&rule, &facts("0", false), &[], None).expect_err("too few");
        assert_eq!(
            e.to_string(),
            "the host has only 0 usable CPUs for 1 data core"
        );
    }
}
