//! Terminal text: how the CLI shows what the engine returns.
//!
//! The engine's commands return data (a `Status`, a `GpuView`, a `Plan`, an apply's events) and
//! machine formats with a schema (JSON, JUnit, Prometheus, NFD, SVG); the words a person reads
//! on a terminal are written here, so wording changes touch the CLI only (issue 44).

pub mod apply;
pub mod gpu;
pub mod nic;
pub mod plan;
pub mod qualify;
pub mod report;
pub mod status;
pub mod topo;
