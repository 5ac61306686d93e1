//! A heap on a 12-buffer pool (nearly every access evicts) run through
//! seeded random transactions of inserts, updates and deletes, committed or
//! aborted, with vacuums in between, mirrored against a `BTreeMap` model:
//! every scan and fetch must agree with the model, both inside a
//! transaction (its own changes) and after it.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use bufmgr::RelId;
use common::{db, row, within};
use heap::{Heap, InMemoryTransactions, ScanOptions, Tid};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use wal::Lsn;

const REL: RelId = RelId(30);

type Model = BTreeMap<Tid, Vec<u8>>;

fn check(heap: &Heap, txns: &InMemoryTransactions, snap: &heap::Snapshot, model: &Model) {
    let rows: Model = heap
        .scan(snap, txns, ScanOptions::default())
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(rows.len(), model.len());
    assert!(rows == *model, "scan differs from the model");
    for (tid, data) in model {
        assert_eq!(heap.fetch(*tid, snap, txns).unwrap().as_ref(), Some(data));
    }
}

fn run(seed: u64) {
    let db = db(12, None);
    let heap = Heap::open(db.pool.clone(), None, REL, true).unwrap();
    let txns = InMemoryTransactions::new();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut committed = Model::new();
    let mut n = 0u64;
    for round in 0..120 {
        let xid = txns.begin();
        let snap = txns.snapshot(xid);
        let mut mine = committed.clone();
        for _ in 0..rng.random_range(1..8) {
            n += 1;
            let len = rng.random_range(8..900);
            let pick =
                |rng: &mut SmallRng, m: &Model| m.keys().nth(rng.random_range(0..m.len())).copied();
            match rng.random_range(0..10) {
                0..5 => {
                    let data = row(n, len);
                    let tid = heap.insert(xid, &data).unwrap();
                    assert!(
                        mine.insert(tid, data).is_none(),
                        "TID {tid} handed out twice"
                    );
                }
                5..8 if !mine.is_empty() => {
                    let old = pick(&mut rng, &mine).unwrap();
                    let data = row(n, len);
                    let tid = heap.update(xid, &snap, &txns, old, &data).unwrap();
                    mine.remove(&old);
                    mine.insert(tid, data);
                }
                8..10 if !mine.is_empty() => {
                    let old = pick(&mut rng, &mine).unwrap();
                    heap.delete(xid, &snap, &txns, old).unwrap();
                    mine.remove(&old);
                }
                _ => {}
            }
        }
        check(&heap, &txns, &snap, &mine);
        if rng.random_range(0..10) < 7 {
            txns.commit(xid, Lsn::ZERO);
            committed = mine;
        } else {
            txns.abort(xid);
        }
        let reader = txns.snapshot(0);
        check(&heap, &txns, &reader, &committed);
        if round % 25 == 24 {
            let horizon = reader.xmax; // nothing is running
            heap.vacuum(horizon, &txns).unwrap();
            check(&heap, &txns, &txns.snapshot(0), &committed);
        }
    }
    assert_eq!(db.pool.pinned_buffers(), 0, "every pin released");
}

#[test]
fn random_transactions_match_the_model() {
    within(Duration::from_secs(120), || {
        for seed in 0..3 {
            run(seed);
        }
    });
}
