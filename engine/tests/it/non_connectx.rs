//! Issue 15 (the VM acceptance's data port): a profile may name a data port that is not a
//! ConnectX. `pcie.mrrs` judges and plans it like a ConnectX PF; the checks that only mean
//! something for ConnectX/RDMA say `n/a` with the reason. QEMU's e1000e ignores writes to
//! DevCtl's MRRS bits: the write is read back, reported as failed with the value read, the
//! journal stays consistent, apply exits non-zero, and revert succeeds afterwards. The device is
//! modelled by a config-space writer that drops config-space writes.

use crate::common::drive::globals as g;
use crate::common::drive::verdicts;
use crate::common::testroot;
use daqtune_render::apply::Text;

use daqtune_engine::apply::{
    run_apply_with, run_revert_with, ApplyOptions, RevertOptions, Selection,
};
use daqtune_engine::hostio::journal::{Journal, RunState};
use daqtune_engine::hostio::setters::{FsWriter, Target, Writer};
use daqtune_engine::verdict::Status;
use std::io;
use std::path::Path;
use testroot::*;

const E1000E: &str = "0000:01:00.0";
/// QEMU's e1000e: a PCI Express capability at 0xe0 whose DevCtl reads 0 (MRRS 128).
const CAP: usize = 0xe0;

/// The IGX root with its ConnectX PFs replaced by an e1000e behind a PCIe root port, named as
/// the data port by a profile that extends generic-dgpu.
fn e1000e_root() -> (tempfile::TempDir, String) {
    let d = igx_root_without_pci();
    let chain = ["0000:00:02.0"];
    add_function(
        d.path(),
        &Func {
            chain: &chain,
            bdf: E1000E,
            vendor: 0x8086,
            device: 0x10d3,
            class: 0x020000,
            driver: "e1000e",
            config: config_space(0x8086, 0x10d3, 0x020000, Some(CAP), 0x0000, 4096),
            netdev: Some(("enp1s0", "52:54:00:12:34:56", 1500)),
            physfn: None,
        },
    );
    install_daqtune(d.path());
    let prof = d.path().join("vm-e1000e.yaml");
    std::fs::write(
        &prof,
        "name: vm-e1000e\nextends: generic-dgpu\nnic:\n  interfaces: [enp1s0]\n",
    )
    .expect("profile");
    let p = prof.display().to_string();
    (d, p)
}

/// A config space whose device ignores writes (QEMU's e1000e and DevCtl's MRRS bits): every
/// other write goes through.
struct IgnoresConfigWrites(FsWriter);

impl Writer for IgnoresConfigWrites {
    fn write_file(&mut self, path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
        self.0.write_file(path, data, mode)
    }
    fn remove(&mut self, path: &Path) -> io::Result<()> {
        self.0.remove(path)
    }
    fn symlink(&mut self, target: &str, path: &Path) -> io::Result<()> {
        self.0.symlink(target, path)
    }
    fn write_attr(&mut self, path: &Path, value: &str, target: Target) -> io::Result<()> {
        self.0.write_attr(path, value, target)
    }
    fn pwrite(&mut self, path: &Path, offset: u64, data: &[u8]) -> io::Result<()> {
        if path.ends_with("config") {
            return Ok(());
        }
        self.0.pwrite(path, offset, data)
    }
}

#[test]
fn a_named_e1000e_is_judged_and_connectx_only_checks_say_na() {
    let (d, prof) = e1000e_root();
    let r = d.path();
    let mrrs = verdicts(r, &prof, "pcie.mrrs");
    assert_eq!(mrrs.len(), 1, "{mrrs:#?}");
    assert_eq!(mrrs[0].status, Status::Fail);
    assert!(mrrs[0].subject.starts_with(E1000E), "{mrrs:#?}");
    assert!(mrrs[0].message.contains("MRRS 128"), "{mrrs:#?}");
    for id in ["nic.link-layer", "nic.driver"] {
        let vs = verdicts(r, &prof, id);
        assert_eq!(vs.len(), 1, "{id}: {vs:#?}");
        assert_eq!(vs[0].status, Status::NotApplicable, "{id}: {vs:#?}");
        assert!(
            vs[0].subject.contains("enp1s0") && vs[0].message.contains("is not a ConnectX"),
            "{id}: {vs:#?}"
        );
    }
    // Generic port checks judge it as any other port.
    let link = verdicts(r, &prof, "nic.link");
    assert_eq!(link[0].status, Status::Pass, "{link:#?}");
    let mtu = verdicts(r, &prof, "nic.mtu");
    assert!(mtu.iter().any(|v| v.subject.contains("enp1s0")), "{mtu:#?}");
}

#[test]
fn an_ignored_mrrs_write_fails_apply_and_reverts() {
    let (d, prof) = e1000e_root();
    let r = d.path();
    let before = snapshot(r, &[]);
    let devctl_before = devctl(r, E1000E);
    let a = ApplyOptions {
        sel: Selection {
            only: vec!["pcie.mrrs".into()],
            ..Default::default()
        },
        yes: true,
        ..Default::default()
    };
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let mut w = IgnoresConfigWrites(FsWriter::new());
    let code =
        run_apply_with(&g(r, &prof), &a, &mut w, &mut Text::new(&mut o, &mut e)).expect("apply");
    let out = String::from_utf8_lossy(&o).to_string();
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "FAIL  pcie.mrrs     0000:01:00.0: the write did not take: wrote DevCtl 0x5000 (MRRS 4096), reads back 0x0000 (MRRS 128)"
        ),
        "{out}"
    );
    // The rule for the named port was written (it matches the address, whatever the vendor).
    let rule =
        std::fs::read_to_string(r.join("etc/udev/rules.d/90-daqtune-mrrs.rules")).expect("rule");
    assert!(
        rule.contains("KERNEL==\"0000:01:00.0\"") && !rule.contains("vendor"),
        "{rule}"
    );
    assert_eq!(devctl(r, E1000E), devctl_before);
    // The journal: one run, partial, the config-word entry kept (revert writes the original
    // bits back, which on this device changes nothing).
    let base = r.join("var/lib/daqtune/journal");
    let runs = daqtune_engine::hostio::journal::list_runs(&base);
    assert_eq!(runs.len(), 1);
    let j = Journal::open(&runs[0]).expect("journal");
    assert_eq!(j.doc.state, RunState::Partial);
    assert!(j.doc.records.iter().any(|rec| matches!(
        &rec.entry,
        daqtune_engine::hostio::journal::Entry::ConfigWord { bdf, original: 0, new: 0x5000, .. } if bdf == E1000E
    )));
    // The check still says so.
    assert_eq!(verdicts(r, &prof, "pcie.mrrs")[0].status, Status::Fail);

    let (mut o, mut e) = (Vec::new(), Vec::new());
    let code = run_revert_with(
        &g(r, &prof),
        &RevertOptions {
            yes: true,
            state_dir: None,
        },
        &mut IgnoresConfigWrites(FsWriter::new()),
        &mut Text::new(&mut o, &mut e),
    )
    .expect("revert");
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&o));
    let after: std::collections::BTreeMap<String, String> = snapshot(r, &[])
        .into_iter()
        .filter(|(k, _)| !(k == "var" || k.starts_with("var/")))
        .collect();
    assert!(
        diff_snapshots(&before, &after).is_empty(),
        "{:#?}",
        diff_snapshots(&before, &after)
    );
    assert_eq!(
        Journal::open(&runs[0]).expect("journal").doc.state,
        RunState::Reverted
    );
}

/// Without the test double the same root takes the write (a device that honours MRRS).
#[test]
fn a_device_that_takes_the_write_passes() {
    let (d, prof) = e1000e_root();
    let r = d.path();
    let a = ApplyOptions {
        sel: Selection {
            only: vec!["pcie.mrrs".into()],
            runtime_only: true,
            ..Default::default()
        },
        yes: true,
        ..Default::default()
    };
    let (mut o, mut e) = (Vec::new(), Vec::new());
    let code = run_apply_with(
        &g(r, &prof),
        &a,
        &mut FsWriter::new(),
        &mut Text::new(&mut o, &mut e),
    )
    .expect("apply");
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&o));
    assert_eq!((devctl(r, E1000E) >> 12) & 7, 5);
    assert_eq!(verdicts(r, &prof, "pcie.mrrs")[0].status, Status::Pass);
}
