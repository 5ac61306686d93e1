//! The pool's lookup counters add up: every `read_buffer` is one access, and
//! every access is either a hit (the page was there, or another thread's read
//! of it finished while we waited) or a read from storage, as the
//! documentation of `PartitionStats::accesses` says ("hits + reads").

mod common;

use std::sync::Barrier;
use std::time::Duration;

use bufmgr::BlockNumber;
use common::{TestDb, read_version, rel, small_config, with_timeout};

#[test]
fn single_thread_counts_reads_then_hits() {
    with_timeout(30, || {
        let db = TestDb::new();
        let rf = rel(1);
        db.create_rel(rf, 20);
        let pool = db.pool(small_config(32));
        for b in 0..20 {
            read_version(&pool, rf, b);
        }
        let t = pool.stats().totals();
        assert_eq!((t.accesses, t.hits, t.reads), (20, 0, 20));
        for b in 0..20 {
            read_version(&pool, rf, b);
        }
        let t = pool.stats().totals();
        assert_eq!((t.accesses, t.hits, t.reads), (40, 20, 20));
        assert_eq!(db.faulty.reads(), 20, "storage saw exactly the misses");
    });
}

/// Threads that read the same blocks in the same order at the same time keep
/// missing the same page together: one reads it, the others wait for that
/// read. Each waiter's lookup must count as a hit (it got the page without
/// reading it), so accesses == hits + reads, and reads == storage reads.
#[test]
fn concurrent_misses_of_one_block_count_as_one_read_and_hits() {
    with_timeout(60, || {
        const THREADS: usize = 4;
        const BLOCKS: BlockNumber = 150;
        let db = TestDb::new();
        let rf = rel(1);
        db.create_rel(rf, BLOCKS);
        // Large enough that nothing is evicted: every miss is a first read.
        let pool = db.pool(small_config(256));
        db.faulty.set_read_delay(Duration::from_micros(300));
        let start = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                let (pool, start) = (&pool, &start);
                s.spawn(move || {
                    start.wait();
                    for b in 0..BLOCKS {
                        assert_eq!(read_version(pool, rf, b), 0);
                    }
                });
            }
        });
        assert_eq!(db.faulty.overlapping_reads(), 0);
        let t = pool.stats().totals();
        assert_eq!(t.accesses, THREADS as u64 * u64::from(BLOCKS));
        assert_eq!(
            t.reads,
            u64::from(BLOCKS),
            "each block read from storage exactly once: {t:?}"
        );
        assert_eq!(db.faulty.reads(), u64::from(BLOCKS));
        assert_eq!(
            t.hits + t.reads,
            t.accesses,
            "a lookup that waited for another thread's read of the page was counted \
             neither as a hit nor as a read: {t:?}"
        );
    });
}

/// The same, with every victim dirty and writes slow, so that two threads
/// missing the same page often both get as far as claiming a victim before
/// one of them inserts the page: the loser finds the winner's entry with the
/// read still in flight and waits for it. That lookup is a hit too.
#[test]
fn losing_the_insert_race_counts_as_a_hit() {
    with_timeout(60, || {
        const THREADS: u32 = 4;
        const BLOCKS: BlockNumber = 120;
        let db = TestDb::new();
        let shared = rel(1);
        let private = rel(2);
        db.create_rel(shared, BLOCKS);
        db.create_rel(private, THREADS * 16);
        let pool = db.pool(small_config(16));
        db.faulty.set_read_delay(Duration::from_micros(200));
        db.storage.set_write_delay(Duration::from_micros(200));
        let start = Barrier::new(THREADS as usize);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (pool, start) = (&pool, &start);
                s.spawn(move || {
                    start.wait();
                    for b in 0..BLOCKS {
                        // Keep the pool full of dirty pages.
                        common::bump_version(pool, private, t * 16 + b % 16);
                        assert_eq!(read_version(pool, shared, b), 0);
                    }
                });
            }
        });
        assert_eq!(db.faulty.overlapping_reads(), 0);
        assert_eq!(pool.pinned_buffers(), 0);
        let t = pool.stats().totals();
        assert_eq!(t.accesses, 2 * u64::from(THREADS * BLOCKS));
        assert_eq!(t.reads, db.faulty.reads(), "{t:?}");
        assert_eq!(
            t.hits + t.reads,
            t.accesses,
            "lookups that lost the insert race and waited for the winner's read were \
             counted neither as hits nor as reads: {t:?}"
        );
    });
}

/// Counters of a thread that has exited are kept (folded into the pool's
/// retired block), and counted once, however many threads come and go.
#[test]
fn counters_outlive_their_threads() {
    with_timeout(60, || {
        let db = TestDb::new();
        let rf = rel(1);
        db.create_rel(rf, 8);
        let pool = db.pool(small_config(16));
        for round in 1..=20u64 {
            std::thread::scope(|s| {
                for _ in 0..3 {
                    s.spawn(|| {
                        for b in 0..8 {
                            read_version(&pool, rf, b);
                        }
                    });
                }
            });
            let t = pool.stats().totals();
            assert_eq!(t.accesses, round * 24, "round {round}");
            assert_eq!(t.hits + t.reads, t.accesses);
        }
        assert_eq!(
            pool.stats().totals().reads,
            8,
            "8 distinct blocks, read once each"
        );
    });
}
