//! What `plan`, `apply`, `revert`, `generate` and `trial-verify` say, in the order the engine
//! reports it ([`daqtune_engine::apply::Event`]): progress and results on standard output,
//! refusals and the detected profile on standard error (a script reading the plan or the
//! artifact from standard output gets only that).

use daqtune_engine::apply::{Event, Events, Question};
use daqtune_engine::exec::apply::ApplyReport;
use daqtune_engine::exec::revert::{RevertReport, Scope};
use daqtune_engine::exec::trial::{Decision, VerifyReport};
use daqtune_engine::hostio::setters;
use daqtune_engine::model::plan::{Action, Plan};
use std::io::Write;

/// The events of one command as text on two streams. Write errors are not the engine's to
/// handle: the binary's standard output remembers a failed write and exits non-zero with it
/// (coreutils' rule), so here they are dropped.
pub struct Text<'w> {
    out: &'w mut dyn Write,
    err: &'w mut dyn Write,
}

impl<'w> Text<'w> {
    pub fn new(out: &'w mut dyn Write, err: &'w mut dyn Write) -> Self {
        Text { out, err }
    }
}

impl Events for Text<'_> {
    fn event(&mut self, e: Event<'_>) {
        let (out, err) = (&mut *self.out, &mut *self.err);
        let _ = match e {
            Event::ProfileChosen { name, origin } => writeln!(out, "profile {name} ({origin})"),
            Event::ProfileDetected { name, why } => {
                writeln!(err, "detected profile {name} ({why})")
            }
            Event::KeptConfig { run, config } => writeln!(
                out,
                "keeping --config {config} of apply run {run} (--fresh plans the profile alone)"
            ),
            Event::ConfigGone { run, config } => writeln!(
                out,
                "apply run {run} used --config {config}, which is gone; this runtime-only run \
                 goes on without it"
            ),
            Event::KeptAllowAcs { run } => writeln!(
                out,
                "keeping --allow-acs of apply run {run} (--fresh plans the profile alone)"
            ),
            Event::Derived { file, note } => writeln!(out, "from {file}: {note}"),
            Event::Plan(plan) => write!(out, "{}", crate::plan::text(plan)),
            Event::DryRun => writeln!(out, "dry run: nothing changed"),
            Event::NothingToChange { profile } => {
                writeln!(out, "nothing to change: the host matches profile {profile}")
            }
            Event::LockdownRefused { check, lockdown } => writeln!(
                err,
                "{}; or apply without {check}. Nothing was changed.",
                setters::lockdown_refusal(check, lockdown),
            ),
            Event::NotApplied => writeln!(out, "not applied"),
            Event::Applied { plan, report } => {
                applied(plan, report, out);
                Ok(())
            }
            Event::TrialRecorded(line) => writeln!(out, "trial: {line}"),
            Event::TrialNotRecorded(e) => {
                writeln!(out, "  FAIL  kernel.cmdline trial not recorded: {e}")
            }
            Event::Swept(steps) => {
                for (what, r) in steps {
                    let _ = match r {
                        Ok(()) => writeln!(out, "  ok    {what}"),
                        Err(e) => writeln!(out, "  FAIL  {what}: {e}"),
                    };
                }
                Ok(())
            }
            Event::NothingToRevert { journal } => writeln!(
                out,
                "nothing to revert (no journal in {})",
                journal.display()
            ),
            Event::RevertRefused(e) => {
                writeln!(err, "daqtune revert: refused: {e}. Nothing was changed.")
            }
            Event::Reverted(rep) => {
                reverted(rep, out);
                Ok(())
            }
            Event::RevertFailed(n) => writeln!(err, "daqtune revert: {n} step(s) failed"),
            Event::TrialVerified { report, live } => {
                trial_verified(report, live, out);
                Ok(())
            }
            Event::Generated(text) => write!(out, "{text}"),
        };
    }
}

/// The words of a question asked before a change.
pub fn question(q: Question<'_>) -> String {
    match q {
        Question::UseProfile { name } => format!("Use profile {name}?"),
        Question::Apply { changes } => format!("Apply {changes} change(s)?"),
        Question::Revert { scope, runs } => match scope {
            Scope::All => format!("Revert {runs} apply run(s)?"),
            Scope::Run(id) => format!("Revert apply run {id}?"),
            Scope::Checks(ids) => format!(
                "Revert the changes of {} in every apply run in effect?",
                ids.join(", ")
            ),
        },
    }
}

fn applied(plan: &Plan, rep: &ApplyReport, out: &mut dyn Write) {
    let _ = writeln!(out, "applied:");
    let mut i = 0;
    while i < rep.outcomes.len() {
        let o = &rep.outcomes[i];
        // Fold long runs of successes of one check (a 256-CPU host prints three lines).
        let mut j = i;
        let is_attr = |k: usize| {
            matches!(
                plan.changes.get(k).map(|c| &c.action),
                Some(Action::Attr { .. })
            )
        };
        while j < rep.outcomes.len()
            && rep.outcomes[j].check == o.check
            && rep.outcomes[j].result.is_ok()
            && !rep.outcomes[j].unconfirmed
            && is_attr(j)
        {
            j += 1;
        }
        if j - i > 4 {
            for k in [i, i + 1] {
                if let Ok(m) = &rep.outcomes[k].result {
                    let _ = writeln!(out, "  ok    {:<13} {m}", o.check);
                }
            }
            let _ = writeln!(out, "  ok    {:<13} ... {} more", o.check, j - i - 3);
            if let Ok(m) = &rep.outcomes[j - 1].result {
                let _ = writeln!(out, "  ok    {:<13} {m}", o.check);
            }
            i = j;
            continue;
        }
        match &o.result {
            Ok(m) if o.unconfirmed => {
                let _ = writeln!(out, "  WARN  {:<13} {m}", o.check);
            }
            Ok(m) => {
                let _ = writeln!(out, "  ok    {:<13} {m}", o.check);
            }
            Err(e) => {
                let _ = writeln!(out, "  FAIL  {:<13} {e}", o.check);
            }
        }
        i += 1;
    }
    for (cmd, r) in &rep.commands {
        let _ = match r {
            Ok(()) => writeln!(out, "  ran   {cmd}"),
            Err(e) => writeln!(out, "  FAIL  {cmd}: {e}"),
        };
    }
    if plan.target == setters::Target::Root
        && rep.pending_reboot.iter().any(|c| c == "kernel.cmdline")
    {
        let _ = writeln!(
            out,
            "  note  update-grub was not run (--root): run it on that host"
        );
    }
    if !rep.pending_reboot.is_empty() {
        let _ = writeln!(out, "reboot needed for: {}", rep.pending_reboot.join(", "));
    }
    if let Some(j) = &rep.journal {
        let _ = writeln!(out, "journal: {} (undo with `daqtune revert`)", j.display());
    }
}

fn reverted(rep: &RevertReport, out: &mut dyn Write) {
    for (what, r) in &rep.steps {
        let _ = match r {
            Ok(()) => writeln!(out, "  ok    {what}"),
            Err(e) => writeln!(out, "  FAIL  {what}: {e}"),
        };
    }
    for (cmd, r) in &rep.commands {
        let _ = match r {
            Ok(()) => writeln!(out, "  ran   {cmd}"),
            Err(e) => writeln!(out, "  FAIL  {cmd}: {e}"),
        };
    }
    if !rep.runs.is_empty() {
        let _ = writeln!(
            out,
            "reverted {} run(s): {}",
            rep.runs.len(),
            rep.runs.join(", ")
        );
    }
    for (id, checks) in &rep.partial {
        let _ = writeln!(
            out,
            "run {id}: undid the changes of {}; the rest of the run stays in effect",
            checks.join(", ")
        );
    }
    for (id, failed, steps) in &rep.incomplete {
        let _ = writeln!(
            out,
            "run {id} NOT reverted: {failed} of {steps} step(s) failed; it stays in effect, and `daqtune revert` tries it again"
        );
    }
}

fn trial_verified(rep: &VerifyReport, live: bool, out: &mut dyn Write) {
    for d in &rep.done {
        let _ = writeln!(out, "  ok    {d}");
    }
    for (cmd, r) in &rep.commands {
        let _ = match r {
            Ok(()) => writeln!(out, "  ran   {cmd}"),
            // Under a root the commands are listed for that host, not run here.
            Err(e) if !live => writeln!(out, "  note  {cmd}: {e}"),
            Err(e) => writeln!(out, "  FAIL  {cmd}: {e}"),
        };
    }
    let _ = match &rep.decision {
        Decision::Nothing(why) => writeln!(out, "trial: nothing to decide: {why}"),
        Decision::Committed => writeln!(out, "trial: committed"),
        Decision::Failed(why) => writeln!(out, "trial: FAILED: {why}"),
    };
}
