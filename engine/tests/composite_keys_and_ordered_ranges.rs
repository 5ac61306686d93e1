//! Composite indexes, primary keys and ordered ranges, on an order-entry
//! schema as in TPC-C: an index over several columns refuses a duplicate
//! tuple (and lets keys with a NULL through), a declared primary key is a
//! unique index made with the table on NOT NULL columns, ranges over a key
//! prefix (with bounds on the next column, ascending or descending, with a
//! limit, owned or borrowed) return what a scan and a sort return, a range
//! over 100,000 equal keys is linear, bad keys are clear errors, and
//! composite indexes come back from a crash with `verify_indexes` clean.

mod common;

use std::io::Write;
use std::ops::Bound;
use std::time::{Duration, Instant};

use common::{small_options, watchdog};
use engine::{
    Column, ColumnType, Database, EngineError, KeyRange, Row, TableOptions, Transaction, Value,
};

const CHILD_DIR: &str = "ENGINE_TEST_COMPOSITE_CRASH_CHILD_DIR";

/// orders(w_id, d_id, o_id, c_id, note): primary key (w_id, d_id, o_id).
fn order_columns() -> Vec<Column> {
    vec![
        Column::new("w_id", ColumnType::I64),
        Column::new("d_id", ColumnType::I64),
        Column::new("o_id", ColumnType::I64),
        Column::new("c_id", ColumnType::I64),
        Column::nullable("note", ColumnType::Bytes),
    ]
}

fn order(w: i64, d: i64, o: i64, c: i64) -> Row {
    vec![
        Value::I64(w),
        Value::I64(d),
        Value::I64(o),
        Value::I64(c),
        Value::Bytes(format!("order {w}/{d}/{o}").into_bytes()),
    ]
}

fn ints(row: &[Value]) -> (i64, i64, i64, i64) {
    let i = |k: usize| row[k].as_i64().unwrap();
    (i(0), i(1), i(2), i(3))
}

/// Create `orders` with its primary key and an index on (w_id, d_id, c_id,
/// o_id) for "the orders of a customer".
fn create_orders(db: &Database) {
    db.create_table_with(
        "orders",
        order_columns(),
        TableOptions::default().primary_key(&["w_id", "d_id", "o_id"]),
    )
    .unwrap();
    db.create_index_on(
        "orders_customer",
        "orders",
        &["w_id", "d_id", "c_id", "o_id"],
        false,
    )
    .unwrap();
}

/// Orders of 2 warehouses x 3 districts, o_id 1..=60 inserted out of
/// order, customer o_id % 7; returns them as the model.
fn fill(db: &Database) -> Vec<(i64, i64, i64, i64)> {
    let mut model = Vec::new();
    let t = db.begin().unwrap();
    for w in 1..=2 {
        for d in 1..=3 {
            for k in 0..60 {
                let o = (k * 37) % 60 + 1;
                let c = o % 7;
                t.insert("orders", order(w, d, o, c)).unwrap();
                model.push((w, d, o, c));
            }
        }
    }
    t.commit().unwrap();
    model.sort();
    model
}

fn collect(t: &Transaction, index: &str, range: KeyRange) -> Vec<(i64, i64, i64, i64)> {
    let owned: Vec<_> = t
        .range(index, range.clone())
        .unwrap()
        .map(|r| ints(&r.unwrap().1))
        .collect();
    let mut borrowed = Vec::new();
    let n = t
        .range_each(index, range, |row| {
            borrowed.push(ints(&row.to_row()?));
            Ok(())
        })
        .unwrap();
    assert_eq!(n, borrowed.len());
    assert_eq!(owned, borrowed, "range and range_each agree");
    owned
}

#[test]
fn ranges_over_a_prefix_ascending_and_descending_with_limits_match_a_sorted_scan() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        create_orders(&db);
        let model = fill(&db);
        let t = db.begin().unwrap();
        // A full key prefix: the orders of district (2, 3), by o_id.
        let want: Vec<_> = model
            .iter()
            .filter(|r| (r.0, r.1) == (2, 3))
            .copied()
            .collect();
        assert_eq!(want.len(), 60);
        assert_eq!(collect(&t, "orders_pkey", KeyRange::prefix((2, 3))), want);
        // Descending: the newest order first; with a limit of 1, only it
        // (ORDER BY o_id DESC LIMIT 1).
        let mut rev = want.clone();
        rev.reverse();
        assert_eq!(
            collect(&t, "orders_pkey", KeyRange::prefix((2, 3)).desc()),
            rev
        );
        assert_eq!(
            collect(&t, "orders_pkey", KeyRange::prefix((2, 3)).desc().limit(1)),
            vec![(2, 3, 60, 60 % 7)]
        );
        // The oldest order of a district (min(o_id) over the prefix).
        assert_eq!(
            collect(&t, "orders_pkey", KeyRange::prefix((1, 2)).limit(1)),
            vec![(1, 2, 1, 1)]
        );
        // A prefix plus bounds on the next column, both directions.
        let some: Vec<_> = model
            .iter()
            .filter(|r| (r.0, r.1) == (1, 1) && (10..20).contains(&r.2))
            .copied()
            .collect();
        assert_eq!(some.len(), 10);
        assert_eq!(
            collect(&t, "orders_pkey", KeyRange::prefix((1, 1)).range(10..20)),
            some
        );
        let mut some_rev = some.clone();
        some_rev.reverse();
        assert_eq!(
            collect(
                &t,
                "orders_pkey",
                KeyRange::prefix((1, 1)).range(10..20).desc().limit(3)
            ),
            some_rev[..3].to_vec()
        );
        assert_eq!(
            collect(
                &t,
                "orders_pkey",
                KeyRange::prefix((1, 1))
                    .bounds(Bound::Excluded(Value::I64(58)), Bound::Unbounded)
                    .desc()
            ),
            vec![(1, 1, 60, 4), (1, 1, 59, 3)]
        );
        // The newest order of a customer: prefix (w, d, c) of the customer
        // index, descending, limit 1.
        let newest = model
            .iter()
            .filter(|r| (r.0, r.1, r.3) == (1, 3, 5))
            .max_by_key(|r| r.2)
            .copied()
            .unwrap();
        assert_eq!(
            collect(
                &t,
                "orders_customer",
                KeyRange::prefix((1, 3, 5)).desc().limit(1)
            ),
            vec![newest]
        );
        // A prefix of one column, the whole index, and a full key.
        let w2: Vec<_> = model.iter().filter(|r| r.0 == 2).copied().collect();
        assert_eq!(collect(&t, "orders_pkey", KeyRange::prefix(2)), w2);
        assert_eq!(collect(&t, "orders_pkey", KeyRange::all()), model);
        let mut all_rev = model.clone();
        all_rev.reverse();
        assert_eq!(collect(&t, "orders_pkey", KeyRange::all().desc()), all_rev);
        assert_eq!(
            collect(&t, "orders_pkey", KeyRange::prefix((1, 1, 7))),
            vec![(1, 1, 7, 0)]
        );
        assert_eq!(
            collect(&t, "orders_pkey", KeyRange::prefix((1, 1, 61))),
            vec![]
        );
        assert_eq!(
            collect(&t, "orders_pkey", KeyRange::prefix((1, 1)).limit(0)),
            vec![]
        );
        // The older calls on a composite index: bounds and lookups on its
        // first column.
        let w1: Vec<_> = t
            .index_range(
                "orders_pkey",
                Bound::Included(Value::I64(1)),
                Bound::Excluded(Value::I64(2)),
            )
            .unwrap()
            .map(|r| ints(&r.unwrap().1))
            .collect();
        assert_eq!(
            w1,
            model
                .iter()
                .filter(|r| r.0 == 1)
                .copied()
                .collect::<Vec<_>>()
        );
        let looked: Vec<_> = t
            .index_lookup("orders_pkey", &Value::I64(2))
            .unwrap()
            .iter()
            .map(|(_, r)| ints(r))
            .collect();
        assert_eq!(looked, w2);
        // Changes of this transaction show, in key order: a new newest
        // order, and a deleted one gone.
        t.insert("orders", order(2, 3, 61, 1)).unwrap();
        let (id, _) = t.get_by_primary_key("orders", (2, 3, 60)).unwrap().unwrap();
        t.delete("orders", id).unwrap();
        assert_eq!(
            collect(&t, "orders_pkey", KeyRange::prefix((2, 3)).desc().limit(2)),
            vec![(2, 3, 61, 1), (2, 3, 59, 59 % 7)]
        );
        t.commit().unwrap();
        assert_eq!(db.verify_indexes("orders").unwrap(), vec![]);
    });
}

#[test]
fn a_primary_key_is_a_unique_index_on_not_null_columns_made_with_the_table() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        create_orders(&db);
        let pk = db.table_handle("orders").unwrap().primary_key().unwrap();
        assert_eq!(pk.name(), "orders_pkey");
        assert!(pk.info().unique && pk.info().primary);
        assert_eq!(pk.info().columns, vec![0, 1, 2]);
        let t = db.begin().unwrap();
        t.insert("orders", order(1, 1, 1, 5)).unwrap();
        t.insert("orders", order(1, 2, 1, 5)).unwrap();
        t.insert("orders", order(2, 1, 1, 5)).unwrap();
        let dup = t.insert("orders", order(1, 1, 1, 6)).unwrap_err();
        assert!(
            matches!(&dup, EngineError::UniqueViolation { index, key, .. }
                if index == "orders_pkey" && key == "(1, 1, 1)"),
            "{dup}"
        );
        let (_, row) = t.get_by_primary_key("orders", (1, 2, 1)).unwrap().unwrap();
        assert_eq!(ints(&row), (1, 2, 1, 5));
        assert!(t.get_by_primary_key("orders", (1, 2, 2)).unwrap().is_none());
        // An update that would move a row onto another's key is refused too.
        let (id, _) = t.get_by_primary_key("orders", (2, 1, 1)).unwrap().unwrap();
        assert!(matches!(
            t.update("orders", id, order(1, 1, 1, 0)),
            Err(EngineError::UniqueViolation { .. })
        ));
        t.commit().unwrap();
        // A wrong key: too many values, too few, the wrong type.
        let r = db.begin().unwrap();
        assert!(matches!(
            r.get_by_primary_key("orders", (1, 1, 1, 1)),
            Err(EngineError::BadKey { .. })
        ));
        assert!(matches!(
            r.get_by_primary_key("orders", (1, 1)),
            Err(EngineError::BadKey { .. })
        ));
        let e = r.get_by_primary_key("orders", (1, "x", 1)).unwrap_err();
        assert!(
            matches!(&e, EngineError::TypeMismatch { column, .. } if column == "d_id"),
            "{e}"
        );
        drop(r);
        // Still there after a reopen, found again as the primary key.
        db.close().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        let pk = db.table_handle("orders").unwrap().primary_key().unwrap();
        assert_eq!(pk.info().columns, vec![0, 1, 2]);
        let r = db.begin().unwrap();
        assert!(r.get_by_primary_key("orders", (1, 1, 1)).unwrap().is_some());
        drop(r);
        let w = db.begin().unwrap();
        assert!(matches!(
            w.insert("orders", order(1, 1, 1, 9)),
            Err(EngineError::UniqueViolation { .. })
        ));
        drop(w);

        // Refused definitions: a nullable key column, an unknown one, one
        // named twice, more than 8; no table is left behind.
        let refused = |key: &[&str]| {
            let e = db
                .create_table_with(
                    "bad",
                    order_columns(),
                    TableOptions::default().primary_key(key),
                )
                .unwrap_err();
            assert!(db.table("bad").is_err());
            e.to_string()
        };
        let e = refused(&["w_id", "note"]);
        assert!(e.contains("note") && e.contains("nullable"), "{e}");
        let e = refused(&["w_id", "nope"]);
        assert!(e.contains("nope"), "{e}");
        let e = refused(&["w_id", "w_id"]);
        assert!(e.contains("twice"), "{e}");
        let e = db
            .create_index_on(
                "too_wide",
                "orders",
                &[
                    "w_id", "d_id", "o_id", "c_id", "note", "w_id", "d_id", "o_id", "c_id",
                ],
                false,
            )
            .unwrap_err();
        assert!(matches!(e, EngineError::InvalidSchema { .. }), "{e}");
        // A table without a primary key.
        db.create_table("plain", order_columns()).unwrap();
        let r = db.begin().unwrap();
        assert!(matches!(
            r.get_by_primary_key("plain", (1, 1, 1)),
            Err(EngineError::NoIndex { .. })
        ));
        assert!(db.table_handle("plain").unwrap().primary_key().is_none());
    });
}

#[test]
fn a_unique_composite_index_treats_keys_with_a_null_as_distinct() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("orders", order_columns()).unwrap();
        db.create_index_on("w_note", "orders", &["w_id", "note"], true)
            .unwrap();
        let t = db.begin().unwrap();
        let with_note = |w: i64, note: Option<&str>| {
            let mut r = order(w, 0, 0, 0);
            r[4] = note.map_or(Value::Null, |n| Value::Bytes(n.as_bytes().to_vec()));
            r
        };
        t.insert("orders", with_note(1, Some("a"))).unwrap();
        t.insert("orders", with_note(1, Some("a\0"))).unwrap();
        t.insert("orders", with_note(1, None)).unwrap();
        t.insert("orders", with_note(1, None)).unwrap();
        t.insert("orders", with_note(2, Some("a"))).unwrap();
        assert!(matches!(
            t.insert("orders", with_note(1, Some("a"))),
            Err(EngineError::UniqueViolation { .. })
        ));
        // NULLs are indexed and sort first; a NULL prefix finds them.
        let notes: Vec<Value> = t
            .range("w_note", KeyRange::prefix(1))
            .unwrap()
            .map(|r| r.unwrap().1[4].clone())
            .collect();
        assert_eq!(
            notes,
            vec![
                Value::Null,
                Value::Null,
                Value::Bytes(b"a".to_vec()),
                Value::Bytes(b"a\0".to_vec())
            ]
        );
        assert_eq!(
            t.range("w_note", KeyRange::prefix((1, Value::Null)))
                .unwrap()
                .count(),
            2
        );
        t.commit().unwrap();
        // Building the same index over the rows: the two NULL keys are no
        // duplicate; a real duplicate fails the build.
        db.create_index_on("w_note2", "orders", &["w_id", "note"], true)
            .unwrap();
        let t = db.begin().unwrap();
        t.insert("orders", with_note(3, Some("z"))).unwrap();
        t.insert("orders", with_note(3, Some("z"))).unwrap_err();
        drop(t);
        db.drop_index("w_note").unwrap();
        db.drop_index("w_note2").unwrap();
        let t = db.begin().unwrap();
        t.insert("orders", with_note(1, Some("a"))).unwrap();
        t.commit().unwrap();
        assert!(matches!(
            db.create_index_on("w_note3", "orders", &["w_id", "note"], true),
            Err(EngineError::UniqueViolation { .. })
        ));
        assert_eq!(db.verify_indexes("orders").unwrap(), vec![]);
    });
}

#[test]
fn bad_ranges_are_clear_errors() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        create_orders(&db);
        let t = db.begin().unwrap();
        let err = |r: KeyRange| t.range("orders_pkey", r).unwrap_err();
        assert!(matches!(
            err(KeyRange::prefix((1, 1, 1, 1))),
            EngineError::BadKey { .. }
        ));
        let e = err(KeyRange::prefix((1, 1, 1)).range(1..2));
        assert!(matches!(e, EngineError::BadKey { .. }), "{e}");
        let e = err(KeyRange::prefix(1).range("a".."b"));
        assert!(
            matches!(&e, EngineError::TypeMismatch { column, .. } if column == "d_id"),
            "{e}"
        );
        // A one-column index keeps its rule: NULL bounds are type errors,
        // a NULL lookup finds nothing.
        db.create_table("kv", common::two_columns()).unwrap();
        db.create_index("kv_id", "kv", "id", false).unwrap();
        let t = db.begin().unwrap();
        assert!(matches!(
            t.range(
                "kv_id",
                KeyRange::all().bounds(Bound::Included(Value::Null), Bound::Unbounded)
            ),
            Err(EngineError::TypeMismatch { .. })
        ));
        assert_eq!(
            t.range("kv_id", KeyRange::prefix(Value::Null))
                .unwrap()
                .count(),
            0
        );
    });
}

#[test]
fn a_range_over_100000_equal_keys_is_linear_in_both_directions() {
    watchdog(Duration::from_secs(300), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options().pool_buffers(4096)).unwrap();
        db.create_table("t", common::two_columns()).unwrap();
        db.create_index("t_id", "t", "id", false).unwrap();
        const N: usize = 100_000;
        db.bulk_load("t", (0..N).map(|_| common::row(7, "x")), |_| {})
            .unwrap();
        let t = db.begin().unwrap();
        // Warm the pool, then time a lookup of the rows and a range over
        // them, each owned.
        assert_eq!(t.index_lookup("t_id", &Value::I64(7)).unwrap().len(), N);
        let started = Instant::now();
        let looked = t.index_lookup("t_id", &Value::I64(7)).unwrap();
        let lookup = started.elapsed();
        for desc in [false, true] {
            let range = if desc {
                KeyRange::prefix(7).desc()
            } else {
                KeyRange::prefix(7)
            };
            let started = Instant::now();
            let ids: Vec<_> = t
                .range("t_id", range)
                .unwrap()
                .map(|r| r.unwrap().0)
                .collect();
            let took = started.elapsed();
            assert_eq!(ids.len(), N);
            let mut want: Vec<_> = looked.iter().map(|(id, _)| *id).collect();
            if desc {
                want.reverse();
            }
            assert!(ids == want, "desc {desc}: the rows in row-id order");
            eprintln!("lookup {lookup:?}, range (desc {desc}) {took:?}");
            assert!(
                took <= lookup * 3,
                "range (desc {desc}) took {took:?}, the lookup {lookup:?}"
            );
        }
    });
}

#[test]
fn composite_indexes_come_back_from_a_crash_and_verify_clean() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let committed = common::committed_before_sigkill(
            "composite_crash_child",
            CHILD_DIR,
            dir.path(),
            400,
            Duration::from_secs(90),
        );
        let db = Database::open(dir.path(), small_options()).unwrap();
        let t = db.begin().unwrap();
        for &i in &committed {
            let (w, d, o) = crash_key(i);
            let got = t.get_by_primary_key("orders", (w, d, o)).unwrap();
            assert!(got.is_some(), "committed order {i} = ({w}, {d}, {o}) lost");
        }
        // The newest order of each district through the index is the
        // largest committed one (or one committed unreported, just after).
        for w in 1..=2 {
            for d in 1..=5 {
                let newest = t
                    .range("orders_pkey", KeyRange::prefix((w, d)).desc().limit(1))
                    .unwrap()
                    .next()
                    .map(|r| ints(&r.unwrap().1).2);
                let want = committed
                    .iter()
                    .map(|&i| crash_key(i))
                    .filter(|k| (k.0, k.1) == (w, d))
                    .map(|k| k.2)
                    .max();
                assert!(newest >= want, "district ({w}, {d}): {newest:?} < {want:?}");
            }
        }
        assert!(t.get_by_primary_key("orders", (9, 9, 9)).unwrap().is_none());
        let scanned = t.scan("orders").unwrap().count();
        let via_index = t.range("orders_pkey", KeyRange::all()).unwrap().count();
        assert_eq!(scanned, via_index);
        assert!(scanned >= committed.len());
        drop(t);
        assert_eq!(db.verify_indexes("orders").unwrap(), vec![]);
        db.vacuum("orders").unwrap();
        assert_eq!(db.verify_indexes("orders").unwrap(), vec![]);
    });
}

/// Order `i` of the crash child: warehouse, district, o_id.
fn crash_key(i: i64) -> (i64, i64, i64) {
    (i % 2 + 1, (i / 2) % 5 + 1, i / 10)
}

/// The crashing child: one order per transaction, printed after its
/// commit, checkpoints now and then, a transaction left open.
#[test]
#[ignore = "run as a child process by composite_indexes_come_back_from_a_crash_and_verify_clean"]
fn composite_crash_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let db = Database::open(&dir, small_options()).unwrap();
    create_orders(&db);
    let open = db.begin().unwrap();
    open.insert("orders", order(9, 9, 9, 9)).unwrap();
    let mut out = std::io::stdout();
    let deadline = Instant::now() + Duration::from_secs(80);
    for i in 0.. {
        if Instant::now() > deadline {
            break;
        }
        let (w, d, o) = crash_key(i);
        let t = db.begin().unwrap();
        t.insert("orders", order(w, d, o, i % 11)).unwrap();
        t.commit().unwrap();
        writeln!(out, "COMMITTED {i}").unwrap();
        out.flush().unwrap();
        if i % 150 == 75 {
            db.checkpoint().unwrap();
        }
    }
    std::mem::forget(open);
    std::mem::forget(db);
}

#[test]
fn a_composite_index_over_text_f64_bool_and_timestamp_orders_as_the_values_do() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        let columns = vec![
            Column::new("name", ColumnType::Text),
            Column::nullable("score", ColumnType::F64),
            Column::new("ok", ColumnType::Bool),
            Column::new("at", ColumnType::Timestamp),
        ];
        db.create_table_with(
            "m",
            columns,
            TableOptions::default().primary_key(&["name", "ok", "at"]),
        )
        .unwrap();
        db.create_index_on("m_score", "m", &["name", "score"], false)
            .unwrap();
        let scores = [
            Value::F64(f64::NAN),
            Value::F64(1.5),
            Value::Null,
            Value::F64(-0.0),
            Value::F64(f64::NEG_INFINITY),
            Value::F64(-2.0),
            Value::F64(f64::INFINITY),
        ];
        let t = db.begin().unwrap();
        for (i, s) in scores.iter().enumerate() {
            for name in ["a", "a\0", "b"] {
                t.insert(
                    "m",
                    vec![
                        Value::Text(name.into()),
                        s.clone(),
                        Value::Bool(i % 2 == 0),
                        Value::Timestamp(i as i64 - 3),
                    ],
                )
                .unwrap();
            }
        }
        t.commit().unwrap();
        let t = db.begin().unwrap();
        // Scores of "a": NULL first, then -inf < -2 < -0.0 (= 0.0) < 1.5 <
        // +inf < NaN; the text "a\0" is another key, after "a".
        let got: Vec<String> = t
            .range("m_score", KeyRange::prefix("a"))
            .unwrap()
            .map(|r| format!("{:?}", r.unwrap().1[1]))
            .collect();
        let want: Vec<String> = [
            Value::Null,
            Value::F64(f64::NEG_INFINITY),
            Value::F64(-2.0),
            Value::F64(-0.0),
            Value::F64(1.5),
            Value::F64(f64::INFINITY),
            Value::F64(f64::NAN),
        ]
        .iter()
        .map(|v| format!("{v:?}"))
        .collect();
        assert_eq!(got, want);
        // Descending, bounded on the score: below 0 (excluded), from "a".
        let neg: Vec<String> = t
            .range("m_score", KeyRange::prefix("a").range(..0.0).desc())
            .unwrap()
            .map(|r| format!("{:?}", r.unwrap().1[1]))
            .collect();
        assert_eq!(neg, vec!["F64(-2.0)", "F64(-inf)", "Null"]);
        // The primary key (name, ok, at): falses first, then by time.
        let (_, row) = t
            .get_by_primary_key("m", ("b", true, Value::Timestamp(1)))
            .unwrap()
            .unwrap();
        assert_eq!(row[1], Value::F64(f64::NEG_INFINITY));
        let ats: Vec<Value> = t
            .range("m_pkey", KeyRange::prefix(("a\0", false)))
            .unwrap()
            .map(|r| r.unwrap().1[3].clone())
            .collect();
        assert_eq!(
            ats,
            vec![
                Value::Timestamp(-2),
                Value::Timestamp(0),
                Value::Timestamp(2)
            ]
        );
        assert_eq!(db.verify_indexes("m").unwrap(), vec![]);
    });
}
