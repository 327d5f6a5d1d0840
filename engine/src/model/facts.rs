//! What a run knows about the host, gathered once: the layer every judgement starts from.
//!
//! One [`Facts`] is made per run (a `check`, a `plan`, one planning pass of `apply`) and
//! shared by every tunable's judgement and plan, so that the run reads each host file once
//! (`tests/it/reads_once.rs` counts it with the host's access recording). Each source is gathered
//! on first use (`OnceCell`); the files that no typed source covers (boot configuration, units,
//! drop-ins, sysctls, IRQ affinities, ...) go through the memoised readers below.
//!
//! Nothing here judges or plans: facts know no profile. Below it are only modules that know no
//! host run either: the journal's reader and the GPU lock judgement of `hostio` (daqtune's own
//! earlier runs are a fact about the host too), and the DAQIRI configuration's address types
//! (`appconfig::netaddr`, what the namespace's addresses are decoded into).

use crate::hostio::gpu::GpuDomain;
use crate::hostio::journal;
use crate::model::appconfig::netaddr::LocalAddrs;
use daqtune_probe::cmdline::{parse_cmdline, Cmdline};
use daqtune_probe::cpu::{read_cpus, CpuFacts};
use daqtune_probe::gpu::{DriverProc, GpuError, GpuSnapshot};
use daqtune_probe::host::FileStat;
use daqtune_probe::mem::{read_mem_with_mounts, MemFacts};
use daqtune_probe::net::counters::PortCounters;
use daqtune_probe::pci::PciFacts;
use daqtune_probe::system::{
    parse_kernel_version, read_platform, running_processes, Modules, PlatformFacts, ServiceState,
    GOVERNOR_FIGHTERS,
};
use daqtune_probe::systemd::{Systemd, UnitState};
use daqtune_probe::Host;
use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

/// A host file that could not be read, with the reader's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Unreadable {
    pub message: String,
    pub not_found: bool,
}

impl From<daqtune_probe::ReadError> for Unreadable {
    fn from(e: daqtune_probe::ReadError) -> Self {
        Unreadable {
            not_found: e.is_not_found(),
            message: e.to_string(),
        }
    }
}

type Memo<T> = RefCell<HashMap<String, Result<Rc<T>, Unreadable>>>;

/// Everything a run reads from the host, each source read at most once.
pub struct Facts<'h> {
    pub host: &'h Host,
    /// Whether reads have root's view (config space beyond 64 bytes, some procfs files).
    pub privileged: bool,
    cpu: OnceCell<Result<CpuFacts, String>>,
    mem: OnceCell<MemFacts>,
    cmdline: OnceCell<Result<Cmdline, String>>,
    platform: OnceCell<PlatformFacts>,
    modules: OnceCell<Modules>,
    procs: OnceCell<Vec<String>>,
    pci: OnceCell<Result<PciFacts, String>>,
    gpus: OnceCell<Result<GpuSnapshot, String>>,
    /// Whether the live GPU probe may take CUDA attributes from the per-boot cache.
    gpu_cache: daqtune_probe::gpu::CacheMode,
    gpu_names: OnceCell<Vec<String>>,
    driver: OnceCell<Result<DriverProc, String>>,
    kmsg: OnceCell<Option<String>>,
    /// Each port's first counter read of this run and when (`nic.counters` compares a later
    /// read with it when no earlier run of this boot left one).
    port_counters: RefCell<HashMap<String, (std::time::Instant, Rc<PortCounters>)>>,
    gpu_locks: OnceCell<Vec<(String, GpuDomain, String)>>,
    journal: OnceCell<Vec<journal::JournalDoc>>,
    systemd: RefCell<Option<Result<Systemd, UnitStateError>>>,
    unit_states: RefCell<HashMap<String, Result<UnitState, UnitStateError>>>,
    units_record: OnceCell<Result<UnitsRecord, UnitStateError>>,
    addrs: OnceCell<Result<LocalAddrs, String>>,
    addr_lifetimes: OnceCell<Result<Vec<daqtune_probe::net::addr::AddrInfo>, String>>,
    files: Memo<Vec<u8>>,
    dirs: Memo<Vec<String>>,
    links: Memo<String>,
    stats: RefCell<HashMap<String, Result<FileStat, Unreadable>>>,
    kinds: RefCell<HashMap<String, Option<bool>>>,
    ethtool: EthtoolMemo,
}

/// The ethtool netlink client of a live run (opened once) and each port's groups as read.
#[derive(Default)]
struct EthtoolMemo {
    client: RefCell<Option<Result<daqtune_probe::net::ethtool::Client, String>>>,
    groups: Memo<daqtune_probe::net::ethtool::GroupState>,
}

impl<'h> Facts<'h> {
    pub fn new(host: &'h Host) -> Self {
        // A recorded root holds whatever its capture could read; only the live host has a
        // permission boundary.
        let privileged = !host.is_live() || daqtune_probe::sys::is_root();
        Facts {
            host,
            privileged,
            cpu: OnceCell::new(),
            mem: OnceCell::new(),
            cmdline: OnceCell::new(),
            platform: OnceCell::new(),
            modules: OnceCell::new(),
            procs: OnceCell::new(),
            pci: OnceCell::new(),
            gpus: OnceCell::new(),
            gpu_cache: daqtune_probe::gpu::CacheMode::Use,
            gpu_names: OnceCell::new(),
            driver: OnceCell::new(),
            kmsg: OnceCell::new(),
            port_counters: RefCell::default(),
            gpu_locks: OnceCell::new(),
            journal: OnceCell::new(),
            systemd: RefCell::new(None),
            unit_states: RefCell::default(),
            units_record: OnceCell::new(),
            addrs: OnceCell::new(),
            addr_lifetimes: OnceCell::new(),
            files: RefCell::default(),
            dirs: RefCell::default(),
            links: RefCell::default(),
            stats: RefCell::default(),
            kinds: RefCell::default(),
            ethtool: EthtoolMemo::default(),
        }
    }

    /// Facts that read CUDA afresh instead of through the per-boot cache (`--no-cache`).
    pub fn without_gpu_cache(mut self, no_cache: bool) -> Self {
        if no_cache {
            self.gpu_cache = daqtune_probe::gpu::CacheMode::Refresh;
        }
        self
    }

    // ---- typed sources -----------------------------------------------------------------

    pub fn cpus(&self) -> Result<&CpuFacts, &str> {
        self.cpu
            .get_or_init(|| read_cpus(self.host).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| e.as_str())
    }

    pub fn mem(&self) -> &MemFacts {
        // /proc/mounts through the memoised reads: a plan for a host root appends the mount to
        // the same bytes (the hugetlbfs mount of `hugepages`).
        self.mem.get_or_init(|| {
            read_mem_with_mounts(
                self.host,
                self.read_string("/proc/mounts").map_err(|e| e.to_string()),
            )
        })
    }

    pub fn cmdline(&self) -> Result<&Cmdline, &str> {
        self.cmdline
            .get_or_init(|| {
                self.read_string("/proc/cmdline")
                    .map(|t| parse_cmdline(&t))
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| e.as_str())
    }

    pub fn platform(&self) -> &PlatformFacts {
        self.platform.get_or_init(|| read_platform(self.host))
    }

    /// The running kernel as (major, minor, patch), when its release string parses.
    pub fn kernel_version(&self) -> Option<(u32, u32, u32)> {
        self.platform()
            .kernel_release
            .as_deref()
            .and_then(parse_kernel_version)
    }

    /// Loaded modules (`Modules::read` on the memoised /proc/modules, which a plan for a
    /// host root also rewrites).
    pub fn modules(&self) -> &Modules {
        self.modules
            .get_or_init(|| match self.read_string("/proc/modules") {
                Ok(t) => Modules {
                    loaded: daqtune_probe::system::parse_modules(&t),
                    readable: true,
                },
                Err(_) => Modules::default(),
            })
    }

    /// Loaded as a module, or built in (present under /sys/module without being in
    /// /proc/modules): `Modules::present` through the memoised probes.
    pub fn module_present(&self, name: &str) -> bool {
        let n = name.replace('-', "_");
        self.modules().loaded.iter().any(|m| m.name == n)
            || self.is_dir(&format!("/sys/module/{n}"))
    }

    pub fn processes(&self) -> &[String] {
        self.procs.get_or_init(|| running_processes(self.host))
    }

    /// The PCI tree and its NICs.
    pub fn pci(&self) -> Result<&PciFacts, &str> {
        self.pci
            .get_or_init(|| {
                daqtune_probe::pci::read_facts(self.host)
                    .map_err(|e| format!("cannot list PCI devices: {e}"))
            })
            .as_ref()
            .map_err(|e| e.as_str())
    }

    /// GPU facts: NVML/CUDA on the live host (once per process, see [`read_gpus_once`]), the
    /// recorded `daqtune/gpu.json` under a root (read through [`Facts::read_string`], so a plan
    /// that rewrites the file works from the same bytes).
    pub fn gpus(&self) -> Result<&GpuSnapshot, &str> {
        self.gpus
            .get_or_init(|| {
                if self.host.is_live() {
                    return read_gpus_once(self.host, self.gpu_cache).map_err(|e| e.to_string());
                }
                use daqtune_probe::gpu::{FACTS_PATH, SCHEMA};
                let path = FACTS_PATH.trim_start_matches('/').to_string();
                let text = self.read_string(FACTS_PATH).map_err(|e| {
                    GpuError::NotRecorded {
                        path: path.clone(),
                        reason: e.to_string(),
                    }
                    .to_string()
                })?;
                GpuSnapshot::from_json(&text).map_err(|reason| {
                    GpuError::BadRecord {
                        path,
                        schema: SCHEMA,
                        reason,
                    }
                    .to_string()
                })
            })
            .as_ref()
            .map_err(|e| e.as_str())
    }

    /// The GPU facts if this run gathered them (for the report's note on where they came
    /// from); never triggers a probe.
    pub fn gpus_gathered(&self) -> Option<&GpuSnapshot> {
        self.gpus.get().and_then(|r| r.as_ref().ok())
    }

    /// GPU model names without any driver library: the NVIDIA kernel driver's
    /// `/proc/driver/nvidia/gpus/*/information` (live, or as a snapshot recorded it), else a
    /// root's recorded GPU facts file. Profile detection by GPU name uses this, so it never
    /// pays for NVML or `cuInit`.
    pub fn gpu_names(&self) -> &[String] {
        self.gpu_names.get_or_init(|| {
            let dir = "/proc/driver/nvidia/gpus";
            let mut buses = self.read_dir(dir).map(|v| v.to_vec()).unwrap_or_default();
            buses.sort();
            let names: Vec<String> = buses
                .iter()
                .filter_map(|b| self.read_string(&format!("{dir}/{b}/information")).ok())
                .filter_map(|t| daqtune_probe::gpu::cache::parse_gpu_information(&t).model)
                .collect();
            if !names.is_empty() || self.host.is_live() {
                return names;
            }
            self.gpus()
                .map(|s| {
                    s.gpus
                        .iter()
                        .map(|g| g.display_name().to_string())
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    /// The NVIDIA kernel driver's /proc/driver/nvidia/version.
    pub fn driver(&self) -> Result<&DriverProc, &str> {
        self.driver
            .get_or_init(|| {
                let text = self
                    .read_string("/proc/driver/nvidia/version")
                    .map_err(|e| e.to_string())?;
                daqtune_probe::gpu::parse_driver_version(&text)
                    .ok_or_else(|| "/proc/driver/nvidia/version has no NVRM line".to_string())
            })
            .as_ref()
            .map_err(|e| e.as_str())
    }

    /// The kernel log lines worth keeping: /dev/kmsg on the live host, the snapshot's
    /// filtered copy (`/daqtune/kmsg.txt`) under a root.
    pub fn kernel_log(&self) -> Option<&str> {
        self.kmsg
            .get_or_init(|| {
                if self.host.is_live() {
                    read_kmsg()
                } else {
                    self.read_string(KMSG_COPY).ok()
                }
            })
            .as_deref()
    }

    /// GPU clock locks that daqtune's applied (not reverted) runs of this boot made and did not
    /// see fail to take, as (GPU UUID, domain, run id), oldest run first. `gpu.clocks` uses them where NVML alone
    /// cannot tell whether a clock is held, and to say that a lock daqtune made was lost.
    pub fn applied_gpu_locks(&self) -> &[(String, GpuDomain, String)] {
        self.gpu_locks.get_or_init(|| applied_gpu_locks(self))
    }

    /// daqtune's apply runs recorded in the journal (`/var/lib/daqtune/journal/*/journal.json`),
    /// oldest first, reverted ones included; unreadable journals are left out.
    pub fn journal_runs(&self) -> &[journal::JournalDoc] {
        self.journal.get_or_init(|| {
            let Ok(runs) = self.read_dir(journal::JOURNAL_DIR) else {
                return Vec::new();
            };
            runs.iter()
                .filter_map(|run| {
                    let text = self
                        .read_string(&format!("{}/{run}/journal.json", journal::JOURNAL_DIR))
                        .ok()?;
                    serde_json::from_str::<journal::JournalDoc>(&text).ok()
                })
                .collect()
        })
    }

    /// What systemd says about `unit`: over D-Bus on the live host
    /// ([`daqtune_probe::systemd::Systemd`]: the private socket as root, else the system bus;
    /// one connection per run), from the snapshot's record [`UNITS_RECORD`] under a root.
    /// `Err` says why it is not known.
    pub fn unit_state(&self, unit: &str) -> Result<UnitState, UnitStateError> {
        if !self.host.is_live() {
            let rec = self
                .units_record
                .get_or_init(|| {
                    let text = self.read_string(UNITS_RECORD).map_err(|e| {
                        if e.not_found {
                            UnitStateError::NoRecord
                        } else {
                            UnitStateError::Unreadable(e.message)
                        }
                    })?;
                    Ok(UnitsRecord::from_json(&text)?)
                })
                .as_ref()
                .map_err(|e| e.clone())?;
            if let Some(why) = &rec.systemd_unavailable {
                return Err(UnitStateError::NotAsked(why.clone()));
            }
            return rec
                .units
                .iter()
                .find(|u| u.name == unit)
                .cloned()
                .ok_or_else(|| UnitStateError::NotRecorded {
                    unit: unit.to_string(),
                });
        }
        if let Some(r) = self.unit_states.borrow().get(unit) {
            return r.clone();
        }
        let r = {
            let mut conn = self.systemd.borrow_mut();
            let c = conn.get_or_insert_with(|| {
                Systemd::connect().map_err(|e| UnitStateError::NoSystemd(e.to_string()))
            });
            match c {
                Ok(sd) => sd.unit(unit).map_err(|e| UnitStateError::NoAnswer {
                    unit: unit.to_string(),
                    why: e.to_string(),
                }),
                Err(e) => Err(e.clone()),
            }
        };
        self.unit_states
            .borrow_mut()
            .insert(unit.to_string(), r.clone());
        r
    }

    /// This network namespace's addresses and routes.
    pub fn local_addrs(&self) -> Result<&LocalAddrs, &str> {
        self.addrs
            .get_or_init(|| {
                let text = |p: &str| self.read_string(p).map_err(|e| e.to_string());
                LocalAddrs::from_tables(
                    text("/proc/net/fib_trie"),
                    text("/proc/net/if_inet6"),
                    text("/proc/net/route").ok(),
                )
                .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| e.as_str())
    }

    /// This network namespace's IPv4 addresses with their lifetimes (rtnetlink): which are
    /// DHCP leases. The running kernel only: a host root says why not.
    pub fn addr_lifetimes(&self) -> Result<&[daqtune_probe::net::addr::AddrInfo], &str> {
        self.addr_lifetimes
            .get_or_init(|| {
                if !self.host.is_live() {
                    return Err(
                        "address lifetimes are read from the running kernel (rtnetlink), not a host root"
                            .into(),
                    );
                }
                daqtune_probe::net::addr::ipv4_addresses()
                    .map_err(|e| format!("rtnetlink RTM_GETADDR: {e}"))
            })
            .as_ref()
            .map(Vec::as_slice)
            .map_err(|e| e.as_str())
    }

    /// Whether a systemd unit is enabled: a symlink in some `*.wants` directory
    /// (`daqtune_probe::system::unit_enabled` through the memoised listings).
    pub fn unit_enabled(&self, unit: &str) -> bool {
        daqtune_probe::system::unit_enabled_with(
            |d| self.read_dir(d).ok().map(|l| l.to_vec()),
            |p| self.exists(p),
            unit,
        )
    }

    /// Services known to fight a `performance` governor, enabled or running
    /// (`daqtune_probe::system::governor_fighters` on these facts).
    pub fn governor_fighters(&self) -> Vec<ServiceState> {
        let procs = self.processes();
        GOVERNOR_FIGHTERS
            .iter()
            // thermald caps frequency only under thermal stress; it is named nowhere else.
            .filter(|(unit, _)| *unit != "thermald.service")
            .filter_map(|(unit, comms)| {
                let enabled = self.unit_enabled(unit);
                let running = comms.iter().any(|c| procs.iter().any(|p| p == c));
                (enabled || running).then(|| ServiceState {
                    name: unit.to_string(),
                    enabled,
                    running,
                })
            })
            .collect()
    }

    /// A port's ethtool group (rings, channels, ...): from the kernel's ethtool netlink on the
    /// live host, from the recorded `daqtune/ethtool/IF/GROUP.json` under a root. `Err` says
    /// why there is none (the driver lacks the operation, the root did not record it).
    pub fn ethtool(
        &self,
        ifname: &str,
        group: daqtune_probe::net::ethtool::Group,
    ) -> Result<Rc<daqtune_probe::net::ethtool::GroupState>, Unreadable> {
        use daqtune_probe::net::ethtool::{
            describe_error, recorded_path, Client, GroupState, Recorded,
        };
        let key = format!("{ifname}/{}", group.name());
        if let Some(r) = self.ethtool.groups.borrow().get(&key) {
            return r.clone();
        }
        let why = |message: String| Unreadable {
            message,
            not_found: false,
        };
        let r = if self.host.is_live() {
            let mut c = self.ethtool.client.borrow_mut();
            match c.get_or_insert_with(|| Client::open().map_err(|e| describe_error(&e))) {
                Ok(client) => client
                    .get(group, ifname)
                    .map(Rc::new)
                    .map_err(|e| why(describe_error(&e))),
                Err(e) => Err(why(e.clone())),
            }
        } else {
            let path = recorded_path(ifname, group);
            match self.read_string(&path) {
                Err(e) if e.not_found => Err(Unreadable {
                    message: format!("not recorded in this host root ({path} is absent)"),
                    not_found: true,
                }),
                Err(e) => Err(e),
                Ok(text) => match GroupState::from_json(group, &text) {
                    Ok(Recorded::Value(v)) => Ok(Rc::new(v)),
                    Ok(Recorded::Error { error }) => Err(why(error)),
                    Err(e) => Err(why(format!(
                        "{path}: not a recorded {} group ({e})",
                        group.name()
                    ))),
                },
            }
        };
        self.ethtool.groups.borrow_mut().insert(key, r.clone());
        r
    }

    /// A port's drop and error counters now (never memoised: they move), and the first read
    /// of this run with its time (taken by this call when it is the first).
    pub fn port_counters(
        &self,
        ifname: &str,
    ) -> (PortCounters, (std::time::Instant, Rc<PortCounters>)) {
        let now = daqtune_probe::net::counters::read_port(self.host, ifname);
        let first = self
            .port_counters
            .borrow_mut()
            .entry(ifname.to_string())
            .or_insert_with(|| (std::time::Instant::now(), Rc::new(now.clone())))
            .clone();
        (now, first)
    }

    // ---- memoised reads --------------------------------------------------------------

    /// A whole file, read once per run.
    pub fn read_bytes(&self, path: &str) -> Result<Rc<Vec<u8>>, Unreadable> {
        if let Some(r) = self.files.borrow().get(path) {
            return r.clone();
        }
        let r = self
            .host
            .read_bytes(path)
            .map(Rc::new)
            .map_err(Unreadable::from);
        self.files.borrow_mut().insert(path.to_string(), r.clone());
        r
    }

    /// A text file (invalid UTF-8 replaced, as `Host::read_string` does).
    pub fn read_string(&self, path: &str) -> Result<String, Unreadable> {
        self.read_bytes(path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// A one-line attribute, trimmed.
    pub fn read_attr(&self, path: &str) -> Result<String, Unreadable> {
        self.read_string(path).map(|s| s.trim().to_string())
    }

    pub fn read_parsed<T: std::str::FromStr>(&self, path: &str) -> Option<T> {
        self.read_attr(path).ok()?.parse().ok()
    }

    /// Entry names of a directory, sorted.
    pub fn read_dir(&self, path: &str) -> Result<Rc<Vec<String>>, Unreadable> {
        if let Some(r) = self.dirs.borrow().get(path) {
            return r.clone();
        }
        let r = self
            .host
            .read_dir(path)
            .map(Rc::new)
            .map_err(Unreadable::from);
        self.dirs.borrow_mut().insert(path.to_string(), r.clone());
        r
    }

    /// The raw target of a symlink.
    pub fn read_link(&self, path: &str) -> Result<Rc<String>, Unreadable> {
        if let Some(r) = self.links.borrow().get(path) {
            return r.clone();
        }
        let r = self
            .host
            .read_link(path)
            .map(Rc::new)
            .map_err(Unreadable::from);
        self.links.borrow_mut().insert(path.to_string(), r.clone());
        r
    }

    /// Type and permission bits of a path (symlinks followed), once per run: whether the
    /// binary a unit calls is there and executable.
    pub fn stat(&self, path: &str) -> Result<FileStat, Unreadable> {
        if let Some(r) = self.stats.borrow().get(path) {
            return r.clone();
        }
        let r = self.host.stat(path).map_err(Unreadable::from);
        self.stats.borrow_mut().insert(path.to_string(), r.clone());
        r
    }

    /// `None`: absent; `Some(true)`: a directory; `Some(false)`: something else.
    fn kind(&self, path: &str) -> Option<bool> {
        if let Some(k) = self.kinds.borrow().get(path) {
            return *k;
        }
        let k = if self.host.is_dir(path) {
            Some(true)
        } else if self.host.exists(path) {
            Some(false)
        } else {
            None
        };
        self.kinds.borrow_mut().insert(path.to_string(), k);
        k
    }

    pub fn exists(&self, path: &str) -> bool {
        self.kind(path).is_some()
    }

    pub fn is_dir(&self, path: &str) -> bool {
        self.kind(path) == Some(true)
    }
}

/// GPU clock locks that daqtune's applied (not reverted) runs made, as (GPU UUID, domain,
/// run id), oldest run first. `gpu.clocks` uses them where NVML alone cannot tell whether a
/// clock is held, and to say that a lock daqtune made has since been lost.
fn applied_gpu_locks(facts: &Facts) -> Vec<(String, GpuDomain, String)> {
    let mut out = Vec::new();
    let runs = facts.journal_runs();
    if runs.is_empty() {
        return out;
    }
    // A lock lasts until reboot: runs from before this boot say nothing about now. (Without
    // /proc/stat, as on a bare fixture root, the boot time is unknown and every run counts.)
    let booted = facts.read_string("/proc/stat").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<u64>().ok())
    });
    for doc in runs {
        if doc.state == journal::RunState::Reverted || booted.is_some_and(|b| doc.started_unix < b)
        {
            continue;
        }
        for r in doc.records.iter().filter(|r| r.done) {
            // A lock whose read-back showed it did not take is no lock of daqtune's.
            if let journal::Entry::GpuLock {
                uuid,
                domain,
                shown: None | Some(true),
                ..
            } = &r.entry
            {
                out.push((uuid.clone(), *domain, doc.id.clone()));
            }
        }
    }
    out
}

/// Where a snapshot keeps systemd's state of daqtune's units (docs/gpu-facts.md describes the
/// file next to the GPU facts).
pub const UNITS_RECORD: &str = "/daqtune/units.json";
pub const UNITS_SCHEMA: &str = "daqtune.units/v1";
/// How [`Facts::unit_state`]'s error starts when systemd cannot be reached at all.
pub const NO_SYSTEMD: &str = "cannot ask systemd over D-Bus";

/// Why [`Facts::unit_state`] does not know a unit's state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitStateError {
    /// A host root without the snapshot's record.
    #[error("this host root has no record of systemd's unit states ({}; `daqtune snapshot` writes it)", UNITS_RECORD.trim_start_matches('/'))]
    NoRecord,
    #[error("{0}")]
    Unreadable(String),
    #[error(transparent)]
    BadRecord(#[from] RecordError),
    /// The snapshot's host had no systemd to ask.
    #[error("systemd could not be asked when the snapshot was taken: {0}")]
    NotAsked(String),
    #[error("{unit} is not in {} (recorded before daqtune wrote it?)", UNITS_RECORD.trim_start_matches('/'))]
    NotRecorded { unit: String },
    /// No systemd to ask on this host: true of every unit.
    #[error("{NO_SYSTEMD}: {0}")]
    NoSystemd(String),
    #[error("systemd did not answer for {unit}: {why}")]
    NoAnswer { unit: String, why: String },
}

/// A units record (`daqtune/units.json`) that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("{}: {why}", UNITS_RECORD.trim_start_matches('/'))]
    Json { why: String },
    #[error("{}: schema `{schema}`, expected `{UNITS_SCHEMA}`", UNITS_RECORD.trim_start_matches('/'))]
    Schema { schema: String },
}

/// systemd's state of daqtune's units as a snapshot recorded it: what `daqtune.artifacts`
/// replays under `--root`, since a host root has no systemd to ask.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UnitsRecord {
    pub schema: String,
    pub captured_unix: Option<u64>,
    /// Why systemd could not be asked (no D-Bus, not systemd), when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub systemd_unavailable: Option<String>,
    pub units: Vec<UnitState>,
}

impl UnitsRecord {
    pub fn from_json(text: &str) -> Result<UnitsRecord, RecordError> {
        let r: UnitsRecord =
            serde_json::from_str(text).map_err(|e| RecordError::Json { why: e.to_string() })?;
        if r.schema != UNITS_SCHEMA {
            return Err(RecordError::Schema { schema: r.schema });
        }
        Ok(r)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

/// Where a snapshot keeps the kernel log lines it captured.
pub const KMSG_COPY: &str = "/daqtune/kmsg.txt";

/// Kernel log lines worth keeping: mlx5, NVIDIA Xid, AER.
pub fn interesting_kmsg(line: &str) -> bool {
    [
        "mlx5",
        "NVRM: Xid",
        "AER",
        "pcieport",
        "nvidia-peermem",
        "nvidia_peermem",
    ]
    .iter()
    .any(|k| line.contains(k))
}

/// Read the kernel ring buffer through /dev/kmsg without blocking (root only).
pub fn read_kmsg() -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
        .ok()?;
    let mut out = String::new();
    let mut buf = vec![0u8; 8192];
    // Each read returns one record; EAGAIN ends the buffer, EPIPE means a record was
    // overwritten while reading and the next read continues.
    for _ in 0..200_000 {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let rec = String::from_utf8_lossy(&buf[..n]);
                let msg = rec.split_once(';').map(|(_, m)| m).unwrap_or(&rec);
                let msg = msg.lines().next().unwrap_or("");
                if interesting_kmsg(msg) {
                    out.push_str(msg);
                    out.push('\n');
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(_) => break,
        }
    }
    Some(out)
}

/// The one in-process read of the GPU facts of a root: a slot every caller of
/// [`read_gpus_once`] and [`prefetch_gpus`] shares, so a read the prefetch started is waited
/// for, never started a second time.
type GpuSlot = std::sync::Arc<std::sync::OnceLock<Result<GpuSnapshot, Arc<GpuError>>>>;

fn gpu_slot(root: &std::path::Path) -> Option<GpuSlot> {
    use std::path::PathBuf;
    use std::sync::{Mutex, OnceLock};
    static SLOTS: OnceLock<Mutex<HashMap<PathBuf, GpuSlot>>> = OnceLock::new();
    let mut slots = SLOTS.get_or_init(Default::default).lock().ok()?;
    Some(slots.entry(root.to_path_buf()).or_default().clone())
}

/// GPU facts once per process and root: loading NVML and cuInit costs hundreds of ms, and
/// profile detection by GPU name and the GPU checks both need them. A read already under way
/// (a [`prefetch_gpus`] thread) is waited for.
pub fn read_gpus_once(
    host: &Host,
    cache: daqtune_probe::gpu::CacheMode,
) -> Result<GpuSnapshot, Arc<GpuError>> {
    if host.is_recording() {
        // A snapshot must see the read of the facts file.
        return daqtune_probe::gpu::read_gpus_with(host, cache).map_err(Arc::new);
    }
    shared_read(host.root(), || {
        daqtune_probe::gpu::read_gpus_with(host, cache).map_err(Arc::new)
    })
}

/// `read` once per root for every caller, concurrent ones included (they wait for it).
fn shared_read(
    root: &std::path::Path,
    read: impl FnOnce() -> Result<GpuSnapshot, Arc<GpuError>>,
) -> Result<GpuSnapshot, Arc<GpuError>> {
    match gpu_slot(root) {
        Some(slot) => slot.get_or_init(read).clone(),
        None => read(),
    }
}

/// Starts reading the live host's GPU facts on a thread of its own, so NVML's start-up and
/// queries (tens of ms warm, docs/performance.md) run while the checks that need no GPU read
/// sysfs and procfs; the first check that asks for the facts waits for that read instead of
/// starting its own. Only where the facts will be asked for: the live host (a root's facts
/// are a recorded file), not a recording run (a snapshot must see every read on its own
/// thread), and a driver that lists at least one GPU in `/proc/driver/nvidia/gpus` (a host
/// without one must not pay for loading NVML). The caller joins the handle before it exits:
/// a process must not end while a thread is inside the driver's libraries.
pub fn prefetch_gpus(
    host: &Host,
    cache: daqtune_probe::gpu::CacheMode,
) -> Option<std::thread::JoinHandle<()>> {
    if !host.is_live() || host.is_recording() {
        return None;
    }
    let listed = host
        .read_dir("/proc/driver/nvidia/gpus")
        .map(|entries| entries.into_iter().next().is_some())
        .unwrap_or(false);
    if !listed {
        return None;
    }
    let host = host.clone();
    std::thread::Builder::new()
        .name("daqtune-gpu-facts".into())
        .spawn(move || {
            let _ = read_gpus_once(&host, cache);
        })
        .ok()
}

#[cfg(test)]
mod gpu_prefetch_tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;

    fn not_available(n: usize) -> Result<GpuSnapshot, Arc<GpuError>> {
        Err(Arc::new(GpuError::NotAvailable {
            library: "libnvidia-ml.so.1".into(),
            reason: format!("read {n}"),
        }))
    }

    /// The prefetch thread and the first GPU check ask at the same moment: the driver is
    /// loaded once and both get that one answer (two reads would double NVML's cost).
    #[test]
    fn concurrent_readers_of_a_root_share_one_read() {
        let dir = tempfile::tempdir().unwrap();
        let reads = AtomicUsize::new(0);
        let gate = Barrier::new(4);
        let answers: Vec<String> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        gate.wait();
                        let r = shared_read(dir.path(), || {
                            let n = reads.fetch_add(1, Ordering::SeqCst);
                            not_available(n)
                        });
                        r.unwrap_err().to_string()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        assert!(answers.iter().all(|a| a == &answers[0]), "{answers:?}");
        // Another root is another host: read on its own.
        let other = tempfile::tempdir().unwrap();
        let r = shared_read(other.path(), || not_available(7));
        assert!(r.unwrap_err().to_string().ends_with("read 7"));
    }

    /// A fixture root's GPU facts are its recorded file: nothing to load, no thread.
    #[test]
    fn no_prefetch_under_a_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/driver/nvidia/gpus/0000:01:00.0")).unwrap();
        let host = Host::at(dir.path()).unwrap();
        assert!(prefetch_gpus(&host, daqtune_probe::gpu::CacheMode::Use).is_none());
    }
}
