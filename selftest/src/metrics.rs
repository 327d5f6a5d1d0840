//! Measurements every engine reports: a fixed-bucket latency histogram, per-thread CPU time,
//! and the derived figures (Gb/s, packets/s, ROI).

/// Sub-buckets per power of two: 32 gives a worst-case relative error of about 3 %.
const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB;

/// Log-linear histogram of u64 values (nanoseconds here) with a fixed number of buckets, so
/// recording never allocates and two histograms merge by adding counts.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
            max: 0,
        }
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("total", &self.total)
            .field("max", &self.max)
            .finish()
    }
}

fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let sub = ((v >> (e - SUB_BITS)) as usize) & (SUB - 1);
    (e - SUB_BITS + 1) as usize * SUB + sub
}

/// Smallest value that falls in bucket `i`.
fn bucket_low(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let e = (i / SUB) as u32 + SUB_BITS - 1;
    let sub = (i % SUB) as u64;
    (1u64 << e) | (sub << (e - SUB_BITS))
}

impl Histogram {
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[bucket_of(v)] += 1;
        self.total += 1;
        if v > self.max {
            self.max = v;
        }
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += *b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// Value at quantile `q` (0..=1): the lower bound of the bucket holding it, capped by the
    /// maximum seen; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let q = q.clamp(0.0, 1.0);
        let rank = ((q * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, c) in self.counts.iter().enumerate() {
            seen += *c;
            if seen >= rank {
                return Some(bucket_low(i).min(self.max));
            }
        }
        Some(self.max)
    }

    pub fn summary_us(&self) -> Option<Latency> {
        let us = |ns: u64| ns as f64 / 1000.0;
        Some(Latency {
            samples: self.total,
            p50_us: us(self.quantile(0.5)?),
            p99_us: us(self.quantile(0.99)?),
            p999_us: us(self.quantile(0.999)?),
            max_us: us(self.max),
        })
    }
}

pub use daqtune_report::metrics::{Latency, ThreadCpu};

/// Gigabits per second from bytes over seconds (0 when no time passed).
pub fn gbps(bytes: u64, secs: f64) -> f64 {
    if secs <= 0.0 {
        return 0.0;
    }
    bytes as f64 * 8.0 / secs / 1e9
}

/// Return on investment (seed 003): throughput squared per CPU core used.
pub fn roi(gbps: f64, cores: f64) -> Option<f64> {
    if cores <= 0.0 || !cores.is_finite() {
        return None;
    }
    Some(gbps * gbps / cores)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotone_and_cover_values() {
        let mut last = 0;
        for i in 0..BUCKETS {
            let low = bucket_low(i);
            if i > 0 {
                assert!(low > last, "bucket {i}");
            }
            assert_eq!(bucket_of(low), i);
            last = low;
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_within_bucket_error() {
        let mut h = Histogram::default();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5).expect("p50") as f64;
        assert!((p50 - 5_000_000.0).abs() / 5_000_000.0 < 0.04, "{p50}");
        let p99 = h.quantile(0.99).expect("p99") as f64;
        assert!((p99 - 9_900_000.0).abs() / 9_900_000.0 < 0.04, "{p99}");
        assert_eq!(h.max(), 10_000_000);
        assert_eq!(h.quantile(1.0), Some(h.bucket_cap(10_000_000)));
    }

    impl Histogram {
        fn bucket_cap(&self, v: u64) -> u64 {
            bucket_low(bucket_of(v)).min(self.max)
        }
    }

    #[test]
    fn empty_and_merge() {
        let mut a = Histogram::default();
        assert_eq!(a.quantile(0.5), None);
        assert!(a.summary_us().is_none());
        let mut b = Histogram::default();
        b.record(7);
        b.record(9);
        a.merge(&b);
        assert_eq!(a.count(), 2);
        assert_eq!(a.quantile(0.0), Some(7));
        assert_eq!(a.quantile(1.0), Some(9));
    }

    #[test]
    fn derived_figures() {
        assert_eq!(gbps(1_000_000_000, 8.0), 1.0);
        assert_eq!(gbps(5, 0.0), 0.0);
        assert_eq!(roi(10.0, 2.0), Some(50.0));
        assert_eq!(roi(10.0, 0.0), None);
    }
}
