//! A FIXED leaf of a deduplicating index holds plain entries only (an
//! `i64` key and a TID, 14 bytes each). An entry whose TID offset has been
//! damaged into the posting-list mark (0xFFFF), in a page read without
//! checksums, is a corruption error naming the page on a lookup of its
//! key: never a TID that was not stored, never a shorter answer. (Its 14
//! bytes may even parse as a posting list header: key length 0, two TIDs,
//! a first TID made of the key's last bytes; a FIXED page holds none.)

mod common;

use std::ops::Bound;
use std::time::Duration;

use btree::page::{PageId, TreePage};
use btree::{Direction, Key, KeyBounds, KeyType};
use bufmgr::RelFork;
use common::{REL, create, db, within};
use heap::tuple::Tid;

const KEY: i64 = 4;

#[test]
fn a_lookup_of_an_entry_whose_tid_ends_in_the_posting_mark_fails_naming_its_page() {
    within(Duration::from_secs(60), || {
        let db = db(64, false);
        let index = create(&db, KeyType::I64, false);
        let entries = (0..2_000u32).map(|i| (Key::I64(i64::from(i)), Tid::new(i, 1)));
        index.build_sorted(entries).unwrap();
        assert_eq!(index.lookup(&Key::I64(KEY)).unwrap(), vec![Tid::new(4, 1)]);
        let rf = RelFork::main(REL);
        let key = Key::I64(KEY).encode();
        // The leaf holding KEY, and the byte offset of its entry.
        let (block, off) = (1..db.pool.nblocks(rf).unwrap())
            .find_map(|block| {
                let page = db.pool.read_buffer(rf, block, None).unwrap().lock_shared();
                let tp = TreePage::parse(&page, PageId { rel: REL, block }).unwrap();
                if !tp.is_leaf() {
                    return None;
                }
                assert!(
                    tp.is_fixed() && tp.is_dedup(),
                    "block {block}: {:#x}",
                    tp.flags
                );
                let j = (0..tp.data_len()).find(|&j| tp.data(j).unwrap().key == key)?;
                let it = tp.data(j).unwrap();
                Some((block, it.raw.as_ptr() as usize - page.as_ptr() as usize))
            })
            .expect("a leaf holds the key");
        {
            let mut page = db
                .pool
                .read_buffer(rf, block, None)
                .unwrap()
                .lock_exclusive();
            // Block 0x20000 (as a posting header: key length 0, 2 TIDs),
            // offset 0xFFFF (the mark).
            page[off + 8..off + 14].copy_from_slice(&[0, 0, 2, 0, 0xFF, 0xFF]);
            page.mark_dirty();
        }
        let named = |e: &btree::BtreeError| {
            e.to_string()
                .contains(&format!("relation {} block {block}", REL.0))
        };
        match index.lookup(&Key::I64(KEY)) {
            Err(e) if named(&e) => {}
            other => panic!("the lookup of the damaged entry gave {other:?}"),
        }
        let mut got = Vec::new();
        let r = index.read_range(
            KeyBounds {
                lower: Bound::Included(key.as_slice()),
                upper: Bound::Included(key.as_slice()),
            },
            Direction::Forward,
            None,
            100,
            |_, t| got.push(t),
        );
        match r {
            Err(e) if named(&e) => {}
            other => panic!("the range read of the damaged entry gave {other:?}: {got:?}"),
        }
        // The keys around it are read as stored, or fail naming the page
        // (a lookup may look at the entry before its first).
        for k in [KEY - 1, KEY + 1] {
            match index.lookup(&Key::I64(k)) {
                Ok(tids) => assert_eq!(tids, vec![Tid::new(k as u32, 1)], "key {k}"),
                Err(e) if named(&e) => {}
                Err(e) => panic!("key {k}: {e}"),
            }
        }
    });
}
