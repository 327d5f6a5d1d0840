//! `daqtune snapshot`: capture exactly what the checks read, as a host root.
//!
//! The checks run once per built-in profile (and the chosen one) on a recording [`Host`], so
//! the snapshot holds every file, directory listing and symlink they touched — no more. Files
//! are written at their resolved place and links recreated with their raw targets, so that
//! `daqtune check --root SNAP` resolves paths exactly as the source host did. Facts that are
//! not files (NVML, CUDA) are written as JSON under `daqtune/`.

mod archive;
mod redact;
mod tempdir;

pub use archive::{pack, unpack, MAX_ENTRIES, MAX_UNPACKED_BYTES};
pub use redact::{redact_config_dsn, Redactor};
pub(crate) use tempdir::cleanup;
pub use tempdir::TempRoot;

use crate::check::commands::{self, UsageError};
pub use crate::model::facts::interesting_kmsg;
use crate::model::facts::UnitsRecord;
use crate::model::profile;
use daqtune_probe::host::{Access, Recording};
use daqtune_probe::Host;
use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

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
                copy_listing(&plain, path, &real, &dest);
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
    let links = write_links(&mut w, &rec.links)?;
    // Non-file facts.
    let dq = out.join("daqtune");
    std::fs::create_dir_all(&dq).map_err(|e| io(&dq, e))?;
    if host.is_live() {
        write_live_facts(&mut w, host, chosen)?;
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

/// The entry names and kinds of a listed directory (`path`, at `real` on the host), as empty
/// files, directories and links under `dest`: what a listing returns, without the content.
fn copy_listing(plain: &Host, path: &str, real: &Path, dest: &Path) {
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

/// The symlinks the checks went through, with their raw targets; returns how many.
fn write_links(
    w: &mut Writer<'_>,
    links: &BTreeMap<String, String>,
) -> Result<usize, SnapshotError> {
    let mut n = 0usize;
    for (link, target) in links {
        let dest = w.out.join(link.trim_start_matches('/'));
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
        n += 1;
    }
    Ok(n)
}

/// The live host's facts that are not files: the kernel log's lines of interest, the GPU
/// facts, systemd's state of daqtune's units, the architecture.
fn write_live_facts(
    w: &mut Writer<'_>,
    host: &Host,
    chosen: &profile::LoadedProfile,
) -> Result<(), SnapshotError> {
    if let Some(k) = crate::model::facts::read_kmsg() {
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
        crate::model::facts::UNITS_RECORD,
        units.to_json().as_bytes(),
    )?;
    // The ports' ethtool settings (rings, coalescing, pause, features, channels) come from
    // ethtool netlink, not files: record each group, or why there is none.
    write_ethtool(w, host)?;
    let arch = std::env::consts::ARCH;
    w.write_file(
        Path::new("daqtune/arch"),
        "/daqtune/arch",
        format!("{arch}\n").as_bytes(),
    )?;
    Ok(())
}

/// Every network interface's ethtool groups as `daqtune/ethtool/IF/GROUP.json` (what
/// `Facts::ethtool` reads under a root; docs/ethtool-facts.md).
fn write_ethtool(w: &mut Writer<'_>, host: &Host) -> Result<(), SnapshotError> {
    use daqtune_probe::net::ethtool::{recorded_json, recorded_path, Client};
    let Ok(names) = host.read_dir("/sys/class/net") else {
        return Ok(());
    };
    let Ok(mut client) = Client::open() else {
        return Ok(());
    };
    for ifname in names {
        if daqtune_units::validate::interface_name(&ifname).is_err() {
            continue;
        }
        for (group, r) in client.read_port(&ifname) {
            let path = recorded_path(&ifname, group);
            w.write_file(
                Path::new(path.trim_start_matches('/')),
                &path,
                recorded_json(&r).as_bytes(),
            )?;
        }
    }
    Ok(())
}

/// systemd's state of each unit daqtune wrote on `host` (live): the record
/// [`crate::model::facts::UNITS_RECORD`] that a replay of the snapshot reads.
pub fn record_unit_states(host: &Host, chosen: &profile::LoadedProfile) -> UnitsRecord {
    let facts = crate::model::facts::Facts::new(host);
    let mut rec = UnitsRecord {
        schema: crate::model::facts::UNITS_SCHEMA.into(),
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
        for a in crate::model::context::artifacts::daqtune_artifacts(
            &facts,
            &crate::tunables::owned_files(&p),
        ) {
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
            Err(e @ crate::model::facts::UnitStateError::NoSystemd(_)) => {
                rec.systemd_unavailable = Some(e.to_string());
                rec.units.clear();
                break;
            }
            Err(_) => {}
        }
    }
    rec
}
