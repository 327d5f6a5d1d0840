//! `daqtune report`'s front end: the settings the timer's /etc/default/daqtune passes as
//! environment (the `DAQTUNE_REPORT_*` ones are clap's `env` on `cli::ReportArgs`;
//! `DAQTUNE_PROFILE` here), and the `--interval` loop of the container. One run is the
//! engine's (`daqtune_engine::fleet::report_cmd::run_once`).

use crate::cli::{GlobalArgs, ReportArgs};
use crate::{out, sig};
use daqtune_engine::fleet::report_cmd;
use daqtune_engine::UsageError;
use std::time::Duration;
use std::time::Instant;

pub fn run(g: &GlobalArgs, a: &ReportArgs) -> Result<u8, UsageError> {
    // DAQTUNE_PROFILE, as for every command, is in `g` (cli::GlobalArgs::over).
    let g = g.engine();
    let opts = a.engine();
    // Nothing to write, or nothing to record GPU facts into, is refused before any run.
    report_cmd::validate(&g, &opts)?;
    match a.interval {
        Some(every) if !a.once => repeat(every),
        _ => {
            let r = report_cmd::run_once(&g, &opts)?;
            out::eprint_raw(&said(&r));
            Ok(r.exit_code())
        }
    }
}

/// The run's result and what it wrote on one line, then one line per output that could not
/// be written (stderr: stdout stays free for a caller's own use).
fn said(r: &report_cmd::ReportRun) -> String {
    let pending = if r.pending_reboot.is_empty() {
        "none".to_string()
    } else {
        r.pending_reboot.join(", ")
    };
    let mut s = format!(
        "daqtune report: profile {}, gate {}, pending reboot: {pending}; wrote {}\n",
        r.profile,
        if r.gate_passed { "pass" } else { "fail" },
        if r.wrote.is_empty() {
            "nothing".into()
        } else {
            r.wrote.join(", ")
        }
    );
    for e in &r.failed {
        s.push_str(&format!("daqtune report: {e}\n"));
    }
    s
}

/// Run `daqtune ARGS --once` every `every`. A child per run: NVML, CUDA and the per-process
/// caches start fresh each time, and a run that dies does not end the loop. A usage error
/// (exit 2) does: it would repeat forever.
///
/// The loop never leaves a run behind: SIGTERM, SIGINT or SIGHUP is passed on to the running
/// child, which is waited for before the loop exits with 128 + the signal; a parent killed
/// outright (SIGKILL) takes its child with it (PR_SET_PDEATHSIG, `sig::die_with_parent`).
fn repeat(every: Duration) -> Result<u8, UsageError> {
    let exe = std::env::current_exe()
        .map_err(|e| UsageError::Other(format!("cannot find this executable: {e}")))?;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    sig::watch_termination()
        .map_err(|e| UsageError::Other(format!("cannot watch for signals: {e}")))?;
    let exit = |s: i32| Ok(u8::try_from(128 + s).unwrap_or(255));
    loop {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(&args).arg("--once");
        sig::tie_to_parent(&mut cmd);
        match cmd.spawn() {
            Ok(mut child) => match wait_or_forward(&mut child) {
                Waited::Signalled(s) => return exit(s),
                Waited::Exited(s) if s.code() == Some(2) => return Ok(2),
                Waited::Exited(s) if !s.success() => {
                    out::eprint(&format!("daqtune report: run ended with {s}\n"))
                }
                Waited::Exited(_) => {}
                Waited::Lost(e) => {
                    out::eprint(&format!("daqtune report: waiting for a run: {e}\n"))
                }
            },
            Err(e) => out::eprint(&format!("daqtune report: cannot start a run: {e}\n")),
        }
        let next = Instant::now() + every;
        while let Some(left) = next.checked_duration_since(Instant::now()) {
            if let Some(s) = sig::pending() {
                return exit(s);
            }
            std::thread::sleep(left.min(POLL));
        }
    }
}

/// How often the loop looks at its child and its signals.
const POLL: Duration = Duration::from_millis(50);

enum Waited {
    Exited(std::process::ExitStatus),
    /// A termination signal came; it was passed on and the child reaped.
    Signalled(i32),
    Lost(std::io::Error),
}

fn wait_or_forward(child: &mut std::process::Child) -> Waited {
    loop {
        if let Some(s) = sig::pending() {
            sig::send(child.id(), s);
            // A stopped run (SIGSTOP, a debugger let go) would hold the signal pending and
            // this wait forever: as the shell's `kill` of a job, it is continued.
            sig::send(child.id(), libc::SIGCONT);
            let _ = child.wait();
            return Waited::Signalled(s);
        }
        match child.try_wait() {
            Ok(Some(s)) => return Waited::Exited(s),
            Ok(None) => std::thread::sleep(POLL),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Waited::Lost(e);
            }
        }
    }
}
