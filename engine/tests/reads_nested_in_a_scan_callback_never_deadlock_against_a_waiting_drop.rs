//! A scan holds its table against DROP while its callback runs. A callback
//! that reads the same table again (a lookup or a nested scan) takes the
//! table's drop lock a second time on the same thread; a DROP TABLE waiting
//! on another thread meanwhile must not make that second hold wait for the
//! DROP, which itself waits for the first hold: the nested read finishes,
//! then the drop does.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, EngineError, Value};

fn table_of(db: &Database, rows: i64) {
    db.create_table(
        "t",
        vec![
            Column::new("id", ColumnType::I64),
            Column::nullable("v", ColumnType::Text),
        ],
    )
    .unwrap();
    let t = db.begin().unwrap();
    for i in 0..rows {
        t.insert("t", vec![Value::I64(i), Value::text(format!("v{i}"))])
            .unwrap();
    }
    t.commit().unwrap();
}

/// Run `nested` from inside a `scan_each` callback of table `t`, once a
/// DROP TABLE of `t` on another thread has had time to start waiting.
/// Returns what the nested read returned and what the drop returned.
fn nested_read_while_a_drop_waits(
    nested: impl Fn(&engine::Transaction) -> Result<usize, EngineError> + Send + 'static,
) -> (Result<usize, EngineError>, Result<(), EngineError>) {
    watchdog(Duration::from_secs(60), move || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        table_of(&db, 50);
        let start = Arc::new(Barrier::new(2));
        let dropper = {
            let (db, start) = (db.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                db.drop_table("t")
            })
        };
        let mut inner = None;
        let once = AtomicBool::new(false);
        let txn = db.read().unwrap();
        txn.scan_each("t", |_row| {
            if !once.swap(true, Ordering::SeqCst) {
                start.wait();
                // Long enough for the drop to be waiting on this scan.
                std::thread::sleep(Duration::from_millis(300));
                inner = Some(nested(&txn));
            }
            Ok(())
        })
        .unwrap();
        drop(txn);
        let dropped = dropper.join().unwrap();
        (inner.unwrap(), dropped)
    })
}

#[test]
fn a_nested_scan_of_the_same_table_finishes_while_a_drop_waits() {
    let (inner, dropped) = nested_read_while_a_drop_waits(|txn| {
        let mut n = 0;
        txn.scan_each("t", |_| {
            n += 1;
            Ok(())
        })?;
        Ok(n)
    });
    assert_eq!(inner.unwrap(), 50, "the nested scan saw every row");
    dropped.unwrap();
}

#[test]
fn a_lookup_of_the_same_table_finishes_while_a_drop_waits() {
    let (inner, dropped) = nested_read_while_a_drop_waits(|txn| {
        let mut ids = Vec::new();
        txn.scan_each("t", |r| {
            ids.push(r.id());
            Ok(())
        })?;
        let mut found = 0;
        for id in ids {
            if txn.get("t", id)?.is_some() {
                found += 1;
            }
        }
        Ok(found)
    });
    assert_eq!(inner.unwrap(), 50, "every lookup found its row");
    dropped.unwrap();
}
