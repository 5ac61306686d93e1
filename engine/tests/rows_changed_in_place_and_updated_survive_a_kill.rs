//! A process that updates rows by changing scanned rows in place
//! (`row[i] = ...`) and writing them back, while another thread of it
//! scans the table with owned iterators held between rows, is killed with
//! SIGKILL: reopened, every round whose commit returned is there whole,
//! and no round is there in part.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, Value};

const CHILD_DIR: &str = "ROWS_CHANGED_IN_PLACE_CHILD_DIR";
const ROWS: i64 = 400;
/// Round `k` changes the rows whose id is `k` modulo this.
const GROUPS: i64 = 7;

fn body(id: i64, n: i64) -> String {
    format!("{id}/{n}/{}", "c".repeat(((id * 13 + n) % 50) as usize))
}

fn options() -> engine::Options {
    small_options().pool_buffers(24)
}

/// Every row's `n` by id, each row checked whole.
fn ns(db: &Database) -> BTreeMap<i64, i64> {
    common::n_by_id(db, "t", body)
}

#[test]
fn rounds_of_in_place_updates_survive_sigkill_whole_or_not_at_all() {
    watchdog(Duration::from_secs(90), || {
        let dir = tempfile::tempdir().unwrap();
        let mut all_committed = BTreeSet::new();
        for round in 0..2 {
            let committed = common::committed_before_sigkill(
                "in_place_child",
                CHILD_DIR,
                dir.path(),
                15 + round * 10,
                Duration::from_secs(60),
            );
            all_committed.extend(committed);
            let db = Database::open(dir.path(), options()).unwrap();
            let got = ns(&db);
            assert_eq!(got.len(), ROWS as usize, "round {round}");
            let last = *all_committed.iter().max().unwrap();
            for g in 0..GROUPS {
                // The group's latest round reported committed, or a later
                // one that committed before its report got out.
                let want = all_committed
                    .iter()
                    .filter(|&&k| k % GROUPS == g)
                    .max()
                    .copied()
                    .unwrap_or(0);
                let group: BTreeSet<i64> = got
                    .iter()
                    .filter(|(id, _)| *id % GROUPS == g)
                    .map(|(_, n)| *n)
                    .collect();
                assert_eq!(
                    group.len(),
                    1,
                    "round {round}: group {g} in part: {group:?}"
                );
                let n = *group.iter().next().unwrap();
                assert!(
                    n == want || (n == last + 1 && n % GROUPS == g),
                    "round {round}: group {g} has round {n}, committed {want} (last {last})"
                );
                // Recovered: committed, reported or not.
                if n > 0 {
                    all_committed.insert(n);
                }
            }
            db.close().unwrap();
        }
    });
}

/// The killed child: round after round, changes a group's rows in place
/// as an owned scan hands them out and updates them; prints each round
/// once its commit returned. Another thread keeps scanning.
#[test]
#[ignore = "run as a child process by rounds_of_in_place_updates_survive_sigkill_whole_or_not_at_all"]
fn in_place_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let db = Database::open(&dir, options()).unwrap();
    if db.table("t").is_err() {
        db.create_table(
            "t",
            vec![
                Column::new("id", ColumnType::I64),
                Column::new("n", ColumnType::I64),
                Column::new("body", ColumnType::Text),
            ],
        )
        .unwrap();
        let w = db.begin().unwrap();
        for id in 0..ROWS {
            w.insert(
                "t",
                vec![Value::I64(id), Value::I64(0), Value::text(body(id, 0))],
            )
            .unwrap();
        }
        w.commit().unwrap();
    }
    let base = ns(&db).values().max().copied().unwrap_or(0) + 1;
    let stop = Arc::new(AtomicBool::new(false));
    let scanner = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let r = db.read().unwrap();
                let mut held = Vec::new();
                for x in r.scan("t").unwrap() {
                    let (_, mut row) = x.unwrap();
                    let (id, n) = (row.i64("id").unwrap(), row.i64("n").unwrap());
                    assert_eq!(row.text("body").unwrap(), body(id, n));
                    if id % 50 == 0 {
                        row[1] = Value::I64(-n);
                        held.push(row);
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
        })
    };
    let mut out = std::io::stdout();
    let deadline = Instant::now() + Duration::from_secs(60);
    for k in base.. {
        if Instant::now() > deadline {
            break;
        }
        let w = db.begin().unwrap();
        for x in w.scan("t").unwrap() {
            let (rid, mut row) = x.unwrap();
            let id = row.i64("id").unwrap();
            if id % GROUPS != k % GROUPS {
                continue;
            }
            row[1] = Value::I64(k);
            row[2] = Value::text(body(id, k));
            w.update("t", rid, row).unwrap();
        }
        w.commit().unwrap();
        writeln!(out, "COMMITTED {k}").unwrap();
        out.flush().unwrap();
        if k % 10 == 5 {
            db.checkpoint().unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    scanner.join().unwrap();
}
