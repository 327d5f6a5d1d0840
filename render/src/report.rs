//! `daqtune check` as text: one section per area, verdicts folded where they agree, columns
//! as wide as their longest entry, messages wrapped to the terminal, colour where wanted, and
//! every host string escaped on its way to the terminal. JSON, JUnit, Prometheus and NFD are
//! machine formats beside the report in the engine.

use daqtune_engine::model::verdict::{Area, Status, Verdict};
use daqtune_engine::report::{GpuFactsSource, Report};
use daqtune_engine::tunables::{self, REGISTRY};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Whether to color: a TTY, and NO_COLOR unset (https://no-color.org).
pub fn want_color(is_tty: bool) -> bool {
    is_tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn paint(s: &str, status: Status, color: bool) -> String {
    let word = format!("{:<6}", s);
    if !color {
        return word;
    }
    let code = match status {
        Status::Pass => "32",
        Status::Warn | Status::PendingReboot => "33",
        Status::Fail | Status::Error => "1;31",
        Status::Skip | Status::NotApplicable => "2",
    };
    format!("\x1b[{code}m{word}\x1b[0m")
}

fn area_of(id: &str) -> Area {
    tunables::find(id).map(|c| c.area).unwrap_or(Area::Platform)
}

/// Fold verdicts of one check that agree in status, message and fix into one line listing
/// their subjects, so a 256-CPU or 16-port host stays readable.
fn fold(verdicts: &[&Verdict], verbose: bool) -> Vec<(Vec<String>, Verdict)> {
    let mut out: Vec<(Vec<String>, Verdict)> = Vec::new();
    for v in verdicts {
        // Problems with the same fix are one problem on several subjects (three NIC functions
        // whose IOMMU groups translate, say); the JSON keeps each verdict, and so does
        // --verbose where their messages differ.
        let same = |f: &Verdict| {
            f.id == v.id
                && f.status == v.status
                && (f.message == v.message
                    || (!verbose && v.status.severity() > 0 && v.fix.is_some()))
                && f.fix == v.fix
                && f.limit == v.limit
        };
        match out.iter_mut().find(|(_, f)| same(f)) {
            Some((subjects, first)) => {
                subjects.push(v.subject.clone());
                if first.message != v.message && !first.message.ends_with(" more like it)") {
                    first.message.push_str(" (and more like it)");
                }
            }
            None => out.push((vec![v.subject.clone()], (*v).clone())),
        }
    }
    out
}

/// Passing (and skipped / n/a) verdicts of one check are folded into one line unless
/// `verbose`: a healthy 16-port host prints one `nic.mtu` line, while every problem keeps
/// its own line with its fix.
fn condense(folded: Vec<(Vec<String>, Verdict)>, verbose: bool) -> Vec<(Vec<String>, Verdict)> {
    let mut out: Vec<(Vec<String>, Verdict)> = Vec::new();
    let mut quiet: Vec<(Vec<String>, Verdict)> = Vec::new();
    for (subjects, v) in folded {
        let foldable = !verbose
            && matches!(
                v.status,
                Status::Pass | Status::NotApplicable | Status::Skip
            );
        if foldable {
            if let Some((subs, _)) = quiet
                .iter_mut()
                .find(|(_, f)| f.id == v.id && f.status == v.status)
            {
                subs.extend(subjects);
                continue;
            }
            quiet.push((subjects, v));
        } else {
            out.push((subjects, v));
        }
    }
    let mut merged: Vec<(Vec<String>, Verdict)> = quiet
        .into_iter()
        .map(|(subjects, mut v)| {
            if subjects.len() > 1 && !v.message.starts_with("all ") {
                let distinct = subjects.len();
                v.message = format!("{} (and {} more; -v shows each)", v.message, distinct - 1);
            }
            (subjects, v)
        })
        .collect();
    merged.append(&mut out);
    merged
}

fn subject_label(subjects: &[String]) -> String {
    let joined_len: usize = subjects.iter().map(|s| s.len() + 2).sum();
    if subjects.len() > 2 || (subjects.len() > 1 && joined_len > 40) {
        format!("{} subjects", subjects.len())
    } else {
        subjects.join(", ")
    }
}

/// The widest subject the text report's subject column grows to.
const SUBJECT_MAX: usize = 32;

/// Every string of a text report passes through here: host data (hostnames, DMI strings, GPU
/// names, file contents quoted in messages) must not reach a terminal as escape sequences.
use daqtune_probe::text::printable as esc;

pub fn text(report: &Report, color: bool, verbose: bool) -> String {
    text_fit(report, color, verbose, None)
}

/// A text line broken for a terminal of `width` columns.
struct Fit {
    width: Option<usize>,
    /// Without --verbose a message or fix is cut after this many lines (the marker says
    /// where the whole text is); --verbose and JSON keep every word.
    max_lines: Option<usize>,
}

/// Lines of a message or fix shown before `… (-v: all of it)` when a width is known.
const MAX_LINES: usize = 4;
/// The least room a wrapped column keeps; narrower, its lines hang at [`SUB_INDENT`].
const MIN_COLUMN: usize = 40;
/// Where the lines under a verdict (fix, platform limit, subjects) start.
const SUB_INDENT: usize = 9;

impl Fit {
    /// `head` (already on the line, `head_cols` columns wide) followed by `body`, continued
    /// at column `hang` (or [`SUB_INDENT`] where that leaves too little room).
    fn emit(&self, s: &mut String, head: &str, head_cols: usize, body: &str, hang: usize) {
        let Some(w) = self.width else {
            let _ = writeln!(s, "{head}{body}");
            return;
        };
        let hang = if w >= hang + MIN_COLUMN {
            hang
        } else {
            SUB_INDENT.min(w / 2)
        };
        let first = w.saturating_sub(head_cols);
        // A subject that ran far right leaves a sliver: start the text below instead.
        let first = if first < 12 && first < w - hang {
            0
        } else {
            first
        };
        let room = w - hang;
        let lines = match self.max_lines {
            Some(n) => daqtune_probe::text::wrap_at_most(body, first, room, n, "… (-v: all of it)"),
            None => daqtune_probe::text::wrap(body, first, room),
        };
        for (i, l) in lines.iter().enumerate() {
            if i == 0 {
                let _ = writeln!(
                    s,
                    "{}{l}",
                    if l.is_empty() { head.trim_end() } else { head }
                );
            } else {
                let _ = writeln!(s, "{:hang$}{l}", "");
            }
        }
    }
}

/// The text report for a terminal `width` columns wide (`None`: every line whole, as for a
/// pipe or a file). Messages and fixes wrap at spaces under their column; without `verbose`
/// one longer than [`MAX_LINES`] is cut with a marker, `verbose` and JSON keep all of it.
pub fn text_fit(report: &Report, color: bool, verbose: bool, width: Option<usize>) -> String {
    let fit = Fit {
        width: width.map(|w| w.max(20)),
        max_lines: (!verbose).then_some(MAX_LINES),
    };
    let mut s = String::new();
    let head = format!(
        "daqtune {} — {} ({}), profile {} ({})",
        report.daqtune_version,
        esc(report.host.hostname.as_deref().unwrap_or("host")),
        esc(report.host.product.as_deref().unwrap_or("unknown machine")),
        esc(&report.profile),
        esc(&report.profile_origin)
    );
    let whole = Fit {
        width: fit.width,
        max_lines: None,
    };
    whole.emit(&mut s, "", 0, &head, 2);
    let mut areas: BTreeMap<Area, Vec<&Verdict>> = BTreeMap::new();
    for v in &report.checks {
        areas.entry(area_of(&v.id)).or_default().push(v);
    }
    let mut sections = Vec::new();
    for (area, vs) in areas {
        let mut lines = condense(fold(&vs, verbose), verbose);
        // Keep catalogue order inside an area.
        let order = |id: &str| {
            REGISTRY
                .iter()
                .position(|c| c.id == id)
                .unwrap_or(usize::MAX)
        };
        lines.sort_by_key(|(_, v)| order(&v.id));
        let lines: Vec<(Vec<String>, String, Verdict)> = lines
            .into_iter()
            .map(|(subs, v)| {
                let label = subject_label(&subs);
                (subs, label, v)
            })
            .collect();
        sections.push((area, lines));
    }
    // One id and one subject column for the whole report, as wide as their longest entry
    // (`daqtune.artifacts`, a GPU's address and name), so the messages line up; a subject
    // longer than SUBJECT_MAX (a list, in --verbose) overflows its row rather than pushing
    // every message to the right.
    let rows = || sections.iter().flat_map(|(_, lines)| lines.iter());
    let idw = rows()
        .map(|(_, _, v)| v.id.chars().count())
        .max()
        .unwrap_or(0)
        .max(15);
    let subw = rows()
        .map(|(_, sub, _)| sub.chars().count())
        .filter(|n| *n <= SUBJECT_MAX)
        .max()
        .unwrap_or(0)
        .max(22);
    let msg_col = 2 + 6 + 1 + idw + 1 + subw + 1;
    let sub_head = |label: &str| {
        (
            format!("{:SUB_INDENT$}{label}: ", ""),
            SUB_INDENT + label.len() + 2,
        )
    };
    for (area, lines) in &sections {
        let _ = writeln!(s, "\n{}", area.title());
        for (subjects, subject, v) in lines {
            let plain = format!(
                "  {:<6} {:<idw$} {:<subw$} ",
                v.status.as_str(),
                esc(&v.id),
                esc(subject)
            );
            let cols = daqtune_probe::text::display_width(&plain);
            let head = format!(
                "  {} {:<idw$} {:<subw$} ",
                paint(v.status.as_str(), v.status, color),
                esc(&v.id),
                esc(subject)
            );
            fit.emit(&mut s, &head, cols, &esc(&v.message), msg_col);
            // Subjects the row's label only counts: --verbose lists them, and so does every
            // problem (which subjects to fix is the point of the line).
            if subjects.len() > 1
                && *subject != subjects.join(", ")
                && (verbose || v.status.severity() > 0)
            {
                let (h, c) = sub_head("subjects");
                let list: Vec<String> = subjects.iter().map(|x| esc(x).into_owned()).collect();
                whole.emit(&mut s, &h, c, &list.join(", "), c);
            }
            if let Some(w) = &v.waived {
                let (h, c) = sub_head("waived");
                fit.emit(&mut s, &h, c, &esc(w), c);
            }
            if let Some(l) = &v.limit {
                let (h, c) = sub_head("platform limit");
                fit.emit(&mut s, &h, c, &esc(&l.note), c);
            }
            if v.status.severity() > 0 {
                if let Some(fix) = &v.fix {
                    let (h, c) = sub_head("fix");
                    fit.emit(&mut s, &h, c, &esc(fix), c);
                }
            }
        }
    }
    let _ = writeln!(s);
    for g in &report.gate_failures {
        whole.emit(&mut s, "gate: ", 6, &esc(g), 6);
    }
    let parts: Vec<String> = Status::ALL
        .iter()
        .filter_map(|st| {
            let n = report.summary.get(st.as_str()).copied().unwrap_or(0);
            (n > 0).then(|| format!("{n} {}", st.as_str()))
        })
        .collect();
    if let Some(line) = report.gpu_facts.as_ref().and_then(GpuFactsSource::describe) {
        whole.emit(&mut s, "", 0, &esc(&line), 2);
    }
    whole.emit(
        &mut s,
        "summary: ",
        9,
        &format!("{} ({} ms)", parts.join(", "), report.elapsed_ms),
        9,
    );
    s
}

/// The report in any of `check`'s formats: the text here, the machine formats the engine's
/// ([`daqtune_engine::fleet::render`]).
pub fn render(
    report: &Report,
    format: daqtune_engine::report::Format,
    o: &daqtune_engine::fleet::RenderOptions,
) -> String {
    daqtune_engine::fleet::render(report, format, o)
        .unwrap_or_else(|| text_fit(report, o.color, o.verbose, o.width))
}

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_engine::report::{json, summarize, HostInfo, SCHEMA};

    fn sample() -> Report {
        let checks = vec![
            Verdict::fail("cpu.governor", "cpu64-127", "64/128 CPUs <b>").fix("x"),
            Verdict::skip("hugepages", "host", "no"),
            Verdict::pass("numa", "host", "ok"),
        ];
        Report {
            schema: SCHEMA.into(),
            daqtune_version: "0".into(),
            host: HostInfo {
                hostname: Some("h".into()),
                kernel: None,
                arch: None,
                product: None,
                root: "/".into(),
            },
            profile: "generic-dgpu".into(),
            profile_origin: "given".into(),
            summary: summarize(&checks),
            checks,
            gate_failures: vec![],
            elapsed_ms: 3,
            run: None,
            gpu_facts: None,
        }
    }

    #[test]
    fn the_text_report_says_where_cuda_attributes_came_from() {
        use daqtune_probe::gpu::{CacheOutcome, CacheUse};
        let mut r = sample();
        let src = |outcome| GpuFactsSource {
            source: "live".into(),
            captured_unix: Some(1_795_488_468),
            cuda_cache: Some(CacheUse {
                path: "/run/daqtune/cuda-attrs.json".into(),
                outcome,
                taken_unix: Some(1_795_488_000),
                reason: None,
            }),
            timing: Default::default(),
        };
        r.gpu_facts = Some(src(CacheOutcome::Hit));
        let t = text(&r, false, false);
        assert!(
            t.contains("CUDA attributes from this boot's cache /run/daqtune/cuda-attrs.json (read from CUDA at 2026-11-24T02:40:00Z)"),
            "{t}"
        );
        let j: serde_json::Value = serde_json::from_str(&json(&r)).expect("json");
        assert_eq!(j["gpu_facts"]["cuda_cache"]["outcome"], "hit");
        r.gpu_facts = Some(src(CacheOutcome::Bypassed));
        assert!(text(&r, false, false).contains("--no-cache"));
        // Recorded facts carry no cache verdict: nothing to say.
        r.gpu_facts = Some(GpuFactsSource {
            source: "recorded".into(),
            captured_unix: None,
            cuda_cache: None,
            timing: Default::default(),
        });
        assert!(!text(&r, false, false).contains("GPU facts"));
    }

    #[test]
    fn text_has_summary_and_fix() {
        let t = text(&sample(), false, false);
        assert!(t.contains("fix: x"));
        assert!(t.contains("summary: 1 pass, 1 fail, 1 skip"));
        assert!(!t.contains('\x1b'));
    }

    #[test]
    fn text_escapes_host_strings_and_json_keeps_them() {
        let mut r = sample();
        r.host.hostname = Some("evil\x1b]0;owned\x07host".into());
        r.host.product = Some("IGX\x1b[2J\x1b[H".into());
        r.checks[0].message = "line\none".into();
        let t = text(&r, false, false);
        assert!(!t.contains('\x1b') && !t.contains('\x07'), "{t}");
        assert!(t.contains("evil\\x1b]0;owned\\x07host"), "{t}");
        assert!(t.contains("IGX\\x1b[2J\\x1b[H"), "{t}");
        assert!(t.contains("line\\x0aone"), "{t}");
        // JSON keeps the exact string (escaped by JSON's own rules).
        let back: Report = serde_json::from_str(&json(&r)).expect("json");
        assert_eq!(back.host.hostname, r.host.hostname);
    }
}
