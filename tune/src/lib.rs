//! daqtune: checks, profiles, plans, apply/revert and reports for GPU + NIC DAQ hosts.
//!
//! Data flows one way: facts (`daqtune-probe`) -> verdicts ([`checks`]) -> reports
//! ([`report`]). The binary in `main.rs` only parses the command line and dispatches here.

pub mod appconfig;
pub mod checks;
pub mod cli;
pub mod commands;
pub mod cores;
pub mod diff;
pub mod gate;
pub mod profile;
pub mod report;
pub mod selftest_cmd;
pub mod snapshot;
pub mod verdict;
