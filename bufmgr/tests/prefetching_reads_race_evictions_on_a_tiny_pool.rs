//! `read_buffer_prefetching` asks for lines of the candidate buffer before
//! it is pinned, so the buffer may be evicted and reused for another page
//! between the prefetch and the pin. On a 4-buffer pool, with evicters
//! retagging every buffer all the time, readers asking for lines in the
//! page, at its last byte and past it (which ask for nothing) must always
//! get the page they named, whole; and a block past the end or a relation
//! that does not exist must be `read_buffer`'s own error.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bufmgr::{BlockNumber, PAGE_SIZE, PoolConfig, SweepBatch};
use common::{TestDb, check_page, rel, with_timeout};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const BLOCKS: BlockNumber = 24;
const POOL: usize = 4;
const RUN: Duration = Duration::from_millis(600);

#[test]
fn prefetching_reads_return_the_named_page_while_buffers_are_retagged() {
    with_timeout(120, || {
        let db = TestDb::new();
        let rf = rel(5);
        db.create_rel(rf, BLOCKS);
        let pool = db.pool(
            PoolConfig::new(POOL)
                .batch(SweepBatch::Fixed(1))
                .balancing(false)
                .bgwriter(None),
        );
        let lines: [&[usize]; 5] = [
            &[],
            &[0],
            &[0, 24, 4000],
            &[PAGE_SIZE - 1],
            &[PAGE_SIZE, PAGE_SIZE + 64, usize::MAX],
        ];
        let stop = AtomicBool::new(false);
        let deadline = Instant::now() + RUN;
        let reads = std::thread::scope(|s| {
            let readers: Vec<_> = (0..2u64)
                .map(|t| {
                    let (pool, stop) = (&pool, &stop);
                    s.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(t);
                        let mut n = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            let b = rng.random_range(0..BLOCKS);
                            let l = lines[rng.random_range(0..lines.len())];
                            let pin = match pool.read_buffer_prefetching(rf, b, l) {
                                Ok(p) => p,
                                // A tiny pool may be momentarily all pinned.
                                Err(bufmgr::Error::NoUnpinnedBuffers { .. }) => continue,
                                Err(e) => panic!("prefetching read of block {b}: {e}"),
                            };
                            assert_eq!(pin.tag().relfork(), rf);
                            assert_eq!(pin.block(), b, "pinned the wrong page");
                            let g = pin.lock_shared();
                            if let Err(e) = check_page(&g, b) {
                                panic!("block {b} asking for {l:?}: {e}");
                            }
                            n += 1;
                        }
                        n
                    })
                })
                .collect();
            // Evicter: every buffer, by number, over and over.
            {
                let (pool, stop) = (&pool, &stop);
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(99);
                    while !stop.load(Ordering::Relaxed) {
                        pool.evict_buffer(rng.random_range(0..POOL as u32))
                            .expect("evict");
                    }
                });
            }
            while Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            stop.store(true, Ordering::Relaxed);
            readers
                .into_iter()
                .map(|r| r.join().expect("reader"))
                .sum::<u64>()
        });
        assert!(reads > 100, "only {reads} reads");
        assert_eq!(pool.pinned_buffers(), 0, "a pin leaked");

        // Errors are read_buffer's, for every set of lines.
        let missing = rel(77);
        for l in lines {
            for (r, b) in [(rf, BLOCKS), (rf, BlockNumber::MAX), (missing, 0)] {
                let want = pool.read_buffer(r, b, None).map(|p| p.block());
                let got = pool.read_buffer_prefetching(r, b, l).map(|p| p.block());
                assert!(got.is_err(), "{r:?} block {b}: {got:?}");
                assert_eq!(format!("{got:?}"), format!("{want:?}"), "{r:?} block {b}");
            }
        }
        assert_eq!(pool.pinned_buffers(), 0, "a pin leaked on an error");
    });
}
