//! `hugepages`: the profile's hugepage pools (one per page size, per node where the data cores
//! sit), a hugetlbfs mount for each, and the boot reservation. One verdict per pool. Plan: grow
//! each pool now (capped by free memory, never shrunk), a `.mount` unit per pool; the boot
//! reservation is kernel arguments (`kernel.cmdline` writes them).

use crate::hostio::setters::Target;
use crate::model::context::Context;
use crate::model::plan::{
    Action, ActionKind, Change, NoteLevel, Plan, PlanCx, PlanError, SetCx, SetError,
};
use crate::model::profile::HugepagePool;
use crate::model::tunable::{Planner, Tunable};
use crate::model::verdict::Status;
use crate::model::verdict::{Area, Verdict};
use daqtune_probe::mem::{format_size_kb, format_sizes, parse_size_kb, Mount};
use daqtune_units::systemd;

pub const HUGEPAGES: Tunable = Tunable {
    id: "hugepages",
    area: Area::Memory,
    title: "Hugepage pools, per node, and their hugetlbfs mount",
    aliases: &["hugepages", "hugepage"],
    doc: include_str!("../../../docs/checks/hugepages.md"),
    needs_root: false,
    profile_keys: &[
        "hugepages.size",
        "hugepages.count",
        "hugepages.mount",
        "hugepages.require_mount",
        "hugepages.pools",
        "hugepages.default_size",
        "persist.grub_dropin",
    ],
    check: run_hugepages,
    planner: Some(Planner {
        order: 3,
        with: &[],
        plan: plan_hugepages,
        artifacts: &[crate::model::tunable::Artifact {
            kind: "mount-unit",
            help: "hugetlbfs .mount unit",
            render: generate_mount_units,
        }],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: |lp| {
            lp.profile
                .hugepages
                .pools()
                .into_iter()
                .filter_map(|pool| pool.mount.and_then(|mp| systemd::mount_unit_name(&mp).ok()))
                .map(|name| format!("/etc/systemd/system/{name}"))
                .collect()
        },
    }),
};

/// The kernel arguments that reserve the profile's pools at boot (1G pages can only be had
/// reliably at boot, before memory fragments): `default_hugepagesz=` of the first pool, then
/// a `hugepagesz=`/`hugepages=` pair per pool.
pub fn hugepage_args(ctx: &Context) -> Vec<String> {
    let h = &ctx.profile.profile.hugepages;
    let (pools, _) = crate::model::context::boot::offered_pools(ctx.mem(), ctx.profile);
    // What the plan writes: a reservation past the boot bound is not (kernel.cmdline's note).
    let (pools, _) = crate::model::context::boot::boot_bounded(ctx.mem(), pools);
    let mut args = Vec::new();
    if let (true, Some(first)) = (h.default_size, pools.first()) {
        args.push(format!("default_hugepagesz={}", first.size));
    }
    for p in &pools {
        args.push(format!("hugepagesz={}", p.size));
        args.push(format!("hugepages={}", p.count));
    }
    args
}

/// The host's pool of the page size of a node's pool file
/// (`/sys/devices/system/node/nodeN/hugepages/hugepages-SkB/nr_hugepages` ->
/// `/sys/kernel/mm/hugepages/hugepages-SkB/nr_hugepages`); `None` for any other path.
pub fn pool_of_node_pool(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/sys/devices/system/node/node")?;
    let (node, rest) = rest.split_once('/')?;
    let size = rest
        .strip_prefix("hugepages/")?
        .strip_suffix("/nr_hugepages")?;
    let kb = size.strip_prefix("hugepages-")?.strip_suffix("kB")?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    (digits(node) && digits(kb))
        .then(|| format!("/sys/kernel/mm/hugepages/hugepages-{kb}kB/nr_hugepages"))
}

/// A pasted /proc/meminfo alone: its `HugePages_*` lines are the default page size's pool
/// (the kernel's `hugetlb_report_meminfo`), and nothing says where hugetlbfs is mounted. A pool
/// short of the profile fails as on a host (no mount can make up for missing pages); a pool
/// that is large enough is not a pass without its mount, so it skips saying what it saw.
fn hugepages_from_meminfo(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "hugepages";
    let pools = ctx.profile.profile.hugepages.pools();
    if pools.is_empty() {
        return vec![Verdict::pass(ID, "host", "the profile needs no hugepages")];
    }
    let mi = match ctx.facts().read_string("/proc/meminfo") {
        Ok(t) => daqtune_probe::mem::parse_meminfo(&t),
        Err(e) => {
            return vec![Verdict::skip(
                ID,
                "host",
                format!("not in this capture ({e})"),
            )]
        }
    };
    let get = |k: &str| daqtune_probe::mem::meminfo_get(&mi, k);
    let (Some(def_kb), Some(total), Some(free)) = (
        get("Hugepagesize"),
        get("HugePages_Total"),
        get("HugePages_Free"),
    ) else {
        return vec![Verdict::skip(
            ID,
            "host",
            "not in this capture (/proc/meminfo has no HugePages_Total/HugePages_Free/Hugepagesize lines)",
        )];
    };
    let def = format_size_kb(def_kb);
    let observed = format!("{def}: {total} total, {free} free (/proc/meminfo)");
    pools
        .iter()
        .map(|want| {
            let Some(size_kb) = parse_size_kb(&want.size) else {
                return Verdict::error(
                    ID,
                    "host",
                    format!("profile page size `{}` is unreadable", want.size),
                );
            };
            let size = format_size_kb(size_kb);
            let subject = format!("{size} pages");
            let expected = format!("{} x {size}", want.count);
            if size_kb != def_kb {
                return Verdict::skip(
                    ID,
                    subject,
                    format!("not in this capture (/proc/meminfo shows only the default {def} pool: {total} total, {free} free)"),
                )
                .observed(observed.clone());
            }
            if total < want.count {
                return Verdict::fail(
                    ID,
                    subject,
                    format!(
                        "{total} x {size} pages reserved, the profile needs {} ({} GiB more) (/proc/meminfo of the capture)",
                        want.count,
                        ((want.count - total) * size_kb) as f64 / 1048576.0
                    ),
                )
                .observed(observed.clone())
                .expected(expected)
                .fix("sudo daqtune apply --only hugepages");
            }
            if free < want.count {
                return Verdict::warn(
                    ID,
                    subject,
                    format!(
                        "{free} of {total} {size} pages are free: {} are in use (a running application, or files left in hugetlbfs; DAQIRI issue #56) (/proc/meminfo of the capture)",
                        total - free
                    ),
                )
                .observed(observed.clone())
                .expected(expected);
            }
            Verdict::skip(
                ID,
                subject,
                format!(
                    "{total} x {size} reserved, {free} free: enough for the profile's {}; not in this capture (the hugetlbfs mounts and the kernel command line), so not a pass",
                    want.count
                ),
            )
            .observed(observed.clone())
            .expected(expected)
        })
        .collect()
}

fn run_hugepages(ctx: &Context) -> Vec<Verdict> {
    const ID: &str = "hugepages";
    if !crate::model::capture::holds_needs(ctx.facts(), ID) {
        return hugepages_from_meminfo(ctx);
    }
    let mem = ctx.mem();
    if let Some(e) = &mem.pools_error {
        return vec![Verdict::skip(
            ID,
            "host",
            format!("cannot read hugepage pools: {e}"),
        )];
    }
    let observed = observed_pools(mem);
    let pools = ctx.profile.profile.hugepages.pools();
    if pools.is_empty() {
        return vec![Verdict::pass(ID, "host", "the profile needs no hugepages").observed(observed)];
    }
    pools
        .iter()
        .map(|want| judge_pool(ctx, want, &observed))
        .collect()
}

/// Every pool of the host, with its per-node split: `1G: 4 total, 4 free [node1 4]; 2M: ...`.
fn observed_pools(mem: &daqtune_probe::mem::MemFacts) -> String {
    let pools = mem
        .pools
        .iter()
        .map(|p| {
            let nodes: Vec<String> = mem
                .node_pools
                .iter()
                .filter(|n| n.size_kb == p.size_kb && n.total > 0)
                .map(|n| format!("node{} {}", n.node, n.total))
                .collect();
            let per_node = if nodes.is_empty() {
                String::new()
            } else {
                format!(" [{}]", nodes.join(", "))
            };
            format!(
                "{}: {} total, {} free{}",
                format_size_kb(p.size_kb),
                p.total,
                p.free,
                per_node
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    if pools.is_empty() {
        "no hugepage pools".to_string()
    } else {
        pools
    }
}

/// One pool's verdict: reserved, free, mounted where the profile says, nothing left behind.
/// The one judgement of a pool's size, which the check turns into a failure and the plan into
/// a larger reservation: how many pages it lacks for `count`, if any.
fn short_by(pool: &daqtune_probe::mem::HugePool, count: u64) -> Option<u64> {
    count.checked_sub(pool.total).filter(|n| *n > 0)
}

fn judge_pool(ctx: &Context, want: &HugepagePool, observed: &str) -> Verdict {
    const ID: &str = "hugepages";
    let mem = ctx.mem();
    let Some(size_kb) = parse_size_kb(&want.size) else {
        return Verdict::error(
            ID,
            "host",
            format!("profile page size `{}` is unreadable", want.size),
        );
    };
    let size = format_size_kb(size_kb);
    let strict = ctx.profile.profile.hugepages.require_mount;
    let expected = match (&want.mount, strict) {
        (Some(m), true) => format!("{} x {size} mounted at {m}", want.count),
        (Some(m), false) => format!(
            "{} x {size} in a hugetlbfs mount (the tutorial's: {m})",
            want.count
        ),
        (None, _) => format!("{} x {size}", want.count),
    };
    let subject = format!("{size} pages");
    if !mem.offers(size_kb) {
        let sizes = mem.offered_sizes().unwrap_or_default();
        return Verdict::fail(ID, subject, mem.size_not_offered(&size))
            .observed(observed)
            .expected(expected)
            .fix(if sizes.is_empty() {
                "boot a kernel built with CONFIG_HUGETLBFS, or drop `hugepages` from the profile".to_string()
            } else {
                format!(
                    "change the pool's size in the profile to one this kernel offers ({}) and scale its count to the memory wanted; no kernel argument can add {size} pages to this kernel",
                    format_sizes(&sizes)
                )
            });
    }
    let mut problems: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    match mem.pool(size_kb) {
        None => problems.push(mem.size_not_offered(&size)),
        Some(p) if short_by(p, want.count).is_some() => problems.push(format!(
            "{} x {size} pages reserved, the profile needs {} ({} GiB more)",
            p.total,
            want.count,
            ((want.count - p.total) * size_kb) as f64 / 1048576.0
        )),
        Some(p) if p.free < want.count => warnings.push(format!(
            "{} of {} {size} pages are free: {} are in use (a running application, or files left in hugetlbfs)",
            p.free,
            p.total,
            p.in_use()
        )),
        Some(_) => {}
    }
    // Where the pages are served from, when not from the profile's mount point (the pass
    // message says so).
    let mut served_elsewhere: Option<String> = None;
    let mut leftovers: Vec<Leftover> = Vec::new();
    if let Some(e) = &mem.mounts_error {
        warnings.push(format!("cannot read mounts: {e}"));
    } else {
        // Only what a process sees counts: a later mount at the same point (or above it)
        // hides an earlier hugetlbfs, which then serves no one.
        let visible = visible_mounts(&mem.mounts);
        let mounts: Vec<_> = visible
            .iter()
            .copied()
            .filter(|m| m.fstype == "hugetlbfs" && mem.mount_page_kb(m) == Some(size_kb))
            .collect();
        // What stands at the profile's mount point, when it does not serve this size.
        let at_target_problem = want.mount.as_ref().and_then(|target| {
            let at_target = visible.iter().find(|m| &m.target == target);
            let hidden = mem.hugetlbfs_mounts().any(|m| &m.target == target);
            match at_target {
                Some(m) if m.fstype != "hugetlbfs" => Some(format!(
                    "{target} shows a {} mount ({}); the hugetlbfs mounted there before is hidden under it",
                    m.fstype, m.source
                )),
                None if hidden => Some(format!(
                    "the hugetlbfs at {target} is hidden by a later mount above it ({})",
                    hiding_mount(&mem.mounts, target)
                )),
                None => Some(format!("no hugetlbfs is mounted at {target} for {size} pages")),
                Some(m) if mem.mount_page_kb(m) != Some(size_kb) => Some(format!(
                    "{target} is mounted with pagesize={} instead of {size}",
                    m.option("pagesize").unwrap_or("default")
                )),
                Some(_) => None,
            }
        });
        match (&want.mount, at_target_problem) {
            (Some(_), Some(p)) if strict => problems.push(format!(
                "{p} (the profile's hugepages.require_mount insists on this mount point)"
            )),
            (_, Some(p)) if mounts.is_empty() => problems.push(format!(
                "{p}, and no other hugetlbfs mount serves {size} pages"
            )),
            (Some(target), Some(_)) => {
                let list: Vec<&str> = mounts.iter().map(|m| m.target.as_str()).collect();
                served_elsewhere = Some(format!(
                    "mounted at {} (the tutorial mounts them at {target}; DPDK's EAL uses any hugetlbfs mount of the page size)",
                    list.join(", ")
                ));
            }
            (None, _) if mounts.is_empty() => {
                problems.push(format!("no hugetlbfs mount serves {size} pages"))
            }
            _ => {}
        }
        for m in &mounts {
            leftovers.extend(leftover_files(ctx, m));
        }
    }
    if !leftovers.is_empty() {
        warnings.push(describe_leftovers(&leftovers, size_kb, mem.pool(size_kb)));
    }
    let fix = format!(
        "sudo daqtune apply --only hugepages   (reserves {} x {size} now, mounts hugetlbfs{} with an owned .mount unit, and adds `{}` to the kernel command line)",
        want.count,
        want.mount.as_deref().map(|m| format!(" at {m}")).unwrap_or_default(),
        hugepage_args(ctx).join(" ")
    );
    if !problems.is_empty() {
        // A pool past the boot bound gets no kernel argument: say so, not "reboot".
        let (_, refused) = crate::model::context::boot::boot_bounded(mem, vec![want.clone()]);
        problems.extend(refused.into_iter().filter(|r| r.starts_with("hugepages=")));
        problems.extend(warnings);
        let mut v = Verdict::fail(ID, subject, problems.join("; "))
            .observed(observed)
            .expected(expected)
            .fix(fix);
        // This pool's reservation on the running kernel's line: a reboot would not change it.
        let on_cmdline = booted_with(ctx.facts(), size_kb, want.count);
        use crate::model::context::boot::{pending_args, Pending};
        match pending_args(ctx.facts(), ctx.profile, &hugepage_args(ctx)) {
            Pending::Waits if !on_cmdline => {
                v.status = Status::PendingReboot;
                v.message = format!(
                    "the boot reservation is written and waits for a reboot; now: {}",
                    v.message
                );
            }
            Pending::WontBoot(why) if !on_cmdline => {
                v.message = format!("{}; {why}", v.message);
            }
            _ => {}
        }
        return v;
    }
    if !warnings.is_empty() {
        let fix = if leftovers.is_empty() {
            "stop the application holding the pages".to_string()
        } else {
            let mut dirs: Vec<&str> = leftovers.iter().map(|l| l.mount.as_str()).collect();
            dirs.dedup();
            let globs: Vec<String> = dirs.iter().map(|d| format!("{d}/*map_*")).collect();
            format!(
                "confirm no DAQIRI/DPDK process runs (pgrep -af daqiri), then remove the files left behind: sudo rm -f {} (DAQIRI issue #56: every later start fails to allocate until they are gone)",
                globs.join(" ")
            )
        };
        return Verdict::warn(ID, subject, warnings.join("; "))
            .observed(observed)
            .expected(expected)
            .fix(fix);
    }
    let message = match (&served_elsewhere, &want.mount) {
        (Some(w), _) => format!("{} x {size} {w}: {observed}", want.count),
        (None, Some(m)) => format!("{} x {size} mounted at {m}: {observed}", want.count),
        (None, None) => format!("{expected}: {observed}"),
    };
    Verdict::pass(ID, subject, message)
        .observed(observed)
        .expected(expected)
}

/// A file in a hugetlbfs mount: each holds the pages it maps until it is removed, whether or
/// not a process still maps it.
struct Leftover {
    mount: String,
    name: String,
    /// Its size (bytes); `None` when it cannot be read (a snapshot keeps no sizes).
    len: Option<u64>,
}

fn leftover_files(ctx: &Context, m: &Mount) -> Vec<Leftover> {
    let Ok(names) = ctx.read_dir(&m.target) else {
        return Vec::new();
    };
    names
        .iter()
        .filter_map(|n| {
            let path = format!("{}/{n}", m.target.trim_end_matches('/'));
            let st = ctx.stat(&path).ok();
            if st.is_some_and(|s| s.is_dir) {
                return None;
            }
            Some(Leftover {
                mount: m.target.clone(),
                name: n.clone(),
                len: st.filter(|s| s.is_file).map(|s| s.len).filter(|l| *l > 0),
            })
        })
        .collect()
}

/// `4 files left in /dev/hugepages (rtemap_0 1G, ...) hold 4 of the 4 1G pages (0 free)`.
fn describe_leftovers(
    files: &[Leftover],
    size_kb: u64,
    pool: Option<&daqtune_probe::mem::HugePool>,
) -> String {
    let size = format_size_kb(size_kb);
    let page = size_kb.saturating_mul(1024).max(1);
    let mut dirs: Vec<&str> = files.iter().map(|l| l.mount.as_str()).collect();
    dirs.dedup();
    let shown: Vec<String> = files
        .iter()
        .take(4)
        .map(|l| match l.len {
            Some(b) => format!("{} {}", l.name, format_size_kb(b.div_ceil(1024))),
            None => l.name.clone(),
        })
        .collect();
    let more = if files.len() > 4 {
        format!(", {} more", files.len() - 4)
    } else {
        String::new()
    };
    // A hugetlbfs file's size is whole pages (DPDK's `rtemap_N` is one page each).
    let pages: Option<u64> = files.iter().map(|l| l.len.map(|b| b.div_ceil(page))).sum();
    let held = match (pages, pool) {
        (Some(n), Some(p)) => format!(
            " hold {n} of the {} {size} pages ({} free)",
            p.total, p.free
        ),
        (None, Some(p)) => format!(
            "; {} of the {} {size} pages are in use",
            p.in_use(),
            p.total
        ),
        (_, None) => String::new(),
    };
    format!(
        "{} file(s) in {} ({}{more}){held}: DPDK's hugepage files, left by a start that failed or a process that was killed, keep their pages until removed (DAQIRI issue #56), and the next start cannot allocate them",
        files.len(),
        dirs.join(", "),
        shown.join(", ")
    )
}

/// `target` is `dir` or lies below it. A root file system listed after other mounts (captured
/// tables and containers list `/` anywhere) is not taken to hide them.
fn is_under(target: &str, dir: &str) -> bool {
    target == dir
        || (dir != "/"
            && target
                .strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/')))
}

/// The mounts a process sees, in table order: the kernel lists mounts in the order they were
/// made, so an entry is hidden when a later one sits at the same point or above it.
fn visible_mounts(mounts: &[Mount]) -> Vec<&Mount> {
    mounts
        .iter()
        .enumerate()
        .filter(|(i, m)| {
            !mounts[i + 1..]
                .iter()
                .any(|later| is_under(&m.target, &later.target))
        })
        .map(|(_, m)| m)
        .collect()
}

/// The last mount that hides what is mounted at `target`, for the message.
fn hiding_mount(mounts: &[Mount], target: &str) -> String {
    mounts
        .iter()
        .rev()
        .find(|m| is_under(target, &m.target))
        .map(|m| format!("{} {} at {}", m.fstype, m.source, m.target))
        .unwrap_or_default()
}

fn plan_hugepages(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    const ID: &str = "hugepages";
    let pools = cx.lp.profile.hugepages.pools();
    // Memory promised to an earlier pool of this plan is not free for the next one.
    let mut promised_kb: u64 = 0;
    let next_boot = if cx.opts.runtime {
        next_boot_pools(cx)
    } else {
        Vec::new()
    };
    for hp in &pools {
        let Some(size_kb) = parse_size_kb(&hp.size) else {
            plan.note(
                ID,
                NoteLevel::Skip,
                format!("page size `{}` not understood", hp.size),
            );
            continue;
        };
        if !cx.facts.mem().offers(size_kb) {
            // No reservation, no mount unit (it would fail at every boot), no kernel argument.
            plan.note(
                ID,
                NoteLevel::Skip,
                format!(
                    "{} pool left out: {}",
                    hp.size,
                    cx.facts.mem().size_not_offered(&hp.size)
                ),
            );
            continue;
        }
        if cx.opts.runtime {
            // A short grant now waits for the boot when that boot reserves the whole pool and
            // this one was not booted with it already.
            let boot_reserves = next_boot
                .iter()
                .any(|&(kb, n)| kb == size_kb && n >= hp.count)
                && !booted_with(cx.facts, size_kb, hp.count);
            promised_kb += plan_pool(cx, plan, hp, size_kb, promised_kb, boot_reserves);
        }
        plan_mount(cx, plan, hp, size_kb)?;
    }
    Ok(())
}

/// The running kernel was booted with at least `count` pages of `size_kb` reserved on its line:
/// a reboot would not give a pool short of that what this boot did not.
fn booted_with(facts: &crate::model::facts::Facts, size_kb: u64, count: u64) -> bool {
    let default_kb = facts.mem().default_hugepage_kb;
    facts.cmdline().is_ok_and(|c| {
        c.hugepage_reservations(default_kb)
            .iter()
            .any(|&(kb, n)| kb == size_kb && n >= count)
    })
}

/// The pools `(size in kB, count)` the next boot reserves from the kernel line: the line this
/// plan writes (persisting, on a boot loader daqtune edits), or the one
/// an earlier run wrote that the host has not booted yet; empty otherwise. Worked out once per
/// plan, for every pool.
fn next_boot_pools(cx: &PlanCx) -> Vec<(u64, u64)> {
    use crate::model::context::boot::{
        boot_bounded, boot_config, offered_pools, pending_args, BootConfig, Pending,
    };
    let mem = cx.facts.mem();
    let (pools, _) = offered_pools(mem, cx.lp);
    let (pools, _) = boot_bounded(mem, pools);
    // The reservation's words are the hugepages setting's own part of the kernel line:
    // kernel.cmdline is planned with hugepages (its `with`) and writes the words of the settings
    // asked for, so whenever this planner runs, a persisting run on a boot loader daqtune edits
    // writes them (`--only hugepages` included).
    let writes_now = cx.opts.persist
        && !cx.lp.profile.not_applicable.contains_key("kernel.cmdline")
        && !matches!(boot_config(cx.facts, cx.lp), BootConfig::Unknown);
    let waits = || {
        let words = hugepage_args(&Context::with_facts(cx.facts, cx.lp));
        matches!(pending_args(cx.facts, cx.lp, &words), Pending::Waits)
    };
    if pools.is_empty() || !(writes_now || waits()) {
        return Vec::new();
    }
    pools
        .iter()
        .filter_map(|p| Some((parse_size_kb(&p.size)?, p.count)))
        .collect()
}

/// Grows one pool now; returns the kB it takes from free memory.
fn plan_pool(
    cx: &PlanCx,
    plan: &mut Plan,
    hp: &HugepagePool,
    size_kb: u64,
    promised_kb: u64,
    boot_reserves: bool,
) -> u64 {
    const ID: &str = "hugepages";
    let mem = cx.facts.mem();
    let pool = match mem.pool(size_kb) {
        None => {
            plan.note(ID, NoteLevel::Skip, format!("the kernel offers no {} page pool (/sys/kernel/mm/hugepages/hugepages-{size_kb}kB is absent)", hp.size));
            return 0;
        }
        Some(pool) if short_by(pool, hp.count).is_none() => return 0,
        Some(pool) => pool,
    };
    // On a multi-node host whose data cores sit on one node, the pages go to that node (DPDK
    // allocates mbufs near the cores); otherwise to the global pool, which the kernel spreads
    // over the nodes.
    let node = cx.data_cores().ok().flatten().and_then(|list| {
        let set = daqtune_probe::cpulist::parse_cpulist(&list, None).ok()?;
        if mem.nodes.len() < 2 {
            return None;
        }
        mem.nodes
            .iter()
            .find(|n| !set.is_empty() && set.is_subset(&n.cpus))
            .cloned()
    });
    let missing = hp.count - pool.total;
    let (path, label, cur_total, cur_free, in_use, avail, total_kb) = match &node {
        Some(n) => {
            let np = mem
                .node_pools
                .iter()
                .find(|p| p.node == n.id && p.size_kb == size_kb);
            (
                format!(
                    "/sys/devices/system/node/node{}/hugepages/hugepages-{size_kb}kB/nr_hugepages",
                    n.id
                ),
                format!("{} pool on node{}", hp.size, n.id),
                np.map_or(0, |p| p.total),
                np.map_or(0, |p| p.free),
                np.map_or(0, |p| p.total.saturating_sub(p.free)),
                n.mem_free_kb,
                n.mem_total_kb,
            )
        }
        None => (
            format!("/sys/kernel/mm/hugepages/hugepages-{size_kb}kB/nr_hugepages"),
            format!("{} pool", hp.size),
            pool.total,
            pool.free,
            pool.in_use(),
            mem.mem_available_kb,
            mem.mem_total_kb,
        ),
    };
    let Some(avail) = avail else {
        plan.note(ID, NoteLevel::Skip, "cannot read the free memory (/proc/meminfo, node meminfo), so a reservation cannot be capped by it");
        return 0;
    };
    // Leave an eighth of the memory (at least 256 MiB) to everything else.
    let reserve = (total_kb.unwrap_or(0) / 8).max(256 * 1024);
    let extra = avail.saturating_sub(reserve).saturating_sub(promised_kb) / size_kb;
    // Never below the pages in use (the pool only grows here).
    let target = (cur_total + missing).min(cur_total + extra).max(in_use);
    if target <= cur_total {
        plan.note(ID, NoteLevel::Warn, format!("{} x {} pages wanted, {} reserved, and free memory does not allow more; reserve them at boot (kernel arguments)", hp.count, hp.size, pool.total));
        return 0;
    }
    let from = format!("{cur_total}\n");
    if boot_reserves {
        plan.boot_reserved.insert(path.clone());
    }
    let mut note = None;
    if target < cur_total + missing {
        note = Some(format!(
            "capped at {target} of {} by free memory",
            cur_total + missing
        ));
    } else if size_kb >= 1024 * 1024 && cx.target == Target::Live {
        note = Some(if boot_reserves {
            "1G pages need contiguous memory: the kernel may reserve fewer at run time (read back after); the kernel line reserves them at the next boot, and a short grant waits for it".into()
        } else {
            "1G pages need contiguous memory: the kernel may reserve fewer at run time (read back after, a short grant fails); the boot-time reservation is reliable".into()
        });
    }
    // Under a root, the root stands in for the kernel: the pages a pool grows by are free
    // pages too (as the kernel counts them).
    let free_path = path.replace("/nr_hugepages", "/free_hugepages");
    plan.changes.push(Change {
        check: ID.into(),
        subject: label.clone(),
        action: Action::Attr {
            path,
            from,
            to: target.to_string(),
            // Others may reserve pages of this pool too: revert gives back only ours.
            shared_count: true,
        },
        reboot: false,
        note,
    });
    if cx.target == Target::Root {
        plan.changes.push(Change {
            check: ID.into(),
            subject: label,
            action: Action::Attr {
                path: free_path,
                from: format!("{cur_free}\n"),
                to: (cur_free + (target - cur_total)).to_string(),
                shared_count: false,
            },
            reboot: false,
            note: None,
        });
    }
    (target - cur_total) * size_kb
}

/// The pool's `.mount` unit, enabled for local-fs.target, and its mount now: the unit mounts
/// it at the next boot, the running host gets it at once (a unit that exists but failed, or
/// one just written, leaves nothing mounted, and the check fails).
fn plan_mount(
    cx: &PlanCx,
    plan: &mut Plan,
    hp: &HugepagePool,
    size_kb: u64,
) -> Result<(), PlanError> {
    const ID: &str = "hugepages";
    let Some(mp) = &hp.mount else {
        return Ok(());
    };
    let mem = cx.facts.mem();
    if !cx.lp.profile.hugepages.require_mount && mem.mounts_error.is_none() {
        // Any visible mount of the size serves DPDK (the check passes on it): a second one at
        // the tutorial's path would change nothing.
        let serving: Vec<&str> = visible_mounts(&mem.mounts)
            .into_iter()
            .filter(|m| m.fstype == "hugetlbfs" && mem.mount_page_kb(m) == Some(size_kb))
            .map(|m| m.target.as_str())
            .collect();
        if !serving.is_empty() && !serving.contains(&mp.as_str()) {
            plan.note(
                ID,
                NoteLevel::Info,
                format!(
                    "{} pages are served by the hugetlbfs at {}: no mount at {mp} is added (hugepages.require_mount: true insists on it)",
                    hp.size,
                    serving.join(", ")
                ),
            );
            return Ok(());
        }
    }
    let (name, text) = mount_unit(mp, &hp.size, &cx.profile_ref())?;
    if cx.opts.persist {
        cx.file_change(
            plan,
            ID,
            &name,
            &format!("/etc/systemd/system/{name}"),
            text,
            0o644,
            false,
        );
        cx.enable(plan, ID, &name, "local-fs.target");
    }
    if let Some(m) = visible_mounts(&mem.mounts)
        .into_iter()
        .find(|m| m.target == *mp && m.fstype != "hugetlbfs")
    {
        // Never stacked blindly on someone else's mount: the user decides what goes.
        plan.note(
            ID,
            NoteLevel::Warn,
            format!(
                "{mp} shows a {} mount that hides hugetlbfs: unmount it (umount {mp}) and apply again",
                m.fstype
            ),
        );
        return Ok(());
    }
    let taken = mem.mounts.iter().any(|m| m.target == *mp);
    if taken || mem.mounts_error.is_some() {
        return Ok(());
    }
    if !cx.opts.runtime {
        plan.note(
            ID,
            NoteLevel::Info,
            format!(
                "{mp} is mounted by {name} at boot (or now with `daqtune apply --only hugepages`)"
            ),
        );
        return Ok(());
    }
    match cx.target {
        Target::Live => plan.changes.push(Change {
            check: ID.into(),
            subject: format!("hugetlbfs at {mp}"),
            action: Action::owned(MountNow {
                fstype: "hugetlbfs".into(),
                target: mp.into(),
                options: mount_options(&hp.size),
            }),
            reboot: false,
            note: None,
        }),
        // Under a root, the root stands in for the kernel: a mount is a line of its
        // `/proc/mounts` as the kernel shows it (pagesize in MiB), so `check` after
        // `apply --root` sees it and revert restores the file. One change for all pools (two
        // rewrites of one file would each claim the original as what they replace).
        Target::Root => {
            let line = format!(
                "hugetlbfs {mp} hugetlbfs rw,nosuid,nodev,relatime,pagesize={} 0 0\n",
                kernel_pagesize(size_kb)
            );
            let earlier = plan
                .changes
                .iter_mut()
                .find(|c| matches!(&c.action, Action::File { path, .. } if path == "/proc/mounts"));
            match earlier {
                Some(c) => {
                    if let Action::File { to, .. } = &mut c.action {
                        to.extend_from_slice(line.as_bytes());
                    }
                    c.subject = format!("{}, {mp}", c.subject);
                }
                None => {
                    let from = cx.read("/proc/mounts");
                    let mut to = from.clone().unwrap_or_default();
                    if !to.is_empty() && !to.ends_with(b"\n") {
                        to.push(b'\n');
                    }
                    to.extend_from_slice(line.as_bytes());
                    plan.changes.push(Change {
                        check: ID.into(),
                        subject: format!("hugetlbfs at {mp}"),
                        action: Action::File {
                            path: "/proc/mounts".into(),
                            from,
                            to,
                            mode: 0o444,
                        },
                        reboot: false,
                        note: None,
                    });
                }
            }
        }
    }
    Ok(())
}

/// The options of the hugetlbfs mount, as its `.mount` unit has them.
/// `pagesize=` as the kernel shows it in /proc/mounts (hugetlbfs_show_options: kB, then MiB,
/// never GiB): 64K, 2M, 1024M, 16384M.
fn kernel_pagesize(size_kb: u64) -> String {
    if size_kb >= 1024 {
        format!("{}M", size_kb / 1024)
    } else {
        format!("{size_kb}K")
    }
}

fn mount_options(size: &str) -> String {
    format!("pagesize={size},nosuid,nodev")
}

/// A file system mounted now with mount(2) (live hosts; under a root it is a `File` change of
/// the root's `/proc/mounts`). The hugetlbfs mount: its `.mount` unit mounts it at the next
/// boot, this mounts it on the running host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountNow {
    pub fstype: String,
    pub target: String,
    pub options: String,
}

impl ActionKind for MountNow {
    fn execute(&self, cx: SetCx<'_>) -> Result<crate::hostio::setters::Done, SetError> {
        mount_now(
            cx.host,
            cx.journal,
            cx.writer,
            &self.fstype,
            &self.target,
            &self.options,
        )
        .map(crate::hostio::setters::Done::from)
    }
    fn plan_json(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "mount", "fstype": self.fstype, "target": self.target, "options": self.options,
        })
    }
    fn describe(&self) -> String {
        format!(
            "mount -t {} -o {} {} {}",
            self.fstype, self.options, self.fstype, self.target
        )
    }
}

/// The setter hook of [`MountNow`]: journal, make the mount point if missing, mount(2),
/// and read the mount back from the kernel's table. A mount that fails takes its entry and
/// the directory it made back (revert must not unmount what someone else mounts there).
pub(crate) fn mount_now(
    host: &daqtune_probe::Host,
    j: &mut crate::hostio::journal::Journal,
    w: &mut dyn crate::hostio::setters::Writer,
    fstype: &str,
    target: &str,
    options: &str,
) -> Result<String, crate::model::tunable::SetError> {
    use crate::hostio::journal::Entry;
    let jerr = crate::model::tunable::SetError::Journal;
    let real = host.resolve(target).map_err(|e| format!("{target}: {e}"))?;
    let created_dir = !real.is_dir();
    let idx = j
        .record(
            w,
            Entry::Mount {
                fstype: fstype.into(),
                target: target.into(),
                created_dir,
            },
        )
        .map_err(jerr)?;
    let undo_dir = |real: &std::path::Path| {
        if created_dir {
            let _ = std::fs::remove_dir(real);
        }
    };
    if created_dir {
        if let Err(e) = std::fs::create_dir_all(&real) {
            j.take_back(w, idx);
            return Err(format!("{target}: cannot make the mount point: {e}").into());
        }
    }
    if let Err(e) = w.mount(fstype, &real, options) {
        undo_dir(&real);
        j.take_back(w, idx);
        return Err(format!("mount -t {fstype} -o {options} {target}: {e}").into());
    }
    j.mark_done(w, idx).map_err(jerr)?;
    // mount(2)'s success is read back from the kernel's table (the entry stays: revert
    // unmounts only what the kernel lists).
    if !crate::hostio::setters::mounted(host, target, fstype) {
        return Err(format!(
            "{target}: mount(2) succeeded, but /proc/self/mounts lists no {fstype} there"
        )
        .into());
    }
    Ok(format!("mounted {fstype} at {target} ({options})"))
}

/// The `.mount` unit of a pool at `mp`: (unit name, text).
fn mount_unit(
    mp: &str,
    size: &str,
    profile_ref: &str,
) -> Result<(String, String), daqtune_units::InvalidValue> {
    systemd::hugetlbfs_mount(mp, size, profile_ref)
}

/// `generate mount-unit`: every pool's unit (several: each under a comment naming its file).
fn generate_mount_units(
    g: &crate::model::tunable::GenerateCx,
) -> Result<String, crate::model::tunable::ArtifactError> {
    let pools = g.lp.profile.hugepages.pools();
    let mut units = Vec::new();
    for pool in &pools {
        let mp = pool.mount.clone().unwrap_or_else(|| "/mnt/huge".into());
        let (name, text) = mount_unit(&mp, &pool.size, g.profile_ref)?;
        units.push(if pools.len() > 1 {
            format!("# /etc/systemd/system/{name}\n{text}")
        } else {
            text
        });
    }
    if units.is_empty() {
        return Err(crate::model::tunable::ArtifactError::Nothing(
            "the profile reserves no hugepages, so there is no mount unit to print",
        ));
    }
    Ok(units.join("\n"))
}

#[cfg(test)]
mod tests {
    use crate::cmd::apply::testroot::*;
    use crate::model::plan::{Action, PlanOptions};
    use crate::tunables::build_plan;
    use daqtune_probe::Host;

    #[test]
    fn hugepages_capped_by_free_memory_and_never_shrunk() {
        let d = igx_root_without_pci();
        let hp = d.path().join("sys/kernel/mm/hugepages/hugepages-1048576kB");
        // 2.5 GiB available of 8 GiB: after keeping 1 GiB back, one 1G page fits.
        std::fs::write(d.path().join("proc/meminfo"), "MemTotal: 8388608 kB\nMemFree: 2621440 kB\nMemAvailable: 2621440 kB\nHugepagesize: 2048 kB\n").expect("w");
        std::fs::write(hp.join("nr_hugepages"), "1\n").expect("w");
        std::fs::write(hp.join("free_hugepages"), "0\n").expect("w");
        let host = Host::at(d.path()).expect("host");
        let lp = crate::model::profile::load("igx-orin").expect("profile");
        let opts = PlanOptions {
            only: vec!["hugepages".into()],
            persist: false,
            ..Default::default()
        };
        let plan = build_plan(&host, &lp, &opts).expect("plan");
        let c = plan
            .changes
            .iter()
            .find(|c| c.check == "hugepages")
            .expect("change");
        assert!(
            matches!(&c.action, Action::Attr { to, .. } if to == "2"),
            "{plan:?}"
        );
        assert!(
            c.note
                .as_deref()
                .is_some_and(|n| n.contains("capped at 2 of 4")),
            "{plan:?}"
        );
        // A pool already larger than asked is left alone (pages in use are never released).
        std::fs::write(hp.join("nr_hugepages"), "6\n").expect("w");
        let plan = build_plan(&host, &lp, &opts).expect("plan");
        assert!(
            !plan
                .changes
                .iter()
                .any(|c| c.check == "hugepages" && matches!(c.action, Action::Attr { .. })),
            "{plan:?}"
        );
    }

    #[test]
    fn hugepages_go_to_the_data_cores_node() {
        let d = tempfile::tempdir().expect("tmp");
        copy_tree(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/x86-2s"),
            d.path(),
        );
        let r = d.path();
        for f in [
            "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages",
            "sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages",
            "sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages",
            "sys/devices/system/node/node0/hugepages/hugepages-1048576kB/free_hugepages",
            "sys/devices/system/node/node1/hugepages/hugepages-1048576kB/nr_hugepages",
            "sys/devices/system/node/node1/hugepages/hugepages-1048576kB/free_hugepages",
        ] {
            std::fs::write(r.join(f), "0\n").expect("w");
        }
        let node1 = std::fs::read_to_string(r.join("sys/devices/system/node/node1/cpulist"))
            .expect("cpulist");
        let first = node1
            .trim()
            .split(['-', ','])
            .next()
            .expect("cpu")
            .to_string();
        let profile = format!("name: t\nextends: generic-dgpu\ncpu:\n  isolated: \"{first}\"\n");
        let lp = crate::model::profile::load_source("t.yaml", &profile).expect("profile");
        let host = Host::at(r).expect("host");
        let opts = PlanOptions {
            only: vec!["hugepages".into()],
            persist: false,
            ..Default::default()
        };
        let plan = build_plan(&host, &lp, &opts).expect("plan");
        let c = plan
            .changes
            .iter()
            .find(|c| c.check == "hugepages")
            .expect("change");
        match &c.action {
            Action::Attr {
                path,
                to,
                shared_count,
                ..
            } => {
                assert_eq!(
                    path,
                    "/sys/devices/system/node/node1/hugepages/hugepages-1048576kB/nr_hugepages"
                );
                assert_eq!(to, "4");
                // The pool is shared: the plan tells revert to give back only its pages.
                assert!(shared_count);
            }
            a => panic!("{a:?}"),
        }
        assert_eq!(c.subject, "1G pool on node1");
    }
}
