//! `nic.counters`: is a data port already dropping or damaging frames before anything runs?
//! Each data port's drop and error counters (`daqtune_probe::net::counters`: the interface
//! statistics, the driver's `ethtool -S` counters, the ethtool-netlink groups) are compared
//! with an earlier read: the previous check of this boot (the per-boot record
//! `/run/daqtune/nic-counters.json`, written by a check run as root), else the first read of
//! this run, taken before the checks start; the registry runs this check after all the others
//! (`tunables::DEFERRED`), so that window is the whole run. A loss counter that rose warns, naming the
//! counter, by how much, over what interval and what it means. Where the window is too short to
//! see a slow leak (the first check of a boot, `--only nic.counters`) or there is none (a host
//! root), the totals since boot are judged against the uptime: a buffer, queue or link counter
//! that averaged one or more per second since boot warns ([`since_boot_rates`]). The check
//! never sleeps to make an interval (issue 43: `check` in tens of ms); `daqtune nic --interval`
//! takes two reads as far apart as asked.

use crate::model::context::nics::data_path_nics_or_skip;
use crate::model::context::Context;
use crate::model::tunable::Tunable;
use crate::model::verdict::{Area, Verdict};
use daqtune_probe::net::counters::{
    self, deltas, describe_delta, kind_of, losses, thousands, CacheFile, CachedPort, Delta,
    PortCounters, CACHE_PATH, CACHE_SCHEMA,
};
use std::collections::BTreeMap;

pub const ID: &str = "nic.counters";

/// A window shorter than this cannot show a slow leak (a counter rising by a few a second):
/// below it the totals since boot are judged against the uptime too.
pub const MIN_WINDOW_S: f64 = 1.0;

/// An average since boot at or above this many per second warns where the window cannot tell.
pub const SINCE_BOOT_WARN_PER_S: f64 = 1.0;

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

/// Whether a kind's total since boot says something on its own: drops in the NIC's buffer, for
/// lack of receive buffers, in one queue, and damage on the wire happen only when something is
/// wrong. `rx_dropped`/`rx_nohandler` also count frames of protocols nothing on the host handles
/// (LLDP, STP, a stray multicast: if_link.h "unsupported protocol"), transmit drops count a
/// link that was down, and the aggregates repeat the others: their totals are shown, not judged.
pub fn judged_since_boot(k: counters::Kind) -> bool {
    use counters::Kind;
    matches!(
        k,
        Kind::NicBuffer | Kind::RxBuffer | Kind::QueueDrop | Kind::Link
    )
}

/// The counters of [`judged_since_boot`] kinds whose average since boot reaches
/// [`SINCE_BOOT_WARN_PER_S`]: `(counter, total, per second)`, most telling first.
pub fn since_boot_rates(p: &PortCounters, uptime_s: f64) -> Vec<(&counters::Counter, f64)> {
    if !(uptime_s.is_finite() && uptime_s > 0.0) {
        return Vec::new();
    }
    let mut v: Vec<(&counters::Counter, counters::Kind, f64)> = p
        .counters
        .iter()
        .filter_map(|c| {
            let k = kind_of(c.source, &c.name).filter(|k| judged_since_boot(*k))?;
            let rate = c.value as f64 / uptime_s;
            (rate >= SINCE_BOOT_WARN_PER_S).then_some((c, k, rate))
        })
        .collect();
    v.sort_by(|a, b| a.1.cmp(&b.1).then(b.0.value.cmp(&a.0.value)));
    v.into_iter().map(|(c, _, r)| (c, r)).collect()
}

/// `1.2/s`, `35/s`.
fn per_second(r: f64) -> String {
    if r < 10.0 {
        format!("{r:.1}/s")
    } else {
        format!("{}/s", thousands(r.round() as u64))
    }
}

/// The verdict for one port: `now` against `base` (when there is one), the totals since boot
/// against `uptime_s` (the kernel's `/proc/uptime`, when it could be read).
pub fn judge(
    subject: &str,
    now: &PortCounters,
    base: Option<&Baseline>,
    uptime_s: Option<f64>,
) -> Verdict {
    let tot = totals(now);
    let up = uptime_s
        .map(|u| format!(" (uptime {})", interval(u)))
        .unwrap_or_default();
    let since_boot = if tot.is_empty() {
        "no drop or error counted since boot".to_string()
    } else {
        format!("since boot{up}: {}", join_some(&tot, 6))
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
    // Where no window can show a slow leak, the totals since boot against the uptime.
    let heavy = match (base, uptime_s) {
        (Some(b), _) if b.seconds >= MIN_WINDOW_S => Vec::new(),
        (_, Some(u)) => since_boot_rates(now, u),
        (_, None) => Vec::new(),
    };
    let heavy_warn = |window: &str| {
        let (c, rate) = heavy[0];
        let k = kind_of(c.source, &c.name).map_or("", |k| k.meaning());
        Verdict::warn(
            ID,
            subject,
            format!(
                "{} ({}) counted {} since boot, {} on average over {}: {k}; {window}, so whether it still rises cannot be told (`daqtune nic --interval 5` reads twice, 5 s apart); {since_boot}",
                c.name,
                c.source.label(),
                thousands(c.value),
                per_second(rate),
                interval(uptime_s.unwrap_or_default()),
            ),
        )
        .observed(format!("{} {} since boot", c.name, c.value))
        .expected(format!(
            "under {SINCE_BOOT_WARN_PER_S}/s since boot, or not rising"
        ))
    };
    let Some(base) = base else {
        if !heavy.is_empty() {
            return heavy_warn("one read only (a host root is one moment)");
        }
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
        if !heavy.is_empty() {
            return heavy_warn(&format!(
                "none rose {span}, too short a window to show a slow leak"
            ));
        }
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
    let uptime_s = ctx
        .read_attr("/proc/uptime")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok())
        .filter(|u| u.is_finite() && *u > 0.0);
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
            out.push(judge(&subject, &now, base.as_ref(), uptime_s));
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

/// Takes this run's first read of every data port, so that `nic.counters`, judged after all
/// the other checks (`tunables::DEFERRED`), has the whole run as its window when no earlier
/// check of this boot left a record. Called by the registry before the checks.
pub fn start(ctx: &Context) {
    if !ctx.host.is_live() {
        return;
    }
    let Ok(f) = ctx.pci() else {
        return;
    };
    for n in crate::model::context::nics::data_path_nics(ctx, f) {
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
        let v = judge("eth2 (0000:05:00.0)", &now, Some(&base), None);
        assert_eq!(
            v.status,
            crate::model::verdict::Status::Warn,
            "{}",
            v.message
        );
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
        let v = judge("eth2", &calm, Some(&base), Some(3600.0));
        assert_eq!(
            v.status,
            crate::model::verdict::Status::Pass,
            "{}",
            v.message
        );
        assert!(
            v.message.starts_with(
                "no drop or error counter rose in the 20 ms since the start of this run; since boot (uptime 60 min): rx_out_of_buffer 100"
            ),
            "{}",
            v.message
        );
    }

    #[test]
    fn one_read_or_none_skips_with_the_reason() {
        let now = port(&[(Source::Statistics, "rx_dropped", 17)]);
        let v = judge("eth2", &now, None, Some(3600.0));
        assert_eq!(v.status, crate::model::verdict::Status::Skip);
        assert!(
            v.message
                .contains("since boot (uptime 60 min): rx_dropped 17"),
            "{}",
            v.message
        );
        let mut empty = port(&[]);
        empty.unavailable.push(counters::Unavailable {
            source: "interface statistics".into(),
            reason: "/sys/class/net/eth2/statistics: not found".into(),
        });
        let v = judge("eth2", &empty, None, None);
        assert_eq!(v.status, crate::model::verdict::Status::Skip);
        assert!(v.message.contains("not found"), "{}", v.message);
    }

    /// The first check of a boot sees only the run's own window: a receive-buffer counter
    /// that averaged 2,000 drops a second over the hour since boot warns (one per second is
    /// the line); the same total over a window long enough to see it rise, or a kernel drop
    /// counter (which counts frames of protocols nothing handles, if_link.h), does not.
    #[test]
    fn totals_since_boot_are_judged_against_the_uptime_where_the_window_cannot_tell() {
        use crate::model::verdict::Status;
        let heavy = port(&[
            (Source::Driver, "rx_out_of_buffer", 7_200_000),
            (Source::Statistics, "rx_dropped", 9_000_000),
        ]);
        let short = Baseline {
            counters: heavy.clone(),
            seconds: 0.06,
            what: "since the start of this run",
        };
        let v = judge("eth2", &heavy, Some(&short), Some(3600.0));
        assert_eq!(v.status, Status::Warn, "{}", v.message);
        assert!(
            v.message.starts_with(
                "rx_out_of_buffer (driver (ethtool -S)) counted 7,200,000 since boot, 2,000/s on average over 60 min: dropped for lack of receive buffers"
            ),
            "{}",
            v.message
        );
        assert!(
            v.message
                .contains("none rose in the 60 ms since the start of this run, too short a window"),
            "{}",
            v.message
        );
        // Under one a second on average: nothing to say beyond the totals.
        let light = port(&[(Source::Driver, "rx_out_of_buffer", 3_599)]);
        let base = Baseline {
            counters: light.clone(),
            seconds: 0.06,
            what: "since the start of this run",
        };
        assert_eq!(
            judge("eth2", &light, Some(&base), Some(3600.0)).status,
            Status::Pass
        );
        // rx_dropped alone, however many: shown, not judged.
        let kernel = port(&[(Source::Statistics, "rx_dropped", 9_000_000)]);
        let base = Baseline {
            counters: kernel.clone(),
            seconds: 0.06,
            what: "since the start of this run",
        };
        let v = judge("eth2", &kernel, Some(&base), Some(3600.0));
        assert_eq!(v.status, Status::Pass, "{}", v.message);
        assert!(v.message.contains("rx_dropped 9,000,000"), "{}", v.message);
        // A window of 41 s that saw nothing rise is the judgement: the totals are history.
        let long = Baseline {
            counters: heavy.clone(),
            seconds: 41.0,
            what: "since the last check",
        };
        assert_eq!(
            judge("eth2", &heavy, Some(&long), Some(3600.0)).status,
            Status::Pass
        );
        // A host root (one moment): the averages are all there is.
        assert_eq!(
            judge("eth2", &heavy, None, Some(3600.0)).status,
            Status::Warn
        );
        assert_eq!(
            judge("eth2", &light, None, Some(3600.0)).status,
            Status::Skip
        );
        assert_eq!(judge("eth2", &heavy, None, None).status, Status::Skip);
    }

    #[test]
    fn intervals_read_naturally() {
        assert_eq!(interval(0.0304), "30 ms");
        assert_eq!(interval(41.2), "41 s");
        assert_eq!(interval(600.0), "10 min");
        assert_eq!(interval(7200.0), "2.0 h");
    }
}
