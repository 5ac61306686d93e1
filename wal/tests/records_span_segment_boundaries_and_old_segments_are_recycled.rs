//! Segments: records (full-page images here) cross segment boundaries freely
//! and read back intact; `recycle_before` removes exactly the segments that lie
//! wholly before a position; afterwards the log opens from a record after it
//! but not from the origin. A log that ends exactly at a segment boundary
//! has the segment that starts there, so deleting it is an error.

mod common;

use std::time::Duration;

use common::{page, read_from, segment_files, small_segments, tag, within, writer_made_segments};
use wal::segment::{SegmentSize, parse_segment_file_name};
use wal::{BlockRef, ErrorKind, Hole, Lsn, MIN_SEGMENT_SIZE, Record, RmgrKind, Wal, WalError};

const SEG: u64 = MIN_SEGMENT_SIZE;

fn image_record(i: u32) -> Record {
    // Holes of varying size make record lengths vary, so boundaries fall at
    // every kind of place: in headers, block references, images, payloads.
    let hole = Hole::between(
        64 + (i as usize * 37) % 500,
        4096 + (i as usize * 101) % 3000,
    )
    .unwrap();
    Record::builder(RmgrKind::FullPage, 0, i as u64)
        .block(BlockRef::with_image(tag(1, i), &page(i), hole).unwrap())
        .payload(vec![i as u8; (i as usize * 13) % 90])
        .build()
        .unwrap()
}

#[test]
fn records_crossing_segment_boundaries_read_back_intact() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::open(dir.path(), small_segments()).unwrap();
        let mut inserted = Vec::new();
        for i in 0..300 {
            let rec = image_record(i);
            let (start, end) = wal.insert(&rec).unwrap();
            inserted.push((start, end, rec));
        }
        wal.flush_all().unwrap();
        let crossing = inserted
            .iter()
            .filter(|(s, e, _)| s.0 / SEG != (e.0 - 1) / SEG)
            .count();
        assert!(crossing >= 10, "only {crossing} records cross a boundary");
        // Every segment holding a byte, and the one holding the end; and
        // perhaps the one after it, made ahead in the background.
        let needed = inserted.last().unwrap().1.0 / SEG + 1;
        let stats = wal.stats();
        assert!(
            (needed..=needed + 1).contains(&stats.segments_created),
            "{} segments created for {needed}",
            stats.segments_created
        );
        assert!(stats.segments_created - stats.segments_preallocated <= needed);

        let (records, end) = read_from(dir.path(), Lsn::ZERO, SEG).unwrap();
        assert_eq!(records.len(), inserted.len());
        for ((lsn, got), (start, _, want)) in records.iter().zip(&inserted) {
            assert_eq!(lsn, start);
            assert_eq!(got.blocks(), want.blocks());
            assert_eq!(got.payload(), want.payload());
            assert_eq!(
                got.restore_page(0).unwrap()[..64],
                page(got.xid() as u32)[..64]
            );
        }
        assert_eq!(end.lsn, wal.insert_lsn());
    });
}

#[test]
fn recycle_before_removes_only_segments_wholly_before_the_position() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        // Counts the files of the WAL directory while the log is open.
        let wal = Wal::open(dir.path(), writer_made_segments()).unwrap();
        let places: Vec<(Lsn, Lsn)> = (0..100)
            .map(|i| wal.insert(&image_record(i)).unwrap())
            .collect();

        // Not flushed yet: refusing to remove WAL that is not durable.
        let keep_from = places[60].0;
        let e = wal.recycle_before(keep_from).unwrap_err();
        assert!(matches!(e, WalError::RecyclePastFlush { .. }), "{e}");
        assert_eq!(e.kind(), ErrorKind::BadInput);

        wal.flush_all().unwrap();
        let before = segment_files(dir.path()).len();
        let size = SegmentSize::new(SEG).unwrap();
        let removed = wal.recycle_before(keep_from).unwrap();
        assert_eq!(removed as u64, size.segment_start(keep_from).0 / SEG);
        let left: Vec<Lsn> = segment_files(dir.path())
            .iter()
            .map(|p| parse_segment_file_name(p.file_name().unwrap().to_str().unwrap()).unwrap())
            .collect();
        assert_eq!(left.len(), before - removed);
        assert_eq!(left[0], size.segment_start(keep_from));
        // Nothing more to remove at the same position.
        assert_eq!(wal.recycle_before(keep_from).unwrap(), 0);

        // The log still grows after recycling.
        let (last_start, last_end) = wal.insert(&image_record(100)).unwrap();
        wal.flush(last_end).unwrap();
        drop(wal);

        let (records, _) = read_from(dir.path(), keep_from, SEG).unwrap();
        assert_eq!(records.len(), 41);
        assert_eq!(records.last().unwrap().0, last_start);

        // The origin is gone: opening from it is refused with a clear error;
        // opening from a record after the recycled point works.
        let e = Wal::open(dir.path(), small_segments()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadInput);
        assert!(e.to_string().contains("recycled"), "{e}");
        let wal = Wal::open_from(dir.path(), small_segments(), keep_from).unwrap();
        assert_eq!(wal.startup().records, 41);
        assert_eq!(wal.startup().last_record, Some(last_start));
        assert_eq!(wal.insert_lsn(), last_end);
    });
}

#[test]
fn open_from_a_position_where_no_record_starts_is_refused() {
    within(Duration::from_secs(30), || {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::open(dir.path(), small_segments()).unwrap();
        let (_, end) = wal.insert(&image_record(1)).unwrap();
        wal.close().unwrap();
        let e = Wal::open_from(dir.path(), small_segments(), Lsn(end.0 + 1000)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadInput);
        assert!(
            e.to_string().contains("no valid record starts there"),
            "{e}"
        );
    });
}

#[test]
fn a_flush_whose_write_crosses_a_boundary_fdatasyncs_both_segments() {
    within(Duration::from_secs(30), || {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::open(dir.path(), small_segments()).unwrap();
        while wal.insert_lsn().0 < SEG - 200 {
            wal.insert(&common::payload_record(1, 150)).unwrap();
        }
        wal.flush_all().unwrap();
        let before = wal.stats();
        let (start, end) = wal.insert(&common::payload_record(2, 400)).unwrap();
        assert!(start.0 < SEG && end.0 > SEG);
        wal.flush(end).unwrap();
        let after = wal.stats();
        assert_eq!(after.fsyncs - before.fsyncs, 2, "both segments synced");
        assert_eq!(after.writes - before.writes, 2, "one pwrite per segment");
        // The second segment was made by this flush or ahead of it.
        assert!(
            segment_files(dir.path())
                .iter()
                .any(|p| p.ends_with("0000000000010000"))
        );
        // Later flushes sync only the new segment.
        let (_, end) = wal.insert(&common::payload_record(3, 10)).unwrap();
        wal.flush(end).unwrap();
        assert_eq!(wal.stats().fsyncs - after.fsyncs, 1);
    });
}

fn heap_record(xid: u64, payload_len: usize) -> Record {
    Record::builder(RmgrKind::Heap, 0, xid)
        .payload(vec![7; payload_len])
        .build()
        .unwrap()
}

/// Before: a flush ending exactly at a segment boundary did not create the
/// next segment, so a crash there and that segment deleted looked alike, and
/// the deleted segment's records were cut off without an error.
#[test]
fn a_log_ending_at_a_segment_boundary_has_the_next_segment_and_its_deletion_is_an_error() {
    within(Duration::from_secs(30), || {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::open(dir.path(), small_segments()).unwrap();
        let (s, e) = wal.insert(&heap_record(1, 100)).unwrap();
        let overhead = (e.0 - s.0) as usize - 100;
        while wal.insert_lsn().0 < SEG - 2000 {
            wal.insert(&heap_record(2, 500)).unwrap();
        }
        let fill = (SEG - wal.insert_lsn().0) as usize - overhead;
        let (_, end) = wal.insert(&heap_record(3, fill)).unwrap();
        assert_eq!(end, Lsn(SEG), "the last record ends at the boundary");
        wal.flush(end).unwrap();
        let next = wal::segment::segment_path(&wal::segment::wal_dir(dir.path()), Lsn(SEG));
        assert!(next.exists(), "the segment starting at the end was created");
        wal.close().unwrap();

        let (records, end) = read_from(dir.path(), Lsn::ZERO, SEG).unwrap();
        assert_eq!(end.lsn, Lsn(SEG));
        assert_eq!(records.last().unwrap().1.xid(), 3);

        std::fs::remove_file(&next).unwrap();
        let e = Wal::open(dir.path(), small_segments()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::CorruptData, "{e}");
        assert!(e.to_string().contains(&next.display().to_string()), "{e}");
        assert!(e.to_string().contains("is missing"), "{e}");
    });
}
