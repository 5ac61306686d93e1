//! Unique indexes under concurrency: threads inserting overlapping keys, and
//! then updating rows onto overlapping keys, leave at most one committed row
//! per key; the losers get a unique violation or a conflict (never a
//! duplicate), and `verify_indexes` is clean.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, EngineError, Value};
use rand::RngExt;

fn ids(db: &Database) -> Vec<i64> {
    let t = db.begin().unwrap();
    let mut v: Vec<i64> = t
        .scan("t")
        .unwrap()
        .map(|r| r.unwrap().1[0].as_i64().unwrap())
        .collect();
    v.sort();
    v
}

fn expected_loss(e: &EngineError) -> bool {
    matches!(
        e,
        EngineError::UniqueViolation { .. }
            | EngineError::UniqueConflict { .. }
            | EngineError::WriteConflict { .. }
            | EngineError::TransactionAborted { .. }
            | EngineError::RowNotVisible { .. }
    )
}

#[test]
fn at_most_one_committed_row_per_key() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(
            dir.path(),
            small_options()
                .pool_buffers(128)
                .autovacuum(true)
                .autovacuum_naptime(std::time::Duration::from_millis(10)),
        )
        .unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        const KEYS: i64 = 150;
        // Phase 1: 4 threads insert every key (in different orders), each
        // in its own transaction held open across a yield.
        let wins: Vec<BTreeMap<i64, usize>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|th| {
                    let db = &db;
                    s.spawn(move || {
                        let mut won = BTreeMap::new();
                        let mut rng = rand::rng();
                        for n in 0..KEYS {
                            let k = if th % 2 == 0 { n } else { KEYS - 1 - n };
                            let t = db.begin().unwrap();
                            match t.insert("t", row(k, &format!("thread {th}"))) {
                                Ok(_) => {
                                    if rng.random_range(0..4) == 0 {
                                        std::thread::yield_now();
                                    }
                                    t.commit().unwrap();
                                    *won.entry(k).or_insert(0) += 1;
                                }
                                Err(e) => {
                                    assert!(expected_loss(&e), "{e}");
                                    if matches!(e, EngineError::UniqueConflict { .. }) {
                                        *won.entry(-1).or_insert(0) += 1;
                                    }
                                    t.rollback().unwrap();
                                }
                            }
                        }
                        won
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut total: BTreeMap<i64, usize> = BTreeMap::new();
        let conflicts: usize = wins.iter().map(|w| w.get(&-1).copied().unwrap_or(0)).sum();
        eprintln!("conflicts with a transaction in progress: {conflicts}");
        for w in wins.iter().map(|w| w.iter().filter(|(k, _)| **k >= 0)) {
            for (k, n) in w {
                *total.entry(*k).or_insert(0) += n;
            }
        }
        assert!(total.values().all(|&n| n == 1), "a key committed twice");
        assert_eq!(ids(&db), total.keys().copied().collect::<Vec<_>>());
        assert!(total.len() as i64 == KEYS, "every key has its winner");
        assert_eq!(db.verify_indexes("t").unwrap(), vec![]);

        // Phase 2: threads move random rows onto a small range of keys.
        std::thread::scope(|s| {
            for _ in 0..3 {
                let db = &db;
                s.spawn(move || {
                    let mut rng = rand::rng();
                    for _ in 0..150 {
                        let from = rng.random_range(0..KEYS);
                        let to = 1000 + rng.random_range(0..30);
                        let t = db.begin().unwrap();
                        match t.update_by_key("t", "id", &Value::I64(from), row(to, "moved")) {
                            Ok(_) => {
                                std::thread::yield_now();
                                match t.commit() {
                                    Ok(_) => {}
                                    Err(e) => assert!(expected_loss(&e), "{e}"),
                                }
                            }
                            Err(e) => {
                                assert!(expected_loss(&e), "{e}");
                                t.rollback().unwrap();
                            }
                        }
                    }
                });
            }
        });
        let after = ids(&db);
        let mut dedup = after.clone();
        dedup.dedup();
        assert_eq!(after, dedup, "a duplicate key committed");
        assert_eq!(after.len() as i64, KEYS, "no row lost or doubled");
        assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
        db.vacuum("t").unwrap();
        assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
        db.close().unwrap();
    });
}
