//! The engine trait every data path (socket, DPDK, RDMA) implements, and what a run is asked
//! to do.

use crate::error::Result;
use crate::report::EngineResult;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What kind of traffic a run moves (a field of every result, so `daqtune-report`'s).
pub use daqtune_report::selftest::Mode;

/// One run of one engine in one mode.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSpec {
    pub mode: Mode,
    /// Bytes per message, header included (payload::HEADER_LEN at least).
    pub message_size: usize,
    pub duration: Duration,
    /// Pacing target in Gb/s of payload; `None` = as fast as the path goes.
    pub rate_gbps: Option<f64>,
    /// CPU for the transmit thread (after remapping to the host), `None` = not pinned.
    pub tx_cpu: Option<usize>,
    /// CPU for the receive thread.
    pub rx_cpu: Option<usize>,
    /// Record one-way latency from the send stamps (only meaningful when both ends share a clock).
    pub latency: bool,
    /// Parallel streams (seed 002 measures the socket path with 4 pairs). Each has its own
    /// sequence space and, where given, its own CPUs.
    pub streams: usize,
    /// (TX, RX) CPUs of stream i; streams beyond the list use `tx_cpu` / `rx_cpu`.
    pub stream_cpus: Vec<(Option<usize>, Option<usize>)>,
    /// Land received messages in GPU memory and verify them there (socket engine, one stream).
    pub gpu: Option<GpuRun>,
    /// Test aid: the sender corrupts this many messages (one body byte each, after computing
    /// the CRC) so a run proves its verifier catches them. Split over the streams.
    pub inject_corruption: u64,
    /// Which of the kernel's batching paths the socket engine may use (each falls back, and
    /// says so, where the kernel lacks it).
    pub socket: SocketOptions,
}

/// The kernel's batching for the socket engine (docs/selftest.md, "The kernel's batching").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketOptions {
    /// UDP sender: UDP_SEGMENT (GSO), several messages per send, cut by the kernel.
    pub gso: bool,
    /// UDP sender: sendmmsg, several sends per system call.
    pub sendmmsg: bool,
    /// UDP receiver: UDP_GRO, coalesced datagrams split back by the receiver.
    pub gro: bool,
    /// UDP receiver: recvmmsg, several datagrams per system call.
    pub recvmmsg: bool,
    /// TCP sender: MSG_ZEROCOPY, completions read from the socket's error queue.
    pub zerocopy: bool,
    /// Receive buffer (SO_RCVBUF) in bytes set by the user (`--rcvbuf`); `None`: sized from
    /// the path (`socket::udp_receive_buffer`; TCP: the kernel's autotuning).
    pub rcvbuf: Option<usize>,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            gso: true,
            sendmmsg: true,
            gro: true,
            recvmmsg: true,
            zerocopy: false,
            rcvbuf: None,
        }
    }
}

/// The GPU sink of one run: which GPU (already resolved) and how.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuRun {
    pub gpu: crate::gpu_sink::ChosenGpu,
    pub memory: crate::gpu_sink::MemoryKind,
    pub batch_bytes: usize,
    pub calibration_copies: usize,
}

impl RunSpec {
    pub fn new(mode: Mode) -> Self {
        RunSpec {
            mode,
            message_size: 8192,
            duration: Duration::from_secs(3),
            rate_gbps: None,
            tx_cpu: None,
            rx_cpu: None,
            latency: true,
            streams: 1,
            stream_cpus: Vec::new(),
            gpu: None,
            inject_corruption: 0,
            socket: SocketOptions::default(),
        }
    }

    /// The spec of stream `i` of a multi-stream run: its CPUs, its share of the rate and of the
    /// injected corruptions (so the run as a whole plants what was asked).
    pub fn for_stream(&self, i: usize) -> RunSpec {
        let n = self.streams.max(1);
        let (tx, rx) = self
            .stream_cpus
            .get(i)
            .copied()
            .unwrap_or((self.tx_cpu, self.rx_cpu));
        let inject = self.inject_corruption / n as u64
            + u64::from((i as u64) < self.inject_corruption % n as u64);
        RunSpec {
            tx_cpu: tx,
            rx_cpu: rx,
            rate_gbps: self.rate_gbps.map(|r| r / n as f64),
            streams: 1,
            stream_cpus: Vec::new(),
            inject_corruption: inject,
            ..self.clone()
        }
    }
}

/// Shared between an engine's threads and whoever watches the run (signal handler, progress
/// bar): a stop request and live counters. Cloning shares the same state.
#[derive(Debug, Clone, Default)]
pub struct RunControl {
    stop: Arc<AtomicBool>,
    rx_bytes: Arc<AtomicU64>,
    tx_bytes: Arc<AtomicU64>,
    /// Also stop when SIGINT/SIGTERM arrived (see [`crate::signals`]).
    watch_signals: bool,
}

impl RunControl {
    pub fn new() -> Self {
        Self::default()
    }

    /// A control that also stops when SIGINT, SIGTERM or SIGHUP arrives (after
    /// `daqtune_probe::signals::watch_termination`).
    pub fn watching_signals() -> Self {
        RunControl {
            watch_signals: true,
            ..Self::default()
        }
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    #[inline]
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
            || (self.watch_signals && daqtune_probe::signals::pending().is_some())
    }

    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    #[inline]
    pub fn add_rx(&self, bytes: u64) {
        self.rx_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    #[inline]
    pub fn add_tx(&self, bytes: u64) {
        self.tx_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn rx_bytes(&self) -> u64 {
        self.rx_bytes.load(Ordering::Relaxed)
    }

    pub fn tx_bytes(&self) -> u64 {
        self.tx_bytes.load(Ordering::Relaxed)
    }

    pub fn reset_counters(&self) {
        self.rx_bytes.store(0, Ordering::Relaxed);
        self.tx_bytes.store(0, Ordering::Relaxed);
    }
}

/// A data path that can move verified traffic. Set-up that outlives one run (namespaces, EAL,
/// protection domains) belongs to the engine's constructor or topology, not to `run`.
pub trait Engine {
    /// Stable name used in reports (`socket`, `dpdk`, `rdma`).
    fn name(&self) -> &'static str;
    /// Modes this engine can run.
    fn modes(&self) -> &'static [Mode];
    /// Moves traffic for `spec.duration` (or until `ctl` is stopped) and measures it. The
    /// returned record has `status` unset (`Status::Pending`); [`crate::report::judge`] sets it.
    fn run(&mut self, spec: &RunSpec, ctl: &RunControl) -> Result<EngineResult>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_round_trip() {
        for m in [Mode::Tcp, Mode::Udp, Mode::Raw, Mode::Write, Mode::Send] {
            assert_eq!(m.as_str().parse::<Mode>(), Ok(m));
            assert_eq!(serde_json::to_string(&m).expect("json"), format!("\"{m}\""));
        }
        assert!("TCP".parse::<Mode>().is_ok());
        assert!("quic".parse::<Mode>().is_err());
    }

    #[test]
    fn stream_specs_split_rate_and_cpus() {
        let mut s = RunSpec::new(Mode::Udp);
        s.streams = 4;
        s.rate_gbps = Some(8.0);
        s.tx_cpu = Some(0);
        s.rx_cpu = Some(1);
        s.stream_cpus = vec![(Some(2), Some(3))];
        let a = s.for_stream(0);
        assert_eq!(
            (a.tx_cpu, a.rx_cpu, a.rate_gbps, a.streams),
            (Some(2), Some(3), Some(2.0), 1)
        );
        let b = s.for_stream(3);
        assert_eq!((b.tx_cpu, b.rx_cpu), (Some(0), Some(1)));
    }

    #[test]
    fn injected_corruptions_split_over_streams() {
        let mut s = RunSpec::new(Mode::Tcp);
        s.streams = 4;
        s.inject_corruption = 6;
        let per: Vec<u64> = (0..4).map(|i| s.for_stream(i).inject_corruption).collect();
        assert_eq!(per, vec![2, 2, 1, 1]);
        s.inject_corruption = 3;
        let per: Vec<u64> = (0..4).map(|i| s.for_stream(i).inject_corruption).collect();
        assert_eq!(per, vec![1, 1, 1, 0]);
        s.streams = 1;
        assert_eq!(s.for_stream(0).inject_corruption, 3);
    }

    #[test]
    fn control_is_shared() {
        let a = RunControl::new();
        let b = a.clone();
        b.add_rx(10);
        a.stop();
        assert!(b.stopped());
        assert_eq!(a.rx_bytes(), 10);
    }
}
