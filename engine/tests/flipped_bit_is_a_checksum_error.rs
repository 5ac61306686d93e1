//! A data file with a flipped bit in a table page: scanning the table gives
//! a checksum error naming the table and the block, not a panic; the other
//! pages and tables still read.

mod common;

use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, ErrorKind};

#[test]
fn a_flipped_bit_is_a_checksum_error_naming_table_and_block() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        let info = db.create_table("victim", two_columns()).unwrap();
        db.create_table("bystander", two_columns()).unwrap();
        let t = db.begin().unwrap();
        for i in 0..400 {
            t.insert("victim", row(i, "some bytes to fill a few pages"))
                .unwrap();
        }
        t.insert("bystander", row(1, "fine")).unwrap();
        t.commit().unwrap();
        db.close().unwrap();

        let file = dir.path().join("base").join(info.rel.0.to_string());
        let mut bytes = std::fs::read(&file).unwrap();
        assert!(bytes.len() >= 3 * 8192, "at least three pages");
        bytes[8192 + 5000] ^= 0x10; // block 1
        std::fs::write(&file, bytes).unwrap();

        let db = Database::open(dir.path(), small_options()).unwrap();
        let t = db.begin().unwrap();
        let results: Vec<_> = t.scan("victim").unwrap().collect();
        let err = results
            .iter()
            .find_map(|r| r.as_ref().err())
            .expect("the scan reports the damage");
        let msg = err.to_string();
        assert_eq!(err.kind(), ErrorKind::CorruptData, "{msg}");
        assert!(msg.contains("\"victim\""), "names the table: {msg}");
        assert!(msg.contains("block 1"), "names the block: {msg}");
        assert!(msg.contains("checksum"), "{msg}");
        assert!(
            results.iter().filter(|r| r.is_ok()).count() > 0,
            "block 0 read fine"
        );
        assert_eq!(t.scan("bystander").unwrap().count(), 1);
        drop(t);
        db.close().unwrap();
    });
}
