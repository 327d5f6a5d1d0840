//! Hugepage sizes per architecture (issue 25, item 6). The sizes a kernel offers follow its
//! architecture and base page: arm64 with 4 KiB pages offers 64K, 2M, 32M and 1G (the spark
//! root), arm64 with 64 KiB pages (Grace-class servers) 2M, 512M and 16G (the grace-64k root).
//! A profile asking for a size the kernel lacks gets a verdict naming the sizes there are, and
//! no kernel argument, reservation or mount unit for it: the kernel would ignore
//! `hugepagesz=1G` on a 64K-page kernel and the mount unit would fail at every boot.

use daqtune_engine::context::Context;
use daqtune_engine::facts::Facts;
use daqtune_engine::plan::{Action, Plan, PlanOptions};
use daqtune_engine::profile::{self, LoadedProfile};
use daqtune_engine::tunables::hugepages::hugepage_args;
use daqtune_engine::tunables::{build_plan, run_checks, RunOptions};
use daqtune_engine::verdict::{Status, Verdict};
use daqtune_probe::Host;
use daqtune_testkit::fixture;
use std::path::Path;

fn verdicts(root: &Path, lp: &LoadedProfile) -> Vec<Verdict> {
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

fn plan(root: &Path, lp: &LoadedProfile) -> Plan {
    let host = Host::at(root).expect("root");
    build_plan(
        &host,
        lp,
        &PlanOptions {
            only: vec!["hugepages".into(), "kernel.cmdline".into()],
            exe: Some("/usr/bin/daqtune".into()),
            ..Default::default()
        },
    )
    .expect("plan")
}

fn kernel_words(p: &Plan) -> Vec<String> {
    p.kernel_args
        .as_ref()
        .map(|a| a.words().to_vec())
        .unwrap_or_default()
}

fn profile(yaml: &str) -> LoadedProfile {
    profile::load_source("p.yaml", yaml).expect("profile")
}

#[test]
fn a_64k_page_kernel_has_no_1g_pages_and_gets_no_argument_for_them() {
    let root = fixture("grace-64k");
    // The stock dGPU profile asks 1G pages; this kernel offers 2M, 512M and 16G.
    let lp = profile("name: g\nextends: generic-dgpu\n");
    let wanted = lp.profile.hugepages.pools();
    assert!(wanted.iter().any(|p| p.size == "1G"), "{wanted:?}");

    let vs = verdicts(&root, &lp);
    let v = vs
        .iter()
        .find(|v| v.subject == "1G pages")
        .unwrap_or_else(|| panic!("{vs:#?}"));
    assert_eq!(v.status, Status::Fail, "{v:#?}");
    assert!(
        v.message.contains("no 1G pages") && v.message.contains("2M, 512M, 16G"),
        "{}",
        v.message
    );
    assert!(v.message.contains("64K base pages"), "{}", v.message);
    let fix = v.fix.as_deref().unwrap_or_default();
    assert!(
        fix.contains("2M, 512M, 16G") && !fix.contains("apply"),
        "the fix must be the profile, not an apply that cannot work: {fix}"
    );

    // Neither the fix nor the plan carries hugepagesz=1G.
    let host = Host::at(&root).expect("root");
    let facts = Facts::new(&host);
    let args = hugepage_args(&Context::with_facts(&facts, &lp));
    assert!(!args.iter().any(|a| a.contains("1G")), "{args:?}");
    let p = plan(&root, &lp);
    let pt = daqtune_render::plan::text(&p);
    let words = kernel_words(&p);
    assert!(
        !words
            .iter()
            .any(|w| w.starts_with("hugepagesz=") || w.starts_with("default_hugepagesz=")),
        "{words:?}\n{pt}"
    );
    assert!(
        !p.changes.iter().any(|c| match &c.action {
            Action::Attr { path, .. } => path.contains("hugepages-1048576kB"),
            Action::File { path, .. } => path.ends_with(".mount"),
            _ => false,
        }),
        "no reservation or mount unit for a size the kernel lacks:\n{pt}"
    );
    assert!(
        p.notes
            .iter()
            .any(|n| n.message.contains("1G") && n.message.contains("2M, 512M, 16G")),
        "the plan says why the pool is left out:\n{pt}"
    );
}

#[test]
fn a_64k_page_kernel_reserves_the_512m_pages_it_offers() {
    let root = fixture("grace-64k");
    // The root's /dev/hugepages already serves 512M pages (which would do); require_mount
    // makes the plan mount /mnt/huge, whose /proc/mounts line this test reads.
    let lp = profile(
        "name: g\nextends: generic-dgpu\nhugepages:\n  mount: /mnt/huge\n  require_mount: true\n  pools:\n    - {size: 512M, count: 8}\n    - {size: 1G, count: 2}\n",
    );
    let p = plan(&root, &lp);
    let pt = daqtune_render::plan::text(&p);
    let words = kernel_words(&p);
    for w in ["default_hugepagesz=512M", "hugepagesz=512M", "hugepages=8"] {
        assert!(words.iter().any(|x| x == w), "{w} missing: {words:?}\n{pt}");
    }
    assert!(!words.iter().any(|w| w == "hugepagesz=1G"), "{words:?}");
    assert!(
        p.changes.iter().any(|c| matches!(&c.action,
            Action::Attr { path, to, .. }
                if path.ends_with("hugepages-524288kB/nr_hugepages") && to == "8")),
        "{pt}"
    );
    // The root's mount table as the kernel writes it: 512M pages show as pagesize=512M.
    let mounts = p
        .changes
        .iter()
        .find_map(|c| match &c.action {
            Action::File { path, to, .. } if path == "/proc/mounts" => {
                Some(String::from_utf8_lossy(to).to_string())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no mount of /mnt/huge:\n{pt}"));
    assert!(
        mounts.contains("hugetlbfs /mnt/huge hugetlbfs rw,nosuid,nodev,relatime,pagesize=512M"),
        "{mounts}"
    );
    let vs = verdicts(&root, &lp);
    let subjects: Vec<(&str, Status)> = vs.iter().map(|v| (v.subject.as_str(), v.status)).collect();
    assert_eq!(
        subjects,
        [("512M pages", Status::Fail), ("1G pages", Status::Fail)],
        "{vs:#?}"
    );
    assert!(vs[1].message.contains("2M, 512M, 16G"), "{}", vs[1].message);
}

#[test]
fn a_4k_page_arm64_kernel_offers_64k_to_1g_and_not_512m() {
    let root = fixture("spark");
    // Spark's own profile: 4 x 1G, which its kernel offers and has reserved.
    let lp = profile::load("dgx-spark").expect("dgx-spark");
    let vs = verdicts(&root, &lp);
    assert!(
        vs.iter().all(|v| v.status == Status::Pass),
        "spark's 1G pool passes on the spark root: {vs:#?}"
    );
    // 512M pages exist only with 64K base pages.
    let lp = profile("name: s\nextends: dgx-spark\nhugepages:\n  size: 512M\n  count: 8\n");
    let vs = verdicts(&root, &lp);
    assert_eq!(vs.len(), 1, "{vs:#?}");
    assert_eq!(vs[0].status, Status::Fail);
    assert!(
        vs[0].message.contains("64K, 2M, 32M, 1G") && vs[0].message.contains("4K base pages"),
        "{}",
        vs[0].message
    );
    let words = kernel_words(&plan(&root, &lp));
    assert!(!words.iter().any(|w| w.contains("512M")), "{words:?}");
    // 32M (contiguous PTEs) and 64K are real sizes there: planned like any other.
    let lp = profile("name: s\nextends: dgx-spark\nhugepages:\n  size: 32M\n  count: 16\n");
    let words = kernel_words(&plan(&root, &lp));
    assert!(
        words.iter().any(|w| w == "hugepagesz=32M") && words.iter().any(|w| w == "hugepages=16"),
        "{words:?}"
    );
}
