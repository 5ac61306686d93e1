//! Autovacuum (`engine::autovacuum`):
//! - a 10-row table updated 5,000 times stays a few pages (heap and index)
//!   with autovacuum on, and grows past them with it off;
//! - concurrent updaters with the worker vacuuming under them lose no update
//!   (per-row counters add up to the commits, balances sum to zero) and
//!   leave the index clean;
//! - close with the worker busy returns promptly, and so does drop;
//! - a background vacuum that fails (an injected read failure) is reported
//!   in `autovacuum_stats` with the table's name, and the worker goes on
//!   (a later vacuum succeeds once the fault is gone).
//!
//! (Crash safety with the worker running is the crash loop's: `engine::soak`
//! runs with autovacuum on and a low threshold.)

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bufmgr::{FaultyStorage, RelFork};
use common::{small_options, watchdog};
use engine::{Column, ColumnType, CommitMode, Database, Options, Value};
use parking_lot::Mutex;

const ROWS: i64 = 10;
/// Rows behind the hot ones in the fault test (about 10 pages).
const FILLER: i64 = 2_000;

fn columns() -> Vec<Column> {
    vec![
        Column::new("id", ColumnType::I64),
        Column::new("balance", ColumnType::I64),
        Column::new("updates", ColumnType::I64),
    ]
}

/// Table `t (id, balance, updates)` with `ROWS` rows and a unique index.
fn create(db: &Database) {
    db.create_table("t", columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    let txn = db.begin().unwrap();
    for id in 0..ROWS {
        txn.insert("t", vec![Value::I64(id), Value::I64(0), Value::I64(0)])
            .unwrap();
    }
    txn.commit().unwrap();
}

fn pages(db: &Database, name: &str) -> u32 {
    let rel = db
        .tables()
        .into_iter()
        .map(|t| (t.name, t.rel))
        .chain(db.indexes().into_iter().map(|i| (i.name, i.rel)))
        .find(|(n, _)| n == name)
        .unwrap()
        .1;
    db.pool().nblocks(RelFork::main(rel)).unwrap()
}

fn options(autovacuum: bool) -> Options {
    small_options()
        .pool_buffers(256)
        .commit_mode(CommitMode::Asynchronous)
        .autovacuum(autovacuum)
        .autovacuum_naptime(Duration::from_millis(10))
}

/// Add `delta` to row `id`'s balance and count the update; `Ok(false)` on a
/// conflict (rolled back).
fn bump(db: &Database, id: i64, delta: i64) -> engine::Result<bool> {
    let txn = db.begin()?;
    let (_, row) = txn
        .get_by_key("t", "id", &Value::I64(id))?
        .unwrap_or_else(|| panic!("row {id} not found by key"));
    let (Value::I64(b), Value::I64(n)) = (&row[1], &row[2]) else {
        panic!("row {id}: {row:?}");
    };
    let new = vec![Value::I64(id), Value::I64(b + delta), Value::I64(n + 1)];
    match txn.update_by_key("t", "id", &Value::I64(id), new) {
        Ok(Some(_)) => {}
        Ok(None) => panic!("row {id} vanished inside its transaction"),
        Err(e) if e.is_conflict() => return Ok(false),
        Err(e) => return Err(e),
    }
    txn.commit()?;
    Ok(true)
}

/// (sum of balances, sum of update counters, rows), and every row by key.
fn totals(db: &Database) -> (i64, i64, usize) {
    let txn = db.read().unwrap();
    let rows: Vec<_> = txn.scan("t").unwrap().map(|r| r.unwrap().1).collect();
    for id in 0..ROWS {
        assert!(
            txn.get_by_key("t", "id", &Value::I64(id))
                .unwrap()
                .is_some(),
            "row {id} not found by key"
        );
    }
    let num = |v: &Value| match v {
        Value::I64(n) => *n,
        other => panic!("{other:?}"),
    };
    let balance = rows.iter().map(|r| num(&r[1])).sum();
    let updates = rows.iter().map(|r| num(&r[2])).sum();
    (balance, updates, rows.len())
}

/// Wait (at most `limit`) until `ok` holds.
fn wait_until(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    ok()
}

/// 5,000 single-row updates; (heap pages, index pages, vacuums) at the end.
fn update_loop(autovacuum: bool) -> (u32, u32, u64) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options(autovacuum)).unwrap();
    create(&db);
    for i in 0..5_000 {
        assert!(bump(&db, i % ROWS, 1).unwrap(), "no concurrent writer");
    }
    assert_eq!(totals(&db), (5_000, 5_000, ROWS as usize));
    assert!(db.verify_indexes("t").unwrap().is_empty());
    let out = (
        pages(&db, "t"),
        pages(&db, "t_id"),
        db.autovacuum_stats().vacuums,
    );
    db.close().unwrap();
    out
}

#[test]
fn a_small_updated_table_stays_small_with_autovacuum_and_grows_without() {
    watchdog(Duration::from_secs(120), || {
        let (heap_on, index_on, vacuums_on) = update_loop(true);
        let (heap_off, index_off, vacuums_off) = update_loop(false);
        eprintln!(
            "5,000 updates of 10 rows: autovacuum on: heap {heap_on} pages, index {index_on} pages, \
             {vacuums_on} vacuums; off: heap {heap_off}, index {index_off}"
        );
        assert_eq!(vacuums_off, 0);
        assert!(vacuums_on > 0, "the worker never vacuumed");
        // Without vacuum the 5,000 versions take ~37 heap pages; with it
        // only what piles up between two vacuums (2 pages measured; the
        // bound leaves room for a worker starved on a loaded machine).
        assert!(heap_on <= 8, "heap grew to {heap_on} pages with autovacuum");
        assert!(
            index_on <= 8,
            "index grew to {index_on} pages with autovacuum"
        );
        assert!(
            heap_off >= 20,
            "heap only {heap_off} pages without autovacuum"
        );
        assert!(
            index_off > index_on,
            "index {index_off} pages without vs {index_on} with"
        );
    });
}

#[test]
fn concurrent_updaters_lose_nothing_while_autovacuum_runs() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), options(true).autovacuum_thresholds(20, 0.0)).unwrap();
        create(&db);
        let committed = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let (db, committed) = (db.clone(), committed.clone());
                std::thread::spawn(move || {
                    // Transfers: -d from one row, +d to another, each its own
                    // transaction retried until it commits, so the balances
                    // always sum to zero once both halves are in.
                    let mut x = t * 7 + 1;
                    for _ in 0..400 {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let (a, b) = ((x >> 33) as i64 % ROWS, (x >> 13) as i64 % ROWS);
                        let d = (x % 100) as i64 + 1;
                        for (id, delta) in [(a, -d), (b, d)] {
                            while !bump(&db, id, delta).unwrap() {}
                            committed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let n = committed.load(Ordering::Relaxed) as i64;
        assert_eq!(n, 4 * 400 * 2);
        assert_eq!(totals(&db), (0, n, ROWS as usize));
        let v = db.verify_indexes("t").unwrap();
        assert!(v.is_empty(), "{v:?}");
        let s = db.autovacuum_stats();
        assert!(s.vacuums > 0 && s.tuples_removed > 0, "{s:?}");
        assert_eq!(s.errors, 0, "{s:?}");
        // The table kept its size near what one round of garbage needs.
        assert!(pages(&db, "t") <= 16, "heap {} pages", pages(&db, "t"));
        db.close().unwrap();
        // And everything is there after a reopen.
        let db = Database::open(dir.path(), options(false)).unwrap();
        assert_eq!(totals(&db), (0, n, ROWS as usize));
        assert!(db.verify_indexes("t").unwrap().is_empty());
        db.close().unwrap();
    });
}

#[test]
fn close_and_drop_with_autovacuum_busy_return_promptly() {
    watchdog(Duration::from_secs(60), || {
        for close in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let db = Database::open(
                dir.path(),
                options(true)
                    .autovacuum_naptime(Duration::from_millis(1))
                    .autovacuum_thresholds(0, 0.0),
            )
            .unwrap();
            create(&db);
            for i in 0..500 {
                bump(&db, i % ROWS, 1).unwrap();
            }
            assert!(
                wait_until(Duration::from_secs(10), || db.autovacuum_stats().vacuums
                    > 0),
                "the worker never vacuumed"
            );
            let started = Instant::now();
            if close {
                db.close().unwrap();
            } else {
                drop(db);
            }
            let took = started.elapsed();
            // The worker finishes at most the vacuum of one 10-row table.
            assert!(took < Duration::from_secs(5), "close took {took:?}");
            // The directory is free again: the worker is gone.
            let db = Database::open(dir.path(), options(false)).unwrap();
            assert_eq!(totals(&db), (500, 500, ROWS as usize));
            db.close().unwrap();
        }
    });
}

#[test]
fn a_failed_background_vacuum_is_reported_not_lost() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let slot: Arc<Mutex<Option<Arc<FaultyStorage>>>> = Arc::new(Mutex::new(None));
        let s2 = slot.clone();
        let db = Database::open(
            dir.path(),
            options(true)
                .autovacuum_thresholds(100, 0.0)
                .wrap_storage(move |files| {
                    let f = Arc::new(FaultyStorage::new(files));
                    *s2.lock() = Some(f.clone());
                    f
                }),
        )
        .unwrap();
        let faulty = slot.lock().clone().unwrap();
        create(&db);
        // Filler rows after the hot ones: pages that only a vacuum reads.
        let txn = db.begin().unwrap();
        for id in ROWS..ROWS + FILLER {
            txn.insert("t", vec![Value::I64(id), Value::I64(0), Value::I64(0)])
                .unwrap();
        }
        txn.commit().unwrap();
        let t_rel = db.table("t").unwrap().rel;
        assert!(pages(&db, "t") >= 5, "{} pages", pages(&db, "t"));
        assert_eq!(db.autovacuum_stats().errors, 0);
        db.checkpoint().unwrap();
        db.pool().evict_relation(RelFork::main(t_rel)).unwrap();
        // Bring `t`'s hot pages back, then fail every read: the updates
        // below run on resident pages, the worker's vacuum of `t` must read
        // its evicted pages.
        for id in 0..ROWS {
            assert!(bump(&db, id, 0).unwrap());
        }
        faulty.fail_reads_after(0);
        for i in 0..200 {
            assert!(bump(&db, i % ROWS, 1).unwrap());
        }
        assert!(
            wait_until(Duration::from_secs(20), || db.autovacuum_stats().errors > 0),
            "no error reported: {:?}",
            db.autovacuum_stats()
        );
        let s = db.autovacuum_stats();
        let e = s.last_error.clone().unwrap();
        eprintln!("reported: {e}");
        assert_eq!(e.table, "t");
        assert!(e.message.contains("injected read failure"), "{e}");
        let row = s.tables.iter().find(|r| r.table == "t").unwrap();
        assert!(row.last_error.is_some(), "{row:?}");
        // The worker goes on: with the fault gone, the next round vacuums.
        faulty.clear();
        let before = s.vacuums;
        assert!(
            wait_until(Duration::from_secs(20), || db.autovacuum_stats().vacuums
                > before),
            "no vacuum after the fault cleared: {:?}",
            db.autovacuum_stats()
        );
        assert!(db.verify_indexes("t").unwrap().is_empty());
        assert_eq!(totals(&db), (200, 210, (ROWS + FILLER) as usize));
        db.close().unwrap();
    });
}
