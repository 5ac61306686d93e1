//! A bank (tests/common/bank.rs) under concurrency: writer threads transfer
//! money between accounts (read two, update both; delete and insert again
//! under the same id; update an account twice in one transaction; change
//! an indexed owner), retried on conflicts by `Database::transaction`; some
//! transactions write and then roll back or are dropped unfinished. Reader
//! threads audit one snapshot through every read path (borrowed and owned
//! scans, filtered and projected scans, a lookup of every id, ranges of
//! the id, balance and owner indexes both ways): every path sees every
//! account once, the same balances, and the constant total. Long-lived
//! readers audit the same snapshot again and again across many commits
//! and vacuums and must get the same balances each time. Vacuum,
//! autovacuum and checkpoints run meanwhile, on pools of 16 to 64 buffers,
//! with each evictor, synchronous and asynchronous commits.
//!
//! Each case runs for a couple of seconds; `BANK_SECONDS` sets how long,
//! `BANK_SEED` varies the writers' draws; the ignored
//! `every_evictor_pool_and_commit_mode_for_longer` is the longer run.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::bank::{self, Balances};
use common::{Rng, watchdog};
use engine::{CommitMode, Database, Evictor, Options};

#[derive(Clone, Copy, Debug)]
struct Case {
    evictor: Evictor,
    buffers: usize,
    commit: CommitMode,
    autovacuum: bool,
    vacuum_thread: bool,
    checkpoints: bool,
    bulk: bool,
    writers: u64,
    readers: u64,
    accounts: i64,
    /// Any other options.
    tweak: fn(Options) -> Options,
    seed: u64,
}

fn seconds() -> f64 {
    std::env::var("BANK_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2.0)
}

fn options(c: &Case) -> Options {
    let o = Options::new()
        .pool_buffers(c.buffers)
        .evictor(c.evictor)
        .commit_mode(c.commit)
        .partitions(engine::Partitions::Count(1))
        .wal_segment_size(1 << 20)
        .autovacuum(c.autovacuum)
        .autovacuum_naptime(Duration::from_millis(20))
        .autovacuum_thresholds(10, 0.0)
        .transaction_attempts(100_000)
        .transaction_backoff(Duration::from_micros(50), Duration::from_millis(2));
    (c.tweak)(o)
}

#[derive(Default)]
struct Counts {
    committed: AtomicU64,
    aborted: AtomicU64,
    audits: AtomicU64,
    long_audits: AtomicU64,
    vacuums: AtomicU64,
    checkpoints: AtomicU64,
}

fn run(c: Case, run_for: Duration) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options(&c)).unwrap();
    bank::create(&db, c.accounts, c.bulk, false);
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let mut threads = Vec::new();
    for w in 0..c.writers {
        let (db, stop, counts) = (db.clone(), stop.clone(), counts.clone());
        threads.push(thread::spawn(move || {
            let mut rng = Rng::new(c.seed * 1000 + w);
            while !stop.load(Ordering::Relaxed) {
                let x = bank::draw(&mut rng, c.accounts);
                match rng.below(12) {
                    // Writes, then an explicit rollback.
                    0 => {
                        let t = db.begin().unwrap();
                        match bank::transfer(&t, &x, None) {
                            Ok(()) => t.rollback().unwrap(),
                            Err(e) if e.is_retryable() => t.rollback().unwrap(),
                            Err(e) => panic!("{c:?}: transfer {x:?}: {e}"),
                        }
                        counts.aborted.fetch_add(1, Ordering::Relaxed);
                    }
                    // Writes, then dropped unfinished.
                    1 => {
                        let t = db.begin().unwrap();
                        if let Err(e) = bank::transfer(&t, &x, None) {
                            assert!(e.is_retryable(), "{c:?}: transfer {x:?}: {e}");
                        }
                        drop(t);
                        counts.aborted.fetch_add(1, Ordering::Relaxed);
                    }
                    // Iterators read across the transaction's own
                    // transfer, then an audit of its own writes.
                    2 if c.accounts <= 400 => {
                        db.transaction(|t| bank::interleaved(t, c.accounts, &x).map(drop))
                            .unwrap_or_else(|e| panic!("{c:?}: transfer {x:?}: {e}"));
                        counts.committed.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {
                        db.transaction(|t| bank::transfer(t, &x, None))
                            .unwrap_or_else(|e| panic!("{c:?}: transfer {x:?}: {e}"));
                        counts.committed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for r in 0..c.readers {
        let (db, stop, counts) = (db.clone(), stop.clone(), counts.clone());
        threads.push(thread::spawn(move || {
            let long = r % 2 == 1;
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                round += 1;
                if r == 0 && round.is_multiple_of(3) {
                    // Iterators read on after their transaction ended,
                    // while commits and vacuums go on.
                    bank::outliving(&db, c.accounts, round.is_multiple_of(2), || {
                        thread::sleep(Duration::from_millis(150))
                    })
                    .unwrap_or_else(|e| panic!("{c:?}: reader {r}: {e}"));
                    counts.audits.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                // Every other long read holds an xid: it transfers first
                // and reads its own transfer, then rolls back.
                let writing = long && round.is_multiple_of(2);
                let t = if writing {
                    let t = db.begin().unwrap();
                    let x = bank::draw(&mut Rng::new(c.seed * 7919 + round), c.accounts);
                    match bank::transfer(&t, &x, None) {
                        Ok(()) => t,
                        Err(e) if e.is_retryable() => continue,
                        Err(e) => panic!("{c:?}: long writer {r}: {e}"),
                    }
                } else {
                    db.read().unwrap()
                };
                let first = bank::audit(&t, c.accounts)
                    .unwrap_or_else(|e| panic!("{c:?}: reader {r}: {e}"));
                counts.audits.fetch_add(1, Ordering::Relaxed);
                if long {
                    // The same snapshot, audited again while commits and
                    // vacuums go on.
                    let until = Instant::now() + Duration::from_millis(400);
                    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                        let again: Balances = bank::audit(&t, c.accounts)
                            .unwrap_or_else(|e| panic!("{c:?}: long reader {r}, audit again: {e}"));
                        assert_eq!(again, first, "{c:?}: long reader {r}: the snapshot changed");
                        counts.long_audits.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if writing {
                    t.rollback().unwrap();
                } else {
                    t.commit().unwrap();
                }
            }
        }));
    }
    if c.vacuum_thread {
        let (db, stop, counts) = (db.clone(), stop.clone(), counts.clone());
        threads.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                db.vacuum(bank::TABLE)
                    .unwrap_or_else(|e| panic!("{c:?}: vacuum: {e}"));
                counts.vacuums.fetch_add(1, Ordering::Relaxed);
                thread::sleep(Duration::from_millis(5));
            }
        }));
    }
    if c.checkpoints {
        let (db, stop, counts) = (db.clone(), stop.clone(), counts.clone());
        threads.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                db.checkpoint()
                    .unwrap_or_else(|e| panic!("{c:?}: checkpoint: {e}"));
                counts.checkpoints.fetch_add(1, Ordering::Relaxed);
                thread::sleep(Duration::from_millis(50));
            }
        }));
    }
    let started = Instant::now();
    while started.elapsed() < run_for && !threads.iter().any(|t| t.is_finished()) {
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        if let Err(p) = t.join() {
            std::panic::resume_unwind(p);
        }
    }
    let committed = counts.committed.load(Ordering::Relaxed);
    let audits = counts.audits.load(Ordering::Relaxed);
    eprintln!(
        "{c:?}: {committed} transfers committed, {} rolled back, {audits} audits, {} long audits, \
         {} vacuums, {} checkpoints, autovacuum {:?}",
        counts.aborted.load(Ordering::Relaxed),
        counts.long_audits.load(Ordering::Relaxed),
        counts.vacuums.load(Ordering::Relaxed),
        counts.checkpoints.load(Ordering::Relaxed),
        db.autovacuum_stats().vacuums,
    );
    assert!(committed > 0 && audits > 0, "{c:?}: nothing ran");
    let check = |db: &Database, when: &str| {
        let t = db.read().unwrap();
        bank::audit(&t, c.accounts).unwrap_or_else(|e| panic!("{c:?}: {when}: {e}"));
        t.commit().unwrap();
        let v = db.verify_indexes(bank::TABLE).unwrap();
        if !v.is_empty() {
            thread::sleep(Duration::from_millis(500));
            let again = db.verify_indexes(bank::TABLE).unwrap();
            panic!("{c:?}: {when}: {v:?}; 500 ms later: {again:?}");
        }
    };
    check(&db, "at the end");
    db.vacuum(bank::TABLE).unwrap();
    check(&db, "after a last vacuum");
    db.close().unwrap();
    let db = Database::open(dir.path(), options(&c)).unwrap();
    check(&db, "reopened");
    db.close().unwrap();
}

fn case(seed: u64) -> Case {
    Case {
        evictor: Evictor::Clock,
        buffers: 64,
        commit: CommitMode::Synchronous,
        autovacuum: false,
        vacuum_thread: false,
        checkpoints: false,
        bulk: false,
        writers: 3,
        readers: 2,
        accounts: 120,
        tweak: |o| o,
        seed: seed
            + 100
                * std::env::var("BANK_SEED")
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0),
    }
}

fn go(c: Case) {
    let secs = seconds();
    watchdog(Duration::from_secs_f64(60.0 + secs * 4.0), move || {
        run(c, Duration::from_secs_f64(secs))
    });
}

#[test]
fn clock_64_buffers_with_a_vacuum_thread() {
    go(Case {
        vacuum_thread: true,
        ..case(1)
    });
}

#[test]
fn hot_cool_16_buffers_asynchronous_with_autovacuum() {
    go(Case {
        evictor: Evictor::HotCool,
        buffers: 16,
        commit: CommitMode::Asynchronous,
        autovacuum: true,
        ..case(2)
    });
}

#[test]
fn probation_32_buffers_bulk_loaded_with_vacuum_and_checkpoints() {
    go(Case {
        evictor: Evictor::Probation,
        buffers: 32,
        vacuum_thread: true,
        checkpoints: true,
        bulk: true,
        ..case(3)
    });
}

#[test]
fn clock_16_buffers_many_writers_everything_at_once() {
    go(Case {
        buffers: 16,
        commit: CommitMode::Asynchronous,
        autovacuum: true,
        vacuum_thread: true,
        checkpoints: true,
        writers: 5,
        readers: 3,
        ..case(4)
    });
}

#[test]
fn many_accounts_over_many_leaves_on_32_buffers() {
    go(Case {
        buffers: 32,
        autovacuum: true,
        accounts: 1_500,
        writers: 4,
        ..case(5)
    });
}

#[test]
fn few_accounts_many_conflicts_pessimistic_reads_no_deduplication() {
    go(Case {
        evictor: Evictor::HotCool,
        buffers: 24,
        vacuum_thread: true,
        accounts: 8,
        writers: 4,
        tweak: |o| o.optimistic_reads(false).index_deduplication(false),
        ..case(6)
    });
}

#[test]
fn no_hint_bits_no_rings_mapped_reads_with_checkpoints() {
    go(Case {
        evictor: Evictor::Probation,
        buffers: 16,
        autovacuum: true,
        checkpoints: true,
        accounts: 300,
        tweak: |o| {
            o.hint_mode(engine::HintMode::Never)
                .rings(false)
                .mapped_reads(true)
        },
        ..case(7)
    });
}

#[test]
fn four_partitions_of_16_buffers_balancing_io_auto_crowded() {
    go(Case {
        evictor: Evictor::HotCool,
        buffers: 64,
        commit: CommitMode::Asynchronous,
        autovacuum: true,
        vacuum_thread: true,
        writers: 6,
        readers: 4,
        accounts: 200,
        tweak: |o| {
            o.partitions(engine::Partitions::Count(4))
                .balancing(true)
                .io(engine::IoMode::Auto)
        },
        ..case(8)
    });
}

/// The longer run: every evictor, pool size and commit mode with
/// everything at once, 20 seconds each, several seeds.
#[test]
#[ignore = "long: about five minutes"]
fn every_evictor_pool_and_commit_mode_for_longer() {
    let mut seed = 100;
    for evictor in [Evictor::Clock, Evictor::HotCool, Evictor::Probation] {
        for buffers in [16, 64] {
            for commit in [CommitMode::Synchronous, CommitMode::Asynchronous] {
                seed += 1;
                let c = Case {
                    evictor,
                    buffers,
                    commit,
                    autovacuum: true,
                    vacuum_thread: true,
                    checkpoints: true,
                    writers: 4,
                    readers: 3,
                    ..case(seed)
                };
                watchdog(Duration::from_secs(200), move || {
                    run(c, Duration::from_secs(20))
                });
            }
        }
    }
}
