//! `bench step [TRACE]`: step through a trace on a tiny pool (8 to 32
//! buffers), one access at a time, printing every tick of the clock hand
//! and, for each eviction, why that page: its history since it was loaded.
//!
//! The decisions are the engine's own: the accesses run through
//! `lab::replay::ReplayPool` with a step observer
//! ([`lab::replay::StepObserver`]), which reports each decision from
//! inside the pool's access, sweep, probation and ring paths. This module
//! only keeps each buffer's history and formats.
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

use bufmgr::desc::{HOT, PROBATION, REFBIT, TAG_VALID, usage};
use bufmgr::evictor::Tick;
use bufmgr::trace::{Access, Trace};
use bufmgr::{
    BlockNumber, BufferPool, BufferTag, Evictor, FileStorage, Fork, PoolConfig, RelFork, RelId,
    RingSizes, SweepBatch,
};
use clap::Parser;
use lab::replay::{Ref, ReplayPool, StepEvent, VictimSource};

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
#[command(name = "bench step")]
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
    pub threads: Option<Vec<u32>>,
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
             (bench replay compares lru, arc, s3fifo and opt)"
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

/// Which accesses `bench step` prints.
#[derive(Clone, Debug, Default)]
pub struct Window {
    /// The first access that may be printed (numbered from 0).
    pub from: u64,
    /// How many accesses are printed (those `relations` and `threads` pick).
    pub count: u64,
    /// Print only accesses to these relation ids.
    pub relations: Option<Vec<u32>>,
    /// Print only accesses by these trace thread ids.
    pub threads: Option<Vec<u32>>,
    /// The most recent history events printed per victim (0: all).
    pub history: usize,
}

impl Window {
    fn selects(&self, a: &Access) -> bool {
        self.relations
            .as_ref()
            .is_none_or(|r| r.contains(&a.tag.rel.0))
            && self.threads.as_ref().is_none_or(|t| t.contains(&a.thread))
    }
}

/// An event and the number of the access during which it happened.
pub type Dated = (u64, StepEvent);

/// An eviction in the printed window, with the victim's history.
#[derive(Clone, Debug)]
pub struct Eviction {
    /// The access whose miss evicted it.
    pub access: u64,
    pub tag: BufferTag,
    pub buffer: usize,
    /// Every event of its buffer from its load to the victim event.
    pub history: Vec<Dated>,
}

/// What a step run printed and found.
#[derive(Clone, Debug, Default)]
pub struct StepResult {
    /// The whole report.
    pub text: String,
    /// Per access of the whole trace: was it a hit.
    pub hits: Vec<bool>,
    /// Accesses printed.
    pub printed: u64,
    /// The evictions of the printed accesses.
    pub evictions: Vec<Eviction>,
}

/// A page as the report names it.
pub fn page_name(t: &BufferTag) -> String {
    match t.fork {
        Fork::Main => format!("{}/{}", t.rel.0, t.block),
        Fork::FreeSpace => format!("{}/fsm/{}", t.rel.0, t.block),
    }
}

/// A state word as the tick lines show it.
pub fn state_name(e: Evictor, s: u64) -> String {
    if s & TAG_VALID == 0 {
        return "free".into();
    }
    spell_state(e, s, ["HOT+REF", "HOT", "COOL", " PB"])
}

/// A state word as the pool line shows it (two or three characters).
fn state_short(e: Evictor, s: u64) -> String {
    spell_state(e, s, ["H*", "H", "C", "q"])
}

/// `s` under `e` in `words`: HOT with its reference bit, HOT, COOL, and
/// what is appended in the probation region (the clock: `u0`..`u5`).
fn spell_state(e: Evictor, s: u64, words: [&str; 4]) -> String {
    let [hot_ref, hot, cool, region] = words;
    let mut out = match e {
        Evictor::Clock => format!("u{}", usage(s)),
        Evictor::HotCool | Evictor::Probation => match (s & HOT != 0, s & REFBIT != 0) {
            (true, true) => hot_ref.into(),
            (true, false) => hot.into(),
            (false, _) => cool.into(),
        },
    };
    if s & PROBATION != 0 {
        out.push_str(region);
    }
    out
}

fn decision(t: Tick, pop: bool) -> &'static str {
    match t {
        Tick::Pinned => "pinned",
        Tick::Skip => "skip",
        Tick::Cool(_) if pop => "promote",
        Tick::Cool(_) => "cool",
        Tick::Victim => "victim",
    }
}

fn before_after(e: Evictor, before: u64, after: u64) -> String {
    if before == after {
        format!("{:<19} ", state_name(e, before))
    } else {
        format!(
            "{:<19} ",
            format!("{} -> {}", state_name(e, before), state_name(e, after))
        )
    }
}

/// One event as a line (without the access number).
fn event_line(e: Evictor, ev: &StepEvent) -> String {
    let page = |t: &Option<BufferTag>| t.as_ref().map_or("-".into(), page_name);
    match *ev {
        StepEvent::Hit { before, after, .. } => {
            format!("{:<14}{}", "hit", before_after(e, before, after))
        }
        StepEvent::RingSlot {
            buffer,
            tag,
            state,
            reusable,
        } => format!(
            "{:<14}{:<19} {}",
            format!("ring slot b{buffer}"),
            state_name(e, state),
            if reusable {
                format!("reuse {}", page(&tag))
            } else {
                "not reusable: sweep".into()
            }
        ),
        StepEvent::Tick {
            hand,
            before,
            after,
            tick,
            ..
        } => format!(
            "{:<14}{}{}",
            format!("tick {hand}"),
            before_after(e, before, after),
            decision(tick, false)
        ),
        StepEvent::Pop {
            before,
            after,
            tick,
            forced,
            ..
        } => format!(
            "{:<14}{}{}{}",
            "queue pop",
            before_after(e, before, after),
            decision(tick, true),
            if forced { " (forced)" } else { "" }
        ),
        StepEvent::Victim { source, .. } => format!("victim ({})", source_name(source)),
        StepEvent::Load {
            state,
            queued,
            ghost_hit,
            ..
        } => format!(
            "{:<14}{:<19} {}",
            "load",
            state_name(e, state),
            if queued {
                "to the probation queue"
            } else if ghost_hit {
                "ghost hit: to main"
            } else {
                ""
            }
        ),
    }
}

fn source_name(s: VictimSource) -> &'static str {
    match s {
        VictimSource::Hand => "hand",
        VictimSource::Queue => "probation queue",
        VictimSource::Ring => "ring",
    }
}

/// The pool line: every buffer's page and short state, `>` at the hand.
fn pool_line<O: lab::replay::StepObserver>(pool: &ReplayPool<O>) -> String {
    let hand = pool.hand_buffer();
    let cells: Vec<String> = pool
        .resident()
        .iter()
        .zip(pool.states())
        .enumerate()
        .map(|(i, (t, &s))| {
            let mark = if i == hand { ">" } else { "" };
            match t {
                Some(t) => format!("{mark}{}:{}", page_name(t), state_short(pool.evictor(), s)),
                None => format!("{mark}-"),
            }
        })
        .collect();
    cells.join(" ")
}

/// Step through `accesses` (in time order) on a pool of `pages` buffers
/// under `evictor`, printing the accesses `window` selects. Every access is
/// replayed; buffer histories are kept until the window's last printed
/// access, then only hits are counted.
pub fn step(accesses: &[&Access], evictor: Evictor, pages: usize, window: &Window) -> StepResult {
    let mut pool = ReplayPool::observed(evictor, pages, RingSizes::default(), Vec::new());
    // Each buffer's events since its page was loaded.
    let mut histories: Vec<Vec<Dated>> = vec![Vec::new(); pages];
    let mut r = StepResult::default();
    let mut t = String::new();
    for (i, a) in accesses.iter().enumerate() {
        let i = i as u64;
        let hit = pool.access(&Ref::from(*a));
        r.hits.push(hit);
        let events = std::mem::take(pool.observer_mut());
        let watching = r.printed < window.count;
        if !watching {
            continue;
        }
        let print = i >= window.from && window.selects(a);
        if print {
            let ring = a.ring.map_or(String::new(), |k| format!(" ring {k:?}"));
            let _ = writeln!(
                t,
                "#{i} rel {} block {}{} thread {}{ring}: {}",
                a.tag.rel.0,
                a.tag.block,
                match a.tag.fork {
                    Fork::Main => "",
                    Fork::FreeSpace => " (fsm)",
                },
                a.thread,
                if hit { "hit" } else { "miss" }
            );
        }
        for ev in &events {
            let b = ev.buffer();
            if let StepEvent::Load { .. } = ev {
                histories[b].clear();
            }
            histories[b].push((i, *ev));
            if !print {
                continue;
            }
            let tag_of = |t: Option<BufferTag>| t.as_ref().map_or("-".into(), page_name);
            match *ev {
                StepEvent::Hit { tag, .. } => {
                    let _ = writeln!(
                        t,
                        "  buf {b:<3} {:<10} {}",
                        page_name(&tag),
                        event_line(evictor, ev)
                    );
                }
                StepEvent::Tick { tag, .. } | StepEvent::Pop { tag, .. } => {
                    let _ = writeln!(
                        t,
                        "  buf {b:<3} {:<10} {}",
                        tag_of(tag),
                        event_line(evictor, ev)
                    );
                }
                StepEvent::RingSlot { .. } => {
                    let _ = writeln!(t, "  {}", event_line(evictor, ev));
                }
                StepEvent::Victim {
                    evicted, source, ..
                } => {
                    if let Some(tag) = evicted {
                        let _ = writeln!(
                            t,
                            "  evict {} from buf {b} ({})",
                            page_name(&tag),
                            source_name(source)
                        );
                        r.evictions.push(Eviction {
                            access: i,
                            tag,
                            buffer: b,
                            history: histories[b].clone(),
                        });
                        write_history(&mut t, evictor, &tag, b, &histories[b], window.history);
                    } else {
                        let _ = writeln!(t, "  buf {b} was free ({})", source_name(source));
                    }
                }
                StepEvent::Load { tag, .. } => {
                    let _ = writeln!(
                        t,
                        "  buf {b:<3} {:<10} {}",
                        page_name(&tag),
                        event_line(evictor, ev)
                    );
                }
            }
        }
        if print {
            let _ = writeln!(t, "  pool {}", pool_line(&pool));
            r.printed += 1;
        }
    }
    r.text = t
        .lines()
        .map(str::trim_end)
        .fold(String::new(), |mut s, l| {
            s.push_str(l);
            s.push('\n');
            s
        });
    r
}

fn write_history(
    t: &mut String,
    e: Evictor,
    tag: &BufferTag,
    buffer: usize,
    h: &[Dated],
    keep: usize,
) {
    let _ = writeln!(
        t,
        "  why this page: {} (buf {buffer}), its {} events since it was loaded",
        page_name(tag),
        h.len()
    );
    let skip = if keep == 0 {
        0
    } else {
        h.len().saturating_sub(keep)
    };
    if skip > 0 {
        let hits = h[..skip]
            .iter()
            .filter(|(_, ev)| matches!(ev, StepEvent::Hit { .. }))
            .count();
        let _ = writeln!(
            t,
            "    ... {skip} earlier ({hits} of them hits; --history 0 shows all)"
        );
    }
    for (i, ev) in &h[skip..] {
        let _ = writeln!(t, "    #{i:<5} {}", event_line(e, ev));
    }
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
        threads: a.threads.clone(),
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
    let window = window_of(&a)?;
    let shape = DemoShape {
        hot: a.hot,
        scan_pages: a.scan_pages,
        scan_per_hot: a.scan_per_hot,
        accesses: a.accesses,
    };
    let (trace, source) = match (&a.trace, a.demo) {
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
            record_demo(&shape, a.policy, a.pool_pages, a.record.as_deref())?,
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
    };
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
    Ok(out)
}

/// `bench step ...`: `args` without the program name.
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<()> {
    print!("{}", run(args)?);
    Ok(())
}
