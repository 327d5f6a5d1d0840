//! daqtune's engine: checks, profiles, plans, apply/revert and reports for GPU + NIC DAQ hosts.
//!
//! Data flows one way: host facts ([`facts`], through `daqtune-probe`) -> tunables
//! ([`tunables`]: verdicts and plans) -> the executor ([`exec`], through the writers and the
//! journal of [`hostio`]) and the reports; the commands ([`apply`], [`qualify`],
//! [`fleet::report_cmd`]) sit on top. The top-level modules import each other without a
//! circle, in the layers docs/architecture.md draws (`tests/it/layering.rs` holds them to it).
//! This crate parses no command line: the `daqtune` binary (tune/) defines the flags and
//! calls in here with plain option structs.

pub mod check;
pub mod cmd;
pub mod exec;
pub mod fleet;
pub mod hostio;
pub mod hostroot;
pub mod model;
pub mod tunables;

// The façade: each module keeps the public path `tune` and the tests name
// (`daqtune_engine::plan`, `::apply`, `::report` ...); inside the engine they are named by their
// folder (`crate::model::plan`), which is what tests/it/layering.rs reads.
pub use check::{commands, report, run_info};
pub use cmd::{apply, diff, gpu_view, nic_view, qualify, status, topo};
pub use commands::{GlobalOptions, UsageError};
pub use hostroot::{import, snapshot};
pub use model::{
    appconfig, capture, causes, context, cores, facts, gate, known_states, plan, profile, suggest,
    tunable, verdict,
};
pub use tunables::app_profile;
