//! A damaged or incomplete data directory is an error, never an empty
//! database. Closed cleanly after 2,100 committed rows in one indexed table,
//! then one file deleted or truncated while closed. Before the fix:
//!
//! - the commit log `base/1` deleted or truncated: the open succeeds with
//!   **zero tables** (every xid reads as not committed, so the catalog looks
//!   empty), and the table's and index's files are deleted as orphans;
//! - the catalog `base/2` deleted or truncated: the same, zero tables and
//!   the table's and index's files deleted;
//! - the table's file deleted or truncated: the open succeeds, scans return
//!   `Ok` with 0 (or 1,070) of 2,100 rows, `verify_indexes` reports the
//!   rest as violations.
//!
//! Now each open fails with an error naming the file (what was
//! expected of it), or opens with every row; no relation file is removed.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::Database;

const ROWS: usize = 2_100;

/// Table `t` (relation file `base/<rel>`) with index `t_id`; returns the
/// table's relation number.
fn build(dir: &Path) -> u32 {
    let db = Database::open(dir, small_options()).unwrap();
    let rel = db.create_table("t", two_columns()).unwrap().rel.0;
    db.create_index("t_id", "t", "id", true).unwrap();
    let t = db.begin().unwrap();
    for i in 0..2_000 {
        t.insert("t", row(i, "xxxxxxxxxxxxxxxxxxxxxxxx")).unwrap();
    }
    t.commit().unwrap();
    db.checkpoint().unwrap();
    let t = db.begin().unwrap();
    for i in 2_000..ROWS as i64 {
        t.insert("t", row(i, "y")).unwrap();
    }
    t.commit().unwrap();
    db.close().unwrap();
    rel
}

/// Damage `file` (relative to the data directory) as `how` says, open,
/// and describe what went wrong (None: an error naming the file, or every
/// row there and no relation file gone).
fn damage_and_open(file: impl Fn(u32) -> String, how: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let rel = build(dir.path());
    let file = file(rel);
    let p = dir.path().join(&file);
    let before: Vec<_> = std::fs::read_dir(dir.path().join("base"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy() != file.trim_start_matches("base/"))
        .collect();
    let len = std::fs::metadata(&p).unwrap().len();
    match how {
        "deleted" => std::fs::remove_file(&p).unwrap(),
        "truncated to 0" => std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(0)
            .unwrap(),
        "truncated to half" => std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(len / 2 / 8192 * 8192)
            .unwrap(),
        _ => unreachable!(),
    }
    let case = format!("{file} {how}");
    let db = match Database::open(dir.path(), small_options()) {
        Err(e) => {
            let msg = format!("{e:#}");
            return (!msg.contains(file.trim_start_matches("base/")))
                .then(|| format!("{case}: the error does not name the file: {msg}"));
        }
        Ok(db) => db,
    };
    let mut wrong = vec![];
    let gone: Vec<_> = before
        .iter()
        .filter(|n| !dir.path().join("base").join(n).exists())
        .collect();
    if !gone.is_empty() {
        wrong.push(format!("files removed at the open: {gone:?}"));
    }
    if db.tables().is_empty() {
        wrong.push("opened with zero tables".into());
    } else {
        let rows = db
            .read()
            .unwrap()
            .scan("t")
            .map(|it| it.filter(|r| r.is_ok()).count());
        if !matches!(rows, Ok(ROWS)) {
            wrong.push(format!("scan: {rows:?} of {ROWS} rows"));
        }
        if let Ok(v) = db.verify_indexes("t")
            && !v.is_empty()
        {
            wrong.push(format!("verify_indexes: {} violations", v.len()));
        }
    }
    (!wrong.is_empty()).then(|| format!("{case}: opened: {}", wrong.join("; ")))
}

fn check(file: impl Fn(u32) -> String + Copy) {
    let bad: Vec<String> = ["deleted", "truncated to 0", "truncated to half"]
        .into_iter()
        .filter_map(|how| damage_and_open(file, how))
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn a_missing_or_truncated_commit_log_fails_the_open() {
    watchdog(Duration::from_secs(60), || check(|_| "base/1".into()));
}

#[test]
fn a_missing_or_truncated_catalog_fails_the_open() {
    watchdog(Duration::from_secs(60), || check(|_| "base/2".into()));
}

#[test]
fn a_missing_or_truncated_table_file_fails_the_open() {
    watchdog(Duration::from_secs(60), || {
        check(|rel| format!("base/{rel}"))
    });
}
