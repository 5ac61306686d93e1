//! Many threads scanning their own tables through a pool far smaller than
//! the tables together: read streams share the pool's pin budget, so every
//! scan (`scan_each`, `scan_until`, the iterator) returns exactly its
//! table's rows, under each evictor and over sync I/O and io_uring. A
//! scan that cannot read a page fails with an error naming it, and never
//! returns fewer rows.
//!
//! `SCAN_SHARE_ROUNDS` sets how often each thread scans its table with
//! each of the three (default 5).

mod common;

use std::sync::Arc;
use std::time::Duration;

use bufmgr::{FaultyStorage, StorageBackend};
use common::{cut_table_file, row, small_options, two_columns, watchdog};
use engine::{Database, Evictor, IoMode, Options, RingChoice, ScanOptions};

const THREADS: usize = 24;

/// Rows of table `i`: two sizes, so that some scans read through the
/// bulk-read ring (more pages than a quarter of the pool) and some not.
fn rows_of(i: usize) -> i64 {
    if i.is_multiple_of(2) { 240 } else { 700 }
}

fn rounds() -> usize {
    std::env::var("SCAN_SHARE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
}

fn io_uring_works() -> bool {
    match bufmgr::io::probe_io_uring() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("io_uring skipped: it is not usable here: {why}");
            false
        }
    }
}

/// `THREADS` tables, table `i` holding `rows_of(i)` committed rows.
fn load(db: &Database) {
    for i in 0..THREADS {
        let name = format!("t{i}");
        db.create_table(&name, two_columns()).unwrap();
        let t = db.begin().unwrap();
        for id in 0..rows_of(i) {
            t.insert(
                name.as_str(),
                row(id, "padding padding padding padding padding"),
            )
            .unwrap();
        }
        t.commit().unwrap();
    }
}

/// Each thread scans its own table `rounds()` times with each of the three
/// ways; every scan must return the table's row count.
fn scan_all(db: &Database, what: &str) {
    let rounds = rounds();
    std::thread::scope(|sc| {
        for i in 0..THREADS {
            sc.spawn(move || {
                let name = format!("t{i}");
                let want = rows_of(i) as u64;
                for round in 0..rounds {
                    let t = db.begin().unwrap();
                    let mut n = 0u64;
                    let s = t
                        .scan_each(name.as_str(), |_| {
                            n += 1;
                            Ok(())
                        })
                        .unwrap_or_else(|e| panic!("{what} {name} scan_each {round}: {e}"));
                    assert_eq!((n, s.rows), (want, want), "{what} {name} scan_each {round}");
                    let mut n = 0u64;
                    let opts = ScanOptions {
                        ring: RingChoice::Auto,
                        ..ScanOptions::default()
                    };
                    let s = t
                        .scan_until(name.as_str(), opts, |_| {
                            n += 1;
                            Ok(true)
                        })
                        .unwrap_or_else(|e| panic!("{what} {name} scan_until {round}: {e}"));
                    assert_eq!(
                        (n, s.rows),
                        (want, want),
                        "{what} {name} scan_until {round}"
                    );
                    let mut ids: Vec<i64> = t
                        .scan(name.as_str())
                        .unwrap()
                        .map(|r| match r {
                            Ok((_, r)) => r[0].as_i64().unwrap(),
                            Err(e) => panic!("{what} {name} iterator {round}: {e}"),
                        })
                        .collect();
                    ids.sort_unstable();
                    assert_eq!(
                        ids,
                        (0..rows_of(i)).collect::<Vec<_>>(),
                        "{what} {name} iterator {round}"
                    );
                    t.commit().unwrap();
                }
            });
        }
    });
}

fn options(evictor: Evictor, io: IoMode) -> Options {
    small_options().evictor(evictor).io(io)
}

#[test]
fn every_scan_returns_every_row_under_each_evictor_and_backend() {
    let mut ios = vec![IoMode::Sync];
    if io_uring_works() {
        ios.push(IoMode::IoUring);
    }
    watchdog(Duration::from_secs(600), move || {
        for io in ios {
            for evictor in [Evictor::Clock, Evictor::HotCool, Evictor::Probation] {
                let what = format!("{io:?} {evictor:?}");
                let dir = tempfile::tempdir().unwrap();
                let db = Database::open(dir.path(), options(evictor, io)).unwrap();
                assert_eq!(db.pool().size(), 64);
                load(&db);
                db.pool().evict_all().unwrap();
                scan_all(&db, &what);
                assert_eq!(db.pool().active_streams(), 0, "{what}");
                assert_eq!(db.pool().stream_pins_ahead(), 0, "{what}");
                db.close().unwrap();
            }
        }
    });
}

/// What one scan of `name` by each of the three ways gave: the row count,
/// or the error's text.
fn scan_three(db: &Database, name: &str) -> [Result<u64, String>; 3] {
    let t = db.begin().unwrap();
    let mut n = 0u64;
    let each = t
        .scan_each(name, |_| {
            n += 1;
            Ok(())
        })
        .map(|s| {
            assert_eq!(s.rows, n);
            n
        })
        .map_err(|e| e.to_string());
    let mut n = 0u64;
    let until = t
        .scan_until(name, ScanOptions::default(), |_| {
            n += 1;
            Ok(true)
        })
        .map(|s| {
            assert_eq!(s.rows, n);
            n
        })
        .map_err(|e| e.to_string());
    let iter = match t.scan(name) {
        Err(e) => Err(e.to_string()),
        Ok(rows) => {
            let mut n = 0u64;
            let mut err = None;
            for r in rows {
                match r {
                    Ok(_) => n += 1,
                    Err(e) => {
                        err = Some(e.to_string());
                        break;
                    }
                }
            }
            err.map_or(Ok(n), Err)
        }
    };
    drop(t);
    [each, until, iter]
}

/// Reads that fail after a number of good ones, and a table file cut
/// short behind the pool's back: each scan returns every row or an error
/// naming the table and the block, never fewer rows.
#[test]
fn failed_and_short_reads_fail_the_scan_never_shorten_it() {
    // (io, mapped reads)
    let mut ios = vec![(IoMode::Sync, false), (IoMode::Sync, true)];
    if io_uring_works() {
        ios.push((IoMode::IoUring, false));
    }
    watchdog(Duration::from_secs(300), move || {
        for (io, mapped) in ios {
            let io = (io, mapped);
            let dir = tempfile::tempdir().unwrap();
            let faulty = Arc::new(std::sync::OnceLock::<Arc<FaultyStorage>>::new());
            let f2 = Arc::clone(&faulty);
            let opts = options(Evictor::Clock, io.0)
                .mapped_reads(mapped)
                .wrap_storage(move |s| {
                    let f = Arc::new(FaultyStorage::new(s));
                    let _ = f2.set(Arc::clone(&f));
                    f as Arc<dyn StorageBackend>
                });
            let db = Database::open(dir.path(), opts).unwrap();
            let faulty = faulty.get().unwrap();
            db.create_table("t", two_columns()).unwrap();
            let t = db.begin().unwrap();
            for id in 0..700 {
                t.insert("t", row(id, "padding padding padding padding padding"))
                    .unwrap();
            }
            t.commit().unwrap();
            // Hints set and written: the scans below read the table's pages
            // and not the commit log.
            assert_eq!(scan_three(&db, "t"), [Ok(700), Ok(700), Ok(700)]);
            db.checkpoint().unwrap();
            let mut failed = 0;
            for good in [0, 1, 3, 7, 12, 20, 30] {
                for (way, r) in ["scan_each", "scan_until", "iterator"]
                    .into_iter()
                    .zip(0..3)
                {
                    db.pool().evict_all().unwrap();
                    faulty.fail_reads_after(good);
                    let got = scan_three(&db, "t")[r].clone();
                    faulty.clear();
                    match got {
                        Ok(n) => assert_eq!(n, 700, "{io:?} {way} after {good} reads"),
                        Err(e) => {
                            failed += 1;
                            assert!(
                                e.contains("\"t\"") && e.contains("block"),
                                "{io:?} {way} after {good} reads: {e}"
                            );
                        }
                    }
                }
            }
            assert!(
                failed > 0,
                "{io:?}: no injected read failure reached a scan"
            );
            // A table file cut inside its last page: the read of that page
            // is short.
            cut_table_file(&db, "t", |len| len - 100);
            for (way, r) in scan_three(&db, "t").into_iter().enumerate() {
                let e = r.expect_err(&format!("{io:?} way {way}: a short read went unnoticed"));
                assert!(e.contains("\"t\""), "{io:?} way {way}: {e}");
            }
            drop(db);
        }
    });
}
