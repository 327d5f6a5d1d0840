//! Executing a plan: journal first, then the change, then read it back.

use crate::hostio::journal::{Entry, Journal, RunState, Saved};
use crate::hostio::setters::{self, Done, Target, Writer};
use crate::model::plan::{Action, Change, Plan};
use daqtune_probe::Host;
use std::path::{Path, PathBuf};

/// What happened to one change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub check: String,
    pub subject: String,
    pub result: Result<String, String>,
    /// Made, but its read-back could not confirm it (printed `WARN`, not `ok`; not a failure:
    /// nothing read contradicts it).
    pub unconfirmed: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ApplyReport {
    pub outcomes: Vec<Outcome>,
    /// Checks whose changes wait for a reboot.
    pub pending_reboot: Vec<String>,
    /// Commands run after the files (update-grub, daemon-reload), with their result.
    pub commands: Vec<(String, Result<(), String>)>,
    pub journal: Option<PathBuf>,
}

impl ApplyReport {
    pub fn failed(&self) -> usize {
        self.outcomes.iter().filter(|o| o.result.is_err()).count()
    }
}

/// Why one step of a change was refused, failed, or its read-back contradicts it. The text is
/// what apply and revert print for the step; it is made only when the report is (`execute`).
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The journal could not record the step, so nothing was changed.
    #[error("journal: {0} (nothing changed)")]
    Journal(std::io::Error),
    /// The host refused the write (`what`: the path or register, worded by
    /// [`setters::explain_write_error`] with the lockdown mode).
    #[error("{}", setters::explain_write_error(.source, .what, .lockdown.as_deref()))]
    Write {
        what: String,
        lockdown: Option<String>,
        source: std::io::Error,
    },
    /// Reading what is there before the change (`what`: the path, or the device of a register).
    #[error("{what}: {source}")]
    Read {
        what: String,
        source: std::io::Error,
    },
    #[error("{path}: cannot read the symlink: {source}")]
    ReadLink {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: cannot read what the symlink names: {source}")]
    ReadLinked {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: cannot read the original: {source}")]
    ReadOriginal {
        path: String,
        source: std::io::Error,
    },
    /// The read-back after the write failed (`what`: the path, or the device of a register).
    #[error("{what}: read back: {source}")]
    ReadBack {
        what: String,
        source: std::io::Error,
    },
    #[error("{path}: wrote `{to}`, reads back `{back}`")]
    AttrDiffers {
        path: String,
        to: String,
        back: String,
    },
    #[error("{bdf}: {register} reads 0xffff (device gone or in reset); not writing")]
    DeviceGone { bdf: String, register: String },
    #[error(
        "{bdf}: {register} changed since planning (0x{from:04x} -> 0x{cur:04x}); run apply again"
    )]
    Moved {
        bdf: String,
        register: String,
        from: u16,
        cur: u16,
    },
    /// A register write the device did not take; `field` words the bits the plan changes.
    #[error("{bdf}: the write did not take: wrote {register} 0x{to:04x}{}, reads back 0x{back:04x}{}", field_word(.field, *.to), field_why(.field, *.back))]
    NotTaken {
        bdf: String,
        register: String,
        to: u16,
        back: u16,
        field: Option<crate::model::plan::RegField>,
    },
    /// A unit's link is not made when writing the unit failed.
    #[error("not enabled: writing {0} failed (see above)")]
    NotEnabled(String),
    /// A tunable's own setter (MTU, ethtool, module, mount, GPU) did not change the host.
    #[error(transparent)]
    Set(#[from] crate::model::tunable::SetError),
    #[error("internal: not an attribute write")]
    NotAttr,
    #[error("not run")]
    NotRun,
    /// The host path cannot be resolved inside the root (a link escaping it, a loop, ...).
    #[error("{path}: {source}")]
    Path {
        path: String,
        source: daqtune_probe::host::ReadError,
    },
    #[error("{path}: wrote {len} bytes, reads back nothing ({source})")]
    FileGone {
        path: String,
        len: usize,
        source: std::io::Error,
    },
    /// `difference`: where the bytes first differ, as [`first_difference`] words it.
    #[error("{path}: wrote {len} bytes, reads back {back} different bytes{difference}")]
    FileDiffers {
        path: String,
        len: usize,
        back: usize,
        difference: String,
    },
    #[error("{path}: linked to {target}, reads back a link to {got}")]
    LinkDiffers {
        path: String,
        target: String,
        got: String,
    },
    #[error("{path}: linked to {target}, reads back no link ({source})")]
    LinkGone {
        path: String,
        target: String,
        source: std::io::Error,
    },
    /// A file daqtune would replace is someone else's (`what` says how it was told).
    #[error("{path} is {what}; refusing to overwrite a file daqtune does not own. Move it aside (or merge what it holds into the profile) and apply again")]
    Foreign { path: String, what: String },
}

/// ` (MRRS 512)` after a register value, when the plan names the field.
fn field_word(field: &Option<crate::model::plan::RegField>, word: u16) -> String {
    field
        .as_ref()
        .map(|f| format!(" ({} {})", f.name, f.decode(word)))
        .unwrap_or_default()
}

/// The read-back value's field and why a device would ignore the write.
fn field_why(field: &Option<crate::model::plan::RegField>, word: u16) -> String {
    field
        .as_ref()
        .map(|f| format!(" ({} {}); {}", f.name, f.decode(word), f.ignored))
        .unwrap_or_default()
}

/// Why a command run after the files changed (update-grub, daemon-reload, udev's reload)
/// failed. The text is what apply and revert print beside the command.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("{0} is not installed here")]
    NotInstalled(String),
    #[error("{0}")]
    Spawn(std::io::Error),
    /// It ran and exited non-zero: what it said on stderr.
    #[error("{stderr}")]
    Failed { stderr: String },
    #[error("no grub updater found (update-grub, grub2-mkconfig, grub-mkconfig): regenerate grub.cfg with your distribution's tool")]
    NoGrubUpdater,
}

/// The real path of a host path for writing: inside the root, symlinks resolved there, the
/// last component not followed (a file may not exist yet).
pub fn real_path(host: &Host, host_path: &str, follow_last: bool) -> Result<PathBuf, StepError> {
    let r = if follow_last {
        host.resolve(host_path)
    } else {
        host.resolve_parent(host_path)
    };
    r.map_err(|source| StepError::Path {
        path: host_path.to_string(),
        source,
    })
}

/// The first ancestor of `p` (up to `stop`) that does not exist: what creating `p` adds.
fn first_missing_dir(p: &Path, stop: &Path) -> Option<PathBuf> {
    let mut missing = None;
    let mut cur = p.parent();
    while let Some(d) = cur {
        if d == stop || d.exists() {
            break;
        }
        missing = Some(d.to_path_buf());
        cur = d.parent();
    }
    missing
}

/// Run `plan` against `host`, journaling into `journal`.
pub fn execute(
    host: &Host,
    plan: &Plan,
    journal: &mut Journal,
    w: &mut dyn Writer,
    lockdown: Option<&str>,
    gpu: Option<&dyn crate::hostio::gpu::GpuSetters>,
) -> ApplyReport {
    let mut rep = ApplyReport {
        journal: Some(journal.dir.clone()),
        ..Default::default()
    };
    // What the settings held on the IRQs of a port read before this run first reset it.
    let mut before_reset: std::collections::BTreeMap<String, String> = Default::default();
    let mut i = 0;
    while i < plan.changes.len() {
        if let Some(port) =
            super::port_reset::port_of_action(&plan.changes[i].check, &plan.changes[i].action)
        {
            for path in super::port_reset::follower_attrs(host, &[port]).into_keys() {
                if let (false, Ok(v)) = (before_reset.contains_key(&path), host.read_string(&path))
                {
                    before_reset.insert(path, v);
                }
            }
        }
        // Every record made for this change (here or by the tunable's own setter) names it.
        journal.current_check = Some(plan.changes[i].check.clone());
        // Runs of attribute writes for one check (a governor per CPU) share two journal
        // flushes: all entries before the first write, all done-marks after the last.
        let mut j = i;
        while j < plan.changes.len()
            && matches!(plan.changes[j].action, Action::Attr { .. })
            && plan.changes[j].check == plan.changes[i].check
        {
            j += 1;
        }
        let results: Vec<Result<Done, StepError>> = if j - i > 1 {
            let batch: Vec<&Change> = plan.changes[i..j].iter().collect();
            apply_attr_batch(host, plan, &batch, journal, w, lockdown)
        } else {
            j = i + 1;
            // A unit whose file was not written is not enabled: a `.wants` link to a unit that
            // is missing (or still the old one) would be left behind by the failure.
            let unwritten = match &plan.changes[i].action {
                Action::Symlink { target, .. } => plan.changes[..i]
                    .iter()
                    .zip(&rep.outcomes)
                    .find(|(c, o)| {
                        o.result.is_err()
                            && matches!(&c.action, Action::File { path, .. } if path == target)
                    })
                    .map(|_| target.clone()),
                _ => None,
            };
            vec![match unwritten {
                Some(t) => Err(StepError::NotEnabled(t)),
                None => apply_one(host, plan, &plan.changes[i], journal, w, lockdown, gpu),
            }]
        };
        for (c, result) in plan.changes[i..j].iter().zip(results) {
            let waits_for_boot = result.as_ref().is_ok_and(|d| d.pending_boot);
            if result.is_ok()
                && (c.reboot || waits_for_boot)
                && !rep.pending_reboot.contains(&c.check)
            {
                rep.pending_reboot.push(c.check.clone());
            }
            let unconfirmed = result.as_ref().is_ok_and(|d| d.unconfirmed);
            rep.outcomes.push(Outcome {
                check: c.check.clone(),
                subject: c.subject.clone(),
                // The report edge: the step's error becomes the words printed.
                result: result.map(|d| d.message).map_err(|e| e.to_string()),
                unconfirmed,
            });
        }
        i = j;
    }
    rewrite_after_port_reset(host, plan, journal, w, lockdown, &mut rep);
    keep_originals_from_before_reset(journal, &before_reset);
    if plan.target == Target::Live {
        rep.commands = post_commands(
            plan.changes
                .iter()
                .zip(&rep.outcomes)
                .filter(|(_, o)| o.result.is_ok())
                .map(|(c, _)| c),
        )
        .into_iter()
        .map(|(line, r)| (line, r.map_err(|e| e.to_string())))
        .collect();
    }
    journal.current_check = None;
    journal.doc.pending_reboot = rep.pending_reboot.clone();
    let state = if rep.failed() == 0 {
        RunState::Applied
    } else {
        RunState::Partial
    };
    if let Err(e) = journal.finish(w, state) {
        rep.outcomes.push(Outcome {
            check: "journal".into(),
            subject: journal.dir.display().to_string(),
            result: Err(format!("cannot finish the journal: {e}")),
            unconfirmed: false,
        });
    }
    rep
}

/// A setting held on a port's IRQs that this run wrote after it reset the port read back the
/// reset's default when it was journaled: its record keeps what it read before the reset
/// instead, so revert gives back the value from before the run, not the reset's.
fn keep_originals_from_before_reset(
    journal: &mut Journal,
    before_reset: &std::collections::BTreeMap<String, String>,
) {
    let mut seen = std::collections::BTreeSet::new();
    for r in journal.doc.records.iter_mut() {
        if let Entry::Attr { path, original, .. } = &mut r.entry {
            if let (true, Some(v)) = (seen.insert(path.clone()), before_reset.get(path)) {
                *original = v.clone();
            }
        }
    }
}

/// After this run re-initialised ports (rings, MTU, channels: `PortReset::Resets`), the
/// settings held on their IRQs that the reset lost (irq.affinity's, of this run or an earlier
/// one in effect) are written again, each journaled in this run as a change of its setting:
/// a revert of this run puts back what the reset left, the earlier run's revert what was there
/// before it.
fn rewrite_after_port_reset(
    host: &Host,
    plan: &Plan,
    journal: &mut Journal,
    w: &mut dyn Writer,
    lockdown: Option<&str>,
    rep: &mut ApplyReport,
) {
    let mut ports: Vec<String> = plan
        .changes
        .iter()
        .zip(&rep.outcomes)
        .filter(|(_, o)| o.result.is_ok())
        .filter_map(|(c, _)| super::port_reset::port_of_action(&c.check, &c.action))
        .collect();
    ports.sort();
    ports.dedup();
    let attrs = super::port_reset::follower_attrs(host, &ports);
    if attrs.is_empty() {
        return;
    }
    let earlier: Vec<Journal> = journal
        .dir
        .parent()
        .map(crate::hostio::journal::list_runs)
        .unwrap_or_default()
        .into_iter()
        .filter(|d| *d != journal.dir)
        .filter_map(|d| Journal::open(&d).ok())
        .filter(|j| j.doc.state != RunState::Reverted)
        .collect();
    let wanted =
        super::port_reset::in_effect(earlier.iter().chain(std::iter::once(&*journal)), &attrs);
    for r in super::port_reset::lost(host, wanted) {
        journal.current_check = Some(r.check.clone());
        let cx = Step {
            host,
            j: journal,
            w,
            lockdown,
        };
        let result = write_attr(cx, plan.target, &r.check, &r.path, &r.value, Pool::No);
        rep.outcomes.push(Outcome {
            check: r.check.clone(),
            subject: format!("{} again after the reset of {}", r.path, ports.join(", ")),
            unconfirmed: result.as_ref().is_ok_and(|d| d.unconfirmed),
            result: result.map(|d| d.message).map_err(|e| e.to_string()),
        });
    }
    journal.current_check = None;
}

/// A write the host refused, worded with what was written and the lockdown mode.
fn io_err<'a>(
    what: &'a str,
    lockdown: Option<&'a str>,
) -> impl Fn(std::io::Error) -> StepError + 'a {
    move |source| StepError::Write {
        what: what.to_string(),
        lockdown: lockdown.map(str::to_string),
        source,
    }
}

fn apply_one(
    host: &Host,
    plan: &Plan,
    c: &Change,
    j: &mut Journal,
    w: &mut dyn Writer,
    lockdown: Option<&str>,
    gpu: Option<&dyn crate::hostio::gpu::GpuSetters>,
) -> Result<Done, StepError> {
    let target = plan.target;
    let cx = Step {
        host,
        j,
        w,
        lockdown,
    };
    match &c.action {
        Action::File { path, to, mode, .. } => {
            write_file(cx, path, to, *mode, plan.parted.get(path).copied())
        }
        Action::Symlink { path, target: t } => write_symlink(cx, path, t),
        Action::Attr {
            path,
            to,
            shared_count,
            ..
        } => write_attr(
            cx,
            target,
            &c.check,
            path,
            to,
            Pool::of(*shared_count, plan, path),
        ),
        Action::Owned(a) => a
            .execute(crate::model::plan::SetCx {
                host,
                journal: cx.j,
                writer: cx.w,
                lockdown,
                gpu,
            })
            .map_err(StepError::from),
        Action::ConfigWord {
            bdf,
            register,
            path,
            offset,
            from,
            to,
            mask,
            field,
        } => write_config_word(
            cx,
            ConfigWrite {
                bdf,
                register,
                path,
                offset: *offset,
                from: *from,
                to: *to,
                mask: *mask,
                field: field.as_ref(),
            },
        ),
    }
}

/// What every step writes through: the host, the run's journal and writer, and the lockdown
/// mode that words a refused write.
struct Step<'s, 'h> {
    host: &'h Host,
    j: &'s mut Journal,
    w: &'s mut dyn Writer,
    lockdown: Option<&'s str>,
}

/// A journal write that failed: the step stops before it changes anything.
fn jerr(e: std::io::Error) -> StepError {
    StepError::Journal(e)
}

/// A file: the original journaled as it is on disk now (a symlink as the link itself, revert
/// puts it back byte for byte), a file daqtune does not own refused, then the write and its
/// read-back.
fn write_file(
    cx: Step,
    path: &str,
    to: &[u8],
    mode: u32,
    format: Option<crate::hostio::parts::Format>,
) -> Result<Done, StepError> {
    let Step {
        host,
        j,
        w,
        lockdown,
    } = cx;
    let real = real_path(host, path, false)?;
    // A symlink at the path is journaled as the link itself (revert puts the link back,
    // byte for byte); what it points to is read inside the host root, never outside.
    let link = match std::fs::symlink_metadata(&real) {
        Ok(m) if m.file_type().is_symlink() => Some(
            std::fs::read_link(&real)
                .map_err(|source| StepError::ReadLink {
                    path: path.to_string(),
                    source,
                })?
                .display()
                .to_string(),
        ),
        _ => None,
    };
    let current = match &link {
        Some(_) => real_path(host, path, true).and_then(|r| match std::fs::read(r) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StepError::ReadLinked {
                path: path.to_string(),
                source,
            }),
        }),
        None => match std::fs::read(&real) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StepError::ReadOriginal {
                path: path.to_string(),
                source,
            }),
        },
    }?;
    refuse_foreign(path, to, link.as_deref(), current.as_deref())?;
    // A file of several settings: which of them this write changes, from what is on disk
    // now (a link's target as read through it).
    let parts = format.map(|format| {
        let mut owners = crate::hostio::parts::changed_owners(
            format,
            current.as_deref().map(String::from_utf8_lossy).as_deref(),
            Some(&String::from_utf8_lossy(to)),
        );
        // Only the skeleton changed (the header's profile): the write is the planned check's.
        if owners.is_empty() {
            owners.extend(j.current_check.clone());
        }
        crate::hostio::parts::FileParts { format, owners }
    });
    // The journal keeps what is on disk now, not what the plan saw.
    let original = match (&link, current) {
        (None, Some(bytes)) => {
            let m = std::fs::metadata(&real).map(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.permissions().mode() & 0o7777
            });
            let blob = j.save_blob(w, &bytes).map_err(jerr)?;
            Some(Saved {
                blob,
                mode: m.unwrap_or(mode),
            })
        }
        _ => None,
    };
    let created = first_missing_dir(&real, host.root()).map(|d| d.display().to_string());
    // What is written is kept too: `status` compares the file with it (drift), and a
    // partial revert tells a later run's rewrite from this run's file.
    let written = j.save_written(w, to).map_err(jerr)?;
    let idx = j
        .record(
            w,
            Entry::File {
                path: path.to_string(),
                original,
                created_dir: created.map(|d| host_rel(host, &d)),
                link,
                written: Some(written),
                parts,
            },
        )
        .map_err(jerr)?;
    w.write_file(&real, to, mode)
        .map_err(io_err(path, lockdown))?;
    j.mark_done(w, idx).map_err(jerr)?;
    file_reads_back(&real, path, to)?;
    Ok(format!("wrote {path}").into())
}

/// A symlink (a unit's enablement): the old link journaled, then the link and its read-back.
fn write_symlink(cx: Step, path: &str, t: &str) -> Result<Done, StepError> {
    let Step {
        host,
        j,
        w,
        lockdown,
    } = cx;
    let real = real_path(host, path, false)?;
    let original = std::fs::read_link(&real)
        .ok()
        .map(|p| p.display().to_string());
    let created =
        first_missing_dir(&real, host.root()).map(|d| host_rel(host, &d.display().to_string()));
    let idx = j
        .record(
            w,
            Entry::Symlink {
                path: path.to_string(),
                original,
                created_dir: created,
                to: Some(t.to_string()),
            },
        )
        .map_err(jerr)?;
    w.symlink(t, &real).map_err(io_err(path, lockdown))?;
    j.mark_done(w, idx).map_err(jerr)?;
    link_reads_back(&real, path, t)?;
    Ok(format!("enabled {path}").into())
}

/// Whether an attribute is a count of a shared pool (hugepages), and whether the next boot
/// reserves the whole of it (`Plan::boot_reserved`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pool {
    No,
    Shared,
    SharedBootReserved,
}

impl Pool {
    fn of(shared_count: bool, plan: &Plan, path: &str) -> Pool {
        match (shared_count, plan.boot_reserved.contains(path)) {
            (false, _) => Pool::No,
            (true, false) => Pool::Shared,
            (true, true) => Pool::SharedBootReserved,
        }
    }
}

/// The count a pool reads back when the kernel filled it only in part (2M/1G pages need free
/// contiguous memory): `None` when it is not a count below the one written.
fn granted_in_part(back: &str, to: &str) -> Option<u64> {
    let (granted, wanted) = (back.parse::<u64>().ok()?, to.trim().parse::<u64>().ok()?);
    (granted < wanted).then_some(granted)
}

/// What a write of `to` that reads back `back` did: done; done as far as the kernel allows and
/// waiting for the boot that reserves the pool; or a contradiction, which fails the step.
fn judge_attr(path: &str, to: &str, back: &str, pool: Pool) -> Result<Done, StepError> {
    if attr_matches(path, back, to) {
        return Ok(format!("{path} = {to}").into());
    }
    match granted_in_part(back, to).filter(|_| pool == Pool::SharedBootReserved) {
        Some(granted) => Ok(Done {
            message: format!(
                "{path} = {granted} of {to} now: the kernel has no more free contiguous memory for these pages; the kernel line reserves the pool at the next boot"
            ),
            unconfirmed: false,
            pending_boot: true,
        }),
        _ => Err(StepError::AttrDiffers {
            path: path.to_string(),
            to: to.to_string(),
            back: back.to_string(),
        }),
    }
}

/// A kernel attribute (sysfs, procfs): the original journaled, the write, and its read-back.
fn write_attr(
    cx: Step,
    target: Target,
    check: &str,
    path: &str,
    to: &str,
    pool: Pool,
) -> Result<Done, StepError> {
    let shared_count = pool != Pool::No;
    let Step {
        host,
        j,
        w,
        lockdown,
    } = cx;
    let real = real_path(host, path, true)?;
    let original = std::fs::read_to_string(&real).map_err(|source| StepError::Read {
        what: path.to_string(),
        source,
    })?;
    let idx = j
        .record(
            w,
            Entry::Attr {
                check: check.to_string(),
                path: path.to_string(),
                original,
                new: to.to_string(),
                shared_count,
            },
        )
        .map_err(jerr)?;
    w.write_attr(&real, to, target)
        .map_err(io_err(path, lockdown))?;
    let back = std::fs::read_to_string(&real).map_err(|source| StepError::ReadBack {
        what: path.to_string(),
        source,
    })?;
    journal_granted(j, idx, shared_count, back.trim(), to);
    j.mark_done(w, idx).map_err(jerr)?;
    judge_attr(path, to, back.trim(), pool)
}

/// A shared pool the kernel filled only in part (2M/1G pages need free contiguous memory):
/// the journal keeps what it granted, so revert gives back this run's pages and never pages
/// that were there before.
fn journal_granted(j: &mut Journal, idx: usize, shared_count: bool, back: &str, to: &str) {
    if shared_count && back != to.trim() && back.parse::<u64>().is_ok() {
        if let Some(Entry::Attr { new, .. }) = j.doc.records.get_mut(idx).map(|r| &mut r.entry) {
            *new = back.to_string();
        }
    }
}

/// One 16-bit register of a config space, as the plan decided it.
struct ConfigWrite<'a> {
    bdf: &'a str,
    register: &'a str,
    path: &'a str,
    offset: u64,
    from: u16,
    to: u16,
    mask: u16,
    field: Option<&'a crate::model::plan::RegField>,
}

/// A config-space register: refused when it reads 0xffff or moved since planning, the
/// original journaled, the write and its read-back of the bits the plan changes.
fn write_config_word(cx: Step, c: ConfigWrite) -> Result<Done, StepError> {
    let Step {
        host,
        j,
        w,
        lockdown,
    } = cx;
    let ConfigWrite {
        bdf,
        register,
        path,
        offset,
        from,
        to,
        mask,
        field,
    } = c;
    let real = real_path(host, path, true)?;
    let cur = read_word(&real, offset).map_err(|source| StepError::Read {
        what: bdf.to_string(),
        source,
    })?;
    if cur == 0xffff {
        return Err(StepError::DeviceGone {
            bdf: bdf.to_string(),
            register: register.to_string(),
        });
    }
    if cur != from {
        return Err(StepError::Moved {
            bdf: bdf.to_string(),
            register: register.to_string(),
            from,
            cur,
        });
    }
    let idx = j
        .record(
            w,
            Entry::ConfigWord {
                bdf: bdf.to_string(),
                path: path.to_string(),
                offset,
                original: cur,
                new: to,
                mask,
            },
        )
        .map_err(jerr)?;
    let what = match field {
        Some(f) => format!("{} of {bdf}", f.name),
        None => format!("{register} of {bdf}"),
    };
    w.pwrite(&real, offset, &to.to_le_bytes())
        .map_err(io_err(&what, lockdown))?;
    j.mark_done(w, idx).map_err(jerr)?;
    let back = read_word(&real, offset).map_err(|source| StepError::ReadBack {
        what: bdf.to_string(),
        source,
    })?;
    if back & mask != to & mask {
        // The entry stays (done): revert writes the original bits back, which on a
        // device that ignored the write changes nothing.
        return Err(StepError::NotTaken {
            bdf: bdf.to_string(),
            register: register.to_string(),
            to,
            back,
            field: field.cloned(),
        });
    }
    Ok(match field {
        Some(f) => format!(
            "{bdf} {} = {} ({register} 0x{back:04x})",
            f.name,
            f.decode(back)
        ),
        None => format!("{bdf} {register} = 0x{back:04x}"),
    }
    .into())
}

/// daqtune rewrites only files it owns (DESIGN "Apply safety"): a file it writes with its mark
/// (units, rules, drop-ins) may replace only a file that carries the mark too. Anything else
/// at that path is the user's (a hand-written drop-in, a file someone linked there), and the
/// write is refused with what to do, before anything is journaled or changed.
pub(crate) fn refuse_foreign(
    path: &str,
    to: &[u8],
    link: Option<&str>,
    current: Option<&[u8]>,
) -> Result<(), StepError> {
    let mark = format!("# {}", daqtune_units::OWNER_MARK);
    if !to.starts_with(mark.as_bytes()) {
        return Ok(());
    }
    let marked = |b: &[u8]| {
        b.windows(daqtune_units::OWNER_MARK.len())
            .any(|w| w == daqtune_units::OWNER_MARK.as_bytes())
    };
    let what = match (link, current) {
        (None, None) => return Ok(()),
        (_, Some(b)) if marked(b) => return Ok(()),
        (Some(t), None) => format!("a symlink to {t}, which does not exist"),
        (Some(t), Some(_)) => format!(
            "a symlink to {t}, a file without daqtune's mark (`{}`)",
            daqtune_units::OWNER_MARK
        ),
        (None, Some(_)) => format!(
            "a file without daqtune's mark (`{}`): someone else wrote it",
            daqtune_units::OWNER_MARK
        ),
    };
    Err(StepError::Foreign {
        path: path.to_string(),
        what,
    })
}

/// The read-back of a file write: the bytes on disk are the bytes written.
pub(crate) fn file_reads_back(real: &Path, path: &str, want: &[u8]) -> Result<(), StepError> {
    let back = std::fs::read(real).map_err(|source| StepError::FileGone {
        path: path.to_string(),
        len: want.len(),
        source,
    })?;
    if back != want {
        return Err(StepError::FileDiffers {
            path: path.to_string(),
            len: want.len(),
            back: back.len(),
            difference: first_difference(&back, want),
        });
    }
    Ok(())
}

/// Where two byte strings first differ, for a read-back message.
fn first_difference(back: &[u8], want: &[u8]) -> String {
    let at = back
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(back.len().min(want.len()));
    let line = |b: &[u8]| {
        let start = b[..at.min(b.len())]
            .iter()
            .rposition(|c| *c == b'\n')
            .map_or(0, |p| p + 1);
        let end = b[start..]
            .iter()
            .position(|c| *c == b'\n')
            .map_or(b.len(), |p| start + p);
        String::from_utf8_lossy(&b[start..end]).into_owned()
    };
    format!(
        " (from byte {at}: `{}` where `{}` was written)",
        line(back),
        line(want)
    )
}

/// The read-back of a symlink: the link is there and points where it was told to.
pub(crate) fn link_reads_back(real: &Path, path: &str, target: &str) -> Result<(), StepError> {
    match std::fs::read_link(real) {
        Ok(t) if t.as_os_str() == target => Ok(()),
        Ok(t) => Err(StepError::LinkDiffers {
            path: path.to_string(),
            target: target.to_string(),
            got: t.display().to_string(),
        }),
        Err(source) => Err(StepError::LinkGone {
            path: path.to_string(),
            target: target.to_string(),
            source,
        }),
    }
}

fn apply_attr_batch(
    host: &Host,
    plan: &Plan,
    batch: &[&Change],
    j: &mut Journal,
    w: &mut dyn Writer,
    lockdown: Option<&str>,
) -> Vec<Result<Done, StepError>> {
    let target = plan.target;
    let mut results: Vec<Option<Result<Done, StepError>>> =
        std::iter::repeat_with(|| None).take(batch.len()).collect();
    let mut todo = Vec::new();
    for (k, c) in batch.iter().enumerate() {
        let Action::Attr {
            path,
            to,
            shared_count,
            ..
        } = &c.action
        else {
            results[k] = Some(Err(StepError::NotAttr));
            continue;
        };
        let prepared = real_path(host, path, true).and_then(|real| {
            std::fs::read_to_string(&real)
                .map(|orig| (real, orig))
                .map_err(|source| StepError::Read {
                    what: path.to_string(),
                    source,
                })
        });
        match prepared {
            Ok((real, original)) => {
                let idx = j.push(Entry::Attr {
                    check: c.check.clone(),
                    path: path.clone(),
                    original,
                    new: to.clone(),
                    shared_count: *shared_count,
                });
                todo.push((k, idx, real, path, to, Pool::of(*shared_count, plan, path)));
            }
            Err(e) => results[k] = Some(Err(e)),
        }
    }
    if let Err(e) = j.flush(w) {
        for (k, ..) in &todo {
            // One failed flush refuses every step of the batch.
            let each = std::io::Error::new(e.kind(), e.to_string());
            results[*k] = Some(Err(StepError::Journal(each)));
        }
        return results
            .into_iter()
            .map(|r| r.unwrap_or(Err(StepError::NotRun)))
            .collect();
    }
    for (k, idx, real, path, to, pool) in todo {
        let r = w
            .write_attr(&real, to, target)
            .map_err(io_err(path, lockdown))
            .and_then(|()| {
                j.set_done(idx);
                std::fs::read_to_string(&real).map_err(|source| StepError::ReadBack {
                    what: path.to_string(),
                    source,
                })
            })
            .and_then(|back| {
                journal_granted(j, idx, pool != Pool::No, back.trim(), to);
                judge_attr(path, to, back.trim(), pool)
            });
        results[k] = Some(r);
    }
    if let Err(e) = j.flush(w) {
        // The entries are on disk (undone ones are harmless to revert); only the marks are not.
        if let Some(Some(Ok(m))) = results.last_mut() {
            m.message
                .push_str(&format!(" (journal done-marks not written: {e})"));
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or(Err(StepError::NotRun)))
        .collect()
}

/// Host path of a real path inside the root (for the journal).
fn host_rel(host: &Host, real: &str) -> String {
    let root = host.root().display().to_string();
    if host.is_live() {
        return real.to_string();
    }
    match real.strip_prefix(&root) {
        Some(r) if r.starts_with('/') => r.to_string(),
        _ => real.to_string(),
    }
}

/// sysfs shows a governor write as the name, nr_hugepages as the count the kernel managed,
/// a choice attribute (THP) as every choice with the written one bracketed.
fn attr_matches(_path: &str, back: &str, want: &str) -> bool {
    back == want
        || back.split_whitespace().eq(want.split_whitespace())
        || (back.contains('[')
            && crate::hostio::setters::selected_choice(back) == Some(want.trim()))
}

pub fn read_word(path: &Path, offset: u64) -> std::io::Result<u16> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path)?;
    let mut b = [0u8; 2];
    f.read_exact_at(&mut b, offset)?;
    Ok(u16::from_le_bytes(b))
}

/// After files change on the live host: regenerate grub.cfg, reload systemd and udev.
pub fn post_commands<'a>(
    changed: impl Iterator<Item = &'a Change>,
) -> Vec<(String, Result<(), CommandError>)> {
    let mut grub = false;
    let mut units = false;
    let mut udev = false;
    for c in changed {
        match &c.action {
            Action::File { path, .. } | Action::Symlink { path, .. } => {
                // The trial boot's entry script is read by update-grub too.
                grub |= path.starts_with("/etc/default/grub") || path.starts_with("/etc/grub.d/");
                units |= path.starts_with("/etc/systemd/");
                udev |= path.starts_with("/etc/udev/");
            }
            _ => {}
        }
    }
    commands_for(grub, units, udev)
}

pub fn commands_for(
    grub: bool,
    units: bool,
    udev: bool,
) -> Vec<(String, Result<(), CommandError>)> {
    let mut out = Vec::new();
    if grub {
        out.push(run_grub_updater());
    }
    if units {
        out.push(run_cmd(&["systemctl", "daemon-reload"]));
    }
    if udev {
        out.push(run_cmd(&["udevadm", "control", "--reload"]));
    }
    out
}

fn find_exe(name: &str) -> Option<String> {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| format!("{d}/{name}"))
        .find(|p| Path::new(p).exists())
}

fn run_cmd(argv: &[&str]) -> (String, Result<(), CommandError>) {
    let line = argv.join(" ");
    let Some(exe) = find_exe(argv[0]) else {
        return (line, Err(CommandError::NotInstalled(argv[0].to_string())));
    };
    let r = std::process::Command::new(exe)
        .args(&argv[1..])
        .output()
        .map_err(CommandError::Spawn)
        .and_then(|o| {
            if o.status.success() {
                Ok(())
            } else {
                Err(CommandError::Failed {
                    stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
                })
            }
        });
    (line, r)
}

/// update-grub (Debian/Ubuntu) or grub2-mkconfig (Fedora/RHEL/SUSE); never under --root.
fn run_grub_updater() -> (String, Result<(), CommandError>) {
    if find_exe("update-grub").is_some() {
        return run_cmd(&["update-grub"]);
    }
    if find_exe("grub2-mkconfig").is_some() {
        let out = if Path::new("/boot/grub2/grub.cfg").exists() {
            "/boot/grub2/grub.cfg"
        } else {
            "/boot/grub/grub.cfg"
        };
        return run_cmd(&["grub2-mkconfig", "-o", out]);
    }
    if find_exe("grub-mkconfig").is_some() {
        return run_cmd(&["grub-mkconfig", "-o", "/boot/grub/grub.cfg"]);
    }
    ("update-grub".into(), Err(CommandError::NoGrubUpdater))
}

#[cfg(test)]
pub(crate) mod tests;
