//! Column handles of every origin read through every typed accessor of
//! `RowRef` (a borrowed scan) and `OwnedRow` (an owned scan, `get`, a
//! projected owned scan): handles of the table itself, of another table
//! of the database, of a table of another database with the same relation
//! id (and the same column types at some positions, but other
//! nullability or fixed offsets), of the table before two `add_column`s
//! and after them, on rows stored before and after; a nullable column
//! before the fixed-width ones, NULL in some rows. Each read must be the
//! column's value exactly when the handle describes that column of this
//! table and the accessor its type (`None` for NULL through an `_opt`
//! accessor), and `WrongColumn` otherwise: never another column's bytes.
//! A projected row answers only for its projected columns.

mod common;

use common::small_options;
use engine::{Col, Column, ColumnType, Database, EngineError, OwnedRow, RowRef, Value};

type Out = Result<Option<Value>, String>;

fn err(e: EngineError) -> String {
    match e {
        EngineError::WrongColumn { .. } => "WRONG".into(),
        e => format!("OTHER {e:?}"),
    }
}

macro_rules! accessors {
    ($r:expr, $c:expr) => {{
        let r = $r;
        let c: Col = $c;
        let v: Vec<(&str, Out)> = vec![
            ("i64", r.i64(c).map(|v| Some(Value::I64(v))).map_err(err)),
            (
                "i64_opt",
                r.i64_opt(c).map(|v| v.map(Value::I64)).map_err(err),
            ),
            ("f64", r.f64(c).map(|v| Some(Value::F64(v))).map_err(err)),
            (
                "f64_opt",
                r.f64_opt(c).map(|v| v.map(Value::F64)).map_err(err),
            ),
            (
                "ts",
                r.timestamp(c)
                    .map(|v| Some(Value::Timestamp(v)))
                    .map_err(err),
            ),
            (
                "ts_opt",
                r.timestamp_opt(c)
                    .map(|v| v.map(Value::Timestamp))
                    .map_err(err),
            ),
            ("bool", r.bool(c).map(|v| Some(Value::Bool(v))).map_err(err)),
            (
                "bool_opt",
                r.bool_opt(c).map(|v| v.map(Value::Bool)).map_err(err),
            ),
            (
                "bytes",
                r.bytes(c)
                    .map(|v| Some(Value::Bytes(v.to_vec())))
                    .map_err(err),
            ),
            (
                "bytes_opt",
                r.bytes_opt(c)
                    .map(|v| v.map(|b| Value::Bytes(b.to_vec())))
                    .map_err(err),
            ),
            (
                "text",
                r.text(c)
                    .map(|v| Some(Value::Text(v.to_string())))
                    .map_err(err),
            ),
            (
                "text_opt",
                r.text_opt(c)
                    .map(|v| v.map(|b| Value::Text(b.to_string())))
                    .map_err(err),
            ),
            ("value", r.value(c).map(|v| Some(v.clone())).map_err(err)),
        ];
        v
    }};
}

/// What accessor `acc` must return for handle `h` on a row of values
/// `vals` of the table whose columns are `own`.
fn expect(own: &[Col], vals: &[Value], acc: &str, h: Col) -> Out {
    let i = h.index();
    if i >= own.len() || own[i] != h {
        return Err("WRONG".into());
    }
    let v = vals[i].clone();
    let ty = h.ty();
    let want = match acc {
        "value" => return Ok(Some(v)),
        "i64" | "i64_opt" => ColumnType::I64,
        "f64" | "f64_opt" => ColumnType::F64,
        "ts" | "ts_opt" => ColumnType::Timestamp,
        "bool" | "bool_opt" => ColumnType::Bool,
        "bytes" | "bytes_opt" => ColumnType::Bytes,
        _ => ColumnType::Text,
    };
    if ty != want {
        return Err("WRONG".into());
    }
    if v.is_null() {
        if acc.ends_with("_opt") {
            return Ok(None);
        }
        return Err("WRONG".into());
    }
    Ok(Some(v))
}

fn cols_a() -> Vec<Column> {
    vec![
        Column::nullable("n", ColumnType::I64),
        Column::new("x", ColumnType::I64),
        Column::nullable("f", ColumnType::F64),
        Column::new("ts", ColumnType::Timestamp),
        Column::nullable("b", ColumnType::Bool),
        Column::nullable("by", ColumnType::Bytes),
        Column::new("tx", ColumnType::Text),
        Column::new("y", ColumnType::I64),
    ]
}

fn cols_b() -> Vec<Column> {
    vec![
        Column::new("x", ColumnType::I64),
        Column::new("x2", ColumnType::I64),
        Column::new("f", ColumnType::F64),
        Column::new("ts", ColumnType::Timestamp),
        Column::new("b", ColumnType::Bool),
        Column::nullable("by", ColumnType::Bytes),
        Column::new("tx", ColumnType::Text),
        Column::new("y", ColumnType::I64),
        Column::new("z", ColumnType::I64),
    ]
}

fn rows_a() -> Vec<Vec<Value>> {
    vec![
        vec![
            Value::Null,
            Value::I64(11),
            Value::Null,
            Value::Timestamp(5),
            Value::Null,
            Value::Null,
            Value::Text("t0".into()),
            Value::I64(77),
        ],
        vec![
            Value::I64(-3),
            Value::I64(12),
            Value::F64(1.5),
            Value::Timestamp(6),
            Value::Bool(true),
            Value::Bytes(b"zz".to_vec()),
            Value::Text("t1".into()),
            Value::I64(78),
        ],
    ]
}

#[test]
fn handles_of_every_origin_through_every_accessor() {
    let d1 = tempfile::tempdir().unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let db1 = Database::open(d1.path(), small_options()).unwrap();
    let db2 = Database::open(d2.path(), small_options()).unwrap();
    let ia = db1.create_table("a", cols_a()).unwrap();
    let ib2 = db2.create_table("b", cols_b()).unwrap();
    assert_eq!(ia.rel, ib2.rel, "same rel id");
    let ib1 = db1.create_table("b", cols_b()).unwrap();
    assert_ne!(ib1.rel, ia.rel);
    let t = db1.begin().unwrap();
    for r in rows_a() {
        t.insert("a", r).unwrap();
    }
    t.commit().unwrap();
    let ta = db1.table_handle("a").unwrap();
    let own = ta.columns();
    let mut handles: Vec<(String, Col)> = own
        .iter()
        .map(|c| (format!("own {}", c.index()), *c))
        .collect();
    for c in db1.table_handle("b").unwrap().columns() {
        handles.push((format!("db1.b {}", c.index()), c));
    }
    for c in db2.table_handle("b").unwrap().columns() {
        handles.push((format!("db2.b {}", c.index()), c));
    }
    // Two columns added: the handles taken before stay valid, and the
    // new ones read the rows stored before as their default or NULL.
    db1.add_column("a", Column::nullable("late", ColumnType::I64))
        .unwrap();
    db1.add_column(
        "a",
        Column::new("late2", ColumnType::F64).with_default(Value::F64(2.5)),
    )
    .unwrap();
    let own2 = db1.table_handle("a").unwrap().columns();
    for c in &own2 {
        handles.push((format!("new {}", c.index()), *c));
    }
    let t = db1.begin().unwrap();
    let mut r2 = rows_a()[1].clone();
    r2.push(Value::I64(1000));
    r2.push(Value::F64(-1.0));
    t.insert("a", r2).unwrap();
    t.commit().unwrap();
    let mut vals_all = rows_a();
    for v in vals_all.iter_mut() {
        v.push(Value::Null);
        v.push(Value::F64(2.5));
    }
    let mut r2 = rows_a()[1].clone();
    r2.push(Value::I64(1000));
    r2.push(Value::F64(-1.0));
    vals_all.push(r2);

    let mut bad = Vec::new();
    let check =
        |how: &str, i: usize, got: Vec<(&str, Out)>, bad: &mut Vec<String>, name: &str, h: Col| {
            for (acc, g) in got {
                let w = expect(&own2, &vals_all[i], acc, h);
                if g != w {
                    bad.push(format!(
                        "{how} row {i} handle {name} {acc}: got {g:?} want {w:?}"
                    ));
                }
            }
        };
    let r = db1.read().unwrap();
    let mut i = 0;
    r.scan_each("a", |row: RowRef<'_>| {
        for (name, h) in &handles {
            check("rowref", i, accessors!(&row, *h), &mut bad, name, *h);
        }
        i += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(i, 3);
    let owned: Vec<(engine::RowId, OwnedRow)> = r.scan("a").unwrap().map(Result::unwrap).collect();
    for (i, (id, row)) in owned.iter().enumerate() {
        for (name, h) in &handles {
            check("owned", i, accessors!(row, *h), &mut bad, name, *h);
        }
        let g = r.get("a", *id).unwrap().unwrap();
        for (name, h) in &handles {
            check("get", i, accessors!(&g, *h), &mut bad, name, *h);
        }
    }
    // Projected to four columns: the others are `WrongColumn`.
    let proj = [own2[1], own2[3], own2[6], own2[9]];
    let owned: Vec<OwnedRow> = r
        .scan("a")
        .unwrap()
        .project(&proj)
        .map(|x| x.unwrap().1)
        .collect();
    for (i, row) in owned.iter().enumerate() {
        for (name, h) in &handles {
            let got = accessors!(row, *h);
            for (acc, g) in got {
                let w = if proj.contains(h) {
                    expect(&own2, &vals_all[i], acc, *h)
                } else {
                    Err("WRONG".into())
                };
                if g != w {
                    bad.push(format!(
                        "proj row {i} handle {name} {acc}: got {g:?} want {w:?}"
                    ));
                }
            }
        }
    }
    for b in &bad {
        println!("{b}");
    }
    assert!(bad.is_empty(), "{} bad", bad.len());
}
