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
//!
//! # Snapshot reuse (PostgreSQL 14's `xactCompletionCount`)
//!
//! Every change of the set (a begin, a finish, a raised next xid) bumps
//! `changes` while its shard's write lock is held. A snapshot built under
//! every read lock records the count it saw; each thread keeps its last
//! reader snapshot (no own xid) with that count, and hands out a copy while
//! the count is unchanged, without touching any shard lock: a thread of a
//! read-only workload then writes no shared cache line to take a snapshot.
//! Correct because an unchanged count means no change has completed since
//! the snapshot was built, so it is exactly the state now, except for
//! changes still in progress, which the snapshot orders after itself (as if
//! it had been taken just before them): rule 1 holds (an xid being assigned
//! is at or past the copy's `xmax`), rule 2 holds (the copy is a cut of a
//! past state with no later change in it), and a transaction whose commit
//! returned has bumped the count, so later snapshots are built anew.

use std::cell::{Cell, RefCell};
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

/// The count of changes, on its own cache line (read by every snapshot,
/// written by every begin and finish).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Changes(AtomicU64);

/// The set of running transactions and the xid counter.
#[derive(Debug)]
pub struct RunningSet {
    shards: Box<[Shard]>,
    next_xid: AtomicU64,
    changes: Changes,
    /// Tells this set's cached snapshots from other sets' in a thread.
    id: u64,
}

static NEXT_THREAD_SHARD: AtomicUsize = AtomicUsize::new(0);
static NEXT_SET_ID: AtomicU64 = AtomicU64::new(1);

/// A thread's last reader snapshot: (set id, change count, snapshot).
type CachedSnapshot = Option<(u64, u64, Snapshot)>;

thread_local! {
    static THREAD_SHARD: Cell<Option<usize>> = const { Cell::new(None) };
    static LAST_SNAPSHOT: RefCell<CachedSnapshot> = const { RefCell::new(None) };
}

/// This thread's shard: assigned round robin on first use.
pub(crate) fn thread_shard() -> usize {
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
            changes: Changes::default(),
            id: NEXT_SET_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The next xid to be handed out.
    pub fn next_xid(&self) -> Xid {
        self.next_xid.load(Ordering::Acquire)
    }

    /// Raise the next xid to at least `xid` (recovery). Never lowers it.
    pub fn advance_next_xid(&self, xid: Xid) {
        // Under a shard lock, like every change the count stands for.
        let _one = self.shards[0].running.write();
        self.next_xid.fetch_max(xid, Ordering::AcqRel);
        self.changes.0.fetch_add(1, Ordering::Release);
    }

    /// Assign a new xid and publish it as running, atomically with respect to
    /// snapshots. Returns the xid and the shard it lives in.
    pub fn begin(&self) -> (Xid, usize) {
        let shard = thread_shard();
        let mut list = self.shards[shard].running.write();
        let xid = self.next_xid.fetch_add(1, Ordering::AcqRel);
        list.push(xid);
        self.changes.0.fetch_add(1, Ordering::Release);
        (xid, shard)
    }

    /// Remove `xid` (begun in `shard`) from the running set.
    pub fn finish(&self, xid: Xid, shard: usize) {
        let mut list = self.shards[shard].running.write();
        if let Some(i) = list.iter().position(|x| *x == xid) {
            list.swap_remove(i);
        }
        self.changes.0.fetch_add(1, Ordering::Release);
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
    /// without `own`, `xmin` = the lowest of them or `xmax`. A reader's
    /// snapshot (`own` invalid) is this thread's last one again while the set
    /// has not changed (module docs, "Snapshot reuse").
    pub fn snapshot(&self, own: Xid) -> Snapshot {
        if own == INVALID_XID {
            let now = self.changes.0.load(Ordering::Acquire);
            let hit = LAST_SNAPSHOT.with(|c| match &*c.borrow() {
                Some((id, count, snap)) if *id == self.id && *count == now => Some(snap.clone()),
                _ => None,
            });
            if let Some(snap) = hit {
                return snap;
            }
        }
        let (snap, count) = self.build(own);
        if own == INVALID_XID {
            LAST_SNAPSHOT.with(|c| *c.borrow_mut() = Some((self.id, count, snap.clone())));
        }
        snap
    }

    /// Build a snapshot under every read lock; with the change count seen.
    fn build(&self, own: Xid) -> (Snapshot, u64) {
        let guards = self.freeze();
        let xmax = self.next_xid.load(Ordering::Acquire);
        let count = self.changes.0.load(Ordering::Acquire);
        let mut running: Vec<Xid> = Vec::with_capacity(guards.iter().map(|g| g.len()).sum());
        for g in &guards {
            running.extend(g.iter().copied().filter(|x| *x != own));
        }
        drop(guards);
        running.sort_unstable();
        let snap = Snapshot {
            xmin: running.first().copied().unwrap_or(xmax),
            xmax,
            running,
            own,
            cid: None,
        };
        (snap, count)
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

    #[test]
    fn a_reused_snapshot_is_the_one_a_fresh_build_gives() {
        let r = RunningSet::new(10);
        let other = RunningSet::new(500);
        let (a, sa) = r.begin();
        let s1 = r.snapshot(INVALID_XID);
        // Unchanged: the same snapshot, built or reused.
        assert_eq!(r.snapshot(INVALID_XID), s1);
        assert_eq!(r.snapshot(INVALID_XID), r.build(INVALID_XID).0);
        // Another set's snapshot in between does not leak into this one.
        assert_eq!(other.snapshot(INVALID_XID).xmax, 500);
        assert_eq!(r.snapshot(INVALID_XID), s1);
        // Every kind of change is seen by the next snapshot.
        let (b, sb) = r.begin();
        let s2 = r.snapshot(INVALID_XID);
        assert_eq!((s2.xmax, s2.running.clone()), (12, vec![a, b]));
        r.finish(a, sa);
        let s3 = r.snapshot(INVALID_XID);
        assert_eq!((s3.xmin, s3.running.clone()), (b, vec![b]));
        r.advance_next_xid(40);
        assert_eq!(r.snapshot(INVALID_XID).xmax, 40);
        r.finish(b, sb);
        assert_eq!(r.snapshot(INVALID_XID), Snapshot::all_committed(40));
        // A snapshot with an own xid is always built (and leaves out own).
        let (c, _) = r.begin();
        assert_eq!(r.snapshot(c).running, Vec::<Xid>::new());
        assert_eq!(r.snapshot(INVALID_XID).running, vec![c]);
    }

    #[test]
    fn reused_snapshots_never_miss_a_commit_that_returned() {
        // Committers finish xids and then announce them; readers that saw an
        // announcement must not see the xid as running.
        use std::sync::Arc;
        let r = Arc::new(RunningSet::new(1));
        let done = Arc::new(AtomicU64::new(0));
        std::thread::scope(|s| {
            for _ in 0..2 {
                let (r, done) = (r.clone(), done.clone());
                s.spawn(move || {
                    for _ in 0..2000 {
                        let (x, sh) = r.begin();
                        r.finish(x, sh);
                        done.fetch_max(x, Ordering::AcqRel);
                    }
                });
            }
            let (r, done) = (r.clone(), done.clone());
            s.spawn(move || {
                for _ in 0..20_000 {
                    let finished = done.load(Ordering::Acquire);
                    let snap = r.snapshot(INVALID_XID);
                    if finished > 0 {
                        assert!(snap.xmax > finished, "{snap:?} vs {finished}");
                        assert!(!snap.running.contains(&finished), "{snap:?} vs {finished}");
                    }
                }
            });
        });
    }
}
