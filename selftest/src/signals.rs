//! SIGINT / SIGTERM / SIGHUP (an ssh session that drops) turn into a flag the run loop polls, so an interrupted self-test stops its
//! traffic and restores the network like a normal end. The handler only stores an atomic
//! (async-signal-safe); everything else happens on the normal path.

use std::sync::atomic::{AtomicI32, Ordering};

static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    PENDING.store(sig, Ordering::SeqCst);
}

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP (idempotent).
pub fn install() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: sigaction is plain data, zeroed is a valid empty mask; the handler only
        // performs an atomic store, which is async-signal-safe.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            // Restart interrupted syscalls: the loops poll the flag themselves.
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The last signal received, if any.
pub fn pending() -> Option<i32> {
    match PENDING.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Shell-style exit status for a signal (128 + number).
pub fn exit_code(sig: i32) -> i32 {
    128 + sig
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        assert_eq!(exit_code(libc::SIGINT), 130);
        assert_eq!(exit_code(libc::SIGTERM), 143);
    }
}
