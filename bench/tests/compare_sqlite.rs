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
