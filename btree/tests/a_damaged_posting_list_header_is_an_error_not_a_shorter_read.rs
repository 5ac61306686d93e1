//! Each bit pattern flipped in turn into a posting list's stored last TID
//! (the word binary searches compare) and its TID count, in a page read
//! without checksums: a lookup, and range reads starting inside the list in
//! both directions, either return exactly the TIDs stored or fail with a
//! corruption error naming the relation and block; never a shorter set of
//! TIDs, never a panic. (A flip inside the key or the TID stream can make
//! another valid key or TID, as in a plain item: only checksums see those.)

mod common;

use std::ops::Bound;
use std::time::Duration;

use btree::page::{PageId, TreePage};
use btree::{Direction, Index, Key, KeyBounds, KeyType};
use bufmgr::RelFork;
use common::{REL, create, db, within};
use heap::tuple::Tid;

const KEY: i64 = 4;

fn want() -> Vec<Tid> {
    (40..50).map(|i| Tid::new(i, 1)).collect()
}

/// The reads of `KEY`'s entries, each `Ok` with its TIDs or an error.
fn reads(index: &Index) -> Vec<(&'static str, btree::Result<Vec<Tid>>)> {
    let k = Key::I64(KEY).encode();
    let bounds = || KeyBounds {
        lower: Bound::Included(k.as_slice()),
        upper: Bound::Included(k.as_slice()),
    };
    let mut out: Vec<(&'static str, btree::Result<Vec<Tid>>)> =
        vec![("lookup", index.lookup(&Key::I64(KEY)))];
    // Range reads that start inside the posting list, in both directions.
    let mut fwd = Vec::new();
    let r = index
        .read_range(
            bounds(),
            Direction::Forward,
            Some((&k, Tid::new(44, 1))),
            100,
            |_, t| fwd.push(t),
        )
        .map(|_| fwd);
    out.push(("forward range after (44,1)", r));
    let mut back = Vec::new();
    let r = index
        .read_range(
            bounds(),
            Direction::Backward,
            Some((&k, Tid::new(46, 1))),
            100,
            |_, t| back.push(t),
        )
        .map(|_| {
            back.reverse();
            back
        });
    out.push(("backward range below (46,1)", r));
    let mut all = Vec::new();
    let r = index
        .read_range(bounds(), Direction::Forward, None, 100, |_, t| all.push(t))
        .map(|_| all);
    out.push(("forward range", r));
    out
}

fn expected(what: &str) -> Vec<Tid> {
    let w = want();
    match what {
        "forward range after (44,1)" => w.into_iter().filter(|t| *t > Tid::new(44, 1)).collect(),
        "backward range below (46,1)" => w.into_iter().filter(|t| *t < Tid::new(46, 1)).collect(),
        _ => w,
    }
}

#[test]
fn a_flipped_last_tid_or_count_reads_every_tid_or_fails_naming_the_page() {
    within(Duration::from_secs(120), || {
        let db = db(64, false);
        let index = create(&db, KeyType::I64, false);
        let entries = (0..2_000u32).map(|i| (Key::I64(i64::from(i / 10)), Tid::new(i, 1)));
        index.build_sorted(entries).unwrap();
        for (what, r) in reads(&index) {
            assert_eq!(r.unwrap(), expected(what), "{what} before any damage");
        }
        let rf = RelFork::main(REL);
        let block = 1;
        let (off, len) = {
            let page = db.pool.read_buffer(rf, block, None).unwrap().lock_shared();
            let tp = TreePage::parse(&page, PageId { rel: REL, block }).unwrap();
            let j = (0..tp.data_len())
                .find(|&j| tp.data(j).unwrap().key == Key::I64(KEY).encode())
                .unwrap();
            let it = tp.data(j).unwrap();
            assert!(it.is_posting() && it.tid_count() == 10);
            (
                it.raw.as_ptr() as usize - page.as_ptr() as usize,
                it.raw.len(),
            )
        };
        let mut wrong = Vec::new();
        // The stored last TID (after the 8-byte key) and the TID count.
        for at in (off + 8..off + 14).chain(off + len - 4..off + len - 2) {
            for mask in [0x01u8, 0x02, 0x10, 0x80, 0xFF] {
                let flip = |mask: u8| {
                    let mut page = db
                        .pool
                        .read_buffer(rf, block, None)
                        .unwrap()
                        .lock_exclusive();
                    page[at] ^= mask;
                    page.mark_dirty();
                };
                flip(mask);
                for (what, r) in reads(&index) {
                    match r {
                        Ok(got) if got == expected(what) => {}
                        Ok(got) => wrong.push(format!(
                            "byte {} ^ {mask:#x}: {what} returned {got:?}",
                            at - off
                        )),
                        Err(e) => {
                            let s = e.to_string();
                            if !s.contains(&format!("relation {} block {block}", REL.0)) {
                                wrong.push(format!(
                                    "byte {} ^ {mask:#x}: {what} failed without naming the page: {s}",
                                    at - off
                                ));
                            }
                        }
                    }
                }
                flip(mask);
            }
        }
        assert!(
            wrong.is_empty(),
            "{} wrong reads:\n{}",
            wrong.len(),
            wrong.join("\n")
        );
    });
}
