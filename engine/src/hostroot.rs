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
        let host = Host::at(tmp.path()).map_err(root_err)?;
        return Ok(OpenedHost {
            host,
            _unpacked: Some(tmp),
        });
    }
    Ok(OpenedHost {
        host: Host::at(p).map_err(root_err)?,
        _unpacked: None,
    })
}

pub fn open_host(g: &GlobalOptions) -> Result<OpenedHost, UsageError> {
    open_root(g.root.as_deref())
}

/// A report from a JSON file, or evaluated from a snapshot directory / archive.
pub fn load_side(g: &GlobalOptions, path: &std::path::Path) -> Result<Report, UsageError> {
    let is_json = path.is_file() && !path.to_string_lossy().ends_with(".tar.zst");
    if is_json {
        let text = daqtune_probe::fsutil::read_user_file(path)
            .map_err(|e| UsageError::Other(format!("{}: {e}", path.display())))?;
        let r: Report = serde_json::from_str(&text).map_err(|e| {
            UsageError::Other(format!(
                "{}:{}:{}: not a daqtune.report/v1 JSON report ({e})",
                path.display(),
                e.line(),
                e.column()
            ))
        })?;
        return Ok(r);
    }
    let host = open_root(Some(path))?;
    let profile = choose_profile(&host, g)?;
    Ok(evaluate(&host, &profile, Vec::new(), false))
}
