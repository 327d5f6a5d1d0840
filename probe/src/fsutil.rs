//! The workspace's file primitives.
//!
//! - The one atomic file write: temp file in the same directory, fsync, rename, fsync of the
//!   directory. Used for daqtune's own state (journals, the GPU facts file) and, via the apply
//!   writer, for every file apply changes. A reader never sees a half-written file, and a
//!   failed write leaves the target untouched and no temp file behind.
//! - The one bounded read ([`read_regular`]): regular files only, opened without blocking,
//!   at most a stated number of bytes. Host files (through [`crate::Host`]) and the files a
//!   user names (`--profile`, `--config`: [`read_user_file`]) are read with it, so a FIFO, a
//!   device node or a 2 GiB file where a small file is expected is an error, never a hang or
//!   an out-of-memory.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a bounded read did not return the file's content.
#[derive(Debug, thiserror::Error)]
pub enum FileReadError {
    /// A FIFO, socket, device node or directory where a file is expected.
    #[error("is {kind}, not a regular file")]
    NotRegular { kind: &'static str },
    /// The file holds more than the cap: refused whole, never truncated.
    #[error("holds more than {cap} bytes, the most daqtune reads from such a file")]
    TooLarge { cap: usize },
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// What a file type is, in words (for errors).
pub fn kind_of(ft: &fs::FileType) -> &'static str {
    if ft.is_file() {
        "a regular file"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else if ft.is_fifo() {
        "a FIFO (named pipe)"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Reads a regular file whole, refusing anything else and anything over `cap` bytes.
///
/// One open (`O_NONBLOCK`, so a FIFO or a device cannot make it wait; `O_NOCTTY`), one
/// `fstat` of the opened descriptor (the type is checked on what was opened, not on a path
/// that could be swapped), then reads of at most `cap + 1` bytes. The size `fstat` reports is
/// only an allocation hint: sysfs attributes report 4096 whatever they hold and procfs files
/// 0, so the cap is enforced on the bytes actually read.
pub fn read_regular(path: &Path, cap: usize) -> Result<Vec<u8>, FileReadError> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = f.metadata()?;
    let ft = meta.file_type();
    if !ft.is_file() {
        return Err(FileReadError::NotRegular { kind: kind_of(&ft) });
    }
    let hint = match meta.len() {
        0 => 1024,
        n => usize::try_from(n).unwrap_or(usize::MAX).saturating_add(1),
    };
    let mut buf = Vec::with_capacity(hint.min(cap.saturating_add(1)));
    (&f).take(cap as u64 + 1).read_to_end(&mut buf)?;
    if buf.len() > cap {
        return Err(FileReadError::TooLarge { cap });
    }
    Ok(buf)
}

/// A regular file opened for positioned reads ([`open_regular`]): PCI config space is read
/// a few registers at a time, since each dword of it can cost a trap to the hypervisor or a
/// slow bus cycle (a passthrough GPU's 4 KiB took 23 ms to read whole on a VM).
pub struct RegularFile {
    file: File,
    /// The size the file reports (sysfs's `config` reports its real config-space size).
    pub len: u64,
}

impl RegularFile {
    /// Up to `len` bytes at `offset` (fewer at the end of the file, or where the kernel
    /// shows less, as config space beyond 64 bytes without CAP_SYS_ADMIN).
    pub fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; len];
        let mut got = 0;
        while got < len {
            match self.file.read_at(&mut buf[got..], offset + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(got);
        Ok(buf)
    }
}

/// Open `path` for [`RegularFile::read_at`]: as [`read_regular`] opens (non-blocking, a FIFO,
/// socket, device or directory refused at once), and refused when it reports more than `cap`
/// bytes.
pub fn open_regular(path: &Path, cap: usize) -> Result<RegularFile, FileReadError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    let ft = meta.file_type();
    if !ft.is_file() {
        return Err(FileReadError::NotRegular { kind: kind_of(&ft) });
    }
    if meta.len() > cap as u64 {
        return Err(FileReadError::TooLarge { cap });
    }
    Ok(RegularFile {
        file,
        len: meta.len(),
    })
}

/// The most read from a file a user names (`--profile`, `--config`, a report given to
/// `diff`): the largest real one is a few KiB.
pub const USER_FILE_CAP: usize = 4 * 1024 * 1024;

/// Reads a text file the user named: a regular file (a FIFO, socket or device is refused at
/// once), at most [`USER_FILE_CAP`] bytes, valid UTF-8. The error says why without the path;
/// callers name the file in their own message (with a line number where they parse it).
pub fn read_user_file(path: &Path) -> Result<String, FileReadError> {
    let bytes = read_regular(path, USER_FILE_CAP)?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = 1 + e.as_bytes()[..at].iter().filter(|b| **b == b'\n').count();
        FileReadError::Io(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not UTF-8 text (line {line}, byte offset {at})"),
        ))
    })
}

/// Takes an exclusive `flock` on `path` (created if missing, with its directory), waiting for
/// whoever holds it; released when the returned file is closed, or when the holder dies. For
/// state that several processes must not change at once (tests that reserve the host's
/// hugepages and compare the pool before and after, say).
pub fn lock_exclusive(path: &Path) -> io::Result<crate::sys::FileLock> {
    if let Some(d) = path.parent() {
        fs::create_dir_all(d)?;
    }
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    crate::sys::lock_exclusive(f)
}

/// Distinguishes the temp files of one process: two threads replacing the same file at once
/// must not share a temp name.
static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// `.<name>.daqtune-tmp.<pid>.<n>` beside `path`, unique per call within this process (and
/// across live processes, by the pid).
pub fn tmp_name(path: &Path) -> io::Result<PathBuf> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let mut t = std::ffi::OsString::from(".");
    t.push(name);
    t.push(format!(
        ".daqtune-tmp.{}.{}",
        std::process::id(),
        TMP_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
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
    let dir = match path.parent() {
        // A bare file name (`-o out.txt`) has the parent "": the directory to create and to
        // fsync after the rename is the current one.
        Some(d) if d.as_os_str().is_empty() => Path::new("."),
        Some(d) => d,
        None => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "path has no parent",
            ))
        }
    };
    fs::create_dir_all(dir)?;
    let tmp = tmp_name(path)?;
    // A file of this name can only be left by a dead process that had our pid (pid reuse
    // after a crash): no live thread shares the name.
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

/// Writes an output file the user named (`-o`, `--json FILE`, `--svg FILE`, a snapshot
/// archive): the one rule for every command.
///
/// - A path that does not exist, or a regular file: replaced atomically ([`atomic_replace`]),
///   so a reader polling it never sees half a report.
/// - A symlink: written through, never replaced. Its target must exist (a dangling link is
///   refused: daqtune does not create a file wherever a link points); the target is opened,
///   truncated and written in place, as the shell's `>` does. `/dev/stdout` and
///   `/proc/self/fd/N` are such links, and replacing them with a file is how a real
///   `/dev/stdout` got lost. Not atomic: point `-o` at the file itself for that.
/// - Another existing non-regular file (a FIFO a collector reads, a character device, a
///   terminal): written in place; renaming over it would replace the node.
/// - A directory: refused.
pub fn write_output(
    path: &Path,
    mode: u32,
    fill: &mut dyn FnMut(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let is_dir = || io::Error::new(io::ErrorKind::IsADirectory, "is a directory, not a file");
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => match fs::metadata(path) {
            Ok(t) if t.is_dir() => Err(is_dir()),
            Ok(_) => write_in_place(path, fill),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(io::Error::new(
                io::ErrorKind::NotFound,
                "is a symlink to a file that does not exist (output is written through links, \
                 never creating their targets)",
            )),
            Err(e) => Err(e),
        },
        Ok(m) if m.is_dir() => Err(is_dir()),
        Ok(m) if !m.is_file() => write_in_place(path, fill),
        _ => atomic_replace(path, mode, fill),
    }
}

/// The target opened as it is (no create), truncated, written; fsynced when it is a file.
fn write_in_place(
    path: &Path,
    fill: &mut dyn FnMut(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_NOCTTY)
        .open(path)?;
    fill(&mut f)?;
    f.flush()?;
    if f.metadata()?.is_file() {
        f.sync_all()?;
    }
    Ok(())
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

    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
        let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(rc, 0, "mkfifo: {}", io::Error::last_os_error());
    }

    #[test]
    fn fifo_is_refused_without_waiting_for_a_writer() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("cmdline");
        mkfifo(&p);
        // No writer ever opens it: a blocking open or read would hang this test forever.
        let e = read_regular(&p, 4096).expect_err("a FIFO is not a file");
        assert!(
            matches!(e, FileReadError::NotRegular { kind } if kind.contains("FIFO")),
            "{e}"
        );
        let e = read_user_file(&p).expect_err("a FIFO is not a profile");
        assert!(e.to_string().contains("FIFO"), "{e}");
    }

    #[test]
    fn device_node_and_directory_are_refused() {
        // /dev/null exists on every Linux and reading it has no effect.
        let e = read_regular(Path::new("/dev/null"), 4096).expect_err("device");
        assert!(e.to_string().contains("character device"), "{e}");
        let d = tempfile::tempdir().expect("tmp");
        let e = read_regular(d.path(), 4096).expect_err("directory");
        assert!(e.to_string().contains("directory"), "{e}");
    }

    #[test]
    fn over_the_cap_is_an_error_not_a_truncation() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("big");
        fs::write(&p, vec![b'x'; 4097]).expect("write");
        assert!(matches!(
            read_regular(&p, 4096),
            Err(FileReadError::TooLarge { cap: 4096 })
        ));
        assert_eq!(read_regular(&p, 4097).expect("fits").len(), 4097);
        fs::write(&p, vec![b'y'; 4096]).expect("write");
        assert_eq!(read_regular(&p, 4096).expect("exactly the cap").len(), 4096);
        // A user file over its cap: refused with the cap named.
        let f = fs::File::create(&p).expect("create");
        f.set_len(USER_FILE_CAP as u64 + 1).expect("sparse");
        let e = read_user_file(&p).expect_err("too large");
        assert!(e.to_string().contains(&USER_FILE_CAP.to_string()), "{e}");
    }

    #[test]
    fn user_file_must_be_utf8_and_says_where() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("p.yaml");
        fs::write(&p, b"name: x\nbad: \xff\n").expect("write");
        let e = read_user_file(&p).expect_err("not UTF-8");
        assert!(e.to_string().contains("line 2"), "{e}");
        fs::write(&p, "name: x\n").expect("write");
        assert_eq!(read_user_file(&p).expect("text"), "name: x\n");
    }

    #[test]
    fn temp_names_are_unique_per_call() {
        let p = Path::new("/x/state.json");
        let a = tmp_name(p).expect("name");
        let b = tmp_name(p).expect("name");
        assert_ne!(a, b);
        assert!(a.to_string_lossy().contains(".daqtune-tmp."), "{a:?}");
    }

    #[test]
    fn concurrent_replacements_of_one_file_do_not_collide() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("state.json");
        std::thread::scope(|s| {
            for t in 0..8u8 {
                let p = &p;
                s.spawn(move || {
                    for i in 0..50u8 {
                        write_atomic(p, &[t, i], 0o644).expect("write");
                    }
                });
            }
        });
        assert_eq!(fs::read(&p).expect("read").len(), 2);
        let left: Vec<_> = fs::read_dir(d.path())
            .expect("ls")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 1, "no temp file left: {left:?}");
    }
}
