//! NVIDIA Xid events in kernel log text: `NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off
//! the bus.` The driver names the GPU by domain:bus:device (no function); older drivers leave
//! out the `PCI:` prefix and some leave out the domain. What each code means is policy and
//! lives with the check that judges it.

/// One Xid line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidEvent {
    /// `0000:2b:00` (lower case, domain added where the line has none); `None` when the line
    /// names no PCI address.
    pub bus: Option<String>,
    pub code: u32,
    /// What follows the code, trimmed.
    pub text: String,
}

impl XidEvent {
    /// Whether this event is about the GPU at `pci_bus_id` (`0000:2b:00.0`).
    pub fn is_for(&self, pci_bus_id: &str) -> bool {
        let Some(bus) = &self.bus else { return false };
        let dev = pci_bus_id
            .rsplit_once('.')
            .map_or(pci_bus_id, |(d, _)| d)
            .to_ascii_lowercase();
        dev == *bus
    }
}

/// Every Xid event in `log`, in order. Lines that are not Xid lines, or whose code is not a
/// number, are passed over.
pub fn parse_xid_events(log: &str) -> Vec<XidEvent> {
    log.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<XidEvent> {
    let rest = &line[line.find("NVRM: Xid (")? + "NVRM: Xid (".len()..];
    let (inside, after) = rest.split_once("):")?;
    let after = after.trim_start();
    let digits = after.bytes().take_while(u8::is_ascii_digit).count();
    let code: u32 = after.get(..digits)?.parse().ok()?;
    let text = after[digits..]
        .trim_start_matches(|c: char| c == ',' || c.is_whitespace())
        .trim_end()
        .to_string();
    Some(XidEvent {
        bus: normalize_bus(inside),
        code,
        text,
    })
}

fn normalize_bus(inside: &str) -> Option<String> {
    let s = inside.trim();
    let s = s.strip_prefix("PCI:").unwrap_or(s).to_ascii_lowercase();
    let parts: Vec<&str> = s.split(':').collect();
    let hex = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_hexdigit());
    match parts.as_slice() {
        [d, b, dev] if hex(d) && hex(b) && hex(dev) => {
            Some(format!("{:0>4}:{:0>2}:{:0>2}", d, b, dev))
        }
        [b, dev] if hex(b) && hex(dev) => Some(format!("0000:{:0>2}:{:0>2}", b, dev)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The first three lines as published: NVIDIA/open-gpu-kernel-modules issue 1151 (Xid 79),
    // stas00/ml-engineering compute/accelerator/nvidia/debug.md at 7bc7c30 (Xid 63, a row
    // remap), gist kohsuke/84ce815d (Xid 32, 2015). The fourth is the older drivers' form
    // without the `PCI:` prefix, written here to test that form.
    #[test]
    fn reads_the_published_forms() {
        let log = "NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae\n\
                   NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.\n\
                   NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.\n\
                   NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000005 intr 00008000\n\
                   NVRM: Xid (0000:01:00): 13, Graphics Exception: ESR 0x404600=0x80000002\n\
                   mlx5_core 0000:3b:00.0: something else\n";
        let ev = parse_xid_events(log);
        assert_eq!(ev.len(), 4);
        assert_eq!(ev[0].bus.as_deref(), Some("0000:2b:00"));
        assert_eq!(ev[0].code, 79);
        assert_eq!(ev[0].text, "GPU has fallen off the bus.");
        assert!(ev[0].is_for("0000:2B:00.0"));
        assert!(!ev[0].is_for("0000:2b:01.0"));
        assert_eq!(ev[1].code, 63);
        assert!(ev[1].text.starts_with("pid=1896, Row Remapper"));
        assert_eq!(ev[2].code, 32);
        assert_eq!(ev[3].bus.as_deref(), Some("0000:01:00"));
        assert_eq!(ev[3].code, 13);
    }

    #[test]
    fn garbage_is_passed_over() {
        for line in [
            "NVRM: Xid (",
            "NVRM: Xid (PCI:0000:2b:00)",
            "NVRM: Xid (PCI:0000:2b:00): , text",
            "NVRM: Xid (PCI:zz): 99999999999999999999, text",
            "NVRM: Xid (PCI:0000:2b:00): 7",
        ] {
            let ev = parse_xid_events(line);
            assert!(ev.len() <= 1, "{line}");
            if let Some(e) = ev.first() {
                assert_eq!(e.code, 7, "{line}");
            }
        }
        let odd = parse_xid_events("NVRM: Xid (somewhere): 48, DBE");
        assert_eq!(odd[0].bus, None);
        assert_eq!(odd[0].code, 48);
    }
}
