//! For `daqtune selftest rdma`: the verbs engine lives in the `daqtune-rdma` executable (it links
//! libibverbs; the main binary must start on hosts without it), so the main binary finds and runs
//! that helper, and reports a skip with the reason when it is not installed.

use daqtune_selftest::engine::Mode;
use daqtune_selftest::report::{EngineResult, Report};
use daqtune_selftest::sys::hostname;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const HELPER: &str = "daqtune-rdma";

/// `$DAQTUNE_RDMA_BIN`, else `daqtune-rdma` next to the running executable, else on `PATH`.
pub fn find_helper() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DAQTUNE_RDMA_BIN") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(HELPER)));
    if let Some(p) = beside.filter(|p| p.is_file()) {
        return Some(p);
    }
    let path = std::env::var_os("PATH")?;
    search_path(&path, HELPER)
}

/// The first directory of a PATH-style list that holds `name` as a file.
pub fn search_path(path: &std::ffi::OsStr, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The report printed when the helper is missing: every requested mode skipped, with why.
pub fn skip_report(hostname: &str, why: &str, modes: &[Mode]) -> Report {
    let mut r = Report::new(hostname, "rdma", "-");
    for m in modes {
        r.push(EngineResult::skipped("rdma", *m, "ports", why));
    }
    r
}

/// Runs the helper with `args` (stdio inherited) and returns its exit status; when there is no
/// helper, prints a skip report (JSON when `json`) and returns 0, as any other skip.
pub fn run_helper(args: &[OsString], json: bool) -> i32 {
    let Some(bin) = find_helper() else {
        let why = format!(
            "{HELPER} not found (next to this binary, on PATH, or $DAQTUNE_RDMA_BIN): build it \
             with `cargo build -p daqtune-rdma --features rdma` (needs libibverbs-dev)"
        );
        let r = skip_report(&hostname(), &why, &[Mode::Write, Mode::Send]);
        print!(
            "{}",
            if json {
                r.to_json() + "\n"
            } else {
                r.to_text()
            }
        );
        return 0;
    };
    run_at(&bin, args)
}

fn run_at(bin: &Path, args: &[OsString]) -> i32 {
    match Command::new(bin).args(args).status() {
        Ok(s) => s.code().unwrap_or(2),
        Err(e) => {
            eprintln!("daqtune selftest rdma: cannot run {}: {e}", bin.display());
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_selftest::report::Status;

    #[test]
    fn path_search() {
        let d = tempfile::tempdir().expect("tmp");
        let f = d.path().join(HELPER);
        std::fs::write(&f, "#!/bin/sh\nexit 0\n").expect("write");
        let path = std::env::join_paths([Path::new("/nonexistent"), d.path()]).expect("join");
        assert_eq!(search_path(&path, HELPER), Some(f));
        assert_eq!(search_path(&path, "nope"), None);
        assert_eq!(search_path(std::ffi::OsStr::new(""), HELPER), None);
    }

    #[test]
    fn missing_helper_is_a_skip_with_reason() {
        let r = skip_report("h", "daqtune-rdma not found", &[Mode::Write, Mode::Send]);
        assert_eq!(r.summary.skip, 2);
        assert!(r.passed());
        assert!(r.results.iter().all(|x| x.status == Status::Skip));
        assert!(r.to_text().contains("daqtune-rdma not found"));
    }

    #[test]
    fn helper_exit_status_is_passed_through() {
        let d = tempfile::tempdir().expect("tmp");
        let f = d.path().join("fake");
        std::fs::write(&f, "#!/bin/sh\nexit 3\n").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(run_at(&f, &[]), 3);
        assert_eq!(run_at(&d.path().join("missing"), &[]), 2);
    }
}
