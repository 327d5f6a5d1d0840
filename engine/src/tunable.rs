//! What a tunable is: one setting of the host (or one observation of it), owned by one module
//! under `tunables/`, which holds its stable id and documentation page, the profile keys it
//! reads, its judgement (verdicts) and, when daqtune can change the setting, its plan. The
//! registry (`tunables::REGISTRY`) lists them. (`generate`'s artifact kinds and some action
//! wording still live in `apply` and `exec`: issue 24 item 1 moves them here.)
//!
//! Verify is the judgement again: `check` and `plan` call the same tunable on the same
//! [`Facts`](crate::facts::Facts), so what passes is never planned for, and after `apply` the
//! same judgement on the changed host turns green (`tests/tunables_agree.rs` holds every
//! fixture root to that).

use crate::context::Context;
use crate::plan::{Plan, PlanCx, PlanError};
use crate::verdict::{Area, Verdict};

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
    /// data out. Action kinds of its own (MTU, module load, GPU locks) are executed by the
    /// setter hooks in the tunable's module; the rest by the shared writers.
    pub plan: fn(&PlanCx, &mut Plan) -> Result<(), PlanError>,
}

impl Tunable {
    pub fn plans(&self) -> bool {
        self.planner.is_some()
    }
}
