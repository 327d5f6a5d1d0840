//! The GPU sink's part of a self-test result (`gpu` in `daqtune.selftest/v1`).

use serde::{Deserialize, Serialize};

/// Where received messages land.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    /// Pinned host memory the GPU reads in place (cuMemHostAlloc DEVICEMAP).
    HostPinned,
    /// Pinned staging and asynchronous host-to-device copies.
    Copy,
    /// GPU memory the NIC writes (GPUDirect RDMA): DPDK and RDMA engines only.
    Device,
}

impl MemoryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::HostPinned => "host_pinned",
            MemoryKind::Copy => "copy",
            MemoryKind::Device => "device",
        }
    }
}

/// Pinned-copy calibration at one size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub bytes: usize,
    pub copies: usize,
    /// Best single copy.
    pub peak_gbps: f64,
    pub median_gbps: f64,
}

/// The GPU part of a self-test result (`gpu` in `daqtune.selftest/v1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSinkResult {
    pub uuid: String,
    pub name: String,
    pub pci_bus_id: Option<String>,
    pub memory: MemoryKind,
    pub batch_bytes: usize,
    pub batches: u64,
    /// Messages the kernel found intact.
    pub verified: u64,
    /// Intact payload bytes over the receive window, Gb/s.
    pub verified_gbps: f64,
    /// Messages the kernel rejected (magic, length or CRC).
    pub integrity_errors: u64,
    pub bad_magic: u64,
    pub bad_length: u64,
    pub bad_crc: u64,
    pub min_seq: Option<u64>,
    pub max_seq: Option<u64>,
    /// Good messages whose sequence number did not follow the previous one's.
    pub seq_breaks: u64,
    /// Kernel time per verified byte, as a rate (Gb/s of kernel throughput).
    pub kernel_gbps: f64,
    pub kernel_ms: f64,
    /// `copy` only: host-to-device copies during the run, at the batch size, event-timed.
    pub h2d_copies: u64,
    pub h2d_gbps: Option<f64>,
    /// Pinned-copy calibration at the batch size on the same GPU, before the run.
    pub pinned_peak: Option<Calibration>,
    /// h2d_gbps / pinned_peak.peak_gbps.
    pub h2d_of_peak: Option<f64>,
    /// Time the receiver waited for GPU slots (batches still being copied or checked), ms, and
    /// that time as a share of the receive window: the measure of whether the GPU path
    /// limited the rate (absent in records of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_wait_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_wait_of_window: Option<f64>,
    /// `copy`: share of the receive window the run's host-to-device copies took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_busy_of_window: Option<f64>,
    /// The kernel's own totals agree with the per-message results read back.
    pub totals_agree: bool,
    /// GPU context, JIT, allocations and calibration, ms.
    pub setup_ms: f64,
}

impl GpuSinkResult {
    /// Why the GPU path limited the run's rate, or `None` when the sink kept up with the wire.
    ///
    /// The receiver reads nothing while it waits for a slot whose batch is still being copied
    /// or checked, so a wait of [`MAX_WAIT_SHARE`] of the window or more means the GPU side
    /// held the stream back; copies below the pinned-copy peak alone do not (at 40 Gb/s into a
    /// 400 Gb/s copy engine they finish long before the next batch is full). Records without
    /// the wait (older versions) are judged by how busy the copies kept the copy engine:
    /// [`MAX_COPY_BUSY`] of the window or more.
    /// `window_s` is the run's receive window.
    pub fn gpu_limited(&self, window_s: f64) -> Option<String> {
        let peak = match self.h2d_of_peak {
            Some(f) => format!(
                "; host-to-device copies ran at {:.0} % of the pinned-copy peak at {} bytes",
                f * 100.0,
                self.batch_bytes
            ),
            None => String::new(),
        };
        if let Some(w) = self.receiver_wait_ms {
            let share = self.receiver_wait_of_window.unwrap_or(if window_s > 0.0 {
                w / 1e3 / window_s
            } else {
                0.0
            });
            return (share >= MAX_WAIT_SHARE).then(|| {
                format!(
                    "the GPU path limited the rate: the receiver waited {w:.1} ms ({:.1} % of the run) for batches still being {}{peak}",
                    share * 100.0,
                    if self.memory == MemoryKind::Copy {
                        "copied or checked"
                    } else {
                        "checked"
                    }
                )
            });
        }
        let busy = self.copy_busy_of_window.or_else(|| {
            let h = self.h2d_gbps.filter(|h| *h > 0.0)?;
            (window_s > 0.0).then(|| {
                self.h2d_copies as f64 * self.batch_bytes as f64 * 8.0 / (h * 1e9) / window_s
            })
        })?;
        (busy >= MAX_COPY_BUSY).then(|| {
            format!(
                "the copy path limited the rate: copies kept the copy engine busy {:.0} % of the run{peak}",
                busy * 100.0
            )
        })
    }
}

/// The receiver may wait this share of the run for GPU slots before the GPU path counts as
/// limiting the rate.
pub const MAX_WAIT_SHARE: f64 = 0.05;
/// Older records: copies this busy (share of the run) count as limiting.
pub const MAX_COPY_BUSY: f64 = 0.9;
