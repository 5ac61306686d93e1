//! Crash recovery: replay the WAL from the last checkpoint's redo point.
//!
//! ```text
//!   control file ── redo LSN ──> WalReader ── record ──┬─ Xact       -> redo_xact (clog, next xid)
//!   (None: LSN 0)                                       ├─ Clog       -> a commit-log page zeroed again
//!                                                       ├─ Storage    -> durable lengths to the pool
//!                                                       ├─ Checkpoint -> next xid from its payload
//!                                                       └─ anything else -> caller's closure
//!                                                          (heap, btree, catalog redo)
//!   every record with a normal xid raises the next xid past it
//! ```
//!
//! Xact state needs nothing more than this: a transaction with a commit record
//! reads committed, one with an abort record aborted, and one with neither
//! (running at the crash) reads aborted because its xid is below the recovery
//! horizon (see `txn::xact`). Run this before the first `begin`.

use std::error::Error;

use bufmgr::BufferPool;
use wal::{CheckpointPayload, Lsn, Record, RmgrKind, WalReader};

use crate::error::{EngineError, Result};
use crate::invalid_pages::InvalidPages;
use crate::txn::clog::redo_clog;
use crate::txn::xact::{TransactionManager, redo_xact};

/// What a recovery run did.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct RecoveryStats {
    /// Where replay started (the redo point, or 0).
    pub start: Lsn,
    /// The end of valid WAL.
    pub end: Lsn,
    /// Records read.
    pub records: u64,
    /// Commit records replayed.
    pub commits: u64,
    /// Abort records replayed.
    pub aborts: u64,
    /// Commit-log page creations replayed.
    pub clog_pages: u64,
    /// Blocks read after recovery because they lie at or beyond their
    /// fork's durable length, and of them the all-zero ones (extensions a
    /// power loss cut off) that became new pages (`durable`). Set by
    /// `Database::open`.
    pub beyond_durable: u64,
    /// Of `beyond_durable`, the all-zero pages that became new pages.
    pub zeroed_new_pages: u64,
    /// Records handed to the caller's closure.
    pub other: u64,
    /// The next xid after replay.
    pub next_xid: u64,
    /// Records skipped because a page they change was missing or blank,
    /// its relation dropped later in the WAL (see `invalid_pages`).
    pub invalid_pages_forgiven: u64,
}

/// Replay from the last checkpoint's redo point (LSN 0 without one).
/// `other(start, end, record)` redoes every record that is not Xact or
/// Checkpoint.
pub fn recover<F, E>(tm: &TransactionManager, other: F) -> Result<RecoveryStats>
where
    F: FnMut(Lsn, Lsn, &Record) -> Result<(), E>,
    E: Into<Box<dyn Error + Send + Sync>>,
{
    let start = tm
        .wal()
        .last_checkpoint()
        .map(|c| c.redo_lsn)
        .unwrap_or(Lsn::ZERO);
    recover_from(tm, start, other)
}

/// Replay from `start`, which must be the start of a record.
pub fn recover_from<F, E>(
    tm: &TransactionManager,
    start: Lsn,
    mut other: F,
) -> Result<RecoveryStats>
where
    F: FnMut(Lsn, Lsn, &Record) -> Result<(), E>,
    E: Into<Box<dyn Error + Send + Sync>>,
{
    let wal = tm.wal();
    let mut reader =
        WalReader::with_fs(wal.file_system(), wal.datadir(), start, wal.segment_size()).map_err(
            EngineError::wal(format!("could not start reading the WAL at {start}")),
        )?;
    let mut stats = RecoveryStats {
        start,
        ..RecoveryStats::default()
    };
    while let Some((lsn, record)) = reader
        .next_record()
        .map_err(EngineError::wal("could not read the WAL during recovery"))?
    {
        let end = Lsn(lsn.0 + record.encoded_len() as u64);
        stats.records += 1;
        tm.observe_xid(record.xid());
        match record.kind() {
            RmgrKind::Xact => {
                if redo_xact(&record, end, tm)?.committed {
                    stats.commits += 1;
                } else {
                    stats.aborts += 1;
                }
            }
            RmgrKind::Clog => {
                stats.clog_pages += 1;
                redo_clog(&record, end, tm.clog(), tm.pool())?;
            }
            RmgrKind::Storage => crate::durable::redo_storage(&record, end, tm.pool())?,
            RmgrKind::Checkpoint => {
                let p = CheckpointPayload::from_record(&record)
                    .map_err(EngineError::wal(format!("bad checkpoint record at {lsn}")))?;
                // Every xid below it was handed out before the checkpoint.
                if p.next_xid > 0 {
                    tm.observe_xid(p.next_xid - 1);
                }
            }
            kind => {
                stats.other += 1;
                other(lsn, end, &record).map_err(|e| EngineError::Redo {
                    lsn,
                    kind,
                    source: e.into(),
                })?;
            }
        }
    }
    stats.end = reader.end_of_wal().unwrap_or(reader.position());
    stats.next_xid = tm.next_xid();
    Ok(stats)
}

type RedoError = Box<dyn Error + Send + Sync>;

/// Replay one non-Xact record (recovery step 4). A record that changes a
/// page whose relation is gone is remembered in `invalid` and skipped until
/// the relation's drop record forgives it (see `invalid_pages`).
pub(crate) fn redo_record(
    pool: &BufferPool,
    invalid: &mut InvalidPages,
    lsn: Lsn,
    end: Lsn,
    record: &Record,
) -> Result<(), RedoError> {
    match record.kind() {
        RmgrKind::Heap | RmgrKind::Btree if invalid.skip(pool, lsn, record)? => Ok(()),
        RmgrKind::Heap => heap::redo(record, end, pool).map_err(Into::into),
        RmgrKind::FullPage => wal::redo_full_page(record, end, pool).map_err(Into::into),
        RmgrKind::Btree => btree::redo(record, end, pool).map_err(Into::into),
        RmgrKind::Catalog => invalid.redo_catalog(pool, record),
        kind => Err(format!("no redo for {kind:?} records (the catalog is a heap)").into()),
    }
}
