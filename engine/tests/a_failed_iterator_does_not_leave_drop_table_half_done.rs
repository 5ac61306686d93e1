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

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bufmgr::{BlockNumber, BufferTag, RelFork, StorageBackend};
use common::{row, small_options, two_columns, watchdog};
use engine::{CLOG_REL, Database, HintMode};

/// Passes everything through, except reads of the commit log while armed.
#[derive(Debug)]
struct FailClogReads {
    inner: Arc<dyn StorageBackend>,
    armed: Arc<AtomicBool>,
}

impl FailClogReads {
    fn check(&self, tag: BufferTag) -> bufmgr::Result<()> {
        if self.armed.load(Ordering::SeqCst) && tag.relfork().rel == CLOG_REL {
            return Err(bufmgr::Error::io(
                "read",
                tag,
                self.inner.path(tag.relfork()),
                std::io::Error::other("injected read failure of the commit log"),
            ));
        }
        Ok(())
    }
}

impl StorageBackend for FailClogReads {
    fn name(&self) -> &'static str {
        "fail-clog-reads"
    }
    fn path(&self, rf: RelFork) -> PathBuf {
        self.inner.path(rf)
    }
    fn create(&self, rf: RelFork) -> bufmgr::Result<()> {
        self.inner.create(rf)
    }
    fn exists(&self, rf: RelFork) -> bufmgr::Result<bool> {
        self.inner.exists(rf)
    }
    fn nblocks(&self, rf: RelFork) -> bufmgr::Result<BlockNumber> {
        self.inner.nblocks(rf)
    }
    fn read(&self, tag: BufferTag, page: &mut [u8]) -> bufmgr::Result<()> {
        self.check(tag)?;
        self.inner.read(tag, page)
    }
    fn write(&self, tag: BufferTag, page: &[u8]) -> bufmgr::Result<()> {
        self.inner.write(tag, page)
    }
    fn truncate(&self, rf: RelFork, nblocks: BlockNumber) -> bufmgr::Result<()> {
        self.inner.truncate(rf, nblocks)
    }
    fn sync(&self, rf: RelFork) -> bufmgr::Result<()> {
        self.inner.sync(rf)
    }
    fn sync_all(&self) -> bufmgr::Result<()> {
        self.inner.sync_all()
    }
    fn unlink(&self, rf: RelFork) -> bufmgr::Result<()> {
        self.inner.unlink(rf)
    }
    fn relations(&self) -> bufmgr::Result<Vec<RelFork>> {
        self.inner.relations()
    }
}

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
