//! `bench step [TRACE]`: step through a trace on a tiny pool (8 to 32
//! buffers), one access at a time, printing every tick of the clock hand
//! and, for each eviction, why that page: its history since it was loaded.
//!
//! The decisions are the engine's own: the accesses run through
//! `lab::replay::ReplayPool` with a step observer
//! ([`lab::replay::StepObserver`]), which reports each decision from
//! inside the pool's access, sweep, probation and ring paths; `lab::step`
//! keeps each buffer's history and formats. This module is the command
//! line and the demo.
//!
//! Without a TRACE it runs a built-in demo (`--demo hot-scan`, see
//! [`DemoShape`]): the demo's accesses are read through a real
//! [`BufferPool`] of `--pool-pages` buffers (one partition, sweep batch 1,
//! tracing on), and the trace that pool recorded is what is stepped through,
//! so the live pool's hit count can be set beside the replay's.
//!
//! # Output, per printed access (the tour's #65 under the clock)
//! ```text
//! #65 rel 2 block 48 thread 0: miss
//!   buf 15  1/0        tick 111      u1 -> u0            cool
//!   buf 0   1/1        tick 112      u0                  victim
//!   evict 1/1 from buf 0 (hand)
//!   why this page: 1/1 (buf 0), its 6 events since it was loaded
//!     #36    load          u1
//!     #49    tick 80       u1 -> u0            cool
//!     #52    hit           u0 -> u1
//!     #53    tick 96       u1 -> u0            cool
//!     #65    tick 112      u0                  victim
//!     #65    victim (hand)
//!   buf 0   2/48       load          u1
//!   pool 2/48:u1 >2/39:u1 2/40:u1 2/41:u1 2/36:u0 1/2:u0 ...
//! ```
//! A page is `rel/block` (`rel/fsm/block` for a free-space-map page). States:
//! clock `u0`..`u5` (the usage count); HOT/COOL `HOT+REF`, `HOT`, `COOL`;
//! probation adds ` PB` while the buffer is in the probation region (in the
//! pool line: `H*`, `H`, `C`, and `q` for PB). The pool line is every
//! buffer in id order with `>` before the one the hand visits next.
//!
//! # Shortcuts
//! - Buffer histories are kept only until the last printed access (after
//!   it the replay goes on to count hits, nothing more), and whole: a page
//!   hit thousands of times keeps thousands of events (`--history` limits
//!   what is printed, not what is kept). Pools are tiny and so are the
//!   windows one reads; a long window over a big trace costs memory.
//! - `--relation` / `--threads` hide accesses, not decisions: a hidden
//!   access's ticks are not printed, though the pool line shows their effect.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bufmgr::trace::{Access, Trace};
use bufmgr::{
    BlockNumber, BufferPool, Evictor, FileStorage, PoolConfig, RelFork, RelId, SweepBatch,
};
use clap::Parser;
pub use lab::step::{Dated, Eviction, StepResult, Window, page_name, state_name, step};

use crate::data::{check_page, fill_page};
use crate::error::{BenchError, Result};

/// The smallest pool step mode runs: below 8 the probation region and a
/// ring (pages / 8) are empty, and there is little to watch.
pub const MIN_STEP_PAGES: usize = 8;
/// The largest: every access prints a line per buffer at worst, and the
/// pool line must fit a (wide) terminal. `bench replay` is for larger pools.
pub const MAX_STEP_PAGES: usize = 32;

/// A summary line per relation is printed for traces of at most this many.
const MAX_RELATION_LINES: usize = 8;

/// The demo's hot relation.
pub const HOT_REL: RelId = RelId(1);
/// The demo's scanned relation.
pub const SCAN_REL: RelId = RelId(2);

/// `bench step`: one access at a time through the engine's evictor rules.
#[derive(Parser, Debug)]
pub struct StepArgs {
    /// A trace file (a scenario's `--trace FILE`); none runs the demo
    pub trace: Option<PathBuf>,
    /// The evictor whose rules decide: clock, hotcool or probation
    #[arg(long, default_value = "clock", value_parser = parse_engine_policy)]
    pub policy: Evictor,
    /// Buffers in the pool, 8 to 32
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub pool_pages: usize,
    /// The first access printed (accesses are numbered from 0 in time order)
    #[arg(long, default_value_t = 0, value_name = "K")]
    pub from: u64,
    /// How many accesses to print
    #[arg(long, default_value_t = 20, value_name = "M")]
    pub count: u64,
    /// Print only accesses to these relation ids (all are replayed)
    #[arg(long, value_delimiter = ',', value_name = "R[,R...]")]
    pub relation: Option<Vec<u32>>,
    /// Print only accesses by these trace thread ids (all are replayed)
    #[arg(long, value_delimiter = ',', value_name = "T[,T...]")]
    pub threads: Option<Vec<usize>>,
    /// The most recent events of a victim's history to print (0: all)
    #[arg(long, default_value_t = 12, value_name = "N")]
    pub history: usize,
    /// The built-in workload when no TRACE is given
    #[arg(long, value_enum)]
    pub demo: Option<Demo>,
    /// Demo: hot pages (relation 1), read one after another, over and over
    #[arg(long, default_value_t = DemoShape::default().hot, value_name = "N")]
    pub hot: u32,
    /// Demo: pages of the scanned relation (2), read in order, wrapping
    #[arg(long, default_value_t = DemoShape::default().scan_pages, value_name = "N")]
    pub scan_pages: u32,
    /// Demo: scan pages read after each hot page
    #[arg(long, default_value_t = DemoShape::default().scan_per_hot, value_name = "N")]
    pub scan_per_hot: u32,
    /// Demo: accesses in all
    #[arg(long, default_value_t = DemoShape::default().accesses, value_name = "N")]
    pub accesses: u64,
    /// Demo: keep the trace the live pool recorded in FILE (for `bench replay`)
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
}

fn parse_engine_policy(s: &str) -> std::result::Result<Evictor, String> {
    match s {
        "clock" => Ok(Evictor::Clock),
        "hotcool" => Ok(Evictor::HotCool),
        "probation" => Ok(Evictor::Probation),
        other => Err(format!(
            "{other:?}: step mode runs the engine's evictors only: clock, hotcool or probation \
             (bench replay compares lru, arc, s3fifo, sieve, 2q and opt)"
        )),
    }
}

/// The built-in workloads.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Demo {
    /// A small hot set read over and over, interleaved with a sequential
    /// scan larger than the pool
    HotScan,
}

/// The `hot-scan` demo: access i is hot page (i / (k + 1)) mod `hot` of
/// relation 1 when i mod (k + 1) = 0, else the scan's next page of relation
/// 2 (wrapping at `scan_pages`), with k = `scan_per_hot`. No ring: the
/// scan competes with the hot set for the whole pool, as scan-resistance
/// does with `--ring off`. Deterministic: no randomness at all.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DemoShape {
    pub hot: u32,
    pub scan_pages: u32,
    pub scan_per_hot: u32,
    pub accesses: u64,
}

impl Default for DemoShape {
    /// The tour's shape (16 buffers): 4 hot pages, 3 scan pages after each,
    /// so a hot page comes back every 16 accesses, 12 of them scan misses.
    /// Under the clock a scan page enters at usage 1 and needs two visits
    /// of the hand, so with 12 buffers of scan pages the hand laps about
    /// every 6 misses and takes about 2 from a hot page's count between two
    /// of its reads, which add 1: the hot set drains away. Under HOT/COOL a
    /// scan page goes on the hand's first visit, the hand laps about every
    /// 12 misses, and a hot page read again within two laps (reference bit
    /// cleared, then demoted) stays.
    fn default() -> DemoShape {
        DemoShape {
            hot: 4,
            scan_pages: 64,
            scan_per_hot: 3,
            accesses: 600,
        }
    }
}

impl DemoShape {
    /// The demo's accesses as (relation, block), in order.
    pub fn pages(&self) -> Vec<(RelId, BlockNumber)> {
        let period = u64::from(self.scan_per_hot) + 1;
        let mut next_scan = 0u64;
        (0..self.accesses)
            .map(|i| {
                if i % period == 0 {
                    (HOT_REL, ((i / period) % u64::from(self.hot)) as BlockNumber)
                } else {
                    let b = next_scan % u64::from(self.scan_pages);
                    next_scan += 1;
                    (SCAN_REL, b as BlockNumber)
                }
            })
            .collect()
    }

    fn check(&self) -> Result<()> {
        if self.hot == 0 || self.scan_pages == 0 || self.accesses == 0 {
            return Err(BenchError::Config(format!(
                "demo hot-scan needs --hot, --scan-pages and --accesses above 0 (got {}, {}, {})",
                self.hot, self.scan_pages, self.accesses
            )));
        }
        Ok(())
    }
}

/// A directory removed when dropped.
/// Run the demo through a real pool of `pages` buffers under `evictor`
/// (one partition, sweep batch 1: the pool the replay is exact for),
/// recording its trace into `record` (or a temporary file), and return the
/// trace. Every page read is checked (it names its relation and block).
pub fn record_demo(
    shape: &DemoShape,
    evictor: Evictor,
    pages: usize,
    record: Option<&Path>,
) -> Result<Trace> {
    shape.check()?;
    // Removed when dropped (a leftover in the temp dir would be harmless).
    let dir = tempfile::Builder::new()
        .prefix("bench-step-")
        .tempdir()
        .map_err(|source| BenchError::Io {
            op: "create",
            path: std::env::temp_dir(),
            source,
        })?;
    let storage = Arc::new(FileStorage::open(dir.path())?);
    // Build both relations through a pool of their own, so the recording
    // pool starts empty and sees only the demo's reads.
    {
        let build = BufferPool::new(PoolConfig::new(64), storage.clone())?;
        for (rel, n) in [(HOT_REL, shape.hot), (SCAN_REL, shape.scan_pages)] {
            let rf = RelFork::main(rel);
            build.create_fork(rf)?;
            for _ in 0..n {
                let mut page = build.extend(rf, None)?;
                let block = page.block();
                fill_page(&mut page, rel, block);
                page.mark_dirty();
            }
        }
        build.flush_all(true)?;
    }
    let path = record.map_or_else(|| dir.path().join("demo.trace"), Path::to_path_buf);
    let pool = BufferPool::new(
        PoolConfig::new(pages)
            .evictor(evictor)
            .partitions(1)
            .batch(SweepBatch::Fixed(1))
            .balancing(false)
            .trace(Some(path.clone())),
        storage,
    )?;
    bufmgr::trace::set_thread_id(0);
    for (rel, block) in shape.pages() {
        let page = pool
            .read_buffer(RelFork::main(rel), block, None)?
            .lock_shared();
        check_page(&page, rel, block).map_err(BenchError::Data)?;
    }
    pool.flush_trace()?;
    drop(pool);
    Ok(Trace::read(&path)?)
}

/// The `Window` and pool size of `a`, checked.
fn window_of(a: &StepArgs) -> Result<Window> {
    if !(MIN_STEP_PAGES..=MAX_STEP_PAGES).contains(&a.pool_pages) {
        return Err(BenchError::Config(format!(
            "--pool-pages {}: step mode runs a tiny pool of {MIN_STEP_PAGES} to {MAX_STEP_PAGES} \
             buffers (bench replay takes any size)",
            a.pool_pages
        )));
    }
    Ok(Window {
        from: a.from,
        count: a.count,
        relations: a.relation.clone(),
        threads: crate::replay::thread_ids(a.threads.as_deref())?,
        history: a.history,
    })
}

/// Parse `bench step` options (without the program name) and run it,
/// returning the report.
pub fn run(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<String> {
    let a = match StepArgs::try_parse_from(std::iter::once("bench step".into()).chain(args)) {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => e.exit(), // --help
        Err(e) => return Err(BenchError::Config(e.to_string().trim_end().to_string())),
    };
    run_args(&a)
}

/// [`run`] with the options parsed (by `bench step` itself).
pub fn run_args(a: &StepArgs) -> Result<String> {
    let window = window_of(a)?;
    let shape = DemoShape {
        hot: a.hot,
        scan_pages: a.scan_pages,
        scan_per_hot: a.scan_per_hot,
        accesses: a.accesses,
    };
    let (trace, source) = trace_and_source(a, &shape)?;
    let accesses = trace.accesses_by_time();
    if window.from >= accesses.len() as u64 {
        return Err(BenchError::Config(format!(
            "--from {}: {source} has {} accesses (0..{})",
            window.from,
            accesses.len(),
            accesses.len().saturating_sub(1)
        )));
    }
    let r = step(&accesses, a.policy, a.pool_pages, &window);
    let mut out = format!(
        "{source}: {} accesses; stepping {} buffers under {}\n",
        accesses.len(),
        a.pool_pages,
        a.policy
    );
    out.push_str(&r.text);
    write_summaries(&mut out, a, &trace, &accesses, &r, &window);
    Ok(out)
}

/// The trace `a` steps through and a sentence naming where it came from:
/// the file given, or the demo recorded by a live pool.
fn trace_and_source(a: &StepArgs, shape: &DemoShape) -> Result<(Trace, String)> {
    Ok(match (&a.trace, a.demo) {
        (Some(p), None) => {
            if a.record.is_some() {
                return Err(BenchError::Config(
                    "--record keeps the demo's trace: it needs no TRACE".into(),
                ));
            }
            (Trace::read(p)?, p.display().to_string())
        }
        (Some(p), Some(_)) => {
            return Err(BenchError::Config(format!(
                "give a trace ({}) or --demo, not both",
                p.display()
            )));
        }
        (None, _) => (
            record_demo(shape, a.policy, a.pool_pages, a.record.as_deref())?,
            format!(
                "demo hot-scan ({} hot pages of relation 1, {} scan pages of relation 2 \
                 read {} per hot page, {} accesses), recorded by a live {}-buffer {} pool{}",
                shape.hot,
                shape.scan_pages,
                shape.scan_per_hot,
                shape.accesses,
                a.pool_pages,
                a.policy,
                a.record
                    .as_ref()
                    .map_or(String::new(), |p| format!(" into {}", p.display()))
            ),
        ),
    })
}

/// The closing lines of the report: hit counts replayed and recorded,
/// for the whole trace, per relation when few, and for the printed subset.
fn write_summaries(
    out: &mut String,
    a: &StepArgs,
    trace: &Trace,
    accesses: &[&Access],
    r: &StepResult,
    window: &Window,
) {
    let count = |pick: &dyn Fn(&Access) -> bool, hits: &dyn Fn(usize, &Access) -> bool| {
        let (mut n, mut h) = (0u64, 0u64);
        for (i, acc) in accesses.iter().enumerate() {
            if pick(acc) {
                n += 1;
                h += u64::from(hits(i, acc));
            }
        }
        (n, h)
    };
    let pct = |h: u64, n: u64| {
        if n == 0 {
            0.0
        } else {
            100.0 * h as f64 / n as f64
        }
    };
    let replayed = |i: usize, _: &Access| r.hits[i];
    let recorded = |_: usize, acc: &Access| acc.hit;
    let _ = writeln!(
        out,
        "printed {} accesses, {} evictions",
        r.printed,
        r.evictions.len()
    );
    let mut summary = |name: String, pick: &dyn Fn(&Access) -> bool| {
        let (n, h) = count(pick, &replayed);
        let (_, live) = count(pick, &recorded);
        let _ = writeln!(
            out,
            "{name}: {n} accesses; replayed under {} on {} buffers: {h} hits ({:.2}%); \
             the recording {}-buffer pool hit {live} ({:.2}%)",
            a.policy,
            a.pool_pages,
            pct(h, n),
            trace.pool_buffers,
            pct(live, n)
        );
    };
    summary("whole trace".into(), &|_| true);
    // Per relation, when there are few enough to read (the demo: the hot
    // set is relation 1, the scan relation 2).
    let mut rels: Vec<u32> = accesses.iter().map(|acc| acc.tag.rel.0).collect();
    rels.sort_unstable();
    rels.dedup();
    if rels.len() <= MAX_RELATION_LINES {
        for rel in rels {
            let name = match RelId(rel) {
                HOT_REL if a.trace.is_none() => "relation 1 (the hot set)".to_string(),
                SCAN_REL if a.trace.is_none() => "relation 2 (the scan)".to_string(),
                _ => format!("relation {rel}"),
            };
            summary(name, &|acc| acc.tag.rel.0 == rel);
        }
    }
    if window.relations.is_some() || window.threads.is_some() {
        summary("the printed subset".into(), &|acc| window.selects(acc));
    }
}

/// `bench step ...`, its options parsed.
pub fn main(a: &StepArgs) -> Result<()> {
    print!("{}", run_args(a)?);
    Ok(())
}
