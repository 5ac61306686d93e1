//! Rule 7 observed from outside, through `pool.buffercache()` (`usage` is the
//! clock's count 0..=5, or 1 = HOT / 0 = COOL):
//!
//! - clock: a page loads with usage 1, each pin adds 1 up to 5, a tick takes 1
//!   away, usage 0 unpinned is the victim; a ring pin raises 0 -> 1 only;
//! - HOT/COOL: a page loads COOL, a second pin makes it HOT (with a reference
//!   bit: a tick clears the bit, the next demotes to COOL, the next evicts);
//!   a ring pin never makes a page HOT.
//!
//! Single-threaded with one partition the pool is deterministic, so besides
//! the named cases a reference simulator of the two rules (and of the ring's
//! slot reuse) is run side by side with the pool on a random access sequence,
//! comparing every buffer's page and usage after every access.

use bufmgr::{BlockNumber, BufferPool, Evictor, RingKind, SweepBatch};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tests::{TestDb, is_resident, rel, row_of, small_config, tag, with_timeout};

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
    /// Clock: the count. HOT/COOL: HOT | REF bits.
    usage: u8,
}

#[derive(Debug)]
struct Sim {
    evictor: Evictor,
    bufs: Vec<SimBuf>,
    hand: usize,
    ring: Vec<Option<usize>>,
    ring_cur: usize,
}

impl Sim {
    fn new(evictor: Evictor, n: usize, ring_len: usize) -> Sim {
        Sim {
            evictor,
            bufs: vec![SimBuf::default(); n],
            hand: 0,
            ring: vec![None; ring_len],
            ring_cur: ring_len - 1,
        }
    }

    fn pin(&mut self, i: usize, ring: bool) {
        let u = &mut self.bufs[i].usage;
        *u = match (self.evictor, ring) {
            (Evictor::Clock, false) => (*u + 1).min(5),
            (Evictor::Clock, true) => (*u).max(1),
            (Evictor::HotCool, false) => HOT | REF,
            (Evictor::HotCool, true) => *u,
        };
    }

    /// One tick on buffer `i`: true if it is the victim.
    fn tick(&mut self, i: usize) -> bool {
        let u = &mut self.bufs[i].usage;
        match self.evictor {
            Evictor::Clock if *u > 0 => {
                *u -= 1;
                false
            }
            Evictor::HotCool if *u & REF != 0 => {
                *u &= !REF;
                false
            }
            Evictor::HotCool if *u & HOT != 0 => {
                *u = 0;
                false
            }
            _ => true,
        }
    }

    fn sweep(&mut self) -> usize {
        loop {
            let i = self.hand % self.bufs.len();
            self.hand += 1;
            if self.tick(i) {
                return i;
            }
        }
    }

    fn ring_reusable(&self, i: usize) -> bool {
        match self.evictor {
            Evictor::Clock => self.bufs[i].usage <= 1,
            Evictor::HotCool => self.bufs[i].usage & HOT == 0,
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
        self.bufs[victim] = SimBuf {
            block: Some(block),
            usage: match self.evictor {
                Evictor::Clock => 1,
                Evictor::HotCool => 0,
            },
        };
    }

    /// (block, visible usage level) per buffer.
    fn rows(&self) -> Vec<(Option<BlockNumber>, u8)> {
        self.bufs
            .iter()
            .map(|b| match b.block {
                None => (None, 0),
                Some(blk) => (
                    Some(blk),
                    match self.evictor {
                        Evictor::Clock => b.usage,
                        Evictor::HotCool => b.usage & HOT,
                    },
                ),
            })
            .collect()
    }
}

fn pool_rows(pool: &BufferPool) -> Vec<(Option<BlockNumber>, u8)> {
    pool.buffercache()
        .into_iter()
        .map(|r| match r.tag {
            None => (None, 0),
            Some(t) => (Some(t.block), r.usage),
        })
        .collect()
}

fn differential(evictor: Evictor, batch: u32, seed: u64) {
    const N: usize = 16;
    const BLOCKS: BlockNumber = 48;
    let db = TestDb::new();
    db.create_rel(rel(R), BLOCKS);
    let pool = db.pool(
        small_config(N)
            .evictor(evictor)
            .batch(SweepBatch::Fixed(batch)),
    );
    let mut ring = pool.ring(RingKind::BulkRead).unwrap();
    let mut sim = Sim::new(evictor, N, ring.len());
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut history = Vec::new();
    for step in 0..500 {
        let block = if rng.random_bool(0.5) {
            rng.random_range(0..6)
        } else {
            rng.random_range(0..BLOCKS)
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
            "{evictor} batch {batch}: buffers (block, usage) differ from the rules after \
             step {step}; last accesses (block, ring): {:?}",
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
