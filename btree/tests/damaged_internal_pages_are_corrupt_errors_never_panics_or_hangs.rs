//! Internal pages damaged in the pool (what a disk with checksums off hands
//! back) and read by lookups again and again, so that once resident they
//! are read optimistically as well as under their shared lock: every lookup
//! routed through the damaged page fails with `Corrupt` naming relation and
//! block, every other lookup answers right, nothing panics, and nothing
//! loops forever (a watchdog fails the test). Pages of both item layouts:
//! the headed layout stores each key's length twice (pointer and item
//! header), so a pointer length that disagrees is detected; the compact
//! layout stores it once, so only lengths too short for an item are.

mod common;

use std::time::Duration;

use btree::page::Layout;
use btree::{AssumeLive, ErrorKind, Key, KeyType};
use bufmgr::RelFork;
use common::{Db, REL, create, create_in, db, within};
use heap::tuple::Tid;

const KEYS: usize = 3_000;

/// 200-byte keys: about 35 pivots an internal page, so `KEYS` keys make
/// several internal pages at level 1 under the root.
fn key(k: usize) -> Key {
    Key::Bytes(format!("{k:0>200}").into_bytes())
}

fn tid_of(k: usize) -> Tid {
    Tid::new(k as u32 + 1, 1)
}

fn u16_at(p: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([p[at], p[at + 1]])
}

fn u32_at(p: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]])
}

/// A level-1 page that is not the rightmost of its level (so it has a high
/// key and a right link) and not the root.
fn inner_page_with_right_sibling(db: &Db) -> u32 {
    let rf = RelFork::main(REL);
    for b in 1..db.pool.nblocks(rf).unwrap() {
        let p = db.pool.read_buffer(rf, b, None).unwrap().lock_shared();
        let (flags, level, right) = (u16_at(&p, 14), u32_at(&p, 16), u32_at(&p, 20));
        if flags & 0x1 == 0 && flags & 0x2 == 0 && level == 1 && right != 0 {
            return b;
        }
    }
    panic!("no level-1 page with a right sibling");
}

/// Build the index, damage one level-1 page with `damage`, then look every
/// key up three times. Returns how many lookups failed; panics on a wrong
/// answer or an error that is not `Corrupt` for the damaged block.
fn damage_and_look_up(damage: fn(&mut [u8], u32)) -> usize {
    damage_and_look_up_in(Layout::Compact, damage)
}

/// [`damage_and_look_up`] on an index in `layout`.
fn damage_and_look_up_in(layout: Layout, damage: fn(&mut [u8], u32)) -> usize {
    within(Duration::from_secs(120), move || {
        let db = db(512, false);
        let index = create_in(&db, KeyType::Bytes, false, layout);
        for k in 0..KEYS {
            index.insert(&key(k), tid_of(k), &AssumeLive).unwrap();
        }
        let block = inner_page_with_right_sibling(&db);
        {
            let mut w = db
                .pool
                .read_buffer(RelFork::main(REL), block, None)
                .unwrap()
                .lock_exclusive();
            damage(&mut w, block);
            w.mark_dirty();
        }
        let mut failed = 0;
        for _ in 0..3 {
            for k in 0..KEYS {
                match index.lookup(&key(k)) {
                    Ok(tids) => assert_eq!(tids, [tid_of(k)], "key {k}"),
                    Err(e) => {
                        assert_eq!(e.kind(), ErrorKind::CorruptData, "key {k}: {e}");
                        let msg = e.to_string();
                        assert!(
                            msg.contains(&format!("relation {} block {block}", REL.0)),
                            "key {k}: {msg}"
                        );
                        failed += 1;
                    }
                }
            }
        }
        let stats = db.pool.stats().totals();
        assert!(stats.optimistic_hits > 0, "nothing was read optimistically");
        failed
    })
}

#[test]
fn item_pointers_running_off_the_page_make_lookups_through_it_corrupt() {
    let failed = damage_and_look_up(|p, _| {
        let lower = usize::from(u16_at(p, 24));
        for ptr in (28..lower).step_by(4) {
            p[ptr..ptr + 2].copy_from_slice(&8190u16.to_le_bytes());
            p[ptr + 2..ptr + 4].copy_from_slice(&100u16.to_le_bytes());
        }
    });
    assert!(failed > 0, "no lookup went through the damaged page");
}

#[test]
fn headed_pivot_lengths_that_disagree_with_their_keys_make_lookups_through_it_corrupt() {
    let failed = damage_and_look_up_in(Layout::Headed, |p, _| {
        let lower = usize::from(u16_at(p, 24));
        for ptr in (28..lower).step_by(4) {
            let len = u16_at(p, ptr + 2);
            p[ptr + 2..ptr + 4].copy_from_slice(&(len - 1).to_le_bytes());
        }
    });
    assert!(failed > 0, "no lookup went through the damaged page");
}

#[test]
fn compact_pivot_lengths_too_short_for_a_tid_and_child_make_lookups_through_it_corrupt() {
    let failed = damage_and_look_up(|p, _| {
        let lower = usize::from(u16_at(p, 24));
        for ptr in (28..lower).step_by(4) {
            p[ptr + 2..ptr + 4].copy_from_slice(&9u16.to_le_bytes());
        }
    });
    assert!(failed > 0, "no lookup went through the damaged page");
}

#[test]
fn a_right_link_to_the_page_itself_below_its_high_key_is_corrupt_not_an_endless_descent() {
    // The high key's pointer is made the first data item's (minus
    // infinity), so every position is beyond the high key, and the right
    // link leads back to the page: a descent that trusts both moves right
    // forever.
    let failed = damage_and_look_up(|p, block| {
        let first = [p[32], p[33], p[34], p[35]];
        p[28..32].copy_from_slice(&first);
        p[20..24].copy_from_slice(&block.to_le_bytes());
    });
    assert!(failed > 0, "no lookup went through the damaged page");
}

#[test]
fn an_insert_through_a_page_whose_right_link_is_itself_is_corrupt_not_an_endless_descent() {
    within(Duration::from_secs(120), || {
        let db = db(512, false);
        let index = create(&db, KeyType::Bytes, false);
        for k in 0..KEYS {
            index.insert(&key(k), tid_of(k), &AssumeLive).unwrap();
        }
        let block = inner_page_with_right_sibling(&db);
        {
            let mut w = db
                .pool
                .read_buffer(RelFork::main(REL), block, None)
                .unwrap()
                .lock_exclusive();
            let first = [w[32], w[33], w[34], w[35]];
            w[28..32].copy_from_slice(&first);
            w[20..24].copy_from_slice(&block.to_le_bytes());
            w.mark_dirty();
        }
        // Every insert routed through the page meets it; some are.
        let mut failed = 0;
        for k in KEYS..KEYS + 50 {
            let k = (k * 7919) % (2 * KEYS);
            if let Err(e) = index.insert(&key(k), Tid::new(k as u32 + 1, 2), &AssumeLive) {
                assert_eq!(e.kind(), ErrorKind::CorruptData, "key {k}: {e}");
                failed += 1;
            }
        }
        assert!(failed > 0, "no insert went through the damaged page");
    });
}

/// `FIXED` (0x40) and `DEDUP` (0x80) belong to compact leaves only:
/// `TreePage::parse` refuses an internal page flagged with either, so the
/// optimistic step must refuse it too, or a lookup answers through a page
/// that the pinned read of the same page calls damaged (and whether it
/// errs then depends on whether the page was resident).
fn leaf_only_flag_on_an_internal_page_makes_lookups_through_it_corrupt(flag: u16, layout: Layout) {
    fn damage(p: &mut [u8], flag: u16) {
        let flags = u16_at(p, 14) | flag;
        p[14..16].copy_from_slice(&flags.to_le_bytes());
    }
    let failed = match flag {
        0x40 => damage_and_look_up_in(layout, |p, _| damage(p, 0x40)),
        _ => damage_and_look_up_in(layout, |p, _| damage(p, 0x80)),
    };
    assert!(
        failed > 0 && failed.is_multiple_of(3),
        "flag {flag:#x}, {layout:?}: {failed} lookups failed (every lookup through the page must)"
    );
}

#[test]
fn a_fixed_flag_on_an_internal_page_makes_lookups_through_it_corrupt() {
    for layout in [Layout::Compact, Layout::Headed] {
        leaf_only_flag_on_an_internal_page_makes_lookups_through_it_corrupt(0x40, layout);
    }
}

#[test]
fn a_dedup_flag_on_an_internal_page_makes_lookups_through_it_corrupt() {
    for layout in [Layout::Compact, Layout::Headed] {
        leaf_only_flag_on_an_internal_page_makes_lookups_through_it_corrupt(0x80, layout);
    }
}
