//! `daqtune status` as text: the apply runs in effect, the trial boot, what waits for a reboot
//! and what drifted, with the command that restores it.

use daqtune_engine::apply::STATE_DIR;
use daqtune_engine::status::{SettingState, Status};
use std::fmt::Write as _;
use std::path::Path;

/// The text report.
pub fn text(st: &Status) -> String {
    let mut s = String::new();
    if st.runs.is_empty() {
        let _ = writeln!(
            s,
            "nothing applied: no apply run in effect (no journal under {})",
            journal_dir_shown(st)
        );
        for u in &st.unreadable {
            let _ = writeln!(s, "unreadable journal: {u}");
        }
        return s;
    }
    let _ = writeln!(
        s,
        "profile in effect: {}",
        st.profile.as_deref().unwrap_or("-")
    );
    let _ = writeln!(s, "apply runs in effect ({}), oldest first:", st.runs.len());
    for r in &st.runs {
        let when = match &r.finished_at {
            Some(f) => format!("{} (finished {f})", r.started_at),
            None => r.started_at.clone(),
        };
        let by = r.daqtune_version.as_deref().map_or(
            "a daqtune that did not record its version".to_string(),
            |v| format!("daqtune {v}"),
        );
        let _ = writeln!(s, "  {}  {}  {when}, by {by}", r.id, r.state);
        let origin = r.profile_origin.as_deref().unwrap_or("not recorded");
        let _ = writeln!(s, "      profile {} ({origin})", r.profile);
        let opts = match &r.options {
            Some(o) if o.is_empty() => "none".to_string(),
            Some(o) => o.join(" "),
            None => "not recorded".to_string(),
        };
        let _ = writeln!(s, "      options: {opts}");
        let _ = writeln!(s, "      {} change(s): {}", r.changes, r.checks.join(", "));
        if !r.undone.is_empty() {
            let _ = writeln!(s, "      undone by revert --only: {}", r.undone.join(", "));
        }
    }
    if let Some(t) = &st.trial {
        let _ = writeln!(s, "trial boot: {}", t.describe());
    }
    match (&st.pending_reboot[..], &st.judged_with) {
        ([], Some(_)) => {
            let _ = writeln!(s, "waiting for a reboot: nothing");
        }
        ([], None) => {}
        (p, _) => {
            let _ = writeln!(s, "waiting for a reboot: {}", p.join(", "));
        }
    }
    for u in &st.unreadable {
        let _ = writeln!(s, "unreadable journal: {u}");
    }
    let sum = &st.summary;
    if sum.drift == 0 {
        let _ = writeln!(
            s,
            "no drift: {} setting(s) read as applied{}",
            sum.held,
            if sum.unknown > 0 {
                format!(", {} could not be read (below)", sum.unknown)
            } else {
                String::new()
            }
        );
    } else {
        let _ = writeln!(
            s,
            "DRIFT: {} of {} setting(s) changed since they were applied:",
            sum.drift,
            st.settings.len()
        );
    }
    for x in st.settings.iter().filter(|x| x.state != SettingState::Held) {
        let word = match x.state {
            SettingState::Drift => "DRIFT",
            _ => "?    ",
        };
        let values = match (&x.applied, &x.now) {
            (Some(a), Some(n)) => format!(": applied `{a}`, now `{n}`"),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "  {word}  {:<14} {}{values} ({}; run {})",
            x.check, x.what, x.detail, x.run
        );
    }
    if let Some(cmd) = &st.restore {
        let _ = writeln!(s, "restore what drifted: {cmd}");
    }
    s
}

fn journal_dir_shown(st: &Status) -> String {
    let j = format!("{STATE_DIR}/journal");
    if st.root == "/" {
        j
    } else {
        Path::new(&st.root)
            .join(j.trim_start_matches('/'))
            .display()
            .to_string()
    }
}
