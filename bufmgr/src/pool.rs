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
//! # A miss, step by step (`BufferAlloc` + `GetVictimBuffer`)
//! 1. Look the tag up in the mapping table's lock-free read index; pin the
//!    buffer it names (the evictor's pin rule) and validate it: pinned, it
//!    must be `TAG_VALID` with our tag (`PoolShared::pin_if_tagged`). If
//!    the index has nothing or the candidate fails, look up under the mapping
//!    partition's shared lock and pin before releasing it. On a hit, done
//!    (waiting for the read if it is still in progress).
//! 2. Otherwise get a victim without holding any mapping lock: from the ring if
//!    the caller has one and its current slot is reusable, else from the clock
//!    sweep of the partition chosen for this thread. The victim comes back
//!    pinned by us alone.
//! 3. If the victim is dirty: take its content lock share-exclusive *without
//!    waiting* (waiting could deadlock against a thread that pinned it and
//!    waits for us), ask the ring whether to reject it, else write it.
//! 4. Invalidate the victim's old identity: its old mapping partition lock
//!    exclusive, then its header lock; give up and retry from 2 if someone
//!    else pinned or dirtied it meanwhile.
//! 5. Insert the new tag under the new partition's exclusive lock. If another
//!    thread inserted it first, unpin our victim (it is clean and tagless, the
//!    sweep finds it at once) and pin theirs, as a hit.
//! 6. Set the tag with `TAG_VALID | IO_IN_PROGRESS` in one header-lock hold, so
//!    a thread that finds the tag before the read completes waits for it
//!    instead of reading the block a second time. Read, verify the checksum,
//!    set `VALID`, wake the waiters.
//!
//! # Lock order
//! mapping partition locks (ascending) -> content lock -> header lock. The
//! header lock is never held across anything that blocks. The extension lock
//! of a relation is taken before any of these.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock, lock_api::RawRwLock as _, lock_api::RawRwLockUpgrade as _};

use crate::arena::{Arena, HugePageStatus};
use crate::config::{PoolConfig, SweepBatch};
use crate::desc::*;
use crate::error::{Error, Result};
use crate::evictor::{Evictor, Tick};
use crate::guard::{PageWrite, PinnedBuffer};
use crate::io::StorageBackend;
use crate::local::{Local, with_local};
use crate::page;
use crate::partition::PartitionMap;
use crate::ring::{Ring, RingKind};
use crate::stats::{
    BufferCacheSummary, BufferRow, EvictCounts, PoolCounters, PoolStats, ThreadStats, bump,
};
use crate::sweep::ClockHand;
use crate::table::{BufTable, HashedTag};
use crate::tag::{BlockNumber, BufferTag, Fork, PAGE_SIZE, RelFork, RelId};
use crate::topology::Topology;
use crate::wal_hook::{NoWal, WalSink};

static NEXT_POOL_ID: AtomicU64 = AtomicU64::new(1);

/// How long `drop_relation` waits for a pinned buffer of the relation to be released.
const DROP_PIN_WAIT: Duration = Duration::from_secs(10);

/// Who is writing a page (for the statistics that say who wrote what).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Writer {
    /// A thread that needed a victim and found it dirty.
    Backend,
    /// A thread recycling a dirty buffer of its own ring.
    Ring,
    Background,
    Checkpoint,
    /// Explicit flushes and evictions.
    Other,
}

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
    pub storage: Arc<dyn StorageBackend>,
    pub wal: Arc<dyn WalSink>,
    /// One lock per relation fork being extended.
    ext_locks: Mutex<HashMap<RelFork, Arc<Mutex<()>>>>,
    /// Relations that are not WAL-logged.
    unlogged: RwLock<HashSet<RelId>>,
    any_unlogged: AtomicBool,
    /// Forks written since the last `flush_all`, to fsync then.
    pending_sync: Mutex<HashSet<RelFork>>,
    /// Set by the first failed write; later writes are refused with it.
    write_failure: Mutex<Option<String>>,
    write_failed: AtomicBool,
    /// Every thread's counters, and a shared block for re-entrant calls.
    pub thread_stats: Mutex<Vec<Arc<ThreadStats>>>,
    pub fallback_stats: Arc<ThreadStats>,
    /// Counters of threads that have exited (merged in when they do).
    retired_stats: ThreadStats,
    pub counters: PoolCounters,
    /// Threads that ever registered (for round-robin homes) and that are alive.
    pub registered_threads: AtomicUsize,
    pub active_threads: AtomicUsize,
    /// Wakes a hibernating background writer (set when it sleeps).
    pub bgwriter_sleeping: AtomicBool,
    pub bgwriter_wake: (parking_lot::Mutex<bool>, parking_lot::Condvar),
}

/// A buffer pool: the shared buffers of one data directory.
///
/// Cheap to share between threads by reference (`&BufferPool`); pins borrow it.
#[derive(Debug)]
pub struct BufferPool {
    pub(crate) shared: Arc<PoolShared>,
    bgwriter: Option<crate::bgwriter::BgWriterHandle>,
}

/// How a miss fills the buffer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum ReadMode {
    /// Read the block from storage and verify its checksum.
    Normal,
    /// Zero the buffer instead of reading (PostgreSQL's `RBM_ZERO_AND_LOCK`).
    ZeroNoRead,
    /// Read without failing on a checksum mismatch (counted all the same).
    NoVerify,
}

/// Outcome of starting I/O on a buffer.
enum StartIo {
    /// Someone else did it (the page is valid / no longer dirty).
    AlreadyDone,
    /// We own the I/O now (`IO_IN_PROGRESS` is set by us).
    Ready,
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
        let parts = PartitionMap::build(n, &config.partitions, &topology)?;
        let hands = parts
            .partitions()
            .iter()
            .map(|p| ClockHand::new(p.first, p.len))
            .collect();
        let arena = Arena::new(n, config.huge_pages)?;
        let nparts = parts.len();
        let shared = Arc::new(PoolShared {
            id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
            evictor: config.evictor,
            topology,
            descs: (0..n as BufferId)
                .map(|id| BufferDesc::in_partition(parts.partition_of(id)))
                .collect(),
            arena,
            table: BufTable::new(n),
            parts,
            hands,
            storage,
            wal,
            ext_locks: Mutex::new(HashMap::new()),
            unlogged: RwLock::new(HashSet::new()),
            any_unlogged: AtomicBool::new(false),
            pending_sync: Mutex::new(HashSet::new()),
            write_failure: Mutex::new(None),
            write_failed: AtomicBool::new(false),
            thread_stats: Mutex::new(Vec::new()),
            fallback_stats: Arc::new(ThreadStats::new(nparts)),
            retired_stats: ThreadStats::new(nparts),
            counters: PoolCounters::default(),
            registered_threads: AtomicUsize::new(0),
            active_threads: AtomicUsize::new(0),
            bgwriter_sleeping: AtomicBool::new(false),
            bgwriter_wake: (parking_lot::Mutex::new(false), parking_lot::Condvar::new()),
            config,
        });
        let bgwriter = shared
            .config
            .bgwriter
            .map(|bg| crate::bgwriter::BgWriterHandle::start(&shared, bg));
        Ok(BufferPool { shared, bgwriter })
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

    pub fn huge_pages(&self) -> HugePageStatus {
        self.shared.arena.huge_pages()
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

    /// Pin block `block` of `rf`, reading it on a miss. With a ring, pins
    /// never raise usage past the first step and victims come from the ring.
    #[inline]
    pub fn read_buffer(
        &self,
        rf: RelFork,
        block: BlockNumber,
        ring: Option<&mut Ring>,
    ) -> Result<PinnedBuffer<'_>> {
        let tag = BufferTag::new(rf, block);
        let id = with_local(&self.shared, |local| {
            self.shared.read_buffer(local, tag, ring, ReadMode::Normal)
        })?;
        Ok(PinnedBuffer::new(&self.shared, id))
    }

    /// Block `block` of `rf`, exclusively locked, *without reading it* on a
    /// miss: the buffer is zeroed instead (PostgreSQL's `RBM_ZERO_AND_LOCK`).
    /// For redo of a record that rewrites the whole page (a full-page image,
    /// or a record that initialises the page): the copy on disk may be torn
    /// and must not be read. If the page is already in the pool it is
    /// returned as it is. The block must exist in the file (extend first).
    pub fn read_buffer_zeroed(&self, rf: RelFork, block: BlockNumber) -> Result<PageWrite<'_>> {
        let nblocks = self.shared.storage.nblocks(rf)?;
        if block >= nblocks {
            return Err(Error::BlockOutOfRange {
                relfork: rf,
                block,
                nblocks,
                path: self.shared.storage.path(rf),
            });
        }
        let tag = BufferTag::new(rf, block);
        let id = with_local(&self.shared, |local| {
            self.shared
                .read_buffer(local, tag, None, ReadMode::ZeroNoRead)
        })?;
        Ok(PinnedBuffer::new(&self.shared, id).lock_exclusive())
    }

    /// Pin block `block` of `rf` like [`read_buffer`](Self::read_buffer),
    /// but accept a page whose checksum does not match (the mismatch is still
    /// counted in the statistics). For redo of pages that replay makes whole
    /// again without a full-page image: the commit log, whose status bits are
    /// only ever set once and whose every change since the redo point is in
    /// the WAL, so a torn copy (half old, half new) is repaired by replaying
    /// onto it. Its checksum is recomputed when the page is next written.
    pub fn read_buffer_unverified(
        &self,
        rf: RelFork,
        block: BlockNumber,
    ) -> Result<PinnedBuffer<'_>> {
        let tag = BufferTag::new(rf, block);
        let id = with_local(&self.shared, |local| {
            self.shared
                .read_buffer(local, tag, None, ReadMode::NoVerify)
        })?;
        Ok(PinnedBuffer::new(&self.shared, id))
    }

    /// The page a WAL record is about to be replayed on, exclusively locked
    /// (PostgreSQL's `XLogReadBufferForRedo`): the fork is created and the
    /// relation extended with zero pages up to `block` if its file is shorter
    /// (it lost writes, or replay starts from empty files). With
    /// `rewrites_whole_page` (a full-page image, or a record that
    /// initialises the page) the copy on disk, which may be torn, is not
    /// read: see [`read_buffer_zeroed`](Self::read_buffer_zeroed).
    pub fn read_buffer_for_redo(
        &self,
        rf: RelFork,
        block: BlockNumber,
        rewrites_whole_page: bool,
    ) -> Result<PageWrite<'_>> {
        self.create_fork(rf)?;
        let mut nblocks = self.nblocks(rf)?;
        while nblocks <= block {
            let page = self.extend(rf, None)?;
            if page.block() == block {
                return Ok(page);
            }
            nblocks = page.block() + 1;
        }
        if rewrites_whole_page {
            self.read_buffer_zeroed(rf, block)
        } else {
            Ok(self.read_buffer(rf, block, None)?.lock_exclusive())
        }
    }

    /// Append a zeroed page to `rf` and return it exclusively locked. The
    /// caller initialises it and marks it dirty. The file grows by one page
    /// at once, so a later extension never reuses this block number.
    pub fn extend(&self, rf: RelFork, ring: Option<&mut Ring>) -> Result<PageWrite<'_>> {
        let (id, mark) = with_local(&self.shared, |local| self.shared.extend(local, rf, ring))?;
        Ok(PageWrite::from_locked(
            PinnedBuffer::new(&self.shared, id),
            mark,
        ))
    }

    /// Write every dirty page (permanent ones only unless `include_unlogged`)
    /// in (relation, fork, block) order, then fsync every file written since
    /// the last call. Pages dirtied after the call starts are not waited for.
    /// Returns the number of pages written.
    pub fn flush_all(&self, include_unlogged: bool) -> Result<usize> {
        self.shared.flush_all(include_unlogged)
    }

    /// Write the dirty pages of one relation fork and fsync it.
    pub fn flush_relation(&self, rf: RelFork) -> Result<usize> {
        let mut written = 0;
        for id in 0..self.size() as BufferId {
            let d = &self.shared.descs[id as usize];
            let s = d.lock_header();
            let mine = d.tag().is_some_and(|t| t.relfork() == rf);
            d.unlock_header(0, 0);
            if mine && s & (DIRTY | VALID) == DIRTY | VALID {
                written += usize::from(
                    self.shared
                        .sync_one_buffer(id, false, Some(rf), Writer::Other)?
                        .written,
                );
            }
        }
        self.shared.sync_pending(Some(rf))?;
        Ok(written)
    }

    /// Forget every page of `rel` (all forks) in the pool, dirty or not, and
    /// delete its files. Waits briefly for pins on its pages to be released.
    pub fn drop_relation(&self, rel: RelId) -> Result<()> {
        self.shared.invalidate_where(|t| t.rel == rel)?;
        for fork in Fork::ALL {
            let rf = RelFork { rel, fork };
            self.shared.pending_sync.lock().remove(&rf);
            self.shared.storage.unlink(rf)?;
        }
        self.shared.unlogged.write().remove(&rel);
        Ok(())
    }

    /// Cut `rf` to `nblocks` blocks, forgetting the pages beyond.
    pub fn truncate_relation(&self, rf: RelFork, nblocks: BlockNumber) -> Result<()> {
        let ext = self.shared.ext_lock(rf);
        let _g = ext.lock();
        self.shared
            .invalidate_where(|t| t.relfork() == rf && t.block >= nblocks)?;
        self.shared.storage.truncate(rf, nblocks)
    }

    /// One row per buffer, each read under its header lock (pg_buffercache).
    pub fn buffercache(&self) -> Vec<BufferRow> {
        let s = &self.shared;
        (0..s.descs.len() as BufferId)
            .map(|id| {
                let d = &s.descs[id as usize];
                let st = d.lock_header();
                let tag = if st & (VALID | TAG_VALID) == VALID | TAG_VALID {
                    d.tag()
                } else {
                    None
                };
                d.unlock_header(0, 0);
                BufferRow {
                    id,
                    tag,
                    dirty: st & DIRTY != 0,
                    usage: s.evictor.usage_level(st),
                    pins: refcount(st) as u32,
                    partition: s.parts.partition_of(id),
                }
            })
            .collect()
    }

    /// pg_buffercache_summary and usage counts.
    pub fn buffercache_summary(&self) -> BufferCacheSummary {
        BufferCacheSummary::from_rows(&self.buffercache(), self.shared.evictor)
    }

    /// Number of buffers pinned right now (0 once every guard is gone).
    pub fn pinned_buffers(&self) -> usize {
        self.shared
            .descs
            .iter()
            .filter(|d| refcount(d.load()) > 0)
            .count()
    }

    /// Pages of each relation fork resident in the pool.
    pub fn resident_pages(&self) -> HashMap<RelFork, usize> {
        let mut m = HashMap::new();
        for r in self.buffercache() {
            if let Some(t) = r.tag {
                *m.entry(t.relfork()).or_insert(0) += 1;
            }
        }
        m
    }

    /// Evict one buffer: write it if dirty, then forget it. Returns
    /// (evicted, flushed); a pinned or invalid buffer is not evicted.
    pub fn evict_buffer(&self, id: BufferId) -> Result<(bool, bool)> {
        if id as usize >= self.size() {
            return Err(Error::InvalidConfig(format!(
                "buffer {id} does not exist (pool of {} buffers)",
                self.size()
            )));
        }
        self.shared.evict_one(id, None)
    }

    /// Evict every buffer of a relation fork that is not pinned.
    pub fn evict_relation(&self, rf: RelFork) -> Result<EvictCounts> {
        let mut c = EvictCounts::default();
        for id in 0..self.size() as BufferId {
            let d = &self.shared.descs[id as usize];
            d.lock_header();
            let mine = d.tag().is_some_and(|t| t.relfork() == rf);
            d.unlock_header(0, 0);
            if mine {
                match self.shared.evict_one(id, Some(rf))? {
                    (true, flushed) => {
                        c.evicted += 1;
                        c.flushed += usize::from(flushed);
                    }
                    (false, _) => c.skipped += 1,
                }
            }
        }
        Ok(c)
    }

    /// Evict every unpinned buffer.
    pub fn evict_all(&self) -> Result<EvictCounts> {
        let mut c = EvictCounts::default();
        for id in 0..self.size() as BufferId {
            match self.shared.evict_one(id, None)? {
                (true, flushed) => {
                    c.evicted += 1;
                    c.flushed += usize::from(flushed);
                }
                (false, _) => {
                    if self.shared.descs[id as usize].load() & VALID != 0 {
                        c.skipped += 1;
                    }
                }
            }
        }
        Ok(c)
    }

    /// A snapshot of the statistics.
    pub fn stats(&self) -> PoolStats {
        let s = &self.shared;
        // Under the registry lock, so a thread retiring meanwhile is counted once.
        let threads = s.thread_stats.lock();
        PoolStats::collect(
            threads
                .iter()
                .map(|t| &**t)
                .chain([&*s.fallback_stats, &s.retired_stats]),
            s.parts.len(),
            &s.counters,
            s.evictor,
            s.descs.len(),
            s.batch_size(),
            s.arena.huge_pages(),
        )
    }

    /// Run one background-writer round now (also what the bgwriter thread
    /// does every `delay`). Returns pages written.
    pub fn bgwriter_round(&self) -> Result<usize> {
        match &self.bgwriter {
            Some(h) => h.round_now(&self.shared),
            None => crate::bgwriter::BgWriterHandle::detached_round(
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

impl Drop for BufferPool {
    fn drop(&mut self) {
        if let Some(bg) = self.bgwriter.take() {
            bg.stop(&self.shared);
        }
    }
}

/// What `sync_one_buffer` found.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct SyncResult {
    pub written: bool,
    pub reusable: bool,
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

    /// The optimistic pin of the hit path: pin buffer `id` (the evictor's pin
    /// rule) if, pinned, it is the buffer of `tag` in the mapping table.
    /// Returns `(id, state after the pin)`, or `None` with nothing pinned.
    ///
    /// Why a pin validated afterwards is as good as a pin under the mapping
    /// lock (desc rule 3): the CAS pins only a state with `TAG_VALID`, and
    /// once our pin is in, nobody can clear `TAG_VALID` or change the tag —
    /// every path that does (`invalidate_victim`, `forget_if_never_valid`,
    /// `invalidate_where`) checks under the header lock that no pin but its
    /// own is held, and a pin CAS never succeeds while the header lock is
    /// held. So a tag read *after* the pin is stable, and `TAG_VALID` with
    /// the wanted tag means the map holds `tag -> id` (both change together
    /// under the partition lock). Since only `TAG_VALID` states are pinned,
    /// a tagless victim that someone else holds is never pinned here.
    ///
    /// The tag is also read before pinning, so a stale index entry (the
    /// buffer holds another page now) costs two loads and no write. A failed
    /// validation after the pin (the buffer was retagged between that read
    /// and the CAS) unpins; the usage bump its pin gave the buffer stays, as
    /// if the new page had been touched once: harmless to correctness and
    /// confined to that race. Nothing is counted in the statistics here; the
    /// caller counts the access once it has a buffer.
    #[inline]
    fn pin_if_tagged(&self, id: BufferId, tag: BufferTag, ring: bool) -> Option<(BufferId, u64)> {
        let d = self.descs.get(id as usize)?;
        if !d.has_tag(tag) {
            return None;
        }
        let mut s = d.load();
        let pinned = loop {
            if s & TAG_VALID == 0 || refcount(s) == REFCOUNT_MASK {
                return None;
            }
            if s & LOCKED != 0 {
                s = d.wait_header_unlocked();
                continue;
            }
            let new = self.evictor.on_pin(s, ring);
            match d
                .state
                .compare_exchange_weak(s, new, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => break new,
                Err(actual) => s = actual,
            }
        };
        // Pinned with TAG_VALID: the tag cannot change now; is it ours?
        if !d.has_tag(tag) {
            d.unpin();
            return None;
        }
        Some((id, pinned))
    }

    fn too_many_pins(tag: BufferTag) -> Error {
        Error::TooManyPins {
            tag,
            pins: REFCOUNT_MASK,
        }
    }

    /// `ReadBuffer`: the hit path inline, the rest out of line.
    #[inline]
    fn read_buffer(
        &self,
        local: &mut Local,
        tag: BufferTag,
        ring: Option<&mut Ring>,
        mode: ReadMode,
    ) -> Result<BufferId> {
        let ht = HashedTag::new(tag);
        let use_ring = ring.is_some();
        // 1. Lookup: the read index without a lock, validated after pinning
        // (table rule 1). A ring of another pool is refused by the slow path
        // before anything is pinned.
        if ring.as_deref().is_none_or(|r| r.pool_id() == self.id)
            && let Some((id, state)) = self
                .table
                .find_unlocked(&ht, |id| self.pin_if_tagged(id, tag, use_ring))
        {
            let c = &local.stats.parts[self.desc(id).partition()];
            bump(&c.accesses, 1);
            if state & VALID != 0 {
                bump(&c.hits, 1);
                return Ok(id);
            }
            return self.hit_not_valid(local, id, tag, mode);
        }
        self.read_buffer_locked(local, ht, ring, mode)
    }

    /// A hit on a page that is not valid: being read by someone else, or
    /// their read failed. Wait, or retry the read. The access is counted.
    #[cold]
    fn hit_not_valid(
        &self,
        local: &mut Local,
        id: BufferId,
        tag: BufferTag,
        mode: ReadMode,
    ) -> Result<BufferId> {
        match self.finish_read(local, id, tag, mode) {
            Ok(read_by_us) => {
                if !read_by_us {
                    bump(&local.stats.parts[self.desc(id).partition()].hits, 1);
                }
                Ok(id)
            }
            Err(e) => {
                self.invalidate_victim(id);
                self.desc(id).unpin();
                Err(e)
            }
        }
    }

    /// The lookup under the mapping lock, then the miss (steps 1-6).
    #[inline(never)]
    fn read_buffer_locked(
        &self,
        local: &mut Local,
        ht: HashedTag,
        ring: Option<&mut Ring>,
        mode: ReadMode,
    ) -> Result<BufferId> {
        if let Some(r) = ring.as_deref()
            && r.pool_id() != self.id
        {
            return Err(Error::InvalidConfig(
                "a ring was used with a pool it does not belong to".into(),
            ));
        }
        let tag = ht.tag;
        let use_ring = ring.is_some();
        // 1. The index had nothing (or only stale candidates): the map.
        let hit = {
            let map = self.table.read(ht.partition());
            map.get(&ht).map(|&id| (id, self.pin(id, use_ring)))
        };
        if let Some((id, state)) = hit {
            let state = state.ok_or_else(|| Self::too_many_pins(tag))?;
            let part = self.desc(id).partition();
            bump(&local.stats.parts[part].accesses, 1);
            if state & VALID != 0 {
                bump(&local.stats.parts[part].hits, 1);
                return Ok(id);
            }
            return self.hit_not_valid(local, id, tag, mode);
        }

        // 2-4. A clean, tagless victim, pinned by us.
        let victim = self.get_victim(local, ring)?;

        // 5. Insert the new identity.
        let mut map = self.table.write(ht.partition());
        if let Some(&existing) = map.get(&ht) {
            // Somebody else read it meanwhile: give our victim back, use theirs.
            self.desc(victim).unpin();
            let state = self
                .pin(existing, use_ring)
                .ok_or_else(|| Self::too_many_pins(tag))?;
            drop(map);
            let part = self.desc(existing).partition();
            bump(&local.stats.parts[part].accesses, 1);
            let read_by_us = if state & VALID == 0 {
                match self.finish_read(local, existing, tag, mode) {
                    Ok(read_by_us) => read_by_us,
                    Err(e) => {
                        self.desc(existing).unpin();
                        return Err(e);
                    }
                }
            } else {
                false
            };
            if !read_by_us {
                bump(&local.stats.parts[part].hits, 1);
            }
            return Ok(existing);
        }
        map.insert(ht, victim);
        // 6. Tag it, with the read already marked in progress.
        let d = self.desc(victim);
        let s = d.lock_header();
        // Ours alone: the optimistic pin of a hit (`pin_if_tagged`) pins only
        // TAG_VALID states, and this victim has been tagless since step 4.
        debug_assert_eq!(refcount(s), 1);
        debug_assert_eq!(s & (TAG_VALID | VALID | DIRTY | IO_IN_PROGRESS), 0);
        d.set_tag(Some(tag));
        let perm = if self.is_permanent(tag.rel) {
            PERMANENT
        } else {
            0
        };
        d.unlock_header(
            TAG_VALID | IO_IN_PROGRESS | perm | self.evictor.admit_bits(),
            USAGE_MASK | FLAG_MASK & !(TAG_VALID | IO_IN_PROGRESS | PERMANENT),
        );
        drop(map);
        let c = &local.stats.parts[self.desc(victim).partition()];
        bump(&c.accesses, 1);
        if let Err(e) = self.do_read(local, victim, tag, mode) {
            // Leave no tag-valid, never-valid entry behind (it would stand in
            // the way of extending the relation to this block). If others
            // are waiting on it they retry the read themselves.
            self.invalidate_victim(victim);
            d.unpin();
            return Err(e);
        }
        Ok(victim)
    }

    /// Wait for another thread's read of `id`, or do it ourselves if there is
    /// none and the page is not valid. Returns whether we read it.
    fn finish_read(
        &self,
        local: &mut Local,
        id: BufferId,
        tag: BufferTag,
        mode: ReadMode,
    ) -> Result<bool> {
        match self.start_io(id, true) {
            StartIo::AlreadyDone => Ok(false),
            StartIo::Ready => self.do_read(local, id, tag, mode).map(|()| true),
        }
    }

    /// Read the page into buffer `id`; we hold `IO_IN_PROGRESS` on it.
    fn do_read(
        &self,
        local: &mut Local,
        id: BufferId,
        tag: BufferTag,
        mode: ReadMode,
    ) -> Result<()> {
        // SAFETY: arena rule 2: IO_IN_PROGRESS is ours and the page is not
        // VALID, so nobody else reads or writes these bytes until we finish.
        let page = unsafe { self.arena.page_mut(id) };
        if mode == ReadMode::ZeroNoRead {
            page.fill(0);
            // Counted as a read: the buffer was filled, not found.
            bump(&local.stats.parts[self.desc(id).partition()].reads, 1);
            self.terminate_io(id, VALID, IO_ERROR);
            return Ok(());
        }
        let result = self.storage.read(tag, page).and_then(|()| {
            if self.config.checksums
                && let Err((stored, computed)) = page::verify(page, tag.block)
            {
                self.counters
                    .checksum_failures
                    .fetch_add(1, Ordering::Relaxed);
                if mode == ReadMode::NoVerify {
                    return Ok(());
                }
                return Err(Error::ChecksumMismatch {
                    tag,
                    path: self.storage.path(tag.relfork()),
                    stored,
                    computed,
                });
            }
            Ok(())
        });
        bump(&local.stats.parts[self.desc(id).partition()].reads, 1);
        match result {
            Ok(()) => {
                self.terminate_io(id, VALID, IO_ERROR);
                Ok(())
            }
            Err(e) => {
                self.terminate_io(id, IO_ERROR, 0);
                Err(e)
            }
        }
    }

    /// `StartBufferIO`: wait for any I/O in flight on `id`; then claim it
    /// unless it is no longer needed (page valid for input, clean for output).
    fn start_io(&self, id: BufferId, for_input: bool) -> StartIo {
        let d = self.desc(id);
        loop {
            let s = d.lock_header();
            if s & IO_IN_PROGRESS == 0 {
                let done = if for_input {
                    s & VALID != 0
                } else {
                    s & DIRTY == 0
                };
                if done {
                    d.unlock_header(0, 0);
                    return StartIo::AlreadyDone;
                }
                d.unlock_header(IO_IN_PROGRESS, 0);
                return StartIo::Ready;
            }
            d.unlock_header(0, 0);
            d.wait_io();
        }
    }

    /// `TerminateBufferIO`: clear `IO_IN_PROGRESS` (with `set`/`unset`) and
    /// wake waiters.
    pub(crate) fn terminate_io(&self, id: BufferId, set: u64, unset: u64) {
        let d = self.desc(id);
        d.lock_header();
        d.unlock_header_end_io(set, unset);
    }

    /// `GetVictimBuffer`: a buffer pinned by us alone, clean, with no tag.
    fn get_victim(&self, local: &mut Local, mut ring: Option<&mut Ring>) -> Result<BufferId> {
        loop {
            let from_ring = match ring.as_deref_mut() {
                Some(r) => self.ring_next(r),
                None => None,
            };
            let (id, from_ring) = match from_ring {
                Some(id) => (id, true),
                None => {
                    let id = self.clock_sweep(local)?;
                    if let Some(r) = ring.as_deref_mut() {
                        r.set_current(id);
                    }
                    (id, false)
                }
            };
            let d = self.desc(id);
            let part = self.desc(id).partition();
            let s = d.load();
            if s & DIRTY != 0 {
                let Some(mark) = d.content.try_lock_upgradable() else {
                    d.unpin();
                    continue;
                };
                let needs_wal = s & PERMANENT != 0 && self.wal.needs_flush(self.arena.lsn(id));
                if from_ring
                    && let Some(r) = ring.as_deref_mut()
                    && r.reject(id, needs_wal)
                {
                    // SAFETY: we took the upgradable lock just above.
                    unsafe { d.content.unlock_upgradable(mark) };
                    d.unpin();
                    bump(&local.stats.parts[part].ring_rejects, 1);
                    continue;
                }
                let writer = if from_ring {
                    Writer::Ring
                } else {
                    Writer::Backend
                };
                let r = self.flush_buffer(id, writer, Some(local));
                // SAFETY: as above.
                unsafe { d.content.unlock_upgradable(mark) };
                if let Err(e) = r {
                    d.unpin();
                    return Err(e);
                }
            }
            if s & TAG_VALID != 0 && !self.invalidate_victim(id) {
                d.unpin();
                continue;
            }
            let c = &local.stats.parts[part];
            if from_ring {
                bump(&c.ring_reuses, 1);
            }
            if s & VALID != 0 {
                bump(&c.evictions, 1);
            }
            return Ok(id);
        }
    }

    /// `GetBufferFromRing`: the current slot's buffer pinned, if reusable.
    fn ring_next(&self, ring: &mut Ring) -> Option<BufferId> {
        let id = ring.advance()?;
        let d = self.desc(id);
        let mut s = d.load();
        loop {
            if !self.evictor.ring_reusable(s) {
                return None;
            }
            if s & LOCKED != 0 {
                s = d.wait_header_unlocked();
                continue;
            }
            match d.state.compare_exchange_weak(
                s,
                s + REFCOUNT_ONE,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(id),
                Err(a) => s = a,
            }
        }
    }

    /// The clock sweep (`StrategyGetBuffer`): tick the hand of the chosen
    /// partition until the evictor names a victim; after a partition's worth
    /// of consecutive pinned buffers move to the next partition; fail only
    /// when every partition has been tried (rule 8).
    fn clock_sweep(&self, local: &mut Local) -> Result<BufferId> {
        if self.bgwriter_sleeping.load(Ordering::Relaxed) {
            crate::bgwriter::wake(self);
        }
        let nparts = self.parts.len();
        let first = self.parts.choose(local.home, &mut local.budget);
        let batch = self.batch_size();
        let mut ticks = 0u64;
        for k in 0..nparts {
            let p = (first + k) % nparts;
            let hand = &self.hands[p];
            let cursor = &mut local.cursors[p];
            let mut try_counter = hand.len();
            let mut part_ticks = 0u64;
            'tick: loop {
                let id = hand.buffer_at(cursor.next_tick(hand, batch));
                part_ticks += 1;
                let d = self.desc(id);
                let mut s = d.load();
                loop {
                    if s & LOCKED != 0 {
                        s = d.wait_header_unlocked();
                        continue;
                    }
                    match self.evictor.on_tick(s) {
                        Tick::Pinned => {
                            try_counter -= 1;
                            if try_counter == 0 {
                                break 'tick;
                            }
                            continue 'tick;
                        }
                        Tick::Cool(new) => {
                            match d.state.compare_exchange_weak(
                                s,
                                new,
                                Ordering::Relaxed,
                                Ordering::Relaxed,
                            ) {
                                Ok(_) => {
                                    try_counter = hand.len();
                                    continue 'tick;
                                }
                                Err(a) => s = a,
                            }
                        }
                        Tick::Victim => {
                            match d.state.compare_exchange_weak(
                                s,
                                s + REFCOUNT_ONE,
                                Ordering::Acquire,
                                Ordering::Relaxed,
                            ) {
                                Ok(_) => {
                                    hand.count_alloc();
                                    ticks += part_ticks;
                                    let c = &local.stats.parts[p];
                                    bump(&c.sweep_ticks, part_ticks);
                                    bump(&c.victims, 1);
                                    local.stats.record_victim(ticks);
                                    return Ok(id);
                                }
                                Err(a) => s = a,
                            }
                        }
                    }
                }
            }
            ticks += part_ticks;
            bump(&local.stats.parts[p].sweep_ticks, part_ticks);
        }
        Err(Error::NoUnpinnedBuffers {
            pool_size: self.descs.len(),
        })
    }

    /// `InvalidateVictimBuffer`: forget the identity of a buffer we alone have
    /// pinned. False if someone else pinned or dirtied it meanwhile.
    fn invalidate_victim(&self, id: BufferId) -> bool {
        let d = self.desc(id);
        let Some(tag) = d.tag() else {
            return true;
        };
        let ht = HashedTag::new(tag);
        let mut map = self.table.write(ht.partition());
        let s = d.lock_header();
        if refcount(s) != 1 || s & DIRTY != 0 {
            d.unlock_header(0, 0);
            return false;
        }
        d.set_tag(None);
        d.unlock_header(0, FLAG_MASK | USAGE_MASK);
        map.remove(&ht);
        true
    }

    /// `FlushBuffer`: write a dirty page. The caller holds a pin and the
    /// content lock share-exclusive or exclusive.
    pub(crate) fn flush_buffer(
        &self,
        id: BufferId,
        writer: Writer,
        local: Option<&mut Local>,
    ) -> Result<()> {
        let d = self.desc(id);
        debug_assert!(d.content_locked());
        self.check_writes_allowed()?;
        if let StartIo::AlreadyDone = self.start_io(id, false) {
            return Ok(());
        }
        let tag = d.tag().expect("a dirty buffer has a tag");
        let s = d.load();
        if s & PERMANENT != 0 {
            let lsn = self.arena.lsn(id);
            if self.wal.needs_flush(lsn)
                && let Err(e) = self.wal.flush(lsn)
            {
                self.terminate_io(id, IO_ERROR, 0);
                return Err(Error::WalFlush {
                    lsn,
                    tag,
                    detail: e.to_string(),
                });
            }
        }
        if self.config.checksums {
            // SAFETY: arena rule 1: we hold a pin and share-exclusive; with
            // IO_IN_PROGRESS set no hint can change the page while we sum it.
            let sum = page::checksum(unsafe { self.arena.page(id) }, tag.block);
            self.arena.set_checksum(id, sum);
        }
        // SAFETY: as above.
        let result = self.storage.write(tag, unsafe { self.arena.page(id) });
        if let Err(e) = result {
            let msg = e.to_string();
            *self.write_failure.lock() = Some(msg);
            self.write_failed.store(true, Ordering::Release);
            self.terminate_io(id, IO_ERROR, 0);
            return Err(e);
        }
        self.pending_sync.lock().insert(tag.relfork());
        self.terminate_io(id, 0, DIRTY | HINT_DIRTY | CHECKPOINT_NEEDED | IO_ERROR);
        let part = self.desc(id).partition();
        match (writer, local) {
            (Writer::Backend, Some(l)) => bump(&l.stats.parts[part].writes_backend, 1),
            (Writer::Ring, Some(l)) => bump(&l.stats.parts[part].writes_ring, 1),
            (Writer::Background, _) => {
                self.counters
                    .writes_bgwriter
                    .fetch_add(1, Ordering::Relaxed);
            }
            (Writer::Checkpoint, _) => {
                self.counters
                    .writes_checkpoint
                    .fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                self.counters.writes_other.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// After a failed write the pool refuses to write again.
    fn check_writes_allowed(&self) -> Result<()> {
        if self.write_failed.load(Ordering::Acquire) {
            let msg = self.write_failure.lock().clone().unwrap_or_default();
            return Err(Error::WritesRefused(msg));
        }
        Ok(())
    }

    /// `SyncOneBuffer`: write buffer `id` if it is valid and dirty (and, with
    /// `skip_recently_used`, only if it is unpinned at the bottom usage step).
    /// With `only`, a buffer that holds a page of another relation fork by
    /// the time its header is locked is left alone.
    pub(crate) fn sync_one_buffer(
        &self,
        id: BufferId,
        skip_recently_used: bool,
        only: Option<RelFork>,
        writer: Writer,
    ) -> Result<SyncResult> {
        let d = self.desc(id);
        let s = d.lock_header();
        let reusable = refcount(s) == 0 && s & USAGE_MASK == 0;
        let other_rel = only.is_some_and(|rf| d.tag().map(|t| t.relfork()) != Some(rf));
        if (skip_recently_used && !reusable) || other_rel || s & (VALID | DIRTY) != VALID | DIRTY {
            d.unlock_header(0, 0);
            return Ok(SyncResult {
                written: false,
                reusable,
            });
        }
        if refcount(s) == REFCOUNT_MASK {
            let tag = d.tag().expect("a valid buffer has a tag");
            d.unlock_header(0, 0);
            return Err(Self::too_many_pins(tag));
        }
        // PinBuffer_Locked: pin while releasing the header lock (no usage change).
        d.unlock_header_pinned();
        let mark = d.content.lock_upgradable();
        let r = self.flush_buffer(id, writer, None);
        // SAFETY: taken just above.
        unsafe { d.content.unlock_upgradable(mark) };
        d.unpin();
        r.map(|()| SyncResult {
            written: true,
            reusable,
        })
    }

    /// `BufferSync` for a checkpoint.
    fn flush_all(&self, include_unlogged: bool) -> Result<usize> {
        let mask = if include_unlogged {
            DIRTY
        } else {
            DIRTY | PERMANENT
        };
        let mut todo = Vec::new();
        for (id, d) in self.descs.iter().enumerate() {
            let s = d.lock_header();
            if s & mask == mask {
                let tag = d.tag();
                d.unlock_header(CHECKPOINT_NEEDED, 0);
                if let Some(tag) = tag {
                    todo.push((tag, id as BufferId));
                }
            } else {
                d.unlock_header(0, 0);
            }
        }
        todo.sort_unstable();
        let mut written = 0;
        for (_, id) in todo {
            if self.desc(id).load() & CHECKPOINT_NEEDED != 0 {
                written += usize::from(
                    self.sync_one_buffer(id, false, None, Writer::Checkpoint)?
                        .written,
                );
            }
        }
        self.sync_pending(None)?;
        Ok(written)
    }

    /// fsync the forks written since the last sync (all, or just `only`).
    fn sync_pending(&self, only: Option<RelFork>) -> Result<()> {
        let forks: Vec<RelFork> = {
            let mut p = self.pending_sync.lock();
            match only {
                Some(rf) => p.take(&rf).into_iter().collect(),
                None => p.drain().collect(),
            }
        };
        for (i, rf) in forks.iter().enumerate() {
            if let Err(e) = self.storage.sync(*rf) {
                // A relation dropped since it was written has nothing to sync.
                if !self.storage.exists(*rf).unwrap_or(true) {
                    continue;
                }
                // Keep the rest pending: a later checkpoint must retry them.
                self.pending_sync.lock().extend(forks[i..].iter().copied());
                return Err(e);
            }
        }
        Ok(())
    }

    /// The extension lock of a relation fork.
    fn ext_lock(&self, rf: RelFork) -> Arc<Mutex<()>> {
        self.ext_locks.lock().entry(rf).or_default().clone()
    }

    fn extend(
        &self,
        local: &mut Local,
        rf: RelFork,
        ring: Option<&mut Ring>,
    ) -> Result<(BufferId, ExclusiveMark)> {
        self.check_writes_allowed()?;
        let ext = self.ext_lock(rf);
        let _g = ext.lock();
        let block = self.storage.nblocks(rf)?;
        let tag = BufferTag::new(rf, block);
        let victim = self.get_victim(local, ring)?;
        let d = self.desc(victim);
        // We are the only pinner and the buffer has no tag: the lock is free.
        let mark = d.content.lock_exclusive();
        // SAFETY: arena rule 2: exclusive content lock, buffer invisible to others.
        unsafe { self.arena.page_mut(victim) }.fill(0);
        // Reserve the block on disk first: a failure leaves nothing behind.
        // SAFETY: as above.
        if let Err(e) = self.storage.write(tag, unsafe { self.arena.page(victim) }) {
            // SAFETY: we hold it exclusively.
            unsafe { d.content.unlock_exclusive(mark) };
            d.unpin();
            return Err(e);
        }
        self.pending_sync.lock().insert(rf);
        let ht = HashedTag::new(tag);
        let mut map = self.table.write(ht.partition());
        if let Some(&stale) = map.get(&ht)
            && self.forget_if_never_valid(stale, &ht)
        {
            map.remove(&ht);
        }
        if map.contains_key(&ht) {
            drop(map);
            // SAFETY: we hold it exclusively.
            unsafe { d.content.unlock_exclusive(mark) };
            d.unpin();
            return Err(Error::CorruptFile {
                relfork: rf,
                path: self.storage.path(rf),
                detail: format!(
                    "a page beyond the end of the file (block {block}) is already in the buffer pool"
                ),
            });
        }
        map.insert(ht, victim);
        d.lock_header();
        d.set_tag(Some(tag));
        let perm = if self.is_permanent(rf.rel) {
            PERMANENT
        } else {
            0
        };
        d.unlock_header(
            TAG_VALID | VALID | perm | self.evictor.admit_bits(),
            USAGE_MASK | FLAG_MASK & !(TAG_VALID | VALID | PERMANENT),
        );
        drop(map);
        Ok((victim, mark))
    }

    /// Clear the identity of `id` if it holds `ht` but never became valid and
    /// nobody pins it (a failed read left it). The caller holds `ht`'s mapping
    /// partition lock exclusive and removes the entry if this returns true.
    fn forget_if_never_valid(&self, id: BufferId, ht: &HashedTag) -> bool {
        let d = self.desc(id);
        let s = d.lock_header();
        if d.tag() != Some(ht.tag) || s & VALID != 0 || refcount(s) != 0 {
            d.unlock_header(0, 0);
            return false;
        }
        d.set_tag(None);
        d.unlock_header(0, FLAG_MASK | USAGE_MASK);
        true
    }

    /// Forget every buffer whose tag satisfies `pred` (`InvalidateBuffer`),
    /// discarding dirty contents.
    fn invalidate_where(&self, pred: impl Fn(&BufferTag) -> bool) -> Result<()> {
        for id in 0..self.descs.len() as BufferId {
            let d = self.desc(id);
            let started = Instant::now();
            loop {
                let s = d.lock_header();
                let Some(tag) = d.tag().filter(|t| s & TAG_VALID != 0 && pred(t)) else {
                    d.unlock_header(0, 0);
                    break;
                };
                d.unlock_header(0, 0);
                let ht = HashedTag::new(tag);
                let mut map = self.table.write(ht.partition());
                let s = d.lock_header();
                if d.tag() != Some(tag) {
                    d.unlock_header(0, 0);
                    break;
                }
                if refcount(s) != 0 {
                    d.unlock_header(0, 0);
                    drop(map);
                    if started.elapsed() > DROP_PIN_WAIT {
                        return Err(Error::InvalidConfig(format!(
                            "{tag} is still pinned after {DROP_PIN_WAIT:?}; cannot forget it"
                        )));
                    }
                    if s & IO_IN_PROGRESS != 0 {
                        d.wait_io();
                    } else {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    continue;
                }
                d.set_tag(None);
                d.unlock_header(0, FLAG_MASK | USAGE_MASK);
                map.remove(&ht);
                break;
            }
        }
        Ok(())
    }

    /// `EvictUnpinnedBuffer`.
    /// With `only`, a buffer holding another relation fork's page is left alone.
    fn evict_one(&self, id: BufferId, only: Option<RelFork>) -> Result<(bool, bool)> {
        let d = self.desc(id);
        let s = d.lock_header();
        let other_rel = only.is_some_and(|rf| d.tag().map(|t| t.relfork()) != Some(rf));
        if s & VALID == 0 || refcount(s) != 0 || other_rel {
            d.unlock_header(0, 0);
            return Ok((false, false));
        }
        d.unlock_header_pinned();
        let mut flushed = false;
        if d.load() & DIRTY != 0 {
            let mark = d.content.lock_upgradable();
            let r = self.flush_buffer(id, Writer::Other, None);
            // SAFETY: taken just above.
            unsafe { d.content.unlock_upgradable(mark) };
            if let Err(e) = r {
                d.unpin();
                return Err(e);
            }
            flushed = true;
        }
        let evicted = self.invalidate_victim(id);
        d.unpin();
        Ok((evicted, flushed))
    }

    /// Fold an exiting thread's counters into the retired block.
    pub(crate) fn retire_thread(&self, stats: &Arc<ThreadStats>) {
        let mut threads = self.thread_stats.lock();
        threads.retain(|t| !Arc::ptr_eq(t, stats));
        stats.merge_into(&self.retired_stats);
    }

    /// Register a thread's stats block.
    pub(crate) fn register_thread(self: &Arc<Self>) -> (usize, Arc<ThreadStats>) {
        let ordinal = self.registered_threads.fetch_add(1, Ordering::Relaxed);
        self.active_threads.fetch_add(1, Ordering::Relaxed);
        let stats = Arc::new(ThreadStats::new(self.parts.len()));
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
}
