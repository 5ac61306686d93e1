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

/// DDL on the scanned table, or a bulk load into it, from the scan's own
/// callback would wait for the scan's hold on the table, which waits for
/// the callback: each is refused at once naming the table and what was
/// refused, nothing changes, and the scan goes on to the end. DDL on
/// another table from the same callback works.
#[test]
fn ddl_on_the_scanned_table_from_its_own_callback_is_refused_not_a_hang() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        table_of(&db, 50);
        db.create_index("t_id", "t", "id", false).unwrap();
        db.create_table("u", vec![Column::new("id", ColumnType::I64)])
            .unwrap();
        let txn = db.read().unwrap();
        let mut refused: Vec<(String, EngineError)> = Vec::new();
        let mut seen = 0;
        txn.scan_each("t", |_row| {
            seen += 1;
            if seen == 1 {
                let calls: Vec<(&str, engine::Result<()>)> = vec![
                    ("drop table", db.drop_table("t")),
                    (
                        "add column",
                        db.add_column("t", Column::nullable("w", ColumnType::I64))
                            .map(|_| ()),
                    ),
                    (
                        "create index",
                        db.create_index("t_v", "t", "v", false).map(|_| ()),
                    ),
                    ("drop index", db.drop_index("t_id")),
                    (
                        "bulk load",
                        db.bulk_load("t", [vec![Value::I64(99), Value::Null]], |_| {})
                            .map(|_| ()),
                    ),
                ];
                for (what, r) in calls {
                    refused.push((what.to_string(), r.expect_err(what)));
                }
                // Another table is not held by this scan.
                db.drop_table("u")?;
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, 50, "the scan went on to the end");
        drop(txn);
        for (what, e) in &refused {
            assert!(
                matches!(e, EngineError::TableReadByThisThread { table, .. } if table == "t"),
                "{what}: {e}"
            );
            assert!(e.to_string().contains(what.as_str()), "{what}: {e}");
        }
        // Nothing was done: the table, its index and its columns are as
        // they were, and now DDL on it works.
        let t = db.read().unwrap();
        let mut n = 0;
        t.scan_each("t", |_| {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 50);
        assert_eq!(t.index_lookup("t_id", &Value::I64(7)).unwrap().len(), 1);
        drop(t);
        let info = db.table("t").unwrap();
        assert_eq!(info.columns.len(), 2, "no column was added");
        assert!(db.table("u").is_err(), "u was dropped from the callback");
        db.drop_table("t").unwrap();
    });
}
