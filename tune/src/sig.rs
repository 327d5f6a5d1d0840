//! The command line's signal plumbing (the FFI lives here): ending by SIGPIPE as the
//! coreutils do, and the `report --interval` loop's termination signals and child backstop.

use std::process::ExitCode;

/// Ends the process the way `seq | head -1` ends `seq`: killed by SIGPIPE, which the shell
/// does not report. Rust starts with SIGPIPE ignored, so the default action is put back first.
pub fn die_of_sigpipe() -> ExitCode {
    // SAFETY: signal(2) with SIG_DFL and raise(3) take no pointers; nothing else runs on the
    // way out (the caller has flushed what it could).
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // Only reached if the signal could not end the process: the shell's number for it.
    ExitCode::from(128 + libc::SIGPIPE as u8)
}

/// Routes SIGINT, SIGTERM and SIGHUP to probe's one termination flag ([`pending`]).
pub use daqtune_probe::signals::{pending, watch_termination};

/// Sends `sig` to process `pid` (a child this process started and has not reaped yet, so the
/// pid cannot have been reused).
pub fn send(pid: u32, sig: i32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) takes no pointers.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// Makes the child that `cmd` starts die with this process: the kernel sends it SIGTERM when
/// the parent dies, however it dies (SIGKILL included, which no handler sees). A parent that
/// died before the child set this up is seen by `getppid` and the child is not started.
pub fn tie_to_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: the closure runs between fork and exec and makes only async-signal-safe system
    // calls without pointers (prctl(PR_SET_PDEATHSIG), getppid); it allocates nothing on
    // success, and the error path builds an io::Error from an errno or a static string.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}
