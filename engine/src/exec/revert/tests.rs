//! Every undo reads back (issue 18): with a kernel that accepts a write and drops it (the
//! test double of `exec::apply::tests`), each revert path reports the mismatch, the run stays
//! unreverted, and a later revert through a kernel that takes the writes finishes it.

use super::*;
use crate::exec::apply::tests::{change, run, Kernel, JOURNAL};
use crate::hostio::journal::RunState;
use crate::hostio::setters::FsWriter;
use crate::model::plan::Action;

fn state(root: &Path) -> RunState {
    let base = root.join(JOURNAL);
    let runs = list_runs(&base);
    assert_eq!(runs.len(), 1);
    Journal::open(&runs[0]).expect("open").doc.state
}

fn failures(rep: &RevertReport) -> Vec<String> {
    rep.steps
        .iter()
        .filter_map(|(what, r)| r.as_ref().err().map(|e| format!("{what}: {e}")))
        .collect()
}

/// Apply `action` through the real writer, then revert through `k`: the one failure must
/// contain `want`, the run stays unreverted, and a revert through the real writer finishes it.
fn undo_must_read_back(root: &Path, target: Target, action: Action, mut k: Kernel, want: &str) {
    let host = Host::at(root).expect("host");
    let (rep, _) = run(
        &host,
        target,
        vec![change("t", action)],
        &mut FsWriter::new(),
        None,
    );
    assert_eq!(rep.failed(), 0, "{:?}", rep.outcomes);
    let base = root.join(JOURNAL);
    let rr = revert_all(&host, &base, &mut k);
    let f = failures(&rr);
    assert_eq!(f.len(), 1, "{:?} {:?}", rr.steps, k.calls);
    assert!(f[0].contains(want), "{}", f[0]);
    assert_ne!(state(root), RunState::Reverted);
    let rr = revert_all(&host, &base, &mut FsWriter::new());
    assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
    assert_eq!(state(root), RunState::Reverted);
}

#[test]
fn a_restored_file_that_does_not_land_keeps_the_run() {
    let d = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(d.path().join("etc/default/grub.d")).expect("mkdir");
    let f = d.path().join("etc/default/grub.d/daqtune.cfg");
    std::fs::write(&f, b"GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n").expect("seed");
    let mut k = Kernel::new(d.path());
    k.drop.push("/etc/default/grub.d/daqtune.cfg".into());
    let action = Action::File {
        path: "/etc/default/grub.d/daqtune.cfg".into(),
        from: None,
        to: b"GRUB_CMDLINE_LINUX_DEFAULT=\"quiet isolcpus=2-5\"\n".to_vec(),
        mode: 0o644,
    };
    undo_must_read_back(
        d.path(),
        Target::Root,
        action,
        k,
        "`GRUB_CMDLINE_LINUX_DEFAULT=\"quiet isolcpus=2-5\"` where `GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"` was written",
    );
    assert_eq!(
        std::fs::read(&f).expect("read"),
        b"GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n"
    );
}

#[test]
fn a_removed_file_that_stays_keeps_the_run() {
    let d = tempfile::tempdir().expect("tmp");
    let mut k = Kernel::new(d.path());
    k.drop.push("/etc/sysctl.d/90-daqtune.conf".into());
    let action = Action::File {
        path: "/etc/sysctl.d/90-daqtune.conf".into(),
        from: None,
        to: b"net.core.rmem_max = 1\n".to_vec(),
        mode: 0o644,
    };
    undo_must_read_back(
        d.path(),
        Target::Root,
        action,
        k,
        "removed, but it is still there",
    );
    assert!(!d.path().join("etc/sysctl.d").exists());
}

#[test]
fn a_removed_link_that_stays_keeps_the_run() {
    let d = tempfile::tempdir().expect("tmp");
    let path = "/etc/systemd/system/multi-user.target.wants/daqtune-acs.service";
    let mut k = Kernel::new(d.path());
    k.drop.push(path.into());
    let action = Action::Symlink {
        path: path.into(),
        target: "/etc/systemd/system/daqtune-acs.service".into(),
    };
    undo_must_read_back(
        d.path(),
        Target::Root,
        action,
        k,
        "removed, but it is still there",
    );
}

#[test]
fn a_root_attribute_that_does_not_go_back_keeps_the_run() {
    let d = tempfile::tempdir().expect("tmp");
    let gov = "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor";
    std::fs::create_dir_all(d.path().join(gov).parent().expect("dir")).expect("mkdir");
    std::fs::write(d.path().join(gov), b"powersave\n").expect("seed");
    let mut k = Kernel::new(d.path());
    k.drop.push("cpu3/cpufreq/scaling_governor".into());
    let action = Action::Attr {
        path: format!("/{gov}"),
        from: "powersave\n".into(),
        to: "performance".into(),
        shared_count: false,
    };
    undo_must_read_back(
        d.path(),
        Target::Root,
        action,
        k,
        "`performance` where `powersave` was written",
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join(gov)).expect("read"),
        "powersave\n"
    );
}

/// Revert's PCI config-word undo reads the word back under its mask, as apply does.
#[test]
fn a_config_word_the_device_keeps_keeps_the_run() {
    let d = tempfile::tempdir().expect("tmp");
    let cfg = "sys/bus/pci/devices/0000:01:00.0/config";
    std::fs::create_dir_all(d.path().join(cfg).parent().expect("dir")).expect("mkdir");
    let mut space = vec![0u8; 256];
    // DevCtl at 0x68: MRRS 512 (bits 14:12 = 2), relaxed ordering and no-snoop on.
    space[0x68..0x6a].copy_from_slice(&0x2810u16.to_le_bytes());
    std::fs::write(d.path().join(cfg), &space).expect("seed");
    let mut k = Kernel::new(d.path());
    // A device whose MRRS field does not take writes (as if read-only): the undo is lost.
    k.ro_bits = 0x7000;
    let action = Action::ConfigWord {
        bdf: "0000:01:00.0".into(),
        register: "DevCtl".into(),
        path: format!("/{cfg}"),
        offset: 0x68,
        from: 0x2810,
        to: 0x5810,
        mask: 0x7000,
        field: None,
    };
    undo_must_read_back(
        d.path(),
        Target::Root,
        action,
        k,
        "0000:01:00.0: wrote 0x2810 back (bits 0x7000 = 0x2000), reads back 0x5810",
    );
    let back = crate::exec::apply::read_word(&d.path().join(cfg), 0x68).expect("word");
    assert_eq!(back, 0x2810);
}

/// A module unload is read back on the live host (called directly: revert treats a root as no
/// kernel of its own, where a loaded module is a /proc/modules line the file entries restore).
#[test]
fn a_module_that_stays_loaded_is_a_failure() {
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    let base = d.path().join(JOURNAL);
    let j = Journal::create(&base, "test", &mut FsWriter::new()).expect("journal");
    let e = Entry::Module {
        name: "nvidia_peermem".into(),
    };
    // Not loaded (an apply whose modprobe did not take): nothing to unload, nothing called.
    let mut k = Kernel::new(d.path());
    assert!(undo(
        &host,
        Target::Live,
        &j,
        &e,
        &mut k,
        None,
        &Default::default()
    )
    .is_ok());
    assert!(k.calls.is_empty(), "{:?}", k.calls);
    std::fs::create_dir_all(d.path().join("sys/module/nvidia_peermem")).expect("mkdir");
    k.modprobe_takes = false;
    let r = undo(
        &host,
        Target::Live,
        &j,
        &e,
        &mut k,
        None,
        &Default::default(),
    );
    let Err(err) = r else {
        panic!("a module the kernel still lists is not undone");
    };
    assert!(matches!(&err, UndoError::ModuleLoaded(n) if n == "nvidia_peermem"));
    assert_eq!(
        err.to_string(),
        "nvidia_peermem: modprobe -r succeeded, but the kernel still lists the module"
    );
    k.modprobe_takes = true;
    assert!(undo(
        &host,
        Target::Live,
        &j,
        &e,
        &mut k,
        None,
        &Default::default()
    )
    .is_ok());
    assert!(!d.path().join("sys/module/nvidia_peermem").exists());
}

fn file(check: &str, path: &str, to: &[u8]) -> crate::model::plan::Change {
    change(
        check,
        Action::File {
            path: path.into(),
            from: None,
            to: to.to_vec(),
            mode: 0o644,
        },
    )
}

fn checks(ids: &[&str]) -> Scope {
    Scope::Checks(ids.iter().map(|s| s.to_string()).collect())
}

/// Two checks of one run that wrote one file: neither is undone without the other.
#[test]
fn one_file_of_two_checks_in_a_run_is_undone_with_both_or_not_at_all() {
    let d = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(d.path().join("etc")).expect("mkdir");
    let host = Host::at(d.path()).expect("host");
    let changes = vec![
        file("a", "/etc/s.conf", b"1\n"),
        file("b", "/etc/s.conf", b"2\n"),
    ];
    let (rep, _) = run(&host, Target::Root, changes, &mut FsWriter::new(), None);
    assert_eq!(rep.failed(), 0);
    let base = d.path().join(JOURNAL);
    let e = revert_scope(&host, &base, &mut FsWriter::new(), None, &checks(&["a"]))
        .expect_err("refused");
    assert!(
        matches!(&e, Refusal::SharedInRun { a, b, .. } if a == "a" && b == "b"),
        "{e}"
    );
    assert!(e.to_string().contains("--only a,b"), "{e}");
    assert_eq!(
        std::fs::read(d.path().join("etc/s.conf")).expect("kept"),
        b"2\n"
    );
    let rr = revert_scope(
        &host,
        &base,
        &mut FsWriter::new(),
        None,
        &checks(&["a", "b"]),
    )
    .expect("both");
    assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
    assert!(!d.path().join("etc/s.conf").exists());
    assert_eq!(state(d.path()), RunState::Reverted);
}

/// A later run of another check rewrote the file: the earlier check alone is refused, naming
/// the later run and its check; both together put the file back as before both.
#[test]
fn a_later_runs_rewrite_under_another_check_refuses_the_earlier_check_alone() {
    let d = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(d.path().join("etc")).expect("mkdir");
    std::fs::write(d.path().join("etc/t.conf"), b"orig\n").expect("seed");
    let host = Host::at(d.path()).expect("host");
    let (r1, j1) = run(
        &host,
        Target::Root,
        vec![file("a", "/etc/t.conf", b"1\n")],
        &mut FsWriter::new(),
        None,
    );
    let (r2, j2) = run(
        &host,
        Target::Root,
        vec![file("c", "/etc/t.conf", b"2\n")],
        &mut FsWriter::new(),
        None,
    );
    assert_eq!(r1.failed() + r2.failed(), 0);
    let base = d.path().join(JOURNAL);
    let e = revert_scope(&host, &base, &mut FsWriter::new(), None, &checks(&["a"]))
        .expect_err("refused");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("file /etc/t.conf of run {} (a)", j1.doc.id)),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("later run {} (c)", j2.doc.id)),
        "{msg}"
    );
    let e = revert_scope(
        &host,
        &base,
        &mut FsWriter::new(),
        None,
        &Scope::Run(j1.doc.id.clone()),
    )
    .expect_err("refused");
    assert!(matches!(e, Refusal::LaterRun { .. }), "{e}");
    let rr = revert_scope(
        &host,
        &base,
        &mut FsWriter::new(),
        None,
        &checks(&["c", "a"]),
    )
    .expect("both");
    assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
    assert_eq!(
        rr.runs,
        [j2.doc.id.clone(), j1.doc.id.clone()],
        "newest first"
    );
    assert_eq!(
        std::fs::read(d.path().join("etc/t.conf")).expect("back"),
        b"orig\n"
    );
}

/// The kernel's hugepage pools of one page size under a root: a node's `nr_hugepages` and
/// the host's, the host's always the sum of the nodes' (a write to it frees pages from the
/// nodes that hold them, highest node first; the kernel's order does not matter here).
struct Pools {
    root: std::path::PathBuf,
    nodes: Vec<String>,
    global: String,
}

impl Pools {
    fn count(&self, p: &str) -> u64 {
        std::fs::read_to_string(self.root.join(p))
            .expect("read")
            .trim()
            .parse()
            .expect("count")
    }
    fn set(&self, p: &str, n: u64) {
        std::fs::write(self.root.join(p), format!("{n}\n")).expect("write");
    }
    fn sum(&self) {
        let t = self.nodes.iter().map(|n| self.count(n)).sum();
        self.set(&self.global, t);
    }
}

impl Writer for Pools {
    fn write_file(&mut self, _: &Path, _: &[u8], _: u32) -> std::io::Result<()> {
        unreachable!("no file here")
    }
    fn remove(&mut self, _: &Path) -> std::io::Result<()> {
        unreachable!("no file here")
    }
    fn symlink(&mut self, _: &str, _: &Path) -> std::io::Result<()> {
        unreachable!("no link here")
    }
    fn write_attr(&mut self, path: &Path, value: &str, _: Target) -> std::io::Result<()> {
        let want: u64 = value.trim().parse().map_err(std::io::Error::other)?;
        let rel = path
            .strip_prefix(&self.root)
            .map_err(std::io::Error::other)?
            .display()
            .to_string();
        if rel == self.global {
            let mut excess = self.count(&self.global).saturating_sub(want);
            for n in self.nodes.clone().iter().rev() {
                let c = self.count(n);
                let take = c.min(excess);
                self.set(n, c - take);
                excess -= take;
            }
        } else {
            self.set(&rel, want);
        }
        self.sum();
        Ok(())
    }
    fn pwrite(&mut self, _: &Path, _: u64, _: &[u8]) -> std::io::Result<()> {
        unreachable!("no register here")
    }
}

/// A run put 64 2M pages on node1 (0 before) and wrote `hugepages=64` for the boot; the boot
/// divided them evenly between the two nodes (kernel-parameters.txt: "divided equally between
/// nodes"), 32 each. Reverting the setting live gives back the run's 64 pages: node1's 32,
/// then 32 from the host's 2M pool, which takes them from node0 (fleet-a's 2M pool stayed at
/// 32 after `revert --only hugepages`).
#[test]
fn a_node_pool_spread_by_the_boot_reservation_gives_back_all_of_the_runs_pages() {
    let d = tempfile::tempdir().expect("tmp");
    let node =
        |n: u32| format!("sys/devices/system/node/node{n}/hugepages/hugepages-2048kB/nr_hugepages");
    let mut k = Pools {
        root: d.path().to_path_buf(),
        nodes: vec![node(0), node(1)],
        global: "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages".into(),
    };
    for p in [node(0), node(1), k.global.clone()] {
        std::fs::create_dir_all(d.path().join(&p).parent().expect("dir")).expect("mkdir");
    }
    k.set(&node(0), 32);
    k.set(&node(1), 32);
    k.sum();
    let host = Host::at(d.path()).expect("host");
    let j =
        Journal::create(&d.path().join(JOURNAL), "test", &mut FsWriter::new()).expect("journal");
    let e = Entry::Attr {
        check: "hugepages".into(),
        path: format!("/{}", node(1)),
        original: "0\n".into(),
        new: "64".into(),
        shared_count: true,
    };
    let made = Default::default();
    undo(&host, Target::Live, &j, &e, &mut k, None, &made).expect("undone");
    assert_eq!(
        (k.count(&node(0)), k.count(&node(1)), k.count(&k.global)),
        (0, 0, 0)
    );
}

/// Pages someone else reserved since stay: the run's 64 are given back, no more.
#[test]
fn a_node_pool_gives_back_no_more_than_the_runs_pages() {
    let d = tempfile::tempdir().expect("tmp");
    let node =
        |n: u32| format!("sys/devices/system/node/node{n}/hugepages/hugepages-2048kB/nr_hugepages");
    let mut k = Pools {
        root: d.path().to_path_buf(),
        nodes: vec![node(0), node(1)],
        global: "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages".into(),
    };
    for p in [node(0), node(1), k.global.clone()] {
        std::fs::create_dir_all(d.path().join(&p).parent().expect("dir")).expect("mkdir");
    }
    k.set(&node(0), 40);
    k.set(&node(1), 32);
    k.sum();
    let host = Host::at(d.path()).expect("host");
    let j =
        Journal::create(&d.path().join(JOURNAL), "test", &mut FsWriter::new()).expect("journal");
    let e = Entry::Attr {
        check: "hugepages".into(),
        path: format!("/{}", node(1)),
        original: "0\n".into(),
        new: "64".into(),
        shared_count: true,
    };
    let made = Default::default();
    undo(&host, Target::Live, &j, &e, &mut k, None, &made).expect("undone");
    assert_eq!(k.count(&node(1)), 0);
    assert_eq!(k.count(&k.global), 8);
}

/// A drop-in that was there before the run with the hugepages words only; the run (a profile
/// without hugepages, with isolation) replaced them with the isolation words. `revert --only
/// kernel.cmdline` leaves no setting's word: the file keeps its lines with an empty argument
/// list (an empty file was written), and reverting hugepages then gives the original back
/// byte for byte.
#[test]
fn a_parted_file_with_no_part_left_keeps_its_skeleton_and_comes_back_whole() {
    let d = tempfile::tempdir().expect("tmp");
    let path = "/etc/default/grub.d/daqtune.cfg";
    let real = d.path().join(path.trim_start_matches('/'));
    std::fs::create_dir_all(real.parent().expect("dir")).expect("mkdir");
    let before = "# the site's drop-in\nGRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX hugepagesz=2M hugepages=64\"\n";
    std::fs::write(&real, before).expect("seed");
    let host = Host::at(d.path()).expect("host");
    let plan = crate::model::plan::Plan {
        profile: "test".into(),
        target: Target::Root,
        changes: vec![change(
            "kernel.cmdline",
            Action::File {
                path: path.into(),
                from: Some(before.as_bytes().to_vec()),
                to:
                    b"# the site's drop-in\nGRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX isolcpus=3\"\n"
                        .to_vec(),
                mode: 0o644,
            },
        )],
        notes: Vec::new(),
        kernel_args: None,
        needs_binary: Vec::new(),
        parted: [(path.to_string(), crate::hostio::parts::Format::GrubDropin)]
            .into_iter()
            .collect(),
        boot_reserved: Default::default(),
    };
    let base = d.path().join(JOURNAL);
    let mut j = Journal::create(&base, "test", &mut FsWriter::new()).expect("journal");
    let rep = crate::exec::apply::execute(&host, &plan, &mut j, &mut FsWriter::new(), None, None);
    assert_eq!(rep.failed(), 0, "{:?}", rep.outcomes);
    let only = |ids: &[&str]| {
        let rr = revert_scope(
            &host,
            &base,
            &mut FsWriter::new(),
            None,
            &Scope::Checks(ids.iter().map(|s| s.to_string()).collect()),
        )
        .expect("not refused");
        assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
    };
    only(&["kernel.cmdline"]);
    assert_eq!(
        std::fs::read_to_string(&real).expect("read"),
        "# the site's drop-in\nGRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX \"\n"
    );
    only(&["hugepages"]);
    assert_eq!(std::fs::read_to_string(&real).expect("read"), before);
    assert_eq!(state(d.path()), RunState::Reverted);
}

/// After a reboot the IRQ number a run pinned may be another device's (the fleet guests:
/// /proc/irq/37 and 38 no longer the port's after their reboot). Revert does not write the
/// old value into it; a pin of this boot is still undone.
#[test]
fn an_irq_pinned_in_an_earlier_boot_is_not_written_back() {
    let d = tempfile::tempdir().expect("tmp");
    let irq = d.path().join("proc/irq/37/smp_affinity_list");
    std::fs::create_dir_all(irq.parent().expect("dir")).expect("mkdir");
    std::fs::write(&irq, "0-3\n").expect("seed");
    let host = Host::at(d.path()).expect("host");
    let pin = || {
        change(
            "irq.affinity",
            Action::Attr {
                path: "/proc/irq/37/smp_affinity_list".into(),
                from: "0-3\n".into(),
                to: "0-2".into(),
                shared_count: false,
            },
        )
    };
    let stat = |btime: u64| {
        std::fs::write(
            d.path().join("proc/stat"),
            format!("cpu 1 2 3\nbtime {btime}\n"),
        )
        .expect("stat")
    };
    let base = d.path().join(JOURNAL);
    // This boot's pin: undone.
    let (rep, j) = run(&host, Target::Root, vec![pin()], &mut FsWriter::new(), None);
    assert_eq!(rep.failed(), 0, "{:?}", rep.outcomes);
    stat(j.doc.started_unix.saturating_sub(10));
    let rr = revert_all(&host, &base, &mut FsWriter::new());
    assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
    assert_eq!(std::fs::read_to_string(&irq).expect("irq"), "0-3\n");
    // A pin of an earlier boot: the IRQ is another device's now and keeps its value.
    std::fs::remove_file(d.path().join("proc/stat")).expect("rm");
    let (rep, j) = run(&host, Target::Root, vec![pin()], &mut FsWriter::new(), None);
    assert_eq!(rep.failed(), 0, "{:?}", rep.outcomes);
    std::fs::write(&irq, "4-7\n").expect("another device's IRQ now");
    stat(j.doc.started_unix + 10);
    let rr = revert_all(&host, &base, &mut FsWriter::new());
    assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
    assert_eq!(std::fs::read_to_string(&irq).expect("irq"), "4-7\n");
    assert!(
        rr.steps
            .iter()
            .any(|(w, _)| w.contains("pinned in an earlier boot")),
        "{:?}",
        rr.steps
    );
}

/// A journal of every action kind that moved into its tunable (issue 44: `plan::ActionKind`),
/// written as daqtune wrote them before the move: the bytes are the on-disk format of
/// `hostio::journal::Entry` (kind tags and field names), not what today's apply records. A
/// host that applied with the old version reverts with the new one.
#[test]
fn a_journal_of_the_moved_action_kinds_from_before_the_move_still_reverts() {
    use crate::hostio::gpu::{GpuState, MockGpus};
    use daqtune_probe::net::ethtool::{Group, GroupState, Pause};
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    let base = d.path().join(JOURNAL);
    let run = base.join("20260101T000000Z-1");
    std::fs::create_dir_all(&run).expect("mkdir");
    std::fs::write(
        run.join("journal.json"),
        r#"{"schema":"daqtune.journal/v1","id":"20260101T000000Z-1","profile":"generic-dgpu",
"started_unix":0,"state":"applied","records":[
{"entry":{"kind":"mtu","ifname":"dqt-rb0","original":1500,"new":9000},"done":true,"check":"nic.mtu"},
{"entry":{"kind":"ethtool","ifname":"dqt-et0","group":"pause","original":{"rx":1,"tx":1},"new":{"rx":0,"tx":0}},"done":true,"check":"nic.pause"},
{"entry":{"kind":"module","name":"nvidia_peermem"},"done":true,"check":"gpu.peermem"},
{"entry":{"kind":"mount","fstype":"hugetlbfs","target":"/mnt/huge","created_dir":true},"done":true,"check":"hugepages"},
{"entry":{"kind":"gpu-lock","uuid":"GPU-j","domain":"sm","previously_locked":false,"shown":true},"done":true,"check":"gpu.clocks"},
{"entry":{"kind":"gpu-persistence","uuid":"GPU-j","original":false},"done":true,"check":"gpu.clocks"}
]}"#,
    )
    .expect("journal");
    // The host as that run left it.
    let mut k = Kernel::new(d.path());
    k.mtus.insert("dqt-rb0".into(), 9000);
    k.ethtool.insert(
        ("dqt-et0".into(), Group::Pause),
        GroupState::Pause(Pause {
            autoneg: Some(false),
            rx: Some(false),
            tx: Some(false),
        }),
    );
    std::fs::create_dir_all(d.path().join("sys/module/nvidia_peermem")).expect("module");
    std::fs::create_dir_all(d.path().join("mnt/huge")).expect("mount point");
    std::fs::create_dir_all(d.path().join("proc/self")).expect("proc");
    std::fs::write(
        d.path().join("proc/self/mounts"),
        "hugetlbfs /mnt/huge hugetlbfs rw,pagesize=1G,nosuid,nodev 0 0\n",
    )
    .expect("mounts");
    let gpus = MockGpus::new(vec![GpuState {
        uuid: "GPU-j".into(),
        name: "NVIDIA RTX A6000".into(),
        sm_held: Some(true),
        memory_held: None,
        has_memory_domain: false,
        persistence: Some(true),
    }]);

    // Every kind but the mount is journaled on live hosts only (under a root they are file
    // and attribute changes), so each entry is undone as on the live host it came from.
    let j = Journal::open(&run).expect("the old journal reads");
    assert_eq!(j.doc.records.len(), 6);
    for rec in &j.doc.records {
        let r = undo(
            &host,
            Target::Live,
            &j,
            &rec.entry,
            &mut k,
            Some(&gpus),
            &Default::default(),
        );
        assert!(r.is_ok(), "{:?}: {:?} {:?}", rec.entry, r.err(), k.calls);
    }
    assert_eq!(k.mtus["dqt-rb0"], 1500);
    assert_eq!(
        k.ethtool[&("dqt-et0".to_string(), Group::Pause)],
        GroupState::Pause(Pause {
            autoneg: Some(false),
            rx: Some(true),
            tx: Some(true),
        })
    );
    assert!(!d.path().join("sys/module/nvidia_peermem").exists());
    assert!(
        k.calls.iter().any(|c| c == "umount /mnt/huge"),
        "{:?}",
        k.calls
    );
    assert!(!d.path().join("mnt/huge").exists());
    let g = &gpus.state.borrow()["GPU-j"];
    assert_eq!((g.sm_held, g.persistence), (Some(false), Some(false)));
}
