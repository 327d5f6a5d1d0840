//! daqtune data-path self-test: engines (socket now; DPDK and RDMA behind the same trait),
//! the payload format, metrics, reports, and the network topologies they run over.
//!
//! See docs/selftest.md for the payload format, the report schema and the topologies.

pub mod command;
pub mod cpuplan;
pub mod engine;
pub mod error;
pub mod ethtool;
pub mod findmax;
pub mod flagnum;
pub mod gpu_sink;
pub mod kbatch;
pub mod launch;
pub mod metrics;
pub mod netlink;
pub mod netns;
pub mod payload;
pub mod peer;
pub mod portlink;
pub mod rdma_netlink;
pub mod reference;
pub mod report;
pub mod socket;
pub mod sys;
pub mod topology;

pub use engine::{Engine, Mode, RunControl, RunSpec};
pub use error::{Error, Result};
/// The DPDK launcher's path before the launchers were put side by side in [`launch`].
pub use launch::dpdk as dpdk_launcher;
pub use report::{judge, EngineResult, Render, Report, Status, Thresholds};
