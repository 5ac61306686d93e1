//! Every call of the Database / Transaction API, and every error a user can
//! act on, through the public API only.

mod common;

use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{
    Column, ColumnType, Database, EngineError, ErrorKind, RelKind, RingChoice, ScanOptions, Value,
};

fn sorted_ids(db: &Database, table: &str) -> Vec<i64> {
    let t = db.begin().unwrap();
    let mut ids: Vec<i64> = t
        .scan(table)
        .unwrap()
        .map(|r| r.unwrap().1[0].as_i64().unwrap())
        .collect();
    ids.sort();
    ids
}

#[test]
fn rows_in_and_out_under_snapshots() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        let info = db.create_table("people", two_columns()).unwrap();
        assert!(info.rel >= engine::FIRST_USER_REL);
        assert_eq!(db.table("people").unwrap(), info);
        assert_eq!(db.tables(), vec![info.clone()]);
        assert_eq!(info.column_index("name").unwrap(), 1);

        // insert + get + commit
        let t = db.begin().unwrap();
        let a = t.insert("people", row(1, "ann")).unwrap();
        let b = t
            .insert("people", vec![Value::I64(2), Value::Null])
            .unwrap();
        assert_eq!(t.get("people", a).unwrap().unwrap(), row(1, "ann"));
        t.commit().unwrap();

        // A snapshot taken now does not see later commits.
        let reader = db.begin().unwrap();
        let t = db.begin().unwrap();
        let a2 = t.update("people", a, row(1, "anne")).unwrap();
        t.delete("people", b).unwrap();
        t.commit().unwrap();
        assert_eq!(reader.get("people", a).unwrap().unwrap(), row(1, "ann"));
        assert_eq!(
            reader.get("people", b).unwrap().unwrap(),
            vec![Value::I64(2), Value::Null]
        );
        assert_eq!(reader.scan("people").unwrap().count(), 2);
        reader.rollback().unwrap();
        let t = db.begin().unwrap();
        assert_eq!(t.get("people", a).unwrap(), None);
        assert_eq!(t.get("people", a2).unwrap().unwrap(), row(1, "anne"));
        assert_eq!(t.get("people", b).unwrap(), None);
        let all: Vec<_> = t.scan("people").unwrap().map(Result::unwrap).collect();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].0, a2);
        assert_eq!(all[0].1, row(1, "anne"));
        drop(t);

        // rollback, and drop without commit, leave nothing
        let t = db.begin().unwrap();
        t.insert("people", row(10, "gone")).unwrap();
        t.rollback().unwrap();
        {
            let t = db.begin().unwrap();
            t.insert("people", row(11, "dropped")).unwrap();
        }
        assert_eq!(sorted_ids(&db, "people"), vec![1]);

        // asynchronous commit is still visible at once
        let t = db.begin_with(engine::CommitMode::Asynchronous).unwrap();
        t.insert("people", row(3, "async")).unwrap();
        t.commit().unwrap();
        assert_eq!(sorted_ids(&db, "people"), vec![1, 3]);
        db.close().unwrap();
    });
}

#[test]
fn every_user_error_is_named_and_kinded() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        let t = db.begin().unwrap();
        let id = t.insert("t", row(1, "x")).unwrap();
        t.commit().unwrap();

        let check = |e: EngineError, kind: ErrorKind, needles: &[&str]| {
            assert_eq!(e.kind(), kind, "{e}");
            for n in needles {
                assert!(e.to_string().contains(n), "{n:?} not in: {e}");
            }
        };
        let t = db.begin().unwrap();
        // unknown table / column
        check(
            t.insert("nope", row(1, "")).unwrap_err(),
            ErrorKind::BadInput,
            &["\"nope\""],
        );
        check(
            db.table("nope").unwrap_err(),
            ErrorKind::BadInput,
            &["unknown table"],
        );
        check(
            db.table("t").unwrap().column_index("zz").unwrap_err(),
            ErrorKind::BadInput,
            &["\"t\"", "\"zz\""],
        );
        // type mismatch, wrong column count, NULL, too large
        let e = t
            .insert("t", vec![Value::Bytes(b"1".to_vec()), Value::Null])
            .unwrap_err();
        assert!(matches!(e, EngineError::TypeMismatch { .. }));
        check(e, ErrorKind::BadInput, &["\"t\"", "\"id\"", "i64", "bytes"]);
        let e = t.insert("t", vec![Value::I64(1)]).unwrap_err();
        assert!(matches!(e, EngineError::WrongColumnCount { .. }));
        check(e, ErrorKind::BadInput, &["\"t\"", "2 columns", "1 values"]);
        let e = t.insert("t", vec![Value::Null, Value::Null]).unwrap_err();
        assert!(matches!(e, EngineError::NullNotAllowed { .. }));
        check(e, ErrorKind::BadInput, &["\"t\"", "\"id\""]);
        let e = t
            .insert("t", vec![Value::I64(1), Value::Bytes(vec![0; 9000])])
            .unwrap_err();
        assert!(matches!(e, EngineError::RowTooLarge { .. }));
        check(e, ErrorKind::BadInput, &["\"t\"", "too large"]);
        // bad row ids
        let e = t.get("t", engine::RowId::new(0, 0)).unwrap_err();
        assert!(matches!(e, EngineError::BadRowId { .. }), "{e}");
        let e = t.get("t", engine::RowId::new(999, 1)).unwrap_err();
        assert!(matches!(e, EngineError::BadRowId { .. }), "{e}");
        drop(t);

        // write conflict: the first updater wins, the second must retry
        let t1 = db.begin().unwrap();
        let t2 = db.begin().unwrap();
        t1.update("t", id, row(1, "one")).unwrap();
        let e = t2.update("t", id, row(1, "two")).unwrap_err();
        assert!(e.is_conflict());
        check(e, ErrorKind::Conflict, &["\"t\"", "retry"]);
        t1.commit().unwrap();
        let e = t2.delete("t", id).unwrap_err();
        check(e, ErrorKind::Conflict, &["write conflict"]);
        t2.rollback().unwrap();
        // an update of a row this transaction cannot see
        let t = db.begin().unwrap();
        let e = t.update("t", id, row(1, "three")).unwrap_err();
        assert!(matches!(e, EngineError::RowNotVisible { .. }), "{e}");
        drop(t);

        // DDL errors
        check(
            db.create_table("t", two_columns()).unwrap_err(),
            ErrorKind::BadInput,
            &["exists"],
        );
        check(
            db.create_table("", two_columns()).unwrap_err(),
            ErrorKind::BadInput,
            &["empty"],
        );
        check(
            db.create_table("e", vec![]).unwrap_err(),
            ErrorKind::BadInput,
            &["0 columns"],
        );
        let dup = vec![
            Column::new("a", ColumnType::I64),
            Column::new("a", ColumnType::Bytes),
        ];
        check(
            db.create_table("d", dup).unwrap_err(),
            ErrorKind::BadInput,
            &["twice"],
        );
        check(
            db.drop_table("nope").unwrap_err(),
            ErrorKind::BadInput,
            &["\"nope\""],
        );
        // index DDL errors (the rest are in indexes_end_to_end.rs)
        check(
            db.create_index("i", "t", "zz", false).unwrap_err(),
            ErrorKind::BadInput,
            &["\"zz\""],
        );
        check(
            db.create_index("i", "nope", "id", false).unwrap_err(),
            ErrorKind::BadInput,
            &["\"nope\""],
        );
        check(
            db.create_index("t", "t", "id", false).unwrap_err(),
            ErrorKind::BadInput,
            &["exists"],
        );
        assert!(db.indexes().is_empty());
        db.close().unwrap();
    });
}

#[test]
fn drop_table_frees_pages_files_and_the_name() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        let info = db.create_table("t", two_columns()).unwrap();
        let t = db.begin().unwrap();
        for i in 0..200 {
            t.insert("t", row(i, "some text to fill pages")).unwrap();
        }
        t.commit().unwrap();
        let file = dir.path().join("base").join(info.rel.0.to_string());
        assert!(file.exists());
        assert!(db.resident_pages().iter().any(|r| r.name == "t"));
        db.drop_table("t").unwrap();
        assert!(!file.exists(), "the heap file is removed");
        assert!(
            db.buffercache()
                .iter()
                .all(|b| b.row.tag.is_none_or(|tag| tag.rel != info.rel))
        );
        assert!(matches!(
            db.table("t"),
            Err(EngineError::UnknownTable { .. })
        ));
        let again = db.create_table("t", two_columns()).unwrap();
        assert!(again.rel > info.rel, "relation ids are never reused");
        assert_eq!(sorted_ids(&db, "t"), Vec::<i64>::new());
        db.close().unwrap();
    });
}

#[test]
fn bulk_load_vacuum_and_introspection() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db =
            Database::open(dir.path(), small_options().bulk_load_progress_every(1000)).unwrap();
        db.create_table("big", two_columns()).unwrap();
        let wal0 = db.wal_stats();
        let mut reports = Vec::new();
        let done = db
            .bulk_load(
                "big",
                (0..5000).map(|i| row(i, "padding padding padding padding padding")),
                |p| reports.push(p),
            )
            .unwrap();
        assert_eq!(done.rows, 5000);
        assert!(done.done);
        assert_eq!(reports.len(), 6, "every 1000 rows and at the end");
        assert!(
            reports
                .windows(2)
                .all(|w| w[0].rows <= w[1].rows && !w[0].done)
        );
        assert!(done.pages > 16, "{done:?}: more than a quarter of the pool");
        assert!(
            done.pages_written > 0,
            "the loader wrote its own pages: {done:?}"
        );
        // Into an empty table: each page logged whole, once (plus the commit).
        let wal1 = db.wal_stats();
        assert!(wal1.bytes - wal0.bytes > 5000 * 40, "{wal0:?} {wal1:?}");
        assert!(
            wal1.records - wal0.records <= done.pages + 2,
            "{wal0:?} {wal1:?}"
        );

        // A bulk load with a bad row loads nothing.
        let e = db
            .bulk_load(
                "big",
                vec![row(1, "ok"), vec![Value::Null, Value::Null]],
                |_| {},
            )
            .unwrap_err();
        assert!(matches!(e, EngineError::NullNotAllowed { .. }));
        assert_eq!(sorted_ids(&db, "big").len(), 5000);

        // A large table is scanned through the ring unless told otherwise.
        let t = db.begin().unwrap();
        assert!(t.scan("big").unwrap().uses_ring());
        let opts = ScanOptions {
            ring: RingChoice::Never,
            ..ScanOptions::default()
        };
        assert!(!t.scan_with("big", opts).unwrap().uses_ring());
        // delete half, then vacuum removes them once no snapshot needs them
        let ids: Vec<_> = t.scan("big").unwrap().map(|r| r.unwrap().0).collect();
        for id in ids.iter().step_by(2) {
            t.delete("big", *id).unwrap();
        }
        let old = db.begin().unwrap();
        t.commit().unwrap();
        let r = db.vacuum("big").unwrap();
        // Only the row of the failed bulk load (aborted) goes: a snapshot
        // older than the deletes still sees the deleted rows.
        assert_eq!(r.heap.pruned.tuples_removed, 1, "{r:?}");
        assert_eq!(old.scan("big").unwrap().count(), 5000);
        drop(old);
        let r = db.vacuum("big").unwrap();
        assert_eq!(r.heap.pruned.tuples_removed, 2500, "{r:?}");
        assert!(r.heap.used_ring);
        assert_eq!(sorted_ids(&db, "big").len(), 2500);
        assert!(matches!(
            db.vacuum("nope"),
            Err(EngineError::UnknownTable { .. })
        ));

        // introspection names every relation
        let cache = db.buffercache();
        assert_eq!(cache.len(), 64);
        let kinds: Vec<_> = cache.iter().filter_map(|b| b.kind).collect();
        assert!(kinds.contains(&RelKind::Table));
        assert!(cache.iter().any(|b| b.relation.as_deref() == Some("big")));
        // The NUMA view: every buffer holding a page has its memory on a
        // node the kernel names; a buffer never used has no memory yet (the
        // pool's memory is given at first use by default) and no node. The
        // per-node totals add up to the rows that have one.
        let per_node = db.buffers_per_node();
        let placed = cache.iter().filter(|b| b.row.numa_node.is_some()).count();
        assert_eq!(
            per_node.iter().map(|n| n.1).sum::<usize>(),
            placed,
            "{per_node:?}"
        );
        assert!(
            cache
                .iter()
                .filter(|b| b.row.tag.is_some())
                .all(|b| b.row.numa_node.is_some())
        );
        let used = cache.iter().filter(|b| b.row.tag.is_some()).count();
        assert_eq!(per_node.iter().map(|n| n.2).sum::<usize>(), used);
        let resident = db.resident_pages();
        assert!(
            resident
                .iter()
                .any(|r| r.name == "big" && r.kind == RelKind::Table)
        );
        assert!(
            resident
                .iter()
                .any(|r| r.name == "clog" || r.name == "catalog")
        );
        assert!(db.pool_stats().totals().hits > 0);
        assert!(db.wal_stats().records > 2500, "every delete logged");
        assert!(db.txn_stats().committed >= 3);
        db.checkpoint().unwrap();
        db.close().unwrap();
    });
}

#[test]
fn threads_share_a_database() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        std::thread::scope(|s| {
            for th in 0..4i64 {
                let db = &db;
                s.spawn(move || {
                    for i in 0..50 {
                        let t = db.begin_with(engine::CommitMode::Asynchronous).unwrap();
                        t.insert("t", row(th * 1000 + i, "x")).unwrap();
                        t.commit().unwrap();
                    }
                });
            }
        });
        assert_eq!(sorted_ids(&db, "t").len(), 200);
        db.close().unwrap();
    });
}
