//! Raw views of registered memory. The NIC reads and writes these bytes without the compiler
//! knowing, so buffers keep them behind raw pointers and the engine looks at a region only when
//! a completion says the NIC is done with it.

/// `len` bytes at `base + off`.
pub(crate) fn view<'a>(base: *const u8, off: usize, len: usize) -> &'a [u8] {
    // SAFETY: callers (HostBuffer::read) check `off + len` against the allocation behind `base`,
    // which outlives the returned slice because the slice borrows the buffer that owns it.
    unsafe { std::slice::from_raw_parts(base.add(off), len) }
}

/// Copies `data` to `base + off`.
pub(crate) fn copy_in(base: *mut u8, off: usize, data: &[u8]) {
    // SAFETY: callers (HostBuffer::write) check `off + data.len()` against the allocation behind
    // `base`; `data` is a distinct Rust slice, so the regions cannot overlap.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), base.add(off), data.len()) }
}
