//! Temporary trees (a snapshot being packed, one unpacked for `--root`) that go away on every
//! way out of the process, signals included.

use std::path::{Path, PathBuf};

/// A temporary directory removed on every way out of the process: when dropped (a return, an
/// error, a panic's unwinding) and on SIGINT, SIGTERM or SIGHUP, when the process removes every
/// live one and exits with 128 + the signal number (130, 143, 129). A snapshot unpacked for
/// `--root`, and one being packed, live in these.
pub struct TempRoot {
    path: PathBuf,
}

impl TempRoot {
    pub fn new(prefix: &str) -> std::io::Result<TempRoot> {
        cleanup::install()?;
        // Created and registered under the lock: a signal handled meanwhile waits for it and
        // then removes it too.
        let mut live = cleanup::live();
        let path = tempfile::Builder::new().prefix(prefix).tempdir()?.keep();
        live.push(path.clone());
        Ok(TempRoot { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let mut live = cleanup::live();
        live.retain(|p| p != &self.path);
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Signal handling for [`TempRoot`]: probe's signal thread
/// ([`daqtune_probe::signals::on_termination_thread`]) removes the directories and exits. While a
/// writer (unpacking, writing or packing a snapshot) runs, the thread only records the
/// signal: a directory removed while files are still being created in it comes back, so the
/// writer stops at its next checkpoint ([`cleanup::interrupted`]) and the last writer to stop
/// removes the directories and exits.
pub(crate) mod cleanup {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::sync::{Mutex, MutexGuard};

    static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    /// The signal received, 0 when none: what writers poll.
    static PENDING: AtomicI32 = AtomicI32::new(0);
    /// Writers running now.
    static WRITERS: Mutex<usize> = Mutex::new(0);

    pub(super) fn live() -> MutexGuard<'static, Vec<PathBuf>> {
        LIVE.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn writers() -> MutexGuard<'static, usize> {
        WRITERS.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a termination signal came: a writer returns [`interrupted_error`] at once.
    pub fn interrupted() -> bool {
        PENDING.load(Ordering::SeqCst) != 0
    }

    pub fn interrupted_error() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::Interrupted, "interrupted by a signal")
    }

    /// Marks a writer as running until dropped; the signal's cleanup waits for it.
    pub struct Writing(());

    pub fn writing() -> Writing {
        let mut n = writers();
        let sig = PENDING.load(Ordering::SeqCst);
        if sig != 0 {
            finish(sig);
        }
        *n += 1;
        Writing(())
    }

    impl Drop for Writing {
        fn drop(&mut self) {
            let mut n = writers();
            *n = n.saturating_sub(1);
            let sig = PENDING.load(Ordering::SeqCst);
            if *n == 0 && sig != 0 {
                finish(sig);
            }
        }
    }

    /// Removes every live directory and ends the process; called with no writer running, and
    /// with the writers' lock held so that none starts.
    fn finish(sig: i32) -> ! {
        let dirs = live();
        for d in dirs.iter() {
            let _ = std::fs::remove_dir_all(d);
        }
        eprintln!("daqtune: interrupted (signal {sig}); temporary files removed");
        // SAFETY: ends the process at once, holding the locks so that no new temporary
        // directory or writer appears; nothing else needs to run.
        unsafe { libc::_exit(128 + sig) };
    }

    /// Runs on probe's signal thread, not in the handler: it may take the locks.
    fn on_signal(sig: i32) {
        let n = writers();
        // The first signal decides the exit status.
        let _ = PENDING.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
        if *n == 0 {
            finish(PENDING.load(Ordering::SeqCst));
        }
        // A writer runs: it sees the flag and the last one out finishes.
    }

    pub(super) fn install() -> std::io::Result<()> {
        daqtune_probe::signals::on_termination_thread(on_signal)
    }
}
