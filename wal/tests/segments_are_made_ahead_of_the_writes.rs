//! Segments made ahead (`WalConfig::preallocate`, the log module's
//! "Segments made ahead"): the segment after the one being written is made
//! in the background, zero-filled and synced, under `<name>.next`, so the
//! write that reaches it only renames it into place; the files under segment
//! names are exactly the segments the log reached; a closed log leaves no
//! `.next` file; and a power loss at any point, inside a background
//! creation too, loses no flushed record and leaves a log that opens.

mod common;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{payload_record, read_from, segment_files, small_segments, within};
use parking_lot::{Condvar, Mutex};
use wal::segment::{parse_segment_file_name, wal_dir};
use wal::sim_disk::{Fault, FaultKind, FaultOp, FileClass, SimDisk};
use wal::{FileSystem, FsFile, Lsn, MIN_SEGMENT_SIZE, OsFileSystem, Wal, WalConfig, WalReader};

const SEG: u64 = MIN_SEGMENT_SIZE;

/// The starts of the segment files in `datadir`, ascending.
fn segments(datadir: &Path) -> Vec<u64> {
    segment_files(datadir)
        .iter()
        .filter_map(|p| parse_segment_file_name(p.file_name()?.to_str()?))
        .map(|l| l.0)
        .collect()
}

/// The files of `datadir`'s WAL directory that are segments made ahead.
fn made_ahead(datadir: &Path) -> Vec<std::path::PathBuf> {
    segment_files(datadir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "next"))
        .collect()
}

/// Wait (at most 10 s) until segment `start` has been made ahead; its bytes.
fn wait_made_ahead(datadir: &Path, start: u64) -> Vec<u8> {
    let path = wal_dir(datadir).join(format!("{start:016X}.next"));
    let until = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(
            Instant::now() < until,
            "segment {start:#x} was never made ahead: {:?}",
            segment_files(datadir)
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    std::fs::read(&path).unwrap()
}

/// A file system whose writes to `*.tmp` files (zero-fills) wait while
/// its gate is closed: holds the background creation in the middle of its
/// zero-fill for as long as a test needs.
#[derive(Debug, Default)]
struct Gated {
    closed: Mutex<bool>,
    opened: Condvar,
    /// Writes to `*.tmp` files begun, and whether one is waiting now.
    tmp_writes: AtomicU64,
    waiting: AtomicBool,
}

impl Gated {
    fn set_closed(&self, closed: bool) {
        *self.closed.lock() = closed;
        self.opened.notify_all();
    }

    /// Wait (at most 10 s) until a zero-fill waits at the gate.
    fn wait_for_a_zero_fill(&self) {
        let until = Instant::now() + Duration::from_secs(10);
        while !self.waiting.load(Ordering::SeqCst) {
            assert!(Instant::now() < until, "no zero-fill reached the gate");
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

#[derive(Debug)]
struct GatedFs(Arc<Gated>);

#[derive(Debug)]
struct GatedFile {
    file: Box<dyn FsFile>,
    gate: Option<Arc<Gated>>,
}

impl FsFile for GatedFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        if let Some(gate) = &self.gate {
            gate.tmp_writes.fetch_add(1, Ordering::SeqCst);
            let mut closed = gate.closed.lock();
            while *closed {
                gate.waiting.store(true, Ordering::SeqCst);
                gate.opened.wait(&mut closed);
            }
            gate.waiting.store(false, Ordering::SeqCst);
        }
        self.file.write_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
}

impl FileSystem for GatedFs {
    fn open(&self, path: &Path, create: bool, truncate: bool) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(GatedFile {
            file: OsFileSystem.open(path, create, truncate)?,
            gate: path
                .extension()
                .is_some_and(|e| e == "tmp")
                .then(|| Arc::clone(&self.0)),
        }))
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
        OsFileSystem.sync_dir(dir)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        OsFileSystem.list_dir(dir)
    }
}

#[test]
fn the_next_segment_is_made_ahead_and_reads_as_the_end_of_the_log() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::open(dir.path(), small_segments()).unwrap();
        // A new log: its first segment is made before any write needs it,
        // and is not a segment until a write takes it.
        wait_made_ahead(dir.path(), 0);
        assert_eq!(segments(dir.path()), Vec::<u64>::new());
        let mut ends = Vec::new();
        let mut xid = 1;
        while wal.insert_lsn().0 < SEG / 2 {
            ends.push(wal.insert(&payload_record(xid, 300)).unwrap().1);
            xid += 1;
        }
        wal.flush_all().unwrap();
        // Writing the first segment asks for the second.
        let second = wait_made_ahead(dir.path(), SEG);
        assert_eq!(second.len() as u64, SEG);
        assert!(second.iter().all(|&b| b == 0), "made ahead: zeros only");
        assert_eq!(segments(dir.path()), [0], "only the segments reached");
        assert_eq!(made_ahead(dir.path()).len(), 1, "never one further");
        let (records, end) = read_from(dir.path(), Lsn::ZERO, SEG).unwrap();
        assert_eq!(records.len(), ends.len());
        assert_eq!(end.lsn, wal.insert_lsn());

        // The writes that reach the second segment find it made.
        let before = wal.stats();
        while wal.insert_lsn().0 < SEG + SEG / 2 {
            ends.push(wal.insert(&payload_record(xid, 300)).unwrap().1);
            xid += 1;
        }
        wal.flush_all().unwrap();
        let after = wal.stats();
        assert_eq!(
            (after.segments_created - after.segments_preallocated)
                - (before.segments_created - before.segments_preallocated),
            0,
            "the writer made a segment itself"
        );
        assert!(after.segments_preallocated >= 2);
        assert_eq!(segments(dir.path()), [0, SEG]);
        wait_made_ahead(dir.path(), 2 * SEG);
        wal.close().unwrap();
        assert_eq!(made_ahead(dir.path()), Vec::<std::path::PathBuf>::new());
        assert_eq!(segments(dir.path()), [0, SEG], "a closed log: its segments");

        // Reopened: every record, and the log goes on past the made segments.
        let wal = Wal::open(dir.path(), small_segments()).unwrap();
        assert_eq!(wal.startup().records, ends.len() as u64);
        assert_eq!(wal.insert_lsn(), *ends.last().unwrap());
        while wal.insert_lsn().0 < 3 * SEG + 100 {
            ends.push(wal.insert(&payload_record(xid, 300)).unwrap().1);
            xid += 1;
        }
        wal.flush_all().unwrap();
        wal.close().unwrap();
        let (records, _) = read_from(dir.path(), Lsn::ZERO, SEG).unwrap();
        assert_eq!(records.len(), ends.len());
        for (i, (_, r)) in records.iter().enumerate() {
            assert_eq!(r.xid(), i as u64 + 1);
        }
    });
}

#[test]
fn without_preallocation_a_segment_is_made_only_when_a_write_reaches_it() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let config = WalConfig {
            preallocate: false,
            ..small_segments()
        };
        let wal = Wal::open(dir.path(), config.clone()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(segments(dir.path()), Vec::<u64>::new());
        while wal.insert_lsn().0 < SEG / 2 {
            wal.insert(&payload_record(1, 300)).unwrap();
        }
        wal.flush_all().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(segments(dir.path()), [0]);
        assert_eq!(wal.stats().segments_preallocated, 0);
        wal.close().unwrap();
    });
}

/// Power lost at the `after`-th disk change from the start of a run of
/// flushed writes: the background creations' changes count too, so crash
/// points land inside them (in a zero-fill, before or after the rename,
/// before the directory sync). Every flushed record survives, and the log
/// opens and goes on.
#[test]
fn a_power_loss_anywhere_keeps_every_flushed_record_and_a_log_that_opens() {
    within(Duration::from_secs(120), || {
        for seed in 0..48u64 {
            let dir = tempfile::tempdir().unwrap();
            let disk = Arc::new(SimDisk::new());
            let wal = Wal::open_with_fs(dir.path(), small_segments(), disk.clone()).unwrap();
            disk.arm_crash_point(1 + seed * 7 % 97, seed);
            let mut flushed = Vec::new();
            let mut xid = 1;
            // Until the power goes: each record flushed on its own, so
            // crossings into new segments happen while creations run.
            while xid < 400 {
                let Ok((_, end)) = wal.insert(&payload_record(xid, 900)) else {
                    break;
                };
                if wal.flush(end).is_err() {
                    break;
                }
                flushed.push(xid);
                xid += 1;
            }
            assert!(disk.is_powered_off(), "seed {seed}: no power loss");
            drop(wal);
            let (wal, got) = reopen_after_restart(dir.path(), &disk, seed);
            assert!(
                got.len() >= flushed.len() && got[..flushed.len()] == flushed[..],
                "seed {seed}: flushed {} records, read {}",
                flushed.len(),
                got.len()
            );
            // The log goes on from there, through new segments.
            let from = wal.insert_lsn();
            while wal.insert_lsn().0 < from.0 + 2 * SEG {
                wal.insert(&payload_record(1_000, 900)).unwrap();
            }
            wal.flush_all()
                .unwrap_or_else(|e| panic!("seed {seed}: after the restart: {e}"));
            wal.close().unwrap();
        }
    });
}

/// Restart `disk` after its power loss, reopen the log in `dir` on it and
/// read every record back: the log, and the xids in the order read.
fn reopen_after_restart(dir: &Path, disk: &Arc<SimDisk>, seed: u64) -> (Wal, Vec<u64>) {
    disk.restart();
    let wal = Wal::open_with_fs(dir, small_segments(), disk.clone())
        .unwrap_or_else(|e| panic!("seed {seed}: the log does not open: {e}"));
    let mut reader = WalReader::with_fs(disk.clone(), dir, Lsn::ZERO, SEG).unwrap();
    let got = reader
        .read_to_end()
        .unwrap_or_else(|e| panic!("seed {seed}: reading the log back: {e}"))
        .iter()
        .map(|(_, r)| r.xid())
        .collect();
    (wal, got)
}

/// The directory sync after a segment made ahead is renamed into place
/// fails: the flush that needed it fails and loses nothing, and its retry
/// syncs the directory before writing into the segment. It used to find
/// the file under its name and write into it without the sync, so a power
/// loss afterwards could take back the rename with the flushed records in
/// the segment (a log that no longer opens, or acknowledged records gone).
#[test]
fn a_failed_directory_sync_after_taking_a_segment_is_redone_before_its_first_write() {
    within(Duration::from_secs(60), || {
        for seed in 0..8u64 {
            let dir = tempfile::tempdir().unwrap();
            let disk = Arc::new(SimDisk::new());
            let wal = Wal::open_with_fs(dir.path(), small_segments(), disk.clone()).unwrap();
            let (_, end) = wal.insert(&payload_record(1, 100)).unwrap();
            wal.flush(end).unwrap();
            wait_made_ahead(dir.path(), SEG);
            let (mut flushed, mut last) = (vec![1], end);
            while last.0 <= SEG {
                let xid = flushed.len() as u64 + 1;
                last = wal.insert(&payload_record(xid, 1000)).unwrap().1;
                flushed.push(xid);
            }
            // The thread is idle: the next sync of the WAL's is the
            // directory's, after the writer renamed the second segment.
            disk.inject(Fault::next(FileClass::Wal, FaultOp::Sync, FaultKind::Eio));
            let e = wal.flush(last).unwrap_err();
            assert!(e.to_string().contains("fsync directory"), "{e}");
            wal.flush(last).unwrap();
            wait_made_ahead(dir.path(), 2 * SEG);
            disk.power_loss(seed).unwrap();
            drop(wal);
            let (wal, got) = reopen_after_restart(dir.path(), &disk, seed);
            assert_eq!(got, flushed, "seed {seed}");
            wal.close().unwrap();
        }
    });
}

/// A reopened log's first write goes to the segment the log ends in, which
/// exists: it does not wait for the background zero-fill of the segment
/// after it (asked for at open). It used to, opening every segment under
/// the lock the zero-fill holds: the first commit after an open paid for a
/// whole segment's creation, the cost the thread is there to take away.
#[test]
fn a_write_into_the_segment_a_reopened_log_ends_in_does_not_wait_for_the_next_one() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::open(dir.path(), small_segments()).unwrap();
        let (_, end) = wal.insert(&payload_record(1, 100)).unwrap();
        wal.flush(end).unwrap();
        wal.close().unwrap();

        let gate = Arc::new(Gated::default());
        gate.set_closed(true);
        let fs = Arc::new(GatedFs(Arc::clone(&gate)));
        let wal = Arc::new(Wal::open_with_fs(dir.path(), small_segments(), fs).unwrap());
        gate.wait_for_a_zero_fill();
        let (done, flushed) = std::sync::mpsc::channel();
        let writer = {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || {
                let (_, end) = wal.insert(&payload_record(2, 100)).unwrap();
                wal.flush(end).unwrap();
                done.send(()).unwrap();
            })
        };
        let waited = flushed.recv_timeout(Duration::from_secs(5)).is_err();
        gate.set_closed(false);
        writer.join().unwrap();
        assert!(
            !waited,
            "the flush waited for the zero-fill of the next segment"
        );
        Arc::into_inner(wal).unwrap().close().unwrap();
    });
}

/// A close while a segment is being made ahead stops the zero-fill between
/// two of its 1 MiB pieces and leaves no file behind. It used to wait for
/// the whole segment to be written and synced, only to remove it: seconds
/// for a 1 GiB segment, on every close or drop soon after an open or a
/// segment switch.
#[test]
fn a_close_stops_a_creation_in_progress() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let gate = Arc::new(Gated::default());
        gate.set_closed(true);
        let fs = Arc::new(GatedFs(Arc::clone(&gate)));
        let config = WalConfig {
            segment_size: 8 << 20,
            ..WalConfig::default()
        };
        let wal = Wal::open_with_fs(dir.path(), config, fs).unwrap();
        // The first segment's zero-fill waits in its first piece.
        gate.wait_for_a_zero_fill();
        let opener = {
            let gate = Arc::clone(&gate);
            std::thread::spawn(move || {
                // Long after the close below has asked the thread to stop.
                std::thread::sleep(Duration::from_millis(200));
                gate.set_closed(false);
            })
        };
        wal.close().unwrap();
        opener.join().unwrap();
        let pieces = gate.tmp_writes.load(Ordering::SeqCst);
        assert!(
            pieces < 8,
            "all {pieces} pieces written after the close was asked"
        );
        assert_eq!(segment_files(dir.path()), Vec::<std::path::PathBuf>::new());
    });
}
