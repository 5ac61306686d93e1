//! Rows committed into new pages of a table after a checkpoint, those
//! pages written to disk (WAL before data: their records were flushed
//! first), then the process dies; then the WAL from a record boundary among
//! those commits to its end is zeroed, which reads as a clean end of the
//! log (wal README, "Known limits"). Before, the open went on without every
//! commit after the cut, gave their xids out again, and kept the pages that
//! held their rows. A page beyond the durable length whose LSN lies past
//! the end of the WAL proves that flushed WAL is gone: the open fails
//! naming the table's file.

mod common;

use std::os::unix::fs::FileExt;
use std::time::Duration;

use common::{row, small_options, two_columns, watchdog};
use engine::{Database, Options};
use wal::sim_disk::{Fault, FaultKind, FaultOp, FileClass, SimDisk};
use wal::{Lsn, WalReader};

fn options(disk: &SimDisk) -> Options {
    small_options()
        .checkpointer(false)
        .bgwriter(None)
        .async_flush_interval(None)
        .simulated_disk(disk.clone())
}

#[test]
fn a_wal_tail_zeroed_after_its_pages_reached_the_disk_fails_the_open() {
    watchdog(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let disk = SimDisk::new();
        let db = Database::open(dir.path(), options(&disk)).unwrap();
        let info = db.create_table("t", two_columns()).unwrap();
        db.checkpoint().unwrap();
        let redo = wal::read_control(dir.path()).unwrap().unwrap().redo_lsn;
        for i in 0..200 {
            let txn = db.begin().unwrap();
            txn.insert("t", row(i, &"n".repeat(300))).unwrap();
            txn.commit().unwrap();
        }
        // Every page to disk, then the process dies: nothing more written.
        db.pool().evict_all().unwrap();
        for op in [FaultOp::Write, FaultOp::Sync] {
            disk.inject(Fault {
                class: FileClass::Any,
                op,
                after: 0,
                kind: FaultKind::Eio,
                sticky: true,
            });
        }
        drop(db);
        disk.clear_faults();
        // Zero the WAL from the record half way through the commits.
        // `small_options`' segments.
        let segment: u64 = 1 << 20;
        let records = WalReader::new(dir.path(), redo, segment)
            .unwrap()
            .read_to_end()
            .unwrap();
        let (cut, _) = records[records.len() / 2];
        let end = {
            let (l, r) = records.last().unwrap();
            Lsn(l.0 + r.encoded_len() as u64)
        };
        let mut at = cut.0;
        while at < end.0 {
            let seg = wal::segment::segment_path(
                &wal::segment::wal_dir(dir.path()),
                Lsn(at / segment * segment),
            );
            let off = at % segment;
            std::fs::OpenOptions::new()
                .write(true)
                .open(&seg)
                .unwrap()
                .write_all_at(&vec![0u8; (segment - off) as usize], off)
                .unwrap();
            at = (at / segment + 1) * segment;
        }
        let file = format!("base/{}", info.rel.0);
        match Database::open(dir.path(), options(&disk)) {
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains(&file), "{text}");
                assert!(text.contains("the WAL ends at"), "{text}");
            }
            Ok(db) => {
                let n = db.read().unwrap().scan("t").unwrap().count();
                panic!("opened with {n} of 200 acknowledged rows after the WAL lost its tail");
            }
        }
    });
}
