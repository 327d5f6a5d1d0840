//! Linux CPU lists: `0-3,8-11`, `2,4-5`, the grouped form `0-15:2/4`, `N` (last CPU) and `all`.
//!
//! The same syntax appears in /proc/cmdline (isolcpus=, nohz_full=, rcu_nocbs=, irqaffinity=),
//! sysfs (`online`, `isolated`, `node*/cpulist`, `thread_siblings_list`) and
//! /proc/irq/*/smp_affinity_list. Sets are kept as a sorted bitmap so that set algebra and
//! printing stay cheap on 256-CPU hosts.

use std::fmt;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CpuListError {
    #[error("`{0}` is not a CPU number")]
    BadNumber(String),
    #[error("range `{0}` runs backwards")]
    Backwards(String),
    #[error("`{0}`: CPU number beyond the kernel's limit of {NR_CPUS_MAX} CPUs (NR_CPUS)")]
    TooLarge(String),
    #[error("`{0}` needs the number of CPUs, which is unknown here")]
    NeedsCount(String),
    #[error("bad group `{0}` (expected RANGE:USED/GROUP)")]
    BadGroup(String),
    #[error("CPU {cpu} is beyond this host's {possible} possible CPUs (0-{last})", last = possible.saturating_sub(1))]
    BeyondHost { cpu: u32, possible: u32 },
}

/// The most CPUs a mainstream kernel supports (x86-64 `MAXSMP` and ppc64 set `NR_CPUS` to
/// 8192; arm64 stops at 4096). A CPU list naming a higher CPU is garbage, refused before it
/// can expand: the set is a bitmap of at most this many bits, so any list, however long,
/// parses in time linear in its length.
pub const NR_CPUS_MAX: u32 = 8192;
/// The largest CPU id accepted.
pub const MAX_CPU: u32 = NR_CPUS_MAX - 1;

/// A set of CPU ids below [`NR_CPUS_MAX`], as a bitmap (what the kernel's `cpumask` is).
/// The word vector never ends in a zero word, so derived equality and hashing are exact.
#[derive(Clone, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(into = "String")]
pub struct CpuSet(Vec<u64>);

impl CpuSet {
    pub fn new() -> Self {
        Self::default()
    }
    /// `lo..=hi`, clamped to [`MAX_CPU`].
    pub fn range(lo: u32, hi: u32) -> Self {
        let mut s = CpuSet::new();
        s.insert_range(lo, hi);
        s
    }
    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }
    fn grow(&mut self, words: usize) {
        if self.0.len() < words {
            self.0.resize(words, 0);
        }
    }
    /// Adds a CPU; ids above [`MAX_CPU`] cannot exist and are ignored.
    pub fn insert(&mut self, cpu: u32) {
        if cpu > MAX_CPU {
            return;
        }
        let w = (cpu / 64) as usize;
        self.grow(w + 1);
        self.0[w] |= 1u64 << (cpu % 64);
    }
    /// Adds `lo..=hi` a word at a time (clamped to [`MAX_CPU`]).
    pub fn insert_range(&mut self, lo: u32, hi: u32) {
        let hi = hi.min(MAX_CPU);
        if lo > hi {
            return;
        }
        let (lw, hw) = ((lo / 64) as usize, (hi / 64) as usize);
        self.grow(hw + 1);
        for w in lw..=hw {
            let from = if w == lw { lo % 64 } else { 0 };
            let to = if w == hw { hi % 64 } else { 63 };
            let mask = (u64::MAX >> (63 - (to - from))) << from;
            self.0[w] |= mask;
        }
    }
    pub fn contains(&self, cpu: u32) -> bool {
        self.0
            .get((cpu / 64) as usize)
            .is_some_and(|w| w & (1u64 << (cpu % 64)) != 0)
    }
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The CPUs in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &w)| {
            (0..64u32)
                .filter(move |b| w & (1u64 << b) != 0)
                .map(move |b| i as u32 * 64 + b)
        })
    }
    fn zip(&self, o: &CpuSet, f: impl Fn(u64, u64) -> u64) -> CpuSet {
        let n = self.0.len().max(o.0.len());
        let get = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
        let mut s = CpuSet((0..n).map(|i| f(get(&self.0, i), get(&o.0, i))).collect());
        s.trim();
        s
    }
    pub fn union(&self, o: &CpuSet) -> CpuSet {
        self.zip(o, |a, b| a | b)
    }
    pub fn intersection(&self, o: &CpuSet) -> CpuSet {
        self.zip(o, |a, b| a & b)
    }
    pub fn difference(&self, o: &CpuSet) -> CpuSet {
        self.zip(o, |a, b| a & !b)
    }
    pub fn is_subset(&self, o: &CpuSet) -> bool {
        self.difference(o).is_empty()
    }
    pub fn is_disjoint(&self, o: &CpuSet) -> bool {
        self.intersection(o).is_empty()
    }
    pub fn first(&self) -> Option<u32> {
        let (i, w) = self.0.iter().enumerate().find(|(_, w)| **w != 0)?;
        Some(i as u32 * 64 + w.trailing_zeros())
    }
    pub fn last(&self) -> Option<u32> {
        let w = *self.0.last()?;
        Some((self.0.len() as u32 - 1) * 64 + 63 - w.leading_zeros())
    }
    /// Refuses a set naming a CPU at or above `possible` (the host's CPU count): such a list
    /// is garbage, not a setting.
    pub fn check_possible(&self, possible: u32) -> Result<(), CpuListError> {
        match self.last() {
            Some(cpu) if cpu >= possible => Err(CpuListError::BeyondHost { cpu, possible }),
            _ => Ok(()),
        }
    }
}

/// Ordered as the sorted sequences of their CPUs (what a `BTreeSet<u32>` orders by), so sets
/// sort the way their printed lists read.
impl Ord for CpuSet {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.iter().cmp(o.iter())
    }
}

impl PartialOrd for CpuSet {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl fmt::Display for CpuSet {
    /// Compact kernel form: `0-3,8-11`; the empty set prints as an empty string, as sysfs does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut it = self.iter().peekable();
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
        let mut s = CpuSet::new();
        for c in it {
            s.insert(c);
        }
        s
    }
}

impl From<CpuSet> for String {
    fn from(s: CpuSet) -> String {
        s.to_string()
    }
}

/// Text quoted in an error: a hostile list can be kilobytes of one word.
pub(crate) fn clip(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_string(),
    }
}

fn num(s: &str, nr_cpus: Option<u32>) -> Result<u32, CpuListError> {
    let s = s.trim();
    if s == "N" {
        return match nr_cpus {
            Some(n) if n > 0 && n <= NR_CPUS_MAX => Ok(n - 1),
            Some(n) if n > 0 => Err(CpuListError::TooLarge((n - 1).to_string())),
            _ => Err(CpuListError::NeedsCount(clip(s))),
        };
    }
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CpuListError::BadNumber(clip(s)));
    }
    let v: u64 = s.parse().map_err(|_| CpuListError::TooLarge(clip(s)))?;
    if v > MAX_CPU as u64 {
        return Err(CpuListError::TooLarge(clip(s)));
    }
    Ok(v as u32)
}

/// Parse a CPU list. `nr_cpus` resolves `N` and `all`; pass `None` when unknown.
/// An empty (or whitespace-only) list is the empty set, as sysfs writes it. Any CPU above
/// [`MAX_CPU`] is an error (never expanded); the work is linear in the list's length.
pub fn parse_cpulist(s: &str, nr_cpus: Option<u32>) -> Result<CpuSet, CpuListError> {
    let mut set = CpuSet::new();
    let s = s.trim();
    if s.is_empty() {
        return Ok(set);
    }
    if s == "all" {
        return match nr_cpus {
            Some(0) => Ok(set),
            Some(n) if n <= NR_CPUS_MAX => Ok(CpuSet::range(0, n - 1)),
            Some(n) => Err(CpuListError::TooLarge(n.to_string())),
            None => Err(CpuListError::NeedsCount(clip(s))),
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
            return Err(CpuListError::Backwards(clip(part)));
        }
        match group {
            None => set.insert_range(lo, hi),
            Some(g) => {
                let (used, size) = g
                    .split_once('/')
                    .ok_or_else(|| CpuListError::BadGroup(clip(part)))?;
                let used = num(used, None).map_err(|_| CpuListError::BadGroup(clip(part)))?;
                let size = num(size, None).map_err(|_| CpuListError::BadGroup(clip(part)))?;
                if size == 0 || used == 0 || used > size {
                    return Err(CpuListError::BadGroup(clip(part)));
                }
                // Both bounded by MAX_CPU: at most NR_CPUS_MAX groups of one range each.
                let mut base = lo;
                while base <= hi {
                    set.insert_range(base, (base + used - 1).min(hi));
                    base += size;
                }
            }
        }
    }
    Ok(set)
}

/// Parse a hex CPU mask as in /proc/irq/*/smp_affinity (`ff,ffffffff`).
pub fn parse_cpumask(s: &str) -> Result<CpuSet, CpuListError> {
    let mut set = CpuSet::new();
    let words: Vec<&str> = s.trim().split(',').collect();
    for (i, w) in words.iter().rev().enumerate() {
        let v = u32::from_str_radix(w.trim(), 16).map_err(|_| CpuListError::BadNumber(clip(w)))?;
        if v == 0 {
            continue;
        }
        let top = (i as u64) * 32 + 31 - u64::from(v.leading_zeros());
        if top > u64::from(MAX_CPU) {
            return Err(CpuListError::TooLarge(clip(s.trim())));
        }
        for bit in 0..32 {
            if v & (1 << bit) != 0 {
                set.insert((i as u32) * 32 + bit);
            }
        }
    }
    Ok(set)
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
    fn bounded_by_nr_cpus() {
        // The red-team list: a range over every u16 CPU, repeated. Refused, never expanded.
        let bomb = "0-65535,".repeat(7000);
        assert_eq!(
            parse_cpulist(&bomb, None),
            Err(CpuListError::TooLarge("65535".into()))
        );
        assert!(parse_cpulist("8192", None).is_err());
        assert!(parse_cpulist("0-8191:1/8191", None).is_ok());
        assert!(parse_cpulist("all", Some(70_000)).is_err());
        assert!(parse_cpumask(&format!("1{}", ",00000000".repeat(256))).is_err());
        assert_eq!(
            parse_cpumask(&format!(
                "80000000,{}",
                "00000000,".repeat(254) + "00000000"
            ))
            .expect("m")
            .to_string(),
            "8191"
        );
        // The largest valid list, repeated: every range folds into one 1 KB bitmap.
        let full = parse_cpulist(&"0-8191,".repeat(7000), None).expect("p");
        assert_eq!(full.len(), 8192);
        assert_eq!(full.to_string(), "0-8191");
        let long = format!("0-{}", "9".repeat(100_000));
        assert!(
            parse_cpulist(&long, None)
                .expect_err("long")
                .to_string()
                .len()
                < 120
        );
        let err = parse_cpulist("0-9000", None).expect_err("too large");
        assert!(err.to_string().contains("8192"), "{err}");
    }

    #[test]
    fn beyond_the_host() {
        let s = parse_cpulist("0-3,7", None).expect("p");
        assert!(s.check_possible(8).is_ok());
        let e = s.check_possible(4).expect_err("beyond");
        assert_eq!(
            e.to_string(),
            "CPU 7 is beyond this host's 4 possible CPUs (0-3)"
        );
    }

    #[test]
    fn set_algebra_on_words() {
        let a = parse_cpulist("0-70,200", None).expect("p");
        let b = parse_cpulist("64-127", None).expect("p");
        assert_eq!(a.intersection(&b).to_string(), "64-70");
        assert_eq!(a.difference(&b).to_string(), "0-63,200");
        assert_eq!(b.difference(&a).to_string(), "71-127");
        assert_eq!(a.union(&b).to_string(), "0-127,200");
        assert!(!a.is_subset(&b) && a.intersection(&b).is_subset(&b));
        assert!(parse_cpulist("128-199", None).expect("p").is_disjoint(&a));
        // Emptied sets compare equal to new ones (no trailing zero words).
        assert_eq!(b.difference(&b), CpuSet::new());
        assert_eq!(a.first(), Some(0));
        assert_eq!(a.last(), Some(200));
        assert_eq!(a.iter().next_back(), Some(200));
        assert!(CpuSet::from_iter([1]) < CpuSet::from_iter([2]));
        assert!(CpuSet::from_iter([1, 5]) < CpuSet::from_iter([2]));
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
            let set: CpuSet = v.iter().copied().collect();
            prop_assert_eq!(set.iter().collect::<Vec<_>>(), v.iter().copied().collect::<Vec<_>>());
            prop_assert_eq!(set.len(), v.len());
            prop_assert_eq!(set.first(), v.first().copied());
            prop_assert_eq!(set.last(), v.last().copied());
            let back = parse_cpulist(&set.to_string(), None).expect("roundtrip");
            prop_assert_eq!(back, set);
        }
    }
}
