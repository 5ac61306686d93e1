//! `sweep` and `ticks`: threads reading random pages of a relation larger
//! than the pool, so that the clock sweep runs continuously (bench/SCENARIOS.md).
//!
//! The two scenarios are one measurement with two access distributions:
//!
//! ```text
//!   sweep   relation 1, 1.7 x pool pages, uniform random blocks:
//!           ~40% of accesses miss, every miss evicts; the clock hand is the
//!           hot cache line, the sweep batch is what varies.
//!   ticks   relation 2, 1.5 x pool pages, zipfian (theta 0.99) ranks
//!           scrambled over the relation by a fixed permutation: hot pages
//!           are hit again and again, so the clock's usage counts climb to 5
//!           and the hand must pass them up to 5 times before it finds a
//!           victim; HOT/COOL demotes a page in one pass.
//! ```
//!
//! Per configuration of the matrix: a fresh pool (no background writer,
//! checksums on), T threads each looping `read_buffer` -> `lock_shared` ->
//! check the page's block number -> drop, a warm-up, then a measured window
//! between two `PoolStats` snapshots (stretched, up to 30 s, until it holds
//! at least 100 evictions, so a starved run reports a rate, not zero). Block numbers are drawn before the run
//! into one shared array (drawing a zipfian sample costs ~65 ns, as much as a
//! hit); each thread walks it from its own offset.
//!
//! The window's maximum ticks per victim is estimated: `PoolStats::since`
//! keeps the later snapshot's all-time maximum, so the report clamps it to
//! the range of the highest histogram bucket that filled during the window
//! (exact below 64 ticks).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bufmgr::stats::{TICK_BUCKETS, TicksHistogram, bucket_floor};
use bufmgr::{
    BlockNumber, BufferPool, Evictor, FileStorage, PoolStats, RelFork, RelId, StorageBackend,
};
use indicatif::ProgressBar;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Zipf};
use serde::{Deserialize, Serialize};

use super::raw_pread::{self, PreadBaseline};
use crate::check::DataCheck;
use crate::common::{
    self, BatchField, Config, CpuSample, Report, Settings, Table, fmt_rate, fmt_ratio, progress_bar,
};
use crate::data;
use crate::error::{BenchError, Result};
use crate::harness::{self, LiveLatency, Recorder, RowSeries, Tally};
use crate::latency::{self, Latencies};

/// How the threads pick blocks.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Access {
    /// Every block equally likely.
    Uniform,
    /// Zipfian ranks with exponent `theta`, scrambled over the relation.
    Zipf { theta: f64 },
}

impl Access {
    fn describe(self) -> String {
        match self {
            Access::Uniform => "uniform random".into(),
            Access::Zipf { theta } => format!("zipfian (theta {theta}) scrambled"),
        }
    }
}

/// One of the two scenarios: its relation and access distribution.
#[derive(Copy, Clone, Debug)]
pub struct Workload {
    pub name: &'static str,
    pub rel: RelId,
    /// Relation size in tenths of the pool.
    pub pool_tenths: usize,
    pub access: Access,
}

/// `sweep`: uniform over 1.7 x pool (bench/SCENARIOS.md).
pub const SWEEP: Workload = Workload {
    name: "sweep",
    rel: RelId(1),
    pool_tenths: 17,
    access: Access::Uniform,
};

/// `ticks`: zipfian theta 0.99 over 1.5 x pool (bench/SCENARIOS.md).
pub const TICKS: Workload = Workload {
    name: "ticks",
    rel: RelId(2),
    pool_tenths: 15,
    access: Access::Zipf { theta: 0.99 },
};

/// Seed of the block draws and of the zipfian permutation without
/// `--seed`: fixed, so two runs (and the two evictors) see the same
/// sequence; `--seed` draws another, the same for the same seed.
pub const SEED: u64 = 0x5EED_0000;

/// Block numbers drawn per scenario: about 128 per block of the relation
/// rounded up to a power of two, at least 64 Ki and at most 4 Mi (16 MiB). A
/// thread that reaches the end starts again; the repeat distance is far
/// beyond the pool size.
///
/// Thread `t` walks the array with stride `2t + 1` (odd, so it visits every
/// slot of the power-of-two array once per lap). With one stride for all, two
/// threads running at the same speed could fall into step on the same
/// sequence, one re-reading what the other just loaded: a hit ratio no
/// independent client would see (an early version measured 96% instead of
/// 93.5% that way).
const KEYS_PER_BLOCK: usize = 128;
const MIN_KEYS: usize = 1 << 16;
const MAX_KEYS: usize = 1 << 22;

/// The operation kind of the latency table: one page access
/// (`read_buffer`, shared lock, block check, unpin).
pub const PAGE_ACCESS: &str = "page access";

/// The latency kind of the timed page accesses that evicted a page (the
/// worker's own eviction count moved across the access): a miss with its
/// victim, read, checksum, shared lock, block check and unpin. Each is also
/// in [`PAGE_ACCESS`].
pub const EVICTING_ACCESS: &str = "evicting access";

/// Every how many page accesses a worker times one. A page access that
/// hits costs a few tens of nanoseconds, about what a pair of
/// `Instant::now()` calls costs: timing every one would slow the loop it
/// measures (bench/SCENARIOS.md has the figures), so each worker times its
/// 1st, 17th, 33rd, ... access and the row says so (`latency_every`).
pub const LATENCY_EVERY: u64 = 16;

/// How many page accesses a worker does before adding them to the shared
/// count the interval reporter reads (one shared counter bumped per access
/// would bounce its cache line between the workers on the measured path).
const COUNT_EVERY: u64 = 64;

/// How often the driving thread wakes to update the progress bar and look
/// for a worker that failed.
const POLL: Duration = Duration::from_millis(50);

/// One configuration's measured window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub evictor: String,
    /// The configured batch: a number or `"auto"`.
    pub batch: BatchField,
    /// The batch the pool used at the end of the window (differs for auto).
    pub batch_effective: u32,
    pub partitions: usize,
    pub threads: usize,
    pub huge_pages: bool,
    pub ring: bool,
    pub window_secs: f64,
    pub accesses: u64,
    pub hits: u64,
    pub evictions: u64,
    pub victims: u64,
    pub sweep_ticks: u64,
    pub accesses_per_sec: f64,
    pub evictions_per_sec: f64,
    pub hits_per_sec: f64,
    pub hit_ratio: f64,
    pub ticks_per_victim_mean: f64,
    pub ticks_per_victim_p99: u64,
    pub ticks_per_victim_max: u64,
    /// Pool memory the kernel backed with huge pages (`None`: unknown).
    pub huge_pages_granted_mib: Option<f64>,
    /// Evictions/s relative to batch 1 of the same evictor and configuration.
    pub evictions_vs_batch1: Option<f64>,
    /// Cores this process used during the window (utime + stime / secs).
    pub cpu_cores_used: Option<f64>,
    /// Evictions per CPU-second this process used: less sensitive than
    /// evictions/s to other processes taking cores, blind to time spent
    /// waiting (parked threads use no CPU).
    pub evictions_per_cpu_sec: Option<f64>,
    /// Cores everything else on the machine used meanwhile: more than a
    /// few hundredths means the row competed for CPU.
    pub other_cores_used: Option<f64>,
    /// Pages whose block number was not the one asked for.
    pub data_errors: u64,
    /// Evictions/s per thread over the raw `pread`s/s per thread of the
    /// same thread count ([`SweepReport::pread_baselines`]): how close a
    /// miss comes to the bare read of its page.
    #[serde(default)]
    pub evictions_per_thread_vs_pread: Option<f64>,
    /// Evictions per CPU-second over the baseline's reads per CPU-second:
    /// the same comparison, less sensitive to other processes' load.
    #[serde(default)]
    pub evictions_per_cpu_sec_vs_pread: Option<f64>,
    /// The eviction's own speed beside the bare read: the baseline's median
    /// timed `pread` over the median timed [`EVICTING_ACCESS`] (as a rate
    /// ratio: above 1, an evicting access is faster than a `pread`). Unlike
    /// `evictions_per_thread_vs_pread` it leaves out the hits between the
    /// misses (`hits / evictions` of them per eviction), whose time the
    /// per-second rates charge to the evictions.
    #[serde(default)]
    pub evicting_access_vs_pread: Option<f64>,
    /// The same over the baseline that reads into the thread's share of
    /// the pool's size in turn (a cold destination, as a miss's page):
    /// how much of the gap is the pool's work rather than where the page
    /// lands.
    #[serde(default)]
    pub evicting_access_vs_pool_dest_pread: Option<f64>,
    /// Victims per ticks bucket in the window (bucket i = i ticks below 64,
    /// then one bucket per power of two: `bufmgr::stats::bucket_floor`);
    /// trailing empty buckets left out.
    #[serde(default)]
    pub ticks_histogram: Vec<u64>,
    /// Page accesses the workers made in the measured window (the
    /// population the latencies were sampled from; the pool's `accesses`
    /// counts the same accesses between its two snapshots).
    #[serde(default)]
    pub operations: u64,
    /// Page accesses from the workers' start to their stop, warm-up
    /// included: what the `--report-interval` series sums to.
    #[serde(default)]
    pub operations_with_warmup: u64,
    /// One page access in this many was timed ([`LATENCY_EVERY`]): the
    /// latency's `count` is about `operations / latency_every`.
    #[serde(default)]
    pub latency_every: u64,
    /// Flattened into the row: `latency` (`page access`: one access in
    /// `latency_every`, measured window only, every thread merged),
    /// `intervals` (`--report-interval`, over the warm-up and the window:
    /// page accesses/s, the pool's hit ratio and evictions, the p99 of the
    /// timed accesses), `seed` (`--seed`, the block draws) and `mrc`
    /// (`--mrc`: the pool's live curve at the window's end; else `null`).
    #[serde(flatten)]
    pub series: RowSeries,
}

/// One evictor relative to another for one (batch, partitions, threads, huge
/// pages, ring) group: HOT/COOL over clock, probation over HOT/COOL.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// The evictor measured (the numerator).
    #[serde(default)]
    pub evictor: String,
    /// The evictor it is compared with (the denominator).
    #[serde(default)]
    pub over: String,
    pub batch: BatchField,
    pub partitions: usize,
    pub threads: usize,
    pub huge_pages: bool,
    pub ring: bool,
    /// `evictor` evictions/s / `over` evictions/s.
    pub evictions_per_sec: f64,
    /// `evictor` mean ticks per victim / `over` mean ticks per victim.
    pub ticks_per_victim_mean: f64,
}

/// A finished `sweep` or `ticks` run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    pub scenario: String,
    pub access: String,
    pub relation: u32,
    pub relation_blocks: u32,
    pub pool_buffers: usize,
    pub cores: usize,
    pub warmup_secs: f64,
    pub duration_secs: f64,
    pub reused_data: bool,
    pub rows: Vec<Row>,
    pub ratios: Vec<Ratio>,
    /// Bare `pread`s of the same file and block draws, one window per
    /// thread count of the matrix (`raw_pread`).
    #[serde(default)]
    pub pread_baselines: Vec<PreadBaseline>,
    /// The seed the block draws came from (`--seed`).
    #[serde(default)]
    pub seed: u64,
    pub data_check: DataCheck,
}

/// Run `sweep`, print it, write its JSON; fail on data errors.
pub fn sweep(settings: &Settings) -> Result<SweepReport> {
    common::finish(run(&SWEEP, settings)?, settings)
}

/// Run `ticks`, print it, write its JSON; fail on data errors.
pub fn ticks(settings: &Settings) -> Result<SweepReport> {
    common::finish(run(&TICKS, settings)?, settings)
}

/// Build (or reuse) the relation, measure every configuration, check the data.
pub fn run(w: &Workload, settings: &Settings) -> Result<SweepReport> {
    let nblocks = BlockNumber::try_from(settings.pool_buffers * w.pool_tenths / 10)
        .map_err(|_| BenchError::Config("relation too large".into()))?;
    if nblocks == 0 {
        return Err(BenchError::Config("pool too small for a relation".into()));
    }
    // Built and verified through the file backend; measured through the
    // one `--io` / `--direct` select.
    let files = Arc::new(FileStorage::open(&settings.data_dir)?);
    let storage = settings.open_storage(&settings.data_dir)?;
    println!(
        "== {}: {} reads over {} ({nblocks} blocks = {:.1} x pool of {} buffers, {} MiB); \
         warm-up {:.1} s, window {:.1} s, {} cores",
        w.name,
        w.access.describe(),
        w.rel,
        nblocks as f64 / settings.pool_buffers as f64,
        settings.pool_buffers,
        (settings.pool_buffers * bufmgr::PAGE_SIZE) >> 20,
        settings.warmup.as_secs_f64(),
        settings.duration.as_secs_f64(),
        common::cores(),
    );
    let reused = data::ensure_relation(
        &files,
        w.rel,
        nblocks,
        settings.pool_buffers,
        settings.progress,
    )?;
    let seed = settings.seed(SEED);
    let keys = draw_keys(w.access, nblocks, seed)?;
    let configs = settings.configs();
    let mut rows = Vec::with_capacity(configs.len());
    for (i, c) in configs.iter().enumerate() {
        let label = format!("[{}/{}] {} {c}", i + 1, configs.len(), w.name);
        let row = measure(&storage, w.rel, &keys, c, settings, &label)?;
        eprintln!(
            "{label}: {} evictions/s, {} hits/s, {:.2} ticks/victim",
            fmt_rate(row.evictions_per_sec),
            fmt_rate(row.hits_per_sec),
            row.ticks_per_victim_mean
        );
        rows.push(row);
    }
    add_batch1_ratios(&mut rows);
    let ratios = evictor_ratios(&rows);
    let pread_baselines = pread_baselines(&files, w.rel, &keys, settings)?;
    add_pread_ratios(&mut rows, &pread_baselines);
    let data_check = match data::verify_relation(
        &files,
        w.rel,
        nblocks,
        settings.pool_buffers,
        settings.progress,
    ) {
        Ok(blocks) => DataCheck::blocks(blocks, None),
        Err(BenchError::Data(e)) => DataCheck::blocks(u64::from(nblocks), Some(e)),
        Err(e) => return Err(e),
    };
    Ok(SweepReport {
        scenario: w.name.into(),
        access: w.access.describe(),
        relation: w.rel.0,
        relation_blocks: nblocks,
        pool_buffers: settings.pool_buffers,
        cores: common::cores(),
        warmup_secs: settings.warmup.as_secs_f64(),
        duration_secs: settings.duration.as_secs_f64(),
        reused_data: reused,
        rows,
        ratios,
        pread_baselines,
        seed,
        data_check,
    })
}

/// The raw `pread` window of every thread count of the matrix, over the
/// relation's file and the scenario's block draws.
fn pread_baselines(
    files: &FileStorage,
    rel: RelId,
    keys: &[BlockNumber],
    settings: &Settings,
) -> Result<Vec<PreadBaseline>> {
    let path = files.path(RelFork::main(rel));
    let mut threads = settings.threads.clone();
    threads.sort_unstable();
    threads.dedup();
    let mut out = Vec::with_capacity(2 * threads.len());
    for t in threads {
        // Into one page, then into the thread's share of the pool's size.
        for dest_pages in [1, (settings.pool_buffers / t).max(1)] {
            let b = raw_pread::measure(
                &path,
                settings.direct_io,
                keys,
                t,
                dest_pages,
                settings.warmup,
                settings.duration,
            )?;
            eprintln!(
                "raw pread, {t} threads, {}: {} reads/s, {} per thread",
                describe_dest(b.dest_pages),
                fmt_rate(b.reads_per_sec),
                fmt_rate(b.reads_per_thread_per_sec)
            );
            out.push(b);
        }
    }
    Ok(out)
}

/// How a baseline's destination reads in the report.
fn describe_dest(dest_pages: usize) -> String {
    if dest_pages == 1 {
        "into one page".into()
    } else {
        format!("into {dest_pages} pages in turn")
    }
}

/// Fill the `vs pread` fields from the baselines of the row's thread
/// count: the one-page baseline for every ratio, the pool-sized one for
/// `evicting_access_vs_pool_dest_pread`.
fn add_pread_ratios(rows: &mut [Row], baselines: &[PreadBaseline]) {
    for r in rows.iter_mut() {
        let bare = baselines
            .iter()
            .find(|b| b.threads == r.threads && b.dest_pages == 1);
        let spread = baselines
            .iter()
            .find(|b| b.threads == r.threads && b.dest_pages > 1);
        r.evictions_per_thread_vs_pread = bare
            .filter(|b| b.reads_per_thread_per_sec > 0.0)
            .map(|b| r.evictions_per_sec / r.threads as f64 / b.reads_per_thread_per_sec);
        r.evictions_per_cpu_sec_vs_pread =
            bare.and_then(|b| Some(r.evictions_per_cpu_sec? / b.reads_per_cpu_sec?));
        let evicting = r
            .series
            .latency
            .get(EVICTING_ACCESS)
            .filter(|l| l.count > 0 && l.p50_us > 0.0)
            .copied();
        let ratio = |b: Option<&PreadBaseline>| {
            b.and_then(|b| b.read_latency)
                .zip(evicting)
                .map(|(pread, evicting)| pread.p50_us / evicting.p50_us)
        };
        r.evicting_access_vs_pread = ratio(bare);
        r.evicting_access_vs_pool_dest_pread = ratio(spread);
    }
}

/// The block numbers every configuration's threads read, drawn once from
/// `seed`.
pub fn draw_keys(access: Access, nblocks: BlockNumber, seed: u64) -> Result<Vec<BlockNumber>> {
    let len = (nblocks as usize * KEYS_PER_BLOCK)
        .next_power_of_two()
        .clamp(MIN_KEYS, MAX_KEYS);
    let mut rng = SmallRng::seed_from_u64(seed);
    Ok(match access {
        Access::Uniform => (0..len).map(|_| rng.random_range(0..nblocks)).collect(),
        Access::Zipf { theta } => {
            // Rank r (1 = hottest) lives at block perm[r - 1], so the hot
            // pages are spread over the relation (and over the pool's
            // partitions and hash partitions), not packed at its start.
            let mut perm: Vec<BlockNumber> = (0..nblocks).collect();
            perm.shuffle(&mut rng);
            let zipf = Zipf::new(f64::from(nblocks), theta)
                .map_err(|e| BenchError::Config(format!("zipf theta {theta}: {e}")))?;
            (0..len)
                .map(|_| {
                    let rank = zipf.sample(&mut rng) as usize;
                    perm[rank.clamp(1, perm.len()) - 1]
                })
                .collect()
        }
    })
}

/// What one worker saw.
#[derive(Debug, Default)]
struct WorkerOutcome {
    data_errors: u64,
    first_error: Option<String>,
    /// Its timed accesses in the measured window.
    latencies: Latencies,
    /// Its accesses in the measured window.
    window_ops: u64,
}

/// What the workers share with the driver and the interval reporter.
#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    /// Raised for the measured window.
    in_window: AtomicBool,
    /// Page accesses so far, added in steps of [`COUNT_EVERY`] (and the
    /// rest when a worker returns).
    ops: AtomicU64,
}

/// One thread's loop: read, lock shared, check the block number, drop;
/// one access in [`LATENCY_EVERY`] timed into `rec`.
/// `keys.len()` is a power of two; thread `t` walks it with stride `2t + 1`.
fn worker(
    pool: &BufferPool,
    rf: RelFork,
    keys: &[BlockNumber],
    t: usize,
    shared: &Shared,
    mut rec: Recorder<'_>,
) -> Result<WorkerOutcome> {
    debug_assert!(keys.len().is_power_of_two());
    let Shared {
        stop,
        in_window,
        ops,
    } = shared;
    let mut out = WorkerOutcome::default();
    let mask = keys.len() - 1;
    let stride = 2 * t + 1;
    let mut i = (t * keys.len() / 2) & mask;
    let mut done = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let block = keys[i];
        i = (i + stride) & mask;
        let timed = done.is_multiple_of(LATENCY_EVERY);
        // Read outside the timed span: whether this access evicted.
        let evictions_before = if timed { pool.thread_evictions() } else { 0 };
        let started = timed.then(Instant::now);
        let page = match pool.read_buffer(rf, block, None) {
            Ok(pin) => pin.lock_shared(),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                return Err(e.into());
            }
        };
        let found = data::page_block(&page);
        drop(page);
        let window = in_window.load(Ordering::Relaxed);
        if let Some(started) = started {
            let ended = Instant::now();
            rec.record_span(PAGE_ACCESS, started, ended, window);
            if pool.thread_evictions() > evictions_before {
                rec.record_span(EVICTING_ACCESS, started, ended, window);
            }
        }
        out.window_ops += u64::from(window);
        done += 1;
        if done.is_multiple_of(COUNT_EVERY) {
            ops.fetch_add(COUNT_EVERY, Ordering::Relaxed);
        }
        if found != block {
            out.data_errors += 1;
            out.first_error
                .get_or_insert_with(|| format!("read block {block}, got a page of block {found}"));
        }
    }
    ops.fetch_add(done % COUNT_EVERY, Ordering::Relaxed);
    out.latencies = rec.finish();
    Ok(out)
}

/// Evictions a window must hold before it may end (a starved worker on a
/// loaded machine can make none in a short window, and a rate from zero
/// events measures the scheduler, not the sweep).
const MIN_WINDOW_EVICTIONS: u64 = 100;
/// The longest a window is stretched to reach them.
const MAX_WINDOW_STRETCH: Duration = Duration::from_secs(30);

/// After the window's time: wait until the pool has evicted
/// [`MIN_WINDOW_EVICTIONS`] since `start` (or the stretch runs out); false
/// if a worker asked to stop.
fn wait_for_evictions(pool: &BufferPool, start: &PoolStats, stop: &AtomicBool) -> bool {
    let until = Instant::now() + MAX_WINDOW_STRETCH;
    while pool.stats().since(start).totals().evictions < MIN_WINDOW_EVICTIONS
        && Instant::now() < until
    {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    !stop.load(Ordering::Relaxed)
}

/// Sleep `d` in short steps, moving the bar; false if a worker asked to stop.
fn wait(d: Duration, pb: &ProgressBar, done_before: Duration, stop: &AtomicBool) -> bool {
    let start = Instant::now();
    loop {
        let elapsed = start.elapsed();
        pb.set_position((done_before + elapsed).as_millis() as u64);
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        if elapsed >= d {
            return true;
        }
        std::thread::sleep(POLL.min(d - elapsed));
    }
}

/// A statistics snapshot, the CPU times, and the instant they stand for (the
/// middle of the time it took to collect them).
fn snapshot(pool: &BufferPool) -> (PoolStats, Option<CpuSample>, Instant) {
    let before = Instant::now();
    let s = pool.stats();
    let cpu = CpuSample::now();
    let after = Instant::now();
    (s, cpu, before + (after - before) / 2)
}

/// The window's highest tick count, as well as the histogram knows it.
fn window_max(h: &TicksHistogram) -> u64 {
    let Some(top) = h.buckets.iter().rposition(|&c| c > 0) else {
        return 0;
    };
    let lo = bucket_floor(top);
    let hi = if top + 1 < TICK_BUCKETS {
        bucket_floor(top + 1) - 1
    } else {
        u64::MAX
    };
    h.max.clamp(lo, hi)
}

/// Measure one configuration on a fresh pool.
fn measure(
    storage: &Arc<dyn StorageBackend>,
    rel: RelId,
    keys: &[BlockNumber],
    c: &Config,
    settings: &Settings,
    label: &str,
) -> Result<Row> {
    let trace = settings.trace_for(c, &[]);
    let pool = BufferPool::new(
        settings.pool_config(c).trace(trace.clone()),
        storage.clone(),
    )?;
    let rf = RelFork::main(rel);
    let shared = Shared::default();
    let stop = &shared.stop;
    let live = LiveLatency::new();
    let live_ref = settings.measures.report_interval.map(|_| &live);
    let pb = progress_bar(
        (settings.warmup + settings.duration).as_millis() as u64,
        settings.progress,
        &format!("{label}: warm-up"),
    );
    let (measured, intervals) = harness::with_intervals(
        settings.measures.report_interval,
        (label, "accesses"),
        &live,
        || Tally::of(&pool.stats(), shared.ops.load(Ordering::Relaxed)),
        || {
            harness::run_crew(
                0..c.threads,
                // Trace thread id = worker number.
                &|t, _| {
                    let rec = Recorder::new(live_ref, PAGE_ACCESS);
                    common::traced_pool(&pool, t as u32, || {
                        worker(&pool, rf, keys, t, &shared, rec)
                    })
                },
                || stop.store(true, Ordering::Relaxed),
                |_| {
                    // A worker that failed stops the others and leaves no
                    // window.
                    if !wait(settings.warmup, &pb, Duration::ZERO, stop) {
                        return Ok(None);
                    }
                    pb.set_message(format!("{label}: measuring"));
                    shared.in_window.store(true, Ordering::Relaxed);
                    let (s0, c0, t0) = snapshot(&pool);
                    if !(wait(settings.duration, &pb, settings.warmup, stop)
                        && wait_for_evictions(&pool, &s0, stop))
                    {
                        return Ok(None);
                    }
                    let (s1, c1, t1) = snapshot(&pool);
                    shared.in_window.store(false, Ordering::Relaxed);
                    // The pool's live curve at the window's end (`--mrc`).
                    let curve = common::curve_of_pool(&pool);
                    let secs = (t1 - t0).as_secs_f64();
                    let cores = c0.zip(c1).map(|(c0, c1)| c1.cores_since(&c0, secs));
                    Ok(Some((s1.since(&s0), secs, cores, curve)))
                },
            )
        },
    );
    pb.finish_and_clear();
    common::note_trace(settings, trace, &pool)?;
    let (window, outcomes) = measured?;
    let mut data_errors = 0;
    let mut first_error = None;
    let mut latencies = Latencies::new();
    let mut operations = 0;
    for o in outcomes {
        data_errors += o.data_errors;
        first_error = first_error.or(o.first_error);
        latencies.merge(&o.latencies);
        operations += o.window_ops;
    }
    if let Some(e) = first_error {
        eprintln!("{label}: DATA ERROR: {e} ({data_errors} in all)");
    }
    let (d, secs, cores, curve) = window.ok_or_else(|| {
        BenchError::Config(format!("{label}: the run stopped before its window ended"))
    })?;
    let t = d.totals();
    let h = &d.ticks_per_victim;
    Ok(Row {
        evictor: c.evictor.name().into(),
        batch: c.batch.into(),
        batch_effective: d.batch,
        partitions: d.partitions.len(),
        threads: c.threads,
        huge_pages: c.huge_pages,
        ring: c.ring,
        window_secs: secs,
        accesses: t.accesses,
        hits: t.hits,
        evictions: t.evictions,
        victims: t.victims,
        sweep_ticks: t.sweep_ticks,
        accesses_per_sec: t.accesses as f64 / secs,
        evictions_per_sec: t.evictions as f64 / secs,
        hits_per_sec: t.hits as f64 / secs,
        hit_ratio: t.hit_ratio(),
        ticks_per_victim_mean: h.mean(),
        ticks_per_victim_p99: h.percentile(99.0),
        ticks_per_victim_max: window_max(h),
        huge_pages_granted_mib: d
            .huge_pages
            .huge_bytes
            .map(|b| b as f64 / (1024.0 * 1024.0)),
        evictions_vs_batch1: None,
        cpu_cores_used: cores.map(|c| c.0),
        evictions_per_cpu_sec: cores
            .filter(|c| c.0 > 0.0)
            .map(|c| t.evictions as f64 / (c.0 * secs)),
        other_cores_used: cores.map(|c| c.1),
        data_errors,
        evictions_per_thread_vs_pread: None,
        evictions_per_cpu_sec_vs_pread: None,
        evicting_access_vs_pread: None,
        evicting_access_vs_pool_dest_pread: None,
        ticks_histogram: {
            let top = h.buckets.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
            h.buckets[..top].to_vec()
        },
        operations,
        operations_with_warmup: shared.ops.load(Ordering::Relaxed),
        latency_every: LATENCY_EVERY,
        series: RowSeries {
            latency: latencies.by_kind(),
            mrc: curve,
            intervals,
            seed: settings.seed(SEED),
        },
    })
}

/// The rows of one (batch, partitions, threads, huge pages, ring) group.
fn same_group(a: &Row, b: &Row) -> bool {
    a.batch == b.batch
        && a.partitions == b.partitions
        && a.threads == b.threads
        && a.huge_pages == b.huge_pages
        && a.ring == b.ring
}

/// Fill `evictions_vs_batch1` where the matrix has batch 1.
fn add_batch1_ratios(rows: &mut [Row]) {
    let base: Vec<Row> = rows
        .iter()
        .filter(|r| r.batch == BatchField::Fixed(1))
        .cloned()
        .collect();
    for r in rows.iter_mut() {
        r.evictions_vs_batch1 = base
            .iter()
            .find(|b| {
                b.evictor == r.evictor
                    && b.partitions == r.partitions
                    && b.threads == r.threads
                    && b.huge_pages == r.huge_pages
                    && b.ring == r.ring
            })
            .filter(|b| b.evictions_per_sec > 0.0)
            .map(|b| r.evictions_per_sec / b.evictions_per_sec);
    }
}

/// The pairs compared: each evictor against the one before it.
const COMPARED: [(Evictor, Evictor); 2] = [
    (Evictor::HotCool, Evictor::Clock),
    (Evictor::Probation, Evictor::HotCool),
];

/// HOT/COOL over clock and probation over HOT/COOL, per group that has both.
fn evictor_ratios(rows: &[Row]) -> Vec<Ratio> {
    let mut out = Vec::new();
    for (num, den) in COMPARED {
        let (num, den) = (num.name(), den.name());
        out.extend(rows.iter().filter(|r| r.evictor == num).filter_map(|h| {
            let c = rows.iter().find(|c| c.evictor == den && same_group(c, h))?;
            Some(Ratio {
                evictor: num.into(),
                over: den.into(),
                batch: h.batch.clone(),
                partitions: h.partitions,
                threads: h.threads,
                huge_pages: h.huge_pages,
                ring: h.ring,
                evictions_per_sec: h.evictions_per_sec / c.evictions_per_sec,
                ticks_per_victim_mean: h.ticks_per_victim_mean / c.ticks_per_victim_mean,
            })
        }));
    }
    out
}

fn yes_no(b: bool) -> String {
    if b { "on".into() } else { "off".into() }
}

impl SweepReport {
    /// The ratio to show on a row: HOT/COOL over clock on a HOT/COOL row,
    /// probation over HOT/COOL on a probation row.
    fn ratio_for(&self, r: &Row) -> Option<&Ratio> {
        self.ratios.iter().find(|q| {
            q.evictor == r.evictor
                && q.batch == r.batch
                && q.partitions == r.partitions
                && q.threads == r.threads
                && q.huge_pages == r.huge_pages
                && q.ring == r.ring
        })
    }
}

impl Report for SweepReport {
    fn scenario(&self) -> &str {
        &self.scenario
    }

    fn render(&self) -> String {
        let mut t = Table::new(&[
            "evictor",
            "batch",
            "parts",
            "threads",
            "huge",
            "ring",
            "evict/s",
            "evict/thr/s",
            "vs pread",
            "evict/cpu-s",
            "vs pread cpu",
            "hits/evict",
            "evict p50 vs pread p50",
            "vs pool-dest pread p50",
            "hits/s",
            "hit%",
            "ticks mean",
            "p99",
            "max",
            "huge MiB",
            "cpu",
            "others",
            "vs b1",
            "vs prev evict/s",
            "vs prev ticks",
        ]);
        for r in &self.rows {
            let batch = match r.batch {
                BatchField::Named(ref n) => format!("{n}:{}", r.batch_effective),
                BatchField::Fixed(n) => n.to_string(),
            };
            let ratio = self.ratio_for(r);
            t.push(vec![
                r.evictor.clone(),
                batch,
                r.partitions.to_string(),
                r.threads.to_string(),
                yes_no(r.huge_pages),
                yes_no(r.ring),
                fmt_rate(r.evictions_per_sec),
                fmt_rate(r.evictions_per_sec / r.threads as f64),
                fmt_ratio(r.evictions_per_thread_vs_pread),
                r.evictions_per_cpu_sec.map_or("?".into(), fmt_rate),
                fmt_ratio(r.evictions_per_cpu_sec_vs_pread),
                if r.evictions > 0 {
                    format!("{:.2}", r.hits as f64 / r.evictions as f64)
                } else {
                    "?".into()
                },
                fmt_ratio(r.evicting_access_vs_pread),
                fmt_ratio(r.evicting_access_vs_pool_dest_pread),
                fmt_rate(r.hits_per_sec),
                format!("{:.2}", 100.0 * r.hit_ratio),
                format!("{:.2}", r.ticks_per_victim_mean),
                r.ticks_per_victim_p99.to_string(),
                r.ticks_per_victim_max.to_string(),
                r.huge_pages_granted_mib
                    .map_or("?".into(), |m| format!("{m:.0}")),
                r.cpu_cores_used.map_or("?".into(), |c| format!("{c:.2}")),
                r.other_cores_used.map_or("?".into(), |c| format!("{c:.2}")),
                fmt_ratio(r.evictions_vs_batch1),
                fmt_ratio(ratio.map(|q| q.evictions_per_sec)),
                fmt_ratio(ratio.map(|q| q.ticks_per_victim_mean)),
            ]);
        }
        let mut out = format!("\n{} ({} reads):\n{t}", self.scenario, self.access);
        let lat: Vec<(String, &latency::ByKind)> = self
            .rows
            .iter()
            .map(|r| {
                (
                    format!("{} b{} t{}", r.evictor, r.batch, r.threads),
                    &r.series.latency,
                )
            })
            .collect();
        out += &latency::table(&lat);
        let curves: Vec<(String, Option<&common::Curve>)> = self
            .rows
            .iter()
            .map(|r| {
                (
                    format!("{} b{} t{}", r.evictor, r.batch, r.threads),
                    r.series.mrc.as_ref(),
                )
            })
            .collect();
        out += &common::curve_table(&curves);
        if let Some(r) = self.rows.first() {
            out += &format!(
                "latency: one page access in {} timed per thread (timing every one \
                 would slow the loop measured)\n",
                r.latency_every
            );
        }
        for b in &self.pread_baselines {
            out += &format!(
                "raw pread, {} threads, {}: {} reads/s, {} per thread, {} per CPU-second, \
                 {} cores, median timed read {} (window {:.1} s)\n",
                b.threads,
                describe_dest(b.dest_pages),
                fmt_rate(b.reads_per_sec),
                fmt_rate(b.reads_per_thread_per_sec),
                b.reads_per_cpu_sec.map_or("?".into(), fmt_rate),
                b.cpu_cores_used.map_or("?".into(), |c| format!("{c:.2}")),
                b.read_latency
                    .map_or("?".into(), |l| format!("{:.2} us", l.p50_us)),
                b.window_secs
            );
        }
        out += "evict/thr/s: evictions/s per thread; vs pread: that over the raw preads/s \
                per thread of the same file, blocks and thread count (no pool): every \
                access's time counts, the hits' too (hits/evict of them per eviction); \
                vs pread cpu: evict/cpu-s over the raw preads per CPU-second (hits \
                included likewise); evict p50 vs pread p50: the eviction alone, the \
                median timed raw pread over the median timed evicting access \
                (read_buffer with its victim and read, shared lock, block check, \
                unpin; one access in latency_every timed, as one pread in as many), \
                as a rate ratio (above 1: faster than the pread); vs pool-dest pread \
                p50: the same over the raw pread into the thread's share of the pool's \
                size in turn, a cold destination as a miss's page is; \
                evict/cpu-s: evictions per CPU-second of this run; \
                cpu / others: cores used by this run / by other processes during the window; \
                vs b1: evictions/s relative to batch 1; vs prev: HOT/COOL relative to clock, \
                probation relative to HOT/COOL, in the same configuration\n";
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
            .map(|r| {
                format!(
                    "{} data errors with {} batch={} threads={}",
                    r.data_errors, r.evictor, r.batch, r.threads
                )
            })
            .collect();
        if let Some(e) = &self.data_check.error {
            f.push(format!("end-of-run data check: {e}"));
        }
        f.extend(
            self.pread_baselines
                .iter()
                .filter(|b| b.data_errors > 0)
                .map(|b| {
                    format!(
                        "{} data errors in the raw pread baseline with {} threads",
                        b.data_errors, b.threads
                    )
                }),
        );
        f
    }

    /// Ticks-per-victim histograms, one file per configuration with a
    /// panel per evictor (share of victims per tick count).
    fn svg_plots(&self) -> Vec<crate::common::SvgPlot> {
        let mut out = Vec::new();
        let mut done: Vec<usize> = Vec::new();
        for (i, r) in self.rows.iter().enumerate() {
            if done.contains(&i) {
                continue;
            }
            let group: Vec<(usize, &Row)> = self
                .rows
                .iter()
                .enumerate()
                .filter(|(_, o)| same_group(o, r))
                .collect();
            done.extend(group.iter().map(|g| g.0));
            let (labels, panels) = ticks_panels(&group.iter().map(|g| g.1).collect::<Vec<_>>());
            let title = format!(
                "{}: clock ticks per victim (batch {}, {} threads, huge pages {})",
                self.scenario,
                r.batch,
                r.threads,
                yes_no(r.huge_pages)
            );
            if let Ok(svg) = crate::plot::histograms(
                &title,
                "ticks of the clock hand per victim",
                "% of victims",
                &labels,
                &panels,
            ) {
                out.push(crate::common::SvgPlot {
                    file: format!(
                        "{}-b{}-t{}-p{}-huge-{}.svg",
                        self.scenario,
                        r.batch,
                        r.threads,
                        r.partitions,
                        yes_no(r.huge_pages)
                    ),
                    svg,
                });
            }
        }
        out
    }
}

/// Bins of the ticks plots: 1..=16 one by one, then 17-32, 33-63, then the
/// power-of-two buckets of the histogram (64-127, ...) below `buckets` (the
/// longest histogram of the rows drawn).
fn ticks_bins(buckets: usize) -> Vec<(String, u64, u64)> {
    let mut bins: Vec<(String, u64, u64)> = (1..=16).map(|t| (t.to_string(), t, t)).collect();
    bins.push(("17-32".into(), 17, 32));
    bins.push(("33-63".into(), 33, 63));
    for b in 64..buckets.min(TICK_BUCKETS) {
        let lo = bucket_floor(b);
        let hi = if b + 1 < TICK_BUCKETS {
            bucket_floor(b + 1) - 1
        } else {
            u64::MAX
        };
        bins.push((format!("{lo}-{}", hi.min(99_999_999)), lo, hi));
    }
    bins
}

/// The labels and one panel per row (share of victims per bin, in %).
fn ticks_panels(rows: &[&Row]) -> (Vec<String>, Vec<crate::plot::Bars>) {
    let bins = ticks_bins(
        rows.iter()
            .map(|r| r.ticks_histogram.len())
            .max()
            .unwrap_or(0),
    );
    let share = |r: &Row| -> Vec<f64> {
        let total: u64 = r.ticks_histogram.iter().sum();
        bins.iter()
            .map(|&(_, lo, hi)| {
                let n: u64 = r
                    .ticks_histogram
                    .iter()
                    .enumerate()
                    .filter(|&(b, _)| {
                        let f = bucket_floor(b);
                        f >= lo && f <= hi
                    })
                    .map(|(_, &c)| c)
                    .sum();
                100.0 * n as f64 / total.max(1) as f64
            })
            .collect()
    };
    let shares: Vec<Vec<f64>> = rows.iter().map(|r| share(r)).collect();
    let used = shares
        .iter()
        .filter_map(|s| s.iter().rposition(|&x| x > 0.0))
        .max()
        .map_or(8, |i| (i + 1).max(8))
        .min(bins.len());
    let labels = bins[..used].iter().map(|b| b.0.clone()).collect();
    let panels = rows
        .iter()
        .zip(shares)
        .map(|(r, s)| crate::plot::Bars {
            name: format!(
                "{}: mean {:.2}, p99 {}, max {}",
                crate::common::evictor_label(&r.evictor),
                r.ticks_per_victim_mean,
                r.ticks_per_victim_p99,
                r.ticks_per_victim_max
            ),
            values: s[..used].to_vec(),
        })
        .collect();
    (labels, panels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bufmgr::SweepBatch;

    #[test]
    fn zipf_keys_are_skewed_and_in_range() {
        let keys = draw_keys(Access::Zipf { theta: 0.99 }, 1000, SEED).unwrap();
        assert!(keys.iter().all(|&k| k < 1000));
        let mut counts = vec![0usize; 1000];
        for &k in &keys {
            counts[k as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        let top10: usize = counts[..10].iter().sum();
        assert!(
            top10 * 4 > keys.len(),
            "the 10 hottest of 1000 blocks get over a quarter of accesses"
        );
    }

    #[test]
    fn the_seed_fixes_the_blocks_sweep_and_ticks_draw_and_another_seed_draws_others() {
        for access in [Access::Uniform, Access::Zipf { theta: 0.99 }] {
            let first = |seed| draw_keys(access, 10_000, seed).unwrap()[..64].to_vec();
            assert_eq!(first(SEED), first(SEED), "{access:?}: the same seed");
            assert_eq!(first(7), first(7), "{access:?}: the same seed");
            assert_ne!(first(SEED), first(7), "{access:?}: another seed");
        }
    }

    #[test]
    fn ticks_panels_bin_every_victim_once() {
        let mut h = vec![0u64; 66];
        h[1] = 50;
        h[2] = 30;
        h[20] = 10; // 17-32
        h[65] = 10; // 128-255
        let row = Row {
            evictor: "clock".into(),
            batch: BatchField::Fixed(1),
            batch_effective: 1,
            partitions: 1,
            threads: 1,
            huge_pages: false,
            ring: true,
            window_secs: 1.0,
            accesses: 0,
            hits: 0,
            evictions: 0,
            victims: 100,
            sweep_ticks: 0,
            accesses_per_sec: 0.0,
            evictions_per_sec: 0.0,
            hits_per_sec: 0.0,
            hit_ratio: 0.0,
            ticks_per_victim_mean: 0.0,
            ticks_per_victim_p99: 0,
            ticks_per_victim_max: 0,
            huge_pages_granted_mib: None,
            evictions_vs_batch1: None,
            cpu_cores_used: None,
            evictions_per_cpu_sec: None,
            other_cores_used: None,
            data_errors: 0,
            evictions_per_thread_vs_pread: None,
            evictions_per_cpu_sec_vs_pread: None,
            evicting_access_vs_pread: None,
            evicting_access_vs_pool_dest_pread: None,
            ticks_histogram: h,
            operations: 0,
            operations_with_warmup: 0,
            latency_every: LATENCY_EVERY,
            series: RowSeries::default(),
        };
        let (labels, panels) = ticks_panels(&[&row]);
        assert_eq!(labels.last().unwrap(), "128-255");
        assert_eq!(labels.len(), panels[0].values.len());
        let v = &panels[0].values;
        assert_eq!((v[0], v[1], v[16]), (50.0, 30.0, 10.0));
        assert_eq!(*v.last().unwrap(), 10.0);
        assert!((v.iter().sum::<f64>() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn window_max_is_clamped_to_the_top_bucket() {
        let mut h = TicksHistogram::default();
        h.buckets[3] = 5;
        h.max = 40; // seen before the window
        assert_eq!(window_max(&h), 3);
        h.buckets[65] = 1; // 128..255
        h.max = 200;
        assert_eq!(window_max(&h), 200);
        h.max = 1000;
        assert_eq!(window_max(&h), 255);
    }

    #[test]
    fn batch_auto_is_not_a_batch_of_one() {
        assert_ne!(
            BatchField::from(SweepBatch::Auto),
            BatchField::from(SweepBatch::Fixed(1))
        );
    }
}
