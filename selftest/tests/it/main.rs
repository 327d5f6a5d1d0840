//! The one integration-test binary of this crate (issue 44): each former tests/NAME.rs is a
//! module here; `cargo test -p daqtune-selftest --test it NAME::` runs one of them.

mod batching_cli;
mod ethtool_netlink_live;
mod find_max_cli;
mod gpu_sink_cli;
mod gpu_sink_fixture;
mod socket_e2e;

/// The self-test binary of this build, as a command to run.
fn bin() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_daqtune-selftest"))
}
