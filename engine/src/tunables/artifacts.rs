//! `daqtune.artifacts`: the units, rules and drop-ins daqtune wrote are still there and will do
//! their job at the next boot: each present, each unit enabled where its `[Install]` section
//! says, the binary each unit or rule runs present and executable, and each unit's last run a
//! success (systemd over D-Bus on the live host; the snapshot's record under a root).
//! Observation only: `apply` writes the artifacts, this says whether they still work.

use crate::context::artifacts::{
    daqtune_artifacts, profile_copy_intact, profile_files, Artifact, Kind,
};
use crate::context::Context;
use crate::tunable::Tunable;
use crate::verdict::{Area, Verdict};
use daqtune_units::{systemd, udev};

pub const ARTIFACTS: Tunable = Tunable {
    id: "daqtune.artifacts",
    area: Area::Platform,
    title: "daqtune's own units, rules and drop-ins: present, enabled, their binary there, their last run",
    aliases: &["artifacts"],
    doc: include_str!("../../../docs/checks/daqtune.artifacts.md"),
    needs_root: false,
    profile_keys: &["persist.grub_dropin", "hugepages.mount"],
    check: run,
    planner: None,
};

const ID: &str = "daqtune.artifacts";

fn run(ctx: &Context) -> Vec<Verdict> {
    let arts = daqtune_artifacts(ctx.facts(), &ctx.owned_files);
    if arts.is_empty() {
        return vec![Verdict::na(
            ID,
            "host",
            "daqtune has written no unit, rule or drop-in here (no apply run in effect in /var/lib/daqtune/journal, and none of its files carries its mark)",
        )];
    }
    arts.iter().map(|a| judge(ctx, a)).collect()
}

fn written_by(a: &Artifact) -> String {
    if a.runs.is_empty() {
        "found by its name".to_string()
    } else {
        format!("written by apply run {}", a.runs.join(", "))
    }
}

fn judge(ctx: &Context, a: &Artifact) -> Verdict {
    let text = match ctx.read_string(&a.path) {
        Ok(t) => t,
        Err(e) if e.not_found && a.changed_existing => {
            return Verdict::fail(
                ID,
                a.path.clone(),
                format!(
                    "{} is gone ({}; daqtune changed it, the original is in the journal)",
                    a.path,
                    written_by(a)
                ),
            )
            .fix("sudo daqtune revert   (restores the original), then sudo daqtune apply");
        }
        Err(e) if e.not_found => {
            return Verdict::fail(
                ID,
                a.path.clone(),
                format!("missing ({}); what it persisted is lost at the next boot", written_by(a)),
            )
            .fix("sudo daqtune apply   (writes it again; `sudo daqtune revert` first if it was removed on purpose)");
        }
        Err(e) => return Verdict::skip(ID, a.path.clone(), e.message),
    };
    let mut problems: Vec<String> = Vec::new();
    let mut fixes: Vec<String> = Vec::new();
    let mut good: Vec<String> = vec!["present".into()];
    let programs = match a.kind {
        Kind::Unit => systemd::parse_unit(&text).programs,
        Kind::UdevRule => udev::run_programs(&text),
        Kind::File => Vec::new(),
    };
    // Enabled where its [Install] section says.
    if let (Kind::Unit, Some(name)) = (a.kind, a.unit_name()) {
        let unit = systemd::parse_unit(&text);
        let mut missing = Vec::new();
        for (_, target) in &unit.installed_by {
            let link = format!("/etc/systemd/system/{target}.wants/{name}");
            if ctx.read_link(&link).is_ok() || ctx.exists(&link) {
                good.push(format!("enabled in {target}.wants"));
            } else {
                missing.push(target.clone());
            }
        }
        if !missing.is_empty() {
            problems.push(format!(
                "not enabled: no link in {} (it will not run at boot)",
                missing
                    .iter()
                    .map(|t| format!("/etc/systemd/system/{t}.wants/"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            fixes.push(format!(
                "sudo systemctl enable {name}   (or sudo daqtune apply)"
            ));
        }
    }
    // The binary it runs.
    for p in &programs {
        if !p.starts_with('/') {
            // udev looks relative programs up in its own directory; systemd refuses them.
            problems.push(format!("runs `{p}`, not an absolute path"));
            continue;
        }
        match ctx.stat(p) {
            Ok(st) if st.is_executable_file() => good.push(format!("{p} executable")),
            Ok(st) if !st.is_file => {
                problems.push(format!("runs {p}, which is not a regular file"))
            }
            Ok(st) => problems.push(format!(
                "runs {p}, which is not executable (mode {:o})",
                st.mode
            )),
            Err(e) if e.not_found => problems.push(format!("runs {p}, which is not installed")),
            Err(e) => problems.push(format!("runs {p}: {}", e.message)),
        }
    }
    // The profile file it runs daqtune with: without it every run of the unit or rule fails.
    if matches!(a.kind, Kind::Unit | Kind::UdevRule) {
        for f in profile_files(&text) {
            match ctx.read_string(&f) {
                Ok(t) => match profile_copy_intact(&f, t.as_bytes()) {
                    Some(false) => {
                        problems.push(format!(
                            "its profile {f} is not what apply copied there (edited or replaced since)"
                        ));
                        fixes.push("sudo daqtune apply --profile FILE   (copies the profile again and points the units at it)".into());
                    }
                    _ => good.push(format!("profile {f} present")),
                },
                Err(e) if e.not_found => {
                    problems.push(format!("its profile {f} is missing: every run of it fails"));
                    fixes.push("sudo daqtune apply --profile FILE   (keeps a copy of the profile under /etc/daqtune/profiles and points the units at it)".into());
                }
                Err(e) => problems.push(format!("its profile {f}: {}", e.message)),
            }
        }
    }
    if problems.iter().any(|p| p.starts_with("runs ")) {
        fixes.push(
            "install daqtune (`sudo apt install ./target/debian/daqtune_*.deb`, or `cargo install --path tune --root /usr`), or `sudo daqtune apply --exe PATH` to rewrite it for a binary that is there".to_string(),
        );
    }
    // systemd's view of its last run.
    let mut unknown: Option<String> = None;
    if let Some(name) = a.unit_name() {
        match ctx.unit_state(name) {
            Ok(st) => {
                let desc = format!(
                    "{} ({}{})",
                    st.active_state,
                    st.sub_state,
                    st.result
                        .as_deref()
                        .map(|r| format!(", result {r}"))
                        .unwrap_or_default()
                );
                if matches!(
                    st.load_state.as_str(),
                    "not-found" | "bad-setting" | "error" | "masked"
                ) {
                    problems.push(format!("systemd reports it {}", st.load_state));
                    fixes.push(format!(
                        "sudo systemctl daemon-reload; `systemctl status {name}` says what systemd refuses"
                    ));
                } else if st.failed() {
                    problems.push(format!(
                        "its last run failed: {desc}{}",
                        st.exec_main_status
                            .filter(|s| *s != 0)
                            .map(|s| format!(", exit status {s}"))
                            .unwrap_or_default()
                    ));
                    fixes.push(format!(
                        "journalctl -b -u {name} says why; sudo systemctl restart {name} after fixing it"
                    ));
                } else if st.active_state == "inactive" && st.result.as_deref() == Some("success") {
                    good.push("not run since it was written (it runs at the next boot)".into());
                } else {
                    good.push(format!("systemd: {desc}"));
                }
            }
            Err(e) => unknown = Some(e.to_string()),
        }
    }
    let subject = a.path.clone();
    if !problems.is_empty() {
        let mut v = Verdict::fail(
            ID,
            subject,
            format!("{} ({})", problems.join("; "), written_by(a)),
        )
        .observed(good.join(", "));
        if !fixes.is_empty() {
            v = v.fix(fixes.join("; "));
        }
        return v;
    }
    match unknown {
        // Everything on disk is right, but whether it ran cannot be told: never a pass.
        Some(why) => Verdict::skip(
            ID,
            subject,
            format!("{}; its last run is unknown: {why}", good.join(", ")),
        ),
        None => Verdict::pass(
            ID,
            subject,
            format!("{} ({})", good.join(", "), written_by(a)),
        ),
    }
}
