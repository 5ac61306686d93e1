//! An index on a 16-buffer pool (nearly every access evicts) filled in
//! ascending, descending and random order, with many duplicates of one key,
//! deletes followed by vacuum, mirrored against a `BTreeMap` model: after
//! every batch, `verify` (with the model as the heap) is clean and lookups
//! and range scans (forward, and backward with `read_range`) agree with
//! the model. Tuple keys (with NULLs and zero bytes) too.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Duration;

use btree::page::Layout;
use btree::{
    AssumeLive, ColumnKind, Direction, HeapRow, Index, Key, KeyBounds, KeyPart, KeyType, TupleType,
};
use common::{assert_clean, create_in, db, within};
use heap::tuple::Tid;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// (key, TID) -> live. Dead entries stay until vacuum, as in a heap.
type Model = BTreeMap<(Key, Tid), bool>;

fn heap_rows(model: &Model) -> Vec<HeapRow> {
    model
        .iter()
        .map(|((k, t), live)| HeapRow {
            key: Some(k.clone()),
            tid: *t,
            live: *live,
        })
        .collect()
}

fn check(index: &Index, model: &Model, rng: &mut SmallRng) {
    let rows = heap_rows(model);
    let f = || rows.clone();
    assert_clean(index.verify(Some(&f)).unwrap());
    // Full scan equals the model (dead entries included: not yet vacuumed).
    let all: Vec<(Key, Tid)> = index
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let want: Vec<(Key, Tid)> = model.keys().cloned().collect();
    assert_eq!(all.len(), want.len());
    assert!(all == want, "full scan differs from the model");
    // So does a backward read, in batches resuming at the last entry.
    let mut back: Vec<(Vec<u8>, Tid)> = Vec::new();
    loop {
        let after = back.last().cloned();
        let more = index
            .read_range(
                KeyBounds {
                    lower: Bound::Unbounded,
                    upper: Bound::Unbounded,
                },
                Direction::Backward,
                after.as_ref().map(|(k, t)| (k.as_slice(), *t)),
                rng.random_range(1..300),
                |k, t| back.push((k.to_vec(), t)),
            )
            .unwrap();
        if !more {
            break;
        }
    }
    back.reverse();
    let want_bytes: Vec<(Vec<u8>, Tid)> = want.iter().map(|(k, t)| (k.encode(), *t)).collect();
    assert!(back == want_bytes, "backward read differs from the model");
    // A few lookups and ranges.
    let keys: Vec<&Key> = model.keys().map(|(k, _)| k).collect();
    for _ in 0..10 {
        if keys.is_empty() {
            break;
        }
        let k = keys[rng.random_range(0..keys.len())];
        let want: Vec<Tid> = model
            .range((k.clone(), Tid::new(0, 0))..)
            .take_while(|((kk, _), _)| kk == k)
            .map(|((_, t), _)| *t)
            .collect();
        assert_eq!(index.lookup(k).unwrap(), want, "lookup of {k}");
        let k2 = keys[rng.random_range(0..keys.len())];
        let (lo, hi) = if k <= k2 { (k, k2) } else { (k2, k) };
        let got: Vec<(Key, Tid)> = index
            .scan(Bound::Excluded(lo), Bound::Included(hi))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let want: Vec<(Key, Tid)> = model
            .keys()
            .filter(|(kk, _)| kk > lo && kk <= hi)
            .cloned()
            .collect();
        assert!(got == want, "range ({lo}, {hi}] differs");
    }
}

#[derive(Copy, Clone, Debug)]
enum Order {
    Ascending,
    Descending,
    Random,
}

fn run(key_type: KeyType, order: Order, seed: u64) {
    run_in(key_type, order, seed, Layout::Compact);
}

fn run_in(key_type: KeyType, order: Order, seed: u64, layout: Layout) {
    let db = db(16, true);
    let index = create_in(&db, key_type, false, layout);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut n: u32 = 0;
    // Enough entries for a tree of three levels (i64: ~300 entries a leaf).
    let total: i64 = match key_type {
        KeyType::I64 => 30_000,
        KeyType::Bytes => 4_000,
        KeyType::Tuple(_) => 12_000,
    };
    let make_key = |i: i64, rng: &mut SmallRng| match key_type {
        KeyType::I64 => Key::I64(i),
        KeyType::Bytes => {
            let len = rng.random_range(0..600);
            let mut b = format!("{i:08}").into_bytes();
            b.resize(8 + len, b'x');
            Key::Bytes(b)
        }
        // (i mod 50 or NULL, bytes with zero bytes, i)
        KeyType::Tuple(_) => {
            let first = if i % 13 == 0 {
                KeyPart::Null
            } else {
                KeyPart::I64(i.rem_euclid(50) - 25)
            };
            let mut b = vec![0u8; rng.random_range(0..4)];
            b.extend_from_slice(format!("{}", i % 97).as_bytes());
            b.resize(b.len() + rng.random_range(0..40), 0);
            Key::Tuple(vec![first, KeyPart::Bytes(b), KeyPart::I64(i)])
        }
    };
    for batch in 0..6 {
        for j in 0..total / 6 {
            let i = batch * (total / 6) + j;
            let v = match order {
                Order::Ascending => i,
                Order::Descending => total - i,
                Order::Random => rng.random_range(-1_000_000..1_000_000),
            };
            // Every seventh entry is a duplicate of one hot key.
            let key = if i % 7 == 0 {
                make_key(42, &mut rng)
            } else {
                make_key(v, &mut rng)
            };
            n += 1;
            let tid = Tid::new(n / 50 + 1, (n % 50 + 1) as u16);
            index.insert(&key, tid, &AssumeLive).unwrap();
            model.insert((key, tid), true);
        }
        check(&index, &model, &mut rng);
        // Delete about a third, then vacuum every other batch.
        for live in model.values_mut() {
            if rng.random_range(0..3) == 0 {
                *live = false;
            }
        }
        if batch % 2 == 1 {
            let dead: std::collections::HashSet<Tid> = model
                .iter()
                .filter(|(_, l)| !**l)
                .map(|((_, t), _)| *t)
                .collect();
            let stats = index.vacuum(|t| dead.contains(&t)).unwrap();
            assert_eq!(stats.removed as usize, dead.len());
            model.retain(|_, live| *live);
            assert_eq!(stats.remaining as usize, model.len());
        }
        check(&index, &model, &mut rng);
    }
    assert_eq!(db.pool.pinned_buffers(), 0, "a pin leaked");
    let blocks = db.pool.nblocks(bufmgr::RelFork::main(common::REL)).unwrap();
    assert!(
        blocks > 16,
        "only {blocks} blocks: the tree never outgrew the pool"
    );
    let r = index.residency().unwrap();
    eprintln!("{order:?} {key_type:?}: {blocks} blocks, resident {r:?}");
}

#[test]
fn ascending_i64_keys() {
    within(Duration::from_secs(60), || {
        run(KeyType::I64, Order::Ascending, 1)
    });
}

#[test]
fn descending_i64_keys() {
    within(Duration::from_secs(60), || {
        run(KeyType::I64, Order::Descending, 2)
    });
}

#[test]
fn random_i64_keys() {
    within(Duration::from_secs(60), || {
        run(KeyType::I64, Order::Random, 3)
    });
}

#[test]
fn random_i64_keys_in_the_headed_layout_of_older_indexes() {
    within(Duration::from_secs(60), || {
        run_in(KeyType::I64, Order::Random, 6, Layout::Headed)
    });
}

#[test]
fn random_byte_string_keys_in_the_headed_layout_of_older_indexes() {
    within(Duration::from_secs(60), || {
        run_in(KeyType::Bytes, Order::Random, 7, Layout::Headed)
    });
}

#[test]
fn random_byte_string_keys() {
    within(Duration::from_secs(60), || {
        run(KeyType::Bytes, Order::Random, 4)
    });
}

#[test]
fn random_tuple_keys() {
    within(Duration::from_secs(60), || {
        let t = TupleType::new(&[ColumnKind::I64, ColumnKind::Bytes, ColumnKind::I64]).unwrap();
        run(KeyType::Tuple(t), Order::Random, 5)
    });
}
