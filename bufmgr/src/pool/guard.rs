//! Pins and content locks as values: dropping a guard unlocks and unpins.
//!
//! ```text
//!   pool.read_buffer(..) -> PinnedBuffer ──lock_shared()──────────> PageRead   (&[u8], hints)
//!                                        ──lock_share_exclusive()─> PageShareExclusive (&[u8])
//!                                        ──lock_exclusive()───────> PageWrite  (&mut [u8])
//!   PageRead / PageShareExclusive / PageWrite ──unlock()──> PinnedBuffer
//!   drop(any guard): unlock (if locked), then unpin
//! ```
//!
//! A content-lock guard owns its pin, so a page can never be read or written
//! without one, and `&mut [u8]` to a page exists only under the exclusive
//! lock (arena rules 1 and 2). Hints are the one change made under the shared
//! lock ([`PageRead::set_hints`]), under the buffer header lock (arena rule 3).

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering;

use parking_lot::lock_api::{RawRwLock as _, RawRwLockUpgrade as _};

use super::PoolShared;
use crate::desc::{
    BufferDesc, BufferId, CHECKPOINT_NEEDED, DIRTY, ExclusiveMark, HINT_DIRTY, IO_IN_PROGRESS,
    LOCKED, PERMANENT, SharedMark, UpgradableMark,
};
use crate::error::{Error, Result};
use crate::tag::{BlockNumber, BufferTag};

/// A pinned buffer. The page cannot be evicted while this lives; its contents
/// can be read only after taking a content lock.
#[derive(Debug)]
pub struct PinnedBuffer<'a> {
    pool: &'a PoolShared,
    id: BufferId,
}

impl<'a> PinnedBuffer<'a> {
    pub(crate) fn new(pool: &'a PoolShared, id: BufferId) -> PinnedBuffer<'a> {
        PinnedBuffer { pool, id }
    }

    fn desc(&self) -> &'a BufferDesc {
        &self.pool.descs[self.id as usize]
    }

    /// The buffer number.
    pub fn id(&self) -> BufferId {
        self.id
    }

    /// The page's identity.
    pub fn tag(&self) -> BufferTag {
        self.desc().tag().expect("a pinned valid buffer has a tag")
    }

    pub fn block(&self) -> BlockNumber {
        self.tag().block
    }

    /// Take the content lock shared.
    pub fn lock_shared(self) -> PageRead<'a> {
        let mark = self.desc().content.lock_shared();
        PageRead {
            pin: ManuallyDrop::new(self),
            mark: Some(mark),
        }
    }

    /// Take the content lock share-exclusive: excludes writers and other
    /// share-exclusive holders, admits shared readers. Needed to write a page out.
    pub fn lock_share_exclusive(self) -> PageShareExclusive<'a> {
        let mark = self.desc().content.lock_upgradable();
        PageShareExclusive {
            pin: ManuallyDrop::new(self),
            mark: Some(mark),
        }
    }

    /// Take the content lock exclusive.
    pub fn lock_exclusive(self) -> PageWrite<'a> {
        // Desc rule 4: the version is odd while this guard lives.
        let mark = self.desc().lock_content_exclusive();
        PageWrite {
            pin: ManuallyDrop::new(self),
            mark: Some(mark),
        }
    }

    /// Take the content lock exclusive if nobody holds it; else give the pin back.
    pub fn try_lock_exclusive(self) -> std::result::Result<PageWrite<'a>, PinnedBuffer<'a>> {
        match self.desc().try_lock_content_exclusive() {
            Some(mark) => Ok(PageWrite {
                pin: ManuallyDrop::new(self),
                mark: Some(mark),
            }),
            None => Err(self),
        }
    }

    /// The page's LSN, read atomically (no content lock needed).
    pub fn lsn(&self) -> u64 {
        self.pool.arena.lsn(self.id)
    }
}

impl Drop for PinnedBuffer<'_> {
    fn drop(&mut self) {
        self.desc().unpin();
    }
}

/// Take the pin back out of a lock guard without running the guard's `Drop`.
fn take_pin<'a>(pin: &mut ManuallyDrop<PinnedBuffer<'a>>) -> PinnedBuffer<'a> {
    PinnedBuffer {
        pool: pin.pool,
        id: pin.id,
    }
}

/// A page under the shared content lock.
pub struct PageRead<'a> {
    pin: ManuallyDrop<PinnedBuffer<'a>>,
    mark: Option<SharedMark>,
}

impl<'a> PageRead<'a> {
    pub fn id(&self) -> BufferId {
        self.pin.id
    }
    /// Ask the CPU for the cache line holding byte `offset` of this page,
    /// for bytes the caller reads a little later (arena rule 5): a hint,
    /// nothing read; an offset past the page asks for nothing.
    #[inline]
    pub fn prefetch(&self, offset: usize) {
        self.pin.pool.arena.prefetch(self.pin.id, offset);
    }
    pub fn tag(&self) -> BufferTag {
        self.pin.tag()
    }
    pub fn block(&self) -> BlockNumber {
        self.pin.block()
    }
    pub fn lsn(&self) -> u64 {
        self.pin.lsn()
    }

    /// Release the lock, keep the pin.
    pub fn unlock(mut self) -> PinnedBuffer<'a> {
        // SAFETY: this guard holds the shared lock; it is released exactly
        // once, here, and `forget` below stops `Drop` from releasing it again.
        unsafe {
            self.pin
                .desc()
                .content
                .unlock_shared(self.mark.take().expect("locked"))
        };
        let pin = take_pin(&mut self.pin);
        std::mem::forget(self);
        pin
    }

    /// Set one hint: OR `bits` into the little-endian `u16` at `offset`.
    /// See [`set_hints`](Self::set_hints).
    pub fn set_hint(&self, offset: usize, bits: u16) -> Result<bool> {
        self.set_hints(&[(offset, bits)])
    }

    /// Apply all of a page's pending hints in one header-lock hold (Andres Freund's
    /// "set the hint bit while holding the buffer header lock", pgsql-hackers), marking the page
    /// dirty as a hint-only change.
    ///
    /// Returns `Ok(false)` without changing anything while a write of the page
    /// is in flight: it is only a hint, the next reader sets it again.
    /// With checksums on, the first hint-dirtying of a permanent page asks the
    /// WAL for a full-page image first ([`crate::WalSink::log_hint_full_page`])
    /// and stores its LSN as the page LSN, so a torn write of the hinted page
    /// is repaired at recovery. If that WAL insert fails, the call is an
    /// error and the page is left clean (the hint bits stay in memory only),
    /// never dirty without its image. Offsets must be even and inside the page.
    pub fn set_hints(&self, hints: &[(usize, u16)]) -> Result<bool> {
        set_hints(self.pin.pool, self.pin.id, hints)
    }
}

impl Deref for PageRead<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: arena rule 1: pin and shared lock held for the guard's life.
        unsafe { self.pin.pool.arena.page(self.pin.id) }
    }
}

impl Drop for PageRead<'_> {
    fn drop(&mut self) {
        // SAFETY: this guard holds the shared lock (see `unlock`).
        unsafe {
            self.pin
                .desc()
                .content
                .unlock_shared(self.mark.take().expect("locked"))
        };
        // SAFETY: dropped exactly once, here.
        unsafe { ManuallyDrop::drop(&mut self.pin) };
    }
}

/// A page under the share-exclusive content lock.
pub struct PageShareExclusive<'a> {
    pin: ManuallyDrop<PinnedBuffer<'a>>,
    mark: Option<UpgradableMark>,
}

impl<'a> PageShareExclusive<'a> {
    pub fn tag(&self) -> BufferTag {
        self.pin.tag()
    }

    /// Release the lock, keep the pin.
    pub fn unlock(mut self) -> PinnedBuffer<'a> {
        // SAFETY: held by this guard; released once (see `PageRead::unlock`).
        unsafe {
            self.pin
                .desc()
                .content
                .unlock_upgradable(self.mark.take().expect("locked"))
        };
        let pin = take_pin(&mut self.pin);
        std::mem::forget(self);
        pin
    }

    /// Write the page now if it is dirty.
    pub fn flush(&self) -> Result<()> {
        self.pin
            .pool
            .flush_buffer(self.pin.id, super::Writer::Other, None)
    }
}

impl Deref for PageShareExclusive<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: arena rule 1.
        unsafe { self.pin.pool.arena.page(self.pin.id) }
    }
}

impl Drop for PageShareExclusive<'_> {
    fn drop(&mut self) {
        // SAFETY: held by this guard.
        unsafe {
            self.pin
                .desc()
                .content
                .unlock_upgradable(self.mark.take().expect("locked"))
        };
        // SAFETY: dropped exactly once, here.
        unsafe { ManuallyDrop::drop(&mut self.pin) };
    }
}

/// A page under the exclusive content lock: the only way to change a page
/// (besides hints).
pub struct PageWrite<'a> {
    pin: ManuallyDrop<PinnedBuffer<'a>>,
    mark: Option<ExclusiveMark>,
}

impl<'a> PageWrite<'a> {
    /// Wrap a pin whose exclusive lock the pool already took (through
    /// `BufferDesc::lock_content_exclusive`, desc rule 4).
    pub(crate) fn from_locked(pin: PinnedBuffer<'a>, mark: ExclusiveMark) -> PageWrite<'a> {
        debug_assert!(pin.desc().content_locked());
        PageWrite {
            pin: ManuallyDrop::new(pin),
            mark: Some(mark),
        }
    }

    pub fn id(&self) -> BufferId {
        self.pin.id
    }
    pub fn tag(&self) -> BufferTag {
        self.pin.tag()
    }
    pub fn block(&self) -> BlockNumber {
        self.pin.block()
    }
    pub fn lsn(&self) -> u64 {
        self.pin.lsn()
    }

    /// Set the page LSN (after WAL-logging a change to it).
    pub fn set_lsn(&mut self, lsn: u64) {
        self.pin.pool.arena.set_lsn(self.pin.id, lsn);
    }

    /// Mark the page dirty (`MarkBufferDirty`): the caller changed it, and
    /// for a permanent relation WAL-logged the change and set the page LSN.
    pub fn mark_dirty(&mut self) {
        let d = self.pin.desc();
        let mut s = d.load();
        loop {
            if s & LOCKED != 0 {
                s = d.wait_header_unlocked();
                continue;
            }
            let new = (s | DIRTY) & !HINT_DIRTY;
            match d
                .state
                .compare_exchange_weak(s, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(a) => s = a,
            }
        }
    }

    /// Is the buffer dirty?
    pub fn is_dirty(&self) -> bool {
        self.pin.desc().load() & DIRTY != 0
    }

    /// Apply hints through the hint path (they count as hint-only changes
    /// if the page was clean). Mostly for code that holds the exclusive lock
    /// for another reason and finds a hint to set on the way.
    pub fn set_hints(&self, hints: &[(usize, u16)]) -> Result<bool> {
        set_hints(self.pin.pool, self.pin.id, hints)
    }

    /// Release the lock, keep the pin.
    pub fn unlock(mut self) -> PinnedBuffer<'a> {
        // SAFETY: held by this guard, taken through `lock_content_exclusive`
        // (desc rule 4); released once (see `PageRead::unlock`).
        unsafe {
            self.pin
                .desc()
                .unlock_content_exclusive(self.mark.take().expect("locked"))
        };
        let pin = take_pin(&mut self.pin);
        std::mem::forget(self);
        pin
    }
}

impl Deref for PageWrite<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: arena rule 1 (exclusive implies shared access).
        unsafe { self.pin.pool.arena.page(self.pin.id) }
    }
}

impl DerefMut for PageWrite<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: arena rule 2: exclusive content lock held, and `&mut self`
        // means no other slice from this guard is alive.
        unsafe { self.pin.pool.arena.page_mut(self.pin.id) }
    }
}

impl Drop for PageWrite<'_> {
    fn drop(&mut self) {
        // SAFETY: held by this guard, taken through `lock_content_exclusive`.
        unsafe {
            self.pin
                .desc()
                .unlock_content_exclusive(self.mark.take().expect("locked"))
        };
        // SAFETY: dropped exactly once, here.
        unsafe { ManuallyDrop::drop(&mut self.pin) };
    }
}

macro_rules! debug_guard {
    ($($t:ident),*) => {$(
        impl std::fmt::Debug for $t<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($t))
                    .field("buffer", &self.pin.id)
                    .field("tag", &self.pin.tag())
                    .finish()
            }
        }
    )*};
}
debug_guard!(PageRead, PageShareExclusive, PageWrite);

/// The hint path shared by the guards (arena rule 3, architecture rule 6).
fn set_hints(pool: &PoolShared, id: BufferId, hints: &[(usize, u16)]) -> Result<bool> {
    if let Some(&(off, _)) = hints
        .iter()
        .find(|&&(off, _)| off % 2 != 0 || off > crate::tag::PAGE_SIZE - 2)
    {
        return Err(Error::InvalidConfig(format!(
            "hint offset {off} is odd or outside the page"
        )));
    }
    let d = &pool.descs[id as usize];
    let s = d.lock_header();
    if s & IO_IN_PROGRESS != 0 {
        d.unlock_header(0, 0);
        pool.counters.hints_refused.fetch_add(1, Ordering::Relaxed);
        return Ok(false);
    }
    for &(off, bits) in hints {
        pool.arena.or_u16(id, off, bits);
    }
    pool.counters.hints_set.fetch_add(1, Ordering::Relaxed);
    let wants_image = pool.config.checksums && s & PERMANENT != 0 && s & DIRTY == 0;
    if !wants_image {
        let set = if s & DIRTY == 0 {
            DIRTY | HINT_DIRTY
        } else {
            0
        };
        d.unlock_header(set, 0);
        return Ok(true);
    }
    // The first hint-dirtying of a permanent page with checksums on (rule 6),
    // in PostgreSQL master's order: mark the page dirty first, so a
    // checkpoint that takes its redo point from now on sees it dirty and
    // writes it; then decide on the full-page image against the redo point
    // in force; then set the page LSN. Meanwhile `IO_IN_PROGRESS` (ours)
    // keeps the page from being written before its image is in the WAL, as
    // the share-exclusive lock does in PostgreSQL: a flush waits for us.
    d.unlock_header(DIRTY | HINT_DIRTY | IO_IN_PROGRESS, 0);
    let tag = d.tag().expect("a pinned valid buffer has a tag");
    // SAFETY: arena rule 1: the caller's guard holds a pin and a content lock.
    let page = unsafe { pool.arena.page(id) };
    let logged = pool.wal.log_hint_full_page(tag, page);
    if let Ok(Some(lsn)) = logged {
        pool.counters.hint_fpis.fetch_add(1, Ordering::Relaxed);
        d.lock_header();
        if pool.arena.lsn(id) < lsn {
            pool.arena.set_lsn(id, lsn);
        }
        d.unlock_header(0, 0);
    }
    match &logged {
        Ok(_) => pool.terminate_io(id, 0, 0),
        // No image in the WAL: the page must not stay dirty, or it could be
        // written (and torn) with nothing to repair it. Nobody else can have
        // dirtied it meanwhile (our `IO_IN_PROGRESS` refuses other hints and
        // our content lock keeps writers out), so the marking is all ours
        // to undo, with any checkpoint flag a sync set on it since. The
        // hint bits stay in memory on a clean page: the next hint of the
        // page asks for the image again, an eviction drops them.
        Err(_) => pool.terminate_io(id, 0, DIRTY | HINT_DIRTY | CHECKPOINT_NEEDED),
    }
    logged.map(|_| true).map_err(|e| Error::WalFlush {
        lsn: pool.arena.lsn(id),
        tag,
        detail: format!("full-page image for a hint: {e}"),
    })
}
