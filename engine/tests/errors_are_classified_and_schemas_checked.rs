//! Errors through the public API: each is classified once (`kind()`,
//! `is_conflict()` and `is_retryable()` agree), a table definition that
//! cannot be stored or whose full row cannot fit a page is refused as
//! `InvalidSchema` naming the table and the limit (not as a catalog row
//! too large), and long names are cut in messages.

mod common;

use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Column, ColumnType, Database, EngineError, ErrorKind, Value};

const MAX_ROW_LEN: usize = heap::page::MAX_ROW_LEN;

/// The message of `create_table(name, columns)`'s error, which must be
/// `InvalidSchema` naming `name`, with nothing created.
fn refused(db: &Database, name: &str, columns: Vec<Column>) -> String {
    let e = db.create_table(name, columns).unwrap_err();
    assert!(
        matches!(&e, EngineError::InvalidSchema { name: n, .. } if n == name),
        "{e}"
    );
    assert_eq!(e.kind(), ErrorKind::BadInput, "{e}");
    assert!(!e.is_conflict() && !e.is_retryable(), "{e}");
    let msg = e.to_string();
    assert!(!msg.contains("(catalog)"), "{msg}");
    assert!(db.tables().iter().all(|t| t.name != name));
    msg
}

#[test]
fn a_definition_too_large_for_the_catalog_is_an_invalid_schema() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();

        // 1,100 columns (under MAX_COLUMNS): the definition does not fit a
        // catalog row.
        const { assert!(1_100 <= engine::MAX_COLUMNS) };
        let wide: Vec<Column> = (0..1_100)
            .map(|i| Column::nullable(format!("c{i}"), ColumnType::I64))
            .collect();
        let msg = refused(&db, "wide", wide);
        assert!(
            msg.contains("\"wide\"") && msg.contains("1100 columns") && msg.contains("catalog"),
            "{msg}"
        );
        assert!(msg.contains(&format!("{MAX_ROW_LEN} bytes")), "{msg}");

        // 200 columns with names of the longest length allowed.
        let long = engine::MAX_NAME_LEN;
        let named: Vec<Column> = (0..200)
            .map(|i| Column::new(format!("{i:0>long$}"), ColumnType::Bytes))
            .collect();
        let msg = refused(&db, "named", named);
        assert!(
            msg.contains("200 columns") && msg.contains(&format!("names of {long} bytes")),
            "{msg}"
        );
        // The number of columns the message says fit does fit.
        let fit: usize = msg
            .rsplit("at most ")
            .next()
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no column count in {msg}"));
        let named: Vec<Column> = (0..fit)
            .map(|i| Column::nullable(format!("{i:0>long$}"), ColumnType::Bytes))
            .collect();
        db.create_table("named", named).unwrap();
        let t = db.begin().unwrap();
        let mut full: Vec<Value> = (0..fit).map(|_| Value::Null).collect();
        full[0] = Value::from(b"x".as_slice());
        t.insert("named", full).unwrap();
        t.commit().unwrap();

        // The database stays usable, and the refused tables reopen absent.
        db.create_table("t", two_columns()).unwrap();
        let t = db.begin().unwrap();
        t.insert("t", row(1, "a")).unwrap();
        t.commit().unwrap();
        db.close().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        let names: Vec<String> = db.tables().into_iter().map(|t| t.name).collect();
        assert_eq!(names, vec!["named".to_string(), "t".to_string()]);
        db.close().unwrap();
    });
}

/// A table whose row with a value in every column cannot fit a page is
/// refused at creation; one column fewer is accepted and such a row inserts.
#[test]
fn a_table_whose_full_row_cannot_fit_a_page_is_refused() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        // Short names, so the definition fits the catalog and the row is
        // what is too large: find the most i64 columns whose full row fits.
        let row_len = |n: usize| 2 + n.div_ceil(8) + 8 * n;
        let most = (1..)
            .take_while(|&n| row_len(n) <= MAX_ROW_LEN)
            .last()
            .unwrap();
        let cols = |n: usize| -> Vec<Column> {
            (0..n)
                .map(|i| Column::nullable(format!("{i:x}"), ColumnType::I64))
                .collect()
        };
        let msg = refused(&db, "too_wide", cols(most + 1));
        assert!(
            msg.contains(&format!("at least {} bytes", row_len(most + 1)))
                && msg.contains(&format!("at most {MAX_ROW_LEN} fit on a page")),
            "{msg}"
        );
        db.create_table("widest", cols(most)).unwrap();
        let t = db.begin().unwrap();
        t.insert(
            "widest",
            (0..most as i64).map(Value::I64).collect::<Vec<_>>(),
        )
        .unwrap();
        t.commit().unwrap();
        let t = db.read().unwrap();
        assert_eq!(t.scan("widest").unwrap().count(), 1);
        drop(t);
        db.close().unwrap();
    });
}

/// A 10,000-byte name is not echoed whole (once or twice) in any message.
#[test]
fn long_names_are_cut_in_messages() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        let long = "n".repeat(10_000);
        let t = db.begin().unwrap();
        let errors = vec![
            db.create_table(&long, two_columns()).unwrap_err(),
            db.create_table("u", vec![Column::new(long.clone(), ColumnType::I64)])
                .unwrap_err(),
            db.create_index(&long, "t", "id", false).unwrap_err(),
            db.create_index("i", &long, "id", false).unwrap_err(),
            db.create_index("i", "t", &long, false).unwrap_err(),
            db.drop_table(&long).unwrap_err(),
            db.drop_index(&long).unwrap_err(),
            t.insert(&long, row(1, "a")).unwrap_err(),
            t.scan(&long).err().unwrap(),
            t.get_by_key("t", &long, &Value::I64(1)).unwrap_err(),
        ];
        for e in errors {
            let msg = e.to_string();
            assert!(msg.len() < 400, "{} bytes: {}", msg.len(), &msg[..400]);
            assert!(msg.contains("10000 bytes"), "{msg}");
            assert_eq!(e.kind(), ErrorKind::BadInput, "{msg}");
        }
        drop(t);
        db.close().unwrap();
    });
}

/// Through the API: a write conflict is a retryable conflict; a database
/// in use is neither (wait for the other handle instead).
#[test]
fn conflicts_are_retryable_and_a_database_in_use_is_not() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        let t = db.begin().unwrap();
        let rid = t.insert("t", row(1, "a")).unwrap();
        t.commit().unwrap();
        let slow = db.begin().unwrap();
        let fast = db.begin().unwrap();
        fast.update("t", rid, row(1, "b")).unwrap();
        fast.commit().unwrap();
        let e = slow.update("t", rid, row(1, "c")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
        assert!(e.is_conflict() && e.is_retryable(), "{e}");
        drop(slow);

        let e = Database::open(dir.path(), small_options()).unwrap_err();
        assert!(matches!(e, EngineError::DatabaseInUse { .. }), "{e}");
        assert_eq!(e.kind(), ErrorKind::InUse, "{e}");
        assert!(!e.is_conflict() && !e.is_retryable(), "{e}");

        let other = db.clone();
        let e = db.close().unwrap_err();
        assert!(matches!(e, EngineError::StillInUse { .. }), "{e}");
        assert_eq!(e.kind(), ErrorKind::InUse, "{e}");
        assert!(!e.is_conflict() && !e.is_retryable(), "{e}");
        other.close().unwrap();
    });
}
