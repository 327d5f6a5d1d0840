//! Helpers shared by the integration tests of every daqtune crate (issue 44): where the
//! repository's fixtures are, and one way for a test to say that it cannot run here.
//!
//! A test that needs root, a tool or a kernel feature and finds it missing prints why and
//! returns early: it counts as passed. Where every tool is installed and the tests run as root
//! (`scripts/test-all.sh`, the README's test command), nothing may pass that way:
//! `DAQTUNE_REQUIRE_ROOT=1` turns each such skip into a failure that says what was missing.
//! Hardware that CI never has (a GPU, an RDMA device, a machine without NVIDIA and Mellanox
//! devices) skips with its reason even then ([`skip_without_hardware`]).

use std::path::{Path, PathBuf};

/// The variable that turns a skip into a failure.
pub const REQUIRE_ROOT_VAR: &str = "DAQTUNE_REQUIRE_ROOT";

/// Whether this run may not skip (`DAQTUNE_REQUIRE_ROOT=1`).
pub fn skips_forbidden() -> bool {
    std::env::var_os(REQUIRE_ROOT_VAR).is_some_and(|v| v == "1")
}

/// The test cannot run here, for `reason`: prints it (the test then returns early), or panics
/// with it under `DAQTUNE_REQUIRE_ROOT=1`.
#[track_caller]
pub fn skip(reason: &str) {
    skip_unless_forbidden(reason, skips_forbidden());
}

#[track_caller]
fn skip_unless_forbidden(reason: &str, forbidden: bool) {
    if forbidden {
        panic!("{REQUIRE_ROOT_VAR}=1 and this test cannot run: {reason}");
    }
    eprintln!("SKIP: {reason}");
}

/// The test needs hardware this machine lacks and CI never has (a GPU, an RDMA device): prints
/// `reason`, also under `DAQTUNE_REQUIRE_ROOT=1` (which promises root and tools, not hardware).
pub fn skip_without_hardware(reason: &str) {
    eprintln!("SKIP (hardware): {reason}");
}

/// Whether the test runs with effective uid 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// True when the test runs as root; otherwise [`skip`]s with "needs root: `reason`" (false:
/// the test returns early).
#[track_caller]
pub fn require_root_or_skip(reason: &str) -> bool {
    if is_root() {
        return true;
    }
    skip(&format!("needs root: {reason}"));
    false
}

/// The executable `tool` found on PATH (and in the sbin directories, which a user's PATH may
/// leave out), or None.
pub fn find_tool(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from));
    dirs.map(|d| d.join(tool)).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// True when `tool` is installed; otherwise [`skip`]s with "`tool` is not installed (`hint`)".
#[track_caller]
pub fn require_tool_or_skip(tool: &str, hint: &str) -> bool {
    if find_tool(tool).is_some() {
        return true;
    }
    skip(&format!("{tool} is not installed ({hint})"));
    false
}

/// The repository's top directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// `tests/fixtures/NAME`: a recorded host root or capture.
pub fn fixture(name: &str) -> PathBuf {
    repo_root().join("tests/fixtures").join(name)
}

/// `tests/configs/NAME`: a DAQIRI configuration.
pub fn config(name: &str) -> PathBuf {
    repo_root().join("tests/configs").join(name)
}

/// `tests/real-hosts`: the corpus of captures from real hosts.
pub fn corpus() -> PathBuf {
    repo_root().join("tests/real-hosts")
}

/// The entries of a check report (`daqtune check --format json`) with this check id.
pub fn checks_with_id<'a>(report: &'a serde_json::Value, id: &str) -> Vec<&'a serde_json::Value> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["id"] == id)
        .collect()
}

/// The string field `key` of a JSON object, or "" when it is missing or not a string.
pub fn str_field(v: &serde_json::Value, key: &str) -> String {
    v[key].as_str().unwrap_or("").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "DAQTUNE_REQUIRE_ROOT=1 and this test cannot run: needs root: x")]
    fn a_skip_fails_when_skips_are_forbidden() {
        skip_unless_forbidden("needs root: x", true);
    }

    #[test]
    fn a_skip_only_prints_otherwise() {
        skip_unless_forbidden("needs root: x", false);
    }

    #[test]
    fn tools_are_found_on_path_and_missing_ones_are_not() {
        assert!(find_tool("sh").is_some());
        assert!(find_tool("daqtune-no-such-tool").is_none());
    }

    #[test]
    fn checks_are_picked_by_id_and_fields_read_as_text() {
        let r = serde_json::json!({"checks": [
            {"id": "a", "status": "pass"}, {"id": "b", "status": 1}, {"id": "a"}
        ]});
        let a = checks_with_id(&r, "a");
        assert_eq!(a.len(), 2);
        assert_eq!(str_field(a[0], "status"), "pass");
        assert_eq!(str_field(a[1], "status"), "");
        assert_eq!(str_field(checks_with_id(&r, "b")[0], "status"), "");
    }

    #[test]
    fn fixtures_are_in_the_repository() {
        assert!(
            fixture("igx-tuned").is_dir(),
            "{}",
            fixture("igx-tuned").display()
        );
        assert!(config("").is_dir(), "{}", config("").display());
        assert!(corpus().is_dir(), "{}", corpus().display());
    }
}
