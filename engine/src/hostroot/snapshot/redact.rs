//! `snapshot --redact`: identifying data (MACs, GUIDs/GIDs, serial numbers, the hostname)
//! replaced consistently, so a redacted snapshot still reads as one host.

use std::collections::{BTreeMap, HashMap};

/// Consistent replacement of identifying data: MACs, GUIDs/GIDs, serial numbers, hostname.
pub struct Redactor {
    hostname: Option<String>,
    map: HashMap<String, String>,
    counters: BTreeMap<&'static str, usize>,
}

/// Files whose whole content is a serial number or unique id.
const SERIAL_FILES: &[&str] = &[
    "product_serial",
    "board_serial",
    "chassis_serial",
    "product_uuid",
    "serial",
    "serial_number",
    "board_id",
];

impl Redactor {
    pub fn new(hostname: Option<String>) -> Self {
        Redactor {
            hostname: hostname.filter(|h| !h.is_empty()),
            map: HashMap::new(),
            counters: BTreeMap::new(),
        }
    }

    fn replacement(
        &mut self,
        kind: &'static str,
        original: &str,
        make: impl Fn(usize) -> String,
    ) -> String {
        if let Some(r) = self.map.get(original) {
            return r.clone();
        }
        let n = self.counters.entry(kind).or_insert(0);
        *n += 1;
        let r = make(*n);
        self.map.insert(original.to_string(), r.clone());
        r
    }

    /// A consistent stand-in for a GPU UUID (a serial-like identifier).
    pub fn gpu_uuid(&mut self, uuid: &str) -> String {
        self.replacement("gpu-uuid", uuid, |n| {
            format!("GPU-00000000-0000-0000-0000-{n:012x}")
        })
    }

    /// Redact one file; `None` drops it (binary VPD with serials).
    pub fn redact_file(&mut self, host_path: &str, data: &[u8]) -> Option<Vec<u8>> {
        let name = host_path.rsplit('/').next().unwrap_or("");
        if host_path == daqtune_probe::gpu::FACTS_PATH {
            // Recorded GPU facts (a snapshot of a snapshot): the UUIDs are identifiers too.
            if let Ok(mut snap) =
                daqtune_probe::gpu::GpuSnapshot::from_json(&String::from_utf8_lossy(data))
            {
                snap.map_uuids(|u| self.gpu_uuid(u));
                return Some(self.redact_text(&snap.to_json()).into_bytes());
            }
        }
        if name == "vpd" {
            return None;
        }
        if name == "config" && host_path.starts_with("/sys/") {
            return Some(redact_config_dsn(data));
        }
        if SERIAL_FILES.contains(&name) && !data.is_empty() {
            let text = String::from_utf8_lossy(data).trim().to_string();
            if text.is_empty() {
                return Some(data.to_vec());
            }
            let r = self.replacement("serial", &text, |n| format!("REDACTED-SERIAL-{n}"));
            return Some(format!("{r}\n").into_bytes());
        }
        match std::str::from_utf8(data) {
            Ok(text) => Some(self.redact_text(text).into_bytes()),
            Err(_) => Some(data.to_vec()),
        }
    }

    /// Replace MAC addresses, 64-bit GUIDs, 128-bit GIDs and the hostname in text.
    pub fn redact_text(&mut self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let b = text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if let Some((len, kind)) = match_id(&b[i..], i == 0 || !is_hexish(b[i - 1])) {
                let orig = &text[i..i + len];
                let lower = orig.to_ascii_lowercase();
                let keep =
                    lower.bytes().all(|c| c == b'0' || c == b':') || lower == "ff:ff:ff:ff:ff:ff";
                if keep {
                    out.push_str(orig);
                } else {
                    let r = match kind {
                        IdKind::Mac => self.replacement("mac", &lower, |n| {
                            format!("02:00:00:00:{:02x}:{:02x}", (n >> 8) & 0xff, n & 0xff)
                        }),
                        IdKind::Guid => {
                            self.replacement("guid", &lower, |n| format!("0200:0000:0000:{n:04x}"))
                        }
                        IdKind::Gid => self.replacement("gid", &lower, |n| {
                            format!("fe80:0000:0000:0000:0200:0000:0000:{n:04x}")
                        }),
                    };
                    out.push_str(&r);
                }
                i += len;
                continue;
            }
            let ch = text[i..].chars().next().unwrap_or('\0');
            out.push(ch);
            i += ch.len_utf8().max(1);
        }
        match self.hostname.clone() {
            Some(h) => replace_word(&out, &h, "redacted-host"),
            None => out,
        }
    }
}

fn is_hexish(c: u8) -> bool {
    c.is_ascii_hexdigit() || c == b':'
}

enum IdKind {
    Mac,
    Guid,
    Gid,
}

/// Groups of hex digits separated by ':' with the given group widths.
fn hex_groups(b: &[u8], groups: usize, width: usize) -> Option<usize> {
    let mut i = 0;
    for g in 0..groups {
        for _ in 0..width {
            if !b.get(i).is_some_and(|c| c.is_ascii_hexdigit()) {
                return None;
            }
            i += 1;
        }
        if g + 1 < groups {
            if b.get(i) != Some(&b':') {
                return None;
            }
            i += 1;
        }
    }
    // Must not continue as a longer id.
    if b.get(i).is_some_and(|c| is_hexish(*c)) {
        return None;
    }
    Some(i)
}

fn match_id(b: &[u8], at_boundary: bool) -> Option<(usize, IdKind)> {
    if !at_boundary {
        return None;
    }
    if let Some(n) = hex_groups(b, 8, 4) {
        return Some((n, IdKind::Gid));
    }
    if let Some(n) = hex_groups(b, 4, 4) {
        return Some((n, IdKind::Guid));
    }
    hex_groups(b, 6, 2).map(|n| (n, IdKind::Mac))
}

fn replace_word(text: &str, word: &str, with: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find(word) {
        let before = rest[..pos].chars().next_back();
        let after = rest[pos + word.len()..].chars().next();
        let boundary =
            |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '-' || c == '_'));
        out.push_str(&rest[..pos]);
        if boundary(before) && boundary(after) {
            out.push_str(with);
        } else {
            out.push_str(word);
        }
        rest = &rest[pos + word.len()..];
    }
    out.push_str(rest);
    out
}

/// Zero the serial number of a PCIe Device Serial Number capability (extended cap 0x0003).
pub fn redact_config_dsn(config: &[u8]) -> Vec<u8> {
    let mut out = config.to_vec();
    let mut off = 0x100usize;
    for _ in 0..64 {
        if off + 4 > out.len() {
            break;
        }
        let hdr = u32::from_le_bytes([out[off], out[off + 1], out[off + 2], out[off + 3]]);
        if hdr == 0 || hdr == 0xffff_ffff {
            break;
        }
        if hdr & 0xffff == 0x0003 && off + 12 <= out.len() {
            out[off + 4..off + 12].fill(0);
        }
        let next = ((hdr >> 20) & 0xffc) as usize;
        if next < 0x100 || next <= off {
            break;
        }
        off = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_guids_hostname() {
        let mut r = Redactor::new(Some("lab-gpu-7".into()));
        let t = r.redact_text("lab-gpu-7 eth 3c:ec:ef:12:34:56 guid 0c42:a103:0065:f5ea bus 0000:01:00.0 3c:ec:ef:12:34:56\n");
        assert!(!t.contains("3c:ec:ef"), "{t}");
        assert!(!t.contains("0c42:a103"), "{t}");
        assert!(!t.contains("lab-gpu-7"), "{t}");
        assert!(t.contains("0000:01:00.0"), "PCI address kept: {t}");
        // consistent
        assert_eq!(t.matches("02:00:00:00:00:01").count(), 2, "{t}");
        assert_eq!(r.redact_text("00:00:00:00:00:00"), "00:00:00:00:00:00");
    }

    #[test]
    fn gid() {
        let mut r = Redactor::new(None);
        let t = r.redact_text("fe80:0000:0000:0000:0e42:a1ff:fe65:f5ea");
        assert_eq!(t, "fe80:0000:0000:0000:0200:0000:0000:0001");
    }

    #[test]
    fn dsn_zeroed() {
        let mut cfg = vec![0u8; 4096];
        cfg[0x100..0x104].copy_from_slice(&(0x0003u32 | (0x1 << 16)).to_le_bytes());
        cfg[0x104..0x10c].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let out = redact_config_dsn(&cfg);
        assert_eq!(&out[0x104..0x10c], &[0; 8]);
    }

    #[test]
    fn hostname_words_only() {
        assert_eq!(replace_word("vm vmalloc vm.", "vm", "X"), "X vmalloc X.");
    }
}
