//! Transactions: xids, commit and abort, status, and the redo of Xact records.
//!
//! # Transaction ids
//!
//! Xids are 64-bit and never wrap (PostgreSQL's 32-bit xids need freezing and
//! wraparound vacuums; 2^64 xids at a million commits a second last half a
//! million years). They come from an atomic counter in the running set,
//! starting at [`FIRST_NORMAL_XID`]; 0 is invalid and 2 is "frozen"
//! (always committed). After a restart the counter starts at the next xid
//! stored by the last checkpoint, and recovery raises it past every xid seen
//! in a replayed record.
//!
//! # Commit, in this order
//!
//! ```text
//!   commit_gate.read()            ── a checkpoint cannot pass between 1 and 3
//!   1. wal.insert(COMMIT xid ts)  -> end LSN E
//!   2. synchronous: wal.flush(E)  (group commit happens in the wal crate)
//!   3. clog[xid] = committed, group LSN = max(.., E), page LSN = max(.., E)
//!   release the gate
//!   4. remove xid from the running set
//! ```
//!
//! * 1 before 3: the record is the truth; the clog page carries LSN `E`, so the
//!   pool flushes the WAL through `E` before that page can be written (clog
//!   rule 3). With asynchronous commit step 2 is skipped: the commit returns
//!   with `E` possibly beyond `flushed_lsn()`, and heap may not set a commit
//!   hint until the WAL catches up (the group LSN says how far it must).
//! * 3 before 4: a snapshot that no longer sees the xid running finds its
//!   final status in the clog.
//! * Once step 1 returned (and with synchronous commit step 2), the
//!   transaction **is** committed: recovery replays the record whatever
//!   happens next. So a failure of step 3 (the clog page cannot be read or
//!   extended) is never reported as a failed commit, which would be a lie
//!   a caller could act on. It is PostgreSQL's critical section, which
//!   PANICs there: the commit returns its LSN, the xid still leaves the
//!   running set, its status is answered from memory (committed) for the
//!   rest of this run, and the manager **refuses every later write**
//!   (`begin`, commits of transactions begun earlier, checkpoints, vacuum)
//!   with [`EngineError::CommitNotRecorded`] naming the xid and the
//!   failure, until the database is reopened. Refusing checkpoints is what
//!   makes this safe: the redo point stays before the commit record, so
//!   the reopen replays it into the clog.
//! * The gate is PostgreSQL's `DELAY_CHKPT_START`: a checkpoint whose redo
//!   point falls after the commit record but which flushed the clog page
//!   before step 3 would lose the commit (recovery starts after the record).
//!   The checkpoint takes the gate exclusively once, after its redo point and
//!   before flushing pages, so every commit whose record precedes the redo
//!   point has updated the clog by then.
//!
//! # Abort
//!
//! 1. `wal.insert(ABORT xid)` (never flushed: losing it changes nothing, a
//!    transaction without a commit record is aborted anyway);
//! 2. the clog marks the xid aborted (even if step 1 failed);
//! 3. remove from the running set.
//!
//! Dropping an unfinished [`Transaction`] aborts it.
//!
//! # Status, and transactions that crashed
//!
//! [`TransactionManager::try_status`] reads the clog. "In progress" in the clog
//! means one of two things: the transaction is running now, or it was running
//! when the system crashed and never wrote a commit or abort record. They are
//! told apart by the **recovery horizon**: the next xid when recovery finished.
//! Every xid below it belongs to an earlier run, so "in progress" there means
//! crashed, and reads as aborted. Nothing is written to the clog for them.
//! PostgreSQL does the same in spirit (an xid that is in progress in clog but
//! not in the ProcArray is treated as aborted by `TransactionIdDidAbort`'s
//! callers); it checks the ProcArray, we compare one integer. The horizon
//! survives later restarts because the next xid only grows.
//!
//! A clog page that cannot be read makes the status an error naming the xid
//! and the page ([`TransactionStatus::status`] returns it, and every heap
//! read, write and vacuum passes it up): a guess ("in progress") would hide
//! committed rows from a scan that then ends without an error.
//!
//! # Xact records
//!
//! ```text
//!   kind Xact, info 0x00 COMMIT / 0x20 ABORT (PostgreSQL's XLOG_XACT_* values)
//!   header xid = the transaction
//!   payload: u64 LE commit/abort time, microseconds since the Unix epoch
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bufmgr::BufferPool;
use heap::txn::{
    FIRST_NORMAL_XID, FROZEN_XID, INVALID_XID, Snapshot, StatusError, TransactionStatus, XidStatus,
};
use parking_lot::{Mutex, RwLock};
use wal::{CheckpointInfo, Lsn, Record, RmgrKind, Wal};

use crate::error::{EngineError, ErrorKind, Result};
use crate::txn::Xid;
use crate::txn::clog::{Clog, ClogStatus};
use crate::txn::snapshot::RunningSet;

/// Longest pause between tries of a commit's flush that failed without
/// the WAL refusing writes (the pauses double from 1 ms: about half a
/// second in all).
const FLUSH_RETRY_MAX_PAUSE: Duration = Duration::from_millis(256);

/// `info` of a commit record (PostgreSQL's `XLOG_XACT_COMMIT`).
pub const XACT_COMMIT: u8 = 0x00;
/// `info` of an abort record (PostgreSQL's `XLOG_XACT_ABORT`).
pub const XACT_ABORT: u8 = 0x20;
/// Bytes of an Xact record's payload.
pub const XACT_PAYLOAD_LEN: usize = 8;

/// Whether a commit waits for its record to be durable.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub enum CommitMode {
    /// Wait for `wal.flush(end)` (PostgreSQL's `synchronous_commit = on`).
    #[default]
    Synchronous,
    /// Return after inserting the record; the WAL's background flusher (or
    /// the next synchronous flush) makes it durable later
    /// (`synchronous_commit = off`).
    Asynchronous,
}

impl CommitMode {
    fn to_u8(self) -> u8 {
        match self {
            CommitMode::Synchronous => 0,
            CommitMode::Asynchronous => 1,
        }
    }
    fn from_u8(v: u8) -> CommitMode {
        if v == 1 {
            CommitMode::Asynchronous
        } else {
            CommitMode::Synchronous
        }
    }
}

/// A decoded Xact record.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct XactRecord {
    /// The transaction the record ends.
    pub xid: Xid,
    /// Commit (`true`) or abort.
    pub committed: bool,
    /// Microseconds since the Unix epoch when the record was written.
    pub time_micros: u64,
}

impl XactRecord {
    /// The WAL record for this commit or abort.
    pub fn to_record(&self) -> Result<Record> {
        let info = if self.committed {
            XACT_COMMIT
        } else {
            XACT_ABORT
        };
        Record::builder(RmgrKind::Xact, info, self.xid)
            .payload(self.time_micros.to_le_bytes().to_vec())
            .build()
            .map_err(|e| {
                EngineError::wal(format!(
                    "could not build the transaction record of xid {}",
                    self.xid
                ))(e)
            })
    }

    /// Decode `record`; `end_lsn` only names it in errors.
    pub fn decode(record: &Record, end_lsn: Lsn) -> Result<XactRecord> {
        let bad = |detail: String| EngineError::MalformedXactRecord {
            lsn: end_lsn,
            detail,
        };
        if record.kind() != RmgrKind::Xact {
            return Err(bad(format!("a {:?} record, not Xact", record.kind())));
        }
        let committed = match record.info() {
            XACT_COMMIT => true,
            XACT_ABORT => false,
            other => return Err(bad(format!("unknown info byte {other:#04x}"))),
        };
        let xid = record.xid();
        if xid < FIRST_NORMAL_XID {
            return Err(bad(format!("xid {xid} is not a normal transaction id")));
        }
        let p = record.payload();
        if p.len() != XACT_PAYLOAD_LEN {
            return Err(bad(format!(
                "payload of {} bytes, expected {XACT_PAYLOAD_LEN}",
                p.len()
            )));
        }
        Ok(XactRecord {
            xid,
            committed,
            time_micros: u64::from_le_bytes(p.try_into().expect("8 bytes")),
        })
    }
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Counters since open.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct TxnStats {
    /// Transactions begun (the manager's own and the engine's writers).
    pub begun: u64,
    /// Transactions committed.
    pub committed: u64,
    /// Transactions aborted (rolled back, or failed to commit).
    pub aborted: u64,
    /// Runs of a [`Database::transaction`](crate::Database::transaction)
    /// (or `read_transaction`) closure after a retryable error: each is one
    /// rollback, one backoff and one more attempt.
    pub retries: u64,
    /// Retrying-transaction calls that still failed with a retryable error
    /// on their last attempt (the error was returned to the caller).
    pub retries_exhausted: u64,
}

/// Owner of transactions: hands out xids, commits and aborts them, answers
/// status questions for the heap, and takes snapshots.
#[derive(Debug)]
pub struct TransactionManager {
    pool: Arc<BufferPool>,
    wal: Arc<Wal>,
    clog: Clog,
    running: RunningSet,
    /// Xids below this that read "in progress" in the clog crashed.
    horizon: AtomicU64,
    mode: AtomicU8,
    /// Shared by committers between their commit record and their clog
    /// update; taken exclusively (and released at once) by a checkpoint.
    commit_gate: RwLock<()>,
    /// Set once a commit could not be recorded in the clog (module docs):
    /// every later write is refused.
    refusing: AtomicBool,
    /// The commits whose clog update failed, and the first such failure.
    unrecorded: Mutex<Unrecorded>,
    begun: AtomicU64,
    committed: AtomicU64,
    aborted: AtomicU64,
    retries: AtomicU64,
    retries_exhausted: AtomicU64,
}

/// Commits whose record is in the WAL but whose clog update failed: their
/// status for the rest of this run, and the reason writes are refused.
#[derive(Debug, Default)]
struct Unrecorded {
    /// xid -> end LSN of its commit record.
    commits: HashMap<Xid, Lsn>,
    /// The first commit that could not be recorded: (xid, end LSN, error).
    first: Option<(Xid, Lsn, String)>,
}

/// The next xid the last checkpoint recorded, or [`FIRST_NORMAL_XID`] for a
/// log without a checkpoint: the hint for [`TransactionManager::open`].
pub fn next_xid_hint(wal: &Wal) -> Xid {
    wal.last_checkpoint()
        .map(|c| c.next_xid)
        .unwrap_or(FIRST_NORMAL_XID)
        .max(FIRST_NORMAL_XID)
}

impl TransactionManager {
    /// Open over `pool` (whose WAL sink should be `wal`) with the next xid at
    /// least `next_xid_hint` (see [`next_xid_hint`]). Run recovery before the
    /// first [`begin`](Self::begin): redo raises the next xid and the
    /// recovery horizon, which must both be final before xids are handed out.
    pub fn open(pool: Arc<BufferPool>, wal: Arc<Wal>, next_xid_hint: Xid) -> Result<Self> {
        let next = next_xid_hint.max(FIRST_NORMAL_XID);
        let clog = Clog::open(&pool)?;
        Ok(TransactionManager {
            pool,
            wal,
            clog,
            running: RunningSet::new(next),
            horizon: AtomicU64::new(next),
            mode: AtomicU8::new(CommitMode::Synchronous.to_u8()),
            commit_gate: RwLock::new(()),
            refusing: AtomicBool::new(false),
            unrecorded: Mutex::new(Unrecorded::default()),
            begun: AtomicU64::new(0),
            committed: AtomicU64::new(0),
            aborted: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            retries_exhausted: AtomicU64::new(0),
        })
    }

    /// The buffer pool the commit log is read through.
    pub fn pool(&self) -> &Arc<BufferPool> {
        &self.pool
    }

    /// The WAL commit and abort records go to.
    pub fn wal(&self) -> &Arc<Wal> {
        &self.wal
    }

    /// The commit log.
    pub fn clog(&self) -> &Clog {
        &self.clog
    }

    /// The default commit mode of [`Transaction::commit`].
    pub fn commit_mode(&self) -> CommitMode {
        CommitMode::from_u8(self.mode.load(Ordering::Relaxed))
    }

    /// Set the commit mode of later commits.
    pub fn set_commit_mode(&self, mode: CommitMode) {
        self.mode.store(mode.to_u8(), Ordering::Relaxed);
    }

    /// The next xid to be handed out.
    pub fn next_xid(&self) -> Xid {
        self.running.next_xid()
    }

    /// Xids below this that never finished crashed, and read as aborted.
    pub fn recovery_horizon(&self) -> Xid {
        self.horizon.load(Ordering::Acquire)
    }

    /// Recovery saw `xid` in a record: the next xid (and the recovery
    /// horizon) move past it.
    pub fn observe_xid(&self, xid: Xid) {
        if xid < FIRST_NORMAL_XID {
            return;
        }
        let next = xid.saturating_add(1);
        self.running.advance_next_xid(next);
        self.horizon.fetch_max(next, Ordering::AcqRel);
    }

    /// Start a transaction: a new xid, running, with its clog page present.
    pub fn begin(&self) -> Result<Transaction<'_>> {
        let (xid, shard) = self.begin_xid()?;
        Ok(Transaction {
            tm: self,
            xid,
            shard,
            finished: false,
        })
    }

    /// A new xid, running, with its clog page present: (xid, running-set
    /// shard), for a caller that finishes it with `commit_xid` / `abort_xid`.
    pub(crate) fn begin_xid(&self) -> Result<(Xid, usize)> {
        self.check_writable()?;
        let (xid, shard) = self.running.begin();
        if let Err(e) = self.clog.ensure_page(&self.pool, Some(&self.wal), xid) {
            self.running.finish(xid, shard);
            return Err(e);
        }
        self.begun.fetch_add(1, Ordering::Relaxed);
        Ok((xid, shard))
    }

    /// A snapshot for a reader that has no xid.
    pub fn snapshot(&self) -> Snapshot {
        self.running.snapshot(INVALID_XID)
    }

    /// The lowest xid any snapshot taken now could treat as running.
    pub fn oldest_running(&self) -> Xid {
        self.running.oldest_running()
    }

    /// Running transactions now.
    pub fn running_count(&self) -> usize {
        self.running.len()
    }

    /// Transactions begun, committed, aborted and retried since open.
    pub fn stats(&self) -> TxnStats {
        TxnStats {
            begun: self.begun.load(Ordering::Relaxed),
            committed: self.committed.load(Ordering::Relaxed),
            aborted: self.aborted.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            retries_exhausted: self.retries_exhausted.load(Ordering::Relaxed),
        }
    }

    /// Count one more attempt of a retrying transaction (`crate::retry`).
    pub(crate) fn note_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// Count a retrying transaction whose last attempt failed retryably.
    pub(crate) fn note_retries_exhausted(&self) {
        self.retries_exhausted.fetch_add(1, Ordering::Relaxed);
    }

    /// `Err(CommitNotRecorded)` once a commit could not be recorded in the
    /// clog (module docs, "Commit"): no write may start until the database
    /// is reopened.
    pub fn check_writable(&self) -> Result<()> {
        if !self.refusing.load(Ordering::Acquire) {
            return Ok(());
        }
        let u = self.unrecorded.lock();
        let (xid, commit_lsn, detail) = u.first.clone().unwrap_or_default();
        Err(EngineError::CommitNotRecorded {
            xid,
            commit_lsn,
            detail,
        })
    }

    /// The commit of `xid`, whose record ends at `end`, could not be set in
    /// the clog: remember it as committed, refuse every later write.
    fn commit_not_recorded(&self, xid: Xid, end: Lsn, e: &EngineError) {
        let mut u = self.unrecorded.lock();
        u.commits.insert(xid, end);
        u.first.get_or_insert_with(|| (xid, end, e.to_string()));
        self.refusing.store(true, Ordering::Release);
    }

    /// Flush the WAL through `xid`'s commit record (ending at `end`). A
    /// failure that left the log accepting writes (a segment it could not
    /// open or create: out of file descriptors, a full disk) lost nothing,
    /// the record waits in the WAL buffer: the flush is tried again for up
    /// to about half a second. If it still fails, the commit is in doubt,
    /// and the log is made to refuse every later write as after any failed
    /// flush, so the record cannot become durable behind the back of this
    /// run, which holds the xid as running until the reopen decides.
    fn flush_commit(&self, xid: Xid, end: Lsn) -> wal::Result<()> {
        let mut pause = Duration::from_millis(1);
        loop {
            let e = match self.wal.flush(end) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if self.wal.refusing().is_some() || pause > FLUSH_RETRY_MAX_PAUSE {
                self.wal.refuse_writes(format!(
                    "the commit record of xid {xid} (to {end}) could not be flushed: {e}"
                ));
                return Err(e);
            }
            std::thread::sleep(pause);
            pause *= 2;
        }
    }

    pub(crate) fn commit_xid(&self, xid: Xid, shard: usize, mode: CommitMode) -> Result<Lsn> {
        if let Err(e) = self.check_writable() {
            // Begun before the refusal: it cannot commit now.
            let _ = self.finish_aborted(xid, shard, Lsn::ZERO);
            return Err(e);
        }
        let rec = XactRecord {
            xid,
            committed: true,
            time_micros: now_micros(),
        }
        .to_record()?;
        let end = {
            let _gate = self.commit_gate.read();
            let inserted = self.wal.insert(&rec);
            let (_, end) = match inserted {
                Ok(p) => p,
                Err(e) => {
                    // Nothing was logged: the transaction is aborted. The
                    // WAL error is the one worth reporting.
                    let _ = self.finish_aborted(xid, shard, Lsn::ZERO);
                    return Err(EngineError::Wal {
                        what: format!("could not write the commit record of xid {xid}"),
                        source: e,
                    });
                }
            };
            if mode == CommitMode::Synchronous {
                // On failure the commit is in doubt (the record may yet reach
                // disk): the xid stays running, invisible, and the WAL refuses
                // every later write (wal rule 7).
                self.flush_commit(xid, end).map_err(|e| EngineError::wal(format!(
                    "could not flush the commit record of xid {xid} to {end}; its outcome is in doubt"
                ))(e))?;
            }
            // The commit is made (module docs): a failure from here on
            // is not the transaction's. Still under the gate, so a
            // checkpoint waiting for it sees the refusal.
            if let Err(e) = self
                .clog
                .set(&self.pool, &self.wal, xid, ClogStatus::Committed, end)
            {
                self.commit_not_recorded(xid, end, &e);
            }
            end
        };
        self.running.finish(xid, shard);
        self.committed.fetch_add(1, Ordering::Relaxed);
        Ok(end)
    }

    /// Record `xid` as aborted; `abort_end` is the end of its abort record
    /// (zero if none could be logged), which the clog page LSN is raised to.
    fn finish_aborted(&self, xid: Xid, shard: usize, abort_end: Lsn) -> Result<()> {
        let set = self
            .clog
            .set(&self.pool, &self.wal, xid, ClogStatus::Aborted, abort_end);
        self.running.finish(xid, shard);
        self.aborted.fetch_add(1, Ordering::Relaxed);
        set
    }

    pub(crate) fn abort_xid(&self, xid: Xid, shard: usize) -> Result<()> {
        let logged = XactRecord {
            xid,
            committed: false,
            time_micros: now_micros(),
        }
        .to_record()
        .and_then(|rec| {
            self.wal.insert(&rec).map_err(|e| {
                EngineError::wal(format!("could not write the abort record of xid {xid}"))(e)
            })
        });
        let abort_end = logged.as_ref().map_or(Lsn::ZERO, |&(_, end)| end);
        let set = self.finish_aborted(xid, shard, abort_end);
        logged?;
        set
    }

    /// What became of `xid`, or the clog error that kept us from knowing.
    pub fn try_status(&self, xid: Xid) -> Result<XidStatus> {
        if xid == FROZEN_XID {
            return Ok(XidStatus::Committed {
                commit_lsn: Lsn::ZERO,
            });
        }
        if xid < FIRST_NORMAL_XID {
            return Ok(XidStatus::Aborted);
        }
        if xid >= self.running.next_xid() {
            // Not handed out yet: nothing it wrote can exist.
            return Ok(XidStatus::InProgress);
        }
        if self.refusing.load(Ordering::Acquire)
            && let Some(&commit_lsn) = self.unrecorded.lock().commits.get(&xid)
        {
            return Ok(XidStatus::Committed { commit_lsn });
        }
        Ok(match self.clog.get(&self.pool, xid)? {
            (ClogStatus::Committed, lsn) => XidStatus::Committed { commit_lsn: lsn },
            (ClogStatus::Aborted, _) => XidStatus::Aborted,
            (ClogStatus::InProgress, _) if xid < self.recovery_horizon() => XidStatus::Aborted,
            (ClogStatus::InProgress, _) => XidStatus::InProgress,
        })
    }

    /// Take a checkpoint: next xid and redo point with no xid assigned in
    /// between, the commit gate passed once, every dirty page (clog included)
    /// flushed, then the checkpoint record and control file (wal crate).
    pub fn checkpoint(&self) -> Result<CheckpointInfo<usize>> {
        self.check_writable()?;
        // No begin between reading the next xid and taking the redo point:
        // an xid assigned in that window could log a record before the redo
        // point that recovery would never see, and be handed out again.
        let frozen = self.running.freeze();
        let next = self.running.next_xid();
        self.wal
            .checkpoint(
                move |_redo| {
                    drop(frozen);
                    // Wait for commits whose record may precede the redo point
                    // to finish their clog update (DELAY_CHKPT_START).
                    drop(self.commit_gate.write());
                    // A commit that failed to reach the clog in the
                    // meantime: its record may precede the redo point.
                    self.check_writable()?;
                    let pages = self
                        .pool
                        .flush_all(false)
                        .map_err(EngineError::buffer("flushing the pages"))?;
                    // Every fork is fsynced: its length is durable, and the
                    // record follows the redo point, where recovery starts.
                    crate::durable::log_durable_lengths(&self.wal, &self.pool)?;
                    Ok::<_, EngineError>(pages)
                },
                next,
            )
            .map_err(EngineError::wal("checkpoint failed"))
    }
}

impl TransactionStatus for TransactionManager {
    /// [`try_status`](Self::try_status) for the heap: a commit-log page that
    /// cannot be read is an error naming the xid and the page, which every
    /// read and write path passes up (never "in progress" on a guess, which
    /// would hide committed rows).
    fn status(&self, xid: Xid) -> std::result::Result<XidStatus, StatusError> {
        self.try_status(xid).map_err(|e| StatusError {
            xid,
            kind: match e.kind() {
                ErrorKind::BadInput => heap::ErrorKind::BadInput,
                ErrorKind::CorruptData => heap::ErrorKind::CorruptData,
                ErrorKind::Io => heap::ErrorKind::Io,
                ErrorKind::ResourceExhausted => heap::ErrorKind::ResourceExhausted,
                ErrorKind::Conflict => heap::ErrorKind::Conflict,
                // A clog read is never refused for another user's sake;
                // were it, running the transaction again would not help.
                ErrorKind::InUse => heap::ErrorKind::Io,
            },
            source: Box::new(e),
        })
    }

    fn flushed_lsn(&self) -> Lsn {
        self.wal.flushed_lsn()
    }
}

/// Replay an Xact record (commit or abort) ending at `end_lsn` into the clog,
/// and move the next xid past its xid.
pub fn redo_xact(record: &Record, end_lsn: Lsn, tm: &TransactionManager) -> Result<XactRecord> {
    let x = XactRecord::decode(record, end_lsn)?;
    tm.observe_xid(x.xid);
    let status = if x.committed {
        ClogStatus::Committed
    } else {
        ClogStatus::Aborted
    };
    tm.clog.set_for_redo(&tm.pool, x.xid, status, end_lsn)?;
    Ok(x)
}

/// A running transaction. Finish it with [`commit`](Self::commit) or
/// [`abort`](Self::abort); dropping it unfinished aborts it.
#[derive(Debug)]
pub struct Transaction<'a> {
    tm: &'a TransactionManager,
    xid: Xid,
    shard: usize,
    finished: bool,
}

impl<'a> Transaction<'a> {
    /// The transaction's id.
    pub fn xid(&self) -> Xid {
        self.xid
    }

    /// A snapshot for this transaction (its own xid counts as visible).
    pub fn snapshot(&self) -> Snapshot {
        self.tm.running.snapshot(self.xid)
    }

    /// Commit in the manager's commit mode; returns the commit record's end LSN.
    pub fn commit(self) -> Result<Lsn> {
        let mode = self.tm.commit_mode();
        self.commit_with(mode)
    }

    /// Commit in `mode`; returns the commit record's end LSN.
    pub fn commit_with(mut self, mode: CommitMode) -> Result<Lsn> {
        self.finished = true;
        self.tm.commit_xid(self.xid, self.shard, mode)
    }

    /// Abort: an abort record (not flushed), clog aborted, no longer running.
    pub fn abort(mut self) -> Result<()> {
        self.finished = true;
        self.tm.abort_xid(self.xid, self.shard)
    }

    /// Forget the transaction without finishing it, as a crash would: it stays
    /// running (and in progress in the clog) until the process ends. For tests.
    pub fn abandon(mut self) -> Xid {
        self.finished = true;
        self.xid
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // Errors cannot be reported from drop; the clog is set anyway.
            let _ = self.tm.abort_xid(self.xid, self.shard);
        }
    }
}
