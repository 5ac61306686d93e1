//! The terminals: one thread each, bound to a home warehouse (thread `t`
//! to warehouse `t mod W + 1`), dealing the mix from a shuffled deck of
//! 100 cards (45/43/4/4/4), drawing each transaction's input per spec and
//! running it with no keying or think time. Each thread records its
//! latencies per transaction type in its own HDR histograms, counts
//! commits, rollbacks and conflict retries, and the transactions begun in
//! each second of the run (for the throughput plot); all are merged when
//! the threads are joined. The first error stops every terminal and is the
//! run's result.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::backend::{Backend, Outcome};
use super::spec::{Deck, Input, NuConstants, Scale, SpecRng, TxnKind};
use crate::error::{BenchError, Result};
use crate::latency::Latencies;

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
    if threads == 0 {
        return Err(BenchError::Config("tpcc needs at least 1 thread".into()));
    }
    let constants = NuConstants::run(&NuConstants::load(), seed);
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let outs: Vec<Result<ThreadOut>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let stop = &stop;
                s.spawn(move || {
                    let home = (t as u32 % scale.warehouses) + 1;
                    let r = terminal_loop(
                        backend, scale, home, t as u64, seed, constants, limit, start, stop,
                    );
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|p| {
                    stop.store(true, Ordering::Relaxed);
                    Err(BenchError::Panic(panic_message(&p)))
                })
            })
            .collect()
    });
    let elapsed = start.elapsed();
    let mut result = DriveResult {
        threads,
        elapsed,
        ..DriveResult::default()
    };
    for out in outs {
        result.merge(out?);
    }
    Ok(result)
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
        let outcome = terminal.run(&input)?;
        let took = t0.elapsed();
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
    Ok(out)
}
