//! The kernel's latency settings (issue 26, item 3), the ones TuneD's latency-performance,
//! network-latency and realtime profiles manage: transparent hugepages (`kernel.thp`),
//! automatic NUMA balancing (`kernel.numa-balancing`), the lockup watchdogs on the data cores
//! (`kernel.watchdog`), timer migration (`kernel.timer-migration`), the vmstat refresh
//! (`vm.stat-interval`) and KSM (`kernel.ksm`).
//!
//! Each is a tunable of its own (its profile keys, `--only`, its file, its revert), and all
//! share one shape, kept here: the tunable lists the kernel files it judges ([`Item`]: a path
//! and what the profile wants there), [`judge`] decides each (the check's verdict and the
//! plan's write both come from it), and the plan persists the wanted values in a file of the
//! tunable's own: a sysctl.d drop-in for sysctls, a tmpfiles.d file for sysfs attributes
//! (systemd-tmpfiles writes them at every boot; see docs/checks/kernel.thp.md for why not the
//! `transparent_hugepage=` kernel argument).

pub mod ksm;
pub mod sysctls;
pub mod thp;
pub mod watchdog;

use crate::hostio::setters::selected_choice;
use crate::model::context::Context;
use crate::model::facts::Facts;
use crate::model::plan::{Action, Change, NoteLevel, Plan, PlanCx, PlanError};
use crate::model::profile::LoadedProfile;
use crate::model::tunable::{ArtifactError, GenerateCx};
use crate::model::verdict::Verdict;
use daqtune_probe::cpulist::parse_cpulist;
use daqtune_probe::CpuSet;
use daqtune_units::{validate, InvalidValue};

/// What the profile wants one kernel file to hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// A choice attribute (`always [madvise] never`) with this word selected.
    Choice(&'static str),
    /// An integer equal to this one.
    Int(i64),
    /// One of these integers (the first is what is written).
    OneOf(&'static [i64]),
    /// An integer of at least this.
    AtLeast(i64),
    /// A CPU list holding none of these CPUs (written: the list without them).
    CpusWithout(CpuSet),
}

impl Want {
    /// How reports show it (`expected`).
    pub fn describe(&self) -> String {
        match self {
            Want::Choice(w) => format!("[{w}]"),
            Want::Int(n) => n.to_string(),
            Want::OneOf(v) => v
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" or "),
            Want::AtLeast(n) => format!(">= {n}"),
            Want::CpusWithout(c) => format!("no CPU of {c}"),
        }
    }
}

/// The judgement of one kernel file: what the check reports and the plan writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// The file holds what the profile wants; `keep` is that value as it is persisted.
    Meets { keep: String },
    /// It does not; `to` is the value to write (one the kernel accepts for that file).
    Off { to: String },
    /// The text cannot be compared (not what this file holds on any kernel), or no value
    /// satisfies the profile; the reason.
    Unjudged(String),
}

/// The one judgement `check` and `plan` both use: `have` (the file's text) against `want`.
pub fn judge(have: &str, want: &Want) -> Judged {
    let have = have.trim();
    let int = || -> Result<i64, Judged> {
        have.parse::<i64>()
            .map_err(|_| Judged::Unjudged(format!("`{have}` is not an integer")))
    };
    match want {
        Want::Choice(w) => match selected_choice(have) {
            Some(sel) if sel == *w => Judged::Meets {
                keep: w.to_string(),
            },
            Some(_) => Judged::Off { to: w.to_string() },
            None => Judged::Unjudged(format!("`{have}` shows no selected choice")),
        },
        Want::Int(n) => match int() {
            Ok(h) if h == *n => Judged::Meets {
                keep: n.to_string(),
            },
            Ok(_) => Judged::Off { to: n.to_string() },
            Err(e) => e,
        },
        Want::OneOf(v) => match int() {
            Ok(h) if v.contains(&h) => Judged::Meets {
                keep: h.to_string(),
            },
            Ok(_) => match v.first() {
                Some(first) => Judged::Off {
                    to: first.to_string(),
                },
                None => Judged::Unjudged("the profile allows no value".into()),
            },
            Err(e) => e,
        },
        Want::AtLeast(n) => match int() {
            Ok(h) if h >= *n => Judged::Meets {
                keep: h.to_string(),
            },
            Ok(_) => Judged::Off { to: n.to_string() },
            Err(e) => e,
        },
        Want::CpusWithout(data) => match parse_cpulist(have, None) {
            Err(e) => Judged::Unjudged(format!("`{have}` is not a CPU list: {e}")),
            Ok(set) if set.intersection(data).is_empty() => Judged::Meets {
                keep: set.to_string(),
            },
            Ok(set) => {
                let rest = set.difference(data);
                if rest.is_empty() {
                    Judged::Unjudged(format!(
                        "`{have}` holds only data cores ({data}): no CPU would be left to watch"
                    ))
                } else {
                    Judged::Off {
                        to: rest.to_string(),
                    }
                }
            }
        },
    }
}

/// How a setting is kept across reboots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persist {
    /// A sysctl: `key = value` in the tunable's sysctl.d drop-in.
    Sysctl,
    /// A sysfs attribute: a `w PATH - - - - VALUE` line in the tunable's tmpfiles.d file.
    Tmpfiles,
}

/// One kernel file a tunable judges.
#[derive(Debug, Clone)]
pub struct Item {
    /// How reports name it: the sysctl key, or a short name of the sysfs file.
    pub subject: String,
    /// The host path.
    pub path: String,
    pub want: Want,
    pub persist: Persist,
    /// Why a host lacks the file (the skip's reason after the path).
    pub absent: &'static str,
}

impl Item {
    /// A sysctl (`kernel.numa_balancing`) at its /proc/sys path.
    pub fn sysctl(key: &str, want: Want, absent: &'static str) -> Item {
        Item {
            subject: key.to_string(),
            path: format!("/proc/sys/{}", key.replace('.', "/")),
            want,
            persist: Persist::Sysctl,
            absent,
        }
    }

    /// A sysfs attribute, named `subject` in reports (`thp.enabled`: short, as the report's
    /// subject column is as wide as its longest subject).
    pub fn sysfs(path: &str, subject: &str, want: Want, absent: &'static str) -> Item {
        Item {
            subject: subject.to_string(),
            path: path.to_string(),
            want,
            persist: Persist::Tmpfiles,
            absent,
        }
    }

    /// The shell line that sets it by hand, for a fix. Only values [`judge`] makes reach it
    /// (integers, choice words, CPU lists): nothing to quote.
    fn by_hand(&self, to: &str) -> String {
        match self.persist {
            Persist::Sysctl => format!("sudo sysctl -w {}={to}", self.subject),
            Persist::Tmpfiles => format!("echo {to} | sudo tee {}", self.path),
        }
    }
}

/// A tunable's files: where it persists them, and what it is called in messages.
pub struct Spec {
    pub id: &'static str,
    /// Its sysctl.d drop-in (sysctl items).
    pub sysctl_file: Option<&'static str>,
    /// Its tmpfiles.d file (sysfs items).
    pub tmpfiles_file: Option<&'static str>,
}

impl Spec {
    /// The fixed paths this tunable owns (`daqtune.artifacts` looks for its mark there).
    pub fn owned(&self) -> Vec<String> {
        self.sysctl_file
            .iter()
            .chain(self.tmpfiles_file.iter())
            .map(|s| s.to_string())
            .collect()
    }
}

/// The check: one verdict per item, a skip with the reason for a file the host lacks, and a
/// warning for each sysctl another sysctl.d file sets after daqtune's drop-in at boot.
pub fn check(ctx: &Context, spec: &Spec, items: &[Item]) -> Vec<Verdict> {
    let id = spec.id;
    let mut out = Vec::new();
    for it in items {
        let have = match ctx.read_attr(&it.path) {
            Ok(h) => h,
            Err(e) if e.not_found => {
                out.push(Verdict::skip(
                    id,
                    it.subject.clone(),
                    format!("{} is absent: {}", it.path, it.absent),
                ));
                continue;
            }
            Err(e) => {
                out.push(Verdict::skip(id, it.subject.clone(), e.to_string()));
                continue;
            }
        };
        // A sysctl by its key, a sysfs file by its path.
        let name = match it.persist {
            Persist::Sysctl => &it.subject,
            Persist::Tmpfiles => &it.path,
        };
        let v = match judge(&have, &it.want) {
            Judged::Meets { .. } => {
                Verdict::pass(id, it.subject.clone(), format!("{name} = {have}"))
            }
            Judged::Off { to } => Verdict::warn(
                id,
                it.subject.clone(),
                format!("{name} = {have}, the profile wants {}", it.want.describe()),
            )
            .fix(format!(
                "sudo daqtune apply --only {id}   (or: {})",
                it.by_hand(&to)
            )),
            Judged::Unjudged(why) => {
                Verdict::skip(id, it.subject.clone(), format!("{}: {why}", it.path))
            }
        };
        out.push(v.observed(have).expected(it.want.describe()));
    }
    for (key, msg) in boot_overrides(ctx.facts(), spec, items) {
        out.push(
            Verdict::warn(id, format!("{key} at boot"), msg).fix(format!(
                "remove {key} from that file, or set it to the profile's value there"
            )),
        );
    }
    out
}

/// The sysctls of `items` another file sets, after the tunable's drop-in, to a value the
/// judgement rejects: at boot that file wins (systemd-sysctl applies the files in name order).
fn boot_overrides(facts: &Facts, spec: &Spec, items: &[Item]) -> Vec<(String, String)> {
    let Some(ours) = spec.sysctl_file else {
        return Vec::new();
    };
    let keys: Vec<&str> = items
        .iter()
        .filter(|i| i.persist == Persist::Sysctl)
        .map(|i| i.subject.as_str())
        .collect();
    if keys.is_empty() {
        return Vec::new();
    }
    let found = crate::tunables::sysctl::boot_settings(facts, ours, &keys);
    let mut out = Vec::new();
    for it in items.iter().filter(|i| i.persist == Persist::Sysctl) {
        let Some(o) = found.iter().rev().find(|o| o.key == it.subject) else {
            continue;
        };
        if matches!(judge(&o.value, &it.want), Judged::Meets { .. }) {
            continue;
        }
        out.push((
            it.subject.clone(),
            format!(
                "{}:{} sets {} = {} after daqtune's {ours} (systemd-sysctl applies the sysctl.d files in name order and the last setting wins): at boot {} is {}, the profile wants {}",
                o.file,
                o.line,
                it.subject,
                o.value,
                it.subject,
                o.value,
                it.want.describe()
            ),
        ));
    }
    out
}

/// The plan: a write for each item [`judge`] finds off (read back by the executor), a skip
/// note for each it cannot judge, and the tunable's files with every value that can be
/// judged (so a host already right stays right after a reboot).
pub fn plan(cx: &PlanCx, plan: &mut Plan, spec: &Spec, items: &[Item]) -> Result<(), PlanError> {
    let id = spec.id;
    let mut keep: Vec<(&Item, String)> = Vec::new();
    for it in items {
        let raw = match cx.facts.read_string(&it.path) {
            Ok(r) => r,
            Err(e) => {
                let why = if e.not_found {
                    format!("{} is absent: {}", it.path, it.absent)
                } else {
                    e.to_string()
                };
                plan.note(id, NoteLevel::Skip, why);
                continue;
            }
        };
        match judge(&raw, &it.want) {
            Judged::Meets { keep: k } => keep.push((it, k)),
            Judged::Off { to } => {
                if cx.opts.runtime {
                    plan.changes.push(Change {
                        check: id.into(),
                        subject: it.subject.clone(),
                        action: Action::Attr {
                            path: it.path.clone(),
                            from: raw,
                            to: to.clone(),
                            shared_count: false,
                        },
                        reboot: false,
                        note: None,
                    });
                }
                keep.push((it, to));
            }
            Judged::Unjudged(why) => {
                plan.note(id, NoteLevel::Skip, format!("{}: {why}", it.path));
            }
        }
    }
    for (_, msg) in boot_overrides(cx.facts, spec, items) {
        plan.note(id, NoteLevel::Warn, msg);
    }
    if !cx.opts.persist {
        return Ok(());
    }
    let pref = cx.profile_ref();
    if let Some(path) = spec.sysctl_file {
        if let Some(text) = sysctl_text(&keep, &pref)? {
            cx.file_change(plan, id, "sysctl.d", path, text, 0o644, false);
        }
    }
    if let Some(path) = spec.tmpfiles_file {
        if let Some(text) = tmpfiles_text(&keep, &pref)? {
            cx.file_change(plan, id, "tmpfiles.d", path, text, 0o644, false);
        }
    }
    Ok(())
}

/// The sysctl.d drop-in of the sysctl items in `keep`; `None` when there are none.
fn sysctl_text(
    keep: &[(&Item, String)],
    profile_ref: &str,
) -> Result<Option<String>, InvalidValue> {
    let v: Vec<(&str, &str)> = keep
        .iter()
        .filter(|(i, _)| i.persist == Persist::Sysctl)
        .map(|(i, k)| (i.subject.as_str(), k.as_str()))
        .collect();
    if v.is_empty() {
        return Ok(None);
    }
    crate::tunables::sysctl::dropin(&v, profile_ref).map(Some)
}

/// The tmpfiles.d file of the sysfs items in `keep` (`w` lines: systemd-tmpfiles-setup writes
/// each value at boot); `None` when there are none.
fn tmpfiles_text(
    keep: &[(&Item, String)],
    profile_ref: &str,
) -> Result<Option<String>, InvalidValue> {
    let lines: Vec<&(&Item, String)> = keep
        .iter()
        .filter(|(i, _)| i.persist == Persist::Tmpfiles)
        .collect();
    if lines.is_empty() {
        return Ok(None);
    }
    let profile = validate::profile_ref(profile_ref)?;
    let mut s = format!(
        "# {} (profile {profile}); `daqtune revert` removes it.\n",
        daqtune_units::OWNER_MARK
    );
    for (it, v) in lines {
        // tmpfiles.d splits on whitespace and expands `%` specifiers: the path and the value
        // must carry neither (both come from daqtune's own tables and judgement).
        for (what, x) in [
            ("tmpfiles.d path", it.path.as_str()),
            ("tmpfiles.d value", v),
        ] {
            if x.is_empty()
                || !x.chars().all(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '.' | '+' | ',')
                })
            {
                return Err(InvalidValue::new(
                    what,
                    x,
                    "letters, digits and `/_-.+,` only",
                ));
            }
        }
        s.push_str(&format!("w {} - - - - {v}\n", it.path));
    }
    Ok(Some(s))
}

/// What `daqtune generate` prints for a tunable: its file as the plan would write it, from
/// the host's current values.
pub fn generate(g: &GenerateCx, items: &[Item], persist: Persist) -> Result<String, ArtifactError> {
    let mut keep = Vec::new();
    for it in items.iter().filter(|i| i.persist == persist) {
        let Ok(raw) = g.facts.read_string(&it.path) else {
            continue;
        };
        match judge(&raw, &it.want) {
            Judged::Meets { keep: k } => keep.push((it, k)),
            Judged::Off { to } => keep.push((it, to)),
            Judged::Unjudged(_) => {}
        }
    }
    let text = match persist {
        Persist::Sysctl => sysctl_text(&keep, g.profile_ref)?,
        Persist::Tmpfiles => tmpfiles_text(&keep, g.profile_ref)?,
    };
    text.ok_or(ArtifactError::Nothing(
        "the profile asks for nothing this host's kernel has (the files are absent, or the profile leaves the setting alone)",
    ))
}

/// The profile's verdict when it leaves a setting alone.
pub fn not_judged(id: &str, key: &str) -> Vec<Verdict> {
    vec![Verdict::na(
        id,
        "host",
        format!(
            "this profile does not judge this setting (set `{key}` to have it checked and set)"
        ),
    )]
}

/// A `Context` over `facts` and `lp` (for `generate`, which has no run of checks).
pub fn context<'a>(facts: &'a Facts<'a>, lp: &'a LoadedProfile) -> Context<'a> {
    Context::with_facts(facts, lp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices() {
        let w = Want::Choice("never");
        assert!(matches!(
            judge("always madvise [never]\n", &w),
            Judged::Meets { .. }
        ));
        assert!(matches!(judge("never", &w), Judged::Meets { .. }));
        assert_eq!(
            judge("always [madvise] never", &w),
            Judged::Off { to: "never".into() }
        );
        assert!(matches!(
            judge("always madvise never", &w),
            Judged::Unjudged(_)
        ));
        assert!(matches!(judge("", &w), Judged::Unjudged(_)));
        let d = Want::Choice("defer+madvise");
        assert!(matches!(
            judge("always defer [defer+madvise] madvise never", &d),
            Judged::Meets { .. }
        ));
    }

    #[test]
    fn integers() {
        assert!(matches!(judge("0\n", &Want::Int(0)), Judged::Meets { .. }));
        assert_eq!(judge("1", &Want::Int(0)), Judged::Off { to: "0".into() });
        assert!(matches!(judge("x", &Want::Int(0)), Judged::Unjudged(_)));
        assert!(matches!(
            judge("2", &Want::OneOf(&[0, 2])),
            Judged::Meets { .. }
        ));
        assert_eq!(
            judge("1", &Want::OneOf(&[0, 2])),
            Judged::Off { to: "0".into() }
        );
        assert_eq!(
            judge("20", &Want::AtLeast(10)),
            Judged::Meets { keep: "20".into() }
        );
        assert_eq!(
            judge("1", &Want::AtLeast(10)),
            Judged::Off { to: "10".into() }
        );
    }

    #[test]
    fn cpu_lists() {
        let data = parse_cpulist("9-11", None).expect("list");
        let w = Want::CpusWithout(data);
        assert_eq!(judge("0-8", &w), Judged::Meets { keep: "0-8".into() });
        assert_eq!(judge("0-11", &w), Judged::Off { to: "0-8".into() });
        assert!(matches!(judge("9-11", &w), Judged::Unjudged(_)));
        assert!(matches!(judge("garbage", &w), Judged::Unjudged(_)));
    }

    #[test]
    fn tmpfiles_refuses_what_tmpfiles_would_split_or_expand() {
        let it = Item::sysfs("/sys/kernel/mm/ksm/run", "ksm.run", Want::Int(0), "");
        let ok = tmpfiles_text(&[(&it, "0".into())], "igx-orin")
            .expect("ok")
            .expect("text");
        assert!(ok.ends_with("w /sys/kernel/mm/ksm/run - - - - 0\n"), "{ok}");
        assert!(tmpfiles_text(&[(&it, "0 %h".into())], "igx-orin").is_err());
        assert!(tmpfiles_text(&[(&it, "".into())], "igx-orin").is_err());
    }
}
