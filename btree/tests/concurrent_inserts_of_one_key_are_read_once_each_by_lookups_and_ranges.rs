//! Four threads insert thousands of entries under three keys, each in a
//! shuffled TID order (so most TIDs land inside existing posting lists,
//! which are rewritten and cut in two, and leaves deduplicate and split),
//! on a 32-buffer pool. Three readers meanwhile look the keys up (a lookup
//! hands out batches and resumes inside posting lists), scan, and read
//! ranges in small batches in both directions (resuming from the last entry
//! returned, inside posting lists that may split in between). Every read
//! returns entries in (key, TID) order, each at most once, and every entry
//! whose insert had completed before the read began. All under a watchdog.

mod common;

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use btree::{AssumeLive, Direction, Index, Key, KeyType};
use common::{assert_clean, create, db, read_all, within};
use heap::tuple::Tid;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};

const INSERTERS: usize = 4;
const PER_THREAD: usize = 6_000;
const KEYS: u32 = 3;

fn key_of(t: Tid) -> i64 {
    i64::from(t.block % KEYS)
}

type Done = Arc<Vec<AtomicUsize>>;

/// The entries whose inserts had completed when `done` was read.
fn completed(plans: &[Vec<Tid>], done: &Done) -> Vec<(i64, Tid)> {
    let mut v: Vec<(i64, Tid)> = plans
        .iter()
        .enumerate()
        .flat_map(|(t, plan)| {
            plan[..done[t].load(Ordering::Acquire)]
                .iter()
                .map(|&tid| (key_of(tid), tid))
        })
        .collect();
    v.sort();
    v
}

#[track_caller]
fn check_read(what: &str, got: &[(i64, Tid)], before: &[(i64, Tid)], key: Option<i64>) {
    for w in got.windows(2) {
        assert!(w[0] < w[1], "{what}: {:?} then {:?}", w[0], w[1]);
    }
    let set: HashSet<(i64, Tid)> = got.iter().copied().collect();
    for e in before {
        if key.is_none_or(|k| k == e.0) {
            assert!(set.contains(e), "{what}: completed entry {e:?} missing");
        }
    }
}

fn read_batches(index: &Index, dir: Direction, batch: usize) -> Vec<(i64, Tid)> {
    let out = read_all(index, dir, batch);
    let mut v: Vec<(i64, Tid)> = out
        .into_iter()
        .map(|(k, t)| {
            let k = (0..i64::from(KEYS))
                .find(|&n| Key::I64(n).encode() == k)
                .expect("a range returned a key never inserted");
            (k, t)
        })
        .collect();
    if dir == Direction::Backward {
        v.reverse();
    }
    v
}

#[test]
fn every_read_sees_each_completed_duplicate_once_and_in_order() {
    within(Duration::from_secs(300), || {
        let db = db(32, true);
        let index = Arc::new(create(&db, KeyType::I64, false));
        assert!(index.deduplicates());
        let plans: Arc<Vec<Vec<Tid>>> = Arc::new(
            (0..INSERTERS)
                .map(|t| {
                    let mut plan: Vec<Tid> = (0..PER_THREAD as u32)
                        .map(|b| Tid::new(b * 7 + t as u32, 1 + (b % 5) as u16))
                        .collect();
                    plan.shuffle(&mut SmallRng::seed_from_u64(t as u64));
                    plan
                })
                .collect(),
        );
        let done: Done = Arc::new((0..INSERTERS).map(|_| AtomicUsize::new(0)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let mut inserters = Vec::new();
        for t in 0..INSERTERS {
            let (index, done, plans) = (index.clone(), done.clone(), plans.clone());
            inserters.push(thread::spawn(move || {
                for (n, &tid) in plans[t].iter().enumerate() {
                    index
                        .insert(&Key::I64(key_of(tid)), tid, &AssumeLive)
                        .unwrap();
                    done[t].store(n + 1, Ordering::Release);
                }
            }));
        }
        let reads = Arc::new(AtomicUsize::new(0));
        let mut readers = Vec::new();
        for r in 0..3u64 {
            let (index, done, plans, stop, reads) = (
                index.clone(),
                done.clone(),
                plans.clone(),
                stop.clone(),
                reads.clone(),
            );
            readers.push(thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(100 + r);
                while !stop.load(Ordering::Acquire) {
                    let before = completed(&plans, &done);
                    match rng.random_range(0..4) {
                        0 => {
                            let k = rng.random_range(0..i64::from(KEYS));
                            let mut got = Vec::new();
                            index
                                .lookup_each(&Key::I64(k), |t| {
                                    got.push((k, t));
                                    true
                                })
                                .unwrap();
                            check_read("lookup", &got, &before, Some(k));
                        }
                        1 => {
                            let got: Vec<(i64, Tid)> = index
                                .scan(Bound::Unbounded, Bound::Unbounded)
                                .unwrap()
                                .map(|r| {
                                    let (k, t) = r.unwrap();
                                    let Key::I64(k) = k else {
                                        panic!("not an i64 key")
                                    };
                                    (k, t)
                                })
                                .collect();
                            check_read("scan", &got, &before, None);
                        }
                        2 => {
                            let batch = rng.random_range(1..40);
                            let got = read_batches(&index, Direction::Forward, batch);
                            check_read("forward range", &got, &before, None);
                        }
                        _ => {
                            let batch = rng.random_range(1..40);
                            let got = read_batches(&index, Direction::Backward, batch);
                            check_read("backward range", &got, &before, None);
                        }
                    }
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        for h in inserters {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Release);
        for h in readers {
            h.join().unwrap();
        }
        assert!(reads.load(Ordering::Relaxed) > 10, "too few reads raced");
        let all = completed(&plans, &done);
        for dir in [Direction::Forward, Direction::Backward] {
            assert_eq!(read_batches(&index, dir, 3), all);
        }
        assert_clean(index.verify(None).unwrap());
    });
}
