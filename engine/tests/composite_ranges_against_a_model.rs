//! Range reads over a composite index checked against a model, and the
//! edges of the range and primary-key API: every range (random prefix,
//! inclusive / exclusive / unbounded bounds on the next column, direction,
//! limit) over rows full of duplicates, NULLs, zero and 0xFF bytes, empty
//! strings, -0.0, NaN, infinities and i64 extremes returns exactly the rows
//! a filter and a sort of the model return, with a pool far smaller than
//! the index; a range whose transaction rolls back returns the committed
//! rows from where it stopped; bad ranges and bad primary keys are errors.

mod common;

use std::cmp::Ordering;
use std::ops::Bound;
use std::time::Duration;

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, EngineError, KeyRange, RowId, TableOptions, Value};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// t(a bytes null, b f64 null, c i64, e text null, pad bytes), index over
/// (a, b, c, e).
fn columns() -> Vec<Column> {
    vec![
        Column::nullable("a", ColumnType::Bytes),
        Column::nullable("b", ColumnType::F64),
        Column::new("c", ColumnType::I64),
        Column::nullable("e", ColumnType::Text),
        Column::new("pad", ColumnType::Bytes),
    ]
}

/// A value of key column `col` from a small pool of edge cases (so equal
/// keys are common), NULL now and then where the column allows it.
fn value(rng: &mut Rng, col: usize) -> Value {
    if col != 2 && rng.below(7) == 0 {
        return Value::Null;
    }
    match col {
        0 => {
            let pool: [&[u8]; 7] = [b"", &[0], &[0, 0xFF], &[0xFF], &[1], &[0xFF, 0], b"a"];
            Value::Bytes(pool[rng.below(pool.len())].to_vec())
        }
        1 => {
            let pool = [
                -0.0,
                0.0,
                f64::NAN,
                f64::NEG_INFINITY,
                f64::INFINITY,
                -1.5,
                1.5,
            ];
            Value::F64(pool[rng.below(pool.len())])
        }
        2 => {
            let pool = [i64::MIN, i64::MAX, -1, 0, 1];
            Value::I64(pool[rng.below(pool.len())])
        }
        _ => {
            let pool = ["", "\0", "a", "a\0b", "\u{e9}", "\u{10FFFF}"];
            Value::Text(pool[rng.below(pool.len())].to_string())
        }
    }
}

/// The order of key values, written from the values (not the encoding):
/// NULL first; floats with every NaN one value after +inf and -0.0 = 0.0.
fn cmp_value(x: &Value, y: &Value) -> Ordering {
    fn canon(v: f64) -> f64 {
        if v.is_nan() {
            f64::NAN
        } else if v == 0.0 {
            0.0
        } else {
            v
        }
    }
    match (x, y) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        (Value::I64(a), Value::I64(b)) => a.cmp(b),
        (Value::F64(a), Value::F64(b)) => canon(*a).total_cmp(&canon(*b)),
        (Value::Bytes(a), Value::Bytes(b)) => a.cmp(b),
        (Value::Text(a), Value::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
        (a, b) => panic!("values of different types in one column: {a:?} {b:?}"),
    }
}

fn cmp_key(x: &[Value], y: &[Value]) -> Ordering {
    x.iter()
        .zip(y)
        .map(|(a, b)| cmp_value(a, b))
        .find(|o| *o != Ordering::Equal)
        .unwrap_or(Ordering::Equal)
}

fn within(v: &Value, lower: &Bound<Value>, upper: &Bound<Value>) -> bool {
    let lo = match lower {
        Bound::Unbounded => true,
        Bound::Included(l) => cmp_value(v, l) != Ordering::Less,
        Bound::Excluded(l) => cmp_value(v, l) == Ordering::Greater,
    };
    let hi = match upper {
        Bound::Unbounded => true,
        Bound::Included(u) => cmp_value(v, u) != Ordering::Greater,
        Bound::Excluded(u) => cmp_value(v, u) == Ordering::Less,
    };
    lo && hi
}

/// A random range over the 4 key columns: its prefix, bounds, direction
/// and limit.
struct Query {
    prefix: Vec<Value>,
    lower: Bound<Value>,
    upper: Bound<Value>,
    desc: bool,
    limit: Option<usize>,
}

impl Query {
    fn random(rng: &mut Rng) -> Query {
        let k = rng.below(5);
        let prefix: Vec<Value> = (0..k).map(|c| value(rng, c)).collect();
        let bound = |rng: &mut Rng| {
            if k == 4 {
                return Bound::Unbounded;
            }
            match rng.below(3) {
                0 => Bound::Unbounded,
                1 => Bound::Included(value(rng, k)),
                _ => Bound::Excluded(value(rng, k)),
            }
        };
        let lower = bound(rng);
        let upper = bound(rng);
        let limit = match rng.below(3) {
            0 => Some(rng.below(40)),
            _ => None,
        };
        Query {
            prefix,
            lower,
            upper,
            desc: rng.below(2) == 0,
            limit,
        }
    }

    fn key_range(&self) -> KeyRange {
        let mut r =
            KeyRange::prefix(self.prefix.clone()).bounds(self.lower.clone(), self.upper.clone());
        if self.desc {
            r = r.desc();
        }
        if let Some(n) = self.limit {
            r = r.limit(n);
        }
        r
    }

    /// The row ids the model says the range returns.
    fn model(&self, rows: &[(RowId, Vec<Value>)]) -> Vec<RowId> {
        let k = self.prefix.len();
        let mut hits: Vec<&(RowId, Vec<Value>)> = rows
            .iter()
            .filter(|(_, key)| {
                cmp_key(&key[..k], &self.prefix) == Ordering::Equal
                    && (k == 4 || within(&key[k], &self.lower, &self.upper))
            })
            .collect();
        hits.sort_by(|x, y| cmp_key(&x.1, &y.1).then(x.0.cmp(&y.0)));
        if self.desc {
            hits.reverse();
        }
        hits.into_iter()
            .take(self.limit.unwrap_or(usize::MAX))
            .map(|(id, _)| *id)
            .collect()
    }
}

#[test]
fn every_range_over_edge_case_composite_keys_returns_what_the_model_returns() {
    watchdog(Duration::from_secs(600), || {
        let dir = tempfile::tempdir().unwrap();
        // 64 buffers: the index and table are several times larger, so
        // ranges read pages evicted since the previous batch.
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", columns()).unwrap();
        db.create_index_on("t_abce", "t", &["a", "b", "c", "e"], false)
            .unwrap();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut rows: Vec<(RowId, Vec<Value>)> = Vec::new();
        for _ in 0..6 {
            let t = db.begin().unwrap();
            for _ in 0..1000 {
                let key: Vec<Value> = (0..4).map(|c| value(&mut rng, c)).collect();
                let mut row = key.clone();
                row.push(Value::Bytes(vec![7; 300]));
                let id = t.insert("t", row).unwrap();
                rows.push((id, key));
            }
            t.commit().unwrap();
        }
        // Delete a third, so ranges step over dead entries.
        let t = db.begin().unwrap();
        rows.retain(|(id, _)| {
            if rng.below(3) == 0 {
                t.delete("t", *id).unwrap();
                false
            } else {
                true
            }
        });
        t.commit().unwrap();
        let t = db.read().unwrap();
        for i in 0..300 {
            let q = Query::random(&mut rng);
            let want = q.model(&rows);
            let got: Vec<RowId> = t
                .range("t_abce", q.key_range())
                .unwrap()
                .map(|r| r.unwrap().0)
                .collect();
            assert_eq!(
                got, want,
                "query {i}: prefix {:?}, bounds {:?}..{:?}, desc {}, limit {:?}",
                q.prefix, q.lower, q.upper, q.desc, q.limit
            );
            let mut each = Vec::new();
            let n = t
                .range_each("t_abce", q.key_range(), |r| {
                    each.push(r.id());
                    Ok(())
                })
                .unwrap();
            assert_eq!(n, want.len(), "query {i}: range_each's count");
            assert_eq!(each, want, "query {i}: range_each");
        }
    });
}

#[test]
fn a_range_whose_transaction_rolls_back_resumes_after_the_last_row_it_returned() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table_with(
            "t",
            vec![
                Column::new("w", ColumnType::I64),
                Column::new("o", ColumnType::I64),
            ],
            TableOptions::default().primary_key(&["w", "o"]),
        )
        .unwrap();
        let t = db.begin().unwrap();
        for o in 0..10 {
            t.insert("t", vec![Value::I64(1), Value::I64(o)]).unwrap();
        }
        t.commit().unwrap();
        for desc in [false, true] {
            let t = db.begin().unwrap();
            // The transaction deletes the second row of the range, then
            // reads the range with a limit of 2: the first batch holds the
            // first row and the (to it) deleted second.
            let second = if desc { 8 } else { 1 };
            let (id, _) = t
                .get_by_primary_key("t", (1, second))
                .unwrap()
                .expect("row");
            t.delete("t", id).unwrap();
            let mut r = KeyRange::prefix(1i64).limit(2);
            if desc {
                r = r.desc();
            }
            let mut range = t.range("t_pkey", r).unwrap();
            let o =
                |r: engine::Result<(RowId, engine::OwnedRow)>| r.unwrap().1[1].as_i64().unwrap();
            let first = o(range.next().unwrap());
            t.rollback().unwrap();
            // Committed state: the deleted row is back, and it comes next.
            let rest: Vec<i64> = range.map(o).collect();
            let want = if desc { (9, vec![8]) } else { (0, vec![1]) };
            assert_eq!((first, rest), want, "desc {desc}");
        }
    });
}

#[test]
fn empty_and_malformed_ranges_are_empty_or_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), small_options()).unwrap();
    db.create_table("t", columns()).unwrap();
    db.create_index_on("t_abce", "t", &["a", "b", "c", "e"], false)
        .unwrap();
    db.create_index_on("t_c", "t", &["c"], false).unwrap();
    let t = db.begin().unwrap();
    for c in 0..20 {
        let row = vec![
            Value::Bytes(vec![1]),
            Value::F64(0.5),
            Value::I64(c),
            Value::Null,
            Value::Bytes(vec![]),
        ];
        t.insert("t", row).unwrap();
    }
    let count = |ix: &str, r: KeyRange| -> usize {
        let mut n = 0;
        for row in t.range(ix, r.clone()).unwrap() {
            row.unwrap();
            n += 1;
        }
        let m = t.range_each(ix, r, |_| Ok(())).unwrap();
        assert_eq!(n, m, "range and range_each agree");
        n
    };
    let prefix = || KeyRange::prefix((vec![1u8], 0.5));
    // Lower bound above the upper one.
    let fifteen_to_five = (
        Bound::Included(Value::I64(15)),
        Bound::Excluded(Value::I64(5)),
    );
    assert_eq!(count("t_abce", prefix()), 20);
    assert_eq!(count("t_abce", prefix().limit(0)), 0, "limit 0");
    assert_eq!(
        count(
            "t_abce",
            prefix().bounds(fifteen_to_five.0.clone(), fifteen_to_five.1.clone())
        ),
        0,
        "lower > upper"
    );
    assert_eq!(
        count(
            "t_abce",
            prefix()
                .bounds(fifteen_to_five.0.clone(), fifteen_to_five.1.clone())
                .desc()
        ),
        0
    );
    assert_eq!(count("t_abce", prefix().range(5..5)), 0, "empty half-open");
    assert_eq!(count("t_abce", prefix().range(5..=5)), 1);
    assert_eq!(
        count(
            "t_c",
            KeyRange::all().bounds(fifteen_to_five.0.clone(), fifteen_to_five.1.clone())
        ),
        0
    );
    assert_eq!(
        count(
            "t_c",
            KeyRange::all()
                .bounds(fifteen_to_five.0.clone(), fifteen_to_five.1.clone())
                .desc()
        ),
        0
    );
    assert_eq!(count("t_c", KeyRange::all().limit(0)), 0);
    // A prefix of NULL in the first column: no row has one.
    assert_eq!(count("t_abce", KeyRange::prefix(Value::Null)), 0);
    // A prefix longer than the key; bounds after a full key; a wrong type.
    let five = vec![
        Value::Bytes(vec![1]),
        Value::F64(0.5),
        Value::I64(1),
        Value::Null,
        Value::I64(0),
    ];
    assert!(matches!(
        t.range("t_abce", KeyRange::prefix(five.clone())),
        Err(EngineError::BadKey { .. })
    ));
    assert!(matches!(
        t.range_each("t_abce", KeyRange::prefix(five), |_| Ok(())),
        Err(EngineError::BadKey { .. })
    ));
    assert!(matches!(
        t.range("t_c", KeyRange::prefix((1, 2))),
        Err(EngineError::BadKey { .. })
    ));
    let full = vec![
        Value::Bytes(vec![1]),
        Value::F64(0.5),
        Value::I64(1),
        Value::Null,
    ];
    assert!(matches!(
        t.range("t_abce", KeyRange::prefix(full).range(1..2)),
        Err(EngineError::BadKey { .. })
    ));
    assert!(matches!(
        t.range("t_abce", KeyRange::prefix("text")),
        Err(EngineError::TypeMismatch { .. })
    ));
}

#[test]
fn bad_primary_keys_and_oversized_composite_keys_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), small_options()).unwrap();
    let schema = |name: &str, key: &[&str]| {
        db.create_table_with(name, columns(), TableOptions::default().primary_key(key))
    };
    let invalid = |r: engine::Result<_>, what: &str| match r {
        Err(EngineError::InvalidSchema { detail, .. }) => detail,
        other => panic!("{what}: {other:?}"),
    };
    let d = invalid(schema("t1", &["a", "c"]), "nullable");
    assert!(d.contains("nullable"), "{d}");
    let d = invalid(schema("t2", &["c", "zz"]), "unknown");
    assert!(d.contains("zz"), "{d}");
    let d = invalid(schema("t3", &["c", "pad", "c"]), "twice");
    assert!(d.contains("twice"), "{d}");
    invalid(schema("t4", &["c"; 9]), "nine columns");
    for name in ["t1", "t2", "t3", "t4"] {
        assert!(
            matches!(
                db.begin().unwrap().scan(name),
                Err(EngineError::UnknownTable { .. })
            ),
            "{name} was not created"
        );
    }
    // A key too long for a page: an error, and the row is not inserted.
    schema("t", &["c", "pad"]).unwrap();
    db.create_index_on("t_e", "t", &["c", "e"], false).unwrap();
    let t = db.begin().unwrap();
    let long = vec![
        Value::Null,
        Value::Null,
        Value::I64(1),
        Value::Text("x".repeat(5000)),
        Value::Bytes(vec![0; 10]),
    ];
    assert!(matches!(
        t.insert("t", long),
        Err(EngineError::KeyTooLarge { .. })
    ));
    let zeros = vec![
        Value::Null,
        Value::Null,
        Value::I64(2),
        Value::Null,
        // 2000 zero bytes escape to 4000.
        Value::Bytes(vec![0; 2000]),
    ];
    assert!(matches!(
        t.insert("t", zeros),
        Err(EngineError::KeyTooLarge { .. })
    ));
    assert_eq!(t.scan("t").unwrap().count(), 0);
    assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
}

/// r(w i64, g i64, o i64, pad bytes), index r_wg over (w, g): many equal
/// keys.
fn equal_keys_table(db: &Database) {
    db.create_table(
        "r",
        vec![
            Column::new("w", ColumnType::I64),
            Column::new("g", ColumnType::I64),
            Column::new("o", ColumnType::I64),
            Column::new("pad", ColumnType::Bytes),
        ],
    )
    .unwrap();
    db.create_index_on("r_wg", "r", &["w", "g"], false).unwrap();
}

fn r_row(w: i64, g: i64, o: i64) -> Vec<Value> {
    vec![
        Value::I64(w),
        Value::I64(g),
        Value::I64(o),
        Value::Bytes(vec![3; 200]),
    ]
}

#[test]
fn ranges_resumed_after_their_leaves_split_and_were_vacuumed_return_their_snapshot() {
    watchdog(Duration::from_secs(300), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        equal_keys_table(&db);
        let t = db.begin().unwrap();
        let mut snapshot_rows = Vec::new();
        for o in 0..2400 {
            let g = o % 3;
            let id = t.insert("r", r_row(1, g, o)).unwrap();
            if g == 1 {
                snapshot_rows.push(id);
            }
        }
        t.commit().unwrap();
        snapshot_rows.sort();
        let reader = db.begin().unwrap();
        let mut asc = reader
            .range("r_wg", KeyRange::prefix((1i64, 1i64)))
            .unwrap();
        let mut desc = reader
            .range("r_wg", KeyRange::prefix((1i64, 1i64)).desc())
            .unwrap();
        let mut got_asc: Vec<RowId> = (0..150).map(|_| asc.next().unwrap().unwrap().0).collect();
        let mut got_desc: Vec<RowId> = (0..150).map(|_| desc.next().unwrap().unwrap().0).collect();
        // Another transaction splits the range's leaves (3000 more equal
        // keys), deletes half the rows the reader sees, commits; vacuum.
        let w = db.begin().unwrap();
        for o in 0..3000 {
            w.insert("r", r_row(1, 1, 10_000 + o)).unwrap();
        }
        for id in snapshot_rows.iter().step_by(2) {
            w.delete("r", *id).unwrap();
        }
        w.commit().unwrap();
        db.vacuum("r").unwrap();
        got_asc.extend(asc.map(|r| r.unwrap().0));
        got_desc.extend(desc.map(|r| r.unwrap().0));
        assert_eq!(got_asc, snapshot_rows, "ascending");
        let mut want_desc = snapshot_rows.clone();
        want_desc.reverse();
        assert_eq!(got_desc, want_desc, "descending");
        let mut each = Vec::new();
        reader
            .range_each("r_wg", KeyRange::prefix((1i64, 1i64)), |r| {
                each.push(r.id());
                Ok(())
            })
            .unwrap();
        assert_eq!(each, snapshot_rows, "range_each in the old snapshot");
        reader.commit().unwrap();
        // A new reader sees the other transaction's work.
        let now = db.read().unwrap();
        assert_eq!(
            now.range("r_wg", KeyRange::prefix((1i64, 1i64)))
                .unwrap()
                .count(),
            snapshot_rows.len() / 2 + 3000
        );
        assert_eq!(db.verify_indexes("r").unwrap(), vec![]);
    });
}

#[test]
fn unique_composite_keys_conflict_only_when_equal_and_free_of_nulls() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), small_options()).unwrap();
    db.create_table("t", columns()).unwrap();
    db.create_index_on("t_ac", "t", &["a", "c"], true).unwrap();
    let row = |a: Value, c: i64| {
        vec![
            a,
            Value::Null,
            Value::I64(c),
            Value::Null,
            Value::Bytes(vec![]),
        ]
    };
    let one = || Value::Bytes(vec![1]);
    let t = db.begin().unwrap();
    let first = t.insert("t", row(one(), 1)).unwrap();
    assert!(matches!(
        t.insert("t", row(one(), 1)),
        Err(EngineError::UniqueViolation { .. })
    ));
    // Keys with a NULL never conflict; a trailing zero byte makes another
    // key.
    t.insert("t", row(Value::Null, 1)).unwrap();
    t.insert("t", row(Value::Null, 1)).unwrap();
    t.insert("t", row(Value::Bytes(vec![1, 0]), 1)).unwrap();
    let second = t.insert("t", row(one(), 2)).unwrap();
    // An update that keeps the key does not conflict with itself.
    let first = t.update("t", first, row(one(), 1)).unwrap();
    // One that changes only c onto another row's key does.
    assert!(matches!(
        t.update("t", second, row(one(), 1)),
        Err(EngineError::UniqueViolation { .. })
    ));
    // Moving the first away frees its key for the second.
    t.update("t", first, row(one(), 3)).unwrap();
    t.update("t", second, row(one(), 1)).unwrap();
    t.commit().unwrap();
    let r = db.read().unwrap();
    let cs: Vec<i64> = r
        .range("t_ac", KeyRange::prefix(vec![one()]))
        .unwrap()
        .map(|x| x.unwrap().1[2].as_i64().unwrap())
        .collect();
    assert_eq!(cs, vec![1, 3]);
    assert_eq!(
        r.range("t_ac", KeyRange::prefix(Value::Null))
            .unwrap()
            .count(),
        2
    );
    assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
}

/// Fill r (index r_wg over (w, g)) with 2400 rows, close the database,
/// flip one byte in block 2 of the index at `offset` into the page, reopen.
fn damaged_index(checksums: bool, offset: usize) -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    // Without posting lists: the 2400 rows' entries fill several leaves of
    // plain items, whose bytes the offsets below hit.
    let options = || {
        small_options()
            .checksums(checksums)
            .index_deduplication(false)
    };
    let db = Database::open(dir.path(), options()).unwrap();
    equal_keys_table(&db);
    let rel = db
        .indexes()
        .into_iter()
        .find(|i| i.name == "r_wg")
        .expect("r_wg")
        .rel;
    let t = db.begin().unwrap();
    for o in 0..2400 {
        t.insert("r", r_row(1, o % 3, o)).unwrap();
    }
    t.commit().unwrap();
    db.close().unwrap();
    let file = dir.path().join("base").join(rel.0.to_string());
    let mut bytes = std::fs::read(&file).unwrap();
    assert!(bytes.len() >= 4 * 8192, "at least four index pages");
    bytes[2 * 8192 + offset] ^= 0x10;
    std::fs::write(&file, bytes).unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    (dir, db)
}

#[test]
fn a_range_over_a_damaged_index_page_is_an_error_naming_the_index_and_block() {
    watchdog(Duration::from_secs(120), || {
        let (_dir, db) = damaged_index(true, 5000);
        let t = db.begin().unwrap();
        for range in [KeyRange::all(), KeyRange::all().desc()] {
            let results: Vec<_> = t.range("r_wg", range.clone()).unwrap().collect();
            let err = results
                .iter()
                .find_map(|r| r.as_ref().err())
                .expect("the range reports the damage");
            let msg = err.to_string();
            assert_eq!(err.kind(), engine::ErrorKind::CorruptData, "{msg}");
            assert!(msg.contains("r_wg"), "names the index: {msg}");
            assert!(msg.contains("block 2"), "names the block: {msg}");
            let err = t.range_each("r_wg", range, |_| Ok(())).unwrap_err();
            assert_eq!(err.kind(), engine::ErrorKind::CorruptData, "{err}");
        }
    });
}

#[test]
fn a_range_over_an_index_page_with_a_flipped_key_byte_and_no_checksums_is_an_error_not_a_short_answer()
 {
    watchdog(Duration::from_secs(120), || {
        // Offsets into block 2's entries (its keys are (w, g) tuples of 18
        // bytes): before, each range silently returned 2399 of 2400 rows.
        for offset in [6000usize, 7000, 8000] {
            let (_dir, db) = damaged_index(false, offset);
            let t = db.begin().unwrap();
            for range in [KeyRange::all(), KeyRange::all().desc()] {
                let results: Vec<_> = t.range("r_wg", range.clone()).unwrap().collect();
                let err = results
                    .iter()
                    .find_map(|r| r.as_ref().err())
                    .unwrap_or_else(|| {
                        panic!(
                            "offset {offset}, desc {}: {} rows and no error",
                            range.is_desc(),
                            results.len()
                        )
                    });
                let msg = err.to_string();
                assert_eq!(err.kind(), engine::ErrorKind::CorruptData, "{msg}");
                assert!(msg.contains("r_wg") && msg.contains("block 2"), "{msg}");
                let err = t.range_each("r_wg", range, |_| Ok(())).unwrap_err();
                assert_eq!(err.kind(), engine::ErrorKind::CorruptData, "{err}");
            }
        }
    });
}
