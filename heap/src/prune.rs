//! Pruning: removing tuple versions that no snapshot can see any more.
//!
//! A tuple is dead to everyone (PostgreSQL's `HEAPTUPLE_DEAD`) when
//! 1. its inserter aborted, or
//! 2. its deleter / updater committed and is older than `horizon`, the
//!    oldest xid any running transaction or live snapshot may still treat
//!    as running (the caller, who knows the snapshots, passes it: PostgreSQL's
//!    `GlobalVisState`).
//!
//! Pruning a page (under the exclusive lock) turns the line pointers of dead
//! tuples into `Dead` pointers without storage, compacts the remaining tuples
//! to the end of the page, recomputes `prune_xid`, and WAL-logs a PRUNE
//! record listing the pointers changed (redo repeats the same deterministic
//! steps). Dead pointers stay so that a TID held elsewhere (an index entry)
//! never silently names a different tuple; only vacuum's second pass
//! ([`Heap::free_dead`], after the indexes dropped their entries) turns them
//! into `Unused`.
//!
//! Shortcuts: no HOT chains, so no redirect pointers; pruning is not done
//! opportunistically by readers (PostgreSQL's `heap_page_prune_opt`): the
//! engine calls [`Heap::prune_page`] or vacuums ([`crate::vacuum`]; its
//! autovacuum worker does so once a table's dead tuples pass a threshold).

use bufmgr::{BlockNumber, PageWrite};
use wal::Xid;

use crate::error::Result;
use crate::heap::Heap;
use crate::page::{self, HeapPage, LpState};
use crate::record::HeapRecord;
use crate::tuple::{
    HEAP_XMAX_COMMITTED, HEAP_XMAX_INVALID, HEAP_XMIN_COMMITTED, HEAP_XMIN_INVALID, TupleHeader,
};
use crate::txn::{INVALID_XID, StatusError, TransactionStatus, XidStatus};

/// What pruning one page (or vacuuming a relation) did.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub struct PruneStats {
    /// Tuples removed (their pointers became dead).
    pub tuples_removed: u64,
    /// Line pointers made unused (vacuum's second pass only).
    pub line_pointers_freed: u64,
    /// Bytes of free space gained on the page.
    pub bytes_freed: u64,
    /// Tuples kept only because a snapshot may still see them: deleted or
    /// updated by a committed transaction at or after the horizon
    /// (PostgreSQL's `HEAPTUPLE_RECENTLY_DEAD`). They are dead to everyone
    /// once the horizon passes their deleter.
    pub recently_dead: u64,
    /// The oldest deleter among the `recently_dead` tuples (0 if none): once
    /// the horizon is past it, a vacuum removes at least one of them.
    pub oldest_kept_xmax: Xid,
}

impl PruneStats {
    /// Count one recently dead tuple deleted by `xmax`.
    pub(crate) fn keep(&mut self, xmax: Xid) {
        self.recently_dead += 1;
        if self.oldest_kept_xmax == INVALID_XID || xmax < self.oldest_kept_xmax {
            self.oldest_kept_xmax = xmax;
        }
    }

    /// Add another page's recently dead tuples to these.
    pub(crate) fn add_kept(&mut self, other: &PruneStats) {
        if other.recently_dead > 0 {
            self.recently_dead += other.recently_dead - 1;
            self.keep(other.oldest_kept_xmax);
        }
    }
}

/// Is the tuple dead to everyone but kept for a snapshot that may still see
/// it (see [`PruneStats::recently_dead`])? Only for tuples that
/// [`dead_to_everyone`] kept. A status the oracle cannot read is an error.
fn recently_dead(
    h: &TupleHeader,
    horizon: Xid,
    oracle: &dyn TransactionStatus,
) -> Result<bool, StatusError> {
    Ok(h.xmax != INVALID_XID
        && !h.has(HEAP_XMAX_INVALID)
        && h.xmax >= horizon
        && (h.has(HEAP_XMAX_COMMITTED)
            || matches!(oracle.status(h.xmax)?, XidStatus::Committed { .. })))
}

/// Is the tuple dead to every snapshot, given `horizon`?
/// A status the oracle cannot read is an error (nothing is removed on a
/// guess).
pub fn dead_to_everyone(
    h: &TupleHeader,
    horizon: Xid,
    oracle: &dyn TransactionStatus,
) -> Result<bool, StatusError> {
    let frozen = h.has(HEAP_XMIN_COMMITTED | HEAP_XMIN_INVALID);
    if !frozen {
        let xmin_aborted = h.has(HEAP_XMIN_INVALID)
            || (!h.has(HEAP_XMIN_COMMITTED) && oracle.status(h.xmin)? == XidStatus::Aborted);
        if xmin_aborted {
            return Ok(true);
        }
    }
    if h.xmax == INVALID_XID || h.has(HEAP_XMAX_INVALID) || h.xmax >= horizon {
        return Ok(false);
    }
    Ok(h.has(HEAP_XMAX_COMMITTED) || matches!(oracle.status(h.xmax)?, XidStatus::Committed { .. }))
}

impl Heap {
    /// Prune block `block` (see the module docs).
    pub fn prune_page(
        &self,
        block: BlockNumber,
        horizon: Xid,
        oracle: &dyn TransactionStatus,
    ) -> Result<PruneStats> {
        let mut page = self
            .pool()
            .read_buffer(self.relfork(), block, None)?
            .lock_exclusive();
        let stats = self.prune_locked(&mut page, horizon, oracle)?;
        if let Ok(view) = HeapPage::parse(&page, self.page_id(block)) {
            self.fsm().update(block, view.free_space());
        }
        Ok(stats)
    }

    /// Prune an exclusively locked page: dead versions lose their storage
    /// and their pointers become `Dead` (never `Unused`). Logs one PRUNE
    /// record if anything changed.
    pub(crate) fn prune_locked(
        &self,
        page: &mut PageWrite<'_>,
        horizon: Xid,
        oracle: &dyn TransactionStatus,
    ) -> Result<PruneStats> {
        let id = self.page_id(page.block());
        let view = HeapPage::parse(page, id)?;
        if view.is_new() {
            return Ok(PruneStats::default());
        }
        let before = view.free_bytes();
        let mut changes = Vec::new();
        let mut stats = PruneStats::default();
        let mut prune_xid = 0;
        for off in 1..=view.item_count() {
            if view.item(off)?.state != LpState::Normal {
                continue;
            }
            let (_, h) = view.header(off)?.expect("normal pointer has a tuple");
            if dead_to_everyone(&h, horizon, oracle)? {
                stats.tuples_removed += 1;
                changes.push((off, LpState::Dead));
                continue;
            }
            if recently_dead(&h, horizon, oracle)? {
                stats.keep(h.xmax);
            }
            if h.xmax != INVALID_XID
                && !h.has(HEAP_XMAX_INVALID)
                && (prune_xid == 0 || h.xmax < prune_xid)
            {
                prune_xid = h.xmax;
            }
        }
        if changes.is_empty() {
            return Ok(stats);
        }
        page::apply_prune(page, id, &changes, prune_xid)?;
        stats.bytes_freed = (HeapPage::parse(page, id)?.free_bytes() - before) as u64;
        self.log(
            INVALID_XID,
            &HeapRecord::Prune { prune_xid, changes },
            &mut [page],
            None,
        )?;
        Ok(stats)
    }
}
