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
    daqtune_probe::signals::on_termination(on_signal)
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
