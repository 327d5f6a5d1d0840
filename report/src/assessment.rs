//! How a self-test result measures against its line rate and the profile's reference
//! (`results[].reference`; `daqtune_selftest::reference::assess` makes it, `daqtune qualify` gates on it).

use serde::{Deserialize, Serialize};

/// One result measured against its line rate and its reference (`results[].reference` in the
/// report; the qualification gate reads it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    /// Link speed, Mb/s; absent when the link has none.
    pub link_mbps: Option<u64>,
    /// How the speed is known, or why there is none.
    pub link_source: String,
    pub mtu: Option<u32>,
    /// Payload Gb/s the link carries in this mode and shape (the PCIe link's rate where that
    /// is lower).
    pub line_gbps: Option<f64>,
    /// What the port's PCIe link carries, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_gbps: Option<f64>,
    pub of_line_pct: Option<f64>,
    /// The reference compared with (capped at `line_gbps`: no port carries more than its line).
    pub reference_gbps: Option<f64>,
    /// The profile's figure before the cap.
    pub reference_stated_gbps: Option<f64>,
    pub reference_source: Option<String>,
    pub of_reference_pct: Option<f64>,
    /// Share of the reference the run had to reach, and that rate.
    pub floor: Option<f64>,
    pub floor_gbps: Option<f64>,
    /// Gb/s missing to the floor (`below` only).
    pub shortfall_gbps: Option<f64>,
    /// `met`, `below` or `none` (no reference compared: no link speed, no reference for this
    /// shape, nothing measured).
    pub verdict: String,
    /// The verdict in one sentence.
    pub why: String,
}
