//! A port reset and the settings it loses. Changing a port's ring sizes, MTU or channel count
//! re-initialises it (`PortReset::Resets`), and its driver requests its interrupts again, each
//! from the default affinity: irq.affinity's pinning (`PortReset::Follows`) is gone although
//! its journal records are in effect. After apply or revert changed such a setting on a port,
//! the followers' state on that port is written again: apply journals the write in its own run
//! (a later revert puts back what the reset left, then the older run's original), revert
//! writes the value of the record still in effect (or, for a record it undid, the value from
//! before apply, which the reset overwrote after the undo).

use crate::hostio::journal::{Entry, Journal};
use crate::model::plan::Action;
use crate::model::tunable::PortReset;
use daqtune_probe::Host;
use std::collections::BTreeMap;

fn resets(check: &str) -> bool {
    crate::tunables::find(check)
        .and_then(|t| t.planner.as_ref())
        .is_some_and(|p| matches!(p.port_reset, PortReset::Resets))
}

/// The port of a per-port attribute a host root stands in for: `/sys/class/net/IF/mtu`, or the
/// recorded ethtool group `/daqtune/ethtool/IF/GROUP.json`.
fn port_of_attr(path: &str) -> Option<String> {
    if let Some(n) = path
        .strip_prefix("/sys/class/net/")
        .and_then(|r| r.strip_suffix("/mtu"))
    {
        return (!n.contains('/')).then(|| n.to_string());
    }
    let r = path.strip_prefix("/daqtune/ethtool/")?;
    let (n, g) = r.split_once('/')?;
    (g.ends_with(".json") && !g.contains('/')).then(|| n.to_string())
}

/// The port a change re-initialises, if it is a change of a setting that resets ports.
pub fn port_of_action(check: &str, a: &Action) -> Option<String> {
    if !resets(check) {
        return None;
    }
    match a {
        Action::Owned(o) => o.port().map(str::to_string),
        Action::Attr { path, .. } => port_of_attr(path),
        _ => None,
    }
}

/// The port undoing a journal entry re-initialises, if it is one of a setting that resets ports.
pub fn port_of_entry(check: &str, e: &Entry) -> Option<String> {
    if !resets(check) {
        return None;
    }
    match e {
        Entry::Mtu { ifname, .. } | Entry::Ethtool { ifname, .. } => Some(ifname.clone()),
        Entry::Attr { path, .. } => port_of_attr(path),
        _ => None,
    }
}

/// For the ports reset, each follower's attributes on them: path -> the follower's id.
pub fn follower_attrs(host: &Host, ports: &[String]) -> BTreeMap<String, &'static str> {
    let mut out = BTreeMap::new();
    if ports.is_empty() {
        return out;
    }
    for t in crate::tunables::planners() {
        if let Some(PortReset::Follows(attrs)) = t.planner.as_ref().map(|p| p.port_reset) {
            for path in attrs(host, ports) {
                out.insert(path, t.id);
            }
        }
    }
    out
}

/// One attribute to write again after a port reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    pub check: String,
    pub path: String,
    /// What the record in effect set (or, in revert, what was there before apply).
    pub value: String,
    /// `value` is the attribute's bytes as read before apply (a host root gets them back
    /// exactly), not a value written as apply writes it.
    pub as_read: bool,
}

/// What a follower's attribute should read: (check, value, as read before apply).
pub type Wanted = BTreeMap<String, (String, String, bool)>;

/// The attribute records of `attrs` in effect in `runs` (oldest first), the newest of each
/// path.
pub fn in_effect<'a>(
    runs: impl Iterator<Item = &'a Journal>,
    attrs: &BTreeMap<String, &'static str>,
) -> Wanted {
    let mut out = BTreeMap::new();
    for j in runs {
        for r in j.doc.records.iter().filter(|r| r.done) {
            if let Entry::Attr { path, new, .. } = &r.entry {
                if let Some(id) = attrs.get(path) {
                    if r.check.as_deref() == Some(*id) {
                        out.insert(path.clone(), (id.to_string(), new.clone(), false));
                    }
                }
            }
        }
    }
    out
}

/// Whether the attribute at `path` reads `value` now (a list compared word by word, as
/// `status` does).
pub fn reads(host: &Host, path: &str, value: &str) -> bool {
    host.read_string(path)
        .is_ok_and(|now| now.split_whitespace().eq(value.split_whitespace()))
}

/// Of `wanted`, those that do not read so now.
pub fn lost(host: &Host, wanted: Wanted) -> Vec<Rewrite> {
    wanted
        .into_iter()
        .filter(|(path, (_, value, _))| !reads(host, path, value))
        .map(|(path, (check, value, as_read))| Rewrite {
            check,
            path,
            value,
            as_read,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::apply::tests::{change, run, JOURNAL};
    use crate::exec::revert::{revert_all, revert_scope, Scope};
    use crate::hostio::setters::{FsWriter, Target, Writer};
    use std::io;
    use std::path::Path;

    const IRQS: [&str; 2] = [
        "proc/irq/36/smp_affinity_list",
        "proc/irq/37/smp_affinity_list",
    ];
    /// What a re-requested IRQ starts from: the default affinity, as `status` showed it on the
    /// fleet guests' e1000e after its rings or MTU changed ("applied 0-2, now 2").
    const DEFAULT: &str = "2\n";

    /// The driver of ens1 under a host root: a write of the port's MTU or of a recorded
    /// ethtool group re-initialises the port, and its IRQs come back with the default
    /// affinity (what a real driver's close/open does to them).
    struct Driver {
        fs: FsWriter,
        root: std::path::PathBuf,
        resets: usize,
    }

    impl Driver {
        fn after(&mut self, path: &Path) -> io::Result<()> {
            let p = path.to_string_lossy();
            if p.ends_with("/sys/class/net/ens1/mtu") || p.contains("/daqtune/ethtool/ens1/") {
                self.resets += 1;
                for irq in IRQS {
                    std::fs::write(self.root.join(irq), DEFAULT)?;
                }
            }
            Ok(())
        }
    }

    impl Writer for Driver {
        fn write_file(&mut self, path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
            self.fs.write_file(path, data, mode)?;
            self.after(path)
        }
        fn remove(&mut self, path: &Path) -> io::Result<()> {
            self.fs.remove(path)
        }
        fn symlink(&mut self, target: &str, path: &Path) -> io::Result<()> {
            self.fs.symlink(target, path)
        }
        fn write_attr(&mut self, path: &Path, value: &str, target: Target) -> io::Result<()> {
            self.fs.write_attr(path, value, target)?;
            self.after(path)
        }
        fn pwrite(&mut self, path: &Path, offset: u64, data: &[u8]) -> io::Result<()> {
            self.fs.pwrite(path, offset, data)
        }
    }

    /// A root with the data port ens1 (MTU 1500, MSI-X vectors 36 and 37 on CPUs 0-3).
    fn port_root() -> (tempfile::TempDir, Host, Driver) {
        let d = tempfile::tempdir().expect("tmp");
        let r = d.path();
        std::fs::create_dir_all(r.join("sys/class/net/ens1/device/msi_irqs")).expect("mkdir");
        std::fs::write(r.join("sys/class/net/ens1/mtu"), "1500\n").expect("mtu");
        for irq in ["36", "37"] {
            std::fs::write(
                r.join("sys/class/net/ens1/device/msi_irqs").join(irq),
                "msix\n",
            )
            .expect("vector");
            std::fs::create_dir_all(r.join("proc/irq").join(irq)).expect("mkdir");
        }
        for irq in IRQS {
            std::fs::write(r.join(irq), "0-3\n").expect("affinity");
        }
        let host = Host::at(r).expect("host");
        let w = Driver {
            fs: FsWriter::new(),
            root: r.to_path_buf(),
            resets: 0,
        };
        (d, host, w)
    }

    fn pins() -> Vec<crate::model::plan::Change> {
        IRQS.iter()
            .map(|irq| {
                change(
                    "irq.affinity",
                    Action::Attr {
                        path: format!("/{irq}"),
                        from: "0-3\n".into(),
                        to: "0-2".into(),
                        shared_count: false,
                    },
                )
            })
            .collect()
    }

    fn mtu_9000() -> crate::model::plan::Change {
        change(
            "nic.mtu",
            Action::Attr {
                path: "/sys/class/net/ens1/mtu".into(),
                from: "1500\n".into(),
                to: "9000".into(),
                shared_count: false,
            },
        )
    }

    fn affinities(root: &Path) -> Vec<String> {
        IRQS.iter()
            .map(|irq| std::fs::read_to_string(root.join(irq)).expect("read"))
            .collect()
    }

    /// Every setting that resets a port is planned (and applied) before every setting that a
    /// reset loses.
    #[test]
    fn followers_are_planned_after_every_setting_that_resets_ports() {
        let order = |t: &crate::model::tunable::Tunable| t.planner.as_ref().map(|p| p.order);
        let planners = crate::tunables::planners();
        let kind = |want: fn(&PortReset) -> bool| -> Vec<&crate::model::tunable::Tunable> {
            planners
                .iter()
                .copied()
                .filter(|t| t.planner.as_ref().is_some_and(|p| want(&p.port_reset)))
                .collect()
        };
        let resets = kind(|p| matches!(p, PortReset::Resets));
        let follows = kind(|p| matches!(p, PortReset::Follows(_)));
        let ids =
            |v: &[&crate::model::tunable::Tunable]| v.iter().map(|t| t.id).collect::<Vec<_>>();
        assert_eq!(ids(&resets), ["nic.mtu", "nic.rings", "nic.channels"]);
        assert_eq!(ids(&follows), ["irq.affinity"]);
        for f in &follows {
            for r in &resets {
                assert!(order(f) > order(r), "{} is planned before {}", f.id, r.id);
            }
        }
    }

    /// An apply of the MTU after irq.affinity's run: the port reset re-requests the IRQs, and
    /// the pinning of the earlier run is written again (journaled in this run with what the
    /// IRQs read before its reset), so `status` reads it as applied; the full revert gives
    /// back the affinity before both.
    #[test]
    fn an_mtu_applied_after_irq_affinity_keeps_the_irqs_pinned() {
        let (d, host, mut w) = port_root();
        let (rep, _) = run(&host, Target::Root, pins(), &mut w, None);
        assert_eq!(rep.failed(), 0, "{:?}", rep.outcomes);
        assert_eq!(affinities(d.path()), ["0-2\n", "0-2\n"]);
        let (rep, j) = run(&host, Target::Root, vec![mtu_9000()], &mut w, None);
        assert_eq!(rep.failed(), 0, "{:?}", rep.outcomes);
        assert_eq!(w.resets, 1);
        assert_eq!(
            affinities(d.path()),
            ["0-2\n", "0-2\n"],
            "{:?}",
            rep.outcomes
        );
        let again: Vec<&str> = j
            .doc
            .records
            .iter()
            .filter(|r| r.check.as_deref() == Some("irq.affinity"))
            .filter_map(|r| match &r.entry {
                Entry::Attr { original, .. } => Some(original.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            again,
            ["0-2\n", "0-2\n"],
            "journaled with what was there before the run"
        );
        let rr = revert_all(&host, &d.path().join(JOURNAL), &mut w);
        assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
        assert_eq!(affinities(d.path()), ["0-3\n", "0-3\n"]);
        assert_eq!(
            std::fs::read_to_string(d.path().join("sys/class/net/ens1/mtu")).expect("mtu"),
            "1500\n"
        );
    }

    /// `revert --only nic.mtu` re-initialises the port; irq.affinity stays applied, so its
    /// pinning is written again; the whole revert after it leaves the affinity as before apply
    /// although the MTU's undo (a reset) comes after the affinity's.
    #[test]
    fn reverting_the_mtu_keeps_the_irqs_pinned_and_the_full_revert_is_exact() {
        let (d, host, mut w) = port_root();
        let mut changes = vec![mtu_9000()];
        changes.extend(pins());
        let (rep, _) = run(&host, Target::Root, changes, &mut w, None);
        assert_eq!(rep.failed(), 0, "{:?}", rep.outcomes);
        assert_eq!(affinities(d.path()), ["0-2\n", "0-2\n"]);
        let base = d.path().join(JOURNAL);
        let rr = revert_scope(
            &host,
            &base,
            &mut w,
            None,
            &Scope::Checks(vec!["nic.mtu".into()]),
        )
        .expect("not refused");
        assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
        assert_eq!(
            std::fs::read_to_string(d.path().join("sys/class/net/ens1/mtu")).expect("mtu"),
            "1500\n"
        );
        assert_eq!(affinities(d.path()), ["0-2\n", "0-2\n"], "{:?}", rr.steps);
        let rr = revert_all(&host, &base, &mut w);
        assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
        assert_eq!(affinities(d.path()), ["0-3\n", "0-3\n"]);

        // The whole run at once: the affinity's undo, then the MTU's reset, then the
        // affinity from before apply again.
        let (d, host, mut w) = port_root();
        let mut changes = vec![mtu_9000()];
        changes.extend(pins());
        let (rep, _) = run(&host, Target::Root, changes, &mut w, None);
        assert_eq!(rep.failed(), 0, "{:?}", rep.outcomes);
        let rr = revert_all(&host, &d.path().join(JOURNAL), &mut w);
        assert_eq!(rr.failed(), 0, "{:?}", rr.steps);
        assert_eq!(affinities(d.path()), ["0-3\n", "0-3\n"], "{:?}", rr.steps);
    }
}
