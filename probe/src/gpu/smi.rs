//! `nvidia-smi -q -x` (XML) and `nvidia-smi -q` (text) captures as GPU facts
//! ([`GpuSnapshot`], the format of `daqtune/gpu.json`).
//!
//! nvidia-smi prints NVML's answers: name, brand, UUID, bus id, persistence mode, P-state,
//! utilisation, clocks (current, applications, default applications, max), clock event
//! ("throttle") reasons, BAR1 and the PCIe link. It prints none of CUDA's device attributes
//! (GPUDirect RDMA and dma-buf support, integrated, compute capability) nor the P-state's
//! clock range, so those stay unknown: CUDA is recorded as unavailable with the reason.

use super::{
    Bar1, DomainClocks, GpuFacts, GpuHealth, GpuSnapshot, LibStatus, PcieFacts, RemappedRows,
    SCHEMA,
};
use crate::pci::PciAddr;
use std::collections::BTreeMap;

/// A capture is read whole up to this: one GPU's `-q -x` is ~20 KB, a 16-GPU host's ~400 KB.
pub const MAX_TEXT: usize = 16 * 1024 * 1024;
/// More GPUs than any host has.
const MAX_GPUS: usize = 1024;

/// Why text is not an nvidia-smi capture, with the 1-based line.
pub use crate::text::LineError as SmiError;

/// Whether `text` is `nvidia-smi -q -x` output (its root element).
pub fn looks_like_xml(text: &str) -> bool {
    let head: String = text.chars().take(4096).collect();
    head.contains("<nvidia_smi_log")
}

/// Whether `text` is `nvidia-smi -q` output (the `==NVSMI LOG==` banner, or a `GPU BUS-ID`
/// section under `Attached GPUs`).
pub fn looks_like_text(text: &str) -> bool {
    let head: String = text.chars().take(4096).collect();
    head.contains("NVSMI LOG")
        || (head.contains("Attached GPUs") && head.contains("Driver Version"))
}

/// One GPU's fields by path (`pci/pci_bus_id` in XML, `PCI/Bus Id` in text), with the line.
type Fields = Vec<(String, String, usize)>;

struct Parsed {
    top: Fields,
    gpus: Vec<(usize, Fields)>,
}

fn line_of(text: &str, pos: usize) -> usize {
    text[..pos.min(text.len())]
        .bytes()
        .filter(|b| *b == b'\n')
        .count()
        + 1
}

fn parse_xml(text: &str) -> Result<Parsed, SmiError> {
    let opt = roxmltree::ParsingOptions {
        allow_dtd: true,
        nodes_limit: 4_000_000,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(text, opt).map_err(|e| SmiError {
        line: e.pos().row as usize,
        message: format!("not well-formed XML: {e}"),
    })?;
    let root = doc.root_element();
    if root.tag_name().name() != "nvidia_smi_log" {
        return Err(SmiError {
            line: line_of(text, root.range().start),
            message: format!(
                "root element <{}>, expected <nvidia_smi_log> (nvidia-smi -q -x)",
                root.tag_name().name()
            ),
        });
    }
    let mut p = Parsed {
        top: Vec::new(),
        gpus: Vec::new(),
    };
    for c in root.children().filter(|c| c.is_element()) {
        let line = line_of(text, c.range().start);
        if c.tag_name().name() == "gpu" {
            if p.gpus.len() >= MAX_GPUS {
                return Err(SmiError {
                    line,
                    message: format!("more than {MAX_GPUS} GPUs"),
                });
            }
            let mut f = Vec::new();
            collect_xml(text, c, "", &mut f, 0);
            p.gpus.push((line, f));
        } else if let Some(t) = c.text() {
            p.top
                .push((c.tag_name().name().to_string(), t.trim().to_string(), line));
        }
    }
    Ok(p)
}

fn collect_xml(text: &str, n: roxmltree::Node, prefix: &str, out: &mut Fields, depth: usize) {
    // MIG devices repeat BAR1 and memory under mig_devices: a GPU's own fields are its
    // sections, not its instances'.
    if depth > 8 {
        return;
    }
    for c in n.children().filter(|c| c.is_element()) {
        let name = c.tag_name().name();
        if name == "mig_devices" || name == "processes" {
            continue;
        }
        let path = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}/{name}")
        };
        if c.children().any(|x| x.is_element()) {
            collect_xml(text, c, &path, out, depth + 1);
        } else {
            let v = c.text().unwrap_or("").trim().to_string();
            out.push((path, v, line_of(text, c.range().start)));
        }
    }
}

fn parse_text(text: &str) -> Result<Parsed, SmiError> {
    let mut p = Parsed {
        top: Vec::new(),
        gpus: Vec::new(),
    };
    // The sections open above each line: (indent, name).
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut cur: Option<(usize, Fields)> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim_end();
        if line.trim().is_empty() || line.starts_with("====") {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if indent == 0 {
            if let Some(bus) = t.strip_prefix("GPU ") {
                if bus.parse::<PciAddr>().is_ok() || bus.starts_with("0000") {
                    if let Some(g) = cur.take() {
                        p.gpus.push(g);
                    }
                    if p.gpus.len() >= MAX_GPUS {
                        return Err(SmiError {
                            line: n,
                            message: format!("more than {MAX_GPUS} GPUs"),
                        });
                    }
                    cur = Some((n, vec![("pci/pci_bus_id".into(), bus.trim().into(), n)]));
                    stack.clear();
                    continue;
                }
            }
        }
        while stack.last().is_some_and(|s| s.0 >= indent) {
            stack.pop();
        }
        match t
            .split_once(" : ")
            .or_else(|| t.strip_suffix(" :").map(|k| (k, "")))
        {
            Some((k, v)) => {
                let mut path: Vec<&str> = stack.iter().map(|s| s.1.as_str()).collect();
                path.push(k.trim());
                let path = path.join("/");
                match cur.as_mut() {
                    Some((_, f)) => f.push((path, v.trim().to_string(), n)),
                    None => p.top.push((path, v.trim().to_string(), n)),
                }
            }
            None => stack.push((indent, t.to_string())),
        }
    }
    if let Some(g) = cur.take() {
        p.gpus.push(g);
    }
    Ok(p)
}

/// The same field in the two spellings.
struct Field {
    xml: &'static [&'static str],
    text: &'static [&'static str],
}

const NAME: Field = Field {
    xml: &["product_name"],
    text: &["Product Name"],
};
const BRAND: Field = Field {
    xml: &["product_brand"],
    text: &["Product Brand"],
};
const UUID: Field = Field {
    xml: &["uuid"],
    text: &["GPU UUID"],
};
const BUS_ID: Field = Field {
    xml: &["pci/pci_bus_id"],
    text: &["PCI/Bus Id", "pci/pci_bus_id"],
};
const PERSISTENCE: Field = Field {
    xml: &["persistence_mode"],
    text: &["Persistence Mode"],
};
const PSTATE: Field = Field {
    xml: &["performance_state"],
    text: &["Performance State"],
};
const UTIL: Field = Field {
    xml: &["utilization/gpu_util"],
    text: &["Utilization/Gpu"],
};
const SM_NOW: Field = Field {
    xml: &["clocks/sm_clock"],
    text: &["Clocks/SM"],
};
const MEM_NOW: Field = Field {
    xml: &["clocks/mem_clock"],
    text: &["Clocks/Memory"],
};
const SM_MAX: Field = Field {
    xml: &["max_clocks/sm_clock"],
    text: &["Max Clocks/SM"],
};
const MEM_MAX: Field = Field {
    xml: &["max_clocks/mem_clock"],
    text: &["Max Clocks/Memory"],
};
const SM_APP: Field = Field {
    xml: &["applications_clocks/graphics_clock"],
    text: &["Applications Clocks/Graphics"],
};
const MEM_APP: Field = Field {
    xml: &["applications_clocks/mem_clock"],
    text: &["Applications Clocks/Memory"],
};
const SM_DEF: Field = Field {
    xml: &["default_applications_clocks/graphics_clock"],
    text: &["Default Applications Clocks/Graphics"],
};
const MEM_DEF: Field = Field {
    xml: &["default_applications_clocks/mem_clock"],
    text: &["Default Applications Clocks/Memory"],
};
const BAR1_TOTAL: Field = Field {
    xml: &["bar1_memory_usage/total"],
    text: &["BAR1 Memory Usage/Total"],
};
const BAR1_USED: Field = Field {
    xml: &["bar1_memory_usage/used"],
    text: &["BAR1 Memory Usage/Used"],
};
const GEN_MAX: Field = Field {
    xml: &["pci/pci_gpu_link_info/pcie_gen/max_link_gen"],
    text: &["PCI/GPU Link Info/PCIe Generation/Max"],
};
const GEN_NOW: Field = Field {
    xml: &["pci/pci_gpu_link_info/pcie_gen/current_link_gen"],
    text: &["PCI/GPU Link Info/PCIe Generation/Current"],
};
const GEN_DEV_MAX: Field = Field {
    xml: &["pci/pci_gpu_link_info/pcie_gen/max_device_link_gen"],
    text: &["PCI/GPU Link Info/PCIe Generation/Device Max"],
};
const WIDTH_MAX: Field = Field {
    xml: &["pci/pci_gpu_link_info/link_widths/max_link_width"],
    text: &["PCI/GPU Link Info/Link Width/Max"],
};
const WIDTH_NOW: Field = Field {
    xml: &["pci/pci_gpu_link_info/link_widths/current_link_width"],
    text: &["PCI/GPU Link Info/Link Width/Current"],
};

const ARCH: Field = Field {
    xml: &["product_architecture"],
    text: &["Product Architecture"],
};
const FB_TOTAL: Field = Field {
    xml: &["fb_memory_usage/total"],
    text: &["FB Memory Usage/Total"],
};
const TEMP: Field = Field {
    xml: &["temperature/gpu_temp"],
    text: &["Temperature/GPU Current Temp"],
};
// Absolute thresholds (drivers before 550 or so), and the T.Limit form of newer ones: the
// headroom to the max operating temperature and each threshold's offset from it.
const TEMP_SLOW: Field = Field {
    xml: &["temperature/gpu_temp_slow_threshold"],
    text: &["Temperature/GPU Slowdown Temp"],
};
const TEMP_SHUT: Field = Field {
    xml: &["temperature/gpu_temp_max_threshold"],
    text: &["Temperature/GPU Shutdown Temp"],
};
const TLIMIT: Field = Field {
    xml: &["temperature/gpu_temp_tlimit"],
    text: &["Temperature/GPU T.Limit Temp"],
};
const TLIMIT_SLOW: Field = Field {
    xml: &["temperature/gpu_temp_slow_tlimit_threshold"],
    text: &["Temperature/GPU Slowdown T.Limit Temp"],
};
const TLIMIT_SHUT: Field = Field {
    xml: &["temperature/gpu_temp_max_tlimit_threshold"],
    text: &["Temperature/GPU Shutdown T.Limit Temp"],
};
const POWER_DRAW: Field = Field {
    xml: &[
        "gpu_power_readings/instant_power_draw",
        "gpu_power_readings/power_draw",
        "power_readings/power_draw",
    ],
    text: &[
        "GPU Power Readings/Instantaneous Power Draw",
        "GPU Power Readings/Power Draw",
        "Power Readings/Power Draw",
    ],
};
const POWER_LIMIT: Field = Field {
    xml: &[
        "gpu_power_readings/current_power_limit",
        "power_readings/enforced_power_limit",
    ],
    text: &[
        "GPU Power Readings/Current Power Limit",
        "Power Readings/Enforced Power Limit",
    ],
};
const ECC_MODE: Field = Field {
    xml: &["ecc_mode/current_ecc"],
    text: &["ECC Mode/Current"],
};
const REMAP_CORR: Field = Field {
    xml: &["remapped_rows/remapped_row_corr"],
    text: &["Remapped Rows/Correctable Error"],
};
const REMAP_UNC: Field = Field {
    xml: &["remapped_rows/remapped_row_unc"],
    text: &["Remapped Rows/Uncorrectable Error"],
};
const REMAP_PENDING: Field = Field {
    xml: &["remapped_rows/remapped_row_pending"],
    text: &["Remapped Rows/Pending"],
};
const REMAP_FAILURE: Field = Field {
    xml: &["remapped_rows/remapped_row_failure"],
    text: &["Remapped Rows/Remapping Failure Occurred"],
};
const RETIRE_PENDING: Field = Field {
    xml: &[
        "retired_pages/pending_retirement",
        "retired_pages/pending_blacklist",
    ],
    text: &[
        "Retired Pages/Pending Page Blacklist",
        "Retired Pages/Pending Page Retirement",
    ],
};

/// Clock event reasons: XML element suffix, text label, NVML bit.
const REASONS: &[(&str, &str, u64)] = &[
    ("gpu_idle", "Idle", 0x1),
    (
        "applications_clocks_setting",
        "Applications Clocks Setting",
        0x2,
    ),
    ("sw_power_cap", "SW Power Cap", 0x4),
    ("hw_slowdown", "HW Slowdown", 0x8),
    ("sync_boost", "Sync Boost", 0x10),
    ("sw_thermal_slowdown", "SW Thermal Slowdown", 0x20),
    ("hw_thermal_slowdown", "HW Thermal Slowdown", 0x40),
    ("hw_power_brake_slowdown", "HW Power Brake Slowdown", 0x80),
    ("display_clocks_setting", "Display Clock Setting", 0x100),
];

/// nvidia-smi's brand strings as NVML's brand names ([`super::nvml::brand_name`]).
fn brand(s: &str) -> String {
    let table = [
        ("NVIDIA Virtual Applications", "nvidia_vapps"),
        ("NVIDIA Virtual PC", "nvidia_vpc"),
        ("NVIDIA Virtual Compute Server", "nvidia_vcs"),
        ("NVIDIA RTX Virtual Workstation", "nvidia_vws"),
        ("NVIDIA Cloud Gaming", "nvidia_cloud_gaming"),
    ];
    if let Some((_, b)) = table.iter().find(|(k, _)| *k == s) {
        return (*b).to_string();
    }
    s.to_lowercase().replace(' ', "_")
}

/// A value nvidia-smi prints when it has none.
fn absent(v: &str) -> bool {
    matches!(
        v,
        "" | "N/A"
            | "[N/A]"
            | "Not Supported"
            | "[Not Supported]"
            | "Unknown Error"
            | "Requested functionality has been deprecated"
    )
}

/// `1275 MHz` -> 1275; `16x` -> 16; `0 %` -> 0; `P8` -> 8.
fn number(v: &str) -> Option<u64> {
    let t = v
        .trim()
        .trim_start_matches('P')
        .trim_end_matches(" MHz")
        .trim_end_matches(" MiB")
        .trim_end_matches(" %")
        .trim_end_matches('x');
    t.trim().parse().ok()
}

struct Gpu<'a> {
    f: &'a Fields,
    xml: bool,
    unavailable: BTreeMap<String, String>,
}

impl Gpu<'_> {
    fn get(&self, field: &Field) -> Option<(&str, usize)> {
        let keys = if self.xml { field.xml } else { field.text };
        keys.iter().find_map(|k| {
            self.f
                .iter()
                .find(|(p, _, _)| p == k)
                .map(|(_, v, l)| (v.as_str(), *l))
        })
    }
    fn text(&mut self, field: &Field, name: &str) -> Option<String> {
        match self.get(field) {
            Some((v, _)) if !absent(v) => Some(v.to_string()),
            Some((v, _)) => {
                self.unavailable.insert(name.into(), v.to_string());
                None
            }
            None => None,
        }
    }
    /// A number; a value that is neither absent nor a number is an error at its line.
    fn num(&mut self, field: &Field, name: &str, max: u64) -> Result<Option<u64>, SmiError> {
        let Some((v, line)) = self.get(field) else {
            return Ok(None);
        };
        if absent(v) {
            self.unavailable.insert(name.into(), v.to_string());
            return Ok(None);
        }
        match number(v).filter(|n| *n <= max) {
            Some(n) => Ok(Some(n)),
            None => Err(SmiError {
                line,
                message: format!("{name} `{v}`: expected a number up to {max}"),
            }),
        }
    }
    fn u32(&mut self, field: &Field, name: &str, max: u64) -> Result<Option<u32>, SmiError> {
        Ok(self
            .num(field, name, max)?
            .and_then(|n| u32::try_from(n).ok()))
    }
}

fn gpu_facts(line: usize, f: &Fields, xml: bool) -> Result<GpuFacts, SmiError> {
    let mut g = Gpu {
        f,
        xml,
        unavailable: BTreeMap::new(),
    };
    let uuid = g.text(&UUID, "uuid").ok_or_else(|| SmiError {
        line,
        message: "a GPU without its UUID (`<uuid>` / `GPU UUID`)".into(),
    })?;
    let pci_bus_id = match g.get(&BUS_ID) {
        Some((v, l)) if !absent(v) => Some(
            v.parse::<PciAddr>()
                .map_err(|e| SmiError {
                    line: l,
                    message: e,
                })?
                .to_string(),
        ),
        _ => None,
    };
    let mhz = 100_000;
    let sm_clock = DomainClocks {
        current_mhz: g.u32(&SM_NOW, "sm_clock", mhz)?,
        max_mhz: g.u32(&SM_MAX, "max_sm_clock", mhz)?,
        applications_mhz: g.u32(&SM_APP, "applications_clock", mhz)?,
        default_applications_mhz: g.u32(&SM_DEF, "default_applications_clock", mhz)?,
        pstate_min_mhz: None,
        pstate_max_mhz: None,
    };
    let memory_clock = DomainClocks {
        current_mhz: g.u32(&MEM_NOW, "mem_clock", mhz)?,
        max_mhz: g.u32(&MEM_MAX, "max_mem_clock", mhz)?,
        applications_mhz: g.u32(&MEM_APP, "applications_mem_clock", mhz)?,
        default_applications_mhz: g.u32(&MEM_DEF, "default_applications_mem_clock", mhz)?,
        pstate_min_mhz: None,
        pstate_max_mhz: None,
    };
    g.unavailable.insert(
        "pstate_clocks".into(),
        "not in an nvidia-smi -q capture (the P-state's clock range is NVML's alone)".into(),
    );
    let mib = 1 << 40;
    let bar1 = match (
        g.num(&BAR1_TOTAL, "bar1", mib)?,
        g.num(&BAR1_USED, "bar1_used", mib)?,
    ) {
        (Some(t), u) => Some(Bar1 {
            total_bytes: t * 1024 * 1024,
            used_bytes: u.unwrap_or(0) * 1024 * 1024,
        }),
        _ => None,
    };
    // Clock event reasons: both the XML's `clocks_event_reasons` (drivers from 535) and the
    // older `clocks_throttle_reasons`, and the text's "Clocks Event/Throttle Reasons".
    let mut mask = 0u64;
    let mut seen = false;
    for (p, v, _) in f {
        let hit = REASONS.iter().find(|(x, t, _)| {
            if xml {
                p.ends_with(&format!("_reason_{x}"))
            } else {
                (p.starts_with("Clocks Event Reasons/")
                    || p.starts_with("Clocks Throttle Reasons/")
                    || p.starts_with("Clocks Throttle Reasons/HW Slowdown/")
                    || p.starts_with("Clocks Event Reasons/HW Slowdown/"))
                    && p.ends_with(&format!("/{t}"))
            }
        });
        if let Some((_, _, bit)) = hit {
            seen = true;
            if v == "Active" {
                mask |= bit;
            }
        }
    }
    let pcie = PcieFacts {
        max_link_gen: g.u32(&GEN_MAX, "max_link_gen", 16)?,
        max_link_width: g.u32(&WIDTH_MAX, "max_link_width", 32)?,
        gpu_max_link_gen: g.u32(&GEN_DEV_MAX, "max_device_link_gen", 16)?,
        current_link_gen: g.u32(&GEN_NOW, "current_link_gen", 16)?,
        current_link_width: g.u32(&WIDTH_NOW, "current_link_width", 32)?,
    };
    let persistence_mode = g
        .text(&PERSISTENCE, "persistence_mode")
        .map(|v| v == "Enabled");
    let memory_clock_domain = memory_clock.current_mhz.map(|_| true);
    let architecture = g
        .text(&ARCH, "architecture")
        .map(|a| a.to_ascii_lowercase());
    let memory_total_mib = g.num(&FB_TOTAL, "memory_total", 1 << 30)?;
    let health = health(&mut g)?;
    Ok(GpuFacts {
        uuid,
        name: g.text(&NAME, "name"),
        pci_bus_id,
        nvml_index: None,
        brand: g.text(&BRAND, "brand").map(|b| brand(&b)),
        persistence_mode,
        pstate: g.u32(&PSTATE, "pstate", 32)?,
        utilization_pct: g.u32(&UTIL, "utilization", 100)?,
        sm_clock,
        memory_clock,
        memory_clock_domain,
        clock_event_reasons: seen.then_some(mask),
        bar1,
        pcie,
        nvlink: None,
        cuda: None,
        architecture,
        memory_total_mib,
        health,
        unavailable: g.unavailable,
    })
}

/// Degrees C of `38 C` / `-2 C` (T.Limit offsets are negative).
fn celsius(v: &str) -> Option<i64> {
    v.trim().trim_end_matches('C').trim().parse().ok()
}

/// Milliwatts of `78.45 W`.
fn milliwatts(v: &str) -> Option<u32> {
    let w: f64 = v.trim().trim_end_matches('W').trim().parse().ok()?;
    (w.is_finite() && (0.0..=1.0e6).contains(&w)).then(|| (w * 1000.0).round() as u32)
}

/// `Yes`/`No` (and `Enabled`/`Disabled`).
fn yes(v: &str) -> Option<bool> {
    match v.trim() {
        "Yes" | "Enabled" => Some(true),
        "No" | "Disabled" => Some(false),
        _ => None,
    }
}

/// What `gpu.health` reads (NVML's readings as nvidia-smi prints them). The thresholds come
/// from the absolute fields where the capture has them, else from the T.Limit form: on the
/// lent H200 NVML's slowdown threshold equals temperature + headroom - offset
/// (engine/tests/it/gpu.rs checks it against both).
fn health(g: &mut Gpu) -> Result<GpuHealth, SmiError> {
    let deg = |g: &Gpu, f: &Field| g.get(f).and_then(|(v, _)| celsius(v));
    let temp = deg(g, &TEMP);
    let from_tlimit = |g: &Gpu, off: &Field| -> Option<i64> {
        let (t, head, o) = (temp?, deg(g, &TLIMIT)?, deg(g, off)?);
        Some(t + head - o)
    };
    let threshold = |g: &Gpu, abs: &Field, off: &Field| -> Option<u32> {
        deg(g, abs)
            .or_else(|| from_tlimit(g, off))
            .and_then(|c| u32::try_from(c).ok())
    };
    let uncorrected = |prefix: &str| -> Option<u64> {
        // Every uncorrectable counter of the block (DRAM, SRAM parity and SEC-DED; older
        // drivers' double-bit total), summed: any of them above zero is what the check judges.
        let mut total: Option<u64> = None;
        for (p, v, _) in g.f.iter() {
            let Some(rest) = p.strip_prefix(prefix) else {
                continue;
            };
            let r = rest.to_ascii_lowercase();
            let counts = (r.contains("uncorrectable") && !r.contains("sources"))
                || r == "double_bit/total"
                || r == "double bit/total";
            if counts {
                if let Some(n) = number(v) {
                    total = Some(total.unwrap_or(0).saturating_add(n));
                }
            }
        }
        total
    };
    let corrected = |prefix: &str| -> Option<u64> {
        let mut total: Option<u64> = None;
        for (p, v, _) in g.f.iter() {
            let Some(rest) = p.strip_prefix(prefix) else {
                continue;
            };
            let r = rest.to_ascii_lowercase();
            if r.contains("correctable") && !r.contains("uncorrectable") || r == "single_bit/total"
            {
                if let Some(n) = number(v) {
                    total = Some(total.unwrap_or(0).saturating_add(n));
                }
            }
        }
        total
    };
    let (vol, agg) = if g.xml {
        ("ecc_errors/volatile/", "ecc_errors/aggregate/")
    } else {
        ("ECC Errors/Volatile/", "ECC Errors/Aggregate/")
    };
    let flag = |g: &Gpu, f: &Field| g.get(f).and_then(|(v, _)| yes(v));
    let remapped_rows = match (
        g.u32(&REMAP_CORR, "remapped_rows", 1 << 20)?,
        g.u32(&REMAP_UNC, "remapped_rows_unc", 1 << 20)?,
        flag(g, &REMAP_PENDING),
        flag(g, &REMAP_FAILURE),
    ) {
        (Some(c), Some(u), Some(p), Some(f)) => Some(RemappedRows {
            correctable: c,
            uncorrectable: u,
            pending: p,
            failure: f,
        }),
        _ => None,
    };
    Ok(GpuHealth {
        temperature_c: temp.and_then(|t| u32::try_from(t).ok()),
        slowdown_temp_c: threshold(g, &TEMP_SLOW, &TLIMIT_SLOW),
        shutdown_temp_c: threshold(g, &TEMP_SHUT, &TLIMIT_SHUT),
        power_draw_mw: g.get(&POWER_DRAW).and_then(|(v, _)| milliwatts(v)),
        power_limit_mw: g.get(&POWER_LIMIT).and_then(|(v, _)| milliwatts(v)),
        ecc_enabled: flag(g, &ECC_MODE),
        ecc_volatile_corrected: corrected(vol),
        ecc_volatile_uncorrected: uncorrected(vol),
        ecc_aggregate_corrected: corrected(agg),
        ecc_aggregate_uncorrected: uncorrected(agg),
        // nvidia-smi prints counts of retired pages per cause, not NVML's; left unread.
        retired_pages_sbe: None,
        retired_pages_dbe: None,
        retired_pages_pending: flag(g, &RETIRE_PENDING),
        remapped_rows,
    })
}

/// Parse `nvidia-smi -q -x` or `nvidia-smi -q` into GPU facts.
pub fn parse(text: &str) -> Result<GpuSnapshot, SmiError> {
    if text.len() > MAX_TEXT {
        return Err(SmiError {
            line: 1,
            message: format!("more than {MAX_TEXT} bytes"),
        });
    }
    let xml = looks_like_xml(text);
    let p = if xml {
        parse_xml(text)?
    } else if looks_like_text(text) {
        parse_text(text)?
    } else {
        return Err(SmiError {
            line: 1,
            message: "not nvidia-smi -q output (no <nvidia_smi_log>, no NVSMI LOG banner)".into(),
        });
    };
    let top = |xk: &str, tk: &str| {
        p.top
            .iter()
            .find(|(k, _, _)| k == if xml { xk } else { tk })
            .map(|(_, v, _)| v.clone())
            .filter(|v| !absent(v))
    };
    let mut snap = GpuSnapshot::empty(
        LibStatus::Ok,
        LibStatus::Unavailable {
            reason: "not in this capture: nvidia-smi -q prints none of CUDA's device attributes \
                     (GPUDirect RDMA, dma-buf, integrated, compute capability)"
                .into(),
        },
    );
    snap.driver_version = top("driver_version", "Driver Version");
    // `12.2` as cuDriverGetVersion's 12020.
    snap.cuda_driver_version = top("cuda_version", "CUDA Version").and_then(|v| {
        let (a, b) = v.split_once('.')?;
        let (a, b): (i32, i32) = (a.parse().ok()?, b.parse().ok()?);
        (a < 1000 && b < 100).then_some(a * 1000 + b * 10)
    });
    for (i, (line, f)) in p.gpus.iter().enumerate() {
        let mut g = gpu_facts(*line, f, xml)?;
        // nvidia-smi lists GPUs in NVML's index order (the numbers `-i` takes).
        g.nvml_index = u32::try_from(i).ok();
        snap.gpus.push(g);
    }
    if snap.gpus.is_empty() {
        return Err(SmiError {
            line: 1,
            message: "no GPU in the capture (`<gpu id=...>` / `GPU 00000000:BB:DD.F`)".into(),
        });
    }
    snap.schema = SCHEMA.into();
    Ok(snap)
}

#[cfg(test)]
mod tests {
    use super::*;

    const XML: &str = r#"<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
	<driver_version>535.54.03</driver_version>
	<cuda_version>12.2</cuda_version>
	<gpu id="00000000:01:00.0">
		<product_name>NVIDIA A100-SXM4-80GB</product_name>
		<product_brand>NVIDIA</product_brand>
		<persistence_mode>Disabled</persistence_mode>
		<uuid>GPU-513536b6-7d19-9063-b049-1e69664bb298</uuid>
		<pci>
			<pci_bus_id>00000000:01:00.0</pci_bus_id>
			<pci_gpu_link_info>
				<pcie_gen>
					<max_link_gen>4</max_link_gen>
					<current_link_gen>3</current_link_gen>
					<max_device_link_gen>4</max_device_link_gen>
				</pcie_gen>
				<link_widths>
					<max_link_width>16x</max_link_width>
					<current_link_width>8x</current_link_width>
				</link_widths>
			</pci_gpu_link_info>
		</pci>
		<performance_state>P0</performance_state>
		<clocks_event_reasons>
			<clocks_event_reason_gpu_idle>Not Active</clocks_event_reason_gpu_idle>
			<clocks_event_reason_hw_thermal_slowdown>Active</clocks_event_reason_hw_thermal_slowdown>
		</clocks_event_reasons>
		<bar1_memory_usage>
			<total>131072 MiB</total>
			<used>1 MiB</used>
		</bar1_memory_usage>
		<mig_devices>
			<mig_device><bar1_memory_usage><total>32767 MiB</total></bar1_memory_usage></mig_device>
		</mig_devices>
		<utilization><gpu_util>N/A</gpu_util></utilization>
		<clocks><sm_clock>1275 MHz</sm_clock><mem_clock>1593 MHz</mem_clock></clocks>
		<max_clocks><sm_clock>1410 MHz</sm_clock><mem_clock>1593 MHz</mem_clock></max_clocks>
	</gpu>
</nvidia_smi_log>
"#;

    #[test]
    fn xml_fields() {
        assert!(looks_like_xml(XML));
        let s = parse(XML).expect("parse");
        assert_eq!(s.driver_version.as_deref(), Some("535.54.03"));
        assert_eq!(s.cuda_driver_version, Some(12020));
        let g = &s.gpus[0];
        assert_eq!(g.uuid, "GPU-513536b6-7d19-9063-b049-1e69664bb298");
        assert_eq!(g.pci_bus_id.as_deref(), Some("0000:01:00.0"));
        assert_eq!(g.brand.as_deref(), Some("nvidia"));
        assert_eq!(g.persistence_mode, Some(false));
        assert_eq!(g.pstate, Some(0));
        assert_eq!(g.utilization_pct, None);
        assert_eq!(
            g.unavailable.get("utilization").map(String::as_str),
            Some("N/A")
        );
        assert_eq!(g.bar1.map(|b| b.total_mib()), Some(131072));
        assert_eq!(
            (g.sm_clock.current_mhz, g.sm_clock.max_mhz),
            (Some(1275), Some(1410))
        );
        assert_eq!(g.clock_event_reasons, Some(0x40));
        assert_eq!(
            (
                g.pcie.max_link_gen,
                g.pcie.current_link_gen,
                g.pcie.max_link_width,
                g.pcie.current_link_width
            ),
            (Some(4), Some(3), Some(16), Some(8))
        );
        assert!(!s.cuda.is_ok());
        // The JSON the facts read back.
        assert_eq!(GpuSnapshot::from_json(&s.to_json()).expect("json"), s);
    }

    const TEXT: &str = "==============NVSMI LOG==============

Timestamp                                 : Tue Jul 22 10:00:00 2025
Driver Version                            : 575.57.08
CUDA Version                              : 12.9

Attached GPUs                             : 1
GPU 00000000:C1:00.0
    Product Name                          : NVIDIA RTX 6000 Ada Generation
    Product Brand                         : NVIDIA RTX
    Persistence Mode                      : Enabled
    GPU UUID                              : GPU-0c7d3b8a-1111-2222-3333-444455556666
    PCI
        Bus Id                            : 00000000:C1:00.0
        GPU Link Info
            PCIe Generation
                Max                       : 4
                Current                   : 1
                Device Max                : 4
            Link Width
                Max                       : 16x
                Current                   : 16x
    Performance State                     : P8
    Clocks Event Reasons
        Idle                              : Active
        HW Slowdown                       : Not Active
            HW Thermal Slowdown           : Not Active
        SW Thermal Slowdown               : Active
    BAR1 Memory Usage
        Total                             : 65536 MiB
        Used                              : 3 MiB
    Utilization
        Gpu                               : 0 %
    Clocks
        SM                                : 210 MHz
        Memory                            : 405 MHz
";

    #[test]
    fn text_fields() {
        assert!(looks_like_text(TEXT));
        let s = parse(TEXT).expect("parse");
        let g = &s.gpus[0];
        assert_eq!(g.pci_bus_id.as_deref(), Some("0000:c1:00.0"));
        assert_eq!(g.brand.as_deref(), Some("nvidia_rtx"));
        assert_eq!(g.persistence_mode, Some(true));
        assert_eq!(g.pstate, Some(8));
        assert_eq!(g.utilization_pct, Some(0));
        assert_eq!(g.bar1.map(|b| b.total_mib()), Some(65536));
        assert_eq!(g.clock_event_reasons, Some(0x1 | 0x20));
        assert_eq!(
            (g.pcie.max_link_gen, g.pcie.current_link_gen),
            (Some(4), Some(1))
        );
        assert_eq!(s.cuda_driver_version, Some(12090));
    }

    #[test]
    fn bad_input_says_the_line() {
        assert!(parse("hello").is_err());
        let e = parse("<nvidia_smi_log><gpu><uuid>x</uuid>\n<performance_state>P</performance_state></gpu></nvidia_smi_log>")
            .expect_err("bad pstate");
        assert_eq!(e.line, 2);
        let e = parse("<nvidia_smi_log>\n<gpu>\n<uuid>GPU-1</uuid>\n<bar1_memory_usage><total>99999999999999 MiB</total></bar1_memory_usage></gpu></nvidia_smi_log>")
            .expect_err("absurd bar1");
        assert_eq!(e.line, 4);
        let e = parse("<nvidia_smi_log>\n<gpu>\n<uuid>GPU-1\n").expect_err("truncated");
        assert!(e.message.contains("XML"), "{e}");
        let e = parse("<nvidia_smi_log><gpu></gpu></nvidia_smi_log>").expect_err("no uuid");
        assert!(e.message.contains("UUID"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,300}") {
            let _ = parse(&s);
            let _ = parse(&format!("<nvidia_smi_log>{s}</nvidia_smi_log>"));
            let _ = parse(&format!("==NVSMI LOG==\nGPU 00000000:01:00.0\n{s}"));
        }
    }
}
