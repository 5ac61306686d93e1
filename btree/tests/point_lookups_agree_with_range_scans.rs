//! `lookup_each` / `lookup_encoded_each`: the allocation-free point lookup
//! finds exactly what a range scan over the one key finds, in TID order,
//! including keys whose entries span several leaves (more than one batch of
//! TIDs, right links followed), stops when the callback says so, and
//! refuses keys of the wrong type or size; the rightmost-split rule fills
//! leaves when keys arrive in ascending order.

mod common;

use std::ops::Bound;
use std::time::Duration;

use btree::{AssumeLive, BtreeError, Index, Key, KeyType, MAX_KEY_SIZE};
use bufmgr::RelFork;
use common::{REL, assert_clean, create, db, within};
use heap::tuple::Tid;

fn scanned(index: &Index, k: &Key) -> Vec<Tid> {
    index
        .scan(Bound::Included(k), Bound::Included(k))
        .unwrap()
        .map(|r| r.unwrap().1)
        .collect()
}

fn each(index: &Index, k: &Key) -> Vec<Tid> {
    let mut v = Vec::new();
    index
        .lookup_each(k, |t| {
            v.push(t);
            true
        })
        .unwrap();
    v
}

#[test]
fn lookup_each_equals_a_range_scan_over_the_key() {
    within(Duration::from_secs(60), || {
        let db = db(16, false);
        let idx = create(&db, KeyType::I64, false);
        // Key 500 has 3000 entries (over several leaves), inserted in a
        // scrambled TID order; the others a few each.
        for i in 0..3000u32 {
            let j = (i * 7919) % 3000;
            idx.insert(
                &Key::I64(500),
                Tid::new(j / 7 + 1, (j % 7) as u16 + 1),
                &AssumeLive,
            )
            .unwrap();
        }
        for i in 0..6000u32 {
            let k = Key::I64(i64::from(i % 1000) * 2 - 700);
            idx.insert(&k, Tid::new(i + 1, 9), &AssumeLive).unwrap();
        }
        assert_clean(idx.verify(None).unwrap());
        for v in -800..1400 {
            let k = Key::I64(v);
            let want = scanned(&idx, &k);
            assert_eq!(each(&idx, &k), want, "{k}");
            assert_eq!(idx.lookup(&k).unwrap(), want, "{k}");
            let present = v == 500 || ((-700..1300).contains(&v) && v % 2 == 0);
            assert_eq!(!want.is_empty(), present, "{k}");
        }
        let hot = each(&idx, &Key::I64(500));
        assert!(hot.len() >= 3000 && hot.windows(2).all(|w| w[0] < w[1]));
        // The encoded-key variant answers the same.
        let mut enc = Vec::new();
        idx.lookup_encoded_each(&Key::encode_i64(500), |t| {
            enc.push(t);
            true
        })
        .unwrap();
        assert_eq!(enc, hot);
        // Stopping early: the callback sees exactly as many as it accepts.
        for stop in [1usize, 31, 32, 33, 100, 1000] {
            let mut seen = Vec::new();
            idx.lookup_each(&Key::I64(500), |t| {
                seen.push(t);
                seen.len() < stop
            })
            .unwrap();
            assert_eq!(seen, hot[..stop], "stop after {stop}");
        }
    });
}

#[test]
fn lookup_each_finds_byte_keys_and_refuses_bad_keys() {
    within(Duration::from_secs(60), || {
        let db = db(16, false);
        let idx = create(&db, KeyType::Bytes, false);
        for i in 0..2000u32 {
            let k = Key::Bytes(format!("k{:04}", i % 300).into_bytes());
            idx.insert(&k, Tid::new(i + 1, 1), &AssumeLive).unwrap();
        }
        for i in 0..310u32 {
            let k = Key::Bytes(format!("k{i:04}").into_bytes());
            assert_eq!(each(&idx, &k), scanned(&idx, &k));
            let mut enc = Vec::new();
            idx.lookup_encoded_each(&k.encode(), |t| {
                enc.push(t);
                true
            })
            .unwrap();
            assert_eq!(enc, scanned(&idx, &k));
        }
        assert!(each(&idx, &Key::Bytes(Vec::new())).is_empty());
        let wrong = idx.lookup_each(&Key::I64(1), |_| true).unwrap_err();
        assert!(matches!(wrong, BtreeError::WrongKeyType { .. }), "{wrong}");
        let long = idx
            .lookup_each(&Key::Bytes(vec![b'a'; MAX_KEY_SIZE + 1]), |_| true)
            .unwrap_err();
        assert!(matches!(long, BtreeError::KeyTooLarge { .. }), "{long}");

        let db = common::db(16, false);
        let ints = create(&db, KeyType::I64, false);
        let short = ints.lookup_encoded_each(b"abc", |_| true).unwrap_err();
        assert!(matches!(short, BtreeError::WrongKeyType { .. }), "{short}");
    });
}

#[test]
fn ascending_keys_fill_leaves_to_the_fillfactor() {
    within(Duration::from_secs(60), || {
        // A pool holding the whole index, so that residency counts every page.
        let db = db(1024, false);
        let idx = create(&db, KeyType::I64, false);
        let n = 100_000u32;
        for i in 0..n {
            idx.insert(
                &Key::I64(i64::from(i)),
                Tid::new(i / 100 + 1, (i % 100) as u16 + 1),
                &AssumeLive,
            )
            .unwrap();
        }
        assert_clean(idx.verify(None).unwrap());
        let r = idx.residency().unwrap();
        let leaves = r.levels[&0];
        // A leaf entry takes 8 + 10 bytes plus a 4-byte pointer: a page of
        // 8164 bytes holds 371; at 90% that is about 334 a leaf.
        let per_leaf = f64::from(n) / leaves as f64;
        assert!(
            per_leaf > 320.0,
            "{per_leaf:.0} entries a leaf ({leaves} leaves)"
        );
        let blocks = db.pool.nblocks(RelFork::main(REL)).unwrap() as usize;
        assert_eq!(blocks, 1 + r.levels.values().sum::<usize>());
    });
}
