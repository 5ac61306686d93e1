#![cfg(feature = "sqlite")]
//! `compare-sqlite` under `--quick` (with fewer rows still: this is a debug
//! build), called as a library: every workload reports a row with the JSON
//! fields of the README, both sides agree (the run would fail otherwise),
//! and a second run reuses the cached data. The first run records
//! `--trace`: a file per engine database, each holding exactly the
//! accesses and evictions its pool counted.

use std::path::{Path, PathBuf};

use bench::common::{CommonArgs, TraceFile};
use bench::scenarios::{ScenarioKind, compare_sqlite};
use bufmgr::trace::Trace;

fn run(
    dir: &Path,
    args: compare_sqlite::Args,
    json: &str,
    trace: Option<PathBuf>,
) -> (serde_json::Value, Vec<TraceFile>) {
    let path = dir.join(json);
    let common = CommonArgs {
        quick: true,
        trace,
        data_dir: dir.join("data"),
        json: Some(path.clone()),
        no_progress: true,
        ..Default::default()
    };
    let kind = ScenarioKind::CompareSqlite(args);
    let settings = kind.settings(&common).unwrap();
    // `run` prints the table, writes the JSON and fails on any mismatch.
    let (report, traces) = kind.run_with_traces(&settings).unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert!(
        report.render().contains("data check: ok"),
        "{}",
        report.render()
    );
    let v = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (v, traces)
}

#[test]
fn compare_sqlite_quick_reports_every_workload_and_both_sides_agree() {
    let dir = tempfile::tempdir().unwrap();
    let args = compare_sqlite::Args {
        rows: Some(5_000),
        zipf_rows: Some(8_000),
        ..Default::default()
    };
    let (v, traces) = run(
        dir.path(),
        args,
        "cs.json",
        Some(dir.path().join("cs.trace")),
    );
    let names: Vec<String> = traces
        .iter()
        .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "cs-accounts.trace",
            "cs-bulkload-round1.trace",
            "cs-bulkload-round2.trace",
            "cs-zipf.trace"
        ]
    );
    for f in &traces {
        let t = Trace::read(&f.path).unwrap();
        let evictions = t.evictions().count() as u64;
        assert!(f.accesses > 0, "{f:?}");
        assert_eq!(
            (t.accesses().count() as u64, evictions),
            (f.accesses, f.evictions),
            "{f:?}"
        );
        if !f.path.to_string_lossy().contains("bulkload") {
            // The lookup threads, by number.
            assert!(t.accesses().any(|a| a.thread == 1), "{f:?}");
        }
    }
    assert_eq!(v["scenario"], "compare-sqlite");
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["accounts_rows"], 5_000);
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<(&str, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["workload"].as_str().unwrap(),
                r["threads"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("lookup-1", 1),
            ("lookup-1", 2),
            ("lookup-100", 1),
            ("lookup-100", 2),
            ("scan-count", 1),
            ("scan-sum", 1),
            ("scan-count-owned", 1),
            ("scan-sum-owned", 1),
            ("bulk-load", 1),
            ("zipf", 2),
        ]
    );
    for r in rows {
        for f in [
            "workload",
            "threads",
            "engine_per_sec",
            "sqlite_per_sec",
            "ratio",
            "engine_runs",
            "sqlite_runs",
            "engine_min",
            "engine_max",
            "sqlite_min",
            "sqlite_max",
            "checked",
            "agree",
        ] {
            assert!(r.get(f).is_some(), "{f} missing from {r}");
        }
        let (e, s) = (
            r["engine_per_sec"].as_f64().unwrap(),
            r["sqlite_per_sec"].as_f64().unwrap(),
        );
        assert!(e > 0.0 && s > 0.0, "{r}");
        let ratio = r["ratio"].as_f64().unwrap();
        assert!((ratio - e / s).abs() <= 1e-9 * ratio.max(1.0), "{r}");
        assert_eq!(r["agree"], true, "{r}");
        assert!(r["error"].is_null(), "{r}");
        assert!(r["checked"].as_u64().unwrap() > 0, "{r}");
        // Alternating runs, at least two per side (--quick: 2).
        assert_eq!(r["engine_runs"].as_array().unwrap().len(), 2, "{r}");
        assert_eq!(r["sqlite_runs"].as_array().unwrap().len(), 2, "{r}");
        if r["workload"].as_str().unwrap().starts_with("scan") {
            assert_eq!(r["engine_result"], r["sqlite_result"], "{r}");
            assert!(!r["engine_result"].is_null(), "{r}");
        }
        if r["workload"] != "zipf" && r["workload"] != "bulk-load" {
            // Everything stayed in the engine's pool.
            assert_eq!(r["engine_pages_read"], 0, "{r}");
        }
    }
    let count = rows.iter().find(|r| r["workload"] == "scan-count").unwrap();
    assert!(count["engine_result"].as_i64().unwrap() > 0, "{count}");
    assert_eq!(v["accounts_data"]["engine_reused"], false);

    // Again, one workload: the cached data of both sides is reused.
    let again = compare_sqlite::Args {
        rows: Some(5_000),
        workloads: Some("scan-sum".parse().unwrap()),
        ..Default::default()
    };
    let (v, _) = run(dir.path(), again, "again.json", None);
    assert_eq!(v["rows"].as_array().unwrap().len(), 1);
    assert_eq!(v["accounts_data"]["engine_reused"], true, "{v}");
    assert_eq!(v["accounts_data"]["sqlite_reused"], true, "{v}");
}

/// A row's latency of `kind` counts `count` operations (or about as many,
/// within `slack`) with percentiles in order.
fn assert_latency(row: &serde_json::Value, kind: &str, count: u64, slack: u64) {
    let l = &row["latency"][kind];
    let f = |k: &str| {
        l[k].as_f64()
            .unwrap_or_else(|| panic!("{kind}.{k} in {row}"))
    };
    let n = l["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("{kind} in {row}"));
    assert!(
        n.abs_diff(count) <= slack,
        "{kind}: {n} timed, {count} done: {row}"
    );
    assert!(n > 0 && f("p50_us") > 0.0, "{kind}: {l}");
    assert!(f("p50_us") <= f("p95_us"), "{l}");
    assert!(f("p95_us") <= f("p99_us"), "{l}");
    assert!(f("p99_us") <= f("p999_us"), "{l}");
    assert!(f("p999_us") <= f("max_us"), "{l}");
}

#[test]
fn compare_sqlite_rows_carry_both_sides_latency_per_lookup_scan_and_load_row() {
    let dir = tempfile::tempdir().unwrap();
    let rows = 5_000u64;
    let args = compare_sqlite::Args {
        rows: Some(rows),
        zipf_rows: Some(8_000),
        ..Default::default()
    };
    let (v, _) = run(dir.path(), args, "lat.json", None);
    let rounds = v["rounds"].as_u64().unwrap();
    let every = compare_sqlite::LOAD_ROW_EVERY;
    let mut kinds_seen = 0;
    for row in v["rows"].as_array().unwrap() {
        let threads = row["threads"].as_u64().unwrap();
        match row["unit"].as_str().unwrap() {
            "lookups" => {
                // Every lookup ending inside a window is timed; the window's
                // count is read a lookup or two per thread from its flag.
                for (kind, ops) in [
                    (compare_sqlite::ENGINE_LOOKUP, "engine_window_ops"),
                    (compare_sqlite::SQLITE_LOOKUP, "sqlite_window_ops"),
                ] {
                    let done = row[ops].as_u64().unwrap();
                    assert!(done > 0, "{row}");
                    assert_latency(row, kind, done, 4 * threads * rounds + done / 100);
                }
                kinds_seen |= 1;
            }
            _ if row["workload"] == "bulk-load" => {
                // SQLite times inserts 0, 16, 32, ...; the engine the same
                // rows, each when the load asks for the row after it.
                let sqlite = rows.div_ceil(every);
                let engine = (0..rows - 1).filter(|i| i % every == 0).count() as u64;
                assert_latency(row, compare_sqlite::SQLITE_LOAD_ROW, rounds * sqlite, 0);
                assert_latency(row, compare_sqlite::ENGINE_LOAD_ROW, rounds * engine, 0);
                kinds_seen |= 2;
            }
            _ => {
                // One scan per run and side; the slowest is the run of the
                // lowest rate.
                for (kind, min) in [
                    (compare_sqlite::ENGINE_SCAN, "engine_min"),
                    (compare_sqlite::SQLITE_SCAN, "sqlite_min"),
                ] {
                    assert_latency(row, kind, rounds, 0);
                    let slowest_us = rows as f64 / row[min].as_f64().unwrap() * 1e6;
                    let max_us = row["latency"][kind]["max_us"].as_f64().unwrap();
                    assert!(
                        (max_us - slowest_us).abs() <= slowest_us * 0.002 + 0.01,
                        "{kind}: max {max_us} us, slowest run {slowest_us} us: {row}"
                    );
                }
                kinds_seen |= 4;
            }
        }
        assert!(row["seed"].as_u64().is_some(), "{row}");
        assert_eq!(row["intervals"].as_array().map(Vec::len), Some(0));
    }
    assert_eq!(kinds_seen, 7, "lookup, load and scan rows all ran");
}
