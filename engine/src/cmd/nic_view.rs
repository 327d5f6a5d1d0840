//! `daqtune nic`: every port's drop and error counters with their source (the interface
//! statistics, the driver's `ethtool -S` counters, the ethtool-netlink groups), as `ethtool -S`
//! and `ip -s link` show them; with `--interval`, two reads that far apart and what rose
//! between them. The sibling of `daqtune gpu`. From the live host, or a root's statistics.

use crate::check::commands::{GlobalOptions, UsageError};
use crate::hostroot::open_host;
use daqtune_probe::net::counters::{deltas, kind_of, read_port, Delta, PortCounters, Unavailable};
use daqtune_probe::Host;
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "daqtune.nic-view/v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NicView {
    pub schema: String,
    pub root: String,
    /// `live` or `recorded` (a host root: its statistics files only).
    pub source: String,
    /// Seconds between the two reads of `--interval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
    pub ports: Vec<PortEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortEntry {
    pub ifname: String,
    /// The PCI function behind it, where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    pub counters: Vec<CounterEntry>,
    /// With `--interval`: what rose between the two reads, most telling first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rose: Option<Vec<Delta>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<Unavailable>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterEntry {
    pub name: String,
    pub value: u64,
    pub source: String,
    /// What a rise means (`nic-buffer`, `rx-buffer`, `link`, ...); absent for good traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<daqtune_probe::net::counters::Kind>,
}

/// What the view shows.
#[derive(Debug, Clone, Default)]
pub struct NicOptions {
    /// Only these interfaces (all but `lo` when empty).
    pub interfaces: Vec<String>,
    /// Read twice this many seconds apart (live only).
    pub interval_s: Option<f64>,
    /// Every counter, not only the drop and error counters and those that are not zero.
    pub all: bool,
}

/// The interfaces of `host`: all but loopback.
fn interfaces(host: &Host) -> Vec<String> {
    let mut v = host.read_dir("/sys/class/net").unwrap_or_default();
    v.retain(|n| n != "lo" && daqtune_units::validate::interface_name(n).is_ok());
    v.sort();
    v
}

pub fn gather(g: &GlobalOptions, o: &NicOptions) -> Result<NicView, UsageError> {
    let host = open_host(g)?;
    if let Some(s) = o.interval_s {
        if !host.is_live() {
            return Err(UsageError::Other(
                "--interval reads the running kernel twice; a host root is one recorded moment"
                    .into(),
            ));
        }
        if !(s > 0.0 && s <= 3600.0) {
            return Err(UsageError::Other("--interval: seconds in (0, 3600]".into()));
        }
    }
    let names = if o.interfaces.is_empty() {
        interfaces(&host)
    } else {
        for n in &o.interfaces {
            if !host.exists(&format!("/sys/class/net/{n}")) {
                return Err(UsageError::Other(format!(
                    "{n}: no such interface under /sys/class/net"
                )));
            }
        }
        o.interfaces.clone()
    };
    let first: Vec<PortCounters> = names.iter().map(|n| read_port(&host, n)).collect();
    let (now, interval) = match o.interval_s {
        Some(s) => {
            let t = std::time::Instant::now();
            std::thread::sleep(std::time::Duration::from_secs_f64(s));
            let again: Vec<PortCounters> = names.iter().map(|n| read_port(&host, n)).collect();
            (again, Some(t.elapsed().as_secs_f64()))
        }
        None => (first.clone(), None),
    };
    let mut v = view(&host, &first, &now, interval, o.all);
    v.root = host.shown_root();
    Ok(v)
}

/// The view of `now` (and what rose since `first` when `interval` is given).
pub fn view(
    host: &Host,
    first: &[PortCounters],
    now: &[PortCounters],
    interval: Option<f64>,
    all: bool,
) -> NicView {
    let ports = now
        .iter()
        .zip(first)
        .map(|(p, b)| {
            let dev = format!("/sys/class/net/{}/device", p.ifname);
            let pci = host
                .read_link(&dev)
                .ok()
                .and_then(|l| l.rsplit('/').next().map(str::to_string));
            let driver = host
                .read_link(&format!("{dev}/driver"))
                .ok()
                .and_then(|l| l.rsplit('/').next().map(str::to_string));
            let counters = p
                .counters
                .iter()
                .filter_map(|c| {
                    let kind = kind_of(c.source, &c.name);
                    (all || kind.is_some() && c.value > 0).then(|| CounterEntry {
                        name: c.name.clone(),
                        value: c.value,
                        source: c.source.label().into(),
                        kind,
                    })
                })
                .collect();
            PortEntry {
                ifname: p.ifname.clone(),
                pci,
                driver,
                counters,
                rose: interval.map(|_| deltas(b, p)),
                unavailable: p.unavailable.clone(),
            }
        })
        .collect();
    NicView {
        schema: SCHEMA.into(),
        root: host.root().display().to_string(),
        source: if host.is_live() { "live" } else { "recorded" }.into(),
        interval_s: interval,
        ports,
    }
}

pub fn json(v: &NicView) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host root's statistics: shown with their source and kind; the ethtool parts say why
    /// they are absent.
    #[test]
    fn a_root_shows_its_statistics_with_sources() {
        let d = tempfile::tempdir().expect("tmp");
        let st = d.path().join("sys/class/net/eth2/statistics");
        std::fs::create_dir_all(&st).expect("mkdir");
        std::fs::write(st.join("rx_dropped"), "17\n").expect("w");
        std::fs::write(st.join("rx_missed_errors"), "0\n").expect("w");
        std::fs::write(st.join("rx_packets"), "900\n").expect("w");
        std::fs::create_dir_all(d.path().join("sys/class/net/lo/statistics")).expect("mkdir");
        let host = Host::at(d.path()).expect("root");
        let ports: Vec<PortCounters> = interfaces(&host)
            .iter()
            .map(|n| read_port(&host, n))
            .collect();
        let v = view(&host, &ports, &ports, None, false);
        assert_eq!(v.ports.len(), 1, "lo is left out");
        let p = &v.ports[0];
        assert_eq!(
            p.counters,
            vec![CounterEntry {
                name: "rx_dropped".into(),
                value: 17,
                source: "interface statistics".into(),
                kind: Some(daqtune_probe::net::counters::Kind::KernelDrop),
            }]
        );
        // The ethtool parts a host root lacks say why, as data (render::nic words them).
        assert!(
            p.unavailable
                .iter()
                .any(|u| u.reason.contains("running kernel")),
            "{:?}",
            p.unavailable
        );
        let all = view(&host, &ports, &ports, None, true);
        assert_eq!(all.ports[0].counters.len(), 3);
        let j: serde_json::Value = serde_json::from_str(&json(&v)).expect("json");
        assert_eq!(j["schema"], SCHEMA);
        assert_eq!(j["ports"][0]["counters"][0]["kind"], "kernel-drop");
    }
}
