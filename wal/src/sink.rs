//! The log as the buffer pool sees it: `impl bufmgr::WalSink for Wal`.
//!
//! Wiring: open the log, wrap it in an `Arc`, and hand the pool a clone:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = std::path::Path::new("/tmp/db");
//! let wal = Arc::new(wal::Wal::open(dir, wal::WalConfig::default())?);
//! let storage = Arc::new(bufmgr::FileStorage::open(dir)?);
//! let pool = bufmgr::BufferPool::with_wal(bufmgr::PoolConfig::new(1024), storage, wal.clone())?;
//! # Ok(()) }
//! ```
//!
//! The pool then calls:
//!
//! 1. `needs_flush(page_lsn)` and `flush(page_lsn)` before writing a dirty
//!    permanent page (rule 5, WAL before data), whatever writes it: eviction,
//!    a bulk-write ring recycling its own buffer, the background writer, or a
//!    checkpoint's `flush_all`;
//! 2. `log_hint_full_page(tag, page)` before the first hint-only dirtying of
//!    a clean permanent page with checksums on (rule 6). If the page has not
//!    been logged since the redo point, a `FullPage` record (info
//!    [`FPI_FOR_HINT`]) with the whole page is inserted and its *end* LSN
//!    returned; the pool stores it as the page LSN, so the flush of step 1
//!    covers the image before the hinted page is written.
//!
//! The image is taken with no hole: the page layout is heap's or B-tree's,
//! which the pool does not know. That costs up to 8 kB of WAL per first hint
//! after a checkpoint; a layout hint from the caller could shrink it later.

use bufmgr::{BufferTag, WalSink};

use crate::log::Wal;
use crate::lsn::Lsn;
use crate::record::{BlockRef, Hole, Record, RmgrKind};

/// The `info` byte of a full-page image logged for a hint
/// (PostgreSQL's `XLOG_FPI_FOR_HINT`).
pub const FPI_FOR_HINT: u8 = 0x01;

/// Info byte of a full-page record that logs a page written whole by a bulk
/// operation (PostgreSQL's `XLOG_FPI` from `log_newpage`).
pub const FPI_NEW_PAGE: u8 = 0x00;

/// The page LSN: bytes 0..8 of the page, little-endian (`bufmgr`'s layout).
/// A slice shorter than 8 bytes reads as LSN 0.
pub fn page_lsn(page: &[u8]) -> Lsn {
    page.get(..8).map_or(Lsn::ZERO, |b| {
        Lsn(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    })
}

impl Wal {
    /// The hint rule (PostgreSQL's `XLogSaveBufferForHint`): if full-page
    /// writes are on and `page` has not been logged since the redo point,
    /// log an image of it and return the record's end LSN; else `None`.
    pub fn log_hint_image(&self, tag: BufferTag, page: &[u8]) -> crate::Result<Option<Lsn>> {
        let lsn = page_lsn(page);
        // Cheap test first: most hints land on pages logged since the redo
        // point, and building the record copies 8 kB.
        if !self.needs_full_page_image(lsn) {
            return Ok(None);
        }
        let record = Record::builder(RmgrKind::FullPage, FPI_FOR_HINT, 0)
            .block(BlockRef::with_image(tag, page, Hole::NONE)?)
            .build()?;
        // No second test under the insert lock (unlike
        // `insert_unless_image_needed`): a redo point taken since the test
        // above only moves the redo pointer forward, which makes this image
        // more necessary, not less.
        let (_start, end) = self.insert(&record)?;
        Ok(Some(end))
    }
}

impl Wal {
    /// Log an image of `page` (its `hole` left out) unconditionally, for a
    /// page a bulk operation of transaction `xid` wrote whole (PostgreSQL's
    /// `log_newpage`): `(start, end)` of the record; the caller sets the page
    /// LSN to `end`. Replayed by `redo_full_page`, which never reads the
    /// on-disk copy.
    ///
    /// The record carries `xid` so that recovery sees the transaction even
    /// when it never logged anything else: a page of its tuples can be on
    /// disk (written once this record was flushed) while its commit or abort
    /// record never was, and recovery must then move the next xid past it
    /// (the xid reads as crashed, i.e. aborted) instead of handing it out
    /// again to a transaction whose commit would make those tuples visible.
    /// Pass 0 for a page no transaction's visibility depends on.
    pub fn log_new_page(
        &self,
        tag: BufferTag,
        page: &[u8],
        hole: Hole,
        xid: u64,
    ) -> crate::Result<(Lsn, Lsn)> {
        let record = Record::builder(RmgrKind::FullPage, FPI_NEW_PAGE, xid)
            .block(BlockRef::with_image(tag, page, hole)?.will_init())
            .build()?;
        self.insert(&record)
    }
}

impl WalSink for Wal {
    fn flush(&self, lsn: u64) -> Result<(), bufmgr::WalError> {
        Ok(Wal::flush(self, Lsn(lsn))?)
    }

    fn needs_flush(&self, lsn: u64) -> bool {
        Wal::needs_flush(self, Lsn(lsn))
    }

    fn log_hint_full_page(
        &self,
        tag: BufferTag,
        page: &[u8],
    ) -> Result<Option<u64>, bufmgr::WalError> {
        Ok(self.log_hint_image(tag, page)?.map(Lsn::as_u64))
    }
}
