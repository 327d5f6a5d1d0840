//! The first run of a boot on a host with several GPUs of one model: CUDA is initialised on
//! one GPU per model, and its attributes stand for the others.
//!
//! `cuInit` sets every visible GPU up for the process, one after the other: on the lent H200
//! machines (persistence mode on) 270 ms with one GPU visible and 970 - 1040 ms with four, and
//! four processes with one GPU each took as long together (1.5 s wall): the driver serialises
//! the per-GPU work, so neither threads nor processes can overlap it (docs/performance.md).
//! The attributes daqtune reads through CUDA (GPUDirect RDMA and dma-buf support, integrated,
//! compute capability) are properties of the chip and the loaded driver, the same for every GPU
//! of one model under one driver; so CUDA is initialised with only one GPU of each model
//! visible (`CUDA_VISIBLE_DEVICES=<uuid>`), and the others get its attributes with
//! [`CudaAttrs::read_from`] naming the GPU that was read. Their own bus id comes from the
//! kernel driver and their ordinal from the PCI order CUDA uses under
//! `CUDA_DEVICE_ORDER=PCI_BUS_ID`.
//!
//! `CUDA_VISIBLE_DEVICES` is read once per process, by `cuInit`: setting it in daqtune's own
//! process would hide the other GPUs from anything in it that uses CUDA later (the self-test's
//! GPU sink), so the restricted `cuInit` runs in a child, the same executable started with
//! [`CHILD_ENV`] set. Only a binary that calls [`serve_child`] first thing in `main` is ever
//! started this way; elsewhere (test binaries, other programs linking the crate) and whenever
//! the child fails, CUDA is read in-process on every GPU as before.

use super::cache::ProcGpu;
use super::{CudaAttrs, LibStatus};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set in the child's environment; its value is ignored.
pub const CHILD_ENV: &str = "DAQTUNE_INTERNAL_CUDA_PROBE";

static SERVED: AtomicBool = AtomicBool::new(false);

/// What the child prints on stdout (one JSON document).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ChildReport {
    pub status: LibStatus,
    pub driver_version: Option<i32>,
    pub devices: Vec<(String, CudaAttrs)>,
    pub init_ms: Option<f64>,
    pub query_ms: Option<f64>,
}

/// Call first in `main`: in the child, read CUDA, print the report and exit; in any other
/// process, mark that this executable can serve as the child and return.
pub fn serve_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        SERVED.store(true, Ordering::SeqCst);
        return;
    }
    let (status, part) = super::cuda::gather();
    let report = ChildReport {
        status,
        driver_version: part.driver_version,
        devices: part.devices,
        init_ms: part.init_ms,
        query_ms: part.query_ms,
    };
    let text = serde_json::to_string(&report).unwrap_or_default();
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let ok = writeln!(out, "{text}").and_then(|()| out.flush()).is_ok();
    std::process::exit(if ok { 0 } else { 1 });
}

/// The GPUs to read, one per model, or `None` when reading a subset gains nothing or cannot
/// be done safely: fewer than two GPUs, a GPU whose model or UUID the driver hides, or no
/// duplicate model. `gpus` is what `/proc/driver/nvidia/gpus/*/information` says.
pub fn plan(gpus: &[ProcGpu]) -> Option<Vec<String>> {
    if gpus.len() < 2 {
        return None;
    }
    let mut by_model: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for g in gpus {
        let (Some(m), Some(u), Some(b)) = (&g.model, &g.uuid, &g.bus_id) else {
            return None;
        };
        let e = by_model
            .entry(m.as_str())
            .or_insert((b.as_str(), u.as_str()));
        if b.as_str() < e.0 {
            *e = (b.as_str(), u.as_str());
        }
    }
    if by_model.len() == gpus.len() {
        return None;
    }
    let mut reps: Vec<(&str, &str)> = by_model.into_values().collect();
    reps.sort();
    Some(reps.into_iter().map(|(_, u)| u.to_string()).collect())
}

/// Every GPU of `gpus` with attributes: the representatives' own, the others' copied from the
/// representative of their model (`read_from` set). Ordinals are positions in PCI bus order,
/// as CUDA numbers the GPUs under `CUDA_DEVICE_ORDER=PCI_BUS_ID` with all of them visible.
/// A GPU whose model's representative was not read is left out (its facts then carry no CUDA
/// part, as for a GPU CUDA did not enumerate).
pub fn spread(gpus: &[ProcGpu], read: &[(String, CudaAttrs)]) -> Vec<(String, CudaAttrs)> {
    let mut order: Vec<&ProcGpu> = gpus.iter().filter(|g| g.bus_id.is_some()).collect();
    order.sort_by(|a, b| a.bus_id.cmp(&b.bus_id));
    let rep_of_model: BTreeMap<&str, (&str, &CudaAttrs)> = read
        .iter()
        .filter_map(|(uuid, attrs)| {
            let g = gpus.iter().find(|g| {
                g.uuid
                    .as_deref()
                    .is_some_and(|u| u.eq_ignore_ascii_case(uuid))
            })?;
            Some((g.model.as_deref()?, (uuid.as_str(), attrs)))
        })
        .collect();
    let mut out = Vec::new();
    for (ordinal, g) in order.iter().enumerate() {
        let (Some(uuid), Some(model)) = (&g.uuid, &g.model) else {
            continue;
        };
        let Some((rep_uuid, rep)) = rep_of_model.get(model.as_str()) else {
            continue;
        };
        let mut a = (*rep).clone();
        a.ordinal = u32::try_from(ordinal).ok();
        a.pci_bus_id = g.bus_id.clone();
        a.read_from = (!rep_uuid.eq_ignore_ascii_case(uuid)).then(|| rep_uuid.to_string());
        out.push((uuid.clone(), a));
    }
    out
}

/// Read CUDA in a child with only `uuids` visible. `Err`: why the child gave nothing usable
/// (the caller then reads CUDA in-process).
pub(crate) fn read_in_child(uuids: &[String]) -> Result<ChildReport, String> {
    if !SERVED.load(Ordering::SeqCst) {
        return Err("this executable does not serve the CUDA probe child".into());
    }
    let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
    let mut child = std::process::Command::new(&exe)
        .env(CHILD_ENV, "1")
        .env("CUDA_VISIBLE_DEVICES", uuids.join(","))
        .env("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    // The report is one line, written before the child exits; its exit (the CUDA context's
    // teardown, tens of ms on a many-GPU host) is not waited for: a thread reaps it.
    let mut line = String::new();
    let read = match child.stdout.take() {
        Some(out) => {
            use std::io::BufRead;
            std::io::BufReader::new(out).read_line(&mut line)
        }
        None => Ok(0),
    };
    let report = match read {
        Ok(0) => Err(match child.wait() {
            Ok(st) => format!("the CUDA probe child exited with {st} and no report"),
            Err(e) => format!("the CUDA probe child: {e}"),
        }),
        Ok(_) => parse_report(&line, uuids.len()),
        Err(e) => Err(format!("the CUDA probe child's report: {e}")),
    };
    if std::env::var_os(WAIT_ENV).is_some() {
        let _ = child.wait();
    } else {
        std::thread::spawn(move || {
            let _ = child.wait();
        });
    }
    report
}

/// Set (to anything) to wait for the child's exit before its report is used, as before the
/// report was taken at its newline (for measurements; docs/performance.md).
pub const WAIT_ENV: &str = "DAQTUNE_CUDA_CHILD_WAIT";

/// The child's report line, `expected` GPUs made visible to it. A line without its newline
/// is a child cut off while writing.
pub(crate) fn parse_report(line: &str, expected: usize) -> Result<ChildReport, String> {
    let Some(text) = line.strip_suffix('\n') else {
        return Err("the CUDA probe child's report ends early".into());
    };
    let report: ChildReport =
        serde_json::from_str(text).map_err(|e| format!("the CUDA probe child's report: {e}"))?;
    if report.status.is_ok() && report.devices.len() != expected {
        return Err(format!(
            "the CUDA probe child saw {} GPUs, {} were made visible",
            report.devices.len(),
            expected
        ));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(bus: &str, model: &str, uuid: &str) -> ProcGpu {
        ProcGpu {
            bus_id: Some(bus.into()),
            model: Some(model.into()),
            uuid: Some(uuid.into()),
        }
    }

    #[test]
    fn one_per_model_lowest_bus_first() {
        let gpus = [
            g("0000:00:09.0", "NVIDIA H200", "GPU-d"),
            g("0000:00:07.0", "NVIDIA H200", "GPU-b"),
            g("0000:00:08.0", "NVIDIA L4", "GPU-c"),
            g("0000:00:06.0", "NVIDIA H200", "GPU-a"),
        ];
        assert_eq!(
            plan(&gpus),
            Some(vec!["GPU-a".to_string(), "GPU-c".to_string()])
        );
        // Nothing to gain: one GPU, or every model once.
        assert_eq!(plan(&gpus[..1]), None);
        assert_eq!(plan(&gpus[2..]), None);
        // A hidden field: no guessing.
        let mut hidden = gpus.to_vec();
        hidden[1].model = None;
        assert_eq!(plan(&hidden), None);
    }

    #[test]
    fn spread_copies_and_names_the_source() {
        let gpus = [
            g("0000:00:07.0", "NVIDIA H200", "GPU-b"),
            g("0000:00:06.0", "NVIDIA H200", "GPU-a"),
            g("0000:00:08.0", "NVIDIA L4", "GPU-c"),
        ];
        let read = vec![(
            "GPU-a".to_string(),
            CudaAttrs {
                ordinal: Some(0),
                gpu_direct_rdma_supported: Some(true),
                dma_buf_supported: Some(true),
                pci_bus_id: Some("0000:00:06.0".into()),
                ..Default::default()
            },
        )];
        let s = spread(&gpus, &read);
        assert_eq!(s.len(), 2, "the L4's representative was not read");
        assert_eq!(s[0].0, "GPU-a");
        assert_eq!(s[0].1.read_from, None);
        assert_eq!(s[1].0, "GPU-b");
        assert_eq!(s[1].1.read_from.as_deref(), Some("GPU-a"));
        assert_eq!(s[1].1.ordinal, Some(1));
        assert_eq!(s[1].1.pci_bus_id.as_deref(), Some("0000:00:07.0"));
        assert_eq!(s[1].1.gpu_direct_rdma_supported, Some(true));
    }

    #[test]
    fn child_report_is_one_whole_line() {
        let report = ChildReport {
            status: LibStatus::Ok,
            driver_version: Some(13000),
            devices: vec![("GPU-a".into(), CudaAttrs::default())],
            init_ms: Some(270.0),
            query_ms: Some(0.1),
        };
        let line = format!("{}\n", serde_json::to_string(&report).expect("serialises"));
        let back = parse_report(&line, 1).expect("a whole line parses");
        assert_eq!(back.devices.len(), 1);
        assert_eq!(back.driver_version, Some(13000));
        // Cut off before its newline (the child died while writing): refused.
        assert!(parse_report(line.trim_end(), 1).is_err());
        assert!(parse_report(&line[..line.len() / 2], 1).is_err());
        // Garbage, or a different number of GPUs than were made visible.
        assert!(parse_report("not json\n", 1).is_err());
        assert!(parse_report(&line, 2).is_err());
        // A failed CUDA is a report (the caller then reads in-process), whatever the count.
        let failed = ChildReport {
            status: LibStatus::Unavailable {
                reason: "cuInit failed".into(),
            },
            driver_version: None,
            devices: vec![],
            init_ms: None,
            query_ms: None,
        };
        let line = format!("{}\n", serde_json::to_string(&failed).expect("serialises"));
        assert!(!parse_report(&line, 1).expect("parses").status.is_ok());
    }

    #[test]
    fn child_not_served_in_test_binaries() {
        assert!(read_in_child(&["GPU-a".into()]).is_err());
    }
}
