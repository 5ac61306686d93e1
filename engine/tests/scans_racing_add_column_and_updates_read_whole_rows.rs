//! Scans racing `add_column`, updates and vacuum: a writer updates rows
//! (each version's columns derived from its id and generation, so a row
//! read whole can be checked alone), another thread adds columns (NOT
//! NULL with a default, or nullable), and readers scan borrowed and owned
//! (plain, filtered, projected with handles taken before the columns were
//! added), reading the fixed-width columns through handles of every age
//! and by name. Every row read is one whole version: its check column
//! matches, its byte string is its own, and an added column reads its
//! default (rows stored before it) or the version's own value; a handle
//! of a column newer than the row's table definition (or left out of its
//! projection) is `WrongColumn`.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{small_options, watchdog};
use engine::{Col, Column, ColumnType, Database, EngineError, OwnedRow, RowRef, Value};

const ROWS: i64 = 400;
const ADDED: usize = 6;
const BASE: usize = 4;

fn blob(id: i64, g: i64) -> Vec<u8> {
    vec![(id + g) as u8; ((id * 7 + g) % 50) as usize]
}

/// The value version `g` of row `id` has in added column `k`.
fn added_value(id: i64, g: i64, k: usize) -> i64 {
    id * 1_000_000 + g * 10 + k as i64
}

/// The default added column `k` reads in rows stored before it.
fn added_default(k: usize) -> Option<i64> {
    k.is_multiple_of(2).then_some(-(k as i64) - 1)
}

fn version(id: i64, g: i64, columns: usize) -> Vec<Value> {
    let mut v = vec![
        Value::I64(id),
        Value::I64(g),
        Value::I64(id * 31 + g),
        Value::Bytes(blob(id, g)),
    ];
    for k in 0..columns - BASE {
        v.push(Value::I64(added_value(id, g, k)));
    }
    v
}

/// The problems of one row read through `i64_opt`/`bytes` (`read`), whose
/// table definition has `defined` columns, with the handles `handles`.
fn check(
    defined: usize,
    handles: &[Col],
    i64_opt: impl Fn(Col) -> Result<Option<i64>, EngineError>,
    bytes: impl Fn(Col) -> Result<Vec<u8>, EngineError>,
) -> Vec<String> {
    let mut bad = Vec::new();
    let (Ok(Some(id)), Ok(Some(g)), Ok(Some(chk))) = (
        i64_opt(handles[0]),
        i64_opt(handles[1]),
        i64_opt(handles[2]),
    ) else {
        return vec![format!(
            "base columns: {:?} {:?} {:?}",
            i64_opt(handles[0]),
            i64_opt(handles[1]),
            i64_opt(handles[2])
        )];
    };
    if chk != id * 31 + g {
        bad.push(format!("row {id} gen {g}: check {chk}"));
    }
    match bytes(handles[3]) {
        Ok(b) if b == blob(id, g) => {}
        other => bad.push(format!("row {id} gen {g}: bytes {other:?}")),
    }
    for (k, h) in handles[BASE..].iter().enumerate() {
        let got = i64_opt(*h);
        let ok = match &got {
            Err(EngineError::WrongColumn { .. }) => h.index() >= defined,
            Ok(v) => {
                h.index() < defined && (*v == added_default(k) || *v == Some(added_value(id, g, k)))
            }
            Err(_) => false,
        };
        if !ok {
            bad.push(format!(
                "row {id} gen {g}: added column {k} ({defined} defined): {got:?}"
            ));
        }
    }
    bad
}

#[test]
fn scans_racing_add_column_and_updates_read_whole_rows() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table(
            "r",
            vec![
                Column::new("id", ColumnType::I64),
                Column::new("g", ColumnType::I64),
                Column::new("chk", ColumnType::I64),
                Column::new("b", ColumnType::Bytes),
            ],
        )
        .unwrap();
        let t = db.begin().unwrap();
        let mut ids = Vec::new();
        for id in 0..ROWS {
            ids.push(t.insert("r", version(id, 0, BASE)).unwrap());
        }
        t.commit().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + Duration::from_secs(3);

        let writer = {
            let db = db.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut g = 1;
                let mut ids = ids;
                while !stop.load(Ordering::Relaxed) {
                    let n = db.table("r").unwrap().columns.len();
                    let t = db.begin().unwrap();
                    let mut done = true;
                    for id in (g % 7..ROWS).step_by(7) {
                        match t.update("r", ids[id as usize], version(id, g, n)) {
                            Ok(new) => ids[id as usize] = new,
                            // A column was added meanwhile.
                            Err(EngineError::WrongColumnCount { .. }) => {
                                done = false;
                                break;
                            }
                            Err(e) => panic!("update: {e}"),
                        }
                    }
                    if done {
                        t.commit().unwrap();
                    } else {
                        t.rollback().unwrap();
                        // The ids of the rolled-back updates are stale:
                        // find each row's visible version again.
                        let r = db.read().unwrap();
                        for x in r.scan("r").unwrap() {
                            let (rid, row) = x.unwrap();
                            ids[row.i64("id").unwrap() as usize] = rid;
                        }
                    }
                    if g % 5 == 0 {
                        db.vacuum("r").unwrap();
                    }
                    g += 1;
                }
            })
        };
        let adder = {
            let db = db.clone();
            std::thread::spawn(move || {
                for k in 0..ADDED {
                    std::thread::sleep(Duration::from_millis(300));
                    let c = match added_default(k) {
                        Some(d) => Column::new(format!("a{k}"), ColumnType::I64)
                            .with_default(Value::I64(d)),
                        None => Column::nullable(format!("a{k}"), ColumnType::I64),
                    };
                    db.add_column("r", c).unwrap();
                }
            })
        };
        let readers: Vec<_> = (0..2)
            .map(|who| {
                let db = db.clone();
                std::thread::spawn(move || {
                    let mut bad = Vec::new();
                    let mut kept: Vec<(usize, OwnedRow)> = Vec::new();
                    let mut rounds = 0;
                    while Instant::now() < deadline {
                        rounds += 1;
                        let early = db.table_handle("r").unwrap().columns();
                        let r = db.read().unwrap();
                        let iter = r.scan("r").unwrap();
                        let iter = match rounds % 3 {
                            0 => iter.matching(|row| Ok(row.i64("id")? % 2 == 0)),
                            1 => iter.project(&early),
                            _ => iter,
                        };
                        let mut n = 0;
                        for x in iter {
                            let (_, row) = x.unwrap();
                            n += 1;
                            // Handles of every column there is now, taken
                            // after the scan began.
                            let late = db.table_handle("r").unwrap().columns();
                            // A projected row reads only the columns
                            // projected (`early`); its table may have more.
                            let mut defined = row.table().columns.len();
                            if rounds % 3 == 1 {
                                defined = defined.min(early.len());
                            }
                            bad.extend(check(
                                defined,
                                &late,
                                |c| row.i64_opt(c),
                                |c| row.bytes(c).map(<[u8]>::to_vec),
                            ));
                            if n % 50 == 0 {
                                kept.push((defined, row));
                            }
                        }
                        assert!(
                            n == ROWS as usize || (rounds % 3 == 0 && n == ROWS as usize / 2),
                            "reader {who}: {n} rows"
                        );
                        let handles = db.table_handle("r").unwrap().columns();
                        r.scan_each("r", |row: RowRef<'_>| {
                            let defined = row.table().columns.len();
                            bad.extend(check(
                                defined,
                                &handles,
                                |c| row.i64_opt(c),
                                |c| row.bytes(c).map(<[u8]>::to_vec),
                            ));
                            Ok(())
                        })
                        .unwrap();
                    }
                    // Rows kept across the columns added since.
                    let handles = db.table_handle("r").unwrap().columns();
                    for (defined, row) in &kept {
                        bad.extend(check(
                            *defined,
                            &handles,
                            |c| row.i64_opt(c),
                            |c| row.bytes(c).map(<[u8]>::to_vec),
                        ));
                    }
                    (rounds, bad)
                })
            })
            .collect();
        let mut bad = Vec::new();
        for r in readers {
            let (rounds, b) = r.join().unwrap();
            assert!(rounds > 2, "{rounds} rounds");
            bad.extend(b);
        }
        adder.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        assert_eq!(db.table("r").unwrap().columns.len(), BASE + ADDED);
        for b in bad.iter().take(20) {
            println!("{b}");
        }
        assert!(bad.is_empty(), "{} bad reads", bad.len());
    });
}
