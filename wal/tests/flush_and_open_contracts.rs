//! The small contracts of opening and flushing: a flush past the insert
//! position is the caller's error, reopening continues the log and its chain,
//! bad configurations are refused, and after a failed write the log refuses
//! further writes instead of pretending.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{payload_record, read_from, small_segments, within, writer_made_segments};
use wal::segment::wal_dir;
use wal::sim_disk::{Fault, FaultKind, FaultOp, FileClass, SimDisk};
use wal::{EndReason, ErrorKind, Lsn, Wal, WalConfig, WalError};

#[test]
fn flushing_past_the_insert_position_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), small_segments()).unwrap();
    let (_, end) = wal.insert(&payload_record(1, 10)).unwrap();
    let e = wal.flush(Lsn(end.0 + 1)).unwrap_err();
    assert!(matches!(e, WalError::FlushPastEnd { .. }), "{e}");
    assert_eq!(e.kind(), ErrorKind::BadInput);
    wal.flush(end).unwrap();
    assert!(!wal.needs_flush(end));
    assert!(wal.needs_flush(Lsn(end.0 + 1)));
}

#[test]
fn reopening_continues_the_log_and_its_chain() {
    within(Duration::from_secs(30), || {
        let dir = tempfile::tempdir().unwrap();
        let mut last_start = None;
        for session in 0..4u64 {
            let wal = Wal::open(dir.path(), small_segments()).unwrap();
            assert_eq!(wal.startup().records, session * 25);
            assert_eq!(wal.startup().last_record, last_start);
            let expected_reason = if session == 0 {
                EndReason::CleanEnd
            } else {
                EndReason::ZeroedTail
            };
            assert_eq!(wal.startup().end.reason, expected_reason);
            for i in 0..25 {
                last_start = Some(
                    wal.insert(&payload_record(session * 100 + i + 1, 300))
                        .unwrap()
                        .0,
                );
            }
            // No explicit flush: dropping the log flushes it.
        }
        let (records, end) =
            read_from(dir.path(), Lsn::ZERO, small_segments().segment_size).unwrap();
        assert_eq!(records.len(), 100);
        assert_eq!(end.reason, EndReason::ZeroedTail);
    });
}

#[test]
fn invalid_configurations_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for config in [
        WalConfig {
            segment_size: 3 << 20,
            ..WalConfig::default()
        },
        WalConfig {
            segment_size: 4096,
            ..WalConfig::default()
        },
        WalConfig {
            buffer_size: 100,
            ..WalConfig::default()
        },
    ] {
        let e = Wal::open(dir.path(), config.clone()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadInput, "{config:?}: {e}");
    }
}

#[test]
fn reopening_with_another_segment_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), small_segments()).unwrap();
    // Fill two small segments so the second is named 0000000000010000.
    while wal.insert_lsn().0 < 2 * small_segments().segment_size {
        wal.insert(&payload_record(1, 1000)).unwrap();
    }
    wal.close().unwrap();
    let e = Wal::open(dir.path(), WalConfig::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CorruptData, "{e}");
    assert!(e.to_string().contains("another segment size"), "{e}");
}

#[test]
fn after_a_failed_write_the_log_refuses_further_writes() {
    within(Duration::from_secs(30), || {
        let dir = tempfile::tempdir().unwrap();
        let disk = Arc::new(SimDisk::new());
        let wal = Wal::open_with_fs(dir.path(), writer_made_segments(), disk.clone()).unwrap();
        let (_, end) = wal.insert(&payload_record(1, 100)).unwrap();
        wal.flush(end).unwrap();
        // The next write of a segment fails (a failed open or creation of a
        // segment loses nothing and is retried: see
        // `out_of_descriptors_is_retryable_not_fatal`).
        disk.inject(Fault::next(FileClass::Wal, FaultOp::Write, FaultKind::Eio));
        let (_, last) = wal.insert(&payload_record(2, 1000)).unwrap();
        let e = wal.flush(last).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io);
        assert!(
            e.to_string().contains("0000000000000000"),
            "names the segment: {e}"
        );
        let e = wal.flush(last).unwrap_err();
        assert!(matches!(e, WalError::WritesRefused(_)), "{e}");
        let e = wal.insert(&payload_record(3, 10)).unwrap_err();
        assert!(matches!(e, WalError::WritesRefused(_)), "{e}");
        assert_eq!(wal.flushed_lsn(), end);
    });
}

/// A segment that cannot be created (its directory is gone) fails the
/// flush that needed it, naming the segment; nothing was written, so the log
/// does not refuse later writes: the records wait in the buffer and the
/// flush succeeds once the directory is back. (A failed write or fdatasync
/// does make it refuse: the engine's injected-fault tests.)
#[test]
fn a_segment_that_cannot_be_created_fails_the_flush_and_loses_nothing() {
    within(Duration::from_secs(30), || {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::open(dir.path(), writer_made_segments()).unwrap();
        let (_, end) = wal.insert(&payload_record(1, 100)).unwrap();
        wal.flush(end).unwrap();
        // Take the WAL directory away: the next segment cannot be created.
        std::fs::remove_dir_all(wal_dir(dir.path())).unwrap();
        let mut last = end;
        while last.0 <= small_segments().segment_size {
            last = wal.insert(&payload_record(2, 1000)).unwrap().1;
        }
        let e = wal.flush(last).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io);
        assert!(
            e.to_string().contains("0000000000010000"),
            "names the segment: {e}"
        );
        let e = wal.flush(last).unwrap_err();
        assert!(!matches!(e, WalError::WritesRefused(_)), "{e}");
        assert_eq!(wal.refusing(), None);
        assert_eq!(wal.flushed_lsn(), end);
        // The directory back (empty: the first segment is gone with it, so
        // only the log's own open segment still holds the early records).
        std::fs::create_dir_all(wal_dir(dir.path())).unwrap();
        wal.flush(last).unwrap();
        assert_eq!(wal.flushed_lsn(), last);
        wal.insert(&payload_record(3, 10)).unwrap();
        wal.flush_all().unwrap();
    });
}

#[test]
fn debug_output_of_a_busy_log_stays_short() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Wal::open(dir.path(), small_segments()).unwrap();
    for i in 0..100 {
        wal.insert(&payload_record(i + 1, 1000)).unwrap();
    }
    let text = format!("{wal:?}");
    assert!(text.len() < 4000, "{} bytes of Debug output", text.len());
    assert!(text.contains("buffered"));
}
