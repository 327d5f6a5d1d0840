//! The one atomic file write of the workspace: temp file in the same directory, fsync, rename,
//! fsync of the directory. Used for daqtune's own state (journals, the GPU facts file) and, via
//! the apply writer, for every file apply changes. A reader never sees a half-written file, and
//! a failed write leaves the target untouched and no temp file behind.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// `.<name>.daqtune-tmp.<pid>` beside `path`.
pub fn tmp_name(path: &Path) -> io::Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let mut t = std::ffi::OsString::from(".");
    t.push(name);
    t.push(format!(".daqtune-tmp.{}", std::process::id()));
    Ok(path.with_file_name(t))
}

pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `path` with what `fill` writes, with permissions `mode`; creates the directory.
pub fn atomic_replace(
    path: &Path,
    mode: u32,
    fill: &mut dyn FnMut(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no parent"))?;
    fs::create_dir_all(dir)?;
    let tmp = tmp_name(path)?;
    // A temp file of an earlier process with our pid (pid reuse after a crash) is stale.
    let _ = fs::remove_file(&tmp);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        fill(&mut f)?;
        // The umask may have narrowed the mode given to open.
        f.set_permissions(fs::Permissions::from_mode(mode))?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// [`atomic_replace`] with bytes.
pub fn write_atomic(path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
    atomic_replace(path, mode, &mut |f| f.write_all(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_leaves_no_temp() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("sub/state.json");
        write_atomic(&p, b"one", 0o600).expect("write");
        write_atomic(&p, b"two", 0o644).expect("rewrite");
        assert_eq!(fs::read(&p).expect("read"), b"two");
        assert_eq!(
            fs::metadata(&p).expect("meta").permissions().mode() & 0o777,
            0o644
        );
        let failed = atomic_replace(&p, 0o644, &mut |f| {
            f.write_all(b"half")?;
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        });
        assert!(failed.is_err());
        assert_eq!(fs::read(&p).expect("read"), b"two", "target untouched");
        let left: Vec<_> = fs::read_dir(p.parent().expect("dir"))
            .expect("ls")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }
}
