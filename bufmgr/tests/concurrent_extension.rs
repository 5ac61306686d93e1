//! Several threads extend one relation at once on a small pool (so every
//! extension evicts, often a dirty page), one of them through a bulk-write
//! ring, while a reader re-reads blocks already extended. Every block number
//! is handed out exactly once, and every page holds what its extender wrote,
//! in the pool and on disk.

mod common;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use bufmgr::{BlockNumber, PoolConfig, RingKind, SweepBatch};
use common::{TestDb, check_page, fill_page, rel, with_timeout};

const REL: u32 = 40;
const THREADS: u64 = 4;
const PER_THREAD: usize = 50;

#[test]
fn concurrent_extenders_get_distinct_blocks() {
    with_timeout(60, || {
        let db = TestDb::new();
        let pool = db.pool(
            PoolConfig::new(16)
                .partitions(2)
                .batch(SweepBatch::Fixed(2)),
        );
        pool.create_fork(rel(REL)).unwrap();
        // Which thread (version = thread + 1) got each block.
        let owner: Mutex<Vec<Option<u64>>> = Mutex::new(Vec::new());
        let extended = AtomicU32::new(0);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (pool, owner, extended) = (&pool, &owner, &extended);
                s.spawn(move || {
                    let mut ring = (t == 0).then(|| pool.ring(RingKind::BulkWrite).unwrap());
                    for _ in 0..PER_THREAD {
                        let mut g = pool.extend(rel(REL), ring.as_mut()).unwrap();
                        let b = g.block();
                        assert!(
                            g[bufmgr::page::OWNER_HEADER_OFFSET..]
                                .iter()
                                .all(|&x| x == 0),
                            "extension of block {b} returned a page that is not zeroed"
                        );
                        fill_page(&mut g, b, t + 1);
                        g.mark_dirty();
                        {
                            let mut o = owner.lock().unwrap();
                            if o.len() <= b as usize {
                                o.resize(b as usize + 1, None);
                            }
                            assert_eq!(o[b as usize], None, "block {b} handed out twice");
                            o[b as usize] = Some(t + 1);
                        }
                        drop(g);
                        extended.fetch_max(b + 1, Ordering::SeqCst);
                    }
                });
            }
            // A reader of blocks already extended (their pages must be complete).
            s.spawn(|| {
                let mut i = 0u32;
                while extended.load(Ordering::SeqCst) < (THREADS as u32) * PER_THREAD as u32 {
                    let n = extended.load(Ordering::SeqCst);
                    if n == 0 {
                        std::thread::yield_now();
                        continue;
                    }
                    i = i.wrapping_mul(31).wrapping_add(7);
                    let b = i % n;
                    let g = pool.read_buffer(rel(REL), b, None).unwrap().lock_shared();
                    // Extended by a thread that has not yet filled it: zeros.
                    if !g[bufmgr::page::OWNER_HEADER_OFFSET..]
                        .iter()
                        .all(|&x| x == 0)
                    {
                        check_page(&g, b).unwrap();
                    }
                }
            });
        });
        let total = THREADS as usize * PER_THREAD;
        let owner = owner.into_inner().unwrap();
        assert_eq!(owner.len(), total);
        assert!(
            owner.iter().all(Option::is_some),
            "a block number was skipped"
        );
        assert_eq!(pool.nblocks(rel(REL)).unwrap() as usize, total);
        assert_eq!(pool.pinned_buffers(), 0);
        for b in 0..total as BlockNumber {
            let g = pool.read_buffer(rel(REL), b, None).unwrap().lock_shared();
            assert_eq!(
                check_page(&g, b),
                Ok(owner[b as usize].unwrap()),
                "block {b}"
            );
        }
        pool.flush_all(false).unwrap();
        for b in 0..total as BlockNumber {
            assert_eq!(
                check_page(&db.read_file_page(rel(REL), b), b),
                Ok(owner[b as usize].unwrap()),
                "block {b} on disk"
            );
        }
    });
}
