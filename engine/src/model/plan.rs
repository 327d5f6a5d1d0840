//! A plan: the runtime writes and file changes that bring a host to its profile. A plan is
//! data; printing it is a dry run, and `apply` executes exactly what it holds.
//!
//! Each tunable plans its own setting (`Tunable::planner`) from the same judgement as its
//! check, so a host that already matches gets an empty plan (a second `apply` changes
//! nothing). This module holds what plans are made of and what every planner shares.

use crate::hostio::gpu::GpuSetters;
use crate::hostio::setters::Target;
use crate::model::context::boot::{boot_config, data_core_list, BootConfig};
use crate::model::context::Context;
use crate::model::facts::Facts;
use crate::model::profile::LoadedProfile;
use daqtune_units::grub::KernelArgs;
use std::fmt;

/// One change to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write a kernel attribute (sysfs/procfs). `from` is the exact content read.
    Attr {
        path: String,
        from: String,
        to: String,
        /// The attribute is a count of a pool others draw on too (hugepages): revert gives
        /// back the units this run added instead of writing `from` back, in case someone
        /// reserved more since.
        shared_count: bool,
    },
    /// A kind of change only one tunable makes (an MTU through SIOCSIFMTU, an ethtool group,
    /// a module load, a mount, a GPU clock lock or persistence mode): the tunable's module
    /// defines it ([`ActionKind`]), so a new kind touches no shared file.
    Owned(Box<dyn OwnedAction>),
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
        /// The setting the `mask` bits encode, for the executor's messages (set by the
        /// tunable's planner; `None`: the register is named as it is).
        field: Option<RegField>,
    },
    /// Write a whole file. `from`: its current bytes, `None` when absent.
    File {
        path: String,
        from: Option<Vec<u8>>,
        to: Vec<u8>,
        mode: u32,
    },
    /// Create a symlink (enable a unit).
    Symlink { path: String, target: String },
}

/// Why a tunable's setter hook (the executor's MTU, module, mount and GPU actions) did not
/// change the host.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    /// The journal could not record the change, so it was not made.
    #[error("journal: {0} (nothing changed)")]
    Journal(std::io::Error),
    #[error("no GPU control available")]
    NoGpu,
    /// The GPU control (NVML) refused or did not take the change.
    #[error("{0}")]
    Gpu(#[from] crate::hostio::gpu::GpuError),
    /// An ethtool group was refused or did not read back as set.
    #[error(transparent)]
    Ethtool(#[from] crate::hostio::setters::EthtoolError),
    /// The host refused or did not take the change (the message names what and why).
    #[error("{0}")]
    Host(String),
}

impl From<String> for SetError {
    fn from(s: String) -> Self {
        SetError::Host(s)
    }
}

/// What an owned action's setter gets from the executor: the host, the run's journal and
/// writer (journal first, then the change, then its read-back), the lockdown mode that words a
/// refused write, and GPU control where there is one.
pub struct SetCx<'a> {
    pub host: &'a daqtune_probe::Host,
    pub journal: &'a mut crate::hostio::journal::Journal,
    pub writer: &'a mut dyn crate::hostio::setters::Writer,
    pub lockdown: Option<&'a str>,
    pub gpu: Option<&'a dyn GpuSetters>,
}

/// A kind of change one tunable owns: how it is carried out, shown and written into the plan
/// JSON. The tunable's module defines the type and plans `Action::owned(..)`; the executor,
/// the plan's text and `daqtune.plan/v1` ask the kind itself. What it journals is the
/// tunable's own business, in the journal's existing entry kinds, so revert needs nothing new.
pub trait ActionKind: fmt::Debug + Clone + PartialEq + Send + Sync + 'static {
    /// Carries the change out on a live host: journal first, the change, its read-back.
    fn execute(&self, cx: SetCx<'_>) -> Result<crate::hostio::setters::Done, SetError>;
    /// The `action` object of `daqtune.plan/v1`, its `kind` included.
    fn plan_json(&self) -> serde_json::Value;
    /// What the plan's text shows for the change.
    fn describe(&self) -> String;
    /// The network interface the change re-initialises (a port reset loses IRQ pins).
    fn port(&self) -> Option<&str> {
        None
    }
}

/// [`ActionKind`] as the plan holds it (boxed; cloned and compared through the kind).
pub trait OwnedAction: fmt::Debug + Send + Sync {
    fn execute(&self, cx: SetCx<'_>) -> Result<crate::hostio::setters::Done, SetError>;
    fn plan_json(&self) -> serde_json::Value;
    fn describe(&self) -> String;
    fn port(&self) -> Option<&str>;
    fn clone_box(&self) -> Box<dyn OwnedAction>;
    fn eq_dyn(&self, other: &dyn OwnedAction) -> bool;
    fn as_any(&self) -> &dyn std::any::Any;
}

impl<T: ActionKind> OwnedAction for T {
    fn execute(&self, cx: SetCx<'_>) -> Result<crate::hostio::setters::Done, SetError> {
        ActionKind::execute(self, cx)
    }
    fn plan_json(&self) -> serde_json::Value {
        ActionKind::plan_json(self)
    }
    fn describe(&self) -> String {
        ActionKind::describe(self)
    }
    fn port(&self) -> Option<&str> {
        ActionKind::port(self)
    }
    fn clone_box(&self) -> Box<dyn OwnedAction> {
        Box::new(self.clone())
    }
    fn eq_dyn(&self, other: &dyn OwnedAction) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Clone for Box<dyn OwnedAction> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

impl PartialEq for Box<dyn OwnedAction> {
    fn eq(&self, other: &Self) -> bool {
        self.eq_dyn(other.as_ref())
    }
}

impl Eq for Box<dyn OwnedAction> {}

impl Action {
    /// A change of a kind its tunable owns.
    pub fn owned(kind: impl ActionKind) -> Action {
        Action::Owned(Box::new(kind))
    }

    /// The owned kind `T` this action is, if it is one.
    pub fn owned_as<T: ActionKind>(&self) -> Option<&T> {
        match self {
            Action::Owned(a) => a.as_any().downcast_ref::<T>(),
            _ => None,
        }
    }
}

/// A setting encoded in a register's bits as `base << ((word >> shift) & 7)` (MRRS: 128 bytes
/// << DevCtl bits 14:12): how the executor names what it wrote and read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegField {
    /// `MRRS`.
    pub name: &'static str,
    pub shift: u8,
    pub base: u32,
    /// Said when a write does not take (why a device would ignore it).
    pub ignored: &'static str,
}

impl RegField {
    /// The setting's value in `word`.
    pub fn decode(&self, word: u16) -> u32 {
        self.base << ((word >> self.shift) & 7)
    }
}

impl Action {
    pub fn is_persistent(&self) -> bool {
        match self {
            Action::File { path, .. } => {
                !is_kernel_path(path) && path != daqtune_probe::gpu::FACTS_PATH
            }
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
    /// Artifacts left out because they run the daqtune binary and none is installed
    /// (`PlanOptions::exe` is `None`), as (check, path): `plan` and `apply` refuse such a plan
    /// (see `apply::refuse_without_binary`).
    pub needs_binary: Vec<(String, String)>,
    /// The files of the plan that carry several settings, with how they are made of parts
    /// (`hostio::parts`): the executor journals which settings each write changed.
    pub parted: std::collections::BTreeMap<String, crate::hostio::parts::Format>,
    /// Hugepage pools (their `nr_hugepages` paths) whose whole count the next boot reserves:
    /// the kernel line that this plan writes, or that an earlier run wrote and the host has not
    /// booted yet, carries `hugepagesz=`/`hugepages=` for them. Growing such a pool now needs
    /// free contiguous memory the kernel may not have (1G pages rarely, once memory has
    /// fragmented): a grant short of the plan is then a change waiting for the boot, not a
    /// failed step. Any other short grant fails the step.
    pub boot_reserved: std::collections::BTreeSet<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
    pub fn note(&mut self, check: &str, level: NoteLevel, message: impl Into<String>) {
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
    /// The daqtune binary generated units and rules run: the installed one (or `--exe`),
    /// resolved inside the host root by `apply`; `None` when there is none, and then no unit or
    /// rule that runs it is planned (each is listed in `Plan::needs_binary` instead).
    pub exe: Option<String>,
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
            exe: None,
            profile_ref: String::new(),
            gpu_unavailable: None,
        }
    }
}

impl PlanOptions {
    pub fn wants(&self, id: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == id)
    }
}

/// Errors that stop planning altogether (bad options, not host state).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("unknown id `{id}` for --only{hint} (expected one of: {known})", hint = crate::model::suggest::hint(id, known.split(", ")))]
    UnknownId { id: String, known: String },
    #[error("{0}")]
    Invalid(#[from] daqtune_units::InvalidValue),
    #[error("--device {0}: {1}")]
    Device(String, String),
}

/// What a tunable's plan sees: the run's facts (the same the checks judge), the profile, the
/// options, and GPU control where the run has it.
pub struct PlanCx<'a> {
    pub facts: &'a Facts<'a>,
    pub lp: &'a LoadedProfile,
    pub opts: &'a PlanOptions,
    pub target: Target,
    /// The live NVML setters, or a test's mock (gpu.clocks).
    pub gpu: Option<&'a dyn GpuSetters>,
}

impl<'a> PlanCx<'a> {
    pub fn read(&self, path: &str) -> Option<Vec<u8>> {
        self.facts.read_bytes(path).ok().map(|b| b.to_vec())
    }
    #[allow(clippy::too_many_arguments)]
    /// Write `to` to `path` unless it already holds exactly that.
    pub fn file_change(
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
    /// A file that carries several settings (`hostio::parts`): `wanted` is the whole file as
    /// the profile wants it; the plan writes the parts of the settings this run is asked for
    /// (`--only`) and keeps every other part as the file has it now, so `apply --only X`
    /// changes X's parts only. The change is named after `check` (the planner's own setting)
    /// when that is among those it changes, else after the first setting it changes.
    /// `owners`: the settings the file can carry (in their order).
    #[allow(clippy::too_many_arguments)]
    pub fn parted_file_change(
        &self,
        plan: &mut Plan,
        check: &str,
        format: crate::hostio::parts::Format,
        owners: &[&str],
        subject: &str,
        path: &str,
        wanted: &str,
        mode: u32,
        reboot: bool,
    ) -> bool {
        use crate::hostio::parts;
        let current = self
            .read(path)
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        let mark = format!("# {}", daqtune_units::OWNER_MARK);
        // A file someone else wrote is never taken apart: the write is planned as the profile
        // wants it (restricted to the asked settings) and apply refuses it as foreign.
        let ours = current.as_deref().filter(|c| match format {
            parts::Format::Extlinux => true,
            _ => c.starts_with(&mark),
        });
        let asked: Vec<&str> = owners
            .iter()
            .copied()
            .filter(|o| self.opts.wants(o))
            .collect();
        let Some(to) = parts::merge(format, ours, Some(wanted), &asked) else {
            return false;
        };
        let changed = parts::changed_owners(format, ours, Some(&to));
        let check = changed
            .iter()
            .find(|c| *c == check)
            .or(changed.first())
            .cloned()
            .or_else(|| asked.first().map(|s| s.to_string()))
            .unwrap_or_else(|| owners.first().copied().unwrap_or("").to_string());
        let before = plan.changes.len();
        self.file_change(plan, &check, subject, path, to, mode, reboot);
        if plan.changes.len() > before {
            plan.parted.insert(path.to_string(), format);
            true
        } else {
            false
        }
    }
    /// Enable `unit` for `wanted_by` (its `.wants` symlink) unless it is.
    pub fn enable(&self, plan: &mut Plan, check: &str, unit: &str, wanted_by: &str) {
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
    pub fn kernel_version(&self) -> Option<(u32, u32, u32)> {
        self.facts.kernel_version()
    }

    /// The daqtune binary a unit or rule at `artifact` may run, or `None` (recorded in
    /// `plan.needs_binary`) when none is installed: a unit calling a binary that is not there
    /// fails at every boot, so it is never written.
    pub fn unit_exe(&self, plan: &mut Plan, check: &str, artifact: &str) -> Option<String> {
        match &self.opts.exe {
            Some(e) => Some(e.clone()),
            None => {
                let item = (check.to_string(), artifact.to_string());
                if !plan.needs_binary.contains(&item) {
                    plan.needs_binary.push(item);
                }
                None
            }
        }
    }

    /// How units name the profile (`igx-orin`, or the absolute path of a user file).
    pub fn profile_ref(&self) -> String {
        if self.opts.profile_ref.is_empty() {
            self.lp.profile.name.clone()
        } else {
            self.opts.profile_ref.clone()
        }
    }

    /// Whether this run's kernel-argument drop-in carries a setting that needs kernel `min`:
    /// the kernel has it, daqtune writes this host's boot configuration (not for a profile with
    /// `kernel.cmdline` n/a); the drop-in is planned with the setting and carries its words
    /// (`hostio::parts`). Else a unit must make the setting persistent, or it would be lost at
    /// the next boot.
    pub fn cmdline_carries(&self, min: (u32, u32)) -> bool {
        self.kernel_version().is_some_and(|v| (v.0, v.1) >= min)
            && boot_config(self.facts, self.lp) != BootConfig::Unknown
            && !self
                .lp
                .profile
                .not_applicable
                .contains_key("kernel.cmdline")
    }

    /// The data cores as a CPU list, resolved as the checks resolve them.
    pub fn data_cores(&self) -> Result<Option<String>, crate::model::verdict::Unjudged> {
        Ok(data_core_list(self.facts, self.lp)?)
    }

    /// The checks' context on this plan's facts and profile: a tunable plans from the same
    /// judgement its check makes.
    pub fn context(&self) -> Context<'a> {
        Context::with_facts(self.facts, self.lp)
    }
}

/// A line diff of a file the plan writes (context 3): the plan's text and its JSON show it.
/// Small files only: O(n·m).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_shows_changes_with_context() {
        let d = diff("a\nb\nc\nd\ne\nf\ng\nh\ni\n", "a\nb\nc\nd\nE\nf\ng\nh\ni\n");
        assert!(d.contains("  -e\n  +E\n"), "{d}");
        assert!(d.contains("  ...\n"), "{d}");
        assert_eq!(diff("", "x\n"), "  +x\n");
    }
}
