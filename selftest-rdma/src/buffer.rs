//! Where the memory an RDMA test registers comes from.
//!
//! The engine asks a [`BufferProvider`] for its buffers and registers whatever it gets: the
//! kinds the GPU sink uses, from the same CUDA allocations (`daqtune_selftest::gpu_sink::cuda`):
//! plain host memory (`host`), pinned CUDA host memory (`host_pinned`, cuMemHostAlloc) and GPU
//! memory (`device`, GPUDirect: exported as a dma-buf where the driver can, else registered by
//! address for nvidia-peermem). A buffer says how it is registered ([`Registration`]) and gives
//! the verifier its bytes: host kinds in place, device memory through a copy (correct, not
//! fast: a `device` run proves the registration and the data, not the rate).

use crate::error::RdmaError;

/// How the NIC reaches a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    /// CPU-addressable memory: `ibv_reg_mr(addr, len)`.
    Host { addr: *mut u8, len: usize },
    /// Memory exported as a dma-buf (GPU memory through the open kernel module):
    /// `ibv_reg_dmabuf_mr(offset, len, iova, fd)`.
    DmaBuf {
        fd: i32,
        offset: u64,
        len: usize,
        iova: u64,
    },
    /// A CUDA device address for `ibv_reg_mr`, which nvidia-peermem resolves to GPU pages.
    PeerMem { addr: *mut u8, len: usize },
}

/// A buffer the engine registers with the NIC and the verifier reads.
///
/// The NIC writes into the buffer behind the CPU's back; the engine only reads a region after
/// the completion that delivered it and only writes a region no work request is using.
pub trait RdmaBuffer: Send {
    /// `host`, `host_pinned`, `device`: the kind names the GPU sink uses.
    fn kind(&self) -> &'static str;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn registration(&mut self) -> Registration;
    /// For reports: the kind and how the NIC reaches it (`device via dma-buf`).
    fn describe(&self) -> String {
        self.kind().to_string()
    }
    /// Bytes `[off, off + len)` for the CPU verifier (device memory copies them out first);
    /// `None` when the range is outside or the copy failed.
    fn read(&mut self, off: usize, len: usize) -> Option<&[u8]>;
    /// Copies `data` to `off`; false when the CPU cannot write this memory or the range is
    /// outside.
    fn write(&mut self, off: usize, data: &[u8]) -> bool;
}

/// Hands out buffers of one kind.
pub trait BufferProvider: Send + Sync {
    fn kind(&self) -> &'static str;
    fn allocate(&self, len: usize) -> Result<Box<dyn RdmaBuffer>, RdmaError>;
}

/// Ordinary pageable host memory (what `ibv_reg_mr` pins).
#[derive(Debug, Default, Clone, Copy)]
pub struct HostProvider;

impl BufferProvider for HostProvider {
    fn kind(&self) -> &'static str {
        "host"
    }

    fn allocate(&self, len: usize) -> Result<Box<dyn RdmaBuffer>, RdmaError> {
        Ok(Box::new(HostBuffer::new(len)?))
    }
}

/// Zeroed host memory, 64-byte aligned (whole cache lines per slot).
pub struct HostBuffer {
    // Vec of 64-byte blocks: alignment without an allocator call of our own. The memory is
    // only ever reached through `mem`'s raw views after `registration` handed its address to
    // the NIC, so Rust never holds a `&mut` to bytes the NIC may be writing.
    storage: Vec<Block>,
    len: usize,
}

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u8; 64]);

impl HostBuffer {
    pub fn new(len: usize) -> Result<Self, RdmaError> {
        if len == 0 {
            return Err(RdmaError::Invalid("buffer of 0 bytes".into()));
        }
        let blocks = len.div_ceil(64);
        let mut storage = Vec::new();
        storage
            .try_reserve_exact(blocks)
            .map_err(|e| RdmaError::Invalid(format!("cannot allocate {len} bytes: {e}")))?;
        storage.resize(blocks, Block([0; 64]));
        Ok(HostBuffer { storage, len })
    }

    fn base(&self) -> *const u8 {
        self.storage.as_ptr().cast()
    }
}

impl RdmaBuffer for HostBuffer {
    fn kind(&self) -> &'static str {
        "host"
    }

    fn len(&self) -> usize {
        self.len
    }

    fn registration(&mut self) -> Registration {
        Registration::Host {
            addr: self.storage.as_mut_ptr().cast(),
            len: self.len,
        }
    }

    fn read(&mut self, off: usize, len: usize) -> Option<&[u8]> {
        let end = off.checked_add(len)?;
        if end > self.len {
            return None;
        }
        Some(crate::mem::view(self.base(), off, len))
    }

    fn write(&mut self, off: usize, data: &[u8]) -> bool {
        let Some(end) = off.checked_add(data.len()) else {
            return false;
        };
        if end > self.len {
            return false;
        }
        crate::mem::copy_in(self.storage.as_mut_ptr().cast(), off, data);
        true
    }
}

/// The memory kinds, by the names the GPU sink and the reports use.
pub const KINDS: [&str; 3] = ["host", "host_pinned", "device"];

/// The provider for `kind` on GPU `gpu` (ignored for `host`). A missing driver or GPU is an
/// [`RdmaError::Unavailable`] (the run skips), never a panic.
pub fn provider(kind: &str, gpu: u32) -> Result<std::sync::Arc<dyn BufferProvider>, RdmaError> {
    match kind {
        "host" => Ok(std::sync::Arc::new(HostProvider)),
        "host_pinned" => Ok(std::sync::Arc::new(PinnedProvider::new(gpu)?)),
        "device" => Ok(std::sync::Arc::new(DeviceProvider::new(gpu)?)),
        other => Err(RdmaError::Invalid(format!(
            "memory kind {other:?} (host, host_pinned, device)"
        ))),
    }
}

fn cuda_context(gpu: u32) -> Result<std::sync::Arc<cuda::Context>, RdmaError> {
    cuda::Context::retain(gpu).map_err(|e| match e {
        cuda::CudaError::Unavailable(m) => RdmaError::Unavailable(format!("GPU {gpu}: {m}")),
        other => RdmaError::Invalid(format!("GPU {gpu}: {other}")),
    })
}

fn cuda_err(e: cuda::CudaError) -> RdmaError {
    match e {
        cuda::CudaError::Unavailable(m) => RdmaError::Unavailable(m),
        other => RdmaError::Invalid(other.to_string()),
    }
}

use daqtune_selftest::gpu_sink::cuda;

/// Page-locked host memory from cuMemHostAlloc, as the GPU sink's `host_pinned` kind: the NIC
/// writes it, the GPU reads it in place.
pub struct PinnedProvider {
    ctx: std::sync::Arc<cuda::Context>,
}

impl PinnedProvider {
    pub fn new(gpu: u32) -> Result<Self, RdmaError> {
        Ok(PinnedProvider {
            ctx: cuda_context(gpu)?,
        })
    }
}

impl BufferProvider for PinnedProvider {
    fn kind(&self) -> &'static str {
        "host_pinned"
    }

    fn allocate(&self, len: usize) -> Result<Box<dyn RdmaBuffer>, RdmaError> {
        if len == 0 {
            return Err(RdmaError::Invalid("buffer of 0 bytes".into()));
        }
        self.ctx.make_current().map_err(cuda_err)?;
        let buf = cuda::PinnedBuf::new(&self.ctx, len, true).map_err(cuda_err)?;
        Ok(Box::new(PinnedBuffer { buf, len }))
    }
}

pub struct PinnedBuffer {
    buf: cuda::PinnedBuf,
    len: usize,
}

impl RdmaBuffer for PinnedBuffer {
    fn kind(&self) -> &'static str {
        "host_pinned"
    }

    fn len(&self) -> usize {
        self.len
    }

    fn registration(&mut self) -> Registration {
        Registration::Host {
            addr: self.buf.host_ptr(),
            len: self.len,
        }
    }

    fn read(&mut self, off: usize, len: usize) -> Option<&[u8]> {
        let end = off.checked_add(len).filter(|e| *e <= self.len)?;
        // The NIC writes behind Rust's back: read through a raw view, as for host memory.
        Some(crate::mem::view(self.buf.host_ptr(), off, end - off))
    }

    fn write(&mut self, off: usize, data: &[u8]) -> bool {
        match off.checked_add(data.len()) {
            Some(end) if end <= self.len => {
                crate::mem::copy_in(self.buf.host_ptr(), off, data);
                true
            }
            _ => false,
        }
    }
}

/// GPU memory (the GPU sink's `device` kind) for GPUDirect RDMA: exported as a dma-buf when
/// the driver can (open GPU kernel modules), else registered by its device address, which needs
/// nvidia-peermem. The CPU verifier reads it through a copy.
pub struct DeviceProvider {
    ctx: std::sync::Arc<cuda::Context>,
}

impl DeviceProvider {
    pub fn new(gpu: u32) -> Result<Self, RdmaError> {
        Ok(DeviceProvider {
            ctx: cuda_context(gpu)?,
        })
    }
}

impl BufferProvider for DeviceProvider {
    fn kind(&self) -> &'static str {
        "device"
    }

    fn allocate(&self, len: usize) -> Result<Box<dyn RdmaBuffer>, RdmaError> {
        if len == 0 {
            return Err(RdmaError::Invalid("buffer of 0 bytes".into()));
        }
        self.ctx.make_current().map_err(cuda_err)?;
        let buf = cuda::DeviceBuf::new_exportable(&self.ctx, len).map_err(cuda_err)?;
        buf.upload_at(0, &vec![0u8; buf.len()]).map_err(cuda_err)?;
        let (dmabuf, export_error) = match buf.export_dmabuf() {
            Ok(fd) => (Some(fd), None),
            Err(e) => (None, Some(e.to_string())),
        };
        Ok(Box::new(DeviceBuffer {
            dmabuf,
            export_error,
            buf,
            len,
            ctx: std::sync::Arc::clone(&self.ctx),
            staging: Vec::new(),
        }))
    }
}

pub struct DeviceBuffer {
    // Declared (and so dropped) before the memory it exports.
    dmabuf: Option<std::os::fd::OwnedFd>,
    /// Why the dma-buf export failed (the buffer then goes the peermem way).
    export_error: Option<String>,
    buf: cuda::DeviceBuf,
    len: usize,
    ctx: std::sync::Arc<cuda::Context>,
    staging: Vec<u8>,
}

impl DeviceBuffer {
    /// How the NIC reaches this buffer: "dma-buf" or "peermem".
    pub fn path(&self) -> &'static str {
        if self.dmabuf.is_some() {
            "dma-buf"
        } else {
            "peermem"
        }
    }
}

impl RdmaBuffer for DeviceBuffer {
    fn kind(&self) -> &'static str {
        "device"
    }

    fn describe(&self) -> String {
        match &self.export_error {
            Some(e) => format!("device via peermem (dma-buf export: {e})"),
            None => format!("device via {}", self.path()),
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn registration(&mut self) -> Registration {
        use std::os::fd::AsRawFd;
        match &self.dmabuf {
            Some(fd) => Registration::DmaBuf {
                fd: fd.as_raw_fd(),
                offset: 0,
                len: self.len,
                // The region's addresses as the peer sees them: the device address, as with
                // peermem, so remote WRITEs use the same numbers either way.
                iova: self.buf.ptr(),
            },
            None => Registration::PeerMem {
                addr: self.buf.ptr() as *mut u8,
                len: self.len,
            },
        }
    }

    fn read(&mut self, off: usize, len: usize) -> Option<&[u8]> {
        off.checked_add(len).filter(|e| *e <= self.len)?;
        // The engine's threads do not carry the context: make it current for the copy.
        self.ctx.make_current().ok()?;
        self.staging.resize(len, 0);
        self.buf.download_at(off, &mut self.staging).ok()?;
        Some(&self.staging)
    }

    fn write(&mut self, off: usize, data: &[u8]) -> bool {
        match off.checked_add(data.len()) {
            Some(end) if end <= self.len => {
                self.ctx.make_current().is_ok() && self.buf.upload_at(off, data).is_ok()
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_buffer_bounds() {
        let mut b = HostProvider.allocate(100).expect("alloc");
        assert_eq!(b.len(), 100);
        assert_eq!(b.kind(), "host");
        assert!(b.write(90, &[1u8; 10]));
        assert!(!b.write(91, &[1u8; 10]));
        assert!(!b.write(usize::MAX, &[1u8]));
        assert_eq!(b.read(90, 10), Some(&[1u8; 10][..]));
        assert_eq!(b.read(95, 6), None);
        assert_eq!(b.read(usize::MAX, 2), None);
        match b.registration() {
            Registration::Host { addr, len } => {
                assert_eq!(len, 100);
                assert_eq!(addr as usize % 64, 0);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(HostBuffer::new(0).is_err());
    }

    #[test]
    fn unknown_kind_is_refused() {
        assert!(matches!(provider("hbm", 0), Err(RdmaError::Invalid(_))));
        assert_eq!(provider("host", 7).expect("host").kind(), "host");
    }

    /// On a GPU host (validated on the lent H100/H200): both GPU kinds allocate, round-trip
    /// bytes at an offset, refuse out-of-range access and say how the NIC would reach them.
    /// Elsewhere the providers report the GPU as unavailable (a skip), never a panic.
    #[test]
    fn gpu_kinds_round_trip_or_are_unavailable() {
        for kind in ["host_pinned", "device"] {
            let p = match provider(kind, 0) {
                Ok(p) => p,
                Err(RdmaError::Unavailable(why)) => {
                    eprintln!("{kind}: unavailable here: {why}");
                    continue;
                }
                Err(e) => panic!("{kind}: {e}"),
            };
            let mut b = p.allocate(100_000).expect("allocate");
            assert_eq!(b.kind(), kind);
            assert_eq!(b.len(), 100_000);
            let data: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
            assert!(b.write(50_000, &data));
            assert_eq!(b.read(50_000, 4096), Some(&data[..]));
            assert_eq!(b.read(0, 16), Some(&[0u8; 16][..]), "{kind}: zeroed");
            assert!(!b.write(99_999, &[1, 2]));
            assert_eq!(b.read(99_990, 11), None);
            let how = match b.registration() {
                Registration::Host { addr, len } => {
                    assert!(!addr.is_null());
                    assert_eq!(len, 100_000);
                    "host"
                }
                Registration::DmaBuf { fd, len, .. } => {
                    assert!(fd >= 0);
                    assert_eq!(len, 100_000);
                    "dma-buf"
                }
                Registration::PeerMem { addr, .. } => {
                    assert!(!addr.is_null());
                    "peermem"
                }
            };
            eprintln!("{kind}: registers as {how}");
            if kind == "host_pinned" {
                assert_eq!(how, "host");
            }
        }
    }
}
