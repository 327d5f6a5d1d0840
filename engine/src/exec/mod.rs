//! The executor: carries out a [`crate::model::plan::Plan`] through the writers of [`crate::hostio`]
//! (journal first, then the change, then its read-back: [`apply`]) and replays journals
//! backwards ([`revert`]). Takes a plan already made; choosing the profile, planning, the lock
//! and the printed report are the commands' ([`crate::cmd::apply`]).

pub mod apply;
pub mod port_reset;
pub mod revert;
pub mod trial;
