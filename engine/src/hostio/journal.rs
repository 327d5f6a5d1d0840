//! The apply journal: what each run changed, with the original of every file (or the fact that
//! it did not exist) and every runtime value, so `daqtune revert` can put it all back.
//!
//! Layout, under `<root>/var/lib/daqtune/journal/`:
//!
//! ```text
//! 20261122T010203Z-1234/journal.json   the entries (schema daqtune.journal/v1)
//! 20261122T010203Z-1234/files/0003     byte-for-byte original of entry 3's file
//! ```
//!
//! Write-ahead: an entry (and its saved original) is on disk before the change is made, and
//! the entry is marked done after. Reverting an entry that never completed restores a value
//! that is still in place, which is harmless, so a crash at any point leaves a journal that
//! `revert` can replay.

use super::setters::Writer;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};

pub const SCHEMA: &str = "daqtune.journal/v1";
/// Host path of the journal directory.
pub const JOURNAL_DIR: &str = "/var/lib/daqtune/journal";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunState {
    /// Changes were being made (or the run was interrupted).
    Applying,
    Applied,
    /// Some changes failed; the journal holds those that were made.
    Partial,
    Reverted,
}

/// One recorded change. Paths are host paths (`/etc/...`, `/sys/...`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Entry {
    /// A file written. `original`: the saved copy (`files/NNNN`) and its mode, or `None` when
    /// the file did not exist.
    File {
        path: String,
        original: Option<Saved>,
        /// The outermost directory the write created (removed again on revert if empty).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        created_dir: Option<String>,
        /// The path was a symlink to this target (and `original` is `None`): revert puts the
        /// link itself back, not a copy of what it pointed to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        link: Option<String>,
        /// The saved copy (`files/NNNN.new`) of what the run wrote, so `status` can tell a
        /// file changed since and a partial revert a later run's rewrite. `None` in journals
        /// from before this field.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        written: Option<String>,
        /// A file that carries several settings (`super::parts`): which of them this write
        /// changed, so `revert --only` takes out exactly their parts. `None`: the file is one
        /// setting's (the record's check).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parts: Option<super::parts::FileParts>,
    },
    /// A symlink created (enabling a unit). `original`: the previous link target, if any.
    Symlink {
        path: String,
        original: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        created_dir: Option<String>,
        /// Where the run pointed the link (`None` in journals from before this field).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<String>,
    },
    /// A kernel attribute written. `original` is the exact content read before.
    Attr {
        check: String,
        path: String,
        original: String,
        new: String,
        /// A count of a shared pool (`Action::Attr::shared_count`): revert gives back what
        /// the run added. Journals from before this field hold it only for hugepage counts.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        shared_count: bool,
    },
    /// An MTU set through SIOCSIFMTU (live hosts).
    Mtu {
        ifname: String,
        original: u32,
        new: u32,
    },
    /// A port's ethtool settings set through ethtool netlink (live hosts): revert sets
    /// `original` back.
    Ethtool {
        ifname: String,
        group: daqtune_probe::net::ethtool::Group,
        original: daqtune_probe::net::ethtool::Settings,
        new: daqtune_probe::net::ethtool::Settings,
    },
    /// A config-space register written (DevCtl for MRRS, ACS Control); only `mask` bits
    /// were changed and only they go back.
    ConfigWord {
        bdf: String,
        path: String,
        offset: u64,
        original: u16,
        new: u16,
        #[serde(default = "mrrs_mask")]
        mask: u16,
    },
    /// A module daqtune loaded (it was not loaded before).
    Module { name: String },
    /// A file system daqtune mounted (nothing was mounted there before); `created_dir`: the
    /// mount point did not exist and apply made it (revert removes it when empty).
    Mount {
        fstype: String,
        target: String,
        #[serde(default)]
        created_dir: bool,
    },
    /// A GPU clock lock. `previously_locked`: a lock was in place before (not undone).
    GpuLock {
        uuid: String,
        domain: super::gpu::GpuDomain,
        previously_locked: bool,
        /// What apply's read-back showed (`super::gpu::Locked::shown`): `Some(false)`, the lock
        /// did not take, so the gpu.clocks check does not count it as daqtune's lock; `None`
        /// (also a journal older than this field) NVML could not tell.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shown: Option<bool>,
        /// The P-state floor before the lock, so revert can tell a reset that did not take
        /// from a clock that is fixed at its maximum (HBM).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        floor_before_mhz: Option<u32>,
    },
    /// GPU persistence mode set; `original` is what it was.
    GpuPersistence {
        uuid: String,
        original: Option<bool>,
    },
}

/// Journals written before `Entry::Attr::shared_count` existed (daqtune 0.1.0 up to the
/// architecture refactor) recorded the flag nowhere: their revert gave back only what a run
/// added to a `nr_hugepages` count, the one shared pool they wrote. Reading such a journal, an
/// `attr` entry without the key gets the flag that revert then applied, so an upgrade between
/// apply and revert undoes the same way. A format migration, kept here with the format; new
/// journals always carry the flag where it is true.
fn mark_legacy_shared_counts(doc: &mut serde_json::Value) {
    let Some(records) = doc.get_mut("records").and_then(|r| r.as_array_mut()) else {
        return;
    };
    for entry in records.iter_mut().filter_map(|r| r.get_mut("entry")) {
        let Some(obj) = entry.as_object_mut() else {
            continue;
        };
        let legacy_pool = obj.get("kind").and_then(|k| k.as_str()) == Some("attr")
            && !obj.contains_key("shared_count")
            && obj
                .get("path")
                .and_then(|p| p.as_str())
                .is_some_and(|p| p.ends_with("/nr_hugepages"));
        if legacy_pool {
            obj.insert("shared_count".into(), serde_json::Value::Bool(true));
        }
    }
}

/// Journals written before the record-level `check` (daqtune up to issue 26) named the setting
/// only in `attr` entries. Reading one, an `attr` record gets its entry's check, so `revert
/// --only` and `status` can attribute it; other records stay without one (the run can then
/// only be reverted whole, and `revert --only` says so). A format migration beside the format.
fn attribute_legacy_checks(doc: &mut serde_json::Value) {
    let Some(records) = doc.get_mut("records").and_then(|r| r.as_array_mut()) else {
        return;
    };
    for rec in records.iter_mut().filter_map(|r| r.as_object_mut()) {
        if rec.contains_key("check") {
            continue;
        }
        let check = rec
            .get("entry")
            .filter(|e| e.get("kind").and_then(|k| k.as_str()) == Some("attr"))
            .and_then(|e| e.get("check"))
            .and_then(|c| c.as_str())
            .map(str::to_string);
        if let Some(c) = check {
            rec.insert("check".into(), serde_json::Value::String(c));
        }
    }
}

fn mrrs_mask() -> u16 {
    0x7000
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Saved {
    pub blob: String,
    pub mode: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub entry: Entry,
    pub done: bool,
    /// The check (tunable id) whose change this is; `None` only in journals from before
    /// the field that the migration cannot attribute ([`attribute_legacy_checks`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
}

impl Record {
    /// The settings whose change this record holds: a multi-setting file's owners, else its
    /// check (none for an unattributed record of an old journal).
    pub fn checks(&self) -> Vec<&str> {
        match &self.entry {
            Entry::File { parts: Some(p), .. } => p.owners.iter().map(String::as_str).collect(),
            _ => self.check.as_deref().into_iter().collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalDoc {
    pub schema: String,
    pub id: String,
    pub profile: String,
    pub started_unix: u64,
    pub state: RunState,
    pub records: Vec<Record>,
    /// What the run reported as waiting for a reboot.
    #[serde(default)]
    pub pending_reboot: Vec<String>,
    /// The options beyond the profile that shaped the run's plan, so a later `apply` (a
    /// rewrite of the same grub drop-in, say) can keep them instead of silently dropping them.
    #[serde(default, skip_serializing_if = "RecordedSelection::is_empty")]
    pub selection: RecordedSelection,
    /// The daqtune version that made the run; `None` in journals from before the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daqtune_version: Option<String>,
    /// When the run finished (applied, partial or reverted last), Unix seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_unix: Option<u64>,
    /// How the run was asked for (the options `status` shows); `None` in journals from before
    /// the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<RunOptions>,
    /// The records `revert --only` undid, moved out of `records` (which hold what is still in
    /// effect, as every reader of the journal expects), kept so `status` can say what was
    /// undone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undone: Vec<Record>,
}

/// The options of an apply run, as `status` shows them (`RecordedSelection` holds those a
/// later apply keeps).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOptions {
    /// Where the profile came from (`--profile igx-orin`, `detected and confirmed: ...`).
    #[serde(default)]
    pub profile_origin: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub runtime_only: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub persist_only: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fresh: bool,
}

impl RunOptions {
    /// The options as command-line words (`--only pcie.mrrs --runtime-only`).
    pub fn words(&self, sel: &RecordedSelection) -> Vec<String> {
        let mut w = Vec::new();
        if !self.only.is_empty() {
            w.push(format!("--only {}", self.only.join(",")));
        }
        if self.runtime_only {
            w.push("--runtime-only".into());
        }
        if self.persist_only {
            w.push("--persist-only".into());
        }
        if let Some(d) = &self.device {
            w.push(format!("--device {d}"));
        }
        if let Some(c) = &sel.config {
            w.push(format!("--config {c}"));
        }
        if sel.allow_acs {
            w.push("--allow-acs".into());
        }
        if self.fresh {
            w.push("--fresh".into());
        }
        w
    }
}

/// `--config` and `--allow-acs` of an apply run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedSelection {
    /// Absolute path of the DAQIRI configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_acs: bool,
}

impl RecordedSelection {
    pub fn is_empty(&self) -> bool {
        self.config.is_none() && !self.allow_acs
    }
}

/// The selection of the newest run that is still in effect (not reverted), with its id.
pub fn last_selection(base: &Path) -> Option<(String, RecordedSelection)> {
    list_runs(base).into_iter().rev().find_map(|d| {
        let j = Journal::open(&d).ok()?;
        (j.doc.state != RunState::Reverted).then_some((j.doc.id, j.doc.selection))
    })
}

/// An open journal for one run.
pub struct Journal {
    /// Real path of this run's directory.
    pub dir: PathBuf,
    pub doc: JournalDoc,
    /// The check whose change is being made: stamped on each record [`Journal::record`] and
    /// [`Journal::push`] add (the executor sets it per change, so the tunables' own setters
    /// need not pass it).
    pub current_check: Option<String>,
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `YYYYMMDDTHHMMSSZ` from Unix seconds (UTC), so directory names sort by time.
pub fn stamp(secs: u64) -> String {
    daqtune_probe::text::rfc3339_utc(secs).replace(['-', ':'], "")
}

impl Journal {
    /// Start a run's journal in `base` (the real path of the journal directory).
    pub fn create(base: &Path, profile: &str, w: &mut dyn Writer) -> io::Result<Journal> {
        let started = now_unix();
        let mut id = format!("{}-{}", stamp(started), std::process::id());
        let mut n = 1;
        while base.join(&id).exists() {
            id = format!("{}-{}.{n}", stamp(started), std::process::id());
            n += 1;
        }
        let j = Journal {
            dir: base.join(&id),
            doc: JournalDoc {
                schema: SCHEMA.into(),
                id,
                profile: profile.into(),
                started_unix: started,
                state: RunState::Applying,
                records: Vec::new(),
                pending_reboot: Vec::new(),
                selection: RecordedSelection::default(),
                daqtune_version: Some(env!("CARGO_PKG_VERSION").to_string()),
                finished_unix: None,
                options: None,
                undone: Vec::new(),
            },
            current_check: None,
        };
        j.flush(w)?;
        Ok(j)
    }

    pub fn open(dir: &Path) -> io::Result<Journal> {
        let text = std::fs::read_to_string(dir.join("journal.json"))?;
        let invalid = |e: serde_json::Error| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", dir.display()),
            )
        };
        let mut value: serde_json::Value = serde_json::from_str(&text).map_err(invalid)?;
        mark_legacy_shared_counts(&mut value);
        attribute_legacy_checks(&mut value);
        let doc: JournalDoc = serde_json::from_value(value).map_err(invalid)?;
        if doc.schema != SCHEMA {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: unknown journal schema `{}`", dir.display(), doc.schema),
            ));
        }
        Ok(Journal {
            dir: dir.to_path_buf(),
            doc,
            current_check: None,
        })
    }

    pub fn flush(&self, w: &mut dyn Writer) -> io::Result<()> {
        let text = serde_json::to_vec_pretty(&self.doc)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        w.write_file(&self.dir.join("journal.json"), &text, 0o600)
    }

    /// Save a file's original bytes; returns the blob name.
    pub fn save_blob(&self, w: &mut dyn Writer, data: &[u8]) -> io::Result<String> {
        let name = format!("files/{:04}", self.doc.records.len());
        w.write_file(&self.dir.join(&name), data, 0o600)?;
        Ok(name)
    }

    /// Save the bytes a file entry about to be recorded writes (`files/NNNN.new`).
    pub fn save_written(&self, w: &mut dyn Writer, data: &[u8]) -> io::Result<String> {
        let name = format!("files/{:04}.new", self.doc.records.len());
        w.write_file(&self.dir.join(&name), data, 0o600)?;
        Ok(name)
    }

    /// A saved copy's bytes. Never through a symlink: a journal under a hostile `--root` could
    /// point `files/NNNN` (or `files/`) at any file of the machine, and revert would copy it
    /// into the root. Such a copy is refused with what it is.
    pub fn blob(&self, name: &str) -> io::Result<Vec<u8>> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        if name.contains("..") || name.starts_with('/') {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "bad blob name"));
        }
        let refused = |what: String| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{what}; a journal's saved copies are plain files (refusing to follow it)"),
            )
        };
        // Every directory between the run and the copy is a real directory.
        let mut dir = self.dir.clone();
        let parts: Vec<&str> = name.split('/').collect();
        for d in &parts[..parts.len().saturating_sub(1)] {
            dir.push(d);
            let m = std::fs::symlink_metadata(&dir)?;
            if !m.file_type().is_dir() {
                return Err(refused(format!("{} is a symlink", dir.display())));
            }
        }
        let path = self.dir.join(name);
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => refused(format!("{} is a symlink", path.display())),
                _ => e,
            })?;
        if !f.metadata()?.file_type().is_file() {
            return Err(refused(format!("{} is not a plain file", path.display())));
        }
        let mut out = Vec::new();
        f.read_to_end(&mut out)?;
        Ok(out)
    }

    /// Record an entry before making the change; returns its index.
    pub fn record(&mut self, w: &mut dyn Writer, entry: Entry) -> io::Result<usize> {
        let check = self.current_check.clone();
        self.doc.records.push(Record {
            entry,
            done: false,
            check,
        });
        self.flush(w)?;
        Ok(self.doc.records.len() - 1)
    }

    /// Add an entry without writing the journal: the caller flushes before making any of the
    /// changes so recorded (batches of kernel attributes: one flush instead of one per CPU).
    pub fn push(&mut self, entry: Entry) -> usize {
        let check = self.current_check.clone();
        self.doc.records.push(Record {
            entry,
            done: false,
            check,
        });
        self.doc.records.len() - 1
    }

    pub fn set_done(&mut self, idx: usize) {
        if let Some(r) = self.doc.records.get_mut(idx) {
            r.done = true;
        }
    }

    pub fn mark_done(&mut self, w: &mut dyn Writer, idx: usize) -> io::Result<()> {
        if let Some(r) = self.doc.records.get_mut(idx) {
            r.done = true;
        }
        self.flush(w)
    }

    /// Takes back the write-ahead entry of an action whose call failed without changing anything
    /// (a refused lock, a module that did not load): replaying it on revert would undo what this
    /// run never did - unload a module someone else loads, unlock someone else's clock - and a
    /// failing undo would keep the run from ever being marked reverted.
    pub fn take_back(&mut self, w: &mut dyn Writer, idx: usize) {
        if idx + 1 == self.doc.records.len() {
            self.doc.records.pop();
            let _ = self.flush(w);
        }
    }

    pub fn finish(&mut self, w: &mut dyn Writer, state: RunState) -> io::Result<()> {
        self.doc.state = state;
        self.doc.finished_unix = Some(now_unix());
        self.flush(w)
    }
}

/// Every run's directory under `base`, oldest first.
pub fn list_runs(base: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(base)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.join("journal.json").is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostio::setters::FsWriter;

    #[test]
    fn stamps_sort() {
        assert_eq!(stamp(0), "19700101T000000Z");
        assert_eq!(stamp(1_795_395_723), "20261123T010203Z");
        assert!(stamp(1_000_000_000) < stamp(1_000_000_001));
    }

    #[test]
    fn round_trip() {
        let d = tempfile::tempdir().expect("tmp");
        let mut w = FsWriter::new();
        let mut j = Journal::create(d.path(), "igx-orin", &mut w).expect("create");
        let blob = j.save_blob(&mut w, b"GRUB\n").expect("blob");
        let i = j
            .record(
                &mut w,
                Entry::File {
                    path: "/etc/x".into(),
                    original: Some(Saved {
                        blob: blob.clone(),
                        mode: 0o644,
                    }),
                    created_dir: None,
                    link: None,
                    written: None,
                    parts: None,
                },
            )
            .expect("record");
        j.mark_done(&mut w, i).expect("done");
        j.finish(&mut w, RunState::Applied).expect("finish");
        let runs = list_runs(d.path());
        assert_eq!(runs.len(), 1);
        let j2 = Journal::open(&runs[0]).expect("open");
        assert_eq!(j2.doc, j.doc);
        assert_eq!(j2.blob(&blob).expect("blob"), b"GRUB\n");
        assert!(j2.blob("../x").is_err());
    }

    /// A journal written before `shared_count` existed reverts its hugepage count as it did
    /// then (giving back what the run added); other attributes are plain writes.
    #[test]
    fn a_journal_from_before_shared_count_keeps_its_revert() {
        let d = tempfile::tempdir().expect("tmp");
        let mut w = FsWriter::new();
        let mut j = Journal::create(d.path(), "igx-orin", &mut w).expect("create");
        for path in [
            "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
            "/sys/class/net/eth0/mtu",
        ] {
            j.record(
                &mut w,
                Entry::Attr {
                    check: "x".into(),
                    path: path.into(),
                    original: "0".into(),
                    new: "1".into(),
                    shared_count: false,
                },
            )
            .expect("record");
        }
        j.finish(&mut w, RunState::Applied).expect("finish");
        let run = list_runs(d.path()).pop().expect("run");
        let text = std::fs::read_to_string(run.join("journal.json")).expect("read");
        assert!(!text.contains("shared_count"), "an old journal has no key");
        let flags: Vec<bool> = Journal::open(&run)
            .expect("open")
            .doc
            .records
            .iter()
            .map(|r| match &r.entry {
                Entry::Attr { shared_count, .. } => *shared_count,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(flags, [true, false]);
    }

    /// A journal from before the record-level check and the header fields: the attribute
    /// records are attributed from their entries, the rest stay unattributed, and the header
    /// fields read as not recorded. A new journal records them all.
    #[test]
    fn an_old_journal_gets_its_attribute_checks_and_no_invented_header() {
        let old = r#"{"schema":"daqtune.journal/v1","id":"20250101T000000Z-1","profile":"igx-orin",
            "started_unix":1,"state":"applied","records":[
            {"entry":{"kind":"attr","check":"cpu.governor","path":"/sys/x","original":"a","new":"b"},"done":true},
            {"entry":{"kind":"file","path":"/etc/x","original":null},"done":true}]}"#;
        let d = tempfile::tempdir().expect("tmp");
        std::fs::write(d.path().join("journal.json"), old).expect("write");
        let j = Journal::open(d.path()).expect("open");
        let checks: Vec<Option<&str>> = j.doc.records.iter().map(|r| r.check.as_deref()).collect();
        assert_eq!(checks, [Some("cpu.governor"), None]);
        assert_eq!(j.doc.daqtune_version, None);
        assert_eq!(j.doc.options, None);
        assert_eq!(j.doc.finished_unix, None);
        let mut w = FsWriter::new();
        let mut n = Journal::create(d.path(), "igx-orin", &mut w).expect("create");
        n.current_check = Some("nic.mtu".into());
        let blob = n.save_written(&mut w, b"new").expect("written");
        assert!(blob.ends_with(".new"), "{blob}");
        n.record(
            &mut w,
            Entry::Symlink {
                path: "/etc/l".into(),
                original: None,
                created_dir: None,
                to: Some("/etc/t".into()),
            },
        )
        .expect("record");
        n.finish(&mut w, RunState::Applied).expect("finish");
        let back = Journal::open(&n.dir).expect("reopen");
        assert_eq!(back.doc.records[0].check.as_deref(), Some("nic.mtu"));
        assert_eq!(
            back.doc.daqtune_version.as_deref(),
            Some(env!("CARGO_PKG_VERSION"))
        );
        assert!(back.doc.finished_unix.is_some());
        assert_eq!(back.blob(&blob).expect("blob"), b"new");
    }
}
