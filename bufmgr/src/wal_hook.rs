//! How the buffer manager talks to the write-ahead log without depending on it.
//!
//! `bufmgr` sits below `wal` in the crate graph; the pool is handed an
//! implementation of [`WalSink`] and calls it at exactly two moments:
//!
//! 1. Before writing a dirty page of a permanent relation: WAL must be durable
//!    up to the page's LSN (rule 5, WAL before data).
//! 2. At the first hint-only change of a permanent page while checksums are on:
//!    the WAL may need a full-page image of the page, so that a torn write of
//!    the hinted page can be repaired at recovery (rule 6).

use std::fmt::Debug;

use crate::tag::BufferTag;

/// The error type a [`WalSink`] reports.
pub type WalError = Box<dyn std::error::Error + Send + Sync>;

/// The write-ahead log, as the buffer pool needs it.
pub trait WalSink: Send + Sync + Debug {
    /// Return once WAL up to `lsn` is durable.
    fn flush(&self, lsn: u64) -> Result<(), WalError>;

    /// Would writing a page with this LSN need a WAL flush first?
    fn needs_flush(&self, lsn: u64) -> bool;

    /// Called before the first hint-only dirtying of a permanent page with
    /// checksums on. If the page has not been logged since the current
    /// checkpoint's redo point (`page LSN <= redo`), log a full-page image of
    /// `page` and return its LSN, which the pool then stores as the page LSN;
    /// otherwise return `None`.
    fn log_hint_full_page(&self, tag: BufferTag, page: &[u8]) -> Result<Option<u64>, WalError>;
}

/// No WAL at all: nothing to flush, no full-page images. For pools whose
/// pages need no crash safety (benchmarks of the buffer manager alone, tests).
#[derive(Debug, Default)]
pub struct NoWal;

impl WalSink for NoWal {
    fn flush(&self, _lsn: u64) -> Result<(), WalError> {
        Ok(())
    }
    fn needs_flush(&self, _lsn: u64) -> bool {
        false
    }
    fn log_hint_full_page(&self, _tag: BufferTag, _page: &[u8]) -> Result<Option<u64>, WalError> {
        Ok(None)
    }
}
