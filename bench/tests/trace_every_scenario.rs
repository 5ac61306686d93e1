//! `--trace FILE` on every scenario that runs a buffer pool, at the tiny
//! scales the other bench tests use, called as a library
//! (`ScenarioKind::run_with_traces`): each measured run writes its own
//! file, named by its cell, that decodes and holds exactly the accesses and
//! evictions its pool counted (from open to the end of the measured run:
//! the data check after it is not recorded); the worker threads carry the
//! trace ids bench/doc/tools.md gives them; the scenarios that cannot record
//! refuse the option with the reason. (`compare-sqlite` is checked in
//! `tests/compare_sqlite.rs`, which needs the `sqlite` feature.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use bench::Settings;
use bench::common::{CommonArgs, EvictorChoice, Toggle, TraceFile};
use bench::scenarios::{
    ScenarioKind, bulkload, crash_soak, hint_bits, index_residency, oltp, readonly,
    scan_resistance, seqscan_partitions,
};
use bufmgr::trace::Trace;

/// Tiny settings for `kind` with `--trace <dir>/t.trace`: a pool of
/// `pages`, windows of a few tenths of a second, the clock only.
fn tiny(kind: ScenarioKind, dir: &Path, pages: usize, extra: CommonArgs) -> Settings {
    let args = CommonArgs {
        pool_pages: Some(pages),
        duration: Some(0.3),
        warmup: Some(0.2),
        evictor: Some(EvictorChoice::Clock),
        batch: Some(vec![bufmgr::SweepBatch::Fixed(1)]),
        data_dir: dir.to_path_buf(),
        no_progress: true,
        quick: true,
        trace: Some(dir.join("t.trace")),
        ..extra
    };
    kind.settings(&args).unwrap()
}

/// Run `kind` under `--trace` and check every file it lists: one per
/// measured run (`runs`), each name unique and starting with `t-` (or the
/// file itself when `runs` is 1 and the scenario has no parts), each
/// holding exactly the pool's counts, and every id of `threads` recording.
/// Returns the files' names.
fn traced_run(kind: ScenarioKind, s: &Settings, runs: usize, threads: &[u32]) -> Vec<String> {
    let (report, files) = kind.run_with_traces(s).unwrap();
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert_eq!(files.len(), runs, "{}: {files:?}", kind.name());
    let names: Vec<String> = files.iter().map(name).collect();
    let unique: BTreeSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "names repeat: {names:?}");
    // The files listed are the trace files in the directory.
    let dir = s.trace.as_ref().unwrap().parent().unwrap();
    let on_disk: BTreeSet<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".trace"))
        .collect();
    assert_eq!(
        on_disk,
        names.iter().cloned().collect::<BTreeSet<_>>(),
        "{}",
        kind.name()
    );
    for f in &files {
        check_file(f, threads);
    }
    names
}

fn name(f: &TraceFile) -> String {
    f.path.file_name().unwrap().to_string_lossy().into_owned()
}

/// The file decodes, holds exactly what the pool counted, and each of
/// `threads` recorded accesses.
fn check_file(f: &TraceFile, threads: &[u32]) {
    let t = Trace::read(&f.path).unwrap();
    let accesses = t.accesses().count() as u64;
    let evictions = t.evictions().count() as u64;
    assert!(f.accesses > 0, "{f:?}");
    assert_eq!(
        (accesses, evictions),
        (f.accesses, f.evictions),
        "{}: the trace holds (accesses, evictions), the pool counted the other",
        f.path.display()
    );
    let ids: BTreeSet<u32> = t.accesses().map(|a| a.thread).collect();
    for id in threads {
        assert!(
            ids.contains(id),
            "{}: no access by thread {id} in {ids:?}",
            f.path.display()
        );
    }
}

fn path_name(p: &Path) -> &str {
    p.file_name().unwrap().to_str().unwrap()
}

#[test]
fn sweep_and_ticks_trace_each_configuration_with_worker_ids() {
    let dir = tempfile::tempdir().unwrap();
    let two_threads = CommonArgs {
        threads: Some(vec![2]),
        ..Default::default()
    };
    let s = Settings {
        evictors: vec![bufmgr::Evictor::Clock, bufmgr::Evictor::HotCool],
        ..tiny(ScenarioKind::Sweep, dir.path(), 64, two_threads)
    };
    let names = traced_run(ScenarioKind::Sweep, &s, 2, &[0, 1]);
    assert_eq!(
        names,
        [
            "t-clock-b1-p1-t2-ring-on-huge-off.trace",
            "t-hotcool-b1-p1-t2-ring-on-huge-off.trace"
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    let s = tiny(
        ScenarioKind::Ticks,
        dir.path(),
        64,
        CommonArgs {
            threads: Some(vec![1]),
            huge_pages: Some(Toggle::Off),
            ..Default::default()
        },
    );
    // One configuration: FILE itself.
    assert_eq!(traced_run(ScenarioKind::Ticks, &s, 1, &[0]), ["t.trace"]);
}

#[test]
fn hint_bits_traces_every_scan_of_every_rep() {
    let dir = tempfile::tempdir().unwrap();
    let args = hint_bits::HintBitsArgs {
        rows: Some(2_000),
        reps: Some(2),
        mode: Some(hint_bits::ModeChoice::PerPage),
        checksums: Some(Toggle::On),
        logged: Some(Toggle::On),
    };
    let kind = ScenarioKind::HintBits(args);
    let s = tiny(kind, dir.path(), 256, CommonArgs::default());
    // A seq scan and an index scan per rep, 2 reps.
    let names = traced_run(kind, &s, 4, &[0]);
    assert!(
        names.contains(
            &"t-clock-b1-p1-t1-ring-on-huge-off-seq-per-page-checksums-on-logged-rep2.trace"
                .to_string()
        ),
        "{names:?}"
    );
    assert!(
        names.iter().filter(|n| n.contains("-index-")).count() == 2,
        "{names:?}"
    );
}

#[test]
fn seqscan_partitions_traces_each_cell_with_its_balancing_and_floor() {
    let dir = tempfile::tempdir().unwrap();
    let args = seqscan_partitions::Args {
        balancing: Some(Toggle::Off),
        floor: Some(Toggle::Off),
        table_pct: None,
    };
    let kind = ScenarioKind::SeqscanPartitions(args);
    let s = tiny(
        kind,
        dir.path(),
        512,
        CommonArgs {
            partitions: Some(vec![1]),
            ..Default::default()
        },
    );
    assert_eq!(
        traced_run(kind, &s, 1, &[0]),
        ["t-clock-b1-p1-t1-ring-on-huge-off-balancing-off-floor-off.trace"]
    );
}

#[test]
fn oltp_traces_sync_and_async_apart() {
    let dir = tempfile::tempdir().unwrap();
    let args = oltp::Args {
        commit: Some(oltp::CommitChoice::Both),
        checkpoint_ms: Some(300),
        autovacuum: Some(oltp::AutovacuumChoice::On),
    };
    let kind = ScenarioKind::Oltp(args);
    let s = tiny(
        kind,
        dir.path(),
        256,
        CommonArgs {
            threads: Some(vec![2]),
            ..Default::default()
        },
    );
    let names = traced_run(kind, &s, 2, &[0, 1]);
    assert!(
        names[0].ends_with("-autovacuum-on-commit-sync.trace"),
        "{names:?}"
    );
    assert!(
        names[1].ends_with("-autovacuum-on-commit-async.trace"),
        "{names:?}"
    );
}

#[test]
fn readonly_and_bulkload_trace_their_workers_and_loader() {
    let dir = tempfile::tempdir().unwrap();
    let args = readonly::Args {
        lookups_per_txn: Some(10),
    };
    let kind = ScenarioKind::Readonly(args);
    let s = tiny(
        kind,
        dir.path(),
        256,
        CommonArgs {
            threads: Some(vec![2]),
            partitions: Some(vec![1]),
            ..Default::default()
        },
    );
    traced_run(kind, &s, 1, &[0, 1]);

    let dir = tempfile::tempdir().unwrap();
    let kind = ScenarioKind::Bulkload(bulkload::Args::default());
    let s = tiny(
        kind,
        dir.path(),
        256,
        CommonArgs {
            threads: Some(vec![1]),
            ..Default::default()
        },
    );
    // Ring off and on; lookup thread 0 and the loader.
    let names = traced_run(kind, &s, 2, &[0, bulkload::LOADER_THREAD_ID]);
    assert!(names.iter().any(|n| n.contains("-ring-off-")), "{names:?}");
}

#[test]
fn scan_resistance_and_index_residency_keep_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let args = scan_resistance::ScanResistanceArgs {
        pages_per_lookup: Some(1),
        ..Default::default()
    };
    let kind = ScenarioKind::ScanResistance(args);
    let s = tiny(kind, dir.path(), 512, CommonArgs::default());
    // Ring on and off; lookup threads 0, 1 and the scan thread.
    traced_run(kind, &s, 2, &[0, 1, scan_resistance::SCAN_THREAD_ID]);

    let dir = tempfile::tempdir().unwrap();
    let args = index_residency::IndexResidencyArgs {
        rows: None,
        runs: Some(2),
    };
    let kind = ScenarioKind::IndexResidency(args);
    let s = tiny(
        kind,
        dir.path(),
        512,
        CommonArgs {
            threads: Some(vec![2]),
            partitions: Some(vec![1]),
            ..Default::default()
        },
    );
    // One configuration, two runs: a file for each.
    let names = traced_run(kind, &s, 2, &[0, 1]);
    assert_eq!(
        names,
        [
            "t-clock-b1-p1-t2-ring-on-huge-off-run1.trace",
            "t-clock-b1-p1-t2-ring-on-huge-off-run2.trace"
        ]
    );
}

#[test]
fn wal_commit_and_crash_soak_refuse_trace_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    for (kind, why) in [
        (ScenarioKind::WalCommit, "runs no buffer pool"),
        (
            ScenarioKind::CrashSoak(crash_soak::Args::default()),
            "killed",
        ),
    ] {
        let s = tiny(kind, dir.path(), 64, CommonArgs::default());
        let e = kind.run_with_traces(&s).unwrap_err().to_string();
        assert!(
            e.contains("--trace") && e.contains(kind.name()) && e.contains(why),
            "{e}"
        );
    }
    let written: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        written.iter().all(|p| !path_name(p).ends_with(".trace")),
        "{written:?}"
    );
}

#[test]
fn the_command_line_refuses_trace_on_wal_commit_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["wal-commit", "--quick", "--no-progress", "--trace"])
        .arg(dir.path().join("w.trace"))
        .arg("--data-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("wal-commit cannot record a trace") && err.contains("no buffer pool"),
        "{err}"
    );
    assert!(!dir.path().join("w.trace").exists());
}
