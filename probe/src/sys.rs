//! The one system-call layer of daqtune: the effective uid, `flock`, network and mount
//! namespaces (`unshare`, `setns`), `mount`/`umount2`, signals to a child, and the interface
//! ioctls (SIOCGIFMTU/SIOCSIFMTU). Every crate above (engine, selftest, the DPDK helper) calls
//! these instead of `libc` directly, so each call is written, checked and documented once.
//!
//! Built on `nix`, whose wrappers are safe: the one `unsafe` block left is the MTU ioctl,
//! which hands the kernel a pointer to a C struct. The FFI to NVML, CUDA, DPDK and ibverbs,
//! and the self-test's netlink and packet sockets, stay in their own modules.
//!
//! The namespace and mount calls take `&CStr` paths and allocate nothing, so they may be used
//! between `fork` and `exec` (`Command::pre_exec`), where only async-signal-safe calls are
//! allowed.

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::sched::CloneFlags;
use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

pub use nix::mount::MsFlags;

/// The effective user id of this process.
pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Whether this process runs as root (reads then have root's view of sysfs and procfs).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The kernel's id of the calling thread (`/proc/self/task/<tid>`).
pub fn gettid() -> i32 {
    nix::unistd::gettid().as_raw()
}

/// An exclusive `flock` on an open file: released when this is dropped, or when the process
/// dies (so a killed holder never leaves a stale lock behind).
#[derive(Debug)]
pub struct FileLock(Flock<File>);

impl FileLock {
    /// The locked file.
    pub fn file(&self) -> &File {
        &self.0
    }
}

/// Takes an exclusive lock on `f`, waiting for whoever holds it (a signal's EINTR retries).
pub fn lock_exclusive(f: File) -> io::Result<FileLock> {
    let mut f = f;
    loop {
        match Flock::lock(f, FlockArg::LockExclusive) {
            Ok(l) => return Ok(FileLock(l)),
            Err((back, Errno::EINTR)) => f = back,
            Err((_, e)) => return Err(e.into()),
        }
    }
}

/// Takes an exclusive lock on `f` if nobody holds one: `Ok(None)` when another process (or
/// another open file description in this one) holds it.
pub fn try_lock_exclusive(f: File) -> io::Result<Option<FileLock>> {
    match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
        Ok(l) => Ok(Some(FileLock(l))),
        Err((_, Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(e.into()),
    }
}

/// Moves the calling thread into a new network namespace (CAP_SYS_ADMIN). Threads it creates
/// later inherit it; other threads of the process stay where they are.
pub fn unshare_net() -> io::Result<()> {
    nix::sched::unshare(CloneFlags::CLONE_NEWNET).map_err(io::Error::from)
}

/// Gives the calling thread a private copy of its mount namespace (CAP_SYS_ADMIN).
pub fn unshare_mount() -> io::Result<()> {
    nix::sched::unshare(CloneFlags::CLONE_NEWNS).map_err(io::Error::from)
}

/// Moves the calling thread into the network namespace `ns` (an open nsfs file).
pub fn setns_net(ns: impl AsFd) -> io::Result<()> {
    nix::sched::setns(ns, CloneFlags::CLONE_NEWNET).map_err(io::Error::from)
}

/// mount(2): `source` and `fstype` may be absent where the kind of mount needs none (a bind,
/// a propagation change), `data` is the file system's option string.
pub fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: MsFlags,
    data: Option<&CStr>,
) -> io::Result<()> {
    nix::mount::mount(source, target, fstype, flags, data).map_err(io::Error::from)
}

/// umount2(2); `detach` is MNT_DETACH (lazy: never blocks on a busy mount).
pub fn umount(target: &CStr, detach: bool) -> io::Result<()> {
    let flags = if detach {
        nix::mount::MntFlags::MNT_DETACH
    } else {
        nix::mount::MntFlags::empty()
    };
    nix::mount::umount2(target, flags).map_err(io::Error::from)
}

/// Sends signal `sig` (a number, as `libc::SIGTERM`) to the process `pid`.
pub fn kill(pid: u32, sig: i32) -> io::Result<()> {
    let pid = i32::try_from(pid)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    let sig = nix::sys::signal::Signal::try_from(sig).map_err(io::Error::from)?;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).map_err(io::Error::from)
}

/// An interface's MTU on the running kernel (SIOCGIFMTU; no `ip` involved).
pub fn if_mtu(ifname: &str) -> io::Result<u32> {
    let mut req = ifreq_for(ifname)?;
    ifreq_ioctl(libc::SIOCGIFMTU, &mut req)?;
    // SAFETY: after a successful SIOCGIFMTU the union holds ifru_mtu (an integer: any bit
    // pattern is a valid value).
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    u32::try_from(mtu).map_err(|_| io::Error::other(format!("{ifname}: MTU {mtu} reported")))
}

/// Sets an interface's MTU on the running kernel (SIOCSIFMTU).
pub fn set_if_mtu(ifname: &str, mtu: u32) -> io::Result<()> {
    let mut req = ifreq_for(ifname)?;
    req.ifr_ifru.ifru_mtu = i32::try_from(mtu)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "MTU out of range"))?;
    ifreq_ioctl(libc::SIOCSIFMTU, &mut req)
}

/// An `ifreq` naming `ifname`, the rest zero.
fn ifreq_for(ifname: &str) -> io::Result<libc::ifreq> {
    let bytes = ifname.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad interface name",
        ));
    }
    // SAFETY: ifreq is a plain C struct (a name array and a union of integers and sockaddrs)
    // for which all-zero bytes are a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(req)
}

/// An interface ioctl on a datagram socket of this call's own.
fn ifreq_ioctl(request: libc::Ioctl, req: &mut libc::ifreq) -> io::Result<()> {
    use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};
    let s: OwnedFd = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    // SAFETY: `req` is a valid, exclusively borrowed ifreq that outlives the call, and the
    // requests used here (SIOCGIFMTU, SIOCSIFMTU) read or write only that struct.
    let r = unsafe { libc::ioctl(s.as_raw_fd(), request, req as *mut libc::ifreq) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn euid_agrees_with_is_root() {
        assert_eq!(is_root(), euid() == 0);
    }

    #[test]
    fn a_held_lock_is_refused_then_free_after_drop() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("lock");
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&p)
                .expect("open")
        };
        let held = lock_exclusive(open()).expect("lock");
        // A second open file description is a second holder, as another process would be.
        assert!(try_lock_exclusive(open()).expect("try").is_none());
        drop(held);
        assert!(try_lock_exclusive(open()).expect("try").is_some());
    }

    #[test]
    fn mtu_of_a_bad_name_is_refused_before_any_call() {
        for bad in ["", "a-name-longer-than-ifnamsiz", "nul\0"] {
            let e = if_mtu(bad).expect_err(bad);
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
            assert!(set_if_mtu(bad, 1500).is_err());
        }
    }

    #[test]
    fn loopback_mtu_reads() {
        // Every network namespace has lo; its MTU is 65536 by default, never 0.
        match if_mtu("lo") {
            Ok(m) => assert!(m > 0),
            // A sandbox without sockets: nothing to judge.
            Err(e) => assert!(e.raw_os_error().is_some(), "{e}"),
        }
    }

    #[test]
    fn kill_refuses_an_unknown_signal() {
        let e = kill(std::process::id(), 9999).expect_err("signal 9999");
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }
}
