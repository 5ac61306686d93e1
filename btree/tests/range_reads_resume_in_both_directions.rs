//! `read_range`: batches of entries from a range of stored keys, forward
//! and backward, each batch resuming strictly after the last (key, TID) it
//! handed out, agree with a sorted reference over a tree of several levels
//! (tuple keys, long runs of equal keys across many leaves, bounds that are
//! prefixes); and reading a run of equal keys in batches costs a number of
//! page reads linear in the entries, not quadratic.

mod common;

use std::ops::Bound;
use std::time::Duration;

use btree::key::{encode_parts, prefix_end};
use btree::{AssumeLive, ColumnKind, Direction, KeyBounds, KeyPart, KeyType, TupleType};
use common::{assert_clean, create, db, within};
use heap::tuple::Tid;

fn tuple_type() -> KeyType {
    KeyType::Tuple(TupleType::new(&[ColumnKind::I64, ColumnKind::Bytes]).unwrap())
}

fn key(a: i64, b: &[u8]) -> Vec<KeyPart> {
    vec![KeyPart::I64(a), KeyPart::Bytes(b.to_vec())]
}

/// Read the whole range in batches of `batch`, resuming each time.
fn read_all(
    idx: &btree::Index,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
    dir: Direction,
    batch: usize,
) -> Vec<(Vec<u8>, Tid)> {
    let mut out: Vec<(Vec<u8>, Tid)> = Vec::new();
    loop {
        let after = out.last().map(|(k, t)| (k.clone(), *t));
        let mut got = Vec::new();
        let more = idx
            .read_range(
                KeyBounds { lower, upper },
                dir,
                after.as_ref().map(|(k, t)| (k.as_slice(), *t)),
                batch,
                |k, t| got.push((k.to_vec(), t)),
            )
            .unwrap();
        assert!(got.len() <= batch);
        out.extend(got);
        if !more {
            return out;
        }
    }
}

#[test]
fn batched_reads_in_both_directions_equal_the_sorted_entries_in_range() {
    within(Duration::from_secs(120), || {
        let db = db(64, false);
        let idx = create(&db, tuple_type(), false);
        let mut all: Vec<(Vec<u8>, Tid)> = Vec::new();
        let mut n = 0u32;
        // (3, "dup") has 5000 entries over many leaves; the rest a few each,
        // some with a zero byte in the string.
        for i in 0..5000u32 {
            let j = (i * 7919) % 5000;
            let tid = Tid::new(j / 10 + 1, (j % 10) as u16 + 1);
            let k = key(3, b"dup");
            idx.insert(&btree::Key::Tuple(k.clone()), tid, &AssumeLive)
                .unwrap();
            all.push((encode_parts(&k), tid));
        }
        for a in -4..8i64 {
            for s in [&b""[..], b"a", b"a\0", b"a\0b", b"b", b"dup", b"dupe"] {
                for _ in 0..30 {
                    n += 1;
                    let tid = Tid::new(100_000 + n, 1);
                    let k = key(a, s);
                    idx.insert(&btree::Key::Tuple(k.clone()), tid, &AssumeLive)
                        .unwrap();
                    all.push((encode_parts(&k), tid));
                }
            }
        }
        all.sort();
        assert_clean(idx.verify(None).unwrap());

        let p3 = encode_parts(&[KeyPart::I64(3)]);
        let p3_end = prefix_end(&p3);
        let dup = encode_parts(&key(3, b"dup"));
        let a0 = encode_parts(&key(3, b"a\0"));
        type Case<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);
        let cases: Vec<Case<'_>> = vec![
            (Bound::Unbounded, Bound::Unbounded),
            (Bound::Included(&p3), Bound::Excluded(&p3_end)),
            (Bound::Included(&dup), Bound::Included(&dup)),
            (Bound::Excluded(&dup), Bound::Excluded(&p3_end)),
            (Bound::Included(&p3), Bound::Excluded(&dup)),
            (Bound::Excluded(&a0), Bound::Included(&dup)),
            (Bound::Included(&dup), Bound::Excluded(&dup)),
        ];
        for (lower, upper) in cases {
            let inside = |k: &[u8]| {
                (match lower {
                    Bound::Included(l) => k >= l,
                    Bound::Excluded(l) => k > l,
                    Bound::Unbounded => true,
                }) && (match upper {
                    Bound::Included(u) => k <= u,
                    Bound::Excluded(u) => k < u,
                    Bound::Unbounded => true,
                })
            };
            let want: Vec<(Vec<u8>, Tid)> =
                all.iter().filter(|(k, _)| inside(k)).cloned().collect();
            for batch in [1, 7, 128, 100_000] {
                let fwd = read_all(&idx, lower, upper, Direction::Forward, batch);
                assert_eq!(fwd, want, "forward {lower:?}..{upper:?} by {batch}");
                let mut back = read_all(&idx, lower, upper, Direction::Backward, batch);
                back.reverse();
                assert_eq!(back, want, "backward {lower:?}..{upper:?} by {batch}");
            }
        }
        // A limit: the last entry of a prefix, and the first.
        let mut last = Vec::new();
        let more = idx
            .read_range(
                KeyBounds {
                    lower: Bound::Included(&p3),
                    upper: Bound::Excluded(&p3_end),
                },
                Direction::Backward,
                None,
                1,
                |k, t| last.push((k.to_vec(), t)),
            )
            .unwrap();
        assert!(more);
        let in_p3: Vec<_> = all.iter().filter(|(k, _)| k.starts_with(&p3)).collect();
        assert_eq!(&last[0], *in_p3.last().unwrap());
    });
}

#[test]
fn reading_equal_keys_in_batches_reads_each_leaf_about_once() {
    within(Duration::from_secs(120), || {
        let db = db(256, false);
        let idx = create(&db, KeyType::I64, false);
        let k = btree::Key::I64(42);
        for i in 0..100_000u32 {
            idx.insert(&k, Tid::new(i / 50 + 1, (i % 50) as u16 + 1), &AssumeLive)
                .unwrap();
        }
        let enc = k.encode();
        for dir in [Direction::Forward, Direction::Backward] {
            let before = db.pool.stats();
            let got = read_all(&idx, Bound::Included(&enc), Bound::Included(&enc), dir, 128);
            let hits = db.pool.stats().since(&before).totals().accesses;
            assert_eq!(got.len(), 100_000);
            assert!(got.windows(2).all(|w| match dir {
                Direction::Forward => w[0].1 < w[1].1,
                Direction::Backward => w[0].1 > w[1].1,
            }));
            // 782 batches of 128, each one descent (3 levels) plus the leaves
            // it reads (~400 leaves in all, once or twice each): a quadratic
            // read would visit about 782 * 400 / 2 pages.
            assert!(hits > 200 && hits < 10_000, "{dir:?}: {hits} page accesses");
        }
    });
}
