//! What a tunable judges with: the run's [`Facts`], the profile and the DAQIRI configuration,
//! and the judgements several tunables share (the data cores, the data-path NICs and PCIe
//! endpoints, the GPUs and their GPUDirect path, the boot configuration). Above the facts,
//! below the tunables: nothing here knows a tunable.

use crate::model::facts::Facts;
use crate::model::profile::{CoreSpec, LoadedProfile};
use crate::model::verdict::Verdict;
use daqtune_probe::{CpuSet, Host};

pub mod artifacts;
pub mod boot;
pub mod gpus;
pub mod irqbalance;
pub mod nics;
pub mod trial;

/// The run's facts, owned by a context made for one evaluation or borrowed from the command
/// that shares them between its steps (detection, derivation, checks, plan).
enum FactsRef<'a> {
    Owned(Box<Facts<'a>>),
    Shared(&'a Facts<'a>),
}

/// Everything a check may look at: the run's [`Facts`] (read once, shared with the plan), the
/// profile and the DAQIRI configuration. Derefs to the facts (`ctx.cpus()`, `ctx.host`).
pub struct Context<'a> {
    facts: FactsRef<'a>,
    pub profile: &'a LoadedProfile,
    /// The DAQIRI configuration given with `--config` (the `app.*` checks are n/a without).
    pub app: Option<&'a crate::model::appconfig::AppConfig>,
    /// The fixed paths of the files the registry's tunables write under this profile (set by
    /// the registry for its checks: `daqtune.artifacts` looks for daqtune's mark there).
    pub owned_files: Vec<String>,
}

impl<'a> std::ops::Deref for Context<'a> {
    type Target = Facts<'a>;
    fn deref(&self) -> &Facts<'a> {
        match &self.facts {
            FactsRef::Owned(f) => f,
            FactsRef::Shared(f) => f,
        }
    }
}

impl<'a> Context<'a> {
    /// A context with facts of its own (gathered on first use).
    pub fn new(host: &'a Host, profile: &'a LoadedProfile) -> Self {
        Context {
            facts: FactsRef::Owned(Box::new(Facts::new(host))),
            profile,
            app: None,
            owned_files: Vec::new(),
        }
    }

    /// A context on facts the caller shares with other steps of the run.
    pub fn with_facts(facts: &'a Facts<'a>, profile: &'a LoadedProfile) -> Self {
        Context {
            facts: FactsRef::Shared(facts),
            profile,
            app: None,
            owned_files: Vec::new(),
        }
    }

    /// Judge the host against a DAQIRI configuration too.
    pub fn with_app(mut self, app: Option<&'a crate::model::appconfig::AppConfig>) -> Self {
        self.app = app;
        self
    }

    /// The facts themselves (what `Deref` gives), for passing on.
    pub fn facts(&self) -> &Facts<'a> {
        self
    }

    /// The data cores the profile asks for, resolved on this host. A rule (`nic-local`)
    /// accepts the cores the command line already isolates when they satisfy it, so a host
    /// tuned by hand is judged on its own choice; otherwise the rule picks cores. `Err` says
    /// why no cores could be picked.
    pub fn data_cores(&self) -> Result<Option<CpuSet>, crate::model::cores::CoresError> {
        match &self.profile.profile.cpu.isolated {
            None => Ok(None),
            Some(CoreSpec::List(_)) => Ok(self.profile.isolated_list()),
            Some(CoreSpec::Rule(rule)) => {
                let cpus = self
                    .cpus()
                    .map_err(|e| crate::model::cores::CoresError::Cpus(e.to_string()))?;
                let nodes = &self.mem().nodes;
                let nic_node = self.nic_numa_node();
                if let Some(iso) = self.cmdline_isolated() {
                    let local = match nic_node.and_then(|n| nodes.iter().find(|x| x.id == n)) {
                        Some(node) => iso.is_subset(&node.cpus),
                        None => true,
                    };
                    if iso.len() >= rule.count as usize && local {
                        return Ok(Some(iso));
                    }
                }
                crate::model::cores::resolve_rule(rule, cpus, nodes, nic_node).map(Some)
            }
        }
    }

    /// Why a core rule did not take the host's own `isolcpus=` as the data cores (for
    /// messages: a hand-picked isolation that is simply on the wrong node should read so).
    pub fn data_cores_rule_note(&self) -> Option<String> {
        let Some(CoreSpec::Rule(rule)) = &self.profile.profile.cpu.isolated else {
            return None;
        };
        let iso = self.cmdline_isolated()?;
        if iso.len() < rule.count as usize {
            return Some(format!(
                "; the profile's rule wants {} data cores and isolcpus= names {}",
                rule.count,
                iso.len()
            ));
        }
        let n = self.nic_numa_node()?;
        let node = self.mem().nodes.iter().find(|x| x.id == n)?;
        let kind = match rule.rule {
            crate::model::profile::CoreRuleKind::NicLocal => "nic-local",
            crate::model::profile::CoreRuleKind::Highest => "highest",
        };
        (!iso.is_subset(&node.cpus)).then(|| {
            format!(
                "; isolcpus={iso} is not on NUMA node {n}, where the NICs sit, so the profile's \
                 rule ({kind}, {} cores) picks its own cores instead",
                rule.count
            )
        })
    }

    /// The CPUs `isolcpus=` names, when it parses.
    pub fn cmdline_isolated(&self) -> Option<CpuSet> {
        let v = self.cmdline().ok()?.value("isolcpus")?;
        daqtune_probe::cmdline::parse_isolcpus(v, None)
            .ok()
            .map(|i| i.cpus)
            .filter(|c| !c.is_empty())
    }

    /// The NIC functions of the data path: those the profile names (by netdev, RDMA device or
    /// PCI address), else every ConnectX physical function.
    pub fn data_path_nics<'f>(
        &self,
        facts: &'f daqtune_probe::pci::PciFacts,
    ) -> Vec<&'f daqtune_probe::pci::nic::NicFunction> {
        let wanted = &self.profile.profile.nic.interfaces;
        if wanted.is_empty() {
            return facts
                .nics
                .iter()
                .filter(|n| n.connectx && !n.is_vf)
                .collect();
        }
        facts
            .nics
            .iter()
            .filter(|n| {
                wanted.iter().any(|w| {
                    n.netdev_names().contains(&w.as_str())
                        || n.rdma_names().contains(&w.as_str())
                        || n.foreign_netdevs.iter().any(|f| f == w)
                        || w.parse::<daqtune_probe::pci::PciAddr>()
                            .is_ok_and(|a| a == n.addr)
                })
            })
            .collect()
    }

    /// The NUMA node of the data-path NIC (the profile's interfaces, else the first ConnectX
    /// physical function), when the firmware reports one; on a one-node host, that node.
    pub fn nic_numa_node(&self) -> Option<u32> {
        let facts = self.pci().ok()?;
        let nics = self.data_path_nics(facts);
        if let Some(n) = nics
            .iter()
            .find_map(|n| n.numa_node.and_then(|x| u32::try_from(x).ok()))
        {
            return Some(n);
        }
        if !nics.is_empty() && facts.tree.numa_nodes == 1 {
            return Some(0);
        }
        None
    }

    /// A verdict for a check the profile declares `n/a`, if it does.
    pub fn not_applicable(&self, id: &str) -> Option<Verdict> {
        self.profile
            .profile
            .not_applicable
            .get(id)
            .map(|reason| Verdict::na(id, "host", reason.clone()))
    }
}
