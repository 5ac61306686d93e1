//! Four writers commit rows under two values of a deduplicated non-unique
//! index (thousands of rows per value: posting lists grow, take row ids
//! between theirs, split, and leaves split) while three readers read the
//! index: lookups of a value, ranges ascending and descending, copied and
//! in place, on a 32-buffer pool. Every read returns each row at most once,
//! in (value, row id) order, every row committed before the read began,
//! and no row that was never committed.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use engine::{Column, ColumnType, Database, KeyRange, Options, RowId, Value};

const WRITERS: i64 = 4;
const PER_WRITER: i64 = 2_000;

fn options() -> Options {
    Options::new()
        .pool_buffers(32)
        .autovacuum(false)
        .checkpointer(false)
        .bgwriter(None)
}

fn g_of(id: i64) -> i64 {
    id % 2
}

type Committed = Arc<Mutex<BTreeMap<i64, RowId>>>;

/// (value, row id, id) of a row read through the index.
type Read = (i64, RowId, i64);

#[track_caller]
fn check(
    what: &str,
    got: &[Read],
    before: &BTreeMap<i64, RowId>,
    after: &BTreeMap<i64, RowId>,
    g: Option<i64>,
) {
    for w in got.windows(2) {
        assert!(
            (w[0].0, w[0].1) < (w[1].0, w[1].1),
            "{what}: {:?} then {:?}",
            w[0],
            w[1]
        );
    }
    let ids: HashSet<i64> = got.iter().map(|r| r.2).collect();
    assert_eq!(ids.len(), got.len(), "{what}: a row returned twice");
    for (id, _) in before
        .iter()
        .filter(|(id, _)| g.is_none_or(|g| g_of(**id) == g))
    {
        assert!(ids.contains(id), "{what}: committed row {id} missing");
    }
    for &(gv, rid, id) in got {
        assert_eq!(gv, g_of(id), "{what}: row {id} under the wrong value");
        assert_eq!(
            after.get(&id),
            Some(&rid),
            "{what}: row {id} was never inserted at {rid:?}"
        );
    }
}

#[test]
fn readers_see_every_row_committed_before_them_once_in_order_while_writers_share_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    db.create_table(
        "t",
        vec![
            Column::new("id", ColumnType::I64),
            Column::new("g", ColumnType::I64),
        ],
    )
    .unwrap();
    db.create_index("t_g", "t", "g", false).unwrap();
    let committed: Committed = Arc::new(Mutex::new(BTreeMap::new()));
    // Rows inserted by a transaction that may have committed (recorded
    // before the commit; a commit is seen by readers before its writer
    // records it in `committed`).
    let attempted: Committed = Arc::new(Mutex::new(BTreeMap::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (db, committed, attempted) = (db.clone(), committed.clone(), attempted.clone());
        writers.push(thread::spawn(move || {
            for chunk in (0..PER_WRITER).collect::<Vec<_>>().chunks(25) {
                let mut added = Vec::new();
                db.transaction(|t| {
                    added.clear();
                    for &n in chunk {
                        let id = n * WRITERS + w;
                        let rid = t.insert("t", vec![Value::I64(id), Value::I64(g_of(id))])?;
                        added.push((id, rid));
                    }
                    attempted.lock().unwrap().extend(added.iter().copied());
                    Ok(())
                })
                .unwrap();
                committed.lock().unwrap().extend(added);
            }
        }));
    }
    let reads = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for r in 0..3usize {
        let (db, committed, attempted, stop, reads) = (
            db.clone(),
            committed.clone(),
            attempted.clone(),
            stop.clone(),
            reads.clone(),
        );
        readers.push(thread::spawn(move || {
            let mut i = r;
            while !stop.load(Ordering::Acquire) {
                let before = committed.lock().unwrap().clone();
                let t = db.read().unwrap();
                let (what, g, got): (&str, Option<i64>, Vec<Read>) = match i % 4 {
                    0 => {
                        let g = (i / 4) as i64 % 2;
                        let mut got = Vec::new();
                        t.lookup_each("t_g", &Value::I64(g), |row| {
                            got.push((row.i64("g")?, row.id(), row.i64("id")?));
                            Ok(())
                        })
                        .unwrap();
                        ("lookup", Some(g), got)
                    }
                    1 => {
                        let got = t
                            .range("t_g", KeyRange::all())
                            .unwrap()
                            .map(|r| {
                                let (rid, row) = r.unwrap();
                                (row[1].as_i64().unwrap(), rid, row[0].as_i64().unwrap())
                            })
                            .collect();
                        ("ascending range", None, got)
                    }
                    2 => {
                        let mut got: Vec<Read> = t
                            .range("t_g", KeyRange::all().desc())
                            .unwrap()
                            .map(|r| {
                                let (rid, row) = r.unwrap();
                                (row[1].as_i64().unwrap(), rid, row[0].as_i64().unwrap())
                            })
                            .collect();
                        got.reverse();
                        ("descending range", None, got)
                    }
                    _ => {
                        let mut got = Vec::new();
                        t.range_each("t_g", KeyRange::all(), |row| {
                            got.push((row.i64("g")?, row.id(), row.i64("id")?));
                            Ok(())
                        })
                        .unwrap();
                        ("range in place", None, got)
                    }
                };
                drop(t);
                let after = attempted.lock().unwrap().clone();
                check(what, &got, &before, &after, g);
                reads.fetch_add(1, Ordering::Relaxed);
                i += 3;
            }
        }));
    }
    for h in writers {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Release);
    for h in readers {
        h.join().unwrap();
    }
    assert!(reads.load(Ordering::Relaxed) >= 6, "too few reads raced");
    let all = committed.lock().unwrap().clone();
    assert_eq!(all.len(), (WRITERS * PER_WRITER) as usize);
    let t = db.read().unwrap();
    let got: Vec<Read> = t
        .range("t_g", KeyRange::all())
        .unwrap()
        .map(|r| {
            let (rid, row) = r.unwrap();
            (row[1].as_i64().unwrap(), rid, row[0].as_i64().unwrap())
        })
        .collect();
    check("final range", &got, &all, &all, None);
    drop(t);
    assert!(db.verify_indexes("t").unwrap().is_empty());
    db.close().unwrap();
}
