//! `readonly`: select-only point lookups by primary key (bench/SCENARIOS.md), per
//! partitions x evictor.
//!
//! ```text
//!   data (cached per scale): accounts (heap 1.75 x pool + pk index: ~2 x
//!     pool; fits in RAM, not in the pool), hint bits set at build
//!
//!   per cell: Database::open(the cached directory, the cell's Options)
//!     T threads (= cores) each looping: BEGIN; --lookups-per-txn times
//!       get_by_key(accounts, aid) with aid uniform in 1..=N, row checked
//!     (aid and balance 0); ROLLBACK (nothing was written)
//!     warm-up (fills the pool), window between two PoolStats snapshots
//!   end: row count and verify_indexes on the cached database
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bufmgr::{PoolStats, SweepBatch};
use engine::Database;
use serde::{Deserialize, Serialize};

use crate::check::DataCheck;
use crate::common::{
    self, BatchField, Config, CpuSample, Defaults, EvictorChoice, Report, Settings, Table,
    fmt_rate, fmt_ratio,
};
use crate::error::Result;
use crate::scenarios::tables::{self, ACCOUNTS, Residency};

pub const NAME: &str = "readonly";
/// The default partition counts (`--partitions` replaces them).
pub const PARTITIONS: [usize; 2] = [1, 4];
/// Accounts heap pages per pool page: with the pk index, ~2 x pool.
pub const HEAP_PCT_OF_POOL: u64 = 175;
/// Lookups per read-only transaction (`--lookups-per-txn`).
pub const LOOKUPS_PER_TXN: u64 = 100;

/// The options of `readonly` (after the scenario name).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct Args {
    /// Lookups per read-only transaction (1 = pgbench -S) [default: 100]
    #[arg(long, value_name = "N")]
    pub lookups_per_txn: Option<u64>,
}

/// Defaults: both evictors, batch 1, threads = cores, 3 s warm-up, 5 s window.
pub fn defaults() -> Defaults {
    let mut d = crate::scenarios::ScenarioKind::Sweep.defaults();
    d.duration = Duration::from_secs(5);
    d.warmup = Duration::from_secs(3);
    d.threads = vec![common::cores()];
    d.batches = vec![SweepBatch::Fixed(1)];
    d.evictor = EvictorChoice::All;
    d.quick_pool_mib = common::QUICK_POOL_MIB;
    d.quick_threads = vec![common::cores()];
    d
}

/// Accounts rows for a pool of `pool` buffers.
pub fn accounts_for_pool(pool: usize) -> u64 {
    tables::accounts_for_pages(pool as u64 * HEAP_PCT_OF_POOL / 100)
}

pub fn configs(settings: &Settings) -> Vec<Config> {
    tables::configs_with(settings, &settings.threads, &settings.partitions)
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
    pub window_secs: f64,
    pub lookups: u64,
    pub lookups_per_sec: f64,
    pub hit_ratio: f64,
    pub accesses_per_lookup: f64,
    pub reads: u64,
    pub evictions: u64,
    pub ticks_per_victim_mean: f64,
    /// lookups/s over the partitions=1 row of the same evictor.
    pub vs_partitions1: Option<f64>,
    pub cpu_cores_used: Option<f64>,
    pub other_cores_used: Option<f64>,
    pub resident: Vec<Residency>,
    /// Per NUMA node: where the buffers' memory is (queried), and the
    /// window's accesses and reads of the partitions on each node.
    #[serde(default)]
    pub nodes: Vec<tables::NodeFigures>,
    /// Flattened into the row (the JSON fields `latency`, `mrc`,
    /// `intervals` and `seed`, as before they were gathered):
    /// `latency`: per operation kind in the window: `lookup` (one
    /// `get_by_key`, checked).
    /// `mrc`: the pool's live miss-ratio curve at the window's end (`--mrc`).
    /// `intervals`: one entry per `--report-interval` (warm-up included; throughput in
    /// lookups).
    /// `seed`: the seed of worker 0's keys (worker `t` draws from `seed + t`;
    /// `--seed`).
    #[serde(flatten)]
    pub series: RowSeries,
    /// Lookups that found no row or a wrong one.
    pub data_errors: u64,
}

/// Worker 0's seed without `--seed` (worker `t` uses `SEED + t`).
pub const SEED: u64 = 0x5e1ec7;

/// A finished `readonly` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadonlyReport {
    pub scenario: String,
    pub accounts: u64,
    pub data_bytes: u64,
    pub pool_buffers: usize,
    pub cores: usize,
    pub lookups_per_txn: u64,
    pub warmup_secs: f64,
    pub duration_secs: f64,
    pub reused_data: bool,
    pub rows: Vec<Row>,
    pub data_check: DataCheck,
}

use crate::harness::{self, LiveLatency, Phases, RowSeries, STOP, Tally};
use crate::latency::{self, Latencies};

type Snap = (PoolStats, Option<CpuSample>, Instant, u64);

fn measure(
    settings: &Settings,
    dir: &std::path::Path,
    c: &Config,
    n: u64,
    per_txn: u64,
    label: &str,
    data: &mut DataCheck,
) -> Result<Row> {
    let trace = settings.trace_for(c, &[]);
    let db = Database::open(dir, tables::options(settings, c).trace(trace.clone()))?;
    let phases = Phases::new();
    let done = AtomicU64::new(0);
    let live = LiveLatency::new();
    let live_on = settings.measures.report_interval.map(|_| &live);
    let seed = settings.seed(SEED);
    let pb = tables::window_bar(
        settings,
        settings.warmup + settings.duration,
        &format!("{NAME} {label}"),
    );
    let snap = |db: &Database| -> Snap {
        (
            db.pool_stats(),
            CpuSample::now(),
            Instant::now(),
            done.load(Ordering::Relaxed),
        )
    };
    let (((before, after), intervals), outs) = harness::run_crew(
        0..c.threads,
        &|t, _| {
            crate::common::pin_worker(t);
            // Trace thread id = worker number.
            common::traced(&db, t as u32, || {
                tables::account_lookups(
                    &db,
                    seed.wrapping_add(t as u64),
                    n,
                    per_txn,
                    Some(0),
                    phases.flag(),
                    &done,
                    live_on,
                )
            })
        },
        || phases.set(STOP),
        |crew| {
            Ok(harness::with_intervals(
                settings.measures.report_interval,
                (&format!("{NAME} {label}"), "lookups"),
                &live,
                || Tally::of(&db.pool_stats(), done.load(Ordering::Relaxed)),
                || {
                    harness::warm_then_measure(
                        &pb,
                        (settings.warmup, settings.duration),
                        &phases,
                        || crew.alive(),
                        || snap(&db),
                    )
                },
            ))
        },
    )?;
    let mut latencies = Latencies::new();
    for o in &outs {
        latencies.merge(&o.2);
    }
    let errors = (
        outs.iter().map(|o| o.0).sum::<u64>(),
        outs.into_iter().find_map(|o| o.1),
    );
    pb.finish_and_clear();
    if let Some(e) = errors.1 {
        data.fail(format!("{label}: {} bad lookups, first: {e}", errors.0));
    }
    let secs = after.2.duration_since(before.2).as_secs_f64();
    let stats = after.0.since(&before.0);
    let t = stats.totals();
    let lookups = after.3 - before.3;
    let cpu = before.1.zip(after.1).map(|(a, b)| b.cores_since(&a, secs));
    let resident = tables::residency(&db);
    let nodes = tables::node_figures(&db, &stats);
    let mrc = common::curve_of(&db);
    common::note_trace(settings, trace, db.pool())?;
    db.close()?;
    Ok(Row {
        evictor: c.evictor.name().into(),
        batch: c.batch.into(),
        partitions: c.partitions,
        threads: c.threads,
        huge_pages: c.huge_pages,
        ring: c.ring,
        window_secs: secs,
        lookups,
        lookups_per_sec: lookups as f64 / secs,
        hit_ratio: t.hit_ratio(),
        accesses_per_lookup: if lookups > 0 {
            t.accesses as f64 / lookups as f64
        } else {
            0.0
        },
        reads: t.reads,
        evictions: t.evictions,
        ticks_per_victim_mean: stats.ticks_per_victim.mean(),
        vs_partitions1: None,
        cpu_cores_used: cpu.map(|c| c.0),
        other_cores_used: cpu.map(|c| c.1),
        resident,
        nodes,
        series: RowSeries {
            latency: latencies.by_kind(),
            mrc,
            intervals,
            seed,
        },
        data_errors: errors.0,
    })
}

fn compare(rows: &mut [Row]) {
    let base: Vec<Option<f64>> = rows
        .iter()
        .map(|r| {
            rows.iter()
                .find(|b| {
                    b.partitions == 1
                        && b.evictor == r.evictor
                        && b.batch == r.batch
                        && b.threads == r.threads
                        && b.ring == r.ring
                        && b.huge_pages == r.huge_pages
                })
                .map(|b| b.lookups_per_sec)
        })
        .collect();
    for (r, b) in rows.iter_mut().zip(base) {
        r.vs_partitions1 = b.and_then(|b| tables::ratio(r.lookups_per_sec, b));
    }
}

/// Build or reuse the accounts, measure every cell, check.
pub fn run(settings: &Settings, args: &Args) -> Result<ReadonlyReport> {
    let per_txn = args.lookups_per_txn.unwrap_or(LOOKUPS_PER_TXN).max(1);
    let n = accounts_for_pool(settings.pool_buffers);
    let configs = configs(settings);
    println!(
        "== {NAME}: uniform point lookups on {n} accounts (~2 x pool), {per_txn} per \
         transaction; {} configurations; pool of {} buffers ({} MiB), {} cores",
        configs.len(),
        settings.pool_buffers,
        (settings.pool_buffers * bufmgr::PAGE_SIZE) >> 20,
        common::cores()
    );
    let scale = serde_json::json!({ "accounts": n });
    let (dir, reused) = tables::ensure_db(
        settings,
        NAME,
        &format!("accounts-{n}"),
        &scale,
        |db, pb| tables::load_accounts(db, n, 100_000, pb),
    )?;
    let data_bytes = crate::dirs::dir_bytes(&dir);
    let mut data_check = DataCheck::new();
    let mut rows = Vec::new();
    for (i, c) in configs.iter().enumerate() {
        let label = format!(
            "[{}/{}] {} batch={} partitions={} threads={}",
            i + 1,
            configs.len(),
            c.evictor,
            c.batch,
            c.partitions,
            c.threads
        );
        let r = measure(settings, &dir, c, n, per_txn, &label, &mut data_check)?;
        eprintln!(
            "{label}: {} lookups/s, hit {:.2}%",
            fmt_rate(r.lookups_per_sec),
            100.0 * r.hit_ratio
        );
        rows.push(r);
    }
    compare(&mut rows);
    let db = Database::open(&dir, tables::build_options(settings))?;
    data_check.add(tables::check_table(&db, ACCOUNTS, Some(n))?);
    db.close()?;
    Ok(ReadonlyReport {
        scenario: NAME.into(),
        accounts: n,
        data_bytes,
        pool_buffers: settings.pool_buffers,
        cores: common::cores(),
        lookups_per_txn: per_txn,
        warmup_secs: settings.warmup.as_secs_f64(),
        duration_secs: settings.duration.as_secs_f64(),
        reused_data: reused,
        rows,
        data_check,
    })
}

impl Report for ReadonlyReport {
    fn scenario(&self) -> &str {
        &self.scenario
    }

    fn render(&self) -> String {
        let mut t = Table::new(&[
            "evictor",
            "batch",
            "parts",
            "threads",
            "lookups/s",
            "hit%",
            "acc/lookup",
            "reads",
            "ticks/victim",
            "vs p=1",
            "others",
        ]);
        for r in &self.rows {
            t.push(vec![
                r.evictor.clone(),
                r.batch.to_string(),
                r.partitions.to_string(),
                r.threads.to_string(),
                fmt_rate(r.lookups_per_sec),
                tables::pct(r.hit_ratio),
                format!("{:.2}", r.accesses_per_lookup),
                r.reads.to_string(),
                format!("{:.2}", r.ticks_per_victim_mean),
                fmt_ratio(r.vs_partitions1),
                r.other_cores_used.map_or("?".into(), |c| format!("{c:.2}")),
            ]);
        }
        let mut out = format!(
            "\n{NAME}: {} accounts ({} MiB on disk), pool {} buffers, {} lookups per \
             transaction; {:.1} s windows after {:.1} s warm-up\n",
            self.accounts,
            self.data_bytes >> 20,
            self.pool_buffers,
            self.lookups_per_txn,
            self.duration_secs,
            self.warmup_secs
        );
        out += &t.to_string();
        out += "acc/lookup: buffer accesses per lookup (index descent + heap); vs p=1: \
                lookups/s over the partitions=1 row of the same evictor\n";
        let res: Vec<(String, Vec<Residency>)> = self
            .rows
            .iter()
            .map(|r| {
                (
                    format!("{} p={}", r.evictor, r.partitions),
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
        let labels: Vec<String> = self
            .rows
            .iter()
            .map(|r| format!("{} p={} t={}", r.evictor, r.partitions, r.threads))
            .collect();
        let measured: Vec<_> = labels
            .iter()
            .zip(&self.rows)
            .map(|(l, r)| (l.clone(), &r.series.latency, r.series.mrc.as_ref()))
            .collect();
        out += &latency::tables_with_curves(&measured);
        out += &self.data_check.render();
        out
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a report of plain fields serialises")
    }

    fn failures(&self) -> Vec<String> {
        self.data_check.failures()
    }
}
