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
