//! Statement-level visibility inside a transaction (command ids, PostgreSQL's
//! cmin / cmax): a read sees the transaction's own writes only from the
//! commands that began before the read did. So `for row in scan { update }`
//! updates every row exactly once, whatever the transaction wrote before,
//! and an iterator begun before an insert or a delete keeps the view it
//! began with.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, Value};

const ROWS: i64 = 1_000;

fn filled(db: &Database) {
    db.create_table("t", two_columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    db.create_table("other", two_columns()).unwrap();
    let t = db.begin().unwrap();
    for id in 0..ROWS {
        t.insert("t", row(id, "v0")).unwrap();
    }
    t.commit().unwrap();
}

/// Every row of `t` (committed state), id -> name.
fn names(db: &Database) -> BTreeMap<i64, String> {
    db.read()
        .unwrap()
        .scan("t")
        .unwrap()
        .map(|r| {
            let (_, r) = r.unwrap();
            let (Value::I64(id), Value::Bytes(name)) = (&r[0], &r[1]) else {
                panic!("row {r:?}")
            };
            (*id, String::from_utf8(name.clone()).unwrap())
        })
        .collect()
}

fn bumped(r: &[Value]) -> engine::Row {
    let Value::Bytes(name) = &r[1] else {
        panic!("row {r:?}")
    };
    let mut name = name.clone();
    name.push(b'+');
    vec![r[0].clone(), Value::Bytes(name)]
}

fn assert_each_bumped_once(db: &Database) {
    let got = names(db);
    assert_eq!(got.len() as i64, ROWS);
    for (id, name) in got {
        assert_eq!(name, "v0+", "row {id} updated exactly once");
    }
}

#[test]
fn scan_then_update_updates_every_row_once_in_a_transaction_that_wrote() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        filled(&db);
        let t = db.begin().unwrap();
        // Written before the scan: the transaction has its xid.
        t.insert("other", row(1, "first write")).unwrap();
        let mut updates = 0;
        for r in t.scan("t").unwrap() {
            let (id, r) = r.unwrap();
            t.update("t", id, bumped(&r)).unwrap();
            updates += 1;
        }
        assert_eq!(updates, ROWS, "one update per row");
        t.commit().unwrap();
        assert_each_bumped_once(&db);
    });
}

#[test]
fn index_range_then_update_updates_every_row_once() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        filled(&db);
        let t = db.begin().unwrap();
        t.insert("other", row(1, "first write")).unwrap();
        let mut updates = 0;
        for r in t
            .index_range("t_id", Bound::Unbounded, Bound::Unbounded)
            .unwrap()
        {
            let (id, r) = r.unwrap();
            t.update("t", id, bumped(&r)).unwrap();
            updates += 1;
        }
        assert_eq!(updates, ROWS, "one update per row");
        t.commit().unwrap();
        assert_each_bumped_once(&db);
    });
}

#[test]
fn a_read_sees_the_writes_of_commands_begun_before_it_and_no_later_ones() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        let t = db.begin().unwrap();
        let a = t.insert("t", row(1, "a")).unwrap();
        // Later reads see an earlier command's insert, by every path.
        assert!(t.get("t", a).unwrap().is_some());
        assert!(t.get_by_key("t", "id", &Value::I64(1)).unwrap().is_some());
        assert_eq!(t.index_lookup("t_id", &Value::I64(1)).unwrap().len(), 1);
        assert_eq!(t.scan_each("t", |_| Ok(())).unwrap().rows, 1);

        // An iterator begun now sees `a` only, whatever comes later.
        let before_scan = t.scan("t").unwrap();
        let before_range = t
            .index_range("t_id", Bound::Unbounded, Bound::Unbounded)
            .unwrap();
        let b = t.insert("t", row(2, "b")).unwrap();
        t.delete("t", a).unwrap();
        let ids = |it: &mut dyn Iterator<
            Item = engine::Result<(engine::RowId, engine::OwnedRow)>,
        >| { it.map(|r| r.unwrap().0).collect::<Vec<_>>() };
        assert_eq!(ids(&mut { before_scan }), vec![a], "scan begun before");
        assert_eq!(ids(&mut { before_range }), vec![a], "range begun before");

        // Reads begun after both commands see `b` and not `a`.
        assert_eq!(ids(&mut t.scan("t").unwrap()), vec![b]);
        assert!(t.get("t", a).unwrap().is_none());
        assert!(t.get("t", b).unwrap().is_some());
        assert!(t.get_by_key("t", "id", &Value::I64(1)).unwrap().is_none());
        t.commit().unwrap();

        let r = db.read().unwrap();
        assert_eq!(ids(&mut r.scan("t").unwrap()), vec![b]);
    });
}
