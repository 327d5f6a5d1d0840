//! `daqtune.artifacts`: the units, rules and drop-ins daqtune wrote are still there and will do
//! their job at the next boot: each present, each unit enabled where its `[Install]` section
//! says, the binary each unit or rule runs present and executable, and each unit's last run a
//! success (systemd over D-Bus on the live host; the snapshot's record under a root).
//! Observation only: `apply` writes the artifacts, this says whether they still work.

use crate::model::context::artifacts::{
    daqtune_artifacts, profile_copy_intact, profile_files, Artifact, Kind,
};
use crate::model::context::Context;
use crate::model::tunable::Tunable;
use crate::model::verdict::{Area, Verdict};
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
    let trial =
        crate::model::context::trial::current(ctx.facts(), crate::model::context::trial::STATE_DIR)
            .map(|t| trial_verdict(ctx, &t));
    if arts.is_empty() && trial.is_none() {
        return vec![Verdict::na(
            ID,
            "host",
            "daqtune has written no unit, rule or drop-in here (no apply run in effect in /var/lib/daqtune/journal, and none of its files carries its mark)",
        )];
    }
    let mut v: Vec<Verdict> = arts.iter().map(|a| judge(ctx, a)).collect();
    v.extend(trial);
    v
}

/// The kernel-argument trial of a run in effect: which run's trial failed and why, one that
/// waits for its boot, or one that committed.
fn trial_verdict(ctx: &Context, t: &crate::model::context::trial::TrialRecord) -> Verdict {
    use crate::model::context::trial::TrialState;
    let subject = "kernel-argument trial";
    match t.state {
        TrialState::Failed => Verdict::fail(ID, subject, t.describe()).fix(format!(
            "find why the trial boot failed (`journalctl -b -1`, the reason above), fix the profile, then `sudo daqtune apply --only kernel.cmdline` tries again; `sudo daqtune revert --run {}` undoes the run",
            t.run
        )),
        // This is the trial boot: its unit decides it once multi-user.target is reached.
        TrialState::Pending if crate::model::context::trial::booted_with(ctx.facts(), t) => Verdict::warn(
            ID,
            subject,
            format!(
                "{}; this boot carries them: {} decides it after {}",
                t.describe(),
                crate::model::context::trial::UNIT,
                crate::model::context::trial::TARGET
            ),
        ),
        TrialState::Pending => {
            let mut v = Verdict::warn(ID, subject, t.describe()).fix("sudo reboot");
            v.status = crate::model::verdict::Status::PendingReboot;
            v
        }
        TrialState::Committed => Verdict::pass(ID, subject, t.describe()),
    }
}

fn written_by(a: &Artifact) -> String {
    if a.runs.is_empty() {
        "found by its name".to_string()
    } else {
        format!("written by apply run {}", a.runs.join(", "))
    }
}

fn judge(ctx: &Context, a: &Artifact) -> Verdict {
    let text = match present(ctx, a) {
        Ok(t) => t,
        Err(v) => return *v,
    };
    let mut f = Findings {
        good: vec!["present".into()],
        ..Default::default()
    };
    if let (Kind::Unit, Some(name)) = (a.kind, a.unit_name()) {
        f.enabled(ctx, &text, name);
    }
    f.programs(ctx, a, &text);
    if matches!(a.kind, Kind::Unit | Kind::UdevRule) {
        f.profiles(ctx, &text);
    }
    if f.problems.iter().any(|p| p.starts_with("runs ")) {
        f.fixes.push(
            "install daqtune (`sudo apt install ./target/debian/daqtune_*.deb`, or `cargo install --path tune --root /usr`), or `sudo daqtune apply --exe PATH` to rewrite it for a binary that is there".to_string(),
        );
    }
    let unknown = match a.unit_name() {
        Some(name) => f.last_run(ctx, name).err(),
        None => None,
    };
    f.verdict(a, unknown)
}

/// The artifact's text, or the verdict when it is gone or cannot be read (boxed: a verdict is
/// large beside the text).
fn present(ctx: &Context, a: &Artifact) -> Result<String, Box<Verdict>> {
    match ctx.read_string(&a.path) {
        Ok(t) => Ok(t),
        Err(e) if e.not_found && a.changed_existing => Err(Box::new(Verdict::fail(
            ID,
            a.path.clone(),
            format!(
                "{} is gone ({}; daqtune changed it, the original is in the journal)",
                a.path,
                written_by(a)
            ),
        )
        .fix("sudo daqtune revert   (restores the original), then sudo daqtune apply"))),
        Err(e) if e.not_found => Err(Box::new(Verdict::fail(
            ID,
            a.path.clone(),
            format!("missing ({}); what it persisted is lost at the next boot", written_by(a)),
        )
        .fix("sudo daqtune apply   (writes it again; `sudo daqtune revert` first if it was removed on purpose)"))),
        Err(e) => Err(Box::new(Verdict::skip(ID, a.path.clone(), e.message))),
    }
}

/// What the checks of one present artifact found: problems with their fixes, and what is
/// right.
#[derive(Default)]
struct Findings {
    problems: Vec<String>,
    fixes: Vec<String>,
    good: Vec<String>,
}

impl Findings {
    /// A unit is enabled where its [Install] section says.
    fn enabled(&mut self, ctx: &Context, text: &str, name: &str) {
        let unit = systemd::parse_unit(text);
        let mut missing = Vec::new();
        for (_, target) in &unit.installed_by {
            let link = format!("/etc/systemd/system/{target}.wants/{name}");
            if ctx.read_link(&link).is_ok() || ctx.exists(&link) {
                self.good.push(format!("enabled in {target}.wants"));
            } else {
                missing.push(target.clone());
            }
        }
        if !missing.is_empty() {
            self.problems.push(format!(
                "not enabled: no link in {} (it will not run at boot)",
                missing
                    .iter()
                    .map(|t| format!("/etc/systemd/system/{t}.wants/"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            self.fixes.push(format!(
                "sudo systemctl enable {name}   (or sudo daqtune apply)"
            ));
        }
    }

    /// The binary each program line of a unit or rule runs is there and executable.
    fn programs(&mut self, ctx: &Context, a: &Artifact, text: &str) {
        let programs = match a.kind {
            Kind::Unit => systemd::parse_unit(text).programs,
            Kind::UdevRule => udev::run_programs(text),
            Kind::File => Vec::new(),
        };
        for p in &programs {
            if !p.starts_with('/') {
                // udev looks relative programs up in its own directory; systemd refuses them.
                self.problems
                    .push(format!("runs `{p}`, not an absolute path"));
                continue;
            }
            match ctx.stat(p) {
                Ok(st) if st.is_executable_file() => self.good.push(format!("{p} executable")),
                Ok(st) if !st.is_file => self
                    .problems
                    .push(format!("runs {p}, which is not a regular file")),
                Ok(st) => self.problems.push(format!(
                    "runs {p}, which is not executable (mode {:o})",
                    st.mode
                )),
                Err(e) if e.not_found => self
                    .problems
                    .push(format!("runs {p}, which is not installed")),
                Err(e) => self.problems.push(format!("runs {p}: {}", e.message)),
            }
        }
    }

    /// The profile file a unit or rule runs daqtune with: without it every run fails.
    fn profiles(&mut self, ctx: &Context, text: &str) {
        for f in profile_files(text) {
            match ctx.read_string(&f) {
                Ok(t) => match profile_copy_intact(&f, t.as_bytes()) {
                    Some(false) => {
                        self.problems.push(format!(
                            "its profile {f} is not what apply copied there (edited or replaced since)"
                        ));
                        self.fixes.push("sudo daqtune apply --profile FILE   (copies the profile again and points the units at it)".into());
                    }
                    _ => self.good.push(format!("profile {f} present")),
                },
                Err(e) if e.not_found => {
                    self.problems
                        .push(format!("its profile {f} is missing: every run of it fails"));
                    self.fixes.push("sudo daqtune apply --profile FILE   (keeps a copy of the profile under /etc/daqtune/profiles and points the units at it)".into());
                }
                Err(e) => self
                    .problems
                    .push(format!("its profile {f}: {}", e.message)),
            }
        }
    }

    /// systemd's view of the unit's last run; `Err` says why it cannot be told.
    fn last_run(&mut self, ctx: &Context, name: &str) -> Result<(), String> {
        let st = ctx.unit_state(name).map_err(|e| e.to_string())?;
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
            self.problems
                .push(format!("systemd reports it {}", st.load_state));
            self.fixes.push(format!(
                "sudo systemctl daemon-reload; `systemctl status {name}` says what systemd refuses"
            ));
        } else if st.failed() {
            self.problems.push(format!(
                "its last run failed: {desc}{}",
                st.exec_main_status
                    .filter(|s| *s != 0)
                    .map(|s| format!(", exit status {s}"))
                    .unwrap_or_default()
            ));
            self.fixes.push(format!(
                "journalctl -b -u {name} says why; sudo systemctl restart {name} after fixing it"
            ));
        } else if st.active_state == "inactive" && st.result.as_deref() == Some("success") {
            self.good
                .push("not run since it was written (it runs at the next boot)".into());
        } else {
            self.good.push(format!("systemd: {desc}"));
        }
        Ok(())
    }

    /// A problem fails; a run that cannot be told is a skip (everything on disk is right, but
    /// never a pass); else a pass.
    fn verdict(self, a: &Artifact, unknown: Option<String>) -> Verdict {
        let subject = a.path.clone();
        if !self.problems.is_empty() {
            let mut v = Verdict::fail(
                ID,
                subject,
                format!("{} ({})", self.problems.join("; "), written_by(a)),
            )
            .observed(self.good.join(", "));
            if !self.fixes.is_empty() {
                v = v.fix(self.fixes.join("; "));
            }
            return v;
        }
        match unknown {
            Some(why) => Verdict::skip(
                ID,
                subject,
                format!("{}; its last run is unknown: {why}", self.good.join(", ")),
            ),
            None => Verdict::pass(
                ID,
                subject,
                format!("{} ({})", self.good.join(", "), written_by(a)),
            ),
        }
    }
}
