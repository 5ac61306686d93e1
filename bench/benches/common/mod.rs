//! What the micro-benchmarks share: timing a few threads that each do
//! their share of a run.

use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Run one thread for each of the first `threads` of `orders`, over
/// `iters` operations in all (thread 0 also does the remainder). A thread
/// first calls `prepare(order)` off the clock (to register with the pool,
/// say), waits for the others, then times `op(order, i)` for its `i` in
/// `0..n`. Each thread times itself; the run lasts from the first start to
/// the last end, so a main thread descheduled at the barrier cannot
/// shorten it. `name` names the threads in a join failure.
pub fn timed_threads<T: Sync>(
    orders: &[T],
    threads: usize,
    iters: u64,
    name: &str,
    prepare: impl Fn(&T) + Sync,
    op: impl Fn(&T, usize) + Sync,
) -> Duration {
    let barrier = Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
        let handles: Vec<_> = orders
            .iter()
            .take(threads)
            .enumerate()
            .map(|(t, order)| {
                let (prepare, op, barrier) = (&prepare, &op, &barrier);
                let n = iters / threads as u64 + u64::from(t == 0) * (iters % threads as u64);
                s.spawn(move || {
                    prepare(order);
                    barrier.wait();
                    let start = Instant::now();
                    for i in 0..n as usize {
                        op(order, i);
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect(name)).collect()
    });
    let first = spans.iter().map(|s| s.0).min().expect("a thread");
    let last = spans.iter().map(|s| s.1).max().expect("a thread");
    last - first
}
