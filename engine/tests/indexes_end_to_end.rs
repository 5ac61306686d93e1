//! Indexes through the public API: create over a populated table, every read
//! (get by key, lookup, ordered range) returns exactly the rows the
//! snapshot sees, across updates that change the key and deletes; by-key
//! writes; drop; durability across close; and every index error.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, EngineError, ErrorKind, RelKind, Transaction, Value};

fn name_of(i: i64) -> String {
    format!("n{:02}", i % 37)
}

/// The model: id -> name (None for NULL).
type Model = BTreeMap<i64, Option<String>>;

fn model_row(id: i64, name: &Option<String>) -> engine::Row {
    match name {
        Some(n) => row(id, n),
        None => vec![Value::I64(id), Value::Null],
    }
}

/// Every read path agrees with the model.
fn check_reads(t: &Transaction, m: &Model) {
    // ordered range over everything
    let all: Vec<(i64, Option<String>)> = t
        .index_range("t_id", Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| {
            let (_, row) = r.unwrap();
            let name = row[1]
                .as_bytes()
                .map(|b| String::from_utf8(b.to_vec()).unwrap());
            (row[0].as_i64().unwrap(), name)
        })
        .collect();
    let expect: Vec<(i64, Option<String>)> = m.iter().map(|(k, v)| (*k, v.clone())).collect();
    assert_eq!(all, expect, "full range scan");
    // bounded ranges
    for (lo, hi) in [(10, 20), (-5, 3), (250, 260), (1000, 2000)] {
        let got: Vec<i64> = t
            .index_range(
                "t_id",
                Bound::Included(Value::I64(lo)),
                Bound::Excluded(Value::I64(hi)),
            )
            .unwrap()
            .map(|r| r.unwrap().1[0].as_i64().unwrap())
            .collect();
        let want: Vec<i64> = m.range(lo..hi).map(|(k, _)| *k).collect();
        assert_eq!(got, want, "range {lo}..{hi}");
    }
    // point reads
    for id in [0, 1, 5, 7, 42, 299, 10_005, 500_000] {
        let got = t
            .get_by_key("t", "id", &Value::I64(id))
            .unwrap()
            .map(|(_, r)| r.into_values());
        assert_eq!(got, m.get(&id).map(|n| model_row(id, n)), "get_by_key {id}");
    }
    for n in ["n00", "n07", "n36", "zz"] {
        let mut got: Vec<i64> = t
            .index_lookup("t_name", &Value::from(n.as_bytes()))
            .unwrap()
            .into_iter()
            .map(|(_, r)| r[0].as_i64().unwrap())
            .collect();
        got.sort();
        let want: Vec<i64> = m
            .iter()
            .filter(|(_, v)| v.as_deref() == Some(n))
            .map(|(k, _)| *k)
            .collect();
        assert_eq!(got, want, "lookup name {n}");
    }
    assert!(t.index_lookup("t_name", &Value::Null).unwrap().is_empty());
}

#[test]
fn index_reads_return_exactly_the_visible_rows() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        let mut m = Model::new();
        let txn = db.begin().unwrap();
        for i in 0..300 {
            let name = (i % 10 != 3).then(|| name_of(i));
            txn.insert("t", model_row(i, &name)).unwrap();
            m.insert(i, name);
        }
        txn.commit().unwrap();
        // A row deleted before the index exists, still seen by `old`.
        let old = db.begin().unwrap();
        let txn = db.begin().unwrap();
        assert!(
            txn.delete("t", old.scan("t").unwrap().next().unwrap().unwrap().0)
                .is_ok()
        );
        txn.commit().unwrap();

        let id = db.create_index("t_id", "t", "id", true).unwrap();
        let name = db.create_index("t_name", "t", "name", false).unwrap();
        assert!(id.unique && !name.unique && name.columns == [1]);
        assert_eq!(db.indexes(), vec![id.clone(), name.clone()]);
        // The older snapshot still finds the row deleted before the build.
        assert!(old.get_by_key("t", "id", &Value::I64(0)).unwrap().is_some());
        drop(old);
        m.remove(&0);

        let t = db.begin().unwrap();
        check_reads(&t, &m);
        drop(t);

        // Updates that change the key, a reader from before them, deletes.
        let reader = db.begin().unwrap();
        let txn = db.begin().unwrap();
        let new5 = txn
            .update_by_key("t", "id", &Value::I64(5), row(10_005, "n05"))
            .unwrap()
            .unwrap();
        assert_eq!(
            txn.get_by_key("t", "id", &Value::I64(10_005))
                .unwrap()
                .map(|(id, r)| (id, r.into_values())),
            Some((new5, row(10_005, "n05")))
        );
        assert_eq!(txn.get_by_key("t", "id", &Value::I64(5)).unwrap(), None);
        // a name change keeps the id: still one row per id (no duplicate entries seen)
        txn.update_by_key("t", "id", &Value::I64(42), row(42, "n07"))
            .unwrap()
            .unwrap();
        assert!(txn.delete_by_key("t", "id", &Value::I64(7)).unwrap());
        assert!(!txn.delete_by_key("t", "id", &Value::I64(7)).unwrap());
        assert_eq!(
            txn.update_by_key("t", "id", &Value::I64(7), row(7, "x"))
                .unwrap(),
            None
        );
        // move a key back and forth inside one transaction
        let r = txn
            .update_by_key("t", "id", &Value::I64(1), row(1001, "a"))
            .unwrap();
        assert!(r.is_some());
        txn.update_by_key("t", "id", &Value::I64(1001), row(1, "n01"))
            .unwrap()
            .unwrap();
        txn.commit().unwrap();
        m.remove(&5);
        m.insert(10_005, Some("n05".into()));
        m.insert(42, Some("n07".into()));
        m.remove(&7);
        m.insert(1, Some("n01".into()));
        let before: Model = {
            let mut b = m.clone();
            b.remove(&10_005);
            b.insert(5, Some(name_of(5)));
            b.insert(42, Some(name_of(42)));
            b.insert(7, Some(name_of(7)));
            b.insert(1, Some(name_of(1)));
            b
        };
        check_reads(&reader, &before);
        drop(reader);
        let t = db.begin().unwrap();
        check_reads(&t, &m);
        drop(t);
        assert_eq!(db.verify_indexes("t").unwrap(), vec![]);

        // Introspection: index pages named, with their level; resident per index.
        let cache = db.buffercache();
        let leaf = cache.iter().find(|b| {
            b.relation.as_deref() == Some("t_id")
                && b.index_page.is_some_and(|k| !k.is_meta && k.level == 0)
        });
        assert!(leaf.is_some(), "a resident leaf of t_id");
        assert!(
            cache
                .iter()
                .all(|b| (b.kind == Some(RelKind::Index)) == b.index_page.is_some())
        );
        let resident = db.resident_pages();
        for ix in ["t_id", "t_name"] {
            assert!(
                resident.iter().any(|r| r.name == ix
                    && r.kind == RelKind::Index
                    && r.table.as_deref() == Some("t")),
                "{ix} in {resident:?}"
            );
        }

        // Durable: close, reopen, same answers.
        db.close().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        assert_eq!(db.indexes().len(), 2);
        let t = db.begin().unwrap();
        check_reads(&t, &m);
        drop(t);
        assert_eq!(db.verify_indexes("t").unwrap(), vec![]);

        // Drop an index: its file and buffers go; lookups by table name now
        // use the only index left.
        let file = dir.path().join("base").join(name.rel.0.to_string());
        assert!(file.exists());
        db.drop_index("t_name").unwrap();
        assert!(!file.exists());
        assert!(
            db.buffercache()
                .iter()
                .all(|b| b.row.tag.is_none_or(|g| g.rel != name.rel))
        );
        assert_eq!(db.indexes(), vec![id.clone()]);
        let t = db.begin().unwrap();
        assert!(matches!(
            t.index_lookup("t_name", &Value::from(b"n00".as_slice())),
            Err(EngineError::UnknownIndex { .. })
        ));
        assert_eq!(t.index_lookup("t", &Value::I64(42)).unwrap().len(), 1);
        drop(t);
        // Dropping the table drops its index.
        let id_file = dir.path().join("base").join(id.rel.0.to_string());
        db.drop_table("t").unwrap();
        assert!(db.indexes().is_empty() && !id_file.exists());
        db.close().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        assert!(db.indexes().is_empty());
        db.close().unwrap();
    });
}

#[test]
fn every_index_error_is_named_and_kinded() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        let txn = db.begin().unwrap();
        for i in 0..20 {
            txn.insert("t", row(i, &format!("dup{}", i % 2))).unwrap();
        }
        txn.commit().unwrap();

        // A unique index over duplicates is refused and nothing is created.
        let e = db.create_index("t_name", "t", "name", true).unwrap_err();
        assert!(matches!(e, EngineError::UniqueViolation { .. }), "{e}");
        assert_eq!(e.kind(), ErrorKind::BadInput);
        assert!(
            e.to_string().contains("t_name") && e.to_string().contains("dup"),
            "{e}"
        );
        assert!(db.indexes().is_empty());
        db.create_index("t_id", "t", "id", true).unwrap();
        db.create_index("t_name", "t", "name", false).unwrap();
        assert!(matches!(
            db.create_index("t_id", "t", "name", false),
            Err(EngineError::TableExists { .. })
        ));

        // Unique violation on insert: named, nothing changed, still usable.
        let t = db.begin().unwrap();
        let e = t.insert("t", row(3, "again")).unwrap_err();
        assert!(matches!(e, EngineError::UniqueViolation { .. }), "{e}");
        assert!(!e.is_conflict());
        let msg = e.to_string();
        assert!(msg.contains("\"t_id\"") && msg.contains("(3)"), "{msg}");
        assert_eq!(
            t.index_lookup("t_name", &Value::from(b"again".as_slice()))
                .unwrap(),
            vec![]
        );
        assert_eq!(t.scan("t").unwrap().count(), 20);
        t.insert("t", row(100, "new")).unwrap();
        // ... and on update, before anything changes
        let e = t
            .update_by_key("t", "id", &Value::I64(4), row(5, "x"))
            .unwrap_err();
        assert!(matches!(e, EngineError::UniqueViolation { .. }), "{e}");
        assert_eq!(
            t.get_by_key("t", "id", &Value::I64(4)).unwrap().unwrap().1,
            row(4, "dup0")
        );
        // own duplicate in the same transaction; own delete then re-insert is fine
        assert!(matches!(
            t.insert("t", row(100, "twice")),
            Err(EngineError::UniqueViolation { .. })
        ));
        assert!(t.delete_by_key("t", "id", &Value::I64(100)).unwrap());
        t.insert("t", row(100, "back")).unwrap();
        t.commit().unwrap();
        assert_eq!(db.verify_indexes("t").unwrap(), vec![]);

        // A duplicate held by a transaction in progress: a conflict (retry).
        let t1 = db.begin().unwrap();
        let t2 = db.begin().unwrap();
        t1.insert("t", row(900, "first")).unwrap();
        let e = t2.insert("t", row(900, "second")).unwrap_err();
        assert!(matches!(e, EngineError::UniqueConflict { .. }), "{e}");
        assert!(e.is_conflict());
        assert_eq!(e.kind(), ErrorKind::Conflict);
        assert!(e.to_string().contains("retry"), "{e}");
        // a delete in progress also holds the key
        t1.delete_by_key("t", "id", &Value::I64(2)).unwrap();
        assert!(matches!(
            t2.insert("t", row(2, "mine")),
            Err(EngineError::UniqueConflict { .. })
        ));
        t1.rollback().unwrap();
        // the aborted duplicate is no conflict; the kept row still is
        t2.insert("t", row(900, "second")).unwrap();
        assert!(matches!(
            t2.insert("t", row(2, "mine")),
            Err(EngineError::UniqueViolation { .. })
        ));
        t2.commit().unwrap();
        // a dead (deleted, committed) duplicate is no conflict
        let t = db.begin().unwrap();
        assert!(t.delete_by_key("t", "id", &Value::I64(2)).unwrap());
        t.commit().unwrap();
        let t = db.begin().unwrap();
        t.insert("t", row(2, "reborn")).unwrap();
        t.commit().unwrap();

        // Unknown index / column, no unique index, type mismatch, NULL bound,
        // ambiguous table name, key too large.
        let t = db.begin().unwrap();
        let e = t.index_lookup("nope", &Value::I64(1)).unwrap_err();
        assert!(matches!(e, EngineError::UnknownIndex { .. }) && e.kind() == ErrorKind::BadInput);
        let e = t.index_lookup("t", &Value::I64(1)).unwrap_err();
        assert!(e.to_string().contains("name one"), "{e}");
        let e = t
            .get_by_key("t", "name", &Value::from(b"x".as_slice()))
            .unwrap_err();
        assert!(matches!(e, EngineError::NoIndex { .. }), "{e}");
        let e = t.get_by_key("t", "zz", &Value::I64(1)).unwrap_err();
        assert!(matches!(e, EngineError::UnknownColumn { .. }), "{e}");
        let e = t
            .get_by_key("t", "id", &Value::from(b"1".as_slice()))
            .unwrap_err();
        assert!(matches!(e, EngineError::TypeMismatch { .. }), "{e}");
        assert!(e.to_string().contains("\"id\""));
        let e = t.index_lookup("t_name", &Value::I64(1)).unwrap_err();
        assert!(matches!(e, EngineError::TypeMismatch { .. }), "{e}");
        let e = t
            .index_range("t_id", Bound::Included(Value::Null), Bound::Unbounded)
            .unwrap_err();
        assert!(matches!(e, EngineError::TypeMismatch { .. }), "{e}");
        assert!(t.get_by_key("t", "id", &Value::Null).unwrap().is_none());
        let e = t
            .insert("t", vec![Value::I64(5000), Value::Bytes(vec![b'k'; 3000])])
            .unwrap_err();
        assert!(matches!(e, EngineError::KeyTooLarge { .. }), "{e}");
        assert!(e.to_string().contains("t_name"));
        drop(t);
        assert!(matches!(
            db.drop_index("nope"),
            Err(EngineError::UnknownIndex { .. })
        ));
        assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
        db.close().unwrap();
    });
}

#[test]
fn bulk_load_maintains_indexes() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        db.bulk_load("t", (0..3000).rev().map(|i| row(i, &name_of(i))), |_| {})
            .unwrap();
        // A duplicate fails the whole load.
        let e = db
            .bulk_load("t", vec![row(5000, "a"), row(10, "dup")], |_| {})
            .unwrap_err();
        assert!(matches!(e, EngineError::UniqueViolation { .. }), "{e}");
        let t = db.begin().unwrap();
        let ids: Vec<i64> = t
            .index_range("t_id", Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .map(|r| r.unwrap().1[0].as_i64().unwrap())
            .collect();
        assert_eq!(ids, (0..3000).collect::<Vec<_>>());
        drop(t);
        assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
        db.close().unwrap();
    });
}

/// Updating a row that a concurrent transaction updated and committed after
/// our snapshot is a write conflict (retry), not a unique violation on the
/// row's own key, even though the unique index now holds a live entry for
/// that key (the other transaction's new version).
#[test]
fn concurrent_update_of_a_uniquely_indexed_row_is_a_write_conflict() {
    watchdog(Duration::from_secs(30), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        let t = db.begin().unwrap();
        let rid = t.insert("t", row(1, "a")).unwrap();
        t.commit().unwrap();

        let slow = db.begin().unwrap();
        let fast = db.begin().unwrap();
        fast.update("t", rid, row(1, "b")).unwrap();
        fast.commit().unwrap();
        let err = slow.update("t", rid, row(1, "c")).unwrap_err();
        assert!(
            matches!(err, EngineError::WriteConflict { .. }),
            "expected a write conflict, got {err}"
        );
        assert_eq!(err.kind(), ErrorKind::Conflict);
        drop(slow);
        let t = db.begin().unwrap();
        let (_, got) = t.get_by_key("t", "id", &Value::I64(1)).unwrap().unwrap();
        assert_eq!(got, row(1, "b"));
        assert!(db.verify_indexes("t").unwrap().is_empty());
    });
}
