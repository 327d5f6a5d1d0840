//! `ibstat` and `ibv_devinfo [-v]` output as people paste it: the RDMA devices, their ports'
//! link layer, state, physical state and rate, firmware and GUIDs, as the kernel shows them
//! under `/sys/class/infiniband/<dev>/` (so an import can write them where the checks look).
//!
//! The sysfs spellings are the kernel's (`drivers/infiniband/core/sysfs.c`): port `state`
//! `4: ACTIVE`, `phys_state` `5: LinkUp`, `rate` `200 Gb/sec`, GUIDs as four groups of four
//! hex digits. ibstat prints `State: Active`, `Physical state: LinkUp`, `Rate: 200` and GUIDs
//! as `0x...`; ibv_devinfo prints `PORT_ACTIVE (4)`, `LINK_UP (5)` and sysfs-style GUIDs.

use crate::pci::nic::{RdmaDevice, RdmaPort};

/// A line that is not what the format has there.
pub use crate::text::LineError as RdmaTextError;

/// Devices of one capture; more are refused (a host has tens, not thousands).
pub const MAX_DEVICES: usize = 1024;
/// Ports of one device.
pub const MAX_PORTS: u32 = 256;

/// One port with the attributes sysfs has beside those [`RdmaPort`] keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortText {
    pub port: RdmaPort,
    /// `5: LinkUp`, `3: Disabled`.
    pub phys_state: Option<String>,
}

/// One device as the capture printed it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceText {
    pub dev: RdmaDevice,
    /// `MT4129` (ibstat's CA type; sysfs `hca_type`).
    pub hca_type: Option<String>,
    pub ports: Vec<PortText>,
    /// 1-based first and last line of the device's block.
    pub lines: (usize, usize),
}

/// `CA 'name'` then a tab-indented `CA type:` line.
pub fn looks_like_ibstat(text: &str) -> bool {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    matches!(
        (lines.next(), lines.next()),
        (Some(a), Some(b)) if ca_name(a).is_some() && b.trim_start().starts_with("CA type:")
    )
}

/// `hca_id:\tNAME` first, then `transport:` (ibv_devinfo, with or without -v).
pub fn looks_like_ibv_devinfo(text: &str) -> bool {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    matches!(
        (lines.next(), lines.next()),
        (Some(a), Some(b)) if a.starts_with("hca_id:") && b.trim_start().starts_with("transport:")
    )
}

fn ca_name(l: &str) -> Option<&str> {
    let r = l.trim_end().strip_prefix("CA '")?.strip_suffix('\'')?;
    valid_name(r).then_some(r)
}

/// An RDMA device name as the kernel allows it (IB_DEVICE_NAME_MAX 64), and nothing that could
/// climb out of a directory when it becomes a path.
fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() < 64
        && n != "."
        && n != ".."
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// `0xfc4cea0300f94234` as sysfs prints a GUID: `fc4c:ea03:00f9:4234`.
fn guid(v: &str) -> Option<String> {
    let h = v.trim().strip_prefix("0x")?;
    if h.len() != 16 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let h = h.to_ascii_lowercase();
    Some(format!(
        "{}:{}:{}:{}",
        &h[0..4],
        &h[4..8],
        &h[8..12],
        &h[12..16]
    ))
}

/// ibstat's port state word as sysfs writes it (enum ib_port_state).
fn state_word(w: &str) -> Option<&'static str> {
    Some(match w.trim().to_ascii_lowercase().as_str() {
        "down" => "1: DOWN",
        "initializing" | "init" => "2: INIT",
        "armed" => "3: ARMED",
        "active" => "4: ACTIVE",
        "active_defer" | "active defer" => "5: ACTIVE_DEFER",
        _ => return None,
    })
}

/// ibstat's physical state word as sysfs writes it (ib_port_phys_state).
fn phys_word(w: &str) -> Option<&'static str> {
    Some(match w.trim() {
        "Sleep" => "1: Sleep",
        "Polling" => "2: Polling",
        "Disabled" => "3: Disabled",
        "PortConfigurationTraining" => "4: PortConfigurationTraining",
        "LinkUp" => "5: LinkUp",
        "LinkErrorRecovery" => "6: LinkErrorRecovery",
        "Phy Test" | "PhyTest" => "7: Phy Test",
        _ => return None,
    })
}

fn err(line: usize, message: impl Into<String>) -> RdmaTextError {
    RdmaTextError {
        line,
        message: message.into(),
    }
}

/// Parse `ibstat` output (one or more `CA 'name'` blocks).
pub fn parse_ibstat(text: &str) -> Result<Vec<DeviceText>, RdmaTextError> {
    let mut out: Vec<DeviceText> = Vec::new();
    // Port fields sit deeper than their `Port N:` line (tabs as ibstat prints them, or the
    // spaces a paste turned them into).
    let mut port_indent = usize::MAX;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let l = raw.trim_end();
        if l.trim().is_empty() {
            continue;
        }
        if !l.starts_with(char::is_whitespace) {
            let name = ca_name(l).ok_or_else(|| {
                err(
                    n,
                    format!(
                        "`{}`: expected `CA 'NAME'` (an RDMA device name of letters, digits, `_`, `-`, `.`) or an indented field of one",
                        clip(l)
                    ),
                )
            })?;
            if out.len() >= MAX_DEVICES {
                return Err(err(n, format!("more than {MAX_DEVICES} devices")));
            }
            out.push(DeviceText {
                dev: RdmaDevice {
                    name: name.to_string(),
                    ..Default::default()
                },
                lines: (n, n),
                ..Default::default()
            });
            port_indent = usize::MAX;
            continue;
        }
        let Some(d) = out.last_mut() else {
            return Err(err(n, "a field before any `CA 'NAME'` line"));
        };
        d.lines.1 = n;
        let t = l.trim();
        if let Some(p) = t.strip_prefix("Port ").and_then(|p| p.strip_suffix(':')) {
            let num: u32 = p
                .trim()
                .parse()
                .ok()
                .filter(|v| (1..=MAX_PORTS).contains(v))
                .ok_or_else(|| {
                    err(
                        n,
                        format!("`{t}`: expected `Port N:` with N from 1 to {MAX_PORTS}"),
                    )
                })?;
            d.ports.push(PortText {
                port: RdmaPort {
                    port: num,
                    ..Default::default()
                },
                ..Default::default()
            });
            port_indent = indent(l);
            continue;
        }
        let Some((k, v)) = t.split_once(':') else {
            return Err(err(n, format!("`{}`: expected `Key: value`", clip(t))));
        };
        let v = v.trim();
        let in_port = !d.ports.is_empty() && indent(l) > port_indent;
        if in_port {
            let Some(p) = d.ports.last_mut() else {
                continue;
            };
            match k {
                "State" => {
                    p.port.state = Some(
                        state_word(v)
                            .ok_or_else(|| err(n, format!("`{v}`: expected a port state (Down, Initializing, Armed, Active)")))?
                            .to_string(),
                    )
                }
                "Physical state" => p.phys_state = phys_word(v).map(str::to_string),
                "Rate" => {
                    let r: f64 = v
                        .parse()
                        .ok()
                        .filter(|r: &f64| r.is_finite() && *r >= 0.0 && *r < 1e6)
                        .ok_or_else(|| err(n, format!("`{v}`: expected a rate in Gb/s")))?;
                    p.port.rate = Some(format!("{r} Gb/sec"));
                }
                "Link layer" => p.port.link_layer = Some(v.to_string()),
                _ => {}
            }
        } else {
            match k {
                "CA type" => d.hca_type = Some(v.to_string()),
                "Firmware version" => d.dev.fw_ver = Some(v.to_string()),
                "Node GUID" => d.dev.node_guid = guid(v),
                "System image GUID" => d.dev.sys_image_guid = guid(v),
                _ => {}
            }
        }
    }
    if out.is_empty() {
        return Err(err(1, "no `CA 'NAME'` line: not ibstat output"));
    }
    Ok(out)
}

/// Parse `ibv_devinfo` or `ibv_devinfo -v` output (`hca_id:` blocks, `port:` sub-blocks).
pub fn parse_ibv_devinfo(text: &str) -> Result<Vec<DeviceText>, RdmaTextError> {
    let mut out: Vec<DeviceText> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let l = raw.trim_end();
        if l.trim().is_empty() {
            continue;
        }
        if let Some(name) = l.strip_prefix("hca_id:") {
            let name = name.trim();
            if !valid_name(name) {
                return Err(err(
                    n,
                    format!(
                        "`{}`: expected `hca_id: NAME` (an RDMA device name)",
                        clip(l)
                    ),
                ));
            }
            if out.len() >= MAX_DEVICES {
                return Err(err(n, format!("more than {MAX_DEVICES} devices")));
            }
            out.push(DeviceText {
                dev: RdmaDevice {
                    name: name.to_string(),
                    ..Default::default()
                },
                lines: (n, n),
                ..Default::default()
            });
            continue;
        }
        let Some(d) = out.last_mut() else {
            return Err(err(
                n,
                format!("`{}`: a field before any `hca_id:` line", clip(l)),
            ));
        };
        d.lines.1 = n;
        let t = l.trim();
        let Some((k, v)) = t.split_once(':') else {
            // Flag names under device_cap_flags, "Multi-Packet RQ is not supported", ...
            continue;
        };
        let v = v.trim();
        if k == "port" {
            let num: u32 = v
                .parse()
                .ok()
                .filter(|v| (1..=MAX_PORTS).contains(v))
                .ok_or_else(|| {
                    err(
                        n,
                        format!("`{t}`: expected `port: N` with N from 1 to {MAX_PORTS}"),
                    )
                })?;
            d.ports.push(PortText {
                port: RdmaPort {
                    port: num,
                    ..Default::default()
                },
                ..Default::default()
            });
            continue;
        }
        if let Some(p) = d.ports.last_mut() {
            match k {
                "state" => {
                    p.port.state = Some(
                        enum_value(v, "PORT_")
                            .ok_or_else(|| err(n, format!("`{v}`: expected `PORT_STATE (N)`")))?,
                    )
                }
                "phys_state" => p.phys_state = phys_enum(v),
                "link_layer" => p.port.link_layer = Some(v.to_string()),
                _ => {}
            }
            continue;
        }
        match k {
            "fw_ver" => d.dev.fw_ver = Some(v.to_string()),
            "node_guid" => d.dev.node_guid = Some(v.to_string()),
            "sys_image_guid" => d.dev.sys_image_guid = Some(v.to_string()),
            "board_id" => d.dev.board_id = Some(v.to_string()),
            _ => {}
        }
    }
    if out.is_empty() {
        return Err(err(1, "no `hca_id:` line: not ibv_devinfo output"));
    }
    Ok(out)
}

/// `PORT_ACTIVE (4)` as sysfs writes it: `4: ACTIVE`.
fn enum_value(v: &str, prefix: &str) -> Option<String> {
    let (word, num) = v.split_once('(')?;
    let num: u32 = num.trim().strip_suffix(')')?.trim().parse().ok()?;
    let word = word.trim();
    let word = word.strip_prefix(prefix).unwrap_or(word);
    (!word.is_empty() && word.len() < 32).then(|| format!("{num}: {word}"))
}

/// `LINK_UP (5)`, `POLLING (2)` as sysfs writes them (`5: LinkUp`, `2: Polling`).
fn phys_enum(v: &str) -> Option<String> {
    let (_, num) = v.split_once('(')?;
    let num: u32 = num.trim().strip_suffix(')')?.trim().parse().ok()?;
    let word = match num {
        1 => "Sleep",
        2 => "Polling",
        3 => "Disabled",
        4 => "PortConfigurationTraining",
        5 => "LinkUp",
        6 => "LinkErrorRecovery",
        7 => "Phy Test",
        _ => return None,
    };
    Some(format!("{num}: {word}"))
}

fn indent(l: &str) -> usize {
    let mut c = 0;
    for ch in l.chars() {
        match ch {
            '\t' => c += 8,
            ' ' => c += 1,
            _ => break,
        }
    }
    c
}

fn clip(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// The PCI function an RDMA device's name says it belongs to, for the names rdma-core's
/// `rdma_rename` gives by PCI path (`NAME_PCI`: `roce`/`ib` + `P<domain>` when not 0 +
/// `p<bus>s<slot>f<function>`, numbers in decimal, as systemd's `enp1s0f0`). `None` for
/// kernel names (`mlx5_0`) and anything else: those are not tied to a function.
pub fn pci_of_name(name: &str) -> Option<crate::pci::PciAddr> {
    let rest = name
        .strip_prefix("roce")
        .or_else(|| name.strip_prefix("ib"))?;
    let (domain, rest) = match rest.strip_prefix('P') {
        Some(r) => {
            let end = r.find('p')?;
            (r[..end].parse::<u32>().ok()?, &r[end..])
        }
        None => (0, rest),
    };
    let rest = rest.strip_prefix('p')?;
    let (bus, rest) = rest.split_once('s')?;
    let (slot, func) = rest.split_once('f')?;
    let (bus, slot, func): (u32, u32, u32) =
        (bus.parse().ok()?, slot.parse().ok()?, func.parse().ok()?);
    if domain > 0xffff || bus > 0xff || slot > 0x1f || func > 7 {
        return None;
    }
    Some(crate::pci::PciAddr {
        domain,
        bus: bus as u8,
        dev: slot as u8,
        func: func as u8,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const IBSTAT: &str = "CA 'roceP2p1s0f1'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.45.4028\n\tHardware version: 0\n\tNode GUID: 0xfc4cea0300f94235\n\tSystem image GUID: 0xfc4cea0300f94230\n\tPort 1:\n\t\tState: Down\n\t\tPhysical state: Disabled\n\t\tRate: 40\n\t\tBase lid: 0\n\t\tLink layer: Ethernet\n";

    #[test]
    fn ibstat_reads_as_sysfs_writes() {
        assert!(looks_like_ibstat(IBSTAT));
        let d = parse_ibstat(IBSTAT).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].dev.name, "roceP2p1s0f1");
        assert_eq!(d[0].dev.fw_ver.as_deref(), Some("28.45.4028"));
        assert_eq!(d[0].dev.node_guid.as_deref(), Some("fc4c:ea03:00f9:4235"));
        assert_eq!(d[0].hca_type.as_deref(), Some("MT4129"));
        let p = &d[0].ports[0];
        assert_eq!(p.port.state.as_deref(), Some("1: DOWN"));
        assert_eq!(p.phys_state.as_deref(), Some("3: Disabled"));
        assert_eq!(p.port.rate.as_deref(), Some("40 Gb/sec"));
        assert_eq!(p.port.link_layer.as_deref(), Some("Ethernet"));
    }

    #[test]
    fn broken_ibstat_says_the_line() {
        let e = parse_ibstat("CA 'mlx5_0'\n\tCA type: MT4129\n\tPort x:\n").unwrap_err();
        assert_eq!(e.line, 3);
        let e = parse_ibstat("CA '../x'\n\tCA type: MT4129\n").unwrap_err();
        assert_eq!(e.line, 1);
        let e = parse_ibstat("\tCA type: MT4129\n").unwrap_err();
        assert_eq!(e.line, 1);
    }

    #[test]
    fn ibv_devinfo_states() {
        let t = "hca_id:\tmlx4_1\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t2.42.5000\n\t\tport:\t2\n\t\t\tstate:\t\t\tPORT_DOWN (1)\n\t\t\tlink_layer:\t\tInfiniBand\n\t\t\tphys_state:\t\tPOLLING (2)\n";
        assert!(looks_like_ibv_devinfo(t));
        let d = parse_ibv_devinfo(t).unwrap();
        assert_eq!(d[0].ports[0].port.port, 2);
        assert_eq!(d[0].ports[0].port.state.as_deref(), Some("1: DOWN"));
        assert_eq!(d[0].ports[0].phys_state.as_deref(), Some("2: Polling"));
        let e = parse_ibv_devinfo("hca_id:\tmlx4_1\n\t\tport:\tx\n").unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn names_by_pci_path() {
        let a = pci_of_name("roceP2p1s0f1").unwrap();
        assert_eq!(a.to_string(), "0002:01:00.1");
        assert_eq!(
            pci_of_name("rocep1s0f0").unwrap().to_string(),
            "0000:01:00.0"
        );
        assert_eq!(
            pci_of_name("ibp65s0f0").unwrap().to_string(),
            "0000:41:00.0"
        );
        assert!(pci_of_name("mlx5_0").is_none());
        assert!(pci_of_name("rocep1s0").is_none());
    }
}
