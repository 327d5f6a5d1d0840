//! A plan as `daqtune plan` and `apply` show it: runtime writes folded across CPUs, file
//! changes as line diffs, notes, and what waits for a reboot.

use daqtune_engine::hostio::setters::Target;
use daqtune_engine::model::plan::{diff, Action, Change, NoteLevel, Plan};
use std::fmt::Write;

/// The plan's text.
pub fn text(plan: &Plan) -> String {
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = write_plan(plan, &mut s);
    s
}

fn write_plan(plan: &Plan, f: &mut String) -> std::fmt::Result {
    let where_ = match plan.target {
        Target::Live => "this host".to_string(),
        Target::Root => "the host root".to_string(),
    };
    writeln!(f, "Plan for profile {} on {where_}:", plan.profile)?;
    let runtime: Vec<&Change> = plan
        .changes
        .iter()
        .filter(|c| !c.action.is_persistent())
        .collect();
    let files: Vec<&Change> = plan
        .changes
        .iter()
        .filter(|c| c.action.is_persistent())
        .collect();
    if plan.changes.is_empty() {
        writeln!(f, "  nothing to change")?;
    }
    if !runtime.is_empty() {
        writeln!(f, "runtime:")?;
        // Fold identical writes across CPUs (a 256-CPU host prints one governor line).
        let mut i = 0;
        while i < runtime.len() {
            let c = runtime[i];
            let mut j = i + 1;
            if let Action::Attr { from, to, .. } = &c.action {
                while j < runtime.len()
                    && runtime[j].check == c.check
                    && c.subject.starts_with("cpu")
                    && matches!(&runtime[j].action, Action::Attr { from: f2, to: t2, .. } if f2 == from && t2 == to)
                {
                    j += 1;
                }
            }
            let subject = if j - i > 1 {
                format!(
                    "{} .. {} ({} CPUs)",
                    c.subject,
                    runtime[j - 1].subject,
                    j - i
                )
            } else {
                c.subject.clone()
            };
            let what = match &c.action {
                // A host root's stand-in for state the kernel keeps outside files (the
                // recorded ethtool groups): the change is the note.
                Action::Attr { path, .. } if path.starts_with("/daqtune/") => {
                    format!("{path} (recorded state)")
                }
                Action::Attr { path, from, to, .. } => {
                    let cpu = c.subject.split_whitespace().next().unwrap_or("");
                    let p = if j - i > 1 {
                        path.replacen(&format!("/{cpu}/"), "/cpu*/", 1)
                    } else {
                        path.clone()
                    };
                    format!("{p}: {} -> {to}", from.trim())
                }
                Action::Owned(a) => a.describe(),
                Action::ConfigWord { path, offset, .. } => format!("{path} @0x{offset:x}"),
                Action::File { path, .. } => format!("{path} (kernel state file)"),
                Action::Symlink { path, target } => format!("{path} -> {target}"),
            };
            writeln!(f, "  {:<13} {:<24} {what}", c.check, subject)?;
            if let Some(n) = &c.note {
                writeln!(f, "  {:<13} {:<24} ({n})", "", "")?;
            }
            i = j;
        }
    }
    if !files.is_empty() {
        writeln!(f, "files:")?;
        for c in files {
            match &c.action {
                Action::File {
                    path,
                    from,
                    to,
                    mode,
                } => {
                    let state = if from.is_some() { "changed" } else { "new" };
                    writeln!(
                        f,
                        "  {:<13} {path} ({state}, mode {mode:o}){}",
                        c.check,
                        if c.reboot {
                            ", takes effect after a reboot"
                        } else {
                            ""
                        }
                    )?;
                    let from_s = from
                        .as_deref()
                        .map(String::from_utf8_lossy)
                        .unwrap_or_default();
                    write!(f, "{}", diff(&from_s, &String::from_utf8_lossy(to)))?;
                    if let Some(n) = &c.note {
                        writeln!(f, "  ({n})")?;
                    }
                }
                Action::Symlink { path, target } => {
                    writeln!(f, "  {:<13} {path} -> {target} (enable)", c.check)?
                }
                _ => {}
            }
        }
    }
    if !plan.notes.is_empty() {
        writeln!(f, "notes:")?;
        for n in &plan.notes {
            let lvl = match n.level {
                NoteLevel::Info => "info",
                NoteLevel::Warn => "warn",
                NoteLevel::Skip => "skip",
                NoteLevel::PendingReboot => "pending-reboot",
            };
            writeln!(f, "  {:<13} {lvl}: {}", n.check, n.message)?;
        }
    }
    let reboot: Vec<&str> = plan
        .changes
        .iter()
        .filter(|c| c.reboot)
        .map(|c| c.check.as_str())
        .collect();
    if !reboot.is_empty() {
        writeln!(f, "reboot needed for: {}", reboot.join(", "))?;
    }
    Ok(())
}
