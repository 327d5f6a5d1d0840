//! What a root imported from captures (`daqtune import`, or a capture given to `--root`)
//! holds, and which checks it can judge.
//!
//! A capture is partial by nature: an `lspci -vv` paste says nothing of the kernel command
//! line, an `nvidia-smi -q` nothing of PCIe registers. A check run on a root that lacks its
//! facts would read "absent" as the host's state (no hugetlbfs mount, no module loaded) and
//! judge it: so every check declares the fact sources it reads ([`needs`]), the import's
//! manifest says which sources the capture covers, and a check with a source missing says
//! `skip` "not in this capture (...)" instead of running. Roots that are no import (a
//! snapshot, a fixture, the live host) cover every source.

use crate::model::facts::Facts;
use crate::model::verdict::Verdict;
use serde::{Deserialize, Serialize};

/// Where the import writes its manifest (host path under the root).
pub const MANIFEST_PATH: &str = "/daqtune/import.json";
pub const SCHEMA: &str = "daqtune.import/v1";

/// A fact source: a family of host files one importer writes whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// PCI functions: identity, driver, NUMA node, IOMMU group, link attributes, config space.
    Pci,
    /// The AER counters of `aer_dev_*` (lspci prints status bits, not counts).
    PciAer,
    /// CPUs: /proc/cpuinfo, /sys/devices/system/cpu (governors, idle states, online).
    Cpus,
    /// /proc/cmdline.
    Cmdline,
    /// /proc/meminfo, hugepage pools, /proc/mounts.
    Memory,
    /// /proc/modules, /sys/module.
    Modules,
    /// /proc/sys.
    Sysctl,
    /// /sys/kernel/mm (THP, KSM).
    KernelMm,
    /// /proc/irq and /proc/interrupts.
    Irq,
    /// Running processes (/proc/PID).
    Processes,
    /// /sys/class/net: interfaces, MTU, link state.
    Net,
    /// The ports' ethtool settings (daqtune/ethtool/).
    Ethtool,
    /// RDMA devices: /sys/class/infiniband, /dev/infiniband.
    Rdma,
    /// /proc/net: addresses and routes.
    Addresses,
    /// The GPU facts (NVML/CUDA, daqtune/gpu.json).
    Gpu,
    /// The NVIDIA kernel driver's /proc/driver/nvidia.
    NvidiaDriver,
    /// Kernel messages.
    KernelLog,
    /// Platform identity: DMI, device tree, os-release, kernel version.
    Platform,
    /// Configuration under /etc (boot loader, units, udev rules, persisted settings).
    Etc,
    /// systemd's state of daqtune's units.
    Units,
    /// IOMMU groups and the IOMMU's sysfs.
    Iommu,
    /// nvidia-smi's GPU <-> NIC path matrix (`topo -m`, daqtune/gpu-topo.json): classes and
    /// affinities without the PCI tree they were computed from.
    GpuTopology,
    /// A pasted /proc/meminfo alone: the default page size's pool, not the other sizes, the
    /// per-node split or the mounts that [`Source::Memory`] also holds.
    Meminfo,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Pci => "PCI devices",
            Source::PciAer => "PCIe AER counters",
            Source::Cpus => "CPUs",
            Source::Cmdline => "/proc/cmdline",
            Source::Memory => "memory and hugepages",
            Source::Modules => "kernel modules",
            Source::Sysctl => "sysctls",
            Source::KernelMm => "/sys/kernel/mm",
            Source::Irq => "IRQ affinities",
            Source::Processes => "processes",
            Source::Net => "network interfaces",
            Source::Ethtool => "ethtool settings",
            Source::Rdma => "RDMA devices",
            Source::Addresses => "addresses and routes",
            Source::Gpu => "GPU facts (NVML)",
            Source::NvidiaDriver => "/proc/driver/nvidia",
            Source::KernelLog => "kernel log",
            Source::Platform => "platform identity",
            Source::Etc => "/etc configuration",
            Source::Units => "systemd units",
            Source::Iommu => "IOMMU",
            Source::GpuTopology => "nvidia-smi topo -m matrix",
            Source::Meminfo => "/proc/meminfo",
        }
    }
}

/// The fact sources each check reads. Every registered check has a row (a test holds the
/// registry to it), so a new check cannot run on a capture without saying what it needs.
/// Sources a check reads only to refine (NUMA node count, interface names for the PCIe
/// checks, the ASPM policy of `pcie.aer`) are left out; what decides a verdict is in (the
/// data-path cores some checks derive from the NICs' locality and the command line, the
/// persisted configuration under /etc that a check judges).
pub fn needs(id: &str) -> Option<&'static [Source]> {
    use Source::*;
    Some(match id {
        "platform" => &[Platform],
        "cpu.governor" => &[Cpus, Etc],
        "cpu.idle" => &[Cpus, Cmdline, Pci, Memory],
        "kernel.cmdline" => &[Cmdline, Cpus, Etc, Pci, Memory],
        "hugepages" => &[Memory, Cmdline, Etc],
        "kernel.thp" | "kernel.ksm" => &[KernelMm],
        "kernel.numa-balancing" | "kernel.timer-migration" | "vm.stat-interval" => &[Sysctl, Etc],
        "kernel.watchdog" => &[Sysctl, Cmdline, Cpus, Pci, Etc, Memory],
        "numa" => &[Pci, Memory, Cpus, Cmdline],
        "pcie.topology" | "pcie.link" | "pcie.mps" | "pcie.mrrs" | "pcie.acs" => &[Pci],
        "pcie.aer" => &[Pci, PciAer],
        "iommu" => &[Cmdline, Iommu, Platform, Pci],
        "irq.affinity" => &[Pci, Irq, Cpus, Cmdline, Processes, Etc, Memory],
        "nic.driver" => &[Pci, Modules, Rdma, Etc],
        "nic.link-layer" | "nic.link" => &[Pci, Net, Rdma],
        "nic.mtu" => &[Pci, Net, Etc],
        "nic.rings" | "nic.coalesce" | "nic.pause" | "nic.offloads" | "nic.channels" => {
            &[Pci, Net, Ethtool, Cmdline, Cpus, Memory]
        }
        "net.sysctl" => &[Sysctl],
        "gpu.clocks" | "gpu.bar1" | "gpu.gpudirect" => &[Gpu],
        "gpu.peermem" => &[Gpu, Modules, Platform, NvidiaDriver, KernelLog, KernelMm],
        "gpu.driver" => &[Gpu, NvidiaDriver],
        "gpu.health" => &[Gpu],
        "gpu.xid" => &[Gpu, KernelLog],
        "pcie.capacity" => &[Pci, Net],
        "nic.counters" => &[Pci, Net],
        "daqtune.artifacts" => &[Etc, Units],
        "app.config" => &[Cmdline, Cpus],
        "app.cores" => &[Pci, Cpus, Cmdline, Memory, Addresses],
        "app.memory" => &[Memory, Gpu],
        "app.interfaces" | "app.sizes" => &[Pci, Net, Addresses],
        _ => return None,
    })
}

/// Other sets of sources that let a check judge a narrower part of what it judges on a host,
/// where the capture lacks one of [`needs`]: `pcie.topology` takes nvidia-smi's own path
/// classes from a `topo -m` matrix (no PCI tree to compute them from), `nic.link-layer` the
/// RDMA ports of an `ibstat` / `ibv_devinfo` (no PCI functions or interfaces to tie them to),
/// `hugepages` the default size's pool of a pasted /proc/meminfo (no mounts), the NIC settings
/// the ports of pasted `ethtool -g/-l/-c/-a/-k` output.
/// The check itself tells which it has ([`holds_needs`]) and says so in its verdicts.
pub fn alternatives(id: &str) -> &'static [&'static [Source]] {
    use Source::*;
    match id {
        "pcie.topology" => &[&[GpuTopology]],
        "nic.link-layer" => &[&[Rdma]],
        "hugepages" => &[&[Meminfo]],
        "nic.rings" | "nic.coalesce" | "nic.pause" | "nic.offloads" | "nic.channels" => {
            &[&[Ethtool]]
        }
        _ => &[],
    }
}

/// Whether the root holds every source of [`needs`] (a host, a snapshot, a fixture, or an
/// import that covers them all): the check judges as on a host. `false` only for an import
/// lacking one, where the check may judge from an [`alternatives`] set.
pub fn holds_needs(facts: &Facts, id: &str) -> bool {
    match manifest(facts) {
        None => true,
        Some(Err(_)) => false,
        Some(Ok(m)) => needs(id).is_some_and(|n| n.iter().all(|s| m.covers.contains(s))),
    }
}

/// Where an import writes an `nvidia-smi topo -m` matrix (path classes, affinities), for
/// `pcie.topology` to read; here, below the checks, so they need not know the importer.
pub const GPU_TOPO_PATH: &str = "/daqtune/gpu-topo.json";

/// Sources a check also reads where they are, and does without where they are not (saying
/// so in its verdict): they refine a verdict its needed sources decide, so a capture without
/// them still gets the check. `pcie.link` and `pcie.topology` read the GPU facts for a GPU's
/// load and integration (without them: "not conclusive for a GPU", the PCI facts decide);
/// `platform` reads them and the NVIDIA driver to find a profile of another platform; the NIC
/// settings read the addresses and routes to leave the management port alone (a capture is
/// never applied); `numa` reads the loader's configuration for its libnuma verdict, which skips
/// without it.
pub fn refines(id: &str) -> &'static [Source] {
    use Source::*;
    match id {
        "pcie.link" | "pcie.topology" => &[Gpu],
        "platform" => &[Gpu, NvidiaDriver],
        "nic.mtu" | "nic.rings" | "nic.coalesce" | "nic.pause" | "nic.offloads"
        | "nic.channels" => &[Addresses],
        "numa" => &[Etc],
        // The boot id keys the previous run's counters (a record of another boot is not a
        // baseline).
        "nic.counters" => &[Sysctl],
        _ => &[],
    }
}

/// One input of an import and what it gave.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct InputRecord {
    pub file: String,
    /// `lspci -vv`, `lspci -t`, ...; `none` for a file of a directory that is no capture.
    pub kind: String,
    /// 1-based first and last line read.
    pub lines: Option<(usize, usize)>,
    /// What it produced (root paths or a summary).
    pub produced: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One PCI function written into the root and where it came from.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeviceRecord {
    pub bdf: String,
    pub file: String,
    pub lines: (usize, usize),
    /// `exact` (a hex dump), `reconstructed` (decoded registers written at their offsets),
    /// `unknown` (a bridge known only from a `-t` tree: 64 bytes, capabilities not visible).
    pub config: String,
    /// `lspci -t tree`, `bridge bus numbers`, or `none` (a root bus).
    pub parent_from: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// `daqtune/import.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    pub schema: String,
    pub daqtune_version: String,
    pub created: u64,
    /// The fact sources the capture holds; every other source is "not in this capture".
    pub covers: Vec<Source>,
    pub inputs: Vec<InputRecord>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceRecord>,
}

/// Why a root's import manifest cannot be taken: then nothing in it is covered. The text is
/// what a check's skip says (`its manifest is unreadable: ...`).
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The manifest is there but cannot be read.
    #[error("{0}")]
    Unreadable(crate::model::facts::Unreadable),
    /// Not JSON, or not a manifest's fields.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A manifest of another schema (version) than this daqtune reads.
    #[error("schema `{found}`, expected {SCHEMA}")]
    Schema { found: String },
    /// The manifest file at `path` holds no manifest this daqtune reads.
    #[error("{path}: {source}")]
    At {
        path: &'static str,
        source: Box<ManifestError>,
    },
}

impl Manifest {
    pub fn from_json(text: &str) -> Result<Manifest, ManifestError> {
        let m: Manifest = serde_json::from_str(text)?;
        if m.schema != SCHEMA {
            return Err(ManifestError::Schema { found: m.schema });
        }
        Ok(m)
    }

    /// The inputs that were captures, as `file (kind)`.
    pub fn captures(&self) -> Vec<String> {
        self.inputs
            .iter()
            .filter(|i| i.kind != "none")
            .map(|i| format!("{} ({})", i.file, i.kind))
            .collect()
    }
}

/// On an import, why the capture shows no more than `len` bytes of `bdf`'s config space: the
/// skip's reason in place of "readable only by root (run with sudo)", which would send the
/// capture's reader to a host they do not have. `None` on a root that is no import.
pub fn unseen_registers(facts: &Facts, bdf: &str, len: usize) -> Option<String> {
    let m = match manifest(facts)? {
        Ok(m) => m,
        Err(e) => {
            return Some(format!(
                "not in this capture (its manifest is unreadable: {e})"
            ))
        }
    };
    let rec = m.devices.iter().find(|d| d.bdf == bdf);
    Some(match rec.map(|r| r.config.as_str()) {
        Some("unknown") => format!(
            "not in this capture (only the lspci -t tree names {bdf}; its registers are not in it)"
        ),
        Some("reconstructed") if len <= 64 => format!(
            "not in this capture (lspci printed `Capabilities: <access denied>` for {bdf}: it ran without root)"
        ),
        _ => format!("not in this capture (it holds {len} bytes of {bdf}'s config space)"),
    })
}

/// The root's import manifest, when it is an import. `Err` when the manifest is there but
/// unreadable: then nothing is covered (a check must not pass on a root it cannot vouch for).
pub fn manifest(facts: &Facts) -> Option<Result<Manifest, ManifestError>> {
    if facts.host.is_live() {
        return None;
    }
    match facts.read_string(MANIFEST_PATH) {
        Ok(t) => Some(Manifest::from_json(&t).map_err(|e| ManifestError::At {
            path: MANIFEST_PATH,
            source: Box::new(e),
        })),
        Err(e) if e.not_found => None,
        Err(e) => Some(Err(ManifestError::Unreadable(e))),
    }
}

/// The verdict of check `id` on a capture that lacks its facts; `None` when the check can run.
pub fn not_in_capture(facts: &Facts, id: &str) -> Option<Verdict> {
    let m = manifest(facts)?;
    let m = match m {
        Ok(m) => m,
        Err(e) => {
            return Some(Verdict::skip(
                id,
                "host",
                format!("not in this capture (its manifest is unreadable: {e})"),
            ))
        }
    };
    let Some(needed) = needs(id) else {
        return Some(Verdict::skip(
            id,
            "host",
            "not in this capture (the check declares no fact sources)",
        ));
    };
    let missing: Vec<&str> = needed
        .iter()
        .filter(|s| !m.covers.contains(s))
        .map(|s| s.as_str())
        .collect();
    if missing.is_empty()
        || alternatives(id)
            .iter()
            .any(|alt| alt.iter().all(|s| m.covers.contains(s)))
    {
        return None;
    }
    let held: Vec<&str> = m.covers.iter().map(|s| s.as_str()).collect();
    Some(Verdict::skip(
        id,
        "host",
        format!(
            "not in this capture ({} missing; it holds {})",
            missing.join(", "),
            if held.is_empty() {
                "nothing daqtune reads".to_string()
            } else {
                held.join(", ")
            }
        ),
    ))
}

/// `check`'s coverage line for an imported root: which checks it can judge, out of which
/// ran; `None` for a root that is no import.
pub fn coverage_line(facts: &Facts, ids: &[&str]) -> Option<String> {
    let m = manifest(facts)?;
    let Ok(m) = m else {
        return Some("capture: manifest unreadable; no check judged".into());
    };
    let judged: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| {
            needs(id).is_some_and(|n| n.iter().all(|s| m.covers.contains(s)))
                || alternatives(id)
                    .iter()
                    .any(|alt| alt.iter().all(|s| m.covers.contains(s)))
        })
        .collect();
    Some(format!(
        "capture: {} of {} checks judged from {} ({}); the rest say \"not in this capture\"",
        judged.len(),
        ids.len(),
        m.captures().join(", "),
        if judged.is_empty() {
            "none".to_string()
        } else {
            judged.join(", ")
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_check_declares_its_sources() {
        let missing: Vec<&str> = crate::tunables::ids()
            .filter(|id| needs(id).is_none())
            .collect();
        assert!(missing.is_empty(), "add to capture::needs: {missing:?}");
    }
}
