//! Deduplicated leaves (posting lists) against a model, a
//! `BTreeMap<key, BTreeSet<TID>>`: random inserts of few keys (so runs of
//! equal keys merge, posting lists grow, take TIDs between theirs and split)
//! and vacuums that remove some TIDs of a posting list or all of them, on a
//! 16-buffer pool with a WAL. After every round: lookups return every TID of
//! each key in order, range reads in small batches return every entry in
//! both directions, `verify` with the model as the heap is clean, and the
//! leaves really hold posting lists. At the end the WAL replayed into an
//! empty directory gives the same answers. Also: the sorted build makes
//! posting lists; a unique index never does; an index created without
//! deduplication never does; a damaged posting list is a violation naming
//! its page; a TID with offset 65535 is refused.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::time::Duration;

use btree::page::{Layout, TreePage};
use btree::{AssumeLive, BtreeError, Direction, HeapRow, Index, IndexOptions, Key, KeyType};
use bufmgr::{BufferPool, RelFork};
use common::{REL, assert_clean, create, db, pool_over, read_all, replay, within};
use heap::tuple::Tid;
use proptest::prelude::*;

type Model = BTreeMap<i64, BTreeSet<Tid>>;

/// (leaf items that are posting lists, TIDs they hold, all leaf items).
fn posting_counts(pool: &BufferPool) -> (usize, usize, usize) {
    let rf = RelFork::main(REL);
    let (mut lists, mut tids, mut items) = (0, 0, 0);
    for block in 1..pool.nblocks(rf).unwrap() {
        let page = pool.read_buffer(rf, block, None).unwrap().lock_shared();
        let tp = TreePage::parse(&page, btree::page::PageId { rel: REL, block }).unwrap();
        if !tp.is_leaf() {
            continue;
        }
        for j in 0..tp.data_len() {
            let it = tp.data(j).unwrap();
            items += 1;
            if it.is_posting() {
                lists += 1;
                tids += it.tid_count();
            }
        }
    }
    (lists, tids, items)
}

fn check(index: &Index, model: &Model) {
    let rows: Vec<HeapRow> = model
        .iter()
        .flat_map(|(k, tids)| {
            tids.iter().map(|t| HeapRow {
                key: Some(Key::I64(*k)),
                tid: *t,
                live: true,
            })
        })
        .collect();
    let f = || rows.clone();
    assert_clean(index.verify(Some(&f)).unwrap());
    for k in -1..=(model.keys().max().copied().unwrap_or(0) + 1) {
        let want: Vec<Tid> = model
            .get(&k)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        assert_eq!(index.lookup(&Key::I64(k)).unwrap(), want, "lookup of {k}");
        // A lookup stopped early hands out a prefix.
        let mut firsts = Vec::new();
        index
            .lookup_each(&Key::I64(k), |t| {
                firsts.push(t);
                firsts.len() < 3
            })
            .unwrap();
        assert_eq!(firsts, want[..want.len().min(3)]);
    }
    let want: Vec<(Vec<u8>, Tid)> = model
        .iter()
        .flat_map(|(k, tids)| tids.iter().map(|t| (Key::I64(*k).encode(), *t)))
        .collect();
    let scanned: Vec<(Vec<u8>, Tid)> = index
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.map(|(k, t)| (k.encode(), t)).unwrap())
        .collect();
    assert_eq!(scanned, want, "forward scan");
    for batch in [3, 100] {
        assert_eq!(
            read_all(index, Direction::Forward, batch),
            want,
            "forward read in batches of {batch}"
        );
        let mut back = read_all(index, Direction::Backward, batch);
        back.reverse();
        assert_eq!(back, want, "backward read in batches of {batch}");
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// Insert this many random (key, TID) entries.
    Insert(u16),
    /// Vacuum: every TID whose block is `r` modulo `m` is dead.
    Vacuum(u32, u32),
}

/// A first insert of enough entries to fill a leaf (so that a dedup pass
/// runs and posting lists are made whatever follows), then random steps.
fn ops() -> impl Strategy<Value = Vec<Op>> {
    (
        (1500u16..3000).prop_map(Op::Insert),
        prop::collection::vec(
            prop_oneof![
                3 => (300u16..1500).prop_map(Op::Insert),
                1 => (2u32..6, 0u32..6).prop_map(|(m, r)| Op::Vacuum(m, r % m)),
            ],
            3..8,
        ),
    )
        .prop_map(|(first, rest)| std::iter::once(first).chain(rest).collect())
}

fn run(keys: i64, ops: &[Op], seed: u64) {
    use rand::rngs::SmallRng;
    use rand::{RngExt, SeedableRng};
    let mut rng = SmallRng::seed_from_u64(seed);
    let db = db(16, true);
    let index = create(&db, KeyType::I64, false);
    assert!(index.deduplicates());
    let mut model = Model::new();
    let mut used = std::collections::HashSet::new();
    let mut most_lists = 0;
    for op in ops {
        match *op {
            Op::Insert(n) => {
                for _ in 0..n {
                    let k = rng.random_range(0..keys);
                    let t = Tid::new(rng.random_range(0..3000), rng.random_range(1..300));
                    // A heap row has one key: a TID is used once.
                    if !used.insert(t) {
                        continue;
                    }
                    index.insert(&Key::I64(k), t, &AssumeLive).unwrap();
                    model.entry(k).or_default().insert(t);
                }
            }
            Op::Vacuum(m, r) => {
                let dead = |t: Tid| t.block % m == r;
                let before: usize = model.values().map(BTreeSet::len).sum();
                let stats = index.vacuum(dead).unwrap();
                for tids in model.values_mut() {
                    tids.retain(|t| !dead(*t));
                }
                model.retain(|_, s| !s.is_empty());
                let after: usize = model.values().map(BTreeSet::len).sum();
                assert_eq!(stats.removed as usize, before - after);
                assert_eq!(stats.remaining as usize, after);
            }
        }
        check(&index, &model);
        most_lists = most_lists.max(posting_counts(&db.pool).0);
    }
    assert!(most_lists > 0, "no posting list was ever made");
    // Replay into an empty directory: the same answers.
    let wal = db.wal.as_ref().unwrap();
    wal.flush(wal.insert_lsn()).unwrap();
    let copy = tempfile::tempdir().unwrap();
    let pool = pool_over(copy.path(), 64, None);
    replay(db.dir.path(), &pool);
    let replayed = Index::open(pool, None, "test_idx", REL).unwrap();
    check(&replayed, &model);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    #[test]
    fn random_inserts_and_vacuums_of_few_keys_match_the_model(ops in ops(), keys in 1i64..40, seed in any::<u64>()) {
        within(Duration::from_secs(300), move || run(keys, &ops, seed));
    }
}

#[test]
fn one_key_with_thousands_of_tids_inserted_in_random_order_matches_the_model() {
    within(Duration::from_secs(300), || {
        run(
            1,
            &[Op::Insert(3000), Op::Vacuum(3, 1), Op::Insert(1000)],
            7,
        );
    });
}

#[test]
fn the_sorted_build_makes_posting_lists_and_later_inserts_and_vacuum_keep_them_right() {
    within(Duration::from_secs(300), || {
        let db = db(64, true);
        let index = create(&db, KeyType::I64, false);
        let mut model = Model::new();
        for i in 0..20_000u32 {
            // 10 rows per key, TIDs 100 blocks apart, as a table of 100
            // rows a page whose column repeats every 2000 rows.
            let k = i64::from(i % 2000);
            model
                .entry(k)
                .or_default()
                .insert(Tid::new(i / 100, (i % 100) as u16 + 1));
        }
        let entries: Vec<(Key, Tid)> = model
            .iter()
            .flat_map(|(k, s)| s.iter().map(|t| (Key::I64(*k), *t)))
            .collect();
        index.build_sorted(entries).unwrap();
        // Each leaf fills with plain entries, then is deduplicated and goes
        // on with posting lists: a run cut there is two items.
        let (lists, tids, items) = posting_counts(&db.pool);
        assert!(
            lists >= 2000 && tids > 19_900 && items < 2100,
            "{lists} posting lists of {tids} TIDs in {items} items"
        );
        check(&index, &model);
        for i in 0..3000u32 {
            let k = i64::from(i * 7 % 2100);
            let t = Tid::new(1000 + i * 13 % 250, (i % 120) as u16 + 1);
            index.insert(&Key::I64(k), t, &AssumeLive).unwrap();
            model.entry(k).or_default().insert(t);
        }
        check(&index, &model);
        let dead = |t: Tid| t.offset.is_multiple_of(3);
        index.vacuum(dead).unwrap();
        for s in model.values_mut() {
            s.retain(|t| !dead(*t));
        }
        model.retain(|_, s| !s.is_empty());
        check(&index, &model);
    });
}

fn create_with(db: &common::Db, unique: bool, dedup: bool) -> Index {
    Index::create_in_format(
        db.pool.clone(),
        db.wal.clone(),
        IndexOptions {
            name: "test_idx".into(),
            rel: REL,
            key_type: KeyType::I64,
            unique,
        },
        Layout::Compact,
        dedup,
    )
    .unwrap()
}

#[test]
fn a_unique_index_and_an_index_without_deduplication_never_make_posting_lists() {
    within(Duration::from_secs(120), || {
        for unique in [true, false] {
            let db = db(64, false);
            let index = create_with(&db, unique, unique);
            assert!(!index.deduplicates());
            // Every earlier entry of a key is dead, so a unique index takes
            // the duplicates too.
            let dead = |_t: Tid| btree::Liveness::Dead;
            for i in 0..5000u32 {
                let t = Tid::new(i, 1);
                index
                    .insert(&Key::I64(i64::from(i % 10)), t, &dead)
                    .unwrap();
            }
            let (lists, _, items) = posting_counts(&db.pool);
            assert_eq!((lists, items), (0, 5000), "unique {unique}");
            assert_eq!(index.lookup(&Key::I64(3)).unwrap().len(), 500);
        }
    });
}

#[test]
fn ten_rows_per_key_take_at_most_half_the_leaves_with_posting_lists() {
    within(Duration::from_secs(300), || {
        let entries: Vec<(Key, Tid)> = (0..50_000u32)
            .map(|i| (i64::from(i % 5000), Tid::new(i / 100, (i % 100) as u16 + 1)))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|(k, t)| (Key::I64(k), t))
            .collect();
        let mut pages = Vec::new();
        for dedup in [true, false] {
            let built = db(512, false);
            create_with(&built, false, dedup)
                .build_sorted(entries.iter().cloned())
                .unwrap();
            let inserted = db(512, false);
            let index = create_with(&inserted, false, dedup);
            // The table's order: keys repeat every 5000 rows.
            for i in 0..50_000u32 {
                let t = Tid::new(i / 100, (i % 100) as u16 + 1);
                index
                    .insert(&Key::I64(i64::from(i % 5000)), t, &AssumeLive)
                    .unwrap();
            }
            let rf = RelFork::main(REL);
            pages.push((
                built.pool.nblocks(rf).unwrap(),
                inserted.pool.nblocks(rf).unwrap(),
            ));
        }
        let [(built_d, ins_d), (built_n, ins_n)] = pages[..] else {
            unreachable!()
        };
        assert!(2 * built_d <= built_n, "sorted build: {pages:?}");
        assert!(2 * ins_d <= ins_n, "inserts: {pages:?}");
    });
}

#[test]
fn a_damaged_posting_list_is_a_violation_naming_its_page() {
    within(Duration::from_secs(120), || {
        let db = db(64, false);
        let index = create(&db, KeyType::I64, false);
        let entries = (0..20_000u32).map(|i| (Key::I64(i64::from(i / 10)), Tid::new(i, 1)));
        index.build_sorted(entries).unwrap();
        assert_clean(index.verify(None).unwrap());
        let rf = RelFork::main(REL);
        let block = 1;
        {
            let mut page = db
                .pool
                .read_buffer(rf, block, None)
                .unwrap()
                .lock_exclusive();
            let (off, len) = {
                let tp = TreePage::parse(&page, btree::page::PageId { rel: REL, block }).unwrap();
                let it = tp.data(4).unwrap();
                assert!(it.is_posting());
                let off = it.raw.as_ptr() as usize - page.as_ptr() as usize;
                (off, it.raw.len())
            };
            // The item's stored count says one TID more than its stream holds.
            let count_at = off + len - 4;
            page[count_at] += 1;
            page.mark_dirty();
        }
        let v = index.verify(None).unwrap();
        assert!(
            v.iter()
                .any(|v| v.block == Some(block) && v.to_string().contains("posting list")),
            "{v:?}"
        );
        let err = index.lookup(&Key::I64(4)).unwrap_err().to_string();
        assert!(
            err.contains(&format!("relation {} block {block}", REL.0)) && err.contains("posting"),
            "{err}"
        );
    });
}

#[test]
fn a_tid_with_offset_65535_is_refused_by_an_index_with_posting_lists() {
    let db = db(16, false);
    let index = create(&db, KeyType::I64, false);
    let bad = Tid::new(3, u16::MAX);
    let err = index.insert(&Key::I64(1), bad, &AssumeLive).unwrap_err();
    assert!(matches!(err, BtreeError::BadTid { .. }), "{err}");
    assert!(err.to_string().contains("65535"), "{err}");
    let err = index
        .build_sorted([(Key::I64(1), Tid::new(1, 1)), (Key::I64(1), bad)])
        .unwrap_err();
    assert!(matches!(err, BtreeError::BadTid { .. }), "{err}");
    assert!(index.lookup(&Key::I64(1)).unwrap().is_empty());
}
