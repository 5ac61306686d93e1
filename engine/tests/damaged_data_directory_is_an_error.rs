//! A damaged or incomplete data directory is an error naming the file,
//! never an empty database: each file kind (clog, catalog, table, index,
//! the WAL directory, a WAL segment, the control file) deleted, truncated
//! or zeroed while the database is closed. The open fails naming the file
//! and leaves every file as it was (an index opens marked invalid instead,
//! and can be dropped and rebuilt). An open that fails does not consume the
//! clean-shutdown marker, so it does not empty unlogged tables; and a file
//! the catalog lost is never removed as an orphan.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, EngineError, ErrorKind, TableOptions, Value};

const ROWS: i64 = 600;
const UNLOGGED_ROWS: i64 = 100;

/// Every file under `dir` (relative path -> bytes), `LOCK` left out.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else if p.file_name().unwrap() != "LOCK" {
                out.insert(
                    p.strip_prefix(root).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &target);
        } else {
            std::fs::copy(&p, &target).unwrap();
        }
    }
}

/// A closed database: table `t` (ROWS rows, unique index `t_id`) and an
/// unlogged table `u`. Returns the relative paths of the table's and the
/// index's files.
fn build(dir: &Path) -> (PathBuf, PathBuf) {
    let db = Database::open(dir, small_options()).unwrap();
    let t = db.create_table("t", two_columns()).unwrap();
    let ix = db.create_index("t_id", "t", "id", true).unwrap();
    db.create_table_with("u", two_columns(), TableOptions::default().unlogged())
        .unwrap();
    db.bulk_load("t", (0..ROWS).map(|i| row(i, "some text")), |_| {})
        .unwrap();
    db.bulk_load("u", (0..UNLOGGED_ROWS).map(|i| row(i, "u")), |_| {})
        .unwrap();
    db.close().unwrap();
    (
        PathBuf::from(format!("base/{}", t.rel.0)),
        PathBuf::from(format!("base/{}", ix.rel.0)),
    )
}

#[derive(Copy, Clone, Debug)]
enum Damage {
    Delete,
    Truncate,
    Zero,
}

/// Apply `damage` to the file (or every file of the directory) `p`.
fn damage(p: &Path, d: Damage) {
    if p.is_dir() {
        match d {
            Damage::Delete => std::fs::remove_dir_all(p).unwrap(),
            _ => {
                for e in std::fs::read_dir(p).unwrap() {
                    damage(&e.unwrap().path(), d);
                }
            }
        }
        return;
    }
    let len = std::fs::metadata(p).unwrap().len();
    match d {
        Damage::Delete => std::fs::remove_file(p).unwrap(),
        Damage::Truncate => {
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(len / 2).unwrap();
        }
        Damage::Zero => std::fs::write(p, vec![0u8; len as usize]).unwrap(),
    }
}

/// The newest WAL segment (the one the control file's redo point is in).
fn last_segment(dir: &Path) -> PathBuf {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    names
        .pop()
        .unwrap()
        .strip_prefix(dir)
        .unwrap()
        .to_path_buf()
}

#[test]
fn each_damaged_file_kind_is_an_error_naming_it() {
    watchdog(Duration::from_secs(240), || {
        let scratch = tempfile::tempdir().unwrap();
        let clean = scratch.path().join("clean");
        let (table_file, _) = build(&clean);
        let segment = last_segment(&clean);
        let kinds: Vec<(&str, PathBuf)> = vec![
            ("clog", PathBuf::from("base/1")),
            ("catalog", PathBuf::from("base/2")),
            ("table", table_file.clone()),
            ("wal dir", PathBuf::from("wal")),
            ("wal segment", segment),
            ("control file", PathBuf::from("control")),
        ];
        let mut report = Vec::new();
        for (n, (kind, file)) in kinds.iter().enumerate() {
            for d in [Damage::Delete, Damage::Truncate, Damage::Zero] {
                let dir = scratch.path().join(format!("case{n}-{d:?}"));
                copy_dir(&clean, &dir);
                damage(&dir.join(file), d);
                let before = snapshot(&dir);
                let name = file.file_name().unwrap().to_str().unwrap();
                let result = Database::open(&dir, small_options());
                let msg = match result {
                    Err(e) => {
                        assert_ne!(e.kind(), ErrorKind::BadInput, "{kind} {d:?}: {e}");
                        e.to_string()
                    }
                    // A zeroed table reads as an error on first use.
                    Ok(db) if *kind == "table" && matches!(d, Damage::Zero) => {
                        let t = db.read().unwrap();
                        let e = t
                            .scan_each("t", |_| Ok(()))
                            .expect_err("a scan of a zeroed table must fail");
                        drop(t);
                        drop(db);
                        e.to_string()
                    }
                    Ok(db) => {
                        let t = db.read().unwrap();
                        let rows = t.scan("t").map(|s| s.count());
                        panic!("{kind} {d:?}: the open succeeded (table t scans {rows:?} rows)");
                    }
                };
                assert!(
                    msg.contains(name),
                    "{kind} {d:?}: the error does not name {name}: {msg}"
                );
                report.push(format!("{kind:>12} {d:?}: {msg}"));
                if !(*kind == "table" && matches!(d, Damage::Zero)) {
                    let after = snapshot(&dir);
                    let changed: Vec<&PathBuf> = before
                        .keys()
                        .chain(after.keys())
                        .filter(|k| before.get(*k) != after.get(*k))
                        .collect();
                    assert!(
                        changed.is_empty(),
                        "{kind} {d:?}: the failed open changed {changed:?} ({msg})"
                    );
                }
            }
        }
        for line in report {
            println!("{line}");
        }
    });
}

/// A damaged index does not stop the open: it opens invalid, reads do not
/// use it, the table reads whole, and drop + create rebuilds it.
#[test]
fn a_damaged_index_opens_invalid_and_can_be_rebuilt() {
    watchdog(Duration::from_secs(120), || {
        let scratch = tempfile::tempdir().unwrap();
        let clean = scratch.path().join("clean");
        let (_, index_file) = build(&clean);
        for d in [Damage::Delete, Damage::Truncate, Damage::Zero] {
            let dir = scratch.path().join(format!("{d:?}"));
            copy_dir(&clean, &dir);
            damage(&dir.join(&index_file), d);
            let db = Database::open(&dir, small_options()).unwrap();
            let invalid = db.invalid_indexes();
            assert_eq!(invalid.len(), 1, "{d:?}");
            let name = index_file.file_name().unwrap().to_str().unwrap();
            assert!(
                invalid[0].0.name == "t_id" && invalid[0].1.contains(name),
                "{d:?}: {invalid:?}"
            );
            assert!(db.indexes().is_empty(), "{d:?}");
            // Reads go to the heap; the index is named as invalid.
            let t = db.read().unwrap();
            assert_eq!(t.scan("t").unwrap().count(), ROWS as usize, "{d:?}");
            let e = t.index_lookup("t_id", &Value::I64(1)).unwrap_err();
            assert!(e.to_string().contains("invalid"), "{d:?}: {e}");
            drop(t);
            // Writes work without it; drop and create rebuilds it.
            let t = db.begin().unwrap();
            t.insert("t", row(ROWS, "new")).unwrap();
            t.commit().unwrap();
            db.drop_index("t_id").unwrap();
            assert!(db.invalid_indexes().is_empty());
            db.create_index("t_id", "t", "id", true).unwrap();
            assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
            let t = db.read().unwrap();
            let (_, got) = t.get_by_key("t", "id", &Value::I64(ROWS)).unwrap().unwrap();
            assert_eq!(got, row(ROWS, "new"));
            drop(t);
            db.close().unwrap();
            let db = Database::open(&dir, small_options()).unwrap();
            assert!(db.invalid_indexes().is_empty());
            assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
            db.close().unwrap();
        }
    });
}

/// A catalog that lost a table (an older copy of its file put back): the
/// table's file is not an orphan to remove; the open fails and keeps it.
#[test]
fn a_file_the_catalog_lost_is_not_removed() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("a", two_columns()).unwrap();
        db.close().unwrap();
        let old_catalog = std::fs::read(dir.path().join("base/2")).unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        let b = db.create_table("b", two_columns()).unwrap();
        let t = db.begin().unwrap();
        t.insert("b", row(1, "kept")).unwrap();
        t.commit().unwrap();
        db.close().unwrap();
        let b_file = dir.path().join(format!("base/{}", b.rel.0));
        assert!(b_file.exists());
        assert_eq!(
            std::fs::metadata(dir.path().join("base/2")).unwrap().len(),
            old_catalog.len() as u64
        );
        std::fs::write(dir.path().join("base/2"), &old_catalog).unwrap();
        let e = Database::open(dir.path(), small_options()).unwrap_err();
        assert!(matches!(e, EngineError::CorruptCatalog { .. }), "{e}");
        assert!(
            e.to_string().contains("\"b\"")
                && e.to_string().contains("no relation file was removed"),
            "{e}"
        );
        assert!(b_file.exists(), "the table's file was removed");
    });
}

/// An open that fails (a wrong WAL segment size) leaves the clean-shutdown
/// marker: the next correct open keeps the unlogged table's rows.
/// `partition_floor(Some(0))` is refused by `validate()`.
#[test]
fn a_failed_open_does_not_empty_unlogged_tables() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        build(dir.path());
        let e = Database::open(dir.path(), small_options().wal_segment_size(4 << 20)).unwrap_err();
        assert_ne!(e.kind(), ErrorKind::Conflict, "{e}");
        let db = Database::open(dir.path(), small_options()).unwrap();
        let t = db.read().unwrap();
        assert_eq!(t.scan("u").unwrap().count(), UNLOGGED_ROWS as usize);
        drop(t);
        db.close().unwrap();
        let e = small_options()
            .partition_floor(Some(0))
            .validate()
            .unwrap_err();
        assert!(
            matches!(
                e,
                EngineError::InvalidOption {
                    option: "partition_floor",
                    ..
                }
            ),
            "{e}"
        );
        assert!(Database::open(dir.path(), small_options().partition_floor(Some(0))).is_err());
        let db = Database::open(dir.path(), small_options()).unwrap();
        let t = db.read().unwrap();
        assert_eq!(t.scan("u").unwrap().count(), UNLOGGED_ROWS as usize);
        assert_eq!(t.scan("t").unwrap().count(), ROWS as usize);
        drop(t);
        db.close().unwrap();
    });
}
