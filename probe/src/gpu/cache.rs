//! A per-boot cache of what the CUDA driver and NVML say that cannot change while the same
//! driver load serves the same GPUs.
//!
//! `cuInit` costs about 200 ms on a datacenter GPU, most of a `check`. The attributes read
//! through CUDA (GPUDirect RDMA, dma-buf, integrated, compute capability, ordinal, bus id) are
//! properties of the GPU and the loaded driver: they cannot change while the same driver serves
//! the same GPUs within one boot. So the first run of a boot keeps them in
//! [`CACHE_PATH`] (`/run` is a tmpfs, emptied at every boot) and later runs read them back
//! instead of initialising CUDA.
//!
//! The same file keeps NVML's static answers per GPU ([`NvmlStatic`]: name, bus id, brand,
//! architecture, framebuffer size, maximum and default application clocks, PCIe maximum link,
//! slowdown and shutdown temperatures), so a warm run asks NVML only what moves: clocks now,
//! application clocks (`nvidia-smi -ac`), persistence, P-state, clock event reasons, BAR1 use,
//! utilisation, temperature, power draw and the enforced power limit (`nvidia-smi -pl` changes
//! it), ECC mode (a pending mode becomes current at the next GPU reset, which nothing here
//! can see) and counts, remapped rows and retired pages. NVLink is not cached: a link that
//! goes down after an error is what `topo` must show.
//!
//! The cache is trusted only when its key matches what the kernel says now, read without any
//! driver library:
//! - the boot id (`/proc/sys/kernel/random/boot_id`): a reboot, or a /run that is not a tmpfs,
//!   never carries attributes over;
//! - the driver (`/proc/driver/nvidia/version`, its NVRM line: version and open/proprietary
//!   flavour; reloading another module changes it);
//! - the module's load: the inode number of `/sys/module/nvidia`. sysfs numbers its nodes
//!   from a cyclic id allocator, so unloading and loading the module again (the same version
//!   included) makes a directory with a new number;
//! - the GPUs the driver serves (`/proc/driver/nvidia/gpus/*/information`: bus id and UUID);
//! - `CUDA_VISIBLE_DEVICES`, which changes what CUDA enumerates.
//!
//! A GPU reset (`nvidia-smi -r`) leaves every cached value as it was (none is a setting a reset
//! applies), so it need not be in the key: what a reset changes (ECC mode, volatile ECC counts,
//! pending remaps) is read live.
//!
//! Without a key (no NVIDIA kernel module, a container without those procfs/sysfs files)
//! nothing is cached. A file that is not a regular file, is writable by others than its root
//! owner, or is larger than [`MAX_CACHE_BYTES`] is ignored. Failures to read CUDA are never
//! cached, nor NVML answers other than a value or NOT_SUPPORTED. A host root (`--root`) never
//! uses the cache: it replays its recorded facts.

use super::{CudaAttrs, GpuFacts, LibStatus};
use crate::host::Host;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Host path of the cache file.
pub const CACHE_PATH: &str = "/run/daqtune/cuda-attrs.json";
/// Schema tag of the cache file.
///
/// v2 added the module's load and NVML's static answers; a v1 file is not trusted (its key
/// cannot tell a reloaded module) and is overwritten by the next run.
pub const CACHE_SCHEMA: &str = "daqtune.cuda-cache/v2";
/// A cache for 64 GPUs is about 30 KiB; anything much larger is not ours.
pub const MAX_CACHE_BYTES: u64 = 1 << 20;

/// What must be unchanged for cached attributes to hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheKey {
    pub boot_id: String,
    /// The NVRM line of /proc/driver/nvidia/version.
    pub driver: String,
    /// The inode number of `/sys/module/nvidia`: new at every load of the module.
    pub module_ino: u64,
    /// `<bus id> <uuid>` per GPU the driver serves, sorted.
    pub gpus: Vec<String>,
    /// `CUDA_VISIBLE_DEVICES` as this process sees it.
    pub cuda_visible_devices: Option<String>,
}

/// One GPU as `/proc/driver/nvidia/gpus/<bus>/information` describes it (no library needed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcGpu {
    pub bus_id: Option<String>,
    pub model: Option<String>,
    pub uuid: Option<String>,
}

/// Parse one `information` file (`Model: \t NVIDIA H100 80GB HBM3`, `GPU UUID: \t GPU-...`,
/// `Bus Location: \t 0000:c8:00.0`; fields the driver hides show as `??`).
pub fn parse_gpu_information(text: &str) -> ProcGpu {
    let mut g = ProcGpu::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if v.is_empty() || v.starts_with("??") {
            continue;
        }
        match k.trim() {
            "Model" => g.model = Some(v.to_string()),
            "GPU UUID" => g.uuid = Some(v.to_string()),
            "Bus Location" => g.bus_id = super::normalize_bus_id(v),
            _ => {}
        }
    }
    g
}

/// The GPUs the NVIDIA kernel driver serves, from procfs: names for profile detection
/// without loading NVML or CUDA, and the cache key. Empty when the module is not loaded.
pub fn proc_gpus(host: &Host) -> Vec<ProcGpu> {
    let Ok(mut dirs) = host.read_dir("/proc/driver/nvidia/gpus") else {
        return Vec::new();
    };
    dirs.sort();
    dirs.iter()
        .filter_map(|d| {
            host.read_string(&format!("/proc/driver/nvidia/gpus/{d}/information"))
                .ok()
        })
        .map(|t| parse_gpu_information(&t))
        .collect()
}

/// The key for the live state of `host`, or why none can be formed.
pub fn cache_key(host: &Host, cuda_visible_devices: Option<String>) -> Result<CacheKey, String> {
    let boot_id = host
        .read_attr("/proc/sys/kernel/random/boot_id")
        .map_err(|e| format!("no boot id: {e}"))?;
    if boot_id.is_empty() {
        return Err("the boot id is empty".into());
    }
    let version = host
        .read_string("/proc/driver/nvidia/version")
        .map_err(|e| format!("NVIDIA kernel module not loaded or hidden: {e}"))?;
    let driver = super::parse_driver_version(&version)
        .map(|d| d.nvrm_line)
        .ok_or("/proc/driver/nvidia/version has no NVRM line")?;
    // Without the load identity a reload of the same version could not be told.
    let module_ino = host
        .stat("/sys/module/nvidia")
        .map_err(|e| format!("no module identity: {e}"))?
        .ino;
    let mut gpus = Vec::new();
    for g in proc_gpus(host) {
        match (g.bus_id, g.uuid) {
            (Some(b), Some(u)) => gpus.push(format!("{b} {u}")),
            // A GPU whose UUID the driver hides cannot be told from a swapped one.
            _ => return Err("a GPU in /proc/driver/nvidia/gpus shows no UUID".into()),
        }
    }
    gpus.sort();
    Ok(CacheKey {
        boot_id,
        driver,
        module_ino,
        gpus,
        cuda_visible_devices,
    })
}

/// One device's attributes as cached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedDevice {
    pub uuid: String,
    pub attrs: CudaAttrs,
}

/// The cache file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheFile {
    pub schema: String,
    pub key: CacheKey,
    /// Seconds since the Unix epoch when CUDA was read.
    pub taken_unix: u64,
    pub cuda_driver_version: Option<i32>,
    pub cuda_device_order: Option<String>,
    pub devices: Vec<CachedDevice>,
    /// NVML's static answers per GPU; empty where NVML did not answer when stored.
    #[serde(default)]
    pub nvml: Vec<NvmlStatic>,
}

/// The keys of [`GpuFacts::unavailable`] whose NVML calls [`NvmlStatic`] answers.
pub const NVML_STATIC_KEYS: &[&str] = &[
    "name",
    "pci",
    "brand",
    "architecture",
    "memory_total",
    "sm_clock.max",
    "sm_clock.default_applications",
    "memory_clock.max",
    "memory_clock.default_applications",
    "pcie.max_link_gen",
    "pcie.max_link_width",
    "pcie.gpu_max_link_gen",
    "health.slowdown_temp",
    "health.shutdown_temp",
];

/// What NVML says about one GPU that the GPU, its VBIOS and the loaded driver fix: it cannot
/// change while the same driver load serves the GPU (see the module text for what stays live).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NvmlStatic {
    pub uuid: String,
    pub name: Option<String>,
    pub pci_bus_id: Option<String>,
    pub brand: Option<String>,
    pub architecture: Option<String>,
    pub memory_total_mib: Option<u64>,
    pub sm_max_mhz: Option<u32>,
    pub sm_default_applications_mhz: Option<u32>,
    pub memory_max_mhz: Option<u32>,
    pub memory_default_applications_mhz: Option<u32>,
    pub memory_clock_domain: Option<bool>,
    pub pcie_max_link_gen: Option<u32>,
    pub pcie_max_link_width: Option<u32>,
    pub pcie_gpu_max_link_gen: Option<u32>,
    pub slowdown_temp_c: Option<u32>,
    pub shutdown_temp_c: Option<u32>,
    /// Why a static fact is missing, under its [`NVML_STATIC_KEYS`] key (only NOT_SUPPORTED
    /// and entry points the driver's NVML lacks: both hold for the whole load).
    pub unavailable: BTreeMap<String, String>,
}

/// NVML answers that hold for the driver load, unlike a timeout or a lost GPU.
fn is_lasting(reason: &str) -> bool {
    reason.contains("NVML_ERROR_NOT_SUPPORTED") || reason.contains("NVML_ERROR_FUNCTION_NOT_FOUND")
}

impl NvmlStatic {
    /// The static part of a GPU's facts as NVML reported them; `None` when a static call
    /// failed in a way that may not last (the GPU is then asked afresh next time), or the
    /// record is not a whole NVML device.
    pub fn from_facts(g: &GpuFacts) -> Option<NvmlStatic> {
        if g.nvml_index.is_none() || g.unavailable.contains_key("device") {
            return None;
        }
        let mut unavailable = BTreeMap::new();
        for k in NVML_STATIC_KEYS {
            if let Some(r) = g.unavailable.get(*k) {
                if !is_lasting(r) {
                    return None;
                }
                unavailable.insert((*k).to_string(), r.clone());
            }
        }
        Some(NvmlStatic {
            uuid: g.uuid.clone(),
            name: g.name.clone(),
            pci_bus_id: g.pci_bus_id.clone(),
            brand: g.brand.clone(),
            architecture: g.architecture.clone(),
            memory_total_mib: g.memory_total_mib,
            sm_max_mhz: g.sm_clock.max_mhz,
            sm_default_applications_mhz: g.sm_clock.default_applications_mhz,
            memory_max_mhz: g.memory_clock.max_mhz,
            memory_default_applications_mhz: g.memory_clock.default_applications_mhz,
            memory_clock_domain: g.memory_clock_domain,
            pcie_max_link_gen: g.pcie.max_link_gen,
            pcie_max_link_width: g.pcie.max_link_width,
            pcie_gpu_max_link_gen: g.pcie.gpu_max_link_gen,
            slowdown_temp_c: g.health.slowdown_temp_c,
            shutdown_temp_c: g.health.shutdown_temp_c,
            unavailable,
        })
    }

    /// Put the static facts into a record whose live facts were just read: the record then
    /// equals what a full read would have given.
    pub fn apply(&self, g: &mut GpuFacts) {
        g.name.clone_from(&self.name);
        g.pci_bus_id.clone_from(&self.pci_bus_id);
        g.brand.clone_from(&self.brand);
        g.architecture.clone_from(&self.architecture);
        g.memory_total_mib = self.memory_total_mib;
        g.sm_clock.max_mhz = self.sm_max_mhz;
        g.sm_clock.default_applications_mhz = self.sm_default_applications_mhz;
        g.memory_clock.max_mhz = self.memory_max_mhz;
        g.memory_clock.default_applications_mhz = self.memory_default_applications_mhz;
        g.memory_clock_domain = self.memory_clock_domain;
        g.pcie.max_link_gen = self.pcie_max_link_gen;
        g.pcie.max_link_width = self.pcie_max_link_width;
        g.pcie.gpu_max_link_gen = self.pcie_gpu_max_link_gen;
        g.health.slowdown_temp_c = self.slowdown_temp_c;
        g.health.shutdown_temp_c = self.shutdown_temp_c;
        for (k, v) in &self.unavailable {
            g.unavailable.insert(k.clone(), v.clone());
        }
    }
}

impl CacheFile {
    pub fn parse(text: &str) -> Result<CacheFile, String> {
        // The schema first: an older layout is refused for what it is, not for a field it
        // lacks.
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let schema = v.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        if schema != CACHE_SCHEMA {
            return Err(format!("schema is {schema:?}, expected {CACHE_SCHEMA:?}"));
        }
        serde_json::from_value(v).map_err(|e| e.to_string())
    }
}

/// What a run did with the cache, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheOutcome {
    /// The attributes came from the cache; CUDA was not initialised.
    Hit,
    /// CUDA was read and the result stored for later runs of this boot.
    Stored,
    /// CUDA was read; the result could not be stored (`reason`).
    NotStored,
    /// CUDA was read because the caller asked for fresh facts (`--no-cache`).
    Bypassed,
    /// CUDA was read: no key could be formed or the cache did not match (`reason`).
    Miss,
}

/// How the CUDA attributes of a live run were obtained. Part of the GPU facts, so a report
/// (and a snapshot of it) says which facts came from the cache and when they were taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheUse {
    pub path: String,
    pub outcome: CacheOutcome,
    /// When the attributes in use were read from CUDA (the cache's time on a hit).
    #[serde(default)]
    pub taken_unix: Option<u64>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// Whether to use the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheMode {
    /// Read it when it matches; fill it after a fresh read.
    #[default]
    Use,
    /// Read CUDA afresh (`--no-cache`) and store the result for later runs.
    Refresh,
}

/// Read the cache file at `path` (a real path on this machine) if it can be trusted.
fn load(path: &Path) -> Result<CacheFile, String> {
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = f.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    // Only root (or this user, for a run as that user) may have written what we trust.
    let euid = crate::sys::euid();
    if meta.uid() != 0 && meta.uid() != euid {
        return Err(format!("owned by uid {}, not root", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "writable by group or others (mode {:o})",
            meta.mode() & 0o7777
        ));
    }
    if meta.len() > MAX_CACHE_BYTES {
        return Err(format!("{} bytes, over {MAX_CACHE_BYTES}", meta.len()));
    }
    let mut text = String::new();
    f.take(MAX_CACHE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    CacheFile::parse(&text)
}

fn now_unix() -> Option<u64> {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// Cached CUDA attributes, as the live probe uses them.
pub(crate) struct Cached {
    pub driver_version: Option<i32>,
    pub device_order: Option<String>,
    pub devices: Vec<(String, CudaAttrs)>,
    pub nvml: Vec<NvmlStatic>,
}

/// The cache lookup of one run: the key of the moment, and the cached attributes when they
/// match it. `path` is where the file lives on this machine (`CACHE_PATH` on the live host).
pub(crate) struct Lookup {
    path: std::path::PathBuf,
    key: Result<CacheKey, String>,
    pub hit: Option<(Cached, CacheUse)>,
    miss_reason: Option<String>,
}

pub(crate) fn lookup(key_host: &Host, path: &Path, mode: CacheMode) -> Lookup {
    let key = cache_key(key_host, std::env::var("CUDA_VISIBLE_DEVICES").ok());
    let mut l = Lookup {
        path: path.to_path_buf(),
        key,
        hit: None,
        miss_reason: None,
    };
    if mode == CacheMode::Refresh {
        return l;
    }
    let key = match &l.key {
        Ok(k) => k,
        Err(e) => {
            l.miss_reason = Some(format!("no cache key: {e}"));
            return l;
        }
    };
    match load(path) {
        Ok(file) if &file.key == key => {
            let use_ = CacheUse {
                path: path.display().to_string(),
                outcome: CacheOutcome::Hit,
                taken_unix: Some(file.taken_unix),
                reason: None,
            };
            let cached = Cached {
                driver_version: file.cuda_driver_version,
                device_order: file.cuda_device_order,
                devices: file
                    .devices
                    .into_iter()
                    .map(|d| (d.uuid, d.attrs))
                    .collect(),
                nvml: file.nvml,
            };
            l.hit = Some((cached, use_));
        }
        Ok(file) => l.miss_reason = Some(stale_reason(&file.key, key)),
        Err(e) => l.miss_reason = Some(format!("no usable cache: {e}")),
    }
    l
}

fn stale_reason(old: &CacheKey, now: &CacheKey) -> String {
    let what = if old.boot_id != now.boot_id {
        "taken in another boot"
    } else if old.driver != now.driver {
        "taken with another NVIDIA driver"
    } else if old.module_ino != now.module_ino {
        "taken before the NVIDIA module was loaded again"
    } else if old.gpus != now.gpus {
        "taken with other GPUs"
    } else {
        "taken with another CUDA_VISIBLE_DEVICES"
    };
    format!("the cache was {what}")
}

impl Lookup {
    /// After a fresh CUDA read: store it when it succeeded, and say what happened.
    pub(crate) fn store(
        self,
        mode: CacheMode,
        status: &LibStatus,
        driver_version: Option<i32>,
        device_order: Option<String>,
        devices: &[(String, CudaAttrs)],
        nvml: &[NvmlStatic],
    ) -> CacheUse {
        let taken = now_unix();
        let mut use_ = CacheUse {
            path: self.path.display().to_string(),
            outcome: if mode == CacheMode::Refresh {
                CacheOutcome::Bypassed
            } else {
                CacheOutcome::Miss
            },
            taken_unix: taken,
            reason: self.miss_reason,
        };
        let key = match self.key {
            Ok(k) => k,
            Err(e) => {
                use_.reason = Some(format!("not stored: no cache key: {e}"));
                return use_;
            }
        };
        if let LibStatus::Unavailable { reason } = status {
            use_.reason = Some(format!("not stored: CUDA failed: {reason}"));
            return use_;
        }
        let file = CacheFile {
            schema: CACHE_SCHEMA.into(),
            key,
            taken_unix: taken.unwrap_or(0),
            cuda_driver_version: driver_version,
            cuda_device_order: device_order,
            devices: devices
                .iter()
                .map(|(uuid, attrs)| CachedDevice {
                    uuid: uuid.clone(),
                    attrs: attrs.clone(),
                })
                .collect(),
            nvml: nvml.to_vec(),
        };
        let text = match serde_json::to_string_pretty(&file) {
            Ok(t) => t,
            Err(e) => {
                use_.outcome = CacheOutcome::NotStored;
                use_.reason = Some(e.to_string());
                return use_;
            }
        };
        match crate::fsutil::write_atomic(&self.path, format!("{text}\n").as_bytes(), 0o644) {
            Ok(()) => {
                if mode == CacheMode::Use {
                    use_.outcome = CacheOutcome::Stored;
                }
            }
            Err(e) => {
                use_.outcome = CacheOutcome::NotStored;
                use_.reason = Some(format!("cannot write {}: {e}", self.path.display()));
            }
        }
        use_
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const H100_INFO: &str = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t GPU-e7d5a1c2-1111-2222-3333-444455556666\nVideo BIOS: \t ??.??.??.??.??\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t 0000:c8:00.0\nDevice Minor: \t 0\nGPU Excluded:\t No\n";
    const NVRM: &str = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)  Thu Oct 30 2025\nGCC version:  gcc version 13.3.0\n";

    /// A fake procfs with one GPU; returns (root dir, cache file path).
    fn fake_host(boot: &str, nvrm: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path();
        fs::create_dir_all(p.join("proc/sys/kernel/random")).expect("mkdir");
        fs::write(
            p.join("proc/sys/kernel/random/boot_id"),
            format!("{boot}\n"),
        )
        .expect("w");
        fs::create_dir_all(p.join("proc/driver/nvidia/gpus/0000:c8:00.0")).expect("mkdir");
        fs::create_dir_all(p.join("sys/module/nvidia")).expect("mkdir");
        fs::write(p.join("proc/driver/nvidia/version"), nvrm).expect("w");
        fs::write(
            p.join("proc/driver/nvidia/gpus/0000:c8:00.0/information"),
            H100_INFO,
        )
        .expect("w");
        let cache = p.join("run/daqtune/cuda-attrs.json");
        (d, cache)
    }

    fn attrs() -> Vec<(String, CudaAttrs)> {
        vec![(
            "GPU-e7d5a1c2-1111-2222-3333-444455556666".into(),
            CudaAttrs {
                ordinal: Some(0),
                gpu_direct_rdma_supported: Some(true),
                dma_buf_supported: Some(true),
                integrated: Some(false),
                compute_capability: Some("9.0".into()),
                pci_bus_id: Some("0000:c8:00.0".into()),
                name: Some("NVIDIA H100 80GB HBM3".into()),
                read_from: None,
            },
        )]
    }

    /// One run: look up, and on a miss "read CUDA" (count it) and store.
    fn run(host: &Host, cache: &Path, mode: CacheMode, cuda_reads: &mut u32) -> CacheUse {
        let l = lookup(host, cache, mode);
        if let Some((c, u)) = l.hit {
            assert_eq!(c.devices, attrs());
            return u;
        }
        *cuda_reads += 1;
        l.store(mode, &LibStatus::Ok, Some(13000), None, &attrs(), &[])
    }

    #[test]
    fn information_file_parses() {
        let g = parse_gpu_information(H100_INFO);
        assert_eq!(g.model.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(
            g.uuid.as_deref(),
            Some("GPU-e7d5a1c2-1111-2222-3333-444455556666")
        );
        assert_eq!(g.bus_id.as_deref(), Some("0000:c8:00.0"));
        let hidden = parse_gpu_information("Model: \t NVIDIA GB10\nGPU UUID: \t ??\n");
        assert_eq!(hidden.uuid, None);
        assert_eq!(parse_gpu_information(""), ProcGpu::default());
        assert_eq!(parse_gpu_information("(null)"), ProcGpu::default());
    }

    #[test]
    fn second_run_of_a_boot_hits_and_a_reboot_misses() {
        let (d, cache) = fake_host("aaaa-1", NVRM);
        let host = Host::at(d.path()).expect("root");
        let mut reads = 0;
        assert_eq!(
            run(&host, &cache, CacheMode::Use, &mut reads).outcome,
            CacheOutcome::Stored
        );
        let hit = run(&host, &cache, CacheMode::Use, &mut reads);
        assert_eq!(hit.outcome, CacheOutcome::Hit);
        assert!(hit.taken_unix.is_some());
        assert_eq!(reads, 1, "the second run must not read CUDA");
        let meta = fs::metadata(&cache).expect("stored");
        assert_eq!(meta.mode() & 0o777, 0o644);

        // Reboot: same driver, same GPU, new boot id.
        fs::write(d.path().join("proc/sys/kernel/random/boot_id"), "bbbb-2\n").expect("w");
        let after = run(&host, &cache, CacheMode::Use, &mut reads);
        assert_eq!(after.outcome, CacheOutcome::Stored);
        assert_eq!(reads, 2);
        assert!(
            after
                .reason
                .as_deref()
                .is_some_and(|r| r.contains("another boot")),
            "{after:?}"
        );
    }

    #[test]
    fn driver_or_gpu_change_misses() {
        let (d, cache) = fake_host("aaaa-1", NVRM);
        let host = Host::at(d.path()).expect("root");
        let mut reads = 0;
        run(&host, &cache, CacheMode::Use, &mut reads);
        // The proprietary module of another version loaded in the same boot.
        fs::write(
            d.path().join("proc/driver/nvidia/version"),
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  575.57.08  Release Build\n",
        )
        .expect("w");
        let u = run(&host, &cache, CacheMode::Use, &mut reads);
        assert_eq!(reads, 2);
        assert!(u.reason.as_deref().is_some_and(|r| r.contains("driver")));
        // Another GPU appears (hot-plug, or a GPU leaving passthrough).
        let g2 = d.path().join("proc/driver/nvidia/gpus/0000:d8:00.0");
        fs::create_dir_all(&g2).expect("mkdir");
        fs::write(
            g2.join("information"),
            H100_INFO
                .replace("c8:00.0", "d8:00.0")
                .replace("444455556666", "777788889999"),
        )
        .expect("w");
        let u = run(&host, &cache, CacheMode::Use, &mut reads);
        assert_eq!(reads, 3);
        assert!(u
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("other GPUs")));
        assert_eq!(
            run(&host, &cache, CacheMode::Use, &mut reads).outcome,
            CacheOutcome::Hit
        );
        assert_eq!(reads, 3);
    }

    #[test]
    fn refresh_reads_cuda_and_overwrites() {
        let (d, cache) = fake_host("aaaa-1", NVRM);
        let host = Host::at(d.path()).expect("root");
        let mut reads = 0;
        run(&host, &cache, CacheMode::Use, &mut reads);
        let u = run(&host, &cache, CacheMode::Refresh, &mut reads);
        assert_eq!(u.outcome, CacheOutcome::Bypassed);
        assert_eq!(reads, 2);
        assert_eq!(
            run(&host, &cache, CacheMode::Use, &mut reads).outcome,
            CacheOutcome::Hit
        );
    }

    #[test]
    fn no_driver_means_no_cache_and_failures_are_not_stored() {
        let d = tempfile::tempdir().expect("tmp");
        fs::create_dir_all(d.path().join("proc/sys/kernel/random")).expect("mkdir");
        fs::write(d.path().join("proc/sys/kernel/random/boot_id"), "x\n").expect("w");
        let host = Host::at(d.path()).expect("root");
        let cache = d.path().join("run/daqtune/cuda-attrs.json");
        let l = lookup(&host, &cache, CacheMode::Use);
        assert!(l.hit.is_none());
        let u = l.store(CacheMode::Use, &LibStatus::Ok, None, None, &[], &[]);
        assert_eq!(u.outcome, CacheOutcome::Miss);
        assert!(u
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("no cache key")));
        assert!(!cache.exists());

        let (d, cache) = fake_host("aaaa-1", NVRM);
        let host = Host::at(d.path()).expect("root");
        let failed = LibStatus::Unavailable {
            reason: "cuInit failed: CUDA_ERROR_NO_DEVICE".into(),
        };
        let u = lookup(&host, &cache, CacheMode::Use).store(
            CacheMode::Use,
            &failed,
            None,
            None,
            &[],
            &[],
        );
        assert_eq!(u.outcome, CacheOutcome::Miss);
        assert!(!cache.exists(), "a failed CUDA read is never cached");
    }

    #[test]
    fn untrusted_or_garbage_files_are_ignored() {
        let (d, cache) = fake_host("aaaa-1", NVRM);
        let host = Host::at(d.path()).expect("root");
        let mut reads = 0;
        run(&host, &cache, CacheMode::Use, &mut reads);
        // World-writable: anyone could have planted it.
        fs::set_permissions(&cache, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .expect("chmod");
        let l = lookup(&host, &cache, CacheMode::Use);
        assert!(l.hit.is_none());
        assert!(l
            .miss_reason
            .as_deref()
            .is_some_and(|r| r.contains("writable")));
        fs::write(&cache, "(null)").expect("w");
        fs::set_permissions(&cache, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .expect("chmod");
        assert!(lookup(&host, &cache, CacheMode::Use).hit.is_none());
        fs::remove_file(&cache).expect("rm");
        fs::create_dir(&cache).expect("a directory where the file should be");
        let l = lookup(&host, &cache, CacheMode::Use);
        assert!(l.hit.is_none());
        let u = l.store(CacheMode::Use, &LibStatus::Ok, None, None, &attrs(), &[]);
        assert_eq!(u.outcome, CacheOutcome::NotStored);
    }

    #[test]
    fn visible_devices_are_part_of_the_key() {
        let (d, _) = fake_host("aaaa-1", NVRM);
        let host = Host::at(d.path()).expect("root");
        let a = cache_key(&host, None).expect("key");
        let b = cache_key(&host, Some("1".into())).expect("key");
        assert_ne!(a, b);
        assert_eq!(
            stale_reason(&a, &b),
            "the cache was taken with another CUDA_VISIBLE_DEVICES"
        );
    }

    /// The NVIDIA module unloaded and loaded again within the boot, the same version: the
    /// NVRM line is unchanged, /sys/module/nvidia is a new directory.
    #[test]
    fn a_module_reload_of_the_same_version_misses() {
        let (d, cache) = fake_host("aaaa-1", NVRM);
        let host = Host::at(d.path()).expect("root");
        let mut reads = 0;
        run(&host, &cache, CacheMode::Use, &mut reads);
        assert_eq!(
            run(&host, &cache, CacheMode::Use, &mut reads).outcome,
            CacheOutcome::Hit
        );
        // Made before the old one goes, so the two cannot share an inode number.
        let module = d.path().join("sys/module/nvidia");
        let again = d.path().join("sys/module/nvidia.new");
        fs::create_dir(&again).expect("mkdir");
        fs::remove_dir(&module).expect("rmdir");
        fs::rename(&again, &module).expect("rename");
        let u = run(&host, &cache, CacheMode::Use, &mut reads);
        assert_eq!(reads, 2, "a reloaded module's GPUs are read afresh");
        assert!(
            u.reason
                .as_deref()
                .is_some_and(|r| r.contains("loaded again")),
            "{u:?}"
        );
        // No module directory (a container without /sys/module): no key, nothing cached.
        fs::remove_dir(&module).expect("rmdir");
        let l = lookup(&host, &cache, CacheMode::Use);
        assert!(l.hit.is_none());
        assert!(l
            .miss_reason
            .as_deref()
            .is_some_and(|r| r.contains("no module identity")));
    }

    /// NVML's static answers are stored beside the CUDA attributes and come back on a hit.
    #[test]
    fn nvml_statics_are_stored_and_read_back() {
        let (d, cache) = fake_host("aaaa-1", NVRM);
        let host = Host::at(d.path()).expect("root");
        let mut unavailable = BTreeMap::new();
        unavailable.insert(
            "sm_clock.default_applications".to_string(),
            "Not Supported (NVML_ERROR_NOT_SUPPORTED)".to_string(),
        );
        let stat = NvmlStatic {
            uuid: "GPU-e7d5a1c2-1111-2222-3333-444455556666".into(),
            name: Some("NVIDIA H100 80GB HBM3".into()),
            sm_max_mhz: Some(1980),
            slowdown_temp_c: Some(87),
            unavailable,
            ..NvmlStatic::default()
        };
        let l = lookup(&host, &cache, CacheMode::Use);
        assert!(l.hit.is_none());
        l.store(
            CacheMode::Use,
            &LibStatus::Ok,
            None,
            None,
            &attrs(),
            std::slice::from_ref(&stat),
        );
        let (c, _) = lookup(&host, &cache, CacheMode::Use).hit.expect("hit");
        assert_eq!(c.nvml, vec![stat.clone()]);
        let mut g = GpuFacts::default();
        stat.apply(&mut g);
        assert_eq!(g.sm_clock.max_mhz, Some(1980));
        assert_eq!(g.health.slowdown_temp_c, Some(87));
        assert!(g.unavailable.contains_key("sm_clock.default_applications"));
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in ".{0,300}") {
            let _ = parse_gpu_information(&s);
            let _ = CacheFile::parse(&s);
        }
    }
}
