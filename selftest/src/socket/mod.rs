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
    let s = std::fs::read_to_string("/proc/thread-self/net/snmp").ok()?;
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
        out.gpu = Some(GpuSinkResult::assemble(
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

fn run_tcp(
    t: &Topology,
    spec: &RunSpec,
    ctl: &RunControl,
    latency: bool,
) -> Result<(TxOut, RxOut)> {
    let size = spec.message_size;
    let (port_tx, port_rx) = mpsc::channel::<Result<u16>>();
    // Set when the sender gives up before connecting, so the receiver stops waiting in accept.
    let tx_gone = AtomicBool::new(false);
    let tx_gone = &tx_gone;
    std::thread::scope(|s| {
        let rx = s.spawn(|| -> Result<RxOut> {
            let tcp_buffer = std::cell::Cell::new(None::<u64>);
            let setup = (|| -> Result<(TcpListener, Option<String>, Option<GpuRx>)> {
                let note = enter(t.rx_ns.as_ref(), spec.rx_cpu, "rx")?;
                let gpu = spec.gpu.as_ref().map(|g| open_gpu(g, size)).transpose()?;
                let l = TcpListener::bind(SocketAddr::new(t.rx_addr, 0))
                    .map_err(|e| Error::io(format!("listen on {}", t.rx_addr), e))?;
                let mut note = note;
                if let Some(want) = spec.socket.rcvbuf {
                    // Set on the listener: accepted sockets inherit it, and the window scale
                    // is fixed at the handshake. A fixed size turns autotuning off.
                    let (granted, forced) = set_receive_buffer(l.as_raw_fd(), want);
                    tcp_buffer.set(Some(granted as u64));
                    if let Some(msg) = forced {
                        note = Some(match note {
                            Some(n) => format!("{n}; tcp {msg}"),
                            None => format!("tcp {msg}"),
                        });
                    }
                }
                Ok((l, note, gpu))
            })();
            let (listener, note, gpu) = match setup {
                Ok(v) => v,
                Err(e) => {
                    let _ = port_tx.send(Err(Error::Invalid(e.to_string())));
                    return Err(e);
                }
            };
            let port = listener
                .local_addr()
                .map_err(|e| Error::io("listener address", e))?
                .port();
            let _ = port_tx.send(Ok(port));
            let stream = accept_until(&listener, tx_gone)?;
            let mut out = match gpu {
                // Paced streams keep the per-segment wake-ups: their latency is the point.
                Some(g) => tcp_receive_gpu(stream, ctl, g, spec.rate_gbps.is_none())?,
                None => tcp_receive(stream, size, latency, ctl, spec.rate_gbps.is_none()),
            };
            out.buffer = tcp_buffer.get();
            out.buffer_sizing = Some(match spec.socket.rcvbuf {
                Some(b) => format!("{} KiB as --rcvbuf asked (autotuning off)", b >> 10),
                None => format!(
                    "kernel autotuning (net.ipv4.tcp_rmem), reads of {} KiB: it grows the \
                     window to the measured bandwidth-delay product",
                    RX_READ_BYTES.max(size * 2) >> 10
                ),
            });
            out.notes.extend(note);
            Ok(out)
        });
        let tx = s.spawn(move || -> Result<TxOut> {
            let r = (|| -> Result<TxOut> {
                let port = port_rx
                    .recv()
                    .map_err(|_| Error::Invalid("receiver ended before listening".into()))??;
                let note = enter(t.tx_ns.as_ref(), spec.tx_cpu, "tx")?;
                let to = SocketAddr::new(t.rx_addr, port);
                let stream = TcpStream::connect_timeout(&to, Duration::from_secs(5))
                    .map_err(|e| Error::io(format!("connect to {to}"), e))?;
                let mut out = tcp_send(stream, spec, ctl);
                out.notes.extend(note);
                Ok(out)
            })();
            if r.is_err() {
                tx_gone.store(true, Ordering::SeqCst);
            }
            r
        });
        let tx = thread_result(tx, "tx");
        let rx = thread_result(rx, "rx");
        Ok((tx?, rx?))
    })
}

/// Accepts one connection, giving up when `gone` is set (the sender failed before connecting).
fn accept_until(l: &TcpListener, gone: &AtomicBool) -> Result<TcpStream> {
    l.set_nonblocking(true)
        .map_err(|e| Error::io("listener", e))?;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)
                    .map_err(|e| Error::io("accepted stream", e))?;
                return Ok(s);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if gone.load(Ordering::SeqCst) {
                    return Err(Error::Invalid("the sender never connected".into()));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("accept", e)),
        }
    }
}

/// Batch buffers of a zero-copy sender: a buffer is stamped again only once the kernel said
/// it is done with every send made from it.
const ZC_BUFFERS: usize = 8;
/// How long after the run's end a zero-copy sender waits for a buffer's completions.
const ZC_STALL_NS: u64 = 10_000_000_000;

pub(crate) fn tcp_send(stream: TcpStream, spec: &RunSpec, ctl: &RunControl) -> TxOut {
    if !spec.socket.zerocopy {
        let mut out = tcp_send_copy(stream, spec, ctl);
        out.batching
            .push(batching("zerocopy", false, Err("off".into())));
        return out;
    }
    if let Err(e) = kbatch::enable_zerocopy(stream.as_raw_fd()) {
        let mut out = tcp_send_copy(stream, spec, ctl);
        out.batching.push(batching(
            "zerocopy",
            true,
            Err(format!(
                "the kernel refused SO_ZEROCOPY ({e}): copying sends"
            )),
        ));
        return out;
    }
    tcp_send_zerocopy(stream, spec, ctl)
}

/// Which zero-copy sends the kernel has finished with (completion records may come out of
/// order and cover ranges).
#[derive(Debug, Default)]
struct Completions {
    /// Every send numbered below this is complete.
    below: u32,
    ahead: Vec<(u32, u32)>,
    completed: u64,
    copied: u64,
}

impl Completions {
    fn add(&mut self, c: kbatch::Completion) {
        self.completed += c.count();
        if c.copied {
            self.copied += c.count();
        }
        self.ahead.push((c.lo, c.hi));
        while let Some(i) = self.ahead.iter().position(|r| r.0 <= self.below) {
            let (_, hi) = self.ahead.swap_remove(i);
            self.below = self.below.max(hi.wrapping_add(1));
        }
    }

    fn covers(&self, id: u32) -> bool {
        id < self.below
    }

    /// Reads every completion queued on `fd` (never blocks).
    fn drain(&mut self, fd: std::os::fd::RawFd) {
        while let Ok(Some(rec)) = kbatch::read_completion(fd) {
            if let Some(c) = rec {
                self.add(c);
            }
        }
    }
}

fn tcp_send_zerocopy(mut stream: TcpStream, spec: &RunSpec, ctl: &RunControl) -> TxOut {
    let size = spec.message_size;
    let fd = stream.as_raw_fd();
    let mut gen = Generator::new(size, 0);
    let k = batch_len(size, spec.rate_gbps, TCP_BATCH_BYTES);
    let mut bufs: Vec<Vec<u8>> = (0..ZC_BUFFERS).map(|_| gen.template().repeat(k)).collect();
    let mut last_id: Vec<Option<u32>> = vec![None; ZC_BUFFERS];
    let mut next_id = 0u32;
    let mut done = Completions::default();
    let mut out = TxOut::default();
    let cpu0 = sys::thread_cpu_ns();
    let start = sys::monotonic_ns();
    let deadline = start + spec.duration.as_nanos() as u64;
    let mut bytes = 0u64;
    let mut inject = Injector::new(spec.inject_corruption);
    let mut planted: Vec<usize> = Vec::new();
    let mut planted_in: Vec<Vec<usize>> = vec![Vec::new(); ZC_BUFFERS];
    let mut round = 0usize;
    'run: loop {
        if sys::monotonic_ns() >= deadline || ctl.stopped() {
            break;
        }
        let b = round % ZC_BUFFERS;
        round += 1;
        // The kernel may still be reading this buffer's pages: wait for its completions.
        if let Some(id) = last_id[b] {
            loop {
                done.drain(fd);
                if done.covers(id) {
                    break;
                }
                if ctl.stopped() {
                    break 'run;
                }
                // Completions come as the receiver acknowledges; a path that stopped moving
                // must not hold the run past its time.
                if sys::monotonic_ns() > deadline + ZC_STALL_NS {
                    out.notes.push(format!(
                        "zero-copy completions stopped arriving (send {id} still pending {} s after the run's end)",
                        ZC_STALL_NS / 1_000_000_000
                    ));
                    break 'run;
                }
                kbatch::wait_error_queue(fd, 10);
            }
        }
        for i in planted_in[b].drain(..) {
            Injector::flip(&mut bufs[b][i * size..(i + 1) * size]);
        }
        pace(start, bytes, spec.rate_gbps);
        let ts = sys::monotonic_ns();
        let buf = &mut bufs[b];
        for (i, slot) in buf.chunks_mut(size).enumerate() {
            let seq = gen.next_seq();
            gen.stamp(ts, slot);
            if inject.wants(seq) {
                Injector::flip(slot);
                inject.planted();
                planted.push(i);
            }
        }
        let mut off = 0usize;
        let mut failed = None;
        while off < buf.len() {
            match kbatch::send_flags(fd, &buf[off..], true) {
                Ok(n) => {
                    off += n;
                    last_id[b] = Some(next_id);
                    next_id = next_id.wrapping_add(1);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Too much pinned memory outstanding (optmem): let completions come back.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    done.drain(fd);
                    kbatch::wait_error_queue(fd, 1);
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // The kernel may still be reading the pages: a planted byte is restored only when the
        // buffer comes round again, after its completions.
        if failed.is_none() {
            out.corrupted += planted.len() as u64;
        }
        planted_in[b].append(&mut planted);
        if let Some(e) = failed {
            out.notes.push(format!("tcp send: {e}"));
            break;
        }
        out.sent += k as u64;
        bytes += buf.len() as u64;
        ctl.add_tx(buf.len() as u64);
        done.drain(fd);
    }
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Write);
    out.wall_ns = sys::monotonic_ns() - start;
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    // Collect the last completions (the receiver's ACKs release the pages).
    let until = sys::monotonic_ns() + 2_000_000_000;
    while !done.covers(next_id.wrapping_sub(1)) && next_id > 0 && sys::monotonic_ns() < until {
        kbatch::wait_error_queue(fd, 10);
        done.drain(fd);
    }
    let z = ZeroCopy {
        sends: u64::from(next_id),
        completed: done.completed,
        copied: done.copied,
    };
    out.batching.push(batching(
        "zerocopy",
        true,
        Ok(if z.copies_avoided() {
            format!(
                "{} of {} completed sends left uncopied",
                z.completed - z.copied,
                z.completed
            )
        } else {
            format!(
                "the kernel copied all {} completed sends (SO_EE_CODE_ZEROCOPY_COPIED: the \
                 receiver is a local socket, as on a veth pair or loopback)",
                z.completed
            )
        }),
    ));
    out.zerocopy = Some(z);
    let mut sink = [0u8; 64];
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.read(&mut sink);
    out
}

fn tcp_send_copy(mut stream: TcpStream, spec: &RunSpec, ctl: &RunControl) -> TxOut {
    let size = spec.message_size;
    let mut gen = Generator::new(size, 0);
    let k = batch_len(size, spec.rate_gbps, TCP_BATCH_BYTES);
    let mut batch = gen.template().repeat(k);
    let mut out = TxOut::default();
    let cpu0 = sys::thread_cpu_ns();
    let start = sys::monotonic_ns();
    let deadline = start + spec.duration.as_nanos() as u64;
    let mut bytes = 0u64;
    let mut inject = Injector::new(spec.inject_corruption);
    let mut planted: Vec<usize> = Vec::new();
    loop {
        let now = sys::monotonic_ns();
        if now >= deadline || ctl.stopped() {
            break;
        }
        pace(start, bytes, spec.rate_gbps);
        let ts = sys::monotonic_ns();
        for (i, slot) in batch.chunks_mut(size).enumerate() {
            let seq = gen.next_seq();
            gen.stamp(ts, slot);
            if inject.wants(seq) {
                Injector::flip(slot);
                inject.planted();
                planted.push(i);
            }
        }
        let sent = stream.write_all(&batch);
        // The batch buffer is reused and only headers are restamped: undo the planted bytes.
        for i in planted.drain(..) {
            Injector::flip(&mut batch[i * size..(i + 1) * size]);
            if sent.is_ok() {
                out.corrupted += 1;
            }
        }
        if let Err(e) = sent {
            out.notes.push(format!("tcp send: {e}"));
            break;
        }
        out.sent += k as u64;
        bytes += batch.len() as u64;
        ctl.add_tx(batch.len() as u64);
    }
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Write);
    out.wall_ns = sys::monotonic_ns() - start;
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    // Wait for the receiver to close, so the retransmission count covers the whole transfer.
    let mut sink = [0u8; 64];
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.read(&mut sink);
    out
}

/// Raises the receiver's low-water mark to [`RX_LOW_WATER`] (best effort: without it the
/// reader is only woken more often). A read still returns at the end of the stream, and the
/// kernel caps the mark at the space the read offers, so a partial message never waits.
fn low_water(stream: &TcpStream) {
    let _ = sys::set_receive_low_water(stream.as_raw_fd(), RX_LOW_WATER);
}

pub(crate) fn tcp_receive(
    mut stream: TcpStream,
    size: usize,
    latency: bool,
    ctl: &RunControl,
    batch_wakeups: bool,
) -> RxOut {
    let mut out = RxOut::default();
    let mut buf = vec![0u8; RX_READ_BYTES.max(size * 2)];
    if batch_wakeups {
        low_water(&stream);
    }
    let mut filled = 0usize;
    let cpu0 = sys::thread_cpu_ns();
    let start = sys::monotonic_ns();
    loop {
        let n = match stream.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                out.notes.push(format!("tcp receive: {e}"));
                break;
            }
        };
        let now = sys::monotonic_ns();
        filled += n;
        ctl.add_rx(n as u64);
        let mut off = 0;
        while filled - off >= size {
            match payload::check(&buf[off..off + size]) {
                Ok(h) => {
                    out.tracker.accept(h.seq);
                    out.bytes += size as u64;
                    if latency && h.tx_ns != 0 {
                        out.hist.record(now.saturating_sub(h.tx_ns));
                    }
                }
                // The stream is framed by the configured size: skip one message and go on.
                Err(_) => out.tracker.defect(),
            }
            off += size;
        }
        buf.copy_within(off..filled, 0);
        filled -= off;
    }
    if filled > 0 {
        out.tracker.defect();
        out.notes
            .push(format!("{filled} trailing byte(s): a truncated message"));
    }
    out.wall_ns = sys::monotonic_ns() - start;
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    out
}

/// The TCP receiver with a GPU sink: reads go straight into the batch buffers (pinned host
/// memory); the kernel verifies every message.
pub(crate) fn tcp_receive_gpu(
    mut stream: TcpStream,
    ctl: &RunControl,
    mut g: GpuRx,
    batch_wakeups: bool,
) -> Result<RxOut> {
    let mut out = RxOut::default();
    if batch_wakeups {
        low_water(&stream);
    }
    let cpu0 = sys::thread_cpu_ns();
    let start = sys::monotonic_ns();
    let gpu_err = |e: crate::gpu_sink::SinkError| Error::Gpu(e.to_string());
    loop {
        let w = g.batcher.writable().map_err(gpu_err)?;
        let n = match stream.read(w) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                out.notes.push(format!("tcp receive: {e}"));
                break;
            }
        };
        ctl.add_rx(n as u64);
        g.batcher.commit(n).map_err(gpu_err)?;
    }
    // The window ends when the last batch is verified.
    let res = g.finish_into(&mut out, 0, |_| sys::monotonic_ns() - start);
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    res?;
    Ok(out)
}

/// The UDP receive buffer for a stream paced at `rate_gbps` (None: unpaced) of `size`-byte
/// datagrams read `batch` reads per `recvmmsg` call, with or without GRO; `user` (`--rcvbuf`)
/// wins. Returns the bytes to ask SO_RCVBUF for and why, in words.
///
/// The buffer must hold what arrives while the receiving thread is off its CPU
/// ([`UDP_STALL_BUDGET_MS`] of the rate), and never less than two batches of reads (one being
/// copied out while the next fills). The kernel doubles the size asked for and charges each
/// datagram its skb overhead from that double, so the payload figure is asked for as is.
pub fn udp_receive_buffer(
    rate_gbps: Option<f64>,
    size: usize,
    gro: bool,
    batch: usize,
    user: Option<usize>,
) -> (usize, String) {
    if let Some(u) = user {
        return (u, format!("{} KiB as --rcvbuf asked", u >> 10));
    }
    let read = if gro { GRO_READ_BYTES.max(size) } else { size };
    let batches = 2 * read * batch.max(1);
    let Some(rate) = rate_gbps.filter(|r| r.is_finite() && *r > 0.0) else {
        let b = UDP_RCVBUF.max(batches).min(UDP_RCVBUF_MAX);
        return (
            b,
            format!(
                "{} MiB: unpaced, no rate to size from (the fixed size, {:.1} ms of 40 Gb/s)",
                b >> 20,
                b as f64 * 8.0 / 40e9 * 1e3
            ),
        );
    };
    let stall = (rate * 1e9 / 8.0 * UDP_STALL_BUDGET_MS / 1e3) as usize;
    let want = stall
        .max(batches)
        .clamp(UDP_RCVBUF_MIN, UDP_RCVBUF_MAX)
        .div_ceil(1 << 20)
        .saturating_mul(1 << 20)
        .min(UDP_RCVBUF_MAX);
    let rule = if want == UDP_RCVBUF_MAX && stall > UDP_RCVBUF_MAX {
        "the cap".to_string()
    } else if stall >= batches && stall >= UDP_RCVBUF_MIN {
        format!("{UDP_STALL_BUDGET_MS} ms of {rate:.3} Gb/s")
    } else if batches >= UDP_RCVBUF_MIN {
        format!("two batches of {} reads of {} B", batch.max(1), read)
    } else {
        "the floor".to_string()
    };
    (want >> 20 << 20, format!("{} MiB: {rule}", want >> 20))
}

/// Asks for a `want`-byte receive buffer, forcing it past net.core.rmem_max where allowed
/// (root). Returns what the kernel granted (its doubled figure) and a note when forced.
fn set_receive_buffer(fd: std::os::fd::RawFd, want: usize) -> (usize, Option<String>) {
    let granted = sys::set_socket_buffer(fd, true, want).unwrap_or(0);
    // The kernel reports twice the size asked for (bookkeeping overhead).
    if granted >= want * 2 {
        return (granted, None);
    }
    match sys::force_receive_buffer(fd, want) {
        Ok(forced) => (
            forced,
            Some(format!(
                "receive buffer forced to {} KiB (net.core.rmem_max allowed {} KiB; the net.sysctl check judges that)",
                forced / 2 / 1024,
                granted / 2 / 1024
            )),
        ),
        Err(_) => (granted, None),
    }
}

fn run_udp(
    t: &Topology,
    spec: &RunSpec,
    ctl: &RunControl,
    latency: bool,
) -> Result<(TxOut, RxOut)> {
    let size = spec.message_size;
    let (port_tx, port_rx) = mpsc::channel::<Result<u16>>();
    let sent = AtomicU64::new(0);
    let tx_done = AtomicBool::new(false);
    let (sent, tx_done) = (&sent, &tx_done);
    std::thread::scope(|s| {
        let rx = s.spawn(|| -> Result<RxOut> {
            let sizing = std::cell::Cell::new(None::<String>);
            let setup = (|| -> Result<(UdpSocket, Option<String>, Option<GpuRx>, usize)> {
                let note = enter(t.rx_ns.as_ref(), spec.rx_cpu, "rx")?;
                let gpu = spec.gpu.as_ref().map(|g| open_gpu(g, size)).transpose()?;
                let sock = UdpSocket::bind(SocketAddr::new(t.rx_addr, 0))
                    .map_err(|e| Error::io(format!("bind udp {}", t.rx_addr), e))?;
                let fd = sock.as_raw_fd();
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
                let (buffer, forced) = set_receive_buffer(fd, want);
                let mut note = note;
                if let Some(msg) = forced {
                    note = Some(match note {
                        Some(n) => format!("{n}; udp {msg}"),
                        None => format!("udp {msg}"),
                    });
                }
                sizing.set(Some(why));
                sock.set_read_timeout(Some(Duration::from_millis(50)))
                    .map_err(|e| Error::io("udp read timeout", e))?;
                Ok((sock, note, gpu, buffer))
            })();
            let (sock, note, gpu, buffer) = match setup {
                Ok(v) => v,
                Err(e) => {
                    let _ = port_tx.send(Err(Error::Invalid(e.to_string())));
                    return Err(e);
                }
            };
            let port = sock
                .local_addr()
                .map_err(|e| Error::io("udp address", e))?
                .port();
            let _ = port_tx.send(Ok(port));
            let mut out = match gpu {
                Some(g) => udp_receive_gpu(&sock, size, ctl, sent, tx_done, g, spec.socket)?,
                None => udp_receive(&sock, size, latency, ctl, sent, tx_done, spec.socket),
            };
            out.buffer = Some(buffer as u64);
            out.buffer_sizing = sizing.take();
            out.notes.extend(note);
            Ok(out)
        });
        let tx = s.spawn(move || -> Result<TxOut> {
            let r = (|| -> Result<TxOut> {
                let port = port_rx
                    .recv()
                    .map_err(|_| Error::Invalid("receiver ended before binding".into()))??;
                let note = enter(t.tx_ns.as_ref(), spec.tx_cpu, "tx")?;
                let local = SocketAddr::new(unspecified_like(t.rx_addr), 0);
                let sock = UdpSocket::bind(local).map_err(|e| Error::io("bind udp sender", e))?;
                sock.connect(SocketAddr::new(t.rx_addr, port))
                    .map_err(|e| Error::io(format!("udp connect {}:{port}", t.rx_addr), e))?;
                let mut out = udp_send(&sock, spec, ctl, sent);
                out.notes.extend(note);
                Ok(out)
            })();
            tx_done.store(true, Ordering::SeqCst);
            r
        });
        let tx = thread_result(tx, "tx");
        let rx = thread_result(rx, "rx");
        Ok((tx?, rx?))
    })
}

pub(crate) fn unspecified_like(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    }
}

/// What a batching path does in this run: used with `detail`, or not and why.
fn batching(name: &str, asked: bool, used: std::result::Result<String, String>) -> Batching {
    let (used, detail) = match (asked, used) {
        (false, _) => (false, "off".to_string()),
        (true, Ok(d)) => (true, d),
        (true, Err(why)) => (false, why),
    };
    Batching {
        name: name.into(),
        asked,
        used,
        detail,
    }
}

/// Super-datagrams (GSO sends) per `sendmmsg` call of an unpaced sender.
const SENDS_PER_CALL: usize = 8;

pub(crate) fn udp_send(
    sock: &UdpSocket,
    spec: &RunSpec,
    ctl: &RunControl,
    sent: &AtomicU64,
) -> TxOut {
    let size = spec.message_size;
    let opts = spec.socket;
    let fd = sock.as_raw_fd();
    let mut out = TxOut::default();
    // GSO: messages per send, or why not. The segment must fit the path MTU.
    let v6 = sock.peer_addr().map(|a| a.is_ipv6()).unwrap_or(false);
    let mut gso: std::result::Result<usize, String> = if !opts.gso {
        Err("off".into())
    } else {
        kbatch::gso_segments(size, kbatch::path_mtu(fd, v6).ok()).and_then(|n| {
            kbatch::set_gso_segment(fd, size)
                .map(|_| n)
                .map_err(|e| format!("the kernel refused UDP_SEGMENT ({e}): one datagram per send"))
        })
    };
    let mut mmsg: std::result::Result<(), String> = if opts.sendmmsg {
        Ok(())
    } else {
        Err("off".into())
    };
    let segs = |g: &std::result::Result<usize, String>| *g.as_ref().unwrap_or(&1);
    let unpaced_max = SENDS_PER_CALL * segs(&gso) * size;
    let mut gen = Generator::new(size, 0);
    // Paced: ~20 µs of data per round, but at least one full GSO send (the kernel puts its
    // segments on the path back to back anyway). Unpaced: SENDS_PER_CALL GSO sends per call.
    let k = batch_len(size, spec.rate_gbps, unpaced_max.max(32 * size)).max(segs(&gso));
    let mut batch = gen.template().repeat(k);
    let cpu0 = sys::thread_cpu_ns();
    let start = sys::monotonic_ns();
    let deadline = start + spec.duration.as_nanos() as u64;
    let mut bytes = 0u64;
    let mut refused = 0u64;
    let mut inject = Injector::new(spec.inject_corruption);
    let mut planted: Vec<usize> = Vec::new();
    let (mut calls, mut units_sent) = (0u64, 0u64);
    'run: loop {
        if sys::monotonic_ns() >= deadline || ctl.stopped() {
            break;
        }
        pace(start, bytes, spec.rate_gbps);
        let ts = sys::monotonic_ns();
        // Every message of the round carries its own sequence number, stamp and CRC before
        // the kernel sees any of them: GSO only cuts the buffer at message boundaries.
        for (i, slot) in batch.chunks_mut(size).enumerate() {
            let seq = gen.next_seq();
            gen.stamp(ts, slot);
            if inject.wants(seq) {
                Injector::flip(slot);
                inject.planted();
                planted.push(i);
            }
        }
        let mut done = 0usize; // messages of this round handed to the kernel
        let mut fatal = false;
        while done < k {
            let per = segs(&gso);
            let units: Vec<&[u8]> = batch[done * size..].chunks(per * size).collect();
            match kbatch::send_units(fd, &units, mmsg.is_ok()) {
                Ok(n) => {
                    calls += 1;
                    units_sent += n as u64;
                    let msgs: usize = units[..n].iter().map(|u| u.len() / size).sum();
                    done += msgs;
                    out.sent += msgs as u64;
                    sent.store(out.sent, Ordering::Release);
                    bytes += (msgs * size) as u64;
                    ctl.add_tx((msgs * size) as u64);
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => {
                        std::thread::yield_now();
                        if ctl.stopped() {
                            fatal = true;
                            break;
                        }
                    }
                    Some(libc::ECONNREFUSED) if refused < 100 => refused += 1,
                    // A device without checksum offload (EIO) or a route the segment does
                    // not fit (EINVAL): send one datagram per message from here on.
                    Some(libc::EIO) | Some(libc::EINVAL) if gso.is_ok() => {
                        let _ = kbatch::set_gso_segment(fd, 0);
                        gso = Err(format!(
                            "the kernel refused a GSO send ({e}); one datagram per send from message {}",
                            out.sent
                        ));
                    }
                    Some(libc::ENOSYS) if mmsg.is_ok() => {
                        mmsg = Err(format!(
                            "the kernel has no sendmmsg ({e}): one send per call"
                        ));
                    }
                    _ => {
                        out.notes.push(format!("udp send: {e}"));
                        fatal = true;
                        break;
                    }
                },
            }
        }
        // The round's buffer is reused and only headers are restamped: undo planted bytes.
        for i in planted.drain(..) {
            Injector::flip(&mut batch[i * size..(i + 1) * size]);
            if i < done {
                out.corrupted += 1;
            }
        }
        if fatal {
            break 'run;
        }
    }
    out.wall_ns = sys::monotonic_ns() - start;
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    let per_call = if calls > 0 {
        out.sent as f64 / calls as f64
    } else {
        0.0
    };
    out.batching.push(batching(
        "gso",
        opts.gso,
        gso.map(|n| {
            format!(
                "up to {n} messages of {size} B per send, {:.1} on average",
                if units_sent > 0 {
                    out.sent as f64 / units_sent as f64
                } else {
                    0.0
                }
            )
        }),
    ));
    out.batching.push(batching(
        "sendmmsg",
        opts.sendmmsg,
        mmsg.map(|_| format!("{per_call:.1} messages per system call")),
    ));
    out
}

/// Datagrams (or GRO reads) per `recvmmsg` call.
const RECVS_PER_CALL: usize = 16;

/// Turns GRO on for a receiving socket as `opts` asks; what the report says about it.
pub(crate) fn udp_receive_batching(sock: &UdpSocket, opts: crate::engine::SocketOptions) -> bool {
    opts.gro && kbatch::enable_gro(sock.as_raw_fd()).is_ok()
}

/// Verifies one datagram and accounts for it.
#[inline]
fn udp_verify(out: &mut RxOut, d: &[u8], now: u64, latency: bool, place: Option<(usize, usize)>) {
    match payload::check(d) {
        Ok(h) => {
            out.tracker.accept(h.seq);
            out.bytes += d.len() as u64;
            if latency && h.tx_ns != 0 {
                out.hist.record(now.saturating_sub(h.tx_ns));
            }
        }
        Err(defect) => {
            out.tracker.defect();
            if out.defects.len() < MAX_DEFECTS_LISTED {
                out.defects.push(DefectRecord {
                    stream: 0,
                    seq: payload::peek_header(d).ok().map(|h| h.seq),
                    defect: defect_name(defect).into(),
                    bytes: d.len(),
                    segment: place.map(|p| p.0),
                    segments: place.map(|p| p.1),
                });
            }
        }
    }
}

fn defect_name(d: payload::Defect) -> &'static str {
    match d {
        payload::Defect::Short => "short",
        payload::Defect::BadMagic => "magic",
        payload::Defect::BadLength => "length",
        payload::Defect::BadCrc => "crc",
    }
}

pub(crate) fn udp_receive(
    sock: &UdpSocket,
    size: usize,
    latency: bool,
    ctl: &RunControl,
    sent: &AtomicU64,
    tx_done: &AtomicBool,
    opts: crate::engine::SocketOptions,
) -> RxOut {
    let mut out = RxOut::default();
    let gro = udp_receive_batching(sock, opts);
    let gro_why = if !opts.gro || gro {
        Ok(())
    } else {
        Err("the kernel refused UDP_GRO: one datagram per read".to_string())
    };
    // A GRO read holds up to one 64 KiB super-datagram; otherwise one byte more than a
    // message, so an oversized datagram shows as a length defect.
    let cap = if gro { 65_536 } else { size + 1 };
    let mut mmsg = opts.recvmmsg;
    let mut mmsg_why: std::result::Result<(), String> = Ok(());
    let mut rx = kbatch::MultiReceiver::new(RECVS_PER_CALL, cap, mmsg);
    let fd = sock.as_raw_fd();
    let cpu0 = sys::thread_cpu_ns();
    let mut first = None;
    let mut last = sys::monotonic_ns();
    let mut idle_since: Option<u64> = None;
    let (mut calls, mut reads, mut coalesced) = (0u64, 0u64, 0u64);
    loop {
        match rx.recv(fd) {
            Ok(n) => {
                let now = sys::monotonic_ns();
                first.get_or_insert(now);
                last = now;
                idle_since = None;
                calls += 1;
                reads += n as u64;
                for i in 0..n {
                    let r = rx.get(i);
                    ctl.add_rx(r.bytes.len() as u64);
                    if r.truncated {
                        out.tracker.defect();
                        continue;
                    }
                    // Each datagram of a GRO read on its own: loss, order and integrity are
                    // per datagram, never per read.
                    let segs = kbatch::segments(r.bytes.len(), r.segment);
                    let count = if r.segment > 0 {
                        r.bytes.len().div_ceil(r.segment)
                    } else {
                        1
                    };
                    if count > 1 {
                        coalesced += 1;
                    }
                    for (j, range) in segs.enumerate() {
                        let place = (count > 1).then_some((j, count));
                        udp_verify(&mut out, &r.bytes[range], now, latency, place);
                    }
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) if mmsg && e.raw_os_error() == Some(libc::ENOSYS) => {
                mmsg = false;
                mmsg_why = Err(format!(
                    "the kernel has no recvmmsg ({e}): one read per call"
                ));
                rx = kbatch::MultiReceiver::new(1, cap, false);
            }
            Err(e) => {
                out.notes.push(format!("udp receive: {e}"));
                break;
            }
        }
        if tx_done.load(Ordering::Acquire) {
            let total = sent.load(Ordering::Acquire);
            if out.tracker.received + out.tracker.integrity_errors >= total {
                break;
            }
            let now = sys::monotonic_ns();
            let idle = *idle_since.get_or_insert(now);
            if now - idle > UDP_DRAIN.as_nanos() as u64 {
                break;
            }
        }
    }
    out.wall_ns = first.map(|f| last - f).unwrap_or(0);
    // CPU over the receive window, not the drain wait (the thread mostly slept in it).
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    let datagrams = out.tracker.received + out.tracker.integrity_errors;
    let avg = |n: u64| {
        if n > 0 {
            datagrams as f64 / n as f64
        } else {
            0.0
        }
    };
    out.batching.push(batching(
        "gro",
        opts.gro,
        gro_why.map(|_| {
            format!(
                "{:.1} datagrams per read, {coalesced} of {reads} reads coalesced",
                avg(reads)
            )
        }),
    ));
    out.batching.push(batching(
        "recvmmsg",
        opts.recvmmsg,
        mmsg_why.map(|_| format!("{:.1} datagrams per system call", avg(calls))),
    ));
    out
}

/// The UDP receiver with a GPU sink: each datagram lands in the next message slot of a batch
/// buffer. A datagram of the wrong size is counted as a defect on the CPU (it cannot be framed).
pub(crate) fn udp_receive_gpu(
    sock: &UdpSocket,
    size: usize,
    ctl: &RunControl,
    sent: &AtomicU64,
    tx_done: &AtomicBool,
    mut g: GpuRx,
    opts: crate::engine::SocketOptions,
) -> Result<RxOut> {
    let mut out = RxOut::default();
    let cpu0 = sys::thread_cpu_ns();
    let mut first = None;
    let mut last = sys::monotonic_ns();
    let mut idle_since: Option<u64> = None;
    let (mut committed, mut misframed) = (0u64, 0u64);
    let gpu_err = |e: crate::gpu_sink::SinkError| Error::Gpu(e.to_string());
    loop {
        let slot = g.batcher.message_slot().map_err(gpu_err)?;
        // The slot is exactly one message: MSG_TRUNC makes an oversized datagram report its
        // real length (plain recv would cut it to `size` and it could pass).
        match sys::recv_datagram(sock, slot) {
            Ok(n) => {
                let now = sys::monotonic_ns();
                first.get_or_insert(now);
                last = now;
                idle_since = None;
                ctl.add_rx(n as u64);
                if n == size {
                    g.batcher.commit(size).map_err(gpu_err)?;
                    committed += 1;
                } else {
                    misframed += 1;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                out.notes.push(format!("udp receive: {e}"));
                break;
            }
        }
        if tx_done.load(Ordering::Acquire) {
            if committed + misframed >= sent.load(Ordering::Acquire) {
                break;
            }
            let now = sys::monotonic_ns();
            let idle = *idle_since.get_or_insert(now);
            if now - idle > UDP_DRAIN.as_nanos() as u64 {
                break;
            }
        }
    }
    // The receive window (drain wait excluded) plus the time the last batches took on the GPU.
    let res = g.finish_into(&mut out, misframed, |gpu_tail| {
        first.map(|f| last - f + gpu_tail).unwrap_or(0)
    });
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    res?;
    if misframed > 0 {
        out.notes.push(format!(
            "{misframed} datagram(s) of the wrong size (counted on the CPU)"
        ));
    }
    for name in ["gro", "recvmmsg"] {
        let asked = if name == "gro" {
            opts.gro
        } else {
            opts.recvmmsg
        };
        out.batching.push(batching(
            name,
            asked,
            Err("the GPU sink reads one datagram into each message slot".into()),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\nTcp: 1 200 120000 -1 10 5 0 1 2 1000 2000 37 0 3 0\nUdp: InDatagrams\nUdp: 5\n";

    #[test]
    fn retrans_parse() {
        assert_eq!(parse_retrans_segs(SNMP), Some(37));
        assert_eq!(parse_retrans_segs(""), None);
        assert_eq!(parse_retrans_segs("Tcp: RetransSegs\n"), None);
        assert_eq!(parse_retrans_segs("Tcp: RetransSegs\nTcp: x\n"), None);
    }

    #[test]
    fn batches() {
        assert_eq!(batch_len(8192, None, 128 * 1024), 16);
        assert_eq!(batch_len(8192, None, TCP_BATCH_BYTES), 64);
        assert_eq!(batch_len(200_000, None, 128 * 1024), 1);
        assert_eq!(batch_len(8192, Some(1.0), 128 * 1024), 1);
        assert_eq!(batch_len(8192, Some(100.0), 128 * 1024), 16);
    }

    fn loopback_run(mode: Mode, rate: Option<f64>) -> EngineResult {
        let topo = Topology::loopback();
        let mut e = SocketEngine::new(&topo);
        let mut spec = RunSpec::new(mode);
        spec.duration = Duration::from_millis(300);
        spec.rate_gbps = rate;
        spec.message_size = 8192;
        e.run(&spec, &RunControl::new()).expect("run")
    }

    #[test]
    fn udp_receive_buffer_is_sized_from_the_path() {
        let mib = 1usize << 20;
        // 38 Gb/s for 10 ms = 47.5 MB: 46 MiB (rounded up to whole MiB), more than the old 32.
        let (b, why) = udp_receive_buffer(Some(38.0), 8192, true, RECVS_PER_CALL, None);
        assert_eq!(b, 46 * mib, "{why}");
        assert!(why.contains("10 ms of 38.000 Gb/s"), "{why}");
        // 1 Gb/s: 1.25 MB of stall, but two batches of 16 GRO reads (2 MiB) and the 4 MiB
        // floor come first.
        let (b, why) = udp_receive_buffer(Some(1.0), 8192, true, RECVS_PER_CALL, None);
        assert_eq!(b, UDP_RCVBUF_MIN);
        assert!(why.contains("floor"), "{why}");
        // Jumbo reads without GRO: two batches of 16 x 60000 B = 1.8 MiB < floor; with 64
        // reads per call, 7.3 MiB: the batches decide.
        let (b, why) = udp_receive_buffer(Some(1.0), 60000, false, 64, None);
        assert_eq!(b, 8 * mib);
        assert!(why.contains("two batches of 64 reads of 60000 B"), "{why}");
        // 400 Gb/s would want 500 MB: capped.
        let (b, why) = udp_receive_buffer(Some(400.0), 8192, true, 16, None);
        assert_eq!(b, UDP_RCVBUF_MAX);
        assert!(why.contains("cap"), "{why}");
        // Unpaced: no rate, the fixed size; garbage rates count as none.
        for r in [None, Some(0.0), Some(f64::NAN), Some(-3.0)] {
            let (b, why) = udp_receive_buffer(r, 8192, true, 16, None);
            assert_eq!(b, UDP_RCVBUF, "{r:?}");
            assert!(why.contains("unpaced"), "{why}");
        }
        // The user's size wins.
        let (b, why) = udp_receive_buffer(Some(38.0), 8192, true, 16, Some(3 * mib));
        assert_eq!(b, 3 * mib);
        assert!(why.contains("--rcvbuf"), "{why}");
    }

    #[test]
    fn the_report_says_how_the_receive_buffer_was_sized() {
        let r = loopback_run(Mode::Udp, Some(0.5));
        let why = r.rx_buffer_sizing.clone().expect("sizing in the report");
        assert!(why.contains("floor"), "{why}");
        assert!(r.rx_buffer_bytes.is_some());
        let json = serde_json::to_string(&r).expect("json");
        assert!(json.contains("\"rx_buffer_sizing\""), "{json}");
        let mut rep = crate::report::Report::new("test", "loopback", "none");
        rep.push(r.clone());
        let text = rep.to_text();
        assert!(text.contains("receive buffer: 4 MiB: the floor"), "{text}");
        let r = loopback_run(Mode::Tcp, None);
        let why = r.rx_buffer_sizing.expect("tcp sizing");
        assert!(why.contains("autotuning"), "{why}");
        // A fixed TCP buffer is set and reported (the kernel reports double what was asked,
        // capped by rmem_max unless forced as root: at least something was granted).
        let topo = Topology::loopback();
        let mut e = SocketEngine::new(&topo);
        let mut spec = RunSpec::new(Mode::Tcp);
        spec.duration = Duration::from_millis(200);
        spec.socket.rcvbuf = Some(1 << 20);
        let r = e.run(&spec, &RunControl::new()).expect("run");
        assert!(r.rx_buffer_sizing.expect("sizing").contains("--rcvbuf"));
        assert!(r.rx_buffer_bytes.expect("granted") > 0);
        assert_eq!(r.integrity_errors, 0);
    }

    #[test]
    fn tcp_over_loopback_verifies_everything() {
        let r = loopback_run(Mode::Tcp, None);
        assert!(r.packets > 0);
        assert_eq!(r.packets, r.sent);
        assert_eq!(r.integrity_errors, 0);
        assert_eq!(r.lost, 0);
        assert!(r.gbps > 0.0);
        assert!(r.latency.is_some());
    }

    #[test]
    fn udp_over_loopback_paced() {
        let r = loopback_run(Mode::Udp, Some(0.5));
        assert!(r.packets > 0, "{r:?}");
        assert_eq!(r.integrity_errors, 0);
        // 0.5 Gb/s for 0.3 s is about 2300 messages of 8 KiB; pacing must hold it near that.
        assert!(r.sent < 4000, "sent {}", r.sent);
    }

    #[test]
    fn several_streams_add_up() {
        let topo = Topology::loopback();
        let mut e = SocketEngine::new(&topo);
        for mode in [Mode::Tcp, Mode::Udp] {
            let mut spec = RunSpec::new(mode);
            spec.duration = Duration::from_millis(300);
            spec.streams = 3;
            if mode == Mode::Udp {
                spec.rate_gbps = Some(0.6);
            }
            let r = e.run(&spec, &RunControl::new()).expect("run");
            assert_eq!(r.threads.len(), 6);
            assert_eq!(r.threads[4].role, "tx2");
            assert_eq!(r.integrity_errors, 0);
            assert!(r.packets > 0);
            assert_eq!(r.packets + r.lost, r.sent, "{r:?}");
            // Each stream's figures, adding up to the totals.
            assert_eq!(r.streams.len(), 3);
            let sum =
                |f: fn(&crate::report::StreamFigures) -> u64| r.streams.iter().map(f).sum::<u64>();
            assert_eq!(sum(|s| s.bytes), r.bytes);
            assert_eq!(sum(|s| s.packets), r.packets);
            assert_eq!(sum(|s| s.sent), r.sent);
            assert_eq!(sum(|s| s.lost), r.lost);
            let g: f64 = r.streams.iter().map(|s| s.gbps).sum();
            assert!(
                (g - r.gbps).abs() <= 1e-9 * r.gbps.max(1.0),
                "{g} {}",
                r.gbps
            );
            let text = {
                let mut rep = crate::report::Report::new("h", "loopback", "x");
                rep.push(r.clone());
                rep.to_text()
            };
            assert!(text.contains("stream") && text.contains("sum"), "{text}");
        }
        // One stream: no per-stream table (the record is the stream).
        let r = loopback_run(Mode::Tcp, None);
        assert!(r.streams.is_empty());
    }

    /// Runs UDP over loopback at 2 Gb/s with one planted corrupt message (sequence number
    /// 498) and stops once 1000 messages arrived, whatever the machine's load.
    fn udp_with_one_planted(opts: crate::engine::SocketOptions) -> EngineResult {
        let topo = Topology::loopback();
        let mut e = SocketEngine::new(&topo);
        let mut spec = RunSpec::new(Mode::Udp);
        spec.duration = Duration::from_secs(60);
        spec.rate_gbps = Some(2.0);
        spec.message_size = 8192;
        spec.inject_corruption = 1;
        spec.socket = opts;
        let ctl = RunControl::new();
        let c2 = ctl.clone();
        let watcher = std::thread::spawn(move || {
            while c2.rx_bytes() < 1000 * 8192 && !c2.stopped() {
                std::thread::sleep(Duration::from_millis(5));
            }
            c2.stop();
        });
        let r = e.run(&spec, &ctl);
        ctl.stop();
        watcher.join().expect("join");
        r.expect("run")
    }

    #[test]
    fn a_corrupt_datagram_inside_a_gso_batch_is_named() {
        let r = udp_with_one_planted(crate::engine::SocketOptions::default());
        let used = |n: &str| r.batching.iter().any(|b| b.name == n && b.used);
        assert!(used("gso") && used("gro"), "{:?}", r.batching);
        assert!(used("sendmmsg") && used("recvmmsg"), "{:?}", r.batching);
        assert_eq!(r.injected_corruptions, 1);
        assert_eq!(r.integrity_errors, 1, "{r:?}");
        // Message 498 went out as the second of seven in the GSO send that began at 497
        // (7 x 8192 B per send), came back inside one GRO read, and is named alone.
        assert_eq!(
            r.defects,
            vec![DefectRecord {
                stream: 0,
                seq: Some(498),
                defect: "crc".into(),
                bytes: 8192,
                segment: Some(1),
                segments: Some(7),
            }]
        );
        // Its neighbours in the same read were verified and accepted one by one.
        assert!(r.packets >= 999, "{r:?}");
        let text = {
            let mut rep = crate::report::Report::new("h", "loopback", "x");
            rep.push(r.clone());
            rep.to_text()
        };
        assert!(
            text.contains(
                "bad message: stream 0 seq 498 (crc, 8192 B, datagram 2 of 7 in one GRO read)"
            ),
            "{text}"
        );
    }

    #[test]
    fn without_the_kernels_batching_the_same_datagram_is_named() {
        let off = crate::engine::SocketOptions {
            gso: false,
            sendmmsg: false,
            gro: false,
            recvmmsg: false,
            zerocopy: false,
            rcvbuf: None,
        };
        let r = udp_with_one_planted(off);
        assert_eq!(r.batching.len(), 4, "{:?}", r.batching);
        assert!(r
            .batching
            .iter()
            .all(|b| !b.asked && !b.used && b.detail == "off"));
        assert_eq!(r.integrity_errors, 1);
        assert_eq!(r.defects.len(), 1);
        assert_eq!((r.defects[0].seq, r.defects[0].segment), (Some(498), None));
    }

    #[test]
    fn completions_out_of_order_and_in_ranges() {
        let mut c = Completions::default();
        let rec = |lo, hi, copied| kbatch::Completion { lo, hi, copied };
        c.add(rec(2, 4, true));
        assert!(!c.covers(0), "0 and 1 are still out");
        c.add(rec(0, 0, false));
        assert!(c.covers(0) && !c.covers(1));
        c.add(rec(1, 1, true));
        assert!(c.covers(4) && !c.covers(5));
        assert_eq!((c.completed, c.copied), (5, 4));
    }

    #[test]
    fn a_path_is_used_only_if_every_stream_used_it() {
        let b = |name: &str, used: bool, detail: &str| Batching {
            name: name.into(),
            asked: true,
            used,
            detail: detail.into(),
        };
        let mut all = Vec::new();
        merge_batching(
            &mut all,
            [b("gso", true, "7 per send"), b("gro", true, "x")].into_iter(),
        );
        merge_batching(
            &mut all,
            [b("gso", false, "refused"), b("gro", true, "y")].into_iter(),
        );
        assert_eq!(all, vec![b("gso", false, "refused"), b("gro", true, "x")]);
    }

    #[test]
    fn zerocopy_tcp_reads_its_completions() {
        let topo = Topology::loopback();
        let mut e = SocketEngine::new(&topo);
        let mut spec = RunSpec::new(Mode::Tcp);
        spec.duration = Duration::from_millis(300);
        spec.socket.zerocopy = true;
        spec.inject_corruption = 2;
        let r = e.run(&spec, &RunControl::new()).expect("run");
        let zc = r
            .batching
            .iter()
            .find(|b| b.name == "zerocopy")
            .expect("listed");
        assert!(zc.asked);
        // Every planted message caught, nothing else: buffers still in the kernel's hands were
        // never restamped under it.
        assert_eq!(r.injected_corruptions, 2, "{r:?}");
        assert_eq!(r.integrity_errors, 2, "{r:?}");
        assert_eq!(r.packets + 2, r.sent);
        if !zc.used {
            // A kernel without SO_ZEROCOPY: the run copied and says why.
            assert!(zc.detail.contains("refused"), "{zc:?}");
            return;
        }
        let z = r.zerocopy.expect("figures");
        assert!(z.sends > 0 && z.completed == z.sends, "{z:?}");
        // Loopback delivers to a local socket: the kernel copies and says so.
        assert_eq!(z.copied, z.completed, "{z:?}");
        assert!(!z.copies_avoided());
    }

    #[test]
    fn stop_ends_a_run_early() {
        let topo = Topology::loopback();
        let mut e = SocketEngine::new(&topo);
        let mut spec = RunSpec::new(Mode::Tcp);
        spec.duration = Duration::from_secs(30);
        let ctl = RunControl::new();
        let c2 = ctl.clone();
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            c2.stop();
        });
        let t0 = std::time::Instant::now();
        let r = e.run(&spec, &ctl).expect("run");
        stopper.join().expect("join");
        // Shorter than the 30 s asked for = the stop ended it (how much shorter depends on the
        // machine's load, so no tighter bound).
        assert!(t0.elapsed() < spec.duration, "ran {:?}", t0.elapsed());
        assert_eq!(r.integrity_errors, 0);
    }

    #[test]
    fn too_small_message_refused() {
        let topo = Topology::loopback();
        let mut e = SocketEngine::new(&topo);
        let mut spec = RunSpec::new(Mode::Tcp);
        spec.message_size = 8;
        assert!(e.run(&spec, &RunControl::new()).is_err());
        let mut spec = RunSpec::new(Mode::Raw);
        spec.duration = Duration::from_millis(10);
        assert!(e.run(&spec, &RunControl::new()).is_err());
    }
}
