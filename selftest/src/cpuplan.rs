//! Which CPUs the TX and RX threads run on.
//!
//! Remapping rules, in order (also in docs/selftest.md):
//! 1. `--tx-cpu` / `--rx-cpu` win when the process may run there.
//! 2. The profile's isolated CPUs that exist here and are in the process's affinity mask:
//!    TX on the first, RX on the second.
//! 3. Only one of them usable: TX there, RX on the highest-numbered other allowed CPU.
//! 4. None usable (no list, or the host has fewer cores than the profile assumes): the two
//!    highest-numbered allowed CPUs (CPU 0 usually carries housekeeping and IRQs), TX on the
//!    lower one.
//! 5. A single allowed CPU: both threads share it, and the plan says the rates are not
//!    representative.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuPlan {
    pub tx: Option<usize>,
    pub rx: Option<usize>,
    pub description: String,
    /// (TX, RX) per stream for multi-stream runs; the first is (tx, rx).
    pub pairs: Vec<(Option<usize>, Option<usize>)>,
}

/// Extends a plan to `n` streams: further pairs come from the rest of the usable isolated CPUs,
/// then the other allowed CPUs from the highest down, wrapping (and saying so) when the host
/// has fewer than 2n.
pub fn extend(mut p: CpuPlan, isolated: &[usize], allowed: &[usize], n: usize) -> CpuPlan {
    let (Some(tx), Some(rx)) = (p.tx, p.rx) else {
        p.pairs = vec![(None, None); n.max(1)];
        return p;
    };
    let mut order: Vec<usize> = vec![tx, rx];
    for &c in isolated {
        if allowed.contains(&c) && !order.contains(&c) {
            order.push(c);
        }
    }
    let mut rest: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|c| !order.contains(c))
        .collect();
    rest.sort_unstable_by(|a, b| b.cmp(a));
    order.extend(rest);
    p.pairs = (0..n.max(1))
        .map(|i| {
            (
                Some(order[(2 * i) % order.len()]),
                Some(order[(2 * i + 1) % order.len()]),
            )
        })
        .collect();
    if n > 1 {
        let list: Vec<String> = p
            .pairs
            .iter()
            .map(|(t, r)| format!("{}->{}", t.unwrap_or(0), r.unwrap_or(0)))
            .collect();
        p.description
            .push_str(&format!("; {n} streams on tx->rx cpus {}", list.join(" ")));
        if 2 * n > order.len() {
            p.description
                .push_str(" (more streams than cpus: they share, rates are not representative)");
        }
    }
    p
}

fn list(v: &[usize]) -> String {
    let s: Vec<String> = v.iter().map(|c| c.to_string()).collect();
    if s.is_empty() {
        "none".into()
    } else {
        s.join(",")
    }
}

pub fn plan(
    isolated: &[usize],
    allowed: &[usize],
    tx_override: Option<usize>,
    rx_override: Option<usize>,
    pin: bool,
) -> CpuPlan {
    if !pin {
        return CpuPlan {
            tx: None,
            rx: None,
            description: "not pinned (--no-pin)".into(),
            pairs: Vec::new(),
        };
    }
    if allowed.is_empty() {
        return CpuPlan {
            tx: None,
            rx: None,
            description: "not pinned: the affinity mask could not be read".into(),
            pairs: Vec::new(),
        };
    }
    let ok = |c: usize| allowed.contains(&c);
    let mut notes = Vec::new();
    for (flag, c) in [("--tx-cpu", tx_override), ("--rx-cpu", rx_override)] {
        if let Some(c) = c {
            if !ok(c) {
                notes.push(format!("{flag} {c} not allowed here, ignored"));
            }
        }
    }
    let usable: Vec<usize> = isolated.iter().copied().filter(|&c| ok(c)).collect();
    let mut high: Vec<usize> = allowed.to_vec();
    high.sort_unstable();
    let (mut tx, mut rx, how) = if usable.len() >= 2 {
        (
            usable[0],
            usable[1],
            format!("profile isolated {}", list(isolated)),
        )
    } else if usable.len() == 1 {
        let other = high.iter().rev().copied().find(|&c| c != usable[0]);
        match other {
            Some(o) => (
                usable[0],
                o,
                format!(
                    "remapped: only cpu {} of the profile's {} usable, rx on cpu {o}",
                    usable[0],
                    list(isolated)
                ),
            ),
            None => (usable[0], usable[0], "one cpu".into()),
        }
    } else {
        let n = high.len();
        let (a, b) = if n >= 2 {
            (high[n - 2], high[n - 1])
        } else {
            (high[0], high[0])
        };
        let why = if isolated.is_empty() {
            "no isolated cpus in the profile".to_string()
        } else {
            format!("profile isolated {} not available here", list(isolated))
        };
        (
            a,
            b,
            format!("remapped: {why}; using the highest allowed cpus"),
        )
    };
    if let Some(c) = tx_override.filter(|&c| ok(c)) {
        tx = c;
    }
    if let Some(c) = rx_override.filter(|&c| ok(c)) {
        rx = c;
    }
    let mut description = format!("tx cpu {tx}, rx cpu {rx} ({how})");
    if tx_override.is_some() || rx_override.is_some() {
        description.push_str("; overridden on the command line");
    }
    if tx == rx {
        description.push_str("; tx and rx share one cpu, rates are not representative");
    }
    for n in notes {
        description.push_str("; ");
        description.push_str(&n);
    }
    CpuPlan {
        tx: Some(tx),
        rx: Some(rx),
        description,
        pairs: vec![(Some(tx), Some(rx))],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_cpus_used_when_present() {
        let p = plan(&[9, 10, 11], &(0..12).collect::<Vec<_>>(), None, None, true);
        assert_eq!((p.tx, p.rx), (Some(9), Some(10)));
        assert!(p.description.contains("profile isolated 9,10,11"));
    }

    #[test]
    fn remapped_on_small_hosts() {
        let p = plan(&[16, 17, 18, 19], &[0, 1], None, None, true);
        assert_eq!((p.tx, p.rx), (Some(0), Some(1)));
        assert!(p.description.contains("remapped"));
        let p = plan(&[1, 17], &[0, 1, 2, 3], None, None, true);
        assert_eq!((p.tx, p.rx), (Some(1), Some(3)));
        let p = plan(&[], &[0, 1, 2, 3], None, None, true);
        assert_eq!((p.tx, p.rx), (Some(2), Some(3)));
        let p = plan(&[5], &[0], None, None, true);
        assert_eq!((p.tx, p.rx), (Some(0), Some(0)));
        assert!(p.description.contains("share"));
    }

    #[test]
    fn streams_get_their_own_pairs() {
        let all: Vec<usize> = (0..16).collect();
        let p = extend(
            plan(&[8, 9, 10, 11], &all, None, None, true),
            &[8, 9, 10, 11],
            &all,
            4,
        );
        assert_eq!(
            p.pairs,
            vec![
                (Some(8), Some(9)),
                (Some(10), Some(11)),
                (Some(15), Some(14)),
                (Some(13), Some(12))
            ]
        );
        assert!(!p.description.contains("share"));
        let p = extend(plan(&[], &[0, 1], None, None, true), &[], &[0, 1], 2);
        assert_eq!(p.pairs, vec![(Some(0), Some(1)), (Some(0), Some(1))]);
        assert!(p.description.contains("share"));
        let p = extend(plan(&[], &[0, 1], None, None, false), &[], &[0, 1], 3);
        assert_eq!(p.pairs.len(), 3);
    }

    #[test]
    fn overrides_and_unpinned() {
        let p = plan(&[2, 3], &[0, 1, 2, 3], Some(1), Some(9), true);
        assert_eq!((p.tx, p.rx), (Some(1), Some(3)));
        assert!(p.description.contains("--rx-cpu 9 not allowed"));
        let p = plan(&[2, 3], &[0, 1, 2, 3], None, None, false);
        assert_eq!((p.tx, p.rx), (None, None));
        let p = plan(&[2, 3], &[], None, None, true);
        assert_eq!(p.tx, None);
    }
}
