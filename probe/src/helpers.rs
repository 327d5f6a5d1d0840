//! Finding daqtune's helper executables (`daqtune-dpdk`, `daqtune-rdma`): the self-test's
//! engines that link libdpdk or libibverbs live in binaries of their own, so a host without
//! those libraries still runs everything else. One lookup for both launchers, so they cannot
//! disagree about where a helper may come from.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// `$override_var` when set (a file, else nothing: a wrong override is not silently replaced
/// by another binary), else `name` next to the running executable (installed side by side, or
/// the same cargo target directory), else the first executable `name` on `PATH`.
pub fn find(name: &str, override_var: Option<&str>) -> Option<PathBuf> {
    if let Some(p) = override_var.and_then(std::env::var_os) {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let me = std::env::current_exe().ok();
    find_in(name, me.as_deref(), std::env::var_os("PATH").as_deref())
}

/// [`find`] without the environment: `name` beside `self_exe`, else in each directory of
/// `path_var` (empty entries skipped: an empty PATH entry means the current directory, which
/// a root tool must not search). Only executable regular files count.
pub fn find_in(name: &str, self_exe: Option<&Path>, path_var: Option<&OsStr>) -> Option<PathBuf> {
    if let Some(dir) = self_exe.and_then(Path::parent) {
        let p = dir.join(name);
        if is_executable(&p) {
            return Some(p);
        }
    }
    std::env::split_paths(path_var?)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\nexit 0\n").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        p
    }

    #[test]
    fn beside_self_wins_over_path_and_only_executables_count() {
        let (ta, tb) = (
            tempfile::tempdir().expect("tmp"),
            tempfile::tempdir().expect("tmp"),
        );
        let me = ta.path().join("daqtune");
        let path = std::env::join_paths([Path::new("/nonexistent"), tb.path()]).expect("path");
        assert_eq!(find_in("helper", Some(&me), Some(&path)), None);
        let on_path = script(tb.path(), "helper", 0o755);
        assert_eq!(
            find_in("helper", Some(&me), Some(&path)),
            Some(on_path.clone())
        );
        let beside = script(ta.path(), "helper", 0o755);
        assert_eq!(
            find_in("helper", Some(&me), Some(&path)),
            Some(beside.clone())
        );
        // A helper that cannot be run is not one: spawning it would fail with EACCES.
        std::fs::set_permissions(&beside, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(
            find_in("helper", Some(&me), Some(&path)),
            Some(on_path.clone())
        );
        std::fs::set_permissions(&on_path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(find_in("helper", Some(&me), Some(&path)), None);
        assert_eq!(find_in("helper", None, None), None);
    }
}
