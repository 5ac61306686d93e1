//! Three threads insert (keys spread over the whole range, so splits happen
//! everywhere at once) while two threads look keys up and scan ranges. Each
//! inserter publishes how many of its keys have completed; a search that
//! starts after a key's insert completed must find it (Lehman & Yao's
//! move-right makes concurrent splits invisible to searches). `verify` is
//! clean at the end. All under a watchdog: a deadlock fails the test.

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
const PER_THREAD: usize = 20_000;
/// A multiplier coprime with PER_THREAD: spreads each thread's keys.
const SPREAD: usize = 7919;

/// The `n`th key of thread `t`.
fn key_of(t: usize, n: usize) -> i64 {
    (((n * SPREAD) % PER_THREAD) * INSERTERS + t) as i64
}

#[test]
fn searches_find_every_insert_that_completed_before_they_began() {
    within(Duration::from_secs(120), || {
        let db = db(64, true);
        let index = Arc::new(create(&db, KeyType::I64, false));
        let done: Arc<Vec<AtomicUsize>> =
            Arc::new((0..INSERTERS).map(|_| AtomicUsize::new(0)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let mut inserters = Vec::new();
        for t in 0..INSERTERS {
            let (index, done) = (index.clone(), done.clone());
            inserters.push(thread::spawn(move || {
                for n in 0..PER_THREAD {
                    let k = key_of(t, n);
                    index
                        .insert(&Key::I64(k), Tid::new(k as u32 + 1, 1), &AssumeLive)
                        .unwrap();
                    done[t].store(n + 1, Ordering::Release);
                }
            }));
        }
        let searches = Arc::new(AtomicUsize::new(0));
        let mut searchers = Vec::new();
        for s in 0..2u64 {
            let (index, done, stop, searches) =
                (index.clone(), done.clone(), stop.clone(), searches.clone());
            searchers.push(thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(s);
                while !stop.load(Ordering::Acquire) {
                    let snapshot: Vec<usize> =
                        done.iter().map(|d| d.load(Ordering::Acquire)).collect();
                    if rng.random_range(0..4) == 0 {
                        // A range scan: every completed key in it must appear.
                        let lo = rng.random_range(0..(PER_THREAD * INSERTERS) as i64);
                        let hi = lo + 500;
                        let got: std::collections::HashSet<i64> = index
                            .scan(
                                Bound::Included(&Key::I64(lo)),
                                Bound::Excluded(&Key::I64(hi)),
                            )
                            .unwrap()
                            .map(|r| match r.unwrap().0 {
                                Key::I64(v) => v,
                                k => panic!("{k}"),
                            })
                            .collect();
                        for (t, &c) in snapshot.iter().enumerate() {
                            for n in 0..c {
                                let k = key_of(t, n);
                                if (lo..hi).contains(&k) {
                                    assert!(
                                        got.contains(&k),
                                        "scan [{lo},{hi}) missed completed key {k}"
                                    );
                                }
                            }
                        }
                    } else {
                        for _ in 0..50 {
                            let t = rng.random_range(0..INSERTERS);
                            if snapshot[t] == 0 {
                                continue;
                            }
                            let k = key_of(t, rng.random_range(0..snapshot[t]));
                            let tids = index.lookup(&Key::I64(k)).unwrap();
                            assert_eq!(
                                tids,
                                [Tid::new(k as u32 + 1, 1)],
                                "lookup of completed key {k}"
                            );
                        }
                    }
                    searches.fetch_add(1, Ordering::Relaxed);
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
            searches.load(Ordering::Relaxed) > 10,
            "the searchers barely ran"
        );
        assert_clean(index.verify(None).unwrap());
        let all = index
            .scan(Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .count();
        assert_eq!(all, INSERTERS * PER_THREAD);
    });
}
