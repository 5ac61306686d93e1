//! `bulk_load` into an empty table and `create_index` over loaded rows at
//! the edges of the sorted build: runs of equal keys of every length
//! (across leaf breaks), i64 keys at their limits, long keys, NULLs in
//! unique and non-unique indexes of one and several columns, unique
//! duplicates anywhere in the load, tiny pools, rings and checksums off.
//! Every row is found through every index, the indexes verify, and a
//! deduplicating index stays small.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Duration;

use bufmgr::RelFork;
use common::{Rng, small_options, watchdog};
use engine::{Column, ColumnType, Database, EngineError, Options, Row, Value};

fn index_pages(db: &Database, index: &str) -> u32 {
    let rel = db.index_handle(index).unwrap().info().rel;
    db.pool().nblocks(RelFork::main(rel)).unwrap()
}

/// Keys with runs of 1, 2, 3, ... lengths, the limits of i64 and negatives.
fn i64_keys() -> Vec<i64> {
    let mut keys = Vec::new();
    let mut k = -1_000_000i64;
    for len in [
        1usize, 2, 3, 1, 4, 7, 1, 100, 1, 2, 450, 3, 1000, 1, 5000, 2, 1,
    ] {
        for _ in 0..len {
            keys.push(k);
        }
        k += 7;
    }
    for i in 0..3000 {
        keys.push(i / 3 - 500);
    }
    for v in [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX] {
        for _ in 0..(2 + (v & 3) as usize) {
            keys.push(v);
        }
    }
    keys
}

fn columns() -> Vec<Column> {
    vec![
        Column::new("id", ColumnType::I64),
        Column::nullable("k", ColumnType::I64),
        Column::nullable("name", ColumnType::Text),
        Column::nullable("blob", ColumnType::Bytes),
    ]
}

fn load_rows(seed: u64) -> Vec<Row> {
    let keys = i64_keys();
    let mut rng = Rng::new(seed);
    let mut rows: Vec<Row> = keys
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            let k = if i % 23 == 0 {
                Value::Null
            } else {
                Value::I64(k)
            };
            // Long names repeated in runs, short ones mostly unique.
            let name = match i % 5 {
                0 => Value::Null,
                1 => Value::Text(format!("{:0>1500}", i / 40)),
                2 => Value::Text(format!("{:0>300}", i / 3)),
                _ => Value::Text(format!("n{i}")),
            };
            let blob = if i % 7 == 0 {
                Value::Null
            } else {
                Value::Bytes(vec![(i % 5) as u8; (i % 11) * 30])
            };
            vec![Value::I64(i as i64), k, name, blob]
        })
        .collect();
    for i in (1..rows.len()).rev() {
        rows.swap(i, rng.below(i as u64 + 1) as usize);
    }
    rows
}

fn make(db: &Database, table: &str) {
    db.create_table(table, columns()).unwrap();
    db.create_index(&format!("{table}_id"), table, "id", true)
        .unwrap();
    db.create_index(&format!("{table}_k"), table, "k", false)
        .unwrap();
    db.create_index(&format!("{table}_name"), table, "name", false)
        .unwrap();
    db.create_index(&format!("{table}_blob"), table, "blob", false)
        .unwrap();
    db.create_index_on(&format!("{table}_k_name"), table, &["k", "name"], false)
        .unwrap();
    db.create_index_on(&format!("{table}_u"), table, &["k", "id"], true)
        .unwrap();
}

/// Every row is found through every index, as often as the model says.
fn check_all_found(db: &Database, table: &str, rows: &[Row]) {
    assert!(db.verify_indexes(table).unwrap().is_empty());
    let r = db.read().unwrap();
    assert_eq!(
        r.scan(table).unwrap().map(Result::unwrap).count(),
        rows.len()
    );
    let mut by_k: BTreeMap<i64, usize> = BTreeMap::new();
    for row in rows {
        if let Value::I64(k) = row[1] {
            *by_k.entry(k).or_default() += 1;
        }
    }
    for (k, n) in &by_k {
        let found = r
            .index_lookup(format!("{table}_k"), &Value::I64(*k))
            .unwrap();
        assert_eq!(found.len(), *n, "key {k}");
        let found = r
            .index_lookup(format!("{table}_k_name"), &Value::I64(*k))
            .unwrap();
        assert_eq!(found.len(), *n, "key {k} in the index of two columns");
    }
    for (index, col) in [("id", 0), ("k", 1), ("name", 2), ("blob", 3), ("k_name", 1)] {
        let got: Vec<Row> = r
            .index_range(
                format!("{table}_{index}"),
                Bound::Unbounded,
                Bound::Unbounded,
            )
            .unwrap()
            .map(|x| x.unwrap().1.into_values())
            .collect();
        // A range over all of a one-column index starts above NULL.
        let indexed_nulls = index == "k_name";
        let want = rows
            .iter()
            .filter(|r| indexed_nulls || r[col] != Value::Null)
            .count();
        assert_eq!(got.len(), want, "{index}");
    }
    for row in rows.iter().step_by(13) {
        let found = r.get_by_key(table, "id", &row[0]).unwrap().unwrap();
        assert_eq!(found.1.into_values(), *row);
    }
}

#[test]
fn every_row_is_found_through_every_index_of_a_bulk_load() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        make(&db, "t");
        let rows = load_rows(1);
        db.bulk_load("t", rows.clone(), |_| {}).unwrap();
        check_all_found(&db, "t", &rows);
        db.close().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        check_all_found(&db, "t", &rows);
    });
}

#[test]
fn indexes_created_over_loaded_rows_find_every_row() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", columns()).unwrap();
        let rows = load_rows(2);
        db.bulk_load("t", rows.clone(), |_| {}).unwrap();
        // Indexes built over a table with rows (create_index's build).
        db.create_index("t_id", "t", "id", true).unwrap();
        db.create_index("t_k", "t", "k", false).unwrap();
        db.create_index("t_name", "t", "name", false).unwrap();
        db.create_index("t_blob", "t", "blob", false).unwrap();
        db.create_index_on("t_k_name", "t", &["k", "name"], false)
            .unwrap();
        db.create_index_on("t_u", "t", &["k", "id"], true).unwrap();
        let e = db.create_index("t_k_unique", "t", "k", true).unwrap_err();
        assert!(matches!(e, EngineError::UniqueViolation { .. }), "{e}");
        check_all_found(&db, "t", &rows);
    });
}

#[test]
fn tiny_pools_without_rings_or_checksums_load_whole() {
    watchdog(Duration::from_secs(180), || {
        for (buffers, rings, checksums) in [(16, false, false), (24, true, true), (64, false, true)]
        {
            let dir = tempfile::tempdir().unwrap();
            let options: Options = small_options()
                .pool_buffers(buffers)
                .rings(rings)
                .checksums(checksums);
            let db = Database::open(dir.path(), options.clone()).unwrap();
            make(&db, "t");
            let rows = load_rows(3);
            db.bulk_load("t", rows.clone(), |_| {}).unwrap();
            check_all_found(&db, "t", &rows);
            db.close().unwrap();
            let db = Database::open(dir.path(), options).unwrap();
            check_all_found(&db, "t", &rows);
        }
    });
}

#[test]
fn a_unique_duplicate_anywhere_fails_the_load_and_leaves_nothing() {
    watchdog(Duration::from_secs(120), || {
        for dup in [i64::MIN, -1, 0, i64::MAX] {
            let dir = tempfile::tempdir().unwrap();
            let db = Database::open(dir.path(), small_options()).unwrap();
            db.create_table("t", columns()).unwrap();
            db.create_index("t_k", "t", "k", false).unwrap();
            db.create_index("t_id", "t", "id", true).unwrap();
            let mut rows: Vec<Row> = (0..5000)
                .map(|i| {
                    vec![
                        Value::I64(i - 2500),
                        Value::I64(i % 10),
                        Value::Null,
                        Value::Null,
                    ]
                })
                .collect();
            rows.push(vec![Value::I64(dup), Value::Null, Value::Null, Value::Null]);
            rows.push(vec![Value::I64(dup), Value::Null, Value::Null, Value::Null]);
            let e = db.bulk_load("t", rows, |_| {}).unwrap_err();
            assert!(
                matches!(e, EngineError::UniqueViolation { .. }),
                "{dup}: {e}"
            );
            let r = db.read().unwrap();
            assert_eq!(r.scan("t").unwrap().map(Result::unwrap).count(), 0);
            assert!(r.index_lookup("t_k", &Value::I64(3)).unwrap().is_empty());
            assert!(r.get_by_key("t", "id", &Value::I64(dup)).unwrap().is_none());
            drop(r);
            assert!(db.verify_indexes("t").unwrap().is_empty());
        }
        // NULLs never collide in a unique index of several columns.
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", columns()).unwrap();
        db.create_index_on("t_u", "t", &["k", "name"], true)
            .unwrap();
        let rows: Vec<Row> = (0..3000)
            .map(|i| vec![Value::I64(i), Value::I64(i % 3), Value::Null, Value::Null])
            .collect();
        db.bulk_load("t", rows, |_| {}).unwrap();
        let r = db.read().unwrap();
        assert_eq!(r.index_lookup("t_u", &Value::I64(1)).unwrap().len(), 1000);
    });
}

#[test]
fn a_bulk_loaded_index_of_ten_rows_a_key_is_deduplicated() {
    watchdog(Duration::from_secs(120), || {
        for run in [2usize, 3, 4, 5, 6, 8, 10] {
            let dir = tempfile::tempdir().unwrap();
            let db = Database::open(dir.path(), small_options()).unwrap();
            let plain = Database::open(
                tempfile::tempdir().unwrap().keep(),
                small_options().index_deduplication(false),
            )
            .unwrap();
            for d in [&db, &plain] {
                d.create_table("t", columns()).unwrap();
                d.create_index("t_k", "t", "k", false).unwrap();
                d.create_index("t_name", "t", "name", false).unwrap();
            }
            let rows: Vec<Row> = (0..30_000usize)
                .map(|i| {
                    let k = (i / run) as i64;
                    vec![
                        Value::I64(i as i64),
                        Value::I64(k),
                        Value::Text(format!("name {k:08}")),
                        Value::Null,
                    ]
                })
                .collect();
            db.bulk_load("t", rows.clone(), |_| {}).unwrap();
            plain.bulk_load("t", rows, |_| {}).unwrap();
            for index in ["t_k", "t_name"] {
                let (dedup, without) = (index_pages(&db, index), index_pages(&plain, index));
                eprintln!("run {run} {index}: {dedup} pages, {without} without");
                if run >= 10 {
                    assert!(
                        dedup * 2 <= without,
                        "run {run} {index}: {dedup} vs {without}"
                    );
                }
            }
        }
    });
}

#[test]
fn awkward_values_in_keys_of_several_columns_load_and_are_found() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        let cols = vec![
            Column::new("id", ColumnType::I64),
            Column::nullable("s", ColumnType::Text),
            Column::nullable("f", ColumnType::F64),
            Column::nullable("b", ColumnType::Bytes),
            Column::nullable("ts", ColumnType::Timestamp),
        ];
        db.create_table("t", cols).unwrap();
        db.create_index_on("t_s_f", "t", &["s", "f"], false)
            .unwrap();
        db.create_index_on("t_b_id", "t", &["b", "id"], true)
            .unwrap();
        db.create_index("t_f", "t", "f", false).unwrap();
        db.create_index("t_ts", "t", "ts", false).unwrap();
        db.create_index("t_b", "t", "b", false).unwrap();
        let strs = [
            "", "\0", "\0\0", "a", "a\0", "a\0b", "ab", "\u{7f}", "\u{ff}", "zz",
        ];
        let floats = [
            f64::NEG_INFINITY,
            -1.5,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            f64::MAX,
            f64::INFINITY,
            f64::NAN,
        ];
        let bytes: [&[u8]; 7] = [
            b"",
            b"\0",
            b"\0\0",
            b"\x01",
            b"\xff",
            b"\xff\0",
            b"\xff\xff",
        ];
        let mut rows = Vec::new();
        let mut id = 0i64;
        for (si, s) in strs.iter().enumerate() {
            for (fi, f) in floats.iter().enumerate() {
                for (bi, b) in bytes.iter().enumerate() {
                    let null = (si + fi + bi) % 11 == 0;
                    rows.push(vec![
                        Value::I64(id),
                        if null {
                            Value::Null
                        } else {
                            Value::Text(s.to_string())
                        },
                        Value::F64(*f),
                        Value::Bytes(b.to_vec()),
                        Value::Timestamp([i64::MIN, -1, 0, i64::MAX][(id % 4) as usize]),
                    ]);
                    id += 1;
                }
            }
        }
        let n = rows.len();
        db.bulk_load("t", rows, |_| {}).unwrap();
        assert!(db.verify_indexes("t").unwrap().is_empty());
        let r = db.read().unwrap();
        for (index, want) in [
            ("t_s_f", n),
            ("t_b_id", n),
            ("t_f", n),
            ("t_ts", n),
            ("t_b", n),
        ] {
            let got = r
                .index_range(index, Bound::Unbounded, Bound::Unbounded)
                .unwrap()
                .map(Result::unwrap)
                .count();
            assert_eq!(got, want, "{index}");
        }
        for (i, ts) in [i64::MIN, -1, 0, i64::MAX].into_iter().enumerate() {
            let want = (0..n).filter(|id| id % 4 == i).count();
            assert_eq!(
                r.index_lookup("t_ts", &Value::Timestamp(ts)).unwrap().len(),
                want
            );
        }
        for b in bytes {
            assert_eq!(
                r.index_lookup("t_b", &Value::Bytes(b.to_vec()))
                    .unwrap()
                    .len(),
                n / bytes.len(),
                "{b:?}"
            );
        }
    });
}

#[test]
fn a_bulk_loaded_table_takes_deletes_vacuum_updates_and_inserts_of_its_keys() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options().pool_buffers(32)).unwrap();
        make(&db, "t");
        let mut rows = load_rows(5);
        db.bulk_load("t", rows.clone(), |_| {}).unwrap();
        // Delete every third row, then vacuum: posting lists of the build
        // lose TIDs, pages of the load free line pointers.
        let t = db.begin().unwrap();
        for row in rows.iter().step_by(3) {
            assert!(t.delete_by_key("t", "id", &row[0]).unwrap());
        }
        t.commit().unwrap();
        rows = rows
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % 3 != 0)
            .map(|(_, r)| r)
            .collect();
        db.vacuum("t").unwrap();
        check_all_found(&db, "t", &rows);
        // New rows with the loaded keys go into the freed room and the
        // built posting lists; updates move rows between keys.
        let t = db.begin().unwrap();
        let n = rows.len() as i64;
        for i in 0..2000i64 {
            let mut row = rows[(i as usize * 7) % rows.len()].clone();
            row[0] = Value::I64(1_000_000 + i);
            t.insert("t", row.clone()).unwrap();
            rows.push(row);
        }
        for i in (0..n as usize).step_by(5) {
            let id = rows[i][0].clone();
            let (rid, _) = t.get_by_key("t", "id", &id).unwrap().unwrap();
            let mut row = rows[i].clone();
            row[1] = Value::I64(i64::MAX);
            t.update("t", rid, row.clone()).unwrap();
            rows[i] = row;
        }
        t.commit().unwrap();
        check_all_found(&db, "t", &rows);
        db.vacuum("t").unwrap();
        check_all_found(&db, "t", &rows);
    });
}
