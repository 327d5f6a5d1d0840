//! `ethtool -g/-l/-c/-a/-k/-i IFACE` output as people paste it, one or several sections in one
//! text, read into the groups daqtune records for a port ([`super::ethtool::GroupState`]):
//! what `ethtool` printed becomes what the netlink reader would have recorded. `n/a` is a value
//! the driver does not report (`None`), as netlink leaves the attribute out.
//!
//! Sections start with the header ethtool prints (`Ring parameters for IF:`, `Channel
//! parameters for IF:`, `Coalesce parameters for IF:`, `Pause parameters for IF:`, `Features
//! for IF:`); `ethtool -i` has no header and starts with `driver:`.

use super::ethtool::{
    kernel_feature, Channels, Coalesce, DataSplit, Feature, Features, GroupState, Pause, Rings,
};

pub use crate::text::LineError as EthtoolTextError;

/// One section: the port, and its group's values (or `-i`'s driver information).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Section {
    Group {
        ifname: String,
        state: GroupState,
        lines: (usize, usize),
    },
    /// `ethtool -i`: driver, firmware and PCI function of the port it names elsewhere.
    Info {
        driver: Option<String>,
        firmware: Option<String>,
        bus_info: Option<String>,
        lines: (usize, usize),
    },
}

/// Sections of one text; more are refused.
pub const MAX_SECTIONS: usize = 1024;
/// Features of one `-k` section (a kernel has about 70).
pub const MAX_FEATURES: usize = 512;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Head {
    Rings,
    Channels,
    Coalesce,
    Pause,
    Features,
    Info,
}

/// The header of a section and the interface it names.
fn head(l: &str) -> Option<(Head, &str)> {
    let t = l.trim_end();
    for (p, h) in [
        ("Ring parameters for ", Head::Rings),
        ("Channel parameters for ", Head::Channels),
        ("Coalesce parameters for ", Head::Coalesce),
        ("Pause parameters for ", Head::Pause),
        ("Features for ", Head::Features),
    ] {
        if let Some(r) = t.strip_prefix(p) {
            let name = r.strip_suffix(':')?;
            return Some((h, name));
        }
    }
    t.starts_with("driver:").then_some((Head::Info, ""))
}

/// An interface name as the kernel allows it (IFNAMSIZ 16, no `/`, not `.`/`..`).
fn valid_ifname(n: &str) -> bool {
    !n.is_empty()
        && n.len() < 16
        && n != "."
        && n != ".."
        && !n.contains(['/', ':'])
        && n.chars().all(|c| c.is_ascii_graphic())
}

/// A text whose first line is an ethtool section header (`-i`: `driver:` then `version:`).
pub fn looks_like(text: &str) -> bool {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    match (lines.next().and_then(head), lines.next()) {
        (Some((Head::Info, _)), Some(b)) => b.starts_with("version:"),
        (Some(_), _) => true,
        _ => false,
    }
}

fn err(line: usize, message: impl Into<String>) -> EthtoolTextError {
    EthtoolTextError {
        line,
        message: message.into(),
    }
}

/// `8192`, `n/a` (None); anything else is an error.
fn num(v: &str, n: usize, k: &str) -> Result<Option<u32>, EthtoolTextError> {
    let v = v.trim();
    if v == "n/a" {
        return Ok(None);
    }
    v.parse()
        .map(Some)
        .map_err(|_| err(n, format!("`{k}: {v}`: expected a number or n/a")))
}

fn flag(v: &str, n: usize, k: &str) -> Result<Option<bool>, EthtoolTextError> {
    match v.split_whitespace().next().unwrap_or("") {
        "on" => Ok(Some(true)),
        "off" => Ok(Some(false)),
        "n/a" => Ok(None),
        _ => Err(err(
            n,
            format!("`{k}: {}`: expected on, off or n/a", v.trim()),
        )),
    }
}

/// Parse every section of `text`.
pub fn parse(text: &str) -> Result<Vec<Section>, EthtoolTextError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut starts: Vec<(usize, Head, String)> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some((h, name)) = head(l) {
            if h != Head::Info && !valid_ifname(name) {
                return Err(err(
                    i + 1,
                    format!(
                        "`{}`: expected an interface name before the colon",
                        l.trim()
                    ),
                ));
            }
            if starts.len() >= MAX_SECTIONS {
                return Err(err(i + 1, format!("more than {MAX_SECTIONS} sections")));
            }
            starts.push((i, h, name.to_string()));
        }
    }
    if starts
        .first()
        .is_none_or(|s| lines[..s.0].iter().any(|l| !l.trim().is_empty()))
    {
        return Err(err(
            1,
            "expected an ethtool section header (`Ring parameters for IF:`, `Channel parameters for IF:`, `Coalesce parameters for IF:`, `Pause parameters for IF:`, `Features for IF:`) or `ethtool -i`'s `driver:`",
        ));
    }
    let mut out = Vec::new();
    for (k, (at, h, ifname)) in starts.iter().enumerate() {
        let end = starts.get(k + 1).map_or(lines.len(), |s| s.0);
        let body: Vec<(usize, &str)> = (at + 1..end)
            .map(|i| (i + 1, lines[i]))
            .filter(|(_, l)| !l.trim().is_empty())
            .collect();
        let last = body.last().map_or(at + 1, |b| b.0);
        let lines_of = (at + 1, last);
        let s = match h {
            Head::Rings | Head::Channels => {
                // Two blocks of the same keys: maximums, then current settings.
                let mut max = true;
                let mut r = Rings::default();
                let mut c = Channels::default();
                for (n, l) in &body {
                    let t = l.trim();
                    if t.starts_with("Pre-set maximums") {
                        max = true;
                        continue;
                    }
                    if t.starts_with("Current hardware settings") {
                        max = false;
                        continue;
                    }
                    let Some((key, v)) = t.split_once(':') else {
                        return Err(err(*n, format!("`{}`: expected `Key: value`", t)));
                    };
                    let key = key.trim();
                    // Pastes that lost the two block titles (or ethtool builds that print
                    // none): the second `RX:` starts the current settings.
                    let seen = match (h, key) {
                        (Head::Rings, "RX") => r.rx_max.is_some(),
                        (Head::Channels, "RX") => c.rx_max.is_some(),
                        (Head::Channels, "Combined") => c.combined_max.is_some(),
                        _ => false,
                    };
                    if max
                        && seen
                        && !body
                            .iter()
                            .any(|(_, l)| l.trim().starts_with("Current hardware settings"))
                    {
                        max = false;
                    }
                    match (h, key, max) {
                        (Head::Rings, "RX", true) => r.rx_max = num(v, *n, key)?,
                        (Head::Rings, "RX", false) => r.rx = num(v, *n, key)?,
                        (Head::Rings, "TX", true) => r.tx_max = num(v, *n, key)?,
                        (Head::Rings, "TX", false) => r.tx = num(v, *n, key)?,
                        (Head::Rings, "TCP data split", false) => {
                            r.tcp_data_split = match v.trim() {
                                "on" => Some(DataSplit::Enabled),
                                "off" => Some(DataSplit::Disabled),
                                "unknown" => Some(DataSplit::Unknown),
                                _ => None,
                            }
                        }
                        (Head::Channels, "RX", true) => c.rx_max = num(v, *n, key)?,
                        (Head::Channels, "RX", false) => c.rx = num(v, *n, key)?,
                        (Head::Channels, "TX", true) => c.tx_max = num(v, *n, key)?,
                        (Head::Channels, "TX", false) => c.tx = num(v, *n, key)?,
                        (Head::Channels, "Other", true) => c.other_max = num(v, *n, key)?,
                        (Head::Channels, "Other", false) => c.other = num(v, *n, key)?,
                        (Head::Channels, "Combined", true) => c.combined_max = num(v, *n, key)?,
                        (Head::Channels, "Combined", false) => c.combined = num(v, *n, key)?,
                        _ => {}
                    }
                }
                Section::Group {
                    ifname: ifname.clone(),
                    state: if *h == Head::Rings {
                        GroupState::Rings(r)
                    } else {
                        GroupState::Channels(c)
                    },
                    lines: lines_of,
                }
            }
            Head::Coalesce => {
                let mut c = Coalesce::default();
                for (n, l) in &body {
                    let t = l.trim();
                    // `Adaptive RX: on  TX: on` (older ethtool: `Adaptive RX: on  TX: off`).
                    if let Some(r) = t.strip_prefix("Adaptive RX:") {
                        let (rx, tx) = r.split_once("TX:").unwrap_or((r, "n/a"));
                        c.adaptive_rx = flag(rx, *n, "Adaptive RX")?;
                        c.adaptive_tx = flag(tx, *n, "Adaptive TX")?;
                        continue;
                    }
                    let Some((key, v)) = t.split_once(':') else {
                        return Err(err(*n, format!("`{t}`: expected `key: value`")));
                    };
                    match key.trim() {
                        "rx-usecs" => c.rx_usecs = num(v, *n, "rx-usecs")?,
                        "tx-usecs" => c.tx_usecs = num(v, *n, "tx-usecs")?,
                        _ => {}
                    }
                }
                Section::Group {
                    ifname: ifname.clone(),
                    state: GroupState::Coalesce(c),
                    lines: lines_of,
                }
            }
            Head::Pause => {
                let mut p = Pause::default();
                for (n, l) in &body {
                    let t = l.trim();
                    let Some((key, v)) = t.split_once(':') else {
                        return Err(err(*n, format!("`{t}`: expected `Key: on|off`")));
                    };
                    match key.trim() {
                        "Autonegotiate" => p.autoneg = flag(v, *n, "Autonegotiate")?,
                        "RX" => p.rx = flag(v, *n, "RX")?,
                        "TX" => p.tx = flag(v, *n, "TX")?,
                        // `RX negotiated`, `TX negotiated`: what the link partner agreed.
                        _ => {}
                    }
                }
                Section::Group {
                    ifname: ifname.clone(),
                    state: GroupState::Pause(p),
                    lines: lines_of,
                }
            }
            Head::Features => {
                let mut f = Features::default();
                for (n, l) in &body {
                    let t = l.trim();
                    let Some((key, v)) = t.split_once(':') else {
                        return Err(err(
                            *n,
                            format!("`{t}`: expected `feature: on|off [fixed]`"),
                        ));
                    };
                    let active = flag(v, *n, key.trim())?;
                    if f.features.len() >= MAX_FEATURES {
                        return Err(err(*n, format!("more than {MAX_FEATURES} features")));
                    }
                    if let Some(active) = active {
                        f.features.insert(
                            kernel_feature(key.trim()).to_string(),
                            Feature {
                                active,
                                fixed: v.contains("[fixed]"),
                            },
                        );
                    }
                }
                Section::Group {
                    ifname: ifname.clone(),
                    state: GroupState::Features(f),
                    lines: lines_of,
                }
            }
            Head::Info => {
                let get = |k: &str| -> Option<String> {
                    std::iter::once(lines[*at])
                        .chain(body.iter().map(|b| b.1))
                        .find_map(|l| l.strip_prefix(k))
                        .map(|v| v.trim().to_string())
                        .filter(|v| !v.is_empty())
                };
                Section::Info {
                    driver: get("driver:"),
                    firmware: get("firmware-version:"),
                    bus_info: get("bus-info:"),
                    lines: (at + 1, last),
                }
            }
        };
        out.push(s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_and_channels_read_as_recorded() {
        let t = "Ring parameters for enp1s0f0np0:\nPre-set maximums:\nRX:\t\t\t8192\nRX Mini:\t\tn/a\nTX:\t\t\t8192\nCurrent hardware settings:\nRX:\t\t\t1024\nRX Mini:\t\tn/a\nTX:\t\t\t1024\n\nChannel parameters for enp1s0f0np0:\nPre-set maximums:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\tn/a\nCombined:\t63\nCurrent hardware settings:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\tn/a\nCombined:\t16\n";
        assert!(looks_like(t));
        let s = parse(t).unwrap();
        let Section::Group {
            ifname,
            state: GroupState::Rings(r),
            ..
        } = &s[0]
        else {
            panic!("{s:?}")
        };
        assert_eq!(ifname, "enp1s0f0np0");
        assert_eq!(
            (r.rx, r.rx_max, r.tx, r.tx_max),
            (Some(1024), Some(8192), Some(1024), Some(8192))
        );
        let Section::Group {
            state: GroupState::Channels(c),
            ..
        } = &s[1]
        else {
            panic!("{s:?}")
        };
        assert_eq!(
            (c.combined, c.combined_max, c.rx),
            (Some(16), Some(63), None)
        );
    }

    /// systemd PR #41289's paste (Marvell AQC113): no block titles, maximums first.
    #[test]
    fn rings_without_block_titles() {
        let t = "Ring parameters for eth0:\nRX:\t\t\t8184\nRX Mini:\t\tn/a\nRX Jumbo:\t\tn/a\nTX:\t\t\t8184\nTX push buff len:\tn/a\nHDS thresh:\t\tn/a\nRX:\t\t\t2048\nRX Mini:\t\tn/a\nRX Jumbo:\t\tn/a\nTX:\t\t\t4096\nRX Buf Len:\t\tn/a\nTCP data split:\t\tn/a\n";
        let s = parse(t).unwrap();
        let Section::Group {
            state: GroupState::Rings(r),
            ..
        } = &s[0]
        else {
            panic!()
        };
        assert_eq!(
            (r.rx, r.rx_max, r.tx, r.tx_max),
            (Some(2048), Some(8184), Some(4096), Some(8184))
        );
    }

    #[test]
    fn features_pause_coalesce_and_errors() {
        let t = "Features for eth0:\nrx-checksumming: on\n\ttx-checksum-ipv4: off [fixed]\ngeneric-receive-offload: on\nlarge-receive-offload: off\n";
        let s = parse(t).unwrap();
        let Section::Group {
            state: GroupState::Features(f),
            ..
        } = &s[0]
        else {
            panic!()
        };
        assert!(f.features["rx-gro"].active);
        assert!(!f.features["rx-lro"].active);
        assert!(f.features["tx-checksum-ipv4"].fixed);
        let s = parse("Pause parameters for eth0:\nAutonegotiate:\toff\nRX:\t\ton\nTX:\t\toff\n")
            .unwrap();
        assert!(matches!(
            &s[0],
            Section::Group {
                state: GroupState::Pause(Pause {
                    autoneg: Some(false),
                    rx: Some(true),
                    tx: Some(false)
                }),
                ..
            }
        ));
        let s = parse("Coalesce parameters for eth0:\nAdaptive RX: on  TX: off\nrx-usecs:\t8\ntx-usecs:\t16\n").unwrap();
        assert!(matches!(
            &s[0],
            Section::Group {
                state: GroupState::Coalesce(Coalesce {
                    rx_usecs: Some(8),
                    tx_usecs: Some(16),
                    adaptive_rx: Some(true),
                    adaptive_tx: Some(false)
                }),
                ..
            }
        ));
        let e = parse("Ring parameters for eth0:\nPre-set maximums:\nRX:\t\tlots\n").unwrap_err();
        assert_eq!(e.line, 3);
        let e = parse("Ring parameters for ../x:\n").unwrap_err();
        assert_eq!(e.line, 1);
    }
}
