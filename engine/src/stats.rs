//! Per-table activity counters (PostgreSQL's pgstat `n_dead_tup` and
//! `reltuples`): what each transaction did to a table, applied when it
//! ends, read by the autovacuum worker to decide when a table is due. The
//! rules the counters follow ("rule 1") are numbered in `autovacuum`.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::txn::Xid;

/// A table's counters (rule 1), kept with its handle.
#[derive(Debug, Default)]
pub(crate) struct TableCounters {
    /// Dead tuples since the last vacuum (`n_dead_tup`).
    pub dead: AtomicU64,
    /// Tuple estimate (`reltuples`), without the versions below.
    pub tuples: AtomicU64,
    /// Versions the last vacuum kept only for snapshots that might still
    /// see them (their deleter committed at or after its horizon), and the
    /// oldest deleter among them: once the horizon has passed it, they
    /// count as dead again (rule 1).
    pub kept: AtomicU64,
    pub kept_xmax: AtomicU64,
    /// Vacuums by the worker, tuples they removed.
    pub autovacuums: AtomicU64,
    pub tuples_removed: AtomicU64,
    /// The last background error on this table.
    pub last_error: Mutex<Option<String>>,
}

impl TableCounters {
    /// Add what a finished transaction did to the table (rule 1).
    pub fn add(&self, p: &Pending, committed: bool) {
        let dead = if committed {
            p.updated + p.deleted
        } else {
            p.inserted + p.updated
        };
        if dead > 0 {
            self.dead.fetch_add(dead, Ordering::Relaxed);
        }
        if committed && p.inserted != p.deleted {
            let (ins, del) = (p.inserted, p.deleted);
            let _ = self
                .tuples
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                    Some((t + ins).saturating_sub(del))
                });
        }
    }

    /// Dead tuples now: those counted since the last vacuum, plus the ones
    /// it kept if `horizon` (the vacuum horizon now, when known) has passed
    /// the oldest of their deleters, i.e. the snapshot that kept them is
    /// gone (rule 1).
    pub fn dead_now(&self, horizon: Option<Xid>) -> u64 {
        let dead = self.dead.load(Ordering::Relaxed);
        let kept = self.kept.load(Ordering::Relaxed);
        match horizon {
            Some(h) if kept > 0 && h > self.kept_xmax.load(Ordering::Relaxed) => dead + kept,
            _ => dead,
        }
    }

    /// Is the table due for a vacuum? `horizon` as for
    /// [`dead_now`](Self::dead_now).
    pub fn over(&self, threshold: u64, scale_factor: f64, horizon: Option<Xid>) -> bool {
        let tuples = self.tuples.load(Ordering::Relaxed);
        self.dead_now(horizon) as f64 > threshold as f64 + scale_factor * tuples as f64
    }
}

/// What one transaction did to one table, applied at its end.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pending {
    pub inserted: u64,
    pub updated: u64,
    pub deleted: u64,
}
