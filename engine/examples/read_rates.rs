//! Read-path rates of the engine alone (the `compare-sqlite` scenario of
//! `bench` puts them beside SQLite's): a table `accounts(aid, k, abalance,
//! filler 84 bytes)` with an index on `k`, the pool holding everything (1 GiB:
//! the table stays under a quarter of it, so scans take no ring and stay
//! resident).
//!
//! `cargo run --release -p engine --example read_rates -- [ROWS]`
//! (`READ_RATES_ONLY=scan` or `lookup` runs one half, for profiling).
//!
//! Lookups are also given in CPU time per lookup (the lookup threads' own
//! run time, `/proc/thread-self/schedstat`, summed over the threads), which
//! other work on a shared machine disturbs far less than the wall-clock
//! rate: 1, 100 and 1000 lookups per transaction side by side show whether
//! a lookup costs more the longer its transaction runs.

use std::time::{Duration, Instant};

use engine::{Column, ColumnType, Database, Options, Value};

fn main() -> engine::Result<()> {
    let rows: i64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let db = Database::open(dir.path(), Options::new().pool_mib(1024))?;
    db.create_table(
        "accounts",
        vec![
            Column::new("aid", ColumnType::I64),
            Column::new("k", ColumnType::I64),
            Column::new("abalance", ColumnType::I64),
            Column::new("filler", ColumnType::Bytes),
        ],
    )?;
    db.create_index("accounts_k", "accounts", "k", false)?;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let data: Vec<_> = (0..rows)
        .map(|aid| {
            let k = (rnd() % rows as u64) as i64;
            let bal = if aid % 1000 == 0 { -1 } else { aid % 977 };
            vec![
                Value::I64(aid),
                Value::I64(k),
                Value::I64(bal),
                Value::Bytes(vec![b'f'; 84]),
            ]
        })
        .collect();
    // What the reads must find: sum(k), and how many rows hold each k.
    let sum_k: i64 = data.iter().map(|r| r[1].as_i64().unwrap()).sum();
    let mut per_k = vec![0u32; rows as usize];
    for r in &data {
        per_k[r[1].as_i64().unwrap() as usize] += 1;
    }
    let t0 = Instant::now();
    db.bulk_load("accounts", data, |_| {})?;
    let load = t0.elapsed();
    println!(
        "bulk load: {rows} rows in {:.2} s = {:.0} rows/s",
        load.as_secs_f64(),
        rows as f64 / load.as_secs_f64()
    );
    let acc = db.table_handle("accounts")?;
    let (k, ab) = (acc.column("k")?, acc.column("abalance")?);
    let by_k = db.index_handle("accounts_k")?;
    let rate = |what: &str, n: u64, d: Duration| {
        println!("{what:<44} {:>8.2} M/s", n as f64 / d.as_secs_f64() / 1e6)
    };
    // Warm: one scan sets every hint bit. It asks the commit log about
    // each page's loading transaction (once per page: the visit remembers
    // the last final answer) and hints every tuple, so it is timed apart.
    let s = Instant::now();
    db.read()?.scan_each(&acc, |_| Ok(()))?;
    rate(
        "first scan after the load (sets hints)",
        rows as u64,
        s.elapsed(),
    );
    // READ_RATES_ONLY=scan|lookup runs one half (for profiling).
    let only = std::env::var("READ_RATES_ONLY").unwrap_or_default();
    for _ in 0..match only.as_str() {
        "lookup" => 0,
        "scan" => 10,
        _ => 2,
    } {
        let t = db.read()?;
        let s = Instant::now();
        let mut count = 0u64;
        t.scan_each(&acc, |r| {
            count += u64::from(r.i64(ab)? == -1);
            Ok(())
        })?;
        rate("scan_each count(abalance = -1)", rows as u64, s.elapsed());
        assert_eq!(count, (rows as u64).div_ceil(1000));
        let s = Instant::now();
        let mut sum = 0i64;
        t.scan_each(&acc, |r| {
            sum += r.i64(k)?;
            Ok(())
        })?;
        rate("scan_each sum(k)", rows as u64, s.elapsed());
        assert_eq!(sum, sum_k, "sum(k)");
        let s = Instant::now();
        let n = t.scan(&acc)?.count();
        rate("scan (owned rows)", n as u64, s.elapsed());
        assert_eq!(n as i64, rows, "rows scanned");
        let s = Instant::now();
        let mut sum = 0i64;
        for r in t.scan(&acc)? {
            sum += r?.1.i64(k)?;
        }
        rate("scan (owned rows) sum(k)", rows as u64, s.elapsed());
        assert_eq!(sum, sum_k, "owned sum(k)");
    }
    // Returns the wall time and the CPU time the threads ran.
    let lookups = |threads: usize, per_txn: usize, total: usize| -> (Duration, Duration) {
        let s = Instant::now();
        let cpu = std::thread::scope(|sc| {
            let running: Vec<_> = (0..threads)
                .map(|th| {
                    let (db, by_k, per_k) = (db.clone(), by_k.clone(), &per_k);
                    sc.spawn(move || {
                        let started = thread_cpu();
                        let mut key = th as i64 * 7919;
                        for _ in 0..total / threads / per_txn {
                            db.read_transaction(|t| {
                                for _ in 0..per_txn {
                                    key = (key * 48271 + 11) % rows;
                                    let found = t.lookup_each(&by_k, &Value::I64(key), |r| {
                                        assert_eq!(r.i64(k)?, key);
                                        r.i64(ab).map(drop)
                                    })?;
                                    // Every row with this k, and only those.
                                    assert_eq!(found, per_k[key as usize] as usize, "k = {key}");
                                }
                                Ok(())
                            })
                            .unwrap();
                        }
                        thread_cpu() - started
                    })
                })
                .collect();
            running.into_iter().map(|r| r.join().unwrap()).sum()
        });
        (s.elapsed(), cpu)
    };
    for threads in if only == "scan" { vec![] } else { vec![1, 2] } {
        for per_txn in [1, 100, 1000] {
            let n = 400_000;
            let (d, cpu) = lookups(threads, per_txn, n);
            rate(
                &format!("lookups, {per_txn}/txn, {threads} thread(s)"),
                n as u64,
                d,
            );
            println!(
                "{:<44} {:>8.0} ns CPU per lookup",
                "",
                cpu.as_nanos() as f64 / n as f64
            );
        }
    }
    db.close()
}

/// The CPU time the calling thread has run (the kernel's count, in
/// `/proc/thread-self/schedstat`).
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat")
        .expect("/proc/thread-self/schedstat is readable");
    let ns = stat
        .split_whitespace()
        .next()
        .and_then(|ns| ns.parse().ok())
        .unwrap_or_else(|| panic!("/proc/thread-self/schedstat reads {stat:?}"));
    Duration::from_nanos(ns)
}
