//! The one integration-test binary of this crate (issue 44): each former tests/NAME.rs is a
//! module here; `cargo test -p daqtune-selftest --test it NAME::` runs one of them. The tests
//! that run the `daqtune-selftest` binary live with it and its command line, in the `daqtune`
//! crate (tune/tests/it/selftest_*.rs).

mod ethtool_netlink_live;
mod gpu_sink_fixture;
