//! `bulk_load` whose row iterator or progress callback misbehaves: drops
//! the table being loaded, panics, or writes the table in its own
//! transaction. The load fails with a clear error (or the panic goes on),
//! nothing of it becomes visible, and the database keeps working (also
//! after a reopen). Each case under a time limit.

mod common;

use std::cell::RefCell;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, EngineError, Value};

const LIMIT: Duration = Duration::from_secs(60);

fn count(db: &Database, table: &str) -> usize {
    db.read_transaction(|t| Ok(t.scan(table)?.count())).unwrap()
}

#[test]
fn an_iterator_that_drops_its_non_empty_table_fails_the_load_with_unknown_table() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        db.bulk_load("t", (0..100).map(|i| row(i, "first")), |_| {})
            .unwrap();
        let dropped = RefCell::new(None);
        let rows = (100..2_000).map(|i| {
            if i == 1_000 {
                *dropped.borrow_mut() = Some(db.drop_table("t"));
            }
            row(i, "second")
        });
        let e = db.bulk_load("t", rows, |_| {}).unwrap_err();
        assert!(matches!(e, EngineError::UnknownTable { .. }), "{e}");
        dropped.into_inner().unwrap().unwrap();
        assert!(db.tables().iter().all(|t| t.name != "t"));
        db.create_table("t", two_columns()).unwrap();
        assert_eq!(count(&db, "t"), 0);
        drop(db);
        let db = Database::open(dir.path(), small_options()).unwrap();
        assert_eq!(count(&db, "t"), 0);
    });
}

#[test]
fn a_progress_callback_that_drops_its_empty_table_mid_load_fails_it_and_may_drop_it_at_the_end() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options().bulk_load_progress_every(100)).unwrap();
        db.create_table("t", two_columns()).unwrap();
        let mut results = Vec::new();
        let e = db
            .bulk_load("t", (0..1_000).map(|i| row(i, "x")), |p| {
                results.push((p.done, db.drop_table("t")));
            })
            .unwrap_err();
        assert!(matches!(e, EngineError::TableBeingLoaded { .. }), "{e}");
        assert!(!results.is_empty());
        for (done, r) in &results {
            assert!(!done);
            assert!(
                matches!(r, Err(EngineError::TableBeingLoaded { .. })),
                "{r:?}"
            );
        }
        assert_eq!(count(&db, "t"), 0);
        // At the last report the table is free: dropping it works.
        let mut last = None;
        db.bulk_load("t", (0..1_000).map(|i| row(i, "x")), |p| {
            if p.done {
                last = Some(db.drop_table("t"));
            }
        })
        .unwrap();
        last.unwrap().unwrap();
        assert!(db.tables().is_empty());
    });
}

#[test]
fn an_iterator_that_panics_leaves_the_table_empty_and_loadable() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            db.bulk_load(
                "t",
                (0..5_000).map(|i| {
                    assert!(i < 3_000, "iterator");
                    row(i, "x")
                }),
                |_| {},
            )
        }));
        assert!(caught.is_err());
        assert_eq!(count(&db, "t"), 0);
        db.bulk_load("t", (0..500).map(|i| row(i, "y")), |_| {})
            .unwrap();
        assert_eq!(count(&db, "t"), 500);
        assert!(db.verify_indexes("t").unwrap().is_empty());
        drop(db);
        let db = Database::open(dir.path(), small_options()).unwrap();
        assert_eq!(count(&db, "t"), 500);
        assert!(db.verify_indexes("t").unwrap().is_empty());
    });
}

#[test]
fn an_iterator_that_commits_a_duplicate_key_first_fails_the_load_as_a_unique_violation() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        db.bulk_load("t", (0..10).map(|i| row(i, "first")), |_| {})
            .unwrap();
        let rows = (10..1_000).map(|i| {
            if i == 500 {
                db.transaction(|t| t.insert("t", row(900, "theirs")).map(|_| ()))
                    .unwrap();
            }
            row(i, "load")
        });
        let e = db.bulk_load("t", rows, |_| {}).unwrap_err();
        assert!(matches!(e, EngineError::UniqueViolation { .. }), "{e}");
        assert_eq!(count(&db, "t"), 11);
        let theirs = db
            .read_transaction(|t| t.get_by_key("t", "id", &Value::I64(900)))
            .unwrap()
            .unwrap();
        assert_eq!(theirs.1[1].as_bytes().unwrap(), b"theirs");
        assert!(db.verify_indexes("t").unwrap().is_empty());
    });
}
