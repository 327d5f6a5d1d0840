//! A device directory and the entries read from it, all through [`Host`] (so reads stay inside
//! a host root, hit the host's resolved-directory cache, and are recorded by snapshots).

use crate::host::Host;

pub struct DevDir<'h> {
    host: &'h Host,
    host_path: String,
}

impl<'h> DevDir<'h> {
    pub fn new(host: &'h Host, host_path: &str) -> DevDir<'h> {
        DevDir {
            host,
            host_path: host_path.trim_end_matches('/').to_string(),
        }
    }

    pub fn host_path(&self, name: &str) -> String {
        format!("{}/{name}", self.host_path)
    }

    /// A trimmed one-line attribute; `None` when absent or unreadable.
    pub fn attr(&self, name: &str) -> Option<String> {
        self.host.read_attr(&self.host_path(name)).ok()
    }

    pub fn string(&self, name: &str) -> Option<String> {
        self.host.read_string(&self.host_path(name)).ok()
    }

    /// At most `limit` bytes; `Err` carries the reason (permission, absence).
    pub fn bytes_limited(&self, name: &str, limit: usize) -> Result<Vec<u8>, String> {
        self.host
            .read_bytes_limited(&self.host_path(name), limit)
            .map_err(|e| e.to_string())
    }

    /// Config space as the decoders need it, read sparsely ([`crate::pci::config::read_sparse`]).
    pub fn config_space(&self, name: &str) -> Result<Vec<u8>, String> {
        use crate::pci::config;
        let f = self
            .host
            .open_regular(&self.host_path(name), config::EXTENDED_LEN)
            .map_err(|e| e.to_string())?;
        let size = usize::try_from(f.len).unwrap_or(config::EXTENDED_LEN);
        config::read_sparse(size, &mut |off, len| f.read_at(off as u64, len))
            .map(|(bytes, _)| bytes)
            .map_err(|e| format!("{}: {e}", self.host_path(name)))
    }

    /// The raw target of a symlink entry.
    pub fn link_target(&self, name: &str) -> Option<String> {
        self.host.read_link(&self.host_path(name)).ok()
    }

    /// The last component of a symlink's target (`driver` -> `mlx5_core`).
    pub fn link_basename(&self, name: &str) -> Option<String> {
        self.link_target(name)
            .and_then(|t| t.rsplit('/').next().map(String::from))
    }

    /// Sorted entry names of a subdirectory; empty when absent.
    pub fn list(&self, name: &str) -> Vec<String> {
        self.host
            .read_dir(&self.host_path(name))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn entries_stay_in_the_root() {
        let d = tempfile::tempdir().expect("tmp");
        let dev = d.path().join("sys/devices/pci0000:00/0000:00:01.0");
        std::fs::create_dir_all(&dev).expect("mkdir");
        std::fs::write(dev.join("vendor"), "0x15b3\n").expect("w");
        symlink("../../../../../../../../etc/hostname", dev.join("evil")).expect("ln");
        symlink("../../../bus/pci/drivers/mlx5_core", dev.join("driver")).expect("ln");
        let h = Host::at(d.path()).expect("host");
        let dd = DevDir::new(&h, "/sys/devices/pci0000:00/0000:00:01.0/");
        assert_eq!(dd.attr("vendor").as_deref(), Some("0x15b3"));
        assert_eq!(dd.attr("evil"), None);
        assert_eq!(dd.attr("missing"), None);
        assert!(dd.bytes_limited("missing", 64).is_err());
        assert_eq!(dd.link_basename("driver").as_deref(), Some("mlx5_core"));
        assert!(dd.list("net").is_empty());
    }
}
