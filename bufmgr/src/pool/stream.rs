//! Reads in two steps and read streams (PostgreSQL 17's `StartReadBuffers` /
//! `WaitReadBuffers` and `read_stream.c`).
//!
//! # Start, then wait
//! `PoolShared::start_read_buffers` takes consecutive blocks of one fork
//! and, for each, does what `read_buffer` does up to the read itself
//! (`start_buffer`, steps 1-6 of a miss): a hit is pinned; a miss gets a
//! victim, tagged `TAG_VALID | IO_IN_PROGRESS` owned by the operation; a page
//! another thread is reading (or whose read failed) is pinned and left for
//! the wait. Starting never waits for anyone's I/O.
//!
//! `ReadOp::wait` then
//! 1. issues the operation's own reads: runs of adjacent misses, at most
//!    `io_combine` blocks each, as one [`read_run`](crate::StorageBackend::read_run)
//!    per run; lone misses together in one
//!    [`read_batch`](crate::StorageBackend::read_batch);
//! 2. per page: verifies the checksum, sets `VALID` (or `IO_ERROR`), wakes
//!    waiters, ends the I/O; a failed page is released at once (its tag
//!    forgotten, as `read_buffer` does after a failed read), so nothing is
//!    left tag-valid but never valid to block a retry or an extension. A
//!    failed combined read is read again page by page up to the first page
//!    that fails (which pages arrived is not known), so the error the
//!    consumer gets names the block where the stream stops; the pages after
//!    it in the run end their I/O with `IO_ERROR` unread;
//! 3. only then waits for the pages other threads are reading (and reads
//!    one itself if that read failed).
//!
//! Deadlock freedom: an operation finishes its own I/O before it waits for
//! anybody else's, and starting waits for nobody; so a wait is always for a
//! read that is being issued. The thread that owns a started read cannot ask
//! for the same block before the read is done: the two steps are private to
//! the crate, and the stream runs them back to back inside one call, with
//! no caller code in between (between two calls of
//! [`ReadStream::next_buffer`] the stream owns no I/O in progress, only pins
//! of valid pages).
//!
//! # The stream
//! A [`ReadStream`] yields the blocks of a range in order, each pinned. When
//! its queue is empty it starts and waits for the next `distance` blocks at
//! once, so the backend sees combined reads of up to `io_combine` blocks and,
//! with an asynchronous backend, up to `distance` blocks in flight.
//! `distance` is the configured `lookahead`, limited to
//! - the ring's size - 1, when the stream reads through a ring: every
//!   buffer the stream holds is pinned, and a pinned ring buffer is never
//!   reused, so a distance of a whole ring would make each refill take its
//!   victims from the clock sweep (flooding the pool the ring protects);
//! - pool / 8 (at least 1), as rings are: one stream must not pin the pool.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;

use super::{BufferPool, PoolShared};
use crate::desc::*;
use crate::error::{Error, Result};
use crate::guard::PinnedBuffer;
use crate::io::ReadRequest;
use crate::local::{Local, with_local};
use crate::pool::read::{ReadMode, Started};
use crate::ring::Ring;
use crate::tag::{BlockNumber, BufferTag, RelFork};

/// Default stream distance: blocks pinned (and read) ahead of the consumer.
/// 16 blocks fit the default bulk-read ring (32 buffers) with room to spare
/// and give one 128 KiB combined read per refill.
pub const DEFAULT_LOOKAHEAD: usize = 16;
/// Default combined-read size in blocks: PostgreSQL 17's `io_combine_limit`
/// default, 128 KiB.
pub const DEFAULT_IO_COMBINE: usize = 16;
/// Largest combined read: 1 MiB, PostgreSQL's `MAX_IO_COMBINE_LIMIT`.
pub const MAX_IO_COMBINE: usize = 128;

/// How a [`ReadStream`] reads.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct StreamConfig {
    /// Blocks started (pinned, read) ahead of the consumer, at most.
    pub lookahead: usize,
    /// Most blocks in one combined read (clamped to 1..=[`MAX_IO_COMBINE`]).
    pub io_combine: usize,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            lookahead: DEFAULT_LOOKAHEAD,
            io_combine: DEFAULT_IO_COMBINE,
        }
    }
}

impl StreamConfig {
    pub fn lookahead(mut self, n: usize) -> Self {
        self.lookahead = n;
        self
    }

    pub fn io_combine(mut self, n: usize) -> Self {
        self.io_combine = n;
        self
    }
}

/// A started read of consecutive blocks of one fork (`StartReadBuffers`);
/// every block is pinned. Dropped without [`wait`](Self::wait) (only on a
/// panic), it ends its own I/O with an error and releases every pin.
pub(crate) struct ReadOp<'a> {
    pool: &'a PoolShared,
    rf: RelFork,
    first: BlockNumber,
    /// `started[i]` is block `first + i`.
    started: Vec<Started>,
    /// Why starting stopped before the end of the range.
    stopped: Option<Error>,
}

/// One block of a stream's queue.
#[derive(Debug)]
enum Item {
    /// Read and pinned by the stream.
    Pinned(BufferId),
    /// Read ahead, then unpinned by [`ReadStream::release_ahead`]: pinned
    /// again (normally a hit) when its turn comes.
    Ahead(BlockNumber),
    /// This block failed; the stream ends here.
    Failed(Error),
}

/// What became of one of the operation's own reads.
enum Outcome {
    Pending,
    Done,
    Failed(Error),
    /// Failed with its run; the run's first page carries the error.
    FailedWithRun,
}

impl PoolShared {
    /// `StartReadBuffers` for `blocks` of `rf`: see the module. Stops at the
    /// first block that cannot be started (its error is kept for the wait).
    pub(crate) fn start_read_buffers<'a>(
        &'a self,
        local: &mut Local,
        rf: RelFork,
        blocks: Range<BlockNumber>,
        mut ring: Option<&mut Ring>,
    ) -> ReadOp<'a> {
        let mut op = ReadOp {
            pool: self,
            rf,
            first: blocks.start,
            started: Vec::with_capacity(blocks.len()),
            stopped: None,
        };
        for block in blocks {
            match self.start_buffer(local, BufferTag::new(rf, block), ring.as_deref_mut()) {
                Ok(s) => op.started.push(s),
                Err(e) => {
                    op.stopped = Some(e);
                    break;
                }
            }
        }
        op
    }
}

impl ReadOp<'_> {
    fn tag(&self, i: usize) -> BufferTag {
        BufferTag::new(self.rf, self.first + i as BlockNumber)
    }

    /// `WaitReadBuffers`: issue our reads, complete them, then wait for the
    /// pages others are reading. Appends one item per started block to
    /// `out`, in block order, then the error that stopped the start if any.
    fn wait(mut self, local: &mut Local, io_combine: usize, out: &mut VecDeque<Item>) {
        let pool = self.pool;
        let started = std::mem::take(&mut self.started);
        let n = started.len();
        let mut outcome: Vec<Outcome> = (0..n).map(|_| Outcome::Pending).collect();

        // 1. Our misses, as runs of adjacent blocks.
        let mut singles = Vec::new();
        let mut runs = Vec::new();
        let mut i = 0;
        while i < n {
            if !matches!(started[i], Started::Miss(_)) {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < n && j - i < io_combine && matches!(started[j], Started::Miss(_)) {
                j += 1;
            }
            if j - i == 1 {
                singles.push(i);
            } else {
                runs.push(i..j);
            }
            i = j;
        }
        if !singles.is_empty() {
            let mut reqs: Vec<ReadRequest<'_>> = singles
                .iter()
                .map(|&k| ReadRequest {
                    tag: self.tag(k),
                    // SAFETY: arena rule 2: the operation owns this buffer's
                    // IO_IN_PROGRESS and the page is not VALID, so nobody
                    // else reads or writes it; the buffers are distinct, so
                    // the slices do not overlap.
                    page: unsafe { pool.arena.page_mut(started[k].id()) },
                })
                .collect();
            let mut results = pool.storage.read_batch(&mut reqs).into_iter();
            drop(reqs);
            for &k in &singles {
                let r = results.next().unwrap_or_else(|| {
                    Err(Error::InvalidConfig(
                        "the storage backend's read_batch returned too few results".into(),
                    ))
                });
                outcome[k] = match pool.complete_read(
                    local,
                    started[k].id(),
                    self.tag(k),
                    ReadMode::Normal,
                    r,
                ) {
                    Ok(()) => Outcome::Done,
                    Err(e) => Outcome::Failed(e),
                };
            }
        }
        for run in runs {
            let mut pages: Vec<&mut [u8]> = run
                .clone()
                // SAFETY: as for the single reads above.
                .map(|k| unsafe { pool.arena.page_mut(started[k].id()) })
                .collect();
            let result = pool.storage.read_run(self.tag(run.start), &mut pages);
            drop(pages);
            match result {
                Ok(()) => {
                    for k in run {
                        outcome[k] = match pool.complete_read(
                            local,
                            started[k].id(),
                            self.tag(k),
                            ReadMode::Normal,
                            Ok(()),
                        ) {
                            Ok(()) => Outcome::Done,
                            Err(e) => Outcome::Failed(e),
                        };
                    }
                }
                Err(_) => {
                    // Which page failed is not known (nor whether the pages
                    // before it arrived): read the run again page by page,
                    // up to the first page that fails; that one carries its
                    // own error, the rest of the run fails with it unread.
                    let mut failed = false;
                    for k in run {
                        let id = started[k].id();
                        if failed {
                            pool.terminate_io(id, IO_ERROR, 0);
                            outcome[k] = Outcome::FailedWithRun;
                            continue;
                        }
                        // SAFETY: as for the single reads above; the run's
                        // slices were dropped.
                        let page = unsafe { pool.arena.page_mut(id) };
                        let r = pool.storage.read(self.tag(k), page);
                        outcome[k] =
                            match pool.complete_read(local, id, self.tag(k), ReadMode::Normal, r) {
                                Ok(()) => Outcome::Done,
                                Err(e) => {
                                    failed = true;
                                    Outcome::Failed(e)
                                }
                            };
                    }
                }
            }
        }
        // Failed pages: released now, so no never-valid tag stays behind.
        for (k, o) in outcome.iter().enumerate() {
            if matches!(o, Outcome::Failed(_) | Outcome::FailedWithRun) {
                pool.release_failed(started[k].id());
            }
        }

        // 2. In order: hits, our reads, and the pages others are reading
        // (waited for only now that our own I/O is over).
        for (k, (s, o)) in started.iter().zip(outcome).enumerate() {
            match (*s, o) {
                (Started::Hit(id), _) | (Started::Miss(id), Outcome::Done) => {
                    out.push_back(Item::Pinned(id))
                }
                (Started::Miss(_), Outcome::Failed(e)) => out.push_back(Item::Failed(e)),
                (Started::Miss(_), _) => {}
                (Started::NotValid(id), _) => {
                    match pool.hit_not_valid(local, id, self.tag(k), ReadMode::Normal) {
                        Ok(id) => out.push_back(Item::Pinned(id)),
                        Err(e) => out.push_back(Item::Failed(e)),
                    }
                }
            }
        }
        if let Some(e) = self.stopped.take() {
            out.push_back(Item::Failed(e));
        }
    }
}

impl Drop for ReadOp<'_> {
    fn drop(&mut self) {
        for s in std::mem::take(&mut self.started) {
            match s {
                Started::Miss(id) => {
                    self.pool.terminate_io(id, IO_ERROR, 0);
                    self.pool.release_failed(id);
                }
                Started::Hit(id) | Started::NotValid(id) => self.pool.desc(id).unpin(),
            }
        }
    }
}

/// The blocks of a range of one relation fork, in order, each pinned, read
/// ahead in combined reads (PostgreSQL 17's read streams). Create with
/// [`BufferPool::read_stream`]; see the module documentation.
///
/// A lending iterator: the buffer [`next_buffer`](Self::next_buffer)
/// returns borrows the stream, so it is released before the next one is
/// asked for. After an error the stream is over (`None`). Dropping it
/// half-way releases every pin it holds.
#[derive(Debug)]
pub struct ReadStream {
    shared: Arc<PoolShared>,
    rf: RelFork,
    /// The next block to start.
    next: BlockNumber,
    end: BlockNumber,
    ring: Option<Ring>,
    distance: usize,
    io_combine: usize,
    queue: VecDeque<Item>,
    done: bool,
}

impl BufferPool {
    /// A stream over blocks `blocks` of `rf`, reading through `ring` if one
    /// is given (its victims come from the ring, as for `read_buffer` with
    /// a ring). The distance is `config.lookahead` limited to the ring's
    /// size - 1 and to pool / 8.
    pub fn read_stream(
        &self,
        rf: RelFork,
        blocks: Range<BlockNumber>,
        ring: Option<Ring>,
        config: StreamConfig,
    ) -> ReadStream {
        let mut distance = config.lookahead.max(1);
        if let Some(r) = &ring {
            distance = distance.min(r.len().saturating_sub(1).max(1));
        }
        distance = distance.min((self.size() / 8).max(1));
        ReadStream {
            shared: self.shared.clone(),
            rf,
            next: blocks.start,
            end: blocks.end.max(blocks.start),
            ring,
            distance,
            io_combine: config.io_combine.clamp(1, MAX_IO_COMBINE),
            queue: VecDeque::new(),
            done: false,
        }
    }
}

impl ReadStream {
    /// The next block, pinned; `None` at the end of the range or after an
    /// error.
    pub fn next_buffer(&mut self) -> Option<Result<PinnedBuffer<'_>>> {
        if self.done {
            return None;
        }
        if self.queue.is_empty() {
            if self.next >= self.end {
                self.done = true;
                return None;
            }
            self.refill();
        }
        let item = self.queue.pop_front()?;
        let id = match item {
            Item::Pinned(id) => id,
            Item::Ahead(block) => {
                // Counted when it was read ahead: pinned again without
                // counting, unless it was evicted meanwhile (then it is
                // read again, a real access).
                let tag = BufferTag::new(self.rf, block);
                let shared = &self.shared;
                match shared.repin_valid(tag, self.ring.is_some()) {
                    Some(id) => id,
                    None => {
                        let ring = self.ring.as_mut();
                        match with_local(shared, |local| {
                            shared.read_buffer(local, tag, ring, ReadMode::Normal)
                        }) {
                            Ok(id) => id,
                            Err(e) => return Some(Err(self.fail(e))),
                        }
                    }
                }
            }
            Item::Failed(e) => return Some(Err(self.fail(e))),
        };
        Some(Ok(PinnedBuffer::new(&self.shared, id)))
    }

    /// Start and wait for the next `distance` blocks.
    fn refill(&mut self) {
        let n = (self.end - self.next).min(self.distance as BlockNumber);
        let blocks = self.next..self.next + n;
        self.next += n;
        let shared = &self.shared;
        let (rf, io_combine) = (self.rf, self.io_combine);
        let ring = self.ring.as_mut();
        let queue = &mut self.queue;
        with_local(shared, |local| {
            shared
                .start_read_buffers(local, rf, blocks, ring)
                .wait(local, io_combine, queue);
        });
    }

    /// End the stream with `e`, releasing what it holds.
    fn fail(&mut self, e: Error) -> Error {
        self.release_queue();
        self.done = true;
        e
    }

    fn release_queue(&mut self) {
        for item in self.queue.drain(..) {
            if let Item::Pinned(id) = item {
                self.shared.desc(id).unpin();
            }
        }
    }

    /// Unpin the blocks read ahead (PostgreSQL's `read_stream_reset` keeps
    /// nothing either): they stay in the pool as they are and are pinned
    /// again, normally as hits, when their turn comes. For a consumer that
    /// may sit idle between blocks (an iterator handed to a caller), so its
    /// read-ahead does not hold pins that a `DROP` would wait for.
    pub fn release_ahead(&mut self) {
        for item in self.queue.iter_mut() {
            if let Item::Pinned(id) = *item {
                let d = self.shared.desc(id);
                let block = d.tag().expect("a pinned valid buffer has a tag").block;
                d.unpin();
                *item = Item::Ahead(block);
            }
        }
    }

    /// Blocks read and pinned ahead of the consumer right now.
    pub fn pinned_ahead(&self) -> usize {
        self.queue
            .iter()
            .filter(|i| matches!(i, Item::Pinned(_)))
            .count()
    }

    /// The distance in force (the lookahead after the ring and pool limits).
    pub fn distance(&self) -> usize {
        self.distance
    }

    /// Whether the stream reads through a ring.
    pub fn uses_ring(&self) -> bool {
        self.ring.is_some()
    }

    /// The relation fork streamed.
    pub fn relfork(&self) -> RelFork {
        self.rf
    }
}

impl Drop for ReadStream {
    fn drop(&mut self) {
        self.release_queue();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PoolConfig;
    use crate::io::FileStorage;
    use crate::tag::RelId;

    const REL: RelFork = RelFork::main(RelId(9));

    fn pool_with(buffers: usize, blocks: BlockNumber) -> (tempfile::TempDir, BufferPool) {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(FileStorage::open(dir.path()).unwrap());
        let pool = BufferPool::new(PoolConfig::new(buffers).bgwriter(None), storage).unwrap();
        pool.create_fork(REL).unwrap();
        for b in 0..blocks {
            let mut p = pool.extend(REL, None).unwrap();
            p[100..104].copy_from_slice(&b.to_le_bytes());
            p.mark_dirty();
        }
        pool.flush_all(true).unwrap();
        pool.evict_all().unwrap();
        (dir, pool)
    }

    /// Started and never waited for (a panic between the two steps): the
    /// operation ends its own I/O with an error and releases every pin, and
    /// the blocks read normally afterwards.
    #[test]
    fn a_started_read_dropped_without_waiting_leaves_nothing_behind() {
        let (_dir, pool) = pool_with(32, 8);
        drop(pool.read_buffer(REL, 2, None).unwrap());
        let s = &pool.shared;
        with_local(s, |local| {
            let op = s.start_read_buffers(local, REL, 0..6, None);
            assert_eq!(op.started.len(), 6);
            assert_eq!(op.started[2], Started::Hit(op.started[2].id()));
            assert!(matches!(op.started[3], Started::Miss(_)));
            assert_eq!(pool.io_in_progress(), 5);
            assert_eq!(pool.pinned_buffers(), 6);
            drop(op);
        });
        assert_eq!(pool.io_in_progress(), 0);
        assert_eq!(pool.pinned_buffers(), 0);
        let resident = pool.resident_pages().get(&REL).copied().unwrap_or(0);
        assert_eq!(resident, 1, "only the page that was valid stays");
        for b in 0..8 {
            let p = pool.read_buffer(REL, b, None).unwrap().lock_shared();
            assert_eq!(u32::from_le_bytes(p[100..104].try_into().unwrap()), b);
        }
    }

    /// Start then wait: hits and misses come out in block order, pinned
    /// and valid; runs are cut at `io_combine`.
    #[test]
    fn start_then_wait_yields_the_blocks_in_order() {
        let (_dir, pool) = pool_with(64, 20);
        for b in [0, 5, 6, 13] {
            drop(pool.read_buffer(REL, b, None).unwrap());
        }
        let s = &pool.shared;
        let mut out = VecDeque::new();
        with_local(s, |local| {
            s.start_read_buffers(local, REL, 0..20, None)
                .wait(local, 3, &mut out);
        });
        assert_eq!(out.len(), 20);
        for (b, item) in out.drain(..).enumerate() {
            let Item::Pinned(id) = item else {
                panic!("block {b}: {item:?}");
            };
            let p = PinnedBuffer::new(s, id).lock_shared();
            assert_eq!(p.block(), b as BlockNumber);
            assert_eq!(
                u32::from_le_bytes(p[100..104].try_into().unwrap()),
                b as u32
            );
        }
        assert_eq!(pool.pinned_buffers(), 0);
        assert_eq!(pool.io_in_progress(), 0);
    }
}
