//! A thread's private state for one pool: PostgreSQL keeps the same things
//! per backend (`MyBatchPos`, the home partition, the balance budget).
//!
//! Held in a thread-local list keyed by pool id, so a thread may use several
//! pools; entries of dropped pools are pruned when a new one is registered.
//! A call that re-enters the pool while the thread's entry is borrowed (a
//! callback that reads a page from inside a read) gets a temporary entry that
//! counts into the pool's shared fallback block.

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use super::PoolShared;
use crate::numa::partition::BalanceBudget;
use crate::replacement::sweep::BatchCursor;
use crate::stats::ThreadStats;
use crate::trace::{self, TraceBuf};

/// One thread's state for one pool.
#[derive(Debug)]
pub(crate) struct Local {
    pool_id: u64,
    pool: Weak<PoolShared>,
    /// Counts as one of the pool's active threads (false for temporaries).
    counted: bool,
    pub home: usize,
    pub budget: BalanceBudget,
    /// Allocations left before the home is re-checked (partition rule 4).
    pub until_recheck: u32,
    /// Claimed ticks, one cursor per partition.
    pub cursors: Box<[BatchCursor]>,
    pub stats: Arc<ThreadStats>,
    /// This thread's batch of trace records (`None`: the pool records no
    /// trace). Tested once per access: the only cost of tracing when off.
    pub trace: Option<TraceBuf>,
    /// Hand ticks of the last victim search (for the trace's eviction record).
    pub last_sweep_ticks: u64,
    /// This thread's copy of the miss-ratio sampler's threshold (0: off),
    /// refreshed at each hand-over of the batch.
    pub mrc_threshold: u64,
    /// Sampled accesses not yet handed to the sampler, with their sample hash.
    pub mrc_batch: Vec<(crate::tag::BufferTag, u64)>,
}

impl Local {
    fn new(pool: &Arc<PoolShared>) -> Local {
        let (ordinal, stats) = pool.register_thread();
        let home = pool.parts.home_for(ordinal, &pool.topology);
        let trace = pool
            .trace
            .as_ref()
            .map(|sink| TraceBuf::new(sink.clone(), trace::thread_id(ordinal)));
        Local {
            pool_id: pool.id,
            pool: Arc::downgrade(pool),
            counted: true,
            home,
            budget: BalanceBudget::new(home),
            until_recheck: crate::numa::partition::HOME_RECHECK_EVERY,
            cursors: vec![BatchCursor::default(); pool.parts.len()].into_boxed_slice(),
            stats,
            trace,
            last_sweep_ticks: 0,
            mrc_threshold: pool.mrc_threshold.load(Ordering::Relaxed),
            mrc_batch: Vec::new(),
        }
    }

    fn temporary(pool: &Arc<PoolShared>) -> Local {
        Local {
            pool_id: pool.id,
            pool: Arc::downgrade(pool),
            counted: false,
            home: 0,
            budget: BalanceBudget::new(0),
            until_recheck: u32::MAX,
            cursors: vec![BatchCursor::default(); pool.parts.len()].into_boxed_slice(),
            stats: pool.fallback_stats.clone(),
            trace: pool
                .trace
                .as_ref()
                .map(|sink| TraceBuf::new(sink.clone(), trace::thread_id(usize::MAX))),
            last_sweep_ticks: 0,
            mrc_threshold: pool.mrc_threshold.load(Ordering::Relaxed),
            mrc_batch: Vec::new(),
        }
    }
}

impl Local {
    /// Count one allocation; every [`HOME_RECHECK_EVERY`](crate::numa::partition::HOME_RECHECK_EVERY)
    /// of them, on a multi-node map, move the home to the node of the CPU
    /// the thread runs on now (it may have migrated). One `sched_getcpu`
    /// per check, none in between.
    #[inline]
    pub fn recheck_home(&mut self, pool: &PoolShared) {
        self.until_recheck = self.until_recheck.saturating_sub(1);
        if self.until_recheck > 0 || !self.counted {
            return;
        }
        self.until_recheck = crate::numa::partition::HOME_RECHECK_EVERY;
        if !pool.parts.is_numa() {
            // One node: every CPU has the same partitions, nothing to ask.
            return;
        }
        if let Some(cpu) = crate::numa::topology::current_cpu()
            && let Some(home) = pool.parts.home_of_cpu(cpu, &pool.topology)
            && home != self.home
        {
            self.home = home;
            self.budget = BalanceBudget::new(home);
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        if let Some(p) = self.pool.upgrade() {
            if !self.mrc_batch.is_empty() {
                p.mrc_flush(self);
            }
            if self.counted {
                p.active_threads.fetch_sub(1, Ordering::Relaxed);
                p.retire_thread(&self.stats);
            }
        }
    }
}

thread_local! {
    static LOCALS: RefCell<Vec<Local>> = const { RefCell::new(Vec::new()) };
}

/// Run `f` with this thread's state for `pool`, creating it on first use.
///
/// The pool this thread used last is kept first in the list, so the common
/// case is one compare; everything else (another pool, a first use, a call
/// that re-enters the pool) is out of line, which keeps this small enough to
/// inline into the hit path with the thread-local access itself.
#[inline(always)]
pub(crate) fn with_local<R>(pool: &Arc<PoolShared>, f: impl FnOnce(&mut Local) -> R) -> R {
    LOCALS.with(|cell| {
        let Ok(mut locals) = cell.try_borrow_mut() else {
            return with_temporary(pool, f);
        };
        if locals.first().is_none_or(|l| l.pool_id != pool.id) {
            bring_to_front(&mut locals, pool);
        }
        f(&mut locals[0])
    })
}

/// `f` with a temporary state: the thread's list is borrowed by a call
/// further up (a callback that re-enters the pool).
#[cold]
#[inline(never)]
fn with_temporary<R>(pool: &Arc<PoolShared>, f: impl FnOnce(&mut Local) -> R) -> R {
    f(&mut Local::temporary(pool))
}

/// Put this thread's state for `pool` first in `locals`: moved there if the
/// thread has one, else created (after pruning the states of dropped pools).
#[cold]
#[inline(never)]
fn bring_to_front(locals: &mut Vec<Local>, pool: &Arc<PoolShared>) {
    match locals.iter().position(|l| l.pool_id == pool.id) {
        Some(i) => locals[..=i].rotate_right(1),
        None => {
            locals.retain(|l| l.pool.strong_count() > 0);
            locals.insert(0, Local::new(pool));
        }
    }
}
