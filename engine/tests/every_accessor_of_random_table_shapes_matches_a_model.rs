//! Every typed accessor of `RowRef` and `OwnedRow`, on tables of random
//! shapes (one column to many; fixed-width columns only, one byte string
//! between fixed-width runs, bools and text mixed in, nullable columns
//! anywhere), rows with and without NULLs, rows stored before one or two
//! `add_column`s and after, read through a borrowed scan, `get_with`, an
//! owned scan (plain, filtered, projected), `get`, and owned rows kept
//! after their table was dropped and sent to another thread. Columns are
//! named by handles of the table, by handles of a table of another
//! database with the same relation id (of a shape close to this one's),
//! and by names, some missing. Each read is compared with a model: the
//! value inserted (`None` for NULL through `_opt`), `WrongColumn` for a
//! handle `RowColumn::col` refuses, an accessor of another type, a NULL
//! through a non-`_opt` accessor or a column the projection left out, and
//! `UnknownColumn` for a missing name.

mod common;

use common::accessors::{Out, err};
use common::{Rng, small_options};
use engine::{Col, Column, ColumnType, Database, OwnedRow, RowColumn, RowRef, TableInfo, Value};

const TYPES: [ColumnType; 6] = [
    ColumnType::I64,
    ColumnType::F64,
    ColumnType::Timestamp,
    ColumnType::Bool,
    ColumnType::Text,
    ColumnType::Bytes,
];

fn random_value(rng: &mut Rng, ty: ColumnType) -> Value {
    let n = rng.next_u64();
    match ty {
        ColumnType::I64 => Value::I64(n as i64),
        ColumnType::F64 => Value::F64((n >> 11) as f64 / 7.0 - 1e9),
        ColumnType::Timestamp => Value::Timestamp((n >> 1) as i64 - (1 << 60)),
        ColumnType::Bool => Value::Bool(n & 1 == 1),
        ColumnType::Text => Value::Text(format!("t\u{e9}{}", n % 1000).repeat((n % 4) as usize)),
        ColumnType::Bytes => Value::Bytes(vec![(n % 251) as u8; (n % 40) as usize]),
    }
}

/// Columns for table number `k`: the first few shapes hit each of the
/// plan's forms on purpose, the rest are random.
fn shape(rng: &mut Rng, k: usize) -> Vec<Column> {
    use ColumnType::*;
    let fixed: Vec<(ColumnType, bool)> = match k {
        0 => vec![(I64, false)],
        1 => vec![(Bytes, false)],
        2 => vec![(Bytes, true)],
        3 => vec![(I64, false), (F64, false), (Timestamp, false)],
        4 => vec![(Bytes, false), (I64, false), (F64, false)],
        5 => vec![(I64, false), (Timestamp, false), (Bytes, true)],
        6 => vec![(I64, false), (Bytes, false), (F64, false)],
        7 => vec![(I64, true), (F64, false), (Timestamp, false)],
        8 => vec![(Bool, false), (I64, false)],
        9 => vec![(Text, false), (I64, false)],
        10 => vec![(I64, false), (Bytes, false), (Bytes, false), (I64, false)],
        11 => vec![(F64, false), (Bool, true), (I64, false), (Text, true)],
        12 => (0..17).map(|i| (TYPES[i % 3], false)).collect(),
        // Eight columns: the columns added make the null bitmap longer
        // than the one of the rows stored before them.
        13 => (0..8).map(|i| (TYPES[i % 3], false)).collect(),
        14 => (0..7).map(|i| (TYPES[i % 3], false)).collect(),
        _ => {
            let n = 1 + rng.below(12) as usize;
            (0..n)
                .map(|_| (TYPES[rng.below(6) as usize], rng.below(3) == 0))
                .collect()
        }
    };
    fixed
        .into_iter()
        .enumerate()
        .map(|(i, (ty, nullable))| {
            let name = format!("c{i}");
            if nullable {
                Column::nullable(name, ty)
            } else {
                Column::new(name, ty)
            }
        })
        .collect()
}

/// A shape close to `cols` for the other database: the same columns with
/// one of them changed (nullability, type, or a bool put first).
fn near(rng: &mut Rng, cols: &[Column]) -> Vec<Column> {
    let mut out = cols.to_vec();
    let i = rng.below(out.len() as u64) as usize;
    match rng.below(4) {
        0 => out[i].nullable = !out[i].nullable,
        1 => out[i].ty = TYPES[rng.below(6) as usize],
        2 => out.insert(0, Column::new("b", ColumnType::Bool)),
        _ => {}
    }
    for (j, c) in out.iter_mut().enumerate() {
        c.name = format!("o{j}");
    }
    out
}

fn random_row(rng: &mut Rng, cols: &[Column], nulls: bool) -> Vec<Value> {
    cols.iter()
        .map(|c| {
            if c.nullable && nulls && rng.below(3) == 0 {
                Value::Null
            } else {
                random_value(rng, c.ty)
            }
        })
        .collect()
}

/// A column named by handle or by name.
#[derive(Clone, Debug)]
enum Named {
    Handle(String, Col),
    Name(String),
}

/// What accessor `ty` (`opt`) must return for `named` on a row of `vals`
/// of table `info`, projected to `proj` (table positions) if `Some`.
fn expect(
    info: &TableInfo,
    vals: &[Value],
    proj: Option<&[usize]>,
    named: &Named,
    ty: ColumnType,
    opt: bool,
) -> Out {
    let i = match named {
        Named::Handle(_, h) => match h.col(info) {
            Ok(c) => c.index(),
            Err(e) => return Err(err(e)),
        },
        Named::Name(n) => match info.columns.iter().position(|c| &c.name == n) {
            Some(i) => i,
            None => return Err("UNKNOWN".into()),
        },
    };
    if proj.is_some_and(|p| !p.contains(&i)) || info.columns[i].ty != ty {
        return Err("WRONG".into());
    }
    match &vals[i] {
        Value::Null if opt => Ok(None),
        Value::Null => Err("WRONG".into()),
        v => Ok(Some(v.clone())),
    }
}

/// Compare every accessor of `$row` on every column of `$names` with the
/// model, pushing each difference to `$bad`.
macro_rules! check_row {
    ($bad:expr, $how:expr, $info:expr, $vals:expr, $proj:expr, $row:expr, $names:expr) => {{
        for named in $names.iter() {
            let (label, got) = match named {
                Named::Handle(l, h) => (l.as_str(), accessors!($row, *h)),
                Named::Name(n) => (n.as_str(), accessors!($row, n.as_str())),
            };
            for (ty, opt, g) in got {
                let w = expect($info, $vals, $proj, named, ty, opt);
                if g != w {
                    $bad.push(format!(
                        "{} {:?}: {label} {named:?} {ty:?} opt {opt}: got {g:?}, want {w:?}",
                        $how, $vals
                    ));
                }
            }
        }
    }};
}

struct Case {
    name: String,
    info: TableInfo,
    /// Each row's values, the columns added after it was stored read as
    /// their default or NULL.
    rows: Vec<Vec<Value>>,
    names: Vec<Named>,
}

#[test]
fn every_accessor_of_random_table_shapes_matches_a_model() {
    let d1 = tempfile::tempdir().unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let db = Database::open(d1.path(), small_options()).unwrap();
    let other = Database::open(d2.path(), small_options()).unwrap();
    let mut rng = Rng::new(0x5eed_0009);
    let mut cases = Vec::new();
    for k in 0..60 {
        let cols = shape(&mut rng, k);
        let name = format!("t{k}");
        let info = db.create_table(&name, cols.clone()).unwrap();
        let o = other
            .create_table(&format!("o{k}"), near(&mut rng, &cols))
            .unwrap();
        assert_eq!(info.rel, o.rel, "tables created in the same order");
        let mut names: Vec<Named> = db
            .table_handle(&name)
            .unwrap()
            .columns()
            .into_iter()
            .map(|c| Named::Handle(format!("before {}", c.index()), c))
            .collect();
        names.extend(
            other
                .table_handle(&format!("o{k}"))
                .unwrap()
                .columns()
                .into_iter()
                .map(|c| Named::Handle(format!("other {}", c.index()), c)),
        );
        let mut rows = Vec::new();
        let mut cur = cols.clone();
        let adds = if k == 13 || k == 14 { 2 } else { rng.below(3) };
        for round in 0..=adds {
            let t = db.begin().unwrap();
            for _ in 0..1 + rng.below(6) {
                let nulls = rng.below(2) == 0;
                let r = random_row(&mut rng, &cur, nulls);
                t.insert(name.as_str(), r.clone()).unwrap();
                rows.push(r);
            }
            t.commit().unwrap();
            if round < adds {
                let ty = TYPES[rng.below(6) as usize];
                let c = if rng.below(2) == 0 {
                    Column::nullable(format!("a{round}"), ty)
                } else {
                    Column::new(format!("a{round}"), ty).with_default(random_value(&mut rng, ty))
                };
                let missing = c.default.clone().unwrap_or(Value::Null);
                db.add_column(&name, c.clone()).unwrap();
                for r in rows.iter_mut() {
                    r.push(missing.clone());
                }
                cur.push(c);
            }
        }
        let table = db.table_handle(&name).unwrap();
        let info = table.info().clone();
        names.extend(
            table
                .columns()
                .into_iter()
                .map(|c| Named::Handle(format!("after {}", c.index()), c)),
        );
        names.extend(info.columns.iter().map(|c| Named::Name(c.name.clone())));
        names.push(Named::Name("nope".into()));
        cases.push(Case {
            name,
            info,
            rows,
            names,
        });
    }

    let mut bad: Vec<String> = Vec::new();
    let r = db.read().unwrap();
    let mut kept: Vec<(usize, Vec<OwnedRow>)> = Vec::new();
    for (k, case) in cases.iter().enumerate() {
        let (info, names) = (&case.info, &case.names);
        // Borrowed scan.
        let mut i = 0;
        let mut ids = Vec::new();
        r.scan_each(case.name.as_str(), |row: RowRef<'_>| {
            check_row!(bad, "scan_each", info, &case.rows[i], None, &row, names);
            ids.push(row.id());
            i += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(i, case.rows.len(), "{}", case.name);
        // Borrowed and owned single-row reads.
        for (i, id) in ids.iter().enumerate() {
            let vals = &case.rows[i];
            r.get_with(case.name.as_str(), *id, |row| {
                check_row!(bad, "get_with", info, vals, None, &row, names);
            })
            .unwrap()
            .unwrap();
            let g = r.get(case.name.as_str(), *id).unwrap().unwrap();
            check_row!(bad, "get", info, vals, None, &g, names);
        }
        // Owned scans: plain, and filtered (each row through the filter's
        // path).
        let owned: Vec<OwnedRow> = r
            .scan(case.name.as_str())
            .unwrap()
            .map(|x| x.unwrap().1)
            .collect();
        assert_eq!(owned.len(), case.rows.len());
        for (i, row) in owned.iter().enumerate() {
            check_row!(bad, "scan", info, &case.rows[i], None, row, names);
            assert_eq!(row.values(), &case.rows[i][..], "{}", case.name);
        }
        let filtered: Vec<OwnedRow> = r
            .scan(case.name.as_str())
            .unwrap()
            .matching(|_| Ok(true))
            .map(|x| x.unwrap().1)
            .collect();
        assert_eq!(filtered.len(), case.rows.len());
        for (i, row) in filtered.iter().enumerate() {
            check_row!(bad, "matching", info, &case.rows[i], None, row, names);
        }
        // Projected: a random subset of the table's columns, in a random
        // order.
        let handles = db.table_handle(&case.name).unwrap().columns();
        let mut proj: Vec<Col> = handles
            .iter()
            .copied()
            .filter(|_| rng.below(2) == 0)
            .collect();
        if proj.len() > 1 {
            let last = proj.len() - 1;
            proj.swap(0, last);
        }
        let positions: Vec<usize> = proj.iter().map(Col::index).collect();
        let projected: Vec<OwnedRow> = r
            .scan(case.name.as_str())
            .unwrap()
            .project(&proj)
            .map(|x| x.unwrap().1)
            .collect();
        assert_eq!(projected.len(), case.rows.len());
        for (i, row) in projected.iter().enumerate() {
            let want: Vec<Value> = positions.iter().map(|&p| case.rows[i][p].clone()).collect();
            assert_eq!(row.values(), &want[..], "{} projected", case.name);
            check_row!(
                bad,
                "project",
                info,
                &case.rows[i],
                Some(&positions[..]),
                row,
                names
            );
        }
        if k % 3 == 0 {
            kept.push((k, owned));
        }
    }
    drop(r);
    // Rows kept past their table's drop, read on another thread.
    for (k, _) in &kept {
        db.drop_table(&cases[*k].name).unwrap();
    }
    let far = std::thread::spawn(move || {
        let mut bad = Vec::new();
        for (k, owned) in kept {
            let case = &cases[k];
            for (i, row) in owned.iter().enumerate() {
                check_row!(
                    bad,
                    "dropped",
                    &case.info,
                    &case.rows[i],
                    None,
                    row,
                    case.names
                );
            }
        }
        bad
    })
    .join()
    .unwrap();
    bad.extend(far);
    for b in bad.iter().take(40) {
        println!("{b}");
    }
    assert!(bad.is_empty(), "{} reads differ from the model", bad.len());
}
