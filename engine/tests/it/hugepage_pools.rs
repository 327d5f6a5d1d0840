//! Several hugepage pools (`hugepages.pools`, issue 15: 1G and 2M pages): the profile rules,
//! one verdict per pool, a runtime reservation and a mount unit per pool, and the boot
//! arguments for all of them.

use daqtune_engine::context::Context;
use daqtune_engine::facts::Facts;
use daqtune_engine::plan::{Action, PlanOptions};
use daqtune_engine::profile::{self, HugepagePool};
use daqtune_engine::tunables::{build_plan, run_checks, RunOptions};
use daqtune_engine::verdict::{Status, Verdict};
use daqtune_probe::Host;
use std::path::Path;

const TWO_POOLS: &str = "name: two-pools
extends: igx-orin
hugepages:
  mount: /mnt/huge
  # The IGX root's /dev/hugepages already serves 2M pages, which would do; these tests follow
  # each pool to its own mount point and unit.
  require_mount: true
  pools:
    - {size: 1G, count: 1}
    - {size: 2M, count: 512}
";

fn root() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tmp");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/igx-untuned"),
        d.path(),
    );
    d
}

fn copy_tree(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).expect("read fixture").flatten() {
        let dst = to.join(e.file_name());
        let ty = e.file_type().expect("type");
        if ty.is_dir() {
            std::fs::create_dir_all(&dst).expect("mkdir");
            copy_tree(&e.path(), &dst);
        } else if ty.is_symlink() {
            let t = std::fs::read_link(e.path()).expect("link");
            std::os::unix::fs::symlink(t, &dst).expect("symlink");
        } else {
            std::fs::copy(e.path(), &dst).expect("copy");
        }
    }
}

fn hugepage_verdicts(root: &Path, lp: &profile::LoadedProfile) -> Vec<Verdict> {
    let host = Host::at(root).expect("root");
    let facts = Facts::new(&host);
    let ctx = Context::with_facts(&facts, lp);
    run_checks(
        &ctx,
        &RunOptions {
            only: vec!["hugepages".into()],
        },
    )
}

#[test]
fn pools_replace_the_inherited_single_pool_and_get_their_own_mounts() {
    let lp = profile::load_source("two.yaml", TWO_POOLS).expect("profile");
    assert_eq!(
        lp.profile.hugepages.pools(),
        vec![
            HugepagePool {
                size: "1G".into(),
                count: 1,
                mount: Some("/mnt/huge".into())
            },
            HugepagePool {
                size: "2M".into(),
                count: 512,
                mount: Some("/mnt/huge-2M".into())
            },
        ]
    );
    // The old keys are the one-pool shorthand, and they replace the pools igx-orin's own
    // `size`/`count` stand for.
    let single = "name: one\nextends: igx-orin\nhugepages:\n  size: 2M\n  count: 64\n";
    let lp = profile::load_source("one.yaml", single).expect("single");
    assert_eq!(
        lp.profile.hugepages.pools(),
        vec![HugepagePool {
            size: "2M".into(),
            count: 64,
            mount: Some("/mnt/huge".into())
        }]
    );
}

#[test]
fn a_layer_giving_both_forms_or_a_size_twice_is_refused_with_its_line() {
    let both = "name: both\nextends: igx-orin\nhugepages:\n  size: 1G\n  pools:\n    - {size: 2M, count: 8}\n";
    let e = profile::load_source("both.yaml", both).expect_err("both forms");
    assert_eq!((e.file.as_str(), e.line), ("both.yaml", 5), "{e}");
    assert!(e.message.contains("either"), "{e}");
    let twice = "name: twice\nextends: igx-orin\nhugepages:\n  pools:\n    - {size: 2M, count: 8}\n    - {size: 2048k, count: 8}\n";
    let e = profile::load_source("twice.yaml", twice).expect_err("one size twice");
    assert!(e.message.contains("two pools"), "{e}");
    assert_eq!(e.line, 4, "{e}");
}

#[test]
fn each_pool_is_judged_planned_and_reserved_at_boot() {
    let d = root();
    let r = d.path();
    let lp = profile::load_source("two.yaml", TWO_POOLS).expect("profile");

    // Nothing reserved, nothing mounted at /mnt/huge*: one failing verdict per pool.
    let vs = hugepage_verdicts(r, &lp);
    let subjects: Vec<(&str, Status)> = vs.iter().map(|v| (v.subject.as_str(), v.status)).collect();
    assert_eq!(
        subjects,
        [("1G pages", Status::Fail), ("2M pages", Status::Fail)],
        "{vs:#?}"
    );

    // The plan grows both pools now, mounts both (a root's /proc/mounts, one rewrite) and
    // writes a mount unit for each.
    let host = Host::at(r).expect("root");
    let plan = build_plan(
        &host,
        &lp,
        &PlanOptions {
            only: vec!["hugepages".into(), "kernel.cmdline".into()],
            exe: Some("/usr/bin/daqtune".into()),
            ..Default::default()
        },
    )
    .expect("plan");
    let attrs: Vec<(&str, &str)> = plan
        .changes
        .iter()
        .filter_map(|c| match &c.action {
            Action::Attr { path, to, .. }
                if c.check == "hugepages" && path.ends_with("/nr_hugepages") =>
            {
                Some((path.as_str(), to.as_str()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        attrs,
        [
            (
                "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages",
                "1"
            ),
            (
                "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
                "512"
            ),
        ],
        "{}",
        daqtune_render::plan::text(&plan)
    );
    let units: Vec<(&str, String)> = plan
        .changes
        .iter()
        .filter_map(|c| match &c.action {
            Action::File { path, to, .. } if path.ends_with(".mount") => {
                Some((path.as_str(), String::from_utf8_lossy(to).to_string()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(units.len(), 2, "{}", daqtune_render::plan::text(&plan));
    assert_eq!(units[0].0, "/etc/systemd/system/mnt-huge.mount");
    assert!(units[0].1.contains("pagesize=1G"), "{}", units[0].1);
    assert_eq!(units[1].0, "/etc/systemd/system/mnt-huge\\x2d2M.mount");
    assert!(units[1].1.contains("Where=/mnt/huge-2M"), "{}", units[1].1);
    assert!(units[1].1.contains("pagesize=2M"), "{}", units[1].1);
    let mounts: Vec<String> = plan
        .changes
        .iter()
        .filter_map(|c| match &c.action {
            Action::File { path, to, .. } if path == "/proc/mounts" => {
                Some(String::from_utf8_lossy(to).to_string())
            }
            _ => None,
        })
        .collect();
    assert_eq!(mounts.len(), 1, "{}", daqtune_render::plan::text(&plan));
    assert!(
        mounts[0].contains("hugetlbfs /mnt/huge hugetlbfs rw,nosuid,nodev,relatime,pagesize=1024M")
            && mounts[0]
                .contains("hugetlbfs /mnt/huge-2M hugetlbfs rw,nosuid,nodev,relatime,pagesize=2M"),
        "{}",
        mounts[0]
    );
    let text = daqtune_render::plan::text(&plan);
    assert!(
        text.contains(
            "default_hugepagesz=1G hugepagesz=1G hugepages=1 hugepagesz=2M hugepages=512"
        ),
        "{text}"
    );

    // The state a boot with those arguments and units leaves: both pools pass.
    let hp = r.join("sys/kernel/mm/hugepages");
    for (dir, n) in [("hugepages-1048576kB", "1"), ("hugepages-2048kB", "512")] {
        std::fs::write(hp.join(dir).join("nr_hugepages"), format!("{n}\n")).expect("nr");
        std::fs::write(hp.join(dir).join("free_hugepages"), format!("{n}\n")).expect("free");
    }
    let mut mounts = std::fs::read_to_string(r.join("proc/mounts")).expect("mounts");
    mounts.push_str("hugetlbfs /mnt/huge hugetlbfs rw,relatime,pagesize=1024M 0 0\n");
    mounts.push_str("hugetlbfs /mnt/huge-2M hugetlbfs rw,relatime,pagesize=2M 0 0\n");
    std::fs::write(r.join("proc/mounts"), mounts).expect("mounts");
    let vs = hugepage_verdicts(r, &lp);
    assert!(
        vs.len() == 2 && vs.iter().all(|v| v.status == Status::Pass),
        "{vs:#?}"
    );

    // One pool short again: only that pool fails.
    std::fs::write(hp.join("hugepages-2048kB/nr_hugepages"), "100\n").expect("nr");
    std::fs::write(hp.join("hugepages-2048kB/free_hugepages"), "100\n").expect("free");
    let vs = hugepage_verdicts(r, &lp);
    let st: Vec<Status> = vs.iter().map(|v| v.status).collect();
    assert_eq!(st, [Status::Pass, Status::Fail], "{vs:#?}");
    assert!(vs[1].message.contains("100 x 2M"), "{}", vs[1].message);
}

/// Growing a pool now needs free contiguous memory, which the kernel may not have (1G pages
/// rarely once memory fragments): the plan marks the pools whose whole count the next boot
/// reserves (`Plan::boot_reserved`), and apply takes a short grant of those as waiting for that
/// boot. Marked: the kernel line is in this run, or an earlier run wrote it and the host has
/// not booted it. Not marked: no kernel line in the run (`--only hugepages`, a runtime-only
/// apply) and none waiting, or a kernel booted with the reservation already (another boot
/// would not give what this one did not).
#[test]
fn pools_the_next_boot_reserves_are_marked_for_apply() {
    let lp = profile::load_source("two.yaml", TWO_POOLS).expect("profile");
    let pool_1g = "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages";
    let pool_2m = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
    let plan = |root: &Path, only: &[&str], persist: bool| {
        build_plan(
            &Host::at(root).expect("root"),
            &lp,
            &PlanOptions {
                only: only.iter().map(|s| s.to_string()).collect(),
                persist,
                exe: Some("/usr/bin/daqtune".into()),
                ..Default::default()
            },
        )
        .expect("plan")
    };
    let grown = |p: &daqtune_engine::plan::Plan| -> Vec<String> {
        p.changes
            .iter()
            .filter_map(|c| match &c.action {
                Action::Attr { path, .. } if path.ends_with("/nr_hugepages") => Some(path.clone()),
                _ => None,
            })
            .collect()
    };
    let both: std::collections::BTreeSet<String> =
        [pool_1g, pool_2m].map(String::from).into_iter().collect();

    let d = root();
    let with_line = plan(d.path(), &["hugepages", "kernel.cmdline"], true);
    assert_eq!(grown(&with_line), [pool_1g, pool_2m]);
    assert_eq!(with_line.boot_reserved, both);

    // `--only hugepages` writes the reservation's words into the kernel line itself (they are
    // the hugepages setting's part of it: owned_parts.rs), so its pools wait for that boot too.
    let only_pools = plan(d.path(), &["hugepages"], true);
    assert!(
        only_pools.changes.iter().any(|c| matches!(&c.action,
            Action::File { to, .. } if String::from_utf8_lossy(to).contains("hugepagesz=1G hugepages="))),
        "--only hugepages writes no reservation words"
    );
    assert_eq!(only_pools.boot_reserved, both);

    // Not persisting: no kernel line written, so a short pool is a failure now.
    let p = plan(d.path(), &["hugepages", "kernel.cmdline"], false);
    assert_eq!(grown(&p), [pool_1g, pool_2m]);
    assert!(p.boot_reserved.is_empty());

    // The kernel line written by an earlier run (its files put into the root as apply would),
    // not booted yet: `--only hugepages` now counts on it.
    for c in &with_line.changes {
        if let (true, Action::File { path, to, .. }) = (c.check == "kernel.cmdline", &c.action) {
            let f = d.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(f.parent().expect("dir")).expect("mkdir");
            std::fs::write(f, to).expect("write");
        }
    }
    let waiting = plan(d.path(), &["hugepages"], true);
    assert_eq!(grown(&waiting), [pool_1g, pool_2m]);
    assert_eq!(waiting.boot_reserved, both);

    // Booted with the reservation and still short: no boot to wait for.
    let booted = root();
    let cmdline = booted.path().join("proc/cmdline");
    let line = std::fs::read_to_string(&cmdline).expect("cmdline");
    std::fs::write(
        &cmdline,
        format!(
            "{} default_hugepagesz=1G hugepagesz=1G hugepages=1 hugepagesz=2M hugepages=512\n",
            line.trim()
        ),
    )
    .expect("write");
    let p = plan(booted.path(), &["hugepages", "kernel.cmdline"], true);
    assert_eq!(grown(&p), [pool_1g, pool_2m]);
    assert!(p.boot_reserved.is_empty(), "{:?}", p.boot_reserved);
}
