//! What apply and `generate` persist, through the engine's API; moved from
//! tune/tests/apply_acceptance.rs (issue 24):
//! - a NetworkManager profile of the host's own is modified, not fought with a second one;
//! - every `generate` kind renders (and an override is validated before it reaches a file);
//! - issue 15: units and the udev rule run daqtune itself, so `plan`, `apply` and `generate`
//!   never write one that calls a binary the host does not have (default: the installed
//!   binary in the host root, /usr/bin/daqtune then /usr/local/bin/daqtune; `--exe` must name a
//!   regular executable file; with none, a plan with such artifacts is refused and the
//!   settings that need no binary still go ahead when asked for alone);
//! - issue 15: `daqtune.artifacts` judges what daqtune wrote (the journal of the runs in
//!   effect, and the fixed names): present, enabled, its binary executable, and the unit's last
//!   run (under a root: the snapshot's record daqtune/units.json; without one, skip, never
//!   pass).

use crate::common;

use common::drive::*;
use common::testroot::*;
use common::{check_json_root, verdicts};
use daqtune_engine::apply::{ApplyOptions, Selection};
use daqtune_engine::hostio::setters::FsWriter;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

#[test]
fn existing_networkmanager_profile_is_not_fought() {
    let root = prepared("spark", add_spark_pci);
    let r = root.path();
    let dir = r.join("etc/NetworkManager/system-connections");
    std::fs::create_dir_all(&dir).expect("mkdir");
    // The seed's nmcli profile for the TX port, without an MTU yet.
    let theirs = "[connection]\nid=daqiri-tx\ntype=ethernet\ninterface-name=enp1s0f0np0\n\n[ipv4]\naddress1=1.1.1.1/24\nmethod=manual\n";
    std::fs::write(dir.join("daqiri-tx.nmconnection"), theirs).expect("write");
    let (code, out) = apply(r, "dgx-spark", &only(&["nic.mtu"]));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("nmcli connection modify daqiri-tx ethernet.mtu 9000"),
        "{out}"
    );
    assert_eq!(
        read(
            r,
            "etc/NetworkManager/system-connections/daqiri-tx.nmconnection"
        ),
        theirs
    );
    assert!(
        !dir.join("daqiri-enp1s0f0np0.nmconnection").exists(),
        "no second profile for the same port"
    );
    assert!(dir.join("daqiri-enp1s0f1np1.nmconnection").exists());
}

/// Issue 45 item 6: a keyfile that owns a port keeps the port's address. The Spark fixture's
/// enp1s0f1np1 holds 10.100.3.1/24 (its /proc/net/fib_trie and connected route): before,
/// daqtune's keyfile for it said `method=disabled`, and NetworkManager took the address away.
/// A profile's `nic.addresses` are written as the seed's `ipv4.method manual` profile; revert
/// removes the keyfile again.
#[test]
fn networkmanager_keyfiles_keep_or_set_static_addresses() {
    let root = prepared("spark", add_spark_pci);
    let r = root.path();
    std::fs::create_dir_all(r.join("etc/NetworkManager/system-connections")).expect("mkdir");
    let profile = r.join("static.yaml");
    std::fs::write(
        &profile,
        "name: static\nextends: dgx-spark\nnic:\n  addresses:\n    enP2p1s0f1np1: [192.168.101.10/24]\n",
    )
    .expect("profile");
    let (code, out) = apply(r, &profile.display().to_string(), &only(&["nic.mtu"]));
    assert_eq!(code, 0, "{out}");
    let kept = read(
        r,
        "etc/NetworkManager/system-connections/daqiri-enp1s0f1np1.nmconnection",
    );
    assert!(
        kept.contains("[ipv4]\nmethod=manual\naddress1=10.100.3.1/24\n"),
        "{kept}"
    );
    assert!(!kept.contains("method=disabled"), "{kept}");
    let given = read(
        r,
        "etc/NetworkManager/system-connections/daqiri-enP2p1s0f1np1.nmconnection",
    );
    assert!(
        given.contains("[ipv4]\nmethod=manual\naddress1=192.168.101.10/24\n"),
        "{given}"
    );
    let (code, out) = revert(r);
    assert_eq!(code, 0, "{out}");
    assert!(!r
        .join("etc/NetworkManager/system-connections/daqiri-enp1s0f1np1.nmconnection")
        .exists());
    // A bad address is the profile's error (exit 2), with where it is.
    std::fs::write(
        &profile,
        "name: static\nextends: dgx-spark\nnic:\n  addresses:\n    enP2p1s0f1np1: [192.168.101.10]\n",
    )
    .expect("profile");
    let e = try_apply(r, &profile.display().to_string(), &only(&["nic.mtu"]))
        .expect_err("bad address refused");
    assert!(e.to_string().contains("192.168.101.10"), "{e}");
}

#[test]
fn generate_every_kind() {
    let igx = prepared("igx-untuned", add_igx_pci);
    let spark = prepared("spark", add_spark_pci);
    let kinds = [
        "kernel-args",
        "grub-dropin",
        "udev-mrrs",
        "mount-unit",
        "governor-unit",
        "gpu-clocks-unit",
        "acs-unit",
        "modules-load",
        "sysctl",
        "netplan",
        "nm",
        "networkd-link",
        "thp-tmpfiles",
        "watchdog-sysctl",
        "timer-migration-sysctl",
        "stat-interval-sysctl",
        "ksm-tmpfiles",
    ];
    for (root, profile) in [(igx.path(), "igx-orin"), (spark.path(), "dgx-spark")] {
        for k in kinds {
            let out =
                try_generate(root, profile, k).unwrap_or_else(|e| panic!("{k} on {profile}: {e}"));
            assert!(!out.trim().is_empty(), "{k}");
            if k != "kernel-args" {
                assert!(out.contains("Written by daqtune"), "{k}: {out}");
            }
        }
        // No extlinux.conf on these roots: a clear error.
        let e = try_generate(root, profile, "extlinux");
        assert!(e.is_err(), "{e:?}");
    }
    // Overrides are validated before they reach a file.
    let r = spark.path();
    let a = daqtune_engine::apply::GenerateOptions {
        interfaces: vec!["eth0\nExecStart=/bin/sh".into()],
        ..kind("nm")
    };
    let e = try_generate_with(r, "dgx-spark", &a);
    assert!(e.is_err(), "{e:?}");
    let a = daqtune_engine::apply::GenerateOptions {
        exe: Some("/usr/bin/daqtune --x".into()),
        ..kind("governor-unit")
    };
    let e = try_generate_with(igx.path(), "igx-orin", &a);
    assert!(e.is_err(), "{e:?}");
}

fn root_without_binary() -> tempfile::TempDir {
    let root = prepared("igx-untuned", add_igx_pci);
    std::fs::remove_file(root.path().join("usr/bin/daqtune")).expect("rm");
    root
}

#[test]
fn a_plan_with_units_is_refused_without_an_installed_binary() {
    let root = root_without_binary();
    let r = root.path();
    let before = snapshot(r, &[]);
    let g = globals(r, "igx-orin");
    let dry = ApplyOptions {
        dry_run: true,
        yes: true,
        ..Default::default()
    };
    let runs: [(&str, Result<String, String>); 3] = [
        (
            "plan",
            try_plan(r, "igx-orin", &Selection::default()).map_err(|e| e.to_string()),
        ),
        (
            "apply",
            try_apply(r, "igx-orin", &Selection::default())
                .map(|(_, t)| t)
                .map_err(|e| e.to_string()),
        ),
        (
            "apply --dry-run",
            try_apply_with(&g, &dry, &mut FsWriter::new())
                .map(|(_, t)| t)
                .map_err(|e| e.to_string()),
        ),
    ];
    for (what, res) in runs {
        // A plan is a preview: it shows the units as they would run the packaged binary
        // and says that apply refuses them; apply (and its dry run) refuses.
        let t = if what == "plan" {
            let t = res.unwrap_or_else(|e| panic!("plan: {e}"));
            assert!(
                t.contains("apply will refuse: no installed daqtune binary"),
                "{t}"
            );
            assert!(
                t.contains("/etc/systemd/system/daqtune-gpu-clocks.service (new"),
                "{t}"
            );
            assert!(t.contains("RUN+=\"/usr/bin/daqtune apply"), "{t}");
            t
        } else {
            res.expect_err(what)
        };
        for want in [
            "no installed daqtune binary (looked for /usr/bin/daqtune, /usr/local/bin/daqtune)",
            "/etc/udev/rules.d/90-daqtune-mrrs.rules (pcie.mrrs)",
            "/etc/systemd/system/daqtune-gpu-clocks.service (gpu.clocks)",
            "sudo apt install ./target/debian/daqtune_*.deb",
            "cargo install --path tune --root /usr",
            "--exe PATH",
            "--runtime-only",
            "--only ",
        ] {
            assert!(t.contains(want), "{what}: `{want}` in {t}");
        }
        // The binary-free settings of this plan are offered; those needing it are not.
        // (In the message, not in a unit the plan shows.)
        let only = t
            .split("refusing to write units")
            .nth(1)
            .unwrap_or(&t)
            .split("--only ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .unwrap_or("");
        assert!(only.contains("kernel.cmdline"), "{t}");
        assert!(
            !only.contains("pcie.mrrs") && !only.contains("gpu.clocks"),
            "{t}"
        );
        assert!(diff_snapshots(&before, &snapshot(r, &[])).is_empty());
    }
    for k in ["governor-unit", "gpu-clocks-unit", "acs-unit", "udev-mrrs"] {
        let e = try_generate(r, "igx-orin", k).expect_err(k);
        assert!(e.to_string().contains("no installed daqtune binary"), "{e}");
    }
    // Artifacts that run no binary are still printed.
    generate(r, "igx-orin", "grub-dropin");
}

#[test]
fn binary_free_settings_and_runtime_changes_go_ahead_without_a_binary() {
    let root = root_without_binary();
    let r = root.path();
    let (code, out) = apply(r, "igx-orin", &only(&["kernel.cmdline", "hugepages"]));
    assert_eq!(code, 0, "{out}");
    assert!(r.join("etc/default/grub.d/99-daqtune.cfg").exists());
    // The runtime changes alone need no binary either (MRRS now, no udev rule).
    let runtime = Selection {
        runtime_only: true,
        ..Default::default()
    };
    let (code, out) = apply(r, "igx-orin", &runtime);
    assert_eq!(code, 0, "{out}");
    assert_eq!((devctl(r, "0005:03:00.0") >> 12) & 7, 5);
    assert!(!r.join("etc/udev/rules.d/90-daqtune-mrrs.rules").exists());
    assert!(!r
        .join("etc/systemd/system/daqtune-gpu-clocks.service")
        .exists());
    let (code, out) = revert(r);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn exe_must_be_an_executable_file_in_the_root() {
    let root = root_without_binary();
    let r = root.path();
    let opt = r.join("opt/daqtune/bin/daqtune");
    std::fs::create_dir_all(opt.parent().expect("p")).expect("mkdir");
    std::fs::write(&opt, b"#!/bin/sh\n").expect("w");
    std::fs::set_permissions(&opt, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let before = snapshot(r, &[]);
    let exe = |e: &str| Selection {
        exe: Some(e.into()),
        ..Default::default()
    };
    for (e, why) in [
        ("/opt/daqtune/bin/nope", "no such file"),
        ("/opt/daqtune/bin/daqtune", "not executable (mode 644)"),
        ("/opt/daqtune/bin", "not a regular file"),
        ("daqtune", "absolute"),
    ] {
        let p = try_plan(r, "igx-orin", &exe(e)).expect_err("plan --exe");
        assert!(p.to_string().contains(why), "plan --exe {e}: {p}");
        let a = try_apply(r, "igx-orin", &exe(e)).expect_err("apply --exe");
        assert!(a.to_string().contains(why), "apply --exe {e}: {a}");
        let g = daqtune_engine::apply::GenerateOptions {
            exe: Some(e.into()),
            ..kind("governor-unit")
        };
        let res = try_generate_with(r, "igx-orin", &g);
        assert!(res.is_err(), "generate --exe {e}: {res:?}");
    }
    assert!(diff_snapshots(&before, &snapshot(r, &[])).is_empty());
    // An executable --exe is what the units and the rule run.
    std::fs::set_permissions(&opt, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (code, out) = apply(r, "igx-orin", &exe("/opt/daqtune/bin/daqtune"));
    assert_eq!(code, 0, "{out}");
    let rule = read(r, "etc/udev/rules.d/90-daqtune-mrrs.rules");
    assert!(
        rule.contains("RUN+=\"/opt/daqtune/bin/daqtune apply"),
        "{rule}"
    );
    let unit = read(r, "etc/systemd/system/daqtune-gpu-clocks.service");
    assert!(
        unit.contains("ExecStart=/opt/daqtune/bin/daqtune apply"),
        "{unit}"
    );
}

#[test]
fn the_installed_binary_under_usr_local_is_found() {
    let root = root_without_binary();
    let r = root.path();
    let p = r.join("usr/local/bin/daqtune");
    std::fs::create_dir_all(p.parent().expect("p")).expect("mkdir");
    std::fs::write(&p, b"#!/bin/sh\n").expect("w");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let rule = generate(r, "igx-orin", "udev-mrrs");
    assert!(
        rule.contains("RUN+=\"/usr/local/bin/daqtune apply"),
        "{rule}"
    );
    // A non-executable /usr/bin/daqtune (a half-done install) is passed over.
    let u = r.join("usr/bin/daqtune");
    std::fs::write(&u, b"").expect("w");
    std::fs::set_permissions(&u, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let unit = generate(r, "igx-orin", "governor-unit");
    assert!(
        unit.contains("ExecStart=/usr/local/bin/daqtune apply"),
        "{unit}"
    );
}

/// `daqtune.artifacts`' verdicts under igx-orin: (subject, status, message and fix).
fn artifact_verdicts(root: &Path) -> Vec<(String, String, String)> {
    let rep = check_json_root(root, "igx-orin");
    verdicts(&rep, "daqtune.artifacts")
        .into_iter()
        .map(|c| {
            (
                c["subject"].as_str().unwrap_or("").to_string(),
                c["status"].as_str().unwrap_or("").to_string(),
                format!(
                    "{} {}",
                    c["message"].as_str().unwrap_or(""),
                    c["fix"].as_str().unwrap_or("")
                ),
            )
        })
        .collect()
}

fn of<'a>(vs: &'a [(String, String, String)], subject: &str) -> &'a (String, String, String) {
    vs.iter()
        .find(|v| v.0 == subject)
        .unwrap_or_else(|| panic!("no verdict for {subject}: {vs:#?}"))
}

const GPU_UNIT: &str = "/etc/systemd/system/daqtune-gpu-clocks.service";
const MOUNT: &str = "/etc/systemd/system/mnt-huge.mount";
const RULE: &str = "/etc/udev/rules.d/90-daqtune-mrrs.rules";
const DROPIN: &str = "/etc/default/grub.d/99-daqtune.cfg";

fn units_json(root: &Path, units: &str) {
    std::fs::create_dir_all(root.join("daqtune")).expect("mkdir");
    std::fs::write(
        root.join("daqtune/units.json"),
        format!("{{\"schema\": \"daqtune.units/v1\", \"captured_unix\": 1, \"units\": [{units}]}}"),
    )
    .expect("write");
}

fn state(name: &str, active: &str, sub: &str, result: &str, status: i32) -> String {
    format!("{{\"name\": \"{name}\", \"load_state\": \"loaded\", \"active_state\": \"{active}\", \"sub_state\": \"{sub}\", \"unit_file_state\": \"enabled\", \"result\": \"{result}\", \"exec_main_status\": {status}}}")
}

#[test]
fn what_apply_wrote_and_what_breaks_it() {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    let vs = artifact_verdicts(r);
    assert_eq!(vs.len(), 1, "{vs:#?}");
    assert_eq!(vs[0].1, "n/a", "{vs:#?}");

    // A peermem-only IGX profile (DAQIRI built against stock DPDK, tune_system.py 89eacf7):
    // igx-orin itself takes this root's ready dma-buf path and writes no modules-load file.
    let dir = tempfile::tempdir().expect("tempdir");
    let prof = dir.path().join("igx-peermem.yaml");
    std::fs::write(
        &prof,
        "name: igx-peermem\nextends: igx-orin\ngpu:\n  gpudirect_paths: [peermem]\n",
    )
    .expect("profile");
    let (code, out) = apply(r, prof.to_str().expect("utf8"), &Selection::default());
    assert_eq!(code, 0, "{out}");
    let vs = artifact_verdicts(r);
    // Files on disk are right; the units' last runs are unknown without a record.
    for p in [RULE, DROPIN, "/etc/modules-load.d/daqtune.conf"] {
        assert_eq!(of(&vs, p).1, "pass", "{p}: {vs:#?}");
    }
    for u in [GPU_UNIT, MOUNT] {
        let v = of(&vs, u);
        assert_eq!(v.1, "skip", "{v:?}");
        assert!(
            v.2.contains("enabled in") && v.2.contains("daqtune/units.json"),
            "{v:?}"
        );
    }
    assert!(of(&vs, GPU_UNIT).2.contains("/usr/bin/daqtune executable"));
    assert!(vs.iter().all(|v| v.1 != "fail"), "{vs:#?}");

    // The snapshot's record of systemd: a failed oneshot fails, a mounted unit passes.
    units_json(
        r,
        &format!(
            "{}, {}",
            state(
                "daqtune-gpu-clocks.service",
                "failed",
                "failed",
                "exit-code",
                1
            ),
            state("mnt-huge.mount", "active", "mounted", "success", 0)
        ),
    );
    let vs = artifact_verdicts(r);
    let v = of(&vs, GPU_UNIT);
    assert_eq!(v.1, "fail", "{v:?}");
    assert!(
        v.2.contains("its last run failed") && v.2.contains("exit status 1"),
        "{v:?}"
    );
    assert!(
        v.2.contains("journalctl -b -u daqtune-gpu-clocks.service"),
        "{v:?}"
    );
    assert_eq!(of(&vs, MOUNT).1, "pass", "{vs:#?}");
    // A record made where systemd could not be asked: skip with the reason.
    std::fs::write(
        r.join("daqtune/units.json"),
        "{\"schema\": \"daqtune.units/v1\", \"captured_unix\": 1, \"systemd_unavailable\": \"cannot ask systemd over D-Bus: no bus\", \"units\": []}",
    )
    .expect("w");
    let v = of(&artifact_verdicts(r), MOUNT).clone();
    assert_eq!(v.1, "skip", "{v:?}");
    assert!(v.2.contains("no bus"), "{v:?}");
    units_json(
        r,
        &format!(
            "{}, {}",
            state(
                "daqtune-gpu-clocks.service",
                "active",
                "exited",
                "success",
                0
            ),
            state("mnt-huge.mount", "active", "mounted", "success", 0)
        ),
    );
    assert!(artifact_verdicts(r).iter().all(|v| v.1 == "pass"));

    // Not enabled.
    std::fs::remove_file(
        r.join("etc/systemd/system/multi-user.target.wants/daqtune-gpu-clocks.service"),
    )
    .expect("rm link");
    let v = of(&artifact_verdicts(r), GPU_UNIT).clone();
    assert_eq!(v.1, "fail", "{v:?}");
    assert!(
        v.2.contains("not enabled") && v.2.contains("systemctl enable daqtune-gpu-clocks.service"),
        "{v:?}"
    );
    // The binary gone: the unit and the rule name it.
    std::fs::remove_file(r.join("usr/bin/daqtune")).expect("rm");
    let vs = artifact_verdicts(r);
    for p in [GPU_UNIT, RULE] {
        let v = of(&vs, p);
        assert_eq!(v.1, "fail", "{v:?}");
        assert!(
            v.2.contains("runs /usr/bin/daqtune, which is not installed"),
            "{v:?}"
        );
        assert!(
            v.2.contains("sudo apt install ./target/debian/daqtune_*.deb"),
            "{v:?}"
        );
    }
    // A drop-in deleted by hand.
    std::fs::remove_file(r.join(DROPIN.trim_start_matches('/'))).expect("rm");
    let v = of(&artifact_verdicts(r), DROPIN).clone();
    assert_eq!(v.1, "fail", "{v:?}");
    assert!(v.2.contains("missing (written by apply run"), "{v:?}");

    // After revert nothing of daqtune's is left to judge.
    let (code, out) = revert(r);
    assert_eq!(code, 0, "{out}");
    let vs = artifact_verdicts(r);
    assert_eq!(vs.len(), 1, "{vs:#?}");
    assert_eq!(vs[0].1, "n/a", "{vs:#?}");
}

/// A unit carrying daqtune's mark whose journal is gone is still found by its name.
#[test]
fn found_by_name_without_a_journal() {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    let unit = generate(r, "igx-orin", "governor-unit");
    let p = r.join("etc/systemd/system/daqtune-governor.service");
    std::fs::create_dir_all(p.parent().expect("p")).expect("mkdir");
    std::fs::write(&p, unit).expect("w");
    let vs = artifact_verdicts(r);
    let v = of(&vs, "/etc/systemd/system/daqtune-governor.service");
    assert_eq!(v.1, "fail", "{v:?}");
    assert!(
        v.2.contains("not enabled") && v.2.contains("found by its name"),
        "{v:?}"
    );
}

/// A snapshot keeps the binary's mode (an empty stand-in, not its bytes) and the units'
/// record: the replay judges the artifacts as the source did.
#[test]
fn a_snapshot_replays_them() {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    let (code, out) = apply(r, "igx-orin", &Selection::default());
    assert_eq!(code, 0, "{out}");
    units_json(
        r,
        &state("mnt-huge.mount", "active", "mounted", "success", 0),
    );
    let tmp = tempfile::tempdir().expect("tmp");
    let snap = tmp.path().join("snap");
    let host = daqtune_probe::Host::at(r).expect("root");
    let lp = daqtune_engine::commands::load_profile("igx-orin").expect("profile");
    daqtune_engine::snapshot::write_dir(&host, &lp, &snap, false).expect("snapshot");
    let bin = snap.join("usr/bin/daqtune");
    let m = std::fs::metadata(&bin).expect("stand-in");
    assert_eq!(m.len(), 0);
    assert_eq!(m.permissions().mode() & 0o777, 0o755);
    assert_eq!(artifact_verdicts(r), artifact_verdicts(&snap));
}
