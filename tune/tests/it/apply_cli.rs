//! `plan`, `apply`, `revert` and `generate` as commands: what the binary adds to the engine's
//! behaviour (tested through its API in engine/tests/apply_*.rs). The prompt without a
//! terminal, exit 2 with the reason on standard error for a usage error, the spellings of the
//! flags (`--only A,B`), and the exit codes of a run that changes the host and of its revert.

use crate::common;

use common::{fixture, install_daqtune, run, stderr, stdout};
use std::path::Path;

/// A copy of the Spark fixture (it has its own PCI tree) with an installed daqtune.
fn spark() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    common::copy_tree(&fixture("spark"), d.path());
    install_daqtune(d.path());
    d
}

fn files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let ft = e.file_type().expect("type");
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                let rel = e
                    .path()
                    .strip_prefix(root)
                    .expect("rel")
                    .display()
                    .to_string();
                out.push((rel, std::fs::read(e.path()).expect("read")));
            }
        }
    }
    out.sort();
    out
}

/// Without `--yes` and without a terminal, apply and revert refuse with exit 2 and say why
/// on standard error; nothing changes.
#[test]
fn no_terminal_and_no_yes_is_exit_2() {
    let root = spark();
    let r = root.path();
    let rs = r.to_str().expect("utf8");
    let before = files(r);
    let o = run(&["apply", "--root", rs, "--profile", "dgx-spark"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("stdin is not a terminal and --yes was not given"),
        "{}",
        stderr(&o)
    );
    assert_eq!(files(r), before);
}

/// A full apply exits 0 and prints its journal; revert exits 0; a second revert says there is
/// nothing to revert. A dry run exits 0.
#[test]
fn apply_and_revert_exit_0() {
    let root = spark();
    let r = root.path();
    let rs = r.to_str().expect("utf8");
    let o = run(&["apply", "--root", rs, "--profile", "dgx-spark", "--dry-run"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("dry run: nothing changed"),
        "{}",
        stdout(&o)
    );
    let o = run(&["apply", "--root", rs, "--profile", "dgx-spark", "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("(undo with `daqtune revert`)"),
        "{}",
        stdout(&o)
    );
    let o = run(&["revert", "--root", rs, "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["revert", "--root", rs, "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("nothing to revert"), "{}", stdout(&o));
}

/// `--only` takes a comma-separated list as well as the flag repeated.
#[test]
fn only_takes_a_comma_list() {
    let root = spark();
    let rs = root.path().to_str().expect("utf8");
    for args in [
        &["--only", "nic.mtu,kernel.cmdline"][..],
        &["--only", "nic.mtu", "--only", "kernel.cmdline"][..],
    ] {
        let mut a = vec!["plan", "--root", rs, "--profile", "dgx-spark"];
        a.extend(args);
        let o = run(&a);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let t = stdout(&o);
        assert!(t.contains("nic.mtu") && t.contains("kernel.cmdline"), "{t}");
        assert!(!t.contains("pcie.mrrs"), "{t}");
    }
}

/// What the engine refuses (an unknown id, a device that is no data-path PF or no PCI address,
/// an `--exe` that is not absolute, an artifact the host has no file for, units without an
/// installed binary) is exit 2 with the reason on standard error, for every command.
#[test]
fn usage_errors_exit_2_with_the_reason() {
    let root = spark();
    let r = root.path();
    let rs = r.to_str().expect("utf8");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["apply", "--only", "bogus", "--yes"], "bogus"),
        (
            vec![
                "apply",
                "--only",
                "pcie.mrrs",
                "--device",
                "0000:09:00.0",
                "--yes",
            ],
            "0000:09:00.0",
        ),
        (
            vec!["apply", "--only", "pcie.mrrs", "--device", "%k", "--yes"],
            "--device",
        ),
        (vec!["plan", "--exe", "daqtune"], "absolute"),
        (vec!["generate", "extlinux"], "extlinux"),
    ];
    for (args, why) in cases {
        let mut a = args.clone();
        a.extend(["--root", rs, "--profile", "dgx-spark"]);
        let o = run(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(why),
            "{args:?}: `{why}` in {}",
            stderr(&o)
        );
        assert!(stdout(&o).is_empty(), "{args:?}: {}", stdout(&o));
    }
    std::fs::remove_file(r.join("usr/bin/daqtune")).expect("rm");
    let before = files(r);
    for args in [&["apply", "--yes"][..], &["generate", "udev-mrrs"][..]] {
        let mut a = args.to_vec();
        a.extend(["--root", rs, "--profile", "dgx-spark"]);
        let o = run(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("no installed daqtune binary"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert_eq!(files(r), before);
}

/// Issue 42 row 5: an empty id list (`--only ""`, `" "`, `","`) is a usage error for every
/// command that takes ids; it meant every setting (apply made all 57 changes, revert undid
/// every run). Nothing changes.
#[test]
fn empty_id_list_is_a_usage_error() {
    let root = spark();
    let r = root.path();
    let rs = r.to_str().expect("utf8");
    let o = run(&[
        "apply",
        "--root",
        rs,
        "--profile",
        "dgx-spark",
        "--yes",
        "--only",
        "nic.mtu",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let before = files(r);
    for empty in ["", " ", ",", "nic.mtu,"] {
        let mut commands = vec![
            vec![
                "plan",
                "--root",
                rs,
                "--profile",
                "dgx-spark",
                "--only",
                empty,
            ],
            vec![
                "apply",
                "--root",
                rs,
                "--profile",
                "dgx-spark",
                "--yes",
                "--only",
                empty,
            ],
            vec!["revert", "--root", rs, "--yes", "--only", empty],
            vec![
                "qualify",
                "--root",
                rs,
                "--profile",
                "dgx-spark",
                "--only",
                empty,
            ],
        ];
        // `check` takes its ids as arguments, not split at commas.
        if !empty.contains(',') {
            commands.push(vec!["check", "--root", rs, "--profile", "dgx-spark", empty]);
        }
        for args in commands {
            let o = run(&args);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stdout(&o));
            assert!(
                stderr(&o).contains("an empty id"),
                "{args:?}: {}",
                stderr(&o)
            );
            assert_eq!(files(r), before, "{args:?} changed the root");
        }
    }
}

/// Issue 42 row 6: the self-test thresholds on the command line: NaN, infinity, negatives and
/// a zero message size exit 2 naming the flag (NaN made 84 % UDP loss a pass).
#[test]
fn selftest_flags_are_bounded() {
    for (flag, v) in [
        ("--max-udp-loss", "NaN"),
        ("--max-udp-loss", "inf"),
        ("--max-udp-loss=-1", ""),
        ("--min-tcp-gbps", "NaN"),
        ("--message-size", "0"),
        ("--rate", "nan"),
        ("--mtu", "0"),
        ("--duration", "NaN"),
    ] {
        let mut args = vec!["selftest", "--loopback", flag];
        if !v.is_empty() {
            args.push(v);
        }
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let name = flag.split('=').next().unwrap_or(flag);
        assert!(
            stderr(&o).contains("invalid value") && stderr(&o).contains(name),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    let o = run(&["qualify", "--root", ".", "--selftest-duration", "NaN"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--selftest-duration"), "{}", stderr(&o));
}

/// The words of a command line as a POSIX shell splits it (single quotes and `\'` only:
/// what `shell_quote` writes).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    let mut any = false;
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            '\\' if !quoted => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                    any = true;
                }
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(cur);
    }
    words
}

/// Issue 45 item 5: `status` on a drifted host ends with the `apply --only` that restores
/// what drifted, and that command (and `apply --only drifted`) works.
#[test]
fn status_prints_a_working_restore_and_apply_only_drifted_restores() {
    const GOV: &str = "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor";
    // The untuned IGX root: its governors are not `performance`, so apply writes cpu0's.
    let root = tempfile::tempdir().expect("tmp");
    common::copy_tree(&fixture("igx-untuned"), root.path());
    install_daqtune(root.path());
    let r = root.path();
    let rs = r.to_str().expect("utf8");
    let o = run(&[
        "apply",
        "--root",
        rs,
        "--profile",
        "igx-orin",
        "--only",
        "cpu.governor,nic.mtu",
        "--yes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    // Nothing drifted yet: `--only drifted` changes nothing and says so.
    let o = run(&[
        "apply",
        "--root",
        rs,
        "--profile",
        "igx-orin",
        "--only",
        "drifted",
        "--yes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("nothing drifted"), "{}", stdout(&o));

    std::fs::write(r.join(GOV), "powersave\n").expect("drift");
    let o = run(&["status", "--root", rs]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let line = stdout(&o)
        .lines()
        .find_map(|l| l.strip_prefix("restore what drifted: ").map(str::to_string))
        .unwrap_or_else(|| panic!("no restore line:\n{}", stdout(&o)));
    let words = shell_words(&line);
    assert_eq!(&words[..2], ["sudo", "daqtune"], "{line}");
    assert!(line.ends_with("--only cpu.governor"), "{line}");
    let mut args: Vec<&str> = words[2..].iter().map(String::as_str).collect();
    args.push("--yes");
    let o = run(&args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{line}: {}{}",
        stdout(&o),
        stderr(&o)
    );
    assert_eq!(
        std::fs::read_to_string(r.join(GOV)).expect("gov"),
        "performance\n"
    );
    let o = run(&["status", "--root", rs]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(
        !stdout(&o).contains("restore what drifted"),
        "{}",
        stdout(&o)
    );

    // The same through `--only drifted`.
    std::fs::write(r.join(GOV), "powersave\n").expect("drift");
    let o = run(&[
        "apply",
        "--root",
        rs,
        "--profile",
        "igx-orin",
        "--only",
        "drifted",
        "--yes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(
        std::fs::read_to_string(r.join(GOV)).expect("gov"),
        "performance\n"
    );
    assert_eq!(run(&["status", "--root", rs]).status.code(), Some(0));
}

/// A copy of a fixture root, without an installed daqtune.
fn copy_of(name: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    common::copy_tree(&fixture(name), d.path());
    d
}

/// The udev rules daqtune wrote into a root.
fn udev_rules(root: &Path) -> Vec<String> {
    files(root)
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| p.starts_with("etc/udev/rules.d/") && p.contains("daqtune"))
        .collect()
}

/// Issue 46, item 1: tune_system.py's `--set mrrs` as boot scripts ran it (no terminal, no
/// --yes, no profile). tune_system.py asked nothing and wrote the register at runtime
/// (DAQIRI python/tune_system.py `update_mrrs_for_nvidia_devices`); daqtune exited 2 for want
/// of --yes, then refused for want of an installed binary. Without one it now makes the
/// runtime change alone and says it will not survive a reboot and how to keep it; with one
/// it also writes the udev rule that keeps it.
#[test]
fn set_mrrs_runs_as_boot_scripts_ran_it() {
    let root = copy_of("igx-untuned");
    let rs = root.path().to_str().expect("utf8");
    let o = run(&["--root", rs, "--set", "mrrs"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(out.contains("pcie.mrrs"), "{out}");
    assert!(!out.contains("FAIL"), "{out}");
    assert!(
        err.contains("will not survive a reboot") && err.contains("install daqtune"),
        "{err}"
    );
    assert!(
        udev_rules(root.path()).is_empty(),
        "{:?}",
        udev_rules(root.path())
    );
    // Done: a second run has nothing to change.
    let o = run(&["--root", rs, "--set", "mrrs"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("nothing to change"), "{}", stdout(&o));

    // With daqtune installed the setting is kept across boots, and nothing is said about it.
    let root = copy_of("igx-untuned");
    install_daqtune(root.path());
    let rs = root.path().to_str().expect("utf8");
    let o = run(&["--root", rs, "--set=mrrs"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(!stderr(&o).contains("will not survive"), "{}", stderr(&o));
    assert!(!udev_rules(root.path()).is_empty(), "{}", stdout(&o));

    // On a server no built-in profile names, as tune_system.py did on any host: the profile
    // `check` falls back to, said so.
    let root = copy_of("x86-2s");
    let rs = root.path().to_str().expect("utf8");
    let o = run(&["--root", rs, "--set", "mrrs"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("using generic-dgpu"), "{}", stderr(&o));
}

/// Issue 46, item 2: `revert` without --yes and without a terminal said to run `daqtune
/// plan` (which shows what apply would do). It now says what revert would undo and the
/// command that confirms it; nothing changes.
#[test]
fn revert_without_yes_says_what_it_would_undo() {
    let root = spark();
    let r = root.path();
    let rs = r.to_str().expect("utf8");
    let o = run(&[
        "apply",
        "--root",
        rs,
        "--profile",
        "dgx-spark",
        "--only",
        "nic.mtu",
        "--yes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let before = files(r);
    let o = run(&["revert", "--root", rs]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(!e.contains("daqtune plan"), "{e}");
    assert!(
        e.contains("revert would undo")
            && e.contains("nic.mtu")
            && e.contains("daqtune revert --yes"),
        "{e}"
    );
    let o = run(&["revert", "--root", rs, "--only", "nic.mtu"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("daqtune revert --only nic.mtu --yes"),
        "{}",
        stderr(&o)
    );
    assert_eq!(files(r), before);
}

/// `daqtune ARGS` as the user nobody (the test runs as root), or `None` where that cannot be
/// done (no setpriv, no nobody, not root); as a user who is not root, directly.
fn as_nobody(args: &[&str]) -> Option<std::process::Output> {
    let is_root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if !is_root {
        return Some(run(args));
    }
    let o = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(common::bin())
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    // setpriv could not switch (no such user, no capability): nothing ran.
    (!String::from_utf8_lossy(&o.stderr).starts_with("setpriv:")).then_some(o)
}

/// Issue 46, item 2: apply by a user who is not root ended in a bare EACCES on the journal
/// directory. It now says that root is the reason.
#[test]
fn apply_as_non_root_says_run_as_root() {
    use std::os::unix::fs::PermissionsExt;
    let root = copy_of("igx-untuned");
    // Readable by everyone, writable by root alone, as / is.
    for d in [root.path().to_path_buf(), root.path().join("var")] {
        std::fs::create_dir_all(&d).expect("mkdir");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let rs = root.path().to_str().expect("utf8");
    let Some(o) = as_nobody(&[
        "apply",
        "--root",
        rs,
        "-p",
        "igx-orin",
        "--only",
        "pcie.mrrs",
        "--runtime-only",
        "--yes",
    ]) else {
        daqtune_testkit::skip("cannot run as a user who is not root here (setpriv)");
        return;
    };
    assert_eq!(o.status.code(), Some(2), "{}{}", stdout(&o), stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("ermission denied") && e.contains("run as root (sudo daqtune"),
        "{e}"
    );
}
