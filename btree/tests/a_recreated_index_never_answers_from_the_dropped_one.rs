//! An index is dropped (its relation's buffers forgotten, its file removed)
//! and a new index made under the same relation number, in a pool that
//! still held the old one's internal pages. Lookups on the new index, some
//! racing its inserts (which split its internal pages), read internal pages
//! optimistically: they find every key whose insert completed and never a
//! key of the dropped index, whose pages had the same layout at the same
//! block numbers.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use btree::{AssumeLive, Key, KeyType};
use common::{REL, assert_clean, create, db, within};
use heap::tuple::Tid;

const KEYS: usize = 2_000;

fn key(k: usize) -> Key {
    Key::Bytes(format!("{k:0>200}").into_bytes())
}

fn tid_of(k: usize) -> Tid {
    Tid::new(k as u32 + 1, 1)
}

#[test]
fn lookups_on_a_recreated_index_find_its_keys_and_never_the_dropped_indexs() {
    within(Duration::from_secs(300), || {
        let db = db(256, false);
        let old = create(&db, KeyType::Bytes, false);
        // The old index holds the even key numbers.
        for k in (0..2 * KEYS).step_by(2) {
            old.insert(&key(k), tid_of(k), &AssumeLive).unwrap();
        }
        for k in (0..2 * KEYS).step_by(2) {
            assert_eq!(old.lookup(&key(k)).unwrap(), [tid_of(k)]);
        }
        drop(old);
        db.pool.drop_relation(REL).unwrap();
        let index = Arc::new(create(&db, KeyType::Bytes, false));
        let done = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (index, done, stop) = (index.clone(), done.clone(), stop.clone());
            thread::spawn(move || {
                let mut n = 0usize;
                while !stop.load(Ordering::Acquire) {
                    let completed = done.load(Ordering::Acquire);
                    n = (n + 7919) % (2 * KEYS);
                    let found = index.lookup(&key(n)).unwrap();
                    if n.is_multiple_of(2) {
                        assert_eq!(found, [], "key {n} of the dropped index");
                    } else if n / 2 < completed {
                        assert_eq!(found, [tid_of(n)], "completed key {n}");
                    }
                }
            })
        };
        // The new index holds the odd ones, inserted in order.
        for i in 0..KEYS {
            let k = 2 * i + 1;
            index.insert(&key(k), tid_of(k), &AssumeLive).unwrap();
            done.store(i + 1, Ordering::Release);
        }
        stop.store(true, Ordering::Release);
        reader.join().unwrap();
        for k in 0..2 * KEYS {
            let want = if !k.is_multiple_of(2) {
                vec![tid_of(k)]
            } else {
                vec![]
            };
            assert_eq!(index.lookup(&key(k)).unwrap(), want, "key {k}");
        }
        let stats = db.pool.stats().totals();
        assert!(stats.optimistic_hits > 0, "nothing was read optimistically");
        assert_clean(index.verify(None).unwrap());
    });
}
