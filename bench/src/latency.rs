//! Latency percentiles: one HDR histogram per thread and operation kind,
//! merged when the threads are joined.
//!
//! A thread owns a [`Latencies`] (no sharing, no locks on the measured path),
//! records each operation's duration in nanoseconds, and hands it back when it
//! ends; the scenario merges the threads' histograms with
//! [`Latencies::merge`] and reports a [`Summary`] per kind. Histograms keep
//! three significant digits from 1 ns to one hour; a longer operation is
//! recorded as one hour (saturated) and still counted.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The largest latency a histogram tells apart: one hour, in nanoseconds.
const HIGHEST_NS: u64 = 3_600_000_000_000;
/// Significant decimal digits kept per value.
const SIGNIFICANT_DIGITS: u8 = 3;

/// One histogram of durations.
#[derive(Clone, Debug)]
pub struct Latency {
    histogram: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

impl Latency {
    pub fn new() -> Latency {
        Latency {
            histogram: Histogram::new_with_bounds(1, HIGHEST_NS, SIGNIFICANT_DIGITS)
                .expect("constant histogram bounds are valid"),
        }
    }

    /// Records one operation that took `elapsed`.
    pub fn record(&mut self, elapsed: Duration) {
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.histogram.saturating_record(ns);
    }

    /// Adds every value recorded in `other`.
    pub fn merge(&mut self, other: &Latency) {
        self.histogram
            .add(&other.histogram)
            .expect("histograms with the same bounds always add");
    }

    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// Forgets every value (the bounds stay).
    pub fn reset(&mut self) {
        self.histogram.reset();
    }

    /// The percentiles of what was recorded (all zero when nothing was).
    pub fn summary(&self) -> Summary {
        let h = &self.histogram;
        let at = |q: f64| h.value_at_quantile(q) as f64 / 1_000.0;
        Summary {
            count: h.len(),
            p50_us: at(0.50),
            p95_us: at(0.95),
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: h.max() as f64 / 1_000.0,
        }
    }
}

/// Percentiles of one operation kind, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// One histogram per operation kind (`"lookup"`, `"new-order"`, ...), owned
/// by one thread.
#[derive(Clone, Debug, Default)]
pub struct Latencies {
    kinds: BTreeMap<&'static str, Latency>,
}

impl Latencies {
    pub fn new() -> Latencies {
        Latencies::default()
    }

    /// Records one operation of `kind` that took `elapsed`.
    pub fn record(&mut self, kind: &'static str, elapsed: Duration) {
        self.kinds.entry(kind).or_default().record(elapsed);
    }

    /// Adds every value of every kind recorded in `other`.
    pub fn merge(&mut self, other: &Latencies) {
        for (kind, latency) in &other.kinds {
            self.kinds.entry(kind).or_default().merge(latency);
        }
    }

    /// The histogram of `kind`, if anything of that kind was recorded.
    pub fn get(&self, kind: &str) -> Option<&Latency> {
        self.kinds.get(kind)
    }

    /// Each kind's percentiles, in the kinds' order.
    pub fn summaries(&self) -> Vec<(&'static str, Summary)> {
        self.kinds.iter().map(|(k, l)| (*k, l.summary())).collect()
    }

    /// [`summaries`](Self::summaries) keyed by kind: a JSON row's
    /// `latency` field.
    pub fn by_kind(&self) -> ByKind {
        self.kinds
            .iter()
            .map(|(k, l)| (k.to_string(), l.summary()))
            .collect()
    }
}

/// Each operation kind's percentiles (a row's `latency` field).
pub type ByKind = BTreeMap<String, Summary>;
/// The latency table, then the miss-ratio curve table (empty without
/// `--mrc`), of a scenario's rows: one `(label, latencies, curve)` each.
pub fn tables_with_curves(rows: &[(String, &ByKind, Option<&crate::common::Curve>)]) -> String {
    let lat: Vec<(String, &ByKind)> = rows.iter().map(|(l, k, _)| (l.clone(), *k)).collect();
    let curves: Vec<(String, Option<&crate::common::Curve>)> =
        rows.iter().map(|(l, _, c)| (l.clone(), *c)).collect();
    table(&lat) + &crate::common::curve_table(&curves)
}

/// The latency table printed under a scenario's table: one line per row
/// and operation kind, the row's label first.
pub fn table(rows: &[(String, &ByKind)]) -> String {
    let mut t = crate::common::Table::new(&[
        "row",
        "operation",
        "count",
        "p50 us",
        "p95 us",
        "p99 us",
        "p99.9 us",
        "max us",
    ]);
    let us = |v: f64| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    };
    for (label, kinds) in rows {
        for (kind, s) in kinds.iter() {
            t.push(vec![
                label.clone(),
                kind.clone(),
                s.count.to_string(),
                us(s.p50_us),
                us(s.p95_us),
                us(s.p99_us),
                us(s.p999_us),
                us(s.max_us),
            ]);
        }
    }
    if t.rows.is_empty() {
        return String::new();
    }
    format!("latency per operation (measured window, all threads merged):\n{t}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_sequence_are_within_the_histograms_precision() {
        let mut l = Latency::new();
        for us in 1..=1_000u64 {
            l.record(Duration::from_micros(us));
        }
        let s = l.summary();
        assert_eq!(s.count, 1_000);
        let close = |got: f64, want: f64| (got - want).abs() <= want * 0.002;
        assert!(close(s.p50_us, 500.0), "p50 {}", s.p50_us);
        assert!(close(s.p99_us, 990.0), "p99 {}", s.p99_us);
        assert!(close(s.max_us, 1_000.0), "max {}", s.max_us);
    }

    #[test]
    fn merged_threads_count_every_operation_of_every_kind() {
        let mut a = Latencies::new();
        let mut b = Latencies::new();
        a.record("lookup", Duration::from_micros(3));
        b.record("lookup", Duration::from_millis(40));
        b.record("scan", Duration::from_secs(2));
        a.merge(&b);
        let lookup = a.get("lookup").unwrap().summary();
        assert_eq!(lookup.count, 2);
        assert!(lookup.max_us > 39_000.0 && lookup.max_us < 40_100.0);
        assert_eq!(a.get("scan").unwrap().count(), 1);
        assert!(a.get("insert").is_none());
    }

    #[test]
    fn an_operation_longer_than_an_hour_is_counted_as_an_hour() {
        let mut l = Latency::new();
        l.record(Duration::from_secs(10_000));
        let s = l.summary();
        assert_eq!(s.count, 1);
        assert!(s.max_us >= 3_599_000_000.0, "max {}", s.max_us);
    }
}
