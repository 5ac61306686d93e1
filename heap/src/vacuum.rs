//! Vacuum: prune every page of a relation through the vacuum ring, make
//! dead line pointers reusable, and set the free-space map exactly.
//!
//! ```text
//!  for block in 0..nblocks:            (pages read through RingKind::Vacuum,
//!      pin + exclusive lock             so a vacuum does not flush the pool)
//!      prune, dead pointers -> unused   one PRUNE record per changed page
//!      fsm[block] = free space
//! ```
//!
//! Making pointers unused is safe only while nothing else holds TIDs of
//! this relation. There are no indexes yet; when the B-tree arrives, vacuum
//! must remove index entries pointing at dead pointers first (PostgreSQL's
//! `lazy_vacuum_all_indexes` between its two heap passes). The relation is
//! never truncated.

use bufmgr::RingKind;
use wal::Xid;

use crate::error::Result;
use crate::heap::Heap;
use crate::page::HeapPage;
use crate::prune::PruneStats;
use crate::txn::TransactionStatus;

/// What a vacuum of a relation did.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct VacuumStats {
    /// Pages visited.
    pub pages_scanned: u64,
    /// Pages changed (a PRUNE record each, when logged).
    pub pages_pruned: u64,
    /// Totals over all pages.
    pub pruned: PruneStats,
    /// Whether the vacuum ring was used.
    pub used_ring: bool,
}

impl Heap {
    /// Vacuum the relation: remove every tuple dead to all snapshots older
    /// than `horizon` (see [`crate::prune`]) and make its line pointer reusable.
    pub fn vacuum(&self, horizon: Xid, oracle: &dyn TransactionStatus) -> Result<VacuumStats> {
        let nblocks = self.nblocks()?;
        let mut ring = self.pool().ring(RingKind::Vacuum);
        let mut stats = VacuumStats {
            used_ring: ring.is_some(),
            ..VacuumStats::default()
        };
        for block in 0..nblocks {
            let mut page = self
                .pool()
                .read_buffer(self.relfork(), block, ring.as_mut())?
                .lock_exclusive();
            let s = self.prune_locked(&mut page, horizon, oracle, true)?;
            stats.pages_scanned += 1;
            if s != PruneStats::default() {
                stats.pages_pruned += 1;
            }
            stats.pruned.tuples_removed += s.tuples_removed;
            stats.pruned.line_pointers_freed += s.line_pointers_freed;
            stats.pruned.bytes_freed += s.bytes_freed;
            let view = HeapPage::parse(&page, self.page_id(block))?;
            self.fsm().update(block, view.free_space());
        }
        Ok(stats)
    }
}
