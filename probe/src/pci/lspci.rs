//! `lspci -vv` text as people paste it (issue threads, support bundles, hw-probe dumps):
//! `-vvnn`, `-vvv`, `-nnDvvv`, with or without domains, with `-xxx`/`-xxxx` hex dumps.
//!
//! The parser keeps what daqtune's PCI facts read: identity, driver, NUMA node, IOMMU group,
//! bridge bus numbers, and the registers lspci decodes (DevCap/DevCtl payload sizes, LnkCap/
//! LnkSta/LnkCap2/LnkCtl2, ACS, SR-IOV counts), each with the capability's offset, so that a
//! sparse config space can be rebuilt from them ([`LspciDevice::config_bytes`]). A hex dump,
//! where present, is the exact config space and wins over the decoded text.
//!
//! Every device keeps the lines it came from, so an importer can say where each fact was read.

use super::PciAddr;

/// The largest capture accepted: a 4-socket server's `lspci -vvvxxxx` is ~2 MB.
pub const MAX_TEXT: usize = 16 * 1024 * 1024;
/// More functions than this is not a host (256 buses x 32 devices x 8 functions per domain is
/// the address space; the largest real hosts show a few thousand functions with SR-IOV).
pub const MAX_DEVICES: usize = 65_536;

/// Why text is not an `lspci -vv` capture, with the 1-based line.
pub use crate::text::LineError as LspciError;

/// The PCI Express capability's registers as lspci decoded them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpressText {
    pub offset: usize,
    /// `Express (v2)`: the capability version.
    pub version: u8,
    /// Device/port type bits (PCIe Capabilities register bits 7:4).
    pub port_type: Option<u8>,
    /// DevCap `MaxPayload N bytes` as the 3-bit code.
    pub devcap_mps: Option<u8>,
    /// DevCtl's flags (bits 0-4, 8-11, 15) and payload codes, as the register.
    pub devctl: Option<u16>,
    pub lnkcap_speed: Option<u8>,
    pub lnkcap_width: Option<u8>,
    pub lnkcap_aspm: Option<u8>,
    pub lnkcap_port: Option<u8>,
    pub lnkctl_aspm: Option<u8>,
    pub lnksta_speed: Option<u8>,
    pub lnksta_width: Option<u8>,
    /// LnkCap2's supported-speeds vector (bits 7:1 of the register).
    pub lnkcap2_speeds: Option<u8>,
    pub lnkctl2_target: Option<u8>,
}

/// One capability line (`Capabilities: [70] Express ...`, `[230 v1] Access Control Services`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapText {
    pub offset: usize,
    /// Extended (offset 0x100 and up) capability version, from `[100 v2]`.
    pub ext_version: Option<u8>,
    /// The capability id lspci's name stands for; `None` for a name not in the table.
    pub id: Option<u16>,
    pub name: String,
    pub line: usize,
}

/// ACS capability and control registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcsText {
    pub offset: usize,
    pub cap: u16,
    pub ctl: u16,
}

/// One function of the capture.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LspciDevice {
    pub addr: Option<PciAddr>,
    /// Whether the address carried a domain (`-D`, or lspci's own choice on multi-domain hosts).
    pub had_domain: bool,
    /// 1-based first and last line of the device's block.
    pub lines: (usize, usize),
    pub class_name: String,
    /// Base class and subclass (`[0604]`), when `-nn` printed it or the name is known.
    pub class16: Option<u16>,
    pub prog_if: u8,
    pub vendor: Option<u16>,
    pub device: Option<u16>,
    pub subsys: Option<(u16, u16)>,
    pub rev: Option<u8>,
    /// `Vendor Device` as lspci named them (without the ids).
    pub description: String,
    pub numa_node: Option<i32>,
    pub iommu_group: Option<u32>,
    pub driver: Option<String>,
    pub modules: Vec<String>,
    /// `Bus: primary=, secondary=, subordinate=`.
    pub bus: Option<(u8, u8, u8)>,
    /// `Capabilities: <access denied>`: lspci ran without root and saw 64 bytes.
    pub caps_denied: bool,
    pub caps: Vec<CapText>,
    pub express: Option<ExpressText>,
    pub acs: Option<AcsText>,
    pub sriov_total: Option<u32>,
    pub sriov_num: Option<u32>,
    /// Bytes of a `-x`/`-xxx`/`-xxxx` hex dump, in order (offset checked on every line).
    pub hex: Vec<u8>,
    /// Vendor and device as the `-nn` header printed them (`[10de:0a65]`), kept beside the ids
    /// a hex dump gives so a disagreement can be said.
    pub header_ids: Option<(u16, u16)>,
    /// What the import should say about this function (a header that disagrees with its
    /// own config bytes).
    pub notes: Vec<String>,
}

/// What a capture holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LspciCapture {
    pub devices: Vec<LspciDevice>,
    /// Lines that looked like nothing lspci prints (kept for the manifest, never fatal).
    pub ignored: Vec<usize>,
}

/// Whether `text` looks like `lspci -v` output: its first non-empty line is a device header
/// followed by an indented detail line, or a hex dump line.
pub fn looks_like(text: &str) -> bool {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let Some(first) = lines.next() else {
        return false;
    };
    if parse_header(first).is_none() {
        return false;
    }
    match lines.next() {
        Some(second) => second.starts_with(char::is_whitespace) || second.starts_with("00: "),
        None => false,
    }
}

/// A device header line: `0000:01:00.0 Ethernet controller [0200]: Mellanox ... [15b3:1017]`.
fn parse_header(line: &str) -> Option<(PciAddr, bool, &str)> {
    if line.starts_with(char::is_whitespace) {
        return None;
    }
    let (addr, rest) = line.split_once(' ')?;
    let a: PciAddr = addr.parse().ok()?;
    let had_domain = addr.matches(':').count() == 2;
    Some((a, had_domain, rest))
}

/// `[0604]` / `[10de:2204]` at the end of `s` (ignoring a trailing `(rev a1)` and prog-if).
fn bracket_hex(s: &str) -> Option<(usize, &str)> {
    let end = s.rfind(']')?;
    let start = s[..end].rfind('[')?;
    Some((start, &s[start + 1..end]))
}

fn hex16(s: &str) -> Option<u16> {
    if s.len() != 4 {
        return None;
    }
    u16::from_str_radix(s, 16).ok()
}

/// Class names lspci prints (pciutils' pci.ids class section, the ones servers show).
const CLASS_NAMES: &[(&str, u16)] = &[
    ("Host bridge", 0x0600),
    ("ISA bridge", 0x0601),
    ("PCI bridge", 0x0604),
    ("Bridge", 0x0680),
    ("System peripheral", 0x0880),
    ("IOMMU", 0x0806),
    ("RAID bus controller", 0x0104),
    ("SATA controller", 0x0106),
    ("Serial Attached SCSI controller", 0x0107),
    ("Non-Volatile memory controller", 0x0108),
    ("Ethernet controller", 0x0200),
    ("Network controller", 0x0280),
    ("Infiniband controller", 0x0207),
    ("Fabric controller", 0x0208),
    ("VGA compatible controller", 0x0300),
    ("3D controller", 0x0302),
    ("Display controller", 0x0380),
    ("Audio device", 0x0403),
    ("Multimedia audio controller", 0x0401),
    ("USB controller", 0x0c03),
    ("SMBus", 0x0c05),
    ("Serial bus controller", 0x0c80),
    ("Processing accelerators", 0x1200),
    ("Encryption controller", 0x1080),
    ("Signal processing controller", 0x1180),
    ("Memory controller", 0x0580),
    ("RAM memory", 0x0500),
    ("Communication controller", 0x0780),
    ("Unassigned class", 0xff00),
];

/// Vendors by the name lspci prints without `-nn` (pci.ids spelling).
const VENDOR_NAMES: &[(&str, u16)] = &[
    ("NVIDIA Corporation", 0x10de),
    ("Mellanox Technologies", 0x15b3),
    ("Intel Corporation", 0x8086),
    ("Advanced Micro Devices, Inc.", 0x1022),
    ("Broadcom Inc. and subsidiaries", 0x14e4),
    ("Broadcom / LSI", 0x1000),
    ("Ampere Computing, LLC", 0x1def),
    ("Samsung Electronics Co Ltd", 0x144d),
    ("Red Hat, Inc.", 0x1af4),
    ("PLX Technology, Inc.", 0x10b5),
    ("ASPEED Technology, Inc.", 0x1a03),
    ("Huawei Technologies Co., Ltd.", 0x19e5),
];

/// Standard capability ids by lspci's name (pciutils ls-caps.c).
fn std_cap_id(name: &str) -> Option<u16> {
    let table: &[(&str, u16)] = &[
        ("Power Management", 0x01),
        ("AGP", 0x02),
        ("Vital Product Data", 0x03),
        ("Slot ID", 0x04),
        ("MSI-X", 0x11),
        ("MSI", 0x05),
        ("CompactPCI hot-swap", 0x06),
        ("PCI-X", 0x07),
        ("HyperTransport", 0x08),
        ("Vendor Specific", 0x09),
        ("Debug port", 0x0a),
        ("CompactPCI central resource", 0x0b),
        ("PCI Hot-plug", 0x0c),
        ("Subsystem", 0x0d),
        ("AGP3", 0x0e),
        ("Secure device", 0x0f),
        ("Express", 0x10),
        ("SATA HBA", 0x12),
        ("PCI Advanced Features", 0x13),
        ("Enhanced Allocation", 0x14),
        ("Flattening Portal Bridge", 0x15),
        ("Null", 0x00),
    ];
    table
        .iter()
        .find(|(n, _)| name.starts_with(n))
        .map(|(_, id)| *id)
}

/// Extended capability ids by lspci's name.
fn ext_cap_id(name: &str) -> Option<u16> {
    if let Some(h) = name.strip_prefix("Extended Capability ID 0x") {
        return u16::from_str_radix(h.split_whitespace().next().unwrap_or(""), 16).ok();
    }
    let table: &[(&str, u16)] = &[
        ("Advanced Error Reporting", 0x0001),
        ("Virtual Channel", 0x0002),
        ("Device Serial Number", 0x0003),
        ("Power Budgeting", 0x0004),
        ("Root Complex Link", 0x0005),
        ("Root Complex Internal Link", 0x0006),
        ("Root Complex Event Collector", 0x0007),
        ("Multi-Function Virtual Channel", 0x0008),
        ("Root Complex Register Block", 0x000a),
        ("Vendor Specific Information", 0x000b),
        ("Config Access", 0x000c),
        ("Access Control Services", 0x000d),
        ("Alternative Routing-ID Interpretation", 0x000e),
        ("Address Translation Service", 0x000f),
        ("Single Root I/O Virtualization", 0x0010),
        ("Multi-Root I/O Virtualization", 0x0011),
        ("Multicast", 0x0012),
        ("Page Request Interface", 0x0013),
        ("Resizable BAR", 0x0015),
        ("Physical Resizable BAR", 0x0015),
        ("Dynamic Power Allocation", 0x0016),
        ("Transaction Processing Hints", 0x0017),
        ("Latency Tolerance Reporting", 0x0018),
        ("Secondary PCI Express", 0x0019),
        ("Protocol Multiplexing", 0x001a),
        ("Process Address Space ID", 0x001b),
        ("LN Requester", 0x001c),
        ("Downstream Port Containment", 0x001d),
        ("L1 PM Substates", 0x001e),
        ("Precision Time Measurement", 0x001f),
        ("PCI Express over M_PHY", 0x0020),
        ("FRS Queueing", 0x0021),
        ("Readiness Time Reporting", 0x0022),
        ("Designated Vendor-Specific", 0x0023),
        ("VF Resizable BAR", 0x0024),
        ("Data Link Feature", 0x0025),
        ("Physical Layer 16.0 GT/s", 0x0026),
        ("Lane Margining at the Receiver", 0x0027),
        ("Hierarchy ID", 0x0028),
        ("Native PCIe Enclosure Management", 0x0029),
        ("Physical Layer 32.0 GT/s", 0x002a),
        ("Alternate Protocol", 0x002b),
        ("System Firmware Intermediary", 0x002c),
        ("Shadow Functions", 0x002d),
        ("Data Object Exchange", 0x002e),
        ("Device 3", 0x002f),
        ("Integrity and Data Encryption", 0x0030),
        ("Physical Layer 64.0 GT/s", 0x0031),
    ];
    table
        .iter()
        .find(|(n, _)| name.starts_with(n))
        .map(|(_, id)| *id)
}

/// `2.5GT/s` / `8GT/s` / `16GT/s` as the LnkCap speed code.
fn speed_code(s: &str) -> Option<u8> {
    let v = s.trim().trim_end_matches(',').strip_suffix("GT/s")?;
    Some(match v {
        "2.5" => 1,
        "5" | "5.0" => 2,
        "8" | "8.0" => 3,
        "16" | "16.0" => 4,
        "32" | "32.0" => 5,
        "64" | "64.0" => 6,
        _ => return None,
    })
}

/// `x16` as the width.
fn width(s: &str) -> Option<u8> {
    let n: u32 = s
        .trim()
        .trim_end_matches(',')
        .strip_prefix('x')?
        .parse()
        .ok()?;
    // LnkCap's width field is 6 bits; 32 lanes is the widest the spec defines.
    u8::try_from(n).ok().filter(|w| *w <= 32)
}

/// A payload size in bytes as its 3-bit code (128 << code).
fn payload_code(bytes: &str) -> Option<u8> {
    let n: u32 = bytes.trim().parse().ok()?;
    if !n.is_power_of_two() || !(128..=4096).contains(&n) {
        return None;
    }
    Some((n.trailing_zeros() - 7) as u8)
}

/// The number after `key` in `s`: `MaxPayload 256 bytes` -> "256".
fn word_after<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    let i = s.find(key)?;
    s[i + key.len()..].split_whitespace().next()
}

/// `Flag+`/`Flag-` in a register line.
fn flag(s: &str, name: &str) -> Option<bool> {
    for tok in s.split(|c: char| c.is_whitespace() || c == ',' || c == ';') {
        if let Some(v) = tok.strip_prefix(name) {
            match v {
                "+" => return Some(true),
                "-" => return Some(false),
                _ => {}
            }
        }
    }
    None
}

fn port_type(desc: &str) -> Option<u8> {
    let table: &[(&str, u8)] = &[
        ("Legacy Endpoint", 1),
        ("Root Complex Integrated Endpoint", 9),
        ("Root Complex Event Collector", 10),
        ("Endpoint", 0),
        ("Root Port", 4),
        ("Upstream Port", 5),
        ("Downstream Port", 6),
        ("PCI-Express to PCI/PCI-X Bridge", 7),
        ("PCI/PCI-X to PCI-Express Bridge", 8),
    ];
    table
        .iter()
        .find(|(n, _)| desc.starts_with(n))
        .map(|(_, t)| *t)
}

/// The register block a continuation line belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reg {
    None,
    DevCap,
    DevCtl,
    LnkCap,
    LnkCtl,
    LnkSta,
    LnkCtl2,
    Acs,
    Sriov,
}

/// Parse a capture. `Err` when the text holds no device at all or a header/hex line is broken
/// beyond reading (the line and what was expected); unknown detail lines are skipped.
pub fn parse(text: &str) -> Result<LspciCapture, LspciError> {
    if text.len() > MAX_TEXT {
        return Err(LspciError {
            line: 1,
            message: format!(
                "{} bytes: more than the {MAX_TEXT} an lspci capture of any real host holds",
                text.len()
            ),
        });
    }
    let mut cap = LspciCapture::default();
    let mut cur: Option<LspciDevice> = None;
    let mut reg = Reg::None;
    let mut in_express = false;
    let all: Vec<&str> = text.lines().collect();
    // Pasted captures come indented by tabs or, through markdown and mail, by spaces: the
    // smallest indent of the capture is one level.
    let unit = all
        .iter()
        .map(|l| indent_cols(l))
        .filter(|c| *c > 0)
        .min()
        .unwrap_or(8);
    for (i, raw) in all.iter().enumerate() {
        let n = i + 1;
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(char::is_whitespace) {
            // Hex dump lines `00: 86 80 ...` / `ff0: ...` belong to the device above.
            if let Some(d) = cur.as_mut() {
                if let Some(r) = hex_line(line, n, d.hex.len())? {
                    d.hex.extend_from_slice(&r);
                    continue;
                }
            }
            if let Some((addr, had_domain, rest)) = parse_header(line) {
                if let Some(mut d) = cur.take() {
                    d.lines.1 = last_nonempty(&all, d.lines.0, n);
                    cap.devices.push(d);
                }
                if cap.devices.len() >= MAX_DEVICES {
                    return Err(LspciError {
                        line: n,
                        message: format!("more than {MAX_DEVICES} PCI functions"),
                    });
                }
                let mut d = header(rest, n)?;
                d.addr = Some(addr);
                d.had_domain = had_domain;
                d.lines = (n, n);
                cur = Some(d);
                reg = Reg::None;
                in_express = false;
                continue;
            }
            cap.ignored.push(n);
            continue;
        }
        let Some(d) = cur.as_mut() else {
            cap.ignored.push(n);
            continue;
        };
        let t = line.trim();
        // A line with one leading tab starts a new property; two or more continue one.
        let depth = indent_cols(line) / unit;
        if depth <= 1 {
            reg = Reg::None;
            in_express = false;
            detail(d, t, n, &mut in_express)?;
            if t.starts_with("Capabilities:") && t.contains("Access Control Services") {
                reg = Reg::Acs;
            }
            if t.starts_with("Capabilities:") && t.contains("Single Root I/O Virtualization") {
                reg = Reg::Sriov;
            }
            continue;
        }
        if in_express {
            if let Some((k, v)) = t.split_once(':') {
                let known = match k {
                    "DevCap" => Some(Reg::DevCap),
                    "DevCtl" => Some(Reg::DevCtl),
                    "LnkCap" => Some(Reg::LnkCap),
                    "LnkCtl" => Some(Reg::LnkCtl),
                    "LnkSta" => Some(Reg::LnkSta),
                    "LnkCap2" => {
                        express_lnkcap2(d, v);
                        Some(Reg::None)
                    }
                    "LnkCtl2" => Some(Reg::LnkCtl2),
                    _ if !k.contains(' ') && depth == 2 => Some(Reg::None),
                    _ => None,
                };
                if let Some(r) = known {
                    reg = r;
                    express_reg(d, reg, v);
                    continue;
                }
            }
            express_reg(d, reg, t);
            continue;
        }
        match reg {
            Reg::Acs => acs_line(d, t),
            Reg::Sriov => {
                if let Some(v) = word_after(t, "Total VFs:") {
                    d.sriov_total = v.trim_end_matches(',').parse().ok();
                }
                if let Some(v) = word_after(t, "Number of VFs:") {
                    d.sriov_num = v.trim_end_matches(',').parse().ok();
                }
            }
            _ => {}
        }
    }
    if let Some(mut d) = cur.take() {
        d.lines.1 = last_nonempty(&all, d.lines.0, all.len() + 1);
        cap.devices.push(d);
    }
    for d in &mut cap.devices {
        ids_from_hex(d);
    }
    if cap.devices.is_empty() {
        return Err(LspciError {
            line: 1,
            message: "no PCI function header (`BB:DD.F Class: Vendor Device` or \
                      `DDDD:BB:DD.F ...`): not `lspci -vv` output"
                .into(),
        });
    }
    Ok(cap)
}

/// A hex dump is the device's own header: ids, class and revision are taken from it, over
/// what the text header printed (a name lspci resolved from pci.ids, or `-nn` ids of a capture
/// pasted together from two runs). A `-nn` header that disagrees with the bytes is noted: the
/// bytes are what the device answered, the header is text.
fn ids_from_hex(d: &mut LspciDevice) {
    let h = &d.hex;
    if h.len() < 64 {
        return;
    }
    let r16 = |o: usize| u16::from_le_bytes([h[o], h[o + 1]]);
    let bytes = (r16(0), r16(2));
    if let Some(head) = d.header_ids.filter(|x| *x != bytes) {
        d.notes.push(format!(
            "header says [{:04x}:{:04x}], config bytes say {:04x}:{:04x}: the config bytes are kept",
            head.0, head.1, bytes.0, bytes.1
        ));
    }
    d.vendor = Some(bytes.0);
    d.device = Some(bytes.1);
    d.rev = Some(h[8]);
    d.prog_if = h[9];
    d.class16 = Some(u16::from_le_bytes([h[0x0a], h[0x0b]]));
    match h[0x0e] & 0x7f {
        0 => d.subsys = Some((r16(0x2c), r16(0x2e))),
        1 => d.bus = Some((h[0x18], h[0x19], h[0x1a])),
        _ => {}
    }
}

/// Columns of leading whitespace, a tab counting 8.
fn indent_cols(l: &str) -> usize {
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

/// The last non-empty line before line `next` (1-based), not before `start`.
fn last_nonempty(lines: &[&str], start: usize, next: usize) -> usize {
    let mut end = next.saturating_sub(1).max(start);
    while end > start && lines.get(end - 1).is_none_or(|l| l.trim().is_empty()) {
        end -= 1;
    }
    end
}

/// A hex dump line at the expected offset: `Some(bytes)`; `None` when the line is no hex line.
fn hex_line(line: &str, n: usize, have: usize) -> Result<Option<Vec<u8>>, LspciError> {
    let Some((off, rest)) = line.split_once(": ") else {
        return Ok(None);
    };
    if off.is_empty() || off.len() > 3 || !off.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(None);
    }
    let Ok(off) = usize::from_str_radix(off, 16) else {
        return Ok(None);
    };
    let bytes: Vec<&str> = rest.split_whitespace().collect();
    if bytes.is_empty() || bytes.len() > 16 || !bytes.iter().all(|b| b.len() == 2) {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(16);
    for b in &bytes {
        match u8::from_str_radix(b, 16) {
            Ok(v) => out.push(v),
            Err(_) => return Ok(None),
        }
    }
    if off != have {
        return Err(LspciError {
            line: n,
            message: format!(
                "hex dump line at offset 0x{off:x}, expected 0x{have:x} (lines of 16 bytes in order from 00)"
            ),
        });
    }
    if off + out.len() > crate::pci::config::EXTENDED_LEN {
        return Err(LspciError {
            line: n,
            message: "hex dump beyond 4096 bytes of config space".into(),
        });
    }
    Ok(Some(out))
}

/// The header after the address: `Class [cccc]: Vendor Device [vvvv:dddd] (rev xx) (prog-if xx [...])`.
fn header(rest: &str, n: usize) -> Result<LspciDevice, LspciError> {
    let mut d = LspciDevice::default();
    let Some((class_part, mut desc)) = rest.split_once(": ") else {
        return Err(LspciError {
            line: n,
            message: format!(
                "`{}`: expected `Class: Vendor Device` after the address",
                clip(rest)
            ),
        });
    };
    match bracket_hex(class_part) {
        Some((start, h)) if hex16(h).is_some() => {
            d.class16 = hex16(h);
            d.class_name = class_part[..start].trim().to_string();
        }
        _ => {
            d.class_name = class_part.trim().to_string();
            d.class16 = CLASS_NAMES
                .iter()
                .find(|(name, _)| *name == d.class_name)
                .map(|(_, c)| *c);
        }
    }
    if let Some(i) = desc.find(" (prog-if ") {
        let p = &desc[i + 10..];
        d.prog_if = p
            .get(..2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(0);
        desc = &desc[..i];
    }
    if let Some(i) = desc.find(" (rev ") {
        d.rev = desc
            .get(i + 6..i + 8)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        desc = &desc[..i];
    }
    if let Some((start, ids)) = bracket_hex(desc) {
        if let Some((v, dv)) = ids.split_once(':') {
            if let (Some(v), Some(dv)) = (hex16(v), hex16(dv)) {
                d.vendor = Some(v);
                d.device = Some(dv);
                d.header_ids = Some((v, dv));
                desc = &desc[..start];
            }
        }
    }
    d.description = desc.trim().to_string();
    if d.vendor.is_none() {
        d.vendor = VENDOR_NAMES
            .iter()
            .find(|(name, _)| d.description.starts_with(name))
            .map(|(_, v)| *v);
    }
    Ok(d)
}

fn clip(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// A one-tab property line.
fn detail(d: &mut LspciDevice, t: &str, n: usize, in_express: &mut bool) -> Result<(), LspciError> {
    if let Some(v) = t.strip_prefix("NUMA node:") {
        d.numa_node = v.trim().parse().ok();
    } else if let Some(v) = t.strip_prefix("IOMMU group:") {
        d.iommu_group = v.trim().parse().ok();
    } else if let Some(v) = t.strip_prefix("Kernel driver in use:") {
        let v = v.trim();
        if !v.is_empty() && !v.contains('/') {
            d.driver = Some(v.to_string());
        }
    } else if let Some(v) = t.strip_prefix("Kernel modules:") {
        d.modules = v
            .split(',')
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
            .collect();
    } else if let Some(v) = t.strip_prefix("Subsystem:") {
        if let Some((_, ids)) = bracket_hex(v) {
            if let Some((a, b)) = ids.split_once(':') {
                if let (Some(a), Some(b)) = (hex16(a), hex16(b)) {
                    d.subsys = Some((a, b));
                }
            }
        }
    } else if let Some(v) = t.strip_prefix("Bus:") {
        let num = |k: &str| {
            word_after(v, k)
                .map(|s| s.trim_end_matches(','))
                .and_then(|s| u8::from_str_radix(s, 16).ok())
        };
        if let (Some(p), Some(s), Some(u)) =
            (num("primary="), num("secondary="), num("subordinate="))
        {
            d.bus = Some((p, s, u));
        }
    } else if let Some(v) = t.strip_prefix("Capabilities:") {
        let v = v.trim();
        if v.starts_with("<access denied>") {
            d.caps_denied = true;
            return Ok(());
        }
        let Some(rest) = v.strip_prefix('[') else {
            return Ok(());
        };
        let Some((inside, name)) = rest.split_once(']') else {
            return Err(LspciError {
                line: n,
                message: "expected `Capabilities: [offset] Name`".into(),
            });
        };
        let mut parts = inside.split_whitespace();
        let off = parts
            .next()
            .and_then(|o| usize::from_str_radix(o, 16).ok())
            .filter(|o| (0x40..0x1000).contains(o) && o % 4 == 0)
            .ok_or_else(|| LspciError {
                line: n,
                message: format!(
                    "capability offset `{}`: expected a dword-aligned hex offset from 40 to ffc",
                    clip(inside)
                ),
            })?;
        let ext_version = parts
            .next()
            .and_then(|v| v.strip_prefix('v'))
            .and_then(|v| v.parse::<u8>().ok());
        let name = name.trim().to_string();
        let id = if off >= 0x100 {
            ext_cap_id(&name)
        } else {
            std_cap_id(&name)
        };
        if off < 0x100 && id == Some(0x10) {
            *in_express = true;
            let rest = name.strip_prefix("Express").unwrap_or("").trim();
            let (ver, rest) = match rest.strip_prefix("(v") {
                Some(r) => match r.split_once(')') {
                    Some((v, r)) => (v.parse().unwrap_or(1), r.trim()),
                    None => (1, r),
                },
                None => (1, rest),
            };
            d.express = Some(ExpressText {
                offset: off,
                version: ver,
                port_type: port_type(rest),
                ..Default::default()
            });
        }
        d.caps.push(CapText {
            offset: off,
            ext_version,
            id,
            name,
            line: n,
        });
    }
    Ok(())
}

fn express_lnkcap2(d: &mut LspciDevice, v: &str) {
    let Some(e) = d.express.as_mut() else { return };
    // `Supported Link Speeds: 2.5-16GT/s` (a range from 2.5) or `RsvdP`.
    if let Some(s) = word_after(v, "Supported Link Speeds:") {
        let s = s.trim_end_matches(',');
        let top = s.rsplit('-').next().unwrap_or(s);
        let top = if top.ends_with("GT/s") {
            top.to_string()
        } else {
            format!("{top}GT/s")
        };
        if let Some(c) = speed_code(&top) {
            // Bits 1..=c of the register: speeds 2.5 GT/s up to the highest.
            let mut vec = 0u8;
            for b in 1..=c {
                vec |= 1 << (b - 1);
            }
            e.lnkcap2_speeds = Some(vec);
        }
    }
}

fn express_reg(d: &mut LspciDevice, reg: Reg, v: &str) {
    let Some(e) = d.express.as_mut() else { return };
    match reg {
        Reg::DevCap => {
            if let Some(b) = word_after(v, "MaxPayload") {
                if let Some(c) = payload_code(b) {
                    e.devcap_mps = Some(c);
                }
            }
        }
        Reg::DevCtl => {
            let mut r = e.devctl.unwrap_or(0);
            let bits: [(&str, u16); 10] = [
                ("CorrErr", 1 << 0),
                ("NonFatalErr", 1 << 1),
                ("FatalErr", 1 << 2),
                ("UnsupReq", 1 << 3),
                ("RlxdOrd", 1 << 4),
                ("ExtTag", 1 << 8),
                ("PhantFunc", 1 << 9),
                ("AuxPwr", 1 << 10),
                ("NoSnoop", 1 << 11),
                ("FLReset", 1 << 15),
            ];
            for (name, bit) in bits {
                match flag(v, name) {
                    Some(true) => r |= bit,
                    Some(false) => r &= !bit,
                    None => {}
                }
            }
            if let Some(c) = word_after(v, "MaxPayload").and_then(payload_code) {
                r = (r & !(7 << 5)) | ((c as u16) << 5);
            }
            if let Some(c) = word_after(v, "MaxReadReq").and_then(payload_code) {
                r = (r & !(7 << 12)) | ((c as u16) << 12);
            }
            e.devctl = Some(r);
        }
        Reg::LnkCap => {
            if let Some(p) = word_after(v, "Port #") {
                e.lnkcap_port = p.trim_end_matches(',').parse().ok();
            }
            if let Some(s) = word_after(v, "Speed ") {
                e.lnkcap_speed = speed_code(s).or(e.lnkcap_speed);
            }
            if let Some(w) = word_after(v, "Width ") {
                e.lnkcap_width = width(w).or(e.lnkcap_width);
            }
            if let Some(i) = v.find("ASPM ") {
                let a = &v[i + 5..];
                let a = a.split(',').next().unwrap_or("");
                let mut bits = 0u8;
                if a.contains("L0s") {
                    bits |= 1;
                }
                if a.contains("L1") {
                    bits |= 2;
                }
                e.lnkcap_aspm = Some(bits);
            }
        }
        Reg::LnkCtl => {
            if let Some(i) = v.find("ASPM ") {
                let a = v[i + 5..].split(';').next().unwrap_or("");
                let mut bits = 0u8;
                if a.contains("L0s") {
                    bits |= 1;
                }
                if a.contains("L1") {
                    bits |= 2;
                }
                e.lnkctl_aspm = Some(bits);
            }
        }
        Reg::LnkSta => {
            if let Some(s) = word_after(v, "Speed ") {
                e.lnksta_speed = speed_code(s).or(e.lnksta_speed);
            }
            if let Some(w) = word_after(v, "Width ") {
                e.lnksta_width = width(w).or(e.lnksta_width);
            }
        }
        Reg::LnkCtl2 => {
            if let Some(s) = word_after(v, "Target Link Speed:") {
                e.lnkctl2_target = speed_code(s);
            }
        }
        _ => {}
    }
}

fn acs_line(d: &mut LspciDevice, t: &str) {
    let Some((k, v)) = t.split_once(':') else {
        return;
    };
    let bits = |v: &str| {
        let names = [
            "SrcValid",
            "TransBlk",
            "ReqRedir",
            "CmpltRedir",
            "UpstreamFwd",
            "EgressCtrl",
            "DirectTrans",
        ];
        let mut r = 0u16;
        for (i, name) in names.iter().enumerate() {
            if flag(v, name) == Some(true) {
                r |= 1 << i;
            }
        }
        r
    };
    let Some(off) = d
        .caps
        .iter()
        .rev()
        .find(|c| c.id == Some(0x000d))
        .map(|c| c.offset)
    else {
        return;
    };
    let a = d.acs.get_or_insert(AcsText {
        offset: off,
        cap: 0,
        ctl: 0,
    });
    match k.trim() {
        "ACSCap" => a.cap = bits(v),
        "ACSCtl" => a.ctl = bits(v),
        _ => {}
    }
}

/// One function of an `lspci -t` tree, with the bridge it sits behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    pub addr: PciAddr,
    pub parent: Option<PciAddr>,
    /// `-[01]` / `-[01-05]` after a bridge: its secondary bus.
    pub secondary: Option<u8>,
    /// The name `-tv` printed after the address, if any.
    pub name: String,
    pub line: usize,
}

/// Whether `text` is an `lspci -t` tree: its first line opens a root bus `-[DDDD:BB]-`.
pub fn looks_like_tree(text: &str) -> bool {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| l.trim_start().starts_with("-[") || l.trim_start().starts_with("-+-["))
}

/// Parse an `lspci -t` / `-tv` tree. A child's bus is the secondary bus of the bridge whose
/// branch it hangs from (or the root bus), found by the column the branch is drawn at.
pub fn parse_tree(text: &str) -> Result<Vec<TreeEntry>, LspciError> {
    if text.len() > MAX_TEXT {
        return Err(LspciError {
            line: 1,
            message: format!("more than {MAX_TEXT} bytes"),
        });
    }
    // (column of the children, domain, bus, parent bridge)
    let mut levels: Vec<(usize, u32, u8, Option<PciAddr>)> = Vec::new();
    let mut out: Vec<TreeEntry> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let b = line.as_bytes();
        let mut pending: Option<(u32, u8, Option<PciAddr>)> = None;
        let mut j = 0;
        while j < b.len() {
            if b[j] == b'[' {
                let Some(end) = line[j..].find(']').map(|e| j + e) else {
                    break;
                };
                let inside = &line[j + 1..end];
                if let Some((d, bus)) = inside.split_once(':') {
                    let (Ok(dom), Ok(bus)) =
                        (u32::from_str_radix(d, 16), u8::from_str_radix(bus, 16))
                    else {
                        return Err(LspciError {
                            line: n,
                            message: format!("`[{inside}]`: expected a root bus [DDDD:BB]"),
                        });
                    };
                    pending = Some((dom, bus, None));
                }
                j = end + 1;
                continue;
            }
            let is_dev = j > 0
                && b[j - 1] == b'-'
                && j + 4 <= b.len()
                && b[j].is_ascii_hexdigit()
                && b[j + 1].is_ascii_hexdigit()
                && b[j + 2] == b'.'
                && (b'0'..=b'7').contains(&b[j + 3])
                && (j + 4 == b.len() || b[j + 4] == b' ' || b[j + 4] == b'-');
            if !is_dev {
                j += 1;
                continue;
            }
            let col = line[..j].chars().count();
            let dev = u8::from_str_radix(&line[j..j + 2], 16).unwrap_or(0);
            let func = b[j + 3] - b'0';
            while levels.last().is_some_and(|l| l.0 > col) {
                levels.pop();
            }
            let (dom, bus, parent) = match (levels.last(), pending.take()) {
                (_, Some(p)) => {
                    levels.push((col, p.0, p.1, p.2));
                    p
                }
                (Some(l), None) if l.0 == col => (l.1, l.2, l.3),
                _ => {
                    return Err(LspciError {
                        line: n,
                        message: format!(
                            "function at column {col} hangs from no bridge or root bus above it: not an `lspci -t` tree"
                        ),
                    })
                }
            };
            if dev > 0x1f {
                return Err(LspciError {
                    line: n,
                    message: format!("device number {dev:02x} above 1f"),
                });
            }
            let addr = PciAddr {
                domain: dom,
                bus,
                dev,
                func,
            };
            let mut k = j + 4;
            let mut secondary = None;
            if line[k..].starts_with("-[") {
                let rest = &line[k + 2..];
                if let Some(e) = rest.find(']') {
                    let sec = rest[..e].split('-').next().unwrap_or("");
                    secondary = u8::from_str_radix(sec, 16).ok();
                    k += 2 + e + 1;
                    if let Some(s) = secondary {
                        pending = Some((dom, s, Some(addr)));
                    }
                }
            }
            let name = line[k..]
                .trim_start_matches('-')
                .trim()
                .split("  ")
                .next()
                .unwrap_or("")
                .to_string();
            let name = if name.starts_with(['+', '\\']) {
                String::new()
            } else {
                name
            };
            if out.len() >= MAX_DEVICES {
                return Err(LspciError {
                    line: n,
                    message: format!("more than {MAX_DEVICES} functions"),
                });
            }
            out.push(TreeEntry {
                addr,
                parent,
                secondary,
                name,
                line: n,
            });
            j = k;
        }
    }
    if out.is_empty() {
        return Err(LspciError {
            line: 1,
            message: "no function in the tree (`-[DDDD:BB]-+-DD.F`): not `lspci -t` output".into(),
        });
    }
    Ok(out)
}

impl LspciDevice {
    /// The 24-bit class code (base, subclass, programming interface).
    pub fn class24(&self) -> Option<u32> {
        self.class16
            .map(|c| ((c as u32) << 8) | self.prog_if as u32)
    }

    pub fn is_bridge(&self) -> bool {
        self.bus.is_some() || matches!(self.class16, Some(0x0604) | Some(0x0609))
    }

    /// The device's config space: the hex dump when lspci printed one (exact), else rebuilt
    /// from the decoded registers (sparse: only what the text states; `true` in the second
    /// field). 64 bytes when lspci could not read the capabilities (it ran without root),
    /// 4096 for a PCI Express device whose capabilities it read, else 256.
    pub fn config_bytes(&self) -> (Vec<u8>, bool) {
        if self.hex.len() >= 64 {
            return (self.hex.clone(), false);
        }
        let has_ext = self.caps.iter().any(|c| c.offset >= 0x100);
        let len = if self.caps_denied || self.caps.is_empty() && self.express.is_none() {
            if self.caps_denied {
                64
            } else {
                256
            }
        } else if self.express.is_some() || has_ext {
            4096
        } else {
            256
        };
        let mut b = vec![0u8; len];
        let put16 = |b: &mut Vec<u8>, off: usize, v: u16| {
            if off + 2 <= b.len() {
                b[off..off + 2].copy_from_slice(&v.to_le_bytes());
            }
        };
        let put32 = |b: &mut Vec<u8>, off: usize, v: u32| {
            if off + 4 <= b.len() {
                b[off..off + 4].copy_from_slice(&v.to_le_bytes());
            }
        };
        put16(&mut b, 0, self.vendor.unwrap_or(0));
        put16(&mut b, 2, self.device.unwrap_or(0));
        b[0x08] = self.rev.unwrap_or(0);
        let class = self.class24().unwrap_or(0xff0000);
        b[0x09] = (class & 0xff) as u8;
        b[0x0a] = ((class >> 8) & 0xff) as u8;
        b[0x0b] = ((class >> 16) & 0xff) as u8;
        if self.is_bridge() {
            b[0x0e] = 1;
            if let Some((p, s, u)) = self.bus {
                b[0x18] = p;
                b[0x19] = s;
                b[0x1a] = u;
            }
        } else if let Some((sv, sd)) = self.subsys {
            put16(&mut b, 0x2c, sv);
            put16(&mut b, 0x2e, sd);
        }
        if len <= 64 {
            if self.caps_denied {
                // lspci saw a capability list it could not read: the pointer points past the
                // 64 bytes a non-root reader gets, as it did on the host.
                b[0x06] |= 0x10;
                b[0x34] = 0x40;
            }
            return (b, true);
        }
        let std: Vec<&CapText> = self.caps.iter().filter(|c| c.offset < 0x100).collect();
        if let Some(first) = std.first() {
            b[0x06] |= 0x10;
            b[0x34] = first.offset as u8;
        }
        for (i, c) in std.iter().enumerate() {
            // An id lspci named but this table does not know is written as 0 (the Null
            // capability), so the list still links.
            b[c.offset] = c.id.unwrap_or(0) as u8;
            b[c.offset + 1] = std.get(i + 1).map(|n| n.offset as u8).unwrap_or(0);
        }
        if let Some(e) = &self.express {
            let o = e.offset;
            let flags = (e.version as u16 & 0xf) | ((e.port_type.unwrap_or(0) as u16 & 0xf) << 4);
            put16(&mut b, o + 2, flags);
            put32(&mut b, o + 4, e.devcap_mps.unwrap_or(0) as u32);
            put16(&mut b, o + 8, e.devctl.unwrap_or(0));
            let lnkcap = e.lnkcap_speed.unwrap_or(0) as u32
                | (e.lnkcap_width.unwrap_or(0) as u32) << 4
                | (e.lnkcap_aspm.unwrap_or(0) as u32 & 3) << 10
                | (e.lnkcap_port.unwrap_or(0) as u32) << 24;
            put32(&mut b, o + 0x0c, lnkcap);
            put16(&mut b, o + 0x10, e.lnkctl_aspm.unwrap_or(0) as u16 & 3);
            let lnksta =
                e.lnksta_speed.unwrap_or(0) as u16 | (e.lnksta_width.unwrap_or(0) as u16) << 4;
            put16(&mut b, o + 0x12, lnksta);
            if e.version >= 2 {
                put32(
                    &mut b,
                    o + 0x2c,
                    (e.lnkcap2_speeds.unwrap_or(0) as u32) << 1,
                );
                put16(&mut b, o + 0x30, e.lnkctl2_target.unwrap_or(0) as u16);
            }
        }
        let ext: Vec<&CapText> = self.caps.iter().filter(|c| c.offset >= 0x100).collect();
        for (i, c) in ext.iter().enumerate() {
            let next = ext.get(i + 1).map(|n| n.offset as u32).unwrap_or(0);
            // A header of all zeros ends the list: an unknown id is written as 0 with the
            // version kept (never 0 itself), so the list goes on past it.
            let ver = c.ext_version.unwrap_or(1).max(1) as u32 & 0xf;
            let hdr = c.id.unwrap_or(0) as u32 | ver << 16 | next << 20;
            put32(&mut b, c.offset, hdr);
        }
        if let Some(a) = &self.acs {
            put16(&mut b, a.offset + 4, a.cap);
            put16(&mut b, a.offset + 6, a.ctl);
        }
        (b, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pci::config;

    /// Two functions of the Ampere Altra Developer Platform's `lspci -vvnnD` in linuxhw/LsPCI
    /// (Server/ADLINK/Ampere/..., commit e3517590), cut to the lines the facts read.
    const ALTRA: &str = "0000:00:01.0 PCI bridge [0604]: Ampere Computing, LLC Altra PCI Express Root Port a0 [1def:e101] (rev 04) (prog-if 00 [Normal decode])
\tControl: I/O+ Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR- FastB2B- DisINTx-
\tNUMA node: 0
\tIOMMU group: 2
\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0
\tCapabilities: [40] Power Management version 3
\t\tFlags: PMEClk- DSI- D1+ D2+ AuxCurrent=375mA PME(D0+,D1+,D2-,D3hot+,D3cold-)
\tCapabilities: [70] Express (v2) Root Port (Slot+), MSI 00
\t\tDevCap:\tMaxPayload 512 bytes, PhantFunc 0
\t\t\tExtTag+ RBE+
\t\tDevCtl:\tCorrErr- NonFatalErr- FatalErr- UnsupReq-
\t\t\tRlxdOrd+ ExtTag+ PhantFunc- AuxPwr- NoSnoop+
\t\t\tMaxPayload 128 bytes, MaxReadReq 512 bytes
\t\tLnkCap:\tPort #0, Speed 8GT/s, Width x16, ASPM L0s L1, Exit Latency L0s <4us, L1 <64us
\t\t\tClockPM- Surprise+ LLActRep+ BwNot+ ASPMOptComp+
\t\tLnkCtl:\tASPM Disabled; RCB 64 bytes, Disabled- CommClk+
\t\tLnkSta:\tSpeed 2.5GT/s (downgraded), Width x16 (ok)
\t\tLnkCap2: Supported Link Speeds: 2.5-8GT/s, Crosslink- Retimer+ 2Retimers+ DRS-
\t\tLnkCtl2: Target Link Speed: 8GT/s, EnterCompliance- SpeedDis-
\tCapabilities: [100 v2] Advanced Error Reporting
\t\tUESta:\tDLP- SDES- TLP- FCP- CmpltTO- CmpltAbrt- UnxCmplt- RxOF- MalfTLP- ECRC- UnsupReq- ACSViol-
\tCapabilities: [148 v1] Virtual Channel
\tCapabilities: [230 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir- CmpltRedir- UpstreamFwd+ EgressCtrl- DirectTrans-
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd+ EgressCtrl- DirectTrans-
\tKernel driver in use: pcieport

0000:01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GA102 [GeForce RTX 3090] [10de:2204] (rev a1) (prog-if 00 [VGA controller])
\tSubsystem: Micro-Star International Co., Ltd. [MSI] GA102 [GeForce RTX 3090] [1462:3884]
\tNUMA node: 0
\tIOMMU group: 17
\tCapabilities: [60] Power Management version 3
\tCapabilities: [68] MSI: Enable+ Count=1/1 Maskable- 64bit+
\tCapabilities: [78] Express (v2) Legacy Endpoint, MSI 00
\t\tDevCap:\tMaxPayload 256 bytes, PhantFunc 0, Latency L0s unlimited, L1 <64us
\t\t\tExtTag+ AttnBtn- AttnInd- PwrInd- RBE+ FLReset+
\t\tDevCtl:\tCorrErr- NonFatalErr- FatalErr- UnsupReq-
\t\t\tRlxdOrd+ ExtTag+ PhantFunc- AuxPwr- NoSnoop+ FLReset-
\t\t\tMaxPayload 128 bytes, MaxReadReq 512 bytes
\t\tLnkCap:\tPort #0, Speed 8GT/s, Width x16, ASPM L0s L1, Exit Latency L0s <512ns, L1 <16us
\t\tLnkSta:\tSpeed 2.5GT/s (downgraded), Width x16 (ok)
\t\tLnkCap2: Supported Link Speeds: 2.5-16GT/s, Crosslink- Retimer+ 2Retimers+ DRS-
\tCapabilities: [b4] Vendor Specific Information: Len=14 <?>
\tCapabilities: [100 v1] Virtual Channel
\tCapabilities: [258 v1] L1 PM Substates
\tCapabilities: [128 v1] Power Budgeting <?>
\tCapabilities: [420 v2] Advanced Error Reporting
\tCapabilities: [bb0 v1] Physical Resizable BAR
\t\tBAR 1: current size: 256MB, supported: 64MB 128MB 256MB
\tKernel driver in use: nvidia
\tKernel modules: nvidiafb, nouveau
";

    #[test]
    fn altra_devices_and_registers() {
        assert!(looks_like(ALTRA));
        let c = parse(ALTRA).expect("parse");
        assert_eq!(c.devices.len(), 2);
        let rp = &c.devices[0];
        assert_eq!(
            rp.addr.map(|a| a.to_string()).as_deref(),
            Some("0000:00:01.0")
        );
        assert!(rp.had_domain);
        assert_eq!(
            (rp.vendor, rp.device, rp.class16),
            (Some(0x1def), Some(0xe101), Some(0x0604))
        );
        assert_eq!(rp.bus, Some((0, 1, 1)));
        assert_eq!((rp.numa_node, rp.iommu_group), (Some(0), Some(2)));
        assert_eq!(rp.driver.as_deref(), Some("pcieport"));
        assert_eq!(rp.lines, (1, 26));
        let e = rp.express.as_ref().expect("express");
        assert_eq!((e.offset, e.version, e.port_type), (0x70, 2, Some(4)));
        assert_eq!(e.devcap_mps, Some(2));
        let acs = rp.acs.expect("acs");
        assert_eq!(acs.offset, 0x230);
        assert_eq!(acs.cap, 0b001_0011);
        assert_eq!(acs.ctl, 0b001_0001);

        // The rebuilt config space decodes to what lspci printed.
        let (bytes, sparse) = rp.config_bytes();
        assert!(sparse);
        let d = config::decode(&bytes).expect("decode");
        let p = d.pcie.expect("pcie");
        assert_eq!(p.port_type, config::PortType::RootPort);
        assert_eq!((p.mps_supported, p.mps, p.mrrs), (512, 128, 512));
        assert_eq!((p.link_cap_speed, p.link_cap_width), (3, 16));
        assert_eq!((p.link_sta_speed, p.link_sta_width), (1, 16));
        assert_eq!(p.link_cap2_speeds, Some(0b111));
        assert_eq!(d.bridge_buses, Some((1, 1)));
        assert_eq!(d.acs.map(|a| (a.offset, a.ctrl)), Some((0x230, 0b001_0001)));
        assert_eq!(
            d.ext_caps.iter().map(|c| c.0).collect::<Vec<_>>(),
            vec![0x0001, 0x0002, 0x000d]
        );

        let gpu = &c.devices[1];
        assert_eq!(gpu.subsys, Some((0x1462, 0x3884)));
        assert_eq!(gpu.modules, vec!["nvidiafb", "nouveau"]);
        let d = config::decode(&gpu.config_bytes().0).expect("decode");
        let p = d.pcie.expect("pcie");
        assert_eq!(p.port_type, config::PortType::LegacyEndpoint);
        assert_eq!((p.mps_supported, p.mps, p.mrrs), (256, 128, 512));
        // Listed out of offset order, as the device links them.
        assert_eq!(
            d.ext_caps.iter().map(|c| c.1).collect::<Vec<_>>(),
            vec![0x100, 0x258, 0x128, 0x420, 0xbb0]
        );
        assert!(d.acs.is_none());
        assert_eq!(d.ext_visibility, config::Visibility::Absent);
    }

    #[test]
    fn without_nn_or_domain_and_without_root() {
        let t = "01:00.0 Ethernet controller: Mellanox Technologies MT27800 Family [ConnectX-5]
\tSubsystem: Mellanox Technologies Device 0003
\tControl: I/O- Mem+ BusMaster+
\tCapabilities: <access denied>
\tKernel driver in use: mlx5_core
\tKernel modules: mlx5_core
";
        let c = parse(t).expect("parse");
        let d = &c.devices[0];
        assert!(!d.had_domain);
        assert_eq!(d.addr.map(|a| a.domain), Some(0));
        assert_eq!(d.class16, Some(0x0200));
        assert_eq!(d.vendor, Some(0x15b3));
        assert_eq!(d.device, None);
        assert_eq!(
            d.description,
            "Mellanox Technologies MT27800 Family [ConnectX-5]"
        );
        let (b, _) = d.config_bytes();
        assert_eq!(b.len(), 64);
        let c = config::decode(&b).expect("decode");
        assert_eq!(c.pcie_visibility, config::Visibility::Hidden);
    }

    #[test]
    fn hex_dump_is_exact() {
        let mut t = String::from("00:00.0 Host bridge [0600]: Intel Corporation 440FX [8086:1237] (rev 02)\n\tFlags: fast devsel\n");
        for row in 0..16 {
            let bytes: Vec<String> = (0..16)
                .map(|i| {
                    format!(
                        "{:02x}",
                        if row == 0 && i == 0 {
                            0x86
                        } else if row == 0 && i == 1 {
                            0x80
                        } else {
                            0
                        }
                    )
                })
                .collect();
            t.push_str(&format!("{:02x}: {}\n", row * 16, bytes.join(" ")));
        }
        let c = parse(&t).expect("parse");
        let (b, sparse) = c.devices[0].config_bytes();
        assert!(!sparse);
        assert_eq!(b.len(), 256);
        assert_eq!(&b[..2], &[0x86, 0x80]);
        // A line out of order says where and what was expected.
        let bad = t.replace("20: ", "30: ");
        let e = parse(&bad).expect_err("out of order");
        assert_eq!(e.line, 5);
        assert!(e.message.contains("expected 0x20"), "{e}");
    }

    #[test]
    fn garbage_is_refused_with_a_line() {
        assert!(parse("").is_err());
        assert!(parse("hello world\nthis is not lspci\n").is_err());
        assert!(!looks_like("MemTotal: 1 kB\n"));
        let e = parse("00:01.0 no colon here\n\tNUMA node: 0\n").expect_err("bad header");
        assert_eq!(e.line, 1);
        let e =
            parse("00:01.0 PCI bridge: X\n\tCapabilities: [zz] Express\n").expect_err("bad cap");
        assert_eq!(e.line, 2);
        // Absurd numbers are not taken.
        let c = parse(
            "00:01.0 PCI bridge [0604]: X [1234:5678]\n\tNUMA node: 99999999999999\n\tCapabilities: [40] Express (v2) Endpoint, MSI 00\n\t\tLnkSta:\tSpeed 999GT/s, Width x4096\n\t\tDevCtl:\tMaxPayload 3000 bytes, MaxReadReq 65536 bytes\n",
        )
        .expect("parse");
        let d = &c.devices[0];
        assert_eq!(d.numa_node, None);
        let e = d.express.as_ref().expect("express");
        assert_eq!((e.lnksta_speed, e.lnksta_width), (None, None));
        assert_eq!(e.devctl, Some(0));
        // Truncated in the middle of a device: what was read is kept.
        let cut = &ALTRA[..ALTRA.len() / 2];
        let c = parse(cut).expect("truncated");
        assert_eq!(c.devices.len(), 1);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,400}") {
            let _ = looks_like(&s);
            if let Ok(c) = parse(&s) {
                for d in &c.devices {
                    let _ = d.config_bytes();
                }
            }
        }

        #[test]
        fn never_panics_on_lspci_like_lines(lines in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::strategy::Just("00:01.0 PCI bridge [0604]: X [1234:5678]".to_string()),
                "\t(Capabilities: \\[[0-9a-f]{1,3}( v[0-9])?\\] (Express \\(v2\\) Root Port|Access Control Services|Advanced Error Reporting)|NUMA node: -?[0-9]{1,3}|Bus: primary=[0-9a-f]{2}, secondary=[0-9a-f]{2}, subordinate=[0-9a-f]{2})",
                "\t\t(DevCtl|LnkSta|LnkCap|ACSCtl|LnkCap2):\t[ -~]{0,40}",
                "[0-9a-f]{2}: ([0-9a-f]{2} ){0,16}",
            ], 0..40)) {
            let s = lines.join("\n");
            if let Ok(c) = parse(&s) {
                for d in &c.devices {
                    let (b, _) = d.config_bytes();
                    let _ = config::decode(&b);
                }
            }
        }
    }
}

#[cfg(test)]
mod tree_tests {
    use super::*;

    /// The head of `lspci -tv` on the ASUS ESC8000A-E12 (luigifcruz/stelline,
    /// hardware/asus-esc8000a-e12.md at 383e3167).
    const TREE: &str = r"-+-[0000:00]-+-00.0  Advanced Micro Devices, Inc. [AMD] Device 14a4
 |           +-01.1-[01]--+-00.0  NVIDIA Corporation AD102GL [RTX 6000 Ada Generation]
 |           |            \-00.1  NVIDIA Corporation AD102 High Definition Audio Controller
 |           +-05.1-[02]----00.0  Samsung Electronics Co Ltd NVMe SSD Controller SM981/PM981/PM983
 |           \-19.7  Advanced Micro Devices, Inc. [AMD] Device 14b4
 +-[0000:20]-+-00.0  Advanced Micro Devices, Inc. [AMD] Device 14a4
 |           +-03.1-[21]--+-00.0  Mellanox Technologies MT2910 Family [ConnectX-7]
 |           |            \-00.1  Mellanox Technologies MT2910 Family [ConnectX-7]
 \-[0002:00]---00.0-[01-03]----00.0-[02-03]--+-00.0-[03]----00.0  Ampere
";

    #[test]
    fn tree_parents() {
        assert!(looks_like_tree(TREE));
        let t = parse_tree(TREE).expect("tree");
        let get = |a: &str| {
            t.iter()
                .find(|e| e.addr.to_string() == a)
                .unwrap_or_else(|| panic!("{a} in {t:?}"))
        };
        assert_eq!(get("0000:00:00.0").parent, None);
        assert_eq!(get("0000:00:01.1").secondary, Some(1));
        assert_eq!(
            get("0000:01:00.0").parent.map(|p| p.to_string()).as_deref(),
            Some("0000:00:01.1")
        );
        assert_eq!(
            get("0000:01:00.1").parent.map(|p| p.to_string()).as_deref(),
            Some("0000:00:01.1")
        );
        assert_eq!(
            get("0000:02:00.0").parent.map(|p| p.to_string()).as_deref(),
            Some("0000:00:05.1")
        );
        assert_eq!(get("0000:00:19.7").parent, None);
        assert_eq!(
            get("0000:21:00.1").parent.map(|p| p.to_string()).as_deref(),
            Some("0000:20:03.1")
        );
        assert_eq!(
            get("0002:03:00.0").parent.map(|p| p.to_string()).as_deref(),
            Some("0002:02:00.0")
        );
        assert_eq!(
            get("0000:01:00.0").name,
            "NVIDIA Corporation AD102GL [RTX 6000 Ada Generation]"
        );
        assert!(parse_tree("-[zz:00]-+-00.0\n").is_err());
        assert!(parse_tree("hello\n").is_err());
    }
}
