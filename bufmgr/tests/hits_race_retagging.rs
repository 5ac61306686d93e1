//! The lock-free hit path against evictions and retagging of the same
//! buffers: the read index is probed without a lock and the buffer it names
//! is pinned and then validated, so a buffer evicted and reloaded with
//! another page between the probe and the pin must never be returned for
//! the old page.
//!
//! Hitters pin a handful of hot blocks in a tight loop (some through a ring,
//! some locking shared, some not locking at all) and check each pinned buffer
//! is the block they asked for: its tag, and under the shared lock the model
//! page contents (block number and fill). Meanwhile churners read cold
//! blocks through a pool far smaller than the relation (every buffer,
//! including the hot pages' ones, is a victim again and again), an evicter
//! evicts the hot pages by buffer number and the whole pool, and a writer
//! bumps the hot pages' versions (dirty victims, written back and read
//! again). Afterwards: no pin leaked, no lost write (each hot page carries
//! the writer's final version), storage never read one block twice at once,
//! and every access is a hit or a read.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bufmgr::{BlockNumber, Evictor, PoolConfig, RingKind, SweepBatch};
use common::{TestDb, bump_version, check_page, read_version, rel, with_timeout};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const HOT: BlockNumber = 6;
const BLOCKS: BlockNumber = 48;
const POOL: usize = 12;
const RUN: Duration = Duration::from_millis(1500);

fn hammer(evictor: Evictor, partitions: usize) {
    let label = format!("{evictor} partitions {partitions}");
    with_timeout(120, move || {
        let db = TestDb::new();
        let rf = rel(3);
        db.create_rel(rf, BLOCKS);
        let pool = db.pool(
            PoolConfig::new(POOL)
                .evictor(evictor)
                .partitions(partitions)
                .batch(SweepBatch::Fixed(1))
                .balancing(false)
                .bgwriter(None),
        );
        let stop = AtomicBool::new(false);
        let deadline = Instant::now() + RUN;
        let bumps = std::thread::scope(|s| {
            // Hitters.
            for t in 0..3u64 {
                let (pool, stop, label) = (&pool, &stop, &label);
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(t);
                    let mut ring = (t == 2)
                        .then(|| pool.ring_forced(RingKind::BulkRead, 16))
                        .flatten();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let b = rng.random_range(0..HOT);
                        let pin = match pool.read_buffer(rf, b, ring.as_mut()) {
                            Ok(p) => p,
                            // A tiny pool may be momentarily all pinned.
                            Err(bufmgr::Error::NoUnpinnedBuffers { .. }) => continue,
                            Err(e) => panic!("{label}: read of hot block {b}: {e}"),
                        };
                        assert_eq!(pin.tag().relfork(), rf, "{label}");
                        assert_eq!(pin.block(), b, "{label}: pinned the wrong page");
                        if n % 4 != 3 {
                            let g = pin.lock_shared();
                            if let Err(e) = check_page(&g, b) {
                                panic!("{label}: {e}");
                            }
                        }
                        n += 1;
                    }
                    assert!(n > 100, "{label}: hitter {t} got only {n} pins");
                });
            }
            // Churners: cold blocks, so every buffer keeps changing identity.
            for t in 0..2u64 {
                let (pool, stop, label) = (&pool, &stop, &label);
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(100 + t);
                    while !stop.load(Ordering::Relaxed) {
                        let b = rng.random_range(HOT..BLOCKS);
                        match pool.read_buffer(rf, b, None) {
                            Ok(p) => {
                                assert_eq!(p.block(), b);
                                let g = p.lock_shared();
                                if let Err(e) = check_page(&g, b) {
                                    panic!("{label}: {e}");
                                }
                            }
                            Err(bufmgr::Error::NoUnpinnedBuffers { .. }) => {}
                            Err(e) => panic!("{label}: read of cold block {b}: {e}"),
                        }
                    }
                });
            }
            // Evicter: the hot pages' buffers by number, and now and then all.
            {
                let (pool, stop) = (&pool, &stop);
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(200);
                    let mut i = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        let id = rng.random_range(0..POOL as u32);
                        pool.evict_buffer(id).expect("evict");
                        i += 1;
                        if i.is_multiple_of(64) {
                            pool.evict_all().expect("evict all");
                        }
                    }
                });
            }
            // Writer: dirty hot pages, counting the bumps of each.
            let writer = {
                let (pool, stop, label) = (&pool, &stop, &label);
                s.spawn(move || {
                    let mut bumps = [0u64; HOT as usize];
                    let mut rng = SmallRng::seed_from_u64(300);
                    while !stop.load(Ordering::Relaxed) {
                        let b = rng.random_range(0..HOT);
                        let v = bump_version(pool, rf, b);
                        bumps[b as usize] += 1;
                        assert_eq!(v, bumps[b as usize], "{label}: lost write of block {b}");
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    bumps
                })
            };
            while Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            stop.store(true, Ordering::Relaxed);
            writer.join().expect("writer")
        });
        assert_eq!(pool.pinned_buffers(), 0, "{label}: a pin leaked");
        for b in 0..HOT {
            assert_eq!(
                read_version(&pool, rf, b),
                bumps[b as usize],
                "{label}: block {b} lost a write"
            );
        }
        assert_eq!(db.faulty.overlapping_reads(), 0, "{label}");
        let t = pool.stats().totals();
        assert_eq!(t.hits + t.reads, t.accesses, "{label}: {t:?}");
        assert!(t.hits > 0 && t.reads > u64::from(BLOCKS), "{label}: {t:?}");
    });
}

#[test]
fn hits_survive_retagging_clock() {
    hammer(Evictor::Clock, 1);
}

#[test]
fn hits_survive_retagging_hotcool() {
    hammer(Evictor::HotCool, 1);
}

#[test]
fn hits_survive_retagging_probation() {
    hammer(Evictor::Probation, 1);
}

#[test]
fn hits_survive_retagging_probation_two_partitions() {
    hammer(Evictor::Probation, 2);
}

#[test]
fn hits_survive_retagging_two_partitions() {
    hammer(Evictor::Clock, 2);
}
