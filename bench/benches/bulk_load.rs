//! The engine's bulk load into an empty table with an index on a column
//! (`cargo bench -p bench --bench bulk_load`): the heap's bulk writer
//! through the bulk-write ring, one WAL image a page, and the index built
//! bottom-up after the last row, committed with the engine's default
//! synchronous commit (a real `fdatasync`). The same shape as
//! `compare-sqlite`'s bulk-load row, without SQLite beside it, so that
//! the load's own cost can be followed from change to change.
//!
//! ```text
//!   bulk_load/accounts_k   200,000 of compare-sqlite's accounts rows
//!                          (`Accounts::generate`: three I64 columns and an
//!                          84-byte filler, `k` drawn from as many values as
//!                          rows, so about one entry in three repeats its
//!                          neighbour's key), one non-unique index on `k`
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

use bench::scenarios::versus::compare_sqlite::{Accounts, TABLE};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use engine::{Database, Options, Value};

/// Rows a load writes: about 3,600 heap pages, more than the bulk-write
/// ring holds, so the ring recycles its pages during the load.
const ROWS: u64 = 200_000;

/// A fresh database with the accounts table and `column`'s index, in `dir`.
fn fresh(dir: &std::path::Path, column: &str, unique: bool) -> Database {
    let db = Database::open(dir, Options::default().pool_mib(128)).expect("open the database");
    db.create_table(TABLE, Accounts::columns())
        .expect("create the table");
    db.create_index("accounts_ix", TABLE, column, unique)
        .expect("create the index");
    db
}

/// Every row is there, and a sample of keys finds its rows through the
/// index.
fn check(db: &Database, data: &Accounts, column: &str) {
    let mut per_k = std::collections::HashMap::new();
    for &k in &data.k {
        *per_k.entry(k).or_insert(0usize) += 1;
    }
    let r = db.read().expect("a read transaction");
    let n = r
        .scan(TABLE)
        .expect("scan")
        .collect::<engine::Result<Vec<_>>>()
        .expect("a row of the scan")
        .len();
    assert_eq!(n as u64, data.rows(), "rows after the load");
    for (i, &k) in data.k.iter().enumerate().step_by(997) {
        let (key, want) = if column == "aid" {
            (i as i64 + 1, 1)
        } else {
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
    let data = Accounts::generate(ROWS);
    g.throughput(Throughput::Elements(ROWS))
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
                    let p = db
                        .bulk_load(TABLE, data.engine_rows(), |_| {})
                        .expect("bulk load");
                    timed += t.elapsed();
                    assert_eq!(p.rows, ROWS, "rows the load reported");
                    check(&db, &data, column);
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
