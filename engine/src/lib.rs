//! daqtune's engine: checks, profiles, plans, apply/revert and reports for GPU + NIC DAQ hosts.
//!
//! Data flows one way: host facts ([`facts`], through `daqtune-probe`) -> tunables
//! ([`tunables`]: verdicts and plans) -> the executor ([`exec`], through the writers and the
//! journal of [`hostio`]) and the reports; the commands ([`apply`], [`qualify`],
//! [`fleet::report_cmd`]) sit on top. The top-level modules import each other without a
//! circle, in the layers docs/architecture.md draws (`tests/it/layering.rs` holds them to it).
//! This crate parses no command line: the `daqtune` binary (tune/) defines the flags and
//! calls in here with plain option structs.

pub mod app_profile;
pub mod appconfig;
pub mod capture;
pub mod causes;
pub mod cmd;
pub mod commands;
pub mod context;
pub mod cores;
pub mod diff;
pub mod exec;
pub mod facts;
pub mod fleet;
pub mod gate;
pub mod hostio;
pub mod hostroot;
pub mod import;
pub mod known_states;
pub mod plan;
pub mod profile;
pub mod report;
pub mod run_info;
pub mod snapshot;
pub mod suggest;
pub mod topo;
pub mod tunable;
pub mod tunables;
pub mod verdict;

// The commands live in `cmd/` (their layer); their public paths stay where `tune` and the
// tests name them.
pub use cmd::{apply, gpu_view, nic_view, qualify, status};
pub use commands::{GlobalOptions, UsageError};
