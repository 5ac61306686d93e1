//! `oltp`: a pgbench-like write-bound mix (bench/SCENARIOS.md), per evictor x sweep
//! batch x commit mode.
//!
//! ```text
//!   data (cached per scale): accounts (heap 1.75 x pool + pk index: ~2 x pool),
//!     branches (one per 10,000 accounts), tellers (10 per branch), history
//!     (empty); pk indexes on accounts, tellers, branches; every balance 0
//!
//!   per cell: copy the cached directory to <data-dir>/oltp/run, open it
//!     with the cell's Options (commit sync/async), T clients each looping:
//!       BEGIN
//!       (rid, a) = get_by_key(accounts, aid)          random aid, tid, bid
//!       update(accounts, rid, abalance + delta)       delta in -5000..=5000
//!       get_by_key(accounts, aid) == abalance + delta  (read it back)
//!       teller, branch: get_by_key + update (+ delta)
//!       insert(history, (tid, bid, aid, delta, mtime))
//!       COMMIT                      (Database::transaction: a write conflict
//!                                    rolls back and retries, with backoff)
//!     warm-up, then a window between PoolStats / WalStats snapshots
//!   end: pages of branches / tellers / accounts (and their pk indexes);
//!     with autovacuum on, close and reopen without it (a quiet table for
//!     verify_indexes); sum(abalance) == sum(tbalance) == sum(bbalance) ==
//!     sum(delta), history rows == commits, row counts, verify_indexes;
//!     delete the copy
//! ```
//!
//! `--autovacuum on,off` (default: both) runs every cell with the engine's
//! autovacuum worker and without it: every update leaves a dead version and
//! an index entry behind (no HOT), and without vacuum the 10-row `branches`
//! table and its index grow all through the window, so each lookup of a hot
//! branch walks every version (`accesses/txn`: pool accesses / commits).
//!
//! Snapshot isolation with first-updater-wins: two clients updating the
//! same teller or branch, one aborts (`WriteConflict`) and retries; the
//! retries are counted. Latency runs from the first attempt's BEGIN to the
//! successful COMMIT.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bufmgr::{PoolStats, RelFork, SweepBatch};
use clap::ValueEnum;
use engine::{AutovacuumStats, CommitMode, Database, Options, Transaction, Value};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use wal::WalStats;

use crate::check::{DataCheck, TableCheck};
use crate::common::{
    self, BatchField, Config, CpuSample, Defaults, EvictorChoice, Report, Settings, Table,
    fmt_rate, fmt_ratio,
};
use crate::error::{BenchError, Result};
use crate::scenarios::tables::{
    self, ABALANCE, ACCOUNTS, BBALANCE, BRANCHES, BRANCHES_PK, HDELTA, HISTORY, Residency,
    TBALANCE, TELLERS, TELLERS_PK,
};

pub const NAME: &str = "oltp";
/// A transaction conflicts this many times in a row before the run fails
/// with its conflict (clients on a 10-row `branches` table conflict often;
/// the engine's default of 10 attempts is for applications, not a
/// contention benchmark).
const ATTEMPTS: u32 = 1_000;
/// Accounts per branch (pgbench: 100,000; fewer here so that two clients
/// rarely collide on a branch row at small scales).
pub const ACCOUNTS_PER_BRANCH: u64 = 10_000;
pub const TELLERS_PER_BRANCH: u64 = 10;
/// Accounts heap pages per pool page: with the pk index, ~2 x pool.
pub const HEAP_PCT_OF_POOL: u64 = 175;
/// `--quick`: an 8 MiB pool (data ~16 MiB).
pub const QUICK_POOL_MIB: usize = 8;
/// Checkpoint every this many milliseconds (`--checkpoint-ms`), so that a
/// window sees the checkpointer write.
pub const CHECKPOINT_MS: u64 = 5_000;

/// `--commit`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum CommitChoice {
    Sync,
    Async,
    Both,
}

impl CommitChoice {
    pub fn modes(self) -> Vec<CommitMode> {
        match self {
            CommitChoice::Sync => vec![CommitMode::Synchronous],
            CommitChoice::Async => vec![CommitMode::Asynchronous],
            CommitChoice::Both => vec![CommitMode::Synchronous, CommitMode::Asynchronous],
        }
    }
}

fn mode_name(m: CommitMode) -> &'static str {
    match m {
        CommitMode::Synchronous => "sync",
        CommitMode::Asynchronous => "async",
    }
}

/// `--autovacuum`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum AutovacuumChoice {
    On,
    Off,
    /// Each cell twice, on then off.
    #[value(name = "on,off", alias = "both")]
    Both,
}

/// The options of `oltp` (after the scenario name).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct Args {
    /// Commit mode [default: both]
    #[arg(long, value_enum)]
    pub commit: Option<CommitChoice>,
    /// The engine's autovacuum worker: on, off, or each cell with and
    /// without it [default: on,off]
    #[arg(long, value_enum)]
    pub autovacuum: Option<AutovacuumChoice>,
    /// Checkpoint interval in milliseconds [default: 5000]
    #[arg(long, value_name = "MS")]
    pub checkpoint_ms: Option<u64>,
}

/// Defaults: both evictors, batch {1, 64}, threads = cores, 5 s windows.
pub fn defaults() -> Defaults {
    let mut d = crate::scenarios::ScenarioKind::Sweep.defaults();
    d.duration = Duration::from_secs(5);
    d.warmup = Duration::from_secs(2);
    d.threads = vec![common::cores()];
    d.batches = vec![SweepBatch::Fixed(1), SweepBatch::Fixed(64)];
    d.evictor = EvictorChoice::All;
    d.quick_pool_mib = QUICK_POOL_MIB;
    d.quick_threads = vec![common::cores()];
    d
}

/// The scale: rows of each table.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scale {
    pub accounts: u64,
    pub tellers: u64,
    pub branches: u64,
}

impl Scale {
    pub fn for_pool(pool: usize) -> Scale {
        let accounts = tables::accounts_for_pages(pool as u64 * HEAP_PCT_OF_POOL / 100);
        let branches = accounts.div_ceil(ACCOUNTS_PER_BRANCH).max(1);
        Scale {
            accounts,
            tellers: branches * TELLERS_PER_BRANCH,
            branches,
        }
    }
}

/// One measured cell.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    pub pool: Config,
    pub commit: CommitMode,
    pub autovacuum: bool,
}

pub fn cells(settings: &Settings, args: &Args) -> Vec<Cell> {
    let autovacuum = match args.autovacuum.unwrap_or(AutovacuumChoice::Both) {
        AutovacuumChoice::On => vec![true],
        AutovacuumChoice::Off => vec![false],
        AutovacuumChoice::Both => vec![true, false],
    };
    let mut out = Vec::new();
    for pool in tables::configs_with(settings, &settings.threads, &settings.partitions) {
        for &commit in &args.commit.unwrap_or(CommitChoice::Both).modes() {
            // On and off next to each other: alternate runs, same build.
            for &autovacuum in &autovacuum {
                out.push(Cell {
                    pool,
                    commit,
                    autovacuum,
                });
            }
        }
    }
    // Commit mode outermost of the pool's settings, evictor innermost.
    out.sort_by_key(|c| c.commit == CommitMode::Asynchronous);
    out
}

/// One cell's window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub evictor: String,
    pub batch: BatchField,
    pub partitions: usize,
    pub threads: usize,
    pub huge_pages: bool,
    pub ring: bool,
    /// `sync` or `async`.
    pub commit: String,
    /// The engine's autovacuum worker ran.
    #[serde(default)]
    pub autovacuum: bool,
    pub window_secs: f64,
    pub transactions: u64,
    pub tps: f64,
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    pub latency_max_ms: f64,
    /// Attempts rolled back on a write conflict and retried, in the window.
    pub retries: u64,
    pub wal_bytes: u64,
    pub wal_bytes_per_txn: f64,
    pub wal_fsyncs: u64,
    pub hit_ratio: f64,
    pub reads: u64,
    pub evictions: u64,
    /// Dirty buffers written, by who wrote them (PoolStats deltas).
    pub writes_backend: u64,
    pub writes_ring: u64,
    pub writes_bgwriter: u64,
    pub writes_checkpoint: u64,
    pub writes_other: u64,
    /// writes_backend / all writes.
    pub backend_write_share: f64,
    /// tps over the batch-1 row of the same evictor and commit mode.
    pub vs_batch1: Option<f64>,
    pub cpu_cores_used: Option<f64>,
    pub other_cores_used: Option<f64>,
    pub resident: Vec<Residency>,
    /// Pool accesses in the window / transactions committed in it.
    #[serde(default)]
    pub accesses_per_txn: f64,
    /// Relation sizes in pages at the end of the window (branches,
    /// tellers, accounts and their pk indexes).
    #[serde(default)]
    pub pages: Vec<(String, u32)>,
    /// Vacuums the autovacuum worker ran (the whole run, warm-up included),
    /// and the tuples they removed.
    #[serde(default)]
    pub autovacuums: u64,
    #[serde(default)]
    pub autovacuum_tuples_removed: u64,
    /// Per NUMA node: where the buffers' memory is (queried), and the
    /// window's accesses and reads of the partitions on each node.
    #[serde(default)]
    pub nodes: Vec<tables::NodeFigures>,
    /// Flattened into the row (the JSON fields `latency`, `mrc`,
    /// `intervals` and `seed`, as before they were gathered):
    /// `latency`: per operation kind in the window: `transaction` (one
    /// pgbench transaction, retries included, as `latency_*_ms`).
    /// `mrc`: the pool's live miss-ratio curve at the window's end (`--mrc`).
    /// `intervals`: one entry per `--report-interval` (warm-up included; throughput in
    /// transactions).
    /// `seed`: the seed of client 0's keys (client `t` draws from `seed + t`;
    /// `--seed`).
    #[serde(flatten)]
    pub series: RowSeries,
    /// The balance sums at the end: accounts, tellers, branches, history.
    pub sums: [i64; 4],
    pub data_errors: u64,
}

/// The operation kind of the latency table: one transaction.
pub const TRANSACTION: &str = "transaction";
/// Client 0's seed without `--seed` (client `t` uses `SEED + t`).
pub const SEED: u64 = 0x01f7;

/// A finished `oltp` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OltpReport {
    pub scenario: String,
    pub scale: Scale,
    /// Bytes of the cached database directory.
    pub data_bytes: u64,
    pub pool_buffers: usize,
    pub cores: usize,
    pub warmup_secs: f64,
    pub duration_secs: f64,
    pub checkpoint_secs: f64,
    pub reused_data: bool,
    pub rows: Vec<Row>,
    pub data_check: DataCheck,
}

/// Build the four tables.
fn build(db: &Database, s: &Scale, pb: &indicatif::ProgressBar) -> Result<()> {
    tables::load_accounts(db, s.accounts, ACCOUNTS_PER_BRANCH, pb)?;
    db.create_table(TELLERS, tables::tellers_columns())?;
    db.create_index(TELLERS_PK, TELLERS, "tid", true)?;
    tables::load_rows(
        db,
        TELLERS,
        s.tellers,
        pb,
        (1..=s.tellers as i64)
            .map(|t| tables::teller_row(t, (t - 1) / TELLERS_PER_BRANCH as i64 + 1, 0)),
    )?;
    db.create_table(BRANCHES, tables::branches_columns())?;
    db.create_index(BRANCHES_PK, BRANCHES, "bid", true)?;
    tables::load_rows(
        db,
        BRANCHES,
        s.branches,
        pb,
        (1..=s.branches as i64).map(|b| tables::branch_row(b, 0)),
    )?;
    db.create_table(HISTORY, tables::history_columns())?;
    Ok(())
}

/// What one client did.
#[derive(Debug, Default)]
struct ClientOut {
    /// Latencies of the transactions that committed in the window.
    latencies: Latencies,
    retries: u64,
    /// Every commit, warm-up included (history rows).
    commits: u64,
    data_errors: u64,
    first_error: Option<String>,
}

use crate::harness::{
    self, Interval, LiveLatency, MEASURE, Phases, Recorder, RowSeries, STOP, Tally,
};
use crate::latency::{self, Latencies};

/// Add `delta` to i64 column `col` of the row `key` of `table` (through
/// the unique index on `column`); returns the new value.
fn add_to(
    txn: &Transaction,
    table: &str,
    column: &str,
    key: i64,
    col: usize,
    delta: i64,
) -> Result<i64> {
    let (rid, mut row) = txn
        .get_by_key(table, column, &Value::I64(key))?
        .ok_or_else(|| BenchError::Data(format!("{table}: no row with {column} = {key}")))?;
    let v = row[col]
        .as_i64()
        .ok_or_else(|| BenchError::Data(format!("{table}: {column} = {key} has no balance")))?
        + delta;
    row[col] = Value::I64(v);
    txn.update(table, rid, row)?;
    Ok(v)
}

/// One pgbench transaction, through `Database::transaction`: a write
/// conflict rolls it back and runs it again (with the engine's jittered
/// backoff). Returns how many times it was run again. A read-back that
/// differs is a data error; a row missing from the data set (a broken
/// cached data set) ends the run with an error (the attempt's earlier
/// writes commit, but the run's figures are void).
fn transaction(db: &Database, rng: &mut SmallRng, s: &Scale, out: &mut ClientOut) -> Result<u64> {
    let aid = rng.random_range(1..=s.accounts as i64);
    let tid = rng.random_range(1..=s.tellers as i64);
    let bid = rng.random_range(1..=s.branches as i64);
    let delta = rng.random_range(-5000..=5000i64);
    let mut runs = 0u64;
    let body = |txn: &Transaction| -> Result<Option<String>> {
        let v = add_to(txn, ACCOUNTS, "aid", aid, ABALANCE, delta)?;
        let back = txn
            .get_by_key(ACCOUNTS, "aid", &Value::I64(aid))?
            .and_then(|(_, r)| r[ABALANCE].as_i64());
        let mismatch = (back != Some(v))
            .then(|| format!("account {aid} read back {back:?} after setting {v}"));
        add_to(txn, TELLERS, "tid", tid, TBALANCE, delta)?;
        add_to(txn, BRANCHES, "bid", bid, BBALANCE, delta)?;
        let mtime = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        txn.insert(HISTORY, tables::history_row(tid, bid, aid, delta, mtime))?;
        Ok(mismatch)
    };
    // Engine errors go to `transaction` (which retries the retryable
    // ones); the bench's own (a missing row) come back inside.
    let result = db.transaction(|txn| {
        runs += 1;
        match body(txn) {
            Err(BenchError::Engine(e)) => Err(e),
            other => Ok(other),
        }
    })?;
    if let Some(mismatch) = result? {
        out.data_errors += 1;
        out.first_error.get_or_insert(mismatch);
    }
    Ok(runs - 1)
}

/// The counters the clients publish: transactions committed in the
/// window, and in all (the interval reporter's).
struct Counts<'a> {
    done: AtomicU64,
    all: AtomicU64,
    live: Option<&'a LiveLatency>,
}

fn client(
    db: &Database,
    seed: u64,
    s: &Scale,
    phase: &AtomicU8,
    counts: &Counts<'_>,
) -> Result<ClientOut> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out = ClientOut::default();
    let mut lat = Recorder::new(counts.live, TRANSACTION);
    loop {
        let p = phase.load(Ordering::Relaxed);
        if p == STOP {
            out.latencies = lat.finish();
            return Ok(out);
        }
        let start = Instant::now();
        let tries = transaction(db, &mut rng, s, &mut out)?;
        out.commits += 1;
        counts.all.fetch_add(1, Ordering::Relaxed);
        let in_window = phase.load(Ordering::Relaxed) == MEASURE && p == MEASURE;
        lat.record_if(TRANSACTION, start, in_window);
        if in_window {
            out.retries += tries;
            counts.done.fetch_add(1, Ordering::Relaxed);
        }
    }
}

type Snap = (PoolStats, WalStats, Option<CpuSample>, Instant, u64);

fn snap(db: &Database, done: &AtomicU64) -> Snap {
    (
        db.pool_stats(),
        db.wal_stats(),
        CpuSample::now(),
        Instant::now(),
        done.load(Ordering::Relaxed),
    )
}

/// The balance sums and row counts of the four tables, checked.
fn check(db: &Database, s: &Scale, commits: u64, check: &mut DataCheck) -> Result<[i64; 4]> {
    let mut sums = [0i64; 4];
    let specs = [
        (ACCOUNTS, ABALANCE, Some(s.accounts)),
        (TELLERS, TBALANCE, Some(s.tellers)),
        (BRANCHES, BBALANCE, Some(s.branches)),
        (HISTORY, HDELTA, Some(commits)),
    ];
    for (i, (table, col, want)) in specs.into_iter().enumerate() {
        let (n, sum) = tables::scan_sum(db, table, Some(col))?;
        sums[i] = sum as i64;
        let violations = db.verify_indexes(table)?;
        check.add(TableCheck::new(table, want, n, &violations));
    }
    if sums.iter().any(|&x| x != sums[0]) {
        check.fail(format!(
            "balance sums differ: accounts {}, tellers {}, branches {}, history deltas {}",
            sums[0], sums[1], sums[2], sums[3]
        ));
    }
    Ok(sums)
}

/// What the checks after a window found besides the data check: the
/// tables' sizes, the autovacuum worker's work, the four balance sums.
struct AfterWindow {
    pages: Vec<(String, u32)>,
    autovacuum: AutovacuumStats,
    sums: [i64; 4],
}

/// One configuration on a fresh copy of the cached database: the window,
/// the checks after it, the row.
#[allow(clippy::too_many_arguments)]
fn measure(
    settings: &Settings,
    cached: &Path,
    run_dir: &Path,
    cell: &Cell,
    scale: &Scale,
    checkpoint: Duration,
    label: &str,
    data: &mut DataCheck,
) -> Result<Row> {
    let (db, opts, trace) = open_copy(settings, cached, run_dir, cell, checkpoint)?;
    let (before, after, outs, intervals) = window(settings, &db, cell, scale, label)?;
    let stats = after.0.since(&before.0);
    let commits: u64 = outs.iter().map(|o| o.commits).sum();
    if let Some(e) = outs.iter().find_map(|o| o.first_error.clone()) {
        data.fail(format!("{label}: {e}"));
    }
    let resident = tables::residency(&db);
    let nodes = tables::node_figures(&db, &stats);
    let mrc = common::curve_of(&db);
    common::note_trace(settings, trace, db.pool())?;
    let checked = check_after_window(
        settings, db, opts, run_dir, cell, scale, commits, label, data,
    )?;
    crate::dirs::remove_dir(run_dir)?;
    let mut row = tally(cell, (&before, &after), &outs, resident, nodes, checked);
    row.series.mrc = mrc;
    row.series.intervals = intervals;
    row.series.seed = settings.seed(SEED);
    Ok(row)
}

/// A fresh copy of the cached database in `run_dir`, opened with the
/// cell's options; the options (the checks reopen with them) and the trace
/// file, if one is recorded.
fn open_copy(
    settings: &Settings,
    cached: &Path,
    run_dir: &Path,
    cell: &Cell,
    checkpoint: Duration,
) -> Result<(Database, Options, Option<PathBuf>)> {
    crate::dirs::remove_dir(run_dir)?;
    crate::dirs::copy_dir(cached, run_dir, &["LOCK"])?;
    let commit_part = format!("commit-{}", mode_name(cell.commit));
    let av_part = if cell.autovacuum {
        "autovacuum-on"
    } else {
        "autovacuum-off"
    };
    let trace = settings.trace_for(&cell.pool, &[av_part, &commit_part]);
    let opts = tables::options(settings, &cell.pool)
        .commit_mode(cell.commit)
        .checkpoint_interval(checkpoint)
        .autovacuum(cell.autovacuum)
        .transaction_attempts(ATTEMPTS)
        .trace(trace.clone());
    let db = Database::open(run_dir, opts.clone())?;
    Ok((db, opts, trace))
}

/// The clients through the warm-up and the measured window: the snapshots
/// at the window's ends and what each client did.
fn window(
    settings: &Settings,
    db: &Database,
    cell: &Cell,
    scale: &Scale,
    label: &str,
) -> Result<(Snap, Snap, Vec<ClientOut>, Vec<Interval>)> {
    let phases = Phases::new();
    let live = LiveLatency::new();
    let counts = Counts {
        done: AtomicU64::new(0),
        all: AtomicU64::new(0),
        live: settings.measures.report_interval.map(|_| &live),
    };
    let seed = settings.seed(SEED);
    let pb = tables::window_bar(
        settings,
        settings.warmup + settings.duration,
        &format!("{NAME} {label}"),
    );
    let (((before, after), intervals), outs) = harness::run_crew(
        0..cell.pool.threads,
        &|t, _| {
            crate::common::pin_worker(t);
            // Trace thread id = client number.
            common::traced(db, t as u32, || {
                client(
                    db,
                    seed.wrapping_add(t as u64),
                    scale,
                    phases.flag(),
                    &counts,
                )
            })
        },
        || phases.set(STOP),
        |crew| {
            Ok(harness::with_intervals(
                settings.measures.report_interval,
                (&format!("{NAME} {label}"), "tps"),
                &live,
                || Tally::of(&db.pool_stats(), counts.all.load(Ordering::Relaxed)),
                || {
                    harness::warm_then_measure(
                        &pb,
                        (settings.warmup, settings.duration),
                        &phases,
                        || crew.alive(),
                        || snap(db, &counts.done),
                    )
                },
            ))
        },
    )?;
    pb.finish_and_clear();
    Ok((before, after, outs, intervals))
}

/// After the window: the tables' sizes, the autovacuum worker's error (a
/// failure), then the data check on a quiet database (reopened without the
/// worker if it ran: `verify_indexes` wants no vacuum under it), closed.
#[allow(clippy::too_many_arguments)]
fn check_after_window(
    settings: &Settings,
    db: Database,
    opts: Options,
    run_dir: &Path,
    cell: &Cell,
    scale: &Scale,
    commits: u64,
    label: &str,
    data: &mut DataCheck,
) -> Result<AfterWindow> {
    let pb = tables::window_bar(
        settings,
        Duration::from_secs(1),
        &format!("{NAME}: checking"),
    );
    let pages = relation_pages(&db)?;
    let autovacuum = db.autovacuum_stats();
    if let Some(e) = &autovacuum.last_error {
        data.fail(format!("{label}: {e}"));
    }
    let db = if cell.autovacuum {
        db.close()?;
        Database::open(run_dir, opts.autovacuum(false).trace(None))?
    } else {
        db
    };
    let sums = check(&db, scale, commits, data)?;
    pb.finish_and_clear();
    db.close()?;
    Ok(AfterWindow {
        pages,
        autovacuum,
        sums,
    })
}

/// The cell's row from the window's snapshots, the clients' tallies and
/// the checks (the curve, the interval series and the seed are the
/// caller's to fill in).
fn tally(
    cell: &Cell,
    (before, after): (&Snap, &Snap),
    outs: &[ClientOut],
    resident: Vec<Residency>,
    nodes: Vec<tables::NodeFigures>,
    checked: AfterWindow,
) -> Row {
    let secs = after.3.duration_since(before.3).as_secs_f64();
    let stats = after.0.since(&before.0);
    let t = stats.totals();
    let wal_bytes = after.1.bytes - before.1.bytes;
    let txns = after.4 - before.4;
    let mut latencies = Latencies::new();
    for o in outs {
        latencies.merge(&o.latencies);
    }
    let txn_latency = latencies
        .get(TRANSACTION)
        .map(|l| l.summary())
        .unwrap_or_default();
    let data_errors: u64 = outs.iter().map(|o| o.data_errors).sum();
    let writes = [
        t.writes_backend,
        t.writes_ring,
        stats.writes_bgwriter,
        stats.writes_checkpoint,
        stats.writes_other,
    ];
    let all_writes: u64 = writes.iter().sum();
    let cpu = before.2.zip(after.2).map(|(a, b)| b.cores_since(&a, secs));
    Row {
        evictor: cell.pool.evictor.name().into(),
        batch: cell.pool.batch.into(),
        partitions: cell.pool.partitions,
        threads: cell.pool.threads,
        huge_pages: cell.pool.huge_pages,
        ring: cell.pool.ring,
        commit: mode_name(cell.commit).into(),
        autovacuum: cell.autovacuum,
        window_secs: secs,
        transactions: txns,
        tps: txns as f64 / secs,
        latency_p50_ms: txn_latency.p50_us / 1e3,
        latency_p99_ms: txn_latency.p99_us / 1e3,
        latency_max_ms: txn_latency.max_us / 1e3,
        retries: outs.iter().map(|o| o.retries).sum(),
        wal_bytes,
        wal_bytes_per_txn: if txns > 0 {
            wal_bytes as f64 / txns as f64
        } else {
            0.0
        },
        wal_fsyncs: after.1.fsyncs - before.1.fsyncs,
        hit_ratio: t.hit_ratio(),
        reads: t.reads,
        evictions: t.evictions,
        writes_backend: writes[0],
        writes_ring: writes[1],
        writes_bgwriter: writes[2],
        writes_checkpoint: writes[3],
        writes_other: writes[4],
        backend_write_share: if all_writes > 0 {
            writes[0] as f64 / all_writes as f64
        } else {
            0.0
        },
        vs_batch1: None,
        cpu_cores_used: cpu.map(|c| c.0),
        other_cores_used: cpu.map(|c| c.1),
        resident,
        accesses_per_txn: if txns > 0 {
            t.accesses as f64 / txns as f64
        } else {
            0.0
        },
        pages: checked.pages,
        autovacuums: checked.autovacuum.vacuums,
        autovacuum_tuples_removed: checked.autovacuum.tuples_removed,
        nodes,
        series: RowSeries {
            latency: latencies.by_kind(),
            ..RowSeries::default()
        },
        sums: checked.sums,
        data_errors,
    }
}

/// The sizes of the updated tables and their indexes, in pages.
fn relation_pages(db: &Database) -> Result<Vec<(String, u32)>> {
    let rels: Vec<(String, bufmgr::RelId)> = db
        .tables()
        .into_iter()
        .map(|t| (t.name, t.rel))
        .chain(db.indexes().into_iter().map(|i| (i.name, i.rel)))
        .collect();
    let mut out = Vec::new();
    for name in [
        BRANCHES,
        BRANCHES_PK,
        TELLERS,
        TELLERS_PK,
        ACCOUNTS,
        tables::ACCOUNTS_PK,
    ] {
        let rel = rels
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| BenchError::Data(format!("relation {name} missing")))?
            .1;
        let n = db
            .pool()
            .nblocks(RelFork::main(rel))
            .map_err(|e| BenchError::Data(format!("size of {name}: {e}")))?;
        out.push((name.to_string(), n));
    }
    Ok(out)
}

/// `pages` of `name` in a row ("?" if missing).
fn pages_of(r: &Row, name: &str) -> String {
    r.pages
        .iter()
        .find(|(n, _)| n == name)
        .map_or("?".into(), |(_, p)| p.to_string())
}

fn compare(rows: &mut [Row]) {
    let base: Vec<Option<f64>> = rows
        .iter()
        .map(|r| {
            rows.iter()
                .find(|b| {
                    b.batch == BatchField::Fixed(1)
                        && b.evictor == r.evictor
                        && b.commit == r.commit
                        && b.autovacuum == r.autovacuum
                        && b.partitions == r.partitions
                        && b.threads == r.threads
                        && b.ring == r.ring
                        && b.huge_pages == r.huge_pages
                })
                .map(|b| b.tps)
        })
        .collect();
    for (r, b) in rows.iter_mut().zip(base) {
        r.vs_batch1 = b.and_then(|b| tables::ratio(r.tps, b));
    }
}

/// Build or reuse the data, measure every cell on a fresh copy, check.
pub fn run(settings: &Settings, args: &Args) -> Result<OltpReport> {
    let scale = Scale::for_pool(settings.pool_buffers);
    let checkpoint_ms = args.checkpoint_ms.unwrap_or(CHECKPOINT_MS);
    if checkpoint_ms < 100 {
        return Err(BenchError::Config(format!(
            "--checkpoint-ms must be at least 100, not {checkpoint_ms}"
        )));
    }
    let checkpoint_secs = checkpoint_ms as f64 / 1e3;
    let cells = cells(settings, args);
    println!(
        "== {NAME}: pgbench-like transactions on {} accounts, {} tellers, {} branches \
         (~2 x pool); {} configurations; pool of {} buffers ({} MiB), {} cores",
        scale.accounts,
        scale.tellers,
        scale.branches,
        cells.len(),
        settings.pool_buffers,
        (settings.pool_buffers * bufmgr::PAGE_SIZE) >> 20,
        common::cores()
    );
    let key = format!("accounts-{}-branches-{}", scale.accounts, scale.branches);
    let stamp = serde_json::to_value(scale).expect("plain fields");
    let (cached, reused) =
        tables::ensure_db(settings, NAME, &key, &stamp, |db, pb| build(db, &scale, pb))?;
    let data_bytes = crate::dirs::dir_bytes(&cached);
    let run_dir = settings.data_dir.join(NAME).join("run");
    let mut data_check = DataCheck::new();
    let mut rows = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        let label = format!(
            "[{}/{}] {} batch={} threads={} commit={} autovacuum={}",
            i + 1,
            cells.len(),
            cell.pool.evictor,
            cell.pool.batch,
            cell.pool.threads,
            mode_name(cell.commit),
            if cell.autovacuum { "on" } else { "off" }
        );
        let r = measure(
            settings,
            &cached,
            &run_dir,
            cell,
            &scale,
            Duration::from_millis(checkpoint_ms),
            &label,
            &mut data_check,
        )?;
        eprintln!(
            "{label}: {:.0} tps, {:.0} accesses/txn, p99 {:.2} ms, {:.0} WAL bytes/txn, writes backend {} bgwriter {} checkpoint {}",
            r.tps,
            r.accesses_per_txn,
            r.latency_p99_ms,
            r.wal_bytes_per_txn,
            r.writes_backend,
            r.writes_bgwriter,
            r.writes_checkpoint
        );
        rows.push(r);
    }
    compare(&mut rows);
    Ok(OltpReport {
        scenario: NAME.into(),
        scale,
        data_bytes,
        pool_buffers: settings.pool_buffers,
        cores: common::cores(),
        warmup_secs: settings.warmup.as_secs_f64(),
        duration_secs: settings.duration.as_secs_f64(),
        checkpoint_secs,
        reused_data: reused,
        rows,
        data_check,
    })
}

impl OltpReport {
    /// One line per configuration.
    fn rows_table(&self) -> Table {
        let mut t = Table::new(&[
            "evictor",
            "batch",
            "threads",
            "commit",
            "autovac",
            "tps",
            "acc/txn",
            "branches pg",
            "tellers pg",
            "accounts pg",
            "p50 ms",
            "p99 ms",
            "retries",
            "WAL B/txn",
            "hit%",
            "reads",
            "w backend",
            "w bgwriter",
            "w ckpt",
            "w other",
            "vs b1",
            "others",
        ]);
        for r in &self.rows {
            t.push(vec![
                r.evictor.clone(),
                r.batch.to_string(),
                r.threads.to_string(),
                r.commit.clone(),
                if r.autovacuum {
                    format!("on ({})", r.autovacuums)
                } else {
                    "off".into()
                },
                fmt_rate(r.tps),
                format!("{:.0}", r.accesses_per_txn),
                format!("{}+{}", pages_of(r, BRANCHES), pages_of(r, BRANCHES_PK)),
                format!("{}+{}", pages_of(r, TELLERS), pages_of(r, TELLERS_PK)),
                format!(
                    "{}+{}",
                    pages_of(r, ACCOUNTS),
                    pages_of(r, tables::ACCOUNTS_PK)
                ),
                format!("{:.2}", r.latency_p50_ms),
                format!("{:.2}", r.latency_p99_ms),
                r.retries.to_string(),
                format!("{:.0}", r.wal_bytes_per_txn),
                tables::pct(r.hit_ratio),
                r.reads.to_string(),
                r.writes_backend.to_string(),
                r.writes_bgwriter.to_string(),
                r.writes_checkpoint.to_string(),
                (r.writes_other + r.writes_ring).to_string(),
                fmt_ratio(r.vs_batch1),
                r.other_cores_used.map_or("?".into(), |c| format!("{c:.2}")),
            ]);
        }
        t
    }

    /// Where the buffers went at the end of each window, and per NUMA node.
    fn buffers(&self) -> String {
        let res: Vec<(String, Vec<Residency>)> = self
            .rows
            .iter()
            .map(|r| {
                (
                    format!(
                        "{} b={} {} av={}",
                        r.evictor,
                        r.batch,
                        r.commit,
                        if r.autovacuum { "on" } else { "off" }
                    ),
                    r.resident.clone(),
                )
            })
            .collect();
        let mut out = tables::render_residency(self.pool_buffers, &res);
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
        out
    }

    /// The data check's line: on success what every run's check found.
    fn data_check_line(&self) -> String {
        if self.data_check.ok {
            let sums: Vec<String> = self.rows.iter().map(|r| r.sums[0].to_string()).collect();
            format!(
                "data check: ok ({} runs on fresh copies: account, teller, branch and history \
             sums equal in each ({}); row counts right; indexes verified clean)\n",
                self.rows.len(),
                sums.join(", ")
            )
        } else {
            self.data_check.render()
        }
    }
}

impl Report for OltpReport {
    fn scenario(&self) -> &str {
        &self.scenario
    }

    fn render(&self) -> String {
        let mut out = format!(
            "\n{NAME}: {} accounts / {} tellers / {} branches ({} MiB on disk), pool {} buffers; \
             {:.1} s windows, checkpoint every {:.1} s\n",
            self.scale.accounts,
            self.scale.tellers,
            self.scale.branches,
            self.data_bytes >> 20,
            self.pool_buffers,
            self.duration_secs,
            self.checkpoint_secs
        );
        out += &self.rows_table().to_string();
        out += "p50/p99: latency from BEGIN to COMMIT (retries included); retries: attempts \
                rolled back on a write conflict; w backend / bgwriter / ckpt / other: dirty \
                buffers written in the window by a thread needing a victim, the background \
                writer, checkpoints, explicit flushes; vs b1: tps over batch 1; autovac: the \
                engine's autovacuum worker (vacuums it ran); acc/txn: pool accesses per \
                transaction; X pg: heap+index pages of the table at the end of the window\n";
        out += &self.buffers();
        out += &self.data_check_line();
        out
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a report of plain fields serialises")
    }

    fn failures(&self) -> Vec<String> {
        self.data_check.failures()
    }
}
