//! Test helpers: add PCI functions (ConnectX PFs and VFs, GPUs) to a host root the way sysfs
//! lays them out, and snapshot a root byte for byte. Shared by the unit tests here and the
//! integration tests (`#[path]`-included), so it depends on std only.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::Path;

fn w(root: &Path, rel: &str, data: &[u8]) {
    let p = root.join(rel.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(&p, data).expect("write");
}

/// A config space of `len` bytes: the header, a PM capability at 0x60 and (when `pcie_at`)
/// a PCI Express endpoint capability with `devctl`.
pub fn config_space(
    vendor: u16,
    device: u16,
    class: u32,
    pcie_at: Option<usize>,
    devctl: u16,
    len: usize,
) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    b[0..2].copy_from_slice(&vendor.to_le_bytes());
    b[2..4].copy_from_slice(&device.to_le_bytes());
    b[0x09] = (class & 0xff) as u8;
    b[0x0a] = ((class >> 8) & 0xff) as u8;
    b[0x0b] = ((class >> 16) & 0xff) as u8;
    b[0x06] = 0x10;
    b[0x34] = 0x60;
    b[0x60] = 0x01;
    b[0x61] = pcie_at.map_or(0, |o| o as u8);
    if let Some(o) = pcie_at {
        b[o] = 0x10;
        b[o + 1] = 0;
        b[o + 2] = 0x02; // version 2, endpoint
        b[o + 4] = 0x02; // DevCap: MPS 512 supported
        b[o + 8..o + 10].copy_from_slice(&devctl.to_le_bytes());
        b[o + 12] = 0x05; // LnkCap: 32 GT/s
        b[o + 13] = 0x01; // x16
    }
    b.truncate(len);
    b
}

pub struct Func<'a> {
    /// Bridges from the root port down (`0005:00:00.0`, ...), then the function.
    pub chain: &'a [&'a str],
    pub bdf: &'a str,
    pub vendor: u16,
    pub device: u16,
    pub class: u32,
    pub driver: &'a str,
    pub config: Vec<u8>,
    /// (netdev, MAC, MTU)
    pub netdev: Option<(&'a str, &'a str, u32)>,
    /// The PF of a VF.
    pub physfn: Option<&'a str>,
}

/// Add one function under `root/sys`, with the bus and class links sysfs has.
pub fn add_function(root: &Path, f: &Func) {
    let dom_bus = &f.chain.first().unwrap_or(&f.bdf)[..7];
    let mut dev_dir = format!("sys/devices/pci{dom_bus}");
    for b in f.chain {
        dev_dir.push('/');
        dev_dir.push_str(b);
    }
    dev_dir.push('/');
    dev_dir.push_str(f.bdf);
    w(
        root,
        &format!("{dev_dir}/vendor"),
        format!("0x{:04x}\n", f.vendor).as_bytes(),
    );
    w(
        root,
        &format!("{dev_dir}/device"),
        format!("0x{:04x}\n", f.device).as_bytes(),
    );
    w(
        root,
        &format!("{dev_dir}/class"),
        format!("0x{:06x}\n", f.class).as_bytes(),
    );
    w(
        root,
        &format!("{dev_dir}/uevent"),
        format!(
            "DRIVER={}\nPCI_CLASS={:X}\nPCI_ID={:04X}:{:04X}\nPCI_SLOT_NAME={}\n",
            f.driver, f.class, f.vendor, f.device, f.bdf
        )
        .as_bytes(),
    );
    w(root, &format!("{dev_dir}/numa_node"), b"0\n");
    w(root, &format!("{dev_dir}/config"), &f.config);
    if let Some(pf) = f.physfn {
        symlink(format!("../{pf}"), root.join(format!("{dev_dir}/physfn"))).expect("physfn link");
    }
    let bus = root.join("sys/bus/pci/devices");
    std::fs::create_dir_all(&bus).expect("mkdir");
    symlink(
        format!("../../../{}", dev_dir.trim_start_matches("sys/")),
        bus.join(f.bdf),
    )
    .expect("bus link");
    if let Some((name, mac, mtu)) = f.netdev {
        let nd = format!("{dev_dir}/net/{name}");
        w(root, &format!("{nd}/mtu"), format!("{mtu}\n").as_bytes());
        w(root, &format!("{nd}/max_mtu"), b"9978\n");
        w(
            root,
            &format!("{nd}/address"),
            format!("{mac}\n").as_bytes(),
        );
        w(root, &format!("{nd}/carrier"), b"1\n");
        w(root, &format!("{nd}/operstate"), b"up\n");
        w(root, &format!("{nd}/ifindex"), b"4\n");
        let class = root.join("sys/class/net");
        std::fs::create_dir_all(&class).expect("mkdir");
        symlink(
            format!("../../{}", nd.trim_start_matches("sys/")),
            class.join(name),
        )
        .expect("class link");
    }
}

/// DevCtl of an untuned ConnectX: MRRS 512, MPS 128, relaxed ordering, no snoop and error
/// reporting enabled (the bits a read-modify-write must keep).
pub const DEVCTL_UNTUNED: u16 = 0x2000 | 0x0800 | 0x0010 | 0x000f;

/// A ConnectX-7 PF.
pub fn connectx<'a>(
    chain: &'a [&'a str],
    bdf: &'a str,
    netdev: Option<(&'a str, &'a str, u32)>,
) -> Func<'a> {
    Func {
        chain,
        bdf,
        vendor: 0x15b3,
        device: 0x1021,
        class: 0x020000,
        driver: "mlx5_core",
        config: config_space(0x15b3, 0x1021, 0x020000, Some(0x70), DEVCTL_UNTUNED, 4096),
        netdev,
        physfn: None,
    }
}

/// The two CX-7 PFs and the RTX GPU of an IGX Orin devkit (seed 000's lspci -tv).
pub fn add_igx_pci(root: &Path) {
    let nic_chain = ["0005:00:00.0", "0005:01:00.0", "0005:02:00.0"];
    add_function(
        root,
        &connectx(
            &nic_chain,
            "0005:03:00.0",
            Some(("cx7_0", "48:b0:2d:f4:07:fb", 1500)),
        ),
    );
    add_function(
        root,
        &connectx(
            &nic_chain,
            "0005:03:00.1",
            Some(("cx7_1", "48:b0:2d:f4:07:fc", 1500)),
        ),
    );
    let gpu_chain = [
        "0005:00:00.0",
        "0005:01:00.0",
        "0005:02:02.0",
        "0005:07:00.0",
        "0005:08:00.0",
    ];
    add_function(
        root,
        &Func {
            chain: &gpu_chain,
            bdf: "0005:09:00.0",
            vendor: 0x10de,
            device: 0x2230,
            class: 0x030000,
            driver: "nvidia",
            config: config_space(0x10de, 0x2230, 0x030000, Some(0x68), 0x2810, 4096),
            netdev: None,
            physfn: None,
        },
    );
}

/// DGX Spark's four CX-7 PFs across two domains (seed 000, Spark tab).
pub fn add_spark_pci(root: &Path) {
    let c0 = ["0000:00:00.0"];
    let c2 = ["0002:00:00.0"];
    add_function(
        root,
        &connectx(
            &c0,
            "0000:01:00.0",
            Some(("enp1s0f0np0", "4c:bb:47:00:00:10", 1500)),
        ),
    );
    add_function(
        root,
        &connectx(
            &c0,
            "0000:01:00.1",
            Some(("enp1s0f1np1", "4c:bb:47:00:00:11", 1500)),
        ),
    );
    add_function(
        root,
        &connectx(
            &c2,
            "0002:01:00.0",
            Some(("enP2p1s0f0np0", "4c:bb:47:00:00:12", 1500)),
        ),
    );
    add_function(
        root,
        &connectx(
            &c2,
            "0002:01:00.1",
            Some(("enP2p1s0f1np1", "4c:bb:47:00:00:13", 1500)),
        ),
    );
}

pub fn devctl(root: &Path, bdf: &str) -> u16 {
    let p = root.join(format!("sys/bus/pci/devices/{bdf}/config"));
    let b = std::fs::read(p).expect("config");
    let mut off = b[0x34] as usize;
    while off != 0 {
        if b[off] == 0x10 {
            return u16::from_le_bytes([b[off + 8], b[off + 9]]);
        }
        off = b[off + 1] as usize;
    }
    panic!("no PCIe capability in {bdf}");
}

/// Every file (content), symlink (target) and directory under `root`, except paths under
/// the `skip` prefixes.
pub fn snapshot(root: &Path, skip: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, skip: &[&str], out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read_dir")
            .filter_map(|e| e.ok())
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let rel = p.strip_prefix(root).expect("prefix").display().to_string();
            if skip
                .iter()
                .any(|s| rel == *s || rel.starts_with(&format!("{s}/")))
            {
                continue;
            }
            let ft = e.file_type().expect("type");
            if ft.is_symlink() {
                out.insert(
                    rel,
                    format!("-> {}", std::fs::read_link(&p).expect("link").display()),
                );
            } else if ft.is_dir() {
                out.insert(rel.clone(), "<dir>".into());
                walk(root, &p, skip, out);
            } else {
                use std::os::unix::fs::PermissionsExt;
                let mode = e
                    .metadata()
                    .map(|m| m.permissions().mode() & 0o7777)
                    .unwrap_or(0);
                let bytes = std::fs::read(&p).expect("read");
                let body = match std::str::from_utf8(&bytes) {
                    Ok(t) if !bytes.contains(&0) => t.to_string(),
                    _ => bytes.iter().map(|b| format!("{b:02x}")).collect(),
                };
                out.insert(rel, format!("{mode:o} {body}"));
            }
        }
    }
    walk(root, root, skip, &mut out);
    out
}

/// Copy a directory tree, keeping symlinks as links.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let ft = e.file_type().expect("type");
        let dst = to.join(e.file_name());
        if ft.is_symlink() {
            symlink(std::fs::read_link(e.path()).expect("link"), &dst).expect("symlink");
        } else if ft.is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).expect("copy");
        }
    }
}

/// The differences between two snapshots, for assertion messages.
pub fn diff_snapshots(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    let mut d = Vec::new();
    for (k, v) in a {
        match b.get(k) {
            None => d.push(format!("removed: {k}")),
            Some(v2) if v2 != v => d.push(format!("changed: {k}\n  before: {v}\n  after:  {v2}")),
            _ => {}
        }
    }
    for k in b.keys() {
        if !a.contains_key(k) {
            d.push(format!("added: {k}"));
        }
    }
    d
}

/// A PCIe bridge's config space: type-1 header, a PCI Express capability of `port_type`
/// (4 root port, 5 switch upstream, 6 switch downstream) and, when given, an ACS extended
/// capability (capability, control) at 0x100.
pub fn bridge_config(port_type: u8, acs: Option<(u16, u16)>) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    b[0..2].copy_from_slice(&0x10b5u16.to_le_bytes());
    b[2..4].copy_from_slice(&0xc010u16.to_le_bytes());
    b[0x0a] = 0x04;
    b[0x0b] = 0x06;
    b[0x0e] = 0x01;
    b[0x06] = 0x10;
    b[0x34] = 0x40;
    b[0x40] = 0x10;
    b[0x41] = 0;
    b[0x42] = 0x02 | (port_type << 4);
    if let Some((cap, ctrl)) = acs {
        let hdr: u32 = 0x000d | (1 << 16);
        b[0x100..0x104].copy_from_slice(&hdr.to_le_bytes());
        b[0x104..0x106].copy_from_slice(&cap.to_le_bytes());
        b[0x106..0x108].copy_from_slice(&ctrl.to_le_bytes());
    }
    b
}

/// The bridges above IGX's CX-7 and GPU (seed 000's lspci -tv): a root port, the on-board
/// switch, and the GPU's second switch. The downstream ports carry ACS with `acs_ctrl`.
pub fn add_igx_bridges(root: &Path, acs_ctrl: u16) {
    let acs = Some((0x007f, acs_ctrl));
    type Bridge<'a> = (&'a [&'a str], &'a str, u8, Option<(u16, u16)>);
    let bridges: [Bridge; 6] = [
        (&[], "0005:00:00.0", 4, Some((0x007f, 0))),
        (&["0005:00:00.0"], "0005:01:00.0", 5, None),
        (&["0005:00:00.0", "0005:01:00.0"], "0005:02:00.0", 6, acs),
        (&["0005:00:00.0", "0005:01:00.0"], "0005:02:02.0", 6, acs),
        (
            &["0005:00:00.0", "0005:01:00.0", "0005:02:02.0"],
            "0005:07:00.0",
            5,
            None,
        ),
        (
            &[
                "0005:00:00.0",
                "0005:01:00.0",
                "0005:02:02.0",
                "0005:07:00.0",
            ],
            "0005:08:00.0",
            6,
            acs,
        ),
    ];
    for (chain, bdf, pt, acs) in bridges {
        if root.join(format!("sys/bus/pci/devices/{bdf}")).exists() {
            continue;
        }
        add_function(
            root,
            &Func {
                chain,
                bdf,
                vendor: 0x10b5,
                device: 0xc010,
                class: 0x060400,
                driver: "pcieport",
                config: bridge_config(pt, acs),
                netdev: None,
                physfn: None,
            },
        );
    }
}

/// Put `bdf` in IOMMU group `group` of `kind` (`identity`, `DMA`, `DMA-FQ`).
pub fn set_iommu(root: &Path, bdf: &str, group: u32, kind: &str) {
    let dev =
        std::fs::canonicalize(root.join(format!("sys/bus/pci/devices/{bdf}"))).expect("device");
    let rel = dev
        .strip_prefix(std::fs::canonicalize(root.join("sys")).expect("sys"))
        .expect("inside sys");
    let ups = "../".repeat(rel.components().count());
    w(
        root,
        &format!("sys/kernel/iommu_groups/{group}/type"),
        format!("{kind}\n").as_bytes(),
    );
    symlink(
        format!("{ups}kernel/iommu_groups/{group}"),
        dev.join("iommu_group"),
    )
    .expect("iommu link");
}

pub fn acs_ctrl(root: &Path, bdf: &str) -> u16 {
    let b = std::fs::read(root.join(format!("sys/bus/pci/devices/{bdf}/config"))).expect("config");
    let mut off = 0x100usize;
    for _ in 0..64 {
        if off < 0x100 || off + 8 > b.len() {
            break;
        }
        let hdr = u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]]);
        if hdr & 0xffff == 0x000d {
            return u16::from_le_bytes([b[off + 6], b[off + 7]]);
        }
        off = (hdr >> 20) as usize;
    }
    panic!("no ACS capability in {bdf}");
}

/// Set every IOMMU group of the root to `kind`.
pub fn set_all_iommu(root: &Path, kind: &str) {
    let dir = root.join("sys/kernel/iommu_groups");
    for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        std::fs::write(e.path().join("type"), format!("{kind}\n")).expect("write type");
    }
}

/// The IGX fixture without its PCI tree: these tests build their own functions.
pub fn igx_root_without_pci() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/igx-untuned"),
        d.path(),
    );
    let _ = std::fs::remove_dir_all(d.path().join("sys/bus"));
    let _ = std::fs::remove_dir_all(d.path().join("sys/class/net"));
    for e in std::fs::read_dir(d.path().join("sys/devices"))
        .expect("sys/devices")
        .flatten()
    {
        if e.file_name().to_string_lossy().starts_with("pci") {
            std::fs::remove_dir_all(e.path()).expect("rm pci");
        }
    }
    d
}

/// An installed daqtune in the root (`/usr/bin/daqtune`, a regular executable file), as the
/// Debian package leaves it: the binary the units and the udev rule a plan writes will run.
pub fn install_daqtune(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let p = root.join("usr/bin/daqtune");
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(&p, b"#!/bin/sh\nexit 0\n").expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}
