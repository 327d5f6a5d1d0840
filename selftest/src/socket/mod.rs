//! The socket engine: TCP and UDP streams of checksummed, sequence-numbered messages between a
//! TX and an RX thread, each entering its side's network namespace and pinned to its CPU.
//!
//! Cost control (the tool must not be the bottleneck): no allocation per message; TCP writes
//! batches of 512 KiB of pre-filled messages in which only the 32-byte headers change; the
//! receiver reads 256 KiB at a time, so the bytes it checksums are still in cache, is woken
//! only once 128 KiB are queued (SO_RCVLOWAT), and reads the clock once per read for latency.

use crate::engine::{Engine, GpuRun, Mode, RunControl, RunSpec};
use crate::error::{Error, Result};
use crate::gpu_sink::{Batcher, Calibration, CudaBackend, Geometry, GpuSinkResult};
use crate::kbatch;
use crate::metrics::{self, Histogram, ThreadCpu};
use crate::netns::NetNs;
use crate::payload::{self, Generator, SeqTracker};
use crate::report::{Batching, DefectRecord, EngineResult, ZeroCopy, MAX_DEFECTS_LISTED};
use crate::sys;
use crate::topology::Topology;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

mod tcp;
mod udp;

use tcp::*;
pub(crate) use tcp::{tcp_receive, tcp_send};
pub use udp::udp_receive_buffer;
use udp::*;
pub(crate) use udp::{udp_receive, udp_send, unspecified_like};

/// Bytes per TCP write. 512 KiB rather than iperf3's 128 KiB: on a veth pair the sender's CPU
/// also runs the receive half of the stack in softirq, and every write costs it a syscall, a
/// socket lock round and a push; fewer, larger writes left that CPU more time for the bytes
/// (docs/performance.md, 2026-11-24).
const TCP_BATCH_BYTES: usize = 512 * 1024;
/// Bytes per TCP read.
const RX_READ_BYTES: usize = 256 * 1024;
/// SO_RCVLOWAT of the TCP receiver: the kernel wakes the reader once this much is queued
/// instead of on every segment. The wake-up runs on the CPU that processes the incoming
/// segments (on a veth pair, the sender's), so every one saved is sender time saved; in the
/// profile of iperf3 on this path the wake-ups (sock_def_readable) were a fifth of that CPU.
const RX_LOW_WATER: usize = 128 * 1024;
/// UDP receive buffer when there is no rate to size it from (an unpaced run): the fixed size
/// used before the sizing rule, 6.7 ms of a 40 Gb/s stream.
const UDP_RCVBUF: usize = 32 << 20;
/// How long a UDP receiver may be off its CPU (a softirq burst on its core, a preemption, a
/// page fault) before its socket buffer overflows: the buffer holds this much of the paced
/// rate. On the 16-core machine 32 MiB (7 ms at 38 Gb/s) lost 0.65-1.6 % now and then while
/// the kernel's own drop counters stayed at 0 (issue 28).
pub const UDP_STALL_BUDGET_MS: f64 = 10.0;
/// Bounds of the computed UDP receive buffer.
pub const UDP_RCVBUF_MIN: usize = 4 << 20;
pub const UDP_RCVBUF_MAX: usize = 256 << 20;
/// Largest GRO read: one super-datagram of up to 64 KiB.
const GRO_READ_BYTES: usize = 64 << 10;
/// How long the UDP receiver waits for stragglers after the sender is done.
const UDP_DRAIN: Duration = Duration::from_millis(300);

/// Reads `RetransSegs` of the `Tcp:` table from /proc/net/snmp text.
pub fn parse_retrans_segs(snmp: &str) -> Option<u64> {
    let mut lines = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let names = lines.next()?;
    let values = lines.next()?;
    let idx = names.split_whitespace().position(|n| n == "RetransSegs")?;
    values.split_whitespace().nth(idx)?.parse().ok()
}

/// TcpRetransSegs of the calling thread's network namespace.
fn retrans_here() -> Option<u64> {
    // /proc/net follows the process's main thread; thread-self follows this thread's namespace.
    let s = daqtune_probe::Host::live()
        .read_string("/proc/thread-self/net/snmp")
        .ok()?;
    parse_retrans_segs(&s)
}

/// TcpRetransSegs of the sender's private namespace (None where the namespace is shared with
/// other traffic: loopback, peer).
fn retrans_of(t: &Topology) -> Option<u64> {
    let ns = t.tx_ns.as_ref()?;
    crate::netns::run_in(ns, retrans_here).ok().flatten()
}

/// Enters the namespace and pins; a failed pin is a note, not an error.
pub(crate) fn enter(ns: Option<&NetNs>, cpu: Option<usize>, role: &str) -> Result<Option<String>> {
    if let Some(ns) = ns {
        ns.enter()?;
    }
    sys::tight_timer_slack();
    if let Some(c) = cpu {
        if let Err(e) = sys::pin_current_thread(c) {
            return Ok(Some(format!("{role} thread not pinned to cpu {c}: {e}")));
        }
    }
    Ok(None)
}

#[derive(Debug, Default)]
pub(crate) struct TxOut {
    pub(crate) sent: u64,
    pub(crate) cpu_ns: u64,
    pub(crate) wall_ns: u64,
    pub(crate) notes: Vec<String>,
    /// Messages corrupted on purpose (`RunSpec::inject_corruption`).
    pub(crate) corrupted: u64,
    /// The kernel batching paths of this side.
    pub(crate) batching: Vec<Batching>,
    pub(crate) zerocopy: Option<ZeroCopy>,
}

#[derive(Debug, Default)]
pub(crate) struct RxOut {
    pub(crate) tracker: SeqTracker,
    pub(crate) bytes: u64,
    pub(crate) hist: Histogram,
    pub(crate) cpu_ns: u64,
    pub(crate) wall_ns: u64,
    pub(crate) notes: Vec<String>,
    pub(crate) gpu: Option<GpuSinkResult>,
    /// Receive buffer as the kernel granted it (UDP), bytes.
    pub(crate) buffer: Option<u64>,
    /// How that buffer was chosen, one line for the report.
    pub(crate) buffer_sizing: Option<String>,
    /// The kernel batching paths of this side.
    pub(crate) batching: Vec<Batching>,
    /// Highest receive backlog seen (UDP, CPU receiver), fraction of the socket's limit.
    pub(crate) peak_backlog: Option<f64>,
    /// The first defective messages (stream index filled in by `assemble`).
    pub(crate) defects: Vec<DefectRecord>,
}

/// Spacing of planted corrupt messages: a prime, so they do not line up with batch edges.
const INJECT_EVERY: u64 = 997;

/// Plants `left` corrupt messages, one every [`INJECT_EVERY`] sequence numbers, by flipping a
/// body byte after the CRC was computed (the CRC byte itself for header-only messages).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Injector {
    left: u64,
}

impl Injector {
    pub(crate) fn new(n: u64) -> Self {
        Injector { left: n }
    }

    #[inline]
    pub(crate) fn wants(&self, seq: u64) -> bool {
        self.left > 0 && seq % INJECT_EVERY == INJECT_EVERY / 2
    }

    /// Flips (or, called again, restores) the planted byte.
    pub(crate) fn flip(msg: &mut [u8]) {
        let at = if msg.len() > payload::HEADER_LEN {
            payload::HEADER_LEN + (msg.len() - payload::HEADER_LEN) / 2
        } else {
            28
        };
        msg[at] ^= 0x5a;
    }

    pub(crate) fn planted(&mut self) {
        self.left = self.left.saturating_sub(1);
    }
}

/// Stamps every message of a send round (its sequence number, time and CRC, before the kernel
/// sees any of them) and plants the corrupt ones the run asks for; the indexes of those go to
/// `planted`, so the sender can restore the reused buffer after the send.
#[inline]
pub(crate) fn stamp_round(
    gen: &mut Generator,
    inject: &mut Injector,
    ts: u64,
    buf: &mut [u8],
    size: usize,
    planted: &mut Vec<usize>,
) {
    for (i, slot) in buf.chunks_mut(size).enumerate() {
        let seq = gen.next_seq();
        gen.stamp(ts, slot);
        if inject.wants(seq) {
            Injector::flip(slot);
            inject.planted();
            planted.push(i);
        }
    }
}

/// The receive side of a GPU run, opened on the receive thread (the CUDA context is made current
/// there): buffers, kernel, and the pinned-copy calibration.
pub(crate) struct GpuRx {
    batcher: Batcher<CudaBackend>,
    cal: Option<Calibration>,
    setup_ms: f64,
}

pub(crate) fn open_gpu(g: &GpuRun, size: usize) -> Result<GpuRx> {
    let t0 = std::time::Instant::now();
    let geo = Geometry::new(size, g.batch_bytes, g.memory).map_err(Error::Gpu)?;
    let gpu_err = |e: crate::gpu_sink::SinkError| Error::Gpu(e.to_string());
    let mut be = CudaBackend::open(g.gpu.clone(), geo, g.memory).map_err(gpu_err)?;
    let cal = if g.calibration_copies > 0 {
        Some(be.calibrate(g.calibration_copies).map_err(gpu_err)?)
    } else {
        None
    };
    Ok(GpuRx {
        batcher: Batcher::new(be, geo),
        cal,
        setup_ms: t0.elapsed().as_secs_f64() * 1e3,
    })
}

impl GpuRx {
    /// Drains the GPU and fills `out` from the kernel's results. `window` turns the time the
    /// drain took into the run's receive window (`out.wall_ns`): GPU time counts against the
    /// verified rate.
    fn finish_into(
        mut self,
        out: &mut RxOut,
        extra_defects: u64,
        window: impl FnOnce(u64) -> u64,
    ) -> Result<()> {
        let f0 = sys::monotonic_ns();
        let finished = self.batcher.finish();
        out.wall_ns = window(sys::monotonic_ns() - f0);
        let (acct, totals) = finished.map_err(|e| Error::Gpu(e.to_string()))?;
        out.tracker = acct.tracker.clone();
        out.bytes = acct.verified_bytes;
        for _ in 0..extra_defects {
            out.tracker.defect();
        }
        if acct.trailing_bytes > 0 {
            out.tracker.defect();
            out.notes.push(format!(
                "{} trailing byte(s): a truncated message",
                acct.trailing_bytes
            ));
        }
        out.notes
            .push("latency not measured: messages are verified on the GPU".into());
        out.gpu = Some(crate::gpu_sink::assemble(
            &self.batcher.backend,
            &acct,
            &totals,
            self.cal,
            out.wall_ns as f64 / 1e9,
            self.setup_ms,
        ));
        Ok(())
    }
}

/// Messages per batch: ~128 KiB unpaced; paced, at most ~20 µs worth of data so the pacing
/// stays smooth.
fn batch_len(size: usize, rate_gbps: Option<f64>, max_bytes: usize) -> usize {
    let max = (max_bytes / size).max(1);
    match rate_gbps {
        Some(r) if r > 0.0 => {
            let bytes_per_20us = r * 1e9 / 8.0 * 20e-6;
            ((bytes_per_20us / size as f64) as usize).clamp(1, max)
        }
        _ => max,
    }
}

/// Sleeps until `bytes` are due at `rate_gbps` since `start_ns`.
fn pace(start_ns: u64, bytes: u64, rate_gbps: Option<f64>) {
    let Some(rate) = rate_gbps.filter(|r| *r > 0.0) else {
        return;
    };
    let due = start_ns + (bytes as f64 * 8.0 / rate) as u64;
    let now = sys::monotonic_ns();
    if due > now + 10_000 {
        std::thread::sleep(Duration::from_nanos(due - now));
    }
}

/// The socket engine over a prepared topology.
pub struct SocketEngine<'t> {
    topo: &'t Topology,
}

impl<'t> SocketEngine<'t> {
    pub fn new(topo: &'t Topology) -> Self {
        SocketEngine { topo }
    }
}

impl Engine for SocketEngine<'_> {
    fn name(&self) -> &'static str {
        "socket"
    }

    fn modes(&self) -> &'static [Mode] {
        &[Mode::Tcp, Mode::Udp]
    }

    fn run(&mut self, spec: &RunSpec, ctl: &RunControl) -> Result<EngineResult> {
        if spec.message_size < payload::HEADER_LEN {
            return Err(Error::Invalid(format!(
                "message size {} is below the {}-byte header",
                spec.message_size,
                payload::HEADER_LEN
            )));
        }
        if spec.message_size > 65_000 && spec.mode == Mode::Udp {
            return Err(Error::Invalid(format!(
                "UDP message size {} exceeds a datagram",
                spec.message_size
            )));
        }
        let t = self.topo;
        let latency = spec.latency && t.local;
        let n = spec.streams.max(1);
        if !matches!(spec.mode, Mode::Tcp | Mode::Udp) {
            return Err(Error::Unsupported(format!(
                "the socket engine does not run {}",
                spec.mode
            )));
        }
        if n > 1 && spec.gpu.is_some() {
            return Err(Error::Unsupported(
                "a GPU sink with several streams (one stream lands in the GPU's buffers; \
                 use --streams 1 with --gpu)"
                    .into(),
            ));
        }
        if n > 1 && t.kind == crate::topology::Kind::Peer {
            return Err(Error::Unsupported(
                "several streams against a --serve peer (it serves one session at a time)".into(),
            ));
        }
        let ports_before = t.port_sample();
        let counters_before = t.counter_sample().map(|c| (c, std::time::Instant::now()));
        let tcp = spec.mode == Mode::Tcp;
        let retrans_before = if tcp { retrans_of(t) } else { None };
        let one = |spec: &RunSpec| -> Result<(TxOut, RxOut)> {
            match spec.mode {
                _ if t.kind == crate::topology::Kind::Peer => crate::peer::run_client(t, spec, ctl),
                Mode::Tcp => run_tcp(t, spec, ctl, latency),
                _ => run_udp(t, spec, ctl, latency),
            }
        };
        let pairs: Vec<(TxOut, RxOut)> = if n == 1 {
            vec![one(spec)?]
        } else {
            let specs: Vec<RunSpec> = (0..n).map(|i| spec.for_stream(i)).collect();
            std::thread::scope(|s| {
                let handles: Vec<_> = specs.iter().map(|sp| s.spawn(move || one(sp))).collect();
                handles
                    .into_iter()
                    .map(|h| thread_result(h, "stream"))
                    .collect::<Result<Vec<_>>>()
            })?
        };
        let mut r = assemble(t, spec, pairs);
        if let (Some(b), Some(a)) = (retrans_before, if tcp { retrans_of(t) } else { None }) {
            r.retransmits = Some(a.saturating_sub(b));
        }
        if let Some((b, at)) = counters_before {
            if let Some(a) = t.counter_sample() {
                r.set_port_counters(&b, &a, at.elapsed().as_secs_f64());
            }
        }
        if let (Some(b), Some(a)) = (ports_before, t.port_sample()) {
            let d = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
            r.port_bytes = Some(crate::report::PortBytes {
                tx_port_tx: a.tx_bytes.saturating_sub(b.tx_bytes),
                rx_port_rx: a.rx_bytes.saturating_sub(b.rx_bytes),
                tx_port_tx_phy: d(a.tx_phy_bytes, b.tx_phy_bytes),
                rx_port_rx_phy: d(a.rx_phy_bytes, b.rx_phy_bytes),
            });
        }
        Ok(r)
    }
}

fn assemble(t: &Topology, spec: &RunSpec, pairs: Vec<(TxOut, RxOut)>) -> EngineResult {
    let mut r = EngineResult::new("socket", spec.mode, t.kind.as_str());
    let multi = pairs.len() > 1;
    let util = |cpu: u64, wall: u64| {
        if wall == 0 {
            0.0
        } else {
            cpu as f64 / wall as f64
        }
    };
    let peer = t.kind == crate::topology::Kind::Peer;
    let mut hist = Histogram::default();
    let mut wall_ns = 0u64;
    let mut streams = Vec::new();
    for (i, (mut tx, mut rx)) in pairs.into_iter().enumerate() {
        let sp = spec.for_stream(i);
        rx.tracker.finish(tx.sent);
        wall_ns = wall_ns.max(rx.wall_ns);
        if let Some(b) = rx.buffer {
            *r.rx_buffer_bytes.get_or_insert(0) += b;
        }
        if let Some(f) = rx.peak_backlog {
            r.rx_peak_backlog = Some(r.rx_peak_backlog.map_or(f, |p: f64| p.max(f)));
        }
        if r.rx_buffer_sizing.is_none() {
            r.rx_buffer_sizing = rx.buffer_sizing.take();
        }
        if multi {
            streams.push(crate::report::StreamFigures {
                stream: i,
                tx_cpu: sp.tx_cpu,
                rx_cpu: if peer { None } else { sp.rx_cpu },
                gbps: 0.0,
                bytes: rx.bytes,
                packets: rx.tracker.received,
                sent: tx.sent,
                lost: rx.tracker.lost,
                reordered: rx.tracker.reordered,
                integrity_errors: rx.tracker.integrity_errors,
                tx_utilization: util(tx.cpu_ns, tx.wall_ns),
                rx_utilization: util(rx.cpu_ns, rx.wall_ns),
            });
        }
        r.bytes += rx.bytes;
        r.packets += rx.tracker.received;
        r.sent += tx.sent;
        r.lost += rx.tracker.lost;
        r.reordered += rx.tracker.reordered;
        r.integrity_errors += rx.tracker.integrity_errors;
        hist.merge(&rx.hist);
        r.injected_corruptions += tx.corrupted;
        for mut d in rx.defects.drain(..) {
            if r.defects.len() < MAX_DEFECTS_LISTED {
                d.stream = i;
                r.defects.push(d);
            }
        }
        merge_batching(
            &mut r.batching,
            tx.batching.drain(..).chain(rx.batching.drain(..)),
        );
        if let Some(z) = tx.zerocopy {
            let t = r.zerocopy.get_or_insert(ZeroCopy {
                sends: 0,
                completed: 0,
                copied: 0,
            });
            t.sends += z.sends;
            t.completed += z.completed;
            t.copied += z.copied;
        }
        // One GPU sink per run: `run` refuses a GPU run with several streams.
        if r.gpu.is_none() {
            r.gpu = rx.gpu.take();
        }
        let tag = if multi { i.to_string() } else { String::new() };
        r.threads.push(ThreadCpu {
            role: format!("tx{tag}"),
            cpu: sp.tx_cpu,
            cpu_s: tx.cpu_ns as f64 / 1e9,
            utilization: util(tx.cpu_ns, tx.wall_ns),
        });
        r.threads.push(ThreadCpu {
            // A peer's receiver runs on the other host, on the CPU its own plan chose.
            role: format!("{}rx{tag}", if peer { "peer-" } else { "" }),
            cpu: if peer { None } else { sp.rx_cpu },
            cpu_s: rx.cpu_ns as f64 / 1e9,
            utilization: util(rx.cpu_ns, rx.wall_ns),
        });
        let prefix = if multi {
            format!("stream {i}: ")
        } else {
            String::new()
        };
        r.notes.extend(
            tx.notes
                .into_iter()
                .chain(rx.notes)
                .map(|n| format!("{prefix}{n}")),
        );
    }
    // Identical notes from every stream (the forced buffer) are said once.
    let mut seen = std::collections::BTreeSet::new();
    r.notes.retain(|n| {
        let key = n
            .split_once(": ")
            .filter(|_| multi)
            .map(|x| x.1)
            .unwrap_or(n);
        seen.insert(key.to_string())
    });
    let secs = wall_ns as f64 / 1e9;
    // Every stream over the run's common window, so the streams add up to the total.
    for st in &mut streams {
        st.gbps = metrics::gbps(st.bytes, secs);
    }
    r.streams = streams;
    r.message_size = spec.message_size;
    r.duration_s = secs;
    r.rate_gbps = spec.rate_gbps;
    r.gbps = metrics::gbps(r.bytes, secs);
    r.packets_per_s = if secs > 0.0 {
        r.packets as f64 / secs
    } else {
        0.0
    };
    r.latency = hist.summary_us();
    r.cpu_cores = r.threads.iter().map(|t| t.utilization).sum();
    r.roi = metrics::roi(r.gbps, r.cpu_cores);
    let tx_cores: f64 = r
        .threads
        .iter()
        .filter(|t| t.role.starts_with("tx"))
        .map(|t| t.utilization)
        .sum();
    r.gbps_per_core = per_core(r.gbps, r.cpu_cores);
    r.gbps_per_tx_core = per_core(r.gbps, tx_cores);
    r
}

/// Gb/s per core; none when the cores are not measured (a peer's own threads, a zero run).
fn per_core(gbps: f64, cores: f64) -> Option<f64> {
    (cores > 0.0 && gbps > 0.0).then(|| gbps / cores)
}

/// Adds one stream's batching paths to the record's: a path counts as used only when every
/// stream used it; the first stream's detail (or the first reason it was not) is kept.
fn merge_batching(all: &mut Vec<Batching>, more: impl Iterator<Item = Batching>) {
    for b in more {
        match all.iter_mut().find(|a| a.name == b.name) {
            None => all.push(b),
            Some(a) => {
                if a.used && !b.used {
                    a.used = false;
                    a.detail = b.detail;
                }
            }
        }
    }
}

pub(crate) fn thread_result<T>(
    h: std::thread::ScopedJoinHandle<'_, Result<T>>,
    role: &str,
) -> Result<T> {
    h.join()
        .unwrap_or_else(|_| Err(Error::Invalid(format!("{role} thread panicked"))))
}

/// The receiver's end of one stream once it is bound, and what the sender needs from it.
struct RxEnd<E> {
    /// The socket and what the receiving loop needs with it.
    end: E,
    /// Port the sender connects to.
    port: u16,
    /// A note for the report (a forced receive buffer).
    note: Option<String>,
}

/// One stream of TCP or UDP: an RX thread that enters its namespace, opens the GPU sink when
/// asked, binds (`bind`, which says what port and note it got) and receives (`receive`); a TX
/// thread that waits for the port, enters its namespace and sends (`send`). `bound` words what
/// the sender waits for; `tx_ended` tells the receiver the sender is done (ok or not).
fn run_pair<E>(
    t: &Topology,
    spec: &RunSpec,
    bound: &str,
    bind: impl FnOnce() -> Result<RxEnd<E>> + Send,
    receive: impl FnOnce(E, Option<GpuRx>) -> Result<RxOut> + Send,
    send: impl FnOnce(SocketAddr) -> Result<TxOut> + Send,
    tx_ended: impl FnOnce(bool) + Send,
) -> Result<(TxOut, RxOut)> {
    let (port_tx, port_rx) = mpsc::channel::<Result<u16>>();
    std::thread::scope(|s| {
        let rx = s.spawn(move || -> Result<RxOut> {
            let setup = (|| -> Result<(RxEnd<E>, Option<String>, Option<GpuRx>)> {
                let note = enter(t.rx_ns.as_ref(), spec.rx_cpu, "rx")?;
                let gpu = spec
                    .gpu
                    .as_ref()
                    .map(|g| open_gpu(g, spec.message_size))
                    .transpose()?;
                let end = bind()?;
                Ok((end, note, gpu))
            })();
            let (end, note, gpu) = match setup {
                Ok(v) => v,
                Err(e) => {
                    let _ = port_tx.send(Err(Error::Invalid(e.to_string())));
                    return Err(e);
                }
            };
            let note = match (note, end.note) {
                (Some(n), Some(m)) => Some(format!("{n}; {m}")),
                (n, m) => n.or(m),
            };
            let _ = port_tx.send(Ok(end.port));
            let mut out = receive(end.end, gpu)?;
            out.notes.extend(note);
            Ok(out)
        });
        let tx = s.spawn(move || -> Result<TxOut> {
            let r = (|| -> Result<TxOut> {
                let port = port_rx
                    .recv()
                    .map_err(|_| Error::Invalid(format!("receiver ended before {bound}")))??;
                let note = enter(t.tx_ns.as_ref(), spec.tx_cpu, "tx")?;
                let mut out = send(SocketAddr::new(t.rx_addr, port))?;
                out.notes.extend(note);
                Ok(out)
            })();
            tx_ended(r.is_ok());
            r
        });
        let tx = thread_result(tx, "tx");
        let rx = thread_result(rx, "rx");
        Ok((tx?, rx?))
    })
}

fn run_tcp(
    t: &Topology,
    spec: &RunSpec,
    ctl: &RunControl,
    latency: bool,
) -> Result<(TxOut, RxOut)> {
    let size = spec.message_size;
    // Set when the sender gives up before connecting, so the receiver stops waiting in accept.
    let tx_gone = AtomicBool::new(false);
    let tx_gone = &tx_gone;
    let bind = || -> Result<RxEnd<(TcpListener, Option<u64>)>> {
        let l = TcpListener::bind(SocketAddr::new(t.rx_addr, 0))
            .map_err(|e| Error::io(format!("listen on {}", t.rx_addr), e))?;
        let mut granted = None;
        let mut note = None;
        if let Some(want) = spec.socket.rcvbuf {
            // Set on the listener: accepted sockets inherit it, and the window scale is fixed
            // at the handshake. A fixed size turns autotuning off.
            let (got, forced) = set_receive_buffer(l.as_raw_fd(), want);
            granted = Some(got as u64);
            note = forced.map(|msg| format!("tcp {msg}"));
        }
        let port = l
            .local_addr()
            .map_err(|e| Error::io("listener address", e))?
            .port();
        Ok(RxEnd {
            end: (l, granted),
            port,
            note,
        })
    };
    let receive = |(listener, granted): (TcpListener, Option<u64>), gpu: Option<GpuRx>| {
        let stream = accept_until(&listener, tx_gone)?;
        let mut out = match gpu {
            // Paced streams keep the per-segment wake-ups: their latency is the point.
            Some(g) => tcp_receive_gpu(stream, ctl, g, spec.rate_gbps.is_none())?,
            None => tcp_receive(stream, size, latency, ctl, spec.rate_gbps.is_none()),
        };
        out.buffer = granted;
        out.buffer_sizing = Some(match spec.socket.rcvbuf {
            Some(b) => format!("{} KiB as --rcvbuf asked (autotuning off)", b >> 10),
            None => format!(
                "kernel autotuning (net.ipv4.tcp_rmem), reads of {} KiB: it grows the \
                 window to the measured bandwidth-delay product",
                RX_READ_BYTES.max(size * 2) >> 10
            ),
        });
        Ok(out)
    };
    let send = |to: SocketAddr| {
        let stream = TcpStream::connect_timeout(&to, Duration::from_secs(5))
            .map_err(|e| Error::io(format!("connect to {to}"), e))?;
        Ok(tcp_send(stream, spec, ctl))
    };
    let tx_ended = |ok: bool| {
        if !ok {
            tx_gone.store(true, Ordering::SeqCst);
        }
    };
    run_pair(t, spec, "listening", bind, receive, send, tx_ended)
}

fn run_udp(
    t: &Topology,
    spec: &RunSpec,
    ctl: &RunControl,
    latency: bool,
) -> Result<(TxOut, RxOut)> {
    let size = spec.message_size;
    let sent = AtomicU64::new(0);
    let tx_done = AtomicBool::new(false);
    let (sent, tx_done) = (&sent, &tx_done);
    let bind = || -> Result<RxEnd<(UdpSocket, usize, String)>> {
        let sock = UdpSocket::bind(SocketAddr::new(t.rx_addr, 0))
            .map_err(|e| Error::io(format!("bind udp {}", t.rx_addr), e))?;
        let (want, why) = udp_receive_buffer(
            spec.rate_gbps,
            size,
            spec.socket.gro,
            if spec.socket.recvmmsg {
                RECVS_PER_CALL
            } else {
                1
            },
            spec.socket.rcvbuf,
        );
        let (buffer, forced) = set_receive_buffer(sock.as_raw_fd(), want);
        sock.set_read_timeout(Some(Duration::from_millis(50)))
            .map_err(|e| Error::io("udp read timeout", e))?;
        let port = sock
            .local_addr()
            .map_err(|e| Error::io("udp address", e))?
            .port();
        Ok(RxEnd {
            end: (sock, buffer, why),
            port,
            note: forced.map(|msg| format!("udp {msg}")),
        })
    };
    let receive = |(sock, buffer, why): (UdpSocket, usize, String), gpu: Option<GpuRx>| {
        let mut out = match gpu {
            Some(g) => udp_receive_gpu(&sock, size, ctl, sent, tx_done, g, spec.socket)?,
            None => udp_receive(&sock, size, latency, ctl, sent, tx_done, spec.socket),
        };
        out.buffer = Some(buffer as u64);
        out.buffer_sizing = Some(why);
        Ok(out)
    };
    let send = |to: SocketAddr| {
        let local = SocketAddr::new(unspecified_like(t.rx_addr), 0);
        let sock = UdpSocket::bind(local).map_err(|e| Error::io("bind udp sender", e))?;
        sock.connect(to)
            .map_err(|e| Error::io(format!("udp connect {}:{}", to.ip(), to.port()), e))?;
        Ok(udp_send(&sock, spec, ctl, sent))
    };
    run_pair(t, spec, "binding", bind, receive, send, |_| {
        tx_done.store(true, Ordering::SeqCst)
    })
}

#[cfg(test)]
mod tests;
