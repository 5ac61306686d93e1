//! `bulkload`: the bulk-write ring as backpressure (bench/SCENARIOS.md), ring on/off.
//!
//! ```text
//!   data (cached per scale): accounts, the hot set of scan-resistance:
//!     heap 35% of the pool + pk index = ~40% of the pool
//!
//!   per cell: copy the cached directory to <data-dir>/bulkload/run, open it
//!     with the cell's Options and a storage wrapper counting reads per
//!     relation; create table bulk (accounts' columns, no index)
//!     T lookup threads: get_by_key(accounts, uniform aid), 100 per txn
//!     warm-up (the hot set comes in); its second half calibrates buffer
//!       accesses per lookup (only the lookups run then)
//!     ── window = the load ─────────────────────────────────────────────
//!     one thread: db.bulk_load(bulk, 2 x pool pages of rows)
//!     every 250 ms: accounts pages resident, dirty buffers (buffercache)
//!     ──────────────────────────────────────────────────────────────────
//!     PoolStats deltas: who wrote; reads of accounts: the lookups' misses
//!   end: bulk row count, accounts row count + verify_indexes; delete copy
//! ```
//!
//! `bulk_load` with rings on writes and evicts its own table's pages every
//! ring's worth of growth (`evict_relation`: "other" writes in PoolStats);
//! with rings off it leaves them in the pool for whoever needs a victim
//! (backend writes: the loader itself extending, and the lookup threads)
//! and for the background writer. PoolStats counts per partition, not per
//! thread, so backend writes cannot be split between the loader and the
//! lookup threads; the report estimates the lookups' part from their share
//! of the victims taken (see `backend_writes_lookups_est`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bufmgr::{PoolStats, SweepBatch};
use engine::Database;
use serde::{Deserialize, Serialize};

use crate::check::DataCheck;
use crate::common::{
    self, BatchField, Config, Defaults, EvictorChoice, Report, Settings, Table, fmt_rate,
};
use crate::dataset::{self, ReadCounts};
use crate::error::{BenchError, Result};
use crate::scenarios::tables::{self, ACCOUNTS, ACCOUNTS_PK, Residency};

pub const NAME: &str = "bulkload";
/// The loaded table.
pub const BULK: &str = "bulk";
/// Accounts heap in percent of the pool (with its index ~40%).
pub const HOT_HEAP_PCT: u64 = 35;
/// The load, in percent of the pool (heap pages).
pub const LOAD_PCT: u64 = 200;
/// Lookups per read-only transaction.
pub const LOOKUPS_PER_TXN: u64 = 100;
/// Residency and dirty pages are sampled this often during the load.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// Lookup threads.
pub const LOOKUP_THREADS: usize = 2;

/// The options of `bulkload` (after the scenario name).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct Args {
    /// Size of the load in percent of the pool [default: 200]
    #[arg(long, value_name = "PCT")]
    pub load_pct: Option<u64>,
}

/// Defaults: the clock, batch 1, 2 lookup threads, 2 s warm-up; the window
/// is the load.
pub fn defaults() -> Defaults {
    let mut d = crate::scenarios::ScenarioKind::Sweep.defaults();
    d.duration = Duration::from_secs(1);
    d.warmup = Duration::from_secs(2);
    d.threads = vec![LOOKUP_THREADS];
    d.batches = vec![SweepBatch::Fixed(1)];
    d.evictor = EvictorChoice::Clock;
    d.quick_pool_mib = common::QUICK_POOL_MIB;
    d.quick_threads = vec![LOOKUP_THREADS];
    d
}

/// The matrix: `--ring` (off and on unless given; see
/// `ScenarioKind::settings`) with the lookup threads.
pub fn configs(settings: &Settings) -> Vec<Config> {
    tables::configs_with(settings, &settings.threads, &settings.partitions)
}

/// One sample taken during the load.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub secs: f64,
    /// Pages of accounts and its pk index resident.
    pub hot_resident: usize,
    pub dirty: usize,
    /// Rows loaded so far.
    pub loaded_rows: u64,
}

/// One cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub evictor: String,
    pub batch: BatchField,
    pub partitions: usize,
    /// Lookup threads (the loader is one more).
    pub threads: usize,
    pub huge_pages: bool,
    pub ring: bool,
    pub load_secs: f64,
    pub load_rows: u64,
    pub load_rows_per_sec: f64,
    /// Pages the loaded table grew by.
    pub loaded_pages: u64,
    /// Pages the loader said it wrote itself (`BulkProgress::pages_written`).
    pub loader_pages_written: u64,
    /// Hit ratio of the lookups before the load (the warm-up's second half).
    pub oltp_hit_ratio_before: f64,
    /// Hit ratio of the lookups during the load: 1 - (pages of accounts
    /// read) / (lookups x accesses per lookup).
    pub oltp_hit_ratio: f64,
    pub accesses_per_lookup: f64,
    pub lookups: u64,
    pub lookups_per_sec: f64,
    /// Pages of accounts and its index read from storage during the load.
    pub hot_reads: u64,
    /// Pages of accounts + index (heap and index files).
    pub hot_set_pages: u64,
    pub hot_resident_before: usize,
    pub hot_resident_min: usize,
    pub hot_resident_end: usize,
    pub dirty_max: usize,
    pub dirty_mean: f64,
    pub dirty_end: usize,
    /// Dirty buffers written during the load, by who wrote them.
    pub writes_loader: u64,
    pub writes_bgwriter: u64,
    pub writes_backend: u64,
    pub writes_checkpoint: u64,
    /// writes_loader / all writes.
    pub loader_written_share: f64,
    pub bgwriter_written_share: f64,
    pub backend_written_share: f64,
    /// The lookups' estimated part of `writes_backend`: backend writes x
    /// their share of the victims (misses vs pages the loader extended).
    pub backend_writes_lookups_est: f64,
    /// Hit ratio of every access in the window, the loader's included.
    pub pool_hit_ratio: f64,
    pub samples: Vec<Sample>,
    pub resident: Vec<Residency>,
    /// Per NUMA node: where the buffers' memory is (queried), and the
    /// window's accesses and reads of the partitions on each node.
    #[serde(default)]
    pub nodes: Vec<tables::NodeFigures>,
    /// Flattened into the row (the JSON fields `latency`, `mrc`,
    /// `intervals` and `seed`, as before they were gathered):
    /// `latency`: per operation kind during the load: `lookup` (one
    /// `get_by_key` of the lookup threads).
    /// `mrc`: the pool's live miss-ratio curve at the load's end (`--mrc`).
    /// `intervals`: one entry per `--report-interval` (warm-up and calibration
    /// included; throughput in lookups).
    /// `seed`: the seed of lookup thread 0's keys (thread `t` draws from
    /// `seed + t`; `--seed`).
    #[serde(flatten)]
    pub series: RowSeries,
}

/// Lookup thread 0's seed without `--seed` (thread `t` uses `SEED + t`).
pub const SEED: u64 = 0xb01c;

/// A finished `bulkload` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BulkloadReport {
    pub scenario: String,
    pub accounts: u64,
    pub load_rows: u64,
    pub pool_buffers: usize,
    pub cores: usize,
    pub warmup_secs: f64,
    pub reused_data: bool,
    pub rows: Vec<Row>,
    pub data_check: DataCheck,
}

use crate::harness::{self, LiveLatency, MEASURE, Phases, RowSeries, STOP, Tally, WARMUP};
use crate::latency::{self, Latencies};

/// The loading thread's id in a `--trace` (the lookup threads are 0, 1, ...).
pub const LOADER_THREAD_ID: u32 = 1000;

fn hot_resident(db: &Database) -> usize {
    tables::resident_of(db, &[ACCOUNTS, ACCOUNTS_PK])
}

/// The relations of the hot set (accounts and its primary key) and their
/// size in pages.
fn hot_set(db: &Database) -> Result<([u32; 2], u64)> {
    let hot_rels = [
        db.table(ACCOUNTS)?.rel.0,
        db.indexes()
            .iter()
            .find(|i| i.name == ACCOUNTS_PK)
            .ok_or_else(|| BenchError::Data(format!("{ACCOUNTS_PK} is missing")))?
            .rel
            .0,
    ];
    let pool = db.pool();
    let pages = hot_rels
        .iter()
        .map(|&r| pool.nblocks(bufmgr::RelFork::main(bufmgr::RelId(r))))
        .try_fold(0u64, |sum, n| n.map(|n| sum + u64::from(n)))?;
    Ok((hot_rels, pages))
}

/// (pool statistics, lookups done) at one moment of the calibration.
type CalPoint = (PoolStats, u64);
/// (pool statistics, lookups done, hot-set reads, instant) at the load's
/// start or end.
type LoadPoint = (PoolStats, u64, u64, Instant);

/// What one load observed.
struct LoadWindow {
    cal: [CalPoint; 2],
    resident_before: usize,
    load: [LoadPoint; 2],
    samples: Vec<Sample>,
    progress: engine::BulkProgress,
}

/// What the load's driver shares with the lookup threads and the loader:
/// the database, the phase flag and the counters.
struct Shared<'a> {
    db: &'a Database,
    phases: &'a Phases,
    done: &'a AtomicU64,
    written: &'a AtomicU64,
    loaded: &'a AtomicU64,
}

#[allow(clippy::too_many_arguments)]
fn measure(
    settings: &Settings,
    cached: &Path,
    run_dir: &Path,
    c: &Config,
    n: u64,
    load_rows: u64,
    label: &str,
    data: &mut DataCheck,
) -> Result<Row> {
    crate::dirs::remove_dir(run_dir)?;
    crate::dirs::copy_dir(cached, run_dir, &["LOCK"])?;
    let counter = Arc::new(ReadCounts::default());
    let trace = settings.trace_for(c, &[]);
    let db = Database::open(
        run_dir,
        dataset::count_reads(tables::options(settings, c), &counter).trace(trace.clone()),
    )?;
    db.create_table(BULK, tables::accounts_columns())?;
    let (hot_rels, hot_set_pages) = hot_set(&db)?;
    let hot_reads = || {
        hot_rels
            .iter()
            .map(|&r| counter.get(bufmgr::RelId(r)))
            .sum::<u64>()
    };
    let phases = Phases::new();
    let done = AtomicU64::new(0);
    let live = LiveLatency::new();
    let live_on = settings.measures.report_interval.map(|_| &live);
    let seed = settings.seed(SEED);
    let written = AtomicU64::new(0);
    let loaded = AtomicU64::new(0);
    let shared = Shared {
        db: &db,
        phases: &phases,
        done: &done,
        written: &written,
        loaded: &loaded,
    };
    let pb = tables::window_bar(
        settings,
        settings.warmup,
        &format!("{NAME} {label}: warm-up"),
    );
    let (result, outs) = harness::run_crew(
        0..c.threads,
        &|t, _| {
            // Trace thread id = lookup thread number.
            common::traced(&db, t as u32, || {
                tables::account_lookups(
                    &db,
                    seed.wrapping_add(t as u64),
                    n,
                    LOOKUPS_PER_TXN,
                    None,
                    phases.flag(),
                    &done,
                    live_on,
                )
            })
        },
        || phases.set(STOP),
        |crew| {
            let (window, intervals) = harness::with_intervals(
                settings.measures.report_interval,
                (&format!("{NAME} {label}"), "lookups"),
                &live,
                || Tally::of(&db.pool_stats(), done.load(Ordering::Relaxed)),
                || load_window(settings, crew, &shared, &hot_reads, &pb, label, load_rows),
            );
            window.map(|w| (w, intervals))
        },
    )?;
    let (latencies, errors) = lookup_outcomes(outs);
    let (w, intervals) = result;
    if let Some(e) = errors.1 {
        data.fail(format!("{label}: {} bad lookups, first: {e}", errors.0));
    }
    let stats = w.load[1].0.since(&w.load[0].0);
    let resident = tables::residency(&db);
    let nodes = tables::node_figures(&db, &stats);
    let mrc = common::curve_of(&db);
    common::note_trace(settings, trace, db.pool())?;
    check_copy(&db, label, n, load_rows, data)?;
    db.close()?;
    crate::dirs::remove_dir(run_dir)?;
    Ok(Row {
        series: RowSeries {
            latency: latencies.by_kind(),
            mrc,
            intervals,
            seed,
        },
        ..load_row(c, w, hot_set_pages, resident, nodes)
    })
}

/// The driver's part of one measurement: calibration with the lookups
/// alone, then the load beside them, sampled every [`SAMPLE_EVERY`].
fn load_window<'scope, 'env, R>(
    settings: &Settings,
    crew: &harness::Crew<'scope, 'env, R>,
    s: &Shared<'env>,
    hot_reads: &dyn Fn() -> u64,
    pb: &indicatif::ProgressBar,
    label: &str,
    load_rows: u64,
) -> Result<LoadWindow> {
    let db = s.db;
    // Calibration: accesses per lookup with nothing else
    // running. The phase stays WARMUP: the lookups'
    // latencies are the load's (MEASURE from its start to
    // its end).
    let calibration = || (db.pool_stats(), s.done.load(Ordering::Relaxed));
    harness::run_window(pb, settings.warmup / 2, |_| crew.alive());
    let cal0 = calibration();
    harness::run_window(pb, settings.warmup - settings.warmup / 2, |_| crew.alive());
    let cal1 = calibration();
    pb.finish_and_clear();
    let resident_before = hot_resident(db);
    // The load.
    let lpb = common::progress_bar(
        load_rows,
        settings.progress,
        &format!("{NAME} {label}: load"),
    );
    s.phases.set(MEASURE);
    let start = (
        db.pool_stats(),
        s.done.load(Ordering::Relaxed),
        hot_reads(),
        Instant::now(),
    );
    let loader = {
        let (lpb, written, loaded) = (lpb.clone(), s.written, s.loaded);
        crew.scope()
            .spawn(move || load_accounts(db, load_rows, &lpb, written, loaded))
    };
    let sample = |secs: f64, loaded_rows: u64| Sample {
        secs,
        hot_resident: hot_resident(db),
        dirty: db.pool().buffercache_summary().dirty,
        loaded_rows,
    };
    let mut samples = Vec::new();
    let mut next = Duration::ZERO;
    while !loader.is_finished() {
        let el = start.3.elapsed();
        if el >= next {
            samples.push(sample(el.as_secs_f64(), s.loaded.load(Ordering::Relaxed)));
            next += SAMPLE_EVERY;
        }
        if !crew.alive() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // A failed load stops the lookup threads too (the crew does).
    let progress = loader
        .join()
        .map_err(|p| BenchError::Panic(harness::panic_text(p)))??;
    let end = (
        db.pool_stats(),
        s.done.load(Ordering::Relaxed),
        hot_reads(),
        Instant::now(),
    );
    s.phases.set(WARMUP);
    samples.push(sample(
        end.3.duration_since(start.3).as_secs_f64(),
        progress.rows,
    ));
    lpb.finish_and_clear();
    Ok(LoadWindow {
        cal: [cal0, cal1],
        resident_before,
        load: [start, end],
        samples,
        progress,
    })
}

/// The loader thread: `load_rows` account rows into [`BULK`], its
/// progress on the bar and in `loaded` and `written`.
fn load_accounts(
    db: &Database,
    load_rows: u64,
    lpb: &indicatif::ProgressBar,
    written: &AtomicU64,
    loaded: &AtomicU64,
) -> Result<engine::BulkProgress> {
    common::traced(db, LOADER_THREAD_ID, || {
        let rows = (1..=load_rows as i64).map(|k| tables::account_row(k, 0, 0));
        Ok(db.bulk_load(BULK, rows, |p| {
            lpb.set_position(p.rows);
            loaded.store(p.rows, Ordering::Relaxed);
            written.store(p.pages_written, Ordering::Relaxed);
        })?)
    })
}

/// The lookup threads' latencies merged, their bad lookups counted and
/// the first one's text.
fn lookup_outcomes(
    outs: Vec<(u64, Option<String>, Latencies)>,
) -> (Latencies, (u64, Option<String>)) {
    let mut latencies = Latencies::new();
    for o in &outs {
        latencies.merge(&o.2);
    }
    let errors = (
        outs.iter().map(|o| o.0).sum::<u64>(),
        outs.into_iter().find_map(|o| o.1),
    );
    (latencies, errors)
}

/// The end-of-run check of this copy: every loaded row is there and
/// accounts is intact; then the loaded table is dropped.
fn check_copy(
    db: &Database,
    label: &str,
    n: u64,
    load_rows: u64,
    data: &mut DataCheck,
) -> Result<()> {
    let bulk_rows = tables::scan_count(db, BULK)?;
    if bulk_rows != load_rows {
        data.fail(format!(
            "{label}: {BULK} has {bulk_rows} rows, expected {load_rows}"
        ));
    }
    data.add(tables::check_table(db, ACCOUNTS, Some(n))?);
    db.drop_table(BULK)?;
    Ok(())
}

/// The row of one load: its rates, the lookups' hit ratio before and
/// during it, the hot set's residency and who wrote the pages.
fn load_row(
    c: &Config,
    w: LoadWindow,
    hot_set_pages: u64,
    resident: Vec<Residency>,
    nodes: Vec<tables::NodeFigures>,
) -> Row {
    let LoadWindow {
        cal: [cal0, cal1],
        resident_before,
        load: [start, end],
        samples,
        progress,
    } = w;
    let cal = cal1.0.since(&cal0.0).totals();
    let cal_lookups = cal1.1 - cal0.1;
    let accesses_per_lookup = if cal_lookups > 0 {
        cal.accesses as f64 / cal_lookups as f64
    } else {
        0.0
    };
    let secs = end.3.duration_since(start.3).as_secs_f64();
    let stats = end.0.since(&start.0);
    let t = stats.totals();
    let lookups = end.1 - start.1;
    let hot_reads_n = end.2 - start.2;
    let lookup_accesses = lookups as f64 * accesses_per_lookup;
    let oltp_hit_ratio = if lookup_accesses > 0.0 {
        (1.0 - hot_reads_n as f64 / lookup_accesses).max(0.0)
    } else {
        1.0
    };
    let writes_loader = stats.writes_other + t.writes_ring;
    let all = writes_loader + stats.writes_bgwriter + t.writes_backend + stats.writes_checkpoint;
    let share = |x: u64| if all > 0 { x as f64 / all as f64 } else { 0.0 };
    let victims_lookups = hot_reads_n as f64;
    let victims_loader = progress.pages as f64;
    let backend_writes_lookups_est = if victims_lookups + victims_loader > 0.0 {
        t.writes_backend as f64 * victims_lookups / (victims_lookups + victims_loader)
    } else {
        0.0
    };
    let dirty: Vec<usize> = samples.iter().map(|s| s.dirty).collect();
    Row {
        evictor: c.evictor.name().into(),
        batch: c.batch.into(),
        partitions: c.partitions,
        threads: c.threads,
        huge_pages: c.huge_pages,
        ring: c.ring,
        load_secs: secs,
        load_rows: progress.rows,
        load_rows_per_sec: progress.rows as f64 / secs,
        loaded_pages: progress.pages,
        loader_pages_written: progress.pages_written,
        oltp_hit_ratio_before: cal.hit_ratio(),
        oltp_hit_ratio,
        accesses_per_lookup,
        lookups,
        lookups_per_sec: lookups as f64 / secs,
        hot_reads: hot_reads_n,
        hot_set_pages,
        hot_resident_before: resident_before,
        hot_resident_min: samples.iter().map(|s| s.hot_resident).min().unwrap_or(0),
        hot_resident_end: samples.last().map_or(0, |s| s.hot_resident),
        dirty_max: dirty.iter().copied().max().unwrap_or(0),
        dirty_mean: dirty.iter().sum::<usize>() as f64 / dirty.len().max(1) as f64,
        dirty_end: dirty.last().copied().unwrap_or(0),
        writes_loader,
        writes_bgwriter: stats.writes_bgwriter,
        writes_backend: t.writes_backend,
        writes_checkpoint: stats.writes_checkpoint,
        loader_written_share: share(writes_loader),
        bgwriter_written_share: share(stats.writes_bgwriter),
        backend_written_share: share(t.writes_backend),
        backend_writes_lookups_est,
        pool_hit_ratio: t.hit_ratio(),
        samples,
        resident,
        nodes,
        series: RowSeries::default(),
    }
}

/// Build or reuse the accounts, run every cell on a fresh copy, check.
pub fn run(settings: &Settings, args: &Args) -> Result<BulkloadReport> {
    let load_pct = args.load_pct.unwrap_or(LOAD_PCT).max(1);
    let n = tables::accounts_for_pages(settings.pool_buffers as u64 * HOT_HEAP_PCT / 100);
    let load_rows = tables::accounts_for_pages(settings.pool_buffers as u64 * load_pct / 100);
    let configs = configs(settings);
    println!(
        "== {NAME}: lookups on {n} accounts (~40% of the pool) while one thread bulk-loads \
         {load_rows} rows ({load_pct}% of the pool); {} configurations; pool of {} buffers \
         ({} MiB), {} cores",
        configs.len(),
        settings.pool_buffers,
        (settings.pool_buffers * bufmgr::PAGE_SIZE) >> 20,
        common::cores()
    );
    let scale = serde_json::json!({ "accounts": n });
    let (cached, reused) = tables::ensure_db(
        settings,
        NAME,
        &format!("accounts-{n}"),
        &scale,
        |db, pb| tables::load_accounts(db, n, 100_000, pb),
    )?;
    let run_dir = settings.data_dir.join(NAME).join("run");
    let mut data_check = DataCheck::new();
    let mut rows = Vec::new();
    for (i, c) in configs.iter().enumerate() {
        let label = format!(
            "[{}/{}] {} ring={} threads={}",
            i + 1,
            configs.len(),
            c.evictor,
            if c.ring { "on" } else { "off" },
            c.threads
        );
        let r = measure(
            settings,
            &cached,
            &run_dir,
            c,
            n,
            load_rows,
            &label,
            &mut data_check,
        )?;
        eprintln!(
            "{label}: load {:.1} s, OLTP hit {:.2}%, hot resident min {} of {}, dirty max {}, \
             loader wrote {:.0}%",
            r.load_secs,
            100.0 * r.oltp_hit_ratio,
            r.hot_resident_min,
            r.hot_set_pages,
            r.dirty_max,
            100.0 * r.loader_written_share
        );
        rows.push(r);
    }
    Ok(BulkloadReport {
        scenario: NAME.into(),
        accounts: n,
        load_rows,
        pool_buffers: settings.pool_buffers,
        cores: common::cores(),
        warmup_secs: settings.warmup.as_secs_f64(),
        reused_data: reused,
        rows,
        data_check,
    })
}

impl Report for BulkloadReport {
    fn scenario(&self) -> &str {
        &self.scenario
    }

    fn render(&self) -> String {
        let mut t = Table::new(&[
            "evictor",
            "ring",
            "threads",
            "load s",
            "rows/s",
            "oltp hit% before",
            "oltp hit%",
            "lookups/s",
            "hot res before",
            "min",
            "end",
            "dirty max",
            "mean",
            "w loader",
            "w bgwriter",
            "w backend",
            "w ckpt",
            "loader share",
        ]);
        for r in &self.rows {
            t.push(vec![
                r.evictor.clone(),
                if r.ring { "on" } else { "off" }.into(),
                r.threads.to_string(),
                format!("{:.1}", r.load_secs),
                fmt_rate(r.load_rows_per_sec),
                tables::pct(r.oltp_hit_ratio_before),
                tables::pct(r.oltp_hit_ratio),
                fmt_rate(r.lookups_per_sec),
                r.hot_resident_before.to_string(),
                r.hot_resident_min.to_string(),
                r.hot_resident_end.to_string(),
                r.dirty_max.to_string(),
                format!("{:.0}", r.dirty_mean),
                r.writes_loader.to_string(),
                r.writes_bgwriter.to_string(),
                r.writes_backend.to_string(),
                r.writes_checkpoint.to_string(),
                tables::pct(r.loader_written_share),
            ]);
        }
        let hot = self.rows.first().map_or(0, |r| r.hot_set_pages);
        let mut out = format!(
            "\n{NAME}: {} lookup threads on {} accounts ({hot} pages with the index) while one \
             thread bulk-loads {} rows; pool {} buffers\n",
            self.rows.first().map_or(0, |r| r.threads),
            self.accounts,
            self.load_rows,
            self.pool_buffers
        );
        out += &t.to_string();
        out += "oltp hit%: the lookups' hit ratio (1 - accounts pages read / (lookups x buffer \
                accesses per lookup)); hot res: accounts + index pages resident before the \
                load, lowest and last sample; dirty: dirty buffers sampled every 250 ms; \
                w loader: pages the loader wrote itself (ring / evict_relation); w backend: \
                written by a thread needing a victim (the loader extending, or a lookup); \
                loader share: w loader / all writes\n";
        for r in &self.rows {
            out += &format!(
                "  ring {}: of {} backend writes, ~{:.0} by the lookup threads (estimated from \
                 their share of victims); {} pages still dirty when the load committed\n",
                if r.ring { "on " } else { "off" },
                r.writes_backend,
                r.backend_writes_lookups_est,
                r.dirty_end
            );
        }
        let res: Vec<(String, Vec<Residency>)> = self
            .rows
            .iter()
            .map(|r| {
                (
                    format!("{} ring={}", r.evictor, if r.ring { "on" } else { "off" }),
                    r.resident.clone(),
                )
            })
            .collect();
        out += &tables::render_residency(self.pool_buffers, &res);
        let nodes: Vec<(String, Vec<tables::NodeFigures>)> = res
            .iter()
            .zip(&self.rows)
            .map(|((label, _), r)| (label.clone(), r.nodes.clone()))
            .collect();
        out += &tables::render_nodes(&nodes);
        let measured: Vec<_> = res
            .iter()
            .zip(&self.rows)
            .map(|((label, _), r)| (label.clone(), &r.series.latency, r.series.mrc.as_ref()))
            .collect();
        out += &latency::tables_with_curves(&measured);
        if self.data_check.ok {
            out += &format!(
                "data check: ok (every load committed {} rows; accounts {} rows, index verified \
                 clean, after each load)\n",
                self.load_rows, self.accounts
            );
        } else {
            out += &self.data_check.render();
        }
        out
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a report of plain fields serialises")
    }

    fn failures(&self) -> Vec<String> {
        self.data_check.failures()
    }
}
