//! Helpers shared by the CLI tests: run the real binary on fixture roots.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

#[path = "../../../../tests/support/report_json.rs"]
mod report_json;
#[allow(unused_imports)]
pub use report_json::*;

pub use daqtune_testkit::fixture;

/// The daqtune under test: this build's, or the one in `DAQTUNE_TEST_BIN_DIR` (the aarch64
/// build, run by this native harness through qemu-user: scripts/test-aarch64.sh).
pub fn bin() -> PathBuf {
    built_bin("daqtune", env!("CARGO_BIN_EXE_daqtune"))
}

/// A program of this package: `DAQTUNE_TEST_BIN_DIR/NAME` when that is set, else this build's.
pub fn built_bin(name: &str, this_build: &str) -> PathBuf {
    match std::env::var_os("DAQTUNE_TEST_BIN_DIR") {
        Some(dir) => PathBuf::from(dir).join(name),
        None => PathBuf::from(this_build),
    }
}

/// `daqtune ARGS` with no terminal on standard input (a command that would ask refuses).
pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run daqtune")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn check_json(fixture_name: &str, profile: &str) -> serde_json::Value {
    check_json_root(&fixture(fixture_name), profile)
}

pub fn check_json_root(root: &std::path::Path, profile: &str) -> serde_json::Value {
    let out = run(&[
        "check",
        "--root",
        root.to_str().expect("utf8"),
        "--profile",
        profile,
        "--format",
        "json",
    ]);
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json report")
}

/// Copy a fixture tree, symlinks kept as links (sysfs relies on them).
pub fn copy_tree(src: &std::path::Path, dst: &std::path::Path) {
    for entry in std::fs::read_dir(src).expect("read_dir") {
        let entry = entry.expect("entry");
        let ft = entry.file_type().expect("ft");
        let to = dst.join(entry.file_name());
        if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).expect("link"), &to)
                .expect("symlink");
        } else if ft.is_dir() {
            std::fs::create_dir_all(&to).expect("mkdir");
            copy_tree(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).expect("copy");
        }
    }
}

/// An installed daqtune in a host root (`/usr/bin/daqtune`, a regular executable file): what
/// the units and the udev rule a plan writes will run.
pub fn install_daqtune(root: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let p = root.join("usr/bin/daqtune");
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(&p, b"#!/bin/sh\nexit 0\n").expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A path as text (the tests' temporary paths are UTF-8).
pub fn path_str(p: &std::path::Path) -> &str {
    p.to_str().expect("utf8")
}
