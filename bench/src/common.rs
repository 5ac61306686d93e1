//! What every scenario shares: the common options and their per-scenario
//! defaults, the expansion of the option lists into a matrix of pool
//! configurations, aligned tables, the JSON report and progress bars.
//!
//! ```text
//!   CommonArgs (command line) ──resolve(Defaults)──> Settings ──configs()──> [Config]
//!                                                      │                       │
//!                                    scenario run ─────┴── one row per Config ─┘
//!                                                      │
//!                                  finish(): print table, write JSON, fail on data errors
//! ```
//!
//! A matrix is ordered so that the two evictors of one configuration run
//! back to back (evictor is the innermost loop): machine drift between them
//! is as small as it can be, and their rows sit next to each other.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::Arc;

use bufmgr::{Evictor, IoMode, PAGE_SIZE, StorageBackend, SweepBatch};
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};

/// `--evictor`: one policy, the two older ones (`both`), or all three.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum EvictorChoice {
    Clock,
    Hotcool,
    Probation,
    /// Clock and HOT/COOL (the default run's pair).
    Both,
    /// Clock, HOT/COOL and probation.
    All,
}

impl EvictorChoice {
    pub fn evictors(self) -> Vec<Evictor> {
        match self {
            EvictorChoice::Clock => vec![Evictor::Clock],
            EvictorChoice::Hotcool => vec![Evictor::HotCool],
            EvictorChoice::Probation => vec![Evictor::Probation],
            EvictorChoice::Both => vec![Evictor::Clock, Evictor::HotCool],
            EvictorChoice::All => Evictor::ALL.to_vec(),
        }
    }
}

/// How plots and prose spell an evictor given by its report name.
pub fn evictor_label(name: &str) -> &'static str {
    match name {
        "hotcool" => "HOT/COOL",
        "probation" => "probation",
        _ => "clock",
    }
}

/// The plot colour of an evictor given by its report name (HOT/COOL keeps
/// the first colour it always had, the clock the second).
pub fn evictor_colour(name: &str) -> usize {
    match name {
        "hotcool" => 0,
        "probation" => 2,
        _ => 1,
    }
}

/// `--ring` and `--huge-pages`: on, off, or one row of each.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Toggle {
    On,
    Off,
    Both,
}

impl Toggle {
    pub fn values(self) -> Vec<bool> {
        match self {
            Toggle::On => vec![true],
            Toggle::Off => vec![false],
            Toggle::Both => vec![false, true],
        }
    }
}

/// The options every scenario accepts. Each is global, so it may come before
/// or after the scenario name; an option left out takes the scenario's
/// default ([`Defaults`]).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct CommonArgs {
    /// Pool size in MiB [default: 128; 16 with --quick (hint-bits: 32)]
    #[arg(long, global = true, value_name = "N")]
    pub pool_mib: Option<usize>,
    /// Pool size in 8 KiB pages (overrides --pool-mib; for tiny test pools)
    #[arg(long, global = true, value_name = "N")]
    pub pool_pages: Option<usize>,
    /// Length of the measured window, in seconds [default: per scenario]
    #[arg(long, global = true, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Warm-up before the measured window, in seconds [default: 2; 0.5 with --quick]
    #[arg(long, global = true, value_name = "SECS")]
    pub warmup: Option<f64>,
    /// Worker thread counts, comma-separated [default: per scenario]
    #[arg(long, global = true, value_delimiter = ',', value_name = "N[,N...]")]
    pub threads: Option<Vec<usize>>,
    /// Replacement policy: clock, hotcool, probation, both (clock and hotcool) or all [default: all; hint-bits, bulkload, seqscan-partitions, compare-sqlite: clock]
    #[arg(long, global = true, value_enum)]
    pub evictor: Option<EvictorChoice>,
    /// Sweep batch sizes, comma-separated; "auto" lets the pool choose [default: 1,16,64; hint-bits: 1]
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        value_name = "N|auto[,...]"
    )]
    pub batch: Option<Vec<SweepBatch>>,
    /// Pool partition counts, comma-separated [default: 1]
    #[arg(long, global = true, value_delimiter = ',', value_name = "N[,N...]")]
    pub partitions: Option<Vec<usize>>,
    /// Buffer rings (recorded; irrelevant to sweep, ticks and hint-bits) [default: on]
    #[arg(long, global = true, value_enum)]
    pub ring: Option<Toggle>,
    /// Transparent huge pages for the pool [default: per scenario]
    #[arg(long, global = true, value_enum)]
    pub huge_pages: Option<Toggle>,
    /// Storage backend: sync pread/pwrite, io_uring, or auto (io_uring if it works here, else sync) [default: sync]
    #[arg(long, global = true, value_name = "sync|io_uring|auto")]
    pub io: Option<IoMode>,
    /// Index descents read internal pages optimistically (no pin, no lock, validated after the read) [default: on]
    #[arg(long, global = true, value_enum, value_name = "on|off")]
    pub optimistic: Option<Toggle>,
    /// Open relation files with O_DIRECT (reads and writes bypass the page cache)
    #[arg(long, global = true)]
    pub direct: bool,
    /// Read pages missing from the pool by copying them from a mapping of their file, not pread (sync I/O only)
    #[arg(long, global = true)]
    pub mapped_reads: bool,
    /// Write the report as JSON to FILE
    #[arg(long, global = true, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Small pool, short windows, threads 1,2: a smoke run of a few seconds
    #[arg(long, global = true)]
    pub quick: bool,
    /// Where the benchmark relations are built and cached
    #[arg(long, global = true, value_name = "DIR", default_value = "bench-data")]
    pub data_dir: PathBuf,
    /// Do not draw progress bars
    #[arg(long, global = true)]
    pub no_progress: bool,
    /// Pin worker thread i to CPU i mod cores (readonly, seqscan-partitions,
    /// oltp, index-residency), so a worker's home partition stays on one node
    #[arg(long, global = true)]
    pub pin_threads: bool,
    /// Write plots (SVG) of the scenarios that draw them into DIR
    #[arg(long, global = true, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// Record each measured run's page accesses and evictions into its own
    /// file: FILE when there is one run, else FILE's name with the
    /// configuration (and scenario, run, ...) in it; the files are listed at
    /// the end. Replay one with `bench replay FILE` (wal-commit and
    /// crash-soak refuse the option)
    #[arg(long, global = true, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Draw the pool live in the terminal while the scenario runs (q or
    /// Ctrl-C leaves the view; the scenario runs on and its tables are
    /// printed at its end); turns progress bars off
    #[arg(long, global = true)]
    pub watch: bool,
    /// Seed of the generated workload (the keys each worker draws, the
    /// crash-soak kill times) [default: each scenario's fixed seed]
    #[arg(long, global = true, value_name = "N")]
    pub seed: Option<u64>,
    /// Keep the live miss-ratio curve of every measured pool (sampled
    /// reuse distances) and print it under the tables: the hit ratio an LRU
    /// cache of 0.25x..4x the pool would have had on the same accesses
    #[arg(long, global = true)]
    pub mrc: bool,
    /// Print a line every SECS seconds while a scenario runs (throughput,
    /// hit ratio, evictions, p99 of the interval), kept in the JSON as the
    /// run's series
    #[arg(long, global = true, value_name = "SECS")]
    pub report_interval: Option<f64>,
}

/// A scenario's defaults for the options left out.
#[derive(Clone, Debug)]
pub struct Defaults {
    pub duration: Duration,
    pub warmup: Duration,
    pub threads: Vec<usize>,
    pub batches: Vec<SweepBatch>,
    pub huge_pages: Toggle,
    /// `--evictor` when not given.
    pub evictor: EvictorChoice,
    /// The pool under `--quick` when neither `--pool-mib` nor `--pool-pages` is given.
    pub quick_pool_mib: usize,
    /// `--threads` under `--quick` when not given ([`QUICK_THREADS`] unless
    /// the scenario has its own).
    pub quick_threads: Vec<usize>,
}

/// `--quick`'s thread counts when `--threads` is not given.
pub const QUICK_THREADS: [usize; 2] = [1, 2];

/// PostgreSQL's default `shared_buffers`.
pub const DEFAULT_POOL_MIB: usize = 128;
/// `--quick`: small enough to fill in a fraction of a second.
pub const QUICK_POOL_MIB: usize = 16;
pub const DEFAULT_WARMUP: Duration = Duration::from_secs(2);
pub const QUICK_WARMUP: Duration = Duration::from_millis(500);
pub const QUICK_DURATION: Duration = Duration::from_secs(1);
/// The sweep batches measured on PostgreSQL (bench/SCENARIOS.md, `sweep`):
/// stock, and the two batched sizes.
pub const DEFAULT_BATCHES: [SweepBatch; 3] = [
    SweepBatch::Fixed(1),
    SweepBatch::Fixed(16),
    SweepBatch::Fixed(64),
];

/// `--pin-threads`, set by [`CommonArgs::resolve`]: process-wide, since every
/// scenario's workers ask for it the same way ([`pin_worker`]).
static PIN_THREADS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// With `--pin-threads`, pin the calling worker (number `i`) to CPU
/// `i mod cores` (`sched_setaffinity`); otherwise nothing. A refused pin is
/// reported on stderr and the worker runs unpinned.
pub fn pin_worker(i: usize) {
    if !PIN_THREADS.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    if let Err(e) = bufmgr::topology::pin_current_thread(i % cores()) {
        eprintln!("--pin-threads: worker {i}: {e}; running unpinned");
    }
}

/// Cores this process may use.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Everything a scenario run needs, resolved from the options and defaults.
/// Fields are public so tests can build one directly.
#[derive(Clone, Debug)]
pub struct Settings {
    pub pool_buffers: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub threads: Vec<usize>,
    pub evictors: Vec<Evictor>,
    pub batches: Vec<SweepBatch>,
    pub partitions: Vec<usize>,
    pub rings: Vec<bool>,
    pub huge_pages: Vec<bool>,
    /// `--io`: the storage backend of every run.
    pub io: IoMode,
    /// `--direct`: relation files opened with `O_DIRECT`.
    pub direct_io: bool,
    /// `--mapped-reads`: single pages read from a mapping of their file.
    pub mapped_reads: bool,
    /// `--optimistic`: pools read B-tree internal pages optimistically.
    pub optimistic: bool,
    pub data_dir: PathBuf,
    pub json: Option<PathBuf>,
    pub progress: bool,
    /// `--quick` was given (scenarios with their own scale shrink it).
    pub quick: bool,
    /// `--trace FILE`: record the measured runs (see [`Settings::trace_for`]).
    pub trace: Option<PathBuf>,
    /// `--seed`, `--mrc` and `--report-interval`.
    pub measures: Measures,
}

/// What a run records beside its figures: the workload's seed, the live
/// miss-ratio curve, the interval series.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measures {
    /// `--seed N`: the seed of the generated workload (`None`: each
    /// scenario's own fixed seed).
    pub seed: Option<u64>,
    /// `--mrc`: every measured pool keeps a miss-ratio curve
    /// ([`mrc_config`]).
    pub mrc: bool,
    /// `--report-interval SECS`: a line (and a JSON entry) per interval.
    pub report_interval: Option<Duration>,
}

/// The sampling of the curve `--mrc` keeps for a pool of `pool_pages`:
/// about 2,048 sampled pages per pool size (one page in `pool_pages / 2048`,
/// every page for pools up to 16 MiB), so that the smallest size the curve
/// answers for (0.25x) spans some 500 sampled pages (the curve's error
/// grows as that count falls: `bufmgr::mrc`), and room for 64 Ki sampled
/// pages (about 5 MiB) before the rate is lowered.
pub fn mrc_config(pool_pages: usize) -> bufmgr::MrcConfig {
    bufmgr::MrcConfig {
        rate_inverse: u32::try_from(pool_pages / 2048).unwrap_or(u32::MAX).max(1),
        max_keys: 1 << 16,
    }
}

fn secs(what: &str, s: f64) -> Result<Duration> {
    if s.is_finite() && s > 0.0 {
        Ok(Duration::from_secs_f64(s))
    } else {
        Err(BenchError::Config(format!(
            "--{what} must be a positive number of seconds, not {s}"
        )))
    }
}

/// `--report-interval SECS`: positive, and no shorter than
/// [`crate::harness::LIVE_FLUSH`], how often the workers hand their
/// latencies to the reporter: a shorter interval could not have a p99 of
/// its own, and one of nanoseconds would print lines as fast as the
/// reporter can loop.
fn report_interval(s: f64) -> Result<Duration> {
    let d = secs("report-interval", s)?;
    let min = crate::harness::LIVE_FLUSH;
    if d < min {
        return Err(BenchError::Config(format!(
            "--report-interval {s}: at least {} s (the workers hand their latencies to the \
             reporter every {} s)",
            min.as_secs_f64(),
            min.as_secs_f64()
        )));
    }
    Ok(d)
}

fn non_empty<T>(what: &str, v: Vec<T>) -> Result<Vec<T>> {
    if v.is_empty() {
        Err(BenchError::Config(format!(
            "--{what} needs at least one value"
        )))
    } else {
        Ok(v)
    }
}

impl CommonArgs {
    /// Fill in what the command line left out from `d` (and `--quick`).
    pub fn resolve(&self, d: &Defaults) -> Result<Settings> {
        PIN_THREADS.store(self.pin_threads, std::sync::atomic::Ordering::Relaxed);
        let pool_buffers = match (self.pool_pages, self.pool_mib) {
            (Some(p), _) => p,
            (None, Some(m)) => m * 1024 * 1024 / PAGE_SIZE,
            (None, None) if self.quick => d.quick_pool_mib * 1024 * 1024 / PAGE_SIZE,
            (None, None) => DEFAULT_POOL_MIB * 1024 * 1024 / PAGE_SIZE,
        };
        let duration = match self.duration {
            Some(s) => secs("duration", s)?,
            None if self.quick => QUICK_DURATION,
            None => d.duration,
        };
        let warmup = match self.warmup {
            Some(s) => secs("warmup", s)?,
            None if self.quick => QUICK_WARMUP,
            None => d.warmup,
        };
        let threads = match &self.threads {
            Some(t) => t.clone(),
            None if self.quick => d.quick_threads.clone(),
            None => d.threads.clone(),
        };
        if threads.contains(&0) {
            return Err(BenchError::Config("--threads must be at least 1".into()));
        }
        let partitions = self.partitions.clone().unwrap_or_else(|| vec![1]);
        if partitions.contains(&0) {
            return Err(BenchError::Config("--partitions must be at least 1".into()));
        }
        let optimistic = match self.optimistic {
            None | Some(Toggle::On) => true,
            Some(Toggle::Off) => false,
            Some(Toggle::Both) => {
                return Err(BenchError::Config(
                    "--optimistic takes on or off, not both (run twice to compare)".into(),
                ));
            }
        };
        Ok(Settings {
            pool_buffers,
            duration,
            warmup,
            threads: non_empty("threads", threads)?,
            evictors: self.evictor.unwrap_or(d.evictor).evictors(),
            batches: non_empty(
                "batch",
                self.batch.clone().unwrap_or_else(|| d.batches.clone()),
            )?,
            partitions: non_empty("partitions", partitions)?,
            rings: self.ring.unwrap_or(Toggle::On).values(),
            huge_pages: self.huge_pages.unwrap_or(d.huge_pages).values(),
            io: self.io.unwrap_or_default(),
            direct_io: self.direct,
            mapped_reads: self.mapped_reads,
            optimistic,
            data_dir: self.data_dir.clone(),
            json: self.json.clone(),
            // `--watch` draws the screen: bars would scribble over it.
            progress: !self.no_progress && !self.watch,
            quick: self.quick,
            trace: self.trace.clone(),
            measures: Measures {
                seed: self.seed,
                mrc: self.mrc,
                report_interval: self.report_interval.map(report_interval).transpose()?,
            },
        })
    }
}

/// Run the worker `f` as trace thread `id` ([`bufmgr::trace::set_thread_id`]),
/// then write its buffered trace records, so they are in the file when the
/// run ends (a no-op without `--trace`).
pub fn traced<T>(db: &engine::Database, id: u32, f: impl FnOnce() -> Result<T>) -> Result<T> {
    traced_pool(db.pool(), id, f)
}

/// [`traced`] for a scenario that runs a [`bufmgr::BufferPool`] directly.
pub fn traced_pool<T>(
    pool: &bufmgr::BufferPool,
    id: u32,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    as_trace_thread(id, || {
        let r = f();
        pool.flush_trace()?;
        r
    })
}

/// Run `f` as trace thread `id` in the pools it opens or first uses, then
/// make the thread unnamed again ([`bufmgr::trace::clear_thread_id`]): for
/// a scenario whose one client is the calling thread, around the opening of
/// its pool and the measured run.
pub fn as_trace_thread<T>(id: u32, f: impl FnOnce() -> T) -> T {
    bufmgr::trace::set_thread_id(id);
    let r = f();
    bufmgr::trace::clear_thread_id();
    r
}

/// One trace file a measured run wrote under `--trace`, with what its pool
/// counted over its whole life (from open to the moment the run was noted,
/// [`note_trace`]): the file holds exactly `accesses` access records and
/// `evictions` eviction records once the pool is closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceFile {
    pub path: PathBuf,
    pub accesses: u64,
    pub evictions: u64,
}

/// The trace files of measured runs, each with the `--trace FILE` it was
/// named from: [`take_traces`] hands a scenario the ones of its own FILE
/// (tests run scenarios side by side in one process, each with its own FILE).
static TRACES_WRITTEN: std::sync::Mutex<Vec<(PathBuf, TraceFile)>> =
    std::sync::Mutex::new(Vec::new());

/// After a measured run under `--trace` (`path` is its
/// [`Settings::trace_for`]; `None`: nothing recorded, nothing done): stop
/// the recording ([`bufmgr::BufferPool::stop_trace`], which writes the
/// calling thread's batch) and note the file with the pool's counts. Call
/// it when the run's workers are done (and have written their batches,
/// [`traced`]), before the data check a scenario runs on the same pool:
/// the check stays out of the trace. The file is complete once the pool is
/// closed (the background threads' last batches are written then).
pub fn note_trace(
    settings: &Settings,
    path: Option<PathBuf>,
    pool: &bufmgr::BufferPool,
) -> Result<()> {
    let (Some(base), Some(path)) = (&settings.trace, path) else {
        return Ok(());
    };
    pool.stop_trace()?;
    let t = pool.stats().totals();
    let mut written = TRACES_WRITTEN.lock().unwrap_or_else(|p| p.into_inner());
    if written.iter().any(|(b, f)| b == base && f.path == path) {
        // A scenario whose cells trace_for cannot tell apart: a bug, but
        // one that must not pass as a whole trace.
        return Err(BenchError::Config(format!(
            "two measured runs wrote the trace file {}: the later one replaced the \
             earlier (the scenario must give trace_for a part that tells them apart)",
            path.display()
        )));
    }
    written.push((
        base.clone(),
        TraceFile {
            path,
            accesses: t.accesses,
            evictions: t.evictions,
        },
    ));
    Ok(())
}

/// The trace files noted ([`note_trace`]) under `settings`' `--trace FILE`
/// since the last call, in the order they were written; they are
/// forgotten.
pub fn take_traces(settings: &Settings) -> Vec<TraceFile> {
    let Some(base) = &settings.trace else {
        return Vec::new();
    };
    let mut all = TRACES_WRITTEN.lock().unwrap_or_else(|p| p.into_inner());
    let (mine, rest): (Vec<_>, Vec<_>) = all.drain(..).partition(|(b, _)| b == base);
    *all = rest;
    mine.into_iter().map(|(_, f)| f).collect()
}

/// Print the trace files a scenario wrote (`--trace`), one line each.
pub fn print_traces(scenario: &str, files: &[TraceFile]) {
    if files.is_empty() {
        return;
    }
    println!("{scenario}: {} trace file(s) written:", files.len());
    for f in files {
        println!(
            "  {} ({} accesses, {} evictions)",
            f.path.display(),
            f.accesses,
            f.evictions
        );
    }
}

/// One pool configuration of the matrix.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub evictor: Evictor,
    pub batch: SweepBatch,
    pub partitions: usize,
    pub threads: usize,
    pub huge_pages: bool,
    pub ring: bool,
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} batch={} partitions={} threads={} huge={} ring={}",
            self.evictor,
            self.batch,
            self.partitions,
            self.threads,
            on_off(self.huge_pages),
            on_off(self.ring)
        )
    }
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// FILE's name without its extension (`t.trace` -> `t`).
fn trace_stem(path: &Path) -> String {
    path.file_stem()
        .map_or("trace".into(), |s| s.to_string_lossy().into_owned())
}

/// `path` with its name replaced by `name` plus `path`'s extension.
fn with_trace_name(path: &Path, mut name: String) -> PathBuf {
    if let Some(ext) = path.extension() {
        name.push('.');
        name.push_str(&ext.to_string_lossy());
    }
    path.with_file_name(name)
}

impl Settings {
    /// Every combination of the option lists, evictor innermost.
    pub fn configs(&self) -> Vec<Config> {
        let mut out = Vec::new();
        for &huge_pages in &self.huge_pages {
            for &ring in &self.rings {
                for &partitions in &self.partitions {
                    for &threads in &self.threads {
                        for &batch in &self.batches {
                            for &evictor in &self.evictors {
                                out.push(Config {
                                    evictor,
                                    batch,
                                    partitions,
                                    threads,
                                    huge_pages,
                                    ring,
                                });
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The engine `Options` of one matrix cell: pool size, evictor, sweep
    /// batch, partitions (exactly `c.partitions`), rings and huge pages, and
    /// the pool's memory given at open, as the pool scenarios' own pools are
    /// (no first-touch page fault inside a window, and every buffer's node
    /// known to the NUMA figures); the rest at the engine's defaults. A
    /// cached database must be opened with the checksum setting it was
    /// created with: set it on the result.
    pub fn engine_options(&self, c: &Config) -> engine::Options {
        engine::Options::new()
            .pool_buffers(self.pool_buffers)
            .prefault_pool(true)
            .evictor(c.evictor)
            .sweep_batch(c.batch)
            .partitions(engine::Partitions::Count(c.partitions))
            .rings(c.ring)
            .huge_pages(c.huge_pages)
            .io(self.io)
            .direct_io(self.direct_io)
            .mapped_reads(self.mapped_reads)
            .optimistic_reads(self.optimistic)
            .miss_ratio_curve(self.measures.mrc.then(|| mrc_config(self.pool_buffers)))
    }

    /// The workload's seed: `--seed` if given, else the scenario's own.
    pub fn seed(&self, scenario_default: u64) -> u64 {
        self.measures.seed.unwrap_or(scenario_default)
    }

    /// The trace file of one measured run of `c` under `--trace FILE`.
    ///
    /// `cell` names what tells this run apart from the scenario's other runs
    /// of `c`: a value of the scenario's own options (`"commit-async"`,
    /// `"scan-2pl"`) and, where a configuration runs several times, the run
    /// (`"run3"`). A scenario passes a part only when its dimension has more
    /// than one value, so the names stay short. FILE itself when the
    /// matrix has one configuration and `cell` is empty; else FILE's name
    /// with the configuration and the parts in it (`t.trace` ->
    /// `t-clock-b1-p1-t2-ring-on-huge-off-run3.trace`). Every measured run
    /// of one scenario gets a name of its own.
    pub fn trace_for(&self, c: &Config, cell: &[&str]) -> Option<PathBuf> {
        let path = self.trace.as_ref()?;
        if self.configs().len() <= 1 && cell.is_empty() {
            return Some(path.clone());
        }
        let mut name = format!(
            "{}-{}-b{}-p{}-t{}-ring-{}-huge-{}",
            trace_stem(path),
            c.evictor,
            c.batch,
            c.partitions,
            c.threads,
            on_off(c.ring),
            on_off(c.huge_pages)
        );
        for part in cell {
            name.push('-');
            name.push_str(part);
        }
        Some(with_trace_name(path, name))
    }

    /// The trace file of a measured run that is not a cell of the matrix
    /// (`compare-sqlite`'s engine databases): FILE's name with `parts`
    /// (`t.trace` -> `t-zipf.trace`).
    pub fn trace_named(&self, parts: &[&str]) -> Option<PathBuf> {
        let path = self.trace.as_ref()?;
        let mut name = trace_stem(path);
        for part in parts {
            name.push('-');
            name.push_str(part);
        }
        Some(with_trace_name(path, name))
    }

    /// These settings with `--trace FILE` turned into FILE with `part` in
    /// its name (`t.trace` -> `t-sweep.trace`): what `bench all` and the
    /// default run give each scenario, so that two scenarios never write
    /// the same file.
    pub fn trace_with_part(mut self, part: &str) -> Settings {
        if let Some(path) = &self.trace {
            let name = format!("{}-{part}", trace_stem(path));
            self.trace = Some(with_trace_name(path, name));
        }
        self
    }

    /// The pool configuration of one matrix cell (no background writer,
    /// checksums on: the defaults).
    pub fn pool_config(&self, c: &Config) -> bufmgr::PoolConfig {
        bufmgr::PoolConfig::new(self.pool_buffers)
            .evictor(c.evictor)
            .batch(c.batch)
            .partitions(c.partitions)
            .huge_pages(c.huge_pages)
            .rings(c.ring)
            .io(self.io)
            .direct_io(self.direct_io)
            .mapped_reads(self.mapped_reads)
            .optimistic_reads(self.optimistic)
            .mrc(self.measures.mrc.then(|| mrc_config(self.pool_buffers)))
    }

    /// The storage backend `--io`, `--direct` and `--mapped-reads` select,
    /// under `dir`, for pools of [`pool_config`](Self::pool_config) (which
    /// keeps the pool's checksum settings at their defaults).
    pub fn open_storage(&self, dir: &Path) -> Result<Arc<dyn StorageBackend>> {
        let files = bufmgr::PoolConfig::new(self.pool_buffers)
            .direct_io(self.direct_io)
            .mapped_reads(self.mapped_reads)
            .file_options();
        Ok(bufmgr::open_storage(dir, self.io, files)?)
    }

    /// The backend `--io` resolves to on this machine (`auto` probes).
    /// With `--mapped-reads`, `auto` is sync (`bufmgr::open_storage`).
    pub fn io_backend(&self) -> IoMode {
        if self.mapped_reads && self.io == IoMode::Auto {
            return IoMode::Sync;
        }
        bufmgr::io::choose_io(self.io, &self.data_dir, bufmgr::io::probe_io_uring)
            .map_or(self.io, |(m, _)| m)
    }

    /// Records `--io` (asked for and resolved), `--direct` and
    /// `--mapped-reads` in a report's JSON: at the top and in every row, so
    /// that rows of runs on different backends can be told apart.
    pub fn tag_io(&self, json: &mut serde_json::Value) {
        let fields = [
            ("io", serde_json::Value::from(self.io.to_string())),
            ("io_backend", self.io_backend().to_string().into()),
            ("direct_io", self.direct_io.into()),
            ("mapped_reads", self.mapped_reads.into()),
            ("optimistic_reads", self.optimistic.into()),
        ];
        let mut tag = |v: &mut serde_json::Value| {
            if let Some(o) = v.as_object_mut() {
                for (k, val) in &fields {
                    o.entry(*k).or_insert_with(|| val.clone());
                }
            }
        };
        if let Some(rows) = json.get_mut("rows").and_then(|r| r.as_array_mut()) {
            rows.iter_mut().for_each(&mut tag);
        }
        tag(json);
    }
}

/// A sweep batch as the report writes it: the number, or `"auto"`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BatchField {
    Fixed(u32),
    Named(String),
}

impl From<SweepBatch> for BatchField {
    fn from(b: SweepBatch) -> Self {
        match b {
            SweepBatch::Fixed(n) => BatchField::Fixed(n),
            SweepBatch::Auto => BatchField::Named("auto".into()),
        }
    }
}

impl fmt::Display for BatchField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchField::Fixed(n) => write!(f, "{n}"),
            BatchField::Named(s) => f.write_str(s),
        }
    }
}

/// A pool's live miss-ratio curve in a report (`--mrc`): the hit ratio an
/// LRU cache of 0.25x..4x the pool would have had on the pool's accesses
/// since it opened (warm-up included), from `bufmgr::mrc`'s sample.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    pub pool_pages: usize,
    pub points: Vec<CurvePoint>,
    pub sampled_accesses: u64,
    pub sampled_pages: usize,
    /// The sampling rate when the curve was read (1 = every page).
    pub sample_rate: f64,
    /// The pool's own hit ratio over the same span (since it opened), to
    /// set beside the 1x point: the evictor against LRU on the same
    /// accesses (`null`: no access).
    pub pool_hit_ratio: Option<f64>,
    /// With `--trace` too (scenarios that replay their trace): the exact LRU
    /// hit ratios at the same sizes on the recorded accesses
    /// ([`exact_lru`]), and the live curve's mean absolute error against
    /// them in percentage points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_lru: Option<Vec<CurvePoint>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_points: Option<f64>,
}

/// One size of a [`Curve`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// The size as a multiple of the pool (0.25, 0.5, 1, 2, 4).
    pub multiple: f64,
    pub pages: usize,
    /// 0 ..= 1.
    pub hit_ratio: f64,
}

impl Curve {
    /// `c` with the pool's hit ratio over its life, `stats`.
    pub fn new(c: &bufmgr::MissRatioCurve, stats: &bufmgr::PoolStats) -> Curve {
        let t = stats.totals();
        Curve {
            pool_pages: c.pool_pages,
            points: c
                .points
                .iter()
                .map(|p| CurvePoint {
                    multiple: p.multiple,
                    pages: p.pages,
                    hit_ratio: p.hit_ratio,
                })
                .collect(),
            sampled_accesses: c.sampled_accesses,
            sampled_pages: c.sampled_pages,
            sample_rate: c.sample_rate,
            pool_hit_ratio: (t.accesses > 0).then(|| t.hits as f64 / t.accesses as f64),
            exact_lru: None,
            error_points: None,
        }
    }

    /// Sets the exact LRU curve replayed from the run's trace and the live
    /// curve's error against it.
    pub fn with_exact(mut self, exact: Vec<CurvePoint>) -> Curve {
        self.error_points = curve_error(&self, &exact);
        self.exact_lru = Some(exact);
        self
    }

    /// The hit ratio at `multiple` of the pool, if the curve has that size.
    pub fn at(&self, multiple: f64) -> Option<f64> {
        self.points
            .iter()
            .find(|p| p.multiple == multiple)
            .map(|p| p.hit_ratio)
    }
}

/// The curve of `db`'s pool, when it keeps one (`--mrc`).
pub fn curve_of(db: &engine::Database) -> Option<Curve> {
    let c = db.miss_ratio_curve()?;
    Some(Curve::new(&c, &db.pool_stats()))
}

/// The curve of a pool run directly, when it keeps one (`--mrc`).
pub fn curve_of_pool(pool: &bufmgr::BufferPool) -> Option<Curve> {
    let c = pool.miss_ratio_curve()?;
    Some(Curve::new(&c, &pool.stats()))
}

/// The exact LRU hit ratios at `curve`'s sizes on the accesses recorded in
/// `trace` (a `--trace` file of the same run, complete once its pool is
/// closed), replayed in time order through a textbook LRU cache
/// (`lab::replay`): the reference the live curve is judged against.
pub fn exact_lru(trace: &Path, curve: &Curve) -> Result<Vec<CurvePoint>> {
    let t = bufmgr::trace::Trace::read(trace)?;
    let refs: Vec<lab::replay::Ref> = t.accesses_by_time().into_iter().map(Into::into).collect();
    if refs.is_empty() {
        return Err(BenchError::Data(format!(
            "{}: no access recorded to replay",
            trace.display()
        )));
    }
    Ok(curve
        .points
        .iter()
        .map(|p| {
            let hits = lab::replay::replay(
                lab::replay::Policy::Lru,
                &refs,
                p.pages,
                &Default::default(),
            );
            CurvePoint {
                multiple: p.multiple,
                pages: p.pages,
                hit_ratio: hits.iter().filter(|h| **h).count() as f64 / hits.len() as f64,
            }
        })
        .collect())
}

/// The mean absolute difference of two curves' hit ratios over their
/// common sizes, in percentage points (`None`: no size in common).
pub fn curve_error(live: &Curve, exact: &[CurvePoint]) -> Option<f64> {
    let diffs: Vec<f64> = exact
        .iter()
        .filter_map(|e| live.at(e.multiple).map(|l| (l - e.hit_ratio).abs() * 100.0))
        .collect();
    (!diffs.is_empty()).then(|| diffs.iter().sum::<f64>() / diffs.len() as f64)
}

/// The table of miss-ratio curves printed under a scenario's table: one
/// line per row that has a curve (`--mrc`), the hit ratio at each size and
/// the pool's own over the same span; empty when no row has one.
pub fn curve_table(rows: &[(String, Option<&Curve>)]) -> String {
    let Some(first) = rows.iter().find_map(|r| r.1) else {
        return String::new();
    };
    let mut header: Vec<String> = vec!["row".into()];
    header.extend(
        first
            .points
            .iter()
            .map(|p| format!("{}x ({} p)", p.multiple, p.pages)),
    );
    header.extend(["pool hit%".into(), "sampled".into(), "rate".into()]);
    let mut t = Table {
        header,
        rows: Vec::new(),
    };
    for (label, curve) in rows {
        let Some(c) = curve else { continue };
        let mut row = vec![label.clone()];
        row.extend(
            c.points
                .iter()
                .map(|p| format!("{:.2}", 100.0 * p.hit_ratio)),
        );
        row.push(
            c.pool_hit_ratio
                .map_or("-".into(), |h| format!("{:.2}", 100.0 * h)),
        );
        row.push(format!(
            "{} acc / {} pg",
            c.sampled_accesses, c.sampled_pages
        ));
        row.push(if c.sample_rate > 0.0 {
            format!("1/{:.0}", 1.0 / c.sample_rate)
        } else {
            "-".into()
        });
        t.rows.push(row);
        if let Some(exact) = &c.exact_lru {
            let mut row = vec!["  exact LRU (trace replay)".to_string()];
            row.extend(exact.iter().map(|p| format!("{:.2}", 100.0 * p.hit_ratio)));
            row.push(String::new());
            row.push(
                c.error_points
                    .map_or("-".into(), |e| format!("MAE {e:.2} pt")),
            );
            row.push(String::new());
            t.rows.push(row);
        }
    }
    format!(
        "miss-ratio curve (--mrc): LRU hit% at each pool size on the pool's sampled accesses \
         since it opened (warm-up included); pool hit%: the pool's own over the same accesses\n{t}"
    )
}

/// An aligned text table: first column left-aligned, the rest right-aligned.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(row.len(), self.header.len());
        self.rows.push(row);
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (w, cell) in widths.iter_mut().zip(r) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |f: &mut fmt::Formatter<'_>, cells: &[String]| -> fmt::Result {
            for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
                if i == 0 {
                    write!(f, "{cell:<w$}")?;
                } else {
                    write!(f, "  {cell:>w$}")?;
                }
            }
            writeln!(f)
        };
        line(f, &self.header)?;
        let total = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
        writeln!(f, "{}", "-".repeat(total))?;
        for r in &self.rows {
            line(f, r)?;
        }
        Ok(())
    }
}

/// The width the lines of the default run's scenarios keep within (an
/// 80-100 column terminal); the scenarios' own wide tables are not wrapped.
pub const TERMINAL_WIDTH: usize = 100;

/// `text` broken into lines of at most `width` columns (words longer than
/// that stay whole), the first starting with `first`, the rest with `rest`.
pub fn wrap(text: &str, width: usize, first: &str, rest: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        let need = line.chars().count() + usize::from(!empty) + word.chars().count();
        if !empty && need > width {
            out += line.trim_end();
            out.push('\n');
            line = rest.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line += word;
        empty = false;
    }
    out += line.trim_end();
    out.push('\n');
    out
}

/// Print `text` on standard output wrapped to [`TERMINAL_WIDTH`], the
/// lines after the first indented.
pub fn say(text: &str) {
    print!("{}", wrap(text, TERMINAL_WIDTH, "", "    "));
}

/// [`say`] on standard error (progress lines).
pub fn tell(text: &str) {
    eprint!("{}", wrap(text, TERMINAL_WIDTH, "", "    "));
}

/// How often residency is sampled: every second, or window/10 when the
/// window is under 10 s (at least every 100 ms).
pub fn sample_interval(window: Duration) -> Duration {
    if window >= Duration::from_secs(10) {
        Duration::from_secs(1)
    } else {
        (window / 10).max(Duration::from_millis(100))
    }
}

/// A rate for a table: 1.23M, 45.6k, 789.
pub fn fmt_rate(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// A ratio for a table (`-` when undefined).
pub fn fmt_ratio(x: Option<f64>) -> String {
    match x {
        Some(r) if r.is_finite() => format!("{r:.2}x"),
        _ => "-".into(),
    }
}

/// A progress bar on stderr; hidden when `enabled` is false (indicatif also
/// hides it when stderr is not a terminal).
pub fn progress_bar(len: u64, enabled: bool, message: &str) -> ProgressBar {
    if !enabled {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template("{msg:50} [{bar:30}] {percent:>3}% {elapsed:>4}")
        .expect("the template is valid")
        .progress_chars("=> ");
    ProgressBar::new(len)
        .with_style(style)
        .with_message(message.to_string())
}

/// Where CPU time went during a window: this process's and the whole
/// machine's, read from `/proc` (Linux; `None` elsewhere). On a shared
/// machine a row measured while other processes took a core is not
/// comparable with one measured on an idle machine; the report shows both so
/// a reader can tell.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct CpuSample {
    /// utime + stime of this process, in clock ticks.
    process_ticks: u64,
    /// Busy time of all CPUs (everything but idle and iowait), in clock ticks.
    machine_busy_ticks: u64,
}

/// `/proc` reports times in USER_HZ, which Linux fixes at 100 on every
/// architecture it exports to user space.
const USER_HZ: f64 = 100.0;

impl CpuSample {
    pub fn now() -> Option<CpuSample> {
        let stat = fs::read_to_string("/proc/self/stat").ok()?;
        // The command name (field 2) may hold spaces; fields after its ')'.
        let after = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = after.split_whitespace().collect();
        // Fields 14 and 15 of the file (utime, stime) are 11 and 12 after ')'.
        let process_ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
        let machine = fs::read_to_string("/proc/stat").ok()?;
        let cpu: Vec<u64> = machine
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        // user nice system idle iowait irq softirq steal
        let busy = cpu.iter().sum::<u64>() - cpu.get(3)? - cpu.get(4)?;
        Some(CpuSample {
            process_ticks,
            machine_busy_ticks: busy,
        })
    }

    /// Cores used by this process and by everything else between `earlier`
    /// and `self`, over `secs` seconds.
    pub fn cores_since(&self, earlier: &CpuSample, secs: f64) -> (f64, f64) {
        let ours = self.process_ticks.saturating_sub(earlier.process_ticks) as f64 / USER_HZ;
        let all = self
            .machine_busy_ticks
            .saturating_sub(earlier.machine_busy_ticks) as f64
            / USER_HZ;
        (ours / secs, (all - ours).max(0.0) / secs)
    }
}

/// A finished scenario: what `finish` prints, writes and judges.
pub trait Report: fmt::Debug {
    /// The scenario's name (`"sweep"`).
    fn scenario(&self) -> &str;
    /// The side-by-side table and any summary lines.
    fn render(&self) -> String;
    /// `{"scenario": name, "rows": [...], ...}`.
    fn to_json(&self) -> serde_json::Value;
    /// Data errors found during the run or by the end-of-run check.
    fn failures(&self) -> Vec<String>;
    /// Plots of the run (`--svg DIR`): none unless the scenario draws some.
    fn svg_plots(&self) -> Vec<SvgPlot> {
        Vec::new()
    }
}

/// One plot: its file name in the `--svg` directory and the SVG text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SvgPlot {
    pub file: String,
    pub svg: String,
}

/// Write `plots` into `dir` (created if needed); returns the paths written.
pub fn write_svgs(dir: &Path, plots: &[SvgPlot]) -> Result<Vec<PathBuf>> {
    fs::create_dir_all(dir).map_err(|source| BenchError::Io {
        op: "create",
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for p in plots {
        let path = dir.join(&p.file);
        fs::write(&path, &p.svg).map_err(|source| BenchError::Io {
            op: "write",
            path: path.clone(),
            source,
        })?;
        out.push(path);
    }
    Ok(out)
}

/// Write a JSON value to `path`, pretty-printed, with the run's metadata
/// ([`crate::meta::metadata`]) as its first field `meta` when the value
/// is an object.
pub fn write_json(path: &Path, value: &serde_json::Value) -> Result<()> {
    let value = with_metadata(value);
    let text = serde_json::to_string_pretty(&value).map_err(|source| BenchError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    fs::write(path, text + "\n").map_err(|source| BenchError::Io {
        op: "write",
        path: path.to_path_buf(),
        source,
    })
}

/// `value` with `"meta"` first (an object keeps its other fields in order;
/// anything else is written as it is).
pub fn with_metadata(value: &serde_json::Value) -> serde_json::Value {
    let serde_json::Value::Object(fields) = value else {
        return value.clone();
    };
    let mut out = serde_json::Map::new();
    out.insert("meta".into(), crate::meta::metadata());
    for (k, v) in fields {
        if k != "meta" {
            out.insert(k.clone(), v.clone());
        }
    }
    serde_json::Value::Object(out)
}

/// Print a report, write its JSON if asked, and fail if its data was wrong.
pub fn finish<R: Report>(report: R, settings: &Settings) -> Result<R> {
    print!("{}", report.render());
    if let Some(path) = &settings.json {
        let mut json = report.to_json();
        settings.tag_io(&mut json);
        write_json(path, &json)?;
        println!("wrote {}", path.display());
    }
    fail_on_data_errors(report)
}

/// The report back if its data checked out, else the error naming what was
/// wrong.
pub fn fail_on_data_errors<R: Report>(report: R) -> Result<R> {
    let failures = report.failures();
    if failures.is_empty() {
        Ok(report)
    } else {
        Err(BenchError::Data(format!(
            "{}: {}",
            report.scenario(),
            failures.join("; ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_text_keeps_within_the_width_and_indents_the_rest() {
        let text = "a verdict line that goes on and on about evictors and their misses \
                    and their hot sets well past any terminal's edge, word after word";
        let out = wrap(text, 30, "- ", "  ");
        for l in out.lines() {
            assert!(l.chars().count() <= 30, "{l:?}");
        }
        assert!(out.starts_with("- a verdict"));
        assert!(out.lines().skip(1).all(|l| l.starts_with("  ")));
        let words: Vec<&str> = out.split_whitespace().filter(|w| *w != "-").collect();
        assert_eq!(words, text.split_whitespace().collect::<Vec<_>>());
    }

    fn defaults() -> Defaults {
        Defaults {
            duration: Duration::from_secs(5),
            warmup: DEFAULT_WARMUP,
            threads: vec![1, 2, 4],
            batches: DEFAULT_BATCHES.to_vec(),
            huge_pages: Toggle::Off,
            evictor: EvictorChoice::Both,
            quick_pool_mib: QUICK_POOL_MIB,
            quick_threads: QUICK_THREADS.to_vec(),
        }
    }

    // A report interval of 0, NaN or nanoseconds is refused by name; one
    // of the workers' hand-over period or more is kept as given.
    #[test]
    fn a_report_interval_below_the_latency_hand_over_is_refused() {
        let with = |s: f64| {
            CommonArgs {
                report_interval: Some(s),
                ..Default::default()
            }
            .resolve(&defaults())
        };
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-9, 0.001] {
            let e = with(bad).unwrap_err().to_string();
            assert!(e.contains("--report-interval"), "{bad}: {e}");
        }
        let ok = with(crate::harness::LIVE_FLUSH.as_secs_f64()).unwrap();
        assert_eq!(
            ok.measures.report_interval,
            Some(crate::harness::LIVE_FLUSH)
        );
        assert_eq!(
            with(1.5).unwrap().measures.report_interval,
            Some(Duration::from_millis(1500))
        );
    }

    /// `--quick --threads 1,2` is what the user asked for, even where the
    /// scenario's own `--quick` default differs (readonly, oltp: cores).
    #[test]
    fn quick_threads_apply_only_when_threads_are_not_given() {
        let d = Defaults {
            quick_threads: vec![7],
            ..defaults()
        };
        let quick = CommonArgs {
            quick: true,
            ..Default::default()
        };
        assert_eq!(quick.resolve(&d).unwrap().threads, [7]);
        let given = CommonArgs {
            quick: true,
            threads: Some(vec![1, 2]),
            ..Default::default()
        };
        assert_eq!(given.resolve(&d).unwrap().threads, [1, 2]);
        let oltp = crate::scenarios::oltp::defaults();
        assert_eq!(quick.resolve(&oltp).unwrap().threads, [cores()]);
        assert_eq!(given.resolve(&oltp).unwrap().threads, [1, 2]);
        // And the matrix is built from them.
        let ro = given
            .resolve(&crate::scenarios::readonly::defaults())
            .unwrap();
        let mut threads: Vec<usize> = crate::scenarios::readonly::configs(&ro)
            .iter()
            .map(|c| c.threads)
            .collect();
        threads.dedup();
        assert_eq!(threads, [1, 2]);
    }

    #[test]
    fn quick_shrinks_what_was_not_given() {
        let args = CommonArgs {
            quick: true,
            pool_mib: Some(32),
            ..Default::default()
        };
        let s = args.resolve(&defaults()).unwrap();
        assert_eq!(s.pool_buffers, 4096, "--pool-mib wins over --quick");
        assert_eq!(s.duration, QUICK_DURATION);
        assert_eq!(s.threads, [1, 2]);
        assert_eq!(s.evictors, [Evictor::Clock, Evictor::HotCool]);
    }

    #[test]
    fn the_matrix_has_every_combination_with_evictor_innermost() {
        let s = CommonArgs::default().resolve(&defaults()).unwrap();
        let c = s.configs();
        assert_eq!(c.len(), 2 * 3 * 3);
        assert_eq!(c[0].evictor, Evictor::Clock);
        assert_eq!(c[1].evictor, Evictor::HotCool);
        assert_eq!(c[0].batch, c[1].batch);
    }

    #[test]
    fn io_options_reach_the_settings_and_the_json_rows() {
        let s = CommonArgs::default().resolve(&defaults()).unwrap();
        assert_eq!((s.io, s.direct_io), (IoMode::Sync, false));
        let args = CommonArgs {
            io: Some(IoMode::Auto),
            direct: true,
            ..Default::default()
        };
        let s = args.resolve(&defaults()).unwrap();
        assert_eq!((s.io, s.direct_io), (IoMode::Auto, true));
        let o = s.engine_options(&s.configs()[0]);
        assert_eq!((o.io, o.direct_io), (IoMode::Auto, true));
        let mut json = serde_json::json!({"scenario": "x", "rows": [{"a": 1}, {"a": 2}]});
        s.tag_io(&mut json);
        for row in json["rows"].as_array().unwrap() {
            assert_eq!(row["io"], "auto");
            assert_eq!(row["direct_io"], true);
            assert!(["sync", "io_uring"].contains(&row["io_backend"].as_str().unwrap()));
        }
        assert_eq!(json["io"], "auto");
        let args = CommonArgs {
            io: Some(IoMode::Auto),
            mapped_reads: true,
            ..Default::default()
        };
        let s = args.resolve(&defaults()).unwrap();
        assert!(s.mapped_reads);
        assert!(s.engine_options(&s.configs()[0]).mapped_reads);
        assert!(s.pool_config(&s.configs()[0]).mapped_reads);
        assert_eq!(s.io_backend(), IoMode::Sync);
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(s.open_storage(dir.path()).unwrap().name(), "sync");
        let mut json = serde_json::json!({"scenario": "x", "rows": [{"a": 1}]});
        s.tag_io(&mut json);
        assert_eq!(json["rows"][0]["mapped_reads"], true);
        assert_eq!(json["rows"][0]["io_backend"], "sync");
    }

    #[test]
    fn the_optimistic_option_reaches_the_engine_the_pool_and_the_json_rows() {
        let s = CommonArgs::default().resolve(&defaults()).unwrap();
        assert!(s.optimistic, "on by default");
        let args = CommonArgs {
            optimistic: Some(Toggle::Off),
            ..Default::default()
        };
        let s = args.resolve(&defaults()).unwrap();
        assert!(!s.optimistic);
        assert!(!s.engine_options(&s.configs()[0]).optimistic_reads);
        assert!(!s.pool_config(&s.configs()[0]).optimistic_reads);
        let mut json = serde_json::json!({"scenario": "x", "rows": [{"a": 1}]});
        s.tag_io(&mut json);
        assert_eq!(json["rows"][0]["optimistic_reads"], false);
        let both = CommonArgs {
            optimistic: Some(Toggle::Both),
            ..Default::default()
        };
        let e = both.resolve(&defaults()).unwrap_err();
        assert!(e.to_string().contains("--optimistic"), "{e}");
    }

    #[test]
    fn bad_values_are_refused() {
        let args = CommonArgs {
            duration: Some(0.0),
            ..Default::default()
        };
        assert!(args.resolve(&defaults()).is_err());
        let args = CommonArgs {
            threads: Some(vec![0]),
            ..Default::default()
        };
        assert!(args.resolve(&defaults()).is_err());
    }

    #[test]
    fn trace_files_are_named_by_scenario_configuration_and_cell() {
        let args = CommonArgs {
            trace: Some(PathBuf::from("/d/t.trace")),
            threads: Some(vec![2]),
            batch: Some(vec![SweepBatch::Fixed(1)]),
            evictor: Some(EvictorChoice::Clock),
            ..Default::default()
        };
        let s = args.resolve(&defaults()).unwrap();
        let c = s.configs()[0];
        assert_eq!(s.configs().len(), 1);
        // One configuration, no parts: FILE itself.
        assert_eq!(s.trace_for(&c, &[]), Some(PathBuf::from("/d/t.trace")));
        assert_eq!(
            s.trace_for(&c, &["run3"]),
            Some(PathBuf::from(
                "/d/t-clock-b1-p1-t2-ring-on-huge-off-run3.trace"
            ))
        );
        let s = s.trace_with_part("index-residency");
        assert_eq!(
            s.trace_for(&c, &["scan-2pl", "run1"]),
            Some(PathBuf::from(
                "/d/t-index-residency-clock-b1-p1-t2-ring-on-huge-off-scan-2pl-run1.trace"
            ))
        );
        assert_eq!(
            s.trace_named(&["zipf"]),
            Some(PathBuf::from("/d/t-index-residency-zipf.trace"))
        );
        // Several configurations: each is named even without parts.
        let s = CommonArgs {
            evictor: Some(EvictorChoice::Both),
            ..args.clone()
        }
        .resolve(&defaults())
        .unwrap();
        let names: Vec<_> = s.configs().iter().map(|c| s.trace_for(c, &[])).collect();
        assert_eq!(
            names,
            [
                Some(PathBuf::from("/d/t-clock-b1-p1-t2-ring-on-huge-off.trace")),
                Some(PathBuf::from(
                    "/d/t-hotcool-b1-p1-t2-ring-on-huge-off.trace"
                ))
            ]
        );
        // Without --trace: nothing, whatever the parts.
        let s = CommonArgs::default().resolve(&defaults()).unwrap();
        assert_eq!(s.trace_for(&s.configs()[0], &["run1"]), None);
        assert_eq!(s.clone().trace_with_part("sweep").trace, None);
    }

    #[test]
    fn a_trace_file_noted_twice_is_an_error_and_taken_once() {
        let dir = tempfile::tempdir().unwrap();
        let s = CommonArgs {
            trace: Some(dir.path().join("t.trace")),
            pool_pages: Some(16),
            ..Default::default()
        }
        .resolve(&defaults())
        .unwrap();
        let c = s.configs()[0];
        let path = s.trace_for(&c, &[]);
        let pool = bufmgr::BufferPool::new(
            s.pool_config(&c).trace(path.clone()),
            s.open_storage(dir.path()).unwrap(),
        )
        .unwrap();
        note_trace(&s, path.clone(), &pool).unwrap();
        let e = note_trace(&s, path.clone(), &pool).unwrap_err().to_string();
        assert!(
            e.contains("two measured runs") && e.contains("t-clock"),
            "{e}"
        );
        let files = take_traces(&s);
        assert_eq!(files.len(), 1);
        assert_eq!(Some(files[0].path.clone()), path);
        assert!(take_traces(&s).is_empty(), "taken once");
        // Without --trace nothing is noted.
        let off = CommonArgs::default().resolve(&defaults()).unwrap();
        note_trace(&off, None, &pool).unwrap();
        assert!(take_traces(&off).is_empty());
    }

    #[test]
    fn table_columns_line_up() {
        let mut t = Table::new(&["a", "bb"]);
        t.push(vec!["xyz".into(), "1".into()]);
        let s = t.to_string();
        let lines: Vec<_> = s.lines().collect();
        assert_eq!(lines[0], "a    bb");
        assert_eq!(lines[2], "xyz   1");
    }
}
