//! The clean-shutdown marker is consumed only once the open has
//! succeeded. An unlogged table with 100 rows, closed cleanly; then an open
//! that fails on a bad option (a `wal_segment_size` other than the log's,
//! or `partition_floor(Some(0))`, which `Options::validate` lets through to
//! the pool); then a correct open. Before the fix, the failed open has already taken
//! the `CLEAN_SHUTDOWN` marker, so the correct open takes the directory for
//! a crashed one and empties every unlogged table: 0 of 100 rows.
//! Expected: 100 rows (a failed open changes nothing).

mod common;

use common::{row, small_options, two_columns};
use engine::{Database, Options, TableOptions};

fn unlogged_rows_after_a_failed_open(bad: Options) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), small_options()).unwrap();
    db.create_table_with("u", two_columns(), TableOptions::default().unlogged())
        .unwrap();
    let t = db.begin().unwrap();
    for i in 0..100 {
        t.insert("u", row(i, "u")).unwrap();
    }
    t.commit().unwrap();
    db.close().unwrap();
    assert!(
        Database::open(dir.path(), bad).is_err(),
        "the bad open was to fail"
    );
    let db = Database::open(dir.path(), small_options()).unwrap();
    let n = db.read().unwrap().scan("u").unwrap().count();
    db.close().unwrap();
    n
}

#[test]
fn an_open_failing_on_the_wal_segment_size_keeps_unlogged_rows() {
    let n = unlogged_rows_after_a_failed_open(small_options().wal_segment_size(1 << 22));
    assert_eq!(n, 100);
}

#[test]
fn an_open_failing_on_the_partition_floor_keeps_unlogged_rows() {
    let n = unlogged_rows_after_a_failed_open(small_options().partition_floor(Some(0)));
    assert_eq!(n, 100);
}
