//! Commit and abort statuses survive eviction and re-reading of clog pages:
//! many xids over several clog pages, a pool of 8 buffers, evicted often.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bufmgr::{FaultyStorage, StorageBackend};
use engine::{CLOG_REL, CommitMode, XIDS_PER_PAGE};
use heap::txn::{TransactionStatus, XidStatus};
use wal::Lsn;

#[derive(Debug, Copy, Clone, PartialEq)]
enum Outcome {
    Committed(Lsn),
    Aborted,
    Running,
}

#[test]
fn statuses_round_trip_across_several_evicted_clog_pages() {
    common::watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let mut faulty = None;
        let env = common::open_with(dir.path(), 8, |_, s| {
            let f = Arc::new(FaultyStorage::new(s));
            faulty = Some(f.clone());
            f as Arc<dyn StorageBackend>
        });
        let faulty = faulty.unwrap();
        env.tm.set_commit_mode(CommitMode::Asynchronous);
        let n = 3 * XIDS_PER_PAGE + 500;
        let mut outcome = HashMap::new();
        let mut running = Vec::new();
        for i in 0..n {
            let t = env.tm.begin().unwrap();
            let xid = t.xid();
            match i % 7 {
                0 | 3 => {
                    t.abort().unwrap();
                    outcome.insert(xid, Outcome::Aborted);
                }
                5 if i % 5 == 0 => {
                    running.push(t.abandon());
                    outcome.insert(xid, Outcome::Running);
                }
                _ => {
                    let end = t.commit().unwrap();
                    outcome.insert(xid, Outcome::Committed(end));
                }
            }
            if i % 5000 == 4999 {
                env.pool.evict_all().unwrap();
            }
        }
        assert!(env.tm.clog().pages() >= 4, "spans several clog pages");
        // The commit LSN of a group is the max over its committed members.
        let mut group_max: HashMap<u64, Lsn> = HashMap::new();
        for (x, o) in &outcome {
            if let Outcome::Committed(end) = o {
                let g = group_max.entry(x / 32).or_insert(Lsn::ZERO);
                *g = (*g).max(*end);
            }
        }
        let check = |round: &str| {
            for (x, o) in &outcome {
                let got = env.tm.status(*x).unwrap();
                let want = match o {
                    Outcome::Committed(_) => XidStatus::Committed {
                        commit_lsn: group_max[&(x / 32)],
                    },
                    Outcome::Aborted => XidStatus::Aborted,
                    Outcome::Running => XidStatus::InProgress,
                };
                assert_eq!(got, want, "{round}: xid {x}");
            }
        };
        check("cached");
        let reads_before = faulty.reads();
        env.pool.evict_all().unwrap();
        check("after eviction");
        let clog_reads = faulty.reads() - reads_before;
        assert!(
            clog_reads >= 4,
            "clog pages were re-read ({clog_reads} reads)"
        );
        assert_eq!(env.tm.running_count(), running.len());
        assert!(env.pool.nblocks(bufmgr::RelFork::main(CLOG_REL)).unwrap() >= 4);
    });
}

/// A status lookup that finds every buffer pinned (scans holding the pages
/// they read ahead) waits for a buffer instead of failing: the pins are
/// released after a while and the lookup answers. Before, it failed at once
/// with "no unpinned buffers".
#[test]
fn a_status_lookup_waits_out_a_fully_pinned_pool() {
    common::watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let env = common::open(dir.path(), 8);
        let t = env.tm.begin().unwrap();
        let xid = t.xid();
        let end = t.commit().unwrap();
        // Every buffer pinned by pages of another relation, none by the clog.
        let other = bufmgr::RelFork::main(bufmgr::RelId(5000));
        env.pool.create_fork(other).unwrap();
        let size = env.pool.size();
        for _ in 0..size {
            env.pool.extend(other, None).unwrap().mark_dirty();
        }
        env.pool
            .evict_relation(bufmgr::RelFork::main(CLOG_REL))
            .unwrap();
        let pins: Vec<_> = (0..size as u32)
            .map(|b| env.pool.read_buffer(other, b, None).unwrap())
            .collect();
        assert!(
            env.pool
                .read_buffer(bufmgr::RelFork::main(CLOG_REL), 0, None)
                .is_err(),
            "every buffer is pinned"
        );
        std::thread::scope(|s| {
            let lookup = s.spawn(|| env.tm.status(xid));
            std::thread::sleep(Duration::from_millis(100));
            drop(pins);
            let got = lookup.join().unwrap();
            assert_eq!(got.unwrap(), XidStatus::Committed { commit_lsn: end });
        });
    });
}
