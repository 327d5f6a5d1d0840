//! The live GPUDirect probe (`gpu.gpudirect`'s optional part in the check catalogue): allocate a
//! little GPU memory, export it as a dma-buf (else fall back to the peermem path), and register
//! it with each RDMA device, exactly as a `--memory device` run would. The attributes the check
//! reads say what the GPU claims; this says whether the kernel, the GPU driver and the RDMA
//! driver actually let a NIC reach that GPU's memory on this host.

use crate::buffer::{BufferProvider, DeviceProvider};
use crate::error::RdmaError;
use serde::Serialize;

pub const SCHEMA: &str = "daqtune.gpudirect-probe/v1";
/// One 2 MiB GPU page: enough to prove the registration, small enough to never matter.
const PROBE_BYTES: usize = 2 << 20;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DeviceResult {
    pub device: String,
    pub registered: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Probe {
    pub schema: &'static str,
    pub gpu: u32,
    /// `pass` (every device registered the memory), `fail` (one refused), `skip` (nothing to
    /// probe with: no GPU, no driver, no RDMA device, or a build without verbs), `error` (a
    /// GPU ordinal or device name that does not exist).
    pub status: &'static str,
    /// How the memory was offered: `device via dma-buf`, or `device via peermem (...)`.
    pub memory: Option<String>,
    pub devices: Vec<DeviceResult>,
    pub reason: String,
}

impl Probe {
    fn skip(gpu: u32, memory: Option<String>, reason: impl Into<String>) -> Probe {
        Probe {
            schema: SCHEMA,
            gpu,
            status: "skip",
            memory,
            devices: Vec::new(),
            reason: reason.into(),
        }
    }

    /// Judges per-device results (pure, so it is tested without hardware).
    pub fn judge(gpu: u32, memory: String, devices: Vec<DeviceResult>) -> Probe {
        let refused: Vec<&DeviceResult> = devices.iter().filter(|d| !d.registered).collect();
        let (status, reason) = if devices.is_empty() {
            (
                "skip",
                "no RDMA device to register the GPU memory with".to_string(),
            )
        } else if refused.is_empty() {
            ("pass", format!("{} registered {memory}", names(&devices)))
        } else {
            (
                "fail",
                refused
                    .iter()
                    .map(|d| {
                        format!(
                            "{} refused {memory}: {}",
                            d.device,
                            d.error.as_deref().unwrap_or("?")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        };
        Probe {
            schema: SCHEMA,
            gpu,
            status,
            memory: Some(memory),
            devices,
            reason,
        }
    }
}

fn names(d: &[DeviceResult]) -> String {
    d.iter()
        .map(|x| x.device.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs the probe on GPU `gpu` against `only` (a device name) or every RDMA device.
pub fn probe(gpu: u32, only: Option<&str>) -> Probe {
    let provider = match DeviceProvider::new(gpu) {
        Ok(p) => p,
        Err(e) if e.is_skip() => return Probe::skip(gpu, None, e.to_string()),
        // A GPU that does not exist (a wrong --gpu) is a usage error, not a skip.
        Err(e) => {
            return Probe {
                status: "error",
                ..Probe::skip(gpu, None, e.to_string())
            }
        }
    };
    let memory = match provider.allocate(PROBE_BYTES) {
        Ok(b) => b.describe(),
        Err(e) => return Probe::skip(gpu, None, format!("GPU {gpu}: {e}")),
    };
    match register_everywhere(&provider, only) {
        Ok(devices) => Probe::judge(gpu, memory, devices),
        Err(e) if e.is_skip() => Probe::skip(gpu, Some(memory), e.to_string()),
        Err(e) => Probe {
            status: "error",
            ..Probe::skip(gpu, Some(memory), e.to_string())
        },
    }
}

#[cfg(feature = "rdma")]
fn register_everywhere(
    provider: &DeviceProvider,
    only: Option<&str>,
) -> Result<Vec<DeviceResult>, RdmaError> {
    use crate::verbs::{DeviceList, ACCESS_LOCAL_WRITE, ACCESS_REMOTE_WRITE};
    let list = DeviceList::get()?;
    let mut names = list.names();
    if let Some(d) = only {
        if !names.iter().any(|n| n == d) {
            return Err(RdmaError::Invalid(format!("no RDMA device {d:?}")));
        }
        names.retain(|n| n == d);
    }
    let mut out = Vec::new();
    for name in names {
        let r = list.open(&name).and_then(|ctx| {
            let pd = ctx.alloc_pd()?;
            let buf = provider.allocate(PROBE_BYTES)?;
            pd.register(buf, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE)
                .map(|_mr| ())
        });
        out.push(DeviceResult {
            device: name,
            registered: r.is_ok(),
            error: r.err().map(|e| e.to_string()),
        });
    }
    Ok(out)
}

#[cfg(not(feature = "rdma"))]
fn register_everywhere(
    _provider: &DeviceProvider,
    _only: Option<&str>,
) -> Result<Vec<DeviceResult>, RdmaError> {
    Err(RdmaError::NotBuilt)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(name: &str, ok: bool) -> DeviceResult {
        DeviceResult {
            device: name.into(),
            registered: ok,
            error: (!ok).then(|| "ibv_reg_mr: Bad address".into()),
        }
    }

    #[test]
    fn verdicts() {
        let m = "device via dma-buf".to_string();
        let p = Probe::judge(0, m.clone(), vec![dev("mlx5_0", true), dev("mlx5_1", true)]);
        assert_eq!(p.status, "pass");
        assert_eq!(p.reason, "mlx5_0, mlx5_1 registered device via dma-buf");
        let p = Probe::judge(0, m.clone(), vec![dev("mlx5_0", true), dev("rxe0", false)]);
        assert_eq!(p.status, "fail");
        assert!(
            p.reason.starts_with("rxe0 refused device via dma-buf"),
            "{}",
            p.reason
        );
        let p = Probe::judge(1, m, vec![]);
        assert_eq!(p.status, "skip");
        let j = serde_json::to_value(&p).expect("json");
        assert_eq!(j["schema"], SCHEMA);
        assert_eq!(j["gpu"], 1);
    }

    /// Wherever the tests run: never a panic, never a pass without a registration. On the lent
    /// H100 (no RDMA device) this is a skip that names the missing device and the dma-buf path.
    #[test]
    fn probe_here_is_honest() {
        let p = probe(0, None);
        eprintln!("{}", serde_json::to_string(&p).unwrap_or_default());
        match p.status {
            "pass" => assert!(!p.devices.is_empty() && p.devices.iter().all(|d| d.registered)),
            "fail" => assert!(p.devices.iter().any(|d| !d.registered)),
            "skip" => assert!(!p.reason.is_empty()),
            other => panic!("status {other}: {}", p.reason),
        }
    }
}
