//! How the heap sees transactions: a status oracle and snapshots.
//!
//! The heap never owns transactions; `engine` does (xid assignment, the commit
//! log, snapshots). The heap asks two questions through [`TransactionStatus`]:
//! "what became of xid X, and at which commit LSN?" and "how far is the WAL
//! durable?" (for the commit-LSN rule of hint bits), and it is handed a
//! [`Snapshot`] for each read. [`InMemoryTransactions`] is a tiny
//! implementation for tests and tools that need no durability.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
pub use wal::{Lsn, Xid};

use crate::kind::ErrorKind;

/// No transaction (an unset xmax).
pub const INVALID_XID: Xid = 0;
/// The xid of rows written outside any transaction (bootstrap data): always
/// committed, visible to everyone (PostgreSQL's `FrozenTransactionId`).
pub const FROZEN_XID: Xid = 2;
/// The first xid handed to a transaction.
pub const FIRST_NORMAL_XID: Xid = 3;

/// What became of a transaction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum XidStatus {
    /// Still running (or crashed before committing: the engine reports
    /// transactions that were running at a crash as aborted after recovery).
    InProgress,
    /// Committed; its commit record ends at `commit_lsn` (`Lsn::ZERO` when not
    /// WAL-logged, e.g. frozen).
    Committed {
        commit_lsn: Lsn,
    },
    Aborted,
}

/// The status of a transaction could not be learned (its commit-log page
/// could not be read). Never answered with a guess: a reader that cannot
/// tell whether a row's inserter committed fails instead of hiding the row
/// (PostgreSQL raises an ERROR when `pg_xact` cannot be read).
#[derive(Debug, thiserror::Error)]
#[error("could not learn the status of transaction {xid}: {source}")]
pub struct StatusError {
    pub xid: Xid,
    /// Whose fault it is (that of the read that failed).
    pub kind: ErrorKind,
    /// What failed; its message names the commit-log page.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// The heap's view of transaction status.
pub trait TransactionStatus: Send + Sync + std::fmt::Debug {
    /// Status of `xid` as the commit log records it. `FROZEN_XID` is
    /// committed. An error when the commit log could not be read: callers
    /// pass it on, never guess.
    fn status(&self, xid: Xid) -> Result<XidStatus, StatusError>;

    /// The WAL is durable up to here. A commit hint may be set only if the
    /// commit record is durable (`commit_lsn <= flushed_lsn()`) or the page
    /// LSN already covers it (bufmgr rule 6, PostgreSQL's `SetHintBits`).
    fn flushed_lsn(&self) -> Lsn;
}

/// A snapshot: which transactions' effects a reader sees.
///
/// ```text
///   xids:  ... finished ... | xmin ... running / finished ... | xmax ... not yet started
///                            ^ lowest running at snapshot time  ^ next xid at snapshot time
/// ```
/// A committed xid is visible unless it is `>= xmax` or listed in `running`.
/// The owner's own changes are visible to it by command: with `cid` =
/// `Some(c)`, those of commands before `c` (PostgreSQL's `curcid`: a tuple
/// the owner inserted in command `cmin < c` is there, one it deleted in
/// `cmax < c` is gone); with `None`, all of them (no command ids).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub xmin: Xid,
    pub xmax: Xid,
    /// Transactions running when the snapshot was taken, sorted, each in `xmin..xmax`.
    pub running: Vec<Xid>,
    /// The xid of the transaction holding this snapshot, or `INVALID_XID`.
    pub own: Xid,
    /// The owner's current command (see above); writes made with this
    /// snapshot are stamped with it (`None`: command 0).
    pub cid: Option<CommandId>,
}

/// A command within a transaction (PostgreSQL's `CommandId`): tuples carry
/// the command that inserted them (cmin) and that deleted them (cmax).
pub type CommandId = u32;

impl Snapshot {
    /// A snapshot that sees every committed transaction up to `next_xid`.
    pub fn all_committed(next_xid: Xid) -> Snapshot {
        Snapshot {
            xmin: next_xid,
            xmax: next_xid,
            running: Vec::new(),
            own: INVALID_XID,
            cid: None,
        }
    }

    /// The command id writes made with this snapshot carry.
    #[inline]
    pub fn write_cid(&self) -> CommandId {
        self.cid.unwrap_or(0)
    }

    /// Does the owner see its own insert made in command `cmin`?
    #[inline]
    pub fn sees_own_insert(&self, cmin: CommandId) -> bool {
        self.cid.is_none_or(|c| cmin < c)
    }

    /// Does the owner see its own delete made in command `cmax` (the tuple
    /// is gone)?
    #[inline]
    pub fn sees_own_delete(&self, cmax: CommandId) -> bool {
        self.cid.is_none_or(|c| cmax < c)
    }

    /// Is `xid` the owner's own (and the owner a real transaction)?
    #[inline]
    pub fn is_own(&self, xid: Xid) -> bool {
        xid == self.own && xid != INVALID_XID
    }

    /// Was `xid` still running (or not yet started) as of this snapshot, so
    /// that its effects are invisible even if it has committed since?
    pub fn treats_as_running(&self, xid: Xid) -> bool {
        if self.is_own(xid) {
            return false;
        }
        self.others_running(xid)
    }

    /// [`treats_as_running`](Self::treats_as_running) for an xid known not
    /// to be the owner's.
    #[inline]
    pub fn others_running(&self, xid: Xid) -> bool {
        if xid >= self.xmax {
            return true;
        }
        xid >= self.xmin && self.running.binary_search(&xid).is_ok()
    }
}

/// Transactions kept in memory: for heap tests and tools. Nothing is durable.
#[derive(Debug)]
pub struct InMemoryTransactions {
    next: AtomicU64,
    status: Mutex<HashMap<Xid, XidStatus>>,
    flushed: AtomicU64,
}

impl Default for InMemoryTransactions {
    fn default() -> Self {
        InMemoryTransactions {
            next: AtomicU64::new(FIRST_NORMAL_XID),
            status: Mutex::new(HashMap::new()),
            flushed: AtomicU64::new(u64::MAX),
        }
    }
}

impl InMemoryTransactions {
    pub fn new() -> InMemoryTransactions {
        InMemoryTransactions::default()
    }

    /// Start a transaction: a new xid, running.
    pub fn begin(&self) -> Xid {
        // Allocate and register under the one lock `snapshot` takes: else a
        // snapshot taken in between would count the new xid as below its
        // xmax yet not running, and so see its later commit.
        let mut status = self.status.lock();
        let xid = self.next.fetch_add(1, Ordering::Relaxed);
        status.insert(xid, XidStatus::InProgress);
        xid
    }

    /// Record a commit whose record ends at `commit_lsn`.
    pub fn commit(&self, xid: Xid, commit_lsn: Lsn) {
        self.status
            .lock()
            .insert(xid, XidStatus::Committed { commit_lsn });
    }

    pub fn abort(&self, xid: Xid) {
        self.status.lock().insert(xid, XidStatus::Aborted);
    }

    /// Set how far the WAL counts as durable (default: everything).
    pub fn set_flushed(&self, lsn: Lsn) {
        self.flushed.store(lsn.as_u64(), Ordering::Relaxed);
    }

    /// A snapshot as of now, for the transaction `own` (or `INVALID_XID`).
    pub fn snapshot(&self, own: Xid) -> Snapshot {
        let status = self.status.lock();
        let xmax = self.next.load(Ordering::Relaxed);
        let mut running: Vec<Xid> = status
            .iter()
            .filter(|(x, s)| **s == XidStatus::InProgress && **x != own)
            .map(|(x, _)| *x)
            .collect();
        running.sort_unstable();
        Snapshot {
            xmin: running.first().copied().unwrap_or(xmax),
            xmax,
            running,
            own,
            cid: None,
        }
    }
}

impl TransactionStatus for InMemoryTransactions {
    fn status(&self, xid: Xid) -> Result<XidStatus, StatusError> {
        if xid == FROZEN_XID {
            return Ok(XidStatus::Committed {
                commit_lsn: Lsn::ZERO,
            });
        }
        Ok(self
            .status
            .lock()
            .get(&xid)
            .copied()
            .unwrap_or(XidStatus::Aborted))
    }

    fn flushed_lsn(&self) -> Lsn {
        Lsn(self.flushed.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_running_rules() {
        let t = InMemoryTransactions::new();
        let a = t.begin();
        let b = t.begin();
        t.commit(a, Lsn(100));
        let snap = t.snapshot(INVALID_XID);
        assert!(!snap.treats_as_running(a));
        assert!(snap.treats_as_running(b));
        let c = t.begin();
        assert!(snap.treats_as_running(c), "started after the snapshot");
        let own = t.snapshot(c);
        assert!(!own.treats_as_running(c), "own changes are visible");
        assert_eq!(
            t.status(a).unwrap(),
            XidStatus::Committed {
                commit_lsn: Lsn(100)
            }
        );
        assert_eq!(
            t.status(FROZEN_XID).unwrap(),
            XidStatus::Committed {
                commit_lsn: Lsn::ZERO
            }
        );
    }
}
