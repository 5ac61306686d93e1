//! The owned scan iterator beside the borrowed scan, over the same table
//! with the same work per row (count the rows, sum one `I64` column): what
//! `for r in txn.scan(t)?` costs over `txn.scan_each(t, |row| ..)`. Both
//! read a warm table (every page in the pool), so the figure is the rows'
//! cost, not I/O.
//!
//! Timed in the benchmarking thread's CPU time (the kernel's count of the
//! time it ran, `/proc/thread-self/schedstat`), not wall time: on a machine
//! shared with other work a descheduled thread would otherwise count the
//! others' time as its own. The count moves at context switches and timer
//! ticks, so a sample must last many ticks: ten samples of about half a
//! second each.
//!
//! ```text
//!   engine_scan/borrowed       scan_each: each row a RowRef on the locked page
//!   engine_scan/owned          for r in txn.scan(t)?: each row an OwnedRow
//!   engine_scan/owned_project  the owned scan projected to the summed column
//!   engine_scan/owned_matching the owned scan with a filter keeping every row
//! ```

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use engine::{Column, ColumnType, Database, Options, Table, Value};

#[path = "common/cpu.rs"]
mod cpu;
use cpu::ThreadCpu;

/// Rows of the table: about 3,600 pages, all in the pool (256 MiB: a
/// quarter of it is more than the table, so the scan reads through no ring).
const ROWS: i64 = 200_000;

/// A table shaped like `compare-sqlite`'s accounts (three `I64` columns and
/// an 84-byte filler), loaded and read once so every page is in the pool.
fn accounts(dir: &std::path::Path) -> (Database, Table) {
    let db = Database::open(dir, Options::default().pool_mib(256)).expect("open the database");
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
    let rows = (0..ROWS).map(|i| {
        vec![
            Value::I64(i),
            Value::I64(i * 7 % 1000),
            Value::I64(0),
            Value::Bytes(vec![b' '; 84]),
        ]
    });
    db.bulk_load("accounts", rows, |_| {})
        .expect("load the rows");
    let table = db.table_handle("accounts").expect("the table's handle");
    (db, table)
}

/// The count and the sum a scan must return.
fn expected() -> (u64, i64) {
    (ROWS as u64, (0..ROWS).map(|i| i * 7 % 1000).sum())
}

fn engine_scan(c: &mut Criterion<ThreadCpu>) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let (db, table) = accounts(dir.path());
    let k = table.column("k").expect("column k");
    let mut g = c.benchmark_group("engine_scan");
    g.throughput(Throughput::Elements(ROWS as u64));
    g.sample_size(10);
    g.measurement_time(std::time::Duration::from_secs(5));

    let borrowed = || {
        let txn = db.begin().expect("begin");
        let (mut n, mut sum) = (0u64, 0i64);
        txn.scan_each(&table, |row| {
            n += 1;
            sum += row.i64(k)?;
            Ok(())
        })
        .expect("scan");
        txn.commit().expect("commit");
        (n, sum)
    };
    let owned = |project: bool, matching: bool| {
        let txn = db.begin().expect("begin");
        let mut it = txn.scan(&table).expect("scan");
        if project {
            it = it.project(&[k]);
        }
        if matching {
            it = it.matching(move |row| Ok(row.i64(k)? >= 0));
        }
        let (mut n, mut sum) = (0u64, 0i64);
        for r in it {
            let (_, row) = r.expect("a row");
            n += 1;
            sum += row.i64(k).expect("k");
        }
        txn.commit().expect("commit");
        (n, sum)
    };
    // Every variant returns the right answer before it is timed.
    assert_eq!(borrowed(), expected());
    for (p, m) in [(false, false), (true, false), (false, true)] {
        assert_eq!(owned(p, m), expected(), "project {p}, matching {m}");
    }

    g.bench_function("borrowed", |b| b.iter(|| black_box(borrowed())));
    g.bench_function("owned", |b| b.iter(|| black_box(owned(false, false))));
    g.bench_function("owned_project", |b| {
        b.iter(|| black_box(owned(true, false)))
    });
    g.bench_function("owned_matching", |b| {
        b.iter(|| black_box(owned(false, true)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpu);
    targets = engine_scan
}
criterion_main!(benches);
