//! The driver of `compare-sqlite`: data (cached), the alternating runs,
//! the windows, the checks, the report rows.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use engine::{Database, Options};
use rusqlite::Connection;

use super::engine_side::{
    engine_bulk_load, engine_lookups, engine_scan_count, engine_scan_count_owned, engine_scan_sum,
    engine_scan_sum_owned, engine_zipf_probes,
};
use super::sqlite_side::{
    self, sqlite_bulk_load, sqlite_lookups, sqlite_scan_count, sqlite_scan_sum, sqlite_zipf_probes,
};
use super::{
    Accounts, CompareReport, Counter, DataInfo, Expect, K_INDEX, NAME, Params, Row, TABLE, Tally,
    Workload, WorkloadSet, ZIPF_PER_TXN, ZIPF_THREADS, ZipfTruth, ratio,
};
use crate::common::{self, CpuSample, Settings};
use crate::dataset::median;
use crate::dirs::{self, io_error};
use crate::error::{BenchError, Result};
use crate::harness::{self, RowSeries};
use crate::latency::Latencies;
use crate::scenarios::{index_residency, tables};

/// Bump when the cached layout changes (engine and SQLite caches).
const CACHE_FORMAT: u32 = 1;
/// Lookup keys drawn up front (both sides walk the same ones).
const KEYS: usize = 1 << 21;
/// Lookups compared one by one between the two sides before timing.
const SAMPLE_MAX: usize = 20_000;
const STAMP: &str = "STAMP.json";

fn mib(pages: usize) -> usize {
    (pages * bufmgr::PAGE_SIZE) >> 20
}

/// Pages the engine's pool gets for accounts when `--pool-*` is not given:
/// heap (~55 rows a page) + index (~300 entries a page) with room to spare.
fn auto_pool(rows: u64) -> usize {
    (rows / 30) as usize + 4096
}

/// A page cache in KiB of twice `bytes`, at least 64 MiB.
fn cache_for(bytes: u64) -> i64 {
    ((2 * bytes / 1024) as i64).max(64 * 1024)
}

/// A cached SQLite file: reuse it when its stamp equals `stamp`, else
/// build it with `build(path)`. Returns the path, whether reused, build secs.
fn ensure_sqlite(
    dir: &Path,
    file: &str,
    stamp: &serde_json::Value,
    build: impl FnOnce(&Path) -> Result<()>,
) -> Result<(PathBuf, bool, f64)> {
    let path = dir.join(file);
    let stamp_path = dir.join(STAMP);
    if path.exists()
        && fs::read_to_string(&stamp_path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .as_ref()
            == Some(stamp)
    {
        println!(
            "reusing the SQLite database {} ({} MiB)",
            path.display(),
            fs::metadata(&path).map_or(0, |m| m.len()) >> 20
        );
        return Ok((path, true, 0.0));
    }
    dirs::remove_dir(dir)?;
    fs::create_dir_all(dir).map_err(io_error("create", dir))?;
    let started = Instant::now();
    build(&path)?;
    let secs = started.elapsed().as_secs_f64();
    let text = serde_json::to_string_pretty(stamp).expect("plain JSON");
    fs::write(&stamp_path, text + "\n").map_err(io_error("write", &stamp_path))?;
    println!(
        "built the SQLite database {} ({} MiB) in {secs:.1} s",
        path.display(),
        fs::metadata(&path).map_or(0, |m| m.len()) >> 20
    );
    Ok((path, false, secs))
}

/// Read every page of `rels` (main forks) and of the commit log into the
/// pool once; returns the pages of each relation.
fn warm_engine(db: &Database, rels: &[bufmgr::RelId]) -> Result<Vec<u32>> {
    let pool = db.pool().clone();
    let mut pages = Vec::new();
    for &rel in rels.iter().chain([&engine::CLOG_REL]) {
        let rf = bufmgr::RelFork::main(rel);
        let nb = pool.nblocks(rf)?;
        for b in 0..nb {
            drop(pool.read_buffer(rf, b, None)?);
        }
        pages.push(nb);
    }
    pages.pop();
    Ok(pages)
}

fn index_rel(db: &Database, name: &str) -> Result<bufmgr::RelId> {
    db.indexes()
        .into_iter()
        .find(|i| i.name == name)
        .map(|i| i.rel)
        .ok_or_else(|| BenchError::Data(format!("index {name} is missing")))
}

/// One timed window of `states.len()` threads.
struct Window {
    per_sec: f64,
    /// Lookups done (and checked) in all, warm-up included.
    lookups: u64,
    errors: u64,
    first_error: Option<String>,
    others: Option<f64>,
    /// Every lookup of the window, timed (the threads merged).
    latencies: Latencies,
    /// Lookups in the window (what `per_sec` counts).
    window_ops: u64,
}

/// Run `work(thread, state, stop, tally)` on one thread per state: a
/// warm-up, then the window between two reads of the lookup counters; then
/// `stop`. Every lookup is checked by its tally against `expect`, and
/// timed as `kind` inside the window.
fn window<S, F>(
    states: &mut [S],
    (warmup, duration): (Duration, Duration),
    expect: &dyn Expect,
    kind: &'static str,
    work: F,
) -> Result<Window>
where
    S: Send,
    F: Fn(usize, &mut S, &AtomicBool, &mut Tally<'_>) -> Result<()> + Sync,
{
    let counters: Vec<Counter> = states.iter().map(|_| Counter::default()).collect();
    let stop = AtomicBool::new(false);
    let in_window = AtomicBool::new(false);
    let count = || -> u64 { counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum() };
    let ((c0, t0, cpu0, c1, t1, cpu1, early), outs) = harness::run_crew(
        states.iter_mut(),
        &|t, state: &mut S| -> Result<(u64, u64, Option<String>, Latencies)> {
            let mut tally = Tally::timed(expect, &counters[t], kind, &in_window);
            let r = work(t, state, &stop, &mut tally);
            // Whatever happened, let the others stop too.
            if r.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            let lat = tally.latencies();
            r.map(|()| (tally.lookups, tally.errors, tally.first_error, lat))
        },
        || stop.store(true, Ordering::Relaxed),
        |crew| {
            let sleep = |d: Duration| {
                let end = Instant::now() + d;
                while Instant::now() < end && crew.alive() {
                    std::thread::sleep((end - Instant::now()).min(Duration::from_millis(20)));
                }
            };
            sleep(warmup);
            in_window.store(true, Ordering::Relaxed);
            let (c0, t0, cpu0) = (count(), Instant::now(), CpuSample::now());
            sleep(duration);
            let (c1, t1, cpu1) = (count(), Instant::now(), CpuSample::now());
            in_window.store(false, Ordering::Relaxed);
            Ok((c0, t0, cpu0, c1, t1, cpu1, !crew.alive()))
        },
    )?;
    if early {
        return Err(BenchError::Data(
            "a lookup thread ended before the window did".into(),
        ));
    }
    let (mut lookups, mut errors, mut first_error) = (0, 0, None);
    let mut latencies = Latencies::new();
    for (l, e, f, lat) in outs {
        lookups += l;
        errors += e;
        latencies.merge(&lat);
        if first_error.is_none() {
            first_error = f;
        }
    }
    let secs = (t1 - t0).as_secs_f64();
    Ok(Window {
        per_sec: (c1 - c0) as f64 / secs,
        lookups,
        errors,
        first_error,
        others: cpu0.zip(cpu1).map(|(a, b)| b.cores_since(&a, secs).1),
        latencies,
        window_ops: c1 - c0,
    })
}

/// Walk `len` items from thread `t`'s own offset to the end, then from 0,
/// calling `f(from)` (which returns when the items run out or `stop` is
/// set) until `stop`.
fn cycle(
    len: usize,
    t: usize,
    threads: usize,
    stop: &AtomicBool,
    mut f: impl FnMut(usize) -> Result<usize>,
) -> Result<()> {
    let mut from = t * len / threads.max(1);
    loop {
        f(from)?;
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        from = 0;
    }
}

/// What the runs of one workload gathered.
#[derive(Default)]
struct Runs {
    engine: Vec<f64>,
    sqlite: Vec<f64>,
    engine_reads: u64,
    others: Vec<f64>,
    errors: Vec<String>,
    checked: u64,
    engine_result: Option<i64>,
    sqlite_result: Option<i64>,
    /// Both sides' latencies, by kind.
    latencies: Latencies,
    engine_window_ops: u64,
    sqlite_window_ops: u64,
}

impl Runs {
    fn error(&mut self, side: &str, e: String) {
        self.errors.push(format!("{side}: {e}"));
    }

    fn window(&mut self, side: &str, w: &Window) {
        self.checked += w.lookups;
        self.latencies.merge(&w.latencies);
        if side == "engine" {
            self.engine_window_ops += w.window_ops;
        } else {
            self.sqlite_window_ops += w.window_ops;
        }
        if let Some(o) = w.others {
            self.others.push(o);
        }
        if w.errors > 0 {
            self.error(
                side,
                format!(
                    "{} wrong lookups, first: {}",
                    w.errors,
                    w.first_error.as_deref().unwrap_or("?")
                ),
            );
        }
    }

    fn row(
        self,
        w: Workload,
        description: &str,
        threads: usize,
        per_txn: Option<usize>,
        unit: &str,
    ) -> Row {
        let (e, s) = (median(&self.engine), median(&self.sqlite));
        let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        let agree = self.errors.is_empty();
        Row {
            workload: w.name().into(),
            description: description.into(),
            threads,
            per_txn,
            unit: unit.into(),
            engine_per_sec: e,
            sqlite_per_sec: s,
            ratio: ratio(e, s),
            engine_min: min(&self.engine),
            engine_max: max(&self.engine),
            sqlite_min: min(&self.sqlite),
            sqlite_max: max(&self.sqlite),
            engine_runs: self.engine,
            sqlite_runs: self.sqlite,
            engine_pages_read: self.engine_reads,
            checked: self.checked,
            engine_result: self.engine_result,
            sqlite_result: self.sqlite_result,
            agree,
            error: (!agree).then(|| self.errors.join("; ")),
            other_cores_used: (!self.others.is_empty())
                .then(|| self.others.iter().sum::<f64>() / self.others.len() as f64),
            engine_window_ops: self.engine_window_ops,
            sqlite_window_ops: self.sqlite_window_ops,
            series: RowSeries {
                latency: self.latencies.by_kind(),
                mrc: None,
                intervals: Vec::new(),
                // The accounts' keys come from the scenario's fixed seed
                // (the zipf row sets its own).
                seed: super::SEED,
            },
        }
    }
}

/// The engine's options: its defaults except the pool, `--io`, `--direct`,
/// `--mapped-reads`, `--optimistic`, `--huge-pages` (on by default, as the
/// engine's own default) and the partition count (`--partitions`, default 1). With the default topology (4
/// partitions here) a table read in by one thread does not end up spread
/// over the partitions, and lookups then keep missing in a pool 1.7 x the
/// data (916 pages read in 4 s of lookups, measured): one partition holds
/// everything, which is what this comparison wants.
fn engine_options(settings: &Settings, pool: usize) -> Options {
    Options::new()
        .pool_buffers(pool)
        .optimistic_reads(settings.optimistic)
        .partitions(engine::Partitions::Count(
            settings.partitions.first().copied().unwrap_or(1),
        ))
        .io(settings.io)
        .direct_io(settings.direct_io)
        .mapped_reads(settings.mapped_reads)
        .huge_pages(settings.huge_pages == [true])
}

/// One timed round of a lookup workload into `runs`: the engine's window,
/// then SQLite's (one connection per thread), each thread going over the
/// `len` items from its own offset; the engine's reads from storage
/// counted. Returns the two rates.
#[allow(clippy::too_many_arguments)]
fn lookup_round(
    settings: &Settings,
    truth: &dyn Expect,
    runs: &mut Runs,
    db: &Database,
    conns: &mut [Connection],
    len: usize,
    engine: impl Fn(usize, &AtomicBool, &mut Tally<'_>) -> Result<usize> + Sync,
    sqlite: impl Fn(&Connection, usize, &AtomicBool, &mut Tally<'_>) -> Result<usize> + Sync,
) -> Result<(f64, f64)> {
    let threads = conns.len();
    let r0 = reads(db);
    let mut states = vec![(); threads];
    let ew = window(
        &mut states,
        (settings.warmup, settings.duration),
        truth,
        super::ENGINE_LOOKUP,
        // Trace thread id = lookup thread number.
        |t, _, stop, tally| {
            common::traced(db, t as u32, || {
                cycle(len, t, threads, stop, |from| engine(from, stop, tally))
            })
        },
    )?;
    runs.engine_reads += reads(db) - r0;
    runs.engine.push(ew.per_sec);
    runs.window("engine", &ew);
    let sw = window(
        conns,
        (settings.warmup, settings.duration),
        truth,
        super::SQLITE_LOOKUP,
        |t, c, stop, tally| cycle(len, t, threads, stop, |from| sqlite(c, from, stop, tally)),
    )?;
    runs.sqlite.push(sw.per_sec);
    runs.window("SQLite", &sw);
    Ok((ew.per_sec, sw.per_sec))
}

fn reads(db: &Database) -> u64 {
    db.pool_stats().totals().reads
}

/// One single-threaded pass over `items` with `f`, checked: what both
/// sides' sample passes are compared by.
fn sample_tally(
    expect: &dyn Expect,
    f: impl FnOnce(&AtomicBool, &mut Tally<'_>) -> Result<usize>,
) -> Result<(u64, u64, u64, u64, Option<String>)> {
    let c = Counter::default();
    let never = AtomicBool::new(false);
    let mut t = Tally::new(expect, &c);
    f(&never, &mut t)?;
    Ok((t.lookups, t.rows, t.hash, t.errors, t.first_error))
}

/// Compare the two sides' sample passes; `None` when they agree.
fn compare_samples(
    e: &(u64, u64, u64, u64, Option<String>),
    s: &(u64, u64, u64, u64, Option<String>),
) -> Option<String> {
    if e.3 > 0 || s.3 > 0 {
        return Some(format!(
            "sample: engine {} wrong ({}), SQLite {} wrong ({})",
            e.3,
            e.4.as_deref().unwrap_or("-"),
            s.3,
            s.4.as_deref().unwrap_or("-")
        ));
    }
    (e.0 != s.0 || e.1 != s.1 || e.2 != s.2).then(|| {
        format!(
            "sample: engine {} lookups / {} rows / hash {:x}, SQLite {} / {} / {:x}",
            e.0, e.1, e.2, s.0, s.1, s.2
        )
    })
}

struct AccountsSide<'a> {
    db: &'a Database,
    conns: &'a mut Vec<Connection>,
    data: &'a Accounts,
    keys: &'a [i64],
    sqlite_path: &'a Path,
    cache_kib: i64,
}

fn lookup_rows(
    settings: &Settings,
    p: &Params,
    a: &mut AccountsSide<'_>,
    w: Workload,
    per_txn: usize,
) -> Result<Vec<Row>> {
    let truth = a.data.truth();
    let mut out = Vec::new();
    let description = format!("lookup by k, {per_txn}/txn");
    // The same keys through both, compared lookup by lookup (hash of the
    // aids each returned), before any timing.
    let sample = &a.keys[..(per_txn * 200).min(SAMPLE_MAX).min(a.keys.len())];
    let e = sample_tally(&truth, |stop, t| {
        engine_lookups(a.db, sample, per_txn, stop, t)
    })?;
    let s = sample_tally(&truth, |stop, t| {
        sqlite_lookups(&a.conns[0], sample, per_txn, stop, t)
    })?;
    let sample_error = compare_samples(&e, &s);
    for &threads in &settings.threads {
        while a.conns.len() < threads {
            let conn = sqlite_side::open(a.sqlite_path, a.cache_kib)?;
            sqlite_side::warm_accounts(&conn)?;
            a.conns.push(conn);
        }
        let mut runs = Runs {
            checked: 2 * sample.len() as u64,
            ..Runs::default()
        };
        if let Some(e) = &sample_error {
            runs.error("both", e.clone());
        }
        let keys = a.keys;
        for round in 0..p.rounds {
            let label = format!(
                "{NAME} {description} threads={threads} round {}/{}",
                round + 1,
                p.rounds
            );
            let (e, s) = lookup_round(
                settings,
                &truth,
                &mut runs,
                a.db,
                &mut a.conns[..threads],
                keys.len(),
                |from, stop, tally| engine_lookups(a.db, &keys[from..], per_txn, stop, tally),
                |c, from, stop, tally| sqlite_lookups(c, &keys[from..], per_txn, stop, tally),
            )?;
            eprintln!(
                "{label}: engine {} lookups/s, SQLite {}",
                common::fmt_rate(e),
                common::fmt_rate(s)
            );
        }
        out.push(runs.row(w, &description, threads, Some(per_txn), "lookups"));
    }
    Ok(out)
}

fn scan_row(
    p: &Params,
    a: &AccountsSide<'_>,
    w: Workload,
    description: &str,
    expected: i64,
    engine: impl Fn(&Database) -> Result<i64>,
    sqlite: impl Fn(&Connection) -> Result<i64>,
) -> Result<Row> {
    let rows = a.data.rows() as f64;
    let mut runs = Runs::default();
    for round in 0..p.rounds {
        let r0 = reads(a.db);
        let t = Instant::now();
        let ev = engine(a.db)?;
        let ed = t.elapsed();
        let es = ed.as_secs_f64();
        runs.engine_reads += reads(a.db) - r0;
        let t = Instant::now();
        let sv = sqlite(&a.conns[0])?;
        let sd = t.elapsed();
        let ss = sd.as_secs_f64();
        runs.latencies.record(super::ENGINE_SCAN, ed);
        runs.latencies.record(super::SQLITE_SCAN, sd);
        runs.engine.push(rows / es);
        runs.sqlite.push(rows / ss);
        runs.checked += 2 * a.data.rows();
        if ev != expected {
            runs.error(
                "engine",
                format!("{description} = {ev}, expected {expected}"),
            );
        }
        if sv != expected {
            runs.error(
                "SQLite",
                format!("{description} = {sv}, expected {expected}"),
            );
        }
        runs.engine_result = Some(ev);
        runs.sqlite_result = Some(sv);
        eprintln!(
            "{NAME} {description} round {}/{}: engine {es:.3} s ({ev}), SQLite {ss:.3} s ({sv})",
            round + 1,
            p.rounds
        );
    }
    Ok(runs.row(w, description, 1, None, "rows"))
}

/// Lookups of a sample of keys on a freshly loaded database, both sides
/// against the data; errors into `runs`.
fn check_loaded(
    runs: &mut Runs,
    side: &str,
    data: &Accounts,
    keys: &[i64],
    count: u64,
    sum: i64,
    sample: (u64, u64, u64, u64, Option<String>),
) {
    if count != data.expected_minus_one() || sum != data.expected_sum_k() {
        runs.error(
            side,
            format!(
                "after the load: count(abalance = -1) {count}, sum(k) {sum}; expected {} and {}",
                data.expected_minus_one(),
                data.expected_sum_k()
            ),
        );
    }
    if sample.3 > 0 || sample.0 != keys.len() as u64 {
        runs.error(
            side,
            format!(
                "after the load: {} of {} sample lookups wrong, first: {}",
                sample.3,
                keys.len(),
                sample.4.as_deref().unwrap_or("-")
            ),
        );
    }
}

fn bulk_load_row(
    settings: &Settings,
    p: &Params,
    data: &Accounts,
    keys: &[i64],
    pool: usize,
    cache_kib: i64,
) -> Result<Row> {
    let base = settings.data_dir.join(NAME).join("bulk-load-run");
    let edir = base.join("engine");
    let spath = base.join("accounts.db");
    dirs::remove_dir(&base)?;
    fs::create_dir_all(&base).map_err(io_error("create", &base))?;
    let truth = data.truth();
    let sample = &keys[..2000.min(keys.len())];
    let rows = data.rows() as f64;
    let mut runs = Runs::default();
    let mut hashes = Vec::new();
    for round in 0..p.rounds {
        // Engine: a fresh directory, timed from open to the committed load.
        dirs::remove_dir(&edir)?;
        let (cpu0, began) = (CpuSample::now(), Instant::now());
        let t = Instant::now();
        let round_part = format!("round{}", round + 1);
        let trace = settings.trace_named(&["bulkload", &round_part]);
        let db = engine_bulk_load(
            &edir,
            engine_options(settings, pool).trace(trace.clone()),
            data,
            &mut runs.latencies,
        )?;
        let es = t.elapsed().as_secs_f64();
        // The checks below stay out of the trace.
        common::note_trace(settings, trace, db.pool())?;
        let (count, sum) = (engine_scan_count(&db)?, engine_scan_sum(&db)?);
        let smp = sample_tally(&truth, |stop, t| engine_lookups(&db, sample, 100, stop, t))?;
        hashes.push(smp.2);
        check_loaded(&mut runs, "engine", data, sample, count, sum, smp);
        runs.engine_result = Some(sum);
        db.close()?;
        dirs::remove_dir(&edir)?;
        // SQLite: a fresh file, timed from open to COMMIT.
        let t = Instant::now();
        let c = sqlite_bulk_load(&spath, cache_kib, data, &mut runs.latencies)?;
        let ss = t.elapsed().as_secs_f64();
        let cpu1 = CpuSample::now();
        let (count, sum) = (sqlite_scan_count(&c)?, sqlite_scan_sum(&c)?);
        let smp = sample_tally(&truth, |stop, t| sqlite_lookups(&c, sample, 100, stop, t))?;
        hashes.push(smp.2);
        check_loaded(&mut runs, "SQLite", data, sample, count, sum, smp);
        runs.sqlite_result = Some(sum);
        drop(c);
        sqlite_side::remove(&spath);
        if let Some((a, b)) = cpu0.zip(cpu1) {
            // Over both loads (and the checks between them).
            runs.others
                .push(b.cores_since(&a, began.elapsed().as_secs_f64()).1);
        }
        runs.engine.push(rows / es);
        runs.sqlite.push(rows / ss);
        runs.checked += 2 * data.rows();
        eprintln!(
            "{NAME} bulk load round {}/{}: engine {es:.2} s, SQLite {ss:.2} s",
            round + 1,
            p.rounds
        );
    }
    if hashes.windows(2).any(|w| w[0] != w[1]) {
        runs.error("both", "sample lookups after the loads differ".into());
    }
    dirs::remove_dir(&base)?;
    Ok(runs.row(Workload::BulkLoad, "bulk load + index", 1, None, "rows"))
}

struct ZipfOut {
    row: Row,
    info: DataInfo,
    cache_kib: i64,
}

/// Both sides probe the same first keys once, checked against the truth
/// and against each other: the runs, counting them.
fn zipf_sample_runs(
    db: &Database,
    conn: &Connection,
    truth: &ZipfTruth,
    probes: &[u64],
) -> Result<Runs> {
    let sample = &probes[..2000.min(probes.len())];
    let e = sample_tally(truth, |stop, t| {
        engine_zipf_probes(db, sample, ZIPF_PER_TXN, stop, t)
    })?;
    let s = sample_tally(truth, |stop, t| {
        sqlite_zipf_probes(conn, sample, ZIPF_PER_TXN, stop, t)
    })?;
    let mut runs = Runs {
        checked: 2 * sample.len() as u64,
        ..Runs::default()
    };
    if let Some(e) = compare_samples(&e, &s) {
        runs.error("both", e);
    }
    Ok(runs)
}

/// The measured rounds: each runs the probes on the engine, then on
/// SQLite, one thread per connection, and prints both rates.
fn zipf_rounds(
    settings: &Settings,
    p: &Params,
    truth: &ZipfTruth,
    runs: &mut Runs,
    db: &Database,
    conns: &mut [Connection],
    probes: &[u64],
) -> Result<()> {
    for round in 0..p.rounds {
        let (e, s) = lookup_round(
            settings,
            truth,
            runs,
            db,
            conns,
            probes.len(),
            |from, stop, tally| engine_zipf_probes(db, &probes[from..], ZIPF_PER_TXN, stop, tally),
            |c, from, stop, tally| {
                sqlite_zipf_probes(c, &probes[from..], ZIPF_PER_TXN, stop, tally)
            },
        )?;
        eprintln!(
            "{NAME} zipf round {}/{}: engine {} probes/s, SQLite {}",
            round + 1,
            p.rounds,
            common::fmt_rate(e),
            common::fmt_rate(s)
        );
    }
    Ok(())
}

fn zipf_row(settings: &Settings, p: &Params) -> Result<ZipfOut> {
    let rows = p.zipf_rows;
    let pool = p.zipf_pool_pages;
    let cache_kib = (pool * bufmgr::PAGE_SIZE / 1024) as i64;
    println!(
        "{NAME} zipf: t(id, k1, k2, k3, filler {} bytes) of {rows} rows, 3 indexes; engine pool \
         {pool} buffers ({} MiB) shared by {ZIPF_THREADS} threads; SQLite cache {} MiB per \
         connection",
        index_residency::FILLER_LEN,
        mib(pool),
        cache_kib >> 10
    );
    let mut zs = settings.clone();
    zs.pool_buffers = pool;
    let t = Instant::now();
    let ds = index_residency::ensure_data(&zs, &index_residency::Params { rows, runs: 1 })?;
    let engine_secs = t.elapsed().as_secs_f64();
    let perms = index_residency::key_permutations(rows);
    let sdir = settings
        .data_dir
        .join(NAME)
        .join(format!("sqlite-zipf-{rows}"));
    let stamp = serde_json::json!({ "format": CACHE_FORMAT, "table": "t", "rows": rows });
    let (spath, sreused, ssecs) = ensure_sqlite(&sdir, "t.db", &stamp, |path| {
        sqlite_side::build_zipf(path, &perms, index_residency::FILLER_LEN)
    })?;
    let truth = ZipfTruth::new(&perms);
    drop(perms);
    let len = ((rows as usize) * 2)
        .next_power_of_two()
        .clamp(1 << 16, 1 << 22);
    let probes = index_residency::draw_probes(rows, len, settings.seed(index_residency::SEED))?;
    let trace = settings.trace_named(&["zipf"]);
    let db = Database::open(
        &ds.dir,
        engine_options(settings, pool)
            .checksums(ds.stamp.checksums)
            .trace(trace.clone()),
    )?;
    let engine_pages = crate::dataset::relation_sizes(&db)?
        .iter()
        .map(|r| r.pages as u64)
        .sum();
    let mut conns = (0..ZIPF_THREADS)
        .map(|_| sqlite_side::open(&spath, cache_kib))
        .collect::<Result<Vec<_>>>()?;
    let mut runs = zipf_sample_runs(&db, &conns[0], &truth, &probes)?;
    let threads = ZIPF_THREADS;
    zipf_rounds(
        settings,
        p,
        &truth,
        &mut runs,
        &db,
        &mut conns[..threads],
        &probes,
    )?;
    common::note_trace(settings, trace, db.pool())?;
    db.close()?;
    drop(conns);
    let mut row = runs.row(
        Workload::Zipf,
        "zipf probes, 3 indexes",
        threads,
        Some(ZIPF_PER_TXN),
        "lookups",
    );
    row.series.seed = settings.seed(index_residency::SEED);
    Ok(ZipfOut {
        row,
        info: DataInfo {
            engine_dir: ds.dir.display().to_string(),
            engine_pages,
            engine_reused: ds.reused,
            engine_build_secs: if ds.reused { 0.0 } else { engine_secs },
            sqlite_bytes: fs::metadata(&spath).map_or(0, |m| m.len()),
            sqlite_file: spath.display().to_string(),
            sqlite_reused: sreused,
            sqlite_build_secs: ssecs,
        },
        cache_kib,
    })
}

/// Run every selected workload.
pub fn run(settings: &Settings, p: &Params) -> Result<CompareReport> {
    let n = p.rows;
    let pool = if settings.pool_buffers == 0 {
        auto_pool(n)
    } else {
        settings.pool_buffers
    };
    println!(
        "== {NAME}: the engine beside SQLite {} on the same data; accounts {n} rows, \
         {} runs per side alternating; engine pool {pool} buffers ({} MiB); {} cores",
        sqlite_side::version(),
        p.rounds,
        mib(pool),
        common::cores()
    );
    let ws = p.workloads;
    let (wants_accounts, wants_read) = wanted(ws);
    let mut rows = Vec::new();
    let mut accounts_data = None;
    let mut cache_kib = cache_for(n * 130);
    let data = wants_accounts.then(|| Accounts::generate(n));
    let keys = data.as_ref().map(|d| d.keys(KEYS)).unwrap_or_default();
    if let (Some(data), true) = (&data, wants_read) {
        let (read_rows, info, kib) = accounts_reads(settings, p, data, &keys, pool)?;
        rows.extend(read_rows);
        accounts_data = Some(info);
        cache_kib = kib;
    }
    if let (Some(data), true) = (&data, ws.contains(Workload::BulkLoad)) {
        rows.push(bulk_load_row(settings, p, data, &keys, pool, cache_kib)?);
    }
    drop(keys);
    drop(data);
    let (mut zipf_data, mut zipf_cache) = (None, 0);
    if ws.contains(Workload::Zipf) {
        let z = zipf_row(settings, p)?;
        rows.push(z.row);
        zipf_data = Some(z.info);
        zipf_cache = z.cache_kib;
    }
    let errors: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            r.error
                .as_ref()
                .map(|e| format!("{} threads={}: {e}", r.workload, r.threads))
        })
        .collect();
    Ok(CompareReport {
        scenario: NAME.into(),
        accounts_rows: n,
        zipf_rows: p.zipf_rows,
        rounds: p.rounds,
        warmup_secs: settings.warmup.as_secs_f64(),
        duration_secs: settings.duration.as_secs_f64(),
        cores: common::cores(),
        engine_pool_buffers: pool,
        zipf_pool_buffers: p.zipf_pool_pages,
        sqlite_cache_kib: cache_kib,
        zipf_sqlite_cache_kib: zipf_cache,
        sqlite_version: sqlite_side::version(),
        sqlite_settings: sqlite_side::SETTINGS.into(),
        engine_settings: format!(
            "engine defaults (synchronous commit with fdatasync, checksums on, clock \
             evictor, background writer and checkpointer, huge pages asked for) except \
             the pool and {} pool partition(s){}; read paths: handles, begin + lookup_each \
             / scan_each + commit (a reader's commit writes nothing)",
            settings.partitions.first().copied().unwrap_or(1),
            if settings.huge_pages == [true] {
                ""
            } else {
                ", huge pages off"
            }
        ),
        accounts_data,
        zipf_data,
        ok: errors.is_empty(),
        errors,
        rows,
    })
}

/// Whether the selected workloads need the accounts data, and whether any
/// of them reads it (all but bulk-load).
fn wanted(ws: WorkloadSet) -> (bool, bool) {
    let wants_accounts = [
        Workload::Lookup1,
        Workload::Lookup100,
        Workload::ScanCount,
        Workload::ScanSum,
        Workload::ScanCountOwned,
        Workload::ScanSumOwned,
        Workload::BulkLoad,
    ]
    .iter()
    .any(|&w| ws.contains(w));
    let wants_read = [
        Workload::Lookup1,
        Workload::Lookup100,
        Workload::ScanCount,
        Workload::ScanSum,
        Workload::ScanCountOwned,
        Workload::ScanSumOwned,
    ]
    .iter()
    .any(|&w| ws.contains(w));
    (wants_accounts, wants_read)
}

/// The accounts data on both sides, built once per size (or reused): the
/// engine's directory and SQLite's file.
struct AccountsData {
    engine_dir: PathBuf,
    engine_reused: bool,
    engine_build_secs: f64,
    sqlite_path: PathBuf,
    sqlite_reused: bool,
    sqlite_build_secs: f64,
    sqlite_bytes: u64,
}

/// Build (or reuse) the accounts data of `n` rows on both sides.
fn ensure_accounts(
    settings: &Settings,
    data: &Accounts,
    n: u64,
    pool: usize,
) -> Result<AccountsData> {
    let mut es = settings.clone();
    es.pool_buffers = pool;
    let scale = serde_json::json!({ "format": CACHE_FORMAT, "rows": n });
    let t = Instant::now();
    let (edir, ereused) =
        tables::ensure_db(&es, NAME, &format!("accounts-{n}"), &scale, |db, pb| {
            db.create_table(TABLE, Accounts::columns())?;
            db.create_index(K_INDEX, TABLE, "k", false)?;
            tables::load_rows(db, TABLE, n, pb, data.engine_rows())
        })?;
    let esecs = t.elapsed().as_secs_f64();
    let sdir = settings
        .data_dir
        .join(NAME)
        .join(format!("sqlite-accounts-{n}"));
    let (spath, sreused, ssecs) = ensure_sqlite(&sdir, "accounts.db", &scale, |path| {
        // The cached file's build is not a timed load.
        let c = sqlite_bulk_load(path, cache_for(n * 130), data, &mut Latencies::new())?;
        c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
        Ok(())
    })?;
    let sbytes = fs::metadata(&spath).map_or(0, |m| m.len());
    Ok(AccountsData {
        engine_dir: edir,
        engine_reused: ereused,
        engine_build_secs: esecs,
        sqlite_path: spath,
        sqlite_reused: sreused,
        sqlite_build_secs: ssecs,
        sqlite_bytes: sbytes,
    })
}

/// The read workloads on the accounts data: the data built or reused, the
/// engine's pool and SQLite's cache warmed, every selected read workload
/// run, the engine's table checked after them. Returns the rows, the
/// data's sizes and SQLite's cache per connection (KiB).
fn accounts_reads(
    settings: &Settings,
    p: &Params,
    data: &Accounts,
    keys: &[i64],
    pool: usize,
) -> Result<(Vec<Row>, DataInfo, i64)> {
    let n = p.rows;
    let AccountsData {
        engine_dir: edir,
        engine_reused: ereused,
        engine_build_secs: esecs,
        sqlite_path: spath,
        sqlite_reused: sreused,
        sqlite_build_secs: ssecs,
        sqlite_bytes: sbytes,
    } = ensure_accounts(settings, data, n, pool)?;
    let cache_kib = if settings.pool_buffers == 0 {
        cache_for(sbytes)
    } else {
        (pool * bufmgr::PAGE_SIZE / 1024) as i64
    };
    // One trace for every accounts workload (they share this database).
    let trace = settings.trace_named(&["accounts"]);
    let db = Database::open(&edir, engine_options(settings, pool).trace(trace.clone()))?;
    let rels = [db.table(TABLE)?.rel, index_rel(&db, K_INDEX)?];
    let pages = warm_engine(&db, &rels)?;
    let engine_pages: u64 = pages.iter().map(|&p| u64::from(p)).sum();
    println!(
        "engine: table {} pages + index {} pages = {} MiB in a pool of {} MiB (all read in); \
             SQLite: file {} MiB, cache {} MiB per connection",
        pages[0],
        pages[1],
        mib(engine_pages as usize),
        mib(pool),
        sbytes >> 20,
        cache_kib >> 10
    );
    if engine_pages as usize + 1024 > pool {
        return Err(BenchError::Config(format!(
            "{NAME}: the engine's pool ({pool} buffers) does not hold table + index \
                 ({engine_pages} pages); leave --pool-mib out or raise it"
        )));
    }
    let c = sqlite_side::open(&spath, cache_kib)?;
    let counted = sqlite_side::warm_accounts(&c)?;
    if counted != n {
        return Err(BenchError::Data(format!(
            "SQLite: accounts has {counted} rows, expected {n}"
        )));
    }
    let mut conns = vec![c];
    let mut rows = {
        let mut a = AccountsSide {
            db: &db,
            conns: &mut conns,
            data,
            keys,
            sqlite_path: &spath,
            cache_kib,
        };
        read_rows(settings, p, &mut a)?
    };
    drop(conns);
    common::note_trace(settings, trace, db.pool())?;
    let check = tables::check_table(&db, TABLE, Some(n))?;
    db.close()?;
    if let Some(e) = check.error() {
        rows.iter_mut().for_each(|r| {
            r.agree = false;
            r.error.get_or_insert_with(|| e.clone());
        });
    }
    let info = DataInfo {
        engine_dir: edir.display().to_string(),
        engine_pages,
        engine_reused: ereused,
        engine_build_secs: if ereused { 0.0 } else { esecs },
        sqlite_file: spath.display().to_string(),
        sqlite_bytes: sbytes,
        sqlite_reused: sreused,
        sqlite_build_secs: ssecs,
    };
    Ok((rows, info, cache_kib))
}

/// Every selected read workload on the accounts data, in a fixed order.
fn read_rows(settings: &Settings, p: &Params, a: &mut AccountsSide<'_>) -> Result<Vec<Row>> {
    let ws = p.workloads;
    let data = a.data;
    let mut rows = Vec::new();
    if ws.contains(Workload::Lookup1) {
        rows.extend(lookup_rows(settings, p, a, Workload::Lookup1, 1)?);
    }
    if ws.contains(Workload::Lookup100) {
        rows.extend(lookup_rows(settings, p, a, Workload::Lookup100, 100)?);
    }
    if ws.contains(Workload::ScanCount) {
        rows.push(scan_row(
            p,
            a,
            Workload::ScanCount,
            "scan count(abalance = -1)",
            data.expected_minus_one() as i64,
            |db| Ok(engine_scan_count(db)? as i64),
            |c| Ok(sqlite_scan_count(c)? as i64),
        )?);
    }
    if ws.contains(Workload::ScanSum) {
        rows.push(scan_row(
            p,
            a,
            Workload::ScanSum,
            "scan sum(k)",
            data.expected_sum_k(),
            engine_scan_sum,
            sqlite_scan_sum,
        )?);
    }
    if ws.contains(Workload::ScanCountOwned) {
        rows.push(scan_row(
            p,
            a,
            Workload::ScanCountOwned,
            "scan count(abalance = -1), owned rows",
            data.expected_minus_one() as i64,
            |db| Ok(engine_scan_count_owned(db)? as i64),
            |c| Ok(sqlite_scan_count(c)? as i64),
        )?);
    }
    if ws.contains(Workload::ScanSumOwned) {
        rows.push(scan_row(
            p,
            a,
            Workload::ScanSumOwned,
            "scan sum(k), owned rows",
            data.expected_sum_k(),
            engine_scan_sum_owned,
            sqlite_scan_sum,
        )?);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_side_opens_with_the_io_backend_and_direct_io_asked_for() {
        let args = crate::common::CommonArgs {
            io: Some(bufmgr::IoMode::IoUring),
            direct: true,
            ..Default::default()
        };
        let settings = args.resolve(&super::super::defaults()).unwrap();
        let o = engine_options(&settings, 64);
        assert_eq!((o.io, o.direct_io), (bufmgr::IoMode::IoUring, true));
        let args = crate::common::CommonArgs {
            mapped_reads: true,
            ..Default::default()
        };
        let settings = args.resolve(&super::super::defaults()).unwrap();
        assert!(engine_options(&settings, 64).mapped_reads);
    }
}
