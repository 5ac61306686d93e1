//! Page checksums: computed by the pool when it writes a page, verified when
//! it reads one. Bad bytes on disk are an error value naming the relation,
//! block and file, never a panic and never a page cached as valid.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use bufmgr::{
    BlockNumber, BufferPool, Error, ErrorKind, PAGE_SIZE, PoolConfig, RingKind, StorageBackend,
};
use common::{TestDb, check_page, fill_page, rel, tag, with_timeout};

const REL: u32 = 42;

/// Blocks 0..4 of relation 42 at version 1, written through a pool and
/// flushed; the pool is gone afterwards.
fn write_relation(db: &TestDb) {
    let pool = db.pool(PoolConfig::new(16).partitions(1));
    pool.create_fork(rel(REL)).unwrap();
    for b in 0..4 {
        let mut g = pool.extend(rel(REL), None).unwrap();
        fill_page(&mut g, b, 1);
        g.mark_dirty();
    }
    assert_eq!(pool.flush_all(false).unwrap(), 4);
}

fn patch_file(db: &TestDb, offset: u64, f: impl FnOnce(&mut [u8])) {
    let path = db.storage.path(rel(REL));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let mut buf = vec![0u8; PAGE_SIZE];
    file.read_exact_at(&mut buf, offset).unwrap();
    f(&mut buf);
    file.write_all_at(&buf, offset).unwrap();
}

fn corrupt_byte(db: &TestDb, block: BlockNumber, at: usize) {
    patch_file(db, u64::from(block) * PAGE_SIZE as u64, |p| p[at] ^= 0x40);
}

fn fresh_pool(db: &TestDb, checksums: bool) -> BufferPool {
    BufferPool::new(
        PoolConfig::new(16).partitions(1).checksums(checksums),
        db.fresh_storage(),
    )
    .unwrap()
}

fn assert_mismatch(r: bufmgr::Result<impl std::fmt::Debug>, db: &TestDb, block: BlockNumber) {
    let e = match r {
        Err(e) => e,
        Ok(v) => panic!("a corrupt page of block {block} was read as valid: {v:?}"),
    };
    assert_eq!(e.kind(), ErrorKind::CorruptData, "{e}");
    let path = db.storage.path(rel(REL));
    match &e {
        Error::ChecksumMismatch {
            tag: t,
            path: p,
            stored,
            computed,
        } => {
            assert_eq!(*t, tag(REL, block));
            assert_eq!(p, &path);
            assert_ne!(stored, computed);
        }
        other => panic!("expected ChecksumMismatch, got {other:?}"),
    }
    let msg = e.to_string();
    assert!(msg.contains(&format!("relation {REL}")), "{msg}");
    assert!(msg.contains(&format!("block {block}")), "{msg}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
}

#[test]
fn a_corrupt_byte_is_a_checksum_error_every_time() {
    with_timeout(30, || {
        let db = TestDb::new();
        write_relation(&db);
        corrupt_byte(&db, 3, 4000);

        let pool = fresh_pool(&db, true);
        assert_mismatch(pool.read_buffer(rel(REL), 3, None), &db, 3);
        assert_eq!(pool.stats().checksum_failures, 1);
        assert_eq!(pool.pinned_buffers(), 0, "a failed read leaked its pin");
        assert!(
            pool.buffercache()
                .iter()
                .all(|r| r.tag != Some(tag(REL, 3))),
            "a corrupt page shows as a valid buffer"
        );

        // Other blocks are fine.
        for b in 0..3 {
            let g = pool.read_buffer(rel(REL), b, None).unwrap().lock_shared();
            assert_eq!(check_page(&g, b), Ok(1));
        }
        // Not cached as valid: a second read (and one through a ring) fails again.
        assert_mismatch(pool.read_buffer(rel(REL), 3, None), &db, 3);
        let mut ring = pool.ring(RingKind::BulkRead).unwrap();
        assert_mismatch(pool.read_buffer(rel(REL), 3, Some(&mut ring)), &db, 3);
        assert_eq!(pool.stats().checksum_failures, 3);
        assert_eq!(pool.pinned_buffers(), 0);
    });
}

#[test]
fn with_checksums_off_the_corrupt_page_is_read_as_is() {
    with_timeout(30, || {
        let db = TestDb::new();
        write_relation(&db);
        corrupt_byte(&db, 3, 4000);
        let pool = fresh_pool(&db, false);
        let g = pool.read_buffer(rel(REL), 3, None).unwrap().lock_shared();
        // The bytes are what the disk holds: the model sees the damage.
        assert!(check_page(&g, 3).unwrap_err().contains("torn"));
        drop(g);
        assert_eq!(pool.stats().checksum_failures, 0);
    });
}

#[test]
fn a_damaged_header_field_is_detected_too() {
    with_timeout(30, || {
        let db = TestDb::new();
        write_relation(&db);
        // The LSN is covered by the checksum; the checksum field itself holds it.
        corrupt_byte(&db, 1, 3);
        corrupt_byte(&db, 2, 9);
        let pool = fresh_pool(&db, true);
        assert_mismatch(pool.read_buffer(rel(REL), 1, None), &db, 1);
        assert_mismatch(pool.read_buffer(rel(REL), 2, None), &db, 2);
        assert_eq!(pool.stats().checksum_failures, 2);
    });
}

#[test]
fn a_page_copied_to_the_wrong_block_is_detected() {
    with_timeout(30, || {
        let db = TestDb::new();
        write_relation(&db);
        let path = db.storage.path(rel(REL));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let mut page1 = vec![0u8; PAGE_SIZE];
        file.read_exact_at(&mut page1, PAGE_SIZE as u64).unwrap();
        file.write_all_at(&page1, 2 * PAGE_SIZE as u64).unwrap();
        drop(file);
        let pool = fresh_pool(&db, true);
        assert_mismatch(pool.read_buffer(rel(REL), 2, None), &db, 2);
        assert_eq!(
            check_page(
                &pool.read_buffer(rel(REL), 1, None).unwrap().lock_shared(),
                1
            ),
            Ok(1)
        );
    });
}

#[test]
fn a_torn_write_is_detected_on_the_next_read() {
    with_timeout(30, || {
        let db = TestDb::new();
        write_relation(&db);
        {
            let pool = db.pool(PoolConfig::new(16).partitions(1));
            let mut g = pool
                .read_buffer(rel(REL), 2, None)
                .unwrap()
                .lock_exclusive();
            fill_page(&mut g, 2, 2);
            g.mark_dirty();
            drop(g);
            db.faulty.tear_next_write(Some(tag(REL, 2)));
            let e = pool.flush_all(false).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Io, "{e}");
        }
        let pool = fresh_pool(&db, true);
        assert_mismatch(pool.read_buffer(rel(REL), 2, None), &db, 2);
        for b in [0, 1, 3] {
            let g = pool.read_buffer(rel(REL), b, None).unwrap().lock_shared();
            assert_eq!(check_page(&g, b), Ok(1));
        }
    });
}

/// A page extended but never written (a crash before its first write) is
/// blank with its checksum stamped, and reads as new; the same block zeroed
/// on disk, checksum field included, is a `ZeroedPage` error naming it
/// unless the pool runs with `zero_damaged_pages`.
#[test]
fn a_never_written_page_is_new_but_an_all_zero_page_is_an_error() {
    with_timeout(30, || {
        let db = TestDb::new();
        {
            let pool = db.pool(PoolConfig::new(16).partitions(1));
            pool.create_fork(rel(REL)).unwrap();
            // Extended (a blank page reserved on disk) but never dirtied.
            drop(pool.extend(rel(REL), None).unwrap());
        }
        {
            let pool = fresh_pool(&db, true);
            let g = pool.read_buffer(rel(REL), 0, None).unwrap().lock_shared();
            assert!(bufmgr::page::is_new(&g), "blank after the checksum field");
            assert!(!bufmgr::page::is_zeroed(&g), "the checksum is stamped");
            drop(g);
            assert_eq!(pool.stats().checksum_failures, 0);
        }
        // Zero the whole page on disk, checksum included.
        let path = db.storage.path(rel(REL));
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[0u8; PAGE_SIZE], 0).unwrap();
        drop(f);
        {
            let pool = fresh_pool(&db, true);
            let e = pool.read_buffer(rel(REL), 0, None).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::CorruptData, "{e}");
            assert!(matches!(e, Error::ZeroedPage { .. }), "{e}");
            let msg = e.to_string();
            assert!(msg.contains("block 0"), "{msg}");
            assert!(msg.contains(&path.display().to_string()), "{msg}");
            assert_eq!(pool.stats().checksum_failures, 1);
        }
        let pool = BufferPool::new(
            PoolConfig::new(16)
                .partitions(1)
                .checksums(true)
                .zero_damaged_pages(true),
            db.fresh_storage(),
        )
        .unwrap();
        let g = pool.read_buffer(rel(REL), 0, None).unwrap().lock_shared();
        assert!(g.iter().all(|&b| b == 0), "read as an empty page");
        drop(g);
        assert_eq!(pool.stats().zeroed_damaged_pages, 1);
        // Without checksums nothing can tell a zeroed page from a new one.
        let pool = fresh_pool(&db, false);
        assert!(pool.read_buffer(rel(REL), 0, None).is_ok());
    });
}

#[test]
fn every_write_carries_a_valid_checksum() {
    with_timeout(30, || {
        let db = TestDb::new();
        write_relation(&db);
        let pool = db.pool(PoolConfig::new(16).partitions(1));
        for v in 2..5 {
            for b in 0..4 {
                let mut g = pool
                    .read_buffer(rel(REL), b, None)
                    .unwrap()
                    .lock_exclusive();
                fill_page(&mut g, b, v);
                g.mark_dirty();
            }
            pool.flush_all(false).unwrap();
            for b in 0..4 {
                let p = db.read_file_page(rel(REL), b);
                assert_eq!(bufmgr::page::verify(&p, b), Ok(()), "version {v} block {b}");
                assert_eq!(check_page(&p, b), Ok(v));
            }
        }
    });
}
