//! Checkpoints: bounding how much WAL recovery must replay, and how much WAL
//! must be kept (PostgreSQL's `CreateCheckPoint`).
//!
//! A checkpoint makes every change logged before its *redo point* durable in
//! the data files, so recovery can start reading at the redo point and every
//! segment wholly before it can go. [`Wal::checkpoint`] does it in this order;
//! each step is where it is for a reason:
//!
//! 1. **Take the redo point** = the current insert position, under the insert
//!    lock, and publish it as the redo pointer before the lock is released.
//!    Every record inserted afterwards starts at or after it, so a change
//!    that step 2 may miss (a page dirtied after step 2 looked at it) is
//!    logged at or after the redo point and will be replayed. Publishing it
//!    *now*, not at the end, makes every first change to a page from here on
//!    carry a full-page image ([`Wal::needs_full_page_image`]): once this
//!    checkpoint completes, replay starts here, and a page torn by a later
//!    write can only be rebuilt from an image logged after this point.
//!    Publishing early is safe if the checkpoint fails: a later redo pointer
//!    only asks for more images than the old checkpoint needs.
//! 2. **Flush the pages** (`flush_pages(redo)`; the engine passes
//!    `|_| pool.flush_all(false)`, which writes every permanent page dirty at
//!    that moment in sorted order and fsyncs the files). Every change logged
//!    before the redo point is in a page that is dirty now, because callers
//!    mark a page dirty *before* inserting the record that describes the
//!    change, holding the page's exclusive lock until they have set its LSN
//!    (PostgreSQL's order; the page write waits for that lock). So after this
//!    step all of them are durable in the data files. The pool flushes the WAL up to each
//!    page's LSN before writing it (rule 5), as always.
//! 3. **Insert the checkpoint record** (redo LSN, next xid) **and flush it**.
//!    It comes after step 2 because it asserts that step 2 finished; it is
//!    flushed because the control file will point at it.
//! 4. **Write the control file** (atomically: temp file, fsync, rename, fsync
//!    the directory). Only now does recovery start at the new redo point; a
//!    crash at any earlier step leaves the old control file, the old redo
//!    point, and all the WAL after it, so nothing is lost.
//! 5. **Remove segments wholly before the redo point.** Last, because until
//!    step 4 is durable a crash would restart from the old redo point and
//!    need them.
//!
//! Only one checkpoint runs at a time (`checkpoint_lock`). Inserts and
//! commits continue throughout: no step holds a lock that inserts take,
//! except step 1 for a moment.
//!
//! Shortcuts: PostgreSQL (17+) also inserts an `XLOG_CHECKPOINT_REDO` record
//! at the redo point and spreads step 2 over `checkpoint_completion_target`
//! of the interval; our redo point is just the insert position (the next
//! record starts there), and the pacing of step 2 is the caller's. There is
//! no checkpointer thread here: the engine owns it, triggering by time and by
//! [`Wal::bytes_since_checkpoint`].

use std::time::{Duration, Instant};

use crate::control::{ControlData, write_control_with};
use crate::error::{Result, WalError};
use crate::log::Wal;
use crate::lsn::Lsn;
use crate::record::{Record, RmgrKind};

/// The `info` byte of a checkpoint record taken while the system runs
/// (PostgreSQL's `XLOG_CHECKPOINT_ONLINE`).
pub const CHECKPOINT_ONLINE: u8 = 0x10;
/// Bytes in a checkpoint record's payload.
pub const CHECKPOINT_PAYLOAD_LEN: usize = 16;

/// What a checkpoint record says.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct CheckpointPayload {
    /// Where recovery starts if this is the last checkpoint.
    pub redo_lsn: Lsn,
    /// The engine's next transaction id, as passed to [`Wal::checkpoint`].
    pub next_xid: u64,
}

impl CheckpointPayload {
    /// The payload's bytes: redo LSN, next xid, both u64 little-endian.
    pub fn encode(&self) -> [u8; CHECKPOINT_PAYLOAD_LEN] {
        let mut b = [0u8; CHECKPOINT_PAYLOAD_LEN];
        b[..8].copy_from_slice(&self.redo_lsn.0.to_le_bytes());
        b[8..].copy_from_slice(&self.next_xid.to_le_bytes());
        b
    }

    /// Read the payload of `record`, which must be a checkpoint record.
    pub fn from_record(record: &Record) -> Result<CheckpointPayload> {
        let p = record.payload();
        if record.kind() != RmgrKind::Checkpoint || p.len() != CHECKPOINT_PAYLOAD_LEN {
            return Err(WalError::MalformedRecord {
                offset: 0,
                detail: format!(
                    "not a checkpoint record ({:?}, payload of {} bytes)",
                    record.kind(),
                    p.len()
                ),
            });
        }
        Ok(CheckpointPayload {
            redo_lsn: Lsn(u64::from_le_bytes(p[..8].try_into().expect("8 bytes"))),
            next_xid: u64::from_le_bytes(p[8..].try_into().expect("8 bytes")),
        })
    }
}

/// What a completed checkpoint did.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CheckpointInfo<T> {
    /// Start LSN of the checkpoint record (named by the control file).
    pub checkpoint_lsn: Lsn,
    /// End LSN of the checkpoint record.
    pub checkpoint_end: Lsn,
    /// The redo point.
    pub redo_lsn: Lsn,
    /// What `flush_pages` returned (the pool's count of pages written).
    pub pages: T,
    /// Segments removed in step 5.
    pub segments_removed: usize,
    /// Time spent in `flush_pages` (step 2).
    pub flush_time: Duration,
    /// Time of the whole checkpoint.
    pub total_time: Duration,
}

impl Wal {
    /// Take a checkpoint: the five steps of the module docs. `flush_pages` is
    /// called once with the redo point and must make every page dirty at that
    /// moment durable (`|_| pool.flush_all(false)`); `next_xid` is stored in
    /// the checkpoint record and the control file unchanged.
    ///
    /// If `flush_pages` fails, the checkpoint stops before its record
    /// ([`WalError::CheckpointFlush`]) and the previous checkpoint stands.
    pub fn checkpoint<T, E>(
        &self,
        flush_pages: impl FnOnce(Lsn) -> Result<T, E>,
        next_xid: u64,
    ) -> Result<CheckpointInfo<T>>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let began = Instant::now();
        let _one_at_a_time = self.checkpoint_lock.lock();

        // 1. The redo point, published as the redo pointer.
        let redo = self.shared.take_redo_point();

        // 2. Every page dirty now reaches the data files.
        let flush_began = Instant::now();
        let pages = flush_pages(redo).map_err(|e| WalError::CheckpointFlush {
            redo,
            source: e.into(),
        })?;
        let flush_time = flush_began.elapsed();

        // 3. The checkpoint record, durable.
        let payload = CheckpointPayload {
            redo_lsn: redo,
            next_xid,
        };
        let record = Record::builder(RmgrKind::Checkpoint, CHECKPOINT_ONLINE, 0)
            .payload(payload.encode().to_vec())
            .build()?;
        let (checkpoint_lsn, checkpoint_end) = self.insert(&record)?;
        self.flush(checkpoint_end)?;

        // 4. The control file names it.
        let control = ControlData::now(checkpoint_lsn, redo, next_xid, self.segment_size());
        write_control_with(&*self.shared.fs, &self.datadir, &control)?;
        *self.last_checkpoint.lock() = Some(control);

        // 5. WAL before the redo point is no longer needed.
        let segments_removed = self.recycle_before(redo)?;

        Ok(CheckpointInfo {
            checkpoint_lsn,
            checkpoint_end,
            redo_lsn: redo,
            pages,
            segments_removed,
            flush_time,
            total_time: began.elapsed(),
        })
    }
}
