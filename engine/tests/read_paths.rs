//! The read paths through the public API: read-only
//! transactions that write nothing durable, borrowed rows (`RowRef`) with
//! column accessors, handles, a `Database` shared by clones and a
//! transaction moved to another thread, and iterators that outlive their
//! transaction without seeing rows vacuumed under them.

mod common;

use std::ops::Bound;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Column, ColumnType, Database, EngineError, ErrorKind, Value};

fn accounts(db: &Database, n: i64) {
    db.create_table(
        "acc",
        vec![
            Column::new("aid", ColumnType::I64),
            Column::new("k", ColumnType::I64),
            Column::nullable("note", ColumnType::Bytes),
            Column::nullable("bal", ColumnType::I64),
        ],
    )
    .unwrap();
    db.create_index("acc_k", "acc", "k", false).unwrap();
    db.create_index("acc_aid", "acc", "aid", true).unwrap();
    let t = db.begin().unwrap();
    for i in 0..n {
        let note = if i % 3 == 0 {
            Value::Null
        } else {
            Value::Bytes(format!("n{i}").into_bytes())
        };
        let bal = if i % 5 == 0 {
            Value::Null
        } else {
            Value::I64(i * 10)
        };
        t.insert("acc", vec![Value::I64(i), Value::I64(i % 7), note, bal])
            .unwrap();
    }
    t.commit().unwrap();
}

#[test]
fn read_only_transactions_write_nothing_durable() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        accounts(&db, 200);
        let wal_before = db.wal().insert_lsn();
        let begun_before = db.txn_stats().begun;
        for i in 0..50 {
            let t = db.begin().unwrap();
            assert_eq!(t.xid(), None, "a reader has no xid");
            assert_eq!(
                t.index_lookup("acc_k", &Value::I64(i % 7)).unwrap().len(),
                29 - usize::from(i % 7 >= 4)
            );
            assert_eq!(t.commit().unwrap(), wal::Lsn::ZERO);
            let r = db.read().unwrap();
            assert!(
                r.get_by_key("acc", "aid", &Value::I64(i))
                    .unwrap()
                    .is_some()
            );
            r.commit().unwrap();
        }
        assert_eq!(
            db.wal().insert_lsn(),
            wal_before,
            "read-only commits wrote WAL"
        );
        assert_eq!(
            db.txn_stats().begun,
            begun_before,
            "read-only transactions took xids"
        );

        // A read-only transaction refuses every write, naming the table.
        let r = db.read().unwrap();
        let e = r.insert(
            "acc",
            vec![Value::I64(1000), Value::I64(1), Value::Null, Value::Null],
        );
        let e = e.unwrap_err();
        assert!(
            matches!(e, EngineError::ReadOnlyTransaction { op: "insert", .. }),
            "{e}"
        );
        assert_eq!(e.kind(), ErrorKind::BadInput);
        assert!(e.to_string().contains("\"acc\""), "{e}");
        let (id, _) = r.get_by_key("acc", "aid", &Value::I64(3)).unwrap().unwrap();
        assert!(matches!(
            r.delete("acc", id),
            Err(EngineError::ReadOnlyTransaction { .. })
        ));
        assert!(matches!(
            r.update(
                "acc",
                id,
                vec![Value::I64(3), Value::I64(3), Value::Null, Value::Null]
            ),
            Err(EngineError::ReadOnlyTransaction { .. })
        ));
        r.rollback().unwrap();
        assert_eq!(db.wal().insert_lsn(), wal_before);

        // A transaction that writes takes its xid at the first write, sees
        // its own writes, and commits with a record.
        let t = db.begin().unwrap();
        assert!(
            t.get_by_key("acc", "aid", &Value::I64(7))
                .unwrap()
                .is_some()
        );
        assert_eq!(t.xid(), None);
        let id = t
            .insert(
                "acc",
                vec![Value::I64(1000), Value::I64(1), Value::Null, Value::Null],
            )
            .unwrap();
        let xid = t.xid().expect("an xid after the first write");
        assert_eq!(t.snapshot().own, xid);
        assert!(t.get("acc", id).unwrap().is_some(), "own insert visible");
        assert!(t.commit().unwrap() > wal_before);
        assert_eq!(db.txn_stats().begun, begun_before + 1);
        let t = db.read().unwrap();
        assert!(t.get("acc", id).unwrap().is_some());
        drop(t);
        db.close().unwrap();
    });
}

#[test]
fn borrowed_rows_read_each_column_as_the_owned_rows_do() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        accounts(&db, 500);
        let acc = db.table_handle("acc").unwrap();
        let cols = acc.columns();
        let [aid, k, note, bal] = [cols[0], cols[1], cols[2], cols[3]];
        assert_eq!(acc.column("note").unwrap(), note);
        let t = db.read().unwrap();
        let owned: Vec<_> = t.scan(&acc).unwrap().map(Result::unwrap).collect();
        assert_eq!(owned.len(), 500);
        let mut viewed = Vec::new();
        t.scan_each(&acc, |r| {
            let row = vec![
                Value::I64(r.i64(aid)?),
                Value::I64(r.i64(k)?),
                r.bytes_opt(note)?
                    .map_or(Value::Null, |b| Value::Bytes(b.to_vec())),
                r.i64_opt(bal)?.map_or(Value::Null, Value::I64),
            ];
            assert_eq!(row, r.to_row()?);
            assert_eq!(r.value(note)?, row[2]);
            viewed.push((r.id(), row));
            Ok(())
        })
        .unwrap();
        let owned: Vec<_> = owned
            .into_iter()
            .map(|(id, r)| (id, r.into_values()))
            .collect();
        assert_eq!(viewed, owned);

        // A predicate and a projection on the page; stopping early.
        let evens: Vec<_> = t
            .scan(&acc)
            .unwrap()
            .matching(move |r| Ok(r.i64(aid)? % 2 == 0))
            .project(&[bal, aid])
            .map(|r| r.unwrap().1)
            .collect();
        assert_eq!(evens.len(), 250);
        assert_eq!(evens[1], vec![Value::I64(20), Value::I64(2)]);
        assert_eq!(evens[0], vec![Value::Null, Value::I64(0)]);
        let mut seen = 0;
        t.scan_until(&acc, engine::ScanOptions::default(), |_| {
            seen += 1;
            Ok(seen < 10)
        })
        .unwrap();
        assert_eq!(seen, 10);

        // Misuse is an error naming the table, never a wrong value.
        let mut errors = Vec::new();
        t.scan_until(&acc, engine::ScanOptions::default(), |r| {
            errors.push(r.i64(note).unwrap_err());
            errors.push(r.bytes(aid).unwrap_err());
            Ok(false)
        })
        .unwrap();
        for e in &errors {
            assert!(matches!(e, EngineError::WrongColumn { .. }), "{e}");
            assert!(e.to_string().contains("\"acc\""), "{e}");
        }
        let err = t.scan_each(&acc, |r| r.i64(bal).map(drop)).unwrap_err();
        assert!(err.to_string().contains("NULL"), "{err}");
        db.create_table("other", two_columns()).unwrap();
        let other = db.table_handle("other").unwrap();
        let o = t.begin_insert_other(&other);
        assert!(o.is_ok());
        let e = t
            .scan_each(&acc, |r| r.i64(other.column("id").unwrap()).map(drop))
            .unwrap_err();
        assert!(e.to_string().contains("another table"), "{e}");

        // Lookups through an index handle hand over borrowed rows.
        let by_k = db.index_handle("acc_k").unwrap();
        let mut aids = Vec::new();
        let n = t
            .lookup_each(&by_k, &Value::I64(3), |r| {
                aids.push(r.i64(aid)?);
                Ok(())
            })
            .unwrap();
        assert_eq!(n, aids.len());
        let want: Vec<i64> = (0..500).filter(|i| i % 7 == 3).collect();
        aids.sort();
        assert_eq!(aids, want);
        assert_eq!(t.lookup_each(&by_k, &Value::Null, |_| Ok(())).unwrap(), 0);
        let e = t
            .lookup_each(&by_k, &Value::from(b"x".as_slice()), |_| Ok(()))
            .unwrap_err();
        assert!(matches!(e, EngineError::TypeMismatch { .. }), "{e}");
        let (id, _) = t.get_by_key(&acc, "aid", &Value::I64(42)).unwrap().unwrap();
        assert_eq!(
            t.get_with(&acc, id, |r| r.i64(k))
                .unwrap()
                .unwrap()
                .unwrap(),
            0
        );
        drop(t);
        db.close().unwrap();
    });
}

trait InsertOther {
    fn begin_insert_other(&self, other: &engine::Table) -> engine::Result<()>;
}

impl InsertOther for engine::Transaction {
    /// The read-only transaction refuses; a new one takes the write.
    fn begin_insert_other(&self, other: &engine::Table) -> engine::Result<()> {
        assert!(self.insert(other, row(1, "x")).is_err());
        let w = self.database().begin()?;
        w.insert(other, row(1, "x"))?;
        w.commit().map(drop)
    }
}

#[test]
fn handles_name_one_relation_and_the_database_is_shared() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        accounts(&db, 100);
        let acc = db.table_handle("acc").unwrap();
        let by_k = db.index_handle("acc_k").unwrap();
        assert!(matches!(
            db.table_handle("nope"),
            Err(EngineError::UnknownTable { .. })
        ));
        assert!(
            matches!(
                db.index_handle("acc"),
                Err(EngineError::UnknownIndex { .. })
            ),
            "two indexes"
        );

        // A transaction moved into a spawned thread, on a clone of the
        // database; the other thread reads at the same time.
        let t = db.begin().unwrap();
        let db2 = db.clone();
        let acc2 = acc.clone();
        let writer = std::thread::spawn(move || {
            for i in 100..200 {
                t.insert(
                    &acc2,
                    vec![Value::I64(i), Value::I64(i % 7), Value::Null, Value::Null],
                )
                .unwrap();
            }
            t.commit().unwrap();
            let r = db2.read().unwrap();
            r.scan(&acc2).unwrap().count()
        });
        let reader = {
            let db = db.clone();
            let by_k = by_k.clone();
            std::thread::spawn(move || {
                let mut n = 0;
                for _ in 0..50 {
                    let r = db.read().unwrap();
                    n = r.lookup_each(&by_k, &Value::I64(2), |_| Ok(())).unwrap();
                    assert!(n == 14 || n == 29, "{n}: a consistent snapshot");
                }
                n
            })
        };
        assert_eq!(writer.join().unwrap(), 200);
        assert!(reader.join().unwrap() >= 14);

        // close() while other handles live is refused, naming how many;
        // the database stays usable through them.
        let other = db.clone();
        assert!(db.handle_count() >= 2);
        let e = db.close().unwrap_err();
        assert!(
            matches!(e, EngineError::StillInUse { others: 1, .. }),
            "{e}"
        );

        // DROP: the old handles fail, also once a table of the same name exists.
        other.drop_table("acc").unwrap();
        let t = other.read().unwrap();
        assert!(matches!(
            t.scan_each(&acc, |_| Ok(())),
            Err(EngineError::UnknownTable { .. })
        ));
        assert!(matches!(
            t.lookup_each(&by_k, &Value::I64(1), |_| Ok(())),
            Err(EngineError::UnknownTable { .. })
        ));
        drop(t);
        other.create_table("acc", two_columns()).unwrap();
        let t = other.begin().unwrap();
        assert!(matches!(
            t.insert(&acc, row(1, "a")),
            Err(EngineError::UnknownTable { .. })
        ));
        t.insert("acc", row(1, "a")).unwrap();
        t.commit().unwrap();
        other.close().unwrap();

        // Everything committed through the moved transaction is durable.
        let db = Database::open(dir.path(), small_options()).unwrap();
        assert_eq!(db.read().unwrap().scan("acc").unwrap().count(), 1);
        db.close().unwrap();
    });
}

#[test]
fn an_iterator_that_outlives_its_transaction_sees_no_vacuumed_rows() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        let n = 3000;
        let w = db.begin().unwrap();
        for i in 0..n {
            w.insert("t", row(i, &format!("row {i} {}", "x".repeat(40))))
                .unwrap();
        }
        w.commit().unwrap();

        // Start a scan and a range scan, read a little of each, end their
        // transaction.
        let t = db.begin().unwrap();
        let mut scan = t.scan("t").unwrap();
        let mut range = t
            .index_range("t_id", Bound::Included(Value::I64(0)), Bound::Unbounded)
            .unwrap();
        let mut got: Vec<i64> = Vec::new();
        for _ in 0..10 {
            got.push(scan.next().unwrap().unwrap().1[0].as_i64().unwrap());
        }
        let mut got_range: Vec<i64> = vec![range.next().unwrap().unwrap().1[0].as_i64().unwrap()];
        t.commit().unwrap();

        // Another transaction deletes every other row, and vacuum runs; then
        // new rows are inserted, which would reuse freed line pointers.
        let d = db.begin().unwrap();
        for i in (0..n).filter(|i| i % 2 == 1) {
            assert!(d.delete_by_key("t", "id", &Value::I64(i)).unwrap());
        }
        d.commit().unwrap();
        let report = db.vacuum("t").unwrap();
        assert_eq!(
            report.heap.dead_pointers, 0,
            "the iterators' snapshot holds the horizon: {report:?}"
        );
        let w = db.begin().unwrap();
        for i in n..n + 500 {
            w.insert("t", row(i, "new")).unwrap();
        }
        w.commit().unwrap();

        // The scans finish: every row they return is one of the originals,
        // whole, each exactly once, and none of the new ones.
        for r in scan.by_ref() {
            let (_, r) = r.unwrap();
            let i = r[0].as_i64().unwrap();
            assert_eq!(r, row(i, &format!("row {i} {}", "x".repeat(40))));
            got.push(i);
        }
        for r in range.by_ref() {
            let (_, r) = r.unwrap();
            let i = r[0].as_i64().unwrap();
            assert_eq!(r, row(i, &format!("row {i} {}", "x".repeat(40))));
            got_range.push(i);
        }
        got.sort();
        assert_eq!(got, (0..n).collect::<Vec<_>>());
        assert_eq!(got_range, (0..n).collect::<Vec<_>>());

        // Once the iterators are gone, vacuum removes the deleted rows.
        drop(scan);
        drop(range);
        let report = db.vacuum("t").unwrap();
        assert_eq!(report.heap.dead_pointers, (n / 2) as u64, "{report:?}");
        assert_eq!(
            db.read().unwrap().scan("t").unwrap().count(),
            (n / 2 + 500) as usize
        );
        assert!(db.verify_indexes("t").unwrap().is_empty());
        db.close().unwrap();
    });
}

/// A scan iterator read part-way holds no pins while it sits idle (its read
/// stream's read-ahead is unpinned whenever rows are handed out): DROP
/// TABLE does not wait for it, and the iterator then ends with an error.
#[test]
fn an_idle_scan_iterator_does_not_hold_up_drop_table() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("big", two_columns()).unwrap();
        let t = db.begin().unwrap();
        for i in 0..3000 {
            t.insert("big", row(i, "a name long enough to fill pages quickly"))
                .unwrap();
        }
        t.commit().unwrap();
        let r = db.read().unwrap();
        let mut it = r.scan("big").unwrap();
        for _ in 0..10 {
            it.next().unwrap().unwrap();
        }
        assert_eq!(db.pool().pinned_buffers(), 0, "an idle iterator holds pins");
        let started = std::time::Instant::now();
        db.drop_table("big").unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        let rest: Vec<_> = it.collect();
        assert!(
            matches!(rest.last(), Some(Err(EngineError::UnknownTable { .. }))),
            "{:?}",
            rest.last()
        );
    });
}

#[test]
fn an_iterator_that_is_the_last_handle_closes_the_database_when_dropped() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        accounts(&db, 300);
        let t = db.read().unwrap();
        let mut it = t.scan("acc").unwrap();
        assert!(it.next().is_some());
        drop(t);
        drop(db);
        // The directory is still locked: the iterator holds the database.
        assert!(matches!(
            Database::open(dir.path(), small_options()),
            Err(EngineError::DatabaseInUse { .. })
        ));
        assert_eq!(it.by_ref().count(), 299);
        drop(it);
        // Closed cleanly: nothing to replay, every row there.
        let db = Database::open(dir.path(), small_options()).unwrap();
        let r = db.recovery_stats();
        assert_eq!(r.commits + r.aborts + r.other, 0, "{r:?}");
        assert_eq!(db.read().unwrap().scan("acc").unwrap().count(), 300);
        db.close().unwrap();
    });
}
