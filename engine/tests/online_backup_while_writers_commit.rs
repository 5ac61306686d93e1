//! `Database::backup_to` while four writers commit: the copy opens and
//! recovers; every transaction that committed before the backup began is
//! in it, none is half in it, and its indexes verify clean. With
//! `full_page_writes` off too (the backup forces images on while it runs).
//! A target that is not new or empty is refused, and a copy whose WAL was
//! cut short does not open.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{BACKUP_LABEL_FILE, BackupProgress, Database, EngineError, Options, Value};

const WRITERS: i64 = 4;
const ACCOUNTS: i64 = 20_000;
/// Transaction `s` of writer `w` inserts log rows `id(w, s)` and
/// `-id(w, s)` and sets the writer's counter row to `s + 1`.
fn id(w: i64, s: i64) -> i64 {
    (w + 1) * 1_000_000 + s
}

fn setup(dir: &Path, opts: Options) -> Database {
    let db = Database::open(dir, opts).unwrap();
    db.create_table("acct", two_columns()).unwrap();
    db.create_index("acct_id", "acct", "id", true).unwrap();
    db.create_table("log", two_columns()).unwrap();
    db.create_index("log_id", "log", "id", false).unwrap();
    let filler = "f".repeat(100);
    db.bulk_load(
        "acct",
        (0..ACCOUNTS + WRITERS).map(|i| row(i, if i >= ACCOUNTS { "0" } else { &filler })),
        |_| {},
    )
    .unwrap();
    db
}

fn text(v: &Value) -> String {
    String::from_utf8(v.as_bytes().unwrap().to_vec()).unwrap()
}

fn backup_while_writing(opts: Options) {
    let src = tempfile::tempdir().unwrap();
    let backups = tempfile::tempdir().unwrap();
    let target = backups.path().join("copy");
    let db = setup(src.path(), opts.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let committed: Arc<Mutex<Vec<Vec<i64>>>> =
        Arc::new(Mutex::new(vec![Vec::new(); WRITERS as usize]));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (db, stop, committed) = (db.clone(), stop.clone(), committed.clone());
            std::thread::spawn(move || {
                let mut s = 0i64;
                while !stop.load(Ordering::Relaxed) {
                    db.transaction(|t| {
                        t.insert("log", row(id(w, s), "a"))?;
                        // Touch accounts all over the table, so pages are
                        // written while the backup copies them.
                        let a = (s * 7_919 + w * 104_729) % ACCOUNTS;
                        if let Some((rid, r)) = t.get_by_key("acct", "id", &Value::I64(a))? {
                            t.update("acct", rid, r)?;
                        }
                        let (rid, _) = t
                            .get_by_key("acct", "id", &Value::I64(ACCOUNTS + w))?
                            .expect("the writer's counter row");
                        t.update("acct", rid, row(ACCOUNTS + w, &(s + 1).to_string()))?;
                        t.insert("log", row(-id(w, s), "b"))?;
                        Ok(())
                    })
                    .unwrap();
                    committed.lock().unwrap()[w as usize].push(s);
                    s += 1;
                }
            })
        })
        .collect();
    // Every writer has committed some transactions before the backup.
    while committed.lock().unwrap().iter().any(|c| c.len() < 20) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let before: Vec<Vec<i64>> = committed.lock().unwrap().clone();
    let mut reports: Vec<BackupProgress> = Vec::new();
    let done = db.backup_to(&target, |p| reports.push(*p)).unwrap();
    let during: usize = committed
        .lock()
        .unwrap()
        .iter()
        .zip(&before)
        .map(|(now, then)| now.len() - then.len())
        .sum();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert!(during > 0, "the writers kept committing during the backup");
    assert!(done.done && reports.last() == Some(&done));
    assert_eq!(done.files_done, done.files);
    assert!(
        done.files >= 6,
        "clog, catalog, 2 tables, 2 indexes: {done:?}"
    );
    assert!(
        done.end_lsn > done.redo_lsn && done.wal_bytes > 0,
        "{done:?}"
    );
    assert!(target.join(BACKUP_LABEL_FILE).is_file());
    let all: Vec<HashSet<i64>> = committed
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.iter().copied().collect())
        .collect();
    db.close().unwrap();

    let copy = Database::open(&target, opts).unwrap();
    assert!(copy.recovery_stats().records > 0, "the copy recovered");
    assert!(!target.join(BACKUP_LABEL_FILE).exists(), "label removed");
    let t = copy.begin().unwrap();
    // Log rows by writer: a pair per transaction, never one alone.
    let mut present: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    let mut halves: BTreeMap<i64, u8> = BTreeMap::new();
    for r in t.scan("log").unwrap() {
        let (_, r) = r.unwrap();
        let v = r[0].as_i64().unwrap();
        let name = text(&r[1]);
        assert_eq!(name, if v > 0 { "a" } else { "b" });
        *halves.entry(v.abs()).or_default() += 1;
    }
    for (v, n) in &halves {
        assert_eq!(*n, 2, "transaction {v} is half in the copy");
        let (w, s) = (v / 1_000_000 - 1, v % 1_000_000);
        assert!(all[w as usize].contains(&s), "{v} never committed");
        present.entry(w).or_default().push(s);
    }
    for w in 0..WRITERS {
        let mut got = present.remove(&w).unwrap_or_default();
        got.sort_unstable();
        // A writer commits in order: the copy holds a prefix of its
        // transactions, at least every one committed before the backup.
        assert!(
            got.len() >= before[w as usize].len(),
            "writer {w}: {} of the {} committed before the backup",
            got.len(),
            before[w as usize].len()
        );
        assert_eq!(got, (0..got.len() as i64).collect::<Vec<_>>());
        let (_, counter) = t
            .get_by_key("acct", "id", &Value::I64(ACCOUNTS + w))
            .unwrap()
            .unwrap();
        assert_eq!(
            text(&counter[1]),
            got.len().to_string(),
            "writer {w}'s counter"
        );
    }
    assert_eq!(t.scan("acct").unwrap().count() as i64, ACCOUNTS + WRITERS);
    drop(t);
    for table in ["acct", "log"] {
        let v = copy.verify_indexes(table).unwrap();
        assert!(v.is_empty(), "{table}: {v:?}");
    }
    // The copy is a database of its own: it takes writes and closes.
    copy.transaction(|t| t.insert("log", row(0, "after")).map(drop))
        .unwrap();
    copy.close().unwrap();
}

#[test]
fn a_backup_taken_while_four_writers_commit_holds_every_earlier_commit_and_no_half_transaction() {
    watchdog(Duration::from_secs(300), || {
        backup_while_writing(small_options().pool_buffers(128))
    });
}

#[test]
fn a_backup_with_full_page_writes_off_is_as_consistent() {
    watchdog(Duration::from_secs(300), || {
        backup_while_writing(small_options().pool_buffers(128).full_page_writes(false))
    });
}

#[test]
fn a_backup_into_a_non_empty_directory_or_the_data_directory_is_refused() {
    let src = tempfile::tempdir().unwrap();
    let db = Database::open(src.path(), small_options()).unwrap();
    db.create_table("t", two_columns()).unwrap();
    let backups = tempfile::tempdir().unwrap();
    let full = backups.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep.txt"), b"mine").unwrap();
    let e = db.backup_to(&full, |_| {}).unwrap_err();
    assert!(matches!(e, EngineError::BackupTarget { .. }), "{e:?}");
    assert!(
        e.to_string().contains("not empty") && e.to_string().contains("full"),
        "{e}"
    );
    let names: Vec<_> = std::fs::read_dir(&full)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("keep.txt")],
        "nothing written"
    );
    let file = backups.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let e = db.backup_to(&file, |_| {}).unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");
    let inside = src.path().join("backup");
    let e = db.backup_to(&inside, |_| {}).unwrap_err();
    assert!(e.to_string().contains("inside the data directory"), "{e}");
    assert!(!inside.exists());
    // An empty directory is fine.
    let empty = backups.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    db.backup_to(&empty, |_| {}).unwrap();
    db.close().unwrap();
    let copy = Database::open(&empty, small_options()).unwrap();
    assert!(copy.table("t").is_ok());
}

/// The copy's WAL cut short (its last bytes zeroed): recovery stops before
/// the backup's end LSN, and the open is an error naming both, not a copy
/// older than the pages it holds.
#[test]
fn a_backup_whose_wal_was_cut_short_does_not_open() {
    let src = tempfile::tempdir().unwrap();
    let db = Database::open(src.path(), small_options()).unwrap();
    db.create_table("t", two_columns()).unwrap();
    let backups = tempfile::tempdir().unwrap();
    let target = backups.path().join("copy");
    // Writes after the backup's checkpoint are in the WAL it copies: a
    // writer thread commits while it runs.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) || i < 50 {
                db.transaction(|t| t.insert("t", row(i, "x")).map(drop))
                    .unwrap();
                i += 1;
            }
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let done = db.backup_to(&target, |_| {}).unwrap();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    db.close().unwrap();
    assert!(done.end_lsn > done.redo_lsn, "{done:?}");
    let seg = 1u64 << 20;
    let cut = done.end_lsn.0 - (done.end_lsn.0 - done.redo_lsn.0).min(200);
    let file = target.join("wal").join(format!("{:016X}", cut - cut % seg));
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    use std::os::unix::fs::FileExt;
    let zeros = vec![0u8; (done.end_lsn.0 - cut) as usize];
    f.write_all_at(&zeros, cut % seg).unwrap();
    drop(f);
    let e = Database::open(&target, small_options()).unwrap_err();
    assert!(e.to_string().contains("must reach"), "{e}");
}

/// Unlogged tables are copied empty (their pages have no WAL to repair a
/// torn copy): in the copy they are empty, usable, and their indexes
/// verify clean; logged tables keep their rows.
#[test]
fn unlogged_tables_are_empty_in_the_copy_and_usable() {
    let src = tempfile::tempdir().unwrap();
    let db = Database::open(src.path(), small_options()).unwrap();
    db.create_table("kept", two_columns()).unwrap();
    db.create_table_with(
        "scratch",
        two_columns(),
        engine::TableOptions::default().unlogged(),
    )
    .unwrap();
    db.create_index("scratch_id", "scratch", "id", true)
        .unwrap();
    db.transaction(|t| {
        for i in 0..500 {
            t.insert("kept", row(i, "k"))?;
            t.insert("scratch", row(i, "s"))?;
        }
        Ok(())
    })
    .unwrap();
    let backups = tempfile::tempdir().unwrap();
    let target = backups.path().join("copy");
    db.backup_to(&target, |_| {}).unwrap();
    db.close().unwrap();
    let copy = Database::open(&target, small_options()).unwrap();
    let counts = copy
        .read_transaction(|t| Ok((t.scan("kept")?.count(), t.scan("scratch")?.count())))
        .unwrap();
    assert_eq!(counts, (500, 0));
    copy.transaction(|t| t.insert("scratch", row(1, "again")).map(drop))
        .unwrap();
    assert!(copy.verify_indexes("scratch").unwrap().is_empty());
}
