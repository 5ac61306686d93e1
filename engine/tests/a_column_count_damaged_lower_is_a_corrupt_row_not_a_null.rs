//! A row's column count, damaged on disk to fewer columns than the table
//! was created with. A row stored before `add_column` legitimately holds
//! fewer columns, and reads the added ones as their default or NULL; but
//! a column that is NOT NULL without a default can only have been there
//! when the table was created (`add_column` refuses one), so every row
//! stores it, and a row that does not is damaged. Every accessor of a
//! borrowed row (`scan_each`, `get_with`), the fixed-offset ones included,
//! reads each column either as the value inserted or as `CorruptRow`
//! naming the table and the row: never NULL (`None`, or "is NULL") in a
//! NOT NULL column. Owned reads refuse the row whole, and an index lookup
//! of its key neither skips it (its key read as NULL) nor returns it.

mod common;

use std::time::Duration;

use common::{position_of, small_options, table_on_disk, watchdog};
use engine::{Column, ColumnType, Database, EngineError, RowRef, Value};

type Out = Result<Option<Value>, String>;

fn columns() -> Vec<Column> {
    vec![
        Column::new("a", ColumnType::I64),
        Column::new("f", ColumnType::F64),
        Column::new("ts", ColumnType::Timestamp),
        Column::new("body", ColumnType::Text),
        Column::new("raw", ColumnType::Bytes),
        Column::new("ok", ColumnType::Bool),
    ]
}

fn values(i: i64, body: &str) -> Vec<Value> {
    vec![
        Value::I64(i),
        Value::F64(i as f64 + 0.25),
        Value::Timestamp(1_000 * i),
        Value::text(body),
        Value::Bytes(vec![i as u8; 3]),
        Value::Bool(true),
    ]
}

/// Every accessor of column `i` (of `columns()`) of `row`, plain and `_opt`.
fn read(row: &RowRef<'_>, i: usize) -> [Out; 2] {
    let c = &columns()[i];
    let name = c.name.as_str();
    let e = |e: EngineError| match e {
        EngineError::CorruptRow { table, row_id, .. } => {
            format!("CORRUPT {table} {row_id}")
        }
        e => format!("OTHER {e}"),
    };
    match c.ty {
        ColumnType::I64 => [
            row.i64(name).map(|v| Some(Value::I64(v))).map_err(e),
            row.i64_opt(name).map(|v| v.map(Value::I64)).map_err(e),
        ],
        ColumnType::F64 => [
            row.f64(name).map(|v| Some(Value::F64(v))).map_err(e),
            row.f64_opt(name).map(|v| v.map(Value::F64)).map_err(e),
        ],
        ColumnType::Timestamp => [
            row.timestamp(name)
                .map(|v| Some(Value::Timestamp(v)))
                .map_err(e),
            row.timestamp_opt(name)
                .map(|v| v.map(Value::Timestamp))
                .map_err(e),
        ],
        ColumnType::Text => [
            row.text(name).map(|v| Some(Value::text(v))).map_err(e),
            row.text_opt(name).map(|v| v.map(Value::text)).map_err(e),
        ],
        ColumnType::Bytes => [
            row.bytes(name)
                .map(|v| Some(Value::Bytes(v.to_vec())))
                .map_err(e),
            row.bytes_opt(name)
                .map(|v| v.map(|b| Value::Bytes(b.to_vec())))
                .map_err(e),
        ],
        ColumnType::Bool => [
            row.bool(name).map(|v| Some(Value::Bool(v))).map_err(e),
            row.bool_opt(name).map(|v| v.map(Value::Bool)).map_err(e),
        ],
    }
}

#[test]
fn a_column_count_damaged_lower_is_a_corrupt_row_not_a_null() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        // Without checksums the damaged page is read as it is.
        let options = || small_options().checksums(false);
        let marker = "MARKER-count-9a3f";
        let (file, rids) = table_on_disk(
            dir.path(),
            options(),
            "counted",
            columns(),
            |db| {
                db.create_index("counted_a", "counted", "a", true).unwrap();
            },
            [(1, "first"), (2, marker), (3, "third")].map(|(i, body)| values(i, body)),
        );
        let clean = std::fs::read(&file).unwrap();
        let at = position_of(&clean, marker.as_bytes());
        // count (2), null bitmap (1), a, f, ts (8 each), body's length (4).
        let count_at = at - 4 - 24 - 1 - 2;
        assert_eq!(clean[count_at..count_at + 2], 6u16.to_le_bytes());
        let corrupt = format!("CORRUPT counted {}", rids[1]);
        for stored in 0..6u16 {
            let mut bytes = clean.clone();
            bytes[count_at..count_at + 2].copy_from_slice(&stored.to_le_bytes());
            std::fs::write(&file, &bytes).unwrap();
            let db = Database::open(dir.path(), options()).unwrap();
            let t = db.read().unwrap();
            let want = values(2, marker);
            let mut bad = Vec::new();
            let mut check = |how: &str, row: &RowRef<'_>| {
                if row.id() != rids[1] {
                    return;
                }
                for (i, value) in want.iter().enumerate() {
                    for (opt, got) in read(row, i).into_iter().enumerate() {
                        if got != Ok(Some(value.clone())) && got.as_ref() != Err(&corrupt) {
                            bad.push(format!(
                                "{how}, {stored} columns stored: column {i} (opt {opt}) read {got:?}"
                            ));
                        }
                    }
                }
            };
            t.scan_each("counted", |row| {
                check("scan_each", &row);
                Ok(())
            })
            .unwrap();
            t.get_with("counted", rids[1], |row| check("get_with", &row))
                .unwrap()
                .unwrap();
            assert!(bad.is_empty(), "{bad:#?}");
            // Owned reads check the row whole.
            let scanned: Vec<_> = t.scan("counted").unwrap().collect();
            assert_eq!(scanned.len(), 3);
            assert!(
                matches!(&scanned[1], Err(EngineError::CorruptRow { row_id, .. }) if *row_id == rids[1]),
                "{stored}: {:?}",
                scanned[1]
            );
            assert!(matches!(
                t.get("counted", rids[1]),
                Err(EngineError::CorruptRow { .. })
            ));
            // A lookup of its key neither skips it nor returns it.
            let found = t.index_lookup("counted_a", &Value::I64(2));
            assert!(
                matches!(&found, Err(EngineError::CorruptRow { row_id, .. }) if *row_id == rids[1]),
                "{stored}: {found:?}"
            );
            drop(t);
            db.close().unwrap();
        }
    });
}
