//! What the engine knows and decides before it changes anything: the facts of a host (read
//! once), the profile and DAQIRI configuration asked for, the context the tunables share, the
//! verdicts, and the plan's vocabulary (`plan::Action`, `tunable::Tunable`). Layers 0-2 of
//! docs/architecture.md; nothing here writes to a host or knows the list of tunables.

pub mod appconfig;
pub mod capture;
pub mod causes;
pub mod context;
pub mod cores;
pub mod facts;
pub mod gate;
pub mod known_states;
pub mod plan;
pub mod profile;
pub mod suggest;
pub mod tunable;
pub mod verdict;
