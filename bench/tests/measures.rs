//! What every engine scenario records beside its figures, at a tiny scale:
//! latency percentiles per operation kind, the live miss-ratio curve
//! (`--mrc`), the interval series (`--report-interval`), the workload's
//! seed (`--seed`), and the metadata every JSON file starts with.

use std::path::Path;
use std::time::Duration;

use bench::Settings;
use bench::common::{CommonArgs, EvictorChoice, Measures};
use bench::scenarios::scan_resistance::{self, ScanRate};
use bench::scenarios::tables;
use bench::scenarios::{ScenarioKind, bulkload, index_residency, oltp, readonly};
use bufmgr::{Evictor, SweepBatch};

const INTERVAL: Duration = Duration::from_millis(200);

fn tiny(dir: &Path, pool_buffers: usize) -> Settings {
    Settings {
        pool_buffers,
        duration: Duration::from_millis(1000),
        warmup: Duration::from_millis(400),
        threads: vec![2],
        evictors: vec![Evictor::Clock],
        batches: vec![SweepBatch::Fixed(1)],
        partitions: vec![1],
        rings: vec![false],
        huge_pages: vec![false],
        io: bufmgr::IoMode::Sync,
        direct_io: false,
        mapped_reads: false,
        optimistic: true,
        data_dir: dir.to_path_buf(),
        json: Some(dir.join("report.json")),
        progress: false,
        quick: true,
        trace: None,
        measures: Measures {
            seed: Some(7),
            mrc: true,
            report_interval: Some(INTERVAL),
        },
    }
}

fn json(settings: &Settings) -> serde_json::Value {
    let text = std::fs::read_to_string(settings.json.as_ref().unwrap()).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The file starts with `meta`, which names the commit, compiler, kernel,
/// CPU, cores, time and command line.
fn assert_metadata(v: &serde_json::Value) {
    let obj = v.as_object().unwrap();
    assert_eq!(obj.keys().next().map(String::as_str), Some("meta"));
    let meta = &v["meta"];
    for field in [
        "git_commit",
        "rustc",
        "kernel",
        "cpu_model",
        "cores",
        "time_utc",
        "command_line",
    ] {
        assert!(meta.get(field).is_some(), "meta lacks {field}: {meta}");
    }
    assert!(
        meta["rustc"].as_str().unwrap().starts_with("rustc "),
        "{meta}"
    );
    assert!(meta["cores"].as_u64().unwrap() >= 1);
    assert!(meta["time_utc"].as_str().unwrap().ends_with('Z'));
    assert!(
        meta["command_line"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    );
}

/// A row's latency of `kind` has percentiles in order and counts something.
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

/// The curve has its five sizes, hit ratios rising with the size, and the
/// pool's own hit ratio beside them.
fn assert_curve(row: &serde_json::Value) {
    let c = &row["mrc"];
    let points = c["points"].as_array().unwrap_or_else(|| panic!("{row}"));
    let multiples: Vec<f64> = points
        .iter()
        .map(|p| p["multiple"].as_f64().unwrap())
        .collect();
    assert_eq!(multiples, [0.25, 0.5, 1.0, 2.0, 4.0]);
    let hits: Vec<f64> = points
        .iter()
        .map(|p| p["hit_ratio"].as_f64().unwrap())
        .collect();
    assert!(hits.windows(2).all(|w| w[0] <= w[1]), "{hits:?}");
    assert!(hits.iter().all(|h| (0.0..=1.0).contains(h)), "{hits:?}");
    assert!(c["sampled_accesses"].as_u64().unwrap() > 0);
    assert!(c["pool_hit_ratio"].as_f64().is_some());
}

/// One entry per interval over the warm-up and the window: as many as the
/// run's length holds (the last one may be short), in time order.
fn assert_intervals(row: &serde_json::Value, settings: &Settings) {
    let series = row["intervals"].as_array().unwrap();
    let run = (settings.warmup + settings.duration).as_secs_f64();
    let every = INTERVAL.as_secs_f64();
    let full = (run / every).floor() as usize;
    assert!(
        series.len() >= full && series.len() <= full + 2,
        "{} intervals over {run} s at {every} s",
        series.len()
    );
    let mut last = 0.0;
    for i in series {
        let t = i["t_secs"].as_f64().unwrap();
        assert!(t > last, "{series:?}");
        last = t;
        assert!(i["secs"].as_f64().unwrap() <= every * 1.5 + 0.05, "{i}");
        assert!(i["ops_per_sec"].as_f64().is_some());
        assert!(i.get("p99_us").is_some() && i.get("hit_ratio").is_some());
    }
    // The workers were busy from the start: every full interval saw work
    // and a p99.
    for i in &series[..full.min(series.len())] {
        assert!(i["ops"].as_u64().unwrap() > 0, "{i}");
        assert!(i["p99_us"].as_f64().unwrap() > 0.0, "{i}");
    }
}

#[test]
fn scan_resistance_rows_carry_latencies_curve_intervals_seed_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let settings = tiny(dir.path(), 512);
    let params = scan_resistance::Params {
        rates: vec![ScanRate::PerLookup(1)],
        ..scan_resistance::Params::resolve(&Default::default(), &settings).unwrap()
    };
    let report =
        bench::common::finish(scan_resistance::run(&settings, &params).unwrap(), &settings)
            .unwrap();
    let text = bench::common::Report::render(&report);
    assert!(text.contains("lookup p99 us"), "{text}");
    assert!(text.contains("miss-ratio curve"), "{text}");
    let v = json(&settings);
    assert_metadata(&v);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    for row in rows {
        assert_latency(row, scan_resistance::LOOKUP);
        assert_latency(row, scan_resistance::SCAN_PAGE);
        assert_curve(row);
        assert_intervals(row, &settings);
        assert_eq!(row["seed"], 7);
    }
}

#[test]
fn the_seed_fixes_the_keys_each_lookup_thread_draws() {
    let rows = 100_000;
    let a = scan_resistance::first_keys(7, 0, rows, 8);
    assert_eq!(a, scan_resistance::first_keys(7, 0, rows, 8));
    assert_ne!(a, scan_resistance::first_keys(8, 0, rows, 8));
    assert_ne!(
        a,
        scan_resistance::first_keys(7, 1, rows, 8),
        "threads differ"
    );
    assert!(a.iter().all(|k| (1..=rows as i64).contains(k)));
}

#[test]
fn index_residency_live_curve_is_within_a_point_of_the_exact_lru_replay_of_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        threads: vec![4],
        trace: Some(dir.path().join("ir.trace")),
        ..tiny(dir.path(), 1024)
    };
    let params = index_residency::Params {
        runs: 1,
        ..index_residency::Params::resolve(&Default::default(), &settings).unwrap()
    };
    let report =
        bench::common::finish(index_residency::run(&settings, &params).unwrap(), &settings)
            .unwrap();
    let text = bench::common::Report::render(&report);
    assert!(text.contains("exact LRU (trace replay)"), "{text}");
    let v = json(&settings);
    assert_metadata(&v);
    for row in v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .chain(v["runs"].as_array().unwrap())
    {
        assert_latency(row, index_residency::LOOKUP);
        assert_curve(row);
        assert_intervals(row, &settings);
        assert_eq!(row["seed"], 7);
        let exact = row["mrc"]["exact_lru"]
            .as_array()
            .expect("the trace's replay");
        assert_eq!(exact.len(), 5);
        let error = row["mrc"]["error_points"].as_f64().unwrap();
        assert!(error <= 1.0, "mean absolute error {error} points: {row}");
    }
}

#[test]
fn the_seed_fixes_the_probes_index_residency_draws() {
    let a = index_residency::draw_probes(10_000, 1 << 16, 7).unwrap();
    assert_eq!(a, index_residency::draw_probes(10_000, 1 << 16, 7).unwrap());
    assert_ne!(
        a[..16],
        index_residency::draw_probes(10_000, 1 << 16, 8).unwrap()[..16]
    );
}

/// Settings for `kind` through the command line's options, with `--seed 7
/// --mrc --report-interval 0.2`.
fn from_options(kind: ScenarioKind, dir: &Path, pages: usize, threads: usize) -> Settings {
    let args = CommonArgs {
        pool_pages: Some(pages),
        duration: Some(0.6),
        warmup: Some(0.4),
        threads: Some(vec![threads]),
        evictor: Some(EvictorChoice::Clock),
        batch: Some(vec![SweepBatch::Fixed(1)]),
        data_dir: dir.to_path_buf(),
        json: Some(dir.join(format!("{}.json", kind.name()))),
        no_progress: true,
        seed: Some(7),
        mrc: true,
        report_interval: Some(INTERVAL.as_secs_f64()),
        ..Default::default()
    };
    let s = kind.settings(&args).unwrap();
    assert_eq!(
        s.measures,
        Measures {
            seed: Some(7),
            mrc: true,
            report_interval: Some(INTERVAL),
        }
    );
    s
}

/// Every row of `kind`'s JSON carries `kind`'s latencies, a curve, the
/// interval series and the seed it derived its keys from.
fn assert_rows(settings: &Settings, kind: &str, seed: u64) {
    let v = json(settings);
    assert_metadata(&v);
    let rows = v["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        assert_latency(row, kind);
        assert_curve(row);
        assert_eq!(row["seed"], seed, "{row}");
        let series = row["intervals"].as_array().unwrap();
        assert!(!series.is_empty(), "{row}");
        assert!(
            series.iter().any(|i| i["ops"].as_u64().unwrap() > 0),
            "{row}"
        );
    }
}

#[test]
fn oltp_rows_carry_transaction_latencies_curve_intervals_and_seed() {
    let dir = tempfile::tempdir().unwrap();
    let args = oltp::Args {
        commit: Some(oltp::CommitChoice::Async),
        checkpoint_ms: None,
        autovacuum: Some(oltp::AutovacuumChoice::Off),
    };
    let s = from_options(ScenarioKind::Oltp(args), dir.path(), 256, 2);
    bench::common::finish(oltp::run(&s, &args).unwrap(), &s).unwrap();
    assert_rows(&s, oltp::TRANSACTION, 7);
    let v = json(&s);
    let row = &v["rows"][0];
    // The old millisecond fields are the histogram's.
    let p99 = row["latency"][oltp::TRANSACTION]["p99_us"]
        .as_f64()
        .unwrap();
    assert!((row["latency_p99_ms"].as_f64().unwrap() - p99 / 1e3).abs() < 1e-9);
    // Every transaction the window counted was timed, and none after it:
    // the two counts differ by at most the one in flight per client at
    // the window's ends.
    let timed = row["latency"][oltp::TRANSACTION]["count"].as_u64().unwrap();
    let counted = row["transactions"].as_u64().unwrap();
    assert!(
        timed.abs_diff(counted) <= 2,
        "{timed} timed, {counted} counted: {row}"
    );
    assert_intervals(row, &s);
}

#[test]
fn readonly_rows_carry_lookup_latencies_curve_intervals_and_seed() {
    let dir = tempfile::tempdir().unwrap();
    let args = readonly::Args {
        lookups_per_txn: Some(10),
    };
    let s = from_options(ScenarioKind::Readonly(args), dir.path(), 256, 2);
    bench::common::finish(readonly::run(&s, &args).unwrap(), &s).unwrap();
    assert_rows(&s, tables::LOOKUP, 7);
    let v = json(&s);
    for row in v["rows"].as_array().unwrap() {
        assert_intervals(row, &s);
    }
}

#[test]
fn bulkload_rows_carry_the_lookups_latencies_during_the_load() {
    let dir = tempfile::tempdir().unwrap();
    let args = bulkload::Args::default();
    let s = from_options(ScenarioKind::Bulkload(args), dir.path(), 512, 2);
    let report = bench::common::finish(bulkload::run(&s, &args).unwrap(), &s).unwrap();
    assert_rows(&s, tables::LOOKUP, 7);
    for r in &report.rows {
        // Only lookups made during the load are in the latencies.
        let counted = r.series.latency[tables::LOOKUP].count;
        assert!(
            counted > 0 && counted <= r.lookups + 2 * 1000,
            "{counted} vs {}",
            r.lookups
        );
    }
}
