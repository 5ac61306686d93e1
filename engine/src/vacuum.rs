//! Vacuum of one table and its indexes (PostgreSQL's lazy vacuum), shared
//! by [`crate::Database::vacuum`] and the autovacuum worker; the order of
//! its passes is drawn on `Database::vacuum` and in the crate README
//! ("Vacuum order").

use std::sync::atomic::Ordering;

use heap::VacuumStats;

use crate::catalog::TableHandle;
use crate::error::{EngineError, Result};
use crate::index::map_btree;
use crate::stats::TableCounters;
use crate::txn::Xid;
use crate::txn::registry::SnapshotRegistry;
use crate::txn::xact::TransactionManager;

/// What [`Database::vacuum`](crate::Database::vacuum) did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VacuumReport {
    /// Tuples deleted by transactions older than this were removable.
    pub horizon: Xid,
    /// Each index of the table (vacuumed first), by name.
    pub indexes: Vec<(String, btree::VacuumStats)>,
    /// What the heap's two passes did.
    pub heap: VacuumStats,
}

impl TableCounters {
    /// A vacuum that started when `dead_before` tuples were counted dead
    /// finished: those are gone (or were kept for a snapshot, rule 1), and
    /// `report` says how many tuples are left.
    pub fn vacuumed(&self, dead_before: u64, report: &VacuumReport) {
        let _ = self
            .dead
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| {
                Some(d.saturating_sub(dead_before))
            });
        let kept = &report.heap.pruned;
        self.kept.store(kept.recently_dead, Ordering::Relaxed);
        self.kept_xmax
            .store(kept.oldest_kept_xmax, Ordering::Relaxed);
        self.tuples.store(
            report
                .heap
                .tuples_remaining
                .saturating_sub(kept.recently_dead),
            Ordering::Relaxed,
        );
    }
}

/// [`Database::vacuum`](crate::Database::vacuum)'s passes on a table the
/// caller holds against DROP (its `dropped` lock shared) and whose vacuum
/// mutex it holds (`_one`), then the table's autovacuum counters brought up
/// to date: shared with the autovacuum worker.
pub(crate) fn vacuum_table(
    t: &TableHandle,
    tm: &TransactionManager,
    snapshots: &SnapshotRegistry,
    _one: &parking_lot::MutexGuard<'_, ()>,
) -> Result<VacuumReport> {
    let table = &t.info.name;
    tm.check_writable()?;
    // The dead tuples counted before the passes are the ones they remove.
    let dead_before = t.counters.dead.load(Ordering::Relaxed);
    let horizon = snapshots.horizon(|| tm.oldest_running());
    let (mut heap, dead) = t
        .heap
        .lazy_scan_heap(horizon, tm)
        .map_err(EngineError::heap(format!("vacuum of table {table:?}")))?;
    let indexes = t.indexes.read().clone();
    let mut index_stats = Vec::new();
    for ix in &indexes {
        let stats = if dead.is_empty() {
            btree::VacuumStats::default()
        } else {
            ix.btree
                .vacuum(|tid| dead.contains(&tid))
                .map_err(map_btree(ix, "vacuum"))?
        };
        index_stats.push((ix.info.name.clone(), stats));
    }
    let freed = t
        .heap
        .free_dead(&dead)
        .map_err(EngineError::heap(format!("vacuum of table {table:?}")))?;
    heap.add_pass_two(freed);
    let report = VacuumReport {
        horizon,
        indexes: index_stats,
        heap,
    };
    t.counters.vacuumed(dead_before, &report);
    Ok(report)
}
