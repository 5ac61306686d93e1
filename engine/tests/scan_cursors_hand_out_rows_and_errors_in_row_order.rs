//! A table scan's iterator hands out a page's kept rows by a cursor and its
//! errors (a filter's) at their place among them; rows share their page's
//! copy by a reference count. Checked against a model built from the
//! borrowed scan: errors interleaved with rows, a rollback in the middle of
//! a page, rows kept and cloned across threads after the iterator, its
//! transaction and its database are gone, and every typed accessor of
//! borrowed, scanned, projected and looked-up rows of a table that gained
//! columns, NULLs included.

mod common;

use std::time::Duration;

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, EngineError, OwnedRow, RowId, Value};

fn columns() -> Vec<Column> {
    vec![
        Column::new("id", ColumnType::I64),
        Column::nullable("pad", ColumnType::Bytes),
    ]
}

fn row(i: i64) -> Vec<Value> {
    let pad = if i % 5 == 0 {
        Value::Null
    } else {
        Value::Bytes(vec![i as u8; (i as usize * 7) % 90])
    };
    vec![Value::I64(i), pad]
}

/// Every id of `table`, in row-id order, as a borrowed scan reads it.
fn ids_in_order(db: &Database, table: &str) -> Vec<(RowId, i64)> {
    let mut out = Vec::new();
    db.read()
        .unwrap()
        .scan_each(table, |r| {
            out.push((r.id(), r.i64("id")?));
            Ok(())
        })
        .unwrap();
    out
}

/// The filter of these tests: an error for ids 13k and 13k + 1 (two in a
/// row, and the table's first), dropped for multiples of 3, kept otherwise.
fn filter(id: i64) -> Option<bool> {
    if id % 13 == 0 || id % 13 == 1 {
        None
    } else {
        Some(id % 3 != 0)
    }
}

fn filtered(r: &engine::RowRef<'_>) -> engine::Result<bool> {
    let id = r.i64("id")?;
    match filter(id) {
        Some(keep) => Ok(keep),
        // An error of the engine's own: a column the table lacks.
        None => r.i64("no such column").map(|_| true),
    }
}

/// What the filtered iterator should hand out for `ids`: `Ok(id)` for a
/// kept row, `Err(id)` for the row whose filter failed.
fn model(ids: &[(RowId, i64)]) -> Vec<Result<i64, i64>> {
    ids.iter()
        .filter_map(|&(_, id)| match filter(id) {
            None => Some(Err(id)),
            Some(true) => Some(Ok(id)),
            Some(false) => None,
        })
        .collect()
}

fn open_filled(dir: &std::path::Path, rows: i64) -> Database {
    let db = Database::open(dir, small_options().pool_buffers(16)).unwrap();
    db.create_table("t", columns()).unwrap();
    let t = db.begin().unwrap();
    for i in 0..rows {
        t.insert("t", row(i)).unwrap();
    }
    t.commit().unwrap();
    db
}

#[test]
fn filter_errors_come_out_between_the_rows_around_them_and_the_scan_goes_on() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let db = open_filled(dir.path(), 4000);
        let ids = ids_in_order(&db, "t");
        assert_eq!(ids.len(), 4000);
        let want = model(&ids);
        let t = db.read().unwrap();
        let mut kept = Vec::new();
        let got: Vec<Result<i64, i64>> = t
            .scan("t")
            .unwrap()
            .matching(filtered)
            .map(|r| match r {
                Ok((_, row)) => {
                    let id = row.i64("id").unwrap();
                    kept.push(row);
                    Ok(id)
                }
                Err(EngineError::UnknownColumn { .. }) => Err(-1),
                Err(e) => panic!("an unexpected error: {e}"),
            })
            .collect();
        // The errors carry no id: compare their places.
        let want_places: Vec<Result<i64, i64>> =
            want.iter().map(|r| r.map_err(|_| -1)).collect::<Vec<_>>();
        assert_eq!(got.len(), want_places.len());
        assert_eq!(got, want_places);
        drop(t);
        db.close().unwrap();
        // The kept rows read on after the database closed.
        let kept_ids: Vec<i64> = kept.iter().map(|r| r.i64("id").unwrap()).collect();
        let want_ids: Vec<i64> = want.iter().filter_map(|r| r.ok()).collect();
        assert_eq!(kept_ids, want_ids);
        for r in &kept {
            let id = r.i64("id").unwrap();
            assert_eq!(r.values(), &row(id)[..]);
        }
    });
}

/// `model` with each item's row id.
fn model_at(ids: &[(RowId, i64)]) -> Vec<(RowId, Result<i64, i64>)> {
    ids.iter()
        .filter_map(|&(rid, id)| match filter(id) {
            None => Some((rid, Err(-1))),
            Some(true) => Some((rid, Ok(id))),
            Some(false) => None,
        })
        .collect()
}

/// [`model_at`] of what the transaction of [`rollback_after`] sees before
/// it rolls back: the odd rows of `ids` (it deleted the even ones).
fn own_view(ids: &[(RowId, i64)]) -> Vec<(RowId, Result<i64, i64>)> {
    let own: Vec<(RowId, i64)> = ids.iter().copied().filter(|&(_, id)| id % 2 != 0).collect();
    model_at(&own)
}

fn item(r: engine::Result<(RowId, OwnedRow)>) -> (Option<RowId>, Result<i64, i64>) {
    match r {
        Ok((rid, row)) => (Some(rid), Ok(row.i64("id").unwrap())),
        Err(EngineError::UnknownColumn { .. }) => (None, Err(-1)),
        Err(e) => panic!("an unexpected error: {e}"),
    }
}

/// The transaction deletes every even row (uncommitted: it alone does not
/// see them), its scan hands out `taken` items, then it rolls back: the
/// scan goes on with every committed row after the last item handed out
/// (a row, or a row's filter error), the even ones included, filtered
/// alike.
fn rollback_after(db: &Database, ids: &[(RowId, i64)], taken: usize) {
    let txn = db.begin().unwrap();
    for &(rid, id) in ids {
        if id % 2 == 0 {
            txn.delete("t", rid).unwrap();
        }
    }
    let own_model = own_view(ids);
    let mut it = txn.scan("t").unwrap().matching(filtered);
    let mut got = Vec::new();
    for _ in 0..taken {
        got.push(item(it.next().expect("an item")).1);
    }
    let before: Vec<Result<i64, i64>> = own_model.iter().take(taken).map(|&(_, r)| r).collect();
    assert_eq!(got, before, "the first {taken} items");
    txn.rollback().unwrap();
    let last = own_model[taken - 1].0;
    let rest: Vec<(RowId, i64)> = ids.iter().copied().filter(|&(rid, _)| rid > last).collect();
    let want: Vec<Result<i64, i64>> = model_at(&rest).into_iter().map(|(_, r)| r).collect();
    let after: Vec<Result<i64, i64>> = it.map(|r| item(r).1).collect();
    if after != want {
        let missing: Vec<_> = want
            .iter()
            .filter(|w| !after.contains(w))
            .take(10)
            .collect();
        panic!(
            "after a rollback at item {taken} (row {last:?}): {} items, {} expected; \
             missing (first 10): {missing:?}",
            after.len(),
            want.len()
        );
    }
}

#[test]
fn a_rollback_in_the_middle_of_a_page_goes_on_with_the_committed_rows_after_the_last_one_handed_out()
 {
    watchdog(Duration::from_secs(240), || {
        let dir = tempfile::tempdir().unwrap();
        let db = open_filled(dir.path(), 1500);
        let ids = ids_in_order(&db, "t");
        let own_model = own_view(&ids);
        // In the middle of pages: some of these items are rows, some
        // filter errors; and the first errors after a row.
        let errors = own_model
            .iter()
            .enumerate()
            .filter(|(i, (_, r))| r.is_err() && *i > 0 && own_model[i - 1].1.is_ok())
            .map(|(i, _)| i + 1)
            .take(3);
        for taken in [1usize, 2, 7, 40, 99, 151, 333].into_iter().chain(errors) {
            rollback_after(&db, &ids, taken);
        }
    });
}

#[test]
fn a_rollback_after_the_last_kept_row_of_a_page_goes_on_with_the_committed_rows_after_it_on_that_page()
 {
    watchdog(Duration::from_secs(240), || {
        let dir = tempfile::tempdir().unwrap();
        let db = open_filled(dir.path(), 1500);
        let ids = ids_in_order(&db, "t");
        let own_model = own_view(&ids);
        let last_block = ids.last().unwrap().0.block;
        let mut checked = 0;
        for block in 0..last_block {
            // The last row the transaction's scan hands out from `block`.
            let Some(at) = own_model
                .iter()
                .rposition(|(rid, r)| rid.block == block && r.is_ok())
            else {
                continue;
            };
            let l = own_model[at].0;
            // Only a page with a committed row after it, kept by the
            // filter, that the transaction did not see.
            if !ids.iter().any(|&(rid, id)| {
                rid.block == block && rid > l && id % 2 == 0 && filter(id) == Some(true)
            }) {
                continue;
            }
            rollback_after(&db, &ids, at + 1);
            checked += 1;
            if checked == 3 {
                break;
            }
        }
        assert!(
            checked > 0,
            "no page had a committed row after its last kept one"
        );
    });
}

#[test]
fn rows_kept_from_iterators_dropped_midway_are_cloned_read_and_dropped_on_many_threads() {
    watchdog(Duration::from_secs(240), || {
        let dir = tempfile::tempdir().unwrap();
        let db = open_filled(dir.path(), 3000);
        let mut kept: Vec<OwnedRow> = Vec::new();
        // Iterators dropped after a few rows, in the middle of pages, with
        // the rest of their page's references not yet handed out.
        for stop in [1usize, 3, 17, 150, 151, 1000, 2999] {
            let t = db.begin().unwrap();
            let it = t.scan("t").unwrap();
            kept.extend(it.take(stop).map(|r| r.unwrap().1));
            t.rollback().unwrap();
        }
        // Rows of a projection and of a filter, skipping rows on each page.
        let idc = db.table_handle("t").unwrap().column("id").unwrap();
        let t = db.read().unwrap();
        kept.extend(
            t.scan("t")
                .unwrap()
                .matching(|r| Ok(r.i64("id")? % 4 == 1))
                .project(&[idc])
                .take(500)
                .map(|r| r.unwrap().1),
        );
        drop(t);
        db.close().unwrap();
        let want: Vec<Vec<Value>> = kept
            .iter()
            .map(|r| {
                let id = r.i64(idc).unwrap();
                if r.values().len() == 1 {
                    vec![Value::I64(id)]
                } else {
                    row(id)
                }
            })
            .collect();
        std::thread::scope(|s| {
            for k in 0..8usize {
                let mine: Vec<OwnedRow> = kept.to_vec();
                let want = &want;
                s.spawn(move || {
                    // Each thread reads its clones in its own order, the
                    // values built by whichever thread gets there first.
                    let n = mine.len();
                    let mut order: Vec<usize> = (0..n).collect();
                    order.rotate_left(k * n / 8);
                    if k % 2 == 1 {
                        order.reverse();
                    }
                    for round in 0..4 {
                        // Clones read here; half of them dropped here, the
                        // others on a thread of their own.
                        let mut away = Vec::new();
                        for &i in &order {
                            let r = mine[i].clone();
                            assert_eq!(r.values(), &want[i][..], "thread {k} row {i}");
                            assert_eq!(r.i64(idc).unwrap(), want[i][0].as_i64().unwrap());
                            if (i + round) % 2 == 0 {
                                drop(r);
                            } else {
                                away.push(r);
                            }
                        }
                        std::thread::spawn(move || drop(away)).join().unwrap();
                    }
                    drop(mine);
                });
            }
        });
        for (r, w) in kept.iter().zip(&want) {
            assert_eq!(r.values(), &w[..]);
        }
    });
}

/// What `value` (of a column of type `ty`) reads as through an accessor of
/// type `want`: `Ok(Some)`, `Ok(None)` for NULL, or `Err(())` for a wrong
/// type (any accessor) or a NULL read by a non-`_opt` accessor.
fn expect_typed(
    value: &Value,
    ty: ColumnType,
    want: ColumnType,
    opt: bool,
) -> Result<Option<u64>, ()> {
    if ty != want {
        return Err(());
    }
    if value.is_null() {
        return if opt { Ok(None) } else { Err(()) };
    }
    Ok(Some(match want {
        ColumnType::F64 => value.as_f64().unwrap().to_bits(),
        ColumnType::Timestamp => value.as_timestamp().unwrap() as u64,
        _ => value.as_i64().unwrap() as u64,
    }))
}

type Reads = Vec<(&'static str, Result<Option<u64>, String>)>;

fn norm<T>(r: engine::Result<Option<T>>, f: impl Fn(T) -> u64) -> Result<Option<u64>, String> {
    match r {
        Ok(v) => Ok(v.map(f)),
        Err(e @ EngineError::WrongColumn { .. }) => Err(e.to_string()),
        Err(e) => panic!("an accessor failed with another error than WrongColumn: {e}"),
    }
}

macro_rules! all_reads {
    ($r:expr, $c:expr) => {{
        let r = $r;
        let c = $c;
        let reads: Reads = vec![
            ("i64", norm(r.i64(c).map(Some), |v| v as u64)),
            ("i64_opt", norm(r.i64_opt(c), |v| v as u64)),
            ("f64", norm(r.f64(c).map(Some), f64::to_bits)),
            ("f64_opt", norm(r.f64_opt(c), f64::to_bits)),
            ("timestamp", norm(r.timestamp(c).map(Some), |v| v as u64)),
            ("timestamp_opt", norm(r.timestamp_opt(c), |v| v as u64)),
        ];
        reads
    }};
}

fn check_reads(what: &str, values: &[Value], cols: &[Column], idxs: &[usize], reads: &[Reads]) {
    for (k, (&ci, rs)) in idxs.iter().zip(reads).enumerate() {
        let ty = cols[ci].ty;
        let value = &values[k];
        for (name, got) in rs {
            let (want, opt) = match *name {
                "i64" => (ColumnType::I64, false),
                "i64_opt" => (ColumnType::I64, true),
                "f64" => (ColumnType::F64, false),
                "f64_opt" => (ColumnType::F64, true),
                "timestamp" => (ColumnType::Timestamp, false),
                _ => (ColumnType::Timestamp, true),
            };
            let expected = expect_typed(value, ty, want, opt);
            match (got, expected) {
                (Ok(g), Ok(e)) => assert_eq!(*g, e, "{what}: {name} of column {}", cols[ci].name),
                (Err(_), Err(())) => {}
                (g, e) => panic!(
                    "{what}: {name} of column {} ({value:?}) read {g:?}, expected {e:?}",
                    cols[ci].name
                ),
            }
        }
    }
}

#[test]
fn every_typed_accessor_agrees_with_the_values_on_rows_stored_before_and_after_columns_were_added()
{
    watchdog(Duration::from_secs(240), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table(
            "g",
            vec![
                Column::new("a", ColumnType::I64),
                Column::new("b", ColumnType::F64),
                Column::nullable("c", ColumnType::Timestamp),
            ],
        )
        .unwrap();
        let gen1 = |i: i64| {
            vec![
                Value::I64(i64::MIN + i),
                Value::F64(if i % 2 == 0 { -0.0 } else { i as f64 / 7.0 }),
                if i % 3 == 0 {
                    Value::Null
                } else {
                    Value::Timestamp(i64::MAX - i)
                },
            ]
        };
        let t = db.begin().unwrap();
        for i in 0..300 {
            t.insert("g", gen1(i)).unwrap();
        }
        t.commit().unwrap();
        db.add_column(
            "g",
            Column::new("d", ColumnType::I64).with_default(Value::I64(-7)),
        )
        .unwrap();
        let t = db.begin().unwrap();
        for i in 300..600 {
            let mut r = gen1(i);
            r.push(Value::I64(i));
            t.insert("g", r).unwrap();
        }
        t.commit().unwrap();
        db.add_column("g", Column::nullable("e", ColumnType::F64))
            .unwrap();
        db.add_column(
            "g",
            Column::new("f", ColumnType::Timestamp).with_default(Value::Timestamp(123)),
        )
        .unwrap();
        db.add_column(
            "g",
            Column::nullable("h", ColumnType::I64).with_default(Value::I64(9)),
        )
        .unwrap();
        let t = db.begin().unwrap();
        for i in 600..900 {
            let mut r = gen1(i);
            r.push(Value::I64(i));
            r.push(if i % 2 == 0 {
                Value::Null
            } else {
                Value::F64(0.5)
            });
            r.push(Value::Timestamp(-i));
            r.push(if i % 4 == 0 {
                Value::Null
            } else {
                Value::I64(i * 3)
            });
            t.insert("g", r).unwrap();
        }
        t.commit().unwrap();

        let table = db.table_handle("g").unwrap();
        let cols: Vec<Column> = table.info().columns.clone();
        let handles: Vec<_> = cols
            .iter()
            .map(|c| table.column(&c.name).unwrap())
            .collect();
        let all: Vec<usize> = (0..cols.len()).collect();
        let t = db.read().unwrap();
        // Borrowed rows.
        let mut n = 0;
        t.scan_each("g", |r| {
            let values = r.to_row()?;
            let reads: Vec<Reads> = handles.iter().map(|&c| all_reads!(&r, c)).collect();
            check_reads("borrowed", &values, &cols, &all, &reads);
            let by_name: Vec<Reads> = cols
                .iter()
                .map(|c| all_reads!(&r, c.name.as_str()))
                .collect();
            check_reads("borrowed by name", &values, &cols, &all, &by_name);
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 900);
        // Scanned rows, whole and projected (every other column, reversed).
        let proj: Vec<usize> = (0..cols.len()).rev().step_by(2).collect();
        let proj_handles: Vec<_> = proj.iter().map(|&i| handles[i]).collect();
        let mut scanned = Vec::new();
        for (rid, r) in t.scan("g").unwrap().map(|r| r.unwrap()) {
            let reads: Vec<Reads> = handles.iter().map(|&c| all_reads!(&r, c)).collect();
            check_reads("scanned", r.values(), &cols, &all, &reads);
            scanned.push((rid, r));
        }
        for (_, r) in t
            .scan("g")
            .unwrap()
            .project(&proj_handles)
            .map(|r| r.unwrap())
        {
            let reads: Vec<Reads> = proj_handles.iter().map(|&c| all_reads!(&r, c)).collect();
            check_reads("projected", r.values(), &cols, &proj, &reads);
            // A column left out of the projection is an error, not a value.
            for (i, &c) in handles.iter().enumerate() {
                if !proj.contains(&i) {
                    assert!(matches!(r.i64_opt(c), Err(EngineError::WrongColumn { .. })));
                    assert!(matches!(r.f64_opt(c), Err(EngineError::WrongColumn { .. })));
                    assert!(matches!(
                        r.timestamp_opt(c),
                        Err(EngineError::WrongColumn { .. })
                    ));
                }
            }
        }
        // Rows changed in place (values, no longer the scanned tuple).
        for (_, r) in scanned.iter_mut().take(50) {
            let _ = &mut r[0];
            let values = r.values().to_vec();
            let reads: Vec<Reads> = handles.iter().map(|&c| all_reads!(&*r, c)).collect();
            check_reads("changed in place", &values, &cols, &all, &reads);
        }
    });
}
