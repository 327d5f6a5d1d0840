//! Runtime GPU settings the apply feature changes: locked SM/memory clocks and persistence
//! mode, each read back after the write.
//!
//! The driver calls sit behind [`NvmlControl`] so that tests run against [`MockNvml`]: a
//! shared GPU's settings are never changed by a test.

use super::{DomainClocks, GpuFacts};
use std::cell::RefCell;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClockDomain {
    Sm,
    Memory,
}

impl ClockDomain {
    pub fn as_str(self) -> &'static str {
        match self {
            ClockDomain::Sm => "SM",
            ClockDomain::Memory => "memory",
        }
    }
    fn clocks(self, g: &GpuFacts) -> &DomainClocks {
        match self {
            ClockDomain::Sm => &g.sm_clock,
            ClockDomain::Memory => &g.memory_clock,
        }
    }
}

/// Why a GPU setting could not be changed. Messages name the NVML call and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error("NVML not available: {reason}")]
    NotAvailable { reason: String },
    #[error("the driver refused {call} on {uuid}: NVML_ERROR_NO_PERMISSION (run as root; in a container the GPU settings belong to the host)")]
    NoPermission { call: String, uuid: String },
    #[error("{uuid} does not support {call} (NVML_ERROR_NOT_SUPPORTED)")]
    NotSupported { call: String, uuid: String },
    #[error("{uuid} has no separate memory clock domain (unified memory, e.g. GB10): only the SM clock can be locked")]
    NoMemoryDomain { uuid: String },
    #[error(
        "{uuid}: NVML does not report the maximum {domain} clock, so there is no target to lock to"
    )]
    NoMaxClock { uuid: String, domain: &'static str },
    #[error("no GPU with UUID {uuid}")]
    NoSuchGpu { uuid: String },
    #[error("{call} on {uuid} failed: {message}")]
    Driver {
        call: String,
        uuid: String,
        message: String,
    },
    #[error("{uuid}: {what} reads back {observed} after the write, expected {expected}")]
    ReadBack {
        uuid: String,
        what: String,
        expected: String,
        observed: String,
    },
}

/// The NVML calls the setters need. Implemented by the live NVML and by [`MockNvml`].
pub trait NvmlControl {
    fn facts(&self, uuid: &str) -> Result<GpuFacts, ControlError>;
    fn set_locked_clocks(
        &self,
        uuid: &str,
        domain: ClockDomain,
        min_mhz: u32,
        max_mhz: u32,
    ) -> Result<(), ControlError>;
    fn reset_locked_clocks(&self, uuid: &str, domain: ClockDomain) -> Result<(), ControlError>;
    fn set_persistence(&self, uuid: &str, on: bool) -> Result<(), ControlError>;
}

/// What shows that a clock domain is held at its target. NVML (through r580, NVML API 13)
/// has no query for the locked-clock range that nvmlDeviceSetGpuLockedClocks /
/// SetMemoryLockedClocks set, so the evidence is what a lock does to what NVML reports, never
/// the current clock of a GPU that may be busy (a busy unlocked GPU boosts to its maximum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockEvidence {
    /// The current P-state's minimum clock (nvmlDeviceGetMinMaxClockOfPState) is at the
    /// target: the lock narrowed the range (or the clock is fixed, as HBM's is).
    Floor { floor_mhz: u32 },
    /// The GPU is idle (clock event reason `gpu_idle`, or 0 % utilisation) and still runs at
    /// the target: an unlocked idle GPU drops to a few hundred MHz.
    IdleAtMax { current_mhz: u32 },
}

/// Idle per NVML: the `gpu_idle` clock event reason, else 0 % utilisation; `None` when NVML
/// reports neither.
pub fn is_idle(g: &GpuFacts) -> Option<bool> {
    match (g.clock_event_reasons, g.utilization_pct) {
        (Some(r), _) if r & super::REASON_GPU_IDLE != 0 => Some(true),
        (_, Some(u)) => Some(u == 0),
        (Some(_), None) => Some(false),
        (None, None) => None,
    }
}

/// The evidence that `domain` of `g` is held at `target` (see [`LockEvidence`]); `None` when
/// NVML's readings do not show it (a busy GPU's current clock is not evidence).
pub fn lock_evidence(
    g: &GpuFacts,
    domain: ClockDomain,
    target: u32,
    tolerance_mhz: u32,
) -> Option<LockEvidence> {
    let c = domain.clocks(g);
    if appears_locked(c, target, tolerance_mhz) {
        return c
            .pstate_min_mhz
            .map(|floor_mhz| LockEvidence::Floor { floor_mhz });
    }
    match (is_idle(g), c.current_mhz) {
        (Some(true), Some(cur)) if cur.saturating_add(tolerance_mhz) >= target => {
            Some(LockEvidence::IdleAtMax { current_mhz: cur })
        }
        _ => None,
    }
}

/// What a lock did: the clocks before and after, and whether the read-back confirms it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOutcome {
    pub uuid: String,
    pub domain: ClockDomain,
    pub target_mhz: u32,
    pub before: DomainClocks,
    pub after: DomainClocks,
    /// A lock was already in place before this call (someone else's, unless the journal says
    /// it is daqtune's): apply warns before overriding it.
    pub previously_locked: bool,
    /// The read-back shows the lock itself ([`LockEvidence`]): the P-state floor at the
    /// target, or an idle GPU held there. Never set because a busy GPU's clock is at its
    /// maximum, which it reaches unlocked too.
    pub verified: bool,
    /// How the read-back shows it; `None` exactly when `verified` is false.
    pub evidence: Option<LockEvidence>,
    pub message: String,
}

/// Whether the clocks look held near `target`: the P-state floor is at the target (a lock
/// narrows it), which an idle GPU would otherwise never show.
pub fn appears_locked(c: &DomainClocks, target: u32, tolerance_mhz: u32) -> bool {
    c.pstate_min_mhz
        .is_some_and(|lo| lo.saturating_add(tolerance_mhz) >= target && lo > 0)
}

/// A lock that is in place and differs from the one daqtune would set (`target`,`target`):
/// the P-state range collapsed to one value, capped below the maximum, or floored near it.
/// Apply warns before overriding it (revert cannot restore someone else's lock). A fixed clock
/// at the maximum (HBM memory) equals daqtune's lock and is not reported.
pub fn foreign_lock(c: &DomainClocks, target: u32, tolerance_mhz: u32) -> Option<(u32, u32)> {
    let (lo, hi) = (c.pstate_min_mhz?, c.pstate_max_mhz?);
    if (lo, hi) == (target, target) || lo == 0 {
        return None;
    }
    (lo == hi || hi < target || lo.saturating_add(tolerance_mhz) >= target).then_some((lo, hi))
}

/// The setters, generic over the NVML behind them.
pub struct GpuControl<C: NvmlControl> {
    pub nvml: C,
    /// How far below the target a read-back may be and still count (boost and rounding:
    /// seed 000 notes 1920 MHz held for a 2100 MHz max on IGX, 8000 for 8001).
    pub tolerance_mhz: u32,
}

impl<C: NvmlControl> GpuControl<C> {
    pub fn new(nvml: C, tolerance_mhz: u32) -> Self {
        GpuControl {
            nvml,
            tolerance_mhz,
        }
    }

    /// Lock one clock domain at its maximum (`nvidia-smi -lgc max,max` / `-lmc max,max`).
    pub fn lock_at_max(
        &self,
        uuid: &str,
        domain: ClockDomain,
    ) -> Result<LockOutcome, ControlError> {
        let before_facts = self.nvml.facts(uuid)?;
        if domain == ClockDomain::Memory && before_facts.memory_clock_domain == Some(false) {
            return Err(ControlError::NoMemoryDomain { uuid: uuid.into() });
        }
        let before = domain.clocks(&before_facts).clone();
        let target = before
            .max_mhz
            .filter(|m| *m > 0)
            .ok_or(ControlError::NoMaxClock {
                uuid: uuid.into(),
                domain: domain.as_str(),
            })?;
        let previously_locked = foreign_lock(&before, target, self.tolerance_mhz).is_some();
        self.nvml.set_locked_clocks(uuid, domain, target, target)?;
        let after_facts = self.nvml.facts(uuid)?;
        let after = domain.clocks(&after_facts).clone();
        let evidence = lock_evidence(&after_facts, domain, target, self.tolerance_mhz);
        let verified = evidence.is_some();
        let shown = after
            .current_mhz
            .map(|c| format!("{c} MHz"))
            .unwrap_or_else(|| "unknown".into());
        let d = domain.as_str();
        let message = match evidence {
            Some(LockEvidence::Floor { floor_mhz }) => format!(
                "{d} clock of {uuid} locked at {target} MHz (P-state floor {floor_mhz} MHz, reads {shown})"
            ),
            Some(LockEvidence::IdleAtMax { current_mhz }) => format!(
                "{d} clock of {uuid} locked at {target} MHz (the idle GPU holds {current_mhz} MHz)"
            ),
            None if is_idle(&after_facts) == Some(false) => {
                let floor = after
                    .pstate_min_mhz
                    .map(|f| format!("{f} MHz"))
                    .unwrap_or_else(|| "not reported".into());
                let util = after_facts
                    .utilization_pct
                    .map(|u| format!(", {u}% utilisation"))
                    .unwrap_or_default();
                // A busy GPU runs at its maximum locked or not: its clock proves nothing, and
                // NVML has no query for the locked range. Reported, not assumed.
                format!(
                    "{d} clock of {uuid}: lock to {target} MHz accepted, but NVML cannot confirm it while the GPU is busy (clock {shown}{util}, P-state floor {floor}); check again when it is idle"
                )
            }
            // The driver accepted the lock but the clock does not show it: boost limits and
            // rounding (seed 000 Step 7) or a power/thermal cap. Reported, not hidden.
            None => format!(
                "{d} clock of {uuid}: lock to {target} MHz accepted, but the clock reads {shown}"
            ),
        };
        Ok(LockOutcome {
            uuid: uuid.into(),
            domain,
            target_mhz: target,
            before,
            after,
            previously_locked,
            verified,
            evidence,
            message,
        })
    }

    /// The lock someone else left on this domain, if any: call before [`Self::lock_at_max`]
    /// to warn the user.
    pub fn existing_lock(
        &self,
        uuid: &str,
        domain: ClockDomain,
    ) -> Result<Option<(u32, u32)>, ControlError> {
        let f = self.nvml.facts(uuid)?;
        let c = domain.clocks(&f);
        Ok(c.max_mhz
            .and_then(|t| foreign_lock(c, t, self.tolerance_mhz)))
    }

    /// Remove a lock (`nvidia-smi -rgc` / `-rmc`).
    pub fn unlock(&self, uuid: &str, domain: ClockDomain) -> Result<DomainClocks, ControlError> {
        let facts = self.nvml.facts(uuid)?;
        if domain == ClockDomain::Memory && facts.memory_clock_domain == Some(false) {
            return Err(ControlError::NoMemoryDomain { uuid: uuid.into() });
        }
        self.nvml.reset_locked_clocks(uuid, domain)?;
        Ok(domain.clocks(&self.nvml.facts(uuid)?).clone())
    }

    /// Set persistence mode and read it back. Returns the previous value.
    pub fn set_persistence(&self, uuid: &str, on: bool) -> Result<Option<bool>, ControlError> {
        let before = self.nvml.facts(uuid)?.persistence_mode;
        self.nvml.set_persistence(uuid, on)?;
        let after = self.nvml.facts(uuid)?.persistence_mode;
        if after != Some(on) {
            return Err(ControlError::ReadBack {
                uuid: uuid.into(),
                what: "persistence mode".into(),
                expected: on.to_string(),
                observed: after
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| "unknown".into()),
            });
        }
        Ok(before)
    }
}

/// An in-memory NVML for tests: it behaves like the driver (a lock narrows the P-state range
/// and holds the current clock), can refuse calls with a chosen NVML error, and logs calls.
#[derive(Debug, Default)]
pub struct MockNvml {
    pub gpus: RefCell<BTreeMap<String, GpuFacts>>,
    /// Calls to refuse: NVML function name -> error (`NoPermission`, `NotSupported`, ...).
    pub refuse: RefCell<BTreeMap<String, ControlError>>,
    /// Clocks a lock actually reaches (emulates a GPU that cannot hold the requested clock).
    pub reachable_mhz: RefCell<BTreeMap<(String, ClockDomain), u32>>,
    /// Persistence writes the driver accepts but ignores (read-back then differs).
    pub ignore_persistence: RefCell<bool>,
    /// What an accepted lock changes in what NVML reports (default: range and clock).
    pub lock_shows: RefCell<LockShows>,
    pub calls: RefCell<Vec<String>>,
    original: RefCell<BTreeMap<(String, ClockDomain), DomainClocks>>,
}

/// How a lock shows in the mock's facts: drivers differ, and a test must be able to make a
/// lock that NVML's readings do not reveal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LockShows {
    /// The P-state range narrows to the lock and the clock is held (what daqtune expects).
    #[default]
    RangeAndClock,
    /// Only the current clock moves; the reported P-state range stays as it was.
    ClockOnly,
    /// Nothing NVML reports changes (the lock is in place, or silently ignored).
    Nothing,
}

impl MockNvml {
    pub fn new(gpus: impl IntoIterator<Item = GpuFacts>) -> Self {
        let m = MockNvml::default();
        for g in gpus {
            m.gpus.borrow_mut().insert(g.uuid.clone(), g);
        }
        m
    }

    pub fn refuse_call(&self, call: &str, err: ControlError) {
        self.refuse.borrow_mut().insert(call.into(), err);
    }

    fn gate(&self, call: &str, uuid: &str) -> Result<(), ControlError> {
        self.calls.borrow_mut().push(format!("{call}({uuid})"));
        if let Some(e) = self.refuse.borrow().get(call) {
            return Err(e.clone());
        }
        if !self.gpus.borrow().contains_key(uuid) {
            return Err(ControlError::NoSuchGpu { uuid: uuid.into() });
        }
        Ok(())
    }

    fn call_name(domain: ClockDomain, set: bool) -> &'static str {
        match (domain, set) {
            (ClockDomain::Sm, true) => "nvmlDeviceSetGpuLockedClocks",
            (ClockDomain::Sm, false) => "nvmlDeviceResetGpuLockedClocks",
            (ClockDomain::Memory, true) => "nvmlDeviceSetMemoryLockedClocks",
            (ClockDomain::Memory, false) => "nvmlDeviceResetMemoryLockedClocks",
        }
    }
}

fn domain_mut(g: &mut GpuFacts, d: ClockDomain) -> &mut DomainClocks {
    match d {
        ClockDomain::Sm => &mut g.sm_clock,
        ClockDomain::Memory => &mut g.memory_clock,
    }
}

impl NvmlControl for MockNvml {
    fn facts(&self, uuid: &str) -> Result<GpuFacts, ControlError> {
        self.gpus
            .borrow()
            .get(uuid)
            .cloned()
            .ok_or_else(|| ControlError::NoSuchGpu { uuid: uuid.into() })
    }

    fn set_locked_clocks(
        &self,
        uuid: &str,
        domain: ClockDomain,
        min_mhz: u32,
        max_mhz: u32,
    ) -> Result<(), ControlError> {
        let call = Self::call_name(domain, true);
        self.gate(call, uuid)?;
        let mut gpus = self.gpus.borrow_mut();
        let g = gpus
            .get_mut(uuid)
            .ok_or_else(|| ControlError::NoSuchGpu { uuid: uuid.into() })?;
        if domain == ClockDomain::Memory && g.memory_clock_domain == Some(false) {
            return Err(ControlError::NotSupported {
                call: call.into(),
                uuid: uuid.into(),
            });
        }
        let key = (uuid.to_string(), domain);
        let reach = self.reachable_mhz.borrow().get(&key).copied();
        let shows = *self.lock_shows.borrow();
        let c = domain_mut(g, domain);
        self.original
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| c.clone());
        if shows == LockShows::RangeAndClock {
            c.pstate_min_mhz = Some(reach.unwrap_or(min_mhz).min(min_mhz));
            c.pstate_max_mhz = Some(max_mhz);
        }
        if shows != LockShows::Nothing {
            c.current_mhz = Some(reach.unwrap_or(max_mhz).min(max_mhz));
        }
        Ok(())
    }

    fn reset_locked_clocks(&self, uuid: &str, domain: ClockDomain) -> Result<(), ControlError> {
        self.gate(Self::call_name(domain, false), uuid)?;
        if let Some(orig) = self
            .original
            .borrow_mut()
            .remove(&(uuid.to_string(), domain))
        {
            if let Some(g) = self.gpus.borrow_mut().get_mut(uuid) {
                *domain_mut(g, domain) = orig;
            }
        }
        Ok(())
    }

    fn set_persistence(&self, uuid: &str, on: bool) -> Result<(), ControlError> {
        self.gate("nvmlDeviceSetPersistenceMode", uuid)?;
        if *self.ignore_persistence.borrow() {
            return Ok(());
        }
        if let Some(g) = self.gpus.borrow_mut().get_mut(uuid) {
            g.persistence_mode = Some(on);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a6000() -> GpuFacts {
        GpuFacts {
            uuid: "GPU-a6000".into(),
            name: Some("NVIDIA RTX A6000".into()),
            persistence_mode: Some(false),
            memory_clock_domain: Some(true),
            sm_clock: DomainClocks {
                current_mhz: Some(420),
                max_mhz: Some(2100),
                pstate_min_mhz: Some(210),
                pstate_max_mhz: Some(2100),
                ..Default::default()
            },
            memory_clock: DomainClocks {
                current_mhz: Some(405),
                max_mhz: Some(8001),
                pstate_min_mhz: Some(405),
                pstate_max_mhz: Some(8001),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn gb10() -> GpuFacts {
        GpuFacts {
            uuid: "GPU-gb10".into(),
            memory_clock_domain: Some(false),
            sm_clock: DomainClocks {
                current_mhz: Some(208),
                max_mhz: Some(3003),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn lock_reads_back_and_unlock_restores() {
        let c = GpuControl::new(MockNvml::new([a6000()]), 250);
        let out = c.lock_at_max("GPU-a6000", ClockDomain::Sm).expect("locked");
        assert_eq!(out.target_mhz, 2100);
        assert!(out.verified, "{}", out.message);
        assert!(!out.previously_locked);
        assert_eq!(out.before.current_mhz, Some(420));
        assert_eq!(out.after.current_mhz, Some(2100));
        let m = c
            .lock_at_max("GPU-a6000", ClockDomain::Memory)
            .expect("locked");
        assert_eq!(m.target_mhz, 8001);
        // Re-locking daqtune's own lock at the maximum is not someone else's lock.
        let again = c.lock_at_max("GPU-a6000", ClockDomain::Sm).expect("locked");
        assert!(!again.previously_locked);
        // Someone else's lock at 1500 MHz is seen before and reported by the lock.
        c.nvml
            .set_locked_clocks("GPU-a6000", ClockDomain::Sm, 1500, 1500)
            .expect("foreign lock");
        assert_eq!(
            c.existing_lock("GPU-a6000", ClockDomain::Sm).expect("read"),
            Some((1500, 1500))
        );
        let over = c.lock_at_max("GPU-a6000", ClockDomain::Sm).expect("locked");
        assert!(over.previously_locked);
        assert_eq!(over.before.pstate_min_mhz, Some(1500));
        let back = c.unlock("GPU-a6000", ClockDomain::Sm).expect("unlocked");
        assert_eq!(back.current_mhz, Some(420));
        assert_eq!(back.pstate_min_mhz, Some(210));
    }

    #[test]
    fn lock_that_does_not_hold_is_reported_unverified() {
        let mock = MockNvml::new([a6000()]);
        mock.reachable_mhz
            .borrow_mut()
            .insert(("GPU-a6000".into(), ClockDomain::Sm), 1500);
        let c = GpuControl::new(mock, 250);
        let out = c
            .lock_at_max("GPU-a6000", ClockDomain::Sm)
            .expect("accepted");
        assert!(!out.verified);
        assert!(out.message.contains("1500 MHz"), "{}", out.message);
        // Within tolerance (IGX: 1920 held for 2100) counts as held.
        let mock = MockNvml::new([a6000()]);
        mock.reachable_mhz
            .borrow_mut()
            .insert(("GPU-a6000".into(), ClockDomain::Sm), 1920);
        let c = GpuControl::new(mock, 250);
        assert!(
            c.lock_at_max("GPU-a6000", ClockDomain::Sm)
                .expect("ok")
                .verified
        );
    }

    #[test]
    fn refusals_have_clear_messages() {
        let mock = MockNvml::new([a6000()]);
        mock.refuse_call(
            "nvmlDeviceSetGpuLockedClocks",
            ControlError::NoPermission {
                call: "nvmlDeviceSetGpuLockedClocks".into(),
                uuid: "GPU-a6000".into(),
            },
        );
        let c = GpuControl::new(mock, 250);
        let e = c
            .lock_at_max("GPU-a6000", ClockDomain::Sm)
            .expect_err("refused");
        assert!(e.to_string().contains("NVML_ERROR_NO_PERMISSION"), "{e}");
        assert!(e.to_string().contains("run as root"), "{e}");

        let mock = MockNvml::new([a6000()]);
        mock.refuse_call(
            "nvmlDeviceSetPersistenceMode",
            ControlError::NotSupported {
                call: "nvmlDeviceSetPersistenceMode".into(),
                uuid: "GPU-a6000".into(),
            },
        );
        let c = GpuControl::new(mock, 250);
        let e = c.set_persistence("GPU-a6000", true).expect_err("refused");
        assert!(e.to_string().contains("NVML_ERROR_NOT_SUPPORTED"), "{e}");
    }

    #[test]
    fn gb10_memory_lock_refused_sm_lock_works() {
        let c = GpuControl::new(MockNvml::new([gb10()]), 250);
        let e = c
            .lock_at_max("GPU-gb10", ClockDomain::Memory)
            .expect_err("no domain");
        assert!(matches!(e, ControlError::NoMemoryDomain { .. }));
        let out = c.lock_at_max("GPU-gb10", ClockDomain::Sm).expect("sm");
        assert_eq!(out.target_mhz, 3003);
        // No driver call was made for the memory domain.
        assert!(!c
            .nvml
            .calls
            .borrow()
            .iter()
            .any(|s| s.starts_with("nvmlDeviceSetMemoryLockedClocks")));
    }

    #[test]
    fn foreign_lock_shapes() {
        let dc = |lo, hi| DomainClocks {
            pstate_min_mhz: Some(lo),
            pstate_max_mhz: Some(hi),
            ..Default::default()
        };
        // Unlocked range, daqtune's own lock, HBM's fixed clock: nothing to warn about.
        assert_eq!(foreign_lock(&dc(345, 1980), 1980, 250), None);
        assert_eq!(foreign_lock(&dc(1980, 1980), 1980, 250), None);
        assert_eq!(foreign_lock(&dc(3201, 3201), 3201, 250), None);
        // Locked low, capped, or held near the maximum by someone else.
        assert_eq!(foreign_lock(&dc(1000, 1000), 1980, 250), Some((1000, 1000)));
        assert_eq!(foreign_lock(&dc(345, 1500), 1980, 250), Some((345, 1500)));
        assert_eq!(foreign_lock(&dc(1900, 1980), 1980, 250), Some((1900, 1980)));
        assert_eq!(foreign_lock(&DomainClocks::default(), 1980, 250), None);
    }

    #[test]
    fn persistence_read_back() {
        let c = GpuControl::new(MockNvml::new([a6000()]), 250);
        assert_eq!(
            c.set_persistence("GPU-a6000", true).expect("set"),
            Some(false)
        );
        assert_eq!(
            c.nvml.facts("GPU-a6000").expect("facts").persistence_mode,
            Some(true)
        );
        let mock = MockNvml::new([a6000()]);
        *mock.ignore_persistence.borrow_mut() = true;
        let c = GpuControl::new(mock, 250);
        let e = c.set_persistence("GPU-a6000", true).expect_err("read-back");
        assert!(matches!(e, ControlError::ReadBack { .. }), "{e}");
    }

    #[test]
    fn unknown_gpu_and_missing_max() {
        let c = GpuControl::new(MockNvml::new([gb10()]), 250);
        assert!(matches!(
            c.lock_at_max("GPU-nope", ClockDomain::Sm),
            Err(ControlError::NoSuchGpu { .. })
        ));
        let mut g = gb10();
        g.sm_clock.max_mhz = None;
        let c = GpuControl::new(MockNvml::new([g]), 250);
        assert!(matches!(
            c.lock_at_max("GPU-gb10", ClockDomain::Sm),
            Err(ControlError::NoMaxClock { .. })
        ));
    }

    /// A busy GPU boosting to its maximum looks exactly like a locked one by its clock: a
    /// lock that NVML's readings do not show must not be reported as verified (issue 18).
    #[test]
    fn busy_gpu_at_its_maximum_is_not_called_locked() {
        let busy = |g: GpuFacts| GpuFacts {
            utilization_pct: Some(100),
            clock_event_reasons: Some(0),
            sm_clock: DomainClocks {
                current_mhz: Some(2100),
                ..g.sm_clock.clone()
            },
            ..g
        };
        for shows in [LockShows::Nothing, LockShows::ClockOnly] {
            let mock = MockNvml::new([busy(a6000())]);
            *mock.lock_shows.borrow_mut() = shows;
            let c = GpuControl::new(mock, 250);
            let out = c
                .lock_at_max("GPU-a6000", ClockDomain::Sm)
                .expect("accepted");
            assert_eq!(out.after.current_mhz, Some(2100));
            assert!(!out.verified, "{shows:?}: {}", out.message);
            assert_eq!(out.evidence, None);
            assert!(out.message.contains("busy"), "{}", out.message);
            assert!(out.message.contains("100% utilisation"), "{}", out.message);
        }
        // The same busy GPU whose lock narrows the P-state range: the lock shows itself.
        let c = GpuControl::new(MockNvml::new([busy(a6000())]), 250);
        let out = c.lock_at_max("GPU-a6000", ClockDomain::Sm).expect("locked");
        assert!(out.verified, "{}", out.message);
        assert_eq!(out.evidence, Some(LockEvidence::Floor { floor_mhz: 2100 }));
    }

    #[test]
    fn an_idle_gpu_held_at_the_maximum_shows_the_lock() {
        let idle = GpuFacts {
            utilization_pct: Some(0),
            clock_event_reasons: Some(0x1),
            ..a6000()
        };
        // The lock raises the idle GPU's clock (range not reported as narrowed): verified.
        let mock = MockNvml::new([idle.clone()]);
        *mock.lock_shows.borrow_mut() = LockShows::ClockOnly;
        let out = GpuControl::new(mock, 250)
            .lock_at_max("GPU-a6000", ClockDomain::Sm)
            .expect("locked");
        assert!(out.verified, "{}", out.message);
        assert_eq!(
            out.evidence,
            Some(LockEvidence::IdleAtMax { current_mhz: 2100 })
        );
        // Accepted but without effect: the idle GPU stays at 420 MHz.
        let mock = MockNvml::new([idle]);
        *mock.lock_shows.borrow_mut() = LockShows::Nothing;
        let out = GpuControl::new(mock, 250)
            .lock_at_max("GPU-a6000", ClockDomain::Sm)
            .expect("accepted");
        assert!(!out.verified);
        assert!(out.message.contains("420 MHz"), "{}", out.message);
    }

    #[test]
    fn evidence_never_comes_from_a_busy_clock_alone() {
        let mut g = a6000();
        g.sm_clock.current_mhz = Some(2100);
        g.utilization_pct = Some(97);
        assert_eq!(lock_evidence(&g, ClockDomain::Sm, 2100, 250), None);
        // Idleness unknown: no evidence either.
        g.utilization_pct = None;
        assert_eq!(lock_evidence(&g, ClockDomain::Sm, 2100, 250), None);
        g.utilization_pct = Some(0);
        assert_eq!(
            lock_evidence(&g, ClockDomain::Sm, 2100, 250),
            Some(LockEvidence::IdleAtMax { current_mhz: 2100 })
        );
        // HBM's fixed clock: the floor is the maximum.
        assert_eq!(
            lock_evidence(&g, ClockDomain::Memory, 8001, 250),
            None,
            "the A6000's GDDR range is 405-8001"
        );
        g.memory_clock.pstate_min_mhz = Some(8001);
        assert_eq!(
            lock_evidence(&g, ClockDomain::Memory, 8001, 250),
            Some(LockEvidence::Floor { floor_mhz: 8001 })
        );
        assert_eq!(is_idle(&GpuFacts::default()), None);
    }
}
