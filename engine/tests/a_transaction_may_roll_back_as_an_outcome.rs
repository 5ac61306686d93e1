//! `Database::transaction_or_rollback`: the closure decides between commit
//! and rollback, both outcomes returned with its value; errors (of the
//! caller's own type too) are retried or returned exactly as
//! `Database::transaction` does.

mod common;

use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, Decision, EngineError, Options, RetryableError, Transaction, Value};

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

/// A transaction that has updated row 1 (to "held") and not ended: every
/// other writer of that row meets a conflict while it lives.
fn hold_row_one(db: &Database) -> Transaction {
    let holder = db.begin().unwrap();
    let (rid, _) = holder
        .get_by_key("t", "id", &Value::I64(1))
        .unwrap()
        .unwrap();
    holder.update("t", rid, row(1, "held")).unwrap();
    holder
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
        let holder = hold_row_one(&db);
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

/// A panic in the closure after writes (table and unique index) unwinds
/// through the call; the attempt is rolled back, nothing it wrote is seen,
/// and nothing it held blocks the next transaction on the same key or row.
#[test]
fn a_panic_after_writes_rolls_them_back_and_holds_nothing() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with_row(dir.path());
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = db.transaction_or_rollback(|txn| {
                txn.insert("t", row(5, "five"))?;
                let (rid, _) = txn.get_by_key("t", "id", &Value::I64(1))?.unwrap();
                txn.update("t", rid, row(1, "panicked"))?;
                if txn.xid().is_some() {
                    panic!("the closure panics after its writes");
                }
                Ok::<_, EngineError>(Decision::Commit(()))
            });
        }));
        assert!(caught.is_err());
        assert_eq!(name_of(&db, 5), None);
        assert_eq!(name_of(&db, 1).as_deref(), Some("0"));
        let before = db.txn_stats();
        let d = db
            .transaction_or_rollback(|txn| {
                txn.insert("t", row(5, "again"))?;
                let (rid, _) = txn.get_by_key("t", "id", &Value::I64(1))?.unwrap();
                txn.update("t", rid, row(1, "after"))?;
                Ok::<_, EngineError>(Decision::Commit(()))
            })
            .unwrap();
        assert!(d.is_commit());
        assert_eq!(db.txn_stats().retries, before.retries, "nothing was held");
        assert_eq!(name_of(&db, 5).as_deref(), Some("again"));
        assert_eq!(name_of(&db, 1).as_deref(), Some("after"));
        assert!(db.verify_indexes("t").unwrap().is_empty());
    });
}

/// A rolled-back insert leaves no index entry that another transaction's
/// insert of the same key would meet, and no row a later scan would see.
#[test]
fn a_rolled_back_insert_leaves_the_key_free_for_the_next_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_row(dir.path());
    for round in 0..20 {
        let d = db
            .transaction_or_rollback(|txn| {
                txn.insert("t", row(9, "rolled back"))?;
                Ok::<_, EngineError>(Decision::Rollback(round))
            })
            .unwrap();
        assert_eq!(d, Decision::Rollback(round));
    }
    let scanned = db
        .read_transaction(|txn| Ok(txn.scan("t")?.count()))
        .unwrap();
    assert_eq!(scanned, 1, "only the first row");
    db.transaction(|txn| txn.insert("t", row(9, "kept")).map(|_| ()))
        .unwrap();
    assert_eq!(name_of(&db, 9).as_deref(), Some("kept"));
    assert!(db.verify_indexes("t").unwrap().is_empty());
}

/// A transaction run inside the closure is independent: it commits on its
/// own (the outer rollback does not undo it), and one that writes a row
/// the outer attempt holds fails after its attempts rather than waiting
/// for the outer one (which cannot end while it waits).
#[test]
fn a_nested_transaction_commits_on_its_own_and_fails_rather_than_waits_on_the_outer_writes() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), options().transaction_attempts(3)).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        db.transaction(|txn| txn.insert("t", row(1, "0")).map(|_| ()))
            .unwrap();
        let before = db.txn_stats();
        let d = db
            .transaction_or_rollback(|txn| {
                let (rid, _) = txn.get_by_key("t", "id", &Value::I64(1))?.unwrap();
                txn.update("t", rid, row(1, "outer"))?;
                let inner_insert = db.transaction_or_rollback(|inner| {
                    inner.insert("t", row(7, "inner"))?;
                    Ok::<_, EngineError>(Decision::Commit("inner done"))
                })?;
                let inner_update = db.transaction_or_rollback(|inner| {
                    let (rid, _) = inner.get_by_key("t", "id", &Value::I64(1))?.unwrap();
                    inner.update("t", rid, row(1, "inner"))?;
                    Ok::<_, EngineError>(Decision::Commit(()))
                });
                Ok::<_, EngineError>(Decision::Rollback((inner_insert, inner_update)))
            })
            .unwrap();
        let (inner_insert, inner_update) = d.into_inner();
        assert_eq!(inner_insert, Decision::Commit("inner done"));
        let err = inner_update.unwrap_err();
        assert!(err.is_retryable(), "{err:?}");
        let after = db.txn_stats();
        assert_eq!(after.retries - before.retries, 2, "3 attempts, 2 retries");
        assert_eq!(after.retries_exhausted - before.retries_exhausted, 1);
        assert_eq!(name_of(&db, 7).as_deref(), Some("inner"));
        assert_eq!(name_of(&db, 1).as_deref(), Some("0"));
    });
}

/// A closure that meets a conflict and decides to roll back ends there:
/// the decision is the outcome, not retried, and the holder's write wins.
#[test]
fn a_rollback_decided_after_a_caught_conflict_is_returned_not_retried() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = db_with_row(dir.path());
        let holder = hold_row_one(&db);
        let before = db.txn_stats();
        let mut runs = 0;
        let d = db
            .transaction_or_rollback(|txn| {
                runs += 1;
                txn.insert("t", row(4, "four"))?;
                let (rid, _) = txn.get_by_key("t", "id", &Value::I64(1))?.unwrap();
                match txn.update("t", rid, row(1, "mine")) {
                    Err(e) if e.is_conflict() => Ok(Decision::Rollback("conflict")),
                    Err(e) => Err(e),
                    Ok(_) => Ok(Decision::Commit("updated")),
                }
            })
            .unwrap();
        assert_eq!(d, Decision::Rollback("conflict"));
        assert_eq!(runs, 1);
        assert_eq!(db.txn_stats().retries, before.retries);
        holder.commit().unwrap();
        assert_eq!(name_of(&db, 1).as_deref(), Some("held"));
        assert_eq!(name_of(&db, 4), None);
    });
}

/// Many threads bump one counter row, each deciding by its own rule to
/// commit or roll back; conflicts are retried. The row ends at exactly the
/// number of commits returned, and every retry is counted.
#[test]
fn concurrent_commits_and_rollbacks_on_one_row_leave_exactly_the_committed_bumps() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), options().transaction_attempts(1000)).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        db.transaction(|txn| txn.insert("t", row(1, "0")).map(|_| ()))
            .unwrap();
        let before = db.txn_stats();
        let commits: u64 = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..4)
                .map(|th| {
                    let db = &db;
                    sc.spawn(move || {
                        let mut commits = 0u64;
                        for i in 0..50 {
                            let d = db
                                .transaction_or_rollback(|txn| {
                                    let (rid, r) =
                                        txn.get_by_key("t", "id", &Value::I64(1))?.unwrap();
                                    let n: u64 = std::str::from_utf8(r[1].as_bytes().unwrap())
                                        .unwrap()
                                        .parse()
                                        .unwrap();
                                    txn.update("t", rid, row(1, &(n + 1).to_string()))?;
                                    Ok::<_, EngineError>(if (th + i) % 3 == 0 {
                                        Decision::Rollback(())
                                    } else {
                                        Decision::Commit(())
                                    })
                                })
                                .unwrap();
                            commits += u64::from(d.is_commit());
                        }
                        commits
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        let n: u64 = name_of(&db, 1).unwrap().parse().unwrap();
        assert_eq!(n, commits);
        let after = db.txn_stats();
        assert_eq!(after.retries_exhausted, before.retries_exhausted);
        assert!(db.verify_indexes("t").unwrap().is_empty());
    });
}
