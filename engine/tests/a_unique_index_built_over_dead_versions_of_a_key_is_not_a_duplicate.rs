//! `create_index(.., unique)` over a table whose rows are unique but some
//! of whose keys also have versions deleted by a committed transaction that
//! a snapshot may still see (kept, so the index has entries for them): the
//! build indexes those versions but does not count them as duplicates. It
//! reported "duplicate key value violates unique index" when such a dead
//! version sorted after the live one (a larger row id: the live version
//! went into space a vacuum freed earlier in the table), because each
//! entry of a key was checked as if it were being inserted live.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use common::{Rng, bank, row, small_options, two_columns, watchdog};
use engine::{Database, EngineError, KeyRange, Value};

#[test]
fn a_version_deleted_under_a_live_snapshot_after_the_live_one_is_no_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), small_options()).unwrap();
    db.create_table("t", two_columns()).unwrap();
    let name = "x".repeat(100);
    let t = db.begin().unwrap();
    let ids: Vec<_> = (0..150)
        .map(|i| t.insert("t", row(i, &name)).unwrap())
        .collect();
    t.commit().unwrap();
    let last = 149;
    assert!(
        ids[last as usize].block > ids[0].block,
        "the rows span pages"
    );
    // Room on the first page.
    let t = db.begin().unwrap();
    for rid in &ids[..20] {
        t.delete("t", *rid).unwrap();
    }
    t.commit().unwrap();
    db.vacuum("t").unwrap();
    // A snapshot that still sees the last row's old version.
    let reader = db.read().unwrap();
    let t = db.begin().unwrap();
    t.delete("t", ids[last as usize]).unwrap();
    let moved = t.insert("t", row(last, "moved")).unwrap();
    t.commit().unwrap();
    assert!(
        moved < ids[last as usize],
        "the new version {moved:?} lands before the old {:?}",
        ids[last as usize]
    );
    db.create_index("t_id", "t", "id", true)
        .expect("no two live rows share an id");
    let found = db
        .read()
        .unwrap()
        .get_by_key("t", "id", &Value::I64(last))
        .unwrap()
        .expect("the row by its key");
    assert_eq!(found.0, moved);
    // The old snapshot finds the old version through the new index.
    let old = reader
        .get_by_key("t", "id", &Value::I64(last))
        .unwrap()
        .expect("the old version by its key");
    assert_eq!(old.0, ids[last as usize]);
    drop(reader);
    // A real duplicate is still refused.
    db.drop_index("t_id").unwrap();
    let t = db.begin().unwrap();
    t.insert("t", row(last, "twin")).unwrap();
    t.commit().unwrap();
    let e = db.create_index("t_id", "t", "id", true).unwrap_err();
    assert!(
        matches!(e, EngineError::UniqueViolation { .. }),
        "a real duplicate: {e}"
    );
}

/// The same race under transfers of the bank (which delete and insert
/// accounts again under their ids): a unique index built meanwhile either
/// is built, or meets a transaction in progress (a retryable conflict);
/// never a duplicate. Each index built finds every account once.
#[test]
fn unique_indexes_built_during_transfers_find_no_duplicate() {
    watchdog(Duration::from_secs(60), || {
        const ACCOUNTS: i64 = 100;
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(
            dir.path(),
            small_options()
                .pool_buffers(32)
                .transaction_attempts(100_000)
                .transaction_backoff(Duration::from_micros(50), Duration::from_millis(2)),
        )
        .unwrap();
        bank::create(&db, ACCOUNTS, false, false);
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for w in 0..3u64 {
            let (db, stop) = (db.clone(), stop.clone());
            threads.push(thread::spawn(move || {
                let mut rng = Rng::new(w + 5);
                while !stop.load(Ordering::Relaxed) {
                    let x = bank::draw(&mut rng, ACCOUNTS);
                    db.transaction(|t| bank::transfer(t, &x, None)).unwrap();
                }
            }));
        }
        let (mut built, mut conflicts) = (0, 0);
        for round in 0..60 {
            match db.create_index("acct_id2", bank::TABLE, "id", true) {
                Ok(_) => built += 1,
                Err(e) if e.is_retryable() => {
                    conflicts += 1;
                    continue;
                }
                Err(e) => panic!("round {round}: {e}"),
            }
            let t = db.read().unwrap();
            let mut ids = std::collections::BTreeSet::new();
            for r in t.range("acct_id2", KeyRange::all()).unwrap() {
                let (_, row) = r.unwrap();
                assert!(ids.insert(row.i64("id").unwrap()), "round {round}: twice");
            }
            assert_eq!(ids.len() as i64, ACCOUNTS, "round {round}");
            drop(t);
            db.drop_index("acct_id2").unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        eprintln!("{built} unique indexes built, {conflicts} met a transaction in progress");
        assert!(built > 0);
    });
}
