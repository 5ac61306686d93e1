//! [`Counted`]: a reference-counted pointer (as `Arc`, without weak
//! references) whose references can be paid for in bulk by a [`Batch`].
//!
//! A scan hands out every kept row of a page as a handle on the page's
//! copy. With `Arc` each row cost an atomic increment when handed out and
//! an atomic decrement when dropped. A `Batch` adds the count of all the
//! rows it will hand out with one atomic addition, then hands each out
//! without touching the count again; what it has not handed out when it is
//! released or dropped it gives back with one atomic subtraction. A row
//! still costs one atomic decrement when dropped (it may be dropped on any
//! thread, so that one stays).
//!
//! Invariant: the count is the number of live `Counted` handles plus the
//! references a live `Batch` holds for handles it has not made yet. The
//! value is dropped, and its allocation freed, when the count falls to 0.
//! The orderings are `Arc`'s: an increment is `Relaxed` (it is made from a
//! live reference, which keeps the value alive), a decrement `Release`,
//! and the last one is followed by an `Acquire` fence, so every use of the
//! value through another handle happens before it is dropped.

use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering, fence};

/// A shared, reference-counted `T` (module docs).
pub(crate) struct Counted<T> {
    ptr: NonNull<Inner<T>>,
    /// Dropping a `Counted` may drop a `T`.
    _owns: PhantomData<Inner<T>>,
}

struct Inner<T> {
    count: AtomicUsize,
    value: T,
}

// SAFETY: as for `Arc<T>`: a handle gives shared access to the `T` from
// whichever thread holds it (so `T: Sync`), and the last handle drops the
// `T` on whichever thread drops it (so `T: Send`). The count is atomic.
unsafe impl<T: Send + Sync> Send for Counted<T> {}
// SAFETY: as above; `&Counted<T>` only reads the `T` or clones the handle.
unsafe impl<T: Send + Sync> Sync for Counted<T> {}

/// More references than this are a leak gone wild: abort, as `Arc` does,
/// rather than let the count wrap and free a value in use.
const MAX_COUNT: usize = isize::MAX as usize;

impl<T> Counted<T> {
    pub fn new(value: T) -> Counted<T> {
        let inner = Box::new(Inner {
            count: AtomicUsize::new(1),
            value,
        });
        Counted {
            ptr: NonNull::from(Box::leak(inner)),
            _owns: PhantomData,
        }
    }

    #[inline]
    fn inner(&self) -> &Inner<T> {
        // SAFETY: this handle is one of the count's references, so the
        // allocation is not freed while `self` is borrowed (module docs'
        // invariant); it is only read through here.
        unsafe { self.ptr.as_ref() }
    }

    /// Add `n` references to the count.
    #[inline]
    fn add(&self, n: usize) {
        if self.inner().count.fetch_add(n, Ordering::Relaxed) > MAX_COUNT - n {
            std::process::abort();
        }
    }

    /// The value, mutably, if this is its only handle and no batch holds
    /// references to it.
    pub fn get_mut(this: &mut Counted<T>) -> Option<&mut T> {
        // `Acquire`: the uses of the value through handles already dropped
        // happen before ours (their decrements are `Release`).
        if this.inner().count.load(Ordering::Acquire) != 1 {
            return None;
        }
        // SAFETY: the count is 1, and `this` holds that reference: no
        // other handle exists and no batch holds a reference. A new handle
        // is made only from an existing one (or a batch's reference), and
        // `this` is borrowed mutably for as long as the returned
        // reference lives, so none can be made meanwhile: the access is
        // exclusive.
        Some(unsafe { &mut (*this.ptr.as_ptr()).value })
    }
}

impl<T> Clone for Counted<T> {
    #[inline]
    fn clone(&self) -> Counted<T> {
        self.add(1);
        Counted {
            ptr: self.ptr,
            _owns: PhantomData,
        }
    }
}

impl<T> Deref for Counted<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.inner().value
    }
}

impl<T> Drop for Counted<T> {
    /// The decrement, inlined into the caller's loop; the last
    /// reference's work (dropping the value, freeing it) out of line, so
    /// that a row's drop is a `lock sub` and a branch, not a call.
    #[inline(always)]
    fn drop(&mut self) {
        if self.inner().count.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        self.drop_last();
    }
}

impl<T> Counted<T> {
    /// [`Drop::drop`] after the count's last reference went.
    #[cold]
    #[inline(never)]
    fn drop_last(&mut self) {
        fence(Ordering::Acquire);
        // SAFETY: the caller's decrement took the count's last reference:
        // no handle or batch can reach the allocation any more, and every
        // use of the value through the others happened before the fence.
        // It was made by `Box::leak` in `new` and is freed once, here.
        drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Counted<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// A handle and `left` references paid for in advance, each to be made
/// into a handle by [`Batch::take`] without touching the count (module
/// docs).
#[derive(Debug)]
pub(crate) struct Batch<T> {
    handle: Counted<T>,
    left: usize,
}

impl<T> Batch<T> {
    /// `handle` and `n` more references to its value, added at once.
    pub fn new(handle: Counted<T>, n: usize) -> Batch<T> {
        if n > 0 {
            handle.add(n);
        }
        Batch { handle, left: n }
    }

    /// A new handle, made of a reference paid for in [`new`](Self::new);
    /// `None` once they are all taken.
    #[inline]
    pub fn take(&mut self) -> Option<Counted<T>> {
        if self.left == 0 {
            return None;
        }
        // The reference counted for this handle passes to it.
        self.left -= 1;
        Some(Counted {
            ptr: self.handle.ptr,
            _owns: PhantomData,
        })
    }

    /// The batch's own handle.
    #[inline]
    pub fn handle(&self) -> &Counted<T> {
        &self.handle
    }

    /// Give back the references not taken: the batch's own handle is
    /// then the only thing it holds.
    pub fn release(&mut self) -> &mut Counted<T> {
        if self.left > 0 {
            // Never the last reference: the batch's handle holds one.
            self.handle
                .inner()
                .count
                .fetch_sub(self.left, Ordering::Release);
            self.left = 0;
        }
        &mut self.handle
    }
}

impl<T> Drop for Batch<T> {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    /// Counts its drops.
    struct Probe(Arc<AtomicUsize>);

    impl Drop for Probe {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn probe() -> (Counted<Probe>, Arc<AtomicUsize>) {
        let drops = Arc::new(AtomicUsize::new(0));
        (Counted::new(Probe(drops.clone())), drops)
    }

    #[test]
    fn the_value_is_dropped_once_with_its_last_handle_whatever_the_batch_did() {
        let (c, drops) = probe();
        let mut batch = Batch::new(c, 3);
        let a = batch.take().expect("a first handle");
        let b = batch.take().expect("a second handle");
        drop(batch);
        assert_eq!(drops.load(Ordering::SeqCst), 0, "two handles are live");
        let a2 = a.clone();
        drop(a);
        drop(b);
        assert_eq!(drops.load(Ordering::SeqCst), 0, "one handle is live");
        drop(a2);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_batch_hands_out_exactly_the_references_it_paid_for() {
        let (c, drops) = probe();
        let mut batch = Batch::new(c, 2);
        let taken: Vec<_> = std::iter::from_fn(|| batch.take()).collect();
        assert_eq!(taken.len(), 2);
        assert!(batch.take().is_none());
        assert!(Counted::get_mut(batch.release()).is_none(), "handles live");
        drop(taken);
        assert!(
            Counted::get_mut(batch.release()).is_some(),
            "the batch's own only"
        );
        drop(batch);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn untaken_references_block_get_mut_until_released() {
        let (c, _drops) = probe();
        let mut batch = Batch::new(c, 5);
        let mut own = batch.handle().clone();
        assert!(Counted::get_mut(&mut own).is_none());
        drop(own);
        assert!(Counted::get_mut(batch.release()).is_some());
    }

    #[test]
    fn handles_dropped_on_many_threads_drop_the_value_once() {
        let (c, drops) = probe();
        let mut batch = Batch::new(c, 64);
        let handles: Vec<_> = std::iter::from_fn(|| batch.take()).collect();
        drop(batch);
        std::thread::scope(|s| {
            for chunk in handles.chunks(8) {
                let chunk = chunk.to_vec();
                s.spawn(move || {
                    let more: Vec<_> = chunk.iter().map(Counted::clone).collect();
                    drop(chunk);
                    drop(more);
                });
            }
        });
        assert_eq!(drops.load(Ordering::SeqCst), 0, "the originals are live");
        drop(handles);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
}
