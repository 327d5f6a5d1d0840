//! `daqtune snapshot`: capture exactly what the checks read, as a host root.
//!
//! The checks run once per built-in profile (and the chosen one) on a recording [`Host`], so
//! the snapshot holds every file, directory listing and symlink they touched — no more. Files
//! are written at their resolved place and links recreated with their raw targets, so that
//! `daqtune check --root SNAP` resolves paths exactly as the source host did. Facts that are
//! not files (NVML, CUDA) are written as JSON under `daqtune/`.

use crate::commands::{self, UsageError};
pub use crate::facts::interesting_kmsg;
use crate::facts::UnitsRecord;
use crate::profile;
use daqtune_probe::host::{Access, Recording};
use daqtune_probe::Host;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// An archive handed to `--root` is untrusted input: what it may unpack to is bounded while
/// it streams, and unpacking stops at the first excess (docs/field-diagnostics.md). The limits
/// are far above any real snapshot: the H200 machine's (tests/fixtures) unpacks to 0.5 MB in
/// 628 entries.
///
/// Bytes of file content (and of tar extension records) written, counted as they are read:
/// a header's declared size is only used to refuse early.
pub const MAX_UNPACKED_BYTES: u64 = 64 * 1024 * 1024;
/// Entries (headers) in the archive.
pub const MAX_ENTRIES: u64 = 100_000;
/// Data of one GNU long-name or pax extension record (a path is at most 4096 bytes).
const MAX_EXTENSION: u64 = 64 * 1024;
/// The uncompressed tar stream: the content above plus at most two headers and padding per
/// entry. Everything is accounted for by the checks per entry; this is the last guard.
const MAX_STREAM_BYTES: u64 = MAX_UNPACKED_BYTES + MAX_ENTRIES * 2048;
/// zstd window (2^24 = 16 MiB): bounds the decoder's memory. `daqtune snapshot` writes 4 MiB
/// windows (level 9); an archive recompressed with `zstd --ultra -22` or `--long` is refused.
const ZSTD_WINDOW_LOG_MAX: u32 = 24;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A hostile or broken archive: refused, nothing of it kept.
    #[error("{archive}: refused: {reason}")]
    Refused { archive: String, reason: String },
    #[error(transparent)]
    Usage(#[from] UsageError),
}

fn io(path: &Path, source: std::io::Error) -> SnapshotError {
    SnapshotError::Io {
        path: path.display().to_string(),
        source,
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SnapshotMeta {
    pub schema: String,
    pub daqtune_version: String,
    /// Seconds since the epoch.
    pub created: u64,
    pub source_root: String,
    pub redacted: bool,
    pub files: usize,
    pub links: usize,
}

/// Extra files captured whatever the checks read: identity and versions for a support case.
const ALWAYS: &[&str] = &[
    "/proc/cpuinfo",
    "/proc/version",
    "/proc/cmdline",
    "/etc/os-release",
    "/proc/driver/nvidia/version",
    "/sys/class/dmi/id/bios_version",
    "/sys/class/dmi/id/product_serial",
    "/sys/class/dmi/id/board_serial",
    // The namespace's IPv4 addresses, for `check --config` on the snapshot (app.interfaces).
    // /proc/net/if_inet6 is left out: its link-local addresses embed the MACs --redact hides.
    "/proc/net/fib_trie",
    "/proc/net/route",
];

/// Run every check on a recording host, under every profile, and return what was read.
pub fn record_reads(host: &Host, chosen: &profile::LoadedProfile) -> Recording {
    let (rec_host, rec) = host.recording();
    let mut profiles = vec![chosen.clone()];
    for name in profile::builtin_names() {
        if let Ok(p) = profile::load(name) {
            profiles.push(p);
        }
    }
    for p in &profiles {
        let _ = commands::evaluate(&rec_host, p, Vec::new(), false);
    }
    for p in ALWAYS {
        let _ = rec_host.read_bytes(p);
    }
    let _ = rec_host.read_bytes("/daqtune/kmsg.txt");
    let out = rec.lock().map(|r| r.clone()).unwrap_or_default();
    out
}

struct Writer<'a> {
    out: &'a Path,
    redactor: Option<Redactor>,
    files: usize,
}

impl Writer<'_> {
    fn dest(&self, rel: &Path) -> PathBuf {
        self.out.join(rel)
    }

    fn write_file(
        &mut self,
        rel: &Path,
        host_path: &str,
        data: &[u8],
    ) -> Result<(), SnapshotError> {
        let dest = self.dest(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        let data = match &mut self.redactor {
            Some(r) => r.redact_file(host_path, data),
            None => Some(data.to_vec()),
        };
        if let Some(data) = data {
            std::fs::write(&dest, data).map_err(|e| io(&dest, e))?;
            self.files += 1;
        }
        Ok(())
    }
}

fn rel_of(host: &Host, real: &Path) -> Option<PathBuf> {
    real.strip_prefix(host.root()).ok().map(Path::to_path_buf)
}

/// Write a snapshot directory. Returns its metadata.
pub fn write_dir(
    host: &Host,
    chosen: &profile::LoadedProfile,
    out: &Path,
    redact: bool,
) -> Result<SnapshotMeta, SnapshotError> {
    let _writing = cleanup::writing();
    std::fs::create_dir_all(out).map_err(|e| io(out, e))?;
    let rec = record_reads(host, chosen);
    let hostname = host.read_attr("/proc/sys/kernel/hostname").ok();
    let mut w = Writer {
        out,
        redactor: redact.then(|| Redactor::new(hostname.clone())),
        files: 0,
    };
    // Resolution of host paths must see links as the checks did; a fresh host avoids the
    // recorder and its caches.
    let plain = match Host::at(host.root()) {
        Ok(h) if !host.is_live() => h,
        _ => Host::live(),
    };
    let walker = if host.is_live() {
        plain.recording().0
    } else {
        plain.clone()
    };
    for (path, access) in &rec.accesses {
        if cleanup::interrupted() {
            return Err(io(out, cleanup::interrupted_error()));
        }
        let Ok(real) = walker.resolve(path) else {
            continue;
        };
        let Ok(meta) = std::fs::metadata(&real) else {
            continue;
        };
        let Some(rel) = rel_of(&walker, &real) else {
            continue;
        };
        match access {
            Access::File if meta.is_file() => {
                if let Ok(data) = plain.read_bytes(path) {
                    w.write_file(&rel, path, &data)?;
                }
            }
            Access::Dir | Access::File | Access::Probe if meta.is_dir() => {
                let dest = w.dest(&rel);
                std::fs::create_dir_all(&dest).map_err(|e| io(&dest, e))?;
                if *access != Access::Dir {
                    continue;
                }
                // Keep the entry names and kinds of a listed directory.
                for name in plain.read_dir(path).unwrap_or_default() {
                    let child_real = real.join(&name);
                    let child_dest = dest.join(&name);
                    let Ok(cm) = std::fs::symlink_metadata(&child_real) else {
                        continue;
                    };
                    if child_dest.symlink_metadata().is_ok() {
                        continue;
                    }
                    if cm.file_type().is_symlink() {
                        if let Ok(t) = std::fs::read_link(&child_real) {
                            let _ = symlink(t, &child_dest);
                        }
                    } else if cm.is_dir() {
                        let _ = std::fs::create_dir_all(&child_dest);
                    } else {
                        let _ = std::fs::write(&child_dest, b"");
                    }
                }
            }
            Access::Probe if meta.is_file() => {
                let data = plain.read_bytes(path).unwrap_or_default();
                w.write_file(&rel, path, &data)?;
            }
            // Only the type and the permission bits were asked for (is the binary a unit
            // calls there and executable?): an empty file with the same mode answers the same.
            Access::Stat if meta.is_file() => {
                use std::os::unix::fs::PermissionsExt;
                w.write_file(&rel, path, b"")?;
                let dest = w.dest(&rel);
                let mode = meta.permissions().mode() & 0o777;
                let _ = std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(mode));
            }
            Access::Stat if meta.is_dir() => {
                let dest = w.dest(&rel);
                std::fs::create_dir_all(&dest).map_err(|e| io(&dest, e))?;
            }
            _ => {}
        }
    }
    let mut links = 0usize;
    for (link, target) in &rec.links {
        let dest = out.join(link.trim_start_matches('/'));
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        if let Ok(m) = dest.symlink_metadata() {
            if m.is_dir() && !m.file_type().is_symlink() {
                // A listing created the place as a directory; a link wins (it is what the
                // host had), and the listing's content was written at the resolved path.
                let _ = std::fs::remove_dir_all(&dest);
            } else {
                let _ = std::fs::remove_file(&dest);
            }
        }
        let target = match &mut w.redactor {
            Some(r) => r.redact_text(target),
            None => target.clone(),
        };
        symlink(&target, &dest).map_err(|e| io(&dest, e))?;
        links += 1;
    }
    // Non-file facts.
    let dq = out.join("daqtune");
    std::fs::create_dir_all(&dq).map_err(|e| io(&dq, e))?;
    if host.is_live() {
        if let Some(k) = crate::facts::read_kmsg() {
            w.write_file(
                Path::new("daqtune/kmsg.txt"),
                "/daqtune/kmsg.txt",
                k.as_bytes(),
            )?;
        }
        // NVML/CUDA facts are not files: record what the driver libraries answer, or why
        // they did not, so a replay's GPU checks see the same (docs/gpu-facts.md).
        let mut gpus = daqtune_probe::gpu::gather_live();
        if let Some(r) = &mut w.redactor {
            gpus.map_uuids(|u| r.gpu_uuid(u));
        }
        w.write_file(
            Path::new("daqtune/gpu.json"),
            daqtune_probe::gpu::FACTS_PATH,
            gpus.to_json().as_bytes(),
        )?;
        // systemd's state of daqtune's units is not a file either: record it so that
        // `daqtune.artifacts` on the snapshot judges their last run as the live host did.
        let units = record_unit_states(host, chosen);
        w.write_file(
            Path::new("daqtune/units.json"),
            crate::facts::UNITS_RECORD,
            units.to_json().as_bytes(),
        )?;
        let arch = std::env::consts::ARCH;
        w.write_file(
            Path::new("daqtune/arch"),
            "/daqtune/arch",
            format!("{arch}\n").as_bytes(),
        )?;
    }
    let meta = SnapshotMeta {
        schema: "daqtune.snapshot/v1".into(),
        daqtune_version: env!("CARGO_PKG_VERSION").into(),
        created: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        source_root: if redact {
            "(redacted)".into()
        } else {
            host.root().display().to_string()
        },
        redacted: redact,
        files: w.files,
        links,
    };
    let mp = dq.join("snapshot.json");
    let text = serde_json::to_string_pretty(&meta).unwrap_or_default();
    std::fs::write(&mp, text).map_err(|e| io(&mp, e))?;
    Ok(meta)
}

/// systemd's state of each unit daqtune wrote on `host` (live): the record
/// [`crate::facts::UNITS_RECORD`] that a replay of the snapshot reads.
pub fn record_unit_states(host: &Host, chosen: &profile::LoadedProfile) -> UnitsRecord {
    let facts = crate::facts::Facts::new(host);
    let mut rec = UnitsRecord {
        schema: crate::facts::UNITS_SCHEMA.into(),
        captured_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| d.as_secs()),
        ..Default::default()
    };
    let mut names: Vec<String> = Vec::new();
    for p in std::iter::once(chosen.clone())
        .chain(profile::builtin_names().filter_map(|n| profile::load(n).ok()))
    {
        for a in
            crate::context::artifacts::daqtune_artifacts(&facts, &crate::tunables::owned_files(&p))
        {
            if let Some(n) = a.unit_name() {
                if !names.iter().any(|x| x == n) {
                    names.push(n.to_string());
                }
            }
        }
    }
    for n in names {
        match facts.unit_state(&n) {
            Ok(st) => rec.units.push(st),
            // No systemd to ask: say so once, for every unit. (A unit systemd did not answer
            // for is left out; its replay says it is not in the record.)
            Err(e) if e.starts_with(crate::facts::NO_SYSTEMD) => {
                rec.systemd_unavailable = Some(e);
                rec.units.clear();
                break;
            }
            Err(_) => {}
        }
    }
    rec
}

/// Bytes of file content and entries under `dir` (symlinks not followed).
fn tree_totals(dir: &Path) -> std::io::Result<(u64, u64)> {
    let (mut bytes, mut entries) = (0u64, 0u64);
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let ft = e.file_type()?;
            entries += 1;
            if ft.is_dir() {
                todo.push(e.path());
            } else if ft.is_file() {
                bytes += e.metadata()?.len();
            }
        }
    }
    Ok((bytes, entries))
}

/// Pack a snapshot directory into a .tar.zst (symlinks kept as links). Refused when `--root`
/// could not unpack it ([`MAX_UNPACKED_BYTES`], [`MAX_ENTRIES`]).
pub fn pack(dir: &Path, out: &Path) -> Result<(), SnapshotError> {
    // Not a writer of the temporary tree (it only reads it): a signal may remove the tree
    // under it, and must not wait for it (it can block on a FIFO nobody drains).
    let (bytes, entries) = tree_totals(dir).map_err(|e| io(dir, e))?;
    if bytes > MAX_UNPACKED_BYTES || entries >= MAX_ENTRIES {
        return Err(SnapshotError::Refused {
            archive: out.display().to_string(),
            reason: format!(
                "the snapshot holds {bytes} bytes in {entries} entries, more than `--root` unpacks ({MAX_UNPACKED_BYTES} bytes, {MAX_ENTRIES} entries); write it as a directory (-o DIR) instead"
            ),
        });
    }
    // The one output rule (fsutil::write_output): a new or regular file atomically (a
    // half-written archive is never left under the name the next `check --root` reads), a
    // symlink written through and never replaced, a FIFO or device in place.
    let mut inner: Option<SnapshotError> = None;
    daqtune_probe::fsutil::write_output(out, 0o644, &mut |f| {
        pack_into(dir, out, f).map_err(|e| {
            let msg = e.to_string();
            inner = Some(e);
            std::io::Error::other(msg)
        })
    })
    .map_err(|e| inner.take().unwrap_or_else(|| io(out, e)))
}

fn pack_into(dir: &Path, out: &Path, f: &mut std::fs::File) -> Result<(), SnapshotError> {
    let enc = zstd::Encoder::new(f, 9).map_err(|e| io(out, e))?;
    let mut tar = tar::Builder::new(enc);
    tar.follow_symlinks(false);
    tar.append_dir_all(".", dir).map_err(|e| io(dir, e))?;
    let enc = tar.into_inner().map_err(|e| io(out, e))?;
    let f = enc.finish().map_err(|e| io(out, e))?;
    f.flush().map_err(|e| io(out, e))
}

/// Unpack a .tar.zst snapshot into `dest` (an empty directory), refusing what a snapshot never
/// holds: more than [`MAX_UNPACKED_BYTES`] or [`MAX_ENTRIES`], a path that is absolute or
/// climbs with `..`, an entry under a symlinked directory, a hard link, a FIFO, a device node,
/// a sparse or unknown entry type. Stops at the first of these; the caller removes `dest`.
pub fn unpack(archive: &Path, dest: &Path) -> Result<(), SnapshotError> {
    let refuse = |reason: String| SnapshotError::Refused {
        archive: archive.display().to_string(),
        reason,
    };
    // The signal cleanup waits for this writer to stop (at the checks below) before it
    // removes `dest`.
    let _writing = cleanup::writing();
    let f = std::fs::File::open(archive).map_err(|e| io(archive, e))?;
    let mut dec = zstd::Decoder::new(f).map_err(|e| io(archive, e))?;
    dec.window_log_max(ZSTD_WINDOW_LOG_MAX)
        .map_err(|e| io(archive, e))?;
    let over = std::rc::Rc::new(std::cell::Cell::new(false));
    let stream = Bounded {
        inner: dec,
        left: MAX_STREAM_BYTES,
        over: over.clone(),
    };
    let mut tar = tar::Archive::new(stream);
    // Raw entries: the GNU long names and pax records are read here, bounded, rather than
    // whole into memory by the tar crate.
    let entries = tar.entries().map_err(|e| io(archive, e))?.raw(true);
    let mut budget = MAX_UNPACKED_BYTES;
    let mut count = 0u64;
    let mut ext = Extensions::default();
    let mut known_dirs = std::collections::HashSet::new();
    for entry in entries {
        if cleanup::interrupted() {
            return Err(io(archive, cleanup::interrupted_error()));
        }
        let mut entry = entry.map_err(|e| {
            if over.get() {
                refuse(format!(
                    "the archive expands beyond {MAX_STREAM_BYTES} bytes of tar stream"
                ))
            } else {
                io(archive, e)
            }
        })?;
        count += 1;
        if count > MAX_ENTRIES {
            return Err(refuse(format!(
                "more than {MAX_ENTRIES} entries (a real snapshot has a few thousand)"
            )));
        }
        let kind = entry.header().entry_type();
        let declared = entry.header().entry_size().map_err(|e| io(archive, e))?;
        let ext_kind = matches!(
            kind,
            tar::EntryType::GNULongName
                | tar::EntryType::GNULongLink
                | tar::EntryType::XHeader
                | tar::EntryType::XGlobalHeader
        );
        if ext_kind {
            if declared > MAX_EXTENSION {
                return Err(refuse(format!(
                    "an extension record of {declared} bytes (at most {MAX_EXTENSION})"
                )));
            }
            let data = read_counted(&mut entry, MAX_EXTENSION, &mut budget)
                .map_err(|e| io(archive, e))?
                .ok_or_else(|| refuse(over_budget()))?;
            ext.take(kind, data).map_err(refuse)?;
            continue;
        }
        let path = ext
            .path
            .take()
            .unwrap_or_else(|| entry.header().path_bytes().into_owned());
        let link = ext
            .link
            .take()
            .or_else(|| entry.header().link_name_bytes().map(|l| l.into_owned()));
        let shown = String::from_utf8_lossy(&path).into_owned();
        let rel = safe_relative(&path).map_err(|why| refuse(format!("entry `{shown}`: {why}")))?;
        let what = match kind {
            tar::EntryType::Regular | tar::EntryType::Continuous if path.ends_with(b"/") => {
                "dir"
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => "file",
            tar::EntryType::Directory => "dir",
            tar::EntryType::Symlink => "symlink",
            tar::EntryType::Link => {
                return Err(refuse(format!(
                    "entry `{shown}` is a hard link: a snapshot holds files, directories and symlinks only"
                )))
            }
            other => {
                let name = match other {
                    tar::EntryType::Fifo => "a FIFO".to_string(),
                    tar::EntryType::Char => "a character device".to_string(),
                    tar::EntryType::Block => "a block device".to_string(),
                    tar::EntryType::GNUSparse => "a sparse file".to_string(),
                    o => format!("of tar type {:?}", o.as_byte() as char),
                };
                return Err(refuse(format!(
                    "entry `{shown}` is {name}: a snapshot holds files, directories and symlinks only"
                )));
            }
        };
        let Some(rel) = rel else {
            // `./`: the root itself.
            if what == "dir" {
                continue;
            }
            return Err(refuse(format!("entry `{shown}` has an empty path")));
        };
        if what != "file" && declared != 0 {
            return Err(refuse(format!(
                "entry `{shown}` ({what}) declares {declared} bytes of data"
            )));
        }
        make_parents(dest, &rel, &mut known_dirs)
            .map_err(|why| refuse(format!("entry `{shown}`: {why}")))?;
        let target = dest.join(&rel);
        let exists = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                refuse(format!("entry `{shown}` appears twice"))
            } else {
                io(&target, e)
            }
        };
        match what {
            "file" => {
                if declared > budget {
                    return Err(refuse(format!(
                        "entry `{shown}` declares {declared} bytes; the archive may unpack to at most {MAX_UNPACKED_BYTES} bytes"
                    )));
                }
                let mut out = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&target)
                    .map_err(exists)?;
                if !copy_counted(&mut entry, &mut out, &mut budget).map_err(|e| io(&target, e))? {
                    return Err(refuse(over_budget()));
                }
            }
            "dir" => match std::fs::symlink_metadata(&target) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(refuse(format!("entry `{shown}` appears twice"))),
                Err(_) => std::fs::create_dir(&target).map_err(|e| io(&target, e))?,
            },
            _ => {
                let link = link
                    .filter(|l| !l.is_empty())
                    .ok_or_else(|| refuse(format!("symlink `{shown}` has no target")))?;
                let link = std::ffi::OsStr::from_bytes(&link);
                symlink(link, &target).map_err(exists)?;
            }
        }
    }
    Ok(())
}

fn over_budget() -> String {
    format!(
        "the archive unpacks to more than {MAX_UNPACKED_BYTES} bytes (a real snapshot is a few MB)"
    )
}

use std::os::unix::ffi::OsStrExt;

/// The uncompressed stream, failing once more than `left` bytes were read from it.
struct Bounded<R> {
    inner: R,
    left: u64,
    over: std::rc::Rc<std::cell::Cell<bool>>,
}

impl<R: std::io::Read> std::io::Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            // One byte more than allowed tells the end of the stream from an excess.
            let mut probe = [0u8; 1];
            if self.inner.read(&mut probe)? == 0 {
                return Ok(0);
            }
            self.over.set(true);
            return Err(std::io::Error::other("archive stream over its limit"));
        }
        let max = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..max])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// Reads an entry's data (at most `max` bytes, all counted against `budget`); `None` when the
/// budget ran out.
fn read_counted(
    entry: &mut impl std::io::Read,
    max: u64,
    budget: &mut u64,
) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut data = Vec::new();
    entry.take(max.min(*budget) + 1).read_to_end(&mut data)?;
    if data.len() as u64 > *budget {
        return Ok(None);
    }
    *budget -= data.len() as u64;
    Ok(Some(data))
}

/// Copies an entry's data into `out`, counting each byte written against `budget` (the
/// declared size is not trusted); `false` when the budget ran out.
fn copy_counted(
    entry: &mut impl std::io::Read,
    out: &mut std::fs::File,
    budget: &mut u64,
) -> std::io::Result<bool> {
    use std::io::{Read, Write};
    let mut src = entry.take(*budget + 1);
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    loop {
        // One large entry is many chunks: a signal stops it between two.
        if cleanup::interrupted() {
            return Err(cleanup::interrupted_error());
        }
        let got = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        out.write_all(&buf[..got])?;
        n += got as u64;
    }
    if n > *budget {
        return Ok(false);
    }
    *budget -= n;
    Ok(true)
}

/// GNU long names and pax `path`/`linkpath` records for the next entry.
#[derive(Default)]
struct Extensions {
    path: Option<Vec<u8>>,
    link: Option<Vec<u8>>,
}

impl Extensions {
    fn take(&mut self, kind: tar::EntryType, mut data: Vec<u8>) -> Result<(), String> {
        match kind {
            tar::EntryType::GNULongName | tar::EntryType::GNULongLink => {
                while data.last() == Some(&0) {
                    data.pop();
                }
                if kind == tar::EntryType::GNULongName {
                    self.path = Some(data);
                } else {
                    self.link = Some(data);
                }
            }
            tar::EntryType::XHeader => {
                for rec in pax_records(&data)? {
                    match rec.0 {
                        b"path" => self.path = Some(rec.1.to_vec()),
                        b"linkpath" => self.link = Some(rec.1.to_vec()),
                        // A pax size overrides the header's for entries over 8 GiB; nothing
                        // that large fits the limits, and ignoring it would misread the rest.
                        b"size" => return Err("a pax size record (an entry over 8 GiB)".into()),
                        _ => {}
                    }
                }
            }
            // Global records (comments, mtimes) do not matter to a host root.
            _ => {}
        }
        Ok(())
    }
}

/// One pax record: key and value.
type PaxRecord<'a> = (&'a [u8], &'a [u8]);

/// `"<len> <key>=<value>\n"` records of a pax extended header.
fn pax_records(data: &[u8]) -> Result<Vec<PaxRecord<'_>>, String> {
    let bad = || "a malformed pax extended header".to_string();
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let sp = rest.iter().position(|b| *b == b' ').ok_or_else(bad)?;
        let len: usize = std::str::from_utf8(&rest[..sp])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(bad)?;
        if len <= sp + 1 || len > rest.len() || rest[len - 1] != b'\n' {
            return Err(bad());
        }
        let rec = &rest[sp + 1..len - 1];
        let eq = rec.iter().position(|b| *b == b'=').ok_or_else(bad)?;
        out.push((&rec[..eq], &rec[eq + 1..]));
        rest = &rest[len..];
    }
    Ok(out)
}

/// The entry's path as relative components; `Ok(None)` for the root itself (`./`).
fn safe_relative(path: &[u8]) -> Result<Option<PathBuf>, &'static str> {
    if path.first() == Some(&b'/') {
        return Err("an absolute path");
    }
    let mut rel = PathBuf::new();
    for c in path.split(|b| *b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return Err("a path that climbs with `..`"),
            c => rel.push(std::ffi::OsStr::from_bytes(c)),
        }
    }
    Ok((!rel.as_os_str().is_empty()).then_some(rel))
}

/// Creates the directories above `rel` inside `dest`, refusing to go through a symlink (an
/// entry written through a symlinked directory could land anywhere).
/// `known` holds the directories (relative) already seen to be real directories: nothing in an
/// unpacking replaces one (a second entry at a path is refused), so each is checked once, not
/// once per entry below it.
fn make_parents(
    dest: &Path,
    rel: &Path,
    known: &mut std::collections::HashSet<PathBuf>,
) -> Result<(), String> {
    let Some(parent) = rel.parent() else {
        return Ok(());
    };
    if parent.as_os_str().is_empty() || known.contains(parent) {
        return Ok(());
    }
    let mut at = dest.to_path_buf();
    let mut rel_at = PathBuf::new();
    for c in parent.components() {
        at.push(c);
        rel_at.push(c);
        if known.contains(&rel_at) {
            continue;
        }
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!(
                    "lies under the symlink `{}`: symlinked directories are refused",
                    at.strip_prefix(dest).unwrap_or(&at).display()
                ))
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "lies under `{}`, which is not a directory",
                    at.strip_prefix(dest).unwrap_or(&at).display()
                ))
            }
            Err(_) => std::fs::create_dir(&at).map_err(|e| format!("{}: {e}", at.display()))?,
        }
        known.insert(rel_at.clone());
    }
    Ok(())
}

/// A temporary directory removed on every way out of the process: when dropped (a return, an
/// error, a panic's unwinding) and on SIGINT, SIGTERM or SIGHUP, when the process removes every
/// live one and exits with 128 + the signal number (130, 143, 129). A snapshot unpacked for
/// `--root`, and one being packed, live in these.
pub struct TempRoot {
    path: PathBuf,
}

impl TempRoot {
    pub fn new(prefix: &str) -> std::io::Result<TempRoot> {
        cleanup::install()?;
        // Created and registered under the lock: a signal handled meanwhile waits for it and
        // then removes it too.
        let mut live = cleanup::live();
        let path = tempfile::Builder::new().prefix(prefix).tempdir()?.keep();
        live.push(path.clone());
        Ok(TempRoot { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let mut live = cleanup::live();
        live.retain(|p| p != &self.path);
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Signal handling for [`TempRoot`]: the handler only writes the signal number to a pipe
/// (async-signal-safe); a thread reading the pipe removes the directories and exits. While a
/// writer (unpacking, writing or packing a snapshot) runs, the thread only records the
/// signal: a directory removed while files are still being created in it comes back, so the
/// writer stops at its next checkpoint ([`cleanup::interrupted`]) and the last writer to stop
/// removes the directories and exits.
pub(crate) mod cleanup {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::sync::{Mutex, MutexGuard, OnceLock};

    static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    static PIPE_WR: AtomicI32 = AtomicI32::new(-1);
    /// The signal received, 0 when none: what writers poll.
    static PENDING: AtomicI32 = AtomicI32::new(0);
    /// Writers running now.
    static WRITERS: Mutex<usize> = Mutex::new(0);

    pub(super) fn live() -> MutexGuard<'static, Vec<PathBuf>> {
        LIVE.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn writers() -> MutexGuard<'static, usize> {
        WRITERS.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a termination signal came: a writer returns [`interrupted_error`] at once.
    pub fn interrupted() -> bool {
        PENDING.load(Ordering::SeqCst) != 0
    }

    pub fn interrupted_error() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::Interrupted, "interrupted by a signal")
    }

    /// Marks a writer as running until dropped; the signal's cleanup waits for it.
    pub struct Writing(());

    pub fn writing() -> Writing {
        let mut n = writers();
        let sig = PENDING.load(Ordering::SeqCst);
        if sig != 0 {
            finish(sig);
        }
        *n += 1;
        Writing(())
    }

    impl Drop for Writing {
        fn drop(&mut self) {
            let mut n = writers();
            *n = n.saturating_sub(1);
            let sig = PENDING.load(Ordering::SeqCst);
            if *n == 0 && sig != 0 {
                finish(sig);
            }
        }
    }

    /// Removes every live directory and ends the process; called with no writer running, and
    /// with the writers' lock held so that none starts.
    fn finish(sig: i32) -> ! {
        let dirs = live();
        for d in dirs.iter() {
            let _ = std::fs::remove_dir_all(d);
        }
        eprintln!("daqtune: interrupted (signal {sig}); temporary files removed");
        // SAFETY: ends the process at once, holding the locks so that no new temporary
        // directory or writer appears; nothing else needs to run.
        unsafe { libc::_exit(128 + sig) };
    }

    extern "C" fn on_signal(sig: libc::c_int) {
        let b = sig as u8;
        // SAFETY: write(2) is async-signal-safe; the byte lives on this stack frame. A full
        // pipe (signals arriving faster than the thread exits) loses nothing that matters.
        unsafe {
            libc::write(PIPE_WR.load(Ordering::SeqCst), (&b as *const u8).cast(), 1);
        }
    }

    fn watch(rd: libc::c_int) {
        loop {
            let mut b = 0u8;
            // SAFETY: reads one byte into a valid buffer from the pipe this module owns.
            let n = unsafe { libc::read(rd, (&mut b as *mut u8).cast(), 1) };
            if n == 1 {
                let sig = i32::from(b);
                let n = writers();
                // The first signal decides the exit status.
                let _ = PENDING.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
                if *n == 0 {
                    finish(PENDING.load(Ordering::SeqCst));
                }
                // A writer runs: it sees the flag and the last one out finishes.
                continue;
            }
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
    }

    pub(super) fn install() -> std::io::Result<()> {
        static DONE: OnceLock<Result<(), String>> = OnceLock::new();
        DONE.get_or_init(|| {
            let mut fds = [0 as libc::c_int; 2];
            // SAFETY: `fds` has room for the two descriptors pipe2 writes.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                return Err(std::io::Error::last_os_error().to_string());
            }
            PIPE_WR.store(fds[1], Ordering::SeqCst);
            let rd = fds[0];
            std::thread::Builder::new()
                .name("daqtune-cleanup".into())
                .spawn(move || watch(rd))
                .map_err(|e| e.to_string())?;
            // The handler only calls write(2) on the pipe the watcher thread reads.
            daqtune_probe::signals::on_termination(on_signal).map_err(|e| e.to_string())?;
            Ok(())
        })
        .clone()
        .map_err(std::io::Error::other)
    }
}

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
