//! One side of an RDMA test: device, port, source GID, PD, CQ, RC QP and the registered slot
//! ring, plus the sender, receiver and ping-pong loops that move verified payloads over it.
//!
//! Wire protocol (both sides of this crate speak it, whether in one process or over `--peer`):
//! - the receiver's memory is a ring of `slots` slots of `slot_size` bytes; message `seq` uses
//!   slot `seq % slots` on both sides;
//! - WRITE: RDMA WRITE with immediate (imm = low 32 bits of seq) into the peer's slot, so the
//!   receiver learns which slot to verify; SEND: a plain SEND into the receive posted for the slot;
//! - flow control by credits: the sender starts with `slots` credits; the receiver returns them
//!   (SEND with immediate = count) after it verified and re-armed the slots, so no slot is
//!   overwritten before it was checked;
//! - the end of a run is a SEND with immediate [`END_IMM`] and no data.

use crate::buffer::BufferProvider;
use crate::error::RdmaError;
use crate::gid::{gid_to_string, parse_gid, select_gid, GidInfo};
pub use crate::proto::{ConnInfo, CqStats, EndpointConfig, ReceiverStats, SenderStats, Transfer};
use crate::verbs::{
    wc_status_str, Completion, Context, Cq, DeviceList, Mr, PortInfo, Qp, RtrParams, SendOp,
    ACCESS_LOCAL_WRITE, ACCESS_REMOTE_WRITE, WC_RDMA_WRITE, WC_RECV, WC_RECV_RDMA_WITH_IMM,
    WC_SEND, WC_SUCCESS,
};
use daqtune_selftest::metrics::Histogram;
use daqtune_selftest::payload::{self, Generator, SeqTracker, HEADER_LEN};
use daqtune_selftest::sys::{monotonic_ns, thread_cpu_ns};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use crate::endpoint_defaults::QP_TIMEOUT as DEFAULT_QP_TIMEOUT;

/// Immediate value that ends a run.
pub const END_IMM: u32 = 0xE11D_0000;

/// Idle strategy of the bandwidth loops: spin while completions come, then yield, then nap
/// with doubling naps (20 us .. 1 ms). Busy-polling both ends starves a software provider
/// (soft-RoCE does its work in kernel threads on the same CPUs), and so do thousands of short
/// wake-ups under emulation. At line rate on a NIC a completion arrives every few microseconds
/// and the loops never get past the spinning stage.
struct Backoff {
    empty: u32,
    nap_us: u64,
}

impl Backoff {
    const SPIN: u32 = 64;
    const YIELD: u32 = 256;
    const NAP_MIN_US: u64 = 20;
    const NAP_MAX_US: u64 = 1000;

    fn new() -> Self {
        Backoff {
            empty: 0,
            nap_us: Self::NAP_MIN_US,
        }
    }

    fn idle(&mut self) {
        self.empty = self.empty.saturating_add(1);
        if self.empty > Self::YIELD {
            std::thread::sleep(Duration::from_micros(self.nap_us));
            self.nap_us = (self.nap_us * 2).min(Self::NAP_MAX_US);
        } else if self.empty > Self::SPIN {
            std::thread::yield_now();
        }
    }

    fn reset(&mut self) {
        self.empty = 0;
        self.nap_us = Self::NAP_MIN_US;
    }

    fn after(&mut self, got: usize) {
        if got == 0 {
            self.idle()
        } else {
            self.reset()
        }
    }
}

fn record(cq: &mut CqStats, c: &Completion) -> bool {
    cq.completions += 1;
    if c.status == WC_SUCCESS {
        return true;
    }
    *cq.errors.entry(wc_status_str(c.status)).or_default() += 1;
    false
}
const END_WR: u64 = u64::MAX;
const CREDIT_WR: u64 = u64::MAX - 1;
const ANNOUNCE_WR: u64 = u64::MAX - 2;
/// How long the end-of-run handshake and the drain may take (soft-RoCE under emulation is slow).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

/// One side of a connection.
pub struct Endpoint {
    ctx: Arc<Context>,
    port: u8,
    port_info: PortInfo,
    gid: GidInfo,
    cq: Arc<Cq>,
    qp: Qp,
    mr: Mr,
    slots: usize,
    slot_size: usize,
    psn: u32,
    comps: Vec<Completion>,
    /// Fault injection for tests: every n-th message goes out with a wrong CRC, so a test can
    /// prove the receiver verifies what crossed the wire.
    pub inject_corruption: Option<u64>,
    /// Local ACK timeout exponent: 4.096 us * 2^n per retry (14 = 67 ms, perftest's default).
    pub qp_timeout: u8,
}

impl Endpoint {
    /// Opens the device, picks the GID, creates PD, CQ, QP (moved to INIT) and registers
    /// `slots * slot_size` bytes from `provider`.
    pub fn open(
        list: &DeviceList,
        cfg: &EndpointConfig,
        slots: usize,
        slot_size: usize,
        provider: &dyn BufferProvider,
    ) -> Result<Endpoint, RdmaError> {
        if slots == 0 || slot_size < HEADER_LEN {
            return Err(RdmaError::Invalid(format!(
                "need at least one slot of at least {HEADER_LEN} bytes"
            )));
        }
        let ctx = list.open(&cfg.device)?;
        let port_info = ctx.query_port(cfg.port)?;
        if !port_info.active {
            return Err(RdmaError::Unavailable(format!(
                "{} port {} is not active (link down?)",
                cfg.device, cfg.port
            )));
        }
        let table = ctx.gid_table(cfg.port, port_info.gid_table_len);
        let gid = match cfg.gid_index {
            Some(i) => table
                .iter()
                .find(|g| g.index == i)
                .copied()
                .ok_or_else(|| {
                    RdmaError::Invalid(format!(
                        "{} port {} has no GID at index {i}",
                        cfg.device, cfg.port
                    ))
                })?,
            None => select_gid(&table, cfg.ipv4).ok_or_else(|| {
                RdmaError::Unavailable(format!(
                    "{} port {} has no RoCE v2 GID for {} (give the port's netdev an IPv4 \
                     address)",
                    cfg.device,
                    cfg.port,
                    cfg.ipv4
                        .map(|a| a.to_string())
                        .unwrap_or_else(|| "an IPv4 address".into())
                ))
            })?,
        };
        let len = slots
            .checked_mul(slot_size)
            .ok_or_else(|| RdmaError::Invalid("slots * size overflows".into()))?;
        let pd = ctx.alloc_pd()?;
        let depth = u32::try_from(slots + 8).map_err(|_| RdmaError::Invalid("slots".into()))?;
        let cq = ctx.create_cq(depth * 2 + 8)?;
        let qp = pd.create_rc_qp(&cq, depth, depth)?;
        let access = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE;
        let mr = pd.register(provider.allocate(len)?, access)?;
        qp.to_init(cfg.port, access)?;
        // Any 24-bit start PSN works; a varying one makes stale packets of an earlier run
        // fall outside the window.
        let psn = ((monotonic_ns() >> 10) as u32) & 0x00ff_ffff;
        Ok(Endpoint {
            ctx,
            port: cfg.port,
            port_info,
            gid,
            cq,
            qp,
            mr,
            slots,
            slot_size,
            psn,
            comps: Vec::with_capacity(64),
            inject_corruption: None,
            qp_timeout: DEFAULT_QP_TIMEOUT,
        })
    }

    pub fn device(&self) -> &str {
        self.ctx.name()
    }

    pub fn port(&self) -> u8 {
        self.port
    }

    pub fn gid(&self) -> &GidInfo {
        &self.gid
    }

    pub fn memory_kind(&self) -> String {
        self.mr.describe()
    }

    pub fn info(&self) -> ConnInfo {
        ConnInfo {
            device: self.ctx.name().to_string(),
            qpn: self.qp.qp_num(),
            psn: self.psn,
            gid: gid_to_string(&self.gid.gid),
            gid_index: self.gid.index,
            lid: self.port_info.lid,
            mtu: self.port_info.active_mtu,
            ethernet: self.port_info.ethernet,
            addr: self.mr.addr(),
            rkey: self.mr.rkey(),
            slots: u32::try_from(self.slots).unwrap_or(u32::MAX),
            slot_size: u32::try_from(self.slot_size).unwrap_or(u32::MAX),
        }
    }

    /// INIT -> RTR -> RTS against `peer`. The address vector is built from the peer's GID, so
    /// on RoCE the packets are routed to the peer's IP address and leave through our port.
    pub fn connect(&self, peer: &ConnInfo) -> Result<(), RdmaError> {
        let dgid = parse_gid(&peer.gid)
            .ok_or_else(|| RdmaError::Invalid(format!("peer GID {:?}", peer.gid)))?;
        let sgid_index = u8::try_from(self.gid.index)
            .map_err(|_| RdmaError::Invalid(format!("GID index {}", self.gid.index)))?;
        let p = RtrParams {
            port: self.port,
            path_mtu: self.port_info.active_mtu.min(peer.mtu),
            dest_qp_num: peer.qpn,
            rq_psn: peer.psn,
            dgid,
            sgid_index,
            hop_limit: 64,
            dlid: peer.lid,
        };
        self.qp
            .to_rtr(&p, self.port_info.ethernet || dgid != [0u8; 16])?;
        self.qp.to_rts(self.psn, self.qp_timeout.min(31), 7, 7)
    }

    fn slot_off(&self, seq: u64) -> usize {
        (seq % self.slots as u64) as usize * self.slot_size
    }

    fn poll(&mut self) -> Result<Vec<Completion>, RdmaError> {
        let mut v = std::mem::take(&mut self.comps);
        v.clear();
        self.cq.poll(&mut v)?;
        Ok(v)
    }

    fn give_back(&mut self, v: Vec<Completion>) {
        self.comps = v;
    }

    /// Posts the receives a receiver needs before the sender starts: one per slot (SEND lands in
    /// the slot; WRITE needs a receive without buffer for each immediate).
    pub fn arm_receiver(&mut self, t: Transfer, msg_size: usize) -> Result<(), RdmaError> {
        for s in 0..self.slots {
            self.post_data_recv(t, s as u64, msg_size)?;
        }
        if t == Transfer::Write {
            // WRITE announcements never outnumber the slots in flight; two more cover the
            // trailing announcement and the end marker.
            for _ in 0..2 {
                self.post_data_recv(t, 0, msg_size)?;
            }
        }
        Ok(())
    }

    fn post_data_recv(&self, t: Transfer, slot: u64, _msg_size: usize) -> Result<(), RdmaError> {
        match t {
            Transfer::Write => self.qp.post_recv(slot, None),
            Transfer::Send | Transfer::PingPong => {
                let off = slot as usize * self.slot_size;
                self.qp
                    .post_recv(slot, Some((&self.mr, off, self.slot_size)))
            }
        }
    }

    /// Posts the receives for the peer's credit returns (and ping-pong replies).
    pub fn arm_sender(&mut self, t: Transfer, msg_size: usize) -> Result<(), RdmaError> {
        match t {
            Transfer::PingPong => {
                // Replies land in slot 1 (slot 0 holds the outgoing ping).
                if self.slots < 2 || msg_size > self.slot_size {
                    return Err(RdmaError::Invalid(
                        "ping-pong needs two slots of the message size".into(),
                    ));
                }
                self.qp
                    .post_recv(1, Some((&self.mr, self.slot_size, msg_size)))
            }
            _ => {
                for _ in 0..self.slots {
                    self.qp.post_recv(CREDIT_WR, None)?;
                }
                Ok(())
            }
        }
    }

    fn prefill(&mut self, msg_size: usize) -> Result<(), RdmaError> {
        let mut g = Generator::new(msg_size, 0);
        let mut tmp = vec![0u8; g.len()];
        g.write_next(0, &mut tmp);
        for s in 0..self.slots {
            let off = s * self.slot_size;
            if !self.mr.write(off, &tmp) {
                return Err(RdmaError::Invalid(format!(
                    "{} memory is not CPU-writable: the sender needs host memory",
                    self.mr.kind()
                )));
            }
        }
        Ok(())
    }

    /// Streams verified messages to `peer` for `duration` (or until `stop`), with credits.
    pub fn run_sender(
        &mut self,
        t: Transfer,
        peer: &ConnInfo,
        msg_size: usize,
        duration: Duration,
        stop: &AtomicBool,
        abort: &AtomicBool,
    ) -> Result<SenderStats, RdmaError> {
        if matches!(t, Transfer::PingPong) {
            return self.run_pinger(peer, msg_size, duration, stop, abort);
        }
        if msg_size > self.slot_size || msg_size > peer.slot_size as usize {
            return Err(RdmaError::Invalid(format!(
                "message of {msg_size} bytes larger than a slot"
            )));
        }
        // The credit batches are sized from the ring; both sides must agree on it.
        if peer.slots as usize != self.slots {
            return Err(RdmaError::Invalid(format!(
                "peer has {} slots, we have {}",
                peer.slots, self.slots
            )));
        }
        self.prefill(msg_size)?;
        let slots = self.slots as u64;
        let mut g = Generator::new(msg_size, 0);
        let mut st = SenderStats::default();
        let cpu0 = thread_cpu_ns();
        let t0 = monotonic_ns();
        let deadline = t0 + duration.as_nanos() as u64;
        let mut credits = slots;
        let mut outstanding = 0u64;
        let mut backoff = Backoff::new();
        let mut seq = 0u64;
        let mut fatal = false;
        // WRITE: plain RDMA WRITEs, and every `batch`-th (or the one that uses the last credit)
        // a WRITE with immediate that announces everything up to it, so the receiver takes one
        // completion per batch, not per message.
        let batch = (slots / 4).max(1);
        let mut unannounced = false;
        loop {
            let now = monotonic_ns();
            if now >= deadline || stop.load(Ordering::Relaxed) || abort.load(Ordering::Relaxed) {
                break;
            }
            while credits > 0 && outstanding < slots {
                let off = self.slot_off(seq);
                let remote = peer.addr + (seq % slots) * u64::from(peer.slot_size);
                let mut hdr = [0u8; HEADER_LEN];
                hdr.copy_from_slice(&g.next(monotonic_ns())[..HEADER_LEN]);
                if self
                    .inject_corruption
                    .is_some_and(|n| n > 0 && seq % n == n - 1)
                {
                    hdr[HEADER_LEN - 1] ^= 0x01;
                }
                // A slot that could not be stamped (a failed device upload) would go out with
                // its previous, valid header: stop instead of sending a stale message.
                if !self.mr.write(off, &hdr) {
                    return Err(RdmaError::Invalid(format!(
                        "cannot write the header of message {seq} into {} memory",
                        self.mr.kind()
                    )));
                }
                let op = match t {
                    Transfer::Write if seq % batch == batch - 1 || credits == 1 => {
                        unannounced = false;
                        SendOp::WriteImm {
                            remote_addr: remote,
                            rkey: peer.rkey,
                            imm: seq as u32,
                        }
                    }
                    Transfer::Write => {
                        unannounced = true;
                        SendOp::Write {
                            remote_addr: remote,
                            rkey: peer.rkey,
                        }
                    }
                    _ => SendOp::Send,
                };
                self.qp
                    .post_send(seq, op, Some((&self.mr, off, msg_size)), true)?;
                credits -= 1;
                outstanding += 1;
                seq += 1;
            }
            let v = self.poll()?;
            backoff.after(v.len());
            for c in &v {
                if !record(&mut st.cq, c) {
                    fatal = true;
                    continue;
                }
                match c.opcode {
                    WC_SEND | WC_RDMA_WRITE => {
                        outstanding = outstanding.saturating_sub(1);
                        st.sent += 1;
                        st.bytes += msg_size as u64;
                    }
                    WC_RECV => {
                        credits += u64::from(c.imm.unwrap_or(0));
                        self.qp.post_recv(CREDIT_WR, None)?;
                    }
                    _ => {}
                }
            }
            self.give_back(v);
            if fatal {
                abort.store(true, Ordering::Relaxed);
                break;
            }
        }
        let end_ns = monotonic_ns();
        if !fatal && !abort.load(Ordering::Relaxed) {
            // End marker: needs one credit (it consumes one of the receiver's receives).
            let limit = monotonic_ns() + DRAIN_TIMEOUT.as_nanos() as u64;
            let mut end_posted = false;
            let mut end_done = false;
            if unannounced && seq > 0 {
                // A zero-length WRITE with immediate announces the tail of the run.
                self.qp.post_send(
                    ANNOUNCE_WR,
                    SendOp::WriteImm {
                        remote_addr: peer.addr,
                        rkey: peer.rkey,
                        imm: (seq - 1) as u32,
                    },
                    None,
                    true,
                )?;
            }
            while monotonic_ns() < limit && !(end_done && outstanding == 0) {
                if !end_posted && credits > 0 {
                    self.qp
                        .post_send(END_WR, SendOp::SendImm(END_IMM), None, true)?;
                    end_posted = true;
                }
                let v = self.poll()?;
                backoff.after(v.len());
                for c in &v {
                    if !record(&mut st.cq, c) {
                        fatal = true;
                        continue;
                    }
                    if c.wr_id == END_WR {
                        end_done = true;
                    } else if c.wr_id == ANNOUNCE_WR {
                        // Not a message.
                    } else if matches!(c.opcode, WC_SEND | WC_RDMA_WRITE) {
                        outstanding = outstanding.saturating_sub(1);
                        st.sent += 1;
                        st.bytes += msg_size as u64;
                    } else if c.opcode == WC_RECV {
                        credits += u64::from(c.imm.unwrap_or(0));
                        self.qp.post_recv(CREDIT_WR, None)?;
                    }
                }
                self.give_back(v);
                if fatal {
                    break;
                }
            }
            if !end_done && !fatal {
                st.notes.push(format!(
                    "end of run not acknowledged within {} s ({outstanding} messages in flight)",
                    DRAIN_TIMEOUT.as_secs()
                ));
                abort.store(true, Ordering::Relaxed);
            }
        }
        if fatal {
            abort.store(true, Ordering::Relaxed);
        }
        st.wall_s = (end_ns - t0) as f64 / 1e9;
        st.cpu_s = (thread_cpu_ns() - cpu0) as f64 / 1e9;
        Ok(st)
    }

    /// Receives and verifies until the end marker (or `stop`, `abort`, or `hard_limit`).
    /// `one_way_latency`: the sender's stamps are on this host's clock (same process).
    pub fn run_receiver(
        &mut self,
        t: Transfer,
        msg_size: usize,
        hard_limit: Duration,
        one_way_latency: bool,
        stop: &AtomicBool,
        abort: &AtomicBool,
    ) -> Result<ReceiverStats, RdmaError> {
        if matches!(t, Transfer::PingPong) {
            return self.run_ponger(msg_size, hard_limit, stop, abort);
        }
        let mut st = ReceiverStats::default();
        let mut tracker = SeqTracker::default();
        let mut hist = one_way_latency.then(Histogram::default);
        let cpu0 = thread_cpu_ns();
        let t0 = monotonic_ns();
        let limit = t0 + hard_limit.as_nanos() as u64;
        let batch = (self.slots as u32 / 4).max(1);
        let mut backoff = Backoff::new();
        let mut pending = 0u32;
        let mut writes = 0u64;
        let mut credit_in_flight = 0usize;
        let (mut first, mut last) = (0u64, 0u64);
        let mut fatal = false;
        'run: loop {
            if stop.load(Ordering::Relaxed) || abort.load(Ordering::Relaxed) {
                break;
            }
            if monotonic_ns() > limit {
                st.notes
                    .push(format!("no end of run within {} s", hard_limit.as_secs()));
                break;
            }
            let v = self.poll()?;
            backoff.after(v.len());
            for c in &v {
                if !record(&mut st.cq, c) {
                    fatal = true;
                    continue;
                }
                // Messages this completion delivers: (seq, offset, length). A SEND delivers
                // one; an announcing WRITE with immediate delivers every WRITE since the last
                // announcement (RC executes in order, so their data is in place).
                let (first_seq, count, len) = match (t, c.opcode) {
                    (_, WC_SEND) => {
                        credit_in_flight = credit_in_flight.saturating_sub(1);
                        continue;
                    }
                    (Transfer::Send, WC_RECV) if c.imm.is_none() => {
                        (None, 1u64, c.byte_len as usize)
                    }
                    (_, WC_RECV) if c.imm == Some(END_IMM) => {
                        st.ended = true;
                        break 'run;
                    }
                    (Transfer::Write, WC_RECV_RDMA_WITH_IMM) => {
                        let upto = c.imm.unwrap_or(0);
                        let n = u64::from(upto.wrapping_sub(writes as u32).wrapping_add(1));
                        if n == 0 || n > self.slots as u64 {
                            st.notes.push(format!(
                                "announcement of message {upto} does not fit the ring \
                                 (expected from {writes})"
                            ));
                            tracker.defect();
                            self.post_data_recv(t, 0, msg_size)?;
                            continue;
                        }
                        let from = writes;
                        writes += n;
                        (Some(from), n, msg_size)
                    }
                    _ => {
                        st.notes.push(format!(
                            "unexpected completion opcode {} (wr_id {})",
                            c.opcode, c.wr_id
                        ));
                        continue;
                    }
                };
                let now = monotonic_ns();
                if first == 0 {
                    first = now;
                }
                last = now;
                for k in 0..count {
                    let (off, want) = match first_seq {
                        Some(f) => (self.slot_off(f + k), Some(f + k)),
                        None => (c.wr_id as usize * self.slot_size, None),
                    };
                    match self.mr.read(off, len).map(payload::check) {
                        Some(Ok(h)) if want.is_none_or(|w| w == h.seq) => {
                            tracker.accept(h.seq);
                            st.bytes += len as u64;
                            if let Some(hh) = hist.as_mut() {
                                hh.record(now.saturating_sub(h.tx_ns));
                            }
                        }
                        _ => {
                            // RC delivers in order: the message was the expected one,
                            // damaged, not lost.
                            tracker.defect();
                            tracker.expected += 1;
                        }
                    }
                }
                // Re-arm the receive, then hand the slots' credits back.
                let slot = match t {
                    Transfer::Send => c.wr_id,
                    _ => 0,
                };
                self.post_data_recv(t, slot, msg_size)?;
                pending += count as u32;
            }
            self.give_back(v);
            if fatal {
                abort.store(true, Ordering::Relaxed);
                break;
            }
            if pending >= batch && credit_in_flight < self.slots {
                self.qp
                    .post_send(CREDIT_WR, SendOp::SendImm(pending), None, true)?;
                credit_in_flight += 1;
                pending = 0;
            }
        }
        st.received = tracker.received;
        st.lost = tracker.lost;
        st.reordered = tracker.reordered;
        st.integrity_errors = tracker.integrity_errors;
        st.active_s = last.saturating_sub(first) as f64 / 1e9;
        st.wall_s = (monotonic_ns() - t0) as f64 / 1e9;
        st.cpu_s = (thread_cpu_ns() - cpu0) as f64 / 1e9;
        st.latency = hist;
        Ok(st)
    }

    /// Ping-pong client: one message in flight, RTT/2 recorded per round trip.
    fn run_pinger(
        &mut self,
        peer: &ConnInfo,
        msg_size: usize,
        duration: Duration,
        stop: &AtomicBool,
        abort: &AtomicBool,
    ) -> Result<SenderStats, RdmaError> {
        if self.slots < 2 || msg_size > self.slot_size || msg_size > peer.slot_size as usize {
            return Err(RdmaError::Invalid(
                "ping-pong needs two slots of the message size".into(),
            ));
        }
        self.prefill(msg_size)?;
        let mut g = Generator::new(msg_size, 0);
        let mut hist = Histogram::default();
        let mut st = SenderStats::default();
        let mut tracker = SeqTracker::default();
        let cpu0 = thread_cpu_ns();
        let t0 = monotonic_ns();
        let deadline = t0 + duration.as_nanos() as u64;
        let reply_off = self.slot_size;
        let mut fatal = false;
        'run: while monotonic_ns() < deadline
            && !stop.load(Ordering::Relaxed)
            && !abort.load(Ordering::Relaxed)
        {
            let sent_at = monotonic_ns();
            let seq = g.next_seq();
            let msg = g.next(sent_at);
            if !self.mr.write(0, &msg[..HEADER_LEN]) {
                return Err(RdmaError::Invalid(format!(
                    "cannot write the ping header into {} memory",
                    self.mr.kind()
                )));
            }
            self.qp
                .post_send(seq, SendOp::Send, Some((&self.mr, 0, msg_size)), true)?;
            let (mut sent, mut got) = (false, false);
            let limit = sent_at + DRAIN_TIMEOUT.as_nanos() as u64;
            while !(sent && got) {
                if monotonic_ns() > limit {
                    st.notes.push(format!(
                        "no reply to ping {seq} within {} s",
                        DRAIN_TIMEOUT.as_secs()
                    ));
                    fatal = true;
                    break 'run;
                }
                let v = self.poll()?;
                for c in &v {
                    if !record(&mut st.cq, c) {
                        fatal = true;
                        continue;
                    }
                    match c.opcode {
                        WC_SEND => {
                            sent = true;
                            st.sent += 1;
                            st.bytes += msg_size as u64;
                        }
                        WC_RECV => {
                            got = true;
                            let now = monotonic_ns();
                            match self
                                .mr
                                .read(reply_off, c.byte_len as usize)
                                .map(payload::check)
                            {
                                Some(Ok(h)) if h.seq == seq => {
                                    tracker.accept(h.seq);
                                    hist.record(now.saturating_sub(sent_at) / 2);
                                }
                                _ => tracker.defect(),
                            }
                        }
                        _ => {}
                    }
                }
                self.give_back(v);
                if fatal {
                    break 'run;
                }
            }
            self.qp
                .post_recv(1, Some((&self.mr, reply_off, msg_size)))?;
        }
        let end_ns = monotonic_ns();
        if !fatal && !abort.load(Ordering::Relaxed) {
            self.qp
                .post_send(END_WR, SendOp::SendImm(END_IMM), None, true)?;
            let limit = monotonic_ns() + DRAIN_TIMEOUT.as_nanos() as u64;
            let mut done = false;
            while !done && monotonic_ns() < limit {
                let v = self.poll()?;
                for c in &v {
                    record(&mut st.cq, c);
                    done |= c.wr_id == END_WR;
                }
                self.give_back(v);
            }
        }
        if fatal {
            abort.store(true, Ordering::Relaxed);
        }
        st.integrity_errors = tracker.integrity_errors;
        st.wall_s = (end_ns - t0) as f64 / 1e9;
        st.cpu_s = (thread_cpu_ns() - cpu0) as f64 / 1e9;
        st.latency = Some(hist);
        Ok(st)
    }

    /// Ping-pong server: verifies each ping and sends it back from the slot it landed in.
    fn run_ponger(
        &mut self,
        msg_size: usize,
        hard_limit: Duration,
        stop: &AtomicBool,
        abort: &AtomicBool,
    ) -> Result<ReceiverStats, RdmaError> {
        let mut st = ReceiverStats::default();
        let mut tracker = SeqTracker::default();
        let cpu0 = thread_cpu_ns();
        let t0 = monotonic_ns();
        let limit = t0 + hard_limit.as_nanos() as u64;
        let (mut first, mut last) = (0u64, 0u64);
        let mut fatal = false;
        'run: while !stop.load(Ordering::Relaxed) && !abort.load(Ordering::Relaxed) {
            if monotonic_ns() > limit {
                st.notes
                    .push(format!("no end of run within {} s", hard_limit.as_secs()));
                break;
            }
            let v = self.poll()?;
            for c in &v {
                if !record(&mut st.cq, c) {
                    fatal = true;
                    continue;
                }
                match c.opcode {
                    WC_RECV if c.imm == Some(END_IMM) => {
                        st.ended = true;
                        break 'run;
                    }
                    WC_RECV => {
                        let now = monotonic_ns();
                        if first == 0 {
                            first = now;
                        }
                        last = now;
                        let off = c.wr_id as usize * self.slot_size;
                        let len = c.byte_len as usize;
                        match self.mr.read(off, len).map(payload::check) {
                            Some(Ok(h)) => {
                                tracker.accept(h.seq);
                                st.bytes += len as u64;
                            }
                            _ => {
                                tracker.defect();
                                tracker.expected += 1;
                            }
                        }
                        // Echo from the slot; it is re-armed when the echo completed.
                        self.qp.post_send(
                            c.wr_id,
                            SendOp::Send,
                            Some((&self.mr, off, len)),
                            true,
                        )?;
                    }
                    WC_SEND => {
                        self.post_data_recv(Transfer::PingPong, c.wr_id, msg_size)?;
                    }
                    _ => {}
                }
            }
            self.give_back(v);
            if fatal {
                abort.store(true, Ordering::Relaxed);
                break;
            }
        }
        st.received = tracker.received;
        st.lost = tracker.lost;
        st.reordered = tracker.reordered;
        st.integrity_errors = tracker.integrity_errors;
        st.active_s = last.saturating_sub(first) as f64 / 1e9;
        st.wall_s = (monotonic_ns() - t0) as f64 / 1e9;
        st.cpu_s = (thread_cpu_ns() - cpu0) as f64 / 1e9;
        Ok(st)
    }
}

/// Waits up to `timeout` for `cfg`'s port to be active with a usable source GID. Right after
/// a port has moved into a namespace and been addressed, the link comes up and the kernel fills
/// the GID table asynchronously; opening the endpoint before then fails with "port not active"
/// or "no RoCE v2 GID". Returns whether the port became ready; the caller opens it either way,
/// so a port that never gets ready reports its own reason.
pub fn wait_ready(cfg: &EndpointConfig, timeout: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let ready = DeviceList::get()
            .and_then(|list| list.open(&cfg.device))
            .and_then(|ctx| {
                let info = ctx.query_port(cfg.port)?;
                let table = ctx.gid_table(cfg.port, info.gid_table_len);
                let gid_ok = match cfg.gid_index {
                    Some(i) => table.iter().any(|g| g.index == i),
                    None => select_gid(&table, cfg.ipv4).is_some(),
                };
                Ok(info.active && gid_ok)
            })
            .unwrap_or(false);
        if ready {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
