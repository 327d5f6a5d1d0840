//! daqtune: checks, profiles, plans, apply/revert and reports for GPU + NIC DAQ hosts.
pub mod verdict;
