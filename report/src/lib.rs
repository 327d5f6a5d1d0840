//! The reports that cross a process boundary, defined once: what one daqtune process writes as
//! JSON and another parses.
//!
//! - [`selftest`]: `daqtune.selftest/v1`, the self-test's report (`daqtune selftest --format
//!   json`), which `daqtune qualify` reads from its self-test children and the DPDK and RDMA
//!   launchers build from their helpers' output; with its parts ([`assessment`], [`gpu`],
//!   [`findmax`], [`metrics`]).
//! - [`dpdk`]: what the `daqtune-dpdk` helper prints (`daqtune.selftest.dpdk/v1`).
//! - [`rdma`]: what the `daqtune-rdma` helper prints (the self-test report with its `rdma`
//!   section).
//!
//! Only records and their constructors live here; the judgement, the renderings and the engines
//! are the self-test's (`daqtune-selftest`). Every type round-trips (serialize, parse, equal):
//! the tests below, and a report recorded on a real host.

pub mod assessment;
pub mod dpdk;
pub mod findmax;
pub mod gpu;
pub mod metrics;
pub mod rdma;
pub mod selftest;

#[cfg(test)]
mod tests;
