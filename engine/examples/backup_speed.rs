//! Online backup speed, and what it costs the writers.
//!
//! A temporary database gets `ROWS` accounts (`aid` unique, a balance, 84
//! bytes of filler: about 120 bytes a row, as pgbench's), bulk-loaded. Then
//! `WRITERS` threads each run pgbench-like updates (one random account's
//! balance += delta per transaction, synchronous commit, through
//! `Database::transaction`) for `SECS` seconds without a backup, then
//! while `Database::backup_to` copies the database, then `SECS` seconds
//! without again. Printed: the backup's seconds and bytes (relation files
//! and WAL), and the writers' transactions per second before, during and
//! after it. The copy is then opened, and its row count checked.
//!
//! ```text
//! cargo run --release -p engine --example backup_speed [ROWS] [WRITERS] [SECS]
//! ```
//! (defaults: 1,000,000 rows, 2 writers, 5 s; everything lives under the
//! temp dir and is removed afterwards)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use engine::{Column, ColumnType, Database, Options, Value};
use rand::RngExt;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arg = |i: usize, default: u64| -> Result<u64, Box<dyn std::error::Error>> {
        Ok(match std::env::args().nth(i) {
            Some(v) => v.parse()?,
            None => default,
        })
    };
    let (rows, writers, secs) = (arg(1, 1_000_000)?, arg(2, 2)?, arg(3, 5)?);
    let db = Database::open_temporary(Options::new().pool_mib(128))?;
    db.create_table(
        "accounts",
        vec![
            Column::new("aid", ColumnType::I64),
            Column::new("abalance", ColumnType::I64),
            Column::nullable("filler", ColumnType::Bytes),
        ],
    )?;
    db.create_index("accounts_pkey", "accounts", "aid", true)?;
    let started = Instant::now();
    let rows_in = (0..rows as i64)
        .map(|aid| vec![Value::I64(aid), Value::I64(0), Value::Bytes(vec![b'x'; 84])]);
    db.bulk_load("accounts", rows_in, |_| {})?;
    println!(
        "loaded {rows} rows in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let commits = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..writers)
        .map(|_| {
            let (db, commits, stop) = (db.clone(), commits.clone(), stop.clone());
            std::thread::spawn(move || -> engine::Result<()> {
                let mut rng = rand::rng();
                while !stop.load(Ordering::Relaxed) {
                    let aid = rng.random_range(0..rows as i64);
                    let delta = rng.random_range(-5000..=5000i64);
                    db.transaction(|t| {
                        let (rid, mut r) = t
                            .get_by_key("accounts", "aid", &Value::I64(aid))?
                            .expect("every account exists");
                        r[1] = Value::I64(r[1].as_i64().unwrap_or(0) + delta);
                        t.update("accounts", rid, r).map(drop)
                    })?;
                    commits.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
        })
        .collect();
    let rate = |d: Duration| -> f64 {
        let c0 = commits.load(Ordering::Relaxed);
        let t0 = Instant::now();
        std::thread::sleep(d);
        (commits.load(Ordering::Relaxed) - c0) as f64 / t0.elapsed().as_secs_f64()
    };
    // Warm up, then the window without a backup.
    std::thread::sleep(Duration::from_secs(1));
    let before = rate(Duration::from_secs(secs));

    let target = tempfile::tempdir()?;
    let copy_dir = target.path().join("copy");
    let c0 = commits.load(Ordering::Relaxed);
    let t0 = Instant::now();
    let done = db.backup_to(&copy_dir, |_| {})?;
    let took = t0.elapsed().as_secs_f64();
    let during = (commits.load(Ordering::Relaxed) - c0) as f64 / took;
    let after = rate(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("a writer panicked")?;
    }
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "backup: {took:.2} s, {:.1} MiB of relation files ({:.0} MiB/s), {:.1} MiB of WAL, \
         {} pages read again",
        mib(done.bytes),
        mib(done.bytes) / took,
        mib(done.wal_bytes),
        done.pages_reread
    );
    println!(
        "writers ({writers}): {before:.0} txn/s before, {during:.0} txn/s during the backup \
         ({:.0}% of before), {after:.0} txn/s after",
        100.0 * during / before
    );
    db.close()?;
    let t0 = Instant::now();
    let copy = Database::open(&copy_dir, Options::new().pool_mib(128))?;
    let n = copy.read_transaction(|t| Ok(t.scan("accounts")?.count()))?;
    println!(
        "the copy opened in {:.2} s (replayed {} WAL records) with {n} accounts",
        t0.elapsed().as_secs_f64(),
        copy.recovery_stats().records
    );
    if n as u64 != rows {
        return Err(format!("the copy holds {n} accounts, not {rows}").into());
    }
    copy.close()?;
    Ok(())
}
