//! `daqtune import`: captures people already have (an `lspci -vv` paste, an `lspci -t` tree)
//! turned into a host root, the layout `--root` and snapshots use, with a manifest
//! ([`crate::capture::Manifest`], `daqtune/import.json`) of what came from where.
//!
//! Kinds are told by content, never by file name. The parsers are probe's (`&str` in); this
//! module writes what they read where probe's readers look for it: each PCI function under
//! `/sys/devices/pciDDDD:BB/<bridges>/<bdf>` with the sysfs attributes and a `config` file
//! (the hex dump when lspci printed one, else the decoded registers at their offsets), and
//! `/sys/bus/pci/devices/<bdf>` linking to it.

use crate::capture::{DeviceRecord, InputRecord, Manifest, Source, SCHEMA};
use daqtune_probe::pci::lspci::{self, LspciDevice, TreeEntry};
use daqtune_probe::pci::PciAddr;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// Files read from one directory given as a capture.
pub const MAX_FILES: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A capture that cannot be read: the file, the line and what was expected.
    #[error("{file}:{line}: {message}")]
    Bad {
        file: String,
        line: usize,
        message: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}: no capture daqtune reads in it (lspci -vv text, an lspci -t tree)")]
    Nothing(String),
}

fn io(path: &Path, source: std::io::Error) -> ImportError {
    ImportError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// What a file holds, by content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Lspci,
    LspciTree,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Lspci => "lspci -vv",
            Kind::LspciTree => "lspci -t",
        }
    }
}

/// The kind of a capture's text, `None` for anything else.
pub fn detect(text: &str) -> Option<Kind> {
    if lspci::looks_like(text) {
        Some(Kind::Lspci)
    } else if lspci::looks_like_tree(text) {
        Some(Kind::LspciTree)
    } else {
        None
    }
}

/// A capture file's text, bounded: refused whole past [`lspci::MAX_TEXT`], and when not text.
fn read_text(path: &Path) -> Result<String, ImportError> {
    use daqtune_probe::fsutil::{read_regular, FileReadError};
    let bad = |line: usize, message: String| ImportError::Bad {
        file: path.display().to_string(),
        line,
        message,
    };
    let bytes = match read_regular(path, lspci::MAX_TEXT) {
        Ok(b) => b,
        Err(FileReadError::TooLarge { cap }) => {
            return Err(bad(
                1,
                format!("more than {cap} bytes, the most a capture is read to"),
            ))
        }
        Err(FileReadError::Io(e)) => return Err(io(path, e)),
        Err(e) => return Err(io(path, std::io::Error::other(e.to_string()))),
    };
    String::from_utf8(bytes).map_err(|e| {
        let upto = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = upto.iter().filter(|b| **b == b'\n').count() + 1;
        bad(
            line,
            "not UTF-8 text: expected a capture's text output".into(),
        )
    })
}

/// Whether `path` is something `--root` should import rather than open: a file that is not
/// a `.tar.zst` snapshot (by its magic), or a directory with neither `proc/` nor `sys/` that
/// holds a capture.
pub fn is_capture(path: &Path) -> bool {
    if path.is_file() {
        return !is_zstd(path);
    }
    if path.is_dir() && !path.join("proc").is_dir() && !path.join("sys").is_dir() {
        return capture_files(path)
            .map(|v| v.iter().any(|(_, k)| k.is_some()))
            .unwrap_or(false);
    }
    false
}

fn is_zstd(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map(|_| magic == [0x28, 0xb5, 0x2f, 0xfd])
        .unwrap_or(false)
}

/// The regular files of a directory (sorted, at most [`MAX_FILES`]) and their kinds.
fn capture_files(dir: &Path) -> Result<Vec<(PathBuf, Option<Kind>)>, ImportError> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .collect();
    names.sort();
    if names.len() > MAX_FILES {
        return Err(ImportError::Bad {
            file: dir.display().to_string(),
            line: 0,
            message: format!(
                "{} files: more than the {MAX_FILES} read from a capture directory",
                names.len()
            ),
        });
    }
    Ok(names
        .into_iter()
        .map(|p| {
            let k = read_text(&p).ok().and_then(|t| detect(&t));
            (p, k)
        })
        .collect())
}

/// Everything read from the inputs, before anything is written.
#[derive(Default)]
struct Gathered {
    /// Devices from `lspci -vv`, first capture wins; with the file they came from.
    devices: BTreeMap<PciAddr, (LspciDevice, String)>,
    tree: BTreeMap<PciAddr, (TreeEntry, String)>,
    inputs: Vec<InputRecord>,
}

impl Gathered {
    fn add_file(&mut self, path: &Path, explicit: bool) -> Result<(), ImportError> {
        let file = path.display().to_string();
        let text = match read_text(path) {
            Ok(t) => t,
            Err(e) if !explicit => {
                self.inputs.push(InputRecord {
                    file,
                    kind: "none".into(),
                    notes: vec![format!("not read: {e}")],
                    ..Default::default()
                });
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let bad = |e: lspci::LspciError| ImportError::Bad {
            file: file.clone(),
            line: e.line,
            message: e.message,
        };
        let last = text.lines().count();
        match detect(&text) {
            Some(Kind::Lspci) => {
                let cap = lspci::parse(&text).map_err(bad)?;
                let mut produced = Vec::new();
                let mut notes = Vec::new();
                for d in cap.devices {
                    let Some(a) = d.addr else { continue };
                    produced.push(format!("sys/bus/pci/devices/{a}"));
                    if self.devices.contains_key(&a) {
                        notes.push(format!("{a}: also in an earlier capture, which is kept"));
                        continue;
                    }
                    self.devices.insert(a, (d, file.clone()));
                }
                if !cap.ignored.is_empty() {
                    notes.push(format!(
                        "{} line(s) outside any device block ignored (first: line {})",
                        cap.ignored.len(),
                        cap.ignored[0]
                    ));
                }
                self.inputs.push(InputRecord {
                    file,
                    kind: Kind::Lspci.as_str().into(),
                    lines: Some((1, last)),
                    produced,
                    notes,
                });
            }
            Some(Kind::LspciTree) => {
                let entries = lspci::parse_tree(&text).map_err(bad)?;
                let n = entries.len();
                for e in entries {
                    self.tree.entry(e.addr).or_insert((e, file.clone()));
                }
                self.inputs.push(InputRecord {
                    file,
                    kind: Kind::LspciTree.as_str().into(),
                    lines: Some((1, last)),
                    produced: vec![format!(
                        "the parents of {n} functions; bridges not in an lspci -vv capture"
                    )],
                    notes: Vec::new(),
                });
            }
            None if explicit => {
                return Err(ImportError::Bad {
                    file,
                    line: 1,
                    message: "not a capture daqtune reads: expected `lspci -vv` text \
                              (`BB:DD.F Class: Vendor Device` then indented details) or an \
                              `lspci -t` tree (`-[DDDD:BB]-+-DD.F`)"
                        .into(),
                })
            }
            None => self.inputs.push(InputRecord {
                file,
                kind: "none".into(),
                notes: vec!["not a capture daqtune reads; left out".into()],
                ..Default::default()
            }),
        }
        Ok(())
    }
}

/// Import `inputs` (files, or directories of files) into the empty or new directory `out`.
pub fn import(inputs: &[PathBuf], out: &Path) -> Result<Manifest, ImportError> {
    let mut g = Gathered::default();
    for p in inputs {
        if p.is_dir() {
            for (f, _) in capture_files(p)? {
                g.add_file(&f, false)?;
            }
        } else {
            g.add_file(p, true)?;
        }
    }
    if g.devices.is_empty() && g.tree.is_empty() {
        let names: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
        return Err(ImportError::Nothing(names.join(", ")));
    }
    std::fs::create_dir_all(out).map_err(|e| io(out, e))?;
    let devices = write_pci(&g, out)?;
    let mut covers = BTreeSet::new();
    if !g.devices.is_empty() {
        covers.insert(Source::Pci);
    }
    let m = Manifest {
        schema: SCHEMA.into(),
        daqtune_version: env!("CARGO_PKG_VERSION").into(),
        created: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        covers: covers.into_iter().collect(),
        inputs: g.inputs,
        devices,
    };
    let dq = out.join("daqtune");
    std::fs::create_dir_all(&dq).map_err(|e| io(&dq, e))?;
    let mp = dq.join("import.json");
    let text = serde_json::to_string_pretty(&m).unwrap_or_default();
    std::fs::write(&mp, text).map_err(|e| io(&mp, e))?;
    Ok(m)
}

/// A function to write: its lspci block, or a bridge known only from the tree.
struct Node {
    dev: LspciDevice,
    file: String,
    config: &'static str,
    parent: Option<PciAddr>,
    parent_from: &'static str,
}

fn sysfs_speed(code: Option<u8>) -> String {
    match code.and_then(daqtune_probe::pci::config::speed_gts) {
        Some(s) => format!("{s:.1} GT/s PCIe"),
        None => "Unknown".into(),
    }
}

fn write_pci(g: &Gathered, out: &Path) -> Result<Vec<DeviceRecord>, ImportError> {
    let mut nodes: BTreeMap<PciAddr, Node> = BTreeMap::new();
    for (a, (d, file)) in &g.devices {
        let config = if d.hex.len() >= 64 {
            "exact"
        } else {
            "reconstructed"
        };
        nodes.insert(
            *a,
            Node {
                dev: d.clone(),
                file: file.clone(),
                config,
                parent: None,
                parent_from: "none",
            },
        );
    }
    // Bridges above an imported function that only the tree shows: their place is known,
    // their registers are not (64 bytes, capabilities hidden, so no check reads them as absent).
    let mut want: Vec<PciAddr> = nodes.keys().copied().collect();
    let mut seen = BTreeSet::new();
    while let Some(a) = want.pop() {
        if !seen.insert(a) || seen.len() > lspci::MAX_DEVICES {
            continue;
        }
        let Some((e, file)) = g.tree.get(&a) else {
            continue;
        };
        if let Some(p) = e.parent {
            want.push(p);
        }
        if nodes.contains_key(&a) {
            continue;
        }
        let d = LspciDevice {
            addr: Some(a),
            had_domain: true,
            lines: (e.line, e.line),
            class_name: "PCI bridge".into(),
            class16: e.secondary.map(|_| 0x0604),
            description: e.name.clone(),
            bus: e.secondary.map(|s| (a.bus, s, s)),
            caps_denied: true,
            ..Default::default()
        };
        nodes.insert(
            a,
            Node {
                dev: d,
                file: file.clone(),
                config: "unknown",
                parent: None,
                parent_from: "none",
            },
        );
    }
    // Parents: the tree where it shows the function, else the bridge whose secondary bus is
    // the function's bus (the narrowest bus range holding it when no secondary matches).
    let bridges: Vec<(PciAddr, u8, u8)> = nodes
        .iter()
        .filter_map(|(a, n)| n.dev.bus.map(|(_, s, u)| (*a, s, u.max(s))))
        .collect();
    let addrs: Vec<PciAddr> = nodes.keys().copied().collect();
    for a in addrs {
        let (parent, from) = match g.tree.get(&a) {
            Some((e, _)) => (e.parent, "lspci -t tree"),
            None => {
                let exact = bridges
                    .iter()
                    .find(|(b, s, _)| b.domain == a.domain && *s == a.bus && *b != a)
                    .map(|(b, _, _)| *b);
                let p = exact.or_else(|| {
                    bridges
                        .iter()
                        .filter(|(b, s, u)| {
                            b.domain == a.domain
                                && *s <= a.bus
                                && a.bus <= *u
                                && *b != a
                                && b.bus < a.bus
                        })
                        .min_by_key(|(_, s, u)| u - s)
                        .map(|(b, _, _)| *b)
                });
                (
                    p,
                    if p.is_some() {
                        "bridge bus numbers"
                    } else {
                        "none"
                    },
                )
            }
        };
        if let Some(n) = nodes.get_mut(&a) {
            n.parent = parent.filter(|p| *p != a);
            n.parent_from = if n.parent.is_some() { from } else { "none" };
        }
    }
    let mut records = Vec::new();
    let mut numa_nodes = BTreeSet::new();
    for (a, n) in &nodes {
        // The chain from the root bus down, stopping at a loop or an unknown parent.
        let mut chain = vec![*a];
        let mut cur = n.parent;
        while let Some(p) = cur {
            if chain.contains(&p) || chain.len() > 64 {
                break;
            }
            chain.push(p);
            cur = nodes.get(&p).and_then(|x| x.parent);
        }
        chain.reverse();
        let top = chain[0];
        let mut rel = format!("sys/devices/pci{:04x}:{:02x}", top.domain, top.bus);
        for c in &chain {
            rel.push('/');
            rel.push_str(&c.to_string());
        }
        let dir = out.join(&rel);
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        let d = &n.dev;
        let mut notes = Vec::new();
        let w = |name: &str, v: String| {
            let p = dir.join(name);
            std::fs::write(&p, v).map_err(|e| io(&p, e))
        };
        let vendor = d.vendor.unwrap_or(0);
        let device = d.device.unwrap_or(0);
        if d.vendor.is_none() || d.device.is_none() {
            notes.push(
                "vendor/device ids not printed (lspci without -nn): written as 0000 where not known by name"
                    .to_string(),
            );
        }
        let class = d.class24().unwrap_or(0xff0000);
        if d.class16.is_none() {
            notes.push(format!(
                "class `{}` not known: written as ff0000",
                d.class_name
            ));
        }
        w("vendor", format!("0x{vendor:04x}\n"))?;
        w("device", format!("0x{device:04x}\n"))?;
        w("class", format!("0x{class:06x}\n"))?;
        let mut ue =
            format!("PCI_CLASS={class:X}\nPCI_ID={vendor:04X}:{device:04X}\nPCI_SLOT_NAME={a}\n");
        if let Some((sv, sd)) = d.subsys {
            ue.push_str(&format!("PCI_SUBSYS_ID={sv:04X}:{sd:04X}\n"));
            w("subsystem_vendor", format!("0x{sv:04x}\n"))?;
            w("subsystem_device", format!("0x{sd:04x}\n"))?;
        }
        if let Some(drv) = &d.driver {
            let safe = !drv.is_empty()
                && drv.len() <= 64
                && drv
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !safe {
                notes.push(format!("driver name `{drv}` is no module name: not linked"));
            }
            if safe {
                ue.push_str(&format!("DRIVER={drv}\n"));
                let ddir = out.join("sys/bus/pci/drivers").join(drv);
                std::fs::create_dir_all(&ddir).map_err(|e| io(&ddir, e))?;
                let up = "../".repeat(rel.matches('/').count() + 1);
                let _ = std::fs::remove_file(dir.join("driver"));
                symlink(format!("{up}sys/bus/pci/drivers/{drv}"), dir.join("driver"))
                    .map_err(|e| io(&dir, e))?;
            }
        }
        w("uevent", ue)?;
        if let Some(nn) = d.numa_node {
            w("numa_node", format!("{nn}\n"))?;
            if nn >= 0 {
                numa_nodes.insert(nn);
            }
        }
        if let Some(grp) = d.iommu_group {
            let gdir = out.join(format!("sys/kernel/iommu_groups/{grp}/devices"));
            std::fs::create_dir_all(&gdir).map_err(|e| io(&gdir, e))?;
            let up = "../".repeat(rel.matches('/').count() + 1);
            let _ = std::fs::remove_file(dir.join("iommu_group"));
            symlink(
                format!("{up}sys/kernel/iommu_groups/{grp}"),
                dir.join("iommu_group"),
            )
            .map_err(|e| io(&dir, e))?;
        }
        if let Some(e) = &d.express {
            if e.lnksta_speed.is_some() || e.lnksta_width.is_some() {
                w(
                    "current_link_speed",
                    format!("{}\n", sysfs_speed(e.lnksta_speed)),
                )?;
                w(
                    "current_link_width",
                    format!("{}\n", e.lnksta_width.unwrap_or(0)),
                )?;
            }
            if e.lnkcap_speed.is_some() || e.lnkcap_width.is_some() {
                w(
                    "max_link_speed",
                    format!("{}\n", sysfs_speed(e.lnkcap_speed)),
                )?;
                w(
                    "max_link_width",
                    format!("{}\n", e.lnkcap_width.unwrap_or(0)),
                )?;
            }
        }
        if let Some(t) = d.sriov_total {
            w("sriov_totalvfs", format!("{t}\n"))?;
        }
        if let Some(t) = d.sriov_num {
            w("sriov_numvfs", format!("{t}\n"))?;
        }
        let (bytes, _) = d.config_bytes();
        let cfg = dir.join("config");
        std::fs::write(&cfg, bytes).map_err(|e| io(&cfg, e))?;
        let bus = out.join("sys/bus/pci/devices");
        std::fs::create_dir_all(&bus).map_err(|e| io(&bus, e))?;
        let link = bus.join(a.to_string());
        let _ = std::fs::remove_file(&link);
        symlink(
            format!("../../../{}", rel.trim_start_matches("sys/")),
            &link,
        )
        .map_err(|e| io(&link, e))?;
        records.push(DeviceRecord {
            bdf: a.to_string(),
            file: n.file.clone(),
            lines: d.lines,
            config: n.config.into(),
            parent_from: n.parent_from.into(),
            notes,
        });
    }
    // The nodes the functions name: a host has at least those (a host whose lspci shows no
    // `NUMA node:` line gets none, and its affinity stays unknown).
    for nn in numa_nodes {
        let p = out.join(format!("sys/devices/system/node/node{nn}"));
        std::fs::create_dir_all(&p).map_err(|e| io(&p, e))?;
    }
    Ok(records)
}

/// A capture imported into a temporary directory for `--root`.
pub fn import_temp(path: &Path) -> Result<crate::snapshot::TempRoot, ImportError> {
    let tmp = crate::snapshot::TempRoot::new("daqtune-import-").map_err(|e| io(path, e))?;
    import(&[path.to_path_buf()], tmp.path())?;
    Ok(tmp)
}
