//! The boot configuration a plan writes and what it says about the host's own (issue 5):
//! another grub file that sets or resets the arguments is named, an extlinux host gets a new
//! default label that revert takes back, a host with neither is told the arguments, and
//! `--only cpu.governor` persists through its unit; a DAQIRI configuration (`--config`)
//! derives the plan and is kept for later runs. Through the engine's API; moved from
//! tune/tests/apply_acceptance.rs (issue 24).

use crate::common;

use common::drive::*;
use common::testroot::*;
use daqtune_engine::apply::Selection;
use std::path::PathBuf;

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
    let t = plan(r, "igx-orin", &Selection::default());
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
    let (code, out) = apply(r, "igx-orin", &only(&["kernel.cmdline"]));
    assert_eq!(code, 0, "{out}");
    let new = read(r, "boot/extlinux/extlinux.conf");
    assert!(new.contains("DEFAULT daqtune\n"), "{new}");
    assert!(
        new.contains("LABEL primary\n      MENU LABEL primary kernel\n"),
        "the old entry is kept: {new}"
    );
    // kernel.cmdline's words only: the hugepage reservation is hugepages' part (issue 42).
    assert!(
        new.contains("APPEND ${cbootargs} root=PARTUUID=8c1a7a1e rw rootwait isolcpus=8-11 "),
        "{new}"
    );
    assert!(!new.contains("hugepages="), "{new}");
    // No grub drop-in on an extlinux host (an empty grub.d directory may exist).
    let dropins = std::fs::read_dir(r.join("etc/default/grub.d"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(dropins, 0, "no grub drop-in on an extlinux host");
    let p = plan(r, "igx-orin", &only(&["kernel.cmdline"]));
    assert!(
        p.contains("nothing to change") && p.contains("pending-reboot"),
        "{p}"
    );
    assert_reverted(r, &before);
}

#[test]
fn no_boot_config_prints_the_arguments() {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    std::fs::remove_file(r.join("etc/default/grub")).expect("rm grub");
    let p = plan(r, "igx-orin", &only(&["kernel.cmdline", "hugepages"]));
    assert!(
        p.contains("add these kernel arguments to your boot manager: default_hugepagesz=1G hugepagesz=1G hugepages=4 isolcpus=8-11"),
        "{p}"
    );
    // Each setting its own words (issue 42).
    let p = plan(r, "igx-orin", &only(&["kernel.cmdline"]));
    assert!(
        p.contains("add these kernel arguments to your boot manager: isolcpus=8-11 "),
        "{p}"
    );
}

/// `--only cpu.governor` persists the governor through its own part of the kernel-argument
/// drop-in (`cpufreq.default_governor=performance`, the kernel >= 5.9 way) and nothing else of
/// it; no unit (issue 42: each setting owns its words of the shared file).
#[test]
fn only_governor_still_persists() {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    let p = plan(r, "igx-orin", &only(&["cpu.governor"]));
    assert!(!p.contains("daqtune-governor.service"), "{p}");
    assert!(
        p.contains(
            "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX cpufreq.default_governor=performance\"\n"
        ),
        "{p}"
    );
    let p = plan(r, "igx-orin", &Selection::default());
    assert!(!p.contains("daqtune-governor.service"), "{p}");
    assert!(p.contains("cpufreq.default_governor=performance"), "{p}");
}

#[test]
fn config_derives_the_plan() {
    let root = prepared("igx-untuned", add_igx_pci);
    let r = root.path();
    let cfg = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/configs/raw_hds_igx.yaml");
    let with_config = |cfg: &std::path::Path| Selection {
        config: Some(cfg.to_path_buf()),
        ..Default::default()
    };
    let (code, out) = apply(r, "igx-orin", &with_config(&cfg));
    assert_eq!(code, 0, "{out}");
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
    let (code, out) = apply(r, "igx-orin", &Selection::default());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("keeping --config"), "{out}");
    assert!(out.contains("nothing to change"), "{out}");
    let fresh = Selection {
        fresh: true,
        ..Default::default()
    };
    let p = plan(r, "igx-orin", &fresh);
    assert!(!p.contains("keeping"), "{p}");
    assert!(p.contains("99-daqtune.cfg"), "{p}");

    // A configuration that is gone is an error for a full apply, a note for a runtime-only one
    // (boot units and the udev rule must not fail on it).
    let (code, out) = revert(r);
    assert_eq!(code, 0, "{out}");
    let kept = tempfile::tempdir().expect("tmp");
    let copy = kept.path().join("app.yaml");
    std::fs::copy(&cfg, &copy).expect("copy config");
    let (code, out) = apply(r, "igx-orin", &with_config(&copy));
    assert_eq!(code, 0, "{out}");
    std::fs::remove_file(&copy).expect("remove config");
    let gone = try_apply(r, "igx-orin", &Selection::default()).expect_err("a gone --config");
    assert!(gone.to_string().contains("which is gone"), "{gone}");
    let runtime = Selection {
        runtime_only: true,
        ..Default::default()
    };
    let (code, out) = apply(r, "igx-orin", &runtime);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("goes on without it"), "{out}");

    // After a revert nothing is kept.
    let (code, out) = revert(r);
    assert_eq!(code, 0, "{out}");
    let p = plan(r, "igx-orin", &Selection::default());
    assert!(!p.contains("keeping"), "{p}");
}
