//! The measurement window the scenarios share.
//!
//! A scenario's `measure` describes its workload (what each worker thread
//! does, what a snapshot of its figures is) and leaves the rest here:
//!
//! - [`run_crew`] starts the worker threads, runs the caller's driver on the
//!   calling thread, tells the workers to stop when the driver is done (or
//!   failed) and joins every one of them, turning a panic into
//!   [`BenchError::Panic`];
//! - [`Phases`] is the warm-up / measuring / stop flag workers read, and
//!   [`warm_then_measure`] the warm-up followed by the measured window
//!   between two snapshots;
//! - [`sampled_window`] is the same window when the figures are also
//!   sampled at an interval (a time series beside the window's totals);
//! - [`alternating`] orders the repeated runs of configurations compared
//!   with each other so that none always runs first (A B, B A, A B, ...),
//!   and [`spread_of`] gives a figure's spread over those runs, which
//!   [`crate::spread`] then uses to decide whether a ratio may be quoted;
//! - [`Recorder`] is a worker's latencies (the run's, and the current
//!   interval's for [`with_intervals`], the `--report-interval` reporter
//!   that prints a line per interval and keeps the series).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::latency::{Latencies, Latency};
use crate::spread::Spread;

/// How often a measuring loop wakes to move its progress bar and sample.
pub const TICK: Duration = Duration::from_millis(100);

/// The longest a sampled window sleeps between two looks at the clock.
const SAMPLED_POLL: Duration = Duration::from_millis(50);

/// Workers warm up.
pub const WARMUP: u8 = 0;
/// The measured window (or, for a scenario that calibrates, calibration).
pub const MEASURE: u8 = 1;
/// Workers return.
pub const STOP: u8 = 2;

/// The phase flag workers read: [`WARMUP`], then [`MEASURE`], then
/// [`STOP`].
#[derive(Debug, Default)]
pub struct Phases(AtomicU8);

impl Phases {
    pub fn new() -> Phases {
        Phases(AtomicU8::new(WARMUP))
    }

    pub fn get(&self) -> u8 {
        self.0.load(Ordering::Relaxed)
    }

    pub fn set(&self, phase: u8) {
        self.0.store(phase, Ordering::Relaxed)
    }

    /// Whether workers should return.
    pub fn stopping(&self) -> bool {
        self.get() == STOP
    }

    /// The raw flag, for worker functions that take one.
    pub fn flag(&self) -> &AtomicU8 {
        &self.0
    }
}

/// The running workers, as the driver of [`run_crew`] sees them.
pub struct Crew<'scope, 'env, R> {
    scope: &'scope Scope<'scope, 'env>,
    handles: Vec<ScopedJoinHandle<'scope, Result<R>>>,
}

impl<R> std::fmt::Debug for Crew<'_, '_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crew")
            .field("workers", &self.handles.len())
            .finish()
    }
}

impl<'scope, 'env, R> Crew<'scope, 'env, R> {
    /// No worker has returned yet (a worker returns early only when it
    /// failed or was told to stop).
    pub fn alive(&self) -> bool {
        self.handles.iter().all(|h| !h.is_finished())
    }

    /// The scope the workers run in, for a thread the driver starts itself
    /// (and joins itself).
    pub fn scope(&self) -> &'scope Scope<'scope, 'env> {
        self.scope
    }
}

/// Run `worker(t, input)` on one thread per input while `drive` runs on the
/// calling thread; then call `stop` and join every worker.
///
/// Returns the driver's result and the workers' results in thread order.
/// The driver's error comes first; then the first worker's error (a panic
/// as [`BenchError::Panic`]). The workers are always stopped and joined,
/// whatever failed.
pub fn run_crew<'env, I, R, T, W, D>(
    inputs: impl IntoIterator<Item = I>,
    worker: &'env W,
    stop: impl FnOnce(),
    drive: D,
) -> Result<(T, Vec<R>)>
where
    I: Send + 'env,
    R: Send + 'env,
    W: Fn(usize, I) -> Result<R> + Sync,
    D: for<'scope> FnOnce(&Crew<'scope, 'env, R>) -> Result<T>,
{
    std::thread::scope(|s: &Scope<'_, 'env>| {
        let handles = inputs
            .into_iter()
            .enumerate()
            .map(|(t, input)| s.spawn(move || worker(t, input)))
            .collect();
        let crew = Crew { scope: s, handles };
        let driven = drive(&crew);
        stop();
        let mut outs = Vec::with_capacity(crew.handles.len());
        let mut failed = None;
        for h in crew.handles {
            match h.join() {
                Ok(Ok(r)) => outs.push(r),
                Ok(Err(e)) => {
                    failed.get_or_insert(e);
                }
                Err(p) => {
                    failed.get_or_insert(BenchError::Panic(panic_text(p)));
                }
            }
        }
        let driven = driven?;
        match failed {
            Some(e) => Err(e),
            None => Ok((driven, outs)),
        }
    })
}

/// Sleep for `d` in steps of [`TICK`], moving `pb` (whose length is in
/// milliseconds) and calling `each` after every step; stops early if
/// `each` returns false.
pub fn run_window(pb: &ProgressBar, d: Duration, mut each: impl FnMut(Duration) -> bool) {
    let start = Instant::now();
    loop {
        let el = start.elapsed();
        if el >= d {
            break;
        }
        std::thread::sleep(TICK.min(d - el));
        pb.set_position(start.elapsed().as_millis() as u64);
        if !each(start.elapsed()) {
            break;
        }
    }
}

/// A warm-up of `warmup`, then [`MEASURE`] and the measured window of
/// `duration` between two snapshots, each wait cut short when `alive`
/// turns false; [`STOP`] right after the second snapshot, so that no
/// operation finishing after it is timed as the window's (the workers'
/// latencies would otherwise count operations the snapshots do not).
/// Returns the snapshots at the window's start and end.
pub fn warm_then_measure<S>(
    pb: &ProgressBar,
    (warmup, duration): (Duration, Duration),
    phases: &Phases,
    alive: impl Fn() -> bool,
    mut snap: impl FnMut() -> S,
) -> (S, S) {
    run_window(pb, warmup, |_| alive());
    phases.set(MEASURE);
    let before = snap();
    run_window(pb, duration, |_| alive());
    let after = snap();
    phases.set(STOP);
    (before, after)
}

/// What [`sampled_window`] saw.
#[derive(Debug)]
pub struct Sampled<P, S> {
    /// The figures at the window's start and end.
    pub start: P,
    pub end: P,
    /// (seconds since the warm-up began, sample), warm-up included, the
    /// first of the window at its start and the last at its end.
    pub samples: Vec<(f64, S)>,
    /// When the window began, from the start of the warm-up.
    pub window_from: Duration,
}

/// A warm-up of `warmup` and a window of `duration` on one clock, taking
/// `point()` at the window's start and end and `sample(p)` every `every`
/// (`p` is the point taken at that moment, if one was), the bar in
/// milliseconds from the warm-up's start. Ends early when `stopped()`;
/// fails if that happened before the window began.
pub fn sampled_window<P, S>(
    pb: &ProgressBar,
    label: &str,
    (warmup, duration): (Duration, Duration),
    every: Duration,
    stopped: impl Fn() -> bool,
    mut point: impl FnMut() -> P,
    mut sample: impl FnMut(Option<&P>) -> S,
) -> Result<Sampled<P, S>> {
    let start = Instant::now();
    let window_at = start + warmup;
    let end_at = window_at + duration;
    let secs = |t: Instant| t.duration_since(start).as_secs_f64();
    let mut samples = Vec::new();
    let mut p0 = None;
    let mut next_sample = start;
    loop {
        let now = Instant::now();
        if stopped() {
            break;
        }
        if p0.is_none() && now >= window_at {
            let p = point();
            pb.set_message(format!("{label}: measuring"));
            samples.push((secs(now), sample(Some(&p))));
            p0 = Some(p);
            next_sample = now + every;
        }
        if now >= end_at {
            break;
        }
        if now >= next_sample {
            samples.push((secs(now), sample(None)));
            next_sample += every;
        }
        pb.set_position(now.duration_since(start).as_millis() as u64);
        let wake = next_sample
            .min(if p0.is_none() { window_at } else { end_at })
            .min(now + SAMPLED_POLL);
        std::thread::sleep(wake.saturating_duration_since(Instant::now()));
    }
    let end_time = Instant::now();
    let p1 = point();
    samples.push((secs(end_time), sample(Some(&p1))));
    let p0 = p0
        .ok_or_else(|| BenchError::Config(format!("{label}: the run stopped before its window")))?;
    Ok(Sampled {
        start: p0,
        end: p1,
        samples,
        window_from: window_at.duration_since(start),
    })
}

/// The order of `runs` runs of a group of `group` configurations compared
/// with each other: (run, configuration index), the group in order on even
/// runs and reversed on odd ones (A B, B A, A B, ...), so that neither
/// always runs first or right after the other's warm pages.
pub fn alternating(group: usize, runs: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::with_capacity(group * runs);
    for run in 0..runs {
        if run % 2 == 0 {
            out.extend((0..group).map(|i| (run, i)));
        } else {
            out.extend((0..group).rev().map(|i| (run, i)));
        }
    }
    out
}

/// The spread of one figure over the runs in `runs` that `pick` selects.
pub fn spread_of<T>(
    runs: &[T],
    pick: impl Fn(&T) -> bool,
    figure: impl Fn(&T) -> f64,
) -> Option<Spread> {
    let v: Vec<f64> = runs.iter().filter(|r| pick(r)).map(figure).collect();
    Spread::of(&v)
}

/// A panic payload as text.
pub fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// How often a worker hands its interval histogram to [`LiveLatency`]: the
/// interval reporter's p99 lags the clock by at most this much.
pub const LIVE_FLUSH: Duration = Duration::from_millis(20);

/// The latencies of the current interval of `--report-interval`, fed by the
/// workers' [`Recorder`]s and emptied by the reporter at each interval's end.
#[derive(Debug, Default)]
pub struct LiveLatency {
    interval: Mutex<Latency>,
}

impl LiveLatency {
    pub fn new() -> LiveLatency {
        LiveLatency::default()
    }

    /// Adds `l` to the current interval and empties `l`.
    fn absorb(&self, l: &mut Latency) {
        self.interval
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .merge(l);
        l.reset();
    }

    /// The interval's latencies; the next interval starts empty.
    fn take(&self) -> Latency {
        std::mem::take(&mut *self.interval.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// One worker's latencies: every operation into the run's [`Latencies`];
/// with an interval reporter, the operations of the kind it follows also
/// into its [`LiveLatency`] (handed over every [`LIVE_FLUSH`], so the
/// measured path takes no lock).
#[derive(Debug)]
pub struct Recorder<'a> {
    pub total: Latencies,
    live: Option<(&'a LiveLatency, &'static str, Latency, Instant)>,
    window: Option<&'a std::sync::atomic::AtomicBool>,
}

impl<'a> Recorder<'a> {
    /// A recorder feeding `live` with the operations of `kind` (none
    /// without a reporter).
    pub fn new(live: Option<&'a LiveLatency>, kind: &'static str) -> Recorder<'a> {
        Recorder {
            total: Latencies::new(),
            live: live.map(|l| (l, kind, Latency::new(), Instant::now())),
            window: None,
        }
    }

    /// Record into the run's latencies only while `in_window` is true (the
    /// measured window); the interval reporter still gets every operation.
    pub fn window(mut self, in_window: &'a std::sync::atomic::AtomicBool) -> Recorder<'a> {
        self.window = Some(in_window);
        self
    }

    /// Records one operation of `kind` that began at `started` and ended now.
    #[inline]
    pub fn record(&mut self, kind: &'static str, started: Instant) {
        let in_window = self.window.is_none_or(|w| w.load(Ordering::Relaxed));
        self.record_if(kind, started, in_window);
    }

    /// [`record`](Self::record), into the run's latencies only if
    /// `in_window` (the caller's own test of the measured window); the
    /// interval reporter gets it either way.
    #[inline]
    pub fn record_if(&mut self, kind: &'static str, started: Instant, in_window: bool) {
        self.record_span(kind, started, Instant::now(), in_window);
    }

    /// [`record_if`](Self::record_if) of an operation that ended at `now`
    /// (an end seen by another thread: a line read from a pipe).
    #[inline]
    pub fn record_span(
        &mut self,
        kind: &'static str,
        started: Instant,
        now: Instant,
        in_window: bool,
    ) {
        let d = now.saturating_duration_since(started);
        if in_window {
            self.total.record(kind, d);
        }
        if let Some((live, k, l, flushed)) = &mut self.live
            && *k == kind
        {
            l.record(d);
            if now.saturating_duration_since(*flushed) >= LIVE_FLUSH {
                live.absorb(l);
                *flushed = now;
            }
        }
    }

    /// The run's latencies, after handing the last interval values over.
    pub fn finish(mut self) -> Latencies {
        if let Some((live, _, l, _)) = &mut self.live {
            live.absorb(l);
        }
        self.total
    }
}

/// Cumulative counts at one instant, as the interval reporter reads them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Operations done (lookups, transactions, ...: the scenario's unit).
    pub ops: u64,
    /// Buffer accesses and hits of the pool.
    pub accesses: u64,
    pub hits: u64,
    pub evictions: u64,
}

impl Tally {
    /// The pool's counts, with `ops` operations done.
    pub fn of(stats: &bufmgr::PoolStats, ops: u64) -> Tally {
        let t = stats.totals();
        Tally {
            ops,
            accesses: t.accesses,
            hits: t.hits,
            evictions: t.evictions,
        }
    }
}

/// What every scenario row carries beside its own figures, flattened into
/// the row's JSON (`#[serde(flatten)]`: the four fields sit in the row
/// itself, `latency`, `mrc`, `intervals`, `seed`, as they did before they
/// were gathered here).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RowSeries {
    /// Latency per operation kind (each scenario's row says which kinds).
    #[serde(default)]
    pub latency: crate::latency::ByKind,
    /// The pool's live miss-ratio curve at the window's end (`--mrc`).
    #[serde(default)]
    pub mrc: Option<crate::common::Curve>,
    /// One entry per `--report-interval`.
    #[serde(default)]
    pub intervals: Vec<Interval>,
    /// The seed the workload was drawn from (`--seed`).
    #[serde(default)]
    pub seed: u64,
}

/// One interval of `--report-interval`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// The interval's end, in seconds since the run's workers started
    /// (warm-up included).
    pub t_secs: f64,
    /// Its length in seconds.
    pub secs: f64,
    pub ops: u64,
    pub ops_per_sec: f64,
    /// Hits / accesses of the pool in the interval (`null`: no access).
    pub hit_ratio: Option<f64>,
    pub evictions: u64,
    pub evictions_per_sec: f64,
    /// p99 of the interval's operations of the followed kind, in
    /// microseconds (`null`: none finished, or no latencies followed).
    pub p99_us: Option<f64>,
}

impl Interval {
    /// The printed line, as `pgbench -P` prints one.
    pub fn line(&self, label: &str, unit: &str) -> String {
        format!(
            "{label}: progress: {:.1} s, {:.0} {unit}/s, hit {}, {:.0} evictions/s, p99 {}",
            self.t_secs,
            self.ops_per_sec,
            self.hit_ratio
                .map_or("-".into(), |h| format!("{:.3}%", 100.0 * h)),
            self.evictions_per_sec,
            self.p99_us.map_or("-".into(), |p| format!("{p:.1} us")),
        )
    }
}

/// The intervals of `--report-interval` over `f`: with `every` given, a
/// thread takes `tally()` every `every`, prints one line per interval
/// (`label`, throughput in `unit`s/s, hit ratio, evictions, p99 of `live`)
/// on standard error and keeps them; it stops when `f` returns. Without
/// `every`, just `f()` and no series.
pub fn with_intervals<T>(
    every: Option<Duration>,
    (label, unit): (&str, &str),
    live: &LiveLatency,
    tally: impl Fn() -> Tally + Sync,
    f: impl FnOnce() -> T,
) -> (T, Vec<Interval>) {
    let Some(every) = every else {
        return (f(), Vec::new());
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    // The series' baseline, taken here before `f` starts: taken by the
    // reporter thread, it would miss whatever `f` did before that thread
    // first ran (on a loaded machine, hundreds of operations).
    let start = Instant::now();
    let first = tally();
    live.take();
    std::thread::scope(|s| {
        let reporter = s.spawn(|| {
            let mut last = (start, first);
            let mut series = Vec::new();
            let mut next = start + every;
            let mut stop = false;
            while !stop {
                // Sleep to the interval's end in short steps, so that the
                // end of `f` is noticed quickly.
                let now = Instant::now();
                if now < next {
                    std::thread::sleep((next - now).min(SAMPLED_POLL));
                    if !done.load(Ordering::Acquire) {
                        continue;
                    }
                    stop = true;
                }
                // Whether `f` had returned is read before the tally: a last
                // interval then counts everything `f` did (were it read
                // after, work finished between the two would be in no
                // interval).
                let finished = done.load(Ordering::Acquire);
                let at = Instant::now();
                let now_tally = tally();
                let lat = live.take();
                let (t0, before) = last;
                let secs = at.duration_since(t0).as_secs_f64();
                if secs <= 0.0 {
                    break;
                }
                let accesses = now_tally.accesses.saturating_sub(before.accesses);
                let hits = now_tally.hits.saturating_sub(before.hits);
                let evictions = now_tally.evictions.saturating_sub(before.evictions);
                let ops = now_tally.ops.saturating_sub(before.ops);
                let i = Interval {
                    t_secs: at.duration_since(start).as_secs_f64(),
                    secs,
                    ops,
                    ops_per_sec: ops as f64 / secs,
                    hit_ratio: (accesses > 0).then(|| hits as f64 / accesses as f64),
                    evictions,
                    evictions_per_sec: evictions as f64 / secs,
                    p99_us: (lat.count() > 0).then(|| lat.summary().p99_us),
                };
                eprintln!("{}", i.line(label, unit));
                series.push(i);
                last = (at, now_tally);
                // From this interval's end, not the planned one: a reporter
                // that woke late (a busy machine) would otherwise owe the
                // missed ends and report them at once, intervals of
                // microseconds with absurd rates.
                next = at + every;
                if finished {
                    stop = true;
                }
            }
            series
        });
        let out = f();
        done.store(true, Ordering::Release);
        let series = reporter.join().unwrap_or_default();
        (out, series)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn the_interval_series_counts_what_the_run_did_before_the_reporter_first_ran() {
        let ops = AtomicU64::new(0);
        let calls = AtomicU64::new(0);
        let tally = || {
            // The first tally is slow: a reporter thread taking it would
            // read it after `f` had already worked.
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(100));
            }
            Tally {
                ops: ops.load(Ordering::SeqCst),
                ..Tally::default()
            }
        };
        let live = LiveLatency::new();
        let ((), series) = with_intervals(
            Some(Duration::from_millis(30)),
            ("test", "ops"),
            &live,
            tally,
            || {
                ops.fetch_add(1_000, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(150));
            },
        );
        assert_eq!(
            series.iter().map(|i| i.ops).sum::<u64>(),
            1_000,
            "{series:?}"
        );
    }

    #[test]
    fn the_measured_window_ends_for_the_workers_at_its_second_snapshot() {
        let phases = Phases::new();
        let pb = ProgressBar::hidden();
        let mut seen = Vec::new();
        let (before, after) = warm_then_measure(
            &pb,
            (Duration::from_millis(1), Duration::from_millis(1)),
            &phases,
            || true,
            || {
                seen.push(phases.flag().load(Ordering::Relaxed));
                seen.len()
            },
        );
        assert_eq!((before, after), (1, 2));
        assert_eq!(seen, [MEASURE, MEASURE]);
        // A worker finishing an operation after the second snapshot must
        // not see the window still open.
        assert_eq!(phases.flag().load(Ordering::Relaxed), STOP);
    }

    /// A row as the five engine scenarios wrote it before `RowSeries`: the
    /// four fields inline, between fields of its own.
    #[derive(Serialize, Deserialize)]
    struct InlineRow {
        before: u64,
        latency: crate::latency::ByKind,
        mrc: Option<crate::common::Curve>,
        intervals: Vec<Interval>,
        seed: u64,
        after: u64,
    }

    /// The same row with the four gathered and flattened.
    #[derive(Serialize, Deserialize)]
    struct FlatRow {
        before: u64,
        #[serde(flatten)]
        series: RowSeries,
        after: u64,
    }

    #[test]
    fn a_flattened_row_series_writes_and_reads_the_json_of_the_inline_fields() {
        let summary = crate::latency::Summary {
            count: 3,
            p50_us: 1.5,
            p95_us: 2.0,
            p99_us: 2.5,
            p999_us: 3.0,
            max_us: 4.0,
        };
        let series = RowSeries {
            latency: [("lookup".to_string(), summary)].into_iter().collect(),
            mrc: Some(crate::common::Curve {
                pool_pages: 64,
                points: vec![crate::common::CurvePoint {
                    multiple: 1.0,
                    pages: 64,
                    hit_ratio: 0.5,
                }],
                sampled_accesses: 10,
                sampled_pages: 4,
                sample_rate: 1.0,
                pool_hit_ratio: Some(0.4),
                exact_lru: None,
                error_points: None,
            }),
            intervals: vec![Interval {
                t_secs: 1.0,
                secs: 1.0,
                ops: 7,
                ops_per_sec: 7.0,
                hit_ratio: Some(0.9),
                evictions: 2,
                evictions_per_sec: 2.0,
                p99_us: None,
            }],
            seed: 42,
        };
        let inline = InlineRow {
            before: 1,
            latency: series.latency.clone(),
            mrc: series.mrc.clone(),
            intervals: series.intervals.clone(),
            seed: series.seed,
            after: 2,
        };
        let flat = FlatRow {
            before: 1,
            series,
            after: 2,
        };
        let inline_json = serde_json::to_string(&inline).unwrap();
        // The same names, in the same order, with the same values.
        assert_eq!(serde_json::to_string(&flat).unwrap(), inline_json);
        assert!(!inline_json.contains("series"), "{inline_json}");
        // And a file written before reads back into the flattened row.
        let back: FlatRow = serde_json::from_str(&inline_json).unwrap();
        assert_eq!(back.series, flat.series);
        // A row written before the four existed still reads (defaults).
        let old: FlatRow = serde_json::from_str(r#"{"before":1,"after":2}"#).unwrap();
        assert_eq!(old.series, RowSeries::default());
    }

    #[test]
    fn alternation_reverses_the_group_on_every_other_run() {
        assert_eq!(
            alternating(2, 3),
            vec![(0, 0), (0, 1), (1, 1), (1, 0), (2, 0), (2, 1)]
        );
        assert!(alternating(3, 0).is_empty());
    }

    #[test]
    fn a_spread_is_taken_over_the_selected_runs_only() {
        let runs = [("a", 1.0), ("b", 10.0), ("a", 3.0), ("a", 2.0)];
        let s = spread_of(&runs, |r| r.0 == "a", |r| r.1).unwrap();
        assert_eq!((s.n, s.min, s.median, s.max), (3, 1.0, 2.0, 3.0));
        assert_eq!(spread_of(&runs, |r| r.0 == "c", |r| r.1), None);
    }

    #[test]
    fn the_crew_is_stopped_and_joined_after_the_driver_and_returns_in_thread_order() {
        let phases = Phases::new();
        let work = AtomicU64::new(0);
        let (driven, outs) = run_crew(
            [10u64, 20, 30],
            &|t, input: u64| {
                while !phases.stopping() {
                    work.fetch_add(1, Ordering::Relaxed);
                    std::thread::yield_now();
                }
                Ok(input + t as u64)
            },
            || phases.set(STOP),
            |crew| {
                assert!(crew.alive());
                Ok("driven")
            },
        )
        .unwrap();
        assert_eq!(driven, "driven");
        assert_eq!(outs, vec![10, 21, 32]);
    }

    #[test]
    fn a_panicking_worker_is_reported_and_the_others_still_stop() {
        let phases = Phases::new();
        let r: Result<((), Vec<()>)> = run_crew(
            0..3,
            &|t, _| {
                if t == 1 {
                    panic!("worker one gave up");
                }
                while !phases.stopping() {
                    std::thread::yield_now();
                }
                Ok(())
            },
            || phases.set(STOP),
            |crew| {
                while crew.alive() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(())
            },
        );
        match r {
            Err(BenchError::Panic(m)) => assert!(m.contains("worker one gave up"), "{m}"),
            other => panic!("expected a panic error, got {other:?}"),
        }
    }

    #[test]
    fn the_drivers_error_wins_over_the_workers_results() {
        let phases = Phases::new();
        let r: Result<((), Vec<()>)> = run_crew(
            0..2,
            &|_, _| {
                while !phases.stopping() {
                    std::thread::yield_now();
                }
                Ok(())
            },
            || phases.set(STOP),
            |_| Err(BenchError::Data("driver failed".into())),
        );
        assert!(matches!(r, Err(BenchError::Data(m)) if m == "driver failed"));
    }

    #[test]
    fn a_sampled_window_takes_its_points_at_the_window_and_samples_through_it() {
        let pb = ProgressBar::hidden();
        let calls = AtomicU64::new(0);
        let began = Instant::now();
        let w = sampled_window(
            &pb,
            "test",
            (Duration::from_millis(60), Duration::from_millis(120)),
            Duration::from_millis(30),
            || false,
            || (Instant::now(), calls.fetch_add(1, Ordering::Relaxed)),
            |p| p.is_some(),
        )
        .unwrap();
        assert_eq!((w.start.1, w.end.1), (0, 1));
        // The window starts once the warm-up is over and ends once its
        // duration from the warm-up's end has passed.
        assert!(w.start.0.duration_since(began) >= Duration::from_millis(60));
        let end = w.end.0.duration_since(began);
        assert!(end >= Duration::from_millis(180), "{end:?}");
        assert_eq!(w.window_from, Duration::from_millis(60));
        // Warm-up samples, the window's first (a point), samples, its last.
        assert!(w.samples.len() >= 4, "{}", w.samples.len());
        assert!(!w.samples[0].1);
        assert!(w.samples.last().unwrap().1);
        assert_eq!(w.samples.iter().filter(|s| s.1).count(), 2);
        assert!(w.samples.windows(2).all(|p| p[0].0 <= p[1].0));
    }

    #[test]
    fn a_window_stopped_during_its_warm_up_is_an_error() {
        let pb = ProgressBar::hidden();
        let r = sampled_window(
            &pb,
            "cut short",
            (Duration::from_secs(5), Duration::from_secs(5)),
            Duration::from_millis(10),
            || true,
            || (),
            |_| (),
        );
        assert!(
            matches!(r, Err(BenchError::Config(ref m)) if m.contains("cut short")),
            "{:?}",
            r.err()
        );
    }

    #[test]
    fn the_interval_reporter_has_one_entry_per_interval_with_its_own_p99() {
        let ops = AtomicU64::new(0);
        let live = LiveLatency::new();
        let every = Duration::from_millis(100);
        let started = Instant::now();
        let (_, series) = with_intervals(
            Some(every),
            ("test", "ops"),
            &live,
            || Tally {
                ops: ops.load(Ordering::Relaxed),
                ..Tally::default()
            },
            || {
                let mut rec = Recorder::new(Some(&live), "op");
                while started.elapsed() < Duration::from_millis(450) {
                    let t = Instant::now();
                    std::thread::sleep(Duration::from_millis(1));
                    rec.record("op", t);
                    // Another kind reaches the run's latencies only.
                    rec.record("other", t);
                    ops.fetch_add(1, Ordering::Relaxed);
                }
                rec.finish()
            },
        );
        let run = started.elapsed().as_secs_f64();
        let full = (run / every.as_secs_f64()).floor() as usize;
        assert!(
            (full..=full + 1).contains(&series.len()),
            "{} entries over {run} s",
            series.len()
        );
        let counted: u64 = series.iter().map(|i| i.ops).sum();
        assert_eq!(
            counted,
            ops.load(Ordering::Relaxed),
            "every op in one interval"
        );
        // On a loaded machine the worker may not run at all in some
        // interval: such an interval has no ops and no p99; every busy one
        // has its own.
        assert!(
            series.iter().any(|i| i.ops > 0 && i.p99_us.is_some()),
            "no interval saw an op: {series:?}"
        );
        for i in &series {
            if let Some(p99) = i.p99_us {
                assert!(p99 >= 1_000.0, "a 1 ms sleep is at least 1000 us: {p99}");
            }
            assert_eq!(i.hit_ratio, None, "no pool access, no ratio");
        }
    }

    // The reporter is held up for 2.5 intervals once (its tally is slow):
    // the next interval spans the delay, and none after it is shorter
    // than the interval asked for (only the run's last may be).
    #[test]
    fn a_late_reporter_reports_no_interval_shorter_than_asked() {
        let live = LiveLatency::new();
        let every = Duration::from_millis(100);
        let calls = AtomicU64::new(0);
        let (_, series) = with_intervals(
            Some(every),
            ("test", "ops"),
            &live,
            || {
                if calls.fetch_add(1, Ordering::Relaxed) == 1 {
                    std::thread::sleep(Duration::from_millis(250));
                }
                Tally::default()
            },
            || std::thread::sleep(Duration::from_millis(700)),
        );
        assert!(series.len() >= 3, "{series:?}");
        for i in &series[..series.len() - 1] {
            assert!(
                i.secs >= every.as_secs_f64(),
                "an interval of {} s: {series:?}",
                i.secs
            );
        }
    }

    // Work `f` finishes while the reporter is between its tally and its
    // check whether `f` has returned still lands in an interval: the
    // series' ops sum to everything done.
    #[test]
    fn work_finished_during_the_last_tally_is_in_the_series() {
        let live = LiveLatency::new();
        let ops = AtomicU64::new(0);
        let calls = AtomicU64::new(0);
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let (_, series) = with_intervals(
            Some(Duration::from_millis(20)),
            ("test", "ops"),
            &live,
            || {
                let done = ops.load(Ordering::SeqCst);
                // The first interval's tally: let `f` do its one op and
                // return while this tally is already taken.
                if calls.fetch_add(1, Ordering::SeqCst) == 1 {
                    go.send(()).unwrap();
                    std::thread::sleep(Duration::from_millis(150));
                }
                Tally {
                    ops: done,
                    ..Tally::default()
                }
            },
            || {
                wait.recv().unwrap();
                ops.fetch_add(1, Ordering::SeqCst);
            },
        );
        let counted: u64 = series.iter().map(|i| i.ops).sum();
        assert_eq!(counted, 1, "{series:?}");
    }

    #[test]
    fn without_an_interval_there_is_no_series_and_no_thread() {
        let live = LiveLatency::new();
        let (v, series) = with_intervals(None, ("t", "ops"), &live, Tally::default, || 5);
        assert_eq!((v, series.len()), (5, 0));
    }

    #[test]
    fn a_recorder_gated_by_the_window_records_only_inside_it() {
        let in_window = std::sync::atomic::AtomicBool::new(false);
        let mut rec = Recorder::new(None, "op").window(&in_window);
        rec.record("op", Instant::now());
        in_window.store(true, Ordering::Relaxed);
        rec.record("op", Instant::now());
        rec.record("op", Instant::now());
        in_window.store(false, Ordering::Relaxed);
        rec.record("op", Instant::now());
        assert_eq!(rec.finish().get("op").map(|l| l.count()), Some(2));
    }
}
