//! Stand-alone self-test runner with built-in defaults (the `daqtune selftest` subcommand is
//! the same code with the active profile's values).

use clap::Parser;
use daqtune_selftest::cli::{run, Defaults, SelftestArgs};

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
    std::process::exit(run(&cli.args, &Defaults::default()));
}
