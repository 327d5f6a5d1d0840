//! The one integration-test binary of this crate (issue 44): each former tests/NAME.rs is a
//! module here; `cargo test -p daqtune-dpdk --test it NAME::` runs one of them.

#[cfg(feature = "dpdk")]
mod veth_acceptance;
#[cfg(not(feature = "dpdk"))]
mod without_dpdk;
