//! Every runtime write reads back (issue 18): a test double of the kernel accepts a write and
//! drops it, ignores config-space bits, keeps an MTU, or lets modprobe succeed without the
//! module, and each apply path must report the mismatch with what it read. GPU locks are
//! judged after they are made as the gpu.clocks check judges them (a mocked NVML whose lock
//! shows, cannot be confirmed, or does not take), and a reset that does not take fails revert.

use super::*;
use crate::hostio::gpu::{GpuDomain, NvmlSetters};
use crate::hostio::journal::{Entry, Journal, RunState};
use crate::hostio::setters::FsWriter;
use crate::model::plan::Plan;
use crate::tunables::gpu_clocks::GpuAction;
use crate::tunables::hugepages::MountNow;
use crate::tunables::mtu::SetMtu;
use crate::tunables::nic_ethtool::SetEthtool;
use crate::tunables::peermem::LoadModule;
use daqtune_probe::gpu::control::{ClockDomain, ControlError, LockShows, MockNvml, NvmlControl};
use daqtune_probe::gpu::{DomainClocks, GpuFacts};
use daqtune_probe::net::ethtool::{Group, GroupState, Pause, Settings};
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

/// A kernel that can accept a write and not do it: the real file writer underneath, and the
/// faults a real kernel or device shows (a sysfs store that is ignored, read-only DevCtl bits,
/// an MTU the driver keeps, a modprobe that exits 0 without the module).
pub(crate) struct Kernel {
    pub fs: FsWriter,
    /// Writes to paths ending so are accepted and dropped (files, attributes, links,
    /// removals, config space).
    pub drop: Vec<String>,
    /// Config-space bits the device ignores: a write keeps their old value.
    pub ro_bits: u16,
    /// The interfaces' MTUs; `mtu_sticks: false` keeps them as they are.
    pub mtus: BTreeMap<String, u32>,
    pub mtu_sticks: bool,
    /// Where `/sys/module/NAME` appears when modprobe takes.
    pub root: PathBuf,
    pub modprobe_takes: bool,
    /// Whether a mount(2) shows in the root's `/proc/self/mounts`.
    pub mount_takes: bool,
    /// A hugepage pool the kernel fills only so far (no more free contiguous memory): a
    /// larger `nr_hugepages` write stores this many.
    pub pool_limit: Option<u64>,
    pub calls: Vec<String>,
    /// The interfaces' ethtool groups; keys in `ethtool_fixed` keep their value on a set (a
    /// driver that ignores it, as QEMU's e1000e does with pause).
    pub ethtool: BTreeMap<(String, Group), GroupState>,
    pub ethtool_fixed: Vec<String>,
}

impl Kernel {
    pub fn new(root: &Path) -> Kernel {
        Kernel {
            fs: FsWriter::new(),
            drop: Vec::new(),
            ro_bits: 0,
            mtus: BTreeMap::new(),
            mtu_sticks: true,
            root: root.to_path_buf(),
            modprobe_takes: true,
            mount_takes: true,
            pool_limit: None,
            calls: Vec::new(),
            ethtool: BTreeMap::new(),
            ethtool_fixed: Vec::new(),
        }
    }
    fn dropped(&mut self, what: &str, p: &Path) -> bool {
        let hit = self
            .drop
            .iter()
            .any(|s| p.to_string_lossy().ends_with(s.as_str()));
        if hit {
            self.calls.push(format!("dropped {what} {}", p.display()));
        }
        hit
    }
}

impl Writer for Kernel {
    fn write_file(&mut self, path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
        if self.dropped("write", path) {
            return Ok(());
        }
        self.fs.write_file(path, data, mode)
    }
    fn remove(&mut self, path: &Path) -> io::Result<()> {
        if self.dropped("remove", path) {
            return Ok(());
        }
        self.fs.remove(path)
    }
    fn symlink(&mut self, target: &str, path: &Path) -> io::Result<()> {
        if self.dropped("symlink", path) {
            return Ok(());
        }
        self.fs.symlink(target, path)
    }
    fn write_attr(&mut self, path: &Path, value: &str, target: Target) -> io::Result<()> {
        if self.dropped("attr", path) {
            return Ok(());
        }
        if let (Some(limit), true) = (self.pool_limit, path.ends_with("nr_hugepages")) {
            if let Ok(n) = value.trim().parse::<u64>() {
                return self.fs.write_attr(path, &n.min(limit).to_string(), target);
            }
        }
        self.fs.write_attr(path, value, target)
    }
    fn pwrite(&mut self, path: &Path, offset: u64, data: &[u8]) -> io::Result<()> {
        if self.dropped("pwrite", path) {
            return Ok(());
        }
        if self.ro_bits != 0 && data.len() == 2 {
            let cur = read_word(path, offset)?;
            let want = u16::from_le_bytes([data[0], data[1]]);
            let kept = (want & !self.ro_bits) | (cur & self.ro_bits);
            return self.fs.pwrite(path, offset, &kept.to_le_bytes());
        }
        self.fs.pwrite(path, offset, data)
    }
    fn set_mtu(&mut self, ifname: &str, mtu: u32) -> io::Result<()> {
        self.calls.push(format!("set_mtu {ifname} {mtu}"));
        let cur = self
            .mtus
            .get_mut(ifname)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))?;
        if self.mtu_sticks {
            *cur = mtu;
        }
        Ok(())
    }
    fn ethtool(&self, ifname: &str, group: Group) -> io::Result<GroupState> {
        self.ethtool
            .get(&(ifname.to_string(), group))
            .cloned()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))
    }
    fn set_ethtool(&mut self, ifname: &str, group: Group, to: &Settings) -> io::Result<()> {
        self.calls
            .push(format!("set_ethtool {ifname} {}", group.name()));
        let cur = self
            .ethtool
            .get_mut(&(ifname.to_string(), group))
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))?;
        let taken: Settings = to
            .iter()
            .filter(|(k, _)| !self.ethtool_fixed.contains(k))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        *cur = cur.with(&taken).map_err(io::Error::other)?;
        Ok(())
    }
    fn mtu(&self, ifname: &str) -> io::Result<u32> {
        self.mtus
            .get(ifname)
            .copied()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))
    }
    fn modprobe(&mut self, name: &str, remove: bool) -> io::Result<()> {
        self.calls.push(format!("modprobe {name} remove={remove}"));
        if self.modprobe_takes {
            let d = self.root.join("sys/module").join(name.replace('-', "_"));
            if remove {
                std::fs::remove_dir_all(&d)?;
            } else {
                std::fs::create_dir_all(&d)?;
            }
        }
        Ok(())
    }
    fn mount(&mut self, fstype: &str, target: &Path, options: &str) -> io::Result<()> {
        self.calls
            .push(format!("mount {fstype} {} {options}", target.display()));
        if !target.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::ENOENT));
        }
        if self.mount_takes {
            let host_path = target
                .strip_prefix(&self.root)
                .map_err(io::Error::other)?
                .display()
                .to_string();
            let table = self.root.join("proc/self/mounts");
            let mut t = std::fs::read_to_string(&table).unwrap_or_default();
            t.push_str(&format!(
                "{fstype} /{host_path} {fstype} rw,{options} 0 0\n"
            ));
            std::fs::create_dir_all(table.parent().expect("parent"))?;
            std::fs::write(&table, t)?;
        }
        Ok(())
    }
    fn umount(&mut self, target: &Path) -> io::Result<()> {
        let target = format!(
            "/{}",
            target
                .strip_prefix(&self.root)
                .map_err(io::Error::other)?
                .display()
        );
        self.calls.push(format!("umount {target}"));
        let table = self.root.join("proc/self/mounts");
        let t = std::fs::read_to_string(&table)?;
        let kept: String = t
            .lines()
            .filter(|l| l.split_whitespace().nth(1) != Some(target.as_str()))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&table, kept)
    }
}

pub(crate) fn change(check: &str, action: Action) -> Change {
    Change {
        check: check.into(),
        subject: "test".into(),
        action,
        reboot: false,
        note: None,
    }
}

pub(crate) const JOURNAL: &str = "var/lib/daqtune/journal";

/// Apply `changes` to the root at `host` through `w`, journaling under the root.
pub(crate) fn run(
    host: &Host,
    target: Target,
    changes: Vec<Change>,
    w: &mut dyn Writer,
    gpu: Option<&dyn crate::hostio::gpu::GpuSetters>,
) -> (ApplyReport, Journal) {
    let plan = Plan {
        profile: "test".into(),
        target,
        changes,
        notes: Vec::new(),
        kernel_args: None,
        needs_binary: Vec::new(),
        parted: Default::default(),
        boot_reserved: Default::default(),
    };
    let base = host.root().join(JOURNAL);
    let mut j = Journal::create(&base, "test", &mut FsWriter::new()).expect("journal");
    let rep = execute(host, &plan, &mut j, w, None, gpu);
    let j = Journal::open(&j.dir).expect("reopen");
    (rep, j)
}

/// One live change through the mock kernel `k`, no GPU control.
fn run_live(host: &Host, k: &mut Kernel, c: Change) -> (ApplyReport, Journal) {
    run(host, Target::Live, vec![c], k, None)
}

fn only(rep: &ApplyReport) -> &Outcome {
    assert_eq!(rep.outcomes.len(), 1, "{:?}", rep.outcomes);
    &rep.outcomes[0]
}

fn err(rep: &ApplyReport) -> String {
    only(rep).result.clone().expect_err("must fail")
}

#[test]
fn a_file_write_that_does_not_land_is_a_failure() {
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    let mut k = Kernel::new(d.path());
    k.drop.push("/etc/daqtune-test.conf".into());
    let file = Action::File {
        path: "/etc/daqtune-test.conf".into(),
        from: None,
        to: b"vm.swappiness = 1\n".to_vec(),
        mode: 0o644,
    };
    let (rep, j) = run(&host, Target::Root, vec![change("t", file)], &mut k, None);
    let e = err(&rep);
    assert!(
        e.contains("/etc/daqtune-test.conf") && e.contains("reads back"),
        "{e}"
    );
    assert_eq!(j.doc.state, RunState::Partial);
    // The entry is in the journal (done), so revert puts the original back: none.
    assert!(j.doc.records[0].done);
    let rr = crate::exec::revert::revert_all(&host, &d.path().join(JOURNAL), &mut FsWriter::new());
    assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
    assert!(!d.path().join("etc/daqtune-test.conf").exists());
}

#[test]
fn a_file_that_reads_back_other_bytes_names_them() {
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    std::fs::create_dir_all(d.path().join("etc")).expect("mkdir");
    std::fs::write(d.path().join("etc/x.conf"), b"a = 1\nb = 2\n").expect("seed");
    let mut k = Kernel::new(d.path());
    k.drop.push("/etc/x.conf".into());
    let file = Action::File {
        path: "/etc/x.conf".into(),
        from: None,
        to: b"a = 1\nb = 3\n".to_vec(),
        mode: 0o644,
    };
    let (rep, _) = run(&host, Target::Root, vec![change("t", file)], &mut k, None);
    let e = err(&rep);
    assert!(e.contains("`b = 2` where `b = 3` was written"), "{e}");
}

#[test]
fn a_link_that_does_not_land_is_a_failure() {
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    let mut k = Kernel::new(d.path());
    let path = "/etc/systemd/system/multi-user.target.wants/daqtune-test.service";
    k.drop.push(path.into());
    let link = Action::Symlink {
        path: path.into(),
        target: "/etc/systemd/system/daqtune-test.service".into(),
    };
    let (rep, _) = run(&host, Target::Root, vec![change("t", link)], &mut k, None);
    let e = err(&rep);
    assert!(e.contains("reads back no link"), "{e}");
    // The same link through the real writer is done.
    let link = Action::Symlink {
        path: path.into(),
        target: "/etc/systemd/system/daqtune-test.service".into(),
    };
    let (rep, _) = run(
        &host,
        Target::Root,
        vec![change("t", link)],
        &mut FsWriter::new(),
        None,
    );
    assert!(only(&rep).result.is_ok(), "{:?}", rep.outcomes);
}

#[test]
fn an_mtu_the_driver_keeps_is_a_failure() {
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    let mut k = Kernel::new(d.path());
    k.mtus.insert("dqt-rb0".into(), 1500);
    k.mtu_sticks = false;
    let mtu = || {
        Action::owned(SetMtu {
            ifname: "dqt-rb0".into(),
            from: 1500,
            to: 9000,
        })
    };
    let (rep, j) = run_live(&host, &mut k, change("nic.mtu", mtu()));
    let e = err(&rep);
    assert!(e.contains("set MTU 9000, reads back 1500"), "{e}");
    assert!(matches!(
        j.doc.records[0].entry,
        Entry::Mtu { original: 1500, .. }
    ));
    // A driver that takes it: done; revert reads the restored MTU back too.
    k.mtu_sticks = true;
    let (rep, _) = run_live(&host, &mut k, change("nic.mtu", mtu()));
    assert!(only(&rep).result.is_ok(), "{:?}", rep.outcomes);
    assert_eq!(k.mtus["dqt-rb0"], 9000);
    k.mtu_sticks = false;
    let base = d.path().join(JOURNAL);
    let rr = crate::exec::revert::revert_all(&host, &base, &mut k);
    assert!(
        rr.steps.iter().any(|(_, r)| r
            .as_ref()
            .is_err_and(|e| e.contains("MTU reads 9000 after restoring 1500"))),
        "{:?}",
        rr.steps
    );
    k.mtu_sticks = true;
    let rr = crate::exec::revert::revert_all(&host, &base, &mut k);
    assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
    assert_eq!(k.mtus["dqt-rb0"], 1500);
}

#[test]
fn an_ethtool_setting_the_driver_keeps_is_a_failure_and_revert_restores_it() {
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    let mut k = Kernel::new(d.path());
    let pause_on = GroupState::Pause(Pause {
        autoneg: Some(false),
        rx: Some(true),
        tx: Some(true),
    });
    k.ethtool.insert(("dqt-et0".into(), Group::Pause), pause_on);
    let off: Settings = [("rx".to_string(), 0), ("tx".to_string(), 0)].into();
    let set = || {
        Action::owned(SetEthtool {
            ifname: "dqt-et0".into(),
            group: Group::Pause,
            from: [("rx".to_string(), 1), ("tx".to_string(), 1)].into(),
            to: off.clone(),
        })
    };
    // A driver that keeps pause on (QEMU's e1000e): the read-back names both keys.
    k.ethtool_fixed = vec!["rx".into(), "tx".into()];
    let (rep, j) = run_live(&host, &mut k, change("nic.pause", set()));
    let e = err(&rep);
    assert!(
        e.contains("pause did not take: rx: set off, reads back on"),
        "{e}"
    );
    assert!(
        matches!(&j.doc.records[0].entry, Entry::Ethtool { original, .. } if original["rx"] == 1)
    );
    // One that takes it: done, and revert sets the original back and reads it back.
    k.ethtool_fixed.clear();
    let (rep, _) = run_live(&host, &mut k, change("nic.pause", set()));
    assert!(only(&rep).result.is_ok(), "{:?}", rep.outcomes);
    assert_eq!(
        k.ethtool[&("dqt-et0".into(), Group::Pause)].get("rx"),
        Some(0)
    );
    let base = d.path().join(JOURNAL);
    let rr = crate::exec::revert::revert_all(&host, &base, &mut k);
    assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
    let now = &k.ethtool[&("dqt-et0".into(), Group::Pause)];
    assert_eq!((now.get("rx"), now.get("tx")), (Some(1), Some(1)));
}

#[test]
fn a_module_the_kernel_does_not_list_is_a_failure() {
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    let mut k = Kernel::new(d.path());
    k.modprobe_takes = false;
    let module = || {
        Action::owned(LoadModule {
            name: "nvidia_peermem".into(),
        })
    };
    let (rep, j) = run_live(&host, &mut k, change("gpu.peermem", module()));
    let e = err(&rep);
    assert!(e.contains("does not list the module"), "{e}");
    // The entry stays: revert unloads only what the kernel lists.
    assert!(matches!(&j.doc.records[0].entry, Entry::Module { .. }));
    k.modprobe_takes = true;
    let (rep, _) = run_live(&host, &mut k, change("gpu.peermem", module()));
    assert_eq!(only(&rep).result, Ok("loaded nvidia_peermem".to_string()));
    assert!(d.path().join("sys/module/nvidia_peermem").is_dir());
}

#[test]
fn a_mount_the_kernel_does_not_list_is_a_failure_and_revert_unmounts_what_it_lists() {
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    let mut k = Kernel::new(d.path());
    k.mount_takes = false;
    let mount = || {
        Action::owned(MountNow {
            fstype: "hugetlbfs".into(),
            target: "/mnt/huge".into(),
            options: "pagesize=1G,nosuid,nodev".into(),
        })
    };
    let (rep, j) = run_live(&host, &mut k, change("hugepages", mount()));
    let e = err(&rep);
    assert!(e.contains("lists no hugetlbfs there"), "{e}");
    // The entry stays (revert unmounts only what the kernel lists), with the directory it made.
    assert!(matches!(
        &j.doc.records[0].entry,
        Entry::Mount {
            created_dir: true,
            ..
        }
    ));
    assert!(d.path().join("mnt/huge").is_dir());
    let base = d.path().join(JOURNAL);
    let rr = crate::exec::revert::revert_all(&host, &base, &mut k);
    assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
    assert!(
        !k.calls.iter().any(|c| c.starts_with("umount")),
        "{:?}",
        k.calls
    );
    assert!(!d.path().join("mnt/huge").exists());

    k.mount_takes = true;
    let (rep, _) = run_live(&host, &mut k, change("hugepages", mount()));
    assert_eq!(
        only(&rep).result,
        Ok("mounted hugetlbfs at /mnt/huge (pagesize=1G,nosuid,nodev)".to_string())
    );
    assert!(crate::hostio::setters::mounted(
        &host,
        "/mnt/huge",
        "hugetlbfs"
    ));
    let rr = crate::exec::revert::revert_all(&host, &base, &mut k);
    assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
    assert!(
        k.calls.iter().any(|c| c == "umount /mnt/huge"),
        "{:?}",
        k.calls
    );
    assert!(!crate::hostio::setters::mounted(
        &host,
        "/mnt/huge",
        "hugetlbfs"
    ));
    assert!(!d.path().join("mnt/huge").exists());
}

// ---------------------------------------------------------------------------------------------
// GPU locks: the read-back is the gpu.clocks judgement of what NVML shows after the lock.

pub(crate) fn gpu(uuid: &str, busy: bool) -> GpuFacts {
    GpuFacts {
        uuid: uuid.into(),
        name: Some("NVIDIA RTX A6000".into()),
        nvml_index: Some(0),
        persistence_mode: Some(true),
        utilization_pct: Some(if busy { 100 } else { 0 }),
        clock_event_reasons: Some(if busy { 0 } else { 0x1 }),
        sm_clock: DomainClocks {
            current_mhz: Some(if busy { 2100 } else { 420 }),
            max_mhz: Some(2100),
            pstate_min_mhz: Some(210),
            pstate_max_mhz: Some(2100),
            ..Default::default()
        },
        // HBM: fixed at its maximum, unlocked.
        memory_clock: DomainClocks {
            current_mhz: Some(3201),
            max_mhz: Some(3201),
            pstate_min_mhz: Some(3201),
            pstate_max_mhz: Some(3201),
            ..Default::default()
        },
        memory_clock_domain: Some(true),
        ..Default::default()
    }
}

fn lock(uuid: &str) -> Change {
    change(
        "gpu.clocks",
        Action::owned(GpuAction::LockMax {
            uuid: uuid.into(),
            domain: GpuDomain::Sm,
        }),
    )
}

fn setters(g: GpuFacts, shows: LockShows) -> NvmlSetters<MockNvml> {
    let mock = MockNvml::new([g.clone()]);
    *mock.lock_shows.borrow_mut() = shows;
    NvmlSetters::new(mock, 250, &[g])
}

fn journal_lock(j: &Journal) -> (Option<bool>, Option<u32>) {
    match &j.doc.records[0].entry {
        Entry::GpuLock {
            shown,
            floor_before_mhz,
            ..
        } => (*shown, *floor_before_mhz),
        e => panic!("{e:?}"),
    }
}

fn vouched(host: &Host) -> Vec<String> {
    crate::model::facts::Facts::new(host)
        .applied_gpu_locks()
        .iter()
        .map(|(u, d, _)| format!("{u} {}", d.as_str()))
        .collect()
}

#[test]
fn a_lock_that_does_not_take_is_a_failure_and_not_daqtunes_lock() {
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    // The driver accepts the lock, and the idle GPU stays at 420 MHz.
    let s = setters(gpu("GPU-idle", false), LockShows::Nothing);
    let (rep, j) = run(
        &host,
        Target::Live,
        vec![lock("GPU-idle")],
        &mut FsWriter::new(),
        Some(&s),
    );
    let e = err(&rep);
    assert!(e.contains("420 MHz") && e.contains("did not take"), "{e}");
    assert_eq!(rep.failed(), 1);
    // The entry stays for revert to reset, marked so that gpu.clocks does not count it.
    assert!(j.doc.records[0].done);
    assert_eq!(journal_lock(&j), (Some(false), Some(210)));
    assert!(vouched(&host).is_empty(), "{:?}", vouched(&host));
    let rr = crate::exec::revert::revert_all_with(
        &host,
        &d.path().join(JOURNAL),
        &mut FsWriter::new(),
        Some(&s),
    );
    assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
}

#[test]
fn a_lock_nvml_cannot_confirm_is_a_warning_the_journal_vouches_for() {
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    // Busy at its maximum, and the lock changes nothing NVML reports: it may hold, or not.
    let s = setters(gpu("GPU-busy", true), LockShows::Nothing);
    let (rep, j) = run(
        &host,
        Target::Live,
        vec![lock("GPU-busy")],
        &mut FsWriter::new(),
        Some(&s),
    );
    let o = only(&rep);
    let m = o.result.clone().expect("made");
    assert!(o.unconfirmed, "{m}");
    assert!(m.contains("cannot confirm it while the GPU is busy"), "{m}");
    assert_eq!(rep.failed(), 0);
    assert_eq!(journal_lock(&j).0, None);
    assert_eq!(vouched(&host), ["GPU-busy SM"]);
}

#[test]
fn a_lock_that_shows_is_done() {
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    for (uuid, busy) in [("GPU-a", true), ("GPU-b", false)] {
        let s = setters(gpu(uuid, busy), LockShows::RangeAndClock);
        let (rep, j) = run(
            &host,
            Target::Live,
            vec![lock(uuid)],
            &mut FsWriter::new(),
            Some(&s),
        );
        let o = only(&rep);
        assert!(o.result.is_ok() && !o.unconfirmed, "{o:?}");
        assert_eq!(journal_lock(&j).0, Some(true));
    }
}

/// The mock NVML, with a reset the driver accepts and ignores when `ignore_reset` is set.
pub(crate) struct StickyLocks {
    pub nvml: MockNvml,
    pub ignore_reset: std::cell::Cell<bool>,
}

impl NvmlControl for StickyLocks {
    fn facts(&self, uuid: &str) -> Result<GpuFacts, ControlError> {
        self.nvml.facts(uuid)
    }
    fn set_locked_clocks(
        &self,
        uuid: &str,
        domain: ClockDomain,
        min_mhz: u32,
        max_mhz: u32,
    ) -> Result<(), ControlError> {
        self.nvml.set_locked_clocks(uuid, domain, min_mhz, max_mhz)
    }
    fn reset_locked_clocks(&self, uuid: &str, domain: ClockDomain) -> Result<(), ControlError> {
        if self.ignore_reset.get() {
            return Ok(());
        }
        self.nvml.reset_locked_clocks(uuid, domain)
    }
    fn set_persistence(&self, uuid: &str, on: bool) -> Result<(), ControlError> {
        self.nvml.set_persistence(uuid, on)
    }
}

#[test]
fn an_unlock_that_does_not_take_keeps_the_run_for_a_later_revert() {
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    let g = gpu("GPU-h", false);
    let s = NvmlSetters::new(
        StickyLocks {
            nvml: MockNvml::new([g.clone()]),
            ignore_reset: std::cell::Cell::new(true),
        },
        250,
        &[g],
    );
    let mem = change(
        "gpu.clocks",
        Action::owned(GpuAction::LockMax {
            uuid: "GPU-h".into(),
            domain: GpuDomain::Memory,
        }),
    );
    let (rep, _) = run(
        &host,
        Target::Live,
        vec![lock("GPU-h"), mem],
        &mut FsWriter::new(),
        Some(&s),
    );
    assert_eq!(rep.failed(), 0, "{:?}", rep.outcomes);
    let base = d.path().join(JOURNAL);
    let rr = crate::exec::revert::revert_all_with(&host, &base, &mut FsWriter::new(), Some(&s));
    // The SM reset did not take: its floor still reads 2100 where it was 210. The HBM clock
    // is fixed at its maximum with or without a lock, so its floor says nothing.
    let failed: Vec<&String> = rr
        .steps
        .iter()
        .filter_map(|(_, r)| r.as_ref().err())
        .collect();
    assert_eq!(failed.len(), 1, "{:?}", rr.steps);
    assert!(
        failed[0].contains(
            "SM clock of GPU-h: reset accepted, but the P-state floor still reads 2100 MHz"
        ) && failed[0].contains("210 MHz before"),
        "{}",
        failed[0]
    );
    let j = Journal::open(&crate::hostio::journal::list_runs(&base)[0]).expect("open");
    assert_ne!(j.doc.state, RunState::Reverted);
    s.ctl.nvml.ignore_reset.set(false);
    let rr = crate::exec::revert::revert_all_with(&host, &base, &mut FsWriter::new(), Some(&s));
    assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
    let now = s.ctl.nvml.facts("GPU-h").expect("facts");
    assert_eq!(now.sm_clock.pstate_min_mhz, Some(210));
}

/// Persistence mode reads back too, on the way in and on the way back (the probe's
/// `set_persistence` compares NVML's mode after the write).
#[test]
fn persistence_the_driver_ignores_is_a_failure_both_ways() {
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    let mut g = gpu("GPU-p", false);
    g.persistence_mode = Some(false);
    let s = setters(g, LockShows::RangeAndClock);
    let on = || {
        change(
            "gpu.clocks",
            Action::owned(GpuAction::PersistenceOn {
                uuid: "GPU-p".into(),
            }),
        )
    };
    *s.ctl.nvml.ignore_persistence.borrow_mut() = true;
    let (rep, j) = run(
        &host,
        Target::Live,
        vec![on()],
        &mut FsWriter::new(),
        Some(&s),
    );
    let e = err(&rep);
    assert!(e.contains("persistence mode reads back false"), "{e}");
    // Nothing changed, so nothing is left for revert.
    assert!(j.doc.records.is_empty(), "{:?}", j.doc.records);
    *s.ctl.nvml.ignore_persistence.borrow_mut() = false;
    let (rep, _) = run(
        &host,
        Target::Live,
        vec![on()],
        &mut FsWriter::new(),
        Some(&s),
    );
    assert!(only(&rep).result.is_ok(), "{:?}", rep.outcomes);
    *s.ctl.nvml.ignore_persistence.borrow_mut() = true;
    let base = d.path().join(JOURNAL);
    let rr = crate::exec::revert::revert_all_with(&host, &base, &mut FsWriter::new(), Some(&s));
    assert!(
        rr.steps.iter().any(|(_, r)| r
            .as_ref()
            .is_err_and(|e| e.contains("persistence mode reads back true"))),
        "{:?}",
        rr.steps
    );
    *s.ctl.nvml.ignore_persistence.borrow_mut() = false;
    let rr = crate::exec::revert::revert_all_with(&host, &base, &mut FsWriter::new(), Some(&s));
    assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
    assert_eq!(
        s.ctl.nvml.facts("GPU-p").expect("facts").persistence_mode,
        Some(false)
    );
}

/// A pool the kernel fills only in part while the next boot reserves all of it
/// (`Plan::boot_reserved`: the kernel line of this run or an earlier one): the step is done as
/// far as the kernel allows and waits for that boot (pending reboot), not failed; the journal
/// keeps the granted count. Two pools of one check in a row take the batch path, one alone
/// the single one: both judge alike. A pool the boot does not reserve still fails.
#[test]
fn a_pool_granted_in_part_waits_for_the_boot_that_reserves_it() {
    let pool_1g = "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages";
    let pool_2m = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
    let pool_64k = "/sys/kernel/mm/hugepages/hugepages-64kB/nr_hugepages";
    for (batch, reserved, want_ok) in [
        (false, true, true),
        (true, true, true),
        (false, false, false),
        (true, false, false),
    ] {
        let d = tempfile::tempdir().expect("tmp");
        let host = Host::at(d.path()).expect("host");
        for p in [pool_1g, pool_2m, pool_64k] {
            let f = d.path().join(p.trim_start_matches('/'));
            std::fs::create_dir_all(f.parent().expect("dir")).expect("mkdir");
            std::fs::write(&f, "0\n").expect("seed");
        }
        let mut k = Kernel::new(d.path());
        k.pool_limit = Some(2);
        let attr = |path: &str, to: &str| Action::Attr {
            path: path.into(),
            from: "0".into(),
            to: to.into(),
            shared_count: true,
        };
        let mut changes = vec![change("hugepages", attr(pool_1g, "4"))];
        if batch {
            changes.push(change("hugepages", attr(pool_2m, "8")));
        }
        // Another check's change after them: the batch ends where the check changes.
        changes.push(change("sysctl", attr(pool_64k, "1")));
        let plan = Plan {
            profile: "test".into(),
            target: Target::Root,
            changes,
            notes: Vec::new(),
            kernel_args: None,
            needs_binary: Vec::new(),
            parted: Default::default(),
            boot_reserved: if reserved {
                [pool_1g, pool_2m].map(String::from).into_iter().collect()
            } else {
                Default::default()
            },
        };
        let base = host.root().join(JOURNAL);
        let mut j = Journal::create(&base, "test", &mut FsWriter::new()).expect("journal");
        let rep = execute(&host, &plan, &mut j, &mut k, None, None);
        let j = Journal::open(&j.dir).expect("reopen");
        let case = format!(
            "batch {batch}, boot-reserved {reserved}: {:?}",
            rep.outcomes
        );
        let pools = if batch { 2 } else { 1 };
        for o in &rep.outcomes[..pools] {
            match (&o.result, want_ok) {
                (Ok(m), true) => assert!(
                    m.contains(" = 2 of ") && m.contains("reserves the pool at the next boot"),
                    "{case}"
                ),
                (Err(e), false) => assert!(e.contains("reads back `2`"), "{case}"),
                _ => panic!("{case}"),
            }
        }
        // The unrelated, fully granted write is done either way.
        assert!(rep.outcomes[pools].result.is_ok(), "{case}");
        assert_eq!(
            rep.pending_reboot,
            if want_ok {
                vec!["hugepages".to_string()]
            } else {
                vec![]
            },
            "{case}"
        );
        assert_eq!(rep.failed(), if want_ok { 0 } else { pools }, "{case}");
        for r in &j.doc.records[..pools] {
            match &r.entry {
                Entry::Attr { new, .. } => assert_eq!(new, "2", "{case}"),
                other => panic!("{other:?}"),
            }
            assert!(r.done, "{case}");
        }
        assert_eq!(j.doc.pending_reboot, rep.pending_reboot, "{case}");
    }
}

/// A hugepage pool the kernel fills only in part: apply fails with what it read back, and the
/// journal keeps the count the kernel granted, so revert on a live host gives back this run's
/// pages (granted - before) and never pages that were reserved before the run.
#[test]
fn a_pool_granted_in_part_journals_what_the_kernel_granted() {
    let d = tempfile::tempdir().expect("tmp");
    let host = Host::at(d.path()).expect("host");
    let pool = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
    std::fs::create_dir_all(
        d.path()
            .join(pool.trim_start_matches('/'))
            .parent()
            .expect("dir"),
    )
    .expect("mkdir");
    std::fs::write(d.path().join(pool.trim_start_matches('/')), "4\n").expect("seed");
    let mut k = Kernel::new(d.path());
    k.pool_limit = Some(10);
    let attr = Action::Attr {
        path: pool.into(),
        from: "4".into(),
        to: "20".into(),
        shared_count: true,
    };
    let (rep, j) = run(
        &host,
        Target::Root,
        vec![change("hugepages", attr)],
        &mut k,
        None,
    );
    let e = err(&rep);
    assert!(e.contains("wrote `20`, reads back `10`"), "{e}");
    match &j.doc.records[0].entry {
        Entry::Attr {
            original,
            new,
            shared_count,
            ..
        } => {
            assert_eq!(
                (original.trim(), new.as_str(), *shared_count),
                ("4", "10", true)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(j.doc.records[0].done);
}
