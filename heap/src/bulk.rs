//! Bulk insert: rows appended to new pages filled whole, through the
//! bulk-write ring (PostgreSQL's `heap_multi_insert` with a `BAS_BULKWRITE`
//! strategy, as COPY uses).
//!
//! ```text
//!   BulkWriter::insert(row) ── fits on the current page? ── add the tuple (page held exclusively)
//!                           └─ no: finish the page ── extend(ring) ── add the tuple
//!   finish the page: mark dirty, one full-page image record (XLOG_FPI, carrying the xid), page LSN = its end,
//!                    free space into the FSM, release
//! ```
//!
//! Rules:
//! 1. Only new pages: the writer never touches a page that existed before it
//!    (no FSM lookups), so each page is written by one thread and logged
//!    whole, once: one WAL record per page instead of one per tuple, and the
//!    record restores the page without reading it (redo through
//!    `wal::redo_full_page`, which never reads the torn on-disk copy).
//! 2. The page being filled stays exclusively locked between inserts (other
//!    readers of that one page wait until it is finished). Callers must not
//!    read the table's pages while a writer is open (e.g. an index's unique
//!    check reading a row on the page being filled would wait on this
//!    thread): the engine builds its indexes after the writer finishes.
//! 3. The pages come from the bulk-write ring when one is given: recycling a
//!    slot writes its previous page (WAL flushed first, as for every
//!    permanent page), so a load writes its own pages and leaves the rest of
//!    the pool alone.
//! 4. An unlogged heap logs nothing; its pages are marked dirty as usual.
//! 5. Dropping a writer finishes its page (errors ignored); `finish`
//!    reports them.

use bufmgr::{PageWrite, Ring};
use wal::Hole;

use crate::error::{HeapError, Result};
use crate::heap::Heap;
use crate::page::{self, HeapPage};
use crate::tuple::{TUPLE_HEADER_SIZE, Tid, TupleHeader};
use crate::txn::Xid;

/// What a [`BulkWriter`] did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct BulkStats {
    pub tuples: u64,
    /// New pages filled (each logged once).
    pub pages: u64,
    /// Bytes of WAL records written for them.
    pub wal_bytes: u64,
}

/// Appends rows of one transaction to new pages (module docs).
#[derive(Debug)]
pub struct BulkWriter<'h> {
    heap: &'h Heap,
    xid: Xid,
    ring: Option<Ring>,
    page: Option<PageWrite<'h>>,
    stats: BulkStats,
}

impl Heap {
    /// A bulk writer of transaction `xid` (module docs), taking pages from
    /// `ring` (the bulk-write ring) if given.
    pub fn bulk_writer(&self, xid: Xid, ring: Option<Ring>) -> BulkWriter<'_> {
        BulkWriter {
            heap: self,
            xid,
            ring,
            page: None,
            stats: BulkStats::default(),
        }
    }
}

impl<'h> BulkWriter<'h> {
    /// Append a row; returns its TID.
    pub fn insert(&mut self, data: &[u8]) -> Result<Tid> {
        self.heap.check_row(data)?;
        let need = page::align_tuple(TUPLE_HEADER_SIZE + data.len());
        let fits = match &self.page {
            Some(p) => HeapPage::parse(p, self.heap.page_id(p.block()))?.free_space() >= need,
            None => false,
        };
        if !fits {
            self.finish_page()?;
            let rf = self.heap.relfork();
            let mut fresh = self.heap.pool().extend(rf, self.ring.as_mut())?;
            // Laid out at once: a page still blank reads as new, which
            // every parse below would check to its last byte.
            page::init(&mut fresh);
            self.page = Some(fresh);
            self.stats.pages += 1;
        }
        let p = self.page.as_mut().expect("a page is held");
        let id = self.heap.page_id(p.block());
        let off = page::next_offset(&HeapPage::parse(p, id)?)?;
        let tid = Tid::new(p.block(), off);
        page::add_row(
            p,
            id,
            off,
            &TupleHeader::new_insert(self.xid, tid, false),
            data,
        )?;
        self.stats.tuples += 1;
        Ok(tid)
    }

    /// Finish the page being filled (rule 1): dirty, logged whole, its free
    /// space noted, released.
    fn finish_page(&mut self) -> Result<()> {
        let Some(mut p) = self.page.take() else {
            return Ok(());
        };
        p.mark_dirty();
        let view = HeapPage::parse(&p, self.heap.page_id(p.block()))?;
        let (lower, upper, free) = (view.lower(), view.upper(), view.free_space());
        if let Some(wal) = self.heap.wal() {
            let hole = Hole::between(lower, upper).map_err(HeapError::Wal)?;
            let (start, end) = wal
                .log_new_page(p.tag(), &p, hole, self.xid)
                .map_err(HeapError::Wal)?;
            p.set_lsn(end.as_u64());
            self.stats.wal_bytes += end.as_u64() - start.as_u64();
        }
        self.heap.fsm().update(p.block(), free);
        Ok(())
    }

    /// Finish the last page; what was written.
    pub fn finish(mut self) -> Result<BulkStats> {
        self.finish_page()?;
        Ok(self.stats)
    }

    /// What was written so far.
    pub fn stats(&self) -> BulkStats {
        self.stats
    }
}

impl Drop for BulkWriter<'_> {
    fn drop(&mut self) {
        let _ = self.finish_page();
    }
}
