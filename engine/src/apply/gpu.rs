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
}

pub trait GpuSetters {
    fn gpus(&self) -> Result<Vec<GpuState>, String>;
    fn lock_max(&self, uuid: &str, domain: GpuDomain) -> Result<Locked, String>;
    fn unlock(&self, uuid: &str, domain: GpuDomain) -> Result<(), String>;
    /// Set persistence mode; returns the previous state.
    fn set_persistence(&self, uuid: &str, on: bool) -> Result<Option<bool>, String>;
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

    fn refused(&self, call: &str) -> Result<(), String> {
        if self.refuse.borrow().iter().any(|r| r == call) {
            return Err(format!("{call}: NVML_ERROR_NO_PERMISSION (mock)"));
        }
        Ok(())
    }
}

impl GpuSetters for MockGpus {
    fn gpus(&self) -> Result<Vec<GpuState>, String> {
        Ok(self.state.borrow().values().cloned().collect())
    }
    fn lock_max(&self, uuid: &str, domain: GpuDomain) -> Result<Locked, String> {
        self.calls
            .borrow_mut()
            .push(format!("lock {uuid} {}", domain.as_str()));
        self.refused("lock_max")?;
        let mut st = self.state.borrow_mut();
        let g = st.get_mut(uuid).ok_or_else(|| format!("no GPU {uuid}"))?;
        let slot = match domain {
            GpuDomain::Sm => &mut g.sm_held,
            GpuDomain::Memory if g.has_memory_domain => &mut g.memory_held,
            GpuDomain::Memory => return Err(format!("{uuid} has no separate memory clock domain")),
        };
        let previously_locked =
            *slot == Some(true) || self.locked_by_others.borrow().iter().any(|u| u == uuid);
        *slot = Some(true);
        Ok(Locked {
            message: format!("{} clock of {uuid} locked at its maximum", domain.as_str()),
            previously_locked,
        })
    }
    fn unlock(&self, uuid: &str, domain: GpuDomain) -> Result<(), String> {
        self.calls
            .borrow_mut()
            .push(format!("unlock {uuid} {}", domain.as_str()));
        self.refused("unlock")?;
        let mut st = self.state.borrow_mut();
        let g = st.get_mut(uuid).ok_or_else(|| format!("no GPU {uuid}"))?;
        match domain {
            GpuDomain::Sm => g.sm_held = Some(false),
            GpuDomain::Memory => g.memory_held = Some(false),
        }
        Ok(())
    }
    fn set_persistence(&self, uuid: &str, on: bool) -> Result<Option<bool>, String> {
        self.calls
            .borrow_mut()
            .push(format!("persistence {uuid} {on}"));
        self.refused("set_persistence")?;
        let mut st = self.state.borrow_mut();
        let g = st.get_mut(uuid).ok_or_else(|| format!("no GPU {uuid}"))?;
        let prev = g.persistence;
        g.persistence = Some(on);
        Ok(prev)
    }
}

use daqtune_probe::gpu::control::{foreign_lock, ClockDomain, GpuControl, NvmlControl};
use daqtune_probe::gpu::{DomainClocks, GpuFacts, REASON_GPU_IDLE};

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

pub fn judge_domain(c: &DomainClocks, target: u32, tol: u32, idle: Option<bool>) -> Held {
    let near = |v: u32| v.saturating_add(tol) >= target;
    if let Some(floor) = c.pstate_min_mhz.filter(|f| *f > 0 && near(*f)) {
        return Held::Floor { floor };
    }
    match (idle, c.current_mhz) {
        (Some(true), Some(cur)) if near(cur) => Held::IdleAtMax { current: cur },
        (Some(true), Some(cur)) => Held::Dropped { current: cur },
        (Some(false), _) => Held::Unknown {
            why: "the GPU is busy, so its current clock says nothing about a lock, and the P-state floor is below the maximum".into(),
        },
        _ => Held::Unknown {
            why: "NVML reports neither a P-state floor at the maximum nor whether the GPU is idle".into(),
        },
    }
}

/// Idle: NVML's `gpu_idle` clock event reason, else 0 % utilisation.
pub fn is_idle(g: &GpuFacts) -> Option<bool> {
    match (g.clock_event_reasons, g.utilization_pct) {
        (Some(r), _) if r & REASON_GPU_IDLE != 0 => Some(true),
        (_, Some(u)) => Some(u == 0),
        (Some(_), None) => Some(false),
        (None, None) => None,
    }
}

/// Whether a domain looks held at its maximum: the gpu.clocks check's judgement
/// ([`judge_domain`]) as apply's GPU state carries it (`None`: cannot be told).
pub fn held(c: &DomainClocks, tolerance_mhz: u32, g: &GpuFacts) -> Option<bool> {
    let target = c.max_mhz.filter(|m| *m > 0)?;
    match judge_domain(c, target, tolerance_mhz, is_idle(g)) {
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
        sm_held: held(&g.sm_clock, tolerance_mhz, g),
        memory_held: if has_mem {
            held(&g.memory_clock, tolerance_mhz, g)
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
    fn gpus(&self) -> Result<Vec<GpuState>, String> {
        self.uuids
            .iter()
            .map(|u| {
                self.ctl
                    .nvml
                    .facts(u)
                    .map(|g| state_of(&g, self.ctl.tolerance_mhz))
                    .map_err(|e| e.to_string())
            })
            .collect()
    }
    fn lock_max(&self, uuid: &str, d: GpuDomain) -> Result<Locked, String> {
        self.ctl
            .lock_at_max(uuid, domain(d))
            .map(|o| Locked {
                message: o.message,
                previously_locked: o.previously_locked,
            })
            .map_err(|e| e.to_string())
    }
    fn unlock(&self, uuid: &str, d: GpuDomain) -> Result<(), String> {
        self.ctl
            .unlock(uuid, domain(d))
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    fn set_persistence(&self, uuid: &str, on: bool) -> Result<Option<bool>, String> {
        self.ctl
            .set_persistence(uuid, on)
            .map_err(|e| e.to_string())
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

    fn facts(min: u32, cur: u32, idle: bool) -> GpuFacts {
        let mut g = GpuFacts {
            uuid: "GPU-x".into(),
            ..Default::default()
        };
        g.sm_clock = DomainClocks {
            current_mhz: Some(cur),
            max_mhz: Some(2100),
            pstate_min_mhz: Some(min),
            pstate_max_mhz: Some(2100),
            ..Default::default()
        };
        g.clock_event_reasons = Some(if idle { REASON_GPU_IDLE } else { 0 });
        g
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

    #[test]
    fn judge_never_passes_a_busy_unlocked_gpu() {
        // Busy at max, no lock visible: an instantaneous reading proves nothing.
        assert!(matches!(
            judge_domain(&dc(1980, 1980, Some(345)), 1980, 250, Some(false)),
            Held::Unknown { .. }
        ));
        // Idle and dropped (the H200 reading from docs/validation.md): not held.
        assert_eq!(
            judge_domain(&dc(345, 1980, Some(345)), 1980, 250, Some(true)),
            Held::Dropped { current: 345 }
        );
        // Locked: the P-state floor sits at the maximum, busy or not.
        assert_eq!(
            judge_domain(&dc(1980, 1980, Some(1980)), 1980, 250, Some(false)),
            Held::Floor { floor: 1980 }
        );
        // HBM: fixed memory clock, floor == max.
        assert_eq!(
            judge_domain(&dc(3201, 3201, Some(3201)), 3201, 250, Some(true)),
            Held::Floor { floor: 3201 }
        );
        // IGX: 1920 held for 2100 is within tolerance (seed 000 Step 7 note).
        assert_eq!(
            judge_domain(&dc(1920, 2100, None), 2100, 250, Some(true)),
            Held::IdleAtMax { current: 1920 }
        );
        assert!(matches!(
            judge_domain(&dc(1920, 2100, None), 2100, 250, None),
            Held::Unknown { .. }
        ));
    }

    #[test]
    fn idleness_from_reasons_or_utilisation() {
        let mut g = GpuFacts::default();
        assert_eq!(is_idle(&g), None);
        g.clock_event_reasons = Some(REASON_GPU_IDLE);
        assert_eq!(is_idle(&g), Some(true));
        g.clock_event_reasons = Some(0x4);
        g.utilization_pct = Some(87);
        assert_eq!(is_idle(&g), Some(false));
        g.utilization_pct = Some(0);
        assert_eq!(is_idle(&g), Some(true));
    }

    #[test]
    fn held_like_the_check() {
        // A lock narrows the P-state floor (IGX holds 1920 for 2100: within 250 MHz).
        let g = facts(1920, 1920, true);
        assert_eq!(held(&g.sm_clock, 250, &g), Some(true));
        // Idle and dropped: not held.
        let g = facts(210, 420, true);
        assert_eq!(held(&g.sm_clock, 250, &g), Some(false));
        // Busy, floor low: cannot be told.
        let g = facts(210, 2100, false);
        assert_eq!(held(&g.sm_clock, 250, &g), None);
        // No maximum reported: nothing to judge against.
        let mut g = facts(210, 420, true);
        g.sm_clock.max_mhz = None;
        assert_eq!(held(&g.sm_clock, 250, &g), None);
    }
}
