//! Rows of a table scan (`txn.scan(t)`) are copies of their tuples, decoded
//! on access: they keep reading what the scan read after their transaction,
//! their page and their database are gone and the row changed, and a
//! projection reads only columns of the scanned table.

mod common;

use std::time::Duration;

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, EngineError, Value};

fn every_type() -> Vec<Column> {
    vec![
        Column::new("id", ColumnType::I64),
        Column::nullable("f", ColumnType::F64),
        Column::nullable("t", ColumnType::Text),
        Column::nullable("b", ColumnType::Bytes),
        Column::nullable("ok", ColumnType::Bool),
        Column::nullable("ts", ColumnType::Timestamp),
    ]
}

fn values(i: i64) -> Vec<Value> {
    let f = match i % 4 {
        0 => Value::F64(f64::NAN),
        1 => Value::F64(-0.0),
        2 => Value::Null,
        _ => Value::F64(i as f64 / 3.0),
    };
    let t = match i % 3 {
        0 => Value::text(""),
        1 => Value::text(format!(
            "h\u{e9}llo \u{1F600} {i} {}",
            "x".repeat(i as usize % 50)
        )),
        _ => Value::Null,
    };
    vec![
        Value::I64(i),
        f,
        t,
        if i % 5 == 0 {
            Value::Null
        } else {
            Value::Bytes(vec![i as u8; i as usize % 40])
        },
        if i % 7 == 0 {
            Value::Null
        } else {
            Value::Bool(i % 2 == 0)
        },
        Value::Timestamp(-i * 1_000_003),
    ]
}

#[test]
fn projecting_a_column_of_another_table_is_wrong_column_not_a_value_of_this_one() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table(
            "narrow",
            vec![
                Column::new("a", ColumnType::I64),
                Column::new("b", ColumnType::I64),
            ],
        )
        .unwrap();
        db.create_table(
            "wide",
            vec![
                Column::new("x", ColumnType::I64),
                Column::new("y", ColumnType::I64),
                Column::new("z", ColumnType::I64),
            ],
        )
        .unwrap();
        let t = db.begin().unwrap();
        t.insert("narrow", vec![Value::I64(1), Value::I64(2)])
            .unwrap();
        t.commit().unwrap();
        let wide = db.table_handle("wide").unwrap();
        // `y` has `b`'s position and type: read through `narrow` it would
        // be `b`'s value. `z` is past `narrow`'s last column.
        for name in ["y", "z"] {
            let col = wide.column(name).unwrap();
            let t = db.read().unwrap();
            let mut out = Vec::new();
            for r in t.scan("narrow").unwrap().project(&[col]) {
                out.push(r.map(|(_, row)| row.values().to_vec()));
            }
            assert!(
                matches!(out.first(), Some(Err(EngineError::WrongColumn { .. }))),
                "projecting wide.{name} over narrow gave {out:?}"
            );
            assert!(
                out.iter().all(|r| r.is_err()),
                "no row of narrow is read as wide.{name}: {out:?}"
            );
        }
    });
}

#[test]
fn kept_rows_read_what_the_scan_read_after_updates_vacuum_eviction_and_close() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options().pool_buffers(16)).unwrap();
        db.create_table("all", every_type()).unwrap();
        let t = db.begin().unwrap();
        for i in 0..3000 {
            t.insert("all", values(i)).unwrap();
        }
        t.commit().unwrap();

        // What the rows read, in row-id order (not insertion order: a
        // short row fills the room an earlier page has left).
        let mut order = Vec::new();
        db.read()
            .unwrap()
            .scan_each("all", |r| {
                order.push(r.i64("id")?);
                Ok(())
            })
            .unwrap();
        // Keep every 7th row of a scan whose transaction then ends.
        let t = db.begin().unwrap();
        let kept: Vec<_> = t
            .scan("all")
            .unwrap()
            .step_by(7)
            .map(|r| r.unwrap())
            .collect();
        t.rollback().unwrap();
        assert_eq!(kept.len(), 3000usize.div_ceil(7));

        // Change every row, delete some, vacuum, and read the table through
        // a 16-buffer pool many times over so that every page is evicted
        // and its buffer reused by other pages.
        let w = db.begin().unwrap();
        let ids: Vec<_> = w.scan("all").unwrap().map(|r| r.unwrap().0).collect();
        for (n, id) in ids.into_iter().enumerate() {
            if n % 2 == 0 {
                w.delete("all", id).unwrap();
            } else {
                w.update("all", id, values(100_000 + n as i64)).unwrap();
            }
        }
        w.commit().unwrap();
        db.vacuum("all").unwrap();
        let w = db.begin().unwrap();
        for i in 0..3000 {
            w.insert("all", values(500_000 + i)).unwrap();
        }
        w.commit().unwrap();
        db.close().unwrap();
        let db = Database::open(dir.path(), small_options().pool_buffers(16)).unwrap();
        let r = db.read().unwrap();
        assert!(r.scan("all").unwrap().count() > 3000);
        drop(r);

        for (n, (_, row)) in kept.iter().enumerate() {
            let i = order[n * 7];
            let want = values(i);
            // Typed accessors first (decoded from the copy), then values.
            assert_eq!(row.i64("id").unwrap(), i);
            assert_eq!(row.timestamp("ts").unwrap(), -i * 1_000_003);
            match &want[1] {
                Value::F64(f) => {
                    assert_eq!(row.f64("f").unwrap().to_bits(), f.to_bits(), "row {i}")
                }
                _ => assert_eq!(row.f64_opt("f").unwrap(), None),
            }
            assert_eq!(row.text_opt("t").unwrap(), want[2].as_text(), "row {i}");
            assert_eq!(row.bytes_opt("b").unwrap(), want[3].as_bytes(), "row {i}");
            assert_eq!(row.bool_opt("ok").unwrap(), want[4].as_bool(), "row {i}");
            let clone = row.clone();
            assert_eq!(*row, want, "row {i}");
            assert_eq!(clone, want, "row {i}");
            assert_eq!(format!("{row:?}"), format!("{want:?}"));
        }
        db.close().unwrap();
    });
}

#[test]
fn kept_rows_of_one_page_are_read_alike_from_many_threads() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("all", every_type()).unwrap();
        let t = db.begin().unwrap();
        for i in 0..40 {
            t.insert("all", values(i)).unwrap();
        }
        t.commit().unwrap();
        let rows: Vec<_> = db
            .read()
            .unwrap()
            .scan("all")
            .unwrap()
            .map(|r| r.unwrap().1)
            .collect();
        let rows = std::sync::Arc::new(rows);
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let rows = rows.clone();
                std::thread::spawn(move || {
                    for (i, row) in rows.iter().enumerate() {
                        assert_eq!(row.i64("id").unwrap(), i as i64);
                        assert_eq!(*row, values(i as i64));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
}

/// Rows are handed to another thread as they come, some dropped there at
/// once and some kept, while the scan goes on to later pages (whose copies
/// reuse the buffers of pages no row holds any more); the scan is dropped
/// midway, with rows of its page in hand not yet handed out. Every row
/// handed out reads its own values to the end.
#[test]
fn rows_sent_to_another_thread_while_the_scan_goes_on_and_stops_midway_read_their_own_values() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("all", every_type()).unwrap();
        let t = db.begin().unwrap();
        for i in 0..600 {
            t.insert("all", values(i)).unwrap();
        }
        t.commit().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<(i64, engine::OwnedRow)>();
        let reader = std::thread::spawn(move || {
            let mut kept = Vec::new();
            for (i, row) in rx {
                assert_eq!(*row, values(i), "row {i} as received");
                if i % 3 == 0 {
                    kept.push((i, row));
                }
            }
            for (i, row) in &kept {
                assert_eq!(*row, values(*i), "row {i} read after the scan was gone");
            }
            kept.len()
        });
        let txn = db.read().unwrap();
        let mut it = txn.scan("all").unwrap();
        let mut pages = std::collections::BTreeSet::new();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..450 {
            let (id, row) = it.next().expect("a row").unwrap();
            let i = row.i64("id").unwrap();
            assert!(seen.insert(i), "row {i} handed out twice");
            pages.insert(id.block);
            tx.send((i, row)).unwrap();
        }
        assert!(pages.len() > 3, "the rows span pages: {pages:?}");
        drop(it);
        drop(txn);
        drop(tx);
        let kept = seen.iter().filter(|&&i| i % 3 == 0).count();
        assert_eq!(reader.join().unwrap(), kept);
    });
}

#[test]
fn scanned_rows_stored_before_add_column_read_its_default_or_null_through_every_projection() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table(
            "t",
            vec![
                Column::new("id", ColumnType::I64),
                Column::nullable("name", ColumnType::Text),
            ],
        )
        .unwrap();
        let w = db.begin().unwrap();
        for i in 0..20 {
            w.insert("t", vec![Value::I64(i), Value::text(format!("n{i}"))])
                .unwrap();
        }
        w.commit().unwrap();
        db.add_column("t", Column::nullable("n", ColumnType::I64))
            .unwrap();
        db.add_column(
            "t",
            Column::new("d", ColumnType::Text).with_default("d\u{e9}faut"),
        )
        .unwrap();
        db.add_column(
            "t",
            Column::new("f", ColumnType::F64).with_default(Value::F64(-0.0)),
        )
        .unwrap();
        let w = db.begin().unwrap();
        w.insert(
            "t",
            vec![
                Value::I64(20),
                Value::Null,
                Value::I64(7),
                Value::text(""),
                Value::F64(f64::NAN),
            ],
        )
        .unwrap();
        w.commit().unwrap();

        let h = db.table_handle("t").unwrap();
        let (id, n, d, f) = (
            h.column("id").unwrap(),
            h.column("n").unwrap(),
            h.column("d").unwrap(),
            h.column("f").unwrap(),
        );
        let r = db.read().unwrap();
        let rows: Vec<_> = r.scan("t").unwrap().map(|x| x.unwrap().1).collect();
        assert_eq!(rows.len(), 21);
        for row in &rows {
            let i = row.i64(id).unwrap();
            if i < 20 {
                assert_eq!(row.i64_opt(n).unwrap(), None);
                assert!(matches!(row.i64(n), Err(EngineError::WrongColumn { .. })));
                assert_eq!(row.text(d).unwrap(), "d\u{e9}faut");
                assert_eq!(row.f64(f).unwrap().to_bits(), (-0.0f64).to_bits());
                assert_eq!(
                    row.values(),
                    &[
                        Value::I64(i),
                        Value::text(format!("n{i}")),
                        Value::Null,
                        Value::text("d\u{e9}faut"),
                        Value::F64(-0.0),
                    ]
                );
            } else {
                assert_eq!(row.text_opt("name").unwrap(), None);
                assert_eq!(row.i64(n).unwrap(), 7);
                assert_eq!(row.text(d).unwrap(), "");
                assert!(row.f64(f).unwrap().is_nan());
            }
        }

        // Repeated, reordered, none: each row reads exactly those columns.
        let projected: Vec<_> = r
            .scan("t")
            .unwrap()
            .project(&[d, id, d, n])
            .map(|x| x.unwrap().1)
            .collect();
        for (row, whole) in projected.iter().zip(&rows) {
            assert_eq!(row.len(), 4);
            assert_eq!(row[0], whole[3]);
            assert_eq!(row[1], whole[0]);
            assert_eq!(row[2], whole[3]);
            assert_eq!(row[3], whole[2]);
            assert_eq!(row.text(d).unwrap(), whole.text(d).unwrap());
            assert_eq!(row.i64_opt(n).unwrap(), whole.i64_opt(n).unwrap());
            assert!(matches!(
                row.text_opt("name"),
                Err(EngineError::WrongColumn { .. })
            ));
        }
        let empty: Vec<_> = r
            .scan("t")
            .unwrap()
            .matching(move |row| Ok(row.i64(id)? % 2 == 0))
            .project(&[])
            .map(|x| x.unwrap().1)
            .collect();
        assert_eq!(empty.len(), 11);
        for row in &empty {
            assert!(row.is_empty());
            assert_eq!(*row, Vec::<Value>::new());
            assert!(matches!(row.i64(id), Err(EngineError::WrongColumn { .. })));
        }
    });
}

#[test]
fn a_damaged_length_pointing_past_the_tuple_is_a_corrupt_row_for_the_scan_and_its_filter() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        // Without checksums the damaged page is read as it is.
        let options = || small_options().checksums(false);
        let marker = "MARKER-len-5e1d";
        let (rel, rids) = {
            let db = Database::open(dir.path(), options()).unwrap();
            let info = db
                .create_table(
                    "docs",
                    vec![
                        Column::new("id", ColumnType::I64),
                        Column::new("body", ColumnType::Text),
                        Column::new("n", ColumnType::I64),
                    ],
                )
                .unwrap();
            let t = db.begin().unwrap();
            let rids: Vec<_> = [(1, "first"), (2, marker), (3, "third")]
                .into_iter()
                .map(|(i, body)| {
                    t.insert(
                        "docs",
                        vec![Value::I64(i), Value::text(body), Value::I64(i)],
                    )
                    .unwrap()
                })
                .collect();
            t.commit().unwrap();
            db.checkpoint().unwrap();
            db.close().unwrap();
            (info.rel, rids)
        };
        let file = dir.path().join("base").join(rel.0.to_string());
        let mut bytes = std::fs::read(&file).unwrap();
        let at = bytes
            .windows(marker.len())
            .position(|w| w == marker.as_bytes())
            .expect("the text is on the page");
        // The text's length prefix, made to reach far past the page.
        bytes[at - 4..at].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        std::fs::write(&file, &bytes).unwrap();

        let db = Database::open(dir.path(), options()).unwrap();
        let t = db.read().unwrap();
        let check = |out: Vec<engine::Result<(engine::RowId, engine::OwnedRow)>>| {
            assert_eq!(out.len(), 3, "{out:?}");
            let (rid, row) = out[0].as_ref().unwrap();
            assert_eq!((*rid, row.i64("n").unwrap()), (rids[0], 1));
            let e = out[1].as_ref().unwrap_err();
            assert!(matches!(e, EngineError::CorruptRow { .. }), "{e}");
            let msg = e.to_string();
            assert!(
                msg.contains("docs") && msg.contains(&rids[1].to_string()),
                "{msg}"
            );
            let (rid, row) = out[2].as_ref().unwrap();
            assert_eq!((*rid, row.text("body").unwrap()), (rids[2], "third"));
        };
        check(t.scan("docs").unwrap().collect());
        // A filter reading the column after the damaged one meets the
        // damage itself.
        check(
            t.scan("docs")
                .unwrap()
                .matching(|r| Ok(r.i64("n")? > 0))
                .collect(),
        );
        check(
            t.scan("docs")
                .unwrap()
                .project(&[db.table_handle("docs").unwrap().column("n").unwrap()])
                .collect::<Vec<_>>()
                .into_iter()
                .map(|r| {
                    r.map(|(id, row)| {
                        // Give the projected row the whole row's reads.
                        let whole = t.get("docs", id).unwrap().unwrap();
                        assert_eq!(row[0], whole[2]);
                        (id, whole)
                    })
                })
                .collect(),
        );
    });
}

#[test]
fn bad_text_or_bool_bytes_in_a_row_without_nulls_are_a_corrupt_row_naming_table_and_row() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        // Without checksums the damaged page is read as it is.
        let options = || small_options().checksums(false);
        let text_marker = "MARKER-utf8-71c2";
        let bool_marker = "MARKER-bool-0d4e";
        let (rel, rids) = {
            let db = Database::open(dir.path(), options()).unwrap();
            let info = db
                .create_table(
                    "flags",
                    vec![
                        Column::new("id", ColumnType::I64),
                        Column::new("body", ColumnType::Text),
                        Column::new("ok", ColumnType::Bool),
                    ],
                )
                .unwrap();
            let t = db.begin().unwrap();
            let rids: Vec<_> = [
                (1, "first"),
                (2, text_marker),
                (3, bool_marker),
                (4, "last"),
            ]
            .into_iter()
            .map(|(i, body)| {
                t.insert(
                    "flags",
                    vec![Value::I64(i), Value::text(body), Value::Bool(true)],
                )
                .unwrap()
            })
            .collect();
            t.commit().unwrap();
            db.checkpoint().unwrap();
            db.close().unwrap();
            (info.rel, rids)
        };
        let file = dir.path().join("base").join(rel.0.to_string());
        let mut bytes = std::fs::read(&file).unwrap();
        let find = |bytes: &[u8], m: &str| {
            bytes
                .windows(m.len())
                .position(|w| w == m.as_bytes())
                .expect("the text is on the page")
        };
        // A byte that never starts a UTF-8 character, inside the text.
        let at = find(&bytes, text_marker);
        bytes[at] = 0xFF;
        // The bool after the text: neither 0 nor 1.
        let at = find(&bytes, bool_marker) + bool_marker.len();
        assert_eq!(bytes[at], 1, "the bool follows the text");
        bytes[at] = 7;
        std::fs::write(&file, &bytes).unwrap();

        let db = Database::open(dir.path(), options()).unwrap();
        let t = db.read().unwrap();
        let out: Vec<_> = t.scan("flags").unwrap().collect();
        assert_eq!(out.len(), 4, "{out:?}");
        for (n, what) in [(1, "UTF-8"), (2, "bool")] {
            let e = out[n].as_ref().unwrap_err();
            assert!(matches!(e, EngineError::CorruptRow { .. }), "{e}");
            let msg = e.to_string();
            assert!(
                msg.contains("flags") && msg.contains(&rids[n].to_string()) && msg.contains(what),
                "{msg}"
            );
        }
        let (rid, row) = out[3].as_ref().unwrap();
        assert_eq!(*rid, rids[3]);
        assert_eq!(row.text("body").unwrap(), "last");
        assert_eq!(
            *row,
            vec![Value::I64(4), Value::text("last"), Value::Bool(true)]
        );
    });
}

#[test]
fn a_scanned_row_and_its_clones_read_the_same_values_after_the_scan_moved_past_its_page() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options().pool_buffers(16)).unwrap();
        db.create_table("all", every_type()).unwrap();
        let t = db.begin().unwrap();
        for i in 0..600 {
            t.insert("all", values(i)).unwrap();
        }
        t.commit().unwrap();
        let r = db.read().unwrap();
        let mut it = r.scan("all").unwrap();
        let (_, first) = it.next().unwrap().unwrap();
        let i = first.i64("id").unwrap();
        // A clone made before the values are built, one after.
        let early = first.clone();
        assert_eq!(first.values(), values(i).as_slice());
        let late = first.clone();
        // Read the rest of the table: other pages' copies, the first one's
        // other rows handed out and dropped.
        let mut rest = 0;
        for r in it {
            r.unwrap();
            rest += 1;
        }
        assert!(rest > 500, "{rest} rows after the first");
        drop(r);
        db.close().unwrap();
        for row in [&first, &early, &late] {
            assert_eq!(row.i64("id").unwrap(), i);
            assert_eq!(*row, values(i));
        }
        // Changing one in place changes neither the others nor what they
        // read; taking the values out of one leaves the others whole.
        let mut changed = early.clone();
        changed[0] = Value::I64(-1);
        assert_eq!(changed.i64("id").unwrap(), -1);
        assert_eq!(early.i64("id").unwrap(), i);
        assert_eq!(late.clone().into_values(), values(i));
        assert_eq!(early.into_values(), values(i));
        assert_eq!(*late, values(i));
    });
}

#[test]
fn scans_beside_an_updater_see_whole_rows_and_every_row_once() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options().pool_buffers(24)).unwrap();
        db.create_table(
            "pairs",
            vec![
                Column::new("id", ColumnType::I64),
                Column::new("a", ColumnType::Text),
                Column::new("b", ColumnType::I64),
            ],
        )
        .unwrap();
        let rows = 2000i64;
        let w = db.begin().unwrap();
        for i in 0..rows {
            w.insert(
                "pairs",
                vec![Value::I64(i), Value::text("0"), Value::I64(0)],
            )
            .unwrap();
        }
        w.commit().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let updater = {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut k = 0i64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    k += 1;
                    let w = db.begin().unwrap();
                    let ids: Vec<_> = w
                        .scan("pairs")
                        .unwrap()
                        .step_by(13)
                        .map(|r| r.unwrap())
                        .collect();
                    for (id, row) in ids {
                        let mut v = row.clone();
                        v[1] = Value::text(format!("{k}{}", "x".repeat(k as usize % 30)));
                        v[2] = Value::I64(k);
                        w.update("pairs", id, v).unwrap();
                    }
                    w.commit().unwrap();
                }
                k
            })
        };
        let scanners: Vec<_> = (0..2)
            .map(|_| {
                let db = db.clone();
                std::thread::spawn(move || {
                    for _ in 0..15 {
                        let t = db.read().unwrap();
                        let kept: Vec<_> = t.scan("pairs").unwrap().map(|r| r.unwrap().1).collect();
                        t.commit().unwrap();
                        let mut seen = vec![false; rows as usize];
                        for row in &kept {
                            let id = row.i64("id").unwrap() as usize;
                            assert!(!seen[id], "row {id} twice");
                            seen[id] = true;
                            let b = row.i64("b").unwrap();
                            let a = row.text("a").unwrap();
                            assert_eq!(
                                a,
                                format!(
                                    "{b}{}",
                                    "x".repeat(if b == 0 { 0 } else { b as usize % 30 })
                                ),
                                "row {id}"
                            );
                        }
                        assert!(seen.iter().all(|&s| s), "every row once");
                    }
                })
            })
            .collect();
        for s in scanners {
            s.join().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(updater.join().unwrap() > 0);
    });
}

/// A page's kept tuples are copied in one span when they cover at least
/// half of it, each on its own otherwise (a selective filter): rows kept
/// by filters of every selectivity, over pages with dead tuples between
/// live ones, read their own values after the table changed and was
/// vacuumed, through the typed accessors and as values, each page's rows
/// their values built for one of them first.
#[test]
fn rows_kept_by_filters_of_every_selectivity_read_their_own_values_after_the_table_changed() {
    watchdog(Duration::from_secs(120), || {
        let db = Database::open_temporary(small_options().pool_buffers(32)).unwrap();
        db.create_table("all", every_type()).unwrap();
        let w = db.begin().unwrap();
        for i in 0..2000 {
            w.insert("all", values(i)).unwrap();
        }
        w.commit().unwrap();
        // Dead tuples between the live ones: every fifth row deleted, and
        // no vacuum yet, so they stay on their pages.
        let w = db.begin().unwrap();
        let ids: Vec<_> = w.scan("all").unwrap().map(|r| r.unwrap()).collect();
        for (id, row) in &ids {
            if row.i64("id").unwrap() % 5 == 0 {
                w.delete("all", *id).unwrap();
            }
        }
        w.commit().unwrap();
        let live = |i: i64| i % 5 != 0;

        // Keep every row, 2 in 3, 1 in 3, 1 in 50, none.
        let keeps: [(i64, i64); 5] = [(1, 1), (3, 2), (3, 1), (50, 1), (1, 0)];
        let r = db.begin().unwrap();
        let kept: Vec<_> = keeps
            .iter()
            .map(|&(every, of)| {
                let rows: Vec<_> = r
                    .scan("all")
                    .unwrap()
                    .matching(move |row| Ok(row.i64("id")? % every < of))
                    .map(|r| r.unwrap().1)
                    .collect();
                ((every, of), rows)
            })
            .collect();
        r.commit().unwrap();

        // Change every row left, vacuum, and write new ones in the room.
        let w = db.begin().unwrap();
        let ids: Vec<_> = w.scan("all").unwrap().map(|r| r.unwrap().0).collect();
        for id in ids {
            w.update("all", id, values(900_000)).unwrap();
        }
        w.commit().unwrap();
        db.vacuum("all").unwrap();
        let w = db.begin().unwrap();
        for i in 0..500 {
            w.insert("all", values(700_000 + i)).unwrap();
        }
        w.commit().unwrap();

        for ((every, of), rows) in kept {
            let mut want_ids: Vec<i64> = (0..2000).filter(|&i| live(i) && i % every < of).collect();
            let mut got_ids: Vec<i64> = rows.iter().map(|row| row.i64("id").unwrap()).collect();
            want_ids.sort_unstable();
            got_ids.sort_unstable();
            assert_eq!(got_ids, want_ids, "filter keeping {of} in {every}");
            for (n, row) in rows.iter().enumerate() {
                let i = row.i64("id").unwrap();
                let want = values(i);
                assert_eq!(row.timestamp("ts").unwrap(), -i * 1_000_003, "row {i}");
                assert_eq!(row.text_opt("t").unwrap(), want[2].as_text(), "row {i}");
                assert_eq!(row.bytes_opt("b").unwrap(), want[3].as_bytes(), "row {i}");
                // Values built for some rows of a page, not for others.
                if n % 2 == 0 {
                    assert_eq!(*row, want, "row {i}, filter keeping {of} in {every}");
                    assert_eq!(row.clone().into_values(), want, "row {i}");
                } else {
                    assert_eq!(row.clone().into_values(), want, "row {i}");
                    assert_eq!(*row, want, "row {i}, filter keeping {of} in {every}");
                }
            }
        }
    });
}
