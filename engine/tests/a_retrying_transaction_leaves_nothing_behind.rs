//! `Database::transaction` attacked from its closure: a closure that
//! panics, one that fails retryably on every attempt, one that runs another
//! retrying transaction inside it. None leaves a transaction or snapshot
//! open behind it: vacuum removes every row the failed attempts wrote, and
//! rows the failed attempts deleted stay. Each case under a time limit.

mod common;

use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, EngineError, Options};

const LIMIT: Duration = Duration::from_secs(60);

fn options() -> Options {
    small_options().transaction_backoff(Duration::from_micros(50), Duration::from_millis(1))
}

fn db_with(dir: &std::path::Path, rows: i64, opts: Options) -> Database {
    let db = Database::open(dir, opts).unwrap();
    db.create_table("t", two_columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    db.transaction(|t| {
        for i in 0..rows {
            t.insert("t", row(i, "kept"))?;
        }
        Ok(())
    })
    .unwrap();
    db
}

fn count(db: &Database) -> usize {
    db.read_transaction(|t| Ok(t.scan("t")?.count())).unwrap()
}

/// Delete every row in one committed transaction, vacuum, and return the
/// tuples vacuum left: 0 unless an old snapshot still holds them.
fn tuples_left_after_delete_all_and_vacuum(db: &Database) -> u64 {
    db.transaction(|t| {
        let ids: Vec<_> = t
            .scan("t")?
            .map(|r| r.map(|(id, _)| id))
            .collect::<Result<_, _>>()?;
        for id in ids {
            t.delete("t", id)?;
        }
        Ok(())
    })
    .unwrap();
    db.vacuum("t").unwrap().heap.tuples_remaining
}

#[test]
fn a_closure_that_panics_rolls_back_and_holds_no_snapshot() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with(dir.path(), 100, options());
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            db.transaction(|t| -> engine::Result<()> {
                t.insert("t", row(1_000, "never"))?;
                let first = t.scan("t")?.next().unwrap()?.0;
                t.delete("t", first)?;
                panic!("closure")
            })
        }));
        assert!(caught.is_err());
        assert_eq!(count(&db), 100);
        assert_eq!(tuples_left_after_delete_all_and_vacuum(&db), 0);
    });
}

#[test]
fn a_closure_failing_retryably_every_time_runs_the_attempt_limit_and_leaves_no_rows() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with(dir.path(), 10, options().transaction_attempts(4));
        let mut runs = 0i64;
        let e = db
            .transaction(|t| -> engine::Result<()> {
                runs += 1;
                let rid = t.insert("t", row(1_000 + runs, "attempt"))?;
                Err(EngineError::WriteConflict {
                    table: "t".into(),
                    row_id: rid,
                })
            })
            .unwrap_err();
        assert_eq!(runs, 4);
        assert!(
            matches!(&e, EngineError::WriteConflict { row_id, .. } if row_id.block == 0),
            "{e}"
        );
        assert_eq!(count(&db), 10);
        assert_eq!(tuples_left_after_delete_all_and_vacuum(&db), 0);
    });
}

#[test]
fn a_retrying_transaction_inside_another_commits_on_its_own() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with(dir.path(), 0, options().transaction_attempts(3));
        let e = db
            .transaction(|outer| -> engine::Result<()> {
                outer.insert("t", row(1, "outer"))?;
                db.transaction(|inner| inner.insert("t", row(2, "inner")).map(|_| ()))?;
                // The same key as the outer's uncommitted row: the inner
                // one cannot wait for the outer (it is on this thread), so
                // it fails; retried, it fails again, and is returned.
                let inner = db.transaction(|inner| inner.insert("t", row(1, "dup")).map(|_| ()));
                let e = inner.unwrap_err();
                assert!(e.is_retryable(), "{e}");
                Err(EngineError::InvalidSchema {
                    name: "outer".into(),
                    detail: "the outer gives up".into(),
                })
            })
            .unwrap_err();
        assert!(matches!(e, EngineError::InvalidSchema { .. }), "{e}");
        let rows: Vec<i64> = db
            .read_transaction(|t| {
                t.scan("t")?
                    .map(|r| r.map(|(_, row)| row[0].as_i64().unwrap()))
                    .collect()
            })
            .unwrap();
        assert_eq!(rows, vec![2]);
        assert_eq!(tuples_left_after_delete_all_and_vacuum(&db), 0);
    });
}

#[test]
fn read_transaction_refuses_a_write_after_reading_and_keeps_no_snapshot() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with(dir.path(), 20, options());
        let mut runs = 0;
        let e = db
            .read_transaction(|t| {
                runs += 1;
                assert_eq!(t.scan("t")?.count(), 20);
                t.insert("t", row(99, "no"))
            })
            .unwrap_err();
        assert!(matches!(e, EngineError::ReadOnlyTransaction { .. }), "{e}");
        assert_eq!(runs, 1);
        assert_eq!(tuples_left_after_delete_all_and_vacuum(&db), 0);
    });
}

/// The check the tests above rely on can fail: a snapshot held open keeps
/// the deleted rows from vacuum.
#[test]
fn a_snapshot_held_open_keeps_deleted_rows_from_vacuum() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with(dir.path(), 20, options());
        let held = db.read().unwrap();
        assert_eq!(held.scan("t").unwrap().count(), 20);
        assert_eq!(tuples_left_after_delete_all_and_vacuum(&db), 20);
        drop(held);
        assert_eq!(db.vacuum("t").unwrap().heap.tuples_remaining, 0);
    });
}
