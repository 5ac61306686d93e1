//! The `sweep` and `ticks` scenarios at a tiny scale (a 64-page pool, 0.2 s
//! windows), called as a library: checks what they report, not how fast.

use std::path::Path;
use std::time::Duration;

use bench::Settings;
use bench::scenarios::sweep::{self, SweepReport};
use bufmgr::{Evictor, SweepBatch};

fn tiny(dir: &Path, json: &str) -> Settings {
    Settings {
        pool_buffers: 64,
        duration: Duration::from_millis(200),
        warmup: Duration::from_millis(50),
        threads: vec![1, 2],
        evictors: vec![Evictor::Clock, Evictor::HotCool],
        batches: vec![SweepBatch::Fixed(1), SweepBatch::Fixed(16)],
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
        quick: false,
        trace: None,
        measures: Default::default(),
    }
}

/// Every row saw continuous eviction and sane figures; the data checked out.
fn assert_sane(report: &SweepReport, settings: &Settings) {
    assert_eq!(report.rows.len(), settings.configs().len());
    for r in &report.rows {
        assert!(r.evictions > 0, "no evictions: {r:?}");
        assert!(r.evictions_per_sec > 0.0, "{r:?}");
        assert!((0.0..=1.0).contains(&r.hit_ratio), "{r:?}");
        assert!(r.ticks_per_victim_mean >= 1.0, "{r:?}");
        assert!(r.ticks_per_victim_p99 >= 1, "{r:?}");
        assert!(r.ticks_per_victim_max >= r.ticks_per_victim_p99, "{r:?}");
        assert_eq!(r.data_errors, 0, "{r:?}");
    }
    assert!(report.data_check.ok, "{:?}", report.data_check);
    assert_eq!(
        report.data_check.blocks,
        Some(u64::from(report.relation_blocks))
    );
    // Both evictors of each (batch, threads) group are compared.
    assert_eq!(report.ratios.len(), report.rows.len() / 2);
    // One raw pread window per thread count, and every row set beside the
    // one of its thread count.
    // Two per thread count: into one page, into the thread's share of
    // the pool in turn.
    let counts: Vec<(usize, usize)> = report
        .pread_baselines
        .iter()
        .map(|b| (b.threads, b.dest_pages))
        .collect();
    let want: Vec<(usize, usize)> = settings
        .threads
        .iter()
        .flat_map(|&t| [(t, 1), (t, settings.pool_buffers / t)])
        .collect();
    assert_eq!(counts, want, "{:?}", report.pread_baselines);
    for b in &report.pread_baselines {
        assert!(b.reads > 0 && b.reads_per_thread_per_sec > 0.0, "{b:?}");
        assert_eq!(b.data_errors, 0, "{b:?}");
    }
    for r in &report.rows {
        let b = report
            .pread_baselines
            .iter()
            .find(|b| b.threads == r.threads && b.dest_pages == 1)
            .unwrap();
        let want = r.evictions_per_sec / r.threads as f64 / b.reads_per_thread_per_sec;
        let got = r.evictions_per_thread_vs_pread.expect("a ratio to pread");
        assert!((got - want).abs() < 1e-9 * want.max(1.0), "{r:?}");
        // The eviction's own figure: the timed evicting accesses are some
        // of the timed accesses, and the ratio is the two medians'.
        let lat = &r.series.latency;
        let evicting = lat[sweep::EVICTING_ACCESS];
        assert!(
            evicting.count > 0 && evicting.count <= lat[sweep::PAGE_ACCESS].count,
            "{lat:?}"
        );
        let pread = b.read_latency.expect("timed preads in the baseline");
        let want = pread.p50_us / evicting.p50_us;
        let got = r
            .evicting_access_vs_pread
            .expect("an evicting access ratio");
        assert!((got - want).abs() < 1e-9 * want.max(1.0), "{r:?}");
        let spread = report
            .pread_baselines
            .iter()
            .find(|b| b.threads == r.threads && b.dest_pages > 1)
            .unwrap();
        let want = spread.read_latency.expect("timed preads").p50_us / evicting.p50_us;
        let got = r
            .evicting_access_vs_pool_dest_pread
            .expect("a ratio to the pool-sized pread");
        assert!((got - want).abs() < 1e-9 * want.max(1.0), "{r:?}");
    }
}

/// The JSON file parses back with the fields the README promises.
fn assert_json(settings: &Settings, scenario: &str) {
    let path = settings.json.as_ref().unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["scenario"], scenario);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), settings.configs().len());
    for row in rows {
        for field in [
            "evictor",
            "batch",
            "partitions",
            "threads",
            "huge_pages",
            "ring",
            "evictions_per_sec",
            "hits_per_sec",
            "hit_ratio",
            "ticks_per_victim_mean",
            "ticks_per_victim_p99",
            "ticks_per_victim_max",
            "huge_pages_granted_mib",
        ] {
            assert!(row.get(field).is_some(), "{field} missing from {row}");
        }
        assert!(
            row["batch"].is_u64(),
            "a fixed batch is written as a number"
        );
    }
    // And it reads back into the report type.
    let back: SweepReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back.scenario, scenario);
}

#[test]
fn sweep_evicts_continuously_and_checks_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let settings = tiny(dir.path(), "sweep.json");
    let report = sweep::sweep(&settings).unwrap();
    assert_eq!(report.scenario, "sweep");
    assert!(
        !report.reused_data,
        "a fresh directory has nothing to reuse"
    );
    assert_sane(&report, &settings);
    assert_json(&settings, "sweep");
    // Uniform over 1.7 x pool: most of the pool is hit now and then, but at
    // most pool/relation of accesses can hit.
    for r in &report.rows {
        assert!(r.hit_ratio < 0.8, "{r:?}");
    }
    // A second run reuses the relation.
    let again = sweep::sweep(&Settings {
        threads: vec![1],
        batches: vec![SweepBatch::Fixed(1)],
        json: None,
        ..settings
    })
    .unwrap();
    assert!(again.reused_data);
}

#[test]
fn ticks_clock_needs_more_ticks_per_victim_than_hotcool() {
    let dir = tempfile::tempdir().unwrap();
    let settings = tiny(dir.path(), "ticks.json");
    let report = sweep::ticks(&settings).unwrap();
    assert_eq!(report.scenario, "ticks");
    assert_sane(&report, &settings);
    assert_json(&settings, "ticks");
    // Skewed access: hot pages are hit again and again.
    for r in &report.rows {
        assert!(r.hit_ratio > 0.5, "{r:?}");
    }
    // The clock lets hot pages climb to usage 5 and must pass them up to five
    // times; HOT/COOL demotes in one pass.
    for ratio in &report.ratios {
        assert!(
            ratio.ticks_per_victim_mean < 1.0,
            "HOT/COOL should need fewer ticks per victim than the clock: {ratio:?}"
        );
    }
}

/// `hint-bits` at a tiny scale (4,000 rows, a 256-page pool, one scan per
/// configuration, 1 MiB WAL segments): what each mode does to pages and
/// WAL, not how fast.
#[test]
fn hint_bits_modes_dirty_pages_and_log_images_as_documented() {
    use bench::scenarios::hint_bits::{self, HintBitsReport, Params};
    use heap::HintMode;

    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        pool_buffers: 256,
        threads: vec![1],
        evictors: vec![Evictor::Clock],
        batches: vec![SweepBatch::Fixed(1)],
        ..tiny(dir.path(), "hint-bits.json")
    };
    let params = Params {
        rows: 4_000,
        reps: 1,
        modes: HintMode::ALL.to_vec(),
        checksums: vec![false, true],
        logged: vec![false, true],
        load_batch: 1_000,
        wal_segment_size: 1 << 20,
        seed: hint_bits::PERMUTATION_SEED,
    };
    let report = hint_bits::run(&settings, &params).unwrap();
    bench::common::finish(report.clone(), &settings).unwrap();
    assert!(
        !report.reused_data,
        "a fresh directory has nothing to reuse"
    );
    assert_eq!(report.rows.len(), 12);
    assert!(report.table_pages > 0);
    assert!(report.data_check.ok, "{:?}", report.data_check);
    let pages = u64::from(report.table_pages);
    for r in &report.rows {
        assert_eq!(r.tuples_visible, params.rows, "{r:?}");
        assert_eq!(r.pages, pages, "{r:?}");
        assert_eq!(r.data_errors, 0, "{r:?}");
        assert_eq!(r.pages_read, 0, "the warm-up holds the table: {r:?}");
        assert_eq!(r.scan_ms.len(), 1);
        assert!(r.scan_ms_min <= r.scan_ms_median && r.scan_ms_median <= r.scan_ms_max);
        assert!(r.tuples_per_sec > 0.0, "{r:?}");
        match r.mode.as_str() {
            "never" => {
                assert_eq!(r.pages_dirtied, 0, "{r:?}");
                assert_eq!(r.wal_bytes, 0, "{r:?}");
                assert_eq!(r.hint_calls, 0, "{r:?}");
            }
            mode => {
                // The first reader hints every tuple: every page is dirtied.
                assert_eq!(r.pages_dirtied, pages, "{r:?}");
                let calls = if mode == "per-page" {
                    pages
                } else {
                    params.rows
                };
                assert_eq!(r.hint_calls, calls, "{r:?}");
                if r.checksums && r.logged {
                    // One full-page image per page, for its first hint.
                    assert_eq!(r.hint_fpis, pages, "{r:?}");
                    assert!(r.wal_bytes > pages * 8192, "{r:?}");
                } else {
                    assert_eq!(r.hint_fpis, 0, "{r:?}");
                    assert_eq!(r.wal_bytes, 0, "{r:?}");
                }
            }
        }
    }
    // Every comparison of the closing note is there: per-page/never and
    // per-tuple/per-page for each (checksums, logged), checksums on/off for
    // each (mode, logged).
    let count = |c: &str| report.ratios.iter().filter(|q| q.compare == c).count();
    assert_eq!(count("per-page/never"), 4);
    assert_eq!(count("per-tuple/per-page"), 4);
    assert_eq!(count("checksums on/off"), 6);
    assert!(
        report
            .rows
            .iter()
            .all(|r| (r.mode == "never") == r.vs_never.is_none())
    );

    // The JSON has the fields the README promises and reads back.
    let text = std::fs::read_to_string(settings.json.as_ref().unwrap()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["scenario"], "hint-bits");
    for row in v["rows"].as_array().unwrap() {
        for field in [
            "mode",
            "checksums",
            "logged",
            "scan_ms_median",
            "scan_ms_min",
            "scan_ms_max",
            "tuples_per_sec",
            "pages_dirtied",
            "wal_bytes",
            "evictor",
            "batch",
            "partitions",
            "threads",
            "huge_pages",
            "ring",
        ] {
            assert!(row.get(field).is_some(), "{field} missing from {row}");
        }
        assert!(row["checksums"].is_boolean() && row["logged"].is_boolean());
    }
    let back: HintBitsReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back.rows.len(), report.rows.len());

    // A second run reuses both tables.
    let again = hint_bits::run(
        &Settings {
            json: None,
            ..settings
        },
        &Params {
            modes: vec![HintMode::PerPage],
            checksums: vec![true],
            ..params
        },
    )
    .unwrap();
    assert!(again.reused_data);
    assert!(again.data_check.ok);
}

/// The index-scan part of `hint-bits` at a tiny scale: every ordered index
/// scan returns every row in key order; `never` dirties and logs nothing;
/// the other two modes dirty every heap page and make one `set_hints` call
/// per fetched tuple (a fetch has one tuple: `per-page` cannot batch), with
/// one full-page image per page only for a logged table with checksums.
#[test]
fn hint_bits_index_scan_counts_rows_and_never_dirties_nothing() {
    use bench::scenarios::hint_bits::{self, HintBitsReport, Params};
    use heap::HintMode;

    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        pool_buffers: 256,
        threads: vec![1],
        evictors: vec![Evictor::Clock],
        batches: vec![SweepBatch::Fixed(1)],
        ..tiny(dir.path(), "hint-bits-index.json")
    };
    let params = Params {
        rows: 3_000,
        reps: 2,
        modes: HintMode::ALL.to_vec(),
        checksums: vec![true],
        logged: vec![false, true],
        load_batch: 1_000,
        wal_segment_size: 1 << 20,
        seed: hint_bits::PERMUTATION_SEED,
    };
    let report = hint_bits::run(&settings, &params).unwrap();
    bench::common::finish(report.clone(), &settings).unwrap();
    assert_eq!(report.rows.len(), 6);
    assert_eq!(report.index_rows.len(), 6);
    let check = report
        .index_data_check
        .as_ref()
        .expect("the index part ran");
    assert!(check.ok, "{check:?}");
    assert_eq!(check.runs, Some(12));
    assert!(report.index_table_pages > 0 && report.index_pages > 0);
    assert!(
        report.index_pool_buffers >= (report.index_table_pages + report.index_pages) as usize,
        "the pool holds table and index"
    );
    let pages = u64::from(report.index_table_pages);
    for r in &report.rows {
        assert_eq!(r.scan, "seq");
    }
    for r in &report.index_rows {
        assert_eq!(r.scan, "index", "{r:?}");
        assert_eq!(r.tuples_visible, params.rows, "{r:?}");
        assert_eq!(r.pages, pages, "{r:?}");
        assert_eq!(r.data_errors, 0, "{r:?}");
        assert_eq!(r.pages_read, 0, "the warm-up holds table and index: {r:?}");
        assert_eq!(r.scan_ms.len(), 2);
        assert!(r.scan_ms_min <= r.scan_ms_median && r.scan_ms_median <= r.scan_ms_max);
        assert!(r.tuples_per_sec > 0.0, "{r:?}");
        if r.mode == "never" {
            assert_eq!(r.pages_dirtied, 0, "{r:?}");
            assert_eq!(r.wal_bytes, 0, "{r:?}");
            assert_eq!(r.hint_calls, 0, "{r:?}");
            assert_eq!(r.hint_fpis, 0, "{r:?}");
        } else {
            assert_eq!(r.pages_dirtied, pages, "{r:?}");
            // One call per fetched tuple in both modes.
            assert_eq!(r.hint_calls, params.rows, "{r:?}");
            if r.logged {
                assert_eq!(r.hint_fpis, pages, "{r:?}");
                assert!(r.wal_bytes > pages * 4096, "{r:?}");
            } else {
                assert_eq!(r.hint_fpis, 0, "{r:?}");
                assert_eq!(r.wal_bytes, 0, "{r:?}");
            }
        }
    }
    let count = |c: &str| {
        report
            .index_ratios
            .iter()
            .filter(|q| q.compare == c)
            .count()
    };
    assert_eq!(count("per-page/never"), 2);
    assert_eq!(count("per-tuple/per-page"), 2);

    // The JSON carries the index rows with their `scan` field and reads back.
    let text = std::fs::read_to_string(settings.json.as_ref().unwrap()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for row in v["index_rows"].as_array().unwrap() {
        assert_eq!(row["scan"], "index");
        for field in [
            "mode",
            "scan_ms_median",
            "scan_ms_min",
            "scan_ms_max",
            "tuples_per_sec",
            "pages_dirtied",
            "wal_bytes",
        ] {
            assert!(row.get(field).is_some(), "{field} missing from {row}");
        }
    }
    let back: HintBitsReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back.index_rows.len(), 6);

    // A second run reuses the indexed tables too.
    let again = hint_bits::run(
        &Settings {
            json: None,
            ..settings
        },
        &Params {
            modes: vec![HintMode::Never],
            logged: vec![true],
            ..params
        },
    )
    .unwrap();
    assert!(again.reused_data);
    assert!(again.index_data_check.is_some_and(|c| c.ok));
}
