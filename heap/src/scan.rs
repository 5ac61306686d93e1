//! Sequential scans, a page at a time.
//!
//! For each block `0 .. nblocks` (the count taken when the scan starts, as
//! PostgreSQL's `heapgetpage` loop does; rows inserted into later pages
//! meanwhile are not for this snapshot anyway):
//! 1. take the next page from the scan's read stream (`BufferPool::read_stream`:
//!    pinned, read ahead in combined reads, through the scan's ring if it
//!    has one) and take the shared content lock;
//! 2. check the visibility of every tuple, setting hints per the scan's
//!    [`HintMode`] (for `PerPage`: one batched `set_hints` call for the page);
//! 3. hand each visible tuple to the caller's closure;
//! 4. unlock and unpin.
//!
//! # The ring
//! A scan of a relation larger than a quarter of the pool uses the
//! bulk-read ring (PostgreSQL's `initscan`: `NBuffers / 4`), so one big
//! scan cannot flush the whole pool; [`RingChoice`] overrides that per scan,
//! and `Always` insists on a ring even when the pool's configuration has
//! rings off (`ring_forced`), as the benchmark scenarios need.

use bufmgr::config::BULK_READ_RING_KIB;
use bufmgr::{Ring, RingKind, StreamConfig};

use crate::error::Result;
use crate::heap::Heap;
use crate::tuple::{TUPLE_HEADER_SIZE, Tid};
use crate::txn::{Snapshot, TransactionStatus};
use crate::visibility::{HintMode, VisibilityStats, visit_visible_tuples};

/// Whether a scan reads through the bulk-read ring.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub enum RingChoice {
    /// The ring when the relation has more than pool / 4 blocks.
    #[default]
    Auto,
    /// Always a ring (forced even if the pool's rings are off).
    Always,
    /// Never a ring.
    Never,
}

/// How one scan runs.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct ScanOptions {
    pub ring: RingChoice,
    pub hint_mode: HintMode,
}

/// What one scan did.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct ScanStats {
    /// Pages read.
    pub pages: u64,
    /// Whether a ring was used.
    pub used_ring: bool,
    pub visibility: VisibilityStats,
}

impl Heap {
    fn scan_ring(&self, choice: RingChoice, nblocks: u32) -> Option<Ring> {
        let pool = self.pool();
        match choice {
            RingChoice::Never => None,
            RingChoice::Auto if (nblocks as usize) <= pool.size() / 4 => None,
            RingChoice::Auto => pool.ring(RingKind::BulkRead),
            RingChoice::Always => pool
                .ring(RingKind::BulkRead)
                .or_else(|| pool.ring_forced(RingKind::BulkRead, BULK_READ_RING_KIB)),
        }
    }

    /// Scan the relation, calling `each(tid, row)` for every row `snap`
    /// sees, in TID order. `each` runs under the page's shared lock: it must
    /// not call back into this heap.
    pub fn scan_with(
        &self,
        snap: &Snapshot,
        oracle: &dyn TransactionStatus,
        opts: ScanOptions,
        mut each: impl FnMut(Tid, &[u8]),
    ) -> Result<ScanStats> {
        let nblocks = self.nblocks()?;
        let ring = self.scan_ring(opts.ring, nblocks);
        let mut stats = ScanStats {
            used_ring: ring.is_some(),
            ..ScanStats::default()
        };
        let mut stream =
            self.pool()
                .read_stream(self.relfork(), 0..nblocks, ring, StreamConfig::default());
        let mut batch = Vec::new();
        loop {
            let Some(buf) = stream.next_buffer() else {
                break;
            };
            let page = buf?.lock_shared();
            let block = page.block();
            let s = visit_visible_tuples(
                &page,
                self.page_id(block),
                snap,
                oracle,
                opts.hint_mode,
                !self.is_logged(),
                &mut batch,
                |off, tuple| each(Tid::new(block, off), &tuple[TUPLE_HEADER_SIZE..]),
            )?;
            stats.pages += 1;
            stats.visibility.add(&s);
        }
        Ok(stats)
    }

    /// Scan and collect every visible row with its TID.
    pub fn scan(
        &self,
        snap: &Snapshot,
        oracle: &dyn TransactionStatus,
        opts: ScanOptions,
    ) -> Result<Vec<(Tid, Vec<u8>)>> {
        let mut rows = Vec::new();
        self.scan_with(snap, oracle, opts, |tid, row| {
            rows.push((tid, row.to_vec()))
        })?;
        Ok(rows)
    }
}
