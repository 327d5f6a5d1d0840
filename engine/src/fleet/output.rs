//! `-o FILE`: reports written so that a consumer polling the file never reads half of one.
//!
//! The write goes through the workspace's one atomic writer (`daqtune_probe::fsutil`): a
//! temp file beside the target, fsync, rename, fsync of the directory. That temp file is a
//! dotfile whose name does not end in the target's extension, which is what each consumer
//! needs: node_exporter's textfile collector reads only `*.prom`, Ansible only `*.fact`, and
//! nfd-worker reads every file in features.d except dotfiles. Mode 0644: the readers
//! (node_exporter runs as its own user) need read access, and an executable `.fact` file would
//! be run by Ansible instead of read.

use std::path::{Path, PathBuf};

/// The mode of every report file.
pub const MODE: u32 = 0o644;

/// Why an output file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{0}: is a directory, not a file")]
    IsDirectory(PathBuf),
    #[error("{0}: not a file name")]
    NoFileName(PathBuf),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Write `text` to `path` by the workspace's one output rule
/// ([`daqtune_probe::fsutil::write_output`]): a new or regular file is replaced atomically,
/// mode 0644, its directory created if missing; a symlink (`/dev/stdout`) is written through,
/// never replaced; a FIFO or device is written in place; a directory is refused.
pub fn write(path: &Path, text: &str) -> Result<(), OutputError> {
    if path.file_name().is_none() {
        return Err(OutputError::NoFileName(path.to_path_buf()));
    }
    daqtune_probe::fsutil::write_output(path, MODE, &mut |f| {
        use std::io::Write;
        f.write_all(text.as_bytes())
    })
    .map_err(|source| {
        if source.kind() == std::io::ErrorKind::IsADirectory {
            OutputError::IsDirectory(path.to_path_buf())
        } else {
            OutputError::Write {
                path: path.to_path_buf(),
                source,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// While the writer fills its temp file, every other name in the directory is one that
    /// the consumers skip: a dotfile not ending in `.prom` or `.fact`.
    #[test]
    fn temp_file_is_invisible_to_consumers() {
        let d = tempfile::tempdir().expect("tmp");
        for name in ["daqtune.prom", "daqtune.fact", "daqtune"] {
            let target = d.path().join(name);
            let mut seen = Vec::new();
            daqtune_probe::fsutil::atomic_replace(&target, MODE, &mut |f| {
                use std::io::Write;
                for e in std::fs::read_dir(d.path())?.flatten() {
                    seen.push(e.file_name().to_string_lossy().into_owned());
                }
                f.write_all(b"x")
            })
            .expect("write");
            let temps: Vec<&String> = seen.iter().filter(|n| n.as_str() != name).collect();
            assert!(!temps.is_empty(), "no temp file seen for {name}: {seen:?}");
            for t in temps {
                if t.starts_with("daqtune") {
                    continue; // an earlier target of this loop
                }
                assert!(t.starts_with('.'), "{t}");
                assert!(!t.ends_with(".prom") && !t.ends_with(".fact"), "{t}");
            }
        }
    }

    #[test]
    fn writes_0644_and_replaces() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("sub/daqtune.prom");
        write(&p, "a 1\n").expect("write");
        write(&p, "a 2\n").expect("rewrite");
        assert_eq!(std::fs::read_to_string(&p).expect("read"), "a 2\n");
        let mode = std::fs::metadata(&p).expect("meta").permissions().mode() & 0o7777;
        assert_eq!(mode, 0o644);
        let names: Vec<_> = std::fs::read_dir(p.parent().expect("dir"))
            .expect("ls")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(write(d.path(), "x").is_err());
    }

    /// `--junit /dev/stdout` keeps working: a device is written to, not replaced.
    #[test]
    fn devices_are_written_in_place() {
        write(Path::new("/dev/null"), "x\n").expect("write /dev/null");
        use std::os::unix::fs::FileTypeExt;
        let m = std::fs::symlink_metadata("/dev/null").expect("meta");
        assert!(m.file_type().is_char_device());
    }

    /// A symlink given as the output is written through and stays a symlink; one to nothing
    /// is refused (no file is created where it points).
    #[test]
    fn symlinks_are_written_through_never_replaced() {
        let d = tempfile::tempdir().expect("tmp");
        let target = d.path().join("real.xml");
        std::fs::write(&target, "old content that is longer\n").expect("seed");
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        write(&link, "new\n").expect("write through");
        assert!(std::fs::symlink_metadata(&link)
            .expect("meta")
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "new\n");
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("nowhere"), &dangling).expect("symlink");
        let e = write(&dangling, "x").expect_err("dangling");
        assert!(e.to_string().contains("does not exist"), "{e}");
        assert!(!d.path().join("nowhere").exists());
        assert!(std::fs::symlink_metadata(&dangling)
            .expect("meta")
            .file_type()
            .is_symlink());
        let to_dir = d.path().join("to_dir");
        std::os::unix::fs::symlink(d.path(), &to_dir).expect("symlink");
        assert!(matches!(
            write(&to_dir, "x"),
            Err(OutputError::IsDirectory(_))
        ));
    }
}
