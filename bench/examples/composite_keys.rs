//! Composite keys, the engine beside SQLite on the same data: a lookup by a
//! full composite primary key, and "the newest order of a district" (a
//! descending range over a key prefix with a limit of one).
//!
//! ```text
//! cargo run --release -p bench --example composite_keys --features sqlite
//! cargo run --release -p bench --example composite_keys --features sqlite -- --districts 100 --orders 3000 --secs 2
//! ```
//!
//! ```text
//!   data:    orders(w_id, d_id, o_id, c_id, amount), D districts (10 per
//!            warehouse) of O orders each (TPC-C has 3,000 per district),
//!            o_id 1..=O, c_id random; inserted district by district in a
//!            random order of o_id, so key order is not row order.
//!   engine:  created with TableOptions::primary_key(&["w_id", "d_id",
//!            "o_id"]) (a unique composite index built by bulk_load); pool
//!            = everything + slack; warmed by a scan and a pass over the
//!            index, then checkpointed.
//!            lookup:  txn.get_by_primary_key("orders", (w, d, o))
//!            newest:  txn.range_each("orders_pkey",
//!                        KeyRange::prefix((w, d)).desc().limit(1), ..)
//!   SQLite:  the same rows, PRIMARY KEY (w_id, d_id, o_id) (a rowid table
//!            with its automatic index: index -> rowid -> table, the
//!            engine's two steps); cache_size large enough for the file,
//!            warmed by a scan of the table and of the index.
//!            lookup:  SELECT c_id, amount FROM orders
//!                     WHERE w_id = ?1 AND d_id = ?2 AND o_id = ?3
//!            newest:  SELECT o_id, c_id FROM orders WHERE w_id = ?1 AND
//!                     d_id = ?2 ORDER BY o_id DESC LIMIT 1
//!   Both:    one thread, one read transaction per window, the same random
//!            keys; rounds alternate engine, SQLite, engine, SQLite...; each
//!            figure is the median of the rounds (min-max given); before
//!            timing, both must give the same answers for a sample of keys.
//! ```
//!
//! Built only with `--features sqlite`.

use std::path::Path;
use std::time::{Duration, Instant};

use clap::Parser;
use engine::{Column, ColumnType, Database, KeyRange, Options, TableOptions, Value};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rusqlite::Connection;

#[derive(Parser, Debug)]
#[command(about = "Composite-key lookups and descending prefix ranges: the engine beside SQLite")]
struct Args {
    /// Districts (10 per warehouse).
    #[arg(long, default_value_t = 100)]
    districts: i64,
    /// Orders per district.
    #[arg(long, default_value_t = 3000)]
    orders: i64,
    /// Seconds per measured window.
    #[arg(long, default_value_t = 1.0)]
    secs: f64,
    /// Rounds per side (at least 2).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

/// (w_id, d_id) of district `i`.
fn district(i: i64) -> (i64, i64) {
    (i / 10 + 1, i % 10 + 1)
}

type Order = (i64, i64, i64, i64, i64);

fn orders(args: &Args) -> Vec<Order> {
    let mut rng = SmallRng::seed_from_u64(22);
    let mut out = Vec::with_capacity((args.districts * args.orders) as usize);
    for i in 0..args.districts {
        let (w, d) = district(i);
        let mut ids: Vec<i64> = (1..=args.orders).collect();
        ids.shuffle(&mut rng);
        for o in ids {
            out.push((w, d, o, rng.random_range(1..=3000), o * 7 % 1000));
        }
    }
    out
}

fn engine_db(dir: &Path, data: &[Order]) -> Database {
    let pages = data.len() / 60 + data.len() / 150 + 4096;
    let db = Database::open(dir, Options::new().pool_buffers(pages)).unwrap();
    let columns = ["w_id", "d_id", "o_id", "c_id", "amount"]
        .map(|n| Column::new(n, ColumnType::I64))
        .to_vec();
    db.create_table_with(
        "orders",
        columns,
        TableOptions::default().primary_key(&["w_id", "d_id", "o_id"]),
    )
    .unwrap();
    let rows = data.iter().map(|&(w, d, o, c, a)| {
        vec![
            Value::I64(w),
            Value::I64(d),
            Value::I64(o),
            Value::I64(c),
            Value::I64(a),
        ]
    });
    db.bulk_load("orders", rows, |_| {}).unwrap();
    let t = db.begin().unwrap();
    assert_eq!(t.scan("orders").unwrap().count(), data.len());
    assert_eq!(
        t.range("orders_pkey", KeyRange::all()).unwrap().count(),
        data.len()
    );
    drop(t);
    db.checkpoint().unwrap();
    db
}

fn sqlite_db(path: &Path, data: &[Order]) -> Connection {
    let c = Connection::open(path).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA cache_size = -1000000;
         CREATE TABLE orders(w_id INTEGER NOT NULL, d_id INTEGER NOT NULL, o_id INTEGER NOT NULL,
                             c_id INTEGER NOT NULL, amount INTEGER NOT NULL,
                             PRIMARY KEY (w_id, d_id, o_id));",
    )
    .unwrap();
    c.execute_batch("BEGIN").unwrap();
    {
        let mut ins = c
            .prepare("INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5)")
            .unwrap();
        for &(w, d, o, cid, a) in data {
            ins.execute([w, d, o, cid, a]).unwrap();
        }
    }
    c.execute_batch("COMMIT; PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    let n: i64 = c
        .query_row("SELECT count(*) FROM orders NOT INDEXED", [], |r| r.get(0))
        .unwrap();
    let m: i64 = c
        .query_row(
            "SELECT count(*) FROM orders INDEXED BY sqlite_autoindex_orders_1 WHERE w_id > 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!((n as usize, m as usize), (data.len(), data.len()));
    c
}

/// Operations per second of `op` over `keys` (cycled) for `secs`; `op`
/// returns a value folded into a checksum, returned too.
fn window<K>(keys: &[K], secs: f64, mut op: impl FnMut(&K) -> i64) -> (f64, i64) {
    let limit = Duration::from_secs_f64(secs);
    let started = Instant::now();
    let (mut n, mut sum) = (0u64, 0i64);
    'outer: loop {
        for chunk in keys.chunks(256) {
            for k in chunk {
                sum = sum.wrapping_add(op(k));
            }
            n += chunk.len() as u64;
            if started.elapsed() >= limit {
                break 'outer;
            }
        }
    }
    (n as f64 / started.elapsed().as_secs_f64(), sum)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args = Args::parse();
    assert!(args.rounds >= 2, "--rounds must be at least 2");
    let data = orders(&args);
    let dir = tempfile::tempdir().unwrap();
    let load = Instant::now();
    let db = engine_db(&dir.path().join("engine"), &data);
    let engine_load = load.elapsed();
    let load = Instant::now();
    let sq = sqlite_db(&dir.path().join("orders.db"), &data);
    let sqlite_load = load.elapsed();

    let mut rng = SmallRng::seed_from_u64(7);
    let full: Vec<(i64, i64, i64)> = (0..1 << 16)
        .map(|_| {
            let (w, d) = district(rng.random_range(0..args.districts));
            (w, d, rng.random_range(1..=args.orders))
        })
        .collect();
    let prefixes: Vec<(i64, i64)> = (0..1 << 16)
        .map(|_| district(rng.random_range(0..args.districts)))
        .collect();

    let table = db.table_handle("orders").unwrap();
    let pk = table.primary_key().unwrap();
    let (o_col, c_col) = (table.column("o_id").unwrap(), table.column("c_id").unwrap());
    let txn = db.begin().unwrap();
    let eng_lookup = |&(w, d, o): &(i64, i64, i64)| -> i64 {
        let (_, row) = txn.get_by_primary_key(&table, (w, d, o)).unwrap().unwrap();
        row[3].as_i64().unwrap() * 1000 + row[4].as_i64().unwrap()
    };
    let eng_newest = |&(w, d): &(i64, i64)| -> i64 {
        let mut got = 0;
        txn.range_each(&pk, KeyRange::prefix((w, d)).desc().limit(1), |row| {
            got = row.i64(o_col)? * 10_000 + row.i64(c_col)?;
            Ok(())
        })
        .unwrap();
        got
    };
    sq.execute_batch("BEGIN").unwrap();
    let mut look = sq
        .prepare("SELECT c_id, amount FROM orders WHERE w_id = ?1 AND d_id = ?2 AND o_id = ?3")
        .unwrap();
    let mut newest = sq
        .prepare(
            "SELECT o_id, c_id FROM orders WHERE w_id = ?1 AND d_id = ?2 ORDER BY o_id DESC LIMIT 1",
        )
        .unwrap();
    let plan: String = sq
        .query_row(
            "EXPLAIN QUERY PLAN SELECT o_id, c_id FROM orders WHERE w_id = ?1 AND d_id = ?2 \
             ORDER BY o_id DESC LIMIT 1",
            [1, 1],
            |r| r.get(3),
        )
        .unwrap();
    let mut sq_lookup = |&(w, d, o): &(i64, i64, i64)| -> i64 {
        look.query_row([w, d, o], |r| {
            Ok(r.get::<_, i64>(0)? * 1000 + r.get::<_, i64>(1)?)
        })
        .unwrap()
    };
    let mut sq_newest = |&(w, d): &(i64, i64)| -> i64 {
        newest
            .query_row([w, d], |r| {
                Ok(r.get::<_, i64>(0)? * 10_000 + r.get::<_, i64>(1)?)
            })
            .unwrap()
    };
    // Same answers first (and warm both).
    for k in &full {
        assert_eq!(eng_lookup(k), sq_lookup(k), "lookup {k:?}");
    }
    for p in &prefixes {
        assert_eq!(eng_newest(p), sq_newest(p), "newest of {p:?}");
    }
    let (mut el, mut sl, mut en, mut sn) = (vec![], vec![], vec![], vec![]);
    for _ in 0..args.rounds {
        let (a, x) = window(&full, args.secs, eng_lookup);
        let (b, y) = window(&full, args.secs, &mut sq_lookup);
        let (c, u) = window(&prefixes, args.secs, eng_newest);
        let (d, v) = window(&prefixes, args.secs, &mut sq_newest);
        assert!(x != 0 && y != 0 && u != 0 && v != 0);
        el.push(a);
        sl.push(b);
        en.push(c);
        sn.push(d);
    }
    println!(
        "{} orders in {} districts; load: engine {:.1} s, SQLite {:.1} s; SQLite {}; plan: {plan}",
        data.len(),
        args.districts,
        engine_load.as_secs_f64(),
        sqlite_load.as_secs_f64(),
        rusqlite::version()
    );
    println!(
        "{:<44} {:>16} {:>16} {:>7}",
        "per second (median of rounds, min-max)", "engine", "SQLite", "ratio"
    );
    for (name, e, s) in [
        ("lookup by (w_id, d_id, o_id)", &mut el, &mut sl),
        (
            "newest order of (w_id, d_id): desc limit 1",
            &mut en,
            &mut sn,
        ),
    ] {
        let (emin, emax) = (
            e.iter().copied().fold(f64::MAX, f64::min),
            e.iter().copied().fold(0.0, f64::max),
        );
        let (smin, smax) = (
            s.iter().copied().fold(f64::MAX, f64::min),
            s.iter().copied().fold(0.0, f64::max),
        );
        let (em, sm) = (median(e), median(s));
        println!(
            "{name:<44} {:>16} {:>16} {:>6.2}x",
            format!("{:.0}k ({:.0}-{:.0})", em / 1e3, emin / 1e3, emax / 1e3),
            format!("{:.0}k ({:.0}-{:.0})", sm / 1e3, smin / 1e3, smax / 1e3),
            em / sm
        );
    }
}
