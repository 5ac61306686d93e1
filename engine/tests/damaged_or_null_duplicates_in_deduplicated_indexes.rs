//! Deduplicated (format 3) indexes through the engine at their edges: a
//! flipped byte in a leaf of posting lists on disk is a checksum error
//! naming the index and the block on every read path through it, never a
//! wrong row set or a panic; and a two-column index, which indexes NULLs,
//! holds thousands of rows whose key is (NULL, NULL) or (NULL, x), each
//! returned once in key then row-id order, through deletes, vacuum and
//! re-inserts.

use std::ops::Bound;

use engine::{Column, ColumnType, Database, ErrorKind, KeyRange, Options, RowId, Value};

fn options() -> Options {
    Options::new()
        .pool_buffers(16)
        .autovacuum(false)
        .checkpointer(false)
        .bgwriter(None)
}

#[test]
fn a_flipped_byte_in_a_posting_list_leaf_is_a_checksum_error_naming_index_and_block() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    db.create_table(
        "t",
        vec![
            Column::new("id", ColumnType::I64),
            Column::new("g", ColumnType::I64),
        ],
    )
    .unwrap();
    db.transaction(|t| {
        for id in 0..5_000i64 {
            t.insert("t", vec![Value::I64(id), Value::I64(id % 7)])?;
        }
        Ok(())
    })
    .unwrap();
    db.create_index("t_g", "t", "g", false).unwrap();
    let rel = db
        .indexes()
        .into_iter()
        .find(|i| i.name == "t_g")
        .unwrap()
        .rel;
    {
        let page = db
            .pool()
            .read_buffer(bufmgr::RelFork::main(rel), 1, None)
            .unwrap()
            .lock_shared();
        let tp =
            btree::page::TreePage::parse(&page, btree::page::PageId { rel, block: 1 }).unwrap();
        assert!(
            tp.is_leaf() && tp.is_dedup(),
            "block 1 is a leaf of posting lists"
        );
        assert!((0..tp.data_len()).any(|j| tp.data(j).unwrap().is_posting()));
        // The flipped byte lies within the items.
        assert!(tp.upper <= 6000, "items start at {}", tp.upper);
    }
    db.close().unwrap();

    let file = dir.path().join("base").join(rel.0.to_string());
    let mut bytes = std::fs::read(&file).unwrap();
    assert!(bytes.len() >= 2 * 8192);
    // Block 1 is the first leaf: posting lists of g = 0 fill it.
    bytes[8192 + 6000] ^= 0x04;
    std::fs::write(&file, bytes).unwrap();

    let db = Database::open(dir.path(), options()).unwrap();
    let t = db.read().unwrap();
    let mut errors = Vec::new();
    match t.index_lookup("t_g", &Value::I64(0)) {
        Ok(rows) => panic!(
            "a lookup read a damaged leaf and returned {} rows",
            rows.len()
        ),
        Err(e) => errors.push(e),
    }
    let fwd: Vec<_> = t
        .index_range("t_g", Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .collect();
    errors.push(
        fwd.into_iter()
            .find_map(|r| r.err())
            .expect("a forward range reports the damage"),
    );
    let back: Result<Vec<_>, _> = t
        .range("t_g", KeyRange::all().desc())
        .and_then(|r| r.collect::<Result<Vec<_>, _>>());
    errors.push(back.expect_err("a backward range reports the damage"));
    for e in errors {
        let msg = e.to_string();
        assert_eq!(e.kind(), ErrorKind::CorruptData, "{msg}");
        assert!(msg.contains("t_g"), "names the index: {msg}");
        assert!(msg.contains("block 1"), "names the block: {msg}");
    }
    drop(t);
    db.close().unwrap();
}

type Model = std::collections::BTreeMap<(Option<i64>, Option<String>, RowId), i64>;

fn key_of(row: &[Value]) -> (Option<i64>, Option<String>) {
    (row[1].as_i64(), row[2].as_text().map(str::to_string))
}

fn check(db: &Database, want: &Model) {
    let t = db.read().unwrap();
    let expect: Vec<(Option<i64>, Option<String>, RowId)> = want.keys().cloned().collect();
    for desc in [false, true] {
        let range = if desc {
            KeyRange::all().desc()
        } else {
            KeyRange::all()
        };
        let mut got: Vec<(Option<i64>, Option<String>, RowId)> = t
            .range("t_ab", range)
            .unwrap()
            .map(|r| {
                let (rid, row) = r.unwrap();
                let (a, b) = key_of(&row);
                (a, b, rid)
            })
            .collect();
        if desc {
            got.reverse();
        }
        assert_eq!(got.len(), expect.len(), "rows read (desc: {desc})");
        assert!(got == expect, "rows differ from the model (desc: {desc})");
    }
    let v = db.verify_indexes("t").unwrap();
    assert!(v.is_empty(), "{v:?}");
}

#[test]
fn thousands_of_null_keys_in_a_two_column_index_are_each_read_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    db.create_table(
        "t",
        vec![
            Column::new("id", ColumnType::I64),
            Column::nullable("a", ColumnType::I64),
            Column::nullable("b", ColumnType::Text),
        ],
    )
    .unwrap();
    db.create_index_on("t_ab", "t", &["a", "b"], false).unwrap();
    let row = |id: i64| {
        let a = if id % 4 == 0 {
            Value::I64(id % 3)
        } else {
            Value::Null
        };
        let b = if id % 2 == 0 {
            Value::Null
        } else {
            Value::Text(format!("x{}", id % 5))
        };
        vec![Value::I64(id), a, b]
    };
    let mut want = Model::new();
    let insert = |db: &Database, ids: std::ops::Range<i64>, want: &mut Model| {
        let mut added = Vec::new();
        db.transaction(|t| {
            added.clear();
            for id in ids.clone() {
                let r = row(id);
                let (a, b) = key_of(&r);
                let rid = t.insert("t", r)?;
                added.push(((a, b, rid), id));
            }
            Ok(())
        })
        .unwrap();
        want.extend(added);
    };
    insert(&db, 0..4_000, &mut want);
    check(&db, &want);
    // Delete a third, vacuum, insert more (reusing the freed row ids).
    let gone: Vec<(Option<i64>, Option<String>, RowId)> = want
        .keys()
        .filter(|k| k.2.offset % 3 == 0)
        .cloned()
        .collect();
    db.transaction(|t| {
        for k in &gone {
            t.delete("t", k.2)?;
        }
        Ok(())
    })
    .unwrap();
    for k in &gone {
        want.remove(k);
    }
    db.vacuum("t").unwrap();
    check(&db, &want);
    insert(&db, 4_000..7_000, &mut want);
    check(&db, &want);
    db.close().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    check(&db, &want);
    db.close().unwrap();
}
