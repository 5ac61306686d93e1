//! Many threads reading, writing, hinting, flushing and evicting on a tiny
//! pool over a relation four times its size, checked against a model.
//!
//! Every page is a model page (block number, version, a fill derived from
//! both; see `common::fill_page`). A writer takes the exclusive lock, checks
//! the page carries exactly the model's version, writes the next version and
//! updates the model before unlocking. A reader notes the model's version,
//! takes the shared lock and checks: the right block, an untorn fill, and a
//! version equal to the model's (the model only changes under that page's
//! exclusive lock) and not older than the one noted before locking (no lost
//! write: a page evicted and read back carries its last written version).
//! Readers also set hint bits in the page's hint area while writes may be in
//! flight; with checksums on, a hint that slipped into a page being written
//! would make its next read from disk fail the checksum.
//!
//! Afterwards: no double read of one block at once (`FaultyStorage`), no
//! leaked pin, every storage read accounted in the statistics, and after
//! `flush_all` a fresh pool over fresh storage finds every block at the
//! model's final version.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bufmgr::{
    BgWriterConfig, BlockNumber, BufferPool, Error, Evictor, PoolConfig, RingKind, SweepBatch,
};
use common::{HINT_AREA_OFFSET, TestDb, check_page, fill_page, rel, wait_until, with_timeout};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const BLOCKS: BlockNumber = 64;
const THREADS: usize = 6;
const OPS_PER_THREAD: usize = 3000;
const POOL: usize = 16;
const REL: u32 = 7;

#[derive(Default, Debug)]
struct Counts {
    reads: AtomicU64,
    ring_reads: AtomicU64,
    writes: AtomicU64,
    hints_tried: AtomicU64,
    evicted: AtomicU64,
    flushes: AtomicU64,
}

fn run_model(evictor: Evictor, batch: u32, partitions: usize) {
    let label = format!("{evictor} batch {batch} partitions {partitions}");
    with_timeout(120, move || {
        let db = Arc::new(TestDb::new());
        let rf = rel(REL);
        let config = PoolConfig::new(POOL)
            .evictor(evictor)
            .batch(SweepBatch::Fixed(batch))
            .partitions(partitions)
            .checksums(true)
            .bgwriter(Some(BgWriterConfig {
                delay: Duration::from_millis(10),
                ..BgWriterConfig::default()
            }));
        let pool = db.pool(config);
        // Build the relation through the pool itself: extension, version 0.
        pool.create_fork(rf).unwrap();
        for b in 0..BLOCKS {
            let mut g = pool.extend(rf, None).unwrap();
            assert_eq!(g.block(), b);
            fill_page(&mut g, b, 0);
            g.mark_dirty();
        }
        db.faulty.set_read_delay(Duration::from_micros(50));
        let reads_before = db.faulty.reads();
        let stats_before = pool.stats();

        let model: Vec<AtomicU64> = (0..BLOCKS).map(|_| AtomicU64::new(0)).collect();
        let counts = Counts::default();
        let started = Instant::now();
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (pool, model, counts, label) = (&pool, &model, &counts, &label);
                s.spawn(move || worker(pool, model, counts, t, label));
            }
        });
        let elapsed = started.elapsed();

        assert_eq!(
            db.faulty.overlapping_reads(),
            0,
            "{label}: the pool read one block twice at the same time"
        );
        // The background writer may hold a batch's pins for a moment; a
        // leaked pin never goes away.
        wait_until(Duration::from_secs(5), || pool.pinned_buffers() == 0);
        assert_eq!(pool.pinned_buffers(), 0, "{label}: leaked pins");
        let st = pool.stats().since(&stats_before);
        let totals = st.totals();
        assert_eq!(
            totals.reads,
            db.faulty.reads() - reads_before,
            "{label}: every storage read is one counted read"
        );
        assert!(
            totals.evictions > 0 && totals.reads > 0,
            "{label}: the run did not evict ({totals:?})"
        );
        assert!(
            counts.writes.load(Ordering::Relaxed) > 0 && counts.reads.load(Ordering::Relaxed) > 0
        );
        assert_eq!(st.checksum_failures, 0, "{label}");

        // The pool itself agrees with the model.
        for b in 0..BLOCKS {
            let g = pool.read_buffer(rf, b, None).unwrap().lock_shared();
            let v = check_page(&g, b).unwrap_or_else(|e| panic!("{label}: {e}"));
            assert_eq!(v, model[b as usize].load(Ordering::SeqCst), "{label}");
        }
        pool.flush_all(true).unwrap();
        assert_eq!(pool.pinned_buffers(), 0, "{label}");
        drop(pool);

        // Durability through the pool's write path: fresh storage, fresh pool.
        let fresh = BufferPool::new(
            PoolConfig::new(POOL).partitions(1).checksums(true),
            db.fresh_storage(),
        )
        .unwrap();
        for b in 0..BLOCKS {
            let g = fresh
                .read_buffer(rf, b, None)
                .unwrap_or_else(|e| panic!("{label}: fresh read of block {b}: {e}"))
                .lock_shared();
            let v = check_page(&g, b).unwrap_or_else(|e| panic!("{label}: on disk: {e}"));
            assert_eq!(
                v,
                model[b as usize].load(Ordering::SeqCst),
                "{label}: block {b} on disk is not the last written version"
            );
        }
        eprintln!(
            "{label}: {elapsed:?}, {:?}, pool {totals:?}, bgwriter writes {}, \
             hints set {} refused {}",
            counts, st.writes_bgwriter, st.hints_set, st.hints_refused
        );
    });
}

fn worker(pool: &BufferPool, model: &[AtomicU64], counts: &Counts, t: usize, label: &str) {
    let rf = rel(REL);
    let mut rng = SmallRng::seed_from_u64(0x5eed_0000 + t as u64);
    let mut ring = pool.ring(RingKind::BulkRead);
    assert!(ring.is_some(), "a pool of {POOL} has a bulk-read ring");
    let fail = |what: &str, b: BlockNumber, e: Error| -> ! {
        panic!("{label}: thread {t}: {what} of block {b} failed: {e} ({e:?})")
    };
    for op in 0..OPS_PER_THREAD {
        let b = rng.random_range(0..BLOCKS);
        let dice = rng.random_range(0..100u32);
        match dice {
            // Read, verify, maybe set a hint.
            0..=54 => {
                let use_ring = dice < 12;
                let before = model[b as usize].load(Ordering::SeqCst);
                let pin = if use_ring {
                    pool.read_buffer(rf, b, ring.as_mut())
                } else {
                    pool.read_buffer(rf, b, None)
                }
                .unwrap_or_else(|e| fail("read", b, e));
                assert_eq!(pin.block(), b, "{label}: pinned the wrong block");
                let g = pin.lock_shared();
                let v = check_page(&g, b).unwrap_or_else(|e| panic!("{label}: thread {t}: {e}"));
                let now = model[b as usize].load(Ordering::SeqCst);
                assert!(
                    v >= before,
                    "{label}: lost write: block {b} has version {v}, but version {before} \
                     was written before this read began"
                );
                assert_eq!(
                    v, now,
                    "{label}: block {b} under the shared lock is not the model's version"
                );
                if dice % 3 == 0 {
                    let off = HINT_AREA_OFFSET + 2 * rng.random_range(0..32usize);
                    let bit = 1u16 << rng.random_range(0..16u32);
                    g.set_hints(&[(off, bit)])
                        .unwrap_or_else(|e| fail("hint", b, e));
                    counts.hints_tried.fetch_add(1, Ordering::Relaxed);
                }
                if use_ring {
                    counts.ring_reads.fetch_add(1, Ordering::Relaxed);
                } else {
                    counts.reads.fetch_add(1, Ordering::Relaxed);
                }
            }
            // Write the next version.
            55..=89 => {
                let mut g = pool
                    .read_buffer(rf, b, None)
                    .unwrap_or_else(|e| fail("read for write", b, e))
                    .lock_exclusive();
                let v = check_page(&g, b).unwrap_or_else(|e| panic!("{label}: thread {t}: {e}"));
                let m = model[b as usize].load(Ordering::SeqCst);
                assert_eq!(
                    v, m,
                    "{label}: block {b} under the exclusive lock has version {v}, model {m}"
                );
                fill_page(&mut g, b, v + 1);
                g.mark_dirty();
                model[b as usize].store(v + 1, Ordering::SeqCst);
                drop(g);
                counts.writes.fetch_add(1, Ordering::Relaxed);
            }
            // Evict a random buffer (writing it if dirty).
            90..=95 => {
                let id = rng.random_range(0..pool.size() as u32);
                let (evicted, _) = pool
                    .evict_buffer(id)
                    .unwrap_or_else(|e| fail("evict", id, e));
                if evicted {
                    counts.evicted.fetch_add(1, Ordering::Relaxed);
                }
            }
            // A checkpoint or a relation flush now and then.
            _ => {
                if op % 4 == 0 {
                    pool.flush_all(false)
                        .unwrap_or_else(|e| fail("flush_all", 0, e));
                } else {
                    pool.flush_relation(rf)
                        .unwrap_or_else(|e| fail("flush_relation", 0, e));
                }
                counts.flushes.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[test]
fn clock_batch1_one_partition() {
    run_model(Evictor::Clock, 1, 1);
}

#[test]
fn clock_batch4_one_partition() {
    run_model(Evictor::Clock, 4, 1);
}

#[test]
fn clock_batch1_two_partitions() {
    run_model(Evictor::Clock, 1, 2);
}

#[test]
fn clock_batch4_two_partitions() {
    run_model(Evictor::Clock, 4, 2);
}

#[test]
fn hotcool_batch1_one_partition() {
    run_model(Evictor::HotCool, 1, 1);
}

#[test]
fn hotcool_batch4_one_partition() {
    run_model(Evictor::HotCool, 4, 1);
}

#[test]
fn hotcool_batch1_two_partitions() {
    run_model(Evictor::HotCool, 1, 2);
}

#[test]
fn hotcool_batch4_two_partitions() {
    run_model(Evictor::HotCool, 4, 2);
}

#[test]
fn probation_batch1_one_partition() {
    run_model(Evictor::Probation, 1, 1);
}

#[test]
fn probation_batch4_one_partition() {
    run_model(Evictor::Probation, 4, 1);
}

#[test]
fn probation_batch1_two_partitions() {
    run_model(Evictor::Probation, 1, 2);
}

#[test]
fn probation_batch4_two_partitions() {
    run_model(Evictor::Probation, 4, 2);
}
