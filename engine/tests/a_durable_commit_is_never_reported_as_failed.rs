//! A commit whose record is flushed is made, whatever fails after: here the
//! commit log's page cannot be read to record it (an injected read failure,
//! the page evicted first). Then:
//! - `commit` returns the commit record's LSN (not an error the caller would
//!   take for a failed transaction);
//! - the xid leaves the running set and reads as committed for the rest of
//!   the run, so its row is visible;
//! - every later write is refused with `CommitNotRecorded` naming the xid
//!   (new writes, a commit of a transaction begun before, DDL, vacuum,
//!   checkpoints), as PostgreSQL PANICs in its commit critical section;
//! - after a reopen, recovery has recorded the commit: the row is there,
//!   the transaction that was running is not, and writes work again.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bufmgr::{FaultyStorage, RelFork};
use common::{row, small_options, two_columns, watchdog};
use engine::{CLOG_REL, Database, EngineError, ErrorKind, Options, Value};
use heap::txn::XidStatus;
use parking_lot::Mutex;

fn ids(db: &Database) -> Vec<i64> {
    let r = db.read().unwrap();
    let mut out: Vec<i64> = r
        .scan("t")
        .unwrap()
        .map(|item| match item.unwrap().1[0] {
            Value::I64(id) => id,
            ref v => panic!("unexpected id {v:?}"),
        })
        .collect();
    r.commit().unwrap();
    out.sort();
    out
}

fn refused(result: engine::Result<impl std::fmt::Debug>, xid: u64, what: &str) {
    match result {
        Err(e @ EngineError::CommitNotRecorded { .. }) => {
            assert_eq!(e.kind(), ErrorKind::Io);
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("xid {xid}")) && msg.contains("commit-log page"),
                "{what}: {msg}"
            );
        }
        other => panic!("{what}: expected CommitNotRecorded, got {other:?}"),
    }
}

#[test]
fn a_commit_whose_clog_update_fails_is_reported_committed_and_recovered() {
    watchdog(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let slot: Arc<Mutex<Option<Arc<FaultyStorage>>>> = Arc::new(Mutex::new(None));
        let s2 = slot.clone();
        let options = move || -> Options {
            let s2 = s2.clone();
            small_options()
                .checkpointer(false)
                .bgwriter(None)
                .wrap_storage(move |files| {
                    let f = Arc::new(FaultyStorage::new(files));
                    *s2.lock() = Some(f.clone());
                    f
                })
        };
        let db = Database::open(dir.path(), options()).unwrap();
        let faulty = slot.lock().clone().unwrap();
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        let txn = db.begin().unwrap();
        for id in 0..5 {
            txn.insert("t", row(id, "before")).unwrap();
        }
        txn.commit().unwrap();

        let doomed = db.begin().unwrap();
        doomed.insert("t", row(200, "begun earlier")).unwrap();
        let txn = db.begin().unwrap();
        txn.insert("t", row(100, "the commit")).unwrap();
        let xid = txn.xid().expect("an xid");
        // The clog page leaves the pool; reading it back fails.
        db.pool().evict_relation(RelFork::main(CLOG_REL)).unwrap();
        faulty.fail_reads_after(0);
        let lsn = txn
            .commit()
            .expect("a durable commit is reported as committed");
        faulty.clear();
        assert!(lsn <= db.wal().flushed_lsn(), "{lsn} not flushed");
        let tm = db.transaction_manager();
        assert_eq!(tm.running_count(), 1, "only the transaction begun earlier");
        assert_eq!(
            tm.try_status(xid).unwrap(),
            XidStatus::Committed { commit_lsn: lsn }
        );
        assert_eq!(ids(&db), vec![0, 1, 2, 3, 4, 100]);

        // Every write is refused until the reopen.
        refused(
            doomed.commit(),
            xid,
            "commit of a transaction begun earlier",
        );
        assert_eq!(tm.running_count(), 0);
        let w = db.begin().unwrap();
        refused(w.insert("t", row(300, "later")), xid, "a later insert");
        drop(w);
        refused(db.checkpoint(), xid, "checkpoint");
        refused(db.vacuum("t"), xid, "vacuum");
        refused(db.create_table("u", two_columns()), xid, "create table");
        refused(
            db.bulk_load("t", vec![row(400, "load")], |_| {}),
            xid,
            "bulk load",
        );
        assert_eq!(ids(&db), vec![0, 1, 2, 3, 4, 100]);
        assert!(db.close().is_err(), "close needs a checkpoint");

        // Recovery records the commit.
        let db = Database::open(dir.path(), options()).unwrap();
        assert!(db.recovery_stats().commits >= 1);
        assert_eq!(ids(&db), vec![0, 1, 2, 3, 4, 100]);
        let txn = db.begin().unwrap();
        txn.insert("t", row(300, "after the reopen")).unwrap();
        txn.commit().unwrap();
        db.checkpoint().unwrap();
        assert!(db.verify_indexes("t").unwrap().is_empty());
        db.close().unwrap();
        let db = Database::open(dir.path(), options()).unwrap();
        assert_eq!(ids(&db), vec![0, 1, 2, 3, 4, 100, 300]);
        db.close().unwrap();
    });
}
