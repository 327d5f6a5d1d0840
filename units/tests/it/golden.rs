//! Golden files for every rendered artifact, plus the tools that consume them:
//! `systemd-analyze verify` for units, `sh -n` for the grub drop-in, and real `sh` sourcing
//! the grub defaults files to check [`grub::evaluate`].
//!
//! `UPDATE_GOLDEN=1 cargo test -p daqtune-units --test golden` rewrites the golden files;
//! review the diff before committing.

use daqtune_units::grub::{self, HugepageArgs, IsolationArgs, KernelArgSpec, KernelArgs};
use daqtune_units::network::{self, LinkMatch};
use daqtune_units::{etc, extlinux, systemd, udev, PciAddr};
use std::path::{Path, PathBuf};
use std::process::Command;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn check_golden(name: &str, actual: &str) {
    let path = golden_dir().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create)",
            path.display()
        )
    });
    assert_eq!(actual, expected, "golden file {name} differs");
}

fn igx_args() -> KernelArgs {
    KernelArgSpec {
        hugepages: vec![HugepageArgs {
            default_size: true,
            size: "1G".into(),
            count: 4,
        }],
        isolation: Some(IsolationArgs {
            isolated: "9-11".into(),
            irqaffinity: Some("0-8".into()),
            nohz_full: true,
            rcu_nocbs: true,
            rcu_nocb_poll: true,
        }),
        governor_performance: true,
        acs_redir_disable: vec![],
        extra: vec![],
    }
    .build()
    .expect("igx args")
}

fn spark_args() -> KernelArgs {
    KernelArgSpec {
        hugepages: vec![HugepageArgs {
            default_size: true,
            size: "1G".into(),
            count: 4,
        }],
        isolation: Some(IsolationArgs {
            isolated: "16-19".into(),
            irqaffinity: Some("0-15".into()),
            nohz_full: true,
            rcu_nocbs: true,
            rcu_nocb_poll: true,
        }),
        ..Default::default()
    }
    .build()
    .expect("spark args")
}

fn acs_args() -> KernelArgs {
    KernelArgSpec {
        acs_redir_disable: vec![pci("0005:02:00.0"), pci("0005:01:00.0")],
        extra: vec!["iommu.passthrough=1".into()],
        ..Default::default()
    }
    .build()
    .expect("acs args")
}

fn pci(s: &str) -> PciAddr {
    s.parse().expect("pci")
}

fn spark_pfs() -> Vec<PciAddr> {
    [
        "0000:01:00.0",
        "0000:01:00.1",
        "0002:01:00.0",
        "0002:01:00.1",
    ]
    .iter()
    .map(|s| pci(s))
    .collect()
}

const L4T_EXTLINUX: &str = "TIMEOUT 30\nDEFAULT primary\n\nMENU TITLE L4T boot options\n\nLABEL primary\n      MENU LABEL primary kernel\n      LINUX /boot/Image\n      FDT /boot/dtb/kernel_tegra234-p3701-0008-p3740-0002-nv.dtb\n      INITRD /boot/initrd\n      APPEND ${cbootargs} root=PARTUUID=6f5e1c3a-0e7d-4b3e-9a0c-2b8b9d0c7e11 rw rootwait rootfstype=ext4 console=ttyTCU0,115200 firmware_class.path=/etc/firmware fbcon=map:0 nospectre_bhb video=efifb:off console=tty0\n\n# When testing a custom kernel, it is recommended that you create a backup in\n# case the new kernel fails to boot properly.\n";

#[test]
fn golden_kernel_args() {
    check_golden("kernel-args-igx.txt", &igx_args().render_plain());
    check_golden(
        "grub-99-daqtune-igx.cfg",
        &grub::render_dropin(&igx_args(), "igx-orin").expect("r"),
    );
    check_golden(
        "grub-daqiri-tuning-spark.cfg",
        &grub::render_dropin(&spark_args(), "dgx-spark").expect("r"),
    );
    check_golden(
        "grub-acs.cfg",
        &grub::render_dropin(&acs_args(), "generic-dgpu").expect("r"),
    );
    check_golden("extlinux-in.conf", L4T_EXTLINUX);
    let ext = extlinux::add_entry(L4T_EXTLINUX, &igx_args()).expect("extlinux");
    check_golden("extlinux-igx.conf", &ext);
    assert_eq!(extlinux::add_entry(&ext, &igx_args()).expect("again"), ext);
}

#[test]
fn golden_units_and_rules() {
    let exe = daqtune_units::INSTALLED_EXE[0];
    check_golden(
        "90-daqtune-mrrs-spark.rules",
        &udev::mrrs_rule(exe, "dgx-spark", &spark_pfs()).expect("rule"),
    );
    check_golden(
        "90-daqtune-mrrs-igx.rules",
        &udev::mrrs_rule(exe, "igx-orin", &[pci("0005:03:00.0"), pci("0005:03:00.1")])
            .expect("rule"),
    );
    check_golden(
        "daqtune-governor.service",
        &systemd::governor_unit(exe, "igx-orin").render().expect("u"),
    );
    check_golden(
        "daqtune-gpu-clocks.service",
        &systemd::gpu_clocks_unit(exe, "igx-orin")
            .render()
            .expect("u"),
    );
    check_golden(
        "daqtune-acs.service",
        &systemd::acs_unit(exe, "generic-dgpu").render().expect("u"),
    );
    let (name, text) = systemd::hugetlbfs_mount("/mnt/huge", "1G", "igx-orin").expect("mount");
    assert_eq!(name, "mnt-huge.mount");
    check_golden("mnt-huge.mount", &text);
    check_golden(
        "modules-load-daqtune.conf",
        &etc::modules_load(&["nvidia-peermem"], "igx-orin").expect("m"),
    );
    check_golden(
        "sysctl-90-daqtune.conf",
        &etc::sysctl_conf(
            &[
                ("net.core.rmem_max", "268435456"),
                ("net.ipv4.tcp_rmem", "4096 87380 268435456"),
            ],
            "generic-dgpu",
        )
        .expect("s"),
    );
}

#[test]
fn golden_network() {
    let np = network::netplan(&[("eth1", 9000), ("eth0", 9000)], "igx-orin").expect("netplan");
    assert_eq!(np.mode, 0o600);
    check_golden("netplan-90-daqtune.yaml", &np.text);
    let nm = network::nm_keyfile("daqiri", "enp1s0f0np0", 9000, &[], "dgx-spark").expect("nm");
    assert_eq!(nm.mode, 0o600);
    check_golden("nm-daqiri-enp1s0f0np0.nmconnection", &nm.text);
    let nm2 = network::nm_keyfile(
        "daqiri",
        "enP2p1s0f0np0",
        9000,
        &["2.2.2.2/24"],
        "dgx-spark",
    )
    .expect("nm");
    check_golden("nm-daqiri-enP2p1s0f0np0.nmconnection", &nm2.text);
    let link = network::networkd_link(
        "eth0",
        &LinkMatch::Mac("48:B0:2D:F4:07:FB".into()),
        9000,
        "igx-orin",
    )
    .expect("link");
    assert_eq!(link.path, "/etc/systemd/network/10-daqtune-eth0.link");
    check_golden("10-daqtune-eth0.link", &link.text);
    let link2 = network::networkd_link(
        "eth1",
        &LinkMatch::PciPath(pci("0005:03:00.1")),
        9000,
        "igx-orin",
    )
    .expect("link");
    check_golden("10-daqtune-eth1.link", &link2.text);
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Every unit daqtune writes passes `systemd-analyze verify`. The units name
/// /usr/bin/daqtune, which verify requires to exist: the test renders them with an executable
/// stand-in in a temporary directory instead (the path is the only difference).
#[test]
fn units_pass_systemd_analyze_verify() {
    if !have("systemd-analyze") {
        daqtune_testkit::skip("systemd-analyze is not installed (apt-get install systemd)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = dir.path().join("bin/daqtune");
    std::fs::create_dir_all(exe.parent().expect("p")).expect("mkdir");
    std::fs::write(&exe, "#!/bin/sh\nexit 0\n").expect("write exe");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let exe_s = exe.to_str().expect("utf8 path");
    let units = dir.path().join("units");
    std::fs::create_dir_all(&units).expect("mkdir");
    let mut files = Vec::new();
    for u in [
        systemd::governor_unit(exe_s, "igx-orin"),
        systemd::gpu_clocks_unit(exe_s, "igx-orin"),
        systemd::acs_unit(exe_s, "generic-dgpu"),
    ] {
        let p = units.join(&u.name);
        std::fs::write(&p, u.render().expect("render")).expect("write");
        files.push(p);
    }
    let (name, text) = systemd::hugetlbfs_mount("/mnt/huge", "1G", "igx-orin").expect("mount");
    let p = units.join(name);
    std::fs::write(&p, text).expect("write");
    files.push(p);
    // `--man=no`: the units name man:daqtune(8), which the package installs and this test
    // environment does not have.
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&files)
        .env("SYSTEMD_LOG_LEVEL", "warning")
        .output()
        .expect("run systemd-analyze");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("Failed to initialize manager")
        || stderr.contains("Failed to setup working directory")
    {
        daqtune_testkit::skip(&format!(
            "systemd-analyze verify cannot start a manager in this container: {stderr}"
        ));
        return;
    }
    assert!(
        out.status.success(),
        "systemd-analyze verify failed: {stderr}"
    );
    // Warnings about our own files (unknown keys, bad settings) fail the test too; messages
    // about units that are not installed here (nvidia-persistenced) do not.
    let ours: Vec<&str> = stderr
        .lines()
        .filter(|l| {
            l.contains(units.to_str().expect("utf8"))
                || l.contains("daqtune-")
                || l.contains("mnt-huge")
        })
        .collect();
    assert!(ours.is_empty(), "systemd-analyze verify warned: {ours:#?}");

    // A broken unit must fail the same check, or the check proves nothing.
    let bad = units.join("mnt-hugex.mount");
    let (_, text) = systemd::hugetlbfs_mount("/mnt/huge", "1G", "igx-orin").expect("mount");
    std::fs::write(&bad, text).expect("write");
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&bad)
        .output()
        .expect("run");
    assert!(
        !out.status.success(),
        "a mount unit whose name does not match Where= must fail verify"
    );
}

#[test]
fn grub_dropins_pass_sh_n() {
    for (args, profile) in [
        (igx_args(), "igx-orin"),
        (spark_args(), "dgx-spark"),
        (acs_args(), "x"),
    ] {
        let text = grub::render_dropin(&args, profile).expect("render");
        let out = Command::new("sh")
            .arg("-n")
            .arg("-c")
            .arg(&text)
            .output()
            .expect("sh");
        assert!(
            out.status.success(),
            "sh -n: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The check catches a broken file.
    let out = Command::new("sh")
        .args(["-n", "-c", "GRUB_CMDLINE_LINUX=\"x"])
        .output()
        .expect("sh");
    assert!(!out.status.success());
}

/// Source /etc/default/grub and every grub.d/*.cfg with real `sh`, as grub-mkconfig does,
/// and print the two command-line variables.
fn sh_source(root: &Path) -> (String, String) {
    let script = r#"set -e
. ./grub
for x in ./grub.d/*.cfg; do
  if [ -e "$x" ]; then . "$x"; fi
done
printf '%s\n%s' "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT""#;
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(root)
        .env("LC_ALL", "C")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("sh");
    assert!(
        out.status.success(),
        "sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).expect("utf8");
    let (a, b) = s.split_once('\n').expect("two lines");
    (a.to_string(), b.to_string())
}

fn ours_eval(root: &Path) -> (String, String, Vec<(String, String)>) {
    let mut files = vec![(
        "/etc/default/grub".to_string(),
        std::fs::read_to_string(root.join("grub")).expect("grub"),
    )];
    let names: Vec<String> = std::fs::read_dir(root.join("grub.d"))
        .expect("dir")
        .filter_map(|e| e.ok().and_then(|e| e.file_name().into_string().ok()))
        .collect();
    for n in grub::dropin_order(&names) {
        let t = std::fs::read_to_string(root.join("grub.d").join(&n)).expect("read");
        files.push((format!("/etc/default/grub.d/{n}"), t));
    }
    let ev = grub::evaluate(&files);
    (
        ev.get(grub::CMDLINE).to_string(),
        ev.get(grub::CMDLINE_DEFAULT).to_string(),
        files,
    )
}

const UBUNTU_GRUB: &str = r#"# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
# For full documentation of the options in this file, see:
#   info -f grub -n 'Simple configuration'

GRUB_DEFAULT=0
GRUB_TIMEOUT_STYLE=hidden
GRUB_TIMEOUT=0
GRUB_DISTRIBUTOR=`( . /etc/os-release; echo ${NAME:-Ubuntu} ) 2>/dev/null || echo Ubuntu`
GRUB_CMDLINE_LINUX_DEFAULT="quiet splash isolcpus=2-3"
GRUB_CMDLINE_LINUX="console=ttyS0,115200n8 'quoted arg'"

# Uncomment to enable BadRAM filtering, modify to suit your needs
#GRUB_BADRAM="0x01234567,0xfefefefe,0x89abcdef,0xefefefef"
"#;

#[test]
fn evaluation_matches_sh_sourcing() {
    let cases: Vec<Vec<(&str, String)>> = vec![
        // Stock Ubuntu defaults, the daqtune drop-in, and a cloud drop-in sorted before it.
        vec![
            ("50-cloudimg-settings.cfg", "# Cloud Image specific Grub settings\nGRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT console=tty1\"\nGRUB_TIMEOUT=0\n".into()),
            ("99-daqtune.cfg", grub::render_dropin(&igx_args(), "igx-orin").expect("r")),
        ],
        // A later drop-in that assigns instead of appending, and a hidden/backup file that
        // the glob does not pick up.
        vec![
            ("99-daqtune.cfg", grub::render_dropin(&acs_args(), "x").expect("r")),
            ("99-zz-vendor.cfg", "GRUB_CMDLINE_LINUX='vendor=1' # resets\n".into()),
            (".hidden.cfg", "GRUB_CMDLINE_LINUX=hidden\n".into()),
            ("99-daqtune.cfg.bak", "GRUB_CMDLINE_LINUX=bak\n".into()),
        ],
        // Braces, continuation lines, several assignments on one line, export.
        vec![
            ("10-a.cfg", "A=one B=\"${A} two\"\nexport GRUB_CMDLINE_LINUX=\"${GRUB_CMDLINE_LINUX} $B \\\n  tail\"\n".into()),
            ("daqiri-tuning.cfg", grub::render_dropin(&spark_args(), "dgx-spark").expect("r")),
            ("Z.cfg", "GRUB_CMDLINE_LINUX_DEFAULT=\"\"\n".into()),
        ],
    ];
    for (i, dropins) in cases.iter().enumerate() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join("grub"), UBUNTU_GRUB).expect("w");
        std::fs::create_dir(dir.path().join("grub.d")).expect("mkdir");
        for (n, t) in dropins {
            std::fs::write(dir.path().join("grub.d").join(n), t).expect("w");
        }
        let (sh_l, sh_d) = sh_source(dir.path());
        let (ev_l, ev_d, files) = ours_eval(dir.path());
        assert_eq!(ev_l, sh_l, "case {i}: GRUB_CMDLINE_LINUX");
        assert_eq!(ev_d, sh_d, "case {i}: GRUB_CMDLINE_LINUX_DEFAULT");
        let ours = files
            .iter()
            .find(|(n, _)| n.ends_with("99-daqtune.cfg") || n.ends_with("daqiri-tuning.cfg"))
            .expect("ours")
            .0
            .clone();
        let found = grub::analyze(&files, &ours, &igx_args());
        match i {
            0 => {
                assert!(sh_l.ends_with(&igx_args().words().join(" ")), "{sh_l}");
                assert!(found.iter().any(|f| matches!(f, grub::Finding::Conflict { param, file, line: 10, .. } if param == "isolcpus" && file == "/etc/default/grub")), "{found:#?}");
            }
            1 => {
                assert_eq!(sh_l, "vendor=1");
                assert!(
                    found.contains(&grub::Finding::LaterOverride {
                        file: "/etc/default/grub.d/99-zz-vendor.cfg".into(),
                        line: 1
                    }),
                    "{found:#?}"
                );
            }
            _ => {
                assert!(
                    sh_l.contains("one two   tail default_hugepagesz=1G"),
                    "{sh_l}"
                );
                assert!(!found.iter().any(|f| f.is_blocking()), "{found:#?}");
            }
        }
        // The backquoted GRUB_DISTRIBUTOR is not modelled and does not matter.
        assert!(
            !found
                .iter()
                .any(|f| matches!(f, grub::Finding::Unmodelled { .. })),
            "{found:#?}"
        );
    }
}
