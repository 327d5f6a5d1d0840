//! Safe wrapper over the system libdpdk: EAL, mempools, ports, bursts, statistics. All of the
//! crate's DPDK `unsafe` lives in this module.
//!
//! Ownership mirrors DPDK's rules: the EAL outlives every pool and port (each holds an `Arc` of
//! it), mbufs outlive nothing (a [`Burst`] holds an `Arc` of its pool and frees what it still
//! holds on drop), and each queue is driven by exactly one thread (queue handles are neither
//! `Clone` nor `Sync`).

pub mod sys;

use serde::Serialize;
use std::collections::BTreeMap;
use std::ffi::{c_void, CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_int};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// DPDK version the bindings were generated against (pkg-config at build time).
pub const VERSION: &str = env!("DAQTUNE_DPDK_VERSION");

/// A DPDK call that failed, with DPDK's own message for the error number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpdkError {
    pub op: String,
    pub errno: i32,
    pub message: String,
}

impl fmt::Display for DpdkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} (errno {})", self.op, self.message, self.errno)
    }
}

impl std::error::Error for DpdkError {}

fn strerror(errno: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local NUL-terminated string
    // that stays valid until the next call on this thread; it is copied at once.
    unsafe {
        let p = sys::rte_strerror(errno);
        if p.is_null() {
            return format!("error {errno}");
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

fn err(op: &str, rc: i32) -> DpdkError {
    // DPDK returns -errno from ethdev calls and sets rte_errno for EAL/mempool calls.
    let errno = if rc < 0 { -rc } else { rte_errno() };
    DpdkError {
        op: op.to_string(),
        errno,
        message: strerror(errno),
    }
}

fn rte_errno() -> i32 {
    // SAFETY: reads the calling thread's per-lcore errno variable.
    unsafe { sys::dqt_errno() }
}

fn check(op: &str, rc: c_int) -> Result<(), DpdkError> {
    if rc < 0 {
        Err(err(op, rc))
    } else {
        Ok(())
    }
}

static EAL_STARTED: AtomicBool = AtomicBool::new(false);

struct EalInner;

impl Drop for EalInner {
    fn drop(&mut self) {
        // SAFETY: the last handle of the EAL is going away: every pool and port (which hold
        // this Arc) is gone, no lcore job is running (LcoreJob holds it too). DPDK allows one
        // init per process, so the flag stays set.
        unsafe {
            sys::rte_eal_cleanup();
        }
    }
}

/// The initialized Environment Abstraction Layer. One per process.
#[derive(Clone)]
pub struct Eal {
    _inner: Arc<EalInner>,
}

impl Eal {
    /// Runs `rte_eal_init` with `args` (program name first).
    pub fn init(args: &[String]) -> Result<Eal, DpdkError> {
        if EAL_STARTED.swap(true, Ordering::SeqCst) {
            return Err(DpdkError {
                op: "rte_eal_init".into(),
                errno: libc::EALREADY,
                message: "the EAL can be initialized once per process".into(),
            });
        }
        let cargs: Vec<CString> = args
            .iter()
            .map(|a| CString::new(a.as_str()))
            .collect::<Result<_, _>>()
            .map_err(|_| DpdkError {
                op: "rte_eal_init".into(),
                errno: libc::EINVAL,
                message: "argument contains a NUL byte".into(),
            })?;
        // rte_eal_init may permute argv; give it a private array of pointers into `cargs`,
        // which outlive the call (EAL copies what it keeps).
        let mut argv: Vec<*mut c_char> = cargs.iter().map(|c| c.as_ptr() as *mut c_char).collect();
        argv.push(ptr::null_mut());
        // SAFETY: argv holds args.len() valid NUL-terminated strings plus a NULL terminator.
        let rc = unsafe { sys::rte_eal_init(args.len() as c_int, argv.as_mut_ptr()) };
        if rc < 0 {
            return Err(err("rte_eal_init", 0));
        }
        Ok(Eal {
            _inner: Arc::new(EalInner),
        })
    }

    pub fn tsc_hz(&self) -> u64 {
        // SAFETY: EAL is initialized (self exists); the call only reads a calibrated value.
        unsafe { sys::rte_get_tsc_hz() }
    }

    /// The port DPDK named `name` (a vdev name or a PCI address).
    pub fn port_by_name(&self, name: &str) -> Result<Port, DpdkError> {
        let c = CString::new(name).map_err(|_| DpdkError {
            op: "rte_eth_dev_get_port_by_name".into(),
            errno: libc::EINVAL,
            message: "NUL in port name".into(),
        })?;
        let mut id: u16 = 0;
        // SAFETY: c is a valid C string and id a valid out-pointer for the call's duration.
        let rc = unsafe { sys::rte_eth_dev_get_port_by_name(c.as_ptr(), &mut id) };
        check(&format!("no DPDK port named {name}"), rc)?;
        Ok(Port {
            id,
            name: name.to_string(),
            _eal: self.clone(),
        })
    }

    /// Creates a packet-mbuf pool.
    pub fn pktmbuf_pool(
        &self,
        name: &str,
        n: u32,
        cache: u32,
        data_room: u16,
        socket: i32,
    ) -> Result<Mempool, DpdkError> {
        let c = CString::new(name).map_err(|_| DpdkError {
            op: "rte_pktmbuf_pool_create".into(),
            errno: libc::EINVAL,
            message: "NUL in pool name".into(),
        })?;
        // SAFETY: c is valid for the call; the returned pool is owned by the Mempool.
        let mp =
            unsafe { sys::rte_pktmbuf_pool_create(c.as_ptr(), n, cache, 0, data_room, socket) };
        let mp = NonNull::new(mp).ok_or_else(|| err("rte_pktmbuf_pool_create", 0))?;
        Ok(Mempool {
            inner: Arc::new(PoolInner {
                mp,
                _eal: self.clone(),
            }),
        })
    }

    /// Runs `f` on worker lcore `lcore` (which must be idle).
    pub fn launch<F>(&self, lcore: u32, f: F) -> Result<LcoreJob, DpdkError>
    where
        F: FnOnce() -> i32 + Send + 'static,
    {
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        let job = move || {
            // A panic still marks the job done (and must not unwind into C).
            let rc = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(-1);
            flag.store(true, Ordering::Release);
            rc
        };
        let boxed: Box<Box<dyn FnOnce() -> i32 + Send>> = Box::new(Box::new(job));
        let raw = Box::into_raw(boxed);
        // SAFETY: trampoline takes ownership of `raw` exactly once when it runs; if the launch
        // fails it never runs and we take it back below.
        let rc = unsafe { sys::rte_eal_remote_launch(Some(trampoline), raw.cast(), lcore) };
        if rc < 0 {
            // SAFETY: the job was not started, so `raw` is still ours.
            drop(unsafe { Box::from_raw(raw) });
            return Err(err(&format!("launch on lcore {lcore}"), rc));
        }
        Ok(LcoreJob {
            lcore,
            waited: false,
            done,
            _eal: self.clone(),
        })
    }
}

unsafe extern "C" fn trampoline(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the Box leaked by Eal::launch for this one call.
    let f: Box<Box<dyn FnOnce() -> i32 + Send>> = unsafe { Box::from_raw(arg.cast()) };
    // A panic must not unwind into C.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(-1)
}

/// A function running on a worker lcore.
pub struct LcoreJob {
    lcore: u32,
    waited: bool,
    done: Arc<AtomicBool>,
    _eal: Eal,
}

impl LcoreJob {
    /// Waits for the function to return and gives its return value. Sleeps while it runs:
    /// `rte_eal_wait_lcore` spins, and on a small host the main lcore shares a CPU with a data
    /// lcore (a spinning main lcore halved the TX rate in measurements).
    pub fn wait(mut self) -> i32 {
        while !self.done.load(Ordering::Acquire) {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        self.waited = true;
        // SAFETY: the lcore was launched by us and is waited for once.
        unsafe { sys::rte_eal_wait_lcore(self.lcore) }
    }
}

impl Drop for LcoreJob {
    fn drop(&mut self) {
        if !self.waited {
            while !self.done.load(Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            // SAFETY: as in wait(); a job must finish before the EAL may be cleaned up.
            unsafe {
                sys::rte_eal_wait_lcore(self.lcore);
            }
        }
    }
}

struct PoolInner {
    mp: NonNull<sys::rte_mempool>,
    _eal: Eal,
}

// SAFETY: DPDK mempools are multi-producer/multi-consumer safe by default (ring-based).
unsafe impl Send for PoolInner {}
// SAFETY: as above: get/put from several threads is the mempool's normal use.
unsafe impl Sync for PoolInner {}

impl Drop for PoolInner {
    fn drop(&mut self) {
        // SAFETY: every Burst holding mbufs of this pool also holds this Arc, so no mbuf of the
        // pool is held by us; ports using it for RX were stopped (Port::stop runs before the
        // engine drops the pool, and closing a port releases its queue mbufs).
        unsafe { sys::rte_mempool_free(self.mp.as_ptr()) }
    }
}

/// A packet-mbuf pool.
#[derive(Clone)]
pub struct Mempool {
    inner: Arc<PoolInner>,
}

impl Mempool {
    /// Free mbufs in the pool (per-lcore caches included).
    pub fn available(&self) -> u32 {
        // SAFETY: the pool is alive (self holds it).
        unsafe { sys::rte_mempool_avail_count(self.inner.mp.as_ptr()) }
    }
}

/// Up to `N` mbufs owned by one thread: filled by allocation or an RX burst, emptied by a TX
/// burst or [`clear`](Burst::clear). What it still holds is freed on drop.
pub struct Burst<const N: usize> {
    pkts: [*mut sys::rte_mbuf; N],
    len: usize,
    pool: Arc<PoolInner>,
}

// SAFETY: the mbufs are exclusively owned by the Burst; moving it to another thread moves that
// ownership (DPDK mbufs are not tied to a thread).
unsafe impl<const N: usize> Send for Burst<N> {}

impl<const N: usize> Burst<N> {
    pub fn new(pool: &Mempool) -> Self {
        Burst {
            pkts: [ptr::null_mut(); N],
            len: 0,
            pool: Arc::clone(&pool.inner),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Frees every mbuf held.
    pub fn clear(&mut self) {
        if self.len > 0 {
            // SAFETY: pkts[..len] are valid mbufs owned by us; after the call they are not.
            unsafe { sys::rte_pktmbuf_free_bulk(self.pkts.as_mut_ptr(), self.len as u32) };
            self.len = 0;
        }
    }

    /// Fills the burst with `n` fresh mbufs from its pool (all or nothing).
    pub fn alloc(&mut self, n: usize) -> bool {
        self.clear();
        let n = n.min(N);
        // SAFETY: pkts has room for N >= n pointers; the pool is alive (we hold it).
        let rc = unsafe {
            sys::dqt_pktmbuf_alloc_bulk(self.pool.mp.as_ptr(), self.pkts.as_mut_ptr(), n as u32)
        };
        if rc != 0 {
            return false;
        }
        self.len = n;
        true
    }

    /// Appends `len` bytes to mbuf `i` and returns them for writing.
    pub fn append(&mut self, i: usize, len: u16) -> Option<&mut [u8]> {
        if i >= self.len {
            return None;
        }
        // SAFETY: pkts[i] is a valid mbuf we own; append returns NULL when the tailroom is
        // short, else a pointer to `len` writable bytes inside the mbuf's buffer, borrowed
        // mutably from self for the slice's life.
        unsafe {
            let p = sys::dqt_pktmbuf_append(self.pkts[i], len);
            if p.is_null() {
                return None;
            }
            Some(std::slice::from_raw_parts_mut(p.cast::<u8>(), len as usize))
        }
    }

    /// The first segment's data of mbuf `i` (af_packet and the test frames use one segment;
    /// the caller checks `segments`).
    pub fn data(&self, i: usize) -> Option<&[u8]> {
        if i >= self.len {
            return None;
        }
        // SAFETY: pkts[i] is a valid mbuf we own; mtod/data_len describe its first segment's
        // initialized bytes, borrowed immutably from self.
        unsafe {
            let m = self.pkts[i];
            let p = sys::dqt_pktmbuf_mtod(m);
            let n = sys::dqt_pktmbuf_data_len(m);
            Some(std::slice::from_raw_parts(p.cast::<u8>(), n as usize))
        }
    }

    /// Total packet length and segment count of mbuf `i`.
    pub fn shape(&self, i: usize) -> Option<(u32, u16)> {
        if i >= self.len {
            return None;
        }
        // SAFETY: pkts[i] is a valid mbuf we own.
        unsafe {
            let m = self.pkts[i];
            Some((sys::dqt_pktmbuf_pkt_len(m), sys::dqt_pktmbuf_nb_segs(m)))
        }
    }
}

impl<const N: usize> Drop for Burst<N> {
    fn drop(&mut self) {
        self.clear();
    }
}

/// One ethdev port.
pub struct Port {
    id: u16,
    name: String,
    _eal: Eal,
}

/// Per-port counters from `rte_eth_stats_get`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PortStats {
    pub ipackets: u64,
    pub opackets: u64,
    pub ibytes: u64,
    pub obytes: u64,
    /// RX packets dropped by the hardware/PMD because no descriptor was free.
    pub imissed: u64,
    pub ierrors: u64,
    pub oerrors: u64,
    pub rx_nombuf: u64,
}

impl Port {
    pub fn id(&self) -> u16 {
        self.id
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn socket(&self) -> i32 {
        // SAFETY: the port id came from DPDK.
        unsafe { sys::rte_eth_dev_socket_id(self.id) }
    }

    /// Driver name and the largest MTU the port accepts.
    pub fn info(&self) -> Result<(String, u16, u16, u16), DpdkError> {
        let mut info = sys::rte_eth_dev_info::default();
        // SAFETY: info is a valid out-struct of the bindings' layout.
        let rc = unsafe { sys::rte_eth_dev_info_get(self.id, &mut info) };
        check("rte_eth_dev_info_get", rc)?;
        let driver = if info.driver_name.is_null() {
            String::new()
        } else {
            // SAFETY: driver_name points at the driver's static name string.
            unsafe { CStr::from_ptr(info.driver_name) }
                .to_string_lossy()
                .into_owned()
        };
        Ok((
            driver,
            info.max_mtu,
            info.rx_desc_lim.nb_max,
            info.tx_desc_lim.nb_max,
        ))
    }

    /// One RX and one TX queue, no offloads, no RSS.
    pub fn configure(&self) -> Result<(), DpdkError> {
        let mut conf = sys::rte_eth_conf::default();
        conf.rxmode.mq_mode = sys::RTE_ETH_MQ_RX_NONE;
        conf.txmode.mq_mode = sys::RTE_ETH_MQ_TX_NONE;
        // SAFETY: conf is a valid, fully initialized rte_eth_conf read during the call.
        let rc = unsafe { sys::rte_eth_dev_configure(self.id, 1, 1, &conf) };
        check(&format!("configure port {}", self.name), rc)
    }

    pub fn set_mtu(&self, mtu: u16) -> Result<(), DpdkError> {
        // SAFETY: plain call on a valid port id.
        let rc = unsafe { sys::rte_eth_dev_set_mtu(self.id, mtu) };
        check(&format!("set MTU {mtu} on port {}", self.name), rc)
    }

    /// Sets up queue 0 for RX with `desc` descriptors, filled from `pool`. The pool must
    /// outlive the port's started state; the engine stops ports before dropping pools.
    pub fn rx_queue(&self, desc: u16, pool: &Mempool) -> Result<RxQueue, DpdkError> {
        // SAFETY: NULL rx_conf = driver defaults; the pool pointer is valid.
        let rc = unsafe {
            sys::rte_eth_rx_queue_setup(
                self.id,
                0,
                desc,
                self.socket().max(0) as u32,
                ptr::null(),
                pool.inner.mp.as_ptr(),
            )
        };
        check(&format!("RX queue setup on {}", self.name), rc)?;
        Ok(RxQueue {
            port: self.id,
            _pool: Arc::clone(&pool.inner),
            _not_sync: std::marker::PhantomData,
        })
    }

    pub fn tx_queue(&self, desc: u16) -> Result<TxQueue, DpdkError> {
        // SAFETY: NULL tx_conf = driver defaults.
        let rc = unsafe {
            sys::rte_eth_tx_queue_setup(self.id, 0, desc, self.socket().max(0) as u32, ptr::null())
        };
        check(&format!("TX queue setup on {}", self.name), rc)?;
        Ok(TxQueue {
            port: self.id,
            _eal: self._eal.clone(),
            _not_sync: std::marker::PhantomData,
        })
    }

    pub fn promiscuous(&self) -> Result<(), DpdkError> {
        // SAFETY: plain call on a valid port id.
        let rc = unsafe { sys::rte_eth_promiscuous_enable(self.id) };
        check(&format!("promiscuous mode on {}", self.name), rc)
    }

    pub fn mac(&self) -> Result<[u8; 6], DpdkError> {
        let mut a = sys::rte_ether_addr::default();
        // SAFETY: a is a valid out-struct.
        let rc = unsafe { sys::rte_eth_macaddr_get(self.id, &mut a) };
        check("rte_eth_macaddr_get", rc)?;
        Ok(a.addr_bytes)
    }

    pub fn start(&self) -> Result<(), DpdkError> {
        // SAFETY: plain call on a configured port.
        let rc = unsafe { sys::rte_eth_dev_start(self.id) };
        check(&format!("start port {}", self.name), rc)
    }

    pub fn stop(&self) -> Result<(), DpdkError> {
        // SAFETY: plain call; stopping a stopped port is harmless.
        let rc = unsafe { sys::rte_eth_dev_stop(self.id) };
        check(&format!("stop port {}", self.name), rc)
    }

    /// Closes the port (releases its queues and the mbufs they hold).
    pub fn close(&self) -> Result<(), DpdkError> {
        // SAFETY: the port is stopped by the caller; no queue handle is in use (the engine's
        // lcore jobs have returned).
        let rc = unsafe { sys::rte_eth_dev_close(self.id) };
        check(&format!("close port {}", self.name), rc)
    }

    /// Link up? (`None` when the driver cannot tell.)
    pub fn link_up(&self) -> Option<bool> {
        let mut l = sys::rte_eth_link::default();
        // SAFETY: l is a valid out-struct.
        let rc = unsafe { sys::rte_eth_link_get_nowait(self.id, &mut l) };
        (rc == 0).then(|| l.link_status() != 0)
    }

    /// Link speed in Mb/s, `None` when the link is down or the driver has no figure.
    pub fn link_speed_mbps(&self) -> Option<u64> {
        let mut l = sys::rte_eth_link::default();
        // SAFETY: l is a valid out-struct.
        let rc = unsafe { sys::rte_eth_link_get_nowait(self.id, &mut l) };
        // RTE_ETH_SPEED_NUM_UNKNOWN is u32::MAX; 0 is "none".
        (rc == 0 && l.link_status() != 0 && l.link_speed > 0 && l.link_speed != u32::MAX)
            .then_some(u64::from(l.link_speed))
    }

    pub fn stats(&self) -> Result<PortStats, DpdkError> {
        let mut s = sys::rte_eth_stats::default();
        // SAFETY: s is a valid out-struct.
        let rc = unsafe { sys::rte_eth_stats_get(self.id, &mut s) };
        check("rte_eth_stats_get", rc)?;
        Ok(PortStats {
            ipackets: s.ipackets,
            opackets: s.opackets,
            ibytes: s.ibytes,
            obytes: s.obytes,
            imissed: s.imissed,
            ierrors: s.ierrors,
            oerrors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
        })
    }

    pub fn reset_stats(&self) {
        // SAFETY: plain calls; failures (unsupported by the driver) are harmless.
        unsafe {
            sys::rte_eth_stats_reset(self.id);
            sys::rte_eth_xstats_reset(self.id);
        }
    }

    /// Extended statistics by name (the driver's `rx_phy_*`, `rx_discards_phy`, ... on mlx5).
    pub fn xstats(&self) -> Result<BTreeMap<String, u64>, DpdkError> {
        // SAFETY: a NULL array with size 0 asks for the count only.
        let n = unsafe { sys::rte_eth_xstats_get_names(self.id, ptr::null_mut(), 0) };
        check("rte_eth_xstats_get_names", n)?;
        let n = n as usize;
        let mut names = vec![sys::rte_eth_xstat_name::default(); n];
        let mut vals = vec![sys::rte_eth_xstat::default(); n];
        // SAFETY: both arrays have room for n entries, as passed.
        let got_names =
            unsafe { sys::rte_eth_xstats_get_names(self.id, names.as_mut_ptr(), n as u32) };
        check("rte_eth_xstats_get_names", got_names)?;
        // SAFETY: as above.
        let got = unsafe { sys::rte_eth_xstats_get(self.id, vals.as_mut_ptr(), n as u32) };
        check("rte_eth_xstats_get", got)?;
        let mut out = BTreeMap::new();
        for v in vals.iter().take((got as usize).min(n)) {
            let Some(name) = names.get(v.id as usize) else {
                continue;
            };
            // SAFETY: name is a fixed char array DPDK NUL-terminates (snprintf); the slice
            // reinterpretation keeps its length.
            let bytes: &[u8] = unsafe {
                std::slice::from_raw_parts(name.name.as_ptr().cast::<u8>(), name.name.len())
            };
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            out.insert(String::from_utf8_lossy(&bytes[..end]).into_owned(), v.value);
        }
        Ok(out)
    }
}

/// RX queue 0 of a port; one thread drives it.
pub struct RxQueue {
    port: u16,
    _pool: Arc<PoolInner>,
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

impl RxQueue {
    /// Receives up to N packets into `b` (which is cleared first).
    #[inline]
    pub fn rx<const N: usize>(&mut self, b: &mut Burst<N>) -> usize {
        b.clear();
        // SAFETY: b.pkts has room for N pointers; received mbufs become owned by `b`.
        let n = unsafe { sys::dqt_rx_burst(self.port, 0, b.pkts.as_mut_ptr(), N as u16) };
        b.len = n as usize;
        b.len
    }
}

/// TX queue 0 of a port; one thread drives it.
pub struct TxQueue {
    port: u16,
    _eal: Eal,
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

impl TxQueue {
    /// Sends what `b` holds; sent mbufs leave `b` (the driver frees them), unsent ones move to
    /// the front of `b` for a retry.
    #[inline]
    pub fn tx<const N: usize>(&mut self, b: &mut Burst<N>) -> usize {
        if b.len == 0 {
            return 0;
        }
        // SAFETY: b.pkts[..len] are valid mbufs we own; the driver takes the first `sent`.
        let sent =
            unsafe { sys::dqt_tx_burst(self.port, 0, b.pkts.as_mut_ptr(), b.len as u16) } as usize;
        let left = b.len - sent;
        b.pkts.copy_within(sent..b.len, 0);
        b.len = left;
        sent
    }
}

/// The TSC, as DPDK reads it (for pacing on the lcores).
#[inline]
pub fn rdtsc() -> u64 {
    // SAFETY: reads the time-stamp counter; no memory involved.
    unsafe { sys::dqt_rdtsc() }
}

/// Spin-wait hint.
#[inline]
pub fn pause() {
    // SAFETY: a CPU pause instruction.
    unsafe { sys::dqt_pause() }
}
