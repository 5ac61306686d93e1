//! Micro-benchmark of a B-tree descent (`cargo bench -p bench --bench
//! btree_descent`): a point lookup (`Index::lookup_each`) in a resident
//! index of three levels (root, one internal level, leaves), from one
//! thread and from two.
//!
//! ```text
//!   descent_3_levels/1thread-MODE            lookups of random keys
//!   descent_3_levels/2threads-same-MODE      both threads look up the same keys (same pages, same moments)
//!   descent_3_levels/2threads-disjoint-MODE  each thread its own half of the key space (shared root
//!                                            and internal pages, leaves of its own)
//!   descent_3_levels/1thread-headed          1thread-optimistic on the same entries in an index of
//!                                            the headed item layout (indexes written before the
//!                                            compact one)
//! ```
//!
//! MODE is `optimistic` (internal pages read with no pin and no lock,
//! validated by the buffer's version) or `pinned` (a pool opened with
//! optimistic reads off: every page pinned and locked shared); the two run
//! one after the other within each shape, so their ratio comes from one
//! process. Each mode has its own pool and copy of the index (the
//! optimistic pool also holds the headed copy), built bottom-up
//! (`build_sorted`) in a temporary directory, every page resident before
//! timing; the setup checks that its root is at level 2. `2threads-*` report wall time per lookup of the pair (each
//! thread does half), the inverse of the aggregate rate, so
//! time(1thread) / time(2threads-*) is the scaling.

use std::sync::Arc;
use std::time::Duration;

use btree::page::Layout;
use btree::{Index, IndexOptions, Key, KeyType};
use bufmgr::{BufferPool, FileStorage, PoolConfig, RelId};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use heap::Tid;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use std::hint::black_box;

mod common;

/// Entries of the index: three levels at the build's fill factors.
const ENTRIES: i64 = 1_000_000;
/// Pool: both indexes (about 1,900 and 3,000 pages) resident with room to spare.
const POOL_BUFFERS: usize = 8192;
const REL: RelId = RelId(20);
/// Length of each thread's key sequence.
const SEQ: usize = 1 << 16;

/// `SEQ` keys from `lo..hi`, shuffled with `seed`.
fn keys(lo: i64, hi: i64, seed: u64) -> Vec<i64> {
    let span = (hi - lo) as usize;
    let mut k: Vec<i64> = (0..SEQ).map(|i| lo + ((i * 7919) % span) as i64).collect();
    k.shuffle(&mut SmallRng::seed_from_u64(seed));
    k
}

/// One lookup of `key`: the descent and the leaf's matching entry.
fn lookup(index: &Index, key: i64) {
    let mut found = 0u32;
    index
        .lookup_each(&Key::I64(key), |tid| {
            found += 1;
            black_box(tid);
            true
        })
        .expect("lookup");
    assert_eq!(found, 1, "key {key} is in the index once");
}

/// A pool under `dir` with optimistic reads on or off.
fn pool(dir: &std::path::Path, optimistic: bool) -> Arc<BufferPool> {
    let storage = Arc::new(FileStorage::open(dir).expect("open storage"));
    let config = PoolConfig::new(POOL_BUFFERS).optimistic_reads(optimistic);
    Arc::new(BufferPool::new(config, storage).expect("pool"))
}

/// The index of `ENTRIES` keys in `layout`, built and made resident.
fn built(pool: &Arc<BufferPool>, rel: RelId, layout: Layout) -> Index {
    let index = Index::create_in_layout(
        pool.clone(),
        None,
        IndexOptions {
            name: "descent".into(),
            rel,
            key_type: KeyType::I64,
            unique: true,
        },
        layout,
    )
    .expect("create the index");
    let stats = index
        .build_sorted((0..ENTRIES).map(|k| {
            let tid = Tid::new((k / 100) as u32, (k % 100) as u16 + 1);
            (Key::I64(k), tid)
        }))
        .expect("build the index");
    assert_eq!(stats.root_level, 2, "the index has three levels: {stats:?}");
    // Every page resident, and touched often enough that a pin no longer
    // raises the usage of the internal pages (else the pool declines the
    // optimistic reads): a few lookups per leaf's worth of keys.
    for _ in 0..6 {
        for k in (0..ENTRIES).step_by(100) {
            lookup(&index, k);
        }
    }
    index
}

fn descent(c: &mut Criterion) {
    let dirs = [
        tempfile::tempdir().expect("temporary directory"),
        tempfile::tempdir().expect("temporary directory"),
    ];
    let optimistic = pool(dirs[0].path(), true);
    let indexes = [
        ("optimistic", built(&optimistic, REL, Layout::Compact)),
        (
            "pinned",
            built(&pool(dirs[1].path(), false), REL, Layout::Compact),
        ),
    ];
    let headed = built(&optimistic, RelId(REL.0 + 1), Layout::Headed);
    let optimistic_hits = |index: &Index| index.pool().stats().totals().optimistic_hits;
    let same = [keys(0, ENTRIES, 31), keys(0, ENTRIES, 31)];
    let disjoint = [keys(0, ENTRIES / 2, 32), keys(ENTRIES / 2, ENTRIES, 33)];
    // Each thread times itself (see `common::timed_threads`).
    let run = |index: &Index, orders: &[Vec<i64>; 2], threads: usize, iters: u64| -> Duration {
        common::timed_threads(
            orders,
            threads,
            iters,
            "descent thread",
            |order| lookup(index, order[0]),
            |order, i| lookup(index, order[i % SEQ]),
        )
    };
    let mut g = c.benchmark_group("descent_3_levels");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(20)
        .throughput(Throughput::Elements(1));
    // The two modes alternate within each shape, so their ratio is measured
    // in one process at nearly the same moment.
    for (shape, orders, threads) in [
        ("1thread", &same, 1),
        ("2threads-same", &same, 2),
        ("2threads-disjoint", &disjoint, 2),
    ] {
        for (mode, index) in &indexes {
            let before = optimistic_hits(index);
            let mut ran = false;
            g.bench_function(format!("{shape}-{mode}"), |b| {
                ran = true;
                b.iter_custom(|iters| run(index, orders, threads, iters))
            });
            // The mode really is what its name says (where the row ran: a
            // filter or `--list` runs none of it).
            let read = optimistic_hits(index) - before;
            match *mode {
                "optimistic" if ran => assert!(read > 0, "{shape}: no optimistic read"),
                _ => assert_eq!(read, 0, "{shape}: optimistic reads with them off"),
            }
        }
    }
    g.bench_function("1thread-headed", |b| {
        b.iter_custom(|iters| run(&headed, &same, 1, iters))
    });
    g.finish();
}

criterion_group!(btree_descent, descent);
criterion_main!(btree_descent);
