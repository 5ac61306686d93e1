//! Criterion's measurement of the benchmarking thread's CPU time (the
//! kernel's count of the time it ran, `/proc/thread-self/schedstat`, user
//! and system time alike), for benches on a machine shared with other
//! work, where wall time would count the others' time as the thread's own.
//! The count moves at context switches and timer ticks, so a sample must
//! last many ticks. Included by the benches that use it with
//! `#[path = "common/cpu.rs"] mod cpu;`.

use criterion::Throughput;
use criterion::measurement::{Measurement, ValueFormatter};

/// The CPU time the calling thread has run, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat")
        .expect("/proc/thread-self/schedstat is readable");
    stat.split_whitespace()
        .next()
        .and_then(|ns| ns.parse().ok())
        .unwrap_or_else(|| panic!("/proc/thread-self/schedstat reads {stat:?}"))
}

/// Criterion's measurement of the thread's CPU time (module docs).
pub struct ThreadCpu;

impl Measurement for ThreadCpu {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns() - start
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}

/// CPU nanoseconds shown as times (`ms cpu`) and rows per CPU second.
struct CpuFormatter;

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = if typical < 1e3 {
            (1.0, "ns cpu")
        } else if typical < 1e6 {
            (1e-3, "us cpu")
        } else {
            (1e-6, "ms cpu")
        };
        values.iter_mut().for_each(|v| *v *= factor);
        unit
    }

    fn scale_throughputs(
        &self,
        _typical: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let n = match *throughput {
            Throughput::Elements(n) | Throughput::ElementsAndBytes { elements: n, .. } => n,
            Throughput::Bytes(n) | Throughput::BytesDecimal(n) | Throughput::Bits(n) => n,
        } as f64;
        values.iter_mut().for_each(|v| *v = n * 1e9 / *v / 1e6);
        "M/cpu s"
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}
