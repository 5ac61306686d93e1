//! Bad options are refused at open with an error naming the option and the
//! value; string settings parse with clear errors.

mod common;

use engine::{Database, EngineError, Evictor, Options, Partitions, RingSizes, SweepBatch};

fn refused(o: Options, needles: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let e = Database::open(dir.path(), o).unwrap_err();
    assert!(matches!(e, EngineError::InvalidOption { .. }), "{e}");
    assert_eq!(e.kind(), engine::ErrorKind::BadInput);
    for n in needles {
        assert!(e.to_string().contains(n), "{n:?} not in: {e}");
    }
    // Nothing was created but the lock and the directory itself.
    assert!(!dir.path().join("VERSION").exists());
}

#[test]
fn bad_values_are_named() {
    let o = common::small_options;
    refused(
        o().pool_buffers(8),
        &["pool_buffers", "8 buffers", "minimum of 16"],
    );
    // Absurd sizes are refused, never a panic or an overflow.
    refused(
        o().pool_buffers(1 << 34),
        &["pool_buffers", "17179869184 buffers", "maximum"],
    );
    refused(o().pool_mib(usize::MAX), &["pool_buffers", "maximum"]);
    refused(
        o().autovacuum_naptime(std::time::Duration::ZERO),
        &["autovacuum_naptime", "0ns", "minimum"],
    );
    refused(
        o().autovacuum_thresholds(50, -0.5),
        &["autovacuum_scale_factor", "-0.5"],
    );
    refused(
        o().autovacuum_thresholds(50, f64::NAN),
        &["autovacuum_scale_factor", "NaN"],
    );
    let set = Options::new()
        .set("autovacuum", "off")
        .and_then(|o| o.set("autovacuum_naptime_ms", "250"))
        .and_then(|o| o.set("autovacuum_threshold", "7"))
        .and_then(|o| o.set("autovacuum_scale_factor", "0.05"))
        .unwrap();
    assert!(!set.autovacuum);
    assert_eq!(
        set.autovacuum_naptime,
        std::time::Duration::from_millis(250)
    );
    assert_eq!(
        (set.autovacuum_threshold, set.autovacuum_scale_factor),
        (7, 0.05)
    );
    assert!(Options::new().autovacuum, "autovacuum is on by default");
    let e = Options::new()
        .set("autovacuum_scale_factor", "lots")
        .unwrap_err();
    assert!(e.to_string().contains("autovacuum_scale_factor"), "{e}");
    let e = Options::new().set("pool_mib", &usize::MAX.to_string());
    assert!(
        e.is_err() || e.unwrap().validate().is_err(),
        "pool_mib = usize::MAX must be refused"
    );
    refused(
        o().ring_sizes(RingSizes {
            bulk_read_kib: 1024,
            ..RingSizes::default()
        }),
        &["bulk_read_ring_kib", "1024 KiB", "larger than the pool"],
    );
    refused(
        o().sweep_batch(SweepBatch::Fixed(0)),
        &["sweep_batch", "batch 0"],
    );
    refused(
        o().sweep_batch(SweepBatch::Fixed(65)),
        &["sweep_batch", "batch 65"],
    );
    refused(
        o().partitions(Partitions::Count(0)),
        &["partitions", "0 partitions"],
    );
    refused(
        o().partitions(Partitions::Count(8)),
        &["partitions", "8 partitions"],
    );
    refused(
        o().partition_floor(Some(1000)),
        &["partition_floor", "1000"],
    );
    refused(o().wal_segment_size(12345), &["wal_segment_size"]);
    refused(
        o().checkpoint_interval(std::time::Duration::ZERO),
        &["checkpoint_interval"],
    );
    refused(
        o().checkpoint_max_wal_bytes(10),
        &["checkpoint_max_wal_bytes", "10 bytes"],
    );
    refused(
        o().bulk_load_progress_every(0),
        &["bulk_load_progress_every"],
    );
    refused(
        o().async_flush_interval(Some(std::time::Duration::ZERO)),
        &["async_flush_interval"],
    );
    refused(o().max_open_files(0), &["max_open_files", "0 files"]);
    // Default ring sizes are capped by the pool, not refused.
    Options::new().pool_buffers(16).validate().unwrap();
    // With rings off, their sizes do not matter.
    o().rings(false)
        .ring_sizes(RingSizes {
            bulk_write_kib: 1 << 20,
            ..RingSizes::default()
        })
        .validate()
        .unwrap();
}

#[test]
fn strings_parse_with_clear_errors() {
    let e = engine::parse_evictor("lru").unwrap_err();
    assert!(
        e.to_string().contains("\"lru\"") && e.to_string().contains("hotcool"),
        "{e}"
    );
    assert_eq!(engine::parse_evictor("hotcool").unwrap(), Evictor::HotCool);
    assert!(e.to_string().contains("probation"), "{e}");
    assert_eq!(
        engine::parse_evictor("probation").unwrap(),
        Evictor::Probation
    );
    assert_eq!(
        Options::new().set("evictor", "probation").unwrap().evictor,
        Evictor::Probation
    );
    let o = Options::new()
        .set("evictor", "hotcool")
        .unwrap()
        .set("sweep_batch", "16")
        .unwrap()
        .set("partitions", "2")
        .unwrap()
        .set("rings", "off")
        .unwrap()
        .set("optimistic", "off")
        .unwrap()
        .set("commit", "async")
        .unwrap()
        .set("hint_mode", "per-tuple")
        .unwrap()
        .set("pool_mib", "1")
        .unwrap()
        .set("wal_preallocate", "off")
        .unwrap();
    assert_eq!(o.evictor, Evictor::HotCool);
    assert!(!o.wal_preallocate);
    assert!(Options::new().wal_preallocate, "on by default");
    assert_eq!(o.sweep_batch, SweepBatch::Fixed(16));
    assert_eq!(o.partitions, Partitions::Count(2));
    assert!(!o.rings);
    assert!(!o.optimistic_reads);
    assert!(Options::new().optimistic_reads, "on by default");
    assert_eq!(o.commit_mode, engine::CommitMode::Asynchronous);
    assert_eq!(o.hint_mode, engine::HintMode::PerTuple);
    assert_eq!(o.pool_buffers, 128);
    // The open-file cap: a number, derived from RLIMIT_NOFILE by default.
    let default = Options::new().max_open_files;
    assert_eq!(default, bufmgr::default_max_open_files());
    assert!((1..=1000).contains(&default), "{default}");
    let o = Options::new().set("max_open_files", "64").unwrap();
    assert_eq!(o.max_open_files, 64);
    o.validate().unwrap();
    for (k, v, needle) in [
        ("evictor", "lru", "unknown evictor"),
        ("sweep_batch", "x", "sweep batch"),
        ("rings", "maybe", "on/off"),
        ("optimistic_reads", "sometimes", "on/off"),
        ("commit", "later", "sync or async"),
        ("hint_mode", "sometimes", "unknown hint mode"),
        ("pool_mib", "-1", "whole number"),
        ("max_open_files", "many", "whole number"),
        ("colour", "blue", "unknown option"),
    ] {
        let e = Options::new().set(k, v).unwrap_err();
        assert!(e.to_string().contains(needle), "{k}={v}: {e}");
    }
}

#[test]
fn the_optimistic_reads_option_reaches_the_pool() {
    for on in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let o = common::small_options().optimistic_reads(on);
        let db = Database::open(dir.path(), o).unwrap();
        assert_eq!(db.pool().config().optimistic_reads, on);
    }
}

/// The pool's memory is given as it is first used unless `prefault_pool`
/// asks for all of it at open. The NUMA view shows which: a buffer whose
/// memory the kernel has given is on a node, one never used has none; a
/// pre-faulted pool names a node for every buffer, and its per-node totals
/// add up to the pool.
#[test]
fn the_prefault_option_reaches_the_pool_and_is_off_by_default() {
    for (o, on) in [
        (common::small_options(), false),
        (common::small_options().prefault_pool(true), true),
        (
            common::small_options().set("prefault_pool", "on").unwrap(),
            true,
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), o).unwrap();
        assert_eq!(db.pool().config().prefault, on);
        db.create_table("t", common::two_columns()).unwrap();
        let cache = db.buffercache();
        assert_eq!(cache.len(), 64);
        if !cfg!(target_os = "linux") {
            continue;
        }
        let placed = cache.iter().filter(|b| b.row.numa_node.is_some()).count();
        let per_node = db.buffers_per_node();
        assert_eq!(
            per_node.iter().map(|n| n.1).sum::<usize>(),
            placed,
            "{per_node:?}"
        );
        if on {
            assert_eq!(placed, 64, "every buffer of a pre-faulted pool placed");
        } else {
            // A 64-buffer pool is less than one huge page: only what was
            // used has memory, and opening and one table use a few buffers.
            assert!(
                placed < 64,
                "{placed} of 64 buffers of a pool not pre-faulted have memory"
            );
        }
    }
}

/// Huge pages are asked for unless turned off (PostgreSQL's
/// `huge_pages = try`); whether the kernel gave them is the pool's to say,
/// and a pool of normal pages works all the same.
#[test]
fn huge_pages_are_asked_for_by_default_and_reach_the_pool() {
    for (o, asked) in [
        (common::small_options().pool_buffers(512), true),
        (
            common::small_options().pool_buffers(512).huge_pages(false),
            false,
        ),
        (
            common::small_options()
                .pool_buffers(512)
                .set("huge_pages", "off")
                .unwrap(),
            false,
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), o).unwrap();
        let status = db.pool().huge_pages();
        assert_eq!(status.requested, asked);
        assert_eq!(status.pool_bytes, 512 * 8192);
        if !asked {
            assert_eq!(status.huge_bytes.unwrap_or(0), 0, "{status:?}");
        }
        db.create_table("t", common::two_columns()).unwrap();
        let txn = db.begin().unwrap();
        for id in 0..2_000i64 {
            txn.insert("t", vec![engine::Value::I64(id), engine::Value::Null])
                .unwrap();
        }
        txn.commit().unwrap();
        let txn = db.begin().unwrap();
        assert_eq!(txn.scan("t").unwrap().count(), 2_000);
        txn.commit().unwrap();
    }
}
