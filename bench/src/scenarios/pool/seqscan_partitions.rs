//! `seqscan-partitions`: one client scanning a table of ~60% of the pool
//! again and again, per partition count x balancing x partition floor
//! (bench/SCENARIOS.md).
//!
//! ```text
//!   data (cached per scale): accounts(aid pk, bid, abalance, filler 84),
//!        heap = --table-pct of the pool (60%), its pk index (not scanned)
//!
//!   per cell: Database::open(copy-free: the cached directory) with
//!     partitions N, balancing on/off, floor off / = the table's pages
//!   one scanner thread (its home partition is the one its first touch gets):
//!     scan #1 (cold: reads the table) ─ warm-up scans (the warm-up time, and
//!     at least two rebalancing rounds' allocations) ─ │ window │ stop
//!     every scan: scan_with(RingChoice::Never): the table is above the
//!     ring threshold (pool / 4), so Auto would read it through a ring.
//!   row: pages/s and hit ratio from PoolStats over the window; vs p=1
//! ```
//!
//! Without balancing the scanner takes every victim from its home
//! partition (pool / N buffers): for N >= 2 the 60% table no longer fits
//! there, the clock cycles through that partition and the scan misses.
//! Balancing spreads its allocations over every partition; the floor (a
//! minimum partition size, here the table's pages) lowers the partition
//! count until one partition holds the table (bufmgr partition rule 3).
//!
//! Each row also carries the latency of each heap page the scanner went
//! through (`scan_page`: from a page's first row to the next page's) and of
//! each full scan (`scan`), over the window. The window's edges are placed
//! by the scanner itself, between two pages, when the watching thread asks
//! (the pool's counters read there, then the window's flag flipped), so the
//! pages timed and the pool's accesses counted cover the same pages however
//! late the watching thread runs on a loaded machine; `--report-interval` prints a
//! line per interval (pages/s, hit ratio, evictions, `scan_page` p99) from
//! the cold scan on. The scan draws nothing at random: `--seed` is reported,
//! not used.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bufmgr::PoolStats;
use engine::{Database, RingChoice, ScanOptions};
use serde::{Deserialize, Serialize};

use crate::check::DataCheck;
use crate::common::{
    self, BatchField, Config, CpuSample, Defaults, EvictorChoice, Report, Settings, Table, Toggle,
    fmt_rate, fmt_ratio,
};
use crate::error::{BenchError, Result};
use crate::harness::{self, LiveLatency, Recorder, RowSeries, Tally};
use crate::latency::{self, Latencies};
use crate::scenarios::tables::{self, ACCOUNTS, Residency};

pub const NAME: &str = "seqscan-partitions";
/// The default partition counts (`--partitions` replaces them).
pub const PARTITIONS: [usize; 4] = [1, 2, 4, 6];
/// Table heap size in percent of the pool.
pub const TABLE_PCT: u64 = 60;
/// Operation kinds of the latency table: one heap page of a scan (from its
/// first row to the next page's first row), and one full scan.
pub const SCAN_PAGE: &str = "scan_page";
pub const SCAN: &str = "scan";
/// The seed a row reports without `--seed` (nothing is drawn from it).
pub const SEED: u64 = 0;

/// The options of `seqscan-partitions` (after the scenario name).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct Args {
    /// Partition balancing [default: both]
    #[arg(long, value_enum)]
    pub balancing: Option<Toggle>,
    /// Partition floor = the table's pages (on) or none (off) [default: both]
    #[arg(long, value_enum)]
    pub floor: Option<Toggle>,
    /// Heap pages of the table, in percent of the pool [default: 60]
    #[arg(long, value_name = "PCT")]
    pub table_pct: Option<u64>,
}

/// The scenario's defaults: clock, batch 1, one thread, 3 s windows.
pub fn defaults() -> Defaults {
    let mut d = crate::scenarios::ScenarioKind::Sweep.defaults();
    d.duration = Duration::from_secs(3);
    d.warmup = Duration::from_secs(1);
    d.threads = vec![1];
    d.batches = vec![bufmgr::SweepBatch::Fixed(1)];
    d.huge_pages = Toggle::Off;
    d.evictor = EvictorChoice::Clock;
    d.quick_pool_mib = common::QUICK_POOL_MIB;
    d
}

/// One measured cell.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    pub pool: Config,
    pub balancing: bool,
    pub floor: bool,
}

impl Cell {
    fn label(&self) -> String {
        format!(
            "{} batch={} partitions={} balancing={} floor={}",
            self.pool.evictor,
            self.pool.batch,
            self.pool.partitions,
            on_off(self.balancing),
            on_off(self.floor)
        )
    }
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// Every cell: pool configs (one thread) x floor x balancing. With one
/// partition balancing and a floor change nothing, so partitions=1 runs
/// once (with the first balancing and floor values). The partition counts
/// are `--partitions`, defaulting to [`PARTITIONS`] ({1, 6} under
/// `--quick`; see `ScenarioKind::settings`).
pub fn cells(settings: &Settings, args: &Args) -> Vec<Cell> {
    let parts = settings.partitions.clone();
    let floors = args.floor.unwrap_or(Toggle::Both).values();
    let balancings = args.balancing.unwrap_or(Toggle::Both).values();
    let mut out = Vec::new();
    for pool in tables::configs_with(settings, &[1], &parts) {
        if pool.partitions == 1 {
            out.push(Cell {
                pool,
                balancing: balancings[0],
                floor: floors[0],
            });
            continue;
        }
        for &floor in &floors {
            for &balancing in &balancings {
                out.push(Cell {
                    pool,
                    balancing,
                    floor,
                });
            }
        }
    }
    out
}

/// One cell's window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub evictor: String,
    pub batch: BatchField,
    /// Partitions asked for.
    pub partitions: usize,
    /// Partitions the pool made (the floor may lower the count).
    pub partitions_effective: usize,
    pub balancing: bool,
    pub floor: bool,
    /// The floor in buffers (the table's pages), when on.
    pub floor_pages: Option<usize>,
    pub threads: usize,
    pub huge_pages: bool,
    /// The pool's rings (the scan itself uses none: `RingChoice::Never`).
    pub ring: bool,
    pub window_secs: f64,
    /// Heap pages the scanner read (buffer accesses) in the window.
    pub pages: u64,
    pub pages_per_sec: f64,
    pub rows_per_sec: f64,
    pub hit_ratio: f64,
    /// Pages read from storage in the window.
    pub reads: u64,
    pub evictions: u64,
    /// Full scans finished in the window (fractional).
    pub scans: f64,
    /// pages/s over the partitions=1 row of the same evictor and batch.
    pub vs_partitions1: Option<f64>,
    /// hit ratio of that partitions=1 row.
    pub hit_ratio_partitions1: Option<f64>,
    pub cpu_cores_used: Option<f64>,
    pub other_cores_used: Option<f64>,
    pub resident: Vec<Residency>,
    /// Per NUMA node: where the buffers' memory is (queried), and the
    /// window's accesses and reads of the partitions on each node.
    #[serde(default)]
    pub nodes: Vec<tables::NodeFigures>,
    /// Flattened into the row: `latency` (`scan_page`, `scan`, over the
    /// window), `intervals` (`--report-interval`, from the cold scan on;
    /// `ops`: heap pages), `seed` (reported, not used) and `mrc` (`--mrc`).
    #[serde(flatten)]
    pub series: RowSeries,
}

/// A finished `seqscan-partitions` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeqscanReport {
    pub scenario: String,
    pub table: String,
    pub table_rows: u64,
    pub table_pages: u64,
    pub table_pct_of_pool: f64,
    pub pool_buffers: usize,
    pub cores: usize,
    pub warmup_secs: f64,
    pub duration_secs: f64,
    pub reused_data: bool,
    pub rows: Vec<Row>,
    pub data_check: DataCheck,
}

/// The table's rows for a pool of `pool` buffers.
pub fn table_rows(pool: usize, pct: u64) -> u64 {
    tables::accounts_for_pages(pool as u64 * pct / 100)
}

/// The scanner's counters, shared with the thread watching it.
#[derive(Debug, Default)]
struct Counters {
    stop: AtomicBool,
    /// Raised after the first full scan.
    first: AtomicBool,
    /// Raised for the measured window (latencies recorded only inside it).
    in_window: AtomicBool,
    rows: AtomicU64,
    /// Full scans finished.
    scans: AtomicU64,
    /// Heap pages begun.
    pages: AtomicU64,
    /// The watcher's request to open or close the window ([`OPEN`],
    /// [`CLOSE`]; [`NO_REQUEST`] once the scanner has done it).
    request: AtomicU8,
    /// The points the scanner took at the window's edges, in order.
    edges: Mutex<Vec<Point>>,
}

/// [`Counters::request`]: nothing asked.
const NO_REQUEST: u8 = 0;
/// [`Counters::request`]: open the window at the next page.
const OPEN: u8 = 1;
/// [`Counters::request`]: close the window at the next page.
const CLOSE: u8 = 2;

impl Counters {
    /// The point at this instant: the pool's counters, rows, scans, CPU
    /// time and the time.
    fn point(&self, db: &Database) -> Point {
        (
            db.pool_stats(),
            self.rows.load(Ordering::Relaxed),
            self.scans.load(Ordering::Relaxed),
            CpuSample::now(),
            Instant::now(),
        )
    }

    /// At a page boundary of the scanner (the last page's time recorded,
    /// the next one not begun): open or close the window if the watcher
    /// asked. Opening reads the point and then raises the flag, closing
    /// lowers the flag and then reads the point, so the pages timed in the
    /// window are the pages whose accesses the two points enclose (give or
    /// take the few pages the scan's read-ahead pinned before the scanner
    /// reached their rows).
    fn edge(&self, db: &Database) {
        match self.request.load(Ordering::Acquire) {
            OPEN => {
                let p = self.point(db);
                self.edges.lock().expect("edges lock").push(p);
                self.in_window.store(true, Ordering::Relaxed);
            }
            CLOSE => {
                self.in_window.store(false, Ordering::Relaxed);
                let p = self.point(db);
                self.edges.lock().expect("edges lock").push(p);
            }
            _ => return,
        }
        self.request.store(NO_REQUEST, Ordering::Release);
    }

    /// Ask the scanner to open or close the window and wait until it has,
    /// or until `finished()` (the scanner ended: its error, if any, comes
    /// from joining it).
    fn ask(&self, what: u8, finished: impl Fn() -> bool) {
        self.request.store(what, Ordering::Release);
        while self.request.load(Ordering::Acquire) != NO_REQUEST && !finished() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Scan `table` with no ring until `c.stop`, timing each page and each full
/// scan into `rec`; counts rows, pages and full scans in `c`.
fn scanner(db: &Database, table: &str, c: &Counters, mut rec: Recorder<'_>) -> Result<Latencies> {
    let Counters {
        stop,
        first,
        rows,
        scans,
        pages,
        ..
    } = c;
    let opts = ScanOptions {
        ring: RingChoice::Never,
        hint_mode: db.options().hint_mode,
    };
    while !stop.load(Ordering::Relaxed) {
        // Also between scans, so an empty table still opens and closes.
        c.edge(db);
        let txn = db.begin()?;
        let mut n = 0u64;
        let mut cut = false;
        let scan_started = Instant::now();
        let mut page_started = scan_started;
        let mut last_block = None;
        for r in txn.scan_with(table, opts)? {
            let (rid, _) = r?;
            if last_block != Some(rid.block) {
                if last_block.is_some() {
                    rec.record(SCAN_PAGE, page_started);
                }
                c.edge(db);
                page_started = Instant::now();
                last_block = Some(rid.block);
                pages.fetch_add(1, Ordering::Relaxed);
            }
            n += 1;
            if n.is_multiple_of(1024) {
                rows.fetch_add(1024, Ordering::Relaxed);
                if stop.load(Ordering::Relaxed) {
                    cut = true;
                    break;
                }
            }
        }
        rows.fetch_add(n % 1024, Ordering::Relaxed);
        txn.rollback()?;
        if !cut {
            if last_block.is_some() {
                rec.record(SCAN_PAGE, page_started);
            }
            rec.record(SCAN, scan_started);
            scans.fetch_add(1, Ordering::Relaxed);
            first.store(true, Ordering::Release);
        }
    }
    Ok(rec.finish())
}

/// Scans of a `table_pages` table whose allocations (at most one per page)
/// reach two rebalancing rounds ([`bufmgr::partition::REBALANCE_EVERY`]).
fn warmup_scans(table_pages: u64) -> u64 {
    (2 * bufmgr::partition::REBALANCE_EVERY).div_ceil(table_pages.max(1)) + 1
}

/// (pool statistics, rows scanned, scans done, CPU time, instant) at the
/// window's start or end.
type Point = (PoolStats, u64, u64, Option<CpuSample>, Instant);

/// What [`scan_window`] measured: the points at the window's start and
/// end, the scanner's latencies over the window, the interval series.
type Measured = (Point, Point, Latencies, Vec<harness::Interval>);

/// One scanner thread over accounts: its cold scan, the warm-up (long
/// enough for two balancing rounds), then the measured window, under the
/// `--report-interval` reporter.
fn scan_window(
    settings: &Settings,
    db: &Database,
    pb: &indicatif::ProgressBar,
    table_pages: u64,
    label: &str,
) -> Result<Measured> {
    let c = Counters::default();
    let live = LiveLatency::new();
    let live_ref = settings.measures.report_interval.map(|_| &live);
    let (measured, intervals) = harness::with_intervals(
        settings.measures.report_interval,
        (&format!("{NAME} {label}"), "pages"),
        &live,
        || Tally::of(&db.pool_stats(), c.pages.load(Ordering::Relaxed)),
        || scan_crew(settings, db, pb, table_pages, &c, live_ref),
    );
    let (before, after, lat) = measured?;
    Ok((before, after, lat, intervals))
}

/// The scanner thread and the watch over it, for [`scan_window`].
fn scan_crew(
    settings: &Settings,
    db: &Database,
    pb: &indicatif::ProgressBar,
    table_pages: u64,
    c: &Counters,
    live: Option<&LiveLatency>,
) -> Result<(Point, Point, Latencies)> {
    let Counters {
        stop,
        first,
        in_window,
        scans,
        ..
    } = c;
    std::thread::scope(|s| -> Result<_> {
        let h = s.spawn(|| {
            crate::common::pin_worker(0);
            let rec = Recorder::new(live, SCAN_PAGE).window(in_window);
            // The one scanner is trace thread 0.
            common::traced(db, 0, || scanner(db, ACCOUNTS, c, rec))
        });
        // The first (cold) scan, then the warm-up.
        while !first.load(Ordering::Acquire) && !h.is_finished() {
            std::thread::sleep(Duration::from_millis(10));
        }
        tables::run_window(pb, settings.warmup, |_| !h.is_finished());
        // Balancing recomputes its weights every REBALANCE_EVERY
        // allocations, not on a timer: the warm-up also lasts until the
        // scans since the cold one could have triggered two rounds, so a
        // short or starved warm-up (a loaded machine, a debug build) does
        // not measure the partitions before balancing began. Capped, so a
        // stuck scanner still ends the cell.
        let needed = warmup_scans(table_pages);
        let started = scans.load(Ordering::Relaxed);
        let give_up = Instant::now() + Duration::from_secs(120);
        while scans.load(Ordering::Relaxed) < started + needed
            && !h.is_finished()
            && Instant::now() < give_up
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        c.ask(OPEN, || h.is_finished());
        tables::run_window(pb, settings.duration, |_| !h.is_finished());
        c.ask(CLOSE, || h.is_finished());
        stop.store(true, Ordering::Relaxed);
        let lat = h
            .join()
            .map_err(|p| BenchError::Panic(tables::panic_text(p)))??;
        let mut edges = std::mem::take(&mut *c.edges.lock().expect("edges lock"));
        let (Some(after), Some(before), None) = (edges.pop(), edges.pop(), edges.pop()) else {
            return Err(BenchError::Data(format!(
                "{NAME}: the scanner ended without opening and closing the measured window"
            )));
        };
        Ok((before, after, lat))
    })
}

fn measure(
    settings: &Settings,
    dir: &std::path::Path,
    cell: &Cell,
    table_pages: u64,
    label: &str,
) -> Result<Row> {
    let floor_pages = cell.floor.then_some(table_pages as usize);
    let parts = [
        format!("balancing-{}", on_off(cell.balancing)),
        format!("floor-{}", on_off(cell.floor)),
    ];
    let trace = settings.trace_for(&cell.pool, &[&parts[0], &parts[1]]);
    let opts = tables::options(settings, &cell.pool)
        .balancing(cell.balancing)
        .partition_floor(floor_pages)
        .trace(trace.clone());
    let db = Database::open(dir, opts)?;
    let partitions_effective = db.pool().partitions().len();
    let pb = tables::window_bar(
        settings,
        settings.warmup + settings.duration,
        &format!("{NAME} {label}"),
    );
    let measured = scan_window(settings, &db, &pb, table_pages, label);
    pb.finish_and_clear();
    let (before, after, lat, intervals) = measured?;
    let secs = after.4.duration_since(before.4).as_secs_f64();
    let stats = after.0.since(&before.0);
    let t = stats.totals();
    let cpu = before.3.zip(after.3).map(|(a, b)| b.cores_since(&a, secs));
    let resident = tables::residency(&db);
    let nodes = tables::node_figures(&db, &stats);
    let mrc = common::curve_of(&db);
    common::note_trace(settings, trace, db.pool())?;
    db.close()?;
    let rows_n = after.1 - before.1;
    Ok(Row {
        evictor: cell.pool.evictor.name().into(),
        batch: cell.pool.batch.into(),
        partitions: cell.pool.partitions,
        partitions_effective,
        balancing: cell.balancing,
        floor: cell.floor,
        floor_pages,
        threads: 1,
        huge_pages: cell.pool.huge_pages,
        ring: cell.pool.ring,
        window_secs: secs,
        pages: t.accesses,
        pages_per_sec: t.accesses as f64 / secs,
        rows_per_sec: rows_n as f64 / secs,
        hit_ratio: t.hit_ratio(),
        reads: t.reads,
        evictions: t.evictions,
        scans: t.accesses as f64 / table_pages.max(1) as f64,
        vs_partitions1: None,
        hit_ratio_partitions1: None,
        cpu_cores_used: cpu.map(|c| c.0),
        other_cores_used: cpu.map(|c| c.1),
        resident,
        nodes,
        series: RowSeries {
            latency: lat.by_kind(),
            mrc,
            intervals,
            seed: settings.seed(SEED),
        },
    })
}

/// Fill `vs_partitions1`: each row over the partitions=1 row of the same
/// evictor, batch, huge pages and ring (the first such row).
fn compare(rows: &mut [Row]) {
    let base: Vec<Option<(f64, f64)>> = rows
        .iter()
        .map(|r| {
            rows.iter()
                .find(|b| {
                    b.partitions_effective == 1
                        && b.partitions == 1
                        && b.evictor == r.evictor
                        && b.batch == r.batch
                        && b.huge_pages == r.huge_pages
                        && b.ring == r.ring
                })
                .map(|b| (b.pages_per_sec, b.hit_ratio))
        })
        .collect();
    for (r, b) in rows.iter_mut().zip(base) {
        if let Some((pps, hit)) = b {
            r.vs_partitions1 = tables::ratio(r.pages_per_sec, pps);
            r.hit_ratio_partitions1 = Some(hit);
        }
    }
}

/// Build or reuse the table, measure every cell, check the data.
pub fn run(settings: &Settings, args: &Args) -> Result<SeqscanReport> {
    let pct = args.table_pct.unwrap_or(TABLE_PCT);
    if pct == 0 || pct >= 100 {
        return Err(BenchError::Config(format!(
            "--table-pct must be between 1 and 99, not {pct}"
        )));
    }
    let n = table_rows(settings.pool_buffers, pct);
    let cells = cells(settings, args);
    println!(
        "== {NAME}: one client scanning a table of {pct}% of the pool again and again \
         (no ring); {} configurations; pool of {} buffers ({} MiB), {} cores",
        cells.len(),
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
    // The table's pages, from the cached directory.
    let table_pages = {
        let db = Database::open(&dir, tables::build_options(settings))?;
        let rel = db.table(ACCOUNTS)?.rel;
        let p = db.pool().nblocks(bufmgr::RelFork::main(rel))?;
        db.close()?;
        u64::from(p)
    };
    println!(
        "table: {n} rows in {table_pages} pages = {:.0}% of the pool",
        100.0 * table_pages as f64 / settings.pool_buffers as f64
    );
    let mut rows = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        let label = format!("[{}/{}] {}", i + 1, cells.len(), cell.label());
        let r = measure(settings, &dir, cell, table_pages, &label)?;
        eprintln!(
            "{label}: {} pages/s, hit {:.2}%, {} partitions",
            fmt_rate(r.pages_per_sec),
            100.0 * r.hit_ratio,
            r.partitions_effective
        );
        rows.push(r);
    }
    compare(&mut rows);
    let mut data_check = DataCheck::new();
    let db = Database::open(&dir, tables::build_options(settings))?;
    data_check.add(tables::check_table(&db, ACCOUNTS, Some(n))?);
    db.close()?;
    Ok(SeqscanReport {
        scenario: NAME.into(),
        table: ACCOUNTS.into(),
        table_rows: n,
        table_pages,
        table_pct_of_pool: 100.0 * table_pages as f64 / settings.pool_buffers as f64,
        pool_buffers: settings.pool_buffers,
        cores: common::cores(),
        warmup_secs: settings.warmup.as_secs_f64(),
        duration_secs: settings.duration.as_secs_f64(),
        reused_data: reused,
        rows,
        data_check,
    })
}

impl Report for SeqscanReport {
    fn scenario(&self) -> &str {
        &self.scenario
    }

    fn render(&self) -> String {
        let mut t = Table::new(&[
            "evictor",
            "batch",
            "parts",
            "eff",
            "balancing",
            "floor",
            "pages/s",
            "hit%",
            "reads",
            "scans",
            "vs p=1",
            "hit% p=1",
            "others",
        ]);
        for r in &self.rows {
            t.push(vec![
                r.evictor.clone(),
                r.batch.to_string(),
                r.partitions.to_string(),
                r.partitions_effective.to_string(),
                on_off(r.balancing).into(),
                on_off(r.floor).into(),
                fmt_rate(r.pages_per_sec),
                tables::pct(r.hit_ratio),
                r.reads.to_string(),
                format!("{:.1}", r.scans),
                fmt_ratio(r.vs_partitions1),
                r.hit_ratio_partitions1.map_or("-".into(), tables::pct),
                r.other_cores_used.map_or("?".into(), |c| format!("{c:.2}")),
            ]);
        }
        let mut out = format!(
            "\n{NAME}: {} rows, {} pages ({:.0}% of a {}-buffer pool), one scanner, no ring; \
             {:.1} s windows\n",
            self.table_rows,
            self.table_pages,
            self.table_pct_of_pool,
            self.pool_buffers,
            self.duration_secs
        );
        out += &t.to_string();
        out += "parts: partitions asked for; eff: partitions the pool made (the floor lowers \
                the count); vs p=1: pages/s over the partitions=1 row; others: cores other \
                processes used\n";
        let worst = self
            .rows
            .iter()
            .filter(|r| !r.balancing && !r.floor && r.partitions > 1)
            .min_by(|a, b| a.hit_ratio.total_cmp(&b.hit_ratio));
        if let Some(w) = worst {
            out += &format!(
                "without balancing or floor, {} partitions: hit ratio {} vs {} with one, pages/s {}\n",
                w.partitions,
                tables::pct(w.hit_ratio),
                w.hit_ratio_partitions1.map_or("-".into(), tables::pct),
                fmt_ratio(w.vs_partitions1)
            );
        }
        let res: Vec<(String, Vec<Residency>)> = self
            .rows
            .iter()
            .map(|r| {
                (
                    format!(
                        "{} p={} bal={} floor={}",
                        r.evictor,
                        r.partitions,
                        on_off(r.balancing),
                        on_off(r.floor)
                    ),
                    r.resident.clone(),
                )
            })
            .collect();
        let measured: Vec<(String, &latency::ByKind, Option<&common::Curve>)> = res
            .iter()
            .zip(&self.rows)
            .map(|((label, _), r)| (label.clone(), &r.series.latency, r.series.mrc.as_ref()))
            .collect();
        out += &latency::tables_with_curves(&measured);
        out += &tables::render_residency(self.pool_buffers, &res);
        let nodes: Vec<(String, Vec<tables::NodeFigures>)> = res
            .iter()
            .zip(&self.rows)
            .map(|((label, _), r)| (label.clone(), r.nodes.clone()))
            .collect();
        out += &tables::render_nodes(&nodes);
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
