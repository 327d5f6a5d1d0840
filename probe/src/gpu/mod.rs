//! GPU facts: NVML and the CUDA driver API on a live host, or a recorded file in a host root.
//!
//! Both libraries are loaded at run time (`libnvidia-ml.so.1`, `libcuda.so.1`, the versioned
//! names that containers carry), so the binary starts on hosts without a GPU: an absent or
//! broken library is a [`LibStatus::Unavailable`] with the reason, never a panic.
//!
//! GPUs are identified by UUID, plus the PCI bus id where there is one: CUDA and NVML enumerate
//! in different orders on hybrid hosts and Tegra integrated GPUs have no PCI address, so the
//! two libraries' records are joined by UUID, never by index.
//!
//! A `--root` replay reads `<root>/daqtune/gpu.json` (schema [`SCHEMA`], documented in
//! docs/gpu-facts.md) through [`Recorded`]; [`write_facts`] writes that file for `snapshot`.

pub mod cache;
pub mod control;
pub mod cuda;
mod dl;
pub mod nvlink;
mod nvml;
pub mod smi;
pub mod subset;
pub mod topo_text;
pub mod xid;

use crate::host::Host;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub use cache::{proc_gpus, CacheMode, CacheOutcome, CacheUse, ProcGpu};
pub use control::{
    foreign_lock, is_idle, lock_evidence, ClockDomain, ControlError, GpuControl, LockEvidence,
    LockOutcome, LockShows, MockNvml, NvmlControl,
};
pub use nvlink::{nvlink_pairs, read_nvlinks, NvLink, NvLinkView, NvPair, RemoteKind};
pub use nvml::LiveNvml;
pub use subset::serve_child as serve_cuda_probe_child;

/// Schema tag of the recorded facts file.
pub const SCHEMA: &str = "daqtune.gpu/v1";
/// Where the recorded facts live, as a host path inside a host root.
pub const FACTS_PATH: &str = "/daqtune/gpu.json";

/// Why GPU facts could not be had at all.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// A driver library could not be loaded or initialised.
    #[error("{library} not available: {reason}")]
    NotAvailable { library: String, reason: String },
    /// A host root without a recorded facts file.
    #[error("this host root has no recorded GPU facts ({path}): {reason}")]
    NotRecorded { path: String, reason: String },
    /// A recorded file that is not a daqtune GPU facts file.
    #[error("{path}: not a {schema} file: {reason}")]
    BadRecord {
        path: String,
        schema: &'static str,
        reason: String,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// Whether a driver library answered, and why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum LibStatus {
    Ok,
    Unavailable { reason: String },
}

impl LibStatus {
    pub fn is_ok(&self) -> bool {
        matches!(self, LibStatus::Ok)
    }
    pub fn reason(&self) -> Option<&str> {
        match self {
            LibStatus::Ok => None,
            LibStatus::Unavailable { reason } => Some(reason),
        }
    }
}

/// Clocks of one domain in MHz, as NVML reports them. `None` = not reported (the reason, if
/// any, is in [`GpuFacts::unavailable`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DomainClocks {
    pub current_mhz: Option<u32>,
    pub max_mhz: Option<u32>,
    /// Applications clocks (the target under load) and their default.
    pub applications_mhz: Option<u32>,
    pub default_applications_mhz: Option<u32>,
    /// The range the current P-state allows. A lock (`nvidia-smi -lgc`/`-lmc`) narrows it.
    pub pstate_min_mhz: Option<u32>,
    pub pstate_max_mhz: Option<u32>,
}

/// Clock event ("throttle") reasons, NVML bit values.
pub const CLOCK_EVENT_REASONS: &[(u64, &str)] = &[
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
];
pub const REASON_GPU_IDLE: u64 = 0x1;

/// Names of the set bits of a clock-event-reason mask (unknown bits as `0x...`).
pub fn decode_event_reasons(mask: u64) -> Vec<String> {
    let mut out = Vec::new();
    let mut known = 0u64;
    for (bit, name) in CLOCK_EVENT_REASONS {
        known |= bit;
        if mask & bit != 0 {
            out.push((*name).to_string());
        }
    }
    if mask & !known != 0 {
        out.push(format!("{:#x}", mask & !known));
    }
    out
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bar1 {
    pub total_bytes: u64,
    pub used_bytes: u64,
}

impl Bar1 {
    pub fn total_mib(&self) -> u64 {
        self.total_bytes / (1024 * 1024)
    }
    pub fn used_mib(&self) -> u64 {
        self.used_bytes / (1024 * 1024)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PcieFacts {
    /// What the GPU and the slot together can do (NVML's max link generation/width).
    pub max_link_gen: Option<u32>,
    pub max_link_width: Option<u32>,
    /// What the GPU alone can do.
    pub gpu_max_link_gen: Option<u32>,
    /// Current values; GPUs train down when idle, so these are never judged alone.
    pub current_link_gen: Option<u32>,
    pub current_link_width: Option<u32>,
}

/// Rows NVML has remapped in HBM/GDDR (Ampere and later; nvmlDeviceGetRemappedRows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemappedRows {
    /// Rows remapped for correctable and for uncorrectable errors.
    pub correctable: u32,
    pub uncorrectable: u32,
    /// A remap is recorded but takes effect only at the next GPU reset.
    pub pending: bool,
    /// A remap was needed and could not be made: the GPU needs service.
    pub failure: bool,
}

/// What `nvidia-smi -q` shows under Temperature, Power Readings, ECC Errors, Retired Pages and
/// Remapped Rows, as NVML reports it. `None` = not reported; the reason is in
/// [`GpuFacts::unavailable`] under `health.*` (most are NOT_SUPPORTED on GeForce parts and on
/// integrated GPUs; retired pages are replaced by row remapping from Ampere on).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GpuHealth {
    /// GPU core temperature (NVML_TEMPERATURE_GPU), degrees C.
    pub temperature_c: Option<u32>,
    /// NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: where the hardware starts slowing clocks.
    pub slowdown_temp_c: Option<u32>,
    /// NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: where the GPU shuts down.
    pub shutdown_temp_c: Option<u32>,
    /// Power draw and the limit the driver enforces, in milliwatts.
    pub power_draw_mw: Option<u32>,
    pub power_limit_mw: Option<u32>,
    /// ECC mode now (a change needs a reset to take effect).
    pub ecc_enabled: Option<bool>,
    /// nvmlDeviceGetTotalEccErrors: volatile = since the driver loaded; aggregate = over the
    /// GPU's life (kept in the InfoROM).
    pub ecc_volatile_corrected: Option<u64>,
    pub ecc_volatile_uncorrected: Option<u64>,
    pub ecc_aggregate_corrected: Option<u64>,
    pub ecc_aggregate_uncorrected: Option<u64>,
    /// Retired pages (Kepler to Volta: dynamic page retirement), by cause, and whether a
    /// retirement waits for the next driver load.
    pub retired_pages_sbe: Option<u32>,
    pub retired_pages_dbe: Option<u32>,
    pub retired_pages_pending: Option<bool>,
    pub remapped_rows: Option<RemappedRows>,
}

impl GpuHealth {
    pub fn is_empty(&self) -> bool {
        *self == GpuHealth::default()
    }
}

/// CUDA driver attributes of one device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CudaAttrs {
    /// The CUDA ordinal under `CUDA_DEVICE_ORDER=PCI_BUS_ID`.
    pub ordinal: Option<u32>,
    /// CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED (116).
    pub gpu_direct_rdma_supported: Option<bool>,
    /// CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (124).
    pub dma_buf_supported: Option<bool>,
    /// CU_DEVICE_ATTRIBUTE_INTEGRATED (18).
    pub integrated: Option<bool>,
    pub compute_capability: Option<String>,
    pub pci_bus_id: Option<String>,
    pub name: Option<String>,
    /// Where the attributes were not read on this GPU but on another of the same model
    /// under the same driver (the first run of a boot reads one GPU per model, see
    /// docs/gpu-facts.md), that GPU's UUID. `None`: read on this GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_from: Option<String>,
}

/// Everything known about one GPU. NVML and CUDA records of the same UUID are merged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GpuFacts {
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as NVML and nvidia-smi print it.
    pub uuid: String,
    pub name: Option<String>,
    /// sysfs form (`0000:09:00.0`); `None` for integrated GPUs without a PCI address.
    pub pci_bus_id: Option<String>,
    /// NVML's index (nvidia-smi's numbering); `None` when NVML does not see the GPU.
    pub nvml_index: Option<u32>,
    /// NVML brand (`geforce`, `nvidia_rtx`, `tesla`, ...).
    pub brand: Option<String>,
    pub persistence_mode: Option<bool>,
    /// Current P-state (0 = highest performance).
    pub pstate: Option<u32>,
    /// GPU utilisation in percent at the time of reading (tells an idle GPU from a busy one).
    pub utilization_pct: Option<u32>,
    pub sm_clock: DomainClocks,
    pub memory_clock: DomainClocks,
    /// Whether the GPU has its own memory clock domain (GB10's unified memory has none).
    pub memory_clock_domain: Option<bool>,
    pub clock_event_reasons: Option<u64>,
    pub bar1: Option<Bar1>,
    /// NVML's architecture (nvmlDeviceGetArchitecture) as a lower-case name: `hopper`,
    /// `blackwell`, ...; `nvidia-smi -q`'s "Product Architecture".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// The framebuffer size in MiB (nvmlDeviceGetMemoryInfo's total).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_total_mib: Option<u64>,
    pub pcie: PcieFacts,
    /// The active NVLinks (NVML link state and remote PCI info, per link). `None`: not read,
    /// with the reason under `unavailable["nvlink"]` (no NVLink on this GPU or driver, or a
    /// facts file recorded before NVLink was read); `Some(empty)`: NVLink present, no link up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvlink: Option<Vec<NvLink>>,
    pub cuda: Option<CudaAttrs>,
    /// Temperature, power, ECC and memory repair state (`gpu.health`). Empty in facts
    /// recorded before daqtune read them.
    #[serde(skip_serializing_if = "GpuHealth::is_empty")]
    pub health: GpuHealth,
    /// Field -> why NVML/CUDA did not report it (e.g. `bar1: Not Supported`).
    pub unavailable: BTreeMap<String, String>,
}

impl GpuFacts {
    /// Integrated per CUDA attribute 18; `None` when CUDA did not see this GPU.
    pub fn integrated(&self) -> Option<bool> {
        self.cuda.as_ref().and_then(|c| c.integrated)
    }

    /// How reports name this GPU: UUID plus PCI bus id where there is one.
    pub fn subject(&self) -> String {
        match &self.pci_bus_id {
            Some(b) => format!("{} {}", self.uuid, b),
            None => self.uuid.clone(),
        }
    }

    pub fn display_name(&self) -> &str {
        self.name
            .as_deref()
            .or_else(|| self.cuda.as_ref().and_then(|c| c.name.as_deref()))
            .unwrap_or("unknown GPU")
    }
}

/// Start-up cost of the driver libraries, measured in-process (load + init).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Timing {
    pub nvml_init_ms: Option<f64>,
    pub nvml_query_ms: Option<f64>,
    pub cuda_init_ms: Option<f64>,
    pub cuda_query_ms: Option<f64>,
    /// Looking up (and on a hit, reading) the per-boot cache (CUDA attributes and NVML's
    /// static answers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_cache_ms: Option<f64>,
    /// NVML calls after init, all GPUs together: fewer on a cache hit, where only what can
    /// move is asked. `None` where NVML did not answer and in older recorded facts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvml_calls: Option<u32>,
}

/// The facts file (`daqtune/gpu.json`) and the result of a live probe: one type for both, so a
/// replay evaluates exactly what a live run saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSnapshot {
    pub schema: String,
    /// Seconds since the Unix epoch when the facts were gathered.
    #[serde(default)]
    pub captured_unix: Option<u64>,
    pub nvml: LibStatus,
    pub cuda: LibStatus,
    /// NVML's driver version (`580.95.05`).
    #[serde(default)]
    pub driver_version: Option<String>,
    #[serde(default)]
    pub nvml_version: Option<String>,
    /// cuDriverGetVersion (`13000` = 13.0).
    #[serde(default)]
    pub cuda_driver_version: Option<i32>,
    /// The value of CUDA_DEVICE_ORDER when CUDA was initialised.
    #[serde(default)]
    pub cuda_device_order: Option<String>,
    #[serde(default)]
    pub gpus: Vec<GpuFacts>,
    #[serde(default)]
    pub timing: Timing,
    /// Whether the CUDA attributes came from the per-boot cache ([`cache`]) and when they
    /// were read from CUDA. `None` in recorded facts and where no cache was consulted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_cache: Option<CacheUse>,
}

impl GpuSnapshot {
    pub fn empty(nvml: LibStatus, cuda: LibStatus) -> Self {
        GpuSnapshot {
            schema: SCHEMA.into(),
            captured_unix: None,
            nvml,
            cuda,
            driver_version: None,
            nvml_version: None,
            cuda_driver_version: None,
            cuda_device_order: None,
            gpus: Vec::new(),
            timing: Timing::default(),
            cuda_cache: None,
        }
    }

    /// Neither library answered: nothing about GPUs can be said.
    pub fn unavailable_reason(&self) -> Option<String> {
        match (&self.nvml, &self.cuda) {
            (LibStatus::Unavailable { reason: a }, LibStatus::Unavailable { reason: b }) => {
                Some(format!("NVML: {a}; CUDA: {b}"))
            }
            _ => None,
        }
    }

    /// Replace every GPU UUID (a serial-like identifier) through `f`, consistently: the same
    /// UUID maps to the same replacement wherever it appears. For `snapshot --redact`.
    pub fn map_uuids(&mut self, mut f: impl FnMut(&str) -> String) {
        for g in &mut self.gpus {
            g.uuid = f(&g.uuid);
        }
        // The GPU whose CUDA attributes another GPU carries is named by UUID too.
        for g in &mut self.gpus {
            if let Some(c) = g.cuda.as_mut() {
                if let Some(u) = c.read_from.take() {
                    c.read_from = Some(f(&u));
                }
            }
        }
    }

    pub fn to_json(&self) -> String {
        // Serializing plain data with string keys cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    pub fn from_json(text: &str) -> Result<GpuSnapshot, String> {
        let snap: GpuSnapshot = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if snap.schema != SCHEMA {
            return Err(format!("schema is {:?}, expected {SCHEMA:?}", snap.schema));
        }
        Ok(snap)
    }
}

/// Where GPU facts come from: the driver libraries, or a recorded file.
pub trait GpuSource {
    fn gather(&self) -> Result<GpuSnapshot, GpuError>;
    /// For messages: `NVML/CUDA` or the file read.
    fn describe(&self) -> String;
}

/// NVML + CUDA driver on the running machine; the CUDA attributes through the per-boot
/// cache unless `cache` is [`CacheMode::Refresh`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Live {
    pub cache: CacheMode,
}

impl GpuSource for Live {
    fn gather(&self) -> Result<GpuSnapshot, GpuError> {
        Ok(gather_live_with(self.cache))
    }
    fn describe(&self) -> String {
        "NVML and the CUDA driver API".into()
    }
}

/// The facts file inside a host root.
pub struct Recorded<'a> {
    pub host: &'a Host,
}

impl GpuSource for Recorded<'_> {
    fn gather(&self) -> Result<GpuSnapshot, GpuError> {
        let text = self
            .host
            .read_string(FACTS_PATH)
            .map_err(|e| GpuError::NotRecorded {
                path: FACTS_PATH.trim_start_matches('/').into(),
                reason: e.to_string(),
            })?;
        GpuSnapshot::from_json(&text).map_err(|reason| GpuError::BadRecord {
            path: FACTS_PATH.trim_start_matches('/').into(),
            schema: SCHEMA,
            reason,
        })
    }
    fn describe(&self) -> String {
        format!("recorded facts {}", FACTS_PATH.trim_start_matches('/'))
    }
}

/// The source for a host: the libraries only on the live host, the file under a root (a root
/// never consults the CUDA cache: it replays what was recorded).
pub fn source_for(host: &Host, cache: CacheMode) -> Box<dyn GpuSource + '_> {
    if host.is_live() {
        Box::new(Live { cache })
    } else {
        Box::new(Recorded { host })
    }
}

/// Gather GPU facts from whichever source fits the host, the CUDA cache allowed.
pub fn read_gpus(host: &Host) -> Result<GpuSnapshot, GpuError> {
    read_gpus_with(host, CacheMode::Use)
}

/// [`read_gpus`] choosing whether the CUDA cache may answer (`--no-cache`).
pub fn read_gpus_with(host: &Host, cache: CacheMode) -> Result<GpuSnapshot, GpuError> {
    source_for(host, cache).gather()
}

/// Probe NVML and CUDA and join their records by UUID, the GPUs' NVLinks included (what
/// `snapshot` records); the CUDA attributes may come from the per-boot cache.
pub fn gather_live() -> GpuSnapshot {
    let live = Host::live();
    gather_live_at(
        &live,
        std::path::Path::new(cache::CACHE_PATH),
        CacheMode::Use,
        cuda::gather,
        true,
    )
}

/// [`gather_live`] with the cache mode given: every fact, the NVLinks included (`daqtune gpu`
/// shows them; the checks never read them, see [`gather_live_with`]).
pub fn gather_live_all(mode: CacheMode) -> GpuSnapshot {
    let live = Host::live();
    gather_live_at(
        &live,
        std::path::Path::new(cache::CACHE_PATH),
        mode,
        cuda::gather,
        true,
    )
}

/// The facts the checks judge, with the cache mode given: [`gather_live`] without the
/// NVLinks, which no check reads (on a 4-GPU HGX host they are 216 NVML calls, served by the
/// driver one at a time beside the first run's `cuInit`; docs/performance.md).
pub fn gather_live_with(mode: CacheMode) -> GpuSnapshot {
    let live = Host::live();
    gather_live_at(
        &live,
        std::path::Path::new(cache::CACHE_PATH),
        mode,
        cuda::gather,
        false,
    )
}

/// The live probe with the cache key read through `key_host` and the cache file at
/// `cache_path`, and CUDA read by `read_cuda` (tests pass fakes for all three).
fn gather_live_at(
    key_host: &Host,
    cache_path: &std::path::Path,
    mode: CacheMode,
    read_cuda: fn() -> (LibStatus, cuda::CudaPart),
    nvlink: bool,
) -> GpuSnapshot {
    // CUDA ordinals then follow PCI bus ids, as nvidia-smi numbers GPUs (records are still
    // joined by UUID). Set before any thread starts and before cuInit, which reads it once.
    if std::env::var("CUDA_DEVICE_ORDER").as_deref() != Ok("PCI_BUS_ID") {
        std::env::set_var("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    }
    // The cache lookup reads three procfs files: cheap enough to do before deciding whether
    // CUDA is needed at all.
    let t_cache = std::time::Instant::now();
    let lookup = cache::lookup(key_host, cache_path, mode);
    let cache_ms = t_cache.elapsed().as_secs_f64() * 1e3;
    let (nvml_status, mut nvml_part, cuda_status, cuda_part, cache_use) = match lookup.hit {
        Some((cached, use_)) => {
            let (nvml_status, nvml_part) = nvml::gather(nvlink, &cached.nvml);
            let part = cuda::CudaPart {
                driver_version: cached.driver_version,
                device_order: cached.device_order,
                devices: cached.devices,
                init_ms: None,
                query_ms: None,
            };
            (nvml_status, nvml_part, LibStatus::Ok, part, use_)
        }
        None => {
            // cuInit dominates the start-up and grows with the GPU count: read one GPU per
            // model in a child where that is possible (see `subset`), the whole host otherwise.
            let procfs = proc_gpus(key_host);
            let subset = if std::env::var_os("CUDA_VISIBLE_DEVICES").is_some()
                || std::env::var_os(EVERY_GPU_ENV).is_some()
            {
                None
            } else {
                subset::plan(&procfs)
            };
            // cuInit (here or in the child) is independent of NVML, so it runs beside the
            // NVML queries; `ORDER_ENV` runs them one after the other instead (to measure).
            let order = std::env::var(ORDER_ENV).unwrap_or_default();
            let ((nvml_status, nvml_part), (cuda_status, cuda_part)) = match order.as_str() {
                "nvml-first" => {
                    let nvml = nvml::gather(nvlink, &[]);
                    (
                        nvml,
                        read_cuda_scoped(subset.as_deref(), &procfs, read_cuda),
                    )
                }
                "cuda-first" => {
                    let cuda = read_cuda_scoped(subset.as_deref(), &procfs, read_cuda);
                    (nvml::gather(nvlink, &[]), cuda)
                }
                _ => std::thread::scope(|s| {
                    let cuda = s.spawn(|| read_cuda_scoped(subset.as_deref(), &procfs, read_cuda));
                    let nvml = nvml::gather(nvlink, &[]);
                    let cuda = cuda.join().unwrap_or_else(|_| {
                        (
                            LibStatus::Unavailable {
                                reason: "the CUDA probe thread panicked".into(),
                            },
                            cuda::CudaPart::default(),
                        )
                    });
                    (nvml, cuda)
                }),
            };
            // NVML's static answers only from a whole NVML read (a failed one stores none, and
            // the GPUs are asked in full next time).
            let statics: Vec<cache::NvmlStatic> = if nvml_status.is_ok() {
                nvml_part
                    .gpus
                    .iter()
                    .filter_map(cache::NvmlStatic::from_facts)
                    .collect()
            } else {
                Vec::new()
            };
            let use_ = lookup.store(
                mode,
                &cuda_status,
                cuda_part.driver_version,
                cuda_part.device_order.clone(),
                &cuda_part.devices,
                &statics,
            );
            (nvml_status, nvml_part, cuda_status, cuda_part, use_)
        }
    };
    let mut snap = GpuSnapshot::empty(nvml_status, cuda_status);
    snap.captured_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs());
    snap.driver_version = nvml_part.driver_version.take();
    snap.nvml_version = nvml_part.nvml_version.take();
    snap.cuda_driver_version = cuda_part.driver_version;
    snap.cuda_device_order = cuda_part.device_order.clone();
    snap.timing = Timing {
        nvml_init_ms: nvml_part.init_ms,
        nvml_query_ms: nvml_part.query_ms,
        cuda_init_ms: cuda_part.init_ms,
        cuda_query_ms: cuda_part.query_ms,
        cuda_cache_ms: Some(cache_ms),
        nvml_calls: snap.nvml.is_ok().then_some(nvml_part.calls),
    };
    snap.cuda_cache = Some(cache_use);
    snap.gpus = join_by_uuid(nvml_part.gpus, cuda_part.devices);
    snap
}

/// Set (to anything) to read CUDA on every GPU in-process on the first run of a boot, as
/// before one GPU per model was read (for comparisons; docs/performance.md).
pub const EVERY_GPU_ENV: &str = "DAQTUNE_CUDA_EVERY_GPU";

/// `nvml-first` or `cuda-first`: on the first run of a boot, read NVML and CUDA one after the
/// other instead of side by side (for measurements; docs/performance.md).
pub const ORDER_ENV: &str = "DAQTUNE_GPU_ORDER";

/// CUDA for the first run of a boot: with a `subset` plan, the representatives in a child and
/// their attributes spread to the other GPUs of their model; without one, or when the child
/// fails, every GPU through `read_cuda` in this process.
fn read_cuda_scoped(
    subset: Option<&[String]>,
    procfs: &[ProcGpu],
    read_cuda: fn() -> (LibStatus, cuda::CudaPart),
) -> (LibStatus, cuda::CudaPart) {
    if let Some(uuids) = subset {
        let t = std::time::Instant::now();
        if let Ok(r) = subset::read_in_child(uuids) {
            let devices = subset::spread(procfs, &r.devices);
            // Every GPU must be covered (a MIG-mode GPU shows CUDA other UUIDs): else read all.
            if r.status.is_ok() && devices.len() == procfs.len() {
                let part = cuda::CudaPart {
                    driver_version: r.driver_version,
                    device_order: std::env::var("CUDA_DEVICE_ORDER").ok(),
                    devices,
                    // The child's own cuInit, and the whole child (exec, cuInit, queries).
                    init_ms: r.init_ms,
                    query_ms: Some(t.elapsed().as_secs_f64() * 1e3),
                };
                return (LibStatus::Ok, part);
            }
        }
    }
    read_cuda()
}

/// Merge CUDA devices into NVML records with the same UUID; CUDA-only devices (an integrated
/// GPU NVML does not manage) become records of their own. Sorted by PCI bus id, integrated
/// GPUs (no bus id) last, so reports are stable across enumeration orders.
pub fn join_by_uuid(mut gpus: Vec<GpuFacts>, cuda: Vec<(String, CudaAttrs)>) -> Vec<GpuFacts> {
    for (uuid, attrs) in cuda {
        match gpus.iter_mut().find(|g| g.uuid.eq_ignore_ascii_case(&uuid)) {
            Some(g) => {
                if g.pci_bus_id.is_none() {
                    g.pci_bus_id = attrs.pci_bus_id.clone();
                }
                g.cuda = Some(attrs);
            }
            None => gpus.push(GpuFacts {
                uuid,
                name: attrs.name.clone(),
                pci_bus_id: attrs.pci_bus_id.clone(),
                cuda: Some(attrs),
                ..GpuFacts::default()
            }),
        }
    }
    gpus.sort_by(|a, b| {
        (a.pci_bus_id.is_none(), &a.pci_bus_id, &a.uuid).cmp(&(
            b.pci_bus_id.is_none(),
            &b.pci_bus_id,
            &b.uuid,
        ))
    });
    gpus
}

/// Write `<root>/daqtune/gpu.json` atomically (temp file, fsync, rename).
pub fn write_facts(root: &Path, snap: &GpuSnapshot) -> Result<std::path::PathBuf, GpuError> {
    let path = root.join("daqtune").join("gpu.json");
    crate::fsutil::write_atomic(&path, format!("{}\n", snap.to_json()).as_bytes(), 0o644).map_err(
        |source| GpuError::Write {
            path: path.display().to_string(),
            source,
        },
    )?;
    Ok(path)
}

/// The NVIDIA kernel module flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelModule {
    Open,
    Proprietary,
}

impl KernelModule {
    pub fn as_str(self) -> &'static str {
        match self {
            KernelModule::Open => "open",
            KernelModule::Proprietary => "proprietary",
        }
    }
}

/// /proc/driver/nvidia/version, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DriverProc {
    pub version: Option<String>,
    pub module: KernelModule,
    /// The NVRM line as the driver wrote it.
    pub nvrm_line: String,
}

/// Parse /proc/driver/nvidia/version:
/// `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (...)`.
/// The open module says "Open Kernel Module"; the proprietary one "Kernel Module".
pub fn parse_driver_version(text: &str) -> Option<DriverProc> {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("NVRM"))?
        .trim();
    let module = if line.contains("Open Kernel Module") {
        KernelModule::Open
    } else {
        KernelModule::Proprietary
    };
    // The version is the first token shaped like digits and dots with at least one dot,
    // after the "Kernel Module for <arch>" part.
    let tail = line
        .split_once("Kernel Module")
        .map(|(_, t)| t)
        .unwrap_or(line);
    let version = tail
        .split_whitespace()
        .find(|w| {
            w.contains('.')
                && w.chars().all(|c| c.is_ascii_digit() || c == '.')
                && w.chars().next().is_some_and(|c| c.is_ascii_digit())
        })
        .map(str::to_string);
    Some(DriverProc {
        version,
        module,
        nvrm_line: line.to_string(),
    })
}

/// Read and parse /proc/driver/nvidia/version through the host root.
pub fn read_driver_proc(host: &Host) -> Result<DriverProc, String> {
    let text = host
        .read_string("/proc/driver/nvidia/version")
        .map_err(|e| e.to_string())?;
    parse_driver_version(&text)
        .ok_or_else(|| "/proc/driver/nvidia/version has no NVRM line".to_string())
}

/// Normalise a PCI bus id to the sysfs form: NVML prints `00000000:09:00.0` (8-digit domain),
/// CUDA `0000:09:00.0`; sysfs uses 4 digits unless the domain needs more. Lower case.
pub fn normalize_bus_id(s: &str) -> Option<String> {
    // NVML pads the domain to 8 digits; sysfs (and PciAddr) print at least 4, more only for
    // domains above 0xffff (VMD: `10000:01:00.0`).
    s.trim()
        .trim_end_matches('\0')
        .parse::<crate::pci::PciAddr>()
        .ok()
        .map(|a| a.to_string())
}

/// CUDA's 16 raw UUID bytes in NVML's text form.
pub fn format_uuid(b: &[u8; 16]) -> String {
    let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

/// A NUL-terminated C buffer as a String (lossy; stops at the first NUL).
pub(crate) fn c_buf_to_string(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_version_open_and_proprietary() {
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 09:55:41 UTC 2025\nGCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n";
        let d = parse_driver_version(open).expect("parsed");
        assert_eq!(d.module, KernelModule::Open);
        assert_eq!(d.version.as_deref(), Some("580.95.05"));
        let prop = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
        let d = parse_driver_version(prop).expect("parsed");
        assert_eq!(d.module, KernelModule::Proprietary);
        assert_eq!(d.version.as_deref(), Some("535.183.01"));
        let arm = "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.142  Release Build  (dvs-builder@U22-I3-AF03-09-1)  Wed Jan  7 22:34:08 UTC 2026\n";
        let d = parse_driver_version(arm).expect("parsed");
        assert_eq!(d.version.as_deref(), Some("580.142"));
    }

    #[test]
    fn driver_version_garbage() {
        assert!(parse_driver_version("").is_none());
        assert!(parse_driver_version("(null)").is_none());
        assert!(parse_driver_version("GCC version: 13").is_none());
        let d = parse_driver_version("NVRM version: something odd").expect("line found");
        assert_eq!(d.version, None);
        assert_eq!(d.module, KernelModule::Proprietary);
    }

    #[test]
    fn bus_ids() {
        assert_eq!(
            normalize_bus_id("00000000:09:00.0").as_deref(),
            Some("0000:09:00.0")
        );
        assert_eq!(
            normalize_bus_id("00000005:09:00.0").as_deref(),
            Some("0005:09:00.0")
        );
        assert_eq!(
            normalize_bus_id("0000:1B:00.0").as_deref(),
            Some("0000:1b:00.0")
        );
        assert_eq!(
            normalize_bus_id("00010000:01:00.0").as_deref(),
            Some("10000:01:00.0")
        );
        assert_eq!(normalize_bus_id(""), None);
        assert_eq!(normalize_bus_id("(null)"), None);
        assert_eq!(normalize_bus_id("0000:09:20.0"), None);
        assert_eq!(normalize_bus_id("0000:09:00.8"), None);
        assert_eq!(normalize_bus_id("zz:09:00.0"), None);
    }

    #[test]
    fn uuid_format() {
        let b = [
            0x8c, 0x3e, 0x2b, 0x1a, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99,
            0xaa, 0xbb,
        ];
        assert_eq!(format_uuid(&b), "GPU-8c3e2b1a-0011-2233-4455-66778899aabb");
    }

    #[test]
    fn event_reasons() {
        assert_eq!(decode_event_reasons(0), Vec::<String>::new());
        assert_eq!(decode_event_reasons(0x5), vec!["gpu_idle", "sw_power_cap"]);
        assert_eq!(decode_event_reasons(0x1000), vec!["0x1000"]);
    }

    #[test]
    fn join_prefers_uuid_not_index() {
        let nvml = vec![
            GpuFacts {
                uuid: "GPU-b".into(),
                pci_bus_id: Some("0000:41:00.0".into()),
                nvml_index: Some(0),
                ..Default::default()
            },
            GpuFacts {
                uuid: "GPU-a".into(),
                pci_bus_id: Some("0000:09:00.0".into()),
                nvml_index: Some(1),
                ..Default::default()
            },
        ];
        let cuda = vec![
            (
                "GPU-a".to_string(),
                CudaAttrs {
                    ordinal: Some(0),
                    integrated: Some(false),
                    ..Default::default()
                },
            ),
            (
                "GPU-igpu".to_string(),
                CudaAttrs {
                    ordinal: Some(2),
                    integrated: Some(true),
                    name: Some("Orin (nvgpu)".into()),
                    ..Default::default()
                },
            ),
            (
                "GPU-b".to_string(),
                CudaAttrs {
                    ordinal: Some(1),
                    integrated: Some(false),
                    ..Default::default()
                },
            ),
        ];
        let j = join_by_uuid(nvml, cuda);
        assert_eq!(j.len(), 3);
        assert_eq!(j[0].uuid, "GPU-a");
        assert_eq!(j[0].cuda.as_ref().and_then(|c| c.ordinal), Some(0));
        assert_eq!(j[0].nvml_index, Some(1));
        assert_eq!(j[1].uuid, "GPU-b");
        assert_eq!(j[2].uuid, "GPU-igpu");
        assert_eq!(j[2].integrated(), Some(true));
        assert_eq!(j[2].subject(), "GPU-igpu");
        assert_eq!(j[0].subject(), "GPU-a 0000:09:00.0");
    }

    #[test]
    fn snapshot_round_trip_and_schema() {
        let mut s = GpuSnapshot::empty(
            LibStatus::Ok,
            LibStatus::Unavailable {
                reason: "libcuda.so.1: cannot open".into(),
            },
        );
        s.gpus.push(GpuFacts {
            uuid: "GPU-x".into(),
            bar1: Some(Bar1 {
                total_bytes: 256 << 20,
                used_bytes: 13 << 20,
            }),
            ..Default::default()
        });
        let text = s.to_json();
        let back = GpuSnapshot::from_json(&text).expect("round trip");
        assert_eq!(back, s);
        assert_eq!(back.gpus[0].bar1.map(|b| b.total_mib()), Some(256));
        let wrong = text.replace(SCHEMA, "daqtune.gpu/v0");
        assert!(GpuSnapshot::from_json(&wrong).is_err());
        assert!(GpuSnapshot::from_json("").is_err());
        assert!(GpuSnapshot::from_json("(null)").is_err());
    }

    #[test]
    fn uuids_map_consistently() {
        let mut s = GpuSnapshot::empty(LibStatus::Ok, LibStatus::Ok);
        for u in ["GPU-a", "GPU-b"] {
            s.gpus.push(GpuFacts {
                uuid: u.into(),
                ..Default::default()
            });
        }
        s.gpus[1].cuda = Some(CudaAttrs {
            read_from: Some("GPU-a".into()),
            ..Default::default()
        });
        let mut seen: Vec<String> = Vec::new();
        s.map_uuids(|u| {
            if let Some(i) = seen.iter().position(|x| x == u) {
                return format!("GPU-redacted-{}", i + 1);
            }
            seen.push(u.to_string());
            format!("GPU-redacted-{}", seen.len())
        });
        assert_eq!(seen, ["GPU-a", "GPU-b"]);
        assert_eq!(s.gpus[1].uuid, "GPU-redacted-2");
        assert_eq!(
            s.gpus[1].cuda.as_ref().and_then(|c| c.read_from.as_deref()),
            Some("GPU-redacted-1"),
            "read_from is redacted like the UUID it names"
        );
    }

    #[test]
    fn write_then_replay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = GpuSnapshot::empty(LibStatus::Ok, LibStatus::Ok);
        s.driver_version = Some("580.95.05".into());
        write_facts(dir.path(), &s).expect("written");
        let host = Host::at(dir.path()).expect("root");
        let back = read_gpus(&host).expect("recorded");
        assert_eq!(back, s);
        let empty = tempfile::tempdir().expect("tempdir");
        let host = Host::at(empty.path()).expect("root");
        match read_gpus(&host) {
            Err(GpuError::NotRecorded { .. }) => {}
            other => panic!("expected NotRecorded, got {other:?}"),
        }
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in ".{0,200}") {
            let _ = parse_driver_version(&s);
            let _ = normalize_bus_id(&s);
            let _ = GpuSnapshot::from_json(&s);
        }
    }
}

#[cfg(test)]
mod live_tests {
    /// On a machine without the NVIDIA libraries (CI) the live probe reports why, never panics;
    /// on a GPU machine it must find at least one GPU with a UUID.
    #[test]
    fn live_probe_never_panics() {
        let s = super::gather_live();
        assert_eq!(s.schema, super::SCHEMA);
        if let Some(reason) = s.unavailable_reason() {
            assert!(s.gpus.is_empty());
            assert!(
                reason.contains("NVML") && reason.contains("CUDA"),
                "{reason}"
            );
        } else {
            for g in &s.gpus {
                assert!(!g.uuid.is_empty());
            }
        }
    }
}

#[cfg(test)]
mod cache_tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    static CUDA_READS: AtomicU32 = AtomicU32::new(0);

    fn fake_cuda() -> (LibStatus, cuda::CudaPart) {
        CUDA_READS.fetch_add(1, Ordering::SeqCst);
        let part = cuda::CudaPart {
            driver_version: Some(13000),
            device_order: Some("PCI_BUS_ID".into()),
            devices: vec![(
                "GPU-0000aaaa-1111-2222-3333-444455556666".into(),
                CudaAttrs {
                    ordinal: Some(0),
                    gpu_direct_rdma_supported: Some(true),
                    ..Default::default()
                },
            )],
            init_ms: Some(200.0),
            query_ms: Some(0.1),
        };
        (LibStatus::Ok, part)
    }

    /// The whole live path with a fake procfs and a fake CUDA: the first run of a boot reads
    /// CUDA and stores; the second takes the attributes from the cache (no cuInit) and says so
    /// in the facts; a reboot reads CUDA again.
    #[test]
    fn live_gather_uses_the_cache_within_a_boot_only() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path();
        std::fs::create_dir_all(p.join("proc/sys/kernel/random")).expect("mkdir");
        std::fs::write(p.join("proc/sys/kernel/random/boot_id"), "boot-1\n").expect("w");
        std::fs::create_dir_all(p.join("proc/driver/nvidia/gpus")).expect("mkdir");
        std::fs::create_dir_all(p.join("sys/module/nvidia")).expect("mkdir");
        std::fs::write(
            p.join("proc/driver/nvidia/version"),
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n",
        )
        .expect("w");
        let host = Host::at(p).expect("root");
        let cache = p.join("run/daqtune/cuda-attrs.json");
        let before = CUDA_READS.load(Ordering::SeqCst);
        let first = gather_live_at(&host, &cache, CacheMode::Use, fake_cuda, false);
        assert_eq!(CUDA_READS.load(Ordering::SeqCst), before + 1);
        assert_eq!(
            first.cuda_cache.as_ref().map(|c| c.outcome),
            Some(CacheOutcome::Stored)
        );
        let second = gather_live_at(&host, &cache, CacheMode::Use, fake_cuda, false);
        assert_eq!(CUDA_READS.load(Ordering::SeqCst), before + 1, "no cuInit");
        let used = second.cuda_cache.as_ref().expect("cache use reported");
        assert_eq!(used.outcome, CacheOutcome::Hit);
        assert_eq!(second.timing.cuda_init_ms, None);
        assert!(second.cuda.is_ok());
        assert_eq!(second.cuda_driver_version, Some(13000));
        let g = second
            .gpus
            .iter()
            .find(|g| g.uuid.starts_with("GPU-0000aaaa"))
            .expect("cached device joined");
        assert_eq!(
            g.cuda.as_ref().and_then(|c| c.gpu_direct_rdma_supported),
            Some(true)
        );
        std::fs::write(p.join("proc/sys/kernel/random/boot_id"), "boot-2\n").expect("w");
        let third = gather_live_at(&host, &cache, CacheMode::Use, fake_cuda, false);
        assert_eq!(CUDA_READS.load(Ordering::SeqCst), before + 2);
        assert_eq!(
            third.cuda_cache.as_ref().map(|c| c.outcome),
            Some(CacheOutcome::Stored)
        );
        // `--no-cache`: CUDA is read afresh and the cache rewritten.
        let fourth = gather_live_at(&host, &cache, CacheMode::Refresh, fake_cuda, false);
        assert_eq!(CUDA_READS.load(Ordering::SeqCst), before + 3);
        assert_eq!(
            fourth.cuda_cache.as_ref().map(|c| c.outcome),
            Some(CacheOutcome::Bypassed)
        );
    }

    /// `--root` replays the recorded facts even when the root holds a cache file that matches
    /// its own procfs: the cache is a live-host optimisation only.
    #[test]
    fn a_host_root_never_consults_the_cache() {
        let d = tempfile::tempdir().expect("tmp");
        let mut recorded = GpuSnapshot::empty(LibStatus::Ok, LibStatus::Ok);
        recorded.driver_version = Some("580.95.05".into());
        write_facts(d.path(), &recorded).expect("facts");
        std::fs::create_dir_all(d.path().join("run/daqtune")).expect("mkdir");
        std::fs::write(d.path().join("run/daqtune/cuda-attrs.json"), "{}").expect("w");
        let host = Host::at(d.path()).expect("root");
        let got = read_gpus_with(&host, CacheMode::Use).expect("recorded");
        assert_eq!(got, recorded);
        assert!(got.cuda_cache.is_none());
    }
}
