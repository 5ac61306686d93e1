//! Helpers shared by the integration tests: a watchdog, record makers, and
//! snapshots of the WAL directory for damage tests.
#![allow(dead_code)] // each test file uses its own subset

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use bufmgr::{BufferTag, RelFork, RelId};
use wal::record::MIN_RECORD_LEN;
use wal::segment::wal_dir;
use wal::{Lsn, MIN_SEGMENT_SIZE, Record, RmgrKind, WalConfig, WalEnd, WalReader};

/// Run `f` on its own thread and fail the test if it does not finish within
/// `limit`, so a deadlock is a failure instead of a hung test run.
pub fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => {
            let _ = worker.join();
            v
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("test did not finish within {limit:?}: deadlock or livelock?")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the worker sends before it finishes"),
        },
    }
}

/// Segments of the smallest size, so a few hundred records cross boundaries.
pub fn small_segments() -> WalConfig {
    WalConfig {
        segment_size: MIN_SEGMENT_SIZE,
        ..WalConfig::default()
    }
}

/// [`small_segments`] with every segment made by the writer itself, none
/// ahead in the background: for tests that fail the writer's file
/// operations or take its directory away while the log is open, where a
/// background creation would take the injected fault or race the removal.
pub fn writer_made_segments() -> WalConfig {
    WalConfig {
        preallocate: false,
        ..small_segments()
    }
}

/// A heap record for transaction `xid` with a payload of about `len` bytes.
/// No payload byte is zero, and the record's length is never a multiple of
/// 256, so that cutting or zeroing any byte of it is visible to the reader
/// (see the damage tests).
pub fn payload_record(xid: u64, len: usize) -> Record {
    let len = if (MIN_RECORD_LEN + len).is_multiple_of(256) {
        len + 1
    } else {
        len
    };
    let payload: Vec<u8> = (0..len)
        .map(|i| ((xid as usize).wrapping_mul(7).wrapping_add(i) % 255 + 1) as u8)
        .collect();
    Record::builder(RmgrKind::Heap, (xid % 7) as u8, xid)
        .payload(payload)
        .build()
        .expect("within limits")
}

pub fn tag(rel: u32, block: u32) -> BufferTag {
    BufferTag::new(RelFork::main(RelId(rel)), block)
}

/// A page whose bytes depend on `seed`.
pub fn page(seed: u32) -> Vec<u8> {
    (0..bufmgr::PAGE_SIZE)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
        .collect()
}

/// Read the log in `datadir` from `start` to its end.
pub fn read_from(
    datadir: &Path,
    start: Lsn,
    segment_size: u64,
) -> wal::Result<(Vec<(Lsn, Record)>, WalEnd)> {
    let mut reader = WalReader::new(datadir, start, segment_size)?;
    let records = reader.read_to_end()?;
    Ok((records, reader.end().expect("read_to_end reached the end")))
}

/// The segment files of a data directory, by name.
pub fn segment_files(datadir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(wal_dir(datadir))
        .expect("WAL directory exists")
        .map(|e| e.expect("directory entry").path())
        .collect();
    files.sort();
    files
}

/// Every file of the WAL directory and its contents.
pub fn snapshot(datadir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    segment_files(datadir)
        .into_iter()
        .map(|p| {
            let bytes = fs::read(&p).expect("read segment");
            (p, bytes)
        })
        .collect()
}

/// Put the WAL directory back to `snap`.
pub fn restore(datadir: &Path, snap: &[(PathBuf, Vec<u8>)]) {
    for p in segment_files(datadir) {
        fs::remove_file(p).expect("remove segment");
    }
    for (p, bytes) in snap {
        fs::write(p, bytes).expect("write segment");
    }
}
