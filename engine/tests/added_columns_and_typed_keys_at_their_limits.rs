//! `add_column` and the column types pushed to their edges through the
//! public API: defaults too large for an index key or for an old row to be
//! rewritten, tables grown column by column past the null bitmap's byte
//! boundaries, float keys around zero and NaN in range bounds and key
//! lookups, timestamps at the ends of `i64`, iterators held across an
//! `add_column`, writers racing one, and column handles of another
//! database.

mod common;

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, EngineError, Value};

const LIMIT: Duration = Duration::from_secs(120);

fn open(dir: &std::path::Path) -> Database {
    Database::open(dir, small_options()).unwrap()
}

#[test]
fn a_default_too_large_for_an_index_key_makes_create_index_a_clear_error_and_leaves_no_index() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db.create_table("t", vec![Column::new("id", ColumnType::I64)])
            .unwrap();
        db.transaction(|t| {
            for i in 0..5 {
                t.insert("t", vec![Value::I64(i)])?;
            }
            Ok(())
        })
        .unwrap();
        let big = "x".repeat(3_000);
        db.add_column(
            "t",
            Column::new("s", ColumnType::Text).with_default(big.as_str()),
        )
        .unwrap();
        for unique in [false, true] {
            let e = db.create_index("t_s", "t", "s", unique).unwrap_err();
            assert!(
                matches!(e, EngineError::KeyTooLarge { .. }) && e.to_string().contains("t_s"),
                "{e}"
            );
            assert!(db.index_handle("t_s").is_err());
        }
        // The old rows still read the default, and the table takes an index
        // once the key fits.
        let rows = db
            .read_transaction(|t| t.scan("t")?.collect::<Result<Vec<_>, _>>())
            .unwrap();
        assert_eq!(rows.len(), 5);
        assert!(rows.iter().all(|(_, r)| r.text("s").unwrap() == big));
        db.create_index("t_id", "t", "id", true).unwrap();
        assert!(db.verify_indexes("t").unwrap().is_empty());
    });
}

#[test]
fn an_old_row_too_wide_to_rewrite_with_its_default_is_refused_on_update_and_still_reads() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db.create_table(
            "t",
            vec![
                Column::new("id", ColumnType::I64),
                Column::new("b", ColumnType::Bytes),
            ],
        )
        .unwrap();
        let wide = vec![7u8; 6_000];
        let rid = db
            .transaction(|t| t.insert("t", vec![Value::I64(1), Value::Bytes(wide.clone())]))
            .unwrap();
        let default = "d".repeat(3_000);
        db.add_column(
            "t",
            Column::new("s", ColumnType::Text).with_default(default.as_str()),
        )
        .unwrap();
        let e = db
            .transaction(|t| {
                let row = t.get("t", rid)?.expect("the row is there");
                assert_eq!(row.text("s")?, default);
                t.update("t", rid, row)
            })
            .unwrap_err();
        assert!(
            matches!(e, EngineError::RowTooLarge { ref table, .. } if table == "t"),
            "{e}"
        );
        let row = db
            .read_transaction(|t| t.get("t", rid))
            .unwrap()
            .expect("the row is still there");
        assert_eq!(row.bytes("b").unwrap(), wide);
        assert_eq!(row.text("s").unwrap(), default);
        // A shorter value for the new column fits.
        db.transaction(|t| {
            t.update(
                "t",
                rid,
                vec![Value::I64(1), Value::Bytes(wide.clone()), Value::text("s")],
            )
        })
        .unwrap();
    });
}

/// Column `k` of the grown table (`k >= 1`): every third one nullable
/// without a default, the others NOT NULL with a default of a type that
/// cycles through all six.
fn grown_column(k: usize) -> Column {
    let ty = ColumnType::ALL[k % ColumnType::ALL.len()];
    let name = format!("c{k}");
    if k.is_multiple_of(3) {
        return Column::nullable(name, ty);
    }
    let d = value_of(ty, -(k as i64));
    Column::new(name, ty).with_default(d)
}

fn value_of(ty: ColumnType, i: i64) -> Value {
    match ty {
        ColumnType::I64 => Value::I64(i),
        ColumnType::Bytes => Value::Bytes(i.to_le_bytes().to_vec()),
        ColumnType::F64 => Value::F64(i as f64 + 0.5),
        ColumnType::Text => Value::text(format!("t{i}")),
        ColumnType::Bool => Value::Bool(i % 2 == 0),
        ColumnType::Timestamp => Value::Timestamp(i * 1_000_003),
    }
}

/// What a row written when the table had `width` columns reads once it has
/// `now` columns.
fn expected(id: i64, width: usize, now: usize) -> Vec<Value> {
    let mut row = vec![Value::I64(id)];
    for k in 1..now {
        let c = grown_column(k);
        row.push(if k < width {
            if (id + k as i64) % 4 == 0 && c.nullable {
                Value::Null
            } else {
                value_of(c.ty, id * 100 + k as i64)
            }
        } else {
            c.default.clone().unwrap_or(Value::Null)
        });
    }
    row
}

#[test]
fn columns_added_one_by_one_past_eight_and_sixteen_read_right_in_rows_of_every_width() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let mut db = open(dir.path());
        db.create_table("t", vec![Column::new("id", ColumnType::I64)])
            .unwrap();
        const LAST: usize = 20;
        let mut rows = Vec::new();
        for width in 1..=LAST {
            if width > 1 {
                db.add_column("t", grown_column(width - 1)).unwrap();
            }
            let id = width as i64;
            let rid = db
                .transaction(|t| t.insert("t", expected(id, width, width)))
                .unwrap();
            rows.push((id, width, rid));
            if width == 12 {
                db.create_index("t_c9", "t", "c9", false).unwrap();
            }
            if width % 5 == 0 {
                drop(db);
                db = open(dir.path());
            }
        }
        let table = db.table_handle("t").unwrap();
        let cols = table.columns();
        db.read_transaction(|t| {
            for &(id, width, rid) in &rows {
                let want = expected(id, width, LAST);
                assert_eq!(t.get("t", rid)?.unwrap(), want, "row of width {width}");
                t.get_with(&table, rid, |r| {
                    for (k, c) in cols.iter().enumerate() {
                        assert_eq!(r.value(*c).unwrap(), want[k], "width {width} column {k}");
                    }
                })?;
            }
            // The index on c9 (a nullable text column) finds every row by
            // what it reads there, defaults included.
            for &(id, width, _) in &rows {
                let v = expected(id, width, LAST)[9].clone();
                if v.is_null() {
                    continue;
                }
                let hits = t.index_lookup("t_c9", &v)?;
                assert!(
                    hits.iter().any(|(_, r)| r.i64("id").unwrap() == id),
                    "width {width}"
                );
            }
            Ok(())
        })
        .unwrap();
        assert!(db.verify_indexes("t").unwrap().is_empty());
    });
}

#[test]
fn float_keys_around_zero_and_nan_are_found_by_either_zero_and_any_nan() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db.create_table(
            "f",
            vec![
                Column::new("id", ColumnType::I64),
                Column::nullable("x", ColumnType::F64),
            ],
        )
        .unwrap();
        db.create_index("f_x", "f", "x", false).unwrap();
        let nan2 = f64::from_bits(0x7ff0_0000_0000_0001); // signalling
        let nan3 = f64::from_bits(0xfff8_dead_beef_0000); // negative, payload
        let xs = [
            -0.0,
            0.0,
            f64::NAN,
            nan2,
            nan3,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -f64::MIN_POSITIVE,
            f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
        ];
        db.transaction(|t| {
            for (i, x) in xs.iter().enumerate() {
                t.insert("f", vec![Value::I64(i as i64), Value::F64(*x)])?;
            }
            t.insert("f", vec![Value::I64(99), Value::Null])?;
            Ok(())
        })
        .unwrap();
        let ids = |lo: Bound<f64>, hi: Bound<f64>| -> Vec<i64> {
            let mut v: Vec<i64> = db
                .read_transaction(|t| {
                    t.index_range("f_x", lo.map(Value::F64), hi.map(Value::F64))?
                        .map(|r| r.map(|(_, row)| row.i64("id").unwrap()))
                        .collect()
                })
                .unwrap();
            v.sort();
            v
        };
        use Bound::{Excluded, Included, Unbounded};
        assert_eq!(ids(Included(-0.0), Included(0.0)), vec![0, 1]);
        assert_eq!(ids(Included(0.0), Included(-0.0)), vec![0, 1]);
        assert_eq!(ids(Excluded(-0.0), Excluded(f64::INFINITY)), vec![8, 9]);
        assert_eq!(ids(Excluded(f64::NEG_INFINITY), Excluded(0.0)), vec![7, 10]);
        assert_eq!(ids(Included(nan3), Included(nan2)), vec![2, 3, 4]);
        assert_eq!(ids(Excluded(f64::INFINITY), Unbounded), vec![2, 3, 4]);
        assert_eq!(
            ids(Unbounded, Excluded(f64::NAN)),
            vec![0, 1, 5, 6, 7, 8, 9, 10]
        );
        assert_eq!(
            ids(Unbounded, Unbounded).len(),
            xs.len(),
            "NULL not indexed"
        );
        // Rows keep the bits written.
        let back = db
            .read_transaction(|t| t.index_lookup("f_x", &Value::F64(f64::NAN)))
            .unwrap();
        let mut bits: Vec<u64> = back
            .iter()
            .map(|(_, r)| r.f64("x").unwrap().to_bits())
            .collect();
        bits.sort();
        let mut want: Vec<u64> = [f64::NAN, nan2, nan3].iter().map(|x| x.to_bits()).collect();
        want.sort();
        assert_eq!(bits, want);
    });
}

#[test]
fn keys_of_every_new_type_update_and_delete_by_key_at_their_extremes() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let cases: Vec<(ColumnType, Vec<Value>)> = vec![
            (
                ColumnType::Timestamp,
                vec![
                    Value::Timestamp(i64::MIN),
                    Value::Timestamp(-1),
                    Value::Timestamp(0),
                    Value::Timestamp(i64::MAX),
                ],
            ),
            (
                ColumnType::F64,
                vec![
                    Value::F64(f64::NEG_INFINITY),
                    Value::F64(-0.0),
                    Value::F64(f64::MAX),
                    Value::F64(f64::NAN),
                ],
            ),
            (
                ColumnType::Text,
                vec![
                    Value::text(""),
                    Value::text("\0"),
                    Value::text("\0\0"),
                    Value::text("\u{10FFFF}"),
                ],
            ),
            (
                ColumnType::Bool,
                vec![Value::Bool(false), Value::Bool(true)],
            ),
        ];
        for (n, (ty, keys)) in cases.iter().enumerate() {
            let name = format!("t{n}");
            db.create_table(
                &name,
                vec![Column::new("k", *ty), Column::new("v", ColumnType::I64)],
            )
            .unwrap();
            db.create_index(&format!("{name}_k"), &name, "k", true)
                .unwrap();
            db.transaction(|t| {
                for (i, k) in keys.iter().enumerate() {
                    t.insert(name.as_str(), vec![k.clone(), Value::I64(i as i64)])?;
                }
                Ok(())
            })
            .unwrap();
            // The equal-but-different-bits key of a float is a duplicate.
            if *ty == ColumnType::F64 {
                let e = db
                    .transaction(|t| t.insert(name.as_str(), vec![Value::F64(0.0), Value::I64(9)]))
                    .unwrap_err();
                assert!(matches!(e, EngineError::UniqueViolation { .. }), "{e}");
            }
            db.transaction(|t| {
                for (i, k) in keys.iter().enumerate() {
                    let got = t.get_by_key(name.as_str(), "k", k)?.expect("found");
                    assert_eq!(got.1.i64("v")?, i as i64, "{ty} key {k:?}");
                    let moved = t.update_by_key(
                        name.as_str(),
                        "k",
                        k,
                        vec![k.clone(), Value::I64(100 + i as i64)],
                    )?;
                    assert!(moved.is_some(), "{ty} key {k:?}");
                }
                Ok(())
            })
            .unwrap();
            db.transaction(|t| {
                for (i, k) in keys.iter().enumerate() {
                    let got = t.get_by_key(name.as_str(), "k", k)?.expect("found");
                    assert_eq!(got.1.i64("v")?, 100 + i as i64);
                    assert!(t.delete_by_key(name.as_str(), "k", k)?);
                    assert!(t.get_by_key(name.as_str(), "k", k)?.is_none());
                }
                Ok(())
            })
            .unwrap();
            // A key of another type is a type error, not a miss.
            let e = db
                .read_transaction(|t| t.get_by_key(name.as_str(), "k", &Value::I64(1)))
                .unwrap_err();
            if *ty != ColumnType::I64 {
                assert!(matches!(e, EngineError::TypeMismatch { .. }), "{e}");
            }
            db.vacuum(&name).unwrap();
            assert!(db.verify_indexes(&name).unwrap().is_empty());
        }
    });
}

#[test]
fn a_scan_held_across_add_column_on_the_same_thread_yields_every_row_once() {
    watchdog(LIMIT, || {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db.create_table(
            "t",
            vec![
                Column::new("id", ColumnType::I64),
                Column::new("pad", ColumnType::Bytes),
            ],
        )
        .unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        db.transaction(|t| {
            for i in 0..400 {
                t.insert("t", vec![Value::I64(i), Value::Bytes(vec![1; 200])])?;
            }
            Ok(())
        })
        .unwrap();
        let txn = db.begin().unwrap();
        let mut scan = txn.scan("t").unwrap();
        let mut range = txn
            .index_range("t_id", Bound::Unbounded, Bound::Unbounded)
            .unwrap();
        let mut seen = Vec::new();
        let mut ranged = Vec::new();
        for _ in 0..10 {
            seen.push(scan.next().unwrap().unwrap().1.i64("id").unwrap());
            ranged.push(range.next().unwrap().unwrap().1.i64("id").unwrap());
        }
        db.add_column(
            "t",
            Column::new("flag", ColumnType::Bool).with_default(true),
        )
        .unwrap();
        for r in scan {
            let (_, row) = r.unwrap();
            seen.push(row.i64("id").unwrap());
        }
        for r in range {
            let (_, row) = r.unwrap();
            ranged.push(row.i64("id").unwrap());
        }
        seen.sort();
        assert_eq!(seen, (0..400).collect::<Vec<_>>());
        assert_eq!(ranged, (0..400).collect::<Vec<_>>());
        txn.commit().unwrap();
    });
}

#[test]
fn add_column_while_writers_commit_loses_no_row_and_the_indexes_verify() {
    watchdog(Duration::from_secs(300), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(open(dir.path()));
        db.create_table("t", vec![Column::new("id", ColumnType::I64)])
            .unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let (db, stop) = (db.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut done = Vec::new();
                    let mut i = 0i64;
                    while !stop.load(Ordering::Relaxed) {
                        let id = w * 1_000_000 + i;
                        // Build the row for the width the table has now; a
                        // column added meanwhile is a clear error: retry.
                        let r = db.transaction(|t| {
                            let width = db.table("t")?.columns.len();
                            let mut row = vec![Value::I64(id)];
                            row.resize(width, Value::Null);
                            t.insert("t", row)
                        });
                        match r {
                            Ok(_) => {
                                done.push(id);
                                i += 1;
                            }
                            Err(EngineError::WrongColumnCount { .. }) => {}
                            Err(e) => panic!("writer {w}: {e}"),
                        }
                    }
                    done
                })
            })
            .collect();
        let reader = {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    db.read_transaction(|t| {
                        for r in t.scan("t")? {
                            let (_, row) = r?;
                            assert_eq!(row.len(), row.table().columns.len());
                            for c in &row.table().columns[1..] {
                                assert!(row.value(c.name.as_str())?.is_null());
                            }
                        }
                        Ok(())
                    })
                    .unwrap();
                }
            })
        };
        for k in 0..12 {
            std::thread::sleep(Duration::from_millis(30));
            db.add_column("t", Column::nullable(format!("c{k}"), ColumnType::Text))
                .unwrap();
            if k % 4 == 1 {
                db.vacuum("t").unwrap();
            }
            if k % 4 == 3 {
                db.checkpoint().unwrap();
            }
        }
        stop.store(true, Ordering::Relaxed);
        let mut want: Vec<i64> = writers
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        reader.join().unwrap();
        want.sort();
        let mut got: Vec<i64> = db
            .read_transaction(|t| {
                t.scan("t")?
                    .map(|r| r.map(|(_, row)| row.i64("id").unwrap()))
                    .collect()
            })
            .unwrap();
        got.sort();
        assert!(!want.is_empty());
        assert_eq!(got, want);
        assert_eq!(db.table("t").unwrap().columns.len(), 13);
        assert!(db.verify_indexes("t").unwrap().is_empty());
    });
}

/// A column handle resolved in one database names a table by its relation
/// id, and another database's table may have the same id (both are the
/// first table created): reading a row through it must not read another
/// column's bytes as if they were its type.
#[test]
fn a_column_handle_of_another_database_is_refused_not_read_as_its_type() {
    watchdog(LIMIT, || {
        let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = open(a_dir.path());
        let b = open(b_dir.path());
        a.create_table(
            "t",
            vec![
                Column::new("id", ColumnType::I64),
                Column::new("ok", ColumnType::Bool),
            ],
        )
        .unwrap();
        b.create_table(
            "t",
            vec![
                Column::new("id", ColumnType::I64),
                Column::new("n", ColumnType::I64),
            ],
        )
        .unwrap();
        let ok_of_a = a.table_handle("t").unwrap().column("ok").unwrap();
        let tb = b.table_handle("t").unwrap();
        let rid = b
            .transaction(|t| t.insert("t", vec![Value::I64(1), Value::I64(1)]))
            .unwrap();
        b.read_transaction(|t| {
            t.get_with(&tb, rid, |r| {
                let e = r.bool(ok_of_a).unwrap_err();
                assert!(matches!(e, EngineError::WrongColumn { .. }), "{e}");
            })?;
            let row = t.get(&tb, rid)?.unwrap();
            let e = row.bool(ok_of_a).unwrap_err();
            assert!(matches!(e, EngineError::WrongColumn { .. }), "{e}");
            Ok(())
        })
        .unwrap();
        // Same type at the same position, but the columns before it differ:
        // the handle's precomputed offset is another column's bytes there.
        a.create_table(
            "u",
            vec![
                Column::new("x", ColumnType::Bytes),
                Column::new("n", ColumnType::I64),
            ],
        )
        .unwrap();
        b.create_table(
            "u",
            vec![
                Column::new("x", ColumnType::I64),
                Column::new("n", ColumnType::I64),
            ],
        )
        .unwrap();
        let n_of_b = b.table_handle("u").unwrap().column("n").unwrap();
        let ua = a.table_handle("u").unwrap();
        let rid = a
            .transaction(|t| t.insert("u", vec![Value::Bytes(vec![9; 12]), Value::I64(5)]))
            .unwrap();
        a.read_transaction(|t| {
            t.get_with(&ua, rid, |r| {
                let e = r.i64(n_of_b).unwrap_err();
                assert!(matches!(e, EngineError::WrongColumn { .. }), "{e}");
                assert_eq!(r.i64("n").unwrap(), 5);
            })
        })
        .unwrap();
    });
}
