//! `nvidia-smi topo -m` / `topo -mp` as people paste it: the GPU <-> NIC path classes
//! (nvidia-smi's own PIX/PXB/PHB/NODE/SYS, and NV# between GPUs), each GPU's CPU and NUMA
//! affinity, and the NIC legend (`NIC0: mlx5_0`). Columns are separated by tabs or by the
//! spaces a terminal or markdown turned them into; the header's `CPU Affinity`, `NUMA
//! Affinity` and `GPU NUMA ID` (newer drivers) end the device columns.

use serde::{Deserialize, Serialize};

pub use crate::text::LineError as TopoTextError;

/// Devices (rows, columns) of one matrix.
pub const MAX_DEVICES: usize = 512;

/// One device row: a GPU (`GPU0`) or a NIC (`NIC0`, or `mlx5_0` in older drivers' headers).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopoRow {
    /// The label as printed (`GPU0`, `NIC1`, `mlx5_0`).
    pub label: String,
    /// The NIC's device name from the legend (`mlx5_0`), or the label when it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The cell towards each column, in column order (`X`, `PXB`, `NV12`, `SYS`).
    pub cells: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_affinity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_affinity: Option<String>,
    /// 1-based line of the row.
    pub line: usize,
}

/// The matrix, as the import records it (`daqtune/gpu-topo.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopoMatrix {
    pub columns: Vec<String>,
    pub rows: Vec<TopoRow>,
}

impl TopoRow {
    pub fn is_gpu(&self) -> bool {
        is_gpu_label(&self.label)
    }
}

fn is_gpu_label(l: &str) -> bool {
    l.strip_prefix("GPU")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn is_device_label(l: &str) -> bool {
    is_gpu_label(l)
        || l.strip_prefix("NIC")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        || (l.len() < 64
            && l.contains(|c: char| c.is_ascii_digit())
            && l.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
}

fn is_cell(c: &str) -> bool {
    matches!(
        c,
        "X" | "SYS" | "NODE" | "PHB" | "PXB" | "PIX" | "SOC" | "C2C"
    ) || c
        .strip_prefix("NV")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A header of device labels (`GPU0 ...`) ending in `CPU Affinity`.
pub fn looks_like(text: &str) -> bool {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            t.first().is_some_and(|f| is_gpu_label(f)) && l.contains("CPU Affinity")
        })
}

fn err(line: usize, message: impl Into<String>) -> TopoTextError {
    TopoTextError {
        line,
        message: message.into(),
    }
}

pub fn parse(text: &str) -> Result<TopoMatrix, TopoTextError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((hi, header)) = lines.next() else {
        return Err(err(1, "empty: expected `nvidia-smi topo -m` output"));
    };
    let cut = header.find("CPU Affinity").ok_or_else(|| {
        err(
            hi + 1,
            "expected a header of device columns ending in `CPU Affinity`",
        )
    })?;
    let columns: Vec<String> = header[..cut]
        .split_whitespace()
        .map(str::to_string)
        .collect();
    if columns.is_empty() || columns.len() > MAX_DEVICES {
        return Err(err(
            hi + 1,
            format!("expected 1 to {MAX_DEVICES} device columns before `CPU Affinity`"),
        ));
    }
    if let Some(bad) = columns.iter().find(|c| !is_device_label(c)) {
        return Err(err(
            hi + 1,
            format!("`{bad}`: expected a device column (GPU0, NIC0, mlx5_0)"),
        ));
    }
    let mut m = TopoMatrix {
        columns: columns.clone(),
        rows: Vec::new(),
    };
    let mut legend = false;
    for (i, l) in lines {
        let n = i + 1;
        let t = l.trim();
        if t.starts_with("Legend:") {
            legend = true;
            continue;
        }
        if legend || t == "NIC Legend:" {
            // `NIC0: mlx5_0` names a NIC column.
            if let Some((k, v)) = t.split_once(':') {
                let (k, v) = (k.trim(), v.trim());
                if let Some(r) = m.rows.iter_mut().find(|r| r.label == k) {
                    if is_device_label(v) {
                        r.name = Some(v.to_string());
                    }
                }
            }
            continue;
        }
        let toks: Vec<&str> = t.split_whitespace().collect();
        let Some(label) = toks.first() else { continue };
        if !columns.iter().any(|c| c == label) {
            return Err(err(
                n,
                format!(
                    "`{label}`: expected a row of one of the header's devices ({})",
                    columns.join(" ")
                ),
            ));
        }
        if toks.len() < 1 + columns.len() {
            return Err(err(
                n,
                format!(
                    "{} cells, expected {} (one per device column)",
                    toks.len() - 1,
                    columns.len()
                ),
            ));
        }
        let cells: Vec<String> = toks[1..=columns.len()]
            .iter()
            .map(|c| c.to_string())
            .collect();
        if let Some(bad) = cells.iter().find(|c| !is_cell(c)) {
            return Err(err(
                n,
                format!("`{bad}`: expected X, PIX, PXB, PHB, NODE, SYS or NV# in a device column"),
            ));
        }
        let rest = &toks[1 + columns.len()..];
        let label = label.to_string();
        let gpu = is_gpu_label(&label);
        m.rows.push(TopoRow {
            name: (!gpu && !label.starts_with("NIC")).then(|| label.clone()),
            label,
            cells,
            cpu_affinity: rest.first().filter(|_| gpu).map(|s| s.to_string()),
            numa_affinity: rest.get(1).filter(|_| gpu).map(|s| s.to_string()),
            line: n,
        });
    }
    if !m.rows.iter().any(|r| r.is_gpu()) {
        return Err(err(
            hi + 1,
            "no GPU row: expected `GPU0 X ...` rows under the header",
        ));
    }
    Ok(m)
}

impl TopoMatrix {
    /// The NIC columns: (column index, label, device name).
    pub fn nics(&self) -> Vec<(usize, &str, Option<&str>)> {
        self.columns
            .iter()
            .enumerate()
            .filter(|(_, c)| !is_gpu_label(c))
            .map(|(i, c)| {
                let name = self
                    .rows
                    .iter()
                    .find(|r| &r.label == c)
                    .and_then(|r| r.name.as_deref());
                (i, c.as_str(), name)
            })
            .collect()
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IGX: &str = "        GPU0    NIC0    NIC1    CPU Affinity    NUMA Affinity   GPU NUMA ID\nGPU0     X      PXB     PXB     0-11    0               N/A\nNIC0    PXB      X      PIX\nNIC1    PXB     PIX      X\n\nLegend:\n\n  X    = Self\n  PIX  = Connection traversing at most a single PCIe bridge\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n";

    #[test]
    fn igx_devkit_matrix() {
        assert!(looks_like(IGX));
        let m = parse(IGX).unwrap();
        assert_eq!(m.columns, ["GPU0", "NIC0", "NIC1"]);
        assert_eq!(m.rows[0].cells, ["X", "PXB", "PXB"]);
        assert_eq!(m.rows[0].cpu_affinity.as_deref(), Some("0-11"));
        assert_eq!(m.rows[0].numa_affinity.as_deref(), Some("0"));
        assert_eq!(m.nics()[0].2, Some("mlx5_0"));
    }

    #[test]
    fn old_header_names_nics_and_bad_cells_say_the_line() {
        let t = "\tGPU0\tmlx5_0\tCPU Affinity\nGPU0\t X \tSYS\t0-19\nmlx5_0\tSYS\t X \n";
        let m = parse(t).unwrap();
        assert_eq!(m.nics()[0].2, Some("mlx5_0"));
        let e = parse("\tGPU0\tmlx5_0\tCPU Affinity\nGPU0\t X \tFOO\t0-19\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse("\tGPU0\tmlx5_0\tCPU Affinity\nGPU0\t X\n").unwrap_err();
        assert_eq!(e.line, 2);
    }
}
