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
use crate::metrics::{self, Histogram, ThreadCpu};
use crate::netns::NetNs;
use crate::payload::{self, Generator, SeqTracker};
use crate::report::EngineResult;
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
/// UDP receive buffer asked for (capped by net.core.rmem_max).
const UDP_RCVBUF: usize = 32 << 20;
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
    for (i, (tx, mut rx)) in pairs.into_iter().enumerate() {
        let sp = spec.for_stream(i);
        rx.tracker.finish(tx.sent);
        wall_ns = wall_ns.max(rx.wall_ns);
        if let Some(b) = rx.buffer {
            *r.rx_buffer_bytes.get_or_insert(0) += b;
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
    r
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
            let setup = (|| -> Result<(TcpListener, Option<String>, Option<GpuRx>)> {
                let note = enter(t.rx_ns.as_ref(), spec.rx_cpu, "rx")?;
                let gpu = spec.gpu.as_ref().map(|g| open_gpu(g, size)).transpose()?;
                let l = TcpListener::bind(SocketAddr::new(t.rx_addr, 0))
                    .map_err(|e| Error::io(format!("listen on {}", t.rx_addr), e))?;
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

pub(crate) fn tcp_send(mut stream: TcpStream, spec: &RunSpec, ctl: &RunControl) -> TxOut {
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
            let setup = (|| -> Result<(UdpSocket, Option<String>, Option<GpuRx>, usize)> {
                let note = enter(t.rx_ns.as_ref(), spec.rx_cpu, "rx")?;
                let gpu = spec.gpu.as_ref().map(|g| open_gpu(g, size)).transpose()?;
                let sock = UdpSocket::bind(SocketAddr::new(t.rx_addr, 0))
                    .map_err(|e| Error::io(format!("bind udp {}", t.rx_addr), e))?;
                let fd = sock.as_raw_fd();
                let granted = sys::set_socket_buffer(fd, true, UDP_RCVBUF).unwrap_or(0);
                let mut note = note;
                let mut buffer = granted;
                // The kernel reports twice the size asked for (bookkeeping overhead).
                if granted < UDP_RCVBUF * 2 {
                    if let Ok(forced) = sys::force_receive_buffer(fd, UDP_RCVBUF) {
                        buffer = forced;
                        let msg = format!(
                            "udp receive buffer forced to {} MiB (net.core.rmem_max allowed {} KiB; the net.sysctl check judges that)",
                            forced / 2 / (1 << 20),
                            granted / 2 / 1024
                        );
                        note = Some(match note {
                            Some(n) => format!("{n}; {msg}"),
                            None => msg,
                        });
                    }
                }
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
                Some(g) => udp_receive_gpu(&sock, size, ctl, sent, tx_done, g)?,
                None => udp_receive(&sock, size, latency, ctl, sent, tx_done),
            };
            out.buffer = Some(buffer as u64);
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

pub(crate) fn udp_send(
    sock: &UdpSocket,
    spec: &RunSpec,
    ctl: &RunControl,
    sent: &AtomicU64,
) -> TxOut {
    let size = spec.message_size;
    let mut gen = Generator::new(size, 0);
    let k = batch_len(size, spec.rate_gbps, 32 * size);
    let mut batch = gen.template().repeat(k);
    let mut out = TxOut::default();
    let cpu0 = sys::thread_cpu_ns();
    let start = sys::monotonic_ns();
    let deadline = start + spec.duration.as_nanos() as u64;
    let mut bytes = 0u64;
    let mut refused = 0u64;
    let mut inject = Injector::new(spec.inject_corruption);
    'run: loop {
        if sys::monotonic_ns() >= deadline || ctl.stopped() {
            break;
        }
        pace(start, bytes, spec.rate_gbps);
        let ts = sys::monotonic_ns();
        for slot in batch.chunks_mut(size) {
            // Stamp just before sending: a datagram that fails to send is retried with the
            // same sequence number, so a send error is never counted as loss.
            loop {
                let seq = gen.next_seq();
                gen.stamp(ts, slot);
                let plant = inject.wants(seq);
                if plant {
                    Injector::flip(slot);
                }
                let r = sock.send(slot);
                if plant {
                    Injector::flip(slot);
                }
                match r {
                    Ok(_) => {
                        if plant {
                            inject.planted();
                            out.corrupted += 1;
                        }
                        break;
                    }
                    Err(e) => {
                        gen.rewind(seq);
                        match e.raw_os_error() {
                            Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => {
                                std::thread::yield_now();
                            }
                            Some(libc::ECONNREFUSED) if refused < 100 => refused += 1,
                            _ => {
                                out.notes.push(format!("udp send: {e}"));
                                break 'run;
                            }
                        }
                        if ctl.stopped() {
                            break 'run;
                        }
                    }
                }
            }
            out.sent += 1;
            sent.store(out.sent, Ordering::Release);
            bytes += size as u64;
            ctl.add_tx(size as u64);
        }
    }
    out.wall_ns = sys::monotonic_ns() - start;
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    out
}

pub(crate) fn udp_receive(
    sock: &UdpSocket,
    size: usize,
    latency: bool,
    ctl: &RunControl,
    sent: &AtomicU64,
    tx_done: &AtomicBool,
) -> RxOut {
    let mut out = RxOut::default();
    // One byte more than a message: an oversized datagram then shows as a length defect.
    let mut buf = vec![0u8; size + 1];
    let cpu0 = sys::thread_cpu_ns();
    let mut first = None;
    let mut last = sys::monotonic_ns();
    let mut idle_since: Option<u64> = None;
    loop {
        match sock.recv(&mut buf) {
            Ok(n) => {
                let now = sys::monotonic_ns();
                first.get_or_insert(now);
                last = now;
                idle_since = None;
                ctl.add_rx(n as u64);
                match payload::check(&buf[..n]) {
                    Ok(h) => {
                        out.tracker.accept(h.seq);
                        out.bytes += n as u64;
                        if latency && h.tx_ns != 0 {
                            out.hist.record(now.saturating_sub(h.tx_ns));
                        }
                    }
                    Err(_) => out.tracker.defect(),
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
    out.cpu_ns = sys::thread_cpu_ns() - cpu0;
    // CPU over the receive window, not the drain wait (the thread mostly slept in it).
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
