//! Durability: synchronous commits survive a crash that loses every dirty
//! page (the pool is dropped without flushing, no checkpoint), because Xact
//! redo replays the commit records into the clog; transactions running at the
//! crash read aborted; the next xid is beyond every xid seen. A second test
//! crashes after a checkpoint, so part of the state comes from flushed clog
//! pages and part from replay starting at the redo point.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use engine::{CommitMode, recover};
use heap::txn::{TransactionStatus, XidStatus};

#[derive(Debug, Copy, Clone, PartialEq)]
enum Fate {
    Committed,
    Aborted,
    Crashed,
}

/// Run `n` transactions: every 4th aborted, every 5th left running.
fn workload(env: &common::Env, n: usize, fates: &mut HashMap<u64, Fate>) {
    for i in 0..n {
        let t = env.tm.begin().unwrap();
        let x = t.xid();
        if i % 4 == 1 {
            t.abort().unwrap();
            fates.insert(x, Fate::Aborted);
        } else if i % 5 == 2 {
            t.abandon();
            fates.insert(x, Fate::Crashed);
        } else {
            t.commit().unwrap();
            fates.insert(x, Fate::Committed);
        }
    }
}

/// "Crash": drop the manager and the pool without flushing pages.
fn crash(env: common::Env) {
    let common::Env { wal, pool, tm } = env;
    drop(tm);
    drop(pool);
    drop(wal);
}

fn reopen_and_check(
    dir: &Path,
    fates: &HashMap<u64, Fate>,
) -> (common::Env, engine::RecoveryStats) {
    let env = common::open(dir, 8);
    let stats = recover(&env.tm, |_, _, _| Ok::<(), std::io::Error>(())).unwrap();
    let max = *fates.keys().max().unwrap();
    assert!(
        env.tm.next_xid() > max,
        "next xid {} beyond {max}",
        env.tm.next_xid()
    );
    assert_eq!(stats.next_xid, env.tm.next_xid());
    for (x, f) in fates {
        let s = env.tm.status(*x).unwrap();
        match f {
            Fate::Committed => assert!(matches!(s, XidStatus::Committed { .. }), "xid {x}: {s:?}"),
            Fate::Aborted | Fate::Crashed => assert_eq!(s, XidStatus::Aborted, "xid {x} ({f:?})"),
        }
    }
    // A new transaction gets a fresh xid and reads in progress, not crashed.
    let t = env.tm.begin().unwrap();
    assert!(t.xid() > max);
    assert_eq!(env.tm.status(t.xid()).unwrap(), XidStatus::InProgress);
    t.abort().unwrap();
    (env, stats)
}

#[test]
fn synchronous_commits_survive_a_crash_without_any_page_written() {
    common::watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let mut fates = HashMap::new();
        let env = common::open(dir.path(), 8);
        env.tm.set_commit_mode(CommitMode::Synchronous);
        workload(&env, 300, &mut fates);
        crash(env);
        let (env, stats) = reopen_and_check(dir.path(), &fates);
        assert!(stats.commits > 0, "commit records were replayed");
        // And again: crash the recovered system after more work.
        workload(&env, 100, &mut fates);
        crash(env);
        reopen_and_check(dir.path(), &fates);
    });
}

#[test]
fn a_crash_after_a_checkpoint_combines_flushed_clog_pages_and_replay() {
    common::watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let mut fates = HashMap::new();
        let env = common::open(dir.path(), 8);
        env.tm.set_commit_mode(CommitMode::Asynchronous);
        workload(&env, 20_000, &mut fates);
        let info = env.tm.checkpoint().unwrap();
        assert!(info.pages >= 2, "clog pages flushed by the checkpoint");
        env.tm.set_commit_mode(CommitMode::Synchronous);
        workload(&env, 200, &mut fates);
        let next_before = env.tm.next_xid();
        crash(env);
        let env = common::open(dir.path(), 8);
        let cp = env.wal.last_checkpoint().expect("a checkpoint");
        assert!(cp.next_xid <= next_before);
        crash(env);
        let (env, stats) = reopen_and_check(dir.path(), &fates);
        assert!(
            stats.start > wal::Lsn::ZERO,
            "replay started at the redo point"
        );
        assert!(
            stats.commits >= 100 && stats.commits < 20_000,
            "only post-checkpoint commits replayed"
        );
        assert!(env.tm.next_xid() > next_before - 1);
    });
}

#[test]
fn commits_racing_checkpoints_survive_a_crash() {
    common::watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let env = common::open(dir.path(), 8);
        env.tm.set_commit_mode(CommitMode::Asynchronous);
        let fates = Arc::new(Mutex::new(HashMap::new()));
        let mut threads = Vec::new();
        for _ in 0..3 {
            let (tm, fates) = (env.tm.clone(), fates.clone());
            threads.push(std::thread::spawn(move || {
                for i in 0..3000u32 {
                    let t = tm.begin().unwrap();
                    let x = t.xid();
                    if i % 3 == 0 {
                        t.abort().unwrap();
                        fates.lock().insert(x, Fate::Aborted);
                    } else {
                        t.commit().unwrap();
                        fates.lock().insert(x, Fate::Committed);
                    }
                }
            }));
        }
        for _ in 0..5 {
            env.tm.checkpoint().unwrap();
        }
        for t in threads {
            t.join().unwrap();
        }
        // Asynchronous commits are durable once the WAL is flushed.
        env.wal.flush_all().unwrap();
        crash(env);
        let fates = fates.lock().clone();
        reopen_and_check(dir.path(), &fates);
    });
}
