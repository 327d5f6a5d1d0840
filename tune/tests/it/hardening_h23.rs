//! Issue 23, rows 6, 7, 11, 15, 16: bounds on hostile inputs (exit 2 with the position), fix
//! lines safe to paste, signals during unpacking, roots that hold no host, diff of a redacted
//! snapshot. Through the binary, on fixture roots copied into each test's own temporary
//! directory. The red-team inputs are made by the small generators below and in
//! tests/support/redteam.rs (the bench script `bench/redteam.sh` builds the same shapes at full
//! size and times them). What the engine judges of them (rows 3 and 11: a CPU-list bomb, 2000
//! queues on one CPU) is engine/tests/hostile_inputs.rs.

use crate::common;
use crate::common::path_str as s;
use crate::redteam;
use common::*;
use redteam::queues_config;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `daqtune ARGS`, which must end in a verdict (exit 0 or 1), not an error or a hang.
fn judged(args: &[&str]) -> Output {
    let out = run(args);
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{args:?}: {}",
        stderr(&out)
    );
    out
}

/// Row 15: an empty (or mistyped) directory is not a host that passes with 21 skips.
#[test]
fn a_root_holding_no_host_exits_2() {
    let d = tempfile::tempdir().expect("tmp");
    let e = d.path().join("e");
    std::fs::create_dir(&e).expect("mkdir");
    for cmd in ["check", "topo"] {
        let out = run(&[cmd, "--root", s(&e)]);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("holds no host (no proc/ and no sys/)"),
            "{cmd}: {}",
            stderr(&out)
        );
    }
}

/// A copy of the recorded H200 host with hostile host strings: a GPU UUID that is a shell
/// command, and a hostname and DMI product name holding terminal escape sequences.
fn hostile_gpu_root(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("host");
    std::fs::create_dir_all(&root).expect("mkdir");
    copy_tree(&fixture("gpu-h200"), &root);
    let gj = root.join("daqtune/gpu.json");
    let facts = std::fs::read_to_string(&gj).expect("facts");
    let uuid = facts
        .split('"')
        .find(|s| s.starts_with("GPU-"))
        .expect("uuid")
        .to_string();
    std::fs::write(&gj, facts.replace(&uuid, "GPU-1; rm -rf / #")).expect("write");
    let dmi = root.join("sys/class/dmi/id");
    std::fs::create_dir_all(&dmi).expect("mkdir");
    std::fs::write(dmi.join("product_name"), "IGX\x1b[2J\x1b[H\n").expect("dmi");
    std::fs::create_dir_all(root.join("proc/sys/kernel")).expect("mkdir");
    std::fs::write(
        root.join("proc/sys/kernel/hostname"),
        "evil\x1b]0;owned\x07\n",
    )
    .expect("hostname");
    root
}

/// Row 6: the fix line quotes the UUID; no control character reaches the terminal; the JSON
/// report keeps the exact strings.
#[test]
fn hostile_uuid_and_dmi_strings_are_quoted_and_escaped() {
    let d = tempfile::tempdir().expect("tmp");
    let root = hostile_gpu_root(d.path());
    let out = judged(&[
        "check",
        "--root",
        s(&root),
        "--profile",
        "generic-dgpu",
        "gpu.clocks",
    ]);
    let text = stdout(&out);
    assert!(
        !text.contains('\x1b') && !text.contains('\x07'),
        "control characters printed: {text:?}"
    );
    assert!(text.contains("evil\\x1b]0;owned\\x07"), "{text}");
    assert!(text.contains("IGX\\x1b[2J"), "{text}");
    let fixes: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("nvidia-smi -i"))
        .collect();
    assert!(!fixes.is_empty(), "no nvidia-smi fix line in: {text}");
    for f in &fixes {
        assert!(f.contains("nvidia-smi -i 'GPU-1; rm -rf / #' -"), "{f}");
    }

    let out = run(&[
        "check",
        "--root",
        s(&root),
        "--profile",
        "generic-dgpu",
        "--format",
        "json",
        "gpu.clocks",
    ]);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(r["host"]["hostname"], "evil\x1b]0;owned\x07");
    let fix = r["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter_map(|c| c["fix"].as_str())
        .find(|f| f.contains("nvidia-smi"))
        .expect("fix")
        .to_string();
    assert!(fix.contains("-i 'GPU-1; rm -rf / #' -lgc"), "{fix}");
}

/// Row 16: a redacted snapshot of a host compared with the unredacted one.
#[test]
fn diff_of_redacted_and_plain_snapshots_matches_gpus_by_bus_id() {
    let d = tempfile::tempdir().expect("tmp");
    let (plain, red) = (d.path().join("plain"), d.path().join("red"));
    let src = fixture("gpu-h200");
    for (out, redact) in [(&plain, false), (&red, true)] {
        let mut args = vec![
            "snapshot",
            "--root",
            s(&src),
            "--profile",
            "generic-dgpu",
            "-o",
            s(out),
        ];
        if redact {
            args.push("--redact");
        }
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let o = run(&["diff", s(&plain), s(&red), "--profile", "generic-dgpu"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o), "no differences\n");
    assert!(
        stderr(&o).contains("matched by PCI bus id"),
        "{}",
        stderr(&o)
    );
}

/// Row 11: a profile nested 100,000 deep and a DAQIRI configuration with 40,000 queues are
/// refused before parsing, with file:line:column, exit 2.
#[test]
fn nesting_bomb_and_forty_thousand_queues_exit_2_with_position() {
    let d = tempfile::tempdir().expect("tmp");
    let prof = d.path().join("bomb.yaml");
    std::fs::write(
        &prof,
        format!("name: bomb\ncpu:\n  isolated: {}\n", "[".repeat(100_000)),
    )
    .expect("write");
    let out = run(&[
        "check",
        "--root",
        s(&fixture("x86-2s")),
        "--profile",
        s(&prof),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("{}:3:43: nested more than 32 levels", s(&prof))),
        "{}",
        stderr(&out)
    );

    let cfg = d.path().join("app.yaml");
    std::fs::write(&cfg, queues_config(40_000)).expect("write");
    let out = run(&[
        "check",
        "--root",
        s(&fixture("x86-2s")),
        "--profile",
        "generic-dgpu",
        "--config",
        s(&cfg),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("{}:{}:", s(&cfg), 11 + 4 * 4096)),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("more than 4096 entries"),
        "{}",
        stderr(&out)
    );
}

/// An archive with `files` entries of 4 KiB under sys/ (a host root by shape): tens of
/// thousands of files take the unpacker long enough to be caught in the middle.
fn big_archive(path: &Path, files: usize) {
    let f = std::fs::File::create(path).expect("create");
    let enc = zstd::Encoder::new(f, 1).expect("zstd");
    let mut tar = tar::Builder::new(enc);
    let body = vec![b'x'; 4096];
    for i in 0..files {
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut h, format!("sys/d{}/f{i}", i % 64), &body[..])
            .expect("append");
    }
    let enc = tar.into_inner().expect("tar");
    enc.finish().expect("finish").flush().expect("flush");
}

fn names_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Row 7: INT, TERM or HUP while `check --root ARCHIVE` unpacks: the unpacker stops, then
/// the directory goes, and the exit status is 128 + the signal. The test waits for the event
/// "files are being unpacked" (the directory holds some), never for a time.
#[test]
fn a_signal_during_unpacking_leaves_no_temporary_directory() {
    let d = tempfile::tempdir().expect("tmp");
    let archive = d.path().join("big.tar.zst");
    big_archive(&archive, 60_000);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let tmp = d.path().join(format!("tmp{sig}"));
        std::fs::create_dir(&tmp).expect("mkdir");
        let mut child = Command::new(bin())
            .args(["check", "--root", s(&archive)])
            .env("NO_COLOR", "1")
            .env("TMPDIR", &tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // Until the unpack directory holds files (or the run ended: then nothing to catch,
        // and the child, already reaped, is not signalled).
        let mut running = true;
        while running {
            running = child.try_wait().expect("wait").is_none();
            let unpacking = names_in(&tmp).iter().any(|n| {
                n.starts_with("daqtune-snapshot-") && names_in(&tmp.join(n).join("sys")).len() > 4
            });
            if unpacking {
                break;
            }
            std::thread::yield_now();
        }
        if running {
            // SAFETY: kill(2) on the child this test started and has not reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, sig) };
        }
        let out = child.wait_with_output().expect("wait");
        assert!(
            names_in(&tmp).is_empty(),
            "signal {sig}: left {:?}; {}",
            names_in(&tmp),
            stderr(&out)
        );
        if out.status.code() == Some(128 + sig) {
            assert!(
                stderr(&out).contains("temporary files removed"),
                "{}",
                stderr(&out)
            );
        }
    }
}

/// Smaller items: the path of a missing extlinux.conf is printed once; a clock verdict reads
/// "GPU-... SM clock held", not "SM SM clock".
#[test]
fn messages_say_things_once() {
    let out = run(&[
        "generate",
        "extlinux",
        "--root",
        s(&fixture("x86-2s")),
        "-p",
        "generic-dgpu",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).matches("/boot/extlinux/extlinux.conf").count(),
        1,
        "{}",
        stderr(&out)
    );
    let out = run(&[
        "check",
        "--root",
        s(&fixture("gpu-h200")),
        "--profile",
        "generic-dgpu",
        "-v",
        "gpu.clocks",
    ]);
    let text = stdout(&out);
    assert!(text.contains(" SM clock not held"), "{text}");
    assert!(
        !text.contains("SM SM") && !text.contains("memory memory"),
        "{text}"
    );
}
