//! `build_sorted`: a bottom-up build from sorted entries gives a tree that
//! answers like one built by inserting the same entries one by one (lookups,
//! range scans, `verify` with the heap rows), that takes inserts and vacuum
//! afterwards, that refuses unsorted input and unique duplicates (leaving an
//! empty, usable index), and that the WAL rebuilds after a crash; a crash
//! before the build's last record leaves an empty index.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use btree::{
    AssumeLive, BtreeError, ColumnKind, HeapRow, Index, IndexOptions, Key, KeyPart, KeyType,
    MAX_KEY_SIZE, TupleType, record,
};
use bufmgr::{BufferPool, RelFork, RelId};
use common::{Db, REL, assert_clean, create, db, pool_over, replay, within};
use heap::tuple::Tid;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use wal::{Lsn, MIN_SEGMENT_SIZE, RmgrKind, WalReader};

fn all(index: &Index) -> Vec<(Key, Tid)> {
    index
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn range(index: &Index, lo: &Key, hi: &Key) -> Vec<(Key, Tid)> {
    index
        .scan(Bound::Included(lo), Bound::Excluded(hi))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn rows(entries: &[(Key, Tid)]) -> Vec<HeapRow> {
    entries
        .iter()
        .map(|(k, t)| HeapRow {
            key: Some(k.clone()),
            tid: *t,
            live: true,
        })
        .collect()
}

fn index_on(pool: &Arc<BufferPool>, db: &Db, rel: u32, key_type: KeyType) -> Index {
    Index::create(
        pool.clone(),
        db.wal.clone(),
        IndexOptions {
            name: format!("idx_{rel}"),
            rel: RelId(rel),
            key_type,
            unique: false,
        },
    )
    .unwrap()
}

/// `n` random entries (with duplicate keys), sorted.
fn random_entries(rng: &mut SmallRng, n: u32, key_type: KeyType) -> Vec<(Key, Tid)> {
    let mut v: Vec<(Key, Tid)> = (0..n)
        .map(|i| {
            let k = match key_type {
                KeyType::I64 => Key::I64(rng.random_range(-50_000..50_000)),
                KeyType::Bytes => {
                    let len = rng.random_range(0..300);
                    let c = rng.random_range(b'a'..=b'e');
                    Key::Bytes(vec![c; len])
                }
                KeyType::Tuple(_) => {
                    let len = rng.random_range(0..20);
                    Key::Tuple(vec![
                        KeyPart::I64(rng.random_range(-5..5)),
                        KeyPart::Bytes(vec![rng.random_range(0..2u8); len]),
                        KeyPart::I64(rng.random_range(0..3)),
                    ])
                }
            };
            (k, Tid::new(i / 50 + 1, (i % 50) as u16 + 1))
        })
        .collect();
    v.sort();
    v
}

fn same_answers(built: &Index, inserted: &Index, entries: &[(Key, Tid)], rng: &mut SmallRng) {
    assert!(all(built) == all(inserted), "full scans differ");
    assert!(all(built) == entries, "the built index holds other entries");
    for _ in 0..300 {
        let k = &entries[rng.random_range(0..entries.len())].0;
        assert_eq!(built.lookup(k).unwrap(), inserted.lookup(k).unwrap(), "{k}");
        let k2 = &entries[rng.random_range(0..entries.len())].0;
        let (lo, hi) = if k <= k2 { (k, k2) } else { (k2, k) };
        assert!(range(built, lo, hi) == range(inserted, lo, hi));
    }
}

fn check_equal_to_inserts(key_type: KeyType, n: u32, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    // A pool holding both indexes, so that residency counts every page.
    let db = db(2048, false);
    let entries = random_entries(&mut rng, n, key_type);
    let built = index_on(&db.pool, &db, 41, key_type);
    let stats = built.build_sorted(entries.iter().cloned()).unwrap();
    assert_eq!(stats.entries, u64::from(n));
    let inserted = index_on(&db.pool, &db, 42, key_type);
    let mut shuffled = entries.clone();
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.random_range(0..=i));
    }
    for (k, t) in &shuffled {
        inserted.insert(k, *t, &AssumeLive).unwrap();
    }
    let heap = rows(&entries);
    assert_clean(built.verify(Some(&|| heap.clone())).unwrap());
    assert_clean(inserted.verify(Some(&|| heap.clone())).unwrap());
    same_answers(&built, &inserted, &entries, &mut rng);
    // Every block is part of the tree, and leaves are fuller than after
    // random inserts.
    let blocks = u64::from(db.pool.nblocks(RelFork::main(RelId(41))).unwrap());
    assert_eq!(blocks, 1 + stats.leaf_pages + stats.internal_pages);
    let inserted_blocks = u64::from(db.pool.nblocks(RelFork::main(RelId(42))).unwrap());
    assert!(
        blocks * 10 < inserted_blocks * 9,
        "built {blocks} pages, inserted {inserted_blocks}"
    );
    let (b, i) = (built.residency().unwrap(), inserted.residency().unwrap());
    assert!(b.levels.len() <= i.levels.len(), "{b:?} vs {i:?}");
    assert_eq!(b.levels.len() as u32, stats.root_level + 1);
    assert_eq!(b.levels[&0] as u64, stats.leaf_pages);
}

#[test]
fn build_sorted_of_random_i64_keys_equals_inserting_them_one_by_one() {
    within(Duration::from_secs(120), || {
        check_equal_to_inserts(KeyType::I64, 60_000, 1)
    });
}

#[test]
fn a_sorted_build_packs_at_least_500_i64_entries_per_leaf() {
    within(Duration::from_secs(120), || {
        // 14 bytes per entry on a FIXED leaf (no item pointers): about 524
        // fit the 90% of a leaf a build fills (18 bytes with a pointer fit
        // about 408, the headed layout's 22 about 334).
        let db = db(1024, false);
        let index = index_on(&db.pool, &db, 43, KeyType::I64);
        let n = 100_000u32;
        let entries = (0..n).map(|i| {
            (
                Key::I64(i64::from(i) * 3 - 150_000),
                Tid::new(i / 50 + 1, (i % 50) as u16 + 1),
            )
        });
        let stats = index.build_sorted(entries).unwrap();
        assert_eq!(stats.entries, u64::from(n));
        assert!(
            stats.leaf_pages * 500 <= u64::from(n),
            "{} leaves for {n} entries",
            stats.leaf_pages
        );
        assert_eq!(index.lookup(&Key::I64(-150_000)).unwrap(), [Tid::new(1, 1)]);
        assert_eq!(index.lookup(&Key::I64(-149_999)).unwrap(), []);
        assert_clean(index.verify(None).unwrap());
    });
}

#[test]
fn build_sorted_of_random_byte_keys_equals_inserting_them_one_by_one() {
    within(Duration::from_secs(120), || {
        check_equal_to_inserts(KeyType::Bytes, 8_000, 2)
    });
}

#[test]
fn build_sorted_of_random_tuple_keys_equals_inserting_them_one_by_one() {
    within(Duration::from_secs(120), || {
        let t = TupleType::new(&[ColumnKind::I64, ColumnKind::Bytes, ColumnKind::I64]).unwrap();
        check_equal_to_inserts(KeyType::Tuple(t), 8_000, 3)
    });
}

#[test]
fn tiny_and_maximal_builds() {
    within(Duration::from_secs(60), || {
        let db = db(16, false);
        // Nothing: the index stays as created.
        let idx = index_on(&db.pool, &db, 41, KeyType::I64);
        assert_eq!(
            idx.build_sorted(std::iter::empty()).unwrap(),
            btree::BuildStats::default()
        );
        assert_clean(idx.verify(None).unwrap());
        // One entry: the root stays a leaf, and a second build is refused.
        idx.build_sorted([(Key::I64(5), Tid::new(1, 1))]).unwrap();
        assert_eq!(idx.lookup(&Key::I64(5)).unwrap(), [Tid::new(1, 1)]);
        assert_clean(idx.verify(None).unwrap());
        let again = idx.build_sorted([(Key::I64(6), Tid::new(1, 2))]);
        assert!(
            matches!(&again, Err(BtreeError::BadOptions { detail, .. }) if detail.contains("empty")),
            "{again:?}"
        );
        // Keys of the maximal size: at most three items a page, a deep tree.
        // They differ only in their last bytes, so the truncated separators
        // are as long as the keys.
        let maximal = |i: u32, last: u8| {
            let mut k = vec![b'x'; MAX_KEY_SIZE - 6];
            k.extend_from_slice(format!("{i:05}").as_bytes());
            k.push(last);
            Key::Bytes(k)
        };
        let big = index_on(&db.pool, &db, 43, KeyType::Bytes);
        let entries: Vec<(Key, Tid)> = (0..300u32)
            .map(|i| (maximal(i, b'a'), Tid::new(i + 1, 1)))
            .collect();
        let stats = big.build_sorted(entries.iter().cloned()).unwrap();
        assert!(stats.root_level >= 3, "{stats:?}");
        assert_clean(big.verify(Some(&|| rows(&entries))).unwrap());
        assert!(all(&big) == entries);
        for (k, t) in entries.iter().step_by(7) {
            assert_eq!(big.lookup(k).unwrap(), [*t]);
        }
        // And inserts between them split the built pages.
        for i in 0..300u32 {
            big.insert(&maximal(i, b'b'), Tid::new(i + 1, 2), &AssumeLive)
                .unwrap();
        }
        assert_clean(big.verify(None).unwrap());
        assert_eq!(all(&big).len(), 600);
    });
}

#[test]
fn inserts_and_vacuum_after_a_sorted_build_work() {
    within(Duration::from_secs(120), || {
        let mut rng = SmallRng::seed_from_u64(3);
        let db = db(32, false);
        let idx = create(&db, KeyType::I64, false);
        let entries = random_entries(&mut rng, 30_000, KeyType::I64);
        idx.build_sorted(entries.iter().cloned()).unwrap();
        let mut model: BTreeMap<(Key, Tid), ()> = entries.iter().map(|e| (e.clone(), ())).collect();
        for i in 0..20_000u32 {
            let k = Key::I64(rng.random_range(-60_000..60_000));
            let t = Tid::new(100_000 + i, 1);
            idx.insert(&k, t, &AssumeLive).unwrap();
            model.insert((k, t), ());
        }
        let want: Vec<(Key, Tid)> = model.keys().cloned().collect();
        assert_clean(idx.verify(Some(&|| rows(&want))).unwrap());
        assert!(all(&idx) == want);
        let dead = |t: Tid| t.block.is_multiple_of(3);
        let stats = idx.vacuum(dead).unwrap();
        model.retain(|(_, t), _| !dead(*t));
        assert_eq!(stats.remaining, model.len() as u64);
        let want: Vec<(Key, Tid)> = model.keys().cloned().collect();
        assert_clean(idx.verify(Some(&|| rows(&want))).unwrap());
        assert!(all(&idx) == want);
        for _ in 0..500 {
            let (k, _) = &want[rng.random_range(0..want.len())];
            let expect: Vec<Tid> = want
                .iter()
                .filter(|(k2, _)| k2 == k)
                .map(|(_, t)| *t)
                .collect();
            assert_eq!(idx.lookup(k).unwrap(), expect);
        }
    });
}

#[test]
fn unsorted_input_and_unique_duplicates_are_refused_and_leave_an_empty_index() {
    within(Duration::from_secs(60), || {
        let db = db(16, true);
        let idx = create(&db, KeyType::I64, false);
        let mut entries: Vec<(Key, Tid)> = (0..5000)
            .map(|i| (Key::I64(i), Tid::new(i as u32 + 1, 1)))
            .collect();
        entries.swap(3000, 3001);
        let err = idx.build_sorted(entries.iter().cloned()).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, BtreeError::UnsortedBuild { position: 3001, .. }),
            "{msg}"
        );
        assert!(msg.contains("test_idx") && msg.contains("(3001)"), "{msg}");
        // An identical entry twice is out of order too.
        let twice = [(Key::I64(1), Tid::new(1, 1)), (Key::I64(1), Tid::new(1, 1))];
        assert!(matches!(
            idx.build_sorted(twice),
            Err(BtreeError::UnsortedBuild { position: 1, .. })
        ));
        // Nothing is left behind: the index is empty and usable.
        assert!(all(&idx).is_empty());
        assert_clean(idx.verify(None).unwrap());
        entries.swap(3000, 3001);
        idx.build_sorted(entries.iter().cloned()).unwrap();
        assert!(all(&idx) == entries);

        let udb = common::db(16, false);
        let uidx = create(&udb, KeyType::I64, true);
        let dup: Vec<(Key, Tid)> = (0..3000)
            .map(|i| (Key::I64(i.min(2000)), Tid::new(i as u32 + 1, 1)))
            .collect();
        let err = uidx.build_sorted(dup).unwrap_err();
        assert!(
            matches!(&err, BtreeError::UniqueViolation { index, key } if index == "test_idx" && *key == Key::I64(2000)),
            "{err}"
        );
        assert!(all(&uidx).is_empty());
        let fine: Vec<(Key, Tid)> = (0..3000)
            .map(|i| (Key::I64(i), Tid::new(i as u32 + 1, 1)))
            .collect();
        uidx.build_sorted(fine).unwrap();
        // The unique check still works on the built index.
        let err = uidx
            .insert(&Key::I64(1234), Tid::new(9999, 1), &AssumeLive)
            .unwrap_err();
        assert!(matches!(err, BtreeError::UniqueViolation { .. }), "{err}");
        assert_clean(uidx.verify(None).unwrap());
    });
}

#[test]
fn redo_rebuilds_a_sorted_build_after_a_crash() {
    within(Duration::from_secs(120), || {
        let mut rng = SmallRng::seed_from_u64(4);
        // A pool much smaller than the index: built pages are evicted (and
        // so written, WAL first) during the build.
        let db = db(16, true);
        let idx = create(&db, KeyType::I64, false);
        let entries = random_entries(&mut rng, 40_000, KeyType::I64);
        let stats = idx.build_sorted(entries.iter().cloned()).unwrap();
        assert_eq!(
            stats.wal_records,
            stats.leaf_pages + stats.internal_pages,
            "one record a page, the first leaf and the meta page together"
        );
        // A few inserts after the build, logged as usual.
        for i in 0..500u32 {
            idx.insert(
                &Key::I64(rng.random_range(-50_000..50_000)),
                Tid::new(200_000 + i, 1),
                &AssumeLive,
            )
            .unwrap();
        }
        let before = all(&idx);
        let wal = db.wal.as_ref().unwrap();
        wal.flush(wal.insert_lsn()).unwrap();

        // Into empty files.
        let fresh = tempfile::tempdir().unwrap();
        let pool = pool_over(fresh.path(), 32, None);
        replay(db.dir.path(), &pool);
        let rebuilt = Index::open(pool.clone(), None, "replayed", REL).unwrap();
        assert_clean(rebuilt.verify(None).unwrap());
        assert!(all(&rebuilt) == before, "replay into empty files differs");

        // Into the crashed data directory: the pool dropped without a flush,
        // whatever pages were evicted during the build are on disk.
        let dir = db.dir;
        drop(idx);
        drop(db.pool);
        let pool = pool_over(dir.path(), 32, None);
        replay(dir.path(), &pool);
        let recovered = Index::open(pool, None, "recovered", REL).unwrap();
        assert_clean(recovered.verify(None).unwrap());
        assert!(all(&recovered) == before, "recovery in place differs");
        for (k, _) in entries.iter().step_by(101) {
            let want: Vec<Tid> = before
                .iter()
                .filter(|(k2, _)| k2 == k)
                .map(|(_, t)| *t)
                .collect();
            assert_eq!(recovered.lookup(k).unwrap(), want);
        }
    });
}

#[test]
fn a_crash_before_the_last_build_record_leaves_an_empty_index() {
    within(Duration::from_secs(60), || {
        let db = db(16, true);
        let idx = create(&db, KeyType::I64, false);
        let entries: Vec<(Key, Tid)> = (0..30_000)
            .map(|i| (Key::I64(i), Tid::new(i as u32 + 1, 1)))
            .collect();
        idx.build_sorted(entries.iter().cloned()).unwrap();
        let wal = db.wal.as_ref().unwrap();
        wal.flush(wal.insert_lsn()).unwrap();
        let records = WalReader::new(db.dir.path(), Lsn::ZERO, MIN_SEGMENT_SIZE)
            .unwrap()
            .read_to_end()
            .unwrap();
        let builds: Vec<usize> = records
            .iter()
            .enumerate()
            .filter(|(_, (_, r))| r.kind() == RmgrKind::Btree && r.info() == record::NEWPAGES)
            .map(|(i, _)| i)
            .collect();
        assert!(builds.len() > 50);
        let last = *builds.last().unwrap();
        assert_eq!(records[last].1.blocks().len(), 2, "first leaf and meta");
        for cut in [builds[0], builds[builds.len() / 2], last - 1, last] {
            let fresh = tempfile::tempdir().unwrap();
            let pool = pool_over(fresh.path(), 16, None);
            for (start, rec) in &records[..=cut] {
                if rec.kind() == RmgrKind::Btree {
                    let end = start.checked_add(rec.encoded_len() as u64).unwrap();
                    btree::redo(rec, end, &pool).unwrap();
                }
            }
            let idx = Index::open(pool, None, "cut", REL).unwrap();
            assert_clean(idx.verify(None).unwrap());
            if cut == last {
                assert!(all(&idx) == entries);
            } else {
                assert!(all(&idx).is_empty(), "cut at record {cut}");
                idx.insert(&Key::I64(7), Tid::new(1, 1), &AssumeLive)
                    .unwrap();
                assert_eq!(idx.lookup(&Key::I64(7)).unwrap(), [Tid::new(1, 1)]);
            }
        }
    });
}
