//! The check catalogue: one [`CheckDef`] per stable id, evaluated against a [`Context`].
//!
//! Checks are data: the CLI's `check ID`, `explain ID`, the docs and the profile validator all
//! read [`CHECKS`]. Each check's documentation lives in `docs/checks/<id>.md` and is embedded
//! here so `daqtune explain ID` prints the same page the manual has.

use crate::facts::Facts;
use crate::profile::{CoreSpec, LoadedProfile};
use crate::verdict::{Area, Verdict};
use daqtune_probe::{CpuSet, Host};

pub mod cmdline;
pub mod cpu;
pub mod gpu;
pub mod iommu;
pub mod irq;
pub mod memory;
pub mod nic;
pub mod pcie;
pub mod platform;
pub mod sysctl;

pub struct CheckDef {
    pub id: &'static str,
    pub area: Area,
    pub title: &'static str,
    /// tune_system.py's `--check` names that map here.
    pub aliases: &'static [&'static str],
    /// The page printed by `daqtune explain`.
    pub doc: &'static str,
    /// Whether a non-root run may see less than the check needs (shown in the catalogue; the
    /// check's own skip reason says what root would reveal).
    pub needs_root: bool,
    pub run: fn(&Context) -> Vec<Verdict>,
}

/// Every check, in report order.
pub static CHECKS: &[CheckDef] = &[
    platform::PLATFORM,
    cpu::GOVERNOR,
    cpu::IDLE,
    cmdline::CMDLINE,
    memory::HUGEPAGES,
    memory::NUMA,
    pcie::TOPOLOGY,
    pcie::LINK,
    pcie::MPS,
    pcie::MRRS,
    pcie::ACS,
    pcie::AER,
    iommu::IOMMU,
    irq::AFFINITY,
    nic::DRIVER,
    nic::LINK_LAYER,
    nic::LINK,
    nic::MTU,
    sysctl::NET_SYSCTL,
    gpu::CLOCKS,
    gpu::BAR1,
    gpu::GPUDIRECT,
    gpu::PEERMEM,
    gpu::DRIVER,
    crate::appconfig::checks::CONFIG,
    crate::appconfig::checks::CORES,
    crate::appconfig::checks::MEMORY,
    crate::appconfig::checks::INTERFACES,
    crate::appconfig::checks::SIZES,
];

pub fn find(id_or_alias: &str) -> Option<&'static CheckDef> {
    CHECKS
        .iter()
        .find(|c| c.id == id_or_alias)
        .or_else(|| CHECKS.iter().find(|c| c.aliases.contains(&id_or_alias)))
}

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
    pub app: Option<&'a crate::appconfig::AppConfig>,
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
        }
    }

    /// A context on facts the caller shares with other steps of the run.
    pub fn with_facts(facts: &'a Facts<'a>, profile: &'a LoadedProfile) -> Self {
        Context {
            facts: FactsRef::Shared(facts),
            profile,
            app: None,
        }
    }

    /// Judge the host against a DAQIRI configuration too.
    pub fn with_app(mut self, app: Option<&'a crate::appconfig::AppConfig>) -> Self {
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
    pub fn data_cores(&self) -> Result<Option<CpuSet>, String> {
        match &self.profile.profile.cpu.isolated {
            None => Ok(None),
            Some(CoreSpec::List(_)) => Ok(self.profile.isolated_list()),
            Some(CoreSpec::Rule(rule)) => {
                let cpus = self.cpus().map_err(|e| e.to_string())?;
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
                crate::cores::resolve_rule(rule, cpus, nodes, nic_node).map(Some)
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
            crate::profile::CoreRuleKind::NicLocal => "nic-local",
            crate::profile::CoreRuleKind::Highest => "highest",
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

    /// The NUMA node of the data-path NIC (the profile's interfaces, else the first ConnectX
    /// physical function), when the firmware reports one; on a one-node host, that node.
    pub fn nic_numa_node(&self) -> Option<u32> {
        let facts = self.pci().ok()?;
        let nics = nic::data_path_nics(self, facts);
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

pub use crate::facts::read_gpus_once;

/// Options for one evaluation.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Only these ids (empty = all).
    pub only: Vec<String>,
}

/// Evaluate the selected checks. A check that panics is reported as `error` and the run goes on.
pub fn run_checks(ctx: &Context, opts: &RunOptions) -> Vec<Verdict> {
    let mut out = Vec::new();
    for def in CHECKS {
        if !opts.only.is_empty() && !opts.only.iter().any(|o| o == def.id) {
            continue;
        }
        // `app.*` checks judge the host against an experiment's configuration: without
        // `--config` they have nothing to say unless asked for by name.
        if def.id.starts_with("app.") && ctx.app.is_none() && opts.only.is_empty() {
            continue;
        }
        if let Some(v) = ctx.not_applicable(def.id) {
            out.push(v);
            continue;
        }
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (def.run)(ctx)));
        match result {
            Ok(mut vs) => {
                if vs.is_empty() {
                    vs.push(Verdict::error(
                        def.id,
                        "host",
                        "the check produced no verdict",
                    ));
                }
                out.extend(vs);
            }
            Err(p) => {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                out.push(Verdict::error(
                    def.id,
                    "host",
                    format!("internal error: {msg}"),
                ));
            }
        }
    }
    crate::gate::apply_waivers(&ctx.profile.profile, &mut out, crate::profile::today());
    out
}
