//! The bottom layer of every change daqtune makes: the writers that change a host and read
//! the change back ([`setters`]), the journal that records each original so `revert` can put it
//! back ([`journal`]), and GPU control behind a trait ([`gpu`]). Knows no plan, no profile and
//! no tunable: the facts (GPU lock judgement, the journal's GPU locks), the planners and the
//! executor ([`crate::exec`]) all build on it.

pub mod gpu;
pub mod journal;
pub mod lock;
pub mod parts;
pub mod setters;

/// What to add to an I/O error when root is the reason: `permission denied` for a user who
/// is not root (the state directory, sysfs and /etc are root's), "; run as root (sudo
/// daqtune ...)". Nothing for root, whose refusals have other reasons (lockdown, a read-only
/// file system), or for other errors.
pub fn root_hint(e: &std::io::Error) -> &'static str {
    if e.kind() == std::io::ErrorKind::PermissionDenied && !daqtune_probe::sys::is_root() {
        "; run as root (sudo daqtune ...): daqtune's state directory, sysfs and the boot files are root's"
    } else {
        ""
    }
}
