//! Backups of sources other tests do not use: unlogged tables with
//! indexes, a temporary database, a copy of a copy, a tiny pool with
//! writers, and copies damaged after they were written. Each copy opens
//! with exactly what committed before its backup (or, damaged, fails to
//! open with an error naming what is wrong); each case under a time limit.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, EngineError, Options, TableOptions, Value};

const LIMIT: Duration = Duration::from_secs(120);

fn count(db: &Database, table: &str) -> usize {
    db.read_transaction(|t| Ok(t.scan(table)?.count())).unwrap()
}

fn has_key(db: &Database, key: i64) -> bool {
    db.read_transaction(|t| Ok(t.get_by_key("t", "id", &Value::I64(key))?.is_some()))
        .unwrap()
}

fn source(dir: &Path, opts: Options) -> Database {
    let db = Database::open(dir, opts).unwrap();
    db.create_table("t", two_columns()).unwrap();
    db.create_index("t_id", "t", "id", true).unwrap();
    db.create_table_with("u", two_columns(), TableOptions::default().unlogged())
        .unwrap();
    db.create_index("u_id", "u", "id", true).unwrap();
    db.bulk_load("t", (0..2_000).map(|i| row(i, "t")), |_| {})
        .unwrap();
    db.transaction(|t| {
        for i in 0..300 {
            t.insert("u", row(i, "u"))?;
        }
        Ok(())
    })
    .unwrap();
    db
}

#[test]
fn a_copy_with_unlogged_tables_opens_them_empty_and_their_indexes_work() {
    watchdog(LIMIT, || {
        let src = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let db = source(src.path(), small_options());
        let copy = out.path().join("copy");
        db.backup_to(&copy, |_| {}).unwrap();
        let c = Database::open(&copy, small_options()).unwrap();
        assert_eq!(count(&c, "t"), 2_000);
        assert_eq!(count(&c, "u"), 0);
        c.transaction(|t| {
            for i in 0..300 {
                t.insert("u", row(i, "again"))?;
            }
            Ok(())
        })
        .unwrap();
        let got = c
            .read_transaction(|t| Ok(t.get_by_key("u", "id", &Value::I64(7))?.is_some()))
            .unwrap();
        assert!(got);
        assert!(c.verify_indexes("u").unwrap().is_empty());
        assert!(c.verify_indexes("t").unwrap().is_empty());
        // The source keeps its unlogged rows.
        assert_eq!(count(&db, "u"), 300);
    });
}

#[test]
fn a_copy_of_a_reopened_copy_holds_the_writes_made_on_the_first_copy() {
    watchdog(LIMIT, || {
        let src = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let db = source(src.path(), small_options());
        let first = out.path().join("first");
        db.backup_to(&first, |_| {}).unwrap();
        drop(db);
        let c1 = Database::open(&first, small_options()).unwrap();
        c1.transaction(|t| t.insert("t", row(50_000, "on the copy")).map(|_| ()))
            .unwrap();
        let second = out.path().join("second");
        c1.backup_to(&second, |_| {}).unwrap();
        drop(c1);
        let c2 = Database::open(&second, small_options()).unwrap();
        assert_eq!(count(&c2, "t"), 2_001);
        assert!(has_key(&c2, 50_000));
        assert!(c2.verify_indexes("t").unwrap().is_empty());
    });
}

#[test]
fn a_temporary_database_backs_up_to_a_copy_that_outlives_it() {
    watchdog(LIMIT, || {
        let out = tempfile::tempdir().unwrap();
        let db = Database::open_temporary(small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        db.bulk_load("t", (0..500).map(|i| row(i, "x")), |_| {})
            .unwrap();
        let inside = db.dir().join("backup");
        let e = db.backup_to(&inside, |_| {}).unwrap_err();
        assert!(matches!(e, EngineError::BackupTarget { .. }), "{e}");
        let copy = out.path().join("copy");
        db.backup_to(&copy, |_| {}).unwrap();
        let tmp = db.dir().to_path_buf();
        drop(db);
        assert!(!tmp.exists());
        let c = Database::open(&copy, small_options()).unwrap();
        assert_eq!(count(&c, "t"), 500);
        assert!(!c.is_temporary());
    });
}

#[test]
fn a_backup_through_a_tiny_pool_while_writers_commit_holds_every_earlier_commit() {
    watchdog(Duration::from_secs(300), || {
        let src = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let opts = small_options()
            .pool_buffers(16)
            .full_page_writes(false)
            .autovacuum(true);
        let db = source(src.path(), opts.clone());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writers: Vec<_> = (0..2i64)
            .map(|w| {
                let (db, stop) = (db.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut done = Vec::new();
                    let mut s = 0i64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let key = 100_000 * (w + 1) + s;
                        db.transaction(|t| {
                            t.insert("t", row(key, "w"))?;
                            if let Some((rid, r)) =
                                t.get_by_key("t", "id", &Value::I64(s % 2_000))?
                            {
                                t.update("t", rid, r)?;
                            }
                            Ok(())
                        })
                        .unwrap();
                        done.push(key);
                        s += 1;
                    }
                    done
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let before = count(&db, "t");
        let copy = out.path().join("copy");
        db.backup_to(&copy, |_| {}).unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in writers {
            w.join().unwrap();
        }
        let c = Database::open(&copy, opts).unwrap();
        let n = count(&c, "t");
        assert!(
            n >= before,
            "the copy has {n} rows, {before} committed before it"
        );
        assert!(c.verify_indexes("t").unwrap().is_empty());
    });
}

/// A copy with `file` removed (or, with `cut`, emptied) does not open.
fn damaged_copy_is_refused(file: impl Fn(&Path) -> std::path::PathBuf, cut: bool) -> String {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let db = source(src.path(), small_options());
    let copy = out.path().join("copy");
    db.backup_to(&copy, |_| {}).unwrap();
    let victim = file(&copy);
    assert!(victim.is_file(), "{}", victim.display());
    if cut {
        std::fs::write(&victim, b"").unwrap();
    } else {
        std::fs::remove_file(&victim).unwrap();
    }
    let e = Database::open(&copy, small_options()).unwrap_err();
    e.to_string()
}

fn largest_in(dir: &Path) -> std::path::PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap()
}

#[test]
fn a_copy_missing_its_largest_relation_file_or_wal_segment_does_not_open() {
    watchdog(LIMIT, || {
        for cut in [false, true] {
            let msg = damaged_copy_is_refused(|c| largest_in(&c.join("base")), cut);
            assert!(msg.contains("base"), "{msg}");
            let msg = damaged_copy_is_refused(|c| largest_in(&wal::segment::wal_dir(c)), cut);
            assert!(!msg.is_empty());
        }
    });
}

#[test]
fn a_copy_with_a_garbled_backup_label_does_not_open() {
    watchdog(LIMIT, || {
        let src = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let db = source(src.path(), small_options());
        let copy = out.path().join("copy");
        db.backup_to(&copy, |_| {}).unwrap();
        let label = copy.join(engine::BACKUP_LABEL_FILE);
        std::fs::write(&label, b"redo 1\nend x\n").unwrap();
        let e = Database::open(&copy, small_options()).unwrap_err();
        assert!(e.to_string().contains("BACKUP_LABEL"), "{e}");
        // An end beyond the copied WAL: the WAL "was cut short".
        std::fs::write(&label, format!("redo 1\nend {}\n", u64::MAX / 2)).unwrap();
        let e = Database::open(&copy, small_options()).unwrap_err();
        assert!(e.to_string().contains("BACKUP_LABEL"), "{e}");
    });
}
