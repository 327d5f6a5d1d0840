//! CPU and latency figures of a self-test result.

use serde::{Deserialize, Serialize};

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub samples: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// CPU time a thread used, user + system.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadCpu {
    /// Which role the thread had (`tx`, `rx`, ...).
    pub role: String,
    /// CPU it was pinned to, if any.
    pub cpu: Option<usize>,
    /// Seconds of CPU time.
    pub cpu_s: f64,
    /// cpu_s / wall seconds of the measurement (1.0 = one core fully busy).
    pub utilization: f64,
}
