//! The log itself: inserting records, flushing them with group commit, the
//! background flusher, and removing old segments.
//!
//! # Insertion
//!
//! Many threads insert at once. An insert does the expensive part, encoding
//! the record and checksumming its body, before taking any lock; then, under
//! the short `insert` mutex, it takes the next position, links the record to
//! the previous one (prev LSN, and the 27-byte rest of the CRC), and appends
//! the bytes to the in-memory WAL buffer:
//!
//! ```text
//!   insert (any thread)                     write out (one thread at a time)
//!   -------------------                     -------------------------------
//!   1. encode, CRC of the body  (no lock)   a. lock `write`
//!   2. lock `insert`                        b. lock `insert`; swap the buffer for
//!        start = next; next += len               the empty spare; upto = next;
//!        write prev LSN, finish CRC              unlock `insert`
//!        append to the buffer               c. pwrite the chunk into the segments
//!      unlock `insert`                      d. (flush only) fdatasync every segment
//!   3. return (start, end = next)                written since the last sync;
//!                                                flushed = upto
//!                                           e. unlock `write`
//! ```
//!
//! No lock that an insert takes is ever held across I/O: step (b) holds
//! `insert` for a pointer swap. An insert waits for I/O only when the buffer is
//! full ([`WalConfig::buffer_size`]); it then writes the buffer out itself
//! (steps a-c, no fdatasync) and retries, as PostgreSQL's `AdvanceXLInsertBuffer`
//! does when it must evict a WAL page that is not yet written.
//!
//! # Flushing and group commit
//!
//! `flush(lsn)` returns once every byte before `lsn` is durable. Commits wait
//! in groups, as with PostgreSQL's `LWLockAcquireOrWait` on `WALWriteLock`:
//!
//! ```text
//!   flush(lsn):
//!     flushed >= lsn?                     -> return            (no lock)
//!     lock `flush_ctl`; loop:
//!       flushed >= lsn?                   -> return
//!       a leader is flushing?             -> wait on `flushed_cv`, loop
//!       otherwise become the leader: unlock, write out and fdatasync
//!       EVERYTHING inserted so far (steps a-e), relock, wake all waiters
//! ```
//!
//! Every committer that inserted its record before the leader swapped the
//! buffer (step b) is covered by the leader's one fdatasync; they all wake,
//! see `flushed >= lsn`, and return without a system call. Committers that
//! inserted later elect the next leader among themselves. Under load, one
//! fdatasync serves everyone who arrived during the previous one.
//!
//! # Locks
//!
//! | lock | protects | held across I/O? |
//! |---|---|---|
//! | `insert` | the insert position, prev LSN, the WAL buffer, record/byte counts | never |
//! | `write` | the open segment files, `written`, the spare buffer | yes (pwrite, fdatasync) |
//! | `creating` | creating a segment file or taking one made ahead (writer and preallocator) | yes (the zero-fill, its fdatasync, the rename, the directory sync) |
//! | `flush_ctl` | whether a flush leader is active | never |
//! | `checkpoint_lock` | one checkpoint at a time | yes (the whole checkpoint) |
//!
//! Lock order: `checkpoint_lock` before everything; `write` before `insert`
//! and before `creating`.
//! `flush_ctl` is never held while taking another lock. The redo pointer
//! (`redo_lsn`) is an atomic stored under `insert`, so an insert that checks it
//! under `insert` is ordered with the checkpoint that moves it. `insert_lsn` and `flushed_lsn` are atomics mirroring the
//! positions for lock-free reads; `flushed_lsn` only grows and is stored with
//! `Release` after the fdatasync that makes it true.
//!
//! # Failures
//!
//! If a write or fdatasync fails, the log refuses every later insert and
//! flush with [`WalError::WritesRefused`]: after a failed fdatasync Linux may
//! have dropped the dirty pages and reports success on a retry, so the only
//! honest answer is to stop (PostgreSQL PANICs). Opening or creating the
//! segments a write reaches comes first, while the bytes are still in the
//! insert buffer: if that fails (out of file descriptors, say), nothing is
//! lost, the call that needed it fails, and a later flush tries again.
//!
//! # Segments made ahead
//!
//! Making a segment costs a zero-fill of the whole file, its fdatasync, a
//! rename and a directory sync (`segment`, invariant 1): 16 MiB written and
//! synced, some 10-50 ms on the machine this was measured on, once per
//! 16 MiB of WAL. Done by the writer, it lands on whichever flush (a commit)
//! first reaches the segment. So, as PostgreSQL makes segments ahead of time,
//! a background thread (`wal-prealloc`, [`WalConfig::preallocate`]) makes
//! the next one:
//!
//! 1. Each time the writer opens a segment newer than those it has open, it
//!    asks for the one after it; the open asks for the segment the next
//!    record goes to if it does not exist yet (a new log's first), else the
//!    one after it. A segment is only asked for once the one before it
//!    exists, so a log never has a later segment without its predecessor.
//! 2. The thread makes it under `creating` unless it is behind the segment
//!    inserts go to (the writer's; it may even have been removed by a
//!    checkpoint already). The writer makes a segment, or takes the one
//!    made ahead, under `creating` too, so it waits for a creation in
//!    progress and never takes a half-made file. A segment already under
//!    its name (only the writer renames files to segment names) it opens
//!    without `creating`, syncing the directory: the first write after a
//!    reopen does not wait for the zero-fill of the segment after it.
//! 3. A failure there is dropped (its temporary file removed): the writer,
//!    reaching the segment, makes it itself and reports what fails.
//! 4. A segment made ahead is zero-filled and synced as the writer's are,
//!    but under the name `<name>.next` (`segment`, invariant 3): the writer
//!    that reaches it renames it into place and syncs the directory, a few
//!    microseconds instead of a 16 MiB write and sync. So the files under
//!    segment names are always exactly the segments the log has reached, as
//!    without preallocation; a `.next` file no write took is removed at close
//!    and at open.
//! 5. A close (or drop) stops a creation in progress between two 1 MiB
//!    pieces of its zero-fill rather than wait for a file it would remove.
//!
//! # Shortcuts
//!
//! - PostgreSQL lets inserters copy into the WAL buffers in parallel, each
//!   holding one of 8 insertion locks, with a spinlock only around the
//!   position bump. We copy under the one `insert` mutex: records here are
//!   mostly small, and the copy of even an 8 kB page image is a few hundred
//!   nanoseconds. Measure before making this parallel.
//! - The WAL buffer is a growable `Vec` swapped with a spare, not a ring of
//!   8 kB pages; the bound is the same (`buffer_size`).
//! - PostgreSQL also recycles old segments by renaming them; here they are
//!   removed and new ones made (see `segment`'s shortcuts).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::control::{self, ControlData, read_control_with};
use crate::error::{Result, WalError};
use crate::fs::{FileSystem, FsFile, OsFileSystem};
use crate::lsn::Lsn;
use crate::reader::{WalEnd, WalReader};
use crate::record::Record;
use crate::segment::{
    DEFAULT_SEGMENT_SIZE, SegmentSize, list_segments, make_segment_ahead, open_or_create_segment,
    open_segment, remove_leftover_files, segment_path, sync_dir, temp_segment_path, wal_dir,
};

/// Default WAL buffer: PostgreSQL's `wal_buffers` auto-tunes to 1/32 of
/// shared buffers, capped at one 16 MiB segment; we take the cap.
pub const DEFAULT_BUFFER_SIZE: usize = 16 << 20;
/// The smallest WAL buffer: one 8 kB WAL page (PostgreSQL's minimum is 4
/// pages). A small buffer makes inserts write it out often; tests use one to
/// drive that path.
pub const MIN_BUFFER_SIZE: usize = 8 << 10;
/// Zeros are compared and written in pieces of this size when the tail of the
/// last segment is cleared at open.
const CLEAR_CHUNK: usize = 1 << 20;

/// How to open a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalConfig {
    /// Bytes per segment file: a power of two, 64 KiB to 1 GiB. The log must
    /// be reopened with the size it was written with.
    pub segment_size: u64,
    /// Bytes of inserted WAL held in memory before an insert must write them
    /// out itself (a record larger than this still fits, alone).
    pub buffer_size: usize,
    /// With `Some(interval)`, a background thread flushes everything inserted
    /// every `interval`, so that commits which do not wait for their flush
    /// (asynchronous commit) are durable within about `interval`. PostgreSQL's
    /// WAL writer uses `wal_writer_delay`, 200 ms by default.
    pub async_flush_interval: Option<Duration>,
    /// Full-page writes (PostgreSQL's `full_page_writes`, on by default): the
    /// first change to a page after a checkpoint's redo point carries an
    /// image of the page, so that a torn write of it can be repaired at
    /// recovery. Off only where the storage writes pages atomically.
    pub full_page_writes: bool,
    /// Create the segment after the one being written in the background
    /// (PostgreSQL creates segments ahead of time too), so that the thread
    /// whose write reaches a new segment finds it made, instead of
    /// zero-filling and syncing 16 MiB itself on the way to a commit. See
    /// "Segments made ahead" in the module docs. On by default.
    pub preallocate: bool,
}

impl Default for WalConfig {
    fn default() -> WalConfig {
        WalConfig {
            segment_size: DEFAULT_SEGMENT_SIZE,
            buffer_size: DEFAULT_BUFFER_SIZE,
            async_flush_interval: None,
            full_page_writes: true,
            preallocate: true,
        }
    }
}

impl WalConfig {
    /// Check every value; returns the validated segment size.
    pub fn validate(&self) -> Result<SegmentSize> {
        let size = SegmentSize::new(self.segment_size)?;
        if self.buffer_size < MIN_BUFFER_SIZE {
            return Err(WalError::InvalidConfig(format!(
                "WAL buffer of {} bytes; at least {MIN_BUFFER_SIZE} are needed",
                self.buffer_size
            )));
        }
        if self.async_flush_interval == Some(Duration::ZERO) {
            return Err(WalError::InvalidConfig(
                "asynchronous flush interval must be longer than zero".to_string(),
            ));
        }
        Ok(size)
    }
}

/// Counters since the log was opened.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct WalStats {
    /// Records inserted.
    pub records: u64,
    /// Bytes inserted (whole records).
    pub bytes: u64,
    /// Calls of [`Wal::flush`] (including those already satisfied).
    pub flush_requests: u64,
    /// fdatasync calls on segment files made to flush WAL (not counting the
    /// one that makes a new zero-filled segment durable).
    pub fsyncs: u64,
    /// pwrite calls on segment files.
    pub writes: u64,
    /// Segment files created (by a write that reached them, or ahead of
    /// it in the background).
    pub segments_created: u64,
    /// Of those, the ones created ahead of the writes, in the background.
    pub segments_preallocated: u64,
}

/// What [`Wal::open`] found.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Startup {
    /// Where reading started.
    pub start: Lsn,
    /// Where valid WAL ended and why; new records go here.
    pub end: WalEnd,
    /// Valid records read from `start` to the end.
    pub records: u64,
    /// Start of the last valid record, if any was read.
    pub last_record: Option<Lsn>,
}

/// The write-ahead log. Share it between threads by reference or `Arc`.
#[derive(Debug)]
pub struct Wal {
    pub(crate) shared: Arc<Shared>,
    flusher: Option<Flusher>,
    preallocator: Option<Preallocator>,
    startup: Startup,
    /// The data directory (parent of `wal/`, home of the control file).
    pub(crate) datadir: PathBuf,
    /// What the control file says now (updated by each checkpoint).
    pub(crate) last_checkpoint: Mutex<Option<ControlData>>,
    /// Held for the whole of a checkpoint: one at a time. Taken before any
    /// other lock and never by inserts or flushes.
    pub(crate) checkpoint_lock: Mutex<()>,
}

/// The state every thread (and the background flusher) shares.
#[derive(Debug)]
pub(crate) struct Shared {
    /// `<datadir>/wal`.
    dir: PathBuf,
    /// What every segment and control-file operation goes through.
    pub(crate) fs: Arc<dyn FileSystem>,
    size: SegmentSize,
    buffer_size: usize,
    /// See the lock table in the module docs.
    insert: Mutex<InsertState>,
    write: Mutex<WriteState>,
    /// Held while a segment is created or one made ahead is taken, by the
    /// writer (under `write`) and by the preallocator: one creation at a
    /// time, and the writer never takes a half-made segment. Not taken to
    /// open a segment already under its name.
    creating: Arc<Mutex<()>>,
    flush_ctl: Mutex<FlushCtl>,
    /// Signalled (with `flush_ctl`) when a flush leader finishes.
    flushed_cv: Condvar,
    /// Mirror of `InsertState::next`, stored under `insert`.
    insert_lsn: AtomicU64,
    /// Everything before this is durable. Stored under `write` after fdatasync.
    flushed_lsn: AtomicU64,
    /// The redo pointer: the redo point of the latest checkpoint (begun, not
    /// necessarily finished). Only grows; stored under `insert`, so an insert
    /// that checks it under `insert` cannot race a checkpoint taking its redo
    /// point. See `Wal::needs_full_page_image`.
    redo_lsn: AtomicU64,
    /// `WalConfig::full_page_writes`.
    full_page_writes: bool,
    /// Live [`ForcedFullPageWrites`] guards: while any is, full-page images
    /// are taken whatever `full_page_writes` says (an online backup's).
    /// Read under `insert` by checked inserts, so a redo point taken after
    /// a guard was created is never passed by a record without images.
    forced_images: AtomicUsize,
    /// Set once by the first failed write or fdatasync (see "Failures").
    refused: OnceLock<String>,
    counters: Counters,
}

/// Protected by `Shared::insert`.
struct InsertState {
    /// Inserted bytes not yet handed to a writer: positions `buf_start..next`.
    buf: Vec<u8>,
    buf_start: Lsn,
    /// Where the next record starts (the insert position).
    next: Lsn,
    /// Start of the last record inserted: the next record's prev LSN.
    prev: Lsn,
    records: u64,
    bytes: u64,
}

/// Protected by `Shared::write`.
struct WriteState {
    segments: SegmentWriter,
    /// Everything before this has been written to the segment files.
    written: Lsn,
    /// An empty buffer to swap in for the full one (keeps its capacity).
    spare: Vec<u8>,
}

// Debug without the buffers' contents (up to 16 MiB each).
impl std::fmt::Debug for InsertState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InsertState")
            .field("buffered", &self.buf.len())
            .field("buf_start", &self.buf_start)
            .field("next", &self.next)
            .field("prev", &self.prev)
            .field("records", &self.records)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl std::fmt::Debug for WriteState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteState")
            .field("segments", &self.segments)
            .field("written", &self.written)
            .field("spare_capacity", &self.spare.capacity())
            .finish()
    }
}

/// Protected by `Shared::flush_ctl`.
#[derive(Debug, Default)]
struct FlushCtl {
    leader_active: bool,
}

#[derive(Debug, Default)]
struct Counters {
    flush_requests: AtomicU64,
    fsyncs: AtomicU64,
    writes: AtomicU64,
    segments_created: AtomicU64,
    segments_preallocated: AtomicU64,
}

impl Wal {
    /// Open the log in `<datadir>/wal/`, creating it if there is none, reading
    /// to the end of valid WAL from the redo point of the last checkpoint
    /// named by `<datadir>/control`, or from the log's origin (LSN 0) if there
    /// is no control file. A damaged control file is an error naming it.
    pub fn open(datadir: &Path, config: WalConfig) -> Result<Wal> {
        Wal::open_at(Arc::new(OsFileSystem), datadir, config, None)
    }

    /// [`open`](Wal::open) with every segment and control-file operation
    /// going through `fs`. For tests: a simulated disk
    /// (`sim_disk::SimDisk`, with the `testing` feature) injects faults and power
    /// losses this way.
    pub fn open_with_fs(datadir: &Path, config: WalConfig, fs: Arc<dyn FileSystem>) -> Result<Wal> {
        Wal::open_at(fs, datadir, config, None)
    }

    /// Open the log reading from `start`, which must be the start LSN of a
    /// record. The control file is still read (for the redo pointer and
    /// [`last_checkpoint`](Wal::last_checkpoint)).
    pub fn open_from(datadir: &Path, config: WalConfig, start: Lsn) -> Result<Wal> {
        Wal::open_at(Arc::new(OsFileSystem), datadir, config, Some(start))
    }

    fn open_at(
        fs: Arc<dyn FileSystem>,
        datadir: &Path,
        config: WalConfig,
        start: Option<Lsn>,
    ) -> Result<Wal> {
        let size = config.validate()?;
        let dir = wal_dir(datadir);
        control::remove_stale_temp(&*fs, datadir)?;
        let control = read_control_with(&*fs, datadir)?;
        if !dir.exists() {
            if let Some(c) = &control {
                return Err(WalError::MissingDirectory {
                    dir,
                    detail: format!(
                        "the control file {} names a checkpoint with redo point {} in it",
                        control::control_path(datadir).display(),
                        c.redo_lsn
                    ),
                });
            }
            fs.create_dir_all(&dir)
                .map_err(|e| WalError::io("create directory", &dir, e))?;
            sync_dir(&*fs, datadir)?;
        }
        remove_leftover_files(&*fs, &dir)?;
        if let Some(c) = &control
            && c.segment_size != size.bytes()
        {
            return Err(WalError::InvalidConfig(format!(
                "the log was written with segments of {} bytes ({}), not {}",
                c.segment_size,
                control::control_path(datadir).display(),
                size.bytes()
            )));
        }
        let segments = list_segments(&*fs, &dir, size)?;
        let start_given = start;
        let start = match (start, &control) {
            (Some(lsn), _) => lsn,
            (None, Some(c)) => c.redo_lsn,
            (None, None) => match segments.first() {
                None | Some(&Lsn::ZERO) => Lsn::ZERO,
                Some(&first) => {
                    return Err(WalError::InvalidStart {
                        lsn: Lsn::ZERO,
                        detail: format!(
                            "the log's first segment has been recycled (the oldest is {}); open from a redo point",
                            segment_path(&dir, first).display()
                        ),
                    });
                }
            },
        };

        let mut reader = WalReader::with_fs(Arc::clone(&fs), datadir, start, size.bytes())?;
        let mut records = 0u64;
        while reader.next_record()?.is_some() {
            records += 1;
        }
        let end = reader
            .end()
            .expect("the reader returned None, so it has reached the end");
        let last_record = reader.last_record_lsn();
        if last_record.is_none() && start != Lsn::ZERO {
            let file = segment_path(&dir, size.segment_start(start));
            let segment_exists = segments.contains(&size.segment_start(start));
            if start_given.is_none() {
                // The control file's redo point: the checkpoint's records
                // were flushed there before the control file was written.
                return Err(WalError::CorruptRecord {
                    lsn: start,
                    file,
                    detail: format!(
                        "no valid record at the control file's redo point ({}{})",
                        end.reason,
                        if segment_exists {
                            ""
                        } else {
                            ": the segment is missing"
                        }
                    ),
                });
            }
            return Err(WalError::InvalidStart {
                lsn: start,
                detail: format!(
                    "no valid record starts there in segment {} ({}); the start must be a record's LSN",
                    file.display(),
                    end.reason
                ),
            });
        }
        clear_after_end(&*fs, &dir, size, end.lsn)?;

        let startup = Startup {
            start,
            end,
            records,
            last_record,
        };
        let creating = Arc::new(Mutex::new(()));
        let ahead = config.preallocate.then(|| Arc::new(Ahead::default()));
        let shared = Arc::new(Shared {
            size,
            buffer_size: config.buffer_size,
            insert: Mutex::new(InsertState {
                buf: Vec::new(),
                buf_start: end.lsn,
                next: end.lsn,
                prev: last_record.unwrap_or(Lsn::ZERO),
                records: 0,
                bytes: 0,
            }),
            write: Mutex::new(WriteState {
                segments: SegmentWriter {
                    fs: Arc::clone(&fs),
                    dir: dir.clone(),
                    size,
                    open: Vec::new(),
                    creating: Arc::clone(&creating),
                    ahead: ahead.clone(),
                },
                written: end.lsn,
                spare: Vec::new(),
            }),
            creating,
            flush_ctl: Mutex::new(FlushCtl::default()),
            flushed_cv: Condvar::new(),
            insert_lsn: AtomicU64::new(end.lsn.0),
            flushed_lsn: AtomicU64::new(end.lsn.0),
            redo_lsn: AtomicU64::new(control.map_or(0, |c| c.redo_lsn.0)),
            full_page_writes: config.full_page_writes,
            forced_images: AtomicUsize::new(0),
            refused: OnceLock::new(),
            counters: Counters::default(),
            dir,
            fs,
        });
        let flusher = match config.async_flush_interval {
            Some(interval) => Some(Flusher::start(Arc::clone(&shared), interval)?),
            None => None,
        };
        let preallocator = match ahead {
            Some(ahead) => {
                // The segment the next record goes to if it does not exist
                // yet (a new log's first, or the one after a log that ends
                // at a boundary: the one before it exists), else the one
                // after it. Never one further: a later segment without the
                // one before it would read as a log whose first segments
                // were removed.
                let end_segment = size.segment_start(end.lsn);
                ahead.ask(if segments.contains(&end_segment) {
                    Lsn(end_segment.0 + size.bytes())
                } else {
                    end_segment
                });
                Some(Preallocator::start(Arc::clone(&shared), ahead)?)
            }
            None => None,
        };
        Ok(Wal {
            shared,
            flusher,
            preallocator,
            startup,
            datadir: datadir.to_path_buf(),
            last_checkpoint: Mutex::new(control),
            checkpoint_lock: Mutex::new(()),
        })
    }

    /// Append `record` to the log. Returns its start LSN (its name; the next
    /// record's prev LSN) and its end LSN (the page LSN for the pages it
    /// changes; what to [`flush`](Wal::flush) to make it durable).
    pub fn insert(&self, record: &Record) -> Result<(Lsn, Lsn)> {
        Ok(self
            .shared
            .insert(record, None)?
            .expect("an unchecked insert always happens"))
    }

    /// Insert `record` unless full-page writes are on and `fpw_lsn` is at or
    /// before the redo pointer, checked under the insert lock; then return
    /// `None` and insert nothing (PostgreSQL's `XLogInsertRecord` returning
    /// `InvalidXLogRecPtr`). `fpw_lsn` is the smallest page LSN among the
    /// blocks the caller registered *without* an image because
    /// [`needs_full_page_image`](Wal::needs_full_page_image) said no.
    ///
    /// This closes the race between that decision and a checkpoint taking a
    /// new redo point: on `None` the caller decides again (now with images)
    /// and rebuilds the record. A caller whose blocks all carry images, or
    /// who holds off checkpoints, can use [`insert`](Wal::insert).
    pub fn insert_unless_image_needed(
        &self,
        record: &Record,
        fpw_lsn: Lsn,
    ) -> Result<Option<(Lsn, Lsn)>> {
        // Checked whatever the setting: images may be forced meanwhile
        // (`force_full_page_writes`); `Shared::insert` decides under the lock.
        self.shared.insert(record, Some(fpw_lsn))
    }

    /// Does the next change to a page whose LSN is `page_lsn` need a
    /// full-page image? True when full-page writes are on and the page has
    /// not been WAL-logged since the current redo point (`page_lsn <= redo`):
    /// a torn write of the page after this change could not be repaired from
    /// a record without the whole page, because replay starts at the redo
    /// point. Heap and B-tree ask this for each block they register; see
    /// [`insert_unless_image_needed`](Wal::insert_unless_image_needed) for the
    /// race with a concurrent checkpoint.
    pub fn needs_full_page_image(&self, page_lsn: Lsn) -> bool {
        self.shared.images_on() && page_lsn <= self.redo_lsn()
    }

    /// Take full-page images as if `full_page_writes` were on until the
    /// returned guard is dropped (PostgreSQL's `forcePageWrites` during
    /// `pg_backup_start` .. `pg_backup_stop`). An online backup copies data
    /// files while they are written, so a page may be copied torn; with
    /// images forced before the backup's checkpoint takes its redo point,
    /// every page changed after that point is restored whole from the WAL
    /// the backup keeps, whatever the copy holds. Guards nest.
    pub fn force_full_page_writes(&self) -> ForcedFullPageWrites<'_> {
        self.shared.forced_images.fetch_add(1, Ordering::SeqCst);
        ForcedFullPageWrites { wal: self }
    }

    /// The redo pointer: the redo point of the latest checkpoint (one being
    /// taken counts from the moment it takes its redo point), or that of the
    /// control file at open, or 0 in a log that never had a checkpoint.
    pub fn redo_lsn(&self) -> Lsn {
        Lsn(self.shared.redo_lsn.load(Ordering::Acquire))
    }

    /// Are full-page writes on (by the setting, or forced by a live
    /// [`force_full_page_writes`](Wal::force_full_page_writes) guard)?
    pub fn full_page_writes(&self) -> bool {
        self.shared.images_on()
    }

    /// WAL bytes inserted since the redo point of the latest checkpoint: what
    /// a checkpointer compares with its volume trigger (PostgreSQL's
    /// `max_wal_size` / `CheckPointSegments`).
    pub fn bytes_since_checkpoint(&self) -> u64 {
        self.insert_lsn().distance_from(self.redo_lsn())
    }

    /// The checkpoint the control file names: the one found at open, or the
    /// latest completed by [`checkpoint`](Wal::checkpoint). `None` for a data
    /// directory that never completed one.
    pub fn last_checkpoint(&self) -> Option<ControlData> {
        *self.last_checkpoint.lock()
    }

    /// The data directory (holds `wal/` and `control`).
    pub fn datadir(&self) -> &Path {
        &self.datadir
    }

    /// Return once every byte before `lsn` is durable (written and
    /// fdatasync'ed). Waits with other committers so one fdatasync serves
    /// them all (group commit).
    pub fn flush(&self, lsn: Lsn) -> Result<()> {
        self.shared
            .counters
            .flush_requests
            .fetch_add(1, Ordering::Relaxed);
        self.shared.flush(lsn)
    }

    /// Why the log refuses writes, if it does (rule 7): the first failed
    /// write or fdatasync, or [`refuse_writes`](Wal::refuse_writes)'s reason.
    pub fn refusing(&self) -> Option<String> {
        self.shared.refused.get().cloned()
    }

    /// Refuse every later insert and flush with
    /// [`WalError::WritesRefused`]`(why)`, as after a failed write (for a
    /// caller that cannot let what is in the buffer become durable later,
    /// e.g. a commit it has reported in doubt). A log already refusing keeps
    /// its first reason.
    pub fn refuse_writes(&self, why: impl Into<String>) {
        let _ = self.shared.refused.set(why.into());
    }

    /// Flush everything inserted so far.
    pub fn flush_all(&self) -> Result<()> {
        self.flush(self.insert_lsn())
    }

    /// Everything before this position is durable.
    pub fn flushed_lsn(&self) -> Lsn {
        Lsn(self.shared.flushed_lsn.load(Ordering::Acquire))
    }

    /// Where the next record will start: the end of everything inserted.
    pub fn insert_lsn(&self) -> Lsn {
        Lsn(self.shared.insert_lsn.load(Ordering::Acquire))
    }

    /// Would a page with LSN `lsn` need a WAL flush before being written?
    pub fn needs_flush(&self, lsn: Lsn) -> bool {
        lsn > self.flushed_lsn()
    }

    /// Counters since open.
    pub fn stats(&self) -> WalStats {
        let (records, bytes) = {
            let ins = self.shared.insert.lock();
            (ins.records, ins.bytes)
        };
        let c = &self.shared.counters;
        WalStats {
            records,
            bytes,
            flush_requests: c.flush_requests.load(Ordering::Relaxed),
            fsyncs: c.fsyncs.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            segments_created: c.segments_created.load(Ordering::Relaxed),
            segments_preallocated: c.segments_preallocated.load(Ordering::Relaxed),
        }
    }

    /// What opening the log found.
    pub fn startup(&self) -> Startup {
        self.startup
    }

    /// The segment size the log is written with.
    pub fn segment_size(&self) -> u64 {
        self.shared.size.bytes()
    }

    /// The file system the log's segments and control file go through
    /// (for a reader of the same files: `WalReader::with_fs`).
    pub fn file_system(&self) -> Arc<dyn FileSystem> {
        Arc::clone(&self.shared.fs)
    }

    /// The WAL directory, `<datadir>/wal`.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Remove every segment that lies entirely before `lsn` (a checkpoint's
    /// redo point; [`checkpoint`](Wal::checkpoint) calls it last). `lsn` must be flushed already. Returns
    /// how many segments were removed.
    pub fn recycle_before(&self, lsn: Lsn) -> Result<usize> {
        let flushed = self.flushed_lsn();
        if lsn > flushed {
            return Err(WalError::RecyclePastFlush {
                lsn,
                flushed_lsn: flushed,
            });
        }
        let shared = &self.shared;
        // Under `write`, so no segment is being created or written meanwhile.
        let mut w = shared.write.lock();
        let mut removed = 0;
        for start in list_segments(&*shared.fs, &shared.dir, shared.size)? {
            if start.0 + shared.size.bytes() > lsn.0 {
                break;
            }
            w.segments.forget(start);
            let path = segment_path(&shared.dir, start);
            shared
                .fs
                .remove_file(&path)
                .map_err(|e| WalError::io("remove", &path, e))?;
            removed += 1;
        }
        if removed > 0 {
            sync_dir(&*shared.fs, &shared.dir)?;
        }
        Ok(removed)
    }

    /// Stop the background flusher, flush everything, and report any error
    /// (dropping the log does the same but cannot report).
    pub fn close(mut self) -> Result<()> {
        self.flusher.take();
        self.stop_preallocating();
        self.shared.flush(self.insert_lsn())
    }
}

impl Wal {
    /// Stop the thread that makes segments ahead, and remove the one it made
    /// that no write took (the next open would): a closed log's directory
    /// holds its segments only. A failure to remove it leaves it for the
    /// next open; nothing depends on it.
    fn stop_preallocating(&mut self) {
        if self.preallocator.take().is_some() {
            let _ = remove_leftover_files(&*self.shared.fs, &self.shared.dir);
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        // Stop the background threads first (they hold an Arc of `shared`).
        self.flusher.take();
        self.stop_preallocating();
        // A clean shutdown loses nothing; an error here has nowhere to go
        // (use `close` to see it), and a crash test never gets here.
        let _ = self.shared.flush(self.insert_lsn());
    }
}

/// Full-page images forced on while it lives
/// ([`Wal::force_full_page_writes`]).
#[derive(Debug)]
pub struct ForcedFullPageWrites<'a> {
    wal: &'a Wal,
}

impl Drop for ForcedFullPageWrites<'_> {
    fn drop(&mut self) {
        self.wal.shared.forced_images.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Shared {
    /// Full-page writes on, by the setting or forced.
    fn images_on(&self) -> bool {
        self.full_page_writes || self.forced_images.load(Ordering::SeqCst) > 0
    }

    fn check_refused(&self) -> Result<()> {
        match self.refused.get() {
            Some(why) => Err(WalError::WritesRefused(why.clone())),
            None => Ok(()),
        }
    }

    /// Insert `record`; with `fpw_check = Some(lsn)`, insert nothing and
    /// return `None` if `lsn <= redo pointer` (read under `insert`).
    fn insert(&self, record: &Record, fpw_check: Option<Lsn>) -> Result<Option<(Lsn, Lsn)>> {
        // Step 1: everything that needs no lock.
        let mut unlinked = record.encode_unlinked();
        let len = unlinked.len();
        loop {
            self.check_refused()?;
            let mut ins = self.insert.lock();
            if !ins.buf.is_empty() && ins.buf.len() + len > self.buffer_size {
                // The buffer is full: write it out ourselves, then retry.
                drop(ins);
                self.write_out(false)?;
                continue;
            }
            if let Some(lsn) = fpw_check
                && lsn.0 <= self.redo_lsn.load(Ordering::Acquire)
                && self.images_on()
            {
                return Ok(None);
            }
            // Step 2: take the position and link into the chain.
            let start = ins.next;
            let end = Lsn(start.0 + len as u64);
            // Everything before the flushed position is durable now, so it
            // was before this record reaches the disk: the reader's proof
            // that damage before it is inside durable WAL.
            let durable = Lsn(self.flushed_lsn.load(Ordering::Acquire));
            let bytes = unlinked.link(ins.prev, durable);
            ins.buf.extend_from_slice(bytes);
            ins.prev = start;
            ins.next = end;
            ins.records += 1;
            ins.bytes += len as u64;
            self.insert_lsn.store(end.0, Ordering::Release);
            return Ok(Some((start, end)));
        }
    }

    /// Take a checkpoint's redo point: the insert position, under `insert`,
    /// published as the redo pointer before the lock is released. Every
    /// record inserted later starts at or after it, and every insert that
    /// checks the redo pointer under `insert` sees the new value.
    pub(crate) fn take_redo_point(&self) -> Lsn {
        let ins = self.insert.lock();
        let redo = ins.next;
        self.redo_lsn.fetch_max(redo.0, Ordering::AcqRel);
        redo
    }

    /// Steps a-e of the module docs: write out everything inserted so far,
    /// and with `sync`, fdatasync it and advance `flushed_lsn`.
    fn write_out(&self, sync: bool) -> Result<()> {
        let mut w = self.write.lock();
        self.check_refused()?;
        // Open (or create) every segment the bytes inserted so far reach
        // while they are still in the insert buffer: an open that fails (the
        // process out of descriptors, a full disk while creating a segment)
        // loses nothing, so it is this call's error, not a reason to refuse
        // every later write. `reach` is the end of the last segment open.
        //
        // Every segment a chunk reaches is opened before any byte of it is
        // written, including the one that starts where the chunk ends: a
        // record that runs into a segment, or a log that reaches its
        // start, proves the file exists (the reader's rule 1). If records
        // were inserted past the segments opened meanwhile, open those too
        // and look again rather than split a record at a segment boundary;
        // inserts cannot outrun this for long, since one that finds the
        // buffer full waits for `write`, which is held here.
        let from = w.written;
        let mut target = Lsn(self.insert_lsn.load(Ordering::Acquire));
        let (chunk_start, upto) = loop {
            let reach = w.segments.open_through(from, target, &self.counters)?;
            let mut ins = self.insert.lock();
            if ins.next > reach {
                target = ins.next;
                continue;
            }
            let chunk_start = ins.buf_start;
            let upto = ins.next;
            std::mem::swap(&mut ins.buf, &mut w.spare);
            ins.buf_start = upto;
            break (chunk_start, upto);
        };
        let mut chunk = std::mem::take(&mut w.spare);
        debug_assert_eq!(chunk_start, w.written);
        let result = self.write_chunk(&mut w, chunk_start, &chunk, upto, sync);
        chunk.clear();
        if chunk.capacity() > 2 * self.buffer_size {
            chunk.shrink_to(self.buffer_size);
        }
        w.spare = chunk;
        if let Err(e) = &result {
            let _ = self.refused.set(e.to_string());
        }
        result
    }

    fn write_chunk(
        &self,
        w: &mut WriteState,
        chunk_start: Lsn,
        chunk: &[u8],
        upto: Lsn,
        sync: bool,
    ) -> Result<()> {
        if !chunk.is_empty() {
            w.segments.write(chunk_start, chunk, &self.counters)?;
        }
        w.written = upto;
        if sync {
            w.segments.sync(&self.counters)?;
            self.flushed_lsn.store(upto.0, Ordering::Release);
        }
        Ok(())
    }

    /// The group-commit protocol of the module docs.
    fn flush(&self, lsn: Lsn) -> Result<()> {
        if Lsn(self.flushed_lsn.load(Ordering::Acquire)) >= lsn {
            return Ok(());
        }
        let insert_lsn = Lsn(self.insert_lsn.load(Ordering::Acquire));
        if lsn > insert_lsn {
            return Err(WalError::FlushPastEnd { lsn, insert_lsn });
        }
        let mut ctl = self.flush_ctl.lock();
        loop {
            if Lsn(self.flushed_lsn.load(Ordering::Acquire)) >= lsn {
                return Ok(());
            }
            self.check_refused()?;
            if ctl.leader_active {
                self.flushed_cv.wait(&mut ctl);
                continue;
            }
            ctl.leader_active = true;
            drop(ctl);
            let result = {
                let _leader = Leadership(self);
                self.write_out(true)
            };
            ctl = self.flush_ctl.lock();
            result?;
        }
    }
}

/// The flush leader's term: when it ends (even by a panic), the next waiter
/// may lead, and every waiter rechecks `flushed_lsn`.
struct Leadership<'a>(&'a Shared);

impl Drop for Leadership<'_> {
    fn drop(&mut self) {
        self.0.flush_ctl.lock().leader_active = false;
        self.0.flushed_cv.notify_all();
    }
}

/// The segment files being written. Protected by `Shared::write`.
#[derive(Debug)]
struct SegmentWriter {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    size: SegmentSize,
    /// Ascending by start: the segment being written last, before it those
    /// written since the last fdatasync (closed after it).
    open: Vec<OpenSegment>,
    /// `Shared::creating`.
    creating: Arc<Mutex<()>>,
    /// Where to ask for the next segment to be made ahead (`None`: not
    /// preallocating).
    ahead: Option<Arc<Ahead>>,
}

#[derive(Debug)]
struct OpenSegment {
    start: Lsn,
    file: Box<dyn FsFile>,
    /// Written since its last fdatasync.
    dirty: bool,
}

impl SegmentWriter {
    /// pwrite `bytes` at `lsn`, split at segment boundaries, creating
    /// segments as the write reaches them.
    fn write(&mut self, lsn: Lsn, mut bytes: &[u8], counters: &Counters) -> Result<()> {
        let mut pos = lsn;
        while !bytes.is_empty() {
            let start = self.size.segment_start(pos);
            let offset = self.size.offset_in_segment(pos);
            let n = (self.size.room_after(pos) as usize).min(bytes.len());
            let seg = self.segment(start, counters)?;
            seg.dirty = true;
            let result = seg.file.write_all_at(&bytes[..n], offset);
            result.map_err(|e| {
                WalError::io(
                    format!("write at {pos} to"),
                    segment_path(&self.dir, start),
                    e,
                )
            })?;
            counters.writes.fetch_add(1, Ordering::Relaxed);
            bytes = &bytes[n..];
            pos = Lsn(pos.0 + n as u64);
        }
        Ok(())
    }

    /// fdatasync every segment written since the last sync, so that a write
    /// that crossed into a new segment is durable in both files; then close
    /// all but the newest.
    fn sync(&mut self, counters: &Counters) -> Result<()> {
        for seg in self.open.iter_mut().filter(|s| s.dirty) {
            seg.file
                .sync_data()
                .map_err(|e| WalError::io("fdatasync", segment_path(&self.dir, seg.start), e))?;
            seg.dirty = false;
            counters.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        let keep = self.open.len().saturating_sub(1);
        self.open.drain(..keep);
        Ok(())
    }

    /// Open (or create) every segment holding bytes in `from..to`, and the
    /// one holding `to` (the next segment when `to` is a boundary: a log
    /// that reaches a segment's start has that segment); the end of the
    /// last one (`from` if the range is empty).
    fn open_through(&mut self, from: Lsn, to: Lsn, counters: &Counters) -> Result<Lsn> {
        if to <= from {
            return Ok(from);
        }
        let mut start = self.size.segment_start(from);
        let last = self.size.segment_start(to);
        loop {
            self.segment(start, counters)?;
            if start >= last {
                return Ok(Lsn(start.0 + self.size.bytes()));
            }
            start = Lsn(start.0 + self.size.bytes());
        }
    }

    /// The open segment starting at `start`, opening or creating it.
    fn segment(&mut self, start: Lsn, counters: &Counters) -> Result<&mut OpenSegment> {
        if let Some(i) = self.open.iter().position(|s| s.start == start) {
            return Ok(&mut self.open[i]);
        }
        // A segment under its name was put there by a writer (the thread
        // that makes segments ahead makes only `.tmp` and `.next` files):
        // opened without `creating`, so that a write into the segment a
        // reopened log ends in does not wait for the zero-fill of the next.
        let (file, created) = match open_segment(&*self.fs, &self.dir, start)? {
            Some(file) => (file, false),
            None => {
                let _creating = self.creating.lock();
                open_or_create_segment(&*self.fs, &self.dir, start, self.size)?
            }
        };
        if created {
            counters.segments_created.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(ahead) = &self.ahead
            && self.open.iter().all(|s| s.start < start)
        {
            ahead.ask(Lsn(start.0 + self.size.bytes()));
        }
        self.open.push(OpenSegment {
            start,
            file,
            dirty: false,
        });
        Ok(self.open.last_mut().expect("just pushed"))
    }

    /// Close the segment starting at `start` (it is being removed).
    fn forget(&mut self, start: Lsn) {
        self.open.retain(|s| s.start != start);
    }
}

/// Make the log end at `end` on disk: zero the rest of the segment holding
/// `end` and remove every later segment. Afterwards everything past the insert
/// position reads as zeros, which the reader relies on to find the end, and no
/// bytes of an old torn tail can be mistaken for records written after it.
fn clear_after_end(fs: &dyn FileSystem, dir: &Path, size: SegmentSize, end: Lsn) -> Result<()> {
    let end_segment = size.segment_start(end);
    let path = segment_path(dir, end_segment);
    match fs.open(&path, false, false) {
        Ok(f) => clear_segment_tail(&*f, &path, size, end)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(WalError::io("open", &path, e)),
    }
    let mut removed = false;
    for start in list_segments(fs, dir, size)? {
        if start > end_segment {
            let p = segment_path(dir, start);
            fs.remove_file(&p)
                .map_err(|e| WalError::io("remove", &p, e))?;
            removed = true;
        }
    }
    if removed {
        sync_dir(fs, dir)?;
    }
    Ok(())
}

/// Zero `file` (the segment holding `end`) from `end` on, writing only pieces
/// that are not zero already, and restore its full length if it is short.
fn clear_segment_tail(file: &dyn FsFile, path: &Path, size: SegmentSize, end: Lsn) -> Result<()> {
    let len = file.len().map_err(|e| WalError::io("stat", path, e))?;
    let mut changed = false;
    let mut offset = size.offset_in_segment(end);
    let stop = len.min(size.bytes());
    let mut buf = vec![0u8; CLEAR_CHUNK];
    let zeros = vec![0u8; CLEAR_CHUNK];
    while offset < stop {
        let n = ((stop - offset) as usize).min(CLEAR_CHUNK);
        file.read_exact_at(&mut buf[..n], offset)
            .map_err(|e| WalError::io(format!("read at offset {offset}"), path, e))?;
        if buf[..n] != zeros[..n] {
            file.write_all_at(&zeros[..n], offset)
                .map_err(|e| WalError::io(format!("zero at offset {offset}"), path, e))?;
            changed = true;
        }
        offset += n as u64;
    }
    if len < size.bytes() {
        file.set_len(size.bytes())
            .map_err(|e| WalError::io("extend", path, e))?;
        changed = true;
    }
    if changed {
        file.sync_data()
            .map_err(|e| WalError::io("fdatasync", path, e))?;
    }
    Ok(())
}

/// The request to the preallocator: the start of the segment to make ahead
/// (the latest asked for; an older request not yet served is dropped, its
/// segment already behind the writes), and whether to stop.
#[derive(Debug, Default)]
struct Ahead {
    state: Mutex<AheadState>,
    cv: Condvar,
}

#[derive(Debug, Default)]
struct AheadState {
    want: Option<Lsn>,
    stop: bool,
}

impl Ahead {
    /// Ask for the segment starting at `start` to be made.
    fn ask(&self, start: Lsn) {
        let mut st = self.state.lock();
        if st.want.is_none_or(|w| w < start) {
            st.want = Some(start);
        }
        self.cv.notify_one();
    }
}

/// The thread that makes the next segment ahead of the writes (module docs,
/// "Segments made ahead").
#[derive(Debug)]
struct Preallocator {
    ahead: Arc<Ahead>,
    thread: Option<JoinHandle<()>>,
}

impl Preallocator {
    fn start(shared: Arc<Shared>, ahead: Arc<Ahead>) -> Result<Preallocator> {
        let dir = shared.dir.clone();
        let ahead2 = Arc::clone(&ahead);
        let thread = std::thread::Builder::new()
            .name("wal-prealloc".to_string())
            .spawn(move || {
                loop {
                    let start = {
                        let mut st = ahead2.state.lock();
                        while st.want.is_none() && !st.stop {
                            ahead2.cv.wait(&mut st);
                        }
                        if st.stop {
                            return;
                        }
                        st.want.take().expect("checked above")
                    };
                    shared.preallocate(start, &ahead2);
                }
            })
            .map_err(|e| WalError::io("start the WAL preallocation thread for", dir, e))?;
        Ok(Preallocator {
            ahead,
            thread: Some(thread),
        })
    }
}

impl Drop for Preallocator {
    fn drop(&mut self) {
        self.ahead.state.lock().stop = true;
        self.ahead.cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Shared {
    /// Make the segment starting at `start` if it is still ahead of the
    /// segment inserts go to and does not exist. A failure (a full disk, no
    /// descriptor left) is not reported: nothing depends on the segment
    /// yet, and the write that reaches it makes it itself, reporting what
    /// fails then. Its temporary file is removed (best effort).
    fn preallocate(&self, start: Lsn, ahead: &Ahead) {
        let _creating = self.creating.lock();
        // A segment behind the insert position's is the writer's (it may
        // even be removed by a checkpoint by now: made again here, it would
        // lie before the log's start). The insert position's own segment or
        // a later one cannot be removed (a checkpoint removes only segments
        // wholly before its redo point, which is at or before the insert
        // position), and the writer makes it, or takes it from here, under
        // `creating`: made here or there, it is made once.
        let insert_segment = self
            .size
            .segment_start(Lsn(self.insert_lsn.load(Ordering::Acquire)));
        if start < insert_segment || self.refused.get().is_some() {
            return;
        }
        // A close asked meanwhile abandons the zero-fill between two of
        // its pieces: the close waits for this thread, and would remove
        // the file at once (a 1 GiB segment is seconds of writing).
        let stop = || ahead.state.lock().stop;
        match make_segment_ahead(&*self.fs, &self.dir, start, self.size, &stop) {
            Ok(true) => {
                self.counters
                    .segments_created
                    .fetch_add(1, Ordering::Relaxed);
                self.counters
                    .segments_preallocated
                    .fetch_add(1, Ordering::Relaxed);
            }
            Ok(false) => {}
            Err(_) => {
                let tmp = temp_segment_path(&self.dir, start);
                let _ = self.fs.remove_file(&tmp);
            }
        }
    }
}

/// The background flusher of asynchronous commit.
#[derive(Debug)]
struct Flusher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Flusher {
    fn start(shared: Arc<Shared>, interval: Duration) -> Result<Flusher> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stop2 = Arc::clone(&stop);
        let dir = shared.dir.clone();
        let thread = std::thread::Builder::new()
            .name("wal-flusher".to_string())
            .spawn(move || {
                loop {
                    {
                        let mut stopped = stop2.0.lock();
                        if !*stopped {
                            stop2.1.wait_for(&mut stopped, interval);
                        }
                        if *stopped {
                            return;
                        }
                    }
                    let target = Lsn(shared.insert_lsn.load(Ordering::Acquire));
                    // A failed write or fdatasync is sticky (WritesRefused):
                    // every caller sees it, nothing is left to do. A segment
                    // that could not be opened lost nothing: next interval.
                    if shared.flush(target).is_err() && shared.refused.get().is_some() {
                        return;
                    }
                }
            })
            .map_err(|e| WalError::io("start the WAL flusher thread for", dir, e))?;
        Ok(Flusher {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
