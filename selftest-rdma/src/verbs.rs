//! Safe wrapper over the libibverbs calls the engine needs: device list, context, protection
//! domain, memory region, completion queue, RC queue pair and its INIT -> RTR -> RTS
//! transitions, GID table. Every `unsafe` block of the RDMA path lives here.
//!
//! Ownership follows the verbs object tree with `Arc`s (a QP keeps its PD and CQ alive, a PD its
//! context), so objects are destroyed children first whatever order Rust drops them in.

use crate::buffer::{RdmaBuffer, Registration};
use crate::error::RdmaError;
use crate::ffi;
use crate::gid::GidInfo;
use std::ffi::CStr;
use std::io;
use std::ptr;
use std::sync::Arc;

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

/// Verbs that return an errno value (not -1 + errno).
fn rc_err(rc: i32) -> io::Error {
    if rc > 0 {
        io::Error::from_raw_os_error(rc)
    } else if rc < 0 {
        io::Error::from_raw_os_error(-rc)
    } else {
        io::Error::other("failed")
    }
}

/// The RDMA devices the kernel exposes to user space.
pub struct DeviceList {
    list: *mut *mut ffi::ibv_device,
    len: usize,
}

impl DeviceList {
    /// `Unavailable` (a skip) when the kernel has no RDMA support or no device.
    pub fn get() -> Result<DeviceList, RdmaError> {
        let mut n: i32 = 0;
        // SAFETY: `n` is a valid out-pointer; the returned array is owned by us until
        // ibv_free_device_list (Drop).
        let list = unsafe { ffi::ibv_get_device_list(&mut n) };
        if list.is_null() {
            let e = last_err();
            return Err(match e.raw_os_error() {
                Some(libc::ENOSYS) => RdmaError::Unavailable(
                    "no kernel RDMA support (ibv_get_device_list: ENOSYS; is ib_uverbs loaded?)"
                        .into(),
                ),
                _ => RdmaError::verbs("ibv_get_device_list", e),
            });
        }
        let list = DeviceList {
            list,
            len: usize::try_from(n).unwrap_or(0),
        };
        Ok(list)
    }

    pub fn names(&self) -> Vec<String> {
        (0..self.len).filter_map(|i| self.name_at(i)).collect()
    }

    fn name_at(&self, i: usize) -> Option<String> {
        if i >= self.len {
            return None;
        }
        // SAFETY: i < len, so the element lies inside the NULL-terminated array returned by
        // ibv_get_device_list, which lives as long as `self`.
        let dev = unsafe { *self.list.add(i) };
        if dev.is_null() {
            return None;
        }
        // SAFETY: `dev` is a device from the list; ibv_get_device_name returns a pointer to a
        // NUL-terminated name inside it (or NULL).
        let name = unsafe { ffi::ibv_get_device_name(dev) };
        if name.is_null() {
            return None;
        }
        // SAFETY: non-NULL, NUL-terminated, valid while the list is.
        Some(
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned(),
        )
    }

    /// Opens the device called `name`.
    pub fn open(&self, name: &str) -> Result<Arc<Context>, RdmaError> {
        let idx = (0..self.len)
            .find(|&i| self.name_at(i).as_deref() == Some(name))
            .ok_or_else(|| {
                RdmaError::Invalid(format!(
                    "no RDMA device {name:?} (have: {})",
                    self.names().join(", ")
                ))
            })?;
        // SAFETY: idx < len (found above).
        let dev = unsafe { *self.list.add(idx) };
        // SAFETY: `dev` comes from the live device list; the context stays valid after the list
        // is freed (libibverbs documents this).
        let ctx = unsafe { ffi::ibv_open_device(dev) };
        if ctx.is_null() {
            return Err(RdmaError::verbs(
                format!("ibv_open_device({name})"),
                last_err(),
            ));
        }
        Ok(Arc::new(Context {
            ctx,
            name: name.to_string(),
        }))
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: `list` came from ibv_get_device_list and is freed exactly once.
        unsafe { ffi::ibv_free_device_list(self.list) }
    }
}

/// An open device.
pub struct Context {
    ctx: *mut ffi::ibv_context,
    name: String,
}

// SAFETY: libibverbs contexts and the objects created from them are thread safe (rdma-core
// documents the verbs API as thread safe); we never hand out the raw pointer.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: every child object holds an Arc<Context>, so none is alive any more.
        unsafe { ffi::ibv_close_device(self.ctx) };
    }
}

/// What the engine needs to know about a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortInfo {
    pub active: bool,
    /// ibv_mtu enum value (1 = 256 ... 5 = 4096).
    pub active_mtu: u32,
    pub gid_table_len: u32,
    pub ethernet: bool,
    pub lid: u16,
}

impl Context {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn query_port(&self, port: u8) -> Result<PortInfo, RdmaError> {
        let mut attr = ffi::ibv_port_attr::default();
        // SAFETY: `ctx` is open; `attr` is a valid, writable ibv_port_attr of the size the
        // inline wrapper passes on.
        let rc = unsafe { ffi::___ibv_query_port(self.ctx, port, &mut attr) };
        if rc != 0 {
            return Err(RdmaError::verbs(
                format!("ibv_query_port({}, {port})", self.name),
                rc_err(rc),
            ));
        }
        Ok(PortInfo {
            active: attr.state == ffi::ibv_port_state_IBV_PORT_ACTIVE,
            active_mtu: attr.active_mtu,
            gid_table_len: u32::try_from(attr.gid_tbl_len).unwrap_or(0),
            ethernet: u32::from(attr.link_layer) == ffi::IBV_LINK_LAYER_ETHERNET,
            lid: attr.lid,
        })
    }

    /// The populated entries of the port's GID table.
    pub fn gid_table(&self, port: u8, len: u32) -> Vec<GidInfo> {
        let mut out = Vec::new();
        for index in 0..len {
            let mut e = ffi::ibv_gid_entry::default();
            // SAFETY: `ctx` is open, `e` is a writable ibv_gid_entry; empty slots return an
            // error (ENODATA) and leave nothing for us to free.
            let rc = unsafe { ffi::ibv_query_gid_ex(self.ctx, u32::from(port), index, &mut e, 0) };
            if rc != 0 {
                continue;
            }
            // SAFETY: both union variants are plain bytes; `raw` covers all 16.
            let gid = unsafe { e.gid.raw };
            if gid == [0u8; 16] {
                continue;
            }
            out.push(GidInfo {
                index: e.gid_index,
                gid,
                gid_type: e.gid_type,
                ndev_ifindex: e.ndev_ifindex,
            });
        }
        out
    }

    pub fn alloc_pd(self: &Arc<Self>) -> Result<Arc<Pd>, RdmaError> {
        // SAFETY: `ctx` is open.
        let pd = unsafe { ffi::ibv_alloc_pd(self.ctx) };
        if pd.is_null() {
            return Err(RdmaError::verbs("ibv_alloc_pd", last_err()));
        }
        Ok(Arc::new(Pd {
            pd,
            ctx: Arc::clone(self),
        }))
    }

    pub fn create_cq(self: &Arc<Self>, depth: u32) -> Result<Arc<Cq>, RdmaError> {
        let cqe = i32::try_from(depth).map_err(|_| RdmaError::Invalid("CQ depth".into()))?;
        // SAFETY: `ctx` is open; no completion channel and no user context.
        let cq = unsafe { ffi::ibv_create_cq(self.ctx, cqe, ptr::null_mut(), ptr::null_mut(), 0) };
        if cq.is_null() {
            return Err(RdmaError::verbs(
                format!("ibv_create_cq({depth})"),
                last_err(),
            ));
        }
        Ok(Arc::new(Cq {
            cq,
            _ctx: Arc::clone(self),
        }))
    }
}

/// A protection domain.
pub struct Pd {
    pd: *mut ffi::ibv_pd,
    ctx: Arc<Context>,
}

// SAFETY: see Context.
unsafe impl Send for Pd {}
// SAFETY: see Context.
unsafe impl Sync for Pd {}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: MRs and QPs hold an Arc<Pd>, so none is alive any more.
        unsafe { ffi::ibv_dealloc_pd(self.pd) };
    }
}

pub const ACCESS_LOCAL_WRITE: u32 = ffi::ibv_access_flags_IBV_ACCESS_LOCAL_WRITE;
pub const ACCESS_REMOTE_WRITE: u32 = ffi::ibv_access_flags_IBV_ACCESS_REMOTE_WRITE;
pub const ACCESS_REMOTE_READ: u32 = ffi::ibv_access_flags_IBV_ACCESS_REMOTE_READ;

impl Pd {
    /// Registers `buf` (which the region then owns) with the given access flags.
    pub fn register(
        self: &Arc<Self>,
        mut buf: Box<dyn RdmaBuffer>,
        access: u32,
    ) -> Result<Mr, RdmaError> {
        let access_c = i32::try_from(access).map_err(|_| RdmaError::Invalid("access".into()))?;
        let mr = match buf.registration() {
            Registration::Host { addr, len } | Registration::PeerMem { addr, len } => {
                // SAFETY: `addr..addr+len` is memory owned by `buf`, which the Mr keeps alive
                // until after ibv_dereg_mr (Drop), so the NIC never reaches freed memory. For
                // PeerMem the address is a CUDA device address that nvidia-peermem resolves
                // (without it the kernel refuses the registration; nothing is dereferenced here).
                unsafe { ffi::ibv_reg_mr(self.pd, addr.cast(), len, access_c) }
            }
            Registration::DmaBuf {
                fd,
                offset,
                len,
                iova,
            } => {
                // SAFETY: the dma-buf fd is owned by `buf`, which outlives the registration.
                unsafe { ffi::ibv_reg_dmabuf_mr(self.pd, offset, len, iova, fd, access_c) }
            }
        };
        if mr.is_null() {
            let hint = match buf.registration() {
                Registration::PeerMem { .. } => {
                    " (GPU memory through ibv_reg_mr needs the nvidia_peermem module; the dma-buf \
                     path needs the open GPU kernel modules)"
                }
                Registration::DmaBuf { .. } => {
                    " (the RDMA driver may not support dma-buf regions: soft-RoCE does not)"
                }
                Registration::Host { .. } => "",
            };
            return Err(RdmaError::verbs(
                format!(
                    "ibv_reg_mr({} bytes of {} memory){hint}",
                    buf.len(),
                    buf.kind()
                ),
                last_err(),
            ));
        }
        // SAFETY: `mr` is a valid region returned just now.
        let (lkey, rkey, addr) = unsafe { ((*mr).lkey, (*mr).rkey, (*mr).addr as u64) };
        Ok(Mr {
            mr,
            lkey,
            rkey,
            addr,
            buf,
            _pd: Arc::clone(self),
        })
    }

    pub fn create_rc_qp(
        self: &Arc<Self>,
        cq: &Arc<Cq>,
        max_send_wr: u32,
        max_recv_wr: u32,
    ) -> Result<Qp, RdmaError> {
        let mut init = ffi::ibv_qp_init_attr {
            send_cq: cq.cq,
            recv_cq: cq.cq,
            cap: ffi::ibv_qp_cap {
                max_send_wr,
                max_recv_wr,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: ffi::ibv_qp_type_IBV_QPT_RC,
            sq_sig_all: 0,
            ..Default::default()
        };
        // SAFETY: `pd` and `cq` are live objects of the same context; `init` is fully
        // initialised.
        let qp = unsafe { ffi::ibv_create_qp(self.pd, &mut init) };
        if qp.is_null() {
            return Err(RdmaError::verbs(
                format!(
                    "ibv_create_qp(RC, {max_send_wr} send / {max_recv_wr} recv) on {}",
                    self.ctx.name
                ),
                last_err(),
            ));
        }
        // SAFETY: valid QP returned just now.
        let qp_num = unsafe { (*qp).qp_num };
        Ok(Qp {
            qp,
            qp_num,
            _pd: Arc::clone(self),
            _cq: Arc::clone(cq),
        })
    }
}

/// A registered memory region and the buffer it covers.
pub struct Mr {
    mr: *mut ffi::ibv_mr,
    lkey: u32,
    rkey: u32,
    addr: u64,
    buf: Box<dyn RdmaBuffer>,
    _pd: Arc<Pd>,
}

// SAFETY: see Context; the buffer is Send.
unsafe impl Send for Mr {}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: deregistered exactly once, before `buf` (a later field) is dropped.
        unsafe { ffi::ibv_dereg_mr(self.mr) };
    }
}

impl Mr {
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
    /// The address the peer targets with RDMA WRITE (the registration's iova).
    pub fn addr(&self) -> u64 {
        self.addr
    }
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    pub fn kind(&self) -> &'static str {
        self.buf.kind()
    }
    pub fn describe(&self) -> String {
        self.buf.describe()
    }
    pub fn read(&mut self, off: usize, len: usize) -> Option<&[u8]> {
        self.buf.read(off, len)
    }
    pub fn write(&mut self, off: usize, data: &[u8]) -> bool {
        self.buf.write(off, data)
    }

    fn sge(&self, off: usize, len: usize) -> Result<ffi::ibv_sge, RdmaError> {
        let end = off.checked_add(len);
        if end.is_none_or(|e| e > self.buf.len()) {
            return Err(RdmaError::Invalid(format!(
                "range {off}+{len} outside a {}-byte region",
                self.buf.len()
            )));
        }
        Ok(ffi::ibv_sge {
            addr: self.addr + off as u64,
            length: u32::try_from(len).map_err(|_| RdmaError::Invalid("sge length".into()))?,
            lkey: self.lkey,
        })
    }
}

/// A completion queue.
pub struct Cq {
    cq: *mut ffi::ibv_cq,
    _ctx: Arc<Context>,
}

// SAFETY: see Context.
unsafe impl Send for Cq {}
// SAFETY: see Context; ibv_poll_cq takes the CQ's lock.
unsafe impl Sync for Cq {}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: QPs hold an Arc<Cq>, so no QP uses it any more.
        unsafe { ffi::ibv_destroy_cq(self.cq) };
    }
}

/// A work completion, copied out of the CQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Completion {
    pub wr_id: u64,
    /// ibv_wc_status (0 = success).
    pub status: u32,
    /// ibv_wc_opcode.
    pub opcode: u32,
    pub byte_len: u32,
    /// Immediate data in host order, when the message carried one.
    pub imm: Option<u32>,
    pub vendor_err: u32,
}

pub const WC_SUCCESS: u32 = ffi::ibv_wc_status_IBV_WC_SUCCESS;
pub const WC_SEND: u32 = ffi::ibv_wc_opcode_IBV_WC_SEND;
pub const WC_RDMA_WRITE: u32 = ffi::ibv_wc_opcode_IBV_WC_RDMA_WRITE;
pub const WC_RECV: u32 = ffi::ibv_wc_opcode_IBV_WC_RECV;
pub const WC_RECV_RDMA_WITH_IMM: u32 = ffi::ibv_wc_opcode_IBV_WC_RECV_RDMA_WITH_IMM;

/// libibverbs' name of a completion status (`retry counter exceeded`, ...).
pub fn wc_status_str(status: u32) -> String {
    // SAFETY: ibv_wc_status_str accepts any value and returns a static string.
    let s = unsafe { ffi::ibv_wc_status_str(status) };
    if s.is_null() {
        return format!("status {status}");
    }
    // SAFETY: static NUL-terminated string.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

const POLL_BATCH: usize = 32;

impl Cq {
    /// Appends up to 32 completions to `out`; returns how many.
    pub fn poll(&self, out: &mut Vec<Completion>) -> Result<usize, RdmaError> {
        let mut wcs = [ffi::ibv_wc::default(); POLL_BATCH];
        // SAFETY: `wcs` has room for POLL_BATCH entries; the CQ is live.
        let n = unsafe { ffi::ibv_poll_cq(self.cq, POLL_BATCH as i32, wcs.as_mut_ptr()) };
        if n < 0 {
            return Err(RdmaError::verbs("ibv_poll_cq", rc_err(n)));
        }
        let n = n as usize;
        for wc in &wcs[..n] {
            let imm = if wc.wc_flags & ffi::ibv_wc_flags_IBV_WC_WITH_IMM != 0 {
                // SAFETY: with IBV_WC_WITH_IMM the union holds imm_data (network order).
                Some(u32::from_be(unsafe { wc.__bindgen_anon_1.imm_data }))
            } else {
                None
            };
            out.push(Completion {
                wr_id: wc.wr_id,
                status: wc.status,
                opcode: wc.opcode,
                byte_len: wc.byte_len,
                imm,
                vendor_err: wc.vendor_err,
            });
        }
        Ok(n)
    }
}

/// What to post on the send queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    Send,
    SendImm(u32),
    /// RDMA WRITE with immediate: the data lands at `remote_addr`, the peer gets a completion
    /// carrying `imm`.
    WriteImm {
        remote_addr: u64,
        rkey: u32,
        imm: u32,
    },
    Write {
        remote_addr: u64,
        rkey: u32,
    },
}

/// Parameters of the RTR transition (the peer's side of the connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtrParams {
    pub port: u8,
    /// ibv_mtu enum value.
    pub path_mtu: u32,
    pub dest_qp_num: u32,
    pub rq_psn: u32,
    /// Peer GID: the address handle is built from it, so traffic goes out of the port.
    pub dgid: [u8; 16],
    pub sgid_index: u8,
    pub hop_limit: u8,
    /// Used on InfiniBand links, where routing is by LID.
    pub dlid: u16,
}

/// An RC queue pair.
pub struct Qp {
    qp: *mut ffi::ibv_qp,
    qp_num: u32,
    _pd: Arc<Pd>,
    _cq: Arc<Cq>,
}

// SAFETY: see Context; posting is serialised by the provider's queue locks.
unsafe impl Send for Qp {}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: destroyed once; the Arcs keep PD and CQ alive until after this.
        unsafe { ffi::ibv_destroy_qp(self.qp) };
    }
}

impl Qp {
    pub fn qp_num(&self) -> u32 {
        self.qp_num
    }

    fn modify(&self, attr: &mut ffi::ibv_qp_attr, mask: u32, what: &str) -> Result<(), RdmaError> {
        // SAFETY: `attr` is initialised for every field `mask` names; the QP is live.
        let rc = unsafe { ffi::ibv_modify_qp(self.qp, attr, mask as i32) };
        if rc != 0 {
            return Err(RdmaError::verbs(
                format!("ibv_modify_qp({what}) on QP {}", self.qp_num),
                rc_err(rc),
            ));
        }
        Ok(())
    }

    pub fn to_init(&self, port: u8, access: u32) -> Result<(), RdmaError> {
        let mut a = ffi::ibv_qp_attr {
            qp_state: ffi::ibv_qp_state_IBV_QPS_INIT,
            pkey_index: 0,
            port_num: port,
            qp_access_flags: access,
            ..Default::default()
        };
        self.modify(
            &mut a,
            ffi::ibv_qp_attr_mask_IBV_QP_STATE
                | ffi::ibv_qp_attr_mask_IBV_QP_PKEY_INDEX
                | ffi::ibv_qp_attr_mask_IBV_QP_PORT
                | ffi::ibv_qp_attr_mask_IBV_QP_ACCESS_FLAGS,
            "INIT",
        )
    }

    pub fn to_rtr(&self, p: &RtrParams, global: bool) -> Result<(), RdmaError> {
        let mut a = ffi::ibv_qp_attr {
            qp_state: ffi::ibv_qp_state_IBV_QPS_RTR,
            path_mtu: p.path_mtu,
            dest_qp_num: p.dest_qp_num,
            rq_psn: p.rq_psn,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            ..Default::default()
        };
        a.ah_attr.port_num = p.port;
        a.ah_attr.dlid = p.dlid;
        a.ah_attr.sl = 0;
        if global {
            a.ah_attr.is_global = 1;
            a.ah_attr.grh.dgid.raw = p.dgid;
            a.ah_attr.grh.sgid_index = p.sgid_index;
            a.ah_attr.grh.hop_limit = p.hop_limit;
            a.ah_attr.grh.traffic_class = 0;
            a.ah_attr.grh.flow_label = 0;
        }
        self.modify(
            &mut a,
            ffi::ibv_qp_attr_mask_IBV_QP_STATE
                | ffi::ibv_qp_attr_mask_IBV_QP_AV
                | ffi::ibv_qp_attr_mask_IBV_QP_PATH_MTU
                | ffi::ibv_qp_attr_mask_IBV_QP_DEST_QPN
                | ffi::ibv_qp_attr_mask_IBV_QP_RQ_PSN
                | ffi::ibv_qp_attr_mask_IBV_QP_MAX_DEST_RD_ATOMIC
                | ffi::ibv_qp_attr_mask_IBV_QP_MIN_RNR_TIMER,
            "RTR",
        )
    }

    /// `timeout` is 4.096 us * 2^timeout per retry; `retry_cnt` and `rnr_retry` up to 7
    /// (7 = retry receiver-not-ready forever).
    pub fn to_rts(
        &self,
        sq_psn: u32,
        timeout: u8,
        retry_cnt: u8,
        rnr_retry: u8,
    ) -> Result<(), RdmaError> {
        let mut a = ffi::ibv_qp_attr {
            qp_state: ffi::ibv_qp_state_IBV_QPS_RTS,
            sq_psn,
            timeout,
            retry_cnt,
            rnr_retry,
            max_rd_atomic: 1,
            ..Default::default()
        };
        self.modify(
            &mut a,
            ffi::ibv_qp_attr_mask_IBV_QP_STATE
                | ffi::ibv_qp_attr_mask_IBV_QP_SQ_PSN
                | ffi::ibv_qp_attr_mask_IBV_QP_TIMEOUT
                | ffi::ibv_qp_attr_mask_IBV_QP_RETRY_CNT
                | ffi::ibv_qp_attr_mask_IBV_QP_RNR_RETRY
                | ffi::ibv_qp_attr_mask_IBV_QP_MAX_QP_RD_ATOMIC,
            "RTS",
        )
    }

    /// Posts one work request; `local` is `(region, offset, len)` or `None` for a message
    /// without data (immediate only).
    pub fn post_send(
        &self,
        wr_id: u64,
        op: SendOp,
        local: Option<(&Mr, usize, usize)>,
        signaled: bool,
    ) -> Result<(), RdmaError> {
        let mut sge = match local {
            Some((mr, off, len)) => Some(mr.sge(off, len)?),
            None => None,
        };
        let mut wr = ffi::ibv_send_wr {
            wr_id,
            next: ptr::null_mut(),
            num_sge: i32::from(sge.is_some()),
            sg_list: sge
                .as_mut()
                .map_or(ptr::null_mut(), |s| s as *mut ffi::ibv_sge),
            send_flags: if signaled {
                ffi::ibv_send_flags_IBV_SEND_SIGNALED
            } else {
                0
            },
            ..Default::default()
        };
        match op {
            SendOp::Send => wr.opcode = ffi::ibv_wr_opcode_IBV_WR_SEND,
            SendOp::SendImm(imm) => {
                wr.opcode = ffi::ibv_wr_opcode_IBV_WR_SEND_WITH_IMM;
                wr.__bindgen_anon_1.imm_data = imm.to_be();
            }
            SendOp::WriteImm {
                remote_addr,
                rkey,
                imm,
            } => {
                wr.opcode = ffi::ibv_wr_opcode_IBV_WR_RDMA_WRITE_WITH_IMM;
                wr.__bindgen_anon_1.imm_data = imm.to_be();
                wr.wr.rdma = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr, rkey };
            }
            SendOp::Write { remote_addr, rkey } => {
                wr.opcode = ffi::ibv_wr_opcode_IBV_WR_RDMA_WRITE;
                wr.wr.rdma = ffi::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr, rkey };
            }
        }
        let mut bad: *mut ffi::ibv_send_wr = ptr::null_mut();
        // SAFETY: `wr` and `sge` live across the call (the provider copies them into the send
        // queue before returning); the sge lies inside a registered region (checked in `sge`).
        let rc = unsafe { ffi::ibv_post_send(self.qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(RdmaError::verbs("ibv_post_send", rc_err(rc)));
        }
        Ok(())
    }

    /// Posts one receive into `(region, offset, len)`, or without a buffer (for immediates).
    pub fn post_recv(
        &self,
        wr_id: u64,
        local: Option<(&Mr, usize, usize)>,
    ) -> Result<(), RdmaError> {
        let mut sge = match local {
            Some((mr, off, len)) => Some(mr.sge(off, len)?),
            None => None,
        };
        let mut wr = ffi::ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            num_sge: i32::from(sge.is_some()),
            sg_list: sge
                .as_mut()
                .map_or(ptr::null_mut(), |s| s as *mut ffi::ibv_sge),
        };
        let mut bad: *mut ffi::ibv_recv_wr = ptr::null_mut();
        // SAFETY: as post_send.
        let rc = unsafe { ffi::ibv_post_recv(self.qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(RdmaError::verbs("ibv_post_recv", rc_err(rc)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_strings_come_from_libibverbs() {
        assert_eq!(wc_status_str(WC_SUCCESS), "success");
        assert!(!wc_status_str(12).is_empty());
        assert!(!wc_status_str(9999).is_empty());
    }
}
