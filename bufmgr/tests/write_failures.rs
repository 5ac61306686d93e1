//! A failed write is an error naming the file, and after it the pool refuses
//! further writes with a clear error instead of pretending; the page stays
//! dirty in the pool (nothing is lost) and reads go on working. A failed
//! fsync is reported, and retried by the next checkpoint.

mod common;

use bufmgr::{BufferPool, Error, ErrorKind, PoolConfig, StorageBackend};
use common::{
    TestDb, bump_version, check_page, read_version, rel, row_of, small_config, tag, with_timeout,
};

const REL: u32 = 9;

fn assert_io_naming_path(e: &Error, db: &TestDb) {
    let path = db.storage.path(rel(REL));
    match e {
        Error::Io {
            path: p, source, ..
        } => {
            assert_eq!(p, &path);
            assert!(source.to_string().contains("injected write failure"), "{e}");
        }
        other => panic!("expected Error::Io, got {other:?}"),
    }
    assert_eq!(e.kind(), ErrorKind::Io);
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
}

fn assert_refused(r: bufmgr::Result<impl std::fmt::Debug>, what: &str) {
    match r {
        Err(e @ Error::WritesRefused(_)) => {
            assert_eq!(e.kind(), ErrorKind::Io);
            assert!(e.to_string().contains("injected write failure"), "{e}");
        }
        other => panic!("{what} after a failed write: expected WritesRefused, got {other:?}"),
    }
}

/// Relation 9 with 4 pages on disk (version 0); block 1 changed to version 1
/// in the pool; then every write fails.
fn failed_flush() -> (TestDb, BufferPool) {
    let db = TestDb::new();
    db.create_rel(rel(REL), 4);
    let pool = db.pool(small_config(16));
    assert_eq!(bump_version(&pool, rel(REL), 1), 1);
    db.faulty.fail_writes_after(0);
    assert!(pool.write_failure().is_none());
    let e = pool.flush_all(false).unwrap_err();
    assert_io_naming_path(&e, &db);
    (db, pool)
}

#[test]
fn a_failed_write_names_the_file_and_later_writes_are_refused() {
    with_timeout(30, || {
        let (db, pool) = failed_flush();
        let failure = pool
            .write_failure()
            .expect("write_failure() after a failed write");
        assert!(failure.contains("injected write failure"), "{failure}");
        assert_eq!(pool.pinned_buffers(), 0);

        // The storage works again, but the pool no longer trusts its files.
        db.faulty.clear();
        let writes = db.faulty.writes();
        assert_refused(pool.flush_all(false), "flush_all");
        assert_refused(pool.flush_relation(rel(REL)), "flush_relation");
        let id = row_of(&pool, tag(REL, 1)).unwrap().id;
        assert_refused(pool.evict_buffer(id), "evict_buffer of the dirty page");
        assert_refused(pool.evict_relation(rel(REL)), "evict_relation");
        assert_eq!(
            db.faulty.writes(),
            writes,
            "a refused write reached storage"
        );

        // Nothing lost in the pool: still dirty, still version 1.
        let row = row_of(&pool, tag(REL, 1)).unwrap();
        assert!(row.dirty);
        assert_eq!(read_version(&pool, rel(REL), 1), 1);
        // The file was not touched.
        assert_eq!(check_page(&db.read_file_page(rel(REL), 1), 1), Ok(0));
        // Reads still work.
        for b in [0, 2, 3] {
            assert_eq!(read_version(&pool, rel(REL), b), 0);
        }
        assert!(pool.write_failure().is_some());
        assert_eq!(pool.pinned_buffers(), 0);
    });
}

/// Extension writes a page (the zeroed block reserving the space): after a
/// failed write it must be refused like any other write.
#[test]
fn extension_after_a_failed_write_is_refused() {
    with_timeout(30, || {
        let (db, pool) = failed_flush();
        db.faulty.clear();
        let writes = db.faulty.writes();
        assert_refused(pool.extend(rel(REL), None), "extend");
        assert_eq!(db.faulty.writes(), writes, "extension wrote to storage");
        assert_eq!(pool.nblocks(rel(REL)).unwrap(), 4);
        assert_eq!(pool.pinned_buffers(), 0);
    });
}

/// The write that reserves an extension's block fails: the extension fails
/// with the I/O error, the file keeps its length, and nothing of the block
/// stays in the pool (no pin, no tag): a read of it finds no such block.
#[test]
fn a_failed_extension_write_leaves_no_trace_of_the_block() {
    with_timeout(30, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), 4);
        let pool = db.pool(small_config(8));
        db.faulty.fail_writes_after(0);
        let e = pool.extend(rel(REL), None).unwrap_err();
        assert_io_naming_path(&e, &db);
        assert_eq!(pool.nblocks(rel(REL)).unwrap(), 4);
        assert_eq!(pool.pinned_buffers(), 0, "the extension's pin leaked");
        assert!(
            row_of(&pool, tag(REL, 4)).is_none(),
            "block 4 left in the pool"
        );
        db.faulty.clear();
        let e = pool.read_buffer(rel(REL), 4, None).unwrap_err();
        assert!(
            matches!(e, bufmgr::Error::BlockOutOfRange { block: 4, .. }),
            "{e:?}"
        );
    });
}

/// A write failing while a reader evicts a dirty victim: the read fails with
/// the I/O error, no pin is leaked, every dirty page stays in the pool.
#[test]
fn a_failed_eviction_write_fails_the_read_and_keeps_the_page() {
    with_timeout(30, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), 12);
        let pool = db.pool(small_config(8));
        for b in 0..8 {
            bump_version(&pool, rel(REL), b);
        }
        db.faulty.fail_writes_after(0);
        let e = pool.read_buffer(rel(REL), 8, None).unwrap_err();
        assert_io_naming_path(&e, &db);
        assert_eq!(pool.pinned_buffers(), 0, "the failed victim's pin leaked");
        assert!(pool.write_failure().is_some());
        for b in 0..8 {
            let row = row_of(&pool, tag(REL, b)).expect("dirty page dropped");
            assert!(row.dirty, "block {b} lost its dirty bit");
            assert_eq!(read_version(&pool, rel(REL), b), 1);
        }
        // Later evictions of dirty pages are refused, not retried silently.
        db.faulty.clear();
        assert_refused(
            pool.read_buffer(rel(REL), 9, None),
            "read needing a dirty victim",
        );
        assert_eq!(pool.pinned_buffers(), 0);
    });
}

#[test]
fn a_failed_fsync_is_fatal_and_no_later_checkpoint_succeeds() {
    with_timeout(30, || {
        let db = TestDb::new();
        db.create_rel(rel(REL), 4);
        let pool = BufferPool::new(PoolConfig::new(16).partitions(1), db.backend()).unwrap();
        bump_version(&pool, rel(REL), 2);
        db.faulty.fail_syncs(true);
        let e = pool.flush_all(false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io, "{e}");
        assert!(e.to_string().contains("injected sync failure"), "{e}");
        // The page was written, but the kernel may have dropped it with the
        // failed fsync: a retried fsync would succeed and prove nothing
        // (PostgreSQL's "fsyncgate"). So the next checkpoint is refused,
        // even with the fault gone and nothing dirty, and so are writes.
        assert!(!row_of(&pool, tag(REL, 2)).unwrap().dirty);
        db.faulty.fail_syncs(false);
        match pool.flush_all(false) {
            Err(e @ Error::WritesRefused(_)) => {
                assert!(e.to_string().contains("injected sync failure"), "{e}");
            }
            other => panic!("checkpoint after a failed fsync: {other:?}"),
        }
        assert!(
            pool.write_failure()
                .is_some_and(|m| m.contains("injected sync failure")),
            "the pool says why it refuses"
        );
    });
}
