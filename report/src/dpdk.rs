//! What `daqtune-dpdk` prints on stdout (`daqtune.selftest.dpdk/v1`) and its exit codes: the
//! self-test record of the run and the DPDK details beside it. `daqtune selftest dpdk`'s
//! launcher parses exactly this.

use crate::selftest::EngineResult;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Schema of the JSON `daqtune-dpdk` prints on stdout.
pub const OUTPUT_SCHEMA: &str = "daqtune.selftest.dpdk/v1";

/// Exit codes of `daqtune-dpdk` (the launcher in daqtune-selftest maps them).
pub mod exit {
    pub const PASS: i32 = 0;
    pub const FAIL: i32 = 1;
    pub const USAGE: i32 = 2;
    /// Could not run here (no DPDK support compiled in, no hugepages, not root, no ports).
    pub const SKIP: i32 = 3;
    pub const ERROR: i32 = 4;
}

/// Counters of one port after the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PortReport {
    pub role: String,
    pub name: String,
    pub driver: String,
    pub mtu: u16,
    /// Link state after the run (`None` when the driver cannot tell).
    pub link_up: Option<bool>,
    pub ipackets: u64,
    pub opackets: u64,
    pub imissed: u64,
    pub ierrors: u64,
    pub oerrors: u64,
    pub rx_nombuf: u64,
    /// Non-zero extended statistics.
    pub xstats: BTreeMap<String, u64>,
}

/// DPDK-specific facts of a run. Read leniently (a missing field is its default): the launcher
/// keeps whatever an engine of another version said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DpdkDetails {
    pub dpdk_version: String,
    pub eal_args: Vec<String>,
    pub ports: Vec<PortReport>,
    /// `used existing`, `reserved N pages (restored to M)`, ...
    pub hugepages: String,
    /// Frames received that were not self-test traffic (ignored).
    pub foreign_frames: u64,
    /// Packets the TX burst refused and were retried (ring full).
    pub tx_retries: u64,
    /// The veth ends' kernel counters (topology veth): drops here are frames the kernel lost
    /// before af_packet saw them (backlog full while softirq processing was starved).
    pub kernel_interfaces: Vec<IfCounters>,
    /// af_packet sockets' own counters over the run (topology veth): `drops` = ring overflow,
    /// the receiver fell behind.
    pub packet_sockets: Vec<PacketSocketStats>,
    /// Leftover files or directories removed after the run.
    pub removed: Vec<String>,
}

/// What `daqtune-dpdk` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DpdkOutput {
    pub schema: String,
    pub result: EngineResult,
    pub dpdk: Option<DpdkDetails>,
}

impl DpdkOutput {
    pub fn new(result: EngineResult, dpdk: Option<DpdkDetails>) -> Self {
        DpdkOutput {
            schema: OUTPUT_SCHEMA.into(),
            result,
            dpdk,
        }
    }
}

/// Counters of one kernel interface from /proc/net/dev.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IfCounters {
    pub name: String,
    pub rx_packets: u64,
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
}

/// What an AF_PACKET socket of this process counted since the last read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketSocketStats {
    pub iface: String,
    /// Frames the socket saw (delivered to its ring or dropped).
    pub packets: u64,
    /// Frames dropped because the ring was full: the receiver fell behind.
    pub drops: u64,
}
