//! The `wal/` directory deleted, or its segment deleted or truncated, while
//! the database is closed: the open fails with an error naming the file
//! (before: a panic, `assertion failed: offset <= len` in wal's reader).

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{row, small_options, two_columns};
use engine::Database;

fn make(dir: &Path) {
    let db = Database::open(dir, small_options()).unwrap();
    db.create_table("t", two_columns()).unwrap();
    let t = db.begin().unwrap();
    for i in 0..100 {
        t.insert("t", row(i, "row")).unwrap();
    }
    t.commit().unwrap();
    db.close().unwrap();
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn open_error(dir: &Path) -> String {
    match Database::open(dir, small_options()) {
        Ok(_) => panic!("opened a data directory whose WAL is damaged"),
        Err(e) => {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text.push_str(": ");
                text.push_str(&s.to_string());
                source = s.source();
            }
            text
        }
    }
}

#[test]
fn a_deleted_wal_directory_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    fs::remove_dir_all(dir.path().join("wal")).unwrap();
    let e = open_error(dir.path());
    assert!(
        e.contains(&dir.path().join("wal").display().to_string()),
        "{e}"
    );
}

#[test]
fn the_last_segment_deleted_or_truncated_is_an_error_naming_it() {
    for damage in ["delete", "truncate to 0", "truncate to 100 bytes"] {
        let dir = tempfile::tempdir().unwrap();
        make(dir.path());
        // The segment holding the shutdown checkpoint, the redo point.
        let last = segments(dir.path()).pop().unwrap();
        match damage {
            "delete" => fs::remove_file(&last).unwrap(),
            "truncate to 0" => fs::write(&last, b"").unwrap(),
            _ => fs::OpenOptions::new()
                .write(true)
                .open(&last)
                .unwrap()
                .set_len(100)
                .unwrap(),
        }
        let e = open_error(dir.path());
        assert!(e.contains(&last.display().to_string()), "{damage}: {e}");
    }
}
