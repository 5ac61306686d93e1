//! Autovacuum: a background worker that vacuums tables as their dead tuples
//! pile up (PostgreSQL's autovacuum launcher and worker, one thread here).
//!
//! Without it nothing removes the versions updates and deletes leave behind
//! (the heap does no opportunistic pruning, see `heap::prune`), so a small
//! table under updates grows without bound and every key lookup walks every
//! version's index entry and heap tuple.
//!
//! ```text
//!   Transaction: insert / update / delete   count per table in the transaction (no shared write)
//!        commit:  dead += updated + deleted;  tuples += inserted - deleted
//!        abort:   dead += inserted + updated  (their new versions are dead)
//!        then, if dead > threshold + scale_factor * tuples: wake the worker
//!
//!   worker thread (one per Database)
//!     loop: sleep naptime (100 ms) or until woken or stopped
//!           for each table: dead > threshold + scale_factor * tuples?
//!                -> vacuum it (Database::vacuum's passes), unless a vacuum of
//!                   it is running (then skip it this round)
//!                -> dead -= the dead count it started from; tuples = what pass 1 left
//!                -> record runs, tuples removed, pointers freed, or the error
//! ```
//!
//! Rules:
//! 1. The counts are PostgreSQL's pgstat `n_dead_tup` and `reltuples`,
//!    counted at **commit and abort** (as pgstat does at transaction end), so
//!    a rolled-back update adds its new version, not its old one. They are
//!    estimates: they start at 0 when the database opens (they are not
//!    stored), and the first vacuum of a table sets the tuple estimate from
//!    what its pass 1 left. Versions a vacuum had to keep for a snapshot
//!    that might still see them (deleted by a transaction that committed
//!    at or after its horizon) are counted apart, with the oldest of their
//!    deleters: they are not in the tuple estimate, and they count as dead
//!    again once the horizon has passed that deleter, i.e. once the
//!    long-lived snapshot is gone. The worker checks that every round, so
//!    it cleans them within a naptime of the snapshot's end, with no write
//!    needed, and does not vacuum the same table every round while the
//!    snapshot lives (PostgreSQL counts them as dead at once, and does).
//! 2. The worker runs the same vacuum as [`crate::Database::vacuum`] (heap
//!    pass 1, index bulk delete, heap pass 2) under the same locks: the
//!    table's drop lock shared (DROP, CREATE/DROP INDEX wait for it) and the
//!    table's vacuum mutex, which it only *tries*: a table whose vacuum is
//!    running is skipped this round. Commits, rollbacks, reads and writes
//!    of rows never wait for it (only page content locks are shared).
//! 3. An error (or a panic) in a background vacuum is never lost: it is
//!    counted and kept with the table's name in [`AutovacuumStats`]
//!    (`last_error`, per table too), and the thread goes on; the table is
//!    tried again next round.
//! 4. Close and drop stop the worker first (before the shutdown flush) and
//!    join it: a round in progress finishes the table it is vacuuming and
//!    skips the rest, so the wait is bounded by one table's vacuum.
//! 5. The catalog is counted the same way, by DDL: a CREATE leaves the old
//!    version of the meta row dead, a DROP its rows, a failed CREATE INDEX
//!    its new ones. When autovacuum is on, the DDL that takes the catalog
//!    over the threshold vacuums it before returning (under the DDL lock,
//!    after its own commit; a failure is recorded as rule 3 says, never the
//!    DDL's error), so create/drop cycles leave it bounded.
//!
//! Shortcuts: one worker for all tables (PostgreSQL runs up to
//! `autovacuum_max_workers` = 3); no cost-based delay (`vacuum_cost_delay`:
//! the vacuum ring already keeps it from flooding the pool); no ANALYZE; no
//! truncation of empty pages at the end of a relation (the heap never
//! truncates), so a table stops growing but does not shrink.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::catalog::{CatalogState, TableHandle};
use crate::error::{EngineError, Result};
use crate::stats::TableCounters;
use crate::txn::registry::SnapshotRegistry;
use crate::txn::xact::TransactionManager;
use crate::vacuum::vacuum_table;

/// A background vacuum that failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutovacuumError {
    /// The table whose vacuum failed.
    pub table: String,
    /// The error, as `Display` shows it (it names the relation and block
    /// where one is involved).
    pub message: String,
}

impl std::fmt::Display for AutovacuumError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "autovacuum of table {:?}: {}", self.table, self.message)
    }
}

/// One table's row of [`AutovacuumStats`].
#[derive(Clone, Debug, PartialEq)]
pub struct TableAutovacuum {
    /// The table's name.
    pub table: String,
    /// Dead tuples counted now (since its last vacuum).
    pub dead_tuples: u64,
    /// Versions its last vacuum kept for snapshots that might still see
    /// them; counted as dead once those snapshots are gone.
    pub kept_tuples: u64,
    /// Tuple estimate now.
    pub tuples: u64,
    /// Dead tuples above which it is vacuumed.
    pub vacuum_threshold: f64,
    /// Vacuums of this table by the worker.
    pub autovacuums: u64,
    /// Dead tuples those vacuums removed.
    pub tuples_removed: u64,
    /// The last failure of a vacuum of this table, as `Display` shows it.
    pub last_error: Option<String>,
}

/// What the autovacuum worker has done ([`crate::Database::autovacuum_stats`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AutovacuumStats {
    /// Whether the worker runs.
    pub running: bool,
    /// Rounds over the tables.
    pub rounds: u64,
    /// Vacuums run, and what they did in total.
    pub vacuums: u64,
    /// Dead tuples removed (heap pass 1).
    pub tuples_removed: u64,
    /// Dead line pointers made unused (heap pass 2).
    pub line_pointers_freed: u64,
    /// Heap pages whose dead pointers pass 2 freed (their space is reused
    /// by later inserts; pages are never returned to the file system).
    pub pages_vacuumed: u64,
    /// Bytes of tuple space those vacuums freed.
    pub bytes_freed: u64,
    /// Vacuums skipped because a vacuum of the table was running (or the
    /// table was being dropped).
    pub skipped_busy: u64,
    /// Vacuums of the catalog, run by DDL once its dead versions pass the
    /// same threshold (rule 5).
    pub catalog_vacuums: u64,
    /// Failed vacuums, and the last failure (rule 3).
    pub errors: u64,
    /// The last failure, naming its table.
    pub last_error: Option<AutovacuumError>,
    /// Every table, by name.
    pub tables: Vec<TableAutovacuum>,
}

/// Shared between the database and its worker.
#[derive(Debug)]
pub(crate) struct AutovacShared {
    pub enabled: bool,
    pub naptime: Duration,
    pub threshold: u64,
    pub scale_factor: f64,
    /// Set (under `wake`'s mutex) to stop the worker.
    stop: Mutex<bool>,
    wake: Condvar,
    /// A commit asked for a round and the worker has not started it yet
    /// (so a burst of commits notifies once).
    wake_pending: AtomicBool,
    totals: Mutex<AutovacuumStats>,
}

impl AutovacShared {
    pub fn new(enabled: bool, naptime: Duration, threshold: u64, scale_factor: f64) -> Self {
        AutovacShared {
            enabled,
            naptime,
            threshold,
            scale_factor,
            stop: Mutex::new(false),
            wake: Condvar::new(),
            wake_pending: AtomicBool::new(false),
            totals: Mutex::new(AutovacuumStats::default()),
        }
    }

    /// After a transaction's counts went into `c`: wake the worker if the
    /// table crossed its threshold (a few atomics when it did not).
    pub fn table_changed(&self, c: &TableCounters) {
        if self.enabled
            && c.over(self.threshold, self.scale_factor, None)
            && !self.wake_pending.swap(true, Ordering::AcqRel)
        {
            let _g = self.stop.lock();
            self.wake.notify_one();
        }
    }

    pub fn stats(&self, catalog: &RwLock<CatalogState>) -> AutovacuumStats {
        let mut s = self.totals.lock().clone();
        s.running = self.enabled;
        let mut tables: Vec<TableAutovacuum> = catalog
            .read()
            .tables
            .values()
            .map(|t| {
                let c = &t.counters;
                let tuples = c.tuples.load(Ordering::Relaxed);
                TableAutovacuum {
                    table: t.info.name.clone(),
                    dead_tuples: c.dead.load(Ordering::Relaxed),
                    kept_tuples: c.kept.load(Ordering::Relaxed),
                    tuples,
                    vacuum_threshold: self.threshold as f64 + self.scale_factor * tuples as f64,
                    autovacuums: c.autovacuums.load(Ordering::Relaxed),
                    tuples_removed: c.tuples_removed.load(Ordering::Relaxed),
                    last_error: c.last_error.lock().clone(),
                }
            })
            .collect();
        tables.sort_by(|a, b| a.table.cmp(&b.table));
        s.tables = tables;
        s
    }

    /// Record a vacuum of the catalog by DDL (rule 5): its error is kept
    /// as a background vacuum's is (the DDL itself has committed).
    pub fn catalog_vacuumed(&self, result: Result<()>) {
        let mut s = self.totals.lock();
        match result {
            Ok(()) => s.catalog_vacuums += 1,
            Err(e) => {
                s.errors += 1;
                s.last_error = Some(AutovacuumError {
                    table: "(catalog)".into(),
                    message: e.to_string(),
                });
            }
        }
    }

    fn stopping(&self) -> bool {
        *self.stop.lock()
    }
}

/// What the worker needs: everything behind an `Arc`, so it never holds the
/// database itself (a handle would keep it open, rule 4).
pub(crate) struct WorkerContext {
    pub shared: Arc<AutovacShared>,
    pub catalog: Arc<RwLock<CatalogState>>,
    pub tm: Arc<TransactionManager>,
    pub snapshots: Arc<SnapshotRegistry>,
}

/// The running worker; [`Autovacuum::stop`] (or drop) stops and joins it.
#[derive(Debug)]
pub(crate) struct Autovacuum {
    shared: Arc<AutovacShared>,
    thread: Option<JoinHandle<()>>,
}

impl Autovacuum {
    pub fn start(ctx: WorkerContext) -> Result<Autovacuum> {
        let shared = ctx.shared.clone();
        let thread = std::thread::Builder::new()
            .name("autovacuum".into())
            .spawn(move || worker(ctx))
            .map_err(|e| EngineError::Io {
                op: "start the autovacuum thread",
                path: Default::default(),
                source: e,
            })?;
        Ok(Autovacuum {
            shared,
            thread: Some(thread),
        })
    }

    /// Stop the worker and wait for it (a vacuum in progress finishes).
    pub fn stop(&mut self) {
        *self.shared.stop.lock() = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            // The worker catches panics of a vacuum (rule 3); a panic
            // elsewhere in it is a bug, reported at the join.
            if t.join().is_err() {
                let mut s = self.shared.totals.lock();
                s.errors += 1;
                s.last_error = Some(AutovacuumError {
                    table: String::new(),
                    message: "the autovacuum thread panicked".into(),
                });
            }
        }
    }
}

impl Drop for Autovacuum {
    fn drop(&mut self) {
        self.stop();
    }
}

fn worker(ctx: WorkerContext) {
    let sh = &*ctx.shared;
    loop {
        {
            let mut stop = sh.stop.lock();
            if !*stop && !sh.wake_pending.load(Ordering::Acquire) {
                sh.wake.wait_for(&mut stop, sh.naptime);
            }
            if *stop {
                return;
            }
        }
        sh.wake_pending.store(false, Ordering::Release);
        let tables: Vec<Arc<TableHandle>> = ctx.catalog.read().tables.values().cloned().collect();
        // Versions kept for snapshots that have ended since count as dead
        // again (rule 1): no write is needed to notice.
        let horizon = ctx.snapshots.horizon(|| ctx.tm.oldest_running());
        for t in tables {
            if sh.stopping() {
                return;
            }
            if t.counters
                .over(sh.threshold, sh.scale_factor, Some(horizon))
            {
                vacuum_one(&ctx, &t);
            }
        }
        sh.totals.lock().rounds += 1;
    }
}

/// Vacuum one table for the worker and record what happened (rules 2, 3).
fn vacuum_one(ctx: &WorkerContext, t: &TableHandle) {
    let sh = &*ctx.shared;
    let name = &t.info.name;
    let ran = catch_unwind(AssertUnwindSafe(|| {
        let dropped = t.dropped.read();
        if *dropped {
            return Ok(None);
        }
        let Some(one) = t.vacuum.try_lock() else {
            return Ok(None);
        };
        let report = vacuum_table(t, &ctx.tm, &ctx.snapshots, &one)?;
        Ok::<_, EngineError>(Some(report))
    }));
    let mut s = sh.totals.lock();
    let message = match ran {
        Ok(Ok(Some(r))) => {
            s.vacuums += 1;
            s.tuples_removed += r.heap.pruned.tuples_removed;
            s.line_pointers_freed += r.heap.pruned.line_pointers_freed;
            s.pages_vacuumed += r.heap.pages_vacuumed;
            s.bytes_freed += r.heap.pruned.bytes_freed;
            t.counters.autovacuums.fetch_add(1, Ordering::Relaxed);
            t.counters
                .tuples_removed
                .fetch_add(r.heap.pruned.tuples_removed, Ordering::Relaxed);
            return;
        }
        Ok(Ok(None)) => {
            s.skipped_busy += 1;
            return;
        }
        Ok(Err(e)) => e.to_string(),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|m| m.to_string()))
                .unwrap_or_default();
            format!("the vacuum panicked: {what}")
        }
    };
    s.errors += 1;
    s.last_error = Some(AutovacuumError {
        table: name.clone(),
        message: message.clone(),
    });
    *t.counters.last_error.lock() = Some(message);
}
