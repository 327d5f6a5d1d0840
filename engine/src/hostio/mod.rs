//! The bottom layer of every change daqtune makes: the writers that change a host and read
//! the change back ([`setters`]), the journal that records each original so `revert` can put it
//! back ([`journal`]), and GPU control behind a trait ([`gpu`]). Knows no plan, no profile and
//! no tunable: the facts (GPU lock judgement, the journal's GPU locks), the planners and the
//! executor ([`crate::exec`]) all build on it.

pub mod gpu;
pub mod journal;
pub mod lock;
pub mod parts;
pub mod setters;
