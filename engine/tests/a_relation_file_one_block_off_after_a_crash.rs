//! A database closed and opened again, then a crash after a table grew and
//! a checkpoint made its pages durable, then the table's file found one
//! block short, or one block longer (a copy of one of its pages appended),
//! when the database reopens. The open must either hold exactly the
//! acknowledged rows or fail naming the file: never open with fewer
//! committed rows, never with a row twice. A commit-log file a block short
//! is an error too; an index file a block short opens the index invalid.
//!
//! `RELSIZES` only had the lengths of the last open, so before the check of
//! the checkpoint's durable lengths each of the short files opened: the
//! table without the rows of its last page, the commit log without the
//! commits of its last page (their rows gone), the index without entries.
//! And a directory's first run had no `RELSIZES` at all (no control file
//! until its first close), so a file cut after a crash in that run opened
//! without its last page's rows, however the check ran. A file one block
//! longer, a copy of an older page, failed its checksum when read; with
//! checksums off, its rows came back a second time.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, Options, Value};
use wal::sim_disk::SimDisk;

const PAGE: u64 = 8192;

thread_local! {
    /// Page checksums for the databases this thread opens.
    static CHECKSUMS: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

fn options(disk: &SimDisk) -> Options {
    small_options()
        .checksums(CHECKSUMS.get())
        .checkpointer(false)
        .bgwriter(None)
        .async_flush_interval(None)
        .wal_segment_size(wal::MIN_SEGMENT_SIZE)
        .simulated_disk(disk.clone())
}

/// Rows 0..rows of `t` (long names, so a few per page), committed in
/// batches, then a checkpoint, then `after` (more work that is WAL-logged
/// but not checkpointed), then the power goes. Returns the heap file and
/// the acknowledged rows.
fn crashed_after_growth(
    dir: &Path,
    disk: &SimDisk,
    indexed: bool,
    first_run: bool,
    after: impl FnOnce(&Database, &mut BTreeMap<i64, String>),
) -> (PathBuf, BTreeMap<i64, String>) {
    let db = Database::open(dir, options(disk)).unwrap();
    let info = db.create_table("t", two_columns()).unwrap();
    if indexed {
        db.create_index("t_id", "t", "id", true).unwrap();
    }
    // Closed and opened once (the lengths recorded), then the table grows;
    // or, with `first_run`, it grows in the directory's first run.
    let db = if first_run {
        db
    } else {
        db.close().unwrap();
        Database::open(dir, options(disk)).unwrap()
    };
    let mut acked = BTreeMap::new();
    for batch in 0..10 {
        let txn = db.begin().unwrap();
        for i in 0..20 {
            let id = batch * 20 + i;
            let name = format!("row {id} {}", "y".repeat(300));
            txn.insert("t", row(id, &name)).unwrap();
            acked.insert(id, name);
        }
        txn.commit().unwrap();
    }
    db.checkpoint().unwrap();
    after(&db, &mut acked);
    disk.power_loss(7).unwrap();
    drop(db);
    disk.restart();
    (dir.join("base").join(info.rel.0.to_string()), acked)
}

fn rows(db: &Database) -> engine::Result<Vec<(i64, String)>> {
    let r = db.read()?;
    let mut out = Vec::new();
    for item in r.scan("t")? {
        let (_, row) = item?;
        let Value::I64(id) = row[0] else {
            panic!("{row:?}")
        };
        let Value::Bytes(ref b) = row[1] else {
            panic!("{row:?}")
        };
        out.push((id, String::from_utf8(b.clone()).unwrap()));
    }
    Ok(out)
}

/// The open fails naming `file`, or the table holds exactly `acked`.
fn exact_or_error_naming(
    dir: &Path,
    disk: &SimDisk,
    file: &Path,
    acked: &BTreeMap<i64, String>,
    case: &str,
) {
    let name = file.file_name().unwrap().to_string_lossy().to_string();
    match Database::open(dir, options(disk)) {
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains(&name),
                "{case}: the error does not name {name}: {msg}"
            );
            eprintln!("{case}: {msg}");
        }
        Ok(db) => match rows(&db) {
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    msg.contains(&name),
                    "{case}: the scan's error does not name {name}: {msg}"
                );
                eprintln!("{case}: opens, the scan fails: {msg}");
            }
            Ok(got) => {
                let mut seen = BTreeMap::new();
                for (id, n) in &got {
                    assert!(
                        seen.insert(*id, n.clone()).is_none(),
                        "{case}: row {id} twice"
                    );
                }
                assert_eq!(seen.len(), acked.len(), "{case}: rows");
                assert!(seen == *acked, "{case}: the rows differ");
                eprintln!("{case}: opens with every row");
            }
        },
    }
}

fn cut_last_block(file: &Path) {
    let len = std::fs::metadata(file).unwrap().len();
    assert!(len >= 2 * PAGE, "{len}");
    std::fs::OpenOptions::new()
        .write(true)
        .open(file)
        .unwrap()
        .set_len(len - PAGE)
        .unwrap();
}

fn append_copy_of_block(file: &Path, block: u64) {
    let bytes = std::fs::read(file).unwrap();
    let page = bytes[(block * PAGE) as usize..((block + 1) * PAGE) as usize].to_vec();
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(file)
        .unwrap()
        .write_all(&page)
        .unwrap();
}

#[test]
fn a_table_file_one_block_short_after_a_checkpoint_and_a_crash() {
    watchdog(Duration::from_secs(60), || {
        for indexed in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let disk = SimDisk::new();
            let (file, acked) = crashed_after_growth(dir.path(), &disk, indexed, false, |_, _| {});
            cut_last_block(&file);
            exact_or_error_naming(
                dir.path(),
                &disk,
                &file,
                &acked,
                &format!("short, indexed {indexed}"),
            );
        }
    });
}

#[test]
fn a_table_file_one_block_short_after_later_commits_elsewhere() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        // After the checkpoint, commits that touch the first page only.
        let (file, acked) = crashed_after_growth(dir.path(), &disk, true, false, |db, acked| {
            let txn = db.begin().unwrap();
            txn.delete_by_key("t", "id", &Value::I64(0)).unwrap();
            txn.commit().unwrap();
            acked.remove(&0);
        });
        cut_last_block(&file);
        exact_or_error_naming(dir.path(), &disk, &file, &acked, "short, later commits");
    });
}

#[test]
fn a_table_file_one_block_longer_after_a_crash() {
    watchdog(Duration::from_secs(60), || {
        for block in [0, 3] {
            for checksums in [true, false] {
                CHECKSUMS.set(checksums);
                one_block_longer(block, checksums);
            }
        }
    });
}

fn one_block_longer(block: u64, checksums: bool) {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimDisk::new();
    let (file, acked) = crashed_after_growth(dir.path(), &disk, true, false, |_, _| {});
    append_copy_of_block(&file, block);
    exact_or_error_naming(
        dir.path(),
        &disk,
        &file,
        &acked,
        &format!("longer by a copy of block {block}, checksums {checksums}"),
    );
}

#[test]
fn an_index_file_one_block_short_after_a_crash_opens_invalid() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        let (_, acked) = crashed_after_growth(dir.path(), &disk, true, false, |_, _| {});
        let index_file = {
            let db = Database::open(dir.path(), options(&disk)).unwrap();
            let rel = db.indexes().iter().find(|i| i.name == "t_id").unwrap().rel;
            db.close().unwrap();
            dir.path().join("base").join(rel.0.to_string())
        };
        // Crash again after more rows, then cut the index.
        let db = Database::open(dir.path(), options(&disk)).unwrap();
        let mut acked = acked;
        let txn = db.begin().unwrap();
        for id in 1000..1400 {
            txn.insert("t", row(id, "more")).unwrap();
            acked.insert(id, "more".into());
        }
        txn.commit().unwrap();
        db.checkpoint().unwrap();
        disk.power_loss(3).unwrap();
        drop(db);
        disk.restart();
        cut_last_block(&index_file);
        let db = Database::open(dir.path(), options(&disk)).unwrap();
        let invalid = db.invalid_indexes();
        assert_eq!(invalid.len(), 1, "{invalid:?}");
        eprintln!("{invalid:?}");
        let got: BTreeMap<i64, String> = rows(&db).unwrap().into_iter().collect();
        assert!(got == acked, "rows");
        db.drop_index("t_id").unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        assert!(db.verify_indexes("t").unwrap().is_empty());
        db.close().unwrap();
    });
}

#[test]
fn a_commit_log_one_block_short_after_a_crash_is_an_error() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        let (_, _acked) = crashed_after_growth(dir.path(), &disk, false, false, |db, acked| {
            // Xids onto a second commit-log page, one row committed there,
            // all made durable by a checkpoint.
            let tm = db.transaction_manager();
            for _ in 0..engine::XIDS_PER_PAGE {
                tm.begin()
                    .unwrap()
                    .commit_with(engine::CommitMode::Asynchronous)
                    .unwrap();
            }
            let txn = db.begin().unwrap();
            txn.insert("t", row(5000, "on page 1")).unwrap();
            txn.commit().unwrap();
            acked.insert(5000, "on page 1".into());
            db.checkpoint().unwrap();
        });
        let clog = dir.path().join("base").join("1");
        cut_last_block(&clog);
        match Database::open(dir.path(), options(&disk)) {
            Err(e) => {
                assert!(e.to_string().contains("base/1"), "{e}");
                eprintln!("{e}");
            }
            Ok(db) => {
                let got: Vec<i64> = rows(&db).unwrap().into_iter().map(|(id, _)| id).collect();
                assert!(
                    got.contains(&5000),
                    "the row committed on the cut commit-log page is gone"
                );
            }
        }
    });
}

#[test]
fn a_table_file_one_block_short_after_a_crash_in_the_directorys_first_run() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        let (file, acked) = crashed_after_growth(dir.path(), &disk, true, true, |_, _| {});
        cut_last_block(&file);
        exact_or_error_naming(dir.path(), &disk, &file, &acked, "short, first run");
    });
}
