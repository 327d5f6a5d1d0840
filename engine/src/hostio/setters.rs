//! The engine's writers: every change `apply` and `revert` make to a host's files, kernel
//! attributes, config space, mounts, MTU and modules goes through here (GPU clocks and
//! persistence through [`super::gpu`]); the system calls themselves are
//! `daqtune_probe::sys`'s.
//!
//! Everything goes through the [`Writer`] trait so tests can inject faults (a read-only file,
//! a disk that fills up half-way through a write) and check that nothing is left half-written.
//! Paths given to a `Writer` are real paths (already mapped into `--root DIR` by the caller).

use daqtune_probe::net::ethtool::{
    describe_error, shown_settings, shown_value, Client, Group, GroupState, Settings,
};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The selected word of a sysfs choice attribute, which lists every choice and brackets the
/// one in effect (`always [madvise] never`: THP's `enabled` and `defrag`); a file of one word
/// is that word. `None` for anything else. Writing takes the bare word, so a read-back and a
/// revert compare and write this, not the listing.
pub fn selected_choice(text: &str) -> Option<&str> {
    let t = text.trim();
    if let Some(open) = t.find('[') {
        let rest = &t[open + 1..];
        let close = rest.find(']')?;
        let word = &rest[..close];
        return (!word.is_empty() && !word.contains(char::is_whitespace)).then_some(word);
    }
    (!t.is_empty() && !t.contains(char::is_whitespace)).then_some(t)
}

/// Where a change lands: the running kernel, or a host root directory standing in for it
/// (`--root DIR`: a sysfs attribute is a plain file, and what is written is what the next
/// check reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Live,
    Root,
}

pub trait Writer {
    /// Replace `path` with `data` atomically: a temp file in the same directory, fsync, rename,
    /// fsync of the directory. Parent directories are created (mode 0755).
    fn write_file(&mut self, path: &Path, data: &[u8], mode: u32) -> io::Result<()>;
    /// Remove a file or symlink; a missing one is not an error.
    fn remove(&mut self, path: &Path) -> io::Result<()>;
    /// Create (or replace) a symlink atomically.
    fn symlink(&mut self, target: &str, path: &Path) -> io::Result<()>;
    /// Write a kernel attribute (sysfs, procfs). Live: one `write(2)` on the open attribute
    /// (sysfs cannot rename); under a root: an atomic file write of `value\n`.
    fn write_attr(&mut self, path: &Path, value: &str, target: Target) -> io::Result<()>;
    /// Write `data` at `offset` of an existing file (PCI config space).
    fn pwrite(&mut self, path: &Path, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Set an interface's MTU on the running kernel (SIOCSIFMTU).
    fn set_mtu(&mut self, ifname: &str, mtu: u32) -> io::Result<()> {
        set_mtu_live(ifname, mtu)
    }
    /// An interface's MTU as the running kernel reports it (SIOCGIFMTU): the read-back of
    /// [`Writer::set_mtu`], here so that a test double of the kernel answers for both.
    fn mtu(&self, ifname: &str) -> io::Result<u32> {
        get_mtu_live(ifname)
    }
    /// An interface's ethtool group (rings, coalescing, ...) as the running kernel reports it
    /// (ethtool netlink): the read-back of [`Writer::set_ethtool`], here so that a test double
    /// of the kernel answers for both.
    fn ethtool(&self, ifname: &str, group: Group) -> io::Result<GroupState> {
        Client::open()?.get(group, ifname)
    }
    /// Set keys of an interface's ethtool group on the running kernel (ethtool netlink).
    fn set_ethtool(&mut self, ifname: &str, group: Group, to: &Settings) -> io::Result<()> {
        Client::open()?.set(group, ifname, to)
    }
    /// Load a module, or unload it with `remove` (modprobe).
    fn modprobe(&mut self, name: &str, remove: bool) -> io::Result<()> {
        modprobe(name, remove)
    }
    /// Mount `fstype` (source named as the type, as `mount -t hugetlbfs none` does) at
    /// `target` with the comma-separated `options` (mount(2); live hosts only).
    fn mount(&mut self, fstype: &str, target: &Path, options: &str) -> io::Result<()> {
        mount_live(fstype, target, options)
    }
    /// Unmount `target` (umount2(2), no flags: a busy mount is refused, never detached).
    fn umount(&mut self, target: &Path) -> io::Result<()> {
        umount_live(target)
    }
}

/// Whether the kernel lists a `fstype` mount at `target` now, read afresh through `host` from
/// /proc/self/mounts (the mount table of daqtune's own mount namespace, where it mounted).
pub fn mounted(host: &daqtune_probe::Host, target: &str, fstype: &str) -> bool {
    host.read_string("/proc/self/mounts").is_ok_and(|t| {
        daqtune_probe::mem::parse_mounts(&t)
            .iter()
            .any(|m| m.target == target && m.fstype == fstype)
    })
}

fn cstring(what: &str, s: &[u8]) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(s).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte"),
        )
    })
}

pub fn mount_live(fstype: &str, target: &Path, options: &str) -> io::Result<()> {
    use daqtune_probe::sys::MsFlags;
    use std::os::unix::ffi::OsStrExt;
    // nosuid/nodev/noexec are flags of the mount, not options of the file system (hugetlbfs
    // refuses them in its data string), as mount(8) splits them.
    let mut flags = MsFlags::empty();
    let mut fs_opts = Vec::new();
    for o in options.split(',').filter(|o| !o.is_empty()) {
        match o {
            "nosuid" => flags |= MsFlags::MS_NOSUID,
            "nodev" => flags |= MsFlags::MS_NODEV,
            "noexec" => flags |= MsFlags::MS_NOEXEC,
            o => fs_opts.push(o),
        }
    }
    let src = cstring("file system type", fstype.as_bytes())?;
    let dst = cstring("mount point", target.as_os_str().as_bytes())?;
    let data = cstring("mount options", fs_opts.join(",").as_bytes())?;
    daqtune_probe::sys::mount(Some(&src), &dst, Some(&src), flags, Some(&data))
}

pub fn umount_live(target: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let dst = cstring("mount point", target.as_os_str().as_bytes())?;
    daqtune_probe::sys::umount(&dst, false)
}

/// A change that went through: what its read-back shows, and whether the read-back could
/// not confirm it (a lock NVML cannot show while the GPU is busy), which is printed as a
/// warning instead of `ok`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    pub message: String,
    pub unconfirmed: bool,
    /// Done as far as the running kernel allows; the rest comes with the next boot (a
    /// hugepage pool filled in part whose whole count the kernel line reserves).
    pub pending_boot: bool,
}

impl From<String> for Done {
    fn from(message: String) -> Self {
        Done {
            message,
            unconfirmed: false,
            pending_boot: false,
        }
    }
}

/// Whether a module is loaded now, read afresh through `host`: a `/proc/modules` line or a
/// `/sys/module/NAME` directory (a module built into the kernel has only the latter). Module
/// names take `-` and `_` alike.
pub fn module_loaded(host: &daqtune_probe::Host, name: &str) -> bool {
    let n = name.replace('-', "_");
    let listed = host.read_string("/proc/modules").is_ok_and(|t| {
        t.lines()
            .any(|l| l.split_whitespace().next() == Some(n.as_str()))
    });
    listed || host.is_dir(&format!("/sys/module/{n}"))
}

/// A fault to inject, for tests of the failure paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Writing the file whose name ends with this suffix fails with EROFS before anything is
    /// written.
    ReadOnly(String),
    /// Writing the file whose name ends with `suffix` runs out of space after `bytes` bytes.
    DiskFull { suffix: String, bytes: usize },
}

/// The real writer.
#[derive(Debug, Default)]
pub struct FsWriter {
    pub fault: Option<Fault>,
}

impl FsWriter {
    pub fn new() -> Self {
        FsWriter::default()
    }

    pub fn with_fault(fault: Fault) -> Self {
        FsWriter { fault: Some(fault) }
    }

    fn check_read_only(&self, path: &Path) -> io::Result<()> {
        if let Some(Fault::ReadOnly(suffix)) = &self.fault {
            if path.to_string_lossy().ends_with(suffix.as_str()) {
                return Err(io::Error::from_raw_os_error(libc::EROFS));
            }
        }
        Ok(())
    }
}

use daqtune_probe::fsutil::{atomic_replace, sync_dir, tmp_name};

impl Writer for FsWriter {
    fn write_file(&mut self, path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
        self.check_read_only(path)?;
        let limit = match &self.fault {
            Some(Fault::DiskFull { suffix, bytes })
                if path.to_string_lossy().ends_with(suffix.as_str()) =>
            {
                Some(*bytes)
            }
            _ => None,
        };
        atomic_replace(path, mode, &mut |f| match limit {
            Some(b) => {
                f.write_all(&data[..b.min(data.len())])?;
                Err(io::Error::from_raw_os_error(libc::ENOSPC))
            }
            None => f.write_all(data),
        })
    }

    fn remove(&mut self, path: &Path) -> io::Result<()> {
        self.check_read_only(path)?;
        match fs::remove_file(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            r => {
                if let Some(d) = path.parent() {
                    let _ = sync_dir(d);
                }
                r
            }
        }
    }

    fn symlink(&mut self, target: &str, path: &Path) -> io::Result<()> {
        self.check_read_only(path)?;
        let dir = path
            .parent()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no parent"))?;
        fs::create_dir_all(dir)?;
        let tmp = tmp_name(path)?;
        let _ = fs::remove_file(&tmp);
        std::os::unix::fs::symlink(target, &tmp)?;
        if let Err(e) = fs::rename(&tmp, path) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        sync_dir(dir)
    }

    fn write_attr(&mut self, path: &Path, value: &str, target: Target) -> io::Result<()> {
        self.check_read_only(path)?;
        match target {
            Target::Live => {
                let mut f = OpenOptions::new().write(true).open(path)?;
                // One write: sysfs stores take the whole value from a single write(2).
                let n = f.write(value.as_bytes())?;
                if n != value.len() {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "short write to a kernel attribute",
                    ));
                }
                Ok(())
            }
            Target::Root => {
                let mode = fs::metadata(path)
                    .map(|m| m.permissions().mode() & 0o7777)
                    .unwrap_or(0o644);
                self.write_file(path, format!("{value}\n").as_bytes(), mode)
            }
        }
    }

    fn pwrite(&mut self, path: &Path, offset: u64, data: &[u8]) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.check_read_only(path)?;
        let f = OpenOptions::new().write(true).open(path)?;
        f.write_all_at(data, offset)?;
        f.sync_all().or(Ok(()))
    }
}

/// The kernel lockdown mode that refuses raw hardware writes (PCI config space), if it is on:
/// `integrity` and `confidentiality` do, `none` does not.
pub fn locked_down(lockdown: Option<&str>) -> Option<&str> {
    lockdown.filter(|l| matches!(*l, "integrity" | "confidentiality"))
}

/// What a write refused by kernel lockdown means and how to get past it.
pub fn lockdown_refusal(what: &str, mode: &str) -> String {
    format!(
        "{what}: refused by kernel lockdown ({mode}); Secure Boot locks the kernel down: disable Secure Boot in the firmware setup (or `mokutil --disable-validation` and reboot), apply, then re-enable it"
    )
}

/// Why a write to a kernel interface failed, in words a user can act on.
pub fn explain_write_error(e: &io::Error, what: &str, lockdown: Option<&str>) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) if locked_down(lockdown).is_some() => {
            lockdown_refusal(what, lockdown.unwrap_or("on"))
        }
        Some(libc::EPERM) | Some(libc::EACCES) => {
            format!("{what}: permission denied ({e}); run as root")
        }
        Some(libc::EROFS) => format!("{what}: read-only file system ({e})"),
        Some(libc::ENOSPC) => format!("{what}: no space left on device ({e})"),
        Some(libc::EIO) => format!("{what}: the kernel refused the value ({e})"),
        _ => format!("{what}: {e}"),
    }
}

/// Why an ethtool group was not set (apply and revert of `Entry::Ethtool`): the kernel's
/// refusal worded with what was asked, or a read-back that does not show it.
#[derive(Debug, thiserror::Error)]
pub enum EthtoolError {
    /// `shown`: the settings asked for, as [`shown_settings`] words them.
    #[error("{ifname}: setting {} ({shown}): {}", .group.name(), describe_error(.source))]
    Set {
        ifname: String,
        group: Group,
        shown: String,
        source: io::Error,
    },
    /// Reading the group before the change (its original values, for the journal).
    #[error("{ifname}: {}: {}", .group.name(), describe_error(.source))]
    Read {
        ifname: String,
        group: Group,
        source: io::Error,
    },
    #[error("{ifname}: read back: {}", describe_error(.source))]
    ReadBack { ifname: String, source: io::Error },
    /// `wrong`: each key that did not take, as set and as read.
    #[error("{ifname}: {} did not take: {}", .group.name(), .wrong.join("; "))]
    NotTaken {
        ifname: String,
        group: Group,
        wrong: Vec<String>,
    },
}

/// Set `to` on an interface's ethtool group (apply and revert of `Entry::Ethtool`).
pub fn set_ethtool_worded(
    w: &mut dyn Writer,
    ifname: &str,
    group: Group,
    to: &Settings,
) -> Result<(), EthtoolError> {
    w.set_ethtool(ifname, group, to)
        .map_err(|source| EthtoolError::Set {
            ifname: ifname.to_string(),
            group,
            shown: shown_settings(group, to),
            source,
        })
}

/// The read-back after [`set_ethtool_worded`]: each key that did not take, as set and as read.
pub fn ethtool_reads_back(
    w: &dyn Writer,
    ifname: &str,
    group: Group,
    to: &Settings,
) -> Result<(), EthtoolError> {
    let after = w
        .ethtool(ifname, group)
        .map_err(|source| EthtoolError::ReadBack {
            ifname: ifname.to_string(),
            source,
        })?;
    let wrong: Vec<String> = to
        .iter()
        .filter(|(k, v)| after.get(k) != Some(**v))
        .map(|(k, v)| {
            format!(
                "{k}: set {}, reads back {}",
                shown_value(group, k, *v),
                after
                    .get(k)
                    .map(|x| shown_value(group, k, x))
                    .unwrap_or_else(|| "nothing".into())
            )
        })
        .collect();
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(EthtoolError::NotTaken {
            ifname: ifname.to_string(),
            group,
            wrong,
        })
    }
}

/// Set an interface's MTU on the running kernel with SIOCSIFMTU (no `ip` involved).
pub fn set_mtu_live(ifname: &str, mtu: u32) -> io::Result<()> {
    daqtune_probe::sys::set_if_mtu(ifname, mtu)
}

/// Read an interface's MTU from the running kernel with SIOCGIFMTU.
pub fn get_mtu_live(ifname: &str) -> io::Result<u32> {
    daqtune_probe::sys::if_mtu(ifname)
}

/// Load a module with modprobe (it resolves dependencies and module options; the kernel's
/// finit_module alone does neither).
pub fn modprobe(name: &str, remove: bool) -> io::Result<()> {
    let exe = ["/usr/sbin/modprobe", "/sbin/modprobe", "/usr/bin/modprobe"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "modprobe is not installed (kmod package)",
            )
        })?;
    let mut cmd = std::process::Command::new(exe);
    if remove {
        cmd.arg("-r");
    }
    let out = cmd.arg("--").arg(name).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "modprobe {name}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .expect("dir")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn atomic_write_and_mode() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("a/b/f.conf");
        let mut w = FsWriter::new();
        w.write_file(&p, b"one\n", 0o600).expect("write");
        assert_eq!(fs::read(&p).expect("read"), b"one\n");
        assert_eq!(
            fs::metadata(&p).expect("m").permissions().mode() & 0o777,
            0o600
        );
        w.write_file(&p, b"two\n", 0o644).expect("rewrite");
        assert_eq!(fs::read(&p).expect("read"), b"two\n");
        assert_eq!(list(p.parent().expect("p")), ["f.conf"]);
    }

    #[test]
    fn disk_full_leaves_old_content_and_no_temp() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("f");
        fs::write(&p, b"original\n").expect("seed");
        let mut w = FsWriter::with_fault(Fault::DiskFull {
            suffix: "/f".into(),
            bytes: 3,
        });
        let e = w
            .write_file(&p, b"a much longer replacement\n", 0o644)
            .expect_err("must fail");
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(fs::read(&p).expect("read"), b"original\n");
        assert_eq!(list(d.path()), ["f"]);
        // Other files are written.
        w.write_file(&d.path().join("g"), b"new\n", 0o644)
            .expect("other write");
        assert_eq!(fs::read(d.path().join("g")).expect("read"), b"new\n");
    }

    #[test]
    fn read_only_and_symlinks() {
        let d = tempfile::tempdir().expect("tmp");
        let mut w = FsWriter::with_fault(Fault::ReadOnly("ro.conf".into()));
        let e = w
            .write_file(&d.path().join("ro.conf"), b"x", 0o644)
            .expect_err("ro");
        assert_eq!(e.raw_os_error(), Some(libc::EROFS));
        assert!(!d.path().join("ro.conf").exists());
        let l = d.path().join("wants/x.service");
        w.symlink("/etc/systemd/system/x.service", &l)
            .expect("link");
        assert_eq!(
            fs::read_link(&l).expect("rl").to_string_lossy(),
            "/etc/systemd/system/x.service"
        );
        w.remove(&l).expect("rm");
        w.remove(&l).expect("rm again is fine");
    }

    #[test]
    fn lockdown_is_named() {
        let e = io::Error::from_raw_os_error(libc::EPERM);
        let m = explain_write_error(&e, "MRRS of 0000:01:00.0", Some("integrity"));
        assert!(m.contains("lockdown") && m.contains("Secure Boot"), "{m}");
        assert!(explain_write_error(&e, "x", Some("none")).contains("root"));
    }

    #[test]
    fn mtu_ioctl_errors_cleanly() {
        assert!(get_mtu_live("no-such-if0").is_err());
        assert!(set_mtu_live("", 9000).is_err());
        assert!(set_mtu_live("0123456789abcdefg", 9000).is_err());
        // Loopback always exists in this namespace; reading is harmless.
        if let Ok(m) = get_mtu_live("lo") {
            assert!(m >= 1500);
        }
    }
}
