//! The `daqtune` command: flags in, engine calls, text out. What the commands do is in
//! `daqtune-engine`; this crate holds the command line and the terminal.

mod cli;
mod commands;
mod legacy;
mod rdma_cmd;
mod report_cmd;
mod selftest_cmd;

use clap::{CommandFactory, Parser};
use cli::{Cli, Command};
use commands::TerminalPrompt;
use daqtune_engine::apply;
use std::process::ExitCode;

/// `daqtune [--root DIR] [--profile P] selftest rdma ...`: the helper's flags follow the
/// engine name, so this is parsed by hand (see `legacy::split_rdma_invocation`).
fn rdma(g: cli::GlobalArgs, args: Vec<String>) -> ExitCode {
    match rdma_cmd::run_rdma(&g, &args) {
        Ok(c) => ExitCode::from(c),
        Err(e) => {
            eprintln!("daqtune: {e}");
            ExitCode::from(2)
        }
    }
}

fn main() -> ExitCode {
    // First: the first GPU probe of a boot may start this executable as its CUDA child.
    daqtune_probe::gpu::serve_cuda_probe_child();
    let argv = legacy::translate_legacy(std::env::args().collect());
    // The RDMA engine is a separate executable with its own flags (see rdma_cmd::RdmaArgs).
    if let Some((g, args)) = legacy::split_rdma_invocation(&argv) {
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
    let g = &cli.global;
    let result: anyhow::Result<u8> = (|| {
        Ok(match &cli.command {
            Command::Check(a) => commands::check(g, a)?,
            Command::Explain(a) => commands::explain(a)?,
            Command::Profiles(a) => commands::profiles(a)?,
            Command::Plan(a) => commands::plan(g, a)?,
            Command::Apply(a) => apply::run_apply(&g.engine(), &a.engine(), &mut TerminalPrompt)?,
            Command::Revert(a) => apply::run_revert(&g.engine(), &a.engine(), &mut TerminalPrompt)?,
            Command::Generate(a) => {
                apply::run_generate(&g.engine(), &a.engine(), &mut std::io::stdout())?
            }
            Command::Selftest(a) => selftest_cmd::run(g, a)?,
            Command::Topo(a) => commands::topo(g, a)?,
            Command::Qualify(a) => {
                daqtune_engine::qualify::run(&g.engine(), &a.engine(), &mut std::io::stdout())?
            }
            Command::Snapshot(a) => commands::snapshot(g, a)?,
            Command::Diff(a) => commands::diff(g, a)?,
            Command::Report(a) => report_cmd::run(g, a)?,
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
