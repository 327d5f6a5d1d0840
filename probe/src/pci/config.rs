//! PCI configuration-space decoder.
//!
//! Works on whatever the kernel let us read: 64 bytes (the standard header, all an
//! unprivileged reader gets), 256 bytes (conventional config space, no extended capabilities)
//! or 4096 bytes (PCIe extended config space). Capabilities are always found by walking the
//! list from the pointer at 0x34: the PCIe capability sits at 0x40, 0x60, 0x68, 0x70, 0xac ...
//! depending on the device, so a fixed offset reads unrelated registers on some cards.
//! What cannot be seen is reported as [`Visibility::Hidden`] rather than guessed.

use serde::Serialize;

/// Capability ids (PCI Local Bus spec / PCIe base spec).
pub const CAP_ID_PCIE: u8 = 0x10;
pub const EXT_CAP_ID_AER: u16 = 0x0001;
pub const EXT_CAP_ID_ACS: u16 = 0x000D;

/// Bytes of config space a process without CAP_SYS_ADMIN may read from sysfs.
pub const UNPRIVILEGED_LEN: usize = 64;
pub const CONVENTIONAL_LEN: usize = 256;
pub const EXTENDED_LEN: usize = 4096;

/// Whether a structure is present, absent, or beyond the bytes that could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Visibility {
    Present,
    Absent,
    /// The bytes that would hold it were not readable (short config, usually non-root).
    Hidden,
}

/// PCIe device/port type (PCIe Capabilities register bits 7:4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortType {
    Endpoint,
    LegacyEndpoint,
    RootPort,
    UpstreamPort,
    DownstreamPort,
    PcieToPciBridge,
    PciToPcieBridge,
    RcIntegratedEndpoint,
    RcEventCollector,
    Other(u8),
}

impl PortType {
    pub fn from_bits(v: u8) -> PortType {
        match v {
            0 => PortType::Endpoint,
            1 => PortType::LegacyEndpoint,
            4 => PortType::RootPort,
            5 => PortType::UpstreamPort,
            6 => PortType::DownstreamPort,
            7 => PortType::PcieToPciBridge,
            8 => PortType::PciToPcieBridge,
            9 => PortType::RcIntegratedEndpoint,
            10 => PortType::RcEventCollector,
            o => PortType::Other(o),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            PortType::Endpoint => "Endpoint",
            PortType::LegacyEndpoint => "Legacy Endpoint",
            PortType::RootPort => "Root Port",
            PortType::UpstreamPort => "Upstream Port",
            PortType::DownstreamPort => "Downstream Port",
            PortType::PcieToPciBridge => "PCIe-to-PCI bridge",
            PortType::PciToPcieBridge => "PCI-to-PCIe bridge",
            PortType::RcIntegratedEndpoint => "Root Complex Integrated Endpoint",
            PortType::RcEventCollector => "Root Complex Event Collector",
            PortType::Other(_) => "Unknown type",
        }
    }
    /// Ports that carry ACS redirect controls relevant to peer-to-peer (root and downstream).
    pub fn is_downstream_facing(self) -> bool {
        matches!(self, PortType::RootPort | PortType::DownstreamPort)
    }
}

/// ASPM bits as LnkCap (support) and LnkCtl (enabled) encode them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Aspm {
    pub l0s: bool,
    pub l1: bool,
}

impl Aspm {
    pub fn from_bits(b: u32) -> Aspm {
        Aspm {
            l0s: b & 1 != 0,
            l1: b & 2 != 0,
        }
    }
    pub fn any(self) -> bool {
        self.l0s || self.l1
    }
    pub fn label(self) -> &'static str {
        match (self.l0s, self.l1) {
            (false, false) => "Disabled",
            (true, false) => "L0s",
            (false, true) => "L1",
            (true, true) => "L0s L1",
        }
    }
}

/// The registers of the PCI Express capability this tool reasons about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PcieCap {
    /// Offset of the capability in config space (the `CAP_EXP` of setpci).
    pub offset: usize,
    pub version: u8,
    pub port_type: PortType,
    /// DevCap bits 2:0 as bytes (128 << n).
    pub mps_supported: u32,
    pub devctl: u16,
    /// DevCtl bits 7:5 as bytes.
    pub mps: u32,
    /// DevCtl bits 14:12 as bytes.
    pub mrrs: u32,
    /// LnkCap max link speed code (1 = 2.5 GT/s ... 6 = 64 GT/s) and width.
    pub link_cap_speed: u8,
    pub link_cap_width: u8,
    pub aspm_supported: Aspm,
    pub aspm_enabled: Aspm,
    pub link_sta_speed: u8,
    pub link_sta_width: u8,
    /// LnkCap2 supported-speeds vector (bits 7:1), when the capability is version 2.
    pub link_cap2_speeds: Option<u8>,
}

/// ACS extended capability: capability and control registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Acs {
    pub offset: usize,
    pub cap: u16,
    pub ctrl: u16,
}

pub const ACS_SRC_VALID: u16 = 1 << 0;
pub const ACS_TRANS_BLOCK: u16 = 1 << 1;
pub const ACS_REQ_REDIR: u16 = 1 << 2;
pub const ACS_CMPLT_REDIR: u16 = 1 << 3;
pub const ACS_UPSTREAM_FWD: u16 = 1 << 4;
pub const ACS_EGRESS_CTRL: u16 = 1 << 5;
pub const ACS_DIRECT_TRANS: u16 = 1 << 6;

/// The ACS controls that send peer-to-peer traffic up through the root complex.
pub const ACS_P2P_REDIRECT_MASK: u16 = ACS_REQ_REDIR | ACS_CMPLT_REDIR | ACS_EGRESS_CTRL;

impl Acs {
    /// Names of the redirect controls that are set (ReqRedir, CmpltRedir, EgressCtrl).
    pub fn redirects_enabled(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.ctrl & ACS_REQ_REDIR != 0 {
            v.push("ReqRedir");
        }
        if self.ctrl & ACS_CMPLT_REDIR != 0 {
            v.push("CmpltRedir");
        }
        if self.ctrl & ACS_EGRESS_CTRL != 0 {
            v.push("EgressCtrl");
        }
        v
    }
}

/// A decoded configuration space.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigSpace {
    /// Number of bytes that were available.
    pub len: usize,
    pub vendor: u16,
    pub device: u16,
    /// Base class, subclass, programming interface (24 bits).
    pub class: u32,
    pub header_type: u8,
    /// Secondary and subordinate bus numbers of a bridge (header type 1).
    pub bridge_buses: Option<(u8, u8)>,
    /// Standard capabilities found: (id, offset).
    pub caps: Vec<(u8, usize)>,
    /// Extended capabilities found: (id, offset).
    pub ext_caps: Vec<(u16, usize)>,
    pub pcie: Option<PcieCap>,
    pub pcie_visibility: Visibility,
    pub acs: Option<Acs>,
    pub ext_visibility: Visibility,
    /// What could not be decoded and why (short reads, broken lists).
    pub notes: Vec<String>,
}

/// Why bytes are not a config space at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("config space is {0} bytes; at least 64 are needed for the header")]
    TooShort(usize),
    #[error("config space reads all ones (device gone, powered off or in reset)")]
    AllOnes,
}

fn rd8(b: &[u8], off: usize) -> Option<u8> {
    b.get(off).copied()
}
fn rd16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes([*b.get(off)?, *b.get(off + 1)?]))
}
fn rd32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes([
        *b.get(off)?,
        *b.get(off + 1)?,
        *b.get(off + 2)?,
        *b.get(off + 3)?,
    ]))
}

/// Walk the standard capability list. Returns the capabilities found, whether the walk ran
/// into unreadable bytes, and a note when the list is malformed.
fn walk_caps(b: &[u8]) -> (Vec<(u8, usize)>, bool, Option<String>) {
    let mut caps = Vec::new();
    let status = rd16(b, 0x06).unwrap_or(0);
    if status & 0x10 == 0 {
        return (caps, false, None);
    }
    let header_type = rd8(b, 0x0e).unwrap_or(0) & 0x7f;
    let ptr_off = if header_type == 2 { 0x14 } else { 0x34 };
    let mut ptr = match rd8(b, ptr_off) {
        Some(p) => (p & 0xfc) as usize,
        None => return (caps, true, None),
    };
    // 48 is the most capabilities that fit in 192 bytes; more means a loop.
    for _ in 0..48 {
        if ptr == 0 {
            return (caps, false, None);
        }
        if ptr < 0x40 {
            return (
                caps,
                false,
                Some(format!(
                    "capability pointer 0x{ptr:02x} points into the header"
                )),
            );
        }
        if ptr + 1 >= b.len() {
            return (caps, true, None);
        }
        let id = b[ptr];
        if id == 0xff {
            return (
                caps,
                false,
                Some(format!("capability at 0x{ptr:02x} reads 0xff")),
            );
        }
        caps.push((id, ptr));
        ptr = (b[ptr + 1] & 0xfc) as usize;
    }
    (caps, false, Some("capability list loops".into()))
}

/// Walk the extended capability list from 0x100.
fn walk_ext_caps(b: &[u8]) -> (Vec<(u16, usize)>, Option<String>) {
    let mut caps = Vec::new();
    let mut off = 0x100usize;
    // (4096 - 256) / 4 headers at most.
    for _ in 0..960 {
        let Some(hdr) = rd32(b, off) else {
            return (
                caps,
                Some(format!(
                    "extended capability at 0x{off:03x} is beyond the readable bytes"
                )),
            );
        };
        if hdr == 0 || hdr == 0xffff_ffff {
            return (caps, None);
        }
        let id = (hdr & 0xffff) as u16;
        caps.push((id, off));
        let next = ((hdr >> 20) & 0xffc) as usize;
        if next == 0 {
            return (caps, None);
        }
        if next < 0x100 {
            return (
                caps,
                Some(format!(
                    "extended capability pointer 0x{next:03x} is below 0x100"
                )),
            );
        }
        off = next;
    }
    (caps, Some("extended capability list loops".into()))
}

/// Config space as [`decode`] needs it, read a few registers at a time instead of whole.
///
/// Every dword of config space read through sysfs is one access to the device: a bus cycle on
/// bare metal, a trap to the hypervisor in a VM (a passthrough H100's 4 KiB took 23 ms to
/// read whole, docs/performance.md). The decoders look at the standard header and capability
/// list (the first 256 bytes), at each extended capability's header, and at the ACS
/// capability's two registers: so those are read (`read_at(offset, len)` returns what the
/// device shows there, fewer bytes past its end), placed at their offsets in a buffer of
/// `size` bytes, zero elsewhere. A device that shows fewer than 256 bytes (no root: 64) or
/// has no extended space comes back as read. Returns the buffer and how many bytes were read.
pub fn read_sparse(
    size: usize,
    read_at: &mut dyn FnMut(usize, usize) -> std::io::Result<Vec<u8>>,
) -> std::io::Result<(Vec<u8>, usize)> {
    let head = read_at(0, size.min(CONVENTIONAL_LEN))?;
    let mut read = head.len();
    if head.len() < CONVENTIONAL_LEN || size <= CONVENTIONAL_LEN {
        return Ok((head, read));
    }
    let size = size.min(EXTENDED_LEN);
    let mut buf = vec![0u8; size];
    buf[..head.len()].copy_from_slice(&head);
    let place = |buf: &mut Vec<u8>, off: usize, bytes: &[u8]| {
        buf[off..off + bytes.len()].copy_from_slice(bytes);
    };
    let mut off = CONVENTIONAL_LEN;
    let mut seen = std::collections::BTreeSet::new();
    // The same bound as the decoder's walk: (4096 - 256) / 4 headers.
    while off + 4 <= size && seen.insert(off) && seen.len() <= 960 {
        let hdr = read_at(off, 4)?;
        read += hdr.len();
        if hdr.len() < 4 {
            // The device shows less than it reports: what a whole read would have returned.
            buf.truncate(off + hdr.len());
            place(&mut buf, off, &hdr);
            break;
        }
        place(&mut buf, off, &hdr);
        let h = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
        if h == 0 || h == 0xffff_ffff {
            break;
        }
        if (h & 0xffff) as u16 == EXT_CAP_ID_ACS && off + 8 <= size {
            let regs = read_at(off + 4, 4)?;
            read += regs.len();
            place(&mut buf, off + 4, &regs);
        }
        let next = ((h >> 20) & 0xffc) as usize;
        if next < CONVENTIONAL_LEN {
            break;
        }
        off = next;
    }
    Ok((buf, read))
}

/// Bytes of a DevCap/DevCtl payload-size field. Codes 6 and 7 are reserved: they decode to
/// 8192 and 16384, which no check accepts (clamping them to 4096 let a corrupt or
/// misprogrammed field pass as the wanted value). [`is_reserved_payload`] names them.
fn payload_bytes(code: u32) -> u32 {
    128u32 << code.min(7)
}

/// Whether a decoded payload size came from a reserved encoding (above 4096).
pub fn is_reserved_payload(bytes: u32) -> bool {
    bytes > 4096
}

fn decode_pcie(b: &[u8], off: usize) -> Option<PcieCap> {
    let flags = rd16(b, off + 2)?;
    let devcap = rd32(b, off + 4)?;
    let devctl = rd16(b, off + 8)?;
    let lnkcap = rd32(b, off + 0x0c)?;
    let lnkctl = rd16(b, off + 0x10)?;
    let lnksta = rd16(b, off + 0x12)?;
    let version = (flags & 0xf) as u8;
    // LnkCap2 exists from capability version 2 on; its speeds vector is what lspci prefers.
    let link_cap2_speeds = if version >= 2 {
        rd32(b, off + 0x2c).map(|v| ((v >> 1) & 0x7f) as u8)
    } else {
        None
    };
    Some(PcieCap {
        offset: off,
        version,
        port_type: PortType::from_bits(((flags >> 4) & 0xf) as u8),
        mps_supported: payload_bytes(devcap & 0x7),
        devctl,
        mps: payload_bytes(((devctl >> 5) & 0x7) as u32),
        mrrs: payload_bytes(((devctl >> 12) & 0x7) as u32),
        link_cap_speed: (lnkcap & 0xf) as u8,
        link_cap_width: ((lnkcap >> 4) & 0x3f) as u8,
        aspm_supported: Aspm::from_bits((lnkcap >> 10) & 0x3),
        aspm_enabled: Aspm::from_bits((lnkctl & 0x3) as u32),
        link_sta_speed: (lnksta & 0xf) as u8,
        link_sta_width: ((lnksta >> 4) & 0x3f) as u8,
        link_cap2_speeds,
    })
}

/// Decode config-space bytes. Never panics on any input.
pub fn decode(b: &[u8]) -> Result<ConfigSpace, ConfigError> {
    if b.len() < UNPRIVILEGED_LEN {
        return Err(ConfigError::TooShort(b.len()));
    }
    if b[..4] == [0xff; 4] {
        return Err(ConfigError::AllOnes);
    }
    let vendor = rd16(b, 0).unwrap_or(0);
    let device = rd16(b, 2).unwrap_or(0);
    let class = rd32(b, 0x08).map(|v| v >> 8).unwrap_or(0);
    let header_type = rd8(b, 0x0e).unwrap_or(0);
    let bridge_buses = if header_type & 0x7f == 1 {
        Some((b[0x19], b[0x1a]))
    } else {
        None
    };
    let mut notes = Vec::new();
    let (caps, truncated, note) = walk_caps(b);
    if let Some(n) = note {
        notes.push(n);
    }
    let pcie_off = caps
        .iter()
        .find(|(id, _)| *id == CAP_ID_PCIE)
        .map(|(_, o)| *o);
    let (pcie, pcie_visibility) = match pcie_off {
        Some(off) => match decode_pcie(b, off) {
            Some(p) => (Some(p), Visibility::Present),
            None => {
                notes.push(format!(
                    "PCIe capability at 0x{off:02x} extends beyond the {} readable bytes",
                    b.len()
                ));
                (None, Visibility::Hidden)
            }
        },
        None if truncated => {
            notes.push(format!(
                "capability list continues beyond the {} readable bytes (reading all of config space needs root)",
                b.len()
            ));
            (None, Visibility::Hidden)
        }
        None => (None, Visibility::Absent),
    };
    // Extended config space exists only for PCIe devices; conventional PCI stops at 0xff.
    let (ext_caps, ext_visibility) = if b.len() <= CONVENTIONAL_LEN {
        if pcie_visibility == Visibility::Absent {
            (Vec::new(), Visibility::Absent)
        } else {
            if b.len() == CONVENTIONAL_LEN {
                notes.push(
                    "extended capabilities (0x100 and up) not readable: 256-byte config".into(),
                );
            }
            (Vec::new(), Visibility::Hidden)
        }
    } else {
        let (caps, note) = walk_ext_caps(b);
        if let Some(n) = note {
            notes.push(n);
        }
        (caps, Visibility::Present)
    };
    let acs = ext_caps
        .iter()
        .find(|(id, _)| *id == EXT_CAP_ID_ACS)
        .and_then(|(_, off)| {
            Some(Acs {
                offset: *off,
                cap: rd16(b, off + 4)?,
                ctrl: rd16(b, off + 6)?,
            })
        });
    let ext_visibility = match (ext_visibility, &acs) {
        (Visibility::Present, Some(_)) => Visibility::Present,
        (Visibility::Present, None) => Visibility::Absent,
        (v, _) => v,
    };
    Ok(ConfigSpace {
        len: b.len(),
        vendor,
        device,
        class,
        header_type,
        bridge_buses,
        caps,
        ext_caps,
        pcie,
        pcie_visibility,
        acs,
        ext_visibility,
        notes,
    })
}

impl ConfigSpace {
    /// Whether ACS presence/absence is known (`ext_visibility` speaks about ACS).
    pub fn acs_visibility(&self) -> Visibility {
        self.ext_visibility
    }
}

/// Offset of the Device Control register (PCIe capability + 8), found by walking the
/// capability list. `None` when there is no PCIe capability or it is not readable.
pub fn devctl_offset(config: &[u8]) -> Option<usize> {
    let (caps, _, _) = walk_caps(config);
    let off = caps.iter().find(|(id, _)| *id == CAP_ID_PCIE)?.1 + 8;
    if off + 2 <= config.len() {
        Some(off)
    } else {
        None
    }
}

/// Why an MRRS value cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MrrsError {
    #[error("DevCtl reads 0xffff: the device is gone or in reset; refusing to write")]
    DeviceGone,
    #[error("{0} is not a valid Max Read Request Size (128, 256, 512, 1024, 2048 or 4096)")]
    BadSize(u32),
}

/// Encode an MRRS in bytes into DevCtl bits 14:12.
pub fn mrrs_code(mrrs: u32) -> Option<u16> {
    if !mrrs.is_power_of_two() || !(128..=4096).contains(&mrrs) {
        return None;
    }
    Some((mrrs.trailing_zeros() - 7) as u16)
}

/// Read-modify-write of DevCtl for a new MRRS: only bits 14:12 change. Bit 15 (Initiate
/// Function Level Reset on endpoints, Bridge Configuration Retry Enable on bridges) and every
/// other bit keep their value, so a write never starts an FLR.
pub fn mrrs_rmw(devctl: u16, mrrs: u32) -> Result<u16, MrrsError> {
    if devctl == 0xffff {
        return Err(MrrsError::DeviceGone);
    }
    let code = mrrs_code(mrrs).ok_or(MrrsError::BadSize(mrrs))?;
    Ok((devctl & !0x7000) | (code << 12))
}

/// Link speed code (LnkCap/LnkSta) to GT/s.
pub fn speed_gts(code: u8) -> Option<f32> {
    match code {
        1 => Some(2.5),
        2 => Some(5.0),
        3 => Some(8.0),
        4 => Some(16.0),
        5 => Some(32.0),
        6 => Some(64.0),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {

    #[test]
    fn reserved_payload_codes_are_not_4096() {
        assert_eq!(payload_bytes(5), 4096);
        assert_eq!(payload_bytes(6), 8192);
        assert_eq!(payload_bytes(7), 16384);
        assert!(is_reserved_payload(payload_bytes(6)));
        assert!(!is_reserved_payload(payload_bytes(5)));
    }

    use super::*;
    use proptest::prelude::*;

    /// Build a config space with a capability chain, for tests. `caps` are (id, offset, body).
    pub fn build(
        len: usize,
        vendor: u16,
        device: u16,
        class: u32,
        bridge: bool,
        caps: &[(u8, usize, Vec<u8>)],
        ext: &[(u16, usize, Vec<u8>)],
    ) -> Vec<u8> {
        let mut b = vec![0u8; len.max(4096)];
        b[0..2].copy_from_slice(&vendor.to_le_bytes());
        b[2..4].copy_from_slice(&device.to_le_bytes());
        b[0x09] = (class & 0xff) as u8;
        b[0x0a] = ((class >> 8) & 0xff) as u8;
        b[0x0b] = ((class >> 16) & 0xff) as u8;
        b[0x0e] = if bridge { 1 } else { 0 };
        if !caps.is_empty() {
            b[0x06] = 0x10;
            b[0x34] = caps[0].1 as u8;
        }
        for (i, (id, off, body)) in caps.iter().enumerate() {
            b[*off] = *id;
            b[off + 1] = caps.get(i + 1).map(|c| c.1 as u8).unwrap_or(0);
            b[off + 2..off + 2 + body.len()].copy_from_slice(body);
        }
        for (i, (id, off, body)) in ext.iter().enumerate() {
            let next = ext.get(i + 1).map(|c| c.1).unwrap_or(0) as u32;
            let hdr = (*id as u32) | (1 << 16) | (next << 20);
            b[*off..off + 4].copy_from_slice(&hdr.to_le_bytes());
            b[off + 4..off + 4 + body.len()].copy_from_slice(body);
        }
        b.truncate(len);
        b
    }

    /// PCIe capability body (after id/next): flags, devcap, devctl, devsta, lnkcap, lnkctl, lnksta.
    #[allow(clippy::too_many_arguments)]
    pub fn pcie_body(
        port: u8,
        mps_sup: u32,
        mps: u16,
        mrrs: u16,
        speed: u8,
        width: u8,
        sta_speed: u8,
        sta_width: u8,
    ) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&(2u16 | ((port as u16) << 4)).to_le_bytes());
        v.extend_from_slice(&(mps_sup).to_le_bytes());
        let devctl: u16 = (mps << 5) | (mrrs << 12) | 0x0010;
        v.extend_from_slice(&devctl.to_le_bytes());
        v.extend_from_slice(&0u16.to_le_bytes());
        let lnkcap: u32 = speed as u32 | ((width as u32) << 4) | (3 << 10);
        v.extend_from_slice(&lnkcap.to_le_bytes());
        v.extend_from_slice(&0u16.to_le_bytes());
        let lnksta: u16 = sta_speed as u16 | ((sta_width as u16) << 4);
        v.extend_from_slice(&lnksta.to_le_bytes());
        v
    }

    fn nic_at(off: usize, len: usize) -> Vec<u8> {
        build(
            len,
            0x15b3,
            0x1021,
            0x020000,
            false,
            &[
                (0x01, 0x60, vec![0x03, 0x00]),
                (0x10, off, pcie_body(0, 2, 0, 5, 5, 16, 5, 16)),
                (0x11, 0xb0, vec![]),
            ],
            &[
                (0x0001, 0x100, vec![]),
                (0x000d, 0x148, vec![0x00, 0x00, 0x00, 0x00]),
            ],
        )
    }

    #[test]
    fn pcie_cap_at_0x70_is_found_by_walking() {
        let b = nic_at(0x70, 4096);
        let c = decode(&b).expect("decode");
        let p = c.pcie.expect("pcie");
        assert_eq!(p.offset, 0x70);
        assert_eq!(p.mrrs, 4096);
        assert_eq!(p.mps, 128);
        assert_eq!(p.mps_supported, 512);
        assert_eq!(p.port_type, PortType::Endpoint);
        assert_eq!((p.link_cap_speed, p.link_cap_width), (5, 16));
        assert_eq!(devctl_offset(&b), Some(0x78));
        // A fixed 0x68 offset lands inside the PCIe capability's header, not on DevCtl.
        let fixed = u16::from_le_bytes([b[0x68], b[0x69]]);
        assert_ne!(fixed, p.devctl);
        assert_eq!(
            c.ext_caps.iter().map(|e| e.0).collect::<Vec<_>>(),
            vec![0x0001, 0x000d]
        );
        assert!(c.acs.is_some());
    }

    #[test]
    fn sizes_64_256_4096() {
        let c = decode(&nic_at(0x70, 64)).expect("64");
        assert_eq!(c.pcie_visibility, Visibility::Hidden);
        assert!(c.pcie.is_none());
        assert!(c.notes.iter().any(|n| n.contains("root")), "{:?}", c.notes);
        assert_eq!(c.ext_visibility, Visibility::Hidden);
        let c = decode(&nic_at(0x70, 256)).expect("256");
        assert_eq!(c.pcie_visibility, Visibility::Present);
        assert_eq!(c.ext_visibility, Visibility::Hidden);
        assert!(c.acs.is_none());
        let c = decode(&nic_at(0x70, 4096)).expect("4096");
        assert_eq!(c.ext_visibility, Visibility::Present);
        assert_eq!(devctl_offset(&nic_at(0x70, 64)), None);
    }

    #[test]
    fn no_capabilities_conventional_device() {
        let b = build(256, 0x8086, 0x1234, 0x060000, false, &[], &[]);
        let c = decode(&b).expect("decode");
        assert_eq!(c.pcie_visibility, Visibility::Absent);
        assert_eq!(c.ext_visibility, Visibility::Absent);
        assert_eq!(devctl_offset(&b), None);
    }

    #[test]
    fn garbage_inputs() {
        assert_eq!(decode(&[]), Err(ConfigError::TooShort(0)));
        assert_eq!(decode(b"(null)"), Err(ConfigError::TooShort(6)));
        assert_eq!(decode(&[0xff; 4096]), Err(ConfigError::AllOnes));
        // A self-looping capability list.
        let mut b = vec![0u8; 256];
        b[6] = 0x10;
        b[0x34] = 0x40;
        b[0x40] = 0x05;
        b[0x41] = 0x40;
        let c = decode(&b).expect("decode");
        assert!(c.notes.iter().any(|n| n.contains("loops")));
        // Pointer into the header.
        b[0x34] = 0x08;
        let c = decode(&b).expect("decode");
        assert!(c.notes.iter().any(|n| n.contains("header")));
    }

    #[test]
    fn acs_control() {
        let b = build(
            4096,
            0x10b5,
            0xc010,
            0x060400,
            true,
            &[(0x10, 0x68, pcie_body(6, 1, 1, 2, 5, 16, 5, 16))],
            &[(0x000d, 0x100, vec![0x7f, 0x00, 0x0d, 0x00])],
        );
        let c = decode(&b).expect("decode");
        let a = c.acs.expect("acs");
        assert_eq!(a.ctrl, 0x000d);
        assert_eq!(a.redirects_enabled(), vec!["ReqRedir", "CmpltRedir"]);
        assert_eq!(c.pcie.expect("pcie").port_type, PortType::DownstreamPort);
        assert!(c.bridge_buses.is_some());
    }

    #[test]
    fn mrrs_rmw_touches_only_bits_14_12() {
        assert_eq!(mrrs_rmw(0x2936, 4096), Ok(0x5936));
        assert_eq!(mrrs_rmw(0xa936, 512), Ok(0xa936 & !0x7000 | 0x2000));
        assert_eq!(mrrs_rmw(0xffff, 4096), Err(MrrsError::DeviceGone));
        assert_eq!(mrrs_rmw(0x0000, 3000), Err(MrrsError::BadSize(3000)));
        assert_eq!(mrrs_rmw(0x0000, 8192), Err(MrrsError::BadSize(8192)));
        assert_eq!(mrrs_code(128), Some(0));
        assert_eq!(mrrs_code(4096), Some(5));
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..4200)) {
            let _ = decode(&bytes);
            let _ = devctl_offset(&bytes);
        }

        #[test]
        fn rmw_preserves_other_bits(devctl in any::<u16>(), code in 0u32..6) {
            let mrrs = 128u32 << code;
            match mrrs_rmw(devctl, mrrs) {
                Ok(v) => {
                    prop_assert_eq!(v & !0x7000, devctl & !0x7000);
                    prop_assert_eq!(((v >> 12) & 7) as u32, code);
                }
                Err(e) => prop_assert_eq!(e, MrrsError::DeviceGone),
            }
        }

        #[test]
        fn caps_found_anywhere(off in (0x10usize..0x3b).prop_map(|x| x * 4)) {
            let b = build(256, 0x15b3, 0x1021, 0x020000, false,
                &[(0x10, off, pcie_body(0, 2, 0, 5, 5, 16, 5, 16))], &[]);
            let c = decode(&b).expect("decode");
            prop_assert_eq!(c.pcie.map(|p| p.mrrs), Some(4096));
        }
    }
}
