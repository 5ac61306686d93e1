//! A failed iterator releases its pins at once, so a DROP
//! TABLE waiting on them is not left half done. A scan iterator over 3,000
//! rows reads 10 rows, then fails (the commit log cannot be read: an
//! injected read error), and is kept (not dropped, as a caller holding it
//! in a struct would). The read error goes away. Before the fix, `drop_table` waits
//! 10 s for the iterator's pin, then fails with `could not remove the files
//! of relation 1000: invalid buffer pool configuration: relation 1000 block
//! 6 is still pinned after 10s`, after the catalog entry is already gone:
//! the table is unknown, its file stays on disk (also after the iterator is
//! dropped) and nothing will remove it.
//! Expected: the drop succeeds and the file is gone.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bufmgr::RelFork;
use common::{FailClogReads, row, small_options, two_columns, watchdog};
use engine::{CLOG_REL, Database, HintMode};

#[test]
fn drop_table_after_a_failed_iterator_removes_table_and_file() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let armed = Arc::new(AtomicBool::new(false));
        let a = armed.clone();
        let opts = small_options()
            .hint_mode(HintMode::Never)
            .checkpointer(false)
            .bgwriter(None)
            .wrap_storage(move |inner| {
                Arc::new(FailClogReads {
                    inner,
                    armed: a.clone(),
                })
            });
        let db = Database::open(dir.path(), opts).unwrap();
        let rel = db.create_table("t", two_columns()).unwrap().rel;
        let t = db.begin().unwrap();
        for i in 0..3_000 {
            t.insert("t", row(i, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"))
                .unwrap();
        }
        t.commit().unwrap();
        let r = db.read().unwrap();
        let mut it = r.scan("t").unwrap();
        for _ in 0..10 {
            it.next().unwrap().unwrap();
        }
        db.pool().evict_relation(RelFork::main(CLOG_REL)).unwrap();
        armed.store(true, Ordering::SeqCst);
        assert!(
            it.by_ref().any(|x| x.is_err()),
            "the iterator fails while the commit log cannot be read"
        );
        armed.store(false, Ordering::SeqCst);
        let dropped = db.drop_table("t");
        let file = dir.path().join("base").join(rel.0.to_string());
        drop(it);
        assert!(
            dropped.is_ok(),
            "drop_table: {dropped:?} (table still known: {}, file still there: {})",
            db.tables().iter().any(|t| t.name == "t"),
            file.exists()
        );
        assert!(!file.exists(), "the dropped table's file is gone");
    });
}
