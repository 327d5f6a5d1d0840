//! Opening the host a command works on: the live machine, a host root directory, or a
//! snapshot archive unpacked for the run; and the two sides of `diff` (a report, or a root
//! evaluated now). Above the snapshot (which it unpacks) and the evaluation.

use crate::commands::{choose_profile, evaluate, GlobalOptions, UsageError};
use crate::report::Report;
use daqtune_probe::Host;

/// A host root ready to read; a `.tar.zst` snapshot is unpacked into a temporary directory
/// that lives as long as this value.
pub struct OpenedHost {
    pub host: Host,
    _unpacked: Option<crate::snapshot::TempRoot>,
}

impl std::ops::Deref for OpenedHost {
    type Target = Host;
    fn deref(&self) -> &Host {
        &self.host
    }
}

pub fn open_root(path: Option<&std::path::Path>) -> Result<OpenedHost, UsageError> {
    let Some(p) = path else {
        return Ok(OpenedHost {
            host: Host::live(),
            _unpacked: None,
        });
    };
    let root_err = |source| UsageError::Root {
        path: p.display().to_string(),
        source,
    };
    if p.is_file() {
        let tmp = crate::snapshot::TempRoot::new("daqtune-snapshot-").map_err(root_err)?;
        crate::snapshot::unpack(p, tmp.path()).map_err(|e| {
            UsageError::Other(format!(
                "--root {}: cannot unpack the snapshot archive: {e}",
                p.display()
            ))
        })?;
        holds_a_host(p, tmp.path())?;
        let host = Host::at(tmp.path()).map_err(root_err)?;
        return Ok(OpenedHost {
            host,
            _unpacked: Some(tmp),
        });
    }
    let host = Host::at(p).map_err(root_err)?;
    holds_a_host(p, p)?;
    Ok(OpenedHost {
        host,
        _unpacked: None,
    })
}

/// A root with neither `proc/` nor `sys/` holds no host at all (an empty or mistyped
/// directory): every check would skip and the run would pass on nothing.
fn holds_a_host(given: &std::path::Path, dir: &std::path::Path) -> Result<(), UsageError> {
    if dir.join("proc").is_dir() || dir.join("sys").is_dir() {
        return Ok(());
    }
    Err(UsageError::Other(format!(
        "--root {}: holds no host (no proc/ and no sys/); give a host root directory or a snapshot from `daqtune snapshot`",
        daqtune_probe::text::shell_quote(&given.display().to_string())
    )))
}

pub fn open_host(g: &GlobalOptions) -> Result<OpenedHost, UsageError> {
    open_root(g.root.as_deref())
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
        UsageError::Root { source, .. } => what(source.to_string()),
        // open_root's own messages name the path as the `--root` it usually is.
        UsageError::Other(m) => UsageError::Other(m.replacen("--root ", &format!("{side} "), 1)),
        other => other,
    })?;
    let profile = choose_profile(&host, g)?;
    Ok(evaluate(&host, &profile, Vec::new(), false))
}

/// A `daqtune.report/v1` document; another schema (a qualify or plan JSON, a diff) is refused
/// by name rather than read as a report with nothing in it. The error starts with `:line:col:`
/// where the JSON itself is broken, else with `: `.
fn parse_report(text: &str) -> Result<Report, ReportFileError> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| ReportFileError::Json {
        line: e.line(),
        column: e.column(),
        why: e.to_string(),
    })?;
    match v.get("schema").and_then(|s| s.as_str()) {
        Some(crate::report::SCHEMA) => {}
        Some(other) => {
            return Err(ReportFileError::Schema {
                schema: other.to_string(),
            })
        }
        None => return Err(ReportFileError::NoSchema),
    }
    serde_json::from_value(v).map_err(|e| ReportFileError::Shape { why: e.to_string() })
}

/// Why a file given to `diff` is not a report; shown after the file's name.
#[derive(Debug, thiserror::Error)]
enum ReportFileError {
    #[error(":{line}:{column}: not a daqtune.report/v1 JSON report ({why})")]
    Json {
        line: usize,
        column: usize,
        why: String,
    },
    #[error(": a {schema} document, not a {} report", crate::report::SCHEMA)]
    Schema { schema: String },
    #[error(": no \"schema\" field: not a {} report", crate::report::SCHEMA)]
    NoSchema,
    #[error(": not a {} JSON report ({why})", crate::report::SCHEMA)]
    Shape { why: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words `diff` prints after a file that is not a report.
    #[test]
    fn report_file_errors() {
        let e = |t: &str| parse_report(t).expect_err("refused").to_string();
        assert!(
            e("{").starts_with(":1:1: not a daqtune.report/v1 JSON report ("),
            "{}",
            e("{")
        );
        assert_eq!(
            e(r#"{"schema": "daqtune.plan/v1"}"#),
            ": a daqtune.plan/v1 document, not a daqtune.report/v1 report"
        );
        assert_eq!(
            e("{}"),
            ": no \"schema\" field: not a daqtune.report/v1 report"
        );
        assert!(e(r#"{"schema": "daqtune.report/v1"}"#)
            .starts_with(": not a daqtune.report/v1 JSON report ("));
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
