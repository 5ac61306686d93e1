//! A leaf whose item pointer runs off the page, or a fixed leaf whose item
//! array ends between items (with a valid checksum, so the pool accepts
//! it), makes lookups fail with `BtreeError::Corrupt` naming
//! relation and block, never a panic, and `verify` reports it; `verify`
//! also reports an internal page whose first pivot (minus infinity) stores
//! a key.

mod common;

use std::time::Duration;

use btree::{AssumeLive, ErrorKind, Key, KeyType};
use bufmgr::{BufferTag, RelFork};
use common::{REL, create, db, within};
use heap::tuple::Tid;

/// Fill a root leaf with 50 keys (i64 keys: a FIXED leaf; byte keys: a
/// leaf with item pointers), damage it on disk with a valid checksum, and
/// check a lookup is `Corrupt` naming the block and verify reports it.
fn corrupt_leaf(key: fn(i64) -> Key, key_type: KeyType, fixed: bool, damage: fn(&mut [u8])) {
    within(Duration::from_secs(30), move || {
        let db = db(16, false);
        let index = create(&db, key_type, false);
        for i in 0..50i64 {
            index
                .insert(&key(i), Tid::new(1, i as u16 + 1), &AssumeLive)
                .unwrap();
        }
        // Block 1 is the root leaf.
        let rf = RelFork::main(REL);
        let mut page = db
            .pool
            .read_buffer(rf, 1, None)
            .unwrap()
            .lock_shared()
            .to_vec();
        let tp = btree::page::TreePage::parse(&page, btree::page::PageId { rel: REL, block: 1 })
            .unwrap();
        assert_eq!(tp.is_fixed(), fixed);
        damage(&mut page);
        db.pool.flush_all(true).unwrap();
        db.pool.evict_all().unwrap();
        bufmgr::page::set_checksum(&mut page, 1);
        db.pool
            .storage()
            .write(BufferTag::new(rf, 1), &page)
            .unwrap();

        let err = index.lookup(&key(0)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::CorruptData);
        let msg = err.to_string();
        assert!(msg.contains("relation 40 block 1"), "{msg}");
        let v = index.verify(None).unwrap();
        assert!(v.iter().any(|v| v.block == Some(1)), "{v:?}");
    });
}

#[test]
fn corrupt_leaf_is_reported_not_panicked() {
    // The first item pointer points past the page end.
    corrupt_leaf(
        |i| Key::Bytes(format!("{i:04}").into_bytes()),
        KeyType::Bytes,
        false,
        |page| {
            page[28..30].copy_from_slice(&8190u16.to_le_bytes());
            page[30..32].copy_from_slice(&100u16.to_le_bytes());
        },
    );
}

#[test]
fn a_fixed_leaf_whose_item_array_ends_between_items_is_reported_not_panicked() {
    // `lower` 5 bytes into the last 14-byte item.
    corrupt_leaf(Key::I64, KeyType::I64, true, |page| {
        let lower = u16::from_le_bytes([page[24], page[25]]);
        page[24..26].copy_from_slice(&(lower - 9).to_le_bytes());
    });
}

#[test]
fn verify_reports_a_first_pivot_that_stores_a_key() {
    within(Duration::from_secs(30), || {
        use btree::page::{self, Header, Meta, PageId, TreePage};
        let db = db(64, false);
        let index = create(&db, KeyType::I64, false);
        for i in 0..2000i64 {
            index
                .insert(
                    &Key::I64(i),
                    Tid::new(1 + i as u32 / 100, 1 + (i % 100) as u16),
                    &AssumeLive,
                )
                .unwrap();
        }
        let rf = RelFork::main(REL);
        let read = |block| {
            db.pool
                .read_buffer(rf, block, None)
                .unwrap()
                .lock_shared()
                .to_vec()
        };
        let meta = Meta::read(&read(0), PageId { rel: REL, block: 0 }).unwrap();
        assert!(meta.root_level >= 1, "{meta:?}");
        let root = read(meta.root);
        let id = PageId {
            rel: REL,
            block: meta.root,
        };
        let tp = TreePage::parse(&root, id).unwrap();
        assert!(tp.data(0).unwrap().minus_infinity);
        // Rewrite the root with a real separator stored in its first pivot:
        // still minus infinity by its place, but not what any writer stores.
        let mut items = tp.all_items().unwrap();
        let first = tp.data(0).unwrap();
        items[0] = page::encode_item(
            tp.layout(),
            &Key::I64(-7).encode(),
            Tid::new(1, 1),
            Some(first.child),
            false,
        );
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        let header = Header {
            flags: tp.flags,
            level: tp.level,
            right: tp.right,
            layout: tp.layout(),
        };
        let mut damaged = root.clone();
        page::build_page(&mut damaged, header, &refs);
        db.pool.flush_all(true).unwrap();
        db.pool.evict_all().unwrap();
        bufmgr::page::set_checksum(&mut damaged, meta.root);
        db.pool
            .storage()
            .write(BufferTag::new(rf, meta.root), &damaged)
            .unwrap();

        let v = index.verify(None).unwrap();
        assert!(
            v.iter()
                .any(|v| v.block == Some(meta.root) && v.what.contains("first pivot")),
            "{v:?}"
        );
    });
}
