//! Counters, the ticks-per-victim histogram, and the buffercache snapshot.
//!
//! Counters a hit or a sweep bumps live per thread and per partition
//! (`ThreadStats`): each thread writes only its own cache lines, with a
//! plain load and store, so counting costs no locked instruction and no
//! cache-line bouncing on the hot path (rule 9). A snapshot sums every
//! thread's counters with relaxed loads; it is consistent per counter, not
//! across counters, like PostgreSQL's pg_stat views.
//!
//! The buffercache snapshot ([`BufferRow`]) is pg_buffercache: one row per
//! buffer, each read under that buffer's header lock, no global snapshot.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::arena::HugePageStatus;
use crate::desc::BufferId;
use crate::replacement::evictor::Evictor;
use crate::tag::{BufferTag, RelId};

/// Buckets of the ticks-per-victim histogram: exact for 1..64 ticks, then one
/// bucket per power of two.
pub const TICK_BUCKETS: usize = 128;
const LINEAR_BUCKETS: u64 = 64;

/// Bucket of a tick count.
#[inline]
pub fn tick_bucket(ticks: u64) -> usize {
    if ticks < LINEAR_BUCKETS {
        ticks as usize
    } else {
        // 64..127 -> 64, 128..255 -> 65, ...
        (LINEAR_BUCKETS + (63 - ticks.leading_zeros() as u64) - 6) as usize
    }
    .min(TICK_BUCKETS - 1)
}

/// Smallest tick count in a bucket.
pub fn bucket_floor(bucket: usize) -> u64 {
    if (bucket as u64) < LINEAR_BUCKETS {
        bucket as u64
    } else {
        1u64 << (bucket as u64 - LINEAR_BUCKETS + 6)
    }
}

/// Add to a counter that only the calling thread writes.
#[inline]
pub(crate) fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// One thread's counters for one partition, on cache lines of their own so
/// that two threads' blocks never share one.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Counters {
    pub accesses: AtomicU64,
    pub hits: AtomicU64,
    pub reads: AtomicU64,
    pub victims: AtomicU64,
    pub evictions: AtomicU64,
    pub sweep_ticks: AtomicU64,
    pub ring_reuses: AtomicU64,
    pub ring_rejects: AtomicU64,
    pub writes_backend: AtomicU64,
    pub writes_ring: AtomicU64,
    pub combined_reads: AtomicU64,
    pub combined_read_blocks: AtomicU64,
    pub optimistic_hits: AtomicU64,
}

/// Relations one thread's block tracks by name; accesses to further
/// relations count in the block's overflow slot
/// ([`PoolStats::relations_untracked`]).
pub const RELATION_SLOTS: usize = 128;
const RELATION_SLOT_BITS: u32 = RELATION_SLOTS.trailing_zeros();
/// Key of the overflow slot (a slot key is the relation number plus one,
/// 0 when free; relation numbers are `u32`, so this is none of them).
const OVERFLOW_KEY: u64 = u64::MAX;

/// One thread's counters for one relation (all its forks).
#[derive(Debug, Default)]
pub(crate) struct RelCounters {
    /// The relation number plus one; 0 while the slot is free. Set once,
    /// by compare-and-swap, and never changed after.
    key: AtomicU64,
    pub accesses: AtomicU64,
    pub hits: AtomicU64,
    pub evictions: AtomicU64,
}

/// Relations dropped from a pool (`BufferPool::drop_relation`), so that a
/// thread whose counter table is full can give their slots back.
#[derive(Debug, Default)]
pub(crate) struct DroppedRelations {
    /// Relation numbers plus one (slot keys).
    keys: RwLock<HashSet<u64>>,
    /// Bumped on every drop: a full table rescans only after a new one.
    epoch: AtomicU64,
}

impl DroppedRelations {
    pub fn note(&self, rel: RelId) {
        self.keys.write().insert(u64::from(rel.0) + 1);
        self.epoch.fetch_add(1, Ordering::Release);
    }
}

/// A thread's per-relation counters: a fixed open-addressed table keyed by
/// relation number (linear probing), [`RELATION_SLOTS`] slots and one
/// overflow slot. Fixed, so a snapshot reads it while its thread writes,
/// with no lock; the owner finds its slot with a multiply, a shift and a
/// compare on the hit path.
///
/// A slot, once claimed, is its relation's for the thread's life, except
/// that when the table is full and relations were dropped since the last
/// look, the owner moves the dropped relations' counts into `reclaimed`
/// (still theirs, by relation) and frees their slots: a long-lived thread
/// that creates and drops many relations keeps counting new ones by name.
#[derive(Debug)]
pub(crate) struct RelTable {
    slots: Box<[RelCounters]>,
    /// Set for a block only its owner writes (a registered thread's), where
    /// freeing a slot races with no other writer.
    dropped: Option<Arc<DroppedRelations>>,
    /// The `dropped` epoch of the last rescan.
    seen_epoch: AtomicU64,
    /// Counts moved out of freed slots; locked by the rescan and by
    /// snapshots, so a snapshot sees a count in its slot or here, once.
    reclaimed: Mutex<BTreeMap<RelId, RelationStats>>,
}

impl RelTable {
    fn new(dropped: Option<Arc<DroppedRelations>>) -> RelTable {
        let slots: Box<[RelCounters]> = (0..=RELATION_SLOTS)
            .map(|_| RelCounters::default())
            .collect();
        slots[RELATION_SLOTS]
            .key
            .store(OVERFLOW_KEY, Ordering::Relaxed);
        RelTable {
            slots,
            dropped,
            seen_epoch: AtomicU64::new(0),
            reclaimed: Mutex::new(BTreeMap::new()),
        }
    }

    /// Free the slots of dropped relations, moving their counts into
    /// `reclaimed`. Only the owner calls this (from `probe`), so no bump
    /// of a freed slot is in flight. Returns whether a slot was freed.
    #[cold]
    fn reclaim_dropped(&self) -> bool {
        let Some(dropped) = &self.dropped else {
            return false;
        };
        let epoch = dropped.epoch.load(Ordering::Acquire);
        if epoch == self.seen_epoch.load(Ordering::Relaxed) {
            return false;
        }
        self.seen_epoch.store(epoch, Ordering::Relaxed);
        let keys = dropped.keys.read();
        let mut reclaimed = self.reclaimed.lock();
        let mut freed = false;
        for s in &self.slots[..RELATION_SLOTS] {
            let k = s.key.load(Ordering::Relaxed);
            if k == 0 || !keys.contains(&k) {
                continue;
            }
            let out = reclaimed.entry(RelId((k - 1) as u32)).or_default();
            out.accesses += s.accesses.swap(0, Ordering::Relaxed);
            out.hits += s.hits.swap(0, Ordering::Relaxed);
            out.evictions += s.evictions.swap(0, Ordering::Relaxed);
            s.key.store(0, Ordering::Relaxed);
            freed = true;
        }
        freed
    }

    #[inline(always)]
    fn home(key: u64) -> usize {
        (((key as u32).wrapping_mul(0x9E37_79B1)) >> (32 - RELATION_SLOT_BITS)) as usize
    }

    /// The counters of `rel`: its home slot when it is there (the common
    /// case, inline), else the probe.
    #[inline(always)]
    pub fn get(&self, rel: RelId) -> &RelCounters {
        let key = u64::from(rel.0) + 1;
        let s = &self.slots[Self::home(key)];
        if s.key.load(Ordering::Relaxed) == key {
            return s;
        }
        self.probe(key)
    }

    /// Find or claim the slot of `key`. A claim is a compare-and-swap, so
    /// two threads sharing a block (the fallback block) never file one
    /// relation's counts under another's key.
    #[cold]
    #[inline(never)]
    fn probe(&self, key: u64) -> &RelCounters {
        let mut i = Self::home(key);
        for _ in 0..RELATION_SLOTS {
            let s = &self.slots[i];
            let k = s.key.load(Ordering::Relaxed);
            if k == key {
                return s;
            }
            if k == 0 {
                match s
                    .key
                    .compare_exchange(0, key, Ordering::Relaxed, Ordering::Relaxed)
                {
                    Ok(_) => return s,
                    Err(k) if k == key => return s,
                    Err(_) => {}
                }
            }
            i = (i + 1) % RELATION_SLOTS;
        }
        if self.reclaim_dropped() {
            return self.probe(key);
        }
        &self.slots[RELATION_SLOTS]
    }

    /// Add every used slot into `named` (by relation) or `untracked`.
    pub(crate) fn sum_into(
        &self,
        named: &mut BTreeMap<RelId, RelationStats>,
        untracked: &mut RelationStats,
    ) {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let reclaimed = self.reclaimed.lock();
        for (rel, r) in reclaimed.iter() {
            let out = named.entry(*rel).or_default();
            out.accesses += r.accesses;
            out.hits += r.hits;
            out.evictions += r.evictions;
        }
        for s in self.slots.iter() {
            let out = match s.key.load(Ordering::Relaxed) {
                0 => continue,
                OVERFLOW_KEY => &mut *untracked,
                k => named.entry(RelId((k - 1) as u32)).or_default(),
            };
            out.accesses += l(&s.accesses);
            out.hits += l(&s.hits);
            out.evictions += l(&s.evictions);
        }
    }
}

/// Per-relation counters of threads that have exited, by relation (no slot
/// limit: folding in is off the hot path, under the pool's registry lock),
/// and what those threads had counted as untracked.
#[derive(Debug, Default)]
pub(crate) struct RetiredRelations {
    pub named: BTreeMap<RelId, RelationStats>,
    pub untracked: RelationStats,
}

impl RetiredRelations {
    /// Fold in an exiting thread's table.
    pub fn absorb(&mut self, t: &ThreadStats) {
        t.rels.sum_into(&mut self.named, &mut self.untracked);
    }
}

/// Everything one thread counts, one cache-line-aligned block per thread.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct ThreadStats {
    pub parts: Box<[Counters]>,
    pub ticks: Box<[AtomicU64]>,
    pub ticks_sum: AtomicU64,
    pub ticks_max: AtomicU64,
    /// Accesses, hits and evictions per relation.
    pub rels: RelTable,
}

impl ThreadStats {
    /// A block; `dropped` for a block only its owner thread writes (see
    /// [`RelTable`]).
    pub fn new(partitions: usize, dropped: Option<Arc<DroppedRelations>>) -> ThreadStats {
        ThreadStats {
            parts: (0..partitions).map(|_| Counters::default()).collect(),
            ticks: (0..TICK_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            ticks_sum: AtomicU64::new(0),
            ticks_max: AtomicU64::new(0),
            rels: RelTable::new(dropped),
        }
    }

    /// Add every counter of `self` but the per-relation ones into `into`
    /// (atomically: `into` may be shared), for a thread that exits. Its
    /// per-relation counters go to [`RetiredRelations`], which has no slot
    /// limit: the relations of all exited threads together may be many more
    /// than one table's slots.
    pub fn merge_into(&self, into: &ThreadStats) {
        let add = |a: &AtomicU64, b: &AtomicU64| {
            b.fetch_add(a.load(Ordering::Relaxed), Ordering::Relaxed);
        };
        for (a, b) in self.parts.iter().zip(into.parts.iter()) {
            add(&a.accesses, &b.accesses);
            add(&a.hits, &b.hits);
            add(&a.reads, &b.reads);
            add(&a.victims, &b.victims);
            add(&a.evictions, &b.evictions);
            add(&a.sweep_ticks, &b.sweep_ticks);
            add(&a.ring_reuses, &b.ring_reuses);
            add(&a.ring_rejects, &b.ring_rejects);
            add(&a.writes_backend, &b.writes_backend);
            add(&a.writes_ring, &b.writes_ring);
            add(&a.combined_reads, &b.combined_reads);
            add(&a.combined_read_blocks, &b.combined_read_blocks);
            add(&a.optimistic_hits, &b.optimistic_hits);
        }
        for (a, b) in self.ticks.iter().zip(into.ticks.iter()) {
            add(a, b);
        }
        add(&self.ticks_sum, &into.ticks_sum);
        into.ticks_max
            .fetch_max(self.ticks_max.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    /// Record one victim found after `ticks` ticks.
    #[inline]
    pub fn record_victim(&self, ticks: u64) {
        bump(&self.ticks[tick_bucket(ticks)], 1);
        bump(&self.ticks_sum, ticks);
        if ticks > self.ticks_max.load(Ordering::Relaxed) {
            self.ticks_max.store(ticks, Ordering::Relaxed);
        }
    }
}

/// Counters of one partition (or of the whole pool, summed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionStats {
    /// Buffer lookups (hits + reads).
    pub accesses: u64,
    /// Lookups that found the page in the pool.
    pub hits: u64,
    /// Pages read from storage (or zero-filled for redo).
    pub reads: u64,
    /// Buffers taken by the clock sweep.
    pub victims: u64,
    /// Victims that held a valid page (an eviction, not a never-used buffer).
    pub evictions: u64,
    /// Ticks of the clock hand.
    pub sweep_ticks: u64,
    /// Ring slots reused without a sweep.
    pub ring_reuses: u64,
    /// Dirty ring buffers given up (bulk-read ring, WAL flush needed).
    pub ring_rejects: u64,
    /// Dirty pages written by a thread that needed a victim.
    pub writes_backend: u64,
    /// Dirty pages written by a thread recycling its own ring.
    pub writes_ring: u64,
    /// Read operations of more than one block (a read stream's run of
    /// adjacent misses, one `read_run` / one vectored read), counted in the
    /// partition of the run's first buffer. Their pages are in `reads` too.
    pub combined_reads: u64,
    /// Blocks those operations read: `combined_read_blocks /
    /// combined_reads` is the mean size of a combined read.
    pub combined_read_blocks: u64,
    /// Hits read optimistically, with no pin and no content lock
    /// (`BufferPool::read_optimistic`, rule 10); counted in `hits` and
    /// `accesses` too. Declined optimistic reads count nothing here: the
    /// pinned read that follows is the access.
    pub optimistic_hits: u64,
}

impl PartitionStats {
    fn add(&mut self, c: &Counters) {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        self.accesses += l(&c.accesses);
        self.hits += l(&c.hits);
        self.reads += l(&c.reads);
        self.victims += l(&c.victims);
        self.evictions += l(&c.evictions);
        self.sweep_ticks += l(&c.sweep_ticks);
        self.ring_reuses += l(&c.ring_reuses);
        self.ring_rejects += l(&c.ring_rejects);
        self.writes_backend += l(&c.writes_backend);
        self.writes_ring += l(&c.writes_ring);
        self.combined_reads += l(&c.combined_reads);
        self.combined_read_blocks += l(&c.combined_read_blocks);
        self.optimistic_hits += l(&c.optimistic_hits);
    }

    fn merge(&mut self, o: &PartitionStats) {
        self.accesses += o.accesses;
        self.hits += o.hits;
        self.reads += o.reads;
        self.victims += o.victims;
        self.evictions += o.evictions;
        self.sweep_ticks += o.sweep_ticks;
        self.ring_reuses += o.ring_reuses;
        self.ring_rejects += o.ring_rejects;
        self.writes_backend += o.writes_backend;
        self.writes_ring += o.writes_ring;
        self.combined_reads += o.combined_reads;
        self.combined_read_blocks += o.combined_read_blocks;
        self.optimistic_hits += o.optimistic_hits;
    }

    fn minus(&self, o: &PartitionStats) -> PartitionStats {
        PartitionStats {
            accesses: self.accesses.saturating_sub(o.accesses),
            hits: self.hits.saturating_sub(o.hits),
            reads: self.reads.saturating_sub(o.reads),
            victims: self.victims.saturating_sub(o.victims),
            evictions: self.evictions.saturating_sub(o.evictions),
            sweep_ticks: self.sweep_ticks.saturating_sub(o.sweep_ticks),
            ring_reuses: self.ring_reuses.saturating_sub(o.ring_reuses),
            ring_rejects: self.ring_rejects.saturating_sub(o.ring_rejects),
            writes_backend: self.writes_backend.saturating_sub(o.writes_backend),
            writes_ring: self.writes_ring.saturating_sub(o.writes_ring),
            combined_reads: self.combined_reads.saturating_sub(o.combined_reads),
            combined_read_blocks: self
                .combined_read_blocks
                .saturating_sub(o.combined_read_blocks),
            optimistic_hits: self.optimistic_hits.saturating_sub(o.optimistic_hits),
        }
    }

    /// hits / accesses (1.0 when there were no accesses).
    pub fn hit_ratio(&self) -> f64 {
        if self.accesses == 0 {
            1.0
        } else {
            self.hits as f64 / self.accesses as f64
        }
    }
}

/// Counters of one relation (all its forks), summed over threads: what
/// `pg_statio_all_tables` shows per table and index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RelationStats {
    /// Buffer lookups of the relation's pages (hits + misses), optimistic
    /// hits included.
    pub accesses: u64,
    /// Lookups that found the page in the pool.
    pub hits: u64,
    /// Valid pages of the relation evicted to make room for another page.
    pub evictions: u64,
}

impl RelationStats {
    /// Lookups that did not find the page valid in the pool
    /// (`accesses - hits`): read from storage by this lookup.
    pub fn misses(&self) -> u64 {
        self.accesses.saturating_sub(self.hits)
    }

    /// hits / accesses; `None` when there were no accesses (a relation
    /// never looked up has no hit ratio, not a perfect one).
    pub fn hit_ratio(&self) -> Option<f64> {
        (self.accesses > 0).then(|| self.hits as f64 / self.accesses as f64)
    }

    /// These counters minus earlier ones: the activity in between.
    pub fn minus(&self, o: &RelationStats) -> RelationStats {
        RelationStats {
            accesses: self.accesses.saturating_sub(o.accesses),
            hits: self.hits.saturating_sub(o.hits),
            evictions: self.evictions.saturating_sub(o.evictions),
        }
    }
}

/// Distribution of clock ticks per victim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TicksHistogram {
    /// Victims per bucket ([`tick_bucket`]).
    pub buckets: Vec<u64>,
    pub sum: u64,
    pub max: u64,
}

impl Default for TicksHistogram {
    fn default() -> Self {
        TicksHistogram {
            buckets: vec![0; TICK_BUCKETS],
            sum: 0,
            max: 0,
        }
    }
}

impl TicksHistogram {
    /// Number of victims recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Mean ticks per victim (0 when there were none).
    pub fn mean(&self) -> f64 {
        let n = self.count();
        if n == 0 {
            0.0
        } else {
            self.sum as f64 / n as f64
        }
    }

    /// The `p`-th percentile (0..=100), as the floor of its bucket (exact below 64).
    pub fn percentile(&self, p: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let want = ((p / 100.0) * n as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= want {
                return bucket_floor(b);
            }
        }
        self.max
    }

    fn minus(&self, o: &TicksHistogram) -> TicksHistogram {
        TicksHistogram {
            buckets: self
                .buckets
                .iter()
                .zip(&o.buckets)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
            sum: self.sum.saturating_sub(o.sum),
            // The maximum of a window cannot be derived from two totals; keep
            // the later one, an upper bound.
            max: self.max,
        }
    }
}

/// Pool-wide counters that are not per thread (bumped off the hot path).
#[derive(Debug, Default)]
pub(crate) struct PoolCounters {
    pub writes_bgwriter: AtomicU64,
    pub writes_checkpoint: AtomicU64,
    pub writes_other: AtomicU64,
    pub checksum_failures: AtomicU64,
    pub zeroed_damaged_pages: AtomicU64,
    pub hints_set: AtomicU64,
    pub hints_refused: AtomicU64,
    pub hint_fpis: AtomicU64,
    pub bgwriter_rounds: AtomicU64,
}

/// A snapshot of a pool's statistics. Subtract two with [`PoolStats::since`]
/// to measure a window.
#[derive(Clone, Debug)]
pub struct PoolStats {
    pub evictor: Evictor,
    pub buffers: usize,
    /// The sweep batch in force when the snapshot was taken.
    pub batch: u32,
    pub partitions: Vec<PartitionStats>,
    pub ticks_per_victim: TicksHistogram,
    /// Pages written by the background writer.
    pub writes_bgwriter: u64,
    /// Pages written by checkpoints (`flush_all`).
    pub writes_checkpoint: u64,
    /// Pages written by explicit flushes and evictions (`flush_relation`, `evict_*`).
    pub writes_other: u64,
    /// Pages read whose checksum did not match.
    pub checksum_failures: u64,
    /// Damaged pages (failed checksum, or all zeros) zeroed in memory
    /// because the pool runs with `zero_damaged_pages`.
    pub zeroed_damaged_pages: u64,
    /// Hint batches applied, and refused because the page was being written.
    pub hints_set: u64,
    pub hints_refused: u64,
    /// Full-page images logged for hint-only changes.
    pub hint_fpis: u64,
    pub bgwriter_rounds: u64,
    /// As last read (`BufferPool::huge_pages` reads it now): of a pool
    /// not pre-faulted, which grows into its memory, read again when the
    /// last reading is a second old (`arena::HUGE_PAGES_REFRESH_MS`); of a
    /// pre-faulted one, at open or at the last such call.
    pub huge_pages: HugePageStatus,
    /// Per relation: accesses, hits, evictions. Each thread tracks up to
    /// [`RELATION_SLOTS`] relations by name; the rest are summed in
    /// `relations_untracked`.
    pub relations: BTreeMap<RelId, RelationStats>,
    /// Counters of relations a thread had no slot left for.
    pub relations_untracked: RelationStats,
}

impl PoolStats {
    /// Counters summed over partitions.
    pub fn totals(&self) -> PartitionStats {
        let mut t = PartitionStats::default();
        for p in &self.partitions {
            t.merge(p);
        }
        t
    }

    /// The counters of `rel` (all zero if it was never accessed).
    pub fn relation(&self, rel: RelId) -> RelationStats {
        self.relations.get(&rel).cloned().unwrap_or_default()
    }

    /// This snapshot minus an earlier one: the activity in between.
    pub fn since(&self, earlier: &PoolStats) -> PoolStats {
        PoolStats {
            partitions: self
                .partitions
                .iter()
                .zip(&earlier.partitions)
                .map(|(a, b)| a.minus(b))
                .collect(),
            ticks_per_victim: self.ticks_per_victim.minus(&earlier.ticks_per_victim),
            writes_bgwriter: self.writes_bgwriter.saturating_sub(earlier.writes_bgwriter),
            writes_checkpoint: self
                .writes_checkpoint
                .saturating_sub(earlier.writes_checkpoint),
            writes_other: self.writes_other.saturating_sub(earlier.writes_other),
            checksum_failures: self
                .checksum_failures
                .saturating_sub(earlier.checksum_failures),
            zeroed_damaged_pages: self
                .zeroed_damaged_pages
                .saturating_sub(earlier.zeroed_damaged_pages),
            hints_set: self.hints_set.saturating_sub(earlier.hints_set),
            hints_refused: self.hints_refused.saturating_sub(earlier.hints_refused),
            hint_fpis: self.hint_fpis.saturating_sub(earlier.hint_fpis),
            bgwriter_rounds: self.bgwriter_rounds.saturating_sub(earlier.bgwriter_rounds),
            relations: self
                .relations
                .iter()
                .map(|(rel, r)| (*rel, r.minus(&earlier.relation(*rel))))
                .collect(),
            relations_untracked: self.relations_untracked.minus(&earlier.relations_untracked),
            ..self.clone()
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn collect<'a>(
        threads: impl Iterator<Item = &'a ThreadStats>,
        retired: &RetiredRelations,
        nparts: usize,
        pool: &PoolCounters,
        evictor: Evictor,
        buffers: usize,
        batch: u32,
        huge_pages: HugePageStatus,
    ) -> PoolStats {
        let mut partitions = vec![PartitionStats::default(); nparts];
        let mut ticks = TicksHistogram::default();
        let mut relations = retired.named.clone();
        let mut relations_untracked = retired.untracked.clone();
        for t in threads {
            t.rels.sum_into(&mut relations, &mut relations_untracked);
            for (p, c) in partitions.iter_mut().zip(t.parts.iter()) {
                p.add(c);
            }
            for (b, c) in ticks.buckets.iter_mut().zip(t.ticks.iter()) {
                *b += c.load(Ordering::Relaxed);
            }
            ticks.sum += t.ticks_sum.load(Ordering::Relaxed);
            ticks.max = ticks.max.max(t.ticks_max.load(Ordering::Relaxed));
        }
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PoolStats {
            evictor,
            buffers,
            batch,
            partitions,
            ticks_per_victim: ticks,
            writes_bgwriter: l(&pool.writes_bgwriter),
            writes_checkpoint: l(&pool.writes_checkpoint),
            writes_other: l(&pool.writes_other),
            checksum_failures: l(&pool.checksum_failures),
            zeroed_damaged_pages: l(&pool.zeroed_damaged_pages),
            hints_set: l(&pool.hints_set),
            hints_refused: l(&pool.hints_refused),
            hint_fpis: l(&pool.hint_fpis),
            bgwriter_rounds: l(&pool.bgwriter_rounds),
            huge_pages,
            relations,
            relations_untracked,
        }
    }
}

/// One buffer, as pg_buffercache shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferRow {
    pub id: BufferId,
    /// The page held, if the buffer holds a valid one.
    pub tag: Option<BufferTag>,
    pub dirty: bool,
    /// The clock's usage count, or 1 = HOT / 0 = COOL.
    pub usage: u8,
    /// Pins held right now.
    pub pins: u32,
    pub partition: usize,
    /// The NUMA node the page's memory is on, as the kernel reports it
    /// (`move_pages(2)`), `None` where it cannot say (pg_buffercache_numa),
    /// which includes memory not given yet: a buffer never used in a pool
    /// not pre-faulted (`PoolConfig::prefault`).
    pub numa_node: Option<usize>,
    /// Probation evictor: in the probation queue (else in the main region).
    pub probation: bool,
}

/// pg_buffercache_summary plus pg_buffercache_usage_counts.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferCacheSummary {
    pub used: usize,
    pub unused: usize,
    pub dirty: usize,
    pub pinned: usize,
    /// Mean usage level over used buffers (`None` if none are used).
    pub usage_avg: Option<f64>,
    /// Per usage level 0..=max: (buffers, dirty, pinned).
    pub usage_counts: Vec<(usize, usize, usize)>,
    /// Per NUMA node, ascending: (node, buffers, used buffers), from each
    /// row's queried node; buffers whose node is unknown are left out.
    pub per_node: Vec<(usize, usize, usize)>,
}

impl BufferCacheSummary {
    pub fn from_rows(rows: &[BufferRow], evictor: Evictor) -> BufferCacheSummary {
        let mut usage_counts = vec![(0, 0, 0); evictor.max_level() as usize + 1];
        let (mut used, mut dirty, mut pinned, mut usage_sum) = (0, 0, 0, 0u64);
        let mut per_node: std::collections::BTreeMap<usize, (usize, usize)> = Default::default();
        for r in rows {
            if let Some(n) = r.numa_node {
                let e = per_node.entry(n).or_default();
                e.0 += 1;
                e.1 += usize::from(r.tag.is_some());
            }
            if r.pins > 0 {
                pinned += 1;
            }
            if r.tag.is_none() {
                continue;
            }
            used += 1;
            usage_sum += r.usage as u64;
            let slot = &mut usage_counts[r.usage as usize];
            slot.0 += 1;
            if r.dirty {
                dirty += 1;
                slot.1 += 1;
            }
            if r.pins > 0 {
                slot.2 += 1;
            }
        }
        BufferCacheSummary {
            used,
            unused: rows.len() - used,
            dirty,
            pinned,
            usage_avg: (used > 0).then(|| usage_sum as f64 / used as f64),
            usage_counts,
            per_node: per_node.into_iter().map(|(n, (b, u))| (n, b, u)).collect(),
        }
    }
}

/// What an evict call did (pg_buffercache_evict_relation's columns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EvictCounts {
    pub evicted: usize,
    pub flushed: usize,
    /// Buffers of the relation that were pinned or re-dirtied and so stayed.
    pub skipped: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_exact_then_logarithmic() {
        for t in 0..64 {
            assert_eq!(tick_bucket(t), t as usize);
            assert_eq!(bucket_floor(t as usize), t);
        }
        assert_eq!(tick_bucket(64), 64);
        assert_eq!(tick_bucket(127), 64);
        assert_eq!(tick_bucket(128), 65);
        assert_eq!(bucket_floor(65), 128);
        assert_eq!(tick_bucket(u64::MAX), 121, "every u64 has a bucket");
    }

    #[test]
    fn histogram_mean_percentile_max() {
        let t = ThreadStats::new(1, None);
        for ticks in [1, 1, 1, 2, 2, 3, 10, 200] {
            t.record_victim(ticks);
        }
        let s = PoolStats::collect(
            [&t].into_iter(),
            &RetiredRelations::default(),
            1,
            &PoolCounters::default(),
            Evictor::Clock,
            8,
            1,
            HugePageStatus {
                requested: false,
                huge_bytes: None,
                pool_bytes: 0,
            },
        );
        let h = &s.ticks_per_victim;
        assert_eq!(h.count(), 8);
        assert_eq!(h.sum, 220);
        assert_eq!(h.max, 200);
        assert_eq!(h.percentile(50.0), 2);
        assert_eq!(h.percentile(99.0), 128);
        assert!((h.mean() - 27.5).abs() < 1e-9);
    }
}
