//! Platform profiles: YAML files in `platforms/` (embedded) or given with `--profile FILE`.
//!
//! Each file is deserialized on its own into [`Profile`] with `deny_unknown_fields`, so a typo
//! or a wrong type is reported with the file's line and column. `extends:` chains are merged
//! as YAML mappings (the child's keys win, recursively) and the merged document is read again.
//! Semantic rules (an impossible MTU, isolated CPUs overlapping irqaffinity) are checked after
//! the merge and located in the file that set the offending key.

pub mod keys;
mod merge;
mod validate;

pub use merge::{builtin_names, load, load_source, locate, PROFILE_MAX_DEPTH, PROFILE_MAX_ITEMS};

use daqtune_probe::cpulist::{parse_cpulist, CpuSet};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The built-in profiles, embedded at build time.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "generic-dgpu",
        include_str!("../../../../platforms/generic-dgpu.yaml"),
    ),
    (
        "igx-orin",
        include_str!("../../../../platforms/igx-orin.yaml"),
    ),
    (
        "dgx-spark",
        include_str!("../../../../platforms/dgx-spark.yaml"),
    ),
];

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Profile {
    pub name: String,
    pub description: String,
    pub extends: Option<String>,
    #[serde(rename = "match")]
    pub matches: MatchRules,
    pub cpu: CpuProfile,
    pub hugepages: HugepageProfile,
    pub pcie: PcieProfile,
    pub nic: NicProfile,
    pub gpu: GpuProfile,
    pub sysctl: SysctlProfile,
    /// The kernel's latency settings (TuneD's latency profiles): `kernel.thp`,
    /// `kernel.numa-balancing`, `kernel.watchdog`, `kernel.timer-migration`,
    /// `vm.stat-interval`, `kernel.ksm`. A key left out is not judged.
    pub kernel: KernelProfile,
    pub selftest: SelftestProfile,
    pub persist: PersistProfile,
    /// Checks that do not apply here, with the reason shown as `n/a`.
    pub not_applicable: BTreeMap<String, String>,
    /// Checks that must end in pass/warn for a qualification gate (skip/error fail it).
    pub required: Vec<String>,
    pub waivers: Vec<Waiver>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MatchRules {
    /// Glob patterns (`*` and `?`) on /sys/class/dmi/id/product_name.
    pub dmi_product: Vec<String>,
    /// Glob patterns on the device-tree model.
    pub dt_model: Vec<String>,
    /// Glob patterns on GPU names (NVML), for platforms only recognisable by their GPU.
    pub gpu_name: Vec<String>,
}

/// Which cores carry the data path: an explicit list, or a rule resolved on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CoreSpec {
    List(String),
    Rule(CoreRule),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreRule {
    pub rule: CoreRuleKind,
    pub count: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CoreRuleKind {
    /// The highest-numbered cores of the NIC's NUMA node (CPU 0 never).
    NicLocal,
    /// The highest-numbered cores of the host.
    Highest,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuProfile {
    pub governor: String,
    /// Cores isolated for the data path (isolcpus, nohz_full, rcu_nocbs).
    pub isolated: Option<CoreSpec>,
    /// irqaffinity=; `None` = the complement of the isolated set.
    pub irqaffinity: Option<String>,
    pub rcu_nocb_poll: bool,
    pub nohz_full: bool,
    pub rcu_nocbs: bool,
    /// Deepest idle-state exit latency (µs) tolerated on data cores.
    pub max_idle_latency_us: u64,
}

impl Default for CpuProfile {
    fn default() -> Self {
        CpuProfile {
            governor: "performance".into(),
            isolated: None,
            irqaffinity: None,
            rcu_nocb_poll: true,
            nohz_full: true,
            rcu_nocbs: true,
            max_idle_latency_us: 10,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HugepageProfile {
    /// Page size (`1G`, `2M`) of the one pool `size`/`count` describe.
    pub size: String,
    pub count: u64,
    /// hugetlbfs mount point for the first pool: where `apply` mounts it (`None`: apply mounts
    /// nothing, any mount of the size will do).
    pub mount: Option<String>,
    /// The check insists on each pool's `mount` point. Off (the default), any visible
    /// hugetlbfs mount of the pool's page size serves: DPDK's EAL uses every hugetlbfs mount
    /// of the page size it wants, whatever its path.
    pub require_mount: bool,
    /// Set default_hugepagesz= (the first pool's size) on the kernel command line too.
    pub default_size: bool,
    /// Several pools (`[{size: 1G, count: 1}, {size: 2M, count: 512}]`). When a profile layer
    /// gives `pools`, the `size`/`count` of the layers it extends no longer count (and one
    /// layer may not give both).
    pub pools: Vec<HugepagePool>,
}

/// One hugepage pool of a profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HugepagePool {
    pub size: String,
    pub count: u64,
    /// hugetlbfs mount point of this size. Default: the profile's `mount` for the first pool,
    /// `<mount>-<size>` (`/mnt/huge-2M`) for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount: Option<String>,
}

impl HugepageProfile {
    /// The pools to reserve, each with its mount point resolved; empty when the profile needs
    /// no hugepages.
    pub fn pools(&self) -> Vec<HugepagePool> {
        if self.pools.is_empty() {
            if self.count == 0 {
                return Vec::new();
            }
            return vec![HugepagePool {
                size: self.size.clone(),
                count: self.count,
                mount: self.mount.clone(),
            }];
        }
        self.pools
            .iter()
            .enumerate()
            .filter(|(_, p)| p.count > 0)
            .map(|(i, p)| HugepagePool {
                size: p.size.clone(),
                count: p.count,
                mount: p.mount.clone().or_else(|| {
                    let base = self.mount.as_deref()?;
                    Some(if i == 0 {
                        base.to_string()
                    } else {
                        format!("{}-{}", base.trim_end_matches('/'), p.size)
                    })
                }),
            })
            .collect()
    }
}

impl Default for HugepageProfile {
    fn default() -> Self {
        HugepageProfile {
            size: "1G".into(),
            count: 4,
            mount: Some("/mnt/huge".into()),
            require_mount: false,
            default_size: true,
            pools: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PcieProfile {
    pub mrrs: u32,
    /// Topology classes that pass (`PIX`, `PXB`, ...).
    pub topology_pass: Vec<String>,
    /// Topology classes that fail (the others warn).
    pub topology_fail: Vec<String>,
    pub allow_acs: bool,
    /// Correctable AER errors since boot above which `pcie.aer` warns.
    pub aer_correctable_warn: u64,
}

impl Default for PcieProfile {
    fn default() -> Self {
        PcieProfile {
            mrrs: 4096,
            topology_pass: vec!["PIX".into(), "PXB".into()],
            topology_fail: vec![],
            allow_acs: false,
            aer_correctable_warn: 100,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NicProfile {
    pub mtu: u32,
    pub link_layer: String,
    /// Interfaces of the data path; empty = every ConnectX port.
    pub interfaces: Vec<String>,
    /// Static IPv4 addresses (`a.b.c.d/len`) of data ports, by interface name: written into
    /// the port's network file (NetworkManager `ipv4.method=manual`, netplan `addresses:`).
    /// A port not named here keeps the addresses it has (seed 000, "Configure the IP
    /// addresses of the NIC ports").
    pub addresses: std::collections::BTreeMap<String, Vec<String>>,
    /// DGX Spark: CX-7 PFs vanish without a cable, so a missing PF is a cabling problem.
    pub cable_preflight: bool,
    /// Number of ConnectX physical functions the platform has (Spark: 4).
    pub expected_pfs: Option<u32>,
    /// Ring sizes of the data ports (`nic.rings`).
    pub rings: NicRings,
    /// Interrupt coalescing of the data ports (`nic.coalesce`).
    pub coalesce: NicCoalesce,
    /// Pause frames (flow control) of the data ports (`nic.pause`).
    pub pause: NicPause,
    /// Receive offloads and header split (`nic.offloads`).
    pub offloads: NicOffloads,
    /// Queue count against the data cores (`nic.channels`).
    pub channels: NicChannels,
}

/// A ring size: a count of descriptors, or `max` (the device's maximum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RingSize {
    Count(u32),
    Word(RingWord),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RingWord {
    Max,
}

/// `nic.rings`: `None` leaves that ring as it is (reported only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NicRings {
    pub rx: Option<RingSize>,
    pub tx: Option<RingSize>,
}

/// `nic.coalesce`: each `None` is reported, not judged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NicCoalesce {
    pub adaptive_rx: Option<bool>,
    pub adaptive_tx: Option<bool>,
    pub rx_usecs: Option<u32>,
}

/// `nic.pause`: each `None` is reported, not judged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NicPause {
    pub autoneg: Option<bool>,
    pub rx: Option<bool>,
    pub tx: Option<bool>,
}

/// `nic.offloads`: GRO and LRO on or off; `header_split: true` wants TCP header/data split
/// where the driver has it (TCP zero-copy receive needs it, seed 003).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NicOffloads {
    pub gro: Option<bool>,
    pub lro: Option<bool>,
    pub header_split: Option<bool>,
}

/// A queue count: a number, or `data-cores` (at least one queue per data core).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ChannelCount {
    Count(u32),
    Word(ChannelWord),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChannelWord {
    DataCores,
}

/// `nic.channels`: the combined (or RX) queue count wanted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NicChannels {
    pub combined: Option<ChannelCount>,
}

impl Default for NicProfile {
    fn default() -> Self {
        NicProfile {
            mtu: 9000,
            link_layer: "ethernet".into(),
            interfaces: vec![],
            addresses: Default::default(),
            cable_preflight: false,
            expected_pfs: None,
            rings: NicRings::default(),
            coalesce: NicCoalesce::default(),
            pause: NicPause::default(),
            offloads: NicOffloads::default(),
            channels: NicChannels::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GpuProfile {
    /// Lock the SM clock at its maximum.
    pub lock_sm_clock: bool,
    /// Lock the memory clock at its maximum (GB10 has no memory clock domain).
    pub lock_memory_clock: bool,
    pub persistence: bool,
    pub bar1_min_mib: u64,
    pub bar1_recommended_mib: Option<u64>,
    /// GPUDirect paths the data-path backends may use: `peermem`, `dmabuf`.
    pub gpudirect_paths: Vec<String>,
    /// How far below the maximum a held clock may read and still pass: seed 000 accepts
    /// 1920 MHz for a 2100 MHz maximum on IGX (boost) and 8000 for 8001 (rounding).
    pub clock_tolerance_mhz: u32,
    /// Larger BAR1 minimums for GPUs whose name matches a glob (`"*B200*": 32768`); the
    /// largest matching value of this, `bar1_min_by_arch` and `bar1_min_mib` applies. Empty by
    /// default: product names do not tell the architecture (an "RTX PRO 6000 Blackwell Server
    /// Edition" matches no `*B200*`).
    pub bar1_min_by_name: BTreeMap<String, u64>,
    /// Larger BAR1 minimums by GPU architecture (NVML's, else from CUDA's compute
    /// capability): `blackwell: 32768`, as DAQIRI's tune_system.py holds Blackwell Server
    /// Edition GPUs to 32 GiB (NVIDIA/daqiri 89eacf7). A GPU whose framebuffer is smaller is
    /// held to its framebuffer rounded up to a power of two (what a fully open Resizable BAR
    /// exposes).
    pub bar1_min_by_arch: BTreeMap<String, u64>,
}

impl Default for GpuProfile {
    fn default() -> Self {
        GpuProfile {
            lock_sm_clock: true,
            lock_memory_clock: true,
            persistence: true,
            bar1_min_mib: 1024,
            bar1_recommended_mib: None,
            // Either path (DAQIRI's tutorial since NVIDIA/daqiri 3c87196; tune_system.py
            // accepts dma-buf without peermem, 89eacf7).
            gpudirect_paths: vec!["peermem".into(), "dmabuf".into()],
            clock_tolerance_mhz: 250,
            bar1_min_by_name: BTreeMap::new(),
            // NVIDIA/daqiri 89eacf7 (tune_system.py, BAR1_BLACKWELL_MIN_MIB): 32 GiB is the
            // floor of a Blackwell GPU with Resizable BAR fully enabled.
            bar1_min_by_arch: [("blackwell".to_string(), 32768u64)].into_iter().collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SysctlProfile {
    /// Judge socket-path buffers (seed 003); off by default since DPDK/RDMA bypass them.
    pub enabled: bool,
    /// Minimum values by dotted sysctl name; triples (tcp_rmem) compare field by field.
    pub values: BTreeMap<String, String>,
}

impl Default for SysctlProfile {
    fn default() -> Self {
        let mut values = BTreeMap::new();
        for (k, v) in [
            ("net.core.rmem_max", "268435456"),
            ("net.core.wmem_max", "268435456"),
            ("net.core.optmem_max", "65536"),
            ("net.ipv4.tcp_rmem", "4096 87380 268435456"),
            ("net.ipv4.tcp_wmem", "4096 65536 268435456"),
            ("net.core.netdev_max_backlog", "250000"),
        ] {
            values.insert(k.into(), v.into());
        }
        SysctlProfile {
            enabled: false,
            values,
        }
    }
}

/// The kernel's latency settings; `None` (the key left out) = not judged (`n/a`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelProfile {
    /// /sys/kernel/mm/transparent_hugepage/enabled.
    pub thp: Option<ThpEnabled>,
    /// /sys/kernel/mm/transparent_hugepage/defrag.
    pub thp_defrag: Option<ThpDefrag>,
    /// kernel.numa_balancing on (true) or off (false).
    pub numa_balancing: Option<bool>,
    /// The soft/hard lockup watchdog: off everywhere, or kept off the data cores.
    pub watchdog: Option<WatchdogMode>,
    /// kernel.nmi_watchdog on (true) or off (false).
    pub nmi_watchdog: Option<bool>,
    /// kernel.timer_migration on (true) or off (false).
    pub timer_migration: Option<bool>,
    /// vm.stat_interval at least this many seconds.
    pub stat_interval: Option<u32>,
    /// ksmd running (true) or stopped (false).
    pub ksm: Option<bool>,
}

/// The values of /sys/kernel/mm/transparent_hugepage/enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThpEnabled {
    Always,
    Madvise,
    Never,
}

impl ThpEnabled {
    pub fn as_str(self) -> &'static str {
        match self {
            ThpEnabled::Always => "always",
            ThpEnabled::Madvise => "madvise",
            ThpEnabled::Never => "never",
        }
    }
}

/// The values of /sys/kernel/mm/transparent_hugepage/defrag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ThpDefrag {
    #[serde(rename = "always")]
    Always,
    #[serde(rename = "defer")]
    Defer,
    #[serde(rename = "defer+madvise")]
    DeferMadvise,
    #[serde(rename = "madvise")]
    Madvise,
    #[serde(rename = "never")]
    Never,
}

impl ThpDefrag {
    pub fn as_str(self) -> &'static str {
        match self {
            ThpDefrag::Always => "always",
            ThpDefrag::Defer => "defer",
            ThpDefrag::DeferMadvise => "defer+madvise",
            ThpDefrag::Madvise => "madvise",
            ThpDefrag::Never => "never",
        }
    }
}

/// How `kernel.watchdog` keeps the lockup detectors off the data cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WatchdogMode {
    /// kernel.watchdog = 0: no soft or hard lockup detector on any CPU.
    Off,
    /// kernel.watchdog_cpumask without the data cores: the detectors keep watching the
    /// housekeeping CPUs.
    Cpumask,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SelftestProfile {
    /// Message size for socket/DPDK payloads (8 KB is DAQIRI's best case).
    pub message_size: u32,
    /// UDP loss tolerated at the paced rate, in percent.
    pub max_udp_loss_pct: f64,
    /// Deprecated (a second floor beside `floor` x `reference`): the loader reads it, says so
    /// with its file:line, and maps a rate above 0 onto a `socket.tcp` reference of that rate
    /// with floor 1.0 ([`LoadedProfile::deprecations`]). Always `None` after loading, and
    /// never printed.
    #[serde(skip_serializing)]
    pub min_tcp_gbps: Option<f64>,
    /// UDP pacing in Gb/s; unset = the payload rate of the port's link at the MTU (where the
    /// link has no speed, veth and loopback: a share of what a short unpaced probe delivered).
    pub udp_rate_gbps: Option<f64>,
    /// Deprecated: reference rates by `engine.mode` without a message shape (`rdma.send:
    /// 97.6`). The loader maps each onto a shapeless `reference` entry and says so; always
    /// `None` after loading, and never printed.
    #[serde(skip_serializing)]
    pub reference_gbps: Option<BTreeMap<String, f64>>,
    /// Share of its reference a self-test result must reach; `qualify --level 2|3` fails a
    /// result below it.
    pub floor: f64,
    /// What a tuned host of this platform reaches, per engine, mode and message shape, with
    /// the source of each figure (docs/ci-gate.md).
    pub reference: Vec<ReferenceRate>,
}

/// One reference figure (`selftest.reference[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceRate {
    /// `engine.mode`: socket.tcp, socket.udp, dpdk.raw, rdma.send, rdma.write.
    pub path: String,
    /// Bytes per message it was measured with (unset = any).
    #[serde(default)]
    pub message_size: Option<u32>,
    /// Parallel streams (unset = any); `qualify` runs the socket engine with this many.
    #[serde(default)]
    pub streams: Option<u16>,
    /// Payload Gb/s (unset = the payload rate of the port's link at the MTU: where nothing is
    /// published).
    #[serde(default)]
    pub gbps: Option<f64>,
    /// Loss the reference run itself saw, percent (an unpaced UDP figure).
    #[serde(default)]
    pub loss_pct: Option<f64>,
    /// This figure's floor (unset = `selftest.floor`).
    #[serde(default)]
    pub floor: Option<f64>,
    /// Where the figure comes from (a seed, a document, "the link's payload rate").
    pub source: String,
}

/// The `engine.mode` pairs a reference may name.
/// The architecture names `gpu.bar1_min_by_arch` may use: NVML's nvmlDeviceArchitecture_t
/// names as the probe writes them (`daqtune_probe::gpu` architecture names).
pub const GPU_ARCHITECTURES: &[&str] = &[
    "kepler",
    "maxwell",
    "pascal",
    "volta",
    "turing",
    "ampere",
    "ada",
    "hopper",
    "blackwell",
    "orin",
];

pub const REFERENCE_PATHS: &[&str] = &[
    "socket.tcp",
    "socket.udp",
    "dpdk.raw",
    "rdma.send",
    "rdma.write",
];

impl Default for SelftestProfile {
    fn default() -> Self {
        SelftestProfile {
            message_size: 8192,
            max_udp_loss_pct: 0.1,
            min_tcp_gbps: None,
            udp_rate_gbps: None,
            reference_gbps: None,
            floor: 0.9,
            reference: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PersistProfile {
    pub grub_dropin: String,
    /// `auto`, `netplan`, `networkmanager`, `networkd`.
    pub network: String,
    /// NetworkManager connection-name prefix (the seed's `daqiri` on Spark).
    pub nm_prefix: String,
}

impl Default for PersistProfile {
    fn default() -> Self {
        PersistProfile {
            grub_dropin: "/etc/default/grub.d/99-daqtune.cfg".into(),
            network: "auto".into(),
            nm_prefix: "daqtune".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Waiver {
    pub check: String,
    /// Only verdicts whose subject contains this text (all subjects when absent).
    #[serde(default)]
    pub subject: Option<String>,
    /// ISO date (YYYY-MM-DD); the waiver stops applying after it.
    pub until: String,
    pub reason: String,
}

/// A profile document could not be used. Rendered as `file:line:column: message`, or
/// `file: message` where no line applies (line 0: the file could not be read at all).
#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {message}", position(*.line, *.column))]
pub struct ProfileError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// `:line:column` after a file name, or nothing for line 0 (an I/O error has no position).
fn position(line: usize, column: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(":{line}:{column}")
    }
}

impl ProfileError {
    fn at(file: &str, pos: Option<(usize, usize)>, message: impl Into<String>) -> Self {
        let (line, column) = pos.unwrap_or((1, 1));
        ProfileError {
            file: file.into(),
            line,
            column,
            message: message.into(),
        }
    }
}

/// A loaded profile with where each of its layers came from (for error locations).
#[derive(Debug, Clone)]
pub struct LoadedProfile {
    pub profile: Profile,
    /// (file name, source text) from the most derived to the base.
    pub layers: Vec<(String, String)>,
    /// How this profile was chosen (`--profile igx-orin`, `detected: ...`, `fallback: ...`).
    pub origin: String,
    /// Deprecated keys the layers used, each `file:line:column: what it was read as and what
    /// to write instead` (the binary prints them on stderr).
    pub deprecations: Vec<String>,
}

impl LoadedProfile {
    /// The isolated set when the profile gives a list.
    pub fn isolated_list(&self) -> Option<CpuSet> {
        match &self.profile.cpu.isolated {
            Some(CoreSpec::List(s)) => parse_cpulist(s, None).ok(),
            _ => None,
        }
    }
}

impl ProfileError {
    /// Point at the first line that mentions `needle` (for values inside lists).
    fn relocate(mut self, layers: &[(String, String)], needle: &str) -> Self {
        for (f, s) in layers {
            for (i, line) in s.lines().enumerate() {
                if let Some(col) = line.find(needle) {
                    self.file = f.clone();
                    self.line = i + 1;
                    self.column = col + 1;
                    return self;
                }
            }
        }
        self
    }
}
/// Parse YYYY-MM-DD into days since 1970-01-01.
pub fn parse_date(s: &str) -> Option<i64> {
    let mut it = s.trim().splitn(3, '-');
    let y: i64 = it.next()?.parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let d: i64 = it.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1970..=9999).contains(&y) {
        return None;
    }
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days_in_month = match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if !(1..=days_in_month).contains(&d) {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146097 + doe - 719468)
}

/// Today's date in days since the epoch (UTC).
pub fn today() -> i64 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    secs.div_euclid(86400)
}

/// Glob with `*` and `?`, case-insensitive (DMI strings vary in case between BIOS versions).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let t: Vec<char> = text.to_lowercase().chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let (mut star, mut mark) = (None, 0usize);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// Which built-in profile matches the host's identity, with the reason.
pub fn detect(
    platform: &daqtune_probe::system::PlatformFacts,
    gpu_names: &[String],
) -> Option<(String, String)> {
    for (name, _) in BUILTIN {
        let Ok(lp) = load(name) else { continue };
        let m = &lp.profile.matches;
        if let Some(prod) = &platform.dmi_product {
            if let Some(pat) = m.dmi_product.iter().find(|pat| glob_match(pat, prod)) {
                return Some((
                    name.to_string(),
                    format!("DMI product `{prod}` matches `{pat}`"),
                ));
            }
        }
        if let Some(model) = &platform.dt_model {
            if let Some(pat) = m.dt_model.iter().find(|pat| glob_match(pat, model)) {
                return Some((
                    name.to_string(),
                    format!("device-tree model `{model}` matches `{pat}`"),
                ));
            }
        }
        for g in gpu_names {
            if let Some(pat) = m.gpu_name.iter().find(|pat| glob_match(pat, g)) {
                return Some((name.to_string(), format!("GPU `{g}` matches `{pat}`")));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_load() {
        for n in builtin_names() {
            let p = load(n).unwrap_or_else(|e| panic!("{n}: {e}"));
            assert_eq!(p.profile.name, n);
        }
    }

    #[test]
    fn igx_values() {
        let p = load("igx-orin").expect("igx").profile;
        // NVIDIA/daqiri c7ddd12: a core per queue plus one per app worker.
        assert_eq!(p.cpu.isolated, Some(CoreSpec::List("8-11".into())));
        assert_eq!(p.cpu.irqaffinity.as_deref(), Some("0-7"));
        assert_eq!(p.hugepages.count, 4);
        assert_eq!(p.hugepages.mount.as_deref(), Some("/mnt/huge"));
    }

    #[test]
    fn nesting_bomb_refused_with_position() {
        // The red-team profile: 100,000 nested `[`.
        let src = format!("name: x\ncpu:\n  isolated: {}\n", "[".repeat(100_000));
        let e = load_source("bomb.yaml", &src).expect_err("bomb");
        assert_eq!((e.line, e.column), (3, 43), "{e}");
        assert!(e.message.contains("nested more than 32 levels"), "{e}");
        let src = format!(
            "name: x\nwaivers:\n{}",
            "- {check: mtu, until: 2030-01-01, reason: r}\n".repeat(5000)
        );
        let e = load_source("long.yaml", &src).expect_err("long");
        assert!(e.message.contains("more than 4096 entries"), "{e}");
    }

    #[test]
    fn isolated_bomb_refused_not_expanded() {
        // The red-team `isolated:`: 80 KB of ranges over 65536 CPUs.
        let src = format!(
            "name: x\ncpu:\n  isolated: \"{}\"\n",
            "0-65535,".repeat(10_000)
        );
        let e = load_source("iso.yaml", &src).expect_err("bomb");
        assert!(e.message.contains("limit of 8192 CPUs"), "{e}");
        assert!(e.to_string().len() < 400, "{e}");
    }

    #[test]
    fn unknown_key_has_line_and_column() {
        let e = load_source("x.yaml", "name: x\ncpu:\n  governer: performance\n").unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("x.yaml", 3), "{e}");
        assert!(e.message.contains("governer"), "{e}");
    }

    #[test]
    fn wrong_type() {
        let e = load_source("x.yaml", "name: x\nnic:\n  mtu: big\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
    }

    #[test]
    fn semantic_error_located() {
        let e = load_source(
            "x.yaml",
            "name: x\ncpu:\n  isolated: \"2-5\"\n  irqaffinity: \"0-7\"\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.column), (4, 3), "{e}");
        assert!(e.message.contains("2-5"), "{e}");
        let e = load_source("x.yaml", "name: x\nnic:\n  mtu: 9\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
    }

    #[test]
    fn extends_merges_child_wins() {
        let p = load_source("x.yaml", "name: x\nextends: igx-orin\nnic:\n  mtu: 4000\n")
            .expect("load")
            .profile;
        assert_eq!(p.nic.mtu, 4000);
        assert_eq!(p.hugepages.count, 4);
        assert_eq!(p.cpu.isolated, Some(CoreSpec::List("8-11".into())));
        let e = load_source("x.yaml", "name: x\nextends: nope\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
    }

    #[test]
    fn pci_address_stays_string() {
        let p = load_source(
            "x.yaml",
            "name: x\nnic:\n  interfaces: [0000:01:00.0, 01:00]\n",
        )
        .expect("load")
        .profile;
        assert_eq!(p.nic.interfaces, vec!["0000:01:00.0", "01:00"]);
    }

    #[test]
    fn globs_and_dates() {
        assert!(glob_match("*IGX*", "NVIDIA IGX Orin Developer Kit"));
        assert!(!glob_match("DGX*", "IGX"));
        assert_eq!(parse_date("1970-01-02"), Some(1));
        assert!(parse_date("2026-13-01").is_none());
        // Calendar dates only: no 30 February, 29 February in leap years only.
        assert!(parse_date("2020-02-30").is_none());
        assert!(parse_date("2021-02-29").is_none());
        assert!(parse_date("2100-02-29").is_none());
        assert!(parse_date("2026-04-31").is_none());
        assert_eq!(parse_date("2000-02-29"), Some(11_016));
        assert_eq!(parse_date("2024-02-29"), Some(19_782));
        assert!(parse_date("garbage").is_none());
    }

    #[test]
    fn builtin_references_cite_their_source() {
        let spark = load("dgx-spark").expect("spark").profile;
        assert_eq!(spark.selftest.floor, 0.9);
        let tcp = spark
            .selftest
            .reference
            .iter()
            .find(|r| r.path == "socket.tcp")
            .expect("socket.tcp");
        assert_eq!(
            (tcp.gbps, tcp.message_size, tcp.streams),
            (Some(97.2), Some(8192), Some(4))
        );
        let paths: Vec<&str> = spark
            .selftest
            .reference
            .iter()
            .map(|r| r.path.as_str())
            .collect();
        assert_eq!(
            paths,
            [
                "dpdk.raw",
                "dpdk.raw",
                "rdma.send",
                "socket.tcp",
                "socket.udp"
            ]
        );
        for name in builtin_names() {
            let p = load(name).expect("builtin").profile;
            assert!(!p.selftest.reference.is_empty(), "{name}");
            for r in &p.selftest.reference {
                assert!(
                    r.source.contains("seed 0"),
                    "{name} {}: {}",
                    r.path,
                    r.source
                );
                // No published figure: the link's payload rate, said so.
                if r.gbps.is_none() {
                    assert!(
                        r.source.starts_with("link payload rate"),
                        "{name} {}",
                        r.path
                    );
                }
            }
            // UDP is paced from the link unless a profile names a rate.
            assert_eq!(p.selftest.udp_rate_gbps, None, "{name}");
        }
    }

    #[test]
    fn reference_errors_are_located() {
        let e = load_source("x.yaml", "name: x\nselftest:\n  floor: 1.5\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("(0, 1]"), "{e}");
        let src = "name: x\nselftest:\n  reference:\n    - path: socket.tcp\n      gbps: 9\n      source: lab\n    - path: socket.sctp\n      source: lab\n";
        let e = load_source("x.yaml", src).unwrap_err();
        assert_eq!(e.line, 7, "{e}");
        assert!(e.message.contains("socket.sctp"), "{e}");
        let e = load_source(
            "x.yaml",
            "name: x\nselftest:\n  reference:\n    - path: rdma.send\n      source: \" \"\n",
        )
        .unwrap_err();
        assert!(e.message.contains("needs its `source`"), "{e}");
        let e = load_source(
            "x.yaml",
            "name: x\nselftest:\n  reference:\n    - path: rdma.send\n      gbps: -3\n      source: lab\n",
        )
        .unwrap_err();
        assert!(e.message.contains("gbps -3"), "{e}");
        // An unknown key inside an entry: line and column from the parser.
        let e = load_source(
            "x.yaml",
            "name: x\nselftest:\n  reference:\n    - path: rdma.send\n      source: lab\n      gbs: 3\n",
        )
        .unwrap_err();
        assert_eq!(e.line, 6, "{e}");
    }
}
