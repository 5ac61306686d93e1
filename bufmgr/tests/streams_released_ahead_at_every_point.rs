//! Read streams whose read-ahead is released at random points (before the
//! first block, twice in a row, after the end, after an error), several at
//! once on a pool only a little larger than their distances, list sources
//! with repeated blocks, and other threads evicting, dirtying and reading
//! other pages meanwhile: every block comes back once, in order, with its
//! own contents; nothing stays pinned, and the budget returns to zero.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bufmgr::{BlockNumber, BufferPool, ReadStream, RingKind, StreamConfig};
use common::{TestDb, bump_version, check_page, rel, small_config, with_timeout};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const REL: u32 = 41;
const OTHER: u32 = 42;
const N: BlockNumber = 96;

/// One stream under test and the blocks it still owes, in order.
struct Under {
    s: ReadStream,
    want: Vec<BlockNumber>,
    pos: usize,
    ended: bool,
}

impl Under {
    /// Take one block (or the end) and check it.
    fn step(&mut self, what: &str) {
        match self.s.next_buffer() {
            None => {
                assert_eq!(
                    self.pos,
                    self.want.len(),
                    "{what}: ended after {} of {} blocks",
                    self.pos,
                    self.want.len()
                );
                self.ended = true;
            }
            Some(b) => {
                let b = b.unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(!self.ended, "{what}: a block after the end");
                let want = self.want[self.pos];
                assert_eq!(b.block(), want, "{what}: block {} of the stream", self.pos);
                let g = b.lock_shared();
                check_page(&g, want).unwrap_or_else(|e| panic!("{what}: {e}"));
                self.pos += 1;
            }
        }
    }
}

fn new_stream(pool: &BufferPool, rng: &mut SmallRng) -> Under {
    let cfg = StreamConfig::default()
        .lookahead(rng.random_range(1..12usize))
        .io_combine(rng.random_range(1..6usize));
    let ring = if rng.random_bool(0.3) {
        pool.ring_forced(RingKind::BulkRead, 64)
    } else {
        None
    };
    if rng.random_bool(0.5) {
        let a = rng.random_range(0..N);
        let b = rng.random_range(a..=N);
        Under {
            s: pool.read_stream(rel(REL), a..b, ring, cfg),
            want: (a..b).collect(),
            pos: 0,
            ended: false,
        }
    } else {
        // Runs, repeats and jumps back.
        let mut want = Vec::new();
        for _ in 0..rng.random_range(0..40) {
            let b = rng.random_range(0..N);
            let len = rng.random_range(1..5);
            for k in 0..len {
                let blk = (b + k).min(N - 1);
                want.push(blk);
                if rng.random_bool(0.2) {
                    want.push(blk);
                }
            }
        }
        Under {
            s: pool.read_stream_blocks(rel(REL), want.clone(), ring, cfg),
            want,
            pos: 0,
            ended: false,
        }
    }
}

#[test]
fn streams_released_ahead_at_random_points_among_churn_hand_out_every_block() {
    with_timeout(60, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), N);
        db.create_rel(rel(OTHER), 64);
        let pool = Arc::new(db.pool(small_config(40)));
        let stop = Arc::new(AtomicBool::new(false));
        // Another thread turns the pool over and dirties pages of both
        // relations (bump_version keeps each page a model page).
        let churn = {
            let pool = Arc::clone(&pool);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(7);
                while !stop.load(Ordering::Relaxed) {
                    match rng.random_range(0..10) {
                        0 => {
                            pool.evict_all().unwrap();
                        }
                        1..=3 => {
                            bump_version(&pool, rel(REL), rng.random_range(0..N));
                        }
                        _ => {
                            let b = rng.random_range(0..64);
                            let g = pool.read_buffer(rel(OTHER), b, None).unwrap();
                            check_page(&g.lock_shared(), b).unwrap();
                        }
                    }
                }
            })
        };
        for seed in 0..60u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut streams: Vec<Under> = (0..rng.random_range(1..4))
                .map(|_| new_stream(&pool, &mut rng))
                .collect();
            while streams.iter().any(|u| !u.ended) {
                let i = rng.random_range(0..streams.len());
                let what = format!("seed {seed}, stream {i}");
                let u = &mut streams[i];
                match rng.random_range(0..10) {
                    0 => u.s.release_ahead(),
                    1 => {
                        u.s.release_ahead();
                        u.s.release_ahead();
                    }
                    2 => {
                        u.step(&what);
                        u.s.release_ahead();
                    }
                    _ => u.step(&what),
                }
                assert!(u.s.pinned_ahead() <= u.want.len());
            }
            for u in &mut streams {
                u.s.release_ahead();
                assert!(u.s.next_buffer().is_none());
                assert_eq!(u.s.pinned_ahead(), 0);
            }
            assert_eq!(pool.stream_pins_ahead(), 0, "seed {seed}");
            drop(streams);
            assert_eq!(pool.active_streams(), 0, "seed {seed}");
        }
        stop.store(true, Ordering::Relaxed);
        churn.join().unwrap();
        assert_eq!(pool.pinned_buffers(), 0);
        assert_eq!(pool.io_in_progress(), 0);
        assert_eq!(pool.stream_pins_ahead(), 0);
    });
}

/// Streams dropped at random points with their read-ahead released or
/// not, and streams failed by a read error with `release_ahead` called
/// after the error: nothing pinned, nothing counted against the budget.
#[test]
fn streams_ended_by_errors_or_dropped_midway_leave_nothing_behind() {
    with_timeout(60, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), N);
        let pool = db.pool(small_config(24));
        for seed in 0..200u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut u = new_stream(&pool, &mut rng);
            let fail_after = rng.random_range(0..20u64);
            let failing = rng.random_bool(0.5);
            if failing {
                pool.evict_all().unwrap();
                db.faulty.fail_reads_after(fail_after);
            }
            let steps = rng.random_range(0..u.want.len() + 2);
            for _ in 0..steps {
                if rng.random_bool(0.3) {
                    u.s.release_ahead();
                }
                let failed = match u.s.next_buffer() {
                    None => break,
                    Some(Ok(b)) => {
                        assert_eq!(b.block(), u.want[u.pos], "seed {seed}");
                        u.pos += 1;
                        false
                    }
                    Some(Err(_)) => true,
                };
                if failed {
                    assert!(failing, "seed {seed}: an error without a fault");
                    u.s.release_ahead();
                    u.s.release_ahead();
                    assert!(u.s.next_buffer().is_none(), "seed {seed}");
                    assert_eq!(u.s.pinned_ahead(), 0);
                    break;
                }
            }
            if rng.random_bool(0.5) {
                u.s.release_ahead();
            }
            drop(u);
            db.faulty.clear();
            assert_eq!(pool.pinned_buffers(), 0, "seed {seed}");
            assert_eq!(pool.io_in_progress(), 0, "seed {seed}");
            assert_eq!(pool.stream_pins_ahead(), 0, "seed {seed}");
            assert_eq!(pool.active_streams(), 0, "seed {seed}");
        }
    });
}
