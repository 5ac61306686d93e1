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
        mapped_reads: false,
        optimistic: true,
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

/// hint-bits' seq-scan rows, then its index rows.
fn hint_bits_rows(v: &serde_json::Value) -> Vec<&serde_json::Value> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .chain(v["index_rows"].as_array().unwrap())
        .collect()
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

/// One entry per interval of a run of at least `at_least` (and at most
/// `at_most`, when the run's length is known), in time order, each
/// beginning where the one before ended, together covering the run; the
/// busy ones with a p99. On a loaded machine the reporter wakes late (an
/// interval longer than asked, so fewer of them): the count is only held to
/// half the intervals the run holds, and coverage is what is checked.
fn assert_intervals(row: &serde_json::Value, at_least: Duration, at_most: Option<Duration>) {
    let series = row["intervals"]
        .as_array()
        .unwrap_or_else(|| panic!("{row}"));
    let every = INTERVAL.as_secs_f64();
    let full = (at_least.as_secs_f64() / every).floor() as usize;
    let most = at_most.map_or(usize::MAX, |d| {
        (d.as_secs_f64() / every).floor() as usize + 2
    });
    assert!(
        series.len() * 2 >= full && series.len() <= most,
        "{} intervals over {at_least:?}..{at_most:?} at {every} s: {row}",
        series.len()
    );
    let mut last: Option<f64> = None;
    for i in series {
        let t = i["t_secs"].as_f64().unwrap();
        let secs = i["secs"].as_f64().unwrap();
        assert!(secs > 0.0, "{i}");
        if let Some(end) = last {
            assert!(t > end, "{series:?}");
            assert!(
                (t - secs - end).abs() < 1e-3,
                "an interval does not begin where the one before ended: {series:?}"
            );
        }
        last = Some(t);
        assert!(i["ops_per_sec"].as_f64().is_some(), "{i}");
        // A worker hands its latencies over every few milliseconds, so an
        // interval's p99 may lag its ops (an interval with ops but no
        // latency yet is possible on a busy machine); a p99 given is real.
        if let Some(p99) = i["p99_us"].as_f64() {
            assert!(p99 > 0.0, "{i}");
        }
    }
    let end = last.expect("at least one interval");
    assert!(
        end + every >= at_least.as_secs_f64(),
        "the series ends at {end} s of a run of at least {at_least:?}: {series:?}"
    );
    assert!(
        series.iter().any(|i| i["ops"].as_u64().unwrap() > 0),
        "{row}"
    );
    assert!(
        series.iter().any(|i| i["p99_us"].as_f64().is_some()),
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
        assert_intervals(row, window, Some(window));
        let counted: u64 = r.series.intervals.iter().map(|i| i.ops).sum();
        assert_eq!(counted, r.commits, "{row}");
        assert!(row["intervals"][0]["hit_ratio"].is_null(), "no pool: {row}");
        assert_eq!(row["seed"], 7);
    }
}

#[test]
fn seqscan_partitions_rows_carry_page_and_scan_latencies_intervals_curve_and_seed() {
    use bench::scenarios::seqscan_partitions::{self, Args};
    let dir = tempfile::tempdir().unwrap();
    let window = Duration::from_millis(600);
    let settings = Settings {
        measures: Measures {
            mrc: true,
            ..tiny(dir.path(), 0, vec![], window).measures
        },
        ..tiny(dir.path(), 512, vec![1], window)
    };
    let args = Args {
        balancing: Some(bench::common::Toggle::On),
        floor: Some(bench::common::Toggle::Off),
        table_pct: None,
    };
    let report = bench::common::finish(
        seqscan_partitions::run(&settings, &args).unwrap(),
        &settings,
    )
    .unwrap();
    assert!(report.data_check.ok, "{:?}", report.data_check);
    let text = bench::common::Report::render(&report);
    assert!(text.contains("latency per operation"), "{text}");
    let v = json(&settings);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    for (row, r) in rows.iter().zip(&report.rows) {
        assert_latency(row, seqscan_partitions::SCAN_PAGE);
        assert_latency(row, seqscan_partitions::SCAN);
        // Pages timed in the window: about the pages the pool served in it.
        // The scanner places both edges itself, so a watching thread that
        // runs late on a loaded machine moves neither; what remains is the
        // scan's read-ahead, which pins a few pages before the scanner
        // reaches their rows.
        let timed = row["latency"][seqscan_partitions::SCAN_PAGE]["count"]
            .as_u64()
            .unwrap();
        assert!(
            timed.abs_diff(r.pages) <= r.pages / 100 + 8,
            "{timed} vs {}",
            r.pages
        );
        // A full scan takes at least as long as its slowest page.
        let scan = &row["latency"][seqscan_partitions::SCAN];
        let page = &row["latency"][seqscan_partitions::SCAN_PAGE];
        assert!(scan["max_us"].as_f64() >= page["p50_us"].as_f64(), "{row}");
        // The series runs from the cold scan through the warm-up and the
        // window (the warm-up lasts until enough scans were done: no upper
        // bound).
        assert_intervals(row, settings.warmup + window, None);
        assert!(row["mrc"]["points"].as_array().is_some(), "{row}");
        assert_eq!(row["seed"], 7);
    }
}

#[test]
fn hint_bits_rows_carry_one_scan_latency_per_repetition_and_the_seed_keys_the_index_template() {
    use bench::scenarios::hint_bits::{self, Params};
    use heap::HintMode;
    let dir = tempfile::tempdir().unwrap();
    let settings = tiny(dir.path(), 256, vec![1], Duration::from_millis(100));
    let params = Params {
        rows: 2_000,
        reps: 2,
        modes: vec![HintMode::Never, HintMode::PerPage],
        checksums: vec![false],
        logged: vec![false],
        load_batch: 1_000,
        wal_segment_size: 1 << 20,
        seed: settings.seed(hint_bits::PERMUTATION_SEED),
    };
    assert_eq!(params.seed, 7);
    let report =
        bench::common::finish(hint_bits::run(&settings, &params).unwrap(), &settings).unwrap();
    assert!(
        bench::common::Report::failures(&report).is_empty(),
        "{:?}",
        bench::common::Report::failures(&report)
    );
    let text = bench::common::Report::render(&report);
    assert!(text.contains("latency per operation"), "{text}");
    let v = json(&settings);
    let rows = hint_bits_rows(&v);
    assert_eq!(rows.len(), 4);
    for row in rows {
        assert_latency(row, hint_bits::SCAN);
        assert_eq!(row["latency"][hint_bits::SCAN]["count"], 2, "{row}");
        // The slowest scan is the row's slowest repetition.
        let max_ms = row["scan_ms_max"].as_f64().unwrap();
        let max_us = row["latency"][hint_bits::SCAN]["max_us"].as_f64().unwrap();
        assert!((max_us / 1e3 - max_ms).abs() <= max_ms * 0.002, "{row}");
        assert_eq!(row["seed"], 7);
        assert_eq!(row["intervals"].as_array().map(Vec::len), Some(0));
    }
    // The index template was built for seed 7, under a name of its own.
    let templates: Vec<String> = std::fs::read_dir(dir.path().join("hint-bits"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("-index"))
        .collect();
    assert_eq!(templates.len(), 1, "{templates:?}");
    assert!(templates[0].contains("-seed-7-"), "{templates:?}");
}

#[test]
fn the_seed_fixes_hint_bits_key_permutation() {
    use bench::scenarios::hint_bits::permutation;
    let a = permutation(1_000, 7);
    assert_eq!(a, permutation(1_000, 7));
    assert_ne!(a, permutation(1_000, 8));
    let mut sorted = a.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..1_000).collect::<Vec<i64>>());
}

/// `sweep` and `ticks` at a tiny scale: each row's page-access latency
/// holds one timed access in `latency_every` of those the workers made in
/// the window, and the interval series sums to every access of the run.
fn assert_pool_scenario_rows(report: &bench::scenarios::sweep::SweepReport, settings: &Settings) {
    use bench::scenarios::sweep;
    let text = bench::common::Report::render(report);
    assert!(text.contains("latency per operation"), "{text}");
    assert!(text.contains("one page access in 16 timed"), "{text}");
    let v = json(settings);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), report.rows.len());
    assert!(!rows.is_empty());
    for (row, r) in rows.iter().zip(&report.rows) {
        assert_latency(row, sweep::PAGE_ACCESS);
        assert_eq!(r.latency_every, sweep::LATENCY_EVERY);
        assert_eq!(row["latency_every"], sweep::LATENCY_EVERY);
        let every = r.latency_every;
        let timed = row["latency"][sweep::PAGE_ACCESS]["count"]
            .as_u64()
            .unwrap();
        // Each thread times its accesses 0, 16, 32, ...: over a run of n
        // window accesses it timed n / 16 of them, give or take one.
        let threads = r.threads as u64;
        assert!(
            (timed * every).abs_diff(r.operations) <= every * threads,
            "{timed} timed of {} accesses: {row}",
            r.operations
        );
        // The workers' own count of window accesses is the pool's (the
        // window's flag and the pool's counters are read a few accesses
        // apart at each end).
        assert!(
            r.operations.abs_diff(r.accesses) <= r.accesses / 100 + 64 * threads,
            "{} counted by the workers, {} by the pool",
            r.operations,
            r.accesses
        );
        assert!(r.operations_with_warmup >= r.operations);
        assert_intervals(row, settings.warmup + settings.duration, None);
        let counted: u64 = r.series.intervals.iter().map(|i| i.ops).sum();
        assert_eq!(counted, r.operations_with_warmup, "{row}");
        assert!(
            r.series.intervals.iter().any(|i| i.hit_ratio.is_some()),
            "the pool's hit ratio per interval: {row}"
        );
        assert_eq!(row["seed"], 7);
        assert!(row["mrc"].is_null(), "{row}");
    }
}

#[test]
fn sweep_rows_carry_sampled_page_access_latencies_intervals_summing_to_the_run_and_the_seed() {
    use bench::scenarios::sweep;
    let dir = tempfile::tempdir().unwrap();
    let settings = tiny(dir.path(), 64, vec![1, 2], Duration::from_millis(600));
    let report = sweep::sweep(&settings).unwrap();
    assert_eq!(report.seed, 7);
    assert_pool_scenario_rows(&report, &settings);
}

#[test]
fn ticks_rows_carry_sampled_page_access_latencies_intervals_summing_to_the_run_and_the_seed() {
    use bench::scenarios::sweep;
    let dir = tempfile::tempdir().unwrap();
    let settings = tiny(dir.path(), 64, vec![2], Duration::from_millis(600));
    let report = sweep::ticks(&settings).unwrap();
    assert_eq!(report.seed, 7);
    assert_pool_scenario_rows(&report, &settings);
}

#[test]
fn crash_soak_times_every_acknowledged_unit_and_its_intervals_sum_to_them() {
    use bench::scenarios::crash_soak;
    let dir = tempfile::tempdir().unwrap();
    let settings = tiny(dir.path(), 64, vec![1], Duration::from_millis(300));
    let args = crash_soak::Args { cycles: Some(3) };
    let report = bench::common::finish(
        crash_soak::run_with(&settings, &args, Path::new(env!("CARGO_BIN_EXE_bench"))).unwrap(),
        &settings,
    )
    .unwrap();
    assert_eq!(report.failure, None);
    let text = bench::common::Report::render(&report);
    assert!(text.contains("latency per operation"), "{text}");
    let v = json(&settings);
    let row = &v["rows"][0];
    let r = &report.rows[0];
    // Every OK the parent read was one timed unit: the commits verified
    // but for those found committed without an OK.
    assert_eq!(r.acknowledged, r.commits_verified - r.in_doubt_committed);
    assert!(r.acknowledged > 0, "{row}");
    assert_latency(row, crash_soak::COMMIT);
    let count = |kind: &str| row["latency"][kind]["count"].as_u64().unwrap_or(0);
    assert_eq!(
        count(crash_soak::COMMIT) + count(crash_soak::STATEMENT),
        r.acknowledged,
        "{row}"
    );
    if count(crash_soak::STATEMENT) > 0 {
        assert_latency(row, crash_soak::STATEMENT);
    }
    // The series covers the whole run, cycles and checks.
    let wall = Duration::from_secs_f64(r.wall_secs);
    assert_intervals(row, wall.saturating_sub(INTERVAL), Some(wall + INTERVAL));
    let counted: u64 = r.series.intervals.iter().map(|i| i.ops).sum();
    assert_eq!(counted, r.acknowledged, "{row}");
    assert!(row["intervals"][0]["hit_ratio"].is_null(), "{row}");
    assert_eq!(row["seed"], 7);
    assert_eq!(report.seed, 7);
}

#[test]
fn sweep_and_ticks_rows_carry_the_pools_live_miss_ratio_curve_under_mrc() {
    use bench::scenarios::sweep;
    for run in [sweep::sweep, sweep::ticks] {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = tiny(dir.path(), 64, vec![1], Duration::from_millis(300));
        settings.measures.mrc = true;
        let report = run(&settings).unwrap();
        let text = bench::common::Report::render(&report);
        assert!(text.contains("miss-ratio curve (--mrc)"), "{text}");
        let v = json(&settings);
        let rows = v["rows"].as_array().unwrap();
        assert!(!rows.is_empty());
        for row in rows {
            let c = &row["mrc"];
            assert_eq!(c["pool_pages"], 64, "{row}");
            let points = c["points"].as_array().unwrap_or_else(|| panic!("{row}"));
            assert_eq!(points.len(), 5, "{c}");
            for p in points {
                let h = p["hit_ratio"].as_f64().unwrap();
                assert!((0.0..=1.0).contains(&h), "{c}");
            }
            assert!(c["sampled_accesses"].as_u64().unwrap() > 0, "{c}");
            assert!(c["pool_hit_ratio"].as_f64().is_some(), "{c}");
        }
    }
}

#[test]
fn hint_bits_rows_carry_the_pools_live_miss_ratio_curve_under_mrc() {
    use bench::scenarios::hint_bits::{self, Params};
    use heap::HintMode;
    let dir = tempfile::tempdir().unwrap();
    let mut settings = tiny(dir.path(), 256, vec![1], Duration::from_millis(100));
    settings.measures.mrc = true;
    let params = Params {
        rows: 2_000,
        reps: 1,
        modes: vec![HintMode::Never],
        checksums: vec![false],
        logged: vec![false],
        load_batch: 1_000,
        wal_segment_size: 1 << 20,
        seed: settings.seed(hint_bits::PERMUTATION_SEED),
    };
    let report =
        bench::common::finish(hint_bits::run(&settings, &params).unwrap(), &settings).unwrap();
    let text = bench::common::Report::render(&report);
    assert!(text.contains("miss-ratio curve (--mrc)"), "{text}");
    let v = json(&settings);
    let rows = hint_bits_rows(&v);
    assert_eq!(rows.len(), 2);
    for row in rows {
        let c = &row["mrc"];
        let points = c["points"].as_array().unwrap_or_else(|| panic!("{row}"));
        assert_eq!(points.len(), 5, "{c}");
        assert!(c["sampled_accesses"].as_u64().unwrap() > 0, "{c}");
    }
}
