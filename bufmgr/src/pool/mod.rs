//! The buffer pool: reading and pinning pages, allocating new ones, choosing
//! victims, writing dirty pages, invalidating relations.
//!
//! Principal entry points (PostgreSQL's `bufmgr.c` names in parentheses):
//! - [`BufferPool::read_buffer`] (`ReadBuffer`): pin a page, reading it on a miss.
//! - [`BufferPool::extend`] (`ExtendBufferedRel`): add a zeroed page at the end
//!   of a relation, returned exclusively locked.
//! - [`BufferPool::flush_all`] (`BufferSync`): write every dirty page in
//!   (relation, block) order and fsync, for checkpoints.
//! - [`BufferPool::drop_relation`] / [`truncate_relation`](BufferPool::truncate_relation)
//!   (`DropRelationBuffers`): forget a relation's pages.
//! - [`BufferPool::buffercache`], [`BufferPool::evict_buffer`],
//!   [`BufferPool::evict_relation`] (pg_buffercache).
//!
//!
//! # Layout
//! - `read`: the read path (`ReadBuffer`, the optimistic hit, a miss step by
//!   step, I/O start and end).
//! - `optimistic`: reading a resident page with no pin and no content
//!   lock, validated by the buffer's version (rule 10).
//! - `victim`: choosing a victim (ring, clock sweep, invalidating the old identity).
//! - `write`: writing dirty pages (`FlushBuffer`, `SyncOneBuffer`, checkpoints, fsync).
//! - `relation`: relation operations (extend, drop, truncate) and pg_buffercache
//!   (inspection and eviction).
//! - `durable`: each fork's durable length (raised at each fsync) and the
//!   rule for an all-zero page at or beyond it (read as new).
//! - `stream`: reads in two steps (start, then wait: combined reads) and
//!   [`ReadStream`], the read-ahead of sequential scans.
//! - [`guard`]: pins and content locks as values ([`guard::PinnedBuffer`]
//!   and its lock guards).
//! - `local`: a thread's private state for one pool (home partition,
//!   batch cursors, counters, trace buffer).
//! - [`bgwriter`]: the background writer, cleaning ahead of the clock hands.
//! - `registry`: the process-wide list of open pools that
//!   the live view (`watch`) reads (a pool registers itself at open when watching
//!   is on, and leaves at drop).
//!
//!
//! # Lock order
//! mapping partition locks (ascending) -> content lock -> header lock. The
//! header lock is never held across anything that blocks. The extension lock
//! of a relation is taken before any of these.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::arena::{Arena, HugePageStatus};
use crate::config::{PoolConfig, SweepBatch};
use crate::desc::*;
use crate::error::{Error, Result};
use crate::io::StorageBackend;
use crate::numa::partition::PartitionMap;
use crate::numa::topology::Topology;
use crate::replacement::evictor::{Evictor, PROBATION_DIVISOR};
use crate::replacement::probation::ProbationQueue;
use crate::replacement::ring::{Ring, RingKind};
use crate::replacement::sweep::ClockHand;
use crate::stats::{DroppedRelations, PoolCounters, PoolStats, RetiredRelations, ThreadStats};
use crate::table::BufTable;
use crate::tag::{BlockNumber, BufferTag, PAGE_SIZE, RelFork, RelId};
use crate::wal_hook::{NoWal, WalSink};
use local::with_local;

pub mod bgwriter;
mod durable;
pub mod guard;
mod local;
mod optimistic;
mod read;
pub(crate) mod registry;
mod relation;
pub mod stream;
#[cfg(test)]
mod uring_streams;
mod victim;
mod write;

pub use optimistic::OptimisticPage;
pub use stream::{ReadStream, StreamConfig};
pub(crate) use write::{WriteBatch, Writer};

static NEXT_POOL_ID: AtomicU64 = AtomicU64::new(1);

/// Everything the pool shares between threads.
#[derive(Debug)]
pub(crate) struct PoolShared {
    pub id: u64,
    pub config: PoolConfig,
    pub evictor: Evictor,
    pub topology: Topology,
    pub descs: Box<[BufferDesc]>,
    pub arena: Arena,
    pub table: BufTable,
    pub parts: PartitionMap,
    pub hands: Box<[ClockHand]>,
    /// The probation queue of each sweep partition (capacity 0 unless the
    /// evictor is [`Evictor::Probation`]).
    pub probation: Box<[ProbationQueue]>,
    pub storage: Arc<dyn StorageBackend>,
    pub wal: Arc<dyn WalSink>,
    /// One lock per relation fork being extended.
    ext_locks: Mutex<HashMap<RelFork, Arc<Mutex<()>>>>,
    /// Relations that are not WAL-logged.
    unlogged: RwLock<HashSet<RelId>>,
    any_unlogged: AtomicBool,
    /// Forks written since the last `flush_all`, to fsync then.
    pending_sync: Mutex<HashSet<RelFork>>,
    /// Blocks of each fork known durable (`durable`).
    durable: Mutex<durable::DurableLengths>,
    /// `durable` rule 3 is on.
    zeroed_beyond_durable_is_new: AtomicBool,
    /// All-zero pages read as new (rule 3).
    zeroed_new_pages: AtomicU64,
    /// Set by the first failed write; later writes are refused with it.
    write_failure: Mutex<Option<String>>,
    write_failed: AtomicBool,
    /// Every thread's counters, and a shared block for re-entrant calls.
    pub thread_stats: Mutex<Vec<Arc<ThreadStats>>>,
    pub fallback_stats: Arc<ThreadStats>,
    /// Counters of threads that have exited (merged in when they do).
    retired_stats: ThreadStats,
    /// Per-relation counters of threads that have exited (locked only
    /// while `thread_stats` is).
    retired_rels: Mutex<RetiredRelations>,
    /// Relations dropped, for threads' full counter tables to free.
    pub(crate) dropped_rels: Arc<DroppedRelations>,
    pub counters: PoolCounters,
    /// Threads that ever registered (for round-robin homes) and that are alive.
    pub registered_threads: AtomicUsize,
    pub active_threads: AtomicUsize,
    /// Wakes a hibernating background writer (set when it sleeps).
    pub bgwriter_sleeping: AtomicBool,
    pub bgwriter_wake: (parking_lot::Mutex<bool>, parking_lot::Condvar),
    /// Buffers whose read a stream has submitted and not yet reaped, with
    /// the operation: whoever would wait for one finishes the operation
    /// instead ([`PoolShared::wait_io`]). Sharded by buffer id.
    pub in_flight: stream::InFlightMap,
    /// The pins read streams may hold ahead of their consumers, shared.
    pub stream_budget: stream::StreamBudget,
    /// The trace file, when recording one (see [`crate::trace`]).
    pub(crate) trace: Option<Arc<crate::trace::TraceSink>>,
    /// The miss-ratio curve's sampler, when on (see [`crate::mrc`]).
    pub(crate) mrc: Option<Mutex<crate::mrc::Shards>>,
    /// Its threshold, for threads' private copies (0 when off: nothing is
    /// sampled). Written under the sampler's lock.
    pub(crate) mrc_threshold: AtomicU64,
}

/// A buffer pool: the shared buffers of one data directory.
///
/// Cheap to share between threads by reference (`&BufferPool`); pins borrow it.
#[derive(Debug)]
pub struct BufferPool {
    pub(crate) shared: Arc<PoolShared>,
    bgwriter: Option<bgwriter::BgWriterHandle>,
    /// In the open-pool registry (watching was on at open).
    watched: bool,
}

impl BufferPool {
    /// Open a pool over `storage` with no WAL.
    pub fn new(config: PoolConfig, storage: Arc<dyn StorageBackend>) -> Result<BufferPool> {
        BufferPool::with_wal(config, storage, Arc::new(NoWal))
    }

    /// Open a pool over `storage` that flushes `wal` before writing pages.
    pub fn with_wal(
        config: PoolConfig,
        storage: Arc<dyn StorageBackend>,
        wal: Arc<dyn WalSink>,
    ) -> Result<BufferPool> {
        config.validate()?;
        let topology = config.topology.clone().unwrap_or_else(Topology::detect);
        let n = config.buffers;
        // Bound partitions start on memory page boundaries (partition rule 6).
        let align = if topology.node_count() > 1 && !config.shmem_interleave {
            crate::numa::buffers_per_page(config.huge_pages)
        } else {
            1
        };
        let parts = PartitionMap::build_aligned(n, &config.partitions, &topology, align)?;
        let hands = parts
            .partitions()
            .iter()
            .map(|p| ClockHand::new(p.first, p.len))
            .collect();
        let probation = parts
            .partitions()
            .iter()
            .map(|p| {
                if config.evictor.has_probation() {
                    ProbationQueue::new(p.len, Evictor::probation_target(p.len))
                } else {
                    ProbationQueue::new(0, 1)
                }
            })
            .collect();
        // S3-FIFO sizes its ghost queue like its main queue: the pages that
        // would still be resident had they been admitted to main.
        let ghosts = if config.evictor.has_probation() {
            n - n / PROBATION_DIVISOR as usize
        } else {
            0
        };
        let trace = match &config.trace {
            Some(path) => Some(crate::trace::TraceSink::create(path, n)?),
            None => None,
        };
        let mrc = match config.mrc {
            Some(m) => Some(crate::mrc::Shards::new(n, m)?),
            None => None,
        };
        let mrc_threshold = AtomicU64::new(mrc.as_ref().map_or(0, |m| m.threshold()));
        let plan = crate::numa::PlacementPlan::compute(
            &parts,
            &topology,
            config.huge_pages,
            config.shmem_interleave,
        );
        let arena = Arena::placed(n, config.huge_pages, config.prefault, plan)?;
        let nparts = parts.len();
        let descs: Box<[BufferDesc]> = (0..n as BufferId)
            .map(|id| BufferDesc::in_partition(parts.partition_of(id)))
            .collect();
        if let crate::arena::Placement::Applied(plan) = arena.placement()
            && plan
                .ranges
                .iter()
                .all(|r| r.policy != crate::numa::Policy::Interleave)
        {
            bind_descriptors(&descs, &parts, &topology);
        }
        let shared = Arc::new(PoolShared {
            id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
            evictor: config.evictor,
            topology,
            descs,
            arena,
            table: BufTable::with_ghosts(n, ghosts),
            parts,
            hands,
            probation,
            storage,
            wal,
            ext_locks: Mutex::new(HashMap::new()),
            unlogged: RwLock::new(HashSet::new()),
            any_unlogged: AtomicBool::new(false),
            pending_sync: Mutex::new(HashSet::new()),
            durable: Mutex::new(HashMap::new()),
            zeroed_beyond_durable_is_new: AtomicBool::new(false),
            zeroed_new_pages: AtomicU64::new(0),
            write_failure: Mutex::new(None),
            write_failed: AtomicBool::new(false),
            thread_stats: Mutex::new(Vec::new()),
            fallback_stats: Arc::new(ThreadStats::new(nparts, None)),
            retired_stats: ThreadStats::new(nparts, None),
            retired_rels: Mutex::new(RetiredRelations::default()),
            dropped_rels: Arc::new(DroppedRelations::default()),
            counters: PoolCounters::default(),
            registered_threads: AtomicUsize::new(0),
            active_threads: AtomicUsize::new(0),
            bgwriter_sleeping: AtomicBool::new(false),
            bgwriter_wake: (parking_lot::Mutex::new(false), parking_lot::Condvar::new()),
            in_flight: stream::InFlightMap::new(),
            stream_budget: stream::StreamBudget::new(n),
            trace,
            mrc: mrc.map(Mutex::new),
            mrc_threshold,
            config,
        });
        let bgwriter = shared
            .config
            .bgwriter
            .map(|bg| bgwriter::BgWriterHandle::start(&shared, bg));
        let watched = registry::register_if_watching(&shared);
        Ok(BufferPool {
            shared,
            bgwriter,
            watched,
        })
    }

    /// Write this thread's buffered trace records to the trace file (a no-op
    /// without a trace): each worker thread calls it as its last act (see
    /// rule 2 of [`crate::trace`]). Reports the first failed write of the
    /// trace by any thread, if any.
    pub fn flush_trace(&self) -> Result<()> {
        let Some(sink) = &self.shared.trace else {
            return Ok(());
        };
        with_local(&self.shared, |local| {
            if let Some(t) = local.trace.as_mut() {
                t.write_out();
            }
        });
        sink.flush()
    }

    /// Stop recording the trace (a no-op without one): accesses and
    /// evictions from now on are not recorded; what every thread recorded
    /// before is kept and written as rule 2 of [`crate::trace`] says. So a
    /// benchmark's trace holds its measured run and not the data check it
    /// runs on the same pool afterwards. Writes this thread's batch first;
    /// reports the first failed write as [`flush_trace`](Self::flush_trace).
    pub fn stop_trace(&self) -> Result<()> {
        let Some(sink) = &self.shared.trace else {
            return Ok(());
        };
        self.flush_trace()?;
        sink.stop();
        sink.flush()
    }

    /// The hit ratio an LRU cache of 0.25x, 0.5x, 1x, 2x and 4x this pool's
    /// size would have had on the accesses sampled so far (see
    /// [`crate::mrc`]); `None` if the pool was opened without sampling
    /// ([`PoolConfig::mrc`]). Hands this thread's pending sampled accesses
    /// to the sampler first.
    pub fn miss_ratio_curve(&self) -> Option<crate::mrc::MissRatioCurve> {
        let sampler = self.shared.mrc.as_ref()?;
        with_local(&self.shared, |local| self.shared.mrc_flush(local));
        // Every counted access passed the sampler's filter: SHARDS-adj's
        // total.
        let accesses = self.stats().totals().accesses;
        Some(sampler.lock().curve(Some(accesses)))
    }

    /// The configuration the pool was opened with.
    pub fn config(&self) -> &PoolConfig {
        &self.shared.config
    }

    /// Number of buffers.
    pub fn size(&self) -> usize {
        self.shared.descs.len()
    }

    pub fn evictor(&self) -> Evictor {
        self.shared.evictor
    }

    pub fn storage(&self) -> &Arc<dyn StorageBackend> {
        &self.shared.storage
    }

    pub fn partitions(&self) -> &PartitionMap {
        &self.shared.parts
    }

    pub fn topology(&self) -> &Topology {
        &self.shared.topology
    }

    /// Whether the pool asked for huge pages and how much of its memory the
    /// kernel backs with them, read now (see [`Arena::huge_pages`]).
    pub fn huge_pages(&self) -> HugePageStatus {
        self.shared.arena.huge_pages()
    }

    /// What became of the NUMA placement of the pool's pages.
    pub fn placement(&self) -> &crate::arena::Placement {
        self.shared.arena.placement()
    }

    /// The partition the calling thread's next allocation starts from (its
    /// home; it follows the thread across nodes, partition rule 4).
    pub fn home_partition(&self) -> usize {
        local::with_local(&self.shared, |l| l.home)
    }

    /// The sweep batch in force for the calling situation.
    pub fn batch_size(&self) -> u32 {
        self.shared.batch_size()
    }

    /// Declare a relation unlogged: its pages are written without a WAL flush
    /// and checkpoints skip them (they are written at shutdown).
    pub fn set_unlogged(&self, rel: RelId, unlogged: bool) {
        let mut set = self.shared.unlogged.write();
        if unlogged {
            set.insert(rel);
        } else {
            set.remove(&rel);
        }
        self.shared
            .any_unlogged
            .store(!set.is_empty(), Ordering::Release);
    }

    /// Create the storage of a relation fork (no-op if it exists).
    pub fn create_fork(&self, rf: RelFork) -> Result<()> {
        self.shared.storage.create(rf)
    }

    /// Number of blocks in a relation fork.
    pub fn nblocks(&self, rf: RelFork) -> Result<BlockNumber> {
        self.shared.storage.nblocks(rf)
    }

    /// A ring for a bulk operation, sized from the configuration and capped at
    /// pool / 8; `None` when rings are off or this kind's size is 0.
    pub fn ring(&self, kind: RingKind) -> Option<Ring> {
        let c = &self.shared.config;
        if !c.rings {
            return None;
        }
        let kib = match kind {
            RingKind::BulkRead => c.ring_sizes.bulk_read_kib,
            RingKind::BulkWrite => c.ring_sizes.bulk_write_kib,
            RingKind::Vacuum => c.ring_sizes.vacuum_kib,
        };
        let n = (kib * 1024 / PAGE_SIZE).min(self.size() / 8);
        (n > 0).then(|| Ring::new(kind, self.shared.id, n))
    }

    /// Like [`ring`](Self::ring) but even when rings are off in the
    /// configuration (a scan that insists on one, as the scenarios do).
    pub fn ring_forced(&self, kind: RingKind, kib: usize) -> Option<Ring> {
        let n = (kib * 1024 / PAGE_SIZE).min(self.size() / 8);
        (n > 0).then(|| Ring::new(kind, self.shared.id, n))
    }

    /// A snapshot of the statistics.
    pub fn stats(&self) -> PoolStats {
        BufferPool::stats_of(&self.shared)
    }

    /// Evictions the calling thread has made in this pool so far (misses of
    /// its own that replaced a valid page, as [`stats`](Self::stats) counts
    /// them), read from the thread's own counters without the registry lock.
    /// It only grows while the thread lives, so a difference across one
    /// call says whether that call evicted a page. (Inside a callback that
    /// re-enters the pool, the thread's counters are borrowed and this reads
    /// the pool's shared block for such calls instead.)
    pub fn thread_evictions(&self) -> u64 {
        with_local(&self.shared, |local| {
            local
                .stats
                .parts
                .iter()
                .map(|c| c.evictions.load(Ordering::Relaxed))
                .sum()
        })
    }

    pub(crate) fn stats_of(s: &PoolShared) -> PoolStats {
        // Under the registry lock, so a thread retiring meanwhile is counted once.
        let threads = s.thread_stats.lock();
        let retired = s.retired_rels.lock();
        PoolStats::collect(
            threads
                .iter()
                .map(|t| &**t)
                .chain([&*s.fallback_stats, &s.retired_stats]),
            &retired,
            s.parts.len(),
            &s.counters,
            s.evictor,
            s.descs.len(),
            s.batch_size(),
            s.arena.huge_pages_recent(),
        )
    }

    /// Run one background-writer round now (also what the bgwriter thread
    /// does every `delay`). Returns pages written.
    pub fn bgwriter_round(&self) -> Result<usize> {
        match &self.bgwriter {
            Some(h) => h.round_now(&self.shared),
            None => bgwriter::BgWriterHandle::detached_round(
                &self.shared,
                self.shared.config.bgwriter.unwrap_or_default(),
            ),
        }
    }

    /// The error that made the pool refuse writes, if any.
    pub fn write_failure(&self) -> Option<String> {
        self.shared.write_failure.lock().clone()
    }
}

/// Move each partition's descriptors to its node: the 4 KiB pages wholly
/// inside the partition's slice of the array (64 descriptors a page; a page
/// shared by two partitions stays where it is). Descriptors are read by
/// every sweep tick of their partition, so they belong with its threads.
/// A refusal is logged once; descriptors then stay where they were built.
fn bind_descriptors(descs: &[BufferDesc], parts: &PartitionMap, topology: &Topology) {
    for p in parts.partitions() {
        let slice = &descs[p.first as usize..(p.first + p.len) as usize];
        let node = topology.nodes[p.node.min(topology.node_count() - 1)].id;
        if let Err(why) = crate::numa::bind_interior(
            slice.as_ptr().cast::<u8>().cast_mut(),
            std::mem::size_of_val(slice),
            node,
        ) {
            crate::numa::log_refused(&format!(
                "binding the descriptors of buffers {}..: {why}",
                p.first
            ));
            return;
        }
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        if self.watched {
            registry::unregister(self.shared.id);
        }
        if let Some(bg) = self.bgwriter.take() {
            bg.stop(&self.shared);
        }
        if self.shared.trace.is_some() {
            // This thread's records; a write error has no one to go to here
            // (callers that care call `flush_trace` first).
            let _ = self.flush_trace();
        }
    }
}

impl PoolShared {
    #[inline]
    pub fn batch_size(&self) -> u32 {
        match self.config.batch {
            SweepBatch::Fixed(b) => b,
            SweepBatch::Auto => {
                if self.active_threads.load(Ordering::Relaxed) > self.topology.cores {
                    1
                } else {
                    SweepBatch::machine_size(&self.topology)
                }
            }
        }
    }

    fn is_permanent(&self, rel: RelId) -> bool {
        !self.any_unlogged.load(Ordering::Acquire) || !self.unlogged.read().contains(&rel)
    }

    #[inline]
    fn desc(&self, id: BufferId) -> &BufferDesc {
        &self.descs[id as usize]
    }

    /// Pin with the evictor's rule (`PinBuffer`). Returns the new state, or
    /// `None` if the buffer is already pinned as often as the refcount field
    /// can count (a wrapped count would make a pinned page look unpinned).
    #[inline]
    pub fn pin(&self, id: BufferId, ring: bool) -> Option<u64> {
        let d = self.desc(id);
        let mut s = d.load();
        loop {
            if s & LOCKED != 0 {
                s = d.wait_header_unlocked();
                continue;
            }
            if refcount(s) == REFCOUNT_MASK {
                return None;
            }
            let new = self.evictor.on_pin(s, ring);
            match d
                .state
                .compare_exchange_weak(s, new, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return Some(new),
                Err(actual) => s = actual,
            }
        }
    }

    pub(super) fn too_many_pins(tag: BufferTag) -> Error {
        Error::TooManyPins {
            tag,
            pins: REFCOUNT_MASK,
        }
    }

    /// Fold an exiting thread's counters into the retired block.
    pub(crate) fn retire_thread(&self, stats: &Arc<ThreadStats>) {
        let mut threads = self.thread_stats.lock();
        threads.retain(|t| !Arc::ptr_eq(t, stats));
        stats.merge_into(&self.retired_stats);
        self.retired_rels.lock().absorb(stats);
    }

    /// Register a thread's stats block.
    pub(crate) fn register_thread(self: &Arc<Self>) -> (usize, Arc<ThreadStats>) {
        let ordinal = self.registered_threads.fetch_add(1, Ordering::Relaxed);
        self.active_threads.fetch_add(1, Ordering::Relaxed);
        let stats = Arc::new(ThreadStats::new(
            self.parts.len(),
            Some(self.dropped_rels.clone()),
        ));
        self.thread_stats.lock().push(stats.clone());
        (ordinal, stats)
    }
}

impl BufferDesc {
    /// Release the header lock adding one pin (`PinBuffer_Locked`): no usage change.
    pub(crate) fn unlock_header_pinned(&self) {
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            let new = (cur & !LOCKED) + REFCOUNT_ONE;
            match self
                .state
                .compare_exchange_weak(cur, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(a) => cur = a,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::FileStorage;
    use crate::table::HashedTag;
    use std::time::Duration;

    const REL: RelFork = RelFork::main(RelId(7));

    /// A pool of `buffers` over a temporary directory holding REL with
    /// `blocks` pages, all resident (each page starts with its block number).
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
        (dir, pool)
    }

    #[test]
    fn a_pool_too_large_for_buffer_ids_is_refused_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let files = Arc::new(FileStorage::open(dir.path()).unwrap());
        assert!(BufferPool::new(PoolConfig::new(1 << 34), files).is_err());
    }

    fn id_of(pool: &BufferPool, block: BlockNumber) -> BufferId {
        pool.read_buffer(REL, block, None).unwrap().id()
    }

    #[test]
    fn descriptors_know_their_sweep_partition() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(FileStorage::open(dir.path()).unwrap());
        for parts in [1, 3, 4] {
            let pool = BufferPool::new(
                PoolConfig::new(50).partitions(parts).bgwriter(None),
                storage.clone(),
            )
            .unwrap();
            let s = &pool.shared;
            for id in 0..50 {
                assert_eq!(s.desc(id).partition(), s.parts.partition_of(id));
            }
        }
    }

    /// Partition rule 4: on a synthetic two-node map where CPU 0 is node 0
    /// and CPU 1 node 1, a thread pinned to CPU 0 and then to CPU 1 has its
    /// home move to node 1's partitions within HOME_RECHECK_EVERY allocations.
    #[test]
    fn home_partition_follows_a_migrated_thread() {
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            eprintln!("skipped: fewer than two CPUs to migrate between");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(FileStorage::open(dir.path()).unwrap());
        let topo = Topology::synthetic("numa:2 pu:1").unwrap();
        let pool = BufferPool::new(
            PoolConfig::new(64)
                .topology(topo)
                .partitions(4)
                .bgwriter(None),
            storage,
        )
        .unwrap();
        pool.create_fork(REL).unwrap();
        let parts_of = |node: usize| -> Vec<usize> {
            (0..4)
                .filter(|&p| pool.partitions().get(p).node == node)
                .collect()
        };
        assert_eq!((parts_of(0), parts_of(1)), (vec![0, 1], vec![2, 3]));
        let mut next_block = 0;
        let mut allocate = |n: u32| {
            for _ in 0..n {
                let p = pool.extend(REL, None).unwrap();
                drop(p);
                next_block += 1;
            }
        };
        std::thread::scope(|sc| {
            sc.spawn(|| {
                for (cpu, node) in [(0, 0), (1, 1), (0, 0)] {
                    crate::numa::topology::pin_current_thread(cpu).unwrap();
                    assert_eq!(crate::numa::topology::current_cpu(), Some(cpu));
                    allocate(crate::numa::partition::HOME_RECHECK_EVERY + 1);
                    let home = pool.home_partition();
                    assert!(
                        parts_of(node).contains(&home),
                        "on CPU {cpu}: home {home} is not on node {node}"
                    );
                }
            })
            .join()
            .unwrap();
        });
    }

    /// The NUMA view is queried: every row of a pre-touched pool has the
    /// node the kernel reports, a node this machine has, and the summary's
    /// per-node totals add up to the pool.
    #[test]
    fn buffercache_rows_carry_the_queried_node() {
        let (_dir, pool) = pool_with(32, 5);
        let rows = pool.buffercache();
        let sum = pool.buffercache_summary();
        if !cfg!(target_os = "linux") {
            return;
        }
        let real =
            Topology::from_sysfs(std::path::Path::new(crate::numa::topology::SYSFS_NODE_ROOT));
        for r in &rows {
            let n = r
                .numa_node
                .unwrap_or_else(|| panic!("buffer {} has no node", r.id));
            if let Some(t) = &real {
                assert!(
                    t.nodes.iter().any(|x| x.id == n),
                    "buffer {} on node {n}",
                    r.id
                );
            }
        }
        let (buffers, used) = sum
            .per_node
            .iter()
            .fold((0, 0), |(b, u), &(_, nb, nu)| (b + nb, u + nu));
        assert_eq!((buffers, used), (32, sum.used));
        assert_eq!(sum.used, 5);
    }

    /// On a synthetic six-node map the pool binds partition 0's pages to
    /// node 0, is refused at node 1 (absent here), says so, and works.
    #[test]
    fn six_node_pool_works_when_binding_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Arc::new(FileStorage::open(dir.path()).unwrap());
        let topo = Topology::synthetic("pack:2 numa:3 core:2 pu:1").unwrap();
        let real_nodes =
            Topology::from_sysfs(std::path::Path::new(crate::numa::topology::SYSFS_NODE_ROOT))
                .map_or(1, |t| t.node_count());
        let pool =
            BufferPool::new(PoolConfig::new(600).topology(topo).bgwriter(None), storage).unwrap();
        assert_eq!(pool.partitions().len(), 6);
        match pool.placement() {
            crate::arena::Placement::Refused(plan, why) if real_nodes < 6 => {
                assert_eq!(plan.ranges.len(), 6);
                assert!(why.contains("to node"), "{why}");
            }
            crate::arena::Placement::Applied(_) if real_nodes >= 6 => {}
            other => panic!("{real_nodes} real nodes, placement {other:?}"),
        }
        pool.create_fork(REL).unwrap();
        for b in 0..1000u32 {
            let mut p = pool.extend(REL, None).unwrap();
            p[100..104].copy_from_slice(&b.to_le_bytes());
            p.mark_dirty();
        }
        for b in (0..1000).step_by(7) {
            let p = pool.read_buffer(REL, b, None).unwrap();
            let g = p.lock_shared();
            assert_eq!(u32::from_le_bytes(g[100..104].try_into().unwrap()), b);
        }
    }

    #[test]
    fn optimistic_pin_pins_only_the_buffer_of_the_tag() {
        let (_dir, pool) = pool_with(16, 2);
        let s = &pool.shared;
        let (a, b) = (id_of(&pool, 0), id_of(&pool, 1));
        let tag0 = BufferTag::new(REL, 0);
        let before = s.desc(b).load();
        // Another page's buffer: rejected before any write to its state.
        assert_eq!(s.pin_if_tagged(b, tag0, false), None);
        assert_eq!(s.desc(b).load(), before, "a rejected candidate was written");
        // The right one: pinned once, with the evictor's pin rule.
        let (id, state) = s.pin_if_tagged(a, tag0, false).unwrap();
        assert_eq!(id, a);
        assert_eq!(refcount(state), 1);
        assert_eq!(state, s.desc(a).load());
        s.desc(a).unpin();
        assert_eq!(pool.pinned_buffers(), 0);
    }

    #[test]
    fn optimistic_pin_never_pins_a_tagless_buffer() {
        let (_dir, pool) = pool_with(16, 1);
        let s = &pool.shared;
        let id = id_of(&pool, 0);
        // Forget the page: the buffer is tagless, as a victim between steps 4 and 6.
        assert_eq!(pool.evict_buffer(id).unwrap(), (true, true));
        let d = s.desc(id);
        assert_eq!(d.load() & TAG_VALID, 0);
        assert_eq!(s.pin_if_tagged(id, BufferTag::new(REL, 0), false), None);
        // Even with the tag still in place but TAG_VALID clear.
        d.lock_header();
        d.set_tag(Some(BufferTag::new(REL, 0)));
        d.unlock_header(0, 0);
        assert_eq!(s.pin_if_tagged(id, BufferTag::new(REL, 0), false), None);
        assert_eq!(refcount(d.load()), 0);
        d.lock_header();
        d.set_tag(None);
        d.unlock_header(0, 0);
    }

    /// A hit takes no mapping partition lock: it completes while another
    /// thread holds the page's partition lock exclusive.
    #[test]
    fn a_hit_needs_no_mapping_lock() {
        let (_dir, pool) = pool_with(16, 4);
        for b in 0..4 {
            id_of(&pool, b);
        }
        let s = pool.stats();
        let ht = HashedTag::new(BufferTag::new(REL, 3));
        let held = pool.shared.table.write(ht.partition());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|sc| {
            sc.spawn(|| {
                let p = pool.read_buffer(REL, 3, None).unwrap();
                let g = p.lock_shared();
                tx.send(u32::from_le_bytes(g[100..104].try_into().unwrap()))
                    .unwrap();
            });
            let got = rx.recv_timeout(Duration::from_secs(10));
            drop(held);
            assert_eq!(got, Ok(3), "the hit waited for the mapping lock");
        });
        let t = pool.stats().since(&s).totals();
        assert_eq!((t.accesses, t.hits, t.reads), (1, 1, 0));
    }

    /// A page evicted and read back into another buffer is found there, and
    /// its old buffer, now holding another page, is not returned for it.
    #[test]
    fn a_retagged_buffer_is_not_a_hit_for_its_old_page() {
        let (_dir, pool) = pool_with(4, 12);
        for round in 0..3 {
            for b in 0..12 {
                let p = pool.read_buffer(REL, b, None).unwrap();
                assert_eq!(p.block(), b);
                let g = p.lock_shared();
                assert_eq!(u32::from_le_bytes(g[100..104].try_into().unwrap()), b);
                drop(g);
                if (b + round) % 3 == 0 {
                    pool.evict_all().unwrap();
                }
            }
        }
        assert_eq!(pool.pinned_buffers(), 0);
        let t = pool.stats().totals();
        assert_eq!(t.hits + t.reads, t.accesses);
    }

    #[test]
    fn a_thread_alternating_between_pools_counts_each_hit_in_its_own_pool() {
        let (_d1, a) = pool_with(16, 4);
        let (_d2, b) = pool_with(16, 4);
        let (_d3, c) = pool_with(16, 4);
        let before = [&a, &b, &c].map(|p| p.stats().totals());
        // The thread's state for the pool it used last is kept first: this
        // order moves each pool to the front and back again many times.
        for round in 0..30u32 {
            drop(a.read_buffer(REL, round % 4, None).unwrap());
            drop(b.read_buffer(REL, round % 4, None).unwrap());
            drop(b.read_buffer(REL, round % 4, None).unwrap());
            if round % 3 == 0 {
                drop(c.read_buffer(REL, round % 4, None).unwrap());
            }
        }
        let hits = [&a, &b, &c].map(|p| p.stats().totals());
        let got: Vec<(u64, u64)> = (0..3)
            .map(|i| {
                (
                    hits[i].accesses - before[i].accesses,
                    hits[i].hits - before[i].hits,
                )
            })
            .collect();
        assert_eq!(got, vec![(30, 30), (60, 60), (10, 10)]);
    }

    #[test]
    fn a_read_from_inside_a_read_of_the_same_thread_is_counted() {
        // A callback that reads while the thread's state is borrowed gets a
        // temporary state; its access still reaches the pool's statistics.
        let (_dir, pool) = pool_with(16, 4);
        let shared = pool.shared.clone();
        let before = pool.stats().totals();
        local::with_local(&shared, |_outer| {
            drop(pool.read_buffer(REL, 1, None).unwrap());
        });
        let after = pool.stats().totals();
        assert_eq!(after.accesses - before.accesses, 1);
        assert_eq!(after.hits - before.hits, 1);
    }
}
