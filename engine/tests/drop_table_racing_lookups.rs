//! DROP TABLE while other threads look rows up through the table's index
//! (by handle and by name, one and 100 lookups per transaction): every
//! lookup either returns exactly the rows the table holds for its key, or
//! fails with `UnknownTable` / `UnknownIndex`; a lookup begun after the
//! drop returned always fails through the old handle; nothing panics, no
//! other error appears (a read of a removed file would be an I/O error),
//! and the drop does not wait forever for the readers.

mod common;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, EngineError, Index, Value};

const ROWS: i64 = 2000;
/// Rows per key: key k is held by ids k, k + KEYS, k + 2 KEYS, ...
const KEYS: i64 = 500;
const ROUNDS: i64 = 4;

/// A row as looked up: (id, k, gen).
type Found = (i64, i64, i64);

/// Create `t(id, k, gen)` with its index `t_k` on k, every row of
/// generation `gen`.
fn create(db: &Database, generation: i64) {
    db.create_table(
        "t",
        vec![
            Column::new("id", ColumnType::I64),
            Column::new("k", ColumnType::I64),
            Column::new("gen", ColumnType::I64),
        ],
    )
    .unwrap();
    db.create_index("t_k", "t", "k", false).unwrap();
    let rows = (0..ROWS).map(|id| {
        vec![
            Value::I64(id),
            Value::I64(id % KEYS),
            Value::I64(generation),
        ]
    });
    db.bulk_load("t", rows, |_| {}).unwrap();
}

/// Whether `e` is the error a lookup of a dropped table may give.
fn gone(e: &EngineError) -> bool {
    matches!(
        e,
        EngineError::UnknownTable { .. } | EngineError::UnknownIndex { .. }
    )
}

/// Check one successful lookup of `key`: its rows are exactly the ids that
/// hold `key`, all of one generation (`generation` when given).
fn check_rows(key: i64, rows: &mut [Found], generation: Option<i64>) -> Result<(), String> {
    rows.sort_unstable();
    let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
    let want: Vec<i64> = (0..ROWS / KEYS).map(|i| key + i * KEYS).collect();
    if ids != want {
        return Err(format!("key {key}: ids {ids:?}, want {want:?}"));
    }
    if let Some(r) = rows.iter().find(|r| r.1 != key) {
        return Err(format!("key {key}: a row with k = {}", r.1));
    }
    let first = rows[0].2;
    if rows.iter().any(|r| r.2 != first) || generation.is_some_and(|g| g != first) {
        return Err(format!(
            "key {key}: generations {:?}, want {generation:?}",
            rows.iter().map(|r| r.2).collect::<Vec<_>>()
        ));
    }
    Ok(())
}

/// Look `key` up through `handle` (or by name) in `txn`; `Ok(None)` when
/// the table or index is gone.
fn lookup(
    txn: &engine::Transaction,
    handle: Option<&Index>,
    key: i64,
) -> Result<Option<Vec<Found>>, String> {
    let mut rows = Vec::new();
    let each = |row: engine::RowRef<'_>| {
        rows.push((row.i64("id")?, row.i64("k")?, row.i64("gen")?));
        Ok(())
    };
    let r = match handle {
        Some(h) => txn.lookup_each(h, &Value::I64(key), each),
        None => txn.lookup_each("t_k", &Value::I64(key), each),
    };
    match r {
        Ok(n) if n == rows.len() => Ok(Some(rows)),
        Ok(n) => Err(format!(
            "key {key}: lookup_each counted {n}, handed {}",
            rows.len()
        )),
        Err(e) if gone(&e) => Ok(None),
        Err(e) => Err(format!("key {key}: unexpected error {e}")),
    }
}

/// One reader thread of round `generation`: transactions of `per_txn`
/// lookups, alternately through `handle` and by name, until it has done a
/// handle lookup that began after the drop returned (`dropped`). Returns
/// (lookups that found rows, lookups that found the table gone).
fn reader(
    db: &Database,
    handle: &Index,
    generation: i64,
    per_txn: usize,
    dropped: &AtomicBool,
    seed: u64,
) -> Result<(u64, u64), String> {
    let (mut found, mut missing) = (0u64, 0u64);
    let mut x = seed | 1;
    let mut handle_gone = false;
    let mut count = 0u64;
    loop {
        let txn = db.begin().map_err(|e| format!("begin: {e}"))?;
        for _ in 0..per_txn {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = (x % KEYS as u64) as i64;
            let by_handle = count.is_multiple_of(2);
            count += 1;
            let after_drop = dropped.load(Ordering::SeqCst);
            let got = lookup(&txn, by_handle.then_some(handle), key)?;
            match got {
                Some(mut rows) => {
                    if by_handle && (after_drop || handle_gone) {
                        return Err(format!(
                            "key {key}: a lookup through a dropped table's handle found {rows:?}"
                        ));
                    }
                    check_rows(key, &mut rows, by_handle.then_some(generation))?;
                    found += 1;
                }
                None => {
                    missing += 1;
                    if by_handle {
                        handle_gone = true;
                        if after_drop {
                            txn.commit().map_err(|e| format!("commit: {e}"))?;
                            return Ok((found, missing));
                        }
                    }
                }
            }
        }
        txn.commit().map_err(|e| format!("commit: {e}"))?;
    }
}

#[test]
fn lookups_racing_drop_table_see_the_whole_table_or_a_clear_error() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options().pool_buffers(256)).unwrap();
        let failures = Mutex::new(Vec::new());
        let (found, missing) = (AtomicU64::new(0), AtomicU64::new(0));
        for generation in 0..ROUNDS {
            create(&db, generation);
            let handle = db.index_handle("t_k").unwrap();
            let dropped = AtomicBool::new(false);
            let started = AtomicU64::new(0);
            std::thread::scope(|s| {
                for (n, per_txn) in [1usize, 100, 1, 100].into_iter().enumerate() {
                    let (db, handle, dropped, failures) = (&db, &handle, &dropped, &failures);
                    let (found, missing, started) = (&found, &missing, &started);
                    s.spawn(move || {
                        started.fetch_add(1, Ordering::SeqCst);
                        let seed = (generation as u64) << 8 | n as u64;
                        match reader(db, handle, generation, per_txn, dropped, seed) {
                            Ok((f, m)) => {
                                found.fetch_add(f, Ordering::SeqCst);
                                missing.fetch_add(m, Ordering::SeqCst);
                            }
                            Err(e) => failures.lock().unwrap().push(e),
                        }
                    });
                }
                while started.load(Ordering::SeqCst) < 4 {
                    std::thread::yield_now();
                }
                std::thread::sleep(Duration::from_millis(20));
                db.drop_table("t").unwrap();
                dropped.store(true, Ordering::SeqCst);
            });
        }
        let failures = failures.into_inner().unwrap();
        assert!(failures.is_empty(), "wrong lookups: {failures:?}");
        // The race was run: lookups found rows before each drop, and every
        // reader met the dropped table.
        assert!(found.load(Ordering::SeqCst) > 0, "no lookup found rows");
        assert!(
            missing.load(Ordering::SeqCst) >= 4 * ROUNDS as u64,
            "a reader never met the dropped table"
        );
        db.close().unwrap();
    });
}
