//! Lookups descend through internal pages read optimistically (no pin, no
//! lock, validated by the buffer's version) while three threads insert long
//! keys that split leaves and internal pages everywhere, in a pool far
//! smaller than the index, so internal pages are evicted and read back in
//! under the readers. Every lookup's answer is checked: a key whose insert
//! completed before the lookup began is found with its one TID, and a key
//! never inserted is not found. At the end some descents must really have
//! gone optimistic, the pool must have evicted, and `verify` is clean. All
//! under a watchdog: a deadlock fails the test.

mod common;

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use btree::{AssumeLive, Key, KeyType};
use common::{assert_clean, create, db, within};
use heap::tuple::Tid;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const INSERTERS: usize = 3;
const PER_THREAD: usize = 2_500;
/// A multiplier coprime with PER_THREAD: spreads each thread's keys.
const SPREAD: usize = 7919;

/// Key number `k` as a 200-byte decimal string: about 35 pivots fit on an
/// internal page, so a few thousand keys make a tree of three levels whose
/// internal pages split while the lookups run. Sorting the strings sorts
/// the numbers.
fn key(k: usize) -> Key {
    Key::Bytes(format!("{k:0>200}").into_bytes())
}

/// The `n`th key number of thread `t`; numbers `≡ INSERTERS (mod
/// INSERTERS + 1)` are never inserted.
fn key_of(t: usize, n: usize) -> usize {
    ((n * SPREAD) % PER_THREAD) * (INSERTERS + 1) + t
}

fn tid_of(k: usize) -> Tid {
    Tid::new(k as u32 + 1, 1)
}

#[test]
fn lookups_through_optimistic_internal_pages_answer_right_during_splits_and_evictions() {
    within(Duration::from_secs(300), || {
        let db = db(48, false);
        let index = Arc::new(create(&db, KeyType::Bytes, false));
        let done: Arc<Vec<AtomicUsize>> =
            Arc::new((0..INSERTERS).map(|_| AtomicUsize::new(0)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let mut inserters = Vec::new();
        for t in 0..INSERTERS {
            let (index, done) = (index.clone(), done.clone());
            inserters.push(thread::spawn(move || {
                for n in 0..PER_THREAD {
                    let k = key_of(t, n);
                    index.insert(&key(k), tid_of(k), &AssumeLive).unwrap();
                    done[t].store(n + 1, Ordering::Release);
                }
            }));
        }
        let lookups = Arc::new(AtomicUsize::new(0));
        let mut searchers = Vec::new();
        for s in 0..2u64 {
            let (index, done, stop, lookups) =
                (index.clone(), done.clone(), stop.clone(), lookups.clone());
            searchers.push(thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(s);
                while !stop.load(Ordering::Acquire) {
                    let snapshot: Vec<usize> =
                        done.iter().map(|d| d.load(Ordering::Acquire)).collect();
                    let t = rng.random_range(0..INSERTERS);
                    if snapshot[t] > 0 {
                        let k = key_of(t, rng.random_range(0..snapshot[t]));
                        assert_eq!(
                            index.lookup(&key(k)).unwrap(),
                            [tid_of(k)],
                            "lookup of completed key {k}"
                        );
                    }
                    let absent = rng.random_range(0..PER_THREAD) * (INSERTERS + 1) + INSERTERS;
                    assert_eq!(
                        index.lookup(&key(absent)).unwrap(),
                        [],
                        "lookup of key {absent}, never inserted"
                    );
                    lookups.fetch_add(2, Ordering::Relaxed);
                }
            }));
        }
        for h in inserters {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Release);
        for h in searchers {
            h.join().unwrap();
        }
        assert!(
            lookups.load(Ordering::Relaxed) > 100,
            "the searchers barely ran"
        );
        // Every key once more, now that nothing changes.
        for t in 0..INSERTERS {
            for n in 0..PER_THREAD {
                let k = key_of(t, n);
                assert_eq!(index.lookup(&key(k)).unwrap(), [tid_of(k)], "key {k}");
            }
        }
        let stats = db.pool.stats().totals();
        assert!(
            stats.optimistic_hits > 0,
            "no page was read optimistically: {stats:?}"
        );
        assert!(stats.evictions > 0, "the pool never evicted: {stats:?}");
        assert_clean(index.verify(None).unwrap());
        let all = index
            .scan(Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .count();
        assert_eq!(all, INSERTERS * PER_THREAD);
    });
}
