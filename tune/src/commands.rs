//! Each subcommand: the engine call, then what goes to the terminal and to files.

use crate::cli::{
    CheckArgs, DiffArgs, ExplainArgs, GlobalArgs, GpuArgs, ImportArgs, NicArgs, PlanArgs,
    PlanFormat, ProfilesAction, ProfilesArgs, QualifyArgs, SnapshotArgs, StatusArgs, TopoArgs,
    TopoFormat,
};
use crate::out;
use daqtune_engine::apply::{Prompt, Question};
use daqtune_engine::commands::load_profile;
use daqtune_engine::commands::{choose_profile, choose_profile_with, evaluate_facts, resolve_ids};
use daqtune_engine::fleet::{self, output, plan_json};
use daqtune_engine::hostroot::{load_side, open_host};
use daqtune_engine::run_info::RunInfo;
use daqtune_engine::{gate, profile, report, snapshot, topo, tunables, UsageError};
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

/// Asks on the terminal. Without one the answer cannot be had: a usage error (exit 2), so a
/// pipe never applies silently.
pub struct TerminalPrompt;

impl Prompt for TerminalPrompt {
    fn confirm(&mut self, question: Question<'_>) -> Result<bool, UsageError> {
        if !std::io::stdin().is_terminal() {
            return daqtune_engine::apply::NoTerminal.confirm(question);
        }
        let mut err = out::TerminalSafe::new(std::io::stderr());
        let _ = write!(err, "{} [y/N] ", daqtune_render::apply::question(question));
        let _ = err.flush();
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| UsageError::Other(format!("reading the answer: {e}")))?;
        Ok(matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
    }
}

/// Every report file is written by the one output rule (`fleet::output::write`: atomically,
/// mode 0644; a symlink is written through, never replaced).
fn write_file(path: &Path, text: &str) -> Result<(), UsageError> {
    output::write(path, text).map_err(|e| UsageError::Other(e.to_string()))
}

/// Writes each of a command's outputs, `None` standing for stdout. A failed one does not keep
/// the later ones from being written; the first failure is the command's error (exit 2), the
/// others are said on stderr.
fn write_all(outputs: &[(Option<&Path>, &str)]) -> Result<(), UsageError> {
    let mut first: Option<UsageError> = None;
    for (path, text) in outputs {
        let r = match path {
            Some(p) => write_file(p, text),
            None => {
                out::print(text);
                Ok(())
            }
        };
        if let Err(e) = r {
            if first.is_some() {
                out::eprint(&format!("daqtune: {e}\n"));
            } else {
                first = Some(e);
            }
        }
    }
    first.map_or(Ok(()), Err)
}

pub fn check(g: &GlobalArgs, a: &CheckArgs) -> Result<u8, UsageError> {
    let g = g.engine();
    let host = open_host(&g)?;
    let only = resolve_ids(&a.ids)?;
    // A whole check judges the GPUs: their facts are read beside the checks that need none.
    let gpu_prefetch = if only.is_empty() {
        daqtune_engine::facts::prefetch_gpus(&host, g.gpu_cache_mode())
    } else {
        None
    };
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
    // A capture or archive was read from a temporary root that is gone after this run.
    rep.host.root = host.shown_root();
    // A root imported from captures judges only what they hold: say which checks that is.
    let mut ids: Vec<&str> = rep.checks.iter().map(|v| v.id.as_str()).collect();
    ids.dedup();
    if let Some(line) = daqtune_engine::capture::coverage_line(&facts, &ids) {
        out::eprint(&format!("daqtune: {line}\n"));
    }
    // What a user who is not root could not judge, after the report (stderr: the report on
    // stdout stays one document); the exit code stays the verdicts' (docs/cli.md).
    let not_root = report::not_root_line(&rep.checks, daqtune_probe::sys::is_root());
    if let Some(read) = gpu_prefetch {
        // Normally long done (a GPU check waited for it); never leave it inside the driver.
        let _ = read.join();
    }
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
        daqtune_engine::run_info::now_unix(),
    ));
    let opts = fleet::RenderOptions {
        color: a.output.is_none()
            && daqtune_render::report::want_color(std::io::stdout().is_terminal()),
        verbose: a.verbose,
        nfd_expiry: a.nfd_expiry,
        // Fitted to the terminal on stdout only: a file gets every line whole.
        width: if a.output.is_none() {
            out::width()
        } else {
            None
        },
    };
    let text = daqtune_render::report::render(&rep, a.format.into(), &opts);
    let mut outputs = vec![(a.output.as_deref(), text)];
    if let Some(p) = &a.junit {
        outputs.push((Some(p), report::junit(&rep)));
    }
    if let Some(p) = &a.json {
        outputs.push((Some(p), report::json(&rep)));
    }
    let outputs: Vec<(Option<&Path>, &str)> =
        outputs.iter().map(|(p, t)| (*p, t.as_str())).collect();
    write_all(&outputs)?;
    if let Some(line) = not_root {
        out::eprint(&format!("daqtune: {line}\n"));
    }
    Ok(code)
}

/// `daqtune plan`: the text plan, or `daqtune.plan/v1` JSON whose `messages` are the lines
/// said before the plan; to stdout or, atomically, to `-o FILE`.
pub fn plan(g: &GlobalArgs, a: &PlanArgs) -> Result<u8, UsageError> {
    let g = g.engine();
    let Some(sel) = daqtune_engine::status::expand_drifted(&g, &a.sel.engine(), &None)? else {
        out::print("nothing drifted: every setting daqtune applied reads as applied\n");
        return Ok(0);
    };
    if a.format == PlanFormat::Text && a.output.is_none() {
        let mut o = out::FitLines::new(out::TerminalSafe::new(out::Stdout), out::width());
        let mut e = out::TerminalSafe::new(std::io::stderr());
        return daqtune_engine::apply::run_plan(
            &g,
            &sel,
            &mut daqtune_render::apply::Text::new(&mut o, &mut e),
        );
    }
    let host = open_host(&g)?;
    let (mut head, mut no_err): (Vec<u8>, Vec<u8>) = (Vec::new(), Vec::new());
    let plan = daqtune_engine::apply::plan_for(
        &host,
        &g,
        &sel,
        &mut daqtune_render::apply::Text::new(&mut head, &mut no_err),
    )?;
    drop(host);
    let head = String::from_utf8_lossy(&head);
    let text = match a.format {
        PlanFormat::Text => text_safe(&format!("{head}{}", daqtune_render::plan::text(&plan))),
        PlanFormat::Json => {
            let lines: Vec<String> = head.lines().map(String::from).collect();
            plan_json::render(&plan, &lines)
        }
    };
    write_all(&[(a.output.as_deref(), &text)])?;
    Ok(0)
}

/// `daqtune qualify`: the text report to stdout or `-o`, and the JUnit and JSON files asked
/// for. Every file is written even when an earlier one fails (a CI job keeps the JUnit when
/// the JSON's directory is missing); the first failure is the error, exit 2.
pub fn qualify(g: &GlobalArgs, a: &QualifyArgs) -> Result<u8, UsageError> {
    let opts = a.engine();
    let q = daqtune_engine::qualify::run(&g.engine(), &opts, &crate::selftest_cmd::ChildSelftest)?;
    let text = daqtune_render::qualify::text(&q);
    let junit = opts
        .junit
        .as_ref()
        .map(|_| daqtune_engine::qualify::junit(&q));
    let json = opts.json.as_ref().map(|_| q.json());
    let mut outputs = vec![(opts.output.as_deref(), text.as_str())];
    if let (Some(p), Some(j)) = (&opts.junit, &junit) {
        outputs.push((Some(p.as_path()), j));
    }
    if let (Some(p), Some(j)) = (&opts.json, &json) {
        outputs.push((Some(p.as_path()), j));
    }
    write_all(&outputs)?;
    Ok(q.exit_code())
}

pub fn explain(a: &ExplainArgs) -> Result<u8, UsageError> {
    if a.list {
        if a.markdown {
            out::print(&report::catalogue_markdown());
        } else {
            out::print(&catalogue_text());
        }
        return Ok(0);
    }
    let id = a.id.as_deref().unwrap_or_default();
    // Not a check: the table of documented field failures qualify can name.
    if id == "known-states" {
        out::print(&daqtune_engine::known_states::describe());
        return Ok(0);
    }
    let c = tunables::find(id).ok_or_else(|| UsageError::UnknownCheck(id.to_string()))?;
    out::print(c.doc);
    if !c.doc.ends_with('\n') {
        out::print("\n");
    }
    Ok(0)
}

/// `explain --list`: id, area and title, the columns as wide as their longest entry.
fn catalogue_text() -> String {
    let rows: Vec<(&str, &str, &str)> = tunables::REGISTRY
        .iter()
        .map(|c| (c.id, c.area.title(), c.title))
        .collect();
    columns(&rows)
}

/// Three columns, the first two padded to their widest cell.
fn columns(rows: &[(&str, &str, &str)]) -> String {
    let w0 = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0);
    let mut s = String::new();
    for (a, b, c) in rows {
        let line = format!("{a:<w0$} {b:<w1$} {c}");
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

pub fn profiles(a: &ProfilesArgs) -> Result<u8, UsageError> {
    match &a.action {
        None | Some(ProfilesAction::List) => {
            let mut rows = Vec::new();
            for name in profile::builtin_names() {
                let lp = profile::load(name)?;
                rows.push((name, lp.profile.description));
            }
            let w = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
            for (name, description) in rows {
                out::print(&format!("{name:<w$} {description}\n"));
            }
        }
        Some(ProfilesAction::Show { name }) => {
            let lp = load_profile(name)?;
            let y = serde_yaml_ng::to_string(&lp.profile)
                .map_err(|e| UsageError::Other(e.to_string()))?;
            out::print(&y);
        }
        Some(ProfilesAction::Keys { markdown: true }) => {
            out::print(&daqtune_engine::report::profile_keys_markdown());
        }
        Some(ProfilesAction::Keys { markdown: false }) => {
            out::print(&daqtune_engine::report::profile_keys_text());
        }
    }
    Ok(0)
}

/// What `snapshot -o PATH` writes, from the name alone.
#[derive(Debug, PartialEq, Eq)]
enum SnapshotTarget {
    /// `.tar.zst`, in any case.
    Archive,
    Directory,
}

/// The archive names `snapshot` does not write, lower case: a directory by such a name
/// (what `-o h.tar.gz` used to make) is never what was meant.
const OTHER_ARCHIVES: &[&str] = &[
    ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tbz", ".tar.lz4", ".tar", ".zip",
    ".gz", ".xz", ".bz2", ".zst", ".zstd", ".lz4", ".7z", ".rar",
];

fn snapshot_target(out: &Path) -> Result<SnapshotTarget, UsageError> {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    if name.ends_with(".tar.zst") {
        return Ok(SnapshotTarget::Archive);
    }
    if let Some(ext) = OTHER_ARCHIVES.iter().find(|e| name.ends_with(*e)) {
        return Err(UsageError::Other(format!(
            "snapshot -o {}: daqtune writes .tar.zst archives only, not {ext}; name the \
             archive FILE.tar.zst, or give a directory name without an archive extension",
            out.display()
        )));
    }
    Ok(SnapshotTarget::Directory)
}

/// A directory snapshot goes into a new or empty directory, never through a symlink, never
/// over a file: what is there already is not mixed with or replaced by the snapshot.
fn check_snapshot_dir(out: &Path) -> Result<(), UsageError> {
    let refuse = |why: &str| {
        Err(UsageError::Other(format!(
            "snapshot -o {}: {why}; a directory snapshot needs a new or empty directory",
            out.display()
        )))
    };
    match std::fs::symlink_metadata(out) {
        Err(_) => Ok(()),
        Ok(m) if m.file_type().is_symlink() => refuse("is a symlink"),
        Ok(m) if !m.is_dir() => refuse("exists and is not a directory"),
        Ok(_) => match std::fs::read_dir(out).map(|mut d| d.next().is_none()) {
            Ok(true) => Ok(()),
            Ok(false) => refuse("exists and is not empty"),
            Err(e) => refuse(&format!("cannot be read ({e})")),
        },
    }
}

pub fn snapshot(g: &GlobalArgs, a: &SnapshotArgs) -> Result<u8, UsageError> {
    let out = &a.output;
    // Decided before the host is read: a refused name costs nothing.
    let target = snapshot_target(out)?;
    if target == SnapshotTarget::Directory {
        check_snapshot_dir(out)?;
    }
    let g = g.engine();
    let host = open_host(&g)?;
    let profile = choose_profile(&host, &g)?;
    let fail = |e: snapshot::SnapshotError| UsageError::Other(format!("snapshot: {e}"));
    let meta = match target {
        SnapshotTarget::Archive => {
            let tmp = snapshot::TempRoot::new("daqtune-snap-")
                .map_err(|e| UsageError::Other(e.to_string()))?;
            let m = snapshot::write_dir(&host, &profile, tmp.path(), a.redact).map_err(fail)?;
            snapshot::pack(tmp.path(), out).map_err(fail)?;
            m
        }
        SnapshotTarget::Directory => {
            snapshot::write_dir(&host, &profile, out, a.redact).map_err(fail)?
        }
    };
    out::eprint(&format!(
        "daqtune: snapshot {}: {} files, {} links{}; replay with: daqtune check --root {}\n",
        out.display(),
        meta.files,
        meta.links,
        if meta.redacted { ", redacted" } else { "" },
        out.display()
    ));
    Ok(0)
}

/// `daqtune import`: captures into a host root (a directory, or a .tar.zst like a snapshot).
pub fn import(a: &ImportArgs) -> Result<u8, UsageError> {
    use daqtune_engine::import;
    let out = &a.output;
    let target = snapshot_target(out)?;
    if target == SnapshotTarget::Directory {
        check_snapshot_dir(out)?;
    }
    let fail = |e: import::ImportError| UsageError::Other(format!("import: {e}"));
    let m = match target {
        SnapshotTarget::Archive => {
            let tmp = snapshot::TempRoot::new("daqtune-import-")
                .map_err(|e| UsageError::Other(e.to_string()))?;
            let m = import::import(&a.captures, tmp.path()).map_err(fail)?;
            snapshot::pack(tmp.path(), out)
                .map_err(|e| UsageError::Other(format!("import: {e}")))?;
            m
        }
        SnapshotTarget::Directory => import::import(&a.captures, out).map_err(fail)?,
    };
    let covers: Vec<&str> = m.covers.iter().map(|s| s.as_str()).collect();
    out::eprint(&format!(
        "daqtune: import {}: {} PCI functions from {}; holds {}; manifest daqtune/import.json; check it with: daqtune check --root {}\n",
        out.display(),
        m.devices.len(),
        m.captures().join(", "),
        if covers.is_empty() { "nothing daqtune reads".to_string() } else { covers.join(", ") },
        out.display()
    ));
    Ok(0)
}

pub fn diff(g: &GlobalArgs, a: &DiffArgs) -> Result<u8, UsageError> {
    let g = g.engine();
    let left = load_side(&g, &a.before, "BEFORE")?;
    let right = load_side(&g, &a.after, "AFTER")?;
    let changes = daqtune_engine::diff::diff(&left, &right);
    for n in daqtune_engine::diff::notes(&left, &right) {
        out::eprint(&format!("daqtune diff: {n}\n"));
    }
    let text = if a.json || a.format == TopoFormat::Json {
        let j = serde_json::to_string_pretty(&changes)
            .map_err(|e| UsageError::Other(format!("cannot render JSON: {e}")))?;
        j + "\n"
    } else {
        text_safe(&daqtune_render::diff::text(&changes))
    };
    write_all(&[(a.output.as_deref(), &text)])?;
    Ok(u8::from(!changes.is_empty()))
}

/// Picture formats that `--svg` cannot write: daqtune draws SVG alone, and a file with one
/// of these names would hold SVG bytes its viewers refuse (tune_system.py wrote PNG with
/// Pillow; issue 46 found `x.png` receiving SVG). A name without one of them (`.svg`, no
/// extension, /dev/stdout) is written.
const NOT_SVG: [&str; 12] = [
    "png", "pdf", "jpg", "jpeg", "gif", "bmp", "tif", "tiff", "webp", "eps", "ps", "emf",
];

fn refuse_picture_format(path: &Path) -> Result<(), UsageError> {
    let Some(ext) = path.extension().and_then(|e| e.to_str()) else {
        return Ok(());
    };
    let ext = ext.to_ascii_lowercase();
    if !NOT_SVG.contains(&ext.as_str()) {
        return Ok(());
    }
    let svg = path.with_extension("svg");
    // rsvg-convert (librsvg) writes these four formats from an SVG.
    let convert = if ["png", "pdf", "ps", "eps"].contains(&ext.as_str()) {
        format!(
            ", e.g. `rsvg-convert -f {ext} {} -o {}`",
            svg.display(),
            path.display()
        )
    } else {
        String::new()
    };
    Err(UsageError::Other(format!(
        "--svg {}: daqtune draws the PCIe tree as SVG only, so a .{ext} file would hold SVG; formats that work: .svg (or no extension, or - for stdout); convert the SVG if you need .{ext}{convert}",
        path.display(),
    )))
}

pub fn topo(g: &GlobalArgs, a: &TopoArgs) -> Result<u8, UsageError> {
    let svg_to_stdout = a.svg.as_deref() == Some(Path::new("-"));
    if let Some(p) = a.svg.as_deref().filter(|_| !svg_to_stdout) {
        refuse_picture_format(p)?;
    }
    // One stream, one document: with the SVG on stdout the matrix goes to -o or nowhere.
    if svg_to_stdout && a.output.is_none() && a.format.is_some() {
        return Err(UsageError::Other(
            "topo: --svg - puts the SVG on stdout; write the matrix to a file with -o FILE".into(),
        ));
    }
    let g = g.engine();
    let host = open_host(&g)?;
    let (tree, nics) = match topo::gather(&host, a.all) {
        Ok(x) => x,
        Err(e) => {
            out::eprint(&format!("daqtune topo: {e}\n"));
            return Ok(1);
        }
    };
    let nv = topo::read_nvlink(&host, &tree);
    let t = topo::build_with(&tree, &nics, &nv);
    let mut outputs: Vec<(Option<&Path>, String)> = Vec::new();
    if !svg_to_stdout || a.output.is_some() {
        let matrix = match a.format.unwrap_or(TopoFormat::Text) {
            TopoFormat::Text => text_safe(&daqtune_render::topo::text(&t)),
            TopoFormat::Json => serde_json::to_string_pretty(&t)
                .map(|j| j + "\n")
                .map_err(|e| UsageError::Other(format!("cannot render JSON: {e}")))?,
        };
        outputs.push((a.output.as_deref(), matrix));
    }
    if let Some(path) = &a.svg {
        // The paths take the colour of pcie.topology's verdict under the run's profile.
        let facts = g.facts(&host);
        let lp = choose_profile_with(&facts, &g)?;
        let policy = topo::path_policy(&facts, &lp);
        let svg = topo::render_svg(&tree, &nics, &t, a.all, &policy);
        outputs.push(((!svg_to_stdout).then_some(path.as_path()), svg));
    }
    let list: Vec<(Option<&Path>, &str)> = outputs.iter().map(|(p, t)| (*p, t.as_str())).collect();
    write_all(&list)?;
    if let Some(path) = a.svg.as_deref().filter(|_| !svg_to_stdout) {
        out::eprint(&format!("daqtune topo: wrote {}\n", path.display()));
    }
    Ok(0)
}

/// `daqtune status`: exit 0 no drift, 1 drift (2: could not run).
pub fn status(g: &GlobalArgs, a: &StatusArgs) -> Result<u8, UsageError> {
    let opts = daqtune_engine::status::StatusOptions {
        state_dir: a.state_dir.clone(),
    };
    let st = daqtune_engine::status::gather(&g.engine(), &opts)?;
    let text = match a.format {
        TopoFormat::Text if a.output.is_none() => out::fit(
            &text_safe(&daqtune_render::status::text(&st)),
            out::width(),
            false,
        ),
        TopoFormat::Text => text_safe(&daqtune_render::status::text(&st)),
        TopoFormat::Json => daqtune_engine::status::json(&st),
    };
    write_all(&[(a.output.as_deref(), &text)])?;
    Ok(st.exit_code())
}

/// `daqtune gpu`: the GPU facts with their sources.
pub fn gpu(g: &GlobalArgs, a: &GpuArgs) -> Result<u8, UsageError> {
    let v = daqtune_engine::gpu_view::gather(&g.engine())?;
    let text = match a.format {
        TopoFormat::Text => text_safe(&daqtune_render::gpu::text(&v)),
        TopoFormat::Json => daqtune_engine::gpu_view::json(&v),
    };
    write_all(&[(a.output.as_deref(), &text)])?;
    Ok(0)
}

/// `daqtune nic`: every port's drop and error counters with their source.
pub fn nic(g: &GlobalArgs, a: &NicArgs) -> Result<u8, UsageError> {
    let o = daqtune_engine::nic_view::NicOptions {
        interfaces: a.interfaces.clone(),
        interval_s: a.interval,
        all: a.all,
    };
    let v = daqtune_engine::nic_view::gather(&g.engine(), &o)?;
    let text = match a.format {
        TopoFormat::Text => text_safe(&daqtune_render::nic::text(&v)),
        TopoFormat::Json => daqtune_engine::nic_view::json(&v),
    };
    write_all(&[(a.output.as_deref(), &text)])?;
    Ok(0)
}

/// `text` as [`out::TerminalSafe`] writes it: host data in a text output (a netdev or device
/// name from a snapshot, a file's old contents in a plan) reaches no terminal as a control
/// sequence, whether printed or written with `-o` (the file is read with `cat` later).
fn text_safe(text: &str) -> String {
    let mut v = Vec::with_capacity(text.len());
    {
        let mut t = out::TerminalSafe::new(&mut v);
        let _ = std::io::Write::write_all(&mut t, text.as_bytes());
    }
    String::from_utf8_lossy(&v).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_names() {
        for a in ["s.tar.zst", "S.TAR.ZST", "dir/h.Tar.Zst"] {
            assert_eq!(
                snapshot_target(Path::new(a)).ok(),
                Some(SnapshotTarget::Archive),
                "{a}"
            );
        }
        for d in ["snap", "snap.d", "host-2026.11.26", "x.json"] {
            assert_eq!(
                snapshot_target(Path::new(d)).ok(),
                Some(SnapshotTarget::Directory),
                "{d}"
            );
        }
        for r in ["h.tar.gz", "h.TGZ", "h.zip", "h.tar", "h.zst", "h.tar.xz"] {
            let e = snapshot_target(Path::new(r)).expect_err(r).to_string();
            assert!(e.contains(".tar.zst archives only"), "{e}");
        }
    }

    #[test]
    fn columns_fit_the_longest_cell() {
        let t = columns(&[("daqtune.artifacts", "Apply", "x"), ("a", "Kernel", "y")]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0].find('x'), lines[1].find('y'), "{t}");
    }
}
