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

/// With full-page writes off, a `force_full_page_writes` guard (an online
/// backup's) turns images on until it is dropped, including the recheck
/// under the insert lock: a record built without an image, before the
/// guard existed, is refused once a checkpoint taken under the guard moved
/// the redo point past its page.
#[test]
fn forcing_full_page_writes_turns_images_on_until_the_guard_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let config = WalConfig {
        full_page_writes: false,
        ..small_segments()
    };
    let wal = Wal::open(dir.path(), config).unwrap();
    let (_, page_lsn) = wal.insert(&payload_record(1, 50)).unwrap();
    // Decided without the guard: no image.
    assert!(!wal.needs_full_page_image(page_lsn));
    let guard = wal.force_full_page_writes();
    assert!(wal.full_page_writes());
    let nested = wal.force_full_page_writes();
    wal.checkpoint(|_| Ok::<_, io::Error>(()), 1).unwrap();
    assert_eq!(
        wal.insert_unless_image_needed(&payload_record(2, 50), page_lsn)
            .unwrap(),
        None,
        "the stale decision is refused"
    );
    assert!(wal.needs_full_page_image(page_lsn));
    drop(nested);
    assert!(wal.needs_full_page_image(page_lsn), "one guard still lives");
    drop(guard);
    assert!(!wal.full_page_writes());
    assert!(!wal.needs_full_page_image(page_lsn));
    assert!(
        wal.insert_unless_image_needed(&payload_record(3, 50), page_lsn)
            .unwrap()
            .is_some()
    );
}
