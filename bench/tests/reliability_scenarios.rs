//! `wal-commit` and `crash-soak` at a tiny scale, called as a library:
//! what they report and that their checks ran, not how fast. The soak's
//! children are the real `bench` program (`CARGO_BIN_EXE_bench`).

use std::path::Path;
use std::time::Duration;

use bench::Settings;
use bench::scenarios::crash_soak::{self, CrashSoakReport};
use bench::scenarios::wal_commit::{self, WalCommitReport};
use bufmgr::{Evictor, SweepBatch};

fn tiny(dir: &Path, threads: Vec<usize>, json: &str) -> Settings {
    Settings {
        pool_buffers: 64,
        duration: Duration::from_millis(300),
        warmup: Duration::from_millis(50),
        threads,
        evictors: vec![Evictor::Clock],
        batches: vec![SweepBatch::Fixed(1)],
        partitions: vec![1],
        rings: vec![true],
        huge_pages: vec![false],
        io: bufmgr::IoMode::Sync,
        direct_io: false,
        mapped_reads: false,
        optimistic: true,
        data_dir: dir.to_path_buf(),
        json: Some(dir.join(json)),
        progress: false,
        quick: true,
        trace: None,
        measures: Default::default(),
    }
}

fn json(settings: &Settings) -> serde_json::Value {
    let text = std::fs::read_to_string(settings.json.as_ref().unwrap()).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn wal_commit_reports_every_thread_count_beside_the_raw_rate() {
    let dir = tempfile::tempdir().unwrap();
    let settings = tiny(dir.path(), vec![1, 4], "wal.json");
    let report: WalCommitReport =
        bench::common::finish(wal_commit::run(&settings).unwrap(), &settings).unwrap();
    assert_eq!(report.rows.len(), 2);
    for r in &report.rows {
        assert!(r.commits > 0 && r.fsyncs > 0, "{r:?}");
        assert!(r.fsyncs <= r.commits, "{r:?}");
        assert_eq!(r.records_read_back, r.commits + 1, "{r:?}");
        let per_fsync = r.commits as f64 / r.fsyncs as f64;
        assert!((r.commits_per_fsync - per_fsync).abs() < 1e-9, "{r:?}");
        assert!(r.raw_fdatasync_per_sec > 0.0 && r.vs_raw > 0.0, "{r:?}");
    }
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let v = json(&settings);
    assert_eq!(v["scenario"], "wal-commit");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        for field in [
            "threads",
            "commits_per_sec",
            "fsyncs_per_sec",
            "commits_per_fsync",
            "raw_fdatasync_per_sec",
            "vs_raw",
        ] {
            assert!(row.get(field).is_some(), "{field} missing from {row}");
        }
    }
    // Every scratch WAL and raw file was removed.
    let left: Vec<_> = std::fs::read_dir(dir.path().join("wal-commit"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn crash_soak_verifies_every_cycle_and_reports_recovery_times() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = tiny(dir.path(), vec![1], "soak.json");
    settings.measures.seed = Some(7);
    let args = crash_soak::Args { cycles: Some(3) };
    let report: CrashSoakReport = bench::common::finish(
        crash_soak::run_with(&settings, &args, Path::new(env!("CARGO_BIN_EXE_bench"))).unwrap(),
        &settings,
    )
    .unwrap();
    assert_eq!(report.failure, None);
    let r = &report.rows[0];
    assert_eq!(r.cycles, 3);
    assert_eq!(report.recovery_ms.len(), 3);
    assert!(r.commits_verified > 0, "{r:?}");
    assert!(r.blocks_checked > 0, "{r:?}");
    assert!(
        r.recovery_ms_mean > 0.0 && r.recovery_ms_max >= r.recovery_ms_p99,
        "{r:?}"
    );
    let v = json(&settings);
    assert_eq!(v["scenario"], "crash-soak");
    assert_eq!(v["rows"][0]["cycles"], 3);
    assert!(
        report.kept_dir.is_none(),
        "a passing soak removes its directory"
    );
}
