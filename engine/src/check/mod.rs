//! One `check` run over the registry and what it yields: `commands` evaluates the checks and
//! chooses the profile, `report` holds the report and its text, `run_info` what a run says about itself (pending reboot, capabilities). Layers 4-5 of
//! docs/architecture.md: above the tunables, below the executor's callers and the renderers.

pub mod commands;
pub mod report;
pub mod run_info;
