//! Micro-benchmarks of the buffer manager's hot paths (`cargo bench -p bench`).
//!
//! ```text
//!   pin_unpin_hit/{1thread,2threads}   read_buffer + drop of a resident page
//!   pin_unpin_hit/1thread-traced       the same on a pool recording a trace (32 bytes
//!                                      an access, written to a file in batches)
//!   pin_unpin_hit/1thread-mrc          the same on a pool sampling for the miss-ratio
//!                                      curve at the default rate (the hit path's filter)
//!   pin_unpin_hit/1thread-mrc-all      the same sampling every page (the cost of a
//!                                      sampled access: batch, lock, Fenwick tree)
//!   hot100/{1thread,2threads}           the same on 100 hot pages both threads share
//!   miss_with_eviction/{clock,hotcool}  every access a miss: sweep, evict, pread, checksum
//!   miss_with_eviction/clock_no_checksum  the same without verifying the checksum
//!   pread_baseline                      the bare 8 KiB pread of the same blocks
//!   sweep_tick/{clock,hotcool}          one tick of the clock hand on a state word
//! ```
//!
//! The relations are built in a temporary directory through the pool (see
//! `bench::data`), so their pages sit in the OS page cache: a miss measures
//! the buffer manager plus a page-cache copy, not a disk.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bufmgr::desc::{HOT, PROBATION, REFBIT, USAGE_ONE, VALID};
use bufmgr::evictor::Tick;
use bufmgr::{
    BlockNumber, BufferPool, Evictor, FileStorage, PAGE_SIZE, PoolConfig, RelFork, RelId,
    StorageBackend,
};
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use std::hint::black_box;

mod common;

/// Keep the whole run to about a minute.
fn configure(g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(20)
        .throughput(Throughput::Elements(1));
}

/// Pool of the hit and miss benchmarks: 8 MiB.
const POOL_BUFFERS: usize = 1024;
/// The resident relation of the hit benchmark.
const HIT_REL: RelId = RelId(10);
const HIT_BLOCKS: BlockNumber = 64;
/// The relation of the shared-hot-pages benchmark.
const HOT_REL: RelId = RelId(12);
const HOT_BLOCKS: BlockNumber = 100;
/// Length of each thread's access sequence over the hot pages.
const HOT_SEQ: usize = 4096;
/// The relation of the miss benchmark: 16 x the pool (128 MiB).
const MISS_REL: RelId = RelId(11);
const MISS_BLOCKS: BlockNumber = 16 * POOL_BUFFERS as BlockNumber;

fn storage(dir: &Path) -> Arc<FileStorage> {
    let s = Arc::new(FileStorage::open(dir).expect("open storage"));
    bench::data::ensure_relation(&s, HIT_REL, HIT_BLOCKS, POOL_BUFFERS, false)
        .expect("build the hit relation");
    bench::data::ensure_relation(&s, HOT_REL, HOT_BLOCKS, POOL_BUFFERS, false)
        .expect("build the hot relation");
    bench::data::ensure_relation(&s, MISS_REL, MISS_BLOCKS, POOL_BUFFERS, false)
        .expect("build the miss relation");
    s
}

/// A pin and an unpin of a resident page.
fn hit(pool: &BufferPool, rf: RelFork, block: BlockNumber) {
    let pin = pool.read_buffer(rf, block, None).expect("read");
    black_box(pin.id());
}

/// `iters` hits of the hit relation's pages in turn.
fn hits_in_turn(pool: &BufferPool, rf: RelFork, b: &mut criterion::Bencher<'_>) {
    let mut i: BlockNumber = 0;
    b.iter(|| {
        hit(pool, rf, i % HIT_BLOCKS);
        i = i.wrapping_add(1);
    })
}

fn pin_unpin_hit(c: &mut Criterion, storage: &Arc<FileStorage>, dir: &Path) {
    let pool = BufferPool::new(PoolConfig::new(POOL_BUFFERS), storage.clone()).expect("pool");
    // The same pool recording a trace, measured in the same run so that
    // "tracing on" and "off" are side by side (`bench --trace`'s cost per
    // access). The file grows by 32 bytes a hit: removed after the group.
    let trace = dir.join("pin_unpin_hit.trace");
    let traced = BufferPool::new(
        PoolConfig::new(POOL_BUFFERS).trace(Some(trace.clone())),
        storage.clone(),
    )
    .expect("traced pool");
    // Sampling for the miss-ratio curve: at the default rate, and every page.
    let mrc = BufferPool::new(
        PoolConfig::new(POOL_BUFFERS).mrc(Some(bufmgr::MrcConfig::DEFAULT)),
        storage.clone(),
    )
    .expect("sampling pool");
    let mrc_all = BufferPool::new(
        PoolConfig::new(POOL_BUFFERS).mrc(Some(bufmgr::MrcConfig {
            rate_inverse: 1,
            ..bufmgr::MrcConfig::DEFAULT
        })),
        storage.clone(),
    )
    .expect("pool sampling every page");
    let rf = RelFork::main(HIT_REL);
    for b in 0..HIT_BLOCKS {
        hit(&pool, rf, b);
        hit(&traced, rf, b);
        hit(&mrc, rf, b);
        hit(&mrc_all, rf, b);
    }
    let mut g = c.benchmark_group("pin_unpin_hit");
    configure(&mut g);
    g.bench_function("1thread", |b| hits_in_turn(&pool, rf, b));
    g.bench_function("1thread-traced", |b| hits_in_turn(&traced, rf, b));
    g.bench_function("1thread-mrc", |b| hits_in_turn(&mrc, rf, b));
    g.bench_function("1thread-mrc-all", |b| hits_in_turn(&mrc_all, rf, b));
    // Every access of the pool sampling every page was sampled (all but
    // the last partial batch of this thread, handed over by the call).
    let curve = mrc_all.miss_ratio_curve().expect("sampling is on");
    assert_eq!(
        curve.sampled_accesses,
        mrc_all.stats().totals().accesses,
        "pin_unpin_hit/1thread-mrc-all: {curve}"
    );
    // Two threads, each doing half the operations on its own half of the
    // relation: the time is wall time for all of them, so the figure is the
    // aggregate cost per operation (half the per-thread latency if the pool
    // scaled perfectly). Disjoint pages, so what is shared is the pool's own
    // structures (mapping partitions, hand, counters), not a page's state
    // word: two threads pinning the same pages would bounce its cache line
    // whatever the pool did.
    g.bench_function("2threads", |b| {
        b.iter_custom(|iters| {
            let barrier = Barrier::new(3);
            let start = std::thread::scope(|s| {
                for t in 0..2u32 {
                    let (pool, barrier) = (&pool, &barrier);
                    s.spawn(move || {
                        // Register this thread with the pool before the clock starts.
                        hit(pool, rf, t);
                        barrier.wait();
                        let half = HIT_BLOCKS / 2;
                        let mut i: BlockNumber = 0;
                        for _ in 0..iters / 2 {
                            hit(pool, rf, t * half + i % half);
                            i = i.wrapping_add(1);
                        }
                    });
                }
                barrier.wait();
                Instant::now()
            });
            start.elapsed()
        })
    });
    g.finish();
    // The traced pool recorded every access: the file holds one record per
    // access and eviction the pool counted, nothing lost or torn.
    traced.flush_trace().expect("write the trace");
    let counted = traced.stats().totals();
    drop(traced);
    let records = (counted.accesses + counted.evictions) as usize;
    let len = std::fs::metadata(&trace).expect("the trace file").len() as usize;
    assert_eq!(
        len,
        bufmgr::trace::HEADER_SIZE + records * bufmgr::trace::RECORD_SIZE,
        "the trace of pin_unpin_hit/1thread-traced: {records} records counted"
    );
    // Best effort: the temporary directory goes at the end anyway.
    let _ = std::fs::remove_file(&trace);
}

/// A thread's order of visits to the hot pages: every page about equally
/// often, shuffled with the thread's own seed, so two threads touch the same
/// page at the same moment only by chance.
fn hot_order(seed: u64) -> Vec<BlockNumber> {
    let mut order: Vec<BlockNumber> = (0..HOT_SEQ as BlockNumber)
        .map(|i| i % HOT_BLOCKS)
        .collect();
    order.shuffle(&mut SmallRng::seed_from_u64(seed));
    order
}

/// Pin+unpin of 100 resident pages that every thread uses (not disjoint
/// halves as in `pin_unpin_hit/2threads`). `1thread` and `2threads` use the
/// same pages and the same per-thread sequences, so one run gives the
/// scaling: rate(2threads) / rate(1thread) = time(1thread) / time(2threads).
/// As in `pin_unpin_hit`, `2threads` reports wall time per operation of the
/// pair (each thread does half), i.e. the inverse of the aggregate rate.
fn hot100(c: &mut Criterion, storage: &Arc<FileStorage>) {
    let pool = BufferPool::new(PoolConfig::new(POOL_BUFFERS), storage.clone()).expect("pool");
    let rf = RelFork::main(HOT_REL);
    for b in 0..HOT_BLOCKS {
        hit(&pool, rf, b);
    }
    let orders = [hot_order(21), hot_order(22)];
    // Each thread times itself (see `common::timed_threads`); registering
    // a thread with the pool is off the clock.
    let run = |threads: usize, iters: u64| -> Duration {
        common::timed_threads(
            &orders,
            threads,
            iters,
            "hot100 thread",
            |order| hit(&pool, rf, order[0]),
            |order, i| hit(&pool, rf, order[i % HOT_SEQ]),
        )
    };
    let mut g = c.benchmark_group("hot100");
    configure(&mut g);
    g.bench_function("1thread", |b| b.iter_custom(|iters| run(1, iters)));
    g.bench_function("2threads", |b| b.iter_custom(|iters| run(2, iters)));
    g.finish();
}

/// Every block of the miss relation once, in a fixed random order: cycling
/// through it, each block comes back after 16 x pool accesses, long after
/// any policy has evicted it, so every access misses.
fn miss_order() -> Vec<BlockNumber> {
    let mut order: Vec<BlockNumber> = (0..MISS_BLOCKS).collect();
    order.shuffle(&mut SmallRng::seed_from_u64(11));
    order
}

fn miss_with_eviction(c: &mut Criterion, storage: &Arc<FileStorage>) {
    let rf = RelFork::main(MISS_REL);
    let order = miss_order();
    let mut g = c.benchmark_group("miss_with_eviction");
    configure(&mut g);
    let variants = [
        ("clock", Evictor::Clock, true),
        ("hotcool", Evictor::HotCool, true),
        ("probation", Evictor::Probation, true),
        ("clock_no_checksum", Evictor::Clock, false),
    ];
    for (name, evictor, checksums) in variants {
        let pool = BufferPool::new(
            PoolConfig::new(POOL_BUFFERS)
                .evictor(evictor)
                .checksums(checksums),
            storage.clone(),
        )
        .expect("pool");
        let mut i = 0usize;
        g.bench_function(name, |b| {
            b.iter(|| {
                let pin = pool
                    .read_buffer(rf, order[i % order.len()], None)
                    .expect("read");
                black_box(pin.id());
                i += 1;
            })
        });
        let s = pool.stats().totals();
        assert!(
            s.hits * 100 <= s.accesses,
            "{name}: the miss benchmark hit {} of {} accesses",
            s.hits,
            s.accesses
        );
    }
    g.finish();

    // The physical baseline, next to it: the same reads without the pool.
    let file = File::open(storage.path(rf)).expect("open relation file");
    let mut page = vec![0u8; PAGE_SIZE];
    let mut i = 0usize;
    c.bench_function("pread_baseline", |b| {
        b.iter(|| {
            let block = order[i % order.len()];
            file.read_exact_at(&mut page, u64::from(block) * PAGE_SIZE as u64)
                .expect("pread");
            black_box(&page);
            i += 1;
        })
    });
}

/// State words the tick benchmark sweeps: 32 KiB, as the descriptors of a
/// 4,096-buffer pool would be touched (one word each).
const TICK_WORDS: usize = 4096;

/// Usage bits of a page that has been read and hit a few times: the clock at
/// usage 0..=5, HOT/COOL at COOL, HOT or HOT+REF, spread by `i`; probation
/// as HOT/COOL, with every tenth word queued (skipped by the main hand).
fn used_state(e: Evictor, i: usize) -> u64 {
    VALID
        | match e {
            Evictor::Clock => (i % 6) as u64 * USAGE_ONE,
            Evictor::HotCool => [0, HOT, HOT | REFBIT][i % 3],
            Evictor::Probation if i.is_multiple_of(10) => PROBATION,
            Evictor::Probation => [0, HOT, HOT | REFBIT][i % 3],
        }
}

fn sweep_tick(c: &mut Criterion) {
    let mut g = c.benchmark_group("sweep_tick");
    configure(&mut g);
    for e in Evictor::ALL {
        let words: Vec<AtomicU64> = (0..TICK_WORDS)
            .map(|i| AtomicU64::new(used_state(e, i)))
            .collect();
        // What a victim's slot becomes: a new page that is then hit (a
        // different mix from the start, so the pattern does not repeat).
        let refill: Vec<u64> = (0..TICK_WORDS).map(|i| used_state(e, i * 7 + 1)).collect();
        let mut hand = 0usize;
        g.bench_function(e.name(), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    let w = &words[hand];
                    let s = w.load(Ordering::Relaxed);
                    let new = match e.on_tick(s) {
                        Tick::Cool(new) => Some(new),
                        Tick::Victim => Some(refill[hand]),
                        Tick::Pinned | Tick::Skip => None,
                    };
                    if let Some(new) = new {
                        let _ = black_box(w.compare_exchange(
                            s,
                            new,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        ));
                    }
                    hand = (hand + 1) % TICK_WORDS;
                }
                start.elapsed()
            })
        });
    }
    g.finish();
}

fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let storage = storage(dir.path());
    pin_unpin_hit(c, &storage, dir.path());
    hot100(c, &storage);
    miss_with_eviction(c, &storage);
    sweep_tick(c);
}

criterion_group! {
    name = bufmgr_benches;
    config = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(20);
    targets = benches
}
criterion_main!(bufmgr_benches);
