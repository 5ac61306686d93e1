//! Buffer descriptors and their 64-bit atomic state word.
//!
//! One descriptor per buffer, padded to a cache line so that two buffers'
//! state words never share a line (PostgreSQL pads `BufferDesc` to 64 bytes).
//! Almost everything about a buffer lives in one `AtomicU64`, laid out like
//! PostgreSQL master's (commit dac328c8a6), minus the content lock, which is a
//! separate `parking_lot` reader-writer lock here:
//!
//! ```text
//!  63      33 32 31 30 29 28 27 26 25 24 23 22 21    18 17               0
//! +----------+--+--+--+--+--+--+--+--+--+--+--+--------+------------------+
//! |  unused  |PB|PM|CN|IW|HD|IE|IO|TV|VA|DI|LK| usage  |    refcount      |
//! +----------+--+--+--+--+--+--+--+--+--+--+--+--------+------------------+
//!   LK = header lock (BM_LOCKED)        IO = I/O in progress
//!   DI = dirty                          IE = last I/O failed
//!   VA = valid (page contents loaded)   HD = dirtied by hint bits only
//!   TV = tag valid (in mapping table)   CN = checkpoint needed
//!   PM = permanent (WAL-logged relation) IW = a thread waits for the I/O
//!   PB = in its partition's probation queue (probation evictor only)
//!
//!   usage, clock evictor:   a count 0..=5 (BM_MAX_USAGE_COUNT)
//!   usage, HOT/COOL:        bit 18 = HOT (0 = COOL), bit 19 = reference bit
//!   usage, probation:       as HOT/COOL, plus bit 32 (PB)
//! ```
//!
//! `PB` is outside [`FLAG_MASK`] and [`USAGE_MASK`] on purpose: invalidating
//! a buffer clears those, but a buffer in the probation queue stays in it
//! (tagless) until the queue's head reaches it, so the bit must stay true
//! (see [`crate::replacement::evictor`]).
//!
//! Bit 28, PostgreSQL's old `BM_JUST_DIRTIED`, is reused for "dirtied by hint
//! bits only", which statistics report and which the full-page-image-for-hint
//! rule needs.
//!
//! # Rules
//! 1. The refcount and usage bits change by CAS (pin, sweep tick) or by
//!    `fetch_sub` (unpin). A pin never proceeds while the header lock is held.
//! 2. The header lock (`LK`) is taken with one `fetch_or` on the fast path and a
//!    bounded spin with backoff under contention ([`BufferDesc::lock_header`]).
//!    While it is held only unpins (`fetch_sub` of the refcount) and I/O
//!    waiters announcing themselves (`fetch_or` of `IW`) may change the word,
//!    so unlocking is a CAS loop that preserves both.
//! 3. The tag may change only while holding the header lock and the mapping
//!    partition lock in exclusive mode, and only when the changer holds the one
//!    pin. It may be read by anyone holding a pin (it cannot change under a
//!    pin) or the header lock. It may also be read with no pin at all, as a
//!    guess (the lock-free lookup does, before pinning): such a read may be
//!    stale or mix two tags, and is confirmed by reading it again once pinned
//!    on a `TAG_VALID` state.
//! 4. The page version (`version`, a counter beside the state word) is odd
//!    exactly while a thread may be changing the page's bytes under the
//!    exclusive content lock: it goes up by one when the lock is taken
//!    exclusively and by one again just before that lock is released
//!    (`BufferDesc::lock_content_exclusive` /
//!    `BufferDesc::unlock_content_exclusive`, the only ways this crate
//!    takes and releases it). Every tag change goes up by two
//!    (`BufferDesc::set_tag`), before the bytes of the next page are
//!    read or zeroed in. An increment is a `Release` read-modify-write
//!    followed by a `Release` fence, so a reader that sees any byte
//!    written after it also sees the new version (crossbeam's seqlock
//!    argument). An optimistic reader (arena rule 4, the crate README's
//!    rule 10) takes an even version, reads, and keeps what it read only if
//!    the version is unchanged afterwards
//!    ([`BufferDesc::optimistic_begin`], [`BufferDesc::optimistic_validate`]).

use std::sync::atomic::Ordering;

use parking_lot::lock_api::RawRwLock as _;

// From the facade, so the model tests can swap in shuttle's (`crate::sync`).
use crate::sync::{AtomicU32, AtomicU64, Condvar, Mutex, RawRwLock, fence};

use crate::tag::{BufferTag, Fork, RelId};

/// A buffer number: index into the descriptor and page arrays.
pub type BufferId = u32;

/// One pin.
pub const REFCOUNT_ONE: u64 = 1;
/// The refcount field (18 bits, PostgreSQL's `BUF_REFCOUNT_MASK`).
pub const REFCOUNT_MASK: u64 = (1 << 18) - 1;
/// Shift of the 4-bit usage field.
pub const USAGE_SHIFT: u32 = 18;
/// One unit of usage count.
pub const USAGE_ONE: u64 = 1 << USAGE_SHIFT;
/// The usage field.
pub const USAGE_MASK: u64 = 0xF << USAGE_SHIFT;
/// The clock's ceiling (PostgreSQL's `BM_MAX_USAGE_COUNT`): a buffer needs up
/// to six passes of the hand to be evicted.
pub const MAX_USAGE_COUNT: u64 = 5;

/// HOT/COOL: the page is HOT (bit 0 of the usage field). Clear means COOL.
pub const HOT: u64 = 1 << USAGE_SHIFT;
/// HOT/COOL: the reference bit, a second chance (bit 1 of the usage field).
pub const REFBIT: u64 = 1 << (USAGE_SHIFT + 1);

/// Header lock.
pub const LOCKED: u64 = 1 << 22;
/// The page differs from its copy on disk.
pub const DIRTY: u64 = 1 << 23;
/// The page contents are loaded and may be used.
pub const VALID: u64 = 1 << 24;
/// The tag is set and the buffer is in the mapping table.
pub const TAG_VALID: u64 = 1 << 25;
/// A read or write of the page is in flight.
pub const IO_IN_PROGRESS: u64 = 1 << 26;
/// The last I/O on this buffer failed.
pub const IO_ERROR: u64 = 1 << 27;
/// The page was dirtied by hint bits only (no WAL-logged change since its last write).
pub const HINT_DIRTY: u64 = 1 << 28;
/// Someone sleeps in `wait_io_unless` (PostgreSQL's bit 29 is `BM_PIN_COUNT_WAITER`,
/// which we do not need): ending an I/O takes the sleep mutex only if set.
pub const IO_WAITERS: u64 = 1 << 29;
/// A checkpoint wants this page written.
pub const CHECKPOINT_NEEDED: u64 = 1 << 30;
/// The relation is WAL-logged: WAL must be flushed before the page is written.
pub const PERMANENT: u64 = 1 << 31;

/// Probation evictor: the buffer is in its partition's probation queue (or is
/// being put back there by the thread that took it off). Set when a page is
/// admitted to probation, cleared only by the thread that took the buffer
/// off the queue's head (promotion to the main region, or eviction).
pub const PROBATION: u64 = 1 << 32;

/// Every flag bit (what an invalidated buffer clears).
pub const FLAG_MASK: u64 = DIRTY
    | VALID
    | TAG_VALID
    | IO_IN_PROGRESS
    | IO_ERROR
    | HINT_DIRTY
    | IO_WAITERS
    | CHECKPOINT_NEEDED
    | PERMANENT;

/// Refcount of a state word.
#[inline]
pub const fn refcount(state: u64) -> u64 {
    state & REFCOUNT_MASK
}

/// Usage field of a state word (a count for the clock, HOT|REF bits for HOT/COOL).
#[inline]
pub const fn usage(state: u64) -> u64 {
    (state & USAGE_MASK) >> USAGE_SHIFT
}

/// One buffer as a reader of its state word sees it: the word decoded into
/// its marks (what the live view draws and pg_buffercache rows show). The
/// usage bits mean different things to each replacement policy, so their
/// reading comes in from the policy: [`BufferState::from_word`] (beside
/// `Evictor` in `evictor.rs`) decodes a word under a policy's meaning.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct BufferState {
    /// Holds a valid page (`VALID` and `TAG_VALID`); an empty buffer's other
    /// fields are whatever the word held and mean nothing much.
    pub valid: bool,
    /// `Evictor::usage_level`: the clock's count 0..=5, or 1 = HOT, 0 = COOL.
    pub usage: u8,
    pub dirty: bool,
    pub pins: u32,
    /// A read or write of the page is in flight.
    pub io_in_progress: bool,
    /// Probation evictor: in its partition's probation queue.
    pub probation: bool,
}

impl BufferState {
    /// Decode a state word whose usage bits read as `usage` (the policy's
    /// usage level of that word).
    pub const fn decode(state: u64, usage: u8) -> BufferState {
        BufferState {
            valid: state & (VALID | TAG_VALID) == VALID | TAG_VALID,
            usage,
            dirty: state & DIRTY != 0,
            pins: refcount(state) as u32,
            io_in_progress: state & IO_IN_PROGRESS != 0,
            probation: state & PROBATION != 0,
        }
    }
}

/// Sentinel for "no relation" in the packed tag.
const NO_TAG: u64 = u64::MAX;

/// The relation-and-fork word of a tag as the descriptor stores it.
#[inline]
const fn pack_relfork(t: BufferTag) -> u64 {
    ((t.rel.0 as u64) << 8) | t.fork as u64
}

/// A buffer descriptor: everything about one buffer except its page.
///
/// `#[repr(align(64))]`: one cache line each, so neighbouring buffers' state
/// words never false-share.
#[repr(align(64))]
pub struct BufferDesc {
    /// The state word (see the module docs). Atomic.
    pub(crate) state: AtomicU64,
    /// `(relation << 8) | fork`, or `NO_TAG`. Changed under rule 3.
    relfork: AtomicU64,
    /// Block number half of the tag. Changed under rule 3.
    block: AtomicU32,
    /// The content lock: shared / upgradable (= share-exclusive) / exclusive.
    pub(crate) content: RawRwLock,
    /// The page version (rule 4): odd while the page may be changing under
    /// the exclusive content lock, bumped by two at every tag change.
    version: AtomicU64,
    /// The sweep partition the buffer belongs to (`PartitionMap::partition_of`,
    /// fixed when the pool opens), kept here so the hit path can find its
    /// statistics block without a division.
    part: u32,
    /// Waiters for `IO_IN_PROGRESS` to clear sleep here. The mutex protects
    /// nothing but the sleep itself (the flag is in `state`).
    io_mutex: Mutex<()>,
    io_done: Condvar,
}

impl std::fmt::Debug for BufferDesc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferDesc")
            .field("state", &format_args!("{:#x}", self.load()))
            .field("tag", &self.tag())
            .field("content_locked", &self.content.is_locked())
            .finish()
    }
}

/// Marker of a shared content-lock acquisition (parking_lot's raw lock API
/// hands one out per acquisition and takes it back on release).
pub(crate) type SharedMark = <RawRwLock as parking_lot::lock_api::RawRwLock>::SharedGuard;
/// Marker of an exclusive acquisition.
pub(crate) type ExclusiveMark = <RawRwLock as parking_lot::lock_api::RawRwLock>::ExclusiveGuard;
/// Marker of a share-exclusive (upgradable) acquisition.
pub(crate) type UpgradableMark =
    <RawRwLock as parking_lot::lock_api::RawRwLockUpgrade>::UpgradableGuard;

impl BufferDesc {
    #[cfg(test)]
    pub(crate) fn new() -> BufferDesc {
        BufferDesc::in_partition(0)
    }

    /// A descriptor of a buffer of sweep partition `part`.
    pub(crate) fn in_partition(part: usize) -> BufferDesc {
        BufferDesc {
            state: AtomicU64::new(0),
            relfork: AtomicU64::new(NO_TAG),
            block: AtomicU32::new(0),
            part: part as u32,
            content: <RawRwLock as parking_lot::lock_api::RawRwLock>::INIT,
            version: AtomicU64::new(0),
            io_mutex: Mutex::new(()),
            io_done: Condvar::new(),
        }
    }

    /// The sweep partition of this buffer.
    #[inline]
    pub fn partition(&self) -> usize {
        self.part as usize
    }

    /// The current state word.
    #[inline]
    pub fn load(&self) -> u64 {
        self.state.load(Ordering::Acquire)
    }

    /// The buffer's tag, if it has one. The caller holds a pin or the header lock.
    #[inline]
    pub fn tag(&self) -> Option<BufferTag> {
        let rf = self.relfork.load(Ordering::Relaxed);
        if rf == NO_TAG {
            return None;
        }
        Some(BufferTag {
            rel: RelId((rf >> 8) as u32),
            fork: Fork::from_u8((rf & 0xFF) as u8).unwrap_or(Fork::Main),
            block: self.block.load(Ordering::Relaxed),
        })
    }

    /// Does the buffer carry `tag`? Two loads and compares of the packed
    /// words, for the hit path. Under a pin or the header lock the answer is
    /// exact; without, a guess (rule 3).
    #[inline]
    pub fn has_tag(&self, tag: BufferTag) -> bool {
        self.relfork.load(Ordering::Relaxed) == pack_relfork(tag)
            && self.block.load(Ordering::Relaxed) == tag.block
    }

    /// Set or clear the tag. The caller follows rule 3. The version goes up
    /// by two first (rule 4): an optimistic read that overlaps the change,
    /// or the filling of the buffer with its next page, fails validation.
    pub(crate) fn set_tag(&self, tag: Option<BufferTag>) {
        self.bump_version(2);
        match tag {
            Some(t) => {
                self.block.store(t.block, Ordering::Relaxed);
                self.relfork.store(pack_relfork(t), Ordering::Relaxed);
            }
            None => self.relfork.store(NO_TAG, Ordering::Relaxed),
        }
    }

    /// Take the header lock; returns the state word as it is now (with `LOCKED`).
    ///
    /// Fast path: one `fetch_or`. Slow path: spin reading until the bit clears,
    /// with PostgreSQL-style backoff ([`SpinDelay`]).
    #[inline]
    pub fn lock_header(&self) -> u64 {
        let old = self.state.fetch_or(LOCKED, Ordering::Acquire);
        if old & LOCKED == 0 {
            return old | LOCKED;
        }
        self.lock_header_slow()
    }

    #[cold]
    fn lock_header_slow(&self) -> u64 {
        let mut delay = SpinDelay::new();
        loop {
            while self.state.load(Ordering::Relaxed) & LOCKED != 0 {
                delay.spin();
            }
            let old = self.state.fetch_or(LOCKED, Ordering::Acquire);
            if old & LOCKED == 0 {
                return old | LOCKED;
            }
        }
    }

    /// Release the header lock, clearing `unset` then setting `set`. Unpins may
    /// have lowered the refcount meanwhile, so this is a CAS loop (PostgreSQL's
    /// `UnlockBufHdrExt`). Returns the new state.
    #[inline]
    pub fn unlock_header(&self, set: u64, unset: u64) -> u64 {
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            debug_assert!(cur & LOCKED != 0, "unlocking an unlocked header");
            let new = ((cur & !unset) | set) & !LOCKED;
            match self
                .state
                .compare_exchange_weak(cur, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return new,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Wait until the header lock is free; returns the state seen then.
    #[inline]
    pub fn wait_header_unlocked(&self) -> u64 {
        let mut delay = SpinDelay::new();
        loop {
            let s = self.state.load(Ordering::Acquire);
            if s & LOCKED == 0 {
                return s;
            }
            delay.spin();
        }
    }

    /// Drop one pin. Never changes usage (PostgreSQL's `UnpinBuffer`).
    #[inline]
    pub fn unpin(&self) {
        let old = self.state.fetch_sub(REFCOUNT_ONE, Ordering::Release);
        debug_assert!(refcount(old) > 0, "unpin of an unpinned buffer");
    }

    /// Sleep until `IO_IN_PROGRESS` is clear. Sets `IO_WAITERS` (under the
    /// sleep mutex) before each look, so the thread ending the I/O knows to wake us.
    /// Before each sleep asks `check`
    /// (under the sleep mutex) and returns what it finds instead of
    /// sleeping: for an I/O that the waiter can finish itself (a stream's
    /// submitted read). A thread that makes `check` succeed calls
    /// [`wake_io_waiters`](Self::wake_io_waiters) afterwards, so a waiter
    /// asleep since its last look asks again.
    pub(crate) fn wait_io_unless<T>(&self, mut check: impl FnMut() -> Option<T>) -> Option<T> {
        let mut guard = self.io_mutex.lock();
        while self.state.fetch_or(IO_WAITERS, Ordering::AcqRel) & IO_IN_PROGRESS != 0 {
            if let Some(t) = check() {
                return Some(t);
            }
            self.io_done.wait(&mut guard);
        }
        None
    }

    /// Wake every thread in [`wait_io_unless`](Self::wait_io_unless) so it
    /// looks again.
    pub(crate) fn wake_io_waiters(&self) {
        let _guard = self.io_mutex.lock();
        self.io_done.notify_all();
    }

    /// End an I/O: release the header lock (held by the caller) clearing
    /// `IO_IN_PROGRESS` and `IO_WAITERS` with `set`/`unset` applied, and wake
    /// the sleepers if any announced themselves. A waiter either set
    /// `IO_WAITERS` before our CAS (we see it and take the mutex, which it
    /// holds until it sleeps) or looked after it (and saw the I/O done).
    pub(crate) fn unlock_header_end_io(&self, set: u64, unset: u64) {
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            debug_assert!(cur & LOCKED != 0, "unlocking an unlocked header");
            let new = ((cur & !(unset | IO_IN_PROGRESS | IO_WAITERS)) | set) & !LOCKED;
            match self
                .state
                .compare_exchange_weak(cur, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        if cur & IO_WAITERS != 0 {
            let _guard = self.io_mutex.lock();
            self.io_done.notify_all();
        }
    }

    /// Add `by` to the version (rule 4): the increment releases what came
    /// before it, and the fence orders it before every byte written after.
    #[inline]
    fn bump_version(&self, by: u64) {
        self.version.fetch_add(by, Ordering::Release);
        fence(Ordering::Release);
    }

    /// The current page version (rule 4), for tests and the live view.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Take the content lock exclusive and open a write: the version
    /// becomes odd (rule 4). Every exclusive acquisition in the crate goes
    /// through here or [`try_lock_content_exclusive`](Self::try_lock_content_exclusive).
    #[inline]
    pub(crate) fn lock_content_exclusive(&self) -> ExclusiveMark {
        let mark = self.content.lock_exclusive();
        self.bump_version(1);
        mark
    }

    /// [`lock_content_exclusive`](Self::lock_content_exclusive) if nobody
    /// holds the content lock; `None` otherwise (nothing changed).
    #[inline]
    pub(crate) fn try_lock_content_exclusive(&self) -> Option<ExclusiveMark> {
        let mark = self.content.try_lock_exclusive()?;
        self.bump_version(1);
        Some(mark)
    }

    /// Close the write and release the exclusive content lock: the version
    /// becomes even again (rule 4), released after every change made
    /// under the lock.
    ///
    /// # Safety
    /// `mark` comes from this descriptor's
    /// [`lock_content_exclusive`](Self::lock_content_exclusive) or
    /// [`try_lock_content_exclusive`](Self::try_lock_content_exclusive),
    /// and is released once.
    #[inline]
    pub(crate) unsafe fn unlock_content_exclusive(&self, mark: ExclusiveMark) {
        self.version.fetch_add(1, Ordering::Release);
        // SAFETY: the caller's contract: we hold the exclusive lock.
        unsafe { self.content.unlock_exclusive(mark) };
    }

    /// Begin an optimistic read of this buffer as the page `tag` (rule 4):
    /// `Some((version, state))` if no write is open, the page is valid and
    /// the buffer carries `tag`; `None` if it cannot be read that way now.
    /// Nothing is written. What is read afterwards counts only if
    /// [`optimistic_validate`](Self::optimistic_validate) accepts it.
    #[inline]
    pub fn optimistic_begin(&self, tag: BufferTag) -> Option<(u64, u64)> {
        let v = self.version.load(Ordering::Acquire);
        if v & 1 != 0 {
            return None;
        }
        let s = self.state.load(Ordering::Acquire);
        if s & (VALID | TAG_VALID) != VALID | TAG_VALID || !self.has_tag(tag) {
            return None;
        }
        Some((v, s))
    }

    /// End an optimistic read begun at `version`: `true` if nothing but
    /// atomic hint and LSN stores can have changed the page since the
    /// begin, and it is still the valid page `tag`. The acquire fence
    /// orders every byte load of the read before the version's reload.
    #[inline]
    pub fn optimistic_validate(&self, version: u64, tag: BufferTag) -> bool {
        fence(Ordering::Acquire);
        self.version.load(Ordering::Relaxed) == version
            && self.state.load(Ordering::Relaxed) & (VALID | TAG_VALID) == VALID | TAG_VALID
            && self.has_tag(tag)
    }

    /// Is the content lock held in any mode by anyone?
    pub(crate) fn content_locked(&self) -> bool {
        self.content.is_locked()
    }
}

/// Backoff for the header lock, after PostgreSQL's `perform_spin_delay`: spin
/// with a pause instruction for a while, then yield, then sleep with growing
/// delays. PostgreSQL starts sleeping at 1 ms; we yield first because on a
/// 2-core machine with more threads than cores the holder is usually just
/// descheduled, and a yield lets it run.
#[derive(Debug)]
pub struct SpinDelay {
    spins: u32,
}

/// Pause-spins before the first yield (PostgreSQL's `DEFAULT_SPINS_PER_DELAY`).
const SPINS_PER_DELAY: u32 = 100;
/// Yields before the first sleep.
const YIELDS_BEFORE_SLEEP: u32 = 100;

impl SpinDelay {
    pub fn new() -> SpinDelay {
        SpinDelay { spins: 0 }
    }

    pub fn spin(&mut self) {
        self.spins += 1;
        if self.spins < SPINS_PER_DELAY {
            crate::sync::spin_loop();
        } else if self.spins < SPINS_PER_DELAY + YIELDS_BEFORE_SLEEP {
            crate::sync::yield_now();
        } else {
            // Grow from 10 us to 1 ms; a holder descheduled for this long is rare.
            let extra = (self.spins - SPINS_PER_DELAY - YIELDS_BEFORE_SLEEP).min(100) as u64;
            crate::sync::sleep(std::time::Duration::from_micros(10 + extra * 10));
        }
    }
}

impl Default for SpinDelay {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tag::RelFork;

    // Shuttle's atomics are bigger than a machine word.
    #[cfg(not(feature = "shuttle"))]
    #[test]
    fn descriptor_is_one_cache_line() {
        assert_eq!(std::mem::align_of::<BufferDesc>(), 64);
        assert_eq!(std::mem::size_of::<BufferDesc>(), 64);
    }

    #[test]
    fn bit_positions_match_postgres() {
        assert_eq!(LOCKED, 1 << 22);
        assert_eq!(DIRTY, 1 << 23);
        assert_eq!(VALID, 1 << 24);
        assert_eq!(TAG_VALID, 1 << 25);
        assert_eq!(IO_IN_PROGRESS, 1 << 26);
        assert_eq!(PERMANENT, 1 << 31);
        assert_eq!(USAGE_ONE, 1 << 18);
        assert_eq!(usage(MAX_USAGE_COUNT * USAGE_ONE), 5);
        assert_eq!(usage(HOT | REFBIT), 0b11);
    }

    #[test]
    fn header_lock_excludes_and_unlock_keeps_concurrent_unpins() {
        let d = BufferDesc::new();
        d.state.store(3 * REFCOUNT_ONE, Ordering::Relaxed);
        let s = d.lock_header();
        assert!(s & LOCKED != 0);
        // An unpin may happen while the header is locked.
        d.unpin();
        let after = d.unlock_header(DIRTY, 0);
        assert_eq!(refcount(after), 2);
        assert!(after & DIRTY != 0 && after & LOCKED == 0);
    }

    #[test]
    fn header_lock_is_mutual_exclusion_under_threads() {
        let d = std::sync::Arc::new(BufferDesc::new());
        let counter = std::sync::Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let d = d.clone();
                let c = counter.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        d.lock_header();
                        // A non-atomic read-modify-write, protected by the lock.
                        let v = c.load(Ordering::Relaxed);
                        c.store(v + 1, Ordering::Relaxed);
                        d.unlock_header(0, 0);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(counter.load(Ordering::Relaxed), 80_000);
    }

    #[test]
    fn tag_round_trips() {
        let d = BufferDesc::new();
        assert_eq!(d.tag(), None);
        let t = BufferTag {
            rel: RelId(u32::MAX - 1),
            fork: Fork::FreeSpace,
            block: 12345,
        };
        d.set_tag(Some(t));
        assert_eq!(d.tag(), Some(t));
        d.set_tag(Some(BufferTag::new(RelFork::main(RelId(0)), 0)));
        assert_eq!(d.tag().unwrap().rel, RelId(0));
        d.set_tag(None);
        assert_eq!(d.tag(), None);
    }

    #[test]
    fn has_tag_agrees_with_tag() {
        let d = BufferDesc::new();
        let t = BufferTag::new(RelFork::main(RelId(9)), 4);
        assert!(!d.has_tag(t));
        d.set_tag(Some(t));
        assert!(d.has_tag(t));
        assert!(!d.has_tag(BufferTag::new(RelFork::main(RelId(9)), 5)));
        assert!(!d.has_tag(BufferTag::new(RelFork::main(RelId(8)), 4)));
        assert!(!d.has_tag(BufferTag {
            fork: Fork::FreeSpace,
            ..t
        }));
        d.set_tag(None);
        assert!(!d.has_tag(t));
    }
}
