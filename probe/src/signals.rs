//! Termination signals (SIGINT, SIGTERM, SIGHUP: an ssh session that drops) routed to a
//! handler, for the runs that must clean up when interrupted (the self-tests restore the
//! network, snapshot removes its temp tree).

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
