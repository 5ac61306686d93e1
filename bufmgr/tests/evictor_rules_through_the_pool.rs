//! Rule 7 observed from outside, through `pool.buffercache()` (`usage` is the
//! clock's count 0..=5, or 1 = HOT / 0 = COOL):
//!
//! - clock: a page loads with usage 1, each pin adds 1 up to 5, a tick takes 1
//!   away, usage 0 unpinned is the victim; a ring pin raises 0 -> 1 only;
//! - HOT/COOL: a page loads COOL, a second pin makes it HOT (with a reference
//!   bit: a tick clears the bit, the next demotes to COOL, the next evicts);
//!   a ring pin never makes a page HOT.
//!
//! - probation: a page loads COOL into the probation queue; once the pool is
//!   full the queue's head is taken while the queue holds a tenth of the
//!   pool: promoted to main if read again meanwhile (a ring read does not
//!   count; the pop clears the reference bit as a tick would), else evicted and remembered in the ghost set; a miss found in
//!   the ghost set loads into main; main follows the HOT/COOL rules.
//!
//! Single-threaded with one partition the pool is deterministic, so besides
//! the named cases a reference simulator of the three rule sets (and of the
//! ring's slot reuse) is run side by side with the pool on a random access
//! sequence, comparing every buffer's page, usage and region after every
//! access.

mod common;

use bufmgr::table::HashedTag;
use bufmgr::{BlockNumber, BufferPool, Evictor, RingKind, SweepBatch};
use common::{TestDb, is_resident, rel, row_of, small_config, tag, with_timeout};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const R: u32 = 3;

fn usage(pool: &BufferPool, block: BlockNumber) -> u8 {
    row_of(pool, tag(R, block))
        .unwrap_or_else(|| panic!("block {block} is not resident"))
        .usage
}

fn read(pool: &BufferPool, block: BlockNumber) {
    drop(pool.read_buffer(rel(R), block, None).unwrap());
}

fn ring_read(pool: &BufferPool, ring: &mut bufmgr::Ring, block: BlockNumber) {
    drop(pool.read_buffer(rel(R), block, Some(ring)).unwrap());
}

fn setup(evictor: Evictor, buffers: usize, blocks: BlockNumber) -> (TestDb, BufferPool) {
    let db = TestDb::new();
    db.create_rel(rel(R), blocks);
    let pool = db.pool(small_config(buffers).evictor(evictor));
    (db, pool)
}

#[test]
fn clock_usage_starts_at_one_and_climbs_to_five() {
    with_timeout(30, || {
        let (_db, pool) = setup(Evictor::Clock, 8, 8);
        read(&pool, 0);
        assert_eq!(usage(&pool, 0), 1, "a newly read page");
        for expect in [2, 3, 4, 5, 5, 5] {
            read(&pool, 0);
            assert_eq!(usage(&pool, 0), expect);
        }
        // Extension loads a page too.
        let g = pool.extend(rel(R), None).unwrap();
        let b = g.block();
        drop(g);
        assert_eq!(usage(&pool, b), 1, "a newly extended page");
        // An unpin changes nothing; a pin held is visible.
        let p = pool.read_buffer(rel(R), 0, None).unwrap();
        let row = row_of(&pool, tag(R, 0)).unwrap();
        assert_eq!((row.usage, row.pins), (5, 1));
        drop(p);
        assert_eq!(row_of(&pool, tag(R, 0)).unwrap().pins, 0);
    });
}

#[test]
fn clock_ring_pin_raises_zero_to_one_only() {
    with_timeout(30, || {
        let (_db, pool) = setup(Evictor::Clock, 8, 16);
        let mut ring = pool.ring(RingKind::BulkRead).unwrap();
        // Fill the pool (usage 1 each), then one more miss: the hand lowers
        // every page to 0 and takes the first buffer again.
        for b in 0..8 {
            read(&pool, b);
        }
        read(&pool, 8);
        assert!(!is_resident(&pool, tag(R, 0)));
        for b in 1..8 {
            assert_eq!(usage(&pool, b), 0, "block {b} after one pass of the hand");
        }
        assert_eq!(usage(&pool, 8), 1);

        ring_read(&pool, &mut ring, 1);
        assert_eq!(usage(&pool, 1), 1, "ring pin: 0 -> 1");
        ring_read(&pool, &mut ring, 1);
        assert_eq!(usage(&pool, 1), 1, "ring pin never goes past 1");
        read(&pool, 2);
        read(&pool, 2);
        read(&pool, 2);
        assert_eq!(usage(&pool, 2), 3);
        ring_read(&pool, &mut ring, 2);
        assert_eq!(usage(&pool, 2), 3, "ring pin neither raises nor lowers");
        // A fresh page read through the ring loads at 1.
        ring_read(&pool, &mut ring, 12);
        assert_eq!(usage(&pool, 12), 1);
        ring_read(&pool, &mut ring, 12);
        assert_eq!(usage(&pool, 12), 1);
    });
}

#[test]
fn hotcool_loads_cool_second_pin_makes_hot_ring_never_does() {
    with_timeout(30, || {
        let (_db, pool) = setup(Evictor::HotCool, 8, 16);
        let mut ring = pool.ring(RingKind::BulkRead).unwrap();
        read(&pool, 0);
        assert_eq!(usage(&pool, 0), 0, "first read: COOL");
        read(&pool, 0);
        assert_eq!(usage(&pool, 0), 1, "second read: HOT");
        read(&pool, 0);
        assert_eq!(usage(&pool, 0), 1);

        ring_read(&pool, &mut ring, 5);
        assert_eq!(usage(&pool, 5), 0, "fresh ring read: COOL");
        for _ in 0..3 {
            ring_read(&pool, &mut ring, 5);
        }
        assert_eq!(usage(&pool, 5), 0, "ring reads never make a page HOT");
        ring_read(&pool, &mut ring, 0);
        assert_eq!(usage(&pool, 0), 1, "a ring read leaves a HOT page HOT");
        read(&pool, 5);
        assert_eq!(usage(&pool, 5), 1, "an ordinary read after ring reads: HOT");

        let g = pool.extend(rel(R), None).unwrap();
        let b = g.block();
        drop(g);
        assert_eq!(usage(&pool, b), 0, "a newly extended page is COOL");
    });
}

/// Pool of 8 filled with blocks 0..8 (buffers 0..8 in order, the hand back at
/// buffer 0), block 0 read `reads` times in all; then new blocks are read one
/// at a time. Returns the number of new reads after which block 0 was gone.
fn new_reads_until_evicted(evictor: Evictor, reads: usize) -> usize {
    let (_db, pool) = setup(evictor, 8, 64);
    for b in 0..8 {
        read(&pool, b);
    }
    for _ in 1..reads {
        read(&pool, 0);
    }
    for n in 1..=56 {
        read(&pool, 7 + n as BlockNumber);
        if !is_resident(&pool, tag(R, 0)) {
            return n;
        }
    }
    panic!("{evictor}: block 0 never evicted")
}

#[test]
fn ticks_until_eviction_follow_the_rules() {
    with_timeout(30, || {
        // Clock, the others at usage 1. Read once: the first miss's pass
        // lowers everyone to 0 and takes buffer 0. Read twice: it survives
        // that pass at 1, is lowered to 0 when the hand wraps, and goes when
        // the hand comes back after the other seven buffers were reused.
        assert_eq!(new_reads_until_evicted(Evictor::Clock, 1), 1);
        assert_eq!(new_reads_until_evicted(Evictor::Clock, 2), 8);
        // HOT/COOL, the others COOL. Read once: COOL, the first tick takes it.
        // Read twice: HOT+REF; pass 1 clears REF, pass 2 demotes, pass 3
        // takes it; each pass reuses the seven COOL buffers.
        assert_eq!(new_reads_until_evicted(Evictor::HotCool, 1), 1);
        assert_eq!(new_reads_until_evicted(Evictor::HotCool, 2), 15);
        // More reads do not help HOT/COOL (one bit), but do help the clock.
        assert_eq!(new_reads_until_evicted(Evictor::HotCool, 5), 15);
        assert!(new_reads_until_evicted(Evictor::Clock, 5) > 8);
    });
}

/// A hot set read twice, then a one-pass scan of `scan` other pages (no
/// ring), in a pool of 32. Returns how many of the 8 hot pages are resident.
fn hot_pages_after_scan(evictor: Evictor, scan: BlockNumber, reref_every: Option<u32>) -> usize {
    let (_db, pool) = setup(evictor, 32, 8 + scan);
    for _ in 0..2 {
        for b in 0..8 {
            read(&pool, b);
        }
    }
    for (i, b) in (8..8 + scan).enumerate() {
        read(&pool, b);
        if let Some(k) = reref_every
            && i as u32 % k == k - 1
        {
            for h in 0..8 {
                read(&pool, h);
            }
        }
    }
    (0..8).filter(|&b| is_resident(&pool, tag(R, b))).count()
}

#[test]
fn scan_resistance_of_a_twice_read_hot_set() {
    with_timeout(30, || {
        // 24 buffers for the scan. HOT/COOL: a twice-read page survives three
        // passes of the hand (clear REF, demote, take), i.e. 72 scan pages;
        // the clock at usage 2 only two passes, 48 scan pages.
        assert_eq!(hot_pages_after_scan(Evictor::HotCool, 64, None), 8);
        assert_eq!(hot_pages_after_scan(Evictor::Clock, 64, None), 0);
        // A long scan wins against both if the hot set is not used again...
        assert_eq!(hot_pages_after_scan(Evictor::HotCool, 200, None), 0);
        assert_eq!(hot_pages_after_scan(Evictor::Clock, 200, None), 0);
        // ...but a hot set that stays in use survives a 200-page scan.
        assert_eq!(hot_pages_after_scan(Evictor::HotCool, 200, Some(16)), 8);
        assert_eq!(hot_pages_after_scan(Evictor::Clock, 200, Some(16)), 8);
        // Probation: the twice-read hot set is promoted when the queue's
        // head first reaches it, and then the scan churns only the queue:
        // all 8 stay, with no re-reads at all, however long the scan.
        assert_eq!(hot_pages_after_scan(Evictor::Probation, 64, None), 8);
        assert_eq!(hot_pages_after_scan(Evictor::Probation, 200, None), 8);
        assert_eq!(hot_pages_after_scan(Evictor::Probation, 2000, None), 8);
    });
}

fn queued(pool: &BufferPool, block: BlockNumber) -> bool {
    row_of(pool, tag(R, block))
        .unwrap_or_else(|| panic!("block {block} is not resident"))
        .probation
}

#[test]
fn probation_promotes_a_reread_page_and_admits_a_ghost_to_main() {
    with_timeout(30, || {
        // 32 buffers, one partition: a queue target of 3.
        let (_db, pool) = setup(Evictor::Probation, 32, 400);
        for b in 0..32 {
            read(&pool, b);
        }
        assert!(
            (0..32).all(|b| queued(&pool, b)),
            "new pages are on probation"
        );
        read(&pool, 0);
        assert_eq!(usage(&pool, 0), 1, "a second read marks it (HOT)");
        assert!(
            queued(&pool, 0),
            "...but it stays queued until the head reaches it"
        );

        // The pool is full and the hand has made its pass: the next miss
        // takes the queue's head. Block 0 was read again: promoted. Block 1
        // was not: the victim, remembered in the ghost set.
        read(&pool, 32);
        assert!(!queued(&pool, 0), "block 0 promoted to main");
        assert_eq!(usage(&pool, 0), 1, "promoted with its HOT bit");
        assert!(
            !is_resident(&pool, tag(R, 1)),
            "block 1 evicted from probation"
        );
        assert!(queued(&pool, 32), "the new page is on probation");

        // Block 1 comes back while its ghost is remembered: straight to main.
        read(&pool, 1);
        assert!(!queued(&pool, 1), "a ghost hit is admitted to main");
        assert_eq!(usage(&pool, 1), 0, "...COOL");
        // A page never seen before still goes to probation.
        read(&pool, 33);
        assert!(queued(&pool, 33));

        // A scan of 10 x the pool churns only the queue: the two main pages
        // stay, though the scan is far longer than HOT/COOL survives.
        for b in 40..360 {
            read(&pool, b);
        }
        for b in [0, 1] {
            assert!(is_resident(&pool, tag(R, b)), "block {b} survived the scan");
            assert!(!queued(&pool, b));
        }
        let rows = pool.buffercache();
        let in_queue = rows.iter().filter(|r| r.probation).count();
        assert_eq!(in_queue, 30, "every buffer but the two main ones is queued");
    });
}

#[test]
fn probation_ring_pins_do_not_promote() {
    with_timeout(30, || {
        let (_db, pool) = setup(Evictor::Probation, 32, 64);
        let mut ring = pool.ring(RingKind::BulkRead).unwrap();
        for b in 0..32 {
            read(&pool, b);
        }
        ring_read(&pool, &mut ring, 0);
        ring_read(&pool, &mut ring, 0);
        assert_eq!(usage(&pool, 0), 0, "ring pins leave it COOL");
        read(&pool, 40);
        assert!(!is_resident(&pool, tag(R, 0)), "so the head's pop takes it");
    });
}

// ---------------------------------------------------------------------------
// Reference simulator
// ---------------------------------------------------------------------------

const HOT: u8 = 1;
const REF: u8 = 2;

#[derive(Clone, Copy, Debug, Default)]
struct SimBuf {
    block: Option<BlockNumber>,
    /// Clock: the count. HOT/COOL and probation: HOT | REF bits.
    usage: u8,
    /// Probation: in the probation queue.
    queued: bool,
}

/// The probation evictor's ghost set as the rules state it: per mapping
/// partition, buckets of 8 remembered tags, each bucket overwriting its
/// oldest; a hit forgets the entry. (Keyed by block here; the pool keys by
/// a 32-bit fingerprint of the tag hash, which for the few blocks of these
/// tests is asserted unique.)
/// A ghost bucket: 8 ways and the next way to overwrite.
type SimBucket = ([Option<BlockNumber>; 8], usize);

#[derive(Debug, Default)]
struct SimGhost {
    /// (mapping partition, bucket) -> its ways.
    buckets: std::collections::HashMap<(usize, usize), SimBucket>,
    buckets_per_part: usize,
}

impl SimGhost {
    fn new(pool_buffers: usize) -> SimGhost {
        let entries = pool_buffers - pool_buffers / 10;
        let per_part = entries.div_ceil(bufmgr::table::NUM_MAPPING_PARTITIONS);
        SimGhost {
            buckets: Default::default(),
            buckets_per_part: per_part.div_ceil(8),
        }
    }

    fn key(&self, block: BlockNumber) -> (usize, usize) {
        let ht = HashedTag::new(tag(R, block));
        (
            ht.partition(),
            ((ht.hash >> 7) % self.buckets_per_part as u64) as usize,
        )
    }

    fn remember(&mut self, block: BlockNumber) {
        let k = self.key(block);
        let (ways, next) = self.buckets.entry(k).or_default();
        if ways.contains(&Some(block)) {
            return;
        }
        ways[*next] = Some(block);
        *next = (*next + 1) % 8;
    }

    fn take(&mut self, block: BlockNumber) -> bool {
        let k = self.key(block);
        let Some((ways, _)) = self.buckets.get_mut(&k) else {
            return false;
        };
        match ways.iter().position(|&w| w == Some(block)) {
            Some(w) => {
                ways[w] = None;
                true
            }
            None => false,
        }
    }
}

#[derive(Debug)]
struct Sim {
    evictor: Evictor,
    bufs: Vec<SimBuf>,
    /// Ticks the hand has made; `batch` ticks are claimed at a time.
    hand: usize,
    batch: usize,
    ring: Vec<Option<usize>>,
    ring_cur: usize,
    /// Probation: the queue (front = head), whether the hand has made a
    /// whole pass (counted in claimed ticks), and the ghost set.
    queue: std::collections::VecDeque<usize>,
    filled: bool,
    ghost: SimGhost,
}

impl Sim {
    fn new(evictor: Evictor, n: usize, ring_len: usize, batch: usize) -> Sim {
        Sim {
            evictor,
            bufs: vec![SimBuf::default(); n],
            hand: 0,
            batch,
            ring: vec![None; ring_len],
            ring_cur: ring_len - 1,
            queue: Default::default(),
            filled: false,
            ghost: SimGhost::new(n),
        }
    }

    fn pin(&mut self, i: usize, ring: bool) {
        let u = &mut self.bufs[i].usage;
        *u = match (self.evictor, ring) {
            (Evictor::Clock, false) => (*u + 1).min(5),
            (Evictor::Clock, true) => (*u).max(1),
            (_, false) => HOT | REF,
            (_, true) => *u,
        };
    }

    /// One tick of the hand on buffer `i`: `Some(true)` if it is the victim,
    /// `Some(false)` if its usage went down, `None` if skipped (queued).
    fn tick(&mut self, i: usize) -> Option<bool> {
        let b = &mut self.bufs[i];
        if self.evictor == Evictor::Probation && b.queued {
            return None;
        }
        let u = &mut b.usage;
        Some(match self.evictor {
            Evictor::Clock if *u > 0 => {
                *u -= 1;
                false
            }
            Evictor::HotCool | Evictor::Probation if *u & REF != 0 => {
                *u &= !REF;
                false
            }
            Evictor::HotCool | Evictor::Probation if *u & HOT != 0 => {
                *u = 0;
                false
            }
            _ => true,
        })
    }

    /// Take the queue's head (while it holds a tenth of the pool, or any
    /// when `forced`): promote it if referenced (unless `forced`), else it
    /// is the victim and its page is remembered as a ghost.
    fn pop(&mut self, forced: bool) -> Option<Option<usize>> {
        let target = (self.bufs.len() / 10).max(1);
        if self.queue.is_empty() || (!forced && self.queue.len() < target) {
            return None;
        }
        let i = self.queue.pop_front().unwrap();
        let b = &mut self.bufs[i];
        b.queued = false;
        if b.usage != 0 && !forced {
            b.usage &= !REF; // the pop is its first tick
            return Some(None); // promoted: now under the hand
        }
        if let Some(blk) = b.block {
            self.ghost.remember(blk);
        }
        Some(Some(i))
    }

    fn sweep(&mut self) -> usize {
        let n = self.bufs.len();
        if self.evictor == Evictor::Probation {
            self.filled |= self.hand.div_ceil(self.batch) * self.batch >= n;
            if self.filled {
                for _ in 0..self.queue.len() {
                    match self.pop(false) {
                        None => break,
                        Some(Some(v)) => return v,
                        Some(None) => {}
                    }
                }
            }
        }
        let mut try_counter = n;
        while try_counter > 0 {
            let i = self.hand % n;
            self.hand += 1;
            match self.tick(i) {
                Some(true) => return i,
                Some(false) => try_counter = n,
                None => try_counter -= 1,
            }
        }
        // Everything under the hand was queued: take the queue's head.
        self.pop(true)
            .flatten()
            .expect("single-threaded: nothing is pinned")
    }

    fn ring_reusable(&self, i: usize) -> bool {
        match self.evictor {
            Evictor::Clock => self.bufs[i].usage <= 1,
            _ => self.bufs[i].usage & HOT == 0,
        }
    }

    fn read(&mut self, block: BlockNumber, ring: bool) {
        if let Some(i) = self.bufs.iter().position(|b| b.block == Some(block)) {
            self.pin(i, ring);
            return;
        }
        let victim = if ring {
            self.ring_cur = (self.ring_cur + 1) % self.ring.len();
            match self.ring[self.ring_cur] {
                Some(b) if self.ring_reusable(b) => b,
                _ => {
                    let v = self.sweep();
                    self.ring[self.ring_cur] = Some(v);
                    v
                }
            }
        } else {
            self.sweep()
        };
        let was_queued = self.bufs[victim].queued;
        let queued = match self.evictor {
            // A ring reusing a queued buffer leaves it queued; otherwise
            // a ghost goes to main and any other page to probation.
            Evictor::Probation => was_queued || !self.ghost.take(block),
            _ => false,
        };
        self.bufs[victim] = SimBuf {
            block: Some(block),
            usage: match self.evictor {
                Evictor::Clock => 1,
                _ => 0,
            },
            queued,
        };
        if queued && !was_queued {
            self.queue.push_back(victim);
        }
    }

    /// (block, visible usage level, queued) per buffer.
    fn rows(&self) -> Vec<(Option<BlockNumber>, u8, bool)> {
        self.bufs
            .iter()
            .map(|b| match b.block {
                None => (None, 0, b.queued),
                Some(blk) => (
                    Some(blk),
                    match self.evictor {
                        Evictor::Clock => b.usage,
                        _ => b.usage & HOT,
                    },
                    b.queued,
                ),
            })
            .collect()
    }
}

fn pool_rows(pool: &BufferPool) -> Vec<(Option<BlockNumber>, u8, bool)> {
    pool.buffercache()
        .into_iter()
        .map(|r| match r.tag {
            None => (None, 0, r.probation),
            Some(t) => (Some(t.block), r.usage, r.probation),
        })
        .collect()
}

/// The pool and the simulator on one random sequence of `steps` reads of
/// `blocks` blocks (half of them of 6 hot blocks, 30% through a ring) in a
/// pool of `n`, compared after every read.
fn differential(evictor: Evictor, batch: u32, seed: u64) {
    differential_sized(evictor, batch, seed, 16, 48, 500);
}

fn differential_sized(
    evictor: Evictor,
    batch: u32,
    seed: u64,
    n: usize,
    blocks: BlockNumber,
    steps: usize,
) {
    // The simulator's ghost set keys by block: the pool's fingerprints of
    // these blocks' tags must then be distinct within a mapping partition.
    let mut fps = std::collections::HashSet::new();
    for b in 0..blocks {
        let ht = HashedTag::new(tag(R, b));
        assert!(fps.insert((ht.partition(), ht.hash >> 32)));
    }
    let db = TestDb::new();
    db.create_rel(rel(R), blocks);
    let pool = db.pool(
        small_config(n)
            .evictor(evictor)
            .batch(SweepBatch::Fixed(batch)),
    );
    let mut ring = pool.ring(RingKind::BulkRead).unwrap();
    let mut sim = Sim::new(evictor, n, ring.len(), batch as usize);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut history = Vec::new();
    for step in 0..steps {
        let block = if rng.random_bool(0.5) {
            rng.random_range(0..6)
        } else {
            rng.random_range(0..blocks)
        };
        let use_ring = rng.random_bool(0.3);
        history.push((block, use_ring));
        if use_ring {
            ring_read(&pool, &mut ring, block);
        } else {
            read(&pool, block);
        }
        sim.read(block, use_ring);
        let (got, want) = (pool_rows(&pool), sim.rows());
        assert_eq!(
            got,
            want,
            "{evictor} batch {batch}: buffers (block, usage, queued) differ from the rules \
             after step {step}; last accesses (block, ring): {:?}",
            &history[history.len().saturating_sub(12)..]
        );
    }
}

#[test]
fn clock_matches_the_reference_rules() {
    with_timeout(60, || {
        differential(Evictor::Clock, 1, 1);
        differential(Evictor::Clock, 4, 2);
    });
}

#[test]
fn hotcool_matches_the_reference_rules() {
    with_timeout(60, || {
        differential(Evictor::HotCool, 1, 3);
        differential(Evictor::HotCool, 4, 4);
    });
}

#[test]
fn probation_matches_the_reference_rules() {
    with_timeout(60, || {
        differential(Evictor::Probation, 1, 5);
        differential(Evictor::Probation, 4, 6);
        // A pool of 40: a queue target of 4, and a ghost set of 36 entries
        // (one bucket of 8 per mapping partition) over 200 blocks.
        differential_sized(Evictor::Probation, 1, 7, 40, 200, 1500);
        differential_sized(Evictor::Probation, 3, 8, 40, 200, 1500);
    });
}
