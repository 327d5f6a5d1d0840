//! The GPU sink: received self-test messages land in CUDA-visible memory in batches and a GPU
//! kernel checks every one (magic, length, CRC-32C, sequence continuity).
//!
//! Memory kinds, as DAQIRI names them:
//! - `host_pinned`: the receive buffers are page-locked host memory from cuMemHostAlloc with
//!   DEVICEMAP; the kernel reads them in place (the DGX Spark mode). The same allocation
//!   ([`PinnedBuf`]) is what DPDK registers as external memory.
//! - `copy`: the receive buffers are pinned staging memory; each full batch (>= 4 MiB) goes to
//!   device memory with cuMemcpyHtoDAsync and the kernel checks the device copy. Two slots, each
//!   with its own stream, so one batch is copied and checked while the next one fills.
//! - `device`: the NIC writes GPU memory directly (GPUDirect RDMA); sockets cannot, so the
//!   socket engine reports it as not applicable.
//!
//! The kernel ships as PTX text (verify.ptx, generated from verify.cu by
//! scripts/gen-gpu-ptx.sh, no CUDA toolkit involved) and is JIT-compiled by the driver.
//! [`Batcher`] holds the batching and accounting and runs over any [`Backend`]; the tests drive
//! it with a CPU model of the kernel, the engine with [`CudaBackend`].

/// The CUDA driver binding, shared with the probe (one binding in the workspace).
pub use daqtune_probe::gpu::cuda;

use crate::payload::{self, CrcShift, SeqTracker, HEADER_LEN};
use cuda::{Arg, Context, CudaError, DeviceBuf, Event, Kernel, Stream};
pub use cuda::{DeviceInfo, PinnedBuf};
use daqtune_probe::gpu::GpuFacts;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The kernel's PTX (sm_52, PTX ISA 4.1).
pub const PTX: &str = include_str!("verify.ptx");
/// Its entry point.
pub const ENTRY: &str = "daqtune_verify";
/// Messages per 128-thread block (one warp each), as verify.cu defines.
const WARPS_PER_BLOCK: usize = 4;
const LANES: usize = 32;
/// Smallest batch the `copy` kind moves (below this the copy engine's per-transfer cost shows).
pub const MIN_COPY_BATCH: usize = 4 << 20;
/// Default batch: on the H200 of docs/validation.md, 4 MiB copies in a live stream reached only
/// 79 % of the back-to-back pinned-copy peak, 8 MiB ones 96 % (docs/performance.md).
pub const DEFAULT_BATCH: usize = 8 << 20;
/// Batches in flight at once (double buffering).
pub const SLOTS: usize = 2;

pub use cuda::CudaError as SinkError;

pub use daqtune_report::gpu::{
    Calibration, GpuSinkResult, MemoryKind, MAX_COPY_BUSY, MAX_WAIT_SHARE,
};

/// How a run's batches are cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub msg_len: usize,
    pub batch_msgs: usize,
}

impl Geometry {
    /// Whole messages covering at least `batch_bytes`; `copy` needs at least [`MIN_COPY_BATCH`].
    pub fn new(msg_len: usize, batch_bytes: usize, kind: MemoryKind) -> Result<Geometry, String> {
        if msg_len < HEADER_LEN {
            return Err(format!(
                "message size {msg_len} is below the {HEADER_LEN}-byte header"
            ));
        }
        if msg_len > u32::MAX as usize {
            return Err(format!(
                "message size {msg_len} exceeds the kernel's 32-bit length"
            ));
        }
        if kind == MemoryKind::Copy && batch_bytes < MIN_COPY_BATCH {
            return Err(format!(
                "copy batches must be at least {} MiB (asked for {batch_bytes} bytes)",
                MIN_COPY_BATCH >> 20
            ));
        }
        if batch_bytes > 1 << 30 {
            return Err(format!("batch of {batch_bytes} bytes is above 1 GiB"));
        }
        Ok(Geometry {
            msg_len,
            batch_msgs: batch_bytes.div_ceil(msg_len).max(1),
        })
    }

    pub fn batch_bytes(&self) -> usize {
        self.batch_msgs * self.msg_len
    }

    /// Body bytes per lane (lanes 0..30); lane 31 takes the rest.
    pub fn chunk(&self) -> usize {
        (self.msg_len - HEADER_LEN) / LANES
    }

    pub fn last_chunk(&self) -> usize {
        self.msg_len - HEADER_LEN - (LANES - 1) * self.chunk()
    }

    /// Blocks for `n` messages.
    pub fn grid(n: usize) -> usize {
        n.div_ceil(WARPS_PER_BLOCK)
    }
}

/// Byte-wise CRC-32C table (reflected polynomial 0x82F63B78), as the kernel indexes it.
pub fn crc_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    for (i, slot) in t.iter_mut().enumerate() {
        let mut c = i as u32;
        for _ in 0..8 {
            c = (c >> 1) ^ if c & 1 != 0 { 0x82F6_3B78 } else { 0 };
        }
        *slot = c;
    }
    t
}

/// The kernel's lookup tables for one message length (verify.cu `struct Tables`): the CRC table
/// and the zero-advance operators for a lane slice, the last slice and the whole body.
#[derive(Clone)]
pub struct Tables {
    pub crc: [u32; 256],
    pub chunk: CrcShift,
    pub last: CrcShift,
    pub body: CrcShift,
}

impl Tables {
    pub fn new(g: &Geometry) -> Tables {
        Tables {
            crc: crc_table(),
            chunk: CrcShift::new(g.chunk()),
            last: CrcShift::new(g.last_chunk()),
            body: CrcShift::new(g.msg_len - HEADER_LEN),
        }
    }

    /// Little-endian bytes in the kernel's layout (256 + 3 * 1024 words).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 * (256 + 3 * 1024));
        for w in self.crc {
            out.extend_from_slice(&w.to_le_bytes());
        }
        for s in [&self.chunk, &self.last, &self.body] {
            for t in s.tables() {
                for w in t {
                    out.extend_from_slice(&w.to_le_bytes());
                }
            }
        }
        out
    }
}

/// Per-message result codes the kernel writes (verify.cu `ST_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsgStatus {
    Ok,
    BadMagic,
    BadLength,
    BadCrc,
    /// A code the kernel never writes: memory was not what the sink thinks.
    Unknown(u32),
}

impl MsgStatus {
    pub fn from_code(c: u32) -> MsgStatus {
        match c {
            0 => MsgStatus::Ok,
            1 => MsgStatus::BadMagic,
            2 => MsgStatus::BadLength,
            3 => MsgStatus::BadCrc,
            x => MsgStatus::Unknown(x),
        }
    }

    pub fn code(self) -> u32 {
        match self {
            MsgStatus::Ok => 0,
            MsgStatus::BadMagic => 1,
            MsgStatus::BadLength => 2,
            MsgStatus::BadCrc => 3,
            MsgStatus::Unknown(x) => x,
        }
    }
}

/// A CPU model of the kernel, step for step (lane slices, fold, header join). The tests hold it
/// against [`payload::check`]; [`CpuBackend`] uses it.
pub fn model_verify(msg: &[u8], t: &Tables) -> MsgStatus {
    let len = msg.len();
    if len < HEADER_LEN || le_u32(msg, 0) != payload::MAGIC {
        return MsgStatus::BadMagic;
    }
    if le_u32(msg, 4) as usize != len {
        return MsgStatus::BadLength;
    }
    let g = Geometry {
        msg_len: len,
        batch_msgs: 1,
    };
    let body = &msg[HEADER_LEN..];
    let step = |reg: u32, bytes: &[u8]| {
        bytes.iter().fold(reg, |r, &b| {
            t.crc[((r ^ u32::from(b)) & 0xff) as usize] ^ (r >> 8)
        })
    };
    let chunk = g.chunk();
    let parts: Vec<u32> = (0..LANES)
        .map(|lane| {
            let start = lane * chunk;
            let end = if lane == LANES - 1 {
                body.len()
            } else {
                start + chunk
            };
            step(0, &body[start..end])
        })
        .collect();
    let mut acc = parts[0];
    for p in &parts[1..LANES - 1] {
        acc = t.chunk.apply(acc) ^ p;
    }
    acc = t.last.apply(acc) ^ parts[LANES - 1];
    let head = step(!0, &msg[..28]);
    let crc = !(t.body.apply(head) ^ acc);
    if crc == le_u32(msg, 28) {
        MsgStatus::Ok
    } else {
        MsgStatus::BadCrc
    }
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The kernel's aggregate counters (verify.cu `struct Totals`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub ok: u64,
    pub bad_magic: u64,
    pub bad_len: u64,
    pub bad_crc: u64,
    pub bytes_ok: u64,
    /// Lowest / highest sequence number among good messages (`None` when none was good).
    pub min_seq: Option<u64>,
    pub max_seq: Option<u64>,
    /// Good messages whose sequence number is not the previous message's + 1.
    pub seq_breaks: u64,
}

/// Bytes of `struct Totals` on the device.
pub const TOTALS_BYTES: usize = 8 * 8;

impl Totals {
    /// The device's initial image: zeros, min_seq = all ones.
    pub fn initial_bytes() -> [u8; TOTALS_BYTES] {
        let mut b = [0u8; TOTALS_BYTES];
        b[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8; TOTALS_BYTES]) -> Totals {
        let w = |i: usize| le_u64(b, i * 8);
        let ok = w(0);
        Totals {
            ok,
            bad_magic: w(1),
            bad_len: w(2),
            bad_crc: w(3),
            bytes_ok: w(4),
            min_seq: (ok > 0).then(|| w(5)),
            max_seq: (ok > 0).then(|| w(6)),
            seq_breaks: w(7),
        }
    }

    pub fn errors(&self) -> u64 {
        self.bad_magic + self.bad_len + self.bad_crc
    }
}

/// Per-batch result read back from the device.
#[derive(Debug, Default, Clone)]
pub struct Completion {
    pub status: Vec<MsgStatus>,
    pub seqs: Vec<u64>,
}

/// A place batches go to be verified.
pub trait Backend {
    /// The host-writable receive buffer of `slot` (at least one batch long).
    fn buffer(&mut self, slot: usize) -> &mut [u8];
    /// Starts verifying `n` messages of `slot`; `expect_first` is the sequence number the
    /// first one should carry.
    fn submit(&mut self, slot: usize, n: usize, expect_first: u64) -> Result<(), SinkError>;
    /// Waits for `slot`'s batch and returns the per-message results.
    fn complete(&mut self, slot: usize, n: usize, out: &mut Completion) -> Result<(), SinkError>;
    /// The device's aggregates after every batch completed.
    fn totals(&mut self) -> Result<Totals, SinkError>;
}

/// What the batcher accounted for, from the per-message results.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Accounting {
    pub tracker: SeqTracker,
    pub verified: u64,
    pub verified_bytes: u64,
    pub bad_magic: u64,
    pub bad_len: u64,
    pub bad_crc: u64,
    pub batches: u64,
    /// Bytes at the end of a stream that did not make a whole message (never sent to the GPU).
    pub trailing_bytes: usize,
    /// Time the receiver spent waiting for a slot whose batch was still on the GPU (copy and
    /// kernel), ns: while it waits it reads nothing, so this is how much the GPU path held the
    /// receive side back. The final drain is not counted (it is after the stream ended).
    pub receiver_wait_ns: u64,
}

/// Fills slots with received bytes, hands full batches to the backend and accounts for the
/// results. A slot is written only when none of its batch is still in flight.
pub struct Batcher<B: Backend> {
    pub backend: B,
    geo: Geometry,
    cur: usize,
    filled: usize,
    in_flight: [Option<usize>; SLOTS],
    next_expect: u64,
    completion: Completion,
    pub acct: Accounting,
}

impl<B: Backend> Batcher<B> {
    pub fn new(backend: B, geo: Geometry) -> Self {
        Batcher {
            backend,
            geo,
            cur: 0,
            filled: 0,
            in_flight: [None; SLOTS],
            next_expect: 0,
            completion: Completion::default(),
            acct: Accounting::default(),
        }
    }

    pub fn geometry(&self) -> Geometry {
        self.geo
    }

    fn reap(&mut self, slot: usize) -> Result<(), SinkError> {
        let Some(n) = self.in_flight[slot].take() else {
            return Ok(());
        };
        self.backend.complete(slot, n, &mut self.completion)?;
        let a = &mut self.acct;
        a.batches += 1;
        for (st, &seq) in self.completion.status.iter().zip(&self.completion.seqs) {
            match st {
                MsgStatus::Ok => {
                    a.tracker.accept(seq);
                    a.verified += 1;
                    a.verified_bytes += self.geo.msg_len as u64;
                }
                other => {
                    a.tracker.defect();
                    match other {
                        MsgStatus::BadMagic => a.bad_magic += 1,
                        MsgStatus::BadLength => a.bad_len += 1,
                        _ => a.bad_crc += 1,
                    }
                }
            }
        }
        Ok(())
    }

    /// The free part of the current batch buffer (waits for the slot's previous batch first).
    pub fn writable(&mut self) -> Result<&mut [u8], SinkError> {
        if self.in_flight[self.cur].is_some() {
            let t0 = crate::sys::monotonic_ns();
            self.reap(self.cur)?;
            self.acct.receiver_wait_ns += crate::sys::monotonic_ns().saturating_sub(t0);
        }
        let cap = self.geo.batch_bytes();
        let filled = self.filled;
        Ok(&mut self.backend.buffer(self.cur)[filled..cap])
    }

    /// Space for exactly one message (datagram engines), or `None` when [`writable`] must be
    /// used because the batch is mid-message.
    ///
    /// [`writable`]: Self::writable
    pub fn message_slot(&mut self) -> Result<&mut [u8], SinkError> {
        let len = self.geo.msg_len;
        let w = self.writable()?;
        Ok(&mut w[..len])
    }

    /// `n` more bytes of the current batch were written; submits the batch when full.
    pub fn commit(&mut self, n: usize) -> Result<(), SinkError> {
        self.filled = (self.filled + n).min(self.geo.batch_bytes());
        if self.filled == self.geo.batch_bytes() {
            self.submit_current(self.geo.batch_msgs)?;
        }
        Ok(())
    }

    fn submit_current(&mut self, n: usize) -> Result<(), SinkError> {
        if n == 0 {
            return Ok(());
        }
        let len = self.geo.msg_len;
        let expect = self.next_expect;
        // The next batch should continue where this one's last message left off; reading the
        // 8 sequence bytes here is bookkeeping for the kernel's continuity check, not a check.
        let last = &self.backend.buffer(self.cur)[(n - 1) * len..n * len];
        self.next_expect = le_u64(last, 8).wrapping_add(1);
        self.backend.submit(self.cur, n, expect)?;
        self.in_flight[self.cur] = Some(n);
        self.cur = (self.cur + 1) % SLOTS;
        self.filled = 0;
        Ok(())
    }

    /// Submits what is left (whole messages), waits for every batch, returns the accounting and
    /// the device's own totals.
    pub fn finish(&mut self) -> Result<(Accounting, Totals), SinkError> {
        let whole = self.filled / self.geo.msg_len;
        self.acct.trailing_bytes = self.filled % self.geo.msg_len;
        self.submit_current(whole)?;
        // Oldest first: `cur` is the slot that would be filled next, i.e. the oldest in flight.
        for i in 0..SLOTS {
            self.reap((self.cur + i) % SLOTS)?;
        }
        let totals = self.backend.totals()?;
        Ok((self.acct.clone(), totals))
    }
}

/// A backend that verifies on the CPU with [`model_verify`]: the batching and accounting tests
/// run on it, and it shows what the GPU path must produce.
pub struct CpuBackend {
    geo: Geometry,
    tables: Tables,
    bufs: Vec<Vec<u8>>,
    pending: Vec<Option<Completion>>,
    totals: Totals,
}

impl CpuBackend {
    pub fn new(geo: Geometry) -> Self {
        CpuBackend {
            geo,
            tables: Tables::new(&geo),
            bufs: vec![vec![0u8; geo.batch_bytes()]; SLOTS],
            pending: vec![None; SLOTS],
            totals: Totals::default(),
        }
    }
}

impl Backend for CpuBackend {
    fn buffer(&mut self, slot: usize) -> &mut [u8] {
        &mut self.bufs[slot]
    }

    fn submit(&mut self, slot: usize, n: usize, expect_first: u64) -> Result<(), SinkError> {
        let len = self.geo.msg_len;
        let mut c = Completion::default();
        let mut prev = expect_first.wrapping_sub(1);
        for m in self.bufs[slot][..n * len].chunks(len) {
            let st = model_verify(m, &self.tables);
            let seq = le_u64(m, 8);
            c.status.push(st);
            c.seqs.push(seq);
            let t = &mut self.totals;
            match st {
                MsgStatus::Ok => {
                    t.ok += 1;
                    t.bytes_ok += len as u64;
                    t.min_seq = Some(t.min_seq.map_or(seq, |x| x.min(seq)));
                    t.max_seq = Some(t.max_seq.map_or(seq, |x| x.max(seq)));
                    if seq != prev.wrapping_add(1) {
                        t.seq_breaks += 1;
                    }
                }
                MsgStatus::BadMagic => t.bad_magic += 1,
                MsgStatus::BadLength => t.bad_len += 1,
                _ => t.bad_crc += 1,
            }
            prev = seq;
        }
        self.pending[slot] = Some(c);
        Ok(())
    }

    fn complete(&mut self, slot: usize, _n: usize, out: &mut Completion) -> Result<(), SinkError> {
        *out = self.pending[slot].take().unwrap_or_default();
        Ok(())
    }

    fn totals(&mut self) -> Result<Totals, SinkError> {
        Ok(self.totals)
    }
}

/// Finds the GPU `id` names among the GPU facts: nvidia-smi's index (NVML), a UUID (`GPU-...`,
/// prefix allowed as nvidia-smi does), or a PCI bus id in any of NVML's, CUDA's or sysfs's forms.
/// Without NVML an index is the CUDA ordinal.
pub fn resolve<'a>(id: &str, gpus: &'a [GpuFacts]) -> Result<&'a GpuFacts, String> {
    let id = id.trim();
    if id.is_empty() {
        return Err("empty GPU id".into());
    }
    if let Ok(i) = id.parse::<u32>() {
        let nvml = gpus.iter().find(|g| g.nvml_index == Some(i));
        let any_nvml = gpus.iter().any(|g| g.nvml_index.is_some());
        let found = if any_nvml {
            nvml
        } else {
            gpus.iter()
                .find(|g| g.cuda.as_ref().and_then(|c| c.ordinal) == Some(i))
        };
        return found.ok_or_else(|| format!("no GPU with index {i} ({} GPU(s) found)", gpus.len()));
    }
    if id.to_ascii_uppercase().starts_with("GPU-") {
        let want = id.to_ascii_lowercase();
        let hits: Vec<&GpuFacts> = gpus
            .iter()
            .filter(|g| g.uuid.to_ascii_lowercase().starts_with(&want))
            .collect();
        return match hits.as_slice() {
            [one] => Ok(one),
            [] => Err(format!("no GPU with UUID {id}")),
            _ => Err(format!("UUID prefix {id} matches {} GPUs", hits.len())),
        };
    }
    // NVML's 8-digit domain, CUDA's 4-digit one, or a bare `09:00.0`.
    let full = if id.matches(':').count() == 1 {
        format!("0000:{id}")
    } else {
        id.to_string()
    };
    let want = daqtune_probe::gpu::normalize_bus_id(&full)
        .ok_or_else(|| format!("{id:?} is not a GPU index, UUID or PCI bus id"))?;
    gpus.iter()
        .find(|g| g.pci_bus_id.as_deref() == Some(want.as_str()))
        .ok_or_else(|| format!("no GPU at PCI {want}"))
}

/// The GPU a run will use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChosenGpu {
    pub uuid: String,
    pub name: String,
    pub pci_bus_id: Option<String>,
    pub ordinal: u32,
}

/// Resolves `id` through the GPU facts (NVML + CUDA, the same `daqtune check` reads) and
/// finds its CUDA ordinal. `Err` carries the reason to skip.
pub fn choose(id: &str) -> Result<ChosenGpu, String> {
    let snap = daqtune_probe::gpu::gather_live();
    if let Some(why) = snap.unavailable_reason() {
        return Err(format!("no GPU: {why}"));
    }
    let facts = resolve(id, &snap.gpus)?;
    let devs = cuda::devices().map_err(|e| format!("CUDA: {e}"))?;
    let dev = devs
        .iter()
        .find(|d| d.uuid.eq_ignore_ascii_case(&facts.uuid))
        .ok_or_else(|| {
            format!(
                "{} is not visible to CUDA (CUDA_VISIBLE_DEVICES?)",
                facts.uuid
            )
        })?;
    Ok(ChosenGpu {
        uuid: dev.uuid.clone(),
        name: dev.name.clone(),
        pci_bus_id: dev.pci_bus_id.clone(),
        ordinal: dev.ordinal,
    })
}

/// Gb/s of `bytes` in `ms` milliseconds (0 when no time passed).
pub fn gbps_of(bytes: u64, ms: f64) -> f64 {
    if ms > 0.0 {
        bytes as f64 * 8.0 / (ms * 1e6)
    } else {
        0.0
    }
}

/// Median of a non-empty slice (sorted copy); 0 for an empty one.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

struct Slot {
    host: PinnedBuf,
    dev: Option<DeviceBuf>,
    seqs_dev: DeviceBuf,
    status_dev: DeviceBuf,
    seqs_host: PinnedBuf,
    status_host: PinnedBuf,
    stream: Stream,
    copy_start: Event,
    copy_end: Event,
    kernel_end: Event,
    done: Event,
}

/// The GPU backend: slots of pinned memory, device copies where the kind wants them, the
/// kernel, and event timing of copies and kernels.
pub struct CudaBackend {
    geo: Geometry,
    kind: MemoryKind,
    slots: Vec<Slot>,
    tables: DeviceBuf,
    totals: DeviceBuf,
    kernel: Kernel,
    pub copy_ms: f64,
    pub copy_bytes: u64,
    pub copies: u64,
    pub kernel_ms: f64,
    pub gpu: ChosenGpu,
    // Declared last: dropped after every resource above.
    ctx: Arc<Context>,
}

impl CudaBackend {
    /// Retains the GPU's primary context on the calling thread and allocates everything.
    pub fn open(gpu: ChosenGpu, geo: Geometry, kind: MemoryKind) -> Result<Self, SinkError> {
        if kind == MemoryKind::Device {
            return Err(CudaError::Unavailable(
                "device memory needs GPUDirect RDMA (DPDK or RDMA engine)".into(),
            ));
        }
        let ctx = Context::retain(gpu.ordinal)?;
        let kernel = Kernel::load(&ctx, PTX, ENTRY)?;
        let tables = DeviceBuf::new(&ctx, 4 * (256 + 3 * 1024))?;
        tables.upload(&Tables::new(&geo).to_bytes())?;
        let totals = DeviceBuf::new(&ctx, TOTALS_BYTES)?;
        totals.upload(&Totals::initial_bytes())?;
        let n = geo.batch_msgs;
        let mut slots = Vec::with_capacity(SLOTS);
        for _ in 0..SLOTS {
            slots.push(Slot {
                host: PinnedBuf::new(&ctx, geo.batch_bytes(), kind == MemoryKind::HostPinned)?,
                dev: if kind == MemoryKind::Copy {
                    Some(DeviceBuf::new(&ctx, geo.batch_bytes())?)
                } else {
                    None
                },
                seqs_dev: DeviceBuf::new(&ctx, 8 * n)?,
                status_dev: DeviceBuf::new(&ctx, 4 * n)?,
                seqs_host: PinnedBuf::new(&ctx, 8 * n, false)?,
                status_host: PinnedBuf::new(&ctx, 4 * n, false)?,
                stream: Stream::new(&ctx)?,
                copy_start: Event::new(&ctx)?,
                copy_end: Event::new(&ctx)?,
                kernel_end: Event::new(&ctx)?,
                done: Event::new(&ctx)?,
            });
        }
        Ok(CudaBackend {
            geo,
            kind,
            slots,
            tables,
            totals,
            kernel,
            copy_ms: 0.0,
            copy_bytes: 0,
            copies: 0,
            kernel_ms: 0.0,
            gpu,
            ctx,
        })
    }

    /// `copies` back-to-back timed cuMemcpyHtoDAsync of one batch from pinned memory to device
    /// memory (after two untimed warm-ups), each between its own pair of events.
    pub fn calibrate(&mut self, copies: usize) -> Result<Calibration, SinkError> {
        let bytes = self.geo.batch_bytes();
        let scratch;
        let dst = match &self.slots[0].dev {
            Some(d) => d,
            None => {
                scratch = DeviceBuf::new(&self.ctx, bytes)?;
                &scratch
            }
        };
        let s = &self.slots[0];
        let mut rates = Vec::with_capacity(copies);
        for i in 0..copies + 2 {
            s.copy_start.record(&s.stream)?;
            s.stream.copy_to_device(dst, &s.host, bytes)?;
            s.copy_end.record(&s.stream)?;
            s.copy_end.synchronize()?;
            if i >= 2 {
                rates.push(gbps_of(bytes as u64, s.copy_end.since(&s.copy_start)?));
            }
        }
        Ok(Calibration {
            bytes,
            copies,
            peak_gbps: rates.iter().copied().fold(0.0, f64::max),
            median_gbps: median(&rates),
        })
    }

    pub fn kind(&self) -> MemoryKind {
        self.kind
    }
}

impl Backend for CudaBackend {
    fn buffer(&mut self, slot: usize) -> &mut [u8] {
        self.slots[slot].host.as_mut_slice()
    }

    fn submit(&mut self, slot: usize, n: usize, expect_first: u64) -> Result<(), SinkError> {
        let len = self.geo.msg_len;
        let s = &self.slots[slot];
        let batch = match &s.dev {
            Some(d) => {
                s.copy_start.record(&s.stream)?;
                s.stream.copy_to_device(d, &s.host, n * len)?;
                d.ptr()
            }
            None => s.host.device_ptr().ok_or_else(|| {
                CudaError::Invalid("host buffer is not mapped for the device".into())
            })?,
        };
        s.copy_end.record(&s.stream)?;
        self.kernel.launch(
            &s.stream,
            Geometry::grid(n) as u32,
            (WARPS_PER_BLOCK * LANES) as u32,
            &[
                Arg::U64(batch),
                Arg::U32(len as u32),
                Arg::U32(n as u32),
                Arg::U32(self.geo.chunk() as u32),
                Arg::U64(expect_first),
                Arg::U64(self.tables.ptr()),
                Arg::U64(s.seqs_dev.ptr()),
                Arg::U64(s.status_dev.ptr()),
                Arg::U64(self.totals.ptr()),
            ],
        )?;
        s.kernel_end.record(&s.stream)?;
        let s = &mut self.slots[slot];
        s.stream
            .copy_to_host(&mut s.seqs_host, &s.seqs_dev, 8 * n)?;
        s.stream
            .copy_to_host(&mut s.status_host, &s.status_dev, 4 * n)?;
        s.done.record(&s.stream)?;
        Ok(())
    }

    fn complete(&mut self, slot: usize, n: usize, out: &mut Completion) -> Result<(), SinkError> {
        let s = &self.slots[slot];
        s.done.synchronize()?;
        if s.dev.is_some() {
            self.copy_ms += s.copy_end.since(&s.copy_start)?;
            self.copy_bytes += (n * self.geo.msg_len) as u64;
            self.copies += 1;
        }
        self.kernel_ms += s.kernel_end.since(&s.copy_end)?;
        out.status.clear();
        out.seqs.clear();
        let st = s.status_host.as_slice();
        let sq = s.seqs_host.as_slice();
        for i in 0..n {
            out.status.push(MsgStatus::from_code(le_u32(st, 4 * i)));
            out.seqs.push(le_u64(sq, 8 * i));
        }
        Ok(())
    }

    fn totals(&mut self) -> Result<Totals, SinkError> {
        self.ctx.synchronize()?;
        let mut b = [0u8; TOTALS_BYTES];
        self.totals.download(&mut b)?;
        Ok(Totals::from_bytes(&b))
    }
}

/// Builds the GPU part of a result from a finished run.
pub fn assemble(
    be: &CudaBackend,
    acct: &Accounting,
    totals: &Totals,
    cal: Option<Calibration>,
    rx_secs: f64,
    setup_ms: f64,
) -> GpuSinkResult {
    let h2d = (be.copies > 0).then(|| gbps_of(be.copy_bytes, be.copy_ms));
    let agree = totals.ok == acct.verified
        && totals.bad_magic == acct.bad_magic
        && totals.bad_len == acct.bad_len
        && totals.bad_crc == acct.bad_crc
        && totals.bytes_ok == acct.verified_bytes;
    GpuSinkResult {
        uuid: be.gpu.uuid.clone(),
        name: be.gpu.name.clone(),
        pci_bus_id: be.gpu.pci_bus_id.clone(),
        memory: be.kind,
        batch_bytes: be.geo.batch_bytes(),
        batches: acct.batches,
        verified: totals.ok,
        verified_gbps: if rx_secs > 0.0 {
            totals.bytes_ok as f64 * 8.0 / rx_secs / 1e9
        } else {
            0.0
        },
        integrity_errors: totals.errors(),
        bad_magic: totals.bad_magic,
        bad_length: totals.bad_len,
        bad_crc: totals.bad_crc,
        min_seq: totals.min_seq,
        max_seq: totals.max_seq,
        seq_breaks: totals.seq_breaks,
        kernel_gbps: gbps_of(
            (acct.verified + totals.errors()) * be.geo.msg_len as u64,
            be.kernel_ms,
        ),
        kernel_ms: be.kernel_ms,
        h2d_copies: be.copies,
        h2d_gbps: h2d,
        h2d_of_peak: match (h2d, cal) {
            (Some(h), Some(c)) if c.peak_gbps > 0.0 => Some(h / c.peak_gbps),
            _ => None,
        },
        pinned_peak: cal,
        receiver_wait_ms: Some(acct.receiver_wait_ns as f64 / 1e6),
        receiver_wait_of_window: (rx_secs > 0.0)
            .then(|| acct.receiver_wait_ns as f64 / 1e9 / rx_secs),
        copy_busy_of_window: (be.copies > 0 && rx_secs > 0.0).then(|| be.copy_ms / 1e3 / rx_secs),
        totals_agree: agree,
        setup_ms,
    }
}

#[cfg(test)]
mod tests;
