//! `Database::transaction` and `read_transaction`: a retryable error rolls
//! back and runs the closure again; anything else, or the last attempt's
//! error, is returned as it is; retries are counted in `TxnStats`.

mod common;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, EngineError, Options, Value};

fn options() -> Options {
    small_options().transaction_backoff(Duration::from_micros(100), Duration::from_millis(2))
}

/// A table `t` (id unique) holding `(1, "0")`: the counter is the name.
fn counter_db(dir: &std::path::Path, opts: Options) -> Database {
    let db = Database::open(dir, opts).unwrap();
    db.create_table("t", two_columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    let t = db.begin().unwrap();
    t.insert("t", row(1, "0")).unwrap();
    t.commit().unwrap();
    db
}

fn read_counter(txn: &engine::Transaction) -> engine::Result<(engine::RowId, i64)> {
    let (rid, r) = txn
        .get_by_key("t", "id", &Value::I64(1))?
        .expect("the counter row");
    let n = std::str::from_utf8(r[1].as_bytes().unwrap())
        .unwrap()
        .parse()
        .unwrap();
    Ok((rid, n))
}

/// Two threads increment one row in lock step: in every round both read
/// it, meet at a barrier, then both update it, so at least one of them
/// loses (first updater wins) and runs its transaction again (more than
/// once if it rereads before the winner's commit is done). Every increment
/// lands, and every run beyond the first of each transaction is one
/// counted retry.
#[test]
fn conflicting_updates_of_one_row_all_commit_and_each_conflict_is_one_counted_retry() {
    watchdog(Duration::from_secs(120), || {
        const ROUNDS: u64 = 25;
        let dir = tempfile::tempdir().unwrap();
        // The loser of a round reruns until the winner's commit (an fsync)
        // is done; on a loaded machine that outlasts 10 short backoffs, and
        // this test counts retries rather than testing the attempt limit
        // (the test below does that).
        let db = counter_db(dir.path(), options().transaction_attempts(10_000));
        let before = db.txn_stats();
        let barrier = Arc::new(Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (db, barrier) = (db.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let mut runs = 0u64;
                    for _ in 0..ROUNDS {
                        let mut attempt = 0;
                        db.transaction(|txn| {
                            attempt += 1;
                            runs += 1;
                            let (rid, n) = read_counter(txn)?;
                            if attempt == 1 {
                                barrier.wait();
                            }
                            txn.update("t", rid, row(1, &(n + 1).to_string()))?;
                            Ok(())
                        })
                        .unwrap();
                    }
                    runs
                })
            })
            .collect();
        let runs: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        let after = db.txn_stats();
        let txn = db.begin().unwrap();
        assert_eq!(read_counter(&txn).unwrap().1, 2 * ROUNDS as i64);
        drop(txn);
        let retries = after.retries - before.retries;
        assert!(retries >= ROUNDS, "{retries} retries in {ROUNDS} rounds");
        assert_eq!(
            runs,
            2 * ROUNDS + retries,
            "every rerun is one counted retry"
        );
        assert_eq!(after.retries_exhausted, before.retries_exhausted);
        assert!(db.verify_indexes("t").unwrap().is_empty());
    });
}

/// A duplicate key is the caller's error: returned at once, after one run,
/// with the attempt's other writes rolled back.
#[test]
fn a_non_retryable_error_is_returned_after_one_run_and_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = counter_db(dir.path(), options());
    let before = db.txn_stats();
    let mut runs = 0;
    let err = db
        .transaction(|txn| {
            runs += 1;
            txn.insert("t", row(2, "first"))?;
            txn.insert("t", row(1, "duplicate"))?;
            Ok(())
        })
        .unwrap_err();
    assert!(
        matches!(err, EngineError::UniqueViolation { .. }),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert_eq!(runs, 1);
    assert_eq!(db.txn_stats().retries, before.retries);
    let t = db.begin().unwrap();
    assert!(t.get_by_key("t", "id", &Value::I64(2)).unwrap().is_none());
}

/// A conflict that never goes away (another transaction holds the row
/// updated and stays open): the closure runs exactly `transaction_attempts`
/// times and the last conflict is returned.
#[test]
fn the_attempt_limit_is_honoured_and_the_last_conflict_returned() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = counter_db(dir.path(), options().transaction_attempts(3));
        let holder = db.begin().unwrap();
        let (rid, _) = read_counter(&holder).unwrap();
        holder.update("t", rid, row(1, "held")).unwrap();
        let before = db.txn_stats();
        let mut runs = 0;
        let err = db
            .transaction(|txn| {
                runs += 1;
                let (rid, n) = read_counter(txn)?;
                txn.update("t", rid, row(1, &(n + 1).to_string()))
            })
            .unwrap_err();
        assert!(err.is_conflict(), "{err:?}");
        assert_eq!(runs, 3);
        let after = db.txn_stats();
        assert_eq!(after.retries - before.retries, 2);
        assert_eq!(after.retries_exhausted - before.retries_exhausted, 1);
        // Once the holder is gone, the same closure succeeds first time.
        holder.rollback().unwrap();
        runs = 0;
        db.transaction(|txn| {
            runs += 1;
            let (rid, n) = read_counter(txn)?;
            txn.update("t", rid, row(1, &(n + 1).to_string()))
        })
        .unwrap();
        assert_eq!(runs, 1);
        let txn = db.begin().unwrap();
        assert_eq!(read_counter(&txn).unwrap().1, 1);
    });
}

/// `read_transaction` returns what the closure read; a write in it is a
/// read-only error, not retried.
#[test]
fn read_transaction_returns_what_it_read_and_refuses_writes_without_retrying() {
    let dir = tempfile::tempdir().unwrap();
    let db = counter_db(dir.path(), options());
    let n = db.read_transaction(|txn| Ok(read_counter(txn)?.1)).unwrap();
    assert_eq!(n, 0);
    let before = db.txn_stats();
    let mut runs = 0;
    let err = db
        .read_transaction(|txn| {
            runs += 1;
            txn.insert("t", row(5, "x"))
        })
        .unwrap_err();
    assert!(
        matches!(err, EngineError::ReadOnlyTransaction { .. }),
        "{err:?}"
    );
    assert_eq!(runs, 1);
    assert_eq!(db.txn_stats().retries, before.retries);
}

/// Zero attempts, or a first backoff longer than the maximum, is refused at
/// open naming the option.
#[test]
fn retry_options_out_of_range_are_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let e = Database::open(dir.path(), small_options().transaction_attempts(0)).unwrap_err();
    assert!(e.to_string().contains("transaction_attempts"), "{e}");
    let e = Database::open(
        dir.path(),
        small_options().transaction_backoff(Duration::from_millis(5), Duration::from_millis(1)),
    )
    .unwrap_err();
    assert!(e.to_string().contains("transaction_backoff"), "{e}");
    let o = Options::new()
        .set("transaction_attempts", "4")
        .unwrap()
        .set("transaction_backoff_ms", "3")
        .unwrap()
        .set("transaction_backoff_max_ms", "9")
        .unwrap();
    assert_eq!(o.transaction_attempts, 4);
    assert_eq!(o.transaction_backoff, Duration::from_millis(3));
    assert_eq!(o.transaction_backoff_max, Duration::from_millis(9));
}
