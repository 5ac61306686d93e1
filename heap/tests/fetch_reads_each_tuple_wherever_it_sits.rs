//! `fetch_with` pins the page asking for the header's and the line
//! pointer's cache lines, and for the tuple's second line once it knows
//! where the tuple is: hints that must never change what is read. Rows of
//! every length from the shortest (8 bytes) to 900 bytes, at every line
//! pointer of full pages and on a pool small enough that fetches miss, all
//! read back exactly; TIDs naming nothing (offset past the line pointers,
//! the largest offset, a block past the end, offset 0) are `None` or a
//! `BadTid` naming the relation, never a panic.

mod common;

use bufmgr::RelId;
use common::{db, row};
use heap::{Heap, HeapError, InMemoryTransactions, Tid};

const REL: RelId = RelId(41);

#[test]
fn every_tuple_reads_back_exactly_and_tids_naming_nothing_are_refused() {
    let db = db(4, None);
    let heap = Heap::open(db.pool.clone(), None, REL, true).unwrap();
    let txns = InMemoryTransactions::new();
    let xid = txns.begin();
    let mut rows = Vec::new();
    for n in 0..600u64 {
        let len = [8, 9, 40, 63, 64, 65, 130, 900][n as usize % 8];
        let data = row(n, len);
        rows.push((heap.insert(xid, &data).unwrap(), data));
    }
    txns.commit(xid, wal::Lsn::ZERO);
    let blocks = rows.iter().map(|(t, _)| t.block).max().unwrap() + 1;
    assert!(blocks > 4, "more pages than buffers: some fetches miss");
    let reader = txns.begin();
    let snap = txns.snapshot(reader);
    for (tid, data) in &rows {
        let got = heap.fetch_with(*tid, &snap, &txns, <[u8]>::to_vec).unwrap();
        assert_eq!(got.as_ref(), Some(data), "row at {tid}");
    }
    let last = rows.iter().map(|(t, _)| t.offset).max().unwrap();
    for off in [last + 1, u16::MAX] {
        assert_eq!(heap.fetch(Tid::new(0, off), &snap, &txns).unwrap(), None);
    }
    for bad in [Tid::new(blocks, 1), Tid::new(0, 0)] {
        match heap.fetch(bad, &snap, &txns) {
            Err(HeapError::BadTid { rel, tid, .. }) => assert_eq!((rel, tid), (REL, bad)),
            other => panic!("fetch of {bad}: {other:?}"),
        }
    }
}
