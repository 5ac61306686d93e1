//! The background writer: it cleans dirty buffers ahead of the clock hand
//! while threads evict (WAL first, rule 5, and without losing a write), it
//! never writes a recently used buffer nor changes usage, it hibernates when
//! idle and a sweep wakes it, and dropping the pool stops it promptly even
//! while it hibernates.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bufmgr::{BgWriterConfig, BlockNumber, BufferPool, Evictor, PoolConfig, SweepBatch};
use common::{TestDb, TestWal, check_page, fill_page, rel, wait_until, with_timeout};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const REL: u32 = 31;
const BLOCKS: BlockNumber = 256;

fn bg(delay_ms: u64) -> Option<BgWriterConfig> {
    Some(BgWriterConfig {
        delay: Duration::from_millis(delay_ms),
        ..BgWriterConfig::default()
    })
}

fn cleans_under_load(evictor: Evictor) {
    let db = TestDb::new();
    db.create_rel(rel(REL), BLOCKS);
    let wal = TestWal::new();
    let pool = db.pool_with_wal(
        PoolConfig::new(64)
            .partitions(1)
            .evictor(evictor)
            .bgwriter(bg(20)),
        wal.clone(),
    );
    let model: Vec<AtomicU64> = (0..BLOCKS).map(|_| AtomicU64::new(0)).collect();
    let lsn = AtomicU64::new(1);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    std::thread::scope(|s| {
        // A writer dirtying pages with WAL-logged changes.
        s.spawn(|| {
            let mut rng = SmallRng::seed_from_u64(1);
            while !stop.load(Ordering::Relaxed) {
                let b = rng.random_range(0..BLOCKS);
                let mut g = pool
                    .read_buffer(rel(REL), b, None)
                    .unwrap()
                    .lock_exclusive();
                let v = check_page(&g, b).unwrap() + 1;
                fill_page(&mut g, b, v);
                g.set_lsn(lsn.fetch_add(1, Ordering::SeqCst));
                g.mark_dirty();
                model[b as usize].store(v, Ordering::SeqCst);
                drop(g);
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        // A reader that keeps the hand moving.
        s.spawn(|| {
            let mut rng = SmallRng::seed_from_u64(2);
            while !stop.load(Ordering::Relaxed) {
                let b = rng.random_range(0..BLOCKS);
                let g = pool.read_buffer(rel(REL), b, None).unwrap().lock_shared();
                check_page(&g, b).unwrap();
            }
        });
        // (A round counts its writes as its batches complete and itself when
        // it ends: wait for both.)
        let cleaned = wait_until(Duration::from_secs(15), || {
            let st = pool.stats();
            st.writes_bgwriter >= 10 && st.bgwriter_rounds > 0
        });
        stop.store(true, Ordering::Relaxed);
        let st = pool.stats();
        assert!(
            cleaned,
            "{evictor}: the background writer wrote {} pages in {:?} ({} rounds)",
            st.writes_bgwriter,
            started.elapsed(),
            st.bgwriter_rounds
        );
        assert!(st.bgwriter_rounds > 0);
    });
    // Rule 5 for every write, the bgwriter's included.
    for w in db.storage.writes() {
        assert!(w.wal_flushed >= w.page_lsn, "{evictor}: rule 5: {w:?}");
    }
    // The background writer is still running, and pins each page it writes
    // (`SyncOneBuffer`): a pin of its own may be up at any moment, but not
    // for long. A leaked pin stays.
    assert!(
        wait_until(Duration::from_secs(5), || pool.pinned_buffers() == 0),
        "{evictor}: {} buffers still pinned after the threads stopped",
        pool.pinned_buffers()
    );
    pool.flush_all(false).unwrap();
    drop(pool);
    let fresh = BufferPool::new(PoolConfig::new(16).partitions(1), db.fresh_storage()).unwrap();
    for b in 0..BLOCKS {
        let g = fresh.read_buffer(rel(REL), b, None).unwrap().lock_shared();
        assert_eq!(
            check_page(&g, b),
            Ok(model[b as usize].load(Ordering::SeqCst)),
            "{evictor}: block {b} lost a write"
        );
    }
}

#[test]
fn clock_bgwriter_cleans_while_threads_evict() {
    with_timeout(60, || cleans_under_load(Evictor::Clock));
}

#[test]
fn hotcool_bgwriter_cleans_while_threads_evict() {
    with_timeout(60, || cleans_under_load(Evictor::HotCool));
}

#[test]
fn probation_bgwriter_cleans_while_threads_evict() {
    with_timeout(60, || cleans_under_load(Evictor::Probation));
}

/// Rounds run by hand over a pool whose dirty pages were all used recently
/// (clock usage 3) write nothing and change no usage count.
#[test]
fn bgwriter_rounds_skip_recently_used_buffers_and_leave_usage_alone() {
    with_timeout(30, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), 32);
        let pool = db.pool(
            PoolConfig::new(32)
                .partitions(1)
                .batch(SweepBatch::Fixed(1)),
        );
        for b in 0..32 {
            common::bump_version(&pool, rel(REL), b);
            common::read_version(&pool, rel(REL), b);
            common::read_version(&pool, rel(REL), b);
        }
        let before: Vec<_> = pool
            .buffercache()
            .into_iter()
            .map(|r| (r.tag, r.usage, r.dirty))
            .collect();
        assert!(before.iter().all(|&(_, u, d)| u == 3 && d));
        for _ in 0..5 {
            assert_eq!(pool.bgwriter_round().unwrap(), 0);
        }
        let after: Vec<_> = pool
            .buffercache()
            .into_iter()
            .map(|r| (r.tag, r.usage, r.dirty))
            .collect();
        assert_eq!(before, after);
        assert!(db.storage.writes().is_empty());
        assert_eq!(pool.stats().writes_bgwriter, 0);
    });
}

/// A pool of clean pages used twice: the bgwriter finds nothing to do,
/// goes idle after a few rounds and hibernates (50 x delay = 10 s).
fn hibernating_pool(db: &TestDb) -> BufferPool {
    db.create_rel(rel(REL), 64);
    let pool = db.pool(PoolConfig::new(32).partitions(1).bgwriter(bg(200)));
    for _ in 0..2 {
        for b in 0..32 {
            common::read_version(&pool, rel(REL), b);
        }
    }
    assert!(
        wait_until(Duration::from_secs(5), || pool.stats().bgwriter_rounds >= 3),
        "the background writer did not run"
    );
    // Hibernating: no round for over three delays (it runs every 200 ms
    // while awake). Allow a few tries in case the machine is slow.
    let mut hibernating = false;
    for _ in 0..6 {
        let rounds = pool.stats().bgwriter_rounds;
        std::thread::sleep(Duration::from_millis(700));
        if pool.stats().bgwriter_rounds == rounds {
            hibernating = true;
            break;
        }
    }
    assert!(hibernating, "the idle background writer did not hibernate");
    pool
}

#[test]
fn dropping_the_pool_stops_a_hibernating_bgwriter_promptly() {
    with_timeout(30, || {
        let db = TestDb::new();
        let pool = hibernating_pool(&db);
        let started = Instant::now();
        drop(pool);
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(2),
            "dropping the pool took {took:?} (the bgwriter was hibernating)"
        );
    });
}

#[test]
fn a_sweep_wakes_a_hibernating_bgwriter() {
    with_timeout(30, || {
        let db = TestDb::new();
        let pool = hibernating_pool(&db);
        let rounds = pool.stats().bgwriter_rounds;
        // Misses: the sweep runs and should wake it well before 10 s.
        for b in 32..40 {
            common::read_version(&pool, rel(REL), b);
        }
        assert!(
            wait_until(Duration::from_secs(2), || pool.stats().bgwriter_rounds
                > rounds),
            "the sweep did not wake the hibernating background writer"
        );
    });
}

/// Dropping a pool whose bgwriter is busy (short delay, dirty pages) is
/// prompt too, and many pools can come and go.
#[test]
fn pools_with_bgwriters_come_and_go() {
    with_timeout(30, || {
        let db = Arc::new(TestDb::new());
        db.create_rel(rel(REL), 16);
        for i in 0..10 {
            let pool = db.pool(PoolConfig::new(8).partitions(1).bgwriter(bg(10)));
            for b in 0..16 {
                common::bump_version(&pool, rel(REL), b);
            }
            std::thread::sleep(Duration::from_millis(15));
            let started = Instant::now();
            pool.flush_all(false).unwrap();
            drop(pool);
            assert!(started.elapsed() < Duration::from_secs(2), "pool {i}");
        }
        for b in 0..16 {
            assert_eq!(check_page(&db.read_file_page(rel(REL), b), b), Ok(10));
        }
    });
}
