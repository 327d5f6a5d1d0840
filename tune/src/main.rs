use clap::{CommandFactory, Parser};
use daqtune::cli::{translate_legacy, Cli, Command};
use daqtune::commands;
use std::process::ExitCode;

/// `daqtune [--root DIR] [--profile P] selftest rdma ...`: the helper's flags follow the
/// engine name, so this is parsed by hand (see `cli::split_rdma_invocation`).
fn rdma(g: daqtune::cli::GlobalArgs, args: Vec<String>) -> ExitCode {
    match daqtune::selftest_cmd::run_rdma(&g, &args) {
        Ok(c) => ExitCode::from(c),
        Err(e) => {
            eprintln!("daqtune: {e}");
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    let argv = translate_legacy(std::env::args().collect());
    // The RDMA engine is a separate executable with its own flags (see selftest_cmd::RdmaArgs).
    if let Some((g, args)) = daqtune::cli::split_rdma_invocation(&argv) {
        return rdma(g, args);
    }
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            // clap's --help/--version are not errors.
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let result: anyhow::Result<u8> = (|| {
        Ok(match &cli.command {
            Command::Check(a) => commands::check(&cli.global, a)?,
            Command::Explain(a) => commands::explain(a)?,
            Command::Profiles(a) => commands::profiles(a)?,
            Command::Plan(a) => daqtune::apply::run_plan(&cli.global, a, &mut std::io::stdout())?,
            Command::Apply(a) => daqtune::apply::run_apply(&cli.global, a)?,
            Command::Revert(a) => daqtune::apply::run_revert(&cli.global, a)?,
            Command::Generate(a) => {
                daqtune::apply::run_generate(&cli.global, a, &mut std::io::stdout())?
            }
            Command::Selftest(a) => daqtune::selftest_cmd::run(&cli.global, a)?,
            Command::Topo(a) => daqtune::topo::run(&cli.global, a)?,
            Command::Qualify(a) => daqtune::qualify::run(&cli.global, a)?,
            Command::Snapshot(a) => commands::snapshot(&cli.global, a)?,
            Command::Diff(a) => commands::diff(&cli.global, a)?,
            Command::Completions { shell } => {
                clap_complete::generate(
                    *shell,
                    &mut Cli::command(),
                    "daqtune",
                    &mut std::io::stdout(),
                );
                0
            }
            Command::Man => {
                clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?;
                0
            }
        })
    })();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("daqtune: {e:#}");
            ExitCode::from(2)
        }
    }
}
