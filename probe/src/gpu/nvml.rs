//! NVML through its C ABI, loaded at run time. Only the calls daqtune needs; every `unsafe`
//! is here, behind [`Nvml`]'s safe methods.

use super::cache::NvmlStatic;
use super::control::{ClockDomain, ControlError, NvmlControl};
use super::nvlink::{NvLink, NvLinkView, RemoteKind};
use super::{
    c_buf_to_string, dl, normalize_bus_id, Bar1, DomainClocks, GpuFacts, GpuHealth, LibStatus,
    RemappedRows,
};
use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CStr, CString};
use std::time::Instant;

type Ret = c_int;
type Dev = *mut c_void;

const SUCCESS: Ret = 0;
pub(crate) const ERROR_NOT_SUPPORTED: Ret = 3;
pub(crate) const ERROR_NO_PERMISSION: Ret = 4;
const ERROR_INVALID_ARGUMENT: Ret = 2;

// nvmlClockType_t
const CLOCK_SM: c_int = 1;
const CLOCK_MEM: c_int = 2;
// nvmlPstates_t: 0..=15, 32 = unknown
const PSTATE_UNKNOWN: c_int = 32;
// nvmlTemperatureSensors_t, nvmlTemperatureThresholds_t
const TEMPERATURE_GPU: c_int = 0;
const TEMPERATURE_THRESHOLD_SHUTDOWN: c_int = 0;
const TEMPERATURE_THRESHOLD_SLOWDOWN: c_int = 1;
// nvmlMemoryErrorType_t, nvmlEccCounterType_t
const MEMORY_ERROR_CORRECTED: c_int = 0;
const MEMORY_ERROR_UNCORRECTED: c_int = 1;
const ECC_VOLATILE: c_int = 0;
const ECC_AGGREGATE: c_int = 1;
// nvmlPageRetirementCause_t
const RETIRE_MULTIPLE_SBE: c_int = 0;
const RETIRE_DBE: c_int = 1;
const ERROR_INSUFFICIENT_SIZE: Ret = 7;

/// NVML_NVLINK_MAX_LINKS in nvml.h (18 since r450, Hopper's count; the 580 header on the lent
/// H200 machines says 18).
const NVLINK_MAX_LINKS: u32 = 18;
/// nvmlEnableState_t
const FEATURE_ENABLED: c_uint = 1;

const DRIVER_VERSION_LEN: usize = 80;
const NAME_LEN: usize = 96;
const UUID_LEN: usize = 96;

/// nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it.
#[repr(C)]
struct PciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_subsystem_id: c_uint,
    bus_id: [c_char; 32],
}

/// nvmlBAR1Memory_t
#[repr(C)]
struct Bar1Raw {
    total: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

/// nvmlMemory_t (v1: what nvmlDeviceGetMemoryInfo writes)
#[repr(C)]
struct MemoryRaw {
    total: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

/// nvmlUtilization_t
#[repr(C)]
struct Utilization {
    gpu: c_uint,
    memory: c_uint,
}

type FnVoid = unsafe extern "C" fn() -> Ret;
type FnInitFlags = unsafe extern "C" fn(c_uint) -> Ret;
type FnErrStr = unsafe extern "C" fn(Ret) -> *const c_char;
type FnSysStr = unsafe extern "C" fn(*mut c_char, c_uint) -> Ret;
type FnCount = unsafe extern "C" fn(*mut c_uint) -> Ret;
type FnByIndex = unsafe extern "C" fn(c_uint, *mut Dev) -> Ret;
type FnByUuid = unsafe extern "C" fn(*const c_char, *mut Dev) -> Ret;
type FnDevStr = unsafe extern "C" fn(Dev, *mut c_char, c_uint) -> Ret;
type FnPci = unsafe extern "C" fn(Dev, *mut PciInfo) -> Ret;
type FnDevInt = unsafe extern "C" fn(Dev, *mut c_int) -> Ret;
type FnDevUint = unsafe extern "C" fn(Dev, *mut c_uint) -> Ret;
type FnClock = unsafe extern "C" fn(Dev, c_int, *mut c_uint) -> Ret;
type FnU64 = unsafe extern "C" fn(Dev, *mut c_ulonglong) -> Ret;
type FnMinMax = unsafe extern "C" fn(Dev, c_int, c_int, *mut c_uint, *mut c_uint) -> Ret;
type FnBar1 = unsafe extern "C" fn(Dev, *mut Bar1Raw) -> Ret;
type FnUtil = unsafe extern "C" fn(Dev, *mut Utilization) -> Ret;
type FnSetInt = unsafe extern "C" fn(Dev, c_int) -> Ret;
type FnSetRange = unsafe extern "C" fn(Dev, c_uint, c_uint) -> Ret;
type FnDev = unsafe extern "C" fn(Dev) -> Ret;
type FnLinkUint = unsafe extern "C" fn(Dev, c_uint, *mut c_uint) -> Ret;
type FnLinkPci = unsafe extern "C" fn(Dev, c_uint, *mut PciInfo) -> Ret;
type FnTwoUint = unsafe extern "C" fn(Dev, *mut c_uint, *mut c_uint) -> Ret;
type FnEcc = unsafe extern "C" fn(Dev, c_int, c_int, *mut c_ulonglong) -> Ret;
type FnRemap = unsafe extern "C" fn(Dev, *mut c_uint, *mut c_uint, *mut c_uint, *mut c_uint) -> Ret;
type FnRetired = unsafe extern "C" fn(Dev, c_int, *mut c_uint, *mut c_ulonglong) -> Ret;
type FnMemory = unsafe extern "C" fn(Dev, *mut MemoryRaw) -> Ret;

/// The resolved entry points. Optional ones are absent on older drivers; their facts are then
/// reported as unavailable with that reason.
struct Api {
    init: FnVoid,
    init_with_flags: Option<FnInitFlags>,
    shutdown: FnVoid,
    error_string: Option<FnErrStr>,
    driver_version: Option<FnSysStr>,
    nvml_version: Option<FnSysStr>,
    count: FnCount,
    by_index: FnByIndex,
    by_uuid: Option<FnByUuid>,
    name: Option<FnDevStr>,
    uuid: FnDevStr,
    pci: Option<FnPci>,
    persistence: Option<FnDevInt>,
    brand: Option<FnDevInt>,
    pstate: Option<FnDevInt>,
    clock: Option<FnClock>,
    max_clock: Option<FnClock>,
    app_clock: Option<FnClock>,
    default_app_clock: Option<FnClock>,
    event_reasons: Option<FnU64>,
    minmax_pstate: Option<FnMinMax>,
    bar1: Option<FnBar1>,
    utilization: Option<FnUtil>,
    max_link_gen: Option<FnDevUint>,
    max_link_width: Option<FnDevUint>,
    gpu_max_link_gen: Option<FnDevUint>,
    cur_link_gen: Option<FnDevUint>,
    cur_link_width: Option<FnDevUint>,
    set_persistence: Option<FnSetInt>,
    set_gpu_locked: Option<FnSetRange>,
    reset_gpu_locked: Option<FnDev>,
    set_mem_locked: Option<FnSetRange>,
    reset_mem_locked: Option<FnDev>,
    nvlink_state: Option<FnLinkUint>,
    nvlink_remote_pci: Option<FnLinkPci>,
    nvlink_remote_type: Option<FnLinkUint>,
    temperature: Option<FnClock>,
    temperature_threshold: Option<FnClock>,
    power_usage: Option<FnDevUint>,
    enforced_power_limit: Option<FnDevUint>,
    ecc_mode: Option<FnTwoUint>,
    total_ecc: Option<FnEcc>,
    remapped_rows: Option<FnRemap>,
    retired_pages: Option<FnRetired>,
    retired_pending: Option<FnDevUint>,
    architecture: Option<FnDevUint>,
    memory: Option<FnMemory>,
}

impl Api {
    fn load() -> Result<Api, String> {
        let lib = dl::nvml()?;
        // SAFETY: for every `dl::sym` call below, the type alias above is the signature the
        // NVML header (nvml.h, r535-r580) declares for that symbol.
        unsafe {
            Ok(Api {
                init: dl::sym(lib, "nvmlInit_v2")?,
                init_with_flags: dl::sym(lib, "nvmlInitWithFlags").ok(),
                shutdown: dl::sym(lib, "nvmlShutdown")?,
                error_string: dl::sym(lib, "nvmlErrorString").ok(),
                driver_version: dl::sym(lib, "nvmlSystemGetDriverVersion").ok(),
                nvml_version: dl::sym(lib, "nvmlSystemGetNVMLVersion").ok(),
                count: dl::sym(lib, "nvmlDeviceGetCount_v2")?,
                by_index: dl::sym(lib, "nvmlDeviceGetHandleByIndex_v2")?,
                by_uuid: dl::sym(lib, "nvmlDeviceGetHandleByUUID").ok(),
                name: dl::sym(lib, "nvmlDeviceGetName").ok(),
                uuid: dl::sym(lib, "nvmlDeviceGetUUID")?,
                pci: dl::sym(lib, "nvmlDeviceGetPciInfo_v3").ok(),
                persistence: dl::sym(lib, "nvmlDeviceGetPersistenceMode").ok(),
                brand: dl::sym(lib, "nvmlDeviceGetBrand").ok(),
                pstate: dl::sym(lib, "nvmlDeviceGetPerformanceState").ok(),
                clock: dl::sym(lib, "nvmlDeviceGetClockInfo").ok(),
                max_clock: dl::sym(lib, "nvmlDeviceGetMaxClockInfo").ok(),
                app_clock: dl::sym(lib, "nvmlDeviceGetApplicationsClock").ok(),
                default_app_clock: dl::sym(lib, "nvmlDeviceGetDefaultApplicationsClock").ok(),
                // Renamed in r535; the old name stays as an alias in newer drivers.
                event_reasons: dl::sym(lib, "nvmlDeviceGetCurrentClocksEventReasons")
                    .or_else(|_| dl::sym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons"))
                    .ok(),
                minmax_pstate: dl::sym(lib, "nvmlDeviceGetMinMaxClockOfPState").ok(),
                bar1: dl::sym(lib, "nvmlDeviceGetBAR1MemoryInfo").ok(),
                utilization: dl::sym(lib, "nvmlDeviceGetUtilizationRates").ok(),
                max_link_gen: dl::sym(lib, "nvmlDeviceGetMaxPcieLinkGeneration").ok(),
                max_link_width: dl::sym(lib, "nvmlDeviceGetMaxPcieLinkWidth").ok(),
                gpu_max_link_gen: dl::sym(lib, "nvmlDeviceGetGpuMaxPcieLinkGeneration").ok(),
                cur_link_gen: dl::sym(lib, "nvmlDeviceGetCurrPcieLinkGeneration").ok(),
                cur_link_width: dl::sym(lib, "nvmlDeviceGetCurrPcieLinkWidth").ok(),
                set_persistence: dl::sym(lib, "nvmlDeviceSetPersistenceMode").ok(),
                set_gpu_locked: dl::sym(lib, "nvmlDeviceSetGpuLockedClocks").ok(),
                reset_gpu_locked: dl::sym(lib, "nvmlDeviceResetGpuLockedClocks").ok(),
                set_mem_locked: dl::sym(lib, "nvmlDeviceSetMemoryLockedClocks").ok(),
                reset_mem_locked: dl::sym(lib, "nvmlDeviceResetMemoryLockedClocks").ok(),
                // nvmlEnableState_t and nvmlIntNvLinkDeviceType_t are C enums: int-sized, read
                // into an unsigned int as the header's own examples do.
                nvlink_state: dl::sym(lib, "nvmlDeviceGetNvLinkState").ok(),
                nvlink_remote_pci: dl::sym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2").ok(),
                nvlink_remote_type: dl::sym(lib, "nvmlDeviceGetNvLinkRemoteDeviceType").ok(),
                // The sensor/threshold/type arguments are C enums (int-sized); the readings
                // unsigned ints (degrees C, milliwatts) or unsigned long longs (ECC counts).
                temperature: dl::sym(lib, "nvmlDeviceGetTemperature").ok(),
                temperature_threshold: dl::sym(lib, "nvmlDeviceGetTemperatureThreshold").ok(),
                power_usage: dl::sym(lib, "nvmlDeviceGetPowerUsage").ok(),
                enforced_power_limit: dl::sym(lib, "nvmlDeviceGetEnforcedPowerLimit").ok(),
                ecc_mode: dl::sym(lib, "nvmlDeviceGetEccMode").ok(),
                total_ecc: dl::sym(lib, "nvmlDeviceGetTotalEccErrors").ok(),
                // r460 and later; absent before Ampere's drivers.
                remapped_rows: dl::sym(lib, "nvmlDeviceGetRemappedRows").ok(),
                retired_pages: dl::sym(lib, "nvmlDeviceGetRetiredPages").ok(),
                retired_pending: dl::sym(lib, "nvmlDeviceGetRetiredPagesPendingStatus").ok(),
                architecture: dl::sym(lib, "nvmlDeviceGetArchitecture").ok(),
                memory: dl::sym(lib, "nvmlDeviceGetMemoryInfo").ok(),
            })
        }
    }
}

/// An NVML call that returned an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlErr {
    pub code: i32,
    pub text: String,
}

impl std::fmt::Display for NvmlErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.text, error_name(self.code))
    }
}

/// The header's constant name for an nvmlReturn_t.
pub fn error_name(code: i32) -> &'static str {
    match code {
        0 => "NVML_SUCCESS",
        1 => "NVML_ERROR_UNINITIALIZED",
        2 => "NVML_ERROR_INVALID_ARGUMENT",
        3 => "NVML_ERROR_NOT_SUPPORTED",
        4 => "NVML_ERROR_NO_PERMISSION",
        5 => "NVML_ERROR_ALREADY_INITIALIZED",
        6 => "NVML_ERROR_NOT_FOUND",
        7 => "NVML_ERROR_INSUFFICIENT_SIZE",
        8 => "NVML_ERROR_INSUFFICIENT_POWER",
        9 => "NVML_ERROR_DRIVER_NOT_LOADED",
        10 => "NVML_ERROR_TIMEOUT",
        12 => "NVML_ERROR_LIBRARY_NOT_FOUND",
        13 => "NVML_ERROR_FUNCTION_NOT_FOUND",
        15 => "NVML_ERROR_GPU_IS_LOST",
        16 => "NVML_ERROR_RESET_REQUIRED",
        17 => "NVML_ERROR_OPERATING_SYSTEM",
        18 => "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        19 => "NVML_ERROR_IN_USE",
        24 => "NVML_ERROR_FREQ_NOT_SUPPORTED",
        26 => "NVML_ERROR_DEPRECATED",
        28 => "NVML_ERROR_GPU_NOT_FOUND",
        29 => "NVML_ERROR_INVALID_STATE",
        _ => "NVML_ERROR_UNKNOWN",
    }
}

/// An initialised NVML. Shut down on drop (NVML counts init/shutdown pairs).
pub struct Nvml {
    api: Api,
}

/// `no-attach`: initialise NVML with nvmlInitWithFlags(NVML_INIT_FLAG_NO_ATTACH), which does
/// not attach the GPUs at init, instead of nvmlInit_v2 (to measure what attaching costs and
/// which queries still answer; docs/performance.md). Anything else: nvmlInit_v2.
pub const INIT_ENV: &str = "DAQTUNE_NVML_INIT";
/// nvml.h's NVML_INIT_FLAG_NO_ATTACH.
const INIT_FLAG_NO_ATTACH: c_uint = 2;

impl Nvml {
    pub fn open() -> Result<Nvml, String> {
        let api = Api::load()?;
        let no_attach = std::env::var(INIT_ENV).as_deref() == Ok("no-attach");
        let (r, call) = match (no_attach, api.init_with_flags) {
            // SAFETY: nvmlInitWithFlags takes a flag word and may be called from any thread;
            // it pairs with nvmlShutdown as nvmlInit_v2 does.
            (true, Some(f)) => (unsafe { f(INIT_FLAG_NO_ATTACH) }, "nvmlInitWithFlags"),
            // SAFETY: nvmlInit_v2 takes no arguments and may be called from any thread.
            _ => (unsafe { (api.init)() }, "nvmlInit_v2"),
        };
        let nvml = Nvml { api };
        if r != SUCCESS {
            let e = nvml.err(r);
            // Init failed: there is no matching shutdown to make.
            std::mem::forget(nvml);
            return Err(format!("{call} failed: {e}"));
        }
        Ok(nvml)
    }

    fn err(&self, code: Ret) -> NvmlErr {
        let text = match self.api.error_string {
            // SAFETY: nvmlErrorString returns a pointer to a static NUL-terminated string
            // (or NULL), valid for any return code and even before init.
            Some(f) => unsafe {
                let p = f(code);
                if p.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(p).to_string_lossy().into_owned()
                }
            },
            None => String::new(),
        };
        NvmlErr {
            code,
            text: if text.is_empty() {
                error_name(code).to_string()
            } else {
                text
            },
        }
    }

    fn check(&self, r: Ret) -> Result<(), NvmlErr> {
        if r == SUCCESS {
            Ok(())
        } else {
            Err(self.err(r))
        }
    }

    fn missing(name: &str) -> NvmlErr {
        NvmlErr {
            code: 13,
            text: format!("{name} is not in this driver's NVML"),
        }
    }

    fn sys_string(&self, f: Option<FnSysStr>, what: &str) -> Result<String, NvmlErr> {
        let f = f.ok_or_else(|| Self::missing(what))?;
        let mut buf = [0u8; DRIVER_VERSION_LEN];
        // SAFETY: the buffer is writable for the length passed; NVML NUL-terminates within it.
        let r = unsafe { f(buf.as_mut_ptr().cast(), buf.len() as c_uint) };
        self.check(r)?;
        Ok(c_buf_to_string(&buf))
    }

    pub fn driver_version(&self) -> Result<String, NvmlErr> {
        self.sys_string(self.api.driver_version, "nvmlSystemGetDriverVersion")
    }

    pub fn nvml_version(&self) -> Result<String, NvmlErr> {
        self.sys_string(self.api.nvml_version, "nvmlSystemGetNVMLVersion")
    }

    pub fn count(&self) -> Result<u32, NvmlErr> {
        let mut n: c_uint = 0;
        // SAFETY: `n` is a valid out pointer.
        self.check(unsafe { (self.api.count)(&mut n) })?;
        Ok(n)
    }

    fn handle(&self, index: u32) -> Result<Dev, NvmlErr> {
        let mut d: Dev = std::ptr::null_mut();
        // SAFETY: `d` is a valid out pointer; the handle stays valid until nvmlShutdown,
        // which only happens when `self` drops.
        self.check(unsafe { (self.api.by_index)(index, &mut d) })?;
        Ok(d)
    }

    fn handle_by_uuid(&self, uuid: &str) -> Result<Dev, NvmlErr> {
        let f = self
            .api
            .by_uuid
            .ok_or_else(|| Self::missing("nvmlDeviceGetHandleByUUID"))?;
        let c = CString::new(uuid).map_err(|_| NvmlErr {
            code: 2,
            text: "UUID contains a NUL byte".into(),
        })?;
        let mut d: Dev = std::ptr::null_mut();
        // SAFETY: `c` is a NUL-terminated string alive for the call; `d` a valid out pointer.
        self.check(unsafe { f(c.as_ptr(), &mut d) })?;
        Ok(d)
    }

    fn dev_string(
        &self,
        f: Option<FnDevStr>,
        d: Dev,
        len: usize,
        what: &str,
    ) -> Result<String, NvmlErr> {
        let f = f.ok_or_else(|| Self::missing(what))?;
        let mut buf = vec![0u8; len];
        // SAFETY: `d` came from NVML; the buffer is writable for the length passed.
        self.check(unsafe { f(d, buf.as_mut_ptr().cast(), len as c_uint) })?;
        Ok(c_buf_to_string(&buf))
    }

    fn dev_int(&self, f: Option<FnDevInt>, d: Dev, what: &str) -> Result<i32, NvmlErr> {
        let f = f.ok_or_else(|| Self::missing(what))?;
        let mut v: c_int = 0;
        // SAFETY: `d` came from NVML; `v` is a valid out pointer for an enum-sized int.
        self.check(unsafe { f(d, &mut v) })?;
        Ok(v)
    }

    fn dev_uint(&self, f: Option<FnDevUint>, d: Dev, what: &str) -> Result<u32, NvmlErr> {
        let f = f.ok_or_else(|| Self::missing(what))?;
        let mut v: c_uint = 0;
        // SAFETY: `d` came from NVML; `v` is a valid out pointer.
        self.check(unsafe { f(d, &mut v) })?;
        Ok(v)
    }

    fn clock(&self, f: Option<FnClock>, d: Dev, ty: c_int, what: &str) -> Result<u32, NvmlErr> {
        let f = f.ok_or_else(|| Self::missing(what))?;
        let mut v: c_uint = 0;
        // SAFETY: `d` came from NVML, `ty` is a valid nvmlClockType_t; `v` a valid out pointer.
        self.check(unsafe { f(d, ty, &mut v) })?;
        Ok(v)
    }

    fn pstate_range(&self, d: Dev, ty: c_int, pstate: c_int) -> Result<(u32, u32), NvmlErr> {
        let f = self
            .api
            .minmax_pstate
            .ok_or_else(|| Self::missing("nvmlDeviceGetMinMaxClockOfPState"))?;
        let (mut lo, mut hi): (c_uint, c_uint) = (0, 0);
        // SAFETY: `d` came from NVML; both out pointers are valid.
        self.check(unsafe { f(d, ty, pstate, &mut lo, &mut hi) })?;
        Ok((lo, hi))
    }

    fn domain(
        &self,
        d: Dev,
        ty: c_int,
        pstate: Option<i32>,
        key: &str,
        statics: bool,
        un: &mut Unavail,
    ) -> DomainClocks {
        let mut c = DomainClocks {
            current_mhz: un.take(&format!("{key}.current"), || {
                self.clock(self.api.clock, d, ty, "nvmlDeviceGetClockInfo")
            }),
            applications_mhz: un.take(&format!("{key}.applications"), || {
                self.clock(self.api.app_clock, d, ty, "nvmlDeviceGetApplicationsClock")
            }),
            ..DomainClocks::default()
        };
        if statics {
            c.max_mhz = un.take(&format!("{key}.max"), || {
                self.clock(self.api.max_clock, d, ty, "nvmlDeviceGetMaxClockInfo")
            });
            c.default_applications_mhz = un.take(&format!("{key}.default_applications"), || {
                self.clock(
                    self.api.default_app_clock,
                    d,
                    ty,
                    "nvmlDeviceGetDefaultApplicationsClock",
                )
            });
        }
        if let Some(p) = pstate.filter(|p| *p != PSTATE_UNKNOWN) {
            if let Some((lo, hi)) = un.take(&format!("{key}.pstate_range"), || {
                self.pstate_range(d, ty, p)
            }) {
                c.pstate_min_mhz = Some(lo);
                c.pstate_max_mhz = Some(hi);
            }
        }
        c
    }

    /// Everything NVML says about device `index`; its NVLinks only with `nvlink` (up to 54
    /// calls a GPU that no check needs: `topo` and `snapshot` ask for them, `check` does not).
    /// Where `cached` holds this GPU's static answers (the per-boot cache), only what can move
    /// is asked. Also returns how many NVML calls it made.
    pub fn device_facts(
        &self,
        index: u32,
        nvlink: bool,
        cached: &[NvmlStatic],
    ) -> Result<(GpuFacts, u32), NvmlErr> {
        let trace = std::env::var_os("DAQTUNE_GPU_TRACE").is_some();
        let t = trace.then(Instant::now);
        let d = self.handle(index)?;
        let uuid = self.dev_string(Some(self.api.uuid), d, UUID_LEN, "nvmlDeviceGetUUID")?;
        if let Some(t) = t {
            eprintln!(
                "daqtune gpu trace: gpu {index}: handle+uuid: {:.3} ms",
                t.elapsed().as_secs_f64() * 1e3
            );
        }
        let stat = cached.iter().find(|s| s.uuid.eq_ignore_ascii_case(&uuid));
        let statics = stat.is_none();
        let mut un = Unavail {
            why: BTreeMap::new(),
            trace: trace.then_some(index),
            calls: 2,
        };
        let mut g = GpuFacts {
            uuid,
            nvml_index: Some(index),
            ..GpuFacts::default()
        };
        if statics {
            g.name = un.take("name", || {
                self.dev_string(self.api.name, d, NAME_LEN, "nvmlDeviceGetName")
            });
            g.pci_bus_id = un.take("pci", || self.pci_bus_id(d)).flatten();
            g.brand = un
                .take("brand", || {
                    self.dev_int(self.api.brand, d, "nvmlDeviceGetBrand")
                })
                .map(brand_name);
        }
        g.persistence_mode = un
            .take("persistence_mode", || {
                self.dev_int(self.api.persistence, d, "nvmlDeviceGetPersistenceMode")
            })
            .map(|v| v == 1);
        let pstate = un.take("pstate", || {
            self.dev_int(self.api.pstate, d, "nvmlDeviceGetPerformanceState")
        });
        g.pstate = pstate.filter(|p| *p != PSTATE_UNKNOWN).map(|p| p as u32);
        g.utilization_pct = un.take("utilization", || self.utilization(d));
        g.sm_clock = self.domain(d, CLOCK_SM, pstate, "sm_clock", statics, &mut un);
        g.memory_clock = self.domain(d, CLOCK_MEM, pstate, "memory_clock", statics, &mut un);
        if statics {
            // The memory domain's maximum answered above: a GPU without its own memory clock
            // (GB10's unified memory) says 0 or NOT_SUPPORTED.
            g.memory_clock_domain = match (g.memory_clock.max_mhz, un.why.get("memory_clock.max")) {
                (Some(v), _) => Some(v > 0),
                (None, Some(r)) if r.contains(error_name(ERROR_NOT_SUPPORTED)) => Some(false),
                _ => None,
            };
        }
        g.clock_event_reasons = un.take("clock_event_reasons", || self.event_reasons(d));
        g.bar1 = un.take("bar1", || self.bar1(d));
        if statics {
            g.architecture = un
                .take("architecture", || {
                    self.dev_uint(self.api.architecture, d, "nvmlDeviceGetArchitecture")
                })
                .and_then(architecture_name);
            g.memory_total_mib = un.take("memory_total", || self.memory_total_mib(d));
            g.pcie.max_link_gen = un.take("pcie.max_link_gen", || {
                self.dev_uint(
                    self.api.max_link_gen,
                    d,
                    "nvmlDeviceGetMaxPcieLinkGeneration",
                )
            });
            g.pcie.max_link_width = un.take("pcie.max_link_width", || {
                self.dev_uint(self.api.max_link_width, d, "nvmlDeviceGetMaxPcieLinkWidth")
            });
            g.pcie.gpu_max_link_gen = un.take("pcie.gpu_max_link_gen", || {
                self.dev_uint(
                    self.api.gpu_max_link_gen,
                    d,
                    "nvmlDeviceGetGpuMaxPcieLinkGeneration",
                )
            });
        }
        g.pcie.current_link_gen = un.take("pcie.current_link_gen", || {
            self.dev_uint(
                self.api.cur_link_gen,
                d,
                "nvmlDeviceGetCurrPcieLinkGeneration",
            )
        });
        g.pcie.current_link_width = un.take("pcie.current_link_width", || {
            self.dev_uint(self.api.cur_link_width, d, "nvmlDeviceGetCurrPcieLinkWidth")
        });
        g.health = self.health(d, statics, &mut un);
        if nvlink {
            g.nvlink = un.take("nvlink", || self.nvlinks(d)).flatten();
        }
        if nvlink && g.nvlink.is_none() && !un.why.contains_key("nvlink") {
            un.why.insert(
                "nvlink".into(),
                "no NVLink on this GPU (NVML_ERROR_NOT_SUPPORTED)".into(),
            );
        }
        g.unavailable = un.why;
        if let Some(s) = stat {
            s.apply(&mut g);
        }
        Ok((g, un.calls))
    }

    /// The active links of `d`. `Ok(None)`: the GPU has no NVLink (NOT_SUPPORTED on link 0,
    /// as on PCIe-only boards). Links past the GPU's count answer INVALID_ARGUMENT or
    /// NOT_SUPPORTED: the scan stops there.
    fn nvlinks(&self, d: Dev) -> Result<Option<Vec<NvLink>>, NvmlErr> {
        let state = self
            .api
            .nvlink_state
            .ok_or_else(|| Self::missing("nvmlDeviceGetNvLinkState"))?;
        let mut out = Vec::new();
        for link in 0..NVLINK_MAX_LINKS {
            let mut on: c_uint = 0;
            // SAFETY: `d` came from NVML; `on` is a valid out pointer for an enum-sized int.
            let r = unsafe { state(d, link, &mut on) };
            match r {
                SUCCESS => {}
                ERROR_NOT_SUPPORTED if link == 0 => return Ok(None),
                ERROR_NOT_SUPPORTED | ERROR_INVALID_ARGUMENT => break,
                _ => return Err(self.err(r)),
            }
            if on != FEATURE_ENABLED {
                continue;
            }
            out.push(NvLink {
                link,
                remote_bus_id: self.nvlink_remote_bus(d, link),
                remote_kind: self.nvlink_remote_kind(d, link),
            });
        }
        Ok(Some(out))
    }

    fn nvlink_remote_bus(&self, d: Dev, link: u32) -> Option<String> {
        let f = self.api.nvlink_remote_pci?;
        // SAFETY: PciInfo is plain old data; all-zero is a valid value.
        let mut info: PciInfo = unsafe { std::mem::zeroed() };
        // SAFETY: `d` came from NVML, `link` is below NVML_NVLINK_MAX_LINKS; `info` has the
        // layout nvmlDeviceGetNvLinkRemotePciInfo_v2 writes (nvmlPciInfo_t, as _v3 above).
        if unsafe { f(d, link, &mut info) } != SUCCESS {
            return None;
        }
        let raw: Vec<u8> = info.bus_id.iter().map(|&c| c as u8).collect();
        normalize_bus_id(&c_buf_to_string(&raw))
    }

    fn nvlink_remote_kind(&self, d: Dev, link: u32) -> RemoteKind {
        let Some(f) = self.api.nvlink_remote_type else {
            return RemoteKind::Unknown;
        };
        let mut v: c_uint = 0xff;
        // SAFETY: `d` came from NVML; `v` is a valid out pointer for an enum-sized int.
        if unsafe { f(d, link, &mut v) } != SUCCESS {
            return RemoteKind::Unknown;
        }
        RemoteKind::from_nvml(v)
    }

    /// Bus id and NVLinks of device `index` only (what `topo` needs).
    fn device_nvlinks(&self, index: u32) -> (Option<String>, Result<Option<Vec<NvLink>>, NvmlErr>) {
        let d = match self.handle(index) {
            Ok(d) => d,
            Err(e) => return (None, Err(e)),
        };
        (self.pci_bus_id(d).ok().flatten(), self.nvlinks(d))
    }

    fn pci_bus_id(&self, d: Dev) -> Result<Option<String>, NvmlErr> {
        let f = self
            .api
            .pci
            .ok_or_else(|| Self::missing("nvmlDeviceGetPciInfo_v3"))?;
        // SAFETY: PciInfo is plain old data; all-zero is a valid value.
        let mut info: PciInfo = unsafe { std::mem::zeroed() };
        // SAFETY: `d` came from NVML; `info` has the v3 layout NVML writes.
        self.check(unsafe { f(d, &mut info) })?;
        let raw: Vec<u8> = info.bus_id.iter().map(|&c| c as u8).collect();
        Ok(normalize_bus_id(&c_buf_to_string(&raw)))
    }

    fn utilization(&self, d: Dev) -> Result<u32, NvmlErr> {
        let f = self
            .api
            .utilization
            .ok_or_else(|| Self::missing("nvmlDeviceGetUtilizationRates"))?;
        let mut u = Utilization { gpu: 0, memory: 0 };
        // SAFETY: `d` came from NVML; `u` matches nvmlUtilization_t.
        self.check(unsafe { f(d, &mut u) })?;
        let _ = u.memory;
        Ok(u.gpu)
    }

    /// Temperature, power, ECC and memory-repair readings: about a dozen calls, each of
    /// which may be NOT_SUPPORTED on a given board (the reason is kept under `health.*`).
    fn health(&self, d: Dev, statics: bool, un: &mut Unavail) -> GpuHealth {
        let temp = |ty| {
            self.clock(
                self.api.temperature_threshold,
                d,
                ty,
                "nvmlDeviceGetTemperatureThreshold",
            )
        };
        let ecc = |err, counter| self.total_ecc(d, err, counter);
        GpuHealth {
            temperature_c: un.take("health.temperature", || {
                self.clock(
                    self.api.temperature,
                    d,
                    TEMPERATURE_GPU,
                    "nvmlDeviceGetTemperature",
                )
            }),
            slowdown_temp_c: if statics {
                un.take("health.slowdown_temp", || {
                    temp(TEMPERATURE_THRESHOLD_SLOWDOWN)
                })
            } else {
                None
            },
            shutdown_temp_c: if statics {
                un.take("health.shutdown_temp", || {
                    temp(TEMPERATURE_THRESHOLD_SHUTDOWN)
                })
            } else {
                None
            },
            power_draw_mw: un.take("health.power_draw", || {
                self.dev_uint(self.api.power_usage, d, "nvmlDeviceGetPowerUsage")
            }),
            power_limit_mw: un.take("health.power_limit", || {
                self.dev_uint(
                    self.api.enforced_power_limit,
                    d,
                    "nvmlDeviceGetEnforcedPowerLimit",
                )
            }),
            ecc_enabled: un.take("health.ecc_mode", || self.ecc_mode(d)),
            ecc_volatile_corrected: un.take("health.ecc_volatile_corrected", || {
                ecc(MEMORY_ERROR_CORRECTED, ECC_VOLATILE)
            }),
            ecc_volatile_uncorrected: un.take("health.ecc_volatile_uncorrected", || {
                ecc(MEMORY_ERROR_UNCORRECTED, ECC_VOLATILE)
            }),
            ecc_aggregate_corrected: un.take("health.ecc_aggregate_corrected", || {
                ecc(MEMORY_ERROR_CORRECTED, ECC_AGGREGATE)
            }),
            ecc_aggregate_uncorrected: un.take("health.ecc_aggregate_uncorrected", || {
                ecc(MEMORY_ERROR_UNCORRECTED, ECC_AGGREGATE)
            }),
            retired_pages_sbe: un.take("health.retired_pages_sbe", || {
                self.retired_count(d, RETIRE_MULTIPLE_SBE)
            }),
            retired_pages_dbe: un.take("health.retired_pages_dbe", || {
                self.retired_count(d, RETIRE_DBE)
            }),
            retired_pages_pending: un
                .take("health.retired_pages_pending", || {
                    self.dev_uint(
                        self.api.retired_pending,
                        d,
                        "nvmlDeviceGetRetiredPagesPendingStatus",
                    )
                })
                .map(|v| v == FEATURE_ENABLED),
            remapped_rows: un.take("health.remapped_rows", || self.remapped_rows(d)),
        }
    }

    fn ecc_mode(&self, d: Dev) -> Result<bool, NvmlErr> {
        let f = self
            .api
            .ecc_mode
            .ok_or_else(|| Self::missing("nvmlDeviceGetEccMode"))?;
        let (mut current, mut pending): (c_uint, c_uint) = (0, 0);
        // SAFETY: `d` came from NVML; both out pointers are valid for enum-sized ints.
        self.check(unsafe { f(d, &mut current, &mut pending) })?;
        Ok(current == FEATURE_ENABLED)
    }

    fn total_ecc(&self, d: Dev, err: c_int, counter: c_int) -> Result<u64, NvmlErr> {
        let f = self
            .api
            .total_ecc
            .ok_or_else(|| Self::missing("nvmlDeviceGetTotalEccErrors"))?;
        let mut v: c_ulonglong = 0;
        // SAFETY: `d` came from NVML; `err` and `counter` are valid enum values; `v` a valid
        // out pointer.
        self.check(unsafe { f(d, err, counter, &mut v) })?;
        Ok(v)
    }

    fn remapped_rows(&self, d: Dev) -> Result<RemappedRows, NvmlErr> {
        let f = self
            .api
            .remapped_rows
            .ok_or_else(|| Self::missing("nvmlDeviceGetRemappedRows"))?;
        let (mut corr, mut unc, mut pending, mut failure): (c_uint, c_uint, c_uint, c_uint) =
            (0, 0, 0, 0);
        // SAFETY: `d` came from NVML; all four out pointers are valid.
        self.check(unsafe { f(d, &mut corr, &mut unc, &mut pending, &mut failure) })?;
        Ok(RemappedRows {
            correctable: corr,
            uncorrectable: unc,
            pending: pending != 0,
            failure: failure != 0,
        })
    }

    /// How many pages were retired for `cause`: asked with a zero-sized buffer, which NVML
    /// answers with the count (INSUFFICIENT_SIZE when there are any).
    fn retired_count(&self, d: Dev, cause: c_int) -> Result<u32, NvmlErr> {
        let f = self
            .api
            .retired_pages
            .ok_or_else(|| Self::missing("nvmlDeviceGetRetiredPages"))?;
        let mut count: c_uint = 0;
        // SAFETY: `d` came from NVML; with `count` 0 NVML writes no address, so a null
        // buffer is what the API documents for asking the size.
        let r = unsafe { f(d, cause, &mut count, std::ptr::null_mut()) };
        if r == SUCCESS || r == ERROR_INSUFFICIENT_SIZE {
            Ok(count)
        } else {
            Err(self.err(r))
        }
    }

    fn event_reasons(&self, d: Dev) -> Result<u64, NvmlErr> {
        let f = self
            .api
            .event_reasons
            .ok_or_else(|| Self::missing("nvmlDeviceGetCurrentClocksEventReasons"))?;
        let mut v: c_ulonglong = 0;
        // SAFETY: `d` came from NVML; `v` a valid out pointer.
        self.check(unsafe { f(d, &mut v) })?;
        Ok(v)
    }

    fn memory_total_mib(&self, d: Dev) -> Result<u64, NvmlErr> {
        let f = self
            .api
            .memory
            .ok_or_else(|| Self::missing("nvmlDeviceGetMemoryInfo"))?;
        let mut m = MemoryRaw {
            total: 0,
            free: 0,
            used: 0,
        };
        // SAFETY: `d` came from NVML; `m` matches nvmlMemory_t (the v1 layout this symbol
        // writes: three unsigned long long).
        self.check(unsafe { f(d, &mut m) })?;
        let _ = (m.free, m.used);
        Ok(m.total / (1024 * 1024))
    }

    fn bar1(&self, d: Dev) -> Result<Bar1, NvmlErr> {
        let f = self
            .api
            .bar1
            .ok_or_else(|| Self::missing("nvmlDeviceGetBAR1MemoryInfo"))?;
        let mut b = Bar1Raw {
            total: 0,
            free: 0,
            used: 0,
        };
        // SAFETY: `d` came from NVML; `b` matches nvmlBAR1Memory_t.
        self.check(unsafe { f(d, &mut b) })?;
        let _ = b.free;
        Ok(Bar1 {
            total_bytes: b.total,
            used_bytes: b.used,
        })
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: pairs the successful nvmlInit_v2 in `open`; handles are not used afterwards.
        unsafe {
            (self.api.shutdown)();
        }
    }
}

/// Collects why individual facts are missing and counts the calls made; with
/// `DAQTUNE_GPU_TRACE` set, prints how long each NVML call took (to find the slow one on a
/// given driver).
struct Unavail {
    why: BTreeMap<String, String>,
    /// The GPU's NVML index, when tracing.
    trace: Option<u32>,
    calls: u32,
}

impl Unavail {
    fn take<T>(&mut self, key: &str, call: impl FnOnce() -> Result<T, NvmlErr>) -> Option<T> {
        let t = self.trace.map(|i| (i, Instant::now()));
        let r = call();
        self.calls += 1;
        if let Some((i, t)) = t {
            eprintln!(
                "daqtune gpu trace: gpu {i}: {key}: {:.3} ms",
                t.elapsed().as_secs_f64() * 1e3
            );
        }
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.why.insert(key.to_string(), e.to_string());
                None
            }
        }
    }
}

/// nvmlDeviceArchitecture_t (nvml.h's NVML_DEVICE_ARCH_*) as a lower-case name; `None` for
/// NVML_DEVICE_ARCH_UNKNOWN. A value newer than this table is kept as `arch-N`, so a newer
/// driver's architecture is never mistaken for a known one.
pub fn architecture_name(v: u32) -> Option<String> {
    let name = match v {
        2 => "kepler",
        3 => "maxwell",
        4 => "pascal",
        5 => "volta",
        6 => "turing",
        7 => "ampere",
        8 => "ada",
        9 => "hopper",
        10 => "blackwell",
        11 => "orin",
        0xffff_ffff => return None,
        n => return Some(format!("arch-{n}")),
    };
    Some(name.to_string())
}

/// nvmlBrandType_t as a lower-case name.
pub fn brand_name(v: i32) -> String {
    match v {
        1 => "quadro",
        2 => "tesla",
        3 => "nvs",
        4 => "grid",
        5 => "geforce",
        6 => "titan",
        7 => "nvidia_vapps",
        8 => "nvidia_vpc",
        9 => "nvidia_vcs",
        10 => "nvidia_vws",
        11 => "nvidia_cloud_gaming",
        12 => "quadro_rtx",
        13 => "nvidia_rtx",
        14 => "nvidia",
        15 => "geforce_rtx",
        16 => "titan_rtx",
        _ => "unknown",
    }
    .to_string()
}

/// What the NVML half of a live probe found.
#[derive(Default)]
pub(crate) struct NvmlPart {
    pub driver_version: Option<String>,
    pub nvml_version: Option<String>,
    pub gpus: Vec<GpuFacts>,
    pub init_ms: Option<f64>,
    pub query_ms: Option<f64>,
    /// NVML calls made after init (the NVLink scan of a GPU counted as one).
    pub calls: u32,
}

/// One GPU's facts and the NVML calls they took, or why NVML could not open it.
type DeviceRead = Result<(GpuFacts, u32), NvmlErr>;

/// NVML's facts of every GPU; a GPU whose static answers are in `cached` is asked only what
/// can move.
pub(crate) fn gather(nvlink: bool, cached: &[NvmlStatic]) -> (LibStatus, NvmlPart) {
    let t0 = Instant::now();
    let nvml = match Nvml::open() {
        Ok(n) => n,
        Err(reason) => return (LibStatus::Unavailable { reason }, NvmlPart::default()),
    };
    let mut part = NvmlPart {
        init_ms: Some(t0.elapsed().as_secs_f64() * 1e3),
        ..NvmlPart::default()
    };
    let t1 = Instant::now();
    part.driver_version = nvml.driver_version().ok();
    part.nvml_version = nvml.nvml_version().ok();
    part.calls = 3;
    let count = match nvml.count() {
        Ok(n) => n,
        Err(e) => {
            return (
                LibStatus::Unavailable {
                    reason: format!("nvmlDeviceGetCount_v2: {e}"),
                },
                part,
            )
        }
    };
    // NVML is thread-safe; querying GPUs in parallel keeps an 8-GPU host near the cost of one.
    let results: Vec<(u32, DeviceRead)> = if count > 1 {
        std::thread::scope(|s| {
            let nvml = &nvml;
            let handles: Vec<_> = (0..count)
                .map(|i| (i, s.spawn(move || nvml.device_facts(i, nvlink, cached))))
                .collect();
            handles
                .into_iter()
                .map(|(i, h)| {
                    let r = h.join().unwrap_or_else(|_| {
                        Err(NvmlErr {
                            code: 999,
                            text: "the NVML query thread panicked".into(),
                        })
                    });
                    (i, r)
                })
                .collect()
        })
    } else {
        (0..count)
            .map(|i| (i, nvml.device_facts(i, nvlink, cached)))
            .collect()
    };
    for (i, r) in results {
        match r {
            Ok((g, calls)) => {
                part.calls += calls;
                part.gpus.push(g);
            }
            // A GPU NVML cannot open (lost, in reset) is still a GPU: record it by index so
            // the report names it instead of silently dropping it.
            Err(e) => {
                let mut g = GpuFacts {
                    uuid: format!("nvml-index-{i}"),
                    nvml_index: Some(i),
                    ..GpuFacts::default()
                };
                g.unavailable.insert("device".into(), e.to_string());
                part.gpus.push(g);
            }
        }
    }
    part.query_ms = Some(t1.elapsed().as_secs_f64() * 1e3);
    (LibStatus::Ok, part)
}

/// NVLink of every GPU through NVML alone, for `topo`: no CUDA, no clocks.
pub(crate) fn gather_nvlinks() -> NvLinkView {
    let nvml = match Nvml::open() {
        Ok(n) => n,
        Err(reason) => {
            return NvLinkView {
                gpus: Vec::new(),
                unavailable: Some(format!("NVML: {reason}")),
            }
        }
    };
    let count = match nvml.count() {
        Ok(n) => n,
        Err(e) => {
            return NvLinkView {
                gpus: Vec::new(),
                unavailable: Some(format!("NVML: nvmlDeviceGetCount_v2: {e}")),
            }
        }
    };
    let mut v = NvLinkView::default();
    let mut why: Option<String> = None;
    for i in 0..count {
        let (bus, links) = nvml.device_nvlinks(i);
        let links = match links {
            Ok(Some(l)) => Some(l),
            Ok(None) => {
                why.get_or_insert_with(|| {
                    "no NVLink on this GPU (NVML_ERROR_NOT_SUPPORTED)".into()
                });
                None
            }
            Err(e) => {
                why.get_or_insert_with(|| e.to_string());
                None
            }
        };
        v.gpus.push((bus, links));
    }
    if count == 0 {
        v.unavailable = Some("NVML sees no GPU".into());
    } else if v.gpus.iter().all(|g| g.1.is_none()) {
        v.unavailable = why;
    }
    v
}

/// The live NVML behind the setters the apply feature calls.
pub struct LiveNvml {
    nvml: Nvml,
}

impl LiveNvml {
    pub fn open() -> Result<LiveNvml, ControlError> {
        Nvml::open()
            .map(|nvml| LiveNvml { nvml })
            .map_err(|reason| ControlError::NotAvailable { reason })
    }

    fn dev(&self, uuid: &str) -> Result<Dev, ControlError> {
        self.nvml
            .handle_by_uuid(uuid)
            .map_err(|e| to_control("nvmlDeviceGetHandleByUUID", uuid, e))
    }
}

fn to_control(call: &str, uuid: &str, e: NvmlErr) -> ControlError {
    match e.code {
        ERROR_NO_PERMISSION => ControlError::NoPermission {
            call: call.into(),
            uuid: uuid.into(),
        },
        ERROR_NOT_SUPPORTED => ControlError::NotSupported {
            call: call.into(),
            uuid: uuid.into(),
        },
        _ => ControlError::Driver {
            call: call.into(),
            uuid: uuid.into(),
            message: e.to_string(),
        },
    }
}

impl NvmlControl for LiveNvml {
    fn facts(&self, uuid: &str) -> Result<GpuFacts, ControlError> {
        let count = self
            .nvml
            .count()
            .map_err(|e| to_control("nvmlDeviceGetCount_v2", uuid, e))?;
        for i in 0..count {
            if let Ok((g, _)) = self.nvml.device_facts(i, false, &[]) {
                if g.uuid.eq_ignore_ascii_case(uuid) {
                    return Ok(g);
                }
            }
        }
        Err(ControlError::NoSuchGpu { uuid: uuid.into() })
    }

    fn set_locked_clocks(
        &self,
        uuid: &str,
        domain: ClockDomain,
        min: u32,
        max: u32,
    ) -> Result<(), ControlError> {
        let d = self.dev(uuid)?;
        let (f, call) = match domain {
            ClockDomain::Sm => (self.nvml.api.set_gpu_locked, "nvmlDeviceSetGpuLockedClocks"),
            ClockDomain::Memory => (
                self.nvml.api.set_mem_locked,
                "nvmlDeviceSetMemoryLockedClocks",
            ),
        };
        let f = f.ok_or_else(|| to_control(call, uuid, Nvml::missing(call)))?;
        // SAFETY: `d` came from NVML; the arguments are plain integers.
        let r = unsafe { f(d, min, max) };
        self.nvml.check(r).map_err(|e| to_control(call, uuid, e))
    }

    fn reset_locked_clocks(&self, uuid: &str, domain: ClockDomain) -> Result<(), ControlError> {
        let d = self.dev(uuid)?;
        let (f, call) = match domain {
            ClockDomain::Sm => (
                self.nvml.api.reset_gpu_locked,
                "nvmlDeviceResetGpuLockedClocks",
            ),
            ClockDomain::Memory => (
                self.nvml.api.reset_mem_locked,
                "nvmlDeviceResetMemoryLockedClocks",
            ),
        };
        let f = f.ok_or_else(|| to_control(call, uuid, Nvml::missing(call)))?;
        // SAFETY: `d` came from NVML.
        let r = unsafe { f(d) };
        self.nvml.check(r).map_err(|e| to_control(call, uuid, e))
    }

    fn set_persistence(&self, uuid: &str, on: bool) -> Result<(), ControlError> {
        let d = self.dev(uuid)?;
        let call = "nvmlDeviceSetPersistenceMode";
        let f = self
            .nvml
            .api
            .set_persistence
            .ok_or_else(|| to_control(call, uuid, Nvml::missing(call)))?;
        // SAFETY: `d` came from NVML; 0/1 are the nvmlEnableState_t values.
        let r = unsafe { f(d, c_int::from(on)) };
        self.nvml.check(r).map_err(|e| to_control(call, uuid, e))
    }
}
