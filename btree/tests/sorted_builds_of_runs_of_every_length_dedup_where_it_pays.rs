//! `build_sorted` of a deduplicating index over runs of equal keys of every
//! length (1, 2, 3, ... thousands; alone and mixed with unique keys), keys
//! from empty to near the size limit and `i64` keys at their limits, with
//! TIDs near and far apart: the index verifies, answers every key, is
//! never bigger than the same build without deduplication, and is clearly
//! smaller wherever posting lists pay.

mod common;

use std::ops::Bound;
use std::time::Duration;

use btree::page::Layout;
use btree::{Index, IndexOptions, Key, KeyType};
use bufmgr::RelId;
use common::{Db, assert_clean, db, within};
use heap::tuple::Tid;

fn index(d: &Db, rel: u32, key_type: KeyType, dedup: bool) -> Index {
    Index::create_in_format(
        d.pool.clone(),
        d.wal.clone(),
        IndexOptions {
            name: format!("idx_{rel}"),
            rel: RelId(rel),
            key_type,
            unique: false,
        },
        Layout::Compact,
        dedup,
    )
    .unwrap()
}

/// Key `k` of `len` bytes (`None`: an `i64` key, spread to both limits).
fn key(k: u64, len: Option<usize>) -> Key {
    match len {
        None => Key::I64(match k {
            0 => i64::MIN,
            1 => i64::MIN + 1,
            k => (k as i64 - 3000) * 1_000_003,
        }),
        Some(len) => {
            let mut v = vec![b'k'; len];
            let b = k.to_be_bytes();
            let n = len.min(8);
            v[len - n..].copy_from_slice(&b[8 - n..]);
            Key::Bytes(v)
        }
    }
}

fn entries(len: Option<usize>, run: usize, mixed: bool, far: bool, n: u64) -> Vec<(Key, Tid)> {
    let mut e = Vec::new();
    let (mut i, mut k) = (0u64, 0u64);
    while i < n {
        let r = if mixed && k % 2 == 1 { 1 } else { run };
        for _ in 0..r {
            let tid = if far {
                Tid::new(
                    ((i * 7_654_321) % 0x0fff_ffff) as u32 + 1,
                    (i % 300) as u16 + 1,
                )
            } else {
                Tid::new((i / 60) as u32 + 1, (i % 60) as u16 + 1)
            };
            e.push((key(k, len), tid));
            i += 1;
        }
        k += 1;
    }
    if len.is_none() {
        // The largest key too, last.
        for t in 0..run as u32 {
            e.push((Key::I64(i64::MAX), Tid::new(0x0fff_fff0 + t, 1)));
        }
    }
    e.sort();
    e
}

fn check(len: Option<usize>, run: usize, mixed: bool, far: bool) {
    let case = format!("key {len:?}, runs of {run}, mixed {mixed}, far TIDs {far}");
    let n: u64 = match len {
        None | Some(0..=16) => 6_000,
        Some(17..=200) => 2_500,
        _ => 300,
    };
    let e = entries(len, run, mixed, far, n);
    let d = db(64, false);
    let key_type = if len.is_none() {
        KeyType::I64
    } else {
        KeyType::Bytes
    };
    let (with, without) = (
        index(&d, 41, key_type, true),
        index(&d, 42, key_type, false),
    );
    assert!(with.deduplicates() && !without.deduplicates());
    let s = with.build_sorted(e.iter().cloned()).unwrap();
    let p = without.build_sorted(e.iter().cloned()).unwrap();
    assert_eq!(s.entries, e.len() as u64, "{case}");
    assert_clean(with.verify(None).unwrap());
    let all: Vec<(Key, Tid)> = with
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(all == e, "{case}: a full scan differs");
    for (k, _) in e.iter().step_by(e.len() / 40 + 1).chain(e.last()) {
        let want: Vec<Tid> = e.iter().filter(|(x, _)| x == k).map(|(_, t)| *t).collect();
        assert_eq!(with.lookup(k).unwrap(), want, "{case}: {k}");
    }
    assert!(
        s.leaf_pages <= p.leaf_pages,
        "{case}: {} leaves, {} without deduplication",
        s.leaf_pages,
        p.leaf_pages
    );
    // Posting lists pay for runs of 3 of any key with near TIDs (a byte or
    // two each), for runs of 2 of keys long enough that a second item costs
    // more than a posting list's overhead, and for long runs of far TIDs
    // (up to six bytes each): then a leaf holds clearly more entries.
    let pays = !mixed
        && if far {
            run >= 10
        } else {
            run >= 3 || (run == 2 && len.is_some_and(|l| l >= 16))
        }
        // A key too long for a posting list stays in plain items.
        && len.is_none_or(|l| l + 20 <= btree::page::MAX_POSTING_ITEM);
    if pays && p.leaf_pages >= 4 {
        assert!(
            s.leaf_pages * 10 <= p.leaf_pages * 9,
            "{case}: {} leaves, {} without deduplication",
            s.leaf_pages,
            p.leaf_pages
        );
    }
}

#[test]
fn sorted_builds_of_runs_of_every_length_dedup_where_it_pays() {
    within(Duration::from_secs(180), || {
        for len in [None, Some(0), Some(2), Some(20), Some(700), Some(1400)] {
            for run in [1, 2, 3, 7, 40, 3000] {
                for (mixed, far) in [(false, false), (true, false), (false, true)] {
                    // Empty keys are all equal: one run of thousands.
                    if len != Some(0) || (run == 1 && !mixed) {
                        check(len, run, mixed, far);
                    }
                }
            }
        }
    });
}
