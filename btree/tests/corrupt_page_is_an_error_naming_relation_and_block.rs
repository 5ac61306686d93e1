//! A leaf whose item pointer runs off the page (with a valid checksum, so
//! the pool accepts it) makes lookups fail with `BtreeError::Corrupt` naming
//! relation and block, never a panic, and `verify` reports it.

mod common;

use std::time::Duration;

use btree::{AssumeLive, ErrorKind, Key, KeyType};
use bufmgr::{BufferTag, RelFork};
use common::{REL, create, db, within};
use heap::tuple::Tid;

#[test]
fn corrupt_leaf_is_reported_not_panicked() {
    within(Duration::from_secs(30), || {
        let db = db(16, false);
        let index = create(&db, KeyType::I64, false);
        for i in 0..50i64 {
            index
                .insert(&Key::I64(i), Tid::new(1, i as u16 + 1), &AssumeLive)
                .unwrap();
        }
        // Block 1 is the root leaf; point its first item past the page end.
        let rf = RelFork::main(REL);
        let mut page = db
            .pool
            .read_buffer(rf, 1, None)
            .unwrap()
            .lock_shared()
            .to_vec();
        page[28..30].copy_from_slice(&8190u16.to_le_bytes());
        page[30..32].copy_from_slice(&100u16.to_le_bytes());
        db.pool.flush_all(true).unwrap();
        db.pool.evict_all().unwrap();
        bufmgr::page::set_checksum(&mut page, 1);
        db.pool
            .storage()
            .write(BufferTag::new(rf, 1), &page)
            .unwrap();

        let err = index.lookup(&Key::I64(0)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::CorruptData);
        let msg = err.to_string();
        assert!(msg.contains("relation 40 block 1"), "{msg}");
        let v = index.verify(None).unwrap();
        assert!(v.iter().any(|v| v.block == Some(1)), "{v:?}");
    });
}
