//! Vacuum of a table with indexes: the heap's first pass finds the dead
//! tuples, the indexes drop exactly their entries, then the heap frees
//! their line pointers; an older snapshot keeps both alive; reused line
//! pointers never confuse an index; rollbacks racing vacuums do not wait
//! and leave no stale entries.

mod common;

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, Value};

fn range_ids(t: &engine::Transaction, index: &str) -> Vec<i64> {
    t.index_range(index, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap().1[0].as_i64().unwrap())
        .collect()
}

#[test]
fn vacuum_removes_dead_entries_then_heap_tuples() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        db.create_index("t_name", "t", "name", false).unwrap();
        db.bulk_load(
            "t",
            (0..2000).map(|i| row(i, &format!("k{}", i % 10))),
            |_| {},
        )
        .unwrap();

        // Delete the even ids, move 1..=99 odd ids to 10_000 + id.
        let t = db.begin().unwrap();
        for i in (0..2000).step_by(2) {
            assert!(t.delete_by_key("t", "id", &Value::I64(i)).unwrap());
        }
        for i in (1..100).step_by(2) {
            t.update_by_key("t", "id", &Value::I64(i), row(10_000 + i, "moved"))
                .unwrap()
                .unwrap();
        }
        let old = db.begin().unwrap();
        t.commit().unwrap();

        // An older snapshot holds everything back.
        let r = db.vacuum("t").unwrap();
        assert_eq!(r.heap.pruned.tuples_removed, 0, "{r:?}");
        assert!(r.indexes.iter().all(|(_, s)| s.removed == 0), "{r:?}");
        assert_eq!(range_ids(&old, "t_id"), (0..2000).collect::<Vec<_>>());
        drop(old);

        let r = db.vacuum("t").unwrap();
        assert_eq!(r.heap.pruned.tuples_removed, 1050, "{r:?}");
        assert_eq!(r.indexes.len(), 2);
        for (name, s) in &r.indexes {
            assert_eq!(s.removed, 1050, "{name}: {s:?}");
            assert_eq!(s.remaining, 1000, "{name}: {s:?}");
        }
        assert!(r.heap.used_ring);
        assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
        let t = db.begin().unwrap();
        let mut want: Vec<i64> = (101..2000).step_by(2).collect();
        want.extend((1..100).step_by(2).map(|i| 10_000 + i));
        assert_eq!(range_ids(&t, "t_id"), want);
        assert_eq!(
            t.index_lookup("t_name", &Value::from(b"moved".as_slice()))
                .unwrap()
                .len(),
            50
        );
        assert_eq!(
            t.index_lookup("t_name", &Value::from(b"k0".as_slice()))
                .unwrap()
                .len(),
            0
        );
        assert_eq!(
            t.index_lookup("t_name", &Value::from(b"k1".as_slice()))
                .unwrap()
                .len(),
            190
        );
        drop(t);

        // New rows reuse the freed line pointers; the indexes stay exact.
        let t = db.begin().unwrap();
        for i in (0..2000).step_by(2) {
            t.insert("t", row(i, "k0")).unwrap();
        }
        t.commit().unwrap();
        assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
        let t = db.begin().unwrap();
        assert_eq!(
            t.index_lookup("t_name", &Value::from(b"k0".as_slice()))
                .unwrap()
                .len(),
            1000
        );
        assert_eq!(range_ids(&t, "t_id").len(), 2000);
        drop(t);
        // A second vacuum finds nothing to do.
        let r = db.vacuum("t").unwrap();
        assert_eq!(r.heap.pruned.tuples_removed, 0);
        assert!(r.indexes.iter().all(|(_, s)| s.removed == 0));
        db.close().unwrap();
    });
}

#[test]
fn rollbacks_during_vacuums_leave_no_stale_entries() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        std::thread::scope(|s| {
            let db = &db;
            s.spawn(move || {
                for round in 0..200i64 {
                    let t = db.begin().unwrap();
                    for j in 0..5 {
                        t.insert("t", row(round * 10 + j, "x")).unwrap();
                    }
                    if round % 2 == 0 {
                        t.rollback().unwrap();
                    } else {
                        t.commit().unwrap();
                    }
                }
            });
            s.spawn(move || {
                for _ in 0..20 {
                    db.vacuum("t").unwrap();
                }
            });
        });
        db.vacuum("t").unwrap();
        assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
        let t = db.begin().unwrap();
        assert_eq!(range_ids(&t, "t_id").len(), 500);
        drop(t);
        db.close().unwrap();
    });
}

/// Writers insert, update and delete, rolling back two rounds in three,
/// while another thread vacuums in a loop. Nothing makes a rollback wait:
/// some rollbacks start and finish inside one running vacuum. Afterwards the
/// indexes verify clean and hold exactly the committed rows.
#[test]
fn rollbacks_race_vacuums_without_waiting() {
    watchdog(Duration::from_secs(90), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        db.create_index("t_name", "t", "name", false).unwrap();
        db.bulk_load("t", (0..3000).map(|i| row(i, "base")), |_| {})
            .unwrap();
        let started = AtomicU64::new(0);
        let finished = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let mut model: BTreeSet<i64> = (0..3000).collect();
        let mut inside_a_vacuum = 0u64;
        let mut rollbacks = 0u64;
        std::thread::scope(|s| {
            let (db, started, finished, stop) = (&db, &started, &finished, &stop);
            s.spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    started.fetch_add(1, Ordering::AcqRel);
                    db.vacuum("t").unwrap();
                    finished.fetch_add(1, Ordering::AcqRel);
                }
            });
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut next_id = 10_000i64;
            for round in 0u64.. {
                if (round >= 300 && inside_a_vacuum > 0) || Instant::now() > deadline {
                    break;
                }
                let commit = round % 3 == 0;
                let t = db.begin().unwrap();
                let mut added = Vec::new();
                for _ in 0..4 {
                    t.insert("t", row(next_id, "new")).unwrap();
                    added.push(next_id);
                    next_id += 1;
                }
                let existing: Vec<i64> = model
                    .iter()
                    .copied()
                    .skip(round as usize % 97)
                    .take(3)
                    .collect();
                t.update_by_key("t", "id", &Value::I64(existing[0]), row(existing[0], "upd"))
                    .unwrap()
                    .unwrap();
                assert!(
                    t.delete_by_key("t", "id", &Value::I64(existing[1]))
                        .unwrap()
                );
                if commit {
                    t.commit().unwrap();
                    model.extend(added);
                    model.remove(&existing[1]);
                } else {
                    let s0 = started.load(Ordering::Acquire);
                    let f0 = finished.load(Ordering::Acquire);
                    t.rollback().unwrap();
                    let f1 = finished.load(Ordering::Acquire);
                    let s1 = started.load(Ordering::Acquire);
                    rollbacks += 1;
                    if s0 == s1 && f0 == f1 && s0 == f0 + 1 {
                        inside_a_vacuum += 1;
                    }
                }
            }
            stop.store(true, Ordering::Release);
        });
        let vacuums = finished.load(Ordering::Acquire);
        eprintln!(
            "{rollbacks} rollbacks, {inside_a_vacuum} of them inside a running vacuum; {vacuums} vacuums"
        );
        assert!(vacuums > 0);
        assert!(
            inside_a_vacuum > 0,
            "no rollback finished while a vacuum ran ({rollbacks} rollbacks, {vacuums} vacuums)"
        );
        assert_eq!(db.verify_indexes("t").unwrap(), vec![], "after the race");
        // The racing vacuum may have removed everything already; one more
        // rollback leaves a dead tuple the last vacuum must remove.
        let t = db.begin().unwrap();
        t.insert("t", row(9_999, "rolled back")).unwrap();
        t.rollback().unwrap();
        let r = db.vacuum("t").unwrap();
        assert!(r.heap.pruned.tuples_removed > 0, "{r:?}");
        assert_eq!(
            db.verify_indexes("t").unwrap(),
            vec![],
            "after a last vacuum"
        );
        let t = db.begin().unwrap();
        let want: Vec<i64> = model.iter().copied().collect();
        assert_eq!(range_ids(&t, "t_id"), want);
        let by_name: usize = ["base", "new", "upd"]
            .iter()
            .map(|n| {
                t.index_lookup("t_name", &Value::from(n.as_bytes()))
                    .unwrap()
                    .len()
            })
            .sum();
        assert_eq!(by_name, model.len());
        drop(t);
        db.close().unwrap();
    });
}
