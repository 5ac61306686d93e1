//! The running set: which transactions are in progress, and snapshots of it.
//!
//! # Choice: sharded running lists, snapshot takes every shard
//!
//! ```text
//!   shard 0  RwLock<Vec<Xid>>  [ 17, 23 ]       <- threads whose hint is 0
//!   shard 1  RwLock<Vec<Xid>>  [ 19 ]           <- threads whose hint is 1
//!   ...
//!   shard 15 RwLock<Vec<Xid>>  [ 21, 30, 31 ]
//!   next_xid AtomicU64         32
//!
//!   begin:    shard[h].write(); xid = next.fetch_add(1); push(xid)
//!   finish:   shard[h].write(); swap_remove(xid)         (one shard only)
//!   snapshot: shard[0..16].read() all held at once; xmax = next;
//!             copy the lists; release; sort
//! ```
//!
//! PostgreSQL's ProcArray is one array under one `ProcArrayLock`: every
//! commit takes it exclusively to clear its xid, every snapshot shares it.
//! Here each thread sticks to one of [`SHARDS`] shards (chosen once per
//! thread, round robin), so committers on different shards never touch the
//! same lock or cache line; only a snapshot visits all of them.
//!
//! Why it is correct:
//!
//! 1. An xid is assigned (`fetch_add`) *inside* its shard's write lock and
//!    published in the same critical section. A snapshot holds every shard's
//!    read lock while it reads `next_xid`, so every xid below its `xmax` was
//!    published before, and is either in a list or already finished: no xid
//!    can be "assigned but not yet visible as running".
//! 2. The snapshot holds all read locks at once, so it is a single cut: if A
//!    finished before B finished (in real time), no snapshot sees B finished
//!    and A running. In particular a transaction whose `commit` returned
//!    before `snapshot` was called is never in the snapshot's running list.
//! 3. Commit records the clog status *before* leaving the running set, so a
//!    transaction absent from a snapshot's running list (and below xmax) has
//!    its final status in the clog.
//!
//! Cost: a commit takes one uncontended-in-the-common-case write lock; a
//! snapshot takes 16 read locks and copies O(running) xids. Snapshots block
//! commits on a shard only for the copy.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use heap::txn::{INVALID_XID, Snapshot};
use parking_lot::{RwLock, RwLockReadGuard};

use crate::txn::Xid;

/// Shards of the running set.
pub const SHARDS: usize = 16;

/// One shard, on its own cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard {
    running: RwLock<Vec<Xid>>,
}

/// The set of running transactions and the xid counter.
#[derive(Debug)]
pub struct RunningSet {
    shards: Box<[Shard]>,
    next_xid: AtomicU64,
}

static NEXT_THREAD_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static THREAD_SHARD: Cell<Option<usize>> = const { Cell::new(None) };
}

/// This thread's shard: assigned round robin on first use.
fn thread_shard() -> usize {
    THREAD_SHARD.with(|c| match c.get() {
        Some(s) => s,
        None => {
            let s = NEXT_THREAD_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
            c.set(Some(s));
            s
        }
    })
}

impl RunningSet {
    /// An empty set whose first xid will be `next_xid`.
    pub fn new(next_xid: Xid) -> RunningSet {
        RunningSet {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            next_xid: AtomicU64::new(next_xid),
        }
    }

    /// The next xid to be handed out.
    pub fn next_xid(&self) -> Xid {
        self.next_xid.load(Ordering::Acquire)
    }

    /// Raise the next xid to at least `xid` (recovery). Never lowers it.
    pub fn advance_next_xid(&self, xid: Xid) {
        self.next_xid.fetch_max(xid, Ordering::AcqRel);
    }

    /// Assign a new xid and publish it as running, atomically with respect to
    /// snapshots. Returns the xid and the shard it lives in.
    pub fn begin(&self) -> (Xid, usize) {
        let shard = thread_shard();
        let mut list = self.shards[shard].running.write();
        let xid = self.next_xid.fetch_add(1, Ordering::AcqRel);
        list.push(xid);
        (xid, shard)
    }

    /// Remove `xid` (begun in `shard`) from the running set.
    pub fn finish(&self, xid: Xid, shard: usize) {
        let mut list = self.shards[shard].running.write();
        if let Some(i) = list.iter().position(|x| *x == xid) {
            list.swap_remove(i);
        }
    }

    /// Is `xid` running now?
    pub fn is_running(&self, xid: Xid) -> bool {
        self.shards.iter().any(|s| s.running.read().contains(&xid))
    }

    /// Hold every shard's read lock: no xid can be assigned (or finish) until
    /// the guards are dropped. The checkpoint uses this to read the next xid
    /// and take its redo point with no begin in between.
    pub(crate) fn freeze(&self) -> Vec<RwLockReadGuard<'_, Vec<Xid>>> {
        self.shards.iter().map(|s| s.running.read()).collect()
    }

    /// Number of running transactions.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.running.read().len()).sum()
    }

    /// Whether no transaction is running.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The lowest running xid, or the next xid if none runs (the oldest xid
    /// any new snapshot could treat as running).
    pub fn oldest_running(&self) -> Xid {
        let s = self.snapshot(INVALID_XID);
        s.xmin
    }

    /// A snapshot for the transaction `own` (or `INVALID_XID`): every shard
    /// read-locked at once (a single cut), `xmax` = next xid, `running` sorted,
    /// without `own`, `xmin` = the lowest of them or `xmax`.
    pub fn snapshot(&self, own: Xid) -> Snapshot {
        let guards = self.freeze();
        let xmax = self.next_xid.load(Ordering::Acquire);
        let mut running: Vec<Xid> = Vec::with_capacity(guards.iter().map(|g| g.len()).sum());
        for g in &guards {
            running.extend(g.iter().copied().filter(|x| *x != own));
        }
        drop(guards);
        running.sort_unstable();
        Snapshot {
            xmin: running.first().copied().unwrap_or(xmax),
            xmax,
            running,
            own,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_finish_snapshot() {
        let r = RunningSet::new(10);
        let (a, sa) = r.begin();
        let (b, _) = r.begin();
        assert_eq!((a, b), (10, 11));
        let s = r.snapshot(INVALID_XID);
        assert_eq!((s.xmin, s.xmax, s.running.clone()), (10, 12, vec![10, 11]));
        r.finish(a, sa);
        let s = r.snapshot(b);
        assert_eq!((s.xmin, s.xmax, s.running.clone()), (12, 12, vec![]));
        assert!(r.is_running(b));
        assert!(!r.is_running(a));
        r.advance_next_xid(5);
        assert_eq!(r.next_xid(), 12, "never lowered");
        r.advance_next_xid(100);
        assert_eq!(r.next_xid(), 100);
    }
}
