//! Rule 5, WAL before data: before a dirty page of a permanent relation is
//! written, by whoever writes it, the WAL is flushed up to the page's LSN.
//! Unlogged relations need no WAL flush (and checkpoints skip them unless
//! asked). A failed WAL flush stops the write and keeps the page dirty.

mod common;

use std::sync::Arc;

use bufmgr::{BlockNumber, BufferPool, Error, ErrorKind, RelId, RingKind};
use common::{
    TestDb, TestWal, check_page, fill_page, read_version, rel, row_of, small_config, tag,
    with_timeout,
};

const P: u32 = 21;
const U: u32 = 22;

/// Write the next version of `block` and log it at `lsn`.
fn change(pool: &BufferPool, r: u32, block: BlockNumber, lsn: u64) {
    let mut g = pool
        .read_buffer(rel(r), block, None)
        .unwrap()
        .lock_exclusive();
    let v = check_page(&g, block).unwrap() + 1;
    fill_page(&mut g, block, v);
    g.set_lsn(lsn);
    g.mark_dirty();
}

fn setup() -> (TestDb, Arc<TestWal>, BufferPool) {
    let db = TestDb::new();
    db.create_rel(rel(P), 40);
    db.create_rel(rel(U), 8);
    let wal = TestWal::new();
    let pool = db.pool_with_wal(small_config(8), wal.clone());
    (db, wal, pool)
}

fn assert_rule5(db: &TestDb) {
    let writes = db.storage.writes();
    assert!(!writes.is_empty());
    for w in writes.iter().filter(|w| w.tag.rel == RelId(P)) {
        assert!(
            w.wal_flushed >= w.page_lsn,
            "rule 5: {} written with LSN {} while WAL was flushed only to {}",
            w.tag,
            w.page_lsn,
            w.wal_flushed
        );
    }
}

#[test]
fn every_write_path_flushes_the_wal_first() {
    with_timeout(30, || {
        let (db, wal, pool) = setup();
        let mut lsn = 100;
        let mut next = || {
            lsn += 10;
            lsn
        };
        // Backend writes: fill the pool with dirty pages, then miss.
        for b in 0..8 {
            change(&pool, P, b, next());
        }
        for b in 8..16 {
            read_version(&pool, rel(P), b);
        }
        // Explicit eviction, relation flush, checkpoint.
        change(&pool, P, 16, next());
        let id = row_of(&pool, tag(P, 16)).unwrap().id;
        assert_eq!(pool.evict_buffer(id).unwrap(), (true, true));
        change(&pool, P, 17, next());
        assert_eq!(pool.flush_relation(rel(P)).unwrap(), 1);
        for b in 18..22 {
            change(&pool, P, b, next());
        }
        assert!(pool.flush_all(false).unwrap() >= 1);
        // A bulk-write ring recycling its own dirty buffer.
        let mut ring = pool.ring(RingKind::BulkWrite).unwrap();
        for b in 22..30 {
            let mut g = pool
                .read_buffer(rel(P), b, Some(&mut ring))
                .unwrap()
                .lock_exclusive();
            fill_page(&mut g, b, 1);
            g.set_lsn(next());
            g.mark_dirty();
        }
        // A background-writer round.
        for b in 30..38 {
            change(&pool, P, b, next());
        }
        for _ in 0..4 {
            pool.bgwriter_round().unwrap();
        }

        let st = pool.stats();
        let t = st.totals();
        assert!(t.writes_backend >= 8, "{t:?}");
        assert!(t.writes_ring >= 1, "{t:?}");
        assert!(st.writes_other >= 2 && st.writes_checkpoint >= 1, "{st:?}");
        assert_rule5(&db);
        // The WAL was asked, and never for more than was needed at the time.
        let flushes = wal.flushes();
        assert!(!flushes.is_empty());
        assert!(flushes.iter().all(|&l| l <= lsn));
        pool.flush_all(false).unwrap();
        assert_rule5(&db);
    });
}

#[test]
fn unlogged_pages_need_no_wal_and_checkpoints_skip_them() {
    with_timeout(30, || {
        let (db, wal, pool) = setup();
        pool.set_unlogged(RelId(U), true);
        for b in 0..3 {
            change(&pool, U, b, 10_000 + u64::from(b));
        }
        change(&pool, P, 0, 50);
        // A checkpoint without unlogged pages writes only the permanent one.
        assert_eq!(pool.flush_all(false).unwrap(), 1);
        assert_eq!(wal.flushes(), vec![50]);
        for b in 0..3 {
            assert!(
                row_of(&pool, tag(U, b)).unwrap().dirty,
                "unlogged page written"
            );
        }
        // With them (shutdown), and without any WAL flush for them.
        assert_eq!(pool.flush_all(true).unwrap(), 3);
        assert_eq!(wal.flushes(), vec![50], "a WAL flush for an unlogged page");
        let u_writes: Vec<_> = db
            .storage
            .writes()
            .into_iter()
            .filter(|w| w.tag.rel == RelId(U))
            .collect();
        assert_eq!(u_writes.len(), 3);
        assert!(
            u_writes
                .iter()
                .all(|w| w.page_lsn >= 10_000 && w.wal_flushed < 10_000)
        );
        // Evicting an unlogged page needs no WAL either.
        change(&pool, U, 4, 20_000);
        for b in 8..20 {
            read_version(&pool, rel(P), b);
        }
        assert_eq!(wal.flushes(), vec![50]);
        assert_eq!(db.storage.writes_of(tag(U, 4)).len(), 1);
    });
}

#[test]
fn a_failed_wal_flush_stops_the_write_and_keeps_the_page_dirty() {
    with_timeout(30, || {
        let (db, wal, pool) = setup();
        change(&pool, P, 3, 500);
        wal.fail_flushes(true);
        let e = pool.flush_relation(rel(P)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io, "{e}");
        match &e {
            Error::WalFlush { lsn, tag: t, .. } => {
                assert_eq!((*lsn, *t), (500, tag(P, 3)));
            }
            other => panic!("expected WalFlush, got {other:?}"),
        }
        let msg = e.to_string();
        assert!(msg.contains("relation 21 block 3"), "{msg}");
        assert!(
            db.storage.writes().is_empty(),
            "the page was written anyway"
        );
        assert!(row_of(&pool, tag(P, 3)).unwrap().dirty);
        assert_eq!(pool.pinned_buffers(), 0);

        // An eviction that needs the page fails the same way, without a leaked pin.
        for b in 0..8 {
            if b != 3 {
                change(&pool, P, b, 400);
            }
        }
        let e = pool.read_buffer(rel(P), 30, None).unwrap_err();
        assert!(matches!(e, Error::WalFlush { .. }), "{e:?}");
        assert_eq!(pool.pinned_buffers(), 0);
        assert!(db.storage.writes().is_empty());

        // The WAL recovers: everything is written, WAL first.
        wal.fail_flushes(false);
        assert_eq!(pool.flush_all(false).unwrap(), 8);
        assert_rule5(&db);
        assert_eq!(check_page(&db.read_file_page(rel(P), 3), 3), Ok(1));
    });
}
