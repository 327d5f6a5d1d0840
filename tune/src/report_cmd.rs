//! `daqtune report`'s front end: the settings the timer's /etc/default/daqtune passes as
//! environment (the `DAQTUNE_REPORT_*` ones are clap's `env` on `cli::ReportArgs`;
//! `DAQTUNE_PROFILE` here), and the `--interval` loop of the container. One run is the
//! engine's (`daqtune_engine::fleet::report_cmd::run_once`).

use crate::cli::{GlobalArgs, ReportArgs};
use daqtune_engine::fleet::report_cmd;
use daqtune_engine::UsageError;
use std::time::Duration;

pub fn run(g: &GlobalArgs, a: &ReportArgs) -> Result<u8, UsageError> {
    let mut g = g.engine();
    if g.profile.is_none() {
        // /etc/default/daqtune names the profile the same way for every command it feeds.
        g.profile = std::env::var("DAQTUNE_PROFILE")
            .ok()
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty());
    }
    let opts = a.engine();
    // Nothing to write, or nothing to record GPU facts into, is refused before any run.
    report_cmd::validate(&g, &opts)?;
    match a.interval {
        Some(every) if !a.once => repeat(every),
        _ => report_cmd::run_once(&g, &opts, &mut std::io::stderr()),
    }
}

/// Run `daqtune ARGS --once` every `every`. A child per run: NVML, CUDA and the per-process
/// caches start fresh each time, and a run that dies does not end the loop. A usage error
/// (exit 2) does: it would repeat forever.
fn repeat(every: Duration) -> Result<u8, UsageError> {
    let exe = std::env::current_exe()
        .map_err(|e| UsageError::Other(format!("cannot find this executable: {e}")))?;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    loop {
        match std::process::Command::new(&exe)
            .args(&args)
            .arg("--once")
            .status()
        {
            Ok(s) if s.code() == Some(2) => return Ok(2),
            Ok(s) if !s.success() => eprintln!("daqtune report: run ended with {s}"),
            Ok(_) => {}
            Err(e) => eprintln!("daqtune report: cannot start a run: {e}"),
        }
        std::thread::sleep(every);
    }
}
