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
//!   distance is not held to the 32-buffer default ring;
//! - the pool's `StreamBudget`, shared by every stream: a read-ahead
//!   block the budget has no pin for, or that finds no buffer free, is not
//!   started now (the read-ahead shortens) and is started again later, at
//!   the latest as the consumer's own next block, which is always started
//!   (waiting up to `OWN_BLOCK_WAIT` for a free buffer). A stream never
//!   ends before its last block: each started block yields its page or an
//!   error.
//!
//! # The in-flight registry
//! `InFlightMap` (`PoolShared::in_flight`) maps each buffer with a
//! submitted, unreaped read to its operation, in 128 mutex shards by
//! buffer id; a shard lock is a leaf (nothing else is taken under it).

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::guard::PinnedBuffer;
use super::local::{Local, with_local};
use super::read::{ReadMode, Started};
use super::{BufferPool, PoolShared};
use crate::desc::*;
use crate::error::{Error, Result};
use crate::io::{AsyncRead, PendingReads};
use crate::replacement::ring::{Ring, RingKind};
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

/// How long a stream's consumer waits for a buffer for its own next block
/// when every buffer is pinned (other streams' read-ahead is released as
/// their consumers move on) before the stream fails with the error.
const OWN_BLOCK_WAIT: Duration = Duration::from_secs(1);

/// The pins every read stream of a pool holds ahead of its consumer,
/// against one budget (PostgreSQL limits a backend's pins to a share of the
/// pool, `GetPinLimit`, and its read streams' look-ahead to what is left).
///
/// The budget is half the pool less one buffer per active stream (the
/// block its consumer works on, which is never counted against it); each
/// stream may hold at most an equal share of it. A stream with nothing
/// ahead always starts its consumer's next block, budget or not. A stream
/// counts as active from its creation until it ends or is dropped.
#[derive(Debug)]
pub(crate) struct StreamBudget {
    pool_size: usize,
    /// Active streams.
    streams: AtomicUsize,
    /// Pins all streams hold ahead (their consumers' blocks included while
    /// they are being started).
    ahead: AtomicUsize,
}

impl StreamBudget {
    pub(crate) fn new(pool_size: usize) -> StreamBudget {
        StreamBudget {
            pool_size,
            streams: AtomicUsize::new(0),
            ahead: AtomicUsize::new(0),
        }
    }

    /// The budget of all streams when `streams` are active.
    fn total(&self, streams: usize) -> usize {
        (self.pool_size / 2).saturating_sub(streams)
    }

    /// The most pins one stream may hold ahead now.
    pub(crate) fn share(&self) -> usize {
        let streams = self.streams.load(Ordering::Relaxed).max(1);
        self.total(streams) / streams
    }

    /// Pins all streams hold ahead now.
    pub(crate) fn held(&self) -> usize {
        self.ahead.load(Ordering::Relaxed)
    }

    /// Active streams now.
    pub(crate) fn streams(&self) -> usize {
        self.streams.load(Ordering::Relaxed)
    }

    fn register(&self) {
        self.streams.fetch_add(1, Ordering::Relaxed);
    }

    fn deregister(&self) {
        self.streams.fetch_sub(1, Ordering::Relaxed);
    }

    /// Up to `want` more pins for a stream holding `held`: what its share
    /// and the budget left allow (possibly none).
    fn reserve(&self, want: usize, held: usize) -> usize {
        let streams = self.streams.load(Ordering::Relaxed).max(1);
        let total = self.total(streams);
        let want = want.min((total / streams).saturating_sub(held));
        if want == 0 {
            return 0;
        }
        let mut cur = self.ahead.load(Ordering::Relaxed);
        loop {
            let n = want.min(total.saturating_sub(cur));
            if n == 0 {
                return 0;
            }
            match self.ahead.compare_exchange_weak(
                cur,
                cur + n,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return n,
                Err(c) => cur = c,
            }
        }
    }

    /// `n` pins taken whatever the budget (a consumer's own block).
    fn force(&self, n: usize) {
        self.ahead.fetch_add(n, Ordering::AcqRel);
    }

    fn release(&self, n: usize) {
        self.ahead.fetch_sub(n, Ordering::AcqRel);
    }
}

/// Whether `e` only says that no buffer could be had right now (every
/// buffer pinned, or one pinned as often as it can count): a read-ahead
/// block that meets it is started again later.
fn no_buffer_now(e: &Error) -> bool {
    matches!(
        e,
        Error::NoUnpinnedBuffers { .. } | Error::TooManyPins { .. }
    )
}

/// Sleeps between a consumer's attempts at its own next block, for at
/// most [`OWN_BLOCK_WAIT`] in all.
struct Backoff {
    until: Instant,
    sleep: Duration,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff {
            until: Instant::now() + OWN_BLOCK_WAIT,
            sleep: Duration::from_micros(20),
        }
    }

    /// Sleep before the next attempt; `false` when the time is up.
    fn pause(&mut self) -> bool {
        let now = Instant::now();
        if now >= self.until {
            return false;
        }
        std::thread::sleep(self.sleep.min(self.until - now));
        self.sleep = (self.sleep * 2).min(Duration::from_millis(5));
        true
    }
}

/// The consumer's own block by `read`, waiting (see [`Backoff`]) while no
/// buffer can be had; any other error at once.
fn own_block<T>(mut read: impl FnMut() -> Result<T>) -> Result<T> {
    let mut backoff = Backoff::new();
    loop {
        match read() {
            Err(e) if no_buffer_now(&e) && backoff.pause() => {}
            r => return r,
        }
    }
}

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
    /// Read ahead into buffer `id`, then unpinned by
    /// [`ReadStream::release_ahead`]: pinned again when its turn comes,
    /// normally in the same buffer (then without a lookup).
    Ahead { block: BlockNumber, id: BufferId },
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
/// every stream's every miss. Registering and forgetting both happen under
/// the operation's own lock, so an operation is registered whole or not at
/// all. No shard lock is held while another is taken or while any other
/// lock is taken (lock order: an operation's lock, then a shard, a leaf).
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
            op: Some(OpState::start(self, local, rf, blocks, ring, usize::MAX)),
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
    /// Starts `blocks` in order, stopping at the first that cannot be
    /// started: with its error kept for the wait (`stopped`), unless it is
    /// read-ahead (index `soft_from` or later) that only found no buffer
    /// free ([`no_buffer_now`]); then the operation just ends before it,
    /// and the stream starts that block again later.
    fn start(
        pool: &PoolShared,
        local: &mut Local,
        rf: RelFork,
        blocks: Range<BlockNumber>,
        mut ring: Option<&mut Ring>,
        soft_from: usize,
    ) -> OpState {
        let mut op = OpState {
            rf,
            first: blocks.start,
            started: Vec::with_capacity(blocks.len()),
            stopped: None,
            flight: None,
        };
        for (i, block) in blocks.enumerate() {
            match pool.start_buffer(local, BufferTag::new(rf, block), ring.as_deref_mut()) {
                Ok(s) => op.started.push(s),
                Err(e) if i >= soft_from && no_buffer_now(&e) => break,
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
            let ids: Vec<BufferId> = g
                .runs
                .iter()
                .flat_map(|(_, ids)| ids.iter().copied())
                .collect();
            // Registered under the operation's lock: a waiter that finds the
            // first buffer registered and completes the operation (which
            // takes this lock, then forgets every buffer) must not run
            // between two inserts, or the later buffers would stay
            // registered to a finished operation, and a waiter for their
            // next, unrelated I/O would take that for its own and not wait.
            pool.in_flight.insert(&ids, &flight);
            ids
        };
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
                // After the run's failed page, whose error ends the stream
                // first; or (never expected) a read whose result did not
                // come back. Either way the block has an item: a stream
                // never skips a block it started.
                (Started::Miss(_), o) => out.push_back(Item::Failed(Error::Io {
                    op: "read",
                    what: self.tag(k).to_string(),
                    path: pool.storage.path(self.rf),
                    source: std::io::Error::other(match o {
                        Outcome::FailedWithRun => "an earlier page of its combined read failed",
                        _ => "the read was submitted but its result never came back",
                    }),
                })),
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
    /// How many of `queue`'s items are [`Item::Pinned`]: they are the
    /// newest ones (collected since the last `release_ahead`), so the
    /// release walks back from the end only that far.
    pinned: usize,
    /// An operation stopped starting at an error: nothing is started after it.
    stopped: bool,
    done: bool,
    /// Pins counted against the pool's [`StreamBudget`] for this stream.
    held: usize,
    /// Counted among the budget's active streams (until it ends).
    active: bool,
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

    /// Gives back the last `n` blocks of the run just taken (blocks that
    /// found no buffer): they are the next to come again.
    fn unget(&mut self, n: usize) {
        match self {
            Source::Range { next, .. } => *next -= n as BlockNumber,
            Source::List { pos, .. } => *pos -= n,
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
    /// Read streams active now (created and not yet ended or dropped):
    /// they share the read-ahead budget (see [`ReadStream`]).
    pub fn active_streams(&self) -> usize {
        self.shared.stream_budget.streams()
    }

    /// Pins all read streams hold ahead of their consumers now.
    pub fn stream_pins_ahead(&self) -> usize {
        self.shared.stream_budget.held()
    }

    /// The most pins one read stream may hold ahead now: half the pool,
    /// less one buffer per active stream, shared equally among them.
    pub fn stream_pin_share(&self) -> usize {
        self.shared.stream_budget.share()
    }

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
        self.shared.stream_budget.register();
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
            pinned: 0,
            stopped: false,
            done: false,
            held: 0,
            active: true,
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
                    self.finish();
                    return None;
                }
                self.refill(true);
            }
            // `WaitReadBuffers` for the operation holding the next block.
            if let Some(op) = self.ops.pop_front() {
                self.adapt_distance(&op);
                self.collect(op);
            }
        }
        let item = self.queue.pop_front();
        if let Some(Item::Pinned(_)) = item {
            self.pinned -= 1;
        }
        let Some(item) = item else {
            // `refill` starts the consumer's next block or keeps the error
            // that stopped it, and an operation yields an item per block:
            // a stream never just ends before its last block.
            let e = Error::InvalidConfig(format!(
                "the read stream of {} started nothing for its next block",
                self.rf
            ));
            return Some(Err(self.fail(e)));
        };
        // Keep the distance: start (and submit) what the consumer has made
        // room for, before it works on this block.
        if !matches!(item, Item::Failed(_)) {
            self.refill(false);
        }
        let id = match item {
            Item::Pinned(id) => id,
            Item::Ahead { block, id } => {
                // Counted when it was read ahead: pinned again without
                // counting, unless it was evicted meanwhile (then it is
                // read again, a real access). Nor does the evictor count
                // it again: pinned with the first-step rule (`ring = true`,
                // clock 0 -> 1 only, HOT/COOL and probation no change), so
                // one access of a scan never looks like two (which made
                // every scan page HOT, and promoted it out of probation).
                let tag = BufferTag::new(self.rf, block);
                let shared = &self.shared;
                match shared.repin_valid_at(id, tag, true) {
                    Some(id) => id,
                    None => {
                        let mut ring = self.ring.as_mut();
                        match own_block(|| {
                            with_local(shared, |local| {
                                shared.read_buffer(
                                    local,
                                    tag,
                                    ring.as_deref_mut(),
                                    ReadMode::Normal,
                                )
                            })
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
    /// the distance and the pool's [`StreamBudget`] (`StartReadBuffers`;
    /// nothing is waited for here).
    ///
    /// With `own` (the consumer asks for its next block and the stream has
    /// nothing ahead), the first block is the consumer's: it is started
    /// whatever the budget, and if no buffer is free it is tried again (for
    /// at most [`OWN_BLOCK_WAIT`]) before the stream fails with that
    /// error. A read-ahead block that the budget has no pin for, or
    /// that finds no buffer free, is not started now: the read-ahead is
    /// shortened to what is started, and the block comes again at a later
    /// refill (at the latest as the consumer's own next block).
    fn refill(&mut self, own: bool) {
        self.settle_budget();
        let mut backoff = None;
        loop {
            if self.stopped || self.source.is_empty() {
                // After an error the stream ends there: start nothing.
                return;
            }
            let op_blocks = self.op_blocks();
            let ahead = self.ahead();
            if ahead > 0 && ahead + op_blocks > self.current_distance {
                return;
            }
            let budget = &self.shared.stream_budget;
            let own = own && ahead == 0;
            let (mandatory, soft_from) = if own { (1, 1) } else { (0, 0) };
            budget.force(mandatory);
            self.held += mandatory;
            let granted = budget.reserve(op_blocks - mandatory, self.held);
            self.held += granted;
            let want = mandatory + granted;
            if want == 0 {
                // No pin to spare: the read-ahead stays as it is.
                return;
            }
            let run = self.source.take_run(want);
            let shared = &self.shared;
            let (rf, io_combine) = (self.rf, self.io_combine);
            let ring = self.ring.as_mut();
            let op = with_local(shared, |local| {
                let Some(blocks) = run.clone() else {
                    // A listed block past any fork's end: the stream
                    // stops there with the error `read_buffer` would give.
                    let mut op = OpState::start(shared, local, rf, 0..0, ring, 0);
                    op.stopped = Some(Error::BlockOutOfRange {
                        relfork: rf,
                        block: BlockNumber::MAX,
                        nblocks: shared.storage.nblocks(rf).unwrap_or(0),
                        path: shared.storage.path(rf),
                    });
                    return op;
                };
                let mut op = OpState::start(shared, local, rf, blocks, ring, soft_from);
                op.submit(shared, local, io_combine);
                op
            });
            let taken = run.map_or(0, |r| r.len());
            if op.stopped.is_none() && op.len() < taken {
                // Blocks that found no buffer: started again later.
                self.source.unget(taken - op.len());
                self.current_distance = self.current_distance.min((ahead + op.len()).max(1));
            }
            if own
                && op.len() == 0
                && op.stopped.as_ref().is_some_and(no_buffer_now)
                && backoff.get_or_insert_with(Backoff::new).pause()
            {
                // The consumer's own block found no buffer: again, while
                // other streams' consumers release their read-ahead.
                self.source.unget(taken);
                self.settle_budget();
                continue;
            }
            let more = op.stopped.is_none() && op.len() == taken;
            self.stopped = op.stopped.is_some();
            if op.len() > 0 || op.stopped.is_some() {
                self.ops.push_back(op);
            }
            self.settle_budget();
            if !more {
                return;
            }
        }
    }

    /// Brings the pins counted against the budget to what the stream holds
    /// ahead now.
    fn settle_budget(&mut self) {
        let now = self.pinned_ahead();
        let budget = &self.shared.stream_budget;
        if self.held > now {
            budget.release(self.held - now);
        } else {
            budget.force(now - self.held);
        }
        self.held = now;
    }

    /// The stream is over (its end reached, or failed): nothing held
    /// against the budget, and no longer an active stream.
    fn finish(&mut self) {
        self.done = true;
        self.settle_budget();
        if self.active {
            self.active = false;
            self.shared.stream_budget.deregister();
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
        self.finish();
        e
    }

    fn release_queue(&mut self) {
        self.pinned = 0;
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
            self.collect(op);
        }
        for item in self.queue.iter_mut().rev() {
            if self.pinned == 0 {
                break;
            }
            if let Item::Pinned(id) = *item {
                let d = self.shared.desc(id);
                let block = d.tag().expect("a pinned valid buffer has a tag").block;
                d.unpin();
                *item = Item::Ahead { block, id };
                self.pinned -= 1;
            }
        }
        debug_assert_eq!(self.pinned, 0, "every pinned item was released");
        self.settle_budget();
    }

    /// `WaitReadBuffers` for `op`: its blocks' items go to the end of the
    /// queue, the pinned ones counted.
    fn collect(&mut self, op: OpState) {
        let before = self.queue.len();
        let shared = &self.shared;
        let queue = &mut self.queue;
        with_local(shared, |local| op.collect(shared, local, queue));
        self.pinned += self
            .queue
            .range(before..)
            .filter(|i| matches!(i, Item::Pinned(_)))
            .count();
    }

    /// Blocks read and pinned ahead of the consumer right now.
    pub fn pinned_ahead(&self) -> usize {
        debug_assert_eq!(
            self.pinned,
            self.queue
                .iter()
                .filter(|i| matches!(i, Item::Pinned(_)))
                .count()
        );
        self.pinned + self.ops.iter().map(OpState::len).sum::<usize>()
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
        self.finish();
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

    /// Another fork of `pool`'s storage with `blocks` blocks, for pins.
    const OTHER: RelFork = RelFork::main(RelId(10));

    fn add_other(pool: &BufferPool, blocks: BlockNumber) {
        pool.create_fork(OTHER).unwrap();
        for _ in 0..blocks {
            pool.extend(OTHER, None).unwrap().mark_dirty();
        }
        pool.flush_all(true).unwrap();
        pool.evict_all().unwrap();
    }

    /// With one buffer left unpinned, a stream still yields every block:
    /// the read-ahead that finds no buffer is started again later (here,
    /// as the consumer's own next block), not kept as the stream's error.
    #[test]
    fn read_ahead_that_finds_no_buffer_is_started_again_later() {
        const N: BlockNumber = 40;
        let dir = tempfile::tempdir().unwrap();
        for storage in backends(dir.path()) {
            let name = storage.name();
            let pool = filled(16, N, storage);
            add_other(&pool, 15);
            let pins: Vec<_> = (0..15)
                .map(|b| pool.read_buffer(OTHER, b, None).unwrap())
                .collect();
            for lookahead in [2, 16, 128] {
                let cfg = StreamConfig::default().lookahead(lookahead);
                let mut s = pool.read_stream(REL, 0..N, None, cfg);
                let mut next = 0;
                while let Some(b) = s.next_buffer() {
                    let b = b.unwrap_or_else(|e| panic!("{name} block {next}: {e}"));
                    assert_eq!(block_of(&b.lock_shared()), next, "{name}");
                    next += 1;
                }
                assert_eq!(next, N, "{name} {lookahead}");
                drop(s);
                assert_eq!(pool.pinned_buffers(), 15, "{name}");
                assert_eq!((pool.active_streams(), pool.stream_pins_ahead()), (0, 0));
            }
            drop(pins);
            assert_eq!(pool.io_in_progress(), 0, "{name}");
        }
    }

    /// Every buffer pinned elsewhere: the consumer's own block waits a
    /// while for one, then the stream fails with the error (never ends
    /// early); pins released during the wait let it go on.
    #[test]
    fn the_consumers_own_block_waits_for_a_buffer_then_fails_loudly() {
        let (_dir, pool) = pool_with(16, 8);
        add_other(&pool, 16);
        let pins: Vec<_> = (0..16)
            .map(|b| pool.read_buffer(OTHER, b, None).unwrap())
            .collect();
        let mut s = pool.read_stream(REL, 0..8, None, StreamConfig::default());
        let t0 = Instant::now();
        let err = s.next_buffer().unwrap().unwrap_err();
        assert!(
            matches!(err, Error::NoUnpinnedBuffers { pool_size: 16 }),
            "{err:?}"
        );
        assert!(t0.elapsed() >= OWN_BLOCK_WAIT, "{:?}", t0.elapsed());
        assert!(s.next_buffer().is_none());
        drop(s);
        assert_eq!((pool.active_streams(), pool.stream_pins_ahead()), (0, 0));
        // Released while the consumer waits.
        let mut s = pool.read_stream(REL, 0..8, None, StreamConfig::default());
        std::thread::scope(|sc| {
            sc.spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                drop(pins);
            });
            let mut next = 0;
            while let Some(b) = s.next_buffer() {
                assert_eq!(block_of(&b.unwrap().lock_shared()), next);
                next += 1;
            }
            assert_eq!(next, 8);
        });
        drop(s);
        assert_eq!(pool.pinned_buffers(), 0);
    }

    /// Streams share the budget: each holds at most its share ahead (at
    /// least the one block its consumer asks for), all together what the
    /// budget counts, and the share grows back as streams end.
    #[test]
    fn streams_hold_at_most_their_share_of_the_budget() {
        const N: BlockNumber = 64;
        let (_dir, pool) = pool_with(128, N);
        let alone = {
            let s = pool.read_stream(REL, 0..N, None, StreamConfig::default());
            assert_eq!(pool.active_streams(), 1);
            let share = pool.stream_pin_share();
            drop(s);
            share
        };
        assert_eq!(alone, 128 / 2 - 1);
        let cfg = StreamConfig::default().lookahead(16);
        let mut streams: Vec<_> = (0..6)
            .map(|_| pool.read_stream(REL, 0..N, None, cfg))
            .collect();
        assert_eq!(pool.active_streams(), 6);
        let share = pool.stream_pin_share();
        assert_eq!(share, (128 / 2 - 6) / 6);
        for round in 0..N {
            for s in &mut streams {
                let b = s.next_buffer().unwrap().unwrap();
                assert_eq!(block_of(&b.lock_shared()), round);
            }
            let each: Vec<usize> = streams.iter().map(ReadStream::pinned_ahead).collect();
            assert!(
                each.iter().all(|&n| n <= share.max(1)),
                "round {round}: {each:?}, share {share}"
            );
            assert_eq!(pool.stream_pins_ahead(), each.iter().sum::<usize>());
        }
        for s in &mut streams {
            assert!(s.next_buffer().is_none());
        }
        assert_eq!((pool.active_streams(), pool.stream_pins_ahead()), (0, 0));
        drop(streams);
        assert_eq!(pool.active_streams(), 0);
        assert_eq!(pool.pinned_buffers(), 0);
    }
}
