//! The column types (`I64`, `F64`, `Text`, `Bytes`, `Bool`, `Timestamp`)
//! through the public API: every read path returns what was written, NULLs
//! included; a value of the wrong type is an error naming table, column and
//! both types; damaged text on disk is a corrupt row, not a lossy string;
//! an index on each type orders its keys as the values order; all of it
//! survives a reopen.

mod common;

use std::ops::Bound;
use std::time::Duration;

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, EngineError, Row, Value};

fn typed_columns() -> Vec<Column> {
    vec![
        Column::new("id", ColumnType::I64),
        Column::nullable("f", ColumnType::F64),
        Column::nullable("s", ColumnType::Text),
        Column::nullable("b", ColumnType::Bytes),
        Column::nullable("ok", ColumnType::Bool),
        Column::nullable("at", ColumnType::Timestamp),
    ]
}

/// Row `i`: every third row NULL in the nullable columns, the others a mix
/// of awkward values (negative zero, NaN, infinities, non-ASCII text, empty
/// strings, times before the epoch).
fn typed_row(i: i64) -> Row {
    if i % 3 == 2 {
        return vec![
            Value::I64(i),
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
        ];
    }
    let floats = [
        -0.0,
        0.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -1.5,
        1e300,
    ];
    let texts = ["", "héllo", "日本語", "a\0b", "zz"];
    vec![
        Value::I64(i),
        Value::F64(floats[i as usize % floats.len()]),
        Value::text(texts[i as usize % texts.len()]),
        Value::Bytes(vec![i as u8; i as usize % 4]),
        Value::Bool(i % 2 == 0),
        Value::Timestamp((i - 5) * 1_000_000_007),
    ]
}

/// Values compare by bits for floats so a NaN or a -0.0 that came back as
/// something else is caught (`Value`'s equality treats -0.0 as 0.0).
fn same_bits(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Value::F64(p), Value::F64(q)) => p.to_bits() == q.to_bits(),
            _ => x == y,
        })
}

const ROWS: i64 = 40;

fn check_all_rows(db: &Database) {
    let t = db.begin().unwrap();
    let table = db.table_handle("typed").unwrap();
    let [id, f, s, b, ok, at] = <[_; 6]>::try_from(table.columns()).unwrap();
    let mut seen = 0;
    // Owned rows from the iterator, then the same rows by id and borrowed.
    for r in t.scan("typed").unwrap() {
        let (rid, row) = r.unwrap();
        let i = row[0].as_i64().unwrap();
        let want = typed_row(i);
        assert!(same_bits(&row, &want), "scan row {i}: {row:?} != {want:?}");
        let got = t.get("typed", rid).unwrap().unwrap();
        assert!(same_bits(&got, &want), "get row {i}");
        t.get_with(&table, rid, |r| {
            assert_eq!(r.i64(id).unwrap(), i);
            let fv = r.f64_opt(f).unwrap();
            assert_eq!(
                fv.map(f64::to_bits),
                want[1].as_f64().map(f64::to_bits),
                "row {i}"
            );
            assert_eq!(r.text_opt(s).unwrap(), want[2].as_text());
            assert_eq!(r.bytes_opt(b).unwrap(), want[3].as_bytes());
            assert_eq!(r.bool_opt(ok).unwrap(), want[4].as_bool());
            assert_eq!(r.timestamp_opt(at).unwrap(), want[5].as_timestamp());
            for (c, v) in [s, ok, at].into_iter().zip([&want[2], &want[4], &want[5]]) {
                assert_eq!(&r.value(c).unwrap(), v);
            }
            assert_eq!(r.value("s").unwrap(), want[2]);
            assert!(same_bits(&r.to_row().unwrap(), &want));
            if want[1].is_null() {
                let e = r.f64(f).unwrap_err();
                assert!(e.to_string().contains("f64_opt"), "{e}");
            } else {
                assert_eq!(r.text(s).unwrap(), want[2].as_text().unwrap());
                assert_eq!(r.bool(ok).unwrap(), i % 2 == 0);
                assert_eq!(r.timestamp(at).unwrap(), (i - 5) * 1_000_000_007);
            }
        })
        .unwrap()
        .unwrap();
        seen += 1;
    }
    assert_eq!(seen, ROWS);
    // The borrowed scan reads the same text.
    let mut texts = 0;
    t.scan_each(&table, |r| {
        if let Some(x) = r.text_opt(s)? {
            assert_eq!(Some(x), typed_row(r.i64(id)?)[2].as_text());
            texts += 1;
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(texts, (0..ROWS).filter(|i| i % 3 != 2).count());
    t.commit().unwrap();
}

#[test]
fn every_column_type_round_trips_through_every_read_path_and_a_reopen() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = Database::open(dir.path(), small_options()).unwrap();
            db.create_table("typed", typed_columns()).unwrap();
            let t = db.begin().unwrap();
            for i in 0..ROWS {
                t.insert("typed", typed_row(i)).unwrap();
            }
            t.commit().unwrap();
            check_all_rows(&db);
            db.close().unwrap();
        }
        let db = Database::open(dir.path(), small_options()).unwrap();
        let info = db.table("typed").unwrap();
        let types: Vec<ColumnType> = info.columns.iter().map(|c| c.ty).collect();
        assert_eq!(
            types,
            typed_columns().iter().map(|c| c.ty).collect::<Vec<_>>()
        );
        check_all_rows(&db);
    });
}

#[test]
fn a_value_of_the_wrong_type_is_an_error_naming_table_column_and_both_types() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("typed", typed_columns()).unwrap();
        db.create_index("typed_f", "typed", "f", false).unwrap();
        let t = db.begin().unwrap();
        // Each column given a value of every other type.
        let samples = [
            Value::I64(1),
            Value::F64(1.0),
            Value::text("x"),
            Value::Bytes(b"x".to_vec()),
            Value::Bool(true),
            Value::Timestamp(1),
        ];
        let columns = typed_columns();
        for (ci, c) in columns.iter().enumerate() {
            for v in &samples {
                if c.ty.accepts(v) {
                    continue;
                }
                let mut row = typed_row(0);
                row[ci] = v.clone();
                let e = t.insert("typed", row).unwrap_err();
                assert!(matches!(e, EngineError::TypeMismatch { .. }), "{e}");
                let msg = e.to_string();
                for part in [
                    "\"typed\"".to_string(),
                    format!("{:?}", c.name),
                    c.ty.name().to_string(),
                    v.type_name().to_string(),
                ] {
                    assert!(msg.contains(&part), "{msg:?} lacks {part}");
                }
            }
        }
        // NULL in the NOT NULL column.
        let mut row = typed_row(0);
        row[0] = Value::Null;
        assert!(matches!(
            t.insert("typed", row).unwrap_err(),
            EngineError::NullNotAllowed { .. }
        ));
        // A string is text, not bytes.
        assert_eq!(Value::from("x"), Value::text("x"));
        assert_ne!(Value::from("x"), Value::Bytes(b"x".to_vec()));
        // A search value of the wrong type.
        let e = t.index_lookup("typed_f", &Value::I64(1)).unwrap_err();
        assert!(
            matches!(e, EngineError::TypeMismatch { .. })
                && e.to_string().contains("\"f\"")
                && e.to_string().contains("f64"),
            "{e}"
        );
        // A borrowed row read through an accessor of another type.
        let rid = t.insert("typed", typed_row(0)).unwrap();
        let table = db.table_handle("typed").unwrap();
        let s = table.column("s").unwrap();
        let e = t
            .get_with(&table, rid, |r| r.i64(s).map(|_| ()))
            .unwrap()
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(e, EngineError::WrongColumn { .. })
                && e.to_string().contains("\"s\"")
                && e.to_string().contains("text"),
            "{e}"
        );
        let e = t
            .get_with(&table, rid, |r| r.value("nope").map(|_| ()))
            .unwrap()
            .unwrap()
            .unwrap_err();
        assert!(matches!(e, EngineError::UnknownColumn { .. }), "{e}");
    });
}

#[test]
fn text_that_is_not_utf8_on_disk_is_a_corrupt_row_naming_table_and_row() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        // Without checksums the damaged page is read as it is, so the row
        // decoder is what must notice.
        let options = || small_options().checksums(false);
        let marker = "MARKER-text-9f3e";
        let (rel, rid) = {
            let db = Database::open(dir.path(), options()).unwrap();
            let info = db
                .create_table(
                    "docs",
                    vec![
                        Column::new("id", ColumnType::I64),
                        Column::new("body", ColumnType::Text),
                    ],
                )
                .unwrap();
            let t = db.begin().unwrap();
            let rid = t
                .insert("docs", vec![Value::I64(1), Value::text(marker)])
                .unwrap();
            t.commit().unwrap();
            db.checkpoint().unwrap();
            db.close().unwrap();
            (info.rel, rid)
        };
        let file = dir.path().join("base").join(rel.0.to_string());
        let mut bytes = std::fs::read(&file).unwrap();
        let at = bytes
            .windows(marker.len())
            .position(|w| w == marker.as_bytes())
            .expect("the text is on the page");
        // 0xFF never occurs in UTF-8.
        bytes[at + 3] = 0xFF;
        std::fs::write(&file, &bytes).unwrap();

        let db = Database::open(dir.path(), options()).unwrap();
        let t = db.begin().unwrap();
        let check = |e: EngineError| {
            assert!(matches!(e, EngineError::CorruptRow { .. }), "{e}");
            let msg = e.to_string();
            assert!(
                msg.contains("docs") && msg.contains(&rid.to_string()) && msg.contains("UTF-8"),
                "{msg}"
            );
        };
        check(t.get("docs", rid).unwrap_err());
        check(t.scan("docs").unwrap().next().unwrap().unwrap_err());
        let table = db.table_handle("docs").unwrap();
        let body = table.column("body").unwrap();
        let id = table.column("id").unwrap();
        let read = t
            .get_with(&table, rid, |r| {
                (r.i64(id).unwrap(), r.text(body).map(str::len))
            })
            .unwrap()
            .unwrap();
        assert_eq!(read.0, 1, "the intact column still reads");
        check(read.1.unwrap_err());
        // An index build over the damaged row fails instead of indexing a
        // lossy string.
        let e = db
            .create_index("docs_body", "docs", "body", false)
            .unwrap_err();
        assert!(matches!(e, EngineError::CorruptRow { .. }), "{e}");
    });
}

/// Keys of each type in ascending order (as the index must return them).
fn ordered_values(ty: ColumnType) -> Vec<Value> {
    match ty {
        ColumnType::I64 => [i64::MIN, -7, -1, 0, 1, 300, i64::MAX]
            .map(Value::I64)
            .to_vec(),
        ColumnType::Timestamp => [i64::MIN, -86_400_000_000, -1, 0, 1, 1_700_000_000_000_000]
            .map(Value::Timestamp)
            .to_vec(),
        ColumnType::F64 => [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -f64::MIN_POSITIVE,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            2.5,
            1e300,
            f64::INFINITY,
            f64::NAN,
        ]
        .map(Value::F64)
        .to_vec(),
        ColumnType::Text => ["", "A", "Z", "a", "a\0", "ab", "b", "é", "日"]
            .map(Value::text)
            .to_vec(),
        ColumnType::Bytes => [&b""[..], b"\0", b"\0\0", b"a", b"ab", b"\xff"]
            .map(|b| Value::Bytes(b.to_vec()))
            .to_vec(),
        ColumnType::Bool => vec![Value::Bool(false), Value::Bool(true)],
    }
}

#[test]
fn an_index_on_each_type_returns_keys_in_value_order_before_and_after_a_reopen() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let check = |db: &Database| {
            for ty in ColumnType::ALL {
                let name = format!("t_{}", ty.name());
                let want = ordered_values(ty);
                let t = db.begin().unwrap();
                let got: Vec<Value> = t
                    .index_range(format!("{name}_k"), Bound::Unbounded, Bound::Unbounded)
                    .unwrap()
                    .map(|r| r.unwrap().1[1].clone())
                    .collect();
                // Each value was inserted twice, NULLs are not indexed.
                let twice: Vec<Value> = want.iter().flat_map(|v| [v.clone(), v.clone()]).collect();
                assert_eq!(got, twice, "{ty}");
                // A bounded range and a lookup of each key.
                if want.len() > 2 {
                    let inner: Vec<Value> = t
                        .index_range(
                            format!("{name}_k"),
                            Bound::Excluded(want[0].clone()),
                            Bound::Included(want[want.len() - 2].clone()),
                        )
                        .unwrap()
                        .map(|r| r.unwrap().1[1].clone())
                        .collect();
                    assert_eq!(inner, twice[2..twice.len() - 2].to_vec(), "{ty}");
                }
                for v in &want {
                    assert_eq!(t.index_lookup(format!("{name}_k"), v).unwrap().len(), 2);
                }
                assert!(db.verify_indexes(&name).unwrap().is_empty(), "{ty}");
                t.commit().unwrap();
            }
        };
        {
            let db = Database::open(dir.path(), small_options()).unwrap();
            for ty in ColumnType::ALL {
                let name = format!("t_{}", ty.name());
                db.create_table(
                    &name,
                    vec![
                        Column::new("id", ColumnType::I64),
                        Column::nullable("k", ty),
                    ],
                )
                .unwrap();
                // Half the rows before the index (a build), half after
                // (inserts), in reverse order, with NULLs between.
                let mut vals = ordered_values(ty);
                vals.reverse();
                let t = db.begin().unwrap();
                for (i, v) in vals.iter().enumerate() {
                    t.insert(&name, vec![Value::I64(i as i64), v.clone()])
                        .unwrap();
                    t.insert(&name, vec![Value::I64(-1), Value::Null]).unwrap();
                }
                t.commit().unwrap();
                db.create_index(&format!("{name}_k"), &name, "k", false)
                    .unwrap();
                let t = db.begin().unwrap();
                for (i, v) in vals.iter().enumerate() {
                    t.insert(&name, vec![Value::I64(100 + i as i64), v.clone()])
                        .unwrap();
                }
                t.commit().unwrap();
            }
            check(&db);
            db.close().unwrap();
        }
        let db = Database::open(dir.path(), small_options()).unwrap();
        check(&db);
    });
}

#[test]
fn negative_zero_equals_zero_and_every_nan_is_one_key_in_a_float_index() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table(
            "m",
            vec![
                Column::new("id", ColumnType::I64),
                Column::new("x", ColumnType::F64),
            ],
        )
        .unwrap();
        db.create_index("m_x", "m", "x", true).unwrap();
        let t = db.begin().unwrap();
        t.insert("m", vec![Value::I64(1), Value::F64(0.0)]).unwrap();
        let e = t
            .insert("m", vec![Value::I64(2), Value::F64(-0.0)])
            .unwrap_err();
        assert!(
            matches!(e, EngineError::UniqueViolation { .. }) && e.to_string().contains("(0)"),
            "-0.0 is the key 0.0: {e}"
        );
        let quiet = f64::NAN;
        let other_nan = f64::from_bits(0xfff0_0000_0000_0001);
        assert!(other_nan.is_nan());
        t.insert("m", vec![Value::I64(3), Value::F64(quiet)])
            .unwrap();
        let e = t
            .insert("m", vec![Value::I64(4), Value::F64(other_nan)])
            .unwrap_err();
        assert!(
            matches!(e, EngineError::UniqueViolation { .. }) && e.to_string().contains("NaN"),
            "{e}"
        );
        // A lookup of -0.0 finds the 0.0 row; of any NaN, the NaN row.
        let hit = t.index_lookup("m_x", &Value::F64(-0.0)).unwrap();
        assert_eq!(hit.len(), 1);
        assert_eq!(hit[0].1[1].as_f64().unwrap().to_bits(), 0.0f64.to_bits());
        let hit = t.index_lookup("m_x", &Value::F64(other_nan)).unwrap();
        assert_eq!(hit[0].1[0], Value::I64(3));
        // The row keeps the bits written: a -0.0 in a non-unique column.
        db.create_table(
            "n",
            vec![
                Column::new("id", ColumnType::I64),
                Column::new("x", ColumnType::F64),
            ],
        )
        .unwrap();
        let rid = t
            .insert("n", vec![Value::I64(1), Value::F64(-0.0)])
            .unwrap();
        let back = t.get("n", rid).unwrap().unwrap()[1].as_f64().unwrap();
        assert_eq!(back.to_bits(), (-0.0f64).to_bits());
        t.commit().unwrap();
        // The same order on values: sorting agrees with the index.
        let mut vals = ordered_values(ColumnType::F64);
        vals.reverse();
        vals.sort();
        assert_eq!(vals, ordered_values(ColumnType::F64));
    });
}
