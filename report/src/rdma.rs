//! What `daqtune-rdma` prints with `--format json`: the self-test report (`daqtune.selftest/v1`)
//! with an `rdma` section beside `results`, one entry per run (queue pairs, completion queues,
//! port counters). `daqtune selftest rdma`'s launcher parses the report part, assesses it and
//! relays the `rdma` section as the helper wrote it: no other process reads inside it, so the
//! launcher holds it as JSON and the helper fills it with its own detail type.

use crate::selftest::Report;
use serde::{Deserialize, Serialize};

/// The helper's JSON output. `D` is the `rdma` section: the helper's detail records when it
/// writes, opaque JSON where the launcher relays it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RdmaReport<D = serde_json::Value> {
    #[serde(flatten)]
    pub report: Report,
    /// Absent in a report that has no RDMA section (never from the helper itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma: Option<D>,
}
