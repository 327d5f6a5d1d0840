//! Device names: the system's pci.ids database (hwdata or pciutils) read at run time, with a
//! built-in table for the devices this tool reasons about, so that a host without pci.ids
//! (minimal containers, fixture roots) still names its ConnectX NICs and NVIDIA GPUs.
//!
//! The database is 1.3 MB; it is scanned once and only the vendors asked for are kept.

use std::collections::{BTreeSet, HashMap};

/// Where distributions put pci.ids (hwdata first: it is usually newer).
pub const PCI_IDS_PATHS: &[&str] = &[
    "/usr/share/hwdata/pci.ids",
    "/usr/share/misc/pci.ids",
    "/usr/share/pci.ids",
];

pub const VENDOR_MELLANOX: u16 = 0x15b3;
pub const VENDOR_NVIDIA: u16 = 0x10de;

/// Names of the devices daqtune judges: ConnectX generations, BlueField, NVIDIA data-centre
/// and workstation GPUs. IDs from the vendors' public device lists.
const BUILTIN_DEVICES: &[(u16, u16, &str)] = &[
    (0x15b3, 0x1013, "MT27700 Family [ConnectX-4]"),
    (
        0x15b3,
        0x1014,
        "MT27700 Family [ConnectX-4 Virtual Function]",
    ),
    (0x15b3, 0x1015, "MT27710 Family [ConnectX-4 Lx]"),
    (
        0x15b3,
        0x1016,
        "MT27710 Family [ConnectX-4 Lx Virtual Function]",
    ),
    (0x15b3, 0x1017, "MT27800 Family [ConnectX-5]"),
    (
        0x15b3,
        0x1018,
        "MT27800 Family [ConnectX-5 Virtual Function]",
    ),
    (0x15b3, 0x1019, "MT28800 Family [ConnectX-5 Ex]"),
    (
        0x15b3,
        0x101a,
        "MT28800 Family [ConnectX-5 Ex Virtual Function]",
    ),
    (0x15b3, 0x101b, "MT28908 Family [ConnectX-6]"),
    (
        0x15b3,
        0x101c,
        "MT28908 Family [ConnectX-6 Virtual Function]",
    ),
    (0x15b3, 0x101d, "MT2892 Family [ConnectX-6 Dx]"),
    (0x15b3, 0x101e, "ConnectX Family mlx5Gen Virtual Function"),
    (0x15b3, 0x101f, "MT2894 Family [ConnectX-6 Lx]"),
    (0x15b3, 0x1021, "MT2910 Family [ConnectX-7]"),
    (0x15b3, 0x1023, "CX8 Family [ConnectX-8]"),
    (
        0x15b3,
        0xa2d2,
        "MT416842 BlueField integrated ConnectX-5 network controller",
    ),
    (
        0x15b3,
        0xa2d6,
        "MT42822 BlueField-2 integrated ConnectX-6 Dx network controller",
    ),
    (
        0x15b3,
        0xa2dc,
        "MT43244 BlueField-3 integrated ConnectX-7 network controller",
    ),
    (
        0x15b3,
        0xc2d5,
        "MT42822 BlueField-2 SoC Management Interface",
    ),
    (
        0x15b3,
        0xc2d6,
        "MT43244 BlueField-3 SoC Management Interface",
    ),
    (0x10de, 0x1db4, "GV100GL [Tesla V100 PCIe 16GB]"),
    (0x10de, 0x1eb8, "TU104GL [Tesla T4]"),
    (0x10de, 0x20b0, "GA100 [A100 SXM4 40GB]"),
    (0x10de, 0x20b2, "GA100 [A100 SXM4 80GB]"),
    (0x10de, 0x20b5, "GA100 [A100 PCIe 80GB]"),
    (0x10de, 0x20f1, "GA100 [A100 PCIe 40GB]"),
    (0x10de, 0x2230, "GA102GL [RTX A6000]"),
    (0x10de, 0x2231, "GA102GL [RTX A5000]"),
    (0x10de, 0x2236, "GA102GL [A10]"),
    (0x10de, 0x1aef, "GA102 High Definition Audio Controller"),
    (0x10de, 0x2330, "GH100 [H100 SXM5 80GB]"),
    (0x10de, 0x2331, "GH100 [H100 PCIe]"),
    (0x10de, 0x2335, "GH100 [H200 SXM 141GB]"),
    (0x10de, 0x26b1, "AD102GL [RTX 6000 Ada Generation]"),
    (0x10de, 0x26b5, "AD102GL [L40]"),
    (0x10de, 0x26b9, "AD102GL [L40S]"),
    (0x10de, 0x27b8, "AD104GL [L4]"),
];

const BUILTIN_VENDORS: &[(u16, &str)] = &[
    (0x10de, "NVIDIA Corporation"),
    (0x15b3, "Mellanox Technologies"),
    (0x8086, "Intel Corporation"),
    (0x1022, "Advanced Micro Devices, Inc. [AMD]"),
    (0x1af4, "Red Hat, Inc."),
    (0x10b5, "PLX Technology, Inc."),
    (0x1000, "Broadcom / LSI"),
    (0x14e4, "Broadcom Inc. and subsidiaries"),
    (0x144d, "Samsung Electronics Co Ltd"),
    (0x15b7, "Sandisk Corp"),
    (0x10ec, "Realtek Semiconductor Co., Ltd."),
    (0x1b4b, "Marvell Technology Group Ltd."),
    (0x1a03, "ASPEED Technology, Inc."),
];

/// PCI class names for base class + subclass (the upper 16 bits of `class`).
pub fn class_name(class: u32) -> &'static str {
    match class >> 8 {
        0x0100 => "SCSI storage controller",
        0x0104 => "RAID bus controller",
        0x0106 => "SATA controller",
        0x0108 => "Non-Volatile memory controller",
        0x0200 => "Ethernet controller",
        0x0207 => "Infiniband controller",
        0x0280 => "Network controller",
        0x0300 => "VGA compatible controller",
        0x0302 => "3D controller",
        0x0380 => "Display controller",
        0x0403 => "Audio device",
        0x0500 => "RAM memory",
        0x0600 => "Host bridge",
        0x0601 => "ISA bridge",
        0x0604 => "PCI bridge",
        0x0680 => "Bridge",
        0x0800 => "PIC",
        0x0880 => "System peripheral",
        0x0c03 => "USB controller",
        0x0c05 => "SMBus",
        0x1200 => "Processing accelerators",
        0x0b40 => "Co-processor",
        _ => match class >> 16 {
            0x01 => "Mass storage controller",
            0x02 => "Network controller",
            0x03 => "Display controller",
            0x06 => "Bridge",
            0x0c => "Serial bus controller",
            _ => "Device",
        },
    }
}

pub fn builtin_device(vendor: u16, device: u16) -> Option<&'static str> {
    BUILTIN_DEVICES
        .iter()
        .find(|(v, d, _)| *v == vendor && *d == device)
        .map(|(_, _, n)| *n)
}

pub fn builtin_vendor(vendor: u16) -> Option<&'static str> {
    BUILTIN_VENDORS
        .iter()
        .find(|(v, _)| *v == vendor)
        .map(|(_, n)| *n)
}

/// The subset of pci.ids for some vendors.
#[derive(Debug, Clone, Default)]
pub struct PciIds {
    vendors: HashMap<u16, (String, HashMap<u16, String>)>,
}

fn hex16(s: &str) -> Option<u16> {
    if s.len() != 4 {
        return None;
    }
    u16::from_str_radix(s, 16).ok()
}

impl PciIds {
    /// Parse pci.ids text, keeping only `vendors` (all when empty). Unparsable lines are skipped.
    pub fn parse(text: &str, vendors: &BTreeSet<u16>) -> PciIds {
        let mut out = PciIds::default();
        let mut current: Option<u16> = None;
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            // The class section follows all vendors.
            if line.starts_with("C ") {
                break;
            }
            if let Some(rest) = line.strip_prefix('\t') {
                if rest.starts_with('\t') {
                    continue; // subsystem line
                }
                let Some(v) = current else { continue };
                let (id, name) = match rest.split_once("  ") {
                    Some(x) => x,
                    None => continue,
                };
                if let Some(d) = hex16(id.trim()) {
                    if let Some(e) = out.vendors.get_mut(&v) {
                        e.1.insert(d, name.trim().to_string());
                    }
                }
                continue;
            }
            current = None;
            let Some((id, name)) = line.split_once("  ") else {
                continue;
            };
            let Some(v) = hex16(id.trim()) else { continue };
            if vendors.is_empty() || vendors.contains(&v) {
                out.vendors
                    .insert(v, (name.trim().to_string(), HashMap::new()));
                current = Some(v);
            }
        }
        out
    }

    pub fn vendor(&self, vendor: u16) -> Option<&str> {
        self.vendors.get(&vendor).map(|(n, _)| n.as_str())
    }

    pub fn device(&self, vendor: u16, device: u16) -> Option<&str> {
        self.vendors
            .get(&vendor)
            .and_then(|(_, d)| d.get(&device))
            .map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.vendors.is_empty()
    }
}

/// Vendor and device names: pci.ids first, then the built-in table, then the hex ids
/// (`Device 1c00:3450`, as lspci prints unknown devices).
pub fn names(ids: Option<&PciIds>, vendor: u16, device: u16) -> (String, String) {
    let v = ids
        .and_then(|i| i.vendor(vendor))
        .map(String::from)
        .or_else(|| builtin_vendor(vendor).map(String::from))
        .unwrap_or_else(|| format!("Vendor {vendor:04x}"));
    let d = ids
        .and_then(|i| i.device(vendor, device))
        .map(String::from)
        .or_else(|| builtin_device(vendor, device).map(String::from))
        .unwrap_or_else(|| format!("Device {vendor:04x}:{device:04x}"));
    (v, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "# pci.ids sample\n\
10de  NVIDIA Corporation\n\
\t2230  GA102GL [RTX A6000]\n\
\t\t10de 1459  RTX A6000\n\
15b3  Mellanox Technologies\n\
\t1021  MT2910 Family [ConnectX-7]\n\
\tzzzz  broken\n\
1af4  Red Hat, Inc.\n\
\t1000  Virtio network device\n\
C 02  Network controller\n\
\t00  Ethernet controller\n";

    #[test]
    fn parses_wanted_vendors_only() {
        let ids = PciIds::parse(SAMPLE, &[0x15b3u16, 0x10de].into_iter().collect());
        assert_eq!(ids.vendor(0x15b3), Some("Mellanox Technologies"));
        assert_eq!(
            ids.device(0x15b3, 0x1021),
            Some("MT2910 Family [ConnectX-7]")
        );
        assert_eq!(ids.device(0x10de, 0x2230), Some("GA102GL [RTX A6000]"));
        assert_eq!(ids.vendor(0x1af4), None);
        let all = PciIds::parse(SAMPLE, &BTreeSet::new());
        assert_eq!(all.device(0x1af4, 0x1000), Some("Virtio network device"));
    }

    #[test]
    fn garbage_and_empty() {
        assert!(PciIds::parse("", &BTreeSet::new()).is_empty());
        assert!(PciIds::parse("(null)\n\t\t\n\tabcd  x\n", &BTreeSet::new()).is_empty());
    }

    #[test]
    fn fallback_order() {
        assert_eq!(names(None, 0x15b3, 0x1021).1, "MT2910 Family [ConnectX-7]");
        assert_eq!(
            names(None, 0x1c00, 0x3450),
            ("Vendor 1c00".into(), "Device 1c00:3450".into())
        );
        let ids = PciIds::parse(
            "15b3  Mellanox Technologies\n\t1021  From pci.ids\n",
            &BTreeSet::new(),
        );
        assert_eq!(names(Some(&ids), 0x15b3, 0x1021).1, "From pci.ids");
        assert_eq!(class_name(0x020000), "Ethernet controller");
        assert_eq!(class_name(0x020700), "Infiniband controller");
    }

    #[test]
    fn system_database_when_present() {
        for p in PCI_IDS_PATHS {
            if let Ok(t) = std::fs::read_to_string(p) {
                let ids = PciIds::parse(&t, &[VENDOR_MELLANOX].into_iter().collect());
                assert!(ids.device(VENDOR_MELLANOX, 0x1017).is_some(), "{p}");
                return;
            }
        }
        eprintln!("skipped: no pci.ids on this machine");
    }
}
