//! Owned rows of values (from `get` and `index_lookup`, not from a scan):
//! changed in place through `DerefMut`, cloned before and after (clones are
//! independent), taken apart with `into_values` and `into_iter`, sent to
//! other threads and dropped there, dropped while a panic unwinds (inside
//! `catch_unwind`, the rows still readable afterwards when kept outside),
//! and read after their database is closed.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, OwnedRow, Value};

const ROWS: i64 = 300;

fn values(id: i64) -> Vec<Value> {
    vec![
        Value::I64(id),
        Value::I64(id % 10),
        Value::text(format!("{id}:{}", "v".repeat((id % 29) as usize))),
    ]
}

#[test]
fn rows_of_values_survive_changes_clones_threads_panics_and_a_closed_database() {
    watchdog(Duration::from_secs(60), || {
        let db = Database::open_temporary(small_options().pool_buffers(16)).unwrap();
        db.create_table(
            "t",
            vec![
                Column::new("id", ColumnType::I64),
                Column::new("g", ColumnType::I64),
                Column::nullable("body", ColumnType::Text),
            ],
        )
        .unwrap();
        db.create_index("t_g", "t", "g", false).unwrap();
        let w = db.begin().unwrap();
        let rids: Vec<_> = (0..ROWS)
            .map(|id| w.insert("t", values(id)).unwrap())
            .collect();
        w.commit().unwrap();

        let r = db.read().unwrap();
        let mut got: Vec<OwnedRow> = rids
            .iter()
            .map(|&rid| r.get("t", rid).unwrap().expect("row"))
            .collect();
        let looked_up: Vec<OwnedRow> = (0..10)
            .flat_map(|g| r.index_lookup("t_g", &Value::I64(g)).unwrap())
            .map(|(_, row)| row)
            .collect();
        assert_eq!(looked_up.len(), ROWS as usize);

        // Clones before a change keep the old values; after, the new.
        let before: Vec<OwnedRow> = got.clone();
        for (id, row) in got.iter_mut().enumerate() {
            row[1] = Value::I64(-(id as i64));
            row[2] = Value::Null;
        }
        let after: Vec<OwnedRow> = got.clone();
        for (id, (b, a)) in before.iter().zip(&after).enumerate() {
            let id = id as i64;
            assert_eq!(*b, values(id));
            assert_eq!(a.i64("g").unwrap(), -id);
            assert_eq!(a.value("body").unwrap(), &Value::Null);
            assert_eq!(a.len(), 3);
        }

        // Taken apart: each its own values.
        let taken: Vec<Vec<Value>> = before.into_iter().map(OwnedRow::into_values).collect();
        for (id, v) in taken.iter().enumerate() {
            assert_eq!(*v, values(id as i64));
        }
        let counted: usize = after
            .clone()
            .into_iter()
            .map(|r| r.into_iter().count())
            .sum();
        assert_eq!(counted, 3 * ROWS as usize);

        // Sent away and dropped on other threads, some changed there.
        let handles: Vec<_> = looked_up
            .chunks(37)
            .map(|c| c.to_vec())
            .map(|mut rows| {
                std::thread::spawn(move || {
                    for row in &mut rows {
                        let id = row.i64("id").unwrap();
                        assert_eq!(*row, values(id));
                        row[0] = Value::I64(id + 1_000);
                    }
                    rows.iter().map(|r| r.i64("id").unwrap()).sum::<i64>()
                })
            })
            .collect();
        // The originals dropped here while their clones change there.
        drop(looked_up);
        let sum: i64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, (0..ROWS).sum::<i64>() + 1_000 * ROWS);

        // Rows dropped while a panic unwinds, and rows changed inside a
        // closure that panics: the ones kept outside stay whole.
        let mut kept = got.clone();
        for _ in 0..3 {
            let inside = got.clone();
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let mut held = inside;
                for row in kept.iter_mut().step_by(2) {
                    row[2] = Value::text("changed before the panic");
                }
                held[0][0] = Value::I64(i64::MIN);
                panic!("unwinding with {} rows held", held.len());
            }));
            assert!(outcome.is_err());
        }
        for (id, row) in kept.iter().enumerate() {
            let want = if id % 2 == 0 {
                Value::text("changed before the panic")
            } else {
                Value::Null
            };
            assert_eq!(row.value("body").unwrap(), &want, "row {id}");
        }

        // Read after the database is closed, then dropped.
        drop(r);
        db.close().unwrap();
        for (id, row) in got.iter().enumerate() {
            assert_eq!(row.i64("id").unwrap(), id as i64);
            assert_eq!(row.i64("g").unwrap(), -(id as i64));
        }
        let values_after_close: Vec<Vec<Value>> = got.into_iter().map(Into::into).collect();
        assert_eq!(values_after_close.len(), ROWS as usize);
        drop(kept);
    });
}
