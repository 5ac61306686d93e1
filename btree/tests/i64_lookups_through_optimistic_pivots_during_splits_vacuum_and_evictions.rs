//! Lookups and range scans of an `i64` index (internal items of 8-byte
//! keys, which the optimistic descent reads as words), built in order with
//! its internal pages 70% full, while three threads
//! insert entries of a few hundred keys, each key many times (pivots tie on
//! keys and their TIDs decide; i64::MIN, i64::MAX and negative keys among
//! them), and a fourth inserts entries it then has vacuumed away, in a pool
//! of a few buffers, so internal pages split and are evicted and read back
//! under the readers (the test checks that internal pages split). Every answer is checked: each entry of the three
//! inserters completed before the read began is found, nothing of another
//! key is, and no entry is returned twice. Both item layouts.

mod common;

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use btree::page::Layout;
use btree::{AssumeLive, Index, IndexOptions, Key, KeyType};
use bufmgr::RelFork;
use common::{REL, assert_clean, db, within};
use heap::tuple::Tid;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const INSERTERS: usize = 3;
const PER_THREAD: usize = 12_000;
const KEYS: usize = 300;
/// The TID offset of the entries vacuum removes.
const DOOMED: u16 = 9;
/// The TID offset of the entries built in order before the threads start,
/// `BUILT` of each key.
const BASE: u16 = 20;
const BUILT: u32 = 500;

/// Key number `j`'s value: the extremes, and a spread of both signs.
fn value(j: usize) -> i64 {
    match j {
        0 => i64::MIN,
        1 => i64::MIN + 1,
        j if j == KEYS - 1 => i64::MAX,
        j if j == KEYS - 2 => i64::MAX - 1,
        j => (j as i64 - KEYS as i64 / 2) * 1_000_000_007,
    }
}

/// The key number of thread `t`'s `n`th entry.
fn key_of(t: usize, n: usize) -> usize {
    (n * 7919 + t * 37) % KEYS
}

fn tid_of(t: usize, n: usize) -> Tid {
    Tid::new(n as u32 + 1, t as u16 + 1)
}

/// Thread and entry number of `tid`, if one of the three inserters' (not
/// a doomed entry).
fn entry_of(tid: Tid) -> Option<(usize, usize)> {
    let t = usize::from(tid.offset).checked_sub(1)?;
    (t < INSERTERS).then(|| (t, tid.block as usize - 1))
}

/// Checks `tids`, read for key number `j` when `before` entries of each
/// thread had been inserted: every one of those with key `j` is there,
/// nothing else of the inserters' but key `j` entries, nothing twice.
fn check(j: usize, tids: &[Tid], before: &[usize]) {
    let mut seen = HashSet::new();
    for &tid in tids {
        assert!(seen.insert(tid), "key {j}: {tid:?} returned twice");
        if tid.offset == DOOMED || tid.offset == BASE {
            continue;
        }
        let (t, n) = entry_of(tid).unwrap_or_else(|| panic!("key {j}: unknown {tid:?}"));
        assert_eq!(
            key_of(t, n),
            j,
            "key {j}: {tid:?} is key {}'s",
            key_of(t, n)
        );
    }
    for m in 0..BUILT {
        assert!(
            seen.contains(&Tid::new(m + 1, BASE)),
            "key {j}: built entry {m} missed"
        );
    }
    for (t, &b) in before.iter().enumerate() {
        for n in 0..b {
            if key_of(t, n) == j {
                assert!(
                    seen.contains(&tid_of(t, n)),
                    "key {j}: entry {t}/{n} missed"
                );
            }
        }
    }
}

/// Internal pages in the index's file.
fn internal_pages(db: &common::Db) -> usize {
    let rf = RelFork::main(REL);
    (1..db.pool.nblocks(rf).unwrap())
        .filter(|&b| {
            let p = db.pool.read_buffer(rf, b, None).unwrap().lock_shared();
            u16::from_le_bytes([p[14], p[15]]) & 0x1 == 0
        })
        .count()
}

fn run(layout: Layout, dedup: bool) {
    within(Duration::from_secs(120), move || {
        let db = db(12, false);
        let index = Arc::new(
            Index::create_in_format(
                db.pool.clone(),
                None,
                IndexOptions {
                    name: "i64_idx".into(),
                    rel: REL,
                    key_type: KeyType::I64,
                    unique: false,
                },
                layout,
                dedup,
            )
            .unwrap(),
        );
        assert_eq!(index.deduplicates(), dedup);
        let built =
            index
                .build_sorted((0..KEYS).flat_map(|j| {
                    (0..BUILT).map(move |m| (Key::I64(value(j)), Tid::new(m + 1, BASE)))
                }))
                .unwrap();
        // Posting lists hold a key's entries in a few items: then the
        // tree has one internal page, which does not split.
        assert!(built.root_level >= if dedup { 1 } else { 2 }, "{built:?}");
        let internal_before = internal_pages(&db);
        let done: Arc<Vec<AtomicUsize>> =
            Arc::new((0..INSERTERS).map(|_| AtomicUsize::new(0)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let mut writers = Vec::new();
        for t in 0..INSERTERS {
            let (index, done) = (index.clone(), done.clone());
            writers.push(thread::spawn(move || {
                for n in 0..PER_THREAD {
                    let k = Key::I64(value(key_of(t, n)));
                    index.insert(&k, tid_of(t, n), &AssumeLive).unwrap();
                    done[t].store(n + 1, Ordering::Release);
                }
            }));
        }
        {
            let (index, stop) = (index.clone(), stop.clone());
            writers.push(thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Acquire) {
                    for _ in 0..500 {
                        let k = Key::I64(value((n as usize * 31) % KEYS));
                        index
                            .insert(&k, Tid::new(n + 1, DOOMED), &AssumeLive)
                            .unwrap();
                        n += 1;
                    }
                    index.vacuum(|tid| tid.offset == DOOMED).unwrap();
                }
            }));
        }
        let reads = Arc::new(AtomicUsize::new(0));
        let mut readers = Vec::new();
        for s in 0..2u64 {
            let (index, done, stop, reads) =
                (index.clone(), done.clone(), stop.clone(), reads.clone());
            readers.push(thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(s);
                while !stop.load(Ordering::Acquire) {
                    let before: Vec<usize> =
                        done.iter().map(|d| d.load(Ordering::Acquire)).collect();
                    let j = rng.random_range(0..KEYS);
                    let tids = index.lookup(&Key::I64(value(j))).unwrap();
                    check(j, &tids, &before);
                    // A value between two keys (or beside an extreme) is
                    // never found.
                    let v = value(j);
                    let near = if v == i64::MAX { v - 2 } else { v + 1 };
                    if (0..KEYS).all(|i| value(i) != near) {
                        assert_eq!(index.lookup(&Key::I64(near)).unwrap(), [], "{near}");
                    }
                    // A range over this key alone, bounds inclusive.
                    let k = Key::I64(v);
                    let scanned: Vec<Tid> = index
                        .scan(Bound::Included(&k), Bound::Included(&k))
                        .unwrap()
                        .map(|e| e.unwrap().1)
                        .collect();
                    check(j, &scanned, &before);
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        for h in writers.drain(..INSERTERS) {
            h.join().unwrap();
        }
        stop.store(true, Ordering::Release);
        for h in writers.into_iter().chain(readers) {
            h.join().unwrap();
        }
        assert!(reads.load(Ordering::Relaxed) > 20, "the readers barely ran");
        index.vacuum(|tid| tid.offset == DOOMED).unwrap();
        let all = [PER_THREAD; INSERTERS];
        for j in 0..KEYS {
            let tids = index.lookup(&Key::I64(value(j))).unwrap();
            check(j, &tids, &all);
        }
        let stats = db.pool.stats().totals();
        assert!(stats.optimistic_hits > 0, "nothing optimistic: {stats:?}");
        assert!(stats.evictions > 0, "the pool never evicted: {stats:?}");
        assert_clean(index.verify(None).unwrap());
        let n = index
            .scan(Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .count();
        assert_eq!(n, INSERTERS * PER_THREAD + KEYS * BUILT as usize);
        let internal_after = internal_pages(&db);
        assert!(
            dedup || internal_after > internal_before,
            "no internal page split: {internal_before} -> {internal_after}"
        );
    });
}

#[test]
fn compact_i64_lookups_and_ranges_miss_nothing_during_splits_vacuum_and_evictions() {
    run(Layout::Compact, false);
}

#[test]
fn deduplicated_i64_lookups_and_ranges_miss_nothing_during_splits_vacuum_and_evictions() {
    run(Layout::Compact, true);
}

#[test]
fn headed_i64_lookups_and_ranges_miss_nothing_during_splits_vacuum_and_evictions() {
    run(Layout::Headed, false);
}
