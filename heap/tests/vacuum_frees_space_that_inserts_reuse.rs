//! Pruning and vacuum remove versions dead to every snapshot, and the
//! free-space map sends later inserts into the space they freed instead of
//! extending the relation.

mod common;

use bufmgr::RelId;
use common::{db, row};
use heap::{Heap, InMemoryTransactions, ScanOptions};
use wal::Lsn;

const REL: RelId = RelId(40);

#[test]
fn vacuum_frees_space_that_inserts_reuse() {
    let db = db(64, None);
    let heap = Heap::open(db.pool.clone(), None, REL, true).unwrap();
    let txns = InMemoryTransactions::new();
    let load = txns.begin();
    let tids: Vec<_> = (0..2000)
        .map(|n| heap.insert(load, &row(n, 100)).unwrap())
        .collect();
    txns.commit(load, Lsn::ZERO);
    let pages = heap.nblocks().unwrap();

    let del = txns.begin();
    let snap = txns.snapshot(del);
    for tid in tids.iter().filter(|t| t.offset % 4 != 0) {
        heap.delete(del, &snap, &txns, *tid).unwrap();
    }
    txns.commit(del, Lsn::ZERO);
    let survivors = tids.iter().filter(|t| t.offset % 4 == 0).count();

    // A snapshot older than the delete holds the horizon back: nothing goes.
    let stats = heap.vacuum(del, &txns).unwrap();
    assert_eq!(stats.pruned.tuples_removed, 0);
    let horizon = txns.snapshot(0).xmax;
    let stats = heap.vacuum(horizon, &txns).unwrap();
    assert_eq!(stats.pruned.tuples_removed as usize, tids.len() - survivors);
    assert!(stats.used_ring);
    assert_eq!(
        heap.scan(&txns.snapshot(0), &txns, ScanOptions::default())
            .unwrap()
            .len(),
        survivors
    );

    let refill = txns.begin();
    for n in 0..(tids.len() - survivors) as u64 {
        heap.insert(refill, &row(10_000 + n, 100)).unwrap();
    }
    txns.commit(refill, Lsn::ZERO);
    assert_eq!(
        heap.nblocks().unwrap(),
        pages,
        "the freed space was reused, no extension"
    );
    assert_eq!(
        heap.scan(&txns.snapshot(0), &txns, ScanOptions::default())
            .unwrap()
            .len(),
        tids.len()
    );
}

#[test]
fn pruning_a_page_leaves_dead_pointers_and_frees_space() {
    let db = db(16, None);
    let heap = Heap::open(db.pool.clone(), None, REL, true).unwrap();
    let txns = InMemoryTransactions::new();
    let x = txns.begin();
    let tids: Vec<_> = (0..20)
        .map(|n| heap.insert(x, &row(n, 200)).unwrap())
        .collect();
    txns.commit(x, Lsn::ZERO);
    let u = txns.begin();
    let snap = txns.snapshot(u);
    for &t in &tids[..10] {
        heap.update(u, &snap, &txns, t, &row(99, 200)).unwrap();
    }
    txns.commit(u, Lsn::ZERO);
    let before = heap.fsm().get(0);
    let stats = heap.prune_page(0, txns.snapshot(0).xmax, &txns).unwrap();
    assert_eq!(stats.tuples_removed, 10);
    assert_eq!(
        stats.line_pointers_freed, 0,
        "pruning leaves dead pointers for vacuum"
    );
    assert!(heap.fsm().get(0) >= before + 10 * 200);
    let reader = txns.snapshot(0);
    assert_eq!(heap.fetch(tids[0], &reader, &txns).unwrap(), None);
    assert_eq!(
        heap.scan(&reader, &txns, ScanOptions::default())
            .unwrap()
            .len(),
        20
    );
}
