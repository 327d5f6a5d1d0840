//! The `daqtune` command: flags in, engine calls, text out. What the commands do is in
//! `daqtune-engine`; this crate holds the command line and the terminal.

mod cli;
mod commands;
mod legacy;
mod man;
mod out;
mod rdma_cmd;
mod report_cmd;
mod selftest_cli;
mod selftest_cmd;
mod sig;

use clap::{CommandFactory, Parser};
use cli::{Cli, Command};
use commands::TerminalPrompt;
use daqtune_engine::{apply, UsageError};
use std::io::IsTerminal;
use std::process::ExitCode;

/// `daqtune [--root DIR] [--profile P] selftest rdma ...`: the helper's flags follow the
/// engine name, so this is parsed by hand (see `legacy::split_rdma_invocation`).
fn rdma(g: cli::GlobalArgs, args: Vec<String>) -> ExitCode {
    match rdma_cmd::run_rdma(&g, &args) {
        Ok(c) => out::finish(c),
        Err(e) => {
            out::eprint(&format!("daqtune: {e}\n"));
            out::finish(2)
        }
    }
}

/// tune_system.py's `--set NAME` as its users' boot scripts ran it: on any host (where no
/// built-in profile matches, `generic-dgpu`, as `check` falls back to), and with no
/// installed daqtune binary to set it again at boot, the runtime change alone, said on
/// stderr with how to make it persistent.
fn tune_system_set(
    g: &mut daqtune_engine::GlobalOptions,
    opts: &mut apply::ApplyOptions,
) -> Result<(), UsageError> {
    if g.profile.is_none() && !apply::detects_profile(g)? {
        out::eprint("daqtune: no built-in profile matches this host: using generic-dgpu, as `daqtune check` does (pass --profile to choose)\n");
        g.profile = Some("generic-dgpu".into());
    }
    if opts.sel.exe.is_none() && !opts.sel.persist_only && apply::installed_exe(g)?.is_none() {
        opts.sel.runtime_only = true;
        out::eprint(&format!(
            "daqtune: {}\n",
            apply::runtime_only_note(&opts.sel.only.join(","))
        ));
    }
    Ok(())
}

/// The environment variables clap reads (`DAQTUNE_REPORT_*`): one set but empty, as
/// /etc/default/daqtune writes them, means unset (docs/fleet.md), not "a value is required".
fn drop_empty_settings() {
    let empty: Vec<std::ffi::OsString> = std::env::vars_os()
        .filter(|(k, v)| v.is_empty() && k.to_string_lossy().starts_with("DAQTUNE_"))
        .map(|(k, _)| k)
        .collect();
    for k in empty {
        // Before any thread starts: nothing else reads the environment meanwhile.
        std::env::remove_var(k);
    }
}

fn main() -> ExitCode {
    // First: the first GPU probe of a boot may start this executable as its CUDA child.
    daqtune_probe::gpu::serve_cuda_probe_child();
    drop_empty_settings();
    // A profile's deprecated keys, said once each, escaped like every message (out::eprint).
    daqtune_engine::commands::set_notice_sink(|n| out::eprint(&format!("daqtune: {n}\n")));
    let argv = legacy::translate_legacy(std::env::args().collect());
    // The RDMA engine is a separate executable with its own flags (see rdma_cmd::RdmaArgs).
    if let Some((g, args)) = legacy::split_rdma_invocation(&argv) {
        return rdma(g, args);
    }
    let mut cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => {
            // clap's --help/--version are not errors; they go to stdout, checked like any
            // other output (a help piped into `head` or written to a full disk).
            if e.use_stderr() {
                if std::io::stderr().is_terminal() {
                    out::eprint_raw(&e.render().ansi().to_string());
                } else {
                    out::eprint(&e.render().to_string());
                }
                return out::finish(2);
            }
            if std::io::stdout().is_terminal() {
                out::print(&e.render().ansi().to_string());
            } else {
                out::print(&e.render().to_string());
            }
            return out::finish(0);
        }
    };
    cli.normalize();
    let g = &cli.command.globals().over(&cli.global);
    let mut stdout = out::Stdout;
    let result: Result<u8, UsageError> = match &cli.command {
        Command::Check(a) => commands::check(g, a),
        Command::Explain(a) => commands::explain(a),
        Command::Profiles(a) => commands::profiles(a),
        Command::Plan(a) => commands::plan(g, a),
        Command::Apply(a) => {
            // Apply and revert quote host data (old file contents, paths): escaped for the
            // terminal like every text output without colours of its own (out::TerminalSafe).
            let mut o = out::TerminalSafe::new(out::Stdout);
            let mut opts = a.engine();
            let mut ge = g.engine();
            if a.tune_system_set {
                if let Err(e) = tune_system_set(&mut ge, &mut opts) {
                    out::eprint(&format!("daqtune: {e}\n"));
                    return out::finish(2);
                }
            }
            match daqtune_engine::status::expand_drifted(&ge, &opts.sel, &opts.state_dir) {
                Ok(Some(sel)) => {
                    opts.sel = sel;
                    // Refusals and failures quote journal paths and host names: escaped too.
                    let mut e = out::TerminalSafe::new(std::io::stderr());
                    let mut ev = daqtune_render::apply::Text::new(&mut o, &mut e);
                    apply::run_apply(&ge, &opts, &mut TerminalPrompt, &mut ev)
                }
                Ok(None) => {
                    out::print("nothing drifted: every setting daqtune applied reads as applied\n");
                    Ok(0)
                }
                Err(e) => Err(e),
            }
        }
        Command::Revert(a) => {
            let mut o = out::TerminalSafe::new(out::Stdout);
            let mut e = out::TerminalSafe::new(std::io::stderr());
            apply::run_revert(
                &g.engine(),
                &a.engine(),
                &a.part(),
                &mut TerminalPrompt,
                &mut daqtune_render::apply::Text::new(&mut o, &mut e),
            )
        }
        // The artifact is installed verbatim by whoever reads it: not escaped.
        Command::Generate(a) => apply::run_generate(
            &g.engine(),
            &a.engine(),
            &mut daqtune_render::apply::Text::new(&mut stdout, &mut std::io::stderr()),
        ),
        Command::Status(a) => commands::status(g, a),
        Command::TrialVerify(a) => {
            let mut o = out::TerminalSafe::new(out::Stdout);
            let mut e = out::TerminalSafe::new(std::io::stderr());
            apply::run_trial_verify(
                &g.engine(),
                a.state_dir.as_deref(),
                &mut daqtune_render::apply::Text::new(&mut o, &mut e),
            )
        }
        Command::Gpu(a) => commands::gpu(g, a),
        Command::Nic(a) => commands::nic(g, a),
        Command::Selftest(a) => selftest_cmd::run(g, &a.args),
        Command::Topo(a) => commands::topo(g, a),
        Command::Qualify(a) => commands::qualify(g, a),
        Command::Snapshot(a) => commands::snapshot(g, a),
        Command::Diff(a) => commands::diff(g, a),
        Command::Import(a) => commands::import(a),
        Command::Report(a) => report_cmd::run(g, a),
        Command::Completions { shell } => {
            clap_complete::generate(*shell, &mut Cli::command(), "daqtune", &mut stdout);
            Ok(0)
        }
        Command::Man => {
            // Stdout never fails to its caller (see `out`): a failed write is reported by
            // `finish`, so the renderer's own I/O result carries nothing more.
            let _ = man::render(&mut stdout);
            Ok(0)
        }
    };
    match result {
        Ok(code) => out::finish(code),
        Err(e) => {
            // The message already holds its cause: `{e:#}` would print an I/O error twice.
            out::eprint(&format!("daqtune: {e}\n"));
            out::finish(2)
        }
    }
}
