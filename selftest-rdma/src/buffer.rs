//! Where the memory an RDMA test registers comes from.
//!
//! The engine asks a [`BufferProvider`] for its buffers and registers whatever it gets: plain
//! host memory today; pinned CUDA host memory (`host_pinned`) and GPU memory exported as a
//! dma-buf (`device`, GPUDirect) plug in here when the GPU sink lands, without touching the
//! engine. A buffer says how it is registered ([`Registration`]) and, where the CPU can see it,
//! gives the verifier a view of its bytes.

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
    /// Bytes `[off, off + len)` for the CPU verifier; `None` when the CPU cannot read this
    /// memory (device memory is verified by the GPU sink instead) or the range is outside.
    fn read(&self, off: usize, len: usize) -> Option<&[u8]>;
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

    fn read(&self, off: usize, len: usize) -> Option<&[u8]> {
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
}
