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

/// Largest file copied; sysfs attributes are a page, procfs files a few KB.
const MAX_FILE: usize = 4 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
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
        let _ = rec_host.read_bytes_limited(p, MAX_FILE);
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
                if let Ok(data) = plain.read_bytes_limited(path, MAX_FILE) {
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
                let data = plain.read_bytes_limited(path, MAX_FILE).unwrap_or_default();
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
        for a in crate::context::artifacts::daqtune_artifacts(&facts, &p) {
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

/// Pack a snapshot directory into a .tar.zst (symlinks kept as links).
pub fn pack(dir: &Path, out: &Path) -> Result<(), SnapshotError> {
    // Atomically (temp file beside it, then rename): a half-written archive is never left
    // under the name a collector or the next `check --root` reads.
    let mut inner: Option<SnapshotError> = None;
    daqtune_probe::fsutil::atomic_replace(out, 0o644, &mut |f| {
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

/// Unpack a .tar.zst snapshot into `dest`.
pub fn unpack(archive: &Path, dest: &Path) -> Result<(), SnapshotError> {
    let f = std::fs::File::open(archive).map_err(|e| io(archive, e))?;
    let dec = zstd::Decoder::new(f).map_err(|e| io(archive, e))?;
    let mut tar = tar::Archive::new(dec);
    tar.set_preserve_permissions(false);
    tar.unpack(dest).map_err(|e| io(archive, e))?;
    Ok(())
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
