//! What a configuration costs in hugepages and GPU BAR1, by DAQIRI's own accounting.
//!
//! The constants are DAQIRI's (NVIDIA/daqiri, src/engine.h, src/engine_dpdk.cpp,
//! src/engines/*): `docs/checks/app.memory.md` lists each with its source so a change in
//! DAQIRI can be followed here.

use super::{AppConfig, Engine, MemKind, Region};
use std::collections::BTreeMap;

pub const MIB: u64 = 1024 * 1024;
/// DPDK's mbuf headroom, added to every buffer by the DPDK engine (`adj_size_ = buf_size_ +
/// RTE_PKTMBUF_HEADROOM`).
pub const RTE_PKTMBUF_HEADROOM: u64 = 128;
/// Regions are allocated in multiples of this (`align_ceil(adj_size * num_bufs, GPU_PAGE_SIZE)`).
pub const GPU_PAGE_SIZE: u64 = 64 * 1024;
/// `DPDK_PER_POOL_HUGEPAGE_OVERHEAD`: mbuf headers, mempool ring, per-lcore caches.
pub const PER_POOL_OVERHEAD: u64 = 32 * MIB;
/// `DPDK_EAL_FIXED_OVERHEAD`: EAL services, memzones, ethdev tables.
pub const EAL_FIXED_OVERHEAD: u64 = 64 * MIB;
/// The dummy region the DPDK engine injects for an interface without RX or without TX queues.
pub const DUMMY_NUM_BUFS: u64 = 32768;
/// `JUMBOFRAME_SIZE` of the DPDK engine: the largest frame (FCS included) a port is set up for.
pub const JUMBO_FRAME: u64 = 9100;
/// Default NIC descriptor ring of the DPDK engine (`default_num_rx_desc`/`tx_desc`).
pub const NIC_RING: u64 = 8192;
/// Largest UDP payload over IPv4 (65535 - 20 IP - 8 UDP), DAQIRI's `kMaxUdpPayloadBytes`.
pub const MAX_UDP_PAYLOAD: u64 = 65507;
/// Ethernet header and FCS, which the DPDK engine subtracts from the frame to get the MTU.
pub const ETH_HDR: u64 = 14;
pub const ETH_FCS: u64 = 4;

fn align_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a).saturating_mul(a)
}

/// The size DAQIRI really gives each buffer on an engine.
pub fn adj_size(engine: Engine, kind: MemKind, buf_size: u64) -> u64 {
    match engine {
        Engine::Dpdk => buf_size.saturating_add(RTE_PKTMBUF_HEADROOM),
        Engine::Ibverbs => buf_size.checked_next_power_of_two().unwrap_or(u64::MAX),
        Engine::Rdma => {
            // max(alignment of the kind, GPU page)
            let a = if kind == MemKind::Device { 256 } else { 128 };
            align_up(buf_size, a.max(GPU_PAGE_SIZE))
        }
        Engine::Socket => buf_size,
    }
}

/// Whether a queue of the configuration uses the region.
pub fn queue_backed(app: &AppConfig, r: &Region) -> bool {
    app.interfaces
        .iter()
        .flat_map(|i| &i.queues)
        .any(|q| q.regions.contains(&r.name))
}

/// num_bufs after the DPDK engine's bump: a queue-backed region below 1.5 x the NIC ring
/// deadlocks the worker, so DAQIRI raises it to 3 x the ring (24576) and logs a warning.
pub fn effective_num_bufs(app: &AppConfig, r: &Region) -> Option<u64> {
    let n = r.num_bufs()?;
    if app.engine == Engine::Dpdk && queue_backed(app, r) && n < NIC_RING * 3 / 2 {
        return Some(NIC_RING * 3);
    }
    Some(n)
}

/// Bytes DAQIRI allocates for a region.
pub fn region_bytes(app: &AppConfig, r: &Region) -> Option<u64> {
    let kind = r.kind()?;
    let n = effective_num_bufs(app, r)?;
    let adj = adj_size(app.engine, kind, r.buf_size()?);
    Some(align_up(adj.saturating_mul(n), GPU_PAGE_SIZE))
}

/// DAQIRI's hugepage requirement, as its DPDK preflight computes it (and, for the other
/// engines, the `kind: huge` regions alone: they map hugepages with MAP_HUGETLB and add no
/// EAL).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HugeEstimate {
    pub huge_regions: u64,
    pub huge_bytes: u64,
    /// Pools that carry the per-pool overhead (every region on DPDK, dummies included).
    pub pools: u64,
    pub pool_overhead: u64,
    pub dummy_queues: u64,
    pub dummy_bytes: u64,
    pub eal_bytes: u64,
    pub total: u64,
    /// Hugepage bytes the regions need on each NUMA node (their `affinity`), per-pool
    /// overhead of huge regions included.
    pub per_node: BTreeMap<u32, u64>,
}

impl HugeEstimate {
    pub fn breakdown(&self) -> String {
        let mib = |b: u64| b.div_ceil(MIB);
        if self.eal_bytes == 0 {
            return format!(
                "{} kind: huge region(s) = {} MiB",
                self.huge_regions,
                mib(self.huge_bytes)
            );
        }
        format!(
            "{} kind: huge region(s) {} MiB + {} pool(s) x 32 MiB overhead + {} dummy queue(s) {} MiB + EAL 64 MiB = {} MiB",
            self.huge_regions,
            mib(self.huge_bytes),
            self.pools,
            self.dummy_queues,
            mib(self.dummy_bytes),
            mib(self.total)
        )
    }
}

pub fn hugepages(app: &AppConfig) -> HugeEstimate {
    let mut e = HugeEstimate::default();
    let dpdk = app.engine == Engine::Dpdk;
    for r in &app.regions {
        let Some(kind) = r.kind() else { continue };
        if dpdk {
            e.pools += 1;
        }
        if kind != MemKind::Huge {
            continue;
        }
        let Some(bytes) = region_bytes(app, r) else {
            continue;
        };
        e.huge_regions += 1;
        e.huge_bytes = e.huge_bytes.saturating_add(bytes);
        let node = r
            .affinity()
            .and_then(|a| u32::try_from(a).ok())
            .unwrap_or(0);
        let over = if dpdk { PER_POOL_OVERHEAD } else { 0 };
        let slot: &mut u64 = e.per_node.entry(node).or_insert(0);
        *slot = slot.saturating_add(bytes.saturating_add(over));
    }
    if dpdk {
        for i in &app.interfaces {
            for dir in [super::Dir::Rx, super::Dir::Tx] {
                if i.queues(dir).next().is_none() {
                    e.dummy_queues += 1;
                    e.pools += 1;
                    e.dummy_bytes += DUMMY_NUM_BUFS * JUMBO_FRAME;
                }
            }
        }
        e.pool_overhead = e.pools * PER_POOL_OVERHEAD;
        e.eal_bytes = EAL_FIXED_OVERHEAD;
    }
    e.total = e
        .huge_bytes
        .saturating_add(e.pool_overhead)
        .saturating_add(e.dummy_bytes)
        .saturating_add(e.eal_bytes);
    e
}

/// Device-memory bytes registered per GPU id (`affinity` of `kind: device` regions).
pub fn device_bytes(app: &AppConfig) -> BTreeMap<i64, u64> {
    let mut out = BTreeMap::new();
    for r in &app.regions {
        if r.kind() != Some(MemKind::Device) {
            continue;
        }
        let (Some(gpu), Some(bytes)) = (r.affinity(), region_bytes(app, r)) else {
            continue;
        };
        let slot: &mut u64 = out.entry(gpu).or_insert(0);
        *slot = slot.saturating_add(bytes);
    }
    out
}

/// The BAR1 a GPU needs to register `bytes`: DAQIRI's registrations should stay under 80 %
/// of the aperture (the driver and other mappings use the rest).
pub fn bar1_needed(bytes: u64) -> u64 {
    bytes.saturating_mul(5).div_ceil(4)
}
