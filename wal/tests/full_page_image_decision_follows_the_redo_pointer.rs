//! The full-page-write decision for ordinary changes: a page needs an image
//! with its first change after the redo point (`page LSN <= redo`), and
//! `insert_unless_image_needed` refuses a record built without an image when
//! a checkpoint moved the redo point past the page between the decision and
//! the insert (PostgreSQL's recheck in `XLogInsertRecord`).

mod common;

use std::io;
use std::time::Duration;

use common::{payload_record, small_segments, within};
use wal::{Lsn, Wal, WalConfig};

#[test]
fn decision_follows_the_redo_pointer_and_the_race_with_a_checkpoint_is_closed() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::open(dir.path(), small_segments()).unwrap();
        assert!(wal.full_page_writes());
        assert_eq!(wal.redo_lsn(), Lsn::ZERO);
        assert!(wal.needs_full_page_image(Lsn::ZERO), "a never-logged page");

        // A page last logged by this record needs no image...
        let (_, page_lsn) = wal.insert(&payload_record(1, 50)).unwrap();
        assert!(!wal.needs_full_page_image(page_lsn));
        // ...so the caller builds a record without one, but a checkpoint
        // takes its redo point before the insert: the insert is refused.
        let info = wal.checkpoint(|_| Ok::<_, io::Error>(()), 1).unwrap();
        assert!(info.redo_lsn >= page_lsn);
        let records = wal.stats().records;
        let refused = wal
            .insert_unless_image_needed(&payload_record(2, 50), page_lsn)
            .unwrap();
        assert_eq!(refused, None);
        assert_eq!(wal.stats().records, records, "nothing inserted");
        assert!(wal.needs_full_page_image(page_lsn), "decide again: image");

        // A page logged after the redo point passes.
        let (_, later) = wal.insert(&payload_record(3, 50)).unwrap();
        assert!(!wal.needs_full_page_image(later));
        let ok = wal
            .insert_unless_image_needed(&payload_record(4, 50), later)
            .unwrap();
        assert!(ok.is_some());
    });
}

#[test]
fn with_full_page_writes_off_nothing_needs_an_image() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        full_page_writes: false,
        ..small_segments()
    };
    let wal = Wal::open(dir.path(), config).unwrap();
    wal.checkpoint(|_| Ok::<_, io::Error>(()), 1).unwrap();
    assert!(!wal.needs_full_page_image(Lsn::ZERO));
    assert!(
        wal.insert_unless_image_needed(&payload_record(1, 10), Lsn::ZERO)
            .unwrap()
            .is_some()
    );
}
