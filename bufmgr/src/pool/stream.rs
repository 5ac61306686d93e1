//! Reads in two steps and read streams (PostgreSQL 18's `StartReadBuffers` /
//! `WaitReadBuffers` and `read_stream.c`).
//!
//! # Start, then wait
//! `OpState::start` takes consecutive blocks of one fork
//! and, for each, does what `read_buffer` does up to the read itself
//! (`start_buffer`, steps 1-6 of a miss): a hit is pinned; a miss gets a
//! victim, tagged `TAG_VALID | IO_IN_PROGRESS` owned by the operation; a page
//! another thread is reading (or whose read failed) is pinned and left for
//! the wait. Starting never waits for anyone's I/O.
//!
//! The operation then submits its own reads
//! ([`submit_reads`](crate::StorageBackend::submit_reads)): runs of adjacent
//! misses, at most `io_combine` blocks each, and lone misses, into the
//! buffers' arena pages; it registers itself as `InFlight` in
//! `PoolShared::in_flight` under each miss's buffer. An asynchronous backend
//! (io_uring) returns with the reads in flight; the default reads at once.
//!
//! The wait (`OpState::collect`, when the consumer reaches the operation)
//! 1. reaps the reads and, per page, verifies the checksum, sets `VALID` (or
//!    `IO_ERROR`), wakes waiters, ends the I/O (`InFlight::complete`); a
//!    failed page is released (its tag forgotten, as `read_buffer` does
//!    after a failed read), so nothing is left tag-valid but never valid to
//!    block a retry or an extension. A failed combined read is read again
//!    page by page up to the first page that fails (which pages arrived is
//!    not known), so the error the consumer gets names the block where the
//!    stream stops; the pages after it in the run end their I/O with
//!    `IO_ERROR` unread;
//! 2. only then waits for the pages other threads are reading (and reads
//!    one itself if that read failed).
//!
//! Deadlock freedom: an operation finishes its own I/O before it waits for
//! anybody else's, starting waits for nobody, and nobody sleeps on a
//! submitted read: a thread that would wait for one (`PoolShared::wait_io`,
//! under the buffer's sleep mutex) finds its operation in `in_flight` and
//! runs `InFlight::complete` itself (the owner's pins stay). The owner
//! registers after submitting and then wakes the buffers' sleepers, so one
//! that went to sleep before the registration looks again. So the consumer
//! may ask for a block its own stream has in flight, and another thread
//! never waits for a consumer that may be blocked on it.
//!
//! # The stream
//! A [`ReadStream`] yields the blocks of a range (or of a list) in order,
//! each pinned. It keeps up to `distance` blocks started ahead of the
//! consumer, in operations of `distance / 2` blocks (at most `io_combine`,
//! and for a list, consecutive blocks only): after each block it hands out,
//! it starts and submits what fits; it waits only for the operation holding
//! the block it is about to return, so with an asynchronous backend the
//! next operations' reads are in flight while the consumer works. Dropping
//! the stream (or its failing) reaps every submitted read before releasing
//! the buffers: a page is never released while the kernel may write it.
//!
//! The distance adapts (PostgreSQL 17's read stream): it starts at
//! [`START_DISTANCE`], doubles when the consumer reaches an operation that
//! read from storage and shrinks by a block per block of one that found
//! everything resident (never below the start). Its most, `distance()`, is
//! the configured `lookahead` limited to
//! - pool / 8 (at least 1), as rings are: one stream must not pin the pool;
//! - the ring's size - 1, when the stream reads through a ring: every
//!   buffer the stream holds is pinned, and a pinned ring buffer is never
//!   reused, so a distance of a whole ring would make each refill take its
//!   victims from the clock sweep (flooding the pool the ring protects).
//!   A bulk-read ring is first grown to `lookahead + 1` buffers, at most
//!   pool / 8 (PostgreSQL 18 sizes it for the read-ahead too), so the
//!   distance is not held to the 32-buffer default ring.
//!
//! # The in-flight registry
//! `InFlightMap` (`PoolShared::in_flight`) maps each buffer with a
//! submitted, unreaped read to its operation, in 128 mutex shards by
//! buffer id; a shard lock is a leaf (nothing else is taken under it).

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{BufferPool, PoolShared};
use crate::desc::*;
use crate::error::{Error, Result};
use crate::guard::PinnedBuffer;
use crate::io::{AsyncRead, PendingReads};
use crate::local::{Local, with_local};
use crate::pool::read::{ReadMode, Started};
use crate::ring::{Ring, RingKind};
use crate::stats::bump;
use crate::tag::{BlockNumber, BufferTag, RelFork};

/// Default most blocks pinned (and read) ahead of the consumer: 1 MiB,
/// eight combined reads of 16 blocks in flight. PostgreSQL's default is
/// `effective_io_concurrency` (16) x `io_combine_limit` (16) = 256 blocks;
/// measured here (`examples/stream_scan.rs`, O_DIRECT, io_uring) 128
/// reaches the device's sequential rate, so half of that.
pub const DEFAULT_LOOKAHEAD: usize = 128;
/// The distance a stream starts at, and shrinks back to while its blocks
/// are resident: the old fixed default (two operations of 8 blocks), so a
/// scan of cached pages, or one that stops early, pins no more ahead than
/// before; it doubles after each operation that read from storage.
pub const START_DISTANCE: usize = 16;
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
/// panic), it ends its own I/O with an error and releases every pin. (The
/// stream keeps [`OpState`]s itself; this pairing is for tests.)
#[cfg(test)]
pub(crate) struct ReadOp<'a> {
    pool: &'a PoolShared,
    op: Option<OpState>,
}

/// A started read, owned (a stream keeps several): see [`ReadOp`].
#[derive(Debug)]
struct OpState {
    rf: RelFork,
    first: BlockNumber,
    /// `started[i]` is block `first + i`.
    started: Vec<Started>,
    /// Why starting stopped before the end of the range.
    stopped: Option<Error>,
    /// The reads of our misses, once submitted.
    flight: Option<Arc<InFlight>>,
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
#[derive(Debug)]
enum Outcome {
    Pending,
    Done,
    Failed(Error),
    /// Failed with its run; the run's first page carries the error.
    FailedWithRun,
}

/// The submitted reads of one operation's misses. Registered in
/// `PoolShared::in_flight` under each miss's buffer until reaped, so that
/// any thread about to wait for one of them reaps and completes them all
/// ([`complete`](Self::complete)) instead of waiting for the owner.
pub(crate) struct InFlight {
    inner: Mutex<FlightInner>,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight").finish_non_exhaustive()
    }
}

struct FlightInner {
    /// `None` once reaped.
    pending: Option<Box<dyn PendingReads>>,
    rf: RelFork,
    first: BlockNumber,
    /// Per request: the operation's indices (consecutive blocks) and their
    /// buffers.
    runs: Vec<(Range<usize>, Vec<BufferId>)>,
    /// Filled by `complete`: `(index, outcome)` of every miss.
    outcomes: Vec<(usize, Outcome)>,
}

impl InFlight {
    /// Reap the operation's reads (if nobody has) and end their I/O: per
    /// page, verify the checksum and set `VALID` or `IO_ERROR`, waking
    /// waiters. The buffers stay pinned by the owner. A failed combined
    /// read is read again page by page up to the first page that fails
    /// (which pages arrived is not known); the rest of the run ends with
    /// `IO_ERROR` unread.
    pub(crate) fn complete(self: &Arc<Self>, pool: &PoolShared) {
        let mut g = self.inner.lock();
        let Some(pending) = g.pending.take() else {
            return;
        };
        let results = pending.wait();
        let inner = &mut *g;
        let tag = |k: usize| BufferTag::new(inner.rf, inner.first + k as BlockNumber);
        let mut results = results.into_iter();
        for (run, ids) in &inner.runs {
            let r = results.next().unwrap_or_else(|| {
                Err(Error::InvalidConfig(
                    "the storage backend's submit_reads returned too few results".into(),
                ))
            });
            match r {
                Ok(()) => {
                    for (k, &id) in run.clone().zip(ids) {
                        let o = match pool.end_read(id, tag(k), ReadMode::Normal, Ok(())) {
                            Ok(()) => Outcome::Done,
                            Err(e) => Outcome::Failed(e),
                        };
                        inner.outcomes.push((k, o));
                    }
                }
                Err(e) if run.len() == 1 => {
                    let o = match pool.end_read(ids[0], tag(run.start), ReadMode::Normal, Err(e)) {
                        Ok(()) => Outcome::Done,
                        Err(e) => Outcome::Failed(e),
                    };
                    inner.outcomes.push((run.start, o));
                }
                Err(_) => {
                    let mut failed = false;
                    for (k, &id) in run.clone().zip(ids) {
                        if failed {
                            pool.terminate_io(id, IO_ERROR, 0);
                            inner.outcomes.push((k, Outcome::FailedWithRun));
                            continue;
                        }
                        // SAFETY: arena rule 2: the operation owns this
                        // buffer's IO_IN_PROGRESS (we finish it under its
                        // lock), the page is not VALID, and the run's reads
                        // are reaped.
                        let page = unsafe { pool.arena.page_mut(id) };
                        let r = pool.storage.read(tag(k), page);
                        let o = match pool.end_read(id, tag(k), ReadMode::Normal, r) {
                            Ok(()) => Outcome::Done,
                            Err(e) => {
                                failed = true;
                                Outcome::Failed(e)
                            }
                        };
                        inner.outcomes.push((k, o));
                    }
                }
            }
        }
        for (_, ids) in &inner.runs {
            pool.in_flight.remove(ids, self);
        }
    }
}

/// Mutex shards of the in-flight registry: a power of two, as many as the
/// mapping table's partitions, so that streams of different threads (whose
/// buffers are spread over the pool) rarely meet on one.
const IN_FLIGHT_SHARDS: usize = 128;

/// `PoolShared::in_flight`: buffer -> the submitted operation reading it,
/// until that operation is reaped. Sharded by buffer id, each shard a
/// mutex-protected map: a stream registers each miss at submit and removes
/// it at completion, and a thread about to wait for a buffer's I/O looks it
/// up (`PoolShared::wait_io`), so one mutex for the pool would serialise
/// every stream's every miss. No shard lock is held while another is taken
/// or while any other lock is taken (lock order: a shard is a leaf).
pub(crate) struct InFlightMap {
    shards: Box<[FlightShard]>,
}

/// One shard of [`InFlightMap`].
type FlightShard = Mutex<HashMap<BufferId, Arc<InFlight>>>;

impl std::fmt::Debug for InFlightMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlightMap")
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

impl InFlightMap {
    pub(crate) fn new() -> InFlightMap {
        InFlightMap {
            shards: (0..IN_FLIGHT_SHARDS)
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
        }
    }

    fn shard(&self, id: BufferId) -> &FlightShard {
        &self.shards[id as usize % IN_FLIGHT_SHARDS]
    }

    /// The operation reading `id`, if one is registered.
    pub(crate) fn get(&self, id: BufferId) -> Option<Arc<InFlight>> {
        self.shard(id).lock().get(&id).cloned()
    }

    /// Registers `flight` as reading every buffer of `ids`.
    fn insert(&self, ids: &[BufferId], flight: &Arc<InFlight>) {
        for &id in ids {
            self.shard(id).lock().insert(id, Arc::clone(flight));
        }
    }

    /// Forgets the buffers of `ids` that `flight` is registered for.
    fn remove(&self, ids: &[BufferId], flight: &Arc<InFlight>) {
        for id in ids {
            let mut map = self.shard(*id).lock();
            if map.get(id).is_some_and(|f| Arc::ptr_eq(f, flight)) {
                map.remove(id);
            }
        }
    }

    /// Whether nothing is registered (every submitted read reaped).
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| s.lock().is_empty())
    }
}

#[cfg(test)]
impl PoolShared {
    /// `StartReadBuffers` for `blocks` of `rf`: see the module. Stops at the
    /// first block that cannot be started (its error is kept for the wait).
    pub(crate) fn start_read_buffers<'a>(
        &'a self,
        local: &mut Local,
        rf: RelFork,
        blocks: Range<BlockNumber>,
        ring: Option<&mut Ring>,
    ) -> ReadOp<'a> {
        ReadOp {
            pool: self,
            op: Some(OpState::start(self, local, rf, blocks, ring)),
        }
    }
}

#[cfg(test)]
impl ReadOp<'_> {
    fn started(&self) -> &[Started] {
        &self.op.as_ref().expect("not waited for").started
    }

    /// `WaitReadBuffers`: submit our reads, wait for them, then for the
    /// pages others are reading. Appends one item per started block to
    /// `out`, in block order, then the error that stopped the start if any.
    fn wait(mut self, local: &mut Local, io_combine: usize, out: &mut VecDeque<Item>) {
        let mut op = self.op.take().expect("waited for once");
        op.submit(self.pool, local, io_combine);
        op.collect(self.pool, local, out);
    }
}

#[cfg(test)]
impl Drop for ReadOp<'_> {
    fn drop(&mut self) {
        if let Some(op) = self.op.take() {
            op.abandon(self.pool);
        }
    }
}

impl OpState {
    fn start(
        pool: &PoolShared,
        local: &mut Local,
        rf: RelFork,
        blocks: Range<BlockNumber>,
        mut ring: Option<&mut Ring>,
    ) -> OpState {
        let mut op = OpState {
            rf,
            first: blocks.start,
            started: Vec::with_capacity(blocks.len()),
            stopped: None,
            flight: None,
        };
        for block in blocks {
            match pool.start_buffer(local, BufferTag::new(rf, block), ring.as_deref_mut()) {
                Ok(s) => op.started.push(s),
                Err(e) => {
                    op.stopped = Some(e);
                    break;
                }
            }
        }
        op
    }

    fn tag(&self, i: usize) -> BufferTag {
        BufferTag::new(self.rf, self.first + i as BlockNumber)
    }

    fn len(&self) -> usize {
        self.started.len()
    }

    /// Submit our misses' reads, as runs of adjacent blocks of at most
    /// `io_combine` each, and register them (see [`InFlight`]).
    fn submit(&mut self, pool: &PoolShared, local: &mut Local, io_combine: usize) {
        let started = &self.started;
        let n = started.len();
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
            runs.push((i..j, (i..j).map(|k| started[k].id()).collect::<Vec<_>>()));
            i = j;
        }
        if runs.is_empty() {
            return;
        }
        for (run, ids) in &runs {
            if run.len() > 1 {
                let c = &local.stats.parts[pool.desc(ids[0]).partition()];
                bump(&c.combined_reads, 1);
                bump(&c.combined_read_blocks, run.len() as u64);
            }
        }
        let reqs = runs
            .iter()
            .map(|(run, ids)| AsyncRead {
                tag: self.tag(run.start),
                pages: ids
                    .iter()
                    // SAFETY: arena rule 2: the operation owns these
                    // buffers' IO_IN_PROGRESS and the pages are not VALID, so
                    // nobody else reads or writes them until the I/O ends,
                    // which happens only after the reads are reaped.
                    .map(|&id| unsafe { pool.arena.page_mut(id) }.as_mut_ptr())
                    .collect(),
            })
            .collect();
        // SAFETY: the pages are distinct arena pages of PAGE_SIZE bytes,
        // which outlive the pool's storage calls; each is this operation's
        // alone (IO_IN_PROGRESS owned, not VALID) until `InFlight::complete`
        // has reaped the reads, and the buffers stay pinned (so never
        // reused) until after that (`collect`, `abandon`).
        let pending = unsafe { pool.storage.submit_reads(reqs) };
        let flight = Arc::new(InFlight {
            inner: Mutex::new(FlightInner {
                pending: Some(pending),
                rf: self.rf,
                first: self.first,
                runs,
                outcomes: Vec::new(),
            }),
        });
        let ids: Vec<BufferId> = {
            let g = flight.inner.lock();
            g.runs
                .iter()
                .flat_map(|(_, ids)| ids.iter().copied())
                .collect()
        };
        pool.in_flight.insert(&ids, &flight);
        // Anyone who went to sleep on these before they were registered
        // looks again (and finishes them rather than wait for us).
        for &id in &ids {
            pool.desc(id).wake_io_waiters();
        }
        self.flight = Some(flight);
    }

    /// Reap (if nobody has) and take the outcomes of our misses.
    fn outcomes(&mut self, pool: &PoolShared) -> Vec<Outcome> {
        let mut outcome: Vec<Outcome> = (0..self.len()).map(|_| Outcome::Pending).collect();
        if let Some(flight) = self.flight.take() {
            flight.complete(pool);
            for (k, o) in std::mem::take(&mut flight.inner.lock().outcomes) {
                outcome[k] = o;
            }
        }
        outcome
    }

    /// The wait's second half: reap, count, release failed pages, then in
    /// order: hits, our reads, and the pages others are reading (waited
    /// for only now that our own I/O is over).
    fn collect(mut self, pool: &PoolShared, local: &mut Local, out: &mut VecDeque<Item>) {
        let outcome = self.outcomes(pool);
        let started = std::mem::take(&mut self.started);
        for (k, o) in outcome.iter().enumerate() {
            if let Started::Miss(id) = started[k] {
                bump(&local.stats.parts[pool.desc(id).partition()].reads, 1);
                if matches!(o, Outcome::Failed(_) | Outcome::FailedWithRun) {
                    pool.release_failed(id);
                }
            }
        }
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

    /// Give everything back without using it: submitted reads are reaped
    /// first (a page is never released while the kernel may write it);
    /// unsubmitted misses end their I/O with an error.
    fn abandon(mut self, pool: &PoolShared) {
        let submitted = self.flight.is_some();
        let outcome = self.outcomes(pool);
        for (s, o) in std::mem::take(&mut self.started).into_iter().zip(outcome) {
            match (s, o) {
                (Started::Miss(id), Outcome::Done) => pool.desc(id).unpin(),
                (Started::Miss(id), Outcome::Pending) if !submitted => {
                    pool.terminate_io(id, IO_ERROR, 0);
                    pool.release_failed(id);
                }
                (Started::Miss(id), _) => pool.release_failed(id),
                (Started::Hit(id) | Started::NotValid(id), _) => pool.desc(id).unpin(),
            }
        }
    }
}

/// The blocks of a range (or a list) of one relation fork, in order, each
/// pinned, read ahead in combined reads (PostgreSQL 17's read streams).
/// Create with [`BufferPool::read_stream`] or
/// [`BufferPool::read_stream_blocks`]; see the module documentation for the
/// distance and the ring.
///
/// A lending iterator: the buffer [`next_buffer`](Self::next_buffer)
/// returns borrows the stream, so it is released before the next one is
/// asked for. After an error the stream is over (`None`). Dropping it
/// half-way releases every pin it holds.
#[derive(Debug)]
pub struct ReadStream {
    shared: Arc<PoolShared>,
    rf: RelFork,
    /// The blocks still to start.
    source: Source,
    ring: Option<Ring>,
    /// The most blocks started ahead: the lookahead after the ring and pool
    /// limits.
    max_distance: usize,
    /// The distance in force: starts at `min_distance`, doubles after an
    /// operation that read something, shrinks by one block per block of an
    /// operation that read nothing (PostgreSQL 17's read stream), never
    /// below `min_distance` nor above `max_distance`.
    current_distance: usize,
    min_distance: usize,
    io_combine: usize,
    /// Started operations whose reads are submitted, in block order, all
    /// after `queue`.
    ops: VecDeque<OpState>,
    queue: VecDeque<Item>,
    /// An operation stopped starting at an error: nothing is started after it.
    stopped: bool,
    done: bool,
}

/// Where a stream's blocks come from (PostgreSQL's read stream callback).
#[derive(Debug)]
enum Source {
    /// A range of blocks: `next..end`.
    Range { next: BlockNumber, end: BlockNumber },
    /// A list of blocks, in the order given; `blocks[pos..]` are to come.
    List {
        blocks: Vec<BlockNumber>,
        pos: usize,
    },
}

impl Source {
    fn is_empty(&self) -> bool {
        match self {
            Source::Range { next, end } => next >= end,
            Source::List { blocks, pos } => *pos >= blocks.len(),
        }
    }

    /// The next run of consecutive blocks, at most `max` long (empty at
    /// the end): one operation's blocks. `None` (and the block is taken)
    /// if the list's next block is `BlockNumber::MAX`, which no fork has
    /// (and no range can end after).
    fn take_run(&mut self, max: usize) -> Option<Range<BlockNumber>> {
        match self {
            Source::Range { next, end } => {
                let n = (*end - *next).min(max as BlockNumber);
                let run = *next..*next + n;
                *next += n;
                Some(run)
            }
            Source::List { blocks, pos } => {
                let Some(&first) = blocks.get(*pos) else {
                    return Some(0..0);
                };
                if first == BlockNumber::MAX {
                    *pos += 1;
                    return None;
                }
                let mut n = 1;
                while n < max
                    && first.checked_add(n as BlockNumber).is_some()
                    && blocks.get(*pos + n) == Some(&(first + n as BlockNumber))
                {
                    n += 1;
                }
                *pos += n;
                Some(first..first + n as BlockNumber)
            }
        }
    }
}

impl BufferPool {
    /// A stream over blocks `blocks` of `rf`, reading through `ring` if one
    /// is given (its victims come from the ring, as for `read_buffer` with
    /// a ring). See [`ReadStream`] for the distance and the ring's size.
    pub fn read_stream(
        &self,
        rf: RelFork,
        blocks: Range<BlockNumber>,
        ring: Option<Ring>,
        config: StreamConfig,
    ) -> ReadStream {
        let source = Source::Range {
            next: blocks.start,
            end: blocks.end.max(blocks.start),
        };
        self.stream_from(rf, source, ring, config)
    }

    /// A stream over the listed blocks of `rf`, in the order given (a block
    /// may repeat): for a caller that knows which blocks it needs but not
    /// as a range, such as vacuum's second pass (PostgreSQL's read stream
    /// with a block-number callback). Consecutive blocks of the list are
    /// read as combined reads, as a range's are.
    pub fn read_stream_blocks(
        &self,
        rf: RelFork,
        blocks: Vec<BlockNumber>,
        ring: Option<Ring>,
        config: StreamConfig,
    ) -> ReadStream {
        self.stream_from(rf, Source::List { blocks, pos: 0 }, ring, config)
    }

    fn stream_from(
        &self,
        rf: RelFork,
        source: Source,
        mut ring: Option<Ring>,
        config: StreamConfig,
    ) -> ReadStream {
        let pool_cap = (self.size() / 8).max(1);
        let mut max_distance = config.lookahead.clamp(1, pool_cap);
        if let Some(r) = &mut ring {
            if r.kind() == RingKind::BulkRead {
                // PostgreSQL 18 sizes the bulk-read ring for the read-ahead
                // (256 kB + io_combine_limit x effective_io_concurrency);
                // here the stream grows it to what its distance pins, still
                // at most pool / 8 (the ring cap: the scan cannot flood the
                // pool).
                r.grow_to((max_distance + 1).min(pool_cap));
            }
            max_distance = max_distance.min(r.len().saturating_sub(1).max(1));
        }
        let min_distance = max_distance.min(START_DISTANCE);
        ReadStream {
            shared: self.shared.clone(),
            rf,
            source,
            ring,
            max_distance,
            current_distance: min_distance,
            min_distance,
            io_combine: config.io_combine.clamp(1, MAX_IO_COMBINE),
            ops: VecDeque::new(),
            queue: VecDeque::new(),
            stopped: false,
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
            if self.ops.is_empty() {
                if self.source.is_empty() {
                    self.done = true;
                    return None;
                }
                self.refill();
            }
            // `WaitReadBuffers` for the operation holding the next block.
            if let Some(op) = self.ops.pop_front() {
                self.adapt_distance(&op);
                let shared = &self.shared;
                let queue = &mut self.queue;
                with_local(shared, |local| op.collect(shared, local, queue));
            }
        }
        let item = self.queue.pop_front()?;
        // Keep the distance: start (and submit) what the consumer has made
        // room for, before it works on this block.
        if !matches!(item, Item::Failed(_)) {
            self.refill();
        }
        let id = match item {
            Item::Pinned(id) => id,
            Item::Ahead(block) => {
                // Counted when it was read ahead: pinned again without
                // counting, unless it was evicted meanwhile (then it is
                // read again, a real access). Nor does the evictor count
                // it again: pinned with the first-step rule (`ring = true`,
                // clock 0 -> 1 only, HOT/COOL and probation no change), so
                // one access of a scan never looks like two (which made
                // every scan page HOT, and promoted it out of probation).
                let tag = BufferTag::new(self.rf, block);
                let shared = &self.shared;
                match shared.repin_valid(tag, true) {
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

    /// Blocks started ahead of the consumer (pinned, read or being read).
    fn ahead(&self) -> usize {
        self.queue.len() + self.ops.iter().map(OpState::len).sum::<usize>()
    }

    /// Blocks per operation: half the distance (so one operation's reads
    /// are in flight while the consumer works through the other's pages),
    /// at most `io_combine`.
    fn op_blocks(&self) -> usize {
        (self.current_distance / 2).clamp(1, self.io_combine)
    }

    /// The distance after `op` (about to be waited for): doubled if it read
    /// anything (the stream is waiting for I/O: look further ahead), else
    /// one block shorter per block (the pages are resident: fewer pins
    /// ahead do as well).
    fn adapt_distance(&mut self, op: &OpState) {
        if op.started.iter().any(|s| matches!(s, Started::Miss(_))) {
            self.current_distance = (self.current_distance * 2).min(self.max_distance);
        } else {
            self.current_distance = self
                .current_distance
                .saturating_sub(op.len())
                .max(self.min_distance);
        }
    }

    /// Start and submit operations of `op_blocks` blocks while they fit in
    /// the distance (`StartReadBuffers`; nothing is waited for here).
    fn refill(&mut self) {
        let op_blocks = self.op_blocks();
        while !self.source.is_empty()
            && (self.ahead() == 0 || self.ahead() + op_blocks <= self.current_distance)
        {
            if self.stopped {
                // The stream ends at that error: start nothing after it.
                return;
            }
            let run = self.source.take_run(op_blocks);
            let shared = &self.shared;
            let (rf, io_combine) = (self.rf, self.io_combine);
            let ring = self.ring.as_mut();
            let op = with_local(shared, |local| {
                let Some(blocks) = run else {
                    // A listed block past any fork's end: the stream
                    // stops there with the error `read_buffer` would give.
                    let mut op = OpState::start(shared, local, rf, 0..0, ring);
                    op.stopped = Some(Error::BlockOutOfRange {
                        relfork: rf,
                        block: BlockNumber::MAX,
                        nblocks: shared.storage.nblocks(rf).unwrap_or(0),
                        path: shared.storage.path(rf),
                    });
                    return op;
                };
                let mut op = OpState::start(shared, local, rf, blocks, ring);
                op.submit(shared, local, io_combine);
                op
            });
            self.stopped = op.stopped.is_some();
            self.ops.push_back(op);
        }
    }

    /// Reap and give back every submitted operation.
    fn abandon_ops(&mut self) {
        for op in self.ops.drain(..) {
            op.abandon(&self.shared);
        }
    }

    /// End the stream with `e`, releasing what it holds.
    fn fail(&mut self, e: Error) -> Error {
        self.release_queue();
        self.abandon_ops();
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
        // Submitted reads are finished first: nothing stays in progress.
        while let Some(op) = self.ops.pop_front() {
            let shared = &self.shared;
            let queue = &mut self.queue;
            with_local(shared, |local| op.collect(shared, local, queue));
        }
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
            + self.ops.iter().map(OpState::len).sum::<usize>()
    }

    /// The most blocks the stream starts ahead: the lookahead after the
    /// ring and pool limits.
    pub fn distance(&self) -> usize {
        self.max_distance
    }

    /// The distance in force now (it grows while the stream reads and
    /// shrinks while it finds its blocks resident): between
    /// `min(distance(), 16)` and [`distance`](Self::distance).
    pub fn current_distance(&self) -> usize {
        self.current_distance
    }

    /// The ring's size, if the stream reads through one (a bulk-read ring
    /// is grown to fit the distance).
    pub fn ring_len(&self) -> Option<usize> {
        self.ring.as_ref().map(Ring::len)
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
        self.abandon_ops();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PoolConfig;
    use crate::io::{FileStorage, StorageBackend, UringStorage};
    use crate::tag::RelId;

    const REL: RelFork = RelFork::main(RelId(9));

    fn pool_with(buffers: usize, blocks: BlockNumber) -> (tempfile::TempDir, BufferPool) {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(FileStorage::open(dir.path()).unwrap());
        let pool = filled(buffers, blocks, storage);
        (dir, pool)
    }

    /// A pool over `storage` whose fork `REL` has `blocks` blocks, block `b`
    /// holding `b` at byte 100; nothing resident.
    fn filled(buffers: usize, blocks: BlockNumber, storage: Arc<dyn StorageBackend>) -> BufferPool {
        let pool = BufferPool::new(PoolConfig::new(buffers).bgwriter(None), storage).unwrap();
        pool.create_fork(REL).unwrap();
        for b in 0..blocks {
            let mut p = pool.extend(REL, None).unwrap();
            p[100..104].copy_from_slice(&b.to_le_bytes());
            p.mark_dirty();
        }
        pool.flush_all(true).unwrap();
        pool.evict_all().unwrap();
        pool
    }

    fn block_of(p: &[u8]) -> u32 {
        u32::from_le_bytes(p[100..104].try_into().unwrap())
    }

    /// Every backend there is here: sync and io_uring, buffered and
    /// O_DIRECT (io_uring and O_DIRECT only where they work).
    fn backends(dir: &std::path::Path) -> Vec<Arc<dyn StorageBackend>> {
        let mut v: Vec<Arc<dyn StorageBackend>> = Vec::new();
        for direct in [false, true] {
            let sub = dir.join(if direct { "direct" } else { "buffered" });
            std::fs::create_dir_all(&sub).unwrap();
            if let Ok(f) = FileStorage::open_with(&sub.join("sync"), direct) {
                v.push(Arc::new(f));
            }
            if crate::io::probe_io_uring().is_ok()
                && let Ok(u) = UringStorage::open(&sub.join("uring"), direct)
            {
                v.push(Arc::new(u));
            }
        }
        v
    }

    /// Over every backend and many lookahead / io_combine pairs, the stream
    /// yields every block once, in order, with its contents, and leaves
    /// nothing pinned or in progress.
    #[test]
    fn streams_over_every_backend_yield_every_block_in_order() {
        const N: BlockNumber = 150;
        let dir = tempfile::tempdir().unwrap();
        for storage in backends(dir.path()) {
            let name = storage.name();
            let pool = filled(512, N, storage);
            for lookahead in [1, 2, 3, 8, 16, 33, 64] {
                for io_combine in [1, 4, 16] {
                    pool.evict_all().unwrap();
                    // Some blocks resident, to split the runs.
                    for b in (0..N).step_by(7) {
                        drop(pool.read_buffer(REL, b, None).unwrap());
                    }
                    let cfg = StreamConfig::default()
                        .lookahead(lookahead)
                        .io_combine(io_combine);
                    let mut s = pool.read_stream(REL, 0..N, None, cfg);
                    let mut seen = 0;
                    while let Some(b) = s.next_buffer() {
                        let p = b.unwrap().lock_shared();
                        assert_eq!(p.block(), seen, "{name} {lookahead}/{io_combine}");
                        assert_eq!(block_of(&p), seen, "{name} {lookahead}/{io_combine}");
                        seen += 1;
                    }
                    assert_eq!(seen, N, "{name} {lookahead}/{io_combine}");
                    drop(s);
                    assert_eq!(pool.pinned_buffers(), 0, "{name}");
                    assert_eq!(pool.io_in_progress(), 0, "{name}");
                }
            }
        }
    }

    /// A stream dropped (or failed) with reads submitted reaps them first:
    /// no pin and no I/O in progress stays behind, and the blocks read
    /// correctly afterwards.
    #[test]
    fn dropping_a_stream_with_reads_in_flight_leaves_nothing_behind() {
        const N: BlockNumber = 64;
        let dir = tempfile::tempdir().unwrap();
        for storage in backends(dir.path()) {
            let name = storage.name();
            let pool = filled(256, N, storage);
            for taken in [0, 1, 5, 17] {
                pool.evict_all().unwrap();
                let mut s = pool.read_stream(REL, 0..N, None, StreamConfig::default());
                for _ in 0..taken {
                    drop(s.next_buffer().unwrap().unwrap());
                }
                if taken > 0 {
                    assert!(!s.ops.is_empty(), "{name}: reads are in flight");
                    assert!(s.pinned_ahead() > 0);
                }
                drop(s);
                assert_eq!(pool.pinned_buffers(), 0, "{name} after {taken}");
                assert_eq!(pool.io_in_progress(), 0, "{name} after {taken}");
                assert!(pool.shared.in_flight.is_empty());
            }
            for b in 0..N {
                assert_eq!(
                    block_of(&pool.read_buffer(REL, b, None).unwrap().lock_shared()),
                    b
                );
            }
        }
    }

    /// The consumer asking for a block its own stream has in flight (a
    /// scan that updates a page ahead), and another thread asking while the
    /// consumer sits idle: both finish the stream's reads themselves instead
    /// of waiting for it, and the stream goes on.
    #[test]
    fn a_block_in_flight_is_finished_by_whoever_needs_it() {
        const N: BlockNumber = 64;
        let dir = tempfile::tempdir().unwrap();
        for storage in backends(dir.path()) {
            let name = storage.name();
            let pool = filled(256, N, storage);
            let mut s = pool.read_stream(REL, 0..N, None, StreamConfig::default());
            drop(s.next_buffer().unwrap().unwrap());
            let ahead = s.current_distance() as BlockNumber - 1;
            // This thread.
            let b = pool.read_buffer(REL, ahead, None).unwrap();
            assert_eq!(block_of(&b.lock_shared()), ahead, "{name}");
            // Another thread, while this one holds the stream idle.
            std::thread::scope(|sc| {
                sc.spawn(|| {
                    let b = pool.read_buffer(REL, ahead - 1, None).unwrap();
                    assert_eq!(block_of(&b.lock_shared()), ahead - 1);
                });
            });
            let mut next = 1;
            while let Some(b) = s.next_buffer() {
                assert_eq!(block_of(&b.unwrap().lock_shared()), next, "{name}");
                next += 1;
            }
            assert_eq!(next, N);
            drop(s);
            assert_eq!(pool.pinned_buffers(), 0);
            assert_eq!(pool.io_in_progress(), 0);
        }
    }

    /// Streams and point readers on the same blocks at once, over every
    /// backend: point readers finish streams' submitted reads, streams
    /// finish each other's; every page is right, every stream sees each
    /// block once in order, and nothing stays pinned or in progress.
    #[test]
    fn streams_and_point_readers_share_submitted_reads() {
        const N: BlockNumber = 200;
        let dir = tempfile::tempdir().unwrap();
        for storage in backends(dir.path()) {
            let name = storage.name();
            let pool = filled(1024, N, storage);
            for round in 0..4u32 {
                pool.evict_all().unwrap();
                std::thread::scope(|sc| {
                    for t in 0..2 {
                        let pool = &pool;
                        sc.spawn(move || {
                            let cfg = StreamConfig::default().lookahead(16 + 16 * t);
                            let mut s = pool.read_stream(REL, 0..N, None, cfg);
                            let mut next = 0;
                            while let Some(b) = s.next_buffer() {
                                let p = b.unwrap().lock_shared();
                                assert_eq!(block_of(&p), next, "{name} round {round}");
                                next += 1;
                            }
                            assert_eq!(next, N);
                        });
                    }
                    for t in 0..2u32 {
                        let pool = &pool;
                        sc.spawn(move || {
                            let mut x = 12345u32.wrapping_mul(t + 1 + round * 7);
                            for _ in 0..300 {
                                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                                let b = (x >> 8) % N;
                                let p = pool.read_buffer(REL, b, None).unwrap();
                                assert_eq!(block_of(&p.lock_shared()), b, "{name}");
                            }
                        });
                    }
                });
                assert_eq!(pool.pinned_buffers(), 0, "{name}");
                assert_eq!(pool.io_in_progress(), 0, "{name}");
                assert!(pool.shared.in_flight.is_empty(), "{name}");
            }
        }
    }

    /// A read failure mid-stream (FaultyStorage over the sync backend's
    /// synchronous default, and over io_uring, whose submitted reads it
    /// passes on): the blocks before it come out, then the error, then
    /// `None`; nothing stays pinned or in progress, and a new stream reads
    /// everything once the fault is gone.
    #[test]
    fn a_read_failure_mid_stream_over_each_backend() {
        let dir = tempfile::tempdir().unwrap();
        for inner in backends(dir.path()) {
            read_failure_mid_stream(inner);
        }
    }

    fn read_failure_mid_stream(inner: Arc<dyn StorageBackend>) {
        const N: BlockNumber = 80;
        let name = inner.name();
        let faulty = Arc::new(crate::io::FaultyStorage::new(inner));
        let pool = filled(256, N, faulty.clone());
        for lookahead in [1, 4, 16, 128] {
            pool.evict_all().unwrap();
            faulty.clear();
            faulty.fail_reads_after(20);
            let cfg = StreamConfig::default().lookahead(lookahead);
            let mut s = pool.read_stream(REL, 0..N, None, cfg);
            let mut good = 0;
            let err = loop {
                match s.next_buffer() {
                    Some(Ok(b)) => {
                        assert_eq!(block_of(&b.lock_shared()), good);
                        good += 1;
                    }
                    Some(Err(e)) => break e,
                    None => panic!("the stream ended without the error"),
                }
            };
            assert!(
                (1..=20).contains(&good),
                "{name} {lookahead}: {good} good blocks"
            );
            assert!(
                err.to_string().contains(&format!("block {good}")),
                "{name}: {err}"
            );
            assert_eq!(faulty.overlapping_reads(), 0, "{name}");
            assert!(s.next_buffer().is_none());
            drop(s);
            assert_eq!(pool.pinned_buffers(), 0);
            assert_eq!(pool.io_in_progress(), 0);
            faulty.clear();
            let mut s = pool.read_stream(REL, 0..N, None, cfg);
            let mut n = 0;
            while let Some(b) = s.next_buffer() {
                assert_eq!(block_of(&b.unwrap().lock_shared()), n);
                n += 1;
            }
            assert_eq!(n, N);
        }
    }

    /// The distance starts at 16, doubles after each operation that read
    /// (up to the lookahead) and shrinks back while the blocks are
    /// resident; the pins ahead never exceed the distance in force.
    #[test]
    fn the_distance_grows_while_reading_and_shrinks_on_hits() {
        const N: BlockNumber = 600;
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(FileStorage::open(dir.path()).unwrap());
        // One partition: one thread's pages may fill the whole pool.
        let pool =
            BufferPool::new(PoolConfig::new(1024).partitions(1).bgwriter(None), storage).unwrap();
        pool.create_fork(REL).unwrap();
        for b in 0..N {
            let mut p = pool.extend(REL, None).unwrap();
            p[100..104].copy_from_slice(&b.to_le_bytes());
            p.mark_dirty();
        }
        pool.flush_all(true).unwrap();
        pool.evict_all().unwrap();
        let cfg = StreamConfig::default().lookahead(128);
        let mut s = pool.read_stream(REL, 0..N, None, cfg);
        assert_eq!((s.current_distance(), s.distance()), (16, 128));
        let mut most_ahead = 0;
        for b in 0..300 {
            let p = s.next_buffer().unwrap().unwrap();
            assert_eq!(p.block(), b);
            drop(p);
            assert!(s.pinned_ahead() <= s.current_distance());
            most_ahead = most_ahead.max(s.pinned_ahead());
        }
        assert_eq!(s.current_distance(), 128, "grown while every block is read");
        assert!(most_ahead > 64, "{most_ahead} blocks ahead at most");
        drop(s);
        // Blocks 0..300 are resident now: a stream over them stays at 16.
        let mut s = pool.read_stream(REL, 0..300, None, cfg);
        loop {
            match s.next_buffer() {
                Some(b) => drop(b.unwrap()),
                None => break,
            }
            assert_eq!(s.current_distance(), 16);
            assert!(s.pinned_ahead() <= 16);
        }
        drop(s);
        // Read, then resident: it grows, then shrinks back to 16.
        pool.evict_relation(REL).unwrap();
        for b in 100..N {
            drop(pool.read_buffer(REL, b, None).unwrap());
        }
        let mut s = pool.read_stream(REL, 0..N, None, cfg);
        let mut grown = 0;
        loop {
            match s.next_buffer() {
                Some(b) => drop(b.unwrap()),
                None => break,
            }
            grown = grown.max(s.current_distance());
        }
        assert!(grown > 16, "grew to {grown} over the blocks read");
        assert_eq!(
            s.current_distance(),
            16,
            "and shrank over the resident ones"
        );
        drop(s);
        assert_eq!(pool.pinned_buffers(), 0);
    }

    /// A stream over a list of blocks yields them in the order given
    /// (repeats included), reads consecutive ones as one combined read
    /// (counted in `PoolStats`), and leaves nothing behind.
    #[test]
    fn a_block_list_stream_yields_the_listed_blocks() {
        let dir = tempfile::tempdir().unwrap();
        for storage in backends(dir.path()) {
            let name = storage.name();
            let pool = filled(256, 64, storage);
            let list = vec![3, 4, 5, 9, 10, 20, 2, 2, 40, 41, 42, 43, 0, 63];
            for lookahead in [1, 4, 16, 128] {
                pool.evict_all().unwrap();
                let before = pool.stats();
                let cfg = StreamConfig::default().lookahead(lookahead);
                let mut s = pool.read_stream_blocks(REL, list.clone(), None, cfg);
                let mut seen = Vec::new();
                while let Some(b) = s.next_buffer() {
                    let p = b.unwrap().lock_shared();
                    assert_eq!(block_of(&p), p.block(), "{name}");
                    seen.push(p.block());
                }
                assert_eq!(seen, list, "{name} {lookahead}");
                drop(s);
                let d = pool.stats().since(&before).totals();
                assert_eq!(
                    d.reads, 13,
                    "{name} {lookahead}: each distinct block once: {d:?}"
                );
                if lookahead >= 16 {
                    // Runs 3..6, 9..11, 40..44 (an operation is at most
                    // half the distance at first: 8 blocks).
                    assert_eq!(
                        (d.combined_reads, d.combined_read_blocks),
                        (3, 9),
                        "{name} {lookahead}"
                    );
                }
                assert_eq!(pool.pinned_buffers(), 0, "{name}");
                assert_eq!(pool.io_in_progress(), 0, "{name}");
            }
            // An empty list.
            let mut s = pool.read_stream_blocks(REL, Vec::new(), None, StreamConfig::default());
            assert!(s.next_buffer().is_none());
            // Blocks past the end, and the one block number no fork has:
            // the stream yields the blocks before, then the error naming
            // the block, then nothing.
            for bad in [64, 1000, BlockNumber::MAX] {
                let list = vec![1, 2, bad, 3];
                let mut s = pool.read_stream_blocks(REL, list, None, StreamConfig::default());
                for b in [1, 2] {
                    assert_eq!(s.next_buffer().unwrap().unwrap().block(), b, "{name}");
                }
                let err = s.next_buffer().unwrap().unwrap_err();
                assert!(
                    matches!(err, Error::BlockOutOfRange { block, .. } if block == bad),
                    "{name}: {err:?}"
                );
                assert!(err.to_string().contains(&bad.to_string()), "{err}");
                assert!(s.next_buffer().is_none());
                drop(s);
                assert_eq!(pool.pinned_buffers(), 0, "{name}");
                assert_eq!(pool.io_in_progress(), 0, "{name}");
            }
        }
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
            assert_eq!(op.started().len(), 6);
            assert_eq!(op.started()[2], Started::Hit(op.started()[2].id()));
            assert!(matches!(op.started()[3], Started::Miss(_)));
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
