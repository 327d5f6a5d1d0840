//! The host root: every read of host state goes through one [`Host`].
//!
//! A host root mirrors the real paths of a machine under one directory (`/` for the live
//! host, a fixture or a snapshot otherwise). sysfs is full of relative symlinks
//! (`/sys/bus/pci/devices/<bdf>` -> `../../../devices/pci0000:00/...`); under a fixture root
//! they must resolve inside the root, never to the machine running the tests. Symlinks are
//! therefore resolved here component by component: an absolute target is taken relative to the
//! root (chroot semantics) and a relative target that climbs above the root is refused.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

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

/// What a read touched, kept when recording (`daqtune snapshot` copies exactly these).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// A file whose content was read.
    File,
    /// A directory whose entry names were listed.
    Dir,
    /// A path whose type and permission bits were read ([`Host::stat`]): a snapshot keeps
    /// an empty stand-in with the same mode, never the content (a binary's bytes say nothing a
    /// check needs).
    Stat,
    /// A path whose existence (or type) was tested.
    Probe,
}

/// What [`Host::stat`] tells about a path (symlinks followed inside the root).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub is_file: bool,
    pub is_dir: bool,
    /// Permission bits (`mode & 0o7777`).
    pub mode: u32,
    pub len: u64,
}

impl FileStat {
    /// A regular file some execute bit is set on.
    pub fn is_executable_file(&self) -> bool {
        self.is_file && self.mode & 0o111 != 0
    }
}

/// The host paths a run read, with the symlinks met on the way (link path -> raw target).
#[derive(Debug, Default, Clone)]
pub struct Recording {
    pub accesses: BTreeMap<String, Access>,
    pub links: BTreeMap<String, String>,
    /// How many times each path was read or listed (file contents and directory listings;
    /// probes are not counted): a run that gathers its facts once reads each path once.
    pub reads: BTreeMap<String, u32>,
}

/// A handle on the host whose state is probed: the live machine (`/`) or a directory that
/// mirrors one (`--root DIR`).
#[derive(Clone)]
pub struct Host {
    root: PathBuf,
    live: bool,
    /// Resolved directories (host path -> path relative to the root). sysfs reads share long
    /// prefixes (`/sys/devices/system/cpu/cpu5/cpuidle/state2/...`), so caching directories
    /// turns a walk of every component per read into one lookup and one lstat.
    dir_cache: Arc<RwLock<HashMap<String, PathBuf>>>,
    recorder: Option<Arc<Mutex<Recording>>>,
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
            dir_cache: Arc::default(),
            recorder: None,
        }
    }

    /// The same host, recording every path read from now on (for snapshots). On the live host
    /// symlinks are then resolved by the same walk as in a host root, so that each link met is
    /// recorded and the snapshot can recreate it.
    pub fn recording(&self) -> (Host, Arc<Mutex<Recording>>) {
        let rec = Arc::new(Mutex::new(Recording::default()));
        let mut h = self.clone();
        h.recorder = Some(rec.clone());
        (h, rec)
    }

    /// Whether reads are being recorded; caches above the Host must not hide reads then.
    pub fn is_recording(&self) -> bool {
        self.recorder.is_some()
    }

    fn record(&self, host_path: &str, access: Access) {
        if let Some(r) = &self.recorder {
            if let Ok(mut r) = r.lock() {
                let path = normalize(host_path);
                if access != Access::Probe {
                    *r.reads.entry(path.clone()).or_default() += 1;
                }
                let e = r.accesses.entry(path).or_insert(access);
                // Reading content supersedes a listing or a probe of the same path.
                if access < *e {
                    *e = access;
                }
            }
        }
    }

    fn record_link(&self, link_host_path: String, target: &Path) {
        if let Some(r) = &self.recorder {
            if let Ok(mut r) = r.lock() {
                r.links
                    .insert(link_host_path, target.to_string_lossy().into_owned());
            }
        }
    }

    /// Whether reads must walk symlinks themselves (a host root, or a recorded live host).
    fn walks(&self) -> bool {
        !self.live || self.recorder.is_some()
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
        Ok(Host {
            root,
            live,
            dir_cache: Arc::default(),
            recorder: None,
        })
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
        if !self.walks() {
            return Ok(PathBuf::from(host_path));
        }
        self.resolve_in_root(host_path, true)
            .map(|rel| self.root.join(rel))
    }

    /// The real path of a host path without following the last component (for writes of a
    /// file that does not exist yet, and for reading links themselves).
    pub fn resolve_parent(&self, host_path: &str) -> ReadResult<PathBuf> {
        if !self.walks() {
            return Ok(PathBuf::from(host_path));
        }
        self.resolve_in_root(host_path, false)
            .map(|rel| self.root.join(rel))
    }

    /// Resolve `host_path` to a path relative to the root, following symlinks component by
    /// component so that none leads outside the root. The parent directory comes from the
    /// cache when an earlier read resolved it.
    fn resolve_in_root(&self, host_path: &str, follow_last: bool) -> ReadResult<PathBuf> {
        let norm = normalize(host_path);
        if norm == "/" {
            return Ok(PathBuf::new());
        }
        let (parent, last) = match norm.rsplit_once('/') {
            Some((p, l)) => (if p.is_empty() { "/" } else { p }, l),
            None => ("/", norm.as_str()),
        };
        // A recorded run must see every link on the way, so it never starts from the cache.
        let cached = if self.recorder.is_some() {
            None
        } else {
            self.dir_cache
                .read()
                .ok()
                .and_then(|c| c.get(parent).cloned())
        };
        match cached {
            Some(dir) if last != ".." => self.walk(
                host_path,
                dir,
                vec![std::ffi::OsString::from(last)],
                follow_last,
            ),
            _ => self.walk(
                host_path,
                PathBuf::new(),
                components(Path::new(&norm)),
                follow_last,
            ),
        }
    }

    /// Walk `pending_in_order` from `start` (relative to the root). The last of those
    /// components is the one the caller named; when the walk reaches it, everything before it
    /// is the resolution of the caller's parent directory, which is cached.
    fn walk(
        &self,
        host_path: &str,
        start: PathBuf,
        pending_in_order: Vec<std::ffi::OsString>,
        follow_last: bool,
    ) -> ReadResult<PathBuf> {
        // Components still to walk, in reverse so pop() gives the next; the flag marks the
        // caller's own last component (as opposed to components of a link target).
        let n = pending_in_order.len();
        let mut pending: Vec<(std::ffi::OsString, bool)> = pending_in_order
            .into_iter()
            .enumerate()
            .map(|(i, c)| (c, i + 1 == n))
            .rev()
            .collect();
        let mut resolved: Vec<std::ffi::OsString> =
            start.iter().map(|c| c.to_os_string()).collect();
        let mut hops = 0usize;
        while let Some((comp, callers_last)) = pending.pop() {
            if callers_last && comp != ".." {
                self.cache_parent(host_path, &resolved);
            }
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
            let rel: PathBuf = resolved.iter().collect();
            let real: PathBuf = self.root.join(&rel);
            let meta = match std::fs::symlink_metadata(&real) {
                Ok(m) => m,
                // A missing component: let the caller's open report NotFound.
                Err(_) => {
                    while let Some((c, _)) = pending.pop() {
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
            self.record_link(format!("/{}", rel.to_string_lossy()), &target);
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
            for c in components(&target).into_iter().rev() {
                pending.push((c, false));
            }
        }
        Ok(resolved.iter().collect())
    }

    /// Remember that the parent directory of `host_path` resolves to `resolved` (every
    /// component of which exists, since the walk got this far).
    fn cache_parent(&self, host_path: &str, resolved: &[std::ffi::OsString]) {
        let norm = normalize(host_path);
        let Some((parent, _)) = norm.rsplit_once('/') else {
            return;
        };
        let parent = if parent.is_empty() { "/" } else { parent };
        if let Ok(mut c) = self.dir_cache.write() {
            if !c.contains_key(parent) {
                c.insert(parent.to_string(), resolved.iter().collect());
            }
        }
    }

    fn open_path(&self, host_path: &str) -> ReadResult<PathBuf> {
        self.resolve(host_path)
    }

    /// Read a whole file as bytes.
    pub fn read_bytes(&self, host_path: &str) -> ReadResult<Vec<u8>> {
        self.record(host_path, Access::File);
        let p = self.open_path(host_path)?;
        std::fs::read(&p).map_err(|e| ReadError::from_io(host_path, e))
    }

    /// Read at most `limit` bytes (PCI config space, large procfs files).
    pub fn read_bytes_limited(&self, host_path: &str, limit: usize) -> ReadResult<Vec<u8>> {
        use std::io::Read;
        self.record(host_path, Access::File);
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
        self.record(host_path, Access::Dir);
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
        self.record(host_path, Access::Probe);
        let p = self.resolve_parent(host_path)?;
        let target = std::fs::read_link(&p).map_err(|e| ReadError::from_io(host_path, e))?;
        // The link itself is what was read (`physfn`, `driver`, `iommu_group`): a snapshot
        // must recreate it as a link, not as whatever it points to.
        self.record_link(normalize(host_path), &target);
        Ok(target.to_string_lossy().into_owned())
    }

    /// The host path a symlink (or path with symlinked components) resolves to, as a host
    /// path (starting with `/`). Used to find a PCI device's place in the tree.
    pub fn canonical(&self, host_path: &str) -> ReadResult<String> {
        self.record(host_path, Access::Probe);
        if !self.walks() {
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
        self.record(host_path, Access::Probe);
        match self.open_path(host_path) {
            Ok(p) => p.exists(),
            Err(_) => false,
        }
    }

    pub fn is_dir(&self, host_path: &str) -> bool {
        self.record(host_path, Access::Probe);
        match self.open_path(host_path) {
            Ok(p) => p.is_dir(),
            Err(_) => false,
        }
    }

    /// Type, permission bits and size of a path (symlinks followed, inside the root).
    pub fn stat(&self, host_path: &str) -> ReadResult<FileStat> {
        use std::os::unix::fs::PermissionsExt;
        self.record(host_path, Access::Stat);
        let p = self.open_path(host_path)?;
        let m = std::fs::metadata(&p).map_err(|e| ReadError::from_io(host_path, e))?;
        Ok(FileStat {
            is_file: m.is_file(),
            is_dir: m.is_dir(),
            mode: m.permissions().mode() & 0o7777,
            len: m.len(),
        })
    }

    /// File size as the filesystem reports it (sysfs reports config-space size this way).
    pub fn file_len(&self, host_path: &str) -> ReadResult<u64> {
        self.record(host_path, Access::Probe);
        let p = self.open_path(host_path)?;
        std::fs::metadata(&p)
            .map(|m| m.len())
            .map_err(|e| ReadError::from_io(host_path, e))
    }
}

/// Normal and `..` components of a path, in order (`.` and the root dropped).
fn components(path: &Path) -> Vec<std::ffi::OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some(OsStr::new("..").to_os_string()),
            _ => None,
        })
        .collect()
}

/// `/a//b/./c/` -> `/a/b/c` (no symlink resolution; `..` kept).
pub fn normalize(host_path: &str) -> String {
    let mut out = String::with_capacity(host_path.len() + 1);
    for part in host_path.split('/') {
        if part.is_empty() || part == "." {
            continue;
        }
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
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
    fn cached_parent_gives_same_answers() {
        let (_d, h) = tree();
        // Reading the link itself first must not poison the cache for its parent.
        assert!(h.read_dir("/sys/bus/pci/devices/0000:01:00.0").is_ok());
        assert_eq!(
            h.read_dir("/sys/bus/pci/devices").expect("dir"),
            vec!["0000:01:00.0", "evil"]
        );
        for _ in 0..3 {
            assert_eq!(
                h.read_attr("/sys/bus/pci/devices/0000:01:00.0/vendor")
                    .expect("read"),
                "0x15b3"
            );
            assert!(h
                .read_string("/sys/bus/pci/devices/0000:01:00.0/nope")
                .unwrap_err()
                .is_not_found());
            assert!(matches!(
                h.read_string("/sys/bus/pci/devices/evil").unwrap_err(),
                ReadError::Escapes { .. }
            ));
        }
    }

    #[test]
    fn recording_lists_reads_and_links() {
        let (_d, h) = tree();
        let (rh, rec) = h.recording();
        let _ = rh.read_attr("/sys/bus/pci/devices/0000:01:00.0/vendor");
        let _ = rh.read_dir("/sys/bus/pci/devices");
        let _ = rh.exists("/.dockerenv");
        let r = rec.lock().expect("lock").clone();
        assert_eq!(
            r.accesses.get("/sys/bus/pci/devices/0000:01:00.0/vendor"),
            Some(&Access::File)
        );
        assert_eq!(r.accesses.get("/sys/bus/pci/devices"), Some(&Access::Dir));
        assert_eq!(r.accesses.get("/.dockerenv"), Some(&Access::Probe));
        // Reads and listings are counted; probes are not.
        let _ = rh.read_string("/sys/bus/pci/devices/0000:01:00.0/vendor");
        let r = rec.lock().expect("lock").clone();
        assert_eq!(
            r.reads.get("/sys/bus/pci/devices/0000:01:00.0/vendor"),
            Some(&2)
        );
        assert_eq!(r.reads.get("/sys/bus/pci/devices"), Some(&1));
        assert_eq!(r.reads.get("/.dockerenv"), None);
        assert_eq!(
            r.links
                .get("/sys/bus/pci/devices/0000:01:00.0")
                .map(String::as_str),
            Some("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0")
        );
    }

    #[test]
    fn normalize_paths() {
        assert_eq!(normalize("//a/./b//c/"), "/a/b/c");
        assert_eq!(normalize(""), "/");
        assert_eq!(normalize("/a/../b"), "/a/../b");
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
