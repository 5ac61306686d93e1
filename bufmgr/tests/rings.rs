//! Buffer rings (`BufferAccessStrategy`): sizes and their pool/8 cap, a scan
//! that stays inside its ring, and the bulk-read ring's reject rule against
//! the bulk-write ring's "flush the WAL and write it" (rule 5).

mod common;

use bufmgr::{BlockNumber, BufferPool, Evictor, PoolConfig, RingKind, RingSizes, SweepBatch};
use common::{TestDb, TestWal, is_resident, rel, row_of, small_config, tag, with_timeout};

const HOT: u32 = 1;
const SCAN: u32 = 2;

#[test]
fn ring_sizes_and_the_pool_eighth_cap() {
    with_timeout(30, || {
        let db = TestDb::new();
        let len = |pool: &BufferPool, k| pool.ring(k).map(|r| r.len());
        // Defaults: 256 KiB / 16 MiB / 2 MiB, i.e. 32 / 2048 / 256 pages.
        let p64 = db.pool(PoolConfig::new(64).partitions(1));
        for k in [RingKind::BulkRead, RingKind::BulkWrite, RingKind::Vacuum] {
            assert_eq!(
                len(&p64, k),
                Some(8),
                "{k:?} in a pool of 64 is capped at 8"
            );
            assert_eq!(p64.ring(k).unwrap().kind(), k);
        }
        let p1024 = db.pool(PoolConfig::new(1024).partitions(1));
        assert_eq!(len(&p1024, RingKind::BulkRead), Some(32));
        assert_eq!(len(&p1024, RingKind::Vacuum), Some(128));
        assert_eq!(len(&p1024, RingKind::BulkWrite), Some(128));

        let sized = db.pool(PoolConfig::new(64).partitions(1).ring_sizes(RingSizes {
            bulk_read_kib: 32,
            bulk_write_kib: 0,
            vacuum_kib: 1024,
        }));
        assert_eq!(len(&sized, RingKind::BulkRead), Some(4));
        assert_eq!(
            len(&sized, RingKind::BulkWrite),
            None,
            "size 0 turns a ring off"
        );
        assert_eq!(len(&sized, RingKind::Vacuum), Some(8));

        let off = db.pool(PoolConfig::new(64).partitions(1).rings(false));
        assert!(off.ring(RingKind::BulkRead).is_none());
        assert_eq!(
            off.ring_forced(RingKind::BulkRead, 256).map(|r| r.len()),
            Some(8)
        );
        // Too small a pool for even one slot.
        let tiny = db.pool(PoolConfig::new(7).partitions(1));
        assert!(tiny.ring(RingKind::BulkRead).is_none());

        // A ring of one pool cannot be used with another.
        let mut foreign = p64.ring(RingKind::BulkRead).unwrap();
        db.create_rel(rel(SCAN), 1);
        let err = p1024
            .read_buffer(rel(SCAN), 0, Some(&mut foreign))
            .unwrap_err();
        assert_eq!(err.kind(), bufmgr::ErrorKind::BadInput, "{err}");
    });
}

/// A hot relation of 40 pages read once, then a 100-block sequential scan
/// through one bulk-read ring in a pool of 64: the scan only recycles its
/// own 8 buffers.
fn scan_through_ring(evictor: Evictor, batch: u32) {
    let db = TestDb::new();
    db.create_rel(rel(HOT), 40);
    db.create_rel(rel(SCAN), 100);
    let pool = db.pool(
        small_config(64)
            .evictor(evictor)
            .batch(SweepBatch::Fixed(batch)),
    );
    for b in 0..40 {
        drop(pool.read_buffer(rel(HOT), b, None).unwrap());
    }
    let mut ring = pool.ring(RingKind::BulkRead).unwrap();
    assert_eq!(ring.len(), 8);
    let before = pool.stats();
    for b in 0..100 {
        let g = pool
            .read_buffer(rel(SCAN), b, Some(&mut ring))
            .unwrap()
            .lock_shared();
        assert_eq!(common::check_page(&g, b), Ok(0));
    }
    let st = pool.stats().since(&before).totals();
    let res = pool.resident_pages();
    let scanned = res.get(&rel(SCAN)).copied().unwrap_or(0);
    assert!(
        (1..=ring.len()).contains(&scanned),
        "{evictor}: {scanned} scan pages resident, ring of {}",
        ring.len()
    );
    assert_eq!(
        res.get(&rel(HOT)).copied(),
        Some(40),
        "{evictor}: the scan evicted pages of the hot relation"
    );
    assert!(
        st.ring_reuses >= 100 - ring.len() as u64,
        "{evictor}: ring reuses {st:?}"
    );
    assert_eq!(st.reads, 100);
    let members: Vec<_> = ring.members().collect();
    assert_eq!(members.len(), ring.len());
    for r in pool.buffercache() {
        if r.tag.is_some_and(|t| t.relfork() == rel(SCAN)) {
            assert!(members.contains(&r.id), "scan page outside the ring: {r:?}");
            assert!(r.usage <= 1, "a ring pin raised usage: {r:?}");
        }
    }

    // The same scan without a ring floods the pool.
    for b in 0..100 {
        drop(pool.read_buffer(rel(SCAN), b, None).unwrap());
    }
    let hot_left = pool.resident_pages().get(&rel(HOT)).copied().unwrap_or(0);
    assert!(
        hot_left < 40,
        "{evictor}: without a ring the scan should have evicted hot pages"
    );
}

#[test]
fn clock_scan_stays_in_its_ring() {
    with_timeout(30, || {
        scan_through_ring(Evictor::Clock, 1);
        scan_through_ring(Evictor::Clock, 4);
    });
}

#[test]
fn hotcool_scan_stays_in_its_ring() {
    with_timeout(30, || {
        scan_through_ring(Evictor::HotCool, 1);
        scan_through_ring(Evictor::HotCool, 4);
    });
}

#[test]
fn probation_scan_stays_in_its_ring() {
    with_timeout(30, || {
        scan_through_ring(Evictor::Probation, 1);
        scan_through_ring(Evictor::Probation, 4);
    });
}

const DIRTIED: BlockNumber = 3;
const PAGE_LSN: u64 = 1000;

/// Scan 100 blocks through a ring of `kind`; after reading block 3 the scan
/// changes it (exclusive lock, LSN 1000, `mark_dirty`).
fn scan_dirtying_one_page(pool: &BufferPool, kind: RingKind) {
    let mut ring = pool.ring(kind).unwrap();
    assert_eq!(ring.len(), 8);
    for b in 0..100 {
        let pin = pool.read_buffer(rel(SCAN), b, Some(&mut ring)).unwrap();
        if b == DIRTIED {
            let mut g = pin.lock_exclusive();
            common::fill_page(&mut g, b, 1);
            g.set_lsn(PAGE_LSN);
            g.mark_dirty();
        }
    }
    assert_eq!(pool.pinned_buffers(), 0);
}

#[test]
fn bulk_read_ring_rejects_a_dirty_page_that_needs_a_wal_flush() {
    with_timeout(30, || {
        for evictor in Evictor::ALL {
            let db = TestDb::new();
            db.create_rel(rel(SCAN), 100);
            let wal = TestWal::new();
            wal.set_flushed(10);
            let pool = db.pool_with_wal(small_config(64).evictor(evictor), wal.clone());
            scan_dirtying_one_page(&pool, RingKind::BulkRead);

            let st = pool.stats().totals();
            assert_eq!(st.ring_rejects, 1, "{evictor}: {st:?}");
            assert_eq!(
                st.writes_ring, 0,
                "{evictor}: the ring wrote the page itself"
            );
            assert!(
                wal.flushes().is_empty(),
                "{evictor}: the scan asked for a WAL flush: {:?}",
                wal.flushes()
            );
            assert!(db.storage.writes_of(tag(SCAN, DIRTIED)).is_empty());
            // The page was left to others: still in the pool, still dirty.
            let row = row_of(&pool, tag(SCAN, DIRTIED)).expect("rejected page stays resident");
            assert!(row.dirty);
            // A checkpoint then writes it, WAL first.
            assert_eq!(pool.flush_all(false).unwrap(), 1);
            assert_eq!(wal.flushes(), vec![PAGE_LSN]);
            let w = db.storage.writes_of(tag(SCAN, DIRTIED));
            assert_eq!(w.len(), 1);
            assert_eq!(w[0].page_lsn, PAGE_LSN);
            assert!(w[0].wal_flushed >= PAGE_LSN, "rule 5: {w:?}");
            assert_eq!(w[0].version, 1);
        }
    });
}

#[test]
fn bulk_read_ring_writes_a_dirty_page_whose_wal_is_already_flushed() {
    with_timeout(30, || {
        let db = TestDb::new();
        db.create_rel(rel(SCAN), 100);
        let wal = TestWal::new();
        wal.set_flushed(5000);
        let pool = db.pool_with_wal(small_config(64), wal.clone());
        scan_dirtying_one_page(&pool, RingKind::BulkRead);
        let st = pool.stats().totals();
        assert_eq!(st.ring_rejects, 0, "{st:?}");
        assert_eq!(
            st.writes_ring, 1,
            "the ring recycles its own dirty buffer: {st:?}"
        );
        assert!(wal.flushes().is_empty(), "no flush was needed");
        let w = db.storage.writes_of(tag(SCAN, DIRTIED));
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].page_lsn, w[0].version), (PAGE_LSN, 1));
        assert!(!is_resident(&pool, tag(SCAN, DIRTIED)));
    });
}

#[test]
fn bulk_write_and_vacuum_rings_flush_wal_then_write_never_reject() {
    with_timeout(30, || {
        for kind in [RingKind::BulkWrite, RingKind::Vacuum] {
            let db = TestDb::new();
            db.create_rel(rel(SCAN), 100);
            let wal = TestWal::new();
            wal.set_flushed(10);
            let pool = db.pool_with_wal(small_config(64), wal.clone());
            scan_dirtying_one_page(&pool, kind);
            let st = pool.stats().totals();
            assert_eq!(st.ring_rejects, 0, "{kind:?}: {st:?}");
            assert_eq!(st.writes_ring, 1, "{kind:?}: {st:?}");
            let flushes = wal.flushes();
            assert!(
                flushes.iter().any(|&l| l >= PAGE_LSN),
                "{kind:?}: no WAL flush up to the page LSN: {flushes:?}"
            );
            let w = db.storage.writes_of(tag(SCAN, DIRTIED));
            assert_eq!(w.len(), 1, "{kind:?}");
            assert_eq!(w[0].page_lsn, PAGE_LSN);
            assert!(
                w[0].wal_flushed >= PAGE_LSN,
                "{kind:?}: rule 5: page written before WAL was flushed: {w:?}"
            );
            assert!(!is_resident(&pool, tag(SCAN, DIRTIED)));
        }
    });
}

/// A bulk load through the bulk-write ring: 60 extensions, each page
/// WAL-logged at a rising LSN. The ring recycles its own dirty buffers,
/// flushing WAL before each write, and the load never floods the pool.
#[test]
fn bulk_load_through_the_bulk_write_ring() {
    with_timeout(30, || {
        let db = TestDb::new();
        let wal = TestWal::new();
        let pool = db.pool_with_wal(small_config(64), wal.clone());
        db.create_rel(rel(HOT), 40);
        for b in 0..40 {
            drop(pool.read_buffer(rel(HOT), b, None).unwrap());
        }
        pool.create_fork(rel(SCAN)).unwrap();
        let mut ring = pool.ring(RingKind::BulkWrite).unwrap();
        for b in 0..60 {
            let mut g = pool.extend(rel(SCAN), Some(&mut ring)).unwrap();
            assert_eq!(g.block(), b);
            common::fill_page(&mut g, b, 1);
            g.set_lsn(100 + u64::from(b));
            g.mark_dirty();
        }
        let st = pool.stats().totals();
        assert_eq!(st.ring_rejects, 0);
        assert!(st.writes_ring >= 60 - 8, "{st:?}");
        assert_eq!(pool.resident_pages().get(&rel(HOT)).copied(), Some(40));
        assert!(pool.resident_pages().get(&rel(SCAN)).copied().unwrap_or(0) <= 8);
        pool.flush_all(false).unwrap();
        for w in db.storage.writes() {
            assert!(w.wal_flushed >= w.page_lsn, "rule 5 violated: {w:?}");
        }
        // Everything arrived.
        let fresh = db.fresh_storage();
        let mut page = vec![0u8; bufmgr::PAGE_SIZE];
        for b in 0..60 {
            fresh.read(tag(SCAN, b), &mut page).unwrap();
            assert_eq!(common::check_page(&page, b), Ok(1));
            assert_eq!(bufmgr::page::page_lsn(&page), 100 + u64::from(b));
        }
    });
}
