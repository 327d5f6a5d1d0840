//! The one integration-test binary of this crate (issue 44): each former tests/NAME.rs is a
//! module here; `cargo test -p daqtune --test it NAME::` runs one of them.

mod appconfig;
mod apply_cli;
mod common;
mod fleet;
mod fleet_support;
mod fleet_tools;
mod foundation;
mod golden;
mod gpu;
mod hardening_h23;
mod import_cli;
mod outputs;
mod pci_checks;
mod qualify;
mod qualify_subset;
mod recorded_h100_issue26;
mod selftest_batching_cli;
mod selftest_cli;
mod selftest_find_max_cli;
mod selftest_gpu_sink_cli;
mod selftest_rdma;
mod selftest_socket_e2e;
mod snapshot;
mod status_gpu_cli;
mod terminal_escapes;

// Shared with the engine's tests: the red team's hostile hosts, and the host roots the
// engine's own unit tests build.
#[path = "../../../tests/support/redteam.rs"]
mod redteam;
#[path = "../../../engine/src/cmd/apply/testroot.rs"]
mod testroot;

/// The stand-alone self-test binary of this build (src/bin/daqtune-selftest.rs: built-in
/// defaults, no profile), as a command to run (`DAQTUNE_TEST_BIN_DIR`: common::bin).
fn selftest_bin() -> std::process::Command {
    std::process::Command::new(common::built_bin(
        "daqtune-selftest",
        env!("CARGO_BIN_EXE_daqtune-selftest"),
    ))
}
