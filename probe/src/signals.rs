//! Termination signals (SIGINT, SIGTERM, SIGHUP: an ssh session that drops) routed to a
//! handler, for the runs that must clean up when interrupted (the self-tests restore the
//! network, snapshot removes its temp tree): a flag set by the handler, or a thread of its own
//! ([`on_termination_thread`]) for a cleanup that cannot run inside a handler.

/// Installs `handler` for SIGINT, SIGTERM and SIGHUP with `SA_RESTART` (interrupted system
/// calls resume: the callers poll their own flag or pipe). The handler must be
/// async-signal-safe: an atomic store or a write(2).
pub fn on_termination(handler: extern "C" fn(libc::c_int)) -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: sigaction is plain data and zeroed is a valid empty mask; the handler is an
        // `extern "C" fn(c_int)`, the signature sa_sigaction expects without SA_SIGINFO.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The termination signal received since [`watch_termination`] (0: none). One flag per
/// process: the self-tests, their helpers and `report --interval` all poll it.
static PENDING: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn set_pending(sig: libc::c_int) {
    PENDING.store(sig, std::sync::atomic::Ordering::SeqCst);
}

/// Routes SIGINT, SIGTERM and SIGHUP to the flag that [`pending`] reads: a run that polls it
/// between steps ends cleanly instead of dying half-way.
pub fn watch_termination() -> std::io::Result<()> {
    on_termination(set_pending)
}

/// The termination signal received since [`watch_termination`], if any.
pub fn pending() -> Option<i32> {
    match PENDING.load(std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The shell's exit status for a run ended by signal `sig`: 128 + its number.
pub fn exit_code(sig: i32) -> i32 {
    128 + sig
}

/// The write end of [`on_termination_thread`]'s pipe (-1 until installed).
static PIPE_WR: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn to_pipe(sig: libc::c_int) {
    let b = sig as u8;
    // SAFETY: write(2) is async-signal-safe; the byte lives on this stack frame. A full pipe
    // (signals arriving faster than the thread handles them) loses nothing that matters.
    unsafe {
        libc::write(
            PIPE_WR.load(std::sync::atomic::Ordering::SeqCst),
            (&b as *const u8).cast(),
            1,
        );
    }
}

/// Runs `on_signal(sig)` on a thread of its own for every SIGINT, SIGTERM and SIGHUP, for a
/// cleanup that must take locks or touch the file system (nothing a signal handler may do):
/// the handler only writes the signal number to a pipe that the thread reads (the self-pipe
/// pattern). Installed once per process; a later call returns the first one's outcome.
pub fn on_termination_thread(on_signal: fn(i32)) -> std::io::Result<()> {
    static DONE: std::sync::OnceLock<Result<(), (std::io::ErrorKind, String)>> =
        std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let fail = |e: std::io::Error| (e.kind(), e.to_string());
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(fail(std::io::Error::last_os_error()));
        }
        PIPE_WR.store(fds[1], std::sync::atomic::Ordering::SeqCst);
        let rd = fds[0];
        std::thread::Builder::new()
            .name("daqtune-signals".into())
            .spawn(move || read_signals(rd, on_signal))
            .map_err(fail)?;
        on_termination(to_pipe).map_err(fail)
    })
    .clone()
    .map_err(|(kind, msg)| std::io::Error::new(kind, msg))
}

fn read_signals(rd: libc::c_int, on_signal: fn(i32)) {
    loop {
        let mut b = 0u8;
        // SAFETY: reads one byte into a valid buffer from the pipe this module owns.
        let n = unsafe { libc::read(rd, (&mut b as *mut u8).cast(), 1) };
        if n == 1 {
            on_signal(i32::from(b));
            continue;
        }
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_the_shells() {
        // bash(1), EXIT STATUS: "128+n" for a command killed by fatal signal n.
        assert_eq!(exit_code(libc::SIGINT), 130);
        assert_eq!(exit_code(libc::SIGTERM), 143);
        assert_eq!(exit_code(libc::SIGHUP), 129);
    }
}
