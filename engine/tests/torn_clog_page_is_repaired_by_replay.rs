//! A torn write of a commit-log page (first 4 KiB new, the rest old) before
//! a crash: the page fails its checksum on disk, and recovery accepts it and
//! repairs it by replaying every commit and abort since the redo point (the
//! commit log has no full-page images: a status is set once, from zero, so
//! both halves of a torn page agree on everything older than the redo point).
//! Afterwards every committed row is visible, nothing aborted is, and every
//! page's checksum is valid.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bufmgr::{
    BufferPool, BufferTag, FaultyStorage, FileStorage, PoolConfig, RelFork, StorageBackend,
};
use common::{every_page_checksum_valid, row, small_options, two_columns, watchdog};
use engine::{CLOG_REL, CommitMode, Database, Options, Value};
use parking_lot::Mutex;

fn quiet() -> Options {
    small_options().checkpointer(false).bgwriter(None)
}

#[test]
fn torn_clog_page_is_repaired_by_replay() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let slot: Arc<Mutex<Option<Arc<FaultyStorage>>>> = Arc::new(Mutex::new(None));
        let s = slot.clone();
        let opts = quiet().wrap_storage(move |files| {
            let f = Arc::new(FaultyStorage::new(files));
            *s.lock() = Some(f.clone());
            f as Arc<dyn StorageBackend>
        });
        let db = Database::open(dir.path(), opts).unwrap();
        let faulty = slot.lock().clone().expect("the wrapper ran");
        db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        // Committed and aborted transactions before the checkpoint...
        for i in 0..40 {
            let t = db.begin().unwrap();
            t.insert("t", row(i, "before")).unwrap();
            if i % 4 == 3 {
                t.rollback().unwrap();
            } else {
                t.commit().unwrap();
            }
        }
        db.checkpoint().unwrap();
        // ... and after it, whose statuses change clog page 0 again, in both
        // halves: a group of 32 xids takes 16 bytes, so the xids past about
        // 8,200 sit in the page's second 4 KiB. (Empty transactions with
        // asynchronous commit: no fsync each; the torn write below flushes
        // the WAL first, as every clog page write does. An empty engine
        // transaction takes no xid, so these are the manager's own.)
        let tm = db.transaction_manager();
        for n in 0..8_400 {
            let t = tm.begin().unwrap();
            if n % 3 == 0 {
                t.abort().unwrap();
            } else {
                t.commit_with(CommitMode::Asynchronous).unwrap();
            }
        }
        for i in 40..80 {
            let t = db.begin().unwrap();
            t.insert("t", row(i, "after")).unwrap();
            if i % 4 == 3 {
                t.rollback().unwrap();
            } else {
                t.commit().unwrap();
            }
        }
        let clog0 = BufferTag::new(RelFork::main(CLOG_REL), 0);
        faulty.tear_next_write(Some(clog0));
        // Write only the commit log, torn: the backend then refuses writes.
        let e = db
            .pool()
            .flush_relation(RelFork::main(CLOG_REL))
            .unwrap_err();
        assert!(e.to_string().contains("torn"), "{e}");
        assert!(faulty.is_crashed());
        drop(db);

        // The clog page on disk fails its checksum.
        let pool = BufferPool::new(
            PoolConfig::new(16).partitions(1).checksums(true),
            Arc::new(FileStorage::open(dir.path()).unwrap()),
        )
        .unwrap();
        let err = pool
            .read_buffer(RelFork::main(CLOG_REL), 0, None)
            .map(drop)
            .unwrap_err();
        assert!(err.to_string().contains("checksum"), "{err}");
        drop(pool);

        // Recovery replays onto it; every status is right again.
        let db = Database::open(dir.path(), quiet()).unwrap();
        let t = db.begin().unwrap();
        for i in 0..80 {
            let got = t
                .get_by_key("t", "id", &Value::I64(i))
                .unwrap()
                .map(|(_, r)| r.into_values());
            let want = (i % 4 != 3).then(|| row(i, if i < 40 { "before" } else { "after" }));
            assert_eq!(got, want, "row {i}");
        }
        drop(t);
        db.close().unwrap();
        assert!(every_page_checksum_valid(dir.path()).unwrap() > 2);
    });
}
