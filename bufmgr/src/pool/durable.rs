//! Durable lengths: how far each relation fork is known to be on disk, and
//! the rule for an all-zero page that follows from it.
//!
//! Extending a relation writes a blank page (checksum stamped) but does not
//! fsync it; that happens at the next checkpoint (`flush_all`). A power loss
//! in between can keep the file's new length and lose the blank page's
//! bytes, leaving a page of zeros, checksum included, that no WAL record
//! describes (the page's first change, if any, was never flushed either:
//! WAL before data). Such a page is a new page, as PostgreSQL reads every
//! all-zero page (`PageIsNew`). An all-zero page below the length the fork
//! had at a successful fsync is different: it was written with content and
//! made durable, so zeros there are damage, and stay an error
//! ([`Error::ZeroedPage`](crate::Error::ZeroedPage)).
//!
//! Rules:
//! 1. Every successful fsync of a fork raises its durable length to the
//!    number of blocks it had just before the fsync (every block below was
//!    written, at least blank, before the call).
//! 2. The owner of the WAL persists the lengths ([`BufferPool::durable_lengths`],
//!    logged at each checkpoint) and hands them back after a crash
//!    ([`BufferPool::note_durable_lengths`]).
//! 3. With [`BufferPool::set_zeroed_beyond_durable_is_new`] on, a page read
//!    with checksums on that is all zeros and at or beyond its fork's durable
//!    length (0 for a fork with no known length) reads as a new page; the
//!    decision is [`PoolShared::zeroed_page_is_new`], the one place the rule
//!    lives. Off (the default), every all-zero page is an error, as before.
//!    A page read as new becomes in memory the blank page the extension
//!    meant to write (checksum stamped) and is marked dirty: the next
//!    checkpoint writes it before the fsync that makes the block durable,
//!    so the rule never has to accept zeros below a durable length.
//! 4. Dropping a relation forgets its lengths; truncating lowers them.
//! 5. After a crash, before anything fsyncs a fork, every block at or beyond
//!    its durable length is read once ([`BufferPool::settle_beyond_durable`]):
//!    zeros the crash left there become dirty blank pages (rule 3), written
//!    before the fsync that raises the durable length past them. Without
//!    this, a zero page nobody read would be inside durable data after the
//!    next checkpoint, and read as damage after the next crash.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use super::{BufferPool, PoolShared};
use crate::error::Result;
use crate::replacement::ring::RingKind;
use crate::tag::{BlockNumber, BufferTag, RelFork, RelId};

/// Per fork, blocks known durable (rule 1).
pub(super) type DurableLengths = HashMap<RelFork, BlockNumber>;

impl BufferPool {
    /// Turn rule 3 (module docs) on or off.
    pub fn set_zeroed_beyond_durable_is_new(&self, on: bool) {
        self.shared
            .zeroed_beyond_durable_is_new
            .store(on, Ordering::Release);
    }

    /// Raise the durable lengths of these forks (lengths only grow here):
    /// recovery hands back what a checkpoint logged.
    pub fn note_durable_lengths(&self, lengths: impl IntoIterator<Item = (RelFork, BlockNumber)>) {
        let mut m = self.shared.durable.lock();
        for (rf, n) in lengths {
            let e = m.entry(rf).or_insert(0);
            *e = (*e).max(n);
        }
    }

    /// Every fork's durable length that is known, in (relation, fork) order,
    /// leaving out forks whose file no longer exists.
    pub fn durable_lengths(&self) -> Vec<(RelFork, BlockNumber)> {
        let mut v: Vec<(RelFork, BlockNumber)> = self
            .shared
            .durable
            .lock()
            .iter()
            .map(|(rf, n)| (*rf, *n))
            .collect();
        v.retain(|(rf, _)| self.shared.storage.exists(*rf).unwrap_or(true));
        v.sort_by_key(|(rf, _)| (rf.rel, rf.fork as u8));
        v
    }

    /// Rule 5: read every block at or beyond its fork's durable length
    /// through a bulk-read ring, calling `visit(fork, block, page LSN)` for
    /// each as it is read (a page read as new has LSN 0), so that a
    /// caller's checks of those pages ride on the same pass; returns
    /// (blocks read, all-zero ones made new pages). Run with rule 3 on,
    /// after recovery, before any fsync.
    pub fn settle_beyond_durable(
        &self,
        mut visit: impl FnMut(RelFork, BlockNumber, u64),
    ) -> Result<(u64, u64)> {
        let zero_before = self.zeroed_pages_read_as_new();
        let mut ring = self.ring_forced(RingKind::BulkRead, 256);
        let mut read = 0;
        for rf in self.shared.storage.relations()? {
            let from = self.durable_length(rf).unwrap_or(0);
            for block in from..self.nblocks(rf)? {
                let lsn = self.read_buffer(rf, block, ring.as_mut())?.lsn();
                visit(rf, block, lsn);
                read += 1;
            }
        }
        Ok((read, self.zeroed_pages_read_as_new() - zero_before))
    }

    /// All-zero pages read as new pages since the pool opened (rule 3).
    pub fn zeroed_pages_read_as_new(&self) -> u64 {
        self.shared.zeroed_new_pages.load(Ordering::Relaxed)
    }

    /// The durable length of `rf`, if known.
    pub fn durable_length(&self, rf: RelFork) -> Option<BlockNumber> {
        self.shared.durable.lock().get(&rf).copied()
    }
}

impl PoolShared {
    /// Rule 3: does an all-zero page at `tag` read as a new page?
    pub(crate) fn zeroed_page_is_new(&self, tag: BufferTag) -> bool {
        self.zeroed_beyond_durable_is_new.load(Ordering::Acquire)
            && tag.block
                >= self
                    .durable
                    .lock()
                    .get(&tag.relfork())
                    .copied()
                    .unwrap_or(0)
    }

    /// Rule 1: `rf` had `nblocks` blocks when an fsync of it began, and the
    /// fsync succeeded.
    pub(super) fn synced(&self, rf: RelFork, nblocks: BlockNumber) {
        let mut m = self.durable.lock();
        let e = m.entry(rf).or_insert(0);
        *e = (*e).max(nblocks);
    }

    /// Rule 4.
    pub(super) fn forget_durable(&self, rel: RelId) {
        self.durable.lock().retain(|rf, _| rf.rel != rel);
    }

    /// Rule 4.
    pub(super) fn truncate_durable(&self, rf: RelFork, nblocks: BlockNumber) {
        if let Some(n) = self.durable.lock().get_mut(&rf) {
            *n = (*n).min(nblocks);
        }
    }
}
