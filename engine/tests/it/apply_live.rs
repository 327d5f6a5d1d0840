//! The real-host paths of apply and revert, where this machine allows them, each restored
//! afterwards: 2 MB hugepages reserved and released, the MTU of a veth changed in a private
//! network namespace (SIOCSIFMTU, no `ip`), the governor skipped with its reason.
//! Each test says why it skips when the machine does not allow it (not root, no netns).

use daqtune_engine::apply::{
    run_apply_with, run_revert_with, ApplyOptions, RevertOptions, Selection,
};
use daqtune_engine::exec::{apply, revert};
use daqtune_engine::hostio::journal::Journal;
use daqtune_engine::hostio::setters::{self, FsWriter, Target};
use daqtune_engine::plan::{Action, Change, NoteLevel, Plan, PlanOptions};
use daqtune_engine::tunables::build_plan;
use daqtune_engine::GlobalOptions;
use daqtune_probe::Host;
use daqtune_render::apply::Text;

const POOL_2M: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";

#[test]
fn live_hugepages_2m_reserved_and_released() {
    if !daqtune_testkit::require_root_or_skip(&format!("to write {POOL_2M}")) {
        return;
    }
    // Other tests reserve 2 MB pages too (daqtune-dpdk's veth acceptance), in other processes
    // when two test runs share the machine: one at a time, or the counts below are theirs.
    let _lock = daqtune_probe::fsutil::lock_exclusive(std::path::Path::new(
        "/run/lock/daqtune-tests-hugepages.lock",
    ))
    .expect("hugepage test lock");
    let Ok(cur) = std::fs::read_to_string(POOL_2M) else {
        daqtune_testkit::skip(&format!(
            "this kernel has no 2 MB hugepage pool ({POOL_2M})"
        ));
        return;
    };
    let cur: u64 = cur.trim().parse().expect("nr_hugepages");
    let want = cur + 16;
    let dir = tempfile::tempdir().expect("tmp");
    let profile = dir.path().join("live-2m.yaml");
    std::fs::write(
        &profile,
        format!("name: live-2m\nextends: generic-dgpu\nhugepages:\n  size: 2M\n  count: {want}\n"),
    )
    .expect("profile");
    let g = GlobalOptions {
        root: None,
        profile: Some(profile.display().to_string()),
        ..Default::default()
    };
    let state = dir.path().join("state");
    let a = ApplyOptions {
        sel: Selection {
            only: vec!["hugepages".into()],
            runtime_only: true,
            ..Default::default()
        },
        dry_run: false,
        yes: true,
        state_dir: Some(state.display().to_string()),
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run_apply_with(
        &g,
        &a,
        &mut FsWriter::new(),
        &mut Text::new(&mut out, &mut err),
    )
    .expect("apply");
    let out = String::from_utf8_lossy(&out).to_string();
    let now: u64 = std::fs::read_to_string(POOL_2M)
        .expect("read")
        .trim()
        .parse()
        .expect("n");
    // Revert before asserting, so a failed assertion never leaves pages reserved.
    let (mut rout, mut rerr) = (Vec::new(), Vec::new());
    let rcode = run_revert_with(
        &g,
        &RevertOptions {
            yes: true,
            state_dir: a.state_dir.clone(),
        },
        &mut FsWriter::new(),
        &mut Text::new(&mut rout, &mut rerr),
    )
    .expect("revert");
    let after: u64 = std::fs::read_to_string(POOL_2M)
        .expect("read")
        .trim()
        .parse()
        .expect("n");
    let err = String::from_utf8_lossy(&err).to_string();
    assert_eq!(rcode, 0, "revert: {}", String::from_utf8_lossy(&rout));
    if now < want {
        // The kernel had too little free contiguous memory for all 16 pages (a busy or
        // fragmented machine): apply says so, and revert gives back what was granted and
        // nothing that was reserved before.
        assert_ne!(code, 0, "a short pool is a failure: {out}{err}");
        assert!(
            format!("{out}{err}").contains(&format!("wrote `{want}`, reads back `{now}`")),
            "{out}{err}"
        );
        assert_eq!(after, cur, "revert releases what the kernel granted");
    } else {
        assert_eq!(code, 0, "apply: {out}");
        assert_eq!(now, want, "{out}");
        assert!(out.contains("hugepages-2048kB/nr_hugepages = "), "{out}");
        // Revert gives back the pages this run added (the prior count unless someone else
        // reserved pages on this shared machine in between).
        assert_eq!(
            after,
            now - (want - cur),
            "revert releases what apply reserved"
        );
    }
    // --runtime-only: nothing persistent was written on the live host.
    assert!(!out.contains("wrote /"), "{out}");
}

/// A veth pair created with probe's rtnetlink client in the calling thread's network namespace.
mod netlink {
    pub fn create_veth(a: &str, b: &str) -> Result<(), daqtune_probe::net::netlink::Error> {
        daqtune_probe::net::netlink::route::Netlink::open()?.create_veth(a, b, None)
    }
}

#[test]
fn live_mtu_on_a_veth_in_a_private_namespace() {
    if !daqtune_testkit::require_root_or_skip("CAP_SYS_ADMIN, to create a network namespace") {
        return;
    }
    // The namespace belongs to this thread only; it and the veth vanish when the thread ends.
    let t = std::thread::spawn(|| -> Result<(), String> {
        daqtune_probe::sys::unshare_net()
            .map_err(|e| format!("SKIP: unshare(CLONE_NEWNET): {e}"))?;
        netlink::create_veth("dqt-a", "dqt-b")
            .map_err(|e| format!("SKIP: creating a veth: {e}"))?;
        let before = setters::get_mtu_live("dqt-a").map_err(|e| e.to_string())?;
        let peer_before = setters::get_mtu_live("dqt-b").map_err(|e| e.to_string())?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut w = FsWriter::new();
        let mut j = Journal::create(dir.path(), "live-test", &mut w).map_err(|e| e.to_string())?;
        let plan = Plan {
            profile: "live-test".into(),
            target: Target::Live,
            changes: vec![Change {
                check: "nic.mtu".into(),
                subject: "dqt-a".into(),
                action: Action::owned(daqtune_engine::tunables::mtu::SetMtu {
                    ifname: "dqt-a".into(),
                    from: before,
                    to: 9000,
                }),
                reboot: false,
                note: None,
            }],
            notes: vec![],
            kernel_args: None,
            needs_binary: Vec::new(),
            parted: Default::default(),
            boot_reserved: Default::default(),
        };
        let rep = apply::execute(&Host::live(), &plan, &mut j, &mut w, None, None);
        let set = setters::get_mtu_live("dqt-a").map_err(|e| e.to_string())?;
        let rrep = revert::revert_all(&Host::live(), dir.path(), &mut w);
        let restored = setters::get_mtu_live("dqt-a").map_err(|e| e.to_string())?;
        if rep.failed() != 0 {
            return Err(format!("apply failed: {:?}", rep.outcomes));
        }
        if set != 9000 {
            return Err(format!("MTU after apply: {set}"));
        }
        if rrep.failed() != 0 || restored != before {
            return Err(format!(
                "revert: {:?}, MTU {restored}, expected {before}",
                rrep.steps
            ));
        }
        if setters::get_mtu_live("dqt-b").map_err(|e| e.to_string())? != peer_before {
            return Err("the peer's MTU changed".into());
        }
        Ok(())
    });
    match t.join().expect("thread") {
        Ok(()) => {}
        Err(e) if e.starts_with("SKIP") => eprintln!("{e}"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn live_governor_is_skipped_with_its_reason_when_there_is_no_cpufreq() {
    let host = Host::live();
    let lp = daqtune_engine::profile::load("generic-dgpu").expect("profile");
    let opts = PlanOptions {
        only: vec!["cpu.governor".into()],
        persist: false,
        ..Default::default()
    };
    let plan = build_plan(&host, &lp, &opts).expect("plan");
    if std::path::Path::new("/sys/devices/system/cpu/cpu0/cpufreq").exists() {
        // A host with cpufreq: the plan names each CPU not on the profile's governor.
        for c in &plan.changes {
            assert!(
                matches!(&c.action, Action::Attr { path, .. } if path.ends_with("scaling_governor"))
            );
        }
        eprintln!(
            "this host has cpufreq: {} governor change(s) planned, none applied",
            plan.changes.len()
        );
    } else {
        assert!(
            plan.changes.is_empty(),
            "{}",
            daqtune_render::plan::text(&plan)
        );
        let n = plan
            .notes
            .iter()
            .find(|n| n.check == "cpu.governor")
            .unwrap_or_else(|| panic!("no governor note: {}", daqtune_render::plan::text(&plan)));
        assert_eq!(n.level, NoteLevel::Skip);
        assert!(n.message.contains("no cpufreq driver"), "{}", n.message);
    }
}
