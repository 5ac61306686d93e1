//! Rule 6 through the real wiring: with checksums on, the first hint-only
//! dirtying of a clean permanent page after the redo point logs exactly one
//! `FullPage` record, whose end becomes the page LSN; later hints before the
//! next checkpoint log nothing; a checkpoint (new redo point) makes the next
//! first hint log again. Unlogged pages, and a log with full-page writes off,
//! never log an image.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bufmgr::{BufferPool, FileStorage, PoolConfig, RelFork, RelId, WalSink};
use common::{small_segments, within};
use wal::{FPI_FOR_HINT, Lsn, RmgrKind, Wal, WalConfig, WalReader};

/// An offset away from the page header (LSN 0..8, checksum 8..12).
const HINT: usize = 4096;

fn open(dir: &Path, config: WalConfig) -> (Arc<Wal>, BufferPool) {
    let wal = Arc::new(Wal::open(dir, config).unwrap());
    let sink: Arc<dyn WalSink> = wal.clone();
    let storage = Arc::new(FileStorage::open(dir).unwrap());
    let pool = BufferPool::with_wal(PoolConfig::new(16).checksums(true), storage, sink).unwrap();
    (wal, pool)
}

/// A new page of `rf`, written out so that it is clean (page LSN 0).
fn clean_page(pool: &BufferPool, rf: RelFork) {
    pool.create_fork(rf).unwrap();
    let mut g = pool.extend(rf, None).unwrap();
    g.mark_dirty();
    drop(g);
    pool.flush_all(true).unwrap();
}

/// Set a hint on block 0 of `rf`; returns the page LSN afterwards.
fn hint(pool: &BufferPool, rf: RelFork, bits: u16) -> Lsn {
    let g = pool.read_buffer(rf, 0, None).unwrap().lock_shared();
    assert!(g.set_hints(&[(HINT, bits)]).unwrap());
    Lsn(g.lsn())
}

fn records(wal: &Wal) -> u64 {
    wal.stats().records
}

#[test]
fn first_hint_after_each_redo_point_logs_one_image() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let (wal, pool) = open(dir.path(), small_segments());
        let rf = RelFork::main(RelId(1));
        clean_page(&pool, rf);
        assert_eq!(records(&wal), 0);

        // 1. First hint since the redo point (0, no checkpoint yet): one image.
        let lsn1 = hint(&pool, rf, 0x0001);
        assert_eq!(records(&wal), 1);
        assert_eq!(pool.stats().hint_fpis, 1);
        assert_eq!(lsn1, wal.insert_lsn(), "page LSN is the image's end LSN");
        wal.flush(lsn1).unwrap();
        let all = WalReader::new(dir.path(), Lsn::ZERO, wal.segment_size())
            .unwrap()
            .read_to_end()
            .unwrap();
        assert_eq!(all.len(), 1);
        let (start, rec) = &all[0];
        assert_eq!(rec.kind(), RmgrKind::FullPage);
        assert_eq!(rec.info(), FPI_FOR_HINT);
        assert_eq!(rec.blocks().len(), 1);
        assert_eq!(rec.blocks()[0].tag().relfork(), rf);
        assert_eq!(rec.blocks()[0].tag().block, 0);
        assert_eq!(start.as_u64() + rec.encoded_len() as u64, lsn1.as_u64());
        let image = rec.restore_page(0).expect("the record carries an image");
        // PostgreSQL master's order: the page is marked dirty and hinted
        // first, then imaged, so the image carries the hint.
        assert_eq!(
            &image[HINT..HINT + 2],
            &[1, 0],
            "image of the page with the hint"
        );

        // 2. Written out (clean again), hinted again, no checkpoint: no image.
        pool.flush_all(false).unwrap();
        assert!(wal.flushed_lsn() >= lsn1);
        let lsn2 = hint(&pool, rf, 0x0002);
        assert_eq!(lsn2, lsn1, "page LSN unchanged");
        assert_eq!(records(&wal), 1);
        assert_eq!(pool.stats().hint_fpis, 1);

        // 3. A checkpoint moves the redo point past the page LSN (and writes
        //    the hint-dirty page): the next first hint logs again.
        let info = wal.checkpoint(|_| pool.flush_all(false), 10).unwrap();
        assert!(info.redo_lsn >= lsn1);
        assert_eq!(info.pages, 1, "the hint-dirtied page was written");
        assert_eq!(records(&wal), 2, "the checkpoint record");
        let lsn3 = hint(&pool, rf, 0x0004);
        assert_eq!(records(&wal), 3);
        assert_eq!(pool.stats().hint_fpis, 2);
        assert!(lsn3 > info.checkpoint_end);
        assert_eq!(lsn3, wal.insert_lsn());

        // 4. The page is dirty now: further hints do not even ask.
        let lsn4 = hint(&pool, rf, 0x0008);
        assert_eq!((lsn4, records(&wal)), (lsn3, 3));
    });
}

#[test]
fn unlogged_pages_never_log_an_image() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let (wal, pool) = open(dir.path(), small_segments());
        let rf = RelFork::main(RelId(2));
        pool.set_unlogged(rf.rel, true);
        clean_page(&pool, rf);
        assert_eq!(hint(&pool, rf, 1), Lsn::ZERO);
        assert_eq!(records(&wal), 0);
        assert_eq!(pool.stats().hint_fpis, 0);
    });
}

#[test]
fn full_page_writes_off_logs_no_image() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let config = WalConfig {
            full_page_writes: false,
            ..small_segments()
        };
        let (wal, pool) = open(dir.path(), config);
        let rf = RelFork::main(RelId(3));
        clean_page(&pool, rf);
        assert_eq!(hint(&pool, rf, 1), Lsn::ZERO);
        assert_eq!(records(&wal), 0);
        assert!(!wal.needs_full_page_image(Lsn::ZERO));
    });
}
