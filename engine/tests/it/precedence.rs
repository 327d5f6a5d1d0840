//! Issue 15 section 2 (and issue 18's last bullet): another file that decides a setting daqtune
//! writes is named by `check` and `plan` (and so by `apply`, which prints its plan), and
//! `kernel.cmdline` is `pending-reboot` only when the next boot really carries daqtune's
//! arguments. Each test builds its host root from a fixture at test time.

use crate::common::drive::globals as g;
use crate::common::drive::plan_only as plan;
use crate::common::drive::write;
use crate::common::testroot;
use daqtune_render::apply::Text;
use daqtune_testkit::fixture;

use daqtune_engine::apply::{run_apply_with, ApplyOptions, Selection};
use daqtune_engine::commands::load_profile;
use daqtune_engine::context::Context;
use daqtune_engine::facts::Facts;
use daqtune_engine::hostio::setters::FsWriter;
use daqtune_engine::tunables::{run_checks, RunOptions};
use daqtune_engine::verdict::{Status, Verdict};
use daqtune_probe::Host;
use std::path::Path;

fn root(name: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    testroot::copy_tree(&fixture(name), d.path());
    testroot::install_daqtune(d.path());
    d
}

fn apply(root: &Path, profile: &str, only: &[&str]) -> String {
    apply_sel(root, profile, only, false)
}

/// The boot configuration of `only`, nothing on the running host (`--persist-only`): the
/// kernel arguments wait for a reboot, the live pools stay as they are.
fn apply_boot(root: &Path, profile: &str, only: &[&str]) -> String {
    apply_sel(root, profile, only, true)
}

fn apply_sel(root: &Path, profile: &str, only: &[&str], persist_only: bool) -> String {
    let a = ApplyOptions {
        sel: Selection {
            only: only.iter().map(|s| s.to_string()).collect(),
            persist_only,
            ..Default::default()
        },
        yes: true,
        ..Default::default()
    };
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let code = run_apply_with(
        &g(root, profile),
        &a,
        &mut FsWriter::new(),
        &mut Text::new(&mut o, &mut e),
    );
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o),
        String::from_utf8_lossy(&e)
    );
    assert!(matches!(code, Ok(0)), "apply: {code:?}\n{out}");
    out
}

fn verdicts(root: &Path, profile: &str, id: &str) -> Vec<Verdict> {
    let lp = load_profile(profile).expect("profile");
    let host = Host::at(root).expect("root");
    let facts = Facts::new(&host);
    let ctx = Context::with_facts(&facts, &lp);
    run_checks(
        &ctx,
        &RunOptions {
            only: vec![id.to_string()],
        },
    )
}

fn one(root: &Path, profile: &str, id: &str) -> Verdict {
    let vs = verdicts(root, profile, id);
    assert_eq!(vs.len(), 1, "{vs:#?}");
    vs.into_iter().next().expect("one")
}

const ZZ: &str = "etc/default/grub.d/zz-override.cfg";

#[test]
fn a_later_dropin_that_resets_the_command_line_is_named_and_fails() {
    let r = root("igx-untuned");
    let r = r.path();
    // The reservation is hugepages' words of the drop-in (issue 42): asked for with it, at
    // boot only, so the live pool does not pass it now.
    apply_boot(r, "igx-orin", &["kernel.cmdline", "hugepages"]);
    assert_eq!(
        one(r, "igx-orin", "kernel.cmdline").status,
        Status::PendingReboot
    );
    assert_eq!(
        one(r, "igx-orin", "hugepages").status,
        Status::PendingReboot
    );

    // A foreign drop-in sorting after ours that assigns instead of appending.
    write(r, ZZ, "GRUB_CMDLINE_LINUX=\"console=ttyS0\"\n");
    let v = one(r, "igx-orin", "kernel.cmdline");
    assert_eq!(v.status, Status::Fail, "{v:#?}");
    assert!(
        v.message.contains(
            "/etc/default/grub.d/zz-override.cfg:1 assigns GRUB_CMDLINE_LINUX after daqtune's drop-in"
        ) && v.message.contains("the next boot will not"),
        "{v:#?}"
    );
    let h = one(r, "igx-orin", "hugepages");
    assert_eq!(h.status, Status::Fail, "{h:#?}");
    assert!(h.message.contains("zz-override.cfg:1"), "{h:#?}");
    // plan and apply (which prints its plan) name it.
    let p = plan(r, "igx-orin", &["kernel.cmdline"]);
    assert!(
        p.contains("next boot will not carry it") && p.contains("zz-override.cfg:1"),
        "{p}"
    );
    let a = apply(r, "igx-orin", &["kernel.cmdline"]);
    assert!(a.contains("zz-override.cfg:1"), "{a}");

    // One that appends keeps our words: pending again.
    write(
        r,
        ZZ,
        "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX console=ttyS0\"\n",
    );
    assert_eq!(
        one(r, "igx-orin", "kernel.cmdline").status,
        Status::PendingReboot
    );
    // One that sets GRUB_CMDLINE_LINUX_DEFAULT with another isolcpus= (later on the line: it
    // wins for the kernel).
    write(r, ZZ, "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet isolcpus=1\"\n");
    let v = one(r, "igx-orin", "kernel.cmdline");
    assert_eq!(v.status, Status::Fail, "{v:#?}");
    assert!(
        v.message
            .contains("zz-override.cfg:1 already sets `isolcpus=1` in GRUB_CMDLINE_LINUX_DEFAULT"),
        "{v:#?}"
    );
}

/// The words our drop-in carries, as the kernel sees them.
fn dropin_words(r: &Path) -> Vec<String> {
    let t = std::fs::read_to_string(r.join("etc/default/grub.d/99-daqtune.cfg")).expect("drop-in");
    let line = t
        .lines()
        .find(|l| l.starts_with("GRUB_CMDLINE_LINUX="))
        .expect("assignment");
    line.trim_start_matches("GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX ")
        .trim_end_matches('"')
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// A grub.cfg as Debian's update-grub writes it, with `default` and the linux lines given.
fn grub_cfg(default: &str, simple: &str, advanced: &str) -> String {
    format!(
        "if [ -s $prefix/grubenv ]; then\n  load_env\nfi\nif [ \"${{next_entry}}\" ] ; then\n   set default=\"${{next_entry}}\"\n   set next_entry=\n   save_env next_entry\nelse\n   set default=\"{default}\"\nfi\nmenuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple-x' {{\n\tlinux\t/boot/vmlinuz-6.1.0-18-arm64 root=UUID=x ro {simple}\n}}\nsubmenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-x' {{\n\tmenuentry 'Debian GNU/Linux, with Linux 6.1.0-10-arm64' $menuentry_id_option 'gnulinux-6.1.0-10-arm64-advanced-x' {{\n\t\tlinux\t/boot/vmlinuz-6.1.0-10-arm64 root=UUID=x ro {advanced}\n\t}}\n}}\n"
    )
}

#[test]
fn grub_cfg_says_what_the_next_boot_passes() {
    let r = root("igx-untuned");
    let r = r.path();
    apply(r, "igx-orin", &["kernel.cmdline"]);
    let ours = dropin_words(r).join(" ");
    // update-grub has not run since the drop-in was written.
    write(r, "boot/grub/grub.cfg", &grub_cfg("0", "quiet", "quiet"));
    let v = one(r, "igx-orin", "kernel.cmdline");
    assert_eq!(v.status, Status::Fail, "{v:#?}");
    assert!(
        v.message.contains(
            "the default entry `Debian GNU/Linux` of /boot/grub/grub.cfg (line 12; set default=\"0\" at line 9) lacks"
        ) && v.message.contains("sudo update-grub"),
        "{v:#?}"
    );
    // It has: pending.
    write(
        r,
        "boot/grub/grub.cfg",
        &grub_cfg("0", &format!("quiet {ours}"), "quiet"),
    );
    assert_eq!(
        one(r, "igx-orin", "kernel.cmdline").status,
        Status::PendingReboot
    );
    // GRUB_DEFAULT=saved, and the saved entry is the old kernel without our words.
    write(
        r,
        "boot/grub/grub.cfg",
        &grub_cfg("${saved_entry}", &format!("quiet {ours}"), "quiet"),
    );
    write(
        r,
        "boot/grub/grubenv",
        "# GRUB Environment Block\nsaved_entry=gnulinux-advanced-x>gnulinux-6.1.0-10-arm64-advanced-x\n",
    );
    let v = one(r, "igx-orin", "kernel.cmdline");
    assert_eq!(v.status, Status::Fail, "{v:#?}");
    assert!(
        v.message.contains(
            "`Advanced options for Debian GNU/Linux > Debian GNU/Linux, with Linux 6.1.0-10-arm64`"
        ) && v.message.contains("saved_entry="),
        "{v:#?}"
    );
    // A grub.cfg daqtune cannot follow is said to be so, and the plan says it too.
    write(
        r,
        "boot/grub/grub.cfg",
        "set default=\"${saved_entry}\"\ninsmod blscfg\nblscfg\n",
    );
    let p = plan(r, "igx-orin", &["kernel.cmdline"]);
    assert!(p.contains("pending-reboot"), "{p}");
}

/// The running kernel has the arguments (booted after apply), and a later drop-in would drop
/// them at the next update-grub: the check names it although /proc/cmdline is right (the VM
/// lifecycle's step 5).
#[test]
fn a_host_booted_with_the_arguments_still_fails_when_the_next_boot_drops_them() {
    let r = root("igx-untuned");
    let r = r.path();
    apply(r, "igx-orin", &["kernel.cmdline"]);
    let ours = dropin_words(r).join(" ");
    let cmdline = std::fs::read_to_string(r.join("proc/cmdline")).expect("cmdline");
    write(r, "proc/cmdline", &format!("{} {ours}\n", cmdline.trim()));
    write(r, "sys/devices/system/cpu/isolated", "8-11\n");
    write(r, "sys/devices/system/cpu/nohz_full", "8-11\n");
    let v = one(r, "igx-orin", "kernel.cmdline");
    assert_eq!(v.status, Status::Pass, "{v:#?}");
    write(r, ZZ, "GRUB_CMDLINE_LINUX=\"console=ttyS0\"\n");
    let v = one(r, "igx-orin", "kernel.cmdline");
    assert_eq!(v.status, Status::Fail, "{v:#?}");
    assert!(
        v.message.starts_with("isolation consistent now")
            && v.message.contains("zz-override.cfg:1"),
        "{v:#?}"
    );
    std::fs::remove_file(r.join(ZZ)).expect("rm");
    assert_eq!(one(r, "igx-orin", "kernel.cmdline").status, Status::Pass);
}

const L4T: &str = "TIMEOUT 30\nDEFAULT primary\n\nMENU TITLE L4T boot options\n\nLABEL primary\n      MENU LABEL primary kernel\n      LINUX /boot/Image\n      INITRD /boot/initrd\n      APPEND ${cbootargs} root=PARTUUID=8c1a7a1e rw rootwait\n";
const EXTLINUX: &str = "boot/extlinux/extlinux.conf";

fn extlinux_root() -> tempfile::TempDir {
    let d = root("igx-untuned");
    std::fs::remove_file(d.path().join("etc/default/grub")).expect("rm grub");
    write(d.path(), EXTLINUX, L4T);
    d
}

#[test]
fn extlinux_pending_only_when_its_default_boots_daqtunes_entry() {
    let d = extlinux_root();
    let r = d.path();
    // The reservation is hugepages' words of the entry (issue 42): asked for with it, at
    // boot only, so the live pool does not pass it now.
    apply_boot(r, "igx-orin", &["kernel.cmdline", "hugepages"]);
    let conf = std::fs::read_to_string(r.join(EXTLINUX)).expect("conf");
    assert!(conf.contains("DEFAULT daqtune\n"), "{conf}");
    // Written and booted by the default: a reboot applies it.
    let v = one(r, "igx-orin", "kernel.cmdline");
    assert_eq!(v.status, Status::PendingReboot, "{v:#?}");
    assert!(
        v.message
            .contains("/boot/extlinux/extlinux.conf already carries"),
        "{v:#?}"
    );
    assert_eq!(
        one(r, "igx-orin", "hugepages").status,
        Status::PendingReboot
    );

    // DEFAULT set back to the old label (an L4T update rewrites the file this way).
    write(
        r,
        EXTLINUX,
        &conf.replace("DEFAULT daqtune", "DEFAULT primary"),
    );
    let v = one(r, "igx-orin", "kernel.cmdline");
    assert_eq!(v.status, Status::Fail, "{v:#?}");
    assert!(
        v.message
            .contains("/boot/extlinux/extlinux.conf:2: DEFAULT boots `primary`, not daqtune's entry `daqtune`"),
        "{v:#?}"
    );
    let p = plan(r, "igx-orin", &["kernel.cmdline"]);
    assert!(p.contains("extlinux.conf"), "{p}");

    // ONTIMEOUT after DEFAULT: U-Boot boots that one.
    write(r, EXTLINUX, &format!("{conf}ONTIMEOUT primary\n"));
    let v = one(r, "igx-orin", "kernel.cmdline");
    assert_eq!(v.status, Status::Fail, "{v:#?}");
    assert!(v.message.contains("ONTIMEOUT boots `primary`"), "{v:#?}");
    let p = plan(r, "igx-orin", &["kernel.cmdline"]);
    assert!(p.contains("ONTIMEOUT boots `primary`"), "{p}");

    // Our entry is the default but its APPEND lost the isolation.
    write(r, EXTLINUX, &conf.replace(" isolcpus=8-11", ""));
    let v = one(r, "igx-orin", "kernel.cmdline");
    assert_ne!(v.status, Status::PendingReboot, "{v:#?}");
}

fn sysctl_profile(dir: &Path) -> String {
    let p = dir.join("sock.yaml");
    std::fs::write(
        &p,
        "name: sock\nextends: generic-dgpu\nsysctl:\n  enabled: true\n  values:\n    net.core.rmem_max: \"268435456\"\n",
    )
    .expect("profile");
    p.display().to_string()
}

#[test]
fn a_sysctl_file_after_ours_is_named_with_its_line() {
    let d = root("x86-2s");
    let r = d.path();
    let prof = sysctl_profile(r);
    let at_boot = |r: &Path| -> Vec<Verdict> {
        verdicts(r, &prof, "net.sysctl")
            .into_iter()
            .filter(|v| v.subject.ends_with("at boot"))
            .collect()
    };
    assert!(at_boot(r).is_empty());
    // A file sorting before ours, and one after ours that raises the value: no matter.
    write(r, "etc/sysctl.d/10-early.conf", "net.core.rmem_max = 1\n");
    write(
        r,
        "usr/lib/sysctl.d/99-big.conf",
        "net.core.rmem_max = 536870912\n",
    );
    assert!(at_boot(r).is_empty(), "{:#?}", at_boot(r));
    // One after ours that lowers it (Debian's /etc/sysctl.conf comes in as 99-sysctl.conf).
    write(
        r,
        "etc/sysctl.conf",
        "# kernel tuning\nnet.core.rmem_max=212992\n",
    );
    std::os::unix::fs::symlink("../sysctl.conf", r.join("etc/sysctl.d/99-sysctl.conf"))
        .expect("link");
    let vs = at_boot(r);
    assert_eq!(vs.len(), 1, "{vs:#?}");
    assert_eq!(vs[0].status, Status::Warn);
    assert!(
        vs[0]
            .message
            .starts_with("/etc/sysctl.d/99-sysctl.conf:2 sets net.core.rmem_max = 212992 after daqtune's /etc/sysctl.d/90-daqtune.conf"),
        "{vs:#?}"
    );
    let p = plan(r, &prof, &["net.sysctl"]);
    assert!(
        p.contains("/etc/sysctl.d/99-sysctl.conf:2 sets net.core.rmem_max"),
        "{p}"
    );
    // A same-named file in /etc masks the one in /usr/lib.
    write(r, "etc/sysctl.d/99-big.conf", "# masked\n");
    let vs = at_boot(r);
    assert_eq!(vs.len(), 1, "{vs:#?}");
}

#[test]
fn irqbalance_ban_lists_are_named() {
    let d = root("igx-untuned");
    let r = d.path();
    let balance = |r: &Path| -> Vec<Verdict> {
        verdicts(r, "igx-orin", "irq.affinity")
            .into_iter()
            .filter(|v| v.subject == "irqbalance")
            .collect()
    };
    write(
        r,
        "etc/default/irqbalance",
        "IRQBALANCE_BANNED_CPULIST=0-1\n",
    );
    // Not enabled, not running: its configuration decides nothing.
    assert!(balance(r).is_empty());
    write(
        r,
        "lib/systemd/system/irqbalance.service",
        "[Service]\nEnvironmentFile=-/etc/default/irqbalance\nExecStart=/usr/sbin/irqbalance --foreground $IRQBALANCE_ARGS\n",
    );
    std::fs::create_dir_all(r.join("etc/systemd/system/multi-user.target.wants")).expect("mkdir");
    std::os::unix::fs::symlink(
        "/lib/systemd/system/irqbalance.service",
        r.join("etc/systemd/system/multi-user.target.wants/irqbalance.service"),
    )
    .expect("link");
    let vs = balance(r);
    assert_eq!(vs.len(), 2, "{vs:#?}");
    assert!(vs.iter().all(|v| v.status == Status::Warn));
    assert!(
        vs[0]
            .message
            .contains("/etc/default/irqbalance:1 sets IRQBALANCE_BANNED_CPULIST=0-1")
            && vs[0].message.contains("isolated CPUs 8-11 unbanned"),
        "{vs:#?}"
    );
    assert!(vs[1].message.contains("housekeeping CPUs 0-1"), "{vs:#?}");
    let p = plan(r, "igx-orin", &["kernel.cmdline"]);
    assert!(p.contains("/etc/default/irqbalance:1"), "{p}");
    // The mask banning exactly the isolated CPUs is what irqbalance would do itself.
    write(
        r,
        "etc/default/irqbalance",
        "IRQBALANCE_BANNED_CPUS=00000f00\n",
    );
    assert!(balance(r).is_empty(), "{:#?}", balance(r));
}

#[test]
fn tuned_names_its_active_profile() {
    let d = root("x86-2s");
    let r = d.path();
    write(r, "etc/tuned/active_profile", "throughput-performance\n");
    let vs: Vec<Verdict> = verdicts(r, "generic-dgpu", "cpu.governor")
        .into_iter()
        .filter(|v| v.subject == "services")
        .collect();
    assert_eq!(vs.len(), 1, "{vs:#?}");
    assert!(
        vs[0].message.contains(
            "tuned.service (enabled, profile `throughput-performance` in /etc/tuned/active_profile)"
        ),
        "{vs:#?}"
    );
    let p = plan(r, "generic-dgpu", &["cpu.governor"]);
    assert!(p.contains("profile `throughput-performance`"), "{p}");
}
