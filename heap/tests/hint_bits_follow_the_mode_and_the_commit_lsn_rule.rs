//! Hints: after a `per-page` scan every visible tuple carries XMIN_COMMITTED,
//! after a `never` scan none does, a commit hint waits for the commit record
//! to be flushed (or covered by the page LSN), and the three modes agree.

mod common;

use std::sync::Arc;

use bufmgr::RelId;
use common::{db, headers, row};
use heap::tuple::{HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID};
use heap::{Heap, HintMode, InMemoryTransactions, RingChoice, ScanOptions, Snapshot};
use wal::Lsn;

const REL: RelId = RelId(10);
const ROWS: u64 = 1500;

/// A heap with `ROWS` committed rows and every 10th row from an aborted
/// transaction; the commit record "ends" at `commit_lsn`.
fn loaded(commit_lsn: Lsn) -> (common::Db, Heap, Arc<InMemoryTransactions>, u64) {
    let db = db(64, None);
    let heap = Heap::open(db.pool.clone(), None, REL, true).unwrap();
    let txns = Arc::new(InMemoryTransactions::new());
    let good = txns.begin();
    let bad = txns.begin();
    for n in 0..ROWS {
        let xid = if n % 10 == 0 { bad } else { good };
        heap.insert(xid, &row(n, 24)).unwrap();
    }
    txns.commit(good, commit_lsn);
    txns.abort(bad);
    (db, heap, txns, good)
}

fn scan(
    heap: &Heap,
    txns: &InMemoryTransactions,
    mode: HintMode,
) -> (Vec<(heap::Tid, Vec<u8>)>, heap::ScanStats) {
    let snap: Snapshot = txns.snapshot(0);
    let mut rows = Vec::new();
    let stats = heap
        .scan_with(
            &snap,
            txns,
            ScanOptions {
                ring: RingChoice::Auto,
                hint_mode: mode,
            },
            |t, r| rows.push((t, r.to_vec())),
        )
        .unwrap();
    (rows, stats)
}

#[test]
fn per_page_scan_hints_every_visible_tuple_and_never_hints_none() {
    let (db, heap, txns, good) = loaded(Lsn::ZERO);
    let (rows_never, stats) = scan(&heap, &txns, HintMode::Never);
    assert_eq!(stats.visibility.hint_calls, 0);
    assert!(
        headers(&db.pool, REL)
            .iter()
            .all(|h| h.infomask & (HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID) == 0)
    );

    let (rows_page, stats) = scan(&heap, &txns, HintMode::PerPage);
    assert_eq!(rows_page, rows_never);
    assert_eq!(rows_page.len() as u64, ROWS - ROWS / 10);
    assert_eq!(
        stats.visibility.hint_calls, stats.pages,
        "one batched call per page"
    );
    for h in headers(&db.pool, REL) {
        if h.xmin == good {
            assert!(h.has(HEAP_XMIN_COMMITTED), "{h:?}");
        } else {
            assert!(h.has(HEAP_XMIN_INVALID), "{h:?}");
        }
    }
    // Once hinted, nothing is left to set.
    let (rows_again, stats) = scan(&heap, &txns, HintMode::PerPage);
    assert_eq!(rows_again, rows_never);
    assert_eq!(
        (stats.visibility.hints_wanted, stats.visibility.hint_calls),
        (0, 0)
    );
}

#[test]
fn per_tuple_and_per_page_give_identical_results() {
    let (_db1, per_tuple, txns1, _) = loaded(Lsn::ZERO);
    let (_db2, per_page, txns2, _) = loaded(Lsn::ZERO);
    let (a, sa) = scan(&per_tuple, &txns1, HintMode::PerTuple);
    let (b, sb) = scan(&per_page, &txns2, HintMode::PerPage);
    assert_eq!(a, b);
    assert_eq!(sa.visibility.hint_calls, ROWS, "one call per tuple");
    assert_eq!(sb.visibility.hint_calls, sb.pages, "one call per page");
    assert_eq!(sa.visibility.tuples_visible, sb.visibility.tuples_visible);
}

#[test]
fn commit_hint_waits_until_the_commit_record_is_flushed() {
    let (db, heap, txns, good) = loaded(Lsn(1000));
    txns.set_flushed(Lsn(10));
    let (rows, _) = scan(&heap, &txns, HintMode::PerPage);
    assert_eq!(
        rows.len() as u64,
        ROWS - ROWS / 10,
        "visibility does not depend on the hint"
    );
    for h in headers(&db.pool, REL) {
        if h.xmin == good {
            assert!(
                !h.has(HEAP_XMIN_COMMITTED),
                "page LSN 0 < commit LSN 1000, not flushed"
            );
        } else {
            assert!(h.has(HEAP_XMIN_INVALID), "abort hints need no flush");
        }
    }
    txns.set_flushed(Lsn(1000));
    scan(&heap, &txns, HintMode::PerTuple);
    assert!(
        headers(&db.pool, REL)
            .iter()
            .filter(|h| h.xmin == good)
            .all(|h| h.has(HEAP_XMIN_COMMITTED))
    );
}

#[test]
fn unlogged_relations_take_commit_hints_at_once() {
    let db = db(64, None);
    let heap = Heap::open(db.pool.clone(), None, REL, false).unwrap();
    let txns = InMemoryTransactions::new();
    let x = txns.begin();
    for n in 0..100 {
        heap.insert(x, &row(n, 16)).unwrap();
    }
    txns.commit(x, Lsn(5000));
    txns.set_flushed(Lsn(0));
    scan(&heap, &txns, HintMode::PerPage);
    assert!(
        headers(&db.pool, REL)
            .iter()
            .all(|h| h.has(HEAP_XMIN_COMMITTED))
    );
}

#[test]
fn fetch_sets_the_hint_of_its_tuple() {
    let (db, heap, txns, _) = loaded(Lsn::ZERO);
    let snap = txns.snapshot(0);
    let (tid, _) = heap
        .scan(
            &snap,
            &*txns,
            ScanOptions {
                hint_mode: HintMode::Never,
                ..Default::default()
            },
        )
        .unwrap()[0]
        .clone();
    assert!(heap.fetch(tid, &snap, &*txns).unwrap().is_some());
    let hinted = headers(&db.pool, REL)
        .iter()
        .filter(|h| h.has(HEAP_XMIN_COMMITTED))
        .count();
    assert_eq!(hinted, 1);
}

#[test]
fn large_scans_use_the_bulk_read_ring_unless_told_not_to() {
    let (_db, heap, txns, _) = loaded(Lsn::ZERO);
    let x = txns.begin();
    while heap.nblocks().unwrap() as usize <= 64 / 4 {
        heap.insert(x, &row(1, 200)).unwrap();
    }
    txns.commit(x, Lsn::ZERO);
    let snap = txns.snapshot(0);
    let run = |ring| {
        heap.scan_with(
            &snap,
            &*txns,
            ScanOptions {
                ring,
                hint_mode: HintMode::Never,
            },
            |_, _| {},
        )
        .unwrap()
    };
    assert!(run(RingChoice::Auto).used_ring);
    assert!(!run(RingChoice::Never).used_ring);
    assert!(run(RingChoice::Always).used_ring);
}
