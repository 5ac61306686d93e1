//! Range scans (their starts descend through internal pages read
//! optimistically) race three inserters that split leaves and internal
//! pages and a vacuum that removes a set of dead entries, in a 32-buffer
//! pool far smaller than the index, so internal pages are evicted and their
//! buffers reused under the readers. Every scan is checked against what
//! was known when it began: keys come in ascending order and at most once,
//! every live key whose insert had completed is there, and nothing outside
//! the range or never inserted is. All under a watchdog.

mod common;

use std::collections::HashSet;
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
const PER_THREAD: usize = 1_500;
const SPREAD: usize = 7919;
/// Slots per key number: `INSERTERS` inserters, one dead slot vacuumed
/// away, one never inserted.
const SLOTS: usize = INSERTERS + 2;
const DEAD: usize = INSERTERS;

fn key(k: usize) -> Key {
    Key::Bytes(format!("{k:0>200}").into_bytes())
}

fn number(k: &Key) -> usize {
    match k {
        Key::Bytes(b) => std::str::from_utf8(b).unwrap().parse().unwrap(),
        other => panic!("unexpected key {other:?}"),
    }
}

fn key_of(t: usize, n: usize) -> usize {
    ((n * SPREAD) % PER_THREAD) * SLOTS + t
}

fn tid_of(k: usize) -> Tid {
    Tid::new(k as u32 + 1, 1)
}

#[test]
fn range_scans_miss_no_completed_key_and_repeat_none_during_splits_vacuum_and_evictions() {
    within(Duration::from_secs(400), || {
        let db = db(32, false);
        let index = Arc::new(create(&db, KeyType::Bytes, false));
        for n in 0..PER_THREAD {
            let k = n * SLOTS + DEAD;
            index.insert(&key(k), tid_of(k), &AssumeLive).unwrap();
        }
        let done: Arc<Vec<AtomicUsize>> =
            Arc::new((0..INSERTERS).map(|_| AtomicUsize::new(0)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let mut writers = Vec::new();
        for t in 0..INSERTERS {
            let (index, done) = (index.clone(), done.clone());
            writers.push(thread::spawn(move || {
                for n in 0..PER_THREAD {
                    let k = key_of(t, n);
                    index.insert(&key(k), tid_of(k), &AssumeLive).unwrap();
                    done[t].store(n + 1, Ordering::Release);
                }
            }));
        }
        {
            let index = index.clone();
            writers.push(thread::spawn(move || {
                thread::sleep(Duration::from_millis(200));
                index
                    .vacuum(|tid| (tid.block as usize - 1) % SLOTS == DEAD)
                    .unwrap();
            }));
        }
        let scans = Arc::new(AtomicUsize::new(0));
        let mut readers = Vec::new();
        for s in 0..2u64 {
            let (index, done, stop, scans) =
                (index.clone(), done.clone(), stop.clone(), scans.clone());
            readers.push(thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(s);
                while !stop.load(Ordering::Acquire) {
                    let snapshot: Vec<usize> =
                        done.iter().map(|d| d.load(Ordering::Acquire)).collect();
                    let lo = rng.random_range(0..PER_THREAD * SLOTS);
                    let hi = lo + rng.random_range(0..200);
                    let mut seen = HashSet::new();
                    let mut last = None;
                    for entry in index
                        .scan(Bound::Included(&key(lo)), Bound::Excluded(&key(hi)))
                        .unwrap()
                    {
                        let (k, tid) = entry.unwrap();
                        let k = number(&k);
                        assert!((lo..hi).contains(&k), "key {k} outside {lo}..{hi}");
                        assert_eq!(tid, tid_of(k), "key {k}");
                        assert_ne!(k % SLOTS, SLOTS - 1, "key {k} was never inserted");
                        assert!(seen.insert(k), "key {k} returned twice in {lo}..{hi}");
                        assert!(last < Some(k), "key {k} after {last:?}");
                        last = Some(k);
                    }
                    for (t, &completed) in snapshot.iter().enumerate() {
                        for n in 0..completed {
                            let k = key_of(t, n);
                            if (lo..hi).contains(&k) {
                                assert!(
                                    seen.contains(&k),
                                    "completed key {k} missed in {lo}..{hi}"
                                );
                            }
                        }
                    }
                    scans.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        for h in writers {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Release);
        for h in readers {
            h.join().unwrap();
        }
        assert!(scans.load(Ordering::Relaxed) > 10, "the scans barely ran");
        let stats = db.pool.stats().totals();
        assert!(
            stats.optimistic_hits > 0,
            "nothing was read optimistically: {stats:?}"
        );
        assert!(stats.evictions > 0, "the pool never evicted: {stats:?}");
        let all = index
            .scan(Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .count();
        assert_eq!(all, INSERTERS * PER_THREAD);
        assert_clean(index.verify(None).unwrap());
    });
}
