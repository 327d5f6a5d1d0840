//! 2 MiB hugepages for one run: use free pages that exist, or reserve the shortfall for the run
//! (capped by available memory) and give it back afterwards; remove map files a run with our
//! file prefix may have left in hugetlbfs mounts.

use serde::Serialize;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub const PAGE_KB: u64 = 2048;
/// Parent of DPDK's per-prefix runtime directories.
pub const DPDK_RUN_DIR: &str = "/var/run/dpdk";
const POOL: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB";
/// Memory left to the rest of the host when reserving: never take the last of it.
const KEEP_FREE_KB: u64 = 512 * 1024;

/// The 2 MiB pool as the kernel reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PoolState {
    pub nr: u64,
    pub free: u64,
    /// Pages promised to mappings but not faulted in yet: not usable by us.
    pub resv: u64,
}

impl PoolState {
    pub fn usable(&self) -> u64 {
        self.free.saturating_sub(self.resv)
    }
}

/// What to do about hugepages for a run that needs `needed` pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    UseExisting,
    /// Raise nr_hugepages from `from` to `to` for the run.
    Reserve {
        from: u64,
        to: u64,
    },
    /// No way to get them; the reason names what is missing.
    Unavailable(String),
}

/// Parses a sysfs counter ("123\n").
pub fn parse_count(s: &str) -> Option<u64> {
    s.trim().parse().ok()
}

/// `MemAvailable` in kB from /proc/meminfo text.
pub fn parse_mem_available_kb(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemAvailable:")?;
        let mut it = rest.split_whitespace();
        let n: u64 = it.next()?.parse().ok()?;
        match it.next() {
            Some("kB") | None => Some(n),
            _ => None,
        }
    })
}

/// Pages a run needs: the mbuf pool plus EAL's own heap (memzones, rings, per-lcore caches,
/// af_packet's per-slot iovec arrays) with slack for rounding to whole pages.
pub fn pages_needed(mbufs: u64, mbuf_size: u64) -> u64 {
    let pool = mbufs * (mbuf_size + 128 + 64);
    let overhead = 64u64 << 20;
    (pool + overhead).div_ceil(PAGE_KB * 1024)
}

/// Decides how to get `needed` pages. Pure so every branch is unit-tested.
pub fn plan(needed: u64, pool: PoolState, mem_available_kb: Option<u64>, may_write: bool) -> Plan {
    if pool.usable() >= needed {
        return Plan::UseExisting;
    }
    let short = needed - pool.usable();
    if !may_write {
        return Plan::Unavailable(format!(
            "{} free 2 MiB hugepages, {needed} needed, and reserving more needs root",
            pool.usable()
        ));
    }
    let Some(avail) = mem_available_kb else {
        return Plan::Unavailable("cannot read MemAvailable from /proc/meminfo".into());
    };
    let can = avail.saturating_sub(KEEP_FREE_KB) / PAGE_KB;
    if can < short {
        return Plan::Unavailable(format!(
            "{} free 2 MiB hugepages, {needed} needed; reserving {short} more would leave less than {} MiB of {} MiB available memory",
            pool.usable(),
            KEEP_FREE_KB / 1024,
            avail / 1024
        ));
    }
    Plan::Reserve {
        from: pool.nr,
        to: pool.nr + short,
    }
}

fn read_pool(root: &Path) -> io::Result<PoolState> {
    let rd = |name: &str| -> io::Result<u64> {
        let p = root.join(name);
        let s = fs::read_to_string(&p)?;
        parse_count(&s).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: not a number: {s:?}", p.display()),
            )
        })
    };
    Ok(PoolState {
        nr: rd("nr_hugepages")?,
        free: rd("free_hugepages")?,
        resv: rd("resv_hugepages").unwrap_or(0),
    })
}

/// Reads the live 2 MiB pool.
pub fn live_pool() -> io::Result<PoolState> {
    read_pool(Path::new(POOL))
}

/// A reservation made for one run; dropping it restores the page count it found.
#[derive(Debug)]
pub struct Reservation {
    path: PathBuf,
    from: u64,
    to: u64,
}

impl Reservation {
    /// Raises the pool to `to` pages; fails (and restores) when the kernel could not find that
    /// many contiguous pages.
    pub fn reserve(from: u64, to: u64) -> io::Result<Reservation> {
        let path = Path::new(POOL).join("nr_hugepages");
        fs::write(&path, format!("{to}\n"))?;
        let r = Reservation { path, from, to };
        let got = fs::read_to_string(&r.path)
            .ok()
            .and_then(|s| parse_count(&s))
            .unwrap_or(0);
        if got < to {
            // Drop restores `from`.
            return Err(io::Error::other(format!(
                "asked the kernel for {to} 2 MiB hugepages, got {got} (memory too fragmented)"
            )));
        }
        Ok(r)
    }

    pub fn added(&self) -> u64 {
        self.to - self.from
    }

    /// Restores the prior count now; returns it and the count read back (higher while this
    /// process still maps pages: the kernel frees those surplus pages when they are unmapped).
    pub fn release(self) -> io::Result<(u64, u64)> {
        let path = self.path.clone();
        let from = self.from;
        drop(self);
        let now = fs::read_to_string(path).and_then(|s| {
            parse_count(&s).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, s))
        })?;
        Ok((from, now))
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // Pages still mapped by someone else stay as surplus and are freed by the kernel when
        // unmapped; writing the old count never takes pages away from a user.
        let _ = fs::write(&self.path, format!("{}\n", self.from));
    }
}

/// hugetlbfs mount points in /proc/mounts text.
pub fn hugetlbfs_mounts(mounts: &str) -> Vec<PathBuf> {
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && f[2] == "hugetlbfs").then(|| PathBuf::from(unescape_mount(f[1])))
        })
        .collect()
}

/// /proc/mounts escapes space, tab, newline and backslash as octal.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Removes `<prefix>map_*` files (DPDK's hugepage backing files) from every hugetlbfs mount and
/// DPDK's runtime directory for `prefix`. Only names carrying our unique prefix are touched.
pub fn sweep_leftovers(prefix: &str) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    let want = format!("{prefix}map_");
    for dir in hugetlbfs_mounts(&mounts) {
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(&want)
                && fs::remove_file(e.path()).is_ok()
            {
                removed.push(e.path());
            }
        }
    }
    for base in [DPDK_RUN_DIR, "/run/dpdk"] {
        let d = Path::new(base).join(prefix);
        if d.is_dir() && fs::remove_dir_all(&d).is_ok() {
            removed.push(d);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(nr: u64, free: u64) -> PoolState {
        PoolState { nr, free, resv: 0 }
    }

    #[test]
    fn existing_pages_are_used() {
        assert_eq!(
            plan(64, pool(128, 100), Some(1 << 20), false),
            Plan::UseExisting
        );
    }

    #[test]
    fn shortfall_is_reserved_when_memory_allows() {
        assert_eq!(
            plan(64, pool(10, 4), Some(4 << 20), true),
            Plan::Reserve { from: 10, to: 70 }
        );
        // Reserved-but-unfaulted pages do not count as free.
        let p = PoolState {
            nr: 64,
            free: 64,
            resv: 64,
        };
        assert_eq!(
            plan(64, p, Some(4 << 20), true),
            Plan::Reserve { from: 64, to: 128 }
        );
    }

    #[test]
    fn unavailable_without_root_or_memory() {
        assert!(
            matches!(plan(64, pool(0, 0), Some(4 << 20), false), Plan::Unavailable(m) if m.contains("root"))
        );
        assert!(
            matches!(plan(64, pool(0, 0), Some(600 * 1024), true), Plan::Unavailable(m) if m.contains("available memory"))
        );
        assert!(matches!(
            plan(64, pool(0, 0), None, true),
            Plan::Unavailable(_)
        ));
    }

    #[test]
    fn meminfo_parsing() {
        let t = "MemTotal:       24000000 kB\nMemFree:  1 kB\nMemAvailable:   23000000 kB\n";
        assert_eq!(parse_mem_available_kb(t), Some(23_000_000));
        assert_eq!(parse_mem_available_kb(""), None);
        assert_eq!(parse_mem_available_kb("MemAvailable: (null)"), None);
        assert_eq!(parse_mem_available_kb("MemAvailable: 5 MB"), None);
        assert_eq!(parse_count("17\n"), Some(17));
        assert_eq!(parse_count("garbage"), None);
    }

    #[test]
    fn mounts_parsing() {
        let m = "sysfs /sys sysfs rw 0 0\nhugetlbfs /dev/hugepages hugetlbfs rw,pagesize=2M 0 0\nnone /mnt/huge\\0401G hugetlbfs rw,pagesize=1024M 0 0\n";
        assert_eq!(
            hugetlbfs_mounts(m),
            vec![
                PathBuf::from("/dev/hugepages"),
                PathBuf::from("/mnt/huge 1G")
            ]
        );
        assert!(hugetlbfs_mounts("").is_empty());
        assert!(hugetlbfs_mounts("garbage\n\\\n").is_empty());
    }

    #[test]
    fn pages_needed_covers_pool_and_heap() {
        let n = pages_needed(8191, 2304);
        assert!(n * PAGE_KB * 1024 >= 8191 * 2304 + (64 << 20));
        assert!(n < 64);
    }

    #[test]
    fn sysfs_pool_reading() {
        let d = tempfile_dir();
        fs::write(d.join("nr_hugepages"), "16\n").expect("write");
        fs::write(d.join("free_hugepages"), "12\n").expect("write");
        assert_eq!(
            read_pool(&d).expect("pool"),
            PoolState {
                nr: 16,
                free: 12,
                resv: 0
            }
        );
        fs::write(d.join("free_hugepages"), "(null)\n").expect("write");
        assert!(read_pool(&d).is_err());
        let _ = fs::remove_dir_all(&d);
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("dqt-huge-test-{}", std::process::id()));
        fs::create_dir_all(&d).expect("mkdir");
        d
    }
}
