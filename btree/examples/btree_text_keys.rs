//! Size and lookup rate of indexes of 1,000,000 text keys that share a
//! long prefix (customer numbers, URLs): pages per level and height after
//! random inserts (a shuffled order) and after `build_sorted`, and point
//! lookups per second (every key once, in a random order, three rounds;
//! the best round).
//!
//! `cargo run --release -p btree --example btree_text_keys`
//!
//! Optional arguments: the number of keys (default 1,000,000).

use std::sync::Arc;
use std::time::Instant;

use btree::{AssumeLive, Index, IndexOptions, Key, KeyType};
use bufmgr::{BufferPool, FileStorage, PoolConfig, RelFork, RelId};
use heap::tuple::Tid;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;

/// 0..n in a random order (a fixed seed: every run the same). A truly
/// random order, not a multiplicative spread: keys spread evenly make
/// every page split at about the same moment, so page counts come in
/// powers of two whatever the separators' size.
fn shuffled(n: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    v.shuffle(&mut SmallRng::seed_from_u64(seed));
    v
}

fn customer(x: u64) -> Vec<u8> {
    format!("customer-{x:012}-invoices/2026").into_bytes()
}

fn url(x: u64) -> Vec<u8> {
    format!("https://shop.example.com/catalog/products/{x:010}/reviews?page=1").into_bytes()
}

fn tid(i: u64) -> Tid {
    Tid::new(i as u32 / 100 + 1, (i % 100) as u16 + 1)
}

struct Fresh {
    _dir: tempfile::TempDir,
    pool: Arc<BufferPool>,
    index: Index,
}

fn fresh() -> Fresh {
    let dir = tempfile::tempdir().unwrap();
    let storage = Arc::new(FileStorage::open(dir.path()).unwrap());
    let pool = Arc::new(BufferPool::new(PoolConfig::new(65536), storage).unwrap());
    let index = Index::create(
        pool.clone(),
        None,
        IndexOptions {
            name: "text".into(),
            rel: RelId(1),
            key_type: KeyType::Bytes,
            unique: false,
        },
    )
    .unwrap();
    Fresh {
        _dir: dir,
        pool,
        index,
    }
}

fn report(what: &str, f: &Fresh, keys: &[Vec<u8>], order: &[usize]) {
    let pages = f.pool.nblocks(RelFork::main(RelId(1))).unwrap();
    let levels = f.index.residency().unwrap().levels;
    let leaves = levels.get(&0).copied().unwrap_or(0);
    let internal: usize = levels.iter().filter(|(l, _)| **l > 0).map(|(_, n)| n).sum();
    assert!(f.index.verify(None).unwrap().is_empty());
    let mut best = 0.0f64;
    for _ in 0..3 {
        let t = Instant::now();
        let mut found = 0u64;
        for &i in order {
            f.index
                .lookup_encoded_each(&keys[i], |_| {
                    found += 1;
                    true
                })
                .unwrap();
        }
        let rate = order.len() as f64 / t.elapsed().as_secs_f64();
        assert_eq!(found, order.len() as u64);
        best = best.max(rate);
    }
    println!(
        "{what}: {pages} pages ({:.1} MiB), height {}, {leaves} leaves, {internal} internal (per level {levels:?}), {:.2} M lookups/s",
        pages as f64 * 8192.0 / 1048576.0,
        levels.len(),
        best / 1e6
    );
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(1_000_000, |s| s.parse().expect("a number of keys"));
    let order: Vec<usize> = shuffled(n, 2).into_iter().map(|i| i as usize).collect();
    let inserts = shuffled(n, 1);
    for (name, make) in [
        (
            "customer-000000123456-invoices/2026",
            customer as fn(u64) -> Vec<u8>,
        ),
        (
            "https://shop.example.com/catalog/products/0000123456/reviews?page=1",
            url,
        ),
    ] {
        let keys: Vec<Vec<u8>> = (0..n).map(make).collect();
        let f = fresh();
        for &x in &inserts {
            f.index
                .insert(&Key::Bytes(keys[x as usize].clone()), tid(x), &AssumeLive)
                .unwrap();
        }
        report(&format!("{name}: random inserts"), &f, &keys, &order);
        let f = fresh();
        f.index
            .build_sorted((0..n).map(|x| (Key::Bytes(keys[x as usize].clone()), tid(x))))
            .unwrap();
        report(&format!("{name}: build_sorted"), &f, &keys, &order);
    }
}
