//! Opening the host a command works on: the live machine, a host root directory, or a
//! snapshot archive unpacked for the run; and the two sides of `diff` (a report, or a root
//! evaluated now). Above the snapshot (which it unpacks) and the evaluation.

pub mod import;
pub mod snapshot;

use crate::check::commands::{choose_profile, evaluate, GlobalOptions, UsageError};
use crate::check::report::Report;
use daqtune_probe::Host;

/// A host root ready to read; a `.tar.zst` snapshot is unpacked into a temporary directory
/// that lives as long as this value.
pub struct OpenedHost {
    pub host: Host,
    _unpacked: Option<crate::hostroot::snapshot::TempRoot>,
    /// The `--root` the user gave, where it was unpacked or imported into `_unpacked`.
    given: Option<std::path::PathBuf>,
}

impl OpenedHost {
    /// The root as the user named it: an archive or capture is read from a private temporary
    /// directory that is gone when the command ends, so an output naming that directory
    /// names nothing the user can open.
    pub fn shown_root(&self) -> String {
        match &self.given {
            Some(p) => p.display().to_string(),
            None => self.host.root().display().to_string(),
        }
    }

    /// Whether the root was imported from captures (`daqtune/import.json`).
    pub fn is_import(&self) -> bool {
        !self.host.is_live() && self.host.root().join("daqtune/import.json").is_file()
    }
}

impl std::ops::Deref for OpenedHost {
    type Target = Host;
    fn deref(&self) -> &Host {
        &self.host
    }
}

/// Why a host root could not be opened. Displayed after what names it (`--root`, or a
/// side of `diff`).
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// The directory (or the temporary one for an archive) could not be opened or made.
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// The snapshot archive could not be unpacked.
    #[error("{path}: cannot unpack the snapshot archive: {source}")]
    Unpack {
        path: String,
        source: crate::hostroot::snapshot::SnapshotError,
    },
    /// A capture (lspci text, ...) that could not be imported.
    #[error("{0}")]
    Import(#[from] crate::hostroot::import::ImportError),
    /// A file that is none of the kinds `--root` reads (a JUnit report, a PDF, a JSON
    /// report): named as such with the kinds it does read, not as a failed import or unpack.
    #[error(
        "{}: not a capture daqtune knows (it holds {holds}); kinds it reads: {KINDS_READ}",
        daqtune_probe::text::shell_quote(path)
    )]
    UnknownKind { path: String, holds: String },
    /// Neither `proc/` nor `sys/`: an empty or mistyped directory, every check would skip.
    #[error("{}: holds no host (no proc/ and no sys/); give a host root directory or a snapshot from `daqtune snapshot`", daqtune_probe::text::shell_quote(.0))]
    NoHost(String),
}

impl RootError {
    /// As a usage error of `--root`.
    pub fn of_root(self) -> UsageError {
        match self {
            RootError::Io { path, source } => UsageError::Root { path, source },
            other => UsageError::Other(format!("--root {other}")),
        }
    }
}

/// What `--root` (and a side of `diff`) reads.
const KINDS_READ: &str = "a host root directory, a snapshot from `daqtune snapshot` (.tar.zst), lspci -vv text or -xxx dumps, an lspci -t tree, nvidia-smi -q or -q -x, an nvidia-bug-report.log(.gz), a sosreport (directory, .tar, .tar.gz, .tar.xz), a pasted /proc/cmdline";

/// What a file holds when its first bytes say it is a kind `--root` cannot read: a
/// document, image, program or archive format known by its signature, or XML / JSON that
/// is no nvidia-smi capture. `None` for anything else (text, a compressed or tar stream,
/// which the import and the snapshot reader judge).
fn foreign_kind(path: &std::path::Path) -> Option<String> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(1 << 20)
        .read_to_end(&mut head)
        .ok()?;
    let sig: [(&[u8], &str); 6] = [
        (b"%PDF", "a PDF document"),
        (b"\x89PNG", "a PNG image"),
        (b"\xff\xd8\xff", "a JPEG image"),
        (b"PK\x03\x04", "a zip archive"),
        (b"\x7fELF", "a program (ELF)"),
        (b"BZh", "a bzip2 stream"),
    ];
    if let Some((_, what)) = sig.iter().find(|(m, _)| head.starts_with(m)) {
        return Some((*what).to_string());
    }
    let text = String::from_utf8_lossy(&head);
    let t = text.trim_start_matches('\u{feff}').trim_start();
    if crate::hostroot::import::detect(&text).is_some() {
        return None;
    }
    if t.starts_with('<') {
        // The root element: the first tag that is no declaration, comment or DOCTYPE.
        let root = t
            .split('<')
            .skip(1)
            .find(|tag| !tag.starts_with(['?', '!']))
            .map(|tag| {
                tag.split(|c: char| c.is_whitespace() || c == '>' || c == '/')
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .unwrap_or_default();
        let what = match root.as_str() {
            "testsuites" | "testsuite" => ": a JUnit report",
            "svg" => ": an SVG drawing",
            "html" => ": an HTML page",
            _ => "",
        };
        return Some(format!("XML, root element <{root}>{what}"));
    }
    if t.starts_with('{') || t.starts_with('[') {
        let what = if t.contains("\"daqtune.report/v1\"") {
            ": a daqtune report, which `daqtune diff` compares but `--root` cannot read"
        } else {
            ""
        };
        return Some(format!("JSON{what}"));
    }
    None
}

pub fn open_root(path: Option<&std::path::Path>) -> Result<OpenedHost, RootError> {
    let Some(p) = path else {
        return Ok(OpenedHost {
            host: Host::live(),
            _unpacked: None,
            given: None,
        });
    };
    let root_err = |source| RootError::Io {
        path: p.display().to_string(),
        source,
    };
    // A capture (a file that is no .tar.zst, or a directory of captures): imported into a
    // private temporary root first.
    // A directory of files but neither proc/ nor sys/ was meant as captures: the import says
    // which files it read and why none is a capture.
    let files_only = p.is_dir()
        && !p.join("proc").is_dir()
        && !p.join("sys").is_dir()
        && std::fs::read_dir(p).is_ok_and(|mut d| {
            d.any(|e| e.is_ok_and(|e| e.file_type().is_ok_and(|t| t.is_file())))
        });
    if p.is_file() {
        if let Some(holds) = foreign_kind(p) {
            return Err(RootError::UnknownKind {
                path: p.display().to_string(),
                holds,
            });
        }
    }
    if files_only || crate::hostroot::import::is_capture(p) {
        let tmp = crate::hostroot::import::import_temp(p)?;
        let host = Host::at(tmp.path()).map_err(root_err)?;
        return Ok(OpenedHost {
            host,
            _unpacked: Some(tmp),
            given: Some(p.to_path_buf()),
        });
    }
    if p.is_file() {
        let tmp =
            crate::hostroot::snapshot::TempRoot::new("daqtune-snapshot-").map_err(root_err)?;
        crate::hostroot::snapshot::unpack(p, tmp.path()).map_err(|source| RootError::Unpack {
            path: p.display().to_string(),
            source,
        })?;
        holds_a_host(p, tmp.path())?;
        let host = Host::at(tmp.path()).map_err(root_err)?;
        return Ok(OpenedHost {
            host,
            _unpacked: Some(tmp),
            given: Some(p.to_path_buf()),
        });
    }
    let host = Host::at(p).map_err(root_err)?;
    holds_a_host(p, p)?;
    Ok(OpenedHost {
        host,
        _unpacked: None,
        given: None,
    })
}

/// A root with neither `proc/` nor `sys/` holds no host at all (an empty or mistyped
/// directory): every check would skip and the run would pass on nothing. A root `daqtune
/// import` wrote (its manifest says what it holds: an `nvidia-smi -q` capture has no proc/ or
/// sys/) is a host whose missing sources its checks say "not in this capture" for.
fn holds_a_host(given: &std::path::Path, dir: &std::path::Path) -> Result<(), RootError> {
    let manifest = dir.join(crate::model::capture::MANIFEST_PATH.trim_start_matches('/'));
    if dir.join("proc").is_dir() || dir.join("sys").is_dir() || manifest.is_file() {
        return Ok(());
    }
    Err(RootError::NoHost(given.display().to_string()))
}

pub fn open_host(g: &GlobalOptions) -> Result<OpenedHost, UsageError> {
    open_root(g.root.as_deref()).map_err(RootError::of_root)
}

/// A report from a JSON file, or evaluated from a snapshot directory / archive. `side` names
/// the input in messages (`BEFORE`, `AFTER`): it is not a `--root`.
pub fn load_side(
    g: &GlobalOptions,
    path: &std::path::Path,
    side: &str,
) -> Result<Report, UsageError> {
    let what = |msg: String| UsageError::Other(format!("{side} {}: {msg}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| {
        what(format!(
            "{e} (a daqtune.report/v1 JSON report, a snapshot directory or a .tar.zst snapshot \
             was expected)"
        ))
    })?;
    let is_json = meta.is_file() && !path.to_string_lossy().to_lowercase().ends_with(".tar.zst");
    if is_json {
        let text = daqtune_probe::fsutil::read_user_file(path).map_err(|e| what(e.to_string()))?;
        return parse_report(&text)
            .map_err(|m| UsageError::Other(format!("{}{m}", path.display())));
    }
    let host = open_root(Some(path)).map_err(|e| match e {
        RootError::Io { source, .. } => what(source.to_string()),
        other => UsageError::Other(format!("{side} {other}")),
    })?;
    let profile = choose_profile(&host, g)?;
    Ok(evaluate(&host, &profile, Vec::new(), false))
}

/// Why a file given as a side of `diff` is not a report. Displayed right after the file's
/// name: `:line:col: ...` where the JSON itself is broken, else `: ...`.
#[derive(Debug, thiserror::Error)]
pub enum ReportFileError {
    #[error(":{line}:{column}: not a {schema} JSON report ({0})", line = .0.line(), column = .0.column(), schema = crate::check::report::SCHEMA)]
    Json(serde_json::Error),
    /// Another daqtune document (a qualify or plan JSON, a diff), refused by name rather than
    /// read as a report with nothing in it.
    #[error(": a {0} document, not a {schema} report", schema = crate::check::report::SCHEMA)]
    OtherSchema(String),
    #[error(": no \"schema\" field: not a {schema} report", schema = crate::check::report::SCHEMA)]
    NoSchema,
    #[error(": not a {schema} JSON report ({0})", schema = crate::check::report::SCHEMA)]
    Shape(serde_json::Error),
}

/// A `daqtune.report/v1` document.
fn parse_report(text: &str) -> Result<Report, ReportFileError> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(ReportFileError::Json)?;
    match v.get("schema").and_then(|s| s.as_str()) {
        Some(crate::check::report::SCHEMA) => {}
        Some(other) => return Err(ReportFileError::OtherSchema(other.to_string())),
        None => return Err(ReportFileError::NoSchema),
    }
    serde_json::from_value(v).map_err(ReportFileError::Shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_that_is_no_report_says_why() {
        let cases = [
            ("{", ":1:1: not a daqtune.report/v1 JSON report ("),
            (
                r#"{"schema":"daqtune.plan/v1"}"#,
                ": a daqtune.plan/v1 document, not a daqtune.report/v1 report",
            ),
            (
                "{}",
                ": no \"schema\" field: not a daqtune.report/v1 report",
            ),
            (
                r#"{"schema":"daqtune.report/v1"}"#,
                ": not a daqtune.report/v1 JSON report (",
            ),
        ];
        for (text, want) in cases {
            let e = parse_report(text).expect_err(text).to_string();
            assert!(e.starts_with(want), "{text}: {e}");
        }
    }

    #[test]
    fn a_root_without_proc_or_sys_is_refused() {
        let d = tempfile::tempdir().expect("tempdir");
        let e = open_root(Some(d.path()))
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("holds no host (no proc/ and no sys/)"), "{e}");
        std::fs::create_dir(d.path().join("etc")).expect("etc");
        assert!(open_root(Some(d.path())).is_err());
        std::fs::create_dir(d.path().join("sys")).expect("sys");
        assert!(open_root(Some(d.path())).is_ok());
    }
}
