//! Result records, the `daqtune.selftest/v1` report, its text / JSON / JUnit renderings, and
//! the verdict against thresholds.

use crate::engine::Mode;
use crate::metrics::{Latency, ThreadCpu};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

pub const SCHEMA: &str = "daqtune.selftest/v1";

/// Share of the pinned-copy peak below which the `copy` sink's copies get a note (a warning
/// only when the GPU path limited the rate: `GpuSinkResult::gpu_limited`).
pub const MIN_COPY_OF_PEAK: f64 = 0.9;

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
    pub gpu: Option<crate::gpu_sink::GpuSinkResult>,
    /// Receive buffer of the run, bytes as the kernel accounts them (UDP: SO_RCVBUF as
    /// granted; DPDK: the RX ring), from which `--find-max` sizes its trials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_buffer_bytes: Option<u64>,
    /// How the receive buffer was sized and why (`--rcvbuf`, or the size computed from the
    /// path: docs/selftest.md, "Receive buffers").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_buffer_sizing: Option<String>,
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
    /// (`crate::reference`); absent where no assessment ran (an older report, RDMA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<crate::reference::Assessment>,
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

/// What a run must reach. Profile values feed this (the `selftest` section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Minimum Gb/s for reliable modes (0 = integrity only).
    pub min_tcp_gbps: f64,
    /// UDP (and raw) loss tolerated at the paced rate, percent.
    pub max_udp_loss_pct: f64,
    /// Minimum share of the requested paced rate a paced run must deliver, in (0, 1].
    pub min_paced_fraction: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_tcp_gbps: 0.0,
            max_udp_loss_pct: 0.1,
            min_paced_fraction: 0.9,
        }
    }
}

/// Sets `r.status` and notes from the measurements. A record already skipped or errored keeps
/// its status.
pub fn judge(r: &mut EngineResult, t: &Thresholds) {
    if matches!(r.status, Status::Skip | Status::Error) {
        return;
    }
    let mut status = Status::Pass;
    if r.packets == 0 {
        status = Status::Fail;
        r.notes.push("no message arrived".into());
    }
    if r.injected_corruptions > 0 {
        // The run's point is the verifier: it must count exactly the planted messages.
        if r.integrity_errors == r.injected_corruptions {
            r.notes.push(format!(
                "all {} planted corrupt message(s) detected",
                r.injected_corruptions
            ));
        } else {
            status = Status::Fail;
            r.notes.push(format!(
                "{} integrity error(s) counted for {} planted corrupt message(s)",
                r.integrity_errors, r.injected_corruptions
            ));
        }
    } else if r.integrity_errors > 0 {
        status = Status::Fail;
        r.notes.push(format!(
            "{} message(s) failed the checksum",
            r.integrity_errors
        ));
    }
    if let Some(g) = &r.gpu {
        if !g.totals_agree {
            status = Status::Fail;
            r.notes
                .push("the GPU kernel's totals disagree with its per-message results".to_string());
        }
        if r.mode.reliable() && g.seq_breaks > 0 {
            status = Status::Fail;
            r.notes.push(format!(
                "the GPU saw {} break(s) in the sequence of a reliable stream",
                g.seq_breaks
            ));
        }
        match g.gpu_limited(r.duration_s) {
            Some(why) => {
                if status == Status::Pass {
                    status = Status::Warn;
                }
                r.notes.push(why);
            }
            None => {
                // Slower copies than the peak are worth knowing, but the sink kept up with
                // the wire: the rate was not theirs to limit.
                if let Some(f) = g.h2d_of_peak.filter(|f| *f < MIN_COPY_OF_PEAK) {
                    r.notes.push(format!(
                        "host-to-device copies ran at {:.0} % of the pinned-copy peak at {} bytes; the sink kept up with the wire{}",
                        f * 100.0,
                        g.batch_bytes,
                        g.receiver_wait_of_window
                            .map(|w| format!(" (the receiver waited {:.1} % of the run for GPU batches)", w * 100.0))
                            .unwrap_or_default()
                    ));
                }
            }
        }
    }
    if let Some(p) = r.port_bytes {
        // The wire counters prove more than the netdev ones; use them where they exist.
        let (tx, rx, what) = match (p.tx_port_tx_phy, p.rx_port_rx_phy) {
            (Some(t), Some(x)) => (t, x, "phy"),
            _ => (p.tx_port_tx, p.rx_port_rx, "interface"),
        };
        if rx < r.bytes || tx < r.bytes {
            status = Status::Fail;
            r.notes.push(format!(
                "the ports' {what} counters saw {tx} B sent and {rx} B received for {} B of payload: the traffic did not cross them",
                r.bytes
            ));
        }
    }
    if let Some(c) = r.causes.first() {
        // Where the frames went: the ports' own counts, not a figure of the run.
        r.notes.push(format!(
            "the ports counted frames lost: {}{}",
            c.message,
            match r.causes.len() {
                1 => String::new(),
                n => format!(" (and {} more counter(s), see causes)", n - 1),
            }
        ));
    }
    if r.mode.reliable() {
        // A planted corrupt message is never accepted, so it also shows as one lost.
        let lost = r.lost.saturating_sub(r.injected_corruptions);
        if lost > 0 || r.reordered > 0 {
            status = Status::Fail;
            r.notes.push(format!(
                "reliable transport lost {} and reordered {} message(s)",
                lost, r.reordered
            ));
        }
        if t.min_tcp_gbps > 0.0 && r.gbps < t.min_tcp_gbps {
            status = Status::Fail;
            r.notes.push(format!(
                "{:.2} Gb/s below the required {:.2} Gb/s",
                r.gbps, t.min_tcp_gbps
            ));
        }
    } else {
        let loss = r.loss_pct();
        if loss > t.max_udp_loss_pct && r.rate_gbps.is_none() {
            // An unpaced flood loses whatever the sender offers beyond what the receiver
            // takes: a figure about the path, not a defect. The loss-free rate is what
            // --find-max searches (and a paced run at that rate is judged on its loss).
            if status == Status::Pass {
                status = Status::Warn;
            }
            r.notes.push(format!(
                "unpaced: loss {loss:.3} %, the sender outran the receiving side; --find-max finds the highest loss-free rate"
            ));
        } else if loss > t.max_udp_loss_pct {
            status = Status::Fail;
            r.notes.push(format!(
                "loss {:.3} % above the allowed {:.3} %",
                loss, t.max_udp_loss_pct
            ));
        }
        if r.reordered > 0 && status == Status::Pass {
            status = Status::Warn;
            r.notes
                .push(format!("{} message(s) arrived out of order", r.reordered));
        }
    }
    if let Some(rate) = r.rate_gbps {
        if rate > 0.0 && r.gbps < rate * t.min_paced_fraction && status == Status::Pass {
            status = Status::Warn;
            r.notes.push(format!(
                "delivered {:.2} Gb/s of the {:.2} Gb/s asked for",
                r.gbps, rate
            ));
        }
    }
    r.status = status;
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

    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "self-test on {}: {}", self.hostname, self.topology);
        let _ = writeln!(s, "cpus: {}", self.cpu_plan);
        for r in &self.results {
            let _ = writeln!(
                s,
                "{:<5} {}/{:<4} {:>8.2} Gb/s {:>10.0} msg/s  sent {} recv {} lost {} reord {} bad {}{}",
                r.status.as_str(),
                r.engine,
                r.mode.as_str(),
                r.gbps,
                r.packets_per_s,
                r.sent,
                r.packets,
                r.lost,
                r.reordered,
                r.integrity_errors,
                r.retransmits
                    .map(|x| format!(" retrans {x}"))
                    .unwrap_or_default(),
            );
            if let Some(p) = &r.port_bytes {
                let phy = match (p.tx_port_tx_phy, p.rx_port_rx_phy) {
                    (Some(t), Some(x)) => format!(" (wire: {t} B out, {x} B in)"),
                    _ => String::new(),
                };
                let _ = writeln!(
                    s,
                    "      ports: {} B out, {} B in{phy}",
                    p.tx_port_tx, p.rx_port_rx
                );
            }
            for c in &r.causes {
                let _ = writeln!(s, "      cause {}: {}", c.rank, c.message);
            }
            if let Some(g) = &r.gpu {
                let _ = writeln!(
                    s,
                    "      gpu {} ({}) {}: {} verified {:.2} Gb/s, {} bad, {} seq breaks, kernel {:.1} Gb/s, {} batches of {} B",
                    g.name,
                    g.uuid,
                    g.memory.as_str(),
                    g.verified,
                    g.verified_gbps,
                    g.integrity_errors,
                    g.seq_breaks,
                    g.kernel_gbps,
                    g.batches,
                    g.batch_bytes
                );
                if let Some(c) = &g.pinned_peak {
                    let copy = match (g.h2d_gbps, g.h2d_of_peak) {
                        (Some(h), Some(f)) => {
                            format!("h2d {h:.1} Gb/s = {:.1} % of ", f * 100.0)
                        }
                        _ => String::new(),
                    };
                    let _ = writeln!(
                        s,
                        "      {copy}pinned-copy peak {:.1} Gb/s (median {:.1}) at {} B",
                        c.peak_gbps, c.median_gbps, c.bytes
                    );
                }
            }
            if let Some(l) = &r.latency {
                let _ = writeln!(
                    s,
                    "      latency p50 {:.1} us  p99 {:.1} us  p99.9 {:.1} us  max {:.1} us",
                    l.p50_us, l.p99_us, l.p999_us, l.max_us
                );
            }
            if !r.threads.is_empty() {
                let parts: Vec<String> = r
                    .threads
                    .iter()
                    .map(|t| {
                        format!(
                            "{}{} {:.0} %",
                            t.role,
                            t.cpu.map(|c| format!("@cpu{c}")).unwrap_or_default(),
                            t.utilization * 100.0
                        )
                    })
                    .collect();
                let _ = writeln!(
                    s,
                    "      cpu {} = {:.2} cores{}{}",
                    parts.join(", "),
                    r.cpu_cores,
                    r.gbps_per_core
                        .map(|x| format!(", {x:.2} Gb/s per core"))
                        .unwrap_or_default(),
                    r.roi
                        .map(|x| format!(", ROI {x:.1} Gb/s^2 per core"))
                        .unwrap_or_default()
                );
            }
            if !r.batching.is_empty() {
                let parts: Vec<String> = r
                    .batching
                    .iter()
                    .map(|b| {
                        format!(
                            "{} {} ({})",
                            b.name,
                            if b.used { "used" } else { "not used" },
                            b.detail
                        )
                    })
                    .collect();
                let _ = writeln!(s, "      kernel batching: {}", parts.join("; "));
            }
            if let Some(why) = &r.rx_buffer_sizing {
                let _ = writeln!(s, "      receive buffer: {why}");
            }
            if let Some(z) = &r.zerocopy {
                let _ = writeln!(
                    s,
                    "      zero-copy: {} sends, {} completed, {} copied by the kernel: {}",
                    z.sends,
                    z.completed,
                    z.copied,
                    if z.copies_avoided() {
                        "copies avoided"
                    } else {
                        "the kernel fell back to copying"
                    }
                );
            }
            for d in &r.defects {
                let _ = writeln!(
                    s,
                    "      bad message: stream {} seq {} ({}, {} B{})",
                    d.stream,
                    d.seq.map(|q| q.to_string()).unwrap_or_else(|| "?".into()),
                    d.defect,
                    d.bytes,
                    match (d.segment, d.segments) {
                        (Some(i), Some(n)) =>
                            format!(", datagram {} of {n} in one GRO read", i + 1),
                        _ => String::new(),
                    }
                );
            }
            if !r.streams.is_empty() {
                s.push_str(&streams_table(r));
            }
            if !r.trials.is_empty() {
                let _ = writeln!(
                    s,
                    "      max loss-free: {}",
                    match (
                        r.max_loss_free_gbps,
                        r.search.as_ref().and_then(|x| x.fraction_of_limit)
                    ) {
                        (Some(g), Some(f)) =>
                            format!("{g:.3} Gb/s ({:.1} % of the limit)", f * 100.0),
                        (Some(g), None) => format!("{g:.3} Gb/s"),
                        (None, _) => "none confirmed".into(),
                    }
                );
                s.push_str(&crate::findmax::trials_table(r));
            }
            for n in &r.notes {
                let _ = writeln!(s, "      {n}");
            }
        }
        let m = &self.summary;
        let _ = writeln!(
            s,
            "summary: {} pass, {} warn, {} fail, {} skip, {} error",
            m.pass, m.warn, m.fail, m.skip, m.error
        );
        s
    }

    pub fn to_junit(&self) -> String {
        let mut s = String::new();
        let failures = self.summary.fail;
        let errors = self.summary.error;
        let skipped = self.summary.skip;
        let _ = writeln!(s, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
        let _ = writeln!(
            s,
            "<testsuite name=\"daqtune.selftest\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">",
            self.results.len()
        );
        for r in &self.results {
            let name = format!("{}.{}", r.engine, r.mode.as_str());
            let _ = write!(
                s,
                "  <testcase classname=\"selftest.{}\" name=\"{}\" time=\"{:.3}\"",
                xml_escape(&r.topology),
                xml_escape(&name),
                r.duration_s
            );
            let detail = xml_escape(&format!(
                "{:.2} Gb/s, {} received, {} lost, {} reordered, {} integrity errors. {}",
                r.gbps,
                r.packets,
                r.lost,
                r.reordered,
                r.integrity_errors,
                r.notes.join("; ")
            ));
            match r.status {
                Status::Pass | Status::Warn => {
                    let _ = writeln!(s, ">\n    <system-out>{detail}</system-out>\n  </testcase>");
                }
                Status::Fail | Status::Pending => {
                    let _ = writeln!(s, ">\n    <failure message=\"{detail}\"/>\n  </testcase>");
                }
                Status::Error => {
                    let _ = writeln!(s, ">\n    <error message=\"{detail}\"/>\n  </testcase>");
                }
                Status::Skip => {
                    let _ = writeln!(s, ">\n    <skipped message=\"{detail}\"/>\n  </testcase>");
                }
            }
        }
        let _ = writeln!(s, "</testsuite>");
        s
    }
}

/// Escapes text for XML (JUnit here and in the main binary's reports): one escaper for the
/// workspace, in daqtune-probe, which both crates already use.
pub use daqtune_probe::text::xml_escape;

/// Set by [`emit`] when standard output refused a report for another reason than a reader that
/// went away (a full disk, an I/O error): the program's exit status must say so.
static EMIT_FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes a report to stdout. A reader that went away (`daqtune ... | head`) is not an error
/// worth a panic (what `print!` does on EPIPE, since Rust ignores SIGPIPE): the rest is dropped.
/// Any other failure (`> /dev/full`) is said on stderr once and remembered: each program's
/// `main` ends with exit 2 when [`emit_failed`] says so, as coreutils do.
pub fn emit(text: &str) {
    use std::io::Write;
    if EMIT_FAILED.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("cannot write to standard output: {e}");
            EMIT_FAILED.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Whether a report written by [`emit`] was lost to a failed standard output.
pub fn emit_failed() -> bool {
    EMIT_FAILED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Each stream of a multi-stream result and their sum, one line each.
pub fn streams_table(r: &EngineResult) -> String {
    let mut s = String::new();
    let cpu = |c: Option<usize>| c.map(|c| c.to_string()).unwrap_or_else(|| "-".into());
    let _ = writeln!(
        s,
        "      {:<6} {:>7} {:>9} {:>10} {:>10} {:>8} {:>6} {:>4} {:>6} {:>6}",
        "stream", "tx->rx", "Gb/s", "sent", "recv", "lost", "reord", "bad", "tx cpu", "rx cpu"
    );
    for st in &r.streams {
        let _ = writeln!(
            s,
            "      {:<6} {:>7} {:>9.3} {:>10} {:>10} {:>8} {:>6} {:>4} {:>5.0}% {:>5.0}%",
            st.stream,
            format!("{}->{}", cpu(st.tx_cpu), cpu(st.rx_cpu)),
            st.gbps,
            st.sent,
            st.packets,
            st.lost,
            st.reordered,
            st.integrity_errors,
            st.tx_utilization * 100.0,
            st.rx_utilization * 100.0
        );
    }
    let sum = |f: fn(&StreamFigures) -> u64| r.streams.iter().map(f).sum::<u64>();
    let _ = writeln!(
        s,
        "      {:<6} {:>7} {:>9.3} {:>10} {:>10} {:>8} {:>6} {:>4}",
        "sum",
        "",
        r.streams.iter().map(|x| x.gbps).sum::<f64>(),
        sum(|x| x.sent),
        sum(|x| x.packets),
        sum(|x| x.lost),
        sum(|x| x.reordered),
        sum(|x| x.integrity_errors)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(gbps: f64, packets: u64) -> EngineResult {
        let mut r = EngineResult::new("socket", Mode::Tcp, "veth");
        r.gbps = gbps;
        r.packets = packets;
        r.sent = packets;
        r
    }

    fn gpu_part(h2d_of_peak: Option<f64>) -> crate::gpu_sink::GpuSinkResult {
        crate::gpu_sink::GpuSinkResult {
            uuid: "GPU-x".into(),
            name: "test".into(),
            pci_bus_id: None,
            memory: crate::gpu_sink::MemoryKind::Copy,
            batch_bytes: 4 << 20,
            batches: 1,
            verified: 100,
            verified_gbps: 10.0,
            integrity_errors: 0,
            bad_magic: 0,
            bad_length: 0,
            bad_crc: 0,
            min_seq: Some(0),
            max_seq: Some(99),
            seq_breaks: 0,
            kernel_gbps: 100.0,
            kernel_ms: 1.0,
            h2d_copies: 1,
            h2d_gbps: Some(100.0),
            pinned_peak: None,
            h2d_of_peak,
            receiver_wait_ms: Some(0.0),
            receiver_wait_of_window: Some(0.0),
            copy_busy_of_window: Some(0.01),
            totals_agree: true,
            setup_ms: 1.0,
        }
    }

    #[test]
    fn planted_corruption_must_be_counted_exactly() {
        let t = Thresholds::default();
        let mut r = tcp(10.0, 100);
        r.injected_corruptions = 3;
        r.integrity_errors = 3;
        r.lost = 3;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Pass, "{:?}", r.notes);
        let mut r = tcp(10.0, 100);
        r.injected_corruptions = 3;
        r.integrity_errors = 2;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Fail);
        // Loss beyond the planted messages is still loss.
        let mut r = tcp(10.0, 100);
        r.injected_corruptions = 3;
        r.integrity_errors = 3;
        r.lost = 4;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Fail);
    }

    #[test]
    fn gpu_record_judged() {
        let t = Thresholds::default();
        let mut r = tcp(10.0, 100);
        r.gpu = Some(gpu_part(Some(0.97)));
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Pass);
        // Copies at half the peak, but the receiver never waited for the GPU: the sink kept
        // up with the wire, so the shortfall is a note, not a warning.
        let mut r = tcp(10.0, 100);
        r.gpu = Some(gpu_part(Some(0.5)));
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Pass, "{:?}", r.notes);
        assert!(r.notes.iter().any(|n| n.contains("kept up with the wire")));
        // 89 % of the peak, no waiting: pass.
        let mut r = tcp(10.0, 100);
        r.gpu = Some(gpu_part(Some(0.89)));
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Pass, "{:?}", r.notes);
        // The receiver waited a fifth of the run for GPU slots: the copy path limited the
        // rate, whatever share of the peak the copies reached.
        for f in [0.5, 0.97] {
            let mut r = tcp(10.0, 100);
            let mut g = gpu_part(Some(f));
            g.receiver_wait_ms = Some(200.0);
            g.receiver_wait_of_window = Some(0.2);
            r.gpu = Some(g);
            judge(&mut r, &t);
            assert_eq!(r.status, Status::Warn, "{f}");
            assert!(r.notes[0].contains("limited the rate"), "{:?}", r.notes);
        }
        // Just under the wait limit: pass.
        let mut r = tcp(10.0, 100);
        let mut g = gpu_part(Some(0.5));
        g.receiver_wait_of_window = Some(crate::gpu_sink::MAX_WAIT_SHARE * 0.9);
        r.gpu = Some(g);
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Pass);
        // A record of an older version (no wait figures): judged by how busy the copies kept
        // the copy engine over the run.
        let older = |copies: u64| {
            let mut r = tcp(10.0, 100);
            r.duration_s = 1.0;
            let mut g = gpu_part(Some(0.8));
            g.receiver_wait_ms = None;
            g.receiver_wait_of_window = None;
            g.copy_busy_of_window = None;
            // 4 MiB at 100 Gb/s: 0.34 ms per copy.
            g.h2d_copies = copies;
            r.gpu = Some(g);
            judge(&mut r, &t);
            r.status
        };
        assert_eq!(older(100), Status::Pass);
        assert_eq!(older(2900), Status::Warn);
        let mut r = tcp(10.0, 100);
        let mut g = gpu_part(None);
        g.totals_agree = false;
        r.gpu = Some(g);
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Fail);
        let mut r = tcp(10.0, 100);
        let mut g = gpu_part(None);
        g.seq_breaks = 1;
        r.gpu = Some(g);
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Fail);
        // The record survives JSON (fixtures, peer protocol).
        let back: EngineResult =
            serde_json::from_str(&serde_json::to_string(&r).expect("json")).expect("parse");
        assert_eq!(back, r);
    }

    #[test]
    fn tcp_integrity_and_rate() {
        let t = Thresholds {
            min_tcp_gbps: 5.0,
            ..Thresholds::default()
        };
        let mut ok = tcp(10.0, 100);
        judge(&mut ok, &t);
        assert_eq!(ok.status, Status::Pass);
        let mut slow = tcp(1.0, 100);
        judge(&mut slow, &t);
        assert_eq!(slow.status, Status::Fail);
        let mut bad = tcp(10.0, 100);
        bad.integrity_errors = 1;
        judge(&mut bad, &t);
        assert_eq!(bad.status, Status::Fail);
        let mut none = tcp(0.0, 0);
        judge(&mut none, &Thresholds::default());
        assert_eq!(none.status, Status::Fail);
    }

    #[test]
    fn unpaced_loss_is_a_warning_paced_loss_a_failure() {
        let t = Thresholds::default();
        let mut r = EngineResult::new("dpdk", Mode::Raw, "veth");
        r.packets = 986;
        r.lost = 14;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Warn, "{:?}", r.notes);
        assert!(r.notes[0].contains("--find-max"));
        let mut r = EngineResult::new("dpdk", Mode::Raw, "veth");
        r.packets = 986;
        r.lost = 14;
        r.rate_gbps = Some(0.3);
        r.gbps = 0.3;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Fail);
        // Integrity still fails an unpaced run.
        let mut r = EngineResult::new("dpdk", Mode::Raw, "veth");
        r.packets = 986;
        r.lost = 14;
        r.integrity_errors = 1;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Fail);
    }

    #[test]
    fn udp_loss_limit() {
        let t = Thresholds::default();
        let mut r = EngineResult::new("socket", Mode::Udp, "veth");
        r.packets = 9_999;
        r.lost = 1;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Pass, "{:?}", r.notes);
        let mut r = EngineResult::new("socket", Mode::Udp, "veth");
        r.packets = 900;
        r.lost = 100;
        r.rate_gbps = Some(1.0);
        r.gbps = 1.0;
        judge(&mut r, &t);
        assert_eq!(r.status, Status::Fail);
        assert!((r.loss_pct() - 10.0).abs() < 1e-9);
    }

    #[test]
    fn traffic_must_cross_the_ports() {
        let mut r = tcp(1.0, 10);
        r.bytes = 81_920;
        r.port_bytes = Some(PortBytes {
            tx_port_tx: 90_000,
            rx_port_rx: 90_000,
            tx_port_tx_phy: None,
            rx_port_rx_phy: None,
        });
        judge(&mut r, &Thresholds::default());
        assert_eq!(r.status, Status::Pass);
        let mut r = tcp(1.0, 10);
        r.bytes = 81_920;
        r.port_bytes = Some(PortBytes {
            tx_port_tx: 90_000,
            rx_port_rx: 100,
            tx_port_tx_phy: None,
            rx_port_rx_phy: None,
        });
        judge(&mut r, &Thresholds::default());
        assert_eq!(r.status, Status::Fail);
        assert!(r.notes[0].contains("interface counters"));
        // Phy counters win when present: the netdev counters looked fine, the wire did not.
        let mut r = tcp(1.0, 10);
        r.bytes = 81_920;
        r.port_bytes = Some(PortBytes {
            tx_port_tx: 90_000,
            rx_port_rx: 90_000,
            tx_port_tx_phy: Some(90_000),
            rx_port_rx_phy: Some(0),
        });
        judge(&mut r, &Thresholds::default());
        assert_eq!(r.status, Status::Fail);
        assert!(r.notes[0].contains("phy counters"));
    }

    #[test]
    fn skip_is_kept_and_counted() {
        let mut r = EngineResult::skipped("rdma", Mode::Write, "ports", "no RDMA device");
        judge(&mut r, &Thresholds::default());
        assert_eq!(r.status, Status::Skip);
        let mut rep = Report::new("h", "veth", "unpinned");
        rep.push(r);
        assert!(rep.passed());
        assert_eq!(rep.summary.skip, 1);
    }

    #[test]
    fn json_has_schema_and_fields() {
        let mut rep = Report::new("h", "veth", "cpu 1 -> 2");
        let mut r = tcp(3.0, 10);
        judge(&mut r, &Thresholds::default());
        rep.push(r);
        let v: serde_json::Value = serde_json::from_str(&rep.to_json()).expect("json");
        assert_eq!(v["schema"], SCHEMA);
        let r0 = &v["results"][0];
        for k in [
            "engine",
            "mode",
            "gbps",
            "packets",
            "lost",
            "integrity_errors",
            "status",
        ] {
            assert!(!r0[k].is_null(), "missing {k}");
        }
        assert_eq!(r0["status"], "pass");
        assert_eq!(r0["mode"], "tcp");
        let back: Report = serde_json::from_value(v).expect("round trip");
        assert_eq!(back, rep);
    }

    #[test]
    fn junit_marks_failures_and_escapes() {
        let mut rep = Report::new("h", "a<b", "x");
        let mut r = tcp(0.0, 0);
        r.topology = "a<b".into();
        judge(&mut r, &Thresholds::default());
        rep.push(r);
        rep.push(EngineResult::skipped(
            "dpdk",
            Mode::Raw,
            "veth",
            "no \"libdpdk\"",
        ));
        let j = rep.to_junit();
        assert!(j.contains("failures=\"1\""));
        assert!(j.contains("<failure"));
        assert!(j.contains("<skipped message=\""));
        assert!(j.contains("&quot;libdpdk&quot;"));
        assert!(j.contains("selftest.a&lt;b"));
        let t = rep.to_text();
        assert!(t.contains("fail  socket/tcp"));
        assert!(t.contains("summary: 0 pass, 0 warn, 1 fail, 1 skip, 0 error"));
    }
}
