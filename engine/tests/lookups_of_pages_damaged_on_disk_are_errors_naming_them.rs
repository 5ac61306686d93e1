//! Point lookups read their pages through the prefetching read: with
//! checksums on, a flipped bit in a heap page or in an index leaf makes
//! every lookup that reads that page an error naming the relation and the
//! block, and every other lookup its own row: never a panic, a wrong row or
//! a missing one.

mod common;

use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, ErrorKind, RowId, Value};

const PAGE: usize = 8192;

#[test]
fn a_flipped_bit_in_a_heap_page_or_an_index_leaf_fails_only_the_lookups_reading_it() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let name = |i: i64| format!("row {i:05} with a few bytes of padding");
        let (heap_rel, index_rel, rids) = {
            let db = Database::open(dir.path(), small_options()).unwrap();
            let info = db.create_table("victim", two_columns()).unwrap();
            let index = db.create_index("victim_id", "victim", "id", true).unwrap();
            let t = db.begin().unwrap();
            let rids: Vec<RowId> = (0..3000)
                .map(|i| t.insert("victim", row(i, &name(i))).unwrap())
                .collect();
            t.commit().unwrap();
            db.checkpoint().unwrap();
            db.close().unwrap();
            (info.rel, index.rel, rids)
        };
        let flip = |rel: engine::RelId, block: usize| {
            let file = dir.path().join("base").join(rel.0.to_string());
            let mut bytes = std::fs::read(&file).unwrap();
            assert!(
                bytes.len() >= (block + 1) * PAGE,
                "{rel:?} has block {block}"
            );
            bytes[block * PAGE + 6000] ^= 0x04;
            std::fs::write(&file, bytes).unwrap();
        };
        flip(heap_rel, 1);
        // The index's last block: a leaf (the root and the meta page come
        // first, and the last leaf split made it).
        let index_blocks = std::fs::metadata(dir.path().join("base").join(index_rel.0.to_string()))
            .unwrap()
            .len() as usize
            / PAGE;
        assert!(index_blocks >= 3, "{index_blocks} index blocks");
        flip(index_rel, index_blocks - 1);

        let db = Database::open(dir.path(), small_options()).unwrap();
        let t = db.read().unwrap();
        let (mut heap_errors, mut index_errors) = (0, 0);
        for (i, rid) in rids.iter().enumerate() {
            let i = i as i64;
            match t.get("victim", *rid) {
                Ok(got) => {
                    assert_ne!(rid.block, 1, "row {i} read from the damaged block");
                    assert_eq!(*got.unwrap(), row(i, &name(i)), "row {i}");
                }
                Err(e) => {
                    let msg = e.to_string();
                    assert_eq!(e.kind(), ErrorKind::CorruptData, "{msg}");
                    assert!(
                        rid.block == 1 && msg.contains("victim") && msg.contains("block 1"),
                        "row {i} at {rid}: {msg}"
                    );
                    heap_errors += 1;
                }
            }
            match t.get_by_key("victim", "id", &Value::I64(i)) {
                Ok(Some((got, values))) => {
                    assert_eq!(got, *rid, "key {i}");
                    assert_eq!(*values, row(i, &name(i)), "key {i}");
                }
                Ok(None) => panic!("key {i} not found"),
                Err(e) => {
                    let msg = e.to_string();
                    assert_eq!(e.kind(), ErrorKind::CorruptData, "key {i}: {msg}");
                    let leaf = format!("block {}", index_blocks - 1);
                    assert!(
                        (msg.contains("victim_id") && msg.contains(&leaf))
                            || (rid.block == 1 && msg.contains("block 1")),
                        "key {i} at {rid}: {msg}"
                    );
                    index_errors += 1;
                }
            }
        }
        let on_block_1 = rids.iter().filter(|r| r.block == 1).count();
        assert_eq!(heap_errors, on_block_1);
        assert!(
            index_errors > on_block_1,
            "the damaged leaf failed lookups: {index_errors}"
        );
        drop(t);
        db.close().unwrap();
    });
}
