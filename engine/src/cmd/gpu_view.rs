//! `daqtune gpu`: the GPU facts the checks judge (BAR1, clocks, persistence, GPUDirect and
//! dma-buf attributes, NUMA node, PCIe link, NVLink), as `nvidia-smi -q` shows its own, each
//! value with where it came from: NVML, the CUDA driver API (or this boot's CUDA attribute
//! cache), or sysfs. From the live host, or from a root's recorded `daqtune/gpu.json`.

use crate::check::commands::{GlobalOptions, UsageError};
use crate::check::run_info::rfc3339;
use crate::hostroot::open_host;
use daqtune_probe::gpu::{CacheOutcome, CacheUse, DomainClocks, GpuFacts, GpuSnapshot};
use daqtune_probe::Host;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

pub const SCHEMA: &str = "daqtune.gpu-view/v1";

/// Where a value came from.
pub const NVML: &str = "NVML";
pub const CUDA: &str = "CUDA";
pub const CUDA_CACHE: &str = "CUDA cache";
pub const SYSFS: &str = "sysfs";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuView {
    pub schema: String,
    pub root: String,
    pub source: FactsSource,
    /// Driver-wide facts (driver, NVML and CUDA versions).
    pub driver: Vec<Fact>,
    pub gpus: Vec<GpuEntry>,
    /// Why no GPU facts could be had at all (no driver libraries, no recorded file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// How the facts were had.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FactsSource {
    /// `live` (NVML and CUDA on this machine) or `recorded` (the root's facts file).
    pub kind: String,
    /// The facts file of a recorded root (`daqtune/gpu.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_at: Option<String>,
    /// `ok`, or why NVML was not available.
    pub nvml: String,
    /// `ok`, or why CUDA was not available.
    pub cuda: String,
    /// The CUDA attribute cache of this boot (live only): whether the attributes came from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_cache: Option<CacheUse>,
    /// A capture `--root` was imported from: its files and kinds (the import manifest's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuEntry {
    pub uuid: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    pub facts: Vec<Fact>,
}

/// One value and its source. `value` is `None` when the source did not give it, with `note`
/// saying why where the source said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    pub field: String,
    pub value: Option<String>,
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

fn fact(field: &str, value: Option<String>, source: &str) -> Fact {
    Fact {
        field: field.into(),
        value,
        source: source.into(),
        note: None,
    }
}

/// The view of the host `g` names (live, or a root with recorded facts).
pub fn gather(g: &GlobalOptions) -> Result<GpuView, UsageError> {
    let host = open_host(g)?;
    // Live, the view reads every fact, the NVLinks too, which the checks' gathering leaves
    // out for speed; a root shows what its facts file recorded.
    if host.is_live() {
        let snap = daqtune_probe::gpu::gather_live_all(g.gpu_cache_mode());
        return Ok(view(&host, &snap));
    }
    let facts = g.facts(&host);
    let mut v = match facts.gpus() {
        Ok(snap) => view(&host, snap),
        Err(why) => GpuView {
            schema: SCHEMA.into(),
            root: host.root().display().to_string(),
            source: FactsSource {
                kind: kind(&host).into(),
                file: file(&host),
                captured_at: None,
                nvml: "-".into(),
                cuda: "-".into(),
                cuda_cache: None,
                imported_from: None,
            },
            driver: Vec::new(),
            gpus: Vec::new(),
            unavailable: Some(why.to_string()),
        },
    };
    v.root = host.shown_root();
    if let Some(Ok(m)) = crate::model::capture::manifest(&facts) {
        v.source.imported_from = Some(m.captures().join(", "));
        // "no recorded GPU facts (daqtune/gpu.json)" would name a file of the temporary import.
        if v.gpus.is_empty() && !m.covers.contains(&crate::model::capture::Source::Gpu) {
            v.unavailable = Some(
                "not in this capture (none of its files is an nvidia-smi -q / -q -x output or an nvidia-bug-report)"
                    .into(),
            );
        }
    }
    Ok(v)
}

fn kind(host: &Host) -> &'static str {
    if host.is_live() {
        "live"
    } else {
        "recorded"
    }
}

fn file(host: &Host) -> Option<String> {
    (!host.is_live()).then(|| {
        daqtune_probe::gpu::FACTS_PATH
            .trim_start_matches('/')
            .to_string()
    })
}

/// The view of a facts snapshot; sysfs values are read through `host`.
pub fn view(host: &Host, snap: &GpuSnapshot) -> GpuView {
    // The Xid lines the driver logged since boot: /dev/kmsg live (root only), the snapshot's
    // copy under a root. `None`: not readable.
    let xids = if host.is_live() {
        crate::model::facts::read_kmsg()
    } else {
        host.read_string(crate::model::facts::KMSG_COPY).ok()
    }
    .map(|log| daqtune_probe::gpu::xid::parse_xid_events(&log));
    let status = |s: &daqtune_probe::gpu::LibStatus| s.reason().unwrap_or("ok").to_string();
    let cache = snap.cuda_cache.clone().filter(|_| host.is_live());
    // The CUDA attributes' source: the cache when this run took them from it.
    let cuda_src = match &cache {
        Some(c) if c.outcome == CacheOutcome::Hit => CUDA_CACHE,
        _ => CUDA,
    };
    let driver = vec![
        fact("driver version", snap.driver_version.clone(), NVML),
        fact("NVML version", snap.nvml_version.clone(), NVML),
        fact(
            "CUDA driver version",
            snap.cuda_driver_version
                .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10)),
            CUDA,
        ),
    ];
    GpuView {
        schema: SCHEMA.into(),
        root: host.root().display().to_string(),
        source: FactsSource {
            kind: kind(host).into(),
            file: file(host),
            captured_at: snap.captured_unix.map(rfc3339),
            nvml: status(&snap.nvml),
            cuda: status(&snap.cuda),
            cuda_cache: cache,
            imported_from: None,
        },
        driver,
        gpus: snap
            .gpus
            .iter()
            .map(|g| entry(host, g, cuda_src, xids.as_deref()))
            .collect(),
        unavailable: snap.unavailable_reason(),
    }
}

/// The Xid events of this GPU since boot, each code once with its count and meaning.
fn xid_fact(g: &GpuFacts, xids: Option<&[daqtune_probe::gpu::xid::XidEvent]>) -> Fact {
    let src = "kernel log";
    let (Some(events), Some(bus)) = (xids, g.pci_bus_id.as_deref()) else {
        let mut f = fact("Xid events since boot", None, src);
        f.note = Some(if xids.is_none() {
            "the kernel log could not be read (root needed on a live host)".into()
        } else {
            "this GPU has no PCI address to match Xid lines by".into()
        });
        return f;
    };
    let counts = crate::tunables::gpu_health::xid_counts(events, bus);
    let value = if counts.is_empty() {
        "none".to_string()
    } else {
        counts
            .iter()
            .map(|(c, n)| {
                let (_, meaning) = crate::tunables::gpu_health::xid_grade(*c);
                format!("Xid {c} x{n} ({meaning})")
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    fact("Xid events since boot", Some(value), src)
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

fn clocks(c: &DomainClocks) -> Option<String> {
    let mhz = |v: Option<u32>| v.map_or("-".to_string(), |v| format!("{v} MHz"));
    if c.current_mhz.is_none() && c.max_mhz.is_none() {
        return None;
    }
    let mut s = format!("{} (max {}", mhz(c.current_mhz), mhz(c.max_mhz));
    if c.applications_mhz.is_some() {
        let _ = write!(s, ", applications {}", mhz(c.applications_mhz));
    }
    if c.pstate_min_mhz.is_some() || c.pstate_max_mhz.is_some() {
        let _ = write!(
            s,
            ", P-state range {}-{}",
            mhz(c.pstate_min_mhz),
            mhz(c.pstate_max_mhz)
        );
    }
    s.push(')');
    Some(s)
}

fn entry(
    host: &Host,
    g: &GpuFacts,
    cuda_src: &str,
    xids: Option<&[daqtune_probe::gpu::xid::XidEvent]>,
) -> GpuEntry {
    let why = |k: &str| g.unavailable.get(k).cloned();
    let with_note = |mut f: Fact, keys: &[&str]| {
        if f.value.is_none() {
            f.note = keys.iter().find_map(|k| why(k));
        }
        f
    };
    let cuda = g.cuda.as_ref();
    // Attributes read on another GPU of the same model say so in their source.
    let csrc = match cuda.and_then(|c| c.read_from.as_deref()) {
        Some(other) => format!("{cuda_src}, read on {other} (same model)"),
        None => cuda_src.to_string(),
    };
    let cuda_bool =
        |f: fn(&daqtune_probe::gpu::CudaAttrs) -> Option<bool>| cuda.and_then(f).map(yes_no);
    let mut facts = vec![
        with_note(fact("brand", g.brand.clone(), NVML), &["brand"]),
        with_note(
            fact("persistence mode", g.persistence_mode.map(yes_no), NVML),
            &["persistence_mode", "persistence"],
        ),
        with_note(
            fact("P-state", g.pstate.map(|p| format!("P{p}")), NVML),
            &["pstate"],
        ),
        with_note(
            fact("SM clock", clocks(&g.sm_clock), NVML),
            &["sm_clock", "clocks"],
        ),
        match g.memory_clock_domain {
            Some(false) => fact(
                "memory clock",
                Some("no memory clock domain (unified memory)".into()),
                NVML,
            ),
            _ => with_note(
                fact("memory clock", clocks(&g.memory_clock), NVML),
                &["memory_clock", "clocks"],
            ),
        },
        with_note(
            fact(
                "clock event reasons",
                g.clock_event_reasons.map(|r| {
                    let names: Vec<&str> = daqtune_probe::gpu::CLOCK_EVENT_REASONS
                        .iter()
                        .filter(|(bit, _)| r & bit != 0)
                        .map(|(_, n)| *n)
                        .collect();
                    if names.is_empty() {
                        format!("0x{r:x} (none)")
                    } else {
                        format!("0x{r:x} ({})", names.join(", "))
                    }
                }),
                NVML,
            ),
            &["clock_event_reasons"],
        ),
        with_note(
            fact(
                "temperature",
                g.health.temperature_c.map(|t| {
                    let lim = |v: Option<u32>| v.map_or("-".to_string(), |v| format!("{v} C"));
                    format!(
                        "{t} C (slowdown {}, shutdown {})",
                        lim(g.health.slowdown_temp_c),
                        lim(g.health.shutdown_temp_c)
                    )
                }),
                NVML,
            ),
            &["health.temperature"],
        ),
        with_note(
            fact(
                "power draw",
                g.health
                    .power_draw_mw
                    .map(|p| match g.health.power_limit_mw {
                        Some(l) => format!(
                            "{:.1} W of {:.1} W enforced limit",
                            p as f64 / 1e3,
                            l as f64 / 1e3
                        ),
                        None => format!("{:.1} W", p as f64 / 1e3),
                    }),
                NVML,
            ),
            &["health.power_draw"],
        ),
        with_note(
            fact(
                "ECC",
                match (
                    g.health.ecc_enabled,
                    g.health.ecc_volatile_uncorrected,
                    g.health.ecc_aggregate_uncorrected,
                ) {
                    (None, None, None) => None,
                    (on, vu, au) => {
                        let n = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
                        Some(format!(
                            "{}; uncorrectable {} volatile, {} aggregate; correctable {} volatile, {} aggregate",
                            match on {
                                Some(true) => "on",
                                Some(false) => "off",
                                None => "mode unknown",
                            },
                            n(vu),
                            n(au),
                            n(g.health.ecc_volatile_corrected),
                            n(g.health.ecc_aggregate_corrected)
                        ))
                    }
                },
                NVML,
            ),
            &["health.ecc_mode", "health.ecc_volatile_uncorrected"],
        ),
        with_note(
            fact(
                "remapped rows",
                g.health.remapped_rows.map(|r| {
                    format!(
                        "{} correctable, {} uncorrectable; pending {}; failure {}",
                        r.correctable,
                        r.uncorrectable,
                        yes_no(r.pending),
                        yes_no(r.failure)
                    )
                }),
                NVML,
            ),
            &["health.remapped_rows"],
        ),
        with_note(
            fact(
                "retired pages",
                match (
                    g.health.retired_pages_sbe,
                    g.health.retired_pages_dbe,
                    g.health.retired_pages_pending,
                ) {
                    (None, None, None) => None,
                    (s, d, p) => {
                        let n = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
                        Some(format!(
                            "{} single-bit, {} double-bit; pending {}",
                            n(s),
                            n(d),
                            p.map_or("-".to_string(), yes_no)
                        ))
                    }
                },
                NVML,
            ),
            &["health.retired_pages_pending", "health.retired_pages_sbe"],
        ),
        xid_fact(g, xids),
        with_note(
            fact(
                "BAR1",
                g.bar1
                    .as_ref()
                    .map(|b| format!("{} MiB ({} MiB used)", b.total_mib(), b.used_mib())),
                NVML,
            ),
            &["bar1"],
        ),
        with_note(
            fact(
                "PCIe max link (GPU and slot)",
                match (g.pcie.max_link_gen, g.pcie.max_link_width) {
                    (None, None) => None,
                    (gen, w) => Some(format!(
                        "Gen{} x{}",
                        gen.map_or("-".into(), |v| v.to_string()),
                        w.map_or("-".into(), |v| v.to_string())
                    )),
                },
                NVML,
            ),
            &["pcie"],
        ),
        fact(
            "GPUDirect RDMA supported (attr 116)",
            cuda_bool(|c| c.gpu_direct_rdma_supported),
            &csrc,
        ),
        fact(
            "dma-buf supported (attr 124)",
            cuda_bool(|c| c.dma_buf_supported),
            &csrc,
        ),
        fact("integrated (attr 18)", cuda_bool(|c| c.integrated), &csrc),
        fact(
            "compute capability",
            cuda.and_then(|c| c.compute_capability.clone()),
            &csrc,
        ),
    ];
    for f in facts
        .iter_mut()
        .filter(|f| f.source == csrc && f.value.is_none())
    {
        f.note = why("cuda").or_else(|| Some("CUDA did not see this GPU".into()));
    }
    facts.push(match &g.nvlink {
        Some(links) => fact(
            "NVLink",
            Some(if links.is_empty() {
                "no link up".into()
            } else {
                let peers: Vec<String> = links
                    .iter()
                    .map(|l| format!("{}->{}", l.link, l.remote_bus_id.as_deref().unwrap_or("?")))
                    .collect();
                format!("{} active: {}", links.len(), peers.join(" "))
            }),
            NVML,
        ),
        None => {
            let mut f = with_note(fact("NVLink", None, NVML), &["nvlink"]);
            if f.note.is_none() {
                f.note = Some("not read (no NVLink, or facts recorded before NVLink was)".into());
            }
            f
        }
    });
    if let Some(bdf) = &g.pci_bus_id {
        facts.extend(sysfs_facts(host, bdf));
    } else {
        facts.push(Fact {
            field: "NUMA node".into(),
            value: None,
            source: SYSFS.into(),
            note: Some("no PCI address (an integrated GPU)".into()),
        });
    }
    GpuEntry {
        uuid: g.uuid.clone(),
        name: g.display_name().to_string(),
        pci_bus_id: g.pci_bus_id.clone(),
        facts,
    }
}

/// NUMA node and the link as the kernel shows it (`numa_node`, `current_link_*`,
/// `max_link_*`).
fn sysfs_facts(host: &Host, bdf: &str) -> Vec<Fact> {
    let dir = format!("/sys/bus/pci/devices/{bdf}");
    let read = |name: &str| -> Result<String, String> {
        host.read_string(&format!("{dir}/{name}"))
            .map(|s| s.trim().to_string())
            .map_err(|e| e.to_string())
    };
    let one = |field: &str, r: Result<String, String>| match r {
        Ok(v) => fact(field, Some(v), SYSFS),
        Err(e) => Fact {
            field: field.into(),
            value: None,
            source: SYSFS.into(),
            note: Some(e),
        },
    };
    let numa = read("numa_node").map(|v| {
        if v == "-1" {
            "-1 (the firmware gives none)".to_string()
        } else {
            v
        }
    });
    let link = |speed: &str, width: &str| match (read(speed), read(width)) {
        (Ok(s), Ok(w)) => Ok(format!("{s} x{w}")),
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    vec![
        one("NUMA node", numa),
        one(
            "PCIe link now",
            link("current_link_speed", "current_link_width"),
        ),
        one("PCIe link max", link("max_link_speed", "max_link_width")),
    ]
}

pub fn json(v: &GpuView) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default() + "\n"
}
