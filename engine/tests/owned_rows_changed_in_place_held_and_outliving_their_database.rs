//! Owned rows of a scan changed in place (`row[i] = ...`, which makes a
//! scanned row a row of values) and written back with `update`; their
//! clones made before and after; iterators held between rows across page
//! boundaries while other transactions write, vacuum, add a column and
//! drop the table; rows sent to other threads and dropped after the
//! database is closed.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, OwnedRow, Value};

const ROWS: i64 = 600;

fn columns() -> Vec<Column> {
    vec![
        Column::new("id", ColumnType::I64),
        Column::new("n", ColumnType::I64),
        Column::nullable("body", ColumnType::Text),
    ]
}

fn body(id: i64, n: i64) -> String {
    format!("{id}/{n}/{}", "b".repeat((id % 37) as usize))
}

fn values(id: i64, n: i64) -> Vec<Value> {
    vec![Value::I64(id), Value::I64(n), Value::text(body(id, n))]
}

fn filled(buffers: usize) -> Database {
    let db = Database::open_temporary(small_options().pool_buffers(buffers)).unwrap();
    db.create_table("t", columns()).unwrap();
    let w = db.begin().unwrap();
    for id in 0..ROWS {
        w.insert("t", values(id, 0)).unwrap();
    }
    w.commit().unwrap();
    db
}

/// Every row's `n` by id, each row checked whole.
fn ns(db: &Database) -> BTreeMap<i64, i64> {
    common::n_by_id(db, "t", body)
}

#[test]
fn rows_changed_in_place_read_their_new_values_and_update_their_rows() {
    watchdog(Duration::from_secs(60), || {
        let db = filled(16);
        let n_col = db.table_handle("t").unwrap().column("n").unwrap();
        let w = db.begin().unwrap();
        let it = w.scan("t").unwrap();
        let mut changed = 0;
        for x in it {
            let (rid, mut row) = x.unwrap();
            // Between rows the iterator holds no pins, whatever its page.
            assert_eq!(db.pool().pinned_buffers(), 0, "pins between rows");
            let id = row.i64("id").unwrap();
            if id % 3 != 0 {
                continue;
            }
            let before = row.clone();
            // A typed read first (from the tuple's bytes), then the change.
            assert_eq!(row.i64(n_col).unwrap(), 0);
            row[1] = Value::I64(id + 1);
            row[2] = Value::text(body(id, id + 1));
            // Every accessor reads the new values, by name and by handle,
            // typed or not; the clone made before keeps the old ones.
            assert_eq!(row.i64("n").unwrap(), id + 1);
            assert_eq!(row.i64(n_col).unwrap(), id + 1);
            assert_eq!(row.i64_opt(n_col).unwrap(), Some(id + 1));
            assert_eq!(row.value("n").unwrap(), &Value::I64(id + 1));
            assert_eq!(row.text("body").unwrap(), body(id, id + 1));
            assert_eq!(before.i64(n_col).unwrap(), 0);
            assert_eq!(before.text("body").unwrap(), body(id, 0));
            assert_ne!(before, row);
            let after = row.clone();
            assert_eq!(after, row);
            // A NULL put in place reads as NULL; a value of another type
            // is an error of its accessor, not a value.
            row[2] = Value::Null;
            assert_eq!(row.text_opt("body").unwrap(), None);
            assert!(row.text("body").is_err());
            row[1] = Value::text("not a number");
            assert!(row.i64("n").is_err());
            assert!(row.i64(n_col).is_err());
            w.update("t", rid, after).unwrap();
            changed += 1;
        }
        w.commit().unwrap();
        assert_eq!(changed, ROWS / 3);
        let got = ns(&db);
        assert_eq!(got.len(), ROWS as usize);
        for (id, n) in got {
            assert_eq!(n, if id % 3 == 0 { id + 1 } else { 0 }, "row {id}");
        }
        assert_eq!(db.pool().pinned_buffers(), 0);
    });
}

#[test]
fn iterators_held_between_rows_while_others_write_vacuum_alter_and_drop() {
    watchdog(Duration::from_secs(60), || {
        let db = filled(16);
        let r = db.read().unwrap();
        // Several iterators, each stopped somewhere in the table.
        let mut its: Vec<_> = (0..4).map(|_| r.scan("t").unwrap()).collect();
        let mut seen: Vec<Vec<OwnedRow>> = vec![Vec::new(); its.len()];
        for (k, it) in its.iter_mut().enumerate() {
            for _ in 0..(k as i64 * 150 + 7) {
                seen[k].push(it.next().unwrap().unwrap().1);
            }
        }
        assert_eq!(db.pool().pinned_buffers(), 0, "pins of idle iterators");
        // Others write and vacuum; the iterators' snapshot does not move.
        let w = db.begin().unwrap();
        let all: Vec<_> = w.scan("t").unwrap().map(|x| x.unwrap()).collect();
        for (rid, row) in all {
            let id = row.i64("id").unwrap();
            if id % 2 == 0 {
                w.delete("t", rid).unwrap();
            } else {
                let mut row = row;
                row[1] = Value::I64(5);
                row[2] = Value::text(body(id, 5));
                w.update("t", rid, row).unwrap();
            }
        }
        w.commit().unwrap();
        db.vacuum("t").unwrap();
        db.add_column("t", Column::nullable("extra", ColumnType::I64))
            .unwrap();
        for (k, it) in its.iter_mut().enumerate() {
            for _ in 0..50 {
                seen[k].push(it.next().unwrap().unwrap().1);
            }
        }
        // Rows go to another thread, to be checked and dropped there after
        // the database has closed.
        let (tx, rx) = std::sync::mpsc::channel::<OwnedRow>();
        let keeper = std::thread::spawn(move || {
            let rows: Vec<OwnedRow> = rx.iter().collect();
            let mut ids = Vec::new();
            for mut row in rows {
                let (id, n) = (row.i64("id").unwrap(), row.i64("n").unwrap());
                assert_eq!(n, 0, "row {id} as of the snapshot");
                assert_eq!(row.text("body").unwrap(), body(id, 0));
                if id % 5 == 0 {
                    row[1] = Value::I64(-1);
                    assert_eq!(row.i64("n").unwrap(), -1);
                }
                ids.push(id);
            }
            ids
        });
        for rows in &seen {
            for row in rows {
                tx.send(row.clone()).unwrap();
            }
        }
        // The table goes while iterators are held between rows: the drop
        // does not wait for them, and they end (an error or the end of
        // their rows), never a row of something else.
        db.drop_table("t").unwrap();
        for it in &mut its {
            for x in it.by_ref() {
                match x {
                    Ok((_, row)) => {
                        let (id, n) = (row.i64("id").unwrap(), row.i64("n").unwrap());
                        assert_eq!(n, 0);
                        assert_eq!(row.text("body").unwrap(), body(id, 0));
                        tx.send(row).unwrap();
                    }
                    Err(_) => break,
                }
            }
        }
        drop(its);
        drop(r);
        assert_eq!(db.pool().pinned_buffers(), 0);
        db.close().unwrap();
        drop(tx);
        let ids = keeper.join().unwrap();
        assert!(ids.len() >= seen.iter().map(Vec::len).sum::<usize>());
        for rows in seen {
            for (a, b) in rows.iter().zip(rows.iter().skip(1)) {
                assert!(a.i64("id").unwrap() < b.i64("id").unwrap(), "in order");
            }
        }
    });
}
