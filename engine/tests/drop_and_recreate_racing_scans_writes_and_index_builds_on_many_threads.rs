//! DROP TABLE and a CREATE of the same name racing, on more threads than
//! the drop lock has shards (threads that exit and new ones that start),
//! scans kept open across pages, lookups, inserts, index builds and
//! autovacuum: every read returns whole rows of one generation of the
//! table or a clear "unknown table / index" error; nothing panics, nothing
//! waits forever, and no other error (a read of a removed file) appears.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{small_options, watchdog};
use engine::{Column, ColumnType, Database, EngineError, Value};

const ROWS: i64 = 600;

fn create(db: &Database, generation: i64) {
    db.create_table(
        "t",
        vec![
            Column::new("id", ColumnType::I64),
            Column::new("gen", ColumnType::I64),
            Column::nullable("pad", ColumnType::Text),
        ],
    )
    .unwrap();
    let txn = db.begin().unwrap();
    for id in 0..ROWS {
        txn.insert(
            "t",
            vec![
                Value::I64(id),
                Value::I64(generation),
                Value::text("p".repeat((id % 90) as usize)),
            ],
        )
        .unwrap();
    }
    txn.commit().unwrap();
}

fn gone(e: &EngineError) -> bool {
    matches!(
        e,
        EngineError::UnknownTable { .. } | EngineError::UnknownIndex { .. }
    )
}

#[test]
fn reads_writes_and_index_builds_on_twenty_threads_see_one_generation_or_a_clear_error() {
    watchdog(Duration::from_secs(240), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(
            dir.path(),
            small_options()
                .autovacuum(true)
                .autovacuum_naptime(Duration::from_millis(5)),
        )
        .unwrap();
        create(&db, 0);
        let stop = AtomicBool::new(false);
        let (scans, lookups, writes, builds, gone_count) = (
            AtomicU64::new(0),
            AtomicU64::new(0),
            AtomicU64::new(0),
            AtomicU64::new(0),
            AtomicU64::new(0),
        );
        std::thread::scope(|s| {
            // Waves of short-lived threads (new threads get new shards).
            for wave in 0..4u64 {
                let mut workers = Vec::new();
                for t in 0..20u64 {
                    let (db, stop) = (&db, &stop);
                    let (scans, lookups, writes, builds, gone_count) =
                        (&scans, &lookups, &writes, &builds, &gone_count);
                    workers.push(s.spawn(move || {
                        let mut i = 0u64;
                        while !stop.load(Ordering::Relaxed) && i < 40 {
                            i += 1;
                            let r: Result<(), EngineError> = (|| {
                                match (t + wave) % 4 {
                                    0 => {
                                        // A scan held open across pages.
                                        let txn = db.read()?;
                                        let mut generation = None;
                                        let mut n = 0;
                                        for r in txn.scan("t")? {
                                            let (_, row) = r?;
                                            let g = row.i64("gen")?;
                                            // Rows the writers add: gen -1.
                                            if g < 0 {
                                                continue;
                                            }
                                            assert_eq!(
                                                *generation.get_or_insert(g),
                                                g,
                                                "one scan saw two generations"
                                            );
                                            n += 1;
                                            if n % 50 == 0 {
                                                std::thread::yield_now();
                                            }
                                        }
                                        scans.fetch_add(1, Ordering::Relaxed);
                                    }
                                    1 => {
                                        let txn = db.read()?;
                                        let mut ids = Vec::new();
                                        txn.scan_each("t", |r| {
                                            ids.push(r.id());
                                            Ok(())
                                        })?;
                                        for id in ids.into_iter().take(20) {
                                            if let Some(row) = txn.get("t", id)? {
                                                assert_eq!(row.len(), 3);
                                            }
                                        }
                                        lookups.fetch_add(1, Ordering::Relaxed);
                                    }
                                    2 => {
                                        let txn = db.begin()?;
                                        txn.insert(
                                            "t",
                                            vec![Value::I64(-1), Value::I64(-1), Value::Null],
                                        )?;
                                        txn.commit()?;
                                        writes.fetch_add(1, Ordering::Relaxed);
                                    }
                                    _ => {
                                        let name = format!("t_ix_{t}");
                                        match db.create_index(&name, "t", "id", false) {
                                            Ok(_) => {
                                                builds.fetch_add(1, Ordering::Relaxed);
                                                match db.drop_index(&name) {
                                                    Ok(()) => {}
                                                    Err(e) if gone(&e) => {}
                                                    Err(e) => return Err(e),
                                                }
                                            }
                                            Err(EngineError::InvalidSchema { .. }) => {}
                                            Err(EngineError::TableExists { .. }) => {}
                                            Err(e) => return Err(e),
                                        }
                                    }
                                }
                                Ok(())
                            })();
                            match r {
                                Ok(()) => {}
                                Err(e) if gone(&e) => {
                                    gone_count.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(e) if e.kind() == engine::ErrorKind::Conflict => {}
                                Err(e) => panic!("thread {t} wave {wave}: {e} ({e:?})"),
                            }
                        }
                    }));
                }
                // Drop and recreate under them.
                for g in 0..3 {
                    std::thread::sleep(Duration::from_millis(20));
                    db.drop_table("t").unwrap();
                    create(&db, wave as i64 * 10 + g + 1);
                }
                for w in workers {
                    w.join().unwrap();
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
        eprintln!(
            "scans {} lookups {} writes {} builds {} gone {}",
            scans.load(Ordering::Relaxed),
            lookups.load(Ordering::Relaxed),
            writes.load(Ordering::Relaxed),
            builds.load(Ordering::Relaxed),
            gone_count.load(Ordering::Relaxed)
        );
        assert!(scans.load(Ordering::Relaxed) > 0 && lookups.load(Ordering::Relaxed) > 0);
        let left = db.read().unwrap().scan("t").unwrap().count() as i64;
        assert!(
            left >= ROWS,
            "the last generation reads {left} rows of {ROWS}"
        );
    });
}
