//! One `apply` or `revert` at a time: an exclusive `flock` on `<state>/lock`, held for the
//! whole run and released by the kernel when the holder exits, however it exits.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// An exclusive lock on `<state>/lock`, held until dropped.
#[derive(Debug)]
pub struct Lock {
    _held: daqtune_probe::sys::FileLock,
}

/// Why the state directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another daqtune run holds it (the caller may wait and try again).
    #[error("another daqtune apply or revert is running ({} is locked)", .0.display())]
    Held(PathBuf),
    /// The directory or the lock file could not be made or opened, or flock failed.
    #[error("{}: {source}{}", path.display(), crate::hostio::root_hint(source))]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Locks `dir` (created if missing) without waiting: [`LockError::Held`] while another run
/// holds it.
pub fn lock(dir: &Path) -> Result<Lock, LockError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LockError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let path = dir.join("lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(io(&path))?;
    match daqtune_probe::sys::try_lock_exclusive(f).map_err(io(&path))? {
        Some(held) => Ok(Lock { _held: held }),
        None => Err(LockError::Held(path)),
    }
}

/// [`lock`], retried while another run holds it, until `timeout`.
pub fn lock_wait(dir: &Path, timeout: Duration) -> Result<Lock, LockError> {
    let t0 = Instant::now();
    loop {
        match lock(dir) {
            Err(LockError::Held(_)) if t0.elapsed() < timeout => {
                std::thread::sleep(Duration::from_millis(200));
            }
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_run_at_a_time() {
        let d = tempfile::tempdir().expect("tmp");
        let first = lock(d.path()).expect("first lock");
        let e = lock(d.path()).expect_err("second lock must fail");
        assert!(matches!(e, LockError::Held(_)), "{e:?}");
        assert!(
            e.to_string()
                .contains("another daqtune apply or revert is running"),
            "{e}"
        );
        let t0 = Instant::now();
        assert!(matches!(
            lock_wait(d.path(), Duration::from_millis(500)),
            Err(LockError::Held(_))
        ));
        assert!(t0.elapsed() >= Duration::from_millis(400));
        drop(first);
        lock(d.path()).expect("free again");
    }

    #[test]
    fn an_unusable_directory_is_an_io_error_at_once() {
        let d = tempfile::tempdir().expect("tmp");
        let file = d.path().join("not-a-dir");
        std::fs::write(&file, "x").expect("write");
        let t0 = Instant::now();
        let e = lock_wait(&file, Duration::from_secs(30)).expect_err("a file is no directory");
        assert!(matches!(e, LockError::Io { .. }), "{e:?}");
        // Not retried as if someone held it.
        assert!(t0.elapsed() < Duration::from_secs(30));
    }
}
