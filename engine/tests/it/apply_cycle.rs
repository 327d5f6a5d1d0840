//! Acceptance of plan / apply / revert on copies of the fixture host roots (issue 5), through
//! the engine's API: apply, check, apply again (no byte changes), revert (byte for byte); a
//! dry run and `generate` change nothing; `--only` and `--device` select one PF. Moved from
//! tune/tests/apply_acceptance.rs (issue 24): what the binary adds (exit 2, the prompt) is
//! tested in tune/tests/apply_cli.rs.

use crate::common;

use common::drive::*;
use common::testroot::*;
use common::{check_json_root, statuses};
use daqtune_engine::apply::{ApplyOptions, Selection};
use daqtune_engine::hostio::setters::FsWriter;
use std::path::{Path, PathBuf};
use std::process::Command;

const STATE: &str = "var/lib/daqtune";

/// The common acceptance sequence, with `more` for the platform's own assertions.
#[allow(clippy::too_many_arguments)]
fn full_cycle(
    fixture_name: &str,
    add_pci: fn(&Path),
    profile: &str,
    dropin: &str,
    ifaces: &[&str],
    pfs: &[&str],
    cmdline_status: &str,
    more: impl Fn(&Path),
) {
    let root = prepared(fixture_name, add_pci);
    let r = root.path();
    let all = Selection::default();
    let before = snapshot(r, &[]);
    let grub_before = std::fs::read(r.join("etc/default/grub")).expect("grub");
    let devctl_before: Vec<u16> = pfs.iter().map(|b| devctl(r, b)).collect();

    // Without `yes` and without a terminal: refused, nothing changes.
    let ask = ApplyOptions::default();
    let refused = try_apply_with(&globals(r, profile), &ask, &mut FsWriter::new());
    assert!(refused.is_err(), "{refused:?}");
    assert!(diff_snapshots(&before, &snapshot(r, &[])).is_empty());

    // plan changes nothing either.
    let p = plan(r, profile, &all);
    assert!(p.contains(dropin), "{p}");
    assert!(diff_snapshots(&before, &snapshot(r, &[])).is_empty());

    let (code, out) = apply(r, profile, &all);
    assert_eq!(code, 0, "apply: {out}");
    assert!(out.contains("reboot needed for: kernel.cmdline"), "{out}");

    let rep = check_json_root(r, profile);
    assert!(
        statuses(&rep, "cpu.governor").iter().all(|s| s == "pass"),
        "{:?}",
        statuses(&rep, "cpu.governor")
    );
    assert!(!statuses(&rep, "cpu.governor").is_empty());
    assert_eq!(statuses(&rep, "kernel.cmdline"), [cmdline_status]);
    // gpu.clocks: the root's recorded NVML facts (daqtune/gpu.json) now show the locks.
    for id in ["pcie.mrrs", "nic.mtu", "gpu.clocks"] {
        assert!(
            statuses(&rep, id).iter().all(|s| s == "pass"),
            "{id}: {:?}",
            statuses(&rep, id)
        );
    }
    // Whatever check engine is present, the kernel state the checks read is what apply set.
    for (bdf, b) in pfs.iter().zip(&devctl_before) {
        let d = devctl(r, bdf);
        assert_eq!((d >> 12) & 7, 5, "{bdf}: MRRS 4096 in DevCtl 0x{d:04x}");
        assert_eq!(d & !0x7000, b & !0x7000, "{bdf}: only bits 14:12 change");
    }
    for i in ifaces {
        assert_eq!(read(r, &format!("sys/class/net/{i}/mtu")), "9000\n");
    }
    // The drop-in carries the profile's flags; /etc/default/grub is untouched.
    let d = read(r, dropin.trim_start_matches('/'));
    assert!(
        d.contains("GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX "),
        "{d}"
    );
    for flag in [
        "default_hugepagesz=1G",
        "hugepagesz=1G",
        "hugepages=4",
        "rcu_nocb_poll",
        "cpufreq.default_governor=performance",
    ] {
        assert!(d.contains(flag), "{flag} in {d}");
    }
    assert_eq!(
        std::fs::read(r.join("etc/default/grub")).expect("grub"),
        grub_before
    );
    // The drop-in sources cleanly after /etc/default/grub.
    let sh = Command::new("sh")
        .arg("-n")
        .arg(r.join(dropin.trim_start_matches('/')))
        .output()
        .expect("sh");
    assert!(sh.status.success());
    // One udev rule line covers every PF.
    let rule = read(r, "etc/udev/rules.d/90-daqtune-mrrs.rules");
    let lines: Vec<&str> = rule.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 1, "{rule}");
    for bdf in pfs {
        assert!(lines[0].contains(bdf), "{bdf} in {rule}");
    }
    // A profile file is referenced by the copy apply installs under /etc/daqtune/profiles.
    let profile_ref = if profile.ends_with(".yaml") {
        "/etc/daqtune/profiles/".to_string()
    } else {
        format!("{profile} --only pcie.mrrs")
    };
    assert!(
        lines[0].contains(&format!(
            "RUN+=\"/usr/bin/daqtune apply --profile {profile_ref}"
        )),
        "{rule}"
    );
    more(r);

    // A second apply changes no byte (journal included: an empty plan writes nothing).
    let after = snapshot(r, &[]);
    let (code, out) = apply(r, profile, &all);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("nothing to change"), "{out}");
    let d2 = diff_snapshots(&after, &snapshot(r, &[]));
    assert!(d2.is_empty(), "second apply changed: {d2:#?}");

    // revert restores every file and runtime value byte for byte (the journal stays).
    let (code, out) = revert(r);
    assert_eq!(code, 0, "revert: {out}");
    let mut skip = vec![STATE];
    for p in ["var/lib", "var"] {
        if !before.contains_key(p) {
            skip.push(p);
        }
    }
    let d3 = diff_snapshots(
        &snapshot(&PathBuf::from(r), &[])
            .into_iter()
            .filter(|(k, _)| {
                !skip
                    .iter()
                    .any(|s| k == s || k.starts_with(&format!("{s}/")))
            })
            .collect(),
        &before,
    );
    assert!(d3.is_empty(), "revert left differences: {d3:#?}");
    // A second revert has nothing to do.
    let (code, out) = revert(r);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("nothing to revert"), "{out}");
}

#[test]
fn igx_orin_apply_check_reapply_revert() {
    // igx-orin takes dma-buf too (NVIDIA/daqiri 3c87196), which this root's A6000 (open
    // module, DMA_BUF_SUPPORTED=1) has ready, so igx-orin itself loads no module. A site
    // that builds DAQIRI against stock DPDK needs nvidia_peermem (tune_system.py, 89eacf7):
    // its profile allows peermem only, and the cycle covers loading and persisting it.
    let dir = tempfile::tempdir().expect("tempdir");
    let prof = dir.path().join("igx-peermem.yaml");
    std::fs::write(
        &prof,
        "name: igx-peermem\nextends: igx-orin\ngpu:\n  gpudirect_paths: [peermem]\n",
    )
    .expect("profile");
    full_cycle(
        "igx-untuned",
        add_igx_pci,
        prof.to_str().expect("utf8"),
        "/etc/default/grub.d/99-daqtune.cfg",
        &["cx7_0", "cx7_1"],
        &["0005:03:00.0", "0005:03:00.1"],
        "pending-reboot",
        |r| {
            let d = read(r, "etc/default/grub.d/99-daqtune.cfg");
            assert!(
                d.contains(
                    "isolcpus=8-11 irqaffinity=0-7 nohz_full=8-11 rcu_nocbs=8-11 rcu_nocb_poll"
                ),
                "{d}"
            );
            assert!(read(r, "etc/systemd/system/mnt-huge.mount").contains("Where=/mnt/huge"));
            assert_eq!(
                std::fs::read_link(
                    r.join("etc/systemd/system/local-fs.target.wants/mnt-huge.mount")
                )
                .expect("link"),
                PathBuf::from("/etc/systemd/system/mnt-huge.mount")
            );
            assert_eq!(
                read(
                    r,
                    "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
                ),
                "4\n"
            );
            // A discrete GPU: nvidia-peermem loaded (the root's /proc/modules) and persisted.
            assert!(read(r, "proc/modules").contains("nvidia_peermem "));
            assert!(read(r, "etc/modules-load.d/daqtune.conf").ends_with("\nnvidia-peermem\n"));
            // IGX has no netplan or NetworkManager in the fixture: networkd .link files.
            assert!(read(r, "etc/systemd/network/10-daqtune-cx7_0.link")
                .contains("MACAddress=48:b0:2d:f4:07:fb\n"));
        },
    );
}

#[test]
fn dgx_spark_apply_check_reapply_revert() {
    full_cycle(
        "spark",
        add_spark_pci,
        "dgx-spark",
        "/etc/default/grub.d/daqiri-tuning.cfg",
        &[
            "enp1s0f0np0",
            "enp1s0f1np1",
            "enP2p1s0f0np0",
            "enP2p1s0f1np1",
        ],
        &[
            "0000:01:00.0",
            "0000:01:00.1",
            "0002:01:00.0",
            "0002:01:00.1",
        ],
        // The Spark fixture booted with the seed's isolation and hugepage arguments already;
        // only cpufreq.default_governor= waits for the next boot.
        "pass",
        |r| {
            let p = plan(r, "dgx-spark", &Selection::default());
            assert!(p.contains("pending-reboot: written, waiting for a reboot: cpufreq.default_governor=performance"), "{p}");
            let d = read(r, "etc/default/grub.d/daqiri-tuning.cfg");
            assert!(
                d.contains(
                    "isolcpus=16-19 irqaffinity=0-15 nohz_full=16-19 rcu_nocbs=16-19 rcu_nocb_poll"
                ),
                "{d}"
            );
            // The seed's NetworkManager profiles, one per port, mode 0600.
            let nm =
                r.join("etc/NetworkManager/system-connections/daqiri-enp1s0f0np0.nmconnection");
            let t = std::fs::read_to_string(&nm).expect("nm profile");
            assert!(
                t.contains("interface-name=enp1s0f0np0\n") && t.contains("mtu=9000\n"),
                "{t}"
            );
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&nm).expect("m").permissions().mode() & 0o777,
                0o600
            );
            // GB10: SM clock and persistence only (no memory clock domain).
            let rep = check_json_root(r, "dgx-spark");
            let gs = statuses(&rep, "gpu.clocks");
            assert!(
                !gs.is_empty() && gs.iter().all(|s| s == "pass" || s == "n/a"),
                "{gs:?}"
            );
            // peermem is n/a on GB10: no module, no modules-load file.
            assert!(!r.join("etc/modules-load.d/daqtune.conf").exists());
        },
    );
}

#[test]
fn dry_run_and_generate_change_nothing() {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    let before = snapshot(r, &[]);
    let dry = ApplyOptions {
        dry_run: true,
        ..Default::default()
    };
    let (code, out) =
        try_apply_with(&globals(r, "igx-orin"), &dry, &mut FsWriter::new()).expect("dry run");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("dry run: nothing changed"), "{out}");
    assert_eq!(
        generate(r, "igx-orin", "kernel-args"),
        "default_hugepagesz=1G hugepagesz=1G hugepages=4 isolcpus=8-11 irqaffinity=0-7 nohz_full=8-11 rcu_nocbs=8-11 rcu_nocb_poll cpufreq.default_governor=performance\n"
    );
    let rule = generate(r, "igx-orin", "udev-mrrs");
    assert!(
        rule.contains("KERNEL==\"0005:03:00.0|0005:03:00.1\""),
        "{rule}"
    );
    assert!(diff_snapshots(&before, &snapshot(r, &[])).is_empty());
}

#[test]
fn only_and_device_select_one_pf() {
    let root = prepared("spark", add_spark_pci);
    let r = root.path();
    let other_before = devctl(r, "0002:01:00.0");
    // What the udev rule runs when one PF reappears.
    let one = |device: &str| Selection {
        device: Some(device.into()),
        runtime_only: true,
        ..only(&["pcie.mrrs"])
    };
    let (code, out) = apply(r, "dgx-spark", &one("0002:01:00.1"));
    assert_eq!(code, 0, "{out}");
    assert_eq!((devctl(r, "0002:01:00.1") >> 12) & 7, 5);
    assert_eq!(
        devctl(r, "0002:01:00.0"),
        other_before,
        "only the named PF is written"
    );
    assert!(
        !r.join("etc/udev").exists(),
        "--runtime-only writes no file"
    );
    // A device that is not a ConnectX PF is refused, and garbage too; so is an unknown id.
    let before = snapshot(r, &[]);
    for bad in ["0000:09:00.0", "0000:01:00.0;reboot", "%k"] {
        let sel = Selection {
            device: Some(bad.into()),
            ..only(&["pcie.mrrs"])
        };
        let refused = try_apply(r, "dgx-spark", &sel);
        assert!(refused.is_err(), "{bad}: {refused:?}");
    }
    let refused = try_apply(r, "dgx-spark", &only(&["bogus"]));
    assert!(refused.is_err(), "{refused:?}");
    assert!(diff_snapshots(&before, &snapshot(r, &[])).is_empty());
}
