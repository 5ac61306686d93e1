//! What timing one operation costs the scenarios' workers
//! (`harness::Recorder`): an `Instant::now()` pair and an HDR histogram
//! increment, beside the `Instant::now()` pair alone.
//!
//! ```text
//!   latency/instant_pair      two Instant::now() calls
//!   latency/record            Recorder::record (Instant::now() + histogram), no interval reporter
//!   latency/record_live       the same with an interval reporter to hand values to
//! ```

use std::hint::black_box;
use std::time::Instant;

use bench::harness::{LiveLatency, Recorder};
use criterion::{Criterion, criterion_group, criterion_main};

fn latency(c: &mut Criterion) {
    let mut g = c.benchmark_group("latency");
    g.bench_function("instant_pair", |b| {
        b.iter(|| {
            let t = Instant::now();
            black_box(Instant::now().duration_since(black_box(t)))
        })
    });
    let mut rec = Recorder::new(None, "op");
    g.bench_function("record", |b| {
        b.iter(|| {
            let t = Instant::now();
            rec.record(black_box("op"), t)
        })
    });
    let live = LiveLatency::new();
    let mut rec = Recorder::new(Some(&live), "op");
    g.bench_function("record_live", |b| {
        b.iter(|| {
            let t = Instant::now();
            rec.record(black_box("op"), t)
        })
    });
    g.finish();
}

criterion_group!(benches, latency);
criterion_main!(benches);
