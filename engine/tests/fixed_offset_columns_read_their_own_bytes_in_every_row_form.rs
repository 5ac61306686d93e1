//! The typed accessors, the fixed-width ones above all (`i64`, `f64`,
//! `timestamp` and their `_opt` forms), on a table whose leading columns
//! are NOT NULL and fixed-width,
//! so their handles carry fixed offsets and the accessors read a scanned
//! row's bytes at that offset without decoding it: rows storing every
//! column and no NULL, rows with a NULL, rows stored before two
//! `add_column`s and after; handles of the table, of the table after the
//! columns were added, and of a table of another database with the same
//! relation id whose columns have the same types and nullability at some
//! positions but other offsets. Through a borrowed scan, an owned scan, a
//! projected owned scan and `get`, each read is the column's value when
//! the handle is exactly that column of this table and the accessor its
//! type (`None` for NULL through `_opt`), and `WrongColumn` otherwise.

mod common;

use common::accessors::Out;
use common::small_options;
use engine::{Col, Column, ColumnType, Database, OwnedRow, RowRef, Value};

/// What an accessor of type `ty` (`opt`: an `_opt` one) must return for
/// handle `h` on a row of `vals` of the table whose handles are `own`.
fn expect(own: &[Col], vals: &[Value], ty: ColumnType, opt: bool, h: Col) -> Out {
    let i = h.index();
    if i >= own.len() || own[i] != h || h.ty() != ty {
        return Err("WRONG".into());
    }
    match &vals[i] {
        Value::Null if opt => Ok(None),
        Value::Null => Err("WRONG".into()),
        v => Ok(Some(v.clone())),
    }
}

fn columns() -> Vec<Column> {
    vec![
        Column::new("x", ColumnType::I64),
        Column::new("f", ColumnType::F64),
        Column::new("ts", ColumnType::Timestamp),
        Column::new("flag", ColumnType::Bool),
        Column::new("y", ColumnType::I64),
        Column::nullable("n", ColumnType::I64),
        Column::new("tx", ColumnType::Text),
        Column::new("z", ColumnType::I64),
    ]
}

/// Same relation id in a fresh database; a bool first, so the fixed
/// offsets of the same-typed columns at positions 1, 2 and 4 differ.
fn other_columns() -> Vec<Column> {
    vec![
        Column::new("flag", ColumnType::Bool),
        Column::new("f", ColumnType::F64),
        Column::new("ts", ColumnType::Timestamp),
        Column::new("x", ColumnType::I64),
        Column::new("y", ColumnType::I64),
        Column::nullable("n", ColumnType::I64),
    ]
}

fn row(i: i64, n: Option<i64>) -> Vec<Value> {
    vec![
        Value::I64(i),
        Value::F64(i as f64 + 0.5),
        Value::Timestamp(1_000 + i),
        Value::Bool(i % 2 == 0),
        Value::I64(-i),
        n.map_or(Value::Null, Value::I64),
        Value::Text(format!("t{i}")),
        Value::I64(i * 100),
    ]
}

#[test]
fn fixed_offset_columns_read_their_own_bytes_in_every_row_form() {
    let d1 = tempfile::tempdir().unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let db = Database::open(d1.path(), small_options()).unwrap();
    let other = Database::open(d2.path(), small_options()).unwrap();
    let info = db.create_table("t", columns()).unwrap();
    let other_info = other.create_table("o", other_columns()).unwrap();
    assert_eq!(info.rel, other_info.rel, "same relation id");
    let mut vals = vec![row(1, Some(7)), row(2, None), row(3, Some(-9))];
    let t = db.begin().unwrap();
    for r in &vals {
        t.insert("t", r.clone()).unwrap();
    }
    t.commit().unwrap();
    let mut handles: Vec<(String, Col)> = Vec::new();
    for c in db.table_handle("t").unwrap().columns() {
        handles.push((format!("own {}", c.index()), c));
    }
    for c in other.table_handle("o").unwrap().columns() {
        handles.push((format!("other {}", c.index()), c));
    }
    // Offsets differ where a bool comes first: the check must see it.
    let ours = db.table_handle("t").unwrap().columns();
    let theirs = other.table_handle("o").unwrap().columns();
    assert!(
        (0..theirs.len()).any(|i| theirs[i].ty() == ours[i].ty() && theirs[i] != ours[i]),
        "some handle of the other table has this table's type at its position, not its offset"
    );
    db.add_column("t", Column::nullable("late", ColumnType::I64))
        .unwrap();
    db.add_column(
        "t",
        Column::new("late2", ColumnType::F64).with_default(Value::F64(2.5)),
    )
    .unwrap();
    let own = db.table_handle("t").unwrap().columns();
    for c in &own {
        handles.push((format!("new {}", c.index()), *c));
    }
    for v in vals.iter_mut() {
        v.push(Value::Null);
        v.push(Value::F64(2.5));
    }
    let t = db.begin().unwrap();
    for (i, late) in [(4, Some(40)), (5, None)] {
        let mut r = row(i, Some(i));
        r.push(late.map_or(Value::Null, Value::I64));
        r.push(Value::F64(-(i as f64)));
        t.insert("t", r.clone()).unwrap();
        vals.push(r);
    }
    t.commit().unwrap();

    let mut bad = Vec::new();
    let mut check = |how: &str, i: usize, got: Vec<(ColumnType, bool, Out)>, name: &str, h: Col| {
        for (ty, opt, g) in got {
            let w = expect(&own, &vals[i], ty, opt, h);
            if g != w {
                bad.push(format!(
                    "{how} row {i} handle {name} {ty:?} opt {opt}: got {g:?} want {w:?}"
                ));
            }
        }
    };
    let r = db.read().unwrap();
    let mut i = 0;
    r.scan_each("t", |row: RowRef<'_>| {
        for (name, h) in &handles {
            check("rowref", i, accessors!(&row, *h), name, *h);
        }
        i += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(i, vals.len());
    let owned: Vec<(engine::RowId, OwnedRow)> = r.scan("t").unwrap().map(Result::unwrap).collect();
    assert_eq!(owned.len(), vals.len());
    for (i, (id, row)) in owned.iter().enumerate() {
        for (name, h) in &handles {
            check("owned", i, accessors!(row, *h), name, *h);
        }
        let g = r.get("t", *id).unwrap().unwrap();
        for (name, h) in &handles {
            check("get", i, accessors!(&g, *h), name, *h);
        }
    }
    // Projected: the columns left out are `WrongColumn` even where the
    // row's bytes hold them at the handle's offset.
    let proj = [own[4], own[0], own[9]];
    let projected: Vec<OwnedRow> = r
        .scan("t")
        .unwrap()
        .project(&proj)
        .map(|x| x.unwrap().1)
        .collect();
    for (i, row) in projected.iter().enumerate() {
        for (name, h) in &handles {
            for (ty, opt, g) in accessors!(row, *h) {
                let w = if proj.contains(h) {
                    expect(&own, &vals[i], ty, opt, *h)
                } else {
                    Err("WRONG".into())
                };
                if g != w {
                    bad.push(format!(
                        "proj row {i} handle {name} {ty:?} opt {opt}: got {g:?} want {w:?}"
                    ));
                }
            }
        }
    }
    for b in &bad {
        println!("{b}");
    }
    assert!(bad.is_empty(), "{} bad reads", bad.len());
}
