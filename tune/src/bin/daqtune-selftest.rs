//! Stand-alone self-test runner with built-in defaults (the `daqtune selftest` subcommand is
//! the same code with the active profile's values). It lives in this crate because the
//! command line does: the selftest library has no argument parser (issue 44).

// The same flag definitions as `daqtune selftest`, compiled into this binary too (a binary
// cannot reach the other's modules, and this crate has no library target).
#[path = "../selftest_cli.rs"]
mod selftest_cli;

use clap::Parser;
use daqtune_selftest::command::{run, Defaults};
use selftest_cli::SelftestArgs;

#[derive(Parser)]
#[command(
    name = "daqtune-selftest",
    version,
    about = "daqtune data-path self-test"
)]
struct Cli {
    #[command(flatten)]
    args: SelftestArgs,
}

fn main() {
    let cli = Cli::parse();
    std::process::exit(run(&cli.args.options(), &Defaults::default()));
}
