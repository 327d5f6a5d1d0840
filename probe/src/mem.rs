//! Memory: hugepage pools (global and per NUMA node), hugetlbfs mounts, /proc/meminfo, NUMA nodes.

use crate::cpulist::{parse_cpulist, CpuSet};
use crate::host::Host;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HugePool {
    pub size_kb: u64,
    pub total: u64,
    pub free: u64,
    pub reserved: Option<u64>,
    pub surplus: Option<u64>,
}

impl HugePool {
    pub fn in_use(&self) -> u64 {
        self.total.saturating_sub(self.free)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NodePool {
    pub node: u32,
    pub size_kb: u64,
    pub total: u64,
    pub free: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Mount {
    pub source: String,
    pub target: String,
    pub fstype: String,
    pub options: Vec<String>,
}

impl Mount {
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options.iter().find_map(|o| match o.split_once('=') {
            Some((k, v)) if k == key => Some(v),
            _ => None,
        })
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: CpuSet,
    pub mem_total_kb: Option<u64>,
    pub mem_free_kb: Option<u64>,
}

/// Parse `hugepages-1048576kB` into 1048576.
pub fn parse_pool_dir(name: &str) -> Option<u64> {
    name.strip_prefix("hugepages-")?
        .strip_suffix("kB")?
        .parse()
        .ok()
}

/// Parse a hugetlbfs `pagesize=` option (`1G`, `2M`, `1024M`, `2048k`) into kB.
pub fn parse_size_kb(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => return Some(n / 1024),
        "k" | "kb" | "kib" => 1,
        "m" | "mb" | "mib" => 1024,
        "g" | "gb" | "gib" => 1024 * 1024,
        "t" | "tb" | "tib" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// Human form of a page size in kB: 2048 -> "2M", 1048576 -> "1G".
pub fn format_size_kb(kb: u64) -> String {
    if kb >= 1024 * 1024 && kb % (1024 * 1024) == 0 {
        format!("{}G", kb / (1024 * 1024))
    } else if kb >= 1024 && kb % 1024 == 0 {
        format!("{}M", kb / 1024)
    } else {
        format!("{kb}K")
    }
}

/// The base page the sizes imply, where they are one of the known sets: the size a profile
/// written for another machine asks is most often a 1G page on a 64K-page arm64 kernel.
fn base_page_hint(sizes: &[u64]) -> &'static str {
    match sizes {
        [2048, 524288, 16777216] => "; an arm64 kernel with 64K base pages",
        [64, 2048, 32768, 1048576] => "; an arm64 kernel with 4K base pages",
        [2048] | [2048, 1048576] => "; an x86-64 kernel",
        _ => "",
    }
}

/// A list of page sizes for a message: `64K, 2M, 32M, 1G`, or `none` for an empty list.
pub fn format_sizes(sizes_kb: &[u64]) -> String {
    if sizes_kb.is_empty() {
        return "none".into();
    }
    sizes_kb
        .iter()
        .map(|&kb| format_size_kb(kb))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Undo the octal escapes /proc/mounts uses for space, tab, newline and backslash.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let oct = &b[i + 1..i + 4];
            if oct
                .iter()
                .all(|c| (b'0'..=b'3').contains(&oct[0]) && (b'0'..=b'7').contains(c))
            {
                out.push((oct[0] - b'0') * 64 + (oct[1] - b'0') * 8 + (oct[2] - b'0'));
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parse /proc/mounts (or /proc/self/mounts). Malformed lines are skipped.
pub fn parse_mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let source = unescape_mount(it.next()?);
            let target = unescape_mount(it.next()?);
            let fstype = it.next()?.to_string();
            let options = it
                .next()
                .map(|o| o.split(',').map(String::from).collect())
                .unwrap_or_default();
            Some(Mount {
                source,
                target,
                fstype,
                options,
            })
        })
        .collect()
}

/// Parse /proc/meminfo (and node meminfo, whose lines start with `Node N `) into (key, kB or count).
/// A line with another unit than the kernel's `kB` is skipped: read as kB it would be wrong.
pub fn parse_meminfo(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let l = match l.strip_prefix("Node ") {
                Some(rest) => rest.split_once(' ').map(|(_, r)| r)?.trim_start(),
                None => l,
            };
            let (k, v) = l.split_once(':')?;
            let mut w = v.split_whitespace();
            let v = w.next()?.parse().ok()?;
            matches!(w.next(), None | Some("kB")).then(|| (k.trim().to_string(), v))
        })
        .collect()
}

/// A pasted `/proc/meminfo`: `MemTotal:` first, as the kernel prints it, or the
/// `grep Huge /proc/meminfo` excerpt people paste (only `Key: N [kB]` lines, `HugePages_Total`
/// among them).
pub fn looks_like_meminfo(text: &str) -> bool {
    let first = text.lines().find(|l| !l.trim().is_empty());
    if first.is_some_and(|l| l.trim_start().starts_with("MemTotal:")) {
        return true;
    }
    validate_meminfo(text).is_ok()
        && text
            .lines()
            .any(|l| l.trim_start().starts_with("HugePages_Total:"))
}

/// Every line of a pasted `/proc/meminfo` is `Key: N` or `Key: N kB` (the kernel's
/// `meminfo_proc_show` format): `Err((line, what))` at the first that is not, so an edited or
/// cut paste is refused where it breaks instead of read as zeros.
pub fn validate_meminfo(text: &str) -> Result<(), (usize, String)> {
    for (i, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let ok = l.split_once(':').is_some_and(|(k, v)| {
            let mut w = v.split_whitespace();
            !k.trim().is_empty()
                && !k.trim().contains(char::is_whitespace)
                && w.next().is_some_and(|n| n.parse::<u64>().is_ok())
                && matches!(w.next(), None | Some("kB"))
                && w.next().is_none()
        });
        if !ok {
            let shown: String = l.chars().take(60).collect();
            return Err((
                i + 1,
                format!("`{shown}`: expected `Key:  N` or `Key:  N kB`, as /proc/meminfo prints"),
            ));
        }
    }
    Ok(())
}

pub fn meminfo_get(mi: &[(String, u64)], key: &str) -> Option<u64> {
    mi.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
}

/// `MemAvailable` in kB from /proc/meminfo text.
pub fn mem_available_kb(meminfo: &str) -> Option<u64> {
    meminfo_get(&parse_meminfo(meminfo), "MemAvailable")
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct MemFacts {
    pub pools: Vec<HugePool>,
    pub node_pools: Vec<NodePool>,
    pub mounts: Vec<Mount>,
    pub mounts_error: Option<String>,
    pub pools_error: Option<String>,
    pub mem_total_kb: Option<u64>,
    pub mem_available_kb: Option<u64>,
    pub default_hugepage_kb: Option<u64>,
    pub nodes: Vec<NumaNode>,
}

impl MemFacts {
    pub fn pool(&self, size_kb: u64) -> Option<&HugePool> {
        self.pools.iter().find(|p| p.size_kb == size_kb)
    }
    pub fn hugetlbfs_mounts(&self) -> impl Iterator<Item = &Mount> {
        self.mounts.iter().filter(|m| m.fstype == "hugetlbfs")
    }
    /// The hugepage sizes this kernel offers (a pool directory under /sys/kernel/mm/hugepages
    /// each), in kB, ascending; `None` when that directory could not be read. They follow the
    /// architecture and its base page: x86-64 2M, 1G; arm64 with 4K pages 64K, 2M, 32M, 1G;
    /// arm64 with 64K pages (Grace-class servers) 2M, 512M, 16G.
    pub fn offered_sizes(&self) -> Option<Vec<u64>> {
        if self.pools_error.is_some() {
            return None;
        }
        Some(self.pools.iter().map(|p| p.size_kb).collect())
    }
    /// Whether the kernel offers pages of `size_kb` (true when the pools could not be read:
    /// nothing is known to rule the size out).
    pub fn offers(&self, size_kb: u64) -> bool {
        self.offered_sizes()
            .is_none_or(|sizes| sizes.contains(&size_kb))
    }
    /// Why pages of `size` cannot be had here, naming the sizes this kernel has.
    pub fn size_not_offered(&self, size: &str) -> String {
        let sizes = self.offered_sizes().unwrap_or_default();
        if sizes.is_empty() {
            return format!(
                "this kernel offers no hugepages at all (/sys/kernel/mm/hugepages is empty: built without CONFIG_HUGETLBFS), so no {size} pages"
            );
        }
        format!(
            "this kernel has no {size} pages; its hugepage sizes are {} (/sys/kernel/mm/hugepages){}",
            format_sizes(&sizes),
            base_page_hint(&sizes)
        )
    }
    /// Page size of a hugetlbfs mount; without `pagesize=` it is the default size.
    pub fn mount_page_kb(&self, m: &Mount) -> Option<u64> {
        m.option("pagesize")
            .and_then(parse_size_kb)
            .or(self.default_hugepage_kb)
    }
}

fn read_pool(host: &Host, dir: &str, size_kb: u64) -> Option<HugePool> {
    let total = host.read_parsed(&format!("{dir}/nr_hugepages"))?;
    let free = host
        .read_parsed(&format!("{dir}/free_hugepages"))
        .unwrap_or(0);
    Some(HugePool {
        size_kb,
        total,
        free,
        reserved: host.read_parsed(&format!("{dir}/resv_hugepages")),
        surplus: host.read_parsed(&format!("{dir}/surplus_hugepages")),
    })
}

pub fn read_numa_nodes(host: &Host) -> Vec<NumaNode> {
    let base = "/sys/devices/system/node";
    let Ok(names) = host.read_dir(base) else {
        return Vec::new();
    };
    let mut nodes: Vec<NumaNode> = names
        .iter()
        .filter_map(|n| n.strip_prefix("node")?.parse::<u32>().ok())
        .map(|id| {
            let cpus = host
                .read_attr(&format!("{base}/node{id}/cpulist"))
                .ok()
                .and_then(|s| parse_cpulist(&s, None).ok())
                .unwrap_or_default();
            let mi = host
                .read_string(&format!("{base}/node{id}/meminfo"))
                .map(|s| parse_meminfo(&s))
                .unwrap_or_default();
            NumaNode {
                id,
                cpus,
                mem_total_kb: meminfo_get(&mi, "MemTotal"),
                mem_free_kb: meminfo_get(&mi, "MemFree"),
            }
        })
        .collect();
    nodes.sort_by_key(|n| n.id);
    nodes
}

pub fn read_mem(host: &Host) -> MemFacts {
    read_mem_with_mounts(
        host,
        host.read_string("/proc/mounts").map_err(|e| e.to_string()),
    )
}

/// [`read_mem`] with /proc/mounts already read (by a caller that memoises host files: a plan
/// for a host root rewrites the mount table from the same bytes).
pub fn read_mem_with_mounts(host: &Host, mounts: Result<String, String>) -> MemFacts {
    let mut f = MemFacts::default();
    match host.read_dir("/sys/kernel/mm/hugepages") {
        Ok(names) => {
            for n in names {
                if let Some(kb) = parse_pool_dir(&n) {
                    if let Some(p) = read_pool(host, &format!("/sys/kernel/mm/hugepages/{n}"), kb) {
                        f.pools.push(p);
                    }
                }
            }
            f.pools.sort_by_key(|p| p.size_kb);
        }
        Err(e) => f.pools_error = Some(e.to_string()),
    }
    f.nodes = read_numa_nodes(host);
    for node in &f.nodes {
        let dir = format!("/sys/devices/system/node/node{}/hugepages", node.id);
        for n in host.read_dir(&dir).unwrap_or_default() {
            if let Some(kb) = parse_pool_dir(&n) {
                if let Some(p) = read_pool(host, &format!("{dir}/{n}"), kb) {
                    f.node_pools.push(NodePool {
                        node: node.id,
                        size_kb: kb,
                        total: p.total,
                        free: p.free,
                    });
                }
            }
        }
    }
    match mounts {
        Ok(t) => f.mounts = parse_mounts(&t),
        Err(e) => f.mounts_error = Some(e),
    }
    if let Ok(t) = host.read_string("/proc/meminfo") {
        let mi = parse_meminfo(&t);
        f.mem_total_kb = meminfo_get(&mi, "MemTotal");
        f.mem_available_kb = meminfo_get(&mi, "MemAvailable");
        f.default_hugepage_kb = meminfo_get(&mi, "Hugepagesize");
    }
    f
}

/// Files that DPDK leaves in a hugetlbfs mount when a process dies (`rtemap_N`, `*map_*`).
pub fn leftover_map_files(host: &Host, mount_target: &str) -> Vec<String> {
    host.read_dir(mount_target)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.contains("map_"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn mounts() {
        let m = parse_mounts(
            "hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n\
             none /mnt/huge\\040x hugetlbfs rw,relatime,pagesize=1024M 0 0\n\
             garbage\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].target, "/mnt/huge x");
        // The kernel escapes a byte as \ooo (at most \377) and a backslash itself as \134, so
        // "\4xx".."\7xx" is no escape: kept as it is. selftest-dpdk's copy decoded it and
        // overflowed a u8 (a panic in debug builds).
        let odd = parse_mounts("none /mnt/a\\400b\\134 hugetlbfs rw 0 0\n");
        assert_eq!(odd[0].target, "/mnt/a\\400b\\");
        assert_eq!(m[1].option("pagesize"), Some("1024M"));
        assert_eq!(parse_size_kb("1024M"), Some(1048576));
        assert_eq!(parse_size_kb("1G"), Some(1048576));
        assert_eq!(parse_size_kb("2048k"), Some(2048));
        assert_eq!(parse_size_kb("x"), None);
    }

    #[test]
    fn meminfo() {
        let mi = parse_meminfo("MemTotal:       16000000 kB\nHugePages_Total:       4\nHugepagesize:    1048576 kB\n(null)\n");
        assert_eq!(meminfo_get(&mi, "MemTotal"), Some(16000000));
        assert_eq!(meminfo_get(&mi, "HugePages_Total"), Some(4));
        let node = parse_meminfo("Node 0 MemTotal:       32 kB\nNode 0 MemFree: 16 kB\n");
        assert_eq!(meminfo_get(&node, "MemFree"), Some(16));
        // The kernel prints kB (meminfo_proc_show); "5 MB" read as 5 kB would be 1024x off.
        // selftest-dpdk's copy refused it, probe's read it as 5 kB: the refusal was right.
        assert_eq!(mem_available_kb("MemAvailable: 5 MB"), None);
        assert_eq!(mem_available_kb("MemAvailable: (null)"), None);
        assert_eq!(
            mem_available_kb("MemTotal: 9 kB\nMemAvailable:   23000000 kB\n"),
            Some(23_000_000)
        );
    }

    #[test]
    fn pool_names() {
        assert_eq!(parse_pool_dir("hugepages-1048576kB"), Some(1048576));
        assert_eq!(parse_pool_dir("hugepages-xkB"), None);
        assert_eq!(format_size_kb(2048), "2M");
        assert_eq!(format_size_kb(1048576), "1G");
        // arm64 sizes: 4K base pages (64K contiguous, 32M contiguous) and 64K base pages.
        assert_eq!(
            format_sizes(&[64, 2048, 32768, 1048576]),
            "64K, 2M, 32M, 1G"
        );
        assert_eq!(format_sizes(&[2048, 524288, 16777216]), "2M, 512M, 16G");
        assert_eq!(format_sizes(&[]), "none");
        assert_eq!(parse_size_kb("512M"), Some(524288));
        assert_eq!(parse_size_kb("16G"), Some(16777216));
        assert_eq!(parse_size_kb("64K"), Some(64));
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,120}") {
            let _ = parse_mounts(&s);
            let _ = parse_meminfo(&s);
            let _ = parse_size_kb(&s);
        }
    }
}
