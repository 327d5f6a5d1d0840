//! A sysfs directory resolved once, whose plain entries are then read with one `lstat` each.
//!
//! [`Host`] resolves every path component by component so that a fixture root's symlinks stay
//! inside the root; for a device directory ten levels deep that is ten `lstat`s per attribute,
//! and a 400-device host reads thousands of attributes. The directory's real path is resolved
//! once through the host; an entry that is a symlink itself (`driver`, `iommu_group`, `physfn`)
//! or a nested path still goes through the host's confined resolver, so nothing read here can
//! escape the root.

use crate::host::Host;
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;

/// Real paths of host directories, resolved parent first: a directory whose parent is known
/// costs one `lstat` (a plain directory) instead of a walk from the root. Anything that is not
/// a plain directory, or any doubt, goes through [`Host::resolve`].
#[derive(Default)]
pub struct Resolver {
    cache: RefCell<HashMap<String, Option<PathBuf>>>,
}

impl Resolver {
    pub fn new() -> Resolver {
        Resolver::default()
    }

    pub fn resolve(&self, host: &Host, path: &str) -> Option<PathBuf> {
        if host.is_live() {
            return Some(PathBuf::from(path));
        }
        if let Some(hit) = self.cache.borrow().get(path) {
            return hit.clone();
        }
        let resolved = self.resolve_uncached(host, path);
        self.cache
            .borrow_mut()
            .insert(path.to_string(), resolved.clone());
        resolved
    }

    fn resolve_uncached(&self, host: &Host, path: &str) -> Option<PathBuf> {
        let trimmed = path.trim_end_matches('/');
        if trimmed.is_empty() {
            return Some(host.root().to_path_buf());
        }
        let plain = |c: &str| !c.is_empty() && c != "." && c != "..";
        match trimmed.rsplit_once('/') {
            Some((parent, last)) if plain(last) && trimmed.starts_with('/') => {
                let base = self.resolve(host, if parent.is_empty() { "/" } else { parent })?;
                let p = base.join(last);
                match std::fs::symlink_metadata(&p) {
                    Ok(m) if m.file_type().is_dir() => Some(p),
                    Ok(_) => host.resolve(trimmed).ok(),
                    Err(_) => None,
                }
            }
            _ => host.resolve(trimmed).ok(),
        }
    }
}

pub struct DevDir<'h> {
    host: &'h Host,
    host_path: String,
    real: Option<PathBuf>,
}

enum Lookup {
    Real(PathBuf),
    Slow,
    Missing,
}

impl<'h> DevDir<'h> {
    pub fn new(host: &'h Host, host_path: &str) -> DevDir<'h> {
        DevDir {
            host,
            host_path: host_path.to_string(),
            real: host.resolve(host_path).ok(),
        }
    }

    /// Resolve through a shared [`Resolver`] (parents already resolved are reused).
    pub fn with(host: &'h Host, resolver: &Resolver, host_path: &str) -> DevDir<'h> {
        DevDir {
            host,
            host_path: host_path.to_string(),
            real: resolver.resolve(host, host_path),
        }
    }

    pub fn host_path(&self, name: &str) -> String {
        format!("{}/{name}", self.host_path)
    }

    fn lookup(&self, name: &str) -> Lookup {
        let Some(real) = &self.real else {
            return Lookup::Slow;
        };
        if name.contains('/') || name == ".." || name == "." {
            return Lookup::Slow;
        }
        let p = real.join(name);
        if self.host.is_live() {
            // No root to stay inside on the live host.
            return Lookup::Real(p);
        }
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => Lookup::Slow,
            Ok(_) => Lookup::Real(p),
            Err(_) => Lookup::Missing,
        }
    }

    /// A trimmed one-line attribute; `None` when absent or unreadable.
    pub fn attr(&self, name: &str) -> Option<String> {
        self.string(name).map(|s| s.trim().to_string())
    }

    pub fn string(&self, name: &str) -> Option<String> {
        match self.lookup(name) {
            Lookup::Real(p) => std::fs::read(p)
                .ok()
                .map(|b| String::from_utf8_lossy(&b).into_owned()),
            Lookup::Slow => self.host.read_string(&self.host_path(name)).ok(),
            Lookup::Missing => None,
        }
    }

    /// At most `limit` bytes; `Err` carries the reason (permission, absence).
    pub fn bytes_limited(&self, name: &str, limit: usize) -> Result<Vec<u8>, String> {
        match self.lookup(name) {
            Lookup::Real(p) => {
                let f = std::fs::File::open(&p)
                    .map_err(|e| format!("{}: {e}", self.host_path(name)))?;
                let mut buf = Vec::with_capacity(limit.min(65536));
                f.take(limit as u64)
                    .read_to_end(&mut buf)
                    .map_err(|e| format!("{}: {e}", self.host_path(name)))?;
                Ok(buf)
            }
            Lookup::Slow => self
                .host
                .read_bytes_limited(&self.host_path(name), limit)
                .map_err(|e| e.to_string()),
            Lookup::Missing => Err(format!("{}: not present", self.host_path(name))),
        }
    }

    /// The raw target of a symlink entry (not followed, so it cannot lead anywhere).
    pub fn link_target(&self, name: &str) -> Option<String> {
        match (&self.real, name.contains('/')) {
            (Some(real), false) => std::fs::read_link(real.join(name))
                .ok()
                .map(|t| t.to_string_lossy().into_owned()),
            _ => self.host.read_link(&self.host_path(name)).ok(),
        }
    }

    /// The last component of a symlink's target (`driver` -> `mlx5_core`).
    pub fn link_basename(&self, name: &str) -> Option<String> {
        self.link_target(name)
            .and_then(|t| t.rsplit('/').next().map(String::from))
    }

    pub fn list(&self, name: &str) -> Vec<String> {
        match self.lookup(name) {
            Lookup::Missing => Vec::new(),
            Lookup::Real(p) => {
                let mut v: Vec<String> = std::fs::read_dir(p)
                    .map(|rd| {
                        rd.filter_map(|e| e.ok())
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                v.sort_unstable();
                v
            }
            Lookup::Slow => self
                .host
                .read_dir(&self.host_path(name))
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn resolver_matches_host() {
        let d = tempfile::tempdir().expect("tmp");
        let dev = d
            .path()
            .join("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0");
        std::fs::create_dir_all(&dev).expect("mkdir");
        std::fs::create_dir_all(d.path().join("sys/bus/pci/devices")).expect("mkdir");
        symlink(
            "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0",
            d.path().join("sys/bus/pci/devices/0000:01:00.0"),
        )
        .expect("ln");
        symlink("/../../..", d.path().join("sys/devices/up")).expect("ln");
        let h = Host::at(d.path()).expect("host");
        let r = Resolver::new();
        for p in [
            "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0",
            "/sys/bus/pci/devices/0000:01:00.0",
            "/sys/devices/up",
            "/sys/devices/nope/x",
            "/",
        ] {
            assert_eq!(
                r.resolve(&h, p),
                h.resolve(p).ok().filter(|x| x.exists()),
                "{p}"
            );
        }
    }

    #[test]
    fn symlinked_entries_stay_in_the_root() {
        let d = tempfile::tempdir().expect("tmp");
        let dev = d.path().join("sys/devices/pci0000:00/0000:00:01.0");
        std::fs::create_dir_all(&dev).expect("mkdir");
        std::fs::write(dev.join("vendor"), "0x15b3\n").expect("w");
        // An entry that points outside the root must not be followed there.
        symlink("/etc/hostname", dev.join("evil")).expect("ln");
        symlink("../../../../../../../../etc/hostname", dev.join("evil2")).expect("ln");
        let h = Host::at(d.path()).expect("host");
        let dd = DevDir::new(&h, "/sys/devices/pci0000:00/0000:00:01.0");
        assert_eq!(dd.attr("vendor").as_deref(), Some("0x15b3"));
        assert_eq!(dd.attr("evil"), None);
        assert_eq!(dd.attr("evil2"), None);
        assert_eq!(dd.attr("missing"), None);
        assert!(dd.bytes_limited("missing", 64).is_err());
        assert_eq!(
            dd.list("."),
            Vec::<String>::new()
                .into_iter()
                .chain(
                    h.read_dir("/sys/devices/pci0000:00/0000:00:01.0")
                        .unwrap_or_default()
                )
                .collect::<Vec<_>>()
        );
    }
}
