//! Each subcommand: the engine call, then what goes to the terminal and to files.

use crate::cli::{
    CheckArgs, DiffArgs, ExplainArgs, GlobalArgs, PlanArgs, PlanFormat, ProfilesAction,
    ProfilesArgs, SnapshotArgs, TopoArgs, TopoFormat,
};
use daqtune_engine::apply::Prompt;
use daqtune_engine::commands::load_profile;
use daqtune_engine::commands::{choose_profile, choose_profile_with, evaluate_facts, resolve_ids};
use daqtune_engine::fleet::{self, output, plan_json, run::RunInfo};
use daqtune_engine::hostroot::{load_side, open_host};
use daqtune_engine::{gate, profile, report, snapshot, topo, tunables, UsageError};
use std::io::{BufRead, IsTerminal, Write};

/// Asks on the terminal. Without one the answer cannot be had: a usage error (exit 2), so a
/// pipe never applies silently.
pub struct TerminalPrompt;

impl Prompt for TerminalPrompt {
    fn confirm(&mut self, question: &str, err: &mut dyn Write) -> Result<bool, UsageError> {
        if !std::io::stdin().is_terminal() {
            return daqtune_engine::apply::NoTerminal.confirm(question, err);
        }
        let _ = write!(err, "{question} [y/N] ");
        let _ = err.flush();
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| UsageError::Other(format!("reading the answer: {e}")))?;
        Ok(matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
    }
}

/// Every report file is written atomically, mode 0644 (a collector may be reading it).
fn write_file(path: &std::path::Path, text: &str) -> Result<(), UsageError> {
    output::write(path, text).map_err(|e| UsageError::Other(e.to_string()))
}

pub fn check(g: &GlobalArgs, a: &CheckArgs) -> Result<u8, UsageError> {
    let g = g.engine();
    let host = open_host(&g)?;
    let only = resolve_ids(&a.ids)?;
    // One set of facts for detection and every check.
    let facts = g.facts(&host);
    let profile = choose_profile_with(&facts, &g)?;
    let app = match &a.config {
        Some(p) => Some(
            daqtune_engine::appconfig::AppConfig::load(p)
                .map_err(|e| UsageError::Other(e.to_string()))?,
        ),
        None => None,
    };
    let mut rep = evaluate_facts(&facts, &profile, only, a.gate, app.as_ref());
    drop(facts);
    drop(host);
    // The gate's result is part of the outputs (JSON `run`, NFD and Prometheus), so the exit
    // code is decided first.
    let code = gate::exit_code(&rep.checks, a.fail_on.into(), a.gate, &profile.profile);
    rep.run = Some(RunInfo::new(
        &rep.checks,
        &rep.gate_failures,
        code == 0,
        a.fail_on.into(),
        a.gate,
        fleet::run::now_unix(),
    ));
    let opts = fleet::RenderOptions {
        color: a.output.is_none() && report::want_color(std::io::stdout().is_terminal()),
        verbose: a.verbose,
        nfd_expiry: a.nfd_expiry,
    };
    let text = fleet::render(&rep, a.format.into(), &opts);
    match &a.output {
        Some(p) => write_file(p, &text)?,
        None => print!("{text}"),
    }
    if let Some(p) = &a.junit {
        write_file(p, &report::junit(&rep))?;
    }
    if let Some(p) = &a.json {
        write_file(p, &report::json(&rep))?;
    }
    Ok(code)
}

/// `daqtune plan`: the text plan, or `daqtune.plan/v1` JSON whose `messages` are the lines
/// said before the plan; to stdout or, atomically, to `-o FILE`.
pub fn plan(g: &GlobalArgs, a: &PlanArgs) -> Result<u8, UsageError> {
    let g = g.engine();
    let sel = a.sel.engine();
    if a.format == PlanFormat::Text && a.output.is_none() {
        return daqtune_engine::apply::run_plan(&g, &sel, &mut std::io::stdout());
    }
    let host = open_host(&g)?;
    let mut head: Vec<u8> = Vec::new();
    let plan = daqtune_engine::apply::plan_for(&host, &g, &sel, &mut head)?;
    drop(host);
    let head = String::from_utf8_lossy(&head);
    let text = match a.format {
        PlanFormat::Text => format!("{head}{plan}"),
        PlanFormat::Json => {
            let lines: Vec<String> = head.lines().map(String::from).collect();
            plan_json::render(&plan, &lines)
        }
    };
    match &a.output {
        Some(p) => write_file(p, &text)?,
        None => print!("{text}"),
    }
    Ok(0)
}

pub fn explain(a: &ExplainArgs) -> Result<u8, UsageError> {
    if a.list {
        if a.markdown {
            print!("{}", report::catalogue_markdown());
        } else {
            for c in tunables::REGISTRY {
                println!("{:<16} {:<9} {}", c.id, c.area.title(), c.title);
            }
        }
        return Ok(0);
    }
    let id = a.id.as_deref().unwrap_or_default();
    let c = tunables::find(id).ok_or_else(|| UsageError::UnknownCheck(id.to_string()))?;
    print!("{}", c.doc);
    if !c.doc.ends_with('\n') {
        println!();
    }
    Ok(0)
}

pub fn profiles(a: &ProfilesArgs) -> Result<u8, UsageError> {
    match &a.action {
        None | Some(ProfilesAction::List) => {
            for name in profile::builtin_names() {
                let lp = profile::load(name)?;
                println!("{:<14} {}", name, lp.profile.description);
            }
        }
        Some(ProfilesAction::Show { name }) => {
            let lp = load_profile(name)?;
            let y = serde_yaml_ng::to_string(&lp.profile)
                .map_err(|e| UsageError::Other(e.to_string()))?;
            print!("{y}");
        }
    }
    Ok(0)
}

pub fn snapshot(g: &GlobalArgs, a: &SnapshotArgs) -> Result<u8, UsageError> {
    let g = g.engine();
    let host = open_host(&g)?;
    let profile = choose_profile(&host, &g)?;
    let out = &a.output;
    let is_archive = out.to_string_lossy().ends_with(".tar.zst");
    let fail = |e: snapshot::SnapshotError| UsageError::Other(format!("snapshot: {e}"));
    let meta = if is_archive {
        let tmp = snapshot::TempRoot::new("daqtune-snap-")
            .map_err(|e| UsageError::Other(e.to_string()))?;
        let m = snapshot::write_dir(&host, &profile, tmp.path(), a.redact).map_err(fail)?;
        snapshot::pack(tmp.path(), out).map_err(fail)?;
        m
    } else {
        if out.exists()
            && std::fs::read_dir(out)
                .map(|mut d| d.next().is_some())
                .unwrap_or(true)
        {
            return Err(UsageError::Other(format!(
                "{} exists and is not empty",
                out.display()
            )));
        }
        snapshot::write_dir(&host, &profile, out, a.redact).map_err(fail)?
    };
    eprintln!(
        "daqtune: snapshot {}: {} files, {} links{}; replay with: daqtune check --root {}",
        out.display(),
        meta.files,
        meta.links,
        if meta.redacted { ", redacted" } else { "" },
        out.display()
    );
    Ok(0)
}

pub fn diff(g: &GlobalArgs, a: &DiffArgs) -> Result<u8, UsageError> {
    let g = g.engine();
    let left = load_side(&g, &a.before)?;
    let right = load_side(&g, &a.after)?;
    let changes = daqtune_engine::diff::diff(&left, &right);
    for n in daqtune_engine::diff::notes(&left, &right) {
        eprintln!("daqtune diff: {n}");
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&changes).unwrap_or_default()
        );
    } else {
        print!("{}", daqtune_engine::diff::render(&changes));
    }
    Ok(u8::from(!changes.is_empty()))
}

pub fn topo(g: &GlobalArgs, a: &TopoArgs) -> Result<u8, UsageError> {
    let host = open_host(&g.engine())?;
    let (tree, nics) = match topo::gather(&host, a.all) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("daqtune topo: {e}");
            return Ok(1);
        }
    };
    let t = topo::build(&tree, &nics);
    match a.format {
        TopoFormat::Text => print!("{}", topo::render_text(&t)),
        TopoFormat::Json => match serde_json::to_string_pretty(&t) {
            Ok(j) => println!("{j}"),
            Err(e) => return Err(UsageError::Other(format!("cannot render JSON: {e}"))),
        },
    }
    if let Some(path) = &a.svg {
        let svg = topo::render_svg(&tree, &nics, &t, a.all);
        if path.as_os_str() == "-" {
            print!("{svg}");
        } else if let Err(e) = std::fs::write(path, svg) {
            return Err(UsageError::Other(format!(
                "cannot write {}: {e}",
                path.display()
            )));
        } else {
            eprintln!("daqtune topo: wrote {}", path.display());
        }
    }
    Ok(0)
}
