//! `daqtune diff` as text: each check whose verdict differs between the two sides, before and
//! after, with host data escaped for the terminal.

use daqtune_engine::diff::Change;
use daqtune_engine::model::verdict::Status;

/// The changes' text.
pub fn text(changes: &[Change]) -> String {
    if changes.is_empty() {
        return "no differences\n".into();
    }
    // Host data reaches a terminal here: control characters escaped, as in the text report.
    use daqtune_probe::text::printable as esc;
    let side = |s: &Option<(Status, Option<String>)>| match s {
        None => "(absent)".to_string(),
        Some((st, Some(o))) => format!("{st} [{}]", esc(o)),
        Some((st, None)) => st.to_string(),
    };
    let mut s = String::new();
    for c in changes {
        s.push_str(&format!(
            "{} {}\n  - {}\n  + {}\n",
            esc(&c.id),
            esc(&c.subject),
            side(&c.before),
            side(&c.after)
        ));
    }
    s.push_str(&format!("{} difference(s)\n", changes.len()));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_changes_escape_control_characters() {
        let changes = [Change {
            id: "platform".into(),
            subject: "evil\x1b[2J".into(),
            before: Some((Status::Pass, Some("a\x07".into()))),
            after: None,
        }];
        let out = text(&changes);
        assert!(!out.contains('\x1b') && !out.contains('\x07'), "{out:?}");
        assert!(
            out.contains("evil\\x1b[2J") && out.contains("[a\\x07]"),
            "{out}"
        );
    }
}
