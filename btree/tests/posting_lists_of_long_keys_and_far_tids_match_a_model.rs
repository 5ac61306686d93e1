//! Posting lists at their edges, against a model
//! (`BTreeMap<key bytes, BTreeSet<TID>>`) on a 16-buffer pool with a WAL:
//! byte keys whose lengths sit around the largest posting list (a sixth of a
//! page) and at the key size limit, thousands of duplicates of one key, TIDs
//! whose blocks and offsets take the longest varints, inserts in random
//! order, vacuums, and the vacuumed TIDs inserted again (a heap reuses a
//! TID after vacuum). After every round lookups, scans and batched range
//! reads in both directions return every entry once, in key then TID order,
//! `verify` is clean, and a WAL replay gives the same.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use btree::{AssumeLive, Direction, HeapRow, Index, Key, KeyType};
use common::{REL, assert_clean, create, db, pool_over, read_all, replay};
use heap::tuple::Tid;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

type Model = BTreeMap<Vec<u8>, BTreeSet<Tid>>;

fn check(index: &Index, model: &Model, keys: &[Vec<u8>]) {
    let rows: Vec<HeapRow> = model
        .iter()
        .flat_map(|(k, tids)| {
            tids.iter().map(|t| HeapRow {
                key: Some(Key::Bytes(k.clone())),
                tid: *t,
                live: true,
            })
        })
        .collect();
    let f = || rows.clone();
    assert_clean(index.verify(Some(&f)).unwrap());
    for k in keys {
        let want: Vec<Tid> = model
            .get(k)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        assert_eq!(
            index.lookup(&Key::Bytes(k.clone())).unwrap(),
            want,
            "lookup of a {}-byte key",
            k.len()
        );
    }
    let want: Vec<(Vec<u8>, Tid)> = model
        .iter()
        .flat_map(|(k, tids)| tids.iter().map(|t| (Key::Bytes(k.clone()).encode(), *t)))
        .collect();
    let scanned: Vec<(Vec<u8>, Tid)> = index
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.map(|(k, t)| (k.encode(), t)).unwrap())
        .collect();
    assert_eq!(scanned.len(), want.len(), "forward scan length");
    assert!(scanned == want, "forward scan differs from the model");
    for batch in [7, 500] {
        assert!(
            read_all(index, Direction::Forward, batch) == want,
            "forward read in batches of {batch}"
        );
        let mut back = read_all(index, Direction::Backward, batch);
        back.reverse();
        assert!(back == want, "backward read in batches of {batch}");
    }
}

fn far_tid(rng: &mut SmallRng) -> Tid {
    match rng.random_range(0..4) {
        0 => Tid::new(rng.random_range(0..50), rng.random_range(1..40)),
        1 => Tid::new(
            rng.random_range(u32::MAX - 50..=u32::MAX),
            rng.random_range(1..40),
        ),
        2 => Tid::new(rng.random_range(0..u32::MAX), rng.random_range(1..u16::MAX)),
        _ => Tid::new(
            rng.random_range(1000..1200),
            rng.random_range(60_000..u16::MAX),
        ),
    }
}

fn run(seed: u64, key_lens: &[usize], rounds: usize, per_round: usize) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let db = db(16, true);
    let index = create(&db, KeyType::Bytes, false);
    assert!(index.deduplicates());
    let keys: Vec<Vec<u8>> = key_lens
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let mut k = vec![b'a' + i as u8; n];
            k[0] = b'a' + (i as u8 % 3);
            k
        })
        .collect();
    let mut model = Model::new();
    let mut used: BTreeMap<Tid, Vec<u8>> = BTreeMap::new();
    let mut vacuumed: Vec<(Vec<u8>, Tid)> = Vec::new();
    for round in 0..rounds {
        // The TIDs vacuum removed come back, under the same key or another.
        for (k, t) in std::mem::take(&mut vacuumed) {
            let k = if rng.random_bool(0.5) {
                k
            } else {
                keys[rng.random_range(0..keys.len())].clone()
            };
            index
                .insert(&Key::Bytes(k.clone()), t, &AssumeLive)
                .unwrap();
            used.insert(t, k.clone());
            model.entry(k).or_default().insert(t);
        }
        for _ in 0..per_round {
            // One key takes most entries: thousands of duplicates.
            let k = if rng.random_bool(0.7) {
                keys[0].clone()
            } else {
                keys[rng.random_range(0..keys.len())].clone()
            };
            let t = far_tid(&mut rng);
            if used.contains_key(&t) {
                continue;
            }
            index
                .insert(&Key::Bytes(k.clone()), t, &AssumeLive)
                .unwrap();
            used.insert(t, k.clone());
            model.entry(k).or_default().insert(t);
        }
        check(&index, &model, &keys);
        let m = 2 + round as u32 % 3;
        let dead = |t: Tid| (t.block ^ u32::from(t.offset)).is_multiple_of(m);
        let stats = index.vacuum(dead).unwrap();
        let before: usize = model.values().map(BTreeSet::len).sum();
        for (k, tids) in model.iter_mut() {
            for t in tids.iter().filter(|t| dead(**t)) {
                vacuumed.push((k.clone(), *t));
                used.remove(t);
            }
            tids.retain(|t| !dead(*t));
        }
        model.retain(|_, s| !s.is_empty());
        let after: usize = model.values().map(BTreeSet::len).sum();
        assert_eq!(stats.removed as usize, before - after, "round {round}");
        check(&index, &model, &keys);
    }
    let wal = db.wal.as_ref().unwrap();
    wal.flush(wal.insert_lsn()).unwrap();
    let copy = tempfile::tempdir().unwrap();
    let pool = pool_over(copy.path(), 64, None);
    replay(db.dir.path(), &pool);
    let replayed = Index::open(pool, None, "test_idx", REL).unwrap();
    check(&replayed, &model, &keys);
}

#[test]
fn thousands_of_duplicates_with_far_tids_and_reused_tids_match_the_model() {
    run(1, &[8, 1, 30], 5, 3000);
}

#[test]
fn keys_around_the_largest_posting_list_match_the_model() {
    for seed in 0..3 {
        run(seed, &[1330, 1340, 1345, 1350, 1355, 1360], 4, 300);
    }
}

#[test]
fn keys_at_the_size_limit_with_duplicates_match_the_model() {
    run(
        7,
        &[
            btree::page::MAX_KEY_SIZE,
            btree::page::MAX_KEY_SIZE - 1,
            700,
        ],
        4,
        200,
    );
}
