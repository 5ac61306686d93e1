//! `Heap::bulk_writer`: rows appended to new pages filled whole, one
//! full-page record per page; the WAL alone rebuilds every page (through
//! `wal::redo_full_page`); rows land densely; the bulk-write ring keeps the
//! load's footprint in the pool to the ring.

mod common;

use std::path::Path;

use bufmgr::{BufferPool, RelFork, RelId, RingKind};
use common::{db, masked_pages, pool_over, row, wal_config};
use heap::page::{HeapPage, PageId};
use heap::{Heap, InMemoryTransactions, ScanOptions};
use wal::{Lsn, MIN_SEGMENT_SIZE, RmgrKind, WalReader};

const REL: RelId = RelId(60);

fn replay_full_pages(datadir: &Path, pool: &BufferPool) -> usize {
    let mut reader = WalReader::new(datadir, Lsn::ZERO, MIN_SEGMENT_SIZE).unwrap();
    let mut n = 0;
    while let Some((lsn, record)) = reader.next_record().unwrap() {
        let end = Lsn(lsn.as_u64() + record.encoded_len() as u64);
        match record.kind() {
            RmgrKind::FullPage => wal::redo_full_page(&record, end, pool).unwrap(),
            RmgrKind::Heap => heap::redo(&record, end, pool).unwrap(),
            _ => continue,
        }
        n += 1;
    }
    n
}

#[test]
fn bulk_written_pages_are_dense_logged_once_and_replayed() {
    let db = db(64, Some(wal_config(true)));
    let heap = Heap::open(db.pool.clone(), db.wal.clone(), REL, true).unwrap();
    let txns = InMemoryTransactions::new();
    let x = txns.begin();
    let ring = db.pool.ring(RingKind::BulkWrite);
    let ring_len = ring
        .as_ref()
        .map(|r| r.len())
        .expect("a 64-buffer pool has a ring");
    let mut w = heap.bulk_writer(x, ring);
    let mut tids = Vec::new();
    for n in 0..3000u64 {
        tids.push(w.insert(&row(n, 100 + (n as usize % 5) * 10)).unwrap());
    }
    let stats = w.finish().unwrap();
    txns.commit(x, Lsn::ZERO);
    assert_eq!(stats.tuples, 3000);
    let pages = db.pool.nblocks(RelFork::main(REL)).unwrap();
    assert_eq!(stats.pages, u64::from(pages));
    // TIDs ascend page by page.
    assert!(tids.windows(2).all(|w| w[0] < w[1]));
    // The ring held the load's footprint to the ring's size.
    let resident = db
        .pool
        .resident_pages()
        .get(&RelFork::main(REL))
        .copied()
        .unwrap_or(0);
    assert!(
        resident <= ring_len + 1,
        "{resident} resident, ring {ring_len}"
    );
    // Dense: every page but the last is full to within one tuple (the
    // largest row is 140 bytes + the 26-byte header).
    let rf = RelFork::main(REL);
    for block in 0..pages - 1 {
        let page = db.pool.read_buffer(rf, block, None).unwrap().lock_shared();
        let free = HeapPage::parse(&page, PageId { rel: REL, block })
            .unwrap()
            .free_space();
        assert!(free < 166 + 8, "block {block}: {free} bytes free");
    }
    let snap = txns.snapshot(0);
    let live = heap.scan(&snap, &txns, ScanOptions::default()).unwrap();
    assert_eq!(live.len(), 3000);
    db.wal.as_ref().unwrap().flush_all().unwrap();
    let before = masked_pages(&db.pool, REL);

    // One record per page, and the WAL alone rebuilds every page.
    let empty = tempfile::tempdir().unwrap();
    let fresh = pool_over(empty.path(), 64, None);
    assert_eq!(replay_full_pages(db.dir.path(), &fresh), pages as usize);
    let after = masked_pages(&fresh, REL);
    assert_eq!(after.len(), before.len());
    assert!(after == before, "replayed pages differ");
    let again = Heap::open(fresh.clone(), None, REL, true).unwrap();
    assert_eq!(
        again.scan(&snap, &txns, ScanOptions::default()).unwrap(),
        live
    );
}

#[test]
fn an_unlogged_bulk_write_logs_nothing_and_a_dropped_writer_keeps_its_rows() {
    let db = db(64, Some(wal_config(true)));
    let heap = Heap::open(db.pool.clone(), db.wal.clone(), REL, false).unwrap();
    let txns = InMemoryTransactions::new();
    let x = txns.begin();
    let before = db.wal.as_ref().unwrap().insert_lsn();
    {
        let mut w = heap.bulk_writer(x, None);
        for n in 0..500u64 {
            w.insert(&row(n, 50)).unwrap();
        }
        // dropped without finish: the last page is finished all the same
    }
    txns.commit(x, Lsn::ZERO);
    assert_eq!(db.wal.as_ref().unwrap().insert_lsn(), before);
    let snap = txns.snapshot(0);
    assert_eq!(
        heap.scan(&snap, &txns, ScanOptions::default())
            .unwrap()
            .len(),
        500
    );
    // A row too large is an error naming the relation, and nothing changes.
    let mut w = heap.bulk_writer(x, None);
    let e = w.insert(&vec![0u8; 9000]).unwrap_err();
    assert!(e.to_string().contains("60"), "{e}");
}
