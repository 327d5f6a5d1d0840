//! A planning tunable with a persistent file, added the documented way (docs/architecture.md,
//! "How to add a tunable"): one module (here, `toy` below), one registry line (the registry
//! this test builds: the real one plus the toy) and one doc page (`doc:`). check, plan, apply,
//! generate, `daqtune.artifacts` and revert pick it up with no other change. A tunable with
//! a kind of change of its own (`toy_dial` below) defines it in its module too (issue 44: an
//! action kind owned by its tunable): the executor, the plan's text and the plan JSON ask the
//! kind, and no shared file names it.

use daqtune_engine::context::Context;
use daqtune_engine::exec::apply::execute;
use daqtune_engine::exec::revert::revert_all;
use daqtune_engine::facts::Facts;
use daqtune_engine::hostio::journal::Journal;
use daqtune_engine::hostio::setters::FsWriter;
use daqtune_engine::plan::{Action, PlanOptions};
use daqtune_engine::tunable::{GenerateCx, Tunable};
use daqtune_engine::tunables::{self, RunOptions, REGISTRY};
use daqtune_engine::verdict::Status;
use daqtune_probe::Host;

/// The toy's module, as a file under engine/src/tunables/ would hold it.
mod toy {
    use daqtune_engine::context::Context;
    use daqtune_engine::plan::{NoteLevel, Plan, PlanCx, PlanError};
    use daqtune_engine::tunable::{Artifact, ArtifactError, GenerateCx, Planner, Tunable};
    use daqtune_engine::verdict::{Area, Verdict};

    pub const ID: &str = "toy.knob";
    pub const PATH: &str = "/etc/toy/knob.conf";

    pub const TOY: Tunable = Tunable {
        id: ID,
        area: Area::Kernel,
        title: "The toy knob is on",
        aliases: &["knob"],
        doc: "# toy.knob\n\nThe toy knob is on (a test's tunable).\n",
        needs_root: false,
        profile_keys: &[],
        check: run,
        planner: Some(Planner {
            order: 200,
            with: &[],
            plan,
            artifacts: &[Artifact {
                kind: "toy-conf",
                help: "the toy knob's configuration file",
                render: generate,
            }],
            owned_files: |_| vec![PATH.to_string()],
            port_reset: daqtune_engine::tunable::PortReset::None,
        }),
    };

    /// The one judgement: what is wrong with the knob, if anything.
    fn wrong(text: Option<&str>) -> Option<String> {
        match text {
            Some(t) if t.lines().any(|l| l == "knob=on") => None,
            Some(_) => Some(format!("{PATH} does not turn the knob on")),
            None => Some(format!("{PATH} is missing")),
        }
    }

    /// The file the plan writes and `generate toy-conf` prints.
    fn file(profile_ref: &str) -> String {
        format!(
            "# {} (profile {profile_ref}); `daqtune revert` removes it.\nknob=on\n",
            daqtune_units::OWNER_MARK
        )
    }

    fn run(ctx: &Context) -> Vec<Verdict> {
        let text = ctx.read_string(PATH).ok();
        match wrong(text.as_deref()) {
            None => vec![Verdict::pass(ID, "host", "the knob is on")],
            Some(why) => vec![Verdict::fail(ID, "host", why)],
        }
    }

    fn plan(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
        let text = cx.facts.read_string(PATH).ok();
        if wrong(text.as_deref()).is_none() {
            return Ok(());
        }
        if !cx.opts.persist {
            plan.note(ID, NoteLevel::Skip, "the knob is persistent only");
            return Ok(());
        }
        cx.file_change(
            plan,
            ID,
            "knob",
            PATH,
            file(&cx.profile_ref()),
            0o644,
            false,
        );
        Ok(())
    }

    fn generate(g: &GenerateCx) -> Result<String, ArtifactError> {
        Ok(file(g.profile_ref))
    }
}

/// A tunable whose change is a kind of its own: a runtime "dial" (an attribute file under
/// the root stands in for a kernel knob only this tunable turns).
mod toy_dial {
    use daqtune_engine::context::Context;
    use daqtune_engine::hostio::journal::Entry;
    use daqtune_engine::hostio::setters::{Done, Target};
    use daqtune_engine::plan::{
        Action, ActionKind, Change, Plan, PlanCx, PlanError, SetCx, SetError,
    };
    use daqtune_engine::tunable::{Planner, Tunable};
    use daqtune_engine::verdict::{Area, Verdict};

    pub const ID: &str = "toy.dial";
    pub const PATH: &str = "/sys/toy/dial";

    pub const DIAL: Tunable = Tunable {
        id: ID,
        area: Area::Kernel,
        title: "The toy dial is at 11",
        aliases: &[],
        doc: "# toy.dial\n\nThe toy dial is at 11 (a test's tunable).\n",
        needs_root: false,
        profile_keys: &[],
        check: run,
        planner: Some(Planner {
            order: 201,
            with: &[],
            plan,
            artifacts: &[],
            owned_files: |_| vec![],
            port_reset: daqtune_engine::tunable::PortReset::None,
        }),
    };

    /// The toy's own kind of change: turn the dial, journaled as the attribute it is, so the
    /// journal's existing `attr` entry reverts it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct TurnDial {
        pub from: String,
        pub to: String,
    }

    impl ActionKind for TurnDial {
        fn execute(&self, cx: SetCx<'_>) -> Result<Done, SetError> {
            let real = cx
                .host
                .resolve(PATH)
                .map_err(|e| SetError::Host(e.to_string()))?;
            let entry = Entry::Attr {
                check: ID.into(),
                path: PATH.into(),
                original: self.from.clone(),
                new: format!("{}\n", self.to),
                shared_count: false,
            };
            cx.journal
                .record(cx.writer, entry)
                .map_err(SetError::Journal)?;
            cx.writer
                .write_attr(&real, &self.to, Target::Root)
                .map_err(|e| SetError::Host(format!("{PATH}: {e}")))?;
            let back = cx.host.read_string(PATH).unwrap_or_default();
            if back.trim() != self.to {
                return Err(SetError::Host(format!("{PATH} reads back {back:?}")));
            }
            Ok(Done::from(format!("dial at {}", self.to)))
        }
        fn plan_json(&self) -> serde_json::Value {
            serde_json::json!({ "kind": "toy-dial", "from": self.from.trim(), "to": self.to })
        }
        fn describe(&self) -> String {
            format!("turn the toy dial: {} -> {}", self.from.trim(), self.to)
        }
    }

    fn run(ctx: &Context) -> Vec<Verdict> {
        match ctx.read_string(PATH) {
            Ok(t) if t.trim() == "11" => vec![Verdict::pass(ID, "host", "the dial is at 11")],
            Ok(t) => vec![Verdict::fail(
                ID,
                "host",
                format!("the dial is at {}", t.trim()),
            )],
            Err(e) => vec![Verdict::skip(ID, "host", e.to_string())],
        }
    }

    fn plan(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
        let Ok(from) = cx.facts.read_string(PATH) else {
            return Ok(());
        };
        if from.trim() != "11" && cx.opts.runtime {
            plan.changes.push(Change {
                check: ID.into(),
                subject: "host".into(),
                action: Action::owned(TurnDial {
                    from,
                    to: "11".into(),
                }),
                reboot: false,
                note: None,
            });
        }
        Ok(())
    }
}

#[test]
fn a_toy_action_kind_is_planned_shown_applied_and_reverted() {
    let mut reg: Vec<&'static Tunable> = REGISTRY.to_vec();
    reg.push(&toy_dial::DIAL);
    let root = tempfile::tempdir().expect("root");
    let state = tempfile::tempdir().expect("journal");
    std::fs::create_dir_all(root.path().join("sys/toy")).expect("mkdir");
    std::fs::write(root.path().join("sys/toy/dial"), "3\n").expect("dial");
    let host = Host::at(root.path()).expect("host");
    let lp = daqtune_engine::profile::load("generic-dgpu").expect("profile");
    assert_eq!(statuses(&reg, &host, toy_dial::ID)[0].0, Status::Fail);

    let opts = PlanOptions {
        only: vec![toy_dial::ID.into()],
        profile_ref: "generic-dgpu".into(),
        ..Default::default()
    };
    let facts = Facts::new(&host);
    let plan = tunables::build_plan_in(&reg, &facts, &lp, &opts, None).expect("plan");
    assert_eq!(
        plan.changes.len(),
        1,
        "{}",
        daqtune_render::plan::text(&plan)
    );
    let dial = plan.changes[0]
        .action
        .owned_as::<toy_dial::TurnDial>()
        .expect("the toy's own kind");
    assert_eq!((dial.from.trim(), dial.to.as_str()), ("3", "11"));
    // The plan's text and JSON are the kind's own words.
    assert!(
        daqtune_render::plan::text(&plan).contains("turn the toy dial: 3 -> 11"),
        "{}",
        daqtune_render::plan::text(&plan)
    );
    let json: serde_json::Value =
        serde_json::from_str(&daqtune_engine::fleet::plan_json::render(&plan, &[])).expect("json");
    assert_eq!(
        json["changes"][0]["action"],
        serde_json::json!({ "kind": "toy-dial", "from": "3", "to": "11" })
    );
    assert_eq!(json["changes"][0]["persistent"], serde_json::json!(false));

    // apply: the executor runs the kind's own setter, which journals first.
    let mut w = FsWriter::new();
    let mut j = Journal::create(state.path(), "generic-dgpu", &mut w).expect("journal");
    let rep = execute(&host, &plan, &mut j, &mut w, None, None);
    assert_eq!(rep.failed(), 0, "{:?}", rep.outcomes);
    drop(j);
    assert_eq!(
        std::fs::read_to_string(root.path().join("sys/toy/dial")).expect("dial"),
        "11\n"
    );
    assert_eq!(statuses(&reg, &host, toy_dial::ID)[0].0, Status::Pass);

    // revert: the journal's attr entry puts the dial back, byte for byte.
    let rr = revert_all(&host, state.path(), &mut w);
    assert!(rr.steps.iter().all(|(_, r)| r.is_ok()), "{:?}", rr.steps);
    assert_eq!(
        std::fs::read_to_string(root.path().join("sys/toy/dial")).expect("dial"),
        "3\n"
    );
}

fn registry() -> Vec<&'static Tunable> {
    let mut r: Vec<&'static Tunable> = REGISTRY.to_vec();
    r.push(&toy::TOY);
    r
}

fn statuses(reg: &[&Tunable], host: &Host, id: &str) -> Vec<(Status, String)> {
    let lp = daqtune_engine::profile::load("generic-dgpu").expect("profile");
    let facts = Facts::new(host);
    let ctx = Context::with_facts(&facts, &lp);
    let opts = RunOptions {
        only: vec![id.to_string()],
    };
    tunables::run_checks_in(reg, &ctx, &opts)
        .into_iter()
        .map(|v| (v.status, format!("{} {}", v.subject, v.message)))
        .collect()
}

#[test]
fn a_toy_tunable_is_picked_up_by_every_command() {
    let reg = registry();
    let root = tempfile::tempdir().expect("root");
    let state = tempfile::tempdir().expect("journal");
    let host = Host::at(root.path()).expect("host");
    let lp = daqtune_engine::profile::load("generic-dgpu").expect("profile");

    // check: the knob is off.
    let before = statuses(&reg, &host, toy::ID);
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(before[0].0, Status::Fail, "{before:?}");
    // The registry's alias lookup knows it.
    assert_eq!(tunables::find_in(&reg, "knob").map(|t| t.id), Some(toy::ID));

    // plan: one new file, and `--only` takes the toy's id.
    let opts = PlanOptions {
        only: vec![toy::ID.into()],
        profile_ref: "generic-dgpu".into(),
        ..Default::default()
    };
    let facts = Facts::new(&host);
    let plan = tunables::build_plan_in(&reg, &facts, &lp, &opts, None).expect("plan");
    assert_eq!(
        plan.changes.len(),
        1,
        "{}",
        daqtune_render::plan::text(&plan)
    );
    let written = match &plan.changes[0].action {
        Action::File { path, to, .. } => {
            assert_eq!(path, toy::PATH);
            to.clone()
        }
        a => panic!("{a:?}"),
    };
    // Without the toy, its id is refused.
    assert!(tunables::build_plan_in(REGISTRY, &facts, &lp, &opts, None).is_err());

    // generate: the registry lists the toy's artifact, rendered as the plan writes it.
    let (owner, art) = tunables::artifacts_in(&reg)
        .into_iter()
        .find(|(_, a)| a.kind == "toy-conf")
        .expect("toy-conf among the artifacts");
    assert_eq!(owner.id, toy::ID);
    let g = GenerateCx {
        facts: &facts,
        lp: &lp,
        exe: None,
        profile_ref: "generic-dgpu",
        interfaces: &[],
        devices: &[],
    };
    assert_eq!((art.render)(&g).expect("render").into_bytes(), written);
    assert!(tunables::owned_files_in(&reg, &lp).contains(&toy::PATH.to_string()));
    assert!(!tunables::owned_files(&lp).contains(&toy::PATH.to_string()));

    // apply: the executor writes it (it knows no tunable), journaled.
    let mut w = FsWriter::new();
    let mut j = Journal::create(state.path(), "generic-dgpu", &mut w).expect("journal");
    let rep = execute(&host, &plan, &mut j, &mut w, None, None);
    assert_eq!(rep.failed(), 0, "{:?}", rep.outcomes);
    drop(j);
    let on_disk = std::fs::read(root.path().join("etc/toy/knob.conf")).expect("written");
    assert_eq!(on_disk, written);

    // check again: the same judgement passes, and `daqtune.artifacts` finds the toy's file by
    // the name the toy owns.
    let after = statuses(&reg, &host, toy::ID);
    assert_eq!(after[0].0, Status::Pass, "{after:?}");
    let arts = statuses(&reg, &host, "daqtune.artifacts");
    assert!(arts.iter().any(|(_, m)| m.contains(toy::PATH)), "{arts:?}");
    // plan again: nothing to do.
    let facts = Facts::new(&host);
    let again = tunables::build_plan_in(&reg, &facts, &lp, &opts, None).expect("plan");
    assert!(
        again.changes.is_empty(),
        "{}",
        daqtune_render::plan::text(&again)
    );

    // revert: the file is gone and the check fails again.
    let rr = revert_all(&host, state.path(), &mut w);
    assert!(rr.steps.iter().all(|(_, r)| r.is_ok()), "{:?}", rr.steps);
    assert!(!root.path().join("etc/toy/knob.conf").exists());
    assert_eq!(statuses(&reg, &host, toy::ID)[0].0, Status::Fail);
}
