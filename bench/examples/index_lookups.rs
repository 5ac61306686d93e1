//! Point lookups through a secondary B-tree index plus a heap fetch, the
//! engine beside SQLite in the same run (the B-tree issue's closing figures).
//!
//! ```text
//! cargo run --release -p bench --example index_lookups --features sqlite
//! cargo run --release -p bench --example index_lookups --features sqlite -- --rows 200000 --secs 2
//! ```
//!
//! ```text
//!   engine:  t(id i64, k i64, v i64), N rows, k = a random permutation of
//!            0..N (so key order is not heap order), a NON-unique B-tree on
//!            k; loaded by Database::bulk_load; pool = table + index + slack.
//!            Warm-up: every page of table, index and commit log read once,
//!            one full scan (sets every hint bit, so lookups write nothing),
//!            a checkpoint (nothing dirty left for the background writer).
//!            A lookup: txn.index_lookup("t_k", &Value::I64(key)) -> the one
//!            row (descend the index, fetch the heap tuple through the
//!            snapshot, re-check the key). One transaction per thread for
//!            the whole window (a read-only commit would write a record).
//!   SQLite:  t(id INTEGER PRIMARY KEY, k INTEGER NOT NULL, v INTEGER), the
//!            same N rows, CREATE INDEX t_k ON t(k) (index -> rowid -> table
//!            B-tree: the same two steps); one connection per thread with
//!            PRAGMA cache_size large enough for the whole file, warmed by
//!            a scan of the table and of the index; one prepared statement
//!            SELECT id, k, v FROM t WHERE k = ?1 reused; one read
//!            transaction per thread for the window (as the engine's).
//!   Both:    the same precomputed uniform random keys; thread i starts at
//!            its own offset; W seconds after a warm-up; every lookup must
//!            return exactly one row with its key; before timing, both must
//!            return the same row for a sample of keys.
//! ```
//!
//! Built only with `--features sqlite` (the bundled SQLite takes ~48 s of
//! one core to compile).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bench::common::CpuSample;
use clap::Parser;
use engine::{Column, ColumnType, Database, Options, Value};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rusqlite::{Connection, OpenFlags};

const TABLE: &str = "t";
const INDEX: &str = "t_k";
/// Keys drawn up front (a random draw costs about as much as a cache hit).
const KEYS: usize = 1 << 22;
/// Lookups between two looks at the clock.
const CHUNK: usize = 256;
/// Keys whose rows both databases must agree on.
const SAMPLE: usize = 2_000;

#[derive(Parser, Debug)]
#[command(about = "Point lookups through a secondary index: the engine beside SQLite")]
struct Args {
    /// Rows in the table
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Measured window per (database, threads), seconds
    #[arg(long, default_value_t = 5.0)]
    secs: f64,
    /// Warm-up lookups before each window, seconds
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Thread counts to measure
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Where both databases are built [default: a temporary directory]
    #[arg(long)]
    dir: Option<PathBuf>,
}

type Res<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Row `id`: `(id, k, v)` with `k = perm[id]`, `v = id * 7 + 3`.
fn v_of(id: i64) -> i64 {
    id * 7 + 3
}

fn main() -> Res<()> {
    let args = Args::parse();
    if args.rows == 0 || args.threads.is_empty() || args.threads.contains(&0) {
        return Err("--rows and every --threads value must be at least 1".into());
    }
    let tmp;
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d)?;
            d.clone()
        }
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let n = args.rows;
    let mut perm: Vec<i64> = (0..n as i64).collect();
    perm.shuffle(&mut SmallRng::seed_from_u64(0x1d_0001));
    let mut rng = SmallRng::seed_from_u64(0x1d_0002);
    let keys: Vec<i64> = (0..KEYS).map(|_| rng.random_range(0..n as i64)).collect();

    println!(
        "== index lookups: {n} rows (id, k, v), k a random permutation, non-unique index on k; \
         {} s windows after {} s warm-ups; {} cores",
        args.secs,
        args.warmup,
        std::thread::available_parallelism().map_or(1, |c| c.get())
    );
    let db = build_engine(&dir.join("engine"), &perm)?;
    let sqlite_path = dir.join("sqlite.db");
    build_sqlite(&sqlite_path, &perm)?;
    drop(perm);
    let cache_kib = sqlite_cache_kib(&sqlite_path)?;

    // Both must return the same row for a sample of keys (and the row must
    // be the one we loaded).
    let checked = compare_sample(&db, &sqlite_path, cache_kib, &keys[..SAMPLE.min(KEYS)])?;
    println!("data check: {checked} sample keys, both return the same single row");

    let mut lines = Vec::new();
    for &t in &args.threads {
        let reads_before = db.pool_stats().totals().reads;
        let (e, e_others) = run_engine(&db, &keys, t, args.warmup, args.secs)?;
        let reads = db.pool_stats().totals().reads - reads_before;
        let (s, s_others) = run_sqlite(&sqlite_path, cache_kib, &keys, t, args.warmup, args.secs)?;
        let others = match (e_others, s_others) {
            (Some(a), Some(b)) => format!("{a:.2} / {b:.2}"),
            _ => "?".into(),
        };
        println!(
            "threads {t}: engine {} lookups/s ({} pages read from storage), SQLite {} lookups/s; \
             other processes used {others} cores",
            rate(e),
            reads,
            rate(s)
        );
        lines.push((t, e, s, reads, others));
    }
    let mut out = String::new();
    writeln!(
        out,
        "\n{:>7}  {:>16}  {:>16}  {:>13}  {:>12}  {:>21}",
        "threads",
        "engine lookups/s",
        "SQLite lookups/s",
        "engine/SQLite",
        "engine reads",
        "others (eng / SQLite)"
    )?;
    for (t, e, s, reads, others) in &lines {
        writeln!(
            out,
            "{t:>7}  {:>16}  {:>16}  {:>12.2}x  {reads:>12}  {others:>21}",
            rate(*e),
            rate(*s),
            e / s
        )?;
    }
    if let (Some(a), Some(b)) = (
        lines.iter().find(|l| l.0 == 1),
        lines.iter().find(|l| l.0 == 2),
    ) {
        writeln!(
            out,
            "2 threads / 1 thread: engine {:.2}x, SQLite {:.2}x",
            b.1 / a.1,
            b.2 / a.2
        )?;
    }
    print!("{out}");
    db.close()?;
    Ok(())
}

fn rate(per_sec: f64) -> String {
    if per_sec >= 1e6 {
        format!("{:.2}M", per_sec / 1e6)
    } else {
        format!("{:.1}k", per_sec / 1e3)
    }
}

/// The engine's database: table, non-unique index, bulk load, warm pool.
fn build_engine(dir: &Path, perm: &[i64]) -> Res<Database> {
    let n = perm.len() as u64;
    let _ = std::fs::remove_dir_all(dir);
    // Table + index take ~75 rows a page; twice that plus slack.
    let buffers = (n as usize / 35 + 4096).max(16_384);
    let opts = Options::new().pool_buffers(buffers).checkpointer(false);
    let started = Instant::now();
    let db = Database::open(dir, opts)?;
    db.create_table(
        TABLE,
        vec![
            Column::new("id", ColumnType::I64),
            Column::new("k", ColumnType::I64),
            Column::new("v", ColumnType::I64),
        ],
    )?;
    db.create_index(INDEX, TABLE, "k", false)?;
    let rows = perm.iter().enumerate().map(|(id, &k)| {
        let id = id as i64;
        vec![Value::I64(id), Value::I64(k), Value::I64(v_of(id))]
    });
    db.bulk_load(TABLE, rows, |_| {})?;
    let loaded = started.elapsed();
    // Warm: every page of the table, its index and the commit log; one full
    // scan (hints set: lookups then change nothing); a checkpoint.
    let (table_rel, index_rel) = (
        db.table(TABLE)?.rel,
        db.indexes()
            .into_iter()
            .find(|i| i.name == INDEX)
            .ok_or("index missing")?
            .rel,
    );
    let pool = db.pool().clone();
    let mut pages = Vec::new();
    for rel in [table_rel, index_rel, engine::CLOG_REL] {
        let rf = bufmgr::RelFork::main(rel);
        let nb = pool.nblocks(rf)?;
        for b in 0..nb {
            drop(pool.read_buffer(rf, b, None)?);
        }
        pages.push(nb);
    }
    let txn = db.begin()?;
    let seen = txn
        .scan_with(
            TABLE,
            engine::ScanOptions {
                ring: engine::RingChoice::Never,
                hint_mode: engine::HintMode::PerPage,
            },
        )?
        .count() as u64;
    txn.rollback()?;
    if seen != n {
        return Err(format!("the engine's table has {seen} rows, expected {n}").into());
    }
    let violations = db.verify_indexes(TABLE)?;
    if !violations.is_empty() {
        return Err(format!("index violations: {:?}", &violations[..1]).into());
    }
    db.checkpoint()?;
    println!(
        "engine: loaded in {:.1} s; table {} pages, index {} pages, pool {} buffers ({} MiB), \
         evictor {:?}, partitions {:?}, checksums on, hint mode per-page",
        loaded.as_secs_f64(),
        pages[0],
        pages[1],
        buffers,
        (buffers * bufmgr::PAGE_SIZE) >> 20,
        db.options().evictor,
        db.options().partitions
    );
    Ok(db)
}

/// SQLite's database: the same rows, an index on k, built after the load.
fn build_sqlite(path: &Path, perm: &[i64]) -> Res<()> {
    let _ = std::fs::remove_file(path);
    let started = Instant::now();
    let mut c = Connection::open(path)?;
    c.execute_batch(
        "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
         CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER NOT NULL, v INTEGER NOT NULL);",
    )?;
    let tx = c.transaction()?;
    {
        let mut ins = tx.prepare("INSERT INTO t(id, k, v) VALUES (?1, ?2, ?3)")?;
        for (id, &k) in perm.iter().enumerate() {
            let id = id as i64;
            ins.execute((id, k, v_of(id)))?;
        }
    }
    tx.commit()?;
    c.execute_batch("CREATE INDEX t_k ON t(k); ANALYZE;")?;
    let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let page_size: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    println!(
        "SQLite {}: loaded and indexed in {:.1} s; file {} pages of {} bytes ({} MiB)",
        rusqlite::version(),
        started.elapsed().as_secs_f64(),
        pages,
        page_size,
        (pages * page_size) >> 20
    );
    Ok(())
}

/// A page cache (KiB) of twice the file, at least 64 MiB.
fn sqlite_cache_kib(path: &Path) -> Res<i64> {
    let len = std::fs::metadata(path)?.len() as i64;
    Ok((2 * len / 1024).max(64 * 1024))
}

/// One reader's connection: read-only, no mutex (one thread uses it), the
/// cache holding the whole file, warmed by a scan of table and index.
fn sqlite_reader(path: &Path, cache_kib: i64) -> Res<Connection> {
    let c = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    c.execute_batch(&format!("PRAGMA cache_size = -{cache_kib};"))?;
    let (n, _): (i64, i64) =
        c.query_row("SELECT count(*), sum(v) FROM t NOT INDEXED", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    let m: i64 = c.query_row(
        "SELECT count(*) FROM t INDEXED BY t_k WHERE k >= 0",
        [],
        |r| r.get(0),
    )?;
    if n != m {
        return Err(format!("SQLite: table has {n} rows, index {m}").into());
    }
    Ok(c)
}

const SQLITE_LOOKUP: &str = "SELECT id, k, v FROM t WHERE k = ?1";

/// The engine's and SQLite's rows for `keys` agree and are the loaded ones.
fn compare_sample(db: &Database, path: &Path, cache_kib: i64, keys: &[i64]) -> Res<usize> {
    let c = sqlite_reader(path, cache_kib)?;
    let mut stmt = c.prepare(SQLITE_LOOKUP)?;
    let txn = db.begin()?;
    for &key in keys {
        let e: Vec<(i64, i64, i64)> = txn
            .index_lookup(INDEX, &Value::I64(key))?
            .into_iter()
            .map(|(_, row)| match &*row {
                [Value::I64(a), Value::I64(b), Value::I64(c)] => Ok((*a, *b, *c)),
                other => Err(format!("engine row {other:?}")),
            })
            .collect::<Result<_, _>>()?;
        let s: Vec<(i64, i64, i64)> = stmt
            .query_map([key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<Result<_, _>>()?;
        if e.len() != 1 || e != s || e[0].1 != key || e[0].2 != v_of(e[0].0) {
            return Err(format!("key {key}: engine {e:?}, SQLite {s:?}").into());
        }
    }
    txn.rollback()?;
    Ok(keys.len())
}

/// Run `work(thread, measuring, stop)` on `threads` threads: a warm-up,
/// then the window; each returns the lookups it did in the window.
/// Lookups per second, and the cores other processes used in the window.
fn timed<F>(threads: usize, warmup: f64, secs: f64, work: F) -> Res<(f64, Option<f64>)>
where
    F: Fn(usize, &AtomicBool, &AtomicBool) -> Res<u64> + Sync,
{
    let measuring = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let (total, window, others) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (work, measuring, stop) = (&work, &measuring, &stop);
                s.spawn(move || work(t, measuring, stop))
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(warmup));
        measuring.store(true, Ordering::SeqCst);
        let cpu_before = CpuSample::now();
        let started = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::SeqCst);
        let window = started.elapsed();
        let others = cpu_before
            .zip(CpuSample::now())
            .map(|(a, b)| b.cores_since(&a, window.as_secs_f64()).1);
        let mut total = 0u64;
        let mut err = None;
        for h in handles {
            match h.join() {
                Ok(Ok(n)) => total += n,
                Ok(Err(e)) => err = Some(e),
                Err(_) => err = Some("a lookup thread panicked".into()),
            }
        }
        (err.map_or(Ok(total), Err), window, others)
    });
    Ok((total? as f64 / window.as_secs_f64(), others))
}

/// Lookups counted from the moment `measuring` is set until `stop`.
fn lookup_loop(
    t: usize,
    threads: usize,
    keys: &[i64],
    measuring: &AtomicBool,
    stop: &AtomicBool,
    mut lookup: impl FnMut(i64) -> Res<()>,
) -> Res<u64> {
    let mut i = t * keys.len() / threads;
    let (mut counted, mut started) = (0u64, false);
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..CHUNK {
            lookup(keys[i])?;
            i += 1;
            if i == keys.len() {
                i = 0;
            }
        }
        if started {
            counted += CHUNK as u64;
        } else {
            started = measuring.load(Ordering::Relaxed);
        }
    }
    Ok(counted)
}

fn run_engine(
    db: &Database,
    keys: &[i64],
    threads: usize,
    warmup: f64,
    secs: f64,
) -> Res<(f64, Option<f64>)> {
    timed(threads, warmup, secs, |t, measuring, stop| {
        let txn = db.begin()?;
        let n = lookup_loop(t, threads, keys, measuring, stop, |key| {
            let rows = txn.index_lookup(INDEX, &Value::I64(key))?;
            match rows.as_slice() {
                [(_, row)] if row[1] == Value::I64(key) => Ok(()),
                other => Err(format!("engine: key {key} gave {other:?}").into()),
            }
        })?;
        txn.rollback()?;
        Ok(n)
    })
}

fn run_sqlite(
    path: &Path,
    cache_kib: i64,
    keys: &[i64],
    threads: usize,
    warmup: f64,
    secs: f64,
) -> Res<(f64, Option<f64>)> {
    timed(threads, warmup, secs, |t, measuring, stop| {
        let c = sqlite_reader(path, cache_kib)?;
        c.execute_batch("BEGIN")?;
        let n = {
            let mut stmt = c.prepare(SQLITE_LOOKUP)?;
            lookup_loop(t, threads, keys, measuring, stop, |key| {
                let mut rows = stmt.query([key])?;
                let row = rows
                    .next()?
                    .ok_or_else(|| format!("SQLite: no row for key {key}"))?;
                let k: i64 = row.get(1)?;
                if k != key || rows.next()?.is_some() {
                    return Err(format!("SQLite: key {key} gave a wrong or second row").into());
                }
                Ok(())
            })?
        };
        c.execute_batch("COMMIT")?;
        Ok(n)
    })
}
