//! The commit LSN per group of 32 xids: status reports the commit record's
//! end LSN (the group's max), asynchronous commit leaves it beyond the flushed
//! WAL, and no clog page is ever written before the commit records it
//! describes are durable (checked at every write by a storage wrapper).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bufmgr::{BufferTag, ObservedStorage, RelFork, StorageBackend, StorageObserver};
use engine::{CLOG_REL, CommitMode};
use heap::txn::{TransactionStatus, XidStatus};
use wal::{Lsn, Wal};

/// At each write of a clog page, checks that the WAL is flushed at least to
/// the page's LSN (installed with `bufmgr::ObservedStorage`).
#[derive(Debug)]
struct WalBeforeClog {
    wal: Arc<Wal>,
    clog_writes: AtomicU64,
    violations: AtomicU64,
}

impl StorageObserver for WalBeforeClog {
    fn on_write(&self, tag: BufferTag, page: &[u8]) {
        if tag.rel == CLOG_REL {
            self.clog_writes.fetch_add(1, Ordering::Relaxed);
            if self.wal.flushed_lsn().0 < bufmgr::page::page_lsn(page) {
                self.violations.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Open with a [`WalBeforeClog`] observing the storage.
fn open_checked(dir: &std::path::Path, buffers: usize) -> (common::Env, Arc<WalBeforeClog>) {
    let mut checker = None;
    let env = common::open_with(dir, buffers, |wal, inner| {
        let c = Arc::new(WalBeforeClog {
            wal,
            clog_writes: AtomicU64::new(0),
            violations: AtomicU64::new(0),
        });
        checker = Some(c.clone());
        Arc::new(ObservedStorage::new(inner, c)) as Arc<dyn StorageBackend>
    });
    (env, checker.expect("open_with calls the wrapper"))
}

#[test]
fn status_reports_the_commit_end_lsn_as_the_group_max() {
    let dir = tempfile::tempdir().unwrap();
    let env = common::open(dir.path(), 16);
    let tm = &env.tm;
    // Two xids of one group; the later commit has the larger end LSN.
    let a = tm.begin().unwrap();
    let b = tm.begin().unwrap();
    let (xa, xb) = (a.xid(), b.xid());
    assert_eq!(xa / 32, xb / 32, "same group of 32");
    let end_a = a.commit().unwrap();
    assert_eq!(
        tm.status(xa).unwrap(),
        XidStatus::Committed { commit_lsn: end_a },
        "a commit's status carries its record's end LSN"
    );
    let end_b = b.commit().unwrap();
    assert!(end_b > end_a);
    assert_eq!(
        tm.status(xb).unwrap(),
        XidStatus::Committed { commit_lsn: end_b }
    );
    assert_eq!(
        tm.status(xa).unwrap(),
        XidStatus::Committed { commit_lsn: end_b },
        "the group LSN is the max over the group (conservative for hints)"
    );
    assert!(tm.flushed_lsn() >= end_b, "synchronous commit flushed");
}

#[test]
fn asynchronous_commit_returns_before_the_flush() {
    let dir = tempfile::tempdir().unwrap();
    let env = common::open(dir.path(), 16);
    let tm = &env.tm;
    tm.set_commit_mode(CommitMode::Asynchronous);
    let t = tm.begin().unwrap();
    let x = t.xid();
    let end = t.commit().unwrap();
    assert_eq!(
        tm.status(x).unwrap(),
        XidStatus::Committed { commit_lsn: end }
    );
    assert!(
        tm.flushed_lsn() < end,
        "no background flusher: the commit record is not durable yet ({} < {end})",
        tm.flushed_lsn()
    );
    // Heap's hint rule would refuse a commit hint here; after a flush it may.
    env.wal.flush(end).unwrap();
    assert!(tm.flushed_lsn() >= end);
    // A synchronous commit in the same manager still waits.
    let t = tm.begin().unwrap();
    let end2 = t.commit_with(CommitMode::Synchronous).unwrap();
    assert!(tm.flushed_lsn() >= end2);
}

#[test]
fn no_clog_page_is_written_before_its_commit_records_are_durable() {
    common::watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let (env, checker) = open_checked(dir.path(), 4);
        let tm = &env.tm;
        tm.set_commit_mode(CommitMode::Asynchronous);
        let mut last = Lsn::ZERO;
        for round in 0..20 {
            for _ in 0..1000 {
                last = tm.begin().unwrap().commit().unwrap();
            }
            assert!(
                env.wal.flushed_lsn() < last,
                "round {round}: async commits left the WAL behind"
            );
            // Writing the dirty clog pages must first flush the WAL.
            if round % 2 == 0 {
                env.pool.evict_all().unwrap();
            } else {
                env.pool.flush_all(false).unwrap();
            }
            assert!(
                env.wal.flushed_lsn() >= last,
                "the page write pulled the WAL along"
            );
        }
        let writes = checker.clog_writes.load(Ordering::Relaxed);
        assert!(writes >= 20, "clog pages were written ({writes})");
        assert_eq!(checker.violations.load(Ordering::Relaxed), 0);
        let rf = RelFork::main(CLOG_REL);
        assert!(
            env.pool.nblocks(rf).unwrap() >= 2,
            "20,000 xids span two pages"
        );
    });
}

/// An abort raises the clog page LSN to its abort record's end, so the page
/// cannot reach disk saying "aborted" before the abort record does. (Else a
/// crash could hand the xid out again, and its stale "aborted" bits would
/// hide the new transaction's rows from readers that set hints.)
#[test]
fn no_clog_page_says_aborted_before_the_abort_record_is_durable() {
    common::watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let (env, checker) = open_checked(dir.path(), 8);
        let tm = &env.tm;
        tm.begin().unwrap().commit().unwrap();
        let flushed_before = env.wal.flushed_lsn();
        let t = tm.begin().unwrap();
        let x = t.xid();
        t.abort().unwrap();
        assert_eq!(tm.status(x).unwrap(), XidStatus::Aborted);
        assert!(
            env.wal.insert_lsn() > flushed_before,
            "the abort record is in the WAL buffers, not yet durable"
        );
        env.pool.flush_relation(RelFork::main(CLOG_REL)).unwrap();
        assert!(checker.clog_writes.load(Ordering::Relaxed) >= 1);
        assert_eq!(checker.violations.load(Ordering::Relaxed), 0);
        assert!(
            env.wal.flushed_lsn() >= env.wal.insert_lsn(),
            "writing the clog page flushed the abort record first"
        );
    });
}
