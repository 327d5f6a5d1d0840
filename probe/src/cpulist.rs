//! Linux CPU lists: `0-3,8-11`, `2,4-5`, the grouped form `0-15:2/4`, `N` (last CPU) and `all`.
//!
//! The same syntax appears in /proc/cmdline (isolcpus=, nohz_full=, rcu_nocbs=, irqaffinity=),
//! sysfs (`online`, `isolated`, `node*/cpulist`, `thread_siblings_list`) and
//! /proc/irq/*/smp_affinity_list. Sets are kept as a sorted bitmap so that set algebra and
//! printing stay cheap on 256-CPU hosts.

use std::collections::BTreeSet;
use std::fmt;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CpuListError {
    #[error("`{0}` is not a CPU number")]
    BadNumber(String),
    #[error("range `{0}` runs backwards")]
    Backwards(String),
    #[error("`{0}`: CPU number too large")]
    TooLarge(String),
    #[error("`{0}` needs the number of CPUs, which is unknown here")]
    NeedsCount(String),
    #[error("bad group `{0}` (expected RANGE:USED/GROUP)")]
    BadGroup(String),
}

/// The largest CPU id accepted, so that garbage like `0-4294967295` cannot allocate gigabytes.
pub const MAX_CPU: u32 = 1 << 16;

#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(into = "String")]
pub struct CpuSet(BTreeSet<u32>);

impl CpuSet {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn range(lo: u32, hi: u32) -> Self {
        CpuSet((lo..=hi).collect())
    }
    pub fn insert(&mut self, cpu: u32) {
        self.0.insert(cpu);
    }
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }
    pub fn union(&self, o: &CpuSet) -> CpuSet {
        CpuSet(self.0.union(&o.0).copied().collect())
    }
    pub fn intersection(&self, o: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&o.0).copied().collect())
    }
    pub fn difference(&self, o: &CpuSet) -> CpuSet {
        CpuSet(self.0.difference(&o.0).copied().collect())
    }
    pub fn is_subset(&self, o: &CpuSet) -> bool {
        self.0.is_subset(&o.0)
    }
    pub fn is_disjoint(&self, o: &CpuSet) -> bool {
        self.0.is_disjoint(&o.0)
    }
    pub fn first(&self) -> Option<u32> {
        self.0.first().copied()
    }
    pub fn last(&self) -> Option<u32> {
        self.0.last().copied()
    }
}

impl fmt::Display for CpuSet {
    /// Compact kernel form: `0-3,8-11`; the empty set prints as an empty string, as sysfs does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut it = self.0.iter().copied().peekable();
        while let Some(lo) = it.next() {
            let mut hi = lo;
            while it.peek() == Some(&(hi + 1)) {
                hi += 1;
                it.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(it: I) -> Self {
        CpuSet(it.into_iter().collect())
    }
}

impl From<CpuSet> for String {
    fn from(s: CpuSet) -> String {
        s.to_string()
    }
}

fn num(s: &str, nr_cpus: Option<u32>) -> Result<u32, CpuListError> {
    let s = s.trim();
    if s == "N" {
        return match nr_cpus {
            Some(n) if n > 0 => Ok(n - 1),
            _ => Err(CpuListError::NeedsCount(s.into())),
        };
    }
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CpuListError::BadNumber(s.into()));
    }
    let v: u64 = s.parse().map_err(|_| CpuListError::TooLarge(s.into()))?;
    if v > MAX_CPU as u64 {
        return Err(CpuListError::TooLarge(s.into()));
    }
    Ok(v as u32)
}

/// Parse a CPU list. `nr_cpus` resolves `N` and `all`; pass `None` when unknown.
/// An empty (or whitespace-only) list is the empty set, as sysfs writes it.
pub fn parse_cpulist(s: &str, nr_cpus: Option<u32>) -> Result<CpuSet, CpuListError> {
    let mut set = BTreeSet::new();
    let s = s.trim();
    if s.is_empty() {
        return Ok(CpuSet(set));
    }
    if s == "all" {
        return match nr_cpus {
            Some(n) => Ok(CpuSet((0..n).collect())),
            None => Err(CpuListError::NeedsCount(s.into())),
        };
    }
    for part in s.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (range, group) = match part.split_once(':') {
            Some((r, g)) => (r, Some(g)),
            None => (part, None),
        };
        let (lo, hi) = match range.split_once('-') {
            Some((a, b)) => (num(a, nr_cpus)?, num(b, nr_cpus)?),
            None => {
                let v = num(range, nr_cpus)?;
                (v, v)
            }
        };
        if hi < lo {
            return Err(CpuListError::Backwards(part.into()));
        }
        match group {
            None => set.extend(lo..=hi),
            Some(g) => {
                let (used, size) = g
                    .split_once('/')
                    .ok_or_else(|| CpuListError::BadGroup(part.into()))?;
                let used = num(used, None).map_err(|_| CpuListError::BadGroup(part.into()))?;
                let size = num(size, None).map_err(|_| CpuListError::BadGroup(part.into()))?;
                if size == 0 || used == 0 || used > size {
                    return Err(CpuListError::BadGroup(part.into()));
                }
                let mut base = lo;
                while base <= hi {
                    for c in base..(base + used).min(hi + 1) {
                        set.insert(c);
                    }
                    base = match base.checked_add(size) {
                        Some(b) => b,
                        None => break,
                    };
                }
            }
        }
    }
    Ok(CpuSet(set))
}

/// Parse a hex CPU mask as in /proc/irq/*/smp_affinity (`ff,ffffffff`).
pub fn parse_cpumask(s: &str) -> Result<CpuSet, CpuListError> {
    let mut set = BTreeSet::new();
    let words: Vec<&str> = s.trim().split(',').collect();
    for (i, w) in words.iter().rev().enumerate() {
        let v = u32::from_str_radix(w.trim(), 16)
            .map_err(|_| CpuListError::BadNumber(w.to_string()))?;
        for bit in 0..32 {
            if v & (1 << bit) != 0 {
                let cpu = (i as u32) * 32 + bit;
                if cpu > MAX_CPU {
                    return Err(CpuListError::TooLarge(s.into()));
                }
                set.insert(cpu);
            }
        }
    }
    Ok(CpuSet(set))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ranges_and_singles() {
        let s = parse_cpulist("0-3,8-11", None).expect("parse");
        assert_eq!(s.len(), 8);
        assert_eq!(s.to_string(), "0-3,8-11");
        assert_eq!(parse_cpulist("5", None).expect("p").to_string(), "5");
        assert_eq!(parse_cpulist("3,1,2", None).expect("p").to_string(), "1-3");
    }

    #[test]
    fn empty_and_whitespace() {
        assert!(parse_cpulist("", None).expect("p").is_empty());
        assert!(parse_cpulist("\n", None).expect("p").is_empty());
    }

    #[test]
    fn garbage() {
        assert!(parse_cpulist("(null)", None).is_err());
        assert!(parse_cpulist("a-b", None).is_err());
        assert!(parse_cpulist("5-2", None).is_err());
        assert!(parse_cpulist("0-4294967295", None).is_err());
        assert!(parse_cpulist("-", None).is_err());
        assert!(parse_cpulist("1-", None).is_err());
    }

    #[test]
    fn last_cpu_and_all() {
        assert_eq!(parse_cpulist("2-N", Some(8)).expect("p").to_string(), "2-7");
        assert_eq!(parse_cpulist("all", Some(4)).expect("p").to_string(), "0-3");
        assert!(parse_cpulist("all", None).is_err());
    }

    #[test]
    fn groups() {
        assert_eq!(
            parse_cpulist("0-15:2/4", None).expect("p").to_string(),
            "0-1,4-5,8-9,12-13"
        );
        assert!(parse_cpulist("0-15:5/4", None).is_err());
        assert!(parse_cpulist("0-15:0/0", None).is_err());
    }

    #[test]
    fn masks() {
        assert_eq!(parse_cpumask("f").expect("m").to_string(), "0-3");
        assert_eq!(parse_cpumask("1,00000000").expect("m").to_string(), "32");
        assert!(parse_cpumask("zz").is_err());
    }

    proptest! {
        #[test]
        fn never_panics(s in ".{0,40}") {
            let _ = parse_cpulist(&s, Some(64));
            let _ = parse_cpumask(&s);
        }

        #[test]
        fn display_roundtrips(v in proptest::collection::btree_set(0u32..512, 0..64)) {
            let set = CpuSet(v);
            let back = parse_cpulist(&set.to_string(), None).expect("roundtrip");
            prop_assert_eq!(back, set);
        }
    }
}
