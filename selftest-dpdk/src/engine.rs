//! The DPDK engine: one TX lcore sends paced Ethernet/IPv4/UDP frames carrying self-test
//! messages (daqtune_selftest::payload) out of one port, one RX lcore receives them on the
//! other port and checks every byte.

use crate::dpdk::{self, Burst, DpdkError, Eal, Mempool, Port, RxQueue, TxQueue};
use crate::eal_args::{frame_for_message, mtu_for_frame, L2_L4_HEADERS};
use crate::spec::{DpdkDetails, PortReport};
use daqtune_selftest::metrics::{self, Histogram, ThreadCpu};
use daqtune_selftest::payload::{check, Generator, SeqTracker};
use daqtune_selftest::sys::{monotonic_ns, thread_cpu_ns};
use daqtune_selftest::{Engine, EngineResult, Mode, RunControl, RunSpec};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Frames per RX burst.
const BURST: usize = 32;
/// Frames per TX burst, at most. af_packet's PMD kicks the kernel (one `sendto`) per burst;
/// 128 instead of testpmd's 32 makes that a quarter as many system calls on the TX CPU, the
/// one that runs out first (docs/performance.md, 2026-11-24).
const TX_BURST: usize = 128;
const TX_LCORE: u32 = 1;
const RX_LCORE: u32 = 2;
/// UDP ports of the self-test stream (any frame to another port is not ours).
const UDP_SRC: u16 = 47_000;
const UDP_DST: u16 = 47_001;
/// Source and destination in 198.18.0.0/15 (RFC 2544 benchmarking range).
const IP_SRC: [u8; 4] = [198, 18, 0, 1];
const IP_DST: [u8; 4] = [198, 18, 0, 2];
/// How long past the run's end the RX lcore gives up waiting for the TX lcore.
const HARD_STOP_SLACK: Duration = Duration::from_secs(10);
/// Destination MAC of frames on af_packet (locally administered, unicast).
const OTHERHOST_MAC: [u8; 6] = [0x02, 0x44, 0x51, 0x54, 0x00, 0x02];
/// How long RX keeps polling after TX stopped, for frames still in rings.
const DRAIN: Duration = Duration::from_millis(300);

/// Builds the 42 header bytes in front of a `msg_len`-byte message.
pub fn frame_headers(dst: [u8; 6], src: [u8; 6], msg_len: usize) -> [u8; L2_L4_HEADERS] {
    let mut h = [0u8; L2_L4_HEADERS];
    h[0..6].copy_from_slice(&dst);
    h[6..12].copy_from_slice(&src);
    h[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (20 + 8 + msg_len) as u16;
    let ip = &mut h[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    // Don't fragment; id 0; TTL 64; UDP.
    ip[6] = 0x40;
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&IP_SRC);
    ip[16..20].copy_from_slice(&IP_DST);
    let mut sum: u32 = 0;
    for w in ip.chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    let udp = &mut h[34..42];
    udp[0..2].copy_from_slice(&UDP_SRC.to_be_bytes());
    udp[2..4].copy_from_slice(&UDP_DST.to_be_bytes());
    // Checksum 0: the self-test CRC covers the message; none of the paths verify UDP sums.
    udp[4..6].copy_from_slice(&((8 + msg_len) as u16).to_be_bytes());
    h
}

/// The self-test message inside a frame, or `None` when the frame is not self-test traffic
/// (another EtherType, protocol or port: ignored, not an error).
pub fn message_of(frame: &[u8]) -> Option<Result<&[u8], ()>> {
    if frame.len() < L2_L4_HEADERS
        || frame[12..14] != [0x08, 0x00]
        || frame[14] != 0x45
        || frame[23] != 17
        || frame[36..38] != UDP_DST.to_be_bytes()
    {
        return None;
    }
    let udp_len = usize::from(u16::from_be_bytes([frame[38], frame[39]]));
    if udp_len < 8 || 34 + udp_len > frame.len() {
        // Ours by its addressing, but cut short: an integrity error.
        return Some(Err(()));
    }
    Some(Ok(&frame[L2_L4_HEADERS..34 + udp_len]))
}

struct TxOut {
    queue: TxQueue,
    sent: u64,
    retries: u64,
    elapsed_ns: u64,
    cpu_ns: u64,
}

struct RxOut {
    queue: RxQueue,
    tracker: SeqTracker,
    bytes: u64,
    foreign: u64,
    hist: Histogram,
    cpu_ns: u64,
    wall_ns: u64,
}

/// Called on the TX lcore after its last burst with the number of frames handed to the driver
/// in this run (the closure keeps the total over the runs of one process);
/// makes sure the driver's software ring has actually been transmitted (af_packet counts a
/// frame as sent once it is in the mmap ring, and frames left there when the kernel refused a
/// kick for lack of socket buffer would otherwise never leave).
pub type TxFlush = Arc<dyn Fn(u64) + Send + Sync>;

/// The engine with its EAL, two started ports and their queues.
pub struct DpdkEngine {
    tx_flush: Option<TxFlush>,
    eal: Eal,
    tx_port: Port,
    rx_port: Port,
    // Kept alive while the ports are started (RX refills from it, TX allocates from it).
    tx_pool: Mempool,
    _rx_pool: Mempool,
    txq: Option<TxQueue>,
    rxq: Option<RxQueue>,
    tx_mac: [u8; 6],
    rx_mac: [u8; 6],
    topology: String,
    message_size: usize,
    mtu: u16,
    cpus: (usize, usize),
    details: DpdkDetails,
    mtu_notes: Vec<String>,
    rx_buffer_frames: u64,
    yield_when_idle: bool,
    netdevs: [Result<String, String>; 2],
}

/// How to set the engine up.
pub struct EngineConfig {
    /// DPDK names of the sending and the receiving port.
    pub ports: (String, String),
    pub message_size: usize,
    pub mbufs: u32,
    pub descriptors: u16,
    /// `veth` or `ports` (for the report).
    pub topology: String,
    /// TX and RX CPUs (for the report).
    pub cpus: (usize, usize),
    pub tx_flush: Option<TxFlush>,
    /// Frames the receive side can hold before it drops (the af_packet ring on a veth pair,
    /// the RX descriptors on a NIC): `--find-max` sizes its trials from it.
    pub rx_buffer_frames: u64,
    /// The RX lcore yields its CPU when a poll finds nothing (af_packet: the kernel's receive
    /// work shares that CPU); a NIC's RX lcore spins.
    pub yield_when_idle: bool,
    /// The kernel netdev of the sending and the receiving port, or why there is none
    /// (`eal_args::port_netdevs`): their drop and error counters are read before and after
    /// each run, in this process's network namespace.
    pub netdevs: [Result<String, String>; 2],
}

impl DpdkEngine {
    /// Configures and starts both ports for `cfg.message_size`-byte messages.
    pub fn new(eal: Eal, cfg: EngineConfig) -> Result<Self, DpdkError> {
        let EngineConfig {
            ports: names,
            message_size,
            mbufs,
            descriptors,
            topology,
            cpus,
            tx_flush,
            rx_buffer_frames,
            yield_when_idle,
            netdevs,
        } = cfg;
        let topology = topology.as_str();
        let frame = frame_for_message(message_size);
        let mtu = mtu_for_frame(frame);
        let tx_port = eal.port_by_name(&names.0)?;
        let rx_port = eal.port_by_name(&names.1)?;
        // Data room for the whole frame in one segment (jumbo frames included).
        let room =
            u16::try_from((frame + 128).max(2048) + dpdk::sys::RTE_PKTMBUF_HEADROOM as usize)
                .unwrap_or(u16::MAX);
        let tx_pool = eal.pktmbuf_pool("dqt_tx", mbufs, 256, room, tx_port.socket())?;
        let rx_pool = eal.pktmbuf_pool("dqt_rx", mbufs, 256, room, rx_port.socket())?;
        let same = tx_port.id() == rx_port.id();
        let mut txq = None;
        let mut rxq = None;
        let mut mtu_notes = Vec::new();
        for (port, is_tx) in [(&tx_port, true), (&rx_port, false)] {
            if !is_tx && same {
                break;
            }
            port.configure()?;
            let (driver, max_mtu, max_rx, max_tx) = port.info()?;
            if let Err(e) = port.set_mtu(mtu) {
                // DPDK 22.11's af_packet reports a 1518-byte max frame although it moves
                // whatever the kernel interface carries; the veth pair was created with the
                // MTU, so only a refusal from a real NIC is fatal.
                if driver != "net_af_packet" {
                    return Err(e);
                }
                mtu_notes.push(format!(
                    "{}: DPDK refused MTU {mtu} ({}); the kernel interface carries it",
                    port.name(),
                    e.message
                ));
            }
            if driver != "net_af_packet" && max_mtu > 0 && max_mtu < mtu {
                return Err(DpdkError {
                    op: format!("port {}", port.name()),
                    errno: libc::EINVAL,
                    message: format!("MTU {mtu} needed, the port allows {max_mtu}"),
                });
            }
            let rx_desc = descriptors.min(if max_rx > 0 { max_rx } else { descriptors });
            let tx_desc = descriptors.min(if max_tx > 0 { max_tx } else { descriptors });
            // Every port gets both queues (DPDK requires the configured ones set up).
            let pool = if is_tx { &tx_pool } else { &rx_pool };
            let r = port.rx_queue(rx_desc, pool)?;
            let t = port.tx_queue(tx_desc)?;
            if is_tx {
                txq = Some(t);
                if same {
                    rxq = Some(r);
                }
            } else {
                rxq = Some(r);
            }
            // Frames carry the RX port's MAC, but af_packet and a loopback plug need no
            // filtering surprises: accept everything and classify in software.
            let _ = port.promiscuous();
            port.start()?;
        }
        let tx_mac = tx_port.mac().unwrap_or([0x02, 0, 0, 0, 0, 1]);
        // On af_packet the frames go to a locally administered MAC that is not the receiving
        // veth end's: the kernel then sees "another host's" frame and drops it right after
        // handing it to the packet socket, instead of running it through IP input and a route
        // lookup on the sender's core. A real NIC gets its own MAC.
        let rx_mac = match rx_port.info() {
            Ok((driver, ..)) if driver == "net_af_packet" => OTHERHOST_MAC,
            _ => rx_port.mac().unwrap_or(OTHERHOST_MAC),
        };
        Ok(DpdkEngine {
            tx_flush,
            eal,
            tx_port,
            rx_port,
            tx_pool,
            _rx_pool: rx_pool,
            txq,
            rxq,
            tx_mac,
            rx_mac,
            topology: topology.into(),
            message_size,
            mtu,
            cpus,
            details: DpdkDetails {
                dpdk_version: dpdk::VERSION.into(),
                ..DpdkDetails::default()
            },
            mtu_notes,
            rx_buffer_frames,
            yield_when_idle,
            netdevs,
        })
    }

    /// Link speed of the sending port in Mb/s, where the driver knows one. af_packet reports
    /// a made-up 10 Gb/s for any interface (a veth has no speed at all), so it has none.
    pub fn tx_link_speed_mbps(&self) -> Option<u64> {
        match self.tx_port.info() {
            Ok((driver, ..)) if driver != "net_af_packet" => self.tx_port.link_speed_mbps(),
            _ => None,
        }
    }

    pub fn details(&self) -> &DpdkDetails {
        &self.details
    }

    fn port_report(&self, role: &str, p: &Port) -> PortReport {
        let mut r = PortReport {
            role: role.into(),
            name: p.name().into(),
            mtu: self.mtu,
            ..PortReport::default()
        };
        if let Ok((driver, ..)) = p.info() {
            r.driver = driver;
        }
        r.link_up = p.link_up();
        if let Ok(s) = p.stats() {
            r.ipackets = s.ipackets;
            r.opackets = s.opackets;
            r.imissed = s.imissed;
            r.ierrors = s.ierrors;
            r.oerrors = s.oerrors;
            r.rx_nombuf = s.rx_nombuf;
        }
        if let Ok(x) = p.xstats() {
            r.xstats = x.into_iter().filter(|(_, v)| *v != 0).collect();
        }
        r
    }

    /// Stops and closes both ports (their queues and mbufs go back to DPDK).
    pub fn shutdown(mut self) -> DpdkDetails {
        for p in [&self.tx_port, &self.rx_port] {
            let _ = p.stop();
        }
        for p in [&self.tx_port, &self.rx_port] {
            let _ = p.close();
        }
        self.txq = None;
        self.rxq = None;
        std::mem::take(&mut self.details)
    }

    /// The counters of the sending and the receiving port's netdev now (a record that says
    /// why, where a port has none).
    fn netdev_sample(&self) -> [daqtune_probe::net::counters::PortCounters; 2] {
        let read = |i: usize, port: &Port| match &self.netdevs[i] {
            Ok(name) => daqtune_selftest::topology::port_counters_here(name),
            Err(why) => daqtune_probe::net::counters::PortCounters {
                ifname: port.name().into(),
                counters: Vec::new(),
                unavailable: vec![daqtune_probe::net::counters::Unavailable {
                    source: "netdev".into(),
                    reason: why.clone(),
                }],
            },
        };
        [read(0, &self.tx_port), read(1, &self.rx_port)]
    }

    fn run_inner(&mut self, spec: &RunSpec, ctl: &RunControl) -> Result<EngineResult, String> {
        let txq = self.txq.take().ok_or("TX queue already in use")?;
        let rxq = self.rxq.take().ok_or("RX queue already in use")?;
        let msg_len = self.message_size;
        let frame_len = frame_for_message(msg_len);
        let headers = frame_headers(self.rx_mac, self.tx_mac, msg_len);
        let tsc_hz = self.eal.tsc_hz().max(1);
        let pps = spec.rate_gbps.map(|g| g * 1e9 / (msg_len as f64 * 8.0));
        let duration_tsc = (spec.duration.as_secs_f64() * tsc_hz as f64) as u64;
        let duration_ns = u64::try_from(spec.duration.as_nanos()).unwrap_or(u64::MAX / 2);
        let latency = spec.latency;

        for p in [&self.tx_port, &self.rx_port] {
            p.reset_stats();
        }
        let counters_before = (self.netdev_sample(), std::time::Instant::now());

        let tx_done = Arc::new(AtomicBool::new(false));
        let sent_total = Arc::new(AtomicU64::new(0));
        let tx_slot: Arc<Mutex<Option<TxOut>>> = Arc::new(Mutex::new(None));
        let rx_slot: Arc<Mutex<Option<RxOut>>> = Arc::new(Mutex::new(None));

        let rx_job = {
            let rx_pool_burst = Burst::<BURST>::new(&self._rx_pool);
            let tx_done = Arc::clone(&tx_done);
            let sent_total = Arc::clone(&sent_total);
            let slot = Arc::clone(&rx_slot);
            let yield_idle = self.yield_when_idle;
            let ctl = ctl.clone();
            let mut queue = rxq;
            self.eal
                .launch(RX_LCORE, move || {
                    let mut b = rx_pool_burst;
                    let mut tracker = SeqTracker::default();
                    let mut hist = Histogram::default();
                    let (mut bytes, mut foreign) = (0u64, 0u64);
                    let cpu0 = thread_cpu_ns();
                    let wall0 = monotonic_ns();
                    let mut done_at: Option<u64> = None;
                    // A TX lcore that died never says it is done: stop anyway, well after the
                    // run should have ended.
                    let hard_stop = wall0 + duration_ns + HARD_STOP_SLACK.as_nanos() as u64;
                    let mut polls = 0u32;
                    loop {
                        polls = polls.wrapping_add(1);
                        if polls % 4096 == 0 && monotonic_ns() > hard_stop {
                            break;
                        }
                        let n = queue.rx(&mut b);
                        if n == 0 {
                            if yield_idle {
                                // The kernel's receive work for this ring (RPS) runs on this
                                // CPU; when it falls behind it continues in ksoftirqd, which a
                                // spinning lcore would starve of the CPU.
                                std::thread::yield_now();
                            }
                            if tx_done.load(Ordering::Acquire) {
                                let now = monotonic_ns();
                                let t = *done_at.get_or_insert(now);
                                let all_in = tracker.received + tracker.integrity_errors
                                    >= sent_total.load(Ordering::Acquire);
                                if all_in || now.saturating_sub(t) > DRAIN.as_nanos() as u64 {
                                    break;
                                }
                            }
                            dpdk::pause();
                            continue;
                        }
                        let now = if latency { monotonic_ns() } else { 0 };
                        let mut burst_bytes = 0u64;
                        for i in 0..n {
                            let Some((pkt_len, segs)) = b.shape(i) else {
                                continue;
                            };
                            let Some(data) = b.data(i) else { continue };
                            match message_of(data) {
                                None => foreign += 1,
                                Some(Err(())) => tracker.defect(),
                                Some(Ok(_)) if segs != 1 || pkt_len as usize != data.len() => {
                                    // Frames are sized to fit one mbuf; a chain means the
                                    // path changed the frame.
                                    tracker.defect()
                                }
                                Some(Ok(msg)) => match check(msg) {
                                    Ok(h) => {
                                        tracker.accept(h.seq);
                                        burst_bytes += msg.len() as u64;
                                        if latency && h.tx_ns != 0 {
                                            hist.record(now.saturating_sub(h.tx_ns));
                                        }
                                    }
                                    Err(_) => tracker.defect(),
                                },
                            }
                        }
                        bytes += burst_bytes;
                        ctl.add_rx(burst_bytes);
                    }
                    let out = RxOut {
                        queue,
                        tracker,
                        bytes,
                        foreign,
                        hist,
                        cpu_ns: thread_cpu_ns().saturating_sub(cpu0),
                        wall_ns: monotonic_ns().saturating_sub(wall0),
                    };
                    if let Ok(mut s) = slot.lock() {
                        *s = Some(out);
                    }
                    0
                })
                .map_err(|e| e.to_string())?
        };

        let tx_job = {
            let tx_done = Arc::clone(&tx_done);
            let sent_total = Arc::clone(&sent_total);
            let slot = Arc::clone(&tx_slot);
            let ctl = ctl.clone();
            let mut b = Burst::<TX_BURST>::new(&self.tx_pool);
            let mut queue = txq;
            let flush = self.tx_flush.clone();
            self.eal.launch(TX_LCORE, move || {
                let mut gen = Generator::new(msg_len, 0);
                let mut frame_template = headers.to_vec();
                frame_template.extend_from_slice(gen.template());
                let cpu0 = thread_cpu_ns();
                let start = dpdk::rdtsc();
                let end = start + duration_tsc;
                let (mut sent, mut retries) = (0u64, 0u64);
                'outer: loop {
                    let now = dpdk::rdtsc();
                    if now >= end || ctl.stopped() {
                        break;
                    }
                    let want = match pps {
                        Some(pps) => {
                            let due = ((now - start) as f64 / tsc_hz as f64 * pps) as u64;
                            (due.saturating_sub(sent) as usize).min(TX_BURST)
                        }
                        None => TX_BURST,
                    };
                    if want == 0 {
                        dpdk::pause();
                        continue;
                    }
                    if !b.alloc(want) {
                        // Pool empty: the driver still holds mbufs; try again.
                        dpdk::pause();
                        continue;
                    }
                    let ns = monotonic_ns();
                    let mut filled = 0;
                    for i in 0..want {
                        let Some(buf) = b.append(i, frame_len as u16) else {
                            break;
                        };
                        // One copy of the whole frame, then the header stamped in place.
                        buf.copy_from_slice(&frame_template);
                        gen.stamp(ns, &mut buf[L2_L4_HEADERS..]);
                        filled += 1;
                    }
                    if filled < want {
                        // Cannot happen with the pool's data room; never send a half-built
                        // burst (its sequence numbers would count as lost).
                        break;
                    }
                    loop {
                        let k = queue.tx(&mut b) as u64;
                        sent += k;
                        sent_total.store(sent, Ordering::Release);
                        if b.is_empty() {
                            break;
                        }
                        retries += b.len() as u64;
                        if ctl.stopped() || dpdk::rdtsc() >= end + tsc_hz {
                            break 'outer;
                        }
                        dpdk::pause();
                    }
                    ctl.add_tx(want as u64 * msg_len as u64);
                }
                // The unsent rest of a burst is freed here; their sequence numbers are above
                // `sent`, so they never count as lost.
                b.clear();
                if let Some(f) = &flush {
                    f(sent);
                }
                // Until the driver's ring is really out: rates are not flattered by frames
                // that were still queued in software when the clock stopped.
                let elapsed_tsc = dpdk::rdtsc() - start;
                sent_total.store(sent, Ordering::Release);
                tx_done.store(true, Ordering::Release);
                let out = TxOut {
                    queue,
                    sent,
                    retries,
                    elapsed_ns: (elapsed_tsc as f64 / tsc_hz as f64 * 1e9) as u64,
                    cpu_ns: thread_cpu_ns().saturating_sub(cpu0),
                };
                if let Ok(mut s) = slot.lock() {
                    *s = Some(out);
                }
                0
            })
        };
        let tx_job = match tx_job {
            Ok(j) => j,
            Err(e) => {
                tx_done.store(true, Ordering::Release);
                rx_job.wait();
                return Err(e.to_string());
            }
        };
        let tx_rc = tx_job.wait();
        let rx_rc = rx_job.wait();
        let tx = tx_slot
            .lock()
            .ok()
            .and_then(|mut s| s.take())
            .ok_or_else(|| format!("TX lcore ended without a result (rc {tx_rc})"))?;
        let rx = rx_slot
            .lock()
            .ok()
            .and_then(|mut s| s.take())
            .ok_or_else(|| format!("RX lcore ended without a result (rc {rx_rc})"))?;
        self.txq = Some(tx.queue);
        self.rxq = Some(rx.queue);
        let counters_after = self.netdev_sample();

        let mut tracker = rx.tracker;
        tracker.finish(tx.sent);
        let secs = tx.elapsed_ns as f64 / 1e9;
        let mut r = EngineResult::new("dpdk", Mode::Raw, &self.topology);
        r.message_size = msg_len;
        r.duration_s = secs;
        r.rate_gbps = spec.rate_gbps;
        r.sent = tx.sent;
        r.packets = tracker.received;
        r.bytes = rx.bytes;
        r.lost = tracker.lost;
        r.reordered = tracker.reordered;
        r.integrity_errors = tracker.integrity_errors;
        r.gbps = metrics::gbps(rx.bytes, secs);
        r.packets_per_s = if secs > 0.0 {
            tracker.received as f64 / secs
        } else {
            0.0
        };
        r.latency = if latency { rx.hist.summary_us() } else { None };
        let util = |cpu_ns: u64, wall_ns: u64| {
            if wall_ns == 0 {
                0.0
            } else {
                cpu_ns as f64 / wall_ns as f64
            }
        };
        r.threads = vec![
            ThreadCpu {
                role: "tx".into(),
                cpu: Some(self.cpus.0),
                cpu_s: tx.cpu_ns as f64 / 1e9,
                utilization: util(tx.cpu_ns, tx.elapsed_ns),
            },
            ThreadCpu {
                role: "rx".into(),
                cpu: Some(self.cpus.1),
                cpu_s: rx.cpu_ns as f64 / 1e9,
                utilization: util(rx.cpu_ns, rx.wall_ns),
            },
        ];
        r.cpu_cores = r.threads.iter().map(|t| t.utilization).sum();
        r.roi = metrics::roi(r.gbps, r.cpu_cores);
        r.rx_buffer_bytes = Some(self.rx_buffer_frames * msg_len as u64);
        {
            use daqtune_probe::net::counters::PortDelta;
            let (b, at) = &counters_before;
            let a = &counters_after;
            let secs = at.elapsed().as_secs_f64();
            r.set_port_deltas(if self.tx_port.id() == self.rx_port.id() {
                // One port cabled to itself: one netdev, counted once.
                vec![PortDelta::new("tx+rx", &b[0], &a[0], secs)]
            } else {
                vec![
                    PortDelta::new("tx", &b[0], &a[0], secs),
                    PortDelta::new("rx", &b[1], &a[1], secs),
                ]
            });
        }

        let ports = if self.tx_port.id() == self.rx_port.id() {
            vec![self.port_report("tx+rx", &self.tx_port)]
        } else {
            vec![
                self.port_report("tx", &self.tx_port),
                self.port_report("rx", &self.rx_port),
            ]
        };
        for p in &ports {
            if p.link_up == Some(false) {
                r.notes
                    .push(format!("port {} ({}): link down", p.name, p.role));
            }
            if p.imissed > 0 || p.ierrors > 0 || p.rx_nombuf > 0 || p.oerrors > 0 {
                r.notes.push(format!(
                    "port {} ({}): imissed {}, ierrors {}, rx_nombuf {}, oerrors {}",
                    p.name, p.role, p.imissed, p.ierrors, p.rx_nombuf, p.oerrors
                ));
            }
        }
        r.notes.extend(self.mtu_notes.iter().cloned());
        if rx.foreign > 0 {
            r.notes.push(format!(
                "{} frame(s) that were not self-test traffic ignored",
                rx.foreign
            ));
        }
        self.details.ports = ports;
        self.details.foreign_frames = rx.foreign;
        self.details.tx_retries = tx.retries;
        Ok(r)
    }
}

impl Engine for DpdkEngine {
    fn name(&self) -> &'static str {
        "dpdk"
    }

    fn modes(&self) -> &'static [Mode] {
        &[Mode::Raw]
    }

    fn run(&mut self, spec: &RunSpec, ctl: &RunControl) -> daqtune_selftest::Result<EngineResult> {
        if spec.mode != Mode::Raw {
            return Err(daqtune_selftest::Error::Unsupported(format!(
                "the DPDK engine runs raw frames, not {}",
                spec.mode
            )));
        }
        if spec.message_size != self.message_size {
            return Err(daqtune_selftest::Error::Invalid(format!(
                "ports were set up for {}-byte messages, not {}",
                self.message_size, spec.message_size
            )));
        }
        self.run_inner(spec, ctl)
            .map_err(daqtune_selftest::Error::Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use daqtune_selftest::payload::Generator;

    #[test]
    fn headers_round_trip() {
        let h = frame_headers([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1], 100);
        let mut f = h.to_vec();
        let mut g = Generator::new(100, 0);
        f.extend_from_slice(g.next(1));
        let m = message_of(&f).expect("ours").expect("whole");
        assert_eq!(check(m).map(|h| h.seq), Ok(0));
        // IPv4 header checksum verifies to 0xffff.
        let mut sum = 0u32;
        for w in f[14..34].chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(sum, 0xffff);
        // Trailing padding (short frames padded to 60 bytes) is not part of the message.
        f.extend_from_slice(&[0; 4]);
        assert_eq!(message_of(&f).expect("ours").expect("whole").len(), 100);
    }

    #[test]
    fn foreign_and_cut_frames() {
        assert_eq!(message_of(&[]), None);
        assert_eq!(message_of(&[0u8; 60]), None);
        let h = frame_headers([0; 6], [0; 6], 100);
        let mut f = h.to_vec();
        f.extend_from_slice(&[0u8; 50]);
        assert_eq!(message_of(&f), Some(Err(())));
        let mut arp = h.to_vec();
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(message_of(&arp), None);
    }
}
