//! `nic.counters`: is a data port already dropping or damaging frames before anything runs?
//! Each data port's drop and error counters (`daqtune_probe::net::counters`: the interface
//! statistics, the driver's `ethtool -S` counters, the ethtool-netlink groups) are compared
//! with an earlier read: the previous check of this boot (the per-boot record
//! `/run/daqtune/nic-counters.json`, written by a check run as root), else the first read of
//! this run. A loss counter that rose warns, naming the counter, by how much, over what
//! interval and what it means; the totals since boot are reported either way. The check never
//! sleeps to make an interval (issue 43: `check` in tens of ms); `daqtune nic --interval`
//! takes two reads as far apart as asked.

use crate::context::nics::data_path_nics_or_skip;
use crate::context::Context;
use crate::tunable::Tunable;
use crate::verdict::{Area, Verdict};
use daqtune_probe::net::counters::{
    self, deltas, describe_delta, kind_of, losses, thousands, CacheFile, CachedPort, Delta,
    PortCounters, CACHE_PATH, CACHE_SCHEMA,
};
use std::collections::BTreeMap;

pub const ID: &str = "nic.counters";

pub const COUNTERS: Tunable = Tunable {
    id: ID,
    area: Area::Nic,
    title: "Drop and error counters of the data ports: totals since boot, and rising",
    aliases: &["counters", "nic-counters"],
    doc: include_str!("../../../docs/checks/nic.counters.md"),
    needs_root: false,
    profile_keys: &["nic.interfaces"],
    check: run,
    planner: None,
};

/// The earlier read a port's counters are compared with.
#[derive(Debug, Clone)]
pub struct Baseline {
    pub counters: PortCounters,
    pub seconds: f64,
    /// `since the last check` / `since the start of this run`.
    pub what: &'static str,
}

/// `41 s`, `120 ms`, `2 h 3 min`.
pub fn interval(seconds: f64) -> String {
    if seconds < 1.0 {
        format!("{:.0} ms", seconds * 1000.0)
    } else if seconds < 120.0 {
        format!("{seconds:.0} s")
    } else if seconds < 7200.0 {
        format!("{:.0} min", seconds / 60.0)
    } else {
        format!("{:.1} h", seconds / 3600.0)
    }
}

/// The loss counters with a non-zero total: `rx_dropped 17, rx_missed_errors 4`.
pub fn totals(p: &PortCounters) -> Vec<String> {
    let mut v: Vec<(&counters::Counter, counters::Kind)> = p
        .counters
        .iter()
        .filter(|c| c.value > 0)
        .filter_map(|c| Some((c, kind_of(c.source, &c.name).filter(|k| k.is_loss())?)))
        .collect();
    v.sort_by(|a, b| a.1.cmp(&b.1).then(b.0.value.cmp(&a.0.value)));
    v.into_iter()
        .map(|(c, _)| format!("{} {}", c.name, thousands(c.value)))
        .collect()
}

/// The verdict for one port: `now` against `base` (when there is one).
pub fn judge(subject: &str, now: &PortCounters, base: Option<&Baseline>) -> Verdict {
    let tot = totals(now);
    let since_boot = if tot.is_empty() {
        "no drop or error counted since boot".to_string()
    } else {
        format!("since boot: {}", join_some(&tot, 6))
    };
    let sources = sources_of(now);
    if now.counters.is_empty() {
        let why = now
            .unavailable
            .iter()
            .map(|u| format!("{}: {}", u.source, u.reason))
            .collect::<Vec<_>>()
            .join("; ");
        return Verdict::skip(ID, subject, format!("no counters could be read ({why})"));
    }
    let Some(base) = base else {
        return Verdict::skip(
            ID,
            subject,
            format!(
                "one read only (a host root is one moment): whether they rise cannot be told; {since_boot} ({sources})"
            ),
        );
    };
    let d: Vec<Delta> = deltas(&base.counters, now);
    let rose: Vec<&Delta> = losses(&d).collect();
    let span = format!("in the {} {}", interval(base.seconds), base.what);
    if rose.is_empty() {
        return Verdict::pass(
            ID,
            subject,
            format!("no drop or error counter rose {span}; {since_boot} ({sources})"),
        );
    }
    let first = rose
        .iter()
        .take(3)
        .map(|d| describe_delta(d))
        .collect::<Vec<_>>()
        .join("; ");
    let more = match rose.len() {
        n if n > 3 => format!(" (and {} more)", n - 3),
        _ => String::new(),
    };
    Verdict::warn(ID, subject, format!("{first}{more} {span}; {since_boot}"))
        .observed(format!("{} rose by {}", rose[0].name, rose[0].delta))
        .expected("no drop or error counter rising")
}

fn join_some(v: &[String], n: usize) -> String {
    let mut s = v.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if v.len() > n {
        s.push_str(&format!(" and {} more", v.len() - n));
    }
    s
}

fn sources_of(p: &PortCounters) -> String {
    let mut s: Vec<&str> = p.counters.iter().map(|c| c.source.label()).collect();
    s.sort();
    s.dedup();
    s.join(", ")
}

fn now_unix() -> Option<u64> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

fn run(ctx: &Context) -> Vec<Verdict> {
    let nics = match data_path_nics_or_skip(ctx, ID) {
        Ok(n) => n,
        Err(v) => return v,
    };
    let live = ctx.host.is_live();
    let boot_id = ctx
        .read_attr("/proc/sys/kernel/random/boot_id")
        .ok()
        .filter(|b| !b.is_empty());
    // The previous check of this boot: the live host only (a root is one recorded moment, and
    // `check --root` never writes into it).
    let cache = match (&boot_id, live) {
        (Some(b), true) => counters::load_cache(std::path::Path::new(CACHE_PATH), b).ok(),
        _ => None,
    };
    let now_s = now_unix();
    let mut out = Vec::new();
    let mut record: BTreeMap<String, CachedPort> = BTreeMap::new();
    for n in nics {
        if n.netdevs.is_empty() {
            out.push(Verdict::skip(
                ID,
                n.label(),
                "no network interface in this namespace: its counters cannot be read here",
            ));
            continue;
        }
        for dev in &n.netdevs {
            let (now, (first_at, first)) = ctx.port_counters(&dev.name);
            let subject = format!("{} ({})", dev.name, n.addr);
            let earlier = cache.as_ref().and_then(|c| {
                let p = c.ports.get(&dev.name)?;
                let age = now_s?.checked_sub(c.taken_unix)?;
                (p.ifindex == dev.ifindex && age > 0).then(|| Baseline {
                    counters: p.counters.clone(),
                    seconds: age as f64,
                    what: "since the last check",
                })
            });
            let base = earlier.or_else(|| {
                live.then(|| Baseline {
                    counters: (*first).clone(),
                    seconds: first_at.elapsed().as_secs_f64(),
                    what: "since the start of this run",
                })
            });
            out.push(judge(&subject, &now, base.as_ref()));
            record.insert(
                dev.name.clone(),
                CachedPort {
                    ifindex: dev.ifindex,
                    counters: now,
                },
            );
        }
    }
    // Leave this read for the next check of the boot (root only: /run/daqtune is root's; a
    // run that cannot write it compares within itself next time too).
    if let (true, true, Some(boot_id), Some(t)) =
        (live, daqtune_probe::sys::is_root(), boot_id, now_s)
    {
        if !record.is_empty() {
            let _ = counters::store_cache(
                std::path::Path::new(CACHE_PATH),
                &CacheFile {
                    schema: CACHE_SCHEMA.into(),
                    boot_id,
                    taken_unix: t,
                    ports: record,
                },
            );
        }
    }
    out
}

/// Takes this run's first read of every data port, so that `nic.counters`, run later among
/// the checks, has an interval within the run to compare over when no earlier check of this
/// boot left a record. Called by the registry before the checks.
pub fn start(ctx: &Context) {
    if !ctx.host.is_live() {
        return;
    }
    let Ok(f) = ctx.pci() else {
        return;
    };
    for n in crate::context::nics::data_path_nics(ctx, f) {
        for d in &n.netdevs {
            let _ = ctx.port_counters(&d.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_probe::net::counters::{Counter, Source};

    fn port(c: &[(Source, &str, u64)]) -> PortCounters {
        PortCounters {
            ifname: "eth2".into(),
            counters: c
                .iter()
                .map(|(s, n, v)| Counter {
                    source: *s,
                    name: (*n).into(),
                    value: *v,
                })
                .collect(),
            unavailable: Vec::new(),
        }
    }

    /// The example: mlx5's rx_out_of_buffer rising by 12,345 in the 41 s since the
    /// last check warns with that sentence and the totals since boot.
    #[test]
    fn a_rising_loss_counter_warns_with_its_interval_and_meaning() {
        let before = port(&[
            (Source::Driver, "rx_out_of_buffer", 100),
            (Source::Statistics, "rx_packets", 1),
            (Source::Driver, "tx_pause_ctrl_phy", 0),
        ]);
        let now = port(&[
            (Source::Driver, "rx_out_of_buffer", 12_445),
            (Source::Statistics, "rx_packets", 90_000),
            (Source::Driver, "tx_pause_ctrl_phy", 50),
        ]);
        let base = Baseline {
            counters: before,
            seconds: 41.0,
            what: "since the last check",
        };
        let v = judge("eth2 (0000:05:00.0)", &now, Some(&base));
        assert_eq!(v.status, crate::verdict::Status::Warn, "{}", v.message);
        assert!(
            v.message.starts_with(
                "rx_out_of_buffer (driver (ethtool -S)) rose by 12,345: dropped for lack of receive buffers: rings / CPU / PCIe"
            ),
            "{}",
            v.message
        );
        assert!(
            v.message
                .contains("in the 41 s since the last check; since boot: rx_out_of_buffer 12,445"),
            "{}",
            v.message
        );
        // Pause frames are flow control, not loss: no warning of their own.
        let calm = port(&[
            (Source::Driver, "rx_out_of_buffer", 100),
            (Source::Driver, "tx_pause_ctrl_phy", 9),
        ]);
        let base = Baseline {
            counters: port(&[
                (Source::Driver, "rx_out_of_buffer", 100),
                (Source::Driver, "tx_pause_ctrl_phy", 0),
            ]),
            seconds: 0.02,
            what: "since the start of this run",
        };
        let v = judge("eth2", &calm, Some(&base));
        assert_eq!(v.status, crate::verdict::Status::Pass, "{}", v.message);
        assert!(
            v.message.starts_with(
                "no drop or error counter rose in the 20 ms since the start of this run; since boot: rx_out_of_buffer 100"
            ),
            "{}",
            v.message
        );
    }

    #[test]
    fn one_read_or_none_skips_with_the_reason() {
        let now = port(&[(Source::Statistics, "rx_dropped", 17)]);
        let v = judge("eth2", &now, None);
        assert_eq!(v.status, crate::verdict::Status::Skip);
        assert!(
            v.message.contains("since boot: rx_dropped 17"),
            "{}",
            v.message
        );
        let mut empty = port(&[]);
        empty.unavailable.push(counters::Unavailable {
            source: "interface statistics".into(),
            reason: "/sys/class/net/eth2/statistics: not found".into(),
        });
        let v = judge("eth2", &empty, None);
        assert_eq!(v.status, crate::verdict::Status::Skip);
        assert!(v.message.contains("not found"), "{}", v.message);
    }

    #[test]
    fn intervals_read_naturally() {
        assert_eq!(interval(0.0304), "30 ms");
        assert_eq!(interval(41.2), "41 s");
        assert_eq!(interval(600.0), "10 min");
        assert_eq!(interval(7200.0), "2.0 h");
    }
}
