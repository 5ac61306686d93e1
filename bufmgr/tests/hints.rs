//! Rule 6: hint bits, the one change made without the exclusive lock. A
//! batch lands in one go and dirties the page (so a checkpoint writes it);
//! bad offsets are refused whole; a hint arriving while the page's write is
//! in flight is skipped (`Ok(false)`), so the checksum computed in place is
//! never invalidated; with checksums on, the first hint-dirtying of a clean
//! permanent page asks the WAL for a full-page image and takes its LSN.

mod common;

use std::time::Duration;

use bufmgr::{BufferPool, ErrorKind, PoolConfig};
use common::{
    HINT_AREA_OFFSET, TestDb, TestWal, bump_version, check_page, read_u16, rel, row_of, tag,
    with_timeout,
};

const REL: u32 = 5;
const H: usize = HINT_AREA_OFFSET;

fn setup(checksums: bool, wal: Option<std::sync::Arc<TestWal>>) -> (TestDb, BufferPool) {
    let db = TestDb::new();
    db.create_rel(rel(REL), 4);
    let config = PoolConfig::new(16).partitions(1).checksums(checksums);
    let pool = match wal {
        Some(w) => db.pool_with_wal(config, w),
        None => db.pool(config),
    };
    (db, pool)
}

#[test]
fn a_batch_of_hints_lands_dirties_the_page_and_is_written() {
    with_timeout(30, || {
        let (db, pool) = setup(true, None);
        let g = pool.read_buffer(rel(REL), 1, None).unwrap().lock_shared();
        assert!(!row_of(&pool, tag(REL, 1)).unwrap().dirty);
        let batch = [
            (H, 0x0001u16),
            (H + 2, 0x8000),
            (H + 10, 0x00F0),
            (H + 62, 0x0A0A),
        ];
        assert!(g.set_hints(&batch).unwrap());
        for &(off, bits) in &batch {
            assert_eq!(read_u16(&g, off), bits, "hint at {off}");
        }
        // OR semantics: earlier bits stay.
        assert!(g.set_hint(H, 0x0002).unwrap());
        assert_eq!(read_u16(&g, H), 0x0003);
        assert_eq!(
            check_page(&g, 1),
            Ok(0),
            "hints touched the rest of the page"
        );
        drop(g);
        let row = row_of(&pool, tag(REL, 1)).unwrap();
        assert!(row.dirty, "a hinted page must be dirty");
        let st = pool.stats();
        assert_eq!((st.hints_set, st.hints_refused), (2, 0));

        assert_eq!(pool.flush_all(false).unwrap(), 1);
        assert!(!row_of(&pool, tag(REL, 1)).unwrap().dirty);
        drop(pool);

        // On disk, through a fresh pool that verifies the checksum.
        let fresh = BufferPool::new(PoolConfig::new(16).partitions(1), db.fresh_storage()).unwrap();
        let g = fresh.read_buffer(rel(REL), 1, None).unwrap().lock_shared();
        assert_eq!(read_u16(&g, H), 0x0003);
        assert_eq!(read_u16(&g, H + 2), 0x8000);
        assert_eq!(read_u16(&g, H + 10), 0x00F0);
        assert_eq!(read_u16(&g, H + 62), 0x0A0A);
        assert_eq!(check_page(&g, 1), Ok(0));
    });
}

#[test]
fn bad_offsets_are_refused_and_nothing_of_the_batch_lands() {
    with_timeout(30, || {
        let (_db, pool) = setup(true, None);
        let g = pool.read_buffer(rel(REL), 0, None).unwrap().lock_shared();
        for bad in [H + 1, 8191, 8192, 8194, 100_000] {
            let e = g.set_hint(bad, 1).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BadInput, "{e}");
            assert!(e.to_string().contains(&bad.to_string()), "{e}");
        }
        // A batch with one bad offset is refused whole.
        let e = g.set_hints(&[(H, 0xFFFF), (H + 3, 1)]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadInput);
        assert_eq!(read_u16(&g, H), 0, "part of a refused batch landed");
        // The last whole field is fine.
        assert!(g.set_hint(8190, 0x0100).unwrap());
        assert_eq!(read_u16(&g, 8190), 0x0100);
        drop(g);
        assert_eq!(pool.stats().hints_set, 1);
    });
}

/// An even offset so large that `offset + 2` overflows must be refused like
/// any other offset outside the page (bad input is never a panic; in a
/// release build the wrapped sum would pass the bounds check and the hint
/// would be OR-ed into memory far outside the pool).
#[test]
fn a_hint_offset_near_usize_max_is_an_error_not_a_panic() {
    with_timeout(30, || {
        let (_db, pool) = setup(true, None);
        let g = pool.read_buffer(rel(REL), 0, None).unwrap().lock_shared();
        for bad in [usize::MAX - 1, usize::MAX - 3] {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| g.set_hint(bad, 1)));
            let r = r.unwrap_or_else(|_| panic!("set_hint({bad}, 1) panicked instead of Err"));
            let e = r.expect_err("an offset outside the page was accepted");
            assert_eq!(e.kind(), ErrorKind::BadInput, "{e}");
        }
        drop(g);
        assert_eq!(pool.stats().hints_set, 0);
    });
}

/// A write of the page is held in flight (a storage gate) while a reader
/// holding the shared lock tries to set a hint: it is skipped, the page
/// bytes do not change under the write, and the written page verifies.
#[test]
fn a_hint_during_an_in_flight_write_is_skipped() {
    with_timeout(30, || {
        let (db, pool) = setup(true, None);
        let rf = rel(REL);
        let v = bump_version(&pool, rf, 2);
        let g = pool.read_buffer(rf, 2, None).unwrap().lock_shared();
        db.storage.arm_gate(tag(REL, 2));
        std::thread::scope(|s| {
            let flusher = s.spawn(|| pool.flush_relation(rf));
            assert!(
                db.storage.wait_at_gate(Duration::from_secs(10)),
                "the flush never reached the storage"
            );
            // The write is in flight: the hint is skipped.
            assert!(!g.set_hints(&[(H, 0x0004), (H + 4, 0x0001)]).unwrap());
            assert_eq!(read_u16(&g, H), 0);
            assert_eq!(read_u16(&g, H + 4), 0);
            db.storage.open_gate();
            assert_eq!(flusher.join().unwrap().unwrap(), 1);
        });
        let st = pool.stats();
        assert_eq!((st.hints_set, st.hints_refused), (0, 1));
        assert!(!row_of(&pool, tag(REL, 2)).unwrap().dirty);
        // What reached the disk is consistent and verifies.
        let p = db.read_file_page(rf, 2);
        assert_eq!(bufmgr::page::verify(&p, 2), Ok(()));
        assert_eq!(check_page(&p, 2), Ok(v));
        assert_eq!(read_u16(&p, H), 0);
        // Once the write is done the hint is taken.
        assert!(g.set_hint(H, 0x0004).unwrap());
        drop(g);
        assert!(row_of(&pool, tag(REL, 2)).unwrap().dirty);
    });
}

#[test]
fn first_hint_of_a_clean_permanent_page_logs_a_full_page_image() {
    with_timeout(30, || {
        let wal = TestWal::new();
        wal.set_fpi_lsn(777);
        let (db, pool) = setup(true, Some(wal.clone()));
        let g = pool.read_buffer(rel(REL), 0, None).unwrap().lock_shared();
        assert_eq!(g.lsn(), 0);
        assert!(g.set_hint(H, 1).unwrap());
        assert_eq!(wal.fpi_calls(), vec![tag(REL, 0)]);
        assert_eq!(g.lsn(), 777, "the image's LSN becomes the page LSN");
        // The page is dirty now: no second image.
        assert!(g.set_hint(H + 2, 1).unwrap());
        assert_eq!(wal.fpi_calls().len(), 1);
        drop(g);
        assert_eq!(pool.stats().hint_fpis, 1);

        // Written (WAL first, up to the image), then clean: the next hint
        // logs a new image.
        pool.flush_all(false).unwrap();
        let w = db.storage.writes_of(tag(REL, 0));
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].page_lsn, 777);
        assert!(w[0].wal_flushed >= 777, "rule 5: {w:?}");
        wal.set_fpi_lsn(900);
        let g = pool.read_buffer(rel(REL), 0, None).unwrap().lock_shared();
        assert!(g.set_hint(H + 4, 1).unwrap());
        assert_eq!(wal.fpi_calls().len(), 2);
        assert_eq!(g.lsn(), 900);
        drop(g);
        assert_eq!(pool.stats().hint_fpis, 2);
    });
}

/// The WAL insert of a hint's full-page image fails (a full disk): the call
/// is an error, and the page is left clean, so no checkpoint or eviction
/// writes it without the image that would repair a torn write. The next
/// hint of the page asks for the image again.
#[test]
fn a_failed_hint_image_leaves_the_page_clean_and_unwritten() {
    with_timeout(30, || {
        let wal = TestWal::new();
        wal.set_fpi_lsn(777);
        wal.fail_fpis(true);
        let (db, pool) = setup(true, Some(wal.clone()));
        let g = pool.read_buffer(rel(REL), 0, None).unwrap().lock_shared();
        let e = g.set_hint(H, 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io, "{e}");
        assert!(e.to_string().contains("injected WAL insert failure"), "{e}");
        assert_eq!(wal.fpi_calls(), vec![tag(REL, 0)]);
        assert_eq!(g.lsn(), 0, "a failed image set the page LSN");
        drop(g);
        let row = row_of(&pool, tag(REL, 0)).unwrap();
        assert!(!row.dirty, "a page without its image was left dirty");
        assert_eq!(pool.stats().hint_fpis, 0);
        // Nothing to write, with or without unlogged pages.
        assert_eq!(pool.flush_all(true).unwrap(), 0);
        assert_eq!(pool.flush_all(false).unwrap(), 0);
        assert!(db.storage.writes_of(tag(REL, 0)).is_empty());

        // The WAL works again: the next hint logs the image and dirties.
        wal.fail_fpis(false);
        let g = pool.read_buffer(rel(REL), 0, None).unwrap().lock_shared();
        assert!(g.set_hint(H + 2, 1).unwrap());
        assert_eq!(wal.fpi_calls().len(), 2);
        assert_eq!(g.lsn(), 777);
        drop(g);
        assert!(row_of(&pool, tag(REL, 0)).unwrap().dirty);
        assert_eq!(pool.flush_all(false).unwrap(), 1);
        let w = db.storage.writes_of(tag(REL, 0));
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].page_lsn, 777);
    });
}

#[test]
fn no_full_page_image_when_the_page_is_already_dirty() {
    with_timeout(30, || {
        let wal = TestWal::new();
        wal.set_fpi_lsn(777);
        let (_db, pool) = setup(true, Some(wal.clone()));
        bump_version(&pool, rel(REL), 1);
        let g = pool.read_buffer(rel(REL), 1, None).unwrap().lock_shared();
        assert!(g.set_hint(H, 1).unwrap());
        assert!(wal.fpi_calls().is_empty());
        assert_eq!(g.lsn(), 0);
        assert!(wal.flushes().is_empty(), "a hint flushed the WAL");
    });
}

#[test]
fn no_full_page_image_for_unlogged_relations_or_without_checksums() {
    with_timeout(30, || {
        // Unlogged relation.
        let wal = TestWal::new();
        wal.set_fpi_lsn(777);
        let (_db, pool) = setup(true, Some(wal.clone()));
        pool.set_unlogged(bufmgr::RelId(REL), true);
        let g = pool.read_buffer(rel(REL), 0, None).unwrap().lock_shared();
        assert!(g.set_hint(H, 1).unwrap());
        assert!(
            wal.fpi_calls().is_empty(),
            "image logged for an unlogged page"
        );
        assert_eq!(g.lsn(), 0);
        drop(g);
        assert!(row_of(&pool, tag(REL, 0)).unwrap().dirty);

        // Checksums off: a torn hinted page is harmless, no image.
        let wal = TestWal::new();
        wal.set_fpi_lsn(777);
        let (_db, pool) = setup(false, Some(wal.clone()));
        let g = pool.read_buffer(rel(REL), 0, None).unwrap().lock_shared();
        assert!(g.set_hint(H, 1).unwrap());
        assert!(wal.fpi_calls().is_empty());
        assert_eq!(g.lsn(), 0);
    });
}

#[test]
fn an_image_lsn_never_lowers_the_page_lsn_and_none_keeps_it() {
    with_timeout(30, || {
        let wal = TestWal::new();
        wal.set_flushed(10_000);
        let (_db, pool) = setup(true, Some(wal.clone()));
        // Page 0 has LSN 5000 on disk (written through the pool).
        {
            let mut g = pool
                .read_buffer(rel(REL), 0, None)
                .unwrap()
                .lock_exclusive();
            g.set_lsn(5000);
            g.mark_dirty();
        }
        pool.flush_all(false).unwrap();
        wal.set_fpi_lsn(300);
        let g = pool.read_buffer(rel(REL), 0, None).unwrap().lock_shared();
        assert!(g.set_hint(H, 1).unwrap());
        assert_eq!(wal.fpi_calls().len(), 1);
        assert_eq!(g.lsn(), 5000);
        drop(g);
        // `None` (page already covered since the redo point): LSN unchanged.
        wal.set_fpi_lsn(0);
        let g = pool.read_buffer(rel(REL), 1, None).unwrap().lock_shared();
        assert!(g.set_hint(H, 1).unwrap());
        assert_eq!(wal.fpi_calls().len(), 2);
        assert_eq!(g.lsn(), 0);
        drop(g);
        assert_eq!(
            pool.stats().hint_fpis,
            1,
            "only images actually logged count"
        );
    });
}
