//! A failed read is an error value naming the file; the buffer it was read
//! into is not left pinned or valid, threads waiting for that read do not
//! hang, and a later read of the block simply tries again.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use bufmgr::{BlockNumber, Error, ErrorKind, StorageBackend};
use common::{
    TestDb, check_page, fill_page, read_version, rel, row_of, small_config, tag, with_timeout,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const REL: u32 = 17;

fn assert_injected(e: &Error, db: &TestDb) {
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    let msg = e.to_string();
    assert!(msg.contains("injected read failure"), "{msg}");
    assert!(
        msg.contains(&db.storage.path(rel(REL)).display().to_string()),
        "{msg}"
    );
}

#[test]
fn a_failed_read_is_an_error_and_the_next_read_tries_again() {
    with_timeout(30, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), 4);
        let pool = db.pool(small_config(8));
        db.faulty.fail_reads_after(0);
        let e = pool.read_buffer(rel(REL), 1, None).unwrap_err();
        assert_injected(&e, &db);
        assert_eq!(pool.pinned_buffers(), 0);
        assert!(
            row_of(&pool, tag(REL, 1)).is_none(),
            "a failed read left a valid page"
        );
        // Still failing: the error again, not a cached page.
        assert!(pool.read_buffer(rel(REL), 1, None).is_err());
        db.faulty.clear();
        assert_eq!(read_version(&pool, rel(REL), 1), 0);
        assert_eq!(db.faulty.reads_of(tag(REL, 1)), 3);
        assert_eq!(pool.pinned_buffers(), 0);
    });
}

/// Several threads miss the same block at once; the one read fails. Every
/// thread gets an error (or, if it came late, reads the block itself) and
/// none is left waiting.
#[test]
fn waiters_of_a_failed_read_do_not_hang() {
    with_timeout(30, || {
        const THREADS: usize = 4;
        let db = TestDb::new();
        db.create_rel(rel(REL), 4);
        let pool = db.pool(small_config(8));
        db.faulty.set_read_delay(Duration::from_millis(20));
        db.faulty.fail_reads_after(0);
        let start = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                let (pool, start, db) = (&pool, &start, &db);
                s.spawn(move || {
                    start.wait();
                    let e = pool.read_buffer(rel(REL), 2, None).unwrap_err();
                    assert_injected(&e, db);
                });
            }
        });
        assert_eq!(db.faulty.overlapping_reads(), 0);
        assert_eq!(pool.pinned_buffers(), 0);
        db.faulty.clear();
        assert_eq!(read_version(&pool, rel(REL), 2), 0);
    });
}

/// Readers and writers on a small pool while reads fail on and off. Failed
/// operations are skipped; the others are checked against a model. At the
/// end, with storage healthy, every block holds its last written version.
#[test]
fn intermittent_read_failures_lose_nothing() {
    with_timeout(60, || {
        const BLOCKS: BlockNumber = 48;
        const THREADS: u64 = 4;
        let db = Arc::new(TestDb::new());
        db.create_rel(rel(REL), BLOCKS);
        let pool = db.pool(small_config(12));
        db.faulty.set_read_delay(Duration::from_micros(100));
        let model: Vec<AtomicU64> = (0..BLOCKS).map(|_| AtomicU64::new(0)).collect();
        let failed = AtomicU64::new(0);
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let toggler = s.spawn(|| {
                let mut on = false;
                while !done.load(Ordering::Relaxed) {
                    on = !on;
                    if on {
                        db.faulty.fail_reads_after(3);
                        std::thread::sleep(Duration::from_millis(1));
                    } else {
                        db.faulty.clear();
                        db.faulty.set_read_delay(Duration::from_micros(100));
                        std::thread::sleep(Duration::from_millis(4));
                    }
                }
                db.faulty.clear();
            });
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (pool, model, failed, db) = (&pool, &model, &failed, &db);
                    s.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(t);
                        for _ in 0..1500 {
                            let b = rng.random_range(0..BLOCKS);
                            let pin = match pool.read_buffer(rel(REL), b, None) {
                                Ok(p) => p,
                                Err(e) => {
                                    assert_injected(&e, db);
                                    failed.fetch_add(1, Ordering::Relaxed);
                                    std::thread::sleep(Duration::from_micros(200));
                                    continue;
                                }
                            };
                            if rng.random_bool(0.4) {
                                let mut g = pin.lock_exclusive();
                                let v = check_page(&g, b).unwrap();
                                assert_eq!(v, model[b as usize].load(Ordering::SeqCst));
                                fill_page(&mut g, b, v + 1);
                                g.mark_dirty();
                                model[b as usize].store(v + 1, Ordering::SeqCst);
                            } else {
                                let g = pin.lock_shared();
                                let v = check_page(&g, b).unwrap();
                                assert_eq!(v, model[b as usize].load(Ordering::SeqCst));
                            }
                        }
                    })
                })
                .collect();
            for w in workers {
                w.join().unwrap();
            }
            done.store(true, Ordering::Relaxed);
            toggler.join().unwrap();
        });
        eprintln!(
            "{} operations failed, {} storage reads",
            failed.load(Ordering::Relaxed),
            db.faulty.reads()
        );
        assert!(
            failed.load(Ordering::Relaxed) > 0,
            "no read failed: the test did not test anything"
        );
        assert_eq!(db.faulty.overlapping_reads(), 0);
        assert_eq!(pool.pinned_buffers(), 0);
        for b in 0..BLOCKS {
            assert_eq!(
                read_version(&pool, rel(REL), b),
                model[b as usize].load(Ordering::SeqCst),
                "block {b}"
            );
        }
        pool.flush_all(false).unwrap();
        for b in 0..BLOCKS {
            assert_eq!(
                check_page(&db.read_file_page(rel(REL), b), b),
                Ok(model[b as usize].load(Ordering::SeqCst))
            );
        }
    });
}
