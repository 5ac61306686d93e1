//! A leaf's right link damaged to point back at a leaf to its left (what a
//! flipped byte on a disk read without checksums hands back): the leaf
//! chain then has a cycle of two or more pages. A page linking to itself
//! was refused before; a longer cycle kept a forward range read, a scan
//! and a lookup of a key whose run crosses the damaged link going round
//! it forever (the read handed out nothing more, or the same entries
//! again, and never ended). Every read that follows the damaged link must
//! fail with `Corrupt` naming the relation and the block it was led to.

mod common;

use std::collections::HashMap;
use std::ops::Bound;
use std::time::Duration;

use btree::page::{Layout, PageId, TreePage};
use btree::{Direction, ErrorKind, Index, IndexOptions, Key, KeyBounds, KeyType};
use bufmgr::{BlockNumber, RelFork};
use common::{Db, REL, db, within};
use heap::tuple::Tid;

/// 6,000 entries of three keys (2,000 each) in an `i64` index without
/// posting lists: about ten leaves, each key's run across several.
fn index(db: &Db) -> Index {
    let index = Index::create_in_format(
        db.pool.clone(),
        None,
        IndexOptions {
            name: "cycle".into(),
            rel: REL,
            key_type: KeyType::I64,
            unique: false,
        },
        Layout::Compact,
        false,
    )
    .unwrap();
    index
        .build_sorted((0..6_000u32).map(|i| (Key::I64(i64::from(i / 2_000)), Tid::new(i + 1, 1))))
        .unwrap();
    index
}

/// The leaves in chain order, each with its high key's stored key.
fn leaves(db: &Db) -> Vec<(BlockNumber, Option<Vec<u8>>)> {
    let rf = RelFork::main(REL);
    let mut right_of = HashMap::new();
    let mut high = HashMap::new();
    for b in 1..db.pool.nblocks(rf).unwrap() {
        let p = db.pool.read_buffer(rf, b, None).unwrap().lock_shared();
        let tp = TreePage::parse(&p, PageId { rel: REL, block: b }).unwrap();
        if tp.is_leaf() {
            right_of.insert(b, tp.right_link());
            high.insert(b, tp.high_key().unwrap().map(|h| h.key.to_vec()));
        }
    }
    let linked: Vec<BlockNumber> = right_of.values().flatten().copied().collect();
    let mut at = *right_of.keys().find(|b| !linked.contains(b)).unwrap();
    let mut chain = vec![(at, high[&at].clone())];
    while let Some(next) = right_of[&at] {
        at = next;
        chain.push((at, high[&at].clone()));
    }
    assert_eq!(chain.len(), right_of.len());
    chain
}

/// Point leaf `from`'s right link at leaf `to`.
fn link(db: &Db, from: BlockNumber, to: BlockNumber) {
    let mut p = db
        .pool
        .read_buffer(RelFork::main(REL), from, None)
        .unwrap()
        .lock_exclusive();
    p[20..24].copy_from_slice(&to.to_le_bytes());
    p.mark_dirty();
}

#[track_caller]
fn assert_corrupt<T: std::fmt::Debug>(r: btree::Result<T>, block: BlockNumber, what: &str) {
    let e = r.expect_err(what);
    assert_eq!(e.kind(), ErrorKind::CorruptData, "{what}: {e}");
    assert!(
        e.to_string()
            .contains(&format!("relation {} block {block}", REL.0)),
        "{what}: {e}"
    );
}

#[test]
fn range_reads_and_scans_across_a_link_back_to_an_earlier_leaf_fail_naming_it() {
    within(Duration::from_secs(20), || {
        let db = db(64, false);
        let index = index(&db);
        let chain = leaves(&db);
        assert!(chain.len() >= 6, "{chain:?}");
        // The third leaf leads back to the second.
        let (second, third) = (chain[1].0, chain[2].0);
        link(&db, third, second);
        let all = KeyBounds {
            lower: Bound::Unbounded,
            upper: Bound::Unbounded,
        };
        let mut n = 0usize;
        let r = index.read_range(all, Direction::Forward, None, usize::MAX, |_, _| n += 1);
        assert_corrupt(r, second, "an unlimited forward range read");
        // Resumed in batches, from a position on the third leaf.
        let mut after: Option<(Vec<u8>, Tid)> = None;
        let r = loop {
            let mut last = None;
            match index.read_range(
                all,
                Direction::Forward,
                after.as_ref().map(|(k, t)| (k.as_slice(), *t)),
                128,
                |k, t| last = Some((k.to_vec(), t)),
            ) {
                Ok(true) => after = last,
                other => break other,
            }
        };
        assert_corrupt(r, second, "a forward range read in batches");
        let r: btree::Result<Vec<_>> = index
            .scan(Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .collect();
        assert_corrupt(r, second, "a scan");
    });
}

#[test]
fn a_lookup_whose_run_crosses_a_link_back_to_an_earlier_leaf_fails_naming_it() {
    within(Duration::from_secs(20), || {
        let db = db(64, false);
        let index = index(&db);
        let chain = leaves(&db);
        // Two leaves in a row whose high keys are key 1: its run goes on
        // past both.
        let one = Key::I64(1).encode();
        let at = chain
            .windows(2)
            .position(|w| w[0].1.as_ref() == Some(&one) && w[1].1.as_ref() == Some(&one))
            .expect("a run of key 1 across three leaves");
        let (first, second) = (chain[at].0, chain[at + 1].0);
        link(&db, second, first);
        assert_corrupt(index.lookup(&Key::I64(1)), first, "a lookup");
    });
}
