//! Calls back into the database from a backup's progress callback, and from
//! a bulk load's row iterator, on the same thread: each either works or
//! fails at once with a clear error; none hangs (each case under a time
//! limit).

mod common;

use std::cell::RefCell;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Column, ColumnType, Database, EngineError};

const LIMIT: Duration = Duration::from_secs(60);

fn db_with_rows(dir: &std::path::Path) -> Database {
    let db = Database::open(dir, small_options()).unwrap();
    db.create_table("t", two_columns()).unwrap();
    db.bulk_load("t", (0..500).map(|i| row(i, "x")), |_| {})
        .unwrap();
    db
}

/// Run a backup whose first progress report calls `call`; returns the
/// backup's result and what `call` returned.
fn backup_calling(
    call: impl Fn(&Database, &std::path::Path) -> engine::Result<()> + Send + 'static,
) -> (engine::Result<()>, Option<engine::Result<()>>) {
    watchdog(LIMIT, move || {
        let src = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let db = db_with_rows(src.path());
        let inner = RefCell::new(None);
        let other = out.path().join("other");
        let r = db.backup_to(out.path().join("copy"), |_| {
            if inner.borrow().is_none() {
                *inner.borrow_mut() = Some(call(&db, &other));
            }
        });
        (r.map(|_| ()), inner.into_inner())
    })
}

#[test]
fn a_backup_progress_callback_that_creates_a_table_fails_at_once() {
    let (backup, inner) = backup_calling(|db, _| {
        db.create_table("new", vec![Column::new("a", ColumnType::I64)])
            .map(|_| ())
    });
    backup.unwrap();
    let e = inner.unwrap().unwrap_err();
    assert!(matches!(e, EngineError::BackupInProgress { .. }), "{e}");
}

#[test]
fn a_backup_progress_callback_that_drops_a_table_or_creates_or_drops_an_index_fails_at_once() {
    let (backup, inner) = backup_calling(|db, _| {
        for e in [
            db.drop_table("t").unwrap_err(),
            db.create_index("t_id", "t", "id", false).unwrap_err(),
            db.drop_index("t_id").unwrap_err(),
        ] {
            assert!(matches!(e, EngineError::BackupInProgress { .. }), "{e}");
        }
        Ok(())
    });
    backup.unwrap();
    inner.unwrap().unwrap();
}

#[test]
fn a_backup_progress_callback_that_takes_a_checkpoint_fails_at_once() {
    let (backup, inner) = backup_calling(|db, _| db.checkpoint().map(|_| ()));
    backup.unwrap();
    let e = inner.unwrap().unwrap_err();
    assert!(matches!(e, EngineError::BackupInProgress { .. }), "{e}");
}

#[test]
fn a_backup_progress_callback_that_starts_another_backup_fails_at_once() {
    let (backup, inner) = backup_calling(|db, other| db.backup_to(other, |_| {}).map(|_| ()));
    backup.unwrap();
    let e = inner.unwrap().unwrap_err();
    assert!(matches!(e, EngineError::BackupInProgress { .. }), "{e}");
}

#[test]
fn a_backup_progress_callback_may_read_write_and_vacuum() {
    let (backup, inner) = backup_calling(|db, _| {
        db.transaction(|t| t.insert("t", row(10_000, "during")).map(|_| ()))?;
        let n = db.read_transaction(|t| Ok(t.scan("t")?.count()))?;
        assert_eq!(n, 501);
        db.vacuum("t").map(|_| ())
    });
    backup.unwrap();
    inner.unwrap().unwrap();
}

#[test]
fn a_bulk_load_iterator_that_backs_up_or_checkpoints_does_not_hang() {
    watchdog(LIMIT, || {
        let src = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let db = Database::open(src.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        db.create_table("other", two_columns()).unwrap();
        let copy = out.path().join("copy");
        let results = RefCell::new(Vec::new());
        let rows = (0..3_000).map(|i| {
            if i == 1_500 {
                results.borrow_mut().push(
                    db.bulk_load("other", (0..10).map(|j| row(j, "o")), |_| {})
                        .map(|_| ()),
                );
                results.borrow_mut().push(db.checkpoint().map(|_| ()));
                results
                    .borrow_mut()
                    .push(db.backup_to(&copy, |_| {}).map(|_| ()));
            }
            row(i, "loaded")
        });
        db.bulk_load("t", rows, |_| {}).unwrap();
        for r in results.into_inner() {
            r.unwrap();
        }
        // The copy holds the load of `other` (committed before the backup)
        // and not the one of `t` (still running while it was taken).
        let copy_db = Database::open(&copy, small_options()).unwrap();
        let n = copy_db
            .read_transaction(|t| Ok(t.scan("t")?.count()))
            .unwrap();
        assert_eq!(n, 0, "the load of t committed after the backup");
        let n = copy_db
            .read_transaction(|t| Ok(t.scan("other")?.count()))
            .unwrap();
        assert_eq!(n, 10, "the load of other committed before the backup");
        drop(copy_db);
        let n = db.read_transaction(|t| Ok(t.scan("t")?.count())).unwrap();
        assert_eq!(n, 3_000);
    });
}

#[test]
fn after_a_backup_whose_callback_was_refused_ddl_and_checkpoints_work_again() {
    watchdog(LIMIT, || {
        let src = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let db = db_with_rows(src.path());
        let refused = RefCell::new(false);
        db.backup_to(out.path().join("copy"), |_| {
            *refused.borrow_mut() |= db.checkpoint().is_err();
        })
        .unwrap();
        assert!(refused.into_inner());
        db.checkpoint().unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        db.drop_table("t").unwrap();
        // A backup whose callback panics leaves the thread unmarked too.
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            db.backup_to(out.path().join("second"), |_| panic!("callback"))
        }));
        assert!(panicked.is_err());
        db.checkpoint().unwrap();
        db.create_table("u", two_columns()).unwrap();
    });
}

#[test]
fn a_backup_progress_callback_that_adds_a_column_fails_at_once() {
    let (backup, inner) = backup_calling(|db, _| {
        db.add_column("t", Column::nullable("extra", ColumnType::I64))
            .map(|_| ())
    });
    backup.unwrap();
    let e = inner.unwrap().unwrap_err();
    assert!(matches!(e, EngineError::BackupInProgress { .. }), "{e}");
}

#[test]
fn a_bulk_load_iterator_that_adds_a_column_to_its_empty_table_fails_the_load_at_once() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        let inner = RefCell::new(None);
        let rows = (0..100).map(|i| {
            if i == 50 {
                *inner.borrow_mut() =
                    Some(db.add_column("t", Column::nullable("extra", ColumnType::I64)));
            }
            row(i, "x")
        });
        let e = db.bulk_load("t", rows, |_| {}).unwrap_err();
        assert!(
            matches!(&e, EngineError::TableBeingLoaded { table } if table == "t"),
            "{e}"
        );
        let inner = inner.into_inner().unwrap().unwrap_err();
        assert!(
            matches!(inner, EngineError::TableBeingLoaded { .. }),
            "{inner}"
        );
        // Nothing of the load is there, the table has its two columns and
        // takes the column now.
        assert_eq!(
            db.read_transaction(|t| Ok(t.scan("t")?.count())).unwrap(),
            0
        );
        db.add_column("t", Column::nullable("extra", ColumnType::I64))
            .unwrap();
    });
}
