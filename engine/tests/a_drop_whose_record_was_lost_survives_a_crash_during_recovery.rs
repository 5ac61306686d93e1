//! A table dropped with `full_page_writes` off: its rows were changed
//! after the last checkpoint by records without page images, the DROP's
//! commit reached the disk, and the power went before its drop record did
//! (the simulated disk). The next open finds the table's file an orphan
//! (the catalog no longer knows it) and removes it; if that open dies
//! after it and before the end-of-recovery checkpoint (here: every write
//! fails from a point on, which leaves the disk as a kill would), the open
//! after replays the same records onto a file that is gone.
//!
//! Before, the orphan's file was removed with no record saying why, and
//! every later open failed for good: "the record needs relation 1001 block
//! 0, but its file does not exist, and no later drop of the relation
//! explains it". The orphan's removal now logs a drop record first, as a
//! DROP does.

mod common;

use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, Options};
use wal::sim_disk::{Fault, FaultKind, FaultOp, FileClass, SimDisk};

fn options(disk: &SimDisk) -> Options {
    // The one power loss below comes where no relation write is pending
    // (a pool that holds every page, everything checkpointed before), so
    // no page is torn, which full_page_writes off could not repair.
    small_options()
        .pool_buffers(256)
        .full_page_writes(false)
        .checkpointer(false)
        .bgwriter(None)
        .async_flush_interval(None)
        .wal_segment_size(wal::MIN_SEGMENT_SIZE)
        .simulated_disk(disk.clone())
}

#[test]
fn an_orphan_removed_by_an_open_that_died_does_not_keep_the_database_closed() {
    watchdog(Duration::from_secs(60), || {
        let mut met = 0;
        // The crash point inside the DROP: after its commit is durable and
        // before its drop record is (found by trying each).
        for k in 1..=6u64 {
            let dir = tempfile::tempdir().unwrap();
            let disk = SimDisk::new();
            let db = Database::open(dir.path(), options(&disk)).unwrap();
            db.create_table("t", two_columns()).unwrap();
            let x = db.create_table("x", two_columns()).unwrap();
            let txn = db.begin().unwrap();
            for i in 0..10 {
                txn.insert("x", row(10_000 + i, "before the checkpoint"))
                    .unwrap();
            }
            txn.commit().unwrap();
            db.checkpoint().unwrap();
            // Changes to the page the checkpoint wrote: no images.
            for b in 0..5 {
                let txn = db.begin().unwrap();
                for i in 0..3 {
                    txn.insert("x", row(b * 100 + i, "after")).unwrap();
                }
                txn.commit().unwrap();
            }
            let txn = db.begin().unwrap();
            txn.insert("t", row(1, "kept")).unwrap();
            txn.commit().unwrap();
            disk.arm_crash_point(k, k);
            let dropped = db.drop_table("x");
            if !disk.is_powered_off() {
                disk.power_loss(k).unwrap();
            }
            drop(db);
            disk.restart();
            let lost_record = dropped
                .as_ref()
                .is_err_and(|e| e.to_string().contains("could not log the drop"));
            if !lost_record {
                continue;
            }
            met += 1;
            // Opens that die at a write, each later one let through one
            // more (a process killed there: everything written before
            // stays), until one has removed the orphan's file.
            let file = dir.path().join("base").join(x.rel.0.to_string());
            assert!(file.exists());
            let mut removed = false;
            for w in 0..200u64 {
                disk.inject(Fault {
                    class: FileClass::Any,
                    op: FaultOp::Write,
                    after: w,
                    kind: FaultKind::Eio,
                    sticky: true,
                });
                let opened = Database::open(dir.path(), options(&disk));
                let finished = opened.is_ok();
                drop(opened);
                disk.clear_faults();
                if !file.exists() {
                    removed = !finished;
                    break;
                }
                assert!(!finished, "k {k}: an open finished and left the orphan");
            }
            assert!(removed, "k {k}: no open died after removing the orphan");
            let db = Database::open(dir.path(), options(&disk))
                .unwrap_or_else(|e| panic!("k {k}: the open after failed: {e}"));
            assert!(db.table("x").is_err(), "k {k}: the dropped table is back");
            let r = db.read().unwrap();
            let rows: Vec<_> = r.scan("t").unwrap().map(Result::unwrap).collect();
            assert_eq!(rows.len(), 1, "k {k}");
            r.commit().unwrap();
            db.close().unwrap();
        }
        assert!(
            met > 0,
            "no crash point fell between the commit and the drop record"
        );
    });
}
