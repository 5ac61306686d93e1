//! An update that keeps a row's unique key, racing with
//! another transaction that updates the same row and commits, must fail as
//! a retryable conflict (`is_conflict()`), never as a duplicate key.
//!
//! The race it guards: `Transaction::update` checks that the row is still
//! updatable, then pre-checks the unique indexes for the new key. If the
//! other transaction updates the row and commits between the two, the
//! pre-check finds the row's *new* version live under the same key. Before
//! the fix that was reported as `UniqueViolation` ("key already exists"),
//! which an application following "roll back and retry on conflict" treats
//! as a hard error. The pre-check now re-checks the row being replaced when
//! it finds a live or running holder of the key: if that row was changed
//! concurrently, the answer is the write conflict.
//!
//! There is no hook to stop a thread between the two checks, so this is a
//! stress test: a few hot rows, more threads than cores (so threads are
//! preempted inside the window), every update keeping the key. It runs for
//! a bounded time and stops at the first wrong error; on the code before
//! the fix it failed within a few seconds. It also checks that the race was
//! actually exercised (conflicts happened) and that the rows' counters add
//! up to exactly the committed updates (no lost update).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, EngineError, Value};

/// Rows everyone updates: few enough that almost every update races.
const HOT_ROWS: i64 = 2;
/// More threads than the machine's cores, so some are preempted between
/// the updatable check and the unique pre-check.
const THREADS: usize = 8;
/// How long to hammer; override with `CONFLICT_STRESS_SECS`.
const DEFAULT_SECS: u64 = 8;

#[test]
fn an_update_racing_an_update_of_the_same_row_is_a_write_conflict() {
    let secs = std::env::var("CONFLICT_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SECS);
    watchdog(Duration::from_secs(secs + 60), move || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(
            dir.path(),
            small_options()
                .pool_buffers(256)
                .autovacuum(true)
                .autovacuum_naptime(std::time::Duration::from_millis(10)),
        )
        .unwrap();
        db.create_table(
            "t",
            vec![
                Column::new("id", ColumnType::I64),
                Column::new("n", ColumnType::I64),
            ],
        )
        .unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        {
            let t = db.begin().unwrap();
            for k in 0..HOT_ROWS {
                t.insert("t", vec![Value::I64(k), Value::I64(0)]).unwrap();
            }
            t.commit().unwrap();
        }
        let stop = AtomicBool::new(false);
        let committed = AtomicU64::new(0);
        let conflicts = AtomicU64::new(0);
        let wrong: parking_lot::Mutex<Option<String>> = parking_lot::Mutex::new(None);
        let deadline = Instant::now() + Duration::from_secs(secs);
        std::thread::scope(|s| {
            for th in 0..THREADS {
                let (db, stop, committed, conflicts, wrong) =
                    (&db, &stop, &committed, &conflicts, &wrong);
                s.spawn(move || {
                    let mut i = th as i64;
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        i += 1;
                        let k = i % HOT_ROWS;
                        let t = db.begin().unwrap();
                        let result = t.get_by_key("t", "id", &Value::I64(k)).and_then(|found| {
                            let (id, row) = found.expect("every hot row is always visible");
                            let n = row[1].as_i64().unwrap();
                            t.update("t", id, vec![Value::I64(k), Value::I64(n + 1)])
                        });
                        match result {
                            Ok(_) => {
                                t.commit().unwrap();
                                committed.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) if e.is_conflict() => {
                                conflicts.fetch_add(1, Ordering::Relaxed);
                                t.rollback().unwrap();
                            }
                            Err(e) => {
                                let kind = match e {
                                    EngineError::UniqueViolation { .. } => "UniqueViolation",
                                    _ => "another error",
                                };
                                *wrong.lock() = Some(format!(
                                    "update of row with key {k} (unchanged) failed with \
                                     {kind}, not a conflict: {e}"
                                ));
                                stop.store(true, Ordering::Relaxed);
                                t.rollback().unwrap();
                            }
                        }
                    }
                });
            }
        });
        if let Some(msg) = wrong.into_inner() {
            panic!("{msg}");
        }
        let committed = committed.into_inner();
        let conflicts = conflicts.into_inner();
        assert!(
            conflicts > 0,
            "no update conflicted in {secs} s ({committed} committed): the race was not exercised"
        );
        // Every committed update added one to its row; nothing was lost.
        let t = db.begin().unwrap();
        let mut sum = 0;
        for k in 0..HOT_ROWS {
            let (_, row) = t.get_by_key("t", "id", &Value::I64(k)).unwrap().unwrap();
            sum += row[1].as_i64().unwrap() as u64;
        }
        t.commit().unwrap();
        assert_eq!(sum, committed, "sum of counters vs committed updates");
        assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
        db.close().unwrap();
    });
}
