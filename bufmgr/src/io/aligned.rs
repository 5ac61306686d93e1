//! [`AlignedBuf`]: page buffers aligned for `O_DIRECT`.

use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The alignment `O_DIRECT` buffers get here: 4 KiB covers every logical
/// block size Linux file systems use (512 B or 4 KiB).
pub const DIRECT_ALIGN: usize = 4096;

/// Whether `buf` can be handed to an `O_DIRECT` read or write as it is.
pub(crate) fn is_direct_aligned(buf: &[u8]) -> bool {
    ((buf.as_ptr() as usize) | buf.len()) & (DIRECT_ALIGN - 1) == 0
}

/// A zeroed heap buffer aligned to `DIRECT_ALIGN` (4 KiB): what the backends copy
/// through (a bounce buffer) when a caller's buffer is not aligned for
/// `O_DIRECT`, and what tests and tools can use to avoid the copy.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: an AlignedBuf owns its allocation exclusively, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`, like a Box<[u8]>.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `len` zero bytes (`len` > 0).
    pub fn zeroed(len: usize) -> AlignedBuf {
        assert!(len > 0, "an AlignedBuf must not be empty");
        let layout = Layout::from_size_align(len, DIRECT_ALIGN).expect("a valid layout");
        // SAFETY: the layout has a non-zero size (asserted above).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }

    /// A copy of `data` (non-empty).
    pub fn copy_of(data: &[u8]) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(data.len());
        b.copy_from_slice(data);
        b
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len, DIRECT_ALIGN).expect("a valid layout");
        // SAFETY: `ptr` came from `alloc_zeroed` with this same layout and is
        // freed only here.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points to `len` initialised (zeroed) bytes owned by
        // self, borrowed for the lifetime of `&self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBuf({} bytes)", self.len)
    }
}
