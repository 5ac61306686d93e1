//! `read_buffer_zeroed` (PostgreSQL's `RBM_ZERO_AND_LOCK`) gives redo a page
//! to overwrite without reading the copy on disk, which may be torn: no
//! checksum error, no storage read; a page already in the pool is returned
//! as it is; a block past the end of the file is an error.

mod common;

use bufmgr::{ErrorKind, PAGE_SIZE};
use common::{TestDb, fill_page, rel, small_config, with_timeout};

#[test]
fn a_torn_page_on_disk_is_not_read_and_the_buffer_is_zeroed() {
    with_timeout(30, || {
        let db = TestDb::new();
        let rf = rel(1);
        db.create_rel(rf, 4);
        let path = db.backend().path(rf);
        // Tear block 2 on disk: its checksum no longer matches.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[2 * PAGE_SIZE + 5000] ^= 0xFF;
        std::fs::write(&path, &bytes).unwrap();

        let pool = db.pool(small_config(8));
        let err = pool.read_buffer(rf, 2, None).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::CorruptData);
        let reads_before = db.faulty.reads();
        let mut page = pool.read_buffer_zeroed(rf, 2).unwrap();
        assert_eq!(db.faulty.reads(), reads_before, "nothing read from storage");
        assert!(page.iter().all(|&b| b == 0), "zero-filled");
        fill_page(&mut page, 2, 7);
        page.mark_dirty();
        drop(page);
        pool.flush_all(true).unwrap();
        drop(pool);
        // The repaired page now reads back with a valid checksum.
        let pool = db.pool(small_config(8));
        let page = pool.read_buffer(rf, 2, None).unwrap().lock_shared();
        assert_eq!(common::check_page(&page, 2), Ok(7));
    });
}

#[test]
fn a_resident_page_is_returned_as_it_is_and_past_the_end_is_an_error() {
    with_timeout(30, || {
        let db = TestDb::new();
        let rf = rel(1);
        db.create_rel(rf, 2);
        let pool = db.pool(small_config(8));
        let v =
            common::check_page(&pool.read_buffer(rf, 1, None).unwrap().lock_shared(), 1).unwrap();
        let page = pool.read_buffer_zeroed(rf, 1).unwrap();
        assert_eq!(
            common::check_page(&page, 1),
            Ok(v),
            "resident contents kept"
        );
        drop(page);
        let err = pool.read_buffer_zeroed(rf, 2).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadInput);
        assert!(err.to_string().contains("block 2"), "{err}");
        assert_eq!(pool.pinned_buffers(), 0);
    });
}

/// `read_buffer_unverified` accepts a page whose checksum fails (for redo
/// of the commit log, which replay repairs), counting the mismatch; the
/// normal read still refuses it.
#[test]
fn an_unverified_read_accepts_a_torn_page_and_counts_it() {
    with_timeout(30, || {
        let db = TestDb::new();
        let rf = rel(1);
        db.create_rel(rf, 2);
        let path = db.backend().path(rf);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[PAGE_SIZE + 6000] ^= 0xFF;
        std::fs::write(&path, &bytes).unwrap();
        let pool = db.pool(small_config(8));
        assert!(pool.read_buffer(rf, 1, None).is_err());
        let page = pool.read_buffer_unverified(rf, 1).unwrap().lock_shared();
        assert_eq!(
            page[6000],
            bytes[PAGE_SIZE + 6000],
            "the bytes on disk, as they are"
        );
        drop(page);
        assert_eq!(pool.stats().checksum_failures, 2);
    });
}
