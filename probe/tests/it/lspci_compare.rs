//! Our config-space decoder checked against an independent one: pciutils' `lspci -F dump -vvv`
//! on the same bytes (tests/fixtures/*/daqtune/lspci-xxxx.txt, written by gen_pci.py).
//!
//! Only the test spawns lspci; daqtune itself never does. When lspci is missing and we are
//! root with apt, pciutils is installed; otherwise the test says why it is skipped.

use daqtune_probe::pci::config::{decode, PortType, Visibility};
use std::collections::BTreeMap;
use std::process::Command;

const FIXTURES: &[&str] = &[
    "igx-tuned",
    "igx-untuned",
    "spark",
    "server-pix",
    "nic-cap70",
    "x86-2s",
    "h200-vm",
];

fn lspci() -> Option<String> {
    let ok = |p: &str| {
        Command::new(p)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    for p in ["lspci", "/usr/bin/lspci", "/sbin/lspci", "/usr/sbin/lspci"] {
        if ok(p) {
            return Some(p.to_string());
        }
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root && ok_apt() {
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-q", "pciutils"])
            .output();
        for p in ["lspci", "/usr/bin/lspci"] {
            if ok(p) {
                return Some(p.to_string());
            }
        }
    }
    None
}

fn ok_apt() -> bool {
    Command::new("apt-get")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// `lspci -xxxx` text -> (address, bytes).
fn parse_dump(text: &str) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        match line.split_once(": ") {
            Some((off, hex)) if off.len() <= 3 && off.chars().all(|c| c.is_ascii_hexdigit()) => {
                if let Some(last) = out.last_mut() {
                    last.1.extend(
                        hex.split_whitespace()
                            .filter_map(|h| u8::from_str_radix(h, 16).ok()),
                    );
                }
            }
            _ => {
                let addr = line.split_whitespace().next().unwrap_or("").to_string();
                out.push((addr, Vec::new()));
            }
        }
    }
    out
}

/// The fields we compare, from one device's `lspci -vvv` block.
#[derive(Debug, Default, PartialEq)]
struct Fields {
    express_offset: Option<usize>,
    port: Option<String>,
    devcap_mps: Option<u32>,
    mps: Option<u32>,
    mrrs: Option<u32>,
    lnkcap: Option<(String, u32)>,
    aspm_ctl: Option<String>,
    lnksta: Option<(String, u32)>,
    acs_ctl: Option<BTreeMap<String, bool>>,
    access_denied: bool,
}

fn num_after(s: &str, key: &str) -> Option<u32> {
    let i = s.find(key)? + key.len();
    s[i..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

fn speed_width(s: &str) -> Option<(String, u32)> {
    let sp = s
        .split("Speed ")
        .nth(1)?
        .split([',', ' '])
        .next()?
        .to_string();
    let w = num_after(s, "Width x")?;
    Some((sp, w))
}

fn parse_lspci(text: &str) -> BTreeMap<String, Fields> {
    let mut out = BTreeMap::new();
    let mut cur: Option<(String, Fields)> = None;
    let mut in_devctl = false;
    for line in text.lines() {
        if !line.starts_with(char::is_whitespace) && !line.is_empty() {
            if let Some((a, f)) = cur.take() {
                out.insert(a, f);
            }
            let addr = line.split_whitespace().next().unwrap_or("").to_string();
            cur = Some((addr, Fields::default()));
            continue;
        }
        let Some((_, f)) = cur.as_mut() else { continue };
        let t = line.trim();
        if t.starts_with("Capabilities: <access denied>") {
            f.access_denied = true;
        }
        if t.starts_with("Capabilities: [") && t.contains("] Express") {
            let off = &t["Capabilities: [".len()..t.find(']').unwrap_or(0)];
            f.express_offset = usize::from_str_radix(off, 16).ok();
            let after = t.split(") ").nth(1).unwrap_or("");
            f.port = Some(after.split(',').next().unwrap_or("").trim().to_string());
        }
        if t.starts_with("DevCap:") {
            f.devcap_mps = num_after(t, "MaxPayload");
        }
        if t.starts_with("DevCtl:") {
            in_devctl = true;
        } else if t.starts_with("DevSta:") {
            in_devctl = false;
        }
        if in_devctl && t.contains("MaxReadReq") {
            f.mps = num_after(t, "MaxPayload");
            f.mrrs = num_after(t, "MaxReadReq");
        }
        if t.starts_with("LnkCap:") {
            f.lnkcap = speed_width(t);
        }
        if t.starts_with("LnkCtl:") {
            f.aspm_ctl = t
                .split("ASPM ")
                .nth(1)
                .map(|s| s.split(';').next().unwrap_or("").trim().to_string());
        }
        if t.starts_with("LnkSta:") {
            f.lnksta = speed_width(t);
        }
        if t.starts_with("ACSCtl:") {
            let m = t
                .trim_start_matches("ACSCtl:")
                .split_whitespace()
                .filter_map(|w| {
                    let (name, flag) = w.split_at(w.len().checked_sub(1)?);
                    Some((name.to_string(), flag == "+"))
                })
                .collect();
            f.acs_ctl = Some(m);
        }
    }
    if let Some((a, f)) = cur.take() {
        out.insert(a, f);
    }
    out
}

fn lspci_speed(code: u8) -> String {
    match code {
        1 => "2.5GT/s",
        2 => "5GT/s",
        3 => "8GT/s",
        4 => "16GT/s",
        5 => "32GT/s",
        6 => "64GT/s",
        _ => "unknown",
    }
    .into()
}

fn lspci_port(p: PortType) -> &'static str {
    match p {
        PortType::Endpoint => "Endpoint",
        PortType::LegacyEndpoint => "Legacy Endpoint",
        PortType::RootPort => "Root Port (Slot+)",
        PortType::UpstreamPort => "Upstream Port",
        PortType::DownstreamPort => "Downstream Port (Slot+)",
        PortType::PcieToPciBridge => "PCI-Express to PCI/PCI-X Bridge",
        PortType::PciToPcieBridge => "PCI/PCI-X to PCI-Express Bridge",
        PortType::RcIntegratedEndpoint => "Root Complex Integrated Endpoint",
        PortType::RcEventCollector => "Root Complex Event Collector",
        PortType::Other(_) => "Unknown",
    }
}

fn ours(bytes: &[u8]) -> Fields {
    let c = decode(bytes).expect("decode");
    let mut f = Fields {
        access_denied: c.pcie_visibility == Visibility::Hidden,
        ..Default::default()
    };
    if let Some(p) = &c.pcie {
        f.express_offset = Some(p.offset);
        f.port = Some(lspci_port(p.port_type).into());
        f.devcap_mps = Some(p.mps_supported);
        f.mps = Some(p.mps);
        f.mrrs = Some(p.mrrs);
        f.lnkcap = Some((lspci_speed(p.link_cap_speed), p.link_cap_width as u32));
        f.aspm_ctl = Some(match p.aspm_enabled.label() {
            "Disabled" => "Disabled".into(),
            l => format!("{l} Enabled"),
        });
        f.lnksta = Some((lspci_speed(p.link_sta_speed), p.link_sta_width as u32));
    }
    if let Some(a) = c.acs {
        let names = [
            "SrcValid",
            "TransBlk",
            "ReqRedir",
            "CmpltRedir",
            "UpstreamFwd",
            "EgressCtrl",
            "DirectTrans",
        ];
        f.acs_ctl = Some(
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.to_string(), a.ctrl & (1 << i) != 0))
                .collect(),
        );
    }
    f
}

fn dump_text(devs: &[(String, Vec<u8>)]) -> String {
    let mut s = String::new();
    for (a, b) in devs {
        s.push_str(&format!("{a} x\n"));
        for (i, chunk) in b.chunks(16).enumerate() {
            let hex: Vec<String> = chunk.iter().map(|x| format!("{x:02x}")).collect();
            s.push_str(&format!("{:02x}: {}\n", i * 16, hex.join(" ")));
        }
        s.push('\n');
    }
    s
}

fn run_lspci(bin: &str, text: &str) -> String {
    let dir = tempfile::tempdir().expect("tmp");
    let p = dir.path().join("dump.txt");
    std::fs::write(&p, text).expect("write");
    let out = Command::new(bin)
        .arg("-F")
        .arg(&p)
        .args(["-vvv", "-D", "-n"])
        .output()
        .expect("lspci");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn decoder_agrees_with_pciutils() {
    let Some(bin) = lspci() else {
        daqtune_testkit::skip("lspci (pciutils) is not installed and could not be installed here");
        return;
    };
    let mut compared = 0;
    let (mut with_mrrs, mut with_acs, mut denied) = (0, 0, 0);
    for fx in FIXTURES {
        let path = format!(
            "{}/../tests/fixtures/{fx}/daqtune/lspci-xxxx.txt",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let devs = parse_dump(&text);
        assert!(!devs.is_empty(), "{path}");
        // Three sizes of the same bytes: 4096 (root), 256 (no extended space), 64 (non-root).
        for len in [4096usize, 256, 64] {
            let cut: Vec<(String, Vec<u8>)> = devs
                .iter()
                .map(|(a, b)| (a.clone(), b[..len.min(b.len())].to_vec()))
                .collect();
            let theirs = parse_lspci(&run_lspci(&bin, &dump_text(&cut)));
            for (addr, bytes) in &cut {
                let t = theirs
                    .get(addr)
                    .unwrap_or_else(|| panic!("{fx} {addr}: not in lspci output"));
                let mut o = ours(bytes);
                if len == 64 {
                    // lspci says "<access denied>" only when the list leaves the header.
                    assert_eq!(o.access_denied, t.access_denied, "{fx} {addr} len {len}");
                }
                if len < 4096 {
                    o.acs_ctl = None;
                }
                with_mrrs += usize::from(t.mrrs.is_some());
                with_acs += usize::from(t.acs_ctl.is_some());
                denied += usize::from(t.access_denied);
                o.access_denied = t.access_denied;
                assert_eq!(&o, t, "{fx} {addr} ({len} bytes)");
                compared += 1;
            }
        }
    }
    // The comparison must have had fields to compare, in every size.
    assert!(compared > 100, "{compared}");
    assert!(
        with_mrrs > 100 && with_acs > 15 && denied > 40,
        "{with_mrrs} {with_acs} {denied}"
    );
}
