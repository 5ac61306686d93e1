//! Owned rows (`OwnedRow`, what `get`, `get_by_key`, `index_lookup` and the
//! iterators return) read their columns by name or by handle with typed
//! accessors, compare with plain value vectors, go back into `update`, and
//! report a wrong column or type as an error naming it.

mod common;

use std::ops::Bound;
use std::time::Duration;

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, EngineError, Value};

fn customers(db: &Database) {
    db.create_table(
        "customer",
        vec![
            Column::new("id", ColumnType::I64),
            Column::new("name", ColumnType::Text),
            Column::nullable("balance", ColumnType::F64),
            Column::new("active", ColumnType::Bool),
            Column::nullable("since", ColumnType::Timestamp),
            Column::nullable("photo", ColumnType::Bytes),
        ],
    )
    .unwrap();
    db.create_index("customer_id", "customer", "id", true)
        .unwrap();
    db.create_index("customer_name", "customer", "name", false)
        .unwrap();
    let t = db.begin().unwrap();
    for i in 0..10i64 {
        t.insert(
            "customer",
            vec![
                Value::I64(i),
                Value::text(format!("cust-{i}")),
                if i % 2 == 0 {
                    Value::F64(i as f64 * 1.25)
                } else {
                    Value::Null
                },
                Value::Bool(i % 3 == 0),
                Value::Timestamp(1_700_000_000_000_000 + i),
                Value::Null,
            ],
        )
        .unwrap();
    }
    t.commit().unwrap();
}

#[test]
fn owned_rows_from_every_read_read_columns_by_name_and_by_handle() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        customers(&db);
        let table = db.table_handle("customer").unwrap();
        let name = table.column("name").unwrap();
        let t = db.begin().unwrap();
        let (rid, row) = t
            .get_by_key("customer", "id", &Value::I64(4))
            .unwrap()
            .unwrap();
        assert_eq!(row.text("name").unwrap(), "cust-4");
        assert_eq!(row.text(name).unwrap(), "cust-4");
        assert_eq!(row.f64("balance").unwrap(), 5.0);
        assert!(!row.bool("active").unwrap());
        assert_eq!(row.timestamp("since").unwrap(), 1_700_000_000_000_004);
        assert_eq!(row.bytes_opt("photo").unwrap(), None);
        assert_eq!(row.i64("id").unwrap(), 4);
        assert_eq!(row.value("name").unwrap(), &Value::text("cust-4"));
        assert_eq!(row.table().name, "customer");
        // Still the plain values: indexing, length, comparison.
        assert_eq!(row[0], Value::I64(4));
        assert_eq!(row.len(), 6);
        assert_eq!(row, t.get("customer", rid).unwrap().unwrap());

        // The same through a lookup, a range and a scan.
        let hit = t
            .index_lookup("customer_name", &Value::text("cust-7"))
            .unwrap();
        assert_eq!(hit[0].1.i64("id").unwrap(), 7);
        assert_eq!(hit[0].1.f64_opt("balance").unwrap(), None);
        let names: Vec<String> = t
            .index_range("customer_name", Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .map(|r| r.unwrap().1.text("name").unwrap().to_string())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert_eq!(names.len(), 10);
        let active: Vec<i64> = t
            .scan("customer")
            .unwrap()
            .map(|r| r.unwrap().1)
            .filter(|r| r.bool("active").unwrap())
            .map(|r| r.i64("id").unwrap())
            .collect();
        assert_eq!(active, vec![0, 3, 6, 9]);

        // A projected row reads its columns by name, and not the others.
        let id = table.column("id").unwrap();
        let balance = table.column("balance").unwrap();
        let projected: Vec<_> = t
            .scan("customer")
            .unwrap()
            .project(&[balance, name])
            .map(|r| r.unwrap().1)
            .collect();
        assert_eq!(projected[2].text("name").unwrap(), "cust-2");
        assert_eq!(projected[2].f64("balance").unwrap(), 2.5);
        assert_eq!(projected[2].len(), 2);
        let e = projected[2].i64(id).unwrap_err();
        assert!(
            matches!(e, EngineError::WrongColumn { .. }) && e.to_string().contains("\"id\""),
            "{e}"
        );

        // Read, change in place, write back.
        let (rid, mut row) = t
            .get_by_key("customer", "id", &Value::I64(1))
            .unwrap()
            .unwrap();
        row[2] = Value::F64(-3.0);
        let new = t.update("customer", rid, row).unwrap();
        let back = t.get("customer", new).unwrap().unwrap();
        assert_eq!(back.f64("balance").unwrap(), -3.0);
        t.commit().unwrap();
    });
}

#[test]
fn a_wrong_column_or_type_read_from_an_owned_row_is_an_error_naming_it() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        customers(&db);
        db.create_table("other", vec![Column::new("x", ColumnType::I64)])
            .unwrap();
        let foreign = db.table_handle("other").unwrap().column("x").unwrap();
        let t = db.begin().unwrap();
        let (_, row) = t
            .get_by_key("customer", "id", &Value::I64(1))
            .unwrap()
            .unwrap();
        let e = row.text("nope").unwrap_err();
        assert!(matches!(e, EngineError::UnknownColumn { .. }), "{e}");
        let e = row.i64("name").unwrap_err();
        assert!(
            matches!(e, EngineError::WrongColumn { .. })
                && ["\"name\"", "text", "i64"]
                    .iter()
                    .all(|p| e.to_string().contains(p)),
            "{e}"
        );
        let e = row.f64("balance").unwrap_err();
        assert!(e.to_string().contains("f64_opt"), "NULL: {e}");
        let e = row.i64(foreign).unwrap_err();
        assert!(
            matches!(e, EngineError::WrongColumn { .. }) && e.to_string().contains("another table"),
            "{e}"
        );
        // The slice's own `get` is untouched: by position, an Option.
        assert_eq!(row.get(1), Some(&Value::text("cust-1")));
        assert_eq!(row.get(6), None);
    });
}

#[test]
fn an_owned_row_keeps_the_definition_it_was_read_with_across_add_column() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        customers(&db);
        let t = db.begin().unwrap();
        let (rid, before) = t
            .get_by_key("customer", "id", &Value::I64(2))
            .unwrap()
            .unwrap();
        t.commit().unwrap();
        db.add_column(
            "customer",
            Column::new("tier", ColumnType::Text).with_default("basic"),
        )
        .unwrap();
        assert_eq!(before.table().columns.len(), 6);
        assert!(matches!(
            before.text("tier").unwrap_err(),
            EngineError::UnknownColumn { .. }
        ));
        let t = db.begin().unwrap();
        let after = t.get("customer", rid).unwrap().unwrap();
        assert_eq!(after.text("tier").unwrap(), "basic");
        assert_eq!(after.text("name").unwrap(), "cust-2");
        assert_eq!(&after[..6], &before[..]);
    });
}

#[test]
fn scanned_rows_read_columns_from_their_bytes_and_agree_with_their_values_after_a_change() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        customers(&db);
        db.create_table("other", vec![Column::new("x", ColumnType::I64)])
            .unwrap();
        let foreign = db.table_handle("other").unwrap().column("x").unwrap();
        let table = db.table_handle("customer").unwrap();
        let (id, name) = (table.column("id").unwrap(), table.column("name").unwrap());
        let t = db.begin().unwrap();
        let rows: Vec<_> = t.scan(&table).unwrap().map(|r| r.unwrap().1).collect();
        assert_eq!(rows.len(), 10);
        for (i, row) in rows.iter().enumerate() {
            let i = i as i64;
            // Typed reads first (from the bytes), then the values.
            assert_eq!(row.i64(id).unwrap(), i);
            assert_eq!(row.text(name).unwrap(), format!("cust-{i}"));
            assert_eq!(
                row.f64_opt("balance").unwrap(),
                (i % 2 == 0).then_some(i as f64 * 1.25)
            );
            assert_eq!(row.bool("active").unwrap(), i % 3 == 0);
            assert_eq!(row.bytes_opt("photo").unwrap(), None);
            assert_eq!(row[0], Value::I64(i));
            assert_eq!(
                row.value("name").unwrap(),
                &Value::text(format!("cust-{i}"))
            );
        }
        // The same checks as on a row made of values.
        let row = &rows[1];
        assert!(matches!(
            row.text("nope").unwrap_err(),
            EngineError::UnknownColumn { .. }
        ));
        let e = row.i64("name").unwrap_err();
        assert!(
            matches!(e, EngineError::WrongColumn { .. }) && e.to_string().contains("i64"),
            "{e}"
        );
        assert!(
            row.f64("balance")
                .unwrap_err()
                .to_string()
                .contains("f64_opt")
        );
        assert!(
            row.i64(foreign)
                .unwrap_err()
                .to_string()
                .contains("another table")
        );
        // Changed in place, the row reads its new values.
        let mut changed = rows[3].clone();
        changed[1] = Value::text("renamed");
        assert_eq!(changed.text(name).unwrap(), "renamed");
        assert_eq!(rows[3].text(name).unwrap(), "cust-3");
        assert_ne!(changed, rows[3]);
        // Projected rows read only their columns.
        let projected: Vec<_> = t
            .scan(&table)
            .unwrap()
            .project(&[name, id])
            .map(|r| r.unwrap().1)
            .collect();
        assert_eq!(projected[4].text(name).unwrap(), "cust-4");
        assert_eq!(projected[4].i64(id).unwrap(), 4);
        let e = projected[4].bool("active").unwrap_err();
        assert!(e.to_string().contains("projected"), "{e}");
        assert_eq!(
            projected[4].clone().into_values(),
            vec![Value::text("cust-4"), Value::I64(4)]
        );
        t.commit().unwrap();
    });
}

#[test]
fn scanned_rows_read_their_columns_after_their_transaction_ends_and_their_pages_leave_the_pool() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        // 64 buffers: the churn below passes through many more pages.
        let db = Database::open(dir.path(), small_options()).unwrap();
        customers(&db);
        let table = db.table_handle("customer").unwrap();
        let name = table.column("name").unwrap();
        let t = db.begin().unwrap();
        let mut scan = t.scan(&table).unwrap();
        // Some rows taken, the rest read later from the same iterator.
        let first: Vec<_> = scan.by_ref().take(3).map(|r| r.unwrap().1).collect();
        t.commit().unwrap();
        let rest: Vec<_> = scan.map(|r| r.unwrap().1).collect();
        assert_eq!(first.len() + rest.len(), 10);

        // Push the customer pages out of the pool, then drop the table.
        db.create_table(
            "churn",
            vec![
                Column::new("id", ColumnType::I64),
                Column::new("pad", ColumnType::Bytes),
            ],
        )
        .unwrap();
        let w = db.begin().unwrap();
        for i in 0..800i64 {
            w.insert("churn", vec![Value::I64(i), Value::Bytes(vec![7; 900])])
                .unwrap();
        }
        w.commit().unwrap();
        let r = db.begin().unwrap();
        assert_eq!(r.scan("churn").unwrap().count(), 800);
        r.commit().unwrap();
        db.drop_table("customer").unwrap();

        for (i, row) in first.iter().chain(&rest).enumerate() {
            let i = i as i64;
            assert_eq!(row.i64("id").unwrap(), i);
            assert_eq!(row.text(name).unwrap(), format!("cust-{i}"));
            assert_eq!(row.bool("active").unwrap(), i % 3 == 0);
            assert_eq!(row[1], Value::text(format!("cust-{i}")));
            assert_eq!(row.len(), 6);
        }
    });
}

#[test]
fn a_projected_scanned_row_is_its_projected_columns_in_order() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        customers(&db);
        let table = db.table_handle("customer").unwrap();
        let (id, name, since) = (
            table.column("id").unwrap(),
            table.column("name").unwrap(),
            table.column("since").unwrap(),
        );
        let t = db.begin().unwrap();
        let active = table.column("active").unwrap();
        let rows: Vec<_> = t
            .scan(&table)
            .unwrap()
            .matching(move |r| r.bool(active))
            .project(&[since, name, id])
            .map(|r| r.unwrap().1)
            .collect();
        // Rows 0, 3, 6 and 9 are active.
        assert_eq!(rows.len(), 4);
        for (row, i) in rows.iter().zip([0i64, 3, 6, 9]) {
            assert_eq!(row.len(), 3);
            // Typed reads from the bytes before the values are built.
            assert_eq!(row.i64(id).unwrap(), i);
            assert_eq!(row.text("name").unwrap(), format!("cust-{i}"));
            assert_eq!(row.timestamp(since).unwrap(), 1_700_000_000_000_000 + i);
            assert_eq!(
                *row,
                vec![
                    Value::Timestamp(1_700_000_000_000_000 + i),
                    Value::text(format!("cust-{i}")),
                    Value::I64(i),
                ]
            );
            assert_eq!(row.value(id).unwrap(), &Value::I64(i));
            let e = row.f64_opt("balance").unwrap_err();
            assert!(
                matches!(e, EngineError::WrongColumn { .. }) && e.to_string().contains("projected"),
                "{e}"
            );
        }
        t.commit().unwrap();
    });
}

#[test]
fn a_corrupt_tuple_met_by_a_scan_is_a_corrupt_row_naming_table_and_row_and_its_neighbours_still_read()
 {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        // Without checksums the damaged page is read as it is, so the row
        // check is what must notice.
        let options = || small_options().checksums(false);
        let marker = "MARKER-scan-71c2";
        let (rel, rids) = {
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
            let rids: Vec<_> = [(1, "first"), (2, marker), (3, "third")]
                .into_iter()
                .map(|(i, body)| {
                    t.insert("docs", vec![Value::I64(i), Value::text(body)])
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
        // 0xFF never occurs in UTF-8.
        bytes[at + 3] = 0xFF;
        std::fs::write(&file, &bytes).unwrap();

        let db = Database::open(dir.path(), options()).unwrap();
        let t = db.begin().unwrap();
        let mut scan = t.scan("docs").unwrap();
        let (rid, row) = scan.next().unwrap().unwrap();
        assert_eq!(rid, rids[0]);
        assert_eq!(row.text("body").unwrap(), "first");
        // The damaged row is an error when the scan reaches it, before any
        // of its columns is asked for: a row handed out always decodes.
        let e = scan.next().unwrap().unwrap_err();
        assert!(matches!(e, EngineError::CorruptRow { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("docs") && msg.contains(&rids[1].to_string()) && msg.contains("UTF-8"),
            "{msg}"
        );
        let (rid, row) = scan.next().unwrap().unwrap();
        assert_eq!(rid, rids[2]);
        assert_eq!(row.text("body").unwrap(), "third");
        assert_eq!(*row, vec![Value::I64(3), Value::text("third")]);
        assert!(scan.next().is_none());
        t.commit().unwrap();
    });
}
