//! `Database::transaction_or_rollback`: the closure decides between commit
//! and rollback, both outcomes returned with its value; errors (of the
//! caller's own type too) are retried or returned exactly as
//! `Database::transaction` does.

mod common;

use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, Decision, EngineError, Options, RetryableError, Value};

fn options() -> Options {
    small_options().transaction_backoff(Duration::from_micros(100), Duration::from_millis(2))
}

/// A table `t` (id unique) holding `(1, "0")`.
fn db_with_row(dir: &std::path::Path) -> Database {
    let db = Database::open(dir, options()).unwrap();
    db.create_table("t", two_columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    db.transaction(|txn| txn.insert("t", row(1, "0")).map(|_| ()))
        .unwrap();
    db
}

fn name_of(db: &Database, id: i64) -> Option<String> {
    let txn = db.read().unwrap();
    txn.get_by_key("t", "id", &Value::I64(id))
        .unwrap()
        .map(|(_, r)| String::from_utf8(r[1].as_bytes().unwrap().to_vec()).unwrap())
}

/// A caller's error type: engine errors plus a refusal of its own.
#[derive(Debug)]
enum AppError {
    Engine(EngineError),
    Refused(&'static str),
}

impl From<EngineError> for AppError {
    fn from(e: EngineError) -> AppError {
        AppError::Engine(e)
    }
}

impl RetryableError for AppError {
    fn is_retryable(&self) -> bool {
        matches!(self, AppError::Engine(e) if e.is_retryable())
    }
}

#[test]
fn a_rollback_decision_returns_the_value_and_leaves_none_of_the_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_row(dir.path());
    let before = db.txn_stats();
    let mut runs = 0;
    let d = db
        .transaction_or_rollback(|txn| {
            runs += 1;
            txn.insert("t", row(2, "inserted"))?;
            let (rid, _) = txn.get_by_key("t", "id", &Value::I64(1))?.unwrap();
            txn.update("t", rid, row(1, "updated"))?;
            Ok::<_, EngineError>(Decision::Rollback(42))
        })
        .unwrap();
    assert_eq!(d, Decision::Rollback(42));
    assert!(!d.is_commit());
    assert_eq!(d.into_inner(), 42);
    assert_eq!(runs, 1, "a rollback asked for is not retried");
    assert_eq!(name_of(&db, 2), None);
    assert_eq!(name_of(&db, 1).as_deref(), Some("0"));
    assert_eq!(db.txn_stats().retries, before.retries);
    assert!(db.verify_indexes("t").unwrap().is_empty());

    // The same closure deciding to commit keeps its writes.
    let d = db
        .transaction_or_rollback(|txn| {
            txn.insert("t", row(2, "inserted"))?;
            Ok::<_, EngineError>(Decision::Commit("kept"))
        })
        .unwrap();
    assert_eq!(d, Decision::Commit("kept"));
    assert_eq!(name_of(&db, 2).as_deref(), Some("inserted"));
}

/// The first run meets a conflict (another transaction holds the row
/// updated), which is retried and counted; the holder goes away and the
/// second run decides to roll back: the decision is returned.
#[test]
fn a_conflict_is_still_retried_and_counted_before_a_rollback_decision() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with_row(dir.path());
        let holder = db.begin().unwrap();
        let (rid, _) = holder
            .get_by_key("t", "id", &Value::I64(1))
            .unwrap()
            .unwrap();
        holder.update("t", rid, row(1, "held")).unwrap();
        let mut holder = Some(holder);
        let before = db.txn_stats();
        let mut runs = 0;
        let d = db
            .transaction_or_rollback(|txn| {
                runs += 1;
                let (rid, _) = txn.get_by_key("t", "id", &Value::I64(1))?.unwrap();
                let updated = txn.update("t", rid, row(1, "mine"));
                if let Err(e) = &updated
                    && e.is_conflict()
                    && let Some(h) = holder.take()
                {
                    h.rollback()?;
                }
                updated?;
                Ok::<_, AppError>(Decision::Rollback(runs))
            })
            .unwrap();
        assert_eq!(d, Decision::Rollback(2));
        assert_eq!(runs, 2);
        let after = db.txn_stats();
        assert_eq!(after.retries - before.retries, 1);
        assert_eq!(after.retries_exhausted, before.retries_exhausted);
        assert_eq!(name_of(&db, 1).as_deref(), Some("0"));
    });
}

/// An error that is not retryable (the caller's own, or the engine's) is
/// returned after one run, its writes rolled back.
#[test]
fn a_real_error_is_still_an_error_after_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_row(dir.path());
    let mut runs = 0;
    let err = db
        .transaction_or_rollback(|txn| {
            runs += 1;
            txn.insert("t", row(3, "three"))?;
            Err::<Decision<()>, _>(AppError::Refused("no"))
        })
        .unwrap_err();
    assert!(matches!(err, AppError::Refused("no")), "{err:?}");
    assert_eq!(runs, 1);
    assert_eq!(name_of(&db, 3), None);

    let mut runs = 0;
    let err = db
        .transaction_or_rollback(|txn| {
            runs += 1;
            txn.insert("t", row(1, "duplicate"))?;
            Ok::<_, AppError>(Decision::Commit(()))
        })
        .unwrap_err();
    assert!(
        matches!(err, AppError::Engine(EngineError::UniqueViolation { .. })),
        "{err:?}"
    );
    assert_eq!(runs, 1);
    assert_eq!(name_of(&db, 1).as_deref(), Some("0"));
}
