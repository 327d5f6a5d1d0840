//! `daqtune plan --format json` (`daqtune.plan/v1`): the plan as data for configuration
//! managers. The Ansible role reports `changed` exactly when `changes` is not empty, and
//! reboots only for what `reboot_needed` (and, after apply, `check`) names.

use crate::hostio::setters::Target;
use crate::model::plan::{diff, Action, NoteLevel, Plan};
use serde_json::{json, Value};

pub const SCHEMA: &str = "daqtune.plan/v1";

fn action(a: &Action) -> Value {
    match a {
        Action::Attr { path, from, to, .. } => json!({
            "kind": "attr", "path": path, "from": from.trim_end(), "to": to.trim_end(),
        }),
        Action::Owned(a) => a.plan_json(),
        Action::ConfigWord {
            bdf,
            register,
            path,
            offset,
            from,
            to,
            mask,
            ..
        } => json!({
            "kind": "config-word", "device": bdf, "register": register, "path": path,
            "offset": offset, "from": format!("0x{from:04x}"), "to": format!("0x{to:04x}"),
            "mask": format!("0x{mask:04x}"),
        }),
        Action::File {
            path,
            from,
            to,
            mode,
        } => {
            let old = from
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            json!({
                "kind": "file", "path": path,
                "state": if from.is_some() { "changed" } else { "new" },
                "mode": format!("{mode:o}"),
                "diff": diff(&old, &String::from_utf8_lossy(to)),
            })
        }
        Action::Symlink { path, target } => json!({
            "kind": "symlink", "path": path, "target": target,
        }),
    }
}

/// The plan as `daqtune.plan/v1` JSON. `messages` are the lines `plan` prints before the plan
/// (the profile it detected, options kept from the last apply, what a `--config` derived).
pub fn render(plan: &Plan, messages: &[String]) -> String {
    let changes: Vec<Value> = plan
        .changes
        .iter()
        .map(|c| {
            let mut v = json!({
                "check": c.check,
                "subject": c.subject,
                "persistent": c.action.is_persistent(),
                "reboot": c.reboot,
                "action": action(&c.action),
            });
            if let Some(n) = &c.note {
                v["note"] = json!(n);
            }
            v
        })
        .collect();
    let notes: Vec<Value> = plan
        .notes
        .iter()
        .map(|n| {
            json!({
                "check": n.check,
                "level": match n.level {
                    NoteLevel::Info => "info",
                    NoteLevel::Warn => "warn",
                    NoteLevel::Skip => "skip",
                    NoteLevel::PendingReboot => "pending-reboot",
                },
                "message": n.message,
            })
        })
        .collect();
    let mut reboot: Vec<&str> = Vec::new();
    for c in plan.changes.iter().filter(|c| c.reboot) {
        if !reboot.contains(&c.check.as_str()) {
            reboot.push(&c.check);
        }
    }
    let doc = json!({
        "schema": SCHEMA,
        "daqtune_version": env!("CARGO_PKG_VERSION"),
        "profile": plan.profile,
        "target": match plan.target { Target::Live => "live", Target::Root => "root" },
        "messages": messages,
        "changes": changes,
        "notes": notes,
        "reboot_needed": reboot,
        "kernel_args": plan.kernel_args.as_ref().map(|k| k.render_plain().trim_end().to_string()),
    });
    let mut s =
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::plan::{Change, Note};

    #[test]
    fn changes_notes_and_reboot() {
        let plan = Plan {
            profile: "igx-orin".into(),
            target: Target::Root,
            changes: vec![
                Change {
                    check: "cpu.governor".into(),
                    subject: "cpu0".into(),
                    action: Action::Attr {
                        path: "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor".into(),
                        from: "powersave\n".into(),
                        to: "performance".into(),
                        shared_count: false,
                    },
                    reboot: false,
                    note: None,
                },
                Change {
                    check: "kernel.cmdline".into(),
                    subject: "grub".into(),
                    action: Action::File {
                        path: "/etc/default/grub.d/99-daqtune.cfg".into(),
                        from: None,
                        to: b"GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX isolcpus=9-11\"\n".to_vec(),
                        mode: 0o644,
                    },
                    reboot: true,
                    note: Some("takes effect after update-grub".into()),
                },
            ],
            notes: vec![Note {
                check: "pcie.acs".into(),
                level: NoteLevel::Skip,
                message: "IOMMU translates".into(),
            }],
            kernel_args: None,
            needs_binary: vec![],
            parted: Default::default(),
            boot_reserved: Default::default(),
        };
        let v: Value =
            serde_json::from_str(&render(&plan, &["profile igx-orin (detected)".into()]))
                .expect("json");
        assert_eq!(v["schema"], SCHEMA);
        assert_eq!(v["target"], "root");
        assert_eq!(v["changes"].as_array().map(Vec::len), Some(2));
        assert_eq!(v["changes"][0]["action"]["from"], "powersave");
        assert_eq!(v["changes"][0]["persistent"], false);
        assert_eq!(v["changes"][1]["persistent"], true);
        assert_eq!(v["changes"][1]["action"]["state"], "new");
        assert!(v["changes"][1]["action"]["diff"]
            .as_str()
            .is_some_and(|d| d.contains("+GRUB_CMDLINE_LINUX")));
        assert_eq!(v["reboot_needed"], json!(["kernel.cmdline"]));
        assert_eq!(v["notes"][0]["level"], "skip");
        assert_eq!(v["messages"][0], "profile igx-orin (detected)");
        let empty = Plan {
            changes: vec![],
            notes: vec![],
            ..plan
        };
        let v: Value = serde_json::from_str(&render(&empty, &[])).expect("json");
        assert_eq!(v["changes"], json!([]));
        assert_eq!(v["reboot_needed"], json!([]));
    }
}
