//! The CUDA driver API (`libcuda.so.1`) through its C ABI, loaded at run time: the one binding
//! of the workspace. The probe enumerates devices and reads the attributes the GPUDirect checks
//! need (no context is created: [`gather`]); the self-test's GPU sink and the RDMA engine's GPU
//! memory take contexts, memory, streams, events and kernels from it.
//!
//! This module holds all of that `unsafe`. Every handle type owns its resource and frees it
//! on drop, in an order the owners guarantee (buffers, events, streams and the module before the
//! context). A missing library or entry point is an [`CudaError::Unavailable`], never a panic.

use super::{c_buf_to_string, dl, format_uuid, normalize_bus_id, CudaAttrs, LibStatus};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

type CuResult = c_int;
type CuDevice = c_int;
type CuDevPtr = u64;
type Handle = *mut c_void;

const CUDA_SUCCESS: CuResult = 0;
const CU_MEMHOSTALLOC_PORTABLE: c_uint = 0x01;
const CU_MEMHOSTALLOC_DEVICEMAP: c_uint = 0x02;
const CU_STREAM_NON_BLOCKING: c_uint = 0x01;
const CU_JIT_ERROR_LOG_BUFFER: c_int = 5;
const CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: c_int = 6;

// CUdevice_attribute values (cuda.h).
const ATTR_INTEGRATED: c_int = 18;
const ATTR_CC_MAJOR: c_int = 75;
const ATTR_CC_MINOR: c_int = 76;
const ATTR_GPU_DIRECT_RDMA_SUPPORTED: c_int = 116;
const ATTR_DMA_BUF_SUPPORTED: c_int = 124;

#[derive(Debug, Clone, thiserror::Error)]
pub enum CudaError {
    /// No driver library, no device, or an entry point missing: the GPU sink is skipped.
    #[error("{0}")]
    Unavailable(String),
    /// A request the sink cannot make (sizes, unmapped memory).
    #[error("{0}")]
    Invalid(String),
    /// A call failed on a working driver.
    #[error("{call}: {message}")]
    Call { call: &'static str, message: String },
}

type FnU = unsafe extern "C" fn(c_uint) -> CuResult;
type FnPInt = unsafe extern "C" fn(*mut c_int) -> CuResult;
type FnAttr = unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> CuResult;
type FnDevGet = unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult;
type FnDevStr = unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult;
type FnUuid = unsafe extern "C" fn(*mut [u8; 16], CuDevice) -> CuResult;
type FnCtxRetain = unsafe extern "C" fn(*mut Handle, CuDevice) -> CuResult;
type FnDev = unsafe extern "C" fn(CuDevice) -> CuResult;
type FnH = unsafe extern "C" fn(Handle) -> CuResult;
type FnVoid = unsafe extern "C" fn() -> CuResult;
type FnHostAlloc = unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CuResult;
type FnHostDevPtr = unsafe extern "C" fn(*mut CuDevPtr, *mut c_void, c_uint) -> CuResult;
type FnPtr = unsafe extern "C" fn(*mut c_void) -> CuResult;
type FnAlloc = unsafe extern "C" fn(*mut CuDevPtr, usize) -> CuResult;
type FnFree = unsafe extern "C" fn(CuDevPtr) -> CuResult;
type FnHtoD = unsafe extern "C" fn(CuDevPtr, *const c_void, usize) -> CuResult;
type FnHtoDAsync = unsafe extern "C" fn(CuDevPtr, *const c_void, usize, Handle) -> CuResult;
type FnDtoHAsync = unsafe extern "C" fn(*mut c_void, CuDevPtr, usize, Handle) -> CuResult;
type FnDtoH = unsafe extern "C" fn(*mut c_void, CuDevPtr, usize) -> CuResult;
type FnCreate = unsafe extern "C" fn(*mut Handle, c_uint) -> CuResult;
type FnRecord = unsafe extern "C" fn(Handle, Handle) -> CuResult;
type FnElapsed = unsafe extern "C" fn(*mut f32, Handle, Handle) -> CuResult;
type FnLoadEx = unsafe extern "C" fn(
    *mut Handle,
    *const c_void,
    c_uint,
    *mut c_int,
    *mut *mut c_void,
) -> CuResult;
type FnGetFn = unsafe extern "C" fn(*mut Handle, Handle, *const c_char) -> CuResult;
#[allow(clippy::type_complexity)]
type FnLaunch = unsafe extern "C" fn(
    Handle,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    Handle,
    *mut *mut c_void,
    *mut *mut c_void,
) -> CuResult;
type FnErr = unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult;
type FnRangeHandle =
    unsafe extern "C" fn(*mut c_void, CuDevPtr, usize, c_int, std::ffi::c_ulonglong) -> CuResult;

/// `CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD`.
const CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD: c_int = 1;
/// dma-buf export works on whole host pages.
const DMABUF_ALIGN: usize = 64 * 1024;

struct Api {
    init: FnU,
    driver_version: FnPInt,
    device_count: FnPInt,
    device_get: FnDevGet,
    device_name: Option<FnDevStr>,
    device_uuid: FnUuid,
    device_bus_id: Option<FnDevStr>,
    attr: FnAttr,
    ctx_retain: FnCtxRetain,
    ctx_release: FnDev,
    ctx_set_current: FnH,
    ctx_synchronize: FnVoid,
    host_alloc: FnHostAlloc,
    host_dev_ptr: FnHostDevPtr,
    free_host: FnPtr,
    mem_alloc: FnAlloc,
    mem_free: FnFree,
    htod: FnHtoD,
    htod_async: FnHtoDAsync,
    dtoh: FnDtoH,
    dtoh_async: FnDtoHAsync,
    stream_create: FnCreate,
    stream_destroy: FnH,
    stream_sync: FnH,
    event_create: FnCreate,
    event_record: FnRecord,
    event_sync: FnH,
    event_elapsed: FnElapsed,
    event_destroy: FnH,
    module_load: FnLoadEx,
    module_unload: FnH,
    module_get_fn: FnGetFn,
    launch: FnLaunch,
    err_name: Option<FnErr>,
    err_string: Option<FnErr>,
    /// cuMemGetHandleForAddressRange (drivers from CUDA 11.7).
    range_handle: Option<FnRangeHandle>,
}

static API: OnceLock<Result<Api, String>> = OnceLock::new();

fn load() -> Result<Api, String> {
    let lib = dl::cuda()?;
    fn sym<T: Copy>(lib: &'static libloading::Library, name: &str) -> Result<T, String> {
        // SAFETY: every caller below names `T` as the signature cuda.h declares for `name`;
        // the library is never unloaded (dl), so the copied pointer stays valid.
        unsafe { dl::sym(lib, name) }
    }
    Ok(Api {
        init: sym(lib, "cuInit")?,
        driver_version: sym(lib, "cuDriverGetVersion")?,
        device_count: sym(lib, "cuDeviceGetCount")?,
        device_get: sym(lib, "cuDeviceGet")?,
        device_name: sym(lib, "cuDeviceGetName").ok(),
        // _v2 reports MIG-aware UUIDs identical to NVML's; the old entry point is the same for
        // whole GPUs.
        device_uuid: sym(lib, "cuDeviceGetUuid_v2").or_else(|_| sym(lib, "cuDeviceGetUuid"))?,
        device_bus_id: sym(lib, "cuDeviceGetPCIBusId").ok(),
        attr: sym(lib, "cuDeviceGetAttribute")?,
        ctx_retain: sym(lib, "cuDevicePrimaryCtxRetain")?,
        ctx_release: sym(lib, "cuDevicePrimaryCtxRelease_v2")
            .or_else(|_| sym(lib, "cuDevicePrimaryCtxRelease"))?,
        ctx_set_current: sym(lib, "cuCtxSetCurrent")?,
        ctx_synchronize: sym(lib, "cuCtxSynchronize")?,
        host_alloc: sym(lib, "cuMemHostAlloc")?,
        host_dev_ptr: sym(lib, "cuMemHostGetDevicePointer_v2")?,
        free_host: sym(lib, "cuMemFreeHost")?,
        mem_alloc: sym(lib, "cuMemAlloc_v2")?,
        mem_free: sym(lib, "cuMemFree_v2")?,
        htod: sym(lib, "cuMemcpyHtoD_v2")?,
        htod_async: sym(lib, "cuMemcpyHtoDAsync_v2")?,
        dtoh: sym(lib, "cuMemcpyDtoH_v2")?,
        dtoh_async: sym(lib, "cuMemcpyDtoHAsync_v2")?,
        stream_create: sym(lib, "cuStreamCreate")?,
        stream_destroy: sym(lib, "cuStreamDestroy_v2")?,
        stream_sync: sym(lib, "cuStreamSynchronize")?,
        event_create: sym(lib, "cuEventCreate")?,
        event_record: sym(lib, "cuEventRecord")?,
        event_sync: sym(lib, "cuEventSynchronize")?,
        event_elapsed: sym(lib, "cuEventElapsedTime")?,
        event_destroy: sym(lib, "cuEventDestroy_v2")?,
        module_load: sym(lib, "cuModuleLoadDataEx")?,
        module_unload: sym(lib, "cuModuleUnload")?,
        module_get_fn: sym(lib, "cuModuleGetFunction")?,
        launch: sym(lib, "cuLaunchKernel")?,
        err_name: sym(lib, "cuGetErrorName").ok(),
        err_string: sym(lib, "cuGetErrorString").ok(),
        range_handle: sym(lib, "cuMemGetHandleForAddressRange").ok(),
    })
}

/// The table, loaded once: the driver's functions, or why there are none (no libcuda, an entry
/// point missing).
fn loaded() -> Result<&'static Api, String> {
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn api() -> Result<&'static Api, CudaError> {
    loaded().map_err(CudaError::Unavailable)
}

impl Api {
    fn describe(&self, r: CuResult) -> String {
        let text = |f: Option<FnErr>| -> Option<String> {
            let f = f?;
            let mut p: *const c_char = std::ptr::null();
            // SAFETY: `p` is a valid out pointer; on success it points at a static string.
            let ok = unsafe { f(r, &mut p) } == CUDA_SUCCESS && !p.is_null();
            // SAFETY: checked non-null; the driver's error strings are static, NUL-terminated.
            ok.then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        };
        match (text(self.err_name), text(self.err_string)) {
            (Some(n), Some(s)) => format!("{n}: {s}"),
            (Some(n), None) => n,
            _ => format!("CUresult {r}"),
        }
    }

    fn attr(&self, dev: CuDevice, a: c_int) -> Result<i32, String> {
        let mut v: c_int = 0;
        // SAFETY: `v` is a valid out pointer; `dev` came from cuDeviceGet.
        let r = unsafe { (self.attr)(&mut v, a, dev) };
        if r == CUDA_SUCCESS {
            Ok(v)
        } else {
            Err(self.describe(r))
        }
    }

    /// A device string (name, PCI bus id) through `f`, where the driver has it.
    fn string(&self, f: Option<FnDevStr>, dev: CuDevice) -> Option<String> {
        let f = f?;
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is writable for the length passed; `dev` came from cuDeviceGet.
        let r = unsafe { f(buf.as_mut_ptr().cast(), buf.len() as c_int, dev) };
        (r == CUDA_SUCCESS).then(|| c_buf_to_string(&buf))
    }

    fn check(&self, call: &'static str, r: CuResult) -> Result<(), CudaError> {
        if r == CUDA_SUCCESS {
            Ok(())
        } else {
            Err(CudaError::Call {
                call,
                message: self.describe(r),
            })
        }
    }
}

/// One CUDA device as the driver enumerates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: u32,
    pub name: String,
    /// `GPU-xxxxxxxx-...`, the form NVML and nvidia-smi print.
    pub uuid: String,
    /// Lower-case `0000:09:00.0`, or `None` (integrated GPUs).
    pub pci_bus_id: Option<String>,
}

/// cuInit(0): the documented first call of every driver API user (idempotent, thread-safe),
/// so every entry point of this module that starts from nothing makes it. No usable driver or
/// no GPU is [`CudaError::Unavailable`].
fn init(a: &Api) -> Result<(), CudaError> {
    // SAFETY: plain call with flags 0.
    let r = unsafe { (a.init)(0) };
    if r != CUDA_SUCCESS {
        return Err(CudaError::Unavailable(format!(
            "cuInit failed: {}",
            a.describe(r)
        )));
    }
    Ok(())
}

/// Initialises the driver and lists its devices.
pub fn devices() -> Result<Vec<DeviceInfo>, CudaError> {
    let a = api()?;
    init(a)?;
    let mut n: c_int = 0;
    // SAFETY: valid out pointer; cuInit succeeded.
    a.check("cuDeviceGetCount", unsafe { (a.device_count)(&mut n) })?;
    let mut out = Vec::new();
    for ordinal in 0..n.max(0) {
        let mut dev: CuDevice = 0;
        // SAFETY: valid out pointer; ordinal < count.
        a.check("cuDeviceGet", unsafe { (a.device_get)(&mut dev, ordinal) })?;
        let mut uuid = [0u8; 16];
        // SAFETY: `uuid` is the 16-byte CUuuid the call fills.
        a.check("cuDeviceGetUuid", unsafe {
            (a.device_uuid)(&mut uuid, dev)
        })?;
        out.push(DeviceInfo {
            ordinal: ordinal as u32,
            name: a.string(a.device_name, dev).unwrap_or_default(),
            uuid: format_uuid(&uuid),
            pci_bus_id: a
                .string(a.device_bus_id, dev)
                .and_then(|b| normalize_bus_id(&b)),
        });
    }
    Ok(out)
}

/// A retained primary context, current on the thread that created it.
pub struct Context {
    api: &'static Api,
    dev: CuDevice,
    raw: Handle,
}

// SAFETY: a CUDA context may be used from any thread once made current there; the sink moves
// the context together with all its resources and calls `make_current` before use.
unsafe impl Send for Context {}
// SAFETY: the handle is never mutated after creation and the driver API is thread-safe for
// calls naming the same context; shared references only pass the handle to the driver.
unsafe impl Sync for Context {}

impl Context {
    pub fn retain(ordinal: u32) -> Result<Arc<Context>, CudaError> {
        let a = api()?;
        init(a)?;
        let mut dev: CuDevice = 0;
        // SAFETY: valid out pointer; cuInit succeeded. A bad ordinal is an error code.
        a.check("cuDeviceGet", unsafe {
            (a.device_get)(&mut dev, ordinal as c_int)
        })?;
        let mut raw: Handle = std::ptr::null_mut();
        // SAFETY: valid out pointer and device.
        a.check("cuDevicePrimaryCtxRetain", unsafe {
            (a.ctx_retain)(&mut raw, dev)
        })?;
        let ctx = Arc::new(Context { api: a, dev, raw });
        ctx.make_current()?;
        Ok(ctx)
    }

    pub fn make_current(&self) -> Result<(), CudaError> {
        // SAFETY: `raw` is a context retained by us and not yet released.
        self.api.check("cuCtxSetCurrent", unsafe {
            (self.api.ctx_set_current)(self.raw)
        })
    }

    pub fn synchronize(&self) -> Result<(), CudaError> {
        // SAFETY: no arguments; the context is current (make_current).
        self.api
            .check("cuCtxSynchronize", unsafe { (self.api.ctx_synchronize)() })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: balances the retain; every resource holds an Arc<Context>, so none outlives it.
        unsafe {
            (self.api.ctx_synchronize)();
            (self.api.ctx_release)(self.dev);
        }
    }
}

/// Page-locked host memory from cuMemHostAlloc (PORTABLE; DEVICEMAP where the GPU reads it in
/// place). This is the allocation DPDK can register as external memory for `host_pinned`.
pub struct PinnedBuf {
    ctx: Arc<Context>,
    ptr: *mut u8,
    len: usize,
    dev_ptr: Option<u64>,
}

// SAFETY: the buffer is plain memory owned by this value; the context is Send (see above).
unsafe impl Send for PinnedBuf {}

impl PinnedBuf {
    pub fn new(ctx: &Arc<Context>, len: usize, device_mapped: bool) -> Result<Self, CudaError> {
        let a = ctx.api;
        let len = len.max(1);
        let mut p: *mut c_void = std::ptr::null_mut();
        let flags = CU_MEMHOSTALLOC_PORTABLE
            | if device_mapped {
                CU_MEMHOSTALLOC_DEVICEMAP
            } else {
                0
            };
        // SAFETY: valid out pointer; the context is current on this thread.
        a.check("cuMemHostAlloc", unsafe {
            (a.host_alloc)(&mut p, len, flags)
        })?;
        let mut buf = PinnedBuf {
            ctx: Arc::clone(ctx),
            ptr: p.cast(),
            len,
            dev_ptr: None,
        };
        // SAFETY: cuMemHostAlloc returned `len` writable bytes; zeroing them makes every byte
        // initialised before any slice of them is handed out.
        unsafe { std::ptr::write_bytes(buf.ptr, 0, len) };
        if device_mapped {
            let mut d: CuDevPtr = 0;
            // SAFETY: `p` came from cuMemHostAlloc with DEVICEMAP; flags must be 0.
            a.check("cuMemHostGetDevicePointer", unsafe {
                (a.host_dev_ptr)(&mut d, p, 0)
            })?;
            buf.dev_ptr = Some(d);
        }
        Ok(buf)
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is a live allocation of `len` initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes this the only reference from Rust. The GPU
        // only touches the buffer between a submit and its completion, and the sink never hands
        // out a slice of a buffer in flight.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address kernels use for this buffer (DEVICEMAP allocations only).
    pub fn device_ptr(&self) -> Option<u64> {
        self.dev_ptr
    }

    /// The host address, for registering the memory elsewhere (DPDK external memory).
    pub fn host_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from cuMemHostAlloc and is freed once; the owner synchronised
        // the context before dropping, so no copy or kernel still uses it.
        unsafe { (self.ctx.api.free_host)(self.ptr.cast()) };
    }
}

/// Device memory from cuMemAlloc.
pub struct DeviceBuf {
    ctx: Arc<Context>,
    ptr: CuDevPtr,
    len: usize,
}

// SAFETY: a device address owned by this value.
unsafe impl Send for DeviceBuf {}

impl DeviceBuf {
    pub fn new(ctx: &Arc<Context>, len: usize) -> Result<Self, CudaError> {
        let a = ctx.api;
        let mut p: CuDevPtr = 0;
        // SAFETY: valid out pointer; context current.
        a.check("cuMemAlloc", unsafe { (a.mem_alloc)(&mut p, len.max(1)) })?;
        Ok(DeviceBuf {
            ctx: Arc::clone(ctx),
            ptr: p,
            len: len.max(1),
        })
    }

    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Synchronous copy from ordinary host memory.
    pub fn upload(&self, src: &[u8]) -> Result<(), CudaError> {
        let n = src.len().min(self.len);
        let a = self.ctx.api;
        // SAFETY: `src` is readable for n bytes, the allocation is at least n bytes.
        a.check("cuMemcpyHtoD", unsafe {
            (a.htod)(self.ptr, src.as_ptr().cast(), n)
        })
    }

    /// Synchronous copy to ordinary host memory.
    pub fn download(&self, dst: &mut [u8]) -> Result<(), CudaError> {
        let n = dst.len().min(self.len);
        let a = self.ctx.api;
        // SAFETY: `dst` is writable for n bytes, the allocation holds at least n bytes.
        a.check("cuMemcpyDtoH", unsafe {
            (a.dtoh)(dst.as_mut_ptr().cast(), self.ptr, n)
        })
    }
}

impl DeviceBuf {
    /// Device memory sized for a dma-buf export (whole 64 KiB pages, so the range the NIC
    /// registers covers the allocation exactly).
    pub fn new_exportable(ctx: &Arc<Context>, len: usize) -> Result<Self, CudaError> {
        let rounded = len
            .max(1)
            .checked_next_multiple_of(DMABUF_ALIGN)
            .ok_or_else(|| CudaError::Invalid(format!("{len} bytes")))?;
        Self::new(ctx, rounded)
    }

    fn range(&self, off: usize, n: usize) -> Result<CuDevPtr, CudaError> {
        match off.checked_add(n) {
            Some(end) if end <= self.len => Ok(self.ptr + off as u64),
            _ => Err(CudaError::Invalid(format!(
                "bytes {off}..+{n} outside a {}-byte device buffer",
                self.len
            ))),
        }
    }

    /// Synchronous copy of `src` to `off`.
    pub fn upload_at(&self, off: usize, src: &[u8]) -> Result<(), CudaError> {
        let d = self.range(off, src.len())?;
        let a = self.ctx.api;
        // SAFETY: `src` is readable for its length; `range` checked the device side.
        a.check("cuMemcpyHtoD", unsafe {
            (a.htod)(d, src.as_ptr().cast(), src.len())
        })
    }

    /// Synchronous copy of `dst.len()` bytes from `off`.
    pub fn download_at(&self, off: usize, dst: &mut [u8]) -> Result<(), CudaError> {
        let d = self.range(off, dst.len())?;
        let a = self.ctx.api;
        // SAFETY: `dst` is writable for its length; `range` checked the device side.
        a.check("cuMemcpyDtoH", unsafe {
            (a.dtoh)(dst.as_mut_ptr().cast(), d, dst.len())
        })
    }

    /// Exports the whole allocation as a dma-buf file descriptor (GPUDirect RDMA without
    /// nvidia-peermem: `ibv_reg_dmabuf_mr`). Needs the open GPU kernel modules and a kernel
    /// with dma-buf support; older drivers lack the entry point.
    pub fn export_dmabuf(&self) -> Result<std::os::fd::OwnedFd, CudaError> {
        let a = self.ctx.api;
        let f = a.range_handle.ok_or_else(|| {
            CudaError::Unavailable(
                "libcuda.so.1 lacks cuMemGetHandleForAddressRange (driver older than CUDA 11.7)"
                    .into(),
            )
        })?;
        if self.len % DMABUF_ALIGN != 0 {
            return Err(CudaError::Invalid(
                "dma-buf export needs a buffer from new_exportable".into(),
            ));
        }
        let mut fd: c_int = -1;
        // SAFETY: `fd` is a valid out pointer for an int; the range is this whole allocation.
        a.check("cuMemGetHandleForAddressRange", unsafe {
            f(
                (&mut fd as *mut c_int).cast(),
                self.ptr,
                self.len,
                CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                0,
            )
        })?;
        if fd < 0 {
            return Err(CudaError::Invalid(
                "the driver returned no dma-buf fd".into(),
            ));
        }
        // SAFETY: the driver created this descriptor for us; nothing else owns it.
        Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
    }
}

impl Drop for DeviceBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc, freed once, after the owner synchronised.
        unsafe { (self.ctx.api.mem_free)(self.ptr) };
    }
}

pub struct Stream {
    ctx: Arc<Context>,
    raw: Handle,
}

// SAFETY: a stream handle of a context that is made current before use.
unsafe impl Send for Stream {}

impl Stream {
    pub fn new(ctx: &Arc<Context>) -> Result<Self, CudaError> {
        let a = ctx.api;
        let mut raw: Handle = std::ptr::null_mut();
        // SAFETY: valid out pointer; context current.
        a.check("cuStreamCreate", unsafe {
            (a.stream_create)(&mut raw, CU_STREAM_NON_BLOCKING)
        })?;
        Ok(Stream {
            ctx: Arc::clone(ctx),
            raw,
        })
    }

    /// Queues a copy of `len` bytes of `src` (pinned) to `dst` at `dst_off` bytes.
    pub fn copy_to_device(
        &self,
        dst: &DeviceBuf,
        src: &PinnedBuf,
        len: usize,
    ) -> Result<(), CudaError> {
        if len > dst.len || len > src.len {
            return Err(CudaError::Call {
                call: "cuMemcpyHtoDAsync",
                message: format!(
                    "{len} bytes do not fit ({} / {} allocated)",
                    src.len, dst.len
                ),
            });
        }
        let a = self.ctx.api;
        // SAFETY: both allocations hold `len` bytes (checked); the source is pinned, so the
        // copy is truly asynchronous, and the caller keeps both alive until the stream passes
        // an event recorded after this copy.
        a.check("cuMemcpyHtoDAsync", unsafe {
            (a.htod_async)(dst.ptr, src.ptr.cast(), len, self.raw)
        })
    }

    /// Queues a copy of `len` bytes of `src` back into pinned `dst`.
    pub fn copy_to_host(
        &self,
        dst: &mut PinnedBuf,
        src: &DeviceBuf,
        len: usize,
    ) -> Result<(), CudaError> {
        if len > dst.len || len > src.len {
            return Err(CudaError::Call {
                call: "cuMemcpyDtoHAsync",
                message: format!("{len} bytes do not fit"),
            });
        }
        let a = self.ctx.api;
        // SAFETY: sizes checked; `dst` is pinned and the caller reads it only after the
        // stream passed a later event.
        a.check("cuMemcpyDtoHAsync", unsafe {
            (a.dtoh_async)(dst.ptr.cast(), src.ptr, len, self.raw)
        })
    }

    pub fn synchronize(&self) -> Result<(), CudaError> {
        let a = self.ctx.api;
        // SAFETY: live stream.
        a.check("cuStreamSynchronize", unsafe { (a.stream_sync)(self.raw) })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: created by cuStreamCreate, destroyed once.
        unsafe { (self.ctx.api.stream_destroy)(self.raw) };
    }
}

pub struct Event {
    ctx: Arc<Context>,
    raw: Handle,
}

// SAFETY: an event handle of a context made current before use.
unsafe impl Send for Event {}

impl Event {
    pub fn new(ctx: &Arc<Context>) -> Result<Self, CudaError> {
        let a = ctx.api;
        let mut raw: Handle = std::ptr::null_mut();
        // SAFETY: valid out pointer; flags 0 = timing enabled.
        a.check("cuEventCreate", unsafe { (a.event_create)(&mut raw, 0) })?;
        Ok(Event {
            ctx: Arc::clone(ctx),
            raw,
        })
    }

    pub fn record(&self, s: &Stream) -> Result<(), CudaError> {
        let a = self.ctx.api;
        // SAFETY: live event and stream of the same context.
        a.check("cuEventRecord", unsafe {
            (a.event_record)(self.raw, s.raw)
        })
    }

    pub fn synchronize(&self) -> Result<(), CudaError> {
        let a = self.ctx.api;
        // SAFETY: live event.
        a.check("cuEventSynchronize", unsafe { (a.event_sync)(self.raw) })
    }

    /// Milliseconds from `start` to this event (both recorded and completed).
    pub fn since(&self, start: &Event) -> Result<f64, CudaError> {
        let a = self.ctx.api;
        let mut ms: f32 = 0.0;
        // SAFETY: valid out pointer; both events are live.
        a.check("cuEventElapsedTime", unsafe {
            (a.event_elapsed)(&mut ms, start.raw, self.raw)
        })?;
        Ok(f64::from(ms))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by cuEventCreate, destroyed once.
        unsafe { (self.ctx.api.event_destroy)(self.raw) };
    }
}

/// A loaded PTX module and one of its kernels.
pub struct Kernel {
    ctx: Arc<Context>,
    module: Handle,
    func: Handle,
}

// SAFETY: module and function handles of a context made current before use.
unsafe impl Send for Kernel {}

/// A kernel argument, passed by address as cuLaunchKernel wants.
pub enum Arg {
    U32(u32),
    U64(u64),
}

impl Kernel {
    /// JIT-compiles `ptx` for the current device and looks up `entry`.
    pub fn load(ctx: &Arc<Context>, ptx: &str, entry: &str) -> Result<Self, CudaError> {
        let a = ctx.api;
        let image = CString::new(ptx).map_err(|_| CudaError::Call {
            call: "cuModuleLoadDataEx",
            message: "PTX text contains a NUL byte".into(),
        })?;
        let mut log = vec![0u8; 8192];
        let mut opts = [CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
        let mut vals: [*mut c_void; 2] = [log.as_mut_ptr().cast(), log.len() as *mut c_void];
        let mut module: Handle = std::ptr::null_mut();
        // SAFETY: `image` is NUL-terminated PTX; the option arrays have 2 entries each, the log
        // buffer outlives the call and its size is passed by value as the JIT API specifies.
        let r = unsafe {
            (a.module_load)(
                &mut module,
                image.as_ptr().cast(),
                2,
                opts.as_mut_ptr(),
                vals.as_mut_ptr(),
            )
        };
        if r != CUDA_SUCCESS {
            return Err(CudaError::Call {
                call: "cuModuleLoadDataEx",
                message: format!("{} ({})", a.describe(r), c_buf_to_string(&log)),
            });
        }
        let name = CString::new(entry).map_err(|_| CudaError::Call {
            call: "cuModuleGetFunction",
            message: "entry name contains a NUL byte".into(),
        })?;
        let mut func: Handle = std::ptr::null_mut();
        // SAFETY: valid out pointer, live module, NUL-terminated name.
        let r = unsafe { (a.module_get_fn)(&mut func, module, name.as_ptr()) };
        if r != CUDA_SUCCESS {
            // SAFETY: the module loaded above is unloaded once.
            unsafe { (a.module_unload)(module) };
            return Err(CudaError::Call {
                call: "cuModuleGetFunction",
                message: a.describe(r),
            });
        }
        Ok(Kernel {
            ctx: Arc::clone(ctx),
            module,
            func,
        })
    }

    /// Queues the kernel on `stream`. The caller promises `args` match the kernel's parameter
    /// list and that every address in them stays valid until the stream passes a later event.
    pub fn launch(
        &self,
        stream: &Stream,
        grid: u32,
        block: u32,
        args: &[Arg],
    ) -> Result<(), CudaError> {
        let mut ptrs: Vec<*mut c_void> = args
            .iter()
            .map(|a| match a {
                Arg::U32(v) => (v as *const u32).cast_mut().cast(),
                Arg::U64(v) => (v as *const u64).cast_mut().cast(),
            })
            .collect();
        let a = self.ctx.api;
        // SAFETY: `ptrs` holds one pointer per kernel parameter, each to a live value of the
        // parameter's size (the driver copies them during the call); `extra` is null.
        a.check("cuLaunchKernel", unsafe {
            (a.launch)(
                self.func,
                grid.max(1),
                1,
                1,
                block,
                1,
                1,
                0,
                stream.raw,
                ptrs.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // SAFETY: loaded by cuModuleLoadDataEx, unloaded once.
        unsafe { (self.ctx.api.module_unload)(self.module) };
    }
}

/// What the CUDA half of a live probe found: (UUID, attributes) per device.
#[derive(Default)]
pub(crate) struct CudaPart {
    pub driver_version: Option<i32>,
    pub device_order: Option<String>,
    pub devices: Vec<(String, CudaAttrs)>,
    pub init_ms: Option<f64>,
    pub query_ms: Option<f64>,
}

pub(crate) fn gather() -> (LibStatus, CudaPart) {
    let mut part = CudaPart {
        device_order: std::env::var("CUDA_DEVICE_ORDER").ok(),
        ..CudaPart::default()
    };
    let t0 = Instant::now();
    let api = match loaded() {
        Ok(a) => a,
        Err(reason) => return (LibStatus::Unavailable { reason }, part),
    };
    // SAFETY: cuInit(0) is the documented first call; it is idempotent and thread-safe.
    let r = unsafe { (api.init)(0) };
    if r != CUDA_SUCCESS {
        return (
            LibStatus::Unavailable {
                reason: format!("cuInit failed: {}", api.describe(r)),
            },
            part,
        );
    }
    part.init_ms = Some(t0.elapsed().as_secs_f64() * 1e3);
    let t1 = Instant::now();
    let mut v: c_int = 0;
    // SAFETY: valid out pointer.
    if unsafe { (api.driver_version)(&mut v) } == CUDA_SUCCESS {
        part.driver_version = Some(v);
    }
    let mut n: c_int = 0;
    // SAFETY: valid out pointer; cuInit succeeded.
    let r = unsafe { (api.device_count)(&mut n) };
    if r != CUDA_SUCCESS {
        return (
            LibStatus::Unavailable {
                reason: format!("cuDeviceGetCount failed: {}", api.describe(r)),
            },
            part,
        );
    }
    for ordinal in 0..n.max(0) {
        let mut dev: CuDevice = 0;
        // SAFETY: valid out pointer; ordinal < count.
        if unsafe { (api.device_get)(&mut dev, ordinal) } != CUDA_SUCCESS {
            continue;
        }
        let mut bytes = [0u8; 16];
        // SAFETY: `bytes` is the 16-byte CUuuid the call fills; `dev` came from cuDeviceGet.
        if unsafe { (api.device_uuid)(&mut bytes, dev) } != CUDA_SUCCESS {
            continue;
        }
        let flag = |a| api.attr(dev, a).ok().map(|v| v != 0);
        let cc = match (api.attr(dev, ATTR_CC_MAJOR), api.attr(dev, ATTR_CC_MINOR)) {
            (Ok(a), Ok(b)) => Some(format!("{a}.{b}")),
            _ => None,
        };
        let integrated = flag(ATTR_INTEGRATED);
        // Integrated GPUs have no PCI address; some drivers report a zero bus id for them.
        let pci_bus_id = api
            .string(api.device_bus_id, dev)
            .and_then(|s| normalize_bus_id(&s))
            .filter(|b| !(integrated == Some(true) && b == "0000:00:00.0"));
        let attrs = CudaAttrs {
            ordinal: Some(ordinal as u32),
            gpu_direct_rdma_supported: flag(ATTR_GPU_DIRECT_RDMA_SUPPORTED),
            dma_buf_supported: flag(ATTR_DMA_BUF_SUPPORTED),
            integrated,
            compute_capability: cc,
            pci_bus_id,
            name: api.string(api.device_name, dev),
            read_from: None,
        };
        part.devices.push((format_uuid(&bytes), attrs));
    }
    part.query_ms = Some(t1.elapsed().as_secs_f64() * 1e3);
    (LibStatus::Ok, part)
}
