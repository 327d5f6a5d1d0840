//! Helpers of the fleet tests: the tools they check against (promtool, systemd-analyze,
//! ansible-core, ansible-lint, kubernetes-validate), installed when missing and root, and a
//! skip with the reason only when a tool cannot be had.
#![allow(dead_code)]

pub use crate::common::bin;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn fixtures() -> PathBuf {
    repo().join("tests/fixtures")
}

/// Every fixture host root (a directory under tests/fixtures).
pub fn fixture_roots() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("tests/fixtures")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    v.sort();
    assert!(v.len() >= 10, "fixture roots: {v:?}");
    v
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn daqtune(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("DAQTUNE_ROOT")
        .env_remove("DAQTUNE_PROFILE")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run daqtune")
}

fn on_path(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(tool))
            .find(|c| c.is_file())
    })
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

fn apt_install(package: &str) -> Result<(), String> {
    if !is_root() {
        return Err("not root, so it cannot be installed here".into());
    }
    if on_path("apt-get").is_none() {
        return Err("no apt-get on this system".into());
    }
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends", package])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
    };
    let first = install().map_err(|e| format!("apt-get: {e}"))?;
    if first.status.success() {
        return Ok(());
    }
    // Package lists may be missing on a fresh machine.
    let _ = Command::new("apt-get").args(["update", "-qq"]).output();
    let again = install().map_err(|e| format!("apt-get: {e}"))?;
    if again.status.success() {
        Ok(())
    } else {
        Err(format!(
            "apt-get install {package} failed: {}",
            text(&again).trim()
        ))
    }
}

/// The tool, installed from `package` through apt when missing (as root); `Err` says why
/// it cannot be had.
pub fn tool(name: &str, package: &str) -> Result<PathBuf, String> {
    if let Some(p) = on_path(name) {
        return Ok(p);
    }
    apt_install(package).map_err(|e| format!("{name} ({package}): {e}"))?;
    on_path(name).ok_or_else(|| format!("{name}: installed {package} but {name} is not on PATH"))
}

/// The Python tools, pinned so a new lint rule cannot break an old commit.
pub const PIP_PACKAGES: &[&str] = &[
    "ansible-core==2.19.14",
    "ansible-lint==26.10.1",
    "kubernetes-validate==1.37.0",
];

/// A virtualenv with [`PIP_PACKAGES`], kept under cargo's per-target temporary directory
/// (`target/tmp`, which `cargo clean` removes) so that a test run leaves nothing in /tmp and a
/// second run reuses it. It is rebuilt when the pinned package list changes (the directory
/// name carries it). A venv's scripts name its own path, so it is built in place, under an
/// exclusive lock that a second test process waits for.
pub struct Venv {
    pub bin: PathBuf,
    /// Seconds it took to make or find (for the report of the suite's time).
    pub seconds: f64,
}

pub fn venv() -> Result<&'static Venv, String> {
    static VENV: OnceLock<Result<Venv, String>> = OnceLock::new();
    VENV.get_or_init(make_venv).as_ref().map_err(Clone::clone)
}

fn venv_dir() -> PathBuf {
    let tag: u64 = PIP_PACKAGES
        .iter()
        .flat_map(|p| p.bytes())
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fleet-venv-{tag:016x}"))
}

/// An exclusive flock on `path`, released when the file is closed.
fn lock(path: &Path) -> Result<std::fs::File, String> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: flock on a file descriptor we own; it blocks until the lock is ours.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(format!(
            "flock {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(f)
}

/// Whether the interpreter on a script's `#!` line exists. A virtualenv made under another path
/// (a checkout moved with its target/ directory) names that path there, and every script of it
/// then fails with "required file not found" (seen 2026-11-29 with the VM cache's copy).
fn interpreter_is_there(script: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(bytes) = std::fs::read(script) else {
        return false;
    };
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    first
        .strip_prefix(b"#!")
        .map(|path| Path::new(std::ffi::OsStr::from_bytes(path.trim_ascii())).is_file())
        .unwrap_or(false)
}

fn make_venv() -> Result<Venv, String> {
    let t0 = std::time::Instant::now();
    let dir = venv_dir();
    let parent = dir.parent().ok_or("no target tmp dir")?;
    std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    let _guard = lock(&parent.join(".fleet-venv.lock"))?;
    let bin = dir.join("bin");
    let marker = dir.join(".complete");
    if marker.is_file() && interpreter_is_there(&bin.join("ansible-playbook")) {
        return Ok(Venv {
            bin,
            seconds: t0.elapsed().as_secs_f64(),
        });
    }
    // An interrupted build left a partial venv: start over.
    let _ = std::fs::remove_dir_all(&dir);
    let python = on_path("python3").ok_or("python3 is not installed")?;
    let make = || {
        Command::new(&python)
            .args(["-m", "venv"])
            .arg(&dir)
            .output()
    };
    let out = make().map_err(|e| format!("python3 -m venv: {e}"))?;
    if !out.status.success() {
        // Debian splits ensurepip into python3-venv.
        apt_install("python3-venv")
            .map_err(|e| format!("python3 -m venv failed ({}); {e}", text(&out).trim()))?;
        let out = make().map_err(|e| format!("python3 -m venv: {e}"))?;
        if !out.status.success() {
            return Err(format!("python3 -m venv: {}", text(&out).trim()));
        }
    }
    let out = Command::new(bin.join("pip"))
        .args([
            "install",
            "--disable-pip-version-check",
            "--quiet",
            "--no-input",
        ])
        .args(PIP_PACKAGES)
        .output()
        .map_err(|e| format!("pip: {e}"))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(format!(
            "pip install {} failed (no PyPI, or a Python these versions do not support): {}",
            PIP_PACKAGES.join(" "),
            text(&out).trim()
        ));
    }
    std::fs::write(&marker, PIP_PACKAGES.join("\n")).map_err(|e| e.to_string())?;
    let seconds = t0.elapsed().as_secs_f64();
    eprintln!(
        "fleet: virtualenv with {} made in {seconds:.1} s ({})",
        PIP_PACKAGES.join(", "),
        dir.display()
    );
    Ok(Venv { bin, seconds })
}

/// Print why a test does not run (a failure under DAQTUNE_REQUIRE_ROOT=1, as every skip).
#[track_caller]
pub fn skip(what: &str, why: &str) {
    daqtune_testkit::skip(&format!("{what}: {why}"));
}

/// Read a whole file as text.
pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// What the package puts in a host: a daqtune at /usr/bin/daqtune inside `root` (a stub: the
/// fixture root's units only need it to exist and be executable; apply refuses to write units
/// that call a missing binary).
pub fn install_stub(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let p = root.join("usr/bin/daqtune");
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(&p, b"#!/bin/sh\nexit 0\n").expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A cached virtualenv is reused only while the interpreter its scripts name is there: the
/// script of a venv made under a path that is gone (a moved checkout) is refused, as is a file
/// with no `#!` line.
#[test]
fn a_venv_script_naming_a_missing_interpreter_is_not_reused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let interpreter = dir.path().join("python3");
    std::fs::write(&interpreter, b"").expect("write");
    let script = dir.path().join("ansible-playbook");
    let write = |text: String| std::fs::write(&script, text).expect("write");

    write(format!("#!{}\nimport sys\n", interpreter.display()));
    assert!(interpreter_is_there(&script));
    write(format!("#!{} \r\n", interpreter.display()));
    assert!(
        interpreter_is_there(&script),
        "trailing blanks are not part of the path"
    );
    write(format!("#!{}/gone/bin/python3\n", dir.path().display()));
    assert!(!interpreter_is_there(&script));
    write("import sys\n".to_string());
    assert!(!interpreter_is_there(&script));
    assert!(!interpreter_is_there(&dir.path().join("missing")));
}
