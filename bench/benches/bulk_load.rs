//! The engine's bulk load into an empty table with an index on a column
//! (`cargo bench -p bench --bench bulk_load`): the heap's bulk writer
//! through the bulk-write ring, one WAL image a page, and the index built
//! bottom-up after the last row, committed with the engine's default
//! synchronous commit (a real `fdatasync`). The same shape as
//! `compare-sqlite`'s bulk-load row, without SQLite beside it, so that
//! the load's own cost can be followed from change to change.
//!
//! ```text
//!   bulk_load/accounts_k   200,000 rows (three I64 columns and an 84-byte
//!                          filler), `k` drawn from as many values as rows
//!                          (about one entry in three repeats its
//!                          neighbour's key, as in compare-sqlite), one
//!                          non-unique index on `k`
//!   bulk_load/accounts_pk  the same rows with a unique index on `aid`
//!                          instead (every key distinct)
//! ```
//!
//! Each sample opens a fresh database in a temporary directory and creates
//! the table and index (not timed), times `bulk_load` from its call to its
//! committed return (wall time: the commit's wait on the disk is part of
//! the load), then checks the table's row count and a sample of index
//! lookups (not timed).

use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use engine::{Column, ColumnType, Database, Options, Value};

/// Rows a load writes: about 3,600 heap pages, more than the bulk-write
/// ring holds, so the ring recycles its pages during the load.
const ROWS: i64 = 200_000;

/// `k` of row `i`: uniform in `[0, ROWS)` from a fixed mix (so keys repeat
/// as often as draws with replacement do).
fn k_of(i: i64) -> i64 {
    let mut x = (i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    ((u128::from(x) * ROWS as u128) >> 64) as i64
}

fn rows() -> impl Iterator<Item = Vec<Value>> {
    (0..ROWS).map(|i| {
        vec![
            Value::I64(i + 1),
            Value::I64(k_of(i)),
            Value::I64(0),
            Value::Bytes(vec![b'x'; 84]),
        ]
    })
}

/// A fresh database with the table and `column`'s index, in `dir`.
fn fresh(dir: &std::path::Path, column: &str, unique: bool) -> Database {
    let db = Database::open(dir, Options::default().pool_mib(128)).expect("open the database");
    db.create_table(
        "accounts",
        vec![
            Column::new("aid", ColumnType::I64),
            Column::new("k", ColumnType::I64),
            Column::new("abalance", ColumnType::I64),
            Column::new("filler", ColumnType::Bytes),
        ],
    )
    .expect("create the table");
    db.create_index("accounts_ix", "accounts", column, unique)
        .expect("create the index");
    db
}

/// Every row is there, and a sample of keys finds its rows through the
/// index.
fn check(db: &Database, column: &str) {
    let mut per_k = std::collections::HashMap::new();
    for i in 0..ROWS {
        *per_k.entry(k_of(i)).or_insert(0usize) += 1;
    }
    let r = db.read().expect("a read transaction");
    let n = r
        .scan("accounts")
        .expect("scan")
        .collect::<engine::Result<Vec<_>>>()
        .expect("a row of the scan")
        .len();
    assert_eq!(n, ROWS as usize, "rows after the load");
    for i in (0..ROWS).step_by(997) {
        let (key, want) = if column == "aid" {
            (i + 1, 1)
        } else {
            let k = k_of(i);
            (k, per_k[&k])
        };
        let found = r
            .index_range(
                "accounts_ix",
                std::ops::Bound::Included(Value::I64(key)),
                std::ops::Bound::Included(Value::I64(key)),
            )
            .expect("index range")
            .collect::<engine::Result<Vec<_>>>()
            .expect("a row of the range")
            .len();
        assert_eq!(found, want, "{column} = {key}");
    }
}

fn bulk_load(c: &mut Criterion) {
    let mut g = c.benchmark_group("bulk_load");
    g.throughput(Throughput::Elements(ROWS as u64))
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));
    for (name, column, unique) in [("accounts_k", "k", false), ("accounts_pk", "aid", true)] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    let dir = tempfile::tempdir().expect("temporary directory");
                    let db = fresh(dir.path(), column, unique);
                    let t = Instant::now();
                    let p = db.bulk_load("accounts", rows(), |_| {}).expect("bulk load");
                    timed += t.elapsed();
                    assert_eq!(p.rows, ROWS as u64, "rows the load reported");
                    check(&db, column);
                    db.close().expect("close");
                }
                timed
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bulk_load);
criterion_main!(benches);
