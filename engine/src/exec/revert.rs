//! `daqtune revert`: replay journals backwards, newest run first.

use super::apply::{file_reads_back, link_reads_back, read_word, real_path, StepError};
use crate::hostio::journal::{list_runs, Entry, Journal, Record, RunState};
use crate::hostio::setters::{self, Target, Writer};
use daqtune_probe::Host;
use std::path::Path;

#[derive(Debug, Clone, Default)]
pub struct RevertReport {
    /// (what, result) per entry undone.
    pub steps: Vec<(String, Result<(), String>)>,
    /// The runs reverted completely (now marked reverted).
    pub runs: Vec<String>,
    /// The runs some step of which failed: (id, failed steps, steps). They stay in effect and
    /// a later revert tries them again.
    pub incomplete: Vec<(String, usize, usize)>,
    /// The runs some checks of which were undone (`--only`): (id, the checks undone so far).
    /// They stay in effect with the rest.
    pub partial: Vec<(String, Vec<String>)>,
    pub commands: Vec<(String, Result<(), String>)>,
}

impl RevertReport {
    pub fn failed(&self) -> usize {
        self.steps.iter().filter(|s| s.1.is_err()).count()
    }
}

/// Why one step of a revert failed, or its read-back shows the change is not undone. The text
/// is what revert prints for the step; it is made only when the report is (`revert_run`).
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// The journal names a path apply never writes: nothing is done for it.
    #[error("the journal names a path apply never writes ({0}); nothing done")]
    PathRefused(&'static str),
    /// Resolving the path inside the root, or a file's or link's read-back (apply's words).
    #[error(transparent)]
    Step(#[from] StepError),
    /// A write, removal or read of the step failed (`what`: the path, device or interface).
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("{0}: removed, but it is still there")]
    StillThere(String),
    #[error("{path}: read back after removing it: {source}")]
    GoneUnknown {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: wrote `{value}` back, reads `{back}`")]
    AttrDiffers {
        path: String,
        value: String,
        back: String,
    },
    #[error(transparent)]
    Ethtool(#[from] setters::EthtoolError),
    #[error("{ifname}: MTU reads {back} after restoring {original}")]
    MtuDiffers {
        ifname: String,
        back: u32,
        original: u32,
    },
    #[error("{0}: the register reads 0xffff (device gone); not writing")]
    DeviceGone(String),
    /// `bits`: the original value of the bits apply changed (`mask`).
    #[error("{bdf}: wrote 0x{restored:04x} back (bits 0x{mask:04x} = 0x{bits:04x}), reads back 0x{back:04x}")]
    RegisterDiffers {
        bdf: String,
        restored: u16,
        mask: u16,
        bits: u16,
        back: u16,
    },
    /// `what`: the change that needs the GPU control (a clock lock, persistence mode).
    #[error("no GPU control available to undo {0}")]
    NoGpu(&'static str),
    #[error(transparent)]
    Gpu(#[from] crate::hostio::gpu::GpuError),
    #[error("{0}")]
    Modprobe(std::io::Error),
    #[error("{0}: modprobe -r succeeded, but the kernel still lists the module")]
    ModuleLoaded(String),
    #[error("umount {mp}: {source}")]
    Umount { mp: String, source: std::io::Error },
    #[error("umount {mp} succeeded, but /proc/self/mounts still lists {fstype} there")]
    StillMounted { mp: String, fstype: String },
    #[error("rmdir {mp}: {source}")]
    Rmdir { mp: String, source: std::io::Error },
}

/// Whether `name` is a temporary name of daqtune's atomic writer
/// (`daqtune_probe::fsutil::tmp_name`: `.<base>.daqtune-tmp.<pid>.<n>`), and its `<base>`.
pub fn tmp_base(name: &str) -> Option<&str> {
    let rest = name.strip_prefix('.')?;
    let (base, tail) = rest.rsplit_once(".daqtune-tmp.")?;
    let (pid, n) = tail.split_once('.')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    (!base.is_empty() && digits(pid) && digits(n)).then_some(base)
}

/// Removes what a run killed half-way through a write left: the writer's temporary files,
/// only where the run wrote and only for the names it wrote there (its journal and saved
/// originals included). Nothing else in those directories is touched.
fn sweep_temps(host: &Host, j: &Journal, w: &mut dyn Writer, rep: &mut RevertReport) {
    use std::collections::{BTreeMap, BTreeSet};
    // Directory -> the names written in it.
    let mut wrote: BTreeMap<std::path::PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut add = |real: &Path| {
        if let (Some(d), Some(n)) = (real.parent(), real.file_name()) {
            wrote
                .entry(d.to_path_buf())
                .or_default()
                .insert(n.to_string_lossy().into_owned());
        }
    };
    add(&j.dir.join("journal.json"));
    for (i, rec) in j.doc.records.iter().enumerate() {
        add(&j.dir.join(format!("files/{i:04}")));
        add(&j.dir.join(format!("files/{i:04}.new")));
        let real = match &rec.entry {
            Entry::File { path, .. } | Entry::Symlink { path, .. } if path_ok(path).is_ok() => {
                real_path(host, path, false).ok()
            }
            Entry::Attr { path, .. } if path_ok(path).is_ok() => real_path(host, path, true).ok(),
            _ => None,
        };
        if let Some(r) = real {
            add(&r);
        }
    }
    // The run's own `files/` holds only its saved copies: a temp file of any copy's name is
    // the writer's, also of a record the kill kept from being added (its copy is saved
    // before the record) and of what a partial revert keeps (`NNNN.new.K`).
    let blobs = j.dir.join("files");
    wrote.entry(blobs.clone()).or_default();
    for (dir, names) in wrote {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let ours = tmp_base(&name)
                .is_some_and(|b| names.contains(b) || (dir == blobs && is_blob_name(b)));
            // A directory of that name is not the writer's (it makes files and links only).
            if !ours || e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let p = e.path();
            let shown = p
                .strip_prefix(host.root())
                .map(|r| format!("/{}", r.display()))
                .unwrap_or_else(|_| p.display().to_string());
            let r = w.remove(&p).map_err(|err| err.to_string()).and_then(|()| {
                match std::fs::symlink_metadata(&p) {
                    Ok(_) => Err("removed, but it is still there".to_string()),
                    Err(_) => Ok(()),
                }
            });
            rep.steps.push((
                format!("remove {shown} (left by a write that was interrupted)"),
                r,
            ));
        }
    }
}

/// `NNNN`, `NNNN.new` or `NNNN.new.K`: the names of a run's saved copies.
fn is_blob_name(b: &str) -> bool {
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit());
    let mut it = b.splitn(3, '.');
    let n = it.next().unwrap_or("");
    let rest: Vec<&str> = it.collect();
    n.len() == 4
        && digits(n)
        && match rest.as_slice() {
            [] => true,
            ["new"] => true,
            ["new", k] => digits(k),
            _ => false,
        }
}

/// Run directories a kill left before their first `journal.json` landed (only the writer's
/// temp file of it, and the empty `files/`): those temp files go, then the directories if empty.
pub fn sweep_unstarted_runs(
    base: &Path,
    w: &mut dyn Writer,
) -> Vec<(String, Result<(), std::io::Error>)> {
    let mut steps = Vec::new();
    let Ok(rd) = std::fs::read_dir(base) else {
        return steps;
    };
    for dir in rd.flatten().map(|e| e.path()) {
        if !dir.is_dir() || dir.join("journal.json").exists() {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let temps: Vec<std::path::PathBuf> = entries
            .flatten()
            .filter(|e| {
                e.file_type().is_ok_and(|t| t.is_file())
                    && tmp_base(&e.file_name().to_string_lossy()) == Some("journal.json")
            })
            .map(|e| e.path())
            .collect();
        if temps.is_empty() {
            continue;
        }
        for t in temps {
            let r = w.remove(&t);
            steps.push((
                format!(
                    "remove {} (a run killed before its journal was written)",
                    t.display()
                ),
                r,
            ));
        }
        let _ = std::fs::remove_dir(dir.join("files"));
        let _ = std::fs::remove_dir(&dir);
    }
    steps
}

/// A journal entry's path is what apply writes: absolute, without `.`, `..` or empty
/// components, without control characters. Anything else was not written by apply, and
/// revert touches nothing for it.
fn path_ok(path: &str) -> Result<(), UndoError> {
    let why = if !path.starts_with('/') {
        "not an absolute path"
    } else if path.len() > 4096 {
        "longer than any path apply writes"
    } else if path.chars().any(char::is_control) {
        "it holds control characters"
    } else if path
        .split('/')
        .skip(1)
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        "it has an empty, `.` or `..` component"
    } else {
        return Ok(());
    };
    Err(UndoError::PathRefused(why))
}

/// A path as printed: control characters and directional overrides escaped
/// (`daqtune_probe::text::printable`), so a hostile journal cannot drive the terminal or
/// reorder what it shows, whatever stream the line goes to.
fn shown(path: &str) -> String {
    daqtune_probe::text::printable(path).into_owned()
}

/// The path an entry names, if any.
fn entry_path(e: &Entry) -> Option<&str> {
    match e {
        Entry::File { path, .. }
        | Entry::Symlink { path, .. }
        | Entry::Attr { path, .. }
        | Entry::ConfigWord { path, .. } => Some(path),
        Entry::Mount { target, .. } => Some(target),
        _ => None,
    }
}

/// `msg` without the leading `path: ` that the step's description already says (the read and
/// write errors each prefix it).
fn once(path: Option<&str>, msg: String) -> String {
    let Some(p) = path else { return msg };
    let prefix = format!("{p}: ");
    let mut m = msg.as_str();
    while let Some(rest) = m.strip_prefix(&prefix) {
        m = rest;
    }
    m.to_string()
}

/// What a revert undoes: every run in effect (`daqtune revert`), one run (`--run ID`), or the
/// changes of some checks in every run in effect (`--only IDS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    Run(String),
    Checks(Vec<String>),
}

/// Why a partial revert was refused before anything changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no apply run {0} in effect (`daqtune status` lists the runs)")]
    NoSuchRun(String),
    #[error("nothing of {0} is in effect in any apply run")]
    NothingFor(String),
    /// A later run changed the same file, attribute or device on top of this one: undoing
    /// this one alone would put back what was there before both and lose the later change.
    #[error("{what} of run {run}{checks} was changed again by the later run {later}{later_checks}; revert that run first (`daqtune revert --run {later}`) or revert both")]
    LaterRun {
        run: String,
        checks: String,
        what: String,
        later: String,
        later_checks: String,
    },
    /// Two checks of one run changed the same thing: one cannot be undone without the other.
    #[error("{what} of run {run} was changed by {a} and by {b} together; revert both (`--only {a},{b}`) or the run (`--run {run}`)")]
    SharedInRun {
        run: String,
        what: String,
        a: String,
        b: String,
    },
    /// A journal from before the record-level check: its changes other than kernel
    /// attributes name no check.
    #[error("run {0} was journaled by a daqtune that did not record which check made each change; revert it whole (`daqtune revert --run {0}`)")]
    Unattributed(String),
    #[error("{0}: unreadable journal")]
    Unreadable(String),
}

/// What a journal entry changed, as one key: two entries with the same key changed the same
/// thing (a file, a kernel attribute, a register, an interface's MTU, ...). `status` names
/// what it compares by it too.
pub fn entry_key(e: &Entry) -> String {
    match e {
        Entry::File { path, .. } | Entry::Symlink { path, .. } => format!("file {path}"),
        Entry::Attr { path, .. } => format!("attribute {path}"),
        Entry::ConfigWord { path, offset, .. } => format!("register {path}@{offset:#x}"),
        Entry::Mtu { ifname, .. } => format!("MTU of {ifname}"),
        Entry::Ethtool { ifname, group, .. } => format!("{} of {ifname}", group.name()),
        Entry::Module { name } => format!("module {name}"),
        Entry::Mount { target, .. } => format!("mount {target}"),
        Entry::GpuLock { uuid, domain, .. } => format!("{} clock of {uuid}", domain.as_str()),
        Entry::GpuPersistence { uuid, .. } => format!("persistence of {uuid}"),
    }
}

/// `check` of a record as printed (`?` for an unattributed one).
fn check_of(r: &Record) -> &str {
    r.check.as_deref().unwrap_or("?")
}

/// The runs in effect (not reverted), oldest first; an unreadable journal is a refusal (a
/// partial revert must know every later run).
fn runs_in_effect(base: &Path) -> Result<Vec<Journal>, Refusal> {
    let mut v = Vec::new();
    for dir in list_runs(base) {
        let j = Journal::open(&dir).map_err(|_| Refusal::Unreadable(dir.display().to_string()))?;
        if j.doc.state != RunState::Reverted {
            v.push(j);
        }
    }
    Ok(v)
}

/// The records `scope` undoes in each run in effect (run index, record indexes), checked
/// against every later run: a partial revert that a later run depends on is refused with the
/// run that does.
fn select(runs: &[Journal], scope: &Scope) -> Result<Vec<(usize, Vec<usize>)>, Refusal> {
    let mut chosen: Vec<(usize, Vec<usize>)> = Vec::new();
    match scope {
        Scope::All => {
            for (i, j) in runs.iter().enumerate() {
                chosen.push((i, (0..j.doc.records.len()).collect()));
            }
            return Ok(chosen);
        }
        Scope::Run(id) => {
            let i = runs
                .iter()
                .position(|j| &j.doc.id == id)
                .ok_or_else(|| Refusal::NoSuchRun(id.clone()))?;
            chosen.push((i, (0..runs[i].doc.records.len()).collect()));
        }
        Scope::Checks(ids) => {
            for (i, j) in runs.iter().enumerate() {
                let recs = &j.doc.records;
                let picked: Vec<usize> = (0..recs.len())
                    .filter(|&k| recs[k].checks().iter().any(|c| ids.iter().any(|i| i == c)))
                    .collect();
                if recs.iter().any(|r| r.check.is_none()) {
                    return Err(Refusal::Unattributed(j.doc.id.clone()));
                }
                // Another check of the same run changed the same thing.
                for &k in &picked {
                    // A file of several settings is taken apart by setting: its other
                    // settings' parts stay.
                    if is_parted(&recs[k].entry) {
                        continue;
                    }
                    let key = entry_key(&recs[k].entry);
                    if let Some(o) = recs.iter().find(|r| {
                        entry_key(&r.entry) == key
                            && r.check.as_ref().is_some_and(|c| !ids.contains(c))
                    }) {
                        return Err(Refusal::SharedInRun {
                            run: j.doc.id.clone(),
                            what: key,
                            a: check_of(&recs[k]).to_string(),
                            b: check_of(o).to_string(),
                        });
                    }
                }
                if !picked.is_empty() {
                    chosen.push((i, picked));
                }
            }
            if chosen.is_empty() {
                return Err(Refusal::NothingFor(ids.join(",")));
            }
        }
    }
    // A later run in effect that changed the same thing and is not undone with it.
    for (i, picked) in &chosen {
        for &k in picked {
            let rec = &runs[*i].doc.records[k];
            let key = entry_key(&rec.entry);
            for (l, later) in runs.iter().enumerate().skip(i + 1) {
                let also_undone =
                    |m: usize| chosen.iter().any(|(ci, ks)| *ci == l && ks.contains(&m));
                let hit = later
                    .doc
                    .records
                    .iter()
                    .enumerate()
                    .find(|(m, r)| entry_key(&r.entry) == key && !also_undone(*m));
                if let Some((_, r)) = hit {
                    return Err(Refusal::LaterRun {
                        run: runs[*i].doc.id.clone(),
                        checks: format!(" ({})", check_of(rec)),
                        what: key,
                        later: later.doc.id.clone(),
                        later_checks: format!(" ({})", check_of(r)),
                    });
                }
            }
        }
    }
    Ok(chosen)
}

/// Whether `path` is one of the profile copies units and rules run (`/etc/daqtune/profiles/`).
fn is_profile_copy(path: &str) -> bool {
    path.strip_prefix(crate::model::context::artifacts::PROFILE_COPIES)
        .is_some_and(|r| r.starts_with('/') && !r[1..].contains('/'))
}

/// A profile copy is a support file: it stays while a file still in effect after this revert
/// names it (a unit, the udev rule, the drop-in's header), and goes with the last of them,
/// whichever setting's run wrote it. Adjusts `chosen` so; returns a line for each copy kept.
fn keep_used_profile_copies(
    host: &Host,
    runs: &[Journal],
    chosen: &mut Vec<(usize, Vec<usize>)>,
    scope: &Scope,
) -> Vec<String> {
    let picked = |chosen: &[(usize, Vec<usize>)], i: usize, k: usize| {
        chosen.iter().any(|(ci, ks)| *ci == i && ks.contains(&k))
    };
    // A record whose file stays after this revert: not picked, or a multi-setting file of
    // which only some settings go.
    let stays = |chosen: &[(usize, Vec<usize>)], i: usize, k: usize| {
        let r = &runs[i].doc.records[k];
        !picked(chosen, i, k)
            || match (&r.entry, scope) {
                (Entry::File { parts: Some(p), .. }, Scope::Checks(ids)) => {
                    p.owners.iter().any(|o| !ids.contains(o))
                }
                _ => false,
            }
    };
    let mut lines = Vec::new();
    for (i, j) in runs.iter().enumerate() {
        for (k, rec) in j.doc.records.iter().enumerate() {
            let Entry::File { path: copy, .. } = &rec.entry else {
                continue;
            };
            if !is_profile_copy(copy) {
                continue;
            }
            // The files of the runs in effect that name the copy: (stays, path).
            let naming: Vec<(bool, String)> = runs
                .iter()
                .enumerate()
                .flat_map(|(i2, j2)| {
                    j2.doc
                        .records
                        .iter()
                        .enumerate()
                        .filter_map(move |(k2, r)| match &r.entry {
                            Entry::File { path, .. } if path != copy => {
                                Some((i2, k2, path.clone()))
                            }
                            _ => None,
                        })
                })
                // A unit or rule that runs daqtune with it (every file's header names the
                // profile too, which is no use of the file).
                .filter(|(_, _, path)| {
                    real_path(host, path, true)
                        .ok()
                        .and_then(|r| std::fs::read(r).ok())
                        .is_some_and(|b| {
                            crate::model::context::artifacts::profile_files(
                                &String::from_utf8_lossy(&b),
                            )
                            .contains(copy)
                        })
                })
                .map(|(i2, k2, p)| (stays(chosen, i2, k2), p))
                .collect();
            let users: Vec<&String> = naming.iter().filter(|n| n.0).map(|n| &n.1).collect();
            let last_users_go = users.is_empty() && !naming.is_empty();
            let is_picked = picked(chosen, i, k);
            if !users.is_empty() && is_picked {
                for (ci, ks) in chosen.iter_mut() {
                    if *ci == i {
                        ks.retain(|x| *x != k);
                    }
                }
                chosen.retain(|(_, ks)| !ks.is_empty());
                lines.push(format!(
                    "keep {} (still run by {})",
                    shown(copy),
                    users
                        .iter()
                        .map(|u| shown(u))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            } else if last_users_go && !is_picked {
                // Its last user goes now: so does the copy.
                match chosen.iter_mut().find(|(ci, _)| *ci == i) {
                    Some((_, ks)) => {
                        ks.push(k);
                        ks.sort_unstable();
                    }
                    None => {
                        chosen.push((i, vec![k]));
                        chosen.sort_by_key(|(ci, _)| *ci);
                    }
                }
            }
        }
    }
    lines
}

/// Revert every run under `base` that is not reverted yet.
pub fn revert_all(host: &Host, base: &Path, w: &mut dyn Writer) -> RevertReport {
    revert_all_with(host, base, w, None)
}

/// [`revert_all`] with access to the GPUs, for runs that locked clocks.
pub fn revert_all_with(
    host: &Host,
    base: &Path,
    w: &mut dyn Writer,
    gpu: Option<&dyn crate::hostio::gpu::GpuSetters>,
) -> RevertReport {
    let mut rep = RevertReport::default();
    rep.steps.extend(
        sweep_unstarted_runs(base, w)
            .into_iter()
            .map(|(what, r)| (what, r.map_err(|e| e.to_string()))),
    );
    let in_effect: Vec<Journal> = list_runs(base)
        .iter()
        .filter_map(|d| Journal::open(d).ok())
        .filter(|j| j.doc.state != RunState::Reverted)
        .collect();
    let mut touched = Touched::for_runs(in_effect.iter());
    for dir in list_runs(base).into_iter().rev() {
        let j = match Journal::open(&dir) {
            Ok(j) => j,
            Err(e) => {
                rep.steps.push((
                    dir.display().to_string(),
                    Err(format!("unreadable journal: {e}")),
                ));
                continue;
            }
        };
        if j.doc.state == RunState::Reverted {
            continue;
        }
        let all: Vec<usize> = (0..j.doc.records.len()).collect();
        revert_run(host, j, &all, None, w, gpu, &mut rep, &mut touched);
    }
    rewrite_after_port_reset(host, base, w, &touched, &mut rep);
    finish_commands(host, &touched, &mut rep);
    rep
}

/// Undo what `scope` names: every run (as [`revert_all_with`]), one run, or some checks'
/// changes. A partial revert is decided before anything changes: refused (nothing done) where
/// a later run depends on it.
pub fn revert_scope(
    host: &Host,
    base: &Path,
    w: &mut dyn Writer,
    gpu: Option<&dyn crate::hostio::gpu::GpuSetters>,
    scope: &Scope,
) -> Result<RevertReport, Refusal> {
    if *scope == Scope::All {
        return Ok(revert_all_with(host, base, w, gpu));
    }
    let runs = runs_in_effect(base)?;
    let mut chosen = select(&runs, scope)?;
    let kept = keep_used_profile_copies(host, &runs, &mut chosen, scope);
    let mut rep = RevertReport::default();
    rep.steps.extend(kept.into_iter().map(|k| (k, Ok(()))));
    if chosen.is_empty() {
        return Ok(rep);
    }
    let mut touched = Touched::for_runs(runs.iter());
    let mut runs: Vec<Option<Journal>> = runs.into_iter().map(Some).collect();
    // Newest first, as the full revert.
    for (i, picked) in chosen.into_iter().rev() {
        if let Some(j) = runs.get_mut(i).and_then(Option::take) {
            let ids = match scope {
                Scope::Checks(ids) => Some(ids.as_slice()),
                _ => None,
            };
            revert_run(host, j, &picked, ids, w, gpu, &mut rep, &mut touched);
        }
    }
    rewrite_after_port_reset(host, base, w, &touched, &mut rep);
    finish_commands(host, &touched, &mut rep);
    Ok(rep)
}

/// Which kinds of boot configuration a revert changed (for the commands run after it).
#[derive(Debug, Default, Clone)]
struct Touched {
    grub: bool,
    units: bool,
    udev: bool,
    /// What this revert left at each file it changed (`None`: removed): an earlier run's
    /// record of the same file finds it there, which is no edit of the user's.
    left: std::collections::BTreeMap<String, Option<Vec<u8>>>,
    /// The directories the runs in effect created (each record's `created_dir`, undone ones
    /// included): a file removed from one of them (or below) takes the directories with it
    /// once they are empty, whichever record made them, so partial and interrupted sequences
    /// leave no directory apply made.
    created: std::collections::BTreeSet<String>,
    /// Ports this revert re-initialised (`exec::port_reset`).
    reset_ports: std::collections::BTreeSet<String>,
    /// Attribute records this revert undid: path -> (check, the value before apply). Newest
    /// run first, so the oldest run's value is the one kept.
    undone_attrs: std::collections::BTreeMap<String, (String, String)>,
}

impl Touched {
    fn for_runs<'a>(runs: impl Iterator<Item = &'a Journal>) -> Touched {
        let mut t = Touched::default();
        for j in runs {
            for r in j.doc.records.iter().chain(&j.doc.undone) {
                match &r.entry {
                    Entry::File {
                        created_dir: Some(d),
                        ..
                    }
                    | Entry::Symlink {
                        created_dir: Some(d),
                        ..
                    } => {
                        t.created.insert(d.clone());
                    }
                    _ => {}
                }
            }
        }
        t
    }
}

impl Touched {
    fn note(&mut self, e: &Entry) {
        if let Entry::File { path, .. } | Entry::Symlink { path, .. } = e {
            self.grub |= path.starts_with("/etc/default/grub") || path.starts_with("/etc/grub.d/");
            self.units |= path.starts_with("/etc/systemd/");
            self.udev |= path.starts_with("/etc/udev/");
        }
    }
}

/// After this revert re-initialised ports, the settings held on their IRQs that the reset
/// lost are written again: a record still in effect gets the value it set (irq.affinity stays
/// while nic.rings is reverted), a record this revert undid the value from before apply (the
/// reset came after its undo, newest run first).
fn rewrite_after_port_reset(
    host: &Host,
    base: &Path,
    w: &mut dyn Writer,
    t: &Touched,
    rep: &mut RevertReport,
) {
    let ports: Vec<String> = t.reset_ports.iter().cloned().collect();
    let attrs = super::port_reset::follower_attrs(host, &ports);
    if attrs.is_empty() {
        return;
    }
    let mut wanted: super::port_reset::Wanted = t
        .undone_attrs
        .iter()
        .filter(|(p, (c, _))| attrs.get(*p).is_some_and(|id| id == c))
        .map(|(p, (c, v))| (p.clone(), (c.clone(), v.clone(), true)))
        .collect();
    let runs: Vec<Journal> = list_runs(base)
        .iter()
        .filter_map(|d| Journal::open(d).ok())
        .filter(|j| j.doc.state != RunState::Reverted)
        .collect();
    wanted.extend(super::port_reset::in_effect(runs.iter(), &attrs));
    let target = if host.is_live() {
        Target::Live
    } else {
        Target::Root
    };
    for r in super::port_reset::lost(host, wanted) {
        let what = format!(
            "{} = {} again ({} after the reset of {})",
            shown(&r.path),
            shown(r.value.trim()),
            r.check,
            ports.join(", ")
        );
        let done = real_path(host, &r.path, true)
            .map_err(UndoError::from)
            .and_then(|real| match target {
                Target::Root if r.as_read => restore_root_attr(w, &real, &r.path, &r.value),
                Target::Root => {
                    w.write_attr(&real, r.value.trim(), Target::Root)
                        .map_err(ioe(&r.path))?;
                    let want = format!("{}\n", r.value.trim());
                    Ok(file_reads_back(&real, &r.path, want.as_bytes())?)
                }
                Target::Live => {
                    restore_live_attr(w, &real, &r.path, &r.value, &r.value, false, None)
                }
            });
        rep.steps.push((what, done.map_err(|e| e.to_string())));
    }
}

/// update-grub, daemon-reload and udev's reload after a live revert that needs them.
fn finish_commands(host: &Host, t: &Touched, rep: &mut RevertReport) {
    if host.is_live() {
        rep.commands = super::apply::commands_for(t.grub, t.units, t.udev)
            .into_iter()
            .map(|(line, r)| (line, r.map_err(|e| e.to_string())))
            .collect();
    }
}

/// Undoes the records `picked` of run `j`, newest first, then records the result: the run is
/// reverted when all its records are undone; a partial revert moves the undone records to
/// `undone` (the run stays in effect with the rest). A failed step leaves the journal as it
/// was, so a later revert tries again.
#[allow(clippy::too_many_arguments)]
fn revert_run(
    host: &Host,
    mut j: Journal,
    picked: &[usize],
    ids: Option<&[String]>,
    w: &mut dyn Writer,
    gpu: Option<&dyn crate::hostio::gpu::GpuSetters>,
    rep: &mut RevertReport,
    touched: &mut Touched,
) {
    let target = if host.is_live() {
        Target::Live
    } else {
        Target::Root
    };
    // The settings of a multi-setting file this revert takes out: those asked for, or all.
    let undoing = |rec: &Record| -> Vec<String> {
        match (&rec.entry, ids) {
            (Entry::File { parts: Some(p), .. }, Some(ids)) => p
                .owners
                .iter()
                .filter(|o| ids.contains(o))
                .cloned()
                .collect(),
            (Entry::File { parts: Some(p), .. }, None) => p.owners.clone(),
            _ => Vec::new(),
        }
    };
    // Records a partial revert leaves in effect with some of their settings (k -> the bytes
    // left in the file and the settings undone).
    let mut split: Vec<(usize, Option<Vec<u8>>, Vec<String>)> = Vec::new();
    let whole = picked.len() == j.doc.records.len()
        && picked.iter().all(|&k| {
            j.doc.records.get(k).is_none_or(|r| match &r.entry {
                Entry::File { parts: Some(p), .. } => undoing(r).len() == p.owners.len(),
                _ => true,
            })
        });
    let first = rep.steps.len();
    if whole {
        sweep_temps(host, &j, w, rep);
    }
    let booted = daqtune_probe::system::boot_time(host);
    for &k in picked.iter().rev() {
        let Some(rec) = j.doc.records.get(k) else {
            continue;
        };
        touched.note(&rec.entry);
        let p = entry_path(&rec.entry);
        let mut what = describe(&rec.entry);
        // The report edge: the step's error becomes the words printed.
        let r = match (p.map(path_ok), &rec.entry) {
            (Some(Err(e)), _) => Err(e.to_string()),
            (_, Entry::File { .. }) => {
                let owners = undoing(rec);
                match undo_file_entry(host, &j, rec, &owners, w, touched) {
                    Ok(done) => {
                        if let Some(kept) = &done.kept {
                            what.push_str(&format!(
                                " (it was changed since apply; that version is kept as {})",
                                shown(kept)
                            ));
                        }
                        if let Some(p) = &rec_parts(rec) {
                            if owners.len() < p.owners.len() {
                                what = format!(
                                    "take the parts of {} out of {}",
                                    owners.join(", "),
                                    shown(entry_path(&rec.entry).unwrap_or(""))
                                );
                                split.push((k, done.left.clone(), owners.clone()));
                            }
                        }
                        Ok(())
                    }
                    Err(e) => Err(once(p, e.to_string())),
                }
            }
            (_, Entry::Attr { path, .. })
                if path.starts_with("/proc/irq/")
                    && booted.is_some_and(|b| j.doc.started_unix < b) =>
            {
                // Not written back: the pin did not outlive its boot, and the number may be
                // another device's IRQ now (the same rule as `status`).
                what.push_str(&format!(
                    ": not written back (pinned in an earlier boot: IRQ numbers are given out \
                     again at every boot, so {} may be another device's now)",
                    shown(path)
                ));
                rep.steps.push((what, Ok(())));
                continue;
            }
            _ => undo(host, target, &j, &rec.entry, w, gpu, &touched.created)
                .map_err(|e| once(p, e.to_string())),
        };
        if r.is_ok() {
            let check = check_of(rec);
            touched
                .reset_ports
                .extend(super::port_reset::port_of_entry(check, &rec.entry));
            if let Entry::Attr { path, original, .. } = &rec.entry {
                touched
                    .undone_attrs
                    .insert(path.clone(), (check.to_string(), original.clone()));
            }
        }
        rep.steps.push((what, r));
    }
    let mut failed = rep.steps[first..].iter().filter(|s| s.1.is_err()).count();
    if failed == 0 {
        let written = if whole {
            j.finish(w, RunState::Reverted)
        } else {
            let mut kept = Vec::new();
            let mut saved = Ok(());
            for (k, mut rec) in std::mem::take(&mut j.doc.records).into_iter().enumerate() {
                if let Some((_, left, owners)) = split.iter().find(|(s, _, _)| *s == k) {
                    // Some of the file's settings undone: they go to `undone`; the record stays
                    // with the rest, and what the file holds now is what `status` compares.
                    let mut gone = rec.clone();
                    if let Entry::File { parts: Some(p), .. } = &mut gone.entry {
                        p.owners = owners.clone();
                    }
                    gone.check = owners.first().cloned().or(gone.check);
                    j.doc.undone.push(gone);
                    let n = j.doc.undone.len();
                    if let Entry::File {
                        parts: Some(p),
                        written,
                        ..
                    } = &mut rec.entry
                    {
                        p.owners.retain(|o| !owners.contains(o));
                        if let Some(bytes) = left {
                            let name = format!("files/{k:04}.new.{n}");
                            match w.write_file(&j.dir.join(&name), bytes, 0o600) {
                                Ok(()) => *written = Some(name),
                                Err(e) => saved = Err(e),
                            }
                        }
                        if let Some(o) = p.owners.first() {
                            rec.check = Some(o.clone());
                        }
                    }
                    kept.push(rec);
                } else if picked.contains(&k) {
                    j.doc.undone.push(rec);
                } else {
                    kept.push(rec);
                }
            }
            j.doc.records = kept;
            saved.and_then(|()| j.flush(w))
        };
        if let Err(e) = written {
            rep.steps.push((
                format!("mark run {} reverted", j.doc.id),
                Err(format!("cannot write its journal: {e}")),
            ));
            failed = 1;
        }
    }
    if failed == 0 && whole {
        rep.runs.push(j.doc.id.clone());
    } else if failed == 0 {
        let mut checks: Vec<String> = j
            .doc
            .undone
            .iter()
            .map(|r| check_of(r).to_string())
            .collect();
        checks.sort();
        checks.dedup();
        rep.partial.push((j.doc.id.clone(), checks));
    } else {
        rep.incomplete
            .push((j.doc.id.clone(), failed, rep.steps.len() - first));
    }
}

fn describe(e: &Entry) -> String {
    let e = &escaped(e);
    match e {
        Entry::File {
            path,
            original: None,
            link: None,
            ..
        } => format!("remove {path}"),
        Entry::File {
            path,
            link: Some(t),
            ..
        } => format!("restore the link {path} -> {}", shown(t)),
        Entry::File { path, .. } => format!("restore {path}"),
        Entry::Symlink { path, .. } => format!("remove link {path}"),
        Entry::Attr { path, original, .. } => format!("{path} = {}", shown(original.trim())),
        Entry::Mtu {
            ifname, original, ..
        } => format!("MTU of {ifname} = {original}"),
        Entry::Ethtool {
            ifname,
            group,
            original,
            ..
        } => format!(
            "{} of {ifname}: {}",
            group.name(),
            daqtune_probe::net::ethtool::shown_settings(*group, original)
        ),
        Entry::ConfigWord {
            bdf,
            original,
            mask,
            ..
        } => format!(
            "{bdf} config bits 0x{mask:04x} back to 0x{:04x}",
            original & mask
        ),
        Entry::Module { name } => format!("unload {name}"),
        Entry::Mount { target, .. } => format!("umount {target}"),
        Entry::GpuLock {
            uuid,
            domain,
            previously_locked: true,
            ..
        } => {
            format!(
                "{} clock of {uuid}: left locked (the lock was someone else's before apply)",
                domain.as_str()
            )
        }
        Entry::GpuLock { uuid, domain, .. } => {
            format!("unlock the {} clock of {uuid}", domain.as_str())
        }
        Entry::GpuPersistence { uuid, original } => format!("persistence of {uuid} = {original:?}"),
    }
}

/// The entry with its paths and names as printed ([`shown`]).
fn escaped(e: &Entry) -> Entry {
    let mut e = e.clone();
    match &mut e {
        Entry::File { path, .. }
        | Entry::Symlink { path, .. }
        | Entry::Attr { path, .. }
        | Entry::ConfigWord { path, .. } => *path = shown(path),
        Entry::Mount { target, .. } => *target = shown(target),
        Entry::Module { name } => *name = shown(name),
        Entry::Mtu { ifname, .. } | Entry::Ethtool { ifname, .. } => *ifname = shown(ifname),
        Entry::GpuLock { uuid, .. } | Entry::GpuPersistence { uuid, .. } => *uuid = shown(uuid),
    }
    e
}

/// Whether a record is of a file that carries several settings.
fn is_parted(e: &Entry) -> bool {
    matches!(e, Entry::File { parts: Some(_), .. })
}

fn rec_parts(r: &Record) -> Option<crate::hostio::parts::FileParts> {
    match &r.entry {
        Entry::File { parts, .. } => parts.clone(),
        _ => None,
    }
}

/// What undoing a file record did.
struct FileUndone {
    /// Where the version of the file someone changed after apply was kept.
    kept: Option<String>,
    /// The bytes left in the file (`None`: removed).
    left: Option<Vec<u8>>,
}

/// Undoes a file record: the file as before the run (a multi-setting file: the parts of
/// `owners` as before, the other settings' parts as they are now). A file changed since the
/// run wrote it (the drift `status` reports) is kept aside first, never silently lost.
fn undo_file_entry(
    host: &Host,
    j: &Journal,
    rec: &Record,
    owners: &[String],
    w: &mut dyn Writer,
    touched: &mut Touched,
) -> Result<FileUndone, UndoError> {
    let Entry::File {
        path,
        original,
        created_dir,
        link,
        written,
        parts,
    } = &rec.entry
    else {
        return Err(UndoError::PathRefused("not a file record"));
    };
    let real = real_path(host, path, false)?;
    let now = match std::fs::symlink_metadata(&real) {
        Ok(m) if m.file_type().is_file() => Some(std::fs::read(&real).map_err(ioe(path))?),
        _ => None,
    };
    let mut kept = None;
    if let (Some(now), Some(blob)) = (&now, written) {
        let ours = j.blob(blob).ok();
        let left_here = touched.left.get(path).cloned().flatten();
        if ours.as_ref() != Some(now) && left_here.as_ref() != Some(now) {
            kept = Some(keep_aside(host, j, w, path, now)?);
        }
    }
    let left = match parts {
        Some(p) if owners.len() < p.owners.len() || link.is_none() => {
            let orig = match original {
                Some(saved) => Some(
                    j.blob(&saved.blob)
                        .map_err(ioe(&format!("journal copy of {path}")))?,
                ),
                None => None,
            };
            let text =
                |b: &Option<Vec<u8>>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
            let (now_t, orig_t) = (text(&now), text(&orig));
            let asked: Vec<&str> = owners.iter().map(String::as_str).collect();
            let merged =
                crate::hostio::parts::merge(p.format, now_t.as_deref(), orig_t.as_deref(), &asked);
            let parts_of = |t: &Option<String>| {
                t.as_deref()
                    .map(|t| crate::hostio::parts::parts(p.format, t))
                    .unwrap_or_default()
            };
            if parts_of(&merged) == parts_of(&orig_t) && link.is_none() {
                // Every part as before the run: the file as before, byte for byte.
                undo_file(
                    host,
                    j,
                    w,
                    path,
                    original.as_ref(),
                    created_dir,
                    link,
                    &touched.created,
                )?;
                orig
            } else if parts_of(&merged) == parts_of(&orig_t) {
                undo_file(host, j, w, path, None, created_dir, link, &touched.created)?;
                None
            } else {
                // No setting has a part left, but the file was there before the run with
                // parts the settings still in effect took out: it stays as their skeleton (the
                // header, the `.link`'s match and naming policy), never an empty file, which
                // means something else to its reader (an empty `.link` matches no port and a
                // keyfile without [connection] is refused); the original comes back byte for
                // byte with the last of them.
                let merged = merged.or_else(|| {
                    now_t
                        .as_deref()
                        .or(orig_t.as_deref())
                        .and_then(|t| crate::hostio::parts::without_parts(p.format, t))
                });
                let Some(merged) = merged else {
                    return Err(UndoError::PathRefused(
                        "no setting's part is left and the file's skeleton cannot be made",
                    ));
                };
                let bytes = merged.into_bytes();
                let mode = std::fs::metadata(&real)
                    .map(|m| {
                        use std::os::unix::fs::PermissionsExt;
                        m.permissions().mode() & 0o7777
                    })
                    .ok()
                    .or(original.as_ref().map(|s| s.mode))
                    .unwrap_or(0o644);
                w.write_file(&real, &bytes, mode).map_err(ioe(path))?;
                file_reads_back(&real, path, &bytes)?;
                Some(bytes)
            }
        }
        _ => {
            undo_file(
                host,
                j,
                w,
                path,
                original.as_ref(),
                created_dir,
                link,
                &touched.created,
            )?;
            match original {
                Some(saved) => j.blob(&saved.blob).ok(),
                None => None,
            }
        }
    };
    touched.left.insert(path.clone(), left.clone());
    Ok(FileUndone { kept, left })
}

/// Keeps the version of `path` someone changed after apply (`status` showed the drift) in
/// the run's journal directory, `edited/NAME.daqtune-edited-STAMP`, where no program that reads
/// the original's directory (grub-mkconfig's `*.cfg`, systemd-sysctl's `*.conf`, udev's
/// `*.rules`, NetworkManager's keyfiles, which takes files of any name) can take it for
/// configuration. Returns where it went, as a host path.
fn keep_aside(
    host: &Host,
    j: &Journal,
    w: &mut dyn Writer,
    path: &str,
    bytes: &[u8],
) -> Result<String, UndoError> {
    let name = path.rsplit('/').next().unwrap_or("file");
    let stamp = crate::hostio::journal::stamp(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    );
    let dir = j.dir.join("edited");
    let mut dest = dir.join(format!("{name}.daqtune-edited-{stamp}"));
    let mut n = 1;
    while dest.exists() {
        dest = dir.join(format!("{name}.daqtune-edited-{stamp}.{n}"));
        n += 1;
    }
    std::fs::create_dir_all(&dir).map_err(ioe(&dir.display().to_string()))?;
    w.write_file(&dest, bytes, 0o600)
        .map_err(ioe(&dest.display().to_string()))?;
    Ok(dest
        .strip_prefix(host.root())
        .map(|r| format!("/{}", r.display()))
        .unwrap_or_else(|_| dest.display().to_string()))
}

/// The read-back of a removal: nothing is left at the path (not even a dangling link).
fn gone(real: &Path, path: &str) -> Result<(), UndoError> {
    match std::fs::symlink_metadata(real) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Ok(_) => Err(UndoError::StillThere(path.to_string())),
        Err(source) => Err(UndoError::GoneUnknown {
            path: path.to_string(),
            source,
        }),
    }
}

/// Undo of a file or link apply created: remove it, read back that it is gone, then the empty
/// directories apply made for it.
fn remove_new(
    w: &mut dyn Writer,
    host: &Host,
    real: &Path,
    path: &str,
    created_dir: &Option<String>,
    made: &std::collections::BTreeSet<String>,
) -> Result<(), UndoError> {
    w.remove(real).map_err(ioe(path))?;
    gone(real, path)?;
    remove_created(host, created_dir, real, made);
    Ok(())
}

/// Removes the now-empty directories from the file's parent upwards while they lie in one
/// that apply created: this record's (`created`), or another record's of the runs in effect
/// (`made`; the file that made `/etc/systemd` may have been reverted before the last file
/// in it). A directory with anything left in it stays.
fn remove_created(
    host: &Host,
    created: &Option<String>,
    file: &Path,
    made: &std::collections::BTreeSet<String>,
) {
    let tops: Vec<std::path::PathBuf> = created
        .iter()
        .chain(made.iter())
        .filter_map(|t| real_path(host, t, false).ok())
        .collect();
    let mut cur = file.parent();
    while let Some(d) = cur {
        if !tops.iter().any(|t| d.starts_with(t)) || std::fs::remove_dir(d).is_err() {
            break;
        }
        cur = d.parent();
    }
}

/// `what: err` for an I/O failure of a step.
fn ioe(what: &str) -> impl Fn(std::io::Error) -> UndoError + '_ {
    move |source| UndoError::Io {
        what: what.to_string(),
        source,
    }
}

/// Undoes one journal entry and reads the result back: one named step per kind of change.
fn undo(
    host: &Host,
    target: Target,
    j: &Journal,
    e: &Entry,
    w: &mut dyn Writer,
    gpu: Option<&dyn crate::hostio::gpu::GpuSetters>,
    made: &std::collections::BTreeSet<String>,
) -> Result<(), UndoError> {
    match e {
        Entry::File {
            path,
            original,
            created_dir,
            link,
            ..
        } => undo_file(host, j, w, path, original.as_ref(), created_dir, link, made),
        Entry::Symlink {
            path,
            original,
            created_dir,
            ..
        } => undo_symlink(host, w, path, original.as_deref(), created_dir, made),
        Entry::Attr {
            path,
            original,
            new,
            shared_count,
            ..
        } => {
            let real = real_path(host, path, true)?;
            match target {
                Target::Root => restore_root_attr(w, &real, path, original),
                Target::Live => {
                    // A node's pool: what the node no longer holds of this run's pages is
                    // given back from the size's pool they were spread over.
                    let spill = shared_count
                        .then(|| crate::tunables::hugepages::pool_of_node_pool(path))
                        .flatten()
                        .and_then(|g| Some((real_path(host, &g, true).ok()?, g)));
                    let spill = spill.as_ref().map(|(r, g)| (r.as_path(), g.as_str()));
                    restore_live_attr(w, &real, path, original, new, *shared_count, spill)
                }
            }
        }
        Entry::Mtu {
            ifname, original, ..
        } => undo_mtu(w, ifname, *original),
        Entry::Ethtool {
            ifname,
            group,
            original,
            ..
        } => undo_ethtool(w, ifname, *group, original),
        Entry::ConfigWord {
            bdf,
            path,
            offset,
            original,
            mask,
            ..
        } => undo_config_word(host, w, bdf, path, *offset, *original, *mask),
        Entry::GpuLock {
            uuid,
            domain,
            previously_locked,
            floor_before_mhz,
            ..
        } => {
            if *previously_locked {
                return Ok(());
            }
            Ok(gpu.ok_or(UndoError::NoGpu("a clock lock"))?.unlock(
                uuid,
                *domain,
                *floor_before_mhz,
            )?)
        }
        Entry::GpuPersistence { uuid, original } => match original {
            Some(false) => gpu
                .ok_or(UndoError::NoGpu("persistence mode"))?
                .set_persistence(uuid, false)
                .map(|_| ())
                .map_err(UndoError::from),
            _ => Ok(()),
        },
        Entry::Module { name } => undo_module(host, target, w, name),
        Entry::Mount {
            fstype,
            target: mp,
            created_dir,
        } => undo_mount(host, w, fstype, mp, *created_dir),
    }
}

/// A file apply wrote: the saved original back byte for byte (or the link that was there, or
/// nothing where there was nothing), read back.
#[allow(clippy::too_many_arguments)]
fn undo_file(
    host: &Host,
    j: &Journal,
    w: &mut dyn Writer,
    path: &str,
    original: Option<&crate::hostio::journal::Saved>,
    created_dir: &Option<String>,
    link: &Option<String>,
    made: &std::collections::BTreeSet<String>,
) -> Result<(), UndoError> {
    let real = real_path(host, path, false)?;
    if let Some(t) = link {
        w.symlink(t, &real).map_err(ioe(path))?;
        return Ok(link_reads_back(&real, path, t)?);
    }
    match original {
        Some(saved) => {
            let bytes = j
                .blob(&saved.blob)
                .map_err(ioe(&format!("journal copy of {path}")))?;
            w.write_file(&real, &bytes, saved.mode).map_err(ioe(path))?;
            Ok(file_reads_back(&real, path, &bytes)?)
        }
        None => remove_new(w, host, &real, path, created_dir, made),
    }
}

/// A link apply made (enabling a unit): the previous link back, or none.
fn undo_symlink(
    host: &Host,
    w: &mut dyn Writer,
    path: &str,
    original: Option<&str>,
    created_dir: &Option<String>,
    made: &std::collections::BTreeSet<String>,
) -> Result<(), UndoError> {
    let real = real_path(host, path, false)?;
    match original {
        Some(t) => {
            w.symlink(t, &real).map_err(ioe(path))?;
            Ok(link_reads_back(&real, path, t)?)
        }
        None => remove_new(w, host, &real, path, created_dir, made),
    }
}

/// A kernel attribute under a host root: the root's file gets back exactly what it held.
fn restore_root_attr(
    w: &mut dyn Writer,
    real: &Path,
    path: &str,
    original: &str,
) -> Result<(), UndoError> {
    let mode = std::fs::metadata(real)
        .map(|m| {
            use std::os::unix::fs::PermissionsExt;
            m.permissions().mode() & 0o7777
        })
        .unwrap_or(0o644);
    w.write_file(real, original.as_bytes(), mode)
        .map_err(ioe(path))?;
    Ok(file_reads_back(real, path, original.as_bytes())?)
}

/// A live kernel attribute: the value read before apply back, or for a shared pool
/// (hugepages) the count less what this run added, read back. `spill`: for a node's pool, the
/// size's pool of the host (real path, host path). The kernel spreads a boot reservation
/// (`hugepages=N`, kernel.cmdline's words for this setting) evenly over the nodes
/// (Documentation/admin-guide/kernel-parameters.txt), so after a boot the pages this run put
/// on one node sit partly on the others: what the node cannot give back of this run's pages
/// comes out of the size's pool, which takes them from whichever node holds them.
pub(crate) fn restore_live_attr(
    w: &mut dyn Writer,
    real: &Path,
    path: &str,
    original: &str,
    new: &str,
    shared_count: bool,
    spill: Option<(&Path, &str)>,
) -> Result<(), UndoError> {
    let owned;
    let mut value = original.trim();
    // Pages of this run the node did not hold any more.
    let mut short = 0;
    // A shared pool (hugepages): give back the units this run added, not more, in case
    // someone reserved some since (when nobody did, this is exactly the prior count).
    if shared_count {
        let now = std::fs::read_to_string(real)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        if let (Some(now), Ok(orig), Ok(set)) = (
            now,
            original.trim().parse::<u64>(),
            new.trim().parse::<u64>(),
        ) {
            let ours = set.saturating_sub(orig);
            short = ours.saturating_sub(now);
            owned = now.saturating_sub(ours).to_string();
            value = &owned;
        }
    }
    // The selected governor is the only word sysfs shows for scaling_governor; nr_hugepages
    // is a count. Both are written back as read. A choice attribute (THP's
    // `always [madvise] never`) takes its bracketed word.
    let choice = value.contains('[');
    if choice {
        if let Some(sel) = crate::hostio::setters::selected_choice(value) {
            value = sel;
        }
    }
    w.write_attr(real, value, Target::Live).map_err(ioe(path))?;
    let back = std::fs::read_to_string(real).map_err(ioe(path))?;
    let back_word = if choice {
        crate::hostio::setters::selected_choice(&back).unwrap_or(back.trim())
    } else {
        back.trim()
    };
    if back_word != value {
        return Err(UndoError::AttrDiffers {
            path: path.to_string(),
            value: value.to_string(),
            back: back.trim().to_string(),
        });
    }
    if let (true, Some((g_real, g_path))) = (short > 0, spill) {
        let now = std::fs::read_to_string(g_real).map_err(ioe(g_path))?;
        let Ok(now) = now.trim().parse::<u64>() else {
            return Err(UndoError::AttrDiffers {
                path: g_path.to_string(),
                value: "a page count".into(),
                back: now.trim().to_string(),
            });
        };
        let value = now.saturating_sub(short).to_string();
        w.write_attr(g_real, &value, Target::Live)
            .map_err(ioe(g_path))?;
        let back = std::fs::read_to_string(g_real).map_err(ioe(g_path))?;
        if back.trim() != value {
            return Err(UndoError::AttrDiffers {
                path: g_path.to_string(),
                value,
                back: back.trim().to_string(),
            });
        }
    }
    Ok(())
}

fn undo_ethtool(
    w: &mut dyn Writer,
    ifname: &str,
    group: daqtune_probe::net::ethtool::Group,
    original: &daqtune_probe::net::ethtool::Settings,
) -> Result<(), UndoError> {
    // Keys the driver did not report before the change were not journaled: nothing to put back.
    if original.is_empty() {
        return Ok(());
    }
    setters::set_ethtool_worded(w, ifname, group, original)?;
    Ok(setters::ethtool_reads_back(w, ifname, group, original)?)
}

fn undo_mtu(w: &mut dyn Writer, ifname: &str, original: u32) -> Result<(), UndoError> {
    w.set_mtu(ifname, original)
        .map_err(ioe(&format!("MTU of {ifname}")))?;
    let back = w.mtu(ifname).map_err(ioe(ifname))?;
    if back != original {
        return Err(UndoError::MtuDiffers {
            ifname: ifname.to_string(),
            back,
            original,
        });
    }
    Ok(())
}

/// A config-space register: only the bits apply changed go back; anything else the register
/// gained since stays.
fn undo_config_word(
    host: &Host,
    w: &mut dyn Writer,
    bdf: &str,
    path: &str,
    offset: u64,
    original: u16,
    mask: u16,
) -> Result<(), UndoError> {
    let real = real_path(host, path, true)?;
    let cur = read_word(&real, offset).map_err(ioe(bdf))?;
    if cur == 0xffff {
        return Err(UndoError::DeviceGone(bdf.to_string()));
    }
    let restored = (cur & !mask) | (original & mask);
    w.pwrite(&real, offset, &restored.to_le_bytes())
        .map_err(ioe(bdf))?;
    let back = read_word(&real, offset).map_err(ioe(&format!("{bdf}: read back")))?;
    if back & mask != original & mask {
        return Err(UndoError::RegisterDiffers {
            bdf: bdf.to_string(),
            restored,
            mask,
            bits: original & mask,
            back,
        });
    }
    Ok(())
}

/// A module apply loaded: unloaded only where the kernel lists it (an apply whose modprobe did
/// not take leaves its entry), and it must be gone after.
fn undo_module(
    host: &Host,
    target: Target,
    w: &mut dyn Writer,
    name: &str,
) -> Result<(), UndoError> {
    if target == Target::Root || !setters::module_loaded(host, name) {
        return Ok(());
    }
    w.modprobe(name, true).map_err(UndoError::Modprobe)?;
    if setters::module_loaded(host, name) {
        return Err(UndoError::ModuleLoaded(name.to_string()));
    }
    Ok(())
}

/// A mount apply made. Target-independent: the mount table is read through the host root and
/// the unmount goes through the Writer (only a live apply journals a mount; under a root the
/// mount is a `File` change of the root's /proc/mounts).
fn undo_mount(
    host: &Host,
    w: &mut dyn Writer,
    fstype: &str,
    mp: &str,
    created_dir: bool,
) -> Result<(), UndoError> {
    let real = real_path(host, mp, true)?;
    // Only a mount the kernel lists is unmounted (an apply whose mount(2) did not show leaves
    // its entry), and it must be gone after.
    if setters::mounted(host, mp, fstype) {
        w.umount(&real).map_err(|source| UndoError::Umount {
            mp: mp.to_string(),
            source,
        })?;
        if setters::mounted(host, mp, fstype) {
            return Err(UndoError::StillMounted {
                mp: mp.to_string(),
                fstype: fstype.to_string(),
            });
        }
    }
    if created_dir {
        // Only an empty directory goes (rmdir): files someone put there stay.
        match std::fs::remove_dir(&real) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(UndoError::Rmdir {
                    mp: mp.to_string(),
                    source,
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
