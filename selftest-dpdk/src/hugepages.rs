//! 2 MiB hugepages for one run: use free pages that exist, or reserve the shortfall for the run
//! (capped by available memory) and give it back afterwards; remove map files a run with our
//! file prefix may have left in hugetlbfs mounts.

use daqtune_probe::Host;
use serde::{Deserialize, Serialize};
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

/// One counter of a pool directory, read through the host root (only probe reads sysfs).
fn read_count(host: &Host, path: &str) -> io::Result<u64> {
    let s = host
        .read_string(path)
        .map_err(|e| io::Error::other(e.to_string()))?;
    parse_count(&s).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{path}: not a number: {s:?}"),
        )
    })
}

fn read_pool(host: &Host, dir: &str) -> io::Result<PoolState> {
    let rd = |name: &str| read_count(host, &format!("{dir}/{name}"));
    Ok(PoolState {
        nr: rd("nr_hugepages")?,
        free: rd("free_hugepages")?,
        resv: rd("resv_hugepages").unwrap_or(0),
    })
}

/// Reads the live 2 MiB pool.
pub fn live_pool() -> io::Result<PoolState> {
    read_pool(&Host::live(), POOL)
}

/// Where a run notes the reservation it holds, so that the next run can undo it when this
/// one was killed (SIGKILL, power loss of the process) before restoring the pool.
pub const JOURNAL_DIR: &str = "/run/daqtune";

/// One run's note of the pool change it made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub pid: u32,
    /// Start time of that process (clock ticks since boot): tells it from a reused pid.
    pub starttime: Option<u64>,
    pub from: u64,
    pub to: u64,
}

/// What to write back for a dead run's entry, given the pool's count now: its prior count when
/// nobody changed the pool since (else leave the pool alone; someone else owns it now).
pub fn stale_restore(current_nr: u64, e: &JournalEntry) -> Option<u64> {
    (current_nr == e.to && e.from < e.to).then_some(e.from)
}

fn journal_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("dpdk-hugepages-{pid}.json"))
}

fn write_journal(dir: &Path, e: &JournalEntry) -> io::Result<PathBuf> {
    fs::create_dir_all(dir)?;
    let path = journal_path(dir, e.pid);
    let text = serde_json::to_string(e).map_err(io::Error::other)?;
    daqtune_probe::fsutil::write_atomic(&path, text.as_bytes(), 0o600)?;
    Ok(path)
}

/// Undoes reservations of runs that died holding them. Returns one line per entry handled.
pub fn recover_stale(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    for ent in rd.flatten() {
        let name = ent.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("dpdk-hugepages-") && name.ends_with(".json")) {
            continue;
        }
        let Ok(text) = fs::read_to_string(ent.path()) else {
            continue;
        };
        let Ok(e) = serde_json::from_str::<JournalEntry>(&text) else {
            out.push(format!("{}: unreadable, removed", ent.path().display()));
            let _ = fs::remove_file(ent.path());
            continue;
        };
        let alive =
            daqtune_selftest::sys::process_starttime(e.pid).is_some_and(|t| Some(t) == e.starttime);
        if alive {
            continue;
        }
        let pool = format!("{POOL}/nr_hugepages");
        let current = read_count(&Host::live(), &pool).ok();
        match current.and_then(|c| stale_restore(c, &e)) {
            Some(from) if fs::write(&pool, format!("{from}\n")).is_ok() => out.push(format!(
                "restored 2 MiB hugepages to {from}: run {} died holding {} -> {}",
                e.pid, e.from, e.to
            )),
            _ => out.push(format!(
                "run {} died holding 2 MiB hugepages {} -> {}; pool is {} now, left as it is",
                e.pid,
                e.from,
                e.to,
                current.map_or("unreadable".to_string(), |c| c.to_string())
            )),
        }
        let _ = fs::remove_file(ent.path());
    }
    out
}

/// A reservation made for one run; dropping it restores the page count it found.
#[derive(Debug)]
pub struct Reservation {
    /// The pool's `nr_hugepages`, a host path.
    path: String,
    from: u64,
    to: u64,
    journal: Option<PathBuf>,
}

impl Reservation {
    /// Raises the pool to `to` pages; fails (and restores) when the kernel could not find that
    /// many contiguous pages.
    pub fn reserve(from: u64, to: u64) -> io::Result<Reservation> {
        let path = format!("{POOL}/nr_hugepages");
        let entry = JournalEntry {
            pid: std::process::id(),
            starttime: daqtune_selftest::sys::process_starttime(std::process::id()),
            from,
            to,
        };
        // Journal first: if we die between the two writes, the next run finds the note and
        // sees the pool unchanged (then leaves it alone).
        let journal = write_journal(Path::new(JOURNAL_DIR), &entry).ok();
        let r = Reservation {
            path,
            from,
            to,
            journal,
        };
        fs::write(&r.path, format!("{to}\n"))?;
        let got = read_count(&Host::live(), &r.path).unwrap_or(0);
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
        let now = read_count(&Host::live(), &path)?;
        Ok((from, now))
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // Pages still mapped by someone else stay as surplus and are freed by the kernel when
        // unmapped; writing the old count never takes pages away from a user.
        let _ = fs::write(&self.path, format!("{}\n", self.from));
        if let Some(j) = &self.journal {
            let _ = fs::remove_file(j);
        }
    }
}

/// The pid in a daqtune file prefix (`daqtune-<pid>-<nonce>`), from a runtime directory or
/// hugepage map file name.
pub fn prefix_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("daqtune-")?;
    let (pid, _) = rest.split_once('-')?;
    pid.parse().ok()
}

/// Removes runtime directories and hugepage map files of daqtune runs whose process is gone
/// (killed before it could clean up). Another program's files are never touched.
pub fn sweep_dead_runs() -> Vec<PathBuf> {
    let dead = |name: &str| {
        prefix_pid(name).is_some_and(|p| !daqtune_probe::Host::live().exists(&format!("/proc/{p}")))
    };
    let mut removed = Vec::new();
    if let Ok(rd) = fs::read_dir(DPDK_RUN_DIR) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if dead(&name) && fs::remove_dir_all(e.path()).is_ok() {
                removed.push(e.path());
            }
        }
    }
    let mounts = live_mounts();
    for dir in hugetlbfs_mounts(&mounts) {
        let Ok(rd) = fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.contains("map_") && dead(&name) && fs::remove_file(e.path()).is_ok() {
                removed.push(e.path());
            }
        }
    }
    // A run directory that only dead runs used goes too (DPDK recreates it on demand).
    if !removed.is_empty() {
        let _ = fs::remove_dir(DPDK_RUN_DIR);
    }
    removed
}

/// hugetlbfs mount points in /proc/mounts text (probe's parser, which undoes the kernel's
/// octal escapes).
pub fn hugetlbfs_mounts(mounts: &str) -> Vec<PathBuf> {
    daqtune_probe::mem::parse_mounts(mounts)
        .into_iter()
        .filter(|m| m.fstype == "hugetlbfs")
        .map(|m| PathBuf::from(m.target))
        .collect()
}

/// The live host's /proc/mounts (empty when unreadable: nothing to sweep then).
fn live_mounts() -> String {
    daqtune_probe::Host::live()
        .read_string("/proc/mounts")
        .unwrap_or_default()
}

/// Removes `<prefix>map_*` files (DPDK's hugepage backing files) from every hugetlbfs mount and
/// DPDK's runtime directory for `prefix`. Only names carrying our unique prefix are touched.
pub fn sweep_leftovers(prefix: &str) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let mounts = live_mounts();
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
    fn count_parsing() {
        assert_eq!(parse_count("17\n"), Some(17));
        assert_eq!(parse_count("garbage"), None);
    }

    #[test]
    fn stale_entries_restore_only_an_untouched_pool() {
        let e = JournalEntry {
            pid: 1,
            starttime: Some(5),
            from: 4,
            to: 68,
        };
        assert_eq!(stale_restore(68, &e), Some(4));
        assert_eq!(stale_restore(100, &e), None);
        assert_eq!(stale_restore(4, &e), None);
        let d = tempfile::tempdir().expect("tmp");
        let p = write_journal(d.path(), &e).expect("journal");
        let back: JournalEntry =
            serde_json::from_str(&fs::read_to_string(&p).expect("read")).expect("json");
        assert_eq!(back, e);
    }

    #[test]
    fn prefix_pids() {
        assert_eq!(prefix_pid("daqtune-1234-abc"), Some(1234));
        assert_eq!(prefix_pid("daqtune-1234-abcmap_0"), Some(1234));
        assert_eq!(prefix_pid("rte-1234-abc"), None);
        assert_eq!(prefix_pid("daqtune-x-abc"), None);
        assert_eq!(prefix_pid("daqtune-"), None);
        assert_eq!(prefix_pid(""), None);
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
        // "\400" is no kernel escape (a byte is at most \377): kept, not decoded into an
        // overflowing u8 as this crate's own unescaping did (a panic in debug builds).
        assert_eq!(
            hugetlbfs_mounts("none /mnt/a\\400b hugetlbfs rw 0 0\n"),
            vec![PathBuf::from("/mnt/a\\400b")]
        );
    }

    #[test]
    fn pages_needed_covers_pool_and_heap() {
        let n = pages_needed(8191, 2304);
        assert!(n * PAGE_KB * 1024 >= 8191 * 2304 + (64 << 20));
        assert!(n < 64);
    }

    #[test]
    fn sysfs_pool_reading() {
        let t = tempfile::tempdir().expect("tmp");
        let d = t.path().join(POOL.trim_start_matches('/'));
        fs::create_dir_all(&d).expect("mkdir");
        fs::write(d.join("nr_hugepages"), "16\n").expect("write");
        fs::write(d.join("free_hugepages"), "12\n").expect("write");
        let host = Host::at(t.path()).expect("root");
        assert_eq!(
            read_pool(&host, POOL).expect("pool"),
            PoolState {
                nr: 16,
                free: 12,
                resv: 0
            }
        );
        fs::write(d.join("free_hugepages"), "(null)\n").expect("write");
        assert!(read_pool(&host, POOL).is_err());
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(t in "\\PC{0,200}") {
            let _ = hugetlbfs_mounts(&t);
            let _ = parse_count(&t);
            let _ = prefix_pid(&t);
        }

        #[test]
        fn plan_never_overcommits(needed in 0u64..100_000, nr in 0u64..100_000, free in 0u64..100_000,
                                  avail in proptest::option::of(0u64..(1u64 << 40)), root in proptest::bool::ANY) {
            let pool = PoolState { nr, free: free.min(nr), resv: 0 };
            match plan(needed, pool, avail, root) {
                Plan::UseExisting => proptest::prop_assert!(pool.usable() >= needed),
                Plan::Reserve { from, to } => {
                    proptest::prop_assert!(root);
                    proptest::prop_assert_eq!(from, nr);
                    proptest::prop_assert_eq!(to - from, needed - pool.usable());
                    let a = avail.unwrap_or(0);
                    proptest::prop_assert!((to - from) * PAGE_KB + KEEP_FREE_KB <= a);
                }
                Plan::Unavailable(_) => proptest::prop_assert!(pool.usable() < needed),
            }
        }
    }
}
