//! Issue 23, "outputs and the command line": every output file goes through one writer
//! (bare names, symlinks), stdout behaves like the coreutils' (a closed pipe, a full disk),
//! `report --interval` leaves no run behind, and the help, man page and environment say and
//! do the same thing. Each test runs the built binary.

use crate::common;
use common::*;
use std::os::unix::fs::symlink;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn igx() -> String {
    fixture("igx-tuned").to_string_lossy().into_owned()
}

fn daqtune_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("DAQTUNE_ROOT")
        .env_remove("DAQTUNE_PROFILE")
        .output()
        .expect("run daqtune")
}

/// Row 1: a bare file name (parent "") is written, the exit code is the command's, and the
/// outputs after it are written too.
#[test]
fn bare_file_names_are_written() {
    let d = tempfile::tempdir().expect("tmp");
    let root = igx();
    let o = daqtune_in(
        d.path(),
        &[
            "qualify", "--level", "1", "--root", &root, "--junit", "q.xml", "--json", "q.json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(d.path().join("q.xml").is_file());
    assert!(d.path().join("q.json").is_file());
    let o = daqtune_in(
        d.path(),
        &[
            "check", "--root", &root, "-o", "out.txt", "--json", "c.json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::read_to_string(d.path().join("out.txt"))
        .expect("out.txt")
        .contains("summary:"));
    assert!(d.path().join("c.json").is_file());
    let o = daqtune_in(
        d.path(),
        &["report", "--root", &root, "--prometheus", "d.prom"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(d.path().join("d.prom").is_file());
    let o = daqtune_in(d.path(), &["snapshot", "--root", &root, "-o", "s.tar.zst"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(d.path().join("s.tar.zst").is_file());
    // No temp file is left beside them.
    for e in std::fs::read_dir(d.path()).expect("ls").flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        assert!(!n.contains("daqtune-tmp"), "{n}");
    }
}

fn is_symlink(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// Row 2: `-o` onto a symlink writes through it and never replaces it.
#[test]
fn output_symlinks_are_written_through() {
    let d = tempfile::tempdir().expect("tmp");
    let root = igx();
    // /proc/self/fd/1 is daqtune's stdout: here a file the test opened.
    let link = d.path().join("l");
    symlink("/proc/self/fd/1", &link).expect("symlink");
    let c = d.path().join("c.xml");
    let f = std::fs::File::create(&c).expect("c.xml");
    let o = Command::new(bin())
        .args(["check", "--root", &root, "--format", "junit", "-o"])
        .arg(&link)
        .stdout(Stdio::from(f))
        .stderr(Stdio::piped())
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(is_symlink(&link), "the link was replaced");
    assert!(std::fs::read_to_string(&c)
        .expect("c.xml")
        .contains("<testsuite"));
    // A link to a regular file: the file gets the report, the link stays (every writer:
    // -o, --json, topo --svg, a snapshot archive).
    let real = d.path().join("real");
    std::fs::write(&real, "old").expect("seed");
    for (i, args) in [
        vec!["check", "--root", &root, "-o"],
        vec!["check", "--root", &root, "--json"],
        vec!["topo", "--root", &root, "--svg"],
        vec!["snapshot", "--root", &root, "-o"],
    ]
    .into_iter()
    .enumerate()
    {
        let link = d.path().join(format!("link{i}.tar.zst"));
        symlink(&real, &link).expect("symlink");
        let mut args: Vec<String> = args.into_iter().map(String::from).collect();
        args.push(link.to_string_lossy().into_owned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = daqtune_in(d.path(), &args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert!(is_symlink(&link), "{args:?} replaced the link");
        assert_ne!(std::fs::read(&real).expect("real"), b"old", "{args:?}");
    }
    // A dangling link is refused; nothing is created where it points.
    let dangling = d.path().join("dangling");
    symlink(d.path().join("nowhere"), &dangling).expect("symlink");
    let o = daqtune_in(d.path(), &["check", "--root", &root, "-o", "dangling"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));
    assert!(!d.path().join("nowhere").exists());
    assert!(is_symlink(&dangling));
}

/// The commands that print, each with arguments that work on the fixture.
fn printing_commands(root: &str, scratch: &str) -> Vec<Vec<String>> {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        v(&["explain", "--list"]),
        v(&["explain", "--list", "--markdown"]),
        v(&["explain", "pcie.mrrs"]),
        v(&["check", "--root", root]),
        v(&["check", "--root", root, "-f", "json"]),
        v(&["check", "--root", root, "-f", "prometheus"]),
        v(&["topo", "--root", root]),
        v(&["topo", "--root", root, "--svg", "-"]),
        v(&["diff", root, &fixture("igx-untuned").to_string_lossy()]),
        v(&["plan", "--root", root, "--runtime-only"]),
        v(&["plan", "--root", root, "--runtime-only", "-f", "json"]),
        v(&["profiles"]),
        v(&["profiles", "show", "igx-orin"]),
        v(&["completions", "bash"]),
        v(&["man"]),
        v(&["generate", "kernel-args", "--root", root]),
        v(&[
            "generate",
            "grub-dropin",
            "-p",
            "generic-dgpu",
            "--root",
            root,
        ]),
        v(&["qualify", "--level", "1", "--root", root]),
        v(&["revert", "--root", scratch, "--yes"]),
        v(&["--help"]),
        v(&["check", "--help"]),
        v(&["--version"]),
    ]
}

/// A pipe whose reading end is already closed: the stdin of a process that exited without
/// reading it (daqtune itself, `--version`).
fn closed_pipe() -> Stdio {
    let mut reader = Command::new(bin())
        .arg("--version")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("reader");
    let w = reader.stdin.take().expect("pipe");
    reader.wait().expect("reader exits");
    Stdio::from(w)
}

/// Row 4: on a closed pipe every command ends quietly, as `seq 1 100000 | head -1` ends seq:
/// killed by SIGPIPE, no panic, no message about it.
#[test]
fn closed_pipe_ends_every_command_quietly() {
    let d = tempfile::tempdir().expect("tmp");
    // revert's scratch root: a host root needs proc/ or sys/ (an empty directory is refused).
    std::fs::create_dir(d.path().join("proc")).expect("proc");
    let root = igx();
    let scratch = d.path().to_string_lossy().into_owned();
    for args in printing_commands(&root, &scratch) {
        let o = Command::new(bin())
            .args(&args)
            .env("NO_COLOR", "1")
            .stdout(closed_pipe())
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        let err = stderr(&o);
        assert!(
            !err.contains("panicked") && !err.contains("failed printing"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("Broken pipe"), "{args:?}: {err}");
        assert_eq!(o.status.signal(), Some(libc::SIGPIPE), "{args:?}: {o:?}");
    }
}

/// Row 5: a failed write to stdout (a full disk) is an error: a message and exit 2, for
/// every command.
#[test]
fn full_disk_on_stdout_is_an_error_for_every_command() {
    let full = Path::new("/dev/full");
    if !full.exists() {
        daqtune_testkit::skip("no /dev/full on this machine");
        return;
    }
    let d = tempfile::tempdir().expect("tmp");
    // revert's scratch root: a host root needs proc/ or sys/ (an empty directory is refused).
    std::fs::create_dir(d.path().join("proc")).expect("proc");
    let root = igx();
    let scratch = d.path().to_string_lossy().into_owned();
    // The self-test front ends report through the selftest crate's `emit` (also inside the
    // daqtune-rdma helper, which inherits stdout): a skip here, no RDMA device named. On a
    // closed pipe they end quietly with their own status, so they are not in printing_commands.
    let selftests = [
        vec!["selftest".to_string(), "rdma".into()],
        vec![
            "selftest".to_string(),
            "rdma".into(),
            "--format".into(),
            "json".into(),
        ],
    ];
    for args in printing_commands(&root, &scratch)
        .into_iter()
        .chain(selftests)
    {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(full)
            .expect("/dev/full");
        let o = Command::new(bin())
            .args(&args)
            .env("NO_COLOR", "1")
            .stdout(Stdio::from(f))
            .stderr(Stdio::piped())
            .output()
            .expect("run");
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("cannot write to standard output: No space left on device"),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(!stderr(&o).contains("panicked"), "{args:?}");
    }
}

/// `/proc/PID/stat`: the state letter and the parent pid, or None once the process is gone.
fn proc_state(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let ppid = f.next()?.parse().ok()?;
    Some((state, ppid))
}

fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|c| proc_state(*c).is_some_and(|(_, pp)| pp == pid))
        .collect()
}

/// kill(2) on a process this test started (or its child, checked by the caller through
/// /proc); no `kill` binary needed (a bare Debian image has none).
fn signal(pid: u32, sig: i32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) takes no pointers.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Starts `report --interval 1s` and catches one of its runs alive, stopped (SIGSTOP) so
/// that it cannot end on its own while the test signals the parent, and removes what earlier
/// runs wrote: a `b.json` after this is the stopped run's. Returns the parent and the stopped
/// child's pid.
fn report_loop_with_a_stopped_run(dir: &Path) -> (std::process::Child, u32) {
    let mut parent = Command::new(bin())
        .args(["report", "--root", &igx()])
        .args(["--json", "b.json", "--interval", "1s"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("report loop");
    // A run lasts a fraction of each second: look until one is caught (each miss waits for
    // the next run; the bound only keeps a broken loop from hanging the test).
    for _ in 0..200_000 {
        for c in children_of(parent.id()) {
            signal(c, libc::SIGSTOP);
            if !proc_state(c).is_some_and(|(s, pp)| pp == parent.id() && s == 'T') {
                continue;
            }
            // Stopped between fork and exec it is still a copy of the loop (whose spawn waits
            // for the exec): only a run that is `report --once` already counts.
            let cmdline = std::fs::read(format!("/proc/{c}/cmdline")).unwrap_or_default();
            if cmdline.split(|b| *b == 0).any(|w| w == b"--once") {
                let _ = std::fs::remove_file(dir.join("b.json"));
                return (parent, c);
            }
            signal(c, libc::SIGCONT);
        }
        std::thread::yield_now();
    }
    let _ = parent.kill();
    let _ = parent.wait();
    panic!("no run of the report loop was seen");
}

/// Gone, or a zombie that no longer has the loop as its parent (nobody reaps in some
/// containers).
fn wait_until_dead(pid: u32, parent: u32) -> bool {
    for _ in 0..100_000 {
        match proc_state(pid) {
            None => return true,
            Some(('Z', pp)) if pp != parent => return true,
            _ => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
    false
}

/// Row 8: TERM, INT or HUP to the loop reaches the running child, which is reaped before the
/// loop exits 128 + N: once the loop is gone, so is its run, even a stopped one. SIGKILL to
/// the loop takes the child along (PR_SET_PDEATHSIG): continued, the run ends without
/// finishing its report.
#[test]
fn report_loop_leaves_no_run_behind() {
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGKILL] {
        let d = tempfile::tempdir().expect("tmp");
        let (mut parent, child) = report_loop_with_a_stopped_run(d.path());
        signal(parent.id(), sig);
        let status = parent.wait().expect("wait");
        let alive = proc_state(child).is_some_and(|(s, _)| s != 'Z');
        if sig == libc::SIGKILL {
            assert_eq!(status.signal(), Some(libc::SIGKILL));
            signal(child, libc::SIGCONT);
            let dead = wait_until_dead(child, parent.id());
            if !dead {
                signal(child, libc::SIGKILL);
            }
            assert!(dead, "the run {child} outlived the killed loop");
            assert!(
                !d.path().join("b.json").exists(),
                "the run went on after the loop was killed"
            );
        } else {
            if alive {
                signal(child, libc::SIGKILL);
            }
            assert!(!alive, "signal {sig}: the run {child} outlived the loop");
            assert_eq!(status.code(), Some(128 + sig), "signal {sig}: {status:?}");
        }
    }
}

/// Row 10: with `--svg -` stdout holds the SVG alone; the matrix goes to -o or nowhere.
#[test]
fn topo_svg_on_stdout_alone() {
    let d = tempfile::tempdir().expect("tmp");
    let root = igx();
    let o = daqtune_in(d.path(), &["topo", "--root", &root, "--svg", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("<svg") || out.starts_with("<?xml"),
        "{out:.80}"
    );
    assert!(out.trim_end().ends_with("</svg>"), "text after the SVG");
    let o = daqtune_in(
        d.path(),
        &["topo", "--root", &root, "--svg", "-", "-o", "m.txt"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("<svg") || stdout(&o).starts_with("<?xml"));
    let matrix = std::fs::read_to_string(d.path().join("m.txt")).expect("m.txt");
    let plain = daqtune_in(d.path(), &["topo", "--root", &root]);
    assert_eq!(matrix, stdout(&plain));
    // Both asked for on stdout: refused rather than mixed.
    let o = daqtune_in(
        d.path(),
        &["topo", "--root", &root, "-f", "json", "--svg", "-"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("-o FILE"), "{}", stderr(&o));
}

/// Row 17: `.tar.zst` in any case is an archive; another archive name is refused (exit 2,
/// nothing made); a directory snapshot needs a new or empty directory, and an existing file
/// is not replaced by one.
#[test]
fn snapshot_output_names() {
    let d = tempfile::tempdir().expect("tmp");
    let root = igx();
    for name in ["h.tar.gz", "h.zip", "h.tgz", "h.tar"] {
        let o = daqtune_in(d.path(), &["snapshot", "--root", &root, "-o", name]);
        assert_eq!(o.status.code(), Some(2), "{name}");
        assert!(
            stderr(&o).contains(".tar.zst archives only"),
            "{}",
            stderr(&o)
        );
        assert!(!d.path().join(name).exists(), "{name} was made");
    }
    let o = daqtune_in(d.path(), &["snapshot", "--root", &root, "-o", "h.TAR.ZST"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let bytes = std::fs::read(d.path().join("h.TAR.ZST")).expect("archive");
    assert_eq!(&bytes[..4], &[0x28, 0xb5, 0x2f, 0xfd], "a zstd frame");
    // The archive replays.
    let o = daqtune_in(
        d.path(),
        &["check", "--root", "h.TAR.ZST", "-p", "igx-orin"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Directory outputs: an existing file, a non-empty directory, a symlink are refused.
    std::fs::write(d.path().join("file"), "keep").expect("file");
    std::fs::create_dir(d.path().join("full")).expect("dir");
    std::fs::write(d.path().join("full/x"), "keep").expect("file");
    symlink(d.path().join("empty2"), d.path().join("link")).expect("symlink");
    for name in ["file", "full", "link"] {
        let o = daqtune_in(d.path(), &["snapshot", "--root", &root, "-o", name]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("new or empty directory"),
            "{}",
            stderr(&o)
        );
    }
    assert_eq!(
        std::fs::read_to_string(d.path().join("file")).expect("file"),
        "keep"
    );
    std::fs::create_dir(d.path().join("empty")).expect("dir");
    let o = daqtune_in(d.path(), &["snapshot", "--root", &root, "-o", "empty"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(d.path().join("empty/daqtune").is_dir() || d.path().join("empty/proc").is_dir());
}

/// Output flags: `-f/--format` picks the format, `-o FILE` writes it, `diff --json` is kept
/// as an alias of `diff -f json`.
#[test]
fn diff_formats_and_output_file() {
    let d = tempfile::tempdir().expect("tmp");
    let a = fixture("igx-tuned").to_string_lossy().into_owned();
    let b = fixture("igx-untuned").to_string_lossy().into_owned();
    let p = ["-p", "igx-orin"];
    let f = daqtune_in(
        d.path(),
        &[&["diff", &a, &b, "-f", "json"][..], &p].concat(),
    );
    assert_eq!(f.status.code(), Some(1), "{}", stderr(&f));
    let alias = daqtune_in(d.path(), &[&["diff", &a, &b, "--json"][..], &p].concat());
    assert_eq!(stdout(&f), stdout(&alias));
    let v: serde_json::Value = serde_json::from_str(&stdout(&f)).expect("json");
    assert!(v.as_array().is_some_and(|a| !a.is_empty()), "{v}");
    let o = daqtune_in(
        d.path(),
        &[&["diff", &a, &b, "-f", "json", "-o", "d.json"][..], &p].concat(),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty());
    assert_eq!(
        std::fs::read_to_string(d.path().join("d.json")).expect("d.json"),
        stdout(&f)
    );
}

/// `diff` names its inputs as BEFORE/AFTER (not `--root`), says an error once, and refuses a
/// JSON document of another schema by name.
#[test]
fn diff_inputs_are_named_and_checked() {
    let d = tempfile::tempdir().expect("tmp");
    let root = igx();
    let o = daqtune_in(
        d.path(),
        &["check", "--root", &root, "-f", "json", "-o", "a.json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = daqtune_in(d.path(), &["diff", "a.json", "missing.json"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("AFTER missing.json"), "{err}");
    assert!(!err.contains("--root"), "{err}");
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    let o = daqtune_in(d.path(), &["qualify", "--root", &root, "--json", "q.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = daqtune_in(d.path(), &["diff", "a.json", "q.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("daqtune.qualify/v1"), "{}", stderr(&o));
    std::fs::write(d.path().join("x.json"), "{\"checks\": []}").expect("x");
    let o = daqtune_in(d.path(), &["diff", "x.json", "a.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no \"schema\""), "{}", stderr(&o));
    let o = daqtune_in(d.path(), &["diff", "a.json", "a.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

fn help(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}");
    stdout(&o)
}

/// Help: each subcommand lists the host and profile options that mean something to it, and
/// `diff`'s AFTER is documented.
#[test]
fn help_lists_only_meaningful_options() {
    let has = |h: &str, flag: &str| h.contains(&format!("--{flag}"));
    for (cmd, root, profile, cache) in [
        ("check", true, true, true),
        ("plan", true, true, true),
        ("report", true, true, true),
        ("topo", true, false, false),
        ("revert", true, false, false),
        ("diff", false, true, false),
        ("explain", false, false, false),
        ("profiles", false, false, false),
        ("selftest", false, true, false),
    ] {
        let h = help(&[cmd, "--help"]);
        assert_eq!(has(&h, "root"), root, "{cmd} --root: {h}");
        assert_eq!(has(&h, "profile"), profile, "{cmd} --profile: {h}");
        assert_eq!(has(&h, "no-cache"), cache, "{cmd} --no-cache: {h}");
    }
    let h = help(&["diff", "--help"]);
    assert!(h.contains("AFTER") && h.contains("The later side"), "{h}");
    // Given before the subcommand, they still reach it.
    let o = run(&["--root", &igx(), "-p", "igx-orin", "check", "-f", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// tune_system.py's `--check NAME` after a global option.
#[test]
fn legacy_check_after_a_global_option() {
    let o = run(&["--root", &igx(), "--check", "mrrs"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("pcie.mrrs"), "{}", stdout(&o));
}

/// `daqtune man` is daqtune(8), the page the generated units name, with the subcommands'
/// options.
#[test]
fn man_page_is_section_8_with_subcommand_options() {
    let page = stdout(&run(&["man"]));
    assert!(page.contains("\n.TH daqtune 8 "), "{:.200}", page);
    assert!(page.contains(".SS \"daqtune check\""));
    assert!(page.contains("nfd\\-expiry"), "check's options missing");
    assert!(page.contains("redact"), "snapshot's options missing");
    let units = include_str!("../../../units/src/systemd.rs");
    assert!(units.contains("man:daqtune(8)"));
}

/// The environment: empty means unset, and DAQTUNE_PROFILE reaches every command that takes
/// --profile.
#[test]
fn environment_settings() {
    let d = tempfile::tempdir().expect("tmp");
    let root = igx();
    // Empty DAQTUNE_ROOT is no root: `explain` runs, `check --root` is the given one.
    let o = Command::new(bin())
        .args(["check", "--root", &root, "-f", "json"])
        .env("DAQTUNE_ROOT", "")
        .env_remove("DAQTUNE_PROFILE")
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Empty report settings are "not this output" / the default.
    let o = Command::new(bin())
        .args(["report", "--root", &root, "--json", "r.json"])
        .current_dir(d.path())
        .env("DAQTUNE_REPORT_FAIL_ON", "")
        .env("DAQTUNE_REPORT_NFD_EXPIRY", "")
        .env("DAQTUNE_REPORT_NFD", "")
        .env("DAQTUNE_ROOT", "")
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(d.path().join("r.json").is_file());
    // DAQTUNE_PROFILE: check, plan and generate use it; --profile wins over it.
    let with_env = |args: &[&str]| {
        Command::new(bin())
            .args(args)
            .env("DAQTUNE_PROFILE", "generic-dgpu")
            .env_remove("DAQTUNE_ROOT")
            .output()
            .expect("run")
    };
    let o = with_env(&["check", "--root", &root, "-f", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["profile"], "generic-dgpu", "{}", stderr(&o));
    let o = with_env(&["check", "--root", &root, "-f", "json", "-p", "igx-orin"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["profile"], "igx-orin");
    let o = with_env(&["plan", "--root", &root, "--runtime-only", "-f", "json"]);
    assert!(
        stdout(&o).contains("generic-dgpu") || stderr(&o).contains("generic-dgpu"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    let o = with_env(&["generate", "grub-dropin", "--root", &root]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("generic-dgpu"), "{}", stdout(&o));
}

/// Columns are as wide as their longest entry: `daqtune.artifacts` does not push its row out
/// of line.
#[test]
fn text_columns_fit_long_ids() {
    let list = stdout(&run(&["explain", "--list"]));
    let starts: std::collections::BTreeSet<usize> = list
        .lines()
        .map(|l| {
            let id_end = l.find(' ').expect("id");
            id_end + l[id_end..].chars().take_while(|c| *c == ' ').count()
        })
        .collect();
    assert_eq!(starts.len(), 1, "area column starts at {starts:?}:\n{list}");
    let o = run(&["check", "--root", &igx(), "-v"]);
    let text = stdout(&o);
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .collect();
    let subject_at: std::collections::BTreeSet<usize> = rows
        .iter()
        .map(|l| {
            let t = &l[2..];
            let st = t.find(' ').expect("status");
            let rest = &t[st..];
            let lead = rest.chars().take_while(|c| *c == ' ').count();
            let id_end = rest[lead..].find(' ').expect("id") + lead;
            2 + st + id_end + rest[id_end..].chars().take_while(|c| *c == ' ').count()
        })
        .collect();
    assert_eq!(subject_at.len(), 1, "{subject_at:?}:\n{text}");
}

/// An I/O error on a file the user named has no line and column to give.
#[test]
fn io_errors_carry_no_position() {
    for args in [
        [
            "check",
            "--root",
            &igx(),
            "--profile",
            "/nonexistent/p.yaml",
        ],
        ["check", "--root", &igx(), "--config", "/nonexistent/a.yaml"],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2));
        let err = stderr(&o);
        assert!(err.contains("/nonexistent/"), "{err}");
        assert!(!err.contains(":1:1:"), "{err}");
        assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    }
}

/// Row 1's "later outputs never written": a failed output is exit 2 with its reason, and the
/// outputs after it are still written.
#[test]
fn a_failed_output_does_not_stop_the_later_ones() {
    let d = tempfile::tempdir().expect("tmp");
    let root = igx();
    std::fs::write(d.path().join("blocked"), "a file, not a directory").expect("file");
    for cmd in ["qualify", "check"] {
        let json = format!("{cmd}.json");
        let o = daqtune_in(
            d.path(),
            &[
                cmd,
                "--root",
                &root,
                "--junit",
                "blocked/q.xml",
                "--json",
                &json,
            ],
        );
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        assert!(stderr(&o).contains("blocked/q.xml"), "{}", stderr(&o));
        assert!(d.path().join(&json).is_file(), "{cmd}: {json} not written");
    }
}

/// `daqtune check` with `COLUMNS` set, stdout a pipe (so the width comes from COLUMNS alone).
fn check_at(root: &str, columns: Option<&str>, extra: &[&str]) -> String {
    let mut c = Command::new(bin());
    c.args(["check", "--root", root])
        .args(extra)
        .env("NO_COLOR", "1")
        .env_remove("DAQTUNE_ROOT")
        .env_remove("DAQTUNE_PROFILE")
        .stdin(Stdio::null());
    match columns {
        Some(n) => c.env("COLUMNS", n),
        None => c.env_remove("COLUMNS"),
    };
    let o = c.output().expect("run daqtune");
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "{:?}: {}",
        o.status,
        stderr(&o)
    );
    stdout(&o)
}

/// Every run of whitespace as one space: wrapped text read back as the words it holds.
fn words(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Issue 46 item 4: `check` reads in a terminal. With COLUMNS=100 no line of the report on
/// the fixture roots is wider than 100 columns (it had lines of 300-600), without and with
/// -v; -v still holds every verdict's whole message, fix and subject as JSON has them (the
/// wrapping only moves words to the next line), and a folded line says how to see the rest.
/// Through a pipe without COLUMNS every line stays whole, as before.
#[test]
fn check_fits_the_terminal_width_and_verbose_keeps_every_word() {
    for name in ["spark", "igx-tuned", "igx-untuned", "x86-2s", "server-pix"] {
        let root = fixture(name).to_string_lossy().into_owned();
        let plain = check_at(&root, Some("100"), &[]);
        let verbose = check_at(&root, Some("100"), &["-v"]);
        for (mode, text) in [("default", &plain), ("-v", &verbose)] {
            for l in text.lines() {
                assert!(
                    l.chars().count() <= 100,
                    "{name} {mode}: {} columns: {l:?}",
                    l.chars().count()
                );
            }
        }
        let whole = check_at(&root, None, &[]);
        assert!(
            whole.lines().any(|l| l.chars().count() > 100),
            "{name}: a pipe without COLUMNS keeps lines whole"
        );
        let json = check_at(&root, Some("100"), &["--format", "json"]);
        let j: serde_json::Value = serde_json::from_str(&json).expect("json");
        let flat = words(&verbose);
        for v in j["checks"].as_array().expect("checks") {
            for key in ["message", "subject"] {
                let t = v[key].as_str().expect(key);
                assert!(
                    flat.contains(&words(t)),
                    "{name}: -v lacks the {key} {t:?} of {}",
                    v["id"]
                );
            }
            let problem = matches!(v["status"].as_str(), Some("warn" | "fail" | "error"));
            if let (true, Some(fix)) = (problem, v["fix"].as_str()) {
                assert!(
                    flat.contains(&words(fix)),
                    "{name}: -v lacks the fix {fix:?}"
                );
            }
        }
        // A folded line names the way to its other subjects.
        let pw = words(&plain);
        let mut folded = 0;
        for (at, _) in pw.match_indices("(and ") {
            let tail = &pw[at + 5..];
            let digits = tail.chars().take_while(char::is_ascii_digit).count();
            if digits > 0 && tail[digits..].starts_with(" more") {
                folded += 1;
                assert!(
                    tail[digits..].starts_with(" more; -v shows each)"),
                    "{name}: {}",
                    &pw[at..(at + 60).min(pw.len())]
                );
            }
        }
        assert!(folded > 0, "{name}: no folded line to judge");
        assert!(
            !flat.contains("more like it"),
            "{name}: -v shows each message"
        );
    }
}

/// Issue 46 item 4 for `plan`: with COLUMNS=100 no line of the IGX plan is wider than 100
/// columns (its GRUB line is ~200), a file's long line continues on `  ↪ ` lines, and the
/// words are all there; through a pipe without COLUMNS the lines stay whole.
#[test]
fn plan_fits_the_terminal_width() {
    let root = fixture("igx-untuned").to_string_lossy().into_owned();
    let plan = |cols: Option<&str>| {
        let mut c = Command::new(bin());
        c.args(["plan", "--root", &root])
            .env("NO_COLOR", "1")
            .env_remove("DAQTUNE_ROOT")
            .env_remove("DAQTUNE_PROFILE")
            .stdin(Stdio::null());
        match cols {
            Some(n) => c.env("COLUMNS", n),
            None => c.env_remove("COLUMNS"),
        };
        let o = c.output().expect("run daqtune");
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stdout(&o)
    };
    let whole = plan(None);
    let fitted = plan(Some("100"));
    assert!(whole.lines().any(|l| l.chars().count() > 100));
    for l in fitted.lines() {
        assert!(l.chars().count() <= 100, "{l:?}");
    }
    let grub = whole
        .lines()
        .find(|l| l.starts_with("  +GRUB_CMDLINE_LINUX="))
        .expect("the drop-in's line");
    assert!(fitted.contains("\n  ↪ "), "{fitted}");
    let unmarked = |t: &str| words(&t.replace("  ↪ ", " "));
    assert!(unmarked(&fitted).contains(&words(grub)), "{fitted}");
    // A word wider than a line (the plan's --only list) is cut where the line ends: nothing
    // lost, one space more.
    assert_eq!(
        unmarked(&fitted).replace(' ', ""),
        words(&whole).replace(' ', "")
    );
}
