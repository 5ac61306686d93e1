//! A torn page through the Database API: with a `FaultyStorage` under the
//! pool (`Options::wrap_storage`), rows are committed and checkpointed; a
//! page is then changed (its first change after the redo point, so the WAL
//! holds its full-page image) and its next write is torn: the first 4 KiB
//! new, the rest old, and the backend "crashes" (refuses every later
//! write). The database is dropped without a clean close (Drop's shutdown
//! cannot write anything), then reopened on plain files: the torn page fails
//! its checksum before recovery, and after recovery every committed row is
//! there and every page's checksum is valid.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bufmgr::{
    BufferPool, BufferTag, FaultyStorage, FileStorage, PAGE_SIZE, PoolConfig, RelFork,
    StorageBackend,
};
use common::{every_page_checksum_valid, row, small_options, two_columns, watchdog};
use engine::{Database, Options, Value};
use parking_lot::Mutex;

/// Options with no background writes (no checkpointer, no bgwriter), so
/// that only the test decides when pages are written.
fn quiet() -> Options {
    small_options().checkpointer(false).bgwriter(None)
}

fn name(i: i64) -> String {
    format!("row {i} with padding so that a page holds a few dozen of them")
}

#[test]
fn torn_page_is_repaired_from_full_page_image() {
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
        let info = db.create_table("t", two_columns()).unwrap();
        db.create_index("t_id", "t", "id", true).unwrap();
        let t = db.begin().unwrap();
        let ids: Vec<_> = (0..300)
            .map(|i| t.insert("t", row(i, &name(i))).unwrap())
            .collect();
        t.commit().unwrap();
        db.checkpoint().unwrap();

        // The victim: block 1 of the table, as the checkpoint left it on disk.
        let victim = ids.iter().find(|id| id.block == 1).copied().unwrap();
        let file = dir.path().join("base").join(info.rel.0.to_string());
        let old = std::fs::read(&file).unwrap()[PAGE_SIZE..2 * PAGE_SIZE].to_vec();
        let tag = BufferTag::new(RelFork::main(info.rel), 1);
        faulty.tear_next_write(Some(tag));

        // Change it (first change since the redo point: a full-page image),
        // and commit more rows elsewhere.
        let t = db.begin().unwrap();
        t.delete("t", victim).unwrap();
        for i in 300..320 {
            t.insert("t", row(i, &name(i))).unwrap();
        }
        t.commit().unwrap();

        // The checkpoint's write of block 1 is torn; it fails, and the
        // backend is crashed.
        let e = db.checkpoint().unwrap_err();
        assert_eq!(e.kind(), engine::ErrorKind::Io, "{e}");
        assert!(faulty.is_crashed(), "the tear crashed the backend");
        drop(db); // no clean close: nothing more reaches the files
        assert!(!dir.path().join("CLEAN_SHUTDOWN").exists());

        // On disk: the first 4 KiB new, the rest old, and a bad checksum.
        let torn = std::fs::read(&file).unwrap()[PAGE_SIZE..2 * PAGE_SIZE].to_vec();
        assert_ne!(torn[..4096], old[..4096], "first half is the new page");
        assert_eq!(torn[4096..], old[4096..], "second half is the old page");
        let pool = BufferPool::new(
            PoolConfig::new(16).partitions(1).checksums(true),
            Arc::new(FileStorage::open(dir.path()).unwrap()),
        )
        .unwrap();
        let err = pool
            .read_buffer(RelFork::main(info.rel), 1, None)
            .map(drop)
            .unwrap_err();
        assert!(err.to_string().contains("checksum"), "{err}");
        drop(pool);

        // Recovery restores the page from its image and replays the rest.
        let db = Database::open(dir.path(), quiet()).unwrap();
        assert!(db.recovery_stats().other > 0, "{:?}", db.recovery_stats());
        let t = db.begin().unwrap();
        for i in 0..320 {
            let got = t.get_by_key("t", "id", &Value::I64(i)).unwrap();
            if ids.get(i as usize) == Some(&victim) {
                assert!(got.is_none(), "the committed delete of row {i} is kept");
            } else {
                assert_eq!(
                    got.map(|(_, r)| r.into_values()),
                    Some(row(i, &name(i))),
                    "row {i}"
                );
            }
        }
        assert_eq!(t.scan("t").unwrap().count(), 319);
        drop(t);
        assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
        db.close().unwrap();
        let blocks = every_page_checksum_valid(dir.path()).unwrap();
        assert!(blocks > 5);
        eprintln!("torn block 1 repaired; {blocks} blocks valid");
    });
}
