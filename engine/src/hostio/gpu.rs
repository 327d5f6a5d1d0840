//! GPU clocks and persistence for apply, behind a small trait.
//!
//! The GPU module (NVML through `daqtune_probe::gpu::control::GpuControl`) implements
//! [`GpuSetters`]; apply only needs these four calls. Tests use [`MockGpus`], so a shared
//! GPU's settings are never changed by a test.
//!
//! Revert cannot restore a lock someone else had set (NVML exposes no "previous lock" to
//! restore): apply warns before overriding one, and revert leaves such a GPU locked.

use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuDomain {
    Sm,
    Memory,
}

impl GpuDomain {
    pub fn as_str(self) -> &'static str {
        match self {
            GpuDomain::Sm => "SM",
            GpuDomain::Memory => "memory",
        }
    }
}

/// What apply needs to know about one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuState {
    pub uuid: String,
    pub name: String,
    /// Whether the SM clock looks held at its maximum (`None`: cannot be told).
    pub sm_held: Option<bool>,
    /// Whether the memory clock looks held; `None` also when there is no memory domain.
    pub memory_held: Option<bool>,
    /// GB10 (unified memory) has no separate memory clock domain (seed 000 Step 7).
    pub has_memory_domain: bool,
    pub persistence: Option<bool>,
}

/// The result of a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locked {
    pub message: String,
    /// A lock was in place before (someone else's): revert will not undo it.
    pub previously_locked: bool,
    /// What the read-back shows, judged as the gpu.clocks check judges ([`judge_domain`]):
    /// `Some(true)` the lock shows (P-state floor at the target, or an idle GPU held there),
    /// `Some(false)` it does not take (the idle GPU runs below the target), `None` NVML's
    /// readings cannot tell (a busy GPU runs at its maximum locked or not).
    pub shown: Option<bool>,
    /// The P-state floor before the lock, for revert's read-back (a fixed clock such as
    /// HBM's sits at the maximum with no lock at all).
    pub floor_before_mhz: Option<u32>,
}

/// Why a GPU call did not go through. The message is what apply and revert print.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// The GPU module (NVML) refused or failed the call.
    #[error(transparent)]
    Control(#[from] daqtune_probe::gpu::control::ControlError),
    /// A test's refusal ([`MockGpus::refuse`]).
    #[error("{0}: NVML_ERROR_NO_PERMISSION (mock)")]
    Refused(String),
    /// The GPU is not among those this run controls.
    #[error("no GPU {0}")]
    NoGpu(String),
    /// A memory clock lock on a GPU with one clock domain (GB10).
    #[error("{0} has no separate memory clock domain")]
    NoMemoryDomain(String),
    /// NVML accepted the reset, but the P-state floor still shows a lock at the maximum
    /// that was not there before daqtune's.
    #[error("{domain} clock of {uuid}: reset accepted, but the P-state floor still reads {floor_mhz} MHz for a {target_mhz} MHz maximum ({} before daqtune's lock)", floor_before.map_or("not recorded".to_string(), |f| format!("{f} MHz")))]
    StillLocked {
        domain: &'static str,
        uuid: String,
        floor_mhz: u32,
        target_mhz: u32,
        floor_before: Option<u32>,
    },
}

pub trait GpuSetters {
    fn gpus(&self) -> Result<Vec<GpuState>, GpuError>;
    fn lock_max(&self, uuid: &str, domain: GpuDomain) -> Result<Locked, GpuError>;
    /// Reset a lock and read it back: an error also when the P-state floor still shows a
    /// lock at the maximum that `floor_before_mhz` (the floor before daqtune's lock) did not.
    fn unlock(
        &self,
        uuid: &str,
        domain: GpuDomain,
        floor_before_mhz: Option<u32>,
    ) -> Result<(), GpuError>;
    /// Set persistence mode; returns the previous state.
    fn set_persistence(&self, uuid: &str, on: bool) -> Result<Option<bool>, GpuError>;
}

/// An in-memory GPU set for tests.
#[derive(Debug, Default)]
pub struct MockGpus {
    pub state: RefCell<BTreeMap<String, GpuState>>,
    /// Calls that fail, by name (`lock_max`, `unlock`, `set_persistence`).
    pub refuse: RefCell<Vec<String>>,
    pub calls: RefCell<Vec<String>>,
    /// GPUs whose clocks someone else locked, invisibly to `gpus()` (held = `None`).
    pub locked_by_others: RefCell<Vec<String>>,
}

impl MockGpus {
    pub fn new(gpus: Vec<GpuState>) -> Self {
        MockGpus {
            state: RefCell::new(gpus.into_iter().map(|g| (g.uuid.clone(), g)).collect()),
            ..Default::default()
        }
    }

    fn refused(&self, call: &str) -> Result<(), GpuError> {
        if self.refuse.borrow().iter().any(|r| r == call) {
            return Err(GpuError::Refused(call.to_string()));
        }
        Ok(())
    }
}

impl GpuSetters for MockGpus {
    fn gpus(&self) -> Result<Vec<GpuState>, GpuError> {
        Ok(self.state.borrow().values().cloned().collect())
    }
    fn lock_max(&self, uuid: &str, domain: GpuDomain) -> Result<Locked, GpuError> {
        self.calls
            .borrow_mut()
            .push(format!("lock {uuid} {}", domain.as_str()));
        self.refused("lock_max")?;
        let mut st = self.state.borrow_mut();
        let g = st
            .get_mut(uuid)
            .ok_or_else(|| GpuError::NoGpu(uuid.to_string()))?;
        let slot = match domain {
            GpuDomain::Sm => &mut g.sm_held,
            GpuDomain::Memory if g.has_memory_domain => &mut g.memory_held,
            GpuDomain::Memory => return Err(GpuError::NoMemoryDomain(uuid.to_string())),
        };
        let previously_locked =
            *slot == Some(true) || self.locked_by_others.borrow().iter().any(|u| u == uuid);
        *slot = Some(true);
        Ok(Locked {
            message: format!("{} clock of {uuid} locked at its maximum", domain.as_str()),
            previously_locked,
            shown: Some(true),
            floor_before_mhz: None,
        })
    }
    fn unlock(&self, uuid: &str, domain: GpuDomain, _floor: Option<u32>) -> Result<(), GpuError> {
        self.calls
            .borrow_mut()
            .push(format!("unlock {uuid} {}", domain.as_str()));
        self.refused("unlock")?;
        let mut st = self.state.borrow_mut();
        let g = st
            .get_mut(uuid)
            .ok_or_else(|| GpuError::NoGpu(uuid.to_string()))?;
        match domain {
            GpuDomain::Sm => g.sm_held = Some(false),
            GpuDomain::Memory => g.memory_held = Some(false),
        }
        Ok(())
    }
    fn set_persistence(&self, uuid: &str, on: bool) -> Result<Option<bool>, GpuError> {
        self.calls
            .borrow_mut()
            .push(format!("persistence {uuid} {on}"));
        self.refused("set_persistence")?;
        let mut st = self.state.borrow_mut();
        let g = st
            .get_mut(uuid)
            .ok_or_else(|| GpuError::NoGpu(uuid.to_string()))?;
        let prev = g.persistence;
        g.persistence = Some(on);
        Ok(prev)
    }
}

use daqtune_probe::gpu::control::{
    appears_locked, foreign_lock, is_idle, lock_evidence, ClockDomain, GpuControl, LockEvidence,
    NvmlControl,
};
use daqtune_probe::gpu::{DomainClocks, GpuFacts};

fn domain(d: GpuDomain) -> ClockDomain {
    match d {
        GpuDomain::Sm => ClockDomain::Sm,
        GpuDomain::Memory => ClockDomain::Memory,
    }
}

// ---------------------------------------------------------------------------------------------
// gpu.clocks

/// What NVML shows about one clock domain being held at its maximum.
#[derive(Debug, PartialEq, Eq)]
pub enum Held {
    /// The P-state floor is at the maximum: a lock, or a fixed clock (HBM).
    Floor { floor: u32 },
    /// The GPU is idle yet runs at the maximum.
    IdleAtMax { current: u32 },
    /// The GPU is idle and the clock dropped: not held.
    Dropped { current: u32 },
    /// The GPU is busy (or idleness unknown) and nothing shows a lock: cannot tell.
    Unknown { why: String },
}

/// The gpu.clocks judgement of one domain against `target`: held only where the lock shows
/// itself (the probe's [`lock_evidence`]: the P-state floor at the target, or an idle GPU
/// held there), never by a busy GPU's clock, which reaches the maximum unlocked too. The
/// check, the plan and apply's read-back all judge with this.
pub fn judge_domain(g: &GpuFacts, d: GpuDomain, target: u32, tol: u32) -> Held {
    match lock_evidence(g, domain(d), target, tol) {
        Some(LockEvidence::Floor { floor_mhz }) => Held::Floor { floor: floor_mhz },
        Some(LockEvidence::IdleAtMax { current_mhz }) => Held::IdleAtMax {
            current: current_mhz,
        },
        None => match (is_idle(g), clocks(g, d).current_mhz) {
            (Some(true), Some(cur)) => Held::Dropped { current: cur },
            (Some(false), _) => Held::Unknown {
                why: "the GPU is busy, so its current clock says nothing about a lock, and the P-state floor is below the maximum".into(),
            },
            _ => Held::Unknown {
                why: "NVML reports neither a P-state floor at the maximum nor whether the GPU is idle".into(),
            },
        },
    }
}

/// One domain's clocks.
pub fn clocks(g: &GpuFacts, d: GpuDomain) -> &DomainClocks {
    match d {
        GpuDomain::Sm => &g.sm_clock,
        GpuDomain::Memory => &g.memory_clock,
    }
}

/// Whether a domain looks held at its maximum: the gpu.clocks check's judgement
/// ([`judge_domain`]) as apply's GPU state carries it (`None`: cannot be told).
pub fn held(g: &GpuFacts, d: GpuDomain, tolerance_mhz: u32) -> Option<bool> {
    let target = clocks(g, d).max_mhz.filter(|m| *m > 0)?;
    match judge_domain(g, d, target, tolerance_mhz) {
        Held::Floor { .. } | Held::IdleAtMax { .. } => Some(true),
        Held::Dropped { .. } => Some(false),
        Held::Unknown { .. } => None,
    }
}

fn state_of(g: &GpuFacts, tolerance_mhz: u32) -> GpuState {
    let has_mem = g.memory_clock_domain != Some(false);
    GpuState {
        uuid: g.uuid.clone(),
        name: g.display_name().to_string(),
        sm_held: held(g, GpuDomain::Sm, tolerance_mhz),
        memory_held: if has_mem {
            held(g, GpuDomain::Memory, tolerance_mhz)
        } else {
            None
        },
        has_memory_domain: has_mem,
        persistence: g.persistence_mode,
    }
}

/// [`GpuSetters`] over the GPU module's NVML setters (live NVML, or its mock).
pub struct NvmlSetters<C: NvmlControl> {
    pub ctl: GpuControl<C>,
    uuids: Vec<String>,
}

impl<C: NvmlControl> NvmlSetters<C> {
    /// `gpus`: the GPUs to act on (from the GPU facts of this run).
    pub fn new(nvml: C, tolerance_mhz: u32, gpus: &[GpuFacts]) -> Self {
        NvmlSetters {
            ctl: GpuControl::new(nvml, tolerance_mhz),
            uuids: gpus.iter().map(|g| g.uuid.clone()).collect(),
        }
    }
}

impl<C: NvmlControl> GpuSetters for NvmlSetters<C> {
    fn gpus(&self) -> Result<Vec<GpuState>, GpuError> {
        self.uuids
            .iter()
            .map(|u| {
                self.ctl
                    .nvml
                    .facts(u)
                    .map(|g| state_of(&g, self.ctl.tolerance_mhz))
                    .map_err(GpuError::from)
            })
            .collect()
    }
    fn lock_max(&self, uuid: &str, d: GpuDomain) -> Result<Locked, GpuError> {
        let o = self
            .ctl
            .lock_at_max(uuid, domain(d))
            .map_err(GpuError::from)?;
        // The probe's `verified` is the lock's own evidence; where it is missing, an idle GPU
        // below the target says the lock did not take, anything else cannot be told.
        let shown = if o.verified {
            Some(true)
        } else {
            let now = self.ctl.nvml.facts(uuid).map_err(GpuError::from)?;
            match judge_domain(&now, d, o.target_mhz, self.ctl.tolerance_mhz) {
                Held::Floor { .. } | Held::IdleAtMax { .. } => Some(true),
                Held::Dropped { .. } => Some(false),
                Held::Unknown { .. } => None,
            }
        };
        Ok(Locked {
            message: o.message,
            previously_locked: o.previously_locked,
            shown,
            floor_before_mhz: o.before.pstate_min_mhz,
        })
    }
    fn unlock(&self, uuid: &str, d: GpuDomain, floor_before: Option<u32>) -> Result<(), GpuError> {
        let after = self.ctl.unlock(uuid, domain(d)).map_err(GpuError::from)?;
        // The reset took when the floor left the maximum, or was there before the lock too.
        let tol = self.ctl.tolerance_mhz;
        let Some(target) = after.max_mhz.filter(|m| *m > 0) else {
            return Ok(());
        };
        let was_there = floor_before.is_some_and(|f| f > 0 && f.saturating_add(tol) >= target);
        if appears_locked(&after, target, tol) && !was_there {
            return Err(GpuError::StillLocked {
                domain: d.as_str(),
                uuid: uuid.to_string(),
                floor_mhz: after.pstate_min_mhz.unwrap_or(0),
                target_mhz: target,
                floor_before,
            });
        }
        Ok(())
    }
    fn set_persistence(&self, uuid: &str, on: bool) -> Result<Option<bool>, GpuError> {
        self.ctl.set_persistence(uuid, on).map_err(GpuError::from)
    }
}

/// Someone else's lock on a domain (the P-state range they set), for the plan's warning.
pub fn foreign(g: &GpuFacts, d: GpuDomain, tolerance_mhz: u32) -> Option<(u32, u32)> {
    let c = match d {
        GpuDomain::Sm => &g.sm_clock,
        GpuDomain::Memory => &g.memory_clock,
    };
    c.max_mhz.and_then(|t| foreign_lock(c, t, tolerance_mhz))
}

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_probe::gpu::REASON_GPU_IDLE;

    fn facts(min: u32, cur: u32, idle: bool) -> GpuFacts {
        gf(dc(cur, 2100, Some(min)), Some(idle))
    }

    fn dc(cur: u32, max: u32, floor: Option<u32>) -> DomainClocks {
        DomainClocks {
            current_mhz: Some(cur),
            max_mhz: Some(max),
            pstate_min_mhz: floor,
            pstate_max_mhz: Some(max),
            ..Default::default()
        }
    }

    /// A GPU whose SM clocks are `sm`, idle or busy by its clock event reasons (`None`: NVML
    /// reports neither reasons nor utilisation).
    fn gf(sm: DomainClocks, idle: Option<bool>) -> GpuFacts {
        GpuFacts {
            uuid: "GPU-x".into(),
            sm_clock: sm,
            clock_event_reasons: idle.map(|i| if i { REASON_GPU_IDLE } else { 0 }),
            ..Default::default()
        }
    }

    fn judge(c: DomainClocks, target: u32, idle: Option<bool>) -> Held {
        judge_domain(&gf(c, idle), GpuDomain::Sm, target, 250)
    }

    #[test]
    fn judge_never_passes_a_busy_unlocked_gpu() {
        // Busy at max, no lock visible: an instantaneous reading proves nothing.
        assert!(matches!(
            judge(dc(1980, 1980, Some(345)), 1980, Some(false)),
            Held::Unknown { .. }
        ));
        // Idle and dropped (the H200 reading from docs/validation.md): not held.
        assert_eq!(
            judge(dc(345, 1980, Some(345)), 1980, Some(true)),
            Held::Dropped { current: 345 }
        );
        // Locked: the P-state floor sits at the maximum, busy or not.
        assert_eq!(
            judge(dc(1980, 1980, Some(1980)), 1980, Some(false)),
            Held::Floor { floor: 1980 }
        );
        // HBM: fixed memory clock, floor == max.
        assert_eq!(
            judge(dc(3201, 3201, Some(3201)), 3201, Some(true)),
            Held::Floor { floor: 3201 }
        );
        // IGX: 1920 held for 2100 is within tolerance (seed 000 Step 7 note).
        assert_eq!(
            judge(dc(1920, 2100, None), 2100, Some(true)),
            Held::IdleAtMax { current: 1920 }
        );
        assert!(matches!(
            judge(dc(1920, 2100, None), 2100, None),
            Held::Unknown { .. }
        ));
    }

    /// The check's judgement and the probe's lock read-back are one rule: whatever NVML shows,
    /// `judge_domain` calls a domain held exactly where `lock_evidence` finds the lock.
    #[test]
    fn judgement_and_lock_evidence_agree() {
        let clocks = [None, Some(0), Some(345), Some(1850), Some(1900), Some(2100)];
        for cur in clocks {
            for floor in clocks {
                for idle in [None, Some(true), Some(false)] {
                    let c = DomainClocks {
                        current_mhz: cur,
                        max_mhz: Some(2100),
                        pstate_min_mhz: floor,
                        pstate_max_mhz: Some(2100),
                        ..Default::default()
                    };
                    let g = gf(c, idle);
                    let held = matches!(
                        judge_domain(&g, GpuDomain::Sm, 2100, 250),
                        Held::Floor { .. } | Held::IdleAtMax { .. }
                    );
                    let shown = lock_evidence(&g, ClockDomain::Sm, 2100, 250).is_some();
                    assert_eq!(held, shown, "{cur:?} {floor:?} {idle:?}");
                }
            }
        }
    }

    #[test]
    fn held_like_the_check() {
        // A lock narrows the P-state floor (IGX holds 1920 for 2100: within 250 MHz).
        let g = facts(1920, 1920, true);
        assert_eq!(held(&g, GpuDomain::Sm, 250), Some(true));
        // Idle and dropped: not held.
        let g = facts(210, 420, true);
        assert_eq!(held(&g, GpuDomain::Sm, 250), Some(false));
        // Busy, floor low: cannot be told.
        let g = facts(210, 2100, false);
        assert_eq!(held(&g, GpuDomain::Sm, 250), None);
        // No maximum reported: nothing to judge against.
        let mut g = facts(210, 420, true);
        g.sm_clock.max_mhz = None;
        assert_eq!(held(&g, GpuDomain::Sm, 250), None);
    }
}
