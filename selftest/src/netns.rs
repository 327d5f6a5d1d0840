//! Named network namespaces, made the way iproute2 makes them so `ip netns` sees them and can
//! clean them up: a thread unshares CLONE_NEWNET and its namespace file is bind-mounted onto
//! `/run/netns/<name>`. The bind mount keeps the namespace alive after the process dies (so a
//! port moved into it is not lost on SIGKILL: the next run finds it and moves it back).
//!
//! The system calls (unshare, setns, mount, umount) are `daqtune_probe::sys`'s; the `unsafe`
//! left here is `Command::pre_exec`, whose closures run between fork and exec.

use crate::error::{Error, Result};
use daqtune_probe::sys;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// Where named namespaces live (iproute2's directory).
pub const NETNS_DIR: &str = "/run/netns";
/// Prefix of every namespace daqtune creates; the sweep touches nothing else.
pub const PREFIX: &str = "daqtune-";

/// Identity of a namespace: device and inode of its nsfs file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NsId {
    pub dev: u64,
    pub ino: u64,
}

/// An open network namespace (the file keeps it reachable while we hold it).
#[derive(Debug)]
pub struct NetNs {
    file: File,
    /// Set for namespaces mounted under [`NETNS_DIR`].
    path: Option<PathBuf>,
}

fn cpath(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::Invalid(format!("path with NUL byte: {}", p.display())))
}

impl NetNs {
    /// The calling thread's current namespace.
    pub fn current() -> Result<Self> {
        Self::open_path(Path::new("/proc/thread-self/ns/net"), None)
    }

    fn open_path(p: &Path, keep: Option<PathBuf>) -> Result<Self> {
        let file = File::open(p).map_err(|e| Error::io(format!("open {}", p.display()), e))?;
        Ok(NetNs { file, path: keep })
    }

    /// Opens `/run/netns/<name>`. A file there that is not (yet) a namespace - [`create`]
    /// makes the file before it bind-mounts the namespace onto it, and a run killed in between
    /// leaves it so - is an error, not a namespace that would fail every later `setns`.
    ///
    /// [`create`]: Self::create
    pub fn open_named(name: &str) -> Result<Self> {
        let p = Path::new(NETNS_DIR).join(name);
        let ns = Self::open_path(&p, Some(p.clone()))?;
        if !ns.is_nsfs() {
            return Err(Error::Invalid(format!(
                "{} is not a network namespace (an unfinished one)",
                p.display()
            )));
        }
        Ok(ns)
    }

    fn is_nsfs(&self) -> bool {
        const NSFS_MAGIC: i64 = 0x6e73_6673;
        // SAFETY: statfs is plain data filled by the kernel for our open fd.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd and a pointer to `st`, which outlives the call.
        let rc = unsafe { libc::fstatfs(self.fd(), &mut st) };
        rc == 0 && st.f_type as i64 == NSFS_MAGIC
    }

    /// Opens any namespace file (`/proc/PID/ns/net`, a bind mount).
    pub fn open(p: &Path) -> Result<Self> {
        Self::open_path(p, None)
    }

    /// Creates a new, empty namespace mounted at `/run/netns/<name>`. Fails when the name exists.
    pub fn create(name: &str) -> Result<Self> {
        if name.is_empty() || name.contains('/') || name.len() > 200 {
            return Err(Error::Invalid(format!("namespace name {name:?}")));
        }
        std::fs::create_dir_all(NETNS_DIR)
            .map_err(|e| Error::io(format!("create {NETNS_DIR}"), e))?;
        let target = Path::new(NETNS_DIR).join(name);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
            .map_err(|e| Error::io(format!("create {}", target.display()), e))?;
        let t = target.clone();
        let made = std::thread::spawn(move || -> Result<()> {
            // unshare moves only this thread; it ends right after, so no other code runs
            // inside the new namespace by accident.
            sys::unshare_net().map_err(|e| Error::io("unshare(CLONE_NEWNET)", e))?;
            let src = cpath(&PathBuf::from(format!(
                "/proc/self/task/{}/ns/net",
                crate::sys::gettid()
            )))?;
            let dst = cpath(&t)?;
            // A bind mount has no file system type or data.
            sys::mount(Some(&src), &dst, None, sys::MsFlags::MS_BIND, None)
                .map_err(|e| Error::io(format!("bind-mount namespace onto {}", t.display()), e))
        })
        .join()
        .unwrap_or_else(|_| Err(Error::Invalid("namespace thread panicked".into())));
        if let Err(e) = made {
            let _ = std::fs::remove_file(&target);
            return Err(e);
        }
        Self::open_path(&target, Some(target.clone()))
    }

    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn id(&self) -> Result<NsId> {
        let m = self
            .file
            .metadata()
            .map_err(|e| Error::io("stat namespace", e))?;
        Ok(NsId {
            dev: m.dev(),
            ino: m.ino(),
        })
    }

    /// Moves the calling thread into this namespace. Only for threads the self-test owns.
    pub fn enter(&self) -> Result<()> {
        // setns changes only the calling thread.
        sys::setns_net(&self.file).map_err(|e| Error::io("setns(CLONE_NEWNET)", e))
    }

    /// Makes a child process start inside this namespace (setns between fork and exec).
    pub fn command_in(&self, cmd: &mut std::process::Command) -> Result<()> {
        let fd = self
            .file
            .try_clone()
            .map_err(|e| Error::io("dup namespace fd", e))?;
        // SAFETY: the closure runs in the forked child before exec and only calls setns
        // (through probe::sys, which allocates nothing), an async-signal-safe system call; the
        // cloned fd stays open in the parent until the Command drops.
        unsafe {
            cmd.pre_exec(move || sys::setns_net(&fd));
        }
        Ok(())
    }
}

impl NetNs {
    /// Like [`NetNs::command_in`], and the child also gets a private mount namespace with a
    /// fresh `/sys`, as `ip netns exec` does: sysfs shows the network devices (and, in the RDMA
    /// subsystem's exclusive mode, the RDMA devices) of the namespace that mounted it, so a
    /// child that only called setns would still see the host's `/sys/class/net` and
    /// `/sys/class/infiniband`, and libibverbs would not find a device moved into `self`.
    pub fn command_in_with_sysfs(&self, cmd: &mut std::process::Command) -> Result<()> {
        let fd = self
            .file
            .try_clone()
            .map_err(|e| Error::io("dup namespace fd", e))?;
        // Allocated before fork: the child may only make async-signal-safe calls.
        let parent = std::process::id() as libc::pid_t;
        let root = c"/";
        let sys_dir = c"/sys";
        let sysfs = c"sysfs";
        let none = c"none";
        // SAFETY: the closure runs in the forked (single-threaded) child before exec and only
        // calls prctl, getppid, setns, unshare, mount and umount2 (the last four through
        // probe::sys, which allocates nothing for `&CStr` paths) with the static strings
        // above; all are async-signal-safe system calls. The cloned fd stays open until the
        // Command drops.
        unsafe {
            cmd.pre_exec(move || {
                // The child dies with us: a SIGKILLed self-test must not leave a helper
                // holding the namespace (and its devices) alive. Checked after, in case we
                // were already gone.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                sys::setns_net(&fd)?;
                sys::unshare_mount()?;
                // Keep our mounts from propagating back to the host's mount namespace.
                sys::mount(
                    Some(none),
                    root,
                    None,
                    sys::MsFlags::MS_SLAVE | sys::MsFlags::MS_REC,
                    None,
                )?;
                // EINVAL: /sys was not a mount point (a chroot); mount a fresh one anyway.
                match sys::umount(sys_dir, true) {
                    Err(e) if e.raw_os_error() != Some(libc::EINVAL) => return Err(e),
                    _ => {}
                }
                sys::mount(
                    Some(sysfs),
                    sys_dir,
                    Some(sysfs),
                    sys::MsFlags::empty(),
                    None,
                )
            });
        }
        Ok(())
    }
}

/// Runs `f` on a fresh thread inside `ns` and returns its result.
pub fn run_in<T: Send>(ns: &NetNs, f: impl FnOnce() -> T + Send) -> Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            ns.enter()?;
            Ok(f())
        })
        .join()
        .unwrap_or_else(|_| Err(Error::Invalid("namespace thread panicked".into())))
    })
}

/// Unmounts and removes `/run/netns/<name>`. The namespace itself goes away once nothing holds
/// it; interfaces left inside go with it (veth) or back to the initial namespace (physical).
pub fn delete_named(name: &str) -> Result<()> {
    if name.is_empty() || name.contains('/') {
        return Err(Error::Invalid(format!("namespace name {name:?}")));
    }
    let p = Path::new(NETNS_DIR).join(name);
    let c = cpath(&p)?;
    // MNT_DETACH never blocks on busy users.
    if let Err(e) = sys::umount(&c, true) {
        // EINVAL: not a mount point (a half-made entry); ENOENT: already gone.
        if !matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOENT)) {
            return Err(Error::io(format!("unmount {}", p.display()), e));
        }
    }
    match std::fs::remove_file(&p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("remove {}", p.display()), e)),
    }
}

/// Names under [`NETNS_DIR`] (empty when the directory does not exist).
pub fn list_named() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The pid a daqtune namespace name carries (`daqtune-<pid>-...`), if it is one of ours.
pub fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let pid = rest.split('-').next()?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pid_only_for_our_names() {
        assert_eq!(owner_pid("daqtune-123-1-tx"), Some(123));
        assert_eq!(owner_pid("daqtune-x-1"), None);
        assert_eq!(owner_pid("daqtune-"), None);
        assert_eq!(owner_pid("dq_wire_0"), None);
        assert_eq!(owner_pid("daqtunex-1"), None);
    }

    #[test]
    fn an_unfinished_namespace_file_is_not_a_namespace() {
        // The pid (so a concurrent run's sweep sees a live owner) and the clock: never a
        // name a dead process with this pid left behind.
        let ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let name = format!("{PREFIX}{}-unfinished-{ns:x}", std::process::id());
        let p = Path::new(NETNS_DIR).join(&name);
        if std::fs::create_dir_all(NETNS_DIR).is_err() || std::fs::write(&p, b"").is_err() {
            return; // not root: /run/netns is not ours to write
        }
        let r = NetNs::open_named(&name);
        let _ = delete_named(&name);
        assert!(r.is_err(), "a plain file was taken for a namespace");
    }

    #[test]
    fn bad_names_refused() {
        assert!(NetNs::create("a/b").is_err());
        assert!(NetNs::create("").is_err());
        assert!(delete_named("../x").is_err());
    }
}
