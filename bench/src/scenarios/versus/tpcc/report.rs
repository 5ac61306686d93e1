//! What `bench tpcc` reports: per matrix cell tpmC, transactions per
//! second, each transaction type's count, rollbacks, conflict retries and
//! p50 / p95 / p99 / max latency, the analytic queries per hour and each
//! one's times, the pool's hit ratio and evictions, WAL
//! bytes per transaction, and per table and index the pool's hit ratio,
//! evictions and reads (misses) per transaction and the pages resident at
//! the end; the table, the JSON
//! (`bench/doc/json.md`) and a plot of throughput per second.

use std::time::Duration;

use serde::Serialize;

use super::driver::KindRow;
use super::spec::Scale;
use super::versus::VersusRow;
use crate::common::{Report, SvgPlot, Table, evictor_colour, evictor_label, fmt_rate};
use crate::latency::Summary;
use crate::plot;

/// One analytic query in one cell.
#[derive(Clone, Debug, Serialize)]
pub struct QueryRow {
    /// `q1`, `q4`, `q6` or `q12`.
    pub query: &'static str,
    pub done: u64,
    pub latency: Summary,
}

/// One table or index in one cell.
#[derive(Clone, Debug, Serialize)]
pub struct RelationRow {
    pub name: String,
    /// `table` or `index`.
    pub kind: String,
    /// Size at the end of the window.
    pub pages: u64,
    /// Pages in the pool at the end of the window.
    pub resident: u64,
    /// The pool's lookups of the relation's pages during the window, the
    /// hits among them, hits / lookups (`None`, JSON `null`, with no
    /// lookup), and its valid pages evicted (`Database::relation_stats`).
    pub accesses: u64,
    pub hits: u64,
    pub hit_ratio: Option<f64>,
    pub evictions: u64,
    /// Pages read from storage (pool misses) during the window.
    pub reads: u64,
    pub reads_per_txn: f64,
}

/// One cell of the matrix.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub evictor: String,
    pub ring: bool,
    pub threads: usize,
    pub analytic_threads: u16,
    /// The measured window's length.
    pub secs: f64,
    pub tpmc: f64,
    pub tps: f64,
    pub transactions: u64,
    pub kinds: Vec<KindRow>,
    pub hit_ratio: f64,
    pub accesses: u64,
    pub pool_reads: u64,
    pub evictions: u64,
    pub wal_bytes: u64,
    pub wal_bytes_per_txn: f64,
    /// fdatasync calls the WAL made to flush (group commit: one may cover
    /// several commits), and per finished transaction.
    pub wal_fsyncs: u64,
    pub wal_fsyncs_per_txn: f64,
    /// Analytic queries finished (0 without analytic threads), all four
    /// together, and per hour of the analytic threads' time.
    pub analytic_queries: u64,
    pub analytic_per_hour: f64,
    /// Each analytic query that finished: count and times.
    pub queries: Vec<QueryRow>,
    /// Per second of the window: (New-Orders, all transactions).
    pub per_second: Vec<(u64, u64)>,
    pub relations: Vec<RelationRow>,
    /// Consistency conditions 1-4 after the window.
    pub check: String,
    pub check_passed: bool,
    /// `--mrc`: the pool's live miss-ratio curve at the window's end (warm-up
    /// included); else `null`.
    pub mrc: Option<crate::common::Curve>,
}

impl Row {
    fn label(&self) -> String {
        format!(
            "{} ring {} t{} a{}",
            evictor_label(&self.evictor),
            if self.ring { "on" } else { "off" },
            self.threads,
            self.analytic_threads
        )
    }

    fn kind(&self, name: &str) -> Option<&KindRow> {
        self.kinds.iter().find(|k| k.kind == name)
    }
}

/// The whole run.
#[derive(Clone, Debug)]
pub struct TpccReport {
    pub scale: Scale,
    pub seed: u64,
    pub pool_buffers: usize,
    pub data_pages: u64,
    /// Bytes of the data set's directory on disk.
    pub data_bytes: u64,
    pub load_secs: f64,
    pub reused: bool,
    /// `--load-only`: the data set only, no matrix.
    pub load_only: bool,
    pub duration: Duration,
    pub warmup: Duration,
    pub rows: Vec<Row>,
    /// `--versus-sqlite`: the engine and SQLite at 1 and 2 terminals.
    pub versus: Vec<VersusRow>,
    /// The crash-recovery check (`--crash`).
    pub crash: Option<super::crash::CrashReport>,
}

impl TpccReport {
    fn crash_line(&self) -> String {
        let Some(c) = &self.crash else {
            return String::new();
        };
        format!(
            "crash-recovery: child killed with SIGKILL after {:.1} s; {} New-Orders \
             committed and kept ({} acknowledged, {} of them lost); recovery {:.0} ms; {}\n",
            self.duration.as_secs_f64(),
            c.orders_after - c.orders_before,
            c.acknowledged,
            c.lost.len(),
            c.recovery.as_secs_f64() * 1000.0,
            c.check.describe()
        )
    }

    fn crash_failure(&self) -> Option<String> {
        let c = self.crash.as_ref()?;
        if !c.check.passed() {
            return Some(format!("after the crash: {}", c.check.describe()));
        }
        if !c.lost.is_empty() {
            return Some(format!(
                "after the crash: {} of {} acknowledged New-Orders were lost: {}",
                c.lost.len(),
                c.acknowledged,
                c.lost.join("; ")
            ));
        }
        if c.orders_after <= c.orders_before {
            return Some(
                "after the crash: no New-Order of the killed child survived (it committed \
                 none, or recovery lost them)"
                    .into(),
            );
        }
        None
    }
}

fn ms(us: f64) -> String {
    format!("{:.2}", us / 1000.0)
}

/// `--versus-sqlite`: one line per database and terminal count, then the
/// engine's tpmC over SQLite's per terminal count.
fn render_versus(rows: &[VersusRow]) -> String {
    let mut t = Table::new(&[
        "database",
        "threads",
        "tpmC",
        "txn/s",
        "NO p50",
        "NO p99",
        "Pay p99",
        "retries",
        "rollbacks",
        "check",
    ]);
    let kind = |r: &VersusRow, k: &str| r.kinds.iter().find(|x| x.kind == k).cloned();
    for r in rows {
        let no = kind(r, "new-order");
        let pay = kind(r, "payment");
        t.push(vec![
            r.database.into(),
            r.threads.to_string(),
            fmt_rate(r.tpmc),
            fmt_rate(r.tps),
            no.as_ref().map_or("-".into(), |k| ms(k.latency.p50_us)),
            no.as_ref().map_or("-".into(), |k| ms(k.latency.p99_us)),
            pay.as_ref().map_or("-".into(), |k| ms(k.latency.p99_us)),
            r.kinds.iter().map(|k| k.retries).sum::<u64>().to_string(),
            r.kinds
                .iter()
                .map(|k| k.rolled_back)
                .sum::<u64>()
                .to_string(),
            if r.check_passed { "ok" } else { "FAILED" }.into(),
        ]);
    }
    let mut out = format!(
        "engine beside SQLite, data in memory (latencies in ms):\n{}",
        t
    );
    for threads in super::versus::THREADS {
        let of = |db: &str| {
            rows.iter()
                .find(|r| r.database == db && r.threads == threads)
                .map(|r| r.tpmc)
        };
        if let (Some(e), Some(s)) = (of("engine"), of("sqlite"))
            && s > 0.0
        {
            out += &format!(
                "{threads} thread(s): engine tpmC / SQLite tpmC = {:.2}\n",
                e / s
            );
        }
    }
    out
}

impl Report for TpccReport {
    fn scenario(&self) -> &str {
        super::NAME
    }

    fn render(&self) -> String {
        let mut out = format!(
            "\n== {}: {} warehouse(s) ({} items, {} districts x {} customers), data {} pages, \
             pool {} buffers ({:.0}% of the data)\n",
            super::NAME,
            self.scale.warehouses,
            self.scale.items,
            self.scale.districts,
            self.scale.customers,
            self.data_pages,
            self.pool_buffers,
            100.0 * self.pool_buffers as f64 / self.data_pages.max(1) as f64,
        );
        if self.load_only {
            out += &format!(
                "data set: {} bytes on disk ({:.1} MiB), {}\n",
                self.data_bytes,
                self.data_bytes as f64 / (1024.0 * 1024.0),
                if self.reused {
                    "reused from the cache (not loaded: no load time)".to_string()
                } else {
                    format!("loaded in {:.1} s", self.load_secs)
                }
            );
            return out;
        }
        if !self.versus.is_empty() {
            out += &render_versus(&self.versus);
            out += &self.crash_line();
            return out;
        }
        let mut t = Table::new(&[
            "config",
            "tpmC",
            "txn/s",
            "NO p99 ms",
            "hit %",
            "evictions",
            "WAL B/txn",
            "fsync/txn",
            "retries",
            "rollbacks",
            "analytic q/h",
            "check",
        ]);
        for r in &self.rows {
            let no = r.kind("new-order");
            t.push(vec![
                r.label(),
                fmt_rate(r.tpmc),
                fmt_rate(r.tps),
                no.map_or("-".into(), |k| ms(k.latency.p99_us)),
                format!("{:.2}", 100.0 * r.hit_ratio),
                r.evictions.to_string(),
                format!("{:.0}", r.wal_bytes_per_txn),
                format!("{:.2}", r.wal_fsyncs_per_txn),
                r.kinds.iter().map(|k| k.retries).sum::<u64>().to_string(),
                r.kinds
                    .iter()
                    .map(|k| k.rolled_back)
                    .sum::<u64>()
                    .to_string(),
                if r.analytic_threads == 0 {
                    "-".into()
                } else {
                    format!("{:.0}", r.analytic_per_hour)
                },
                if r.check_passed { "ok" } else { "FAILED" }.into(),
            ]);
        }
        out += &t.to_string();
        out += "\nlatency per transaction type (ms) and counts:\n";
        let mut t = Table::new(&[
            "config",
            "type",
            "done",
            "rollbacks",
            "retries",
            "p50",
            "p95",
            "p99",
            "p99.9",
            "max",
        ]);
        for r in &self.rows {
            for k in &r.kinds {
                t.push(vec![
                    r.label(),
                    k.kind.into(),
                    k.done.to_string(),
                    k.rolled_back.to_string(),
                    k.retries.to_string(),
                    ms(k.latency.p50_us),
                    ms(k.latency.p95_us),
                    ms(k.latency.p99_us),
                    ms(k.latency.p999_us),
                    ms(k.latency.max_us),
                ]);
            }
        }
        out += &t.to_string();
        let curves: Vec<(String, Option<&crate::common::Curve>)> = self
            .rows
            .iter()
            .map(|r| (r.label(), r.mrc.as_ref()))
            .collect();
        out += &crate::common::curve_table(&curves);
        if self.rows.iter().any(|r| !r.queries.is_empty()) {
            out += "\nanalytic queries (CH-benCHmark), each query's times (ms):\n";
            let mut t = Table::new(&[
                "config", "query", "done", "p50", "p95", "p99", "p99.9", "max",
            ]);
            for r in &self.rows {
                for q in &r.queries {
                    t.push(vec![
                        r.label(),
                        q.query.into(),
                        q.done.to_string(),
                        ms(q.latency.p50_us),
                        ms(q.latency.p95_us),
                        ms(q.latency.p99_us),
                        ms(q.latency.p999_us),
                        ms(q.latency.max_us),
                    ]);
                }
            }
            out += &t.to_string();
        }
        out += "\npool hit ratio, evictions and reads (misses) per transaction, and pages \
                resident at the end, per relation:\n";
        let mut t = Table::new(&[
            "config",
            "relation",
            "pages",
            "resident %",
            "hit %",
            "evictions",
            "reads/txn",
        ]);
        for r in &self.rows {
            for rel in &r.relations {
                t.push(vec![
                    r.label(),
                    rel.name.clone(),
                    rel.pages.to_string(),
                    format!(
                        "{:.1}",
                        100.0 * rel.resident as f64 / rel.pages.max(1) as f64
                    ),
                    rel.hit_ratio
                        .map_or("-".into(), |h| format!("{:.2}", 100.0 * h)),
                    rel.evictions.to_string(),
                    format!("{:.3}", rel.reads_per_txn),
                ]);
            }
        }
        out += &t.to_string();
        for r in &self.rows {
            if !r.check_passed {
                out += &format!("{}: {}\n", r.label(), r.check);
            }
        }
        out += &self.crash_line();
        out
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "scenario": super::NAME,
            "scale": {
                "warehouses": self.scale.warehouses,
                "items": self.scale.items,
                "districts": self.scale.districts,
                "customers": self.scale.customers,
                "new_orders": self.scale.new_orders,
            },
            "seed": self.seed,
            "pool_buffers": self.pool_buffers,
            "data_pages": self.data_pages,
            "data_bytes": self.data_bytes,
            "load_only": self.load_only,
            "load_secs": self.load_secs,
            "data_reused": self.reused,
            "duration_secs": self.duration.as_secs_f64(),
            "warmup_secs": self.warmup.as_secs_f64(),
            "rows": self.rows,
            "versus_sqlite": self.versus,
            "crash": self.crash.as_ref().map(|c| serde_json::json!({
                "new_orders_kept": c.orders_after - c.orders_before,
                "new_orders_acknowledged": c.acknowledged,
                "new_orders_lost": c.lost,
                "recovery_ms": c.recovery.as_secs_f64() * 1000.0,
                "check_passed": c.check.passed(),
                "check": c.check.describe(),
            })),
        })
    }

    fn failures(&self) -> Vec<String> {
        self.rows
            .iter()
            .filter(|r| !r.check_passed)
            .map(|r| format!("{}: {}", r.label(), r.check))
            .chain(
                self.versus
                    .iter()
                    .filter(|r| !r.check_passed)
                    .map(|r| format!("{} t{}: {}", r.database, r.threads, r.check)),
            )
            .chain(self.crash_failure())
            .collect()
    }

    fn svg_plots(&self) -> Vec<SvgPlot> {
        let series: Vec<plot::Series> = self
            .rows
            .iter()
            .map(|r| plot::Series {
                name: r.label(),
                points: r
                    .per_second
                    .iter()
                    .enumerate()
                    .map(|(s, &(_, all))| (s as f64 + 1.0, all as f64))
                    .collect(),
                dashed: !r.ring,
                colour: evictor_colour(&r.evictor),
            })
            .collect();
        let y_max = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(1.0_f64, f64::max);
        match plot::lines(
            "TPC-C: transactions per second over the measured window",
            "second",
            "transactions/s",
            &series,
            (0.0, y_max * 1.1),
            None,
        ) {
            Ok(svg) => vec![SvgPlot {
                file: format!("{}-throughput.svg", super::NAME),
                svg,
            }],
            Err(_) => Vec::new(),
        }
    }
}
