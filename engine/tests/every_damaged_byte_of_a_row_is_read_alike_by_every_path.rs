//! Rows damaged on disk one byte each (the column count, the null bitmap,
//! length prefixes and values; checksums off, so the page is read as it
//! is), on tables of each shape the owned scan checks its own way (fixed
//! width only; one byte string between fixed-width runs; a byte string
//! alone; text and bool mixed in; nullable columns). Every row is
//! accounted for, in order: an owned scan (plain, filtered, projected)
//! and `get` each return it as a `CorruptRow` naming the table and the
//! row, or as values that decode; then every typed accessor of the owned
//! row and of the borrowed row (`scan_each`, `get_with`) reads exactly
//! those values. Never a panic, never a row skipped.

mod common;

use std::time::Duration;

use common::{Rng, small_options, watchdog};
use engine::{Col, Column, ColumnType, Database, EngineError, RowId, Value};

type Out = Result<Option<Value>, String>;

/// Column `c` of a row through the typed accessor of its type (`_opt`).
macro_rules! typed {
    ($r:expr, $c:expr) => {{
        let r = $r;
        let c: Col = $c;
        let e = |e: EngineError| match e {
            EngineError::CorruptRow { .. } => "CORRUPT".to_string(),
            e => format!("{e:?}"),
        };
        let v: Out = match c.ty() {
            ColumnType::I64 => r.i64_opt(c).map(|v| v.map(Value::I64)).map_err(e),
            ColumnType::F64 => r.f64_opt(c).map(|v| v.map(Value::F64)).map_err(e),
            ColumnType::Timestamp => r
                .timestamp_opt(c)
                .map(|v| v.map(Value::Timestamp))
                .map_err(e),
            ColumnType::Bool => r.bool_opt(c).map(|v| v.map(Value::Bool)).map_err(e),
            ColumnType::Text => r.text_opt(c).map(|v| v.map(Value::text)).map_err(e),
            ColumnType::Bytes => r
                .bytes_opt(c)
                .map(|v| v.map(|b| Value::Bytes(b.to_vec())))
                .map_err(e),
        };
        // The non-`_opt` accessor agrees (a NULL is its error).
        let plain: Option<Out> = match c.ty() {
            ColumnType::I64 => Some(r.i64(c).map(|v| Some(Value::I64(v))).map_err(e)),
            ColumnType::F64 => Some(r.f64(c).map(|v| Some(Value::F64(v))).map_err(e)),
            ColumnType::Timestamp => {
                Some(r.timestamp(c).map(|v| Some(Value::Timestamp(v))).map_err(e))
            }
            _ => None,
        };
        (v, plain)
    }};
}

fn shapes() -> Vec<Vec<Column>> {
    use ColumnType::*;
    vec![
        vec![
            Column::new("a", I64),
            Column::new("f", F64),
            Column::new("ts", Timestamp),
        ],
        vec![
            Column::new("a", I64),
            Column::new("b", Bytes),
            Column::new("f", F64),
        ],
        vec![Column::new("b", Bytes)],
        vec![
            Column::new("a", I64),
            Column::nullable("n", I64),
            Column::new("t", Text),
            Column::new("ok", Bool),
            Column::nullable("b", Bytes),
            Column::new("z", Timestamp),
        ],
        (0..9)
            .map(|i| {
                if i % 4 == 3 {
                    Column::nullable(format!("c{i}"), I64)
                } else {
                    Column::new(format!("c{i}"), I64)
                }
            })
            .collect(),
    ]
}

fn value(rng: &mut Rng, c: &Column) -> Value {
    if c.nullable && rng.below(3) == 0 {
        return Value::Null;
    }
    let n = rng.next_u64();
    match c.ty {
        ColumnType::I64 => Value::I64(n as i64 >> 8),
        ColumnType::F64 => Value::F64((n % 100_000) as f64 / 8.0),
        ColumnType::Timestamp => Value::Timestamp((n % 1_000_000) as i64),
        ColumnType::Bool => Value::Bool(n & 1 == 1),
        ColumnType::Text => Value::text("\u{e9}t".repeat((n % 5) as usize)),
        ColumnType::Bytes => Value::Bytes(vec![(n >> 8) as u8; (n % 9) as usize]),
    }
}

/// The data part (past the tuple header) of row `id` in heap file `file`.
fn tuple_range(file: &[u8], id: RowId) -> std::ops::Range<usize> {
    let page = id.block as usize * 8192;
    let lp = page + 28 + (usize::from(id.offset) - 1) * 4;
    let w = u32::from_le_bytes(file[lp..lp + 4].try_into().unwrap());
    let (off, len) = ((w & 0x7FFF) as usize, ((w >> 17) & 0x7FFF) as usize);
    page + off + 32..page + off + len
}

#[test]
fn every_damaged_byte_of_a_row_is_read_alike_by_every_path() {
    watchdog(Duration::from_secs(120), || {
        let options = || small_options().checksums(false);
        let mut rng = Rng::new(0xdead_0009);
        for (s, columns) in shapes().into_iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            let (rel, rids) = {
                let db = Database::open(dir.path(), options()).unwrap();
                let info = db.create_table("d", columns.clone()).unwrap();
                let t = db.begin().unwrap();
                let rids: Vec<RowId> = (0..240)
                    .map(|_| {
                        let row: Vec<Value> = columns.iter().map(|c| value(&mut rng, c)).collect();
                        t.insert("d", row).unwrap()
                    })
                    .collect();
                t.commit().unwrap();
                db.checkpoint().unwrap();
                db.close().unwrap();
                (info.rel, rids)
            };
            // Scans hand rows out in row-id order.
            let mut rids = rids;
            rids.sort();
            let path = dir.path().join("base").join(rel.0.to_string());
            let mut file = std::fs::read(&path).unwrap();
            // Row j: byte j of its data (wrapping), changed one of four ways.
            for (j, id) in rids.iter().enumerate() {
                let r = tuple_range(&file, *id);
                let at = r.start + j % r.len();
                let b = file[at];
                file[at] = match (j / r.len()) % 4 {
                    0 => b ^ 1,
                    1 => b ^ 0x80,
                    2 => b.wrapping_add(8),
                    _ => 0xFF,
                };
            }
            std::fs::write(&path, &file).unwrap();

            let db = Database::open(dir.path(), options()).unwrap();
            let handles = db.table_handle("d").unwrap().columns();
            let t = db.read().unwrap();
            let mut bad = Vec::new();
            let outcome = |x: &engine::Result<(RowId, engine::OwnedRow)>| match x {
                Ok((id, row)) => Ok((*id, row.values().to_vec())),
                Err(EngineError::CorruptRow { table, row_id, .. }) if table == "d" => Err(*row_id),
                Err(e) => panic!("shape {s}: {e:?}"),
            };
            let scanned: Vec<_> = t.scan("d").unwrap().collect();
            let expected: Vec<Result<(RowId, Vec<Value>), RowId>> =
                scanned.iter().map(outcome).collect();
            let ids: Vec<RowId> = expected
                .iter()
                .map(|o| o.clone().map_or_else(|id| id, |(id, _)| id))
                .collect();
            assert_eq!(ids, rids, "shape {s}: every row, in order");
            let corrupt = expected.iter().filter(|o| o.is_err()).count();
            assert!(
                corrupt > 0 && corrupt < rids.len(),
                "shape {s}: {corrupt} corrupt"
            );
            // Each owned row's accessors read its decoded values.
            for (x, want) in scanned.iter().zip(&expected) {
                let (Ok((_, row)), Ok((id, vals))) = (x, want) else {
                    continue;
                };
                for h in &handles {
                    let w = vals[h.index()].clone();
                    let (got, plain) = typed!(row, *h);
                    if got != Ok(Some(w.clone())) && !(w.is_null() && got == Ok(None)) {
                        bad.push(format!(
                            "shape {s} owned {id} col {}: {got:?} want {w:?}",
                            h.index()
                        ));
                    }
                    if let Some(p) = plain
                        && !w.is_null()
                        && p != Ok(Some(w.clone()))
                    {
                        bad.push(format!(
                            "shape {s} owned {id} col {} plain: {p:?} want {w:?}",
                            h.index()
                        ));
                    }
                }
                // And `get` agrees.
                let g = t.get("d", *id).unwrap().unwrap();
                assert_eq!(g.values(), &vals[..], "shape {s} get {id}");
            }
            for (x, want) in scanned.iter().zip(&expected) {
                if let (Err(_), Err(id)) = (x, want) {
                    assert!(
                        matches!(t.get("d", *id), Err(EngineError::CorruptRow { row_id, .. }) if row_id == *id),
                        "shape {s} get {id}"
                    );
                }
            }
            // Filtered and projected scans: the same rows and errors.
            let filtered: Vec<_> = t
                .scan("d")
                .unwrap()
                .matching(|_| Ok(true))
                .map(|x| outcome(&x))
                .collect();
            assert_eq!(filtered, expected, "shape {s} filtered");
            let projected: Vec<_> = t
                .scan("d")
                .unwrap()
                .project(&handles)
                .map(|x| outcome(&x))
                .collect();
            assert_eq!(projected, expected, "shape {s} projected");
            // Borrowed rows: a row that decodes reads its values through
            // every accessor.
            let mut i = 0;
            t.scan_each("d", |row| {
                assert_eq!(row.id(), rids[i]);
                if let Ok((id, vals)) = &expected[i] {
                    for h in &handles {
                        let w = vals[h.index()].clone();
                        let (got, plain) = typed!(&row, *h);
                        if got != Ok(Some(w.clone())) && !(w.is_null() && got == Ok(None)) {
                            bad.push(format!(
                                "shape {s} borrowed {id} col {}: {got:?}",
                                h.index()
                            ));
                        }
                        if let Some(p) = plain
                            && !w.is_null()
                            && p != Ok(Some(w.clone()))
                        {
                            bad.push(format!(
                                "shape {s} borrowed {id} col {} plain: {p:?}",
                                h.index()
                            ));
                        }
                    }
                } else {
                    // A damaged row: each read is a value or an error,
                    // never a panic.
                    for h in &handles {
                        let _ = typed!(&row, *h);
                    }
                }
                i += 1;
                Ok(())
            })
            .unwrap();
            assert_eq!(i, rids.len());
            for b in bad.iter().take(20) {
                println!("{b}");
            }
            assert!(bad.is_empty(), "shape {s}: {} bad reads", bad.len());
        }
    });
}
