//! Buffer rings (PostgreSQL's `BufferAccessStrategy`): a small private set of
//! buffers that a bulk operation cycles through instead of flooding the pool.
//!
//! ```text
//!   slots:   [ 812 | 97 | 4410 | -- | -- | ... ]     current -> slot 2
//!   next:    current += 1; slot empty      -> take a victim from the clock sweep
//!                                             and remember it in the slot
//!                          slot holds a buffer that is unpinned and still at
//!                          the first usage step -> reuse it (no sweep)
//!                          otherwise       -> sweep; the victim replaces the slot
//! ```
//!
//! # Rules (PostgreSQL's `GetBufferFromRing`, `StrategyRejectBuffer`)
//! 1. A slot is reused only if its buffer is unpinned and nobody outside the
//!    ring has touched it since (clock: usage <= 1; HOT/COOL: still COOL).
//! 2. Pins through a ring never raise a page above the first step
//!    ([`super::evictor`]), so pages a bulk scan passes over stay cheap to evict.
//! 3. The bulk-read ring rejects a dirty permanent buffer whose write would
//!    first need a WAL flush: the slot is emptied and a fresh victim taken,
//!    leaving the dirty page to the background writer. Bulk-write and vacuum
//!    rings never reject: they flush WAL themselves and recycle.
//! 4. Sizes: bulk read 256 KiB, bulk write 16 MiB, vacuum 2 MiB, each capped
//!    at pool / 8 buffers. A ring is owned by one scan (it is `&mut`).

use crate::desc::BufferId;

/// What a ring is for.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Hash)]
pub enum RingKind {
    /// Large read-only sequential scans.
    BulkRead,
    /// Bulk loads.
    BulkWrite,
    /// Vacuum.
    Vacuum,
}

impl RingKind {
    pub const fn name(self) -> &'static str {
        match self {
            RingKind::BulkRead => "bulk-read",
            RingKind::BulkWrite => "bulk-write",
            RingKind::Vacuum => "vacuum",
        }
    }
}

const EMPTY: BufferId = BufferId::MAX;

/// A ring of buffers owned by one bulk operation. Create with
/// [`crate::BufferPool::ring`].
#[derive(Debug)]
pub struct Ring {
    kind: RingKind,
    pool_id: u64,
    slots: Box<[BufferId]>,
    current: usize,
}

impl Ring {
    pub(crate) fn new(kind: RingKind, pool_id: u64, nbuffers: usize) -> Ring {
        assert!(nbuffers > 0);
        Ring {
            kind,
            pool_id,
            slots: vec![EMPTY; nbuffers].into_boxed_slice(),
            // Start just before slot 0 so the first advance lands on it.
            current: nbuffers - 1,
        }
    }

    pub fn kind(&self) -> RingKind {
        self.kind
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub(crate) fn pool_id(&self) -> u64 {
        self.pool_id
    }

    /// Advance to the next slot; its buffer, if it holds one.
    pub(crate) fn advance(&mut self) -> Option<BufferId> {
        self.current = (self.current + 1) % self.slots.len();
        match self.slots[self.current] {
            EMPTY => None,
            b => Some(b),
        }
    }

    /// Grow to `n` slots (no change if it has as many already): the new
    /// slots are empty and filled from the clock sweep as the ring goes
    /// round. For a read stream, whose distance the ring must hold
    /// (`BufferPool::read_stream`); the caller keeps the pool / 8 cap.
    pub(crate) fn grow_to(&mut self, n: usize) {
        if n > self.slots.len() {
            let mut slots = std::mem::take(&mut self.slots).into_vec();
            slots.resize(n, EMPTY);
            self.slots = slots.into_boxed_slice();
        }
    }

    /// Remember a sweep victim in the current slot.
    pub(crate) fn set_current(&mut self, buf: BufferId) {
        self.slots[self.current] = buf;
    }

    /// Rule 3: should this dirty ring buffer be given up instead of written?
    /// Empties the slot if so.
    pub(crate) fn reject(&mut self, buf: BufferId, needs_wal_flush: bool) -> bool {
        if self.kind != RingKind::BulkRead || !needs_wal_flush || self.slots[self.current] != buf {
            return false;
        }
        self.slots[self.current] = EMPTY;
        true
    }

    /// Buffers currently remembered in the ring.
    pub fn members(&self) -> impl Iterator<Item = BufferId> + '_ {
        self.slots.iter().copied().filter(|&b| b != EMPTY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_fill_then_cycle() {
        let mut r = Ring::new(RingKind::BulkRead, 1, 3);
        for b in [10, 11, 12] {
            assert_eq!(r.advance(), None);
            r.set_current(b);
        }
        assert_eq!(r.advance(), Some(10));
        assert_eq!(r.advance(), Some(11));
        assert_eq!(r.members().count(), 3);
    }

    #[test]
    fn only_bulk_read_rejects_and_only_when_wal_flush_is_needed() {
        let mut r = Ring::new(RingKind::BulkRead, 1, 2);
        r.advance();
        r.set_current(5);
        assert!(!r.reject(5, false), "no WAL flush needed: write it");
        assert!(!r.reject(6, true), "not the current slot's buffer");
        assert!(r.reject(5, true));
        assert_eq!(r.members().count(), 0, "slot emptied");

        for kind in [RingKind::BulkWrite, RingKind::Vacuum] {
            let mut r = Ring::new(kind, 1, 2);
            r.advance();
            r.set_current(5);
            assert!(!r.reject(5, true), "{kind:?} never rejects");
        }
    }
}
