//! The hit and miss paths in the smallest pools: many threads read, write
//! and optimistically read more blocks than the pool holds while reads
//! fail now and then, with one partition or two, checksums on or off and
//! optimistic reads on or off. Every successful read sees the last write
//! of its block; a failure is the injected I/O error or, with more threads
//! than buffers, "no unpinned buffers"; nothing stays pinned and, at the
//! end, every block reads back its last version from the pool and from
//! the file.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bufmgr::{BlockNumber, Error, ErrorKind, PAGE_SIZE};
use common::{TestDb, check_page, fill_page, read_version, rel, small_config, with_timeout};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const REL: u32 = 23;

fn hammer(buffers: usize, partitions: usize, checksums: bool, optimistic: bool, threads: u64) {
    with_timeout(120, move || {
        const BLOCKS: BlockNumber = 24;
        let db = Arc::new(TestDb::new());
        db.create_rel(rel(REL), BLOCKS);
        let pool = db.pool(
            small_config(buffers)
                .partitions(partitions)
                .checksums(checksums)
                .optimistic_reads(optimistic),
        );
        let model: Vec<AtomicU64> = (0..BLOCKS).map(|_| AtomicU64::new(0)).collect();
        let (injected, exhausted, optimistic_ok) =
            (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let toggler = s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    db.faulty.fail_reads_after(2);
                    std::thread::sleep(Duration::from_millis(1));
                    db.faulty.clear();
                    std::thread::sleep(Duration::from_millis(3));
                }
                db.faulty.clear();
            });
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let (pool, model, db) = (&pool, &model, &db);
                    let (injected, exhausted, optimistic_ok) =
                        (&injected, &exhausted, &optimistic_ok);
                    s.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(t * 7 + buffers as u64);
                        for _ in 0..1500 {
                            // Few hot blocks: threads meet on the same pages.
                            let b = if rng.random_bool(0.5) {
                                rng.random_range(0..3)
                            } else {
                                rng.random_range(0..BLOCKS)
                            };
                            if rng.random_bool(0.3) {
                                let before = model[b as usize].load(Ordering::SeqCst);
                                let seen = pool.read_optimistic(rel(REL), b, |p| {
                                    let mut page = vec![0u8; PAGE_SIZE];
                                    p.read(0, &mut page).map(|()| page)
                                });
                                if let Some(Some(page)) = seen {
                                    let v = check_page(&page, b).unwrap_or_else(|e| {
                                        panic!("an optimistic read that validated: {e}")
                                    });
                                    let after = model[b as usize].load(Ordering::SeqCst);
                                    assert!(
                                        before <= v + 1 && v <= after,
                                        "block {b}: version {v} read between {before} and {after}"
                                    );
                                    optimistic_ok.fetch_add(1, Ordering::Relaxed);
                                }
                                continue;
                            }
                            let pin = match pool.read_buffer(rel(REL), b, None) {
                                Ok(p) => p,
                                Err(e @ Error::NoUnpinnedBuffers { .. }) => {
                                    assert_eq!(e.kind(), ErrorKind::ResourceExhausted);
                                    exhausted.fetch_add(1, Ordering::Relaxed);
                                    std::thread::yield_now();
                                    continue;
                                }
                                Err(e) => {
                                    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
                                    assert!(e.to_string().contains("injected read failure"), "{e}");
                                    let _ = db;
                                    injected.fetch_add(1, Ordering::Relaxed);
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
            "buffers {buffers} partitions {partitions} checksums {checksums} optimistic \
             {optimistic}: {} injected, {} exhausted, {} optimistic reads",
            injected.load(Ordering::Relaxed),
            exhausted.load(Ordering::Relaxed),
            optimistic_ok.load(Ordering::Relaxed)
        );
        assert!(injected.load(Ordering::Relaxed) > 0, "no read failed");
        if (threads as usize) < buffers {
            // Each thread pins one buffer at a time (its page or its victim):
            // a free buffer is always there to be found.
            assert_eq!(
                exhausted.load(Ordering::Relaxed),
                0,
                "{threads} threads pinning one buffer each exhausted {buffers} buffers"
            );
        }
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

#[test]
fn the_smallest_pool_under_eight_threads_and_failing_reads_loses_nothing() {
    hammer(4, 1, true, true, 8);
}

#[test]
fn the_smallest_pool_without_checksums_or_optimistic_reads_loses_nothing() {
    hammer(4, 1, false, false, 8);
}

#[test]
fn a_small_pool_of_two_partitions_under_failing_reads_loses_nothing() {
    hammer(16, 2, true, true, 6);
}

#[test]
fn a_pool_of_the_engine_minimum_under_failing_reads_loses_nothing() {
    hammer(16, 1, false, true, 3);
}

#[test]
fn fewer_threads_than_buffers_never_find_every_buffer_pinned() {
    hammer(4, 1, true, true, 3);
}
