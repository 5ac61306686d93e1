//! Bad files and a full disk (the engine issue's "bad input" list, beyond
//! `data_directory_is_guarded.rs` and `flipped_bit_is_a_checksum_error.rs`):
//! - a flipped bit in an index page is an error naming the index and the
//!   block (kind `CorruptData`), never a panic; the table itself still reads;
//! - a write that fails (a full disk, injected with `FaultyStorage::
//!   fail_writes_after`) during a checkpoint is an error to the caller, and
//!   the pool refuses every later write, even once the disk has room again;
//!   after reopening without the fault ("space freed"), nothing committed
//!   is lost, before or after the failure.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bufmgr::{FaultyStorage, PAGE_SIZE, StorageBackend};
use common::{every_page_checksum_valid, row, small_options, two_columns, watchdog};
use engine::{Database, ErrorKind, Options, Value};
use parking_lot::Mutex;

fn quiet() -> Options {
    small_options().checkpointer(false).bgwriter(None)
}

#[test]
fn a_flipped_bit_in_an_index_page_is_an_error_naming_index_and_block() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_table("t", two_columns()).unwrap();
        let ix = db.create_index("t_id", "t", "id", true).unwrap();
        db.bulk_load("t", (0..3000).map(|i| row(i, "x")), |_| {})
            .unwrap();
        db.close().unwrap();

        let file = dir.path().join("base").join(ix.rel.0.to_string());
        let mut bytes = std::fs::read(&file).unwrap();
        let nblocks = bytes.len() / PAGE_SIZE;
        assert!(nblocks >= 4, "a few index pages");
        let block = nblocks - 1;
        bytes[block * PAGE_SIZE + 3000] ^= 0x04;
        std::fs::write(&file, bytes).unwrap();

        let db = Database::open(dir.path(), small_options()).unwrap();
        let t = db.begin().unwrap();
        let results: Vec<_> = t
            .index_range(
                "t_id",
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
            )
            .unwrap()
            .collect();
        let err = results
            .iter()
            .find_map(|r| r.as_ref().err())
            .expect("the range scan reports the damage");
        let msg = err.to_string();
        assert_eq!(err.kind(), ErrorKind::CorruptData, "{msg}");
        assert!(msg.contains("\"t_id\""), "names the index: {msg}");
        assert!(
            msg.contains(&format!("block {block}")),
            "names the block: {msg}"
        );
        assert!(msg.contains("checksum"), "{msg}");
        // The heap is fine: a table scan reads every row.
        assert_eq!(t.scan("t").unwrap().filter(|r| r.is_ok()).count(), 3000);
        drop(t);
        match db.verify_indexes("t") {
            Err(e) => assert!(e.to_string().contains("t_id"), "{e}"),
            Ok(v) => assert!(!v.is_empty(), "verify finds the damage"),
        }
        db.close().unwrap();
    });
}

#[test]
fn a_full_disk_fails_the_write_and_loses_nothing_committed() {
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
        let name = |i: i64| format!("row {i} and some padding to use a few pages");
        let commit_rows = |range: std::ops::Range<i64>| {
            let t = db.begin()?;
            for i in range {
                t.insert("t", row(i, &name(i)))?;
            }
            t.commit().map(drop)
        };
        commit_rows(0..500).unwrap();
        db.checkpoint().unwrap();
        commit_rows(500..1000).unwrap();

        // The disk fills up during the checkpoint's writes.
        faulty.fail_writes_after(2);
        let e = db.checkpoint().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io, "{e}");
        // Space comes back, but the pool no longer trusts its files.
        faulty.clear();
        let refused = db.pool().flush_all(false).unwrap_err();
        assert!(refused.to_string().contains("refuses writes"), "{refused}");
        assert!(db.checkpoint().is_err(), "later checkpoints fail too");
        // Commits still work as long as they need no page write (the WAL is
        // fine); whatever commits must survive too.
        let mut want = 1000;
        if commit_rows(1000..1010).is_ok() {
            want = 1010;
        }
        drop(db); // Drop's shutdown fails to write; no clean marker
        assert!(!dir.path().join("CLEAN_SHUTDOWN").exists());

        // Reopened without the fault: recovery replays, nothing is lost.
        let db = Database::open(dir.path(), quiet()).unwrap();
        assert!(db.recovery_stats().other > 0);
        let t = db.begin().unwrap();
        for i in 0..want {
            let got = t.get_by_key("t", "id", &Value::I64(i)).unwrap();
            assert_eq!(
                got.map(|(_, r)| r.into_values()),
                Some(row(i, &name(i))),
                "row {i}"
            );
        }
        assert_eq!(t.scan("t").unwrap().count(), want as usize);
        drop(t);
        assert_eq!(db.verify_indexes("t").unwrap(), vec![]);
        db.close().unwrap();
        every_page_checksum_valid(dir.path()).unwrap();
        eprintln!("full disk: {want} committed rows survived");
    });
}
