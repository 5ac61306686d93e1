//! The terminals: one thread each, bound to a home warehouse (thread `t`
//! to warehouse `t mod W + 1`), dealing the mix from a shuffled deck of
//! 100 cards (45/43/4/4/4), drawing each transaction's input per spec and
//! running it with no keying or think time. Each thread records its
//! latencies per transaction type in its own HDR histograms, counts
//! commits, rollbacks and conflict retries, and the transactions begun in
//! each second of the run (for the throughput plot); all are merged when
//! the threads are joined. The first error stops every terminal and is the
//! run's result.
//!
//! Analytic threads ([`drive_with_analytics`]) run the CH queries of
//! `analytic` in rotation over the same live tables while the terminals
//! run, each query in a read-only transaction of its own, until the last
//! terminal stops (and at least one query each). The terminals' elapsed
//! time, and so tpmC, ends when the last terminal does, not when the last
//! analytic query does.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::analytic::{AnalyticResult, Window, analytic_loop};
use super::backend::{Backend, Outcome};
use super::spec::{Deck, Input, NuConstants, Scale, SpecRng, TxnKind};
use crate::error::{BenchError, Result};
use crate::latency::{Latencies, Summary};

/// When the terminals stop.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Limit {
    /// After this long.
    Duration(Duration),
    /// After this many transactions per terminal (tests).
    Transactions(u64),
}

/// Counts of one transaction type.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct KindCounts {
    /// Finished: committed or rolled back as the spec asks.
    pub done: u64,
    pub rolled_back: u64,
    /// Reruns after a conflict.
    pub retries: u64,
}

/// What the terminals did.
#[derive(Clone, Debug, Default)]
pub struct DriveResult {
    pub threads: usize,
    pub elapsed: Duration,
    pub counts: BTreeMap<TxnKind, KindCounts>,
    pub latencies: Latencies,
    /// Per second of the run: (New-Orders, all transactions) finished.
    pub per_second: Vec<(u64, u64)>,
    /// The analytic threads' queries (none without analytic threads).
    pub analytic: AnalyticResult,
}

impl DriveResult {
    pub fn total(&self) -> u64 {
        self.counts.values().map(|c| c.done).sum()
    }

    pub fn of(&self, kind: TxnKind) -> KindCounts {
        self.counts.get(&kind).copied().unwrap_or_default()
    }

    /// New-Orders per minute (committed and rolled back, as the spec's
    /// tpmC counts every completed New-Order).
    pub fn tpmc(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs == 0.0 {
            return 0.0;
        }
        self.of(TxnKind::NewOrder).done as f64 * 60.0 / secs
    }

    /// Transactions per second, all types.
    pub fn tps(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs == 0.0 {
            return 0.0;
        }
        self.total() as f64 / secs
    }

    fn merge(&mut self, other: ThreadOut) {
        for (k, c) in other.counts {
            let m = self.counts.entry(k).or_default();
            m.done += c.done;
            m.rolled_back += c.rolled_back;
            m.retries += c.retries;
        }
        self.latencies.merge(&other.latencies);
        if self.per_second.len() < other.per_second.len() {
            self.per_second.resize(other.per_second.len(), (0, 0));
        }
        for (m, s) in self.per_second.iter_mut().zip(other.per_second) {
            m.0 += s.0;
            m.1 += s.1;
        }
    }
}

#[derive(Default)]
struct ThreadOut {
    /// When the terminal stopped, since the run's start.
    ended: Duration,
    counts: BTreeMap<TxnKind, KindCounts>,
    latencies: Latencies,
    per_second: Vec<(u64, u64)>,
}

/// Run `threads` terminals against `backend` until `limit`; `seed` picks
/// the run-time NURand constants and each terminal's draws.
pub fn drive(
    backend: &dyn Backend,
    scale: &Scale,
    threads: usize,
    limit: Limit,
    seed: u64,
) -> Result<DriveResult> {
    drive_with_analytics(backend, scale, threads, 0, limit, seed)
}

/// [`drive`] with `analytic_threads` threads running the CH queries
/// (`backend.analyst()`) beside the terminals, over
/// [`Window::everything`]; their figures are the result's `analytic`.
pub fn drive_with_analytics(
    backend: &dyn Backend,
    scale: &Scale,
    threads: usize,
    analytic_threads: usize,
    limit: Limit,
    seed: u64,
) -> Result<DriveResult> {
    if threads == 0 {
        return Err(BenchError::Config("tpcc needs at least 1 thread".into()));
    }
    // Every analyst is made before the clock starts, so a backend without
    // an analytic side fails before any terminal runs.
    let mut analysts = (0..analytic_threads)
        .map(|_| backend.analyst())
        .collect::<Result<Vec<_>>>()?;
    let constants = NuConstants::run(&NuConstants::load(), seed);
    let stop = AtomicBool::new(false);
    let running = AtomicUsize::new(threads);
    let window = Window::everything();
    let start = Instant::now();
    let (outs, analytic_outs) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, running) = (&stop, &running);
                s.spawn(move || {
                    let home = (t as u32 % scale.warehouses) + 1;
                    let r = terminal_loop(
                        backend, scale, home, t as u64, seed, constants, limit, start, stop,
                    );
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    running.fetch_sub(1, Ordering::Relaxed);
                    r
                })
            })
            .collect();
        let analytic_handles: Vec<_> = analysts
            .iter_mut()
            .enumerate()
            .map(|(a, analyst)| {
                let (stop, running, window) = (&stop, &running, &window);
                s.spawn(move || {
                    let done =
                        || stop.load(Ordering::Relaxed) || running.load(Ordering::Relaxed) == 0;
                    let r = analytic_loop(analyst.as_mut(), a, window, &done);
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r.map(|mut out| {
                        out.elapsed = start.elapsed();
                        out
                    })
                })
            })
            .collect();
        let outs: Vec<Result<ThreadOut>> = handles.into_iter().map(|h| join(h, &stop)).collect();
        let analytic_outs: Vec<Result<AnalyticResult>> = analytic_handles
            .into_iter()
            .map(|h| join(h, &stop))
            .collect();
        (outs, analytic_outs)
    });
    let mut result = DriveResult {
        threads,
        ..DriveResult::default()
    };
    for out in outs {
        let out = out?;
        result.elapsed = result.elapsed.max(out.ended);
        result.merge(out);
    }
    result.analytic.threads = analytic_threads;
    for out in analytic_outs {
        let out = out?;
        result.analytic.elapsed = result.analytic.elapsed.max(out.elapsed);
        result.analytic.merge(out);
    }
    Ok(result)
}

/// A thread's result; a panic stops the others and is the run's error.
fn join<T>(h: std::thread::ScopedJoinHandle<'_, Result<T>>, stop: &AtomicBool) -> Result<T> {
    h.join().unwrap_or_else(|p| {
        stop.store(true, Ordering::Relaxed);
        Err(BenchError::Panic(panic_message(&p)))
    })
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a terminal panicked".into())
}

#[allow(clippy::too_many_arguments)]
fn terminal_loop(
    backend: &dyn Backend,
    scale: &Scale,
    home: u32,
    thread: u64,
    seed: u64,
    constants: NuConstants,
    limit: Limit,
    start: Instant,
    stop: &AtomicBool,
) -> Result<ThreadOut> {
    let mut terminal = backend.terminal(scale, home)?;
    let mut rng = SpecRng::new(
        seed ^ (thread + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        constants,
    );
    let mut deck = Deck::standard();
    let mut out = ThreadOut::default();
    let mut n = 0u64;
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match limit {
            Limit::Duration(d) if start.elapsed() >= d => break,
            Limit::Transactions(max) if n >= max => break,
            _ => {}
        }
        let kind = deck.deal(&mut rng);
        let input = Input::draw(kind, &mut rng, scale, home);
        let t0 = Instant::now();
        let (outcome, reply) = terminal.run(&input)?;
        let took = t0.elapsed();
        // The driver takes the read-only transactions' output (the
        // customer's last order and lines, the low-stock count) as a
        // client would, so no backend can skip producing it.
        std::hint::black_box(reply);
        out.latencies.record(kind.name(), took);
        let c = out.counts.entry(kind).or_default();
        c.done += 1;
        c.rolled_back += u64::from(outcome == Outcome::RolledBack);
        c.retries += terminal.take_retries();
        let second = (t0 + took - start).as_secs() as usize;
        if out.per_second.len() <= second {
            out.per_second.resize(second + 1, (0, 0));
        }
        out.per_second[second].0 += u64::from(kind == TxnKind::NewOrder);
        out.per_second[second].1 += 1;
        n += 1;
    }
    out.ended = start.elapsed();
    Ok(out)
}

/// One transaction type in one cell.
#[derive(Clone, Debug, Serialize)]
pub struct KindRow {
    pub kind: &'static str,
    pub done: u64,
    pub rolled_back: u64,
    pub retries: u64,
    pub latency: Summary,
}
