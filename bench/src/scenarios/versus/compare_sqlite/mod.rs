//! `compare-sqlite`: the engine beside SQLite on the same generated data,
//! workload by workload, runs alternating (engine, SQLite, engine, SQLite,
//! ...), every result checked against the data and against the other side.
//!
//! ```text
//!   accounts(aid i64 1..=N, k i64 uniform random in [0, N), abalance i64
//!            (-1 on ~1% of the rows), filler 84 bytes), non-unique index on k
//!   engine:  cached in <data-dir>/compare-sqlite/accounts-N (bulk_load, hinted),
//!            pool = table + index + slack, every page read in before timing
//!   SQLite:  cached in <data-dir>/compare-sqlite/sqlite-accounts-N/accounts.db,
//!            WAL, synchronous=FULL, cache_size = 2 x the file, one
//!            connection per thread, warmed by scans of table and index
//!
//!   workload                engine                               SQLite
//!   lookup-1   (1,2 thr)    begin; lookup_each; commit           BEGIN; SELECT .. WHERE k=?; COMMIT
//!   lookup-100 (1,2 thr)    begin; 100 x lookup_each; commit     BEGIN; 100 x SELECT; COMMIT
//!   scan-count              scan_each, count abalance == -1      SELECT count(*) .. NOT INDEXED WHERE abalance=-1
//!   scan-sum                scan_each, sum k                     SELECT sum(k) .. NOT INDEXED
//!   scan-count-owned        for r in txn.scan(t)?, count         as scan-count
//!   scan-sum-owned          for r in txn.scan(t)?, sum k         as scan-sum
//!   bulk-load               open fresh, create table + index,    BEGIN; CREATE TABLE; N x INSERT;
//!                           bulk_load N rows (one transaction)   CREATE INDEX; COMMIT
//!   zipf (2 thr)            t(id, k1, k2, k3, filler 140) of 2.7 M rows (index-residency's data
//!                           set), 128 MiB pool vs 128 MiB cache per connection, zipfian probes
//!                           through one of 3 indexes, 1000 per transaction
//! ```
//!
//! The engine's side of each workload is one function in [`engine_side`]
//! (handles, `lookup_each`, `scan_each`), SQLite's one in `sqlite_side`
//! (built with `--features sqlite` only); the driver here times them.
//! Without the feature, [`run`] fails with a message naming it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use engine::{Column, ColumnType, Row as EngineRow, Value};
use serde::{Deserialize, Serialize};

use crate::common::{self, CommonArgs, Defaults, EvictorChoice, Report, Settings, Table};
use crate::error::{BenchError, Result};
use crate::latency::{self, Latencies};

#[cfg(feature = "sqlite")]
mod driver;
pub mod engine_side;
#[cfg(feature = "sqlite")]
pub mod sqlite_side;

pub const NAME: &str = "compare-sqlite";
/// Whether this build can run the scenario.
pub const AVAILABLE: bool = cfg!(feature = "sqlite");
pub const TABLE: &str = "accounts";
pub const K_INDEX: &str = "accounts_k";
pub const FILLER_LEN: usize = 84;
/// Columns of an accounts row.
pub const AID: usize = 0;
pub const K: usize = 1;
pub const ABALANCE: usize = 2;
/// Rows of accounts by default and under `--quick`.
pub const DEFAULT_ROWS: u64 = 1_000_000;
pub const QUICK_ROWS: u64 = 50_000;
/// The zipf workload's table at full scale (index-residency's 128 MiB data
/// set) and its pool / SQLite cache per connection.
pub const ZIPF_FULL_ROWS: u64 = 2_700_000;
pub const ZIPF_FULL_POOL_PAGES: usize = 16_384;
pub const QUICK_ZIPF_ROWS: u64 = 135_000;
/// Threads of the zipf workload.
pub const ZIPF_THREADS: usize = 2;
/// Probes per transaction in the zipf workload (index-residency's figure).
pub const ZIPF_PER_TXN: usize = 1000;
pub const DEFAULT_ROUNDS: usize = 3;
pub const QUICK_ROUNDS: usize = 2;
const SEED: u64 = 0xC0FF_5A17;

/// The workloads, in the order they run.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Workload {
    /// One lookup by k per transaction.
    Lookup1,
    /// 100 lookups by k per transaction.
    Lookup100,
    /// Full scan counting abalance = -1.
    ScanCount,
    /// Full scan summing k.
    ScanSum,
    /// Full scan counting abalance = -1 through the owned iterator.
    ScanCountOwned,
    /// Full scan summing k through the owned iterator.
    ScanSumOwned,
    /// Bulk load of the accounts with the index into a fresh database.
    BulkLoad,
    /// Zipfian probes through 3 indexes under memory pressure.
    Zipf,
}

impl Workload {
    pub const ALL: [Workload; 8] = [
        Workload::Lookup1,
        Workload::Lookup100,
        Workload::ScanCount,
        Workload::ScanSum,
        Workload::ScanCountOwned,
        Workload::ScanSumOwned,
        Workload::BulkLoad,
        Workload::Zipf,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Lookup1 => "lookup-1",
            Workload::Lookup100 => "lookup-100",
            Workload::ScanCount => "scan-count",
            Workload::ScanSum => "scan-sum",
            Workload::ScanCountOwned => "scan-count-owned",
            Workload::ScanSumOwned => "scan-sum-owned",
            Workload::BulkLoad => "bulk-load",
            Workload::Zipf => "zipf",
        }
    }

    fn bit(self) -> u8 {
        1 << Workload::ALL.iter().position(|&w| w == self).unwrap_or(0)
    }
}

/// A set of workloads (`--workloads lookup-1,scan-sum`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct WorkloadSet(u8);

impl WorkloadSet {
    pub fn all() -> WorkloadSet {
        WorkloadSet(Workload::ALL.iter().fold(0, |m, w| m | w.bit()))
    }

    pub fn contains(self, w: Workload) -> bool {
        self.0 & w.bit() != 0
    }
}

fn parse_workloads(s: &str) -> std::result::Result<WorkloadSet, String> {
    let mut m = 0u8;
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if name == "all" {
            m |= WorkloadSet::all().0;
            continue;
        }
        let w = Workload::ALL
            .iter()
            .find(|w| w.name() == name)
            .ok_or_else(|| {
                format!(
                    "unknown workload {name:?}; one of all, {}",
                    Workload::ALL.map(Workload::name).join(", ")
                )
            })?;
        m |= w.bit();
    }
    if m == 0 {
        return Err("no workload named".into());
    }
    Ok(WorkloadSet(m))
}

impl std::str::FromStr for WorkloadSet {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<WorkloadSet, String> {
        parse_workloads(s)
    }
}

/// The options of `compare-sqlite` (after the scenario name).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct Args {
    /// Rows of accounts [default: 1,000,000; 50,000 with --quick]
    #[arg(long, value_name = "N")]
    pub rows: Option<u64>,
    /// Runs of each side per workload, alternating engine and SQLite [default: 3; 2 with --quick]
    #[arg(long, value_name = "N")]
    pub rounds: Option<usize>,
    /// Rows of the zipf workload's table; its pool and SQLite cache scale with it
    /// (128 MiB at 2,700,000) [default: 2,700,000; 135,000 with --quick]
    #[arg(long, value_name = "N")]
    pub zipf_rows: Option<u64>,
    /// Workloads to run, comma-separated: all, lookup-1, lookup-100, scan-count, scan-sum,
    /// bulk-load, zipf [default: all]
    #[arg(long, value_name = "W[,W...]", value_parser = parse_workloads)]
    pub workloads: Option<WorkloadSet>,
}

/// Defaults: a 3 s window after a 1 s warm-up, threads 1 and 2 for the
/// lookups (the zipf workload always uses 2).
pub fn defaults() -> Defaults {
    Defaults {
        duration: Duration::from_secs(3),
        warmup: Duration::from_secs(1),
        threads: vec![1, 2],
        batches: vec![bufmgr::SweepBatch::Fixed(1)],
        // The engine's default (`Options::huge_pages`); `--huge-pages off`
        // runs the engine on normal pages.
        huge_pages: common::Toggle::On,
        evictor: EvictorChoice::Clock,
        quick_pool_mib: common::QUICK_POOL_MIB,
        quick_threads: common::QUICK_THREADS.to_vec(),
    }
}

/// `--quick` windows (when not given): 0.3 s after 0.2 s, so the whole
/// scenario runs in seconds. `--pool-mib` / `--pool-pages` left out: the
/// pool is sized to hold the data (`pool_buffers` 0 = automatic).
pub fn adjust_settings(args: &CommonArgs, s: &mut Settings) {
    if args.quick {
        if args.duration.is_none() {
            s.duration = Duration::from_millis(300);
        }
        if args.warmup.is_none() {
            s.warmup = Duration::from_millis(200);
        }
    }
    if args.pool_mib.is_none() && args.pool_pages.is_none() {
        s.pool_buffers = 0;
    }
}

/// What a run measures, resolved from the options.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub rows: u64,
    pub rounds: usize,
    pub zipf_rows: u64,
    pub zipf_pool_pages: usize,
    pub workloads: WorkloadSet,
}

impl Params {
    pub fn resolve(args: &Args, settings: &Settings) -> Result<Params> {
        let rows = args.rows.unwrap_or(if settings.quick {
            QUICK_ROWS
        } else {
            DEFAULT_ROWS
        });
        let rounds = args.rounds.unwrap_or(if settings.quick {
            QUICK_ROUNDS
        } else {
            DEFAULT_ROUNDS
        });
        let zipf_rows = args.zipf_rows.unwrap_or(if settings.quick {
            QUICK_ZIPF_ROWS
        } else {
            ZIPF_FULL_ROWS
        });
        if rows < 100 || zipf_rows < 100 || rows > u64::from(u32::MAX) {
            return Err(BenchError::Config(format!(
                "{NAME}: --rows and --zipf-rows must be at least 100 (and rows below 2^32)"
            )));
        }
        if rounds < 2 {
            return Err(BenchError::Config(format!(
                "{NAME}: --rounds must be at least 2 (runs alternate engine and SQLite)"
            )));
        }
        if settings.huge_pages.len() != 1 {
            return Err(BenchError::Config(format!(
                "{NAME}: --huge-pages takes on or off here (one engine configuration per run)"
            )));
        }
        let zipf_pool_pages = ((ZIPF_FULL_POOL_PAGES as f64 * zipf_rows as f64
            / ZIPF_FULL_ROWS as f64) as usize)
            .max(256);
        Ok(Params {
            rows,
            rounds,
            zipf_rows,
            zipf_pool_pages,
            workloads: args.workloads.unwrap_or_else(WorkloadSet::all),
        })
    }
}

// ---------------------------------------------------------------------------
// The data
// ---------------------------------------------------------------------------

/// splitmix64's finaliser.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The hash of one returned row of a lookup of `key`: the lookup's hash is
/// the wrapping sum over its rows, so row order does not matter.
pub fn pair_hash(key: u64, id: i64) -> u64 {
    mix(key ^ mix(id as u64).rotate_left(17))
}

/// The generated accounts: row `i` has `aid = i + 1`, `k = k[i]`.
#[derive(Clone, Debug)]
pub struct Accounts {
    pub k: Vec<i64>,
}

impl Accounts {
    /// `n` rows, k uniform in `[0, n)` from a fixed seed.
    pub fn generate(n: u64) -> Accounts {
        let mut s = SEED;
        let k = (0..n)
            .map(|_| {
                s = s.wrapping_add(1);
                // Multiply-shift: uniform in [0, n) without modulo bias worth noting.
                ((u128::from(mix(s)) * u128::from(n)) >> 64) as i64
            })
            .collect();
        Accounts { k }
    }

    pub fn rows(&self) -> u64 {
        self.k.len() as u64
    }

    /// abalance of `aid`: -1 on about 1% of the rows, else 0..99,999.
    pub fn abalance(aid: i64) -> i64 {
        let h = mix(aid as u64 ^ 0xABBA);
        if h.is_multiple_of(100) {
            -1
        } else {
            ((h >> 32) % 100_000) as i64
        }
    }

    pub fn filler() -> [u8; FILLER_LEN] {
        [b'x'; FILLER_LEN]
    }

    /// `(aid, k, abalance)` of every row, in aid order.
    pub fn tuples(&self) -> impl Iterator<Item = (i64, i64, i64)> + '_ {
        self.k.iter().enumerate().map(|(i, &k)| {
            let aid = i as i64 + 1;
            (aid, k, Accounts::abalance(aid))
        })
    }

    /// The rows as the engine takes them.
    pub fn engine_rows(&self) -> impl Iterator<Item = EngineRow> + '_ {
        self.tuples().map(|(aid, k, ab)| {
            vec![
                Value::I64(aid),
                Value::I64(k),
                Value::I64(ab),
                Value::Bytes(Accounts::filler().to_vec()),
            ]
        })
    }

    pub fn columns() -> Vec<Column> {
        vec![
            Column::new("aid", ColumnType::I64),
            Column::new("k", ColumnType::I64),
            Column::new("abalance", ColumnType::I64),
            Column::new("filler", ColumnType::Bytes),
        ]
    }

    /// What `count(*) WHERE abalance = -1` must return.
    pub fn expected_minus_one(&self) -> u64 {
        self.tuples().filter(|t| t.2 == -1).count() as u64
    }

    /// What `sum(k)` must return.
    pub fn expected_sum_k(&self) -> i64 {
        self.k.iter().sum()
    }

    /// Per key: the rows a lookup must return and their hash.
    pub fn truth(&self) -> AccountsTruth {
        let n = self.k.len();
        let mut count = vec![0u32; n];
        let mut hash = vec![0u64; n];
        for (aid, k, _) in self.tuples() {
            count[k as usize] += 1;
            hash[k as usize] = hash[k as usize].wrapping_add(pair_hash(k as u64, aid));
        }
        AccountsTruth { count, hash }
    }

    /// `len` lookup keys, uniform in `[0, n)`, from a fixed seed (both
    /// engines get the same ones).
    pub fn keys(&self, len: usize) -> Vec<i64> {
        let n = self.rows() as u128;
        let mut s = SEED ^ 0x4B45_5953;
        (0..len)
            .map(|_| {
                s = s.wrapping_add(1);
                ((u128::from(mix(s)) * n) >> 64) as i64
            })
            .collect()
    }
}

/// What a lookup of a key must return: (rows, hash of the rows).
pub trait Expect: Sync {
    fn expect(&self, key: u64) -> Option<(u64, u64)>;
}

/// Expected lookups by k in accounts.
#[derive(Clone, Debug)]
pub struct AccountsTruth {
    count: Vec<u32>,
    hash: Vec<u64>,
}

impl Expect for AccountsTruth {
    fn expect(&self, key: u64) -> Option<(u64, u64)> {
        let i = usize::try_from(key).ok()?;
        Some((u64::from(*self.count.get(i)?), self.hash[i]))
    }
}

/// Expected zipf probes (`index << 32 | key`): exactly the row whose k_j is
/// the key.
#[derive(Clone, Debug)]
pub struct ZipfTruth {
    /// `id_of[j][key - 1]` = id of the row with k_j = key.
    id_of: [Vec<u32>; 3],
}

impl ZipfTruth {
    /// From index-residency's key permutations (`perms[j][id - 1]` = k_j).
    pub fn new(perms: &[Vec<u32>; 3]) -> ZipfTruth {
        ZipfTruth {
            id_of: std::array::from_fn(|j| {
                let mut inv = vec![0u32; perms[j].len()];
                for (i, &k) in perms[j].iter().enumerate() {
                    inv[k as usize - 1] = i as u32 + 1;
                }
                inv
            }),
        }
    }
}

impl Expect for ZipfTruth {
    fn expect(&self, probe: u64) -> Option<(u64, u64)> {
        let j = (probe >> 32) as usize;
        let key = (probe & 0xFFFF_FFFF) as usize;
        let id = *self.id_of.get(j)?.get(key.checked_sub(1)?)?;
        Some((1, pair_hash(probe, i64::from(id))))
    }
}

/// A per-thread lookup counter on its own cache line (the driver reads the
/// sum at the edges of the window).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Counter(pub AtomicU64);

/// The latency kinds of the report, one per side and operation: one lookup
/// (or zipf probe), one full scan, one row of a bulk load.
pub const ENGINE_LOOKUP: &str = "engine lookup";
pub const SQLITE_LOOKUP: &str = "sqlite lookup";
pub const ENGINE_SCAN: &str = "engine scan";
pub const SQLITE_SCAN: &str = "sqlite scan";
pub const ENGINE_LOAD_ROW: &str = "engine load row";
pub const SQLITE_LOAD_ROW: &str = "sqlite load row";

/// Every how many rows of a bulk load one is timed: a row takes a
/// microsecond or two, and an `Instant::now()` pair on every one would
/// slow the load it measures (as in sweep and ticks).
pub const LOAD_ROW_EVERY: u64 = 16;

/// A tally's lookup timing: `kind`, recorded into `latencies` while
/// `in_window` is raised, from [`Tally::start`] to [`Tally::lookup`].
struct Timing<'a> {
    kind: &'static str,
    in_window: &'a AtomicBool,
    started: Option<std::time::Instant>,
    latencies: Latencies,
}

/// What one thread's lookups returned: counted, hashed, and each lookup
/// checked against the data ([`Expect`]).
pub struct Tally<'a> {
    expect: &'a dyn Expect,
    done: &'a Counter,
    timing: Option<Timing<'a>>,
    pub lookups: u64,
    pub rows: u64,
    /// Wrapping sum of [`pair_hash`] over every returned row.
    pub hash: u64,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl std::fmt::Debug for Tally<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tally")
            .field("lookups", &self.lookups)
            .field("rows", &self.rows)
            .field("hash", &self.hash)
            .field("errors", &self.errors)
            .field("first_error", &self.first_error)
            .finish_non_exhaustive()
    }
}

impl<'a> Tally<'a> {
    pub fn new(expect: &'a dyn Expect, done: &'a Counter) -> Tally<'a> {
        Tally {
            expect,
            done,
            timing: None,
            lookups: 0,
            rows: 0,
            hash: 0,
            errors: 0,
            first_error: None,
        }
    }

    /// A tally that also times each lookup, from [`start`](Self::start)
    /// to [`lookup`](Self::lookup), as `kind`, while `in_window` is raised.
    pub fn timed(
        expect: &'a dyn Expect,
        done: &'a Counter,
        kind: &'static str,
        in_window: &'a AtomicBool,
    ) -> Tally<'a> {
        Tally {
            timing: Some(Timing {
                kind,
                in_window,
                started: None,
                latencies: Latencies::new(),
            }),
            ..Tally::new(expect, done)
        }
    }

    /// A lookup begins (timed if the tally is).
    #[inline]
    pub fn start(&mut self) {
        if let Some(t) = &mut self.timing {
            t.started = Some(std::time::Instant::now());
        }
    }

    /// The lookups timed in the window (empty for an untimed tally).
    pub fn latencies(&self) -> Latencies {
        self.timing
            .as_ref()
            .map_or_else(Latencies::new, |t| t.latencies.clone())
    }

    /// One lookup of `key` returned the rows with these ids.
    pub fn lookup(&mut self, key: u64, ids: impl IntoIterator<Item = i64>) {
        if let Some(t) = &mut self.timing
            && let Some(started) = t.started.take()
            && t.in_window.load(Ordering::Relaxed)
        {
            t.latencies.record(t.kind, started.elapsed());
        }
        let (mut n, mut h) = (0u64, 0u64);
        for id in ids {
            n += 1;
            h = h.wrapping_add(pair_hash(key, id));
        }
        self.lookups += 1;
        self.rows += n;
        self.hash = self.hash.wrapping_add(h);
        match self.expect.expect(key) {
            Some((en, eh)) if en == n && eh == h => {}
            want => {
                self.errors += 1;
                self.first_error.get_or_insert_with(|| {
                    format!(
                        "key {key}: {n} rows (hash {h:x}), expected {}",
                        want.map_or("no such key".into(), |(en, eh)| format!(
                            "{en} rows (hash {eh:x})"
                        ))
                    )
                });
            }
        }
        self.done.0.fetch_add(1, Ordering::Relaxed);
    }

    /// A row that is not what the lookup asked for (wrong key, bad column).
    pub fn bad_row(&mut self, what: String) {
        self.errors += 1;
        self.first_error.get_or_insert(what);
    }
}

// ---------------------------------------------------------------------------
// The report
// ---------------------------------------------------------------------------

/// One workload: both sides' rates over their runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub workload: String,
    pub description: String,
    pub threads: usize,
    /// Lookups per transaction (lookup and zipf workloads).
    pub per_txn: Option<usize>,
    /// What `*_per_sec` counts: `lookups` or `rows`.
    pub unit: String,
    /// Median over the runs.
    pub engine_per_sec: f64,
    pub sqlite_per_sec: f64,
    /// engine_per_sec / sqlite_per_sec.
    pub ratio: Option<f64>,
    /// Every run, in the order run.
    pub engine_runs: Vec<f64>,
    pub sqlite_runs: Vec<f64>,
    pub engine_min: f64,
    pub engine_max: f64,
    pub sqlite_min: f64,
    pub sqlite_max: f64,
    /// Pages the engine read from storage during its timed runs (0: the
    /// data stayed resident).
    pub engine_pages_read: u64,
    /// Lookups (or rows) checked against the generated data, both sides.
    pub checked: u64,
    /// Scans: the value both returned (count or sum); bulk load: rows.
    pub engine_result: Option<i64>,
    pub sqlite_result: Option<i64>,
    /// Both sides returned the same rows (and the data's).
    pub agree: bool,
    pub error: Option<String>,
    pub other_cores_used: Option<f64>,
    /// Lookups (or probes) both sides made inside their measured windows,
    /// every run: what their `latency` counts (0 for scans and loads).
    #[serde(default)]
    pub engine_window_ops: u64,
    #[serde(default)]
    pub sqlite_window_ops: u64,
    /// Flattened into the row: `latency`, both sides side by side
    /// (`engine lookup` / `sqlite lookup`: every lookup or probe of the
    /// measured windows; `engine scan` / `sqlite scan`: every timed scan;
    /// `engine load row` / `sqlite load row`: one row in
    /// [`LOAD_ROW_EVERY`] of every timed load), `seed` (the probes' seed),
    /// `intervals` (empty: no `--report-interval` here) and `mrc` (`null`).
    #[serde(flatten)]
    pub series: crate::harness::RowSeries,
}

/// Sizes and build times of the data.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DataInfo {
    pub engine_dir: String,
    pub engine_pages: u64,
    pub engine_reused: bool,
    pub engine_build_secs: f64,
    pub sqlite_file: String,
    pub sqlite_bytes: u64,
    pub sqlite_reused: bool,
    pub sqlite_build_secs: f64,
}

/// A finished `compare-sqlite` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    pub scenario: String,
    pub accounts_rows: u64,
    pub zipf_rows: u64,
    pub rounds: usize,
    pub warmup_secs: f64,
    pub duration_secs: f64,
    pub cores: usize,
    pub engine_pool_buffers: usize,
    pub zipf_pool_buffers: usize,
    pub sqlite_cache_kib: i64,
    pub zipf_sqlite_cache_kib: i64,
    pub sqlite_version: String,
    pub sqlite_settings: String,
    pub engine_settings: String,
    pub accounts_data: Option<DataInfo>,
    pub zipf_data: Option<DataInfo>,
    pub rows: Vec<Row>,
    pub ok: bool,
    pub errors: Vec<String>,
}

/// `a / b`, `None` when undefined.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0 && a.is_finite() && b.is_finite()).then(|| a / b)
}

/// A ratio with enough digits to tell 0.002x from 0.004x.
pub fn fmt_ratio(r: Option<f64>) -> String {
    match r {
        Some(r) if r.is_finite() && r >= 0.1 => format!("{r:.2}x"),
        Some(r) if r.is_finite() => format!("{r:.4}x"),
        _ => "-".into(),
    }
}

fn spread(min: f64, max: f64) -> String {
    format!("{}-{}", common::fmt_rate(min), common::fmt_rate(max))
}

impl Report for CompareReport {
    fn scenario(&self) -> &str {
        &self.scenario
    }

    fn render(&self) -> String {
        let mut t = Table::new(&[
            "workload",
            "threads",
            "unit",
            "engine/s",
            "engine min-max",
            "SQLite/s",
            "SQLite min-max",
            "engine/SQLite",
            "eng reads",
            "check",
        ]);
        for r in &self.rows {
            t.push(vec![
                r.description.clone(),
                r.threads.to_string(),
                r.unit.clone(),
                common::fmt_rate(r.engine_per_sec),
                spread(r.engine_min, r.engine_max),
                common::fmt_rate(r.sqlite_per_sec),
                spread(r.sqlite_min, r.sqlite_max),
                fmt_ratio(r.ratio),
                r.engine_pages_read.to_string(),
                if r.agree {
                    format!("same ({})", r.checked)
                } else {
                    "MISMATCH".into()
                },
            ]);
        }
        let mut out = format!(
            "\n{NAME}: accounts {} rows (zipf table {} rows), median of {} runs per side \
             (alternating engine, SQLite); {:.1} s windows after {:.1} s warm-ups; {} cores\n\
             engine: {}\nSQLite {}: {}\n",
            self.accounts_rows,
            self.zipf_rows,
            self.rounds,
            self.duration_secs,
            self.warmup_secs,
            self.cores,
            self.engine_settings,
            self.sqlite_version,
            self.sqlite_settings,
        );
        out += &t.to_string();
        let lat: Vec<(String, &latency::ByKind)> = self
            .rows
            .iter()
            .map(|r| (format!("{} t{}", r.workload, r.threads), &r.series.latency))
            .collect();
        out += &latency::table(&lat);
        out += &format!(
            "latency: lookup = one lookup or probe (every one in the windows); scan = one \
             timed full scan; load row = one row in {LOAD_ROW_EVERY} of each timed load \
             (engine: from handing bulk_load a row to its asking for the next; SQLite: one \
             INSERT)\n"
        );
        out += "lookups/s count lookups, not transactions; min-max: the spread over the runs; \
                eng reads: pages the engine read from storage in its timed runs; check: \
                lookups or rows checked (both sides, every timed lookup against the generated \
                data, a sample of lookups between the two sides)\n";
        if self.ok {
            out += "data check: ok (every lookup, count, sum and load identical in both and equal to the generated data)\n";
        } else {
            out += &format!("data check: FAILED: {}\n", self.errors.join("; "));
        }
        out
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a report of plain fields serialises")
    }

    fn failures(&self) -> Vec<String> {
        self.errors.clone()
    }
}

/// Run `compare-sqlite` (needs the `sqlite` feature).
#[cfg(feature = "sqlite")]
pub fn run(settings: &Settings, args: &Args) -> Result<CompareReport> {
    let p = Params::resolve(args, settings)?;
    driver::run(settings, &p)
}

/// Without the `sqlite` feature: an error saying how to build it.
#[cfg(not(feature = "sqlite"))]
pub fn run(settings: &Settings, args: &Args) -> Result<CompareReport> {
    // Refuse bad options first, as the real run would.
    Params::resolve(args, settings)?;
    Err(BenchError::Unavailable(format!(
        "{NAME} needs SQLite, which this build does not include: build with `--features sqlite`, \
         e.g. cargo run --release -p bench --features sqlite -- {NAME}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_has_minus_ones_and_truth_matches() {
        let a = Accounts::generate(10_000);
        assert!(a.k.iter().all(|&k| (0..10_000).contains(&k)));
        let m = a.expected_minus_one();
        assert!(m > 20 && m < 200, "{m}");
        let t = a.truth();
        let total: u64 = (0..10_000u64).map(|k| t.expect(k).unwrap().0).sum();
        assert_eq!(total, 10_000);
        let c = Counter::default();
        let mut tally = Tally::new(&t, &c);
        let k = a.k[7];
        let mut ids: Vec<i64> = a.tuples().filter(|r| r.1 == k).map(|r| r.0).collect();
        ids.reverse();
        tally.lookup(k as u64, ids);
        assert_eq!(tally.errors, 0, "{:?}", tally.first_error);
        tally.lookup(k as u64, [1]);
        assert_eq!(tally.errors, 1);
    }

    #[test]
    fn workloads_parse() {
        let s = parse_workloads("lookup-1,zipf").unwrap();
        assert!(s.contains(Workload::Lookup1) && s.contains(Workload::Zipf));
        assert!(!s.contains(Workload::ScanSum));
        assert!(parse_workloads("nope").is_err());
        assert_eq!(parse_workloads("all").unwrap(), WorkloadSet::all());
    }
}
