//! A snapshot as a `.tar.zst`: packing one, and unpacking an untrusted one for `--root`
//! (bounded while it streams, refused at the first entry a snapshot never holds).

use super::{cleanup, io, SnapshotError};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
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
            ext.take(kind, data).map_err(|r| refuse(r.to_string()))?;
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
        let what =
            entry_kind(kind, &path).map_err(|why| refuse(format!("entry `{shown}` {why}")))?;
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

/// What an entry unpacks to: `file`, `dir` or `symlink`; nothing else is in a snapshot.
fn entry_kind(kind: tar::EntryType, path: &[u8]) -> Result<&'static str, Refusal> {
    Ok(match kind {
        tar::EntryType::Regular | tar::EntryType::Continuous if path.ends_with(b"/") => "dir",
        tar::EntryType::Regular | tar::EntryType::Continuous => "file",
        tar::EntryType::Directory => "dir",
        tar::EntryType::Symlink => "symlink",
        other => {
            return Err(Refusal::Kind(match other {
                tar::EntryType::Link => "a hard link".to_string(),
                tar::EntryType::Fifo => "a FIFO".to_string(),
                tar::EntryType::Char => "a character device".to_string(),
                tar::EntryType::Block => "a block device".to_string(),
                tar::EntryType::GNUSparse => "a sparse file".to_string(),
                o => format!("of tar type {:?}", o.as_byte() as char),
            }))
        }
    })
}

fn over_budget() -> String {
    format!(
        "the archive unpacks to more than {MAX_UNPACKED_BYTES} bytes (a real snapshot is a few MB)"
    )
}

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
    fn take(&mut self, kind: tar::EntryType, mut data: Vec<u8>) -> Result<(), Refusal> {
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
                        b"size" => return Err(Refusal::PaxSize),
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

/// What in an archive's structure refuses it (the reason of [`SnapshotError::Refused`]).
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("a pax size record (an entry over 8 GiB)")]
    PaxSize,
    #[error("a malformed pax extended header")]
    BadPax,
    #[error("lies under the symlink `{0}`: symlinked directories are refused")]
    UnderSymlink(String),
    #[error("lies under `{0}`, which is not a directory")]
    UnderFile(String),
    #[error("{0}: {1}")]
    Mkdir(String, std::io::Error),
    #[error("is {0}: a snapshot holds files, directories and symlinks only")]
    Kind(String),
}

/// One pax record: key and value.
type PaxRecord<'a> = (&'a [u8], &'a [u8]);

/// `"<len> <key>=<value>\n"` records of a pax extended header.
fn pax_records(data: &[u8]) -> Result<Vec<PaxRecord<'_>>, Refusal> {
    let bad = || Refusal::BadPax;
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
) -> Result<(), Refusal> {
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
                return Err(Refusal::UnderSymlink(
                    at.strip_prefix(dest).unwrap_or(&at).display().to_string(),
                ))
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Refusal::UnderFile(
                    at.strip_prefix(dest).unwrap_or(&at).display().to_string(),
                ))
            }
            Err(_) => {
                std::fs::create_dir(&at).map_err(|e| Refusal::Mkdir(at.display().to_string(), e))?
            }
        }
        known.insert(rel_at.clone());
    }
    Ok(())
}
