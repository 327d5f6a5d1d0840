//! The one integration-test binary of this crate (issue 44): each former tests/NAME.rs is a
//! module here; `cargo test -p daqtune-selftest --test it NAME::` runs one of them.

mod batching_cli;
mod ethtool_netlink_live;
mod find_max_cli;
mod gpu_sink_cli;
mod gpu_sink_fixture;
mod socket_e2e;
