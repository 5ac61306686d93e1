//! Write-write conflicts: the second updater of a tuple gets
//! `WriteConflict`; after the first aborts an update succeeds; threads
//! incrementing one counter and retrying on conflict end at exactly the
//! number of successful commits (no lost update), while readers always see
//! exactly one version of the counter.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use bufmgr::RelId;
use common::{db, within};
use heap::{ErrorKind, Heap, HeapError, InMemoryTransactions, ScanOptions, Tid};
use wal::Lsn;

const REL: RelId = RelId(20);

fn setup() -> (common::Db, Arc<Heap>, Arc<InMemoryTransactions>, Tid) {
    let db = db(32, None);
    let heap = Arc::new(Heap::open(db.pool.clone(), None, REL, true).unwrap());
    let txns = Arc::new(InMemoryTransactions::new());
    let x = txns.begin();
    let tid = heap.insert(x, &0u64.to_le_bytes()).unwrap();
    txns.commit(x, Lsn::ZERO);
    (db, heap, txns, tid)
}

#[test]
fn second_updater_conflicts_until_the_first_aborts() {
    let (_db, heap, txns, tid) = setup();
    let t1 = txns.begin();
    let t2 = txns.begin();
    let s1 = txns.snapshot(t1);
    let s2 = txns.snapshot(t2);
    let new1 = heap
        .update(t1, &s1, &*txns, tid, &1u64.to_le_bytes())
        .unwrap();
    let err = heap
        .update(t2, &s2, &*txns, tid, &2u64.to_le_bytes())
        .unwrap_err();
    assert!(matches!(err, HeapError::WriteConflict { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(heap.delete(t2, &s2, &*txns, tid).unwrap_err().is_conflict());
    // t1 sees its own new version, not the old one; t2 still sees the old.
    assert_eq!(
        heap.fetch(new1, &s1, &*txns).unwrap(),
        Some(1u64.to_le_bytes().to_vec())
    );
    assert_eq!(heap.fetch(tid, &s1, &*txns).unwrap(), None);
    assert_eq!(
        heap.fetch(tid, &s2, &*txns).unwrap(),
        Some(0u64.to_le_bytes().to_vec())
    );
    // Updating its own deleted version again is "not visible", not a conflict.
    assert!(matches!(
        heap.update(t1, &s1, &*txns, tid, b"x").unwrap_err(),
        HeapError::NotVisible { .. }
    ));

    txns.abort(t1);
    let new2 = heap
        .update(t2, &s2, &*txns, tid, &2u64.to_le_bytes())
        .unwrap();
    txns.commit(t2, Lsn::ZERO);
    let snap = txns.snapshot(0);
    let rows = heap.scan(&snap, &*txns, ScanOptions::default()).unwrap();
    assert_eq!(rows, vec![(new2, 2u64.to_le_bytes().to_vec())]);
}

#[test]
fn an_update_committed_after_the_snapshot_is_a_conflict() {
    let (_db, heap, txns, tid) = setup();
    let old = txns.begin();
    let old_snap = txns.snapshot(old);
    let t1 = txns.begin();
    heap.update(t1, &txns.snapshot(t1), &*txns, tid, b"new")
        .unwrap();
    txns.commit(t1, Lsn::ZERO);
    assert!(
        heap.delete(old, &old_snap, &*txns, tid)
            .unwrap_err()
            .is_conflict()
    );
    // A transaction that started after the commit no longer sees the old version.
    let late = txns.begin();
    let err = heap
        .delete(late, &txns.snapshot(late), &*txns, tid)
        .unwrap_err();
    assert!(matches!(err, HeapError::NotVisible { .. }), "{err}");
}

#[test]
fn bad_tids_are_bad_input() {
    let (_db, heap, txns, _) = setup();
    let snap = txns.snapshot(0);
    let e = heap.fetch(Tid::new(99, 1), &snap, &*txns).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadInput, "{e}");
    assert_eq!(
        heap.fetch(Tid::new(0, 0), &snap, &*txns)
            .unwrap_err()
            .kind(),
        ErrorKind::BadInput
    );
    assert_eq!(heap.fetch(Tid::new(0, 50), &snap, &*txns).unwrap(), None);
    let e = heap
        .insert(3, &vec![0; heap::page::MAX_ROW_LEN + 1])
        .unwrap_err();
    assert!(
        matches!(e, HeapError::RowTooLarge { .. }) && e.to_string().contains("too large"),
        "{e}"
    );
    heap.insert(3, &vec![0; heap::page::MAX_ROW_LEN]).unwrap();
}

/// The counter's current version under `snap`: exactly one must be visible.
fn current(heap: &Heap, txns: &InMemoryTransactions, snap: &heap::Snapshot) -> (Tid, u64) {
    let rows = heap.scan(snap, txns, ScanOptions::default()).unwrap();
    assert_eq!(
        rows.len(),
        1,
        "a snapshot sees exactly one version: {rows:?}"
    );
    (
        rows[0].0,
        u64::from_le_bytes(rows[0].1[..8].try_into().unwrap()),
    )
}

#[test]
fn concurrent_increments_lose_no_update() {
    within(Duration::from_secs(60), || {
        let (_db, heap, txns, _) = setup();
        const THREADS: u64 = 4;
        const EACH: u64 = 40;
        let commits = Arc::new(AtomicU64::new(0));
        let conflicts = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let reader = {
            let (heap, txns, done) = (heap.clone(), txns.clone(), done.clone());
            thread::spawn(move || {
                let mut last = 0;
                while !done.load(Ordering::Relaxed) {
                    let (_, v) = current(&heap, &txns, &txns.snapshot(0));
                    assert!(v >= last, "a later snapshot went backwards: {v} < {last}");
                    last = v;
                }
            })
        };
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let (heap, txns, commits, conflicts) = (
                    heap.clone(),
                    txns.clone(),
                    commits.clone(),
                    conflicts.clone(),
                );
                thread::spawn(move || {
                    let mut done = 0;
                    while done < EACH {
                        let xid = txns.begin();
                        let snap = txns.snapshot(xid);
                        let (tid, v) = current(&heap, &txns, &snap);
                        match heap.update(xid, &snap, &*txns, tid, &(v + 1).to_le_bytes()) {
                            Ok(_) => {
                                txns.commit(xid, Lsn::ZERO);
                                commits.fetch_add(1, Ordering::Relaxed);
                                done += 1;
                            }
                            Err(e) if e.is_conflict() => {
                                txns.abort(xid);
                                conflicts.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("unexpected error: {e}"),
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
        reader.join().unwrap();
        let (_, v) = current(&heap, &txns, &txns.snapshot(0));
        assert_eq!(v, commits.load(Ordering::Relaxed));
        assert_eq!(v, THREADS * EACH);
        eprintln!(
            "{} commits, {} conflicts",
            v,
            conflicts.load(Ordering::Relaxed)
        );
    });
}
