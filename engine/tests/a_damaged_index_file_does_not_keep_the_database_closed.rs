//! A damaged index can be dropped or rebuilt without the
//! whole database refusing to open (open it marked invalid, as PostgreSQL
//! does with `indisvalid`). Before the fix, an index file deleted, truncated to 0 or
//! with its meta page zeroed while the database is closed fails every open
//! (`could not open index "t_id": ...`): the table and every other table
//! are unreachable, and the index cannot be dropped or rebuilt.
//! Expected: the open succeeds, the table's rows are readable by scan, and
//! `drop_index` followed by `create_index` gives a clean index.

mod common;

use std::os::unix::fs::FileExt;

use common::{row, small_options, two_columns};
use engine::Database;

fn damaged_index_then_open(how: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), small_options()).unwrap();
    db.create_table("t", two_columns()).unwrap();
    let ix = db.create_index("t_id", "t", "id", true).unwrap().rel.0;
    let t = db.begin().unwrap();
    for i in 0..2_000 {
        t.insert("t", row(i, "x")).unwrap();
    }
    t.commit().unwrap();
    db.close().unwrap();
    let p = dir.path().join("base").join(ix.to_string());
    match how {
        "deleted" => std::fs::remove_file(&p).unwrap(),
        "truncated to 0" => std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(0)
            .unwrap(),
        "meta page zeroed" => std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .write_all_at(&[0u8; 8192], 0)
            .unwrap(),
        _ => unreachable!(),
    }
    let db = Database::open(dir.path(), small_options())
        .map_err(|e| format!("index file {how}: open: {e:#}"))?;
    let rows = db.read().unwrap().scan("t").unwrap().count();
    if rows != 2_000 {
        return Err(format!("index file {how}: {rows} rows"));
    }
    db.drop_index("t_id")
        .map_err(|e| format!("index file {how}: drop_index: {e:#}"))?;
    db.create_index("t_id", "t", "id", true)
        .map_err(|e| format!("index file {how}: create_index: {e:#}"))?;
    match db.verify_indexes("t") {
        Ok(v) if v.is_empty() => Ok(()),
        other => Err(format!("index file {how}: verify {other:?}")),
    }
}

#[test]
fn a_damaged_index_file_leaves_the_database_openable_and_the_index_rebuildable() {
    let bad: Vec<String> = ["deleted", "truncated to 0", "meta page zeroed"]
        .into_iter()
        .filter_map(|how| damaged_index_then_open(how).err())
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
}
