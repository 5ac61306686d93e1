//! Owned scans (`txn.scan(t)`) racing a writer that inserts, updates and
//! deletes rows and vacuums the table, through a pool much smaller than
//! the table: within one snapshot, a filtered scan (whose copies are a
//! span or per tuple, by selectivity) and a projected one hand out exactly
//! the rows of the unfiltered scan that pass, each whole; rows are sent to
//! another thread and checked and dropped there while the scans go on, and
//! some iterators are dropped midway.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, OwnedRow, Value};

fn body(id: i64, generation: i64) -> String {
    format!(
        "{id}:{generation}:{}",
        "z".repeat(((id + generation) % 40) as usize)
    )
}

fn values(id: i64, generation: i64) -> Vec<Value> {
    vec![
        Value::I64(id),
        Value::I64(generation),
        Value::text(body(id, generation)),
    ]
}

/// A row read whole: its id and generation, its body checked against them.
fn check(row: &OwnedRow) -> (i64, i64) {
    let (id, generation) = (row.i64("id").unwrap(), row.i64("gen").unwrap());
    assert_eq!(row.text("body").unwrap(), body(id, generation));
    assert_eq!(**row, values(id, generation));
    (id, generation)
}

#[test]
fn filtered_and_projected_scans_agree_with_the_full_scan_under_writers_and_vacuum() {
    watchdog(Duration::from_secs(120), || {
        let db = Database::open_temporary(small_options().pool_buffers(24)).unwrap();
        db.create_table(
            "t",
            vec![
                Column::new("id", ColumnType::I64),
                Column::new("gen", ColumnType::I64),
                Column::new("body", ColumnType::Text),
            ],
        )
        .unwrap();
        let w = db.begin().unwrap();
        for id in 0..1500 {
            w.insert("t", values(id, 0)).unwrap();
        }
        w.commit().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut round = 0i64;
                let mut next_id = 1500;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    let w = db.begin().unwrap();
                    let rows: Vec<_> = w
                        .scan("t")
                        .unwrap()
                        .map(|r| r.unwrap())
                        .filter(|(_, r)| (r.i64("id").unwrap() + round) % 11 == 0)
                        .collect();
                    for (n, (rid, row)) in rows.into_iter().enumerate() {
                        let (id, generation) = check(&row);
                        if n % 3 == 0 {
                            w.delete("t", rid).unwrap();
                        } else {
                            w.update("t", rid, values(id, generation + 1)).unwrap();
                        }
                    }
                    for _ in 0..40 {
                        w.insert("t", values(next_id, 0)).unwrap();
                        next_id += 1;
                    }
                    w.commit().unwrap();
                    if round % 4 == 0 {
                        db.vacuum("t").unwrap();
                    }
                }
                round
            })
        };
        let (tx, rx) = std::sync::mpsc::channel::<OwnedRow>();
        let dropper = std::thread::spawn(move || {
            let mut n = 0u64;
            for row in rx {
                check(&row);
                n += 1;
            }
            n
        });
        let body_col = db.table_handle("t").unwrap().column("body").unwrap();
        let id_col = db.table_handle("t").unwrap().column("id").unwrap();
        let scanners: Vec<_> = (0..2u64)
            .map(|s| {
                let (db, tx) = (db.clone(), tx.clone());
                std::thread::spawn(move || {
                    let deadline = Instant::now() + Duration::from_millis(1500);
                    let mut rounds = 0;
                    while Instant::now() < deadline {
                        rounds += 1;
                        let r = db.read().unwrap();
                        let full: BTreeMap<_, _> = r
                            .scan("t")
                            .unwrap()
                            .map(|x| {
                                let (rid, row) = x.unwrap();
                                let (id, generation) = check(&row);
                                tx.send(row).unwrap();
                                (rid, (id, generation))
                            })
                            .collect();
                        for every in [2i64, 3, 29, 1000] {
                            let want: Vec<_> = full
                                .iter()
                                .filter(|(_, (id, _))| id % every == 0)
                                .map(|(rid, v)| (*rid, *v))
                                .collect();
                            let got: Vec<_> = r
                                .scan("t")
                                .unwrap()
                                .matching(move |x| Ok(x.i64("id")? % every == 0))
                                .map(|x| {
                                    let (rid, row) = x.unwrap();
                                    (rid, check(&row))
                                })
                                .collect();
                            assert_eq!(got, want, "scanner {s}: filter 1 in {every}");
                            let got: Vec<_> = r
                                .scan("t")
                                .unwrap()
                                .project(&[body_col, id_col])
                                .matching(move |x| Ok(x.i64("id")? % every == 1))
                                .map(|x| {
                                    let (rid, row) = x.unwrap();
                                    let id = row.i64(id_col).unwrap();
                                    let generation = full[&rid].1;
                                    assert_eq!(
                                        *row,
                                        vec![Value::text(body(id, generation)), Value::I64(id)]
                                    );
                                    (rid, id)
                                })
                                .collect();
                            let want: Vec<_> = full
                                .iter()
                                .filter(|(_, (id, _))| id % every == 1)
                                .map(|(rid, (id, _))| (*rid, *id))
                                .collect();
                            assert_eq!(got, want, "scanner {s}: projected, 1 in {every}");
                        }
                        // An iterator dropped midway, with rows in hand.
                        let mut it = r.scan("t").unwrap();
                        for _ in 0..(rounds * 37 % 500) {
                            tx.send(it.next().unwrap().unwrap().1).unwrap();
                        }
                        drop(it);
                        r.commit().unwrap();
                    }
                    rounds
                })
            })
            .collect();
        drop(tx);
        for s in scanners {
            assert!(s.join().unwrap() > 0);
        }
        stop.store(true, Ordering::Relaxed);
        assert!(writer.join().unwrap() > 0);
        assert!(dropper.join().unwrap() > 0);
    });
}
