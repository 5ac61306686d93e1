//! `Database::open_temporary`: a fresh directory that exists while any
//! handle (clone, transaction, iterator) is alive and is removed when the
//! last one goes, also when that one goes while its thread unwinds from a
//! panic, and also through `close`.

mod common;

use std::sync::mpsc::channel;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::Database;

fn with_rows() -> Database {
    let db = Database::open_temporary(small_options()).unwrap();
    db.create_table("t", two_columns()).unwrap();
    db.transaction(|t| {
        for i in 0..100 {
            t.insert("t", row(i, "x"))?;
        }
        Ok(())
    })
    .unwrap();
    db
}

#[test]
fn the_directory_exists_while_a_clone_lives_and_goes_with_the_last_handle() {
    let db = with_rows();
    assert!(db.is_temporary());
    let dir = db.dir().to_path_buf();
    assert!(dir.join("VERSION").is_file(), "{}", dir.display());
    let clone = db.clone();
    let txn = db.begin().unwrap();
    let iter = txn.scan("t").unwrap();
    drop(db);
    drop(clone);
    assert!(dir.is_dir(), "a transaction and an iterator still hold it");
    drop(txn);
    assert!(dir.is_dir(), "the iterator still holds it");
    assert_eq!(iter.count(), 100);
    assert!(!dir.exists(), "{} is left behind", dir.display());
}

#[test]
fn close_of_the_last_handle_removes_the_directory() {
    let db = with_rows();
    let dir = db.dir().to_path_buf();
    let clone = db.clone();
    assert!(db.close().is_err(), "a clone is alive");
    assert!(dir.is_dir());
    clone.close().unwrap();
    assert!(!dir.exists(), "{} is left behind", dir.display());
}

/// The last handle belongs to a thread that panics: unwinding drops it,
/// and the directory goes with it.
#[test]
fn a_thread_that_panics_holding_the_last_handle_still_removes_the_directory() {
    watchdog(Duration::from_secs(60), || {
        let db = with_rows();
        let dir = db.dir().to_path_buf();
        let (go_tx, go_rx) = channel::<()>();
        let worker = {
            let db = db.clone();
            std::thread::spawn(move || {
                let txn = db.begin().unwrap();
                txn.insert("t", row(1_000, "in flight")).unwrap();
                go_rx.recv().unwrap();
                panic!("the application fails while holding a transaction");
            })
        };
        drop(db);
        assert!(dir.is_dir(), "the worker still holds a handle");
        go_tx.send(()).unwrap();
        assert!(worker.join().is_err(), "the worker panicked");
        assert!(!dir.exists(), "{} is left behind", dir.display());
    });
}

/// Two temporary databases are two directories; bad options are refused
/// before any directory is made.
#[test]
fn each_temporary_database_has_its_own_directory_and_bad_options_make_none() {
    let a = Database::open_temporary(small_options()).unwrap();
    let b = Database::open_temporary(small_options()).unwrap();
    assert_ne!(a.dir(), b.dir());
    a.create_table("only_in_a", two_columns()).unwrap();
    assert!(b.table("only_in_a").is_err());
    let e = Database::open_temporary(small_options().pool_buffers(1)).unwrap_err();
    assert!(e.to_string().contains("pool_buffers"), "{e}");
    let (da, db_) = (a.dir().to_path_buf(), b.dir().to_path_buf());
    drop((a, b));
    assert!(!da.exists() && !db_.exists());
}
