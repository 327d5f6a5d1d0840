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

use crate::fsutil::{self, FileReadError};

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
    /// A FIFO, socket, device node or directory where a file is expected: refused without
    /// waiting on it.
    #[error("{path}: is {kind}, not a regular file")]
    NotRegular { path: String, kind: &'static str },
    /// More than this kind of file can hold ([`read_cap`]): refused, never truncated.
    #[error(
        "{path}: larger than {cap} bytes, the most this file can hold on a real host (not read)"
    )]
    TooLarge { path: String, cap: usize },
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
            | ReadError::NotRegular { path, .. }
            | ReadError::TooLarge { path, .. }
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

impl ReadError {
    fn from_file_read(path: &str, e: FileReadError) -> Self {
        match e {
            FileReadError::NotRegular { kind } => ReadError::NotRegular {
                path: path.into(),
                kind,
            },
            FileReadError::TooLarge { cap } => ReadError::TooLarge {
                path: path.into(),
                cap,
            },
            FileReadError::Io(e) => ReadError::from_io(path, e),
        }
    }
}

/// The most read from one host file, by kind of file (docs/architecture.md, "Bounded host
/// reads"). A file holding more is refused whole: no kernel file of that kind can be that
/// large, so it is not a host's file (a hostile or broken fixture or snapshot), and a
/// truncated read could pass a check on half the data.
pub mod caps {
    /// A sysfs or procfs attribute: the kernel formats it into one page, and the largest page
    /// size of the architectures daqtune runs on is 64 KiB (arm64 kernels built with 64K
    /// pages, as on Grace; x86-64 and most arm64 kernels use 4 KiB).
    pub const ATTRIBUTE: usize = 64 * 1024;
    /// PCI configuration space: 4096 bytes of PCIe extended config space (256 for
    /// conventional PCI, which sysfs shows to non-root readers).
    pub const CONFIG_SPACE: usize = 4096;
    /// `/proc/cmdline`: COMMAND_LINE_SIZE is 2048 on x86-64 and arm64 and at most 4096 on any
    /// architecture (loongarch, s390); bootconfig (`bootconfig` on the command line) may
    /// prepend parameters from its at most 32 KiB of data. 4096 + 32768, rounded up.
    pub const CMDLINE: usize = 40 * 1024;
    /// `/proc/cpuinfo`: measured 1350 bytes per CPU on x86-64 (the flags line; arm64 ~300),
    /// so 11 MB at 8192 CPUs (the NR_CPUS of distribution x86-64 kernels).
    pub const CPUINFO: usize = 16 * 1024 * 1024;
    /// `/proc/stat`: one line per CPU plus one number per interrupt; ~1.2 KB on 2 CPUs,
    /// well under 1 MB on a 256-CPU host with tens of thousands of interrupts.
    pub const PROC_STAT: usize = 4 * 1024 * 1024;
    /// `/proc/mounts`: ~100 bytes per mount; a container host with 50 000 mounts is 5 MB.
    pub const MOUNTS: usize = 16 * 1024 * 1024;
    /// `/proc/modules`: ~80 bytes per loaded module; a few hundred modules are ~30 KB.
    pub const MODULES: usize = 1024 * 1024;
    /// `/proc/net/{fib_trie,route,if_inet6}`: ~1 KB on a data-acquisition host; a router
    /// with a full internet table would exceed this (then app.interfaces says why it skips).
    pub const NET_TABLE: usize = 16 * 1024 * 1024;
    /// The GPU facts file (`daqtune/gpu.json`): ~1.5 KB per GPU (3 KB for the 2-GPU fixture).
    pub const GPU_FACTS: usize = 1024 * 1024;
    /// The kernel messages a snapshot keeps (`daqtune/kmsg.txt`): a subset of the kernel ring
    /// buffer, which CONFIG_LOG_BUF_SHIFT caps at 32 MiB.
    pub const KMSG: usize = 32 * 1024 * 1024;
    /// The PCI ID database (`pci.ids`): 1.36 MB in 2025, growing ~50 KB a year.
    pub const PCI_IDS: usize = 16 * 1024 * 1024;
    /// daqtune's apply journal (`journal.json`): a few hundred bytes per change.
    pub const JOURNAL: usize = 16 * 1024 * 1024;
    /// Any other file (grub and its drop-ins, extlinux.conf, systemd units, NetworkManager
    /// keyfiles, os-release): configuration text of at most tens of KB.
    pub const OTHER: usize = 4 * 1024 * 1024;
}

/// The cap for reading `host_path` (see [`caps`]).
pub fn read_cap(host_path: &str) -> usize {
    let p = host_path;
    match p {
        "/proc/cmdline" => caps::CMDLINE,
        "/proc/cpuinfo" => caps::CPUINFO,
        "/proc/stat" => caps::PROC_STAT,
        "/proc/mounts" | "/proc/self/mounts" | "/proc/self/mountinfo" => caps::MOUNTS,
        "/proc/modules" => caps::MODULES,
        "/proc/net/fib_trie" | "/proc/net/route" | "/proc/net/if_inet6" | "/proc/net/dev" => {
            caps::NET_TABLE
        }
        crate::gpu::FACTS_PATH => caps::GPU_FACTS,
        "/daqtune/kmsg.txt" => caps::KMSG,
        _ if p.starts_with("/sys/") && p.ends_with("/config") => caps::CONFIG_SPACE,
        _ if p.starts_with("/sys/") || p.starts_with("/proc/") => caps::ATTRIBUTE,
        _ if p.ends_with("/pci.ids") => caps::PCI_IDS,
        _ if p.starts_with("/var/lib/daqtune/") => caps::JOURNAL,
        _ => caps::OTHER,
    }
}

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
    /// The inode number: on sysfs (kernfs) a node's id, new whenever the node is made again
    /// (a module's `/sys/module/NAME` after a reload).
    pub ino: u64,
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
        self.resolve_in_root_typed(host_path, follow_last)
            .map(|(p, _)| p)
    }

    /// [`Self::resolve_in_root`], with the type of what the path names when the walk saw it.
    fn resolve_in_root_typed(
        &self,
        host_path: &str,
        follow_last: bool,
    ) -> ReadResult<(PathBuf, Option<std::fs::FileType>)> {
        let norm = normalize(host_path);
        if norm == "/" {
            return Ok((PathBuf::new(), None));
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
    ) -> ReadResult<(PathBuf, Option<std::fs::FileType>)> {
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
        // The type of what the path finally names, when the walk stat'ed it (for free: every
        // component is lstat'ed anyway), so a read can refuse a FIFO or device before opening.
        let mut final_type = None;
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
                if pending.is_empty() {
                    final_type = Some(meta.file_type());
                }
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
        Ok((resolved.iter().collect(), final_type))
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

    /// Read a whole file as bytes: a regular file of at most [`read_cap`] bytes for its kind.
    /// A FIFO, socket or device node is refused without waiting on it, a larger file is
    /// refused whole ([`ReadError::NotRegular`], [`ReadError::TooLarge`]).
    pub fn read_bytes(&self, host_path: &str) -> ReadResult<Vec<u8>> {
        self.read_capped(host_path, read_cap(host_path))
    }

    /// [`Self::read_bytes`] with the caller's cap instead of the kind's (PCI config space).
    /// More than `limit` bytes is an error, never a truncated read.
    pub fn read_bytes_limited(&self, host_path: &str, limit: usize) -> ReadResult<Vec<u8>> {
        self.read_capped(host_path, limit)
    }

    /// Open a regular file for positioned reads ([`fsutil::RegularFile::read_at`]), recorded
    /// as a read of its content (a snapshot copies it whole). Refused like [`Self::read_bytes`]:
    /// not a regular file, or reporting more than `cap` bytes.
    pub fn open_regular(&self, host_path: &str, cap: usize) -> ReadResult<fsutil::RegularFile> {
        let p = self.regular_path(host_path)?;
        fsutil::open_regular(&p, cap).map_err(|e| ReadError::from_file_read(host_path, e))
    }

    fn read_capped(&self, host_path: &str, cap: usize) -> ReadResult<Vec<u8>> {
        let p = self.regular_path(host_path)?;
        fsutil::read_regular(&p, cap).map_err(|e| ReadError::from_file_read(host_path, e))
    }

    /// Where to open `host_path` for reading its content (recorded as such), with a device
    /// node in a host root refused before it is opened.
    fn regular_path(&self, host_path: &str) -> ReadResult<PathBuf> {
        self.record(host_path, Access::File);
        let p = if self.walks() {
            let (rel, ty) = self.resolve_in_root_typed(host_path, true)?;
            // In a host root the walk has already lstat'ed the file: a device node is refused
            // before it is opened at all (opening some devices has effects).
            if let Some(ty) = ty.filter(|t| !t.is_file()) {
                return Err(ReadError::NotRegular {
                    path: host_path.into(),
                    kind: fsutil::kind_of(&ty),
                });
            }
            self.root.join(rel)
        } else {
            PathBuf::from(host_path)
        };
        Ok(p)
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
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        self.record(host_path, Access::Stat);
        let p = self.open_path(host_path)?;
        let m = std::fs::metadata(&p).map_err(|e| ReadError::from_io(host_path, e))?;
        Ok(FileStat {
            is_file: m.is_file(),
            is_dir: m.is_dir(),
            mode: m.permissions().mode() & 0o7777,
            len: m.len(),
            ino: m.ino(),
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

    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a file.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    }

    #[test]
    fn fifo_where_a_file_is_expected_is_refused_at_once() {
        let (d, h) = tree();
        std::fs::create_dir_all(d.path().join("proc")).expect("mkdir");
        mkfifo(&d.path().join("proc/cmdline"));
        // Through a link too (the walk's lstat sees the FIFO at the end of the link).
        symlink("/proc/cmdline", d.path().join("sys/cmdline-link")).expect("ln");
        for p in ["/proc/cmdline", "/sys/cmdline-link"] {
            let e = h.read_string(p).expect_err("FIFO");
            assert!(
                matches!(&e, ReadError::NotRegular { kind, .. } if kind.contains("FIFO")),
                "{e}"
            );
            assert!(e.to_string().starts_with(p), "names the path: {e}");
        }
        // The same file read as on the live host (no walk): open O_NONBLOCK + fstat.
        let e = fsutil::read_regular(&d.path().join("proc/cmdline"), 4096).expect_err("FIFO");
        assert!(matches!(e, FileReadError::NotRegular { .. }), "{e}");
    }

    #[test]
    fn device_node_where_a_file_is_expected_is_refused() {
        // The live host's /dev/null (reading it has no effect): open O_NONBLOCK + fstat.
        let e = Host::live().read_bytes("/dev/null").expect_err("device");
        assert!(
            matches!(&e, ReadError::NotRegular { kind, .. } if kind.contains("character")),
            "{e}"
        );
        // In a host root the walk's lstat refuses it before any open. Making a device node
        // needs root (CAP_MKNOD); elsewhere the live case above covers the type check.
        let (d, h) = tree();
        std::fs::create_dir_all(d.path().join("proc")).expect("mkdir");
        let node = d.path().join("proc/cmdline");
        let c = std::ffi::CString::new(node.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path; mknod only creates a node (1:3 is /dev/null's
        // number, so even an open of it would be harmless).
        let rc = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3)) };
        if rc != 0 {
            eprintln!(
                "skipped in-root part: mknod: {}",
                io::Error::last_os_error()
            );
            return;
        }
        let e = h.read_string("/proc/cmdline").expect_err("device");
        assert!(
            matches!(&e, ReadError::NotRegular { kind, .. } if kind.contains("character")),
            "{e}"
        );
    }

    #[test]
    fn oversize_file_is_an_error_for_that_read() {
        let (d, h) = tree();
        std::fs::create_dir_all(d.path().join("proc")).expect("mkdir");
        // 2 GiB of (sparse) zeros where /proc/cmdline is expected: refused after reading at
        // most the cap, nothing like 2 GiB in memory.
        let f = std::fs::File::create(d.path().join("proc/cmdline")).expect("create");
        f.set_len(2 << 30).expect("sparse");
        let e = h.read_string("/proc/cmdline").expect_err("too large");
        assert!(
            matches!(e, ReadError::TooLarge { cap, .. } if cap == caps::CMDLINE),
            "{e}"
        );
        // A config space larger than PCIe's 4096 bytes is not one.
        let cfg = d
            .path()
            .join("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/config");
        std::fs::write(&cfg, vec![0u8; 4097]).expect("write");
        let e = h
            .read_bytes("/sys/bus/pci/devices/0000:01:00.0/config")
            .expect_err("too large");
        assert!(matches!(e, ReadError::TooLarge { cap: 4096, .. }), "{e}");
        std::fs::write(&cfg, vec![0u8; 4096]).expect("write");
        assert_eq!(
            h.read_bytes("/sys/bus/pci/devices/0000:01:00.0/config")
                .expect("fits")
                .len(),
            4096
        );
    }

    #[test]
    fn caps_by_kind() {
        assert_eq!(read_cap("/proc/cmdline"), caps::CMDLINE);
        assert_eq!(read_cap("/sys/bus/pci/devices/0000:01:00.0/config"), 4096);
        assert_eq!(read_cap("/sys/class/net/eth0/mtu"), caps::ATTRIBUTE);
        assert_eq!(read_cap("/proc/sys/vm/swappiness"), caps::ATTRIBUTE);
        assert_eq!(read_cap("/proc/cpuinfo"), caps::CPUINFO);
        assert_eq!(read_cap(crate::gpu::FACTS_PATH), caps::GPU_FACTS);
        assert_eq!(read_cap("/usr/share/misc/pci.ids"), caps::PCI_IDS);
        assert_eq!(read_cap("/etc/default/grub"), caps::OTHER);
        // Every cap holds what a real host has, measured on one (sizes in docs).
        let real = std::fs::read("/proc/cpuinfo").map(|b| b.len()).unwrap_or(0);
        assert!(real < caps::CPUINFO);
    }

    #[test]
    fn directories_and_links_still_work_after_a_refusal() {
        let (d, h) = tree();
        mkfifo(&d.path().join("sys/fifo"));
        assert!(h.read_string("/sys/fifo").is_err());
        assert!(h
            .read_dir("/sys")
            .expect("dir")
            .contains(&"fifo".to_string()));
        assert!(h.exists("/sys/fifo"));
        assert_eq!(
            h.read_attr("/sys/bus/pci/devices/0000:01:00.0/vendor")
                .expect("read"),
            "0x15b3"
        );
    }
}
