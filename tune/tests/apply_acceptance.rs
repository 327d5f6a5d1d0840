//! Acceptance of plan / apply / revert on copies of the fixture host roots (issue 5):
//! apply, check, apply again (no byte changes), revert (byte for byte), and faults injected
//! half-way through.

#[path = "../../engine/src/apply/testroot.rs"]
mod testroot;

use daqtune_engine::apply::{
    run_apply_with, run_revert_with, ApplyOptions, RevertOptions, Selection,
};
use daqtune_engine::hostio::setters::{Fault, FsWriter};
use daqtune_engine::GlobalOptions;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use testroot::*;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_daqtune"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run daqtune")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A copy of a fixture root with its ConnectX PFs (and GPU) in sysfs, unless the fixture
/// already has a PCI tree.
fn prepared(name: &str, add_pci: fn(&Path)) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    copy_tree(&fixture(name), d.path());
    if !d.path().join("sys/bus/pci/devices").exists() {
        add_pci(d.path());
    }
    install_daqtune(d.path());
    d
}

fn check_json(root: &Path, profile: &str) -> serde_json::Value {
    let o = run(&[
        "check",
        "--root",
        root.to_str().expect("utf8"),
        "--profile",
        profile,
        "--format",
        "json",
    ]);
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "check: {}",
        text(&o)
    );
    serde_json::from_slice(&o.stdout).expect("json")
}

fn statuses(rep: &serde_json::Value, id: &str) -> Vec<String> {
    rep["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["id"] == id)
        .map(|c| c["status"].as_str().expect("status").to_string())
        .collect()
}

fn has_check(rep: &serde_json::Value, id: &str) -> bool {
    !statuses(rep, id).is_empty()
}

const STATE: &str = "var/lib/daqtune";

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The common acceptance sequence. Returns the root for platform-specific assertions.
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
    let rs = r.to_str().expect("utf8");
    let before = snapshot(r, &[]);
    let grub_before = std::fs::read(r.join("etc/default/grub")).expect("grub");
    let devctl_before: Vec<u16> = pfs.iter().map(|b| devctl(r, b)).collect();

    // Without --yes and without a terminal: exit 2, nothing changes.
    let o = run(&["apply", "--root", rs, "--profile", profile]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(diff_snapshots(&before, &snapshot(r, &[])).is_empty());

    // plan changes nothing either.
    let o = run(&["plan", "--root", rs, "--profile", profile]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains(dropin), "{}", text(&o));
    assert!(diff_snapshots(&before, &snapshot(r, &[])).is_empty());

    let o = run(&["apply", "--root", rs, "--profile", profile, "--yes"]);
    assert_eq!(o.status.code(), Some(0), "apply: {}", text(&o));
    let out = text(&o);
    assert!(out.contains("reboot needed for: kernel.cmdline"), "{out}");

    let rep = check_json(r, profile);
    assert!(
        statuses(&rep, "cpu.governor").iter().all(|s| s == "pass"),
        "{:?}",
        statuses(&rep, "cpu.governor")
    );
    assert!(!statuses(&rep, "cpu.governor").is_empty());
    assert_eq!(statuses(&rep, "kernel.cmdline"), [cmdline_status]);
    // gpu.clocks: the root's recorded NVML facts (daqtune/gpu.json) now show the locks.
    for id in ["pcie.mrrs", "nic.mtu", "gpu.clocks"] {
        if has_check(&rep, id) {
            assert!(
                statuses(&rep, id).iter().all(|s| s == "pass"),
                "{id}: {:?}",
                statuses(&rep, id)
            );
        }
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
    assert!(
        lines[0].contains(&format!(
            "RUN+=\"/usr/bin/daqtune apply --profile {profile} --only pcie.mrrs"
        )),
        "{rule}"
    );
    more(r);

    // A second apply changes no byte (journal included: an empty plan writes nothing).
    let after = snapshot(r, &[]);
    let o = run(&["apply", "--root", rs, "--profile", profile, "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("nothing to change"), "{}", text(&o));
    let d2 = diff_snapshots(&after, &snapshot(r, &[]));
    assert!(d2.is_empty(), "second apply changed: {d2:#?}");

    // revert restores every file and runtime value byte for byte (the journal stays).
    let o = run(&["revert", "--root", rs, "--yes"]);
    assert_eq!(o.status.code(), Some(0), "revert: {}", text(&o));
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
    let o = run(&["revert", "--root", rs, "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("nothing to revert"), "{}", text(&o));
}

#[test]
fn igx_orin_apply_check_reapply_revert() {
    full_cycle(
        "igx-untuned",
        add_igx_pci,
        "igx-orin",
        "/etc/default/grub.d/99-daqtune.cfg",
        &["cx7_0", "cx7_1"],
        &["0005:03:00.0", "0005:03:00.1"],
        "pending-reboot",
        |r| {
            let d = read(r, "etc/default/grub.d/99-daqtune.cfg");
            assert!(
                d.contains(
                    "isolcpus=9-11 irqaffinity=0-8 nohz_full=9-11 rcu_nocbs=9-11 rcu_nocb_poll"
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
            let o = run(&[
                "plan",
                "--root",
                r.to_str().expect("utf8"),
                "--profile",
                "dgx-spark",
            ]);
            assert!(text(&o).contains("pending-reboot: written, waiting for a reboot: cpufreq.default_governor=performance"), "{}", text(&o));
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
            let rep = check_json(r, "dgx-spark");
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

fn globals(root: &Path, profile: &str) -> GlobalOptions {
    GlobalOptions {
        root: Some(root.to_path_buf()),
        profile: Some(profile.into()),
        ..Default::default()
    }
}

fn apply_args() -> ApplyOptions {
    ApplyOptions {
        sel: Selection::default(),
        dry_run: false,
        yes: true,
        state_dir: None,
    }
}

/// No temp file (`.NAME.daqtune-tmp.PID`) anywhere in the root.
fn no_temp_files(root: &Path) {
    let snap = snapshot(root, &[]);
    let tmp: Vec<&String> = snap
        .keys()
        .filter(|k| k.contains(".daqtune-tmp."))
        .collect();
    assert!(tmp.is_empty(), "left-over temp files: {tmp:?}");
}

fn fault_case(fault: Fault, failing_rel: &str) {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    let before = snapshot(r, &[]);
    let g = globals(r, "igx-orin");
    let mut w = FsWriter::with_fault(fault);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run_apply_with(&g, &apply_args(), &mut w, &mut out, &mut err).expect("apply runs");
    let out = String::from_utf8_lossy(&out).to_string();
    assert_eq!(code, 1, "a failed write makes apply exit 1: {out}");
    assert!(out.contains("FAIL"), "{out}");
    // The failing file is either absent (new) or has its old bytes; never half-written.
    match before.get(failing_rel) {
        None => assert!(
            !r.join(failing_rel).exists(),
            "{failing_rel} exists after a failed write"
        ),
        Some(v) => assert_eq!(snapshot(r, &[]).get(failing_rel), Some(v)),
    }
    no_temp_files(r);
    // Other changes went through and are journaled...
    assert_eq!(
        read(r, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "performance\n"
    );
    // ...and revert undoes them.
    let mut w = FsWriter::new();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run_revert_with(
        &g,
        &RevertOptions {
            yes: true,
            state_dir: None,
        },
        &mut w,
        &mut out,
        &mut err,
    )
    .expect("revert runs");
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out));
    let after: std::collections::BTreeMap<String, String> = snapshot(r, &[])
        .into_iter()
        .filter(|(k, _)| !(k == "var" || k.starts_with("var/")))
        .collect();
    let d = diff_snapshots(&before, &after);
    assert!(d.is_empty(), "revert after a fault left: {d:#?}");
}

#[test]
fn disk_full_midway_leaves_no_half_written_file_and_reverts() {
    fault_case(
        Fault::DiskFull {
            suffix: "grub.d/99-daqtune.cfg".into(),
            bytes: 40,
        },
        "etc/default/grub.d/99-daqtune.cfg",
    );
}

#[test]
fn disk_full_on_an_existing_kernel_file_keeps_its_bytes() {
    fault_case(
        Fault::DiskFull {
            suffix: "hugepages-1048576kB/nr_hugepages".into(),
            bytes: 0,
        },
        "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages",
    );
}

#[test]
fn read_only_file_fails_cleanly_and_reverts() {
    fault_case(
        Fault::ReadOnly("mnt-huge.mount".into()),
        "etc/systemd/system/mnt-huge.mount",
    );
}

#[test]
fn dry_run_and_generate_change_nothing() {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    let rs = r.to_str().expect("utf8");
    let before = snapshot(r, &[]);
    let o = run(&["apply", "--root", rs, "--profile", "igx-orin", "--dry-run"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("dry run: nothing changed"));
    let o = run(&[
        "generate",
        "kernel-args",
        "--root",
        rs,
        "--profile",
        "igx-orin",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "default_hugepagesz=1G hugepagesz=1G hugepages=4 isolcpus=9-11 irqaffinity=0-8 nohz_full=9-11 rcu_nocbs=9-11 rcu_nocb_poll cpufreq.default_governor=performance\n"
    );
    let o = run(&[
        "generate",
        "udev-mrrs",
        "--root",
        rs,
        "--profile",
        "igx-orin",
    ]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("KERNEL==\"0005:03:00.0|0005:03:00.1\""),
        "{}",
        text(&o)
    );
    assert!(diff_snapshots(&before, &snapshot(r, &[])).is_empty());
}

#[test]
fn only_and_device_select_one_pf() {
    let root = prepared("spark", add_spark_pci);
    let r = root.path();
    let rs = r.to_str().expect("utf8");
    let other_before = devctl(r, "0002:01:00.0");
    // What the udev rule runs when one PF reappears.
    let o = run(&[
        "apply",
        "--root",
        rs,
        "--profile",
        "dgx-spark",
        "--only",
        "pcie.mrrs",
        "--runtime-only",
        "--device",
        "0002:01:00.1",
        "--yes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
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
    // A device that is not a ConnectX PF is refused (exit 2), and garbage too.
    for bad in ["0000:09:00.0", "0000:01:00.0;reboot", "%k"] {
        let o = run(&[
            "apply",
            "--root",
            rs,
            "--profile",
            "dgx-spark",
            "--only",
            "pcie.mrrs",
            "--device",
            bad,
            "--yes",
        ]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o));
    }
    let o = run(&[
        "apply",
        "--root",
        rs,
        "--profile",
        "dgx-spark",
        "--only",
        "bogus",
        "--yes",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn conflicting_grub_config_is_reported_in_the_plan() {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    std::fs::write(
        r.join("etc/default/grub"),
        "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet isolcpus=2-3\"\nGRUB_CMDLINE_LINUX=\"\"\n",
    )
    .expect("write");
    std::fs::create_dir_all(r.join("etc/default/grub.d")).expect("mkdir");
    std::fs::write(
        r.join("etc/default/grub.d/zz-vendor.cfg"),
        "GRUB_CMDLINE_LINUX=\"console=ttyS0\"\n",
    )
    .expect("write");
    let o = run(&[
        "plan",
        "--root",
        r.to_str().expect("utf8"),
        "--profile",
        "igx-orin",
    ]);
    let t = text(&o);
    assert!(
        t.contains("/etc/default/grub:1 already sets `isolcpus=2-3` in GRUB_CMDLINE_LINUX_DEFAULT"),
        "{t}"
    );
    assert!(
        t.contains(
            "zz-vendor.cfg:1 assigns GRUB_CMDLINE_LINUX after daqtune's drop-in without appending"
        ),
        "{t}"
    );
}

#[test]
fn extlinux_host_gets_a_new_default_label_and_reverts() {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    std::fs::remove_file(r.join("etc/default/grub")).expect("rm grub");
    let conf = "TIMEOUT 30\nDEFAULT primary\n\nMENU TITLE L4T boot options\n\nLABEL primary\n      MENU LABEL primary kernel\n      LINUX /boot/Image\n      INITRD /boot/initrd\n      APPEND ${cbootargs} root=PARTUUID=8c1a7a1e rw rootwait\n";
    std::fs::create_dir_all(r.join("boot/extlinux")).expect("mkdir");
    std::fs::write(r.join("boot/extlinux/extlinux.conf"), conf).expect("write");
    let before = snapshot(r, &[]);
    let rs = r.to_str().expect("utf8");
    let o = run(&[
        "apply",
        "--root",
        rs,
        "--profile",
        "igx-orin",
        "--only",
        "kernel.cmdline",
        "--yes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let new = read(r, "boot/extlinux/extlinux.conf");
    assert!(new.contains("DEFAULT daqtune\n"), "{new}");
    assert!(
        new.contains("LABEL primary\n      MENU LABEL primary kernel\n"),
        "the old entry is kept: {new}"
    );
    assert!(
        new.contains(
            "APPEND ${cbootargs} root=PARTUUID=8c1a7a1e rw rootwait default_hugepagesz=1G"
        ),
        "{new}"
    );
    // No grub drop-in on an extlinux host (an empty grub.d directory may exist).
    let dropins = std::fs::read_dir(r.join("etc/default/grub.d"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(dropins, 0, "no grub drop-in on an extlinux host");
    let o = run(&[
        "plan",
        "--root",
        rs,
        "--profile",
        "igx-orin",
        "--only",
        "kernel.cmdline",
    ]);
    assert!(
        text(&o).contains("nothing to change") && text(&o).contains("pending-reboot"),
        "{}",
        text(&o)
    );
    let o = run(&["revert", "--root", rs, "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let after: std::collections::BTreeMap<String, String> = snapshot(r, &[])
        .into_iter()
        .filter(|(k, _)| !(k == "var" || k.starts_with("var/")))
        .collect();
    assert!(
        diff_snapshots(&before, &after).is_empty(),
        "{:#?}",
        diff_snapshots(&before, &after)
    );
}

#[test]
fn no_boot_config_prints_the_arguments() {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    std::fs::remove_file(r.join("etc/default/grub")).expect("rm grub");
    let o = run(&[
        "plan",
        "--root",
        r.to_str().expect("utf8"),
        "--profile",
        "igx-orin",
        "--only",
        "kernel.cmdline",
    ]);
    assert!(
        text(&o).contains("add these kernel arguments to your boot manager: default_hugepagesz=1G hugepagesz=1G hugepages=4 isolcpus=9-11"),
        "{}",
        text(&o)
    );
}

#[test]
fn existing_networkmanager_profile_is_not_fought() {
    let root = prepared("spark", add_spark_pci);
    let r = root.path();
    let dir = r.join("etc/NetworkManager/system-connections");
    std::fs::create_dir_all(&dir).expect("mkdir");
    // The seed's nmcli profile for the TX port, without an MTU yet.
    let theirs = "[connection]\nid=daqiri-tx\ntype=ethernet\ninterface-name=enp1s0f0np0\n\n[ipv4]\naddress1=1.1.1.1/24\nmethod=manual\n";
    std::fs::write(dir.join("daqiri-tx.nmconnection"), theirs).expect("write");
    let o = run(&[
        "apply",
        "--root",
        r.to_str().expect("utf8"),
        "--profile",
        "dgx-spark",
        "--only",
        "nic.mtu",
        "--yes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("nmcli connection modify daqiri-tx ethernet.mtu 9000"),
        "{}",
        text(&o)
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

mod gpu_mock {
    use super::*;
    use daqtune_engine::apply::{run_apply_gpu, run_revert_gpu};
    use daqtune_engine::hostio::gpu::{GpuState, MockGpus};

    fn gpu(uuid: &str, name: &str, mem: bool) -> GpuState {
        GpuState {
            uuid: uuid.into(),
            name: name.into(),
            sm_held: Some(false),
            memory_held: if mem { Some(false) } else { None },
            has_memory_domain: mem,
            persistence: Some(false),
        }
    }

    #[test]
    fn gpu_clocks_and_persistence_through_a_mocked_nvml() {
        let root = prepared("igx-untuned", add_igx_pci);
        let r = root.path();
        let mut other = gpu("GPU-2", "NVIDIA RTX A6000", true);
        other.sm_held = None; // cannot be told: NVML shows no lock, someone else holds one
        other.memory_held = Some(true);
        other.persistence = Some(true);
        let mock = MockGpus::new(vec![gpu("GPU-1", "NVIDIA RTX 6000 Ada", true), other]);
        mock.locked_by_others.borrow_mut().push("GPU-2".into());
        let g = globals(r, "igx-orin");
        let mut a = apply_args();
        a.sel.only = vec!["gpu.clocks".into()];
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_apply_gpu(
            &g,
            &a,
            &mut FsWriter::new(),
            Some(&mock),
            &mut out,
            &mut err,
        )
        .expect("apply");
        let out = String::from_utf8_lossy(&out).to_string();
        assert_eq!(code, 0, "{out}");
        assert_eq!(
            *mock.calls.borrow(),
            [
                "persistence GPU-1 true",
                "lock GPU-1 SM",
                "lock GPU-1 memory",
                "lock GPU-2 SM"
            ],
            "{out}"
        );
        assert!(
            out.contains("a lock was already in place and is now overridden"),
            "{out}"
        );
        let unit = read(r, "etc/systemd/system/daqtune-gpu-clocks.service");
        assert!(
            unit.contains("After=nvidia-persistenced.service")
                && unit.contains("--only gpu.clocks"),
            "{unit}"
        );
        assert!(r
            .join("etc/systemd/system/multi-user.target.wants/daqtune-gpu-clocks.service")
            .is_symlink());
        // A second apply sees the locks held and changes nothing.
        mock.calls.borrow_mut().clear();
        let (mut out2, mut err2) = (Vec::new(), Vec::new());
        // GPU-2's SM state stays unknown, so it would be locked again: mark it held as NVML would after a lock.
        mock.state
            .borrow_mut()
            .get_mut("GPU-2")
            .expect("gpu2")
            .sm_held = Some(true);
        run_apply_gpu(
            &g,
            &a,
            &mut FsWriter::new(),
            Some(&mock),
            &mut out2,
            &mut err2,
        )
        .expect("apply again");
        assert!(mock.calls.borrow().is_empty(), "{:?}", mock.calls.borrow());
        // Revert unlocks what apply locked and restores persistence; someone else's lock stays.
        let (mut rout, mut rerr) = (Vec::new(), Vec::new());
        let code = run_revert_gpu(
            &g,
            &RevertOptions {
                yes: true,
                state_dir: None,
            },
            &mut FsWriter::new(),
            Some(&mock),
            &mut rout,
            &mut rerr,
        )
        .expect("revert");
        let rout = String::from_utf8_lossy(&rout).to_string();
        assert_eq!(code, 0, "{rout}");
        assert_eq!(
            *mock.calls.borrow(),
            [
                "unlock GPU-1 memory",
                "unlock GPU-1 SM",
                "persistence GPU-1 false"
            ],
            "{rout}"
        );
        assert!(
            rout.contains("left locked (the lock was someone else's before apply)"),
            "{rout}"
        );
        assert!(!r
            .join("etc/systemd/system/daqtune-gpu-clocks.service")
            .exists());
    }

    #[test]
    fn gb10_locks_only_the_sm_clock() {
        let root = prepared("spark", add_spark_pci);
        let r = root.path();
        let mock = MockGpus::new(vec![gpu("GPU-gb10", "NVIDIA GB10", false)]);
        let mut a = apply_args();
        a.sel.only = vec!["gpu.clocks".into()];
        a.sel.runtime_only = true;
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_apply_gpu(
            &globals(r, "dgx-spark"),
            &a,
            &mut FsWriter::new(),
            Some(&mock),
            &mut out,
            &mut err,
        )
        .expect("apply");
        assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out));
        assert_eq!(
            *mock.calls.borrow(),
            ["persistence GPU-gb10 true", "lock GPU-gb10 SM"]
        );
    }

    #[test]
    fn refused_lock_is_reported_and_the_rest_reverts() {
        let root = prepared("igx-untuned", add_igx_pci);
        let r = root.path();
        let mock = MockGpus::new(vec![gpu("GPU-1", "NVIDIA RTX 6000 Ada", true)]);
        mock.refuse.borrow_mut().push("lock_max".into());
        let mut a = apply_args();
        a.sel.only = vec!["gpu.clocks".into()];
        a.sel.runtime_only = true;
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run_apply_gpu(
            &globals(r, "igx-orin"),
            &a,
            &mut FsWriter::new(),
            Some(&mock),
            &mut out,
            &mut err,
        )
        .expect("apply");
        let out = String::from_utf8_lossy(&out).to_string();
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("NVML_ERROR_NO_PERMISSION"), "{out}");
        mock.refuse.borrow_mut().clear();
        mock.calls.borrow_mut().clear();
        let (mut rout, mut rerr) = (Vec::new(), Vec::new());
        run_revert_gpu(
            &globals(r, "igx-orin"),
            &RevertOptions {
                yes: true,
                state_dir: None,
            },
            &mut FsWriter::new(),
            Some(&mock),
            &mut rout,
            &mut rerr,
        )
        .expect("revert");
        // The persistence change went through and is undone; the refused locks left no
        // journal entry, so revert unlocks nothing (the clock may be someone else's lock).
        assert!(
            mock.calls
                .borrow()
                .contains(&"persistence GPU-1 false".to_string()),
            "{:?}",
            mock.calls.borrow()
        );
        assert!(
            !mock.calls.borrow().iter().any(|c| c.starts_with("unlock")),
            "{:?}",
            mock.calls.borrow()
        );
        assert_eq!(mock.state.borrow()["GPU-1"].persistence, Some(false));
    }
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
        let rs = root.to_str().expect("utf8");
        for k in kinds {
            let o = run(&["generate", k, "--root", rs, "--profile", profile]);
            assert_eq!(o.status.code(), Some(0), "{k} on {profile}: {}", text(&o));
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(!out.trim().is_empty(), "{k}");
            if k != "kernel-args" {
                assert!(out.contains("Written by daqtune"), "{k}: {out}");
            }
        }
        // No extlinux.conf on these roots: a clear error, exit 2.
        let o = run(&["generate", "extlinux", "--root", rs, "--profile", profile]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    }
    // Overrides are validated before they reach a file.
    let o = run(&[
        "generate",
        "nm",
        "--profile",
        "dgx-spark",
        "--interface",
        "eth0\nExecStart=/bin/sh",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = run(&[
        "generate",
        "governor-unit",
        "--profile",
        "igx-orin",
        "--exe",
        "/usr/bin/daqtune --x",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

mod acs {
    use super::*;

    const PORTS: [&str; 3] = ["0005:02:00.0", "0005:02:02.0", "0005:08:00.0"];
    const REDIRECT: u16 = 0x002c; // ReqRedir | CmpltRedir | EgressCtrl

    /// The IGX root with ACS redirect set on the downstream ports of the GPU <-> NIC path
    /// (the fixture's own values when it has its PCI tree).
    fn root_with_acs() -> tempfile::TempDir {
        let root = prepared("igx-untuned", add_igx_pci);
        add_igx_bridges(root.path(), 0x001d);
        for p in PORTS {
            assert_ne!(
                acs_ctrl(root.path(), p) & REDIRECT,
                0,
                "{p}: the fixture must have a redirect set"
            );
        }
        root
    }

    #[test]
    fn without_allow_acs_only_warns() {
        let root = root_with_acs();
        let r = root.path();
        let before = snapshot(r, &[]);
        let o = run(&[
            "apply",
            "--root",
            r.to_str().expect("utf8"),
            "--profile",
            "igx-orin",
            "--only",
            "pcie.acs",
            "--yes",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(
            text(&o).contains("ACS redirect is set on 0005:02:00.0, 0005:02:02.0, 0005:08:00.0"),
            "{}",
            text(&o)
        );
        assert!(diff_snapshots(&before, &snapshot(r, &[])).is_empty());
    }

    #[test]
    fn allow_acs_clears_redirect_bits_and_reverts() {
        let root = root_with_acs();
        let r = root.path();
        // Passthrough for every group: the condition under which redirect may be cleared.
        set_all_iommu(r, "identity");
        let rs = r.to_str().expect("utf8");
        let before = snapshot(r, &[]);
        let ctrl_before: Vec<u16> = PORTS.iter().map(|p| acs_ctrl(r, p)).collect();
        let o = run(&[
            "apply",
            "--root",
            rs,
            "--profile",
            "igx-orin",
            "--only",
            "pcie.acs,kernel.cmdline",
            "--allow-acs",
            "--yes",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        for (p, b) in PORTS.iter().zip(&ctrl_before) {
            // ReqRedir, CmpltRedir and EgressCtrl off; every other control kept.
            assert_eq!(acs_ctrl(r, p), b & !REDIRECT, "{p}");
        }
        let d = read(r, "etc/default/grub.d/99-daqtune.cfg");
        assert!(
            d.contains("pci=disable_acs_redir=0005:02:00.0\\;0005:02:02.0\\;0005:08:00.0"),
            "{d}"
        );
        // Idempotent, also when the flag is not repeated (it is kept from the journal, or the
        // drop-in would be rewritten without the ACS argument), then byte-for-byte revert.
        let mid = snapshot(r, &[]);
        let o = run(&[
            "apply",
            "--root",
            rs,
            "--profile",
            "igx-orin",
            "--only",
            "pcie.acs,kernel.cmdline",
            "--yes",
        ]);
        assert!(
            text(&o).contains("keeping --allow-acs of apply run"),
            "{}",
            text(&o)
        );
        assert!(text(&o).contains("nothing to change"), "{}", text(&o));
        assert!(diff_snapshots(&mid, &snapshot(r, &[])).is_empty());
        let o = run(&["revert", "--root", rs, "--yes"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let after: std::collections::BTreeMap<String, String> = snapshot(r, &[])
            .into_iter()
            .filter(|(k, _)| !(k == "var" || k.starts_with("var/")))
            .collect();
        assert!(
            diff_snapshots(&before, &after).is_empty(),
            "{:#?}",
            diff_snapshots(&before, &after)
        );
    }

    #[test]
    fn translating_iommu_refuses() {
        let root = root_with_acs();
        let r = root.path();
        set_all_iommu(r, "identity");
        if !r
            .join("sys/bus/pci/devices/0005:09:00.0/iommu_group")
            .exists()
        {
            set_iommu(r, "0005:09:00.0", 7, "DMA-FQ");
        }
        std::fs::write(
            r.join("sys/bus/pci/devices/0005:09:00.0/iommu_group/type"),
            "DMA-FQ\n",
        )
        .expect("w");
        let ctrl_before: Vec<u16> = PORTS.iter().map(|p| acs_ctrl(r, p)).collect();
        let o = run(&[
            "apply",
            "--root",
            r.to_str().expect("utf8"),
            "--profile",
            "igx-orin",
            "--only",
            "pcie.acs",
            "--allow-acs",
            "--yes",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(
            text(&o).contains("0005:09:00.0 is behind a translating IOMMU (group type DMA-FQ)"),
            "{}",
            text(&o)
        );
        assert!(text(&o).contains("iommu.passthrough=1"), "{}", text(&o));
        for (p, b) in PORTS.iter().zip(&ctrl_before) {
            assert_eq!(acs_ctrl(r, p), *b, "{p} untouched");
        }
        // Passthrough (identity) is fine.
        std::fs::write(
            r.join("sys/bus/pci/devices/0005:09:00.0/iommu_group/type"),
            "identity\n",
        )
        .expect("w");
        let o = run(&[
            "apply",
            "--root",
            r.to_str().expect("utf8"),
            "--profile",
            "igx-orin",
            "--only",
            "pcie.acs",
            "--allow-acs",
            "--yes",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(acs_ctrl(r, "0005:02:00.0") & REDIRECT, 0);
    }
}

#[test]
fn config_derives_the_plan() {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    let cfg = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/configs/raw_hds_igx.yaml");
    let o = run(&[
        "apply",
        "--root",
        r.to_str().expect("utf8"),
        "--profile",
        "igx-orin",
        "--config",
        cfg.to_str().expect("utf8"),
        "--yes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let d = read(r, "etc/default/grub.d/99-daqtune.cfg");
    assert!(
        d.contains(
            "hugepages=1 isolcpus=8-11 irqaffinity=0-7 nohz_full=8-11 rcu_nocbs=8-11 rcu_nocb_poll"
        ),
        "{d}"
    );
    assert_eq!(
        read(
            r,
            "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
        ),
        "1\n"
    );

    // A later apply without --config keeps it (the drop-in is not rewritten from the bare
    // profile); --fresh plans the profile alone.
    let rs = r.to_str().expect("utf8");
    let o = run(&["apply", "--root", rs, "--profile", "igx-orin", "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("keeping --config"), "{}", text(&o));
    assert!(text(&o).contains("nothing to change"), "{}", text(&o));
    let o = run(&["plan", "--root", rs, "--profile", "igx-orin", "--fresh"]);
    assert!(!text(&o).contains("keeping"), "{}", text(&o));
    assert!(text(&o).contains("99-daqtune.cfg"), "{}", text(&o));

    // A configuration that is gone is an error for a full apply, a note for a runtime-only one
    // (boot units and the udev rule must not fail on it).
    let o = run(&["revert", "--root", rs, "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let kept = tempfile::tempdir().expect("tmp");
    let copy = kept.path().join("app.yaml");
    std::fs::copy(&cfg, &copy).expect("copy config");
    let o = run(&[
        "apply",
        "--root",
        rs,
        "--profile",
        "igx-orin",
        "--config",
        copy.to_str().expect("utf8"),
        "--yes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    std::fs::remove_file(&copy).expect("remove config");
    let o = run(&["apply", "--root", rs, "--profile", "igx-orin", "--yes"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("which is gone"), "{}", text(&o));
    let o = run(&[
        "apply",
        "--root",
        rs,
        "--profile",
        "igx-orin",
        "--runtime-only",
        "--yes",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("goes on without it"), "{}", text(&o));

    // After a revert nothing is kept.
    let o = run(&["revert", "--root", rs, "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = run(&["plan", "--root", rs, "--profile", "igx-orin"]);
    assert!(!text(&o).contains("keeping"), "{}", text(&o));
}

/// `--only cpu.governor` writes no kernel-argument drop-in, so the governor must persist through
/// its unit (a full apply puts `cpufreq.default_governor=performance` in the drop-in instead).
#[test]
fn only_governor_still_persists() {
    let root = prepared("igx-untuned", add_igx_pci);
    let rs = root.path().to_str().expect("utf8");
    let o = run(&[
        "plan",
        "--root",
        rs,
        "--profile",
        "igx-orin",
        "--only",
        "cpu.governor",
    ]);
    assert!(
        text(&o).contains("daqtune-governor.service"),
        "{}",
        text(&o)
    );
    let o = run(&["plan", "--root", rs, "--profile", "igx-orin"]);
    assert!(
        !text(&o).contains("daqtune-governor.service"),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("cpufreq.default_governor=performance"),
        "{}",
        text(&o)
    );
}

/// Issue 15: units and the udev rule run daqtune itself, so `plan`, `apply` and `generate`
/// never write one that calls a binary the host does not have. Default: the installed binary
/// in the host root (/usr/bin/daqtune, then /usr/local/bin/daqtune); `--exe` must name a
/// regular executable file; with none, a plan with such artifacts is refused (exit 2, nothing
/// changed) and the settings that need no binary still go ahead when asked for alone.
mod binary {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn root_without_binary() -> tempfile::TempDir {
        let root = prepared("igx-untuned", add_igx_pci);
        std::fs::remove_file(root.path().join("usr/bin/daqtune")).expect("rm");
        root
    }

    #[test]
    fn a_plan_with_units_is_refused_without_an_installed_binary() {
        let root = root_without_binary();
        let r = root.path();
        let rs = r.to_str().expect("utf8");
        let before = snapshot(r, &[]);
        for args in [
            vec!["plan", "--root", rs, "--profile", "igx-orin"],
            vec!["apply", "--root", rs, "--profile", "igx-orin", "--yes"],
            vec![
                "apply",
                "--root",
                rs,
                "--profile",
                "igx-orin",
                "--dry-run",
                "--yes",
            ],
        ] {
            let o = run(&args);
            let t = text(&o);
            // A plan is a preview: it shows the units as they would run the packaged binary
            // and says that apply refuses them; apply (and its dry run) refuses.
            if args[0] == "plan" {
                assert_eq!(o.status.code(), Some(0), "{args:?}: {t}");
                assert!(
                    t.contains("apply will refuse: no installed daqtune binary"),
                    "{t}"
                );
                assert!(
                    t.contains("/etc/systemd/system/daqtune-gpu-clocks.service (new"),
                    "{t}"
                );
                assert!(t.contains("RUN+=\"/usr/bin/daqtune apply"), "{t}");
            } else {
                assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
            }
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
                assert!(t.contains(want), "{args:?}: `{want}` in {t}");
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
        for kind in ["governor-unit", "gpu-clocks-unit", "acs-unit", "udev-mrrs"] {
            let o = run(&["generate", kind, "--root", rs, "--profile", "igx-orin"]);
            assert_eq!(o.status.code(), Some(2), "{kind}: {}", text(&o));
            assert!(
                text(&o).contains("no installed daqtune binary"),
                "{}",
                text(&o)
            );
        }
        // Artifacts that run no binary are still printed.
        let o = run(&[
            "generate",
            "grub-dropin",
            "--root",
            rs,
            "--profile",
            "igx-orin",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }

    #[test]
    fn binary_free_settings_and_runtime_changes_go_ahead_without_a_binary() {
        let root = root_without_binary();
        let r = root.path();
        let rs = r.to_str().expect("utf8");
        let o = run(&[
            "apply",
            "--root",
            rs,
            "--profile",
            "igx-orin",
            "--only",
            "kernel.cmdline,hugepages",
            "--yes",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(r.join("etc/default/grub.d/99-daqtune.cfg").exists());
        // The runtime changes alone need no binary either (MRRS now, no udev rule).
        let o = run(&[
            "apply",
            "--root",
            rs,
            "--profile",
            "igx-orin",
            "--runtime-only",
            "--yes",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!((devctl(r, "0005:03:00.0") >> 12) & 7, 5);
        assert!(!r.join("etc/udev/rules.d/90-daqtune-mrrs.rules").exists());
        assert!(!r
            .join("etc/systemd/system/daqtune-gpu-clocks.service")
            .exists());
        let o = run(&["revert", "--root", rs, "--yes"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }

    #[test]
    fn exe_must_be_an_executable_file_in_the_root() {
        let root = root_without_binary();
        let r = root.path();
        let rs = r.to_str().expect("utf8");
        let opt = r.join("opt/daqtune/bin/daqtune");
        std::fs::create_dir_all(opt.parent().expect("p")).expect("mkdir");
        std::fs::write(&opt, b"#!/bin/sh\n").expect("w");
        std::fs::set_permissions(&opt, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let before = snapshot(r, &[]);
        for (exe, why) in [
            ("/opt/daqtune/bin/nope", "no such file"),
            ("/opt/daqtune/bin/daqtune", "not executable (mode 644)"),
            ("/opt/daqtune/bin", "not a regular file"),
            ("daqtune", "absolute"),
        ] {
            for cmd in [&["plan"][..], &["apply", "--yes"][..]] {
                let mut args = cmd.to_vec();
                args.extend(["--root", rs, "--profile", "igx-orin", "--exe", exe]);
                let o = run(&args);
                assert_eq!(
                    o.status.code(),
                    Some(2),
                    "{cmd:?} --exe {exe}: {}",
                    text(&o)
                );
                assert!(text(&o).contains(why), "{cmd:?} --exe {exe}: {}", text(&o));
            }
            let o = run(&[
                "generate",
                "governor-unit",
                "--root",
                rs,
                "--profile",
                "igx-orin",
                "--exe",
                exe,
            ]);
            assert_eq!(
                o.status.code(),
                Some(2),
                "generate --exe {exe}: {}",
                text(&o)
            );
        }
        assert!(diff_snapshots(&before, &snapshot(r, &[])).is_empty());
        // An executable --exe is what the units and the rule run.
        std::fs::set_permissions(&opt, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let o = run(&[
            "apply",
            "--root",
            rs,
            "--profile",
            "igx-orin",
            "--exe",
            "/opt/daqtune/bin/daqtune",
            "--yes",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
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
        let rs = r.to_str().expect("utf8");
        let p = r.join("usr/local/bin/daqtune");
        std::fs::create_dir_all(p.parent().expect("p")).expect("mkdir");
        std::fs::write(&p, b"#!/bin/sh\n").expect("w");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let o = run(&[
            "generate",
            "udev-mrrs",
            "--root",
            rs,
            "--profile",
            "igx-orin",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(
            text(&o).contains("RUN+=\"/usr/local/bin/daqtune apply"),
            "{}",
            text(&o)
        );
        // A non-executable /usr/bin/daqtune (a half-done install) is passed over.
        let u = r.join("usr/bin/daqtune");
        std::fs::write(&u, b"").expect("w");
        std::fs::set_permissions(&u, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let o = run(&[
            "generate",
            "governor-unit",
            "--root",
            rs,
            "--profile",
            "igx-orin",
        ]);
        assert!(
            text(&o).contains("ExecStart=/usr/local/bin/daqtune apply"),
            "{}",
            text(&o)
        );
    }
}

/// Issue 15: `daqtune.artifacts` judges what daqtune wrote (journal of the runs in effect, and
/// the fixed names): present, enabled, its binary executable, and the unit's last run
/// (under a root: the snapshot's record daqtune/units.json; without one, skip, never pass).
mod artifacts {
    use super::*;

    fn artifact_verdicts(root: &Path) -> Vec<(String, String, String)> {
        let rep = check_json(root, "igx-orin");
        rep["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .filter(|c| c["id"] == "daqtune.artifacts")
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
            format!(
                "{{\"schema\": \"daqtune.units/v1\", \"captured_unix\": 1, \"units\": [{units}]}}"
            ),
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
        let rs = r.to_str().expect("utf8");
        let vs = artifact_verdicts(r);
        assert_eq!(vs.len(), 1, "{vs:#?}");
        assert_eq!(vs[0].1, "n/a", "{vs:#?}");

        let o = run(&["apply", "--root", rs, "--profile", "igx-orin", "--yes"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
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
            v.2.contains("not enabled")
                && v.2.contains("systemctl enable daqtune-gpu-clocks.service"),
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
        let o = run(&["revert", "--root", rs, "--yes"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let vs = artifact_verdicts(r);
        assert_eq!(vs.len(), 1, "{vs:#?}");
        assert_eq!(vs[0].1, "n/a", "{vs:#?}");
    }

    /// A unit carrying daqtune's mark whose journal is gone is still found by its name.
    #[test]
    fn found_by_name_without_a_journal() {
        let root = prepared("igx-untuned", add_igx_pci);
        let r = root.path();
        let o = run(&[
            "generate",
            "governor-unit",
            "--root",
            r.to_str().expect("utf8"),
            "--profile",
            "igx-orin",
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let p = r.join("etc/systemd/system/daqtune-governor.service");
        std::fs::create_dir_all(p.parent().expect("p")).expect("mkdir");
        std::fs::write(&p, &o.stdout).expect("w");
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
        let rs = r.to_str().expect("utf8");
        let o = run(&["apply", "--root", rs, "--profile", "igx-orin", "--yes"]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        units_json(
            r,
            &state("mnt-huge.mount", "active", "mounted", "success", 0),
        );
        let tmp = tempfile::tempdir().expect("tmp");
        let snap = tmp.path().join("snap");
        let o = run(&[
            "snapshot",
            "--root",
            rs,
            "--profile",
            "igx-orin",
            "-o",
            snap.to_str().expect("utf8"),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let bin = snap.join("usr/bin/daqtune");
        let m = std::fs::metadata(&bin).expect("stand-in");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(m.len(), 0);
        assert_eq!(m.permissions().mode() & 0o777, 0o755);
        assert_eq!(artifact_verdicts(r), artifact_verdicts(&snap));
    }
}
