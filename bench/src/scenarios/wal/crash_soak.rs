//! `crash-soak`: SIGKILL cycles of the mixed workload, every acknowledged
//! commit verified after each restart.
//!
//! ```text
//!   one fresh data directory under --data-dir; per cycle (--cycles, default 20; 5 with --quick):
//!     spawn this program again as the child (env BENCH_CRASH_SOAK_CHILD_DIR / _SEED):
//!       engine::soak::run_child — inserts, updates, deletes by key, bulk loads,
//!       checkpoints, vacuums, one transaction never committed, DDL and bulk
//!       loads on a second table (created, indexed, loaded while empty, loaded
//!       again, dropped), bursts of xids across commit-log pages; "TXN n ops"
//!       before each commit or statement and "OK n" after it, through a pipe
//!     after READY, a random 100-700 ms; SIGKILL
//!     Database::open (recovery, timed), then engine::soak's checks: the table
//!     is exactly every OK transaction (plus possibly the one in doubt), no
//!     phantom rows, every row by key, unique index = scan, verify_indexes
//!     clean before and after a vacuum, every page's checksum after a clean close
//! ```
//!
//! Reported: cycles, commits verified (acknowledged `OK`s, plus in-doubt
//! transactions found committed), bulk loads killed (the kill fell inside a
//! load or its commit), the next xid at the end (over 16,352 a commit-log
//! page boundary was crossed), recovery time mean / p99 / max. Rows lost or
//! resurrected are 0 in a run that passes: any would fail its cycle. A lost
//! commit (or a phantom row, an index disagreeing, a bad checksum) fails its
//! cycle's check, which stops the soak, names the cycle and what differed,
//! keeps the data directory, and makes `bench` exit non-zero. The workload and checks are `engine::soak`, the same code as the
//! crash-loop test of the engine crate.
//!
//! Latency (`latency`): every acknowledged unit, from the child's `TXN`
//! line to its `OK` line as the parent's pipe reader got them. For a
//! transaction (`commit`) that is its commit: the child prints `TXN` after
//! the transaction's lookups and writes, just before `commit`. For an
//! auto-committed statement (`statement`: a bulk load, CREATE TABLE,
//! CREATE INDEX, DROP TABLE) it is the whole statement. Both include the
//! pipe's hand-over (microseconds). A unit cut by the kill (`TXN`, no `OK`)
//! is not timed. `--report-interval SECS` prints a line per interval of the
//! whole run (the children's runs, the recoveries and checks between them:
//! those intervals acknowledge nothing) with the acknowledged units/s and
//! the interval's commit p99; the pool is the child's, so no hit ratio or
//! evictions. `--seed` draws the kill times and the children's workloads.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use engine::soak::{Rng, Soak, run_and_kill_seen, run_child};
use serde::{Deserialize, Serialize};

use crate::common::{Defaults, EvictorChoice, Report, Settings, Table};
use crate::error::{BenchError, Result};
use crate::harness::{self, LiveLatency, Recorder, RowSeries, Tally};
use crate::latency::{self, Latencies};

pub const NAME: &str = "crash-soak";
/// Cycles when `--cycles` is not given.
pub const DEFAULT_CYCLES: u64 = 20;
/// Cycles under `--quick`.
pub const QUICK_CYCLES: u64 = 5;
/// The child runs this long after READY before the kill: a random time in
/// this range (as the crash-loop test).
pub const RUN_MS: std::ops::RangeInclusive<u64> = 100..=700;
/// Environment of the child process: its data directory and seed.
pub const CHILD_DIR: &str = "BENCH_CRASH_SOAK_CHILD_DIR";
pub const CHILD_SEED: &str = "BENCH_CRASH_SOAK_CHILD_SEED";
/// A child that is never killed stops by itself after this long.
const CHILD_DEADLINE: Duration = Duration::from_secs(600);

/// The operation kinds of the latency table: a transaction's commit, and
/// an auto-committed statement (bulk load or DDL), each from its `TXN` line
/// to its `OK` line.
pub const COMMIT: &str = "commit";
pub const STATEMENT: &str = "statement";

/// The seed of the kill times and the children's workloads without `--seed`.
pub const SEED: u64 = 0x5eed_c0de;

/// The options of `crash-soak` (after the scenario name).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct Args {
    /// Kill-and-recover cycles [default: 20; 5 with --quick]
    #[arg(long, value_name = "N")]
    pub cycles: Option<u64>,
}

/// Defaults: pool options do not apply (the workload's pool is
/// `engine::soak::options`).
pub fn defaults() -> Defaults {
    let mut d = crate::scenarios::ScenarioKind::Sweep.defaults();
    d.threads = vec![1];
    d.evictor = EvictorChoice::Clock;
    d
}

/// If this process was started as a soak child, run the child's workload
/// (until it is killed) and return `true`.
pub fn run_child_if_asked() -> bool {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return false;
    };
    let seed = std::env::var(CHILD_SEED)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    run_child(
        Path::new(&dir),
        seed,
        CHILD_DEADLINE,
        &mut std::io::stdout(),
    );
    true
}

/// The summary row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub cycles: u64,
    pub commits_verified: u64,
    /// Transactions killed inside `commit` that recovery found committed
    /// (counted in `commits_verified`).
    pub in_doubt_committed: u64,
    /// Cycles whose kill fell inside a bulk load (or its commit).
    pub loads_killed: u64,
    /// The next xid after the last recovery.
    pub next_xid_at_end: u64,
    pub rows_at_end: usize,
    pub blocks_checked: u64,
    pub recovery_ms_mean: f64,
    pub recovery_ms_p99: f64,
    pub recovery_ms_max: f64,
    pub wall_secs: f64,
    /// Units the children acknowledged (`OK` lines: commits and
    /// statements), every cycle: what the latencies and the interval
    /// series count.
    #[serde(default)]
    pub acknowledged: u64,
    /// Flattened into the row: `latency` (`commit`, `statement`),
    /// `intervals` (`--report-interval`, over the whole run), `seed` (the
    /// kill times and the workloads) and `mrc` (always `null`: the pool is
    /// the child's).
    #[serde(flatten)]
    pub series: RowSeries,
}

/// A finished `crash-soak` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CrashSoakReport {
    pub scenario: String,
    pub seed: u64,
    pub cycles_asked: u64,
    pub rows: Vec<Row>,
    /// Recovery time of every cycle, in ms.
    pub recovery_ms: Vec<f64>,
    /// The violation that stopped the soak, if any.
    pub failure: Option<String>,
    /// The data directory, kept when the soak failed.
    pub kept_dir: Option<String>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// Run the soak with this program as the child.
pub fn run(settings: &Settings, args: &Args) -> Result<CrashSoakReport> {
    let exe = std::env::current_exe().map_err(|source| BenchError::Io {
        op: "locate",
        path: PathBuf::from("the bench executable"),
        source,
    })?;
    run_with(settings, args, &exe)
}

/// `settings.data_dir` created, and in it a fresh (removed if left
/// over) directory for the children's database.
fn fresh_dir(settings: &Settings, seed: u64) -> Result<PathBuf> {
    std::fs::create_dir_all(&settings.data_dir).map_err(|source| BenchError::Io {
        op: "create",
        path: settings.data_dir.clone(),
        source,
    })?;
    let dir = settings
        .data_dir
        .join(format!("{NAME}-{}-{seed}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|source| BenchError::Io {
            op: "remove",
            path: dir.clone(),
            source,
        })?;
    }
    Ok(dir)
}

/// What the cycles observed: commits verified, in-doubt commits found
/// committed, blocks checked, loads killed, the last next xid, each
/// recovery's time and the first failure (which ends the cycles).
#[derive(Default)]
struct Cycles {
    verified: u64,
    in_doubt: u64,
    blocks: u64,
    loads_killed: u64,
    next_xid: u64,
    recovery_ms: Vec<f64>,
    failure: Option<String>,
}

/// Times the children's units from their lines: `TXN n ops` starts one,
/// `OK n` ends it.
struct Timer<'a> {
    rec: Recorder<'a>,
    /// The unit in flight: its number, kind and when its `TXN` came.
    pending: Option<(u64, &'static str, Instant)>,
    /// Units acknowledged so far, read by the interval reporter.
    acknowledged: &'a AtomicU64,
}

impl Timer<'_> {
    fn seen(&mut self, line: &str, at: Instant) {
        let mut w = line.split_whitespace();
        match w.next() {
            Some("TXN") => {
                let n = w.next().and_then(|n| n.parse().ok());
                let kind = match w.next().and_then(|op| op.split(':').next()) {
                    Some("I" | "U" | "D") => COMMIT,
                    _ => STATEMENT,
                };
                self.pending = n.map(|n| (n, kind, at));
            }
            Some("OK") => {
                let n: Option<u64> = w.next().and_then(|n| n.parse().ok());
                // A malformed pair is the cycle's check to report; it is
                // not timed.
                if let Some((p, kind, started)) = self.pending.take()
                    && Some(p) == n
                {
                    self.rec.record_span(kind, started, at, true);
                    self.acknowledged.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => {}
        }
    }
}

/// Run `cycles` children of `exe` in `dir`, each killed at a random time,
/// and check the database after each crash; `timer` times their lines.
fn run_cycles(
    settings: &Settings,
    (exe, dir): (&Path, &Path),
    cycles: u64,
    rng: &mut Rng,
    soak: &mut Soak,
    started: Instant,
    timer: &mut Timer<'_>,
) -> Cycles {
    let mut c = Cycles::default();
    for cycle in 0..cycles {
        let mut child = Command::new(exe);
        child
            .env(CHILD_DIR, dir)
            .env(CHILD_SEED, rng.next_u64().to_string());
        let run =
            Duration::from_millis(RUN_MS.start() + rng.below(RUN_MS.end() - RUN_MS.start() + 1));
        // A unit in flight at the kill is not timed.
        timer.pending = None;
        let outcome = run_and_kill_seen(child, run, |l, at| timer.seen(l, at))
            .map_err(|e| format!("cycle {cycle}: {e}"))
            .and_then(|lines| soak.check_after_crash(cycle, dir, &lines));
        match outcome {
            Ok(r) => {
                c.verified += r.committed + u64::from(r.in_doubt_committed);
                c.in_doubt += u64::from(r.in_doubt_committed);
                c.loads_killed += u64::from(r.load_killed);
                c.next_xid = r.next_xid;
                c.blocks += r.blocks_checked;
                c.recovery_ms.push(r.recovery.as_secs_f64() * 1e3);
                if settings.progress && (cycle + 1) % 10 == 0 {
                    eprintln!(
                        "{NAME}: {} cycles, {} commits verified, {:.0} s",
                        cycle + 1,
                        c.verified,
                        started.elapsed().as_secs_f64()
                    );
                }
            }
            Err(e) => {
                c.failure = Some(e);
                break;
            }
        }
    }
    c
}

/// Run the soak with `exe` (the `bench` program) as the child.
pub fn run_with(settings: &Settings, args: &Args, exe: &Path) -> Result<CrashSoakReport> {
    let cycles = args.cycles.unwrap_or(if settings.quick {
        QUICK_CYCLES
    } else {
        DEFAULT_CYCLES
    });
    // `--seed` (common to every scenario): the kill times and the
    // children's workloads.
    let seed = settings.seed(SEED);
    let dir = fresh_dir(settings, seed)?;
    println!(
        "== {NAME}: {cycles} SIGKILL cycles of the mixed workload (kill {}-{} ms after READY), \
         seed {seed}, in {}",
        RUN_MS.start(),
        RUN_MS.end(),
        dir.display()
    );
    let mut rng = Rng::new(seed);
    let mut soak = Soak::new();
    let started = Instant::now();
    let live = LiveLatency::new();
    let acknowledged = AtomicU64::new(0);
    let mut timer = Timer {
        rec: Recorder::new(settings.measures.report_interval.map(|_| &live), COMMIT),
        pending: None,
        acknowledged: &acknowledged,
    };
    let (cycles_seen, intervals) = harness::with_intervals(
        settings.measures.report_interval,
        (NAME, "acknowledged"),
        &live,
        || Tally {
            ops: acknowledged.load(Ordering::Relaxed),
            ..Tally::default()
        },
        || {
            let c = run_cycles(
                settings,
                (exe, &dir),
                cycles,
                &mut rng,
                &mut soak,
                started,
                &mut timer,
            );
            // Hand the last values to the interval reporter before it ends.
            let lat: Latencies =
                std::mem::replace(&mut timer.rec, Recorder::new(None, COMMIT)).finish();
            (c, lat)
        },
    );
    let (
        Cycles {
            verified,
            in_doubt,
            blocks,
            loads_killed,
            next_xid,
            recovery_ms,
            failure,
        },
        lat,
    ) = cycles_seen;
    let kept_dir = if failure.is_some() {
        Some(dir.display().to_string())
    } else {
        std::fs::remove_dir_all(&dir).map_err(|source| BenchError::Io {
            op: "remove",
            path: dir.clone(),
            source,
        })?;
        None
    };
    let mut sorted = recovery_ms.clone();
    sorted.sort_by(f64::total_cmp);
    let mean = if sorted.is_empty() {
        0.0
    } else {
        sorted.iter().sum::<f64>() / sorted.len() as f64
    };
    Ok(CrashSoakReport {
        scenario: NAME.into(),
        seed,
        cycles_asked: cycles,
        rows: vec![Row {
            cycles: recovery_ms.len() as u64,
            commits_verified: verified,
            in_doubt_committed: in_doubt,
            loads_killed,
            next_xid_at_end: next_xid,
            rows_at_end: soak.rows(),
            blocks_checked: blocks,
            recovery_ms_mean: mean,
            recovery_ms_p99: percentile(&sorted, 0.99),
            recovery_ms_max: sorted.last().copied().unwrap_or(0.0),
            wall_secs: started.elapsed().as_secs_f64(),
            acknowledged: acknowledged.load(Ordering::Relaxed),
            series: RowSeries {
                latency: lat.by_kind(),
                mrc: None,
                intervals,
                seed,
            },
        }],
        recovery_ms,
        failure,
        kept_dir,
    })
}

impl Report for CrashSoakReport {
    fn scenario(&self) -> &str {
        &self.scenario
    }

    fn render(&self) -> String {
        let mut t = Table::new(&[
            "cycles",
            "commits verified",
            "in doubt, committed",
            "loads killed",
            "next xid",
            "rows",
            "recovery ms mean",
            "p99",
            "max",
            "wall s",
        ]);
        for r in &self.rows {
            t.push(vec![
                r.cycles.to_string(),
                r.commits_verified.to_string(),
                r.in_doubt_committed.to_string(),
                r.loads_killed.to_string(),
                r.next_xid_at_end.to_string(),
                r.rows_at_end.to_string(),
                format!("{:.1}", r.recovery_ms_mean),
                format!("{:.1}", r.recovery_ms_p99),
                format!("{:.1}", r.recovery_ms_max),
                format!("{:.0}", r.wall_secs),
            ]);
        }
        let mut out = format!(
            "\n{NAME}: {} of {} cycles, seed {}\n",
            self.rows[0].cycles, self.cycles_asked, self.seed
        );
        out += &t.to_string();
        let lat: Vec<(String, &latency::ByKind)> = self
            .rows
            .iter()
            .map(|r| (format!("{} cycles", r.cycles), &r.series.latency))
            .collect();
        out += &latency::table(&lat);
        out += "commit: a transaction's commit, statement: a bulk load or DDL, each from \
                the child's TXN line to its OK line as the pipe delivered them\n";
        out += "recovery: Database::open after the kill (WAL replay included); every cycle \
                checks every acknowledged commit, no phantoms, indexes and checksums\n";
        out += &match (&self.failure, &self.kept_dir) {
            (None, _) => "data check: every cycle passed\n".to_string(),
            (Some(f), dir) => format!(
                "data check FAILED: {f} (data directory kept: {})\n",
                dir.as_deref().unwrap_or("?")
            ),
        };
        out
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a report of plain fields serialises")
    }

    fn failures(&self) -> Vec<String> {
        self.failure.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_sorted_list() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 1.0), 100.0);
        assert_eq!(percentile(&[5.0], 0.99), 5.0);
        assert_eq!(percentile(&[], 0.99), 0.0);
    }
}
