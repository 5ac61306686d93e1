//! Quick figures for the WAL alone (the `bench` program will carry the full
//! `wal-commit` scenario): single- and two-thread insert rates without
//! flushing, and group commit with T threads next to a raw "append 100 bytes +
//! fdatasync" loop on a file in the same directory.
//!
//! Run with `cargo run --release -p wal --example wal_rates`.

use std::fs::File;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wal::{Record, RmgrKind, Wal, WalConfig};

const PAYLOAD: usize = 100;
const INSERTS: u64 = 1_000_000;
const COMMIT_TIME: Duration = Duration::from_secs(2);

fn record(xid: u64) -> Record {
    Record::builder(RmgrKind::Xact, 0, xid)
        .payload(vec![0x5A; PAYLOAD])
        .build()
        .expect("small record")
}

fn insert_rate(threads: u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let wal = Arc::new(Wal::open(dir.path(), WalConfig::default()).expect("open"));
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || {
                for i in 0..INSERTS / threads {
                    wal.insert(&record(t << 32 | i)).expect("insert");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("inserter");
    }
    let secs = started.elapsed().as_secs_f64();
    let stats = wal.stats();
    println!(
        "insert, {threads} thread(s): {:.0} records/s, {:.1} MB/s ({} records of {} bytes, {} writes, no flush)",
        stats.records as f64 / secs,
        stats.bytes as f64 / secs / 1e6,
        stats.records,
        stats.bytes / stats.records,
        stats.writes
    );
}

fn commit_rate(threads: u64) {
    let dir = tempfile::tempdir().expect("temp dir");
    let wal = Arc::new(Wal::open(dir.path(), WalConfig::default()).expect("open"));
    // Create the first segment before timing.
    let (_, end) = wal.insert(&record(0)).expect("insert");
    wal.flush(end).expect("flush");
    let before = wal.stats();
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || {
                let mut n = 0u64;
                while started.elapsed() < COMMIT_TIME {
                    let (_, end) = wal.insert(&record(t << 32 | n)).expect("insert");
                    wal.flush(end).expect("flush");
                    n += 1;
                }
                n
            })
        })
        .collect();
    let commits: u64 = handles
        .into_iter()
        .map(|h| h.join().expect("committer"))
        .sum();
    let secs = started.elapsed().as_secs_f64();
    let fsyncs = wal.stats().fsyncs - before.fsyncs;
    println!(
        "commit, {threads:>2} thread(s): {:>8.0} commits/s, {:>7.0} fdatasyncs/s, {:.1} commits per fdatasync",
        commits as f64 / secs,
        fsyncs as f64 / secs,
        commits as f64 / fsyncs as f64
    );
}

fn raw_fsync_rate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut f = File::create(dir.path().join("raw")).expect("create");
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < COMMIT_TIME {
        f.write_all(&[0x5A; 100]).expect("write");
        f.sync_data().expect("fdatasync");
        n += 1;
    }
    println!(
        "raw append 100 bytes + fdatasync: {:.0}/s",
        n as f64 / started.elapsed().as_secs_f64()
    );
}

fn main() {
    insert_rate(1);
    insert_rate(2);
    raw_fsync_rate();
    for threads in [1, 2, 8, 32] {
        commit_rate(threads);
    }
}
