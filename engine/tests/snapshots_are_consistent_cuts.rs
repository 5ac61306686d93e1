//! Snapshots: a transaction running at snapshot time stays invisible after it
//! commits, and under concurrency every snapshot is a consistent cut: a
//! transaction whose commit returned before the snapshot began is never in its
//! running list, xmin/xmax bound the list, and every xid below xmax had begun.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use engine::CommitMode;
use heap::txn::{FIRST_NORMAL_XID, TransactionStatus, XidStatus};
use parking_lot::Mutex;

#[test]
fn a_transaction_running_at_snapshot_time_stays_invisible_after_commit() {
    let dir = tempfile::tempdir().unwrap();
    let env = common::open(dir.path(), 16);
    let tm = &env.tm;
    let early = tm.begin().unwrap();
    let early_xid = early.xid();
    early.commit().unwrap();
    let a = tm.begin().unwrap();
    let b = tm.begin().unwrap();
    let (xa, xb) = (a.xid(), b.xid());
    let snap = b.snapshot();
    assert_eq!(snap.xmin, xa);
    assert_eq!(snap.xmax, xb + 1);
    assert_eq!(snap.running, vec![xa]);
    assert!(
        !snap.treats_as_running(early_xid),
        "committed before: visible"
    );
    assert!(!snap.treats_as_running(xb), "own xid is visible to itself");
    a.commit().unwrap();
    let c = tm.begin().unwrap();
    let xc = c.xid();
    c.commit().unwrap();
    assert!(matches!(
        tm.status(xa).unwrap(),
        XidStatus::Committed { .. }
    ));
    assert!(
        snap.treats_as_running(xa),
        "running at snapshot time: stays invisible"
    );
    assert!(
        snap.treats_as_running(xc),
        "began after the snapshot: invisible"
    );
    let later = tm.snapshot();
    assert!(!later.treats_as_running(xa));
    assert!(later.treats_as_running(xb), "b still runs");
    b.abort().unwrap();
    assert_eq!(tm.status(xb).unwrap(), XidStatus::Aborted);
}

#[test]
fn snapshots_under_concurrent_commits_are_consistent_cuts() {
    common::watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let env = common::open(dir.path(), 32);
        env.tm.set_commit_mode(CommitMode::Asynchronous);
        let tm = env.tm.clone();
        // Xids whose commit (or abort) has returned, in order of return.
        let finished: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let snapshots = Arc::new(AtomicU64::new(0));
        let mut workers = Vec::new();
        for w in 0..4 {
            let (tm, finished, stop) = (tm.clone(), finished.clone(), stop.clone());
            workers.push(std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) && i < 20_000 {
                    let t = tm.begin().unwrap();
                    let x = t.xid();
                    if (i + w).is_multiple_of(10) {
                        t.abort().unwrap();
                    } else {
                        t.commit().unwrap();
                    }
                    finished.lock().push(x);
                    i += 1;
                }
            }));
        }
        let mut checkers = Vec::new();
        for _ in 0..2 {
            let (tm, finished, stop, snapshots) = (
                tm.clone(),
                finished.clone(),
                stop.clone(),
                snapshots.clone(),
            );
            checkers.push(std::thread::spawn(move || {
                let mut last_xmax = FIRST_NORMAL_XID;
                while !stop.load(Ordering::Relaxed) {
                    let before: Vec<u64> = finished.lock().clone();
                    let snap = tm.snapshot();
                    assert!(
                        snap.running.windows(2).all(|w| w[0] < w[1]),
                        "sorted, unique"
                    );
                    assert!(snap.xmin <= snap.xmax);
                    assert!(snap.xmax >= last_xmax, "xmax never goes back");
                    last_xmax = snap.xmax;
                    if let Some(first) = snap.running.first() {
                        assert_eq!(*first, snap.xmin);
                    } else {
                        assert_eq!(snap.xmin, snap.xmax);
                    }
                    for x in &snap.running {
                        assert!(*x < snap.xmax);
                    }
                    for x in &before {
                        assert!(
                            snap.running.binary_search(x).is_err(),
                            "xid {x} finished before the snapshot but is listed running"
                        );
                        assert!(*x < snap.xmax, "finished xid {x} not below xmax");
                        // Its final status is in the clog.
                        assert_ne!(tm.status(*x).unwrap(), XidStatus::InProgress);
                    }
                    snapshots.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }
        for w in workers {
            w.join().unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        for c in checkers {
            c.join().unwrap();
        }
        assert!(snapshots.load(Ordering::Relaxed) > 0);
        assert_eq!(tm.running_count(), 0);
        assert_eq!(tm.stats().committed + tm.stats().aborted, 80_000);
        let s = tm.snapshot();
        assert!(s.running.is_empty());
        assert_eq!(s.xmax, tm.next_xid());
    });
}
