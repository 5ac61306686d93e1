//! `scan-resistance`: OLTP point lookups under a concurrent big seq scan
//! (bench/SCENARIOS.md).
//!
//! ```text
//!   accounts(aid i64, abalance i64, filler 84 bytes) + unique index accounts_pkey(aid)
//!       heap + index ~ 40% of the pool: the hot set
//!   history(id i64, a i64, b i64, filler 84 bytes): ~4 x pool, no index
//!
//!   2 lookup threads: txn.get_by_key("accounts", "aid", uniform random aid)
//!                     (index descent, then the heap page), checked
//!   1 scan thread:    txn.scan_until("history", ..) in a loop  ring on (bulk-read ring)
//!                     (borrowed rows: two columns decoded)      ring off: RingChoice::Never (Options rings off too)
//!                     full speed, throttled to --scan-rate pages/s, or paced to
//!                     N scan pages per lookup (--pages-per-lookup; the faster side waits)
//!   sampler:          accounts + accounts_pkey pages resident, every second
//!                     (every window/10 for windows under 10 s)
//! ```
//!
//! The OLTP hit ratio counts the lookup threads' buffer accesses only. The
//! pool counts accesses and hits per partition, not per thread, so the
//! lookups' share is derived:
//! - misses of the lookups = pages of `accounts` and `accounts_pkey` read
//!   from storage during the window (only the lookups touch those relations;
//!   counted exactly per relation by [`count_reads`]);
//! - accesses of the lookups = all buffer accesses in the window minus the
//!   pages the scan read (the scan thread counts its pages: every history
//!   page holds rows, so a new block in the row stream is one `read_buffer`).
//!   Nothing else touches the pool during the window: the tables were hinted
//!   at build time, so no visibility check reads the commit log; the
//!   sampler reads buffer descriptors, not pages. What is left (the commit
//!   log page read by `begin`/rollback, once per 1,000 lookups) counts as a
//!   lookup hit; `accesses_per_lookup` in every row shows the attribution is
//!   sound (index height + 1).
//!
//! [`count_reads`]: crate::dataset::count_reads

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use engine::{Column, ColumnType, Database, RingChoice, ScanOptions, Value};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::check::DataCheck;
use crate::common::{
    self, BatchField, Config, Curve, Report, Settings, SvgPlot, Table, fmt_rate, traced,
};
use crate::dataset::{self, Dataset, ReadCounts, RelPages, Stamp};
use crate::error::{BenchError, Result};
use crate::harness::{self, Interval, LiveLatency, Recorder, RowSeries, Tally};
use crate::latency::{self, Latencies};
use crate::plot;

pub const NAME: &str = "scan-resistance";
pub const ACCOUNTS: &str = "accounts";
pub const ACCOUNTS_PK: &str = "accounts_pkey";
pub const HISTORY: &str = "history";
/// Filler bytes of both tables (bench/SCENARIOS.md).
pub const FILLER_LEN: usize = 84;
/// Heap rows per 8 KiB page, measured: accounts 57 (107 encoded bytes + 28
/// of tuple header and line pointer), history 54.
const ACCOUNTS_ROWS_PER_PAGE: f64 = 57.0;
const HISTORY_ROWS_PER_PAGE: f64 = 54.0;
/// Entries per page of accounts_pkey built in key order, measured.
const PK_ENTRIES_PER_PAGE: f64 = 200.0;
/// The hot set's share of the pool (bench/SCENARIOS.md: ~40%).
const HOT_SHARE: f64 = 0.40;
/// history is this many pools.
const HISTORY_POOLS: f64 = 4.0;
/// Lookups per transaction (begin + rollback: one commit-log access each).
const LOOKUPS_PER_TXN: u64 = 1000;
/// Lookup threads publish their count every this many lookups.
const PUBLISH_EVERY: u64 = 64;
/// The throttled scan sleeps at most every this many pages.
const THROTTLE_EVERY: u64 = 8;
const SEED: u64 = 0x5CA1_AB1E;
/// Paced runs: how far (in lookups) the lookups may run ahead of the scan,
/// and how long a lookup thread that is ahead sleeps before looking again.
const PACE_SLACK: f64 = 256.0;
const PACE_WAIT: Duration = Duration::from_micros(100);

/// The options of `scan-resistance` (after the scenario name).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct ScanResistanceArgs {
    /// Throttle the scan to this many pages per second (0 = full speed)
    /// [default: full speed, and 1 scan page per lookup]
    #[arg(long, value_name = "PAGES_PER_SEC")]
    pub scan_rate: Option<u64>,
    /// Hold the ratio at N scan pages per lookup by pacing whichever side is
    /// faster (here the lookups: a full-speed scan reads well under one
    /// page per lookup) [default: 1, with a full-speed row]
    #[arg(long, value_name = "N")]
    pub pages_per_lookup: Option<u32>,
    /// Rows of accounts [default: heap + index ~ 40% of the pool]
    #[arg(long, value_name = "N")]
    pub accounts_rows: Option<u64>,
    /// Rows of history [default: ~4 x pool]
    #[arg(long, value_name = "N")]
    pub history_rows: Option<u64>,
}

/// How fast the scan runs relative to the lookups in one configuration.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ScanRate {
    /// Both sides as fast as they go.
    Full,
    /// The scan throttled to this many pages per second.
    Fixed(u64),
    /// N scan pages per lookup: the faster side waits for the slower one.
    PerLookup(u32),
}

impl ScanRate {
    /// The `scan` column and `scan_speed` field.
    pub fn label(self) -> String {
        match self {
            ScanRate::Full => "full".into(),
            ScanRate::Fixed(r) => format!("{r} pages/s"),
            ScanRate::PerLookup(n) => format!("{n} page/lookup"),
        }
    }

    /// The rate in a trace file's name (`scan-full`, `scan-500ps`,
    /// `scan-2pl`: 2 pages per lookup).
    pub fn trace_part(self) -> String {
        match self {
            ScanRate::Full => "scan-full".into(),
            ScanRate::Fixed(r) => format!("scan-{r}ps"),
            ScanRate::PerLookup(n) => format!("scan-{n}pl"),
        }
    }
}

/// What `scan-resistance` runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub accounts_rows: u64,
    pub history_rows: u64,
    pub rates: Vec<ScanRate>,
}

impl Params {
    pub fn resolve(args: &ScanResistanceArgs, settings: &Settings) -> Result<Params> {
        let pool = settings.pool_buffers as f64;
        let accounts_rows = args.accounts_rows.unwrap_or_else(|| {
            (HOT_SHARE * pool / (1.0 / ACCOUNTS_ROWS_PER_PAGE + 1.0 / PK_ENTRIES_PER_PAGE)) as u64
        });
        let history_rows = args
            .history_rows
            .unwrap_or((HISTORY_POOLS * pool * HISTORY_ROWS_PER_PAGE) as u64);
        if accounts_rows == 0 || history_rows == 0 {
            return Err(BenchError::Config(
                "scan-resistance needs rows in both tables".into(),
            ));
        }
        let mut rates = Vec::new();
        match args.scan_rate {
            Some(0) => rates.push(ScanRate::Full),
            Some(r) => rates.push(ScanRate::Fixed(r)),
            None => {}
        }
        match args.pages_per_lookup {
            Some(0) => {}
            Some(n) => rates.push(ScanRate::PerLookup(n)),
            None => {}
        }
        if rates.is_empty() {
            rates = vec![ScanRate::Full, ScanRate::PerLookup(1)];
        }
        Ok(Params {
            accounts_rows,
            history_rows,
            rates,
        })
    }
}

/// One configuration's measured window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub evictor: String,
    /// Rings on in `Options`, and the scan may take the bulk-read ring.
    pub ring: bool,
    pub batch: BatchField,
    pub partitions: usize,
    /// Lookup threads (the scan thread comes on top).
    pub threads: usize,
    pub scan_threads: usize,
    pub huge_pages: bool,
    /// `"full"`, `"N pages/s"` (throttled scan) or `"N page/lookup"` (paced).
    pub scan_speed: String,
    /// The scan throttle's target in pages/s (`null`: not throttled).
    pub scan_rate_target: Option<f64>,
    /// The paced ratio of scan pages per lookup (`null`: not paced).
    pub pages_per_lookup_target: Option<f64>,
    /// Whether the scan read through a ring.
    pub scan_used_ring: bool,
    pub window_secs: f64,
    pub lookups: u64,
    pub lookups_per_sec: f64,
    /// Buffer accesses attributed to the lookups (see the module docs).
    pub lookup_accesses: u64,
    /// Pages of accounts and accounts_pkey read from storage.
    pub lookup_misses: u64,
    pub oltp_hit_ratio: f64,
    pub accesses_per_lookup: f64,
    pub scan_pages: u64,
    pub scan_pages_per_sec: f64,
    pub scan_pages_per_lookup: f64,
    /// Pages of history read from storage / pages scanned.
    pub scan_hit_ratio: f64,
    /// Scans of history that finished in the window.
    pub scans_completed: u64,
    /// Pages of accounts + accounts_pkey (the hot set).
    pub hot_set_pages: usize,
    pub hot_resident_min: usize,
    pub hot_resident_end: usize,
    pub hot_resident_mean: f64,
    /// Victims that held a page (all threads).
    pub evictions: u64,
    /// Read operations of more than one block in the window (the scan's
    /// read stream combining adjacent misses; `PoolStats::combined_reads`),
    /// and the mean blocks per such read.
    #[serde(default)]
    pub combined_reads: u64,
    #[serde(default)]
    pub blocks_per_combined_read: f64,
    /// (seconds since the warm-up began, hot-set pages resident).
    pub residency_samples: Vec<(f64, usize)>,
    /// Where the window began on the samples' time axis.
    pub window_start_secs: f64,
    /// Resident pages per relation at the end of the window.
    pub resident_end: Vec<RelPages>,
    /// Per NUMA node at the end: where the buffers' memory is (queried),
    /// and the partitions on each node with their accesses and reads since
    /// the pool opened.
    #[serde(default)]
    pub nodes_end: Vec<crate::scenarios::tables::NodeFigures>,
    /// Flattened into the row (the JSON fields `latency`, `mrc`,
    /// `intervals` and `seed`, as before they were gathered):
    /// `latency`: per operation kind in the window: `lookup` (one
    /// `get_by_key`, checked), `scan_page` (from one history page's first
    /// row to the next page's).
    /// `mrc`: the pool's live miss-ratio curve at the window's end (`--mrc`).
    /// `intervals`: one entry per `--report-interval` (warm-up included; throughput in
    /// lookups).
    /// `seed`: the seed the lookup threads' keys were drawn from (`--seed`).
    #[serde(flatten)]
    pub series: RowSeries,
    pub data_errors: u64,
}

/// HOT/COOL against the clock for one (ring, scan speed) pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub ring: bool,
    pub scan_speed: String,
    pub clock_miss_ratio: f64,
    pub hotcool_miss_ratio: f64,
    /// HOT/COOL's misses over the clock's (below 1 = fewer).
    pub miss_ratio_vs_clock: Option<f64>,
    pub clock_hot_resident_mean: f64,
    pub hotcool_hot_resident_mean: f64,
    /// HOT/COOL's mean hot-set residency over the clock's, in percent.
    pub hot_resident_delta_pct: Option<f64>,
    pub scan_pages_per_lookup_clock: f64,
    pub scan_pages_per_lookup_hotcool: f64,
    /// The two miss ratios differ beyond the noise of one window
    /// ([`crate::spread::miss_ratios_apart`]); the printed comparison quotes
    /// `miss_ratio_vs_clock` only then.
    #[serde(default)]
    pub misses_apart: bool,
}

/// A finished `scan-resistance` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScanResistanceReport {
    pub scenario: String,
    pub pool_buffers: usize,
    pub accounts_rows: u64,
    pub history_rows: u64,
    /// Size of every table and index, in pages.
    pub relations: Vec<RelPages>,
    pub hot_set_pages: usize,
    pub history_pages: usize,
    pub warmup_secs: f64,
    pub duration_secs: f64,
    pub reused_data: bool,
    pub build_secs: f64,
    pub rows: Vec<Row>,
    pub comparisons: Vec<Comparison>,
    pub data_check: DataCheck,
}

fn columns_accounts() -> Vec<Column> {
    vec![
        Column::new("aid", ColumnType::I64),
        Column::new("abalance", ColumnType::I64),
        Column::new("filler", ColumnType::Bytes),
    ]
}

fn columns_history() -> Vec<Column> {
    vec![
        Column::new("id", ColumnType::I64),
        Column::new("a", ColumnType::I64),
        Column::new("b", ColumnType::I64),
        Column::new("filler", ColumnType::Bytes),
    ]
}

/// The balance an account is loaded with (checked by every lookup).
fn balance(aid: i64) -> i64 {
    aid.wrapping_mul(7) % 10_007
}

/// Build (or reuse) the two tables.
pub fn ensure_data(settings: &Settings, p: &Params) -> Result<Dataset> {
    let tag = format!("accounts-{}-history-{}", p.accounts_rows, p.history_rows);
    let want = Stamp::new(
        NAME,
        tag.clone(),
        &[(ACCOUNTS, p.accounts_rows), (HISTORY, p.history_rows)],
    );
    let dir = dataset::dataset_dir(&settings.data_dir, NAME, &tag);
    let (na, nh, progress) = (p.accounts_rows, p.history_rows, settings.progress);
    dataset::ensure(&dir, &want, settings.pool_buffers, progress, |db| {
        db.create_table(ACCOUNTS, columns_accounts())?;
        db.create_table(HISTORY, columns_history())?;
        let filler = vec![b'a'; FILLER_LEN];
        dataset::load(
            db,
            ACCOUNTS,
            na,
            (1..=na as i64).map(|aid| {
                vec![
                    Value::I64(aid),
                    Value::I64(balance(aid)),
                    Value::Bytes(filler.clone()),
                ]
            }),
            progress,
        )?;
        dataset::create_index(db, ACCOUNTS_PK, ACCOUNTS, "aid", true)?;
        let filler = vec![b'h'; FILLER_LEN];
        dataset::load(
            db,
            HISTORY,
            nh,
            (1..=nh as i64).map(|id| {
                vec![
                    Value::I64(id),
                    Value::I64(id % 1000),
                    Value::I64(-id),
                    Value::Bytes(filler.clone()),
                ]
            }),
            progress,
        )?;
        Ok(())
    })
}

/// Run `scan-resistance`: build or reuse the data, measure every
/// configuration x scan speed, check the data.
pub fn run(settings: &Settings, p: &Params) -> Result<ScanResistanceReport> {
    crate::common::say(&format!(
        "== {NAME}: 2 x uniform point lookups on {ACCOUNTS} vs 1 seq scan of {HISTORY}; \
         pool {} buffers ({} MiB); warm-up {:.1} s, window {:.1} s",
        settings.pool_buffers,
        (settings.pool_buffers * bufmgr::PAGE_SIZE) >> 20,
        settings.warmup.as_secs_f64(),
        settings.duration.as_secs_f64(),
    ));
    let ds = ensure_data(settings, p)?;
    let configs = settings.configs();
    let first = configs
        .first()
        .ok_or_else(|| BenchError::Config("empty matrix".into()))?;
    // Sizes, from a database opened once.
    let relations = {
        let db = Database::open(
            &ds.dir,
            settings.engine_options(first).checksums(ds.stamp.checksums),
        )?;
        let r = dataset::relation_sizes(&db)?;
        db.close()?;
        r
    };
    let size = |n: &str| {
        relations
            .iter()
            .find(|r| r.name == n)
            .map_or(0, |r| r.pages)
    };
    let hot_set_pages = size(ACCOUNTS) + size(ACCOUNTS_PK);
    let history_pages = size(HISTORY);
    crate::common::say(&format!(
        "hot set: {ACCOUNTS} {} + {ACCOUNTS_PK} {} pages = {:.0}% of the pool; {HISTORY} {} pages = {:.1} x pool",
        size(ACCOUNTS),
        size(ACCOUNTS_PK),
        100.0 * hot_set_pages as f64 / settings.pool_buffers as f64,
        history_pages,
        history_pages as f64 / settings.pool_buffers as f64
    ));
    let mut cells = Vec::new();
    for &rate in &p.rates {
        for c in &configs {
            cells.push((rate, *c));
        }
    }
    let mut rows = Vec::with_capacity(cells.len());
    for (i, (rate, c)) in cells.iter().enumerate() {
        let label = format!(
            "[{}/{}] {NAME} {} ring={} scan={}",
            i + 1,
            cells.len(),
            c.evictor,
            if c.ring { "on" } else { "off" },
            rate.label()
        );
        let row = measure(&ds, settings, c, *rate, hot_set_pages, p, &label)?;
        crate::common::tell(&format!(
            "{label}: {} lookups/s, OLTP hit {:.3}%, {:.2} scan pages/lookup, hot set {}..{} of {}, \
             {} combined reads of {:.1} blocks",
            fmt_rate(row.lookups_per_sec),
            100.0 * row.oltp_hit_ratio,
            row.scan_pages_per_lookup,
            row.hot_resident_min,
            row.hot_resident_end,
            hot_set_pages,
            row.combined_reads,
            row.blocks_per_combined_read
        ));
        rows.push(row);
    }
    let comparisons = compare(&rows);
    let data_check = dataset::check(&ds, settings.engine_options(first), settings.progress)?;
    Ok(ScanResistanceReport {
        scenario: NAME.into(),
        pool_buffers: settings.pool_buffers,
        accounts_rows: p.accounts_rows,
        history_rows: p.history_rows,
        relations,
        hot_set_pages,
        history_pages,
        warmup_secs: settings.warmup.as_secs_f64(),
        duration_secs: settings.duration.as_secs_f64(),
        reused_data: ds.reused,
        build_secs: ds.build_secs,
        rows,
        comparisons,
        data_check,
    })
}

/// Counters the workers publish.
#[derive(Debug, Default)]
struct Shared<'a> {
    /// The lookups' interval latencies, with `--report-interval`.
    live: Option<&'a LiveLatency>,
    /// Within the measured window: latencies are recorded.
    in_window: AtomicBool,
    stop: AtomicBool,
    lookups: AtomicU64,
    scan_pages: AtomicU64,
    scans_completed: AtomicU64,
    scan_used_ring: AtomicBool,
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

    fn take_error(&self) -> Option<String> {
        self.first_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

/// One lookup thread: transactions of [`LOOKUPS_PER_TXN`] uniform random
/// lookups by aid, each checked.
/// Returns the thread's latencies (`lookup`).
fn lookup_worker(
    db: &Database,
    n: u64,
    t: usize,
    pace: Option<f64>,
    sh: &Shared,
    seed: u64,
) -> Result<Latencies> {
    let mut rng = lookup_rng(seed, t);
    let mut lat = Recorder::new(sh.live, LOOKUP).window(&sh.in_window);
    let mut unpublished = 0;
    let accounts = db.table_handle(ACCOUNTS)?;
    while !sh.stop.load(Ordering::Relaxed) {
        let txn = db.read()?;
        for _ in 0..LOOKUPS_PER_TXN {
            if let Some(ratio) = pace {
                // Paced: no further ahead of the scan than PACE_SLACK lookups.
                while sh.lookups.load(Ordering::Relaxed) as f64
                    > sh.scan_pages.load(Ordering::Relaxed) as f64 / ratio + PACE_SLACK
                {
                    if sh.stop.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(PACE_WAIT);
                }
            }
            let aid = rng.random_range(1..=n as i64);
            let started = Instant::now();
            let found = txn.get_by_key(&accounts, "aid", &Value::I64(aid))?;
            lat.record(LOOKUP, started);
            match found {
                Some((_, row))
                    if row.first() == Some(&Value::I64(aid))
                        && row.get(1) == Some(&Value::I64(balance(aid))) => {}
                other => sh.error(format!("lookup of aid {aid} returned {other:?}")),
            }
            unpublished += 1;
            if unpublished == PUBLISH_EVERY {
                sh.lookups.fetch_add(unpublished, Ordering::Relaxed);
                unpublished = 0;
                if sh.stop.load(Ordering::Relaxed) {
                    break;
                }
            }
        }
        txn.rollback()?;
    }
    sh.lookups.fetch_add(unpublished, Ordering::Relaxed);
    Ok(lat.finish())
}

/// The generator of lookup thread `t`'s keys (`seed`: `--seed` or
/// `SEED`).
pub fn lookup_rng(seed: u64, t: usize) -> SmallRng {
    SmallRng::seed_from_u64(seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9))
}

/// The first `n` keys (aids) lookup thread `t` draws from `seed` over
/// `rows` accounts: what `--seed` fixes.
pub fn first_keys(seed: u64, t: usize, rows: u64, n: usize) -> Vec<i64> {
    let mut rng = lookup_rng(seed, t);
    (0..n).map(|_| rng.random_range(1..=rows as i64)).collect()
}

/// The operation kinds of the latency table.
pub const LOOKUP: &str = "lookup";
pub const SCAN_PAGE: &str = "scan_page";

/// The scan thread: history from start to end, again and again; each
/// complete scan must see every row. `rate`: pages per second, or full speed.
/// Returns the thread's latencies (`scan_page`).
fn scan_worker(
    db: &Database,
    ring: bool,
    rate: Option<f64>,
    rows: u64,
    sh: &Shared,
) -> Result<Latencies> {
    let started = Instant::now();
    let mut lat = Recorder::new(None, SCAN_PAGE).window(&sh.in_window);
    let mut pages_total = 0u64;
    let history = db.table_handle(HISTORY)?;
    let cols = history.columns();
    let (id, neg) = (cols[0], cols[2]);
    let opts = ScanOptions {
        ring: if ring {
            RingChoice::Auto
        } else {
            RingChoice::Never
        },
        hint_mode: db.options().hint_mode,
    };
    while !sh.stop.load(Ordering::Relaxed) {
        let txn = db.read()?;
        let mut seen = 0u64;
        let mut last_block = None;
        let mut page_started = Instant::now();
        let mut complete = true;
        // Each row a borrowed view on its page: the scan decodes only the
        // two columns it checks, so it streams pages as fast as the pool
        // hands them out.
        let summary = txn.scan_until(&history, opts, |row| {
            let rid = row.id();
            if last_block != Some(rid.block) {
                if last_block.is_some() {
                    lat.record(SCAN_PAGE, page_started);
                }
                page_started = Instant::now();
                last_block = Some(rid.block);
                sh.scan_pages.fetch_add(1, Ordering::Relaxed);
                pages_total += 1;
                if let Some(rate) = rate
                    && pages_total.is_multiple_of(THROTTLE_EVERY)
                {
                    let due = started + Duration::from_secs_f64(pages_total as f64 / rate);
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                }
                if sh.stop.load(Ordering::Relaxed) {
                    complete = false;
                    return Ok(false);
                }
            }
            if cols.len() != 4 || row.i64(neg)? != -row.i64(id)? {
                sh.error(format!("history row {rid:?} is {:?}", row.to_row()));
            }
            seen += 1;
            Ok(true)
        })?;
        sh.scan_used_ring
            .store(summary.used_ring, Ordering::Relaxed);
        txn.rollback()?;
        if complete {
            if seen != rows {
                sh.error(format!("a scan of {HISTORY} saw {seen} rows, not {rows}"));
            }
            sh.scans_completed.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(lat.finish())
}

/// The counters at one instant of the window.
struct Point {
    at: Instant,
    accesses: u64,
    evictions: u64,
    combined_reads: u64,
    combined_read_blocks: u64,
    reads: Vec<u64>,
    lookups: u64,
    scan_pages: u64,
    scans: u64,
}

fn point(db: &Database, reads: &ReadCounts, sh: &Shared<'_>) -> Point {
    let t = db.pool_stats().totals();
    Point {
        at: Instant::now(),
        accesses: t.accesses,
        evictions: t.evictions,
        combined_reads: t.combined_reads,
        combined_read_blocks: t.combined_read_blocks,
        reads: reads.snapshot(),
        lookups: sh.lookups.load(Ordering::Relaxed),
        scan_pages: sh.scan_pages.load(Ordering::Relaxed),
        scans: sh.scans_completed.load(Ordering::Relaxed),
    }
}

/// The scan thread's id in a `--trace` (the lookup threads are 0, 1, ...).
pub const SCAN_THREAD_ID: u32 = 1000;

/// The relations the attribution of reads needs (their slots in the read
/// counts).
struct Rels {
    accounts: usize,
    history: usize,
    accounts_pk: usize,
}

/// What the threads did in one window.
struct Window {
    sampled: harness::Sampled<Point, usize>,
    intervals: Vec<Interval>,
    /// Every thread's, merged.
    latencies: Latencies,
    /// The residency at the window's end.
    resident_end: Vec<RelPages>,
}

/// What one window measured, before it is turned into a row.
struct Measured {
    window: Window,
    nodes_end: Vec<crate::scenarios::tables::NodeFigures>,
    mrc: Option<Curve>,
    scan_used_ring: bool,
    data_errors: u64,
}

/// One configuration at one scan speed: the window, the figures read
/// before the database closes, the row.
fn measure(
    ds: &Dataset,
    settings: &Settings,
    c: &Config,
    speed: ScanRate,
    hot_set_pages: usize,
    p: &Params,
    label: &str,
) -> Result<Row> {
    let part = speed.trace_part();
    let cell: &[&str] = if p.rates.len() > 1 { &[&part] } else { &[] };
    let trace = settings.trace_for(c, cell);
    let (db, reads) = dataset::open_counting(ds, settings.engine_options(c).trace(trace.clone()))?;
    let rels = relation_slots(&db)?;
    let live = LiveLatency::new();
    let sh = Shared {
        live: settings.measures.report_interval.map(|_| &live),
        ..Shared::default()
    };
    let seed = settings.seed(SEED);
    let window = window(
        settings,
        &db,
        &reads,
        c,
        speed,
        p,
        seed,
        label,
        (&sh, &live),
    )?;
    let nodes_end = crate::scenarios::tables::node_figures(&db, &db.pool_stats());
    // Read before the trace stops: the curve and a trace cover the same
    // accesses (every worker has exited, so its last sampled batch is in).
    let mrc = common::curve_of(&db);
    common::note_trace(settings, trace, db.pool())?;
    db.close()?;
    let data_errors = sh.data_errors.load(Ordering::Relaxed);
    if let Some(e) = sh.take_error() {
        eprintln!("{label}: DATA ERROR: {e} ({data_errors} in all)");
    }
    let m = Measured {
        window,
        nodes_end,
        mrc,
        scan_used_ring: sh.scan_used_ring.load(Ordering::Relaxed),
        data_errors,
    };
    Ok(row_of(c, speed, hot_set_pages, seed, &rels, m))
}

/// The slots of accounts, history and the accounts index in the read
/// counts.
fn relation_slots(db: &Database) -> Result<Rels> {
    let rel_of = |name: &str| db.table(name).map(|t| t.rel.0 as usize);
    Ok(Rels {
        accounts: rel_of(ACCOUNTS)?,
        history: rel_of(HISTORY)?,
        accounts_pk: db
            .indexes()
            .iter()
            .find(|i| i.name == ACCOUNTS_PK)
            .map(|i| i.rel.0 as usize)
            .ok_or_else(|| BenchError::Data(format!("index {ACCOUNTS_PK} is missing")))?,
    })
}

/// The scan target of `speed`: pages per second, and pages per lookup.
fn targets(speed: ScanRate) -> (Option<f64>, Option<f64>) {
    let rate = match speed {
        ScanRate::Fixed(r) => Some(r as f64),
        _ => None,
    };
    let pace = match speed {
        ScanRate::PerLookup(n) => Some(f64::from(n)),
        _ => None,
    };
    (rate, pace)
}

/// The lookup threads and the scan thread through the warm-up and the
/// sampled window (and the interval reports, if asked): the window's
/// points and hot-set samples, the intervals, every thread's latencies
/// merged, and the residency at the window's end.
#[allow(clippy::too_many_arguments)]
fn window(
    settings: &Settings,
    db: &Database,
    reads: &ReadCounts,
    c: &Config,
    speed: ScanRate,
    p: &Params,
    seed: u64,
    label: &str,
    (sh, live): (&Shared<'_>, &LiveLatency),
) -> Result<Window> {
    let (rate, pace) = targets(speed);
    let every = crate::common::sample_interval(settings.duration);
    let total = settings.warmup + settings.duration;
    let pb = common::progress_bar(
        total.as_millis() as u64,
        settings.progress,
        &format!("{label}: warm-up"),
    );
    // The residency of the latest sample taken with a point: at the end,
    // the window's end residency.
    let last_residency = std::cell::RefCell::new(Vec::new());
    let hot_sample = |with_point: bool| {
        let res = dataset::residency(db);
        let hot = dataset::resident_of(&res, &[ACCOUNTS, ACCOUNTS_PK]);
        if with_point {
            *last_residency.borrow_mut() = res;
        }
        hot
    };
    // Inputs: a lookup thread's number, or none for the scan thread.
    let threads = (0..c.threads).map(Some).chain([None]);
    let measured = harness::run_crew(
        threads,
        &|_, lookup: Option<usize>| match lookup {
            Some(t) => traced(db, t as u32, || {
                lookup_worker(db, p.accounts_rows, t, pace, sh, seed)
            }),
            None => traced(db, SCAN_THREAD_ID, || {
                scan_worker(db, c.ring, rate, p.history_rows, sh)
            }),
        },
        || sh.stop.store(true, Ordering::Relaxed),
        |_| {
            let (window, intervals) = harness::with_intervals(
                settings.measures.report_interval,
                (label, "lookups"),
                live,
                || Tally::of(&db.pool_stats(), sh.lookups.load(Ordering::Relaxed)),
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
                        |p| hot_sample(p.is_some()),
                    )
                },
            );
            window.map(|w| (w, intervals))
        },
    );
    pb.finish_and_clear();
    let ((w, intervals), threads_latencies) = measured?;
    let resident_end = last_residency.take();
    let mut latencies = Latencies::new();
    for l in &threads_latencies {
        latencies.merge(l);
    }
    Ok(Window {
        sampled: w,
        intervals,
        latencies,
        resident_end,
    })
}

/// The row of one window: lookups' and scan's accesses told apart, the
/// reads of each relation, the hot set's residency over the window.
fn row_of(
    c: &Config,
    speed: ScanRate,
    hot_set_pages: usize,
    seed: u64,
    rels: &Rels,
    m: Measured,
) -> Row {
    let (rate, pace) = targets(speed);
    let Window {
        sampled,
        intervals,
        latencies,
        resident_end,
    } = m.window;
    let (p0, p1, samples, window_start) = (
        sampled.start,
        sampled.end,
        sampled.samples,
        sampled.window_from,
    );
    let secs = (p1.at - p0.at).as_secs_f64();
    let d = |v: &[u64], i: usize| v[i].saturating_sub(p0.reads[i]);
    let lookups = p1.lookups - p0.lookups;
    let scan_pages = p1.scan_pages - p0.scan_pages;
    let accesses = p1.accesses - p0.accesses;
    let lookup_accesses = accesses.saturating_sub(scan_pages);
    let lookup_misses = d(&p1.reads, rels.accounts.min(p1.reads.len() - 1))
        + d(&p1.reads, rels.accounts_pk.min(p1.reads.len() - 1));
    let scan_misses = d(&p1.reads, rels.history.min(p1.reads.len() - 1));
    let window: Vec<usize> = samples
        .iter()
        .filter(|(t, _)| *t + 1e-9 >= window_start.as_secs_f64())
        .map(|s| s.1)
        .collect();
    let ratio = |a: u64, b: u64| {
        if b == 0 {
            1.0
        } else {
            1.0 - a as f64 / b as f64
        }
    };
    Row {
        evictor: c.evictor.name().into(),
        ring: c.ring,
        batch: c.batch.into(),
        partitions: c.partitions,
        threads: c.threads,
        scan_threads: 1,
        huge_pages: c.huge_pages,
        scan_speed: speed.label(),
        scan_rate_target: rate,
        pages_per_lookup_target: pace,
        scan_used_ring: m.scan_used_ring,
        window_secs: secs,
        lookups,
        lookups_per_sec: lookups as f64 / secs,
        lookup_accesses,
        lookup_misses,
        oltp_hit_ratio: ratio(lookup_misses, lookup_accesses),
        accesses_per_lookup: lookup_accesses as f64 / lookups.max(1) as f64,
        scan_pages,
        scan_pages_per_sec: scan_pages as f64 / secs,
        scan_pages_per_lookup: scan_pages as f64 / lookups.max(1) as f64,
        scan_hit_ratio: ratio(scan_misses, scan_pages),
        scans_completed: p1.scans - p0.scans,
        hot_set_pages,
        hot_resident_min: window.iter().copied().min().unwrap_or(0),
        hot_resident_end: window.last().copied().unwrap_or(0),
        hot_resident_mean: window.iter().sum::<usize>() as f64 / window.len().max(1) as f64,
        evictions: p1.evictions - p0.evictions,
        combined_reads: p1.combined_reads - p0.combined_reads,
        blocks_per_combined_read: (p1.combined_read_blocks - p0.combined_read_blocks) as f64
            / (p1.combined_reads - p0.combined_reads).max(1) as f64,
        residency_samples: samples,
        window_start_secs: window_start.as_secs_f64(),
        resident_end,
        nodes_end: m.nodes_end,
        series: RowSeries {
            latency: latencies.by_kind(),
            mrc: m.mrc,
            intervals,
            seed,
        },
        data_errors: m.data_errors,
    }
}

fn compare(rows: &[Row]) -> Vec<Comparison> {
    let mut out = Vec::new();
    for h in rows.iter().filter(|r| r.evictor == "hotcool") {
        let Some(c) = rows.iter().find(|c| {
            c.evictor == "clock"
                && c.ring == h.ring
                && c.scan_speed == h.scan_speed
                && c.batch == h.batch
                && c.partitions == h.partitions
                && c.threads == h.threads
                && c.huge_pages == h.huge_pages
        }) else {
            continue;
        };
        let (cm, hm) = (1.0 - c.oltp_hit_ratio, 1.0 - h.oltp_hit_ratio);
        out.push(Comparison {
            ring: h.ring,
            scan_speed: h.scan_speed.clone(),
            clock_miss_ratio: cm,
            hotcool_miss_ratio: hm,
            miss_ratio_vs_clock: (cm > 0.0).then(|| hm / cm),
            clock_hot_resident_mean: c.hot_resident_mean,
            hotcool_hot_resident_mean: h.hot_resident_mean,
            hot_resident_delta_pct: dataset::pct_change(h.hot_resident_mean, c.hot_resident_mean),
            scan_pages_per_lookup_clock: c.scan_pages_per_lookup,
            scan_pages_per_lookup_hotcool: h.scan_pages_per_lookup,
            misses_apart: crate::spread::miss_ratios_apart(
                h.lookup_misses,
                h.lookup_accesses,
                c.lookup_misses,
                c.lookup_accesses,
            ),
        });
    }
    out
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

impl ScanResistanceReport {
    /// The headline comparison: ring off, paced to scan pages per lookup
    /// (the regime of the model), else ring off at full speed, else the
    /// first.
    pub fn headline(&self) -> Option<&Comparison> {
        self.comparisons
            .iter()
            .find(|c| !c.ring && c.scan_speed.ends_with("page/lookup"))
            .or_else(|| {
                self.comparisons
                    .iter()
                    .find(|c| !c.ring && c.scan_speed == "full")
            })
            .or_else(|| self.comparisons.first())
    }

    /// Ring off at full speed, if it ran.
    pub fn full_speed_ring_off(&self) -> Option<&Comparison> {
        self.comparisons
            .iter()
            .find(|c| !c.ring && c.scan_speed == "full")
    }

    fn label(r: &Row) -> String {
        format!(
            "{} ring={} scan={}",
            r.evictor,
            on_off(r.ring),
            r.scan_speed
        )
    }
}

impl ScanResistanceReport {
    /// One line per configuration and scan speed.
    fn rows_table(&self) -> Table {
        let mut t = Table::new(&[
            "evictor",
            "ring",
            "scan",
            "lookups/s",
            "scan pg/s",
            "scan pg/lookup",
            "OLTP hit%",
            "OLTP miss%",
            "hot min",
            "hot end",
            "hot mean%",
            "scans",
            "acc/lookup",
            "lookup p99 us",
            "hc/clk misses",
        ]);
        for r in &self.rows {
            let cmp = (r.evictor == "hotcool")
                .then(|| {
                    self.comparisons
                        .iter()
                        .find(|c| c.ring == r.ring && c.scan_speed == r.scan_speed)
                })
                .flatten();
            t.push(vec![
                r.evictor.clone(),
                on_off(r.ring).into(),
                r.scan_speed.clone(),
                fmt_rate(r.lookups_per_sec),
                fmt_rate(r.scan_pages_per_sec),
                format!("{:.2}", r.scan_pages_per_lookup),
                format!("{:.3}", 100.0 * r.oltp_hit_ratio),
                format!("{:.3}", 100.0 * (1.0 - r.oltp_hit_ratio)),
                r.hot_resident_min.to_string(),
                r.hot_resident_end.to_string(),
                format!(
                    "{:.1}",
                    100.0 * r.hot_resident_mean / r.hot_set_pages.max(1) as f64
                ),
                r.scans_completed.to_string(),
                format!("{:.2}", r.accesses_per_lookup),
                r.series
                    .latency
                    .get(LOOKUP)
                    .map_or("-".into(), |l| format!("{:.1}", l.p99_us)),
                match cmp {
                    Some(c) if !c.misses_apart => "noise".into(),
                    _ => cmp
                        .and_then(|c| c.miss_ratio_vs_clock)
                        .map_or("-".into(), |x| format!("{x:.2}x")),
                },
            ]);
        }
        t
    }

    /// One line per compared pair: clock beside HOT/COOL.
    fn comparison_lines(&self) -> String {
        let mut out = String::new();
        for c in &self.comparisons {
            out += &format!(
                "  ring {:>3}, scan {:>13}: OLTP miss clock {:.3}% vs HOT/COOL {:.3}% ({}); hot set resident {} ({:.1} vs {:.1} scan pages per lookup)\n",
                on_off(c.ring),
                c.scan_speed,
                100.0 * c.clock_miss_ratio,
                100.0 * c.hotcool_miss_ratio,
                if c.misses_apart {
                    c.miss_ratio_vs_clock
                        .map_or("-".into(), |x| format!("{x:.2}x the clock's misses"))
                } else {
                    "within the noise of one window".into()
                },
                c.hot_resident_delta_pct
                    .map_or("-".into(), |x| format!("{x:+.1}% with HOT/COOL")),
                c.scan_pages_per_lookup_clock,
                c.scan_pages_per_lookup_hotcool,
            );
        }
        out
    }

    /// Per configuration: where the buffers went (and per NUMA node), the
    /// latency table and the miss-ratio curves.
    fn per_configuration(&self) -> String {
        let labels: Vec<String> = self.rows.iter().map(Self::label).collect();
        let ends: Vec<&[RelPages]> = self
            .rows
            .iter()
            .map(|r| r.resident_end.as_slice())
            .collect();
        let mut out = format!(
            "where the buffers went (pages resident at the end of each window):\n{}",
            dataset::residency_table(&labels, &ends, self.pool_buffers)
        );
        let nodes: Vec<(String, Vec<crate::scenarios::tables::NodeFigures>)> = labels
            .iter()
            .zip(&self.rows)
            .map(|(l, r)| (l.clone(), r.nodes_end.clone()))
            .collect();
        out += &crate::scenarios::tables::render_nodes(&nodes);
        let measured: Vec<_> = labels
            .iter()
            .zip(&self.rows)
            .map(|(l, r)| (l.clone(), &r.series.latency, r.series.mrc.as_ref()))
            .collect();
        out += &latency::tables_with_curves(&measured);
        out
    }
}

impl Report for ScanResistanceReport {
    fn scenario(&self) -> &str {
        &self.scenario
    }

    fn render(&self) -> String {
        let t = self.rows_table();
        let mut out = format!(
            "\n{} (pool {} buffers; hot set {} pages = {:.0}% of the pool; history {} pages = {:.1} x pool):\n{t}",
            self.scenario,
            self.pool_buffers,
            self.hot_set_pages,
            100.0 * self.hot_set_pages as f64 / self.pool_buffers as f64,
            self.history_pages,
            self.history_pages as f64 / self.pool_buffers as f64,
        );
        out += "OLTP hit%: lookup threads' hits / accesses (misses = accounts + accounts_pkey pages read; \
                accesses = all accesses - scan pages); hot min/end/mean: hot-set pages resident in the window; \
                acc/lookup: buffer accesses per lookup (index height + 1 if the attribution is sound); \
                lookup p99 us: the 99th percentile of one lookup's time (all lookup threads); \
                hc/clk misses: HOT/COOL's misses over the clock's, \"noise\" where the two miss ratios \
                are under 0.05 points or 3 sigma of their counts apart\n";
        out += &self.comparison_lines();
        out += &self.per_configuration();
        out += &self.data_check.render();
        out
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a report of plain fields serialises")
    }

    fn failures(&self) -> Vec<String> {
        let mut f: Vec<String> = self
            .rows
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
        let mut out = Vec::new();
        let mut speeds: Vec<&str> = Vec::new();
        for r in &self.rows {
            if !speeds.contains(&r.scan_speed.as_str()) {
                speeds.push(&r.scan_speed);
            }
        }
        for speed in speeds {
            let rows: Vec<&Row> = self.rows.iter().filter(|r| r.scan_speed == speed).collect();
            let series: Vec<plot::Series> = rows
                .iter()
                .map(|r| plot::Series {
                    name: format!(
                        "{} ring {} ({:.2} scan pages/lookup)",
                        crate::common::evictor_label(&r.evictor),
                        on_off(r.ring),
                        r.scan_pages_per_lookup
                    ),
                    points: r
                        .residency_samples
                        .iter()
                        .map(|&(t, p)| (t, 100.0 * p as f64 / r.hot_set_pages.max(1) as f64))
                        .collect(),
                    dashed: r.ring,
                    colour: crate::common::evictor_colour(&r.evictor),
                })
                .collect();
            let window = rows.first().map_or(0.0, |r| r.window_start_secs);
            // Zoom on the window: from a little under its lowest sample (the
            // warm-up's climb from an empty pool is cut off below that).
            let lowest = series
                .iter()
                .flat_map(|s| s.points.iter().filter(|p| p.0 >= window).map(|p| p.1))
                .fold(100.0_f64, f64::min);
            let y_lo = ((lowest - 2.0).floor()).clamp(0.0, 95.0);
            let series: Vec<plot::Series> = series
                .into_iter()
                .map(|mut s| {
                    s.points.retain(|p| p.1 >= y_lo);
                    s
                })
                .collect();
            let title = if speed == "full" {
                "scan-resistance: hot set resident under a full-speed seq scan".to_string()
            } else {
                format!("scan-resistance: hot set resident, seq scan at {speed}")
            };
            if let Ok(svg) = plot::lines(
                &title,
                "seconds since the warm-up began",
                "accounts + accounts_pkey pages resident (% of the hot set)",
                &series,
                (y_lo, 100.0 + (100.0 - y_lo) * 0.04),
                Some((window, " measured window")),
            ) {
                out.push(SvgPlot {
                    file: format!(
                        "scan-resistance-hot-set-{}.svg",
                        speed.replace(['/', ' '], "-")
                    ),
                    svg,
                });
            }
        }
        if let Some(svg) = plot::residency_bars(
            "scan-resistance: where the buffers went (end of each window)",
            self.pool_buffers,
            &self
                .rows
                .iter()
                .map(|r| {
                    let speed = match r.pages_per_lookup_target {
                        Some(n) => format!("{n} pg/lk"),
                        None => r.scan_speed.replace(" pages/s", "/s"),
                    };
                    let ev = crate::common::evictor_label(&r.evictor);
                    (
                        format!("{ev}, ring {}, {speed}", on_off(r.ring)),
                        r.resident_end.as_slice(),
                    )
                })
                .collect::<Vec<_>>(),
        ) {
            out.push(SvgPlot {
                file: "scan-resistance-by-relation.svg".into(),
                svg,
            });
        }
        out
    }
}
