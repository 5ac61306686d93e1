//! The latency, interval series and seed of the scenarios outside the
//! engine workloads (`wal-commit`, the pool scenarios), at a tiny scale.

use std::path::Path;
use std::time::Duration;

use bench::Settings;
use bench::common::Measures;
use bufmgr::{Evictor, SweepBatch};

const INTERVAL: Duration = Duration::from_millis(200);

fn tiny(dir: &Path, pool_buffers: usize, threads: Vec<usize>, duration: Duration) -> Settings {
    Settings {
        pool_buffers,
        duration,
        warmup: Duration::from_millis(200),
        threads,
        evictors: vec![Evictor::Clock],
        batches: vec![SweepBatch::Fixed(1)],
        partitions: vec![1],
        rings: vec![false],
        huge_pages: vec![false],
        io: bufmgr::IoMode::Sync,
        direct_io: false,
        data_dir: dir.to_path_buf(),
        json: Some(dir.join("report.json")),
        progress: false,
        quick: true,
        trace: None,
        measures: Measures {
            seed: Some(7),
            mrc: false,
            report_interval: Some(INTERVAL),
        },
    }
}

fn json(settings: &Settings) -> serde_json::Value {
    let text = std::fs::read_to_string(settings.json.as_ref().unwrap()).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A row's latency of `kind` counts something and has its percentiles in
/// order.
fn assert_latency(row: &serde_json::Value, kind: &str) {
    let l = &row["latency"][kind];
    let f = |k: &str| {
        l[k].as_f64()
            .unwrap_or_else(|| panic!("{kind}.{k} in {row}"))
    };
    assert!(l["count"].as_u64().unwrap() > 0, "{kind}: {l}");
    assert!(f("p50_us") > 0.0, "{kind}: {l}");
    assert!(f("p50_us") <= f("p95_us"), "{l}");
    assert!(f("p95_us") <= f("p99_us"), "{l}");
    assert!(f("p99_us") <= f("p999_us"), "{l}");
    assert!(f("p999_us") <= f("max_us"), "{l}");
}

/// One entry per interval of a window of `window`: as many as it holds
/// (the last may be short), in time order, each of at most about one
/// interval; the busy ones with a p99.
fn assert_intervals(row: &serde_json::Value, window: Duration) {
    let series = row["intervals"]
        .as_array()
        .unwrap_or_else(|| panic!("{row}"));
    let every = INTERVAL.as_secs_f64();
    let full = (window.as_secs_f64() / every).floor() as usize;
    assert!(
        series.len() >= full && series.len() <= full + 2,
        "{} intervals over {window:?} at {every} s: {row}",
        series.len()
    );
    let mut last = 0.0;
    for i in series {
        let t = i["t_secs"].as_f64().unwrap();
        assert!(t > last, "{series:?}");
        last = t;
        assert!(i["secs"].as_f64().unwrap() <= every * 1.5 + 0.05, "{i}");
        assert!(i["ops_per_sec"].as_f64().is_some(), "{i}");
        if i["ops"].as_u64().unwrap() > 0 {
            assert!(i["p99_us"].as_f64().unwrap() > 0.0, "{i}");
        }
    }
    assert!(
        series.iter().any(|i| i["ops"].as_u64().unwrap() > 0),
        "{row}"
    );
}

#[test]
fn wal_commit_rows_carry_commit_latencies_one_interval_per_interval_and_the_seed() {
    use bench::scenarios::wal_commit;
    let dir = tempfile::tempdir().unwrap();
    let window = Duration::from_millis(600);
    let settings = tiny(dir.path(), 64, vec![1, 2], window);
    let report = bench::common::finish(wal_commit::run(&settings).unwrap(), &settings).unwrap();
    let text = bench::common::Report::render(&report);
    assert!(text.contains("latency per operation"), "{text}");
    let v = json(&settings);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for (row, r) in rows.iter().zip(&report.rows) {
        assert_latency(row, wal_commit::COMMIT);
        // Every commit was timed, and every one counted in an interval.
        assert_eq!(row["latency"][wal_commit::COMMIT]["count"], r.commits);
        assert_intervals(row, window);
        let counted: u64 = r.series.intervals.iter().map(|i| i.ops).sum();
        assert_eq!(counted, r.commits, "{row}");
        assert!(row["intervals"][0]["hit_ratio"].is_null(), "no pool: {row}");
        assert_eq!(row["seed"], 7);
    }
}
