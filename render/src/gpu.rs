//! `daqtune gpu` as text: where the facts came from, then per GPU one line per fact with its
//! source.

use daqtune_engine::gpu_view::{Fact, GpuView};
use daqtune_engine::run_info::rfc3339;
use std::fmt::Write as _;

/// The text report: per GPU, one line per fact with its source.
pub fn text(v: &GpuView) -> String {
    let mut s = String::new();
    let src = match (&v.source.kind[..], &v.source.file) {
        _ if v.source.imported_from.is_some() => format!(
            "imported from {}",
            v.source.imported_from.as_deref().unwrap_or_default()
        ),
        ("recorded", Some(f)) => format!("recorded in {}/{f}", v.root.trim_end_matches('/')),
        _ => "live (NVML and CUDA on this machine)".to_string(),
    };
    let _ = write!(s, "GPU facts: {src}");
    if let Some(t) = &v.source.captured_at {
        let _ = write!(s, ", captured {t}");
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "NVML: {}; CUDA: {}", v.source.nvml, v.source.cuda);
    // The cache says something only where CUDA's attributes were had at all.
    if let Some(c) = v
        .source
        .cuda_cache
        .as_ref()
        .filter(|_| v.source.cuda == "ok")
    {
        let taken = c.taken_unix.map(rfc3339).unwrap_or_else(|| "-".into());
        let outcome = serde_json::to_value(c.outcome)
            .ok()
            .and_then(|o| o.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = write!(
            s,
            "CUDA attribute cache {}: {outcome}, attributes read from CUDA {taken}",
            c.path
        );
        match &c.reason {
            Some(r) => {
                let _ = writeln!(s, " ({r})");
            }
            None => {
                let _ = writeln!(s);
            }
        }
    }
    if let Some(u) = &v.unavailable {
        let _ = writeln!(s, "no GPU facts: {u}");
    }
    // Field, source, value: the value last, so a long one (a clock line) wraps alone.
    let rows = |facts: &[Fact], s: &mut String| {
        let w = facts.iter().map(|f| f.field.len()).max().unwrap_or(0);
        let sw = facts
            .iter()
            .map(|f| f.source.chars().count())
            .max()
            .unwrap_or(0);
        for f in facts {
            let val = f.value.as_deref().unwrap_or("-");
            let note = f
                .note
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default();
            let _ = writeln!(s, "  {:<w$}  {:<sw$}  {val}{note}", f.field, f.source);
        }
    };
    if v.driver.iter().any(|f| f.value.is_some()) {
        let _ = writeln!(s, "driver:");
        rows(&v.driver, &mut s);
    }
    if v.gpus.is_empty() && v.unavailable.is_none() {
        let _ = writeln!(s, "no GPU");
    }
    for (i, g) in v.gpus.iter().enumerate() {
        let _ = writeln!(
            s,
            "GPU {i}: {} {}{}",
            g.name,
            g.uuid,
            g.pci_bus_id
                .as_deref()
                .map(|b| format!(" {b}"))
                .unwrap_or_default()
        );
        rows(&g.facts, &mut s);
    }
    s
}
