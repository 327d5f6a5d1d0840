use clap::{CommandFactory, Parser};
use daqtune::cli::{translate_legacy, Cli, Command};
use daqtune::commands;
use std::process::ExitCode;

fn main() -> ExitCode {
    let argv = translate_legacy(std::env::args().collect());
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
            Command::Selftest(a) => daqtune::selftest_cmd::run(&cli.global, a)?,
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
