//! The host root: every read of host state goes through one [`Host`].
//!
//! A host root mirrors the real paths of a machine under one directory (`/` for the live
//! host, a fixture or a snapshot otherwise). sysfs is full of relative symlinks
//! (`/sys/bus/pci/devices/<bdf>` -> `../../../devices/pci0000:00/...`); under a fixture root
//! they must resolve inside the root, never to the machine running the tests. Symlinks are
//! therefore resolved here component by component: an absolute target is taken relative to the
//! root (chroot semantics) and a relative target that climbs above the root is refused.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a host file could not be read. Checks turn these into `skip` with the reason.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: not present")]
    NotFound { path: String },
    #[error("{path}: permission denied (run as root)")]
    PermissionDenied { path: String },
    #[error("{path}: symlink leads outside the host root ({target})")]
    Escapes { path: String, target: String },
    #[error("{path}: too many levels of symbolic links")]
    Loop { path: String },
    #[error("{path}: {source}")]
    Io { path: String, source: io::Error },
}

impl ReadError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::NotFound { .. })
    }
    pub fn is_permission(&self) -> bool {
        matches!(self, ReadError::PermissionDenied { .. })
    }
    pub fn path(&self) -> &str {
        match self {
            ReadError::NotFound { path }
            | ReadError::PermissionDenied { path }
            | ReadError::Escapes { path, .. }
            | ReadError::Loop { path }
            | ReadError::Io { path, .. } => path,
        }
    }
    fn from_io(path: &str, e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::NotFound => ReadError::NotFound { path: path.into() },
            io::ErrorKind::PermissionDenied => ReadError::PermissionDenied { path: path.into() },
            _ if e.raw_os_error() == Some(libc::ENOTDIR) => {
                ReadError::NotFound { path: path.into() }
            }
            _ if e.raw_os_error() == Some(libc::ELOOP) => ReadError::Loop { path: path.into() },
            _ => ReadError::Io {
                path: path.into(),
                source: e,
            },
        }
    }
}

pub type ReadResult<T> = Result<T, ReadError>;

/// A handle on the host whose state is probed: the live machine (`/`) or a directory that
/// mirrors one (`--root DIR`).
#[derive(Clone)]
pub struct Host {
    root: PathBuf,
    live: bool,
}

impl fmt::Debug for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Host({})", self.root.display())
    }
}

const MAX_LINK_HOPS: usize = 40;

impl Host {
    /// The machine this process runs on.
    pub fn live() -> Host {
        Host {
            root: PathBuf::from("/"),
            live: true,
        }
    }

    /// A host root directory. `/` is the live host.
    pub fn at(root: impl AsRef<Path>) -> io::Result<Host> {
        let root = std::fs::canonicalize(root.as_ref())?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", root.display()),
            ));
        }
        let live = root == Path::new("/");
        Ok(Host { root, live })
    }

    /// True when this is the running machine, so live-only sources (NVML, ioctls, netlink)
    /// may be consulted.
    pub fn is_live(&self) -> bool {
        self.live
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The real filesystem path of a host path, with symlinks resolved inside the root.
    /// Writers (apply) use this so that `--root` writes stay inside the root.
    pub fn resolve(&self, host_path: &str) -> ReadResult<PathBuf> {
        if self.live {
            return Ok(PathBuf::from(host_path));
        }
        self.resolve_in_root(host_path, true)
            .map(|rel| self.root.join(rel))
    }

    /// The real path of a host path without following the last component (for writes of a
    /// file that does not exist yet, and for reading links themselves).
    pub fn resolve_parent(&self, host_path: &str) -> ReadResult<PathBuf> {
        if self.live {
            return Ok(PathBuf::from(host_path));
        }
        self.resolve_in_root(host_path, false)
            .map(|rel| self.root.join(rel))
    }

    /// Resolve `host_path` to a path relative to the root, following symlinks component by
    /// component so that none leads outside the root.
    fn resolve_in_root(&self, host_path: &str, follow_last: bool) -> ReadResult<PathBuf> {
        // `pending` holds the components still to walk, in reverse so pop() gives the next.
        let mut pending: Vec<std::ffi::OsString> = Vec::new();
        push_components(&mut pending, Path::new(host_path));
        let mut resolved: Vec<std::ffi::OsString> = Vec::new();
        let mut hops = 0usize;
        while let Some(comp) = pending.pop() {
            if comp == ".." {
                if resolved.pop().is_none() {
                    return Err(ReadError::Escapes {
                        path: host_path.into(),
                        target: "..".into(),
                    });
                }
                continue;
            }
            resolved.push(comp);
            let is_last = pending.is_empty();
            if is_last && !follow_last {
                break;
            }
            let real: PathBuf = self.root.join(resolved.iter().collect::<PathBuf>());
            let meta = match std::fs::symlink_metadata(&real) {
                Ok(m) => m,
                // A missing component: let the caller's open report NotFound.
                Err(_) => {
                    while let Some(c) = pending.pop() {
                        resolved.push(c);
                    }
                    break;
                }
            };
            if !meta.file_type().is_symlink() {
                continue;
            }
            hops += 1;
            if hops > MAX_LINK_HOPS {
                return Err(ReadError::Loop {
                    path: host_path.into(),
                });
            }
            let target = std::fs::read_link(&real).map_err(|e| ReadError::from_io(host_path, e))?;
            resolved.pop();
            if target.is_absolute() {
                resolved.clear();
            } else {
                // A relative link may climb with `..` only as far as the root.
                let depth = resolved.len();
                let ups = target
                    .components()
                    .take_while(|c| matches!(c, Component::ParentDir))
                    .count();
                if ups > depth {
                    return Err(ReadError::Escapes {
                        path: host_path.into(),
                        target: target.display().to_string(),
                    });
                }
            }
            push_components(&mut pending, &target);
        }
        Ok(resolved.iter().collect())
    }

    fn open_path(&self, host_path: &str) -> ReadResult<PathBuf> {
        self.resolve(host_path)
    }

    /// Read a whole file as bytes.
    pub fn read_bytes(&self, host_path: &str) -> ReadResult<Vec<u8>> {
        let p = self.open_path(host_path)?;
        std::fs::read(&p).map_err(|e| ReadError::from_io(host_path, e))
    }

    /// Read at most `limit` bytes (PCI config space, large procfs files).
    pub fn read_bytes_limited(&self, host_path: &str, limit: usize) -> ReadResult<Vec<u8>> {
        use std::io::Read;
        let p = self.open_path(host_path)?;
        let f = std::fs::File::open(&p).map_err(|e| ReadError::from_io(host_path, e))?;
        let mut buf = Vec::with_capacity(limit.min(65536));
        f.take(limit as u64)
            .read_to_end(&mut buf)
            .map_err(|e| ReadError::from_io(host_path, e))?;
        Ok(buf)
    }

    /// Read a text file; invalid UTF-8 is replaced rather than refused (host data is not
    /// trusted to be well formed).
    pub fn read_string(&self, host_path: &str) -> ReadResult<String> {
        let bytes = self.read_bytes(host_path)?;
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// Read a one-line sysfs attribute, trimmed.
    pub fn read_attr(&self, host_path: &str) -> ReadResult<String> {
        self.read_string(host_path).map(|s| s.trim().to_string())
    }

    /// Read an attribute and parse it; `None` when absent or unparsable.
    pub fn read_parsed<T: std::str::FromStr>(&self, host_path: &str) -> Option<T> {
        self.read_attr(host_path).ok()?.parse().ok()
    }

    /// Entry names of a directory, sorted, without `.`/`..`.
    pub fn read_dir(&self, host_path: &str) -> ReadResult<Vec<String>> {
        let p = self.open_path(host_path)?;
        let rd = std::fs::read_dir(&p).map_err(|e| ReadError::from_io(host_path, e))?;
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort_unstable();
        Ok(names)
    }

    /// The raw target of a symlink (not resolved).
    pub fn read_link(&self, host_path: &str) -> ReadResult<String> {
        let p = self.resolve_parent(host_path)?;
        std::fs::read_link(&p)
            .map(|t| t.to_string_lossy().into_owned())
            .map_err(|e| ReadError::from_io(host_path, e))
    }

    /// The host path a symlink (or path with symlinked components) resolves to, as a host
    /// path (starting with `/`). Used to find a PCI device's place in the tree.
    pub fn canonical(&self, host_path: &str) -> ReadResult<String> {
        if self.live {
            return std::fs::canonicalize(host_path)
                .map(|p| p.to_string_lossy().into_owned())
                .map_err(|e| ReadError::from_io(host_path, e));
        }
        let rel = self.resolve_in_root(host_path, true)?;
        let real = self.root.join(&rel);
        if std::fs::symlink_metadata(&real).is_err() {
            return Err(ReadError::NotFound {
                path: host_path.into(),
            });
        }
        Ok(format!("/{}", rel.to_string_lossy()))
    }

    pub fn exists(&self, host_path: &str) -> bool {
        match self.open_path(host_path) {
            Ok(p) => p.exists(),
            Err(_) => false,
        }
    }

    pub fn is_dir(&self, host_path: &str) -> bool {
        match self.open_path(host_path) {
            Ok(p) => p.is_dir(),
            Err(_) => false,
        }
    }

    /// File size as the filesystem reports it (sysfs reports config-space size this way).
    pub fn file_len(&self, host_path: &str) -> ReadResult<u64> {
        let p = self.open_path(host_path)?;
        std::fs::metadata(&p)
            .map(|m| m.len())
            .map_err(|e| ReadError::from_io(host_path, e))
    }
}

fn push_components(pending: &mut Vec<std::ffi::OsString>, path: &Path) {
    let comps: Vec<&OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s),
            Component::ParentDir => Some(OsStr::new("..")),
            _ => None,
        })
        .collect();
    for c in comps.into_iter().rev() {
        pending.push(c.to_os_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tree() -> (tempfile::TempDir, Host) {
        let d = tempfile::tempdir().expect("tempdir");
        let r = d.path();
        std::fs::create_dir_all(r.join("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"))
            .expect("mkdir");
        std::fs::write(
            r.join("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor"),
            "0x15b3\n",
        )
        .expect("write");
        std::fs::create_dir_all(r.join("sys/bus/pci/devices")).expect("mkdir");
        symlink(
            "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0",
            r.join("sys/bus/pci/devices/0000:01:00.0"),
        )
        .expect("symlink");
        symlink(
            "../../../../../etc/passwd",
            r.join("sys/bus/pci/devices/evil"),
        )
        .expect("symlink");
        symlink("/sys/devices", r.join("sys/abs")).expect("symlink");
        let h = Host::at(r).expect("host");
        (d, h)
    }

    #[test]
    fn relative_sysfs_links_resolve_inside_root() {
        let (_d, h) = tree();
        assert_eq!(
            h.read_attr("/sys/bus/pci/devices/0000:01:00.0/vendor")
                .expect("read"),
            "0x15b3"
        );
        assert_eq!(
            h.canonical("/sys/bus/pci/devices/0000:01:00.0")
                .expect("canon"),
            "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
        );
    }

    #[test]
    fn escaping_link_is_refused() {
        let (_d, h) = tree();
        let e = h.read_string("/sys/bus/pci/devices/evil").unwrap_err();
        assert!(matches!(e, ReadError::Escapes { .. }), "{e}");
    }

    #[test]
    fn absolute_link_is_rerooted() {
        let (_d, h) = tree();
        let names = h.read_dir("/sys/abs").expect("dir");
        assert_eq!(names, vec!["pci0000:00".to_string()]);
    }

    #[test]
    fn missing_file_is_not_found() {
        let (_d, h) = tree();
        assert!(h.read_string("/proc/cmdline").unwrap_err().is_not_found());
        assert!(h
            .read_string("/sys/bus/pci/devices/0000:01:00.0/vendor/x")
            .unwrap_err()
            .is_not_found());
    }

    #[test]
    fn dotdot_above_root_is_refused() {
        let (_d, h) = tree();
        assert!(matches!(
            h.read_string("/../../etc/passwd").unwrap_err(),
            ReadError::Escapes { .. }
        ));
    }
}
