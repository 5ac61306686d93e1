//! One thread keeps creating, extending, truncating and dropping a relation
//! while others read, write and evict another relation on the same small
//! pool (with a background writer): invalidation must never disturb the
//! other relation's pages, nor lose or resurrect the churned one's.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bufmgr::StorageBackend;
use bufmgr::{BgWriterConfig, BlockNumber, BufferPool, PoolConfig, RelId, SweepBatch};
use common::{TestDb, check_page, fill_page, rel, with_timeout};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const A: u32 = 50;
const B: u32 = 51;
const A_BLOCKS: BlockNumber = 48;

fn churn(pool: &BufferPool, rounds: u64) {
    let rf = rel(B);
    for round in 1..=rounds {
        pool.create_fork(rf).unwrap();
        assert_eq!(
            pool.nblocks(rf).unwrap(),
            0,
            "round {round}: re-created non-empty"
        );
        for b in 0..6 {
            let mut g = pool.extend(rf, None).unwrap();
            assert_eq!(g.block(), b, "round {round}");
            fill_page(&mut g, b, round);
            g.mark_dirty();
        }
        if round % 2 == 0 {
            assert!(pool.flush_relation(rf).unwrap() <= 6);
        }
        for b in 0..6 {
            let g = pool.read_buffer(rf, b, None).unwrap().lock_shared();
            assert_eq!(check_page(&g, b), Ok(round), "round {round}");
        }
        pool.truncate_relation(rf, 3).unwrap();
        assert_eq!(pool.nblocks(rf).unwrap(), 3);
        for b in 3..5 {
            let mut g = pool.extend(rf, None).unwrap();
            assert_eq!(g.block(), b, "round {round}: extension after truncation");
            assert!(
                g[bufmgr::page::OWNER_HEADER_OFFSET..]
                    .iter()
                    .all(|&x| x == 0),
                "round {round}: block {b} after truncation is not a fresh page"
            );
            fill_page(&mut g, b, round + 1000);
            g.mark_dirty();
        }
        for b in 0..5 {
            let g = pool.read_buffer(rf, b, None).unwrap().lock_shared();
            let want = if b < 3 { round } else { round + 1000 };
            assert_eq!(check_page(&g, b), Ok(want), "round {round}");
        }
        pool.drop_relation(RelId(B)).unwrap();
        assert!(
            pool.buffercache()
                .iter()
                .all(|r| r.tag.is_none_or(|t| t.rel != RelId(B))),
            "round {round}: pages of the dropped relation are still resident"
        );
    }
}

#[test]
fn relation_churn_beside_a_busy_relation() {
    with_timeout(90, || {
        let db = TestDb::new();
        db.create_rel(rel(A), A_BLOCKS);
        let pool = db.pool(
            PoolConfig::new(16)
                .partitions(2)
                .batch(SweepBatch::Fixed(2))
                .bgwriter(Some(BgWriterConfig {
                    delay: Duration::from_millis(10),
                    ..BgWriterConfig::default()
                })),
        );
        let model: Vec<AtomicU64> = (0..A_BLOCKS).map(|_| AtomicU64::new(0)).collect();
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..3u64)
                .map(|t| {
                    let (pool, model, done) = (&pool, &model, &done);
                    s.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(t);
                        let mut ops = 0u64;
                        while !done.load(Ordering::Relaxed) || ops < 500 {
                            ops += 1;
                            let b = rng.random_range(0..A_BLOCKS);
                            match rng.random_range(0..10) {
                                0..=4 => {
                                    let g =
                                        pool.read_buffer(rel(A), b, None).unwrap().lock_shared();
                                    assert_eq!(
                                        check_page(&g, b),
                                        Ok(model[b as usize].load(Ordering::SeqCst))
                                    );
                                }
                                5..=7 => {
                                    let mut g =
                                        pool.read_buffer(rel(A), b, None).unwrap().lock_exclusive();
                                    let v = check_page(&g, b).unwrap();
                                    assert_eq!(v, model[b as usize].load(Ordering::SeqCst));
                                    fill_page(&mut g, b, v + 1);
                                    g.mark_dirty();
                                    model[b as usize].store(v + 1, Ordering::SeqCst);
                                }
                                8 => {
                                    let id = rng.random_range(0..pool.size() as u32);
                                    pool.evict_buffer(id).unwrap();
                                }
                                _ => {
                                    pool.flush_relation(rel(A)).unwrap();
                                }
                            }
                        }
                    })
                })
                .collect();
            churn(&pool, 40);
            done.store(true, Ordering::Relaxed);
            for w in workers {
                w.join().unwrap();
            }
        });
        assert_eq!(pool.pinned_buffers(), 0);
        assert!(pool.write_failure().is_none(), "{:?}", pool.write_failure());
        assert!(!db.storage.path(rel(B)).exists());
        pool.flush_all(false).unwrap();
        for b in 0..A_BLOCKS {
            assert_eq!(
                check_page(&db.read_file_page(rel(A), b), b),
                Ok(model[b as usize].load(Ordering::SeqCst)),
                "block {b} of the busy relation on disk"
            );
        }
    });
}
