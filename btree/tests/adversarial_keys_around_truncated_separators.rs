//! Adversarial keys around truncated separators: byte keys that are
//! prefixes of one another, keys made of 0x00 and 0xFF bytes, the empty
//! key, keys at `MAX_KEY_SIZE`, long runs of duplicates straddling splits,
//! tuple keys with NULL parts and equal leading parts, and `i64::MIN` /
//! `MAX`. On a 16-buffer pool, with and without posting lists and in both
//! item layouts: after inserts, a vacuum of half the entries and
//! reinserts, every lookup and every range read (forward and backward,
//! every bound kind) at each leaf's high key, just below it and just above
//! it equals a model, and `verify` is clean. A unique index finds the live
//! duplicate of a key whose entries straddle a truncated high key.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::time::Duration;

use btree::page::{Layout, PageId, TreePage};
use btree::{
    AssumeLive, BtreeError, ColumnKind, Direction, Index, IndexOptions, Key, KeyPart, KeyType,
    Liveness, MAX_KEY_SIZE, TupleType,
};
use bufmgr::RelFork;
use common::{Db, Model, REL, assert_clean, db, entries, read_all, read_bounds, rows, within};
use heap::tuple::Tid;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

#[derive(Copy, Clone, Debug)]
enum Gen {
    /// Bytes of 0 to 6 from {0x00, 0x01, 0xFF}, a few at `MAX_KEY_SIZE`.
    Bytes,
    /// (text with NULLs, i64 with NULLs): equal leading parts.
    TupleNulls,
    /// `i64` near MIN, MAX and 0.
    I64Edges,
}

impl Gen {
    fn key_type(self) -> KeyType {
        match self {
            Gen::Bytes => KeyType::Bytes,
            Gen::TupleNulls => {
                KeyType::Tuple(TupleType::new(&[ColumnKind::Text, ColumnKind::I64]).unwrap())
            }
            Gen::I64Edges => KeyType::I64,
        }
    }

    fn key(self, rng: &mut SmallRng) -> Key {
        const B: [u8; 3] = [0x00, 0x01, 0xFF];
        match self {
            Gen::Bytes => {
                if rng.random_bool(0.002) {
                    let mut k = vec![B[rng.random_range(0..3)]; MAX_KEY_SIZE];
                    let at = rng.random_range(0..MAX_KEY_SIZE);
                    k[at] = B[rng.random_range(0..3)];
                    Key::Bytes(k)
                } else {
                    let n = rng.random_range(0..=6);
                    Key::Bytes((0..n).map(|_| B[rng.random_range(0..3)]).collect())
                }
            }
            Gen::TupleNulls => {
                let t = if rng.random_bool(0.2) {
                    KeyPart::Null
                } else {
                    let n = rng.random_range(0..=3);
                    KeyPart::Text(
                        (0..n)
                            .map(|_| ['\0', 'a', 'ÿ'][rng.random_range(0..3)])
                            .collect(),
                    )
                };
                let i = if rng.random_bool(0.2) {
                    KeyPart::Null
                } else {
                    KeyPart::I64([i64::MIN, -1, 0, 1, i64::MAX][rng.random_range(0..5)])
                };
                Key::Tuple(vec![t, i])
            }
            Gen::I64Edges => {
                let base = [i64::MIN, -1, 0, i64::MAX - 200][rng.random_range(0..4)];
                Key::I64(base.saturating_add(rng.random_range(0..200)))
            }
        }
    }
}

/// Every leaf high key's bytes.
fn high_keys(db: &Db) -> Vec<Vec<u8>> {
    let rf = RelFork::main(REL);
    let mut out = Vec::new();
    for block in 1..db.pool.nblocks(rf).unwrap() {
        let bytes = db
            .pool
            .read_buffer(rf, block, None)
            .unwrap()
            .lock_shared()
            .to_vec();
        let tp = TreePage::parse(&bytes, PageId { rel: REL, block }).unwrap();
        if let Some(hk) = tp.high_key().unwrap() {
            out.push(hk.key.to_vec());
        }
    }
    out
}

/// Positions at, just below and just above `hk`.
fn around(hk: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![hk.to_vec()];
    if let Some((&last, head)) = hk.split_last() {
        out.push(head.to_vec());
        if last > 0 {
            let mut k = hk.to_vec();
            *k.last_mut().unwrap() = last - 1;
            out.push(k.clone());
            k.push(0xFF);
            out.push(k);
        }
        if last < 0xFF {
            let mut k = hk.to_vec();
            *k.last_mut().unwrap() = last + 1;
            out.push(k);
        }
    }
    let mut k = hk.to_vec();
    k.push(0);
    out.push(k);
    out
}

fn in_bounds(k: &[u8], lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
    (match lower {
        Bound::Included(l) => k >= l,
        Bound::Excluded(l) => k > l,
        Bound::Unbounded => true,
    }) && (match upper {
        Bound::Included(u) => k <= u,
        Bound::Excluded(u) => k < u,
        Bound::Unbounded => true,
    })
}

fn check(db: &Db, index: &Index, model: &Model, key_type: &KeyType) {
    let want = entries(model);
    assert!(read_all(index, Direction::Forward, 7) == want, "forward");
    let mut back = read_all(index, Direction::Backward, 5);
    back.reverse();
    assert!(back == want, "backward");
    let hks = high_keys(db);
    assert!(hks.len() >= 2, "too few splits: {}", hks.len());
    // At most about 12 of them, spread over the index.
    for hk in hks.iter().step_by(hks.len().div_ceil(12)) {
        for p in around(hk) {
            if (*key_type == KeyType::I64 && p.len() != 8) || p.len() > MAX_KEY_SIZE {
                continue;
            }
            let mut got = Vec::new();
            index
                .lookup_encoded_each(&p, |t| {
                    got.push(t);
                    true
                })
                .unwrap();
            let exp: Vec<Tid> = model
                .get(&p)
                .map_or(Vec::new(), |(_, s)| s.iter().copied().collect());
            assert_eq!(got, exp, "lookup {p:?} (high key {hk:?})");
            let bounds = [
                Bound::Included(p.as_slice()),
                Bound::Excluded(p.as_slice()),
                Bound::Unbounded,
            ];
            for lower in bounds {
                for upper in [Bound::Included(p.as_slice()), Bound::Excluded(p.as_slice())] {
                    for (lo, up) in [(lower, upper), (upper, lower)] {
                        let exp: Vec<(Vec<u8>, Tid)> = want
                            .iter()
                            .filter(|(k, _)| in_bounds(k, lo, up))
                            .cloned()
                            .collect();
                        for dir in [Direction::Forward, Direction::Backward] {
                            let got = read_bounds(index, lo, up, dir);
                            assert!(got == exp, "range {lo:?}..{up:?} {dir:?} (high key {hk:?})");
                        }
                    }
                }
            }
        }
    }
    assert_clean(index.verify(Some(&|| rows(model))).unwrap());
}

/// `build`: the first entries come from a sorted build, not inserts.
fn run(keys: Gen, layout: Layout, dedup: bool, build: bool, seed: u64) {
    within(Duration::from_secs(120), move || {
        let mut rng = SmallRng::seed_from_u64(seed);
        let db = db(16, false);
        let key_type = keys.key_type();
        let index = Index::create_in_format(
            db.pool.clone(),
            None,
            IndexOptions {
                name: "adv_idx".into(),
                rel: REL,
                key_type,
                unique: false,
            },
            layout,
            dedup,
        )
        .unwrap();
        let mut model = Model::new();
        let mut next = 0u32;
        let mut insert = |model: &mut Model, rng: &mut SmallRng| {
            let k = keys.key(rng);
            let n = next * 7919 % 1_000_003;
            next += 1;
            let tid = Tid::new(n / 200 + 1, (n % 200) as u16 + 1);
            index.insert(&k, tid, &AssumeLive).unwrap();
            model
                .entry(k.encode())
                .or_insert_with(|| (k.clone(), BTreeSet::new()))
                .1
                .insert(tid);
        };
        if build {
            let mut first = Model::new();
            for i in 0..5000u32 {
                let k = keys.key(&mut rng);
                let n = ((500_000 + u64::from(i)) * 7919 % 1_000_003) as u32;
                first
                    .entry(k.encode())
                    .or_insert_with(|| (k.clone(), BTreeSet::new()))
                    .1
                    .insert(Tid::new(n / 200 + 1, (n % 200) as u16 + 1));
            }
            let sorted: Vec<(Key, Tid)> = first
                .values()
                .flat_map(|(k, ts)| ts.iter().map(move |t| (k.clone(), *t)))
                .collect();
            index.build_sorted(sorted).unwrap();
            model = first;
        } else {
            for _ in 0..5000 {
                insert(&mut model, &mut rng);
            }
        }
        check(&db, &index, &model, &key_type);
        // Vacuum about half the entries, then insert again.
        let dead: BTreeSet<Tid> = entries(&model)
            .into_iter()
            .filter(|(_, t)| (t.block + u32::from(t.offset)) % 2 == 0)
            .map(|(_, t)| t)
            .collect();
        index.vacuum(|t| dead.contains(&t)).unwrap();
        for (_, ts) in model.values_mut() {
            ts.retain(|t| !dead.contains(t));
        }
        model.retain(|_, (_, ts)| !ts.is_empty());
        for _ in 0..2500 {
            insert(&mut model, &mut rng);
        }
        check(&db, &index, &model, &key_type);
    });
}

#[test]
fn prefix_bytes_with_zero_and_ff() {
    for (layout, dedup) in [
        (Layout::Compact, false),
        (Layout::Compact, true),
        (Layout::Headed, false),
    ] {
        for build in [false, true] {
            run(Gen::Bytes, layout, dedup, build, 11);
        }
    }
}

#[test]
fn tuple_keys_with_nulls_and_equal_leading_parts() {
    for dedup in [false, true] {
        for build in [false, true] {
            run(Gen::TupleNulls, Layout::Compact, dedup, build, 12);
        }
    }
}

#[test]
fn i64_keys_at_their_limits() {
    for dedup in [false, true] {
        for build in [false, true] {
            run(Gen::I64Edges, Layout::Compact, dedup, build, 13);
        }
    }
}

/// A unique index: many dead entries of one key straddle leaves whose high
/// keys are truncated separators of their neighbours; a live one at the far
/// end is still found by the duplicate check, and a dead one is not a
/// conflict.
#[test]
fn unique_check_across_truncated_high_keys() {
    within(Duration::from_secs(60), || {
        let db = db(16, false);
        let index = common::create(&db, KeyType::Bytes, true);
        let mut heap: HashMap<Tid, Liveness> = HashMap::new();
        let key = |i: u32| {
            Key::Bytes(format!("k{:05}{}", i * 3, "\u{0}".repeat((i % 5) as usize)).into_bytes())
        };
        let mut n = 0u32;
        let mut tid = || {
            n += 1;
            Tid::new(n, 1)
        };
        for i in 0..3000 {
            let t = tid();
            index.insert(&key(i), t, &AssumeLive).unwrap();
            heap.insert(t, Liveness::Live);
        }
        // 600 dead versions of one key then a live one, in TID order.
        let hot = key(1500);
        for (t, l) in heap.iter_mut() {
            if index.lookup(&hot).unwrap().contains(t) {
                *l = Liveness::Dead;
            }
        }
        for _ in 0..600 {
            let t = tid();
            let h = heap.clone();
            index
                .insert(&hot, t, &move |x: Tid| {
                    h.get(&x).copied().unwrap_or(Liveness::Dead)
                })
                .unwrap();
            heap.insert(t, Liveness::Dead);
        }
        let t = tid();
        let h = heap.clone();
        index
            .insert(&hot, t, &move |x: Tid| {
                h.get(&x).copied().unwrap_or(Liveness::Dead)
            })
            .unwrap();
        heap.insert(t, Liveness::Live);
        let h = heap.clone();
        let err = index
            .insert(&hot, tid(), &move |x: Tid| {
                h.get(&x).copied().unwrap_or(Liveness::Dead)
            })
            .unwrap_err();
        assert!(matches!(err, BtreeError::UniqueViolation { .. }), "{err}");
        // Every neighbour of a high key: a live duplicate conflicts.
        for hk in high_keys(&db) {
            for p in around(&hk) {
                let live = index.lookup(&Key::Bytes(p.clone())).unwrap();
                let h = heap.clone();
                let r = index.insert(&Key::Bytes(p.clone()), tid(), &move |x: Tid| {
                    h.get(&x).copied().unwrap_or(Liveness::Dead)
                });
                let conflict = live.iter().any(|t| heap.get(t) == Some(&Liveness::Live));
                assert_eq!(r.is_err(), conflict, "{p:?} next to high key {hk:?}: {r:?}");
            }
        }
    });
}

/// Four threads insert the same keys (each key's heap row live before its
/// insert, as the engine does) into a unique index on a 24-buffer pool,
/// in different orders, splitting leaves as they go: keys that are
/// prefixes of their neighbours (`k00001` and `k00001\0`), so high keys
/// and pivots are truncated separators equal to the keys inserted. Every
/// key is inserted exactly once; every other attempt is a violation.
#[test]
fn concurrent_unique_inserts_of_prefix_keys() {
    use std::sync::{Arc, Mutex};
    within(Duration::from_secs(60), || {
        let db = db(24, false);
        let index = Arc::new(common::create(&db, KeyType::Bytes, true));
        let key = |i: u32| {
            let mut k = format!("k{:05}", i / 3).into_bytes();
            k.extend(std::iter::repeat_n(0u8, (i % 3) as usize));
            Key::Bytes(k)
        };
        const KEYS: u32 = 1500;
        let live: Arc<Mutex<BTreeSet<Tid>>> = Arc::default();
        let threads: Vec<_> = (0..4u32)
            .map(|th| {
                let (index, live) = (index.clone(), live.clone());
                std::thread::spawn(move || {
                    let mut won = Vec::new();
                    for n in 0..KEYS {
                        let i = match th {
                            0 => n,
                            1 => KEYS - 1 - n,
                            _ => (n * 7 + th * 100) % KEYS,
                        };
                        let tid = Tid::new(th * KEYS + n + 1, 1);
                        live.lock().unwrap().insert(tid);
                        let l = live.clone();
                        let vis = move |t: Tid| {
                            if l.lock().unwrap().contains(&t) {
                                Liveness::Live
                            } else {
                                Liveness::Dead
                            }
                        };
                        match index.insert(&key(i), tid, &vis) {
                            Ok(()) => won.push(i),
                            Err(BtreeError::UniqueViolation { .. }) => {
                                live.lock().unwrap().remove(&tid);
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                    won
                })
            })
            .collect();
        let mut won: Vec<u32> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        won.sort();
        assert_eq!(won, (0..KEYS).collect::<Vec<_>>(), "each key exactly once");
        for i in 0..KEYS {
            assert_eq!(index.lookup(&key(i)).unwrap().len(), 1, "{:?}", key(i));
        }
        assert!(high_keys(&db).len() >= 2);
        assert_clean(index.verify(None).unwrap());
    });
}
