//! The self-test's report, `daqtune.selftest/v1`: what `daqtune selftest` prints as JSON, what
//! `daqtune-dpdk` and `daqtune-rdma` put in their output, and what `daqtune qualify` reads from
//! its self-test children. The judgement, the text and JUnit renderings and the engines stay in
//! `daqtune-selftest`; these are the records alone, so every side parses the same types.

use serde::{Deserialize, Serialize};

pub use crate::assessment::Assessment;
pub use crate::findmax;
pub use crate::gpu::{Calibration, GpuSinkResult, MemoryKind};
pub use crate::metrics::{Latency, ThreadCpu};

pub const SCHEMA: &str = "daqtune.selftest/v1";

/// What kind of traffic a run moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Tcp,
    Udp,
    /// DPDK raw Ethernet frames.
    Raw,
    /// RDMA RC WRITE.
    Write,
    /// RDMA RC SEND.
    Send,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Tcp => "tcp",
            Mode::Udp => "udp",
            Mode::Raw => "raw",
            Mode::Write => "write",
            Mode::Send => "send",
        }
    }

    /// Whether the transport itself guarantees delivery (loss is then a failure, not a figure).
    pub fn reliable(self) -> bool {
        matches!(self, Mode::Tcp | Mode::Write | Mode::Send)
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "tcp" => Ok(Mode::Tcp),
            "udp" => Ok(Mode::Udp),
            "raw" => Ok(Mode::Raw),
            "write" => Ok(Mode::Write),
            "send" => Ok(Mode::Send),
            other => Err(format!(
                "unknown mode {other:?} (tcp, udp, raw, write, send)"
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
    Skip,
    Error,
    /// Measured, not judged yet.
    Pending,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
            Status::Error => "error",
            Status::Pending => "pending",
        }
    }

    /// Whether this status fails a gate.
    pub fn is_failure(self) -> bool {
        matches!(self, Status::Fail | Status::Error | Status::Pending)
    }
}

/// One engine, one mode, one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineResult {
    pub engine: String,
    pub mode: Mode,
    /// `veth`, `ports`, `peer`, `loopback`.
    pub topology: String,
    pub message_size: usize,
    pub duration_s: f64,
    /// Requested pacing, Gb/s; absent = unpaced.
    pub rate_gbps: Option<f64>,
    /// Received payload rate (headers of the self-test format included, transport headers not).
    pub gbps: f64,
    /// Messages received with a good checksum.
    pub packets: u64,
    pub packets_per_s: f64,
    pub bytes: u64,
    /// Messages the sender handed to the path.
    pub sent: u64,
    pub lost: u64,
    pub reordered: u64,
    pub integrity_errors: u64,
    /// TCP segments retransmitted during the run (TcpRetransSegs delta), where measurable.
    pub retransmits: Option<u64>,
    /// Interface counters of the sending and receiving ports over the run: proof the traffic
    /// crossed them (veth and two-port topologies).
    pub port_bytes: Option<PortBytes>,
    pub latency: Option<Latency>,
    pub threads: Vec<ThreadCpu>,
    /// CPU cores used in total (sum of thread utilizations).
    pub cpu_cores: f64,
    /// Gb/s^2 per core (seed 003).
    pub roi: Option<f64>,
    pub status: Status,
    /// Why the status is what it is, one line each.
    pub notes: Vec<String>,
    /// Messages the sender corrupted on purpose (`--inject-corruption`): the verifier must
    /// count exactly these as integrity errors.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub injected_corruptions: u64,
    /// Where the messages were verified when a GPU sink ran (`--gpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuSinkResult>,
    /// Receive buffer of the run, bytes as the kernel accounts them (UDP: SO_RCVBUF as
    /// granted; DPDK: the RX ring), from which `--find-max` sizes its trials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_buffer_bytes: Option<u64>,
    /// How the receive buffer was sized and why (`--rcvbuf`, or the size computed from the
    /// path: docs/selftest.md, "Receive buffers").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_buffer_sizing: Option<String>,
    /// Highest receive-queue memory the receiver saw, as a fraction of the socket's limit
    /// (UDP: SO_MEMINFO's RMEM_ALLOC / RCVBUF after full receive batches); 1 is a drop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_peak_backlog: Option<f64>,
    /// Each stream's figures when the run had several (`--streams N`); they add up to the
    /// record's totals (rates over the run's common window).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<StreamFigures>,
    /// `--find-max`: the highest rate whose loss stayed within `--loss`, as achieved in its
    /// passing confirmation trial (absent when none was confirmed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_loss_free_gbps: Option<f64>,
    /// `--find-max`: every trial, in order (probe, search, confirmation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trials: Vec<crate::findmax::Trial>,
    /// `--find-max`: start bounds, precision, trial length rule, limit and conclusion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<crate::findmax::Summary>,
    /// Socket engine: which of the kernel's batching paths the run asked for and used (GSO,
    /// sendmmsg, GRO, recvmmsg, zero-copy), and why one was not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batching: Vec<Batching>,
    /// TCP `--zerocopy`: what the completion notifications said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<ZeroCopy>,
    /// The first messages that failed verification, by stream and sequence number (at most
    /// [`MAX_DEFECTS_LISTED`]): the datagram inside a GRO read is named, not the read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub defects: Vec<DefectRecord>,
    /// Received Gb/s per CPU core the run's threads used (`gbps / cpu_cores`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbps_per_core: Option<f64>,
    /// Received Gb/s per core of the sending threads alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbps_per_tx_core: Option<f64>,
    /// The result against its link's payload rate and the profile's reference
    /// (`daqtune_selftest::reference::assess`); absent where no assessment ran (an older report, RDMA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<Assessment>,
    /// The drop and error counters of the ports the run used: what rose between a read just
    /// before and one just after it, per port (`daqtune_probe::net::counters`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub port_counters: Vec<daqtune_probe::net::counters::PortDelta>,
    /// Where the ports counted frames lost or damaged during the run, most telling first
    /// (from `port_counters`): the self-test's own causes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<CounterCause>,
}

/// One port counter that rose during a run and what it says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterCause {
    /// 1 = most telling.
    pub rank: usize,
    pub port: String,
    pub kind: daqtune_probe::net::counters::Kind,
    pub message: String,
}

impl EngineResult {
    /// Records the ports' counters read before and after the run (`interval_s` apart) and
    /// the losses they counted as this result's causes.
    pub fn set_port_counters(
        &mut self,
        before: &[daqtune_probe::net::counters::PortCounters; 2],
        after: &[daqtune_probe::net::counters::PortCounters; 2],
        interval_s: f64,
    ) {
        use daqtune_probe::net::counters::PortDelta;
        self.set_port_deltas(vec![
            PortDelta::new("tx", &before[0], &after[0], interval_s),
            PortDelta::new("rx", &before[1], &after[1], interval_s),
        ]);
    }

    /// Records the ports' counter deltas of the run (each side read where it runs: a peer's
    /// receiving port comes back from the peer) and the losses they counted as this result's
    /// causes.
    pub fn set_port_deltas(&mut self, ports: Vec<daqtune_probe::net::counters::PortDelta>) {
        use daqtune_probe::net::counters::loss_causes;
        self.port_counters = ports;
        self.causes = loss_causes(&self.port_counters)
            .into_iter()
            .enumerate()
            .map(|(i, (port, kind, message))| CounterCause {
                rank: i + 1,
                port,
                kind,
                message,
            })
            .collect();
    }
}

/// Defective messages listed by name in a record (the count is always complete).
pub const MAX_DEFECTS_LISTED: usize = 32;

/// One batching path of the socket engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Batching {
    /// `gso`, `sendmmsg`, `gro`, `recvmmsg`, `zerocopy`.
    pub name: String,
    /// Asked for (on by default where the kernel has it; `--no-gso` etc. turn it off).
    pub asked: bool,
    /// Used for the whole run (in every stream).
    pub used: bool,
    /// How it was used, or why not (off, the kernel refused it, the path does not allow it).
    pub detail: String,
}

/// Zero-copy sends and what the kernel said about them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ZeroCopy {
    /// Sends made with MSG_ZEROCOPY.
    pub sends: u64,
    /// Sends whose completion was read from the error queue.
    pub completed: u64,
    /// Completed sends the kernel copied after all (SO_EE_CODE_ZEROCOPY_COPIED).
    pub copied: u64,
}

impl ZeroCopy {
    /// Whether any send left its pages to the NIC uncopied.
    pub fn copies_avoided(&self) -> bool {
        self.completed > self.copied
    }
}

/// A message that failed verification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DefectRecord {
    pub stream: usize,
    /// Sequence number from its header (absent when the header itself is unreadable; the
    /// header is outside the CRC's protection only in being read before it is checked).
    pub seq: Option<u64>,
    /// `crc`, `length`, `magic`, `short`.
    pub defect: String,
    /// Bytes of the datagram (or TCP message).
    pub bytes: usize,
    /// Its place in the GRO read that carried it: datagram `segment` (0-based) of `segments`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<usize>,
}

/// One stream of a multi-stream run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamFigures {
    pub stream: usize,
    pub tx_cpu: Option<usize>,
    pub rx_cpu: Option<usize>,
    /// This stream's received payload over the run's window, Gb/s.
    pub gbps: f64,
    pub bytes: u64,
    pub packets: u64,
    pub sent: u64,
    pub lost: u64,
    pub reordered: u64,
    pub integrity_errors: u64,
    /// CPU use of its TX and RX threads (1.0 = one core).
    pub tx_utilization: f64,
    pub rx_utilization: f64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl EngineResult {
    pub fn new(engine: &str, mode: Mode, topology: &str) -> Self {
        EngineResult {
            engine: engine.to_string(),
            mode,
            topology: topology.to_string(),
            message_size: 0,
            duration_s: 0.0,
            rate_gbps: None,
            gbps: 0.0,
            packets: 0,
            packets_per_s: 0.0,
            bytes: 0,
            sent: 0,
            lost: 0,
            reordered: 0,
            integrity_errors: 0,
            retransmits: None,
            port_bytes: None,
            latency: None,
            threads: Vec::new(),
            cpu_cores: 0.0,
            roi: None,
            status: Status::Pending,
            notes: Vec::new(),
            injected_corruptions: 0,
            gpu: None,
            rx_buffer_bytes: None,
            rx_buffer_sizing: None,
            rx_peak_backlog: None,
            streams: Vec::new(),
            max_loss_free_gbps: None,
            trials: Vec::new(),
            search: None,
            batching: Vec::new(),
            zerocopy: None,
            defects: Vec::new(),
            gbps_per_core: None,
            gbps_per_tx_core: None,
            reference: None,
            port_counters: Vec::new(),
            causes: Vec::new(),
        }
    }

    /// A record for a run that could not happen (no device, no privilege).
    pub fn skipped(engine: &str, mode: Mode, topology: &str, why: &str) -> Self {
        let mut r = Self::new(engine, mode, topology);
        r.status = Status::Skip;
        r.notes.push(why.to_string());
        r
    }

    pub fn errored(engine: &str, mode: Mode, topology: &str, why: &str) -> Self {
        let mut r = Self::new(engine, mode, topology);
        r.status = Status::Error;
        r.notes.push(why.to_string());
        r
    }

    /// Loss in percent of what was offered; planted corrupt messages (never accepted, so
    /// counted lost by the tracker) are not loss.
    pub fn loss_pct(&self) -> f64 {
        let lost = self.lost.saturating_sub(self.injected_corruptions);
        let offered = self.packets + lost;
        if offered == 0 {
            return 0.0;
        }
        lost as f64 * 100.0 / offered as f64
    }
}

/// Byte counters of the two ports during a run (transport and link headers included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortBytes {
    /// Bytes the sending port transmitted.
    pub tx_port_tx: u64,
    /// Bytes the receiving port received.
    pub rx_port_rx: u64,
    /// Wire-level counters (`tx_bytes_phy` / `rx_bytes_phy`) where the driver exposes them.
    pub tx_port_tx_phy: Option<u64>,
    pub rx_port_rx_phy: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub pass: usize,
    pub warn: usize,
    pub fail: usize,
    pub skip: usize,
    pub error: usize,
}

/// The whole self-test report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub hostname: String,
    /// The topology in words (`veth pair 198.18.0.1 -> 198.18.0.2, MTU 9000`).
    pub topology: String,
    /// How the CPUs were chosen (profile list, remapped, unpinned).
    pub cpu_plan: String,
    pub results: Vec<EngineResult>,
    pub summary: Summary,
}

impl Report {
    pub fn new(hostname: &str, topology: &str, cpu_plan: &str) -> Self {
        Report {
            schema: SCHEMA.to_string(),
            hostname: hostname.to_string(),
            topology: topology.to_string(),
            cpu_plan: cpu_plan.to_string(),
            results: Vec::new(),
            summary: Summary::default(),
        }
    }

    pub fn push(&mut self, r: EngineResult) {
        match r.status {
            Status::Pass => self.summary.pass += 1,
            Status::Warn => self.summary.warn += 1,
            Status::Fail | Status::Pending => self.summary.fail += 1,
            Status::Skip => self.summary.skip += 1,
            Status::Error => self.summary.error += 1,
        }
        self.results.push(r);
    }

    /// True when no result failed or errored (skips do not pass a gate on their own: the caller
    /// decides whether a skipped engine was required).
    pub fn passed(&self) -> bool {
        self.summary.fail == 0 && self.summary.error == 0
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}
