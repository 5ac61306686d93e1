//! Index sizes and build rates: 1,000,000 `i64` keys inserted one by one in
//! ascending and in random order, and built with `build_sorted` from the
//! sorted random keys; with and without the WAL; pages per level.
//!
//! `cargo run --release -p btree --example btree_sizes`

use std::sync::Arc;
use std::time::Instant;

use btree::{AssumeLive, Index, IndexOptions, Key, KeyType};
use bufmgr::{BufferPool, FileStorage, PoolConfig, RelFork, RelId};
use heap::tuple::Tid;
use wal::{Wal, WalConfig};

const N: u64 = 1_000_000;

fn key(i: u64) -> i64 {
    (i.wrapping_mul(2_654_435_761) % 1_000_000_007) as i64
}

fn tid(i: u64) -> Tid {
    Tid::new(i as u32 / 100 + 1, (i % 100) as u16 + 1)
}

struct Fresh {
    _dir: tempfile::TempDir,
    pool: Arc<BufferPool>,
    wal: Option<Arc<Wal>>,
    index: Index,
}

fn fresh(with_wal: bool) -> Fresh {
    let dir = tempfile::tempdir().unwrap();
    let wal = with_wal.then(|| Arc::new(Wal::open(dir.path(), WalConfig::default()).unwrap()));
    let storage = Arc::new(FileStorage::open(dir.path()).unwrap());
    let config = PoolConfig::new(16384);
    let pool = Arc::new(match &wal {
        Some(w) => BufferPool::with_wal(config, storage, w.clone()).unwrap(),
        None => BufferPool::new(config, storage).unwrap(),
    });
    let index = Index::create(
        pool.clone(),
        wal.clone(),
        IndexOptions {
            name: "sizes".into(),
            rel: RelId(1),
            key_type: KeyType::I64,
            unique: false,
        },
    )
    .unwrap();
    Fresh {
        _dir: dir,
        pool,
        wal,
        index,
    }
}

fn report(what: &str, secs: f64, f: &Fresh) {
    let pages = f.pool.nblocks(RelFork::main(RelId(1))).unwrap();
    let levels = f.index.residency().unwrap().levels;
    let wal = f.wal.as_ref().map_or(String::new(), |w| {
        format!(", {} MiB of WAL", w.insert_lsn().as_u64() >> 20)
    });
    println!(
        "{what}: {:.0} entries/s, {pages} pages (per level {levels:?}){wal}",
        N as f64 / secs
    );
    assert!(f.index.verify(None).unwrap().is_empty());
}

fn main() {
    let mut sorted: Vec<(i64, Tid)> = (0..N).map(|i| (key(i), tid(i))).collect();
    sorted.sort_unstable();
    for with_wal in [false, true] {
        let w = if with_wal { "wal on" } else { "wal off" };
        for (name, ascending) in [("ascending", true), ("random", false)] {
            let f = fresh(with_wal);
            let t = Instant::now();
            for i in 0..N {
                let k = if ascending { i as i64 } else { key(i) };
                f.index.insert(&Key::I64(k), tid(i), &AssumeLive).unwrap();
            }
            let secs = t.elapsed().as_secs_f64();
            report(&format!("insert one by one, {name}, {w}"), secs, &f);
        }
        let f = fresh(with_wal);
        let t = Instant::now();
        let stats = f
            .index
            .build_sorted(sorted.iter().map(|&(k, t)| (Key::I64(k), t)))
            .unwrap();
        let secs = t.elapsed().as_secs_f64();
        report(
            &format!("build_sorted, the random keys sorted (sort not timed), {w}"),
            secs,
            &f,
        );
        println!("  {stats:?}");
        for &(k, t) in sorted.iter().step_by(1009) {
            assert!(f.index.lookup(&Key::I64(k)).unwrap().contains(&t));
        }
    }
}
