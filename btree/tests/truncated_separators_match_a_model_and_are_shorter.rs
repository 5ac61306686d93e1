//! Suffix truncation of separators: leaf splits and the sorted build give
//! each leaf the shortest high key (and its parent the shortest pivot)
//! that separates the leaf's last entry from its right sibling's first.
//!
//! For text keys of varied lengths with long common prefixes (prefixes of
//! one another included), tuple keys, `i64` keys and text keys with many
//! duplicates, with and without posting lists, on a 16-buffer pool: after
//! every round of random inserts, lookups (present and absent keys),
//! batched range reads of everything in both directions and of random
//! bounded ranges equal a model; `verify` with the heap rows is clean; and
//! the separators are checked on their bytes: no high key could lose its
//! last byte and still separate (it is the shortest), equal-key splits keep
//! the whole key, `FIXED` leaves keep full-width keys, and most text
//! separators are shorter than the keys. After a sorted build every leaf's
//! high key is exactly the separator computed here from its neighbours.
//!
//! And `verify` reports a separator damaged into one that no longer
//! separates (a high key cut one byte too short, a pivot cut the same way).

mod common;

use std::collections::BTreeSet;
use std::ops::Bound;
use std::time::Duration;

use btree::key::TID_MIN;
use btree::page::{self, Header, Layout, PageId, TreePage};
use btree::{
    AssumeLive, ColumnKind, Direction, Index, IndexOptions, Key, KeyPart, KeyType, TupleType,
};
use bufmgr::{BufferTag, RelFork};
use common::{Db, Model, REL, assert_clean, db, entries, read_all, read_bounds, rows, within};
use heap::tuple::Tid;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

#[derive(Copy, Clone, Debug, PartialEq)]
enum Gen {
    /// Text of 0 to 40 bytes from a 3-letter alphabet after one of three
    /// long prefixes: neighbours share long prefixes, and many keys are
    /// prefixes of others.
    Text,
    /// (text as above, small i64, short bytes).
    Tuple,
    /// 1500 distinct `i64` values: runs of equal keys.
    I64Dups,
    /// 600 distinct long text keys: runs of equal keys split in the middle.
    TextDups,
}

const PREFIXES: [&str; 3] = [
    "customer-0000000",
    "https://shop.example.com/catalog/products/",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
];

fn text(rng: &mut SmallRng) -> String {
    let mut s = PREFIXES[rng.random_range(0..PREFIXES.len())].to_string();
    for _ in 0..rng.random_range(0..=40) {
        s.push(['a', 'b', '0'][rng.random_range(0..3)]);
    }
    s
}

impl Gen {
    fn key_type(self) -> KeyType {
        match self {
            Gen::Text | Gen::TextDups => KeyType::Bytes,
            Gen::I64Dups => KeyType::I64,
            Gen::Tuple => KeyType::Tuple(
                TupleType::new(&[ColumnKind::Text, ColumnKind::I64, ColumnKind::Bytes]).unwrap(),
            ),
        }
    }

    fn key(self, rng: &mut SmallRng) -> Key {
        match self {
            Gen::Text => Key::Bytes(text(rng).into_bytes()),
            Gen::Tuple => Key::Tuple(vec![
                KeyPart::Text(text(rng)),
                KeyPart::I64(rng.random_range(-3..3)),
                KeyPart::Bytes(vec![rng.random_range(0..3u8); rng.random_range(0..4)]),
            ]),
            Gen::I64Dups => Key::I64(rng.random_range(-750..750) * 1_000_003),
            Gen::TextDups => {
                Key::Bytes(format!("{}{:03}", PREFIXES[1], rng.random_range(0..600)).into_bytes())
            }
        }
    }
}

fn create(db: &Db, key_type: KeyType, dedup: bool) -> Index {
    Index::create_in_format(
        db.pool.clone(),
        None,
        IndexOptions {
            name: "test_idx".into(),
            rel: REL,
            key_type,
            unique: false,
        },
        Layout::Compact,
        dedup,
    )
    .unwrap()
}

/// Every read agrees with the model; `verify` is clean.
fn check_reads(index: &Index, model: &Model, rng: &mut SmallRng, keys: Gen) {
    let want = entries(model);
    for (k, (_, ts)) in model.iter().step_by(7) {
        let mut got = Vec::new();
        index
            .lookup_encoded_each(k, |t| {
                got.push(t);
                true
            })
            .unwrap();
        assert_eq!(got, ts.iter().copied().collect::<Vec<_>>(), "lookup {k:?}");
    }
    for _ in 0..30 {
        let k = keys.key(rng).encode();
        let mut n = 0;
        index
            .lookup_encoded_each(&k, |_| {
                n += 1;
                true
            })
            .unwrap();
        assert_eq!(n, model.get(&k).map_or(0, |(_, ts)| ts.len()), "{k:?}");
    }
    let batch = rng.random_range(1..60);
    assert!(read_all(index, Direction::Forward, batch) == want);
    let mut back = read_all(index, Direction::Backward, batch);
    back.reverse();
    assert!(back == want);
    for _ in 0..20 {
        let (a, b) = (keys.key(rng).encode(), keys.key(rng).encode());
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let lower = if rng.random_bool(0.5) {
            Bound::Included(lo.as_slice())
        } else {
            Bound::Excluded(lo.as_slice())
        };
        let upper = if rng.random_bool(0.5) {
            Bound::Included(hi.as_slice())
        } else {
            Bound::Excluded(hi.as_slice())
        };
        let expect: Vec<(Vec<u8>, Tid)> = want
            .iter()
            .filter(|(k, _)| within_bounds(k, lower, upper))
            .cloned()
            .collect();
        for dir in [Direction::Forward, Direction::Backward] {
            let got = read_bounds(index, lower, upper, dir);
            assert!(got == expect, "range {lower:?}..{upper:?} {dir:?}");
        }
    }
    assert_clean(index.verify(Some(&|| rows(model))).unwrap());
}

fn within_bounds(k: &[u8], lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
    let above = match lower {
        Bound::Included(l) => k >= l,
        Bound::Excluded(l) => k > l,
        Bound::Unbounded => true,
    };
    let below = match upper {
        Bound::Included(u) => k <= u,
        Bound::Excluded(u) => k < u,
        Bound::Unbounded => true,
    };
    above && below
}

/// One leaf with a high key: its last entry (key, last TID), its high key,
/// whether it is `FIXED`, and its right sibling's first entry.
struct Boundary {
    last: (Vec<u8>, Tid),
    high: (Vec<u8>, Tid),
    fixed: bool,
    next_first: (Vec<u8>, Tid),
}

fn boundaries(db: &Db) -> Vec<Boundary> {
    let rf = RelFork::main(REL);
    let read = |block| {
        db.pool
            .read_buffer(rf, block, None)
            .unwrap()
            .lock_shared()
            .to_vec()
    };
    let mut out = Vec::new();
    for block in 1..db.pool.nblocks(rf).unwrap() {
        let bytes = read(block);
        let id = PageId { rel: REL, block };
        let tp = TreePage::parse(&bytes, id).unwrap();
        let Some(hk) = tp.high_key().unwrap() else {
            continue;
        };
        if !tp.is_leaf() || tp.data_len() == 0 {
            continue;
        }
        let last = tp.data(tp.data_len() - 1).unwrap();
        let right = read(tp.right);
        let rtp = TreePage::parse(
            &right,
            PageId {
                rel: REL,
                block: tp.right,
            },
        )
        .unwrap();
        if rtp.data_len() == 0 {
            continue;
        }
        let first = rtp.data(0).unwrap();
        out.push(Boundary {
            last: (last.key.to_vec(), last.last),
            high: (hk.key.to_vec(), hk.tid),
            fixed: tp.is_fixed(),
            next_first: (first.key.to_vec(), first.tid),
        });
    }
    out
}

/// The shortest separator between `l` and `r`, computed here on its own.
fn expected_separator(l: &(Vec<u8>, Tid), r: &(Vec<u8>, Tid), full: bool) -> (Vec<u8>, Tid) {
    if l.0 == r.0 {
        return r.clone();
    }
    if full {
        return (r.0.clone(), TID_MIN);
    }
    let mut n = 0;
    while n < l.0.len() && l.0[n] == r.0[n] {
        n += 1;
    }
    (r.0[..=n].to_vec(), TID_MIN)
}

/// After inserts only (nothing removed), every leaf's high key is the
/// shortest separator it was made as: one byte less would not be above the
/// leaf's last entry (entries inserted since only raise it); a split within
/// a run of equal keys keeps the whole key and a real TID; a `FIXED` leaf
/// keeps an 8-byte key (so may an `i64` leaf that was `FIXED` when it
/// split). Returns the bytes of all leaf high keys and how many there are.
fn check_shortest(db: &Db, i64_keys: bool) -> (usize, usize) {
    let bs = boundaries(db);
    let mut high_key_bytes = 0;
    for b in &bs {
        let (hk, tid) = &b.high;
        assert!(b.high > b.last, "high key not above the last entry");
        assert!(
            b.high <= b.next_first,
            "high key above the right's first entry"
        );
        if *tid != TID_MIN {
            assert_eq!(
                *hk, b.last.0,
                "a real TID in a separator between different keys"
            );
        } else if b.fixed || (i64_keys && hk.len() == 8) {
            // Full width: a FIXED leaf, or one that was FIXED when it
            // split (a dedup pass has since given it posting lists).
            assert_eq!(hk.len(), 8, "a FIXED leaf's high key is full width");
        } else {
            assert!(!hk.is_empty());
            assert!(
                hk[..hk.len() - 1] <= b.last.0[..],
                "high key {hk:?} is longer than needed above {:?}",
                b.last.0
            );
        }
        high_key_bytes += hk.len();
    }
    (high_key_bytes, bs.len())
}

fn random_inserts(keys: Gen, dedup: bool, seed: u64) {
    within(Duration::from_secs(120), move || {
        let mut rng = SmallRng::seed_from_u64(seed);
        let db = db(16, false);
        let index = create(&db, keys.key_type(), dedup);
        let mut model = Model::new();
        let mut next = 0u32;
        for round in 0..4 {
            for _ in 0..3000 {
                let k = keys.key(&mut rng);
                // All TIDs distinct, in a scrambled order.
                let n = next * 7919 % 1_000_003;
                let tid = Tid::new(1 + n / 100, 1 + (n % 100) as u16);
                next += 1;
                index.insert(&k, tid, &AssumeLive).unwrap();
                model
                    .entry(k.encode())
                    .or_insert_with(|| (k.clone(), BTreeSet::new()))
                    .1
                    .insert(tid);
            }
            check_reads(&index, &model, &mut rng, keys);
            let (high_key_bytes, all) = check_shortest(&db, keys == Gen::I64Dups);
            assert!(round < 3 || all > 10, "{keys:?}: only {all} leaves split");
            if (keys == Gen::Text || keys == Gen::Tuple) && all > 0 {
                // Separators are truncated: on average shorter than the
                // keys (each one was checked above to be the shortest at
                // its split point). Not compared with the keys beside
                // them: the split choice prefers points where the right
                // key itself is short.
                let key_bytes: usize = model.keys().map(Vec::len).sum();
                assert!(
                    high_key_bytes * model.len() < key_bytes * all,
                    "{keys:?}: {all} high keys of {high_key_bytes} bytes, keys of {} bytes on average",
                    key_bytes / model.len()
                );
            }
        }
        // Remove a third of the entries: reads stay right.
        let dead = |t: Tid| t.block.is_multiple_of(3);
        index.vacuum(dead).unwrap();
        for (_, ts) in model.values_mut() {
            ts.retain(|t| !dead(*t));
        }
        model.retain(|_, (_, ts)| !ts.is_empty());
        check_reads(&index, &model, &mut rng, keys);
    });
}

#[test]
fn random_text_keys_with_long_common_prefixes() {
    random_inserts(Gen::Text, true, 1);
    random_inserts(Gen::Text, false, 2);
}

#[test]
fn random_tuple_keys() {
    random_inserts(Gen::Tuple, true, 3);
    random_inserts(Gen::Tuple, false, 4);
}

#[test]
fn random_i64_keys_with_many_duplicates() {
    random_inserts(Gen::I64Dups, true, 5);
    random_inserts(Gen::I64Dups, false, 6);
}

#[test]
fn random_text_keys_with_many_duplicates() {
    random_inserts(Gen::TextDups, true, 7);
    random_inserts(Gen::TextDups, false, 8);
}

/// A sorted build of the model's entries: reads equal the model, and each
/// leaf's high key is exactly [`expected_separator`] of its neighbours.
fn sorted_build(keys: Gen, dedup: bool, seed: u64) -> (Db, Index, Model) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let db = db(16, false);
    let index = create(&db, keys.key_type(), dedup);
    let mut model = Model::new();
    for i in 0..20_000u32 {
        let k = keys.key(&mut rng);
        model
            .entry(k.encode())
            .or_insert_with(|| (k.clone(), BTreeSet::new()))
            .1
            .insert(Tid::new(1 + i / 100, 1 + (i % 100) as u16));
    }
    let sorted: Vec<(Key, Tid)> = model
        .values()
        .flat_map(|(k, ts)| ts.iter().map(move |t| (k.clone(), *t)))
        .collect();
    index.build_sorted(sorted).unwrap();
    check_reads(&index, &model, &mut rng, keys);
    let bs = boundaries(&db);
    assert!(bs.len() > 5, "{keys:?}: {} leaves", bs.len() + 1);
    for b in &bs {
        assert_eq!(
            b.high,
            expected_separator(&b.last, &b.next_first, b.fixed),
            "{keys:?}"
        );
    }
    (db, index, model)
}

#[test]
fn sorted_builds_make_exactly_the_shortest_separators() {
    within(Duration::from_secs(120), || {
        for (i, keys) in [Gen::Text, Gen::Tuple, Gen::I64Dups, Gen::TextDups]
            .into_iter()
            .enumerate()
        {
            sorted_build(keys, true, 10 + i as u64);
            sorted_build(keys, false, 20 + i as u64);
        }
    });
}

/// Rewrite block `block` with item `i` (0: the high key) replaced by the
/// same item with its key cut to `keep` bytes, behind the pool's back.
fn cut_item(db: &Db, block: u32, i: usize, keep: usize) {
    let rf = RelFork::main(REL);
    let bytes = db
        .pool
        .read_buffer(rf, block, None)
        .unwrap()
        .lock_shared()
        .to_vec();
    let id = PageId { rel: REL, block };
    let tp = TreePage::parse(&bytes, id).unwrap();
    let mut items = tp.all_items().unwrap();
    let it = tp.item(i).unwrap();
    items[i] = page::encode_item(
        tp.layout(),
        &it.key[..keep],
        it.tid,
        (!tp.is_leaf()).then_some(it.child),
        false,
    );
    let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
    let mut damaged = bytes.clone();
    page::build_page(
        &mut damaged,
        Header {
            flags: tp.flags,
            level: tp.level,
            right: tp.right,
            layout: tp.layout(),
        },
        &refs,
    );
    db.pool.flush_all(true).unwrap();
    db.pool.evict_all().unwrap();
    bufmgr::page::set_checksum(&mut damaged, block);
    db.pool
        .storage()
        .write(BufferTag::new(rf, block), &damaged)
        .unwrap();
}

#[test]
fn verify_reports_a_separator_cut_too_short() {
    within(Duration::from_secs(60), || {
        // A leaf's high key one byte shorter than the shortest separator:
        // no longer above the leaf's last entry.
        let (db, index, _) = sorted_build(Gen::Text, false, 30);
        let rf = RelFork::main(REL);
        let mut leaf = None;
        for block in 1..db.pool.nblocks(rf).unwrap() {
            let p = db.pool.read_buffer(rf, block, None).unwrap().lock_shared();
            let tp = TreePage::parse(&p, PageId { rel: REL, block }).unwrap();
            if let Some(hk) = tp.high_key().unwrap()
                && tp.is_leaf()
                && hk.tid == TID_MIN
                && hk.key.len() > 1
            {
                leaf = Some((block, hk.key.len()));
                break;
            }
        }
        let (block, len) = leaf.expect("a leaf with a truncated high key");
        assert_clean(index.verify(None).unwrap());
        cut_item(&db, block, 0, len - 1);
        let v = index.verify(None).unwrap();
        assert!(
            v.iter()
                .any(|v| v.block == Some(block) && v.what.contains("not below the high key")),
            "{v:?}"
        );

        // A pivot one byte shorter than the shortest separator: the
        // child's lower bound no longer equals it, and the left child's
        // last entries lie at or above it.
        let (db, index, _) = sorted_build(Gen::Text, false, 31);
        let mut pivot = None;
        for block in 1..db.pool.nblocks(rf).unwrap() {
            let p = db.pool.read_buffer(rf, block, None).unwrap().lock_shared();
            let tp = TreePage::parse(&p, PageId { rel: REL, block }).unwrap();
            if tp.is_leaf() || tp.data_len() < 2 {
                continue;
            }
            let it = tp.data(1).unwrap();
            if it.key.len() > 1 {
                pivot = Some((block, usize::from(tp.has_high_key()) + 1, it.key.len()));
                break;
            }
        }
        let (block, i, len) = pivot.expect("an internal page with two pivots");
        cut_item(&db, block, i, len - 1);
        let v = index.verify(None).unwrap();
        assert!(
            v.iter().any(|v| v
                .what
                .contains("bounds disagree with the parent's separators")),
            "{v:?}"
        );
    });
}

/// A leaf split takes, among the few best-balanced points, the one with
/// the shortest separator: a page of two groups of keys sharing 41 bytes
/// within a group ("A" and "B" then 40 x's), the group boundary two items
/// off the middle, splits at the boundary with the one-byte separator "B"
/// rather than in the middle of group A with a 42-byte one. The halves
/// differ by a few items only.
#[test]
fn a_leaf_split_moves_off_the_middle_to_a_one_byte_separator() {
    within(Duration::from_secs(60), || {
        let db = db(16, false);
        let index = create(&db, KeyType::Bytes, false);
        let key = |group: u8, i: u32| {
            let mut k = vec![group];
            k.extend_from_slice(&[b'x'; 40]);
            k.extend_from_slice(format!("{i:05}").as_bytes());
            Key::Bytes(k)
        };
        // Four more A's than B's, then one of each in turn: when the
        // root leaf splits the boundary sits two items above the middle.
        // Descending within each group, so that the insert that splits
        // the page is not an append at its end (which splits by the
        // rightmost fillfactor instead).
        let order = (0..4)
            .map(|i| key(b'A', 99_999 - i))
            .chain((0..).flat_map(|j| [key(b'A', 99_995 - j), key(b'B', 99_999 - j)]));
        let rf = RelFork::main(REL);
        let mut model = Model::new();
        for (n, k) in order.enumerate() {
            let tid = Tid::new(1 + n as u32 / 100, 1 + (n % 100) as u16);
            index.insert(&k, tid, &AssumeLive).unwrap();
            model
                .entry(k.encode())
                .or_insert_with(|| (k.clone(), BTreeSet::new()))
                .1
                .insert(tid);
            if db.pool.nblocks(rf).unwrap() > 2 {
                break;
            }
        }
        let bs = boundaries(&db);
        assert_eq!(bs.len(), 1, "one split of the root leaf");
        assert_eq!(
            bs[0].high,
            (b"B".to_vec(), TID_MIN),
            "the split is at the group boundary with a one-byte separator"
        );
        assert_eq!(bs[0].last.0[0], b'A');
        assert_eq!(bs[0].next_first.0[0], b'B');
        let mut rng = SmallRng::seed_from_u64(5);
        check_reads(&index, &model, &mut rng, Gen::Text);
    });
}
