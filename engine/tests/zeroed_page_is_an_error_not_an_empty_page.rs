//! A table page zeroed on disk (all 8 KiB, checksum
//! field included) while the database was closed used to read as a new,
//! empty page: its rows vanished from scans and key lookups with no error.
//! With checksums on, the pool now writes extended pages blank *with* their
//! checksum, so an all-zero page is damage: a scan and a key lookup that
//! reach it fail with an error naming the table and the block. With
//! `zero_damaged_pages` (PostgreSQL's setting) the page is read as empty
//! instead, and the pool counts it.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, ErrorKind, Value};

const PAGE: usize = 8192;
const ROWS: i64 = 400;

/// A table `victim` of a few pages with a unique index on `id`, closed;
/// block 1 of its file is then overwritten with zeros. Returns the ids of
/// the rows that were on block 1.
fn zeroed_block_1(dir: &Path) -> Vec<i64> {
    let db = Database::open(dir, small_options()).unwrap();
    let info = db.create_table("victim", two_columns()).unwrap();
    db.create_index("victim_id", "victim", "id", true).unwrap();
    let t = db.begin().unwrap();
    let mut on_block_1 = Vec::new();
    for i in 0..ROWS {
        let id = t
            .insert("victim", row(i, "some bytes to fill a few pages"))
            .unwrap();
        if id.block == 1 {
            on_block_1.push(i);
        }
    }
    t.commit().unwrap();
    db.close().unwrap();
    assert!(!on_block_1.is_empty(), "rows on block 1");

    let file = dir.join("base").join(info.rel.0.to_string());
    let mut bytes = std::fs::read(&file).unwrap();
    assert!(bytes.len() >= 3 * PAGE, "at least three pages");
    bytes[PAGE..2 * PAGE].fill(0);
    std::fs::write(&file, bytes).unwrap();
    on_block_1
}

#[test]
fn a_zeroed_table_page_is_an_error_naming_table_and_block() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let lost = zeroed_block_1(dir.path());

        let db = Database::open(dir.path(), small_options()).unwrap();
        let t = db.begin().unwrap();
        let results: Vec<_> = t.scan("victim").unwrap().collect();
        let err = results
            .iter()
            .find_map(|r| r.as_ref().err())
            .expect("the scan reports the zeroed page");
        let msg = err.to_string();
        assert_eq!(err.kind(), ErrorKind::CorruptData, "{msg}");
        assert!(msg.contains("\"victim\""), "names the table: {msg}");
        assert!(msg.contains("block 1"), "names the block: {msg}");
        assert!(msg.contains("zero"), "says the page is zeroed: {msg}");

        // A key lookup of a row that was on the page fails the same way,
        // rather than finding nothing.
        let err = t
            .get_by_key("victim", "id", &Value::I64(lost[0]))
            .expect_err("the lookup reaches the zeroed page");
        let msg = err.to_string();
        assert_eq!(err.kind(), ErrorKind::CorruptData, "{msg}");
        assert!(msg.contains("block 1"), "names the block: {msg}");
        // A row on an intact page still reads.
        let (_, r) = t
            .get_by_key("victim", "id", &Value::I64(0))
            .unwrap()
            .expect("row 0 is on block 0");
        assert_eq!(r[0], Value::I64(0));
        drop(t);
        db.close().unwrap();
    });
}

#[test]
fn with_zero_damaged_pages_the_scan_reads_the_page_as_empty_and_counts_it() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let lost = zeroed_block_1(dir.path());

        let db = Database::open(dir.path(), small_options().zero_damaged_pages(true)).unwrap();
        let before = db.pool_stats().zeroed_damaged_pages;
        let t = db.begin().unwrap();
        let ids: Vec<i64> = t
            .scan("victim")
            .unwrap()
            .map(|r| {
                r.expect("no error with zero_damaged_pages").1[0]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(
            ids.len() as i64,
            ROWS - lost.len() as i64,
            "every row but those of block 1"
        );
        assert!(ids.iter().all(|id| !lost.contains(id)));
        assert_eq!(
            db.pool_stats().zeroed_damaged_pages - before,
            1,
            "the zeroed page was counted"
        );
        drop(t);
        db.close().unwrap();
    });
}

#[test]
fn zero_damaged_pages_is_an_option_by_name() {
    let o = engine::Options::new();
    assert!(!o.zero_damaged_pages, "off by default");
    let o = o.set("zero_damaged_pages", "on").unwrap();
    assert!(o.zero_damaged_pages);
    let err = engine::Options::new()
        .set("zero_damaged_pages", "maybe")
        .unwrap_err();
    assert!(err.to_string().contains("zero_damaged_pages"), "{err}");
}
