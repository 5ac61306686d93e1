//! Byte-string keys of every length up to `MAX_KEY_SIZE` build a deep tree
//! (three maximal keys fill a page, and keys that differ only at their end
//! keep their separators long, so internal pages split constantly) that
//! verifies and answers lookups; one byte more is a clear error naming the
//! index and the size; a key of the wrong type is refused.

mod common;

use std::time::Duration;

use btree::{AssumeLive, BtreeError, ErrorKind, Key, KeyType, MAX_KEY_SIZE};
use common::{assert_clean, create, db, within};
use heap::tuple::Tid;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

/// A key of `len` bytes (at least 6) that ends in its number: keys differ
/// only near their end, so the truncated separators between them are
/// nearly as long as the keys and internal pages still hold few pivots.
fn key(i: u32, len: usize) -> Key {
    let mut b = vec![b'k'; len.max(6) - 6];
    b.extend_from_slice(format!("{i:06}").as_bytes());
    Key::Bytes(b)
}

#[test]
fn keys_up_to_the_maximum_work_and_beyond_it_fail_clearly() {
    within(Duration::from_secs(60), || {
        let db = db(24, true);
        let index = create(&db, KeyType::Bytes, false);
        let mut rng = SmallRng::seed_from_u64(7);
        let mut keys = Vec::new();
        for i in 0..600u32 {
            let len = if i % 3 == 0 {
                MAX_KEY_SIZE
            } else {
                rng.random_range(0..=MAX_KEY_SIZE)
            };
            let i = rng.random_range(0..1_000_000);
            let k = key(i, len);
            let tid = Tid::new(i, 1);
            index.insert(&k, tid, &AssumeLive).unwrap();
            keys.push((k, tid));
        }
        assert_clean(index.verify(None).unwrap());
        for (k, t) in &keys {
            assert!(index.lookup(k).unwrap().contains(t), "lookup of {k}");
        }
        let meta_level = {
            let p = db
                .pool
                .read_buffer(bufmgr::RelFork::main(common::REL), 0, None)
                .unwrap()
                .lock_shared();
            u32::from_le_bytes(p[24..28].try_into().unwrap())
        };
        assert!(
            meta_level >= 3,
            "maximal keys should make a deep tree, root level {meta_level}"
        );

        let err = index
            .insert(
                &Key::Bytes(vec![b'x'; MAX_KEY_SIZE + 1]),
                Tid::new(1, 1),
                &AssumeLive,
            )
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::BadInput);
        let msg = err.to_string();
        assert!(
            msg.contains("test_idx") && msg.contains(&(MAX_KEY_SIZE + 1).to_string()),
            "{msg}"
        );

        let err = index
            .insert(&Key::I64(5), Tid::new(1, 1), &AssumeLive)
            .unwrap_err();
        assert!(matches!(err, BtreeError::WrongKeyType { .. }), "{err}");
        assert_clean(index.verify(None).unwrap());
    });
}

#[test]
fn i64_keys_compare_numerically_across_the_sign() {
    within(Duration::from_secs(30), || {
        let db = db(16, false);
        let index = create(&db, KeyType::I64, false);
        let vals = [5i64, -1, i64::MIN, 0, i64::MAX, -300, 300, 1];
        for (n, v) in vals.iter().enumerate() {
            index
                .insert(&Key::I64(*v), Tid::new(1, n as u16 + 1), &AssumeLive)
                .unwrap();
        }
        let got: Vec<i64> = index
            .scan(
                std::ops::Bound::Included(&Key::I64(-300)),
                std::ops::Bound::Excluded(&Key::I64(300)),
            )
            .unwrap()
            .map(|r| match r.unwrap().0 {
                Key::I64(v) => v,
                k => panic!("{k}"),
            })
            .collect();
        assert_eq!(got, [-300, -1, 0, 1, 5]);
    });
}
