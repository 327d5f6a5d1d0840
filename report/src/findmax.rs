//! `--find-max`'s records in a self-test result: its trials (`results[].trials[]`) and its
//! settings and conclusion (`results[].search`).

use crate::metrics::ThreadCpu;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Which part of the search a trial belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The unpaced first trial.
    Probe,
    Search,
    Confirm,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Probe => "probe",
            Phase::Search => "search",
            Phase::Confirm => "confirm",
        }
    }
}

/// What the found rate is compared with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    pub gbps: f64,
    /// How the limit is known, in words (`link speed ...` or `unpaced send rate ...`).
    pub source: String,
}

/// One trial in the report (`results[].trials[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    pub phase: Phase,
    /// Pacing asked for, Gb/s; `null` for the unpaced probe.
    pub asked_gbps: Option<f64>,
    /// Payload the sender put on the path, Gb/s.
    pub offered_gbps: f64,
    /// Payload received and verified, Gb/s (the rate achieved).
    pub achieved_gbps: f64,
    pub duration_s: f64,
    /// Which rule set the length: `floor`, `buffer` (BUFFER_FILLS x the receive buffer at
    /// this rate), `cap`, or `confirm` (CONFIRM_FLOORS x the floor).
    pub length_rule: String,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub loss_pct: f64,
    pub integrity_errors: u64,
    /// CPU use by CPU number (threads on one CPU added), 1.0 = one core busy.
    pub cpu_per_core: BTreeMap<String, f64>,
    pub threads: Vec<ThreadCpu>,
    pub passed: bool,
    /// Why it failed (absent when it passed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// The search's settings and conclusion (`results[].search`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub loss_allowed_pct: f64,
    pub precision_pct: f64,
    /// Upper start bound (the probe's offered rate, capped by the link) and the resolution
    /// the bisection stopped at, Gb/s.
    pub start_upper_gbps: f64,
    pub resolution_gbps: f64,
    /// Shortest trial, s; longer where BUFFER_FILLS x the receive buffer needs it.
    pub trial_floor_s: f64,
    /// Receive buffer the trial lengths were computed from, bytes.
    pub buffer_bytes: Option<u64>,
    pub limit: Option<Limit>,
    /// max_loss_free_gbps / limit.gbps.
    pub fraction_of_limit: Option<f64>,
    /// Confirmation trials in a row the result passed (the self-test's `CONFIRM_RUNS`).
    #[serde(default)]
    pub confirm_runs: usize,
    /// Trials the search could make at most, probe and confirmations included
    /// (`--max-trials`); 0 in reports written before the setting existed.
    #[serde(default)]
    pub max_trials: usize,
    /// The loss edge the claim was kept below (the self-test's `findmax::Edge`): lowest rate
    /// that lost, lowest and highest rate carried by paced trials that lost, their spread,
    /// the base and the margin (percent) below it.
    #[serde(default)]
    pub lowest_lossy_gbps: Option<f64>,
    #[serde(default)]
    pub carried_gbps: Option<(f64, f64)>,
    #[serde(default)]
    pub spread_pct: f64,
    #[serde(default)]
    pub base_gbps: Option<f64>,
    #[serde(default)]
    pub margin_pct: f64,
    /// Claims that failed their confirmation before the result.
    #[serde(default)]
    pub backoffs: usize,
    /// How the search ended and what the rate means, in words.
    pub ended: String,
}
