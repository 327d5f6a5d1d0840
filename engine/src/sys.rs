//! The one libc call the engine needs outside the writers (`apply::setters`).

/// Whether this process runs as root (reads then have root's view of sysfs and procfs).
pub fn is_root() -> bool {
    // SAFETY: geteuid takes no arguments, touches no memory and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
