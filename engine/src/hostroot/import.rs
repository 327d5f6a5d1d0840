//! `daqtune import`: captures people already have (an `lspci -vv` paste, an `lspci -t` tree)
//! turned into a host root, the layout `--root` and snapshots use, with a manifest
//! ([`crate::model::capture::Manifest`], `daqtune/import.json`) of what came from where.
//!
//! Kinds are told by content, never by file name. The parsers are probe's (`&str` in); this
//! module writes what they read where probe's readers look for it: each PCI function under
//! `/sys/devices/pciDDDD:BB/<bridges>/<bdf>` with the sysfs attributes and a `config` file
//! (the hex dump when lspci printed one, else the decoded registers at their offsets), and
//! `/sys/bus/pci/devices/<bdf>` linking to it.

use crate::model::capture::{DeviceRecord, InputRecord, Manifest, Source, SCHEMA};
use daqtune_probe::gpu::topo_text::{self, TopoMatrix};
use daqtune_probe::gpu::{smi, GpuSnapshot};
use daqtune_probe::net::ethtool::{recorded_path, Group, GroupState};
use daqtune_probe::net::ethtool_text::{self, Section};
use daqtune_probe::net::rdma_text::{self, DeviceText};
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
    #[error("{0}: no capture daqtune reads in it (lspci -vv text or -xxx dumps, an lspci -t tree, nvidia-smi -q, -q -x or topo -m, ibstat, ibv_devinfo, ethtool -g/-l/-c/-a/-k, an nvidia-bug-report.log(.gz), a sosreport, a pasted /proc/cmdline or /proc/meminfo)")]
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
    NvidiaSmiXml,
    NvidiaSmiText,
    BugReport,
    Cmdline,
    NvidiaSmiTopo,
    Ibstat,
    IbvDevinfo,
    Ethtool,
    Meminfo,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Lspci => "lspci -vv",
            Kind::LspciTree => "lspci -t",
            Kind::NvidiaSmiXml => "nvidia-smi -q -x",
            Kind::NvidiaSmiText => "nvidia-smi -q",
            Kind::BugReport => "nvidia-bug-report.log",
            Kind::Cmdline => "/proc/cmdline",
            Kind::NvidiaSmiTopo => "nvidia-smi topo -m",
            Kind::Ibstat => "ibstat",
            Kind::IbvDevinfo => "ibv_devinfo",
            Kind::Ethtool => "ethtool",
            Kind::Meminfo => "/proc/meminfo",
        }
    }
}

/// The kind of a capture's text, `None` for anything else.
pub fn detect(text: &str) -> Option<Kind> {
    if looks_like_bug_report(text) {
        Some(Kind::BugReport)
    } else if lspci::looks_like(text) {
        Some(Kind::Lspci)
    } else if lspci::looks_like_tree(text) {
        Some(Kind::LspciTree)
    } else if topo_text::looks_like(text) {
        Some(Kind::NvidiaSmiTopo)
    } else if rdma_text::looks_like_ibstat(text) {
        Some(Kind::Ibstat)
    } else if rdma_text::looks_like_ibv_devinfo(text) {
        Some(Kind::IbvDevinfo)
    } else if ethtool_text::looks_like(text) {
        Some(Kind::Ethtool)
    } else if daqtune_probe::mem::looks_like_meminfo(text) {
        Some(Kind::Meminfo)
    } else if smi::looks_like_xml(text) {
        Some(Kind::NvidiaSmiXml)
    } else if smi::looks_like_text(text) {
        Some(Kind::NvidiaSmiText)
    } else if looks_like_cmdline(text) {
        Some(Kind::Cmdline)
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
    // gzip (nvidia-bug-report.log.gz is one gzip member per section: all are read), bounded
    // like the text itself.
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .take(lspci::MAX_TEXT as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| bad(1, format!("gzip data that does not decompress: {e}")))?;
        if out.len() > lspci::MAX_TEXT {
            return Err(bad(
                1,
                format!(
                    "decompresses to more than {} bytes, the most a capture is read to",
                    lspci::MAX_TEXT
                ),
            ));
        }
        out
    } else {
        bytes
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
    if path.is_dir() && sos_root(path).is_some() {
        return true;
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

/// An unpacked sosreport: the directory holding `sos_commands/` (the one given, or its only
/// subdirectory: `sosreport-HOST-DATE/` as the archive unpacks).
pub fn sos_root(dir: &Path) -> Option<PathBuf> {
    if dir.join("sos_commands").is_dir() {
        return Some(dir.to_path_buf());
    }
    let subs: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .take(2)
        .collect();
    match subs.as_slice() {
        [one] if one.join("sos_commands").is_dir() => Some(one.clone()),
        _ => None,
    }
}

/// A sosreport archive (`.tar`, `.tar.gz`, `.tar.xz`; by content): only what the import reads is
/// unpacked (`*/sos_commands/**` and `*/proc/cmdline`), into `dest`, bounded like snapshot
/// archives (entries, bytes written) and refused whole at a path that is absolute or climbs
/// with `..`. Links, devices and FIFOs are never written. Returns the sos root under `dest`.
fn unpack_sos(archive: &Path, dest: &Path) -> Result<PathBuf, ImportError> {
    use crate::hostroot::snapshot::{MAX_ENTRIES, MAX_UNPACKED_BYTES};
    use std::io::Read;
    let refuse = |m: String| ImportError::Bad {
        file: archive.display().to_string(),
        line: 0,
        message: m,
    };
    let f = std::fs::File::open(archive).map_err(|e| io(archive, e))?;
    // The tar stream a sosreport unpacks from is far larger than what is kept: bounded
    // separately (a sosreport of a large host is a few GB unpacked). An xz stream's decoder
    // holds up to its dictionary (8 MiB for sos's preset), at most what it decoded: 1 GiB.
    const MAX_STREAM: u64 = 8 * 1024 * 1024 * 1024;
    const MAX_XZ_STREAM: u64 = 1024 * 1024 * 1024;
    let reader: Box<dyn Read> = match compression(archive) {
        Compression::Gzip => {
            Box::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(f)).take(MAX_STREAM))
        }
        Compression::Xz => Box::new(XzReader::spawn(f).take(MAX_XZ_STREAM)),
        Compression::None => Box::new(std::io::BufReader::new(f).take(MAX_STREAM)),
    };
    let mut tar = tar::Archive::new(reader);
    let entries = tar
        .entries()
        .map_err(|e| refuse(format!("not a tar archive: {e}")))?;
    let mut count = 0u64;
    let mut budget = MAX_UNPACKED_BYTES;
    let mut root: Option<PathBuf> = None;
    for e in entries {
        let mut e = e.map_err(|e| refuse(format!("broken tar archive: {e}")))?;
        count += 1;
        if count > MAX_ENTRIES {
            return Err(refuse(format!("more than {MAX_ENTRIES} entries")));
        }
        let raw = e.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let path = PathBuf::from(&shown);
        if path.is_absolute()
            || path
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(refuse(format!(
                "entry `{shown}`: an absolute path or one that climbs with `..`: refused"
            )));
        }
        if e.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let comps: Vec<String> = path
            .components()
            .filter_map(|c| match c {
                std::path::Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        let Some(i) = comps
            .iter()
            .position(|c| c == "sos_commands" || c == "proc")
        else {
            continue;
        };
        let wanted = comps[i] == "sos_commands" || comps[i..] == ["proc", "cmdline"];
        if !wanted || comps.len() > 8 {
            continue;
        }
        let size = e.header().size().unwrap_or(u64::MAX);
        if size > lspci::MAX_TEXT as u64 {
            continue;
        }
        if size > budget {
            return Err(refuse(format!(
                "what the import reads unpacks to more than {MAX_UNPACKED_BYTES} bytes"
            )));
        }
        let rel: PathBuf = comps.iter().collect();
        let target = dest.join(&rel);
        if let Some(d) = target.parent() {
            std::fs::create_dir_all(d).map_err(|e| io(d, e))?;
        }
        let mut data = Vec::new();
        (&mut e)
            .take(size.min(budget) + 1)
            .read_to_end(&mut data)
            .map_err(|x| refuse(format!("entry `{shown}`: {x}")))?;
        if data.len() as u64 > budget {
            return Err(refuse(format!(
                "what the import reads unpacks to more than {MAX_UNPACKED_BYTES} bytes"
            )));
        }
        budget -= data.len() as u64;
        std::fs::write(&target, data).map_err(|x| io(&target, x))?;
        if root.is_none() {
            root = Some(dest.join(comps[..i].iter().collect::<PathBuf>()));
        }
    }
    root.filter(|r| r.join("sos_commands").is_dir())
        .ok_or_else(|| refuse("a tar archive with no sos_commands/: not a sosreport".into()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    Xz,
}

/// By magic: gzip `1f 8b`, xz `fd 37 7a 58 5a 00`.
fn compression(path: &Path) -> Compression {
    use std::io::Read;
    let mut head = [0u8; 6];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    if n >= 2 && head[..2] == [0x1f, 0x8b] {
        Compression::Gzip
    } else if n == 6 && head == [0xfd, b'7', b'z', b'X', b'Z', 0] {
        Compression::Xz
    } else {
        Compression::None
    }
}

/// An xz stream decoded on a thread of its own into a bounded channel (lzma-rs decodes into
/// a writer): the tar reader pulls from it as from any reader, so nothing is held whole.
struct XzReader {
    rx: std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>,
    buf: Vec<u8>,
    pos: usize,
}

struct ChannelWriter(std::sync::mpsc::SyncSender<std::io::Result<Vec<u8>>>);

impl std::io::Write for ChannelWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        // The reader gone (the tar was refused or done): stop decoding.
        self.0
            .send(Ok(b.to_vec()))
            .map_err(|_| std::io::Error::other("reader closed"))?;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl XzReader {
    fn spawn(f: std::fs::File) -> XzReader {
        let (tx, rx) = std::sync::mpsc::sync_channel(16);
        std::thread::spawn(move || {
            let mut input = std::io::BufReader::new(f);
            let mut w = std::io::BufWriter::with_capacity(64 * 1024, ChannelWriter(tx.clone()));
            let r = lzma_rs::xz_decompress(&mut input, &mut w)
                .map_err(|e| std::io::Error::other(format!("xz: {e}")))
                .and_then(|_| std::io::Write::flush(&mut w));
            if let Err(e) = r {
                let _ = tx.send(Err(e));
            }
        });
        XzReader {
            rx,
            buf: Vec::new(),
            pos: 0,
        }
    }
}

impl std::io::Read for XzReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pos >= self.buf.len() {
            match self.rx.recv() {
                Ok(Ok(b)) => {
                    self.buf = b;
                    self.pos = 0;
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Whether a file is a tar archive (plain, gzip or xz): `ustar` at offset 257 of the (first
/// decompressed) block.
fn is_tar(path: &Path) -> bool {
    use std::io::Read;
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    let mut block = [0u8; 512];
    let ok = match compression(path) {
        Compression::Gzip => flate2::read::MultiGzDecoder::new(f)
            .read_exact(&mut block)
            .is_ok(),
        Compression::Xz => XzReader::spawn(f).read_exact(&mut block).is_ok(),
        Compression::None => (&f).read_exact(&mut block).is_ok(),
    };
    ok && &block[257..262] == b"ustar"
}

/// Files read from a sosreport's `sos_commands/` (a full report has a few thousand).
const MAX_SOS_FILES: usize = 20_000;

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
    /// GPU facts from nvidia-smi, the GPUs of later captures added by UUID.
    gpus: Option<GpuSnapshot>,
    /// Host files copied from a bug report (host path, content), and the sources they cover.
    files: BTreeMap<String, String>,
    covers: BTreeSet<Source>,
    inputs: Vec<InputRecord>,
    /// RDMA devices from ibstat / ibv_devinfo by name, first capture wins per port; with the
    /// file they came from.
    rdma: BTreeMap<String, (DeviceText, String)>,
    /// The `nvidia-smi topo -m` matrix, first capture wins.
    topo: Option<(TopoMatrix, String)>,
    /// Ports' ethtool groups by (interface, group), first capture wins.
    ethtool: BTreeMap<(String, Group), GroupState>,
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
        if looks_like_bug_report(&text) {
            return self.add_bug_report(&file, &text);
        }
        self.add_text(&file, &text, explicit, 0, None)
    }

    /// One capture's text; `off` lines before it in its file (a section of a bug report),
    /// `section` the bug report section's header.
    fn add_text(
        &mut self,
        file: &str,
        text: &str,
        explicit: bool,
        off: usize,
        section: Option<&str>,
    ) -> Result<(), ImportError> {
        let file = file.to_string();
        // Every text parser's error (probe::text::LineError), at its line in this file.
        let bad = |e: daqtune_probe::text::LineError| ImportError::Bad {
            file: file.clone(),
            line: e.line + off,
            message: e.message,
        };
        let last = text.lines().count() + off;
        let first = off + 1;
        let kind_of = |k: Kind| match section {
            Some(h) => format!("{} (bug report section `{h}`)", k.as_str()),
            None => k.as_str().to_string(),
        };
        match detect(text) {
            // A bug report inside a bug report's section is not read again (no nesting).
            Some(Kind::BugReport) => self.inputs.push(InputRecord {
                file,
                kind: "none".into(),
                lines: Some((first, last)),
                notes: vec!["a bug report inside a bug report: left out".into()],
                ..Default::default()
            }),
            Some(Kind::Cmdline) => {
                self.files
                    .insert("/proc/cmdline".into(), format!("{}\n", text.trim()));
                self.covers.insert(Source::Cmdline);
                self.inputs.push(InputRecord {
                    file,
                    kind: kind_of(Kind::Cmdline),
                    lines: Some((first, last)),
                    produced: vec!["/proc/cmdline".into()],
                    notes: Vec::new(),
                });
            }
            Some(Kind::Lspci) => {
                let cap = lspci::parse(text).map_err(bad)?;
                let mut produced = Vec::new();
                let mut notes = Vec::new();
                for mut d in cap.devices {
                    d.lines = (d.lines.0 + off, d.lines.1 + off);
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
                        cap.ignored[0] + off
                    ));
                }
                self.inputs.push(InputRecord {
                    file,
                    kind: kind_of(Kind::Lspci),
                    lines: Some((first, last)),
                    produced,
                    notes,
                });
            }
            Some(Kind::LspciTree) => {
                let entries = lspci::parse_tree(text).map_err(bad)?;
                let n = entries.len();
                for mut e in entries {
                    e.line += off;
                    self.tree.entry(e.addr).or_insert((e, file.clone()));
                }
                self.inputs.push(InputRecord {
                    file,
                    kind: kind_of(Kind::LspciTree),
                    lines: Some((first, last)),
                    produced: vec![format!(
                        "the parents of {n} functions; bridges not in an lspci -vv capture"
                    )],
                    notes: Vec::new(),
                });
            }
            Some(k @ (Kind::NvidiaSmiXml | Kind::NvidiaSmiText)) => {
                let snap = smi::parse(text).map_err(bad)?;
                let mut produced = Vec::new();
                let mut notes = Vec::new();
                let all = self.gpus.get_or_insert_with(|| {
                    let mut s = snap.clone();
                    s.gpus.clear();
                    s
                });
                for g in snap.gpus {
                    if all
                        .gpus
                        .iter()
                        .any(|x| x.uuid == g.uuid && x.pci_bus_id == g.pci_bus_id)
                    {
                        notes.push(format!(
                            "{}: also in an earlier capture, which is kept",
                            g.uuid
                        ));
                        continue;
                    }
                    produced.push(format!("daqtune/gpu.json: {}", g.subject()));
                    all.gpus.push(g);
                }
                self.inputs.push(InputRecord {
                    file,
                    kind: kind_of(k),
                    lines: Some((first, last)),
                    produced,
                    notes,
                });
            }
            Some(k @ (Kind::Ibstat | Kind::IbvDevinfo)) => {
                let parsed = if k == Kind::Ibstat {
                    rdma_text::parse_ibstat(text)
                } else {
                    rdma_text::parse_ibv_devinfo(text)
                }
                .map_err(bad)?;
                let mut produced = Vec::new();
                let mut notes = Vec::new();
                for mut d in parsed {
                    d.lines = (d.lines.0 + off, d.lines.1 + off);
                    let name = d.dev.name.clone();
                    produced.push(format!("sys/class/infiniband/{name}"));
                    match self.rdma.get_mut(&name) {
                        None => {
                            self.rdma.insert(name, (d, file.clone()));
                        }
                        Some((have, _)) => {
                            // Another capture of the same device (`ibv_devinfo -v -i 2` beside
                            // `ibv_devinfo`): its ports not yet known are added.
                            for p in d.ports {
                                if have.ports.iter().any(|x| x.port.port == p.port.port) {
                                    notes.push(format!(
                                        "{name} port {}: also in an earlier capture, which is kept",
                                        p.port.port
                                    ));
                                } else {
                                    have.ports.push(p);
                                }
                            }
                            have.ports.sort_by_key(|p| p.port.port);
                        }
                    }
                }
                self.inputs.push(InputRecord {
                    file,
                    kind: kind_of(k),
                    lines: Some((first, last)),
                    produced,
                    notes,
                });
            }
            Some(Kind::Meminfo) => {
                daqtune_probe::mem::validate_meminfo(text).map_err(|(line, message)| {
                    ImportError::Bad {
                        file: file.clone(),
                        line: line + off,
                        message,
                    }
                })?;
                let mut notes = Vec::new();
                if self.files.contains_key("/proc/meminfo") {
                    notes.push("/proc/meminfo also in an earlier capture, which is kept".into());
                } else {
                    self.files
                        .insert("/proc/meminfo".into(), format!("{}\n", text.trim_end()));
                    self.covers.insert(Source::Meminfo);
                }
                self.inputs.push(InputRecord {
                    file,
                    kind: kind_of(Kind::Meminfo),
                    lines: Some((first, last)),
                    produced: vec!["/proc/meminfo".into()],
                    notes,
                });
            }
            Some(Kind::Ethtool) => {
                let sections = ethtool_text::parse(text).map_err(bad)?;
                let mut produced = Vec::new();
                let mut notes = Vec::new();
                for s in sections {
                    match s {
                        Section::Group { ifname, state, .. } => {
                            let group = group_of(&state);
                            let path = recorded_path(&ifname, group);
                            if self.ethtool.contains_key(&(ifname.clone(), group)) {
                                notes.push(format!(
                                    "{path}: also in an earlier capture, which is kept"
                                ));
                                continue;
                            }
                            produced.push(path);
                            self.ethtool.insert((ifname, group), state);
                        }
                        // The port `-i` names is not in its own output: what it says is kept
                        // in the manifest, for people.
                        Section::Info {
                            driver,
                            firmware,
                            bus_info,
                            lines,
                        } => notes.push(format!(
                            "ethtool -i (lines {}-{}): driver {}, firmware {}, bus-info {}",
                            lines.0 + off,
                            lines.1 + off,
                            driver.as_deref().unwrap_or("?"),
                            firmware.as_deref().unwrap_or("?"),
                            bus_info.as_deref().unwrap_or("?")
                        )),
                    }
                }
                self.inputs.push(InputRecord {
                    file,
                    kind: kind_of(Kind::Ethtool),
                    lines: Some((first, last)),
                    produced,
                    notes,
                });
            }
            Some(Kind::NvidiaSmiTopo) => {
                let m = topo_text::parse(text).map_err(bad)?;
                let mut notes = Vec::new();
                let gpus = m.rows.iter().filter(|r| r.is_gpu()).count();
                let nics = m.nics().len();
                if self.topo.is_some() {
                    notes.push("a second topo -m matrix: the earlier one is kept".into());
                } else {
                    self.topo = Some((m, file.clone()));
                }
                self.inputs.push(InputRecord {
                    file,
                    kind: kind_of(Kind::NvidiaSmiTopo),
                    lines: Some((first, last)),
                    produced: vec![format!(
                        "daqtune/gpu-topo.json: {gpus} GPU(s) x {nics} NIC(s), path classes and affinities"
                    )],
                    notes,
                });
            }
            None if explicit => {
                return Err(ImportError::Bad {
                    file,
                    line: first,
                    message: "not a capture daqtune reads: expected `lspci -vv` text \
                              (`BB:DD.F Class: Vendor Device` then indented details), an \
                              `lspci -t` tree (`-[DDDD:BB]-+-DD.F`), `nvidia-smi -q` / \
                              `-q -x` / `topo -m` output, `ibstat` (`CA 'NAME'`) or \
                              `ibv_devinfo` (`hca_id:`)"
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

/// A pasted `/proc/cmdline`: one line (at most the kernel's 40 KiB, `caps::CMDLINE`) naming
/// the boot image or the root device, as every booted kernel's command line does.
pub fn looks_like_cmdline(text: &str) -> bool {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let (Some(l), None) = (lines.next(), lines.next()) else {
        return false;
    };
    l.len() <= daqtune_probe::host::caps::CMDLINE
        && l.split_whitespace()
            .any(|w| w.starts_with("BOOT_IMAGE=") || w.starts_with("root="))
}

/// nvidia-bug-report.sh's log (after gunzip): its prologue line.
pub fn looks_like_bug_report(text: &str) -> bool {
    let head: String = text.chars().take(4096).collect();
    head.contains("Start of NVIDIA bug report log file")
}

/// The host files of a bug report's `*** PATH` sections that are copied into the root, and the
/// fact source each one is the whole of.
fn bug_report_file(path: &str) -> Option<Option<Source>> {
    let p = path.replace("/./", "/");
    match p.as_str() {
        "/proc/cmdline" => Some(Some(Source::Cmdline)),
        "/proc/driver/nvidia/version" => Some(Some(Source::NvidiaDriver)),
        _ if p.starts_with("/proc/driver/nvidia/gpus/")
            && p.ends_with("/information")
            && p.split('/').count() == 7 =>
        {
            Some(None)
        }
        _ => None,
    }
}

impl Gathered {
    /// Split a bug report at its section rules and import each section: captures by their
    /// content (lspci, nvidia-smi), host files by the path in their `*** PATH` header.
    fn add_bug_report(&mut self, file: &str, text: &str) -> Result<(), ImportError> {
        let lines: Vec<&str> = text.lines().collect();
        let rule = |l: &str| l.len() >= 20 && l.trim_end().bytes().all(|b| b == b'_');
        let mut starts = vec![0usize];
        for (i, l) in lines.iter().enumerate() {
            if rule(l) {
                starts.push(i + 1);
            }
        }
        let mut used = Vec::new();
        let mut copied = Vec::new();
        for (k, &start) in starts.iter().enumerate() {
            let end = starts.get(k + 1).map_or(lines.len(), |n| n - 1);
            let mut i = start;
            while i < end && lines[i].trim().is_empty() {
                i += 1;
            }
            if i >= end {
                continue;
            }
            let header = lines[i].trim();
            let mut body = i + 1;
            if let Some(path) = header.strip_prefix("*** ") {
                if path.ends_with(" does not exist") {
                    continue;
                }
                while body < end && lines[body].starts_with("*** ") {
                    body += 1;
                }
                if let Some(cover) = bug_report_file(path.trim()) {
                    let content: String = lines[body..end]
                        .iter()
                        .map(|l| format!("{l}\n"))
                        .collect::<String>()
                        .trim_end()
                        .to_string()
                        + "\n";
                    let p = path.trim().replace("/./", "/");
                    copied.push(format!("{p} (lines {}-{})", body + 1, end));
                    self.files.insert(p, content);
                    if let Some(c) = cover {
                        self.covers.insert(c);
                    }
                    continue;
                }
            }
            let section: String = lines[body..end].iter().map(|l| format!("{l}\n")).collect();
            if detect(&section).is_some_and(|k| k != Kind::BugReport) {
                used.push(header.to_string());
                self.add_text(file, &section, false, body, Some(header))?;
                // The record add_text pushed for a section that is no capture is noise.
                if self.inputs.last().is_some_and(|r| r.kind == "none") {
                    self.inputs.pop();
                }
            }
        }
        self.inputs.push(InputRecord {
            file: file.to_string(),
            kind: "nvidia-bug-report.log".into(),
            lines: Some((1, lines.len())),
            produced: copied,
            notes: vec![format!(
                "{} sections; captures read from: {}",
                starts.len(),
                if used.is_empty() {
                    "none".to_string()
                } else {
                    used.join("; ")
                }
            )],
        });
        Ok(())
    }
}

impl Gathered {
    /// A sosreport directory: its `sos_commands/` outputs read by content (lspci, nvidia-smi),
    /// and its copy of `/proc/cmdline`.
    fn add_sos(&mut self, root: &Path) -> Result<(), ImportError> {
        let mut todo = vec![(root.join("sos_commands"), 0usize)];
        let mut files = Vec::new();
        while let Some((d, depth)) = todo.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.filter_map(|e| e.ok()) {
                let Ok(t) = e.file_type() else { continue };
                if t.is_dir() && depth < 3 {
                    todo.push((e.path(), depth + 1));
                } else if t.is_file() {
                    files.push(e.path());
                }
                if files.len() > MAX_SOS_FILES {
                    return Err(ImportError::Bad {
                        file: root.display().to_string(),
                        line: 0,
                        message: format!("more than {MAX_SOS_FILES} files under sos_commands/"),
                    });
                }
            }
        }
        files.sort();
        let mut used = Vec::new();
        for f in files {
            let before = self.inputs.len();
            // Outputs too large or not text are no capture here: left out, not fatal.
            let Ok(text) = read_text(&f) else { continue };
            if detect(&text).is_none_or(|k| k == Kind::BugReport) {
                continue;
            }
            self.add_text(&f.display().to_string(), &text, false, 0, None)?;
            if self.inputs.len() > before {
                used.push(f.strip_prefix(root).unwrap_or(&f).display().to_string());
            }
        }
        let mut produced = Vec::new();
        let cmdline = root.join("proc/cmdline");
        if cmdline.is_file() {
            let t = read_text(&cmdline)?;
            if !t.trim().is_empty() {
                self.files
                    .insert("/proc/cmdline".into(), format!("{}\n", t.trim_end()));
                self.covers.insert(Source::Cmdline);
                produced.push("/proc/cmdline".to_string());
            }
        }
        self.inputs.push(InputRecord {
            file: root.display().to_string(),
            kind: "sosreport".into(),
            lines: None,
            produced,
            notes: vec![format!(
                "captures read from sos_commands: {}",
                if used.is_empty() {
                    "none".to_string()
                } else {
                    used.join(", ")
                }
            )],
        });
        Ok(())
    }
}

/// Import `inputs` (files, or directories of files) into the empty or new directory `out`.
pub fn import(inputs: &[PathBuf], out: &Path) -> Result<Manifest, ImportError> {
    let mut g = Gathered::default();
    for p in inputs {
        if let Some(sos) = p.is_dir().then(|| sos_root(p)).flatten() {
            g.add_sos(&sos)?;
        } else if p.is_file() && is_tar(p) {
            let tmp =
                crate::hostroot::snapshot::TempRoot::new("daqtune-sos-").map_err(|e| io(p, e))?;
            let root = unpack_sos(p, tmp.path())?;
            let before = g.inputs.len();
            g.add_sos(&root)?;
            // The manifest names the archive (`ARCHIVE!/PATH`), not the temporary directory.
            let prefix = format!("{}/", tmp.path().display());
            let name = |f: &mut String| {
                if let Some(rest) = f.strip_prefix(&prefix) {
                    *f = format!("{}!/{rest}", p.display());
                } else if *f == tmp.path().display().to_string()
                    || f.starts_with(&prefix[..prefix.len() - 1])
                {
                    *f = p.display().to_string();
                }
            };
            for r in &mut g.inputs[before..] {
                name(&mut r.file);
            }
            for (_, f) in g.devices.values_mut() {
                name(f);
            }
            for (_, f) in g.tree.values_mut() {
                name(f);
            }
        } else if p.is_dir() {
            for (f, _) in capture_files(p)? {
                g.add_file(&f, false)?;
            }
        } else {
            g.add_file(p, true)?;
        }
    }
    if g.devices.is_empty()
        && g.tree.is_empty()
        && g.gpus.is_none()
        && g.files.is_empty()
        && g.rdma.is_empty()
        && g.topo.is_none()
        && g.ethtool.is_empty()
    {
        let names: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
        return Err(ImportError::Nothing(names.join(", ")));
    }
    std::fs::create_dir_all(out).map_err(|e| io(out, e))?;
    let devices = write_pci(&g, out)?;
    let mut covers = g.covers.clone();
    for (host_path, content) in &g.files {
        let p = out.join(host_path.trim_start_matches('/'));
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| io(d, e))?;
        }
        std::fs::write(&p, content).map_err(|e| io(&p, e))?;
    }
    if !g.devices.is_empty() {
        covers.insert(Source::Pci);
    }
    for ((ifname, group), state) in &g.ethtool {
        let p = out.join(recorded_path(ifname, *group).trim_start_matches('/'));
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| io(d, e))?;
        }
        std::fs::write(&p, state.to_json()).map_err(|e| io(&p, e))?;
        covers.insert(Source::Ethtool);
    }
    if !g.rdma.is_empty() {
        write_rdma(&g, out)?;
        covers.insert(Source::Rdma);
    }
    if let Some((m, _)) = &g.topo {
        let p = out.join(TOPO_PATH.trim_start_matches('/'));
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| io(d, e))?;
        }
        std::fs::write(&p, m.to_json()).map_err(|e| io(&p, e))?;
        covers.insert(Source::GpuTopology);
    }
    if let Some(snap) = &g.gpus {
        let p = out.join("daqtune/gpu.json");
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| io(d, e))?;
        }
        std::fs::write(&p, snap.to_json()).map_err(|e| io(&p, e))?;
        covers.insert(Source::Gpu);
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
        let mut notes = d.notes.clone();
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

fn group_of(s: &GroupState) -> Group {
    match s {
        GroupState::Rings(_) => Group::Rings,
        GroupState::Channels(_) => Group::Channels,
        GroupState::Coalesce(_) => Group::Coalesce,
        GroupState::Pause(_) => Group::Pause,
        GroupState::Features(_) => Group::Features,
    }
}

/// Where an imported `nvidia-smi topo -m` matrix is recorded (host path under the root).
pub const TOPO_PATH: &str = crate::model::capture::GPU_TOPO_PATH;

/// The RDMA devices of ibstat / ibv_devinfo where sysfs has them:
/// `/sys/class/infiniband/<dev>/` with `fw_ver`, GUIDs, `hca_type` and `ports/N/{link_layer,
/// state,phys_state,rate}`. A device whose name is its PCI path (`rocep1s0f0`, rdma-core's
/// NAME_PCI scheme) sits under that function when an lspci capture holds it, as on a host
/// (`<bdf>/infiniband/<dev>`, the class entry a link to it); any other is a device of its own,
/// tied to no function.
fn write_rdma(g: &Gathered, out: &Path) -> Result<(), ImportError> {
    let class = out.join("sys/class/infiniband");
    std::fs::create_dir_all(&class).map_err(|e| io(&class, e))?;
    for (name, (d, _)) in &g.rdma {
        let under = rdma_text::pci_of_name(name).filter(|a| g.devices.contains_key(a));
        let dir = match under {
            Some(a) => {
                let rel = format!("sys/bus/pci/devices/{a}/infiniband/{name}");
                let link = class.join(name);
                let _ = std::fs::remove_file(&link);
                symlink(
                    format!("../../bus/pci/devices/{a}/infiniband/{name}"),
                    &link,
                )
                .map_err(|e| io(&link, e))?;
                out.join(rel)
            }
            None => class.join(name),
        };
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        let w = |p: PathBuf, v: &str| std::fs::write(&p, format!("{v}\n")).map_err(|e| io(&p, e));
        let dev = &d.dev;
        for (attr, v) in [
            ("fw_ver", &dev.fw_ver),
            ("node_guid", &dev.node_guid),
            ("sys_image_guid", &dev.sys_image_guid),
            ("board_id", &dev.board_id),
            ("hca_type", &d.hca_type),
        ] {
            if let Some(v) = v {
                w(dir.join(attr), v)?;
            }
        }
        for p in &d.ports {
            let pd = dir.join(format!("ports/{}", p.port.port));
            std::fs::create_dir_all(&pd).map_err(|e| io(&pd, e))?;
            for (attr, v) in [
                ("link_layer", &p.port.link_layer),
                ("state", &p.port.state),
                ("phys_state", &p.phys_state),
                ("rate", &p.port.rate),
            ] {
                if let Some(v) = v {
                    w(pd.join(attr), v)?;
                }
            }
        }
    }
    Ok(())
}

/// A capture imported into a temporary directory for `--root`.
pub fn import_temp(path: &Path) -> Result<crate::hostroot::snapshot::TempRoot, ImportError> {
    let tmp =
        crate::hostroot::snapshot::TempRoot::new("daqtune-import-").map_err(|e| io(path, e))?;
    import(&[path.to_path_buf()], tmp.path())?;
    Ok(tmp)
}
