//! A trace recorded through a real pool decodes to what the pool counted,
//! and replaying it through the engine's evictor rules
//! (`lab::replay::ReplayPool`) reproduces the live pool's hits access for
//! access when the live pool is as simple as the replay: one thread, one
//! partition, a sweep batch of 1.
//!
//! Also: several threads recording at once lose no record (each thread's
//! batches are written whole), a damaged file is an error naming the
//! offset, and `stop_trace` keeps what was recorded and records nothing
//! after.

use bufmgr::trace::Trace;
use bufmgr::{BlockNumber, BufferPool, Evictor, RingKind, RingSizes};
use lab::replay::{Policy, Ref, replay};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use tests::{TestDb, rel, small_config, with_timeout};

const R: u32 = 5;

/// Read a random sequence (half of it from 8 hot blocks, a quarter through
/// a bulk-read ring) of `steps` reads of `blocks` blocks through `pool`.
fn drive(pool: &BufferPool, blocks: BlockNumber, steps: usize, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut ring = pool.ring(RingKind::BulkRead);
    for _ in 0..steps {
        let block = if rng.random_bool(0.5) {
            rng.random_range(0..8)
        } else {
            rng.random_range(0..blocks)
        };
        let r = if rng.random_bool(0.25) {
            ring.as_mut()
        } else {
            None
        };
        drop(pool.read_buffer(rel(R), block, r).unwrap());
    }
}

fn record(evictor: Evictor, buffers: usize, seed: u64) -> (Trace, bufmgr::PoolStats) {
    let db = TestDb::new();
    let blocks = 200;
    db.create_rel(rel(R), blocks);
    let path = db.dir.path().join("pool.trace");
    let pool = db.pool(
        small_config(buffers)
            .evictor(evictor)
            .trace(Some(path.clone())),
    );
    drive(&pool, blocks, 3000, seed);
    pool.flush_trace().unwrap();
    let stats = pool.stats();
    drop(pool);
    (Trace::read(&path).unwrap(), stats)
}

#[test]
fn a_recorded_trace_counts_what_the_pool_counted() {
    with_timeout(60, || {
        let (trace, stats) = record(Evictor::Clock, 32, 1);
        let t = stats.totals();
        assert_eq!(trace.pool_buffers, 32);
        assert_eq!(trace.accesses().count() as u64, t.accesses);
        assert_eq!(trace.accesses().filter(|a| a.hit).count() as u64, t.hits);
        let evictions = trace.evictions().count() as u64;
        assert_eq!(evictions, t.evictions);
        assert!(
            trace.accesses().any(|a| a.ring == Some(RingKind::BulkRead)),
            "ring reads are marked"
        );
        assert!(
            trace.accesses().all(|a| a.tag.rel == bufmgr::RelId(R)),
            "every access names the relation"
        );
    });
}

#[test]
fn replayed_engine_evictors_hit_exactly_where_the_pool_did() {
    with_timeout(120, || {
        for (i, e) in Evictor::ALL.into_iter().enumerate() {
            let (trace, stats) = record(e, 32, 10 + i as u64);
            let by_time = trace.accesses_by_time();
            assert!(
                by_time.iter().copied().eq(trace.accesses()),
                "one thread: time order is file order"
            );
            let refs: Vec<Ref> = by_time.iter().map(|a| Ref::from(*a)).collect();
            let live: Vec<bool> = by_time.iter().map(|a| a.hit).collect();
            // small_config keeps the default ring sizes (capped at pool / 8).
            let replayed = replay(Policy::Engine(e), &refs, 32, &RingSizes::default());
            let first_difference = live.iter().zip(&replayed).position(|(a, b)| a != b);
            assert_eq!(
                first_difference,
                None,
                "{e}: replay and pool disagree (live hit ratio {:.4})",
                stats.totals().hit_ratio()
            );
        }
    });
}

#[test]
fn threads_recording_at_once_lose_no_record() {
    with_timeout(120, || {
        let db = TestDb::new();
        let blocks = 300;
        db.create_rel(rel(R), blocks);
        let path = db.dir.path().join("threads.trace");
        let pool = db.pool(
            bufmgr::PoolConfig::new(64)
                .partitions(2)
                .trace(Some(path.clone())),
        );
        // More than one batch per thread (4096 records), so batches of
        // different threads interleave in the file.
        std::thread::scope(|s| {
            for t in 0..3u32 {
                let pool = &pool;
                s.spawn(move || {
                    bufmgr::trace::set_thread_id(100 + t);
                    drive(pool, blocks, 6000, u64::from(t));
                    pool.flush_trace().unwrap();
                });
            }
        });
        pool.flush_trace().unwrap();
        let t = pool.stats().totals();
        drop(pool);
        let trace = Trace::read(&path).unwrap();
        assert_eq!(trace.accesses().count() as u64, t.accesses);
        for id in 100..103 {
            assert_eq!(
                trace.accesses().filter(|a| a.thread == id).count(),
                6000,
                "thread {id}"
            );
        }
    });
}

#[test]
fn a_truncated_trace_is_an_error_naming_file_and_offset() {
    with_timeout(60, || {
        let db = TestDb::new();
        db.create_rel(rel(R), 10);
        let path = db.dir.path().join("cut.trace");
        let pool = db.pool(small_config(8).trace(Some(path.clone())));
        drive(&pool, 10, 20, 3);
        pool.flush_trace().unwrap();
        drop(pool);
        let len = std::fs::metadata(&path).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len - 5).unwrap();
        let msg = Trace::read(&path).unwrap_err().to_string();
        let want = format!("offset {}", len - bufmgr::trace::RECORD_SIZE as u64);
        assert!(
            msg.contains("cut.trace") && msg.contains(&want),
            "{msg} (wanted {want})"
        );
    });
}

#[test]
fn stop_trace_keeps_what_was_recorded_and_records_nothing_after() {
    with_timeout(60, || {
        let db = TestDb::new();
        let blocks = 200;
        db.create_rel(rel(R), blocks);
        let path = db.dir.path().join("stop.trace");
        let pool = db.pool(small_config(32).trace(Some(path.clone())));
        drive(&pool, blocks, 1000, 3);
        pool.stop_trace().unwrap();
        let at_stop = pool.stats().totals();
        drive(&pool, blocks, 1000, 4);
        assert!(pool.stats().totals().accesses >= at_stop.accesses + 1000);
        drop(pool);
        let trace = Trace::read(&path).unwrap();
        let evictions = trace.evictions().count() as u64;
        assert_eq!(trace.accesses().count() as u64, at_stop.accesses);
        assert_eq!(evictions, at_stop.evictions);
        assert!(
            at_stop.evictions > 0,
            "a 32-buffer pool over 200 blocks evicts"
        );
    });
}
