//! daqtune's engine: checks, profiles, plans, apply/revert and reports for GPU + NIC DAQ hosts.
//!
//! Data flows one way: facts (`daqtune-probe`) -> verdicts ([`checks`]) -> reports
//! ([`report`]). This crate parses no command line: the `daqtune` binary (tune/) defines the
//! flags and calls in here with plain option structs.

pub mod appconfig;
pub mod apply;
pub mod checks;
pub mod commands;
pub mod cores;
pub mod diff;
pub mod facts;
pub mod gate;
pub mod profile;
pub mod qualify;
pub mod report;
pub mod snapshot;
pub mod sys;
pub mod topo;
pub mod verdict;

pub use commands::{GlobalOptions, UsageError};
