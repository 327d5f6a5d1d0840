//! What a tunable is: one setting of the host (or one observation of it), owned by one module
//! under `tunables/`, with everything about it in one place: its stable id, tune_system.py
//! aliases and documentation page, the profile keys it reads, its judgement (verdicts) and,
//! when daqtune can change the setting, its plan, the wording of its actions, the persistent
//! artifacts it renders (what `daqtune generate` prints) and the fixed files it owns. The
//! registry (`tunables::REGISTRY`) lists them; `generate`'s kinds, the `--only` help, the
//! legacy aliases and `daqtune.artifacts`' file names are all made from it.
//!
//! Verify is the judgement again: a planning tunable decides what is wrong in one function
//! that its check turns into verdicts and its plan into changes, on the same
//! [`Facts`](crate::model::facts::Facts), so what passes is never planned for, and after `apply` the
//! same judgement on the changed host turns green (`tests/it/tunables_agree.rs` holds every
//! fixture root to that).

use crate::model::context::Context;
use crate::model::facts::Facts;
use crate::model::plan::{Plan, PlanCx, PlanError};
use crate::model::profile::LoadedProfile;
use crate::model::verdict::{Area, Verdict};

pub struct Tunable {
    /// The stable id (`hugepages`, `pcie.mrrs`): reports, `check ID`, `explain ID`,
    /// `apply --only`, and the profile's `required:`, `not_applicable:` and `waivers:`.
    pub id: &'static str,
    pub area: Area,
    pub title: &'static str,
    /// tune_system.py's `--check` names that map here.
    pub aliases: &'static [&'static str],
    /// The page printed by `daqtune explain` (`docs/checks/<id>.md`, embedded).
    pub doc: &'static str,
    /// Whether a non-root run may see less than the check needs (shown in the catalogue; the
    /// check's own skip reason says what root would reveal).
    pub needs_root: bool,
    /// The profile keys (dotted paths) the judgement and the plan read.
    pub profile_keys: &'static [&'static str],
    /// Observe (from the run's facts) and judge: one verdict per subject.
    pub check: fn(&Context) -> Vec<Verdict>,
    /// How daqtune changes the setting; `None` for observations (topology, AER, BAR1, ...).
    pub planner: Option<Planner>,
}

/// The plan of a tunable that daqtune can set.
pub struct Planner {
    /// Planning (and so applying) order: the kernel arguments first, since their drop-in
    /// carries what other tunables persist through the boot loader.
    pub order: u8,
    /// Also planned when one of these ids is selected (`--only hugepages` writes the kernel
    /// arguments too: the boot reservation of hugepages lives there).
    pub with: &'static [&'static str],
    /// The runtime actions and persistent artifacts that bring the setting to the profile,
    /// decided by the same judgement as the check. Pure: the run's facts and the profile in,
    /// data out. Action kinds of its own (MTU, module load, GPU locks) are types in the
    /// tunable's module (`plan::ActionKind`, planned as `Action::owned`); the rest are the
    /// shared writers'.
    pub plan: fn(&PlanCx, &mut Plan) -> Result<(), PlanError>,
    /// What `daqtune generate KIND` prints for this tunable: each artifact its plan writes,
    /// rendered by the same function the plan renders it with.
    pub artifacts: &'static [Artifact],
    /// The fixed host paths of the persistent files this tunable writes under a profile:
    /// `daqtune.artifacts` looks for daqtune's mark there when no journal names them.
    pub owned_files: fn(&LoadedProfile) -> Vec<String>,
    /// How its changes meet a port's re-initialisation (`exec::port_reset`).
    pub port_reset: PortReset,
}

/// A setting's part in a port's re-initialisation. Changing a port's ring sizes, MTU or
/// channel count makes its driver close and reopen it (mlx5, e1000e, ixgbe and most others):
/// the queues and their interrupt vectors are freed and requested again, and a re-requested
/// IRQ starts from the default affinity. So a setting held on those IRQs is lost by a change
/// of another setting, and apply and revert write it again (`exec::port_reset`).
#[derive(Clone, Copy)]
pub enum PortReset {
    /// Neither.
    None,
    /// A change of this setting re-initialises the port it is made on.
    Resets,
    /// This setting's live state is lost when a port resets: the function names, for the ports
    /// reset (interface names), the kernel attributes of theirs that carry it. The planning
    /// order puts it after every setting that resets ports (a test holds the registry to it).
    Follows(fn(&daqtune_probe::Host, &[String]) -> std::collections::BTreeSet<String>),
}

/// No fixed files ([`Planner::owned_files`] of a tunable with runtime changes only).
pub fn no_files(_: &LoadedProfile) -> Vec<String> {
    Vec::new()
}

/// One persistent artifact, as `daqtune generate` prints it for image builders and
/// configuration managers.
pub struct Artifact {
    /// The command-line name (`udev-mrrs`).
    pub kind: &'static str,
    /// Its help line.
    pub help: &'static str,
    pub render: fn(&GenerateCx) -> Result<String, ArtifactError>,
}

/// What an artifact is rendered from in `generate`: the host's facts, the profile and the
/// command line's choices.
pub struct GenerateCx<'a> {
    pub facts: &'a Facts<'a>,
    pub lp: &'a LoadedProfile,
    /// The daqtune binary units and rules run (`--exe`, else the installed one).
    pub exe: Option<&'a str>,
    /// How units name the profile.
    pub profile_ref: &'a str,
    /// `--interface`: ports for network artifacts (empty: the tunable's default).
    pub interfaces: &'a [String],
    /// `--device`: PCI functions for device artifacts (empty: the tunable's default).
    pub devices: &'a [String],
}

impl GenerateCx<'_> {
    /// The binary a unit or rule runs: never printed with one that is not there.
    pub fn exe(&self) -> Result<&str, ArtifactError> {
        self.exe.ok_or(ArtifactError::NoBinary)
    }
}

/// Why an artifact cannot be printed.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("no installed daqtune binary (looked for {}): this artifact would run it; {}", daqtune_units::INSTALLED_EXE.join(", "), daqtune_units::INSTALL_ADVICE)]
    NoBinary,
    #[error("{0}")]
    Invalid(#[from] daqtune_units::InvalidValue),
    /// A host file the artifact is made from cannot be read or used (the message names it).
    #[error("{0}")]
    Host(String),
    /// The profile asks for nothing this artifact would carry.
    #[error("{0}")]
    Nothing(&'static str),
}

impl Tunable {
    pub fn plans(&self) -> bool {
        self.planner.is_some()
    }
}

/// Why an owned action did not change the host (defined beside the action trait).
pub use crate::model::plan::SetError;

pub use crate::model::verdict::Unjudged;
