//! The pool's miss path beside the bare `pread` of the same blocks, in one
//! criterion group so that their ratio comes from one run
//! (`cargo bench -p bench --bench miss_path`).
//!
//! ```text
//!   miss_path/pool_miss          read_buffer + drop, every access a miss: a
//!                                victim off the clock sweep, the mapping table,
//!                                the pread into the victim's page, the checksum
//!   miss_path/pool_miss_no_checksum  the same with checksums off
//!   miss_path/pool_miss_mapped   pool_miss with mapped reads (the page
//!                                copied from a mapping of the file, not
//!                                pread: `FileOptions::mapped_reads`)
//!   miss_path/pool_miss_2threads, pool_miss_mapped_2threads
//!                                the same two with two threads missing at
//!                                once on one pool (each on its own half of
//!                                the order): the CPU time of both threads
//!                                per access, which is the one-thread row's
//!                                when nothing they share costs more with
//!                                two
//!   miss_path/storage_read_mapped, storage_read_mapped_2threads
//!                                the mapped storage's read of one page into
//!                                the thread's own buffer, no pool, over 64
//!                                blocks that stay in the CPU's caches (the
//!                                storage's own work: finding the file); one
//!                                thread, and two at once (CPU time of both
//!                                per read)
//!   miss_path/raw_pread          pread of the same block into one 8 KiB buffer
//!   miss_path/raw_pread_spread   pread of the same block into the next page of
//!                                a pool-sized buffer (8 MiB), as the clock
//!                                hands a miss the next victim's page: the same
//!                                copy destinations as the pool's
//! ```
//!
//! A 1,024-buffer pool (8 MiB) over a relation of 16 x that (128 MiB),
//! built through the pool in a temporary directory, so its pages sit in the
//! OS page cache: every read is a page-cache copy, no device. The blocks
//! are read in a fixed random order that brings each back only after 16 x
//! pool accesses, so every pool access misses (checked after the run);
//! then every block is read back through the row's storage and checked
//! whole, and the mapped row's file must show in `/proc/self/maps`.
//!
//! Timed in the benchmarking thread's CPU time (`common/cpu.rs`), user and
//! system alike: the `pread`'s kernel time counts, another process's time
//! does not.

use std::fs::File;
use std::hint::black_box;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bufmgr::{
    BlockNumber, BufferPool, Evictor, FileOptions, FileStorage, PAGE_SIZE, PoolConfig, RelFork,
    RelId, StorageBackend,
};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;

#[path = "common/cpu.rs"]
mod cpu;
use cpu::ThreadCpu;

/// The pool: 8 MiB.
const POOL_BUFFERS: usize = 1024;
/// The relation: 16 x the pool (128 MiB).
const REL: RelId = RelId(11);
const BLOCKS: BlockNumber = 16 * POOL_BUFFERS as BlockNumber;

/// Every block of the relation once, in a fixed random order.
fn order() -> Vec<BlockNumber> {
    let mut order: Vec<BlockNumber> = (0..BLOCKS).collect();
    order.shuffle(&mut SmallRng::seed_from_u64(11));
    order
}

/// `op(block, page)` for `iters` blocks of the order in all, on `threads`
/// threads at once (one included: timed on a thread of its own, as the
/// others), each on its own part of the order (its own blocks)
/// from where the last call left off (`next`), each with its own 8 KiB
/// page: the CPU time of all the threads.
fn on_threads(
    order: &[BlockNumber],
    threads: usize,
    iters: u64,
    next: &AtomicUsize,
    op: impl Fn(BlockNumber, &mut [u8]) + Sync,
) -> u64 {
    let start = next.fetch_add(iters as usize / threads, Ordering::Relaxed);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let op = &op;
                s.spawn(move || {
                    // Thread t's part: its own blocks, so that a thread
                    // running ahead of the other never meets its pages.
                    let part = order.len() / threads;
                    let mine = &order[t * part..(t + 1) * part];
                    let n =
                        iters as usize / threads + usize::from(t == 0) * (iters as usize % threads);
                    let mut page = vec![0u8; PAGE_SIZE];
                    let cpu = cpu::thread_cpu_ns();
                    for j in 0..n {
                        op(mine[(start + j) % part], &mut page);
                    }
                    cpu::thread_cpu_ns() - cpu
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("benchmark thread"))
            .sum()
    })
}

fn miss_path(c: &mut Criterion<ThreadCpu>) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let storage = Arc::new(FileStorage::open(dir.path()).expect("open storage"));
    bench::data::ensure_relation(&storage, REL, BLOCKS, POOL_BUFFERS, false)
        .expect("build the relation");
    let rf = RelFork::main(REL);
    let order = order();
    let mut g = c.benchmark_group("miss_path");
    // Flat sampling: every sample runs the same number of iterations, about
    // half a second of CPU, many scheduler ticks (the CPU-time count moves
    // only at ticks and switches; criterion's default first samples are a
    // few milliseconds, which a loaded machine can make read as zero).
    g.throughput(Throughput::Elements(1))
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));

    let mapped = FileOptions {
        mapped_reads: true,
        // The pool below verifies checksums.
        checksummed_pages: true,
        ..FileOptions::default()
    };
    let mapped = Arc::new(FileStorage::open_options(dir.path(), mapped).expect("open storage"));
    for (name, checksums, storage, threads) in [
        ("pool_miss", true, &storage, 1),
        ("pool_miss_no_checksum", false, &storage, 1),
        ("pool_miss_mapped", true, &mapped, 1),
        ("pool_miss_2threads", true, &storage, 2),
        ("pool_miss_mapped_2threads", true, &mapped, 2),
    ] {
        let pool = BufferPool::new(
            PoolConfig::new(POOL_BUFFERS)
                .evictor(Evictor::Clock)
                .checksums(checksums),
            storage.clone(),
        )
        .expect("pool");
        let next = AtomicUsize::new(0);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                on_threads(&order, threads, iters, &next, |block, _| {
                    let pin = pool.read_buffer(rf, block, None).expect("read");
                    black_box(pin.id());
                })
            })
        });
        let s = pool.stats().totals();
        assert!(
            s.hits * 100 <= s.accesses,
            "{name}: the miss benchmark hit {} of {} accesses",
            s.hits,
            s.accesses
        );
        // Every block read back through this storage and checked whole.
        bench::data::verify_relation(storage, REL, BLOCKS, POOL_BUFFERS, false)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // The mapped row's reads went through a mapping of the relation's file.
    let path = std::fs::canonicalize(storage.path(rf)).expect("relation file");
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    assert!(
        maps.lines().any(|l| l.ends_with(path.to_str().unwrap())),
        "pool_miss_mapped: {} is not mapped",
        path.display()
    );

    // The storage alone, no pool: one page of the file read into a
    // thread's own buffer, by one thread and by two at once. The same 64
    // blocks over and over, so the copy is from the CPU's caches and what
    // is timed is mostly the storage's own work (finding the file).
    let hot: Vec<BlockNumber> = order.iter().copied().filter(|&b| b < 64).collect();
    for (name, storage, threads) in [
        ("storage_read_mapped", &mapped, 1),
        ("storage_read_mapped_2threads", &mapped, 2),
    ] {
        let next = AtomicUsize::new(0);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                on_threads(&hot, threads, iters, &next, |block, page| {
                    storage
                        .read(bufmgr::BufferTag::new(rf, block), page)
                        .expect("read");
                    black_box(&page[..]);
                })
            })
        });
    }
    bench::data::verify_relation(&mapped, REL, BLOCKS, POOL_BUFFERS, false)
        .unwrap_or_else(|e| panic!("storage_read_mapped: {e}"));

    let file = File::open(storage.path(rf)).expect("open relation file");
    let offset = |block: BlockNumber| u64::from(block) * PAGE_SIZE as u64;
    let mut page = vec![0u8; PAGE_SIZE];
    let mut i = 0usize;
    g.bench_function("raw_pread", |b| {
        b.iter(|| {
            file.read_exact_at(&mut page, offset(order[i % order.len()]))
                .expect("pread");
            black_box(&page);
            i += 1;
        })
    });
    let mut pages = vec![0u8; POOL_BUFFERS * PAGE_SIZE];
    let mut i = 0usize;
    g.bench_function("raw_pread_spread", |b| {
        b.iter(|| {
            let slot = i % POOL_BUFFERS * PAGE_SIZE;
            let dest = &mut pages[slot..slot + PAGE_SIZE];
            file.read_exact_at(dest, offset(order[i % order.len()]))
                .expect("pread");
            black_box(dest);
            i += 1;
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpu);
    targets = miss_path
}
criterion_main!(benches);
