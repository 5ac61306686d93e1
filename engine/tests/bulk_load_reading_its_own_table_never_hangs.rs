//! A bulk load whose row iterator or progress callback reads (or loads)
//! the table being loaded, on the loading thread: into an empty table
//! (held exclusively) the read fails at once with `TableBeingLoaded`
//! naming the table, and the load fails committing nothing; into a table
//! with pages the read works, from a snapshot without the load's rows.
//! Every test runs under a time limit, so a hang fails it.

mod common;

use std::cell::RefCell;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, EngineError, Value};

const LIMIT: Duration = Duration::from_secs(60);

fn db(dir: &std::path::Path) -> Database {
    let db = Database::open(dir, small_options().bulk_load_progress_every(10)).unwrap();
    db.create_table("t", two_columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    db
}

fn count(db: &Database) -> usize {
    db.read_transaction(|t| Ok(t.scan("t")?.count())).unwrap()
}

fn is_being_loaded(e: &EngineError) -> bool {
    matches!(e, EngineError::TableBeingLoaded { table } if table == "t")
        && e.to_string().contains("\"t\"")
        && e.to_string().contains("bulk-loaded")
}

#[test]
fn an_iterator_reading_the_empty_table_it_loads_gets_an_error_at_once_and_nothing_commits() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = db(dir.path());
        let reader = db.begin().unwrap();
        let seen = RefCell::new(None);
        let rows = (0..100).map(|i| {
            if i == 50 {
                let r = reader.get_by_key("t", "id", &Value::I64(1));
                *seen.borrow_mut() = Some(r.map(|o| o.is_some()));
            }
            row(i, "x")
        });
        let e = db.bulk_load("t", rows, |_| {}).unwrap_err();
        assert!(is_being_loaded(&e), "{e:?}");
        let read = seen.into_inner().expect("the iterator ran to row 50");
        assert!(is_being_loaded(&read.unwrap_err()));
        drop(reader);
        assert_eq!(count(&db), 0, "the load committed nothing");
        // The table is free again, and loads.
        db.bulk_load("t", (0..10).map(|i| row(i, "y")), |_| {})
            .unwrap();
        assert_eq!(count(&db), 10);
    });
}

/// Loading an empty table from a scan of itself: the scan's error is
/// swallowed by the iterator (`map_while(Result::ok)`), and the load still
/// fails with it rather than committing whatever the iterator made of it.
#[test]
fn a_load_of_an_empty_table_from_a_scan_of_itself_fails_even_if_the_error_is_swallowed() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = db(dir.path());
        let txn = db.begin().unwrap();
        let scan = txn.scan("t").unwrap();
        let rows = scan.map_while(Result::ok).map(|(_, r)| r);
        let e = db.bulk_load("t", rows, |_| {}).unwrap_err();
        assert!(is_being_loaded(&e), "{e:?}");
        // A nested load of the same table from the iterator is refused too.
        let nested = RefCell::new(None);
        let rows = (0..3).map(|i| {
            if i == 1 {
                *nested.borrow_mut() =
                    Some(db.bulk_load("t", std::iter::empty::<engine::Row>(), |_| {}));
            }
            row(i, "z")
        });
        let e = db.bulk_load("t", rows, |_| {}).unwrap_err();
        assert!(is_being_loaded(&e), "{e:?}");
        assert!(is_being_loaded(&nested.into_inner().unwrap().unwrap_err()));
        assert_eq!(count(&db), 0);
    });
}

/// A progress report before the last cannot read the table (the load holds
/// it); the last one, after the commit, can and sees every loaded row.
#[test]
fn a_progress_callback_reading_the_empty_table_fails_before_the_end_and_reads_it_after() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = db(dir.path());
        let mut during = Vec::new();
        let e = db
            .bulk_load("t", (0..100).map(|i| row(i, "x")), |p| {
                if !p.done {
                    during.push(db.read_transaction(|t| Ok(t.scan("t")?.count())));
                }
            })
            .unwrap_err();
        assert!(is_being_loaded(&e), "{e:?}");
        assert!(!during.is_empty());
        assert!(
            during
                .iter()
                .all(|r| r.as_ref().is_err_and(is_being_loaded))
        );
        assert_eq!(count(&db), 0);
        // Reading only in the last report works.
        let mut at_end = None;
        db.bulk_load("t", (0..100).map(|i| row(i, "x")), |p| {
            if p.done {
                at_end = Some(count(&db));
            }
        })
        .unwrap();
        assert_eq!(at_end, Some(100));
    });
}

/// Into a table with rows, reading it from the iterator and the callback
/// works: a scan of the table feeding its own load sees only the rows from
/// before the load (its snapshot), so it ends, and the table doubles.
#[test]
fn a_load_of_a_table_with_rows_from_a_scan_of_itself_works_from_a_snapshot_before_it() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = db(dir.path());
        db.bulk_load("t", (0..100).map(|i| row(i, "old")), |_| {})
            .unwrap();
        let txn = db.begin().unwrap();
        let rows = txn.scan("t").unwrap().map(|r| {
            let (_, r) = r.unwrap();
            row(r[0].as_i64().unwrap() + 1_000, "copy")
        });
        let mut seen = Vec::new();
        let p = db
            .bulk_load("t", rows, |p| {
                if !p.done {
                    seen.push(count(&db));
                }
            })
            .unwrap();
        assert_eq!(p.rows, 100);
        assert!(!seen.is_empty());
        assert!(seen.iter().all(|&n| n == 100), "{seen:?}");
        drop(txn);
        assert_eq!(count(&db), 200);
        assert!(db.verify_indexes("t").unwrap().is_empty());
    });
}
