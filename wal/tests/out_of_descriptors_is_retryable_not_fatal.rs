//! A WAL segment that cannot be opened because the process is out of file
//! descriptors (`EMFILE`) fails the flush that needed it, and only that one:
//! nothing inserted is lost, the log does not refuse later writes, and once
//! descriptors are free again the same records become durable and read back.

mod common;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{payload_record, read_from, small_segments, within};
use wal::fs::{FileSystem, FsFile, OsFileSystem};
use wal::{Lsn, MIN_SEGMENT_SIZE, Wal, WalError};

/// Linux's `EMFILE` ("Too many open files").
const EMFILE: i32 = 24;

/// The real file system, except that while `out` is set every open (and
/// directory sync, which opens the directory) fails with `EMFILE`.
#[derive(Debug, Default)]
struct OutOfDescriptors {
    out: AtomicBool,
    refused: AtomicU64,
}

impl OutOfDescriptors {
    fn check(&self) -> io::Result<()> {
        if self.out.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::from_raw_os_error(EMFILE));
        }
        Ok(())
    }
}

impl FileSystem for OutOfDescriptors {
    fn open(&self, path: &Path, create: bool, truncate: bool) -> io::Result<Box<dyn FsFile>> {
        self.check()?;
        OsFileSystem.open(path, create, truncate)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.check()?;
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
        self.check()?;
        OsFileSystem.sync_dir(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        self.check()?;
        OsFileSystem.list_dir(dir)
    }
}

#[test]
fn a_segment_open_failing_with_emfile_fails_one_flush_and_loses_nothing() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(OutOfDescriptors::default());
        let wal = Wal::open_with_fs(dir.path(), small_segments(), fs.clone()).unwrap();
        // Durable records in the first segment.
        let mut xid = 1u64;
        let mut ends = Vec::new();
        while wal.insert_lsn().0 < MIN_SEGMENT_SIZE / 2 {
            ends.push(wal.insert(&payload_record(xid, 500)).unwrap().1);
            xid += 1;
        }
        wal.flush_all().unwrap();
        // Out of descriptors: records that reach into the second segment
        // are inserted (they fit the buffer), but their flush cannot open
        // the segment.
        fs.out.store(true, Ordering::SeqCst);
        while wal.insert_lsn().0 < MIN_SEGMENT_SIZE + 4096 {
            ends.push(wal.insert(&payload_record(xid, 500)).unwrap().1);
            xid += 1;
        }
        let e = wal.flush_all().unwrap_err();
        assert!(fs.refused.load(Ordering::SeqCst) > 0, "no open was refused");
        assert!(
            !matches!(e, WalError::WritesRefused(_)),
            "the first failure is the open's: {e}"
        );
        assert!(e.to_string().contains("Too many open files"), "{e}");
        assert!(wal.flushed_lsn() < wal.insert_lsn());
        // Still out of descriptors: still this call's error, not a refusal.
        let e = wal.flush_all().unwrap_err();
        assert!(!matches!(e, WalError::WritesRefused(_)), "{e}");

        // Descriptors free again: the same records become durable, and more
        // can be written.
        fs.out.store(false, Ordering::SeqCst);
        wal.flush_all().unwrap();
        ends.push(wal.insert(&payload_record(xid, 500)).unwrap().1);
        wal.flush_all().unwrap();
        assert_eq!(wal.flushed_lsn(), *ends.last().unwrap());
        drop(wal);

        let (records, _) = read_from(dir.path(), Lsn::ZERO, MIN_SEGMENT_SIZE).unwrap();
        assert_eq!(records.len(), ends.len(), "records lost");
        for (i, (_, rec)) in records.iter().enumerate() {
            assert_eq!(rec.xid(), i as u64 + 1);
        }
    });
}
