//! `kernel.cmdline`: CPU isolation parameters, parsed and checked for consistency. Plan: the
//! boot configuration (a grub drop-in, or an extlinux entry) with every kernel argument the
//! profile implies: isolation, the hugepage reservation, the governor, ACS redirect.

use crate::hostio::parts;
use crate::hostio::setters::Target;
use crate::model::context::boot::{
    boot_config, boot_outlook, grub_files, kernel_arg_spec, pending_args, pending_kernel_args,
    BootConfig, NextBoot, Pending, EXTLINUX_CONF,
};
use crate::model::context::Context;
use crate::model::plan::{NoteLevel, Plan, PlanCx, PlanError};
use crate::model::tunable::{Artifact, ArtifactError, GenerateCx, Planner, Tunable};
use crate::model::verdict::Status;
use crate::model::verdict::{Area, Verdict};
use daqtune_probe::cmdline::{parse_isolcpus, parse_list_param, Cmdline};
use daqtune_probe::system::parse_kernel_version;
use daqtune_probe::CpuSet;
use daqtune_units::{extlinux, grub};

pub const CMDLINE: Tunable = Tunable {
    id: "kernel.cmdline",
    area: Area::Kernel,
    title: "CPU isolation on the kernel command line",
    aliases: &["cmdline", "isolcpus"],
    doc: include_str!("../../../docs/checks/kernel.cmdline.md"),
    needs_root: false,
    profile_keys: &[
        "cpu.isolated",
        "cpu.irqaffinity",
        "cpu.nohz_full",
        "cpu.rcu_nocbs",
        "cpu.rcu_nocb_poll",
        "persist.grub_dropin",
    ],
    check: run,
    planner: Some(Planner {
        order: 0,
        // The drop-in carries the boot side of these settings too, each its own words
        // (`hostio::parts`): planned with any of them, writing the words of those asked for.
        with: &["hugepages", "cpu.governor", "pcie.acs"],
        plan: plan_kernel_args,
        artifacts: &[
            Artifact {
                kind: "kernel-args",
                help:
                    "The kernel arguments only, one line (for boot managers daqtune does not write)",
                render: |g| Ok(generate_args(g)?.render_plain()),
            },
            Artifact {
                kind: "grub-dropin",
                help: "/etc/default/grub.d drop-in",
                render: |g| Ok(grub_dropin(&generate_args(g)?, g.profile_ref)?),
            },
            Artifact {
                kind: "extlinux",
                help: "extlinux.conf with a new default LABEL (reads the host's extlinux.conf)",
                render: |g| {
                    let cur = g
                        .facts
                        .read_string(EXTLINUX_CONF)
                        // The read error names the path already.
                        .map_err(|e| ArtifactError::Host(e.to_string()))?;
                    extlinux_entry(&cur, &generate_args(g)?)
                        .map_err(|e| ArtifactError::Host(e.to_string()))
                },
            },
        ],
        port_reset: crate::model::tunable::PortReset::None,
        owned_files: |lp| vec![lp.profile.persist.grub_dropin.clone()],
    }),
};

const ID: &str = "kernel.cmdline";

/// Kernels before 5.18 keep one housekeeping mask for isolcpus= and nohz_full=, and refuse the
/// second parameter unless both name the same CPUs ("Housekeeping: nohz_full= must match
/// isolcpus="). From 5.18 the masks are per feature and only overlapping features must match.
pub fn requires_equal_masks(kernel_release: Option<&str>) -> bool {
    kernel_release
        .and_then(parse_kernel_version)
        .is_some_and(|(ma, mi, _)| (ma, mi) < (5, 18))
}

/// The isolation arguments the profile asks for on this host, in the seed's order:
/// `isolcpus=8-11 irqaffinity=0-7 nohz_full=8-11 rcu_nocbs=8-11 rcu_nocb_poll`.
pub fn isolation_args(ctx: &Context) -> Result<Vec<String>, crate::model::tunable::Unjudged> {
    let Some(iso) = crate::model::context::boot::isolation(ctx)? else {
        return Ok(Vec::new());
    };
    let spec = grub::KernelArgSpec {
        isolation: Some(iso),
        ..Default::default()
    };
    Ok(spec.build().map_err(|e| e.to_string())?.words().to_vec())
}

/// What the command line says, parsed: problems (sentences naming the CPUs involved), notes,
/// what could not be verified, and the observed parameters.
#[derive(Default)]
struct Analysis {
    problems: Vec<String>,
    notes: Vec<String>,
    unverified: Vec<String>,
    observed: Vec<String>,
}

/// The isolation parameters of the command line, each parsed (`None`: absent or unreadable,
/// which is a problem of its own).
struct Params {
    iso: Option<daqtune_probe::cmdline::Isolcpus>,
    nohz: Option<CpuSet>,
    nocbs: Option<CpuSet>,
    irq: Option<CpuSet>,
}

const PARAMS: [&str; 5] = [
    "isolcpus",
    "nohz_full",
    "rcu_nocbs",
    "rcu_nocb_poll",
    "irqaffinity",
];

fn analyse(ctx: &Context, cmd: &Cmdline) -> Analysis {
    let mut a = Analysis::default();
    let cpus = match ctx.cpus() {
        Ok(c) => Some(c),
        Err(e) => {
            // Say what could not be verified instead of passing as if it had been.
            a.unverified.push(format!(
                "CPU topology unreadable ({e}): CPU existence, SMT siblings and the kernel's effective isolation not checked"
            ));
            None
        }
    };
    let existing: Option<CpuSet> = cpus.map(|c| {
        c.possible
            .clone()
            .or(c.present.clone())
            .unwrap_or_else(|| c.online.clone())
    });
    let nr = existing.as_ref().and_then(|e| e.last()).map(|l| l + 1);
    for k in PARAMS {
        if let Some(p) = cmd.get(k) {
            a.observed.push(match &p.value {
                Some(v) => format!("{k}={v}"),
                None => k.to_string(),
            });
        }
    }
    let params = a.parse(cmd, nr);
    let data = ctx.data_cores();
    let isolated = params.iso.as_ref().map(|i| i.cpus.clone());
    a.data_cores_isolated(ctx, isolated.as_ref(), &data);
    if let Some(ex) = &existing {
        a.cpus_exist(ex, isolated.as_ref(), &params);
    }
    if let Some(i) = &isolated {
        a.interrupts(ctx, i, params.irq.as_ref());
        if let Some(c) = cpus {
            a.smt_siblings(c, i);
        }
        a.housekeeping(ctx, cmd, i, &params);
        if let Some(c) = cpus {
            a.effective(c, i, &params);
        }
    } else if data.as_ref().is_ok_and(|d| d.is_none()) && ctx.profile.profile.cpu.isolated.is_none()
    {
        a.notes
            .push("the profile asks for no isolated cores".into());
    }
    a
}

impl Analysis {
    /// Each isolation parameter parsed; one the kernel ignores or cannot read is a problem.
    fn parse(&mut self, cmd: &Cmdline, nr: Option<u32>) -> Params {
        let iso = match cmd.value("isolcpus") {
            None => None,
            Some(v) => match parse_isolcpus(v, nr) {
                Ok(i) => {
                    if !i.unknown_flags.is_empty() {
                        self.problems.push(format!(
                            "isolcpus has unknown flags {} (the kernel ignores the whole parameter)",
                            i.unknown_flags.join(",")
                        ));
                    }
                    Some(i)
                }
                Err(e) => {
                    self.problems.push(format!("{e}"));
                    None
                }
            },
        };
        let mut list = |k: &str| match parse_list_param(cmd, k, nr) {
            None => None,
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => {
                self.problems.push(e.to_string());
                None
            }
        };
        let nohz = list("nohz_full");
        let nocbs = list("rcu_nocbs");
        let irq = list("irqaffinity");
        Params {
            iso,
            nohz,
            nocbs,
            irq,
        }
    }

    /// The profile's data cores are all isolated.
    fn data_cores_isolated(
        &mut self,
        ctx: &Context,
        isolated: Option<&CpuSet>,
        data: &Result<Option<CpuSet>, crate::model::cores::CoresError>,
    ) {
        match (isolated, data) {
            (None, Ok(Some(d))) => self.problems.push(format!(
                "isolcpus is not set (the profile's data cores are {d})"
            )),
            (Some(i), Ok(Some(d))) if !d.is_subset(i) => self.problems.push(format!(
                "the profile's data cores {d} are not all isolated (isolcpus={i}; missing {}){}",
                d.difference(i),
                ctx.data_cores_rule_note().unwrap_or_default()
            )),
            (None, Err(e)) => self.problems.push(format!(
                "isolcpus is not set, and the profile's data cores cannot be picked: {e}"
            )),
            (Some(_), Err(e)) => self.unverified.push(format!("data cores unknown: {e}")),
            _ => {}
        }
    }

    /// Every CPU a parameter names exists on this host.
    fn cpus_exist(&mut self, ex: &CpuSet, isolated: Option<&CpuSet>, p: &Params) {
        for (k, set) in [
            ("isolcpus", isolated),
            ("nohz_full", p.nohz.as_ref()),
            ("rcu_nocbs", p.nocbs.as_ref()),
            ("irqaffinity", p.irq.as_ref()),
        ] {
            if let Some(s) = set {
                let bad = s.difference(ex);
                if !bad.is_empty() {
                    self.problems.push(format!(
                        "{k} names CPUs {bad} that do not exist (the host has {ex})"
                    ));
                }
            }
        }
    }

    /// Interrupts stay off the isolated CPUs: irqaffinity= does not overlap them, and is set
    /// when the profile names one.
    fn interrupts(&mut self, ctx: &Context, i: &CpuSet, irq: Option<&CpuSet>) {
        match irq {
            Some(q) => {
                let overlap = q.intersection(i);
                if !overlap.is_empty() {
                    self.problems.push(format!(
                        "irqaffinity={q} overlaps the isolated CPUs on {overlap}: interrupts will land on data cores"
                    ));
                }
            }
            None if ctx.profile.profile.cpu.irqaffinity.is_some() => self
                .problems
                .push("irqaffinity is not set: interrupts may land on the isolated cores".into()),
            None => {}
        }
    }

    /// The SMT siblings of isolated CPUs are isolated too (they share a core with the data
    /// path).
    fn smt_siblings(&mut self, c: &daqtune_probe::cpu::CpuFacts, i: &CpuSet) {
        let mut orphans = CpuSet::new();
        for cpu in c.cpus.iter().filter(|x| i.contains(x.id)) {
            if let Some(sib) = &cpu.siblings {
                orphans = orphans.union(&sib.difference(i));
            }
        }
        if !orphans.is_empty() {
            self.problems.push(format!(
                "SMT siblings {orphans} of isolated CPUs are not isolated: they share a core with the data path"
            ));
        }
    }

    /// nohz_full= and rcu_nocbs= cover the isolated CPUs (equal where the kernel keeps one
    /// housekeeping mask), and rcu_nocb_poll is there when the profile asks for it.
    fn housekeeping(&mut self, ctx: &Context, cmd: &Cmdline, i: &CpuSet, p: &Params) {
        let profile_cpu = &ctx.profile.profile.cpu;
        let kernel = ctx.platform().kernel_release.clone();
        let strict =
            requires_equal_masks(kernel.as_deref()) || p.iso.as_ref().is_some_and(|x| x.nohz);
        for (k, set, wanted) in [
            ("nohz_full", &p.nohz, profile_cpu.nohz_full),
            ("rcu_nocbs", &p.nocbs, profile_cpu.rcu_nocbs),
        ] {
            match set {
                None if wanted => self
                    .problems
                    .push(format!("{k} is not set for the isolated CPUs {i}")),
                None => {}
                Some(s) if strict && k == "nohz_full" && s != i => self.problems.push(format!(
                    "nohz_full={s} differs from isolcpus={i}; kernel {} requires them to be equal and drops the second",
                    kernel.as_deref().unwrap_or("?")
                )),
                Some(s) if !i.is_subset(s) => self.problems.push(format!(
                    "{k}={s} does not cover the isolated CPUs (missing {})",
                    i.difference(s)
                )),
                Some(_) => {}
            }
        }
        if profile_cpu.rcu_nocb_poll && !cmd.has("rcu_nocb_poll") {
            self.problems.push("rcu_nocb_poll is not set".into());
        }
    }

    /// The effective state: what the kernel actually applied.
    fn effective(&mut self, c: &daqtune_probe::cpu::CpuFacts, i: &CpuSet, p: &Params) {
        if let Some(eff) = &c.isolated {
            if p.iso.as_ref().is_some_and(|x| x.domain) && eff != i {
                self.problems.push(format!(
                    "the kernel isolated {} (/sys/devices/system/cpu/isolated) instead of isolcpus={i}",
                    if eff.is_empty() { "nothing".to_string() } else { eff.to_string() }
                ));
            }
        }
        if let (Some(eff), Some(n)) = (&c.nohz_full, &p.nohz) {
            if eff != n {
                self.problems.push(format!(
                    "the kernel runs nohz_full on {} instead of {n} (CONFIG_NO_HZ_FULL missing, or the parameter was refused)",
                    if eff.is_empty() { "no CPU".to_string() } else { eff.to_string() }
                ));
            }
        }
    }
}

fn run(ctx: &Context) -> Vec<Verdict> {
    let cmd = match ctx.cmdline() {
        Ok(c) => c,
        Err(e) => return vec![Verdict::skip(ID, "host", e.to_string())],
    };
    let Analysis {
        problems,
        notes,
        unverified,
        observed,
    } = analyse(ctx, cmd);
    let expected = isolation_args(ctx).unwrap_or_default();
    let observed_s = if observed.is_empty() {
        "no isolation parameters".to_string()
    } else {
        observed.join(" ")
    };
    let expected_s = expected.join(" ");
    let subject = "/proc/cmdline";
    // What daqtune wrote and whether the next boot keeps it: another file that decides the
    // kernel arguments (a later grub drop-in, a stale grub.cfg, an extlinux default that is not
    // daqtune's entry) is named, whatever the running kernel has now.
    let outlook = boot_outlook(ctx.facts(), ctx.profile);
    if problems.is_empty() {
        if let Some(o) = &outlook {
            if let NextBoot::Drops { reasons } = &o.next {
                let msg = if observed.is_empty() {
                    "no CPU isolation requested or present".to_string()
                } else {
                    format!("isolation consistent now: {observed_s}")
                };
                return vec![Verdict::fail(
                    ID,
                    subject,
                    format!(
                        "{msg}; but the next boot will not keep daqtune's arguments from {}: {}",
                        o.written_to,
                        reasons.join("; ")
                    ),
                )
                .observed(observed_s)
                .expected(expected_s)
                .fix(next_boot_fix(&o.written_to))];
            }
        }
        let mut msg = if observed.is_empty() {
            "no CPU isolation requested or present".to_string()
        } else {
            format!("isolation consistent: {observed_s}")
        };
        if !notes.is_empty() {
            msg.push_str(&format!(" ({})", notes.join("; ")));
        }
        // Consistent as far as it could be read: a warn that names what was not checked, not a
        // pass.
        let v = if unverified.is_empty() {
            Verdict::pass(ID, subject, msg)
        } else {
            Verdict::warn(
                ID,
                subject,
                format!("{msg}; not verified: {}", unverified.join("; ")),
            )
        };
        return vec![v.observed(observed_s).expected(expected_s)];
    }
    let mut v = Verdict::fail(ID, subject, problems.join("; "))
        .observed(observed_s)
        .expected(expected_s.clone());
    let written_to = outlook
        .as_ref()
        .map_or(ctx.profile.profile.persist.grub_dropin.clone(), |o| {
            o.written_to.clone()
        });
    match pending_args(ctx.facts(), ctx.profile, &expected) {
        Pending::Waits => {
            v.status = Status::PendingReboot;
            v.message = format!(
                "{written_to} already carries `{expected_s}`; reboot to apply (now: {})",
                v.message
            );
            v.fix = Some(if written_to.contains("grub") {
                "sudo update-grub && sudo reboot".into()
            } else {
                "sudo reboot".into()
            });
            return vec![v];
        }
        Pending::WontBoot(why) => {
            v.message = format!("{}; {why}", v.message);
            v.fix = Some(next_boot_fix(&written_to));
            return vec![v];
        }
        Pending::NotWritten => {}
    }
    // A trial boot armed, or one that failed (issue 42): say so instead of asking for apply.
    if let Some(t) =
        crate::model::context::trial::current(ctx.facts(), crate::model::context::trial::STATE_DIR)
    {
        use crate::model::context::trial::TrialState;
        match t.state {
            TrialState::Pending if expected.iter().all(|w| t.args.contains(w)) => {
                v.status = Status::PendingReboot;
                v.message = format!("{} (now: {})", t.describe(), v.message);
                v.fix = Some("sudo reboot".into());
                return vec![v];
            }
            TrialState::Failed => v.message = format!("{}; {}", v.message, t.describe()),
            _ => {}
        }
    }
    if expected.is_empty() {
        v.fix = Some("name data cores this host has: a profile with `cpu: {isolated: \"LIST\"}` (see `daqtune profiles show generic-dgpu`)".into());
    } else {
        v.fix = Some(format!(
            "sudo daqtune apply --only kernel.cmdline   (appends `{expected_s}` to GRUB_CMDLINE_LINUX in {}), then update-grub and reboot",
            ctx.profile.profile.persist.grub_dropin
        ));
    }
    vec![v]
}

/// The fix when another file decides the next boot's arguments.
fn next_boot_fix(written_to: &str) -> String {
    if written_to.contains("extlinux") {
        format!("make `DEFAULT daqtune` the entry that boots in {written_to} (remove the later DEFAULT/ONTIMEOUT, or `sudo daqtune apply --only kernel.cmdline` again), then reboot")
    } else {
        "remove or fix the file named above (a later drop-in must append: `GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX ...\"`), then `sudo update-grub` and reboot".into()
    }
}

fn plan_kernel_args(cx: &PlanCx, plan: &mut Plan) -> Result<(), PlanError> {
    let (mut spec, notes) =
        kernel_arg_spec(cx.facts, cx.lp).map_err(|e| PlanError::Device("kernel".into(), e))?;
    // `pci=disable_acs_redir=` only with --allow-acs, and only where no IOMMU translates.
    if cx.opts.allow_acs && cx.kernel_version().is_some_and(|v| (v.0, v.1) >= (5, 1)) {
        if let Ok(ports) = crate::tunables::acs::acs_ports(&cx.context()) {
            if ports.iter().all(|p| p.iommu_blocks.is_none()) {
                spec.acs_redir_disable = ports.iter().filter_map(|p| p.bdf.parse().ok()).collect();
            }
        }
    }
    // What was left out, said for the setting asked for (a page size: hugepages').
    for n in notes {
        // A page size left out (`hugepagesz=...`) or a reservation over the host's bound
        // (`hugepages=N of SIZE not written`) is the hugepages setting's: said when it is asked
        // for, under its id (`apply --only hugepages` must say why nothing was reserved).
        let of = if n.starts_with("hugepagesz") || n.starts_with("hugepages=") {
            "hugepages"
        } else {
            ID
        };
        if cx.opts.wants(of) {
            plan.note(of, NoteLevel::Warn, n);
        }
    }
    // irqbalance decides where interrupts go too: a ban list of its own replaces its
    // detection of the isolated CPUs.
    if let Some(iso) = spec
        .isolation
        .as_ref()
        .filter(|_| cx.opts.wants(ID))
        .and_then(|i| daqtune_probe::cpulist::parse_cpulist(&i.isolated, None).ok())
    {
        for f in crate::model::context::irqbalance::host_findings(cx.facts, &iso) {
            plan.note(ID, NoteLevel::Warn, f);
        }
    }
    let full = spec.build()?;
    // The words of the settings this run is asked for (`--only hugepages`: the reservation's
    // alone); the file keeps every other setting's words as they are.
    let args = grub::KernelArgs::from_words(
        full.words()
            .iter()
            .filter(|w| cx.opts.wants(parts::kernel_word_owner(w))),
    )?;
    plan.kernel_args = Some(args.clone());
    if args.is_empty() {
        return Ok(());
    }
    if !cx.opts.persist {
        plan.note(
            ID,
            NoteLevel::Skip,
            "kernel arguments are persistent only (--runtime-only given)",
        );
        return Ok(());
    }
    let pref = cx.profile_ref();
    let mut written = false;
    match boot_config(cx.facts, cx.lp) {
        BootConfig::Grub { dropin } => {
            let text = grub_dropin(&full, &pref)?;
            let files = grub_files(cx.facts, &dropin, Some(&text));
            for f in grub::analyze(&files, &dropin, &args) {
                let level = if f.is_blocking() { NoteLevel::Warn } else { NoteLevel::Info };
                plan.note(ID, level, f.to_string());
            }
            let wrote = cx.parted_file_change(
                plan,
                ID,
                parts::Format::GrubDropin,
                &parts::KERNEL_OWNERS,
                "grub",
                &dropin,
                &text,
                0o644,
                true,
            );
            written |= wrote;
            if wrote {
                if let Some(c) = plan.changes.last_mut() {
                    c.note = Some(match cx.target {
                        Target::Live => "then update-grub (or grub2-mkconfig) and a reboot".into(),
                        Target::Root => "run `update-grub` (or `grub2-mkconfig -o /boot/grub2/grub.cfg`) on that host, then reboot".into(),
                    });
                }
            }
        }
        BootConfig::Extlinux { path } => {
            let Some(cur) = cx.facts.read_string(&path).ok() else {
                plan.note(ID, NoteLevel::Skip, format!("cannot read {path}"));
                return Ok(());
            };
            match extlinux_entry(&cur, &full) {
                Ok(new) => {
                    // add_entry makes its label the DEFAULT; a later ONTIMEOUT still decides
                    // for U-Boot.
                    match extlinux::default_entry(&new) {
                        Ok(d) if d.label != extlinux::LABEL => plan.note(
                            ID,
                            NoteLevel::Warn,
                            format!(
                                "{path}:{}: {} boots `{}` after daqtune's `DEFAULT {}`: the tuning entry would not boot; remove that line",
                                d.line, d.via, d.label, extlinux::LABEL
                            ),
                        ),
                        Ok(_) => {}
                        Err(e) => plan.note(ID, NoteLevel::Warn, format!("{path}: {e}")),
                    }
                    written |= cx.parted_file_change(
                        plan,
                        ID,
                        parts::Format::Extlinux,
                        &parts::KERNEL_OWNERS,
                        "extlinux",
                        &path,
                        &new,
                        0o644,
                        true,
                    );
                }
                Err(e) => plan.note(ID, NoteLevel::Skip, format!("{path}: {e}")),
            }
        }
        BootConfig::Unknown => plan.note(
            ID,
            NoteLevel::Skip,
            format!(
                "no /etc/default/grub or {EXTLINUX_CONF}: add these kernel arguments to your boot manager: {}",
                args.words().join(" ")
            ),
        ),
    }
    // Already written: waiting for a boot, or decided otherwise by another file?
    if !written {
        match boot_outlook(cx.facts, cx.lp).map(|o| o.next) {
            Some(NextBoot::Drops { reasons }) => {
                // Findings of the grub defaults are noted above already.
                let new: Vec<&String> = reasons
                    .iter()
                    .filter(|r| !plan.notes.iter().any(|n| n.check == ID && &n.message == *r))
                    .collect();
                let msg = if new.is_empty() {
                    "written, but the next boot will not carry it (see above)".to_string()
                } else {
                    format!(
                        "written, but the next boot will not carry it: {}",
                        new.iter()
                            .map(|r| r.as_str())
                            .collect::<Vec<_>>()
                            .join("; ")
                    )
                };
                plan.note(ID, NoteLevel::Warn, msg);
            }
            Some(NextBoot::Unknown { reason }) => plan.note(
                ID,
                NoteLevel::Info,
                format!("written; whether the next boot carries it cannot be told: {reason}"),
            ),
            _ => {
                if let Some(p) = pending_kernel_args(cx.facts, cx.lp).filter(|p| !p.is_empty()) {
                    plan.note(
                        ID,
                        NoteLevel::PendingReboot,
                        format!("written, waiting for a reboot: {}", p.join(" ")),
                    );
                }
            }
        }
    }
    Ok(())
}

/// The grub drop-in carrying `args`.
fn grub_dropin(
    args: &grub::KernelArgs,
    profile_ref: &str,
) -> Result<String, daqtune_units::InvalidValue> {
    grub::render_dropin(args, profile_ref)
}

/// `conf` (an extlinux.conf) with daqtune's entry carrying `args` as its default.
fn extlinux_entry(conf: &str, args: &grub::KernelArgs) -> Result<String, extlinux::ExtlinuxError> {
    extlinux::add_entry(conf, args)
}

/// The kernel arguments `generate` prints: the profile's, as the plan builds them without the
/// options of a plan (`--allow-acs`).
fn generate_args(g: &GenerateCx) -> Result<grub::KernelArgs, ArtifactError> {
    let (spec, _) = kernel_arg_spec(g.facts, g.lp).map_err(ArtifactError::Host)?;
    Ok(spec.build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equality_rule_by_kernel() {
        assert!(requires_equal_masks(Some("5.15.148-tegra")));
        assert!(!requires_equal_masks(Some("6.8.0-1015-nvidia")));
        assert!(!requires_equal_masks(None));
    }
}
