//! `index-residency`: secondary indexes under memory pressure (bench/SCENARIOS.md).
//!
//! ```text
//!   t(id i64, k1 i64, k2 i64, k3 i64, filler 140 bytes), N rows (heap ~4 x pool)
//!   t_k1, t_k2, t_k3: B-tree indexes, each key an independent random permutation of 1..N
//!
//!   16 threads (more than cores on purpose), each probe:
//!       one of the three indexes, uniformly;
//!       a zipfian key (theta 0.99; rank -> key through a fixed random
//!       permutation, so hot keys are spread over the leaves);
//!       txn.index_lookup(index, key): the descent, then the heap row (checked)
//!   warm-up, measured window; R runs per configuration, the two evictors
//!   alternating (ABBA: clock first in even runs, HOT/COOL first in odd ones)
//! ```
//!
//! Per-relation figures, without a per-relation counter in the pool:
//! - misses of relation R = its pages read from storage in the window
//!   ([`count_reads`](crate::dataset::count_reads), exact);
//! - evictions of R = misses of R - (pages of R resident at the end - at the
//!   start): every page that came in and is no longer there left by
//!   eviction (nothing is dropped or truncated during a window);
//! - `index_eviction_share` = evictions of the three indexes / evictions of
//!   every relation (`evictions_pool` is the pool's own count, a cross-check);
//! - `index_hit_ratio` = 1 - index misses / index accesses, where index
//!   accesses = all buffer accesses in the window - one heap access per probe
//!   (a probe fetches exactly one heap row; the tables are hinted, so no
//!   commit-log reads; the commit-log page of `begin`/rollback, once per
//!   1,000 probes, is counted as an index hit). `accesses_per_probe` shows
//!   the attribution is sound (index height + 1, a little more for probes
//!   that step right to a sibling leaf).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use engine::{Column, ColumnType, Database, Evictor, Value};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Zipf};
use serde::{Deserialize, Serialize};

use crate::check::DataCheck;
use crate::common::{self, BatchField, Config, Curve, Report, Settings, SvgPlot, Table, fmt_rate};
use crate::dataset::{self, Dataset, RelPages, Stamp};
use crate::error::{BenchError, Result};
use crate::harness::{self, Interval, LiveLatency, Recorder, RowSeries, Tally};
use crate::latency::{self, Latencies};

pub const NAME: &str = "index-residency";
pub const TABLE: &str = "t";
pub const INDEXES: [&str; 3] = ["t_k1", "t_k2", "t_k3"];
const KEY_COLUMNS: [&str; 3] = ["k1", "k2", "k3"];
pub const FILLER_LEN: usize = 140;
/// bench/SCENARIOS.md: 2,700,000 rows for a 128 MiB (16,384-page) pool.
const ROWS_PER_POOL_PAGE: f64 = 2_700_000.0 / 16_384.0;
pub const THETA: f64 = 0.99;
const PROBES_PER_TXN: u64 = 1000;
const PUBLISH_EVERY: u64 = 64;
/// The probes' seed without `--seed` (the keys' permutations always use it).
pub const SEED: u64 = 0x1DE7_0001;

/// The options of `index-residency` (after the scenario name).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct IndexResidencyArgs {
    /// Rows of t [default: 2,700,000 per 128 MiB of pool (heap ~4 x pool)]
    #[arg(long, value_name = "N")]
    pub rows: Option<u64>,
    /// Runs per configuration, the evictors alternating [default: 5; 2 with --quick]
    #[arg(long, value_name = "N")]
    pub runs: Option<usize>,
}

/// What `index-residency` runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub rows: u64,
    pub runs: usize,
}

impl Params {
    pub fn resolve(args: &IndexResidencyArgs, settings: &Settings) -> Result<Params> {
        let rows = args
            .rows
            .unwrap_or((ROWS_PER_POOL_PAGE * settings.pool_buffers as f64) as u64);
        let runs = args.runs.unwrap_or(if settings.quick { 2 } else { 5 });
        if rows < 16 || runs == 0 {
            return Err(BenchError::Config(
                "index-residency needs at least 16 rows and one run".into(),
            ));
        }
        Ok(Params { rows, runs })
    }
}

/// One run of one configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub evictor: String,
    pub ring: bool,
    pub batch: BatchField,
    pub partitions: usize,
    pub threads: usize,
    pub huge_pages: bool,
    /// Which run (0-based); `null` on a median row.
    pub run: Option<usize>,
    pub window_secs: f64,
    pub probes: u64,
    pub probes_per_sec: f64,
    /// Index pages resident at the end, all three indexes.
    pub index_resident_pages: f64,
    /// Per index (t_k1, t_k2, t_k3).
    pub index_resident_by_index: Vec<f64>,
    pub heap_resident_pages: f64,
    pub index_eviction_share: f64,
    pub index_hit_ratio: f64,
    pub heap_hit_ratio: f64,
    pub accesses_per_probe: f64,
    /// Evictions derived per relation (all relations), and the pool's count.
    pub evictions: f64,
    pub evictions_pool: f64,
    /// (seconds since the warm-up began, index pages resident).
    pub residency_samples: Vec<(f64, usize)>,
    pub resident_end: Vec<RelPages>,
    /// Per NUMA node at the end: where the buffers' memory is (queried),
    /// and the partitions on each node with their accesses and reads since
    /// the pool opened.
    #[serde(default)]
    pub nodes_end: Vec<crate::scenarios::tables::NodeFigures>,
    /// Flattened into the row (the JSON fields `latency`, `mrc`,
    /// `intervals` and `seed`, as before they were gathered):
    /// `latency`: per operation kind in the window: `lookup` (one probe
    /// through an index to its heap row, checked). A median row carries
    /// the typical run's (as its samples).
    /// `mrc`: the pool's live miss-ratio curve at the window's end (`--mrc`), with
    /// the exact LRU replay of the run's trace beside it under `--trace`.
    /// `intervals`: one entry per `--report-interval` (warm-up included; throughput in
    /// probes).
    /// `seed`: the seed the probes were drawn from (`--seed`).
    #[serde(flatten)]
    pub series: RowSeries,
    pub data_errors: u64,
}

/// HOT/COOL against the clock for one configuration, over the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub partitions: usize,
    pub batch: BatchField,
    pub ring: bool,
    pub threads: usize,
    pub clock_index_resident_median: f64,
    pub hotcool_index_resident_median: f64,
    /// HOT/COOL's median over the clock's, in percent.
    pub index_resident_delta_pct: Option<f64>,
    /// (min, max) over the runs.
    pub clock_index_resident_range: (f64, f64),
    pub hotcool_index_resident_range: (f64, f64),
    /// Whether the per-run figures of the two evictors overlap.
    pub index_resident_overlap: bool,
    pub clock_index_eviction_share_median: f64,
    pub hotcool_index_eviction_share_median: f64,
    pub clock_index_eviction_share_range: (f64, f64),
    pub hotcool_index_eviction_share_range: (f64, f64),
    pub index_eviction_share_overlap: bool,
    /// HOT/COOL runs with more index pages resident than every clock run.
    pub hotcool_runs_above_every_clock_run: usize,
    pub runs: usize,
}

/// A finished `index-residency` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexResidencyReport {
    pub scenario: String,
    pub pool_buffers: usize,
    pub table_rows: u64,
    pub relations: Vec<RelPages>,
    pub theta: f64,
    pub warmup_secs: f64,
    pub duration_secs: f64,
    pub runs_per_config: usize,
    pub reused_data: bool,
    pub build_secs: f64,
    /// One row per configuration: the median of its runs, metric by metric.
    pub rows: Vec<Row>,
    /// Every run, in the order they ran.
    pub runs: Vec<Row>,
    pub comparisons: Vec<Comparison>,
    pub data_check: DataCheck,
}

pub fn columns() -> Vec<Column> {
    vec![
        Column::new("id", ColumnType::I64),
        Column::new("k1", ColumnType::I64),
        Column::new("k2", ColumnType::I64),
        Column::new("k3", ColumnType::I64),
        Column::new("filler", ColumnType::Bytes),
    ]
}

/// Three independent random permutations of 1..=n (as u32): k_j of row
/// `id` is `perms[j][id - 1]`.
pub fn key_permutations(n: u64) -> [Vec<u32>; 3] {
    let mut rng = SmallRng::seed_from_u64(SEED);
    std::array::from_fn(|_| {
        let mut p: Vec<u32> = (1..=n as u32).collect();
        p.shuffle(&mut rng);
        p
    })
}

/// Build (or reuse) the table and its three indexes.
pub fn ensure_data(settings: &Settings, p: &Params) -> Result<Dataset> {
    if p.rows > u64::from(u32::MAX) {
        return Err(BenchError::Config("index-residency: too many rows".into()));
    }
    let tag = format!("rows-{}", p.rows);
    let want = Stamp::new(NAME, tag.clone(), &[(TABLE, p.rows)]);
    let dir = dataset::dataset_dir(&settings.data_dir, NAME, &tag);
    let (n, progress) = (p.rows, settings.progress);
    dataset::ensure(&dir, &want, settings.pool_buffers, progress, |db| {
        db.create_table(TABLE, columns())?;
        // The indexes first: bulk_load maintains them row by row, so one
        // pass (with one progress bar) builds everything.
        for (ix, col) in INDEXES.iter().zip(KEY_COLUMNS) {
            db.create_index(ix, TABLE, col, false)?;
        }
        let perms = key_permutations(n);
        let filler = vec![b'f'; FILLER_LEN];
        dataset::load(
            db,
            TABLE,
            n,
            (0..n as usize).map(|i| {
                vec![
                    Value::I64(i as i64 + 1),
                    Value::I64(i64::from(perms[0][i])),
                    Value::I64(i64::from(perms[1][i])),
                    Value::I64(i64::from(perms[2][i])),
                    Value::Bytes(filler.clone()),
                ]
            }),
            progress,
        )?;
        Ok(())
    })
}

/// The probes every configuration's threads walk: `index << 32 | key`.
/// The array's length is a power of two; thread `t` walks it with stride
/// `2t + 1` from its own offset (see `sweep`).
/// `seed`: `--seed`, or [`SEED`].
pub fn draw_probes(rows: u64, len: usize, seed: u64) -> Result<Vec<u64>> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xABCD);
    let mut scramble: Vec<u32> = (1..=rows as u32).collect();
    scramble.shuffle(&mut rng);
    let zipf = Zipf::new(rows as f64, THETA)
        .map_err(|e| BenchError::Config(format!("zipf theta {THETA}: {e}")))?;
    Ok((0..len)
        .map(|_| {
            let rank = (zipf.sample(&mut rng) as usize).clamp(1, scramble.len());
            let index = rng.random_range(0..3u64);
            (index << 32) | u64::from(scramble[rank - 1])
        })
        .collect())
}

/// Run `index-residency`.
pub fn run(settings: &Settings, p: &Params) -> Result<IndexResidencyReport> {
    crate::common::say(&format!(
        "== {NAME}: {} threads of zipfian (theta {THETA}) probes through 3 secondary indexes; \
         pool {} buffers ({} MiB); warm-up {:.1} s, window {:.1} s, {} runs per configuration",
        settings
            .threads
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(","),
        settings.pool_buffers,
        (settings.pool_buffers * bufmgr::PAGE_SIZE) >> 20,
        settings.warmup.as_secs_f64(),
        settings.duration.as_secs_f64(),
        p.runs
    ));
    let ds = ensure_data(settings, p)?;
    let configs = settings.configs();
    let first = *configs
        .first()
        .ok_or_else(|| BenchError::Config("empty matrix".into()))?;
    let relations = relations(&ds, settings, &first)?;
    say_sizes(settings, p, &relations);
    let len = ((p.rows as usize) * 2)
        .next_power_of_two()
        .clamp(1 << 16, 1 << 22);
    let seed = settings.seed(SEED);
    let probes = draw_probes(p.rows, len, seed)?;
    let runs = run_matrix(&ds, settings, &configs, p.runs, (&probes, seed))?;
    let rows: Vec<Row> = configs.iter().map(|c| median_row(&runs, c)).collect();
    let comparisons = compare(&runs, &rows);
    let data_check = dataset::check(&ds, settings.engine_options(&first), settings.progress)?;
    Ok(IndexResidencyReport {
        scenario: NAME.into(),
        pool_buffers: settings.pool_buffers,
        table_rows: p.rows,
        relations,
        theta: THETA,
        warmup_secs: settings.warmup.as_secs_f64(),
        duration_secs: settings.duration.as_secs_f64(),
        runs_per_config: p.runs,
        reused_data: ds.reused,
        build_secs: ds.build_secs,
        rows,
        runs,
        comparisons,
        data_check,
    })
}

/// The sizes of the table and its indexes, in pages.
fn relations(ds: &Dataset, settings: &Settings, first: &Config) -> Result<Vec<RelPages>> {
    let db = Database::open(
        &ds.dir,
        settings.engine_options(first).checksums(ds.stamp.checksums),
    )?;
    let r = dataset::relation_sizes(&db)?;
    db.close()?;
    Ok(r)
}

/// The line naming the table's and the indexes' sizes against the pool.
fn say_sizes(settings: &Settings, p: &Params, relations: &[RelPages]) {
    let size = |n: &str| {
        relations
            .iter()
            .find(|r| r.name == n)
            .map_or(0, |r| r.pages)
    };
    let index_pages: usize = INDEXES.iter().map(|i| size(i)).sum();
    crate::common::say(&format!(
        "{TABLE}: {} rows, heap {} pages = {:.1} x pool; indexes {} pages = {:.2} x pool ({})",
        p.rows,
        size(TABLE),
        size(TABLE) as f64 / settings.pool_buffers as f64,
        index_pages,
        index_pages as f64 / settings.pool_buffers as f64,
        INDEXES
            .iter()
            .map(|i| format!("{i} {}", size(i)))
            .collect::<Vec<_>>()
            .join(", ")
    ));
}

/// Every run of every configuration, in the order run: the matrix grouped
/// by everything but the evictor, the evictors of a group alternating.
fn run_matrix(
    ds: &Dataset,
    settings: &Settings,
    configs: &[Config],
    runs_per_config: usize,
    (probes, seed): (&[u64], u64),
) -> Result<Vec<Row>> {
    // Group the matrix by everything but the evictor; within a group run
    // the evictors alternately, ABBA.
    let nev = settings.evictors.len().max(1);
    let groups: Vec<&[Config]> = configs.chunks(nev).collect();
    let total = configs.len() * runs_per_config;
    let mut runs = Vec::with_capacity(total);
    let mut done = 0;
    for group in &groups {
        for (run, i) in harness::alternating(group.len(), runs_per_config) {
            let c = &group[i];
            done += 1;
            let label = format!(
                "[{done}/{total}] {NAME} {} partitions={} run {}",
                c.evictor,
                c.partitions,
                run + 1
            );
            let row = measure(
                ds,
                settings,
                c,
                (probes, seed),
                (run, runs_per_config),
                &label,
            )?;
            crate::common::tell(&format!(
                "{label}: {} probes/s, index pages resident {:.0}, heap {:.0}, index share of evictions {:.2}%, index hit {:.2}%",
                fmt_rate(row.probes_per_sec),
                row.index_resident_pages,
                row.heap_resident_pages,
                100.0 * row.index_eviction_share,
                100.0 * row.index_hit_ratio
            ));
            runs.push(row);
        }
    }
    Ok(runs)
}

#[derive(Debug, Default)]
struct Shared<'a> {
    /// The probes' interval latencies, with `--report-interval`.
    live: Option<&'a LiveLatency>,
    /// Within the measured window: latencies are recorded.
    in_window: AtomicBool,
    stop: AtomicBool,
    probes: AtomicU64,
    data_errors: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Shared<'_> {
    fn error(&self, e: String) {
        self.data_errors.fetch_add(1, Ordering::Relaxed);
        self.first_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
    }
}

/// The operation kind of the latency table: one probe.
pub const LOOKUP: &str = "lookup";

/// Returns the thread's latencies ([`LOOKUP`]).
fn worker(db: &Database, probes: &[u64], t: usize, sh: &Shared<'_>) -> Result<Latencies> {
    let mut lat = Recorder::new(sh.live, LOOKUP).window(&sh.in_window);
    debug_assert!(probes.len().is_power_of_two());
    let mask = probes.len() - 1;
    let stride = 2 * t + 1;
    let mut i = (t.wrapping_mul(0x9E37_79B9) ^ (t * probes.len() / 16)) & mask;
    let mut unpublished = 0;
    while !sh.stop.load(Ordering::Relaxed) {
        let txn = db.begin()?;
        for _ in 0..PROBES_PER_TXN {
            let probe = probes[i];
            i = (i + stride) & mask;
            let j = (probe >> 32) as usize;
            let key = (probe & 0xFFFF_FFFF) as i64;
            let started = Instant::now();
            let found = txn.index_lookup(INDEXES[j], &Value::I64(key))?;
            lat.record(LOOKUP, started);
            let ok = found.len() == 1 && found[0].1.get(1 + j) == Some(&Value::I64(key));
            if !ok {
                sh.error(format!(
                    "probe of {} = {key} found {} rows",
                    INDEXES[j],
                    found.len()
                ));
            }
            unpublished += 1;
            if unpublished == PUBLISH_EVERY {
                sh.probes.fetch_add(unpublished, Ordering::Relaxed);
                unpublished = 0;
                if sh.stop.load(Ordering::Relaxed) {
                    break;
                }
            }
        }
        txn.rollback()?;
    }
    sh.probes.fetch_add(unpublished, Ordering::Relaxed);
    Ok(lat.finish())
}

struct Point {
    at: Instant,
    accesses: u64,
    evictions: u64,
    reads: Vec<u64>,
    resident: Vec<RelPages>,
    probes: u64,
}

fn point(db: &Database, reads: &dataset::ReadCounts, sh: &Shared<'_>) -> Point {
    let t = db.pool_stats().totals();
    Point {
        at: Instant::now(),
        accesses: t.accesses,
        evictions: t.evictions,
        reads: reads.snapshot(),
        resident: dataset::residency(db),
        probes: sh.probes.load(Ordering::Relaxed),
    }
}

/// What one run's window measured, before it is turned into a row.
struct Measured {
    window: harness::Sampled<Point, usize>,
    intervals: Vec<Interval>,
    latencies: Latencies,
    nodes_end: Vec<crate::scenarios::tables::NodeFigures>,
    mrc: Option<Curve>,
    /// The relation ids of the table and of its indexes (in `INDEXES`
    /// order).
    table_rel: u32,
    index_rels: Vec<u32>,
    data_errors: u64,
}

/// One run of configuration `c`: the window, the figures read before the
/// database closes, the row.
fn measure(
    ds: &Dataset,
    settings: &Settings,
    c: &Config,
    (probes, seed): (&[u64], u64),
    (run, runs): (usize, usize),
    label: &str,
) -> Result<Row> {
    // One file per run: `run1`, `run2`, ... (with one run, none).
    let run_part = format!("run{}", run + 1);
    let cell: &[&str] = if runs > 1 { &[&run_part] } else { &[] };
    let trace = settings.trace_for(c, cell);
    let (db, reads) = dataset::open_counting(ds, settings.engine_options(c).trace(trace.clone()))?;
    let live = LiveLatency::new();
    let sh = Shared {
        live: settings.measures.report_interval.map(|_| &live),
        ..Shared::default()
    };
    let (window, intervals, latencies) =
        window(settings, &db, &reads, c, probes, label, (&sh, &live))?;
    let nodes_end = crate::scenarios::tables::node_figures(&db, &db.pool_stats());
    let (table_rel, index_rels) = relation_ids(&db)?;
    let mrc = close_with_curve(settings, db, trace)?;
    let data_errors = sh.data_errors.load(Ordering::Relaxed);
    if let Some(e) = sh
        .first_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        eprintln!("{label}: DATA ERROR: {e} ({data_errors} in all)");
    }
    let m = Measured {
        window,
        intervals,
        latencies,
        nodes_end,
        mrc,
        table_rel,
        index_rels,
        data_errors,
    };
    Ok(row_of(c, (run, seed), m))
}

/// The probing threads through the warm-up and the sampled window (and the
/// interval reports, if asked): the window's points and samples, the
/// intervals, the latencies of every thread merged.
fn window(
    settings: &Settings,
    db: &Database,
    reads: &dataset::ReadCounts,
    c: &Config,
    probes: &[u64],
    label: &str,
    (sh, live): (&Shared<'_>, &LiveLatency),
) -> Result<(harness::Sampled<Point, usize>, Vec<Interval>, Latencies)> {
    let every = common::sample_interval(settings.duration);
    let total = settings.warmup + settings.duration;
    let pb = common::progress_bar(
        total.as_millis() as u64,
        settings.progress,
        &format!("{label}: warm-up"),
    );
    let measured = harness::run_crew(
        0..c.threads,
        &|t, _| {
            crate::common::pin_worker(t);
            common::traced(db, t as u32, || worker(db, probes, t, sh))
        },
        || sh.stop.store(true, Ordering::Relaxed),
        |_| {
            let (window, intervals) = harness::with_intervals(
                settings.measures.report_interval,
                (label, "probes"),
                live,
                || Tally::of(&db.pool_stats(), sh.probes.load(Ordering::Relaxed)),
                || {
                    harness::sampled_window(
                        &pb,
                        label,
                        (settings.warmup, settings.duration),
                        every,
                        || sh.stop.load(Ordering::Relaxed),
                        || {
                            // The window's first point opens the latency
                            // window, its last closes it.
                            sh.in_window.fetch_xor(true, Ordering::Relaxed);
                            point(db, reads, sh)
                        },
                        |p| match p {
                            Some(p) => dataset::resident_of(&p.resident, &INDEXES),
                            None => dataset::resident_of(&dataset::residency(db), &INDEXES),
                        },
                    )
                },
            );
            window.map(|w| (w, intervals))
        },
    );
    pb.finish_and_clear();
    let ((window, intervals), threads_latencies) = measured?;
    let mut latencies = Latencies::new();
    for l in &threads_latencies {
        latencies.merge(l);
    }
    Ok((window, intervals, latencies))
}

/// The relation ids of the table and of its indexes (in `INDEXES` order).
fn relation_ids(db: &Database) -> Result<(u32, Vec<u32>)> {
    let table_rel = db.table(TABLE)?.rel.0;
    let index_rels: Vec<u32> = INDEXES
        .iter()
        .map(|n| {
            db.indexes()
                .iter()
                .find(|i| i.name == *n)
                .map(|i| i.rel.0)
                .ok_or_else(|| BenchError::Data(format!("index {n} is missing")))
        })
        .collect::<Result<_>>()?;
    Ok((table_rel, index_rels))
}

/// The live miss-ratio curve, the trace noted and the database closed;
/// with a trace, the exact LRU curve beside the live one.
fn close_with_curve(
    settings: &Settings,
    db: Database,
    trace: Option<std::path::PathBuf>,
) -> Result<Option<Curve>> {
    // Read before the trace stops: the curve and the trace cover the same
    // accesses (every worker has exited, so its last sampled batch is in).
    let mrc = common::curve_of(&db);
    common::note_trace(settings, trace.clone(), db.pool())?;
    db.close()?;
    // The trace is complete once the pool is closed: the exact LRU curve
    // beside the live one.
    Ok(match (mrc, &trace) {
        (Some(c), Some(path)) => {
            let exact = common::exact_lru(path, &c)?;
            Some(c.with_exact(exact))
        }
        (c, _) => c,
    })
}

/// Run `run` of configuration `c` as a row: the window's figures, each
/// miss and eviction attributed to the relation it fell on.
fn row_of(c: &Config, (run, seed): (usize, u64), m: Measured) -> Row {
    let harness::Sampled {
        start: p0,
        end: p1,
        samples,
        ..
    } = m.window;
    let (table_rel, index_rels) = (m.table_rel, &m.index_rels);
    let secs = (p1.at - p0.at).as_secs_f64();
    let slot = |rel: u32| (rel as usize).min(p1.reads.len() - 1);
    let misses = |rel: u32| p1.reads[slot(rel)].saturating_sub(p0.reads[slot(rel)]);
    let res = |pts: &[RelPages], rel: u32| {
        pts.iter().find(|r| r.rel == rel).map_or(0, |r| r.pages) as i64
    };
    let evicted = |rel: u32| {
        (misses(rel) as i64 - (res(&p1.resident, rel) - res(&p0.resident, rel))).max(0) as u64
    };
    // Every relation that was read or resident in the window.
    let mut rels: Vec<u32> = p0
        .resident
        .iter()
        .chain(&p1.resident)
        .map(|r| r.rel)
        .collect();
    rels.extend(
        p1.reads
            .iter()
            .zip(&p0.reads)
            .enumerate()
            .filter(|(_, (a, b))| a > b)
            .map(|(i, _)| i as u32),
    );
    rels.sort_unstable();
    rels.dedup();
    let evictions_all: u64 = rels.iter().map(|&r| evicted(r)).sum();
    let evictions_index: u64 = index_rels.iter().map(|&r| evicted(r)).sum();
    let probes = p1.probes - p0.probes;
    let accesses = p1.accesses - p0.accesses;
    let index_accesses = accesses.saturating_sub(probes);
    let index_misses: u64 = index_rels.iter().map(|&r| misses(r)).sum();
    let heap_misses = misses(table_rel);
    let by_index: Vec<f64> = index_rels
        .iter()
        .map(|&r| res(&p1.resident, r) as f64)
        .collect();
    Row {
        evictor: c.evictor.name().into(),
        ring: c.ring,
        batch: c.batch.into(),
        partitions: c.partitions,
        threads: c.threads,
        huge_pages: c.huge_pages,
        run: Some(run),
        window_secs: secs,
        probes,
        probes_per_sec: probes as f64 / secs,
        index_resident_pages: by_index.iter().sum(),
        index_resident_by_index: by_index,
        heap_resident_pages: res(&p1.resident, table_rel) as f64,
        index_eviction_share: if evictions_all == 0 {
            0.0
        } else {
            evictions_index as f64 / evictions_all as f64
        },
        index_hit_ratio: if index_accesses == 0 {
            1.0
        } else {
            1.0 - index_misses as f64 / index_accesses as f64
        },
        heap_hit_ratio: if probes == 0 {
            1.0
        } else {
            1.0 - heap_misses as f64 / probes as f64
        },
        accesses_per_probe: accesses as f64 / probes.max(1) as f64,
        evictions: evictions_all as f64,
        evictions_pool: (p1.evictions - p0.evictions) as f64,
        residency_samples: samples,
        resident_end: p1.resident,
        nodes_end: m.nodes_end,
        series: RowSeries {
            latency: m.latencies.by_kind(),
            mrc: m.mrc,
            intervals: m.intervals,
            seed,
        },
        data_errors: m.data_errors,
    }
}

fn same_config(r: &Row, c: &Config) -> bool {
    r.evictor == c.evictor.name()
        && r.ring == c.ring
        && r.batch == BatchField::from(c.batch)
        && r.partitions == c.partitions
        && r.threads == c.threads
        && r.huge_pages == c.huge_pages
}

/// The median of every metric over a configuration's runs; the residency
/// samples and end residency of the run whose index residency is the median.
fn median_row(runs: &[Row], c: &Config) -> Row {
    let rs: Vec<&Row> = runs.iter().filter(|r| same_config(r, c)).collect();
    let m = |f: &dyn Fn(&Row) -> f64| dataset::median(&rs.iter().map(|r| f(r)).collect::<Vec<_>>());
    let index_resident = m(&|r| r.index_resident_pages);
    let typical = rs
        .iter()
        .min_by(|a, b| {
            (a.index_resident_pages - index_resident)
                .abs()
                .total_cmp(&(b.index_resident_pages - index_resident).abs())
        })
        .copied();
    let Some(typical) = typical else {
        // No runs: an empty row.
        return Row {
            evictor: c.evictor.name().into(),
            ring: c.ring,
            batch: c.batch.into(),
            partitions: c.partitions,
            threads: c.threads,
            huge_pages: c.huge_pages,
            run: None,
            window_secs: 0.0,
            probes: 0,
            probes_per_sec: 0.0,
            index_resident_pages: 0.0,
            index_resident_by_index: vec![0.0; 3],
            heap_resident_pages: 0.0,
            index_eviction_share: 0.0,
            index_hit_ratio: 0.0,
            heap_hit_ratio: 0.0,
            accesses_per_probe: 0.0,
            evictions: 0.0,
            evictions_pool: 0.0,
            residency_samples: Vec::new(),
            resident_end: Vec::new(),
            nodes_end: Vec::new(),
            series: RowSeries::default(),
            data_errors: 0,
        };
    };
    Row {
        run: None,
        window_secs: m(&|r| r.window_secs),
        probes: m(&|r| r.probes as f64) as u64,
        probes_per_sec: m(&|r| r.probes_per_sec),
        index_resident_pages: index_resident,
        index_resident_by_index: (0..3)
            .map(|i| m(&|r| r.index_resident_by_index.get(i).copied().unwrap_or(0.0)))
            .collect(),
        heap_resident_pages: m(&|r| r.heap_resident_pages),
        index_eviction_share: m(&|r| r.index_eviction_share),
        index_hit_ratio: m(&|r| r.index_hit_ratio),
        heap_hit_ratio: m(&|r| r.heap_hit_ratio),
        accesses_per_probe: m(&|r| r.accesses_per_probe),
        evictions: m(&|r| r.evictions),
        evictions_pool: m(&|r| r.evictions_pool),
        data_errors: rs.iter().map(|r| r.data_errors).sum(),
        ..typical.clone()
    }
}

fn range(v: &[f64]) -> (f64, f64) {
    (
        v.iter().copied().fold(f64::INFINITY, f64::min),
        v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    )
}

fn overlap(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0.max(b.0) <= a.1.min(b.1)
}

fn compare(runs: &[Row], medians: &[Row]) -> Vec<Comparison> {
    let mut out = Vec::new();
    for h in medians
        .iter()
        .filter(|r| r.evictor == Evictor::HotCool.name())
    {
        let Some(c) = medians.iter().find(|c| {
            c.evictor == Evictor::Clock.name()
                && c.ring == h.ring
                && c.batch == h.batch
                && c.partitions == h.partitions
                && c.threads == h.threads
                && c.huge_pages == h.huge_pages
        }) else {
            continue;
        };
        let of = |m: &Row| -> Vec<&Row> {
            runs.iter()
                .filter(|r| {
                    r.evictor == m.evictor
                        && r.ring == m.ring
                        && r.batch == m.batch
                        && r.partitions == m.partitions
                        && r.threads == m.threads
                        && r.huge_pages == m.huge_pages
                })
                .collect()
        };
        let (cr, hr) = (of(c), of(h));
        let c_idx: Vec<f64> = cr.iter().map(|r| r.index_resident_pages).collect();
        let h_idx: Vec<f64> = hr.iter().map(|r| r.index_resident_pages).collect();
        let c_sh: Vec<f64> = cr.iter().map(|r| r.index_eviction_share).collect();
        let h_sh: Vec<f64> = hr.iter().map(|r| r.index_eviction_share).collect();
        let c_max = c_idx.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        out.push(Comparison {
            partitions: h.partitions,
            batch: h.batch.clone(),
            ring: h.ring,
            threads: h.threads,
            clock_index_resident_median: c.index_resident_pages,
            hotcool_index_resident_median: h.index_resident_pages,
            index_resident_delta_pct: dataset::pct_change(
                h.index_resident_pages,
                c.index_resident_pages,
            ),
            clock_index_resident_range: range(&c_idx),
            hotcool_index_resident_range: range(&h_idx),
            index_resident_overlap: overlap(range(&c_idx), range(&h_idx)),
            clock_index_eviction_share_median: c.index_eviction_share,
            hotcool_index_eviction_share_median: h.index_eviction_share,
            clock_index_eviction_share_range: range(&c_sh),
            hotcool_index_eviction_share_range: range(&h_sh),
            index_eviction_share_overlap: overlap(range(&c_sh), range(&h_sh)),
            hotcool_runs_above_every_clock_run: h_idx.iter().filter(|&&x| x > c_max).count(),
            runs: h_idx.len().min(c_idx.len()),
        });
    }
    out
}

impl IndexResidencyReport {
    /// The headline comparison: one partition if run, else the first.
    pub fn headline(&self) -> Option<&Comparison> {
        self.comparisons
            .iter()
            .find(|c| c.partitions == 1)
            .or_else(|| self.comparisons.first())
    }

    fn label(r: &Row) -> String {
        format!("{} p={}", r.evictor, r.partitions)
    }

    fn index_pages_total(&self) -> usize {
        self.relations
            .iter()
            .filter(|r| r.kind == "index")
            .map(|r| r.pages)
            .sum()
    }
}

impl IndexResidencyReport {
    /// Every run, and the medians, one line per configuration.
    fn run_tables(&self) -> (Table, Table) {
        let mut header = vec!["evictor", "parts", "run", "probes/s"];
        header.extend(INDEXES);
        header.extend([
            "index pages",
            "index % pool",
            "heap pages",
            "index evict share%",
            "index hit%",
            "heap hit%",
            "acc/probe",
        ]);
        let mut runs_t = Table::new(&header);
        let push = |t: &mut Table, r: &Row| {
            let mut row = vec![
                r.evictor.clone(),
                r.partitions.to_string(),
                r.run.map_or("median".into(), |x| (x + 1).to_string()),
                fmt_rate(r.probes_per_sec),
            ];
            row.extend(r.index_resident_by_index.iter().map(|x| format!("{x:.0}")));
            row.extend([
                format!("{:.0}", r.index_resident_pages),
                format!(
                    "{:.1}",
                    100.0 * r.index_resident_pages / self.pool_buffers as f64
                ),
                format!("{:.0}", r.heap_resident_pages),
                format!("{:.2}", 100.0 * r.index_eviction_share),
                format!("{:.2}", 100.0 * r.index_hit_ratio),
                format!("{:.2}", 100.0 * r.heap_hit_ratio),
                format!("{:.2}", r.accesses_per_probe),
            ]);
            t.push(row);
        };
        for r in &self.runs {
            push(&mut runs_t, r);
        }
        let mut med_t = Table::new(&header);
        for r in &self.rows {
            push(&mut med_t, r);
        }
        (runs_t, med_t)
    }

    /// One line per compared pair: clock beside HOT/COOL.
    fn comparison_lines(&self) -> String {
        let mut out = String::new();
        for c in &self.comparisons {
            out += &format!(
                "  partitions {}: index pages resident clock {:.0} ({:.0}-{:.0}) vs HOT/COOL {:.0} ({:.0}-{:.0}): {}; per-run figures {}; \
                 index share of evictions {:.2}% vs {:.2}% ({:+.2} pt, runs {})\n",
                c.partitions,
                c.clock_index_resident_median,
                c.clock_index_resident_range.0,
                c.clock_index_resident_range.1,
                c.hotcool_index_resident_median,
                c.hotcool_index_resident_range.0,
                c.hotcool_index_resident_range.1,
                c.index_resident_delta_pct
                    .map_or("-".into(), |x| format!("{x:+.2}% with HOT/COOL")),
                if c.index_resident_overlap {
                    "overlap".to_string()
                } else {
                    "do not overlap".to_string()
                },
                100.0 * c.clock_index_eviction_share_median,
                100.0 * c.hotcool_index_eviction_share_median,
                100.0
                    * (c.hotcool_index_eviction_share_median - c.clock_index_eviction_share_median),
                if c.index_eviction_share_overlap {
                    "overlap"
                } else {
                    "do not overlap"
                },
            );
        }
        out
    }

    /// Where the buffers went at the end of each median run, and per NUMA
    /// node.
    fn buffers(&self) -> String {
        let labels: Vec<String> = self
            .rows
            .iter()
            .map(|r| format!("{} (median run)", Self::label(r)))
            .collect();
        let ends: Vec<&[RelPages]> = self
            .rows
            .iter()
            .map(|r| r.resident_end.as_slice())
            .collect();
        let mut out = format!(
            "where the buffers went (pages resident at the end of the median run):\n{}",
            dataset::residency_table(&labels, &ends, self.pool_buffers)
        );
        let nodes: Vec<(String, Vec<crate::scenarios::tables::NodeFigures>)> = labels
            .iter()
            .zip(&self.rows)
            .map(|(l, r)| (l.clone(), r.nodes_end.clone()))
            .collect();
        out += &crate::scenarios::tables::render_nodes(&nodes);
        out
    }

    /// The latency table and the miss-ratio curves, one line per
    /// configuration.
    fn latencies_and_curves(&self) -> String {
        let labels: Vec<String> = self.rows.iter().map(Self::label).collect();
        let measured: Vec<_> = labels
            .iter()
            .zip(&self.rows)
            .map(|(l, r)| (l.clone(), &r.series.latency, r.series.mrc.as_ref()))
            .collect();
        latency::tables_with_curves(&measured)
    }
}

impl Report for IndexResidencyReport {
    fn scenario(&self) -> &str {
        &self.scenario
    }

    fn render(&self) -> String {
        let (runs_t, med_t) = self.run_tables();
        let size = |n: &str| {
            self.relations
                .iter()
                .find(|r| r.name == n)
                .map_or(0, |r| r.pages)
        };
        let mut out = format!(
            "\n{} (pool {} buffers; {} rows; heap {} pages = {:.1} x pool, indexes {} pages = {:.2} x pool), per run:\n{runs_t}\nmedians:\n{med_t}",
            self.scenario,
            self.pool_buffers,
            self.table_rows,
            size(TABLE),
            size(TABLE) as f64 / self.pool_buffers as f64,
            self.index_pages_total(),
            self.index_pages_total() as f64 / self.pool_buffers as f64,
        );
        out += "index pages / heap pages: resident at the end of the window; index evict share: evictions of index pages / all \
                (per relation: pages read - growth of residency); index hit%: 1 - index pages read / (accesses - probes); \
                acc/probe: buffer accesses per probe\n";
        out += &self.comparison_lines();
        out += &self.buffers();
        out += &self.latencies_and_curves();
        out += &self.data_check.render();
        out
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a report of plain fields serialises")
    }

    fn failures(&self) -> Vec<String> {
        let mut f: Vec<String> = self
            .runs
            .iter()
            .filter(|r| r.data_errors > 0)
            .map(|r| format!("{} data errors with {}", r.data_errors, Self::label(r)))
            .collect();
        if let Some(e) = &self.data_check.error {
            f.push(format!("end-of-run data check: {e}"));
        }
        f
    }

    fn svg_plots(&self) -> Vec<SvgPlot> {
        let configs: Vec<(String, &[RelPages])> = self
            .rows
            .iter()
            .map(|r| {
                (
                    format!(
                        "{} p={}",
                        crate::common::evictor_label(&r.evictor),
                        r.partitions
                    ),
                    r.resident_end.as_slice(),
                )
            })
            .collect();
        crate::plot::residency_bars(
            "index-residency: pages resident by relation at the end (median run)",
            self.pool_buffers,
            &configs,
        )
        .map(|svg| SvgPlot {
            file: "index-residency-by-relation.svg".into(),
            svg,
        })
        .into_iter()
        .collect()
    }
}
