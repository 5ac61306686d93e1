//! Rough B-tree rates on a warm pool: inserts per second (with and without
//! the WAL) and point lookups per second from 1 and 2 threads, through the
//! range scan, `lookup` and `lookup_each`.
//!
//! `cargo run --release -p btree --example btree_rates`

use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

use btree::{AssumeLive, Index, IndexOptions, Key, KeyType};
use bufmgr::{BufferPool, FileStorage, PoolConfig, RelId};
use heap::tuple::Tid;
use wal::{Wal, WalConfig};

const N: u64 = 300_000;

fn key(i: u64) -> i64 {
    (i.wrapping_mul(2_654_435_761) % 1_000_000_007) as i64
}

fn main() {
    for with_wal in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let wal = with_wal.then(|| Arc::new(Wal::open(dir.path(), WalConfig::default()).unwrap()));
        let storage = Arc::new(FileStorage::open(dir.path()).unwrap());
        let config = PoolConfig::new(8192);
        let pool = Arc::new(match &wal {
            Some(w) => BufferPool::with_wal(config, storage, w.clone()).unwrap(),
            None => BufferPool::new(config, storage).unwrap(),
        });
        let index = Arc::new(
            Index::create(
                pool.clone(),
                wal.clone(),
                IndexOptions {
                    name: "rates".into(),
                    rel: RelId(1),
                    key_type: KeyType::I64,
                    unique: false,
                },
            )
            .unwrap(),
        );
        let t = Instant::now();
        for i in 0..N {
            index
                .insert(
                    &Key::I64(key(i)),
                    Tid::new(i as u32 / 100 + 1, (i % 100) as u16 + 1),
                    &AssumeLive,
                )
                .unwrap();
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "insert, wal {}: {:.0} inserts/s ({} pages)",
            if with_wal { "on " } else { "off" },
            N as f64 / secs,
            pool.nblocks(bufmgr::RelFork::main(RelId(1))).unwrap()
        );
        if with_wal {
            continue;
        }
        // The same lookups three ways: through the general range scan (how
        // `lookup` worked before `lookup_each`), `lookup` (a Vec), and
        // `lookup_each` (no allocation).
        for how in ["scan", "lookup", "lookup_each"] {
            for threads in [1u64, 2] {
                let t = Instant::now();
                let per = N / 2;
                let hs: Vec<_> = (0..threads)
                    .map(|th| {
                        let index = index.clone();
                        std::thread::spawn(move || {
                            for i in 0..per {
                                let k = Key::I64(key((i * 7 + th * 13) % N));
                                let found = match how {
                                    "scan" => index
                                        .scan(Bound::Included(&k), Bound::Included(&k))
                                        .unwrap()
                                        .count(),
                                    "lookup" => index.lookup(&k).unwrap().len(),
                                    _ => {
                                        let mut n = 0;
                                        index
                                            .lookup_each(&k, |_| {
                                                n += 1;
                                                true
                                            })
                                            .unwrap();
                                        n
                                    }
                                };
                                assert!(found > 0);
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                let secs = t.elapsed().as_secs_f64();
                println!(
                    "{how}, {threads} thread(s), warm pool: {:.0} lookups/s",
                    (per * threads) as f64 / secs
                );
            }
        }
        assert!(index.verify(None).unwrap().is_empty());
    }
}
