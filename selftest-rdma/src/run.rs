//! The RDMA engine: topologies (two local ports, or a peer over a TCP side channel), one run per
//! transfer, and the record it produces (the self-test's [`EngineResult`] plus RDMA details:
//! completions, CQ errors by status, port counter deltas).

use crate::buffer::{BufferProvider, HostProvider};
use crate::error::RdmaError;
use crate::proto::{CqStats, EndpointConfig, ReceiverStats, SenderStats, Transfer};
use daqtune_probe::Host;
use daqtune_selftest::engine::{Engine, Mode, RunControl, RunSpec};
use daqtune_selftest::metrics::{gbps, roi, ThreadCpu};
use daqtune_selftest::report::{EngineResult, Status};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where the two ends of the test are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// Two local ports, named explicitly: cabled back to back, or two rxe devices on a veth
    /// pair. `a` sends, `b` receives; QPs are addressed by GID so traffic crosses the wire.
    Ports {
        a: EndpointConfig,
        b: EndpointConfig,
    },
    /// This host sends from `local`; `daqtune-rdma --listen` on the peer receives at `addr`
    /// (host:port of the TCP side channel).
    Peer { local: EndpointConfig, addr: String },
}

impl Topology {
    pub fn name(&self) -> &'static str {
        match self {
            Topology::Ports { .. } => "ports",
            Topology::Peer { .. } => "peer",
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Topology::Ports { a, b } => format!(
                "RDMA ports {}:{} -> {}:{}",
                a.device, a.port, b.device, b.port
            ),
            Topology::Peer { local, addr } => {
                format!("RDMA {}:{} -> peer {addr}", local.device, local.port)
            }
        }
    }
}

/// The RDMA-specific side of one run, for the JSON report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RdmaDetail {
    pub transfer: String,
    pub memory: String,
    /// `device:port gid-index gid` of each side.
    pub endpoints: Vec<String>,
    pub sender_cq: CqStats,
    pub receiver_cq: CqStats,
    /// Counter deltas keyed `<device>/<port>/<group>/<name>`.
    pub port_counters: BTreeMap<String, u64>,
    /// The drop and error counters of the Ethernet netdevs under the RoCE ports, before and
    /// after the run (the peer's receiving port as the peer read it): the result's
    /// `port_counters` and `causes` carry them, so they are not repeated here.
    #[serde(skip)]
    pub netdev_ports: Vec<daqtune_probe::net::counters::PortDelta>,
    pub sender: SenderStats,
    pub receiver: ReceiverStats,
}

impl RdmaDetail {
    pub fn cq_errors(&self) -> u64 {
        self.sender_cq.error_count() + self.receiver_cq.error_count()
    }
}

/// The engine `daqtune selftest rdma` drives.
pub struct RdmaEngine {
    pub topology: Topology,
    /// Receive ring depth (messages in flight).
    pub slots: usize,
    pub provider: Arc<dyn BufferProvider>,
    /// Where port counters are read (the live host normally).
    pub host: Host,
    /// Test hook: every n-th message is sent with a broken checksum (see Endpoint).
    pub inject_corruption: Option<u64>,
    /// ACK timeout exponent (4.096 us * 2^n; 14 = 67 ms as perftest). Emulated soft-RoCE needs
    /// more (18 = 1.1 s) or it retransmits spuriously.
    pub qp_timeout: u8,
    details: Vec<RdmaDetail>,
}

impl RdmaEngine {
    pub fn new(topology: Topology) -> Self {
        RdmaEngine {
            topology,
            slots: 64,
            provider: Arc::new(HostProvider),
            host: Host::live(),
            inject_corruption: None,
            qp_timeout: crate::endpoint_defaults::QP_TIMEOUT,
            details: Vec::new(),
        }
    }

    /// The details of every run so far, in order.
    pub fn details(&self) -> &[RdmaDetail] {
        &self.details
    }

    /// Whether this build and this host can run RDMA at all: the device names, or the reason
    /// to skip (built without the feature, no kernel support, no device).
    pub fn devices() -> Result<Vec<String>, RdmaError> {
        imp::devices()
    }

    /// One run of `t`. Never panics on host trouble: skips and errors come back as records.
    pub fn run_transfer(&mut self, t: Transfer, spec: &RunSpec, ctl: &RunControl) -> EngineResult {
        let mode = mode_of(t);
        let topo = self.topology.name();
        match imp::run(self, t, spec, ctl) {
            Ok((snd, rcv, detail)) => {
                let r = build_result(t, spec, topo, &snd, &rcv, &detail);
                self.details.push(detail);
                r
            }
            Err(e) if e.is_skip() => EngineResult::skipped("rdma", mode, topo, &e.to_string()),
            Err(e) => EngineResult::errored("rdma", mode, topo, &e.to_string()),
        }
    }
}

impl Engine for RdmaEngine {
    fn name(&self) -> &'static str {
        "rdma"
    }

    fn modes(&self) -> &'static [Mode] {
        &[Mode::Write, Mode::Send]
    }

    fn run(&mut self, spec: &RunSpec, ctl: &RunControl) -> daqtune_selftest::Result<EngineResult> {
        let t = match spec.mode {
            Mode::Write => Transfer::Write,
            Mode::Send => Transfer::Send,
            other => {
                return Err(daqtune_selftest::Error::Invalid(format!(
                    "the rdma engine has no {other} mode (write, send)"
                )))
            }
        };
        Ok(self.run_transfer(t, spec, ctl))
    }
}

/// The report mode of a transfer (ping-pong is SEND traffic).
pub fn mode_of(t: Transfer) -> Mode {
    match t {
        Transfer::Write => Mode::Write,
        Transfer::Send | Transfer::PingPong => Mode::Send,
    }
}

/// Turns both sides' figures into the self-test record. Status stays `Pending` for
/// `daqtune_selftest::judge`, except that CQ errors and a run that never reached its end
/// marker are errors of the transport, which `judge` keeps.
pub fn build_result(
    t: Transfer,
    spec: &RunSpec,
    topology: &str,
    snd: &SenderStats,
    rcv: &ReceiverStats,
    d: &RdmaDetail,
) -> EngineResult {
    let mut r = EngineResult::new("rdma", mode_of(t), topology);
    r.message_size = spec.message_size;
    r.duration_s = snd.wall_s;
    r.bytes = rcv.bytes;
    r.packets = rcv.received;
    r.sent = snd.sent;
    // Rate over the receiver's active window (first to last arrival) counts the messages after
    // the first one; a single message falls back to the sender's wall time.
    let (bytes, secs, msgs) = if rcv.received >= 2 && rcv.active_s > 0.0 {
        let per = rcv.bytes / rcv.received;
        (rcv.bytes - per, rcv.active_s, rcv.received - 1)
    } else {
        (rcv.bytes, snd.wall_s, rcv.received)
    };
    r.gbps = gbps(bytes, secs);
    r.packets_per_s = if secs > 0.0 { msgs as f64 / secs } else { 0.0 };
    // Sent but neither accepted, damaged nor already counted lost: never arrived.
    r.lost = rcv.lost
        + snd
            .sent
            .saturating_sub(rcv.received + rcv.integrity_errors + rcv.lost);
    r.reordered = rcv.reordered;
    r.integrity_errors = rcv.integrity_errors + snd.integrity_errors;
    r.latency = match t {
        Transfer::PingPong => snd.latency.as_ref().and_then(|h| h.summary_us()),
        _ => rcv.latency.as_ref().and_then(|h| h.summary_us()),
    };
    let util = |cpu: f64, wall: f64| if wall > 0.0 { cpu / wall } else { 0.0 };
    r.threads = vec![
        ThreadCpu {
            role: "tx".into(),
            cpu: spec.tx_cpu,
            cpu_s: snd.cpu_s,
            utilization: util(snd.cpu_s, snd.wall_s),
        },
        ThreadCpu {
            role: "rx".into(),
            cpu: spec.rx_cpu,
            cpu_s: rcv.cpu_s,
            utilization: util(rcv.cpu_s, rcv.wall_s),
        },
    ];
    if topology == "peer" {
        // The receiver's CPU is the peer's, not ours.
        r.threads.truncate(1);
    }
    r.cpu_cores = r.threads.iter().map(|t| t.utilization).sum();
    r.roi = roi(r.gbps, r.cpu_cores);
    if t == Transfer::PingPong {
        r.notes
            .push("SEND ping-pong, one message in flight; latency = RTT/2".into());
    } else if r.latency.is_some() {
        r.notes
            .push("latency: one-way from send stamp to verified arrival, under load".into());
    }
    r.notes
        .push(format!("memory {}; {}", d.memory, d.endpoints.join(" -> ")));
    let errs = d.cq_errors();
    r.notes.push(format!(
        "completions: sender {}, receiver {}; CQ errors: {}",
        d.sender_cq.completions,
        d.receiver_cq.completions,
        if errs == 0 {
            "none".to_string()
        } else {
            let mut all = d.sender_cq.clone();
            all.merge(&d.receiver_cq);
            all.errors
                .iter()
                .map(|(k, v)| format!("{k} x{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    ));
    let moved: Vec<String> = d
        .port_counters
        .iter()
        .map(|(k, v)| format!("{k} +{v}"))
        .collect();
    if !moved.is_empty() {
        r.notes.push(format!("port counters: {}", moved.join(", ")));
    }
    let flagged: Vec<&String> = d
        .port_counters
        .keys()
        .filter(|k| crate::counters::is_error_counter(k))
        .collect();
    if !flagged.is_empty() {
        r.notes.push(format!(
            "error counters moved (retransmissions; not a failure on their own): {}",
            flagged
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    r.notes.extend(snd.notes.iter().cloned());
    r.notes.extend(rcv.notes.iter().cloned());
    r.set_port_deltas(d.netdev_ports.clone());
    if errs > 0 {
        r.status = Status::Error;
        r.notes
            .insert(0, format!("{errs} work completion(s) with an error status"));
    } else if !rcv.ended && r.packets > 0 {
        r.status = Status::Error;
        r.notes
            .insert(0, "the receiver never saw the end of the run".to_string());
    }
    r
}

#[cfg(not(feature = "rdma"))]
mod imp {
    use super::*;

    pub fn devices() -> Result<Vec<String>, RdmaError> {
        Err(RdmaError::NotBuilt)
    }

    pub fn run(
        _e: &mut RdmaEngine,
        _t: Transfer,
        _spec: &RunSpec,
        _ctl: &RunControl,
    ) -> Result<(SenderStats, ReceiverStats, RdmaDetail), RdmaError> {
        Err(RdmaError::NotBuilt)
    }
}

#[cfg(feature = "rdma")]
mod imp {
    use super::*;
    use crate::counters::{delta, read_port_counters};
    use crate::endpoint::Endpoint;
    use crate::proto::{recv_line, send_line, Outcome, Reply, Request, ABORT_LINE, PROTO_VERSION};
    use crate::verbs::DeviceList;
    use daqtune_probe::net::counters::{PortCounters, PortDelta};
    use daqtune_selftest::sys::pin_current_thread;
    use std::io::BufReader;
    use std::net::TcpStream;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;
    use std::time::Instant;

    /// Extra time the receiver waits beyond the run for the end marker.
    const GRACE: Duration = Duration::from_secs(30);

    pub fn devices() -> Result<Vec<String>, RdmaError> {
        let list = DeviceList::get()?;
        let names = list.names();
        if names.is_empty() {
            return Err(RdmaError::Unavailable(
                "no RDMA device (no NIC with an RDMA driver, no rxe link)".into(),
            ));
        }
        Ok(names)
    }

    fn counters(host: &Host, ep: &Endpoint) -> BTreeMap<String, u64> {
        read_port_counters(host, ep.device(), ep.port())
    }

    /// The netdev under `ep` and its counters now (or an empty record saying why none).
    fn netdev(host: &Host, ep: &Endpoint) -> PortCounters {
        let g = ep.gid();
        crate::counters::netdev_sample(host, ep.device(), ep.port(), g.index, g.ndev_ifindex)
    }

    fn prefixed(ep: &Endpoint, m: BTreeMap<String, u64>) -> impl Iterator<Item = (String, u64)> {
        let p = format!("{}/{}", ep.device(), ep.port());
        m.into_iter().map(move |(k, v)| (format!("{p}/{k}"), v))
    }

    fn describe(ep: &Endpoint) -> String {
        let g = ep.gid();
        format!(
            "{}:{} gid[{}] {}",
            ep.device(),
            ep.port(),
            g.index,
            g.ipv4()
                .map(|a| a.to_string())
                .unwrap_or_else(|| crate::gid::gid_to_string(&g.gid))
        )
    }

    pub fn run(
        e: &mut RdmaEngine,
        t: Transfer,
        spec: &RunSpec,
        ctl: &RunControl,
    ) -> Result<(SenderStats, ReceiverStats, RdmaDetail), RdmaError> {
        let list = DeviceList::get()?;
        if list.names().is_empty() {
            return Err(RdmaError::Unavailable(
                "no RDMA device (no NIC with an RDMA driver, no rxe link)".into(),
            ));
        }
        let msg = spec.message_size.max(daqtune_selftest::payload::HEADER_LEN);
        match e.topology.clone() {
            Topology::Ports { a, b } => run_ports(e, &list, &a, &b, t, msg, spec, ctl),
            Topology::Peer { local, addr } => run_peer(e, &list, &local, &addr, t, msg, spec, ctl),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run_ports(
        e: &RdmaEngine,
        list: &DeviceList,
        a: &EndpointConfig,
        b: &EndpointConfig,
        t: Transfer,
        msg: usize,
        spec: &RunSpec,
        ctl: &RunControl,
    ) -> Result<(SenderStats, ReceiverStats, RdmaDetail), RdmaError> {
        let mut tx = Endpoint::open(list, a, e.slots, msg, e.provider.as_ref())?;
        tx.inject_corruption = e.inject_corruption;
        tx.qp_timeout = e.qp_timeout;
        let mut rx = Endpoint::open(list, b, e.slots, msg, e.provider.as_ref())?;
        rx.qp_timeout = e.qp_timeout;
        let (itx, irx) = (tx.info(), rx.info());
        tx.connect(&irx)?;
        rx.connect(&itx)?;
        let c0 = (counters(&e.host, &tx), counters(&e.host, &rx));
        let n0 = (netdev(&e.host, &tx), netdev(&e.host, &rx), Instant::now());
        rx.arm_receiver(t, msg)?;
        tx.arm_sender(t, msg)?;
        let stop = ctl.stop_flag();
        let abort = AtomicBool::new(false);
        let limit = spec.duration + GRACE;
        let (snd, rcv) = std::thread::scope(|s| {
            let rx_thread = s.spawn(|| {
                if let Some(cpu) = spec.rx_cpu {
                    let _ = pin_current_thread(cpu);
                }
                let r = rx.run_receiver(t, msg, limit, spec.latency, &stop, &abort);
                if r.is_err() {
                    abort.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                r
            });
            if let Some(cpu) = spec.tx_cpu {
                let _ = pin_current_thread(cpu);
            }
            let snd = tx.run_sender(t, &irx, msg, spec.duration, &stop, &abort);
            if snd.is_err() {
                abort.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            let rcv = rx_thread
                .join()
                .unwrap_or_else(|_| Err(RdmaError::Invalid("receiver thread panicked".into())));
            (snd, rcv)
        });
        let (snd, rcv) = (snd?, rcv?);
        ctl.add_tx(snd.bytes);
        ctl.add_rx(rcv.bytes);
        let c1 = (counters(&e.host, &tx), counters(&e.host, &rx));
        let n1 = (netdev(&e.host, &tx), netdev(&e.host, &rx));
        let secs = n0.2.elapsed().as_secs_f64();
        let netdev_ports = vec![
            PortDelta::new("tx", &n0.0, &n1.0, secs),
            PortDelta::new("rx", &n0.1, &n1.1, secs),
        ];
        let mut port_counters: BTreeMap<String, u64> = prefixed(&tx, delta(&c0.0, &c1.0)).collect();
        port_counters.extend(prefixed(&rx, delta(&c0.1, &c1.1)));
        let detail = RdmaDetail {
            transfer: t.as_str().into(),
            memory: tx.memory_kind(),
            endpoints: vec![describe(&tx), describe(&rx)],
            sender_cq: snd.cq.clone(),
            receiver_cq: rcv.cq.clone(),
            port_counters,
            netdev_ports,
            sender: snd.clone(),
            receiver: rcv.clone(),
        };
        Ok((snd, rcv, detail))
    }

    #[allow(clippy::too_many_arguments)]
    fn run_peer(
        e: &RdmaEngine,
        list: &DeviceList,
        local: &EndpointConfig,
        addr: &str,
        t: Transfer,
        msg: usize,
        spec: &RunSpec,
        ctl: &RunControl,
    ) -> Result<(SenderStats, ReceiverStats, RdmaDetail), RdmaError> {
        let side = |m: String| RdmaError::SideChannel(format!("{addr}: {m}"));
        let mut ep = Endpoint::open(list, local, e.slots, msg, e.provider.as_ref())?;
        ep.inject_corruption = e.inject_corruption;
        ep.qp_timeout = e.qp_timeout;
        let stream = TcpStream::connect(addr).map_err(|err| side(err.to_string()))?;
        let limit = spec.duration + GRACE + GRACE;
        let _ = stream.set_read_timeout(Some(limit));
        let mut w = stream.try_clone().map_err(|err| side(err.to_string()))?;
        let mut r = BufReader::new(stream);
        let req = Request {
            version: PROTO_VERSION,
            transfer: t,
            msg_size: msg,
            slots: e.slots,
            duration_ms: spec.duration.as_millis() as u64,
            conn: ep.info(),
            qp_timeout: e.qp_timeout,
        };
        send_line(&mut w, &req).map_err(|err| side(err.to_string()))?;
        let reply: Reply = recv_line(&mut r).map_err(side)?;
        if let Some(err) = reply.error {
            return Err(if reply.skip {
                RdmaError::Unavailable(format!("peer {addr}: {err}"))
            } else {
                side(err)
            });
        }
        let peer = reply.conn.ok_or_else(|| side("reply without QP".into()))?;
        ep.connect(&peer)?;
        let c0 = counters(&e.host, &ep);
        let n0 = (netdev(&e.host, &ep), Instant::now());
        ep.arm_sender(t, msg)?;
        if let Some(cpu) = spec.tx_cpu {
            let _ = pin_current_thread(cpu);
        }
        let stop = ctl.stop_flag();
        let abort = AtomicBool::new(false);
        let snd = ep.run_sender(t, &peer, msg, spec.duration, &stop, &abort)?;
        if abort.load(std::sync::atomic::Ordering::Relaxed) {
            // The receiver would otherwise wait out its own limit for an end marker that will
            // never come (the QP is in error): any byte on the side channel stops it.
            let _ = std::io::Write::write_all(&mut w, ABORT_LINE);
        }
        let outcome: Outcome = recv_line(&mut r).map_err(side)?;
        if let Some(err) = outcome.error {
            return Err(side(format!("receiver failed: {err}")));
        }
        let rcv = outcome.receiver;
        let mut netdev_ports = vec![PortDelta::new(
            "tx",
            &n0.0,
            &netdev(&e.host, &ep),
            n0.1.elapsed().as_secs_f64(),
        )];
        // A peer of an older build sends none: its side is then simply not in the record.
        netdev_ports.extend(outcome.netdev);
        ctl.add_tx(snd.bytes);
        ctl.add_rx(rcv.bytes);
        let mut port_counters: BTreeMap<String, u64> =
            prefixed(&ep, delta(&c0, &counters(&e.host, &ep))).collect();
        port_counters.extend(
            outcome
                .counters
                .into_iter()
                .map(|(k, v)| (format!("peer/{k}"), v)),
        );
        let detail = RdmaDetail {
            transfer: t.as_str().into(),
            memory: ep.memory_kind(),
            endpoints: vec![
                describe(&ep),
                format!(
                    "{}@{addr} gid[{}] {}",
                    peer.device, peer.gid_index, peer.gid
                ),
            ],
            sender_cq: snd.cq.clone(),
            receiver_cq: rcv.cq.clone(),
            port_counters,
            netdev_ports,
            sender: snd.clone(),
            receiver: rcv.clone(),
        };
        Ok((snd, rcv, detail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_selftest::metrics::Histogram;

    fn detail() -> RdmaDetail {
        RdmaDetail {
            transfer: "write".into(),
            memory: "host".into(),
            endpoints: vec![
                "rxe0:1 gid[1] 198.18.0.1".into(),
                "rxe1:1 gid[1] 198.18.0.2".into(),
            ],
            ..Default::default()
        }
    }

    fn clean(n: u64, size: u64) -> (SenderStats, ReceiverStats) {
        let snd = SenderStats {
            sent: n,
            bytes: n * size,
            wall_s: 1.0,
            cpu_s: 0.5,
            ..Default::default()
        };
        let mut h = Histogram::default();
        h.record(10_000);
        let rcv = ReceiverStats {
            received: n,
            bytes: n * size,
            active_s: 0.5,
            wall_s: 1.0,
            cpu_s: 0.25,
            ended: true,
            latency: Some(h),
            ..Default::default()
        };
        (snd, rcv)
    }

    #[test]
    fn clean_run_is_pending_for_judge_and_rates_use_the_active_window() {
        let mut spec = RunSpec::new(Mode::Write);
        spec.message_size = 1000;
        let (snd, rcv) = clean(1001, 1000);
        let r = build_result(Transfer::Write, &spec, "ports", &snd, &rcv, &detail());
        assert_eq!(r.status, Status::Pending);
        assert_eq!(r.mode, Mode::Write);
        assert_eq!(r.lost, 0);
        // 1000 messages after the first in 0.5 s.
        assert!((r.gbps - 1000.0 * 1000.0 * 8.0 / 0.5 / 1e9).abs() < 1e-9);
        assert!((r.packets_per_s - 2000.0).abs() < 1e-9);
        assert!((r.cpu_cores - 0.75).abs() < 1e-9);
        assert!(r.latency.is_some());
        assert!(r.notes.iter().any(|n| n.contains("CQ errors: none")));
    }

    #[test]
    fn cq_errors_and_missing_end_are_errors() {
        let spec = RunSpec::new(Mode::Send);
        let (snd, mut rcv) = clean(10, 8192);
        let mut d = detail();
        d.sender_cq
            .errors
            .insert("retry counter exceeded".into(), 1);
        let r = build_result(Transfer::Send, &spec, "ports", &snd, &rcv, &d);
        assert_eq!(r.status, Status::Error);
        assert!(r.notes[0].contains("1 work completion"));
        assert!(r
            .notes
            .iter()
            .any(|n| n.contains("retry counter exceeded x1")));

        rcv.ended = false;
        let r = build_result(Transfer::Send, &spec, "ports", &snd, &rcv, &detail());
        assert_eq!(r.status, Status::Error);
    }

    /// The netdevs under the RoCE ports go into the result as the socket engine's ports do,
    /// and a drop counted there becomes the run's first cause (`rx_dropped` is the kernel's
    /// "dropped after the NIC handed the frame over", include/uapi/linux/if_link.h).
    #[test]
    fn netdev_counter_deltas_are_the_results_port_counters_and_causes() {
        use daqtune_probe::net::counters::{Counter, PortCounters, PortDelta, Source};
        let port = |name: &str, rx_dropped: u64, tx_packets: u64| PortCounters {
            ifname: name.into(),
            counters: vec![
                Counter {
                    source: Source::Statistics,
                    name: "rx_dropped".into(),
                    value: rx_dropped,
                },
                Counter {
                    source: Source::Statistics,
                    name: "tx_packets".into(),
                    value: tx_packets,
                },
            ],
            unavailable: Vec::new(),
        };
        let spec = RunSpec::new(Mode::Write);
        let (snd, rcv) = clean(1000, 1000);
        let mut d = detail();
        d.netdev_ports = vec![
            PortDelta::new("tx", &port("dqa", 0, 10), &port("dqa", 0, 1010), 1.0),
            PortDelta::new("rx", &port("dqb", 3, 0), &port("dqb", 12_348, 0), 1.0),
        ];
        let r = build_result(Transfer::Write, &spec, "ports", &snd, &rcv, &d);
        let ports: Vec<(&str, &str)> = r
            .port_counters
            .iter()
            .map(|p| (p.port.as_str(), p.role.as_str()))
            .collect();
        assert_eq!(ports, [("dqa", "tx"), ("dqb", "rx")]);
        assert_eq!(r.port_counters[0].deltas[0].name, "tx_packets");
        assert_eq!(r.port_counters[0].deltas[0].delta, 1000);
        assert_eq!(r.causes.len(), 1, "{:?}", r.causes);
        assert_eq!(r.causes[0].port, "dqb");
        assert!(
            r.causes[0].message.starts_with(
                "the receiving port dqb: rx_dropped (interface statistics) rose by 12,345"
            ),
            "{}",
            r.causes[0].message
        );
        // In the JSON a qualify or the causes ranking reads.
        let v = serde_json::to_value(&r).expect("json");
        assert_eq!(v["port_counters"][1]["port"], "dqb");
        assert_eq!(v["causes"][0]["rank"], 1);
    }

    #[test]
    fn missing_messages_count_as_lost() {
        let spec = RunSpec::new(Mode::Send);
        let (snd, mut rcv) = clean(10, 100);
        rcv.received = 7;
        rcv.bytes = 700;
        let r = build_result(Transfer::Send, &spec, "peer", &snd, &rcv, &detail());
        assert_eq!(r.lost, 3);
        assert_eq!(r.threads.len(), 1);
    }

    #[test]
    fn damaged_messages_are_not_lost() {
        let spec = RunSpec::new(Mode::Write);
        let (snd, mut rcv) = clean(10, 100);
        rcv.received = 8;
        rcv.integrity_errors = 2;
        rcv.bytes = 800;
        let r = build_result(Transfer::Write, &spec, "ports", &snd, &rcv, &detail());
        assert_eq!(r.lost, 0);
        assert_eq!(r.integrity_errors, 2);
    }

    #[test]
    fn without_devices_it_skips_or_is_not_built() {
        // Here (no kernel RDMA support, or no feature) the engine must skip with a reason.
        let mut e = RdmaEngine::new(Topology::Ports {
            a: EndpointConfig {
                device: "rxe0".into(),
                port: 1,
                gid_index: None,
                ipv4: None,
            },
            b: EndpointConfig {
                device: "rxe1".into(),
                port: 1,
                gid_index: None,
                ipv4: None,
            },
        });
        if RdmaEngine::devices().is_ok() {
            return; // a host with RDMA devices: covered by the VM test
        }
        let mut spec = RunSpec::new(Mode::Write);
        spec.duration = std::time::Duration::from_millis(10);
        let r = e.run(&spec, &RunControl::new()).expect("record");
        assert_eq!(r.status, Status::Skip, "{:?}", r.notes);
        assert!(!r.notes.is_empty() && !r.notes[0].is_empty());
        assert!(e.run(&RunSpec::new(Mode::Tcp), &RunControl::new()).is_err());
    }
}
