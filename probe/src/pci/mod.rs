//! The PCI tree, read from sysfs alone.
//!
//! Every device is a link in `/sys/bus/pci/devices` to its place in `/sys/devices`, whose path
//! spells out the bridges above it (`pci0000:00/0000:00:01.0/0000:01:00.0/...`): parents come
//! from that path, not from bus-number arithmetic, so multi-domain hosts (DGX Spark's 0000 and
//! 0002, IGX's 0005) and 5-digit VMD domains (`10000:e0:1d.0`) need no special case.
//!
//! Basic identity (class, ids, driver) comes from one `uevent` read per device; the costlier
//! details (config space, link attributes, AER, IOMMU group) are read for GPUs, network and
//! storage devices and the bridges above them, which is what the checks and `topo` look at.

pub mod config;
pub mod devdir;
pub mod ids;
pub mod lspci;
pub mod nic;
pub mod ports;
pub mod topo;

use crate::cpulist::{parse_cpulist, CpuSet};
use crate::host::{Host, ReadError};
use serde::{Serialize, Serializer};
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;

pub use config::{ConfigSpace, PortType, Visibility};

const PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// A PCI function address. The domain is 32 bits: Intel VMD exposes `10000:` and wider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PciAddr {
    pub domain: u32,
    pub bus: u8,
    pub dev: u8,
    pub func: u8,
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.dev, self.func
        )
    }
}

impl Serialize for PciAddr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `DDDD:BB:DD.F` (domain of 4 to 8 hex digits) or `BB:DD.F` (domain 0).
impl FromStr for PciAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not a PCI address (expected DDDD:BB:DD.F)");
        let s2 = s.trim();
        let (head, func) = s2.rsplit_once('.').ok_or_else(bad)?;
        let parts: Vec<&str> = head.split(':').collect();
        let (dom, bus, dev) = match parts.as_slice() {
            [d, b, v] => (*d, *b, *v),
            [b, v] => ("0", *b, *v),
            _ => return Err(bad()),
        };
        if dom.is_empty() || dom.len() > 8 || bus.len() != 2 || dev.len() != 2 || func.len() != 1 {
            return Err(bad());
        }
        let domain = u32::from_str_radix(dom, 16).map_err(|_| bad())?;
        let bus = u8::from_str_radix(bus, 16).map_err(|_| bad())?;
        let dev = u8::from_str_radix(dev, 16).map_err(|_| bad())?;
        let func = u8::from_str_radix(func, 16).map_err(|_| bad())?;
        if dev > 0x1f || func > 7 {
            return Err(bad());
        }
        Ok(PciAddr {
            domain,
            bus,
            dev,
            func,
        })
    }
}

/// A `pciDDDD:BB` directory in /sys/devices: a host bridge (root complex or VMD domain).
pub fn parse_host_bridge(name: &str) -> Option<(u32, u8)> {
    let rest = name.strip_prefix("pci")?;
    let (d, b) = rest.split_once(':')?;
    if d.is_empty() || d.len() > 8 || b.len() != 2 {
        return None;
    }
    Some((
        u32::from_str_radix(d, 16).ok()?,
        u8::from_str_radix(b, 16).ok()?,
    ))
}

/// sysfs link speed (`16.0 GT/s PCIe`, `8 GT/s`, `Unknown`) in GT/s.
pub fn parse_link_speed(s: &str) -> Option<f32> {
    let tok = s.split_whitespace().next()?;
    let v: f32 = tok.parse().ok()?;
    if v > 0.0 && v.is_finite() {
        Some(v)
    } else {
        None
    }
}

/// PCIe generation for a per-lane rate.
pub fn generation(gts: f32) -> Option<u8> {
    let g = match gts {
        x if (x - 2.5).abs() < 0.01 => 1,
        x if (x - 5.0).abs() < 0.01 => 2,
        x if (x - 8.0).abs() < 0.01 => 3,
        x if (x - 16.0).abs() < 0.01 => 4,
        x if (x - 32.0).abs() < 0.01 => 5,
        x if (x - 64.0).abs() < 0.01 => 6,
        _ => return None,
    };
    Some(g)
}

/// Usable bandwidth in GB/s per direction after line coding (8b/10b for Gen1-2,
/// 128b/130b for Gen3-5, FLIT for Gen6).
pub fn bandwidth_gbs(gts: f32, width: u32) -> f64 {
    let eff = match generation(gts) {
        Some(1) | Some(2) => 0.8,
        Some(6) => 242.0 / 256.0,
        _ => 128.0 / 130.0,
    };
    gts as f64 * eff / 8.0 * width as f64
}

/// Data Gb/s a PCIe link of `gts` GT/s x `lanes` carries in memory-write TLPs of 256 bytes:
/// line coding 8b/10b below 8 GT/s, 128b/130b from 8 GT/s (Gen6's FLIT mode is counted the
/// same), and 26 bytes per TLP (16 of header with 64-bit addresses, 6 of sequence number and
/// LCRC, 4 of framing). Flow-control and ACK DLLPs are not counted, so the figure is an upper
/// bound: a Gen5 x4 link gives 114.4 Gb/s, where DGX Spark's ConnectX-7 reaches "slightly over
/// 100 Gb/s" on a 200G cable (seed 002). What the NIC can move across its link, whatever its
/// port's line rate: the self-test's reference and `pcie.capacity` both use it.
pub fn payload_gbps(gts: f64, lanes: u32) -> f64 {
    let coding = if gts >= 8.0 { 128.0 / 130.0 } else { 0.8 };
    gts * f64::from(lanes) * coding * 256.0 / 282.0
}

/// `Gen4 x16 (31.5 GB/s)`.
pub fn link_label(gts: Option<f32>, width: Option<u32>) -> String {
    match (gts, width) {
        (Some(s), Some(w)) if w > 0 => {
            let g = generation(s)
                .map(|g| format!("Gen{g}"))
                .unwrap_or(format!("{s} GT/s"));
            format!("{g} x{w} ({:.1} GB/s)", bandwidth_gbs(s, w))
        }
        (Some(s), _) => generation(s)
            .map(|g| format!("Gen{g}"))
            .unwrap_or(format!("{s} GT/s")),
        (None, Some(w)) if w > 0 => format!("x{w}"),
        _ => "unknown".into(),
    }
}

/// Link state from the sysfs attributes, readable without root.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LinkAttrs {
    pub cur_speed_gts: Option<f32>,
    pub cur_width: Option<u32>,
    pub max_speed_gts: Option<f32>,
    pub max_width: Option<u32>,
}

impl LinkAttrs {
    pub fn is_known(&self) -> bool {
        self.max_speed_gts.is_some() || self.max_width.is_some()
    }
}

/// AER counters from `aer_dev_correctable`, `aer_dev_nonfatal`, `aer_dev_fatal`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AerCounts {
    pub correctable: Option<u64>,
    pub nonfatal: Option<u64>,
    pub fatal: Option<u64>,
}

impl AerCounts {
    pub fn is_known(&self) -> bool {
        self.correctable.is_some() || self.nonfatal.is_some() || self.fatal.is_some()
    }
}

/// Total of an `aer_dev_*` file: the `TOTAL_ERR_*` line, else the sum of the per-error lines.
pub fn parse_aer_total(text: &str) -> Option<u64> {
    let mut sum: Option<u64> = None;
    for l in text.lines() {
        let mut it = l.split_whitespace();
        let (Some(name), Some(val)) = (it.next(), it.next()) else {
            continue;
        };
        let Ok(v) = val.parse::<u64>() else { continue };
        if name.starts_with("TOTAL_ERR") {
            return Some(v);
        }
        sum = Some(sum.unwrap_or(0).saturating_add(v));
    }
    sum
}

/// Key=value lines of a sysfs `uevent` file.
pub fn parse_uevent(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn parse_hex_u32(s: &str) -> Option<u32> {
    let s = s.trim();
    let s = s.strip_prefix("0x").unwrap_or(s);
    u32::from_str_radix(s, 16).ok()
}

/// Normalise `base/target` lexically (sysfs directories are never symlinks themselves).
fn join_link(base: &str, target: &str) -> String {
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        base.split('/').filter(|s| !s.is_empty()).collect()
    };
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Where a device sits: its host bridge and the PCI functions above it, from its sysfs path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreePlace {
    pub host_bridge: String,
    /// The functions from the root port down to the device itself.
    pub chain: Vec<PciAddr>,
}

pub fn parse_device_path(path: &str) -> Option<TreePlace> {
    let rest = path.strip_prefix("/sys/devices/")?;
    let mut host_bridge = None;
    let mut chain = Vec::new();
    for c in rest.split('/') {
        if parse_host_bridge(c).is_some() {
            host_bridge = Some(c.to_string());
            chain.clear();
        } else if let Ok(a) = c.parse::<PciAddr>() {
            chain.push(a);
        }
    }
    if chain.is_empty() {
        return None;
    }
    Some(TreePlace {
        host_bridge: host_bridge.unwrap_or_else(|| "unknown".into()),
        chain,
    })
}

/// One PCI function.
#[derive(Debug, Clone, Serialize)]
pub struct PciDevice {
    pub addr: PciAddr,
    /// The device's directory under /sys/devices (host path).
    pub sysfs: String,
    pub host_bridge: String,
    pub parent: Option<PciAddr>,
    pub class: u32,
    pub vendor: u16,
    pub device: u16,
    pub subsystem_vendor: Option<u16>,
    pub subsystem_device: Option<u16>,
    pub driver: Option<String>,
    pub vendor_name: String,
    pub device_name: String,
    /// Whether the details below were read (GPUs, NICs, NVMe, bridges above them).
    pub detailed: bool,
    /// Raw sysfs value; -1 means the firmware gave no affinity.
    pub numa_node: Option<i32>,
    pub local_cpus: Option<CpuSet>,
    pub link: LinkAttrs,
    pub is_vf: bool,
    pub physfn: Option<PciAddr>,
    pub sriov_totalvfs: Option<u32>,
    pub sriov_numvfs: Option<u32>,
    pub iommu_group: Option<u32>,
    /// `identity`, `DMA`, `DMA-FQ`, `blocked`, ...
    pub iommu_type: Option<String>,
    pub aer: AerCounts,
    /// Bytes of config space that could be read (64 without root on a live host).
    pub config_len: usize,
    pub config: Option<ConfigSpace>,
    pub config_error: Option<String>,
}

pub const CLASS_ETHERNET: u32 = 0x0200;
pub const CLASS_INFINIBAND: u32 = 0x0207;
pub const CLASS_VGA: u32 = 0x0300;
pub const CLASS_3D: u32 = 0x0302;
pub const CLASS_NVME: u32 = 0x0108;
pub const CLASS_PCI_BRIDGE: u32 = 0x0604;

impl PciDevice {
    /// Base class and subclass.
    pub fn class16(&self) -> u32 {
        self.class >> 8
    }
    pub fn is_bridge(&self) -> bool {
        self.class16() == CLASS_PCI_BRIDGE
    }
    pub fn is_nvidia_gpu(&self) -> bool {
        self.vendor == ids::VENDOR_NVIDIA && matches!(self.class16(), CLASS_VGA | CLASS_3D)
    }
    pub fn is_network(&self) -> bool {
        self.class >> 16 == 0x02
    }
    pub fn is_connectx(&self) -> bool {
        self.vendor == ids::VENDOR_MELLANOX
            && matches!(self.class16(), CLASS_ETHERNET | CLASS_INFINIBAND)
    }
    pub fn is_nvme(&self) -> bool {
        self.class16() == CLASS_NVME
    }
    /// NUMA node when the firmware reported one.
    pub fn numa(&self) -> Option<u32> {
        self.numa_node.and_then(|n| u32::try_from(n).ok())
    }
    pub fn pcie(&self) -> Option<&config::PcieCap> {
        self.config.as_ref().and_then(|c| c.pcie.as_ref())
    }
    pub fn port_type(&self) -> Option<PortType> {
        self.pcie().map(|p| p.port_type)
    }
    /// Max link as LnkCap says, else the sysfs attributes (same source in the kernel).
    pub fn max_link(&self) -> (Option<f32>, Option<u32>) {
        let (mut s, mut w) = (self.link.max_speed_gts, self.link.max_width);
        if let Some(p) = self.pcie() {
            s = s.or(config::speed_gts(p.link_cap_speed));
            w = w.or(Some(p.link_cap_width as u32).filter(|w| *w > 0));
        }
        (s, w)
    }
    pub fn cur_link(&self) -> (Option<f32>, Option<u32>) {
        let (mut s, mut w) = (self.link.cur_speed_gts, self.link.cur_width);
        if let Some(p) = self.pcie() {
            s = s.or(config::speed_gts(p.link_sta_speed));
            w = w.or(Some(p.link_sta_width as u32).filter(|w| *w > 0));
        }
        (s, w)
    }
    /// `vendor device` for reports.
    pub fn display_name(&self) -> String {
        format!("{} {}", self.vendor_name, self.device_name)
    }
    /// The short model name inside brackets, as pci.ids writes it (`ConnectX-7`, `RTX A6000`).
    pub fn short_name(&self) -> String {
        match (self.device_name.rfind('['), self.device_name.rfind(']')) {
            (Some(a), Some(b)) if b > a + 1 => self.device_name[a + 1..b].to_string(),
            _ => self.device_name.clone(),
        }
    }
}

/// The PCI tree of a host.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PciTree {
    pub devices: Vec<PciDevice>,
    #[serde(skip)]
    index: HashMap<PciAddr, usize>,
    /// NUMA nodes the host has (to tell "one node" from "affinity unknown").
    pub numa_nodes: usize,
    /// Where names came from (`/usr/share/misc/pci.ids` or `built-in table`).
    pub names_source: String,
    /// Devices that could not be read, with the reason.
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct ReadOptions {
    /// Read config space, link, AER and IOMMU details for every device, not only those
    /// the checks look at.
    pub detail_all: bool,
}

impl PciTree {
    pub fn get(&self, a: PciAddr) -> Option<&PciDevice> {
        self.index.get(&a).map(|i| &self.devices[*i])
    }
    pub fn children(&self, a: PciAddr) -> impl Iterator<Item = &PciDevice> {
        self.devices.iter().filter(move |d| d.parent == Some(a))
    }
    /// The functions above `a`, from its parent up to the root port.
    pub fn ancestors(&self, a: PciAddr) -> Vec<&PciDevice> {
        let mut out = Vec::new();
        let mut cur = self.get(a).and_then(|d| d.parent);
        while let Some(p) = cur {
            let Some(d) = self.get(p) else { break };
            if out.len() > 64 {
                break;
            }
            out.push(d);
            cur = d.parent;
        }
        out
    }
    pub fn gpus(&self) -> impl Iterator<Item = &PciDevice> {
        self.devices.iter().filter(|d| d.is_nvidia_gpu())
    }
    /// The host has a single NUMA node (so `numa_node = -1` means that node).
    pub fn single_node(&self) -> bool {
        self.numa_nodes <= 1
    }
    pub fn from_devices(devices: Vec<PciDevice>, numa_nodes: usize) -> PciTree {
        let mut t = PciTree {
            devices,
            numa_nodes,
            ..Default::default()
        };
        t.devices.sort_by_key(|d| d.addr);
        t.index = t
            .devices
            .iter()
            .enumerate()
            .map(|(i, d)| (d.addr, i))
            .collect();
        t
    }
}

fn count_numa_nodes(host: &Host) -> usize {
    host.read_dir("/sys/devices/system/node")
        .map(|names| {
            names
                .iter()
                .filter(|n| {
                    n.strip_prefix("node")
                        .is_some_and(|r| r.parse::<u32>().is_ok())
                })
                .count()
        })
        .unwrap_or(0)
}

/// Identity read in the first pass.
struct Basic {
    addr: PciAddr,
    sysfs: String,
    place: Option<TreePlace>,
    class: u32,
    vendor: u16,
    device: u16,
    subsys: Option<(u16, u16)>,
    driver: Option<String>,
}

fn read_basic(host: &Host, name: &str) -> Result<Basic, String> {
    let addr: PciAddr = name.parse()?;
    let link = format!("{PCI_DEVICES}/{name}");
    let bus = devdir::DevDir::new(host, PCI_DEVICES);
    let sysfs = match bus.link_target(name) {
        Some(t) => join_link(PCI_DEVICES, &t),
        None => host.canonical(&link).map_err(|e| e.to_string())?,
    };
    let place = parse_device_path(&sysfs);
    let dir = devdir::DevDir::new(host, &sysfs);
    let ue = dir
        .string("uevent")
        .map(|t| parse_uevent(&t))
        .unwrap_or_default();
    let class = ue
        .get("PCI_CLASS")
        .and_then(|c| parse_hex_u32(c))
        .or_else(|| dir.attr("class").and_then(|c| parse_hex_u32(&c)))
        .ok_or_else(|| format!("{name}: class unreadable"))?;
    let (vendor, device) = match ue.get("PCI_ID").and_then(|s| s.split_once(':')) {
        Some((v, d)) => (parse_hex_u32(v), parse_hex_u32(d)),
        None => (
            dir.attr("vendor").and_then(|c| parse_hex_u32(&c)),
            dir.attr("device").and_then(|c| parse_hex_u32(&c)),
        ),
    };
    let (Some(vendor), Some(device)) = (vendor, device) else {
        return Err(format!("{name}: vendor/device unreadable"));
    };
    let subsys = ue.get("PCI_SUBSYS_ID").and_then(|s| {
        let (v, d) = s.split_once(':')?;
        Some((parse_hex_u32(v)? as u16, parse_hex_u32(d)? as u16))
    });
    let driver = ue
        .get("DRIVER")
        .cloned()
        .or_else(|| dir.link_basename("driver"));
    Ok(Basic {
        addr,
        sysfs,
        place,
        class,
        vendor: vendor as u16,
        device: device as u16,
        subsys,
        driver,
    })
}

fn read_detail(host: &Host, d: &mut PciDevice) {
    let dir = devdir::DevDir::new(host, &d.sysfs);
    d.detailed = true;
    if let Some(pf) = dir.link_basename("physfn") {
        d.is_vf = true;
        d.physfn = pf.parse().ok();
    }
    // A VF sits where its PF sits; hosts with SR-IOV have hundreds, so their NUMA attributes
    // are taken from the PF (filled in by read_pci) rather than read again.
    if !(d.is_vf && d.physfn.is_some()) {
        d.numa_node = dir.attr("numa_node").and_then(|s| s.parse().ok());
        d.local_cpus = dir
            .attr("local_cpulist")
            .and_then(|s| parse_cpulist(&s, None).ok());
    }
    d.iommu_group = dir
        .link_basename("iommu_group")
        .and_then(|s| s.parse().ok());
    if d.iommu_group.is_some() {
        d.iommu_type = host.read_attr(&dir.host_path("iommu_group/type")).ok();
    }
    // A VF has no link of its own, no AER reporting and a reserved MRRS: its PF speaks for it.
    if d.is_vf {
        return;
    }
    d.link = LinkAttrs {
        cur_speed_gts: dir
            .attr("current_link_speed")
            .and_then(|s| parse_link_speed(&s)),
        cur_width: dir
            .attr("current_link_width")
            .and_then(|s| s.parse().ok())
            .filter(|w| *w > 0),
        max_speed_gts: dir
            .attr("max_link_speed")
            .and_then(|s| parse_link_speed(&s)),
        max_width: dir
            .attr("max_link_width")
            .and_then(|s| s.parse().ok())
            .filter(|w| *w > 0),
    };
    d.sriov_totalvfs = dir.attr("sriov_totalvfs").and_then(|s| s.parse().ok());
    d.sriov_numvfs = dir.attr("sriov_numvfs").and_then(|s| s.parse().ok());
    let aer = |f: &str| dir.string(f).and_then(|t| parse_aer_total(&t));
    d.aer = AerCounts {
        correctable: aer("aer_dev_correctable"),
        nonfatal: aer("aer_dev_nonfatal"),
        fatal: aer("aer_dev_fatal"),
    };
    match dir.config_space("config") {
        Ok(bytes) => {
            d.config_len = bytes.len();
            match config::decode(&bytes) {
                Ok(c) => d.config = Some(c),
                Err(e) => d.config_error = Some(e.to_string()),
            }
        }
        Err(e) => d.config_error = Some(e),
    }
}

/// Read the PCI tree. `Err` only when /sys/bus/pci itself cannot be listed.
pub fn read_pci(host: &Host, opts: ReadOptions) -> Result<PciTree, ReadError> {
    let names = host.read_dir(PCI_DEVICES)?;
    let mut problems = Vec::new();
    let mut basics = Vec::with_capacity(names.len());
    for n in &names {
        match read_basic(host, n) {
            Ok(b) => basics.push(b),
            Err(e) => problems.push(e),
        }
    }
    let wanted_vendors: BTreeSet<u16> = basics.iter().map(|b| b.vendor).collect();
    let mut names_source = "built-in table".to_string();
    let mut pci_ids = None;
    for path in ids::PCI_IDS_PATHS {
        if let Ok(t) = host.read_string(path) {
            pci_ids = Some(ids::PciIds::parse(&t, &wanted_vendors));
            names_source = (*path).to_string();
            break;
        }
    }
    let mut devices: Vec<PciDevice> = basics
        .into_iter()
        .map(|b| {
            let (vendor_name, device_name) = ids::names(pci_ids.as_ref(), b.vendor, b.device);
            let (host_bridge, parent) = match &b.place {
                Some(pl) => (
                    pl.host_bridge.clone(),
                    pl.chain.len().checked_sub(2).map(|i| pl.chain[i]),
                ),
                None => ("unknown".to_string(), None),
            };
            PciDevice {
                addr: b.addr,
                sysfs: b.sysfs,
                host_bridge,
                parent,
                class: b.class,
                vendor: b.vendor,
                device: b.device,
                subsystem_vendor: b.subsys.map(|s| s.0),
                subsystem_device: b.subsys.map(|s| s.1),
                driver: b.driver,
                vendor_name,
                device_name,
                detailed: false,
                numa_node: None,
                local_cpus: None,
                link: LinkAttrs::default(),
                is_vf: false,
                physfn: None,
                sriov_totalvfs: None,
                sriov_numvfs: None,
                iommu_group: None,
                iommu_type: None,
                aer: AerCounts::default(),
                config_len: 0,
                config: None,
                config_error: None,
            }
        })
        .collect();
    // Detail for what the checks judge, and every bridge above it.
    let parents: HashMap<PciAddr, Option<PciAddr>> =
        devices.iter().map(|d| (d.addr, d.parent)).collect();
    let mut want: BTreeSet<PciAddr> = BTreeSet::new();
    for d in &devices {
        if opts.detail_all || d.is_nvidia_gpu() || d.is_network() || d.is_nvme() {
            let mut cur = Some(d.addr);
            let mut hops = 0;
            while let Some(a) = cur {
                if !want.insert(a) || hops > 64 {
                    break;
                }
                hops += 1;
                cur = parents.get(&a).copied().flatten();
            }
        }
    }
    for d in devices.iter_mut().filter(|d| want.contains(&d.addr)) {
        read_detail(host, d);
    }
    let pf_numa: HashMap<PciAddr, (Option<i32>, Option<CpuSet>)> = devices
        .iter()
        .filter(|d| d.detailed && !d.is_vf)
        .map(|d| (d.addr, (d.numa_node, d.local_cpus.clone())))
        .collect();
    for d in devices.iter_mut().filter(|d| d.is_vf) {
        if let Some((n, c)) = d.physfn.and_then(|pf| pf_numa.get(&pf)) {
            d.numa_node = *n;
            d.local_cpus = c.clone();
        }
    }
    let mut t = PciTree::from_devices(devices, count_numa_nodes(host));
    t.names_source = names_source;
    t.problems = problems;
    Ok(t)
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// A detailed device for tree tests.
    pub fn dev(addr: &str, hb: &str, parent: Option<&str>, class: u32, numa: i32) -> PciDevice {
        let vendor = match class >> 8 {
            0x0300 | 0x0302 => ids::VENDOR_NVIDIA,
            0x0200 | 0x0207 => ids::VENDOR_MELLANOX,
            _ => 0x10b5,
        };
        PciDevice {
            addr: addr.parse().expect("addr"),
            sysfs: format!("/sys/devices/{hb}/{addr}"),
            host_bridge: hb.into(),
            parent: parent.map(|p| p.parse().expect("parent")),
            class,
            vendor,
            device: 0x1234,
            subsystem_vendor: None,
            subsystem_device: None,
            driver: None,
            vendor_name: String::new(),
            device_name: String::new(),
            detailed: true,
            numa_node: Some(numa),
            local_cpus: None,
            link: LinkAttrs::default(),
            is_vf: false,
            physfn: None,
            sriov_totalvfs: None,
            sriov_numvfs: None,
            iommu_group: None,
            iommu_type: None,
            aer: AerCounts::default(),
            config_len: 0,
            config: None,
            config_error: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let a: PciAddr = "0005:03:00.1".parse().expect("parse");
        assert_eq!((a.domain, a.bus, a.dev, a.func), (5, 3, 0, 1));
        assert_eq!(a.to_string(), "0005:03:00.1");
        let v: PciAddr = "10000:e0:1d.0".parse().expect("vmd");
        assert_eq!(v.domain, 0x10000);
        assert_eq!(v.to_string(), "10000:e0:1d.0");
        let w: PciAddr = "deadbeef:00:00.0".parse().expect("8 digits");
        assert_eq!(w.domain, 0xdeadbeef);
        assert_eq!("01:00.0".parse::<PciAddr>().expect("short").domain, 0);
        for bad in [
            "",
            "(null)",
            "0000:01:00",
            "0000:01:20.0",
            "0000:01:00.8",
            "123456789:00:00.0",
            "zz:00.0",
            "pci0000:00",
        ] {
            assert!(bad.parse::<PciAddr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn device_paths() {
        let p = parse_device_path(
            "/sys/devices/pci0005:00/0005:00:00.0/0005:01:00.0/0005:02:00.0/0005:03:00.1",
        )
        .expect("place");
        assert_eq!(p.host_bridge, "pci0005:00");
        assert_eq!(p.chain.len(), 4);
        // VMD: the domain behind the VMD endpoint is its own host bridge.
        let p = parse_device_path(
            "/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:1d.0/10000:e1:00.0",
        )
        .expect("vmd");
        assert_eq!(p.host_bridge, "pci10000:e0");
        assert_eq!(
            p.chain.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            vec!["10000:e0:1d.0", "10000:e1:00.0"]
        );
        // Hyper-V style: ACPI components before the host bridge.
        let p = parse_device_path("/sys/devices/LNXSYSTM:00/LNXSYBUS:00/pci7870:00/7870:00:00.0")
            .expect("hv");
        assert_eq!(p.host_bridge, "pci7870:00");
        assert!(parse_device_path("/sys/devices/virtual/net/lo").is_none());
        assert!(parse_device_path("").is_none());
        assert_eq!(
            join_link(
                "/sys/bus/pci/devices",
                "../../../devices/pci0000:00/0000:00:01.0"
            ),
            "/sys/devices/pci0000:00/0000:00:01.0"
        );
    }

    #[test]
    fn speeds_and_labels() {
        assert_eq!(parse_link_speed("16.0 GT/s PCIe"), Some(16.0));
        assert_eq!(parse_link_speed("8 GT/s"), Some(8.0));
        assert_eq!(parse_link_speed("2.5 GT/s PCIe\n"), Some(2.5));
        assert_eq!(parse_link_speed("Unknown"), None);
        assert_eq!(parse_link_speed("2.5 GT/s PCIe"), Some(2.5));
        assert_eq!(parse_link_speed("Unknown"), None);
        assert_eq!(parse_link_speed("Unknown speed"), None);
        assert_eq!(parse_link_speed(""), None);
        assert_eq!(parse_link_speed("NaN GT/s"), None);
        assert_eq!(link_label(Some(16.0), Some(16)), "Gen4 x16 (31.5 GB/s)");
        assert_eq!(link_label(Some(32.0), Some(16)), "Gen5 x16 (63.0 GB/s)");
        assert_eq!(link_label(None, None), "unknown");
    }

    #[test]
    fn aer_files() {
        let t = "RxErr 0\nBadTLP 2\nBadDLLP 1\nTOTAL_ERR_COR 3\n";
        assert_eq!(parse_aer_total(t), Some(3));
        assert_eq!(parse_aer_total("Undefined 0\nDLP 4\n"), Some(4));
        assert_eq!(parse_aer_total(""), None);
        assert_eq!(parse_aer_total("(null)"), None);
    }

    #[test]
    fn uevent() {
        let u = parse_uevent(
            "DRIVER=mlx5_core\nPCI_CLASS=20000\nPCI_ID=15B3:1021\nPCI_SUBSYS_ID=15B3:0023\n",
        );
        assert_eq!(u.get("PCI_ID").map(String::as_str), Some("15B3:1021"));
        assert_eq!(parse_hex_u32("20000"), Some(0x20000));
        assert_eq!(parse_hex_u32("0x020000"), Some(0x20000));
    }
}

#[cfg(test)]
mod live_tests {
    use super::*;

    /// Reads whatever this machine has (virtio in CI); must not fail or panic.
    #[test]
    fn live_host_enumerates() {
        let host = Host::live();
        let Ok(t) = read_pci(&host, ReadOptions { detail_all: true }) else {
            eprintln!("skipped: /sys/bus/pci not readable here");
            return;
        };
        for d in &t.devices {
            assert_eq!(t.get(d.addr).map(|x| x.addr), Some(d.addr));
            assert!(d.detailed);
        }
        let nics = nic::discover_nics(&host, &t);
        for n in &nics {
            eprintln!("{} {} {:?} {:?}", n.label(), n.model, n.driver, n.notes);
        }
        assert!(t.problems.is_empty(), "{:?}", t.problems);
    }
}

/// The PCI tree and the NICs on it: what the PCIe and NIC checks share.
#[derive(Debug, Clone, Serialize)]
pub struct PciFacts {
    pub tree: PciTree,
    pub nics: Vec<nic::NicFunction>,
}

pub fn read_facts(host: &Host) -> Result<PciFacts, ReadError> {
    let tree = read_pci(host, ReadOptions::default())?;
    let nics = nic::discover_nics(host, &tree);
    Ok(PciFacts { tree, nics })
}

#[cfg(test)]
mod prop_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,64}") {
            let _ = s.parse::<PciAddr>();
            let _ = parse_link_speed(&s);
            let _ = parse_aer_total(&s);
            let _ = parse_uevent(&s);
            let _ = parse_device_path(&s);
            let _ = parse_host_bridge(&s);
            let _ = ids::PciIds::parse(&s, &BTreeSet::new());
        }

        #[test]
        fn addresses_round_trip(domain in any::<u32>(), bus in any::<u8>(), dev in 0u8..32, func in 0u8..8) {
            let a = PciAddr { domain, bus, dev, func };
            prop_assert_eq!(a.to_string().parse::<PciAddr>(), Ok(a));
        }

        #[test]
        fn sysfs_paths_give_parents(depth in 1usize..6, domain in 0u32..0x20000) {
            let chain: Vec<PciAddr> = (0..depth)
                .map(|i| PciAddr { domain, bus: i as u8, dev: 0, func: 0 })
                .collect();
            let path = format!(
                "/sys/devices/pci{domain:04x}:00/{}",
                chain.iter().map(|a| a.to_string()).collect::<Vec<_>>().join("/")
            );
            let p = parse_device_path(&path).expect("place");
            prop_assert_eq!(p.chain, chain);
        }
    }
}
