//! A WAL segment that cannot be opened because the process is out of file
//! descriptors (`EMFILE`), met by a synchronous commit whose record crosses
//! into it:
//! - for a moment (the next few opens fail): the commit waits and succeeds,
//!   the WAL keeps accepting writes (before: the commit failed "in doubt"
//!   and the WAL refused every write until the database was reopened);
//! - for good: that commit fails in doubt and later writes are refused, as
//!   after any failed flush, and the reopen finds it not committed while
//!   every earlier commit is there.

mod common;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, Options, Value};
use wal::{FileSystem, FsFile, OsFileSystem};

/// The real file system, except that the next `fail` opens (and directory
/// syncs) inside `wal/` fail with `EMFILE`.
#[derive(Debug, Default)]
struct OutOfDescriptors {
    fail: AtomicU64,
    refused: AtomicU64,
}

impl OutOfDescriptors {
    fn check(&self, path: &Path) -> io::Result<()> {
        let in_wal = path.components().any(|c| c.as_os_str() == "wal");
        if in_wal
            && self
                .fail
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(libc::EMFILE));
        }
        Ok(())
    }
}

impl FileSystem for OutOfDescriptors {
    fn open(&self, path: &Path, create: bool, truncate: bool) -> io::Result<Box<dyn FsFile>> {
        self.check(path)?;
        OsFileSystem.open(path, create, truncate)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        OsFileSystem.read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        OsFileSystem.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        OsFileSystem.remove_file(path)
    }
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        OsFileSystem.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.check(dir)?;
        OsFileSystem.sync_dir(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        OsFileSystem.list_dir(dir)
    }
}

const SEGMENT: u64 = wal::MIN_SEGMENT_SIZE;

fn options(fs: Option<Arc<OutOfDescriptors>>) -> Options {
    let mut o = small_options()
        .wal_segment_size(SEGMENT)
        .checkpointer(false)
        .bgwriter(None);
    if let Some(fs) = fs {
        o.file_system = Some(fs);
    }
    o
}

/// Rows `from..to` in one transaction, enough bytes to cross a segment.
fn insert_rows(db: &Database, from: i64, to: i64) -> engine::Result<wal::Lsn> {
    let txn = db.begin()?;
    for id in from..to {
        txn.insert("t", row(id, &"x".repeat(400)))?;
    }
    txn.commit()
}

fn count(db: &Database) -> usize {
    let txn = db.begin().unwrap();
    let mut n = 0;
    for r in txn.scan("t").unwrap() {
        r.unwrap();
        n += 1;
    }
    txn.commit().unwrap();
    n
}

#[test]
fn a_moment_without_descriptors_delays_a_commit_and_fails_nothing() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(OutOfDescriptors::default());
        let db = Database::open(dir.path(), options(Some(fs.clone()))).unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        insert_rows(&db, 0, 10).unwrap();
        // The next three opens in wal/ fail: the commit below reaches the
        // next segment (its rows are more than a segment of WAL).
        fs.fail.store(3, Ordering::SeqCst);
        let rows = (SEGMENT / 400) as i64 + 10;
        insert_rows(&db, 10, 10 + rows).unwrap();
        assert_eq!(fs.refused.load(Ordering::SeqCst), 3, "no open was refused");
        // The WAL goes on: more commits, every row there, also after a reopen.
        insert_rows(&db, 10 + rows, 20 + rows).unwrap();
        assert_eq!(count(&db), 20 + rows as usize);
        db.close().unwrap();
        let db = Database::open(dir.path(), options(None)).unwrap();
        assert_eq!(count(&db), 20 + rows as usize);
        let txn = db.begin().unwrap();
        assert!(
            txn.get_by_key("t", "id", &Value::I64(15))
                .unwrap()
                .is_some()
        );
        txn.commit().unwrap();
        db.close().unwrap();
    });
}

#[test]
fn no_descriptors_for_good_fails_that_commit_in_doubt_and_later_writes() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(OutOfDescriptors::default());
        let db = Database::open(dir.path(), options(Some(fs.clone()))).unwrap();
        db.create_table("t", two_columns()).unwrap();
        insert_rows(&db, 0, 10).unwrap();
        fs.fail.store(u64::MAX, Ordering::SeqCst);
        let rows = (SEGMENT / 400) as i64 + 10;
        let e = insert_rows(&db, 10, 10 + rows).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("in doubt") && msg.contains("Too many open files"),
            "{msg}"
        );
        let e = insert_rows(&db, 10 + rows, 20 + rows).unwrap_err();
        assert!(e.to_string().contains("refuses writes"), "{e}");
        drop(db);
        let db = Database::open(dir.path(), options(None)).unwrap();
        assert_eq!(count(&db), 10, "only the commits before the failure");
        insert_rows(&db, 10, 20).unwrap();
        assert_eq!(count(&db), 20);
        db.close().unwrap();
    });
}
