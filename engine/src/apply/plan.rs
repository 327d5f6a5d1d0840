//! A plan: the runtime writes and file changes that bring a host to its profile. A plan is
//! data; printing it is a dry run, and `apply` executes exactly what it holds.
//!
//! Planning compares what the host has with what the profile asks for, item by item, so a
//! host that already matches gets an empty plan (a second `apply` changes nothing).

use super::setters::Target;
use crate::facts::Facts;
use crate::profile::{CoreSpec, LoadedProfile};
use daqtune_probe::mem::parse_size_kb;
use daqtune_probe::{CpuSet, Host};
use daqtune_units::grub::{self, HugepageArgs, IsolationArgs, KernelArgSpec, KernelArgs};
use daqtune_units::{etc, extlinux, network, systemd, udev};
use std::fmt;

/// One change to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write a kernel attribute (sysfs/procfs). `from` is the exact content read.
    Attr {
        path: String,
        from: String,
        to: String,
    },
    /// Set an MTU with SIOCSIFMTU (live hosts; under a root it is an `Attr` on `mtu`).
    Mtu { ifname: String, from: u32, to: u32 },
    /// Read-modify-write of a 16-bit config-space register: DevCtl for MRRS (`mask` 0x7000),
    /// ACS Control for the redirect bits. Only `mask` bits change.
    ConfigWord {
        bdf: String,
        /// What the register is, for messages (`DevCtl`, `ACSCtl`).
        register: String,
        path: String,
        offset: u64,
        from: u16,
        to: u16,
        mask: u16,
    },
    /// modprobe (live hosts).
    Module { name: String },
    /// Write a whole file. `from`: its current bytes, `None` when absent.
    File {
        path: String,
        from: Option<Vec<u8>>,
        to: Vec<u8>,
        mode: u32,
    },
    /// Create a symlink (enable a unit).
    Symlink { path: String, target: String },
    /// Lock a GPU clock domain at its maximum (through [`super::gpu::GpuSetters`]).
    GpuLock {
        uuid: String,
        domain: super::gpu::GpuDomain,
    },
    /// Turn GPU persistence mode on.
    GpuPersistence { uuid: String },
}

impl Action {
    pub fn is_persistent(&self) -> bool {
        match self {
            Action::File { path, .. } => !is_kernel_path(path) && path != GPU_JSON,
            Action::Symlink { .. } => true,
            _ => false,
        }
    }
}

fn is_kernel_path(p: &str) -> bool {
    p.starts_with("/sys/") || p.starts_with("/proc/")
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The check this change satisfies.
    pub check: String,
    pub subject: String,
    pub action: Action,
    /// Takes effect at the next boot.
    pub reboot: bool,
    /// Shown with the change (a cap, a caveat).
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteLevel {
    Info,
    Warn,
    /// Nothing can be done for this item here, with the reason.
    Skip,
    /// Done, but waits for a reboot.
    PendingReboot,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub check: String,
    pub level: NoteLevel,
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub profile: String,
    pub target: Target,
    pub changes: Vec<Change>,
    pub notes: Vec<Note>,
    /// The kernel arguments the profile wants, for the print-only mode.
    pub kernel_args: Option<KernelArgs>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
    fn note(&mut self, check: &str, level: NoteLevel, message: impl Into<String>) {
        self.notes.push(Note {
            check: check.into(),
            level,
            message: message.into(),
        });
    }
}

/// What to plan.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Check ids to act on (empty = all).
    pub only: Vec<String>,
    pub runtime: bool,
    pub persist: bool,
    /// Restrict device-level changes (MRRS) to this PCI function (the udev path).
    pub device: Option<String>,
    pub allow_acs: bool,
    /// The daqtune binary generated units and rules run.
    pub exe: String,
    /// How units name the profile (`igx-orin`, or an absolute path to a user file).
    pub profile_ref: String,
    /// Why there is no GPU control in this run (NVML missing), for the plan's note.
    pub gpu_unavailable: Option<String>,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            only: Vec::new(),
            runtime: true,
            persist: true,
            device: None,
            allow_acs: false,
            exe: daqtune_units::DEFAULT_EXE.into(),
            profile_ref: String::new(),
            gpu_unavailable: None,
        }
    }
}

impl PlanOptions {
    fn wants(&self, id: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == id)
    }
}

/// Whether this run's kernel-argument drop-in carries a setting that needs kernel `min`: the
/// kernel has it, daqtune writes this host's boot configuration, and the run writes the drop-in
/// (`--only cpu.governor` does not, nor a profile with `kernel.cmdline` n/a): else a unit must
/// make the setting persistent, or it would be lost at the next boot.
fn cmdline_carries(cx: &Ctx, min: (u32, u32)) -> bool {
    cx.opts.wants("kernel.cmdline")
        && cx.kernel_version().is_some_and(|v| (v.0, v.1) >= min)
        && boot_config(cx.facts, cx.lp) != BootConfig::Unknown
        && !cx.lp.profile.not_applicable.contains_key("kernel.cmdline")
}

/// The ids `apply --only` understands.
pub const APPLY_IDS: &[&str] = &[
    "kernel.cmdline",
    "cpu.governor",
    "cpu.idle",
    "hugepages",
    "pcie.mrrs",
    "pcie.acs",
    "nic.mtu",
    "gpu.peermem",
    "gpu.clocks",
    "net.sysctl",
];

/// Errors that stop planning altogether (bad options, not host state).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("unknown id `{0}` for --only (expected one of: {ids})", ids = APPLY_IDS.join(", "))]
    UnknownId(String),
    #[error("{0}")]
    Invalid(#[from] daqtune_units::InvalidValue),
    #[error("--device {0}: {1}")]
    Device(String, String),
}

struct Ctx<'a> {
    facts: &'a Facts<'a>,
    lp: &'a LoadedProfile,
    opts: &'a PlanOptions,
    target: Target,
}

impl Ctx<'_> {
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        self.facts.read_bytes(path).ok().map(|b| b.to_vec())
    }
    #[allow(clippy::too_many_arguments)]
    fn file_change(
        &self,
        plan: &mut Plan,
        check: &str,
        subject: &str,
        path: &str,
        to: String,
        mode: u32,
        reboot: bool,
    ) {
        let from = self.read(path);
        if from.as_deref() == Some(to.as_bytes()) {
            return;
        }
        plan.changes.push(Change {
            check: check.into(),
            subject: subject.into(),
            action: Action::File {
                path: path.into(),
                from,
                to: to.into_bytes(),
                mode,
            },
            reboot,
            note: None,
        });
    }
    fn enable(&self, plan: &mut Plan, check: &str, unit: &str, wanted_by: &str) {
        let link = format!("/etc/systemd/system/{wanted_by}.wants/{unit}");
        let target = format!("/etc/systemd/system/{unit}");
        if self.facts.read_link(&link).ok().as_deref() == Some(&target) {
            return;
        }
        plan.changes.push(Change {
            check: check.into(),
            subject: unit.into(),
            action: Action::Symlink { path: link, target },
            reboot: false,
            note: None,
        });
    }
    fn kernel_version(&self) -> Option<(u32, u32, u32)> {
        self.facts.kernel_version()
    }
}

/// Build the plan for `lp` on `host` (facts gathered for this plan alone).
pub fn build_plan(host: &Host, lp: &LoadedProfile, opts: &PlanOptions) -> Result<Plan, PlanError> {
    build_plan_with(&Facts::new(host), lp, opts, None)
}

/// [`build_plan`] on the run's facts, with access to the GPUs (clock locks and persistence).
pub fn build_plan_with(
    facts: &Facts,
    lp: &LoadedProfile,
    opts: &PlanOptions,
    gpu: Option<&dyn super::gpu::GpuSetters>,
) -> Result<Plan, PlanError> {
    for id in &opts.only {
        if !APPLY_IDS.contains(&id.as_str()) {
            return Err(PlanError::UnknownId(id.clone()));
        }
    }
    let target = if facts.host.is_live() {
        Target::Live
    } else {
        Target::Root
    };
    let cx = Ctx {
        facts,
        lp,
        opts,
        target,
    };
    let mut plan = Plan {
        profile: lp.profile.name.clone(),
        target,
        changes: Vec::new(),
        notes: Vec::new(),
        kernel_args: None,
    };
    let na = |id: &str| lp.profile.not_applicable.get(id).cloned();
    for id in APPLY_IDS {
        // The boot reservation of hugepages lives in the kernel arguments (seed 000 Step 4),
        // so `--only hugepages` writes the drop-in too; it always carries every argument.
        let wanted = opts.wants(id) || (*id == "kernel.cmdline" && opts.wants("hugepages"));
        if !wanted {
            continue;
        }
        if let Some(reason) = na(id) {
            plan.note(
                id,
                NoteLevel::Skip,
                format!("n/a on this platform: {reason}"),
            );
            continue;
        }
        match *id {
            "kernel.cmdline" => plan_kernel_args(&cx, &mut plan)?,
            "cpu.governor" => plan_governor(&cx, &mut plan)?,
            "cpu.idle" => plan_idle(&cx, &mut plan),
            "hugepages" => plan_hugepages(&cx, &mut plan)?,
            "pcie.mrrs" => plan_mrrs(&cx, &mut plan)?,
            "pcie.acs" => plan_acs(&cx, &mut plan)?,
            "nic.mtu" => plan_mtu(&cx, &mut plan)?,
            "gpu.peermem" => plan_peermem(&cx, &mut plan)?,
            "gpu.clocks" => plan_gpu_clocks(&cx, &mut plan, gpu)?,
            "net.sysctl" => plan_sysctl(&cx, &mut plan)?,
            _ => {}
        }
    }
    if let Some(lockdown) = facts
        .platform()
        .lockdown
        .as_deref()
        .filter(|l| *l != "none")
    {
        if plan
            .changes
            .iter()
            .any(|c| matches!(c.action, Action::ConfigWord { .. }))
        {
            plan.note(
                "platform",
                NoteLevel::Warn,
                format!("kernel lockdown is `{lockdown}`: PCI config-space writes (MRRS) will be refused; disable Secure Boot in the firmware setup (or `mokutil --disable-validation`), apply, then re-enable it"),
            );
        }
    }
    Ok(plan)
}

/// The data cores as a CPU list: the profile's list, or its rule resolved on this host the
/// way the checks resolve it (so apply and check agree on the cores).
fn resolve_data_cores(facts: &Facts, lp: &LoadedProfile) -> Result<Option<String>, String> {
    match &lp.profile.cpu.isolated {
        None => Ok(None),
        Some(CoreSpec::List(s)) => Ok(Some(s.clone())),
        Some(CoreSpec::Rule(_)) => crate::checks::Context::with_facts(facts, lp)
            .data_cores()
            .map(|o| o.filter(|s| !s.is_empty()).map(|s| s.to_string())),
    }
}

fn data_cores(cx: &Ctx) -> Result<Option<String>, String> {
    resolve_data_cores(cx.facts, cx.lp)
}

/// The kernel arguments the profile implies on this host.
pub fn kernel_arg_spec(
    facts: &Facts,
    lp: &LoadedProfile,
) -> Result<(KernelArgSpec, Vec<String>), String> {
    let p = &lp.profile;
    let mut notes = Vec::new();
    let mut spec = KernelArgSpec::default();
    if p.hugepages.count > 0 && !lp.profile.not_applicable.contains_key("hugepages") {
        spec.hugepages = Some(HugepageArgs {
            default_size: p.hugepages.default_size,
            size: p.hugepages.size.clone(),
            count: p.hugepages.count,
        });
    }
    let iso = match resolve_data_cores(facts, lp) {
        Ok(v) => v,
        Err(e) => {
            notes.push(format!("isolation arguments left out: {e}"));
            None
        }
    };
    if let Some(iso) = iso {
        let irq = match &p.cpu.irqaffinity {
            Some(s) => Some(s.clone()),
            None => {
                let iso_set =
                    daqtune_probe::cpulist::parse_cpulist(&iso, None).map_err(|e| e.to_string())?;
                facts
                    .cpus()
                    .ok()
                    .map(|c| c.online.difference(&iso_set))
                    .filter(|s: &CpuSet| !s.is_empty())
                    .map(|s| s.to_string())
            }
        };
        spec.isolation = Some(IsolationArgs {
            isolated: iso,
            irqaffinity: irq,
            nohz_full: p.cpu.nohz_full,
            rcu_nocbs: p.cpu.rcu_nocbs,
            rcu_nocb_poll: p.cpu.rcu_nocb_poll,
        });
    }
    // cpufreq.default_governor= exists from 5.9; older kernels get a unit instead.
    let kv = facts.kernel_version();
    if p.cpu.governor == "performance" && kv.is_some_and(|v| (v.0, v.1) >= (5, 9)) {
        spec.governor_performance = true;
    }
    Ok((spec, notes))
}

/// Which boot configuration the host uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootConfig {
    Grub { dropin: String },
    Extlinux { path: String },
    Unknown,
}

pub const EXTLINUX_CONF: &str = "/boot/extlinux/extlinux.conf";

pub fn boot_config(facts: &Facts, lp: &LoadedProfile) -> BootConfig {
    if facts.exists("/etc/default/grub") {
        BootConfig::Grub {
            dropin: lp.profile.persist.grub_dropin.clone(),
        }
    } else if facts.exists(EXTLINUX_CONF) {
        BootConfig::Extlinux {
            path: EXTLINUX_CONF.into(),
        }
    } else {
        BootConfig::Unknown
    }
}

/// /etc/default/grub and the drop-ins, in sourcing order, with `ours` replaced by (or added
/// as) `our_text` when given.
pub fn grub_files(facts: &Facts, ours: &str, our_text: Option<&str>) -> Vec<(String, String)> {
    let mut files = Vec::new();
    if let Ok(t) = facts.read_string("/etc/default/grub") {
        files.push(("/etc/default/grub".to_string(), t));
    }
    let mut names: Vec<String> = facts
        .read_dir("/etc/default/grub.d")
        .map(|d| d.to_vec())
        .unwrap_or_default();
    let our_name = ours.rsplit('/').next().unwrap_or(ours).to_string();
    if our_text.is_some() && !names.contains(&our_name) {
        names.push(our_name.clone());
    }
    for n in grub::dropin_order(&names) {
        let path = format!("/etc/default/grub.d/{n}");
        let text = if n == our_name {
            match our_text {
                Some(t) => t.to_string(),
                None => match facts.read_string(&path) {
                    Ok(t) => t,
                    Err(_) => continue,
                },
            }
        } else {
            match facts.read_string(&path) {
                Ok(t) => t,
                Err(_) => continue,
            }
        };
        files.push((path, text));
    }
    files
}

/// Words the next boot will pass that the running kernel did not get: what waits for a
/// reboot. `None` when daqtune wrote no kernel arguments (or they cannot be evaluated).
pub fn pending_kernel_args(facts: &Facts, lp: &LoadedProfile) -> Option<Vec<String>> {
    let running = facts.cmdline().ok()?;
    let has = |w: &str| {
        let (k, v) = w.split_once('=').map_or((w, None), |(k, v)| (k, Some(v)));
        let k = k.replace('-', "_");
        running
            .params
            .iter()
            .any(|p| p.key == k && p.value.as_deref() == v)
    };
    let words: Vec<String> = match boot_config(facts, lp) {
        BootConfig::Grub { dropin } => {
            let ours = facts.read_string(&dropin).ok()?;
            if !ours.contains(daqtune_units::OWNER_MARK) {
                return None;
            }
            let ev = grub::evaluate(&grub_files(facts, &dropin, None));
            let ours_words: Vec<String> = grub::evaluate(&[(dropin.clone(), ours)])
                .get(grub::CMDLINE)
                .split_whitespace()
                .map(|w| w.replace("\\;", ";"))
                .collect();
            let line: Vec<String> = ev
                .default_entry_line()
                .split_whitespace()
                .map(|w| w.replace("\\;", ";"))
                .collect();
            // Only what our drop-in contributes and survives to the boot entry.
            ours_words
                .into_iter()
                .filter(|w| line.contains(w))
                .collect()
        }
        BootConfig::Extlinux { path } => {
            let t = facts.read_string(&path).ok()?;
            let mut in_ours = false;
            let mut words = Vec::new();
            for l in t.lines() {
                let tl = l.trim();
                if let Some(label) = tl.strip_prefix("LABEL ") {
                    in_ours = label.trim() == extlinux::LABEL;
                } else if in_ours {
                    if let Some(a) = tl.strip_prefix("APPEND ") {
                        words = a
                            .split_whitespace()
                            .filter(|w| !w.starts_with('$'))
                            .map(String::from)
                            .collect();
                    }
                }
            }
            words
        }
        BootConfig::Unknown => return None,
    };
    Some(words.into_iter().filter(|w| !has(w)).collect())
}

fn plan_kernel_args(cx: &Ctx, plan: &mut Plan) -> Result<(), PlanError> {
    const ID: &str = "kernel.cmdline";
    let (mut spec, notes) =
        kernel_arg_spec(cx.facts, cx.lp).map_err(|e| PlanError::Device("kernel".into(), e))?;
    // `pci=disable_acs_redir=` only with --allow-acs, and only where no IOMMU translates.
    if cx.opts.allow_acs && cx.kernel_version().is_some_and(|v| (v.0, v.1) >= (5, 1)) {
        if let Ok(ports) = acs_ports(cx.facts) {
            if ports.iter().all(|p| p.iommu_blocks.is_none()) {
                spec.acs_redir_disable = ports.iter().filter_map(|p| p.bdf.parse().ok()).collect();
            }
        }
    }
    for n in notes {
        plan.note(ID, NoteLevel::Warn, n);
    }
    let args = spec.build()?;
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
    let pref = profile_ref(cx);
    match boot_config(cx.facts, cx.lp) {
        BootConfig::Grub { dropin } => {
            let text = grub::render_dropin(&args, &pref)?;
            let files = grub_files(cx.facts, &dropin, Some(&text));
            for f in grub::analyze(&files, &dropin, &args) {
                let level = if f.is_blocking() { NoteLevel::Warn } else { NoteLevel::Info };
                plan.note(ID, level, f.to_string());
            }
            let before = plan.changes.len();
            cx.file_change(plan, ID, "grub", &dropin, text, 0o644, true);
            if plan.changes.len() > before {
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
            match extlinux::add_entry(&cur, &args) {
                Ok(new) => cx.file_change(plan, ID, "extlinux", &path, new, 0o644, true),
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
    // Already written and not yet booted?
    if !plan.changes.iter().any(|c| c.check == ID) {
        if let Some(p) = pending_kernel_args(cx.facts, cx.lp).filter(|p| !p.is_empty()) {
            plan.note(
                ID,
                NoteLevel::PendingReboot,
                format!("written, waiting for a reboot: {}", p.join(" ")),
            );
        }
    }
    Ok(())
}

fn profile_ref(cx: &Ctx) -> String {
    if cx.opts.profile_ref.is_empty() {
        cx.lp.profile.name.clone()
    } else {
        cx.opts.profile_ref.clone()
    }
}

fn plan_governor(cx: &Ctx, plan: &mut Plan) -> Result<(), PlanError> {
    const ID: &str = "cpu.governor";
    let want = cx.lp.profile.cpu.governor.clone();
    if cx.opts.runtime {
        match cx.facts.cpus() {
            Err(e) => plan.note(ID, NoteLevel::Skip, e.to_string()),
            Ok(cpus) => {
                let with_freq: Vec<_> = cpus.cpus.iter().filter(|c| c.governor.is_some()).collect();
                if with_freq.is_empty() {
                    plan.note(ID, NoteLevel::Skip, "no cpufreq driver: /sys/devices/system/cpu/cpu*/cpufreq is absent (a VM, a container, or firmware-controlled frequency), so there is no governor to set");
                }
                for c in with_freq {
                    let cur = c.governor.clone().unwrap_or_default();
                    if cur == want {
                        continue;
                    }
                    if !c.available_governors.is_empty() && !c.available_governors.contains(&want) {
                        plan.note(
                            ID,
                            NoteLevel::Skip,
                            format!(
                                "cpu{}: governor `{want}` is not offered (available: {})",
                                c.id,
                                c.available_governors.join(" ")
                            ),
                        );
                        continue;
                    }
                    let path = format!(
                        "/sys/devices/system/cpu/cpu{}/cpufreq/scaling_governor",
                        c.id
                    );
                    // The value the facts read (apply journals what is there when it writes).
                    let from = format!("{cur}\n");
                    plan.changes.push(Change {
                        check: ID.into(),
                        subject: format!("cpu{}", c.id),
                        action: Action::Attr {
                            path,
                            from,
                            to: want.clone(),
                        },
                        reboot: false,
                        note: None,
                    });
                }
            }
        }
    }
    if cx.opts.persist {
        let by_cmdline = want == "performance" && cmdline_carries(cx, (5, 9));
        if !by_cmdline {
            let u = systemd::governor_unit(&cx.opts.exe, &profile_ref(cx));
            let text = u.render()?;
            cx.file_change(
                plan,
                ID,
                &u.name,
                &format!("/etc/systemd/system/{}", u.name),
                text,
                0o644,
                false,
            );
            cx.enable(plan, ID, &u.name, "multi-user.target");
        }
    }
    Ok(())
}

fn plan_idle(cx: &Ctx, plan: &mut Plan) {
    const ID: &str = "cpu.idle";
    if !cx.opts.runtime {
        return;
    }
    let Ok(Some(list)) = data_cores(cx) else {
        if !cx.opts.only.is_empty() {
            plan.note(ID, NoteLevel::Skip, "no data-core list in the profile");
        }
        return;
    };
    let Ok(set) = daqtune_probe::cpulist::parse_cpulist(&list, None) else {
        return;
    };
    let Ok(cpus) = cx.facts.cpus() else { return };
    let max = cx.lp.profile.cpu.max_idle_latency_us;
    for c in cpus.cpus.iter().filter(|c| set.contains(c.id)) {
        for s in &c.idle_states {
            if s.latency_us.is_some_and(|l| l > max) && s.disabled == Some(false) {
                let path = format!(
                    "/sys/devices/system/cpu/cpu{}/cpuidle/state{}/disable",
                    c.id, s.index
                );
                let from = "0\n".to_string();
                plan.changes.push(Change {
                    check: ID.into(),
                    subject: format!("cpu{} {}", c.id, s.name),
                    action: Action::Attr {
                        path,
                        from,
                        to: "1".into(),
                    },
                    reboot: false,
                    note: Some(format!(
                        "exit latency {} µs > {max} µs",
                        s.latency_us.unwrap_or(0)
                    )),
                });
            }
        }
    }
}

fn plan_hugepages(cx: &Ctx, plan: &mut Plan) -> Result<(), PlanError> {
    const ID: &str = "hugepages";
    let hp = &cx.lp.profile.hugepages;
    let Some(size_kb) = parse_size_kb(&hp.size) else {
        plan.note(
            ID,
            NoteLevel::Skip,
            format!("page size `{}` not understood", hp.size),
        );
        return Ok(());
    };
    if cx.opts.runtime && hp.count > 0 {
        let mem = cx.facts.mem();
        match mem.pool(size_kb) {
            None => plan.note(ID, NoteLevel::Skip, format!("the kernel offers no {} page pool (/sys/kernel/mm/hugepages/hugepages-{size_kb}kB is absent)", hp.size)),
            Some(pool) if pool.total >= hp.count => {}
            Some(pool) => {
                // On a multi-node host whose data cores sit on one node, the pages go to that
                // node (DPDK allocates mbufs near the cores); otherwise to the global pool,
                // which the kernel spreads over the nodes.
                let node = data_cores(cx).ok().flatten().and_then(|list| {
                    let set = daqtune_probe::cpulist::parse_cpulist(&list, None).ok()?;
                    if mem.nodes.len() < 2 {
                        return None;
                    }
                    mem.nodes.iter().find(|n| !set.is_empty() && set.is_subset(&n.cpus)).cloned()
                });
                let missing = hp.count - pool.total;
                let (path, label, cur_total, in_use, avail, total_kb) = match &node {
                    Some(n) => {
                        let np = mem.node_pools.iter().find(|p| p.node == n.id && p.size_kb == size_kb);
                        (
                            format!("/sys/devices/system/node/node{}/hugepages/hugepages-{size_kb}kB/nr_hugepages", n.id),
                            format!("{} pool on node{}", hp.size, n.id),
                            np.map_or(0, |p| p.total),
                            np.map_or(0, |p| p.total.saturating_sub(p.free)),
                            n.mem_free_kb,
                            n.mem_total_kb,
                        )
                    }
                    None => (
                        format!("/sys/kernel/mm/hugepages/hugepages-{size_kb}kB/nr_hugepages"),
                        format!("{} pool", hp.size),
                        pool.total,
                        pool.in_use(),
                        mem.mem_available_kb,
                        mem.mem_total_kb,
                    ),
                };
                match avail {
                    None => plan.note(ID, NoteLevel::Skip, "cannot read the free memory (/proc/meminfo, node meminfo), so a reservation cannot be capped by it"),
                    Some(avail) => {
                        // Leave an eighth of the memory (at least 256 MiB) to everything else.
                        let reserve = (total_kb.unwrap_or(0) / 8).max(256 * 1024);
                        let extra = avail.saturating_sub(reserve) / size_kb;
                        // Never below the pages in use (the pool only grows here).
                        let target = (cur_total + missing).min(cur_total + extra).max(in_use);
                        if target <= cur_total {
                            plan.note(ID, NoteLevel::Warn, format!("{} x {} pages wanted, {} reserved, and free memory does not allow more; reserve them at boot (kernel arguments)", hp.count, hp.size, pool.total));
                        } else {
                            let from = format!("{cur_total}\n");
                            let mut note = None;
                            if target < cur_total + missing {
                                note = Some(format!("capped at {target} of {} by free memory", cur_total + missing));
                            } else if size_kb >= 1024 * 1024 && cx.target == Target::Live {
                                note = Some("1G pages need contiguous memory: the kernel may reserve fewer at run time (read back after); the boot-time reservation is reliable".into());
                            }
                            plan.changes.push(Change {
                                check: ID.into(),
                                subject: label,
                                action: Action::Attr { path, from, to: target.to_string() },
                                reboot: false,
                                note,
                            });
                        }
                    }
                }
            }
        }
    }
    if cx.opts.persist {
        if let Some(mp) = &hp.mount {
            let (name, text) = systemd::hugetlbfs_mount(mp, &hp.size, &profile_ref(cx))?;
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
            let mounted = cx
                .facts
                .mem()
                .mounts
                .iter()
                .any(|m| m.fstype == "hugetlbfs" && m.target == *mp);
            if !mounted {
                plan.note(
                    ID,
                    NoteLevel::Info,
                    format!(
                        "{mp} is mounted by {name} at boot (or now with `systemctl start {name}`)"
                    ),
                );
            }
        }
    }
    Ok(())
}

struct NicPort {
    bdf: String,
    netdevs: Vec<(String, Option<String>)>,
}

fn connectx_pfs(cx: &Ctx) -> Result<Vec<NicPort>, String> {
    let facts = cx.facts.pci().map_err(str::to_string)?;
    Ok(facts
        .nics
        .iter()
        .filter(|n| n.connectx && !n.is_vf)
        .map(|n| NicPort {
            bdf: n.addr.to_string(),
            netdevs: n
                .netdevs
                .iter()
                .map(|d| (d.name.clone(), d.address.clone()))
                .collect(),
        })
        .collect())
}

fn plan_mrrs(cx: &Ctx, plan: &mut Plan) -> Result<(), PlanError> {
    const ID: &str = "pcie.mrrs";
    let want = cx.lp.profile.pcie.mrrs;
    let pfs = match connectx_pfs(cx) {
        Ok(p) => p,
        Err(e) => {
            plan.note(ID, NoteLevel::Skip, e);
            return Ok(());
        }
    };
    if let Some(dev) = &cx.opts.device {
        let a: daqtune_units::PciAddr = dev.parse()?;
        if !pfs.iter().any(|p| p.bdf == a.to_string()) {
            return Err(PlanError::Device(
                dev.clone(),
                "not a ConnectX physical function on this host (VFs have no MRRS)".into(),
            ));
        }
    }
    if pfs.is_empty() {
        plan.note(ID, NoteLevel::Skip, "no ConnectX physical function found");
        return Ok(());
    }
    if cx.opts.runtime {
        for pf in &pfs {
            if cx.opts.device.as_deref().is_some_and(|d| {
                d.parse::<daqtune_units::PciAddr>()
                    .map(|a| a.to_string())
                    .ok()
                    .as_deref()
                    != Some(pf.bdf.as_str())
            }) {
                continue;
            }
            let path = format!("/sys/bus/pci/devices/{}/config", pf.bdf);
            // DevCtl as the PCI facts decoded it from the config space they read; apply reads
            // the register again under its lock and refuses if it moved.
            let dev = cx
                .facts
                .pci()
                .ok()
                .and_then(|f| f.tree.devices.iter().find(|d| d.addr.to_string() == pf.bdf));
            let Some(dev) = dev else { continue };
            if let (None, Some(e)) = (&dev.config, &dev.config_error) {
                plan.note(
                    ID,
                    NoteLevel::Skip,
                    format!("{}: cannot read config space: {e}", pf.bdf),
                );
                continue;
            }
            let Some(cap) = dev.pcie() else {
                let why = if dev.config_len <= 64 {
                    "only 64 bytes of config space are visible (not root)"
                } else {
                    "no PCI Express capability"
                };
                plan.note(
                    ID,
                    NoteLevel::Skip,
                    format!("{}: {why}; refusing to write", pf.bdf),
                );
                continue;
            };
            let off = cap.offset + 8;
            let devctl = cap.devctl;
            let new = match daqtune_probe::pci::config::mrrs_rmw(devctl, want) {
                Ok(n) => n,
                Err(e) => {
                    plan.note(ID, NoteLevel::Skip, format!("{}: {e}", pf.bdf));
                    continue;
                }
            };
            if new != devctl {
                let cur = 128u32 << ((devctl >> 12) & 7);
                plan.changes.push(Change {
                    check: ID.into(),
                    subject: pf.bdf.clone(),
                    action: Action::ConfigWord {
                        bdf: pf.bdf.clone(),
                        register: "DevCtl".into(),
                        path,
                        offset: off as u64,
                        from: devctl,
                        to: new,
                        mask: 0x7000,
                    },
                    reboot: false,
                    note: Some(format!("MRRS {cur} -> {want} (DevCtl at 0x{off:x}: 0x{devctl:04x} -> 0x{new:04x}, bits 14:12 only)")),
                });
            }
        }
    }
    if cx.opts.persist && cx.opts.device.is_none() {
        let addrs: Vec<daqtune_units::PciAddr> =
            pfs.iter().filter_map(|p| p.bdf.parse().ok()).collect();
        let text = udev::mrrs_rule(&cx.opts.exe, &profile_ref(cx), &addrs)?;
        cx.file_change(plan, ID, "udev rule", udev::RULE_PATH, text, 0o644, false);
    }
    Ok(())
}

/// A data-path port: (interface, MAC, PCI function).
type Port = (String, Option<String>, Option<String>);

fn data_interfaces(cx: &Ctx) -> Result<Vec<Port>, String> {
    let named = &cx.lp.profile.nic.interfaces;
    let pfs = connectx_pfs(cx)?;
    let mut out = Vec::new();
    if named.is_empty() {
        for pf in pfs {
            for (n, mac) in pf.netdevs {
                out.push((n, mac, Some(pf.bdf.clone())));
            }
        }
    } else {
        for n in named {
            let pf = pfs.iter().find(|p| p.netdevs.iter().any(|d| &d.0 == n));
            // A ConnectX netdev's MAC is in the PCI facts; another port's is read.
            let mac = match pf.and_then(|p| p.netdevs.iter().find(|d| &d.0 == n)) {
                Some((_, mac)) => mac.clone(),
                None => cx
                    .facts
                    .read_attr(&format!("/sys/class/net/{n}/address"))
                    .ok(),
            };
            let bdf = pf.map(|p| p.bdf.clone());
            out.push((n.clone(), mac, bdf));
        }
    }
    Ok(out)
}

/// How the ports' network configuration is managed.
pub fn network_style(facts: &Facts, lp: &LoadedProfile) -> &'static str {
    match lp.profile.persist.network.as_str() {
        "netplan" => "netplan",
        "networkmanager" => "networkmanager",
        "networkd" => "networkd",
        _ => {
            let netplan = facts
                .read_dir("/etc/netplan")
                .unwrap_or_default()
                .iter()
                .any(|n| n.ends_with(".yaml") && n != "90-daqtune.yaml");
            if netplan {
                "netplan"
            } else if facts.is_dir("/etc/NetworkManager/system-connections")
                || facts.unit_enabled("NetworkManager.service")
            {
                "networkmanager"
            } else {
                "networkd"
            }
        }
    }
}

fn plan_mtu(cx: &Ctx, plan: &mut Plan) -> Result<(), PlanError> {
    const ID: &str = "nic.mtu";
    let want = cx.lp.profile.nic.mtu;
    let ifaces = match data_interfaces(cx) {
        Ok(i) => i,
        Err(e) => {
            plan.note(ID, NoteLevel::Skip, e);
            return Ok(());
        }
    };
    if ifaces.is_empty() {
        plan.note(ID, NoteLevel::Skip, "no data-path interface (no ConnectX netdev in this namespace, and the profile names none)");
        return Ok(());
    }
    for (n, _, _) in &ifaces {
        daqtune_units::validate::interface_name(n)?;
    }
    if cx.opts.runtime {
        for (n, _, _) in &ifaces {
            let path = format!("/sys/class/net/{n}/mtu");
            // A ConnectX port's MTU is in the PCI facts (what nic.mtu judges); another
            // interface the profile names is read.
            let known = cx.facts.pci().ok().and_then(|f| {
                f.nics
                    .iter()
                    .flat_map(|x| x.netdevs.iter())
                    .find(|d| &d.name == n)
                    .and_then(|d| d.mtu)
            });
            let raw = match known {
                Some(m) => format!("{m}\n"),
                None => match cx.facts.read_string(&path) {
                    Ok(r) => r,
                    Err(_) => {
                        plan.note(ID, NoteLevel::Skip, format!("{n}: not present"));
                        continue;
                    }
                },
            };
            let Ok(cur) = raw.trim().parse::<u32>() else {
                plan.note(
                    ID,
                    NoteLevel::Skip,
                    format!("{n}: MTU `{}` unreadable", raw.trim()),
                );
                continue;
            };
            if cur >= want {
                continue;
            }
            let max = cx
                .facts
                .read_parsed::<u32>(&format!("/sys/class/net/{n}/max_mtu"));
            if max.is_some_and(|m| m < want) {
                plan.note(
                    ID,
                    NoteLevel::Skip,
                    format!("{n}: the device allows at most {} bytes", max.unwrap_or(0)),
                );
                continue;
            }
            let action = match cx.target {
                Target::Live => Action::Mtu {
                    ifname: n.clone(),
                    from: cur,
                    to: want,
                },
                Target::Root => Action::Attr {
                    path,
                    from: raw,
                    to: want.to_string(),
                },
            };
            plan.changes.push(Change {
                check: ID.into(),
                subject: n.clone(),
                action,
                reboot: false,
                note: None,
            });
        }
    }
    if cx.opts.persist {
        let pref = profile_ref(cx);
        match network_style(cx.facts, cx.lp) {
            "netplan" => {
                let ports: Vec<(&str, u32)> =
                    ifaces.iter().map(|(n, _, _)| (n.as_str(), want)).collect();
                let a = network::netplan(&ports, &pref)?;
                cx.file_change(plan, ID, "netplan", &a.path, a.text, a.mode, false);
            }
            "networkmanager" => {
                let others = nm_profiles(cx.facts);
                for (n, _, _) in &ifaces {
                    let a =
                        network::nm_keyfile(&cx.lp.profile.persist.nm_prefix, n, want, &[], &pref)?;
                    // A profile someone else made for this port (the seed's daqiri-tx) is not
                    // ours to rewrite, and a second one would fight it over the port.
                    let theirs: Vec<&NmProfile> = others
                        .iter()
                        .filter(|p| p.interface.as_deref() == Some(n.as_str()) && p.file != a.path)
                        .collect();
                    if let Some(p) = theirs.first() {
                        match p.mtu {
                            Some(m) if m >= want => {}
                            _ => plan.note(
                                ID,
                                NoteLevel::Warn,
                                format!(
                                    "{n} is managed by NetworkManager profile `{}` ({}), which daqtune does not rewrite: run `nmcli connection modify {} ethernet.mtu {want}`",
                                    p.id, p.file, p.id
                                ),
                            ),
                        }
                        continue;
                    }
                    cx.file_change(plan, ID, n, &a.path, a.text, a.mode, false);
                }
            }
            _ => {
                for (n, mac, bdf) in &ifaces {
                    let m = match (
                        mac.as_deref()
                            .and_then(|m| daqtune_units::validate::mac_address(m).ok()),
                        bdf,
                    ) {
                        (Some(m), _) => network::LinkMatch::Mac(m),
                        (None, Some(b)) => network::LinkMatch::PciPath(b.parse()?),
                        (None, None) => {
                            plan.note(ID, NoteLevel::Skip, format!("{n}: neither a MAC address nor a PCI path to match in a .link file"));
                            continue;
                        }
                    };
                    let a = network::networkd_link(n, &m, want, &pref)?;
                    cx.file_change(plan, ID, n, &a.path, a.text, a.mode, false);
                }
            }
        }
    }
    Ok(())
}

/// A NetworkManager keyfile connection, as far as MTU planning needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NmProfile {
    pub file: String,
    pub id: String,
    pub interface: Option<String>,
    pub mtu: Option<u32>,
}

/// Parse a keyfile's `[connection] id=, interface-name=` and `[ethernet] mtu=`.
pub fn parse_nm_keyfile(file: &str, text: &str) -> NmProfile {
    let mut section = String::new();
    let mut p = NmProfile {
        file: file.into(),
        id: file
            .rsplit('/')
            .next()
            .unwrap_or(file)
            .trim_end_matches(".nmconnection")
            .into(),
        interface: None,
        mtu: None,
    };
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('#') || l.is_empty() {
            continue;
        }
        if let Some(sec) = l.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            section = sec.trim().to_string();
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        match (section.as_str(), k.trim()) {
            ("connection", "id") => p.id = v.trim().to_string(),
            ("connection", "interface-name") => p.interface = Some(v.trim().to_string()),
            ("ethernet", "mtu") | ("802-3-ethernet", "mtu") => p.mtu = v.trim().parse().ok(),
            _ => {}
        }
    }
    p
}

fn nm_profiles(facts: &Facts) -> Vec<NmProfile> {
    let dir = "/etc/NetworkManager/system-connections";
    facts
        .read_dir(dir)
        .unwrap_or_default()
        .iter()
        .filter(|n| n.ends_with(".nmconnection"))
        .filter_map(|n| {
            let f = format!("{dir}/{n}");
            facts.read_string(&f).ok().map(|t| parse_nm_keyfile(&f, &t))
        })
        .collect()
}

fn plan_gpu_clocks(
    cx: &Ctx,
    plan: &mut Plan,
    gpu: Option<&dyn super::gpu::GpuSetters>,
) -> Result<(), PlanError> {
    use super::gpu::{GpuDomain, GpuSetters, NvmlSetters};
    const ID: &str = "gpu.clocks";
    let g = &cx.lp.profile.gpu;
    if !(g.lock_sm_clock || g.lock_memory_clock || g.persistence) {
        return Ok(());
    }
    let tol = g.clock_tolerance_mhz;
    // A host root stands in for NVML with its recorded facts (daqtune/gpu.json): the locks
    // are made on a mock of those facts and the file is rewritten, so the next check reads
    // them; revert restores the file.
    // Explicit GPU control (the live NVML, or a test's mock) wins over recorded facts.
    let recorded = if cx.target == Target::Root && gpu.is_none() {
        let Ok(text) = cx.facts.read_string(GPU_JSON) else {
            if !cx.opts.only.is_empty() {
                plan.note(
                    ID,
                    NoteLevel::Skip,
                    format!("this root has no recorded GPU facts ({GPU_JSON})"),
                );
            }
            return Ok(());
        };
        match daqtune_probe::gpu::GpuSnapshot::from_json(&text) {
            Ok(snap) => Some(snap),
            Err(e) => {
                plan.note(ID, NoteLevel::Skip, format!("{GPU_JSON}: {e}"));
                return Ok(());
            }
        }
    } else {
        None
    };
    let mock_setters = recorded.as_ref().map(|snap| {
        NvmlSetters::new(
            daqtune_probe::gpu::control::MockNvml::new(snap.gpus.clone()),
            tol,
            &snap.gpus,
        )
    });
    let setters: &dyn GpuSetters = match (&mock_setters, gpu) {
        (Some(m), _) => m,
        (None, Some(s)) => s,
        (None, None) => {
            if !cx.opts.only.is_empty() || cx.opts.gpu_unavailable.is_some() {
                let why = cx
                    .opts
                    .gpu_unavailable
                    .clone()
                    .unwrap_or_else(|| "no GPU control in this run".into());
                plan.note(ID, NoteLevel::Skip, why);
            }
            return Ok(());
        }
    };
    let gpus = match setters.gpus() {
        Ok(g) => g,
        Err(e) => {
            plan.note(ID, NoteLevel::Skip, e);
            return Ok(());
        }
    };
    if gpus.is_empty() {
        if !cx.opts.only.is_empty() {
            plan.note(ID, NoteLevel::Skip, "no NVIDIA GPU");
        }
        return Ok(());
    }
    if cx.opts.runtime {
        let mut ops: Vec<(String, Action, Option<String>)> = Vec::new();
        for s in &gpus {
            let subject = format!("{} {}", s.name, s.uuid);
            if g.persistence && s.persistence != Some(true) {
                ops.push((
                    subject.clone(),
                    Action::GpuPersistence {
                        uuid: s.uuid.clone(),
                    },
                    None,
                ));
            }
            let mut lock = |d: GpuDomain, held: Option<bool>| {
                let mut note = held.is_none().then(|| {
                    format!(
                        "whether the {} clock is already held cannot be told; locking it",
                        d.as_str()
                    )
                });
                if let Some(snap) = &recorded {
                    if let Some((lo, hi)) = snap
                        .gpus
                        .iter()
                        .find(|f| f.uuid == s.uuid)
                        .and_then(|f| super::gpu::foreign(f, d, tol))
                    {
                        note = Some(format!("someone else's lock ({lo}-{hi} MHz) is in place and will be overridden; revert cannot restore it"));
                    }
                }
                ops.push((
                    subject.clone(),
                    Action::GpuLock {
                        uuid: s.uuid.clone(),
                        domain: d,
                    },
                    note,
                ));
            };
            if g.lock_sm_clock && s.sm_held != Some(true) {
                lock(GpuDomain::Sm, s.sm_held);
            }
            if g.lock_memory_clock && s.has_memory_domain && s.memory_held != Some(true) {
                lock(GpuDomain::Memory, s.memory_held);
            }
        }
        match (&recorded, &mock_setters) {
            (Some(snap), Some(m)) => {
                if !ops.is_empty() {
                    for (subject, op, _) in &ops {
                        let r = match op {
                            Action::GpuLock { uuid, domain } => {
                                m.lock_max(uuid, *domain).map(|_| ())
                            }
                            Action::GpuPersistence { uuid } => {
                                m.set_persistence(uuid, true).map(|_| ())
                            }
                            _ => Ok(()),
                        };
                        if let Err(e) = r {
                            plan.note(ID, NoteLevel::Warn, format!("{subject}: {e}"));
                        }
                    }
                    let mut after = snap.clone();
                    for f in after.gpus.iter_mut() {
                        if let Ok(n) =
                            daqtune_probe::gpu::control::NvmlControl::facts(&m.ctl.nvml, &f.uuid)
                        {
                            *f = n;
                        }
                    }
                    let mut text = after.to_json();
                    text.push('\n');
                    let subjects: Vec<String> = ops
                        .iter()
                        .map(|(_, a, _)| match a {
                            Action::GpuLock { uuid, domain } => {
                                format!("{} lock on {uuid}", domain.as_str())
                            }
                            Action::GpuPersistence { uuid } => format!("persistence on {uuid}"),
                            _ => String::new(),
                        })
                        .collect();
                    let from = cx.read(GPU_JSON);
                    plan.changes.push(Change {
                        check: ID.into(),
                        subject: "recorded NVML".into(),
                        action: Action::File {
                            path: GPU_JSON.into(),
                            from,
                            to: text.into_bytes(),
                            mode: 0o644,
                        },
                        reboot: false,
                        note: Some(subjects.join(", ")),
                    });
                }
            }
            _ => {
                for (subject, action, note) in ops {
                    plan.changes.push(Change {
                        check: ID.into(),
                        subject,
                        action,
                        reboot: false,
                        note,
                    });
                }
            }
        }
    }
    if cx.opts.persist {
        let u = systemd::gpu_clocks_unit(&cx.opts.exe, &profile_ref(cx));
        let text = u.render()?;
        cx.file_change(
            plan,
            ID,
            &u.name,
            &format!("/etc/systemd/system/{}", u.name),
            text,
            0o644,
            false,
        );
        cx.enable(plan, ID, &u.name, "multi-user.target");
    }
    Ok(())
}

/// Where a host root keeps its recorded GPU facts (the root's stand-in for NVML state).
pub const GPU_JSON: &str = "/daqtune/gpu.json";

/// A port between a GPU and a ConnectX PF with an ACS capability.
#[derive(Debug, Clone)]
pub struct AcsPort {
    pub bdf: String,
    pub offset: usize,
    pub cap: u16,
    pub ctrl: u16,
    /// The GPU and NIC whose path crosses it.
    pub ends: (String, String),
    /// Why the redirect may not be cleared for them (a translating IOMMU), if so.
    pub iommu_blocks: Option<String>,
}

/// Ports on every GPU <-> ConnectX path whose ACS capability offers a P2P redirect control
/// (whether it is set now or not: the persistent kernel argument must not depend on whether
/// the runtime change was already made).
pub fn acs_ports(facts: &Facts) -> Result<Vec<AcsPort>, String> {
    use daqtune_probe::pci::config::ACS_P2P_REDIRECT_MASK;
    let pci = facts.pci().map_err(str::to_string)?;
    let tree = &pci.tree;
    let nics: Vec<_> = pci.nics.iter().filter(|n| n.connectx && !n.is_vf).collect();
    // Identity (passthrough) or no IOMMU group (IOMMU off) leaves DMA untranslated.
    let translating = |a: daqtune_probe::pci::PciAddr| -> Option<String> {
        let d = tree.get(a)?;
        match d.iommu_type.as_deref() {
            None | Some("identity") => None,
            Some(t) => Some(format!(
                "{a} is behind a translating IOMMU (group type {t})"
            )),
        }
    };
    let mut out: Vec<AcsPort> = Vec::new();
    for gpu in tree.gpus() {
        for nic in &nics {
            let path = daqtune_probe::pci::topo::classify(tree, gpu.addr, nic.addr);
            let blocks = translating(gpu.addr).or_else(|| translating(nic.addr));
            for p in path.ports() {
                let Some(acs) = tree
                    .get(p)
                    .and_then(|d| d.config.as_ref())
                    .and_then(|c| c.acs)
                else {
                    continue;
                };
                if acs.cap & ACS_P2P_REDIRECT_MASK == 0
                    || out.iter().any(|o| o.bdf == p.to_string())
                {
                    continue;
                }
                out.push(AcsPort {
                    bdf: p.to_string(),
                    offset: acs.offset,
                    cap: acs.cap,
                    ctrl: acs.ctrl,
                    ends: (gpu.addr.to_string(), nic.addr.to_string()),
                    iommu_blocks: blocks.clone(),
                });
            }
        }
    }
    out.sort_by(|a, b| a.bdf.cmp(&b.bdf));
    Ok(out)
}

fn plan_acs(cx: &Ctx, plan: &mut Plan) -> Result<(), PlanError> {
    use daqtune_probe::pci::config::ACS_P2P_REDIRECT_MASK;
    const ID: &str = "pcie.acs";
    let ports = match acs_ports(cx.facts) {
        Ok(p) => p,
        Err(e) => {
            plan.note(ID, NoteLevel::Skip, e);
            return Ok(());
        }
    };
    let set: Vec<&AcsPort> = ports
        .iter()
        .filter(|p| p.ctrl & ACS_P2P_REDIRECT_MASK != 0)
        .collect();
    if !cx.opts.allow_acs {
        if !set.is_empty() {
            let list: Vec<&str> = set.iter().map(|p| p.bdf.as_str()).collect();
            plan.note(ID, NoteLevel::Warn, format!(
                "ACS redirect is set on {} (GPU <-> NIC peer traffic goes up to the root complex); `--allow-acs` clears it, only where the IOMMU is off or in passthrough for those devices",
                list.join(", ")
            ));
        }
        return Ok(());
    }
    if let Some(b) = ports.iter().find_map(|p| p.iommu_blocks.clone()) {
        plan.note(ID, NoteLevel::Skip, format!("{b}: clearing ACS redirect would let peer DMA bypass the IOMMU's translation; set `iommu=pt` (x86) or `iommu.passthrough=1` (arm64) first"));
        return Ok(());
    }
    if cx.opts.runtime {
        for p in &set {
            let path = format!("/sys/bus/pci/devices/{}/config", p.bdf);
            let off = p.offset + 6;
            // ACSCtl as this run's PCI facts decoded it (only a visible ACS capability makes
            // a port); apply reads the register again under its lock and refuses if it moved.
            let cur = p.ctrl;
            if cur == 0xffff {
                plan.note(
                    ID,
                    NoteLevel::Skip,
                    format!(
                        "{}: ACSCtl reads 0xffff (device gone); refusing to write",
                        p.bdf
                    ),
                );
                continue;
            }
            let to = cur & !ACS_P2P_REDIRECT_MASK;
            if to != cur {
                plan.changes.push(Change {
                    check: ID.into(),
                    subject: p.bdf.clone(),
                    action: Action::ConfigWord {
                        bdf: p.bdf.clone(),
                        register: "ACSCtl".into(),
                        path,
                        offset: off as u64,
                        from: cur,
                        to,
                        mask: ACS_P2P_REDIRECT_MASK,
                    },
                    reboot: false,
                    note: Some(format!(
                        "ReqRedir/CmpltRedir/EgressCtrl off on the path {} <-> {}",
                        p.ends.0, p.ends.1
                    )),
                });
            }
        }
    }
    // Persistent: the kernel argument (kernel.cmdline carries it) where the kernel has it
    // (5.1+) and daqtune writes the boot configuration; else a unit that runs this at boot.
    let by_cmdline = cmdline_carries(cx, (5, 1));
    if cx.opts.persist && !ports.is_empty() && !by_cmdline {
        let u = systemd::acs_unit(&cx.opts.exe, &profile_ref(cx));
        let text = u.render()?;
        cx.file_change(
            plan,
            ID,
            &u.name,
            &format!("/etc/systemd/system/{}", u.name),
            text,
            0o644,
            false,
        );
        cx.enable(plan, ID, &u.name, "multi-user.target");
    }
    Ok(())
}

fn plan_peermem(cx: &Ctx, plan: &mut Plan) -> Result<(), PlanError> {
    const ID: &str = "gpu.peermem";
    if !cx
        .lp
        .profile
        .gpu
        .gpudirect_paths
        .iter()
        .any(|p| p == "peermem")
    {
        return Ok(());
    }
    let has_gpu = cx
        .facts
        .pci()
        .map(|f| f.tree.gpus().next().is_some())
        .unwrap_or(false);
    if !has_gpu {
        plan.note(ID, NoteLevel::Skip, "no discrete NVIDIA GPU on the PCI bus");
        return Ok(());
    }
    // An integrated GPU (GB10) sits on the PCI bus too, but nvidia_peermem cannot load for it
    // (EINVAL: no separate BAR1; seed 000, DGX Spark tab).
    if let Ok(snap) = cx.facts.gpus() {
        if !snap.gpus.is_empty() && snap.gpus.iter().all(|g| g.integrated() == Some(true)) {
            plan.note(ID, NoteLevel::Skip, "the GPU is integrated (e.g. GB10): nvidia_peermem cannot load for it; DAQIRI uses host_pinned buffers there");
            return Ok(());
        }
    }
    let module = "nvidia_peermem";
    if cx.opts.runtime && !cx.facts.module_present(module) {
        match cx.target {
            Target::Live => plan.changes.push(Change {
                check: ID.into(),
                subject: module.into(),
                action: Action::Module {
                    name: module.into(),
                },
                reboot: false,
                note: None,
            }),
            Target::Root => {
                // The root stands in for the kernel: a loaded module is a /proc/modules line.
                let from = cx.read("/proc/modules");
                let mut to = from.clone().unwrap_or_default();
                if !to.is_empty() && !to.ends_with(b"\n") {
                    to.push(b'\n');
                }
                to.extend_from_slice(
                    format!("{module} 16384 0 - Live 0x0000000000000000\n").as_bytes(),
                );
                plan.changes.push(Change {
                    check: ID.into(),
                    subject: module.into(),
                    action: Action::File {
                        path: "/proc/modules".into(),
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
    if cx.opts.persist {
        let text = etc::modules_load(&["nvidia-peermem"], &profile_ref(cx))?;
        cx.file_change(
            plan,
            ID,
            "modules-load.d",
            etc::MODULES_LOAD_PATH,
            text,
            0o644,
            false,
        );
    }
    Ok(())
}

fn plan_sysctl(cx: &Ctx, plan: &mut Plan) -> Result<(), PlanError> {
    const ID: &str = "net.sysctl";
    let s = &cx.lp.profile.sysctl;
    if !s.enabled {
        return Ok(());
    }
    let mut persist = Vec::new();
    for (k, v) in &s.values {
        daqtune_units::validate::sysctl_name(k)?;
        daqtune_units::validate::sysctl_value(v)?;
        persist.push((k.as_str(), v.as_str()));
        if !cx.opts.runtime {
            continue;
        }
        let path = format!("/proc/sys/{}", k.replace('.', "/"));
        let Ok(raw) = cx.facts.read_string(&path) else {
            plan.note(ID, NoteLevel::Skip, format!("{k}: not present"));
            continue;
        };
        let cur: Vec<u64> = raw
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        let wantv: Vec<u64> = v
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        let below = cur.len() != wantv.len() || cur.iter().zip(&wantv).any(|(c, w)| c < w);
        if below {
            plan.changes.push(Change {
                check: ID.into(),
                subject: k.clone(),
                action: Action::Attr {
                    path,
                    from: raw,
                    to: v.clone(),
                },
                reboot: false,
                note: None,
            });
        }
    }
    if cx.opts.persist && !persist.is_empty() {
        let text = etc::sysctl_conf(&persist, &profile_ref(cx))?;
        cx.file_change(plan, ID, "sysctl.d", etc::SYSCTL_PATH, text, 0o644, false);
    }
    Ok(())
}

/// A line diff for the plan (context 3). Small files only: O(n·m).
pub fn diff(from: &str, to: &str) -> String {
    let a: Vec<&str> = from.lines().collect();
    let b: Vec<&str> = to.lines().collect();
    if a.len() * b.len() > 4_000_000 {
        return format!("  ({} lines -> {} lines)\n", a.len(), b.len());
    }
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] > lcs[i + 1][j]) {
            ops.push(('+', b[j]));
            j += 1;
        } else {
            ops.push(('-', a[i]));
            i += 1;
        }
    }
    let near = |k: usize| {
        ops[k.saturating_sub(3)..(k + 4).min(ops.len())]
            .iter()
            .any(|o| o.0 != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (k, (op, line)) in ops.iter().enumerate() {
        if *op == ' ' && !near(k) {
            skipped = true;
            continue;
        }
        if skipped {
            out.push_str("  ...\n");
            skipped = false;
        }
        out.push_str(&format!("  {op}{line}\n"));
    }
    out
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let where_ = match self.target {
            Target::Live => "this host".to_string(),
            Target::Root => "the host root".to_string(),
        };
        writeln!(f, "Plan for profile {} on {where_}:", self.profile)?;
        let runtime: Vec<&Change> = self
            .changes
            .iter()
            .filter(|c| !c.action.is_persistent())
            .collect();
        let files: Vec<&Change> = self
            .changes
            .iter()
            .filter(|c| c.action.is_persistent())
            .collect();
        if self.changes.is_empty() {
            writeln!(f, "  nothing to change")?;
        }
        if !runtime.is_empty() {
            writeln!(f, "runtime:")?;
            // Fold identical writes across CPUs (a 256-CPU host prints one governor line).
            let mut i = 0;
            while i < runtime.len() {
                let c = runtime[i];
                let mut j = i + 1;
                if let Action::Attr { from, to, .. } = &c.action {
                    while j < runtime.len()
                        && runtime[j].check == c.check
                        && c.subject.starts_with("cpu")
                        && matches!(&runtime[j].action, Action::Attr { from: f2, to: t2, .. } if f2 == from && t2 == to)
                    {
                        j += 1;
                    }
                }
                let subject = if j - i > 1 {
                    format!(
                        "{} .. {} ({} CPUs)",
                        c.subject,
                        runtime[j - 1].subject,
                        j - i
                    )
                } else {
                    c.subject.clone()
                };
                let what = match &c.action {
                    Action::Attr { path, from, to } => {
                        let cpu = c.subject.split_whitespace().next().unwrap_or("");
                        let p = if j - i > 1 {
                            path.replacen(&format!("/{cpu}/"), "/cpu*/", 1)
                        } else {
                            path.clone()
                        };
                        format!("{p}: {} -> {to}", from.trim())
                    }
                    Action::Mtu { ifname, from, to } => {
                        format!("MTU of {ifname}: {from} -> {to} (SIOCSIFMTU)")
                    }
                    Action::ConfigWord { path, offset, .. } => format!("{path} @0x{offset:x}"),
                    Action::Module { name } => format!("modprobe {name}"),
                    Action::GpuLock { uuid, domain } => format!(
                        "lock the {} clock of {uuid} at its maximum (NVML)",
                        domain.as_str()
                    ),
                    Action::GpuPersistence { uuid } => {
                        format!("persistence mode on for {uuid} (NVML)")
                    }
                    Action::File { path, .. } => format!("{path} (kernel state file)"),
                    Action::Symlink { path, target } => format!("{path} -> {target}"),
                };
                writeln!(f, "  {:<13} {:<24} {what}", c.check, subject)?;
                if let Some(n) = &c.note {
                    writeln!(f, "  {:<13} {:<24} ({n})", "", "")?;
                }
                i = j;
            }
        }
        if !files.is_empty() {
            writeln!(f, "files:")?;
            for c in files {
                match &c.action {
                    Action::File {
                        path,
                        from,
                        to,
                        mode,
                    } => {
                        let state = if from.is_some() { "changed" } else { "new" };
                        writeln!(
                            f,
                            "  {:<13} {path} ({state}, mode {mode:o}){}",
                            c.check,
                            if c.reboot {
                                ", takes effect after a reboot"
                            } else {
                                ""
                            }
                        )?;
                        let from_s = from
                            .as_deref()
                            .map(String::from_utf8_lossy)
                            .unwrap_or_default();
                        write!(f, "{}", diff(&from_s, &String::from_utf8_lossy(to)))?;
                        if let Some(n) = &c.note {
                            writeln!(f, "  ({n})")?;
                        }
                    }
                    Action::Symlink { path, target } => {
                        writeln!(f, "  {:<13} {path} -> {target} (enable)", c.check)?
                    }
                    _ => {}
                }
            }
        }
        if !self.notes.is_empty() {
            writeln!(f, "notes:")?;
            for n in &self.notes {
                let lvl = match n.level {
                    NoteLevel::Info => "info",
                    NoteLevel::Warn => "warn",
                    NoteLevel::Skip => "skip",
                    NoteLevel::PendingReboot => "pending-reboot",
                };
                writeln!(f, "  {:<13} {lvl}: {}", n.check, n.message)?;
            }
        }
        let reboot: Vec<&str> = self
            .changes
            .iter()
            .filter(|c| c.reboot)
            .map(|c| c.check.as_str())
            .collect();
        if !reboot.is_empty() {
            writeln!(f, "reboot needed for: {}", reboot.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nm_keyfiles_parse() {
        let p = parse_nm_keyfile(
            "/etc/NetworkManager/system-connections/x.nmconnection",
            "[connection]\nid=daqiri-tx\ntype=ethernet\ninterface-name=enp1s0f0np0\n\n[ethernet]\nmtu=9000\n",
        );
        assert_eq!(
            (p.id.as_str(), p.interface.as_deref(), p.mtu),
            ("daqiri-tx", Some("enp1s0f0np0"), Some(9000))
        );
        let q = parse_nm_keyfile("/x/y.nmconnection", "garbage\n[ethernet]\nmtu=(null)\n");
        assert_eq!((q.id.as_str(), q.interface, q.mtu), ("y", None, None));
    }

    #[test]
    fn diff_shows_changes_with_context() {
        let d = diff("a\nb\nc\nd\ne\nf\ng\nh\ni\n", "a\nb\nc\nd\nE\nf\ng\nh\ni\n");
        assert!(d.contains("  -e\n  +E\n"), "{d}");
        assert!(d.contains("  ...\n"), "{d}");
        assert_eq!(diff("", "x\n"), "  +x\n");
    }

    #[test]
    fn unknown_only_id_is_an_error() {
        let d = tempfile::tempdir().expect("tmp");
        let host = Host::at(d.path()).expect("host");
        let lp = crate::profile::load("igx-orin").expect("profile");
        let opts = PlanOptions {
            only: vec!["nope".into()],
            ..Default::default()
        };
        assert!(matches!(
            build_plan(&host, &lp, &opts),
            Err(PlanError::UnknownId(_))
        ));
    }

    #[test]
    fn empty_root_plans_without_panicking() {
        let d = tempfile::tempdir().expect("tmp");
        let host = Host::at(d.path()).expect("host");
        for name in crate::profile::builtin_names() {
            let lp = crate::profile::load(name).expect("profile");
            let plan = build_plan(&host, &lp, &PlanOptions::default()).expect("plan");
            // Nothing readable: only persistent files that need no host facts.
            assert!(
                plan.changes.iter().all(|c| c.action.is_persistent()),
                "{plan}"
            );
            let text = plan.to_string();
            assert!(text.contains("skip"), "{text}");
        }
    }
}

#[cfg(test)]
mod device_tests {
    use super::*;
    use crate::apply::testroot::*;

    /// The IGX fixture without its PCI tree: these tests build their own functions.
    fn igx_root() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tmp");
        copy_tree(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/igx-untuned"),
            d.path(),
        );
        let _ = std::fs::remove_dir_all(d.path().join("sys/bus"));
        let _ = std::fs::remove_dir_all(d.path().join("sys/class/net"));
        for e in std::fs::read_dir(d.path().join("sys/devices"))
            .expect("sys/devices")
            .flatten()
        {
            if e.file_name().to_string_lossy().starts_with("pci") {
                std::fs::remove_dir_all(e.path()).expect("rm pci");
            }
        }
        d
    }

    fn mrrs_plan(root: &std::path::Path) -> Plan {
        let host = Host::at(root).expect("host");
        let lp = crate::profile::load("igx-orin").expect("profile");
        let opts = PlanOptions {
            only: vec!["pcie.mrrs".into()],
            persist: false,
            ..Default::default()
        };
        build_plan(&host, &lp, &opts).expect("plan")
    }

    #[test]
    fn mrrs_refusals() {
        let d = igx_root();
        let chain = ["0005:00:00.0"];
        // A PF whose DevCtl reads 0xffff (gone or in reset).
        let mut gone = connectx(&chain, "0005:01:00.0", None);
        gone.config = config_space(0x15b3, 0x1021, 0x020000, Some(0x70), 0xffff, 4096);
        add_function(d.path(), &gone);
        // A PF without a PCI Express capability.
        let mut nocap = connectx(&chain, "0005:02:00.0", None);
        nocap.config = config_space(0x15b3, 0x1021, 0x020000, None, 0, 4096);
        add_function(d.path(), &nocap);
        // Only 64 bytes visible (not root).
        let mut short = connectx(&chain, "0005:03:00.0", None);
        short.config = config_space(0x15b3, 0x1021, 0x020000, Some(0x70), DEVCTL_UNTUNED, 64);
        add_function(d.path(), &short);
        // A good PF with a VF: only the PF is changed.
        add_function(d.path(), &connectx(&chain, "0005:04:00.0", None));
        let mut vf = connectx(&chain, "0005:04:00.2", None);
        vf.device = 0x101e;
        vf.physfn = Some("0005:04:00.0");
        add_function(d.path(), &vf);
        let plan = mrrs_plan(d.path());
        let subjects: Vec<&str> = plan.changes.iter().map(|c| c.subject.as_str()).collect();
        assert_eq!(subjects, ["0005:04:00.0"], "{plan}");
        match &plan.changes[0].action {
            Action::ConfigWord {
                offset, from, to, ..
            } => {
                assert_eq!(*offset, 0x78);
                assert_eq!(*from, DEVCTL_UNTUNED);
                assert_eq!(*to, (DEVCTL_UNTUNED & !0x7000) | 0x5000);
            }
            a => panic!("{a:?}"),
        }
        let notes = plan.to_string();
        assert!(
            notes.contains("0005:01:00.0: DevCtl reads 0xffff"),
            "{notes}"
        );
        assert!(
            notes.contains("0005:02:00.0: no PCI Express capability; refusing to write"),
            "{notes}"
        );
        assert!(
            notes.contains("0005:03:00.0: only 64 bytes of config space"),
            "{notes}"
        );
    }

    #[test]
    fn mrrs_lockdown_is_named() {
        let d = igx_root();
        std::fs::write(
            d.path().join("sys/kernel/security/lockdown"),
            "none [integrity] confidentiality\n",
        )
        .expect("w");
        add_igx_pci(d.path());
        let plan = mrrs_plan(d.path());
        assert_eq!(plan.changes.len(), 2);
        let t = plan.to_string();
        assert!(
            t.contains("kernel lockdown is `integrity`") && t.contains("Secure Boot"),
            "{t}"
        );
    }

    #[test]
    fn hugepages_capped_by_free_memory_and_never_shrunk() {
        let d = igx_root();
        let hp = d.path().join("sys/kernel/mm/hugepages/hugepages-1048576kB");
        // 2.5 GiB available of 8 GiB: after keeping 1 GiB back, one 1G page fits.
        std::fs::write(d.path().join("proc/meminfo"), "MemTotal: 8388608 kB\nMemFree: 2621440 kB\nMemAvailable: 2621440 kB\nHugepagesize: 2048 kB\n").expect("w");
        std::fs::write(hp.join("nr_hugepages"), "1\n").expect("w");
        std::fs::write(hp.join("free_hugepages"), "0\n").expect("w");
        let host = Host::at(d.path()).expect("host");
        let lp = crate::profile::load("igx-orin").expect("profile");
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
            "{plan}"
        );
        assert!(
            c.note
                .as_deref()
                .is_some_and(|n| n.contains("capped at 2 of 4")),
            "{plan}"
        );
        // A pool already larger than asked is left alone (pages in use are never released).
        std::fs::write(hp.join("nr_hugepages"), "6\n").expect("w");
        let plan = build_plan(&host, &lp, &opts).expect("plan");
        assert!(
            !plan.changes.iter().any(|c| c.check == "hugepages"),
            "{plan}"
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
        let lp = crate::profile::load_source("t.yaml", &profile).expect("profile");
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
            Action::Attr { path, to, .. } => {
                assert_eq!(
                    path,
                    "/sys/devices/system/node/node1/hugepages/hugepages-1048576kB/nr_hugepages"
                );
                assert_eq!(to, "4");
            }
            a => panic!("{a:?}"),
        }
        assert_eq!(c.subject, "1G pool on node1");
    }
}
