//! `wal-commit`: group commit against the disk's own fdatasync rate.
//!
//! ```text
//!   per thread count T in --threads (default 1,2,4,8,16,32):
//!     raw:    overwrite 100 bytes of a preallocated 16 MiB file + fdatasync,
//!             one thread, for --duration
//!     commit: a fresh WAL in --data-dir; T threads each looping
//!               insert a 100-byte record ── flush to its end   (one synchronous commit)
//!             for --duration; then the log is reopened and its records counted
//! ```
//!
//! One row per T: commits/s, WAL fdatasyncs/s, commits per fdatasync (how
//! many committers one leader's fdatasync served), and commits/s over the
//! raw rate measured just before it, and each commit's latency (insert to
//! durable, `latency.commit`). The raw rate is measured again for
//! every row because a shared virtual disk drifts (the development
//! machine's fdatasync went from ~0.3 ms to ~3 ms and back within one
//! run): a ratio is only honest between neighbours. One committer can at best match
//! the raw rate; group commit should reach several times it once threads
//! wait behind one another's flush. The measurements are `wal::rates`
//! (shared with `wal/examples/wal_rates.rs`). The end-of-run check: every
//! reopened log holds exactly the commits made plus the one record written
//! before the window.
//!
//! `--report-interval SECS` prints a line per interval of each row's commit
//! window (commits/s and the interval's commit p99; no pool, so no hit ratio
//! or evictions) and keeps the series in the row. The workload draws
//! nothing at random (every record is the same 100 bytes), so `--seed`
//! changes nothing; the row still carries it, as every row does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::common::{Defaults, EvictorChoice, Report, Settings, Table, fmt_rate};
use crate::error::{BenchError, Result};
use crate::harness::{self, LiveLatency, Recorder, RowSeries, Tally};
use crate::latency::{self, Latencies};

pub const NAME: &str = "wal-commit";
/// The thread counts of the full run.
pub const THREADS: [usize; 6] = [1, 2, 4, 8, 16, 32];
/// The thread counts under `--quick` (its generic 1,2 shows no grouping).
pub const QUICK_THREADS: [usize; 2] = [1, 8];
/// The operation kind of the latency table: one commit (insert a record,
/// flush the log to its end).
pub const COMMIT: &str = "commit";
/// The seed a row reports without `--seed` (nothing is drawn from it).
pub const SEED: u64 = 0;

/// Defaults: threads 1..32, 3 s per row; pool options do not apply.
pub fn defaults() -> Defaults {
    let mut d = crate::scenarios::ScenarioKind::Sweep.defaults();
    d.duration = Duration::from_secs(3);
    d.threads = THREADS.to_vec();
    d.evictor = EvictorChoice::Clock;
    d
}

/// One thread count's window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub threads: usize,
    pub window_secs: f64,
    pub commits: u64,
    pub fsyncs: u64,
    pub commits_per_sec: f64,
    pub fsyncs_per_sec: f64,
    pub commits_per_fsync: f64,
    /// The raw fdatasync rate, measured just before this row.
    pub raw_fdatasync_per_sec: f64,
    /// commits/s over that raw fdatasync rate.
    pub vs_raw: f64,
    /// Records found when the log was reopened (commits + 1 if none lost).
    pub records_read_back: u64,
    /// Flattened into the row: `latency` (`commit`: from the record's
    /// insert to its flush returning, every thread merged), `intervals`
    /// (`--report-interval`, over the commit window), `seed` (`--seed`,
    /// which draws nothing here) and `mrc` (always `null`: no pool).
    #[serde(flatten)]
    pub series: RowSeries,
}

/// A finished `wal-commit` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WalCommitReport {
    pub scenario: String,
    pub dir: String,
    pub duration_secs: f64,
    pub rows: Vec<Row>,
    pub errors: Vec<String>,
}

/// Measure the raw rate, every thread count, the raw rate again.
pub fn run(settings: &Settings) -> Result<WalCommitReport> {
    let threads = settings.threads.clone();
    let dir = settings.data_dir.join(NAME);
    std::fs::create_dir_all(&dir).map_err(|source| BenchError::Io {
        op: "create",
        path: dir.clone(),
        source,
    })?;
    let window = settings.duration;
    println!(
        "== {NAME}: group commit, threads {threads:?}, {:.1} s each, beside the raw fdatasync \
         rate of a preallocated file; WAL and file in {}",
        window.as_secs_f64(),
        dir.display()
    );
    let mut measured = Vec::new();
    for &t in &threads {
        let raw = wal::rates::raw_fdatasync_rate(&dir, window)?.per_sec();
        let (c, series) = commit_window(settings, &dir, t)?;
        eprintln!(
            "{t} thread(s): {} commits/s, {:.1} commits per fdatasync; raw fdatasync {}/s",
            fmt_rate(c.commits_per_sec()),
            c.commits_per_fsync(),
            fmt_rate(raw)
        );
        measured.push((raw, c, series));
    }
    let mut errors = Vec::new();
    let rows = measured
        .into_iter()
        .map(|(raw, c, series)| {
            if c.records_read_back != c.commits + 1 {
                errors.push(format!(
                    "{} threads: {} commits made but the reopened log holds {} records \
                     (expected {})",
                    c.threads,
                    c.commits,
                    c.records_read_back,
                    c.commits + 1
                ));
            }
            if c.commits == 0 || c.fsyncs == 0 {
                errors.push(format!("{} threads: nothing committed: {c:?}", c.threads));
            }
            Row {
                threads: c.threads,
                window_secs: c.secs,
                commits: c.commits,
                fsyncs: c.fsyncs,
                commits_per_sec: c.commits_per_sec(),
                fsyncs_per_sec: c.fsyncs_per_sec(),
                commits_per_fsync: c.commits_per_fsync(),
                raw_fdatasync_per_sec: raw,
                vs_raw: c.commits_per_sec() / raw,
                records_read_back: c.records_read_back,
                series,
            }
        })
        .collect();
    Ok(WalCommitReport {
        scenario: NAME.into(),
        dir: dir.display().to_string(),
        duration_secs: window.as_secs_f64(),
        rows,
        errors,
    })
}

/// One thread count's commit window, timing every commit, with the
/// `--report-interval` series over it.
fn commit_window(
    settings: &Settings,
    dir: &std::path::Path,
    threads: usize,
) -> Result<(wal::rates::CommitRate, RowSeries)> {
    let live = LiveLatency::new();
    let live_ref = settings.measures.report_interval.map(|_| &live);
    let commits = AtomicU64::new(0);
    // The log is created before the series starts and read back after it
    // ends: the intervals cover the commit window only.
    let log = wal::rates::CommitLog::open(dir)?;
    let label = format!("{NAME} {threads} thread(s)");
    let (measured, intervals) = harness::with_intervals(
        settings.measures.report_interval,
        (&label, "commits"),
        &live,
        || Tally {
            ops: commits.load(Ordering::Relaxed),
            ..Tally::default()
        },
        || {
            let (window, recorders) = log.commit_window(
                threads,
                settings.duration,
                |_| Recorder::new(live_ref, COMMIT),
                |rec, began| {
                    rec.record(COMMIT, began);
                    commits.fetch_add(1, Ordering::Relaxed);
                },
            )?;
            // Hand the last values to the interval reporter before it ends.
            let mut all = Latencies::new();
            for rec in recorders {
                all.merge(&rec.finish());
            }
            Ok::<_, BenchError>((window, all))
        },
    );
    let (window, all) = measured?;
    let rate = log.finish(window)?;
    Ok((
        rate,
        RowSeries {
            latency: all.by_kind(),
            mrc: None,
            intervals,
            seed: settings.seed(SEED),
        },
    ))
}

impl Report for WalCommitReport {
    fn scenario(&self) -> &str {
        &self.scenario
    }

    fn render(&self) -> String {
        let mut t = Table::new(&[
            "threads",
            "commits/s",
            "fsyncs/s",
            "commits/fsync",
            "raw fdatasync/s",
            "vs raw",
        ]);
        for r in &self.rows {
            t.push(vec![
                r.threads.to_string(),
                fmt_rate(r.commits_per_sec),
                fmt_rate(r.fsyncs_per_sec),
                format!("{:.1}", r.commits_per_fsync),
                fmt_rate(r.raw_fdatasync_per_sec),
                format!("{:.2}x", r.vs_raw),
            ]);
        }
        let mut out = format!(
            "\n{NAME}: {:.1} s windows in {}\n",
            self.duration_secs, self.dir
        );
        out += &t.to_string();
        let lat: Vec<(String, &latency::ByKind)> = self
            .rows
            .iter()
            .map(|r| (format!("{} threads", r.threads), &r.series.latency))
            .collect();
        out += &latency::table(&lat);
        out += "commits/fsync: commits one WAL fdatasync served (group commit); vs raw: \
                commits/s over the raw fdatasync rate measured just before the row\n";
        out += &if self.errors.is_empty() {
            "data check: every reopened log held exactly the commits made\n".to_string()
        } else {
            format!("data check FAILED: {}\n", self.errors.join("; "))
        };
        out
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a report of plain fields serialises")
    }

    fn failures(&self) -> Vec<String> {
        self.errors.clone()
    }
}
