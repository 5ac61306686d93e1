//! `seqscan-partitions`, `oltp`, `readonly` and `bulkload` at a tiny scale
//! (pools of 256-1024 pages, windows of a few tenths of a second), called
//! as a library: checks what they report and that their data checks pass,
//! not how fast they run.

use std::path::Path;

use bench::common::{CommonArgs, EvictorChoice, Report, Toggle};
use bench::scenarios::tables::{self, ACCOUNTS};
use bench::scenarios::{ScenarioKind, bulkload, oltp, readonly, seqscan_partitions};
use bench::{Result, Settings};

/// Tiny settings for `kind`: a pool of `pages`, short windows, one evictor.
fn tiny(kind: ScenarioKind, dir: &Path, pages: usize, extra: CommonArgs) -> Settings {
    let args = CommonArgs {
        pool_pages: Some(pages),
        duration: Some(0.4),
        warmup: Some(0.3),
        evictor: Some(EvictorChoice::Clock),
        data_dir: dir.to_path_buf(),
        json: Some(dir.join(format!("{}.json", kind.name()))),
        no_progress: true,
        ..extra
    };
    kind.settings(&args).unwrap()
}

/// The JSON file parses and every row carries the configuration and `metrics`.
fn assert_json(settings: &Settings, report: &dyn Report, rows: usize, metrics: &[&str]) {
    bench::common::write_json(settings.json.as_ref().unwrap(), &report.to_json()).unwrap();
    let text = std::fs::read_to_string(settings.json.as_ref().unwrap()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["scenario"], report.scenario());
    let json_rows = v["rows"].as_array().unwrap();
    assert_eq!(json_rows.len(), rows);
    for row in json_rows {
        for f in ["evictor", "ring", "batch", "partitions", "threads"]
            .iter()
            .chain(metrics)
        {
            assert!(row.get(*f).is_some(), "{f} missing from {row}");
        }
        assert!(row["ring"].is_boolean(), "{row}");
        assert!(row["batch"].is_u64(), "{row}");
    }
    assert!(report.failures().is_empty(), "{:?}", report.failures());
    assert!(
        report.render().contains("data check: ok"),
        "{}",
        report.render()
    );
}

#[test]
fn seqscan_partitions_misses_without_balancing_or_floor() {
    let dir = tempfile::tempdir().unwrap();
    let args = seqscan_partitions::Args {
        balancing: Some(Toggle::Both),
        floor: Some(Toggle::Both),
        table_pct: None,
    };
    let kind = ScenarioKind::SeqscanPartitions(args);
    let s = tiny(
        kind,
        dir.path(),
        1024,
        CommonArgs {
            partitions: Some(vec![1, 6]),
            ..Default::default()
        },
    );
    let report = seqscan_partitions::run(&s, &args).unwrap();
    // partitions=1 once, partitions=6 x balancing x floor.
    assert_eq!(report.rows.len(), 5);
    assert!(!report.reused_data);
    assert!(report.data_check.ok, "{:?}", report.data_check);
    let find = |p: usize, bal: bool, floor: bool| {
        report
            .rows
            .iter()
            .find(|r| r.partitions == p && (p == 1 || (r.balancing == bal && r.floor == floor)))
            .unwrap()
    };
    let one = find(1, false, false);
    let six = find(6, false, false);
    let six_bal = find(6, true, false);
    let six_floor = find(6, false, true);
    for r in &report.rows {
        assert!(r.pages > 0 && r.pages_per_sec > 0.0, "{r:?}");
        // Per-node figures: the pool's buffers, partitions and accesses.
        assert_eq!(
            r.nodes.iter().map(|n| n.buffers).sum::<usize>(),
            1024,
            "{r:?}"
        );
        let parts: usize = r.nodes.iter().map(|n| n.partitions).sum();
        assert_eq!(parts, r.partitions_effective, "{r:?}");
        assert_eq!(
            r.nodes.iter().map(|n| n.accesses).sum::<u64>(),
            r.pages,
            "{r:?}"
        );
    }
    // The table (60% of the pool) fits one partition of the whole pool...
    assert!(one.hit_ratio > 0.99, "{one:?}");
    // ... not a sixth of it: the scan cycles through its home partition.
    assert!(six.hit_ratio < one.hit_ratio - 0.5, "{six:?} vs {one:?}");
    assert_eq!(six.partitions_effective, 6);
    // Balancing spreads the scan's allocations over every partition.
    assert!(six_bal.hit_ratio > six.hit_ratio + 0.5, "{six_bal:?}");
    // The floor (the table's pages) brings the count down to one.
    assert_eq!(six_floor.partitions_effective, 1);
    assert_eq!(six_floor.floor_pages, Some(report.table_pages as usize));
    assert!(six_floor.hit_ratio > 0.99, "{six_floor:?}");
    assert!(six.vs_partitions1.is_some());
    assert_json(
        &s,
        &report,
        5,
        &["pages_per_sec", "hit_ratio", "vs_partitions1", "resident"],
    );
    // The second run reuses the cached table.
    let again = seqscan_partitions::run(
        &Settings {
            partitions: vec![1],
            ..s.clone()
        },
        &seqscan_partitions::Args {
            balancing: Some(Toggle::Off),
            floor: Some(Toggle::Off),
            table_pct: None,
        },
    )
    .unwrap();
    assert!(again.reused_data);
}

#[test]
fn oltp_keeps_the_balance_sums_equal() {
    let dir = tempfile::tempdir().unwrap();
    let args = oltp::Args {
        commit: Some(oltp::CommitChoice::Both),
        checkpoint_ms: Some(300),
        autovacuum: Some(oltp::AutovacuumChoice::Both),
    };
    let kind = ScenarioKind::Oltp(args);
    let s = tiny(
        kind,
        dir.path(),
        256,
        CommonArgs {
            threads: Some(vec![2]),
            batch: Some(vec![bufmgr::SweepBatch::Fixed(1)]),
            ..Default::default()
        },
    );
    let report = oltp::run(&s, &args).unwrap();
    // Commit mode outer, autovacuum on then off inner.
    assert_eq!(report.rows.len(), 4);
    let cells: Vec<(&str, bool)> = report
        .rows
        .iter()
        .map(|r| (r.commit.as_str(), r.autovacuum))
        .collect();
    assert_eq!(
        cells,
        [
            ("sync", true),
            ("sync", false),
            ("async", true),
            ("async", false)
        ]
    );
    assert!(report.data_check.ok, "{:?}", report.data_check);
    for r in &report.rows {
        assert!(r.transactions > 0 && r.tps > 0.0, "{r:?}");
        assert!(r.latency_p99_ms >= r.latency_p50_ms, "{r:?}");
        assert!(r.wal_bytes_per_txn > 0.0, "{r:?}");
        assert_eq!(r.data_errors, 0, "{r:?}");
        // accounts == tellers == branches == history deltas.
        assert!(r.sums.iter().all(|&x| x == r.sums[0]), "{r:?}");
        assert_eq!(r.threads, 2);
        assert!(r.accesses_per_txn > 0.0, "{r:?}");
        // Heap and pk index of branches, tellers, accounts, none empty.
        assert_eq!(r.pages.len(), 6, "{r:?}");
        assert!(r.pages.iter().all(|(_, p)| *p > 0), "{r:?}");
        if !r.autovacuum {
            assert_eq!(r.autovacuums, 0, "{r:?}");
        }
    }
    // Four tables checked per run, every one clean.
    assert_eq!(report.data_check.tables.len(), 16);
    assert!(
        report
            .data_check
            .tables
            .iter()
            .all(|t| t.index_violations == 0)
    );
    assert_json(
        &s,
        &report,
        4,
        &[
            "tps",
            "autovacuum",
            "accesses_per_txn",
            "pages",
            "latency_p50_ms",
            "latency_p99_ms",
            "wal_bytes_per_txn",
            "writes_backend",
            "writes_bgwriter",
            "writes_checkpoint",
            "commit",
        ],
    );
}

#[test]
fn readonly_looks_up_every_key_it_asks_for() {
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
            pin_threads: true,
            ..Default::default()
        },
    );
    let report = readonly::run(&s, &args).unwrap();
    // Per-node figures: every buffer's memory is on a node the kernel
    // names, each partition is counted on one node, and the window's
    // accesses add up.
    for r in &report.rows {
        assert!(!r.nodes.is_empty(), "{r:?}");
        assert_eq!(
            r.nodes.iter().map(|n| n.buffers).sum::<usize>(),
            256,
            "{r:?}"
        );
        assert_eq!(
            r.nodes.iter().map(|n| n.partitions).sum::<usize>(),
            r.partitions
        );
        let accesses: u64 = r.nodes.iter().map(|n| n.accesses).sum();
        let expect = r.accesses_per_lookup * r.lookups as f64;
        assert!(
            (accesses as f64 - expect).abs() < 1.0,
            "{accesses} vs {expect}"
        );
    }
    assert!(report.render().contains("by NUMA node"));
    // partitions {1, 4} by default.
    assert_eq!(
        report.rows.iter().map(|r| r.partitions).collect::<Vec<_>>(),
        [1, 4]
    );
    for r in &report.rows {
        assert!(r.lookups > 0 && r.lookups_per_sec > 0.0, "{r:?}");
        // ~2 x pool of data: some lookups miss, most index pages hit.
        assert!(r.hit_ratio > 0.3 && r.hit_ratio < 1.0, "{r:?}");
        assert!(r.accesses_per_lookup >= 2.0, "{r:?}");
        assert_eq!(r.data_errors, 0);
    }
    assert_json(&s, &report, 2, &["lookups_per_sec", "hit_ratio"]);
}

#[test]
fn bulkload_with_the_ring_writes_its_own_pages() {
    let dir = tempfile::tempdir().unwrap();
    let args = bulkload::Args::default();
    let kind = ScenarioKind::Bulkload(args);
    let s = tiny(kind, dir.path(), 512, CommonArgs::default());
    let report = bulkload::run(&s, &args).unwrap();
    assert_eq!(report.rows.len(), 2);
    let off = report.rows.iter().find(|r| !r.ring).unwrap();
    let on = report.rows.iter().find(|r| r.ring).unwrap();
    for r in &report.rows {
        assert_eq!(r.load_rows, report.load_rows);
        assert!(r.loaded_pages >= 512, "2 x pool: {r:?}");
        assert!((0.0..=1.0).contains(&r.oltp_hit_ratio), "{r:?}");
        assert!(r.lookups > 0, "{r:?}");
        assert!(r.accesses_per_lookup >= 2.0, "{r:?}");
        assert!(r.hot_resident_min <= r.hot_resident_before.max(r.hot_resident_end));
        assert!(!r.samples.is_empty());
    }
    // With the ring the loader writes (nearly) everything itself and the
    // pool never holds more than about a ring of its dirty pages.
    assert!(on.loader_written_share > 0.5, "{on:?}");
    assert_eq!(on.loader_pages_written, on.writes_loader, "{on:?}");
    assert_eq!(off.writes_loader, 0, "{off:?}");
    assert!(off.writes_backend + off.writes_bgwriter > 0, "{off:?}");
    assert!(on.dirty_max < off.dirty_max, "{on:?} vs {off:?}");
    assert_json(
        &s,
        &report,
        2,
        &[
            "oltp_hit_ratio",
            "loader_written_share",
            "hot_resident_min",
            "dirty_max",
            "samples",
        ],
    );
}

#[test]
fn a_cached_database_is_reused_until_its_scale_changes() -> Result<()> {
    let dir = tempfile::tempdir().unwrap();
    let s = tiny(ScenarioKind::Sweep, dir.path(), 256, CommonArgs::default());
    let build = |n: u64| {
        move |db: &engine::Database, pb: &indicatif::ProgressBar| {
            tables::load_accounts(db, n, 100, pb)
        }
    };
    let scale = |n: u64| serde_json::json!({ "accounts": n });
    let (d1, reused) = tables::ensure_db(&s, "t", "k", &scale(100), build(100))?;
    assert!(!reused);
    let (d2, reused) = tables::ensure_db(&s, "t", "k", &scale(100), build(100))?;
    assert!(reused);
    assert_eq!(d1, d2);
    let (_, reused) = tables::ensure_db(&s, "t", "k", &scale(200), build(200))?;
    assert!(!reused, "another scale in the stamp rebuilds");
    let db = engine::Database::open(&d1, tables::build_options(&s))?;
    let c = tables::check_table(&db, ACCOUNTS, Some(200))?;
    assert_eq!(c.error(), None, "{c:?}");
    db.close()?;
    Ok(())
}
